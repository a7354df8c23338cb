"""Chunk decomposition (CROSS §4.1.2, Alg. 3): residues as signed 8-bit digits, and back.

A matrix engine multiplies int8 by int8 into int32. A residue x in [0, q), q < 2^31, is first taken
as its centered representative x~ in (-q/2, q/2] (the same class mod q, |x~| < 2^30), then written in
balanced base 2^8:

    x~ = sum_k d_k 2^(8k),   d_k in [-128, 128),   k = 0..K-1,   K = ceil(bits(q) / 8).

Signed digits, not unsigned ones: int8 x int8 -> int32 dots are fast on CPU (VNNI) and on tensor cores,
while uint8 x uint8 -> uint32 measured 70x slower on XLA:CPU. Centering keeps the top digit in range
(a residue near 2^31 would need a top digit of 128 otherwise).

Accumulator bound (CROSS footnote 2, Fig. 7's 2 bp + log(K V) bits): a product of two digits is at most
128 * 128 = 2^14 in magnitude, so a dot product over D digit pairs is at most D 2^14 and fits int32
while D <= :data:`MAX_INNER` = floor((2^31 - 1) / 2^14) = 131071. Callers split a longer inner dimension
(:func:`inner_splits`) and add the reduced parts mod q.

Recombination (:func:`recombine`): the K output chunks c_k of a product (int32, |c_k| <= bound) stand
for z = sum_k c_k 2^(8k). Each is offset to u_k = c_k + 2^e >= 0 (2^e >= bound), the shifted u_k are
summed in a two-word accumulator, one Barrett reduction brings the sum below q, and the constant
sum_k 2^e 2^(8k) mod q is subtracted. All in uint32 words (no 64-bit type, per ARCHITECTURE.md).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from crossfhe.math.modular import add_wide, barrett_reduce_wide, reduce_u64, sub_mod

CHUNK_BITS = 8
DIGIT_MAX = 1 << (CHUNK_BITS - 1)
"""|d_k| <= 128: a digit is in [-128, 128)."""
PRODUCT_MAX = DIGIT_MAX * DIGIT_MAX
MAX_INNER = (2**31 - 1) // PRODUCT_MAX
"""The longest int8 dot product whose int32 accumulator cannot overflow: 131071 digit pairs."""

I8 = jnp.int8
I32 = jnp.int32
U32 = jnp.uint32


def chunk_count(moduli) -> int:
    """K = ceil(bits(q) / 8) for the largest modulus: enough signed digits for any centered residue."""
    bits = max(int(q) for q in moduli).bit_length()
    if bits > 31:
        raise ValueError(f"chunk decomposition takes moduli below 2^31, got one of {bits} bits")
    return max(1, math.ceil(bits / CHUNK_BITS))


def accumulator_bits(inner: int) -> int:
    """Bits (sign included) of an int32 accumulator over ``inner`` digit pairs: 2 bp + log2(inner) + 1,
    with 2 bp = 14 for products of signed 8-bit digits."""
    return 2 * (CHUNK_BITS - 1) + max(0, math.ceil(math.log2(inner))) + 1


def accumulator_bound(inner: int) -> int:
    """The largest |sum| of ``inner`` products of two digits: inner * 2^14."""
    return int(inner) * PRODUCT_MAX


def inner_splits(length: int, per_item: int = 1) -> list[tuple[int, int]]:
    """Cut an inner dimension of ``length`` items, ``per_item`` digits each, into [start, stop) runs of
    at most :data:`MAX_INNER` digits, so each run's int32 dot product is exact."""
    step = MAX_INNER // per_item
    if step < 1:
        raise ValueError(f"{per_item} digits per item exceed the int32 accumulator bound")
    return [(s, min(s + step, length)) for s in range(0, length, step)]


# --------------------------------------------------------------------------------------------------
# Digits
# --------------------------------------------------------------------------------------------------


def center(x, q):
    """The centered representative of x in [0, q) as int32: x - q if x > q // 2, else x."""
    x = jnp.asarray(x, dtype=U32)
    q = jnp.asarray(q, dtype=U32)
    return jnp.where(x > (q >> 1), x.astype(I32) - q.astype(I32), x.astype(I32))


def to_chunks(x, k: int, *, axis: int = -1):
    """Balanced base-2^8 digits of int32 x (|x| < 2^(8k - 1) - 2^(8k - 9) suffices), least significant
    first, stacked as a new int8 axis at ``axis``: x = sum_k d_k 2^(8k), d_k in [-128, 128)."""
    x = jnp.asarray(x, dtype=I32)
    digits = []
    for _ in range(k - 1):
        d = ((x + DIGIT_MAX) & 0xFF) - DIGIT_MAX
        digits.append(d.astype(I8))
        x = (x - d) >> CHUNK_BITS  # exact: x - d is a multiple of 2^8
    digits.append(x.astype(I8))
    return jnp.stack(digits, axis=axis)


