"""A compiled model's client side, and running a model from its exported file.

:class:`ClientSpec` is what the key owner needs besides the circuit: the samples' shape, how a sample becomes the
circuit's inputs (CKKS: zero-padded to the vector length d; TFHE: each value on its input grid), and how the
circuit's decrypted outputs become the model's (CKKS: the first ``n_out`` slots; TFHE: the lookups' grid values,
or the output layer's accumulator parts added and scaled), then the model's final step in the clear (a softmax).
It travels inside the exported circuit file (:meth:`crossfhe.ml.CompiledModel.export`, the header's ``model``
field) as a JSON object, checked field by field on load.

:func:`load` reads such a file into a :class:`LoadedModel`: the same ``keygen``, ``encrypt``, ``run``, ``decrypt``
and ``predict`` as the compiled model, without the model's weights (a TFHE output layer's per-output scale and
offset excepted) and without compiling.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from crossfhe.errors import ParameterError, SerializationError
from crossfhe.ml.network import as_samples, finish

FORMAT = 1
"""The version of the ``model`` object's layout."""

FINALS = ("", "softmax", "log_softmax")

HOWS = ("", "value", "label", "binary_proba", "binary_raw")
"""How an estimator's decision values become its predictions (:func:`labels`); "" for a network's outputs."""


@dataclass(frozen=True)
class Encoder:
    """A feature's encoding as a TFHE input: ``cuts`` (sorted thresholds: q = how many are below x) or a uniform
    grid ``lo + step q``, q in [0, 2^bits); ``strict``: the model splits on x < t (XGBoost) rather than x <= t.
    ``digit`` (shift s, width w): the input is one digit of q, (q >> s) mod 2^w (a feature sent as two inputs, its
    high and low digits); None: q whole."""

    bits: int
    cuts: np.ndarray | None = None
    lo: float = 0.0
    step: float = 1.0
    strict: bool = False
    digit: tuple[int, int] | None = None

    @property
    def input_bits(self) -> int:
        """The width of the circuit input: the digit's, or ``bits``."""
        return self.digit[1] if self.digit else self.bits

    def __call__(self, x: np.ndarray) -> np.ndarray:
        q = self.quantize(x)
        if self.digit is None:
            return q
        s, w = self.digit
        return (q >> s) & ((1 << w) - 1)

    def quantize(self, x: np.ndarray) -> np.ndarray:
        """q in [0, 2^bits) of the feature values ``x`` (int64, x's shape), before any digit is taken."""
        if self.cuts is not None:  # how many cuts lie below x (strict splits: at or below)
            return np.searchsorted(self.cuts, x, side="right" if self.strict else "left").astype(np.int64)
        return np.clip(np.rint((x - self.lo) / self.step), 0, (1 << self.bits) - 1).astype(np.int64)

    def threshold(self, t: float) -> int:
        """The integer k with [x <= t] = [q <= k] (``strict``: [x < t] = [q <= k]), the quantized model's split."""
        if self.cuts is not None:
            return int(np.searchsorted(self.cuts, t, side="left"))
        if self.strict:
            return int(np.ceil((t - self.lo) / self.step - 1e-9)) - 1
        return int(np.floor((t - self.lo) / self.step + 1e-9))

    def to_json(self, feature: int) -> dict:
        out = {"feature": int(feature), "bits": self.bits, "strict": self.strict}
        if self.digit is not None:
            out["digit"] = list(self.digit)
        if self.cuts is not None:
            out["cuts"] = self.cuts.tolist()
        else:
            out.update(lo=self.lo, step=self.step)
        return out


def labels(how: str, classes, scores: np.ndarray) -> np.ndarray:
    """An estimator's predictions from its decision values ``scores`` ``[n, k]``: ``"value"`` the values (``[n]``
    for one), ``"label"`` the class of the largest score, ``"binary_proba"`` / ``"binary_raw"`` the second class
    where the one score exceeds 0.5 / 0."""
    if how == "value":
        return scores[:, 0] if scores.shape[1] == 1 else scores
    if how == "label":
        return classes[np.argmax(scores, axis=1)]
    cut = 0.5 if how == "binary_proba" else 0.0
    return classes[(scores[:, 0] > cut).astype(np.int64)]


