"""The Taurus workloads (Taurus §VI, Table IV) on multi-bit TFHE circuits: decision tree, gradient-boosted trees,
KNN, a quantized MLP, a small CNN, an XGBoost regressor and Zama's deep networks NN-20 and NN-50, each compiled by
crossfhe.compile (KS/ACC dedup, batched bootstraps).

    python benchmarks/bench_taurus.py [--quick] [--workloads tree,tree10,gbt,knn,knn10,mlp,cnn,xgb,nn20,nn50]
                                      [--batch 8]
                                      [--reps 10] [--no-peer | --peer-beside] [--json PATH]
    python benchmarks/bench_taurus.py --workloads nn20 --peer-beside --peer-samples 1 --reps 1 --batch 2

Per workload: accuracy (xgb, a regressor: R^2, ``r2``) on the whole test split of the float model, of the quantized
plain model (exact integer arithmetic) and of the encrypted model on the samples run (whose decrypted outputs must
equal the plain model's: ``exact``); latency per sample at batch 1 (median of >= 3 runs after a warm-up run that
compiles; encrypt, run, decrypt apart) and per sample at ``--batch`` (one run after its warm-up); PBS (bootstraps),
launches, key switches and test vectors before and after the compiler's dedup and batching passes; the preset and
its key sizes; the process's peak resident memory after the workload (``peak_rss_gib``: a high-water mark over
the workloads run so far in this process, so a workload's own figure is that of a run naming it alone); for
``--unoptimized`` workloads also the batch-1 latency of the circuit compiled with
``optimize=False`` (one launch and one key switch per lookup).

Data, split, seed and quantization (what a peer must reproduce; ``peer_spec`` gives them as JSON):

- tree, gbt, knn: ``crossfhe.apps.datasets.breast_cancer(seed=0)``: scikit-learn's table (569 x 30), a seeded
  permutation (NumPy PCG64, seed 0), the first 455 rows train, the other 114 test, each feature min-max scaled by
  the training rows (test clipped to [0, 1]); features quantized q = min(floor(x 2^b), 2^b - 1).
  tree: DecisionTreeClassifier(max_depth=6 (``--tree-depth``), random_state=0) on 6-bit q, each feature sent as two
  digits (q >> 2, q mod 4; crossfhe.apps.trees ``low_bits=2``), P4 (until 2026-12-01: whole 6-bit features, P6);
  tree10 the same at max_depth=10 (the paper's size; it stops at depth 8 on these rows), its peer ``tree10`` at
  depth 10 too. gbt:
  GradientBoostingClassifier(n_estimators=16, max_depth=3, learning_rate=0.3, random_state=0) on 6-bit q, leaf values
  rounded to one step (crossfhe.apps.trees), P6. knn (the paper's size): all 455 training points (``--knn
  TRAINxFEATURESxBITS``, default allx4x3; TRAIN points drawn with numpy.random.default_rng(0).choice(455, TRAIN,
  replace=False)), the 4 features of largest ANOVA F (SelectKBest(f_classif)), 3-bit q, k 3, L1 distance, ties to the
  rarer class (crossfhe.apps.knn ``ties="class"``: the count circuit, its size set by the 115 distinct quantized
  points, not by the 455), P6; in HEAVY (about a minute per sample). Concrete ML 1.9 finds no parameters for its KNN
  beyond about 10 training points (concrete_peer.py), so its record there is an error; knn10 is the size both
  compile: 10 points, the 3 features of largest F, 2-bit q, ties to the rarer class (P4), against the peer's
  ``knn10`` (10 rows, the first 3 columns, n_bits 2).
- mlp, cnn: ``crossfhe.apps.datasets.digits(28, seed=0)``: scikit-learn's 1797 8 x 8 digits resized bilinearly to
  28 x 28, pixels in [0, 1], seeded split 1437 / 360; pixels quantized to 2 bits. mlp: 784 -> 32 -> 10,
  MLPClassifier(relu, alpha=1e-3, max_iter=200, random_state=0), then 30 epochs of quantization-aware fine-tuning
  (NumPy Adam, rate 3e-3, seed 0), integer weights |w| <= 7, 3-bit activations, P8. cnn: conv 2 x 8 x 8 stride
  4 (36 windows) -> 10, NumPy Adam (seed 0, 20 epochs), 3-bit activations, P8, post-training quantization.
  Per-neuron quantization as in crossfhe.apps.qnn.
- gbt, tree: each tree cut into packed subtrees, one lookup each (crossfhe.apps.trees).
- xgb (Taurus's XGBoost regressor: 50 estimators, depth 4, 6-bit): ``crossfhe.apps.datasets.diabetes(seed=0)``:
  scikit-learn's diabetes table (442 x 10, target a float score 25..346), a seeded permutation (NumPy PCG64, seed
  0), the first 353 rows train, the other 89 test, each feature min-max scaled by the training rows (test clipped to
  [0, 1]). xgboost.XGBRegressor(n_estimators=50, max_depth=4, learning_rate=0.1, base_score=0.5,
  tree_method="exact", random_state=0, n_jobs=1) fitted on the float train rows (base_score 0.5: the only value
  Concrete ML's XGBRegressor takes; "exact": what its XGBoost 1.6 picks for a table this small), compiled by
  ``crossfhe.ml.from_sklearn(est, x_train, bits=6, params=P4, low_bits=2, parts=50)``: each feature on a uniform
  6-bit grid over its training range (q = round((x - lo) / step)), sent as two digits (q >> 2, q mod 4) so that a
  split x < t is two P4 lookups, and the 50 trees' leaf values on one step in at most 50 encrypted sums of 4 bits
  each, added after decryption (Concrete ML returns each tree's value and adds them after decryption too); the
  quantized model's ``r2`` is ``predict_approximated``'s (those integers in the clear), and the encrypted outputs
  must equal them exactly on the samples run (``--batch 89``: the whole test split encrypted). Until 2026-12-01
  (second session): whole 6-bit features on P8 and one 8-bit sum, 226 ms per bootstrap against P4's 5 ms
  (1.90x Concrete ML's time). The record adds ``input_bits``, ``trees``, ``parts``,
  ``output_step`` and ``output_bits``. XGBoost is not a dependency of crossfhe: ``xgb`` runs where it is installed
  (``pip install xgboost``) and is left out of the default list otherwise.

- nn20, nn50 (Taurus's CNN-20 and CNN-50: Zama's NN-20 and NN-50, Chillotti, Joye and Paillier 2021):
  ``crossfhe.apps.qnn.QuantizedDeepNN(depth=20 or 50)`` on digits(28): conv 2 maps of 10 x 11, stride 1, padding 1
  (840 values) -> ReLU -> dense 840 -> 92 -> ReLU -> (depth - 3) x [dense 92 -> 92 -> ReLU] -> dense 92 -> 10;
  JAX training, seed 0, 30 float epochs then 60 quantization-aware ones (Adam 1e-3, then 3e-3, cosine decay), the
  92 x 92 layers started looks-linear ([[U, -U], [-U, U]], U orthogonal), batch normalization folded into each
  lookup; 2-bit inputs and activations, |w| <= 3, P8: one lookup per conv output and hidden neuron (840 + 92
  (depth - 2) per image), depth - 1 bootstrap levels; the 92 x 92 layers stay dense. Not in the default
  list (minutes per image; the peer tens of minutes): name them. The peer is Concrete ML's
  ``compile_torch_model`` on the same architecture in torch (concrete_peer.py ``nn20`` / ``nn50``: trained in
  float, 30 epochs, post-training quantized at n_bits 6, rounding to 6 bits, exact), warm-up 0 (Concrete compiles
  ahead of time). ``--peer-beside`` runs it at the same time as ours, each pinned to half the CPUs, so that a
  session holds both; the record says ``peer_beside``.

``--quick``: P4 models of a few lookups (the tests' sizes; xgb: 5 estimators of depth 2, learning rate 0.5, on
4-bit features), batch 2, 3 reps: a smoke test in about a minute.
Threads: the process's CPUs (``threads`` in each record); run one heavy process at a time.

Peer: Concrete ML (benchmarks/concrete_peer.py in .venv-concrete) is started once by :func:`run_peer` after our
rows unless ``--no-peer`` (arguments: :func:`peer_args`; same data, split and seed, its own quantization); each
model's record is attached as ``peer_record``, ``peer_median_ms`` and ``ratio`` (ours / peer, ms per sample at
batch 1). xgb's peer is Concrete ML's XGBRegressor (model ``xgbreg``) with the same estimators, depth, learning
rate, base score, tree method and seed, n_bits 6 (4 with ``--quick``) for its inputs and leaves, fitted on the same
split; it sums the trees' decrypted leaf values in the clear (Concrete ML's default), ours adds its 50 partial sums
in the clear. For mlp and cnn a second peer runs our own integer network: :func:`export_network` writes it and
benchmarks/concrete_python_peer.py compiles it with concrete-python (the same integers, its own TFHE parameters,
outputs checked equal to ours): ``same_model_record``, ``same_model_ms`` and ``same_model_ratio``. This is the CNN
comparison, since Concrete ML's own CNN compiles to wrong outputs. For gpt2_head and gpt2_block (no Concrete ML
model) the same-model peer is benchmarks/concrete_graph_peer.py: :func:`export_graph_for_peer` writes our
unoptimized circuit (benchmarks/graph_export.py) and concrete-python compiles the same integer graph, lookup for
lookup, where it has at most :data:`GRAPH_PEER_MAX_LOOKUPS` lookups (``--quick``, or a smaller ``--gpt2-size``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent


def _worker_env() -> dict:
    """Every worker's environment, ours and the peer's: crossfhe.runtime.HEAP_ENV (glibc keeps and reuses freed
    memory, as the CLI and bench_bootstrap.py run; with glibc's defaults XLA:CPU faults its temporaries in afresh on
    every call: benchmarks/README.md, "Fewer rotation keys, and the benchmark's allocator")."""
    from crossfhe.runtime import HEAP_ENV

    return dict(os.environ, **HEAP_ENV)
WORKLOADS = ("tree", "tree10", "gbt", "knn", "knn10", "mlp", "cnn", "xgb", "nn20", "nn50", "gpt2_head", "gpt2_block")
HEAVY = ("knn", "nn20", "nn50", "gpt2_head", "gpt2_block")
"""Workloads left out of the default ``--workloads`` (a minute or more per encrypted sample; NN-20's peer tens of
minutes; GPT-2's head most of an hour on one core): named explicitly."""
OPTIONAL = {"xgb": "xgboost"}
"""Workloads that need a package crossfhe does not depend on: left out of the default ``--workloads`` where it is
missing (named explicitly, they fail with the package's name)."""
PAPER_MS = {"tree": 409.19, "tree10": 409.19, "knn": 306.66, "xgb": 689.29, "nn20": 11.60, "nn50": 74.27}
"""Taurus Table IV, the Taurus column (ms per inference on their accelerator, their models: decision tree on
Bioresponse, KNN, XGBoost regressor on Ames, CNN-20 and CNN-50 (Zama's NN-20 and NN-50)): context, not a comparison
measured here."""


def _parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", default=None,
                   help=f"comma-separated, of {','.join(WORKLOADS)} (default: all; xgb where XGBoost is installed)")
    p.add_argument("--batch", type=int, default=8, help="samples per batched run (throughput)")
    p.add_argument("--reps", type=int, default=10,
                   help="batch-1 repetitions (at least min(3, reps) and 2 s; nn20 and nn50: --reps 1)")
    p.add_argument("--max-seconds", type=float, default=30.0, help="stop repeating batch 1 after this (>= 3 reps)")
    p.add_argument("--unoptimized", default="tree,knn10",
                   help="workloads also timed at batch 1 compiled with optimize=False (no CSE, dedup or batching)")
    p.add_argument("--quick", action="store_true", help="small P4 models: a smoke test")
    p.add_argument("--knn", default="allx4x3", help="the knn workload's TRAINxFEATURESxBITS, TRAIN a number or all "
                                                    "(the peer's too; Concrete ML 1.9 compiles 10x3x2 at most: knn10)")
    p.add_argument("--tree-depth", type=int, default=6, help="the decision tree's max_depth (the peer's too; "
                                                             "Taurus: 8 to 18)")
    p.add_argument("--gpt2-size", default="768x12x8", help="the gpt2 workloads' D_MODELxHEADSxTOKENS without --quick "
                                                         "(GPT-2 small: 768x12x8)")
    p.add_argument("--no-peer", action="store_true", help="skip the Concrete ML peer")
    p.add_argument("--peer-samples", type=int, default=5, help="samples the peer runs, one at a time")
    p.add_argument("--peer-beside", action="store_true",
                   help="run the peer at the same time as ours, each on half of the CPUs (the peer on the first "
                        "half): for workloads of minutes per sample on both sides")
    p.add_argument("--json", default=str(HERE / "results" / "taurus.json"))
    return p.parse_args(argv)


