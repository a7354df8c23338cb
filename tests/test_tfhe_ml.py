"""The Taurus workloads on TFHE circuits (crossfhe.apps.trees, knn, qnn): each quantized model's circuit equals its
plain integer twin, in the clear on the whole test split (the compiler's evaluate_plain, at the real presets) and
encrypted on a few samples (small models at P4, one shared key pair); the dedup and batching passes cut launches,
key switches and test vectors. Real-size encrypted runs (P6, P8) are marked slow.
"""

import numpy as np
import pytest

from crossfhe.api import CircuitKeys
from crossfhe.api import tfhe_lower as ct
from crossfhe.apps import datasets
from crossfhe.apps.knn import KNN
from crossfhe.apps.qnn import QuantizedCNN, QuantizedDeepNN, QuantizedMLP, _padded_windows
from crossfhe.apps.tfhe_ml import Term, quantize_unit, reduce_sum
from crossfhe.apps.trees import DecisionTree, GradientBoostedTrees
from crossfhe.errors import ParameterError
from crossfhe.tfhe import ops, presets

P4 = presets.P4


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CROSSFHE_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def keys_p4():
    return CircuitKeys(*ops.keygen(P4, b"tfhe-ml-p4".ljust(32, b"\0")))


@pytest.fixture(scope="module")
def cancer():
    return datasets.breast_cancer(seed=0)


@pytest.fixture(scope="module")
def digits28():
    return datasets.digits(28, seed=0)


def _plain_circuit(model, q) -> np.ndarray:
    """The optimized circuit on ``q`` in the clear (the compiler's reference evaluation): int64 [n, outputs]."""
    c = model.compile()
    outs = ct.evaluate_plain(c.graph, c.params, *[q[:, i] for i in range(q.shape[1])])
    return np.stack(outs, axis=1)


def _check_counts(model):
    c = model.counts()
    before, after = c["before"], c["after"]
    assert before["pbs_calls"] == before["bootstraps"] == before["key_switches"]
    assert after["bootstraps"] <= before["bootstraps"]
    assert after["pbs_calls"] == after["depth"]  # one batched launch per bootstrap level
    assert after["key_switches"] <= before["key_switches"] and after["test_vectors"] <= before["test_vectors"]
    return before, after


def _check_encrypted(model, x, keys):
    q = model.encode(x)
    enc = model.outputs_encrypted(q, keys=keys)
    np.testing.assert_array_equal(enc, model.outputs_plain(q))
    np.testing.assert_array_equal(model.decode(enc), model.predict_plain(x))


# ---------------------------------------------------------------------------------------------------
# Pieces
# ---------------------------------------------------------------------------------------------------


def test_quantize_unit():
    np.testing.assert_array_equal(quantize_unit([0.0, 0.249, 0.25, 0.999, 1.0, 1.5, -1], 2), [0, 0, 1, 3, 3, 3, 0])


def test_reduce_sum_clamps_exclusive_groups():
    """Four trees of leaves (one nonzero per tree) with bounds adding to 120 on 4 bits: reduced by clamping lookups
    to a value of true bound 4 x 3 = 12; the reduction on ints equals the plain sum."""
    rng = np.random.default_rng(0)
    his = [[3, 3, 2, 3, 1, 3, 3, 2, 3, 3]] * 4
    active = [rng.integers(0, len(h), 100) for h in his]
    terms = [Term(np.where(active[g] == i, h, 0), h, g) for g, hs in enumerate(his) for i, h in enumerate(hs)]
    calls = []

    def lookup(v, b):
        calls.append(b)
        assert v.max() <= 15
        return np.minimum(v, b)

    total, bound = reduce_sum(terms, {g: max for g in range(4)}, P4, lookup)
    assert bound <= 15 and calls
    np.testing.assert_array_equal(total, sum(t.value for t in terms))
    with pytest.raises(ParameterError, match="truly reach"):
        reduce_sum([Term(1, 9, "a"), Term(1, 9, "b")], {}, P4, lookup)


# ---------------------------------------------------------------------------------------------------
# Decision tree and boosting
# ---------------------------------------------------------------------------------------------------


