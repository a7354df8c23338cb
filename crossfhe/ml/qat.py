"""Quantization-aware training for the TFHE path: PyTorch modules that put crossfhe's quantization in a network's
forward pass while it trains, so the network learns to tolerate it (as Brevitas does for Concrete ML).

Insert them, train as usual, then export and compile with ``scheme="tfhe"``:

- :class:`FakeQuant` (``bits``): after an input or an activation, values rounded to a uniform grid of 2^bits points
  between the running minimum and maximum seen in training (the grid :class:`crossfhe.ml.tfhe.Grid` calibrates);
- :class:`QuantLinear` (``inputs``: the FakeQuant its inputs come from, ``weight_max``, ``message_bits``): a
  ``torch.nn.Linear`` whose weights are rounded as crossfhe rounds them: on the inputs' integers (w_i = W_i step_i,
  step_i the input grid's), per output neuron, with about the scale :func:`crossfhe.apps.qnn.quantize_neurons`
  picks (the smallest s with |w / s| <= weight_max and, for a layer followed by a lookup, A sum_i |w_i / s| <=
  2^p - 1 with A = 2^bits - 1 of the inputs: the accumulator fits the lookup; ``lookup=False`` for the output
  layer, where A |w / s| <= 2^p - 1 instead).

The rounding's gradient is the identity (straight-through), clipped to zero outside a grid's range. Both modules are
the identity while ``torch.onnx.export`` traces them, so the exported file is the plain network with the trained
weights; :func:`crossfhe.ml.compile_onnx` then quantizes it with the same rules, on the calibration samples given
there, and its encrypted outputs equal that quantized model's exactly (the training-time rounding is a model of it,
not a promise: the ranges and scales are recalibrated at compile time).

Needs PyTorch (``pip install torch``).
"""

from __future__ import annotations

try:
    import torch
except ImportError as e:  # pragma: no cover - exercised only without PyTorch
    raise ImportError("crossfhe.ml.qat needs PyTorch (pip install torch)") from e


def _exporting() -> bool:
    return bool(torch.onnx.is_in_onnx_export())


class _RoundSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, g):
        return g


class FakeQuant(torch.nn.Module):
    """x rounded to 2^bits points between the minimum and maximum of x seen in training (per feature on the last
    axis if ``per_feature``, else over the whole tensor), as compiling calibrates them on the training samples;
    ``momentum``: a moving average of the batches' ranges instead. In eval mode the range is frozen; during ONNX
    export the module is the identity."""

    def __init__(self, bits: int, *, per_feature: bool = True, momentum: float | None = None):
        super().__init__()
        if not 1 <= int(bits) <= 10:
            raise ValueError(f"FakeQuant: bits must be in [1, 10] (TFHE lookups), got {bits}")
        self.bits, self.per_feature = int(bits), per_feature
        self.momentum = None if momentum is None else float(momentum)
        self.register_buffer("lo", torch.tensor(float("nan")))
        self.register_buffer("hi", torch.tensor(float("nan")))

    def forward(self, x):
        if _exporting():
            return x
        if self.training:
            flat = x.detach().reshape(-1, x.shape[-1]) if self.per_feature else x.detach().reshape(-1)
            lo, hi = flat.min(dim=0).values, flat.max(dim=0).values
            if torch.isnan(self.lo).any() or self.lo.shape != lo.shape:
                self.lo, self.hi = lo.clone(), hi.clone()
            elif self.momentum is None:
                self.lo, self.hi = torch.minimum(self.lo, lo), torch.maximum(self.hi, hi)
            else:
                self.lo = (1 - self.momentum) * self.lo + self.momentum * lo
                self.hi = (1 - self.momentum) * self.hi + self.momentum * hi
        if torch.isnan(self.lo).any():
            return x
        top = (1 << self.bits) - 1
        step = torch.clamp((self.hi - self.lo) / top, min=1e-12)
        q = torch.clamp(_RoundSTE.apply((x - self.lo) / step), 0, top)
        return self.lo + step * q


class QuantLinear(torch.nn.Linear):
    """``torch.nn.Linear`` with its weights rounded per output neuron as crossfhe's TFHE path rounds them (module
    docstring): ``inputs`` the :class:`FakeQuant` before it, ``weight_max`` the integer weights' bound,
    ``message_bits`` the preset's (8 for P8), ``lookup`` whether an activation (a lookup) follows."""

    def __init__(self, in_features: int, out_features: int, *, inputs: FakeQuant, weight_max: int = 15,
                 message_bits: int = 8, lookup: bool = True, bias: bool = True):
        super().__init__(in_features, out_features, bias=bias)
        if not isinstance(inputs, FakeQuant):
            raise TypeError(f"QuantLinear: inputs is the FakeQuant module its inputs come from, got {inputs!r}")
        self.inputs = [inputs]  # a list: not registered twice as a submodule
        self.a_max, self.weight_max = (1 << inputs.bits) - 1, int(weight_max)
        self.top, self.lookup = (1 << int(message_bits)) - 1, bool(lookup)

    def _steps(self):
        q = self.inputs[0]
        if torch.isnan(q.lo).any():
            return None
        return torch.clamp((q.hi - q.lo) / ((1 << q.bits) - 1), min=1e-12)

    def quantized_weight(self):
        steps = self._steps()
        if steps is None:
            return self.weight
        w = self.weight * steps  # the weights on the inputs' integers, as crossfhe quantizes them
        s = self._scales(w.detach())
        return _RoundSTE.apply(w / s) * s / steps

    def _scales(self, w):
        """Per row, the scale quantize_neurons finds: max |w| / weight_max grown by factors of 1.03 until the
        rounded row fits (``weight_max``, and the accumulator width where a lookup follows)."""
        mag = w.abs()
        w_max = self.weight_max if self.lookup else min(self.weight_max, self.top // self.a_max)
        s0 = torch.clamp(mag.max(dim=1, keepdim=True).values / w_max, min=1e-12)
        s, done = s0.clone(), torch.zeros_like(s0, dtype=torch.bool)
        for k in range(400):
            sk = s0 * 1.03**k
            r = torch.round(mag / sk)
            fits = r.max(dim=1, keepdim=True).values <= w_max
            if self.lookup:
                fits &= self.a_max * r.sum(dim=1, keepdim=True) <= self.top
            s = torch.where(fits & ~done, sk, s)
            done |= fits
            if bool(done.all()):
                break
        return s

    def forward(self, x):
        if _exporting():
            return super().forward(x)
        return torch.nn.functional.linear(x, self.quantized_weight(), self.bias)


__all__ = ["FakeQuant", "QuantLinear"]
