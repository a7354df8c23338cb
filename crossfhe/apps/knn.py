"""k-nearest neighbours on an encrypted query (Taurus §VI: KNN classifier), as a TFHE circuit
(:mod:`crossfhe.apps.tfhe_ml`). The server holds N labelled training points in the clear; the client encrypts one
query of F features.

Model. The F features with the largest ANOVA F-score on the training set (scikit-learn ``SelectKBest``) are
quantized to ``bits``-bit integers (:func:`~crossfhe.apps.tfhe_ml.quantize_unit`); N training points are drawn
from the training set (seeded, without replacement; all of them for ``n_train=None``). Distance: L1,
d_j = sum_f |x_f - t_jf| in [0, D], D = F (2^bits - 1). Two classes, k odd: the k nearest points vote and
m = (k + 1) / 2 votes decide. The k nearest are the first k in the order of distance, ties broken by ``ties``:

- ``"index"``: by training index (a stable sort);
- ``"class"``: points of the counted class (the rarer label among the N) first, then by index. Then the counted
  class wins iff its m-th nearest point is no farther than the other class's m-th nearest: a rule on the multiset
  of (distance, label) pairs alone, which the ``count`` circuit below evaluates without ever sorting.

The counted class is the output: 1 where it wins.

Circuit for ``ties="index"`` (rank; N (N - 1) / 2 comparisons at most, for tens of points). Depth 1: the terms
|x_f - t| (one lookup of x_f per distinct training value t; the N lookups of one feature share its key switch:
KS-dedup, and equal tables their test vector: ACC-dedup); d_j their sum (noise F). Depth 2: for i < j,
c_ij = [d_i <= d_j] = [d_j - d_i + D >= D], a lookup of a value in [0, 2D] (needs 2D <= 2^p - 1; noise 2F), one
table for all pairs. The rank of j (its place in the stable sort) is r_j = sum_{i<j} c_ij + sum_{i>j} (1 - c_ji)
in [0, N - 1] (noise N - 1). Depth 3: for each point of the counted class, [r_j < k]. Depth 4 (or more, after
clamping): votes = their sum (at most k of them are 1), then [2 votes > k] decides the class. Pairs of two points
of the other class are never compared.

Circuit for ``ties="class"`` (count; for hundreds of points). The N points collapse into their L distinct
quantized locations (at most 2^(F bits)), each with its number of points of each class capped at m (w_A,l, w_B,l).
Depth 1: the terms |x_f - t| as above, d_l their sum. Depth 2: for each location l and threshold t in [0, T],
[d_l <= t] (a clear 1 where t is at least the largest distance any query can have to l). T is the largest k-th
nearest distance over every possible query, found in the clear by enumerating the (2^bits)^F queries (T = D when
they are more than 2^16). Then, per t, the saturating counts A_t = min(sum_l w_A,l [d_l <= t], m) and B_t likewise:
chunks clamped by min(s, m) (:func:`~crossfhe.apps.tfhe_ml.reduce_sum`), exact since
min(sum_i min(c_i, m), m) = min(sum_i c_i, m) for c_i >= 0. Depth 3 or more: e_t = [B_t = m and A_t < m], one lookup
of (m + 1) B_t + A_t in [0, (m + 1) m + m]. The other class wins iff e_t = 1 for some t (b_m <= t < a_m; t = b_m is at
most T whenever it wins), so the output is [sum_t e_t = 0], one last lookup. About L (T + 1) lookups for the
thresholds and a few per t for the counts, whatever N.
"""

from __future__ import annotations

import numpy as np

from crossfhe.apps.tfhe_ml import Term, TFHEModel, budget, clamp_traced, pick_params, quantize_unit, reduce_sum
from crossfhe.errors import ParameterError

MAX_PAIRS = 20_000
"""The most comparisons the ``ties="index"`` circuit is built with (one lookup each); beyond, fit raises and
points to ``ties="class"``, whose circuit grows with the distinct locations instead of the pairs."""

MAX_QUERIES = 1 << 16
"""The most possible queries (2^(F bits)) enumerated in the clear to bound the k-th nearest distance."""


