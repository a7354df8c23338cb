"""Basis conversion's modular matmul through BAT (CROSS §5.2).

Fast basis conversion Conv_{C->B} (:func:`crossfhe.math.rns.fast_basis_conversion`) is a vector step,
y_i = [x_i (C/c_i)^-1]_{c_i} (left on the vector units, as CROSS does), and an (N, l, l') modular matmul

    z_j = sum_i y_i [C/c_i]_{b_j}   (mod b_j),

whose known operand [C/c_i]_{b_j} is expanded offline by BAT (:func:`crossfhe.kernels.bat.bat_left`,
one modulus per output row). The data y_i are residues mod c_i, not mod b_j, so they are decomposed by
their own modulus: centered, y~_i = y_i - c_i when y_i > c_i / 2, which changes the integer sum by
-C for each such digit. :func:`centered_matmul` therefore returns the *centered* sum
sum_i y~_i [C/c_i]_{b_j} mod b_j, which is exactly what the centered conversions of ModUp and ModDown
want; the caller adds back (count) C mod b_j where it wants the plain sum. Every identity is exact, so
the result equals the two-word multiply-accumulate kernel word for word.

Batches of conversions with different bases (the digits of a key-switching ModUp) are a leading group
axis G: operand ``[G, m K, a K]``, data ``[..., G, a, N]``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.kernels import bat, chunks


def conversion_operand(weights, src_q, dst_q) -> bat.BATOperand:
    """BAT tables of z[g, j] = sum_i y~[g, i] weights[g, j, i] mod dst_q[g, j].

    ``weights`` uint32 ``[G, m, a]`` or ``[m, a]`` (residues mod the row's target); ``src_q`` ``[G, a, 1]``
    (or ``[a, 1]``) and ``dst_q`` ``[G, m, 1]`` (or ``[m, 1]``): the source and target moduli. The digit
    count K covers both (the data are decomposed mod the sources, the operand mod the targets).
    """
    w = np.asarray(weights)
    if w.ndim == 2:
        w = w[None]
    dst = np.asarray(dst_q, dtype=np.int64).reshape(w.shape[0], w.shape[1], 1)
    src = np.asarray(src_q, dtype=np.int64).reshape(-1)
    k = chunks.chunk_count(np.concatenate([src, dst.reshape(-1)]))
    return bat.bat_left(w, dst, k=k)


@jax.jit
def centered_matmul(y, src_q, op: bat.BATOperand):
    """sum_i center(y_i) w_ji mod b_j for y uint32 ``[..., G, a, N]`` (or ``[..., a, N]`` when G = 1) in
    [0, c_i), ``src_q`` the sources ``[G, a, 1]`` (or ``[a, 1]``). Returns ``[..., G, m, N]`` (or
    ``[..., m, N]``) in [0, b_j). Exact."""
    squeeze = y.ndim < 3 or op.limbs == 1 and jnp.ndim(src_q) == 2
    if squeeze:
        y = y[..., None, :, :]
        src_q = jnp.reshape(src_q, (1,) + jnp.shape(src_q))
    d = chunks.residue_chunks(y, src_q, op.k, axis=-2)  # [..., G, a, K, N]
    z = bat.matmul_chunks(d, op)
    return z[..., 0, :, :] if squeeze else z
