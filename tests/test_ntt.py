"""ring/ntt.py: the jitted radix-2 kernels against the NumPy reference and the O(N^2) definition;
products through the NTT against the schoolbook negacyclic convolution; inverse after forward."""


import jax
import numpy as np
import pytest

from crossfhe.errors import BasisMismatchError, ParameterError
from crossfhe.math.primes import ntt_primes
from crossfhe.ring import ntt as T

# (log N, prime bits, limbs): both lazy regimes (moduli below 2^30: [0, 4q) butterflies; 31-bit moduli:
# [0, 2q)), odd and even log N (a radix-2 pass first, or radix-4 passes only), N from 2^4 to 2^17.
CASES = [(4, 30, 2), (5, 31, 3), (6, 28, 2), (7, 30, 1), (8, 31, 2), (9, 29, 3), (10, 30, 4), (11, 31, 2),
         (12, 30, 3)]


def _plan(log_n, bits, limbs):
    n = 1 << log_n
    return T.NTTPlan.create(n, ntt_primes(bits, n, limbs))


def _random(plan, batch=(), seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2**32, batch + (plan.limbs, plan.n), dtype=np.uint64)
    return (x % np.asarray(plan.q).astype(np.uint64)).astype(np.uint32)


def _edge(plan):
    """Rows of zeros, of q - 1, and an alternating 0 / q - 1 pattern."""
    q = np.asarray(plan.q).astype(np.uint32)
    zeros = np.zeros((plan.limbs, plan.n), np.uint32)
    top = np.broadcast_to(q - 1, (plan.limbs, plan.n)).astype(np.uint32)
    alt = np.where(np.arange(plan.n) % 2 == 0, top, 0).astype(np.uint32)
    return np.stack([zeros, top, alt])


DEFAULT_RUN = {(4, "default-head"), (6, "default-head"), (8, "default-head"), (11, "default-head"),
               (8, "two-stage-head"), (11, "two-stage-head")}
"""The cases of the default run (each about 10 s cold on CI's 2 cores: it drops every compiled transform); the rest
run in ``make test-slow``."""


def _forward_cases():
    out = []
    for a, b, c in CASES:
        for head, radix4_from in (("default-head", T._FORWARD_RADIX4_FROM), ("two-stage-head", 0)):
            slow = [] if (a, head) in DEFAULT_RUN else [pytest.mark.slow]
            out.append(pytest.param(a, b, c, radix4_from, id=f"logN={a}/bits={b}/limbs={c}-{head}", marks=slow))
    return out


@pytest.mark.parametrize("log_n,bits,limbs,radix4_from", _forward_cases())
def test_forward_matches_reference_and_inverse(log_n, bits, limbs, radix4_from, monkeypatch, request):
    """Both forward heads (one or two stages per pass, chosen by size; forced here) on every case. The
    choice is made at trace time, so compiled transforms are dropped before and after."""
    jax.clear_caches()
    monkeypatch.setattr(T, "_FORWARD_RADIX4_FROM", radix4_from)
    request.addfinalizer(jax.clear_caches)
    plan = _plan(log_n, bits, limbs)
    x = np.concatenate([_random(plan, (3,), seed=log_n), _edge(plan)])
    y = np.asarray(T.ntt(x, plan))
    assert (y == T.ntt_reference(x, plan)).all()
    assert (np.asarray(T.intt(y, plan)) == x).all()
    assert (T.intt_reference(y, plan) == x).all()
    lazy = np.asarray(T.ntt_lazy(x, plan)).astype(np.int64)
    q = np.asarray(plan.q).astype(np.int64)
    assert (lazy < 2 * q).all() and ((lazy % q) == y).all()


@pytest.mark.parametrize("log_n,bits", [(4, 30), (5, 31), (6, 29)], ids=lambda v: str(v))
def test_reference_matches_definition(log_n, bits):
    plan = _plan(log_n, bits, 2)
    x = _random(plan, (2,), seed=5)
    assert (T.ntt_reference(x, plan) == T.ntt_definition(x, plan)).all()


@pytest.mark.parametrize("log_n,bits", [(4, 31), (6, 30), (8, 28), (9, 31)], ids=lambda v: str(v))
def test_product_through_ntt_is_negacyclic_convolution(log_n, bits):
    plan = _plan(log_n, bits, 2)
    a, b = _random(plan, seed=1), _random(plan, seed=2)
    q = np.asarray(plan.q).astype(np.uint64)
    pointwise = (np.asarray(T.ntt(a, plan)).astype(np.uint64) * np.asarray(T.ntt(b, plan)) % q).astype(np.uint32)
    assert (np.asarray(T.intt(pointwise, plan)) == T.negacyclic_convolution(a, b, plan.moduli)).all()


@pytest.mark.parametrize("log_n,limbs", [(13, 8), (14, 2), (15, 1), (16, 2), (17, 1)],
                         ids=lambda v: str(v))
def test_large_n_round_trip_and_reference(log_n, limbs):
    plan = _plan(log_n, 30, limbs)
    x = _random(plan, seed=log_n)
    y = np.asarray(T.ntt(x, plan))
    assert (y == T.ntt_reference(x, plan)).all()
    assert (np.asarray(T.intt(y, plan)) == x).all()


def test_64_limbs_and_batch_axes():
    plan = _plan(10, 30, 64)
    x = _random(plan, (2, 3), seed=9)
    y = np.asarray(T.ntt(x, plan))
    assert y.shape == (2, 3, 64, 1024)
    assert (y == T.ntt_reference(x, plan)).all()
    assert (np.asarray(T.intt(y, plan)) == x).all()


def test_user_jit_and_vmap_without_x64():
    assert not jax.config.jax_enable_x64
    plan = _plan(10, 31, 3)
    x = _random(plan, (4,), seed=3)

    @jax.jit
    def user_fn(p, v):
        return T.intt(T.ntt(v, p), p), T.ntt(v, p)

    back, y = user_fn(plan, x)
    assert (np.asarray(back) == x).all() and (np.asarray(y) == T.ntt_reference(x, plan)).all()
    yv = jax.vmap(lambda v: T.ntt(v, plan))(x)
    assert (np.asarray(yv) == T.ntt_reference(x, plan)).all()


def test_plan_is_cached_and_validated():
    primes = ntt_primes(30, 1024, 2)
    assert T.NTTPlan.create(1024, primes) is T.NTTPlan.create(1024, list(primes))
    with pytest.raises(ParameterError, match="power of two"):
        T.NTTPlan.create(1000, primes)
    with pytest.raises(ParameterError, match="NTT-friendly"):
        T.NTTPlan.create(1024, [primes[0], 1073741827])  # prime, but not 1 mod 2048
    with pytest.raises(ParameterError, match="distinct"):
        T.NTTPlan.create(1024, [primes[0], primes[0]])
    with pytest.raises(ParameterError, match="1 to 128"):
        T.NTTPlan.create(64, ntt_primes(30, 64, 129))
    plan = T.NTTPlan.create(1024, primes)
    with pytest.raises(BasisMismatchError, match=r"\[..., 2, 1024\]"):
        T.ntt(np.zeros((3, 1024), np.uint32), plan)
