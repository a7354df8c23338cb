"""Fitted scikit-learn estimators as encrypted programs: :func:`from_sklearn`.

**Linear models and multilayer perceptrons** (``LinearRegression``, ``Ridge``, ``Lasso``, ``ElasticNet``,
``LogisticRegression``, ``RidgeClassifier``, ``SGDClassifier`` / ``SGDRegressor``, ``LinearSVC`` / ``LinearSVR``,
``MLPClassifier`` / ``MLPRegressor``) become a :class:`~crossfhe.ml.network.Network` (their coefficients one
:class:`~crossfhe.ml.network.Affine` layer each, the perceptrons' activations :class:`~crossfhe.ml.network.Nonlinear`
layers) and compile like an ONNX model, on CKKS (default) or TFHE. The circuit computes the decision function (the
logits); the label (its sign or argmax) is taken after decryption.

**Trees** (``DecisionTreeClassifier`` / ``Regressor``, ``RandomForestClassifier`` / ``Regressor``,
``GradientBoostingClassifier`` / ``Regressor``, ``ExtraTrees*``, and XGBoost's ``XGBClassifier`` / ``XGBRegressor``
where it is installed: their trees read from the booster's JSON dump, splits x < t) run on TFHE, as the workloads of
:mod:`crossfhe.apps.trees`: one comparison lookup per distinct (feature, threshold), packed subtrees, the trees'
values added by :func:`crossfhe.apps.tfhe_ml.reduce_sum`. Features are encoded per feature as integers in
[0, 2^b):

- ``encoding="uniform"`` (default): q = round((x - lo) / step) on a grid of 2^b points over the calibration range
  (``bits`` b, default the preset's message bits); a split x <= t becomes q <= floor((t - lo) / step). The client
  learns each feature's range only. The quantized model is the tree on lo + step q.
- ``encoding="thresholds"``: q = the number of the model's thresholds on that feature below x; x <= t_i becomes
  q <= i, so every split is decided exactly as the float model decides it. The client learns every threshold of
  the model (not the trees' shapes or values). A feature with more than 2^p - 1 thresholds falls back to a uniform
  grid.

Each model output is a sum over trees of leaf values v_tL (a regressor's predictions, a forest's class
probabilities over the number of trees, boosting's learning rate times the leaf values); one step Delta per output
quantizes them, q_tL = round(v_tL / Delta), with Delta the finest step for which sum_t (max_L q_tL - min_L q_tL) <=
2^p - 1, so the circuit's output S = sum_t (q_t(x) - min_L q_tL) fits p bits and the value is
base + Delta (S + sum_t min_L q_tL). A single classification tree uses its leaves' classes (one-hot values, Delta 1:
exactly the tree's decision). The encrypted outputs equal the quantized model's integers exactly.

Small presets. A bootstrap's cost grows steeply with its message bits (one P4 lookup is several times cheaper than
a P6 one, and P6's several times cheaper than P8's), and one preset serves the whole circuit. Two options let an
ensemble run on P4 or P6 with wider features and a finer output:

- ``low_bits`` r > 0: a feature of b > p bits is sent as two inputs, its digits q >> r (b - r bits) and q mod 2^r,
  and each split compares them in two lookups (:func:`crossfhe.apps.trees.compare`); b <= p + r, 3 2^r <= 2^p.
  6-bit features on P4: r = 2.
- ``parts`` k > 1: each output is k encrypted sums instead of one, the trees split among them (first-fit
  decreasing on R_t), each sum fitting p bits; the client adds them after decryption, so Delta is the finest step
  with which the R_t fit k sums of 2^p - 1, about k times finer than one sum's. The client learns each part's sum
  (sums of a few trees' values), not only the total. Concrete ML's tree models return every tree's value (k = the
  number of trees).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace

import numpy as np

from crossfhe.api import CircuitError
from crossfhe.apps.tfhe_ml import Term, TFHEModel, budget, clamp_traced, reduce_sum
from crossfhe.apps.trees import cut_leaves, leaf_terms, walk
from crossfhe.errors import ParameterError
from crossfhe.ml.client import ClientSpec, Encoder, Runner, labels
from crossfhe.ml.model import CompiledModel, compile_network
from crossfhe.ml.network import Affine, ModelError, Network, Nonlinear
from crossfhe.progress import callback as progress_callback
from crossfhe.progress import report as report_progress
from crossfhe.tfhe import presets
from crossfhe.tfhe.params import Params

LINEAR = ("LinearRegression", "Ridge", "RidgeCV", "Lasso", "LassoCV", "ElasticNet", "ElasticNetCV",
          "LogisticRegression", "LogisticRegressionCV", "RidgeClassifier", "RidgeClassifierCV", "SGDClassifier",
          "SGDRegressor", "LinearSVC", "LinearSVR", "HuberRegressor", "BayesianRidge", "ARDRegression", "Lars",
          "LassoLars", "OrthogonalMatchingPursuit", "TheilSenRegressor", "PassiveAggressiveClassifier", "Perceptron")
"""scikit-learn estimators whose prediction is the linear decision function (its sign or argmax for classifiers)."""

MLP = ("MLPClassifier", "MLPRegressor")
TREES = ("DecisionTreeClassifier", "DecisionTreeRegressor", "ExtraTreeClassifier", "ExtraTreeRegressor",
         "RandomForestClassifier", "RandomForestRegressor", "ExtraTreesClassifier", "ExtraTreesRegressor",
         "GradientBoostingClassifier", "GradientBoostingRegressor")
"""The scikit-learn tree models :func:`from_sklearn` takes (fitted)."""

XGBOOST = ("XGBClassifier", "XGBRegressor")
"""XGBoost's scikit-learn-style models (``booster="gbtree"``), where XGBoost is installed."""

