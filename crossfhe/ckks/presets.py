"""Named CKKS parameter sets. Each secure set is checked against the HomomorphicEncryption.org 128-bit
table (uniform ternary secret) when the module is imported; sets that exceed it are ``insecure`` and sit
beside their closest secure variant. Depth and log PQ are computed from the chosen primes; precision is
log2 of the largest slot error for values in [-1, 1], measured by ``benchmarks/bench_ckks.py --chains`` (2026-11-21,
public-key encryption, one run: SEAL at the same N, scale and depth within 0.42 bits of every figure).

Our words are 32 bits, so the papers' 36-54-bit primes become 25-31-bit primes, or pairs of primes per
level (composite scaling) where the scale needs more than 31 bits.
"""

from __future__ import annotations

from crossfhe.ckks.params import Params, ParamsLiteral

N12_L1 = Params.from_literal(ParamsLiteral(log_n=12, levels=1, log_scale=25, base_bits=(31,), dnum=2))
"""CASA set I shape: N 2^12, depth 1, scale 2^25, log PQ ~87 <= 109 (128-bit).
Measured precision: fresh -13.1, one multiply+rescale -12.6, depth-1 chain -12.5, rotation -10.9."""

N13_L3 = Params.from_literal(ParamsLiteral(log_n=13, levels=3, log_scale=26, base_bits=(31,), dnum=2))
"""CASA set II shape: N 2^13, depth 3, scale 2^26, log PQ ~171 <= 218 (128-bit).
Measured precision: fresh -13.3, one multiply+rescale -12.3, depth-3 chain -12.7, rotation -12.9."""

N14_L7 = Params.from_literal(ParamsLiteral(log_n=14, levels=7, log_scale=30, dnum=3))
"""CASA set III shape: N 2^14, depth 7, scale 2^30, dnum 3, log PQ ~365 <= 438 (128-bit).
Measured precision: fresh -16.0, one multiply+rescale -15.5, depth-7 chain -15.5, rotation -13.9."""

N15_L19 = Params.from_literal(ParamsLiteral(log_n=15, levels=19, log_scale=30, dnum=3))
"""N 2^15, depth 19, scale 2^30, dnum 3, log PQ ~849 <= 881 (128-bit).
Measured precision: fresh -14.6, one multiply+rescale -14.5, depth-19 chain -14.4, rotation -14.5."""

N16_L21_DNUM3 = Params.from_literal(ParamsLiteral(log_n=16, levels=21, log_scale=56, dnum=3))
"""N 2^16, depth 21, scale 2^56 on two 28-bit primes per level, dnum 3, log PQ ~1703 <= 1747 (128-bit).
The secure variant beside CROSS set 6. Measured precision: fresh -39.6, one multiply+rescale -39.2,
depth-21 chain -38.9, rotation -39.4."""

N16_L22_DNUM4 = Params.from_literal(ParamsLiteral(log_n=16, levels=22, log_scale=56, dnum=4))
"""N 2^16, depth 22, scale 2^56 on two 28-bit primes per level, dnum 4, log PQ ~1697 <= 1747 (128-bit).
The secure variant beside the Alchemist set. Measured precision: fresh -39.8, one multiply+rescale -39.2,
depth-22 chain -38.6, rotation -39.4."""

CROSS_SET6_LITERAL = ParamsLiteral(
    log_n=16, levels=50, log_scale=28, base_bits=(31,), special_bits=(31, 31) + (28,) * 15, dnum=3, insecure=True
)
CROSS_SET6_INSECURE = Params.from_literal(CROSS_SET6_LITERAL)
"""INSECURE. CROSS Tab. 5 set 6: N 2^16, 51 ciphertext primes of 28 bits (one 31-bit base), dnum 3, 17
special primes, log PQ ~1910 > 1747, the 128-bit bound at N 2^16. For reproducing the paper only."""

