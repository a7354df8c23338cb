"""Batch-encoded matrix-vector product mod t: the diagonal method with baby-step giant-step rotations.

The classic BFV baseline against which CHAM's coefficient-encoded HMVP (:mod:`crossfhe.linalg.hmvp`) is
compared: a plaintext matrix A (m x n, integers in [0, t)) times an encrypted vector v (n integers in
[0, t)) gives encryptions of u = A v mod t. References: Halevi and Shoup, "Algorithms in HElib" (CRYPTO
2014, the diagonal method) and "Faster homomorphic linear transformations in HElib" (CRYPTO 2018, the
baby-step giant-step split and hoisting).

Blocks. With d = N/2 slots per row, A is cut into square d x d blocks A_IJ (zero-padded), R = ceil(m/d)
block rows by C = ceil(n/d) block columns, and v into C chunks v_J. Output block I is
u_I = sum_J A_IJ v_J. Within a block, with rot(x, k)[i] = x[(i + k) mod d] (``bfv.ops.rotate_rows``)
and the generalized diagonals diag_k[i] = A_IJ[i, (i + k) mod d],

    A_IJ v_J = sum_k diag_k ⊙ rot(v_J, k).

Slot layout (both rows). A chunk's ciphertext holds v_J in slot row 0 and rot(v_J, d/2) in row 1
(:func:`encrypt_vector`; the layout does not depend on A). Row 0 then handles the diagonals
k = s + j and row 1 the diagonals k = s + d/2 + j, j in [0, L), with the same rotations, since a rotation
moves both rows alike. When a block has more than d/2 nonzero diagonals, s = 0 and L = d/2 cover all d
diagonals in half as many plaintext products, and one row swap at the end adds row 1 to row 0
(both rows of the result then hold u_I). A block with at most d/2 nonzero diagonals (m_I + n - 1 <= d/2,
the nonzero ones being k in (-m_I, n) mod d) uses row 0 only: s = -(m_I - 1) mod d, L = m_I + n - 1, no
swap, row 1 of the result is 0.

Baby-step giant-step. With j = g B + b (b < B baby steps, g < G = ceil(L/B) giant steps) and
a_g = s + g B,

    u_I = sum_g rot( sum_J sum_b rot(diag_{a_g + b}, -a_g) ⊙ rot(v_J, b), a_g ),

(in row 1 the diagonal index carries + d/2). The pre-rotated diagonals are computed in NumPy and encoded
in batched calls (:func:`encode_matrix`, offline); each baby-step rotation rot(v_J, b) is done once, on
all C chunks as one batch; every giant step's plaintext products are one batched multiply-accumulate,
and the giant steps of output blocks with equal schedules run as one batch; diagonals that are zero by
shape are skipped. B is shared by all output blocks and minimizes the rotation count (ties: less
padding, then the larger B), about sqrt(L R / C). The baby steps are not hoisted:
``core.keyswitch.keyswitch_hoisted`` unrolls its Galois elements into one program, whose compile time
would grow with B.

Cost (:class:`DiagonalPlan`): C (B - 1) baby rotations, per output block G giant rotations
(G - 1 when s = 0) plus one row swap when both rows are used, and one plaintext product per nonzero
(pre-rotated, two-row) diagonal: about R C d/2 for large matrices, m + n - 1 when m + n - 1 <= d/2.
At N = 4096 (d = 2048): 256 x 256 (one row, B = 27) takes 26 baby + 19 giant = 45 rotations and 511
products; 4096 x 4096 (both rows, B = 32) takes 2 x 31 baby + 2 x 31 giant rotations + 2 row swaps =
126 key switches and 4096 products (one row would need 8192).

Noise (invariant noise v of :mod:`crossfhe.bfv.params`): with v0 that of the fresh vector and v_ks that
of a key switch, each product term carries at most (N t / 2)(v0 + v_ks) (a baby rotation, then one
plaintext product with a centered plaintext); an output block sums T of them (T = the plaintext
products of the block, at most C L), adds G v_ks for the giant rotations, and the row swap doubles the
sum and adds v_ks: v_out <= 2 (T (N t / 2)(v0 + v_ks) + (G + 1) v_ks). The budget drops by about
log2(N t T) bits: one plaintext-product level, no ciphertext product.

    plan = diagonal.plan_matvec(params, m, n)
    sk, keys = bfv.ops.keygen(params, rotations=plan.rotations, row_swap=plan.row_swap)
    enc_a = diagonal.encode_matrix(params, a)               # offline
    x = diagonal.encrypt_vector(params, keys, v)
    u = diagonal.decrypt_result(sk, diagonal.matvec(enc_a, x, keys), m)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe._deprecated import module_names
from crossfhe.bfv import ops
from crossfhe.bfv.ciphertext import Ciphertext, Encoding, EvaluationKeys
from crossfhe.bfv.encoder import check_values
from crossfhe.bfv.params import Params
from crossfhe.core.keys import SecretKey
from crossfhe.errors import BasisMismatchError, ParameterError
from crossfhe.math import xla
from crossfhe.math.modular import ModulusTable, add_mod, barrett_mul
from crossfhe.math.xla import jit, plan_cache
from crossfhe.ring.poly import Domain, RNSPoly

_static = partial(field, metadata={"static": True})


# --------------------------------------------------------------------------------------------------
# Plan: which diagonals, which rotations (shapes only)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BlockPlan:
    """The schedule of one output block: ``two_rows`` (row 1 handles the diagonals d/2 further on, then a row
    swap adds it to row 0), the window start ``start`` (s) and length ``length`` (L) of the diagonals of
    row 0, the giant-step rotations ``giant`` (a_g = s + g B mod d, for the giant steps that have
    products), and per giant step the products ``items``: (column block J, baby step b) pairs."""

    two_rows: bool
    start: int
    length: int
    giant: tuple[int, ...]
    items: tuple[tuple[tuple[int, int], ...], ...]


@dataclass(frozen=True)
class DiagonalPlan:
    """Everything :func:`matvec` does for an m x n matrix at d = N/2 slots per row, from the shapes alone
    (so the rotation keys and compiled kernels do not depend on A's values). Hashable.

    ``baby``: B; ``baby_steps``: the baby rotations b in use (0 included when used); ``blocks``: one
    :class:`BlockPlan` per output block; ``groups``: output blocks with equal schedules, computed as one batch.
    """

    slots: int
    rows: int
    cols: int
    baby: int
    baby_steps: tuple[int, ...]
    blocks: tuple[BlockPlan, ...]
    groups: tuple[tuple[int, ...], ...]

    @classmethod
    def create(cls, slots: int, rows: int, cols: int) -> DiagonalPlan:
        """The plan of a rows x cols product at ``slots`` = d = N/2 slots per row (d a power of two >= 2)."""
        if slots < 2 or slots & (slots - 1):
            raise ParameterError(f"slots per row must be a power of two >= 2, got {slots}")
        rows, cols = _check_dims(rows, cols)
        return _plan(int(slots), rows, cols)

    @property
    def col_blocks(self) -> int:
        return -(-self.cols // self.slots)

    @property
    def rotations(self) -> tuple[int, ...]:
        """The row rotations matvec applies, in [1, d): the keys ``bfv.ops.keygen(rotations=...)`` needs."""
        amounts = {b % self.slots for b in self.baby_steps}
        amounts.update(a % self.slots for blk in self.blocks for a in blk.giant)
        return tuple(sorted(amounts - {0}))

    @property
    def row_swap(self) -> bool:
        """Whether matvec needs the row-swap key (some output block uses both rows)."""
        return any(blk.two_rows for blk in self.blocks)

    @property
    def baby_rotations(self) -> int:
        """Key switches of the baby steps: C (B - 1) when every b is used."""
        return self.col_blocks * sum(1 for b in self.baby_steps if b % self.slots)

    @property
    def giant_rotations(self) -> int:
        return sum(1 for blk in self.blocks for a in blk.giant if a % self.slots)

    @property
    def row_swaps(self) -> int:
        return sum(1 for blk in self.blocks if blk.two_rows)

    @property
    def key_switches(self) -> int:
        return self.baby_rotations + self.giant_rotations + self.row_swaps

    @property
    def plain_products(self) -> int:
        """Ciphertext-plaintext products (padding of the batched products not counted)."""
        return sum(len(it) for blk in self.blocks for it in blk.items)


def _nonzero_by_shape(k: int, rows: int, cols: int, d: int) -> bool:
    """Whether diagonal k of a rows x cols block (zero-padded to d x d) can be nonzero: k in (-rows, cols)."""
    width = rows + cols - 1
    return width >= d or (k + rows - 1) % d < width


def _window(rows: int, cols: int, d: int) -> tuple[bool, int, int]:
    """(two_rows, start s, length L) for a block of ``rows`` rows whose widest column block has ``cols``."""
    width = min(rows + cols - 1, d)
    if width > d // 2:
        return True, 0, d // 2
    return False, (1 - rows) % d, width


def _choose_baby(d: int, windows, col_blocks: int) -> int:
    """B minimizing C (B - 1) + the giant rotations of all blocks; ties: less padding, then the larger B."""
    best, best_key = 1, None
    for b in range(1, max(w[2] for w in windows) + 1):
        switches, pad = col_blocks * (b - 1), 0
        for _, start, length in windows:
            steps = -(-length // b)
            switches += sum(1 for g in range(steps) if (start + g * b) % d)
            pad += steps * b - length
        key = (switches, pad, -b)
        if best_key is None or key < best_key:
            best, best_key = b, key
    return best


def _block_plan(rows: int, block_cols: tuple[int, ...], d: int, baby: int) -> BlockPlan:
    """The schedule of an output block of ``rows`` rows against column blocks of ``block_cols`` columns."""
    two_rows, start, length = _window(rows, block_cols[0], d)
    giant, items = [], []
    for g in range(-(-length // baby)):
        step = []
        for b in range(min(baby, length - g * baby)):
            k = start + g * baby + b
            diagonals = (k, k + d // 2) if two_rows else (k,)
            for j, cols in enumerate(block_cols):
                if any(_nonzero_by_shape(x, rows, cols, d) for x in diagonals):
                    step.append((j, b))
        if step:
            giant.append((start + g * baby) % d)
            items.append(tuple(step))
    return BlockPlan(two_rows, start, length, tuple(giant), tuple(items))


@plan_cache(maxsize=64)
def _plan(d: int, m: int, n: int) -> DiagonalPlan:
    block_rows = [min(d, m - i * d) for i in range(-(-m // d))]
    block_cols = tuple(min(d, n - j * d) for j in range(-(-n // d)))
    baby = _choose_baby(d, [_window(r, block_cols[0], d) for r in block_rows], len(block_cols))
    by_rows = {r: _block_plan(r, block_cols, d, baby) for r in set(block_rows)}
    blocks = [by_rows[r] for r in block_rows]
    baby_steps = tuple(sorted({b for blk in blocks for it in blk.items for _, b in it}))
    groups: dict[BlockPlan, list[int]] = {}
    for i, blk in enumerate(blocks):
        groups.setdefault(blk, []).append(i)
    return DiagonalPlan(d, m, n, baby, baby_steps, tuple(blocks), tuple(tuple(g) for g in groups.values()))


def _check_batching(params) -> Params:
    if not isinstance(params, Params):
        raise TypeError(f"expected bfv.Params, got {type(params).__name__}")
    if not params.batching:
        raise ParameterError(
            f"the diagonal method needs batch encoding: t prime with t = 1 (mod 2N = {2 * params.n}); "
            f"t = {params.t} is not (use a batching t, ParamsLiteral(plain_bits=...))"
        )
    if params.n < 4:
        raise ParameterError(f"the diagonal method needs N >= 4, got N = {params.n}")
    return params


def _check_dims(m, n) -> tuple[int, int]:
    for name, x in (("m", m), ("n", n)):
        if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 1:
            raise ParameterError(f"matrix dimension {name} must be a positive int, got {x!r}")
    return int(m), int(n)


def plan_matvec(params: Params, m: int, n: int) -> DiagonalPlan:
    """The :class:`DiagonalPlan` of an m x n product under ``params`` (batching t): rotations, costs."""
    _check_batching(params)
    return DiagonalPlan.create(params.n // 2, m, n)


def required_rotations(params: Params, m: int, n: int) -> tuple[int, ...]:
    """The row rotations an m x n :func:`matvec` needs keys for (``bfv.ops.keygen(params, rotations=...)``);
    see :func:`needs_row_swap` for the row-swap key."""
    return plan_matvec(params, m, n).rotations


def needs_row_swap(params: Params, m: int, n: int) -> bool:
    """Whether an m x n :func:`matvec` needs the row-swap key (``bfv.ops.keygen(..., row_swap=True)``): true
    when some block has more than d/2 nonzero diagonals (m_I + min(n, d) - 1 > N/4)."""
    return plan_matvec(params, m, n).row_swap


# --------------------------------------------------------------------------------------------------
# Operands
# --------------------------------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False)
class EncodedMatrix:
    """A plaintext matrix ready for :func:`matvec`: per group of ``plan.groups``, ``diagonals`` uint32
    [G, R_g, P, L, N] (the pre-rotated diagonals as centered lifts over Q, EVAL domain; zero where a giant
    step has fewer than P products) and ``sources`` int32 [G, P] (the baby-step ciphertext each product
    takes: baby-step position * C + column block). Static: ``params``, ``plan``."""

    diagonals: tuple
    sources: tuple
    params: Params = _static()
    plan: DiagonalPlan = _static()

    @property
    def shape(self) -> tuple[int, int]:
        return self.plan.rows, self.plan.cols


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False)
class SlotChunks:
    """An encrypted vector of ``length`` values: ``ct`` a batch of C = ceil(length / d) ciphertexts, chunk J
    holding v_J (zero-padded to d) in slot row 0 and rot(v_J, d/2) in row 1. Static: ``length``."""

    ct: Ciphertext
    length: int = _static()


def _block_slots(a_full: np.ndarray, i_block: int, blk: BlockPlan, d: int, width: int) -> np.ndarray:
    """The pre-rotated diagonals of output block ``i_block`` as slot matrices int64 [G, P, 2, d]:
    row r of item (J, b) of giant step g is A[I d + (i - a_g) mod d, J d + (i + r d/2 + b) mod d]."""
    steps = len(blk.items)
    col_block = np.zeros((steps, width), dtype=np.int64)
    baby = np.zeros((steps, width), dtype=np.int64)
    valid = np.zeros((steps, width), dtype=bool)
    for g, it in enumerate(blk.items):
        col_block[g, : len(it)] = [j for j, _ in it]
        baby[g, : len(it)] = [b for _, b in it]
        valid[g, : len(it)] = True
    i = np.arange(d)
    rows = i_block * d + (i[None, None, :] - np.array(blk.giant)[:, None, None]) % d
    out = np.zeros((steps, width, 2, d), dtype=np.int64)
    for r in (0, 1) if blk.two_rows else (0,):
        cols = col_block[..., None] * d + (i + r * (d // 2) + baby[..., None]) % d
        out[:, :, r, :] = np.where(valid[..., None], a_full[rows, cols], 0)
    return out


_ENCODE_CHUNK = 64
"""Slot matrices per encoding call: a fixed shape, so the transforms compile once whatever the matrix."""


def _encode_lifted(params: Params, slots: np.ndarray) -> jax.Array:
    """Slot matrices int64 [T, 2, d] -> their plaintexts' centered lifts over Q, uint32 [T, L, N] (EVAL)."""
    count = slots.shape[0]
    padded = np.zeros((-(-count // _ENCODE_CHUNK) * _ENCODE_CHUNK,) + slots.shape[1:], dtype=np.int64)
    padded[:count] = slots
    parts = [
        ops.lifted_plaintext(params, ops.encode(params, padded[i : i + _ENCODE_CHUNK]).coeffs).data
        for i in range(0, padded.shape[0], _ENCODE_CHUNK)
    ]
    return jnp.concatenate(parts)[:count]


def encode_matrix(params: Params, a) -> EncodedMatrix:
    """Encode a plaintext matrix (ints in [0, t), shape [m, n]) for :func:`matvec`: the pre-rotated diagonals
    of every block, batch-encoded and lifted to Q in batched calls. Offline work; exact."""
    _check_batching(params)
    a = np.asarray(a)
    if a.ndim != 2:
        raise ParameterError(f"the matrix must be 2-D [m, n], got shape {a.shape}")
    m, n = _check_dims(*a.shape)
    a = check_values(a, params.t, "matrix")
    plan = _plan(params.n // 2, m, n)
    d = plan.slots
    a_full = np.zeros((len(plan.blocks) * d, plan.col_blocks * d), dtype=np.int64)
    a_full[:m, :n] = a
    diagonals, sources = [], []
    pos = {b: p for p, b in enumerate(plan.baby_steps)}
    for group in plan.groups:
        blk = plan.blocks[group[0]]
        width = max(len(it) for it in blk.items)
        slots = np.stack([_block_slots(a_full, i_block, blk, d, width) for i_block in group], axis=1)
        diagonals.append(_encode_lifted(params, slots.reshape(-1, 2, d)).reshape(slots.shape[:3] + (-1, params.n)))
        src = np.zeros((len(blk.items), width), dtype=np.int32)
        for g, it in enumerate(blk.items):
            src[g, : len(it)] = [pos[b] * plan.col_blocks + j for j, b in it]
        sources.append(jnp.asarray(src))
    return EncodedMatrix(tuple(diagonals), tuple(sources), params, plan)


def encrypt_vector(params: Params, key_material, v, *, key=None) -> SlotChunks:
    """Encrypt n values in [0, t) in the layout of :func:`matvec` (module docstring), as ceil(n / d)
    ciphertexts in one batch. ``key_material``: EvaluationKeys, PublicKey or SecretKey (as
    ``bfv.ops.encrypt``); ``key``: a ChaChaKey used once (default fresh)."""
    _check_batching(params)
    v = np.asarray(v)
    if v.ndim != 1 or v.shape[0] < 1:
        raise ParameterError(f"the vector must be 1-D with at least one value, got shape {v.shape}")
    v = check_values(v, params.t, "vector")
    d = params.n // 2
    chunks = -(-v.shape[0] // d)
    padded = np.zeros((chunks, d), dtype=np.int64)
    padded.reshape(-1)[: v.shape[0]] = v
    slots = np.stack([padded, np.roll(padded, -(d // 2), axis=-1)], axis=-2)
    return SlotChunks(ops.encrypt(key_material, ops.encode(params, slots), key=key), int(v.shape[0]))


# --------------------------------------------------------------------------------------------------
# Product
# --------------------------------------------------------------------------------------------------


def _sum_mod(x, q):
    """sum over axis 1 mod q of x [R, P, L, N] in [0, q), by a pairwise tree of modular additions."""
    while x.shape[1] > 1:
        if x.shape[1] % 2:
            x = jnp.concatenate([x, jnp.zeros_like(x[:, :1])], axis=1)
        x = add_mod(x[:, 0::2], x[:, 1::2], q)
    return x[:, 0]


@jit
def _k_giant_sums(x0, x1, sources, diagonals, q, mu, bits):
    """Per giant step, sum_p baby[sources[g, p]] * diagonals[g, :, p] over Q (EVAL domain).

    x0, x1: uint32 [S, L, N], the baby-step ciphertexts; sources int32 [G, P]; diagonals uint32
    [G, R, P, L, N]. Returns (s0, s1), uint32 [G, R, L, N] each, in [0, q). Exact.
    """

    def step(args):
        src, diag = args
        y0 = jnp.take(x0, src, axis=0)[None]
        y1 = jnp.take(x1, src, axis=0)[None]
        return _sum_mod(barrett_mul(y0, diag, q, mu, bits), q), _sum_mod(barrett_mul(y1, diag, q, mu, bits), q)

    return jax.lax.map(step, (sources, diagonals))


@plan_cache(maxsize=16, on_device=True)
def _moduli_table(moduli: tuple[int, ...]) -> tuple:
    """(q, barrett_mu, bits) of :class:`ModulusTable`, uint32 [L, 1] device arrays (a ModulusTable is no pytree,
    so its NumPy leaves would be copied to the device on every call)."""
    t = ModulusTable.create(moduli)
    return t.q, t.barrett_mu, t.bits


@plan_cache(maxsize=64, on_device=True)
def _block_order(groups: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """int32: the permutation putting the groups' result blocks back in block order."""
    return np.argsort(np.concatenate([np.array(g) for g in groups])).astype(np.int32)


def _check_keys(plan: DiagonalPlan, params: Params, keys: EvaluationKeys) -> None:
    if not isinstance(keys, EvaluationKeys):
        raise TypeError(f"expected bfv.EvaluationKeys, got {type(keys).__name__}")
    if keys.params != params:
        raise BasisMismatchError("the evaluation keys belong to another parameter set")
    for k in plan.rotations:
        keys.galois_key(ops.rotation_element(params, k))
    if plan.row_swap:
        keys.galois_key(ops.row_swap_element(params))


def matvec(encoded: EncodedMatrix, x: SlotChunks, keys: EvaluationKeys) -> Ciphertext:
    """Encryptions of u = A x mod t: a Ciphertext batch of R = ceil(m / d) ciphertexts, block I holding
    u[I d : I d + d] in slot row 0 (both rows when the block used both). Needs the keys of
    :func:`required_rotations` and, if :func:`needs_row_swap`, the row swap (checked before any work:
    ParameterError naming the missing Galois element). Cost and noise: module docstring."""
    if not isinstance(encoded, EncodedMatrix):
        raise TypeError(f"expected an EncodedMatrix (diagonal.encode_matrix), got {type(encoded).__name__}")
    if not isinstance(x, SlotChunks):
        raise TypeError(f"expected an SlotChunks (diagonal.encrypt_vector), got {type(x).__name__}")
    plan, params = encoded.plan, encoded.params
    if x.ct.params != params:
        raise BasisMismatchError("the matrix and the vector belong to different parameter sets")
    if x.length != plan.cols:
        raise ParameterError(f"the matrix has {plan.cols} columns but the vector has {x.length} values")
    _check_keys(plan, params, keys)
    baby = [ops.rotate_rows(x.ct, b, keys) for b in plan.baby_steps]
    limbs, n = len(params.q), params.n
    x0 = jnp.stack([ct.c0.data for ct in baby]).reshape(-1, limbs, n)
    x1 = jnp.stack([ct.c1.data for ct in baby]).reshape(-1, limbs, n)
    q, mu, bits = _moduli_table(params.q)
    parts = []
    for group, sources, diagonals in zip(plan.groups, encoded.sources, encoded.diagonals):
        blk = plan.blocks[group[0]]
        s0, s1 = _k_giant_sums(x0, x1, sources, diagonals, q, mu, bits)
        acc = None
        for a, g0, g1 in zip(blk.giant, xla.unstack(s0), xla.unstack(s1)):
            part = Ciphertext(RNSPoly(g0, params.q, Domain.EVAL), RNSPoly(g1, params.q, Domain.EVAL), params,
                              x.ct.key_id)
            part = ops.rotate_rows(part, a, keys)
            acc = part if acc is None else ops.add(acc, part)
        if blk.two_rows:
            acc = ops.add(acc, ops.swap_rows(acc, keys))
        parts.append(acc)
    order = _block_order(tuple(tuple(g) for g in plan.groups))
    c0 = jnp.take(jnp.concatenate([p.c0.data for p in parts]), order, axis=0)
    c1 = jnp.take(jnp.concatenate([p.c1.data for p in parts]), order, axis=0)
    return Ciphertext(RNSPoly(c0, params.q, Domain.EVAL), RNSPoly(c1, params.q, Domain.EVAL), params, x.ct.key_id)


def decrypt_result(sk: SecretKey, result: Ciphertext, m: int) -> np.ndarray:
    """u = A v mod t from :func:`matvec`'s ciphertexts: int64 [m] in [0, t) (slot row 0 of each block)."""
    if not isinstance(result, Ciphertext):
        raise TypeError(f"expected the bfv.Ciphertext batch of matvec, got {type(result).__name__}")
    d = result.params.n // 2
    m = _check_dims(m, 1)[0]
    if result.batch_shape != (-(-m // d),):
        raise ParameterError(
            f"{m} rows take {-(-m // d)} ciphertexts of {d} slots; the result holds batch {result.batch_shape}"
        )
    slots = ops.decode(ops.decrypt(sk, result, encoding=Encoding.BATCH))
    return slots[:, 0, :].reshape(-1)[:m]


__all__ = [
    "BlockPlan",
    "DiagonalPlan",
    "EncodedMatrix",
    "SlotChunks",
    "decrypt_result",
    "encode_matrix",
    "encrypt_vector",
    "matvec",
    "needs_row_swap",
    "plan_matvec",
    "required_rotations",
]


__getattr__ = module_names("crossfhe.linalg.diagonal", {"EncryptedVector": (SlotChunks, "SlotChunks")})
