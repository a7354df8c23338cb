"""Convolution and dense layers on packed encrypted images (CKKS), with plaintext or encrypted weights.

Two packings; which one serves which case, and why:

**Kernel-entry-major im2col, one image** (:func:`im2col`, :func:`encode_entry_conv`, :func:`encrypt_entry_conv`,
:func:`entry_conv`): latency. A convolution of M maps of k x k windows, stride s, P = out^2 windows, is sent as
E = k^2 ciphertexts, ciphertext e holding entry e = (i, j) of every window for every map: slot m P + p holds
x[r s + i, c s + j] (p = r out + c), zero up to the block d (a power of two >= M P) and replicated with period d
(:mod:`crossfhe.linalg.ckks`'s layout). With w_e the vector of slot m P + p = w[m, i, j],

    conv = sum_e w_e ⊙ ct_e + b,

E plaintext products (or E ciphertext products and one relinearization for encrypted weights), one level, no
rotation, and the output lands map-major (m, r, c) in the replicated layout of :func:`crossfhe.linalg.ckks.matvec`,
so the dense layers follow as BSGS products (plaintext weights) or :func:`crossfhe.linalg.ckks.enc_enc_matvec`
(encrypted diagonals). The client encodes k^2 ciphertexts per image (LoLa's dense-vector input).

**Images across slots, in G blocks** (:class:`Blocks`, :func:`encode_layer`, :func:`encrypt_layer`,
:func:`apply_layer`): throughput. B images per ciphertext (B a power of two dividing N/2), G = N / (2B) blocks:
slot g B + t holds image t in block g. A value held in every block is *replicated* (one feature per ciphertext);
a ciphertext holding feature f_g in block g is *packed* (``groups`` list the features per block). A layer with
H x V weights W is then, with no rotation in the first kind:

* SPREAD (replicated inputs x_v -> packed outputs): out_j = sum_v W_jv ⊙ x_v + b_j, block g of W_jv the scalar
  W[group_j[g], v] repeated over the B images: ceil(H / G) V products (zero blocks skipped);
* GATHER (packed inputs x_k -> replicated outputs): y_o = sum_k W_ok ⊙ x_k, block g of W_ok = W[o, group_k[g]],
  then the G blocks summed by log2 G rotations (by B, 2B, ..., N/4) and b_o added: H ceil(V / G) products.

With G = 1 (B = N/2) both kinds are the plain SIMD-over-images layer of CryptoNets and LoLa's batch mode: every
layer a sum of ciphertext x scalar products, no rotation at all. For plaintext weights that case is run as one
integer matrix product per layer (:mod:`crossfhe.linalg.simd`, CROSS's BAT: a convolution as one dense block
per output row, :func:`crossfhe.linalg.simd.encode_conv`), the fastest per image. Encrypted weights need one
ciphertext per weight block; at G = 1 that is one per weight (LoLa's dense layer: 84,500 ciphertexts, 66 GB at
N 2^14), so they take G > 1: a convolution as SPREAD with
one output row (M x out outputs) per packed ciphertext (:func:`conv_groups`; the weight blocks of every row are the
same, so only (k x side) distinct ones are encrypted), the dense layers alternating GATHER and SPREAD. The per-image
product count is the same for every G (H V / (G B) = 2 H V / N); G only trades batch size (latency) against weight
storage and the log2 G rotations of each GATHER output.

Counts for the two networks at N 2^14 (8192 slots), 5 levels each (conv, square, dense, square, dense):

* LoLa (29 x 29 padded, 5 maps 5 x 5 stride 2, 845 -> 100 -> 10). Single image: 25 input ciphertexts, conv 25
  products, dense 845 -> 100 with d = 1024 (944 diagonals; BSGS about 2 sqrt(944) ~ 62 rotations), dense 100 -> 10
  (109 diagonals, ~21 rotations), 2 relinearized squares: ~85 key switches per image; encrypted weights: 944 + 109
  rotations and as many relinearized products (enc_enc_matvec). Batch, plaintext weights (G = 1, 8192 images):
  841 input ciphertexts, 13 conv row products (65 x 145), 845 + 100 squares, 100 x 846 and 10 x 101 matrix
  products: 945 key switches per 8192 images. Batch, encrypted weights (G = 128, 64 images): conv 13 x 145
  products over 145 distinct weight ciphertexts, 13 + 100 + 1 relinearizations, 13 + 100 squares, dense 1: 1300
  products and 100 x 7 rotations, dense 2: 100 products: about 930 key switches per 64 images.
* TenSEAL (28 x 28, 4 maps 7 x 7 stride 3, 256 -> 64 -> 10). Single image: 49 input ciphertexts, conv 49 products,
  dense 256 -> 64 with d = 256 (256 diagonals, ~32 rotations), dense 64 -> 10 (73 diagonals, ~17 rotations).
  Batch, plaintext weights (G = 1): 784 inputs, 8 row products (32 x 196), 256 + 64 squares. Batch, encrypted
  weights (G = 32, 256 images): conv 8 x 196 products (196 distinct weights), dense 1: 512 products and 64 x 5
  rotations, dense 2: 64 products; about 465 key switches per 256 images.

Error (per output slot; the model and kappa = 6 of :mod:`crossfhe.linalg.ckks`, V_ks its key-switching variance,
h the secret's Hamming weight, N if not fixed): for an input with slot error eps_in and magnitude x_max, T terms
per output (products), row sums ||W_h||_1, weights at scale q_l (the primes the rescale divides by), output scale
Delta (= the input's),

    ||W_h||_1 eps_in + T (x_max + eps_in) eps_w
      + kappa sqrt(N) sqrt( [plain] T x_max^2 / (12 q_l^2) + [enc] V_ks / (Delta q_l)^2
                            + c (1 + h) / (12 Delta^2) + (c - 1) V_ks / Delta^2 + [enc] V_fresh / Delta^2 ),

with eps_w = kappa sqrt(N V_fresh) / q_l the slot error of an encrypted weight (V_fresh = sigma^2 + (1 + h) / 12
covers public- and secret-key encryption), c = G for GATHER (G blocks' rescale noise summed, G - 1 rotations) and
1 otherwise (:func:`layer_error_bound`, :func:`entry_conv_error_bound`).
"""

