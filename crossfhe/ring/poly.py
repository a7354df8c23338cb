"""RNS polynomials of Z_Q[X]/(X^N + 1): a pytree type and its ring operations.

An :class:`RNSPoly` holds ``data: uint32[..., limbs, N]`` (residues in [0, q_i), leading axes are batch
axes) and, as static metadata, its ``basis`` (the moduli) and its :class:`Domain`. Operations are pure
functions that check domains and bases in Python, so a mismatch raises while a function is traced
(under ``jax.jit`` or ``jax.vmap``) with a message naming both sides, never silently mixes residues.

Per-limb constants (moduli, Barrett and Shoup constants) are small ``[limbs, 1]`` arrays derived from
the static basis; N-sized tables (NTT twiddles) come from an explicit :class:`~crossfhe.ring.ntt.NTTPlan`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.errors import BasisMismatchError, DomainMismatchError, ParameterError
from crossfhe.math.modular import (
    ModulusTable,
    add_mod,
    barrett_mul,
    neg_mod,
    shoup_mul,
    shoup_precompute,
    sub_mod,
)
from crossfhe.math.xla import plan_cache
from crossfhe.ring.ntt import NTTPlan, intt, ntt, slot_exponents, slot_of_exponent

U32 = jnp.uint32


class Domain(enum.Enum):
    """Where a polynomial's values live: coefficients, or evaluations at the odd powers of psi in the
    slot order of :func:`crossfhe.ring.ntt.ntt`."""

    COEFF = "coeff"
    EVAL = "eval"


@jax.tree_util.register_pytree_node_class
@dataclass(frozen=True)
class RNSPoly:
    """A (batch of) polynomial(s) in RNS form: ``data`` uint32[..., limbs, N]; static basis and domain."""

    data: jax.Array
    basis: tuple[int, ...]
    domain: Domain

    @classmethod
    def create(cls, data, basis, domain: Domain = Domain.COEFF) -> RNSPoly:
        """Wrap residues (uint32[..., limbs, N], in [0, q_i)), checking shape and dtype."""
        basis = tuple(int(q) for q in basis)
        data = jnp.asarray(data)
        if data.dtype != U32:
            raise TypeError(f"RNS residues must be uint32, got {data.dtype}")
        if data.ndim < 2 or data.shape[-2] != len(basis):
            raise BasisMismatchError(
                f"data of shape {tuple(data.shape)} does not match a basis of {len(basis)} moduli: "
                f"expected [..., {len(basis)}, N]"
            )
        n = data.shape[-1]
        if n < 2 or n & (n - 1):
            raise ParameterError(f"ring degree N must be a power of two, got {n}")
        if not isinstance(domain, Domain):
            raise TypeError(f"domain must be a Domain, got {domain!r}")
        return cls(data, basis, domain)

    @property
    def n(self) -> int:
        return self.data.shape[-1]

    @property
    def limbs(self) -> int:
        return len(self.basis)

    def tree_flatten(self):
        return (self.data,), (self.basis, self.domain)

    @classmethod
    def tree_unflatten(cls, aux, leaves):
        return cls(leaves[0], *aux)

    def _replace(self, data, basis=None, domain=None) -> RNSPoly:
        return RNSPoly(data, self.basis if basis is None else basis, self.domain if domain is None else domain)

    def __add__(self, other):
        return add(self, other)

    def __sub__(self, other):
        return sub(self, other)

    def __neg__(self):
        return neg(self)

    def __mul__(self, other):
        return mul_scalar(self, other) if isinstance(other, int) else mul(self, other)

    __rmul__ = __mul__


@plan_cache(maxsize=256, on_device=True)
def _table(basis: tuple[int, ...]) -> ModulusTable:
    return ModulusTable.create(basis)


def modulus_table(basis: tuple[int, ...]) -> ModulusTable:
    """The (cached) :class:`~crossfhe.math.modular.ModulusTable` of a basis."""
    return _table(tuple(basis))


def _check_pair(a: RNSPoly, b: RNSPoly, what: str) -> None:
    if not isinstance(a, RNSPoly) or not isinstance(b, RNSPoly):
        raise TypeError(f"{what} takes two RNSPoly, got {type(a).__name__} and {type(b).__name__}")
    if a.domain != b.domain:
        raise DomainMismatchError(f"{what}: operands are in different domains ({a.domain.name} and {b.domain.name})")
    if a.basis != b.basis or a.n != b.n:
        raise BasisMismatchError(
            f"{what}: operands have different bases or ring degrees "
            f"({a.limbs} limbs, N = {a.n}, moduli {a.basis} vs {b.limbs} limbs, N = {b.n}, moduli {b.basis})"
        )


def _require(a: RNSPoly, domain: Domain, what: str) -> None:
    if a.domain != domain:
        raise DomainMismatchError(f"{what} needs the {domain.name} domain, got a polynomial in {a.domain.name}")


def _require_plan(a: RNSPoly, plan: NTTPlan) -> None:
    if plan.moduli != a.basis or plan.n != a.n:
        raise BasisMismatchError(
            f"NTT plan (N = {plan.n}, moduli {plan.moduli}) does not match the polynomial "
            f"(N = {a.n}, moduli {a.basis})"
        )


# --------------------------------------------------------------------------------------------------
# Ring operations
# --------------------------------------------------------------------------------------------------


def add(a: RNSPoly, b: RNSPoly) -> RNSPoly:
    """a + b limb-wise mod q_i, same domain and basis. Exact."""
    _check_pair(a, b, "add")
    return a._replace(add_mod(a.data, b.data, _table(a.basis).q))


def sub(a: RNSPoly, b: RNSPoly) -> RNSPoly:
    """a - b limb-wise mod q_i, same domain and basis. Exact."""
    _check_pair(a, b, "sub")
    return a._replace(sub_mod(a.data, b.data, _table(a.basis).q))


def neg(a: RNSPoly) -> RNSPoly:
    """-a mod q_i. Exact."""
    return a._replace(neg_mod(a.data, _table(a.basis).q))


def mul(a: RNSPoly, b: RNSPoly) -> RNSPoly:
    """Ring product a * b of two evaluation-domain polynomials (point-wise, Barrett). Exact."""
    _check_pair(a, b, "mul")
    _require(a, Domain.EVAL, "mul")
    t = _table(a.basis)
    return a._replace(barrett_mul(a.data, b.data, t.q, t.barrett_mu, t.bits))


@plan_cache(maxsize=256, on_device=True)
def scalar_constants(c: int, basis: tuple[int, ...]):
    """(c mod q_i, Shoup companion) as uint32 ``[limbs, 1]`` words (device arrays, made once per c and basis)."""
    w = np.array([c % q for q in basis], dtype=np.uint32).reshape(-1, 1)
    return w, shoup_precompute(w, np.array(basis, dtype=np.uint64).reshape(-1, 1))


def mul_scalar(a: RNSPoly, c: int) -> RNSPoly:
    """c * a for an integer c (any size or sign, reduced mod each q_i), in either domain. Exact."""
    if not isinstance(c, (int, np.integer)):
        raise TypeError(f"mul_scalar takes an integer, got {type(c).__name__}")
    w, ws = scalar_constants(int(c), a.basis)
    return a._replace(shoup_mul(a.data, w, ws, _table(a.basis).q))


def mul_monomial(a: RNSPoly, j: int) -> RNSPoly:
    """a * X^j in Z_q[X]/(X^N + 1) for any integer j (coefficient domain): a negacyclic shift. Exact."""
    _require(a, Domain.COEFF, "mul_monomial")
    n = a.n
    j = int(j) % (2 * n)
    flip = j >= n
    j %= n
    q = _table(a.basis).q
    shifted = jnp.roll(a.data, j, axis=-1)
    wrapped = jnp.arange(n) < j
    negate = wrapped != flip
    return a._replace(jnp.where(negate, neg_mod(shifted, q), shifted))


def automorphism(a: RNSPoly, k: int) -> RNSPoly:
    """The automorphism a(X) -> a(X^k) for odd k (mod 2N), in either domain. Exact.

    Coefficient domain: output coefficient i is a_j with j = i k^-1 mod 2N when j < N, else -a_{j-N}.
    Evaluation domain: slot p holds a(psi^e(p)) (:func:`~crossfhe.ring.ntt.slot_exponents`), so the
    output's slot p is the input's slot holding a(psi^(k e(p))), a permutation. Indices are computed
    in-graph from iota.
    """
    n = a.n
    k = int(k) % (2 * n)
    if k % 2 == 0:
        raise ParameterError(f"automorphism X -> X^k needs an odd k, got k = {k}")
    mask = jnp.uint32(2 * n - 1)
    if a.domain == Domain.COEFF:
        i = jnp.arange(n, dtype=U32)
        j = (i * jnp.uint32(pow(k, -1, 2 * n))) & mask
        src = jnp.where(j < n, j, j - n)
        vals = jnp.take(a.data, src.astype(jnp.int32), axis=-1)
        return a._replace(jnp.where(j < n, vals, neg_mod(vals, _table(a.basis).q)))
    src = slot_of_exponent((slot_exponents(n, jnp) * jnp.uint32(k)) & mask, n)
    return a._replace(jnp.take(a.data, src.astype(jnp.int32), axis=-1))


def to_eval(a: RNSPoly, plan: NTTPlan) -> RNSPoly:
    """Coefficient -> evaluation domain by the forward NTT of ``plan`` (must match N and basis)."""
    _require(a, Domain.COEFF, "to_eval")
    _require_plan(a, plan)
    return a._replace(ntt(a.data, plan), domain=Domain.EVAL)


def to_coeff(a: RNSPoly, plan: NTTPlan) -> RNSPoly:
    """Evaluation -> coefficient domain by the inverse NTT of ``plan`` (must match N and basis)."""
    _require(a, Domain.EVAL, "to_coeff")
    _require_plan(a, plan)
    return a._replace(intt(a.data, plan), domain=Domain.COEFF)


def drop_limbs(a: RNSPoly, count: int = 1) -> RNSPoly:
    """Keep the first ``limbs - count`` limbs (residues mod the remaining moduli), in either domain."""
    if not 0 <= count < a.limbs:
        raise ParameterError(f"cannot drop {count} of {a.limbs} limbs (at least one must remain)")
    keep = a.limbs - count
    return a._replace(a.data[..., :keep, :], basis=a.basis[:keep])
