"""Decision trees and gradient-boosted trees on encrypted features (Taurus §VI: decision tree classifier,
XGBoost), as TFHE circuits (:mod:`crossfhe.apps.tfhe_ml`).

Encoding. Features in [0, 1] (e.g. :func:`crossfhe.apps.datasets.breast_cancer`) are quantized to ``bits``-bit
integers q = min(floor(x 2^bits), 2^bits - 1) (:func:`~crossfhe.apps.tfhe_ml.quantize_unit`) and the trees are
trained by scikit-learn on those integers, so every threshold is some k + 0.5 and x <= k + 0.5 iff x <= k: the
quantized model's comparisons are exact integer comparisons. The client encrypts only the features the model uses
(``model.features``, in that order), one ``TFHEInt(bits)`` each.

Circuit (one sample; the compiler batches). Depth 1: every internal node n (feature f, threshold t) is one lookup
b_n = [x_f <= t] in {0, 1}; the nodes on one feature share its key switch (KS-dedup), equal thresholds share a test
vector (ACC-dedup), equal (feature, threshold) pairs are one bootstrap (CSE). Depth 2: a leaf L at depth d_L is
reached iff its path's d_L directions all hold, i.e. iff s_L = sum over its path of (b_n if the path goes left
else 1 - b_n) equals d_L. Packed subtrees: a whole subtree is one lookup. For a node r at depth d with the
internal nodes S of its subtree, m = 2^|S| s_r + sum_i 2^i b_{S_i} is an integer in [0, (d + 1) 2^|S|) (noise
sum_i 4^i + d 4^|S| bootstraps'), and one lookup maps it to the value of the leaf the bits reach when s_r = d,
and to 0 otherwise. :func:`leaf_terms` cuts each tree at the shallowest nodes whose m fits p bits and the noise
budget (a leaf, |S| = 0, is the unpacked case s_L -> v_L [s_L = d_L]); a depth-3 tree at P4 or P6 is two
lookups instead of one per leaf. Exactly one leaf per tree is reached, so a tree's value is the sum of its
terms; :func:`~crossfhe.apps.tfhe_ml.reduce_sum` adds them (and, for boosting, the trees) with clamping lookups
min(m, b) where the compiler's interval bound (the sum of the terms' bounds) would leave [0, 2^p).

Split features (``low_bits`` r > 0). A comparison lookup reads all of x_f, so ``bits``-bit features need p >= bits
(P6 for 6 bits), where each bootstrap costs several times P4's. With ``low_bits`` the client sends each feature as
two digits, h = q >> r (bits - r bits) and l = q mod 2^r, and b = [x_f <= t] takes two P4-sized lookups
(:func:`compare`): g = 2 [h < t_h] + [h = t_h], then [g = 2] + [g = 1] [l <= t_l] from 2^r g + l < 3 2^r <= 2^p.
6-bit features fit P4 with r = 2 (h of 4 bits). The rest of the circuit reads only the bits b.

- :class:`DecisionTree`: one output per class c >= 1, the sum of the indicators [s_L = d_L] of the leaves of class
  c (their majority class): 1 if the sample reaches one, else 0 (all 0: class 0), bound 1 after clamping where
  more than 2^p - 1 leaves have one class. Two classes: one output, the class index. Bits: depth <= 2^p - 1
  (s_L), bits <= p.
- :class:`GradientBoostedTrees` (binary): the raw score init + lr sum_t value_t(x) is quantized with one step
  Delta to q_init + sum_t q_t(x) (q = round(value / Delta)); tree t contributes q_t - min_L q_{t,L} in
  [0, R_t], and Delta is the finest step with sum_t R_t <= 2^p - 1, so the shifted score S fits p bits, and with
  each tree's sum of leaf contributions <= 2^p - 1 (so a tree's leaves always add up before clamping). A final
  lookup gives [S + q_init + sum_t min q_t > 0], the class.
"""

from __future__ import annotations

import numpy as np

from crossfhe.apps.tfhe_ml import Term, TFHEModel, budget, clamp_traced, pick_params, quantize_unit, reduce_sum
from crossfhe.errors import ParameterError
from crossfhe.tfhe import presets


