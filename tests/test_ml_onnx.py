"""crossfhe.ml: ONNX models read into networks (against onnxruntime), calibrated polynomial plans, the clear errors
for what is not supported, and one model run encrypted (CKKS)."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import crossfhe.ml as ml
from crossfhe.ckks.params import Params, ParamsLiteral
from crossfhe.ml import ckks as ckks_ml

RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _fresh_rng():
    """Every test draws its weights and samples from RNG's first state, whichever tests ran before it (the model
    builders here are shared with tests/test_ml_tfhe.py)."""
    RNG.bit_generator.state = np.random.default_rng(7).bit_generator.state

# INSECURE (N 2^11): 8 levels for a dense layer, a degree-15 activation (5 levels) and a dense layer in seconds
TOY = Params.from_literal(ParamsLiteral(log_n=11, levels=8, log_scale=30, dnum=2, insecure=True))


def _w(*shape, scale=0.5):
    return (RNG.normal(size=shape) * scale).astype(np.float32)


def _model(nodes, inits, in_shape, out_shape, *, opset=17, name="g"):
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()]
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *in_shape])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", *out_shape])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m)
    return m


def _ort(m, x):
    return ort.InferenceSession(m.SerializeToString()).run(None, {"x": x.astype(np.float32)})[0]


def _mlp():
    return _model([helper.make_node("Gemm", ["x", "W1", "b1"], ["h"], name="fc1", transB=1),
                   helper.make_node("Relu", ["h"], ["a"], name="act"),
                   helper.make_node("Gemm", ["a", "W2", "b2"], ["y"], name="fc2", transB=1)],
                  {"W1": _w(16, 12, scale=0.4), "b1": _w(16, scale=0.1), "W2": _w(3, 16, scale=0.4),
                   "b2": _w(3, scale=0.1)}, [12], [3], name="mlp")


def _matmul_sigmoid():
    return _model([helper.make_node("MatMul", ["x", "W1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["h2"]),
                   helper.make_node("Sigmoid", ["h2"], ["a"]), helper.make_node("MatMul", ["a", "W2"], ["y"])],
                  {"W1": _w(10, 6), "b1": _w(6), "W2": _w(6, 4)}, [10], [4])


def _conv_bn_pool():
    return _model([
        helper.make_node("Conv", ["x", "K", "kb"], ["c"], name="conv", strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "bb", "mu", "var"], ["n"], name="bn", epsilon=1e-3),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("AveragePool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "W", "b"], ["y"], transB=1)],
        {"K": _w(3, 1, 3, 3), "kb": _w(3), "s": _w(3) + 1, "bb": _w(3), "mu": _w(3),
         "var": np.abs(_w(3)) + 0.5, "W": _w(5, 3 * 2 * 2), "b": _w(5)}, [1, 8, 8], [5])


def _grouped_conv_reshape():
    shape = numpy_helper.from_array(np.array([0, -1], dtype=np.int64), "shape")
    return _model([
        helper.make_node("Constant", [], ["shp"], value=shape),
        helper.make_node("Conv", ["x", "K"], ["c"], group=2, dilations=[2, 2], pads=[2, 1, 2, 1]),
        helper.make_node("Tanh", ["c"], ["t"]),
        helper.make_node("AveragePool", ["t"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Reshape", ["p", "shp"], ["f"]),
        helper.make_node("Gemm", ["f", "W"], ["y"], transB=1)],
        {"K": _w(4, 1, 2, 2), "W": _w(3, 4 * 4 * 3)}, [2, 6, 6], [3])


def _torch_style_flatten_and_constants():
    # Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as PyTorch exports x.view(x.size(0), -1)
    return _model([
        helper.make_node("Sub", ["x", "mean"], ["a"]), helper.make_node("Div", ["a", "std"], ["b"]),
        helper.make_node("Shape", ["b"], ["s"]), helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["t"], axis=0),
        helper.make_node("Reshape", ["b", "t"], ["f"]),
        helper.make_node("Mul", ["f", "g"], ["h"]), helper.make_node("LeakyRelu", ["h"], ["l"], alpha=0.2),
        helper.make_node("Transpose", ["l"], ["lt"], perm=[0, 1]),
        helper.make_node("Gemm", ["lt", "W"], ["z"], transB=1), helper.make_node("Softplus", ["z"], ["sp"]),
        helper.make_node("Identity", ["sp"], ["y"])],
        {"mean": _w(1, 2, 3), "std": np.abs(_w(1, 2, 3)) + 0.5, "zero": np.array(0, dtype=np.int64),
         "axes": np.array([0], dtype=np.int64), "minus1": np.array([-1], dtype=np.int64), "g": _w(6),
         "W": _w(4, 6)}, [2, 3], [4])


def _square_and_branches():
    return _model([
        helper.make_node("MatMul", ["x", "A"], ["u"]), helper.make_node("MatMul", ["x", "B"], ["v"]),
        helper.make_node("Add", ["u", "v"], ["w"]), helper.make_node("Mul", ["w", "w"], ["sq"]),
        helper.make_node("Pow", ["sq", "two"], ["q"]), helper.make_node("MatMul", ["q", "C"], ["y"])],
        {"A": _w(5, 4), "B": _w(5, 4), "two": np.array(2.0, dtype=np.float32), "C": _w(4, 2)}, [5], [2])


def _gelu():
    return _model([helper.make_node("Gemm", ["x", "W"], ["h"], transB=1), helper.make_node("Gelu", ["h"], ["g"]),
                   helper.make_node("Gelu", ["g"], ["y"], approximate="tanh")],
                  {"W": _w(4, 3)}, [3], [4], opset=20)


MODELS = {"mlp": _mlp, "matmul_sigmoid": _matmul_sigmoid, "conv_bn_pool": _conv_bn_pool,
          "grouped_conv_reshape": _grouped_conv_reshape, "torch_style": _torch_style_flatten_and_constants,
          "square_and_branches": _square_and_branches, "gelu": _gelu}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_read_network_matches_onnxruntime(name):
    m = MODELS[name]()
    net = ml.read_onnx(m)
    shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim[1:]]
    x = RNG.uniform(-1, 1, size=(9, *shape))
    ref = _ort(m, x).reshape(9, -1)
    # onnxruntime computes in float32 (about 2^-24 relative per operation); the network in float64
    assert np.abs(net.forward(x) - ref).max() <= 1e-5 * max(1.0, np.abs(ref).max())
    assert net.n_in == int(np.prod(shape)) and net.n_out == ref.shape[1]


def test_affine_steps_fold_into_one_layer_between_activations():
    net = ml.read_onnx(_conv_bn_pool())
    kinds = [type(layer).__name__ for layer in net.layers]
    assert kinds == ["Affine", "Nonlinear", "Affine"]  # Conv + BatchNormalization; AveragePool + Flatten + Gemm
    assert "Conv" in net.layers[0].source and "BatchNormalization" in net.layers[0].source
    assert net.layers[0].shape == (3 * 4 * 4, 64)


def _one(op, inputs, outputs, name, **attrs):
    return helper.make_node(op, inputs, outputs, name=name, **attrs)


ERRORS = {
    "maxpool": (lambda: _model([_one("MaxPool", ["x"], ["y"], "pool1", kernel_shape=[2, 2])], {}, [1, 4, 4],
                               [1, 3, 3]), ["node 0 'pool1' (MaxPool)", "AveragePool"]),
    "softmax_inside": (lambda: _model([_one("Softmax", ["x"], ["s"], "sm"), _one("MatMul", ["s", "W"], ["y"], "mm")],
                                      {"W": _w(4, 2)}, [4], [2]), ["(Softmax)", "final_softmax='client'"]),
    "softmax_last": (lambda: _model([_one("MatMul", ["x", "W"], ["h"], "mm"), _one("Softmax", ["h"], ["y"], "out")],
                                    {"W": _w(4, 2)}, [4], [2]), ["'out' (Softmax)", "argmax"]),
    "residual": (lambda: _model([_one("Relu", ["x"], ["r"], "act"), _one("Add", ["r", "x"], ["y"], "skip")], {}, [4],
                                [4]), ["'skip' (Add)", "residual"]),
    "product": (lambda: _model([_one("MatMul", ["x", "A"], ["u"], "a"), _one("Mul", ["u", "x"], ["y"], "prod")],
                               {"A": _w(4, 4)}, [4], [4]), ["'prod' (Mul)", "x * x"]),
    "erf": (lambda: _model([_one("Erf", ["x"], ["y"], "erf1")], {}, [4], [4]), ["(Erf)", "Gelu"]),
    "unknown": (lambda: _model([_one("Cos", ["x"], ["y"], "c")], {}, [4], [4]), ["(Cos)", "supported: Gemm"]),
    "division": (lambda: _model([_one("Div", ["W", "x"], ["y"], "inv")], {"W": _w(4)}, [4], [4]),
                 ["'inv' (Div)", "no polynomial form"]),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_unsupported_nodes_are_named_with_what_to_do(case):
    make, parts = ERRORS[case]
    with pytest.raises(ml.ModelError) as e:
        ml.read_onnx(make())
    for part in parts:
        assert part in str(e.value)
    assert str(e.value).startswith("g: ")  # the model's name (its file, when read from one)


def test_final_softmax_can_be_dropped(tmp_path):
    m = ERRORS["softmax_last"][0]()
    path = tmp_path / "clf.onnx"
    onnx.save(m, path)
    with pytest.raises(ml.ModelError, match=str(path)):  # a file is named by its path
        ml.read_onnx(path)
    net = ml.read_onnx(path, final_softmax="drop")
    assert "Softmax" not in net.layers[-1].source
    x = RNG.uniform(-1, 1, size=(6, 4))
    assert (net.forward(x).argmax(1) == _ort(m, x).argmax(1)).all()


def test_bad_models_and_inputs_are_refused(tmp_path):
    with pytest.raises(ml.ModelError, match="no such ONNX file"):
        ml.read_onnx(tmp_path / "missing.onnx")
    with pytest.raises(ml.ModelError, match="not an ONNX model"):
        ml.read_onnx(b"\x00garbage")
    with pytest.raises(ml.ModelError, match="expected an ONNX model"):
        ml.read_onnx(42)
    two = helper.make_model(helper.make_graph(
        [helper.make_node("Add", ["x", "z"], ["y"])], "two",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 3]) for n in ("x", "z")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])]))
    with pytest.raises(ml.ModelError, match="2 inputs"):
        ml.read_onnx(two)
    net = ml.read_onnx(_mlp())
    with pytest.raises(ml.ModelError, match=r"shape \(5, 11\)"):
        net.forward(np.zeros((5, 11)))
    with pytest.raises(ml.ModelError, match="not finite"):
        net.forward(np.full(12, np.nan))
    with pytest.raises(ml.ModelError, match="scheme 'bfv'"):
        ml.compile_onnx(_mlp(), np.zeros((2, 12)), scheme="bfv")
    with pytest.raises(ml.ModelError, match="check is how many samples"):
        ml.compile_onnx(_mlp(), np.zeros((2, 12)), check=-1)
    with pytest.raises(ml.ModelError, match="sample_inputs has shape"):
        ml.compile_onnx(_mlp(), np.zeros((2, 13)))


def test_plan_folds_each_interval_into_the_affine_layer_before_it():
    net = ml.read_onnx(_conv_bn_pool())
    x = RNG.uniform(-1, 1, size=(20, 1, 8, 8))
    p = ckks_ml.plan(net, x, degree=9, margin=0.2)
    (a,) = p.approximations
    inputs = net.nonlinear_inputs(x)[0]
    assert a.seen == (inputs.min(), inputs.max()) and a.interval[0] < a.seen[0] and a.interval[1] > a.seen[1]
    # the plan (normalized, padded to d) computes exactly the network with its activation replaced by the polynomial
    h = net.layers[2](a(net.layers[0](net.samples(x))))
    assert p.d == 64 and np.abs(p.forward(net.samples(x)) - h).max() < 1e-9
    # and the polynomial is within its stated error of the activation on the interval
    grid = np.linspace(*a.interval, 1001)
    assert np.abs(a(grid) - np.maximum(grid, 0)).max() <= a.max_error + 1e-12
    assert a.levels == 5  # ceil(log2 9) + 1


def test_baby_steps_minimize_distinct_rotations():
    assert ckks_ml._baby(list(range(16)), 16) == 4  # 3 baby + 3 giant rotations
    assert ckks_ml._baby([0, 1, 2], 16) >= 4  # a band: baby steps only (B >= 4 leaves no giant step)


def test_mlp_runs_encrypted_within_the_noise_of_its_polynomial_model():
    m = _mlp()
    x = RNG.uniform(-1, 1, size=(32, 12))
    # one batch size (1) throughout: each size is a program of its own, compiled once
    compiled = ml.compile_onnx(m, x, params=TOY, check=1, seed=bytes(32))
    report = str(compiled.report)
    assert "Relu 'act'" in report and "degree 15" in report and "encrypted vs float on 1 samples" in report
    assert compiled.report.encrypted.count == 1 and compiled.circuit.depth == ckks_ml.depth(compiled.plan) <= TOY.levels
    got = compiled.predict(x[4])
    assert got.shape == (3,)
    # CKKS noise at scale 2^30 through 7 levels, amplified by the polynomial's coefficient sum and the last layer's
    # row sums: measured about 2^-14 here; 2^-9 leaves room without hiding a wrong layer (those differ by > 0.01)
    assert np.abs(got - compiled.predict_approximated(x[4])[0]).max() < 2**-9
    one = compiled.decrypt(compiled.run(compiled.encrypt(x[5])))
    assert one.shape == (1, 3) and np.abs(one - compiled.predict_approximated(x[5])).max() < 2**-9
    # the approximated model is the float model up to the activation's stated error, carried by the last layer
    bound = compiled.report.approximations[0].max_error * np.abs(compiled.network.layers[2].weight).sum(1).max()
    assert np.abs(compiled.predict_approximated(x) - compiled.predict_plain(x)).max() <= bound + 1e-12
    assert abs(compiled.report.approximated.max_abs_diff - np.abs(compiled.predict_approximated(x) -
                                                                  _ort(m, x)).max()) < 1e-5


def test_conv_network_runs_encrypted_as_a_batch():
    m = _conv_bn_pool()
    x = RNG.uniform(-1, 1, size=(16, 1, 8, 8))
    compiled = ml.compile_onnx(m, x, params=TOY, degree=7, check=0, seed=bytes(32))
    got = compiled.predict(x[:3])
    assert got.shape == (3, 5)
    assert np.abs(got - compiled.predict_approximated(x[:3])).max() < 2**-9  # as in the MLP test


def _deep(rng, kinds=("relu",) * 5):
    layers = []
    for i, kind in enumerate(kinds):
        layers += [ml.Affine(rng.normal(size=(8, 8)), rng.normal(size=8) * 0.1, f"fc{i}"),
                   ml.Nonlinear(kind, source=f"{kind}{i}")]
    return ml.Network(tuple(layers + [ml.Affine(rng.normal(size=(2, 8)), np.zeros(2), "out")]), (8,), "deep")


def test_a_model_deeper_than_every_preset_bootstraps_on_a_bootstrappable_one():
    """Issue 47, requirement 2: a model deeper than any preset without bootstrapping is placed on N16_BOOT_L9 with
    a bootstrap wherever the next layer needs more levels than are left; on parameters that cannot bootstrap it
    is refused with what to do."""
    from crossfhe.ckks import presets

    rng = np.random.default_rng(3)
    net, x = _deep(rng), rng.normal(size=(16, 8))
    compiled = ml.compile_network(net, x, check=0)  # compiled only: N 2^16 keys are for the slow test
    p = compiled.plan
    assert presets.name_of(compiled.circuit.params) == compiled.report.params == "N16_BOOT_L9"
    assert ckks_ml.depth(p) == 31 and p.bootstraps == compiled.circuit.cost["bootstraps"] == 4
    assert "4 bootstraps per sample" in str(compiled.report)
    # each bootstrap falls on a layer's normalized input (in [-1, 1] already: no scaling) before its polynomial
    kinds = [s[0] for s in p.steps]
    assert all(kinds[i + 1] == "poly" and p.steps[i][1] == 1 for i, k in enumerate(kinds) if k == "bootstrap")
    assert compiled.circuit.specs[0].bound == p.input_bound >= 2 * np.abs(x).max()
    with pytest.raises(ml.ModelError, match=r"needs multiplicative depth 31 .* has 8 levels.*bootstrappable"):
        ml.compile_network(net, x, params=TOY, check=0)


def _bootstrapping_mlp(x=None):
    """The MLP compiled on bootstrappable parameters with 6 levels: its dense layer and degree-15 ReLU (6 levels) use
    them all, a bootstrap brings the second dense layer its level; the ReLU polynomial's output, beyond 1, is divided
    by a power of two before it and multiplied back after."""
    from crossfhe.ckks import bootstrap as bt

    boot = bt.bootstrappable_params(log_n=11, levels_left=6, log_scale=52, dnum=3, cts_levels=2, stc_levels=2,
                                    insecure=True)  # INSECURE: tests only
    x = RNG.uniform(-1, 1, size=(32, 12)) if x is None else x
    compiled = ml.compile_onnx(_mlp(), x, params=boot, check=0)
    (step,) = [s for s in compiled.plan.steps if s[0] == "bootstrap"]
    assert step[1] > 1 and compiled.circuit.cost["bootstraps"] == 1
    assert compiled.circuit.specs[0].bound == compiled.plan.input_bound == 2.0
    return compiled


def test_a_model_that_bootstraps_is_planned_with_one_bootstrap():
    """The plan of the model below, without keys or programs: one bootstrap, the input's bound declared."""
    _bootstrapping_mlp()


