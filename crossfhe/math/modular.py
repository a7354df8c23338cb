"""Modular arithmetic on ``uint32`` words: Barrett, Shoup, Montgomery, multiply-accumulate.

Every kernel here is a jnp function on ``uint32`` arrays and needs no 64-bit type: a 32 x 32 -> 64-bit
product is assembled from 16-bit halves (``mul_wide``), which measured as fast as a ``uint64`` product
under ``jax.enable_x64`` in a radix-2 NTT on XLA:CPU (1.17 vs 1.34 ns per butterfly at N = 2^16). So the
kernels give exact results under a user's ``jax.jit`` with x64 off and change no global JAX setting. The
one exception, the modular matrix product of basis conversion (:func:`centered_gemm_rows`), takes and
returns 32-bit words but runs an exact float64 GEMM inside a scoped ``jax.enable_x64(True)``.

Moduli are odd, ``2 < q < 2^31``. A modulus and its constants travel together as a :class:`Modulus`
(Python ints, computed exactly) and, for a basis of several moduli, as :class:`ModulusTable` whose
arrays broadcast against data of shape ``[..., limbs, N]`` (each array has shape ``[limbs, 1]``).

Ranges: unless a docstring states a lazy range, inputs and outputs are in ``[0, q)``.

References: Barrett as in CROSS Alg. 2 (shift, multiply, shift, subtract, correct); Shoup's
multiplication by a precomputed constant (Harvey, "Faster arithmetic for number-theoretic transforms",
2014); Montgomery REDC with R = 2^32; the multiply-accumulate-then-reduce-once operator "(M A)_n R" of
Alchemist §4. Reduction by shifts and adds for sparse (low-Hamming-weight) primes, bit-exact with
Barrett, is in :mod:`crossfhe.math.sparse`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

U32 = jnp.uint32
_MASK16 = 0xFFFF


def _u32(x):
    return jnp.asarray(x, dtype=U32)


# --------------------------------------------------------------------------------------------------
# 64-bit products from 32-bit words
# --------------------------------------------------------------------------------------------------


def mul_wide(a, b):
    """Full product of two uint32 arrays as ``(hi, lo)`` with ``a * b = hi * 2^32 + lo``. Exact."""
    a = _u32(a)
    b = _u32(b)
    a0 = a & _MASK16
    a1 = a >> 16
    b0 = b & _MASK16
    b1 = b >> 16
    p00 = a0 * b0
    p01 = a0 * b1
    p10 = a1 * b0
    p11 = a1 * b1
    mid = (p00 >> 16) + (p01 & _MASK16) + (p10 & _MASK16)
    hi = p11 + (p01 >> 16) + (p10 >> 16) + (mid >> 16)
    lo = a * b
    return hi, lo


def mulhi(a, b):
    """High word ``floor(a * b / 2^32)`` of the product of two uint32 arrays. Exact."""
    return mul_wide(a, b)[0]


def add_wide(hi, lo, hi2, lo2):
    """Two-word sum ``(hi, lo) + (hi2, lo2)`` modulo 2^64, as ``(hi, lo)``."""
    s = lo + lo2
    carry = (s < lo).astype(U32)
    return hi + hi2 + carry, s


def shr_wide(hi, lo, k):
    """``(hi * 2^32 + lo) >> k`` for 1 <= k <= 32, low word only (caller guarantees it fits).

    Every shift amount stays below the word size (lo is shifted by k - 1, then by 1), so the result never
    depends on how a backend treats a shift by 32.
    """
    return (hi << (32 - k)) | ((lo >> (k - 1)) >> 1)


# --------------------------------------------------------------------------------------------------
# Constants
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Modulus:
    """An odd modulus ``2 < q < 2^31`` with the constants of its reductions (Python ints).

    ``bits`` s = bit length of q; ``barrett_mu`` = floor(2^(2s) / q) < 2^32; ``mont_qinv`` =
    -q^-1 mod 2^32; ``mont_r2`` = 2^64 mod q (to enter Montgomery form); ``r_mod_q`` = 2^32 mod q.
    """

    q: int
    bits: int
    barrett_mu: int
    mont_qinv: int
    mont_r2: int
    r_mod_q: int

    @classmethod
    def create(cls, q: int) -> Modulus:
        q = int(q)
        if not (2 < q < 2**31) or q % 2 == 0:
            raise ValueError(f"modulus must be odd with 2 < q < 2^31, got q = {q}")
        s = q.bit_length()
        return cls(
            q=q,
            bits=s,
            barrett_mu=(1 << (2 * s)) // q,
            mont_qinv=(-pow(q, -1, 1 << 32)) % (1 << 32),
            mont_r2=(1 << 64) % q,
            r_mod_q=(1 << 32) % q,
        )

    @property
    def mac_max_terms(self) -> int:
        """Largest n for which ``mac_reduce`` of n products of residues in [0, q) is exact: the sum
        stays below 2^64, and n <= 2^16 (the limit of :func:`sum_wide`)."""
        return min(2**16, (2**64 - 1) // (self.q - 1) ** 2)

    def shoup(self, w: int) -> int:
        """Shoup's companion of a constant ``w`` in [0, q): floor(w * 2^32 / q)."""
        return (int(w) << 32) // self.q