_ACTIVATIONS = {"relu": "relu", "tanh": "tanh", "logistic": "sigmoid"}

_ADVICE = {
    "PoissonRegressor": "its prediction is exp of a linear function: compile the linear part (a LinearRegression on "
                        "log targets) or take exp after decryption",
    "GammaRegressor": "its prediction is exp of a linear function; take exp after decryption of a linear model",
    "TweedieRegressor": "its prediction goes through a link function; take it after decryption of a linear model",
    "SVC": "kernel SVMs compare the sample with every support vector; use LinearSVC",
    "KNeighborsClassifier": "see crossfhe.apps.knn (k nearest neighbours on TFHE)",
    "HistGradientBoostingClassifier": "use GradientBoostingClassifier (the same model, trees crossfhe reads)",
    "HistGradientBoostingRegressor": "use GradientBoostingRegressor (the same model, trees crossfhe reads)",
}


def _kind(est) -> str:
    name = type(est).__name__
    if name in LINEAR or name in MLP or name in TREES:
        return name
    if type(est).__module__.split(".")[0] == "xgboost":
        if name in XGBOOST:
            return name
        raise ModelError(f"{name}: of XGBoost's models, {', '.join(XGBOOST)} are read")
    what = _ADVICE.get(name, "supported: " + ", ".join(LINEAR[:6] + MLP + TREES[:2] + TREES[4:6] + TREES[8:]))
    raise ModelError(f"{name} cannot be compiled: {what}")


def _fitted(est, name: str, attr: str) -> None:
    if not hasattr(est, attr):
        raise ModelError(f"{name} is not fitted (no {attr}); call fit first")


def _network(est, name: str, n_in: int) -> Network:
    if name in MLP:
        _fitted(est, name, "coefs_")
        layers: list = []
        for i, (w, b) in enumerate(zip(est.coefs_, est.intercepts_, strict=True)):
            if i:
                if est.activation == "identity":
                    pass
                elif est.activation in _ACTIVATIONS:
                    layers.append(Nonlinear(_ACTIVATIONS[est.activation], source=f"{name} layer {i}"))
                else:
                    raise ModelError(f"{name}: activation {est.activation!r} is not supported")
            if layers and isinstance(layers[-1], Affine):  # identity activation: fold the two affine maps
                prev = layers.pop()
                layers.append(Affine(w.T @ prev.weight, w.T @ prev.bias + b, prev.source))
            else:
                layers.append(Affine(np.asarray(w, np.float64).T, np.asarray(b, np.float64), f"{name} layer {i + 1}"))
        return Network(tuple(layers), (n_in,), name)
    _fitted(est, name, "coef_")
    w = np.atleast_2d(np.asarray(est.coef_, np.float64))
    b = np.broadcast_to(np.asarray(getattr(est, "intercept_", 0.0), np.float64), (w.shape[0],)).copy()
    return Network((Affine(w, b, name),), (n_in,), name)


# --------------------------------------------------------------------------------------------------
# Trees
# --------------------------------------------------------------------------------------------------


def _int_tree(tree, thresholds: dict) -> SimpleNamespace:
    """A fitted scikit-learn tree with each split's threshold replaced by k + 0.5, k its integer threshold
    (``thresholds[node]``): what :func:`crossfhe.apps.trees.structure` and ``walk`` read."""
    t = tree.tree_
    thr = np.array(t.threshold, dtype=np.float64)
    for node, k in thresholds.items():
        thr[node] = k + 0.5
    return SimpleNamespace(tree_=SimpleNamespace(children_left=t.children_left, children_right=t.children_right,
                                                 feature=t.feature, threshold=thr, value=t.value,
                                                 max_depth=t.max_depth))


