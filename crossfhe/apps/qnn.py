"""Quantized neural networks on encrypted 28 x 28 digits (Taurus §VI: CNN workloads), as TFHE circuits
(:mod:`crossfhe.apps.tfhe_ml`): a multilayer perceptron (:class:`QuantizedMLP`) and a one-convolution network
(:class:`QuantizedCNN`), each hidden activation one lookup that applies ReLU and requantizes.

Encoding. Pixels x in [0, 1] (:func:`crossfhe.apps.datasets.digits` with ``side=28``: 8 x 8 digits resized) are
quantized to ``input_bits`` bits, q = min(floor(x 2^b), 2^b - 1) (:func:`~crossfhe.apps.tfhe_ml.quantize_unit`);
the client encrypts all 784 pixels, one ``TFHEInt(input_bits)`` each. The float model is trained on q / (2^b - 1).

Quantization (post-training, per neuron). A dense layer (a convolution is one, with shared weights: its matrix
has the kernel at each window) maps integers a_i in [0, A] standing for a_i s_a to z_j = s_a sum_i W_ji a_i + b_j.
Neuron j gets integer weights w_ji = round(W_ji / s_j) with the smallest scale s_j such that |w| <= ``weight_max``,
the accumulator's width A sum_i |w_ji| <= 2^p - 1 and its noise sum_i w_ji^2 (the inputs are fresh encryptions
or bootstrap outputs, noise 1 each) within the budget. The circuit computes acc_j = sum_i w_ji a_i + o_j with
o_j = A sum_{w<0} |w_ji|, so acc_j in [0, 2^p) exactly (linear operations, no bootstrap), then one lookup
T_j(acc) = clamp(round(relu(s_a s_j (acc - o_j) + b_j) / s_h), 0, 2^h - 1): ReLU and the requantization to
``act_bits`` bits (s_h: the layer's activation scale, its 99.9th percentile on the training set over 2^h - 1).
The last layer has no lookup: its accumulators are the circuit's outputs, decrypted; the client computes the
scores s_a s_k (acc_k - o_k) + b_k in float64 and takes the argmax (the plain model runs the same function on
the same integers, so the predictions are equal, not just close).

Quantization-aware training (:class:`QuantizedMLP`, ``qat_epochs``). 784 inputs of A = 3 into an accumulator of
width 2^p - 1 leave sum_i |w_ji| <= 85 at P8, so post-training quantization rounds most weights to 0. The float
network is therefore fine-tuned with the quantization in its forward pass: each step runs the integer model's
function exactly (weights w s_j from the per-neuron rule above, activations clamp(round(relu(z) / s_h)) s_h with
s_h refreshed each epoch by the same percentile rule), and the gradient passes straight through the roundings
(to the float weights; to z where 0 < z < (2^h - 1/2) s_h). The fine-tuned weights are then quantized as above,
so the encrypted outputs still equal the integer model's.

Sizes. :class:`QuantizedMLP`: 784 -> ``hidden`` (lookups) -> 10. :class:`QuantizedCNN`: ``channels`` filters of
``kernel`` x ``kernel`` at ``stride`` (no padding: ((28 - kernel) / stride + 1)^2 windows each; lookups) -> 10.
One bootstrap level per hidden layer, all of a layer's lookups one batched launch; one key switch per lookup (no
two lookups read one value), one test vector per distinct table.
"""

from __future__ import annotations

import functools

import numpy as np

from crossfhe.apps.tfhe_ml import TFHEModel, budget, quantize_unit
from crossfhe.errors import ParameterError
from crossfhe.tfhe import presets

SIDE = 28


class Layer:
    """One quantized dense layer: ``w`` int64 [out, in], ``off`` int64 [out], ``scale`` float [out] (s_a s_j),
    ``bias`` float [out], ``tables`` int64 [out, 2^p] or None (the output layer), ``parts`` (the output layer):
    (neuron, input indices, offset) per circuit output. In :class:`QuantizedDeepNN`'s hidden layers, ``scale`` and
    ``bias`` are the folded normalization: tables = clamp(round(scale (acc - off) + bias), 0, 2^h - 1)."""

    def __init__(self, w, off, scale, bias, tables, parts=None):
        self.w, self.off, self.scale, self.bias, self.tables, self.parts = w, off, scale, bias, tables, parts


def split_parts(w, a_max: int, params) -> list[tuple[int, np.ndarray, int]]:
    """The output layer's accumulators split into parts (neuron, inputs, offset), each of width a_max sum |w| <=
    2^p - 1 and noise sum w^2 within the budget: (neuron, input indices, offset)."""
    top, nb = (1 << params.message_bits) - 1, budget(params)
    parts = []
    for k, row in enumerate(w):
        chunks, cur, width, noise = [], [], 0, 0
        for i in np.flatnonzero(row):
            v = int(row[i])
            if cur and (width + a_max * abs(v) > top or noise + v * v > nb):
                chunks.append(cur)
                cur, width, noise = [], 0, 0
            cur.append(i)
            width, noise = width + a_max * abs(v), noise + v * v
        chunks.append(cur)
        for c in chunks:
            idx = np.array(c, dtype=np.int64)
            parts.append((k, idx, int(a_max * np.maximum(-row[idx], 0).sum())))
    return parts


