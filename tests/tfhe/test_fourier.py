"""The float64 FFT external product (crossfhe.core.fourier): exact conversions, digits, the rounding model."""

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
from crossfhe.tfhe.params import FFT_ERROR_CONSTANT, make

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


def test_to_residues_exact_on_edges():
    """Every integer-valued float64 below 2^126, including the split's edges (parts of exactly +-2^31,
    values just below and above 2^(32 i)), maps to its exact residues."""
    plan = F.FourierPlan.create(N, MODULI, Gadget(23, 1))
    rng = np.random.default_rng(0)
    vals = []
    for e in range(126):
        for _ in range(8):
            mant = int(rng.integers(0, 2**53))
            v = mant << max(0, e - 52) if e > 52 else int(rng.integers(0, 2**e + 1))
            vals.append(-v if rng.random() < 0.5 else v)
    for i in range(4):
        for d in (-1, 0, 1):
            v = (2**31 + d) << (32 * i)
            vals += [v, -v, (2**32 << (32 * i)) - (1 << (32 * i)) if i else 2**32 - 1]
    vals = [v for v in vals if float(v) == v and abs(v) < 2**126]
    with jax.enable_x64(True):
        out = np.asarray(jax.jit(F.to_residues)(jnp.asarray(np.array([float(v) for v in vals])), plan))
    np.testing.assert_array_equal(out, np.array([[v % q for v in vals] for q in MODULI], dtype=np.uint32))


def test_centered_lift_host_and_traced():
    """centered_float (host) and centered_approx (traced) give the centered representative in (-Q/2, Q/2]
    to within float64 rounding: at most 2^-52 Q away modulo Q (at the ends of the range the rounding may
    pick the other end, the same residue class; -1 may come out as 0)."""
    rng = np.random.default_rng(1)
    vals = [int(x) for x in rng.integers(-(2**61), 2**61, size=500)] + [BIG_Q // 2, -(BIG_Q // 2) + 1, 0, 1, -1]
    res = _residues(vals)
    plan = F.FourierPlan.create(N, MODULI, Gadget(23, 1))
    host = F.centered_float(res, MODULI)
    with jax.enable_x64(True):
        traced = np.asarray(jax.jit(F.centered_approx)(jnp.asarray(res), plan))
    want = np.array([float(_centered(v)) for v in vals])
    for got in (host, traced):
        gap = np.abs(got - want)
        dist = np.minimum(gap, np.abs(gap - float(BIG_Q)))
        assert np.all(dist <= 2.0**-52 * BIG_Q) and np.all(np.abs(got) <= BIG_Q / 2), np.max(dist)


@pytest.mark.parametrize("gadget", [Gadget(23, 1), Gadget(15, 2), Gadget(10, 3), Gadget(21, 3)])
def test_gadget_digits_recompose(gadget):
    """The float digits are in range and recompose: |x - sum_j d_j g_j|_Q <= the gadget's error bound plus
    the float64 rounding of x (2^-52 Q); the exact gadget (21 x 3 >= log2 Q) recomposes to within that."""
    plan = F.FourierPlan.create(N, MODULI, gadget)
    rng = np.random.default_rng(2)
    vals = [int(x) for x in rng.integers(0, 2**62, size=(4, N)).ravel() % BIG_Q]
    res = _residues(np.array(vals, dtype=object).reshape(4, N))
    with jax.enable_x64(True):
        d = np.asarray(jax.jit(F.gadget_digits)(jnp.asarray(res), plan))  # [4, l, N]
    half = gadget.base // 2
    assert np.all(np.abs(d) <= half) and np.all(d[:, 1:] < half)
    g = gadget.vector(BIG_Q)
    dd = d.astype(np.int64).transpose(0, 2, 1).reshape(-1, gadget.levels)
    bound = float(gadget.error_bound(BIG_Q)) + 2.0**-52 * BIG_Q
    worst = max(abs(_centered(v - sum(int(x) * gj for x, gj in zip(row, g, strict=True)))) for v, row in zip(vals, dd))
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
        fplan = F.FourierPlan.create(n, moduli, gadget)
        out = jax.jit(F.external_product)(jnp.asarray(F.ggsw_to_fourier(ggsw, moduli)), jnp.asarray(glwe), fplan)
    qcol = np.array(moduli, dtype=np.int64)[:, None]
    diff = (np.asarray(out).astype(np.int64) - np.asarray(exact).astype(np.int64)) % qcol
    return F.centered_float(diff.astype(np.uint32), moduli) / math.prod(moduli)


@pytest.mark.parametrize(
    "n, gadget, k",
    [(256, Gadget(23, 1), 1), (2048, Gadget(23, 1), 1), (1024, Gadget(15, 2), 1), (512, Gadget(20, 1), 4)],
)
def test_fft_product_error_within_model(n, gadget, k):
    """The FFT product minus the exact NTT product (same digits, key rows uniform mod Q) has a variance
    within [0.5, 1] of the model var_fft = c log2(N) (k+1) l N (B^2 + 2) / 144 2^-106 (c = 2): measured
    1.44 to 1.56 of the c = 1 figure over these shapes, so 0.72 to 0.78 of the model; the sample has
    4 (k+1) N >= 2048 coefficients (relative std of the variance about 3%)."""
    err = _exact_and_fft(n, gadget, k, np.random.default_rng(3))
    params = make(3, lwe_dim=16, glwe_dim=k, poly_size=n, glwe_log2_rate=-40.0, lwe_log2_rate=-20.0,
                  pbs=(gadget.base_log, gadget.levels), ks=(4, 5), insecure=True)
    model = params.var_fft
    c1 = model / FFT_ERROR_CONSTANT
    measured = float(np.mean(err**2))
    assert 0.5 * model <= measured <= model, (measured / c1, measured, model)


def test_fourier_plan_refuses_unsuited_moduli():
    with pytest.raises(ParameterError, match="within a factor 2"):
        F.FourierPlan.create(N, (MODULI[0], 12289), Gadget(23, 1))


def test_fft_and_ntt_kernels_both_bootstrap(keys_p4):
    """The same bootstrap through either kernel decrypts to the table (INSECURE_TFHE_P4 runs the FFT under
    "auto"); an unknown kernel is refused."""
    ck, sk = keys_p4
    params = testing.INSECURE_TFHE_P4
    assert params.fft_kernel
    m = np.arange(2**params.message_bits)
    ct = ops.encrypt(ck, m, b"fourier".ljust(32, b"\0"))
    table = (3 * m + 5) % 2**params.message_bits
    for kernel in ("fft", "ntt", "auto"):
        np.testing.assert_array_equal(ops.decrypt(ck, ops.pbs(sk, ct, table, kernel=kernel)), table)
    with pytest.raises(ParameterError, match="kernel"):
        ops.pbs(sk, ct, table, kernel="gpu")


def test_fft_kernel_choice():
    """The FFT runs where its rounding is small and the accumulator is not extended: P2, P4; not P6 (28-bit
    digits at N 8192: var_fft above the exact noise), not the extended P8 and P10."""
    from crossfhe.tfhe import presets

    assert presets.P2.fft_kernel and presets.P4.fft_kernel
    assert not presets.P6.fft_kernel and presets.P6.var_fft > presets.P6.var_cmux_exact
    assert not presets.P8.fft_kernel and not presets.P10.fft_kernel
    for p in (presets.P2, presets.P4):
        assert p.var_cmux == p.var_cmux_exact + p.var_fft and p.var_fft < p.var_cmux_exact / 64
    assert presets.P6.var_cmux == presets.P6.var_cmux_exact
