"""Helpers for tests only: small insecure parameter sets. Never imported by the library itself (an
import-linter contract checks it)."""

from crossfhe.ckks.params import Params as CKKSParams
from crossfhe.ckks.params import ParamsLiteral as CKKSParamsLiteral

INSECURE_CKKS_N10 = CKKSParams.from_literal(CKKSParamsLiteral(log_n=10, levels=3, log_scale=30, dnum=2, insecure=True))
"""N 2^10, depth 3, scale 2^30 (single scaling), dnum 2. Insecure: for fast tests only."""

INSECURE_CKKS_N11_COMPOSITE = CKKSParams.from_literal(
    CKKSParamsLiteral(log_n=11, levels=2, log_scale=50, dnum=2, insecure=True)
)
"""N 2^11, depth 2, scale 2^50 on two 25-bit primes per level (composite scaling). Insecure: tests only."""

from crossfhe.ckks.bootstrap import bootstrappable_params as _bootstrappable  # noqa: E402

INSECURE_CKKS_BOOT_N11 = _bootstrappable(log_n=11, levels_left=2, log_scale=52, dnum=3, cts_levels=2, stc_levels=2,
                                         insecure=True)
"""Bootstrappable at N 2^11 (1024 slots): 2 levels left, CoeffToSlot and SlotToCoeff on 2 levels each, EvalMod's
11; the chain of the N 2^16 presets otherwise (scale 2^52, q0 / Delta = 2^5, CoeffToSlot and EvalMod on 31-bit
primes). Insecure: tests only."""

from crossfhe.bfv.params import Params as BFVParams  # noqa: E402
from crossfhe.bfv.params import ParamsLiteral as BFVParamsLiteral  # noqa: E402

INSECURE_BFV_N256 = BFVParams.from_literal(
    BFVParamsLiteral(log_n=8, q_bits=(30, 30, 30), p_bits=(31, 31), plain_modulus=65537, dnum=2, insecure=True)
)
"""N 2^8, Q of three 30-bit primes, P of two 31-bit primes, dnum 2, t = 65537 (batching). Insecure: tests only."""

INSECURE_BFV_N256_COEFF = BFVParams.from_literal(
    BFVParamsLiteral(log_n=8, q_bits=(30, 30), p_bits=(31,), plain_modulus=2**16, dnum=2, insecure=True)
)
"""N 2^8, two 30-bit ciphertext primes and one special prime (CHAM's shape), t = 2^16 (coefficient
encoding only: not a batching modulus). Insecure: tests only."""

INSECURE_BFV_N1024_CHAM = BFVParams.from_literal(
    BFVParamsLiteral(log_n=10, q_bits=(30, 30), p_bits=(31,), plain_bits=17, dnum=2, insecure=True)
)
"""N 2^10 in CHAM's shape (two ciphertext primes, one special prime), t a 17-bit batching prime.
Insecure: tests only (HMVP and packing at a size where N inputs still run fast)."""

from crossfhe.tfhe.params import make as _tfhe_make  # noqa: E402


def _insecure_tfhe(p: int, log_n: int, name: str, extension: int = 0, grouping: int = 1):
    return _tfhe_make(
        p,
        lwe_dim=64,
        glwe_dim=1,
        poly_size=2**log_n,
        glwe_log2_rate=-45.0,
        lwe_log2_rate=-22.0,
        pbs=(12, 2),
        ks=(4, 5),
        name=name,
        insecure=True,
        extension=extension,
        grouping=grouping,
        max_norm2=2**p + 1,  # as the presets: two blocks of p / 2 bits, a 2^(p/2) + b, fit one bootstrap
    )


INSECURE_TFHE_P2 = _insecure_tfhe(2, 8, "INSECURE_TFHE_P2")
"""2-bit TFHE, n 64, N 256: insecure (LWE dimension 64), for exhaustive table tests."""
INSECURE_TFHE_P4 = _insecure_tfhe(4, 10, "INSECURE_TFHE_P4")
"""4-bit TFHE, n 64, N 1024: insecure, for exhaustive table tests and integers of 4-bit blocks."""
INSECURE_TFHE_P6 = _insecure_tfhe(6, 12, "INSECURE_TFHE_P6")
"""6-bit TFHE, n 64, N 4096: insecure, for random-table tests."""


INSECURE_TFHE_P4_EXT = _insecure_tfhe(4, 6, "INSECURE_TFHE_P4_EXT", extension=4)
"""4-bit TFHE with the extended blind rotation: N 64, extension 4 (an accumulator of 1024 coefficients, the
modulus switch of INSECURE_TFHE_P4), n 64. Insecure: tests only."""
INSECURE_TFHE_P6_EXT = _insecure_tfhe(6, 8, "INSECURE_TFHE_P6_EXT", extension=4)
"""6-bit TFHE with the extended blind rotation: N 256, extension 4 (accumulator 4096, as INSECURE_TFHE_P6)."""
INSECURE_TFHE_P4_G2 = _insecure_tfhe(4, 10, "INSECURE_TFHE_P4_G2", grouping=2)
"""INSECURE_TFHE_P4 with the grouped blind rotation, the key's bits two at a time."""
INSECURE_TFHE_P4_EXT_G3 = _insecure_tfhe(4, 6, "INSECURE_TFHE_P4_EXT_G3", extension=4, grouping=3)
"""INSECURE_TFHE_P4_EXT with the key's bits three at a time: grouping and extension together."""
