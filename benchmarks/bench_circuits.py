"""Circuits against eager calls: time per operation inside one compiled circuit and through the eager API, compile
time cold and warm, and the first run of a fresh process with a cold and a warm cache.

    python benchmarks/bench_circuits.py [--quick] [--json PATH] [--threads 2] [--reps 10] [--gpu-targets]

Workloads (``crossfhe.api``):

- ``readme``: the README's CKKS example as a circuit, N14_L7: ``x * y + 0.5 * x - 2, x @ y, x.rotate(1)`` on 1000
  values. Peer: the same task in TenSEAL (``pip install tenseal``), a fresh process each, end to end.
- ``poly7``: a degree-7 polynomial (sigmoid(8 t) on [-1, 1]) by Horner's rule (depth 7), N14_L7, 8192 values.
- ``inner``: an inner product with rotations (``x @ y``: one product, log2(4096) = 12 rotations), N14_L7.
- ``tfhe16``: :func:`crossfhe.apps.tfhe_ml.sixteen_lookups`, 16 lookups sharing two inputs, P4.
- ``--gpu-targets``: the issue's accelerator targets, on whatever device runs this: 64 HE-Adds inside one circuit at
  N14_L7 (per add), and 4 HE-Mult+relin+rescale at N16_L21_DNUM3 (per product).

Per workload: ``circuit_ms`` (median run of the compiled circuit on encrypted inputs), ``eager_ms`` (the same
function on :class:`crossfhe.EncryptedVector` operands, or for TFHE the same lookups through ``tfhe.ops``), their
ratio, the operation counts, and from fresh processes: ``cold_s`` / ``warm_s`` (wall time of a process that compiles
the circuit, makes keys, encrypts, runs and decrypts, with an empty and then a filled cache directory) and the
phases of the warm one. The target: the README circuit in a fresh process with a warm cache in at most 5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", type=Path, default=None, help="write the JSON records here")
    p.add_argument("--threads", type=int, default=2, help="CPUs to run on")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--quick", action="store_true", help="readme and inner only, fewer repetitions")
    p.add_argument("--gpu-targets", action="store_true", help="also the HE-Add and N16 product chains")
    p.add_argument("--workloads", default=None, help="comma-separated subset")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    return p.parse_args()


# --------------------------------------------------------------------------------------------------
# Workloads
# --------------------------------------------------------------------------------------------------

POLY7 = [0.5, 1.7349, 0.0, -4.1923, 0.0, 5.4284, 0.0, -2.5029]
"""The odd least-squares degree-7 fit of sigmoid(8 t) on [-1, 1] (largest error 0.032): a logistic regression's
activation on inputs scaled into [-1, 1] (Horner's rule multiplies the error by |t| per step)."""


def readme(x, y):
    return x * y + 0.5 * x - 2, x @ y, x.rotate(1)


def poly7(x):
    acc = POLY7[-1] * x
    for c in reversed(POLY7[1:-1]):
        acc = (acc + c) * x
    return acc + POLY7[0]


def inner(x, y):
    return x @ y


def adds64(x, y):
    acc = x
    for _ in range(32):
        acc = acc + y
        acc = acc - x
    return acc


def mults4(x, y):
    for _ in range(4):
        x = x * y
    return x


def _spec(name):
    """(fn, specs, params name, input values) of a workload."""
    import numpy as np

    from crossfhe.api import CKKSVector, TFHEInt

    rng = np.random.default_rng(0)
    if name == "readme":
        return readme, (CKKSVector(1000), CKKSVector(1000)), "N14_L7", (np.linspace(-1, 1, 1000),
                                                                         np.cos(np.arange(1000)))
    if name == "poly7":
        return poly7, (CKKSVector(8192),), "N14_L7", (rng.uniform(-1, 1, 8192),)
    if name == "inner":
        return inner, (CKKSVector(4096), CKKSVector(4096)), "N14_L7", (rng.uniform(-1, 1, 4096),
                                                                        rng.uniform(-1, 1, 4096))
    if name == "adds64":
        return adds64, (CKKSVector(8192), CKKSVector(8192)), "N14_L7", (rng.uniform(-1, 1, 8192),
                                                                         rng.uniform(-1, 1, 8192))
    if name == "mults4":
        return mults4, (CKKSVector(8), CKKSVector(8)), "N16_L21_DNUM3", (rng.uniform(-1, 1, 8),
                                                                          rng.uniform(-1, 1, 8))
    if name == "tfhe16":
        from crossfhe.apps import tfhe_ml

        return tfhe_ml.sixteen_lookups, (TFHEInt(4), TFHEInt(4)), "P4", (np.arange(16) % 16, (np.arange(16) * 7) % 16)
    raise SystemExit(f"unknown workload {name}")


def _params(name: str):
    from crossfhe.ckks import presets as ckks_presets
    from crossfhe.tfhe import presets as tfhe_presets

    return getattr(ckks_presets, name, None) or getattr(tfhe_presets, name)


def _reference(name, values):
    import numpy as np

    if name == "readme":
        a, b = values
        return [a * b + 0.5 * a - 2, np.full(1000, a @ b), np.append(a[1:], 0.0)]
    if name == "poly7":
        return [np.polyval(POLY7[::-1], values[0])]
    if name == "inner":
        return [np.full(4096, values[0] @ values[1])]
    if name == "adds64":
        return [values[1] * 32 - values[0] * 31]
    if name == "mults4":
        return [values[0] * values[1] ** 4]
    if name == "tfhe16":
        from crossfhe.apps import tfhe_ml

        return list(tfhe_ml.sixteen_lookups_reference(*values))
    return None


# --------------------------------------------------------------------------------------------------
# A fresh process: compile, keys, encrypt, run, decrypt
# --------------------------------------------------------------------------------------------------


def child(name: str) -> None:
    t0 = time.perf_counter()
    import jax
    import numpy as np

    import crossfhe

    t1 = time.perf_counter()
    fn, specs, pname, values = _spec(name)
    circuit = crossfhe.compile(fn, *specs, params=_params(pname))
    t2 = time.perf_counter()
    circuit.keygen()
    t3 = time.perf_counter()
    ins = circuit.encrypt(*values)
    t4 = time.perf_counter()
    outs = jax.block_until_ready(circuit.run(*ins))
    t5 = time.perf_counter()
    got = circuit.decrypt(*outs)
    t6 = time.perf_counter()
    got = got if isinstance(got, list) else [got]
    ref = _reference(name, values)
    err = max(float(np.abs(g - r).max()) for g, r in zip(got, ref)) if ref else None
    print(json.dumps({"import_s": t1 - t0, "compile_s": t2 - t1, "keygen_s": t3 - t2, "encrypt_s": t4 - t3,
                      "first_run_s": t5 - t4, "decrypt_s": t6 - t5, "total_s": t6 - t0, "max_error": err,
                      "sources": circuit.timings.get("sources")}))


def tenseal_child() -> None:
    """The README task in TenSEAL: N 2^14, depth-1 chain, Galois keys, encrypt two vectors of 1000, the same three
    results, decrypt."""
    t0 = time.perf_counter()
    import numpy as np
    import tenseal as ts

    ctx = ts.context(ts.SCHEME_TYPE.CKKS, 16384, coeff_mod_bit_sizes=[60, 40, 40, 40, 40, 40, 40, 40, 60])
    ctx.global_scale = 2**40
    ctx.generate_galois_keys()
    a, b = np.linspace(-1, 1, 1000), np.cos(np.arange(1000))
    x, y = ts.ckks_vector(ctx, a), ts.ckks_vector(ctx, b)
    z = (x * y + x * 0.5 - 2).decrypt()
    ip = x.dot(y).decrypt()
    err = max(float(np.abs(np.array(z) - (a * b + 0.5 * a - 2)).max()), abs(ip[0] - a @ b))
    print(json.dumps({"total_s": time.perf_counter() - t0, "max_error": err}))


def _fresh(name: str, cache: Path, threads: int) -> dict:
    env = dict(os.environ, CROSSFHE_CACHE_DIR=str(cache))
    env.pop("CROSSFHE_JAX_CACHE", None)  # the XLA cache under CROSSFHE_CACHE_DIR too, so "cold" means cold
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", name, "--threads", str(threads)]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError(f"{name} child failed:\n{res.stderr[-3000:]}")
    out = json.loads(res.stdout.strip().splitlines()[-1])
    out["wall_s"] = wall
    return out


# --------------------------------------------------------------------------------------------------
# In-process: circuit against eager
# --------------------------------------------------------------------------------------------------


def _median_ms(fn, reps: int) -> tuple[float, float, float]:
    import jax

    jax.block_until_ready(fn())
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), min(times), max(times)


