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
