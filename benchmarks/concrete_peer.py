"""Concrete ML peer for the Taurus workloads: decision tree, gradient-boosted trees (XGBoost), k-nearest neighbours,
a quantized MLP, a small CNN and an XGBoost regressor, compiled by Concrete to TFHE and run one encrypted sample at a
time.

    bash benchmarks/setup_concrete.sh                      # creates .venv-concrete (concrete-ml from PyPI)
    .venv-concrete/bin/python benchmarks/concrete_peer.py [--models tree,xgb,knn,mlp,cnn,xgbreg] [--samples 5]
        [--threads 1] [--n-bits 6 | --n-bits tree=7,xgb=6] [--p-error 2^-64 | --global-p-error 1e-5]
        [--quick] [--json PATH]

Prints one JSON object on stdout (one line), logs and a short table on stderr:
``{"suite": "concrete_ml", "peer": "concrete-ml 1.9.0", "versions": {...}, "threads": T, "models": {NAME: {...}},
"data": {...}, "notes": [...], "load": [1, 5, 15 min], "wall_s": s}``. A model that fails is reported with
``"error"`` instead of aborting the others.

The peer runs in its own virtual environment (``.venv-concrete``, made by ``benchmarks/setup_concrete.sh``): Concrete
ML pins its own torch, scikit-learn, numpy and XGBoost, and this file imports neither jax nor crossfhe.

**Data** (scikit-learn's bundled copies, no download), reproduced here line for line from
``crossfhe/apps/datasets.py`` (copied, not imported: the peer's venv has no jax):

- ``breast_cancer`` (trees, XGBoost, KNN): ``load_breast_cancer()``, 569 x 30, label 1 = benign; split by
  ``numpy.random.default_rng(0).permutation(569)``, the first 455 (= 569 * 4 // 5) training, the other 114 test; each
  feature scaled to [0, 1] by the training set's min and max, test values clipped to [0, 1]
  (``crossfhe.apps.datasets.breast_cancer()``).
- ``digits 28x28`` (MLP, CNN): ``load_digits()``, 1797 images 8 x 8, pixels / 16, resized to 28 x 28 by bilinear
  interpolation with aligned corners (output (i, j) samples the input at (i * 7 / 27, j * 7 / 27)), labels 0..9;
  split by ``default_rng(0).permutation(1797)``, the first 1437 training, the other 360 test
  (``crossfhe.apps.datasets.digits(28)``).
- ``diabetes`` (XGBoost regressor): ``load_diabetes()``, 442 x 10, the target a float (disease progression, 25 to
  346); split by ``default_rng(0).permutation(442)``, the first 353 (= 442 * 4 // 5) training, the other 89 test;
  features scaled to [0, 1] by the training set's min and max, test values clipped to [0, 1]; the target unscaled
  (``crossfhe.apps.datasets.diabetes()``).

The FHE samples are the first ``--samples`` test samples in that order; the accuracies "float" and
"quantized_clear" are over the whole test set, and also reported on the FHE samples alone (``*_on_samples``). For
the regressor ``r2`` takes their place (R^2, scikit-learn's ``r2_score``; on the samples only from two samples on),
with ``max_abs_diff`` (FHE against quantized_clear predictions, 0 unless a PBS failed).

**Models** (all seeded; defaults, ``--quick`` in brackets):

- ``tree``: ``concrete.ml.sklearn.DecisionTreeClassifier(max_depth=--tree-depth 8 [4], n_bits=7,
  random_state=0)`` (Taurus: 7-bit, depth 18 on Bioresponse).
- ``tree10``: ``tree`` at ``max_depth=10`` (the paper's size; the tree stops at depth 8 on these 455 rows), so that
  one run holds both trees.
- ``xgb``: ``concrete.ml.sklearn.XGBClassifier(n_estimators=--xgb-estimators 50 [10], max_depth=--xgb-depth 4 [3],
  n_bits=6, random_state=0)`` (Taurus: 50 estimators, depth 4, 6-bit; a regressor on Ames Housing there).
- ``xgbreg``: ``concrete.ml.sklearn.XGBRegressor(n_estimators=--xgbreg-estimators 50 [5], max_depth=--xgbreg-depth
  4 [2], learning_rate=--xgbreg-learning-rate 0.1 [0.5], base_score=0.5, tree_method="exact", n_bits=6,
  random_state=0, n_jobs=1)`` (Taurus: 50 estimators, depth 4, 6-bit, on Ames Housing). n_bits is its inputs' and
  its leaves' bits (each tree's leaf values quantized apart); the circuit outputs every tree's quantized leaf value
  and the trees are summed after decryption (Concrete ML's default: the sum is not computed encrypted).
  bench_taurus.py's ``xgb`` passes its own estimators, depth, learning rate and bits.
- ``knn``: ``concrete.ml.sklearn.KNeighborsClassifier(n_neighbors=--knn-k 3, n_bits=2 (Concrete ML's default))``
  fitted on the first ``--knn-train 10`` training samples and the first ``--knn-features 3`` columns (mean radius,
  mean texture, mean perimeter), test samples cut to the same columns (Taurus: 3 neighbours). Concrete ML's KNN
  (a bitonic top-k over all training distances) is its most restricted model: with n_bits 2 and 10 training
  samples Concrete finds no parameters (``NoParametersFound``) for all 30 features, nor for the first 10, 5 or 4,
  nor for 20 or 30 training samples with 8 features; the first 3, 6 or 8 compile (Concrete ML 1.9.0 / Concrete
  2.10.0, p_error 2^-40), but 8 features take 2.9 GiB of compressed evaluation keys, 265 s of key generation, and
  more than 14 GiB of memory at the first run (killed here); 3 features: 1.4 GiB, 9 GiB peak. With 3 features of 2
  bits and p_error 2^-64 it finds no parameters for 15, 20, 30, 50 or 100 training samples either (nor 100 samples
  at its default p_error, or of 1 or 2 features; 2026-12-01): hundreds of points, the paper's size, do not compile.
- ``knn10``: ``knn`` at 10 training samples of the first 3 columns (the largest that compiles here), whatever
  ``--knn-train`` and ``--knn-features`` say, so that one run holds both sizes.
- ``mlp``: torch ``Linear(784, --mlp-hidden 64 [32]) -> ReLU -> Linear(., 10)`` trained in float (Adam, lr 1e-3,
  batch 64, ``--epochs 30 [10]``, ``torch.manual_seed(0)``), then post-training quantized and compiled by
  ``concrete.ml.torch.compile.compile_torch_model(n_bits=6, rounding_threshold_bits={"n_bits": --rounding-bits 6,
  "method": --rounding-method exact})`` (exact rounding: the circuit computes the clear quantized inference bit for
  bit; "approximate" is cheaper and may differ by one in the rounded accumulators) with the
  first ``--calibration 200 [100]`` training images as the calibration set.
- ``cnn``: torch ``Conv2d(1, --cnn-maps 4, 7, stride 3) -> ReLU -> Flatten -> Linear(maps * 8 * 8, --cnn-hidden 64
  [32]) -> ReLU -> Linear(., 10)`` (the shape of TenSEAL's tutorial CNN, ReLU for its squares), trained and
  compiled as the MLP.

- ``nn20``, ``nn50``: Zama's NN-20 and NN-50 (:func:`DeepNN`): ``Conv2d(1, 2, (10, 11), padding=1) -> ReLU ->
  Linear(840, --nn-width 92 [16]) -> ReLU -> (depth - 3) x [Linear(92, 92) -> ReLU] -> Linear(92, 10)`` (``--quick``:
  depth 5), trained and compiled as the MLP (n_bits 6, rounding to 6 bits, exact). bench_taurus.py runs them with
  ``--warmup 0``: Concrete compiles ahead of time, so a warm-up run compiles nothing (each NN-20 run is minutes).

``--n-bits`` sets every model's quantization bits (``6``) or some of them (``tree=7,xgb=6``). "quantized_clear" is
Concrete ML's ``fhe="disable"`` inference of the same quantized model (integers in the clear, the circuit's
rounding included), so FHE predictions should equal it: ``agreement`` (labels) and ``raw_agreement`` (the circuit's
integer outputs) are 1.0 unless a PBS failed (probability ``p_error`` each).

**Error probability**: ``--p-error P`` (per PBS) or ``--global-p-error P`` (whole circuit), ``2^-64`` style accepted.
Neither: Concrete ML's default, ``p_error = 2^-40`` per PBS. ``--p-error tfhe-rs`` is ``2^-64`` (~5.4e-20), TFHE-rs's
default failure probability; Concrete 2.10 accepts it (it picks parameters whose p_error is at most that). The
record gives the requested value and the circuit's actual ``p_error`` and ``global_p_error``.

**Measured**: compile seconds (``model.compile`` / ``compile_torch_model``, quantization included), key generation
seconds (``circuit.keygen(force=True)``), key sizes (``client.evaluation_keys.serialize()`` bytes, compressed
with seeds since Concrete ML compiles with ``compress_evaluation_keys``, and the circuit's uncompressed
``size_of_bootstrap_keys`` / ``size_of_keyswitch_keys`` / ``size_of_secret_keys``), the circuit's statistics (largest
integer bit width, PBS and key-switch counts per parameter, complexity), and per sample, one at a time
(``model.predict(x[i:i+1], fhe="execute")``, after ``--warmup 1`` untimed sample from the training set): the
end-to-end ms (quantize, encrypt, run, decrypt, dequantize) and its stages (encrypt, run, decrypt), median, min and
max over the samples.

**Threads**: ``--threads N`` sets ``OMP_NUM_THREADS`` (Concrete's compiled loops are OpenMP-parallel),
``RAYON_NUM_THREADS`` (key generation), ``MKL_NUM_THREADS``/``OPENBLAS_NUM_THREADS`` and ``torch.set_num_threads``
before any of them is loaded, and pins the process to the first N CPUs it may use (``os.sched_setaffinity``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

MODELS = ("tree", "tree10", "xgb", "knn", "knn10", "mlp", "cnn", "xgbreg", "nn20", "nn50")
N_BITS = {"tree": 7, "tree10": 7, "xgb": 6, "knn": 2, "knn10": 2, "mlp": 6, "cnn": 6, "xgbreg": 6, "nn20": 6,
          "nn50": 6}
REGRESSORS = ("xgbreg",)
XGBREG_LEARNING_RATE = (0.1, 0.5)  # --xgbreg-learning-rate's default (full size, --quick)
P_ERROR_TFHE_RS = 2.0**-64  # TFHE-rs's default failure probability per PBS
CONCRETE_ML_DEFAULT_P_ERROR = 2.0**-40  # concrete.ml.common.utils.manage_parameters_for_pbs_errors
DIGITS_SIDE = 8
TREE10_DEPTH = 10  # tree10: the tree at the paper's depth (Taurus: depth 8-10 classifiers), whatever --tree-depth
KNN10_SIZE = (10, 3)  # knn10: training samples and features, the largest KNN Concrete ML 1.9 compiles here

# name: (full size, --quick size)
SIZES = {
    "tree_depth": (8, 4), "xgb_estimators": (50, 10), "xgb_depth": (4, 3), "knn_k": (3, 3), "knn_train": (10, 10),
    "knn_features": (3, 3), "xgbreg_estimators": (50, 5), "xgbreg_depth": (4, 2),
    "mlp_hidden": (64, 32), "nn_width": (92, 16), "cnn_maps": (4, 4), "cnn_hidden": (64, 32), "epochs": (30, 10),
    "calibration": (200, 100),
    "samples": (5, 2),
}

NOTES = [
    "one sample per encrypted evaluation (Concrete ML's predict loops over the rows), timed one at a time",
    "quantized_clear is Concrete ML's fhe='disable' inference: the same integers as the circuit computes",
    "evaluation_keys_bytes is the serialized size of the compressed (seeded) evaluation keys; bootstrap_keys_bytes "
    "and keyswitch_keys_bytes are the circuit's uncompressed sizes",
    "data reproduced from crossfhe/apps/datasets.py without importing crossfhe (same seeds, splits and resizing)",
]


def _log(*a) -> None:
    print(*a, file=sys.stderr, flush=True)


def _load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else []


def _rss_gib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


# --------------------------------------------------------------------------------------------------
# Threads (before torch or concrete is imported)
# --------------------------------------------------------------------------------------------------


def set_threads(threads: int) -> dict:
    """Thread-count variables for OpenMP, Rayon and BLAS, and affinity to the first ``threads`` CPUs this process
    may use. Returns what was applied."""
    for var in ("OMP_NUM_THREADS", "RAYON_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    cpus = None
    if hasattr(os, "sched_setaffinity"):
        allowed = sorted(os.sched_getaffinity(0))
        try:
            os.sched_setaffinity(0, set(allowed[:threads]))
        except OSError:
            pass
        cpus = sorted(os.sched_getaffinity(0))
    return {"threads": threads, "cpus": cpus, "env": ["OMP_NUM_THREADS", "RAYON_NUM_THREADS", "MKL_NUM_THREADS",
                                                       "OPENBLAS_NUM_THREADS"]}


# --------------------------------------------------------------------------------------------------
# Data: crossfhe/apps/datasets.py, copied (the peer's venv has no crossfhe)
# --------------------------------------------------------------------------------------------------


def resize(images, side: int) -> np.ndarray:
    """Bilinear resize with aligned corners of float images [n, s, s] to [n, side, side] (datasets.resize)."""
    images = np.asarray(images, dtype=np.float64)
    s = images.shape[1]
    pos = np.linspace(0.0, s - 1.0, side)
    lo = np.minimum(np.floor(pos).astype(np.int64), s - 2)
    frac = pos - lo
    rows = images[:, lo, :] * (1 - frac)[None, :, None] + images[:, lo + 1, :] * frac[None, :, None]
    return rows[:, :, lo] * (1 - frac)[None, None, :] + rows[:, :, lo + 1] * frac[None, None, :]


def _split(x, y, train: int | None, seed: int):
    n = len(y)
    train = n * 4 // 5 if train is None else int(train)
    order = np.random.default_rng(seed).permutation(n)
    a, b = order[:train], order[train:]
    return x[a], y[a], x[b], y[b]


def breast_cancer(train: int | None = None, seed: int = 0):
    """(x_train, y_train, x_test, y_test): datasets.breast_cancer()."""
    from sklearn.datasets import load_breast_cancer

    raw = load_breast_cancer()
    return _min_max(*_split(raw.data.astype(np.float64), raw.target.astype(np.int64), train, seed))


def diabetes(train: int | None = None, seed: int = 0):
    """(x_train, y_train, x_test, y_test), float targets: datasets.diabetes()."""
    from sklearn.datasets import load_diabetes

    raw = load_diabetes()
    return _min_max(*_split(raw.data.astype(np.float64), raw.target.astype(np.float64), train, seed))


def _min_max(xtr, ytr, xte, yte):
    """Each feature scaled to [0, 1] by the training set's min and max, test values clipped to [0, 1]
    (datasets._min_max)."""
    lo, hi = xtr.min(axis=0), xtr.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    return (xtr - lo) / span, ytr, np.clip((xte - lo) / span, 0, 1), yte


def digits(side: int = 28, train: int | None = None, seed: int = 0):
    """(x_train, y_train, x_test, y_test), images [n, side, side] in [0, 1]: datasets.digits(side)."""
    from sklearn.datasets import load_digits

    raw = load_digits()
    x = raw.images.astype(np.float64) / 16.0
    y = raw.target.astype(np.int64)
    if side != DIGITS_SIDE:
        x = resize(x, side)
    return _split(x, y, train, seed)


# --------------------------------------------------------------------------------------------------
# Models: each an object with fit(), float_predict(x), clear_predict(x), clear_raw(x), compile(...), and
# .circuit (the concrete.fhe.Circuit), fhe_predict(x) (one row)
# --------------------------------------------------------------------------------------------------


class SklearnModel:
    """A concrete.ml.sklearn estimator: fit in float and quantize, compile, predict."""

    def __init__(self, name: str, est, x_train, y_train, features: int | None = None):
        self.features = features  # use the first `features` columns only (KNN)
        self.name, self.est, self.x_train, self.y_train = name, est, self._v(x_train), y_train

    def _v(self, x):
        return x if self.features is None else np.asarray(x)[:, :self.features]

    def fit(self):
        self.est.fit(self.x_train, self.y_train)
        # Concrete ML fits its scikit-learn/XGBoost model on the quantized inputs: the float reference is the same
        # class with the same parameters fitted on the float inputs
        cls = self.est.sklearn_model_class
        keys = set(cls().get_params())
        self.float_est = cls(**{k: v for k, v in self.est.get_params().items() if k in keys})
        self.float_est.fit(self.x_train, self.y_train)

    def float_predict(self, x):
        return np.asarray(self.float_est.predict(self._v(x)))

    def clear_predict(self, x):
        return np.asarray(self.est.predict(self._v(x), fhe="disable"))

    def clear_raw(self, x):
        """The circuit's integer outputs for the rows of x, computed in the clear."""
        q = self.est.quantize_input(self._v(x))
        return np.stack([np.asarray(self.est._inference(q[i:i + 1]))[0] for i in range(len(q))])

    def compile(self, x_cal, p_error, global_p_error):
        self.est.compile(self._v(x_cal), p_error=p_error, global_p_error=global_p_error)
        return self.est.fhe_circuit

    def fhe_predict(self, x):
        return np.asarray(self.est.predict(self._v(x), fhe="execute"))


