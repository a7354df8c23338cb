"""Where schemes meet: LWE <-> RLWE conversions on RLWE ciphertexts of any scheme.

* :mod:`crossfhe.convert.packing`: PackLWEs (Chen, Dai, Kim, Song, ACNS 2021; CHAM Alg. 2-3) and the field
  trace: m RLWE ciphertexts (or LWE ciphertexts) -> one RLWE ciphertext holding their values as coefficients.

RLWE -> LWE extraction and the LWE -> RLWE embedding of CHAM eq. (3) live in :mod:`crossfhe.core.lwe`.
"""

from crossfhe.convert.packing import (
    field_trace,
    gen_packing_keys,
    pack_lwe_ciphertexts,
    pack_lwes,
    pack_noise_bound,
    pack_two_lwes,
    packing_galois_elements,
)

__all__ = [
    "field_trace",
    "gen_packing_keys",
    "pack_lwe_ciphertexts",
    "pack_lwes",
    "pack_noise_bound",
    "pack_two_lwes",
    "packing_galois_elements",
]
