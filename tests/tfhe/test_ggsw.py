"""core/ggsw.py against plain references: the negacyclic rotation equals ``ring.poly.mul_monomial``; sample
extraction's LWE phase equals coefficient 0 of the GLWE phase (schoolbook ``negacyclic_convolution`` in
Python ints) and ``core.lwe.extract_lwe`` for k = 1; the external product of a noiseless GGSW multiplies
the phase by m exactly (exact gadget) or within the decomposition-error bound (approximate gadget), and of
a noisy GGSW within the CMux noise model of ``tfhe.params``; blind rotation equals its definition
X^(sum_i r_i b_i) ACC and a loop of ``cmux_step``.

Insecure test ring: N = 2^6, two 31-bit NTT primes (the TFHE moduli), so O(N^2) Python-int references are fast.
GGSWs are built here in NumPy from the layout in the module docstring (not with the library's key generation).
"""

from __future__ import annotations

from fractions import Fraction

import jax
import numpy as np
import pytest

from crossfhe.core import ggsw as G
from crossfhe.core.blind_rotation import NTTProduct, blind_rotate
from crossfhe.core.lwe import extract_lwe
from crossfhe.math.decompose import Gadget, RNSGadgetPlan
from crossfhe.math.modular import ModulusTable
from crossfhe.math.primes import ntt_primes
from crossfhe.math.rns import RNSBasis, compose
from crossfhe.ring.ntt import NTTPlan, negacyclic_convolution, ntt
from crossfhe.ring.poly import RNSPoly, mul_monomial
from crossfhe.tfhe.params import make

N = 64
MODULI = ntt_primes(31, N, 2)
BASIS = RNSBasis(MODULI)
BIG_Q = BASIS.product
PLAN = NTTPlan.create(N, MODULI)
_T = ModulusTable.create(MODULI)
MAC = (_T.q, _T.barrett_mu, _T.bits, _T.mont_qinv, _T.mont_r2)
QCOL = _T.q
EXACT = Gadget(16, 4)  # B^l = 2^64 >= Q ~ 2^62: sum_j d_j g_j = x exactly
APPROX = Gadget(12, 2)  # the test presets' gadget: B^l = 2^24 < Q, error <= Gadget.error_bound(Q)

_external_product = jax.jit(G.external_product)
_blind_rotate = jax.jit(blind_rotate)
_cmux_step = jax.jit(G.cmux_step)


def _uniform(rng, shape) -> np.ndarray:
    """uint32 residues [*shape, L, N] uniform in [0, q_i)."""
    q = np.array(MODULI, dtype=np.uint64).reshape(-1, 1)
    return (rng.integers(0, 2**62, tuple(shape) + (len(MODULI), N), dtype=np.uint64) % q).astype(np.uint32)


def _residues(x) -> np.ndarray:
    """Signed integers [..., N] -> uint32 residues [..., L, N]."""
    x = np.asarray(x, dtype=object)
    return np.stack([x % q for q in MODULI], axis=-2).astype(np.uint32)


def _phase(glwe, s) -> np.ndarray:
    """Phase b + sum_c a_c s_c of GLWEs uint32 [..., k+1, L, N] (COEFF) as Python ints in [0, Q): [..., N]."""
    glwe = np.asarray(glwe)
    k = glwe.shape[-3] - 1
    acc = glwe[..., k, :, :].astype(object)
    for c in range(k):
        acc = acc + negacyclic_convolution(glwe[..., c, :, :], _residues(s[c]), MODULI).astype(object)
    q = np.array(MODULI, dtype=object).reshape(-1, 1)
    return compose((acc % q).astype(np.uint32), BASIS)