from __future__ import annotations

import dataclasses
import enum
import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.ckks import ops
from crossfhe.ckks.ciphertext import Ciphertext, EvaluationKeys, Plaintext
from crossfhe.ckks.params import Params
from crossfhe.core.keys import SIGMA, check_key_ids
from crossfhe.errors import ParameterError
from crossfhe.linalg import simd
from crossfhe.linalg.ckks import KAPPA, _keyswitch_variance, _rescale_variance
from crossfhe.math.modular import add_mod, barrett_mul
from crossfhe.ring import poly
from crossfhe.ring.poly import RNSPoly

# --------------------------------------------------------------------------------------------------
# Geometry and NumPy references
# --------------------------------------------------------------------------------------------------


def output_side(side: int, k: int, stride: int) -> int:
    """out = floor((side - k) / stride) + 1 output rows (and columns) of a k x k window of stride ``stride``."""
    if not (isinstance(side, (int, np.integer)) and isinstance(k, (int, np.integer))
            and isinstance(stride, (int, np.integer))) or k < 1 or stride < 1 or k > side:
        raise ParameterError(f"a {k} x {k} window of stride {stride} does not fit a {side} x {side} image")
    return (int(side) - int(k)) // int(stride) + 1


def _kernels(w, b):
    w = np.asarray(w, dtype=np.float64)
    if w.ndim != 3 or w.shape[1] != w.shape[2]:
        raise ParameterError(f"kernels are [maps, k, k], got shape {w.shape}")
    b = np.zeros(w.shape[0]) if b is None else np.asarray(b, dtype=np.float64)
    if b.shape != (w.shape[0],):
        raise ParameterError(f"the bias must have {w.shape[0]} entries (one per map), got shape {b.shape}")
    if not (np.isfinite(w).all() and np.isfinite(b).all()):
        raise ParameterError("kernels or bias hold NaN or infinite values")
    return w, b


def _images(images, side: int | None = None) -> np.ndarray:
    x = np.asarray(images, dtype=np.float64)
    if x.ndim == 2:
        x = x[None]
    if x.ndim != 3 or x.shape[1] != x.shape[2] or (side is not None and x.shape[1] != side):
        want = f"{side} x {side}" if side is not None else "square"
        raise ParameterError(f"images must be [n, side, side] ({want}), got shape {np.shape(images)}")
    if not np.isfinite(x).all():
        raise ParameterError("images hold NaN or infinite values")
    return x


