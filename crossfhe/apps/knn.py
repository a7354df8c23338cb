"""k-nearest neighbours on an encrypted query (Taurus §VI: KNN classifier), as a TFHE circuit
(:mod:`crossfhe.apps.tfhe_ml`). The server holds N labelled training points in the clear; the client encrypts one
query of F features.

Model. The F features with the largest ANOVA F-score on the training set (scikit-learn ``SelectKBest``) are
quantized to ``bits``-bit integers (:func:`~crossfhe.apps.tfhe_ml.quantize_unit`); N training points are drawn
from the training set (seeded, without replacement) and kept: **the training set is small on purpose** (the
circuit makes N (N - 1) / 2 comparisons). Distance: L1, d_j = sum_f |x_f - t_jf| in [0, D], D = F (2^bits - 1).
The k points of smallest distance vote, ties broken by index (a stable sort); two classes, k odd.

Circuit (one query). Depth 1: the terms |x_f - t| (one lookup of x_f per distinct training value t; the N lookups
of one feature share its key switch: KS-dedup, and equal tables their test vector: ACC-dedup); d_j their sum
(noise F). Depth 2: for i < j, c_ij = [d_i <= d_j] = [d_j - d_i + D >= D], a lookup of a value in [0, 2D] (needs
2D <= 2^p - 1; noise 2F), one table for all pairs. The rank of j (its place in the stable sort) is
r_j = sum_{i<j} c_ij + sum_{i>j} (1 - c_ji) in [0, N - 1] (noise N - 1). Depth 3: for each point of the counted
class (the rarer label among the N), [r_j < k]. Depth 4 (or more, after clamping): votes = their sum (at most k of
them are 1), then [2 votes > k] decides the class. Pairs of two points of the other class are never compared.
"""

from __future__ import annotations

import numpy as np

from crossfhe.apps.tfhe_ml import Term, TFHEModel, budget, clamp_traced, pick_params, quantize_unit, reduce_sum
from crossfhe.errors import ParameterError


class KNN(TFHEModel):
    """``k``-nearest-neighbour classifier (two classes) over ``n_train`` training points and ``n_features``
    features of ``bits`` bits (module docstring). ``params``: default the smallest of P4, P6, P8 with bits <= p,
    2 D <= 2^p - 1 and N <= 2^p."""

    name = "knn"

    def __init__(self, *, k: int = 3, n_train: int = 16, n_features: int = 4, bits: int = 3, params=None,
                 seed: int = 0):
        super().__init__()
        if k % 2 == 0:
            raise ParameterError(f"k must be odd (two classes, no tied votes), got {k}")
        self.k, self.n_train, self.n_features, self.bits = int(k), int(n_train), int(n_features), int(bits)
        self.seed, self._params_given = int(seed), params

    def fit(self, x, y) -> KNN:
        from sklearn.feature_selection import SelectKBest, f_classif
        from sklearn.neighbors import KNeighborsClassifier

        x, y = np.asarray(x), np.asarray(y)
        self.classes_ = np.unique(y)
        if len(self.classes_) != 2:
            raise ParameterError(f"{self.name} takes two classes, got {len(self.classes_)}")
        self.features = np.sort(SelectKBest(f_classif, k=self.n_features).fit(x, y).get_support(indices=True))
        idx = np.random.default_rng(self.seed).choice(len(x), self.n_train, replace=False)
        self.points = quantize_unit(x[idx][:, self.features], self.bits)
        self.labels = np.searchsorted(self.classes_, y[idx])
        self.counted = int(np.sum(self.labels == 1) > np.sum(self.labels == 0)) ^ 1  # the rarer label
        self.span = self.n_features * ((1 << self.bits) - 1)
        self.float_model_ = KNeighborsClassifier(self.k, p=1).fit(x[idx][:, self.features], y[idx])
        self.input_bits = (self.bits,) * self.n_features
        n, d = self.n_train, self.span

        def fits(p):
            top = (1 << p.message_bits) - 1
            if p.message_bits < self.bits:
                return f"{self.bits}-bit features need {self.bits} message bits"
            if 2 * d > top:
                return f"distance differences span [0, {2 * d}]"
            if n - 1 > top or n - 1 > budget(p) or 2 * self.n_features > budget(p):
                return f"{n} points: ranks reach {n - 1}"
            return None

        self.params = pick_params(fits, self.name, self._params_given)
        return self

    def encode(self, x) -> np.ndarray:
        """The client's query: the selected features quantized, int64 [n, n_features]."""
        return quantize_unit(np.asarray(x)[:, self.features], self.bits)

    def distances(self, q) -> np.ndarray:
        """L1 distances of each query to each training point: int64 [n, N]."""
        q = np.asarray(q, dtype=np.int64)
        return np.abs(q[:, None, :] - self.points[None]).sum(axis=-1)

    def outputs_plain(self, q) -> np.ndarray:
        """[the k nearest (stable order) hold a majority of the counted class]: int64 [n, 1]."""
        order = np.argsort(self.distances(q), axis=1, kind="stable")[:, : self.k]
        votes = (self.labels[order] == self.counted).sum(axis=1)
        return (2 * votes > self.k).astype(np.int64)[:, None]

    def decode(self, out) -> np.ndarray:
        hit = np.asarray(out)[:, 0].astype(bool)
        return self.classes_[np.where(hit, self.counted, 1 - self.counted)]

    def predict_float(self, x) -> np.ndarray:
        """scikit-learn's KNeighborsClassifier (L1) on the same points and features, unquantized."""
        return self.float_model_.predict(np.asarray(x)[:, self.features])

    def circuit_fn(self, *xs):
        n, d, k = self.n_train, self.span, self.k
        terms: dict = {}

        def term(f, t):
            if (f, t) not in terms:
                terms[(f, t)] = xs[f].apply(lambda m, t=t: abs(m - t))
            return terms[(f, t)]

        dist = [sum(term(f, int(t)) for f, t in enumerate(p)) for p in self.points]
        mine = [j for j in range(n) if self.labels[j] == self.counted]
        c = {}
        for i in range(n):
            for j in range(i + 1, n):
                if i in mine or j in mine:
                    c[(i, j)] = (dist[j] - dist[i] + d).apply(lambda m: int(m >= d))
        votes = []
        for j in mine:
            rank = sum(c[(i, j)] for i in range(j)) + sum(1 - c[(j, i)] for i in range(j + 1, n))
            votes.append(Term(rank.apply(lambda m: int(m < k)), 1, "top"))
        total, _ = reduce_sum(votes, {"top": lambda h: min(sum(h), k)}, self.params, clamp_traced)
        if isinstance(total, int):
            return xs[0] * 0
        return total.apply(lambda m: int(2 * m > k))


__all__ = ["KNN"]