def _centered(x) -> np.ndarray:
    """Integers mod Q -> centered representatives (object array)."""
    x = np.asarray(x, dtype=object) % BIG_Q
    return np.where(x > BIG_Q // 2, x - BIG_Q, x)


def _ggsw(m: int, s, gadget: Gadget, rng, *, noise=None, trivial: bool = False) -> np.ndarray:
    """GGSW of m under s (int [k, N]) in the EVAL domain: [(k+1) l, k+1, L, N]. Row c l + j: GLWE of zero
    (uniform masks, or zero masks when ``trivial``; body noise ``noise[row]``, int [(k+1) l, N], or none)
    plus m g_j on component c."""
    k, levels = s.shape[0], gadget.levels
    rows = (k + 1) * levels
    out = np.zeros((rows, k + 1, len(MODULI), N), dtype=np.uint32)
    g = gadget.vector(BIG_Q)
    q = np.array(MODULI, dtype=object).reshape(-1, 1)
    for r in range(rows):
        c, j = divmod(r, levels)
        masks = np.zeros((k, len(MODULI), N), np.uint32) if trivial else _uniform(rng, (k,))
        body = np.zeros((len(MODULI), N), dtype=object) if noise is None else _residues(noise[r]).astype(object)
        for cc in range(k):
            body = body - negacyclic_convolution(masks[cc], _residues(s[cc]), MODULI).astype(object)
        glwe = np.concatenate([masks.astype(object), (body % q)[None]], axis=0)
        glwe[c, :, 0] = (glwe[c, :, 0] + np.array([m * g[j] % qi for qi in MODULI], dtype=object)) % q[:, 0]
        out[r] = glwe.astype(np.uint32)
    return np.asarray(ntt(out, PLAN))


def _key(rng, k: int) -> np.ndarray:
    return rng.integers(0, 2, (k, N)).astype(np.int64)


# --------------------------------------------------------------------------------------------------
# rotate_mod, sample_extract
# --------------------------------------------------------------------------------------------------


def test_rotate_mod_equals_mul_monomial_per_item_shifts():
    """Coefficient-exact against mul_monomial, one different shift per batch item (0, N, wrap-arounds)."""
    rng = np.random.default_rng(1)
    shifts = np.array([0, 1, N - 1, N, N + 3, 2 * N - 1, 17], dtype=np.int32)
    x = _uniform(rng, (len(shifts), 3))  # an extra axis between batch and limbs
    out = np.asarray(G.rotate_mod(x, shifts, QCOL))
    for i, sh in enumerate(shifts):
        ref = mul_monomial(RNSPoly.create(x[i], MODULI), int(sh))
        np.testing.assert_array_equal(out[i], np.asarray(ref.data), err_msg=f"shift {sh}")


def test_rotate_mod_inverse_and_composition():
    """X^s X^(2N - s) = 1 and X^s X^t = X^((s + t) mod 2N): exact."""
    rng = np.random.default_rng(2)
    s = rng.integers(0, 2 * N, 5).astype(np.int32)
    t = rng.integers(0, 2 * N, 5).astype(np.int32)
    x = _uniform(rng, (5,))
    back = G.rotate_mod(G.rotate_mod(x, s, QCOL), (2 * N - s) % (2 * N), QCOL)
    np.testing.assert_array_equal(np.asarray(back), x)
    two = G.rotate_mod(G.rotate_mod(x, s, QCOL), t, QCOL)
    np.testing.assert_array_equal(np.asarray(two), np.asarray(G.rotate_mod(x, (s + t) % (2 * N), QCOL)))


@pytest.mark.parametrize("k", [1, 2], ids=lambda k: f"k={k}")
def test_sample_extract_phase_is_coefficient_zero(k):
    """b + <a, s> (s the flattened key) equals coefficient 0 of b + sum_c a_c s_c, for any GLWE words."""
    rng = np.random.default_rng(10 + k)
    glwe = _uniform(rng, (3, k + 1))
    s = _key(rng, k)
    b, a = G.sample_extract(glwe, QCOL)
    b, a = np.asarray(b), np.asarray(a)
    assert b.shape == (3, len(MODULI)) and a.shape == (3, len(MODULI), k * N)
    q = np.array(MODULI, dtype=object)
    lwe_phase = (b.astype(object) + (a.astype(object) * s.reshape(-1)).sum(axis=-1)) % q
    got = compose(lwe_phase[..., None].astype(np.uint32), BASIS)[..., 0]
    np.testing.assert_array_equal(got, _phase(glwe, s)[..., 0])


def test_sample_extract_equals_extract_lwe_for_k1():
    """k = 1: the same words as core.lwe.extract_lwe(body, mask, 0) (the RLWE extraction of coefficient 0)."""
    rng = np.random.default_rng(12)
    glwe = _uniform(rng, (4, 2))
    b, a = G.sample_extract(glwe, QCOL)
    ref = extract_lwe(RNSPoly.create(glwe[:, 1], MODULI), RNSPoly.create(glwe[:, 0], MODULI), 0)
    np.testing.assert_array_equal(np.asarray(b), np.asarray(ref.b))
    np.testing.assert_array_equal(np.asarray(a), np.asarray(ref.a))


# --------------------------------------------------------------------------------------------------
# external product
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2], ids=lambda k: f"k={k}")
@pytest.mark.parametrize("m", [0, 1, 2])
def test_external_product_exact_gadget_noiseless_is_exact(k, m):
    """Exact gadget (B^l >= Q), noiseless GGSW under a real key: phase(out) = m phase(in) mod Q exactly."""
    rng = np.random.default_rng(20 + 3 * k + m)
    s = _key(rng, k)
    ggsw = _ggsw(m, s, EXACT, rng)
    glwe = _uniform(rng, (3, k + 1))
    out = _external_product(ggsw, glwe, PLAN, RNSGadgetPlan.create(BASIS, EXACT), MAC)
    np.testing.assert_array_equal(_phase(out, s), (m * _phase(glwe, s)) % BIG_Q)