@dataclass(frozen=True)
class ClientSpec:
    """The client side of a compiled model (module docstring). ``out_parts``: int64 ``[parts, 2]`` (output index,
    offset) when a TFHE model's outputs are parts added after decryption (a network's accumulator parts, a tree
    model's partial sums), with ``out_scale`` / ``out_bias`` per output;
    ``out_lo`` / ``out_step`` when they are lookups' grid indices. A tree model's inputs: ``encoders``, (feature,
    :class:`Encoder`) per circuit input. An estimator's: ``how`` its decision values become predictions
    (:func:`labels`) and its ``classes``."""

    scheme: str
    name: str
    params: str
    input_shape: tuple
    n_out: int
    final: str = ""
    d: int = 0
    in_lo: np.ndarray | None = None
    in_step: np.ndarray | None = None
    in_bits: int = 0
    out_lo: np.ndarray | None = None
    out_step: np.ndarray | None = None
    out_parts: np.ndarray | None = None
    out_scale: np.ndarray | None = None
    out_bias: np.ndarray | None = None
    encoders: tuple = ()
    how: str = ""
    classes: np.ndarray | None = None

    @property
    def n_in(self) -> int:
        return int(np.prod(self.input_shape, dtype=np.int64))

    # samples and values ------------------------------------------------------------------------

    def samples(self, x, what: str = "x") -> np.ndarray:
        """x as float64 ``[B, n_in]`` (:func:`crossfhe.ml.network.as_samples`)."""
        return as_samples(x, self.input_shape, self.name, what)

    def one(self, x) -> bool:
        return np.shape(x) in (tuple(self.input_shape), (self.n_in,))

    def encode(self, a: np.ndarray) -> list[np.ndarray]:
        """The circuit's inputs for samples ``a`` ``[B, n_in]``: CKKS one float64 ``[B, d]``; TFHE one int64 ``[B]``
        per input value (round((x - lo) / step) clipped to [0, 2^bits))."""
        if self.scheme == "ckks":
            v = np.zeros((a.shape[0], self.d))
            v[:, : a.shape[1]] = a
            return [v]
        if self.encoders:
            return [e(a[:, f]) for f, e in self.encoders]
        q = np.clip(np.rint((a - self.in_lo) / self.in_step), 0, (1 << self.in_bits) - 1).astype(np.int64)
        return list(q.T)

    def values(self, outputs) -> np.ndarray:
        """The model's outputs (before :attr:`final`) from the circuit's decrypted outputs (as ``Circuit.decrypt``
        returns them): float64 ``[B, n_out]``."""
        if self.scheme == "ckks":
            return np.asarray(outputs)[..., : self.n_out].real.astype(np.float64)
        outs = [outputs] if isinstance(outputs, np.ndarray) else list(outputs)
        ints = np.stack([np.asarray(o, dtype=np.int64) for o in outs], axis=-1)
        if self.out_parts is None:
            return self.out_lo + self.out_step * ints
        acc = np.zeros((ints.shape[0], self.n_out), dtype=np.int64)
        for c, (k, off) in enumerate(self.out_parts):
            acc[:, k] += ints[:, c] - off
        return self.out_scale * acc + self.out_bias

    def finish(self, y: np.ndarray) -> np.ndarray:
        """The model's final step on its outputs: an estimator's predictions (:func:`labels`), else :attr:`final`."""
        return labels(self.how, self.classes, y) if self.how else finish(self.final, y)

    # JSON ----------------------------------------------------------------------------------------

    def to_json(self) -> dict:
        out = {"format": FORMAT, "scheme": self.scheme, "name": self.name, "params": self.params,
               "input_shape": list(self.input_shape), "n_out": self.n_out, "final": self.final}
        if self.how:
            out["predict"] = {"how": self.how}
            if self.classes is not None:
                out["predict"].update(classes=self.classes.tolist(), kind=_label_kind(self.classes.tolist()))
        if self.scheme == "ckks":
            out["d"] = self.d
            return out
        if self.encoders:
            out["input"] = {"encoders": [e.to_json(f) for f, e in self.encoders]}
        else:
            out["input"] = {"lo": self.in_lo.tolist(), "step": self.in_step.tolist(), "bits": self.in_bits}
        if self.out_parts is None:
            out["output"] = {"lo": self.out_lo.tolist(), "step": self.out_step.tolist()}
        else:
            out["output"] = {"parts": self.out_parts.tolist(), "scale": self.out_scale.tolist(),
                             "bias": self.out_bias.tolist()}
        return out

    @classmethod
    def from_json(cls, obj, source: str = "the model") -> ClientSpec:
        """The spec of a ``model`` object, every field checked (SerializationError naming it)."""

        def fail(what: str):
            raise SerializationError(f"{source}: the model's client side is malformed: {what}")

        def floats(v, n: int, what: str) -> np.ndarray:
            if not (isinstance(v, list) and len(v) == n and all(isinstance(t, (int, float)) and not isinstance(
                    t, bool) and math.isfinite(t) for t in v)):
                fail(f"{what} must be {n} finite numbers")
            return np.asarray(v, dtype=np.float64)

        def integer(v, what: str, lo: int, hi: int) -> int:
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                fail(f"{what} must be an int in [{lo}, {hi}], got {v!r}")
            return v

        if not isinstance(obj, dict):
            fail(f"expected a JSON object, got {type(obj).__name__}")
        if obj.get("format") != FORMAT:
            fail(f"format {obj.get('format')!r}; this crossfhe reads format {FORMAT}")
        scheme, name, params, final = (obj.get(k) for k in ("scheme", "name", "params", "final"))
        if scheme not in ("ckks", "tfhe"):
            fail(f"scheme must be 'ckks' or 'tfhe', got {scheme!r}")
        if not isinstance(name, str) or not isinstance(params, str):
            fail("name and params must be strings")
        if final not in FINALS:
            fail(f"final must be one of {list(FINALS)}, got {final!r}")
        shape = obj.get("input_shape")
        if not (isinstance(shape, list) and shape and all(isinstance(s, int) and not isinstance(s, bool) and s > 0
                                                          for s in shape)):
            fail("input_shape must be a non-empty list of positive ints")
        n_in = int(np.prod(shape))
        n_out = integer(obj.get("n_out"), "n_out", 1, 1 << 20)
        predict = _predict_from_json(obj.get("predict"), n_out, fail)
        if scheme == "ckks":
            d = integer(obj.get("d"), "d", max(n_in, n_out), 1 << 20)
            return cls(scheme, name, params, tuple(shape), n_out, final, d=d, **predict)
        inp, out = obj.get("input"), obj.get("output")
        if not isinstance(inp, dict) or not isinstance(out, dict):
            fail("a TFHE model needs 'input' and 'output' objects")
        if "encoders" in inp:
            common = dict(d=0, encoders=_encoders_from_json(inp["encoders"], n_in, floats, integer, fail), **predict)
        else:
            bits = integer(inp.get("bits"), "input bits", 1, 16)
            lo, step = floats(inp.get("lo"), n_in, "input lo"), floats(inp.get("step"), n_in, "input step")
            if np.any(step <= 0):
                fail("input steps must be positive")
            common = dict(d=0, in_lo=lo, in_step=step, in_bits=bits, **predict)
        if "parts" in out:
            parts = out["parts"]
            if not (isinstance(parts, list) and parts and all(
                    isinstance(p, list) and len(p) == 2 and all(isinstance(t, int) and not isinstance(t, bool)
                                                                for t in p) and 0 <= p[0] < n_out for p in parts)):
                fail("output parts must be a non-empty list of [output index, offset] int pairs")
            return cls(scheme, name, params, tuple(shape), n_out, final, **common,
                       out_parts=np.asarray(parts, dtype=np.int64),
                       out_scale=floats(out.get("scale"), n_out, "output scale"),
                       out_bias=floats(out.get("bias"), n_out, "output bias"))
        return cls(scheme, name, params, tuple(shape), n_out, final, **common,
                   out_lo=floats(out.get("lo"), n_out, "output lo"), out_step=floats(out.get("step"), n_out,
                                                                                     "output step"))


