"""ring/ntt.py: the jitted radix-2 kernels against the NumPy reference and the O(N^2) definition;
products through the NTT against the schoolbook negacyclic convolution; inverse after forward."""

import os

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
    return (x % plan.q.astype(np.uint64)).astype(np.uint32)


def _edge(plan):
    """Rows of zeros, of q - 1, and an alternating 0 / q - 1 pattern."""
    q = plan.q.astype(np.uint32)
    zeros = np.zeros((plan.limbs, plan.n), np.uint32)
    top = np.broadcast_to(q - 1, (plan.limbs, plan.n)).astype(np.uint32)
    alt = np.where(np.arange(plan.n) % 2 == 0, top, 0).astype(np.uint32)
    return np.stack([zeros, top, alt])


@pytest.mark.parametrize("radix4_from", [T._FORWARD_RADIX4_FROM, 0], ids=["default-head", "two-stage-head"])
@pytest.mark.parametrize("log_n,bits,limbs", CASES, ids=[f"logN={a}/bits={b}/limbs={c}" for a, b, c in CASES])
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
    q = plan.q.astype(np.int64)
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
    q = plan.q.astype(np.uint64)
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


def test_chunk_pool_is_per_process(monkeypatch):
    """A pool inherited through fork has no worker thread (its calls would wait forever): a process makes
    its own, keyed by its pid, and drops the parent's."""
    stale = object()
    monkeypatch.setattr(T, "PARALLEL", True)
    monkeypatch.setattr(T, "_POOL", {os.getpid() + 1: stale})
    pool = T._pool()
    assert pool is not stale and set(T._POOL) == {os.getpid()}
    assert T._pool() is pool
    if pool is not None:  # None on a one-CPU machine, where the calls stay in one thread
        assert pool.submit(lambda: 7).result(timeout=10) == 7
        pool.shutdown()


@pytest.mark.parametrize("two_threads", [False, True])
def test_limb_chunks_match_one_call(monkeypatch, two_threads, counting_pool):
    """A concrete array past CHUNK_FROM_BYTES (0 here) runs as one call per few limbs (1, and 3 of 5 limbs,
    an uneven last chunk, with batch axes) or, when a chunk holds whole polynomials, per few polynomials
    (2 and 3 of 5, uneven last pieces): the same words as one call and the reference, in the number of
    pieces the chunk size gives, with the calls made from one thread or two (a one-worker pool, as on two
    CPUs). Under jit and vmap the transform stays one piece of the caller's program. (The native kernel, which
    takes such arrays on a CPU where it is built, is off here: tests/test_ntt_native.py.)"""
    pool, submitted = counting_pool

    monkeypatch.setattr(T, "PARALLEL", True)
    monkeypatch.setattr(T, "_POOL", {os.getpid(): pool if two_threads else None})
    monkeypatch.setattr(T, "native_pays", lambda x, plan: False)
    plan = _plan(8, 30, 5)
    x = np.concatenate([_random(plan, (2,), seed=11), _edge(plan)]).reshape(5, 1, 5, plan.n)
    whole = np.asarray(T._ntt_jit(x, plan.q, plan.w, plan.w_shoup, wide=plan.wide))
    calls = []
    chunked = T._chunked
    monkeypatch.setattr(T, "_chunked", lambda *a, **k: calls.append(1) or chunked(*a, **k))
    monkeypatch.setattr(T, "CHUNK_FROM_BYTES", 0)
    split = T._split
    pieces = []
    monkeypatch.setattr(T, "_split", lambda *a, **k: pieces.append(len(out := split(*a, **k))) or out)
    for limbs, count in ((1, 25), (3, 10), (10, 3), (15, 2)):
        monkeypatch.setattr(T, "CHUNK_BYTES", 4 * plan.n * limbs)
        y = np.asarray(T.ntt(x, plan))
        assert pieces[-1] == count
        assert (y == whole).all() and (y == T.ntt_reference(x, plan)).all()
        assert (np.asarray(T.intt(y, plan)) == x).all()
        lazy = np.asarray(T.ntt_lazy(x, plan)).astype(np.int64)
        assert ((lazy % plan.q.astype(np.int64)) == y).all()
    assert len(calls) == 12 and len(submitted) == (6 if two_threads else 0)  # a pool for 4 pieces or more
    assert (np.asarray(jax.jit(T.ntt)(x, plan)) == whole).all()
    assert (np.asarray(jax.vmap(lambda v: T.intt(v, plan))(whole)) == x).all()
    assert len(calls) == 12