def test_external_product_trivial_ggsw_componentwise():
    """Zero masks, zero noise, approximate gadget: each output component is m (input component - eps), eps the
    decomposition error, |eps| <= error_bound(Q) per coefficient (no key needed); m = 0 gives exactly 0."""
    rng = np.random.default_rng(30)
    s = np.zeros((1, N), np.int64)
    gplan = RNSGadgetPlan.create(BASIS, APPROX)
    glwe = _uniform(rng, (4, 2))
    bound = APPROX.error_bound(BIG_Q)
    for m in (0, 1):
        out = _external_product(_ggsw(m, s, APPROX, rng, trivial=True), glwe, PLAN, gplan, MAC)
        diff = _centered(compose(np.asarray(out), BASIS) - m * compose(glwe, BASIS))
        worst = max(abs(int(v)) for v in diff.ravel())
        assert worst <= m * bound, (m, worst, float(bound))
        if m == 1:
            assert worst > bound / 4  # the rounding error is really there (uniform-ish up to the bound)


@pytest.mark.parametrize("k", [1, 2], ids=lambda k: f"k={k}")
def test_external_product_approx_gadget_noiseless_within_bound(k):
    """Noiseless GGSW of m under a real key, approximate gadget: |phase(out) - m phase(in)| <= m (kN + 1) eps,
    eps = Gadget.error_bound(Q) (each of the k N key coefficients and the body meets one decomposition error)."""
    rng = np.random.default_rng(40 + k)
    s = _key(rng, k)
    gplan = RNSGadgetPlan.create(BASIS, APPROX)
    glwe = _uniform(rng, (3, k + 1))
    bound = (k * N + 1) * APPROX.error_bound(BIG_Q)
    assert bound < Fraction(BIG_Q, 2**16)  # the bound is meaningful: far below Q
    for m in (0, 1):
        out = _external_product(_ggsw(m, s, APPROX, rng), glwe, PLAN, gplan, MAC)
        diff = _centered(_phase(out, s) - m * _phase(glwe, s))
        worst = max(abs(int(v)) for v in diff.ravel())
        assert worst <= m * bound, (m, worst, float(bound))


