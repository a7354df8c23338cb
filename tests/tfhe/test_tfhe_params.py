"""tfhe/params.py and tfhe/presets.py: every preset passes the security check and has p_fail <= 2^-64 (and the
figures of the presets' docstring table); less noise than a published point's rate, or a smaller dimension,
is refused; p_fail is monotone in the squared norm; variance formulas against direct computations
(enumerating the digit and rounding distributions, and math.erfc); malformed fields raise ParameterError.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from crossfhe import testing
from crossfhe.errors import InsecureParametersError, ParameterError
from crossfhe.math.decompose import Gadget
from crossfhe.tfhe import presets
from crossfhe.tfhe.params import KS_MODULUS_BITS, PUBLISHED_LWE_POINTS, Params, make

PRESETS = list(presets.PRESETS.values())
IDS = [p.name for p in PRESETS]

# the table of crossfhe/tfhe/presets.py: log2 p_fail, BSK and KSK sizes in MB (10^6 bytes)
DOCUMENTED = {"P2": (-120.2, 80, 26), "P4": (-108.0, 82, 48), "P6": (-135.8, 192, 48),
              "P7": (-129.4, 192, 80), "P8": (-128.4, 218, 100),
              "P10": (-176.6, 145, 100), "P2_128": (-175.0, 77, 19), "P4_128": (-128.9, 96, 24),
              "P6_128": (-135.8, 192, 48)}


def _published_rate(dim: int) -> float:
    return min(r for d, r in PUBLISHED_LWE_POINTS if d <= dim)


# --------------------------------------------------------------------------------------------------
# presets
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("params", PRESETS, ids=IDS)
def test_preset_secure_and_fails_below_2_to_64(params):
    assert not params.insecure
    params._check_security()  # raises InsecureParametersError if not covered
    assert dataclasses.replace(params) == params  # re-running every check succeeds
    assert params.log2_p_fail() <= -64
    assert params.norm2 == 2**params.message_bits + 1


@pytest.mark.parametrize("params", PRESETS, ids=IDS)
def test_preset_documented_figures(params):
    p_fail, bsk_mb, ksk_mb = DOCUMENTED[params.name]
    assert round(params.log2_p_fail(), 1) == p_fail
    assert round(params.bsk_bytes / 1e6) == bsk_mb and round(params.ksk_bytes / 1e6) == ksk_mb
    assert params.log_q > 61.9 and len(params.moduli) == 2


def test_presets_distinct_and_p10():
    """One preset per even p in 2..10, and P7; P6 to P10 by the extended blind rotation, whose rounding to 2N'
    is what p = 10 needs: the same keys without it (nu = 0) miss even 2^-1, with half the ring (nu = 6) 2^-128.
    P7 is P6's short key and gadget over twice its accumulator; at P6's accumulator it misses 2^-64."""
    base = [k for k in presets.PRESETS if not k.endswith("_128")]  # the 2^-64 family (the 2^-128 one: its own file)
    assert sorted(base, key=lambda k: int(k[1:])) == ["P2", "P4", "P6", "P7", "P8", "P10"]
    family = [presets.PRESETS[k] for k in base]
    assert [p.message_bits for p in family] == [2, 4, 6, 7, 8, 10]
    assert (presets.P7.lwe_dim, presets.P7.pbs_gadget) == (presets.P6.lwe_dim, presets.P6.pbs_gadget)
    assert presets.P7.acc_size == 2 * presets.P6.acc_size == 2**14
    assert dataclasses.replace(presets.P7, extension=2).log2_p_fail() > -64
    # P6_128 is P6's parameters under the 2^-128 name (test_presets_128.py): one digest for both
    assert len({p.digest() for p in PRESETS}) == len(PRESETS) - 1
    assert presets.P10.acc_size == 2**18 and presets.P8.acc_size == 2**15
    assert dataclasses.replace(presets.P10, extension=0).log2_p_fail() > -5
    assert dataclasses.replace(presets.P10, extension=6).log2_p_fail() > -128


@pytest.mark.parametrize("params", PRESETS, ids=IDS)
def test_less_noise_than_published_refused(params):
    """Each preset sits on (or above) a published rate: a little less noise on either key is refused."""
    lwe_ref = _published_rate(params.lwe_dim)
    glwe_ref = _published_rate(params.long_dim)
    with pytest.raises(InsecureParametersError, match="short LWE key"):
        dataclasses.replace(params, lwe_sigma=2.0 ** (lwe_ref - 0.01) * 2**KS_MODULUS_BITS)
    with pytest.raises(InsecureParametersError, match="GLWE key"):
        dataclasses.replace(params, glwe_sigma=2.0 ** (glwe_ref - 0.01) * params.big_q)
    # the same with insecure=True is accepted; at exactly the published rate it is secure
    assert dataclasses.replace(params, lwe_sigma=params.lwe_sigma / 2, insecure=True).insecure
    dataclasses.replace(params, lwe_sigma=2.0**lwe_ref * 2**KS_MODULUS_BITS)


def test_smaller_dimension_refused():
    """n 800 at P4's rate: the covering point is (781, 2^-16.78), which needs more noise; n 780: no point."""
    with pytest.raises(InsecureParametersError, match="need >= -16.78"):
        dataclasses.replace(presets.P4, lwe_dim=800)
    with pytest.raises(InsecureParametersError, match="no published 128-bit point"):
        dataclasses.replace(presets.P2, lwe_dim=780)
    with pytest.raises(InsecureParametersError, match="GLWE key"):
        make(4, lwe_dim=833, glwe_dim=1, poly_size=1024, glwe_log2_rate=-48.32, lwe_log2_rate=-18.08,
             pbs=(23, 1), ks=(2, 7))