# slow: 148 s cold in a 2-core CI run (2026-12-03), the bootstrap's program and keys; the default run keeps the plan
# (test_a_model_that_bootstraps_is_planned_with_one_bootstrap) and circuits that bootstrap, run, export and load
# (test_ckks_bootstrap.py::test_circuit_bootstraps_where_its_levels_run_out)
@pytest.mark.slow
def test_a_model_that_bootstraps_runs_encrypted_within_the_noise_of_its_polynomial_model():
    """The model of :func:`_bootstrapping_mlp`, run encrypted as one program, against the plan in float64."""
    x = RNG.uniform(-1, 1, size=(32, 12))
    compiled = _bootstrapping_mlp(x)
    compiled.keygen(seed=bytes(range(32)))
    got = compiled.predict(x[:2])
    # scale 2^52: CKKS's own error is far below the bootstrap's (about 2^-25 of 1 at this ring, times the scaling
    # s and the last layer's row sums, about 2^-20 here); 2^-12 leaves room and still catches a wrong layer
    assert np.abs(got - compiled.predict_approximated(x[:2])).max() < 2**-12


@pytest.mark.slow
def test_a_model_bootstraps_on_the_n16_preset_within_its_precision():
    """N16_BOOT_L9 (secure): two tanh layers of degree 15 need 13 levels, so one bootstrap on the normalized input
    of the second. Measured: 2^-28 from the plan in float64; keys for 8 slots (sparse), one program."""
    from crossfhe.ckks import presets

    rng = np.random.default_rng(3)
    layers = []
    for i in range(2):
        layers += [ml.Affine(rng.normal(size=(8, 8)) * 0.5, np.zeros(8), f"fc{i}"),
                   ml.Nonlinear("tanh", source=f"t{i}")]
    net = ml.Network(tuple(layers + [ml.Affine(rng.normal(size=(2, 8)), np.zeros(2), "out")]), (8,), "two")
    x = rng.normal(size=(16, 8))
    compiled = ml.compile_network(net, x, params=presets.N16_BOOT_L9, check=0)
    assert compiled.plan.bootstraps == 1 and ckks_ml.depth(compiled.plan) == 13
    compiled.keygen(seed=bytes(32))
    got = compiled.predict(x[:1])
    # the bootstrap's 24+ bits relative to 1, carried by the polynomial and the last layer: 2^-16 is far above
    # what it leaves and far below any wrong layer
    assert np.abs(got - compiled.predict_approximated(x[:1])[0]).max() < 2**-16


