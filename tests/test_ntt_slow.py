"""Heavy NTT checks (`make test-slow`): the largest sizes the plan accepts, against the NumPy reference
and against exact product coefficients computed with Python ints."""

import numpy as np
import pytest

from crossfhe.math.primes import ntt_primes
from crossfhe.ring import poly
from crossfhe.ring.ntt import NTTPlan, intt, ntt, ntt_reference

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("bits", [30, 31], ids=lambda b: f"logN=17/limbs=64/bits={b}")
def test_n_2_17_with_64_limbs(bits):
    n = 1 << 17
    plan = NTTPlan.create(n, ntt_primes(bits, n, 64))
    rng = np.random.default_rng(bits)
    x = (rng.integers(0, 2**32, (64, n), dtype=np.uint64) % np.asarray(plan.q).astype(np.uint64)).astype(np.uint32)
    y = np.asarray(ntt(x, plan))
    assert (y == ntt_reference(x, plan)).all()
    assert (np.asarray(intt(y, plan)) == x).all()


def test_product_coefficients_at_n_2_16():
    """Ring product through the NTT at N = 2^16, 8 limbs; 16 coefficients checked exactly:
    c_i = sum_{j <= i} a_j b_{i-j} - sum_{j > i} a_j b_{N+i-j} (mod q)."""
    n = 1 << 16
    moduli = ntt_primes(30, n, 8)
    plan = NTTPlan.create(n, moduli)
    rng = np.random.default_rng(16)
    q = np.array(moduli, dtype=np.uint64).reshape(-1, 1)
    a = poly.RNSPoly.create((rng.integers(0, 2**32, (8, n), dtype=np.uint64) % q).astype(np.uint32), moduli)
    b = poly.RNSPoly.create((rng.integers(0, 2**32, (8, n), dtype=np.uint64) % q).astype(np.uint32), moduli)
    c = np.asarray(poly.to_coeff(poly.to_eval(a, plan) * poly.to_eval(b, plan), plan).data)
    av, bv = np.asarray(a.data).astype(object), np.asarray(b.data).astype(object)
    for i in [0, 1, n // 2, n - 1, *rng.integers(0, n, 12).tolist()]:
        for li, qi in enumerate(moduli):
            head = int(np.dot(av[li, : i + 1], bv[li, i::-1]))
            tail = int(np.dot(av[li, i + 1 :], bv[li, : i : -1])) if i < n - 1 else 0
            assert int(c[li, i]) == (head - tail) % qi, (i, li)
