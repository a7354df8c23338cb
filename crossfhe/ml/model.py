"""Compiling a model users bring, and running it encrypted: :func:`compile_onnx`, :func:`compile_torch`,
:class:`CompiledModel`."""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass

import numpy as np

from crossfhe.ml import ckks as ckks_ml
from crossfhe.ml import tfhe as tfhe_ml
from crossfhe.ml.client import ClientSpec, Runner
from crossfhe.ml.network import Agreement, ModelError, Network
from crossfhe.ml.onnx_reader import read_onnx
from crossfhe.progress import callback as progress_callback
from crossfhe.progress import report as report_progress

SCHEMES = ("ckks", "tfhe")
"""The schemes a model compiles to: CKKS (activations as polynomials, real outputs with CKKS's small error) and
TFHE (post-training quantization, outputs equal to the quantized model's)."""


@dataclass
class CompiledModel(Runner):
    """A model compiled to an encrypted program. The user flow, as a key owner::

        compiled.keygen()                      # the circuit's keys (secret and evaluation)
        enc = compiled.encrypt(x)              # one sample or a batch [B, ...]
        out = compiled.run(enc)                # what a server does: evaluation keys only
        y = compiled.decrypt(out)              # [B, n_out]

    or ``compiled.predict(x)`` for all four. ``network``: the float model read from the file; ``circuit``: the
    :class:`crossfhe.Circuit`; ``report``: how the model was turned into a circuit and how the result agrees with
    the float model (print it); ``spec``: the client side (:class:`crossfhe.ml.client.ClientSpec`).
    :meth:`export` writes both for a server and a client (:func:`crossfhe.ml.load`). :class:`CKKSModel` and
    :class:`TFHEModel` are the two kinds; ``scheme`` names it."""

    network: Network
    circuit: object
    report: object
    scheme: str = ""

    def predict_plain(self, x) -> np.ndarray:
        """The float model read from the file (NumPy float64)."""
        return self.network.forward(x)

    def predict_approximated(self, x) -> np.ndarray:
        """The model the circuit computes, in the clear: what :meth:`predict` gives without encryption's noise
        (CKKS: activations as polynomials, in float64) or exactly (TFHE: the quantized model)."""
        return self.network.finish(self._approximated(self.network.samples(x)))

    def export(self, path, **kwargs):
        """Write the compiled program and its client side (:class:`~crossfhe.ml.client.ClientSpec`) to ``path``
        (:meth:`crossfhe.Circuit.export`'s file, its options): :func:`crossfhe.ml.load` reads it back as a model, a
        server's :func:`crossfhe.load_circuit` as a circuit."""
        return self.circuit.export(path, model=self.spec.to_json(), **kwargs)

    def _base(self, **fields) -> ClientSpec:
        return ClientSpec(self.scheme, self.network.name, self.report.params, tuple(self.network.input_shape),
                          self.network.n_out, self.network.final, **fields)


@dataclass
class CKKSModel(CompiledModel):
    """A model on CKKS (:mod:`crossfhe.ml.ckks`): one sample per ciphertext; ``plan``: the layers as the circuit
    runs them. :meth:`encrypt` gives one :class:`crossfhe.Encrypted` batch of B."""

    plan: ckks_ml.Plan | None = None
    scheme: str = "ckks"

    @property
    def spec(self) -> ClientSpec:
        return self._base(d=self.plan.d)

    def _approximated(self, a: np.ndarray) -> np.ndarray:
        return self.plan.forward(a)


@dataclass
class TFHEModel(CompiledModel):
    """A model on TFHE (:mod:`crossfhe.ml.tfhe`): each input value one encrypted integer; ``quantized``: the integer
    model. :meth:`encrypt` gives a list of :class:`crossfhe.Encrypted` batches (one per input value), :meth:`run` a
    list (one per circuit output)."""

    quantized: tfhe_ml.QuantizedNetwork | None = None
    scheme: str = "tfhe"

    @property
    def spec(self) -> ClientSpec:
        qn, last = self.quantized, self.quantized.layers[-1]
        fields = dict(in_lo=qn.input_grid.lo, in_step=qn.input_grid.step, in_bits=qn.in_bits)
        if qn.ends_in_lookups:
            return self._base(**fields, out_lo=qn.grids[-1].lo, out_step=qn.grids[-1].step)
        parts = np.array([(k, off) for k, _, off in last.parts], dtype=np.int64)
        return self._base(**fields, out_parts=parts, out_scale=np.asarray(last.scale, np.float64),
                          out_bias=np.asarray(last.bias, np.float64))

    def _approximated(self, a: np.ndarray) -> np.ndarray:
        return self.quantized.values(self.quantized.outputs_plain(self.quantized.input_grid.quantize(a)))


def _check(check) -> int:
    if isinstance(check, bool) or not isinstance(check, int) or check < 0:
        raise ModelError(f"check is how many samples to run encrypted (an int >= 0), got {check!r}")
    return check