@pytest.mark.parametrize("params", [testing.INSECURE_TFHE_P2, testing.INSECURE_TFHE_P4, testing.INSECURE_TFHE_P6])
def test_test_presets_refused_without_insecure(params):
    with pytest.raises(InsecureParametersError, match="insecure=True"):
        dataclasses.replace(params, insecure=False)


# --------------------------------------------------------------------------------------------------
# noise model
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("params", PRESETS + [testing.INSECURE_TFHE_P4], ids=IDS + ["INSECURE_P4"])
def test_p_fail_monotone_in_norm2(params):
    norms = np.geomspace(1e-3, 1e6, 60)
    fails = [params.log2_p_fail(float(v)) for v in norms]
    assert all(a < b for a, b in zip(fails, fails[1:]))
    # var_decision is affine in norm2 with slope max(var_pbs, var_fresh)
    slope = max(params.var_pbs, params.var_fresh)
    assert math.isclose(params.var_decision(10.0) - params.var_decision(2.0), 8 * slope, rel_tol=1e-9)
    assert params.var_decision() == params.var_decision(params.norm2)


@pytest.mark.parametrize("params", PRESETS, ids=IDS)
def test_p_fail_equals_erfc(params):
    """log2 p_fail = log2 erfc(1 / (2^(p+2) sqrt(2 var_decision))), math.erfc where it does not underflow."""
    for nu2 in (1.0, float(params.norm2), 1e4):
        z = 1.0 / (2 ** (params.message_bits + 2) * math.sqrt(2 * params.var_decision(nu2)))
        assert math.isclose(params.log2_p_fail(nu2), math.log2(math.erfc(z)), rel_tol=1e-12)


def test_p_fail_far_tail_matches_erfc():
    """The asymptotic branch (z >= 20) against math.erfc where both are defined (20 <= z < 26.5): the lwe
    dimension moves z through that range (p = 1, N 256: the rounding to 2N dominates)."""
    checked = 0
    for n in range(120, 280, 6):
        params = make(1, lwe_dim=n, glwe_dim=1, poly_size=256, glwe_log2_rate=-45.0, lwe_log2_rate=-22.0,
                      pbs=(12, 2), ks=(4, 5), insecure=True)
        z = 1.0 / (2**3 * math.sqrt(2 * params.var_decision(1.0)))
        if 20 <= z < 26:
            checked += 1
            assert math.isclose(params.log2_p_fail(1.0), math.log2(math.erfc(z)), rel_tol=1e-7), (n, z)
    assert checked >= 5