def conv2d_reference(images, w, b=None, *, stride: int) -> np.ndarray:
    """The convolution in float64: [n, side, side] images, [M, k, k] kernels -> [n, M, out, out] (valid windows,
    cross-correlation as in every CNN library, bias per map)."""
    w, b = _kernels(w, b)
    x = _images(images)
    k = w.shape[1]
    out = output_side(x.shape[1], k, stride)
    idx = np.arange(out)[:, None] * stride + np.arange(k)[None, :]
    win = x[:, idx[:, None, :, None], idx[None, :, None, :]]  # [n, out, out, k, k]
    return np.einsum("nrcij,mij->nmrc", win, w) + b[None, :, None, None]


def conv_matrix(w, *, side: int, stride: int) -> np.ndarray:
    """The convolution as a matrix: float64[M out^2, side^2], rows map-major (m, r, c), columns row-major pixels."""
    w, _ = _kernels(w, None)
    m, k, _ = w.shape
    out = output_side(side, k, stride)
    a = np.zeros((m, out, out, side, side))
    for r in range(out):
        for c in range(out):
            a[:, r, c, r * stride:r * stride + k, c * stride:c * stride + k] = w
    return a.reshape(m * out * out, side * side)


def conv_groups(maps: int, out: int) -> list[np.ndarray]:
    """The packed groups of a convolution's outputs, one output row per group: group r holds the features
    m out^2 + r out + c (map-major flatten order) in block m out + c; ``out`` groups of M out features."""
    return [np.array([m * out * out + r * out + c for m in range(maps) for c in range(out)]) for r in range(out)]


# --------------------------------------------------------------------------------------------------
# Products: sums of ciphertext x plaintext (or ciphertext) terms, one program per layer
# --------------------------------------------------------------------------------------------------


@jax.jit
def _sum_plain(x0: RNSPoly, x1: RNSPoly, w: RNSPoly, xi, wi):
    """out_j = sum_t x[xi[j, t]] w[wi[j, t]] for both parts: (RNSPoly [J, L, N]) x 2. Exact."""
    t = poly.modulus_table(x0.basis)

    def step(acc, idx):
        i, j = idx
        m = w.data[j]
        a0 = add_mod(acc[0], barrett_mul(x0.data[i], m, t.q, t.barrett_mu, t.bits), t.q)
        a1 = add_mod(acc[1], barrett_mul(x1.data[i], m, t.q, t.barrett_mu, t.bits), t.q)
        return (a0, a1), None

    zero = jnp.zeros((xi.shape[0],) + x0.data.shape[1:], jnp.uint32)
    (a0, a1), _ = jax.lax.scan(step, (zero, zero), (xi.T, wi.T))
    return x0._replace(a0), x1._replace(a1)


@jax.jit
def _sum_tensor(x0: RNSPoly, x1: RNSPoly, w0: RNSPoly, w1: RNSPoly, xi, wi):
    """The degree-2 sums (d0, d1, d2) = sum_t tensor(x[xi[j, t]], w[wi[j, t]]), each RNSPoly [J, L, N]. Exact."""
    t = poly.modulus_table(x0.basis)

    def mul(a, b):
        return barrett_mul(a, b, t.q, t.barrett_mu, t.bits)

    def step(acc, idx):
        i, j = idx
        a0, a1, b0, b1 = x0.data[i], x1.data[i], w0.data[j], w1.data[j]
        d0 = add_mod(acc[0], mul(a0, b0), t.q)
        d1 = add_mod(add_mod(acc[1], mul(a0, b1), t.q), mul(a1, b0), t.q)
        d2 = add_mod(acc[2], mul(a1, b1), t.q)
        return (d0, d1, d2), None

    zero = jnp.zeros((xi.shape[0],) + x0.data.shape[1:], jnp.uint32)
    (d0, d1, d2), _ = jax.lax.scan(step, (zero, zero, zero), (xi.T, wi.T))
    return x0._replace(d0), x0._replace(d1), x0._replace(d2)


def _as_stack(x: Ciphertext) -> Ciphertext:
    if x.c0.data.ndim == 2:
        return jax.tree.map(lambda a: a[None], x)
    return x


_count = simd.count


def _stack(cts) -> Ciphertext:
    cts = list(cts)
    if not cts or not all(isinstance(c, Ciphertext) for c in cts):
        raise ParameterError("expected a non-empty sequence of ckks.Ciphertext (or one stacked Ciphertext)")
    return simd.stack(cts)


def _inputs(cts) -> Ciphertext:
    return _as_stack(cts) if isinstance(cts, Ciphertext) else _stack(cts)