# --------------------------------------------------------------------------------------------------
# Data and models (the definitions the peer reproduces)
# --------------------------------------------------------------------------------------------------


def peer_spec(name: str, quick: bool = False) -> dict:
    """The dataset, split, seed, quantization and model of workload ``name``, as JSON-able data."""
    tab = {"dataset": "sklearn.datasets.load_breast_cancer", "loader": "crossfhe.apps.datasets.breast_cancer",
           "split": {"seed": 0, "permutation": "numpy.random.default_rng(0).permutation(569)", "train": 455},
           "scaling": "min-max per feature on the train rows, test clipped to [0, 1]",
           "quantization": "q = min(floor(x * 2**bits), 2**bits - 1)"}
    img = {"dataset": "sklearn.datasets.load_digits", "loader": "crossfhe.apps.datasets.digits(28)",
           "split": {"seed": 0, "permutation": "numpy.random.default_rng(0).permutation(1797)", "train": 1437},
           "scaling": "pixels / 16, bilinear resize 8x8 -> 28x28 with aligned corners",
           "quantization": "q = min(floor(x * 2**bits), 2**bits - 1)"}
    reg = {"dataset": "sklearn.datasets.load_diabetes", "loader": "crossfhe.apps.datasets.diabetes",
           "split": {"seed": 0, "permutation": "numpy.random.default_rng(0).permutation(442)", "train": 353},
           "scaling": "min-max per feature on the train rows, test clipped to [0, 1]; target float, unscaled",
           "quantization": "per feature q = round((x - lo) / step) on a uniform grid of 2**bits points over the "
                           "train rows' range; the trees' sum quantized to the preset's message bits"}
    data = {"digits": img, "cancer": tab, "diabetes": reg}[MODELS[name](quick)[0]]
    return {"name": name, "quick": quick, "model": MODELS[name](quick)[1], **data}


