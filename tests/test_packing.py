"""convert/packing.py: PackLWEs + field trace put input i's constant coefficient at coefficient i N/n and
clear every other coefficient (the inputs carry uniform garbage there), within the derived noise bound;
pack_two_lwes and field_trace compose to pack_lwes bit for bit; missing keys and mismatches raise.

Insecure test ring: N = 2^8, three 30-bit ciphertext primes (ciphertexts at k = 2 of them), one 31-bit
special prime, dnum = 3. The tree compiles one kernel per batch shape (N/2, N/4, ..., 1; each holds a key
switch and took 5-12 s to compile on the 2-core dev machine), so m = N/2 and N run at N = 2^8, not 2^10:
measured cold (empty compilation cache, one CPU) about 50 s CPU for this file at 2^8, while the ten
compilations at 2^10 alone took about 70 s.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest

from crossfhe.convert import packing as PK
from crossfhe.core import keys as K
from crossfhe.core import keyswitch as KS
from crossfhe.core import rlwe
from crossfhe.core.lwe import extract_lwe
from crossfhe.core.params import RingParams
from crossfhe.errors import BasisMismatchError, DomainMismatchError, ParameterError
from crossfhe.math import random as R
from crossfhe.math.primes import ntt_primes
from crossfhe.math.rns import RNSBasis, compose, decompose
from crossfhe.ring.ntt import NTTPlan, intt, ntt
from crossfhe.ring.poly import Domain, RNSPoly

LOG_N = 8
N = 2**LOG_N
RING = RingParams(n=N, q=ntt_primes(30, N, 3), p=ntt_primes(31, N, 1), insecure=True)
DNUM = 3
KA = 2  # active limbs of the ciphertexts
QK = RING.q[:KA]
BIG_Q = math.prod(QK)
PLAN = NTTPlan.create(N, QK)
DELTA = BIG_Q // 256  # messages mu in [0, 256)
B_E = K.gaussian_bound(K.SIGMA)
BOUND = PK.pack_noise_bound(N, QK, RING.p, DNUM, q_limbs=len(RING.q), input_noise=B_E)


def _key(i: int) -> R.ChaChaKey:
    return R.seed_key(bytes([i]) * 32)


@pytest.fixture(scope="module")
def sk():
    return K.gen_secret_key(RING, _key(61))


@pytest.fixture(scope="module")
def keys(sk):
    return PK.gen_packing_keys(sk, RING, _key(62), dnum=DNUM)


@pytest.fixture(scope="module")
def inputs(sk):
    """N encryptions (EVAL, over QK) of messages with Delta mu_i in the constant coefficient and uniform
    garbage elsewhere; the tests pack prefixes. Returns (c0, c1, mu, messages as Python ints [N, N])."""
    rng = np.random.default_rng(63)
    mu = rng.integers(0, 256, N)
    msg = np.array([[int(v) for v in row] for row in rng.integers(0, 2**62, (N, N))], dtype=object) % BIG_Q
    msg[:, 0] = [DELTA * int(v) for v in mu]
    pt = RNSPoly.create(ntt(jnp.asarray(decompose(msg, RNSBasis(QK))), PLAN), QK, Domain.EVAL)
    c0, c1 = rlwe.encrypt_sk(sk, pt, _key(64))
    return c0, c1, mu, msg


def _rows(p: RNSPoly, rows) -> RNSPoly:
    return RNSPoly(p.data[rows], p.basis, p.domain)


def _phase(sk, c0: RNSPoly, c1: RNSPoly) -> np.ndarray:
    """Centered coefficients (Python ints) of c0 + c1 s."""
    return compose(np.asarray(intt(rlwe.decrypt(sk, (c0, c1)).data, PLAN)), RNSBasis(QK), centered=True)


def _centered(x: np.ndarray) -> np.ndarray:
    x = x % BIG_Q
    return np.where(x > BIG_Q // 2, x - BIG_Q, x)


def _max_abs(x) -> int:
    return max(abs(int(v)) for v in np.ravel(x))


# --------------------------------------------------------------------------------------------------
# Keys and bound
# --------------------------------------------------------------------------------------------------


def test_packing_galois_elements_and_keys(keys):
    assert PK.packing_galois_elements(16) == (3, 5, 9, 17)
    assert tuple(sorted(keys)) == PK.packing_galois_elements(N) == tuple(2**l + 1 for l in range(1, LOG_N + 1))
    assert all(k.dnum == DNUM and k.q == RING.q for k in keys.values())
    with pytest.raises(ParameterError, match="power of two"):
        PK.packing_galois_elements(48)


def test_pack_noise_bound_formula():
    b_ks = KS.keyswitch_noise_bound(N, QK, RING.p, DNUM, q_limbs=3)
    assert BOUND == (N - 1) * b_ks + B_E
    unnormalized = PK.pack_noise_bound(N, QK, RING.p, DNUM, q_limbs=3, input_noise=B_E, normalize=False)
    assert unnormalized == (N - 1) * b_ks + N * B_E
    assert BOUND < DELTA // 2  # the test messages decode


def test_monomial_tables_are_the_ntt_of_x_to_the_shift():
    """The EVAL tables of X^(N/2^l) (NumPy square-and-multiply) equal the NTT kernel's output bit for bit."""
    for shift in (0, 1, N // 2, N // 8, N - 1):
        x = np.zeros((KA, N), np.uint32)
        x[:, shift] = 1
        assert (PK._monomial(N, QK, shift) == np.asarray(ntt(jnp.asarray(x), PLAN))).all()


# --------------------------------------------------------------------------------------------------
# Packing
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("m", [1, 2, 3, N // 2, N], ids=lambda m: f"logN={LOG_N}/m={m}")
def test_pack_lwes_places_input_i_at_coefficient_i_N_over_n(sk, keys, inputs, m):
    c0, c1, mu, _ = inputs
    p0, p1 = PK.pack_lwes(_rows(c0, slice(m)), _rows(c1, slice(m)), keys)
    assert p0.data.shape == (KA, N) and p0.domain == Domain.EVAL and p0.basis == QK
    n = 1 << (m - 1).bit_length()
    want = np.zeros(N, dtype=object)
    want[: m * (N // n) : N // n] = [DELTA * int(v) for v in mu[:m]]
    err = _max_abs(_centered(_phase(sk, p0, p1) - want))
    assert err <= BOUND


def test_pack_lwes_without_normalization_multiplies_by_n(sk, keys, inputs):
    c0, c1, mu, _ = inputs
    p0, p1 = PK.pack_lwes(_rows(c0, slice(3)), _rows(c1, slice(3)), keys, normalize=False)
    want = np.zeros(N, dtype=object)
    want[: 3 * N // 4 : N // 4] = [N * DELTA * int(v) for v in mu[:3]]
    bound = PK.pack_noise_bound(N, QK, RING.p, DNUM, q_limbs=3, input_noise=B_E, normalize=False)
    assert _max_abs(_centered(_phase(sk, p0, p1) - want)) <= bound


def test_pack_two_lwes_and_field_trace_compose_to_pack_lwes(keys, inputs):
    """PackLWEs of 4 = trace(PackTwo_2(PackTwo_1(ct_0..1, ct_2..3))), bit for bit (unnormalized)."""
    c0, c1 = inputs[0], inputs[1]
    four = (_rows(c0, slice(4)), _rows(c1, slice(4)))
    level1 = PK.pack_two_lwes(
        tuple(_rows(c, slice(2)) for c in four), tuple(_rows(c, slice(2, 4)) for c in four), keys, level=1
    )
    level2 = PK.pack_two_lwes(
        tuple(_rows(c, slice(1)) for c in level1), tuple(_rows(c, slice(1, 2)) for c in level1), keys, level=2
    )
    t0, t1 = PK.field_trace(*level2, keys, n=4)
    p0, p1 = PK.pack_lwes(*four, keys, normalize=False)
    assert (np.asarray(t0.data[0]) == np.asarray(p0.data)).all()
    assert (np.asarray(t1.data[0]) == np.asarray(p1.data)).all()


def test_field_trace_keeps_multiples_of_n_over_n(sk, keys, inputs):
    """Tr_{K_2N/K_2n}: coefficient j -> (N/n) phi_j when N/n divides j, else 0; noise <= (N/n - 1) B_ks +
    (N/n) B_e."""
    c0, c1, _, msg = inputs
    n = N // 8
    t0, t1 = PK.field_trace(_rows(c0, slice(5, 6)), _rows(c1, slice(5, 6)), keys, n=n)
    want = np.zeros(N, dtype=object)
    want[:: N // n] = (N // n) * msg[5, :: N // n]
    b_ks = KS.keyswitch_noise_bound(N, QK, RING.p, DNUM, q_limbs=3)
    assert _max_abs(_centered(_phase(sk, _rows(t0, 0), _rows(t1, 0)) - want)) <= (N // n - 1) * b_ks + (N // n) * B_E
    same = PK.field_trace(t0, t1, keys, n=N)  # n = N: nothing to trace
    assert same[0] is t0 and same[1] is t1


def test_pack_lwe_ciphertexts_after_extraction(sk, keys, inputs):
    """The CHAM flow: extract coefficients of one RLWE ciphertext as LWE, pack them into one RLWE."""
    c0, c1, _, msg = inputs
    idx = [7, 0, N - 1]
    lwes = extract_lwe(_rows(c0, 9), _rows(c1, 9), idx)
    p0, p1 = PK.pack_lwe_ciphertexts(lwes, keys)
    want = np.zeros(N, dtype=object)
    want[: 3 * N // 4 : N // 4] = msg[9, idx]
    assert _max_abs(_centered(_phase(sk, p0, p1) - want)) <= BOUND


# --------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------


def test_missing_key_and_bad_inputs_raise(sk, keys, inputs):
    c0, c1 = _rows(inputs[0], slice(2)), _rows(inputs[1], slice(2))
    partial = {g: k for g, k in keys.items() if g != 2**4 + 1}
    with pytest.raises(ParameterError, match=r"no Galois key for element 17 .*gen_packing_keys"):
        PK.pack_lwes(c0, c1, partial)
    with pytest.raises(ParameterError, match="m in"):
        PK.pack_lwes(_rows(c0, slice(0)), _rows(c1, slice(0)), keys)
    with pytest.raises(BasisMismatchError, match=r"\[m, k, N\]"):
        PK.pack_lwes(_rows(c0, 0), _rows(c1, 0), keys)
    other = RingParams(n=N, q=RING.q[1:], p=RING.p, insecure=True)  # not a prefix of the keys' q
    shifted = tuple(RNSPoly(c.data, other.q, Domain.EVAL) for c in (c0, c1))
    with pytest.raises(BasisMismatchError, match="prefix"):
        PK.pack_lwes(*shifted, keys)
    coeff = tuple(RNSPoly(c.data, c.basis, Domain.COEFF) for c in (c0, c1))
    with pytest.raises(DomainMismatchError, match="EVAL"):
        PK.pack_lwes(*coeff, keys)
    with pytest.raises(ParameterError, match="level"):
        PK.pack_two_lwes((c0, c1), (c0, c1), keys, level=LOG_N + 1)
    with pytest.raises(BasisMismatchError, match="one basis and shape"):
        PK.pack_two_lwes((c0, c1), (_rows(c0, slice(1)), _rows(c1, slice(1))), keys, level=1)
    with pytest.raises(ParameterError, match="divide"):
        PK.field_trace(c0, c1, keys, n=2 * N)