class KNN(TFHEModel):
    """``k``-nearest-neighbour classifier (two classes) over ``n_train`` training points (None: the whole training
    set) and ``n_features`` features of ``bits`` bits, ties broken by ``ties`` ("index" or "class"; module
    docstring). ``params``: default the smallest of P4, P6, P7, P8 that fits the circuit's bounds."""

    name = "knn"

    def __init__(self, *, k: int = 3, n_train: int | None = 16, n_features: int = 4, bits: int = 3,
                 ties: str = "index", params=None, seed: int = 0):
        super().__init__()
        if k < 1 or k % 2 == 0:
            raise ParameterError(f"k must be odd and positive (two classes, no tied votes), got {k}")
        if ties not in ("index", "class"):
            raise ParameterError(f"ties is 'index' (a stable sort: rank circuit) or 'class' (the counted class "
                                 f"first: count circuit), got {ties!r}")
        if n_features < 1 or bits < 1:
            raise ParameterError(f"n_features and bits must be positive, got {n_features} and {bits}")
        self.k, self.n_features, self.bits, self.ties = int(k), int(n_features), int(bits), ties
        self.n_train = None if n_train is None else int(n_train)
        self.m = (self.k + 1) // 2
        self.seed, self._params_given = int(seed), params

    def fit(self, x, y) -> KNN:
        from sklearn.feature_selection import SelectKBest, f_classif
        from sklearn.neighbors import KNeighborsClassifier

        x, y = np.asarray(x), np.asarray(y)
        self.classes_ = np.unique(y)
        if len(self.classes_) != 2:
            raise ParameterError(f"{self.name} takes two classes, got {len(self.classes_)}")
        n = len(x) if self.n_train is None else self.n_train
        if not self.k <= n <= len(x):
            raise ParameterError(f"n_train must be in [k = {self.k}, {len(x)} training samples], got {n}")
        if self.n_features > x.shape[1]:
            raise ParameterError(f"n_features {self.n_features} exceeds the {x.shape[1]} features")
        self.features = np.sort(SelectKBest(f_classif, k=self.n_features).fit(x, y).get_support(indices=True))
        idx = np.random.default_rng(self.seed).choice(len(x), n, replace=False)
        self.points = quantize_unit(x[idx][:, self.features], self.bits)
        self.labels = np.searchsorted(self.classes_, y[idx])
        self.counted = int(np.sum(self.labels == 1) > np.sum(self.labels == 0)) ^ 1  # the rarer label
        self.span = self.n_features * ((1 << self.bits) - 1)
        self.float_model_ = KNeighborsClassifier(self.k, p=1).fit(x[idx][:, self.features], y[idx])
        self.input_bits = (self.bits,) * self.n_features
        if self.ties == "index":
            mine = int(np.sum(self.labels == self.counted))
            pairs = mine * (n - mine) + mine * (mine - 1) // 2
            if pairs > MAX_PAIRS:
                raise ParameterError(f"ties='index' compares {pairs} pairs of points (one lookup each) for "
                                     f"n_train={n}; use ties='class', whose circuit grows with the distinct "
                                     f"quantized points, not the pairs")
        else:
            self.locations, inv = np.unique(self.points, axis=0, return_inverse=True)
            self.weights = np.zeros((len(self.locations), 2), dtype=np.int64)  # [:, 0] counted, [:, 1] other
            np.add.at(self.weights, (inv.reshape(-1), (self.labels != self.counted).astype(np.int64)), 1)
            self.threshold = self._largest_kth()
        self.params = pick_params(self._fits, self.name, self._params_given)
        return self

    def _largest_kth(self) -> int:
        """T: the largest distance of a k-th nearest training point over every possible query (D if there are more
        than :data:`MAX_QUERIES` of them)."""
        levels, f = 1 << self.bits, self.n_features
        if levels ** f > MAX_QUERIES:
            return self.span
        grid = np.stack(np.meshgrid(*[np.arange(levels)] * f, indexing="ij"), axis=-1).reshape(-1, f)
        mult = self.weights.sum(axis=1)
        d = np.zeros((len(grid), len(self.locations)), dtype=np.int32)
        for i in range(f):
            d += np.abs(grid[:, i, None] - self.locations[None, :, i]).astype(np.int32)
        order = np.argsort(d, axis=1, kind="stable")
        cum = np.cumsum(mult[order], axis=1)
        kth = np.take_along_axis(d, order, axis=1)[np.arange(len(grid)), np.argmax(cum >= self.k, axis=1)]
        return int(kth.max())

    def _fits(self, p) -> str | None:
        top, nb = (1 << p.message_bits) - 1, budget(p)
        n, d, m = len(self.points), self.span, self.m
        if p.message_bits < self.bits:
            return f"{self.bits}-bit features need {self.bits} message bits"
        if self.n_features > nb:
            return f"a distance sums {self.n_features} terms, beyond the noise budget {nb}"
        if self.ties == "index":
            if 2 * d > top:
                return f"distance differences span [0, {2 * d}]"
            if n - 1 > top or n - 1 > nb or 2 * self.n_features > nb:
                return f"{n} points: ranks reach {n - 1}"
            return None
        if d > top:
            return f"distances span [0, {d}]"
        if (m + 1) * m + m > top or m * top > nb:
            return f"k = {self.k}: the counts' pair (m + 1) B + A reaches {(m + 1) * m + m}"
        if min(self.threshold + 1, d) > min(top, nb):
            return f"{min(self.threshold + 1, d)} thresholds to sum"
        return None

    def encode(self, x) -> np.ndarray:
        """The client's query: the selected features quantized, int64 [n, n_features]."""
        return quantize_unit(np.asarray(x)[:, self.features], self.bits)

    def distances(self, q) -> np.ndarray:
        """L1 distances of each query to each training point: int64 [n, N]."""
        q = np.asarray(q, dtype=np.int64)
        return np.abs(q[:, None, :] - self.points[None]).sum(axis=-1)

    def outputs_plain(self, q) -> np.ndarray:
        """[the k nearest (ordered by distance, ties by ``ties``) hold a majority of the counted class]: int64
        [n, 1]. Written as a sort, independent of either circuit."""
        d = self.distances(q)
        if self.ties == "index":
            order = np.argsort(d, axis=1, kind="stable")
        else:
            idx = np.broadcast_to(np.arange(d.shape[1]), d.shape)
            other = np.broadcast_to((self.labels != self.counted).astype(np.int64), d.shape)
            order = np.lexsort((idx, other, d), axis=-1)
        votes = (self.labels[order[:, : self.k]] == self.counted).sum(axis=1)
        return (2 * votes > self.k).astype(np.int64)[:, None]

    def decode(self, out) -> np.ndarray:
        hit = np.asarray(out)[:, 0].astype(bool)
        return self.classes_[np.where(hit, self.counted, 1 - self.counted)]

    def predict_float(self, x) -> np.ndarray:
        """scikit-learn's KNeighborsClassifier (L1) on the same points and features, unquantized."""
        return self.float_model_.predict(np.asarray(x)[:, self.features])

    # circuits --------------------------------------------------------------------------------------

    def circuit_fn(self, *xs):
        return self._rank(xs) if self.ties == "index" else self._count(xs)

    @staticmethod
    def _terms(xs):
        """term(f, t) = |x_f - t|, one lookup per (feature, training value), made once."""
        terms: dict = {}

        def term(f, t):
            if (f, t) not in terms:
                terms[(f, t)] = xs[f].apply(lambda m, t=t: abs(m - t))
            return terms[(f, t)]

        return term

    def _rank(self, xs):
        n, d, k = len(self.points), self.span, self.k
        term = self._terms(xs)
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

    def _saturated(self, clear: int, terms: list[Term]):
        """min(clear + sum of ``terms``, m): an int if it is known in the clear, else traced (module docstring)."""
        m = self.m
        cap = m - min(clear, m)
        if cap == 0 or not terms:
            return min(clear, m)
        value, hi = reduce_sum(terms, {"count": lambda h, cap=cap: min(sum(h), cap)}, self.params, clamp_traced)
        if hi > cap:
            value = clamp_traced(value, cap)
        return value + clear if clear else value

    def _count(self, xs):
        m, levels = self.m, 1 << self.bits
        term = self._terms(xs)
        dist = [sum(term(f, int(v)) for f, v in enumerate(loc)) for loc in self.locations]
        far = np.maximum(self.locations, levels - 1 - self.locations).sum(axis=1)
        w = np.minimum(self.weights, m)
        below: dict = {}
        clear_hits, hits = 0, []
        for t in range(self.threshold + 1):
            counts = []
            for c in (0, 1):
                clear, terms = 0, []
                for l_, wl in enumerate(w[:, c]):
                    if wl == 0:
                        continue
                    if t >= far[l_]:
                        clear += int(wl)
                        continue
                    if (l_, t) not in below:
                        below[(l_, t)] = dist[l_].apply(lambda v, t=t: int(v <= t))
                    terms.append(Term(below[(l_, t)] * int(wl), int(wl), "count"))
                counts.append(self._saturated(clear, terms))
            a, b = counts
            if isinstance(a, int) and isinstance(b, int):
                clear_hits += int(b == m and a < m)
            else:
                hits.append((b * (m + 1) + a).apply(lambda z: int(z // (m + 1) == m and z % (m + 1) < m)))
        if clear_hits:
            return xs[0] * 0
        if not hits:
            return xs[0] * 0 + 1
        return sum(hits).apply(lambda s: int(s == 0))


__all__ = ["KNN", "MAX_PAIRS", "MAX_QUERIES"]