@dataclass(frozen=True)
class ModulusTable:
    """The constants of a list of moduli as uint32 arrays of shape ``[limbs, 1]``.

    A pytree-free bundle of NumPy arrays, meant to be passed to jitted kernels as arguments (never
    closed over). Broadcasts against ``uint32[..., limbs, N]``.
    """

    q: np.ndarray
    bits: np.ndarray
    barrett_mu: np.ndarray
    mont_qinv: np.ndarray
    mont_r2: np.ndarray
    r_mod_q: np.ndarray

    @classmethod
    def create(cls, moduli) -> ModulusTable:
        ms = [m if isinstance(m, Modulus) else Modulus.create(m) for m in moduli]

        def col(name):
            return np.array([getattr(m, name) for m in ms], dtype=np.uint32).reshape(-1, 1)

        return cls(*(col(n) for n in ("q", "bits", "barrett_mu", "mont_qinv", "mont_r2", "r_mod_q")))


# --------------------------------------------------------------------------------------------------
# Addition
# --------------------------------------------------------------------------------------------------


def reduce_once(x, q):
    """``x - q`` if ``x >= q`` else ``x``: maps [0, 2q) to [0, q)."""
    return jnp.where(x >= q, x - q, x)


def add_mod(a, b, q):
    """``(a + b) mod q`` for a, b in [0, q); needs 2q <= 2^32."""
    return reduce_once(a + b, q)


def sub_mod(a, b, q):
    """``(a - b) mod q`` for a, b in [0, q)."""
    d = a - b
    return jnp.where(a >= b, d, d + q)


def neg_mod(a, q):
    """``-a mod q`` for a in [0, q)."""
    return jnp.where(a == 0, a, q - a)


# --------------------------------------------------------------------------------------------------
# Barrett
# --------------------------------------------------------------------------------------------------


def barrett_reduce_wide_lazy(hi, lo, q, mu, bits):
    """Barrett reduction of ``z = hi * 2^32 + lo`` with ``z < 2^(2s)``, s = bits of q (CROSS Alg. 2).

    qhat = floor(floor(z / 2^(s-1)) * mu / 2^(s+1)) underestimates floor(z / q) by at most 2.
    Returns ``(r_hi, r_lo)``, the exact two-word remainder ``z - qhat * q`` in [0, 3q).
    """
    z1 = shr_wide(hi, lo, bits - 1)
    ph, pl = mul_wide(z1, mu)
    qhat = shr_wide(ph, pl, bits + 1)
    th, tl = mul_wide(qhat, q)
    r_lo = lo - tl
    r_hi = hi - th - (lo < tl).astype(U32)
    return r_hi, r_lo


