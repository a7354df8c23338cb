"""HMVP benchmark: coefficient-encoded HMVP (CHAM) vs the diagonal method vs TenSEAL, encrypted vector x plaintext
matrix, latency, throughput and the time split, in one run.

    python benchmarks/bench_hmvp.py [--quick] [--sizes 256x256,...] [--json PATH] [--threads 1] [--no-peer]
    crossfhe bench hmvp [same options]

Points: u = A v mod t for A m x n, (m, n) in {256, 1024, 4096, 8192} x {256, 4096} (--quick: 256 x 256),
A and v uniform in [0, t). Per point and method: latency (median of >= 10 timed calls or >= 2 s, or >= 3
calls once 4 s have passed, after a first call whose time, jit compile or a persistent-cache load plus one
run, is reported apart as ``first_call_ms``; every result blocked on), throughput in rows per second
(m / latency), and the result checked against the exact product (any wrong result: exit status 1).

- **hmvp** (:mod:`crossfhe.linalg.hmvp`) at ``bfv.presets.CHAM_N4096`` (N 4096, two 30-bit ciphertext
  primes, one special prime, t = 1032193): the split "dot" (plaintext products, rescale by P and the LWE
  extraction, one fused kernel) / "pack" (the packing key switches) from ``hmvp(..., timings=)`` (separate
  calls, since timing the stages waits on each), the noise budget left, and the work: key switches
  (n' - 1 + log2(N / n') per tile of at most N rows, n' the power of two >= its rows) and NTT limbs
  transformed (rows x (B (L + K) + 2K + 2L) in the dot kernel, B = ceil(n / N), plus per key switch
  L + sum_j (L + K - |D_j|) + 2K + 2L, :mod:`crossfhe.core.keyswitch`).
- **diagonal** (:mod:`crossfhe.linalg.diagonal`, Halevi-Shoup with baby-step giant-step, batch-encoded)
  at the same parameters, with its own keys (the rotations of its plan), and its noise budget left. At
  CHAM_N4096 the margin is thin: a fresh ciphertext has about 34 bits of budget and one product with a
  batch-encoded plaintext (coefficients uniform mod t) takes about 25, so 1 to 3 bits are left (HMVP
  encrypts over Q ∪ P and rescales by P after the products, and keeps about 20). ``--diagonal-preset N4096``
  (the same N and t, three 27-bit ciphertext primes, log2 PQ 108, 128-bit) gives it about 20 more bits.
- **TenSEAL** (peer, ``pip install tenseal``): TenSEAL 0.3 has no BFV vector-matrix product
  (``BFVVector.matmul_plain`` throws "not implemented"); its encrypted-vector x plaintext-matrix product is
  ``CKKSVector.mm`` (v^T M, so M = A^T), Halevi-Shoup's diagonal method with one rotation per row of M and
  the diagonals encoded inside the call. It runs here at N 4096 with coefficient moduli of 40, 24, 45 bits
  (two ciphertext primes and one special prime, the shape of CHAM_N4096; 109 bits, 128-bit) and scale
  2^24, A and v uniform in [-1, 1] (CKKS is approximate: the check is max |error| < 1), on --threads threads.
  One call takes a vector of at most N/2 = 2048 entries and gives at most 2048 outputs; larger points are
  tiled into ceil(n / 2048) x ceil(m / 2048) calls whose partial products are added (``peer_calls``), or
  left null with ``--no-peer-tiling``.

``ratio`` = ours / TenSEAL (below 1: ours is faster); ``vs_diagonal`` = hmvp / diagonal. ``floor_ms`` =
NTT limbs transformed x the measured time of one limb transform (in a batch, at the method's parameters):
a floor for the transforms alone (key multiply-accumulates, basis conversions and plaintext products not
counted; HMVP's limbs without the zero padding of its packing calls, whose count with it is
``key_switches_run``); ``ks_floor_ms`` = key switches x the measured time of one key switch in a batch of 256.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import math
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

HMVP_PRESET = "CHAM_N4096"
SIZES = tuple((m, n) for m in (256, 1024, 4096, 8192) for n in (256, 4096))
QUICK = ((256, 256),)


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="256 x 256 only, short timing windows (< 1 min on 2 cores)")
    p.add_argument("--sizes", default=None, help="comma-separated m x n points, e.g. 256x256,1024x4096")
    p.add_argument("--json", type=Path, default=None, help="write the JSON records here")
    p.add_argument("--threads", type=int, default=1, help="CPUs to run on (1 matches the single-thread peer)")
    p.add_argument("--no-peer", action="store_true", help="skip TenSEAL")
    p.add_argument("--no-peer-tiling", action="store_true",
                   help="TenSEAL only where one CKKSVector.mm call does the point (n, m <= N/2); null elsewhere")
    p.add_argument("--no-diagonal", action="store_true", help="skip the diagonal method")
    p.add_argument("--diagonal-preset", default=HMVP_PRESET,
                   help=f"bfv preset of the diagonal method (default {HMVP_PRESET}, as HMVP; N4096: more budget)")
    p.add_argument("--reps", type=int, default=10,
                   help="minimum timed calls (slow calls: >= 3 once 4 s, --quick 1 s, have passed)")
    p.add_argument("--seed", type=int, default=2024, help="seed of the matrices and vectors")
    p.add_argument("--rows-per-product", default=None,
                   help="comma-separated R values of hmvp (default: crossfhe.linalg.hmvp.DEFAULT_ROWS_PER_PRODUCT)")
    p.add_argument("--vectors", type=int, default=1,
                   help="also time K encrypted vectors against one matrix, issued back to back and waited on once "
                        "(throughput: a device overlaps one product's dispatch with the previous one's work)")
    return p.parse_args()


from crossfhe.cli.benchutil import (  # noqa: E402
    enable_compilation_cache,
    first_call,
    fmt,
    load_average,
    pin_threads,
    timeit,
    write_json,
)
from crossfhe.runtime import keep_heap  # noqa: E402

ARGS = _parse() if __name__ == "__main__" else None
if ARGS is not None:
    pin_threads(ARGS.threads)
    HEAP_KEPT = keep_heap(reexec=True)  # restarts once with the allocator settings: crossfhe.runtime

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from crossfhe.bfv import ops as bfv  # noqa: E402
from crossfhe.bfv import presets  # noqa: E402
from crossfhe.bfv.params import Params  # noqa: E402
from crossfhe.convert import packing  # noqa: E402
from crossfhe.core import keyswitch as ks  # noqa: E402
from crossfhe.linalg import choose, diagonal, hmvp  # noqa: E402
from crossfhe.math.modular import ModulusTable, barrett_mul  # noqa: E402
from crossfhe.ring.ntt import NTTPlan, ntt  # noqa: E402
from crossfhe.ring.poly import Domain, RNSPoly  # noqa: E402

try:
    import tenseal as ts
except ImportError:  # the peer is optional: pip install "crossfhe[bench]"
    ts = None

TS_BITS = (40, 24, 45)
TS_LOG_SCALE = 24
TS_TOLERANCE = 1.0  # max |error| of the CKKS product accepted as correct (values in [-1, 1])
UNIT_BATCH = 256

# --------------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------------


def _stats(ts_: list[float]) -> dict:
    return {"median_ms": float(np.median(ts_)) * 1e3, "min_ms": min(ts_) * 1e3, "max_ms": max(ts_) * 1e3,
            "reps": len(ts_)}


# --------------------------------------------------------------------------------------------------
# Work counts (transform and key-switch counts of the algorithms, from the shapes)
# --------------------------------------------------------------------------------------------------


def _ks_limbs(p: Params) -> int:
    """Limbs transformed by one key switch at the top level (``crossfhe.linalg.choose.keyswitch_limbs``)."""
    return choose.keyswitch_limbs(p)


def hmvp_work(p: Params, m: int, n: int, r: int = 1) -> dict:
    """Work of one hmvp call with R = r rows per plaintext product: ``crossfhe.linalg.hmvp.work`` (key switches,
    the dot's ModDown limbs and word products), plus ``key_switches_run`` with the zero padding of the tree
    levels to calls of ``PACK_CHUNK`` pairs, and the limbs the packing's key switches transform."""
    w = hmvp.work(p, m, n, r)
    width, chunk = p.n // r, getattr(packing, "PACK_CHUNK", 1)
    run = 0
    for start in range(0, m, p.n):
        ell = (math.ceil(min(p.n, m - start) / r) - 1).bit_length()
        pairs = [(1 << ell) >> level for level in range(1, ell + 1)]
        run += sum(h if h == 1 else -(-max(h, chunk) // chunk) * chunk for h in pairs) + int(math.log2(width)) - ell
    per_ks = _ks_limbs(p)
    return {"key_switches": w.key_switches, "key_switches_run": run, "dot_ntt_limbs": w.dot_limbs,
            "dot_products": w.products, "pack_ntt_limbs": w.key_switches * per_ks,
            "ntt_limbs": w.dot_limbs + w.key_switches * per_ks, "tiles": math.ceil(m / p.n), "blocks": w.blocks,
            "groups": w.groups, "rows_per_product": r}


def diagonal_work(p: Params, m: int, n: int) -> dict:
    plan = diagonal.plan_matvec(p, m, n)
    per_ks = _ks_limbs(p)
    limbs = plan.key_switches * per_ks  # baby steps not hoisted; the plaintext products need no transform
    return {"key_switches": plan.key_switches, "baby_rotations": plan.baby_rotations,
            "giant_rotations": plan.giant_rotations, "row_swaps": plan.row_swaps,
            "plain_products": plan.plain_products, "ntt_limbs": limbs, "rotation_keys": len(plan.rotations)}


def unit_costs(p: Params, ek, element: int, timing: dict) -> dict:
    """Measured seconds of one limb NTT, of one key switch (one compiled program) and of one word product
    (Barrett), each in a batch of UNIT_BATCH polynomials (at ``p``): the fastest of the timed calls."""
    rng = np.random.default_rng(7)
    moduli = p.q + p.p
    plan = NTTPlan.create(p.n, moduli)
    q = np.array(moduli, dtype=np.uint64).reshape(-1, 1)
    x = jnp.asarray((rng.integers(0, 2**32, (UNIT_BATCH, len(moduli), p.n), dtype=np.uint64) % q).astype(np.uint32))
    _, ntt_first = first_call(lambda: ntt(x, plan))
    ntt_t = timeit(lambda: ntt(x, plan), **timing)
    qq = np.array(p.q, dtype=np.uint64).reshape(-1, 1)
    d = RNSPoly(jnp.asarray((rng.integers(0, 2**32, (UNIT_BATCH, len(p.q), p.n), dtype=np.uint64) % qq)
                            .astype(np.uint32)), p.q, Domain.EVAL)
    gk = ek.galois_key(element)
    kplan = ks.keyswitch_plan(gk, kernels=p.kernels)
    kswitch = jax.jit(lambda u, key, plan: ks.keyswitch(u, key, plan=plan))  # one program, as inside the packing
    _, ks_first = first_call(lambda: kswitch(d, gk, kplan))
    ks_t = timeit(lambda: kswitch(d, gk, kplan), **timing)
    t = ModulusTable.create(moduli)
    prod = jax.jit(lambda u, w: barrett_mul(u, w, t.q, t.barrett_mu, t.bits))
    y = x[::-1]
    _, mul_first = first_call(lambda: prod(x, y))
    mul_t = timeit(lambda: prod(x, y), **timing)
    return {"ntt_limb_s": min(ntt_t) / (UNIT_BATCH * len(moduli)),  # the fastest call: a floor's unit
            "keyswitch_s": min(ks_t) / UNIT_BATCH,
            "product_s": min(mul_t) / x.size,
            "ntt_limb_first_s": ntt_first, "keyswitch_first_s": ks_first, "product_first_s": mul_first}


# --------------------------------------------------------------------------------------------------
# Reference
# --------------------------------------------------------------------------------------------------


def reference(a: np.ndarray, v: np.ndarray, t: int) -> np.ndarray:
    """A v mod t, exact: int64 products and sums when n (t - 1)^2 < 2^63 (here 4096 x 2^40), else
    ``hmvp.matvec_reference`` (Python integers)."""
    if a.shape[1] * (t - 1) ** 2 < 2**63:
        return (a.astype(np.int64) @ v.astype(np.int64)) % t
    return hmvp.matvec_reference(a, v, t)


# --------------------------------------------------------------------------------------------------
# TenSEAL
# --------------------------------------------------------------------------------------------------


def tenseal_version() -> str:
    try:
        return f"tenseal {importlib.metadata.version('tenseal')}"
    except importlib.metadata.PackageNotFoundError:
        return "tenseal"


class TenSEAL:
    """A TenSEAL CKKS context at N 4096, coefficient moduli TS_BITS, scale 2^TS_LOG_SCALE, Galois keys."""

    def __init__(self, threads: int):
        t0 = time.perf_counter()
        self.ctx = ts.context(ts.SCHEME_TYPE.CKKS, poly_modulus_degree=4096, coeff_mod_bit_sizes=list(TS_BITS),
                              n_threads=threads)
        self.ctx.global_scale = 2.0**TS_LOG_SCALE
        self.ctx.generate_galois_keys()
        self.keygen_s = time.perf_counter() - t0
        self.slots = 4096 // 2

    def params(self) -> dict:
        return {"scheme": "CKKS", "N": 4096, "coeff_modulus_bits": list(TS_BITS), "special_primes": 1,
                "scale": f"2^{TS_LOG_SCALE}", "threads": 1}

    def calls(self, m: int, n: int) -> int:
        return math.ceil(n / self.slots) * math.ceil(m / self.slots)

    def prepare(self, m: int, n: int, rng):
        """(zero-argument product callable, decrypt-and-check callable); inputs uniform in [-1, 1]. The
        matrix is converted to TenSEAL plain tensors and the vector encrypted here, outside the timing."""
        a = rng.uniform(-1, 1, (m, n))
        v = rng.uniform(-1, 1, n)
        s = self.slots
        chunks = [ts.ckks_vector(self.ctx, v[j : j + s].tolist()) for j in range(0, n, s)]
        # M = A^T (n x m): tile (j, i) = rows j..j+s of M (the vector chunk), columns i..i+s (the outputs)
        tiles = [[ts.plain_tensor(a[i : i + s, j : j + s].T.copy()) for j in range(0, n, s)] for i in range(0, m, s)]

        def product():
            out = []
            for row in tiles:
                acc = None
                for chunk, tile in zip(chunks, row):
                    part = chunk.mm(tile)
                    acc = part if acc is None else acc + part
                out.append(acc)
            return out

        def check(result) -> float:
            got = np.concatenate([np.array(r.decrypt()) for r in result])
            return float(np.max(np.abs(got - a @ v)))

        return product, check


# --------------------------------------------------------------------------------------------------
# One point
# --------------------------------------------------------------------------------------------------


def _split(fn_timed, quick_s: float) -> tuple[dict, int]:
    """Median per stage of calls of fn_timed(d) (which adds seconds per stage to d): 3 calls when one takes
    under ``quick_s``, else 1."""
    runs = []
    while True:
        d: dict = {}
        jax.block_until_ready(fn_timed(d))
        runs.append(d)
        if len(runs) >= 3 or sum(d.values()) >= quick_s:
            break
    return {k: float(np.median([r.get(k, 0.0) for r in runs])) for k in runs[0]}, len(runs)


def _run_hmvp(mat, vec, ek, timings=None):
    """hmvp's result, blocked on (HMVPResult is no pytree; its ciphertexts are)."""
    res = hmvp.hmvp(mat, vec, ek, timings=timings)
    jax.block_until_ready(res.ciphertexts)
    return res


def _batch_fields(run_all, k: int, timing: dict) -> dict:
    """Throughput over k vectors: run_all() issues k products and returns their arrays, not waited on (timeit
    blocks on the whole list). Median of the timed batches, per vector and per second."""
    _, first = first_call(run_all)
    lat = timeit(run_all, **timing)
    med = float(np.median(lat))
    return {"vectors": k, "batch_ms": med * 1e3, "batch_first_ms": first * 1e3, "batch_reps": len(lat),
            "per_vector_ms": med * 1e3 / k, "vectors_per_s": k / med}


def bench_point(m: int, n: int, ctx: dict, args, base: dict, timing: dict) -> tuple[list[dict], list[str]]:
    p, sk, ek, units = ctx["p"], ctx["sk"], ctx["ek"], ctx["units"]
    rng = np.random.default_rng([args.seed, m, n])
    a = rng.integers(0, p.t, (m, n), dtype=np.int64)
    v = rng.integers(0, p.t, n, dtype=np.int64)
    want = reference(a, v, p.t)
    errors: list[str] = []
    load_before = load_average()
    label = f"{m}x{n}"

    # HMVP, at each R
    hms = []
    for r in ctx["rows_per_product"]:
        t0 = time.perf_counter()
        mat = hmvp.encode_matrix(p, a, rows_per_product=r)
        jax.block_until_ready(mat.evals)
        encode_s = time.perf_counter() - t0
        vec = hmvp.encrypt_vector(ek, p, v, rows_per_product=r)
        res, first = first_call(lambda mat=mat, vec=vec: _run_hmvp(mat, vec, ek))
        got = hmvp.decrypt_result(sk, res, check=False)  # compared below; an exhausted budget shows as a mismatch
        correct = bool(np.array_equal(got, want))
        if not correct:
            errors.append(f"hmvp R={r} {label}: {int(np.sum(got != want))} of {m} rows differ from A v mod t")
        budget = hmvp.noise_budget(sk, res)
        split, split_reps = _split(lambda d, mat=mat, vec=vec: _run_hmvp(mat, vec, ek, timings=d).ciphertexts,
                                   0.5 if args.quick else 2.0)
        lat = timeit(lambda mat=mat, vec=vec: _run_hmvp(mat, vec, ek).ciphertexts, **timing)
        work = hmvp_work(p, m, n, r)
        st = _stats(lat)
        floor = work["ntt_limbs"] * units["ntt_limb_s"] * 1e3
        ks_floor = work["key_switches"] * units["keyswitch_s"] * 1e3
        dot_floor = (work["dot_ntt_limbs"] * units["ntt_limb_s"] + work["dot_products"] * units["product_s"]) * 1e3
        dot_ms, pack_ms = split.get("dot", 0.0) * 1e3, split.get("pack", 0.0) * 1e3
        hms.append(dict(base, name="hmvp",
                        params={"preset": HMVP_PRESET, "N": p.n, "m": m, "n": n, "limbs": len(p.q), "special": len(p.p),
                                "dnum": p.dnum, "t": p.t, "log_pq": round(p.log_pq, 1), "rows_per_product": r},
                        **st, first_call_ms=first * 1e3, rows_per_s=m / (st["median_ms"] / 1e3),
                        dot_ms=dot_ms, pack_ms=pack_ms, split_reps=split_reps,
                        pack_share=split.get("pack", 0.0) / max(sum(split.values()), 1e-12),
                        encode_matrix_ms=encode_s * 1e3, vector_ciphertexts=vec.blocks, noise_budget=budget,
                        correct=correct, **work, floor_ms=floor, ks_floor_ms=ks_floor, dot_floor_ms=dot_floor,
                        dot_vs_floor=dot_ms / dot_floor if dot_floor else None,
                        model_choice=choose.choose_matvec(p, m, n, rows_per_product=r).method,
                        pack_vs_floor=pack_ms / ks_floor if ks_floor else None,
                        peer=None, peer_median_ms=None, ratio=None, vs_diagonal=None, note=""))
        if args.vectors > 1:
            vs = rng.integers(0, p.t, (args.vectors, n), dtype=np.int64)
            encs = [hmvp.encrypt_vector(ek, p, vk, rows_per_product=r) for vk in vs]

            fields = _batch_fields(lambda mat=mat, encs=encs: [hmvp.hmvp(mat, e, ek).ciphertexts for e in encs],
                                   args.vectors, timing)
            errs = [f"hmvp R={r} {label} vector {k}: differs from A v mod t" for k, e in enumerate(encs)
                    if not np.array_equal(hmvp.decrypt_result(sk, hmvp.hmvp(mat, e, ek), check=False),
                                          reference(a, vs[k], p.t))]
            errors += errs
            hms[-1].update(fields, batch_correct=not errs)

    # Diagonal
    dg = None
    if not args.no_diagonal:
        dp, dname = ctx["dp"], args.diagonal_preset
        plan = diagonal.plan_matvec(dp, m, n)
        t0 = time.perf_counter()
        dsk, dek = bfv.keygen(dp, rotations=plan.rotations, row_swap=plan.row_swap, relin=False)
        keygen_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        enc = diagonal.encode_matrix(dp, a)
        jax.block_until_ready(enc.diagonals)
        dencode_s = time.perf_counter() - t0
        x = diagonal.encrypt_vector(dp, dek, v)
        r, dfirst = first_call(lambda: diagonal.matvec(enc, x, dek))
        dgot = diagonal.decrypt_result(dsk, r, m)
        dcorrect = bool(np.array_equal(dgot, want))
        dbudget = bfv.noise_budget(dsk, r)
        if not dcorrect:
            errors.append(f"diagonal {label} at {dname}: {int(np.sum(dgot != want))} of {m} rows differ "
                          f"(noise budget {dbudget})")
        dlat = timeit(lambda: diagonal.matvec(enc, x, dek), **timing)
        dwork = diagonal_work(dp, m, n)
        dst = _stats(dlat)
        dunits = ctx["dunits"]
        dg = dict(base, name="diagonal",
                  params={"preset": dname, "N": dp.n, "m": m, "n": n, "limbs": len(dp.q), "special": len(dp.p),
                          "dnum": dp.dnum, "t": dp.t, "log_pq": round(dp.log_pq, 1)},
                  **dst, first_call_ms=dfirst * 1e3, rows_per_s=m / (dst["median_ms"] / 1e3),
                  keygen_ms=keygen_s * 1e3, encode_matrix_ms=dencode_s * 1e3, noise_budget=dbudget,
                  correct=dcorrect, **dwork, floor_ms=dwork["ntt_limbs"] * dunits["ntt_limb_s"] * 1e3,
                  ks_floor_ms=dwork["key_switches"] * dunits["keyswitch_s"] * 1e3,
                  peer=None, peer_median_ms=None, ratio=None, note="")
        if args.vectors > 1:
            dvs = rng.integers(0, dp.t, (args.vectors, n), dtype=np.int64)
            xs = [diagonal.encrypt_vector(dp, dek, vk) for vk in dvs]
            fields = _batch_fields(lambda: [diagonal.matvec(enc, xk, dek) for xk in xs], args.vectors, timing)
            derrs = [f"diagonal {label} vector {k}: differs from A v mod t" for k, xk in enumerate(xs)
                     if not np.array_equal(diagonal.decrypt_result(dsk, diagonal.matvec(enc, xk, dek), m),
                                           reference(a, dvs[k], dp.t))]
            errors += derrs
            dg.update(fields, batch_correct=not derrs)
        for hm in hms:
            hm["vs_diagonal"] = hm["median_ms"] / dst["median_ms"]
            hm["measured_choice"] = "hmvp" if hm["vs_diagonal"] <= 1 else "diagonal"

    # TenSEAL
    peer_fields: dict = {}
    tsx = ctx.get("tenseal")
    if tsx is not None:
        calls = tsx.calls(m, n)
        if calls > 1 and args.no_peer_tiling:
            peer_fields = {"peer_note": f"TenSEAL: n = {n} or m = {m} above N/2 = {tsx.slots} slots "
                                        "(one CKKSVector.mm call); --no-peer-tiling"}
        else:
            product, check = tsx.prepare(m, n, np.random.default_rng([args.seed, m, n, 1]))
            out, pfirst = first_call(product)
            err = check(out)
            pcorrect = err < TS_TOLERANCE
            if not pcorrect:
                errors.append(f"TenSEAL {label}: max |error| {err:.3g} >= {TS_TOLERANCE}")
            pt = timeit(product, **timing)
            pst = _stats(pt)
            peer_fields = {"peer_median_ms": pst["median_ms"], "peer_min_ms": pst["min_ms"],
                           "peer_max_ms": pst["max_ms"], "peer_reps": pst["reps"], "peer_first_call_ms": pfirst * 1e3,
                           "peer_rows_per_s": m / (pst["median_ms"] / 1e3), "peer_calls": calls,
                           "peer_max_abs_err": err, "peer_correct": pcorrect, "peer_params": tsx.params(),
                           "peer_note": (f"CKKSVector.mm at N 4096, {calls} calls (tiles of {tsx.slots}) whose partial "
                                         "products are added" if calls > 1 else "one CKKSVector.mm call")
                           + "; CKKS (TenSEAL has no BFV matmul), diagonals encoded inside the call"}
    for rec in (*hms, dg):
        if rec is None:
            continue
        if "peer_median_ms" in peer_fields:
            rec.update(peer_fields, peer=ctx["peer"], ratio=rec["median_ms"] / peer_fields["peer_median_ms"])
        elif peer_fields:
            rec.update(peer_note=peer_fields["peer_note"])
        rec["load_avg"] = [load_before, load_average()]
    return [r for r in (*hms, dg) if r is not None], errors


# --------------------------------------------------------------------------------------------------
# Run
# --------------------------------------------------------------------------------------------------


def _base(args) -> dict:
    return {"suite": "hmvp", "device": jax.devices()[0].platform, "backend": "VECTOR", "jax": jax.__version__,
            "threads": args.threads, "cpu": platform.processor() or platform.machine()}


def _sizes(args) -> list[tuple[int, int]]:
    if args.sizes:
        out = []
        for s in args.sizes.split(","):
            m, n = s.lower().strip().split("x")
            out.append((int(m), int(n)))
        return out
    return list(QUICK if args.quick else SIZES)


def main(args: argparse.Namespace) -> tuple[list[dict], list[str]]:
    t_run = time.perf_counter()
    timing = ({"reps": args.reps, "min_seconds": 0.5, "max_seconds": 1.0} if args.quick else
              {"reps": args.reps, "min_seconds": 2.0, "max_seconds": 4.0})
    unit_timing = {"reps": 10, "min_seconds": 0.2, "max_seconds": 1.0}
    base = _base(args)
    print(f"# load average before: {load_average()} on {os.cpu_count()} CPUs; pinned to {args.threads}", flush=True)
    p = getattr(presets, HMVP_PRESET)
    t0 = time.perf_counter()
    sk, ek = bfv.keygen(p, galois_elements=hmvp.required_galois_elements(p), relin=False)
    rows = args.rows_per_product or str(hmvp.DEFAULT_ROWS_PER_PRODUCT)
    ctx = {"p": p, "sk": sk, "ek": ek, "peer": None, "rows_per_product": [int(r) for r in rows.split(",")]}
    records = []
    units = {HMVP_PRESET: (p, unit_costs(p, ek, hmvp.required_galois_elements(p)[0], unit_timing))}
    ctx["units"] = units[HMVP_PRESET][1]
    print(f"# {HMVP_PRESET}: keygen (12 packing keys) and unit costs {time.perf_counter() - t0:.1f} s", flush=True)
    if not args.no_diagonal:
        dp = getattr(presets, args.diagonal_preset)
        if args.diagonal_preset not in units:
            _, dek = bfv.keygen(dp, rotations=[1], relin=False)
            units[args.diagonal_preset] = (dp, unit_costs(dp, dek, bfv.rotation_element(dp, 1), unit_timing))
        ctx["dp"], ctx["dunits"] = dp, units[args.diagonal_preset][1]
    for pname, (prm, u) in units.items():
        for what in ("ntt_limb", "keyswitch", "product"):
            records.append(dict(base, name=f"unit_{what}",
                                params={"preset": pname, "N": prm.n, "limbs": len(prm.q), "special": len(prm.p),
                                        "dnum": prm.dnum, "batch": UNIT_BATCH},
                                median_ms=u[f"{what}_s"] * 1e3, min_ms=None, max_ms=None, reps=None,
                                first_call_ms=u[f"{what}_first_s"] * 1e3, peer=None, peer_median_ms=None,
                                ratio=None, floor_ms=None,
                                note=f"fastest time of a batch of {UNIT_BATCH} divided by {UNIT_BATCH}"
                                     + {"ntt_limb": f" x {len(prm.q) + len(prm.p)} limbs (Q and P)",
                                        "keyswitch": " (key switch of one polynomial at the top level)",
                                        "product": f" x {len(prm.q) + len(prm.p)} x N words (Barrett)"}[what]))
    if args.no_peer:
        pass
    elif ts is None:
        print("# tenseal not importable (pip install 'crossfhe[bench]'): TenSEAL columns skipped")
    else:
        ctx["tenseal"] = TenSEAL(args.threads)
        ctx["peer"] = tenseal_version()
    errors = []
    for m, n in _sizes(args):
        t0 = time.perf_counter()
        recs, errs = bench_point(m, n, ctx, args, base, timing)
        records += recs
        errors += errs
        print(f"# {m} x {n}: {time.perf_counter() - t0:.1f} s" + (f"; WRONG: {errs}" if errs else ""), flush=True)
    print(f"# run: {time.perf_counter() - t_run:.1f} s", flush=True)
    return records, errors


def print_table(records: list[dict]) -> None:
    units = [r for r in records if r["name"].startswith("unit_")]
    for u in units:
        print(f"# {u['name']} at {u['params']['preset']}: {u['median_ms'] * 1e6:.1f} ns "
              f"(first call {u['first_call_ms']:.0f} ms)")
    points = {}
    for r in records:
        if r["name"] == "hmvp":
            points.setdefault((r["params"]["m"], r["params"]["n"]), {}).setdefault("hmvp", []).append(r)
        elif r["name"] == "diagonal":
            points.setdefault((r["params"]["m"], r["params"]["n"]), {})["diagonal"] = r
    head = (f"{'m x n':<11}{'R':>4}{'hmvp ms':>9}{'rows/s':>8}{'first s':>8}{'dot ms':>8}{'/floor':>7}{'pack ms':>8}"
            f"{'/floor':>7}{'ks':>6}{'NTT limbs':>10}{'budget':>7}{'diag ms':>9}{'d.ks':>5}{'d.budget':>9}"
            f"{'hmvp/diag':>10}{'model':>9}{'TenSEAL ms':>11}{'calls':>6}{'hmvp/TS':>8}{'diag/TS':>8}")
    print(head)
    print("-" * len(head))
    for (m, n), rs in points.items():
        d = rs.get("diagonal") or {}
        for h in rs.get("hmvp", []):
            print(f"{f'{m}x{n}':<11}{h['rows_per_product']:>4}{fmt(h['median_ms'], 9)}{fmt(h['rows_per_s'], 8, '.0f')}"
                  f"{fmt(h['first_call_ms'] / 1e3, 8)}{fmt(h['dot_ms'], 8)}{fmt(h['dot_vs_floor'], 7, '.2f')}"
                  f"{fmt(h['pack_ms'], 8)}{fmt(h['pack_vs_floor'], 7, '.2f')}"
                  f"{h['key_switches']:>6}{h['ntt_limbs']:>10}{h['noise_budget']:>7}"
                  f"{fmt(d.get('median_ms'), 9)}{fmt(d.get('key_switches'), 5, 'd')}"
                  f"{fmt(d.get('noise_budget'), 9, 'd')}"
                  f"{fmt(h.get('vs_diagonal'), 10, '.2f')}{h.get('model_choice', '-'):>9}"
                  f"{fmt(h.get('peer_median_ms'), 11)}"
                  f"{fmt(h.get('peer_calls'), 6, 'd')}{fmt(h.get('ratio'), 8, '.2f')}{fmt(d.get('ratio'), 8, '.2f')}")
    r0 = next(iter(points.values()))["hmvp"][0] if points else records[0]
    dg = next((r for r in records if r["name"] == "diagonal"), None)
    print(f"jax {r0['jax']}, {r0['device']}, threads {r0['threads']}; hmvp at {HMVP_PRESET}"
          + (f", diagonal at {dg['params']['preset']}" if dg else "") + f"; peer: {r0.get('peer') or 'none'}")
    print("ms = median latency; R = rows per plaintext product; first s = first call (compile or cache load + one "
          "run); dot = products + rescale + extraction, /floor = over its ModDown limbs x the limb time + its word "
          "products x the product time; pack = packing (separate calls), /floor = over key switches x the key-switch "
          "time; ks = key switches; budget = noise budget left (bits); model = the method crossfhe.linalg.choose picks "
          "for the point; TS = TenSEAL CKKSVector.mm (calls > 1: tiled)")
    batched = [r for r in records if r.get("vectors")]
    if batched:
        print(f"\n{'method':<10}{'m x n':<11}{'R':>4}{'vectors':>8}{'batch ms':>10}{'ms/vector':>10}{'vectors/s':>10}"
              f"{'1-vector ms':>12}{'correct':>8}")
        for r in batched:
            prm = r["params"]
            shape = f"{prm['m']}x{prm['n']}"
            print(f"{r['name']:<10}{shape:<11}{prm.get('rows_per_product', '-'):>4}"
                  f"{r['vectors']:>8}{fmt(r['batch_ms'], 10)}{fmt(r['per_vector_ms'], 10)}"
                  f"{fmt(r['vectors_per_s'], 10, '.1f')}{fmt(r['median_ms'], 12)}{str(r['batch_correct']):>8}")
        print("batch = the vectors' products issued back to back against one encoded matrix, waited on once")
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    enable_compilation_cache()
    recs, errs = main(ARGS)
    print_table(recs)
    write_json(recs, ARGS.json or HERE / "results" / "hmvp.json")
    if errs:
        print("WRONG RESULTS:\n  " + "\n  ".join(errs), file=sys.stderr)
        sys.exit(1)