class TreeEnsemble(TFHEModel):
    """Trees with integer splits on encoded features (module docstring). ``outputs``: per model output, its parts,
    each a list of (tree index, {leaf: value >= 0}); the circuit returns one value per part (the outputs in order,
    each one's parts in order), the sum of its trees' values[leaf_t(x)], and :meth:`values` maps the sum S of an
    output's parts to ``base[o] + step[o] * (S + shift[o])``. ``low_bits`` r > 0: a feature of more than p bits is
    sent as two inputs, its digits q >> r and q mod 2^r (:func:`crossfhe.apps.trees.compare`)."""

    name = "trees"

    def __init__(self, trees, encoders: dict, outputs, base, step, shift, params: Params, low_bits: int = 0):
        super().__init__()
        self.params, self.low_bits = params, int(low_bits)
        self.features = np.array(sorted(encoders), dtype=np.int64)
        self.column = {int(f): i for i, f in enumerate(self.features)}
        self.encoders = [encoders[int(f)] for f in self.features]
        p, r = params.message_bits, self.low_bits
        inputs: list = []
        self.inputs: dict = {}  # feature -> its circuit input, or its two digits' (crossfhe.apps.trees.compare)
        for f, e in zip(self.features, self.encoders, strict=True):
            if r and e.bits > p:
                self.inputs[int(f)] = (len(inputs), len(inputs) + 1)
                inputs += [(int(f), replace(e, digit=(r, e.bits - r))), (int(f), replace(e, digit=(0, r)))]
            else:
                self.inputs[int(f)] = len(inputs)
                inputs.append((int(f), e))
        self.input_encoders = tuple(inputs)  # (feature, Encoder) per circuit input: what the client encrypts
        self.input_bits = tuple(e.input_bits for _, e in inputs)
        self.trees, self.outputs = trees, outputs
        # the model output each circuit output (a part) adds to
        self.part_of = np.array([o for o, parts in enumerate(outputs) for _ in parts], dtype=np.int64)
        self.base, self.step, self.shift = (np.asarray(v, np.float64) for v in (base, step, shift))

    def encode(self, x) -> np.ndarray:
        """The circuit's inputs for samples ``x`` ``[n, features]``: int64 ``[n, inputs]``."""
        x = np.asarray(x, dtype=np.float64)
        return np.stack([e(x[:, f]) for f, e in self.input_encoders], axis=1)

    def quantized(self, q) -> np.ndarray:
        """The features' integers (digits joined) from :meth:`encode`'s inputs: int64 ``[n, len(features)]``."""
        q = np.asarray(q, dtype=np.int64)
        cols = [(q[:, i[0]] << self.low_bits) | q[:, i[1]] if isinstance(i, tuple) else q[:, i]
                for i in (self.inputs[int(f)] for f in self.features)]
        return np.stack(cols, axis=1)

    def outputs_plain(self, q) -> np.ndarray:
        """The circuit's outputs in the clear: int64 ``[n, parts]``."""
        q = self.quantized(q)
        leaves = [walk(t, q, self.column) for t in self.trees]
        out = np.zeros((len(q), len(self.part_of)), dtype=np.int64)
        c = 0
        for parts in self.outputs:
            for terms in parts:
                for i, values in terms:
                    out[:, c] += np.array([values.get(int(v), 0) for v in leaves[i]], dtype=np.int64)
                c += 1
        return out

    @property
    def lo(self) -> np.ndarray:
        """The value of output 0 per output: ``base + step shift``."""
        return self.base + self.step * self.shift

    def sums(self, out) -> np.ndarray:
        """Each output's sum S of its parts, from the circuit's outputs ``[n, parts]``: int64 ``[n, outputs]``."""
        out = np.asarray(out, dtype=np.int64)
        s = np.zeros((out.shape[0], len(self.outputs)), dtype=np.int64)
        np.add.at(s.T, self.part_of, out.T)
        return s

    def values(self, out) -> np.ndarray:
        """``lo + step S`` per output (the client side's, :class:`~crossfhe.ml.client.ClientSpec`), from the
        circuit's outputs ``[n, parts]``."""
        return self.lo + self.step * self.sums(out).astype(np.float64)

    def decode(self, out) -> np.ndarray:
        return self.values(out)

    def circuit_fn(self, *xs):
        cache: dict = {}
        res = []
        for parts in self.outputs:
            for terms in parts:
                found: list[Term] = []
                for i, values in terms:
                    found += leaf_terms(xs, self.inputs, self.trees[i], values, ("tree", i), cache, self.params,
                                        self.low_bits)
                caps = {("tree", i): max for i, _ in terms}
                s, _ = reduce_sum(found, caps, self.params, clamp_traced)
                res.append(xs[0] * 0 + s if isinstance(s, int) else s)
        return tuple(res)


def _bins(sizes: list[int], top: int, most: int) -> list[list[int]]:
    """First-fit decreasing: the indices of ``sizes`` in bins whose sizes add up to ``top`` at most, ``most`` items
    at most per bin (each index list ascending, the bins in order of their first index)."""
    bins: list[list[int]] = []
    room: list[int] = []
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        for b, left in enumerate(room):
            if sizes[i] <= left and len(bins[b]) < most:
                bins[b].append(i)
                room[b] -= sizes[i]
                break
        else:
            bins.append([i])
            room.append(top - sizes[i])
    return sorted(sorted(b) for b in bins)


