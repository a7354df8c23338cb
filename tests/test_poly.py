"""ring/poly.py: ring operations exact against Python-int references; automorphisms consistent across
domains; mismatched domains or bases fail at trace time with a message."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from crossfhe.errors import BasisMismatchError, DomainMismatchError, ParameterError
from crossfhe.math.primes import ntt_primes
from crossfhe.ring import poly as P
from crossfhe.ring.ntt import NTTPlan, negacyclic_convolution

N = 64
BASIS = ntt_primes(30, N, 3)
PLAN = NTTPlan.create(N, BASIS)


def _rand(seed, batch=()):
    rng = np.random.default_rng(seed)
    q = np.array(BASIS, dtype=np.uint64).reshape(-1, 1)
    data = (rng.integers(0, 2**32, batch + (len(BASIS), N), dtype=np.uint64) % q).astype(np.uint32)
    return P.RNSPoly.create(data, BASIS)


def _ints(p):
    return np.asarray(p.data).astype(object)


def _qcol():
    return np.array(BASIS, dtype=object).reshape(-1, 1)


def test_add_sub_neg_scalar():
    a, b = _rand(1), _rand(2)
    q = _qcol()
    assert (_ints(a + b) == (_ints(a) + _ints(b)) % q).all()
    assert (_ints(a - b) == (_ints(a) - _ints(b)) % q).all()
    assert (_ints(-a) == (-_ints(a)) % q).all()
    for c in (0, 1, -1, 3, 2**70 + 5, -(2**40)):
        assert (_ints(P.mul_scalar(a, c)) == (_ints(a) * c) % q).all(), c


def test_mul_in_eval_domain_is_ring_product():
    a, b = _rand(3), _rand(4)
    prod = P.to_coeff(P.to_eval(a, PLAN) * P.to_eval(b, PLAN), PLAN)
    assert prod.domain == P.Domain.COEFF
    assert (np.asarray(prod.data) == negacyclic_convolution(a.data, b.data, BASIS)).all()


@pytest.mark.parametrize("j", [0, 1, 5, N - 1, N, N + 3, 2 * N - 1, -1, 1000])
def test_mul_monomial(j):
    a = _rand(5)
    mono = np.zeros((len(BASIS), N), np.uint32)
    jj = j % (2 * N)
    sign = -1 if jj >= N else 1
    mono[:, jj % N] = np.array([sign % q for q in BASIS], dtype=np.uint32)
    want = negacyclic_convolution(a.data, mono, BASIS)
    assert (np.asarray(P.mul_monomial(a, j).data) == want).all()


def _automorphism_reference(coeffs, k):
    out = np.zeros_like(coeffs, dtype=object)
    for i in range(N):
        e = i * k % (2 * N)
        if e < N:
            out[..., e] += coeffs[..., i]
        else:
            out[..., e - N] -= coeffs[..., i]
    return out % _qcol()


@pytest.mark.parametrize("k", [1, 3, 5, 2 * N - 1, 25, 5**7 % (2 * N)])
def test_automorphism_both_domains(k):
    a = _rand(6)
    got = P.automorphism(a, k)
    assert (_ints(got) == _automorphism_reference(_ints(a), k)).all()
    via_eval = P.to_coeff(P.automorphism(P.to_eval(a, PLAN), k), PLAN)
    assert (np.asarray(via_eval.data) == np.asarray(got.data)).all()


def test_automorphism_rejects_even_k():
    with pytest.raises(ParameterError, match="odd"):
        P.automorphism(_rand(0), 4)


def test_drop_limbs_and_domain_round_trip():
    a = _rand(7)
    d = P.drop_limbs(a, 1)
    assert d.basis == BASIS[:2] and (np.asarray(d.data) == np.asarray(a.data)[:2]).all()
    e = P.drop_limbs(P.to_eval(a, PLAN), 2)
    assert e.domain == P.Domain.EVAL and e.limbs == 1
    assert (np.asarray(P.to_coeff(P.to_eval(a, PLAN), PLAN).data) == np.asarray(a.data)).all()
    with pytest.raises(ParameterError, match="at least one"):
        P.drop_limbs(a, 3)


def test_mismatches_fail_when_traced():
    a = _rand(1)
    ev = P.to_eval(a, PLAN)
    other = P.drop_limbs(_rand(2), 1)
    with pytest.raises(DomainMismatchError, match="COEFF and EVAL"):
        jax.jit(P.add)(a, ev)
    with pytest.raises(BasisMismatchError, match="different bases"):
        jax.jit(P.sub)(a, P.RNSPoly.create(np.zeros((3, N), np.uint32), ntt_primes(29, N, 3)))
    with pytest.raises(BasisMismatchError):
        P.add(P.drop_limbs(a, 1), other.__class__(other.data[..., :1, :], other.basis[:1], other.domain))
    with pytest.raises(DomainMismatchError, match="needs the EVAL domain"):
        jax.jit(P.mul)(a, a)
    with pytest.raises(DomainMismatchError, match="COEFF domain"):
        P.mul_monomial(ev, 1)
    with pytest.raises(BasisMismatchError, match="does not match the polynomial"):
        P.to_eval(P.drop_limbs(a, 1), PLAN)
    with pytest.raises(BasisMismatchError, match="basis of 2 moduli"):
        P.RNSPoly.create(np.zeros((3, N), np.uint32), BASIS[:2])
    with pytest.raises(TypeError, match="uint32"):
        P.RNSPoly.create(np.zeros((3, N), np.int64), BASIS)


def test_pytree_under_user_jit_and_vmap():
    assert not jax.config.jax_enable_x64
    a, b = _rand(8, (4,)), _rand(9, (4,))

    @jax.jit
    def user_fn(x, y):
        return P.to_coeff(P.to_eval(x, PLAN) * P.to_eval(y, PLAN), PLAN)

    got = user_fn(a, b)
    assert isinstance(got, P.RNSPoly) and got.data.dtype == jnp.uint32
    assert (np.asarray(got.data) == negacyclic_convolution(a.data, b.data, BASIS)).all()
    mapped = jax.vmap(lambda x, y: P.automorphism(x + y, 3))(a, b)
    for i in range(4):
        one = P.automorphism(P.RNSPoly.create(a.data[i], BASIS) + P.RNSPoly.create(b.data[i], BASIS), 3)
        assert (np.asarray(mapped.data[i]) == np.asarray(one.data)).all()
