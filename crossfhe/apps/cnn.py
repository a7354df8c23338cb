"""Convolutional networks on encrypted images (CKKS): LoLa-MNIST (Brutzkus, Gilad-Bachrach, Elisha, ICML 2019;
CROSS §6 and Alchemist §6.2.2 run it) and TenSEAL's tutorial network, trained in NumPy, run on encrypted 28 x 28
images with plaintext weights or with encrypted weights.

Networks (square activations; flatten order map-major (map, row, col)):

* ``"lola"``: the image padded with one zero row and column (bottom, right) to 29 x 29, convolution 5 x 5 stride 2
  with 5 maps (5 x 13 x 13 = 845), square, dense 845 -> 100, square, dense 100 -> 10.
* ``"tenseal"``: convolution 7 x 7 stride 3 with 4 kernels (4 x 8 x 8 = 256), square, dense 256 -> 64, square,
  dense 64 -> 10.

**Encrypted inference** (:func:`encode_model`, :func:`encrypt_images`, :func:`infer`): images packed across the
slots, one ciphertext per pixel holding that pixel of up to N/2 images (:mod:`crossfhe.linalg.simd`). Every
layer is then a plaintext matrix times a stack of ciphertexts, the same modular product in every slot: no rotation
and no Galois key; the convolution and the dense layers are CROSS-style int8 BAT matrix products, the squares one
relinearized product per ciphertext. Five levels: convolution, square, dense, square, dense, so the parameters are
the smallest 128-bit preset with depth 5 (:func:`crossfhe.api.ckks_lower.preset_for`: N 2^14, 8192 images per
batch), the images encrypted at level 5. Counts per batch (LoLa): 841 encryptions, 13 convolution-row products
(65 x 145 each), 845 + 100 relinearized squares, the 100 x 846 and 10 x 101 dense products. Why this packing and not
one image per ciphertext (TenSEAL's im2col, LoLa's dense-vector packing): with an image per ciphertext every layer
needs rotations (BSGS key switches: about 2 sqrt(d) per d x d block) for one image; packed across slots the same
work serves 8192 images and no key switch but the squares' relinearizations is left. The price is latency: one
image costs a whole batch's time; per image the batch is far cheaper.

**The other layouts** (:class:`EncryptedCNN`, ``CNN.encrypted(weights, batch)``; :mod:`crossfhe.linalg.conv`):
``batch=1``, one image per ciphertext (kernel-entry im2col, then BSGS products: latency), with plaintext weights or
encrypted ones (:func:`crossfhe.linalg.ckks.enc_enc_matvec_bsgs`); and, for encrypted weights over many images, the
images in G blocks of the slots so that one weight ciphertext serves a block of features (with G = 1 LoLa's dense
layer alone would need 84,500 weight ciphertexts, 66 GB at N 2^14).

Error: the CKKS error of each layer (:mod:`crossfhe.linalg.simd`) propagated through the network; the squares
double relative errors. Tested: logits within 2^-8 of NumPy's at the insecure test set, the predicted labels equal.
"""

from __future__ import annotations

import enum
import math
import time
from dataclasses import dataclass
from functools import partial

import jax
import numpy as np

from crossfhe.ckks import ops
from crossfhe.ckks.ciphertext import Ciphertext
from crossfhe.ckks.params import Params
from crossfhe.errors import ParameterError
from crossfhe.linalg import ckks as la
from crossfhe.linalg import conv as conv_la
from crossfhe.linalg import simd
from crossfhe.progress import callback as progress_callback
from crossfhe.progress import report

SIDE = 28

ARCHITECTURES = {
    "lola": {"pad": 1, "maps": 5, "k": 5, "stride": 2, "hidden": 100},
    "tenseal": {"pad": 0, "maps": 4, "k": 7, "stride": 3, "hidden": 64},
}
"""The two networks: zero rows/cols added at the bottom/right, maps, kernel side, stride, hidden width."""

DEPTH = 5
"""Levels of one inference: convolution, square, dense, square, dense."""