def _quantized_sum(per_tree: list[dict], groups: list[list[list[int]]], top: int, step: float | None = None,
                   parts: int = 1, most: int = 1) -> tuple[float, list[dict], float, list[list[tuple[int, int]]]]:
    """(Delta, integer leaf values shifted to min 0 per tree, sum of the per-tree minima, the lookups of each part)
    of float leaf values ``per_tree`` (module docstring). ``groups``: per tree, the leaves of each of its lookups
    (:func:`crossfhe.apps.trees.cut_leaves`), whose bound is their largest value. ``step``: a fixed Delta (one-hot
    values). One part (``parts`` 1): the trees' ranges R_t add up to 2^p - 1 at most, and so do each tree's lookups'
    bounds (the compiler bounds their sum by the sum of their bounds). Several: the lookups (tree j, group g), each
    bounded by 2^p - 1, go into at most ``parts`` sums whose bounds add up to 2^p - 1 at most, ``most`` lookups
    each (the noise budget); a part is a list of (j, g). Delta is the finest step for which they fit."""

    def quantized(step):
        raw = [{leaf: int(np.rint(v / step)) for leaf, v in d.items()} for d in per_tree]
        mins = [min(d.values()) for d in raw]
        q = [{leaf: v - m for leaf, v in d.items()} for d, m in zip(raw, mins, strict=True)]
        his = [[max(d[leaf] for leaf in g) for g in gs] for d, gs in zip(q, groups, strict=True)]
        if parts == 1:
            ok = sum(max(d.values()) for d in q) <= top and max(sum(h) for h in his) <= top
            return q, sum(mins), [[(j, g) for j, h in enumerate(his) for g in range(len(h))]], ok
        items = [(j, g) for j, h in enumerate(his) for g, v in enumerate(h) if v > 0]
        sizes = [his[j][g] for j, g in items]
        if sizes and max(sizes) > top:
            return q, sum(mins), [], False
        bins = [[items[i] for i in b] for b in _bins(sizes, top, most)]
        return q, sum(mins), bins, len(bins) <= parts

    fixed = step is not None
    if step is None:
        spread = sum(max(v.values()) - min(v.values()) for v in per_tree)
        step = spread / (top * parts) if spread > 0 else 1.0
    while True:
        q, mins, bins, ok = quantized(step)
        if ok:
            return step, q, float(mins), bins
        if fixed:
            raise ModelError("a tree has more leaves of one class than its lookups can add up; use a wider preset")
        step *= 1.02


@dataclass
class _Spec:
    """A tree model as :func:`_trees` builds it: ``trees`` (objects with a scikit-learn-like ``tree_``: children,
    feature, float threshold, max_depth), ``strict`` (a split is x < t, XGBoost's, instead of x <= t), per output
    the trees it adds (``tree_of``) and their float leaf values (``per_out``: {leaf: value} per tree), ``base`` per
    output, how to read the outputs, the classes, and ``single`` (one classification tree: one-hot values)."""

    trees: list
    per_out: list
    tree_of: list
    base: list
    how: str
    classes: object
    single: bool = False
    strict: bool = False


def _leaves(tree) -> list[int]:
    """The leaves reachable from the root (XGBoost's node ids may leave gaps)."""
    t, out, stack = tree.tree_, [], [0]
    while stack:
        n = stack.pop()
        if t.children_left[n] == -1:
            out.append(n)
        else:
            stack += [int(t.children_left[n]), int(t.children_right[n])]
    return sorted(out)


