"""The GPU kernel set's fused NTT against XLA's radix-2 kernels (VECTOR) on the same device, with the memory floor.

    python benchmarks/bench_gpu_kernels.py [--quick] [--reps 20] [--json PATH]

First the device-memory rate, measured in this process: a fused uint32 pass z = x ^ 1 over 1 GiB (bytes read plus
written per second; 64 MiB on a CPU). Then, for each shape (N, limbs, batch), forward and inverse:

- ``exact``: the GPU kernel's words equal VECTOR's on random inputs (forward, and the inverse of the forward);
- ``vector_us`` / ``gpu_us``: the median of ``--reps`` calls of a jitted transform, each over one of 8 input sets in
  turn (so that the inputs do not sit in the L2 cache), blocked after each call: the latency a user's eager call
  sees, dispatch included;
- ``vector_kernel_us`` / ``gpu_kernel_us``: the device time of the kernels of one call (a profiler trace of 3 calls,
  :func:`crossfhe.testing.trace.profile`; absent on a CPU, whose trace lists no kernels), and ``kernels`` per call;
- ``floor_us``: the bytes a transform must move (read x and its two twiddle tables, write the result) over the
  measured rate; ``kernel / floor`` the gap of the GPU kernels;
- ``variants_us``: each launch variant of the kernel (``gpu_native.VARIANTS``: 3 or 4 stages per group in registers,
  256, 128 or 512 threads a block), the time per transform of 8 transforms in one program (``lax.map`` over the 8
  input sets: no dispatch between them), each checked exact first; ``best_variant`` the fastest.

Then the TFHE blind rotation in one kernel (``gpu_native.blind_rotate``, every step after the first) on P4_128's and
P6_128's shapes (N 2^11, two 31-bit limbs, 488 grouped steps of 3 GGSWs; random keys and accumulators) at batches 1
and 256, for each launch of :data:`ROTATION_LAUNCHES` (threads a block, blocks a cluster per accumulator): ``exact``
(the words of XLA's group steps, ``blind_rotate`` with the NTT product on VECTOR, at batch 1; at 256 the first
launch's words), ``ms`` the median of ``--reps`` blocked calls, ``per_s`` rotations per second, ``key_floor_ms`` the
key's bytes over the memory rate (each step's GGSWs read once per call).

Also the library's build (``build_s``: nvcc on first use, then cached). Without a CUDA device the GPU rows say why
and only VECTOR is timed (a smoke run of the script). Prints JSON records (``--json``) and a table last.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from crossfhe.kernels import GPU, gpu_native  # noqa: E402
from crossfhe.math.primes import ntt_primes  # noqa: E402
from crossfhe.ring import ntt as T  # noqa: E402
from crossfhe.testing import trace  # noqa: E402

SHAPES = [(1 << 16, 22, 1), (1 << 16, 59, 1), (1 << 16, 22, 8), (1 << 12, 4, 64)]
ROTATION_LAUNCHES = [(512, 1), (1024, 1), (256, 2), (256, 4), (128, 4)]
"""(threads, cluster) launches of the blind rotation timed (the first is the default; clusters: one component only)."""
ROTATIONS = {"P4_128": dict(comps=1, levels=1, base_log=23), "P6_128": dict(comps=4, levels=2, base_log=16)}
QUICK = [(1 << 12, 2, 2), (1 << 13, 3, 1)]
SETS = 8


def _median_us(fn, inputs, reps: int, rec: dict | None = None) -> float:
    """Median us of ``reps`` blocked calls after a warm-up, over the inputs in turn (``rec``: gets min_ms, max_ms)."""
    jax.block_until_ready(fn(inputs[0]))
    times = []
    for i in range(reps):
        x = inputs[i % len(inputs)]
        t0 = time.perf_counter()
        jax.block_until_ready(fn(x))
        times.append(time.perf_counter() - t0)
    if rec is not None:
        rec["min_ms"], rec["max_ms"] = min(times) * 1e3, max(times) * 1e3
    return statistics.median(times) * 1e6


def memory_rate(reps: int) -> float:
    """Bytes read plus written per second by one fused elementwise pass."""
    on_cpu = jax.default_backend() == "cpu"
    words = (64 << 20) // 4 if on_cpu else (1 << 30) // 4
    x = jnp.arange(words, dtype=jnp.uint32)
    f = jax.jit(lambda a: a ^ jnp.uint32(1))
    us = _median_us(f, [x], reps)
    return 2 * 4 * words / (us * 1e-6)


def _inputs(plan, batch: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    q = np.asarray(plan.q).astype(np.uint64)
    out = []
    for _ in range(SETS):
        x = rng.integers(0, 2**32, (batch, plan.limbs, plan.n), dtype=np.uint64) % q
        out.append(jax.device_put(x.astype(np.uint32)))
    return out


def _kernels(rec: dict, name: str, fn) -> None:
    """The kernels and their device time per call, from a profiler trace (none listed on a CPU)."""
    try:
        prof = trace.profile(fn, calls=3)
    except Exception as e:  # noqa: BLE001 - a profiler failure must leave the timings
        rec[f"{name}_trace_error"] = f"{type(e).__name__}: {str(e)[:200]}"
        return
    if prof.kernels:
        rec[f"{name}_kernel_us"], rec[f"{name}_kernels"] = prof.kernel_us, prof.kernels


def _variants(rec: dict, inputs: list, plan, inverse: bool, ref, reps: int) -> None:
    """Every launch variant: exact on input set 1, then its time per transform in a program of 8."""
    stacked = jnp.stack(inputs)
    ref = np.asarray(ref)
    times = {}
    for v in range(gpu_native.VARIANTS):
        f = jax.jit(lambda xs, p, v=v: jax.lax.map(lambda a: gpu_native.transform(a, p, inverse=inverse, variant=v),
                                                   xs))
        out = f(stacked, plan)
        if not np.array_equal(np.asarray(out[1]), ref):
            rec.setdefault("variant_errors", []).append(v)
            continue
        times[v] = _median_us(lambda xs, f=f: f(xs, plan), [stacked], max(5, reps // 2)) / len(inputs)
    rec["variants_us"] = times
    if times:
        rec["best_variant"] = min(times, key=times.get)


def bench_shape(n: int, limbs: int, batch: int, rate: float, reps: int, gpu_ok: bool) -> list[dict]:
    moduli = ntt_primes(30, n, limbs)
    vector = jax.device_put(T.NTTPlan.create(n, moduli))  # every leaf on the device: no copy per call
    gpu = jax.device_put(T.NTTPlan.create(n, moduli, GPU))
    inputs = _inputs(vector, batch, n + limbs + batch)
    data = 4 * batch * limbs * n
    tables = 2 * 4 * limbs * n
    floor_us = (2 * data + tables) / rate * 1e6
    recs = []
    for direction in ("forward", "inverse"):
        op = T.intt if direction == "inverse" else T.ntt
        rec = {"suite": "gpu_kernels", "name": f"ntt_{direction}", "params": {"N": n, "limbs": limbs, "batch": batch},
               "device": str(jax.devices()[0]), "backend": "GPU", "jax": jax.__version__, "reps": reps,
               "floor_ms": floor_us / 1e3, "bench": "gpu_ntt", "n": n, "limbs": limbs, "batch": batch,
               "direction": direction, "bytes": 2 * data + tables, "floor_us": floor_us}
        fv = jax.jit(lambda x, p, op=op: op(x, p))
        rec["vector_us"] = _median_us(lambda x, fv=fv: fv(x, vector), inputs, reps)
        _kernels(rec, "vector", lambda fv=fv: fv(inputs[2], vector))
        if gpu_ok:
            try:
                fg = jax.jit(lambda x, p, op=op: op(x, p))
                ref = np.asarray(fv(inputs[1], vector))
                got = np.asarray(fg(inputs[1], gpu))
                back = np.asarray(jax.jit(lambda x, p: T.intt(x, p))(jnp.asarray(ref), gpu)) if direction == "forward" \
                    else None
                rec["exact"] = bool(np.array_equal(ref, got) and (back is None or np.array_equal(back, inputs[1])))
                rec["gpu_us"] = _median_us(lambda x, fg=fg: fg(x, gpu), inputs, reps, rec)
                rec["median_ms"] = rec["gpu_us"] / 1e3
                _kernels(rec, "gpu", lambda fg=fg: fg(inputs[2], gpu))
                if rec.get("gpu_kernel_us"):
                    rec["kernel_over_floor"] = rec["gpu_kernel_us"] / floor_us
                _variants(rec, inputs, gpu, direction == "inverse", fv(inputs[1], vector), reps)
                rec["gpu_over_floor"] = rec["gpu_us"] / floor_us
                rec["vector_over_gpu"] = rec["vector_us"] / rec["gpu_us"]
            except Exception as e:  # noqa: BLE001 - one failing shape must leave the others' figures
                rec["error"] = f"{type(e).__name__}: {str(e)[:400]}"
        rec["vector_over_floor"] = rec["vector_us"] / floor_us
        recs.append(rec)
        print(json.dumps(rec), flush=True)
    return recs


def bench_rotation(name: str, batch: int, rate: float, reps: int, seed: int) -> list[dict]:
    """The blind rotation's launches on one shape (module docstring)."""
    from crossfhe.core.blind_rotation import GPUProduct, NTTProduct, blind_rotate
    from crossfhe.math.decompose import Gadget, RNSGadgetPlan
    from crossfhe.math.modular import ModulusTable
    from crossfhe.math.rns import RNSBasis
    from crossfhe.tfhe import presets

    shape = ROTATIONS[name]
    prm = presets.PRESETS[name]
    n, comps, levels, k1, steps, per = prm.poly_size, shape["comps"], shape["levels"], 2, prm.groups - 1, 3
    moduli = prm.moduli
    gplan = RNSGadgetPlan.create(RNSBasis(moduli), Gadget(shape["base_log"], levels))
    rng = np.random.default_rng(seed)
    q = np.asarray(moduli, dtype=np.uint64).reshape(-1, 1)
    acc = jax.device_put((rng.integers(0, 2**62, (batch, comps, k1, 2, n), dtype=np.uint64) % q).astype(np.uint32))
    keys = jax.device_put((rng.integers(0, 2**62, (steps, per, k1 * levels, k1, 2, n), dtype=np.uint64) % q)
                          .astype(np.uint32))
    exps = jax.device_put(rng.integers(0, 2 * comps * n, (batch, steps, per)).astype(np.int32))
    product = jax.device_put(GPUProduct.create(T.NTTPlan.create(n, moduli, GPU), gplan))
    ref = None
    if batch == 1:
        t = ModulusTable.create(moduli)
        ntt = jax.device_put(NTTProduct(T.NTTPlan.create(n, moduli), gplan,
                                        (t.q, t.barrett_mu, t.bits, t.mont_qinv, t.mont_r2)))
        ref = np.asarray(jax.jit(blind_rotate)(acc, exps, keys, ntt))
    key_floor_ms = keys.nbytes / rate * 1e3
    recs = []
    for threads, cluster in ROTATION_LAUNCHES:
        rec = {"suite": "gpu_kernels", "name": "blind_rotation", "bench": "gpu_rotation", "shape": name,
               "params": {"preset": name, "batch": batch, "threads": threads, "cluster": cluster, "steps": steps},
               "batch": batch, "threads": threads, "cluster": cluster, "key_floor_ms": key_floor_ms,
               "floor_ms": key_floor_ms, "device": str(jax.devices()[0]), "jax": jax.__version__, "reps": reps}
        if not gpu_native.cluster_fits(cluster, 2, k1, comps, levels):
            continue
        try:
            prod = dataclasses.replace(product, threads=threads, cluster=cluster)
            f = jax.jit(lambda a, e, k, p: p.rotate(a, e, k))
            out = np.asarray(f(acc, exps, keys, prod))
            if ref is None:
                ref = out
            rec["exact"] = bool(np.array_equal(out, ref))
            rec["ms"] = rec["median_ms"] = _median_us(lambda a, f=f, prod=prod: f(a, exps, keys, prod), [acc],
                                                      max(3, reps // 4), rec) / 1e3
            rec["per_s"] = batch / (rec["ms"] * 1e-3)
        except Exception as e:  # noqa: BLE001 - one failing launch must leave the others' figures
            rec["error"] = f"{type(e).__name__}: {str(e)[:400]}"
        recs.append(rec)
        print(json.dumps(rec), flush=True)
    return recs


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="two small shapes (a smoke run)")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--rotation", default="P4_128:1,P4_128:256,P6_128:1,P6_128:256",
                   help="the blind rotation's shapes and batches, NAME:BATCH comma-separated ('' for none; GPU only)")
    p.add_argument("--no-ntt", action="store_true", help="skip the NTT shapes")
    args = p.parse_args()
    env = {"bench": "env", "device": str(jax.devices()[0]), "backend": jax.default_backend(),
           "jax": jax.__version__, "machine": platform.processor() or platform.machine()}
    t0 = time.perf_counter()
    gpu_ok = gpu_native.available()
    env.update(build_s=time.perf_counter() - t0, gpu_kernels=gpu_native.status())
    env["hbm_bytes_per_s"] = rate = memory_rate(args.reps)
    print(json.dumps(env), flush=True)
    records = [env]
    for n, limbs, batch in ([] if args.no_ntt else QUICK if args.quick else SHAPES):
        records += bench_shape(n, limbs, batch, rate, args.reps, gpu_ok)
    rotations = []
    for item in [x for x in args.rotation.split(",") if x] if gpu_ok else []:
        name, batch = item.split(":")
        rotations += bench_rotation(name, int(batch), rate, args.reps, seed=len(rotations))
    records += rotations
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(records, indent=1))
    print(f"\ndevice {env['device']}; memory rate {rate / 1e9:.0f} GB/s (read + write); GPU kernels: "
          f"{env['gpu_kernels']} (first use {env['build_s']:.1f} s)")
    print(f"{'N':>6} {'limbs':>5} {'batch':>5} {'dir':8} {'exact':>5} {'vector us':>9} {'gpu us':>9} "
          f"{'vec kern':>9} {'gpu kern':>9} {'floor us':>9} {'vec/gpu':>9} {'kern/flr':>9} {'best variant (us)':>18}")
    for r in [r for r in records[1:] if r["bench"] == "gpu_ntt"]:
        cells = [format(r[key], fmt) if key in r else "-" for key, fmt in
                 (("vector_us", ".1f"), ("gpu_us", ".1f"), ("vector_kernel_us", ".1f"), ("gpu_kernel_us", ".1f"),
                  ("floor_us", ".1f"), ("vector_over_gpu", ".2f"), ("kernel_over_floor", ".2f"))]
        print(f"{r['n']:>6} {r['limbs']:>5} {r['batch']:>5} {r['direction']:8} {str(r.get('exact', '-')):>5} "
              + " ".join(f"{c:>9}" for c in cells)
              + (f" {r['best_variant']:>9} ({r['variants_us'][r['best_variant']]:.1f})" if "best_variant" in r else "")
              + (f"  {r['error']}" if "error" in r else "")
              + (f"  inexact variants {r['variant_errors']}" if r.get("variant_errors") else ""))
    if rotations:
        print(f"\n{'rotation':8} {'batch':>5} {'threads':>7} {'cluster':>7} {'exact':>5} {'ms':>9} {'per s':>9} "
              f"{'key floor ms':>12}")
        for r in rotations:
            print(f"{r['shape']:8} {r['batch']:>5} {r['threads']:>7} {r['cluster']:>7} {str(r.get('exact', '-')):>5} "
                  f"{r.get('ms', float('nan')):>9.3f} {r.get('per_s', float('nan')):>9.0f} {r['key_floor_ms']:>12.3f}"
                  + (f"  {r['error']}" if "error" in r else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
