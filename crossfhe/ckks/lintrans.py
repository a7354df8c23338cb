"""Linear transforms of CKKS slots in diagonal form, evaluated with baby-step giant-step and hoisted rotations.

A linear map M of n slots (n a power of two dividing N/2; a vector of n slots sits replicated in the N/2
slots) is held by its nonzero generalized diagonals: (M z)_i = sum_k d_k[i] z[(i + k) mod n], i.e.
M z = sum_k d_k * rot(z, k) with rot(z, k)_i = z_{i+k} (:func:`crossfhe.ckks.ops.rotate`). When every offset is
a multiple of a stride s, k = s j with j = G + b, b = j mod n1 (baby), G = j - b (giant):

    M z = sum_G rot( sum_b rot(d_{s(G+b)}, -sG) * rot(z, s b), s G ),

so the n1 baby rotations of z share one ModUp (:func:`crossfhe.ckks.ops.rotate_many`) and each giant costs
one rotation of a sum (Halevi-Shoup; the hoisting of Bossuat et al., Eurocrypt 2021). The pre-rotated
diagonals are encoded once (:func:`encode`) at the level and scales of their use: at level l with input scale
Delta_in and wanted output scale Delta_out, each diagonal is encoded at Delta_out q_l / Delta_in (q_l the
level's primes), the sums are taken unrescaled, and one rescale ends at level l - 1 with scale Delta_out
exactly. Error: one rescale, one key switch per rotation (on the unrescaled sums, at scale Delta_out q_l, so
its noise is negligible), and the diagonals' rounding at their scale (relative 2^-1 / scale per slot).

:func:`compose` multiplies diagonal forms (the merged stages of a factored DFT, :mod:`crossfhe.ckks.bootstrap`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import numpy as np

from crossfhe.ckks import encoder, ops
from crossfhe.ckks.ciphertext import Ciphertext, EvaluationKeys
from crossfhe.ckks.params import Params
from crossfhe.core import keyswitch as ks
from crossfhe.errors import ParameterError
from crossfhe.math.xla import jit, plan_cache
from crossfhe.ring import poly

DROP = 2.0**-60
"""Diagonals whose entries are all below this (relative to the largest entry of the transform) are dropped."""


@dataclass(frozen=True)
class Diagonals:
    """A linear map of ``n`` slots: offset k (0 <= k < n) -> complex128[n] diagonal d_k."""

    n: int
    diags: dict

    def __post_init__(self):
        n = self.n
        if n < 1 or n & (n - 1):
            raise ParameterError(f"a transform acts on a power-of-two number of slots, got {n}")
        for k, d in self.diags.items():
            if not 0 <= k < n or np.shape(d) != (n,):
                raise ParameterError(f"diagonal {k}: offsets are in [0, {n}) and diagonals have {n} entries")

    def apply(self, z) -> np.ndarray:
        """M z in float64 (the reference of :func:`apply`)."""
        z = np.asarray(z, dtype=np.complex128)
        out = np.zeros(self.n, dtype=np.complex128)
        for k, d in self.diags.items():
            out += d * np.roll(z, -k)
        return out

    def pruned(self) -> Diagonals:
        top = max((float(np.max(np.abs(d))) for d in self.diags.values()), default=0.0)
        return Diagonals(self.n, {k: d for k, d in self.diags.items() if np.max(np.abs(d)) > DROP * top})

    def stride(self) -> int:
        """The gcd of the offsets (taken in (-n/2, n/2]) and n."""
        g = self.n
        for k in self.diags:
            g = math.gcd(g, _signed(k, self.n))
        return g or self.n


def compose(a: Diagonals, b: Diagonals) -> Diagonals:
    """The diagonals of a b (apply b, then a): (a b)_{k+l}[i] += a_k[i] b_l[i + k]."""
    if a.n != b.n:
        raise ParameterError(f"cannot compose transforms of {a.n} and {b.n} slots")
    out: dict = {}
    for k, dk in a.diags.items():
        for l_, dl in b.diags.items():
            key = (k + l_) % a.n
            term = dk * np.roll(dl, -k)
            out[key] = out[key] + term if key in out else term
    return Diagonals(a.n, out).pruned()


def _signed(k: int, n: int) -> int:
    return k - n if k > n // 2 else k


@dataclass(frozen=True)
class Plan:
    """The baby-step giant-step split of a transform: ``stride`` s, ``n1`` baby steps, and per giant G (a
    multiple of n1) the baby indices b with a diagonal at s (G + b)."""

    n: int
    stride: int
    n1: int
    giants: tuple

    @property
    def baby_rotations(self) -> tuple[int, ...]:
        return tuple(sorted({self.stride * b for _, bs in self.giants for b in bs}))

    @property
    def giant_rotations(self) -> tuple[int, ...]:
        return tuple(sorted({self.stride * g for g, _ in self.giants if g}))

    def rotations(self) -> set[int]:
        """The rotation offsets the evaluation needs keys for (reduced mod n, 0 left out)."""
        return {r % self.n for r in self.baby_rotations + self.giant_rotations if r % self.n}


def plan(m: Diagonals, n1: int | None = None, giant_cost: float = 1.0, max_n1: int | None = None) -> Plan:
    """The BSGS split of ``m``: n1 (a power of two, at most ``max_n1``) defaults to the one that minimizes baby
    rotations + ``giant_cost`` x giant rotations (a giant one is a full key switch, a baby one shares the ModUp).
    Each distinct rotation needs its key: ``max_n1`` bounds the key count where keys are large."""
    s = m.stride()
    js = sorted(_signed(k, m.n) // s for k in m.diags)
    if not js:
        raise ParameterError("a transform needs at least one diagonal")

    def split(n1):
        giants: dict = {}
        for j in js:
            b = j % n1
            giants.setdefault(j - b, []).append(b)
        return giants

    if n1 is None:
        span = js[-1] - js[0] + 1
        cands = [1 << e for e in range(max(1, span).bit_length() + 1) if max_n1 is None or 1 << e <= max_n1]
        n1 = min(cands, key=lambda c: (len({b for bs in split(c).values() for b in bs if b})
                                       + giant_cost * len([g for g in split(c) if g]), c))
    giants = split(n1)
    return Plan(m.n, s, n1, tuple((g, tuple(sorted(bs))) for g, bs in sorted(giants.items())))


@dataclass(frozen=True, eq=False)
class CompactDiagonal:
    """A diagonal held as its plaintext's integer coefficients, x = (-1)^neg (hi 2^32 + lo) 2^shift per coefficient
    (:func:`crossfhe.ckks.encoder.integral_split`: 11 bytes each, where the plaintext's words take 4 per limb), made
    into those words at each use (:func:`expand`: the residues and one forward transform per limb). ``scale`` and
    ``moduli`` as the plaintext's. A pytree: the four arrays are its children."""

    neg: jax.Array
    hi: jax.Array
    lo: jax.Array
    shift: jax.Array
    moduli: tuple
    scale: float

    def nbytes(self) -> int:
        return sum(int(a.nbytes) for a in (self.neg, self.hi, self.lo, self.shift))


jax.tree_util.register_pytree_node(
    CompactDiagonal, lambda p: ((p.neg, p.hi, p.lo, p.shift), (p.moduli, p.scale)),
    lambda aux, ch: CompactDiagonal(*ch, *aux))


def _compact(params: Params, values, *, level: int, scale: float) -> CompactDiagonal:
    """``values`` encoded as :func:`crossfhe.ckks.ops.encode` encodes them (same checks, same integers), compact."""
    parts = (jax.device_put(a) for a in encoder.integral_split(ops.encode_integers(params, values, level=level,
                                                                                  scale=scale)))
    return CompactDiagonal(*parts, moduli=tuple(params.moduli_at(level)), scale=float(scale))


def expand_tables(params: Params, moduli) -> tuple:
    """What :func:`expand` reads for a basis: the residue tables and the NTT plan (on the NATIVE set the chain's
    rows, :func:`crossfhe.core.keyswitch.level_ntt_plan`), made once; arguments of the programs that expand."""
    return _expand_tables(params, tuple(int(q) for q in moduli))


@plan_cache(maxsize=16, on_device=True)
def _expand_tables(params: Params, moduli: tuple) -> tuple:
    plan = ks.level_ntt_plan(params.n, moduli, params.q + params.p, params.kernels)
    return encoder.residue_tables(moduli), plan


def expand(pk: CompactDiagonal, tables) -> poly.RNSPoly:
    """The plaintext words (EVAL) of a :class:`CompactDiagonal` diagonal, those :func:`crossfhe.ckks.ops.encode` gives;
    traceable."""
    residues, plan = tables
    coeff = poly.RNSPoly(encoder.split_residues(pk.neg, pk.hi, pk.lo, pk.shift, residues), pk.moduli,
                         poly.Domain.COEFF)
    return poly.to_eval(coeff, plan)


def _nbytes(pt) -> int:
    return pt.nbytes() if isinstance(pt, CompactDiagonal) else int(pt.poly.data.nbytes)


@dataclass(frozen=True, eq=False)
class Encoded:
    """A transform's pre-rotated diagonals encoded at ``level`` for inputs at ``in_scale``: the result of
    :func:`apply` is at level - 1 with scale ``out_scale``.

    A pytree: the plaintexts are its children (leaves: their words), the plan, the baby indices, the level and the
    scales static, so an encoded transform is an argument of a compiled program (:class:`crossfhe.math.xla.Program`),
    never a constant embedded in it."""

    plan: Plan
    plaintexts: tuple  # per giant: tuple of (b, Plaintext), or of (b, CompactDiagonal) where encoded ``compact``
    level: int
    in_scale: float
    out_scale: float

    @property
    def compact(self) -> bool:
        """Whether the diagonals are held as :class:`CompactDiagonal` (``encode(..., compact=True)``)."""
        return isinstance(self.plaintexts[0][0][1], CompactDiagonal)

    def nbytes(self) -> int:
        return sum(_nbytes(pt) for group in self.plaintexts for _, pt in group)


def _flatten_encoded(e: Encoded):
    pts = tuple(tuple(pt for _, pt in group) for group in e.plaintexts)
    babies = tuple(tuple(b for b, _ in group) for group in e.plaintexts)
    return (pts,), (e.plan, babies, e.level, e.in_scale, e.out_scale)


def _unflatten_encoded(aux, children) -> Encoded:
    plan, babies, level, in_scale, out_scale = aux
    (pts,) = children
    return Encoded(plan, tuple(tuple(zip(bs, group)) for bs, group in zip(babies, pts)), level, in_scale, out_scale)


jax.tree_util.register_pytree_node(Encoded, _flatten_encoded, _unflatten_encoded)


def encode(params: Params, m: Diagonals, *, level: int, in_scale: float, out_scale: float,
           n1: int | None = None, giant_cost: float = 1.0, max_n1: int | None = None, compact: bool = False) -> Encoded:
    """The diagonals of ``m`` pre-rotated for :func:`plan` and encoded at ``level`` and scale out_scale q_l /
    in_scale (module docstring). ``m.n`` must divide N/2. ``compact``: each held as :class:`CompactDiagonal` (its
    integer coefficients, 11 bytes each against 4 per limb) and made into its words at each :func:`apply`: one forward
    transform of the level's limbs per diagonal more, the same words."""
    if params.slots % m.n:
        raise ParameterError(f"a transform of {m.n} slots does not fit N/2 = {params.slots} slots")
    if level < 1:
        raise ParameterError("a linear transform needs a level to rescale")
    p = plan(m, n1, giant_cost, max_n1)
    s_pt = out_scale * math.prod(params.rescale_primes(level)) / in_scale
    groups = []
    for g, bs in p.giants:
        row = []
        for b in bs:
            d = m.diags[(p.stride * (g + b)) % m.n]
            values = np.roll(d, p.stride * g)
            row.append((b, _compact(params, values, level=level, scale=s_pt) if compact else
                        ops.encode(params, values, level=level, scale=s_pt, reduce_on_device=True)))
        groups.append(tuple(row))
    return Encoded(p, tuple(groups), level, float(in_scale), float(out_scale))


def apply(ct: Ciphertext, enc: Encoded, keys: EvaluationKeys) -> Ciphertext:
    """M ct: level ``enc.level`` - 1, scale ``enc.out_scale``. The ciphertext must be at ``enc.level`` (higher:
    dropped) with scale ``enc.in_scale`` (relative 2^-20)."""
    if ct.level < enc.level:
        raise ParameterError(f"the transform was encoded for level {enc.level}; the ciphertext is at {ct.level}")
    if abs(ct.scale / enc.in_scale - 1) > 2.0**-20:
        raise ParameterError(f"the transform expects scale 2^{math.log2(enc.in_scale):.3f}, got "
                             f"2^{math.log2(ct.scale):.3f}")
    ct = ops.drop_level(ct, enc.level)
    p = enc.plan
    # offsets mod n: on n-periodic slots rotating by k and by k mod n agree, and the keys are made for k mod n
    babies = [b for b in range(p.n1) if any(b in bs for _, bs in p.giants)]
    rotated = ops.rotate_many(ct, [(p.stride * b) % p.n for b in babies], keys)
    baby = {p.stride * b: rotated[(p.stride * b) % p.n] for b in babies}
    acc = None
    product_scale = ct.scale * enc.plaintexts[0][0][1].scale
    tables = expand_tables(ct.params, ct.c0.basis) if enc.compact else None
    for (g, _), row in zip(p.giants, enc.plaintexts):
        xs = [baby[p.stride * b] for b, _ in row]
        c0s, c1s = tuple(x.c0 for x in xs), tuple(x.c1 for x in xs)
        if tables is not None:
            s0, s1 = _k_inner_compact(c0s, c1s, tuple(pt for _, pt in row), tables)
        else:
            s0, s1 = _k_inner(c0s, c1s, tuple(pt.poly for _, pt in row))
        inner = ops._like(ct, s0, s1, product_scale)
        if (p.stride * g) % p.n:
            inner = ops.rotate(inner, (p.stride * g) % p.n, keys)
        acc = inner if acc is None else ops.add(acc, inner)
    out = ops.rescale(acc)
    return ops._like(out, out.c0, out.c1, enc.out_scale)


@jit
def _k_inner(xs0: tuple, xs1: tuple, pts: tuple):
    """(sum_t xs0[t] pts[t], sum_t xs1[t] pts[t]) over the ciphertexts' primes (EVAL): one giant step's baby
    products and their sum in one program (one pass over its operands)."""
    return _inner(xs0, xs1, pts)


@jit
def _k_inner_compact(xs0: tuple, xs1: tuple, diags: tuple, tables):
    """:func:`_k_inner` of :class:`CompactDiagonal` diagonals, each expanded (:func:`expand`) in the same program."""
    return _inner(xs0, xs1, tuple(expand(d, tables) for d in diags))


def _inner(xs0: tuple, xs1: tuple, pts: tuple):
    acc0, acc1 = poly.mul(xs0[0], pts[0]), poly.mul(xs1[0], pts[0])
    for x0, x1, m in zip(xs0[1:], xs1[1:], pts[1:]):
        acc0, acc1 = poly.add(acc0, poly.mul(x0, m)), poly.add(acc1, poly.mul(x1, m))
    return acc0, acc1


__all__ = ["CompactDiagonal", "Diagonals", "Encoded", "Plan", "apply", "compose", "encode", "expand", "expand_tables",
           "plan"]