def _sklearn_spec(est, name: str, x: np.ndarray) -> _Spec:
    _fitted(est, name, "tree_" if name.startswith(("Decision", "ExtraTree")) and "Trees" not in name
            else "estimators_")
    classifier = name.endswith("Classifier")
    if name.startswith(("Decision", "ExtraTreeC", "ExtraTreeR")):
        trees, weight = [est], 1.0
    elif name.startswith("GradientBoosting"):
        trees, weight = list(est.estimators_.ravel()), float(est.learning_rate)
    else:
        trees, weight = list(est.estimators_), 1.0 / len(est.estimators_)
    single = len(trees) == 1 and classifier
    leaves = [_leaves(t) for t in trees]
    if not classifier:
        per_out = [[{leaf: weight * float(t.tree_.value[leaf].ravel()[0]) for leaf in lv}
                    for t, lv in zip(trees, leaves, strict=True)]]
        base = [0.0]
        if name.startswith("GradientBoosting"):
            base = [float(est.predict(x[:1])[0] - weight * sum(t.predict(x[:1])[0] for t in trees))]
        return _Spec(trees, per_out, [list(range(len(trees)))], base, "value", None)
    classes = est.classes_
    k = len(classes)
    cols = 1 if k == 2 else k
    if name.startswith("GradientBoosting"):
        n = est.estimators_.shape[0]
        init = np.atleast_2d(est.decision_function(x[:1]))[0] - weight * np.array(
            [sum(est.estimators_[i, c].predict(x[:1])[0] for i in range(n)) for c in range(cols)])
        per_out = [[{leaf: weight * float(est.estimators_[i, c].tree_.value[leaf].ravel()[0])
                     for leaf in leaves[i * cols + c]} for i in range(n)] for c in range(cols)]
        tree_of = [[i * cols + c for i in range(n)] for c in range(cols)]
        return _Spec(trees, per_out, tree_of, list(init), "binary_raw" if k == 2 else "label", classes)
    classes_out = [1] if k == 2 else list(range(k))
    if single:
        per_out = [[{leaf: float(np.argmax(trees[0].tree_.value[leaf][0]) == c) for leaf in leaves[0]}]
                   for c in classes_out]
    else:
        per_out = [[{leaf: weight * float(_proba(t, leaf)[c]) for leaf in lv} for t, lv in
                    zip(trees, leaves, strict=True)] for c in classes_out]
    return _Spec(trees, per_out, [list(range(len(trees)))] * cols, [0.0] * cols,
                 "binary_proba" if k == 2 else "label", classes, single=single)


def _xgboost_tree(dump: dict, n_features: int, names: dict) -> SimpleNamespace:
    """One tree of an XGBoost JSON dump as scikit-learn-like arrays (node ids kept; leaf values in ``value``)."""
    nodes, stack = {}, [dump]
    while stack:
        node = stack.pop()
        nodes[int(node["nodeid"])] = node
        stack += node.get("children", [])
    size = max(nodes) + 1
    left, right = np.full(size, -1), np.full(size, -1)
    feature, threshold = np.full(size, -2), np.full(size, -2.0)
    value = np.zeros((size, 1, 1))
    depth = {0: 0}
    for nid in sorted(nodes):
        node = nodes[nid]
        if "leaf" in node:
            value[nid, 0, 0] = float(node["leaf"])
            continue
        split = node["split"]
        f = names.get(split, None)
        if f is None:
            f = int(split[1:]) if split.startswith("f") and split[1:].isdigit() else None
        if f is None or not 0 <= f < n_features:
            raise ModelError(f"XGBoost: a split on feature {split!r}, not one of the {n_features} inputs")
        left[nid], right[nid] = int(node["yes"]), int(node["no"])
        feature[nid], threshold[nid] = f, float(node["split_condition"])
        depth[left[nid]] = depth[right[nid]] = depth[nid] + 1
    return SimpleNamespace(tree_=SimpleNamespace(children_left=left, children_right=right, feature=feature,
                                                 threshold=threshold, value=value, max_depth=max(depth.values())))


