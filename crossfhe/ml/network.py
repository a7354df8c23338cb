"""A model as crossfhe runs it: affine maps and elementwise non-linearities, in float64.

Every supported model (ONNX, PyTorch through ONNX) is read into a :class:`Network`: a chain of :class:`Affine`
layers (y = W x + b on the flattened sample; convolutions, pools, batch normalizations, flattens and constant
arithmetic between two non-linear steps are folded into one W and b) and :class:`Nonlinear` layers (one function
applied to each value). :meth:`Network.forward` is the float model the encrypted one is compared with.

Shapes: a sample is ``input_shape`` (the model's input without its batch axis), flattened in C order (for an image
NCHW: channel, row, column), so ``n_in = prod(input_shape)``; each affine layer maps ``n`` values to ``m``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from crossfhe.errors import ParameterError


class ModelError(ParameterError):
    """A model cannot be compiled: an operation crossfhe does not support, a shape it cannot follow, or sample
    inputs that do not fit the model. The message names the node, its operation and the model's file."""


def _gelu(x):
    from math import erf, sqrt

    erf_v = np.vectorize(erf, otypes=[np.float64])
    return 0.5 * x * (1.0 + erf_v(np.asarray(x, dtype=np.float64) / sqrt(2.0)))


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def _softplus(x):
    return np.logaddexp(0.0, x)


FUNCTIONS = {
    "relu": lambda x, a: np.maximum(x, 0.0),
    "leaky_relu": lambda x, a: np.where(x >= 0, x, a * x),
    "sigmoid": lambda x, a: 0.5 * (1.0 + np.tanh(0.5 * x)),
    "tanh": lambda x, a: np.tanh(x),
    "gelu": lambda x, a: _gelu(x),
    "gelu_tanh": lambda x, a: _gelu_tanh(x),
    "softplus": lambda x, a: _softplus(x),
    "square": lambda x, a: x * x,
}
"""The element-wise functions a :class:`Nonlinear` layer applies (``a``: LeakyRelu's slope)."""


def as_samples(x, input_shape, name: str, what: str = "x") -> np.ndarray:
    """x as float64 ``[B, n_in]``: one sample of ``input_shape`` (or its ``n_in`` values), or a batch of them.
    ModelError (naming the model ``name`` and the argument ``what``) for another shape, no sample, or values that are
    not finite."""
    a = np.asarray(x, dtype=np.float64)
    shape = tuple(input_shape)
    n_in = int(np.prod(shape, dtype=np.int64))
    if a.shape in (shape, (n_in,)):
        a = a.reshape(1, n_in)
    elif a.shape[1:] in (shape, (n_in,)):
        a = a.reshape(a.shape[0], n_in)
    else:
        raise ModelError(f"{name}: {what} has shape {a.shape}; the model takes samples of shape {shape} "
                         f"({n_in} values), one or a batch [B, ...]")
    if a.shape[0] == 0:
        raise ModelError(f"{name}: {what} holds no sample")
    if not np.all(np.isfinite(a)):
        raise ModelError(f"{name}: {what} holds values that are not finite (NaN or infinity)")
    return a


def finish(final: str, y: np.ndarray) -> np.ndarray:
    """A model's last step applied in the clear to outputs ``[B, n_out]`` over the last axis: ``"softmax"``,
    ``"log_softmax"`` (numerically stable) or ``""`` (none)."""
    if not final:
        return y
    z = y - np.max(y, axis=-1, keepdims=True)
    lse = np.log(np.sum(np.exp(z), axis=-1, keepdims=True))
    return np.exp(z - lse) if final == "softmax" else z - lse


@dataclass(frozen=True)
class Affine:
    """y = weight @ x + bias: ``weight`` float64 ``[m, n]``, ``bias`` float64 ``[m]``. ``source``: the model's
    nodes folded into it (for messages and reports)."""

    weight: np.ndarray
    bias: np.ndarray
    source: str = ""

    @property
    def shape(self) -> tuple[int, int]:
        return self.weight.shape

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return x @ self.weight.T + self.bias


@dataclass(frozen=True)
class Nonlinear:
    """``kind`` (a key of :data:`FUNCTIONS`) applied to each value; ``alpha``: LeakyRelu's slope."""

    kind: str
    alpha: float = 0.0
    source: str = ""

    def __post_init__(self):
        if self.kind not in FUNCTIONS:
            raise ParameterError(f"Nonlinear: unknown kind {self.kind!r}; one of {sorted(FUNCTIONS)}")

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return FUNCTIONS[self.kind](np.asarray(x, dtype=np.float64), self.alpha)


@dataclass(frozen=True)
class Network:
    """A chain of :class:`Affine` and :class:`Nonlinear` layers on flattened samples of ``input_shape``;
    ``name``: where it came from (a file, or the graph's name)."""

    layers: tuple
    input_shape: tuple[int, ...]
    name: str = "model"
    output_shape: tuple[int, ...] = field(default=())
    final: str = ""
    """``"softmax"`` or ``"log_softmax"``: the model's last step, applied in the clear by whoever decrypts
    (:meth:`finish`; read with ``final_softmax="client"``); ``""``: none."""

    @property
    def n_in(self) -> int:
        return int(np.prod(self.input_shape, dtype=np.int64))

    @property
    def n_out(self) -> int:
        for layer in reversed(self.layers):
            if isinstance(layer, Affine):
                return layer.shape[0]
        return self.n_in

    def samples(self, x, what: str = "x") -> np.ndarray:
        """x as float64 ``[B, n_in]`` (:func:`as_samples`)."""
        return as_samples(x, self.input_shape, self.name, what)

    def logits(self, x) -> np.ndarray:
        """The layers on samples x (:meth:`samples`), without :attr:`final`: float64 ``[B, n_out]``, what the
        encrypted program computes."""
        h = self.samples(x)
        for layer in self.layers:
            h = layer(h)
        return h

    def finish(self, y: np.ndarray) -> np.ndarray:
        """:attr:`final` applied to outputs ``[B, n_out]`` (:func:`finish`)."""
        return finish(self.final, y)

    def forward(self, x) -> np.ndarray:
        """The float model: float64 ``[B, n_out]`` for samples x (:meth:`samples`), :attr:`final` included."""
        return self.finish(self.logits(x))

    def nonlinear_inputs(self, x) -> list[np.ndarray]:
        """The values each :class:`Nonlinear` layer receives for samples x, in order (float64 ``[B, m]`` each)."""
        h, out = self.samples(x), []
        for layer in self.layers:
            if isinstance(layer, Nonlinear):
                out.append(h)
            h = layer(h)
        return out


@dataclass
class Agreement:
    """How two models' outputs compare on ``count`` samples: the largest absolute difference and the fraction of
    samples whose argmax is the same."""

    count: int
    max_abs_diff: float
    argmax_agree: float

    @classmethod
    def of(cls, a: np.ndarray, b: np.ndarray) -> Agreement:
        same = float(np.mean(a.argmax(axis=-1) == b.argmax(axis=-1))) if a.shape[-1] > 1 else float("nan")
        return cls(int(a.shape[0]), float(np.max(np.abs(a - b))), same)

    def __str__(self) -> str:
        agree = "" if math.isnan(self.argmax_agree) else f", argmax agrees {self.argmax_agree:.1%}"
        return f"on {self.count} samples: max |diff| {self.max_abs_diff:.3g}{agree}"