@dataclass
class Weights:
    """conv_w [maps, k, k], conv_b [maps], fc1_w [hidden, maps out^2], fc1_b, fc2_w [10, hidden], fc2_b; stride, pad."""

    conv_w: np.ndarray
    conv_b: np.ndarray
    fc1_w: np.ndarray
    fc1_b: np.ndarray
    fc2_w: np.ndarray
    fc2_b: np.ndarray
    stride: int
    pad: int

    @property
    def side(self) -> int:
        return SIDE + self.pad

    @property
    def out(self) -> int:
        return simd.conv_output_side(self.side, self.conv_w.shape[1], self.stride)

    def arrays(self) -> dict:
        return {"conv_w": self.conv_w, "conv_b": self.conv_b, "fc1_w": self.fc1_w, "fc1_b": self.fc1_b,
                "fc2_w": self.fc2_w, "fc2_b": self.fc2_b, "stride": np.int64(self.stride), "pad": np.int64(self.pad)}

    def save_npz(self, path) -> None:
        """The weights with the keys of :meth:`arrays` (TenSEAL's peer in benchmarks/ reads the same file)."""
        np.savez(path, **self.arrays())

    @classmethod
    def load_npz(cls, path) -> Weights:
        with np.load(path) as f:
            missing = {"conv_w", "conv_b", "fc1_w", "fc1_b", "fc2_w", "fc2_b", "stride", "pad"} - set(f.files)
            if missing:
                raise ParameterError(f"{path}: not a CNN weights file (missing {sorted(missing)})")
            return cls(*(np.asarray(f[k], dtype=np.float64) for k in ("conv_w", "conv_b", "fc1_w", "fc1_b", "fc2_w",
                                                                       "fc2_b")), int(f["stride"]), int(f["pad"]))


def _images(x, pad: int) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 2 and x.shape[1] == SIDE * SIDE:
        x = x.reshape(-1, SIDE, SIDE)
    if x.ndim != 3 or x.shape[1:] != (SIDE, SIDE):
        raise ParameterError(f"images must be [n, 28, 28] (or [n, 784]), got shape {x.shape}")
    if not np.isfinite(x).all() or x.min() < 0 or x.max() > 1:
        raise ParameterError("pixel values must lie in [0, 1]")
    return np.pad(x, ((0, 0), (0, pad), (0, pad)))


def _windows(x: np.ndarray, k: int, stride: int) -> np.ndarray:
    """im2col: [n, out^2, k^2] windows of padded images [n, side, side], row-major."""
    side = x.shape[1]
    out = (side - k) // stride + 1
    idx = (np.arange(out)[:, None] * stride + np.arange(k)[None, :])  # [out, k]
    rows = idx[:, None, :, None]
    cols = idx[None, :, None, :]
    w = x[:, rows, cols]  # [n, out, out, k, k]
    return w.reshape(len(x), out * out, k * k)


def forward(weights: Weights, x) -> np.ndarray:
    """Plaintext inference: logits float64[n, 10]."""
    xs = _images(x, weights.pad)
    m, k = weights.conv_w.shape[0], weights.conv_w.shape[1]
    a1 = _windows(xs, k, weights.stride) @ weights.conv_w.reshape(m, k * k).T + weights.conv_b  # [n, P, M]
    h1 = a1.transpose(0, 2, 1).reshape(len(xs), -1) ** 2
    h2 = (h1 @ weights.fc1_w.T + weights.fc1_b) ** 2
    return h2 @ weights.fc2_w.T + weights.fc2_b


def train(x, y, architecture: str = "lola", *, epochs: int = 30, batch: int = 64, lr: float = 2e-3, seed: int = 0,
          progress=None) -> Weights:
    """Mini-batch Adam on softmax cross-entropy (NumPy, deterministic for a seed). Square activations grow fast,
    so the initialization is small (uniform, scale 1 / fan_in) and gradients are clipped to norm 5."""
    if architecture not in ARCHITECTURES:
        raise ParameterError(f"architecture is one of {sorted(ARCHITECTURES)}, got {architecture!r}")
    a = ARCHITECTURES[architecture]
    xs = _images(x, a["pad"])
    y = np.asarray(y, dtype=np.int64)
    if y.shape != (len(xs),) or y.min() < 0 or y.max() > 9:
        raise ParameterError("labels must be digits 0..9, one per image")
    progress = progress_callback(progress)
    rng = np.random.default_rng(seed)
    m, k, hid = a["maps"], a["k"], a["hidden"]
    cols = _windows(xs, k, a["stride"])  # [n, P, k^2]
    p = cols.shape[1]

    def init(*shape, fan):
        return rng.uniform(-1, 1, size=shape) / fan

    params = {"cw": init(m, k * k, fan=k * k / 2), "cb": np.zeros(m), "w1": init(hid, m * p, fan=m * p / 4),
              "b1": np.zeros(hid), "w2": init(10, hid, fan=hid / 2), "b2": np.zeros(10)}
    mom = {n: np.zeros_like(v) for n, v in params.items()}
    vel = {n: np.zeros_like(v) for n, v in params.items()}
    step = 0
    onehot = np.eye(10)[y]
    for epoch in range(epochs):
        order = rng.permutation(len(xs))
        for s in range(0, len(xs), batch):
            i = order[s:s + batch]
            c = cols[i]
            a1 = c @ params["cw"].T + params["cb"]  # [b, P, M]
            h1f = a1.transpose(0, 2, 1).reshape(len(i), -1)
            s1 = h1f**2
            z2 = s1 @ params["w1"].T + params["b1"]
            s2 = z2**2
            z3 = s2 @ params["w2"].T + params["b2"]
            e = np.exp(z3 - z3.max(axis=1, keepdims=True))
            d3 = (e / e.sum(axis=1, keepdims=True) - onehot[i]) / len(i)
            g = {"w2": d3.T @ s2, "b2": d3.sum(0)}
            d2 = (d3 @ params["w2"]) * 2 * z2
            g["w1"], g["b1"] = d2.T @ s1, d2.sum(0)
            d1 = ((d2 @ params["w1"]) * 2 * h1f).reshape(len(i), m, p).transpose(0, 2, 1)  # [b, P, M]
            g["cw"] = np.einsum("bpm,bpe->me", d1, c)
            g["cb"] = d1.sum((0, 1))
            norm = math.sqrt(sum(float((v**2).sum()) for v in g.values()))
            if norm > 5.0:
                g = {n: v * (5.0 / norm) for n, v in g.items()}
            step += 1
            for n in params:
                mom[n] = 0.9 * mom[n] + 0.1 * g[n]
                vel[n] = 0.999 * vel[n] + 0.001 * g[n] ** 2
                params[n] -= lr * (mom[n] / (1 - 0.9**step)) / (np.sqrt(vel[n] / (1 - 0.999**step)) + 1e-8)
        report(progress, epoch + 1, epochs, f"training {architecture}")
    return Weights(params["cw"].reshape(m, k, k), params["cb"], params["w1"], params["b1"], params["w2"], params["b2"],
                   a["stride"], a["pad"])