def DeepNN(depth: int, width: int):
    """Zama's NN-``depth`` (Chillotti, Joye and Paillier 2021; Concrete ML's deep-network benchmark): a convolution of
    2 maps, kernel 10 x 11, padding 1 (2 x 21 x 20 = 840 values) and ReLU, a dense layer 840 -> ``width`` and
    ``depth`` - 3 dense layers ``width`` -> ``width``, each with ReLU, and a dense output layer -> 10: ``depth`` layers
    in all. As a torch module (built lazily: torch is imported here)."""
    import torch

    class _DeepNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(1, 2, (10, 11), stride=1, padding=1)
            self.dense1 = torch.nn.Linear(840, width)
            self.hidden = torch.nn.ModuleList([torch.nn.Linear(width, width) for _ in range(depth - 3)])
            self.fc = torch.nn.Linear(width, 10)

        def forward(self, x):
            x = torch.relu(self.conv(x))
            x = torch.relu(self.dense1(x.flatten(1)))
            for layer in self.hidden:
                x = torch.relu(layer(x))
            return self.fc(x)

    return _DeepNN()


class TorchModel:
    """A float torch module, trained here, quantized and compiled by compile_torch_model."""

    def __init__(self, name: str, module, x_train, y_train, *, n_bits: int, rounding_bits: int | None,
                 rounding_method: str, epochs: int, calibration: int):
        self.rounding_method = rounding_method
        self.name, self.module, self.x_train, self.y_train = name, module, x_train, y_train
        self.n_bits, self.rounding_bits, self.epochs, self.calibration = n_bits, rounding_bits, epochs, calibration
        self.qm = None

    def _x(self, x):
        return np.asarray(x, np.float32).reshape((len(x), *self.input_shape))

    def fit(self):
        import torch

        torch.manual_seed(0)
        x = torch.tensor(self._x(self.x_train))
        y = torch.tensor(self.y_train)
        opt = torch.optim.Adam(self.module.parameters(), lr=1e-3)
        loss_fn = torch.nn.CrossEntropyLoss()
        gen = torch.Generator().manual_seed(0)
        self.module.train()
        for _ in range(self.epochs):
            for idx in torch.randperm(len(x), generator=gen).split(64):
                opt.zero_grad()
                loss_fn(self.module(x[idx]), y[idx]).backward()
                opt.step()
        self.module.eval()

    def float_predict(self, x):
        import torch

        with torch.no_grad():
            return self.module(torch.tensor(self._x(x))).numpy().argmax(1)

    def clear_predict(self, x):
        return np.asarray(self.qm.forward(self._x(x), fhe="disable")).argmax(1)

    def clear_raw(self, x):
        q = self.qm.quantize_input(self._x(x))
        return np.asarray(self.qm.quantized_forward(q, fhe="disable"))

    def compile(self, x_cal, p_error, global_p_error):
        from concrete.ml.torch.compile import compile_torch_model

        rounding = None if not self.rounding_bits else {"n_bits": self.rounding_bits, "method": self.rounding_method}
        self.qm = compile_torch_model(self.module, self._x(x_cal[:self.calibration]), n_bits=self.n_bits,
                                      rounding_threshold_bits=rounding, p_error=p_error,
                                      global_p_error=global_p_error)
        return self.qm.fhe_circuit

    def fhe_predict(self, x):
        return np.asarray(self.qm.forward(self._x(x), fhe="execute")).argmax(1)


