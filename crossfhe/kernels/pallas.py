"""A fused Pallas kernel for the BAT modular matrix product with a known right operand.

:func:`bat_matmul_pallas` computes what :func:`crossfhe.kernels.bat.matmul` computes, ``a @ B mod q``
per limb, with the three memory passes of the XLA version (digits written out; int8 x int8 -> int32
product written as ``[H, W K]`` chunks, 4 bytes per chunk; chunks read back for the recombination)
fused into one kernel. Per output tile ``[block_h, block_w]`` of limb l:

    for each block of block_v inner items v:
        x   = centered data tile a[l, rows, v]                   (int32, registers)
        d_i = digit i of x, i = 0..K-1                           (int8, registers)
        c_j += sum_i d_i @ W_ij,  W_ij[v, w] = digit j of [B_vw 2^(8i)]_q   (int32 accumulators)
    z = sum_j c_j 2^(8j) mod q                                   (offset, two-word shift-add, one Barrett)

W_ij is the (i, j) strided view of the expanded operand ``op.w`` ``[L, V K, W K]`` (rows (v, i), columns
(w, j)), read in place. So the kernel reads the data once per column tile and ``op.w`` once per row tile,
and writes only the uint32 result. The inner dimension is cut into runs of whole ``block_v`` blocks of at
most the operand's longest split (``op.splits``, :func:`crossfhe.kernels.chunks.inner_splits`), so each
run's int32 accumulators stay within ``op.bound``; each run is reduced and the runs are added mod q.

Opt-in: nothing in the library calls this kernel. It is bit-exact with :func:`~crossfhe.kernels.bat.matmul`
in interpret mode (CPU, tested); whether it beats XLA on a GPU has not been measured yet (no GPU was lent
when it was written; ``benchmarks/PALLAS_NOTES.md`` holds the prediction and the command to measure it).
It becomes a default only where a GPU measurement shows it wins.

GPU backend: the call asks for the Triton lowering (``jax.experimental.pallas.triton.CompilerParams``);
jax 0.10's default Pallas GPU lowering, Mosaic GPU, is deprecated for ``pallas_call``. Triton needs every
loaded or stored array to have a power-of-two size and a dot of at least 16 per dimension, so on a GPU
``block_h``, ``block_w`` and ``block_v`` must be powers of two >= 16 (interpret mode takes any divisor).
Triton's dot accepts int8 operands with an int32 accumulator (signed only: the lowering refuses unsigned
integer dots), which is why the digits are signed (:mod:`crossfhe.kernels.chunks`).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

from crossfhe.kernels import bat, chunks
from crossfhe.math.modular import add_mod

U32 = jnp.uint32
I32 = jnp.int32
I8 = jnp.int8

DEFAULT_BLOCK = 64
"""Default tile edge: the largest power of two <= 64 dividing the dimension (gcd(n, 64))."""

_CONSTANTS = ("q", "mu", "bits", "offset", "qinv", "r2")
_CONSTANT_SLOTS = 8  # a power of two, for the Triton lowering


def _block(name: str, size: int | None, n: int) -> int:
    if size is None:
        return math.gcd(n, DEFAULT_BLOCK)
    if not isinstance(size, int) or size < 1 or n % size:
        raise ValueError(f"{name}={size!r} must be a positive divisor of {n}")
    return size


def _runs(op: bat.BATOperand, nv: int, bv: int) -> tuple[tuple[int, int], ...]:
    """[start, stop) runs of v-blocks, each at most as long as the operand's longest split."""
    longest = max(s1 - s0 for s0, s1 in op.splits)
    per_run = longest // bv
    if per_run < 1:
        raise ValueError(f"block_v={bv} exceeds the operand's longest inner split ({longest} items)")
    return tuple((r, min(r + per_run, nv)) for r in range(0, nv, per_run))