# --------------------------------------------------------------------------------------------------
# Encrypted inference
# --------------------------------------------------------------------------------------------------


def parameters() -> Params:
    """The smallest 128-bit preset with the network's depth (the circuit layer's selection)."""
    from crossfhe.api.ckks_lower import preset_for

    return preset_for(DEPTH)


@dataclass(frozen=True, eq=False)
class EncodedModel:
    """The layers of :class:`Weights` expanded once for :func:`infer` at ``params``, inputs at ``level`` (>= 5)."""

    conv: simd.EncodedConv
    fc1: simd.EncodedLayer
    fc2: simd.EncodedLayer
    weights: Weights
    params: Params
    level: int


def encode_model(params: Params, weights: Weights, *, level: int | None = None) -> EncodedModel:
    """Expand every layer once (per model and parameter set): inputs at ``level`` (default :data:`DEPTH`) and scale
    Delta; the scales after each layer follow exactly (each product's rescale returns it)."""
    level = DEPTH if level is None else int(level)
    if level < DEPTH or level > params.user_levels:
        raise ParameterError(f"inference needs {DEPTH} levels: encrypt at a level in [{DEPTH}, {params.user_levels}],"
                             f" got {level}")
    s = params.scale
    conv = simd.encode_conv(params, weights.conv_w, weights.conv_b, side=weights.side, stride=weights.stride,
                            level=level, in_scale=s)
    # the square after each layer: scale s^2 / q, its primes known in advance
    s1 = s * s / math.prod(params.rescale_primes(level - 1))
    fc1 = simd.encode_layer(params, weights.fc1_w, weights.fc1_b, level=level - 2, in_scale=s1)
    s2 = s1 * s1 / math.prod(params.rescale_primes(level - 3))
    fc2 = simd.encode_layer(params, weights.fc2_w, weights.fc2_b, level=level - 4, in_scale=s2)
    return EncodedModel(conv, fc1, fc2, weights, params, level)


def encrypt_images(key_material, model: EncodedModel, x) -> tuple[Ciphertext, int]:
    """(stack of side^2 pixel ciphertexts, image count): pixel j of image i in slot i of ciphertext j, at the
    model's input level. At most N/2 images per call."""
    xs = _images(x, model.weights.pad)
    n, params = len(xs), model.params
    if n > params.slots:
        raise ParameterError(f"at most {params.slots} images per batch at N = {params.n}, got {n}")
    flat = np.zeros((xs.shape[1] * xs.shape[2], params.slots))
    flat[:, :n] = xs.reshape(n, -1).T
    cts = [ops.encrypt(key_material, ops.encode(params, row, level=model.level)) for row in flat]
    return simd.stack(cts), n


