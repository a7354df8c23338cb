"""Gadget decomposition: signed base-2^k digits (key switching, TFHE external product) and RNS digits.

The two decompositions that key switching and the TFHE external product need:

* **Gadget digits** of an integer x mod M (a word modulus q, or the product Q of an RNS basis), base
  B = 2^k, ``levels`` = l digits, MSB first (digit 0 is the most significant, as in TFHE). With
  ``Gadget.vector(M)`` = (g_0, ..., g_{l-1}):

  - exact, when B^l >= M: g_j = B^(l-1-j) and sum_j d_j g_j = x_c, the centered representative of x
    (in [-(M-1)/2, M/2]), so the sum is congruent to x mod M exactly. Digits 1..l-1 lie in
    [-B/2, B/2 - 1], digit 0 in [-B/2, B/2].
  - approximate, when B^l < M: v = round(x B^l / M) (ties up), digits of v mod B^l (balanced, all in
    [-B/2, B/2 - 1], carry out of the top digit dropped) and g_j = round(M / B^(j+1)). Then
    |x - sum_j d_j g_j|_M <= M / (2 B^l) + (B/2) sum_j |M / B^(j+1) - g_j| =: ``Gadget.error_bound(M)``
    (|.|_M the centered distance mod M); the second term vanishes for a power-of-two M, where this is
    TFHE's decomposition of the top k l bits with the dropped low part rounded to nearest.

  Digits come back as int32 with a new **leading** digit axis: ``[levels, ...]``.
  :func:`digits_to_residues` maps them into an RNS basis to multiply with key material.

* **RNS digits** (dnum) of hybrid key switching: :func:`digit_partition` splits the limbs into dnum
  contiguous groups; :func:`digit_residues` slices a polynomial accordingly (ModUp of each group is
  :func:`crossfhe.math.rns.mod_up`).

All kernels use ``uint32``/``int32`` only and are exact under ``jax.jit`` with x64 off. The RNS gadget
kernel composes the residues by CRT in multiword ``uint32`` arithmetic with carries (any number of limbs,
cost O(limbs * words) per coefficient; meant for 1-4 limbs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.errors import BasisMismatchError, ParameterError
from crossfhe.math.modular import U32, add_wide, mul_wide, mulhi, shoup_mul
from crossfhe.math.rns import RNSBasis
from crossfhe.math.xla import jit, plan_cache

I32 = jnp.int32
_MAX_BASE_LOG = 30
_ALL_ONES = np.uint32(0xFFFFFFFF)

_static = partial(field, metadata={"static": True})


# --------------------------------------------------------------------------------------------------
# Gadget
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gadget:
    """Base B = 2^base_log and number of digits ``levels`` of a gadget decomposition; frozen, hashable.

    1 <= base_log <= 30 (digits fit int32), levels >= 1.
    """

    base_log: int
    levels: int

    def __post_init__(self):
        if not 1 <= self.base_log <= _MAX_BASE_LOG:
            raise ParameterError(f"base_log must be in [1, {_MAX_BASE_LOG}], got {self.base_log}")
        if self.levels < 1:
            raise ParameterError(f"levels must be >= 1, got {self.levels}")

    @property
    def base(self) -> int:
        return 1 << self.base_log

    def is_exact_for(self, modulus: int) -> bool:
        """True when B^levels >= modulus: the decomposition mod ``modulus`` is exact."""
        return self.base**self.levels >= modulus

    def vector(self, modulus: int) -> tuple[int, ...]:
        """The gadget vector (g_0, ..., g_{l-1}), MSB first, as Python ints in [0, modulus].

        Exact case: g_j = B^(l-1-j) mod modulus; approximate case: g_j = round(modulus / B^(j+1)).
        """
        b, l = self.base, self.levels
        if self.is_exact_for(modulus):
            return tuple(pow(b, l - 1 - j, modulus) for j in range(l))
        return tuple((modulus + b ** (j + 1) // 2) // b ** (j + 1) for j in range(l))

    def error_bound(self, modulus: int) -> Fraction:
        """Bound on |x - sum_j d_j g_j| (centered mod ``modulus``): 0 when exact, else
        modulus / (2 B^l) + (B/2) sum_j |modulus / B^(j+1) - g_j|."""
        if self.is_exact_for(modulus):
            return Fraction(0)
        b, l = self.base, self.levels
        g = self.vector(modulus)
        rounding = sum(abs(Fraction(modulus, b ** (j + 1)) - g[j]) for j in range(l))
        return Fraction(modulus, 2 * b**l) + Fraction(b, 2) * rounding


# --------------------------------------------------------------------------------------------------
# Digits from a multiword two's-complement number
# --------------------------------------------------------------------------------------------------


def _bits(words, sign, pos: int, width: int):
    """Bits [pos, pos + width) (width <= 31) of the number with little-endian uint32 ``words``,
    extended above its top word by the word ``sign`` (0 or all ones)."""

    def word(i):
        return words[i] if i < len(words) else sign

    w, o = divmod(pos, 32)
    v = word(w) >> o if o else word(w)
    if o + width > 32:
        v = v | (word(w + 1) << (32 - o))
    return v & np.uint32((1 << width) - 1)


def _to_i32(u):
    return jax.lax.bitcast_convert_type(u, I32)


def _balanced_digits(words, sign, carry, gadget: Gadget, *, signed_top: bool):
    """Balanced base-2^k digits, MSB first, stacked on a new leading axis (int32).

    Digits 0..l-2 (counted from the least significant) are d = t - B [t >= B/2] for t = field + carry,
    in [-B/2, B/2 - 1]. The top digit is either the signed rest floor(v / B^(l-1)) + carry
    (``signed_top``: exact for |v| <= B^l / 2, lands in [-B/2, B/2]) or reduced like the others with its
    carry out dropped (v taken mod B^l).
    """
    k, l = gadget.base_log, gadget.levels
    b, half = np.uint32(1 << k), np.uint32(1 << (k - 1))
    zero = np.uint32(0)
    digits = []
    for j in range(l - 1):
        t = _bits(words, sign, j * k, k) + carry
        neg = t >= half
        digits.append(_to_i32(t - jnp.where(neg, b, zero)))
        carry = neg.astype(U32)
    pos = k * (l - 1)
    if signed_top:
        f = _bits(words, sign, pos, k + 1)
        top = f - jnp.where(f >= b, np.uint32(2 << k), zero) + carry
    else:
        t = _bits(words, sign, pos, k) + carry
        top = t - jnp.where(t >= half, b, zero)
    digits.append(_to_i32(top))
    return jnp.stack(digits[::-1])


# --------------------------------------------------------------------------------------------------
# One word modulus
# --------------------------------------------------------------------------------------------------


@partial(jit, static_argnames=("q", "gadget"))
def decompose_signed(x, q: int, gadget: Gadget):
    """Signed gadget digits of residues x mod a word modulus q (see the module docstring for the math).

    x: uint32 ``[...]`` in [0, q), 2 <= q < 2^31 (q static). Returns int32 ``[levels, ...]``, MSB first:
    exact case (B^l >= q) sum_j d_j B^(l-1-j) = x_c (centered x); approximate case, v = round(x B^l / q)
    computed with a Shoup quotient and an exact remainder, and sum_j d_j round(q / B^(j+1)) equals x
    within ``gadget.error_bound(q)`` mod q. Digit ranges as in the module docstring.
    """
    if not 2 <= q < 2**31:
        raise ParameterError(f"decompose_signed needs 2 <= q < 2^31, got {q}")
    x = jnp.asarray(x, dtype=U32)
    zeros = jnp.zeros_like(x)
    if gadget.is_exact_for(q):
        neg = x > np.uint32(q // 2)
        v = jnp.where(neg, x - np.uint32(q), x)
        sign = jnp.where(neg, _ALL_ONES, np.uint32(0))
        return _balanced_digits([v], sign, zeros, gadget, signed_top=True)
    w = gadget.base**gadget.levels  # < q
    qhat = mulhi(x, np.uint32((w << 32) // q))  # floor(x w / q) or one less
    r = x * np.uint32(w) - qhat * np.uint32(q)  # in [0, 2q), exact mod 2^32
    ge = r >= np.uint32(q)
    r = jnp.where(ge, r - np.uint32(q), r)
    v = qhat + ge.astype(U32) + (r >= np.uint32(q - q // 2)).astype(U32)  # round(x w / q) in [0, w]
    return _balanced_digits([v], zeros, zeros, gadget, signed_top=False)


def digits_to_residues(digits, q):
    """Signed digits as residues of each modulus: ``[d]_{q_i}``.

    digits: int32 ``[..., N]`` with |d| < q_i (true for gadget digits when 2^(base_log-1) < min q_i);
    q: uint32 ``[limbs, 1]`` (e.g. ``basis.table.q``). Returns uint32 ``[..., limbs, N]`` in [0, q_i).
    """
    d = jnp.asarray(digits, dtype=I32)[..., None, :]
    m = jnp.abs(d).astype(U32)
    return jnp.where((d < 0) & (m != 0), q - m, m).astype(U32)


# --------------------------------------------------------------------------------------------------
# Multiword arithmetic (little-endian lists of uint32 arrays)
# --------------------------------------------------------------------------------------------------


def _words_of(value: int, n_words: int) -> list[int]:
    return [(value >> (32 * w)) & 0xFFFFFFFF for w in range(n_words)]


def _mul_acc_words(y, consts):
    """sum_i y_i * c_i mod 2^(32 W): y uint32 ``[..., L, N]``, consts uint32 ``[L, W]`` (words of c_i).

    Products are split into (hi, lo) words and summed column by column in two-word accumulators (each
    column has at most 2L terms), then carries are propagated once.
    """
    n_limbs, n_words = consts.shape
    cols = [[] for _ in range(n_words)]
    for i in range(n_limbs):
        yi = y[..., i, :]
        for w in range(n_words):
            hi, lo = mul_wide(yi, consts[i, w])
            cols[w].append(lo)
            if w + 1 < n_words:
                cols[w + 1].append(hi)
    out = []
    carry = jnp.zeros_like(y[..., 0, :])
    for terms in cols:
        acc_hi, acc_lo = jnp.zeros_like(carry), carry
        for t in terms:
            acc_hi, acc_lo = add_wide(acc_hi, acc_lo, np.uint32(0), t)
        out.append(acc_lo)
        carry = acc_hi
    return out


def _sub_words(a, b):
    """Two's-complement a - b of word lists (b: uint32 ``[W]``); also the borrow out (1 iff a < b)."""
    out = []
    borrow = jnp.zeros_like(a[0])
    for w, aw in enumerate(a):
        bw = b[w]
        out.append(aw - bw - borrow)
        borrow = ((aw < bw) | ((aw == bw) & (borrow == 1))).astype(U32)
    return out, borrow