@dataclass(frozen=True, eq=False)
class _Weights:
    """Distinct weight blocks at one level and scale q_l, stacked with a zero row last: plaintext polynomials
    (``c1`` None) or ciphertexts (c0, c1) encrypted under ``key_id``."""

    c0: RNSPoly
    c1: RNSPoly | None
    key_id: str | None

    @property
    def encrypted(self) -> bool:
        return self.c1 is not None


def _make_weights(key_material, params: Params, vectors: list, *, level: int, scale: float) -> _Weights:
    """Encode (``key_material`` None) or encrypt each vector of N/2 values at ``level`` and ``scale``; append zeros."""
    pts = [ops.encode(params, v, level=level, scale=scale) for v in vectors]
    if key_material is None:
        data = jnp.stack([p.poly.data for p in pts] + [jnp.zeros_like(pts[0].poly.data)])
        return _Weights(pts[0].poly._replace(data), None, None)
    cts = [ops.encrypt(key_material, p) for p in pts]
    zero = jnp.zeros_like(cts[0].c0.data)
    d0 = jnp.stack([c.c0.data for c in cts] + [zero])
    d1 = jnp.stack([c.c1.data for c in cts] + [zero])
    return _Weights(cts[0].c0._replace(d0), cts[0].c1._replace(d1), cts[0].key_id)


def _products(x: Ciphertext, w: _Weights, xi: np.ndarray, wi: np.ndarray, keys, scale: float) -> Ciphertext:
    """sum_t x[xi[:, t]] w[wi[:, t]] (relinearized for encrypted weights) at scale ``scale``, not rescaled."""
    xi, wi = jnp.asarray(xi, dtype=jnp.int32), jnp.asarray(wi, dtype=jnp.int32)
    if not w.encrypted:
        c0, c1 = _sum_plain(x.c0, x.c1, w.c0, xi, wi)
        return dataclasses.replace(x, c0=c0, c1=c1, scale=scale)
    if not isinstance(keys, EvaluationKeys):
        raise ParameterError("encrypted weights need the evaluation keys (relinearization key)")
    check_key_ids("encrypted weights", x.key_id, w.key_id, keys.key_id)
    d0, d1, d2 = _sum_tensor(x.c0, x.c1, w.c0, w.c1, xi, wi)
    c0, c1 = ops.relinearize(d0, d1, d2, keys.relin, kernels=x.params.kernels)
    return dataclasses.replace(x, c0=c0, c1=c1, scale=scale)


def _terms(rows: list[list[tuple[int, int]]], zero: int) -> tuple[np.ndarray, np.ndarray]:
    """(xi, wi) int32 [J, T] from per-output lists of (input, weight) pairs, padded with (0, zero)."""
    t = max(1, max(len(r) for r in rows))
    xi = np.zeros((len(rows), t), dtype=np.int32)
    wi = np.full((len(rows), t), zero, dtype=np.int32)
    for j, r in enumerate(rows):
        for n, (a, b) in enumerate(r):
            xi[j, n], wi[j, n] = a, b
    return xi, wi


def _fresh_variance(params: Params) -> float:
    h = params.n if params.hamming_weight is None else params.hamming_weight
    return SIGMA**2 + (1 + h) / 12


def _check_level(params: Params, level: int) -> int:
    level = int(level)
    if not 1 <= level <= params.user_levels:
        raise ParameterError(f"a layer needs a level to rescale: level in [1, {params.user_levels}], got {level}")
    return level


def _check_input(x: Ciphertext, params: Params, level: int, in_scale: float, what: str) -> Ciphertext:
    if not isinstance(x, Ciphertext):
        raise TypeError(f"{what} takes ckks.Ciphertext inputs, got {type(x).__name__}")
    ops._same_params(x.params, params, what)
    if x.level < level:
        raise ParameterError(f"{what}: encoded for inputs at level {level}, the input is at level {x.level} (too few "
                             f"levels left: encrypt higher or use parameters with more levels)")
    if not ops._close(x.scale, in_scale):
        raise ParameterError(f"{what}: encoded for inputs at scale 2^{math.log2(in_scale):.2f}, the input is at "
                             f"2^{math.log2(x.scale):.2f}")
    return ops.drop_level(x, level)


# --------------------------------------------------------------------------------------------------
# One image: kernel-entry-major im2col
# --------------------------------------------------------------------------------------------------


