"""Reduction modulo sparse (low-Hamming-weight) moduli by shifts and adds only.

A sparse modulus is a sum of a few signed powers of two, ``q = 2^a + sum_i sigma_i 2^(e_i)`` with
``a > e_1 > ... >= 0`` (e.g. ``2^30 - 2^18 + 1`` or ``2^30 + 2^13 + 1``). Writing ``c = q - 2^a`` (itself
sparse), ``2^a = -c (mod q)``, so a two-word value ``z = z_hi 2^a + z_lo`` (``z_lo < 2^a``) folds to

    z = z_lo - z_hi c = z_lo + sum_i (-sigma_i) (z_hi << e_i)   (mod q),

a few shifted additions and subtractions and no multiplier. Each fold shrinks the value by about
``a - e_1`` bits; a fixed number of folds, computed in Python from the terms and the input bound, then
conditional subtractions of ``2^j q`` bring the value into ``[0, q)``. The kernels are branch-free,
jittable, and use ``uint32`` words only (no 64-bit type, exact with x64 off).

Where ``c > 0`` a fold could go negative; a multiple ``k q >= max(z_hi) c`` (a static two-word
constant) is added first. All two-word arithmetic is modulo 2^64, which is exact because every fold's
true value is proven (by the static bound tracking in :func:`_fold_plan`) to lie in ``[0, 2^64)``; once
the bound is below 2^32 the high word is dropped and the folds run on one word.

Reference: CASA (He, Oliva Madrigal, Koc, Bao, Xie) §3.1, "Modular Reduction Module": low-Hamming-weight
primes (signed-digit / CSD form) whose reduction is "a shift-and-add strategy" (their MMSM multiplies by
the sparse part of the modulus with shifts selected by the modulus' set-bit indices). Here the same
idea is a software fold in 32-bit words; the signed form is the non-adjacent form (NAF), the CSD form of
minimal weight.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from crossfhe.errors import ParameterError
from crossfhe.math.modular import U32, add_wide, mul_wide
from crossfhe.math.primes import signed_digits
from crossfhe.math.xla import plan_cache

MAX_WEIGHT = 4
"""Most nonzero signed digits a :class:`SparseModulus` may have (leading term and the final 1 included)."""

MAX_FOLDS = 8
"""Most folds accepted for the default domain; beyond it (second exponent close to the leading one)
Barrett reduction (two multiplications) is cheaper, and ``from_q`` refuses the modulus."""

_MASK32 = (1 << 32) - 1


def _naf(q: int) -> tuple[tuple[int, int], ...]:
    """Non-adjacent form of q > 0 as ``((sign, exponent), ...)``, exponents descending."""
    return tuple((1 if d > 0 else -1, abs(d).bit_length() - 1) for d in signed_digits(q))


@dataclass(frozen=True)
class SparseModulus:
    """An odd modulus ``2 < q < 2^31`` of at most ``MAX_WEIGHT`` signed powers of two.

    ``terms``: ``((+1, a), (sigma_1, e_1), ...)``, exponents strictly descending, signs +-1, summing to q.
    Frozen and hashable: usable as a ``jax.jit`` static argument. Build it with :meth:`from_q`.
    """

    q: int
    terms: tuple[tuple[int, int], ...]

    def __post_init__(self):
        q, terms = self.q, self.terms
        if not (2 < q < 2**31) or q % 2 == 0:
            raise ParameterError(f"sparse modulus must be odd with 2 < q < 2^31, got q = {q}")
        if not terms or len(terms) > MAX_WEIGHT:
            raise ParameterError(
                f"q = {q} has {len(terms)} signed binary digits; a sparse modulus has at most {MAX_WEIGHT}"
            )
        exps = [e for _, e in terms]
        if any(s not in (1, -1) for s, _ in terms) or exps != sorted(set(exps), reverse=True):
            raise ParameterError(f"terms must be (+-1, exponent) with exponents strictly descending: {terms}")
        if terms[0][0] != 1 or sum(s << e for s, e in terms) != q:
            raise ParameterError(f"terms {terms} do not sum to q = {q} with a positive leading term")

    @classmethod
    def from_q(cls, q: int) -> SparseModulus:
        """The modulus q in its non-adjacent (minimal signed-binary) form.

        Raises ParameterError when q is even, outside (2, 2^31), has more than ``MAX_WEIGHT`` nonzero
        signed digits, or needs more than ``MAX_FOLDS`` folds for products below 2^(2s).
        """
        q = int(q)
        if not (2 < q < 2**31) or q % 2 == 0:
            raise ParameterError(f"sparse modulus must be odd with 2 < q < 2^31, got q = {q}")
        terms = _naf(q)
        if len(terms) > MAX_WEIGHT:
            raise ParameterError(
                f"q = {q} has signed-binary weight {len(terms)} (NAF {_format_terms(terms)}); "
                f"a sparse modulus has weight at most {MAX_WEIGHT}"
            )
        sm = cls(q, terms)
        folds = sm.fold_count()
        if folds > MAX_FOLDS:
            raise ParameterError(
                f"q = {_format_terms(terms)} needs {folds} folds (> {MAX_FOLDS}): its second exponent is "
                f"too close to the leading one; use Barrett reduction for it"
            )
        return sm

    @property
    def bits(self) -> int:
        """s, the bit length of q."""
        return self.q.bit_length()

    @property
    def lead(self) -> int:
        """a, the exponent of the leading term (q = 2^a + c with |c| < 2^a; a is s or s - 1)."""
        return self.terms[0][1]

    @property
    def max_input(self) -> int:
        """Largest z accepted by :func:`sparse_reduce_wide`: 2^(a+32) - 1 (at least 2^(2s) - 1)."""
        return (1 << (self.lead + 32)) - 1  # a <= 31, so below 2^64

    def fold_count(self, input_bound: int | None = None) -> int:
        """Number of folds :func:`sparse_reduce_wide` does for inputs z <= input_bound.

        The default bound is 2^(2s) - 1 (the domain of ``modular.barrett_reduce_wide``).
        """
        return len(_fold_plan(self, self._bound(input_bound)).folds)

    def _bound(self, input_bound: int | None) -> int:
        if input_bound is None:
            return (1 << (2 * self.bits)) - 1
        b = int(input_bound)
        if not 0 <= b <= self.max_input:
            raise ParameterError(
                f"input bound {b} outside the sparse reduction domain [0, 2^{self.lead + 32} - 1] "
                f"for q = {self.q}"
            )
        return b


def _format_terms(terms) -> str:
    return " ".join(f"{'+' if s > 0 else '-'} 2^{e}" for s, e in terms).lstrip("+ ")


# --------------------------------------------------------------------------------------------------
# Static schedule (Python ints, computed once per modulus and bound)
# --------------------------------------------------------------------------------------------------


class _Fold(NamedTuple):
    wide_in: bool  # input bound >= 2^32: the input has two words
    wide_out: bool  # output bound >= 2^32: the result needs two words
    offset: int  # k q, added to keep the fold non-negative (0 when c < 0)


class _Plan(NamedTuple):
    folds: tuple[_Fold, ...]
    subtract: tuple[int, ...]  # 2^j q for j descending, each subtracted when the value is >= it
    final_bound: int  # bound on the value before the conditional subtractions


def _subtraction_steps(bound: int, q: int) -> int:
    """Conditional subtractions of 2^j q taking [0, bound] into [0, q): ceil(log2(ceil((bound+1)/q)))."""
    m = -(-(bound + 1) // q)
    return (m - 1).bit_length()


@plan_cache(maxsize=256)
def _fold_plan(sm: SparseModulus, bound: int) -> _Plan:
    """Fold schedule for inputs z in [0, bound].

    A fold maps z <= U, with z_hi = floor(z / 2^a) <= H = floor(U / 2^a), to
    z_lo - z_hi c + k q in [k q - H max(c, 0), 2^a - 1 + H max(-c, 0) + k q], with the least k making the
    lower end >= 0. Folding continues while the bound is >= 2^32 (it must fit one word) and, after that,
    while a fold lowers the number of conditional subtractions needed.
    """
    q, a = sm.q, sm.lead
    c = q - (1 << a)
    folds = []
    u = bound
    for _ in range(64):
        h = u >> a
        if h == 0:
            break
        k = -(-h * max(c, 0) // q)
        u2 = (1 << a) - 1 + h * max(-c, 0) + k * q
        if u < 2**32 and _subtraction_steps(u2, q) >= _subtraction_steps(u, q):
            break
        if u2 >= u or u2 >= 2**64:
            raise ParameterError(f"sparse reduction does not converge for q = {q} and bound {bound}")
        folds.append(_Fold(wide_in=u >= 2**32, wide_out=u2 >= 2**32, offset=k * q))
        u = u2
    if u >= 2**32:
        raise ParameterError(f"sparse reduction does not converge for q = {q} and bound {bound}")
    steps = _subtraction_steps(u, q)
    return _Plan(tuple(folds), tuple(q << j for j in reversed(range(steps))), u)


# --------------------------------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------------------------------


def _sub_wide(hi, lo, hi2, lo2):
    """Two-word difference ``(hi, lo) - (hi2, lo2)`` modulo 2^64, as ``(hi, lo)``."""
    borrow = (lo < lo2).astype(U32)
    return hi - hi2 - borrow, lo - lo2


def _fold(hi, lo, sm: SparseModulus, f: _Fold):
    """One fold: ``z_lo - z_hi c + offset`` for z = hi 2^32 + lo (hi ignored when not ``f.wide_in``)."""
    a = sm.lead
    z_lo = lo & np.uint32((1 << a) - 1)
    z_hi = ((hi << np.uint32(32 - a)) | (lo >> np.uint32(a))) if f.wide_in else lo >> np.uint32(a)
    if not f.wide_out:  # the result is < 2^32: one word, arithmetic modulo 2^32 is exact
        t = z_lo + np.uint32(f.offset)
        for sign, e in sm.terms[1:]:
            w = z_hi << np.uint32(e)
            t = t - w if sign > 0 else t + w
        return None, t
    t_hi, t_lo = add_wide(
        jnp.full_like(z_lo, f.offset >> 32),
        z_lo,
        jnp.zeros_like(z_lo),
        jnp.full_like(z_lo, f.offset & _MASK32),
    )
    for sign, e in sm.terms[1:]:
        w_hi = z_hi >> np.uint32(32 - e) if e > 0 else jnp.zeros_like(z_hi)
        w_lo = z_hi << np.uint32(e)
        step = _sub_wide if sign > 0 else add_wide
        t_hi, t_lo = step(t_hi, t_lo, w_hi, w_lo)
    return t_hi, t_lo


def sparse_reduce_wide(hi, lo, sm: SparseModulus, *, input_bound: int | None = None):
    """``(hi * 2^32 + lo) mod q`` by shifts, adds and compares only. Output in [0, q). Exact.

    hi, lo: uint32 arrays (broadcasting) holding z = hi 2^32 + lo with ``z <= input_bound``.
    ``input_bound`` (a static Python int) defaults to 2^(2s) - 1, s = bits of q, the domain of
    ``modular.barrett_reduce_wide`` (so any product of two values below 2^s); it may be raised up to
    ``sm.max_input`` = 2^(a+32) - 1, which for q = 2^a - ... with a <= 30 (then s = a) also covers
    products of lazy values in [0, 2q). The number of folds (``sm.fold_count(input_bound)``) is fixed at
    trace time: the kernel is branch-free. No multiplication except by powers of two (shifts); uint32
    only, exact with x64 off.
    Reference: CASA §3.1 (shift-and-add reduction for low-Hamming-weight primes).
    """
    plan = _fold_plan(sm, sm._bound(input_bound))
    hi = jnp.asarray(hi, dtype=U32)
    lo = jnp.asarray(lo, dtype=U32)
    hi, lo = jnp.broadcast_arrays(hi, lo)
    for f in plan.folds:
        hi, lo = _fold(hi, lo, sm, f)
    # Now z = lo <= plan.final_bound < 2^32 (hi is None or was zero by the bound); subtract 2^j q.
    for m in plan.subtract:
        lo = jnp.where(lo >= np.uint32(m), lo - np.uint32(m), lo)
    return lo


def sparse_reduce(x, sm: SparseModulus):
    """``x mod q`` for any uint32 x, by shifts, adds and compares only. Output in [0, q). Exact."""
    x = jnp.asarray(x, dtype=U32)
    return sparse_reduce_wide(jnp.zeros_like(x), x, sm, input_bound=_MASK32)


def sparse_mul(a, b, sm: SparseModulus, *, input_bound: int | None = None):
    """``a * b mod q`` in [0, q): ``modular.mul_wide`` then :func:`sparse_reduce_wide`. Exact.

    Domain as :func:`sparse_reduce_wide` on the product: a * b <= input_bound, by default a * b < 2^(2s)
    (e.g. a, b in [0, q)), where it equals ``modular.barrett_mul`` bit for bit.
    """
    hi, lo = mul_wide(a, b)
    return sparse_reduce_wide(hi, lo, sm, input_bound=input_bound)