def _select_words(cond, a, b):
    return [jnp.where(cond, x, y) for x, y in zip(a, b, strict=True)]


# --------------------------------------------------------------------------------------------------
# Whole integers mod Q of an RNS basis
# --------------------------------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False)
class RNSGadgetPlan:
    """Tables of the gadget decomposition of x mod Q = prod q_i from its residues; see :meth:`create`.

    ``q``, ``hat_inv``, ``hat_inv_shoup``: uint32 ``[L, 1]`` (step 1 of CRT: y_i = [x_i (Q/q_i)^-1]_{q_i}).
    ``words``: uint32 ``[L, W]``; exact case the words of Q/q_i, approximate case the words of
    floor(B^l 2^F / q_i) mod 2^(32 W) with F = 32 ``frac_words``. Exact case only: ``sub_words``
    ``[S, W]`` the words of 2^s Q for s = S-1, ..., 0, and ``half_words`` ``[W]`` those of (Q-1)/2.
    """

    q: np.ndarray
    hat_inv: np.ndarray
    hat_inv_shoup: np.ndarray
    words: np.ndarray
    sub_words: np.ndarray | None
    half_words: np.ndarray | None
    basis: RNSBasis = _static()
    gadget: Gadget = _static()
    exact: bool = _static()
    frac_words: int = _static()

    @classmethod
    def create(cls, basis: RNSBasis, gadget: Gadget) -> RNSGadgetPlan:
        """Exact case (B^l >= Q): words for the exact CRT sum and its reduction mod Q.
        Approximate case: F = 32 ceil((32 + bits(L) + bits(Q)) / 32) fraction bits make the rounding of
        sum_i y_i B^l / q_i exact (its distance to a half-integer is at least 1 / (2Q))."""
        big_q, n = basis.product, len(basis)
        common = dict(
            q=basis.table.q,
            hat_inv=np.array(basis.hat_inv, dtype=np.uint32).reshape(-1, 1),
            hat_inv_shoup=np.array(basis.hat_inv_shoup, dtype=np.uint32).reshape(-1, 1),
            basis=basis,
            gadget=gadget,
        )
        if gadget.is_exact_for(big_q):
            n_words = -(-(big_q.bit_length() + n.bit_length() + 1) // 32)
            n_sub = max(1, (n - 1).bit_length())  # 2^n_sub >= n: subtract 2^s Q, s = n_sub-1 .. 0
            return cls(
                words=_word_table(basis.hat, n_words),
                sub_words=_word_table([big_q << s for s in reversed(range(n_sub))], n_words),
                half_words=_word_table([(big_q - 1) // 2], n_words)[0],
                exact=True,
                frac_words=0,
                **common,
            )
        frac = -(-(32 + n.bit_length() + big_q.bit_length()) // 32)
        n_words = frac + -(-(gadget.base_log * gadget.levels) // 32)
        scale = gadget.base**gadget.levels << (32 * frac)
        consts = [(scale // q) % (1 << (32 * n_words)) for q in basis.moduli]
        return cls(
            words=_word_table(consts, n_words),
            sub_words=None,
            half_words=None,
            exact=False,
            frac_words=frac,
            **common,
        )


def _word_table(values, n_words: int) -> np.ndarray:
    return np.array([_words_of(v, n_words) for v in values], dtype=np.uint32).reshape(-1, n_words)


def _centered_crt_words(y, plan: RNSGadgetPlan):
    """x_c, the centered CRT composition of y, as two's-complement words and their sign word."""
    s = _mul_acc_words(y, plan.words)  # sum_i y_i Q/q_i < L Q
    for row in range(plan.sub_words.shape[0]):  # subtract 2^s Q when possible: ends in [0, Q)
        d, borrow = _sub_words(s, plan.sub_words[row])
        s = _select_words(borrow == 0, d, s)
    _, above_half = _sub_words(plan.half_words, s)  # borrow iff x > (Q-1)/2
    neg = above_half == 1
    d, _ = _sub_words(s, plan.sub_words[-1])  # x - Q
    return _select_words(neg, d, s), jnp.where(neg, _ALL_ONES, np.uint32(0))


@jit
def gadget_digits_rns(x, plan: RNSGadgetPlan):
    """Signed gadget digits of X mod Q from its residues x (math in the module docstring). Jitted kernel.

    x: uint32 ``[..., L, N]`` in [0, q_i). Step 1: y_i = [x_i (Q/q_i)^-1]_{q_i} (Shoup).
    Exact case (B^l >= Q): X = sum_i y_i Q/q_i mod Q composed in multiword arithmetic, centered, and
    split into digits with sum_j d_j B^(l-1-j) = X_c. Approximate case: v = round(X B^l / Q) mod B^l
    = round(sum_i y_i B^l / q_i) mod B^l, computed exactly in fixed point (see :meth:`RNSGadgetPlan.create`).
    Returns int32 ``[levels, ..., N]``, MSB first, ranges and error bound as in the module docstring.
    """
    x = jnp.asarray(x, dtype=U32)
    if x.ndim < 2 or x.shape[-2] != len(plan.basis):
        raise BasisMismatchError(
            f"gadget_digits_rns: expected shape [..., {len(plan.basis)}, N], got {tuple(x.shape)}"
        )
    y = shoup_mul(x, plan.hat_inv, plan.hat_inv_shoup, plan.q)
    if plan.exact:
        words, sign = _centered_crt_words(y, plan)
        zeros = jnp.zeros_like(sign)
        return _balanced_digits(words, sign, zeros, plan.gadget, signed_top=True)
    e = _mul_acc_words(y, plan.words)
    f = plan.frac_words
    round_bit = e[f - 1] >> 31
    return _balanced_digits(e[f:], jnp.zeros_like(round_bit), round_bit, plan.gadget, signed_top=False)


@plan_cache(maxsize=64, on_device=True)
def _rns_plan(basis: RNSBasis, gadget: Gadget) -> RNSGadgetPlan:
    return RNSGadgetPlan.create(basis, gadget)


def decompose_signed_rns(x, basis: RNSBasis, gadget: Gadget):
    """Signed gadget digits of X mod Q (Q = ``basis.product``) from residues x ``[..., L, N]``.

    Convenience over :func:`gadget_digits_rns` with a cached :class:`RNSGadgetPlan`. Returns int32
    ``[levels, ..., N]``; reconstruct with ``gadget.vector(basis.product)``.
    """
    return gadget_digits_rns(x, _rns_plan(basis, gadget))


# --------------------------------------------------------------------------------------------------
# RNS digits (dnum) for hybrid key switching
# --------------------------------------------------------------------------------------------------


def digit_partition(n_limbs: int, dnum: int, *, active: int | None = None) -> tuple[range, ...]:
    """Contiguous limb groups of hybrid key switching: alpha = ceil(n_limbs / dnum) limbs per group.

    Group i is range(i alpha, min((i+1) alpha, n_limbs)); there are ceil(n_limbs / alpha) <= dnum groups
    (the last may be shorter). ``active``: restrict to the first ``active`` limbs (a lower level), which
    keeps the top-level grouping (key material is made for it) and drops empty groups.
    """
    if not 1 <= dnum <= n_limbs:
        raise ParameterError(f"dnum must be in [1, n_limbs = {n_limbs}], got {dnum}")
    active = n_limbs if active is None else active
    if not 1 <= active <= n_limbs:
        raise ParameterError(f"active must be in [1, {n_limbs}], got {active}")
    alpha = math.ceil(n_limbs / dnum)
    return tuple(range(s, min(s + alpha, active)) for s in range(0, active, alpha))


def digit_bases(basis: RNSBasis, groups: tuple[range, ...]) -> tuple[RNSBasis, ...]:
    """The sub-basis of each limb group (the digit bases D_i that ModUp extends)."""
    return tuple(basis.sub(g.start, g.stop) for g in groups)


def digit_residues(x, groups: tuple[range, ...]):
    """The residues of each limb group: ``x[..., g.start:g.stop, :]`` for every group g."""
    return tuple(x[..., g.start : g.stop, :] for g in groups)