def test_bootstraps_are_placed_where_the_levels_run_out_and_keep_the_model():
    """place_bootstraps: the plan computes the same function (float64), every run of steps between bootstraps fits
    the levels, every bootstrapped value lies in [-1, 1] on the samples after its scaling (a power of two; of four
    after a square), and a polynomial too deep for the levels is refused naming it and the degree that fits."""
    rng = np.random.default_rng(5)
    net = _deep(rng, ("tanh", "relu", "square", "sigmoid", "square"))
    x = rng.normal(size=(24, 8))
    p = ckks_ml.plan(net, x, degree=7)
    ref = p.forward(x)
    for levels in (4, 5, 6, 9):
        q = ckks_ml.place_bootstraps(p, levels, x)
        assert np.abs(q.forward(x) - ref).max() <= 1e-9 * np.abs(ref).max()
        assert ckks_ml.depth(q) == ckks_ml.depth(p) and q.bootstraps >= ckks_ml.depth(p) // levels - 1
        h = np.zeros((x.shape[0], q.d))
        h[:, :8] = x
        left, approx = levels, iter(q.approximations)
        for i, step in enumerate(q.steps):
            if step[0] == "bootstrap":
                s = step[1]
                assert s >= 1 and s & (s - 1) == 0 and np.abs(h).max() <= 1 + 1e-9  # its input
                if q.steps[i - 1][0] == "square":
                    assert int(np.sqrt(s)) ** 2 == s
                h, left = h * s, levels
                continue
            left -= 1 if step[0] == "affine" else next(approx).levels
            assert left >= 0
            h = ckks_ml.Plan((step,), q.d, (), q.d, q.d).forward(h)
    scaled = ckks_ml.place_bootstraps(p, 4, x)
    assert any(s[0] == "bootstrap" and s[1] > 1 for s in scaled.steps)  # some values needed scaling down
    with pytest.raises(ml.ModelError, match=r"tanh0 \(tanh, degree 7\) needs 4 levels.*leave 3.*degree=4"):
        ckks_ml.place_bootstraps(p, 3, x)
    with pytest.raises(ml.ModelError, match="already bootstraps"):
        ckks_ml.place_bootstraps(scaled, 4, x)
