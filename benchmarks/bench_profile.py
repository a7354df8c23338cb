"""Per-operation profile on any device: what each operation launches, how long it takes, and its floor.

    python benchmarks/bench_profile.py [--quick] [--preset N16_L21_DNUM3] [--kernels vector,matrix]
                                       [--ops mul,mul_rescale,rotate,rescale,add] [--batch 8] [--tfhe P4]
                                       [--tfhe-batches 1,256] [--reps 20] [--json PATH] [--traces DIR]
    crossfhe bench profile [same options]

**Rates**, measured first in the same process (``rates`` record): ``hbm`` the device-memory rate of a fused
uint32 pass z = x + 1 over 256 MiB (bytes read plus written per second; 64 MiB on a CPU); ``modmul`` Shoup modular
products per second (:func:`crossfhe.math.modular.shoup_mul`, 32 chained on 2^24 words: the butterfly's product);
``int8`` int8 x int8 -> int32 matmul MACs per second (4096^3; 1024^3 on a CPU); ``fft`` complex128 FFTs of 2^10
points per second (the TFHE blind rotation's transform; P4's N/2), in a batch of 2^12.

**CKKS**, per kernel set and operation, at the preset's top user level (``--ops``; each on fresh random values):

- ``eager_ms``: the median of ``--reps`` blocked calls of the library's operation (``crossfhe.ckks.ops``);
  ``jit_ms`` (``mul_rescale`` only, the issue's reference): the same call inside a user's ``jax.jit``.
- From a profiler trace of 3 more calls (:mod:`crossfhe.testing.trace`): ``executions`` (compiled programs
  dispatched per call), ``kernels`` (device kernels launched per call; 0 on a CPU, whose trace lists none),
  ``kernel_ms`` (their device time), ``copies`` (host-device copies per call) and the ``top`` kernels by time.
- ``batch``: ``--batch`` ciphertexts on a leading axis through ``jax.vmap`` of the operation under one
  ``jax.jit``: ``batch_ms`` and ``ct_per_s``.
- Floor: ``bytes`` = the operands, the key the operation reads and the result, each once (``tables_bytes``, the
  NTT and conversion tables, apart: a kernel may compute twiddles instead of reading them); ``modmuls`` = the
  NTT butterflies ((N/2) log2 N per limb transform, the limb count of ``crossfhe.api.ckks_lower`` cost model) +
  the key products (2 per digit, limb and coefficient) + the tensor product's (4 per limb and coefficient).
  ``floor_ms`` = max(bytes / hbm, modmuls / modmul), ``bound`` names the larger; ``eager / floor`` the gap.

**TFHE** (``--tfhe``, default P4): ``ops.pbs`` (key switch, blind rotation, extraction) at each batch of
``--tfhe-batches``: latency, ``ms_per_pbs``, ``pbs_per_s``, launches and kernels per call from the trace, and a
floor max(bootstrapping-key bytes / hbm, FFTs per bootstrap x batch / fft rate) (FFT count as in
``bench_tfhe.ffts_per_pbs``: n / g steps of (k+1) l forward and k+1 inverse).

Writes JSON (``--json``) and prints a table last. ``--traces DIR`` keeps each profiler trace (Perfetto JSON).
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="INSECURE N 2^11 CKKS and INSECURE_TFHE_P4: a check run")
    p.add_argument("--preset", default="N16_L21_DNUM3", help="CKKS preset (default N16_L21_DNUM3)")
    p.add_argument("--kernels", default="vector", help="comma-separated kernel sets (vector, matrix, native)")
    p.add_argument("--ops", default="mul,mul_rescale,rotate,rescale,add", help="CKKS operations to profile")
    p.add_argument("--matrix-ops", default="mul", help="the operations profiled on the MATRIX set (fewer compiles)")
    p.add_argument("--batch", type=int, default=8, help="ciphertexts in the batched-throughput run (0: none)")
    p.add_argument("--tfhe", default="P4", help="TFHE presets ('' for none)")
    p.add_argument("--tfhe-batches", default="1,256", help="TFHE batch sizes")
    p.add_argument("--tfhe-kernels", default="auto", help="kernel set of the TFHE presets (auto, vector, gpu, ...)")
    p.add_argument("--tfhe-unroll", default="1", help="blind-rotation unroll factors tried at batch 1 (pbs(unroll=))")
    p.add_argument("--reps", type=int, default=20, help="timed calls per measurement")
    p.add_argument("--json", type=Path, default=None, help="write the records here")
    p.add_argument("--traces", type=Path, default=None, help="keep the profiler traces under this folder")
    p.add_argument("--threads", type=int, default=None, help="CPUs to run on (default all)")
    p.add_argument("--no-peer", action="store_true", help="accepted for uniformity: this suite runs no peer")
    return p


ARGS = parser().parse_args() if __name__ == "__main__" else None

from crossfhe.cli.benchutil import enable_compilation_cache, fmt, pin_threads, timeit, write_json  # noqa: E402

if ARGS is not None and ARGS.threads:
    pin_threads(ARGS.threads)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from crossfhe.ckks import ops as C  # noqa: E402
from crossfhe.ckks import presets as CP  # noqa: E402
from crossfhe.core.keyswitch import transform_counts  # noqa: E402
from crossfhe.kernels import as_kernel_set  # noqa: E402
from crossfhe.math.modular import shoup_mul, shoup_precompute  # noqa: E402
from crossfhe.testing import trace  # noqa: E402

RECORDS: list[dict] = []


def _median_ms(fn, reps: int) -> float:
    jax.block_until_ready(fn())
    return statistics.median(timeit(fn, reps=reps, min_seconds=0.0, max_seconds=120.0)) * 1e3


def _nbytes(tree) -> int:
    return sum(int(getattr(x, "nbytes", 0)) for x in jax.tree_util.tree_leaves(tree))


# ---------------------------------------------------------------------------------------------------
# Rates
# ---------------------------------------------------------------------------------------------------


def rates(reps: int) -> dict:
    cpu = jax.default_backend() == "cpu"
    out = {}
    words = (64 if cpu else 256) * 2**20 // 4
    x = jax.device_put(np.random.default_rng(1).integers(1, 2**31, words, dtype=np.uint32))
    inc = jax.jit(lambda v: v + jnp.uint32(1))
    out["hbm_bytes_per_s"] = 8 * words / (_median_ms(lambda: inc(x), reps) / 1e3)
    q = 2**30 - 35  # any odd modulus below 2^31 times the same instructions
    w = np.uint32(123456789 % q)
    ws = shoup_precompute(np.array([[w]], dtype=np.uint32), np.array([[q]], dtype=np.uint64))[0, 0]
    n = 2**22 if cpu else 2**24
    y = jax.device_put(np.random.default_rng(2).integers(0, q, n, dtype=np.uint32))

    @jax.jit
    def chain(v):
        for _ in range(32):
            v = shoup_mul(v, jnp.uint32(w), jnp.uint32(ws), jnp.uint32(q))
        return v

    out["modmul_per_s"] = 32 * n / (_median_ms(lambda: chain(y), reps) / 1e3)
    m = 1024 if cpu else 4096
    a = jax.device_put(np.random.default_rng(3).integers(-128, 128, (m, m), dtype=np.int8))
    mm = jax.jit(lambda u, v: jnp.einsum("ij,jk->ik", u, v, preferred_element_type=jnp.int32))
    out["int8_mac_per_s"] = m**3 / (_median_ms(lambda: mm(a, a), reps) / 1e3)
    with jax.enable_x64(True):
        rng = np.random.default_rng(4)
        z = jax.device_put(rng.standard_normal((4096, 1024)) + 1j * rng.standard_normal((4096, 1024)))
        fft = jax.jit(jnp.fft.fft)
        out["fft1024_per_s"] = 4096 / (_median_ms(lambda: fft(z), reps) / 1e3)
    return out


# ---------------------------------------------------------------------------------------------------
# CKKS
# ---------------------------------------------------------------------------------------------------


def _ckks_floor(params, op: str, level: int, operands, key, result, rate: dict) -> dict:
    n, limbs = params.n, len(params.moduli_at(level))
    butterflies_per_limb = n // 2 * int(math.log2(n))
    up, down = transform_counts(len(params.q), len(params.p), params.dnum, limbs)
    digits = -(-limbs // max(1, -(-len(params.q) // params.dnum)))
    ks_products = 2 * digits * (limbs + len(params.p)) * n
    ntts = {"mul": up + down, "rotate": up + down, "rescale": 2 * limbs, "add": 0}
    ntts["mul_rescale"] = up + down + 2 * limbs
    modmuls = ntts[op] * butterflies_per_limb
    if op in ("mul", "mul_rescale", "rotate"):
        modmuls += ks_products
    if op in ("mul", "mul_rescale"):
        modmuls += 4 * limbs * n
    nbytes = _nbytes(operands) + _nbytes(key) + _nbytes(result)
    t_bytes = nbytes / rate["hbm_bytes_per_s"] * 1e3
    t_ops = modmuls / rate["modmul_per_s"] * 1e3
    return {"bytes": nbytes, "modmuls": modmuls, "ntt_limbs": ntts[op], "floor_ms": max(t_bytes, t_ops),
            "bound": "bytes" if t_bytes >= t_ops else "modmul", "bytes_ms": t_bytes, "modmul_ms": t_ops}


def _operations(keys):
    return {
        "mul": (lambda a, b: C.mul(a, b, keys), keys.relin),
        "mul_rescale": (lambda a, b: C.mul_rescale(a, b, keys), keys.relin),
        "rotate": (lambda a, b: C.rotate(a, 1, keys), keys.galois_key(C.rotation_element(keys.params, 1))),
        "rescale": (lambda a, b: C.rescale(a), None),
        "add": (lambda a, b: C.add(a, b), None),
    }


def profile_ckks(args, rate: dict) -> None:
    base = CP.N16_L21_DNUM3 if not args.quick else _quick_ckks()
    if not args.quick:
        base = getattr(CP, args.preset)
    for kname in [k for k in args.kernels.split(",") if k]:  # --kernels "": TFHE only
        kset = as_kernel_set(kname)
        params = base.with_kernels(kset)
        t0 = time.perf_counter()
        sk, keys = C.keygen(params, rotations=(1,))
        jax.block_until_ready(keys)
        keygen_s = time.perf_counter() - t0
        rng = np.random.default_rng(5)
        x = C.encrypt(keys, C.encode(params, rng.uniform(-1, 1, params.slots)))
        y = C.encrypt(keys, C.encode(params, rng.uniform(-1, 1, params.slots)))
        names = args.ops.split(",") if kname != "matrix" else args.matrix_ops.split(",")
        table = _operations(keys)
        for op in names:
            fn, key = table[op]
            rec = {"bench": "profile", "scheme": "ckks", "preset": args.preset if not args.quick else "quick",
                   "kset": kname, "op": op, "level": x.level, "n": params.n, "limbs": x.c0.limbs,
                   "keygen_s": keygen_s}
            try:
                rec.update(_ckks_op(args, rate, params, kname, op, fn, key, x, y))
            except Exception as e:  # noqa: BLE001 - one failing operation must leave the others' figures
                rec["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            RECORDS.append(rec)
            print(_row(rec), flush=True)
            _save(args)


def _ckks_op(args, rate, params, kname, op, fn, key, x, y) -> dict:
    """The measurements of one CKKS operation ``fn(x, y)`` (module docstring)."""
    from crossfhe.core import keyswitch as ks

    rec = {}
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(x, y))
    rec["first_call_s"] = time.perf_counter() - t0
    rec["eager_ms"] = _median_ms(lambda: fn(x, y), args.reps)
    keep = args.traces / f"ckks_{kname}_{op}" if args.traces else None
    prof = trace.profile(lambda: fn(x, y), calls=3, keep=keep)
    rec.update(executions=prof.executions, kernels=prof.kernels, kernel_ms=prof.kernel_us / 1e3, copies=prof.copies,
               top=[(k[:90], c, us / 1e3) for k, c, us in prof.top],
               event_names=dict(list(prof.event_names.items())[:25]))
    operands = (x.c0, x.c1) if op in ("rotate", "rescale") else (x.c0, x.c1, y.c0, y.c1)
    rec.update(_ckks_floor(params, op, x.level, operands, key, (out.c0, out.c1), rate))
    rec["tables_bytes"] = _nbytes(ks.keyswitch_plan(key, active=x.c1.limbs, kernels=params.kernels)) if key else 0
    if op == "mul_rescale" and kname == "vector":
        jitted = jax.jit(fn)
        t0 = time.perf_counter()
        jax.block_until_ready(jitted(x, y))
        rec["jit_first_call_s"] = time.perf_counter() - t0
        rec["jit_ms"] = _median_ms(lambda: jitted(x, y), args.reps)
    if args.batch and op in ("mul_rescale", "add", "rotate") and kname != "matrix":  # MATRIX: slow compiles
        def stack(c):
            return jax.tree_util.tree_map(lambda v: jnp.broadcast_to(v, (args.batch,) + v.shape), c)

        xb, yb = stack(x), stack(y)
        batched = jax.jit(jax.vmap(fn))
        jax.block_until_ready(batched(xb, yb))
        rec["batch"] = args.batch
        rec["batch_ms"] = _median_ms(lambda: batched(xb, yb), max(3, args.reps // 4))
        rec["ct_per_s"] = args.batch / rec["batch_ms"] * 1e3
    return rec


def _quick_ckks():
    from crossfhe.testing import INSECURE_CKKS_N11_COMPOSITE

    return INSECURE_CKKS_N11_COMPOSITE


# ---------------------------------------------------------------------------------------------------
# TFHE
# ---------------------------------------------------------------------------------------------------


def profile_tfhe(args, rate: dict) -> None:
    from crossfhe.tfhe import ops as T
    from crossfhe.tfhe import presets as TP

    for name in [p for p in args.tfhe.split(",") if p]:
        if args.quick:
            from crossfhe.testing import INSECURE_TFHE_P4 as prm
        else:
            prm = getattr(TP, name)
        kset = args.tfhe_kernels or "auto"
        prm = prm.with_kernels(kset)  # on the GPU set: the CUDA blind rotation (its product)
        t0 = time.perf_counter()
        ck, sk = T.keygen(prm, seed=bytes(32))
        keygen_s = time.perf_counter() - t0
        size = 2**prm.message_bits
        table = np.array([(v * v + 3 * v + 1) % size for v in range(size)])
        k1, levels = prm.glwe_dim + 1, prm.pbs_gadget.levels
        steps = prm.groups << prm.extension
        ffts = steps * k1 * levels + steps * k1
        key_bytes = _nbytes(sk.prepared.rest) or _nbytes(sk.bsk)
        runs = [(int(b), 1) for b in args.tfhe_batches.split(",") if b]
        runs[1:1] = [(1, int(u)) for u in args.tfhe_unroll.split(",") if int(u) != 1]
        for batch, unroll in runs:
            op = "pbs" if unroll == 1 else f"pbs u{unroll}"
            rec = {"bench": "profile", "scheme": "tfhe", "preset": name, "op": op, "batch": batch, "unroll": unroll,
                   "keygen_s": keygen_s, "kernels": repr(prm.kernels.resolve()), "product": sk.product.__name__}
            try:
                rec.update(_pbs(args, rate, prm, ck, sk, table, batch, unroll, name))
                t_bytes = key_bytes / rate["hbm_bytes_per_s"] * 1e3
                t_fft = batch * ffts / rate["fft1024_per_s"] * 1e3 * (prm.poly_size // 2) / 1024
                rec.update(bytes=key_bytes, ffts=batch * ffts, floor_ms=max(t_bytes, t_fft),
                           bound="bytes" if t_bytes >= t_fft else "fft")
            except Exception as e:  # noqa: BLE001
                rec["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            RECORDS.append(rec)
            print(_row(rec), flush=True)
            _save(args)


def _pbs(args, rate, prm, ck, sk, table, batch: int, unroll: int, name: str) -> dict:
    """The measurements of ``ops.pbs`` on a batch of ``batch`` random messages (module docstring)."""
    from crossfhe.tfhe import ops as T

    pbs = partial(T.pbs, unroll=unroll)
    rec = {}
    msgs = np.random.default_rng(batch).integers(0, 2**prm.message_bits, batch)
    ct = T.encrypt(ck, msgs)
    t0 = time.perf_counter()
    out = pbs(sk, ct, table)
    jax.block_until_ready(out.a)
    rec["first_call_s"] = time.perf_counter() - t0
    rec["correct"] = bool((np.asarray(T.decrypt(ck, out)) == table[msgs]).all())
    reps = max(3, args.reps // (4 if batch > 1 else 1))
    rec["eager_ms"] = _median_ms(lambda: pbs(sk, ct, table).a, reps)
    rec["ms_per_pbs"] = rec["eager_ms"] / batch
    rec["pbs_per_s"] = batch / rec["eager_ms"] * 1e3
    keep = args.traces / f"tfhe_{name}_{batch}_u{unroll}" if args.traces else None
    prof = trace.profile(lambda: pbs(sk, ct, table).a, calls=2, keep=keep)
    rec.update(executions=prof.executions, kernels=prof.kernels, kernel_ms=prof.kernel_us / 1e3, copies=prof.copies,
               top=[(k[:90], c, us / 1e3) for k, c, us in prof.top],
               event_names=dict(list(prof.event_names.items())[:25]))
    return rec


# ---------------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------------


def _row(r: dict) -> str:
    if "error" in r:
        return f"{r['scheme']:5} {r.get('kset', r['preset']):8} {r['op']:12} ERROR {r['error'][:150]}"
    gap = r["eager_ms"] / r["floor_ms"] if r.get("floor_ms") else None
    tag = r.get("kset", r["preset"]) + (f" x{r['batch']}" if r["scheme"] == "tfhe" else "")
    return (f"{r['scheme']:5} {tag:10} {r['op']:12} {fmt(r['eager_ms'], 9, '.3f')} {fmt(r.get('jit_ms'), 8, '.3f')}"
            f" {fmt(r.get('executions'), 5, '.0f')} {fmt(r.get('kernels'), 7, '.0f')}"
            f" {fmt(r.get('kernel_ms'), 9, '.3f')}"
            f" {fmt(r.get('floor_ms'), 8, '.3f')} {fmt(gap, 7, '.1f')} {r.get('bound', '-'):6}"
            f" {fmt(r.get('ct_per_s') or r.get('pbs_per_s'), 9, '.0f')}")


HEADER = (f"{'sch':5} {'set':10} {'op':12} {'eager ms':>9} {'jit ms':>8} {'execs':>5} {'kernels':>7} {'kern ms':>9}"
          f" {'floor ms':>8} {'/floor':>7} {'bound':6} {'per s':>9}")


def _save(args) -> None:
    if args.json:
        write_json(RECORDS, args.json)


def main() -> int:
    args = ARGS
    enable_compilation_cache()
    dev = jax.devices()[0]
    print(f"device {dev.device_kind} ({jax.default_backend()}), jax {jax.__version__}, {platform.machine()}",
          flush=True)
    rate = rates(args.reps)
    RECORDS.append({"bench": "profile", "scheme": "rates", "device": dev.device_kind, "jax": jax.__version__, **rate})
    print("rates: " + ", ".join(f"{k} {v:.3g}" for k, v in rate.items()), flush=True)
    print(HEADER, flush=True)
    profile_ckks(args, rate)
    if args.tfhe:
        profile_tfhe(args, rate)
    _save(args)
    print("\n" + HEADER)
    for r in RECORDS[1:]:
        print(_row(r))
    return 1 if any("error" in r or r.get("correct") is False for r in RECORDS) else 0


if __name__ == "__main__":
    sys.exit(main())