def barrett_reduce_wide(hi, lo, q, mu, bits):
    """``(hi * 2^32 + lo) mod q`` for z < 2^(2s). Output in [0, q). Exact."""
    r_hi, r_lo = barrett_reduce_wide_lazy(hi, lo, q, mu, bits)
    # r = r_hi * 2^32 + r_lo in [0, 3q); r_hi is 0 or 1. Subtract q up to twice with a two-word compare.
    for _ in range(2):
        ge = (r_hi > 0) | (r_lo >= q)
        borrow = (r_lo < q).astype(U32)
        r_lo = jnp.where(ge, r_lo - q, r_lo)
        r_hi = jnp.where(ge, r_hi - borrow, r_hi)
    return r_lo


def barrett_reduce(x, q, mu, bits):
    """``x mod q`` for a single word x < 2^(2s) (any uint32 when q > 2^15). Output in [0, q). Exact."""
    x = _u32(x)
    return barrett_reduce_wide(jnp.zeros_like(x), x, q, mu, bits)


def barrett_mul(a, b, q, mu, bits):
    """``a * b mod q`` for a * b < 2^(2s) (e.g. a, b in [0, q)). Output in [0, q). Exact."""
    hi, lo = mul_wide(a, b)
    return barrett_reduce_wide(hi, lo, q, mu, bits)


def barrett_mul_lazy(a, b, q, mu, bits):
    """``a * b mod q`` in the lazy range [0, 2q) for a * b < 2^(2s); requires q < 2^30 (so 3q < 2^32).

    The Barrett remainder in [0, 3q) is reduced by one conditional subtraction of q only when it is at
    least 2q; cheaper than :func:`barrett_mul` by one two-word compare.
    """
    hi, lo = mul_wide(a, b)
    _, r = barrett_reduce_wide_lazy(hi, lo, q, mu, bits)
    return jnp.where(r >= 2 * q, r - q, r)


# --------------------------------------------------------------------------------------------------
# Shoup: multiplication by a known constant
# --------------------------------------------------------------------------------------------------