def quantize_neurons(weights, a_max: int, params, weight_max: int, split: bool = False) -> tuple[np.ndarray,
                                                                                                   np.ndarray]:
    """(integer weights int64 [out, in], scales s_j float [out]) per the module docstring; ``split``: only
    |w| <= weight_max (the output layer, whose accumulators are split into parts that fit). Every row starts at
    s = max |W_j| / weight_max and grows by 3% until it fits; the rows go together (one array step per growth)."""
    top, nb = (1 << params.message_bits) - 1, budget(params)
    rows = np.asarray(weights, dtype=np.float64)
    s = np.maximum(np.abs(rows).max(axis=1) / weight_max, 1e-12)
    w = np.zeros(rows.shape, dtype=np.int64)
    todo = np.arange(len(rows))
    while len(todo):
        wt = np.rint(rows[todo] / s[todo, None]).astype(np.int64)
        ok = np.abs(wt).max(axis=1) <= weight_max
        if not split:
            ok &= (a_max * np.abs(wt).sum(axis=1) <= top) & ((wt * wt).sum(axis=1) <= nb)
        w[todo[ok]] = wt[ok]
        todo = todo[~ok]
        s[todo] *= 1.03
    return w, s


class QuantizedLayers(TFHEModel):
    """A chain of quantized dense layers (``self.layers``: :class:`Layer` each) as an integer model and a circuit:
    every layer but the last ends in one lookup per neuron; the last ends either in lookups too (its outputs are
    the lookups' integers) or in none (its outputs are the accumulator parts of :func:`split_parts`, combined by
    :meth:`scores`). Subclasses set ``layers``, ``params``, ``input_bits`` and ``encode``."""

    def outputs_plain(self, q) -> np.ndarray:
        """The circuit's outputs in the clear (int64 [n, outputs]): the last layer's part accumulators, or its
        lookups' integers."""
        a = np.asarray(q, dtype=np.int64)
        for layer in self.layers:
            if layer.tables is None:
                return np.stack([a[:, idx] @ layer.w[k, idx] + off for k, idx, off in layer.parts], axis=1)
            acc = a @ layer.w.T + layer.off
            a = layer.tables[np.arange(len(layer.w))[None, :], acc]
        return a

    def scores(self, out) -> np.ndarray:
        """The float scores s_k sum_parts (acc - o) + b_k of the decrypted (or plain) part accumulators:
        float64 [n, outputs]."""
        last = self.layers[-1]
        out = np.asarray(out, dtype=np.int64)
        acc = np.zeros((len(out), len(last.w)), dtype=np.int64)
        for c, (k, _, off) in enumerate(last.parts):
            acc[:, k] += out[:, c] - off
        return last.scale[None, :] * acc + last.bias[None, :]

    def circuit_fn(self, *xs):
        vals = list(xs)

        def dot(row, idx, off):
            acc = int(off)
            for v in sorted(set(row[idx].tolist()) - {0}):
                acc = sum(vals[i] for i in idx[row[idx] == v]) * v + acc
            return vals[0] * 0 + acc if isinstance(acc, int) else acc

        for layer in self.layers:
            if layer.tables is None:
                return tuple(dot(layer.w[k], idx, off) for k, idx, off in layer.parts)
            every = np.arange(layer.w.shape[1])
            vals = [dot(row, every, layer.off[j]).apply(layer.tables[j]) for j, row in enumerate(layer.w)]
        return tuple(vals)