def build(name: str, opts: dict, n_bits: int, data: dict):
    """The model ``name`` and its parameters (as reported)."""
    if name == "xgbreg":
        from concrete.ml.sklearn import XGBRegressor

        xtr, ytr, _, _ = data["diabetes"]
        params = {"n_estimators": opts["xgbreg_estimators"], "max_depth": opts["xgbreg_depth"],
                  "learning_rate": opts["xgbreg_learning_rate"], "base_score": 0.5, "tree_method": "exact",
                  "n_bits": n_bits, "random_state": 0, "n_jobs": 1}
        return SklearnModel(name, XGBRegressor(**params), xtr, ytr), params
    if name in ("tree", "tree10", "xgb", "knn", "knn10"):
        xtr, ytr, _, _ = data["breast_cancer"]
        if name in ("tree", "tree10"):
            from concrete.ml.sklearn import DecisionTreeClassifier

            depth = TREE10_DEPTH if name == "tree10" else opts["tree_depth"]
            params = {"max_depth": depth, "n_bits": n_bits, "random_state": 0}
            return SklearnModel(name, DecisionTreeClassifier(**params), xtr, ytr), params
        if name == "xgb":
            from concrete.ml.sklearn import XGBClassifier

            params = {"n_estimators": opts["xgb_estimators"], "max_depth": opts["xgb_depth"], "n_bits": n_bits,
                      "random_state": 0, "n_jobs": 1}
            return SklearnModel(name, XGBClassifier(**params), xtr, ytr), params
        from concrete.ml.sklearn import KNeighborsClassifier

        params = {"n_neighbors": opts["knn_k"], "n_bits": n_bits}
        m, f = KNN10_SIZE if name == "knn10" else (opts["knn_train"], opts["knn_features"])
        params_out = dict(params, train_samples=m, features=f, feature_columns=f"the first {f} of 30")
        return SklearnModel(name, KNeighborsClassifier(**params), xtr[:m], ytr[:m], features=f), params_out
    import torch

    xtr, ytr, _, _ = data["digits28"]
    torch.manual_seed(0)
    common = {"n_bits": n_bits, "rounding_bits": opts["rounding_bits"], "rounding_method": opts["rounding_method"],
              "epochs": opts["epochs"],
              "calibration": opts["calibration"]}
    if name == "mlp":
        h = opts["mlp_hidden"]
        net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(28 * 28, h), torch.nn.ReLU(),
                                  torch.nn.Linear(h, 10))
        model = TorchModel(name, net, xtr, ytr, **common)
        model.input_shape = (28 * 28,)
        arch = f"Linear(784, {h}) -> ReLU -> Linear({h}, 10)"
    elif name == "cnn":
        maps, h = opts["cnn_maps"], opts["cnn_hidden"]
        out = (28 - 7) // 3 + 1
        net = torch.nn.Sequential(torch.nn.Conv2d(1, maps, 7, stride=3), torch.nn.ReLU(), torch.nn.Flatten(),
                                  torch.nn.Linear(maps * out * out, h), torch.nn.ReLU(), torch.nn.Linear(h, 10))
        model = TorchModel(name, net, xtr, ytr, **common)
        model.input_shape = (1, 28, 28)
        arch = (f"Conv2d(1, {maps}, 7, stride 3) -> ReLU -> Flatten -> Linear({maps * out * out}, {h}) -> ReLU -> "
                f"Linear({h}, 10)")
    elif name in ("nn20", "nn50"):
        depth = int(name[2:]) if not opts.get("quick") else 5
        net = DeepNN(depth, opts["nn_width"])
        model = TorchModel(name, net, xtr, ytr, **common)
        model.input_shape = (1, 28, 28)
        arch = (f"Conv2d(1, 2, (10, 11), padding 1) -> ReLU -> Flatten (840) -> Linear(840, {opts['nn_width']}) -> "
                f"ReLU -> {depth - 3} x [Linear({opts['nn_width']}, {opts['nn_width']}) -> ReLU] -> "
                f"Linear({opts['nn_width']}, 10)")
    else:
        raise ValueError(f"unknown model {name!r}: one of {', '.join(MODELS)}")
    params = dict(common, architecture=arch, optimizer="Adam lr 1e-3 batch 64", seed=0)
    params["rounding_threshold_bits"] = params.pop("rounding_bits")
    return model, params