def structure(tree) -> tuple[dict, dict]:
    """(internal nodes {node: (feature, t)} with x <= t the left branch, t an int; leaves {leaf: [(node, left)]})
    of a fitted scikit-learn tree on integer features."""
    t = tree.tree_
    internal, leaves = {}, {}
    stack = [(0, [])]
    while stack:
        node, path = stack.pop()
        left, right = t.children_left[node], t.children_right[node]
        if left == -1:
            leaves[node] = path
            continue
        internal[node] = (int(t.feature[node]), int(np.floor(t.threshold[node])))
        stack.append((right, path + [(node, False)]))
        stack.append((left, path + [(node, True)]))
    return internal, dict(sorted(leaves.items()))


def walk(tree, q: np.ndarray, column: dict) -> np.ndarray:
    """The leaf each row of ``q`` (int64 [n, columns]) reaches: int64 [n] (integer comparisons x_f <= t)."""
    t = tree.tree_
    node = np.zeros(len(q), dtype=np.int64)
    thr = np.floor(t.threshold).astype(np.int64)
    col = np.array([column.get(int(f), 0) for f in t.feature], dtype=np.int64)
    for _ in range(t.max_depth + 1):
        leaf = t.children_left[node] == -1
        go = q[np.arange(len(q)), col[node]] <= thr[node]
        node = np.where(leaf, node, np.where(go, t.children_left[node], t.children_right[node]))
    return node


def children(leaves: dict) -> dict:
    """{internal node: {True: left child, False: right child}} from the leaves' paths."""
    kids: dict = {}
    for leaf, path in leaves.items():
        for (node, left), nxt in zip(path, [n for n, _ in path[1:]] + [leaf]):
            kids.setdefault(node, {})[left] = nxt
    return kids


