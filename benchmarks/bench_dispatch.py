"""Dispatch overhead of an eager operation: one CKKS HE-Add through the library against the same words added by
one bare jitted program, and against the memory floor of the data it moves; and each CKKS operation called
eagerly against the same call inside a user's ``jax.jit``.

    python benchmarks/bench_dispatch.py [--json PATH] [--threads 1] [--reps 200] [--presets ...] [--eager-vs-jit P]

For each preset (N 2^12 to 2^16): ``x + y`` = the front end's HE-Add (two :class:`crossfhe.EncryptedVector`);
``library`` = ``ckks.ops.add(ct, ct2)`` (parameter and key-id checks, the one
program of crossfhe.core.evaluator, the result wrapped in a Ciphertext), ``bare`` = ``jax.jit(add_mod)`` on the four
arrays (the same program with no library Python), ``floor`` = the bytes an add moves (read two ciphertexts, write
one) at the bandwidth of one fused elementwise pass over the same arrays measured in the same run. Reported:
medians in us, library - bare (the library's own Python per call), library / floor. No peer: SEAL's and OpenFHE's
HE-Add are in bench_ckks.py.

``--eager-vs-jit`` (default N16_L21_DNUM3; "" to skip): HE-Add, HE-Mult+relin, rescale, HE-Mult+relin+rescale and
rotate at that preset, each timed eagerly (``ops.mul(x, y, ek)``) and as ``jax.jit(lambda x, y: ops.mul(x, y, ek))``
(median of at least 10 calls after a warm-up); the ratio eager / jit is what the library's one-program-per-operation
design should keep near 1 (issue 25 asks at most 1.2 on a GPU).

``--tfhe`` (default P4_128; "" to skip): one lookup through the front end (``EncryptedInt.apply``, a one-node
circuit's program) against the same bootstrap through ``crossfhe.tfhe.ops.pbs`` (the eager kernel), on one integer
and on batches of 2 and 8 (median of ``--reps`` / 10, at least 10, after a warm-up); the ratio front end / ops
should stay near 1. It was 4.1 on one integer before the front end picked the key switch's key for the whole batch
(benchmarks/README.md, "Serving").
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", type=Path, default=None, help="write the JSON records here")
    p.add_argument("--threads", type=int, default=1, help="CPUs to run on")
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--presets", default="N12_L1,N13_L3,N14_L7,N15_L19,N16_L21_DNUM3")
    p.add_argument("--eager-vs-jit", default="N16_L21_DNUM3", help="preset of the eager-against-jit table")
    p.add_argument("--tfhe", default="P4_128", help="TFHE preset of the lookup table (front end against ops.pbs)")
    return p.parse_args()


from crossfhe.cli.benchutil import load_average, pin_threads, write_json  # noqa: E402
from crossfhe.runtime import keep_heap  # noqa: E402

ARGS = _parse() if __name__ == "__main__" else None
if ARGS is not None:
    pin_threads(ARGS.threads)
    HEAP_KEPT = keep_heap(reexec=True)

import jax  # noqa: E402
import numpy as np  # noqa: E402

from crossfhe.ckks import ops, presets  # noqa: E402
from crossfhe.kernels import default_kernels  # noqa: E402
from crossfhe.math import random as crandom  # noqa: E402
from crossfhe.math.modular import add_mod  # noqa: E402


def _median_us(fn, reps: int) -> float:
    jax.block_until_ready(fn())
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def run(name: str, reps: int) -> dict:
    p = getattr(presets, name)
    _, ek = ops.keygen(p, seed=bytes(32))
    pt = ops.encode(p, np.ones(8))
    a = ops.encrypt(ek, pt, key=crandom.seed_key(b"a" * 32))
    b = ops.encrypt(ek, pt, key=crandom.seed_key(b"b" * 32))
    q = np.array(a.c0.basis, dtype=np.uint32).reshape(-1, 1)
    bare = jax.jit(lambda x0, x1, y0, y1, q: (add_mod(x0, y0, q), add_mod(x1, y1, q)))
    args = (a.c0.data, a.c1.data, b.c0.data, b.c1.data, q)
    copy = jax.jit(lambda x0, x1, y0, y1: (x0 ^ y0, x1 ^ y1))  # one fused pass, the same bytes, no modular work
    library = _median_us(lambda: ops.add(a, b).c0.data, reps)
    x, y = _front_end_pair(p)
    front = _median_us(lambda: _words(x + y), reps)
    bare_us = _median_us(lambda: bare(*args)[0], reps)
    floor = _median_us(lambda: copy(*args[:4])[0], reps)
    return {"suite": "dispatch", "preset": name, "n": p.n, "limbs": a.c0.limbs, "bytes": 6 * a.c0.data.nbytes,
            "library_us": round(library, 1), "bare_jit_us": round(bare_us, 1), "floor_us": round(floor, 1),
            "library_python_us": round(library - bare_us, 1), "library_over_floor": round(library / floor, 2),
            "front_end_us": round(front, 1), "front_end_python_us": round(front - bare_us, 1)}


def _front_end_pair(p):
    """Two encrypted vectors of the front end (``crossfhe.CKKSContext``) at ``p``: ``x + y`` is the user's HE-Add."""
    from crossfhe import CKKSContext

    ctx = CKKSContext.create(p, seed=bytes(32), progress=None)
    return ctx.encrypt(np.ones(8)), ctx.encrypt(np.ones(8))