def _block(params: Params, size: int, block: int | None) -> int:
    d = 1 << (size - 1).bit_length() if block is None else int(block)
    if d < size or d & (d - 1) or d > params.slots:
        raise ParameterError(f"the block d must be a power of two in [{size}, N/2 = {params.slots}], got {d} "
                             f"(M out^2 = {size} outputs)")
    return d


def im2col(images, *, k: int, stride: int, maps: int, block: int) -> np.ndarray:
    """Kernel-entry-major packing (module docstring): float64[n, k^2, block], entry e = i k + j of window
    p = r out + c at slot m out^2 + p for every map m, zeros from M out^2 to ``block``."""
    x = _images(images)
    out = output_side(x.shape[1], k, stride)
    size = maps * out * out
    if block < size:
        raise ParameterError(f"block {block} is smaller than the {size} outputs")
    idx = np.arange(out)[:, None] * stride + np.arange(k)[None, :]
    win = x[:, idx[:, None, :, None], idx[None, :, None, :]]  # [n, r, c, i, j]
    ent = win.transpose(0, 3, 4, 1, 2).reshape(len(x), k * k, out * out)
    res = np.zeros((len(x), k * k, block))
    res[:, :, :size] = np.tile(ent, (1, 1, maps))
    return res


@dataclass(frozen=True, eq=False)
class EntryConv:
    """A convolution for :func:`entry_conv`: the k^2 entry weights w_e (slot m out^2 + p = w[m, e]) at ``level`` and
    scale q_l, and the bias (slot m out^2 + p = b[m]) at level - 1 and scale ``in_scale``; plaintexts or ciphertexts.
    ``w_l1`` = max_m ||w_m||_1, ``w_max`` = max |w|."""

    weights: _Weights
    bias: Plaintext | Ciphertext
    params: Params
    side: int
    k: int
    stride: int
    maps: int
    block: int
    level: int
    in_scale: float
    w_l1: float
    w_max: float

    @property
    def out(self) -> int:
        return output_side(self.side, self.k, self.stride)

    @property
    def encrypted(self) -> bool:
        return self.weights.encrypted


def _entry_conv(key_material, params, w, b, *, side, stride, level, in_scale, block) -> EntryConv:
    w, b = _kernels(w, b)
    level = _check_level(params, level)
    m, k, _ = w.shape
    out = output_side(side, k, stride)
    p = out * out
    d = _block(params, m * p, block)
    q = float(math.prod(params.rescale_primes(level)))
    vecs = []
    for e in range(k * k):
        v = np.zeros(d)
        v[:m * p] = np.repeat(w.reshape(m, k * k)[:, e], p)
        vecs.append(v)
    weights = _make_weights(key_material, params, vecs, level=level, scale=q)
    bv = np.zeros(d)
    bv[:m * p] = np.repeat(b, p)
    bias = ops.encode(params, bv, level=level - 1, scale=in_scale)
    if key_material is not None:
        bias = ops.encrypt(key_material, bias)
    return EntryConv(weights, bias, params, int(side), k, int(stride), m, d, level, float(in_scale),
                     float(np.abs(w).reshape(m, -1).sum(1).max()), float(np.abs(w).max()))


def encode_entry_conv(params: Params, w, b=None, *, side: int, stride: int, level: int, in_scale: float,
                      block: int | None = None) -> EntryConv:
    """Kernels ``w`` [M, k, k] and bias ``b`` [M] encoded once per model for :func:`entry_conv` on side x side
    images at ``level`` and ``in_scale`` (block d: default the power of two >= M out^2)."""
    return _entry_conv(None, params, w, b, side=side, stride=stride, level=level, in_scale=in_scale, block=block)


def encrypt_entry_conv(key_material, params: Params, w, b=None, *, side: int, stride: int, level: int,
                       in_scale: float, block: int | None = None) -> EntryConv:
    """As :func:`encode_entry_conv`, the k^2 weight vectors and the bias encrypted (``ckks.ops.encrypt`` with a public
    or secret key: the model owner's, under the key the images use)."""
    return _entry_conv(key_material, params, w, b, side=side, stride=stride, level=level, in_scale=in_scale,
                       block=block)


