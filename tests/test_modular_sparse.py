"""Tests of crossfhe.math.sparse: shift-and-add reduction modulo low-Hamming-weight moduli.

Bit-exact against Python ints (the reference) and against modular.barrett_mul / barrett_reduce_wide,
on edge and random inputs, for sparse primes of both forms 2^a + 2^b + 1 and 2^a - 2^b + 1 (and of
weight 4), under the caller's jax.jit with x64 off.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crossfhe.errors import ParameterError
from crossfhe.math import modular
from crossfhe.math.sparse import (
    MAX_FOLDS,
    SparseModulus,
    sparse_mul,
    sparse_reduce,
    sparse_reduce_wide,
)

# (q, NAF): primes, all checked below against a Miller-Rabin test.
PRIMES = {
    "2^30-2^18+1": (1073479681, ((1, 30), (-1, 18), (1, 0))),  # NTT-friendly to N = 2^17
    "2^31-2^17+1": (2147352577, ((1, 31), (-1, 17), (1, 0))),  # a = 31: leading term above q
    "2^23-2^13+1": (8380417, ((1, 23), (-1, 13), (1, 0))),  # Dilithium's prime
    "2^31-2^27+1": (2013265921, ((1, 31), (-1, 27), (1, 0))),  # slow convergence: 8 folds
    "2^30+2^13+1": (1073750017, ((1, 30), (1, 13), (1, 0))),
    "2^30+2^17+1": (1073872897, ((1, 30), (1, 17), (1, 0))),
    "2^29+2^15+1": (536903681, ((1, 29), (1, 15), (1, 0))),
    "2^30+2^25+1": (1107296257, ((1, 30), (1, 25), (1, 0))),
    "2^30-2^16-2^13+1": (1073668097, ((1, 30), (-1, 16), (-1, 13), (1, 0))),
    "2^30+2^14-2^12+1": (1073754113, ((1, 30), (1, 14), (-1, 12), (1, 0))),
    "2^16+1": (65537, ((1, 16), (1, 0))),
    "2^14-2^12+1": (12289, ((1, 14), (-1, 12), (1, 0))),  # 12289 = 2^13 + 2^12 + 1 in binary
}
IDS = list(PRIMES)


def _is_prime(n):
    if n < 2:
        return False
    for p in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37):
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37):
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _split(z):
    z = np.asarray(z, dtype=object)
    return (z >> 32).astype(np.uint32), (z & 0xFFFFFFFF).astype(np.uint32)


# One jitted function each, shared by the tests (compiles are most of this file's time): the modulus is
# a static argument of the sparse kernels, an array argument of the Barrett ones.
_barrett_wide = jax.jit(modular.barrett_reduce_wide)
_barrett_mul = jax.jit(modular.barrett_mul)
_sparse_wide = jax.jit(sparse_reduce_wide, static_argnums=2, static_argnames="input_bound")
_sparse_mul = jax.jit(sparse_mul, static_argnums=2, static_argnames="input_bound")
_BATCH = 32  # edge values are padded to this length, hypothesis draws this many: one shape


def _barrett_args(q):
    m = modular.Modulus.create(q)
    return np.uint32(m.q), np.uint32(m.barrett_mu), np.uint32(m.bits)


def _edge_values(sm):
    q, s = sm.q, sm.bits
    top = (1 << (2 * s)) - 1
    vals = [0, 1, 2, q - 1, q, q + 1, 2 * q - 1, 2 * q, (q - 1) ** 2, (q - 1) * (q - 2), q * q - 1]
    vals += [(1 << 32) - 1, 1 << 32, (1 << 32) + 1, 1 << sm.lead, (1 << sm.lead) - 1, (1 << sm.lead) + 1]
    vals += [top, top - 1, top - q, (top // q) * q, (top // q) * q - 1, 1 << (2 * s - 1)]
    vals = sorted({v for v in vals if 0 <= v <= top})
    assert len(vals) <= _BATCH
    return vals + [0] * (_BATCH - len(vals))


def _random_products(sm, n, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, sm.q, size=n, dtype=np.int64)
    b = rng.integers(0, sm.q, size=n, dtype=np.int64)
    # a quarter of the products at the top of the range: residues near q - 1
    a[: n // 4] = sm.q - 1 - a[: n // 4] % 64
    return a.astype(np.uint32), b.astype(np.uint32)


# --------------------------------------------------------------------------------------------------
# SparseModulus
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", IDS)
def test_from_q_finds_naf(name):
    q, terms = PRIMES[name]
    assert _is_prime(q)
    sm = SparseModulus.from_q(q)
    assert sm == SparseModulus(q, terms)
    assert sum(s << e for s, e in sm.terms) == q
    assert sm.bits == q.bit_length() and sm.lead == terms[0][1]
    assert hash(sm) == hash(SparseModulus(q, terms))
    assert 1 <= sm.fold_count() <= MAX_FOLDS


@pytest.mark.parametrize(
    "q",
    [
        4,  # even
        1,  # too small
        2**31 + 2**20 + 1,  # >= 2^31
        0x5555_5555,  # weight 16
        (1 << 30) + (1 << 20) + (1 << 10) + (1 << 5) + 1,  # weight 5
        1000000007,  # a dense prime
    ],
)
def test_from_q_refuses(q):
    with pytest.raises(ParameterError):
        SparseModulus.from_q(q)


def test_from_q_refuses_slow_convergence():
    # 2^29 - 2^26 + 1 is prime and sparse, but each fold gains only 3 bits: 10 folds > MAX_FOLDS.
    q = (1 << 29) - (1 << 26) + 1
    assert _is_prime(q)
    with pytest.raises(ParameterError, match="folds"):
        SparseModulus.from_q(q)


def test_constructor_checks_terms():
    with pytest.raises(ParameterError):
        SparseModulus(1073479681, ((1, 30), (-1, 18)))  # does not sum to q
    with pytest.raises(ParameterError):
        SparseModulus(1073479681, ((-1, 18), (1, 30), (1, 0)))  # not descending
    with pytest.raises(ParameterError):
        SparseModulus(5, ((1, 2), (2, 0)))  # digit 2
    sm = SparseModulus.from_q(1073479681)
    with pytest.raises(ParameterError):
        sm.fold_count(sm.max_input + 1)


def test_mersenne_31_is_sparse():
    # 2^31 - 1 = 2^31 - 2^0: weight 2, a = 31; c = -1 so a fold is z_lo + z_hi.
    sm = SparseModulus.from_q(2**31 - 1)
    assert sm.terms == ((1, 31), (-1, 0))
    z = np.array([0, 1, 2**31 - 2, (2**31 - 2) ** 2, 2**62 - 1], dtype=object)
    hi, lo = _split(z)
    out = _sparse_wide(hi, lo, sm)
    assert [int(v) for v in out] == [int(v) % sm.q for v in z]


# --------------------------------------------------------------------------------------------------
# Bit-exact reduction: edge values, random products, lazy-range maxima
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", IDS)
def test_reduce_wide_edges_match_python_and_barrett(name):
    sm = SparseModulus.from_q(PRIMES[name][0])
    z = _edge_values(sm)
    hi, lo = _split(z)
    got = _sparse_wide(hi, lo, sm)
    ref = _barrett_wide(hi, lo, *_barrett_args(sm.q))
    assert got.dtype == jnp.uint32
    np.testing.assert_array_equal(np.asarray(got), np.asarray(ref))
    assert [int(v) for v in got] == [v % sm.q for v in z]


@pytest.mark.parametrize("name", IDS)
def test_mul_random_matches_python_and_barrett(name):
    sm = SparseModulus.from_q(PRIMES[name][0])
    a, b = _random_products(sm, 4096, seed=sm.q)
    got = _sparse_mul(a, b, sm)
    ref = _barrett_mul(a, b, *_barrett_args(sm.q))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(ref))
    expected = (a.astype(object) * b.astype(object)) % sm.q
    np.testing.assert_array_equal(np.asarray(got).astype(object), expected)


@pytest.mark.parametrize("name", IDS)
def test_reduce_wide_full_domain(name):
    """input_bound = sm.max_input = 2^(a+32) - 1: edge and random z up to it."""
    sm = SparseModulus.from_q(PRIMES[name][0])
    top = sm.max_input
    rng = np.random.default_rng(sm.q + 1)
    rand = [int(x) for x in rng.integers(0, 1 << 62, size=512, dtype=np.int64)]
    rand = [(x << 2 | x & 3) % (top + 1) for x in rand]
    z = [0, 1, sm.q - 1, top, top - 1, top - sm.q, (top // sm.q) * sm.q, (1 << 32) - 1, 1 << 32] + rand
    if (2 * sm.q - 1) ** 2 <= top:  # products of lazy values in [0, 2q): q = 2^a - ..., a <= 30
        z.append((2 * sm.q - 1) ** 2)
    hi, lo = _split(z)
    got = _sparse_wide(hi, lo, sm, input_bound=top)
    assert [int(v) for v in got] == [v % sm.q for v in z]


@pytest.mark.parametrize("name", ["2^30-2^18+1", "2^30+2^13+1", "2^30-2^16-2^13+1"])
def test_lazy_inputs_products(name):
    """Products of lazy residues in [0, 2q) with input_bound = (2q - 1)^2 (where it fits the domain)."""
    sm = SparseModulus.from_q(PRIMES[name][0])
    bound = (2 * sm.q - 1) ** 2
    if bound > sm.max_input:
        with pytest.raises(ParameterError):
            sparse_mul(np.uint32(1), np.uint32(1), sm, input_bound=bound)
        return
    rng = np.random.default_rng(7)
    a = rng.integers(0, 2 * sm.q, size=1024, dtype=np.int64).astype(np.uint32)
    b = rng.integers(0, 2 * sm.q, size=1024, dtype=np.int64).astype(np.uint32)
    a[:2] = b[:2] = 2 * sm.q - 1
    got = jax.jit(lambda x, y: sparse_mul(x, y, sm, input_bound=bound))(a, b)
    np.testing.assert_array_equal(
        np.asarray(got).astype(object), (a.astype(object) * b.astype(object)) % sm.q
    )


@pytest.mark.parametrize("name", ["2^30-2^18+1", "2^30+2^17+1", "2^16+1"])
def test_reduce_single_word(name):
    sm = SparseModulus.from_q(PRIMES[name][0])
    rng = np.random.default_rng(3)
    x = np.concatenate(
        [
            np.array([0, 1, sm.q - 1, sm.q, 2**32 - 1, 2**31], dtype=np.uint32),
            rng.integers(0, 2**32, size=1024, dtype=np.uint64).astype(np.uint32),
        ]
    )
    got = jax.jit(lambda v: sparse_reduce(v, sm))(x)
    np.testing.assert_array_equal(np.asarray(got), (x.astype(np.uint64) % sm.q).astype(np.uint32))


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(IDS), st.data())
def test_reduce_wide_property(name, data):
    """Hypothesis: for any z in the default domain [0, 2^(2s)), sparse == Python == Barrett."""
    sm = SparseModulus.from_q(PRIMES[name][0])
    z = data.draw(st.lists(st.integers(0, (1 << (2 * sm.bits)) - 1), min_size=_BATCH, max_size=_BATCH))
    hi, lo = _split(z)
    got = _sparse_wide(hi, lo, sm)
    ref = _barrett_wide(hi, lo, *_barrett_args(sm.q))
    assert [int(v) for v in got] == [v % sm.q for v in z] == [int(v) for v in ref]


# --------------------------------------------------------------------------------------------------
# No 64-bit types, no multiplications
# --------------------------------------------------------------------------------------------------


def test_x64_off_and_on_agree():
    sm = SparseModulus.from_q(1073479681)
    a, b = _random_products(sm, 256, seed=11)
    assert not jax.config.jax_enable_x64
    off = _sparse_mul(a, b, sm)
    with jax.enable_x64(True):
        on = jax.jit(sparse_mul, static_argnums=2)(a, b, sm)
        assert on.dtype == jnp.uint32
    np.testing.assert_array_equal(np.asarray(off), np.asarray(on))


@pytest.mark.parametrize("name", ["2^30-2^18+1", "2^30+2^13+1", "2^30-2^16-2^13+1"])
def test_reduction_uses_only_shifts_adds_compares(name):
    """The jaxpr of sparse_reduce_wide has no multiply, divide or remainder, and only uint32 values."""
    sm = SparseModulus.from_q(PRIMES[name][0])
    hi = lo = jnp.zeros((4,), jnp.uint32)
    jaxpr = jax.make_jaxpr(lambda h, l: sparse_reduce_wide(h, l, sm))(hi, lo).jaxpr
    prims = {e.primitive.name for e in jaxpr.eqns}
    assert not prims & {"mul", "div", "rem", "integer_pow", "dot_general"}, prims
    for e in jaxpr.eqns:
        for v in e.outvars:
            assert v.aval.dtype in (jnp.uint32, jnp.bool_), (e.primitive, v.aval)


def test_fold_counts():
    """The static fold counts of the docstrings: a few folds for well-separated exponents."""
    counts = {name: SparseModulus.from_q(PRIMES[name][0]).fold_count() for name in IDS}
    assert counts["2^30-2^18+1"] == 3
    assert counts["2^30+2^13+1"] == 2
    assert counts["2^31-2^27+1"] == 8
    sm = SparseModulus.from_q(1073479681)
    assert sm.fold_count((sm.q - 1) ** 2) <= sm.fold_count() <= sm.fold_count(sm.max_input)