def _words(v):
    """The first array of a front-end value (its c0 words), whatever the value class keeps them in."""
    return v.ct.c0.data if hasattr(v, "ct") else jax.tree_util.tree_leaves(v)[0]


def eager_vs_jit(name: str, reps: int) -> list[dict]:
    p = getattr(presets, name)
    _, ek = ops.keygen(p, rotations=(1,), seed=bytes(32))
    rng = np.random.default_rng(0)
    x = ops.encrypt(ek, ops.encode(p, rng.uniform(-1, 1, 8)), key=crandom.seed_key(b"x" * 32))
    y = ops.encrypt(ek, ops.encode(p, rng.uniform(-1, 1, 8)), key=crandom.seed_key(b"y" * 32))
    prod = ops.mul(x, y, ek)
    cases = {
        "he_add": (lambda a, b: ops.add(a, b), (x, y)),
        "he_mult_relin": (lambda a, b: ops.mul(a, b, ek), (x, y)),
        "rescale": (lambda a: ops.rescale(a), (prod,)),
        "mult_relin_rescale": (lambda a, b: ops.rescale(ops.mul(a, b, ek)), (x, y)),
        "rotate": (lambda a: ops.rotate(a, 1, ek), (x,)),
    }
    out = []
    for op, (fn, args) in cases.items():
        jitted = jax.jit(fn)
        eager = _median_us(lambda fn=fn, args=args: fn(*args).c0.data, reps) / 1e3
        user = _median_us(lambda jitted=jitted, args=args: jitted(*args).c0.data, reps) / 1e3
        out.append({"suite": "eager_vs_jit", "preset": name, "op": op, "eager_ms": round(eager, 3),
                    "user_jit_ms": round(user, 3), "ratio": round(eager / user, 2)})
    return out


def tfhe_lookups(name: str, reps: int) -> list[dict]:
    """One lookup through the front end and through ``tfhe.ops.pbs``, at batch shapes (), (2,) and (8,)."""
    from crossfhe.api.tfhe import TFHEContext
    from crossfhe.tfhe import ops as tops
    from crossfhe.tfhe import presets as tpresets

    params = getattr(tpresets, name)
    ctx = TFHEContext.create(params, seed=bytes(32), progress=None)
    table = np.array([(v * v + 3) % (1 << params.message_bits) for v in range(1 << params.message_bits)])
    rows = []
    for shape in ((), (2,), (8,)):
        x = ctx.encrypt(np.ones(shape, dtype=np.int64))
        front = _median_us(lambda x=x: x.apply(table).ct.b, reps) / 1e3
        low = _median_us(lambda x=x: tops.pbs(ctx.public.keys, x.ct, table).b, reps) / 1e3
        assert np.array_equal(x.apply(table).decrypt(), np.full(shape, 4))
        rows.append({"suite": "dispatch", "name": "tfhe_lookup", "preset": name, "shape": list(shape),
                     "front_end_ms": front, "ops_pbs_ms": low, "ratio": front / low, "load": load_average()})
    return rows


def main() -> None:
    records = []
    for name in ARGS.presets.split(","):
        r = run(name.strip(), ARGS.reps)
        r.update(device=jax.devices()[0].platform, kernels=repr(default_kernels()), jax=jax.__version__,
                 threads=ARGS.threads, cpu=platform.processor() or platform.machine(), load=load_average())
        records.append(r)
    print(json.dumps(records, indent=1))
    print(f"{'preset':<16}{'MB':>8}{'library us':>12}{'bare jit us':>13}{'floor us':>10}{'python us':>11}"
          f"{'lib/floor':>11}{'x + y us':>10}")
    for r in records:
        print(f"{r['preset']:<16}{r['bytes'] / 1e6:>8.2f}{r['library_us']:>12.1f}{r['bare_jit_us']:>13.1f}"
              f"{r['floor_us']:>10.1f}{r['library_python_us']:>11.1f}{r['library_over_floor']:>11.2f}"
              f"{r['front_end_us']:>10.1f}")
    if ARGS.eager_vs_jit:
        rows = eager_vs_jit(ARGS.eager_vs_jit, max(10, ARGS.reps // 10))
        print(json.dumps(rows, indent=1))
        print(f"{'preset':<16}{'op':<20}{'eager ms':>10}{'user jit ms':>13}{'eager/jit':>11}")
        for r in rows:
            print(f"{r['preset']:<16}{r['op']:<20}{r['eager_ms']:>10.3f}{r['user_jit_ms']:>13.3f}{r['ratio']:>11.2f}")
        records += rows
    if ARGS.tfhe:
        rows = tfhe_lookups(ARGS.tfhe, max(10, ARGS.reps // 10))
        print(json.dumps(rows, indent=1))
        print(f"{'preset':<16}{'batch':<10}{'front end ms':>14}{'ops.pbs ms':>12}{'ratio':>8}")
        for r in rows:
            print(f"{r['preset']:<16}{str(tuple(r['shape'])):<10}{r['front_end_ms']:>14.2f}{r['ops_pbs_ms']:>12.2f}"
                  f"{r['ratio']:>8.2f}")
        records += rows
    write_json(records, ARGS.json or HERE / "results" / "dispatch.json")


if __name__ == "__main__":
    main()