def _label_kind(values: list) -> str:
    """The JSON kind of a list of class labels; ParameterError for labels a file cannot hold (mixed types, objects)."""
    for kind, test in (("bool", lambda v: isinstance(v, bool)),
                       ("int", lambda v: isinstance(v, int) and not isinstance(v, bool)),
                       ("float", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
                        and math.isfinite(v)),
                       ("str", lambda v: isinstance(v, str))):
        if all(test(v) for v in values):
            return kind
    raise ParameterError(f"the classes {values[:4]!r}... are not all ints, floats, strings or booleans: a model file "
                         "cannot hold them; relabel them before fitting")


def _predict_from_json(obj, n_out: int, fail) -> dict:
    """The ``how`` and ``classes`` fields of a ``predict`` object (absent: a network's outputs)."""
    if obj is None:
        return {}
    if not isinstance(obj, dict) or obj.get("how") not in HOWS[1:]:
        fail(f"predict.how must be one of {list(HOWS[1:])}")
    how = obj["how"]
    if how == "value":
        return {"how": how}
    classes, kind = obj.get("classes"), obj.get("kind")
    types = {"int": int, "float": (int, float), "str": str, "bool": bool}
    if kind not in types or not (isinstance(classes, list) and len(classes) >= 2 and all(
            isinstance(c, types[kind]) and (kind == "bool" or not isinstance(c, bool)) for c in classes)):
        fail("predict.classes must be a list of at least two labels of its kind ('int', 'float', 'str' or 'bool')")
    if len(classes) != (n_out if how == "label" else 2):
        fail(f"predict.classes holds {len(classes)} labels for {n_out} outputs read as {how!r}")
    dtype = {"int": np.int64, "float": np.float64, "str": str, "bool": bool}[kind]
    return {"how": how, "classes": np.asarray(classes, dtype=dtype)}