def _kernel(c_ref, a_ref, w_ref, o_ref, *, k, bv, bw, runs, bound, single_barrett):
    """One output tile. c_ref: uint32 [8] constants of the limb; a_ref: uint32 [bh, V]; w_ref: int8
    [V K, bw K]; o_ref: uint32 [bh, bw]. Digits as :func:`crossfhe.kernels.chunks.to_chunks`, one at a time."""
    c = tuple(c_ref[i] for i in range(len(_CONSTANTS)))
    q = c[0]
    bh = o_ref.shape[0]

    def block(blk, acc):
        v0 = blk * bv
        x = chunks.center(a_ref[:, pl.ds(v0, bv)], q)
        acc = list(acc)
        for i in range(k):
            if i < k - 1:
                d = ((x + chunks.DIGIT_MAX) & 0xFF) - chunks.DIGIT_MAX
                x = (x - d) >> chunks.CHUNK_BITS
            else:
                d = x
            d = d.astype(I8)
            for j in range(k):
                wij = w_ref[pl.ds(v0 * k + i, bv, stride=k), pl.ds(j, bw, stride=k)]
                acc[j] = acc[j] + jnp.dot(d, wij, preferred_element_type=I32)
        return tuple(acc)

    out = None
    for r0, r1 in runs:
        zero = tuple(jnp.zeros((bh, bw), I32) for _ in range(k))
        acc = lax.fori_loop(r0, r1, block, zero)
        _, mu, bits, offset, qinv, r2 = c
        part = chunks.recombine_parts(
            acc, q, mu, bits, offset, bound=bound, single_barrett=single_barrett, qinv=qinv, r2=r2
        )
        out = part if out is None else add_mod(out, part, q)
    o_ref[...] = out


@functools.partial(jax.jit, static_argnames=("block_h", "block_w", "block_v", "interpret"))
def bat_matmul_pallas(
    a,
    op: bat.BATOperand,
    *,
    block_h: int | None = None,
    block_w: int | None = None,
    block_v: int | None = None,
    interpret: bool = False,
):
    """``a @ B mod q`` by BAT for a known right operand ``op`` (:func:`crossfhe.kernels.bat.bat_right`
    with one modulus per limb), in one fused Pallas kernel; jitted.

    ``a``: uint32 residues in [0, q_l) of the limb's modulus, ``[..., L, H, V]``. Returns uint32
    ``[..., L, H, W]`` in [0, q_l). Exact; bit-identical to :func:`crossfhe.kernels.bat.matmul`.
    Grid (L, batch x H / block_h, W / block_w): leading batch axes are folded into the row-tile axis of the
    grid (no data is moved). ``block_h``, ``block_w``, ``block_v`` must divide H, W, V (default
    gcd(n, 64); powers of two >= 16 on a GPU); ``block_v`` must not exceed the operand's longest inner
    split. ``interpret``: run the Pallas interpreter (CPU, tests). Raises ValueError on a left operand,
    per-column moduli, mismatched shapes or tile sizes that do not divide.
    """
    if op.side != "right":
        raise ValueError("bat_matmul_pallas takes a right operand (bat.bat_right)")
    if op.q.shape[1:] != (1, 1):
        raise ValueError("bat_matmul_pallas needs one modulus per limb, like bat.matmul")
    a = jnp.asarray(a, dtype=U32)
    lim, (v, w) = op.limbs, op.shape
    if a.ndim < 3 or a.shape[-3] != lim or a.shape[-1] != v:
        raise ValueError(f"data of shape {a.shape} does not match [..., L={lim}, H, V={v}]")
    batch, h = a.shape[:-3], a.shape[-2]
    bh = _block("block_h", block_h, h)
    bw = _block("block_w", block_w, w)
    bv = _block("block_v", block_v, v)
    runs = _runs(op, v // bv, bv)
    nb, nh, k = math.prod(batch), h // bh, op.k

    consts = jnp.stack([jnp.asarray(getattr(op, n), dtype=U32).reshape(lim) for n in _CONSTANTS], axis=-1)
    consts = jnp.pad(consts, ((0, 0), (0, _CONSTANT_SLOTS - len(_CONSTANTS))))
    kernel = functools.partial(_kernel, k=k, bv=bv, bw=bw, runs=runs, bound=op.bound, single_barrett=op.single_barrett)
    out = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((nb, lim, h, w), U32),
        grid=(lim, nb * nh, w // bw),
        in_specs=[
            pl.BlockSpec((None, _CONSTANT_SLOTS), lambda l, t, j: (l, 0)),
            pl.BlockSpec((None, None, bh, v), lambda l, t, j: (t // nh, l, t % nh, 0)),
            pl.BlockSpec((None, v * k, bw * k), lambda l, t, j: (l, 0, j)),
        ],
        out_specs=pl.BlockSpec((None, None, bh, bw), lambda l, t, j: (t // nh, l, t % nh, j)),
        compiler_params=pltriton.CompilerParams(),
        interpret=interpret,
        name="bat_matmul",
    )(consts, a.reshape(nb, lim, h, v), op.w)
    return out.reshape(batch + (lim, h, w))