def _model(name: str, quick: bool):
    from crossfhe.apps.attention import AttentionBlock, AttentionHead
    from crossfhe.apps.knn import KNN
    from crossfhe.apps.qnn import QuantizedCNN, QuantizedDeepNN, QuantizedMLP
    from crossfhe.apps.trees import DecisionTree, GradientBoostedTrees
    from crossfhe.tfhe import presets

    spec = MODELS[name](quick)[1]
    kw = {k: v for k, v in spec.items() if k not in ("class", "preset")}
    if spec.get("preset"):
        kw["params"] = presets.PRESETS[spec["preset"]]
    cls = {"DecisionTree": DecisionTree, "GradientBoostedTrees": GradientBoostedTrees, "KNN": KNN,
           "QuantizedMLP": QuantizedMLP, "QuantizedCNN": QuantizedCNN,
           "QuantizedDeepNN": QuantizedDeepNN, "AttentionHead": AttentionHead,
           "AttentionBlock": AttentionBlock}[spec["class"]]
    return cls(**kw)


def _deep(depth: int, quick: bool) -> dict:
    """Zama's NN-``depth`` (crossfhe.apps.qnn.QuantizedDeepNN: conv 2 x 10 x 11, padding 1, then 92-wide dense
    layers; ``depth`` layers), 2-bit inputs and activations, |w| <= 3, batch normalization folded into the
    lookups, looks-linear start, P7 for NN-20 and P8 for NN-50, quantization-aware batches of 64 and 128 (the
    class's defaults); ``quick``: depth 4, width 8, one map of 24 x 24 (25 windows), 1-bit inputs, P4, a few
    epochs."""
    if quick:
        return {"class": "QuantizedDeepNN", "depth": 4 if depth == 20 else 5, "width": 8, "channels": 1,
                "kernel": [24, 24], "padding": 0,
                "input_bits": 1, "act_bits": 1, "weight_max": 3, "epochs": 2, "qat_epochs": 1, "seed": 0,
                "preset": "P4"}
    return {"class": "QuantizedDeepNN", "depth": depth, "width": 92, "channels": 2, "kernel": [10, 11], "padding": 1,
            "input_bits": 2, "act_bits": 2, "weight_max": 3, "epochs": 30, "qat_epochs": 60, "start": "looks-linear",
            "seed": 0, "preset": "P7" if depth <= 20 else "P8", "qat_batch": 64 if depth <= 20 else 128}


GPT2_SIZE = {"d_model": 768, "n_heads": 12, "seq_len": 8}
"""The gpt2 workloads' shape without ``--quick`` (``--gpt2-size``): GPT-2 small's."""


def _gpt2(cls: str, quick: bool) -> dict:
    """GPT-2 small's attention (crossfhe.apps.attention): d_model 768, 12 heads of 64, 8 tokens (or
    ``--gpt2-size``), P6 with its default widths (2-bit inputs, 3-bit operands); ``quick``: d_model 8, 2 heads of
    4, 3 tokens, P4."""
    size = {"d_model": 8, "n_heads": 2, "seq_len": 3} if quick else dict(GPT2_SIZE)
    return {"class": cls, **size, "seed": 0, "preset": "P4" if quick else "P6"}


def gpt2_size(text: str) -> dict:
    """``--gpt2-size`` DxHxT: d_model D, H heads (D divisible by H), T tokens."""
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(v.isdigit() and int(v) > 0 for v in parts):
        raise SystemExit(f"--gpt2-size is D_MODELxHEADSxTOKENS (e.g. 768x12x8), got {text!r}")
    d, h, t = (int(v) for v in parts)
    if d % h:
        raise SystemExit(f"--gpt2-size: d_model {d} is not divisible by {h} heads")
    return {"d_model": d, "n_heads": h, "seq_len": t}


