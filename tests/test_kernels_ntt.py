"""kernels/ntt_matrix.py: the 4-step BAT matrix NTT bit-exact with the radix-2 kernels of ring/ntt.py
(same slot order), the inverse after the forward, the [C, R] split and its offline orders, input checks."""

import numpy as np
import pytest

from crossfhe.errors import BasisMismatchError, ParameterError
from crossfhe.kernels import ntt_matrix as M
from crossfhe.math.primes import ntt_primes
from crossfhe.ring import ntt as T

# (log N, prime bit lengths): a 31-bit (>= 2^30) and a 28-bit prime in each mixed case; C = 1 (N 16, 32),
# C < R (N 64, 2^11) and C = R (N 2^10, 2^12); a 20-bit-only case takes K = 3 digits.
CASES = [
    (4, (31, 28)),
    (5, (31, 28, 30)),
    (6, (28, 31)),
    (6, (20, 20)),
    (10, (31, 28, 30)),
    (11, (31, 28)),
    (12, (28, 31, 30)),
]


def _moduli(n, bit_lengths):
    out = []
    for b in bit_lengths:
        out.append(ntt_primes(b, n, 1, exclude=out)[0])
    return tuple(out)


def _plans(log_n, bit_lengths):
    n = 1 << log_n
    moduli = _moduli(n, bit_lengths)
    return M.MatrixNTTPlan.create(n, moduli), T.NTTPlan.create(n, moduli)


def _random(plan, batch=(), seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2**32, batch + (plan.limbs, plan.n), dtype=np.uint64)
    return (x % np.array(plan.moduli, dtype=np.uint64)[:, None]).astype(np.uint32)


def _edge(plan):
    """Rows of zeros, of q - 1, and an alternating 0 / q - 1 pattern."""
    top = np.broadcast_to(np.array(plan.moduli, dtype=np.uint32)[:, None] - 1, (plan.limbs, plan.n))
    alt = np.where(np.arange(plan.n) % 2 == 0, top, 0)
    return np.stack([np.zeros_like(top), top, alt]).astype(np.uint32)


@pytest.mark.parametrize("log_n,bits", CASES, ids=[f"logN={a}/bits={'-'.join(map(str, b))}" for a, b in CASES])
def test_matches_radix2_and_inverts(log_n, bits):
    plan, ref = _plans(log_n, bits)
    x = np.concatenate([_random(plan, (3,), seed=log_n), _edge(plan)])
    y = np.asarray(M.ntt(x, plan))
    assert y.dtype == np.uint32
    assert (y == np.asarray(T.ntt(x, ref))).all()
    assert (np.asarray(M.intt(y, plan)) == x).all()
    # the inverse on its own, from evaluations that are not a forward output of the same batch
    e = _random(plan, (2,), seed=log_n + 100)
    assert (np.asarray(M.intt(e, plan)) == np.asarray(T.intt(e, ref))).all()


def test_batch_axes_and_single_limb():
    plan, ref = _plans(10, (30,))
    x = _random(plan, (2, 3), seed=7)
    y = np.asarray(M.ntt(x, plan))
    assert y.shape == x.shape and (y == np.asarray(T.ntt(x, ref))).all()
    assert (np.asarray(M.intt(y, plan)) == x).all()
    assert (np.asarray(M.ntt(x[0, 0], plan)) == y[0, 0]).all()


def test_matches_definition_small():
    plan, ref = _plans(4, (31, 28))
    x = _random(plan, (1,), seed=3)
    assert (np.asarray(M.ntt(x, plan)) == T.ntt_definition(x, ref)).all()


def test_logn14_matches_radix2():
    plan, ref = _plans(14, (31, 29))
    assert (plan.r, plan.c) == (128, 128)
    x = np.concatenate([_random(plan, (1,), seed=14), _edge(plan)[1:2]])
    y = np.asarray(M.ntt(x, plan))
    assert (y == np.asarray(T.ntt(x, ref))).all()
    assert (np.asarray(M.intt(y, plan)) == x).all()


@pytest.mark.parametrize(
    "log_n,r,c",
    [(4, 16, 1), (5, 32, 1), (6, 32, 2), (9, 32, 16), (10, 32, 32), (11, 64, 32), (16, 256, 256), (17, 512, 256)],
)
def test_shape_and_orders(log_n, r, c):
    n = 1 << log_n
    assert M.shape_of(n) == (r, c)
    sigma, tau = M._orders(n, r, c)  # asserts separability and that both are permutations
    t = (T.slot_exponents(n) - 1) // 2
    _, n2 = T.split(n)
    z = (sigma[:, None] + c * tau[None, :]).reshape(c, n2, r // n2).transpose(1, 0, 2).reshape(n)
    assert (z == t).all()


def test_table_sizes():
    plan, _ = _plans(12, (31, 28))
    k, r, c, n = 4, plan.r, plan.c, plan.n
    per_limb = 2 * (k * k * (r * r + c * c) + 8 * n)
    assert plan.nbytes == plan.limbs * per_limb


def test_rejects_bad_input():
    plan, _ = _plans(6, (31, 28))
    good = _random(plan)
    with pytest.raises(BasisMismatchError):
        M.ntt(good[:1], plan)
    with pytest.raises(BasisMismatchError):
        M.intt(np.zeros((2, 32), np.uint32), plan)
    with pytest.raises(TypeError):
        M.ntt(good.astype(np.int32), plan)
    with pytest.raises(TypeError):
        M.intt(good.astype(np.uint64), plan)
    with pytest.raises(ParameterError):
        M.MatrixNTTPlan.create(64, (97,))  # 97 = 1 mod 32, not 1 mod 128
    with pytest.raises(ParameterError):
        M.MatrixNTTPlan.create(48, _moduli(16, (28,)))