def _mean_square_balanced_digit(base: int) -> float:
    """E[d^2] for d uniform on [-B/2, B/2): enumerated."""
    d = np.arange(-base // 2, base // 2, dtype=np.float64)
    return float(np.mean(d**2))


def _mean_square_rounding(bits: int) -> float:
    """E[r^2] (units of the dropped part's modulus 2^bits) of rounding a uniform integer mod 2^bits to a
    multiple of 2^bits, nearest with ties up: r uniform on [-2^(bits-1), 2^(bits-1)). Enumerated."""
    r = np.arange(-(2 ** (bits - 1)), 2 ** (bits - 1), dtype=np.float64)
    return float(np.mean(r**2)) / 4.0**bits


@pytest.mark.parametrize(
    "params", [presets.P4, presets.P10, testing.INSECURE_TFHE_P4], ids=["P4", "P10", "INSECURE_P4"]
)
def test_var_ks_and_var_round_2n_direct(params):
    """var_ks: k N l digits, each E[d^2] (enumerated) times the KSK noise (sigma_lwe / 2^32)^2, plus k N key
    bits of mean square 1/2 times the rounding of each a_i's dropped 32 - b l bits (enumerated).
    var_round_2n: b's rounding and the a_i's against the key less their mean, n/4 + 1 roundings 2^32 -> 2N'
    (N' = 2^nu N, N with no extension) of uniform words (enumerated over the 2^(32 - log2 2N') dropped values).
    Agreement to 1e-6: the formulas use B^2/12-style closed forms whose corrections are O(2^-(dropped bits))."""
    g = params.ks_gadget
    kn = params.long_dim
    direct_ks = kn * g.levels * _mean_square_balanced_digit(g.base) * (params.lwe_sigma / 2**KS_MODULUS_BITS) ** 2
    dropped_bits = KS_MODULUS_BITS - g.base_log * g.levels
    direct_ks += kn * 0.5 * _mean_square_rounding(dropped_bits) * 4.0 ** -(g.base_log * g.levels)
    assert math.isclose(params.var_ks, direct_ks, rel_tol=1e-6)
    log2_2n = params.acc_size.bit_length()
    per = _mean_square_rounding(KS_MODULUS_BITS - log2_2n) / (2 * params.acc_size) ** 2
    assert params.centered_modulus_switch
    assert math.isclose(params.var_round_2n, (params.lwe_dim * 0.25 + 1) * per, rel_tol=1e-6)


def test_var_pbs_hand_computed():
    """INSECURE_TFHE_P4 by hand: n 64, k 1, N 1024, B 2^12, l 2, sigma = 2^-45 Q (relative, exactly); it
    bootstraps through the FFT, whose rounding term is 2.5 log2(N) (k+1) l N (B^2 + 2) / 144 2^-106 per word,
    times N/2 + 1 in the phase."""
    p = testing.INSECURE_TFHE_P4
    var_fresh = 2.0**-90
    digits = 2 * 2 * 1024 * (2**24 + 2) / 12 * var_fresh
    dropped = (1024 / 2 + 1) * 2.0**-48 / 12
    word = 2.5 * 10 * 2 * 2 * 1024 * (2**24 + 2) / 144 * 2.0**-106
    fft = (1024 / 2 + 1) * word
    assert p.fft_kernel
    assert math.isclose(p.var_fresh, var_fresh, rel_tol=1e-12)
    assert math.isclose(p.var_fft, word, rel_tol=1e-12) and math.isclose(p.var_fft_phase, fft, rel_tol=1e-12)
    assert math.isclose(p.var_cmux, digits + dropped + fft, rel_tol=1e-12)
    assert math.isclose(p.var_pbs, 64 * (digits + dropped + fft), rel_tol=1e-12)
    assert math.isclose(p.var_round_q, (1024 / 2 + 1) / 12 / 2.0**64, rel_tol=1e-12)


# --------------------------------------------------------------------------------------------------
# the parameter object
# --------------------------------------------------------------------------------------------------


def test_derived_sizes_and_delta(keys_p2):
    p = testing.INSECURE_TFHE_P2
    assert p.delta == round(p.big_q / 2 ** (p.message_bits + 1)) and p.long_dim == p.glwe_dim * p.poly_size
    _, sk = keys_p2
    assert sk.bsk.nbytes == p.bsk_bytes and sk.ksk.nbytes == p.ksk_bytes


def test_frozen_hashable_digest():
    p = presets.P4
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.lwe_dim = 1
    same = dataclasses.replace(p)
    assert same == p and hash(same) == hash(p) and same.digest() == p.digest()
    assert dataclasses.replace(p, name="other").digest() == p.digest()  # the name is not part of the format
    assert dataclasses.replace(p, lwe_sigma=p.lwe_sigma * 2).digest() != p.digest()


BASE = testing.INSECURE_TFHE_P2  # N 256, two 31-bit primes


@pytest.mark.parametrize(
    "field, value, match",
    [
        ("message_bits", 0, "message_bits"),
        ("message_bits", 11, "message_bits"),
        ("message_bits", True, "must be an int"),
        ("message_bits", 2.0, "must be an int"),
        ("message_bits", 9, "too small"),  # 2N = 512 < 2^10
        ("lwe_dim", 0, ">= 1"),
        ("glwe_dim", 0, ">= 1"),
        ("lwe_dim", "64", "must be an int"),
        ("poly_size", 100, "power of two"),
        ("poly_size", 8, "power of two"),
        ("poly_size", 2**18, "power of two"),
        ("moduli", (), "distinct primes"),
        ("moduli", (BASE.moduli[0], BASE.moduli[0]), "distinct primes"),
        ("moduli", (2**31 - 1,), "NTT-friendly"),  # prime, but not 1 mod 2N
        ("moduli", (BASE.moduli[0] * 3,), "NTT-friendly"),  # not prime (and too large)
        ("moduli", (7681,), "NTT-friendly"),  # 1 mod 512 and prime, but below 2^20
        ("pbs_gadget", (12, 2), "Gadget"),
        ("pbs_gadget", Gadget(30, 3), "covers more bits"),
        ("ks_gadget", Gadget(9, 3), "base_log <= 8"),
        ("ks_gadget", Gadget(8, 5), "base_log <= 8"),
        ("glwe_sigma", 0.0, "positive"),
        ("lwe_sigma", -1.0, "positive"),
        ("max_norm2", 0, "max_norm2"),
        ("max_norm2", 2.5, "max_norm2"),
    ],
)
def test_bad_fields(field, value, match):
    with pytest.raises(ParameterError, match=match):
        dataclasses.replace(BASE, **{field: value})


def test_make_noise_arguments():
    kw = dict(lwe_dim=64, glwe_dim=1, poly_size=256, lwe_log2_rate=-22.0, pbs=(12, 2), ks=(4, 5), insecure=True)
    with pytest.raises(ParameterError, match="exactly one"):
        make(2, glwe_sigma=3.19, glwe_log2_rate=-45.0, **kw)
    with pytest.raises(ParameterError, match="exactly one"):
        make(2, **kw)
    p = make(2, glwe_log2_rate=-45.0, max_norm2=2**2 + 1, **kw)  # the test sets' budget, as the presets'
    assert p == dataclasses.replace(BASE, name="") and isinstance(p, Params)
    assert math.isclose(math.log2(p.glwe_sigma / p.big_q), -45.0, rel_tol=0, abs_tol=1e-9)


def test_literal_to_checked_params():
    """A literal is what a user asks for; from_literal checks it (as CKKS's and BFV's): the presets are literals."""
    from crossfhe.tfhe import ParamsLiteral

    lit = ParamsLiteral(4, lwe_dim=833, glwe_dim=1, poly_size=2048, lwe_log2_rate=-18.08, pbs=(23, 1), ks=(2, 7),
                        glwe_log2_rate=-48.32, max_norm2=17, name="P4", grouping=2)
    assert Params.from_literal(lit) == presets.P4
    with pytest.raises(ParameterError, match="exactly one"):
        Params.from_literal(dataclasses.replace(lit, glwe_sigma=3.2))
    with pytest.raises(InsecureParametersError):
        Params.from_literal(dataclasses.replace(lit, lwe_dim=600))
    with pytest.raises(TypeError):
        Params.from_literal({"message_bits": 4})