GPT2_CALIBRATION = 32
"""ln_1 outputs (random token sequences, seed 1) that calibrate the GPT-2 workloads' scales; the samples run are
others (seed 7), and the error against the float model is over 16 more (seed 5)."""

KNN_SIZE = {"n_train": None, "n_features": 4, "bits": 3}
TREE = {"max_depth": 6}
"""The decision tree's depth (``--tree-depth``; the peer gets the same)."""
"""The knn workload's training points (None: all 455), features and bits per feature (``--knn TRAINxFEATURESxBITS``,
TRAIN a number or ``all``; the peer gets the same three)."""
CANCER_TRAIN = 455
"""Training rows of datasets.breast_cancer(seed=0) (the peer's ``--knn-train`` for ``all``)."""
KNN10 = {"n_train": 10, "n_features": 3, "bits": 2}
"""The knn10 workload: the largest KNN Concrete ML 1.9 compiles here (concrete_peer.py ``knn10``)."""

MODELS = {
    "tree": lambda q: ("cancer", {"class": "DecisionTree", "max_depth": 3 if q else TREE["max_depth"],
                                  "bits": 4 if q else 6, "low_bits": 2, "seed": 0, "preset": "P4"}),
    "gbt": lambda q: ("cancer", {"class": "GradientBoostedTrees", "n_estimators": 4 if q else 16,
                                 "max_depth": 2 if q else 3, "learning_rate": 0.3, "bits": 3 if q else 6, "seed": 0,
                                 "preset": "P4" if q else "P6"}),
    "tree10": lambda q: ("cancer", {"class": "DecisionTree", "max_depth": 4 if q else 10, "bits": 4 if q else 6,
                                    "low_bits": 2, "seed": 0, "preset": "P4"}),
    "knn": lambda q: ("cancer", {"class": "KNN", "k": 3, "n_train": 40 if q else KNN_SIZE["n_train"],
                                 "n_features": 2 if q else KNN_SIZE["n_features"], "bits": 2 if q else KNN_SIZE["bits"],
                                 "ties": "class", "seed": 0}),
    "knn10": lambda q: ("cancer", {"class": "KNN", "k": 3, "n_train": 6 if q else KNN10["n_train"],
                                   "n_features": 2 if q else KNN10["n_features"], "bits": KNN10["bits"],
                                   "ties": "class", "seed": 0}),
    "mlp": lambda q: ("digits", {"class": "QuantizedMLP", "hidden": [4] if q else [32], "input_bits": 1 if q else 2,
                                 "act_bits": 2 if q else 3, "weight_max": 3 if q else 7, "seed": 0,
                                 "qat_epochs": 2 if q else 30, "preset": "P4" if q else "P8"}),
    "cnn": lambda q: ("digits", {"class": "QuantizedCNN", "channels": 1 if q else 2, "kernel": 14 if q else 8,
                                 "stride": 14 if q else 4, "input_bits": 1 if q else 2, "act_bits": 2 if q else 3,
                                 "weight_max": 3 if q else 15, "seed": 0, "epochs": 3 if q else 20,
                                 "preset": "P4" if q else "P8"}),
    "nn20": lambda q: ("digits", _deep(20, q)),
    "nn50": lambda q: ("digits", _deep(50, q)),
    "gpt2_head": lambda q: ("gpt2", _gpt2("AttentionHead", q)),
    "gpt2_block": lambda q: ("gpt2", _gpt2("AttentionBlock", q)),
    "xgb": lambda q: ("diabetes", {"class": "XGBRegressor", "n_estimators": 5 if q else 50,
                                   "max_depth": 2 if q else 4, "learning_rate": 0.5 if q else 0.1, "base_score": 0.5,
                                   "tree_method": "exact", "bits": 4 if q else 6, "low_bits": 0 if q else 2,
                                   "parts": 1 if q else 50, "seed": 0, "preset": "P4"}),
}


def xgb_model(spec: dict, data, params=None):
    """The xgb workload: ``xgboost.XGBRegressor`` fitted on ``data``'s train rows as ``spec`` says (a
    :data:`MODELS` entry), compiled by ``crossfhe.ml.from_sklearn`` at ``spec["bits"]`` bits per feature, split at
    ``spec["low_bits"]``, in ``spec["parts"]`` sums, on the preset ``spec["preset"]`` (or ``params``), no check run.
    Returns (the fitted XGBRegressor, the EncryptedEstimator, fit seconds, compile seconds)."""
    import xgboost

    from crossfhe.ml import from_sklearn
    from crossfhe.tfhe import presets

    t0 = time.perf_counter()
    est = xgboost.XGBRegressor(n_estimators=spec["n_estimators"], max_depth=spec["max_depth"],
                               learning_rate=spec["learning_rate"], base_score=spec["base_score"],
                               tree_method=spec["tree_method"], random_state=spec["seed"], n_jobs=1)
    est.fit(data.x_train, data.y_train)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    enc = from_sklearn(est, data.x_train, bits=spec["bits"], params=params or presets.PRESETS[spec["preset"]],
                       low_bits=spec.get("low_bits", 0), parts=spec.get("parts", 1), check=0, progress=False)
    return est, enc, fit_s, time.perf_counter() - t0


# --------------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------------


def _keys(params, cache: dict):
    from crossfhe.api import CircuitKeys
    from crossfhe.tfhe import ops

    if params.name not in cache:
        t0 = time.perf_counter()
        ck, sk = ops.keygen(params)
        cache[params.name] = (CircuitKeys(ck, sk), time.perf_counter() - t0)
    return cache[params.name]