# --------------------------------------------------------------------------------------------------
# Measurement
# --------------------------------------------------------------------------------------------------


class StageTimer:
    """Replaces circuit.encrypt_run_decrypt (which Concrete ML's predict calls once per row) by the same three
    calls, timed, keeping the decrypted outputs."""

    def __init__(self, circuit):
        self.circuit, self.times, self.outputs = circuit, {"encrypt": [], "run": [], "decrypt": []}, []
        circuit.encrypt_run_decrypt = self

    def __call__(self, *args):
        c = self.circuit
        t0 = time.perf_counter()
        enc = c.encrypt(*args)
        t1 = time.perf_counter()
        res = c.run(*enc) if isinstance(enc, tuple) else c.run(enc)
        t2 = time.perf_counter()
        out = c.decrypt(res)
        t3 = time.perf_counter()
        for k, v in zip(("encrypt", "run", "decrypt"), (t1 - t0, t2 - t1, t3 - t2)):
            self.times[k].append(v)
        self.outputs.append(np.asarray(out))
        return out

    def reset(self):
        for v in self.times.values():
            v.clear()
        self.outputs.clear()


def _r2(y, pred) -> float | None:
    """R^2 (sklearn.metrics.r2_score); None for fewer than two samples, where it is not defined."""
    from sklearn.metrics import r2_score

    return float(r2_score(y, pred)) if len(y) >= 2 else None


