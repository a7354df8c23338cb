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
        """x as float64 ``[B, n_in]``: one sample of ``input_shape`` (or ``n_in`` values), or a batch of them.
        ModelError for another shape or non-finite values."""
        a = np.asarray(x, dtype=np.float64)
        shape = tuple(self.input_shape)
        if a.shape == shape or a.shape == (self.n_in,):
            a = a.reshape(1, self.n_in)
        elif a.shape[1:] == shape or a.shape[1:] == (self.n_in,):
            a = a.reshape(a.shape[0], self.n_in)
        else:
            raise ModelError(f"{self.name}: {what} has shape {a.shape}; the model takes samples of shape {shape} "
                             f"({self.n_in} values), one or a batch [B, ...]")
        if a.shape[0] == 0:
            raise ModelError(f"{self.name}: {what} holds no sample")
        if not np.all(np.isfinite(a)):
            raise ModelError(f"{self.name}: {what} holds values that are not finite (NaN or infinity)")
        return a

    def forward(self, x) -> np.ndarray:
        """The float model: float64 ``[B, n_out]`` for samples x (:meth:`samples`)."""
        h = self.samples(x)
        for layer in self.layers:
            h = layer(h)
        return h

    def nonlinear_inputs(self, x) -> list[np.ndarray]:
        """The values each :class:`Nonlinear` layer receives for samples x, in order (float64 ``[B, m]`` each)."""
        h, out = self.samples(x), []
        for layer in self.layers:
            if isinstance(layer, Nonlinear):
                out.append(h)
            h = layer(h)
        return out
