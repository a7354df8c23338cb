"""Linear layers over a *stack* of CKKS ciphertexts, one value per ciphertext and one sample per slot (the
SIMD-over-samples layout of CryptoNets and LoLa's batch mode): ciphertext v holds feature v of up to N/2 samples,
so a plaintext matrix W (H x V) times the stack,

    out_h = sum_v W[h, v] ct_v + b_h,

is the same modular matrix product for every slot: per limb l, the integer matrix round(W q_l') mod q_l times
the V x 2N words of (c0, c1), with q_l' the primes the following rescale divides by. No rotation, no key; one
level (the rescale). crossfhe runs it as CROSS's BAT product (:mod:`crossfhe.kernels.bat`: int8 digit matrices,
one Barrett reduction), the matrix expanded once per model and passed in.

Layout and shapes: a stack is a :class:`~crossfhe.ckks.ciphertext.Ciphertext` whose polynomials carry a leading
axis, uint32[V, limbs, N] (``jax.tree.map(jnp.stack, ...)`` of V ciphertexts, or :func:`stack`). The bias is
added as a column of W against a trivial encryption of 1 (c0 = round(Delta_x), c1 = 0: exact, no noise).

Convolution (:func:`conv2d`): for images stored one pixel per ciphertext (row-major, side x side, zero-padded), a
k x k window of stride s and M maps is, per output row, a dense H x V block of W over the k input rows that row
reads (H = M x out, V = k x side, zeros off the windows): the same product, ``out`` rows one after another so that
memory stays at k rows of input. Output order: map-major (map, row, col), as ``numpy.reshape`` of [M, out, out].

Error: each output's is sum_v |W[h, v]| eps_v (the inputs' errors, exactly propagated) plus the rounding of W to
multiples of 1 / q_l' (at most ||W_h||_1 x_max / (2 q_l')) and one rescale's noise (variance (1 + h) / 12 per
coefficient, :func:`crossfhe.linalg.ckks.matvec_error_bound`'s model: kappa sqrt(N (1 + h) / 12) / Delta per
slot). Inputs beyond the scale's range are the caller's: |out| x Delta must stay below Q/2 at the output level.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.ckks import ops
from crossfhe.ckks.ciphertext import Ciphertext
from crossfhe.ckks.params import Params
from crossfhe.errors import ParameterError
from crossfhe.kernels import bat
from crossfhe.ring.poly import RNSPoly


def stack(cts) -> Ciphertext:
    """V ciphertexts of one parameter set, level, scale and key as one stack (a leading axis of V)."""
    cts = list(cts)
    if not cts or not all(isinstance(c, Ciphertext) for c in cts):
        raise TypeError("stack takes a non-empty sequence of ckks.Ciphertext")
    first = cts[0]
    for c in cts[1:]:
        if ((c.level, c.key_id) != (first.level, first.key_id) or not ops._close(c.scale, first.scale)
                or c.params != first.params):
            raise ParameterError("stack: ciphertexts differ in level, scale, key or parameters")
    return jax.tree.map(lambda *a: jnp.stack(a), *cts)


def count(x: Ciphertext) -> int:
    """V, the number of ciphertexts in a stack."""
    return 1 if x.c0.data.ndim == 2 else int(x.c0.data.shape[0])


@dataclass(frozen=True, eq=False)
class EncodedLayer:
    """A plaintext matrix (with its bias as the last column) expanded for :func:`apply` at one level: ``op`` the
    BAT operand of round(W q') mod q per limb, ``shape`` (H, V), the input ``level`` and ``in_scale``."""

    op: bat.BATOperand
    shape: tuple[int, int]
    params: Params
    level: int
    in_scale: float
    weight_scale: float


def layer_arrays(w, b=None) -> tuple[np.ndarray, np.ndarray]:
    """A dense layer's (W float64[H, V], b float64[H], zeros if None), checked: shapes, finite values."""
    w = np.asarray(w, dtype=np.float64)
    if w.ndim != 2:
        raise ParameterError(f"a layer's matrix is H x V, got shape {w.shape}")
    h = w.shape[0]
    b = np.zeros(h) if b is None else np.asarray(b, dtype=np.float64)
    if b.shape != (h,):
        raise ParameterError(f"the bias must have {h} entries, got shape {b.shape}")
    if not (np.isfinite(w).all() and np.isfinite(b).all()):
        raise ParameterError("weights or bias hold NaN or infinite values")
    return w, b


def encode_layer(params: Params, w, b=None, *, level: int, in_scale: float) -> EncodedLayer:
    """Expand W (H x V, real) and b (H,) for inputs at ``level`` and scale ``in_scale``: entries round(W q') with q'
    the primes the rescale after the product divides by, so the output's scale is ``in_scale`` exactly."""
    w, b = layer_arrays(w, b)
    h, v = w.shape
    if level < 1:
        raise ParameterError("a layer needs one level to rescale; the input is at level 0")
    moduli = params.moduli_at(level)
    q_next = math.prod(params.rescale_primes(level))
    full = np.concatenate([w, b[:, None]], axis=1)
    ints = np.rint(full * q_next)
    if np.abs(ints).max() >= 2.0**62:
        raise ParameterError("weights too large for this parameter set's primes")
    ints = ints.astype(np.int64)
    residues = np.stack([np.mod(ints, q) for q in moduli]).astype(np.int64)  # [L, H, V + 1]
    op = bat.bat_left(residues, moduli)
    return EncodedLayer(op, (h, v), params, level, float(in_scale), float(q_next))


def _one(x: Ciphertext) -> tuple[jnp.ndarray, jnp.ndarray]:
    """(c0, c1) words of a trivial encryption of 1 at x's level and scale: uint32[limbs, N] each."""
    one = round(x.scale)
    words = ops._constant_words(tuple(one % q for q in x.c0.basis))  # [limbs, 1], on the device, made once
    c0 = jnp.broadcast_to(words, (len(x.c0.basis), x.params.n))
    return c0, jnp.zeros_like(c0)


@jax.jit
def _product(c0, c1, one0, one1, op):
    # [V, L, N] x2 and the constant row -> [L, V + 1, 2N]
    a = jnp.concatenate([jnp.concatenate([c0, one0[None]], axis=0), jnp.concatenate([c1, one1[None]], axis=0)],
                        axis=-1)
    a = jnp.moveaxis(a, 0, 1)
    out = bat.matmul(a, op)  # [L, H, 2N]
    n = c0.shape[-1]
    out = jnp.moveaxis(out, 1, 0)
    return out[..., :n], out[..., n:]


def apply(layer: EncodedLayer, x: Ciphertext) -> Ciphertext:
    """W x + b over a stack of V ciphertexts: a stack of H, one level lower, at scale ``layer.in_scale``."""
    if not isinstance(x, Ciphertext):
        raise TypeError(f"apply takes a stack of ckks.Ciphertext, got {type(x).__name__}")
    ops._same_params(x.params, layer.params, "simd.apply")
    v = count(x)
    if v != layer.shape[1]:
        raise ParameterError(f"the layer takes {layer.shape[1]} inputs, the stack holds {v} ciphertexts")
    if x.level < layer.level:
        raise ParameterError(f"the layer was encoded for level {layer.level}; the input is at level {x.level}")
    x = ops.drop_level(x, layer.level)
    if not ops._close(x.scale, layer.in_scale):
        raise ParameterError(f"the layer was encoded for inputs at scale 2^{math.log2(layer.in_scale):.2f}, the "
                             f"input is at 2^{math.log2(x.scale):.2f}")
    c0, c1 = x.c0.data, x.c1.data
    if c0.ndim == 2:
        c0, c1 = c0[None], c1[None]
    one0, one1 = _one(x)
    d0, d1 = _product(c0, c1, one0, one1, layer.op)
    out = dataclasses.replace(x, c0=RNSPoly(d0, x.c0.basis, x.c0.domain), c1=RNSPoly(d1, x.c1.basis, x.c1.domain),
                              scale=x.scale * layer.weight_scale)
    return ops.rescale(out)


def take(x: Ciphertext, index) -> Ciphertext:
    """The sub-stack x[index] (an integer array of positions)."""
    index = jnp.asarray(np.asarray(index, dtype=np.int32))
    return jax.tree.map(lambda a: a[index], x)


# --------------------------------------------------------------------------------------------------
# Convolution
# --------------------------------------------------------------------------------------------------


def conv_output_side(side: int, k: int, stride: int) -> int:
    if k > side or stride < 1:
        raise ParameterError(f"a {k} x {k} window of stride {stride} does not fit a {side} x {side} image")
    return (side - k) // stride + 1


@dataclass(frozen=True, eq=False)
class EncodedConv:
    """A convolution's per-output-row layers (:func:`encode_conv`)."""

    rows: tuple[EncodedLayer, ...]
    inputs: tuple[np.ndarray, ...]
    maps: int
    out: int
    side: int


def conv_matrix_row(w, side: int, stride: int, r: int) -> np.ndarray:
    """The dense block of output row r: float64[M x out, k x side] over input rows r s .. r s + k - 1 (row-major),
    outputs map-major within the row."""
    w = np.asarray(w, dtype=np.float64)
    m, k, _ = w.shape
    out = conv_output_side(side, k, stride)
    block = np.zeros((m, out, k, side))
    for c in range(out):
        block[:, c, :, c * stride: c * stride + k] = w
    return block.reshape(m * out, k * side)


def encode_conv(params: Params, w, b, *, side: int, stride: int, level: int, in_scale: float) -> EncodedConv:
    """A convolution of M k x k kernels ``w`` [M, k, k] with bias ``b`` [M], stride ``stride``, on side x side images
    stored one pixel per ciphertext, as ``out`` encoded row layers."""
    w = np.asarray(w, dtype=np.float64)
    if w.ndim != 3 or w.shape[1] != w.shape[2]:
        raise ParameterError(f"kernels are [maps, k, k], got shape {w.shape}")
    m, k, _ = w.shape
    out = conv_output_side(side, k, stride)
    b = np.asarray(b, dtype=np.float64)
    if b.shape != (m,):
        raise ParameterError(f"the bias must have {m} entries, got shape {b.shape}")
    rows, inputs = [], []
    for r in range(out):
        rows.append(encode_layer(params, conv_matrix_row(w, side, stride, r), np.repeat(b, out), level=level,
                                 in_scale=in_scale))
        inputs.append(np.arange(r * stride * side, (r * stride + k) * side))
    return EncodedConv(tuple(rows), tuple(inputs), m, out, side)


def conv2d(conv: EncodedConv, x: Ciphertext) -> Ciphertext:
    """The convolution of a stack of side^2 pixel ciphertexts: a stack of M x out^2, map-major (map, row, col)."""
    if count(x) != conv.side**2:
        raise ParameterError(f"the convolution takes {conv.side}^2 = {conv.side**2} pixel ciphertexts, the stack holds "
                             f"{count(x)}")
    parts = [apply(layer, take(x, idx)) for layer, idx in zip(conv.rows, conv.inputs)]  # each [M x out] (m, c)
    m, out = conv.maps, conv.out
    joined = jax.tree.map(lambda *a: jnp.stack(a), *parts)  # [out (r), M x out (m, c), ...]
    order = np.arange(out * m * out).reshape(out, m, out).transpose(1, 0, 2).reshape(-1)  # (m, r, c) <- (r, m, c)
    return jax.tree.map(lambda a: a.reshape((out * m * out,) + a.shape[2:])[jnp.asarray(order)], joined)


__all__ = ["EncodedConv", "EncodedLayer", "apply", "conv2d", "conv_matrix_row", "conv_output_side", "count",
           "encode_conv", "encode_layer", "layer_arrays", "stack", "take"]