def _eager_ckks(fn, circuit, values):
    from crossfhe import CKKSContext

    rotations = circuit.requirements["rotations"]
    ctx = CKKSContext.create(circuit.params, rotations=rotations)
    xs = [ctx.encrypt(v) for v in values]

    def run():
        out = fn(*xs)
        out = out if isinstance(out, tuple) else (out,)
        return [o.ct.c0.data for o in out]

    return run


def _eager_tfhe(circuit, values):
    from crossfhe.apps import tfhe_ml
    from crossfhe.tfhe import ops

    ck, sk = ops.keygen(circuit.params)
    xs = [ops.encrypt(ck, v) for v in values]
    return lambda: [o.b for o in tfhe_ml.sixteen_lookups_eager(sk, *xs)]


def ntt_ms_per_limb(params, reps: int) -> float:
    """Median time of one limb's forward NTT at the parameters' N on their kernel set (a transform of all L+K
    limbs at once, divided by their number): the unit of the floor."""
    import jax
    import numpy as np

    from crossfhe.ring.ntt import NTTPlan, ntt

    params = params.with_kernels(params.kernels.resolve())
    moduli = params.q + params.p
    plan = NTTPlan.create(params.n, moduli, params.kernels)
    rng = np.random.default_rng(0)
    x = jax.device_put(np.stack([rng.integers(0, q, params.n, dtype=np.uint64) for q in moduli]).astype(np.uint32))
    f = jax.jit(ntt)
    med, _, _ = _median_ms(lambda: f(x, plan), max(reps, 10))
    return med / len(moduli)


