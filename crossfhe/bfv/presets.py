"""Named BFV parameter sets at 128-bit security (HomomorphicEncryption.org table, ternary secret).

Each docstring gives the security bound it is checked against, the plaintext modulus, and the noise
budget measured through the secret key (``bfv.ops.noise_budget``, SEAL's definition): after a fresh
public-key encryption, after each ciphertext product with relinearization of a chain (each product by a
fresh encryption), and the depth (products after which every slot still decrypted correctly and the
budget was positive). Measured 2026-11-21 with random slots, one key per preset (the budget varies by
about a bit between keys):

==========  ==========  ==================================================  =====
preset      fresh (pk)  after products 1, 2, 3, ...                         depth
==========  ==========  ==================================================  =====
CHAM_N4096  34          3 (HMVP, 300 x 1000 or 4096 x 300: 20 bits left)    1
N4096       54          23                                                  1
N8192       122         90, 58, 26                                          3
N16384      332         299, 267, 234, 201, 167, 134, 100, 66, 32           9
N32768      721         688, 654, ... (about 34.5 per product), 66, 32      20
==========  ==========  ==================================================  =====
"""

from __future__ import annotations

from crossfhe.bfv.params import Params, ParamsLiteral

CHAM_SPARSE_Q = (2**30 + 2**19 + 1, 2**30 + 2**17 + 1)
"""CHAM's ciphertext primes 2^34 + 2^27 + 1 and 2^34 + 2^19 + 1 do not fit 32-bit words: these are the
2^a + 2^b + 1 primes below 2^31 that are NTT-friendly for N = 4096 (= 1 mod 8192; the others are
2^30 + 2^13 + 1, 2^29 + 2^15 + 1 and 2^29 + 2^18 + 1)."""
CHAM_SPARSE_P = (2**30 + 2**25 + 1,)
"""CHAM's special prime 2^38 + 2^23 + 1, substituted by the largest such prime below 2^31, 2^30 + 2^25 + 1
(P > each q_i, so one key-switching digit per ciphertext prime works). The kernels reduce mod these primes
with the same Barrett and Shoup code as for any prime; the shift-and-add reduction that the sparse form
allows (:mod:`crossfhe.math.sparse`) is not wired into them."""

CHAM_N4096 = Params.from_literal(
    ParamsLiteral(log_n=12, q=CHAM_SPARSE_Q, p=CHAM_SPARSE_P, plain_bits=20, dnum=2)
)
"""CHAM's shape on 32-bit words: N 4096, two sparse 30-bit ciphertext primes, one sparse special prime
(dnum 2), t = 1032193 (the largest 20-bit batching prime for N 4096). log2 PQ = 90.0 <= 109 (128-bit,
HomomorphicEncryption.org). Meant for plaintext products and packing (HMVP): one ciphertext product
leaves 3 bits. Noise budget: 34 bits fresh, about 20 after an HMVP (module docstring)."""

N4096 = Params.from_literal(ParamsLiteral(log_n=12, q_bits=(27, 27, 27), p_bits=(27,), plain_bits=20, dnum=3))
"""N 4096, three 27-bit ciphertext primes, one 27-bit special prime (dnum 3), t a 20-bit batching prime.
log2 PQ = 108 <= 109 (128-bit)."""

N8192 = Params.from_literal(ParamsLiteral(log_n=13, q_bits=(30,) * 5, p_bits=(31, 31), plain_bits=20, dnum=3))
"""N 8192, five 30-bit ciphertext primes, two 31-bit special primes (dnum 3), t a 20-bit batching prime.
log2 PQ = 212 <= 218 (128-bit)."""

N16384 = Params.from_literal(ParamsLiteral(log_n=14, q_bits=(30,) * 12, p_bits=(31, 31), plain_bits=20, dnum=6))
"""N 16384, twelve 30-bit ciphertext primes, two 31-bit special primes (dnum 6), t a 20-bit batching prime.
log2 PQ = 422 <= 438 (128-bit)."""

N32768 = Params.from_literal(ParamsLiteral(log_n=15, q_bits=(30,) * 25, p_bits=(31,) * 4, plain_bits=20, dnum=7))
"""N 32768, 25 30-bit ciphertext primes, four 31-bit special primes (dnum 7), t a 20-bit batching prime.
log2 PQ = 874 <= 881 (128-bit)."""

PRESETS = {"CHAM_N4096": CHAM_N4096, "N4096": N4096, "N8192": N8192, "N16384": N16384, "N32768": N32768}


def name_of(params: Params) -> str | None:
    """The name of the preset ``params`` are (any kernel set), or None."""
    digest = params.digest()
    return next((name for name, p in PRESETS.items() if p.digest() == digest), None)


def describe(params: Params) -> str:
    """``params`` in a message: the preset's name if it is one, with N, log2 Q and t."""
    import math

    name = name_of(params)
    what = f"N {params.n}, log2 Q {math.log2(params.big_q):.0f}, t {params.t}"
    return f"bfv.presets.{name} ({what})" if name else f"bfv.Params({what})"