def residue_chunks(x, q, k: int, *, axis: int = -1):
    """Digits of the centered representatives of residues x in [0, q) (:func:`center`, :func:`to_chunks`)."""
    return to_chunks(center(x, q), k, axis=axis)


def from_chunks(d, *, axis: int = -1):
    """Inverse of :func:`to_chunks`: sum_k d_k 2^(8k) as int32."""
    d = jnp.moveaxis(jnp.asarray(d), axis, -1).astype(I32)
    out = d[..., -1]
    for i in range(d.shape[-1] - 2, -1, -1):
        out = (out << CHUNK_BITS) + d[..., i]
    return out


def chunks_numpy(x: np.ndarray, q: np.ndarray, k: int) -> np.ndarray:
    """NumPy :func:`residue_chunks` for offline tables: int8 [..., k] digits of centered residues."""
    x = np.asarray(x, dtype=np.int64)
    q = np.asarray(q, dtype=np.int64)
    x = np.where(x > q // 2, x - q, x)
    out = np.empty(x.shape + (k,), dtype=np.int8)
    for i in range(k - 1):
        d = ((x + DIGIT_MAX) & 0xFF) - DIGIT_MAX
        out[..., i] = d
        x = (x - d) >> CHUNK_BITS
    if np.any(np.abs(x) > DIGIT_MAX) or np.any(x == DIGIT_MAX):
        raise ValueError(f"residues do not fit {k} signed 8-bit digits")
    out[..., k - 1] = x
    return out


# --------------------------------------------------------------------------------------------------
# Recombination: sum_k c_k 2^(8k) mod q
# --------------------------------------------------------------------------------------------------


def _offset_exponent(bound: int) -> int:
    return max(1, int(bound).bit_length())


def recombine_offset(moduli, bound: int, k: int) -> np.ndarray:
    """uint32 [len(moduli)]: sum_k 2^e 2^(8k) mod q, the offset :func:`recombine` removes (2^e > bound)."""
    e = _offset_exponent(bound)
    total = sum(1 << (e + CHUNK_BITS * i) for i in range(k))
    return np.array([total % int(q) for q in moduli], dtype=np.uint32)


def recombine(c, q, mu, bits, offset, *, bound: int, single_barrett: bool, qinv=None, r2=None):
    """z = sum_k c_k 2^(8k) mod q for int32 chunks c ``[..., K]`` with |c_k| <= ``bound`` < 2^31.

    ``q``, ``mu``, ``bits`` (Barrett constants) and ``offset`` (:func:`recombine_offset`) broadcast
    against ``c[..., 0]``. ``single_barrett``: the offset sum stays below 2^(2 bits(q)) for every modulus,
    so one Barrett reduction suffices (``not`` :func:`needs_wide`); otherwise ``qinv`` and ``r2`` are required and the
    general 64-bit reduction is used. Output uint32 in [0, q). Exact.
    """
    parts = [c[..., i] for i in range(c.shape[-1])]
    return recombine_parts(
        parts, q, mu, bits, offset, bound=bound, single_barrett=single_barrett, qinv=qinv, r2=r2
    )


def recombine_parts(parts, q, mu, bits, offset, *, bound: int, single_barrett: bool, qinv=None, r2=None):
    """:func:`recombine` of the chunks given as a sequence of K int32 arrays, least significant first (for
    kernels that cannot build a stacked axis, such as the Triton lowering of :mod:`crossfhe.kernels.pallas`)."""
    e = _offset_exponent(bound)
    if e > 31:
        raise ValueError(f"chunk bound {bound} does not fit int32")
    hi = lo = None
    for i, ci in enumerate(parts):
        u = (ci + jnp.int32(1 << e) if e < 31 else ci ^ jnp.int32(-(2**31))).astype(U32)
        s = CHUNK_BITS * i
        uh = (u >> (32 - s)) if s else jnp.zeros_like(u)
        ul = u << s
        hi, lo = (uh, ul) if hi is None else add_wide(hi, lo, uh, ul)
    if single_barrett:
        z = barrett_reduce_wide(hi, lo, q, mu, bits)
    else:
        z = reduce_u64(hi, lo, q, mu, bits, qinv, r2)
    return sub_mod(z, offset, q)


def needs_wide(moduli, bound: int, k: int) -> bool:
    """True when the offset sum of :func:`recombine` may reach 2^(2 bits(q)) for some modulus, so the
    general 64-bit reduction is needed instead of one Barrett reduction."""
    e = _offset_exponent(bound)
    top = sum((1 << (e + 1)) << (CHUNK_BITS * i) for i in range(k))  # each u_k < 2^(e+1)
    return any(top > (1 << (2 * int(q).bit_length())) for q in moduli)