def cuts(tree, params) -> list[tuple[int, list, list[int]]]:
    """Where :func:`leaf_terms` cuts ``tree`` (module docstring, "Packed subtrees"): per cut node r, (r, its path
    [(node, went left)], the internal nodes of its subtree in preorder), in depth-first order. A cut node is the
    shallowest on its path with (d + 1) 2^|S| <= 2^p and the noise sum_i 4^i + d 4^|S| within the budget."""
    internal, leaves = structure(tree)
    kids = children(leaves)
    size, nb = 1 << params.message_bits, budget(params)

    def below(node) -> list[int]:
        return [node] + below(kids[node][True]) + below(kids[node][False]) if node in internal else []

    out, stack = [], [(0, [])]
    while stack:
        node, path = stack.pop()
        sub, d = below(node), len(path)
        k = len(sub)
        if k and ((d + 1) << k > size or (4**k - 1) // 3 + d * 4**k > nb):
            stack += [(kids[node][True], path + [(node, True)]), (kids[node][False], path + [(node, False)])]
            continue
        out.append((node, path, sub))
    return out


def cut_leaves(tree, params) -> list[list[int]]:
    """The leaves under each of :func:`cuts`' nodes: one :func:`leaf_terms` term each, whose bound is the largest
    value among them."""
    internal, leaves = structure(tree)
    kids = children(leaves)

    def under(node) -> list[int]:
        return under(kids[node][True]) + under(kids[node][False]) if node in internal else [node]

    return [under(node) for node, _, _ in cuts(tree, params)]


def compare(xs, column, f: int, t: int, cache: dict, low_bits: int = 0):
    """The traced bit b = [x_f <= t], made once per (f, t) in ``cache``. ``column[f]``: the index of feature f's
    input (a whole feature: one lookup of x_f), or the pair of indices (i_h, i_l) of its two digits (a split
    feature, module docstring "Split features"): x_f = 2^r h + l arrives as the inputs ``xs[i_h]`` = h and
    ``xs[i_l]`` = l (r = ``low_bits``), t = 2^r t_h + t_l; then g = 2 [h < t_h] + [h = t_h] (one lookup of h, shared
    by every t with the same t_h) and b = [g = 2] + [g = 1] [l <= t_l], one lookup of 2^r g + l in [0, 3 2^r)
    (noise 4^r + 1); where t_l = 2^r - 1, b = [h <= t_h], one lookup of h."""
    if (f, t) in cache:
        return cache[f, t]
    c = column[f]
    if not isinstance(c, tuple):
        cache[f, t] = xs[c].apply(lambda m, t=t: int(m <= t))
        return cache[f, t]
    if not low_bits:
        raise ParameterError(f"feature {f} arrives as two digits but low_bits is 0")
    r, mask = low_bits, (1 << low_bits) - 1
    h, lo = xs[c[0]], xs[c[1]]
    th, tl = t >> r, t & mask
    if tl == mask:
        cache[f, t] = h.apply(lambda m, th=th: int(m <= th))
        return cache[f, t]
    if ("high", f, th) not in cache:
        cache["high", f, th] = h.apply(lambda m, th=th: 2 if m < th else int(m == th))
    g = cache["high", f, th]
    cache[f, t] = (g * (1 << r) + lo).apply(lambda z, tl=tl: int(z >> r == 2 or (z >> r == 1 and (z & mask) <= tl)))
    return cache[f, t]


def leaf_terms(xs, column, tree, values: dict, group, bits_cache: dict, params, low_bits: int = 0) -> list[Term]:
    """The traced contributions of one tree (module docstring, "Packed subtrees"): one lookup per cut node r
    whose subtree holds a leaf with ``values[leaf] > 0``. With d the depth of r, s_r its path sum (in [0, d]) and
    S the internal nodes of its subtree (preorder), the lookup maps m = 2^|S| s_r + sum_i 2^i b_{S_i} to the
    value of the leaf that the bits reach if s_r = d, else 0. A cut node is the shallowest on its path with
    (d + 1) 2^|S| <= 2^p and the noise sum_i 4^i + d 4^|S| within the budget (a leaf, |S| = 0, always is:
    :func:`_fits_tree`). ``column``: each feature's circuit input (:func:`compare`); ``bits_cache`` shares the
    comparison lookups b = [x_f <= t] across trees (:func:`compare`, ``low_bits`` for split features)."""
    internal, leaves = structure(tree)
    kids = children(leaves)
    size = 1 << params.message_bits

    def bit(node):
        return compare(xs, column, *internal[node], bits_cache, low_bits)

    def reached(node, bits: dict) -> int:
        while node in internal:
            node = kids[node][bool(bits[node])]
        return node

    terms = []
    for node, path, sub in cuts(tree, params):
        d, k = len(path), len(sub)
        table = [max(values.get(reached(node, {n: (c >> i) & 1 for i, n in enumerate(sub)}), 0), 0)
                 for c in range(1 << k)]
        table = [v if hit == d else 0 for hit in range(size >> k) for v in table]
        if max(table) <= 0:
            continue
        m = sum(((bit(n) if left else 1 - bit(n)) * (1 << k) for n, left in path), 0)
        m = sum((bit(n) * (1 << i) for i, n in enumerate(sub)), m)
        terms.append(Term(table[m] if isinstance(m, int) else m.apply(table), max(table), group))
    return terms


def _fits_tree(bits: int, depth: int, top: int, low_bits: int = 0):
    def fits(p):
        if p.message_bits < bits - low_bits:
            return (f"{bits}-bit features need at least {bits} message bits" if not low_bits else
                    f"{bits}-bit features split at {low_bits} low bits need {bits - low_bits} message bits")
        if low_bits and (3 << low_bits > 1 << p.message_bits or 4**low_bits + 1 > budget(p)):
            return f"a comparison of {low_bits} low bits reads 2^{low_bits} g + l up to {3 << low_bits}"
        if depth > (1 << p.message_bits) - 1 or depth > budget(p):
            return f"a path of depth {depth} sums {depth} bits"
        if top > (1 << p.message_bits) - 1:
            return f"the output reaches {top}"
        return None
    return fits


class _Trees(TFHEModel):
    """What the tree models share: the quantization, the feature columns, the float twin."""

    def __init__(self, *, bits: int, params, seed: int, low_bits: int = 0):
        super().__init__()
        if not 0 <= low_bits < bits:
            raise ParameterError(f"low_bits must be in [0, bits = {bits}), got {low_bits}")
        self.bits, self.seed, self._params_given, self.low_bits = int(bits), int(seed), params, int(low_bits)

    def _columns(self, trees) -> None:
        used = sorted({int(f) for t in trees for f in t.tree_.feature if f >= 0})
        if not used:
            raise ParameterError(f"{self.name}: the fitted trees make no split (constant model)")
        self.features = np.array(used, dtype=np.int64)
        r = self.low_bits
        self.column = {f: i for i, f in enumerate(used)}
        # feature f's circuit input (compare's column): its index, or the indices of its two digits
        self.inputs = {f: (2 * i, 2 * i + 1) if r else i for i, f in enumerate(used)}
        self.input_bits = (self.bits,) * len(used) if not r else (self.bits - r, r) * len(used)

    def encode(self, x) -> np.ndarray:
        """The client's inputs: the used features quantized, int64 [n, len(features)]; split (``low_bits`` r > 0),
        each as its two digits (q >> r, q mod 2^r): int64 [n, 2 len(features)]."""
        q = quantize_unit(np.asarray(x)[:, self.features], self.bits)
        if not self.low_bits:
            return q
        return np.stack([q >> self.low_bits, q & ((1 << self.low_bits) - 1)], axis=2).reshape(len(q), -1)

    def quantized(self, q) -> np.ndarray:
        """The quantized features back from :meth:`encode`'s inputs (digits joined): int64 [n, len(features)]."""
        q = np.asarray(q, dtype=np.int64)
        if not self.low_bits:
            return q
        return (q[:, 0::2] << self.low_bits) | q[:, 1::2]

    def predict_float(self, x) -> np.ndarray:
        """The same scikit-learn model trained on the unquantized features (the float reference)."""
        return self.float_model_.predict(np.asarray(x))


class DecisionTree(_Trees):
    """A scikit-learn ``DecisionTreeClassifier`` (``max_depth``, seeded) on ``bits``-bit features, evaluated on
    encrypted features: one comparison lookup per internal node, one lookup per packed subtree holding a leaf of a
    nonzero class, one output per nonzero class (module docstring). ``params``: default the smallest of P4, P6,
    P7, P8 that fits (bits <= p, depth <= 2^p - 1)."""

    name = "decision_tree"

    def __init__(self, *, max_depth: int = 4, bits: int = 4, params=None, seed: int = 0, low_bits: int = 0,
                 **tree_options):
        super().__init__(bits=bits, params=params, seed=seed, low_bits=low_bits)
        self.max_depth, self.tree_options = int(max_depth), tree_options

    def fit(self, x, y) -> DecisionTree:
        from sklearn.tree import DecisionTreeClassifier

        x, y = np.asarray(x), np.asarray(y)
        q = quantize_unit(x, self.bits)
        self.model_ = DecisionTreeClassifier(max_depth=self.max_depth, random_state=self.seed,
                                             **self.tree_options).fit(q, y)
        self.float_model_ = DecisionTreeClassifier(max_depth=self.max_depth, random_state=self.seed,
                                                   **self.tree_options).fit(x, y)
        self.classes_ = self.model_.classes_
        self._columns([self.model_])
        depth = self.model_.tree_.max_depth
        self.params = pick_params(_fits_tree(self.bits, depth, 1, self.low_bits), self.name, self._params_given)
        t = self.model_.tree_
        self.leaf_class = {leaf: int(np.argmax(t.value[leaf][0])) for leaf in structure(self.model_)[1]}
        return self

    def outputs_plain(self, q) -> np.ndarray:
        """[the leaf reached is of class c] for c = 1 .. classes - 1 (the tree walked with integer comparisons):
        int64 [n, classes - 1]."""
        leaf = walk(self.model_, self.quantized(q), self.column)
        cls = np.array([self.leaf_class[int(v)] for v in leaf], dtype=np.int64)
        return (cls[:, None] == np.arange(1, len(self.classes_))[None, :]).astype(np.int64)

    def decode(self, out) -> np.ndarray:
        out = np.asarray(out)
        return self.classes_[(out * np.arange(1, out.shape[1] + 1)).sum(axis=1)]

    def circuit_fn(self, *xs):
        cache: dict = {}
        outs = []
        for c in range(1, len(self.classes_)):
            ind = {leaf: int(k == c) for leaf, k in self.leaf_class.items()}
            terms = leaf_terms(xs, self.inputs, self.model_, ind, "tree", cache, self.params, self.low_bits)
            value, _ = reduce_sum(terms, {"tree": max}, self.params, clamp_traced)
            outs.append(xs[0] * 0 if isinstance(value, int) else value)
        return tuple(outs)


class GradientBoostedTrees(_Trees):
    """A scikit-learn ``GradientBoostingClassifier`` (binary; ``n_estimators`` trees of ``max_depth``, seeded) on
    ``bits``-bit features, its leaf values quantized to integers with one step (module docstring), evaluated on
    encrypted features. Output: the class index (0 or 1). ``params``: default P4 for bits <= 4, else P6, else P7
    for 7 bits, else P8 (more message bits: a finer step for the leaf values)."""

    name = "gradient_boosting"

    def __init__(self, *, n_estimators: int = 8, max_depth: int = 2, learning_rate: float = 0.3, bits: int = 4,
                 params=None, seed: int = 0, low_bits: int = 0):
        super().__init__(bits=bits, params=params, seed=seed, low_bits=low_bits)
        self.n_estimators, self.max_depth, self.learning_rate = int(n_estimators), int(max_depth), learning_rate

    def _sklearn(self):
        from sklearn.ensemble import GradientBoostingClassifier

        return GradientBoostingClassifier(n_estimators=self.n_estimators, max_depth=self.max_depth,
                                          learning_rate=self.learning_rate, random_state=self.seed)

    def fit(self, x, y) -> GradientBoostedTrees:
        x, y = np.asarray(x), np.asarray(y)
        q = quantize_unit(x, self.bits)
        self.model_ = self._sklearn().fit(q, y)
        self.float_model_ = self._sklearn().fit(x, y)
        if len(self.model_.classes_) != 2:
            raise ParameterError(f"{self.name} takes two classes, got {len(self.model_.classes_)}")
        self.classes_ = self.model_.classes_
        self.trees = [e[0] for e in self.model_.estimators_]
        self._columns(self.trees)
        depth = max(t.tree_.max_depth for t in self.trees)
        whole = self.bits - self.low_bits
        self.params = pick_params(_fits_tree(self.bits, depth, 1, self.low_bits), self.name, self._params_given or (
            presets.P4 if whole <= 4 else presets.P6 if whole <= 6 else presets.P7 if whole == 7 else presets.P8))
        lr = self.learning_rate
        leaves = [structure(t)[1] for t in self.trees]
        raw = [{leaf: lr * float(t.tree_.value[leaf].ravel()[0]) for leaf in lv} for t, lv in zip(self.trees, leaves)]
        init = float(self.model_.decision_function(q[:1])[0] - lr * sum(t.predict(q[:1])[0] for t in self.trees))
        top = (1 << self.params.message_bits) - 1
        biggest = max(abs(v) for r in raw for v in r.values()) or 1.0

        def quant(k):
            step = biggest / k
            qv = [{leaf: int(np.rint(v / step)) for leaf, v in r.items()} for r in raw]
            rng = sum(max(d.values()) - min(d.values()) for d in qv)
            per_tree = max(sum(v - min(d.values()) for v in d.values()) for d in qv)
            return step, qv, rng, per_tree

        def ok(k):
            _, _, rng, per_tree = quant(k)
            return rng <= top and per_tree <= top

        k = 1
        while ok(k + 1) and k < 1 << 12:
            k += 1
        self.step, qv, self.score_range, _ = quant(k)
        if not ok(k):
            raise ParameterError(f"{self.name}: {self.n_estimators} trees do not fit {top + 1} values even at one "
                                 f"level per leaf sign; use fewer trees or a wider preset")
        self.leaf_q = qv
        self.tree_min = [min(d.values()) for d in qv]
        self.init_q = int(np.rint(init / self.step))
        self.offset = self.init_q + sum(self.tree_min)
        return self

    def scores_plain(self, q) -> np.ndarray:
        """The quantized raw score q_init + sum_t q_t(x) of each row (int64 [n]); positive: class 1."""
        q = self.quantized(q)
        s = np.full(len(q), self.init_q, dtype=np.int64)
        for t, d in zip(self.trees, self.leaf_q):
            s += np.array([d[int(v)] for v in walk(t, q, self.column)], dtype=np.int64)
        return s

    def outputs_plain(self, q) -> np.ndarray:
        """[score > 0] per row: int64 [n, 1]."""
        return (self.scores_plain(q) > 0).astype(np.int64)[:, None]

    def decode(self, out) -> np.ndarray:
        return self.classes_[np.asarray(out)[:, 0]]

    def circuit_fn(self, *xs):
        cache: dict = {}
        terms = []
        for i, (t, d, lo) in enumerate(zip(self.trees, self.leaf_q, self.tree_min)):
            terms += leaf_terms(xs, self.inputs, t, {leaf: v - lo for leaf, v in d.items()}, ("tree", i), cache,
                                 self.params, self.low_bits)
        caps = {("tree", i): max for i in range(len(self.trees))}
        s, _ = reduce_sum(terms, caps, self.params, clamp_traced)
        if isinstance(s, int):
            return xs[0] * 0 + int(s + self.offset > 0)
        return s.apply(lambda m, off=self.offset: int(m + off > 0))


__all__ = ["DecisionTree", "GradientBoostedTrees", "children", "compare", "cut_leaves", "cuts", "leaf_terms",
           "structure", "walk"]