def measure(name: str, reps: int, threads: int) -> dict:
    import crossfhe

    fn, specs, pname, values = _spec(name)
    params = _params(pname)
    t0 = time.perf_counter()
    circuit = crossfhe.compile(fn, *specs, params=params, cache=False)
    trace_s = time.perf_counter() - t0
    circuit.keygen()
    ins = circuit.encrypt(*values)
    t0 = time.perf_counter()
    import jax

    jax.block_until_ready(circuit.run(*ins))
    first_s = time.perf_counter() - t0
    med, lo, hi = _median_ms(lambda: [o.leaves[0] for o in circuit.run(*ins)], reps)
    eager = _eager_tfhe(circuit, values) if name == "tfhe16" else _eager_ckks(fn, circuit, values)
    t0 = time.perf_counter()
    jax.block_until_ready(eager())
    eager_first_s = time.perf_counter() - t0
    emed, elo, ehi = _median_ms(eager, reps)
    cost = circuit.cost
    floor = None
    if "ntt_limbs" in cost:  # CKKS: the limb transforms alone, at the measured rate of one
        floor = cost["ntt_limbs"] * ntt_ms_per_limb(params, reps)
    return {"suite": "circuits", "name": name, "params": {"preset": pname}, "median_ms": med, "min_ms": lo,
            "max_ms": hi, "reps": reps, "eager_median_ms": emed, "eager_min_ms": elo, "eager_max_ms": ehi,
            "ratio": med / emed, "trace_s": trace_s, "first_run_s": first_s, "eager_first_run_s": eager_first_s,
            "cost": cost, "report": circuit.report, "device": jax.default_backend(), "jax": jax.__version__,
            "threads": threads, "kernels": getattr(circuit.scheme.kernels(circuit.params), "name", "?"),
            "per_op_ms": med / PER_OP.get(name, 1) if name in PER_OP else None,
            "peer": None, "floor_ms": floor, "note": "floor: the circuit's NTT limbs at the measured rate of one"
            if floor else ""}