def compile_network(net: Network, sample_inputs, *, scheme: str = "ckks", params=None, degree=None,
                    margin: float = 0.1, precision: float | None = None, input_bits: int | None = None,
                    act_bits: int | None = None, weight_max: int = tfhe_ml.WEIGHT_MAX, check: int = 8,
                    seed: bytes | None = None, progress="auto") -> CompiledModel:
    """Compile a :class:`~crossfhe.ml.network.Network` (see :func:`compile_onnx` for the options)."""
    if scheme not in SCHEMES:
        raise ModelError(f"{net.name}: scheme {scheme!r} is not supported for models; use one of {SCHEMES}")
    check = _check(check)
    cb = progress_callback(progress)
    samples = net.samples(sample_inputs, "sample_inputs")
    float_out = net.logits(samples)
    what = f"compiling {net.name} ({scheme.upper()})"
    steps = 3 if check else 2
    report_progress(cb, 0, steps, what)
    if scheme == "tfhe":
        for option, v in (("degree", degree), ("precision", precision)):
            if v is not None:
                raise ModelError(f"{net.name}: {option} is a CKKS option; TFHE takes input_bits, act_bits, weight_max")
        qn = tfhe_ml.quantize(net, samples, params=params, input_bits=input_bits, act_bits=act_bits,
                              weight_max=weight_max)
        report_progress(cb, 1, steps, what)
        circuit = tfhe_ml.compile_quantized(qn, _name(net.name))
        report = tfhe_ml.Report(net.name, qn.params.name, qn.in_bits, qn.act_bits, qn.weight_max, qn.describe(),
                                Agreement.of(qn.forward(samples), float_out), cost=dict(circuit.cost))
        model = TFHEModel(net, circuit, report, quantized=qn)
    else:
        for option, v in (("input_bits", input_bits), ("act_bits", act_bits)):
            if v is not None:
                raise ModelError(f"{net.name}: {option} is a TFHE option; CKKS takes degree, margin, precision")
        p = ckks_ml.plan(net, samples, degree=degree, margin=margin)
        p, params = ckks_ml.fit_levels(p, samples, params=params, name=_name(net.name))
        report_progress(cb, 1, steps, what)
        circuit = ckks_ml.compile_plan(p, params=params, precision=precision, name=_name(net.name))
        report = ckks_ml.Report(net.name, _params_name(circuit.params), p.d, ckks_ml.depth(p), p.approximations,
                                Agreement.of(p.forward(samples), float_out), cost=dict(circuit.cost))
        model = CKKSModel(net, circuit, report, plan=p)
    report_progress(cb, 2, steps, what)
    if check:
        model.keygen(seed=seed)
        some = samples[:check]
        got = model._values(model.run(model._encrypt(some, None)), None)
        report.encrypted = Agreement.of(got, float_out[: some.shape[0]])
        if scheme == "tfhe":
            report.exact = bool(np.array_equal(got, model._approximated(some)))
        report_progress(cb, 3, steps, what)
    return model


def compile_onnx(model, sample_inputs, *, scheme: str = "ckks", params=None, degree=None, margin: float = 0.1,
                 precision: float | None = None, input_bits: int | None = None, act_bits: int | None = None,
                 weight_max: int = tfhe_ml.WEIGHT_MAX, final_softmax: str = "error", check: int = 8,
                 seed: bytes | None = None, progress="auto") -> CompiledModel:
    """Compile an ONNX model (a path, bytes or ``onnx.ModelProto``) to an encrypted program.

    ``sample_inputs``: representative inputs (``[B, ...]``, the model's input shape per sample), on which the
    ranges are calibrated and the result is checked. ``scheme``:

    - ``"ckks"``: each activation becomes a Chebyshev polynomial on the range its inputs took, widened by
      ``margin`` of its length on each side (:mod:`crossfhe.ml.ckks`). ``params``: a CKKS preset (default: the
      smallest secure one with the depth and ``precision`` bits, :func:`crossfhe.compile`); ``degree``: the degree
      of every activation, or ``{kind: degree}`` (default 15: 5 levels each).
    - ``"tfhe"``: post-training quantization (:mod:`crossfhe.ml.tfhe`): inputs to ``input_bits`` bits, each
      activation one lookup that also requantizes to ``act_bits`` bits (None: the pair that agrees best with the
      float model on the samples), integer weights up to ``weight_max``. ``params``: a TFHE preset (default P8:
      8-bit lookups). The encrypted outputs equal the quantized model's (``predict_approximated``) exactly.

    ``final_softmax``: ``"drop"`` leaves out a final Softmax (the logits keep its argmax); ``"client"`` leaves it
    out of the encrypted program and applies it to the decrypted logits. ``check``: how many of the samples to run
    encrypted at compile time (keys are made for it; 0: none), compared in ``report`` with the float model.
    ``progress``: the stages (calibrate, compile, keys and check) as :mod:`crossfhe.progress` describes (default
    ``"auto"``: a bar once compiling has run for two seconds). ModelError names a node that cannot be compiled, its
    operation, the file and what to do."""
    net = read_onnx(model, final_softmax=final_softmax)
    return compile_network(net, sample_inputs, scheme=scheme, params=params, degree=degree, margin=margin,
                           precision=precision, input_bits=input_bits, act_bits=act_bits, weight_max=weight_max,
                           check=check, seed=seed, progress=progress)


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
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the TorchScript exporter: the one with opset 20 Gelu
        torch.onnx.export(module, (x[:1],), buf, opset_version=opset, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, dynamo=False)
    return compile_onnx(buf.getvalue(), x.detach().cpu().numpy(), **options)


def _name(where: str) -> str:
    base = where.replace("\\", "/").rsplit("/", 1)[-1]
    return base[:-5] if base.endswith(".onnx") else base or "model"


def _params_name(params) -> str:
    from crossfhe.ckks import presets

    return presets.name_of(params) or f"N {params.n}, {params.levels} levels"