def _xgboost_spec(est, name: str, x: np.ndarray) -> _Spec:
    import json

    import xgboost

    try:
        booster = est.get_booster()
    except Exception as e:
        raise ModelError(f"{name} is not fitted; call fit first") from e
    kind = est.get_params().get("booster") or "gbtree"
    if kind != "gbtree":
        raise ModelError(f"{name}: only tree boosters are read (booster='gbtree'), got {kind!r}")
    names = {n: i for i, n in enumerate(booster.feature_names or [])}
    trees = [_xgboost_tree(json.loads(d), x.shape[1], names) for d in booster.get_dump(dump_format="json")]
    leaf_ids = booster.predict(xgboost.DMatrix(x[:1]), pred_leaf=True).reshape(-1)
    margin = np.atleast_1d(np.asarray(est.predict(x[:1], output_margin=True), np.float64).reshape(-1))
    classifier = name.endswith("Classifier")
    classes = getattr(est, "classes_", None) if classifier else None
    cols = len(margin)
    parallel = int(est.get_params().get("num_parallel_tree") or 1)  # trees per class per round
    per_out, tree_of, base = [], [], []
    for c in range(cols):
        idx = [i for i in range(len(trees)) if (i // parallel) % cols == c]
        per_out.append([{leaf: float(trees[i].tree_.value[leaf, 0, 0]) for leaf in _leaves(trees[i])} for i in idx])
        tree_of.append(idx)
        base.append(float(margin[c] - sum(trees[i].tree_.value[int(leaf_ids[i]), 0, 0] for i in idx)))
    how = "value" if not classifier else ("binary_raw" if cols == 1 else "label")
    return _Spec(trees, per_out, tree_of, base, how, classes, strict=True)


def _trees(est, name: str, x: np.ndarray, *, params: Params | None, bits: int | None, encoding: str,
           low_bits: int = 0, parts: int = 1):
    """(TreeEnsemble, how to read its values: "label" / "binary_*" / "value", classes)."""
    spec = _xgboost_spec(est, name, x) if name in XGBOOST else _sklearn_spec(est, name, x)
    params = params or (presets.P4 if spec.single else presets.P8)
    p = params.message_bits
    if isinstance(low_bits, bool) or not isinstance(low_bits, int) or low_bits < 0:
        raise ModelError(f"{name}: low_bits is an int >= 0 (0: features whole), got {low_bits!r}")
    if low_bits and (3 << low_bits > 1 << p or 4**low_bits + 1 > budget(params)):
        raise ModelError(f"{name}: low_bits {low_bits} does not fit {params.name}: a split comparison reads "
                         f"2^{low_bits} g + l up to {3 << low_bits} (at most 2^{p} and noise 4^r + 1 within the "
                         f"budget {budget(params)}); use low_bits <= {max(0, p - 2)}")
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 1:
        raise ModelError(f"{name}: parts is how many encrypted sums each output may be split into, an int >= 1, "
                         f"got {parts!r}")
    widest = p + low_bits
    if bits is not None and not 1 <= bits <= widest:
        raise ModelError(f"{name}: bits must be in [1, {widest}] ({params.name} carries {p}-bit messages"
                         + (f", features split at {low_bits} low bits" if low_bits else "") + f"), got {bits}")
    if encoding not in ("uniform", "thresholds"):
        raise ModelError(f"encoding is 'uniform' or 'thresholds', got {encoding!r}")
    depth = max(t.tree_.max_depth for t in spec.trees)
    if depth > (1 << p) - 1:
        raise ModelError(f"{name}: trees of depth {depth} need more than {p}-bit messages; limit max_depth or use a "
                         "wider preset")
    splits: dict = {}
    for t in spec.trees:
        tt = t.tree_
        for node in np.flatnonzero(tt.children_left != -1):
            splits.setdefault(int(tt.feature[node]), set()).add(float(tt.threshold[node]))
    if not splits:
        raise ModelError(f"{name}: the fitted trees make no split (a constant model); nothing to encrypt")
    encoders = {}
    for f, ts in splits.items():
        cuts = np.array(sorted(ts))
        if encoding == "thresholds" and len(cuts) <= (1 << widest) - 1:
            encoders[f] = Encoder(max(1, int(len(cuts)).bit_length()), cuts, strict=spec.strict)
        else:
            b = bits or p
            lo, hi = float(x[:, f].min()), float(x[:, f].max())
            encoders[f] = Encoder(b, None, lo, (hi - lo) / ((1 << b) - 1) if hi > lo else 1.0, strict=spec.strict)
    int_trees = []
    for t in spec.trees:
        tt = t.tree_
        nodes = np.flatnonzero(tt.children_left != -1)
        int_trees.append(_int_tree(t, {int(n): encoders[int(tt.feature[n])].threshold(float(tt.threshold[n]))
                                       for n in nodes}))
    top = (1 << p) - 1
    groups = [cut_leaves(t, params) for t in int_trees]
    outputs, steps, shifts = [], [], []
    for vals, idx in zip(spec.per_out, spec.tree_of, strict=True):
        gs = [groups[i] for i in idx]
        step, q, shift, bins = _quantized_sum(vals, gs, top, 1.0 if spec.single else None, parts,
                                              budget(params))
        out = []
        for b in bins:  # a part: per tree, the values of the leaves of its lookups in the part
            leaves: dict = {}
            for j, g in b:
                leaves.setdefault(j, {}).update({leaf: q[j][leaf] for leaf in gs[j][g]})
            out.append([(idx[j], d) for j, d in sorted(leaves.items()) if any(d.values())])
        outputs.append([o for o in out if o] or [[]])
        steps.append(step)
        shifts.append(shift)
    model = TreeEnsemble(int_trees, encoders, outputs, spec.base, steps, shifts, params, low_bits)
    return model, spec.how, spec.classes


def _proba(tree, leaf: int) -> np.ndarray:
    v = np.asarray(tree.tree_.value[leaf][0], np.float64)
    return v / v.sum() if v.sum() > 0 else v


# --------------------------------------------------------------------------------------------------
# The estimator
# --------------------------------------------------------------------------------------------------


def _features(x, n: int, name: str, what: str, *, one: bool = False) -> np.ndarray:
    """x as float64 ``[samples, n]`` (``one``: a single sample of n values too); ModelError naming ``what`` for
    another shape, no sample, or values that are not finite."""
    a = np.asarray(x, dtype=np.float64)
    if one and a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2 or a.shape[1] != n or a.shape[0] == 0:
        raise ModelError(f"{name}: {what} has shape {np.shape(x)}; the estimator takes [samples, {n}]")
    if not np.all(np.isfinite(a)):
        raise ModelError(f"{name}: {what} holds values that are not finite (NaN or infinity)")
    return a


class EncryptedEstimator(Runner):
    """A fitted scikit-learn estimator compiled to an encrypted program, with the estimator's vocabulary:
    :meth:`predict` (labels or values, computed encrypted), :meth:`predict_approximated` (the quantized or
    approximated model in the clear), :meth:`predict_plain` (the estimator itself), and the key owner's steps
    ``keygen``, ``encrypt``, ``run`` (the server's), ``decrypt`` (to predictions). ``report``: how the model was
    compiled and how it agrees with the estimator on the calibration samples. :meth:`export` writes the program
    with its client side (the features' encoding, the classes): :func:`crossfhe.ml.load` runs it from the file."""

    def __init__(self, estimator, name: str, how: str, classes, *, model: CompiledModel | None = None,
                 trees: TreeEnsemble | None = None, circuit=None, report=None):
        self.estimator, self.name, self.how, self.classes_ = estimator, name, how, classes
        self.model, self.trees = model, trees
        self.circuit = model.circuit if model is not None else circuit
        self.report = model.report if model is not None else report
        self._spec = None

    @property
    def scheme(self) -> str:
        return self.model.scheme if self.model is not None else "tfhe"

    @property
    def spec(self) -> ClientSpec:
        """The client side (:class:`~crossfhe.ml.client.ClientSpec`): a network's with how its outputs become
        predictions, or a tree model's encoders and output grid."""
        if self._spec is None:
            classes = None if self.classes_ is None else np.asarray(self.classes_)
            if self.model is not None:
                self._spec = replace(self.model.spec, how=self.how, classes=classes)
            else:
                t = self.trees
                if len(t.part_of) == len(t.outputs):  # one sum per output: its grid
                    out = dict(out_lo=t.lo, out_step=t.step)
                else:  # parts added after decryption
                    out = dict(out_parts=np.stack([t.part_of, np.zeros_like(t.part_of)], axis=1),
                               out_scale=t.step, out_bias=t.lo)
                self._spec = ClientSpec("tfhe", self.name, t.params.name, (self.estimator.n_features_in_,),
                                        len(t.outputs), encoders=t.input_encoders, how=self.how, classes=classes,
                                        **out)
        return self._spec

    def _samples(self, x) -> np.ndarray:
        return _features(x, self.estimator.n_features_in_, self.name, "X", one=True)

    def encrypt(self, x, *, keys=None):
        """Samples ``X`` ``[n, features]`` encrypted (what :meth:`run` takes)."""
        a = self._samples(x)
        if keys is None:
            self.keygen()
        return self._encrypt(a, keys)

    def decision(self, out, *, keys=None) -> np.ndarray:
        """The decrypted decision values ``[n, outputs]`` (logits, class scores, or the regression value)."""
        return self._values(out, keys)

    def _label(self, scores: np.ndarray) -> np.ndarray:
        return labels(self.how, self.classes_, scores)

    def predict(self, x) -> np.ndarray:
        """``decrypt(run(encrypt(X)))`` with this model's keys (made if needed): ``[n]`` predictions."""
        return self.decrypt(self.run(self.encrypt(x)))

    def decision_approximated(self, x) -> np.ndarray:
        a = self._samples(x)
        if self.model is not None:
            return self.model._approximated(a)
        return self.trees.values(self.trees.outputs_plain(self.trees.encode(a)))

    def predict_approximated(self, x) -> np.ndarray:
        """What :meth:`predict` computes, in the clear (TFHE: exactly; CKKS: without its noise)."""
        return self._label(self.decision_approximated(x))

    def predict_plain(self, x) -> np.ndarray:
        """The scikit-learn estimator's own ``predict``."""
        return self.estimator.predict(self._samples(x))

    def export(self, path, **kwargs):
        """Write the compiled program and its client side to ``path`` (:meth:`crossfhe.Circuit.export`'s file and
        options): :func:`crossfhe.ml.load` reads it back as a model whose ``predict`` gives the estimator's
        predictions, a server's :func:`crossfhe.load_circuit` as a circuit."""
        return self.circuit.export(path, model=self.spec.to_json(), **kwargs)


@dataclass
class TreeReport:
    """What compiling a tree model did: the preset, the encoding, the number of trees and lookups, and the agreement
    of the quantized model (in the clear) and the encrypted one with the estimator on the calibration samples."""

    model: str
    params: str
    encoding: str
    bits: tuple
    trees: int
    quantized: float
    encrypted: float | None = None
    exact: bool | None = None
    cost: dict | None = None
    how_equal: bool = True
    """True for a classifier (``quantized``, ``encrypted``: the fraction of equal predictions), False for a
    regressor (the largest absolute difference)."""

    def __str__(self) -> str:
        what = "predictions equal" if self.how_equal else "max |diff|"
        lines = [f"{self.model}: TFHE, {self.params}, {self.trees} trees, {self.encoding} encoding of "
                 f"{len(self.bits)} features ({min(self.bits)}-{max(self.bits)} bits), "
                 f"{(self.cost or {}).get('bootstraps', '?')} lookups per sample",
                 f"  quantized vs estimator on the calibration samples: {what} {self.quantized:.4g}"]
        if self.encrypted is not None:
            lines.append(f"  encrypted vs estimator: {what} {self.encrypted:.4g}; equal to the quantized model: "
                         f"{self.exact}")
        return "\n".join(lines)


def _agreement(a: np.ndarray, b: np.ndarray, classifier: bool) -> float:
    return float(np.mean(a == b)) if classifier else float(np.max(np.abs(np.asarray(a, float) - b)))


def from_sklearn(estimator, X_calibration, *, scheme: str | None = None, params=None, bits: int | None = None,
                 encoding: str = "uniform", low_bits: int = 0, parts: int = 1, check: int = 8,
                 seed: bytes | None = None, progress="auto", **options) -> EncryptedEstimator:
    """Compile a fitted scikit-learn ``estimator`` (module docstring) to an encrypted program, calibrated on
    ``X_calibration`` (``[n, features]``, e.g. the training set). ``scheme``: ``"ckks"`` (default for linear
    models and perceptrons) or ``"tfhe"`` (trees: the only one). Trees: ``params`` a TFHE preset (default P4 for
    one classification tree, P8 otherwise), ``bits`` and ``encoding`` as in the module docstring, ``low_bits`` and
    ``parts`` as in its "Small presets" paragraph (e.g. 6-bit features on P4: ``low_bits=2``). Linear models and
    perceptrons: ``params`` and ``options`` as :func:`crossfhe.ml.compile_onnx`. ``check``: how many calibration
    samples to run encrypted now (0: none), compared in ``report``. ``progress``: as :func:`crossfhe.ml.compile_onnx`
    (the stages of compiling). ModelError for an estimator that is not
    supported or not fitted, or samples of the wrong shape."""
    name = _kind(estimator)
    n = getattr(estimator, "n_features_in_", None)
    if n is None:
        raise ModelError(f"{name} is not fitted; call fit first")
    x = _features(X_calibration, n, name, "X_calibration")
    if isinstance(check, bool) or not isinstance(check, int) or check < 0:
        raise ModelError(f"check is how many samples to run encrypted (an int >= 0), got {check!r}")
    classifier = name.endswith("Classifier") or name in ("LogisticRegression", "LogisticRegressionCV", "LinearSVC",
                                                         "RidgeClassifier", "RidgeClassifierCV", "SGDClassifier",
                                                         "PassiveAggressiveClassifier", "Perceptron")
    if name in TREES or name in XGBOOST:
        if scheme not in (None, "tfhe"):
            raise ModelError(f"{name}: trees compile to TFHE only (comparisons are lookups); use scheme='tfhe'")
        if options:
            raise ModelError(f"{name}: unknown options {sorted(options)} for trees (params, bits, encoding, "
                             "low_bits, parts, check)")
        cb, what = progress_callback(progress), f"compiling {name} (TFHE)"
        steps = 3 if check else 2
        report_progress(cb, 0, steps, what)
        model, how, classes = _trees(estimator, name, x, params=params, bits=bits, encoding=encoding,
                                     low_bits=low_bits, parts=parts)
        model.name = name
        report_progress(cb, 1, steps, what)
        try:
            circuit = model.compile()
        except (CircuitError, ParameterError) as e:
            raise ModelError(f"{name}: {e}") from e
        est = EncryptedEstimator(estimator, name, how, classes, trees=model, circuit=circuit)
        quant = est.predict_approximated(x)
        plain = estimator.predict(x)
        est.report = TreeReport(name, model.params.name, encoding, tuple(e.bits for e in model.encoders),
                                len(model.trees),
                                _agreement(quant, plain, classifier), cost=dict(circuit.cost),
                                how_equal=classifier)
        report_progress(cb, 2, steps, what)
        if check:
            est.keygen(seed=seed)
            some = x[:check]
            got = est.decision(est.run(est.encrypt(some)))
            est.report.encrypted = _agreement(est._label(got), plain[:check], classifier)
            est.report.exact = bool(np.array_equal(got, est.decision_approximated(some)))
            report_progress(cb, 3, steps, what)
        return est
    if bits is not None or encoding != "uniform" or low_bits or parts != 1:
        raise ModelError(f"{name}: bits, encoding, low_bits and parts are options of tree models; a linear model or "
                         "perceptron takes input_bits / act_bits (TFHE) or degree / precision (CKKS)")
    net = _network(estimator, name, n)
    classes = getattr(estimator, "classes_", None) if classifier else None
    how = "value" if not classifier else ("binary_raw" if net.n_out == 1 else "label")
    model = compile_network(net, x, scheme=scheme or "ckks", params=params, check=check, seed=seed,
                            progress=progress, **options)
    return EncryptedEstimator(estimator, name, how, classes, model=model)


__all__ = ["LINEAR", "MLP", "TREES", "XGBOOST", "Encoder", "EncryptedEstimator", "TreeEnsemble", "TreeReport",
           "from_sklearn"]
