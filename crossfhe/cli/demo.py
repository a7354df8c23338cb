"""``crossfhe demo``: what the substrate does today. Multiply two random polynomials of Z_Q[X]/(X^N + 1)
over an RNS basis through the NTT, check the product against the schoolbook product, print both times."""

from __future__ import annotations

import time

import jax
import numpy as np

from crossfhe.math.primes import ntt_primes
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