ALCHEMIST_LITERAL = ParamsLiteral(log_n=16, levels=44, log_scale=56, dnum=4, insecure=True)
ALCHEMIST_INSECURE = Params.from_literal(ALCHEMIST_LITERAL)
"""INSECURE. Alchemist Tab. 7 shape: N 2^16, depth 44, dnum 4 (scale 2^56 on two 28-bit primes per level),
log PQ far above 1747. For reproducing the paper only."""

SECURE = {"N12_L1": N12_L1, "N13_L3": N13_L3, "N14_L7": N14_L7, "N15_L19": N15_L19,
          "N16_L21_DNUM3": N16_L21_DNUM3, "N16_L22_DNUM4": N16_L22_DNUM4}
INSECURE = {"CROSS_SET6_INSECURE": CROSS_SET6_INSECURE, "ALCHEMIST_INSECURE": ALCHEMIST_INSECURE}

# Bootstrappable sets (crossfhe.ckks.bootstrap): the chain is base (a 28-bit and a 29-bit prime: q0 / Delta = 2^5,
# EvalMod's message ratio) + the user's levels and SlotToCoeff's 3 (two 26-bit primes each, scale 2^52) + EvalMod's
# 11 and CoeffToSlot's 3 (two 31-bit primes each, scale about 2^62); bootstrappable_params(log_n=16,
# levels_left=..., log_scale=52, dnum=...) builds the same literal.
N16_BOOT_L9 = Params.from_literal(ParamsLiteral(
    log_n=16, levels=26, log_scale=52, dnum=9, primes_per_level=2, base_bits=(28, 29), bootstrap_levels=17,
    wide_levels=14, wide_bits=31))
"""Bootstrappable, 128-bit: N 2^16, 9 levels left after each bootstrap (scale 2^52), 2^15 slots, dnum 9 (8 before
issue 45: the 31-bit primes of CoeffToSlot and EvalMod need the smaller special modulus of 9 digits to stay within
the bound; about 10% more key memory), log PQ ~1733 <= 1747 (HomomorphicEncryption.org, uniform ternary secret).
Bootstrapping uses an ephemeral secret of Hamming weight 32 modulo q0 p0 only (log2 ~88 <= 121, the sparse-secret
estimate of :data:`crossfhe.core.params.SPARSE_ESTIMATES`). Failure probability 0 from the ModRaise overflow
(|I| <= 16 always, K = 16.5). Precision after one bootstrap: the chain and EvalMod of N16_BOOT_L3 (q0 / Delta = 2^5,
the same wide levels): 26.18 bits on uniform values in [-1, 1] (2026-11-29, one bootstrap, keys 11 GiB, peak
resident memory 17.9 GiB; 22 GiB before key switching kept one NTT table per chain); 24.93 on the real path that
real vectors take (26.17 on the general one, same run). Latency and the
comparison with OpenFHE: benchmarks/README.md ("Bootstrapping memory" for this chain, "CKKS bootstrapping" for the
previous one)."""

N16_BOOT_L3 = Params.from_literal(ParamsLiteral(
    log_n=16, levels=20, log_scale=52, dnum=3, primes_per_level=2, base_bits=(28, 29), bootstrap_levels=17,
    wide_levels=14, wide_bits=31, compact_keys=True))