def _ms(ts: list[float]) -> dict:
    if not ts:
        return {"median": None, "min": None, "max": None}
    return {"median": 1e3 * statistics.median(ts), "min": 1e3 * min(ts), "max": 1e3 * max(ts)}


def _jsonable(v):
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


def circuit_info(circuit) -> dict:
    st = circuit.statistics
    info = {
        "max_bit_width": int(circuit.graph.maximum_integer_bit_width()),
        "p_error": float(circuit.p_error), "global_p_error": float(circuit.global_p_error),
        "pbs_count": int(st["programmable_bootstrap_count"]), "ks_count": int(st["key_switch_count"]),
        "packing_ks_count": int(st["packing_key_switch_count"]), "complexity": float(st["complexity"]),
        "pbs_per_parameter": _jsonable(st["programmable_bootstrap_count_per_parameter"]),
        "ks_per_parameter": _jsonable(st["key_switch_count_per_parameter"]),
        "size_of_inputs": int(st["size_of_inputs"]), "size_of_outputs": int(st["size_of_outputs"]),
    }
    for k in ("clear_addition_count", "encrypted_addition_count", "clear_multiplication_count",
              "encrypted_negation_count"):
        if k in st:
            info[k] = int(st[k])
    return info


def run_model(name: str, opts: dict, n_bits: int, data: dict, samples: int, warmup: int,
              p_error: float | None, global_p_error: float | None) -> dict:
    rec: dict = {"model": name, "n_bits": n_bits}
    try:
        model, params = build(name, opts, n_bits, data)
        rec["params"] = params
        images = ("mlp", "cnn", "nn20", "nn50")
        key = "digits28" if name in images else "diabetes" if name in REGRESSORS else "breast_cancer"
        xtr, ytr, xte, yte = data[key]
        rec["dataset"] = {"digits28": "digits 28x28 (sklearn load_digits, resized)",
                          "breast_cancer": "breast cancer (sklearn load_breast_cancer)",
                          "diabetes": "diabetes (sklearn load_diabetes), a regression set"}[key]
        rec["train_samples"], rec["test_samples"] = len(model.x_train), len(xte)
        t0 = time.perf_counter()
        model.fit()
        rec["fit_s"] = time.perf_counter() - t0
        _log(f"concrete {name}: fitted in {rec['fit_s']:.1f} s, compiling")
        t0 = time.perf_counter()
        circuit = model.compile(model.x_train, p_error, global_p_error)
        rec["compile_s"] = time.perf_counter() - t0
        rec["circuit"] = circuit_info(circuit)
        t0 = time.perf_counter()
        circuit.keygen(force=True)
        rec["keygen_s"] = time.perf_counter() - t0
        rec["keys"] = {"evaluation_keys_bytes": len(circuit.client.evaluation_keys.serialize()),
                       "evaluation_keys_compressed": os.environ.get("USE_KEY_COMPRESSION", "1") == "1",
                       "bootstrap_keys_bytes": int(circuit.size_of_bootstrap_keys),
                       "keyswitch_keys_bytes": int(circuit.size_of_keyswitch_keys),
                       "secret_keys_bytes": int(circuit.size_of_secret_keys)}
        _log(f"concrete {name}: compiled in {rec['compile_s']:.1f} s (max {rec['circuit']['max_bit_width']} bits, "
             f"{rec['circuit']['pbs_count']} PBS, p_error {rec['circuit']['p_error']:.2e}), keys in "
             f"{rec['keygen_s']:.1f} s ({rec['keys']['evaluation_keys_bytes'] / 2**20:.1f} MiB serialized)")
        float_pred = model.float_predict(xte)
        clear_pred = model.clear_predict(xte)
        n = min(samples, len(xte))
        xs, ys = xte[:n], yte[:n]
        timer = StageTimer(circuit)
        for i in range(warmup):  # untimed: the first run loads the compiled library and touches the keys
            model.fhe_predict(xtr[i:i + 1])
        timer.reset()
        fhe_pred, e2e = [], []
        for i in range(n):
            t0 = time.perf_counter()
            fhe_pred.append(model.fhe_predict(xs[i:i + 1])[0])
            e2e.append(time.perf_counter() - t0)
            _log(f"concrete {name} sample {i + 1}/{n}: {1e3 * e2e[-1]:.0f} ms (run {1e3 * timer.times['run'][-1]:.0f})")
        fhe_pred = np.asarray(fhe_pred)
        raw_fhe = np.stack([o.reshape(o.shape[1:]) if o.ndim > 1 and o.shape[0] == 1 else o for o in timer.outputs])
        raw_clear = model.clear_raw(xs)
        raw_ok = [bool(np.array_equal(a.ravel(), b.ravel())) for a, b in zip(raw_fhe, raw_clear)]
        e = _ms(e2e)
        if name in REGRESSORS:
            quality = {"r2": {"float": _r2(yte, float_pred), "quantized_clear": _r2(yte, clear_pred),
                              "float_on_samples": _r2(ys, float_pred[:n]),
                              "quantized_clear_on_samples": _r2(ys, clear_pred[:n]),
                              "fhe_on_samples": _r2(ys, fhe_pred)},
                       "max_abs_diff": float(np.max(np.abs(fhe_pred - clear_pred[:n]))),
                       "fhe_predictions": [float(v) for v in fhe_pred],
                       "clear_predictions": [float(v) for v in clear_pred[:n]], "targets": [float(v) for v in ys]}
        else:
            quality = {"accuracy": {"float": float((float_pred == yte).mean()),
                                    "quantized_clear": float((clear_pred == yte).mean()),
                                    "float_on_samples": float((float_pred[:n] == ys).mean()),
                                    "quantized_clear_on_samples": float((clear_pred[:n] == ys).mean()),
                                    "fhe_on_samples": float((fhe_pred == ys).mean())},
                       "fhe_predictions": [int(v) for v in fhe_pred],
                       "clear_predictions": [int(v) for v in clear_pred[:n]], "labels": [int(v) for v in ys]}
        rec.update(
            samples=n, warmup=warmup, **quality,
            agreement=float((fhe_pred == clear_pred[:n]).mean()),
            raw_agreement=float(np.mean(raw_ok)),
            ms_per_sample=e["median"], ms_per_sample_min=e["min"], ms_per_sample_max=e["max"],
            ms_per_sample_all=[1e3 * t for t in e2e],
            stage_ms={k: _ms(v)["median"] for k, v in timer.times.items()},
            run_ms=_ms(timer.times["run"]),
            peak_rss_gib=_rss_gib(),
        )
    except Exception as ex:  # a model that cannot be built, compiled or run is reported, not fatal
        import traceback

        rec["error"] = f"{type(ex).__name__}: {ex}"
        _log(f"concrete {name}: {rec['error']}\n{traceback.format_exc()[-2000:]}")
    return rec


