"""ckks/encoder.py: the special FFT against the O(N^2) canonical embedding, encode/decode precision against
the rounding bound, the slot order pinned by the automorphisms (X^5 rotates left, X^(2N-1) conjugates),
products at scale^2, exact reduction at large scales, and the error messages."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crossfhe.ckks import encoder as E
from crossfhe.errors import BasisMismatchError, ParameterError
from crossfhe.math.primes import ntt_primes
from crossfhe.math.rns import RNSBasis, decompose
from crossfhe.ring import poly as P
from crossfhe.ring.ntt import NTTPlan


def _rand_slots(seed, shape, amplitude=1.0):
    rng = np.random.default_rng(seed)
    return amplitude * (rng.uniform(-1, 1, shape) + 1j * rng.uniform(-1, 1, shape))


def _float_slack(s, z):
    """Float64 error of an encode/decode round trip (two FFTs of size s, a division): 2^-50 log2(2s) max|z|."""
    return 2.0**-50 * np.log2(2 * s) * max(1.0, float(np.max(np.abs(z))))


def _exact_residues(m, scale, moduli):
    """Reference: the Python int nearest to the float64 product scale * m_k, reduced mod each q_i."""
    x = np.rint(np.asarray(m) * scale)
    ints = np.array([int(v) for v in x.ravel()], dtype=object).reshape(x.shape)
    return decompose(ints, RNSBasis(tuple(moduli)))


# --------------------------------------------------------------------------------------------------
# Special FFT and the embedding
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("log_n", range(4, 9), ids=lambda v: f"logN={v}")
def test_special_fft_matches_definition(log_n):
    n = 2**log_n
    rng = np.random.default_rng(log_n)
    m = rng.standard_normal((3, n))
    tol = 1e-13 * n
    np.testing.assert_allclose(E.embed(m), E.embed_definition(m), rtol=0, atol=tol)
    z = _rand_slots(log_n, (2, n // 2))
    coeffs = E.embed_inverse(z, n)
    assert coeffs.dtype == np.float64 and coeffs.shape == (2, n)
    np.testing.assert_allclose(coeffs, E.embed_inverse_definition(z, n), rtol=0, atol=tol)
    np.testing.assert_allclose(E.embed_definition(coeffs), z, rtol=0, atol=tol)


def test_slot_definition_spelled_out():
    """z_j = m(zeta^(5^j mod 2N)), zeta = exp(i pi / N), evaluated by Horner in Python complex numbers."""
    n = 16
    m = np.random.default_rng(0).standard_normal(n)
    zeta = np.exp(1j * np.pi / n)
    want = [sum(c * zeta ** (pow(5, j, 2 * n) * k % (2 * n)) for k, c in enumerate(m)) for j in range(n // 2)]
    np.testing.assert_allclose(E.embed(m), want, atol=1e-13)


@pytest.mark.parametrize("s", [1, 2, 4, 64, 2**12])
def test_special_fft_inverse(s):
    w = _rand_slots(s, (2, s))
    np.testing.assert_allclose(E.special_fft_inverse(E.special_fft(w)), w, atol=1e-14 * np.log2(2 * s))
    np.testing.assert_allclose(E.special_fft(E.special_fft_inverse(w)), w, atol=1e-14 * np.log2(2 * s))


def test_special_fft_jax_matches_numpy():
    s = 2**9
    w = _rand_slots(7, (3, s))
    plan = E.SpecialFFTPlan.create(s)
    want = E.special_fft(w)
    got32 = E.special_fft_jax(jnp.asarray(w), plan)  # x64 off: complex64
    assert got32.dtype == jnp.complex64
    np.testing.assert_allclose(np.asarray(got32), want, atol=1e-4)
    got_user_jit = jax.jit(lambda x: E.special_fft_jax(x, plan))(jnp.asarray(w))
    np.testing.assert_allclose(np.asarray(got_user_jit), want, atol=1e-4)
    with jax.enable_x64(True):
        got64 = E.special_fft_jax(jnp.asarray(w, dtype=jnp.complex128), plan)
        assert got64.dtype == jnp.complex128
        np.testing.assert_allclose(np.asarray(got64), want, rtol=0, atol=1e-12)
    with pytest.raises(ParameterError, match="plan is for"):
        E.special_fft_jax(jnp.ones(8, jnp.complex64), plan)


# --------------------------------------------------------------------------------------------------
# Encode / decode
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("log_scale", [30, 40], ids=lambda v: f"logscale={v}")
@pytest.mark.parametrize("log_n", range(10, 14), ids=lambda v: f"logN={v}")
def test_round_trip_within_rounding_bound(log_n, log_scale):
    """decode(encode(z)) - z = embed(e) / scale with |e_k| <= 1/2 on the N non-zero coefficients, so every
    slot is within (N/2) / scale (plus float64 error of the FFTs); the residues are exact."""
    n, scale = 2**log_n, 2.0**log_scale
    moduli = ntt_primes(30, n, 2)
    z = _rand_slots(log_n, (n // 2,))
    pt = E.encode(z, n=n, moduli=moduli, scale=scale)
    assert pt.dtype == np.uint32 and pt.shape == (2, n)
    assert (pt < np.array(moduli, dtype=np.uint32)[:, None]).all()
    assert (pt == _exact_residues(E.embed_inverse(z, n), scale, moduli)).all()
    err = np.max(np.abs(E.decode(pt, moduli=moduli, scale=scale) - z))
    bound = (n / 2) / scale + _float_slack(n // 2, z)
    assert err <= bound, f"measured {err:.3e} > predicted {bound:.3e}"


@pytest.mark.parametrize("s", [1, 2, 8, 64, 256])
def test_sparse_packing_replicates(s):
    n = 2**10
    moduli = ntt_primes(30, n, 2)
    scale = 2.0**40
    z = _rand_slots(s, (2, s))
    coeffs = E.embed_inverse(z, n)
    g = n // (2 * s)
    off_stride = np.ones(n, bool)
    off_stride[::g] = False
    assert (coeffs[..., off_stride] == 0).all()
    np.testing.assert_allclose(coeffs, E.embed_inverse(np.tile(z, (1, g)), n), atol=1e-14)
    pt = E.encode(z, n=n, moduli=moduli, scale=scale)
    assert pt.shape == (2, 2, n)
    bound = s / scale + _float_slack(n // 2, z)
    assert np.max(np.abs(E.decode(pt, moduli=moduli, scale=scale, slots=s) - z)) <= bound
    assert np.max(np.abs(E.decode(pt, moduli=moduli, scale=scale) - np.tile(z, (1, g)))) <= bound


def test_real_input():
    n = 2**8
    moduli = ntt_primes(30, n, 2)
    x = np.random.default_rng(3).uniform(-5, 5, n // 2)
    pt = E.encode(x, n=n, moduli=moduli, scale=2**30)
    assert (pt == E.encode(x.astype(complex), n=n, moduli=moduli, scale=2**30)).all()
    got = E.decode(pt, moduli=moduli, scale=2**30)
    assert np.max(np.abs(got - x)) <= (n / 2) / 2**30 + _float_slack(n // 2, x)
    ints = E.encode(np.arange(4), n=n, moduli=moduli, scale=2**20)  # integer and list inputs
    assert (ints == E.encode([0.0, 1.0, 2.0, 3.0], n=n, moduli=moduli, scale=2**20)).all()


def test_decode_accepts_jax_arrays_and_batches():
    n = 2**8
    moduli = ntt_primes(30, n, 3)
    z = _rand_slots(4, (2, 3, n // 2))
    pt = E.encode(z, n=n, moduli=moduli, scale=2**40)
    assert pt.shape == (2, 3, 3, n)
    got = E.decode(jnp.asarray(pt), moduli=moduli, scale=2**40)
    assert got.shape == z.shape and got.dtype == np.complex128
    assert np.max(np.abs(got - z)) <= (n / 2) / 2**40 + _float_slack(n // 2, z)


@settings(max_examples=25, deadline=None)
@given(
    log_n=st.integers(1, 9),
    log_s=st.integers(0, 8),
    log_scale=st.integers(20, 62),
    amplitude=st.floats(1e-3, 1e3),
    seed=st.integers(0, 2**32 - 1),
)
def test_round_trip_property(log_n, log_s, log_scale, amplitude, seed):
    n = 2**log_n
    s = 2 ** min(log_s, log_n - 1)
    moduli = ntt_primes(30, 2**9, 3)  # Q ~ 2^90 > 2 * 2^62 * 2^10 * s
    z = _rand_slots(seed, (s,), amplitude)
    pt = E.encode(z, n=n, moduli=moduli, scale=2**log_scale)
    err = np.max(np.abs(E.decode(pt, moduli=moduli, scale=2**log_scale, slots=s) - z))
    assert err <= s / 2**log_scale + _float_slack(s, z)


# --------------------------------------------------------------------------------------------------
# Slot order: automorphisms
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("s", [2**9, 16], ids=lambda v: f"slots={v}")
def test_automorphisms_rotate_and_conjugate(s):
    """X -> X^(5^r mod 2N) rotates the slots left by r; X -> X^(2N-1) conjugates them."""
    n = 2**10
    moduli = ntt_primes(30, n, 2)
    scale = 2.0**40
    z = _rand_slots(11, (s,))
    pt = P.RNSPoly.create(jnp.asarray(E.encode(z, n=n, moduli=moduli, scale=scale)), moduli)
    bound = s / scale + _float_slack(s, z)
    for r in (1, 3, s - 1, 1000):
        rotated = P.automorphism(pt, pow(5, r, 2 * n))
        got = E.decode(rotated.data, moduli=moduli, scale=scale, slots=s)
        assert np.max(np.abs(got - np.roll(z, -r))) <= bound, r
    conj = P.automorphism(pt, 2 * n - 1)
    assert np.max(np.abs(E.decode(conj.data, moduli=moduli, scale=scale, slots=s) - np.conj(z))) <= bound


# --------------------------------------------------------------------------------------------------
# Products and scalars
# --------------------------------------------------------------------------------------------------


def test_product_decodes_at_scale_squared():
    """(Delta m1 + e1)(Delta m2 + e2) decodes at Delta^2 to z1 z2 within (|z1| + |z2|) (N/2) / Delta
    + ((N/2) / Delta)^2 (each rounding error has slots of size at most N/2)."""
    n, scale = 2**10, 2.0**25
    moduli = ntt_primes(30, n, 3)
    plan = NTTPlan.create(n, moduli)
    z1, z2 = _rand_slots(1, (n // 2,)), _rand_slots(2, (n // 2,))
    polys = [
        P.to_eval(P.RNSPoly.create(jnp.asarray(E.encode(z, n=n, moduli=moduli, scale=scale)), moduli), plan)
        for z in (z1, z2)
    ]
    prod = P.to_coeff(polys[0] * polys[1], plan)
    got = E.decode(prod.data, moduli=moduli, scale=scale**2)
    eps = (n / 2) / scale
    bound = (np.max(np.abs(z1)) + np.max(np.abs(z2))) * eps + eps**2 + _float_slack(n // 2, z1 * z2)
    assert np.max(np.abs(got - z1 * z2)) <= bound


def test_scalar_constant():
    n = 2**8
    moduli = ntt_primes(30, n, 3)
    scale = 2.0**30
    c = -2.75
    pt = E.encode_scalar_constant(c, moduli=moduli, scale=scale)
    assert pt.shape == (3,) and pt.dtype == np.uint32
    assert [int(v) for v in pt] == [int(round(c * scale)) % q for q in moduli]
    poly = np.zeros((3, n), np.uint32)
    poly[:, 0] = pt
    np.testing.assert_allclose(E.decode(poly, moduli=moduli, scale=scale), np.full(n // 2, c), atol=1e-12)
    big = E.encode_scalar_constant(3.0 + 0j, moduli=ntt_primes(30, n, 4), scale=2**100)
    assert [int(v) for v in big] == [3 * 2**100 % q for q in ntt_primes(30, n, 4)]


# --------------------------------------------------------------------------------------------------
# Large scales: exact reduction
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("log_scale", "limbs", "amplitude"),
    [(60, 3, 1.0), (62, 3, 64.0), (100, 4, 1.0)],
    ids=["logscale=60/L=3", "logscale=62/L=3/above-2^63", "logscale=100/L=4"],
)
def test_large_scale_residues_are_exact(log_scale, limbs, amplitude):
    n = 2**9
    moduli = ntt_primes(30, n, limbs)
    scale = 2.0**log_scale
    z = _rand_slots(log_scale, (n // 2,), amplitude)
    m = E.embed_inverse(z, n)
    pt = E.encode(z, n=n, moduli=moduli, scale=scale)
    assert (pt == _exact_residues(m, scale, moduli)).all()
    if amplitude > 1:
        assert np.max(np.abs(m * scale)) > 2.0**63  # the split path (mantissa times a power of two) is used
    got = E.decode(pt, moduli=moduli, scale=scale)
    assert np.max(np.abs(got - z)) <= _float_slack(n // 2, z) + (n / 2) / scale


@pytest.mark.parametrize("bits", [20, 31])
def test_device_reduction_gives_the_host_words(bits):
    """integral_residues (the reduction ops.encode runs on the device) gives the words of the host reduction, which
    the tests above check against Python integers: zeros, signs, |x| below and above 2^53 (up to 2^1000), powers of
    two, a batch axis; moduli of 20 and 31 bits."""
    n = 2**9
    moduli = tuple(ntt_primes(bits, n, 3))
    rng = np.random.default_rng(bits)
    exps = rng.integers(0, 1000, (2, n))
    x = np.rint(np.ldexp(rng.uniform(-1, 1, (2, n)), exps))
    x[0, :4] = [0.0, -0.0, 2.0**53, -(2.0**70)]
    x[1, :3] = [2.0**53 - 1, -(2.0**53) - 2, 1.0]
    want = E._integral_floats_to_residues(x, moduli)
    assert (want == _exact_residues(x, 1.0, moduli)).all()
    assert np.array_equal(np.asarray(E.integral_residues(x, moduli)), want)


@settings(max_examples=60, deadline=None)
@given(st.floats(-(2.0**200), 2.0**200, allow_nan=False, allow_infinity=False))
def test_any_magnitude_reduces_exactly(c):
    moduli = ntt_primes(30, 2**4, 7)  # Q ~ 2^210
    got = E.encode_scalar_constant(c, moduli=moduli, scale=1)
    want = int(np.rint(c))
    assert [int(v) for v in got] == [want % q for q in moduli]


# --------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------


def test_overflow_is_refused():
    n = 2**8
    moduli = ntt_primes(30, n, 2)  # log2(Q) = 60.00
    z = _rand_slots(0, (n // 2,))
    with pytest.raises(ParameterError, match=r"wrap.*scale 2\^62\.00.*max \|coefficient\|.*log2\(Q\) = 60\.00"):
        E.encode(z, n=n, moduli=moduli, scale=2**62)
    with pytest.raises(ParameterError, match="wrap"):
        E.encode_scalar_constant(1.0, moduli=moduli, scale=2**60)
    with pytest.raises(ParameterError, match="not finite"):
        E.encode(z * 1e10, n=n, moduli=moduli, scale=2.0**1020)


def test_error_messages():
    n = 2**6
    moduli = ntt_primes(30, n, 2)
    ok = np.ones(n // 2)
    for bad_slots in (3, n, 0):
        with pytest.raises(ParameterError, match=f"power of two dividing N/2 = {n // 2}.*got {bad_slots}"):
            E.encode(np.ones(bad_slots), n=n, moduli=moduli, scale=2**20)
    with pytest.raises(ParameterError, match="finite"):
        E.encode(np.array([1.0, np.nan]), n=n, moduli=moduli, scale=2**20)
    with pytest.raises(ParameterError, match="finite"):
        E.encode(np.array([1.0, 1j * np.inf]), n=n, moduli=moduli, scale=2**20)
    for scale in (0, -1.0, float("nan"), float("inf"), "big"):
        with pytest.raises(ParameterError, match="scale must be a positive finite number"):
            E.encode(ok, n=n, moduli=moduli, scale=scale)
    with pytest.raises(ParameterError, match="power of two"):
        E.encode(ok, n=48, moduli=moduli, scale=2**20)
    with pytest.raises(ParameterError, match="slot axis"):
        E.encode(1.0, n=n, moduli=moduli, scale=2**20)
    with pytest.raises(ParameterError, match="only real constants"):
        E.encode_scalar_constant(1 + 2j, moduli=moduli, scale=2**20)
    with pytest.raises(ParameterError, match="finite"):
        E.encode_scalar_constant(float("inf"), moduli=moduli, scale=2**20)
    pt = E.encode(ok, n=n, moduli=moduli, scale=2**20)
    with pytest.raises(BasisMismatchError, match=r"expected residues of shape \[\.\.\., 3, N\]"):
        E.decode(pt, moduli=ntt_primes(30, n, 3), scale=2**20)
    with pytest.raises(ParameterError, match="power of two dividing N/2"):
        E.decode(pt, moduli=moduli, scale=2**20, slots=5)
    with pytest.raises(ParameterError, match="ring degree"):
        E.slots(12)
    assert E.slots(2**14) == 2**13
