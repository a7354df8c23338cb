"""Convolutional networks on encrypted images (CKKS): LoLa-MNIST (Brutzkus, Gilad-Bachrach, Elisha, ICML 2019;
CROSS §6 and Alchemist §6.2.2 run it) and TenSEAL's tutorial network, trained in NumPy, run on encrypted 28 x 28
images with plaintext weights.

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
the smallest 128-bit preset with depth 5 (:func:`crossfhe.compiler.ckks.preset_for`: N 2^14, 8192 images per
batch), the images encrypted at level 5. Counts per batch (LoLa): 841 encryptions, 13 convolution-row products
(65 x 145 each), 845 + 100 relinearized squares, the 100 x 846 and 10 x 101 dense products. Why this packing and not
one image per ciphertext (TenSEAL's im2col, LoLa's dense-vector packing): with an image per ciphertext every layer
needs rotations (BSGS key switches: about 2 sqrt(d) per d x d block) for one image; packed across slots the same
work serves 8192 images and no key switch but the squares' relinearizations is left. The price is latency: one
image costs a whole batch's time; per image the batch is far cheaper.

Error: the CKKS error of each layer (:mod:`crossfhe.linalg.simd`) propagated through the network; the squares
double relative errors. Tested: logits within 2^-8 of NumPy's at the insecure test set, the predicted labels equal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from crossfhe.ckks import ops
from crossfhe.ckks.ciphertext import Ciphertext
from crossfhe.ckks.params import Params
from crossfhe.errors import ParameterError
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
    from crossfhe.compiler.ckks import preset_for

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
    h = ops.rescale(ops.mul(h, h, keys))
    h = simd.apply(model.fc1, h)
    h = ops.rescale(ops.mul(h, h, keys))
    return simd.apply(model.fc2, h)


def decrypt_logits(sk, out: Ciphertext, count: int) -> np.ndarray:
    """float64[count, 10]."""
    return np.real(ops.decode(ops.decrypt(sk, out)))[:, :count].T


class CNN:
    """A network (``"lola"`` or ``"tenseal"``) with NumPy in and out:

        net = CNN("lola").fit(x_train, y_train)          # plaintext training
        net.predict(x_test)                               # plaintext inference
        net.encrypted_predict(x_test)                     # keys, encryption, encrypted inference, decryption

    ``encrypted_predict`` packs up to N/2 images per batch (8192 at the chosen N 2^14); ``stats_`` holds the
    seconds of key generation, encryption, inference and decryption of the last call."""

    def __init__(self, architecture: str = "lola", *, params: Params | None = None, progress="auto"):
        if architecture not in ARCHITECTURES:
            raise ParameterError(f"architecture is one of {sorted(ARCHITECTURES)}, got {architecture!r}")
        self.architecture, self.progress = architecture, progress
        self.params = parameters() if params is None else params
        if self.params.user_levels < DEPTH:
            raise ParameterError(f"the network needs {DEPTH} levels; these parameters have {self.params.user_levels}")
        self.weights: Weights | None = None
        self.stats_: dict = {}
        self._encoded = None

    def fit(self, x, y, **train_options) -> CNN:
        self.weights = train(x, y, self.architecture, progress=self.progress, **train_options)
        self._encoded = None
        return self

    def _check(self) -> Weights:
        if self.weights is None:
            raise ParameterError("the network is not trained: call fit (or set weights) first")
        return self.weights

    def logits(self, x) -> np.ndarray:
        return forward(self._check(), x)

    def predict(self, x) -> np.ndarray:
        return self.logits(x).argmax(axis=1)

    def encoded(self) -> EncodedModel:
        if self._encoded is None:
            self._encoded = encode_model(self.params, self._check())
        return self._encoded

    def encrypted_logits(self, x, *, seed: bytes | None = None) -> np.ndarray:
        import time

        model = self.encoded()
        xs = np.asarray(x, dtype=np.float64)
        t0 = time.perf_counter()
        sk, keys = ops.keygen(self.params, seed=seed, progress=self.progress)
        t1 = time.perf_counter()
        progress = progress_callback(self.progress)
        out, enc_s, run_s = [], 0.0, 0.0
        for start in range(0, len(xs), self.params.slots):
            a = time.perf_counter()
            ct, n = encrypt_images(keys, model, xs[start:start + self.params.slots])
            b = time.perf_counter()
            res = infer(model, ct, keys)
            res.c0.data.block_until_ready()
            c = time.perf_counter()
            out.append(decrypt_logits(sk, res, n))
            enc_s, run_s = enc_s + b - a, run_s + c - b
            report(progress, min(len(xs), start + self.params.slots), len(xs), "encrypted inference")
        self.stats_ = {"keygen_s": t1 - t0, "encrypt_s": enc_s, "infer_s": run_s,
                       "images": len(xs), "batch": self.params.slots}
        return np.concatenate(out)

    def encrypted_predict(self, x, *, seed: bytes | None = None) -> np.ndarray:
        return self.encrypted_logits(x, seed=seed).argmax(axis=1)


__all__ = ["ARCHITECTURES", "CNN", "DEPTH", "EncodedModel", "Weights", "decrypt_logits", "encode_model",
           "encrypt_images", "forward", "infer", "parameters", "train"]