def shoup_precompute(w, q):
    """Shoup companions ``floor(w * 2^32 / q)`` of constants w in [0, q), as uint32 NumPy array.

    Offline (NumPy / Python ints). ``w`` and ``q`` broadcast.
    """
    w = np.asarray(w, dtype=np.uint64)
    q = np.asarray(q, dtype=np.uint64)
    return ((w << np.uint64(32)) // q).astype(np.uint32)


def shoup_mul_lazy(x, w, w_shoup, q):
    """``x * w mod q`` in the lazy range [0, 2q), for any uint32 x, constant w in [0, q), q < 2^31.

    qhat = floor(x * w_shoup / 2^32) is floor(x * w / q) or one less, so x*w - qhat*q < 2q; computed
    modulo 2^32, which is exact since 2q <= 2^32.
    """
    qhat = mulhi(x, w_shoup)
    return x * w - qhat * q


def shoup_mul(x, w, w_shoup, q):
    """``x * w mod q`` in [0, q), for any uint32 x and a constant w in [0, q). Exact."""
    return reduce_once(shoup_mul_lazy(x, w, w_shoup, q), q)


# --------------------------------------------------------------------------------------------------
# Montgomery (R = 2^32)
# --------------------------------------------------------------------------------------------------


def montgomery_reduce_lazy(hi, lo, q, qinv):
    """REDC: ``z * 2^-32 mod q`` for z = hi * 2^32 + lo < q * 2^32, in the lazy range [0, 2q).

    m = lo * (-q^-1) mod 2^32; (z + m q) / 2^32 = hi + mulhi(m, q) + carry < 2q.
    """
    m = lo * qinv
    mh, ml = mul_wide(m, q)
    carry = ((lo + ml) < lo).astype(U32)
    return hi + mh + carry


def montgomery_reduce(hi, lo, q, qinv):
    """``z * 2^-32 mod q`` for z < q * 2^32, output in [0, q). Exact."""
    return reduce_once(montgomery_reduce_lazy(hi, lo, q, qinv), q)


def montgomery_mul_lazy(a, b, q, qinv):
    """``a * b * 2^-32 mod q`` in [0, 2q) for a * b < q * 2^32 (e.g. a in [0, 2^32), b in [0, q))."""
    hi, lo = mul_wide(a, b)
    return montgomery_reduce_lazy(hi, lo, q, qinv)


def montgomery_mul(a, b, q, qinv):
    """``a * b * 2^-32 mod q`` in [0, q) for a * b < q * 2^32. Exact."""
    return reduce_once(montgomery_mul_lazy(a, b, q, qinv), q)


def to_montgomery(a, q, qinv, r2):
    """``a * 2^32 mod q`` (Montgomery form) for a in [0, q), with r2 = 2^64 mod q."""
    return montgomery_mul(a, r2, q, qinv)


def from_montgomery(a, q, qinv):
    """``a * 2^-32 mod q`` (leave Montgomery form) for a in [0, q)."""
    a = _u32(a)
    return montgomery_reduce(jnp.zeros_like(a), a, q, qinv)


# --------------------------------------------------------------------------------------------------
# Multiply-accumulate, reduce once: (M A)_n R
# --------------------------------------------------------------------------------------------------


def reduce_u64(hi, lo, q, mu, bits, qinv, r2):
    """``(hi * 2^32 + lo) mod q`` for any 64-bit value and q > 2^15, output in [0, q). Exact.

    hi < 2^32 <= 2^(2s) is reduced by a one-word Barrett, so z' = (hi mod q) 2^32 + lo < q 2^32; REDC
    gives z' 2^-32 mod q, and a Montgomery product by r2 = 2^64 mod q restores the factor 2^32.
    """
    h = barrett_reduce(hi, q, mu, bits)
    t = montgomery_reduce(h, lo, q, qinv)
    return montgomery_mul(t, r2, q, qinv)


def sum_wide(hi, lo, *, axis=0):
    """Exact two-word sum of n two-word values along ``axis``, for n <= 2^16 and a total < 2^64.

    The low words are summed as 16-bit halves (each partial sum < n 2^16 <= 2^32), the high words
    directly (their sum is at most the total / 2^32 < 2^32); the parts are then recombined with carries.
    """
    s_lo = jnp.sum(lo & _MASK16, axis=axis, dtype=U32)
    s_mid = jnp.sum(lo >> 16, axis=axis, dtype=U32)
    s_hi = jnp.sum(hi, axis=axis, dtype=U32)
    return add_wide(s_hi + (s_mid >> 16), s_lo, jnp.zeros_like(s_lo), s_mid << 16)


def mac_reduce(a, b, q, mu, bits, qinv, r2, *, axis=0):
    """Multiply-accumulate n times, reduce once: ``sum_i a_i * b_i mod q`` along ``axis``.

    The n products a_i * b_i (a_i, b_i in [0, q)) are summed exactly in a two-word accumulator and the
    sum is reduced once (:func:`reduce_u64`, q > 2^15). No overflow while n <= ``Modulus.mac_max_terms``
    = floor((2^64 - 1) / (q - 1)^2): 4 for q < 2^31, 16 for q < 2^30, 256 for q < 2^28; the caller keeps
    n within it (splitting the axis otherwise). Products of residues of different moduli (basis
    conversion) need the bound recomputed from both moduli. ``q`` and its constants broadcast against the result
    (the input shape without ``axis``). Output in [0, q). Exact.
    """
    hi, lo = mul_wide(a, b)
    acc_hi, acc_lo = sum_wide(hi, lo, axis=axis)
    return reduce_u64(acc_hi, acc_lo, q, mu, bits, qinv, r2)

_ROWS_UNROLL_FROM = 2**22


def mac_reduce_rows(x, w, q, mu, bits, qinv, r2, *, chunk: int):
    """A modular matrix product per column: ``z[..., j, n] = sum_i w[..., j, i] x[..., i, n] mod q_j``.

    x: uint32 ``[..., S, N]``; w: uint32 ``[..., M, S]``; ``q`` and its constants ``[..., M, 1]`` (leading
    axes broadcast). Each run of ``chunk`` terms is summed exactly in a two-word accumulator and reduced
    once (:func:`mac_reduce`'s bound on ``chunk`` applies, from the largest x and w); the runs' results
    are added mod q_j. Output ``[..., M, N]`` in [0, q_j). Exact.

    This is the basis conversion's inner loop, where key switching at N 2^16 spends most of its time.
    Two forms, the same words. Small products (at most ``_ROWS_UNROLL_FROM`` terms in all) reduce over
    the broadcast product ``[..., M, chunk, N]`` (:func:`mac_reduce` along an axis). Larger ones unroll
    the terms into one elementwise fusion, as the broadcast product is then materialized in memory.
    HE-Mult, one process per preset, 1 CPU, broadcast form / unrolled form everywhere: N14_L7 20.2 /
    25.3 ms (ModUp 1.3M terms, ModDown 0.9M), N15_L19 245 / 152 ms (14M, 10M), N16_L21_DNUM3 1631 /
    1118 ms (130M, 83M); hence the threshold 2^22. (Cutting the columns into cache-sized tiles moved to
    the front measured no better at N 2^16, and 4x worse at N 2^14 without a barrier after the transpose.)
    """
    x = _u32(x)
    w = _u32(w)
    n_src = x.shape[-2]
    out_shape = jnp.broadcast_shapes(x.shape[:-2] + (1, x.shape[-1]), w.shape[:-1] + (1,))
    unroll = math.prod(out_shape) * n_src > _ROWS_UNROLL_FROM
    out = None
    for start in range(0, n_src, chunk):
        stop = min(start + chunk, n_src)
        if not unroll:
            part = mac_reduce(x[..., None, start:stop, :], w[..., :, start:stop, None], q, mu, bits, qinv, r2, axis=-2)
            out = part if out is None else add_mod(out, part, q)
            continue
        hi = lo = None
        for i in range(start, stop):
            h, l = mul_wide(x[..., i, None, :], w[..., :, i, None])
            hi, lo = (h, l) if hi is None else add_wide(hi, lo, h, l)
        part = reduce_u64(hi, lo, q, mu, bits, qinv, r2)
        out = part if out is None else add_mod(out, part, q)
    return out


# --------------------------------------------------------------------------------------------------
# Fusion control
# --------------------------------------------------------------------------------------------------


def fusion_barrier(x, table):
    """x, materialized: a value XLA:CPU cannot fuse into its consumer.

    XLA:CPU fuses an elementwise producer into the first butterfly pass of a transform and recomputes it
    for both outputs of every butterfly. After an expensive producer (a basis conversion, a
    multiply-accumulate) that costs 5-10x: basis conversion then NTT measured 10-32 ms fused against 2-6 ms
    as two calls (N 2^14, 3 -> 9 limbs), and a key switch 40 ms against 18-23 ms with this barrier. After
    a cheap producer the fused form is faster (a rescale measured 4 ms fused, 11 ms with it), so callers
    put it where it pays. ``lax.optimization_barrier`` is removed before fusion on CPU, but a
    conditional on a runtime value is kept, and its operand is materialized. ``table``: any array of
    residues below 2^31 that is an argument of the computation (a twiddle table); the predicate reads
    it, not x, so it stays a scalar under ``vmap``. Both branches are the identity (x of any integer or
    float dtype).

    Compiled for another platform (a GPU) it is x itself (``lax.platform_dependent``: the choice is the lowering's,
    the words the same): there a conditional reads its predicate on the host, a device-to-host copy and a wait each
    time (one per blind-rotation step in the H100 profile, benchmarks/README.md, "A conditional per step on the
    GPU"), which no saved recomputation pays for.
    """
    return lax.platform_dependent(x, table, cpu=_conditional_barrier, default=_identity)


def _conditional_barrier(x, table):
    pred = table[(0,) * table.ndim] < jnp.uint32(2**31)
    if jnp.issubdtype(x.dtype, jnp.integer):
        other = lambda u: u ^ jnp.zeros((), u.dtype)  # noqa: E731
    else:
        other = lambda u: u + 0.0  # noqa: E731
    return lax.cond(pred, lambda u: u, other, x)


def _identity(x, table):
    return x


def _ordered(x, dep):
    """x, its consumers made to wait for ``dep`` where ``lax.optimization_barrier`` orders (not on CPU)."""
    return lax.optimization_barrier((x, dep))[0]


@jax.custom_batching.custom_vmap
def after(x, dep):
    """x, computed only once ``dep`` is: the same words, but every consumer of the result waits for ``dep``.

    XLA schedules independent chains as it likes, and keeps every temporary of the chains it has started alive;
    a chain made to wait for the previous one's result holds one chain's temporaries at a time (the hoisted key
    switches of :func:`crossfhe.core.keyswitch.keyswitch_hoisted`). ``lax.optimization_barrier`` does not order on
    CPU (module note at :func:`fusion_barrier`); a conditional on a word of ``dep`` does, and copies only x (keep x
    small: an index vector). ``dep``: residues below 2^31 (the predicate is always true); x of an integer dtype.
    Compiled for another platform (a GPU), ``lax.optimization_barrier`` over (x, dep), which orders there and reads
    nothing on the host (:func:`fusion_barrier`).
    Under ``vmap`` x keeps its own batching: a batched ``dep`` is read at its first entry (one program computes
    all entries together), so an unbatched x (a permutation) stays unbatched."""
    return lax.platform_dependent(x, dep, cpu=_conditional_barrier, default=_ordered)


@after.def_vmap
def _after_vmap(axis_size, in_batched, x, dep):
    x_batched, dep_batched = in_batched
    return after(x, dep[0] if dep_batched else dep), x_batched


# --------------------------------------------------------------------------------------------------
# Modular matrix product through a float64 GEMM (the basis conversion on CPUs)
# --------------------------------------------------------------------------------------------------

GEMM_SPLIT = 16
"""The centered data y~ are split as y~ = hi 2^16 + lo (lo in [0, 2^16), |hi| <= 2^14)."""
_GEMM_SUM_MAX = 2**52  # |partial sums| stay below this: exact integers, and t q exact in the reduction


def gemm_weights(w, dst_q) -> np.ndarray:
    """Operand of :func:`centered_gemm_rows`: int32 ``[..., M, 2S]`` from weights ``w`` ``[..., M, S]``
    (residues mod the row's modulus ``dst_q`` ``[..., M, 1]``): the centered w (in (-q/2, q/2]) in the
    first S columns, the centered [w 2^16]_q in the last S."""
    w = np.asarray(w, dtype=np.int64)
    q = np.asarray(dst_q, dtype=np.int64)
    shifted = (w << GEMM_SPLIT) % q
    both = np.concatenate([w, shifted], axis=-1)
    return np.where(both > q // 2, both - q, both).astype(np.int32)


def gemm_chunk(dst_q) -> int:
    """Source limbs per float64 GEMM: each limb adds at most (2^16 - 1 + 2^14) max(q) / 2 to a sum, and
    sums stay below 2^52 (exact in float64, with room for the reduction's t q)."""
    per_limb = ((1 << GEMM_SPLIT) - 1 + (1 << 14)) * (int(np.max(dst_q)) // 2)
    return max(1, _GEMM_SUM_MAX // per_limb)


def centered_gemm_rows(y, half, src_q, wg, q, *, chunk: int):
    """``z[..., j, n] = sum_i center(y[..., i, n]) w[..., j, i] mod q_j`` through a float64 matrix product.

    y: uint32 ``[..., S, N]`` in [0, c_i) with c_i = ``src_q`` < 2^31 and ``half`` = floor(c_i / 2), both
    ``[..., S, 1]``: center(y_i) = y_i - c_i where y_i > half, else y_i. ``wg``: int32 ``[..., M, 2S]`` from
    :func:`gemm_weights`; ``q`` uint32 ``[..., M, 1]``; ``chunk`` from :func:`gemm_chunk`. Output uint32
    ``[..., M, N]`` in [0, q_j). Exact.

    Each centered value is split as hi 2^16 + lo and the product summed as lo w~ + hi [w 2^16]~, every
    term an integer below 2^47 in magnitude, every partial sum below 2^52: the float64 products and sums
    are exact. A sum s is reduced as s - round(s / q) q, in (-q, q) (the quotient from float64 is within
    one of the true one), then moved into [0, q); chunks' results are added mod q.

    The float64 part runs inside ``jax.enable_x64(True)`` (scoped: no global setting), so it works under a
    caller's ``jax.jit`` with x64 off; it is a ``custom_vmap`` function whose batching rule re-enters that
    scope, as ``vmap`` of an enclosing jitted function re-traces its body outside it. Inputs and outputs
    are 32-bit words.

    Why a float GEMM: XLA:CPU runs the float64 product through its GEMM kernels, while the exact uint32
    multiply-accumulate (:func:`mac_reduce_rows`) costs a few ns per term in elementwise code. The
    conversion of a key-switching digit at N 2^16 (15 -> 44 limbs, one CPU) measured 30-40 ms against
    66-106 ms.
    """
    y = _u32(y)
    n_src = y.shape[-2]
    yc = jnp.where(y > half, y.astype(jnp.int32) - jnp.asarray(src_q).astype(jnp.int32), y.astype(jnp.int32))
    yc = fusion_barrier(yc, src_q)  # else a producer fused in (a transform's last pass) runs for lo and hi
    lo, hi = yc & _MASK16, yc >> GEMM_SPLIT
    q = _u32(q)
    rank = max(y.ndim, jnp.ndim(wg), q.ndim)
    out = None
    for start in range(0, n_src, chunk):
        stop = min(start + chunk, n_src)
        w = jnp.concatenate([wg[..., start:stop], wg[..., n_src + start : n_src + stop]], axis=-1)
        args = (lo[..., start:stop, :], hi[..., start:stop, :], w, q)
        part = _gemm_reduce(*(jnp.reshape(a, (1,) * (rank - a.ndim) + a.shape) for a in args))
        out = part if out is None else add_mod(out, part, q)
    return out


@jax.custom_batching.custom_vmap
def _gemm_reduce(lo, hi, w, q):
    """[sum_i w[.., j, i] x[.., i, n]]_q for x = (lo; hi) int32 ``[.., 2s, N]``, w int32 ``[.., M, 2s]``,
    q uint32 ``[.., M, 1]`` (equal ranks, size-1 axes broadcast): uint32 ``[.., M, N]`` in [0, q)."""
    with jax.enable_x64(True):
        f64 = jnp.float64
        x = jnp.concatenate([lo, hi], axis=-2).astype(f64)
        s = jnp.matmul(w.astype(f64), x, precision=lax.Precision.HIGHEST)
        qf = q.astype(f64)
        r = s - jnp.round(s * (1.0 / qf)) * qf  # in (-q, q)
        r = jnp.where(r < 0, r + qf, r)
        return r.astype(jnp.int32).astype(U32)


@_gemm_reduce.def_vmap
def _gemm_reduce_vmap(axis_size, in_batched, lo, hi, w, q):
    del axis_size  # unbatched operands get a size-1 axis in front and broadcast
    args = [a if batched else a[None] for a, batched in zip((lo, hi, w, q), in_batched, strict=True)]
    return _gemm_reduce(*args), True