def entry_conv(conv: EntryConv, cts, keys: EvaluationKeys | None = None) -> Ciphertext:
    """The convolution of one image given as its k^2 entry ciphertexts (:func:`im2col` rows, encrypted at level >=
    ``conv.level`` and scale ``conv.in_scale``; a list or a stack): one ciphertext, slot m out^2 + r out + c the
    output of map m at (r, c), replicated with period ``conv.block``; level ``conv.level`` - 1, scale ``in_scale``.
    k^2 products (encrypted weights: tensor products summed, one relinearization with ``keys``), one rescale, no
    rotation. Error: :func:`entry_conv_error_bound`."""
    x = _inputs(cts)
    e = conv.k * conv.k
    if _count(x) != e:
        raise ParameterError(f"the convolution takes its {conv.k}^2 = {e} entry ciphertexts, got {_count(x)}")
    x = _check_input(x, conv.params, conv.level, conv.in_scale, "entry_conv")
    q = math.prod(conv.params.rescale_primes(conv.level))
    y = _products(x, conv.weights, np.arange(e)[None], np.arange(e)[None], keys, conv.in_scale * q)
    y = jax.tree.map(lambda a: a[0], ops.rescale(y))
    y = dataclasses.replace(y, scale=conv.in_scale)
    return ops.add(y, conv.bias) if isinstance(conv.bias, Ciphertext) else ops.add_plain(y, conv.bias)


def entry_conv_error_bound(conv: EntryConv, *, x_max: float = 1.0, input_error: float = 0.0) -> float:
    """The module docstring's bound for :func:`entry_conv` (T = k^2 terms, c = 1)."""
    return _bound(conv.params, conv.level, conv.in_scale, conv.encrypted, terms=conv.k**2, copies=1,
                  row_l1=conv.w_l1, x_max=x_max, input_error=input_error)


def _bound(params, level, scale, encrypted, *, terms, copies, row_l1, x_max, input_error) -> float:
    n = params.n
    q = math.prod(params.rescale_primes(level))
    v_ks = _keyswitch_variance(params, level)
    v_fresh = _fresh_variance(params)
    var = copies * _rescale_variance(params) / scale**2 + (copies - 1) * v_ks / scale**2
    linear = row_l1 * input_error
    if encrypted:
        eps_w = KAPPA * math.sqrt(n * v_fresh) / q
        linear += terms * (x_max + input_error) * eps_w
        var += v_ks / (scale * q) ** 2 + v_fresh / scale**2
    else:
        var += terms * x_max**2 / (12 * q**2)
    return linear + KAPPA * math.sqrt(n * var)


# --------------------------------------------------------------------------------------------------
# Images across slots, in blocks
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Blocks:
    """B = ``batch`` images per ciphertext in G = slots / B blocks (slot g B + t: image t, block g)."""

    slots: int
    batch: int

    @property
    def groups(self) -> int:
        return self.slots // self.batch

    @property
    def rotations(self) -> tuple[int, ...]:
        """The rotations a GATHER layer needs keys for: B, 2B, ..., N/4."""
        return tuple(self.batch << i for i in range(self.groups.bit_length() - 1))


def blocks(params: Params, *, batch: int | None = None, groups: int | None = None) -> Blocks:
    """The block layout of ``batch`` images (or ``groups`` blocks) per ciphertext: a power of two dividing N/2."""
    if (batch is None) == (groups is None):
        raise ParameterError("give exactly one of batch (images per ciphertext) and groups (blocks)")
    b = params.slots // int(groups) if batch is None else int(batch)
    if b < 1 or b & (b - 1) or b > params.slots or (groups is not None and b * int(groups) != params.slots):
        raise ParameterError(f"images per ciphertext must be a power of two in [1, N/2 = {params.slots}] and blocks "
                             f"N/2 / images; got batch={batch}, groups={groups}")
    return Blocks(params.slots, b)