def measure(name: str, args, key_cache: dict) -> dict:
    import jax
    import numpy as np

    from crossfhe.apps import datasets
    from crossfhe.cli.benchutil import load_average

    kind = MODELS[name](args.quick)[0]
    regression = kind == "diabetes"
    if kind == "gpt2":  # synthetic ln_1 outputs; the quality is the error against the float attention
        model = _model(name, args.quick)
        t0 = time.perf_counter()
        model.fit(model.sample_inputs(GPT2_CALIBRATION))
        fit_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        circuit = model.compile()
        trace_s = time.perf_counter() - t0
        data = SimpleNamespace(name="gpt2 ln_1 outputs of random tokens", y_train=np.zeros(GPT2_CALIBRATION),
                               x_test=model.sample_inputs(max(args.batch, 1), seed=7))
        predict_float, plain = model.float_outputs, None
    elif regression:  # xgb: an XGBoost regressor through crossfhe.ml.from_sklearn; its TreeEnsemble is the model
        data = datasets.diabetes(seed=0)
        est, enc, fit_s, trace_s = xgb_model(MODELS[name](args.quick)[1], data)
        model, circuit = enc.trees, enc.circuit
        predict_float = est.predict
        plain = enc.predict_approximated(data.x_test)
    else:
        data = datasets.breast_cancer(seed=0) if kind == "cancer" else datasets.digits(28, seed=0)
        t0 = time.perf_counter()
        model = _model(name, args.quick).fit(data.x_train, data.y_train)
        fit_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        circuit = model.compile()
        trace_s = time.perf_counter() - t0
        predict_float = model.predict_float
        plain = model.predict_plain(data.x_test)
    counts = model.counts()
    if kind == "gpt2" and not args.no_peer:
        export_graph_for_peer(name, model, model.encode(model.sample_inputs(args.peer_samples, seed=7)),
                              counts["before"]["bootstraps"])
    keys, keygen_s = _keys(model.params, key_cache)
    y = None if kind == "gpt2" else np.asarray(data.y_test)
    x1 = data.x_test[:1]
    q1 = model.encode(x1)

    def once(q, timings):
        return model.outputs_encrypted(q, keys=keys, timings=timings)

    first: dict = {}
    t0 = time.perf_counter()
    once(q1, first)
    first_s = time.perf_counter() - t0
    stages, totals = [], []
    start = time.perf_counter()
    while True:
        st: dict = {}
        t0 = time.perf_counter()
        out1 = once(q1, st)
        totals.append(time.perf_counter() - t0)
        stages.append(st)
        el = time.perf_counter() - start
        if (len(totals) >= args.reps and el >= 2.0) or (len(totals) >= min(3, args.reps) and el >= args.max_seconds):
            break
    xb = data.x_test[: args.batch]
    qb = model.encode(xb)
    if len(xb) == 1:  # --batch 1: the batch-1 runs above are the batched figures (heavy workloads: no extra runs)
        outb, stb, batch_s, batch_first_s = out1, stages[-1], totals[-1], first_s
    else:
        warm: dict = {}
        t0 = time.perf_counter()
        once(qb, warm)
        batch_first_s = time.perf_counter() - t0
        stb = {}
        t0 = time.perf_counter()
        outb = once(qb, stb)
        batch_s = time.perf_counter() - t0
    exact = bool((outb == model.outputs_plain(qb)).all() and (out1 == model.outputs_plain(q1)).all())
    unopt = None
    if name in args.unoptimized.split(","):
        model.compile(optimize=False, keys=keys)
        model.outputs_encrypted(q1, keys=keys, optimize=False)  # compiles
        runs = []
        for _ in range(3):
            t0 = time.perf_counter()
            exact = exact and bool((model.outputs_encrypted(q1, keys=keys, optimize=False)
                                    == model.outputs_plain(q1)).all())
            runs.append(time.perf_counter() - t0)
        unopt = 1e3 * statistics.median(runs)
    enc_pred = model.decode(outb)
    if regression:  # the decoded sums [n, 1]: the regressor's predictions
        enc_pred = np.asarray(enc_pred, np.float64)[:, 0]
    sk = keys.public
    if name in ("mlp", "cnn") and not args.no_peer:
        EXPORTS[name] = Path(tempfile.mkdtemp(prefix="taurus-")) / f"{name}.npz"
        export_network(model, model.encode(data.x_test[: args.peer_samples]), EXPORTS[name])
    n = len(xb)
    if kind == "gpt2":
        quality = {"error": model.error(model.sample_inputs(16, seed=5)), "lookups": model.lookup_breakdown(),
                   "max_abs_error_encrypted": float(np.abs(enc_pred - predict_float(xb)).max())}
    elif regression:
        quality = {"r2": {"float": _r2(y, predict_float(data.x_test)), "plain": _r2(y, plain),
                          "encrypted": _r2(y[:n], enc_pred), "plain_same_samples": _r2(y[:n], plain[:n]),
                          "float_same_samples": _r2(y[:n], predict_float(xb))},
                   "max_abs_error_encrypted": float(np.max(np.abs(enc_pred - y[:n]))),
                   "input_bits": [int(b) for b in model.input_bits], "trees": len(model.trees),
                   "output_step": float(model.step[0]), "output_bits": model.params.message_bits,
                   "parts": len(model.part_of)}
    else:
        quality = {"accuracy": {"float": float((np.asarray(predict_float(data.x_test)) == y).mean()),
                                "plain": float((plain == y).mean()),
                                "encrypted": float((enc_pred == y[:n]).mean()),
                                "plain_same_samples": float((plain[:n] == y[:n]).mean())}}
    return {
        "suite": "taurus", "name": name, "peer": "crossfhe", "workload": MODELS[name](args.quick)[1],
        "data": data.name, "train": len(data.y_train), "test": len(data.x_test), "preset": model.params.name,
        "params": {"p": model.params.message_bits, "n": model.params.lwe_dim, "N": model.params.poly_size,
                   "extension": model.params.extension},
        "inputs": len(model.input_bits), "outputs": len(circuit.graph.outputs), **quality,
        "agreement": float(exact) if plain is None else float((enc_pred == plain[: len(xb)]).mean()), "exact": exact,
        "encrypted_samples": len(xb),
        "counts_before": counts["before"], "counts_after": counts["after"],
        "median_ms": 1e3 * statistics.median(totals), "min_ms": 1e3 * min(totals), "max_ms": 1e3 * max(totals),
        "reps": len(totals),
        "stage_ms": {k: 1e3 * statistics.median(s[k] for s in stages) for k in ("encrypt", "run", "decrypt")},
        "unoptimized_median_ms": unopt, "first_run_s": first_s, "batch": len(xb), "batch_s": batch_s,
        "batch_first_s": batch_first_s,
        "ms_per_sample_batched": 1e3 * batch_s / len(xb),
        "batch_stage_ms": {k: 1e3 * v for k, v in stb.items()},
        "ms_per_pbs_batched": 1e3 * stb["run"] / max(1, len(xb) * counts["after"]["bootstraps"]),
        "fit_s": fit_s, "trace_s": trace_s, "keygen_s": keygen_s,
        "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "key_mib": {"server": sk.nbytes / 2**20, "bsk": int(sk.bsk.nbytes) / 2**20, "ksk": int(sk.ksk.nbytes) / 2**20},
        "device": jax.devices()[0].platform,
        "backend": getattr(model.params.kernels.resolve(), "name", str(model.params.kernels.resolve())),
        "jax": jax.__version__,
        "threads": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "load": load_average(), "paper_ms": PAPER_MS.get(name),
        "note": "paper_ms: Taurus Table IV (accelerator, their models); context only",
    }