def test_decision_tree_plain(cancer):
    m = DecisionTree(max_depth=6, bits=6).fit(cancer.x_train, cancer.y_train)
    assert m.params.name == "P6"
    q = m.encode(cancer.x_test)
    full = quantize_unit(cancer.x_test, 6)
    np.testing.assert_array_equal(m.predict_plain(cancer.x_test), m.model_.predict(full))  # sklearn agrees
    np.testing.assert_array_equal(_plain_circuit(m, q), m.outputs_plain(q))
    before, after = _check_counts(m)
    assert after["key_switches"] < before["key_switches"] and after["test_vectors"] < before["test_vectors"]


def test_decision_tree_multiclass_plain():
    s = datasets.digits(seed=0, flatten=True)
    m = DecisionTree(max_depth=6, bits=4).fit(s.x_train, s.y_train)
    q = m.encode(s.x_test)
    np.testing.assert_array_equal(m.predict_plain(s.x_test), m.model_.predict(quantize_unit(s.x_test, 4)))
    np.testing.assert_array_equal(_plain_circuit(m, q), m.outputs_plain(q))
    _check_counts(m)


# slow: 27 s cold in CI; KNN's encrypted path (lookups, comparisons) runs by default
@pytest.mark.slow
def test_decision_tree_encrypted(cancer, keys_p4):
    m = DecisionTree(max_depth=3, bits=4).fit(cancer.x_train, cancer.y_train)
    assert m.params.name == "P4"
    _check_encrypted(m, cancer.x_test[:6], keys_p4)


def test_split_features_compare_every_value():
    """compare() on split features: [x <= t] from the digits (x >> 2, x mod 4) of every 6-bit x, for every t, at P4
    (both digits within 4 bits), in the clear through the compiler's reference evaluation."""
    from crossfhe.api import compile as compile_circuit
    from crossfhe.api.specs import TFHEInt
    from crossfhe.apps.trees import compare

    ts = list(range(63))

    def fn(h, lo):
        cache: dict = {}
        return tuple(compare((h, lo), {0: (0, 1)}, 0, t, cache, 2) for t in ts)  # feature 0: inputs 0 and 1

    c = compile_circuit(fn, TFHEInt(4), TFHEInt(2), params=P4)
    x = np.arange(64)
    outs = ct.evaluate_plain(c.graph, c.params, x >> 2, x & 3)
    np.testing.assert_array_equal(np.stack(outs), (x[None, :] <= np.array(ts)[:, None]).astype(np.int64))
    # t_l = 3: [h <= t_h], one lookup each (t_h 0..14); t_l < 3: g once per t_h (0..15, shared by its three t) and
    # one lookup per t (48)
    assert c.report[0][1]["bootstraps"] == 15 + 16 + 48


def test_decision_tree_split_features_plain(cancer):
    """Depth 10 on 6-bit features sent as digits of 4 and 2 bits: P4 instead of P6, the same tree and predictions."""
    whole = DecisionTree(max_depth=10, bits=6).fit(cancer.x_train, cancer.y_train)
    m = DecisionTree(max_depth=10, bits=6, low_bits=2).fit(cancer.x_train, cancer.y_train)
    assert whole.params.name == "P6" and m.params.name == "P4" and m.input_bits == (4, 2) * len(m.features)
    q = m.encode(cancer.x_test)
    np.testing.assert_array_equal(m.quantized(q), whole.encode(cancer.x_test))
    np.testing.assert_array_equal(m.predict_plain(cancer.x_test), whole.predict_plain(cancer.x_test))
    np.testing.assert_array_equal(_plain_circuit(m, q), m.outputs_plain(q))
    _check_counts(m)
    with pytest.raises(ParameterError, match="low_bits must be in"):
        DecisionTree(bits=4, low_bits=4)
    with pytest.raises(ParameterError, match="low bits"):
        DecisionTree(bits=6, low_bits=3, params=P4).fit(cancer.x_train, cancer.y_train)


def test_split_features_encrypted(cancer, keys_p4):
    m = GradientBoostedTrees(n_estimators=3, max_depth=2, bits=5, low_bits=2).fit(cancer.x_train, cancer.y_train)
    assert m.params.name == "P4"
    q = m.encode(cancer.x_test)
    np.testing.assert_array_equal(_plain_circuit(m, q), m.outputs_plain(q))
    _check_encrypted(m, cancer.x_test[:4], keys_p4)


