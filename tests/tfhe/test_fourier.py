"""The float64 FFT blind rotation (crossfhe.core.fourier): exact conversions, digits, the rounding model."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from crossfhe import testing
from crossfhe.core import fourier as F
from crossfhe.core import ggsw as G
from crossfhe.errors import ParameterError
from crossfhe.math import primes
from crossfhe.math.decompose import Gadget, RNSGadgetPlan
from crossfhe.math.modular import ModulusTable
from crossfhe.math.rns import RNSBasis
from crossfhe.ring.ntt import NTTPlan, ntt
from crossfhe.tfhe import ops
from crossfhe.tfhe.params import FFT_ERROR_CONSTANT, FFT_MARGIN, make

N = 1024
MODULI = tuple(primes.ntt_primes(31, N, 2))
BIG_Q = math.prod(MODULI)


def _residues(values, moduli=MODULI) -> np.ndarray:
    """Python ints [..., N] (any sign) -> uint32 residues [..., L, N]."""
    arr = np.asarray(values, dtype=object)
    return np.stack([(arr % q).astype(np.uint32) for q in moduli], axis=-2)


def _centered(v: int, q: int = BIG_Q) -> int:
    v %= q
    return v - q if v > q // 2 else v


def _plan(gadget=None):
    return F.FourierPlan.create(N, MODULI, gadget or Gadget(23, 1))


def test_reduce_mod_q_exact_on_edges():
    """Every integer-valued float64 y with |y| < 2^48 Q maps to y mod Q exactly, including values next to
    multiples of Q, of 2^32 and of 2^64 (the split's edges) and the largest allowed magnitudes."""
    rng = np.random.default_rng(0)
    vals = []
    for e in range(0, 110):
        for _ in range(8):
            v = int(rng.integers(0, 2**53)) << max(0, e - 52) if e > 52 else int(rng.integers(0, 2**e + 1))
            vals.append(-v if rng.random() < 0.5 else v)
    for m in (1, 2, 3, 2**20 + 1, 2**40 + 7, 2**47 + 3):
        for d in (-(2**12), -1, 0, 1, 2**12):
            vals += [m * BIG_Q + d, -(m * BIG_Q) + d]
    for i in (1, 2, 3):
        for d in (-1, 0, 1):
            vals += [(2**31 + d) << (32 * i), -((2**31 + d) << (32 * i)), (1 << (32 * i)) - 1]
    vals = [int(float(v)) for v in vals if abs(v) < 2**48 * BIG_Q]  # the float64 values themselves
    with jax.enable_x64(True):
        out = np.asarray(jax.jit(F.reduce_mod_q)(jnp.asarray(np.array([float(v) for v in vals])), _plan()))
    np.testing.assert_array_equal(out, np.array([v % BIG_Q for v in vals], dtype=np.uint64))


def test_compose_decompose_exact():
    """Residues <-> one word in [0, Q): the CRT value, and back, for random values and the ends."""
    rng = np.random.default_rng(1)
    vals = [int(x) for x in rng.integers(0, 2**62, size=2000) % BIG_Q] + [0, 1, BIG_Q - 1, BIG_Q // 2]
    res = _residues(vals)
    with jax.enable_x64(True):
        word = np.asarray(jax.jit(F.compose)(jnp.asarray(res), _plan()))
        back = np.asarray(jax.jit(F.decompose)(jnp.asarray(word), _plan()))
    np.testing.assert_array_equal(word, np.array(vals, dtype=np.uint64))
    np.testing.assert_array_equal(back, res)


def test_centered_float_host():
    """centered_float gives the centered representative in (-Q/2, Q/2] to within float64 rounding: at most
    2^-52 Q away modulo Q (near +-Q/2 the rounding may pick the other end, the same class)."""
    rng = np.random.default_rng(1)
    vals = [int(x) for x in rng.integers(-(2**61), 2**61, size=500)] + [BIG_Q // 2, -(BIG_Q // 2) + 1, 0, 1, -1]
    got = F.centered_float(_residues(vals), MODULI)
    want = np.array([float(_centered(v)) for v in vals])
    gap = np.abs(got - want)
    dist = np.minimum(gap, np.abs(gap - float(BIG_Q)))
    assert np.all(dist <= 2.0**-52 * BIG_Q) and np.all(np.abs(got) <= BIG_Q / 2), np.max(dist)


@pytest.mark.parametrize("gadget", [Gadget(23, 1), Gadget(15, 2), Gadget(10, 3), Gadget(21, 3)])
def test_gadget_digits_recompose(gadget):
    """The float digits are in range and recompose: |x - sum_j d_j g_j|_Q <= the gadget's error bound plus
    the float64 rounding of x (2^-52 Q); the exact gadget (21 x 3 >= log2 Q) recomposes to within that."""
    rng = np.random.default_rng(2)
    vals = [int(x) for x in rng.integers(0, 2**62, size=4 * N) % BIG_Q] + [0, BIG_Q - 1, BIG_Q // 2]
    with jax.enable_x64(True):
        d = np.asarray(jax.jit(F.gadget_digits)(jnp.asarray(np.array(vals, dtype=np.uint64)), _plan(gadget)))
    half = gadget.base // 2
    assert np.all(np.abs(d) <= half) and np.all(d[1:] < half)
    g = gadget.vector(BIG_Q)
    rows = d.astype(np.int64).T  # [values, l]
    bound = float(gadget.error_bound(BIG_Q)) + 2.0**-52 * BIG_Q
    worst = max(abs(_centered(v - sum(int(x) * gj for x, gj in zip(r, g, strict=True)))) for v, r in zip(vals, rows))
    assert worst <= bound, (worst, bound)


def _exact_and_fft(n, gadget, k, rng, batch=4):
    moduli = tuple(primes.ntt_primes(31, n, 2))
    rows, k1 = (k + 1) * gadget.levels, k + 1
    big = rng.integers(0, 2**62, size=(rows, k1, n), dtype=np.int64)
    ggsw = np.stack([(big % q).astype(np.uint32) for q in moduli], axis=-2)  # uniform mod Q (as key rows)
    gb = rng.integers(0, 2**62, size=(batch, k1, n), dtype=np.int64)
    glwe = np.stack([(gb % q).astype(np.uint32) for q in moduli], axis=-2)
    plan = NTTPlan.create(n, moduli, None)
    t = ModulusTable.create(moduli)
    mac = (t.q, t.barrett_mu, t.bits, t.mont_qinv, t.mont_r2)
    gplan = RNSGadgetPlan.create(RNSBasis(moduli), gadget)
    exact = jax.jit(G.external_product)(ntt(jnp.asarray(ggsw), plan), jnp.asarray(glwe), plan, gplan, mac)
    with jax.enable_x64(True):
        fplan = F.FourierPlan.create(n, moduli, gadget, k)

        def product(g, x, plan):
            return F.decompose(F.external_product(g, F.compose(x, plan), plan), plan)

        out = jax.jit(product)(jnp.asarray(F.ggsw_to_fourier(ggsw, moduli)), jnp.asarray(glwe), fplan)
    qcol = np.array(moduli, dtype=np.int64)[:, None]
    diff = (np.asarray(out).astype(np.int64) - np.asarray(exact).astype(np.int64)) % qcol
    return F.centered_float(diff.astype(np.uint32), moduli) / math.prod(moduli)


@pytest.mark.parametrize(
    "n, gadget, k",
    [(256, Gadget(23, 1), 1), (2048, Gadget(23, 1), 1), (1024, Gadget(15, 2), 1), (512, Gadget(20, 1), 4)],
)
def test_fft_product_error_within_model(n, gadget, k):
    """The FFT product minus the exact NTT product (same digits, key rows uniform mod Q) has a variance
    within [0.5, 1] of the model var_fft = c log2(N) (k+1) l N (B^2 + 2) / 144 2^-106 (c = 2.5): measured
    1.44 to 1.56 of the c = 1 figure over these shapes on XLA:CPU, so 0.58 to 0.62 of the model, and 1.70 to
    1.99 on an H100 (0.68 to 0.80); the sample has
    4 (k+1) N >= 2048 coefficients (relative std of the variance about 3%)."""
    err = _exact_and_fft(n, gadget, k, np.random.default_rng(3))
    params = make(3, lwe_dim=16, glwe_dim=k, poly_size=n, glwe_log2_rate=-40.0, lwe_log2_rate=-20.0,
                  pbs=(gadget.base_log, gadget.levels), ks=(4, 5), insecure=True)
    model = params.var_fft
    c1 = model / FFT_ERROR_CONSTANT
    measured = float(np.mean(err**2))
    assert 0.5 * model <= measured <= model, (measured / c1, measured, model)


def test_fourier_plan_refuses_unsuited_parameters():
    """Q >= 2^63 (three 31-bit primes) is refused."""
    three = tuple(primes.ntt_primes(31, N, 3))
    with pytest.raises(ParameterError, match="Q < 2\\^63"):
        F.FourierPlan.create(N, three, Gadget(23, 1))
    assert not F.supports(three, N, Gadget(23, 1), 1) and F.supports(MODULI, N, Gadget(23, 1), 1)


def test_fft_and_ntt_kernels_both_bootstrap(keys_p4):
    """The same bootstrap through either kernel (the key prepared for FFTProduct, NTTProduct, or the default)
    decrypts to the table (INSECURE_TFHE_P4 runs the FFT by default); an unknown product is refused."""
    ck, sk = keys_p4
    params = testing.INSECURE_TFHE_P4
    assert params.fft_kernel and sk.product is ops.FFTProduct
    m = np.arange(2**params.message_bits)
    ct = ops.encrypt(ck, m, key=b"fourier".ljust(32, b"\0"))
    table = (3 * m + 5) % 2**params.message_bits
    for product in (ops.FFTProduct, ops.NTTProduct, None):
        key = ops.prepare(sk, product=product)
        assert key.product is (product or ops.FFTProduct)
        np.testing.assert_array_equal(ops.decrypt(ck, ops.pbs(key, ct, table)), table)
    with pytest.raises(ParameterError, match="product must be one of"):
        ops.prepare(sk, product="gpu")


def test_fft_kernel_choice():
    """The FFT runs where its rounding (phase variance (kN/2 + 1) var_fft per product, over the blind
    rotation, times nu^2) is at most 1/64 of the decision variance with exact products, or where p_fail with
    it counted four times over stays at most 2^-64: every preset (P4, P8, P4_128 and P10 by the second rule);
    not a set with 28-bit digits at N 8192 (the former P6: the rounding alone far above the decision
    variance), which bootstraps through the NTT and whose model then has no FFT term."""
    from crossfhe.tfhe import presets

    for p in presets.PRESETS.values():
        assert p.fft_kernel
        assert p.var_cmux == p.var_cmux_exact + p.var_fft_phase
        rest = p.var_round_q + p.var_ks + p.var_round_2n
        exact = p.norm2 * p.groups * (p.var_step - p.var_step_fft) + rest
        extra = p.norm2 * p.groups * p.var_step_fft
        # 1/64 of the exact decision variance, or p_fail still <= 2^-64 with the rounding four times over
        assert extra <= exact / 64 or p._log2_p_fail_at(exact + FFT_MARGIN * extra) <= -64, p.name
    wide = make(6, lwe_dim=977, glwe_dim=1, poly_size=8192, glwe_sigma=3.19, lwe_log2_rate=-21.66, pbs=(28, 1),
                ks=(2, 9), name="N8192")
    assert not wide.fft_kernel and wide.norm2 * wide.lwe_dim * wide.var_fft_phase > wide.var_decision()
    assert wide.var_cmux == wide.var_cmux_exact


@pytest.mark.parametrize("nu", [0, 1, 3])
def test_rotate_equals_component_rotation(nu):
    """The one-gather rotation of the FFT path equals crossfhe.core.ggsw.rotate_components for every shift
    in [0, 2^(nu+1) N) (N 16)."""
    n, comps = 16, 1 << nu
    shifts = np.arange(2 * n * comps, dtype=np.int32)
    rng = np.random.default_rng(4)
    q = np.uint32(MODULI[0])
    x = rng.integers(0, q, size=(1, comps, 2, n)).astype(np.uint32)
    x = jnp.asarray(np.broadcast_to(x, (shifts.size, comps, 2, n)))
    want = G.rotate_components(x[:, :, :, None, :], jnp.asarray(shifts), jnp.asarray(q))[:, :, :, 0, :]
    got = jax.jit(F.rotate)(x, jnp.asarray(shifts), jnp.asarray(q))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