def _r2(y, pred) -> float | None:
    """The coefficient of determination 1 - sum (y - pred)^2 / sum (y - mean y)^2 (scikit-learn's r2_score); None
    for fewer than two samples."""
    import numpy as np

    y, pred = np.asarray(y, np.float64), np.asarray(pred, np.float64)
    if len(y) < 2:
        return None
    return float(1.0 - np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2))


def export_network(model, q, path) -> None:
    """The integer network of a fitted QuantizedMLP / QuantizedCNN (crossfhe.apps.qnn) as an .npz that
    benchmarks/concrete_python_peer.py compiles with concrete-python, the same integers on both sides:
    ``in_bits``, ``p`` (message bits), ``layers`` (hidden layers L); per hidden layer i ``w{i}`` int64 [out, in],
    ``off{i}`` int64 [out] and ``tables{i}`` int64 [out, 2^p] (acc_j = a . w_j + off_j in [0, 2^p), then
    a'_j = tables_j[acc_j]); the output layer as parts, ``out_w`` int64 [parts, in] (the neuron's weights on the
    part's inputs, 0 elsewhere) and ``out_off`` int64 [parts] (out_c = a . out_w_c + out_off_c in [0, 2^p));
    ``q`` int64 [samples, inputs] and ``expected`` = model.outputs_plain(q)."""
    import numpy as np

    hidden = [layer for layer in model.layers if layer.tables is not None]
    last = model.layers[-1]
    out_w = np.zeros((len(last.parts), last.w.shape[1]), dtype=np.int64)
    for c, (k, idx, _) in enumerate(last.parts):
        out_w[c, idx] = last.w[k, idx]
    arrays = {f"{kind}{i}": getattr(layer, attr) for i, layer in enumerate(hidden)
              for kind, attr in (("w", "w"), ("off", "off"), ("tables", "tables"))}
    np.savez(path, in_bits=model.in_bits, p=model.params.message_bits, layers=len(hidden), out_w=out_w,
             out_off=np.array([off for _, _, off in last.parts], dtype=np.int64), q=np.asarray(q, np.int64),
             expected=model.outputs_plain(q), **arrays)


# --------------------------------------------------------------------------------------------------
# The peer
# --------------------------------------------------------------------------------------------------


EXPORTS: dict = {}
"""Our workload name -> the .npz :func:`export_network` wrote for the same-model peer (this run's)."""


def run_same_model(samples: int, threads: int) -> dict:
    """benchmarks/concrete_python_peer.py on each network in :data:`EXPORTS`, one process each (Concrete's keys for
    an 8-bit network take about 8 GB; two in one process exceeded 18 GB here): {our name: its record}; empty where
    the script or .venv-concrete is missing; a record holds ``error`` where its model failed."""
    script = HERE / "concrete_python_peer.py"
    python = HERE.parent / ".venv-concrete" / "bin" / "python"
    if not EXPORTS or not script.exists() or not python.exists():
        return {}
    out = {}
    for name, path in EXPORTS.items():
        r = subprocess.run([str(python), str(script), str(path), "--samples", str(samples), "--threads",
                            str(threads), "--p-error", "tfhe-rs"], capture_output=True, text=True,
                           env=_worker_env())
        lines = r.stdout.strip().splitlines()
        models = json.loads(lines[-1]).get("models", {}) if lines else {}
        if path.stem in models:
            out[name] = models[path.stem]
        else:
            print(f"# concrete-python peer failed on {name} (status {r.returncode}):\n{r.stderr[-2000:]}",
                  file=sys.stderr)
            out[name] = {"error": f"exit status {r.returncode}"}
    return out


GRAPH_EXPORTS: dict = {}
"""Our workload name -> the graph :func:`export_graph_for_peer` wrote for concrete-python (this run's), or the
reason none was written."""

GRAPH_PEER_MAX_LOOKUPS = 5000
"""The largest unoptimized circuit (lookups) handed to concrete-python: it compiles and runs one sample at a time,
scalar operations (1424 lookups at P6: about a minute to compile); GPT-2 small's head (54k lookups) is not."""


