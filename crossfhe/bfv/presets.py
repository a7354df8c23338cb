"""Named BFV parameter sets at 128-bit security (HomomorphicEncryption.org table, ternary secret).

Each docstring gives the security bound it is checked against, the plaintext modulus, and the noise
budget measured through the secret key (``bfv.ops.noise_budget``, SEAL's definition) on fresh
public-key encryptions and after operations; ``benchmarks/bench_hmvp.py`` and the tests re-measure them.
"""

from __future__ import annotations

from crossfhe.bfv.params import Params, ParamsLiteral

CHAM_SPARSE_Q = (2**30 + 2**19 + 1, 2**30 + 2**17 + 1)
"""CHAM's ciphertext primes 2^34 + 2^27 + 1 and 2^34 + 2^19 + 1 do not fit 32-bit words: these are the
2^a + 2^b + 1 primes below 2^31 that are NTT-friendly for N = 4096 (= 1 mod 8192; the others are
2^30 + 2^13 + 1, 2^29 + 2^15 + 1 and 2^29 + 2^18 + 1)."""
CHAM_SPARSE_P = (2**30 + 2**25 + 1,)
"""CHAM's special prime 2^38 + 2^23 + 1, substituted by the largest such prime below 2^31, 2^30 + 2^25 + 1
(P > each q_i, so one key-switching digit per ciphertext prime works)."""

CHAM_N4096 = Params.from_literal(
    ParamsLiteral(log_n=12, q=CHAM_SPARSE_Q, p=CHAM_SPARSE_P, plain_bits=20, dnum=2)
)