def infer(model: EncodedModel, x: Ciphertext, keys) -> Ciphertext:
    """Logits of every packed image: a stack of 10 ciphertexts (class j of image i in slot i of ciphertext j)."""
    if simd.count(x) != model.weights.side**2:
        raise ParameterError(f"expected {model.weights.side ** 2} pixel ciphertexts, got {simd.count(x)}")
    h = simd.conv2d(model.conv, x)
    h = ops.mul_rescale(h, h, keys)
    h = simd.apply(model.fc1, h)
    h = ops.mul_rescale(h, h, keys)
    return simd.apply(model.fc2, h)


def decrypt_logits(sk, out: Ciphertext, count: int) -> np.ndarray:
    """float64[count, 10]."""
    return np.real(ops.decode(ops.decrypt(sk, out)))[:, :count].T


# --------------------------------------------------------------------------------------------------
# The other layouts: one image (kernel-entry-major im2col) and encrypted weights
# --------------------------------------------------------------------------------------------------


class Weighting(enum.Enum):
    """Who holds the weights: PLAIN (the server's plaintext model) or ENCRYPTED (the model owner encrypted them under
    the key the images use; every product is a ciphertext product)."""

    PLAIN = "plain"
    ENCRYPTED = "encrypted"


def _scales(params: Params, level: int) -> tuple[float, float]:
    """The scales after the first and the second square (inputs at Delta and ``level``)."""
    s1 = params.scale**2 / math.prod(params.rescale_primes(level - 1))
    return s1, s1 * s1 / math.prod(params.rescale_primes(level - 3))


def _block_size(weights: Weights) -> int:
    size = weights.conv_w.shape[0] * weights.out**2
    return 1 << (size - 1).bit_length()


@dataclass(frozen=True, eq=False)
class SingleModel:
    """The layers for one image per ciphertext (:mod:`crossfhe.linalg.conv` entry-major convolution, then
    :mod:`crossfhe.linalg.ckks` products in the replicated layout of block ``block``), plaintext or encrypted."""

    conv: conv_la.EntryConv
    fc1: object
    fc1_b: object
    fc2: object
    fc2_b: object
    weights: Weights
    params: Params
    level: int
    block: int
    rotations: tuple[int, ...]

    @property
    def encrypted(self) -> bool:
        return self.conv.encrypted


