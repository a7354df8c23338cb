"""Basis Align Transformation (CROSS §4.1.4, Alg. 4, Fig. 6-7): a modular product by a known operand as
one int8 matrix product, shifts, and one Barrett reduction.

For a known residue b mod q and a data residue a = sum_i a_i 2^(8i) (signed digits,
:mod:`crossfhe.kernels.chunks`):

    a b = sum_i a_i (b 2^(8i))  ==  sum_i a_i [b 2^(8i)]_q  ==  sum_j 2^(8j) sum_i a_i B_ij   (mod q),

with B_ij the j-th signed digit of the centered [b 2^(8i)]_q. The products of the higher bases
(2^(8(i + j)) for i + j >= K, the bottom half of Fig. 6's sparse convolution matrix) are reduced mod q
offline and folded back onto the K lowest bases: the K x K matrix B is dense, so the online work is
K^2 int8 products per scalar product instead of the convolution's (2K - 1) K, and the K output chunks
c_j = sum_i a_i B_ij are recombined (:func:`~crossfhe.kernels.chunks.recombine`) once.

For matrices (Fig. 7): M_{HxV} M_{VxW} mod q with the right operand known becomes the int8 product of
the data digits [H, V K] with the expanded operand [V K, W K] (entry ((v, i), (w, j)) = digit j of
[B_vw 2^(8i)]_q), an int32 result [H, W K] whose K chunks per entry are recombined mod q; a known left
operand is expanded to [H K, V K] likewise. The inner dimension V K is cut where the int32 accumulator
could overflow (:func:`~crossfhe.kernels.chunks.inner_splits`), each part reduced and the parts added
mod q. The modulus of an output entry may vary with its limb and with its row (known left operand) or
column (known right operand): a basis conversion reduces column j mod its target prime b_j.

Every table is built offline in NumPy from exact integers and is a pytree leaf, passed to the jitted
kernels as an argument.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.kernels import chunks
from crossfhe.math.modular import Modulus, add_mod

U32 = jnp.uint32


def _static():
    return field(metadata={"static": True})


def _constants(q_grid: np.ndarray) -> dict[str, np.ndarray]:
    """Reduction constants of each modulus in ``q_grid`` (any shape), as uint32 arrays of that shape."""
    flat = [Modulus.create(int(q)) for q in q_grid.reshape(-1)]

    def arr(name):
        return np.array([getattr(m, name) for m in flat], dtype=np.uint32).reshape(q_grid.shape)

    return {"q": arr("q"), "mu": arr("barrett_mu"), "bits": arr("bits"), "qinv": arr("mont_qinv"), "r2": arr("mont_r2")}


def _shifted_digits(b: np.ndarray, q: np.ndarray, k: int) -> np.ndarray:
    """int8 [..., K (i), K (j)]: digit j of the centered [b 2^(8i)]_q, for b in [0, q) (q broadcasts)."""
    b = np.asarray(b, dtype=np.int64) % q
    out = np.empty(b.shape + (k, k), dtype=np.int8)
    for i in range(k):
        out[..., i, :] = chunks.chunks_numpy(b, q, k)
        b = (b << chunks.CHUNK_BITS) % q
    return out


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False)
class BATOperand:
    """A known operand of a modular matrix product, expanded by BAT (module docstring).

    ``w``: int8, ``[L, V K, W K]`` for a right operand, ``[L, H K, V K]`` for a left one. ``q``, ``mu``,
    ``bits``, ``qinv``, ``r2``, ``offset``: uint32 reduction constants broadcasting against the output
    ``[..., L, H, W]`` (shape ``[L, 1, W]``, ``[L, H, 1]`` or ``[L, 1, 1]``). Static: ``side`` ('right' or
    'left'), ``k`` digits per residue, ``splits`` (runs of the inner dimension, in items), ``bound`` on
    each run's int32 chunks, ``single_barrett`` (:func:`~crossfhe.kernels.chunks.needs_wide`).
    """

    w: np.ndarray
    q: np.ndarray
    mu: np.ndarray
    bits: np.ndarray
    qinv: np.ndarray
    r2: np.ndarray
    offset: np.ndarray
    side: str = _static()
    k: int = _static()
    splits: tuple[tuple[int, int], ...] = _static()
    bound: int = _static()
    single_barrett: bool = _static()

    @property
    def limbs(self) -> int:
        return self.w.shape[0]

    @property
    def shape(self) -> tuple[int, int]:
        """The unexpanded (rows, columns) of the known matrix."""
        return self.w.shape[1] // self.k, self.w.shape[2] // self.k

    @property
    def nbytes(self) -> int:
        return int(self.w.size)


def _operand(b, moduli, side: str, k: int | None) -> BATOperand:
    b = np.asarray(b)
    if b.ndim == 2:
        b = b[None]
    if b.ndim != 3:
        raise ValueError(f"a known BAT operand is [L, rows, cols] (or [rows, cols]), got shape {b.shape}")
    q = np.asarray(moduli, dtype=np.int64)
    if q.ndim == 1:
        q = q.reshape(-1, 1, 1)
    if q.ndim != 3 or q.shape[0] not in (1, b.shape[0]):
        raise ValueError(f"moduli of shape {q.shape} do not broadcast against the operand's limbs {b.shape[0]}")
    want = (1, b.shape[2]) if side == "right" else (b.shape[1], 1)
    if q.shape[1:] not in ((1, 1), want):
        axis = "column" if side == "right" else "row"
        raise ValueError(f"{side} operand: moduli may vary only by limb and by output {axis}")
    q_grid = np.broadcast_to(q, (b.shape[0],) + q.shape[1:])
    k = chunks.chunk_count(np.unique(q_grid)) if k is None else int(k)
    digits = _shifted_digits(b, q, k)  # [L, R, C, K (i), K (j)]
    length = b.shape[1] if side == "right" else b.shape[2]  # the inner dimension V, in items
    splits = tuple(chunks.inner_splits(length, k))
    bound = chunks.accumulator_bound(max(s1 - s0 for s0, s1 in splits) * k)
    if side == "right":  # ((v, i), (w, j))
        w = digits.transpose(0, 1, 3, 2, 4).reshape(b.shape[0], b.shape[1] * k, b.shape[2] * k)
    else:  # ((h, j), (v, i))
        w = digits.transpose(0, 1, 4, 2, 3).reshape(b.shape[0], b.shape[1] * k, b.shape[2] * k)
    moduli_flat = np.unique(q_grid)
    c = _constants(np.ascontiguousarray(q_grid))
    offset = chunks.recombine_offset(q_grid.reshape(-1), bound, k).reshape(q_grid.shape)
    return BATOperand(
        w=jnp.asarray(w),
        **{n: c[n] for n in ("q", "mu", "bits", "qinv", "r2")},
        offset=offset,
        side=side,
        k=k,
        splits=splits,
        bound=bound,
        single_barrett=not chunks.needs_wide(moduli_flat, bound, k),
    )


def bat_right(b, moduli, *, k: int | None = None) -> BATOperand:
    """Expand a known right operand B ``[L, V, W]`` (or ``[V, W]``) of residues for :func:`matmul`.

    ``moduli``: a sequence of L moduli (one per limb), or an array broadcasting to ``[L, 1, W]`` (the
    modulus of each output column, e.g. a basis conversion's targets). ``k``: digits per residue
    (default :func:`~crossfhe.kernels.chunks.chunk_count` of the moduli).
    """
    return _operand(b, moduli, "right", k)


def bat_left(b, moduli, *, k: int | None = None) -> BATOperand:
    """Expand a known left operand B ``[L, H, V]`` (or ``[H, V]``); ``moduli`` per limb or ``[L, H, 1]``."""
    return _operand(b, moduli, "left", k)


def _reduce(c, op: BATOperand):
    return chunks.recombine(
        c, op.q, op.mu, op.bits, op.offset, bound=op.bound, single_barrett=op.single_barrett, qinv=op.qinv, r2=op.r2
    )


DOT_ALIGN = 4
"""The int8 products' contraction is padded with zero digits to a multiple of this (exact: a zero digit
adds nothing). On an H100 (jax 0.11.2) left-operand products whose contraction was not a multiple of 4 (3
digits per residue: 18 x 210 by 210 x 11, and the 6 x 6 step of a 64-point matrix NTT) failed to compile
("No candidates could be compiled") or returned wrong words; padded they were exact. Only moduli
below 2^24 (fewer than 4 digits) pad, by at most 3 zero digits, on every backend."""


def _pad_to(x, axis: int, multiple: int):
    extra = -x.shape[axis] % multiple
    if not extra:
        return x
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, extra)
    return jnp.pad(x, widths)


def _product(a, w, side: str):
    """int32 digit products of one run: right ``a [..., L, H, X] @ w [L, X, Y]``, left ``w [L, Y, X] @ a
    [..., L, X, W]``, the contraction X padded to :data:`DOT_ALIGN`."""
    if side == "right":
        a, w = _pad_to(a, -1, DOT_ALIGN), _pad_to(w, -2, DOT_ALIGN)
        return jnp.einsum("...lhx,lxy->...lhy", a, w, preferred_element_type=jnp.int32)
    a, w = _pad_to(a, -2, DOT_ALIGN), _pad_to(w, -1, DOT_ALIGN)
    return jnp.einsum("lyx,...lxw->...lyw", w, a, preferred_element_type=jnp.int32)


def matmul_chunks(a_digits, op: BATOperand):
    """The BAT product of data already in digits; returns uint32 ``[..., L, H, W]`` mod q.

    Right operand: ``a_digits`` int8 ``[..., L, H, V, K]``. Left operand: ``[..., L, V, K, W]``.
    """
    out = None
    k = op.k
    for s0, s1 in op.splits:
        if op.side == "right":
            a = a_digits[..., s0:s1, :]
            a = a.reshape(a.shape[:-2] + ((s1 - s0) * k,))
            c = _product(a, op.w[:, s0 * k : s1 * k, :], "right")
            c = c.reshape(c.shape[:-1] + (c.shape[-1] // k, k))
        else:
            a = a_digits[..., s0:s1, :, :]
            a = a.reshape(a.shape[:-3] + ((s1 - s0) * k, a.shape[-1]))
            c = _product(a, op.w[:, :, s0 * k : s1 * k], "left")
            c = c.reshape(c.shape[:-2] + (c.shape[-2] // k, k, c.shape[-1]))
            c = jnp.moveaxis(c, -2, -1)
        part = _reduce(c, op)
        out = part if out is None else add_mod(out, part, op.q)
    return out


@jax.jit
def matmul(a, op: BATOperand):
    """``a @ B mod q`` (right operand) or ``B @ a mod q`` (left operand) by BAT; jitted.

    ``a``: uint32 residues in [0, q) of the limb's modulus, ``[..., L, H, V]`` (right) or ``[..., L, V, W]``
    (left). Returns uint32 ``[..., L, H, W]`` in [0, q). Exact. The operand must have one modulus per limb;
    with a modulus per output row or column the data's own modulus differs from it, and the caller
    decomposes the data itself (:func:`matmul_chunks`, as the matrix basis conversion does).
    """
    if op.q.shape[1:] != (1, 1):
        raise ValueError("matmul needs one modulus per limb; use matmul_chunks for per-row or per-column moduli")
    a = jnp.asarray(a, dtype=U32)
    qd = op.q
    if op.side == "right":
        d = chunks.residue_chunks(a, qd, op.k, axis=-1)
    else:
        d = chunks.residue_chunks(a, qd, op.k, axis=-2)
    return matmul_chunks(d, op)


# --------------------------------------------------------------------------------------------------
# Vector modular multiply by a known operand
# --------------------------------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False)
class BATVector:
    """A known vector b ``[L, N]`` expanded per element into its K x K BAT matrix (``w`` int8
    ``[L, N, K, K]``) with the reduction constants of each limb (``[L, 1]``)."""

    w: np.ndarray
    q: np.ndarray
    mu: np.ndarray
    bits: np.ndarray
    qinv: np.ndarray
    r2: np.ndarray
    offset: np.ndarray
    k: int = _static()
    bound: int = _static()
    single_barrett: bool = _static()


def bat_vector(b, moduli, *, k: int | None = None) -> BATVector:
    """Expand a known vector of residues ``[L, N]`` (limb l mod ``moduli[l]``) for :func:`vec_mul`."""
    b = np.asarray(b)
    q = np.asarray(moduli, dtype=np.int64).reshape(-1, 1)
    if b.ndim != 2 or q.shape[0] != b.shape[0]:
        raise ValueError(f"a known vector is [L, N] with L moduli; got shape {b.shape} and {q.shape[0]} moduli")
    k = chunks.chunk_count(q.reshape(-1)) if k is None else int(k)
    bound = chunks.accumulator_bound(k)
    c = _constants(q)
    return BATVector(
        w=jnp.asarray(_shifted_digits(b, q, k)),
        **{n: c[n] for n in ("q", "mu", "bits", "qinv", "r2")},
        offset=chunks.recombine_offset(q.reshape(-1), bound, k).reshape(-1, 1),
        k=k,
        bound=bound,
        single_barrett=not chunks.needs_wide(q.reshape(-1), bound, k),
    )


@jax.jit
def vec_mul(a, op: BATVector):
    """``a * b mod q`` elementwise for data ``a`` uint32 ``[..., L, N]`` in [0, q): each element's digits
    times its K x K BAT matrix (a batched int8 GEMV), then one recombination. Exact."""
    d = chunks.residue_chunks(jnp.asarray(a, dtype=U32), op.q, op.k)
    c = jnp.einsum("...lni,lnij->...lnj", d, op.w, preferred_element_type=jnp.int32)
    return chunks.recombine(
        c, op.q, op.mu, op.bits, op.offset, bound=op.bound, single_barrett=op.single_barrett, qinv=op.qinv, r2=op.r2
    )


# --------------------------------------------------------------------------------------------------
# References
# --------------------------------------------------------------------------------------------------


def matmul_reference(a, b, q) -> np.ndarray:
    """Exact ``a @ b mod q`` in Python integers (object arrays): a ``[..., H, V]``, b ``[..., V, W]``, q
    broadcasting against the ``[..., H, W]`` result."""
    a = np.asarray(a).astype(object)
    b = np.asarray(b).astype(object)
    return (np.matmul(a, b) % np.asarray(q).astype(object)).astype(np.uint32)