def pack(layout: Blocks, x, groups=None) -> np.ndarray:
    """Slot values of ``x`` [n <= B, V] (n images, V features): float64[V, N/2] replicated (feature v in every block
    of row v), or with ``groups`` (a list of feature-index arrays of length <= G) packed: row k holds feature
    groups[k][g] in block g. Unused image slots and blocks are 0."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or len(x) > layout.batch:
        raise ParameterError(f"pack takes [n, features] with n <= {layout.batch} images, got shape {x.shape}")
    cols = np.zeros((x.shape[1], layout.batch))
    cols[:, :len(x)] = x.T
    if groups is None:
        return np.tile(cols, (1, layout.groups))
    rows = np.zeros((len(groups), layout.groups, layout.batch))
    for k, grp in enumerate(_groups(groups, layout, x.shape[1])):
        rows[k, :len(grp)] = cols[grp]
    return rows.reshape(len(groups), -1)


def unpack(layout: Blocks, values, n: int, groups=None, *, features: int | None = None) -> np.ndarray:
    """The inverse of :func:`pack` on decrypted slot values [K, N/2]: float64[n, features] (replicated rows: block 0
    of each; packed rows: feature groups[k][g] from block g)."""
    v = np.real(np.asarray(values)).reshape(-1, layout.groups, layout.batch)[:, :, :n]
    if groups is None:
        return v[:, 0, :].T
    features = 1 + max(int(np.max(g)) for g in groups) if features is None else int(features)
    out = np.zeros((n, features))
    for k, grp in enumerate(_groups(groups, layout, features)):
        out[:, grp] = v[k, :len(grp)].T
    return out


def _groups(groups, layout: Blocks, features: int) -> list[np.ndarray]:
    res = []
    for g in groups:
        g = np.asarray(g, dtype=np.int64).reshape(-1)
        if len(g) > layout.groups or (len(g) and (g.min() < 0 or g.max() >= features)):
            raise ParameterError(f"a group holds at most G = {layout.groups} feature indices in [0, {features}), got "
                                 f"{len(g)} indices in [{g.min() if len(g) else 0}, {g.max() if len(g) else 0}]")
        res.append(g)
    return res


class Kind(enum.Enum):
    """SPREAD: replicated inputs -> packed outputs, no rotation; GATHER: packed inputs -> replicated outputs, the
    blocks summed by log2 G rotations (module docstring)."""

    SPREAD = "spread"
    GATHER = "gather"


@dataclass(frozen=True, eq=False)
class BlockLayer:
    """A layer encoded (or encrypted) once for :func:`apply_layer`: ``inputs``/``outputs`` the packed groups (None:
    replicated), ``xi``/``wi`` the (input ciphertext, weight block) pairs of each output ciphertext, the distinct
    weight blocks at ``level`` and scale q_l, the bias at level - 1 and scale ``in_scale``."""

    kind: Kind
    layout: Blocks
    shape: tuple[int, int]
    inputs: tuple | None
    outputs: tuple | None
    weights: _Weights
    xi: np.ndarray
    wi: np.ndarray
    bias: Plaintext | Ciphertext
    params: Params
    level: int
    in_scale: float
    row_l1: float

    @property
    def encrypted(self) -> bool:
        return self.weights.encrypted

    @property
    def in_count(self) -> int:
        return self.shape[1] if self.inputs is None else len(self.inputs)

    @property
    def out_count(self) -> int:
        return self.shape[0] if self.outputs is None else len(self.outputs)

    @property
    def terms(self) -> int:
        """Products per output ciphertext (the largest count)."""
        return int(self.xi.shape[1])

    @property
    def rotations(self) -> tuple[int, ...]:
        return self.layout.rotations if self.kind is Kind.GATHER else ()


def _block_layer(key_material, params: Params, layout: Blocks, w, b, *, kind: Kind, groups, level: int,
                 in_scale: float) -> BlockLayer:
    w, b = simd.layer_arrays(w, b)
    h, v = w.shape
    if not isinstance(kind, Kind):
        raise ParameterError(f"kind is a conv.Kind, got {kind!r}")
    if layout.slots != params.slots:
        raise ParameterError(f"the layout has {layout.slots} slots, the parameters {params.slots}")
    level = _check_level(params, level)
    big_g, big_b = layout.groups, layout.batch
    grp = _groups(groups, layout, h if kind is Kind.SPREAD else v)
    distinct: dict = {}
    rows: list[list[tuple[int, int]]] = []

    def term(block: np.ndarray, j: int, row: list) -> None:
        if not block.any():
            return
        key = block.tobytes()
        if key not in distinct:
            distinct[key] = (len(distinct), block)
        row.append((j, distinct[key][0]))

    if kind is Kind.SPREAD:
        for g in grp:
            row: list = []
            for j in range(v):
                blk = np.zeros(big_g)
                blk[:len(g)] = w[g, j]
                term(blk, j, row)
            rows.append(row)
        bias_rows = []
        for g in grp:
            blk = np.zeros(big_g)
            blk[:len(g)] = b[g]
            bias_rows.append(np.repeat(blk, big_b))
    else:
        for o in range(h):
            row = []
            for k, g in enumerate(grp):
                blk = np.zeros(big_g)
                blk[:len(g)] = w[o, g]
                term(blk, k, row)
            rows.append(row)
        bias_rows = [np.full(params.slots, bo) for bo in b]
    q = float(math.prod(params.rescale_primes(level)))
    if not distinct:
        distinct[b"0"] = (0, np.zeros(big_g))
    vecs = [np.repeat(blk, big_b) for _, blk in sorted(distinct.values(), key=lambda t: t[0])]
    weights = _make_weights(key_material, params, vecs, level=level, scale=q)
    xi, wi = _terms(rows, len(vecs))
    pts = [ops.encode(params, r, level=level - 1, scale=in_scale) for r in bias_rows]
    if key_material is None:
        bias = Plaintext(pts[0].poly._replace(jnp.stack([p.poly.data for p in pts])), params, pts[0].scale)
    else:
        bias = _stack([ops.encrypt(key_material, p) for p in pts])
    return BlockLayer(kind, layout, (h, v), tuple(grp) if kind is Kind.GATHER else None,
                      tuple(grp) if kind is Kind.SPREAD else None, weights, xi, wi, bias, params, level,
                      float(in_scale), float(np.abs(w).sum(1).max()))


def encode_layer(params: Params, layout: Blocks, w, b=None, *, kind: Kind, groups, level: int,
                 in_scale: float) -> BlockLayer:
    """W (H x V) and b (H,) as plaintext weight blocks for :func:`apply_layer`, once per model: ``groups`` the packed
    output groups (SPREAD) or the packed input groups (GATHER), inputs at ``level`` and ``in_scale``. Identical
    blocks are encoded once; all-zero blocks are skipped."""
    return _block_layer(None, params, layout, w, b, kind=kind, groups=groups, level=level, in_scale=in_scale)


def encrypt_layer(key_material, params: Params, layout: Blocks, w, b=None, *, kind: Kind, groups, level: int,
                  in_scale: float) -> BlockLayer:
    """As :func:`encode_layer`, every distinct weight block and the bias encrypted (the model owner's key material,
    the key the inputs use): :func:`apply_layer` then multiplies ciphertexts and relinearizes once per output."""
    return _block_layer(key_material, params, layout, w, b, kind=kind, groups=groups, level=level,
                        in_scale=in_scale)


def apply_layer(layer: BlockLayer, x, keys: EvaluationKeys | None = None) -> Ciphertext:
    """The layer on a stack (or list) of ``layer.in_count`` ciphertexts at level >= ``layer.level`` and scale
    ``layer.in_scale``: a stack of ``layer.out_count`` at level - 1 and scale ``in_scale``. ``keys``: needed for
    encrypted weights (relinearization) and GATHER (the rotations ``layer.rotations``). Error:
    :func:`layer_error_bound`."""
    x = _inputs(x)
    if _count(x) != layer.in_count:
        raise ParameterError(f"the layer takes {layer.in_count} input ciphertexts, got {_count(x)}")
    x = _check_input(x, layer.params, layer.level, layer.in_scale, "apply_layer")
    q = math.prod(layer.params.rescale_primes(layer.level))
    y = ops.rescale(_products(x, layer.weights, layer.xi, layer.wi, keys, layer.in_scale * q))
    y = dataclasses.replace(y, scale=layer.in_scale)
    if layer.kind is Kind.GATHER and layer.rotations:
        if not isinstance(keys, EvaluationKeys):
            raise ParameterError("a GATHER layer with G > 1 needs evaluation keys with the rotations "
                                 f"{list(layer.rotations)}")
        for r in layer.rotations:
            y = ops.add(y, ops.rotate(y, r, keys))
    return ops.add(y, layer.bias) if isinstance(layer.bias, Ciphertext) else ops.add_plain(y, layer.bias)


def layer_error_bound(layer: BlockLayer, *, x_max: float = 1.0, input_error: float = 0.0) -> float:
    """The module docstring's bound for :func:`apply_layer` (T = ``layer.terms``, c = G for GATHER)."""
    copies = layer.layout.groups if layer.kind is Kind.GATHER else 1
    return _bound(layer.params, layer.level, layer.in_scale, layer.encrypted, terms=layer.terms, copies=copies,
                  row_l1=layer.row_l1, x_max=x_max, input_error=input_error)


__all__ = [
    "BlockLayer",
    "Blocks",
    "EntryConv",
    "Kind",
    "apply_layer",
    "blocks",
    "conv2d_reference",
    "conv_groups",
    "conv_matrix",
    "encode_entry_conv",
    "encode_layer",
    "encrypt_entry_conv",
    "encrypt_layer",
    "entry_conv",
    "entry_conv_error_bound",
    "im2col",
    "layer_error_bound",
    "output_side",
    "pack",
    "unpack",
]