def single_rotations(params: Params, weights: Weights) -> tuple[int, ...]:
    """The rotations :func:`infer_single` needs with plaintext weights (the BSGS steps of both dense layers) and with
    encrypted ones (the baby and giant steps of :func:`crossfhe.linalg.ckks.enc_enc_matvec_bsgs`): keys for all of
    them serve both."""
    d = _block_size(weights)
    rots: set = set()
    for m, n in (weights.fc1_w.shape, weights.fc2_w.shape):
        rots |= set(la.required_rotations(params, m, n, block=d))
        b = _baby(m, n, d)
        offsets = la._offsets(m, n, d)
        rots |= {k % b for k in offsets if k % b} | {(k // b) * b for k in offsets if k // b}
    return tuple(sorted(rots))


def _baby(m: int, n: int, d: int) -> int:
    """The baby step of an encrypted m x n matrix in block d: the power of two nearest sqrt(T), T its diagonals."""
    return 1 << max(0, round(math.log2(math.sqrt(len(la._offsets(m, n, d))))))


def _vector(params: Params, v, d: int, *, level: int, scale: float, key_material=None):
    x = np.zeros(d)
    x[:len(v)] = v
    pt = ops.encode(params, x, level=level, scale=scale)
    return pt if key_material is None else ops.encrypt(key_material, pt)


def encode_single(params: Params, weights: Weights, *, level: int | None = None, key_material=None) -> SingleModel:
    """The network for :func:`infer_single`: plaintext weights (``key_material`` None: encoded once per model) or
    encrypted with ``key_material`` (the model owner's, under the images' key). Inputs at ``level`` (default
    :data:`DEPTH`) and scale Delta; block d = the power of two >= M out^2 (1024 for LoLa, 256 for TenSEAL's)."""
    level = _input_level(params, level)
    d = _block_size(weights)
    s0 = params.scale
    s1, s2 = _scales(params, level)
    conv = conv_la._entry_conv(key_material, params, weights.conv_w, weights.conv_b, side=weights.side,
                               stride=weights.stride, level=level, in_scale=s0, block=d)
    if key_material is None:
        fc1 = la.encode_matrix(params, weights.fc1_w, level=level - 2, scale=s1, block=d)
        fc2 = la.encode_matrix(params, weights.fc2_w, level=level - 4, scale=s2, block=d)
    else:
        q1 = math.prod(params.rescale_primes(level - 2))
        q2 = math.prod(params.rescale_primes(level - 4))
        fc1 = la.encrypt_matrix_bsgs(key_material, params, weights.fc1_w, level=level - 2, scale=q1, block=d,
                                     baby=_baby(*weights.fc1_w.shape, d))
        fc2 = la.encrypt_matrix_bsgs(key_material, params, weights.fc2_w, level=level - 4, scale=q2, block=d,
                                     baby=_baby(*weights.fc2_w.shape, d))
    b1 = _vector(params, weights.fc1_b, d, level=level - 3, scale=s1, key_material=key_material)
    b2 = _vector(params, weights.fc2_b, d, level=level - 5, scale=s2, key_material=key_material)
    return SingleModel(conv, fc1, b1, fc2, b2, weights, params, level, d, single_rotations(params, weights))


def encrypt_single(key_material, model: SingleModel, image) -> Ciphertext:
    """One image as its k^2 im2col entry ciphertexts (:func:`crossfhe.linalg.conv.im2col`), a stack at the model's
    input level."""
    xs = _images(image, model.weights.pad)
    if len(xs) != 1:
        raise ParameterError(f"encrypt_single takes one image, got {len(xs)}")
    w = model.weights
    rows = conv_la.im2col(xs, k=w.conv_w.shape[1], stride=w.stride, maps=w.conv_w.shape[0], block=model.block)[0]
    return simd.stack([ops.encrypt(key_material, ops.encode(model.params, r, level=model.level)) for r in rows])


def _add(y: Ciphertext, b) -> Ciphertext:
    return ops.add(y, b) if isinstance(b, Ciphertext) else ops.add_plain(y, b)


def infer_single(model: SingleModel, x: Ciphertext, keys) -> Ciphertext:
    """The logits of one image: one ciphertext, class j in slot j (replicated with period ``model.block``).
    Plaintext weights: 2 dense BSGS products (:func:`crossfhe.linalg.ckks.matvec`); encrypted: the encrypted,
    pre-rotated diagonals times the encrypted activations (:func:`crossfhe.linalg.ckks.enc_enc_matvec_bsgs`)."""
    h = conv_la.entry_conv(model.conv, x, keys)
    h = ops.mul_rescale(h, h, keys)
    h = la.enc_enc_matvec_bsgs(model.fc1, h, keys) if model.encrypted else la.matvec(model.fc1, h, keys)[0]
    h = _add(h, model.fc1_b)
    h = ops.mul_rescale(h, h, keys)
    h = la.enc_enc_matvec_bsgs(model.fc2, h, keys) if model.encrypted else la.matvec(model.fc2, h, keys)[0]
    return _add(h, model.fc2_b)


@dataclass(frozen=True, eq=False)
class BlockModel:
    """The network on images across slots in G blocks (:mod:`crossfhe.linalg.conv`): convolution SPREAD (one output
    row per packed ciphertext), dense 1 GATHER, dense 2 SPREAD (class j in block j); encrypted or plaintext
    weights."""

    layout: conv_la.Blocks
    conv: conv_la.BlockLayer
    fc1: conv_la.BlockLayer
    fc2: conv_la.BlockLayer
    weights: Weights
    params: Params
    level: int

    @property
    def rotations(self) -> tuple[int, ...]:
        return self.layout.rotations


def block_layout(params: Params, weights: Weights) -> conv_la.Blocks:
    """G = the power of two >= M out (one convolution output row per block set; 128 for LoLa, 32 for TenSEAL's),
    B = N / (2G) images per ciphertext."""
    g = 1 << (weights.conv_w.shape[0] * weights.out - 1).bit_length()
    if g > params.slots:
        raise ParameterError(f"a convolution row needs {g} blocks, N/2 = {params.slots}")
    return conv_la.blocks(params, groups=g)


def encode_blocks(params: Params, weights: Weights, *, level: int | None = None, key_material=None) -> BlockModel:
    """The network for :func:`infer_blocks`, weights encoded (``key_material`` None) or encrypted once per model."""
    level = _input_level(params, level)
    layout = block_layout(params, weights)
    m, out = weights.conv_w.shape[0], weights.out
    groups = conv_la.conv_groups(m, out)
    s1, s2 = _scales(params, level)
    a = conv_la.conv_matrix(weights.conv_w, side=weights.side, stride=weights.stride)
    spread, gather = conv_la.Kind.SPREAD, conv_la.Kind.GATHER
    make = conv_la.encode_layer if key_material is None else partial(conv_la.encrypt_layer, key_material)
    c = make(params, layout, a, np.repeat(weights.conv_b, out * out), kind=spread, groups=groups, level=level,
             in_scale=params.scale)
    f1 = make(params, layout, weights.fc1_w, weights.fc1_b, kind=gather, groups=groups, level=level - 2, in_scale=s1)
    f2 = make(params, layout, weights.fc2_w, weights.fc2_b, kind=spread, groups=[np.arange(10)], level=level - 4,
              in_scale=s2)
    return BlockModel(layout, c, f1, f2, weights, params, level)


def encrypt_blocks(key_material, model: BlockModel, x) -> tuple[Ciphertext, int]:
    """(stack of side^2 pixel ciphertexts, image count): pixel v of image t in slot g B + t of ciphertext v, every
    block g (replicated). At most B images."""
    xs = _images(x, model.weights.pad)
    rows = conv_la.pack(model.layout, xs.reshape(len(xs), -1))
    cts = [ops.encrypt(key_material, ops.encode(model.params, r, level=model.level)) for r in rows]
    return simd.stack(cts), len(xs)


def infer_blocks(model: BlockModel, x: Ciphertext, keys) -> Ciphertext:
    """The logits of the packed images: one ciphertext, class j of image t in slot j B + t."""
    h = conv_la.apply_layer(model.conv, x, keys)
    h = ops.mul_rescale(h, h, keys)
    h = conv_la.apply_layer(model.fc1, h, keys)
    h = ops.mul_rescale(h, h, keys)
    return conv_la.apply_layer(model.fc2, h, keys)


def _input_level(params: Params, level) -> int:
    level = DEPTH if level is None else int(level)
    if level < DEPTH or level > params.user_levels:
        raise ParameterError(f"inference needs {DEPTH} levels: encrypt at a level in [{DEPTH}, {params.user_levels}],"
                             f" got {level}")
    return level


# --------------------------------------------------------------------------------------------------
# The user-facing classes
# --------------------------------------------------------------------------------------------------


@dataclass
class EncryptedBatch:
    """Encrypted images (or results): one entry per run (a stack of ciphertexts) with its image count."""

    parts: list
    counts: list

    @property
    def images(self) -> int:
        return sum(self.counts)


class EncryptedCNN:
    """Encrypted inference of a trained :class:`CNN` (made by :meth:`CNN.encrypted`):

        enc = net.encrypted(weights="plain", batch=None)     # or weights="encrypted", batch=1
        enc.keygen()                                         # keys (and, for encrypted weights, the weights encrypted)
        out = enc.run(enc.encrypt(images))
        logits = enc.decrypt(out)                            # float64[n, 10]
        enc.predict(images)                                  # all of it: labels

    Layouts (:mod:`crossfhe.linalg.conv`): ``batch=1``: one image per ciphertext (entry-major im2col, BSGS dense
    layers; the latency path). Otherwise images across slots: with plaintext weights N/2 per run (one ciphertext per
    pixel, :mod:`crossfhe.linalg.simd`), with encrypted weights B = N/(2G) per run (G blocks, 64 images for LoLa at N
    2^14, 256 for TenSEAL's). ``batch`` caps the images per run. ``stats_``: seconds of the last :meth:`predict`."""

    def __init__(self, net: CNN, weights="plain", batch: int | None = None, *, level: int | None = None):
        self.net, self.params = net, net.params
        self.weighting = Weighting(weights) if not isinstance(weights, Weighting) else weights
        self.single = batch == 1
        self.level = _input_level(self.params, level)
        w = net._check()
        if self.single:
            cap = 1
        elif self.weighting is Weighting.PLAIN:
            cap = self.params.slots
        else:
            cap = block_layout(self.params, w).batch
        if batch is not None and (int(batch) < 1):
            raise ParameterError(f"batch must be a positive number of images, got {batch}")
        self.capacity = cap if batch is None else min(cap, int(batch))
        self.sk = self.keys = self.model = None
        self.stats_: dict = {}
        self._plain = None
        if self.weighting is Weighting.PLAIN:  # plaintext weights are encoded once, before any key exists
            self._plain = self._encode(None)

    def _encode(self, key_material):
        w = self.net._check()
        if self.single:
            return encode_single(self.params, w, level=self.level, key_material=key_material)
        if self.weighting is Weighting.PLAIN:
            return encode_model(self.params, w, level=self.level)
        return encode_blocks(self.params, w, level=self.level, key_material=key_material)

    def rotations(self) -> tuple[int, ...]:
        w = self.net._check()
        if self.single:
            return single_rotations(self.params, w)
        if self.weighting is Weighting.PLAIN:
            return ()
        return block_layout(self.params, w).rotations

    def keygen(self, *, seed: bytes | None = None):
        """Make the key pair and evaluation keys (relinearization and this layout's rotations) and, for encrypted
        weights, encrypt the model with the public key (the model owner's step). Returns (sk, keys)."""
        progress = self.net.progress
        self.sk, self.keys = ops.keygen(self.params, rotations=self.rotations(), seed=seed, progress=progress)
        if self.weighting is Weighting.ENCRYPTED:
            self.model = self._encode(self.keys)
        else:
            self.model = self._plain
        return self.sk, self.keys

    def _ready(self):
        if self.keys is None:
            raise ParameterError("no keys yet: call keygen() first")

    def encrypt(self, images) -> EncryptedBatch:
        """The images (n x 28 x 28 in [0, 1]) encrypted in runs of at most :attr:`capacity`."""
        self._ready()
        xs = np.asarray(images, dtype=np.float64)
        _images(xs, 0)
        if xs.ndim == 2 and xs.shape[1] != SIDE * SIDE:
            xs = xs[None]
        parts, counts = [], []
        for start in range(0, len(xs), self.capacity):
            chunk = xs[start:start + self.capacity]
            if self.single:
                parts.append(encrypt_single(self.keys, self.model, chunk))
                counts.append(1)
            elif self.weighting is Weighting.PLAIN:
                ct, n = encrypt_images(self.keys, self.model, chunk)
                parts.append(ct)
                counts.append(n)
            else:
                ct, n = encrypt_blocks(self.keys, self.model, chunk)
                parts.append(ct)
                counts.append(n)
        return EncryptedBatch(parts, counts)

    def run(self, batch: EncryptedBatch, *, keys=None) -> EncryptedBatch:
        """The encrypted logits of every run (the server's step: no secret key)."""
        self._ready()
        keys = self.keys if keys is None else keys
        progress = progress_callback(self.net.progress)
        if self.single:
            fn = infer_single
        elif self.weighting is Weighting.PLAIN:
            fn = infer
        else:
            fn = infer_blocks
        outs = []
        for i, ct in enumerate(batch.parts):
            outs.append(fn(self.model, ct, keys))
            report(progress, i + 1, len(batch.parts), "encrypted inference")
        return EncryptedBatch(outs, list(batch.counts))

    def decrypt(self, out: EncryptedBatch, *, sk=None) -> np.ndarray:
        """float64[n, 10] logits."""
        self._ready()
        sk = self.sk if sk is None else sk
        res = []
        for ct, n in zip(out.parts, out.counts):
            if self.single:
                res.append(np.real(ops.decode(ops.decrypt(sk, ct)))[None, :10])
            elif self.weighting is Weighting.PLAIN:
                res.append(decrypt_logits(sk, ct, n))
            else:
                vals = ops.decode(ops.decrypt(sk, ct))[None]
                res.append(conv_la.unpack(self.model.layout, vals, n, [np.arange(10)], features=10))
        return np.concatenate(res)

    def logits(self, images, *, seed: bytes | None = None) -> np.ndarray:
        """Keys (if none yet), encryption, inference and decryption; the seconds of each stage in ``stats_``."""
        t0 = time.perf_counter()
        if self.keys is None:
            self.keygen(seed=seed)
        t1 = time.perf_counter()
        ct = self.encrypt(images)
        jax.block_until_ready([p.c1.data for p in ct.parts])
        t2 = time.perf_counter()
        out = self.run(ct)
        jax.block_until_ready([p.c1.data for p in out.parts])
        t3 = time.perf_counter()
        res = self.decrypt(out)
        t4 = time.perf_counter()
        self.stats_ = {"keygen_s": t1 - t0, "encrypt_s": t2 - t1, "infer_s": t3 - t2, "decrypt_s": t4 - t3,
                       "images": len(res), "runs": len(ct.parts), "capacity": self.capacity}
        return res

    def predict(self, images, *, seed: bytes | None = None) -> np.ndarray:
        return self.logits(images, seed=seed).argmax(axis=1)


class CNN:
    """A network (``"lola"`` or ``"tenseal"``) with NumPy in and out:

        net = CNN("lola").fit(x_train, y_train)          # plaintext training (seeded Adam)
        net.predict(x_test)                               # plaintext inference (the reference)
        net.encrypted(weights="plain").predict(x_test)    # keys, encryption, encrypted inference, decryption
        net.save_npz("w.npz"); CNN.load_npz("w.npz")

    The parameters default to :func:`parameters` (the smallest 128-bit preset with the network's depth 5, every
    layout: N 2^14). ``encrypted_predict`` is ``encrypted(weights="plain").predict`` (images across slots, N/2 per
    run). ``ranges_``: after :meth:`fit`, the largest |value| on the training images before each square and of the
    logits (trained here: about 2.4, 15 and 92; CKKS holds |x| Delta below the level's modulus, 2^30 at the last
    level, so the bound that matters is precision: errors grow with these magnitudes, see tests/test_cnn.py)."""

    def __init__(self, architecture: str = "lola", *, params: Params | None = None, progress="auto"):
        if architecture not in ARCHITECTURES:
            raise ParameterError(f"architecture is one of {sorted(ARCHITECTURES)}, got {architecture!r}")
        self.architecture, self.progress = architecture, progress
        self.params = parameters() if params is None else params
        if self.params.user_levels < DEPTH:
            raise ParameterError(f"the network needs {DEPTH} levels; these parameters have {self.params.user_levels}")
        self.weights: Weights | None = None
        self.stats_: dict = {}
        self.ranges_: dict = {}
        self._encoded = None

    def fit(self, x, y, **train_options) -> CNN:
        self.weights = train(x, y, self.architecture, progress=self.progress, **train_options)
        self._encoded = None
        self.ranges_ = ranges(self.weights, x)
        return self

    def _check(self) -> Weights:
        if self.weights is None:
            raise ParameterError("the network is not trained: call fit (or load_npz) first")
        return self.weights

    def save_npz(self, path) -> None:
        """The weights (:meth:`Weights.save_npz`: conv_w, conv_b, stride, pad, fc1_w, fc1_b, fc2_w, fc2_b)."""
        self._check().save_npz(path)

    @classmethod
    def load_npz(cls, path, *, params: Params | None = None, progress="auto") -> CNN:
        """A network from :meth:`save_npz`'s file; the architecture is read from its shapes."""
        w = Weights.load_npz(path)
        for name, a in ARCHITECTURES.items():
            if (w.conv_w.shape[:2], w.stride, w.pad, w.fc1_w.shape[0]) == ((a["maps"], a["k"]), a["stride"], a["pad"],
                                                                            a["hidden"]):
                net = cls(name, params=params, progress=progress)
                net.weights = w
                return net
        raise ParameterError(f"{path}: the weights match neither architecture ({sorted(ARCHITECTURES)})")

    def logits(self, x) -> np.ndarray:
        return forward(self._check(), x)

    def predict(self, x) -> np.ndarray:
        return self.logits(x).argmax(axis=1)

    def encoded(self) -> EncodedModel:
        if self._encoded is None:
            self._encoded = encode_model(self.params, self._check())
        return self._encoded

    def encrypted(self, weights="plain", batch: int | None = None, *, level: int | None = None) -> EncryptedCNN:
        """An :class:`EncryptedCNN`: ``weights`` "plain" or "encrypted", ``batch`` 1 (one image per ciphertext) or
        None / the most images per run (images across slots)."""
        return EncryptedCNN(self, weights, batch, level=level)

    def encrypted_logits(self, x, *, seed: bytes | None = None) -> np.ndarray:
        enc = self.encrypted("plain")
        out = enc.logits(x, seed=seed)
        self.stats_ = dict(enc.stats_, batch=self.params.slots)
        return out

    def encrypted_predict(self, x, *, weights: str = "plain", seed: bytes | None = None) -> np.ndarray:
        """Labels of encrypted images: ``weights="plain"`` (images packed across the slots, N/2 per run) or
        ``"encrypted"`` (the weights encrypted too: the blocked layout, fewer images per run)."""
        if weights == "plain":
            return self.encrypted_logits(x, seed=seed).argmax(axis=1)
        if weights == "encrypted":
            enc = self.encrypted("encrypted")
            out = enc.predict(x, seed=seed)
            self.stats_ = dict(enc.stats_)
            return out
        raise ParameterError(f"weights is 'plain' or 'encrypted', got {weights!r}")


def ranges(weights: Weights, x) -> dict:
    """The largest |value| over the images ``x`` before the first square, before the second, and of the logits."""
    xs = _images(x, weights.pad)
    m, k = weights.conv_w.shape[0], weights.conv_w.shape[1]
    a1 = _windows(xs, k, weights.stride) @ weights.conv_w.reshape(m, k * k).T + weights.conv_b
    h1 = a1.transpose(0, 2, 1).reshape(len(xs), -1) ** 2
    z2 = h1 @ weights.fc1_w.T + weights.fc1_b
    z3 = z2**2 @ weights.fc2_w.T + weights.fc2_b
    return {"conv": float(np.abs(a1).max()), "fc1": float(np.abs(z2).max()), "logits": float(np.abs(z3).max())}


__all__ = ["ARCHITECTURES", "CNN", "DEPTH", "BlockModel", "EncodedModel", "EncryptedBatch", "EncryptedCNN",
           "SingleModel", "Weighting", "Weights", "block_layout",
           "decrypt_logits", "encode_blocks", "encode_model", "encode_single", "encrypt_blocks",
           "encrypt_images", "encrypt_single", "forward", "infer", "infer_blocks",
           "infer_single", "parameters", "ranges", "single_rotations", "train"]
