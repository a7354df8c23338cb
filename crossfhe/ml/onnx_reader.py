"""ONNX models read into a :class:`crossfhe.ml.network.Network`.

The graph must have one input that varies (its first axis the batch; the others fixed) and one output. Nodes are
read in the graph's order. Between two non-linear steps every node is affine in the last non-linear step's output
z, so each tensor is kept as the stack ``T = [t(0); t(e_1) - t(0); ...]`` of its value at z = 0 and its response
to each unit vector of z (``[1 + len(z), *shape]``): a linear node applies to every row, its constant term to the
first only. At a non-linear node T becomes one :class:`~crossfhe.ml.network.Affine` layer (W = the responses,
b = the value at 0) followed by the :class:`~crossfhe.ml.network.Nonlinear` one. So convolutions, pools, batch
normalizations, reshapes and constant arithmetic fold into the dense W they amount to, whatever their order.

Supported (affine): Gemm, MatMul (the varying operand first), Conv (2-D; strides, pads, dilations, groups),
AveragePool, GlobalAveragePool, BatchNormalization (inference), Add / Sub / Mul / Div by constants, Add / Sub of two
tensors between the same non-linear steps, Flatten (axis 1), Reshape, Transpose (batch axis kept first), Squeeze /
Unsqueeze (not the batch axis), Identity, Dropout (inference); non-linear: Relu, LeakyRelu, Sigmoid, Tanh, Gelu
(exact or tanh form), Softplus, x * x and Pow(x, 2) (exact squares); the final Softmax may be dropped
(``final_softmax="drop"``: the logits keep its argmax) or applied after decryption (``"client"``). Constant
subgraphs (Shape, Gather, Concat, Cast, ...) are evaluated. Anything else raises
:class:`~crossfhe.ml.network.ModelError` naming the node, its operation, the file and what to do instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from crossfhe.ml.network import Affine, ModelError, Network, Nonlinear

NONLINEAR = {"Relu": "relu", "LeakyRelu": "leaky_relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Softplus": "softplus"}

ADVICE = {
    "MaxPool": "an encrypted maximum needs comparisons; replace it with AveragePool (and retrain)",
    "GlobalMaxPool": "an encrypted maximum needs comparisons; replace it with GlobalAveragePool (and retrain)",
    "Softmax": "if it is the model's last step, compile with final_softmax='client' (applied in the clear after "
               "decryption) or 'drop' (the logits keep its argmax); inside a model it needs a division by an "
               "encrypted sum",
    "LogSoftmax": "if it is the model's last step, compile with final_softmax='client' (applied after decryption) "
                  "or 'drop' (the logits keep its argmax)",
    "LayerNormalization": "it divides by an encrypted statistic; use BatchNormalization (folded into the neighbouring "
                          "layer at inference)",
    "Erf": "export GELU as one Gelu node (opset 20: torch.onnx.export(..., opset_version=20))",
    "Max": "an encrypted maximum needs comparisons",
    "Min": "an encrypted minimum needs comparisons",
    "Abs": "|x| needs comparisons; replace it with a smooth activation",
    "Exp": "use Sigmoid, Tanh or Softplus, which are approximated on the calibrated range",
}


def _onnx():
    try:
        import onnx
    except ImportError:
        raise ModelError("reading ONNX models needs the onnx package: pip install 'crossfhe[onnx]'") from None
    return onnx


@dataclass
class _Varying:
    """A tensor affine in the current z: rows [value at 0, responses to z's unit vectors], shape [1 + |z|, *s]."""

    t: np.ndarray
    epoch: int
    name: str

    @property
    def shape(self) -> tuple[int, ...]:
        return self.t.shape[1:]


def _fresh(shape: tuple[int, ...], epoch: int, name: str) -> _Varying:
    n = int(np.prod(shape, dtype=np.int64))
    t = np.concatenate([np.zeros((1, n)), np.eye(n)]).reshape((1 + n,) + tuple(shape))
    return _Varying(t, epoch, name)


def _is_identity(t: np.ndarray) -> bool:
    n = t.shape[0] - 1
    flat = t.reshape(n + 1, -1)
    return flat.shape[1] == n and not flat[0].any() and np.array_equal(flat[1:], np.eye(n))


def load_model(model):
    """An ``onnx.ModelProto`` from a path, bytes or a ModelProto, and the name to report it by."""
    onnx = _onnx()
    if isinstance(model, onnx.ModelProto):
        return model, model.graph.name or "model"
    if isinstance(model, (bytes, bytearray)):
        try:
            return onnx.load_from_string(bytes(model)), "model"
        except Exception as e:  # onnx raises DecodeError and others from protobuf
            raise ModelError(f"the bytes given are not an ONNX model ({type(e).__name__}: {e})") from None
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.isfile(path):
            raise ModelError(f"{path}: no such ONNX file")
        try:
            return onnx.load(path), path
        except Exception as e:
            raise ModelError(f"{path}: not an ONNX model ({type(e).__name__}: {e})") from None
    raise ModelError(f"expected an ONNX model (a path, bytes or onnx.ModelProto), got {type(model).__name__}")


class _Reader:
    def __init__(self, proto, where: str, final_softmax: str):
        self.onnx = _onnx()
        self.proto, self.where, self.final_softmax, self.final = proto, where, final_softmax, ""
        self.layers: list = []
        self.pending: list[str] = []  # the sources folded into the current affine map
        self.values: dict = {}
        self.epoch = 0

    def fail(self, index: int, node, problem: str, advice: str | None = None):
        label = f"node {index} {node.name!r} ({node.op_type})" if node is not None else "the graph"
        advice = advice or ADVICE.get(getattr(node, "op_type", ""), "")
        raise ModelError(f"{self.where}: {label}: {problem}" + (f"; {advice}" if advice else ""))

    # inputs and constants -----------------------------------------------------------------------------

    def read_inputs(self):
        g = self.proto.graph
        from onnx import numpy_helper

        for init in g.initializer:
            a = numpy_helper.to_array(init)
            self.values[init.name] = a.astype(np.float64) if a.dtype.kind == "f" else a
        varying = [i for i in g.input if i.name not in self.values]
        if len(varying) != 1:
            names = [i.name for i in varying]
            raise ModelError(f"{self.where}: the graph has {len(varying)} inputs that are not weights ({names}); "
                             "crossfhe.ml compiles models of one input")
        inp = varying[0]
        dims = inp.type.tensor_type.shape.dim
        shape = []
        for k, d in enumerate(dims):
            if k == 0:
                continue  # the batch axis, symbolic or fixed
            if not d.HasField("dim_value") or d.dim_value <= 0:
                raise ModelError(f"{self.where}: input {inp.name!r} has no fixed size on axis {k} ({d.dim_param!r}); "
                                 "export the model with fixed sizes beyond the batch axis")
            shape.append(int(d.dim_value))
        if len(dims) < 2:
            raise ModelError(f"{self.where}: input {inp.name!r} has {len(dims)} axes; the model must take a batch "
                             "axis and at least one more")
        self.input_shape = tuple(shape)
        self.values[inp.name] = _fresh(self.input_shape, self.epoch, inp.name)
        if len(g.output) != 1:
            raise ModelError(f"{self.where}: the graph has {len(g.output)} outputs; crossfhe.ml compiles models of one")

    def attrs(self, node) -> dict:
        return {a.name: self.onnx.helper.get_attribute_value(a) for a in node.attribute}

    def get(self, index, node, name):
        if name == "":
            return None
        if name not in self.values:
            self.fail(index, node, f"its input {name!r} is not produced by any earlier node")
        return self.values[name]

    # the affine map and the non-linear steps ------------------------------------------------------------

    def materialize(self, v: _Varying, source: str):
        """Close the current affine map at v: an Affine layer (unless it is the identity), then a new epoch."""
        n = v.t.shape[0] - 1
        flat = v.t.reshape(n + 1, -1)
        if not _is_identity(v.t):
            self.layers.append(Affine(np.ascontiguousarray(flat[1:].T), flat[0].copy(),
                                      " + ".join(self.pending) or "identity"))
        self.pending = []
        return flat.shape[1]

    def nonlinear(self, index, node, v, kind: str, alpha: float = 0.0):
        if v.epoch != self.epoch:
            self.fail(index, node, "its input comes from before the last non-linear step",
                      "a branch that skips a non-linear step (a residual connection) is not supported yet")
        label = f"{node.op_type} {node.name!r}" if node.name else node.op_type
        if self.pending and self.pending[-1] == label:
            self.pending.pop()
        self.materialize(v, node.op_type)
        self.layers.append(Nonlinear(kind, float(alpha), f"{node.op_type} {node.name!r}"))
        self.epoch += 1
        return _fresh(v.shape, self.epoch, node.output[0])

    # one node --------------------------------------------------------------------------------------

    def node(self, index: int, node, last: bool):
        ins = [self.get(index, node, n) for n in node.input]
        op, at = node.op_type, self.attrs(node)
        varying = [x for x in ins if isinstance(x, _Varying)]
        if not varying:
            return [self.constant(index, node, ins, at)]
        self.pending.append(f"{op} {node.name!r}" if node.name else op)
        x = ins[0]
        if op == "Shape":  # of a varying tensor: its shape with a batch of 1
            self.pending.pop()
            return [np.asarray((1,) + x.shape, dtype=np.int64)]
        if op in ("Identity", "Dropout"):
            return [x] + ([None] * (len(node.output) - 1))
        if op in NONLINEAR:
            return [self.nonlinear(index, node, x, NONLINEAR[op], at.get("alpha", 0.01))]
        if op == "Gelu":
            kind = "gelu_tanh" if at.get("approximate", b"none") in (b"tanh", "tanh") else "gelu"
            return [self.nonlinear(index, node, x, kind)]
        if op in ("Softmax", "LogSoftmax"):
            if last and self.final_softmax in ("drop", "client"):
                self.pending.pop()
                if self.final_softmax == "client":
                    self.final = "softmax" if op == "Softmax" else "log_softmax"
                return [x]
            self.fail(index, node, "it has no polynomial form")
        if op == "Pow":
            if isinstance(ins[1], _Varying) or not np.all(np.asarray(ins[1]) == 2):
                self.fail(index, node, "only x ** 2 is supported", "other powers: write them as products")
            return [self.nonlinear(index, node, x, "square")]
        if op in ("Add", "Sub", "Mul", "Div"):
            return [self.arithmetic(index, node, op, ins)]
        if isinstance(ins[0], np.ndarray) or any(isinstance(y, _Varying) for y in ins[1:]):
            self.fail(index, node, "its weights or shape inputs vary with the model's input",
                      "only the first input of this operation may depend on the data")
        t = x.t
        if op == "Gemm":
            if at.get("transA", 0):
                self.fail(index, node, "transA=1 on the data input is not supported")
            w = ins[1].T if at.get("transB", 0) else ins[1]
            if t.ndim != 2:
                self.fail(index, node, f"its data input has sample shape {x.shape}; Gemm takes [batch, n]")
            self.fits(index, node, t, w)
            out = at.get("alpha", 1.0) * (t @ w)
            if len(ins) > 2 and ins[2] is not None:
                out[0] = out[0] + at.get("beta", 1.0) * np.asarray(ins[2], dtype=np.float64).reshape(-1)
            return [self.same(x, out)]
        if op == "MatMul":
            w = np.asarray(ins[1], dtype=np.float64)
            if w.ndim != 2:
                self.fail(index, node, f"its weight has {w.ndim} axes; a matrix is supported")
            self.fits(index, node, t, w)
            return [self.same(x, t @ w)]
        if op == "Conv":
            return [self.same(x, self.conv(index, node, t, ins[1], ins[2] if len(ins) > 2 else None, at))]
        if op == "AveragePool":
            return [self.same(x, self.avgpool(index, node, t, at))]
        if op == "GlobalAveragePool":
            if t.ndim < 3:
                self.fail(index, node, f"its input has sample shape {x.shape}; it pools over [C, H, W]")
            return [self.same(x, t.mean(axis=tuple(range(2, t.ndim)), keepdims=True))]
        if op == "BatchNormalization":
            return [self.same(x, self.batchnorm(index, node, t, ins[1:5], at))]
        if op == "Flatten":
            if at.get("axis", 1) != 1:
                self.fail(index, node, f"axis {at.get('axis')} would mix the batch axis", "flatten from axis 1")
            return [self.same(x, t.reshape(t.shape[0], -1))]
        if op == "Reshape":
            return [self.same(x, self.reshape(index, node, t, ins[1]))]
        if op == "Transpose":
            perm = list(at.get("perm", range(t.ndim)[::-1]))
            if perm[0] != 0:
                self.fail(index, node, f"perm {perm} moves the batch axis")
            return [self.same(x, np.transpose(t, perm))]
        if op in ("Squeeze", "Unsqueeze"):
            axes = at.get("axes", None)
            if axes is None and len(ins) > 1 and ins[1] is not None:
                axes = [int(a) for a in np.asarray(ins[1]).reshape(-1)]
            axes = [a % (t.ndim + (len(axes) if op == "Unsqueeze" else 0)) for a in (axes or [])]
            if 0 in axes or (op == "Squeeze" and not axes):
                self.fail(index, node, "it would change the batch axis", "give axes beyond the batch axis")
            return [self.same(x, np.expand_dims(t, tuple(axes)) if op == "Unsqueeze" else np.squeeze(t, tuple(axes)))]
        self.fail(index, node, "this operation is not supported by crossfhe.ml",
                  ADVICE.get(op, "supported: " + ", ".join(SUPPORTED)))

    def fits(self, index, node, t, w):
        if t.shape[-1] != w.shape[0]:
            self.fail(index, node, f"its weight takes {w.shape[0]} values, its data input has {t.shape[-1]} (sample "
                      f"shape {t.shape[1:]})")

    def same(self, x: _Varying, t: np.ndarray) -> _Varying:
        return _Varying(np.asarray(t, dtype=np.float64), x.epoch, x.name)

    def arithmetic(self, index, node, op, ins):
        a, b = ins[0], ins[1]
        if isinstance(a, _Varying) and isinstance(b, _Varying):
            if a.epoch != b.epoch:
                self.fail(index, node, "its operands come from different non-linear steps",
                          "a branch that skips a non-linear step (a residual connection) is not supported yet")
            if op in ("Add", "Sub"):
                return self.same(a, a.t + b.t if op == "Add" else a.t - b.t)
            if op == "Mul" and node.input[0] == node.input[1]:
                return self.nonlinear(index, node, a, "square")
            self.fail(index, node, "a product or quotient of two values that depend on the data is not supported",
                      "x * x (the same tensor) is: an exact square")
        v, c = (a, b) if isinstance(a, _Varying) else (b, a)
        c = np.asarray(c, dtype=np.float64)
        if c.ndim > len(v.shape):  # a constant with the batch axis: it must be 1 there
            if c.shape[0] != 1:
                self.fail(index, node, f"its constant has shape {c.shape}, one per batch item")
            c = c[0]
        t = v.t.copy()
        if op == "Add":
            t[0] = t[0] + c
        elif op == "Sub":
            if v is a:
                t[0] = t[0] - c
            else:
                t = -t
                t[0] = t[0] + c
        elif op == "Mul":
            t = t * c
        else:
            if v is not a:
                self.fail(index, node, "division by a value that depends on the data has no polynomial form")
            if np.any(c == 0):
                self.fail(index, node, "division by a constant that holds zeros")
            t = t / c
        if t.shape[1:] != tuple(np.broadcast_shapes(v.shape, c.shape)):
            self.fail(index, node, f"its constant of shape {c.shape} broadcasts the sample shape {v.shape} to "
                      f"{np.broadcast_shapes(v.shape, c.shape)}")
        return self.same(v, t)

    def conv(self, index, node, t, w, b, at):
        w = np.asarray(w, dtype=np.float64)
        if t.ndim != 4 or w.ndim != 4:
            self.fail(index, node, f"sample shape {t.shape[1:]}, kernel {w.shape}: 2-D convolutions ([C, H, W]) are "
                      "supported")
        if at.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            self.fail(index, node, "auto_pad is not supported", "export with explicit pads")
        group = int(at.get("group", 1))
        sh, sw = at.get("strides", [1, 1])
        dh, dw = at.get("dilations", [1, 1])
        pt, pl, pb, pr = at.get("pads", [0, 0, 0, 0])
        c_in = t.shape[1]
        if c_in % group or w.shape[0] % group or w.shape[1] * group != c_in:
            self.fail(index, node, f"kernel {w.shape} with group {group} does not fit {c_in} input channels")
        x = np.pad(t, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
        kh, kw = w.shape[2], w.shape[3]
        eh, ew = (kh - 1) * dh + 1, (kw - 1) * dw + 1
        win = np.lib.stride_tricks.sliding_window_view(x, (eh, ew), axis=(2, 3))[:, :, ::sh, ::sw, ::dh, ::dw]
        outs = []
        per_in, per_out = c_in // group, w.shape[0] // group
        for g in range(group):
            xs = win[:, g * per_in:(g + 1) * per_in]
            ws = w[g * per_out:(g + 1) * per_out]
            outs.append(np.einsum("bchwij,ocij->bohw", xs, ws, optimize=True))
        out = np.concatenate(outs, axis=1)
        if b is not None:
            out[0] = out[0] + np.asarray(b, dtype=np.float64).reshape(-1, 1, 1)
        return out

    def avgpool(self, index, node, t, at):
        if t.ndim != 4:
            self.fail(index, node, f"sample shape {t.shape[1:]}: 2-D pooling ([C, H, W]) is supported")
        kh, kw = at["kernel_shape"]
        sh, sw = at.get("strides", [1, 1])
        pt, pl, pb, pr = at.get("pads", [0, 0, 0, 0])
        if at.get("ceil_mode", 0):
            self.fail(index, node, "ceil_mode=1 is not supported")
        x = np.pad(t, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
        ones = np.pad(np.ones(t.shape[2:]), ((pt, pb), (pl, pr)))
        win = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
        sums = win.sum(axis=(-2, -1))
        if at.get("count_include_pad", 0):
            return sums / (kh * kw)
        counts = np.lib.stride_tricks.sliding_window_view(ones, (kh, kw))[::sh, ::sw].sum(axis=(-2, -1))
        return sums / counts

    def batchnorm(self, index, node, t, params, at):
        scale, bias, mean, var = (np.asarray(p, dtype=np.float64).reshape(-1) for p in params)
        if t.ndim < 2 or scale.shape[0] != t.shape[1]:
            self.fail(index, node, f"{scale.shape[0]} channels for sample shape {t.shape[1:]}")
        k = scale / np.sqrt(var + at.get("epsilon", 1e-5))
        shape = (1, -1) + (1,) * (t.ndim - 2)
        out = t * k.reshape(shape)
        out[0] = out[0] + (bias - mean * k).reshape(shape[1:])
        return out

    def reshape(self, index, node, t, shape):
        target = [int(s) for s in np.asarray(shape).reshape(-1)]
        if not target:
            self.fail(index, node, "a reshape to a scalar drops the batch axis")
        sample = list(t.shape[1:])
        rest = target[1:]
        if target[0] not in (0, 1, -1):
            self.fail(index, node, f"shape {target} sets the batch axis to {target[0]}",
                      "keep the batch axis first (0 or -1)")
        rest = [sample[k] if s == 0 and k < len(sample) else s for k, s in enumerate(rest)]
        n = int(np.prod(sample, dtype=np.int64))
        if target[0] == -1 and -1 not in rest:
            if int(np.prod(rest, dtype=np.int64)) != n:
                self.fail(index, node, f"shape {target} does not hold the sample's {n} values")
        try:
            return t.reshape([t.shape[0]] + rest)
        except ValueError:
            self.fail(index, node, f"shape {target} does not fit the sample shape {tuple(sample)}")

    def constant(self, index, node, ins, at):
        """A node whose inputs are all constant: evaluated (Constant, Shape, Gather, Concat, Cast, arithmetic)."""
        op = node.op_type
        from onnx import numpy_helper

        if op == "Constant":
            if "value" in at:
                return numpy_helper.to_array(at["value"])
            for key in ("value_float", "value_int", "value_floats", "value_ints"):
                if key in at:
                    return np.asarray(at[key])
            self.fail(index, node, "this Constant form is not supported")
        if op == "Shape":
            x = ins[0]
            return np.asarray(x.shape, dtype=np.int64)
        a = [np.asarray(x) if x is not None else None for x in ins]
        try:
            if op in ("Identity", "Cast"):
                return a[0]
            if op == "Gather":
                return np.take(a[0], a[1].astype(np.int64), axis=at.get("axis", 0))
            if op == "Concat":
                return np.concatenate([x.reshape(-1) if x.ndim == 0 else x for x in a], axis=at.get("axis", 0))
            if op == "Unsqueeze":
                axes = at.get("axes", a[1].reshape(-1).tolist() if len(a) > 1 else [])
                return np.expand_dims(a[0], tuple(int(k) for k in axes))
            if op == "Squeeze":
                axes = at.get("axes", a[1].reshape(-1).tolist() if len(a) > 1 else None)
                return np.squeeze(a[0], None if axes is None else tuple(int(k) for k in axes))
            if op in ("Add", "Sub", "Mul", "Div"):
                f = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}[op]
                return f(a[0], a[1])
            if op == "Reshape":
                return a[0].reshape([int(s) for s in a[1].reshape(-1)])
            if op == "Transpose":
                return np.transpose(a[0], at.get("perm"))
        except (ValueError, IndexError, TypeError) as e:
            self.fail(index, node, f"evaluating it on its constant inputs failed ({e})")
        self.fail(index, node, "this operation on constants is not supported",
                  ADVICE.get(op, "fold it into the weights before export (onnx-simplifier does)"))

    def read(self) -> Network:
        self.read_inputs()
        g = self.proto.graph
        nodes = list(g.node)
        out_name = g.output[0].name
        for i, node in enumerate(nodes):
            results = self.node(i, node, last=node.output[0] == out_name)
            for name, value in zip(node.output, results):
                if name:
                    self.values[name] = value
        out = self.values.get(out_name)
        if not isinstance(out, _Varying):
            raise ModelError(f"{self.where}: the output {out_name!r} does not depend on the input")
        if out.epoch != self.epoch:
            raise ModelError(f"{self.where}: the output {out_name!r} does not come after the last non-linear step")
        self.materialize(out, "output")
        return Network(tuple(self.layers), self.input_shape, self.where, tuple(out.shape), self.final)


SUPPORTED = ("Gemm", "MatMul", "Conv", "AveragePool", "GlobalAveragePool", "BatchNormalization", "Add", "Sub", "Mul",
             "Div", "Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Identity", "Dropout", "Relu",
             "LeakyRelu", "Sigmoid", "Tanh", "Gelu", "Softplus", "Pow (x ** 2)")
"""The ONNX operations a varying tensor may pass through (module docstring)."""


def read_onnx(model, *, final_softmax: str = "error") -> Network:
    """The :class:`~crossfhe.ml.network.Network` of an ONNX model (a path, bytes or ``onnx.ModelProto``).
    ``final_softmax``: ``"error"`` (a Softmax anywhere is refused), ``"drop"`` (a Softmax or LogSoftmax that
    makes the model's output is left out: the network returns the logits, whose argmax is the same) or
    ``"client"`` (it is left out of the encrypted program and applied in the clear to the decrypted logits:
    :attr:`Network.final`; the key owner sees the probabilities, the server never does). ModelError
    names the first node that cannot be read, its operation, the file and what to do instead."""
    if final_softmax not in ("error", "drop", "client"):
        raise ModelError(f"final_softmax is 'error', 'drop' or 'client', got {final_softmax!r}")
    proto, where = load_model(model)
    return _Reader(proto, where, final_softmax).read()
