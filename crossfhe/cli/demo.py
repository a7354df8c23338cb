"""``crossfhe demo``: CKKS on a small dataset (:func:`run_ckks`), and ``crossfhe demo ntt``: the ring
substrate alone (:func:`run`): the product of two random polynomials through the NTT against the
schoolbook product."""

from __future__ import annotations

import time

import jax
import numpy as np

from crossfhe.math.primes import ntt_primes
from crossfhe.progress import Bars
from crossfhe.ring import poly
from crossfhe.ring.ntt import NTTPlan


def schoolbook_product(a: np.ndarray, b: np.ndarray, moduli) -> np.ndarray:
    """Negacyclic schoolbook product per limb in NumPy uint64, O(N^2); moduli below 2^30.

    a * b = sum_j a_j X^j b, where X^j b is b shifted by j with the wrapped part negated; 16 products
    below 2^60 are summed before each reduction, which stays below 2^64.
    """
    q = np.array(moduli, dtype=np.uint64).reshape(-1, 1)
    if int(q.max()) >= 2**30:
        raise ValueError("schoolbook_product sums 16 products before reducing: moduli must be below 2^30")
    a = np.asarray(a, dtype=np.uint64)
    b = np.asarray(b, dtype=np.uint64)
    n = a.shape[-1]
    ext = np.concatenate([(q - b) % q, b], axis=-1)
    acc = np.zeros(np.broadcast_shapes(a.shape, b.shape), dtype=np.uint64)
    for j in range(n):
        acc += a[..., j : j + 1] * ext[..., n - j : 2 * n - j]
        if j % 16 == 15:
            acc %= q
    return (acc % q).astype(np.uint32)