class _Network(QuantizedLayers):
    """A float network (list of (W [out, in], b [out]) with ReLU between) quantized as in the module docstring."""

    percentile = 99.9
    """The activation scale s_h: this percentile of a layer's ReLU outputs on the training set over 2^h - 1."""

    def __init__(self, *, input_bits: int, act_bits: int, weight_max: int, params, seed: int):
        super().__init__()
        self.in_bits, self.act_bits, self.weight_max = int(input_bits), int(act_bits), int(weight_max)
        self.params = params or presets.P8
        self.seed = int(seed)
        if self.in_bits > self.params.message_bits or self.act_bits > self.params.message_bits:
            raise ParameterError(f"{self.in_bits}-bit inputs and {self.act_bits}-bit activations need as many "
                                 f"message bits; {self.params.name} has {self.params.message_bits}")
        self.input_bits = (self.in_bits,) * (SIDE * SIDE)

    def encode(self, x) -> np.ndarray:
        """Pixels quantized: int64 [n, 784]."""
        return quantize_unit(np.asarray(x).reshape(len(x), -1), self.in_bits)

    def _scaled(self, x) -> np.ndarray:
        return self.encode(x) / ((1 << self.in_bits) - 1)

    def _quantize(self, layers, x_train) -> None:
        """The float layers quantized on the calibration inputs ``x_train``."""
        size = 1 << self.params.message_bits
        a_max, s_a = (1 << self.in_bits) - 1, 1.0 / ((1 << self.in_bits) - 1)
        a = self.encode(x_train)
        self.layers = []
        for n, (wf, bf) in enumerate(layers):
            w, s = quantize_neurons(wf, a_max, self.params, self.weight_max)
            off = a_max * np.where(w < 0, -w, 0).sum(axis=1)
            scale = s_a * s
            if n == len(layers) - 1:
                w, s = quantize_neurons(wf, a_max, self.params, self.weight_max, split=True)
                scale = s_a * s
                self.layers.append(Layer(w, None, scale, np.asarray(bf, np.float64), None, split_parts(w, a_max,
                                                                                                   self.params)))
                break
            z = scale[:, None] * (np.arange(size)[None, :] - off[:, None]) + np.asarray(bf)[:, None]
            acc = a @ w.T + off
            zs = scale * (acc - off) + bf
            h_max = (1 << self.act_bits) - 1
            s_h = max(float(np.percentile(np.maximum(zs, 0), self.percentile)), 1e-9) / h_max
            tables = np.clip(np.rint(np.maximum(z, 0) / s_h), 0, h_max).astype(np.int64)
            layer = Layer(w, off, scale, np.asarray(bf, np.float64), tables)
            self.layers.append(layer)
            a = tables[np.arange(len(w))[None, :], acc]
            a_max, s_a = h_max, s_h

    def _fake_quantized(self, layers):
        """The dense layers' weights as the integer model uses them, w s_j (float [out, in] each), with the
        activation bounds a_max of their inputs."""
        out, a_max = [], (1 << self.in_bits) - 1
        for n, (wf, _) in enumerate(layers):
            last = n == len(layers) - 1
            w, s = quantize_neurons(wf, a_max, self.params, self.weight_max, split=last)
            out.append(w * s[:, None])
            a_max = (1 << self.act_bits) - 1
        return out

    def _quantization_aware(self, layers, x, y, epochs: int, lr: float) -> list:
        """``layers`` fine-tuned for ``epochs`` epochs (Adam, batches of 64, cross-entropy, seeded) through the
        integer model's function, straight-through gradients (module docstring): a new list of (W, b)."""
        rng = np.random.default_rng(self.seed)
        params = [np.array(w, np.float64) for pair in layers for w in pair]
        moment = [np.zeros_like(v) for v in params]
        second = [np.zeros_like(v) for v in params]
        a0, onehot = self._scaled(x), np.eye(len(layers[-1][1]))[np.asarray(y)]
        h_max, step, depth = (1 << self.act_bits) - 1, 0, len(layers)

        def forward(a, weights, scales):
            acts, pres = [a], []
            for n in range(depth):
                z = acts[-1] @ weights[n].T + params[2 * n + 1]
                pres.append(z)
                if n < depth - 1:
                    acts.append(np.clip(np.rint(np.maximum(z, 0) / scales[n]), 0, h_max) * scales[n])
            return acts, pres

        for _ in range(epochs):
            weights = self._fake_quantized(list(zip(params[::2], params[1::2])))
            scales, a = [], a0
            for n in range(depth - 1):  # s_h layer by layer, as _quantize sets it
                z = a @ weights[n].T + params[2 * n + 1]
                scales.append(max(float(np.percentile(np.maximum(z, 0), 99.9)), 1e-9) / h_max)
                a = np.clip(np.rint(np.maximum(z, 0) / scales[n]), 0, h_max) * scales[n]
            for idx in np.array_split(rng.permutation(len(a0)), max(1, len(a0) // 64)):
                weights = self._fake_quantized(list(zip(params[::2], params[1::2])))
                acts, pres = forward(a0[idx], weights, scales)
                prob = np.exp(pres[-1] - pres[-1].max(1, keepdims=True))
                g = (prob / prob.sum(1, keepdims=True) - onehot[idx]) / len(idx)
                grads = [None] * len(params)
                for n in range(depth - 1, -1, -1):
                    grads[2 * n], grads[2 * n + 1] = g.T @ acts[n], g.sum(0)
                    if n:
                        z = pres[n - 1]
                        g = (g @ weights[n]) * ((z > 0) & (z < (h_max + 0.5) * scales[n - 1]))
                step += 1
                for i, gr in enumerate(grads):
                    moment[i] = 0.9 * moment[i] + 0.1 * gr
                    second[i] = 0.999 * second[i] + 0.001 * gr**2
                    params[i] = params[i] - lr * (moment[i] / (1 - 0.9**step)) / (
                        np.sqrt(second[i] / (1 - 0.999**step)) + 1e-8)
        return list(zip(params[::2], params[1::2]))

    def decode(self, out) -> np.ndarray:
        return np.argmax(self.scores(out), axis=1)

    def predict_float(self, x) -> np.ndarray:
        """The float network on the quantized inputs (q / (2^b - 1)): labels int64 [n]."""
        a = self._scaled(x)
        for n, (w, b) in enumerate(self.float_layers):
            a = a @ np.asarray(w).T + b
            if n < len(self.float_layers) - 1:
                a = np.maximum(a, 0)
        return np.argmax(a, axis=1)


class QuantizedMLP(_Network):
    """784 -> ``hidden`` (ReLU + requantize lookups; a tuple for several layers) -> 10, trained by scikit-learn's
    ``MLPClassifier`` (ReLU, Adam, seeded) on ``input_bits``-bit pixels, then fine-tuned for ``qat_epochs``
    epochs through the quantization (module docstring; 0: post-training quantization only) and quantized per
    neuron. Default P8: a 784-input accumulator of width 255. ``predict_float`` is the scikit-learn network."""

    name = "mlp"

    def __init__(self, *, hidden=(32,), input_bits: int = 2, act_bits: int = 3, weight_max: int = 7, params=None,
                 seed: int = 0, max_iter: int = 200, qat_epochs: int = 30, qat_rate: float = 3e-3):
        super().__init__(input_bits=input_bits, act_bits=act_bits, weight_max=weight_max, params=params, seed=seed)
        self.hidden = (hidden,) if isinstance(hidden, int) else tuple(hidden)
        self.max_iter, self.qat_epochs, self.qat_rate = int(max_iter), int(qat_epochs), float(qat_rate)
        if self.qat_epochs < 0 or not self.qat_rate > 0:
            raise ParameterError(f"qat_epochs must be >= 0 and qat_rate > 0, got {qat_epochs} and {qat_rate}")

    def fit(self, x, y) -> QuantizedMLP:
        import warnings

        from sklearn.exceptions import ConvergenceWarning
        from sklearn.neural_network import MLPClassifier

        mlp = MLPClassifier(hidden_layer_sizes=self.hidden, activation="relu", alpha=1e-3, max_iter=self.max_iter,
                            random_state=self.seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            mlp.fit(self._scaled(x), np.asarray(y))
        if list(mlp.classes_) != list(range(len(mlp.classes_))):
            raise ParameterError(f"labels must be 0 .. classes - 1, got {mlp.classes_}")
        self.float_layers = [(w.T, b) for w, b in zip(mlp.coefs_, mlp.intercepts_)]
        tuned = self.float_layers
        if self.qat_epochs:
            tuned = self._quantization_aware(self.float_layers, x, y, self.qat_epochs, self.qat_rate)
        self._quantize(tuned, x)
        return self


def _windows(kernel: int, stride: int) -> np.ndarray:
    """Pixel indices of each window: int64 [windows, kernel^2] (row-major windows, row-major pixels)."""
    starts = range(0, SIDE - kernel + 1, stride)
    return np.array([[(r + i) * SIDE + c + j for i in range(kernel) for j in range(kernel)]
                     for r in starts for c in starts], dtype=np.int64)


class QuantizedCNN(_Network):
    """conv(``channels`` x ``kernel`` x ``kernel``, ``stride``, no padding) -> ReLU + requantize (lookups) ->
    dense -> 10, trained in NumPy (Adam, cross-entropy, seeded), quantized as one dense layer per stage (module
    docstring; every window of a channel gets the same integer kernel). Default P8."""

    name = "cnn"

    def __init__(self, *, channels: int = 2, kernel: int = 8, stride: int = 4, input_bits: int = 2, act_bits: int = 3,
                 weight_max: int = 15, params=None, seed: int = 0, epochs: int = 20):
        super().__init__(input_bits=input_bits, act_bits=act_bits, weight_max=weight_max, params=params, seed=seed)
        self.channels, self.kernel, self.stride, self.epochs = int(channels), int(kernel), int(stride), int(epochs)

    def fit(self, x, y) -> QuantizedCNN:
        y = np.asarray(y)
        classes = int(y.max()) + 1
        win = _windows(self.kernel, self.stride)
        a = self._scaled(x)
        patches = a[:, win]  # [n, windows, k^2]
        rng = np.random.default_rng(self.seed)
        nw, kk, c = win.shape[0], win.shape[1], self.channels
        params = {"k": rng.normal(0, np.sqrt(2 / kk), (kk, c)), "bk": np.zeros(c),
                  "v": rng.normal(0, np.sqrt(2 / (nw * c)), (nw * c, classes)), "bv": np.zeros(classes)}
        m = {k: np.zeros_like(v) for k, v in params.items()}
        s2 = {k: np.zeros_like(v) for k, v in params.items()}
        onehot = np.eye(classes)[y]
        step = 0
        for _ in range(self.epochs):
            for idx in np.array_split(rng.permutation(len(y)), max(1, len(y) // 64)):
                p, t = patches[idx], onehot[idx]
                hpre = p @ params["k"] + params["bk"]  # [b, windows, c]
                h = np.maximum(hpre, 0).reshape(len(idx), -1)
                logits = h @ params["v"] + params["bv"]
                prob = np.exp(logits - logits.max(1, keepdims=True))
                prob /= prob.sum(1, keepdims=True)
                g = (prob - t) / len(idx)
                grads = {"v": h.T @ g, "bv": g.sum(0)}
                gh = (g @ params["v"].T).reshape(hpre.shape) * (hpre > 0)
                grads["k"] = np.einsum("bwk,bwc->kc", p, gh)
                grads["bk"] = gh.sum((0, 1))
                step += 1
                for k in params:
                    m[k] = 0.9 * m[k] + 0.1 * grads[k]
                    s2[k] = 0.999 * s2[k] + 0.001 * grads[k] ** 2
                    params[k] -= 0.01 * (m[k] / (1 - 0.9**step)) / (np.sqrt(s2[k] / (1 - 0.999**step)) + 1e-8)
        conv = np.zeros((nw * c, SIDE * SIDE))
        for w in range(nw):
            conv[w * c:(w + 1) * c, win[w]] = params["k"].T
        self.float_layers = [(conv, np.tile(params["bk"], nw)), (params["v"].T, params["bv"])]
        self._quantize(self.float_layers, x)
        return self


def _padded_windows(kernel: tuple[int, int], padding: int) -> np.ndarray:
    """Pixel indices of a convolution's windows over the 28 x 28 image zero-padded by ``padding`` on each side,
    stride 1: int64 [windows, kh kw] (row-major windows, row-major kernel positions), -1 where the window covers
    padding."""
    kh, kw = kernel
    side = SIDE + 2 * padding
    rows = []
    for r in range(side - kh + 1):
        for c in range(side - kw + 1):
            idx = []
            for i in range(kh):
                for j in range(kw):
                    y, x = r + i - padding, c + j - padding
                    idx.append(y * SIDE + x if 0 <= y < SIDE and 0 <= x < SIDE else -1)
            rows.append(idx)
    return np.array(rows, dtype=np.int64)


class QuantizedDeepNN(_Network):
    """Zama's deep networks NN-``depth`` (Chillotti, Joye and Paillier 2021, rerun by Concrete ML; Taurus §VI's
    CNN-20 and CNN-50): a convolution of ``channels`` maps, kernel ``kernel`` (10 x 11), stride 1, zero padding
    ``padding`` (1), so 2 x 21 x 20 = 840 values, then a dense layer 840 -> ``width`` (92), ``depth`` - 3 dense
    layers ``width`` -> ``width``, and a dense output layer -> 10: ``depth`` layers, every one but the last
    followed by ReLU, which is one lookup per neuron. Lookups per image: 840 + (``depth`` - 2) ``width``;
    ``depth`` - 1 bootstrap levels.

    Every hidden neuron's pre-activation is batch-normalized while training, and the normalization is folded into
    its lookup, so it costs nothing encrypted. Neuron j of a hidden layer reads integers a_i in [0, A] (A = 2^b - 1:
    the quantized pixels, then the activations), has integer weights w_ji and scale s_j from
    :func:`quantize_neurons` (|w| <= ``weight_max``, A sum_i |w_ji| <= 2^p - 1, sum_i w_ji^2 within the noise
    budget), and its lookup is

        T_j(acc) = clamp(round(g_j (s_j (acc - o_j) - mu_j) + beta_j), 0, 2^h - 1),   g_j = gamma_j / sqrt(var_j + eps),

    over acc = sum_i w_ji a_i + o_j in [0, 2^p) (o_j = A sum_{w<0} |w_ji|): the normalization with the population
    mean mu_j and variance var_j of s_j (acc - o_j) over the training set (the integer model's own, in float64),
    ReLU, and the rounding to ``act_bits`` bits with a step of 1 (the learned gain gamma_j sets the scale). The
    output layer has no lookup: s_k sum_parts (acc - o) + b_k in the clear (:meth:`scores`).

    Training (JAX, seeded, cross-entropy, Adam, the rate along a cosine to 0 in each phase): ``epochs`` epochs in
    float (ReLU, batch statistics, batches of 64), then ``qat_epochs`` in batches of ``qat_batch`` (about that many
    images each; the batch statistics normalize over them; default 64 up to depth 20 and 128 deeper, where the
    larger batch trains the integer model better: benchmarks/README.md, "NN-50's quantization-aware epochs")
    through the integer model's function
    (weights w s_j with s_j refreshed every step, activations clamp(round(y), 0, 2^h - 1); straight-through
    gradients: through the roundings, and through the clamp where -1/2 < y < 2^h - 1/2); the lookups then use the
    population statistics. ``start``: "looks-linear" (default) starts each ``width`` x ``width`` layer as
    [[U, -U], [-U, U]] with U a random orthogonal matrix of half the width (Balduzzi et al. 2017), so that with ReLU
    the stack starts as a linear map of its first layer's outputs and still trains at depth 50, with dense weights;
    "he" is He initialisation everywhere (no ``width`` x ``width`` layer is special), which trains at depth 20 but
    not at 50 here. ``noise`` adds that many He deviations to the looks-linear start. ``predict_float`` is the
    float network after its float epochs (normalization at its population statistics).

    Sizes for the presets: ``params`` default P7 up to depth 20 and P8 deeper. At P7 a hidden neuron's 92 inputs of
    2 bits leave sum |w| <= 42 (85 at P8, 21 at P6); the quantization-aware epochs train through that bound at
    depth 20 but not at 50, whose integer model keeps far less of its float accuracy at P7 than at P8
    (benchmarks/README.md, "NN-20 on P7")."""

    name = "nn"
    eps = 1e-5
    """Batch normalization's epsilon."""

    def __init__(self, *, depth: int = 20, width: int = 92, channels: int = 2, kernel=(10, 11), padding: int = 1,
                 input_bits: int = 2, act_bits: int = 2, weight_max: int = 3, params=None, seed: int = 0,
                 epochs: int = 30, qat_epochs: int = 60, rate: float = 1e-3, qat_rate: float = 3e-3,
                 start: str = "looks-linear", noise: float = 0.0, qat_batch: int | None = None):
        if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 3:
            raise ParameterError(f"depth must be an int >= 3 (a convolution, a dense layer and the output layer), "
                                 f"got {depth!r}")
        super().__init__(input_bits=input_bits, act_bits=act_bits, weight_max=weight_max,
                         params=params or (presets.P7 if depth <= 20 else presets.P8), seed=seed)
        kernel = tuple(int(k) for k in kernel)
        if len(kernel) != 2 or min(kernel) < 1 or max(kernel) > SIDE + 2 * int(padding) or int(padding) < 0:
            raise ParameterError(f"kernel {kernel} with padding {padding} does not fit a {SIDE} x {SIDE} image")
        if int(width) < 1 or int(channels) < 1 or int(epochs) < 0 or int(qat_epochs) < 0:
            raise ParameterError("width and channels must be >= 1, epochs and qat_epochs >= 0")
        if start not in ("he", "looks-linear") or (start == "looks-linear" and int(width) % 2):
            raise ParameterError(f"start must be 'he' or 'looks-linear' (an even width), got {start!r} at width "
                                 f"{width}")
        if qat_batch is None:
            qat_batch = 64 if depth <= 20 else 128
        if isinstance(qat_batch, bool) or not isinstance(qat_batch, (int, np.integer)) or qat_batch < 1:
            raise ParameterError(f"qat_batch must be an int >= 1 (images per quantization-aware step) or None, got "
                                 f"{qat_batch!r}")
        if not 0.0 <= float(noise) <= 10.0:
            raise ParameterError(f"noise must be in [0, 10] (times He's deviation), got {noise!r}")
        self.depth, self.width, self.channels = int(depth), int(width), int(channels)
        self.kernel, self.padding = kernel, int(padding)
        self.epochs, self.qat_epochs = int(epochs), int(qat_epochs)
        self.rate, self.qat_rate, self.qat_batch = float(rate), float(qat_rate), int(qat_batch)
        self.start, self.noise = start, float(noise)
        self.name = f"nn{self.depth}"

    # -- the convolution in its two forms ------------------------------------------------------------------

    def _conv_rows(self, k: np.ndarray, win: np.ndarray) -> np.ndarray:
        """The convolution's rows as kernel positions: float [channels * windows, kh kw], channel-major (the order
        of torch's flatten of [channels, rows, cols]), zero where a window covers padding."""
        mask = (win >= 0).astype(np.float64)
        return (k[:, None, :] * mask[None, :, :]).reshape(-1, win.shape[1])

    def _conv_dense(self, rows: np.ndarray, win: np.ndarray) -> np.ndarray:
        """The rows as the dense matrix [channels * windows, 784] over the image's pixels."""
        r, k, pix = self._scatter(win)
        dense = np.zeros((len(rows), SIDE * SIDE))
        dense[r, pix] = rows[r, k]
        return dense

    def _scatter(self, win: np.ndarray):
        """(row, kernel position, pixel) of every weight of the dense matrix that is not on padding: int64 each."""
        rr, kk = np.nonzero(np.tile(win >= 0, (self.channels, 1)))
        return rr, kk, win[rr % len(win), kk]

    # -- training --------------------------------------------------------------------------------------

    def _matrices(self, par: dict, win: np.ndarray) -> list:
        """The float weight matrices, the convolution as its rows over kernel positions: float64 each."""
        return [self._conv_rows(np.asarray(par["k"], np.float64), win)] + [
            np.asarray(par[f"w{i}"], np.float64) for i in range(self.depth - 1)]

    def _scales(self, par: dict, win: np.ndarray) -> list:
        """s_j of every layer as :func:`quantize_neurons` sets it for the current weights (the zeros of a window
        on padding change nothing): float32 [rows] each."""
        h_max, in_max = (1 << self.act_bits) - 1, (1 << self.in_bits) - 1
        mats = self._matrices(par, win)
        return [np.asarray(quantize_neurons(m, in_max if n == 0 else h_max, self.params, self.weight_max,
                                            split=n == len(mats) - 1)[1], np.float32) for n, m in enumerate(mats)]

    def _train(self, y, epochs: int, rate: float, state: dict, quantized: bool) -> None:
        """``epochs`` epochs of Adam on ``state["par"]`` (class docstring), in float or through the integer
        model."""
        import jax
        import jax.numpy as jnp

        if not epochs:
            return
        rng = np.random.default_rng(self.seed + quantized)
        xs, ys = state["x"], np.asarray(y)
        geo = state["geometry"]
        par = {n: jnp.asarray(v, jnp.float32) for n, v in state["par"].items()}
        mom = jax.tree_util.tree_map(jnp.zeros_like, par)
        sec = jax.tree_util.tree_map(jnp.zeros_like, par)
        batches = max(1, len(xs) // (self.qat_batch if quantized else 64))
        total, step = epochs * batches, 0
        ones = [np.ones(1, np.float32)] * self.depth
        grad, _, adam = _deep_steps(self.channels, (1 << self.act_bits) - 1, self.eps)
        for _ in range(epochs):
            for idx in np.array_split(rng.permutation(len(xs)), batches):
                scales = self._scales(par, state["win"]) if quantized else ones
                g = grad(par, geo, xs[idx], ys[idx], scales, None, quantized=quantized)
                step += 1
                lr = np.float32(rate * 0.5 * (1 + np.cos(np.pi * (step - 1) / total)))
                par, mom, sec = adam(par, mom, sec, g, lr, np.float32(step))
        state["par"] = {n: np.asarray(v, np.float64) for n, v in par.items()}

    def _float_statistics(self, state: dict) -> list:
        """The float network's normalization at its population statistics on the training images: (mu, var) per
        hidden layer, float64 [rows] each."""
        import jax.numpy as jnp

        _, forward, _ = _deep_steps(self.channels, (1 << self.act_bits) - 1, self.eps)
        par = {n: jnp.asarray(v, jnp.float32) for n, v in state["par"].items()}
        ones = [np.ones(1, np.float32)] * self.depth
        stats = forward(par, state["geometry"], state["x"], ones, None, quantized=False)[1]
        return [(np.asarray(m, np.float64), np.asarray(v, np.float64)) for m, v in stats]

    def _quantize_folded(self, state: dict, x) -> None:
        """The integer model (class docstring): weights per neuron, then each hidden layer's tables with its
        normalization folded in, from the integer model's own statistics."""
        par = state["par"]
        h_max, in_max = (1 << self.act_bits) - 1, (1 << self.in_bits) - 1
        size = 1 << self.params.message_bits
        mats = self._matrices(par, state["win"])
        mats[0] = self._conv_dense(mats[0], state["win"])
        a, a_max = self.encode(x), in_max
        self.layers = []
        for n, wf in enumerate(mats):
            if n == len(mats) - 1:
                w, s = quantize_neurons(wf, a_max, self.params, self.weight_max, split=True)
                self.layers.append(Layer(w, None, s, np.asarray(par["bout"], np.float64), None,
                                         split_parts(w, a_max, self.params)))
                break
            w, s = quantize_neurons(wf, a_max, self.params, self.weight_max)
            off = a_max * np.where(w < 0, -w, 0).sum(axis=1)
            z = s * (a @ w.T)
            mu, var = z.mean(axis=0), z.var(axis=0)
            gain = np.asarray(par[f"g{n}"], np.float64) / np.sqrt(var + self.eps)
            beta = np.asarray(par[f"be{n}"], np.float64)
            scale, bias = gain * s, beta - gain * mu
            grid = np.arange(size)[None, :] - off[:, None]
            tables = np.clip(np.rint(scale[:, None] * grid + bias[:, None]), 0, h_max).astype(np.int64)
            self.layers.append(Layer(w, off, scale, bias, tables))
            a = tables[np.arange(len(w))[None, :], a @ w.T + off]
            a_max = h_max

    def fit(self, x, y) -> QuantizedDeepNN:
        y = np.asarray(y)
        if y.min() < 0 or y.max() > 9:
            raise ParameterError(f"labels must be digits 0..9, got {y.min()}..{y.max()}")
        rng = np.random.default_rng(self.seed)
        win = _padded_windows(self.kernel, self.padding)
        kk = win.shape[1]
        sizes = [self.channels * len(win)] + [self.width] * (self.depth - 2) + [10]
        par = {"k": rng.normal(0, np.sqrt(2 / kk), (self.channels, kk))}
        for i, (n, m) in enumerate(zip(sizes, sizes[1:])):
            w = rng.normal(0, np.sqrt(2 / n), (m, n))
            if m == n and self.start == "looks-linear":
                u, _ = np.linalg.qr(rng.normal(size=(m // 2, m // 2)))
                w = np.block([[u, -u], [-u, u]]) + self.noise * w
            par[f"w{i}"] = w
        for i, m in enumerate(sizes[:-1]):
            par[f"g{i}"], par[f"be{i}"] = np.ones(m), np.zeros(m)
        par["bout"] = np.zeros(10)
        geometry = ((win >= 0).astype(np.float32), np.where(win >= 0, win, SIDE * SIDE).astype(np.int32))
        state = {"par": par, "win": win, "geometry": geometry, "x": self.encode(x).astype(np.float32)}
        self._train(y, self.epochs, self.rate, state, False)
        self.float_state = {"par": dict(state["par"]), "stats": self._float_statistics(state), "win": win}
        self._train(y, self.qat_epochs, self.qat_rate, state, True)
        self._quantize_folded(state, x)
        return self

    def predict_float(self, x) -> np.ndarray:
        """The float network after its float epochs, normalization at its population statistics: labels [n]."""
        par, stats, win = self.float_state["par"], self.float_state["stats"], self.float_state["win"]
        mats = self._matrices(par, win)
        mats[0] = self._conv_dense(mats[0], win)
        a = self.encode(x).astype(np.float64)
        for n, w in enumerate(mats):
            z = a @ w.T
            if n == len(mats) - 1:
                return np.argmax(z + par["bout"], axis=1)
            mu, var = stats[n]
            a = np.maximum(par[f"g{n}"] * (z - mu) / np.sqrt(var + self.eps) + par[f"be{n}"], 0)


@functools.cache
def _deep_steps(channels: int, h_max: int, eps: float):
    """The jitted training steps of :class:`QuantizedDeepNN`, made once per shape: (gradient, forward, Adam
    update). The network's geometry (the windows' mask and pixel indices) and the weight scales are arguments,
    never closed over."""
    import jax
    import jax.numpy as jnp

    def fake(w, s):  # w s_j round(w / s_j), the gradient straight through
        return w + jax.lax.stop_gradient(jnp.rint(w / s[:, None]) * s[:, None] - w)

    def forward(par, geometry, x, scales, stats, *, quantized):
        mask, pixels = geometry
        depth = len(scales)
        rows = (par["k"][:, None, :] * mask[None]).reshape(-1, mask.shape[1])
        if quantized:
            rows = fake(rows, scales[0])
        xp = jnp.concatenate([x, jnp.zeros((x.shape[0], 1), x.dtype)], axis=1)
        z = jnp.einsum("npk,cpk->ncp", xp[:, pixels], rows.reshape(channels, *mask.shape)).reshape(len(x), -1)
        used = []
        for i in range(1, depth):
            mu, var = (z.mean(axis=0), z.var(axis=0)) if stats is None else stats[i - 1]
            used.append((mu, var))
            yv = par[f"g{i - 1}"] * (z - mu) / jnp.sqrt(var + eps) + par[f"be{i - 1}"]
            if quantized:
                c = jnp.clip(yv, 0, h_max)
                a = c + jax.lax.stop_gradient(jnp.rint(c) - c)
            else:
                a = jnp.maximum(yv, 0)
            z = a @ (fake(par[f"w{i - 1}"], scales[i]) if quantized else par[f"w{i - 1}"]).T
        return z + par["bout"], used

    def loss(par, geometry, x, y, scales, stats, quantized):
        logits, _ = forward(par, geometry, x, scales, stats, quantized=quantized)
        return -jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1).mean()

    def adam(par, mom, sec, g, lr, step):
        mom = jax.tree_util.tree_map(lambda m, d: 0.9 * m + 0.1 * d, mom, g)
        sec = jax.tree_util.tree_map(lambda v, d: 0.999 * v + 0.001 * d * d, sec, g)
        par = jax.tree_util.tree_map(lambda p, m, v: p - lr * (m / (1 - 0.9**step)) / (
            jnp.sqrt(v / (1 - 0.999**step)) + 1e-8), par, mom, sec)
        return par, mom, sec

    grad = jax.jit(jax.grad(loss), static_argnames="quantized")
    return grad, jax.jit(forward, static_argnames="quantized"), jax.jit(adam)


__all__ = ["Layer", "QuantizedCNN", "QuantizedDeepNN", "QuantizedLayers", "QuantizedMLP", "quantize_neurons",
           "split_parts"]