def test_gradient_boosting_plain(cancer):
    m = GradientBoostedTrees(n_estimators=16, max_depth=3, bits=6).fit(cancer.x_train, cancer.y_train)
    assert m.score_range <= 63
    q = m.encode(cancer.x_test)
    np.testing.assert_array_equal(_plain_circuit(m, q), m.outputs_plain(q))
    agree = (m.predict_plain(cancer.x_test) == m.model_.predict(quantize_unit(cancer.x_test, 6))).mean()
    assert agree >= 0.95  # the leaf values rounded to the step
    _check_counts(m)


def test_packed_subtrees_exhaustive(cancer):
    """A depth-3 tree at P4 on 3-bit features: the circuit equals the integer tree on every input of the features it
    reads (8^5 of them), and each tree costs its distinct comparisons plus one lookup per packed subtree: the
    root's subtree has 7 internal nodes, (0 + 1) 2^7 > 16, so the cut is at its two depth-1 subtrees (3 nodes,
    (1 + 1) 2^3 = 16)."""
    m = DecisionTree(max_depth=3, bits=3).fit(cancer.x_train, cancer.y_train)
    assert m.params.name == "P4" and len(m.features) == 5
    grids = np.meshgrid(*[np.arange(8)] * len(m.features), indexing="ij")
    q = np.stack([g.ravel() for g in grids], axis=1)
    np.testing.assert_array_equal(_plain_circuit(m, q), m.outputs_plain(q))
    t = m.model_.tree_
    comparisons = len({(int(f), int(np.floor(v))) for f, v in zip(t.feature, t.threshold) if f >= 0})
    assert m.counts()["before"]["bootstraps"] <= comparisons + 2


# slow: 18 s cold in CI; KNN's encrypted path runs by default
@pytest.mark.slow
def test_gradient_boosting_encrypted(cancer, keys_p4):
    m = GradientBoostedTrees(n_estimators=4, max_depth=2, bits=3, params=P4).fit(cancer.x_train, cancer.y_train)
    _check_encrypted(m, cancer.x_test[:6], keys_p4)


# ---------------------------------------------------------------------------------------------------
# KNN
# ---------------------------------------------------------------------------------------------------


def test_knn_plain(cancer):
    m = KNN(k=3, n_train=16, n_features=4, bits=3).fit(cancer.x_train, cancer.y_train)
    assert m.params.name == "P6"
    q = m.encode(cancer.x_test)
    np.testing.assert_array_equal(_plain_circuit(m, q), m.outputs_plain(q))
    before, after = _check_counts(m)
    assert after["key_switches"] < before["key_switches"]


def test_knn_matches_sklearn_on_integers(cancer):
    """Where no two training points tie in distance, the plain model is scikit-learn's KNN on the integers."""
    from sklearn.neighbors import KNeighborsClassifier

    m = KNN(k=3, n_train=16, n_features=4, bits=3).fit(cancer.x_train, cancer.y_train)
    q = m.encode(cancer.x_test)
    d = np.sort(m.distances(q), axis=1)
    clear = d[:, 2] < d[:, 3]
    ref = KNeighborsClassifier(3, p=1).fit(m.points, m.classes_[m.labels]).predict(q)
    np.testing.assert_array_equal(m.predict_plain(cancer.x_test)[clear], ref[clear])


def test_knn_encrypted(cancer, keys_p4):
    m = KNN(k=3, n_train=6, n_features=2, bits=2).fit(cancer.x_train, cancer.y_train)
    assert m.params.name == "P4"
    _check_encrypted(m, cancer.x_test[:6], keys_p4)


def _second_nearest_rule(m, q) -> np.ndarray:
    """ties="class" written as its rule: the counted class wins iff its m-th nearest point is no farther than the
    other class's m-th nearest (a class with fewer than m points never reaches m)."""
    d = m.distances(q)
    mine = m.labels == m.counted

    def mth(rows):
        s = np.sort(rows, axis=1)
        return s[:, m.m - 1] if s.shape[1] >= m.m else np.full(len(s), np.iinfo(np.int64).max)

    return (mth(d[:, mine]) <= mth(d[:, ~mine])).astype(np.int64)[:, None]