# --------------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------------


def parse_probability(text: str | None) -> float | None:
    """'2^-64', '2**-40', '5.4e-20' or 'tfhe-rs' (2^-64); None for None/'default'."""
    if text is None or text == "default":
        return None
    if text == "tfhe-rs":
        return P_ERROR_TFHE_RS
    t = text.replace("**", "^")
    if "^" in t:
        base, exp = t.split("^", 1)
        v = float(base) ** float(exp)
    else:
        v = float(t)
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"an error probability must be in (0, 1), got {text}")
    return v


def parse_n_bits(text: str | None) -> dict:
    """'6' (all models) or 'tree=7,xgb=6' (those models); the defaults for the rest."""
    out = dict(N_BITS)
    if not text:
        return out
    if "=" not in text:
        return {k: int(text) for k in out}
    for part in text.split(","):
        k, v = part.split("=", 1)
        if k not in out:
            raise argparse.ArgumentTypeError(f"unknown model {k!r} in --n-bits")
        out[k] = int(v)
    return out


def versions() -> dict:
    import importlib.metadata as md

    out = {}
    for pkg in ("concrete-ml", "concrete-python", "torch", "scikit-learn", "xgboost", "numpy"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    out["python"] = sys.version.split()[0]
    return out


def _f3(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def _table(out: dict) -> None:
    _log(f"\n{'model':<6}{'bits':>5}{'thr':>4}{'n':>4}{'ms/sample':>11}{'run ms':>9}{'compile s':>10}"
         f"{'keygen s':>9}{'eval keys MiB':>14}{'max bits':>9}{'PBS':>7}  acc (R^2) float/quant/fhe, agree")
    for name, r in out["models"].items():
        if "error" in r:
            _log(f"{name:<6}{r.get('n_bits', ''):>5}{out['threads']:>4}   {r['error']}")
            continue
        a = r.get("accuracy") or r["r2"]
        _log(f"{name:<6}{r['n_bits']:>5}{out['threads']:>4}{r['samples']:>4}{r['ms_per_sample']:>11.0f}"
             f"{r['run_ms']['median']:>9.0f}{r['compile_s']:>10.1f}{r['keygen_s']:>9.1f}"
             f"{r['keys']['evaluation_keys_bytes'] / 2**20:>14.1f}{r['circuit']['max_bit_width']:>9}"
             f"{r['circuit']['pbs_count']:>7}  {_f3(a['float'])}/{_f3(a['quantized_clear'])}/"
             f"{_f3(a['fhe_on_samples'])}, {r['agreement']:.3f}")
    _log(f"load {out['load']}, {out['wall_s']:.0f} s")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {','.join(MODELS)}")
    p.add_argument("--samples", type=int, default=None, help="test samples run in FHE per model (default 5, quick 2)")
    p.add_argument("--warmup", type=int, default=1, help="untimed FHE runs first (training samples)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--n-bits", default=None, help="quantization bits: N for all, or tree=7,xgb=6,...")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--p-error", default=None, help="per-PBS error probability: 2^-64, 5.4e-20, tfhe-rs, default")
    g.add_argument("--global-p-error", default=None, help="whole-circuit error probability")
    p.add_argument("--quick", action="store_true", help="small models and 2 samples")
    for k, (full, quick) in SIZES.items():
        if k != "samples":
            p.add_argument(f"--{k.replace('_', '-')}", type=int, default=None, help=f"default {full} (quick {quick})")
    p.add_argument("--xgbreg-learning-rate", type=float, default=None,
                   help=f"default {XGBREG_LEARNING_RATE[0]} (quick {XGBREG_LEARNING_RATE[1]})")
    p.add_argument("--rounding-bits", type=int, default=6,
                   help="MLP/CNN rounding_threshold_bits (0: none)")
    p.add_argument("--rounding-method", choices=("exact", "approximate"), default="exact",
                   help="MLP/CNN rounding method (Concrete's fhe.Exactness)")
    p.add_argument("--json", help="also write the JSON object here")
    args = p.parse_args(argv)
    threads = set_threads(args.threads)
    t_start = time.perf_counter()
    try:
        p_error, global_p_error = parse_probability(args.p_error), parse_probability(args.global_p_error)
        n_bits = parse_n_bits(args.n_bits)
    except (ValueError, argparse.ArgumentTypeError) as e:
        p.error(str(e))
    models = [m for m in args.models.split(",") if m]
    bad = [m for m in models if m not in MODELS]
    if bad:
        p.error(f"unknown models {bad}: of {', '.join(MODELS)}")
    opts = {k: (getattr(args, k) if getattr(args, k, None) is not None else v[1 if args.quick else 0])
            for k, v in SIZES.items() if k != "samples"}
    opts["xgbreg_learning_rate"] = (args.xgbreg_learning_rate if args.xgbreg_learning_rate is not None
                                    else XGBREG_LEARNING_RATE[1 if args.quick else 0])
    opts["rounding_bits"] = args.rounding_bits or None
    opts["rounding_method"] = args.rounding_method
    opts["quick"] = args.quick
    samples = args.samples if args.samples is not None else SIZES["samples"][1 if args.quick else 0]

    import torch

    torch.set_num_threads(args.threads)
    threads["torch"] = torch.get_num_threads()
    data = {}
    if any(m in models for m in ("tree", "tree10", "xgb", "knn", "knn10")):
        data["breast_cancer"] = breast_cancer()
    if any(m in models for m in ("mlp", "cnn", "nn20", "nn50")):
        data["digits28"] = digits(28)
    if any(m in models for m in REGRESSORS):
        data["diabetes"] = diabetes()
    v = versions()
    out = {"suite": "concrete_ml", "peer": f"concrete-ml {v['concrete-ml']}", "versions": v,
           "threads": args.threads, "threads_applied": threads, "quick": args.quick,
           "p_error_requested": p_error, "global_p_error_requested": global_p_error,
           "p_error_default": CONCRETE_ML_DEFAULT_P_ERROR if p_error is None and global_p_error is None else None,
           "options": opts, "samples": samples,
           "data": {"breast_cancer": "sklearn load_breast_cancer, default_rng(0) permutation, 455 train / 114 test, "
                                     "min-max scaled to [0, 1] by the training set",
                    "digits28": "sklearn load_digits / 16, bilinear (aligned corners) 8x8 -> 28x28, default_rng(0) "
                                "permutation, 1437 train / 360 test",
                    "diabetes": "sklearn load_diabetes, default_rng(0) permutation, 353 train / 89 test, features "
                                "min-max scaled to [0, 1] by the training set, float target unscaled"},
           "models": {}, "notes": list(NOTES)}
    for name in models:
        out["models"][name] = run_model(name, opts, n_bits[name], data, samples, args.warmup, p_error,
                                        global_p_error)
    out["load"] = _load_average()
    out["wall_s"] = time.perf_counter() - t_start
    _table(out)
    text = json.dumps(_jsonable(out), default=float)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(text)
    print(text, flush=True)
    return 0 if not any("error" in r for r in out["models"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
