"""Compiling a model users bring, and running it encrypted: :func:`compile_onnx`, :func:`compile_torch`,
:class:`CompiledModel`."""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np

from crossfhe.ml import ckks as ckks_ml
from crossfhe.ml.network import ModelError, Network
from crossfhe.ml.onnx_reader import read_onnx

SCHEMES = ("ckks",)
"""The schemes a model compiles to today (TFHE, by quantization, is the next one)."""


@dataclass
class CompiledModel:
    """A model compiled to an encrypted program. The user flow, as a key owner::

        compiled.keygen()                      # the circuit's keys (secret and evaluation)
        enc = compiled.encrypt(x)              # one sample or a batch [B, ...]
        out = compiled.run(enc)                # what a server does: evaluation keys only
        y = compiled.decrypt(out)              # [B, n_out]

    or ``compiled.predict(x)`` for all four. ``network``: the float model read from the file; ``plan``: the layers
    as the circuit runs them; ``circuit``: the :class:`crossfhe.Circuit` (``export`` it for a server);
    ``report``: approximations, depth, preset and agreement (print it)."""

    network: Network
    plan: ckks_ml.Plan
    circuit: object
    report: ckks_ml.Report
    scheme: str = "ckks"

    @property
    def params(self):
        return self.circuit.params

    def keygen(self, *, seed: bytes | None = None):
        """Make (once) and return the circuit's keys; ``seed``: 32 bytes for reproducible keys (tests only)."""
        if self.circuit.keys is None or seed is not None:
            self.circuit.keygen(seed=seed)
        return self.circuit.keys

    def _one(self, x) -> bool:
        return np.shape(x) in (tuple(self.network.input_shape), (self.network.n_in,))

    def _vectors(self, x) -> np.ndarray:
        a = self.network.samples(x)
        out = np.zeros((a.shape[0], self.plan.d))
        out[:, : a.shape[1]] = a
        return out

    def encrypt(self, x, *, keys=None):
        """Samples x (one of the model's input shape, or a batch ``[B, ...]``) encrypted, one vector each: a
        :class:`crossfhe.Encrypted` batch of B (one sample: a batch of 1). Each batch size is one compiled program
        (made on the first run of that size, then cached)."""
        v = self._vectors(x)
        if keys is None:
            self.keygen()
        (enc,) = self.circuit.encrypt(v, keys=keys)
        return enc

    def run(self, enc, *, keys=None):
        """The model on encrypted samples (evaluation keys only): an encrypted output of the same batch."""
        (out,) = self.circuit.run(enc, keys=keys)
        return out

    def decrypt(self, out, *, keys=None) -> np.ndarray:
        """The model's outputs, float64 ``[B, n_out]``."""
        values = np.asarray(self.circuit.decrypt(out, keys=keys))
        return values[..., : self.plan.n_out].real.astype(np.float64)

    def predict(self, x) -> np.ndarray:
        """``decrypt(run(encrypt(x)))`` with this model's keys (made if needed): ``[B, n_out]``, or ``[n_out]`` for
        one sample."""
        y = self.decrypt(self.run(self.encrypt(x)))
        return y[0] if self._one(x) else y

    def predict_plain(self, x) -> np.ndarray:
        """The float model read from the file (NumPy float64)."""
        return self.network.forward(x)

    def predict_approximated(self, x) -> np.ndarray:
        """The model the circuit computes, in float64 without CKKS noise: the activations replaced by their
        polynomials."""
        return self.plan.forward(self.network.samples(x))

    def export(self, path, **kwargs):
        """:meth:`crossfhe.Circuit.export`: the compiled program for a server (``crossfhe.load``)."""
        return self.circuit.export(path, **kwargs)


def compile_network(net: Network, sample_inputs, *, scheme: str = "ckks", params=None, degree=None,
                    margin: float = 0.1, precision: float | None = None, check: int = 8,
                    seed: bytes | None = None) -> CompiledModel:
    """Compile a :class:`~crossfhe.ml.network.Network` (see :func:`compile_onnx` for the options)."""
    if scheme not in SCHEMES:
        raise ModelError(f"{net.name}: scheme {scheme!r} is not supported for models yet; use one of {SCHEMES}")
    if isinstance(check, bool) or not isinstance(check, int) or check < 0:
        raise ModelError(f"check is how many samples to run encrypted (an int >= 0), got {check!r}")
    samples = net.samples(sample_inputs, "sample_inputs")
    p = ckks_ml.plan(net, samples, degree=degree, margin=margin)
    circuit = ckks_ml.compile_plan(p, params=params, precision=precision, name=_name(net.name))
    float_out = net.forward(samples)
    approx = ckks_ml.Agreement.of(p.forward(samples), float_out)
    report = ckks_ml.Report(net.name, _params_name(circuit.params), p.d, circuit.depth, p.approximations, approx,
                            cost=dict(circuit.cost))
    model = CompiledModel(net, p, circuit, report)
    if check:
        model.keygen(seed=seed)
        some = samples[:check]
        report.encrypted = ckks_ml.Agreement.of(model.predict(some), float_out[: some.shape[0]])
    return model


def compile_onnx(model, sample_inputs, *, scheme: str = "ckks", params=None, degree=None, margin: float = 0.1,
                 precision: float | None = None, final_softmax: str = "error", check: int = 8,
                 seed: bytes | None = None) -> CompiledModel:
    """Compile an ONNX model (a path, bytes or ``onnx.ModelProto``) to an encrypted program.

    ``sample_inputs``: representative inputs (``[B, ...]``, the model's input shape per sample), on which each
    activation's input range is calibrated (its interval: the range seen, widened by ``margin`` of its length on
    each side) and the result is checked. ``scheme``: ``"ckks"``. ``params``: a CKKS preset (default: the smallest
    secure one with the depth and ``precision`` bits, :func:`crossfhe.compile`). ``degree``: the Chebyshev degree of
    every activation, or ``{kind: degree}`` (default 15: 5 levels each). ``final_softmax``: ``"drop"`` leaves out a
    final Softmax (the logits keep its argmax). ``check``: how many of the samples to run encrypted at compile time
    (keys are made for it; 0: none), compared in ``report`` with the float model. ModelError names a node that
    cannot be compiled, its operation, the file and what to do."""
    net = read_onnx(model, final_softmax=final_softmax)
    return compile_network(net, sample_inputs, scheme=scheme, params=params, degree=degree, margin=margin,
                           precision=precision, check=check, seed=seed)


def compile_torch(module, sample_inputs, *, opset: int = 20, **options) -> CompiledModel:
    """Export a PyTorch ``module`` (in eval mode) to ONNX at ``opset`` with ``sample_inputs`` (a tensor or an
    array ``[B, ...]``) and :func:`compile_onnx` it with ``options``."""
    try:
        import torch
    except ImportError:
        raise ModelError("compile_torch needs PyTorch (pip install torch); or export the model to ONNX yourself "
                         "and call compile_onnx") from None
    x = sample_inputs if isinstance(sample_inputs, torch.Tensor) else torch.as_tensor(
        np.asarray(sample_inputs, dtype=np.float32))
    module.eval()
    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(module, (x[:1],), buf, opset_version=opset, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, dynamo=False)
    return compile_onnx(buf.getvalue(), x.detach().cpu().numpy(), **options)


def _name(where: str) -> str:
    base = where.replace("\\", "/").rsplit("/", 1)[-1]
    return base[:-5] if base.endswith(".onnx") else base or "model"


def _params_name(params) -> str:
    from crossfhe.ckks import presets

    return presets.name_of(params) or f"N {params.n}, {params.levels} levels"