def _median_seconds(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def run(log_n: int = 14, limbs: int = 8, bits: int = 30, seed: int | None = None) -> bool:
    n = 1 << log_n
    moduli = ntt_primes(bits, n, limbs)
    plan = NTTPlan.create(n, moduli)
    rng = np.random.default_rng(seed)
    q = np.array(moduli, dtype=np.uint64).reshape(-1, 1)
    a = poly.RNSPoly.create((rng.integers(0, 2**32, (limbs, n), dtype=np.uint64) % q).astype(np.uint32), moduli)
    b = poly.RNSPoly.create((rng.integers(0, 2**32, (limbs, n), dtype=np.uint64) % q).astype(np.uint32), moduli)
    print(f"crossfhe demo: product of two random polynomials in Z_Q[X]/(X^{n} + 1), Q = {limbs} primes of "
          f"{bits} bits (log2 Q = {sum(m.bit_length() for m in moduli)})")

    @jax.jit
    def product(x, y, p):
        return poly.to_coeff(poly.to_eval(x, p) * poly.to_eval(y, p), p)

    t0 = time.perf_counter()
    c = jax.block_until_ready(product(a, b, plan))
    compile_s = time.perf_counter() - t0
    ntt_s = _median_seconds(lambda: product(a, b, plan), reps=10)
    print(f"  through the NTT (2 forward, 1 point-wise, 1 inverse): {ntt_s * 1e3:9.2f} ms  "
          f"(median of 10; first call with compile {compile_s:.2f} s)")
    t0 = time.perf_counter()
    ref = schoolbook_product(a.data, b.data, moduli)
    school_s = time.perf_counter() - t0
    print(f"  schoolbook, O(N^2) in NumPy:                         {school_s * 1e3:9.2f} ms")
    ok = bool((np.asarray(c.data) == ref).all())
    print(f"  products equal: {ok}   speed-up {school_s / ntt_s:,.0f}x")
    return ok


# --------------------------------------------------------------------------------------------------
# CKKS
# --------------------------------------------------------------------------------------------------

def sigmoid_fit(degree: int = 3, bound: float = 8.0) -> np.ndarray:
    """Least-squares polynomial fit of the logistic function on [-bound, bound] (odd terms and the
    constant 1/2, as the function minus 1/2 is odd); coefficients in increasing degree."""
    t = np.linspace(-bound, bound, 4001)
    odd = np.arange(1, degree + 1, 2)
    coef, *_ = np.linalg.lstsq(t[:, None] ** odd, 1 / (1 + np.exp(-t)) - 0.5, rcond=None)
    out = np.zeros(degree + 1)
    out[0], out[odd] = 0.5, coef
    return out


def _dataset(rng, n: int):
    """A generated credit-scoring table: n applicants, 3 standardized features, and a logistic model."""
    income = rng.lognormal(10.5, 0.4, n)
    debt_ratio = np.clip(rng.normal(0.35, 0.12, n), 0, 1)
    late = rng.poisson(0.6, n).astype(float)
    features = np.stack([income, debt_ratio, late])
    standardized = (features - features.mean(axis=1, keepdims=True)) / features.std(axis=1, keepdims=True)
    weights, bias = np.array([0.9, -1.3, -0.8]), 0.2
    return income, standardized, weights, bias


_CKKS_STEPS = 8
"""The timed steps of :func:`run_ckks`'s pipeline."""


def _timed(label: str, fn, timings: list, progress=None):
    """fn() blocked on, its seconds appended to ``timings``; ``progress(done, total, what)`` told after it."""
    t0 = time.perf_counter()
    out = fn()
    out = jax.block_until_ready(out) if not isinstance(out, np.ndarray) else out
    timings.append((label, time.perf_counter() - t0))
    if progress is not None:
        progress(len(timings), _CKKS_STEPS, "first pass (compiles, cached on disk)")
    return out


def run_ckks(seed: int | None = None) -> bool:
    """Encrypted mean, variance and logistic-regression scores of a generated 1024-row table at the
    128-bit preset N14_L7, beside the plaintext results. The computation runs twice: the first pass
    includes JAX's compilation (cached on disk for later runs), the second shows steady-state times."""
    from crossfhe import CKKSContext
    from crossfhe.ckks import presets

    params = presets.N14_L7
    n_rows = 1024
    rng = np.random.default_rng(seed)
    income, x, w, b = _dataset(rng, n_rows)
    sig = sigmoid_fit(3, 8.0)
    print(f"crossfhe demo: CKKS at N = {params.n}, depth {params.levels}, scale 2^{params.log_scale}, "
          f"log2(PQ) = {params.log_pq:.0f} (128-bit secure preset N14_L7), {n_rows} applicants")
    t0 = time.perf_counter()
    ctx = CKKSContext.create(params, progress=True)
    keygen_s = time.perf_counter() - t0
    scaled_income = income / 1e5  # CKKS works best on values of order 1

    def pipeline(t: list, progress=None):
        e_inc = _timed("encrypt income", lambda: ctx.encrypt(scaled_income), t, progress)
        e_x = _timed("encrypt 3 standardized features", lambda: [ctx.encrypt(f) for f in x], t, progress)
        mean = _timed("mean (sum of 1024 slots, times 1/n)", lambda: e_inc.sum() * (1.0 / n_rows), t, progress)
        var = _timed("variance (E[x^2] - mean^2)",
                     lambda: (e_inc * e_inc).sum() * (1.0 / n_rows) - mean * mean, t, progress)

        def score():
            z = e_x[0] * w[0] + e_x[1] * w[1] + e_x[2] * w[2] + b
            return (z * z * sig[3] + sig[1]) * z + sig[0]

        s = _timed("logistic scores, degree-3 sigmoid", score, t, progress)
        got_mean = _timed("decrypt mean", lambda: ctx.decrypt(mean)[0] * 1e5, t, progress)
        got_var = _timed("decrypt variance", lambda: ctx.decrypt(var)[0] * 1e10, t, progress)
        got_s = _timed("decrypt scores", lambda: ctx.decrypt(s), t, progress)
        return got_mean, got_var, got_s

    t0 = time.perf_counter()
    pipeline([], Bars())
    first_s = time.perf_counter() - t0
    t: list = []
    got_mean, got_var, got_s = pipeline(t)

    want_mean, want_var = income.mean(), income.var()
    zp = w @ x + b
    want_s = sig[0] + sig[1] * zp + sig[3] * zp**3
    exact = 1 / (1 + np.exp(-zp))
    print(f"  mean income      encrypted {got_mean:14.2f}   plaintext {want_mean:14.2f}   "
          f"rel. error {abs(got_mean / want_mean - 1):.1e}")
    print(f"  income variance  encrypted {got_var:14.5e}   plaintext {want_var:14.5e}   "
          f"rel. error {abs(got_var / want_var - 1):.1e}")
    err = np.max(np.abs(got_s - want_s))
    print(f"  scores (first 4) encrypted {np.round(got_s[:4], 4)}  plaintext {np.round(want_s[:4], 4)}")
    print(f"  max |score error| over {n_rows} rows: 2^{np.log2(err):.1f}; the degree-3 sigmoid is within "
          f"{np.max(np.abs(want_s - exact)):.3f} of the exact one here; decisions agreeing: "
          f"{np.mean((got_s > 0.5) == (want_s > 0.5)):.1%}")
    print(f"  keygen (secret, public, relinearization, 13 rotation keys): {keygen_s:.1f} s; first pass with "
          f"compilation: {first_s:.1f} s. Steady state:")
    for label, sec in t:
        print(f"    {label:<44} {sec * 1e3:9.1f} ms")
    return bool(err < 1e-3 and abs(got_mean / want_mean - 1) < 1e-3 and abs(got_var / want_var - 1) < 1e-2)


def run_tfhe(seed: int | None = None) -> bool:
    """4-bit TFHE at the 128-bit preset P4: a quantized activation (ReLU of signed 4-bit values, then a
    square) evaluated as lookup tables on 16 encrypted values in one batched bootstrap, and two tables on
    the same inputs sharing one key switch (KS-dedup). Checked against the plaintext tables."""
    from crossfhe.tfhe import ops, presets

    params = presets.P4
    rng = np.random.default_rng(seed)
    xs = rng.integers(0, 16, size=16)
    print(f"crossfhe demo: TFHE at {params!r}")
    print(f"  keys: bootstrapping {params.bsk_bytes / 2**20:.0f} MiB, key switching {params.ksk_bytes / 2**20:.0f} MiB")

    def relu(m):  # m as a signed 4-bit value (two's complement), ReLU, back to [0, 16)
        return m if m < 8 else 0

    def square_mod(m):
        return m * m % 16

    t0 = time.perf_counter()
    ck, sk = ops.keygen(params, progress=True)
    keygen_s = time.perf_counter() - t0
    ct = ops.encrypt(ck, xs)
    t0 = time.perf_counter()
    out = jax.block_until_ready(ops.pbs(sk, ct, relu).b)
    first_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = ops.pbs(sk, ct, relu)
    jax.block_until_ready(out.b)
    batch_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    both = ops.pbs_many(sk, ct, [relu, square_mod])
    jax.block_until_ready(both[1].b)
    dedup_s = time.perf_counter() - t0
    got = ops.decrypt(ck, out)
    want = np.array([relu(int(m)) for m in xs])
    got2 = [ops.decrypt(ck, c) for c in both]
    want2 = [want, np.array([square_mod(int(m)) for m in xs])]
    print(f"  inputs        {xs.tolist()}")
    print(f"  relu (PBS)    {got.tolist()}  plaintext {want.tolist()}")
    print(f"  keygen {keygen_s:.1f} s; first bootstrap of the batch with compilation {first_s:.1f} s; "
          f"16 bootstraps in one batch {batch_s * 1e3:.0f} ms ({batch_s * 1e3 / 16:.0f} ms each); "
          f"two tables with one key switch {dedup_s * 1e3:.0f} ms")
    ok = bool((got == want).all() and all((g == w).all() for g, w in zip(got2, want2, strict=True)))
    print(f"  log2 p_fail per bootstrap (noise model) {params.log2_p_fail():.1f}; all outputs correct: {ok}")
    return ok