PER_OP = {"adds64": 64, "mults4": 4}
"""Operations per circuit of the target chains (per_op_ms = median / this)."""


def main(args) -> None:
    from crossfhe.cli.benchutil import load_average, write_json

    names = ["readme", "inner"] if args.quick else ["readme", "poly7", "inner", "tfhe16"]
    if args.gpu_targets:
        names += ["adds64", "mults4"]
    if args.workloads:
        names = args.workloads.split(",")
    reps = 3 if args.quick else args.reps
    records = []
    for name in names:
        rec = measure(name, reps, args.threads)
        cache = Path(tempfile.mkdtemp(prefix="crossfhe-bench-"))
        try:
            cold = _fresh(name, cache, args.threads)
            warm = _fresh(name, cache, args.threads)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        rec.update(cold_s=cold["wall_s"], warm_s=warm["wall_s"], warm_phases=warm, cold_phases=cold,
                   load=load_average())
        if name == "readme":
            try:
                import tenseal  # noqa: F401

                ts = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", "tenseal"],
                                    capture_output=True, text=True, timeout=600)
                peer = json.loads(ts.stdout.strip().splitlines()[-1])
                rec.update(peer="tenseal", peer_fresh_s=peer["total_s"], peer_max_error=peer["max_error"])
            except ImportError:
                rec["note"] = "tenseal not installed: no peer"
        records.append(rec)
    print()
    head = (f"{'workload':<9} {'circuit ms':>11} {'eager ms':>9} {'ratio':>6} {'floor ms':>9} {'/floor':>7} "
            f"{'first run s':>12} {'cold s':>7} {'warm s':>7} {'peer s':>7}  counts")
    print(head)
    for r in records:
        counts = ", ".join(f"{k}={v}" for k, v in r["cost"].items())
        peer = f"{r['peer_fresh_s']:>7.2f}" if r.get("peer_fresh_s") else f"{'-':>7}"
        fl = (f"{r['floor_ms']:>9.2f} {r['median_ms'] / r['floor_ms']:>7.2f}" if r["floor_ms"] else
              f"{'-':>9} {'-':>7}")
        print(f"{r['name']:<9} {r['median_ms']:>11.2f} {r['eager_median_ms']:>9.2f} {r['ratio']:>6.2f} {fl} "
              f"{r['first_run_s']:>12.2f} {r['cold_s']:>7.2f} {r['warm_s']:>7.2f} {peer}  {counts}")
    for r in records:
        if r.get("per_op_ms"):
            what = "HE-Add" if r["name"] == "adds64" else "HE-Mult+relin+rescale"
            print(f"{r['name']}: {r['per_op_ms'] * 1e3:.1f} us per {what} inside the circuit ({r['device']})")
    print()
    for r in records:
        w = r["warm_phases"]
        print(f"{r['name']:<9} warm process: import {w['import_s']:.2f} s, compile {w['compile_s']:.2f}, keygen "
              f"{w['keygen_s']:.2f}, encrypt {w['encrypt_s']:.2f}, first run {w['first_run_s']:.2f}, decrypt "
              f"{w['decrypt_s']:.2f}, wall {w['wall_s']:.2f}; sources {w['sources']}; max error {w['max_error']}")
    print()
    for r in records:
        print(f"{r['name']}: counts per pass")
        keys = sorted({k for _, c in r["report"] for k in c})
        print(f"  {'pass':<20}" + "".join(f" {k:>{max(6, len(k))}}" for k in keys))
        for pname, c in r["report"]:
            print(f"  {pname:<20}" + "".join(f" {c.get(k, '-'):>{max(6, len(k))}}" for k in keys))
    if args.json:
        write_json(records, args.json)


if __name__ == "__main__":
    ARGS = _parse()
    from crossfhe.cli.benchutil import pin_threads

    pin_threads(ARGS.threads)
    if ARGS.child == "tenseal":
        tenseal_child()
    elif ARGS.child:
        child(ARGS.child)
    else:
        main(ARGS)