def test_knn_count_plain_at_hundreds_of_points(cancer):
    """All 455 training points, ties to the counted class: the circuit (in the clear) equals the sort, the sort
    equals the m-th-nearest rule, and the circuit grows with the distinct locations (38 here), not with N."""
    m = KNN(k=3, n_train=None, n_features=2, bits=3, ties="class").fit(cancer.x_train, cancer.y_train)
    assert m.params.name == "P4" and len(m.points) == 455
    q = m.encode(cancer.x_test)
    plain = m.outputs_plain(q)
    np.testing.assert_array_equal(plain, _second_nearest_rule(m, q))
    np.testing.assert_array_equal(_plain_circuit(m, q), plain)
    before, after = _check_counts(m)
    # lookups: the F 2^bits terms, L per threshold t (fewer where d_l <= t holds for every query), and per t and
    # class a saturating count of L weights <= 2 (chunks of >= 14 on P4's 15, then one clamp), then e_t; one output
    n_t, n_l = m.threshold + 1, len(m.locations)
    assert before["bootstraps"] <= 2 * 8 + n_l * n_t + n_t * (2 * (-(-2 * n_l // 14) + 1) + 1) + 1
    assert after["key_switches"] < before["key_switches"]


def test_knn_count_every_query(cancer):
    """k = 5, 3 features of 2 bits over 120 points: the circuit equals the sort on all 64 possible queries (which
    is also how T, the largest k-th distance, is found)."""
    m = KNN(k=5, n_train=120, n_features=3, bits=2, ties="class", seed=3).fit(cancer.x_train, cancer.y_train)
    grid = np.stack(np.meshgrid(*[np.arange(4)] * 3, indexing="ij"), axis=-1).reshape(-1, 3)
    kth = np.sort(m.distances(grid), axis=1)[:, m.k - 1]
    assert m.threshold == kth.max()
    np.testing.assert_array_equal(_plain_circuit(m, grid), m.outputs_plain(grid))
    np.testing.assert_array_equal(m.outputs_plain(grid), _second_nearest_rule(m, grid))


def test_knn_count_encrypted(cancer, keys_p4):
    m = KNN(k=3, n_train=60, n_features=2, bits=2, ties="class").fit(cancer.x_train, cancer.y_train)
    assert m.params.name == "P4"
    _check_encrypted(m, cancer.x_test[:6], keys_p4)


def test_knn_refuses_bad_sizes(cancer):
    x, y = cancer.x_train, cancer.y_train
    with pytest.raises(ParameterError, match="ties is 'index'"):
        KNN(ties="distance")
    with pytest.raises(ParameterError, match="k must be odd"):
        KNN(k=4)
    with pytest.raises(ParameterError, match="n_train must be in"):
        KNN(n_train=456).fit(x, y)
    with pytest.raises(ParameterError, match="use ties='class'"):
        KNN(n_train=300, n_features=2, bits=2).fit(x, y)
    with pytest.raises(ParameterError, match="distances span"):
        KNN(n_train=100, n_features=6, bits=3, ties="class", params=P4).fit(x, y)


# ---------------------------------------------------------------------------------------------------
# Networks
# ---------------------------------------------------------------------------------------------------


def test_cnn_plain(digits28):
    m = QuantizedCNN(channels=2, kernel=8, stride=4, params=presets.P8, epochs=3).fit(digits28.x_train,
                                                                                     digits28.y_train)
    q = m.encode(digits28.x_test[:60])
    np.testing.assert_array_equal(_plain_circuit(m, q), m.outputs_plain(q))
    before, after = _check_counts(m)
    assert after["pbs_calls"] == 1 and after["test_vectors"] < before["test_vectors"]


def test_mlp_plain(digits28):
    m = QuantizedMLP(hidden=8, max_iter=20).fit(digits28.x_train, digits28.y_train)
    q = m.encode(digits28.x_test[:60])
    np.testing.assert_array_equal(_plain_circuit(m, q), m.outputs_plain(q))
    _check_counts(m)


def test_mlp_quantization_aware(digits28):
    """Fine-tuning through the quantization beats post-training quantization of the same float network on the test
    split (at P8 with 784 2-bit inputs the accumulator leaves sum |w| <= 85 per neuron; measured 0.894 -> 0.981 at
    32 hidden units, 30 epochs); the margin asserted is a third of the gap measured at this size (0.753 -> 0.947),
    so the test holds across BLAS builds. Both stay exact circuits."""
    ptq = QuantizedMLP(hidden=16, qat_epochs=0, max_iter=60).fit(digits28.x_train, digits28.y_train)
    qat = QuantizedMLP(hidden=16, qat_epochs=10, max_iter=60).fit(digits28.x_train, digits28.y_train)
    q = ptq.encode(digits28.x_test)
    acc = [(m.decode(m.outputs_plain(q)) == digits28.y_test).mean() for m in (ptq, qat)]
    assert acc[1] >= acc[0] + 0.06, acc
    np.testing.assert_array_equal(_plain_circuit(qat, q[:40]), qat.outputs_plain(q[:40]))
    np.testing.assert_array_equal(qat.predict_float(digits28.x_test), ptq.predict_float(digits28.x_test))
    with pytest.raises(ParameterError, match="qat_epochs"):
        QuantizedMLP(qat_epochs=-1)


def test_cnn_encrypted(digits28, keys_p4):
    m = QuantizedCNN(channels=1, kernel=14, stride=14, input_bits=1, act_bits=2, weight_max=3, params=P4,
                     epochs=3).fit(digits28.x_train, digits28.y_train)
    _check_encrypted(m, digits28.x_test[:3], keys_p4)


def test_deep_nn_convolution_is_the_padded_convolution():
    """The dense matrix of QuantizedDeepNN's convolution equals a direct convolution of the zero-padded image
    (stride 1, channel-major flatten as torch's), at the NN-20 shape: 2 maps of 10 x 11, padding 1, 840 values."""
    rng = np.random.default_rng(3)
    m = QuantizedDeepNN()
    win = _padded_windows(m.kernel, m.padding)
    assert win.shape == (21 * 20, 110)
    k = rng.normal(size=(2, 110))
    dense = m._conv_dense(m._conv_rows(k, win), win)
    img = rng.normal(size=(3, 28, 28))
    pad = np.pad(img, ((0, 0), (1, 1), (1, 1)))
    ref = np.array([[[[np.sum(pad[n, r:r + 10, c:c + 11] * k[ch].reshape(10, 11)) for c in range(20)]
                       for r in range(21)] for ch in range(2)] for n in range(3)])
    np.testing.assert_allclose(img.reshape(3, -1) @ dense.T, ref.reshape(3, -1), rtol=1e-12, atol=1e-12)


def _small_deep(depth=5, **kw):
    """NN-``depth`` cut down for the default run: one 20 x 21 map with padding 1 (11 x 10 = 110 windows), 8-wide
    dense layers, 1-bit inputs and activations at P4, two epochs of each kind."""
    args = dict(depth=depth, width=8, channels=1, kernel=(20, 21), padding=1, input_bits=1, act_bits=1,
                weight_max=3, params=P4, epochs=2, qat_epochs=2)
    return QuantizedDeepNN(**{**args, **kw})


def _dense_middle(m):
    """Nonzero weights per row of the width x width layers: int [rows] over all of them."""
    return np.concatenate([(layer.w != 0).sum(axis=1) for layer in m.layers[2:-1]])


def test_deep_nn_plain(digits28):
    m = _small_deep().fit(digits28.x_train, digits28.y_train)
    q = m.encode(digits28.x_test[:60])
    np.testing.assert_array_equal(_plain_circuit(m, q), m.outputs_plain(q))
    _, after = _check_counts(m)
    traced = dict(m.counts()["passes"])["traced"]
    assert traced["bootstraps"] == 110 + 3 * 8  # a lookup per conv output and per hidden neuron, before dead code
    # one bootstrap level per layer but the last (4): the looks-linear start keeps the two 8 x 8 layers dense, so
    # no neuron reads a single neuron of the layer below and the compose pass has nothing to fold
    assert after["depth"] == 4 and _dense_middle(m).min() >= 2
    assert m.name == "nn5" and len(m.layers) == 5


def test_deep_nn_tables_fold_the_normalization(digits28):
    """Each hidden lookup is clamp(round(scale (acc - off) + bias), 0, 2^h - 1) with the layer's folded
    normalization (Layer.scale, Layer.bias): the tables equal that formula at every accumulator value."""
    m = _small_deep(depth=4, act_bits=2, input_bits=2, params=presets.P6, qat_batch=128).fit(digits28.x_train,
                                                                                          digits28.y_train)
    grid = np.arange(1 << m.params.message_bits)
    for layer in m.layers[:-1]:
        want = np.clip(np.rint(layer.scale[:, None] * (grid[None, :] - layer.off[:, None]) + layer.bias[:, None]),
                       0, 3)
        np.testing.assert_array_equal(layer.tables, want)


def test_deep_nn_encrypted(digits28, keys_p4):
    m = _small_deep(depth=4).fit(digits28.x_train, digits28.y_train)
    _check_encrypted(m, digits28.x_test[:2], keys_p4)


def test_deep_nn_rejects_bad_shapes():
    with pytest.raises(ParameterError, match="depth"):
        QuantizedDeepNN(depth=2)
    with pytest.raises(ParameterError, match="does not fit"):
        QuantizedDeepNN(kernel=(40, 3))
    with pytest.raises(ParameterError, match="start"):
        QuantizedDeepNN(start="identity")
    with pytest.raises(ParameterError, match="even width"):
        QuantizedDeepNN(width=91)  # looks-linear pairs the neurons
    with pytest.raises(ParameterError, match="8-bit activations"):
        QuantizedDeepNN(act_bits=8)  # its default P7 carries 7-bit messages
    for bad in (0, 1.5, True):
        with pytest.raises(ParameterError, match="qat_batch"):
            QuantizedDeepNN(qat_batch=bad)
    # the default batch of the quantization-aware epochs: 64 up to depth 20, 128 deeper
    assert [QuantizedDeepNN(depth=d).qat_batch for d in (20, 21, 50)] == [64, 128, 128]
    assert QuantizedDeepNN(depth=50, qat_batch=64).qat_batch == 64


# slow: about a minute of training on two cores
@pytest.mark.slow
def test_nn20_trains_through_its_quantization(digits28):
    """NN-20 at its real shape (P7, 2-bit activations, |w| <= 3): the integer model is within 1 point of the float
    network on the test split (issue 49's requirement; measured 0.983 against 0.986), the 92 x 92 layers stay dense
    (measured: at least 28 nonzero weights per row, 39.3 on average; P7's bound is sum |w| <= 42), and the circuit
    equals the plain model on a few images."""
    m = QuantizedDeepNN(depth=20).fit(digits28.x_train, digits28.y_train)
    q = m.encode(digits28.x_test)
    quantized = (m.decode(m.outputs_plain(q)) == digits28.y_test).mean()
    assert quantized >= (m.predict_float(digits28.x_test) == digits28.y_test).mean() - 0.01
    assert m.params.name == "P7"
    assert _dense_middle(m).min() >= 10 and _dense_middle(m).mean() >= 30
    np.testing.assert_array_equal(_plain_circuit(m, q[:8]), m.outputs_plain(q[:8]))


# ---------------------------------------------------------------------------------------------------
# Real sizes, encrypted (slow)
# ---------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("workload", ["tree/P6", "tree10/P4", "gbt/P6", "knn/P6", "knn455/P6", "mlp/P8", "cnn/P8",
                                      "nn20/P7"])
def test_real_size_encrypted(workload, cancer, digits28):
    kind = workload.split("/")[0]
    if kind in ("mlp", "cnn", "nn20"):
        m = {"mlp": QuantizedMLP, "cnn": QuantizedCNN, "nn20": QuantizedDeepNN}[kind]().fit(digits28.x_train,
                                                                                          digits28.y_train)
        x = digits28.x_test[:1 if kind == "nn20" else 2]  # nn20 at P7: about 5 minutes per image on one core
    else:
        m = {"tree": lambda: DecisionTree(max_depth=6, bits=6),
             "tree10": lambda: DecisionTree(max_depth=10, bits=6, low_bits=2), "gbt": lambda: GradientBoostedTrees(
            n_estimators=16, max_depth=3, bits=6), "knn": lambda: KNN(),
            "knn455": lambda: KNN(n_train=None, n_features=4, bits=3, ties="class")}[kind]().fit(cancer.x_train,
                                                                                                 cancer.y_train)
        x = cancer.x_test[:2]
    assert m.params.name == workload.split("/")[1]
    _check_encrypted(m, x, None)