@pytest.mark.parametrize(
    "m, log2_rate",
    [(0, -33.0), (1, -33.0), (1, None)],
    ids=["m=0/digit-noise", "m=1/digit-noise", "m=1/noiseless-decomposition-error"],
)
def test_external_product_noise_within_cmux_model(m, log2_rate):
    """GGSW of m with noise std 2^log2_rate Q (where the digit-noise term dominates) or none (the decomposition
    error alone); inputs: 64 GLWEs of random messages m_in Delta. The output decrypts to m m_in; the variance
    of phase(out) - m phase(in) over the 64 x 64 coefficients is within [0.8, 1.2] of the prediction for
    this key and this GGSW noise, and at most 1.3 var_cmux of tfhe.params (the model: E[e^2] = sigma^2 and
    the mean Hamming weight k N / 2 in place of the realized ones).

    Prediction given the key (Hamming weight h) and the GGSW noise e_r: E[d^2] sum_r ||e_r||^2 / Q^2 (each
    output coefficient sums d e over every coefficient of every row, digits uniform in [-B/2, B/2):
    E[d^2] = (B^2 + 2) / 12) + m (h + 1) B^(-2l) / 12 (decomposition error, uniform, against (s, 1)).
    Intervals, from the spread of measured / predicted over 30 seeds: the coefficients of one product are
    correlated through the fixed key (a binary key has a large mean, so neighbouring outputs share most
    terms), giving a relative std of 4.8% for the decomposition-error case and 2.4% for the digit case:
    +-20% is > 4 std. Against the model the realized GGSW noise (256 draws) adds sqrt(2/256) = 8.8%
    (measured std 8%): 1.3 is > 3.5 std."""
    k, p = 1, 3
    params = make(p, lwe_dim=16, glwe_dim=k, poly_size=N, glwe_log2_rate=-33.0 if log2_rate is None else log2_rate,
                  lwe_log2_rate=-22.0, pbs=(APPROX.base_log, APPROX.levels), ks=(4, 5), insecure=True)
    assert params.moduli == MODULI
    rng = np.random.default_rng(50 + m + (log2_rate is None))
    s = _key(rng, k)
    rows = (k + 1) * APPROX.levels
    e = None if log2_rate is None else np.rint(rng.normal(0.0, params.glwe_sigma, (rows, N))).astype(np.int64)
    ggsw = _ggsw(m, s, APPROX, rng, noise=e)
    msgs = rng.integers(0, 2**p, (64, N))
    glwe = _encrypt_glwe(msgs * params.delta, s, rng)
    out = _external_product(ggsw, glwe, PLAN, RNSGadgetPlan.create(BASIS, APPROX), MAC)
    ph_out = _phase(out, s)
    decoded = ((ph_out * 2 ** (p + 1) + BIG_Q // 2) // BIG_Q) % 2 ** (p + 1)
    np.testing.assert_array_equal(decoded.astype(np.int64), m * msgs)
    err = np.array([float(v) / BIG_Q for v in _centered(ph_out - m * _phase(glwe, s)).ravel()])
    g = APPROX
    e_sq = 0.0 if e is None else float(np.sum(e.astype(np.float64) ** 2)) / BIG_Q**2
    predicted = (g.base**2 + 2) / 12 * e_sq + m * (int(s.sum()) + 1) * 4.0 ** -(g.base_log * g.levels) / 12
    measured = float(np.mean(err**2))
    assert 0.8 * predicted <= measured <= 1.2 * predicted, (measured, predicted)
    if log2_rate is not None:
        assert measured <= 1.3 * params.var_cmux, (measured, params.var_cmux)


def _encrypt_glwe(values, s, rng) -> np.ndarray:
    """k = 1 GLWEs [B, 2, L, N] (COEFF) of integer polynomials ``values`` [B, N] plus noise in [-1000, 1000)."""
    batch = values.shape[0]
    masks = _uniform(rng, (batch, 1))
    body = np.asarray(values, dtype=object) + rng.integers(-1000, 1000, (batch, N)).astype(object)
    body = _residues(body).astype(object) - negacyclic_convolution(masks[:, 0], _residues(s[0]), MODULI).astype(object)
    q = np.array(MODULI, dtype=object).reshape(-1, 1)
    return np.concatenate([masks, (body % q).astype(np.uint32)[:, None]], axis=1)


# --------------------------------------------------------------------------------------------------
# blind rotation
# --------------------------------------------------------------------------------------------------


def _negacyclic_shift(x, t: int, q: int) -> np.ndarray:
    """X^t x(X) mod (X^n + 1, q) for Python-int coefficients x [n], t in [0, 2n)."""
    n = len(x)
    out = np.empty(n, dtype=object)
    for j in range(n):
        src = (j - t) % (2 * n)
        out[j] = x[src] if src < n else -x[src - n]
    return out % q


@pytest.mark.parametrize(("k", "nu"), [(1, 0), (2, 0), (1, 2), (2, 1)], ids=lambda v: str(v))
def test_blind_rotate_equals_definition(k, nu):
    """Exact gadget, noiseless GGSWs of random bits b_i under a real key, random per-item shifts r_i in
    [0, 2N'), N' = 2^nu N: the accumulator in 2^nu components (``split_components``) has, merged back, the
    phase X^(sum_i r_i b_i) phase(ACC) in the ring of degree N' exactly (nu > 0: the extended blind rotation,
    whose components are GLWEs under S over N); and it equals, word for word, a loop of cmux_step."""
    n, batch = 5, 3
    big = N << nu
    rng = np.random.default_rng(60 + 10 * nu + k)
    s = _key(rng, k)
    bits = np.array([1, 0, 1, 1, 0])
    bsk = np.stack([_ggsw(int(b), s, EXACT, rng) for b in bits])
    shifts = rng.integers(0, 2 * big, (batch, n)).astype(np.int32)
    shifts[0] = [0, 5, big, 2 * big - 1, 7]  # a zero and a negation among the shifts
    acc = _uniform(rng, (batch, 1 << nu, k + 1))  # [B, 2^nu, k+1, L, N]
    gplan = RNSGadgetPlan.create(BASIS, EXACT)
    # the plain CMux rotation: one GGSW per step (T = 1), exps [B, n, 1], keys [n, 1, ...]
    out = np.asarray(_blind_rotate(acc, shifts[:, :, None], bsk[:, None], NTTProduct(PLAN, gplan, MAC)))
    total = (shifts.astype(np.int64) * bits).sum(axis=1) % (2 * big)
    for i in range(batch):
        # phase of each component over N, interleaved into the ring of degree N' (coefficient m 2^nu + j)
        ph_in = np.stack([_phase(acc[i, j], s) for j in range(1 << nu)], axis=-1).reshape(big)
        ph_out = np.stack([_phase(out[i, j], s) for j in range(1 << nu)], axis=-1).reshape(big)
        np.testing.assert_array_equal(ph_out, _negacyclic_shift(ph_in, int(total[i]), BIG_Q))
    loop = acc
    for i in range(n):
        loop = _cmux_step(loop, shifts[:, i], bsk[i], PLAN, gplan, MAC)
    np.testing.assert_array_equal(out, np.asarray(loop))


def test_gadget_residues():
    """g_j mod q_i as uint32 [l, L]."""
    vec = APPROX.vector(BIG_Q)
    got = G.gadget_residues(vec, MODULI)
    assert got.shape == (APPROX.levels, len(MODULI)) and got.dtype == np.uint32
    assert [[int(v) for v in row] for row in got] == [[g % q for q in MODULI] for g in vec]