"""Bootstrappable, 128-bit, the faster set: N 2^16, 3 levels left after each bootstrap (scale 2^52), dnum 3 (smaller
keys, cheaper key switches), log PQ ~1670 <= 1747, uniform ternary secret; ephemeral secret as N16_BOOT_L9.
Bootstrapping keys are compact by default (``compact_keys``: half the key memory, for some of the time; the
figures are in benchmarks/README.md, "The key form at both presets"); ``CKKSContext.create(..., compact_keys=False)``
makes them whole.
Failure probability 0 from ModRaise. Measured precision after one bootstrap (max slot error, 2^15 slots, one run,
2026-11-29, tests/test_ckks_bootstrap.py's 17 input shapes): 25.65 to 26.15 bits for every shape with |x| <= 1
(25.96 uniform in [-1, 1]; constants +-1, +-0.999 and 1 - 1e-3 25.65 to 25.83; alternating +-1 26.01; values near
+-1 with means 1, -1 and 0.5 25.68 to 26.15; short vectors padded and replicated 25.91 to 26.12; complex values on
the unit circle 25.93 to 26.02). These are the general (complex) path's; a vector of real values takes the real
path by itself (EvalMod once, 0.77x the time): 24.71 to 25.05 bits on the same 15 real shapes, where the general
path gave 25.76 to 26.20 with the same keys (2026-11-29). Before issue 45 (q0 / Delta = 2^4, Taylor arcsine, 30-bit
wide primes): 25.16 to 25.31 on uniform values, 9.1 to 17.5 on constants and short vectors. Latency and the
comparison with OpenFHE: benchmarks/README.md ("Real vectors bootstrap with one EvalMod" for this chain, "CKKS
bootstrapping" for the previous one)."""

N16_BOOT_HP = Params.from_literal(ParamsLiteral(
    log_n=16, levels=20, log_scale=60, dnum=4, primes_per_level=2, base_bits=(24, 22, 20), bootstrap_levels=17,
    wide_levels=14, wide_bits=31))
"""Bootstrappable, 128-bit, for high precision: N 2^16, 3 levels left after each bootstrap at the scale 2^60 (two
30-bit primes per level, SlotToCoeff's too), q0 / Delta = 2^4.95 on three base primes (24, 22 and 20 bits: the only
NTT primes of 20-22 bits at N 2^16), dnum 4 (dnum 3 would need log PQ ~1757 > 1747), log PQ ~1633 <= 1747, uniform
ternary secret; ephemeral secret as N16_BOOT_L9 (modulo q0 p0, log2 ~96 <= 121). The CoeffToSlot and EvalMod of
N16_BOOT_L3. Made for ``bootstrap(precise=True)`` (two iterations, :func:`crossfhe.ckks.bootstrap.bootstrap`): the
larger scale moves the rescale rounding that bounds its result below 2^-40. Measured (2026-11-29, one run, 2^15
values uniform in [-1, 1], max slot error against the values): one bootstrap 25.97 bits (general path), 24.86 (real);
a precise one 43.27 and 42.27 (the fresh encryption itself holds 43.71); 42.3 to 43.1 on constants 1 and unit-circle
values. Keys 4.3 GiB (dnum 4: 1.29x N16_BOOT_L3's; 5.8 GiB and a peak resident memory of 11.6 GiB before the
transforms' splits took 8 baby steps, 2026-11-30). Latency and the comparison with
OpenFHE's iterative bootstrapping: benchmarks/README.md ("Precise bootstrapping")."""

BOOTSTRAP = {"N16_BOOT_L9": N16_BOOT_L9, "N16_BOOT_L3": N16_BOOT_L3, "N16_BOOT_HP": N16_BOOT_HP}


PRECISION = {"N12_L1": 12.5, "N13_L3": 12.3, "N14_L7": 15.5, "N15_L19": 14.4, "N16_L21_DNUM3": 38.9,
             "N16_L22_DNUM4": 38.6}
"""Bits of precision after the point (-log2 of the largest slot error for values in [-1, 1]) of each secure preset
at its full depth, the lowest of the figures in its docstring."""


def name_of(params: Params) -> str | None:
    """The name of the secure or bootstrappable preset ``params`` are (any kernel set), or None."""
    digest = params.digest()
    return next((name for name, p in {**SECURE, **BOOTSTRAP}.items() if p.digest() == digest), None)


def smallest(depth: int, precision: float | None = None) -> Params | None:
    """The smallest secure preset (:data:`SECURE`, in order of N) with at least ``depth`` levels and, if given,
    ``precision`` bits (:data:`PRECISION`); None if none has."""
    return next((p for name, p in SECURE.items()
                 if p.levels >= depth and (precision is None or PRECISION[name] >= precision)), None)