def _encoders_from_json(obj, n_in: int, floats, integer, fail) -> tuple:
    """(feature, :class:`Encoder`) pairs of an ``input.encoders`` list, every field checked."""
    if not (isinstance(obj, list) and obj):
        fail("input.encoders must be a non-empty list")
    out = []
    for e in obj:
        if not isinstance(e, dict) or not isinstance(e.get("strict"), bool):
            fail("each input encoder is an object with a boolean 'strict'")
        f = integer(e.get("feature"), "an encoder's feature", 0, n_in - 1)
        bits = integer(e.get("bits"), "an encoder's bits", 1, 16)
        digit = e.get("digit")
        if digit is not None:
            if not (isinstance(digit, list) and len(digit) == 2):
                fail(f"feature {f}: digit must be [shift, width]")
            s = integer(digit[0], f"feature {f}'s digit shift", 0, bits - 1)
            digit = (s, integer(digit[1], f"feature {f}'s digit width", 1, bits - s))
        if "cuts" in e:
            cuts = e["cuts"]
            if not isinstance(cuts, list) or not 1 <= len(cuts) < (1 << bits):
                fail(f"feature {f}: cuts must be a list of 1 to {(1 << bits) - 1} numbers")
            cuts = floats(cuts, len(cuts), f"feature {f}'s cuts")
            if np.any(np.diff(cuts) <= 0):
                fail(f"feature {f}: cuts must be strictly increasing")
            out.append((f, Encoder(bits, cuts, strict=e["strict"], digit=digit)))
        else:
            lo, step = floats([e.get("lo"), e.get("step")], 2, f"feature {f}'s lo and step")
            if step <= 0:
                fail(f"feature {f}: the step must be positive")
            out.append((f, Encoder(bits, None, float(lo), float(step), strict=e["strict"], digit=digit)))
    return tuple(out)


