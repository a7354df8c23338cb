"""A :class:`~crossfhe.ml.network.Network` as a TFHE circuit: post-training quantization to an integer model whose
encrypted outputs equal its plain ones exactly.

**Stages.** The network is cut into stages, each a dense :class:`~crossfhe.ml.network.Affine` layer followed by its
element-wise chain: the :class:`~crossfhe.ml.network.Nonlinear` layers and diagonal affine layers up to the next
dense one (a whole chain is one function per neuron, so it is one lookup). The last stage may have no chain.

**Grids.** Every value the circuit carries is an integer q in [0, 2^b) standing for v = lo + step q, with lo and
step per value (per input feature, per neuron): :class:`Grid`, calibrated on the samples (lo, hi = the smallest and
largest value seen, step = (hi - lo) / (2^b - 1); values outside are clipped to the grid's ends). Inputs take
``input_bits`` bits (the client quantizes them), activations ``act_bits``.

**A dense layer** z = W v + b on inputs v_i = lo_i + step_i q_i is z = W' q + b' with W'_ji = W_ji step_i and
b' = b + W lo. Neuron j gets integer weights w_ji = round(W'_ji / s_j)
(:func:`crossfhe.apps.qnn.quantize_neurons`: the smallest s_j with |w| <= ``weight_max``, and A |w| <= 2^p - 1 in
an output layer; where a lookup follows, the accumulator width A sum_i |w_ji| <= 2^p - 1 and its noise
sum_i w_ji^2 within the budget; A = 2^b - 1 of the inputs). The circuit computes acc_j = sum_i w_ji q_i + o_j,
o_j = A sum_{w < 0} |w_ji|, so acc_j in [0, 2^p) exactly, with additions and constant products only. Then:

- with a chain g_j: one lookup T_j(acc) = grid_j(g_j(s_j (acc - o_j) + b'_j)), the table over all 2^p values of
  acc (p = the preset's message bits), grid_j the neuron's activation grid calibrated on g_j's values for the
  samples through the quantized layers before it;
- without one (the output layer): no lookup; the accumulator is split into parts that each fit 2^p
  (:func:`crossfhe.apps.qnn.split_parts`), the parts are the circuit's outputs, and whoever decrypts adds them:
  y_j = s_j (sum parts - o_j) + b'_j in float64.

The plain integer model (:meth:`QuantizedNetwork.outputs_plain`) runs the same integers with NumPy; the circuit's
outputs decrypt to exactly those integers (each bootstrap fails with probability <= 2^-64 at the presets), so
:meth:`crossfhe.ml.CompiledModel.predict` equals :meth:`~crossfhe.ml.CompiledModel.predict_approximated` exactly.

**Bits** (``input_bits`` and ``act_bits``, None: chosen): the lookups cost the same whatever the widths, so every
pair in [2, p]^2 is quantized in the clear and the one whose model agrees best with the float model on the samples
is taken (the argmax first when there are several outputs, then the largest output error relative to the outputs'
spread). The report gives the agreement of the quantized and the encrypted models with the float one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from crossfhe.api import CircuitError
from crossfhe.apps.qnn import Layer, QuantizedLayers, quantize_neurons, split_parts
from crossfhe.ml.network import Affine, Agreement, ModelError, Network, Nonlinear
from crossfhe.tfhe import presets
from crossfhe.tfhe.params import Params

WEIGHT_MAX = 15
"""Default bound on the integer weights |w| (a sign and 4 bits)."""


@dataclass(frozen=True)
class Grid:
    """Uniform grids, one per value: q in [0, 2^bits) stands for lo + step q (``lo``, ``step`` float64 ``[n]``)."""

    lo: np.ndarray
    step: np.ndarray
    bits: int

    @classmethod
    def calibrated(cls, values: np.ndarray, bits: int) -> Grid:
        """The grids spanning each column of ``values`` ``[B, n]`` from its smallest to its largest value (a
        constant column: step 1, so its one value is exact)."""
        lo, hi = values.min(axis=0), values.max(axis=0)
        span = hi - lo
        step = np.where(span > 0, span / ((1 << bits) - 1), 1.0)
        return cls(lo.astype(np.float64), step.astype(np.float64), int(bits))

    @property
    def top(self) -> int:
        return (1 << self.bits) - 1

    def quantize(self, x: np.ndarray) -> np.ndarray:
        """round((x - lo) / step) clipped to [0, 2^bits): int64, the shape of ``x`` (values on the last axis)."""
        return np.clip(np.rint((np.asarray(x, np.float64) - self.lo) / self.step), 0, self.top).astype(np.int64)

    def value(self, q: np.ndarray) -> np.ndarray:
        """lo + step q: float64."""
        return self.lo + self.step * np.asarray(q, np.float64)


@dataclass(frozen=True)
class Stage:
    """A dense layer and the element-wise chain after it (empty for an output layer without one)."""

    dense: Affine
    chain: tuple = ()

    def apply_chain(self, z: np.ndarray) -> np.ndarray:
        """The chain on values ``[..., m]`` (the neuron on the last axis)."""
        for layer in self.chain:
            z = z * np.diagonal(layer.weight) + layer.bias if isinstance(layer, Affine) else layer(z)
        return z

    @property
    def source(self) -> str:
        kinds = [layer.kind for layer in self.chain if isinstance(layer, Nonlinear)]
        return self.dense.source + (" -> " + " -> ".join(kinds) if kinds else "")


def _diagonal(layer: Affine) -> bool:
    w = layer.weight
    return w.shape[0] == w.shape[1] and not np.any(w - np.diag(np.diagonal(w)))


def stages(net: Network) -> list[Stage]:
    """``net`` cut into :class:`Stage` s (module docstring); a network starting with a non-linear layer gets an
    identity dense layer first."""
    layers = list(net.layers)
    if not layers or isinstance(layers[0], Nonlinear):
        layers.insert(0, Affine(np.eye(net.n_in), np.zeros(net.n_in), "input"))
    out: list[list] = []
    for i, layer in enumerate(layers):
        following = layers[i + 1] if i + 1 < len(layers) else None
        in_chain = out and len(out[-1]) > 1
        if isinstance(layer, Affine) and not (in_chain and _diagonal(layer) and isinstance(following, Nonlinear)):
            out.append([layer])
        else:
            out[-1].append(layer)
    return [Stage(s[0], tuple(s[1:])) for s in out]


class QuantizedNetwork(QuantizedLayers):
    """A :class:`~crossfhe.ml.network.Network` quantized on ``samples`` (float64 ``[B, n_in]``) for ``params``
    (module docstring). ``outputs_plain`` / ``circuit_fn``: :class:`crossfhe.apps.qnn.QuantizedLayers`;
    :meth:`encode` quantizes samples (the client), :meth:`values` turns the circuit's outputs into the model's
    float outputs."""

    name = "model"

    def __init__(self, net: Network, samples: np.ndarray, *, params: Params, input_bits: int, act_bits: int,
                 weight_max: int = WEIGHT_MAX):
        super().__init__()
        p = params.message_bits
        for what, b in (("input_bits", input_bits), ("act_bits", act_bits)):
            if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or not 1 <= b <= p:
                raise ModelError(f"{net.name}: {what} must be an int in [1, {p}] ({params.name} carries {p}-bit "
                                 f"messages), got {b!r}")
        if isinstance(weight_max, bool) or not isinstance(weight_max, (int, np.integer)) or weight_max < 1:
            raise ModelError(f"{net.name}: weight_max must be an int >= 1, got {weight_max!r}")
        self.net, self.params, self.weight_max = net, params, int(weight_max)
        self.in_bits, self.act_bits = int(input_bits), int(act_bits)
        self.stages = stages(net)
        self.input_grid = Grid.calibrated(samples, self.in_bits)
        self.input_bits = (self.in_bits,) * net.n_in
        self._quantize(samples)

    def encode(self, x) -> np.ndarray:
        """Samples (:meth:`Network.samples`) quantized on the input grid: int64 ``[B, n_in]``."""
        return self.input_grid.quantize(self.net.samples(x))

    def _quantize(self, samples: np.ndarray) -> None:
        size = 1 << self.params.message_bits
        grid, q = self.input_grid, self.input_grid.quantize(samples)
        self.layers, self.grids = [], []
        for n, st in enumerate(self.stages):
            w_f = st.dense.weight * grid.step[None, :]
            b_f = st.dense.bias + st.dense.weight @ grid.lo
            last_plain = n == len(self.stages) - 1 and not st.chain
            top = (1 << self.params.message_bits) - 1
            w_max = min(self.weight_max, top // grid.top) if last_plain else self.weight_max  # one term fits a part
            w, s = quantize_neurons(w_f, grid.top, self.params, w_max, split=last_plain)
            if last_plain:
                self.layers.append(Layer(w, None, s, b_f, None, split_parts(w, grid.top, self.params)))
                break
            off = grid.top * np.where(w < 0, -w, 0).sum(axis=1)
            acc = q @ w.T + off
            grid = Grid.calibrated(st.apply_chain(s * (acc - off) + b_f), self.act_bits)
            z = s[None, :] * (np.arange(size)[:, None] - off[None, :]) + b_f[None, :]
            tables = grid.quantize(st.apply_chain(z)).T.copy()
            self.layers.append(Layer(w, off, s, b_f, tables))
            self.grids.append(grid)
            q = tables[np.arange(len(w))[None, :], acc]

    @property
    def ends_in_lookups(self) -> bool:
        return self.layers[-1].tables is not None

    def values(self, out) -> np.ndarray:
        """The model's float outputs ``[B, n_out]`` from the circuit's integer outputs ``[B, outputs]``."""
        if self.ends_in_lookups:
            return self.grids[-1].value(out)
        return self.scores(out)

    def decode(self, out) -> np.ndarray:
        return self.values(out)

    def forward(self, x) -> np.ndarray:
        """The quantized model in the clear: float64 ``[B, n_out]``."""
        return self.values(self.outputs_plain(self.encode(x)))

    def describe(self) -> tuple:
        """Per stage: (source, inputs, neurons, lookups, circuit outputs)."""
        rows = []
        for st, layer in zip(self.stages, self.layers, strict=True):
            m, n = layer.w.shape
            rows.append((st.source, n, m, 0 if layer.tables is None else m,
                         len(layer.parts) if layer.parts is not None else 0))
        return tuple(rows)


def _score(approx: np.ndarray, exact: np.ndarray) -> tuple[float, float]:
    """Smaller is better: (-argmax agreement, or 0 for one output; max error over the outputs' spread)."""
    spread = float(np.ptp(exact)) or 1.0
    err = float(np.max(np.abs(approx - exact))) / spread
    agree = float(np.mean(approx.argmax(-1) == exact.argmax(-1))) if exact.shape[-1] > 1 else 0.0
    return -agree, err


def quantize(net: Network, samples: np.ndarray, *, params: Params | None = None, input_bits: int | None = None,
             act_bits: int | None = None, weight_max: int = WEIGHT_MAX) -> QuantizedNetwork:
    """The :class:`QuantizedNetwork` of ``net`` on ``samples`` (float64 ``[B, n_in]``): ``params`` a TFHE preset
    (default P8: 8-bit lookups), ``input_bits`` / ``act_bits`` None to choose them (module docstring)."""
    params = presets.P8 if params is None else params
    if not isinstance(params, Params):
        raise ModelError(f"{net.name}: params must be a TFHE preset (crossfhe.tfhe.presets, e.g. P8), got "
                         f"{type(params).__name__}")
    p = params.message_bits
    exact = net.logits(samples)
    best, best_key = None, None
    for ib in [input_bits] if input_bits is not None else range(2, p + 1):
        for ab in [act_bits] if act_bits is not None else range(2, p + 1):
            qn = QuantizedNetwork(net, samples, params=params, input_bits=ib, act_bits=ab, weight_max=weight_max)
            key = _score(qn.forward(samples), exact)
            if best_key is None or key < best_key:
                best, best_key = qn, key
            if qn.layers[0].tables is None and act_bits is None:
                break  # no activations: act_bits plays no part
    return best


@dataclass
class Report:
    """What quantizing a model did: the preset, the widths, the stages (source, inputs, neurons, lookups, outputs),
    the agreement of the quantized model (in the clear) and the encrypted one with the float model on the samples,
    and ``exact``: whether the encrypted outputs equalled the quantized model's integers."""

    model: str
    params: str
    input_bits: int
    act_bits: int
    weight_max: int
    stages: tuple
    quantized: Agreement
    encrypted: Agreement | None = None
    exact: bool | None = None
    cost: dict = field(default_factory=dict)

    def __str__(self) -> str:
        acts = f"{self.act_bits}-bit activations" if any(row[3] for row in self.stages) else "no activations"
        lines = [f"{self.model}: TFHE, {self.params}, {self.input_bits}-bit inputs, {acts}, |weights| <= "
                 f"{self.weight_max}, {self.cost.get('bootstraps', '?')} lookups per sample"]
        for source, n, m, lookups, outs in self.stages:
            what = f"{lookups} lookups" if lookups else f"no lookup, {outs} accumulator parts out"
            lines.append(f"  {source}: {n} -> {m}, {what}")
        lines.append(f"  quantized vs float {self.quantized}")
        if self.encrypted is not None:
            lines.append(f"  encrypted vs float {self.encrypted}; equal to the quantized model: {self.exact}")
        return "\n".join(lines)


def compile_quantized(qn: QuantizedNetwork, name: str):
    """The circuit of ``qn`` (:meth:`crossfhe.apps.tfhe_ml.TFHEModel.compile`, optimized, cached per model)."""
    qn.name = name
    try:
        return qn.compile()
    except CircuitError as e:
        raise ModelError(f"{name}: {e}") from e


__all__ = ["WEIGHT_MAX", "Grid", "QuantizedNetwork", "Report", "Stage", "compile_quantized", "quantize",
           "stages"]
