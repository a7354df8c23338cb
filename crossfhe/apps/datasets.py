"""Real data sets for the encrypted-learning workloads, from scikit-learn's bundled copies (no download):
handwritten digits (1797 images of 8 x 8 pixels, 16 grey levels, UCI "optdigits" test set) resized to the
papers' shapes, the Wisconsin breast-cancer table (569 x 30) and, for regression, the diabetes table (442 x 10, a
disease-progression score as the target). scikit-learn is the ``ml`` extra (``pip install crossfhe[ml]``); it is
imported on first use.

Resizing: bilinear interpolation with aligned corners (output pixel (i, j) samples the input at
(i (s - 1) / (S - 1), j (s - 1) / (S - 1))), pixel values scaled to [0, 1]. HELR's 14 x 14 (196 features) and
LoLa's 28 x 28 are the MNIST shapes of the papers; the 8 x 8 source limits what any model can learn, so
accuracies are those of this data set, not MNIST's.

Splits are deterministic: a seeded permutation (NumPy PCG64, ``seed``), then the first ``train`` samples.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from crossfhe.errors import ParameterError

DIGITS_SIDE = 8


@dataclass(frozen=True)
class Split:
    """Features and targets: ``x_train`` float64[n, features] (or [n, side, side] images), ``y_train`` int64[n]
    (class labels) or float64[n] (a regression set's targets)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    name: str

    def __repr__(self) -> str:
        if np.issubdtype(self.y_train.dtype, np.floating):
            what = f"targets {self.y_train.min():g}..{self.y_train.max():g}"
        else:
            what = f"classes {sorted(set(self.y_train.tolist()))}"
        return f"Split({self.name}: train {self.x_train.shape}, test {self.x_test.shape}, {what})"


def _sklearn():
    try:
        import sklearn.datasets
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("the bundled data sets come from scikit-learn: pip install 'crossfhe[ml]' "
                          "(or scikit-learn >= 1.3)") from e
    return sklearn.datasets


def resize(images, side: int) -> np.ndarray:
    """Bilinear resize with aligned corners of float images [n, s, s] to [n, side, side] (side >= 2)."""
    images = np.asarray(images, dtype=np.float64)
    if images.ndim != 3 or images.shape[1] != images.shape[2]:
        raise ParameterError(f"resize takes square images [n, s, s], got shape {images.shape}")
    if side < 2:
        raise ParameterError(f"side must be at least 2, got {side}")
    s = images.shape[1]
    pos = np.linspace(0.0, s - 1.0, side)
    lo = np.minimum(np.floor(pos).astype(np.int64), s - 2)
    frac = pos - lo
    # rows, then columns (separable)
    rows = images[:, lo, :] * (1 - frac)[None, :, None] + images[:, lo + 1, :] * frac[None, :, None]
    return rows[:, :, lo] * (1 - frac)[None, None, :] + rows[:, :, lo + 1] * frac[None, None, :]


def _split(x: np.ndarray, y: np.ndarray, train: int | None, seed: int, name: str) -> Split:
    n = len(y)
    train = n * 4 // 5 if train is None else int(train)
    if not 0 < train < n:
        raise ParameterError(f"{name} has {n} samples: train must be in [1, {n - 1}], got {train}")
    order = np.random.default_rng(seed).permutation(n)
    a, b = order[:train], order[train:]
    return Split(x[a], y[a], x[b], y[b], name)


def digits(side: int = DIGITS_SIDE, *, classes=None, binary=None, train: int | None = None, seed: int = 0,
           flatten: bool = False) -> Split:
    """scikit-learn's digits as [n, side, side] images in [0, 1] (``flatten``: [n, side^2]).

    ``classes``: keep only these digits (labels stay the digits); ``binary``: a set of digits labelled 1, the rest
    0 (e.g. ``binary={5, 6, 7, 8, 9}``). ``train``: training samples (default 80%); the rest is the test set."""
    raw = _sklearn().load_digits()
    x = raw.images.astype(np.float64) / 16.0
    y = raw.target.astype(np.int64)
    if classes is not None:
        keep = np.isin(y, list(classes))
        if not keep.any():
            raise ParameterError(f"no digits among classes {sorted(classes)}: classes are 0..9")
        x, y = x[keep], y[keep]
    if binary is not None:
        y = np.isin(y, list(binary)).astype(np.int64)
    if side != DIGITS_SIDE:
        x = resize(x, side)
    if flatten:
        x = x.reshape(len(x), -1)
    return _split(x, y, train, seed, f"digits {side}x{side}")


def breast_cancer(*, train: int | None = None, seed: int = 0) -> Split:
    """scikit-learn's breast-cancer table, each feature scaled to [0, 1] by the training set's min and max
    (test values clipped to [0, 1]); label 1 = benign."""
    raw = _sklearn().load_breast_cancer()
    return _min_max(_split(raw.data.astype(np.float64), raw.target.astype(np.int64), train, seed, "breast cancer"))


def diabetes(*, train: int | None = None, seed: int = 0) -> Split:
    """scikit-learn's diabetes table (``load_diabetes()``, 442 x 10: age, sex, body-mass index, blood pressure and
    six blood serum measurements), a regression set: the target is a float64 score of disease progression one year
    later (25 to 346). Split as the others (default 353 train, 89 test), each feature scaled to [0, 1] by the
    training set's min and max (test values clipped to [0, 1])."""
    raw = _sklearn().load_diabetes()
    return _min_max(_split(raw.data.astype(np.float64), raw.target.astype(np.float64), train, seed, "diabetes"))


def _min_max(s: Split) -> Split:
    """Each feature of ``s`` scaled to [0, 1] by the training set's min and max, test values clipped to [0, 1]."""
    lo, hi = s.x_train.min(axis=0), s.x_train.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    return Split((s.x_train - lo) / span, s.y_train, np.clip((s.x_test - lo) / span, 0, 1), s.y_test, s.name)