def export_graph_for_peer(name: str, model, q, lookups: int) -> None:
    """The unoptimized graph of ``model`` with samples ``q`` for benchmarks/concrete_graph_peer.py
    (benchmarks/graph_export.py), in :data:`GRAPH_EXPORTS`; a reason instead when the circuit has more than
    :data:`GRAPH_PEER_MAX_LOOKUPS` lookups."""
    if lookups > GRAPH_PEER_MAX_LOOKUPS:
        GRAPH_EXPORTS[name] = f"{lookups} lookups, above GRAPH_PEER_MAX_LOOKUPS {GRAPH_PEER_MAX_LOOKUPS}"
        return
    import importlib.util

    spec = importlib.util.spec_from_file_location("graph_export", HERE / "graph_export.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    path = Path(tempfile.mkdtemp(prefix="taurus-")) / f"{name}.json"
    mod.export_graph(model, q, path)
    GRAPH_EXPORTS[name] = path


def run_graph_peer(samples: int, threads: int) -> dict:
    """benchmarks/concrete_graph_peer.py (concrete-python on our unoptimized graph, the same integers, outputs
    checked equal to ours) on each graph in :data:`GRAPH_EXPORTS`, one process each: {our name: its record, or
    {"skipped": reason}}; empty where the script or .venv-concrete is missing."""
    script = HERE / "concrete_graph_peer.py"
    python = HERE.parent / ".venv-concrete" / "bin" / "python"
    if not GRAPH_EXPORTS or not script.exists() or not python.exists():
        return {}
    out = {}
    for name, path in GRAPH_EXPORTS.items():
        if not isinstance(path, Path):
            out[name] = {"skipped": path}
            continue
        r = subprocess.run([str(python), str(script), str(path), "--samples", str(samples), "--threads",
                            str(threads), "--warmup", "0"], capture_output=True, text=True, env=_worker_env())
        lines = r.stdout.strip().splitlines()
        try:
            models = json.loads(lines[-1]).get("models", {}) if lines else {}
        except json.JSONDecodeError:
            models = {}
        if path.stem in models:
            out[name] = {"peer": "concrete-python", **models[path.stem]}
        else:
            print(f"# concrete-python graph peer failed on {name} (status {r.returncode}):\n{r.stderr[-2000:]}",
                  file=sys.stderr)
            out[name] = {"error": f"exit status {r.returncode}"}
    return out


PEER_NAMES = {"tree": "tree", "tree10": "tree10", "gbt": "xgb", "knn": "knn", "knn10": "knn10", "mlp": "mlp",
              "cnn": "cnn", "xgb": "xgbreg", "nn20": "nn20", "nn50": "nn50"}
"""Our workload names -> benchmarks/concrete_peer.py's model names."""


def peer_args(names: list[str], quick: bool, samples: int, threads: int) -> list[str]:
    """The peer's command-line arguments closest to our models (:data:`MODELS`): the same data, split and seed (the
    peer copies crossfhe.apps.datasets); the tree's depth (6, or ``--tree-depth``) on 6-bit features, 16 boosted
    trees of depth 3 on 6 bits, KNN
    k 3 on 16 training points of 4 features, an MLP of 32 hidden units, the XGBoost regressor's estimators, depth,
    learning rate and bits (also with ``quick``); TFHE-rs's failure probability 2^-64 per PBS.
    Differences that remain: its quantization is Concrete ML's own (n_bits of inputs and weights, calibrated
    rounding), its KNN takes the first 16 training rows and the first 4 columns (ours: 16 rows drawn with seed 0 and
    the 4 columns of largest ANOVA F), its CNN is its own shape."""
    out = ["--models", ",".join(PEER_NAMES[n] for n in names), "--samples", str(samples), "--threads", str(threads),
           "--p-error", "tfhe-rs"]
    reg = MODELS["xgb"](quick)[1]
    if "xgb" in names:
        out += ["--xgbreg-estimators", str(reg["n_estimators"]), "--xgbreg-depth", str(reg["max_depth"]),
                "--xgbreg-learning-rate", str(reg["learning_rate"])]
    if all(n in HEAVY for n in names):
        out += ["--warmup", "0"]  # Concrete compiles ahead of time: nothing for a warm-up run to compile
    if quick:
        return out + ["--quick"] + (["--n-bits", f"xgbreg={reg['bits']}"] if "xgb" in names else [])
    knn = KNN_SIZE
    train = knn["n_train"] or CANCER_TRAIN
    return out + ["--tree-depth", str(TREE["max_depth"]), "--xgb-estimators", "16", "--xgb-depth", "3", "--knn-k", "3",
                  "--knn-train", str(train), "--knn-features", str(knn["n_features"]), "--mlp-hidden", "32",
                  "--n-bits", f"tree=6,tree10=6,xgb=6,knn={knn['bits']},knn10={KNN10['bits']},xgbreg={reg['bits']}"]


def start_peer(names: list[str], quick: bool, samples: int, threads: int):
    """Concrete ML on the workloads ``names`` started (benchmarks/concrete_peer.py in its own environment,
    ``.venv-concrete``, made by benchmarks/setup_concrete.sh; it pins itself to the first ``threads`` CPUs this
    process may use): the process, or None where the script or its environment is missing."""
    script = HERE / "concrete_peer.py"
    python = HERE.parent / ".venv-concrete" / "bin" / "python"
    if not script.exists() or not python.exists():
        print(f"# {script.name} or {python} missing (bash benchmarks/setup_concrete.sh): no peer", file=sys.stderr)
        return None
    return subprocess.Popen([str(python), str(script), *peer_args(names, quick, samples, threads)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_worker_env())


def finish_peer(proc, names: list[str]) -> dict:
    """{our name: the peer's model record (``ms_per_sample``: median end-to-end ms per sample, one at a time; or
    ``error`` for a model it could not run)} of a :func:`start_peer` process once it ends; empty where it printed no
    JSON (it crashed or was killed)."""
    if proc is None:
        return {}
    out, err = proc.communicate()
    lines = out.strip().splitlines()
    try:
        models = json.loads(lines[-1]).get("models", {}) if lines else None
    except json.JSONDecodeError:
        models = None
    if proc.returncode:  # a model that failed (e.g. NoParametersFound) is a record with "error"; the others stand
        print(f"# Concrete ML peer exited with status {proc.returncode}"
              f"{'' if models is not None else ' and no JSON'}:\n{err[-2000:]}", file=sys.stderr)
    if models is None:
        return {}
    return {n: models[PEER_NAMES[n]] for n in names if PEER_NAMES[n] in models}


def run_peer(names: list[str], quick: bool, samples: int, threads: int) -> dict:
    """:func:`start_peer` then :func:`finish_peer`: the peer after our rows, on the same CPUs."""
    return finish_peer(start_peer(names, quick, samples, threads), names)


def _table(records: list[dict]) -> None:
    print(f"\n{'workload':<10}{'preset':>7}{'acc f/q/enc':>20}{'exact':>6}{'ms b=1':>10}{'ms/smp b':>10}"
          f"{'PBS':>9}{'launch':>9}{'KS':>9}{'TV':>9}{'key MiB':>9}{'peer':>9}{'ratio':>7}")
    for r in records:
        a, b, c = r.get("accuracy") or r.get("r2"), r["counts_before"], r["counts_after"]
        acc = (f"cos {r['error']['cosine']:.3f}" if a is None else
               "/".join("-" if v is None else f"{v:.3f}" for v in (a["float"], a["plain"], a["encrypted"])))
        print(f"{r['name']:<10}{r['preset']:>7}{acc:>20}{'yes' if r['exact'] else 'NO':>6}{r['median_ms']:>10.0f}"
              f"{r['ms_per_sample_batched']:>10.0f}{b['bootstraps']:>4}>{c['bootstraps']:<4}"
              f"{b['pbs_calls']:>4}>{c['pbs_calls']:<4}{b['key_switches']:>4}>{c['key_switches']:<4}"
              f"{b['test_vectors']:>4}>{c['test_vectors']:<4}{r['key_mib']['server']:>9.0f}"
              f"{r.get('peer_median_ms') or float('nan'):>9.0f}{r.get('ratio') or float('nan'):>7.2f}")
        if r.get("unoptimized_median_ms"):
            print(f"       {r['name']} compiled with optimize=False: {r['unoptimized_median_ms']:.0f} ms at batch 1")
        if r.get("same_model_record"):
            sm = r["same_model_record"]
            what = ("not run: " + sm["skipped"] if sm.get("skipped") else
                    f"{sm['ms_per_sample']:.0f} ms, exact {sm.get('exact')}, ours / it {r['same_model_ratio']:.2f}"
                    + (f", {sm['circuit']['pbs_count']} PBS" if (sm.get("circuit") or {}).get("pbs_count") else "")
                    if sm.get("ms_per_sample") else f"failed: {sm.get('error')}")
            print(f"       {r['name']}, our integer model in concrete-python: {what}")
        if r.get("peer_error"):
            print(f"       {r['name']}: the peer failed: {r['peer_error']}")
        if not r["exact"]:
            print(f"       the decrypted outputs differ from the plain model's on {r['name']}")
    print("acc: float model / quantized plain (whole test split) / encrypted (samples run), R^2 for xgb, for gpt2 the "
          "cosine of the integer model's outputs with the float attention's (16 sequences); counts "
          "before>after the dedup and batching passes; b = --batch; ratio: ours / peer, ms per sample at batch 1")


def _workloads(text: str | None) -> list[str]:
    """The workloads ``--workloads`` names (default: all of :data:`WORKLOADS` whose :data:`OPTIONAL` package is
    installed); SystemExit for an unknown name or a named workload whose package is missing."""
    import importlib.util

    missing = {n: pkg for n, pkg in OPTIONAL.items() if importlib.util.find_spec(pkg) is None}
    if text is None:
        for n, pkg in missing.items():
            print(f"# {n} left out: it needs {pkg} (pip install {pkg})", file=sys.stderr)
        return [n for n in WORKLOADS if n not in missing and n not in HEAVY]
    names = [n for n in text.split(",") if n]
    bad = [n for n in names if n not in WORKLOADS]
    if bad:
        raise SystemExit(f"unknown workloads {bad}: of {', '.join(WORKLOADS)}")
    for n in names:
        if n in missing:
            raise SystemExit(f"workload {n} needs {missing[n]}, which is not installed (pip install {missing[n]})")
    return names


def knn_size(text: str) -> dict:
    """``--knn TRAINxFEATURESxBITS`` (TRAIN a number or ``all``) as a :data:`KNN_SIZE` update; SystemExit otherwise."""
    try:
        train, features, bits = text.split("x")
        return {"n_train": None if train == "all" else int(train), "n_features": int(features), "bits": int(bits)}
    except ValueError as e:
        raise SystemExit(f"--knn takes TRAINxFEATURESxBITS, e.g. 10x3x2 or allx4x3, got {text!r}") from e


def main(argv=None) -> int:
    args = _parse(argv)
    KNN_SIZE.update(knn_size(args.knn))
    GPT2_SIZE.update(gpt2_size(args.gpt2_size))
    TREE["max_depth"] = args.tree_depth
    if args.quick:
        args.batch, args.reps = min(args.batch, 2), min(args.reps, 3)
    names = _workloads(args.workloads)
    beside = None
    if args.peer_beside and not args.no_peer:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            raise SystemExit("--peer-beside needs two CPUs at least")
        half = len(cpus) // 2
        peered = [n for n in names if n in PEER_NAMES]
        beside = start_peer(peered, args.quick, args.peer_samples, half) if peered else None
        os.sched_setaffinity(0, cpus[half:])  # before JAX starts its threads
    from crossfhe.cli.benchutil import enable_compilation_cache, write_json

    enable_compilation_cache()
    records, key_cache = [], {}
    for name in names:
        rec = measure(name, args, key_cache)
        records.append(rec)
        print(f"# {name}: {rec['median_ms']:.0f} ms per sample at batch 1, exact {rec['exact']}", flush=True)
    if not args.no_peer:
        threads = records[0]["threads"] if records else 1
        peered = [n for n in names if n in PEER_NAMES]
        peers = (finish_peer(beside, peered) if beside is not None
                 else run_peer(peered, args.quick, args.peer_samples, threads) if peered else {})
        for rec in records:
            peer = peers.get(rec["name"])
            if peer and peer.get("error"):
                rec.update(peer_error=peer["error"], peer_record=peer)
            if peer and peer.get("ms_per_sample"):
                rec.update(peer_name=peer.get("peer", "concrete-ml"), peer_median_ms=peer["ms_per_sample"],
                           peer_beside=beside is not None,
                           peer_record=peer, ratio=rec["median_ms"] / peer["ms_per_sample"])
        same = {**run_same_model(args.peer_samples, threads), **run_graph_peer(args.peer_samples, threads)}
        for rec in records:
            peer = same.get(rec["name"])
            if peer:
                rec["same_model_record"] = peer
            if peer and peer.get("ms_per_sample"):
                rec.update(same_model_ms=peer["ms_per_sample"],
                           same_model_ratio=rec["median_ms"] / peer["ms_per_sample"])
    _table(records)
    print(json.dumps(records, default=float))
    if args.json:
        write_json(records, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
