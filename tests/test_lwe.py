"""core/lwe.py: extracted LWE phases equal the RLWE phase's coefficients (schoolbook negacyclic product in
Python ints as the reference, any c0, c1, not only encryptions), the CHAM eq. (3) embedding puts the LWE
phase in the constant coefficient, both domains give the same words, and malformed inputs raise named errors.

Insecure test ring: N = 2^6, three 30-bit primes (O(N^2) Python-int references stay fast).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crossfhe.core import keys as K
from crossfhe.core import rlwe
from crossfhe.core.lwe import LWECiphertext, extract_lwe, lwe_phase, lwe_to_rlwe
from crossfhe.core.params import RingParams
from crossfhe.errors import BasisMismatchError, DomainMismatchError, ParameterError
from crossfhe.math import random as R
from crossfhe.math.primes import ntt_primes
from crossfhe.math.rns import RNSBasis, compose
from crossfhe.ring.ntt import NTTPlan, intt, negacyclic_convolution, ntt
from crossfhe.ring.poly import Domain, RNSPoly

N = 64
RING = RingParams(n=N, q=ntt_primes(30, N, 3), p=ntt_primes(31, N, 1), insecure=True)
Q = RING.q
PLAN = NTTPlan.create(N, Q)
B_E = K.gaussian_bound(K.SIGMA)


@pytest.fixture(scope="module")
def sk():
    return K.gen_secret_key(RING, R.seed_key(bytes([41]) * 32))


def _random(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    """uint32 residues [*shape, limbs, N] uniform in [0, q_i)."""
    rng = np.random.default_rng(seed)
    q = np.array(Q, dtype=np.uint64).reshape(-1, 1)
    return (rng.integers(0, 2**62, shape + (len(Q), N), dtype=np.uint64) % q).astype(np.uint32)


def _poly_pair(seed: int, batch: tuple[int, ...] = ()) -> tuple[RNSPoly, RNSPoly]:
    data = _random(seed, (2,) + batch)
    return RNSPoly.create(data[0], Q), RNSPoly.create(data[1], Q)


def _secret_residues(s) -> np.ndarray:
    s = np.asarray(s).astype(object)
    return np.stack([s % q for q in Q]).astype(np.uint32)  # [limbs, N]


def _phase_reference(c0: RNSPoly, c1: RNSPoly, s) -> np.ndarray:
    """Coefficients of c0 + c1 s mod q_i (COEFF inputs), Python ints: uint32 [..., limbs, N]."""
    prod = negacyclic_convolution(np.asarray(c1.data), _secret_residues(s), Q).astype(object)
    q = np.array(Q, dtype=object).reshape(-1, 1)
    return ((np.asarray(c0.data).astype(object) + prod) % q).astype(np.uint32)


def _to_eval(p: RNSPoly) -> RNSPoly:
    return RNSPoly.create(ntt(p.data, PLAN), p.basis, Domain.EVAL)


# --------------------------------------------------------------------------------------------------
# Extraction
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("index", [0, 1, N - 1, 37])
def test_extract_lwe_phase_is_the_rlwe_coefficient(sk, index):
    c0, c1 = _poly_pair(1, batch=(2,))
    ref = _phase_reference(c0, c1, sk.coeffs)
    lwe = extract_lwe(c0, c1, index)
    assert lwe.b.shape == (2, 3) and lwe.a.shape == (2, 3, N) and lwe.moduli == Q and lwe.n == N
    assert (np.asarray(lwe_phase(lwe, sk.coeffs)) == ref[..., index]).all()


def test_extract_lwe_batched_indices_and_eval_domain(sk):
    c0, c1 = _poly_pair(2, batch=(2,))
    ref = _phase_reference(c0, c1, sk.coeffs)  # [2, limbs, N]
    idx = [N - 1, 0, 5, 5, 33]
    lwe = extract_lwe(c0, c1, idx)
    assert lwe.b.shape == (2, len(idx), 3) and lwe.a.shape == (2, len(idx), 3, N)  # index axis after batch axes
    assert (np.asarray(lwe_phase(lwe, sk.coeffs)) == np.moveaxis(ref[..., idx], -1, -2)).all()
    from_eval = extract_lwe(_to_eval(c0), _to_eval(c1), np.array(idx))
    assert (np.asarray(from_eval.b) == np.asarray(lwe.b)).all()
    assert (np.asarray(from_eval.a) == np.asarray(lwe.a)).all()
    one = extract_lwe(c0, c1, 5)  # the scalar index gives the same words without the index axis
    assert (np.asarray(one.a) == np.asarray(lwe.a[:, 2])).all()


def test_extract_lwe_under_jit_with_a_traced_index():
    c0, c1 = _poly_pair(3)
    f = jax.jit(lambda c0, c1, i: extract_lwe(c0, c1, i))
    for i in (0, 9, N - 1):
        got, want = f(c0, c1, jnp.int32(i)), extract_lwe(c0, c1, i)
        assert (np.asarray(got.b) == np.asarray(want.b)).all() and (np.asarray(got.a) == np.asarray(want.a)).all()


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), index=st.integers(0, N - 1), secret=st.integers(0, 255))
def test_extract_lwe_property(seed, index, secret):
    s = K.ternary_coeffs(R.seed_key(bytes([secret]) * 32), N)
    c0, c1 = _poly_pair(seed)
    ref = _phase_reference(c0, c1, s)
    assert (np.asarray(lwe_phase(extract_lwe(c0, c1, index), s)) == ref[:, index]).all()


def test_extract_lwe_from_an_encryption(sk):
    """The LWE noise is the RLWE noise of that coefficient: |phase - m_t| <= B_e for a fresh encryption."""
    m = _random(4, ())
    c0, c1 = rlwe.encrypt_sk(sk, RNSPoly.create(ntt(jnp.asarray(m), PLAN), Q, Domain.EVAL), R.seed_key(bytes([4]) * 32))
    idx = [0, 17, N - 1]
    phase = np.asarray(lwe_phase(extract_lwe(c0, c1, idx), sk.coeffs))  # [3 indices, limbs]
    diff = (phase.T.astype(np.int64) - m[:, idx]) % np.array(Q, dtype=np.int64)[:, None]
    err = compose(diff.astype(np.uint32), RNSBasis(Q), centered=True)
    assert max(abs(int(e)) for e in err) <= B_E


# --------------------------------------------------------------------------------------------------
# Embedding (CHAM eq. 3) and the phase
# --------------------------------------------------------------------------------------------------


def _random_lwe(seed: int, batch: tuple[int, ...]) -> LWECiphertext:
    a = _random(seed, batch)
    b = _random(seed + 1, batch)[..., 0]
    return LWECiphertext.create(b, a, Q)


def test_lwe_phase_is_b_plus_inner_product(sk):
    lwe = _random_lwe(5, (3,))
    s = np.asarray(sk.coeffs).astype(object)
    a, b = np.asarray(lwe.a).astype(object), np.asarray(lwe.b).astype(object)
    want = (b + (a * s).sum(axis=-1)) % np.array(Q, dtype=object)
    assert (np.asarray(lwe_phase(lwe, sk.coeffs)).astype(object) == want).all()


@pytest.mark.parametrize("domain", [Domain.COEFF, Domain.EVAL])
def test_lwe_to_rlwe_constant_coefficient_is_the_lwe_phase(sk, domain):
    lwe = _random_lwe(6, (3,))
    c0, c1 = lwe_to_rlwe(lwe, domain=domain)
    assert c0.domain == c1.domain == domain and c0.data.shape == (3, 3, N) and c0.basis == Q
    if domain == Domain.EVAL:
        assert (np.asarray(c0.data) == np.asarray(lwe.b)[..., None]).all()  # a constant evaluates to itself
        c0, c1 = (RNSPoly.create(intt(c.data, PLAN), Q) for c in (c0, c1))
    ref = _phase_reference(c0, c1, sk.coeffs)
    assert (ref[..., 0] == np.asarray(lwe_phase(lwe, sk.coeffs))).all()
    back = extract_lwe(c0, c1, 0)  # on c1, extraction at 0 inverts the embedding
    assert (np.asarray(back.a) == np.asarray(lwe.a)).all() and (np.asarray(back.b) == np.asarray(lwe.b)).all()


# --------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------


def test_bad_indices_raise():
    c0, c1 = _poly_pair(7)
    for bad in (N, -1, [0, N]):
        with pytest.raises(ParameterError, match="out of range"):
            extract_lwe(c0, c1, bad)
    for bad in (1.5, [[1]], True, ["a"]):
        with pytest.raises(ParameterError, match="index"):
            extract_lwe(c0, c1, bad)


def test_mismatched_operands_raise(sk):
    c0, c1 = _poly_pair(8)
    other = RNSPoly.create(np.asarray(c1.data[:2]), Q[:2])
    with pytest.raises(BasisMismatchError, match="basis"):
        extract_lwe(c0, other, 0)
    with pytest.raises(DomainMismatchError, match="domains"):
        extract_lwe(c0, _to_eval(c1), 0)
    with pytest.raises(TypeError, match="RNSPoly"):
        extract_lwe(c0, np.asarray(c1.data), 0)
    with pytest.raises(TypeError, match="uint32"):
        LWECiphertext.create(np.zeros((3,), np.int32), np.zeros((3, N), np.int32), Q)
    with pytest.raises(BasisMismatchError, match="3 moduli"):
        LWECiphertext.create(np.zeros((2,), np.uint32), np.zeros((2, N), np.uint32), Q)
    lwe = _random_lwe(9, ())
    with pytest.raises(ParameterError, match="secret"):
        lwe_phase(lwe, np.zeros(N // 2, np.int32))
    with pytest.raises(ParameterError, match=r"\{-1, 0, 1\}"):
        lwe_phase(lwe, np.full(N, 2, np.int32))
    with pytest.raises(TypeError, match="Domain"):
        lwe_to_rlwe(lwe, domain="eval")
    with pytest.raises(TypeError, match="LWECiphertext"):
        lwe_to_rlwe((lwe.b, lwe.a))