class Runner:
    """What a compiled model and a loaded one share: the key owner's and the server's steps on ``self.circuit``
    with ``self.spec`` (a :class:`ClientSpec`)."""

    circuit: object
    spec: ClientSpec

    @property
    def params(self):
        return self.circuit.params

    def keygen(self, *, seed: bytes | None = None):
        """Make (once) and return the circuit's keys; ``seed``: 32 bytes for reproducible keys (tests only)."""
        if self.circuit.keys is None or seed is not None:
            self.circuit.keygen(seed=seed)
        return self.circuit.keys

    def encrypt(self, x, *, keys=None):
        """Samples x (one of the model's input shape, or a batch ``[B, ...]``) encrypted: what :meth:`run` takes
        (CKKS: one :class:`crossfhe.Encrypted` batch of B; TFHE: a list, one per input value). Each batch size is
        one compiled program (made on the first run of that size, then cached)."""
        if keys is None:
            self.keygen()
        return self._encrypt(self.spec.samples(x), keys)

    def _encrypt(self, a: np.ndarray, keys):
        enc = self.circuit.encrypt(*self.spec.encode(a), keys=keys)
        return enc[0] if self.spec.scheme == "ckks" else enc

    def run(self, enc, *, keys=None):
        """The model on encrypted samples (evaluation keys only): what :meth:`decrypt` takes."""
        if self.spec.scheme == "ckks":
            (out,) = self.circuit.run(enc, keys=keys)
            return out
        return self.circuit.run(*enc, keys=keys)

    def _values(self, out, keys) -> np.ndarray:
        dec = self.circuit.decrypt(*([out] if self.spec.scheme == "ckks" else out), keys=keys)
        return self.spec.values(dec)

    def decrypt(self, out, *, keys=None) -> np.ndarray:
        """The model's outputs, float64 ``[B, n_out]`` (the model's final step, e.g. a softmax read with
        ``final_softmax="client"``, applied here in the clear)."""
        return self.spec.finish(self._values(out, keys))

    def predict(self, x) -> np.ndarray:
        """``decrypt(run(encrypt(x)))`` with this model's keys (made if needed): ``[B, n_out]``, or ``[n_out]`` for
        one sample."""
        y = self.decrypt(self.run(self.encrypt(x)))
        return y[0] if self.spec.one(x) else y


@dataclass
class LoadedModel(Runner):
    """A model read from its exported file (:func:`load`): ``circuit`` (the loaded :class:`crossfhe.Circuit`) and
    ``spec``. A server runs :meth:`run` with the client's evaluation keys (``keys=``); the key owner runs the rest."""

    circuit: object
    spec: ClientSpec


def load(path, params=None) -> LoadedModel:
    """The model exported by :meth:`crossfhe.ml.CompiledModel.export` at ``path``; ``params``: the parameters it was
    compiled for (default: those its file carries, or for older files the preset it names). SerializationError for
    a file that is not a model's or is malformed; ParameterError for other parameters."""
    import os

    from crossfhe.api.circuit import load as load_circuit
    from crossfhe.io import circuit_file

    header, _ = circuit_file.read_circuit_file(path)
    source = os.fspath(path)
    if "model" not in header:
        raise SerializationError(f"{source} is an exported circuit, not a model (no client side): load it with "
                                 "crossfhe.load_circuit")
    spec = ClientSpec.from_json(header["model"], source)
    if spec.scheme != header["scheme"]:
        raise SerializationError(f"{source}: the model says {spec.scheme}, the circuit is {header['scheme']}")
    if params is None and "parameters" not in header:  # files of crossfhe before the header carried them
        params = _preset(spec)
    return LoadedModel(load_circuit(path, params), spec)


def _preset(spec: ClientSpec):
    if spec.scheme == "ckks":
        from crossfhe.ckks import presets
    else:
        from crossfhe.tfhe import presets
    found = getattr(presets, spec.params, None) if spec.params.isidentifier() else None
    if found is None or type(found).__name__ != "Params":
        raise ParameterError(f"{spec.name}: the model was compiled for parameters that are not a preset "
                             f"({spec.params or 'unnamed'}); pass them: load(path, params=...)")
    return found


__all__ = ["FORMAT", "HOWS", "ClientSpec", "Encoder", "LoadedModel", "Runner", "labels", "load"]
