"""The Taurus benchmark's XGBoost regressor (benchmarks/bench_taurus.py, workload ``xgb``): the diabetes loader is
deterministic with the documented split and the Concrete ML peer's copy of it gives the same arrays; a tiny version
of the workload's model decrypts to the quantized model's predictions exactly, and its benchmark record carries R^2
and ``exact``; the peer is asked for the same model."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _benchmarks import load as _load

pytest.importorskip("sklearn")  # the diabetes table comes from scikit-learn (the `ml` extra)

from crossfhe.apps import datasets  # noqa: E402
from crossfhe.testing import INSECURE_TFHE_P4  # noqa: E402

SEED = bytes(range(32))
TINY = {"class": "XGBRegressor", "n_estimators": 3, "max_depth": 2, "learning_rate": 0.5, "base_score": 0.5,
        "tree_method": "exact", "bits": 3, "seed": 0, "preset": "INSECURE_TFHE_P4"}




def _xgboost():
    # XGBoost is optional (a 130 MB wheel, not in the dev install or CI): the workload runs where it is installed
    return pytest.importorskip("xgboost", reason="XGBoost is optional (pip install xgboost)")


@pytest.fixture(scope="module")
def diabetes():
    return datasets.diabetes(seed=0)


def test_diabetes_split_is_deterministic_and_scaled(diabetes):
    from sklearn.datasets import load_diabetes

    again = datasets.diabetes(seed=0)
    assert diabetes.x_train.shape == (353, 10) and diabetes.x_test.shape == (89, 10)
    assert diabetes.y_train.dtype == np.float64 and diabetes.y_test.dtype == np.float64
    for a, b in zip((diabetes.x_train, diabetes.y_train, diabetes.x_test, diabetes.y_test),
                    (again.x_train, again.y_train, again.x_test, again.y_test)):
        np.testing.assert_array_equal(a, b)
    raw = load_diabetes()
    order = np.random.default_rng(0).permutation(442)
    np.testing.assert_array_equal(diabetes.y_train, raw.target[order[:353]])
    np.testing.assert_array_equal(diabetes.y_test, raw.target[order[353:]])
    np.testing.assert_array_equal(diabetes.x_train.min(axis=0), 0.0)
    np.testing.assert_array_equal(diabetes.x_train.max(axis=0), 1.0)
    assert diabetes.x_test.min() >= 0.0 and diabetes.x_test.max() <= 1.0
    other = datasets.diabetes(seed=1, train=300)
    assert other.x_train.shape == (300, 10) and not np.array_equal(other.y_test[:89], diabetes.y_test)
    assert "targets" in repr(diabetes)


def test_peer_copies_the_diabetes_loader(diabetes):
    # the Concrete ML peer reimplements the loader (its venv has no jax): the same arrays, bit for bit
    theirs = _load("concrete_peer").diabetes()
    for a, b in zip((diabetes.x_train, diabetes.y_train, diabetes.x_test, diabetes.y_test), theirs):
        np.testing.assert_array_equal(a, b)


def test_peer_gets_the_same_regressor():
    bench = _load("bench_taurus")
    for quick in (True, False):
        spec = bench.MODELS["xgb"](quick)[1]
        args = bench.peer_args(["xgb"], quick, 2, 1)
        assert args[args.index("--models") + 1] == "xgbreg"
        got = {k: args[args.index(k) + 1] for k in ("--xgbreg-estimators", "--xgbreg-depth", "--xgbreg-learning-rate",
                                                     "--n-bits")}
        assert got["--xgbreg-estimators"] == str(spec["n_estimators"])
        assert got["--xgbreg-depth"] == str(spec["max_depth"])
        assert float(got["--xgbreg-learning-rate"]) == spec["learning_rate"]
        assert f"xgbreg={spec['bits']}" in got["--n-bits"]
    full = bench.MODELS["xgb"](False)[1]
    assert (full["n_estimators"], full["max_depth"], full["bits"], full["preset"]) == (50, 4, 6, "P4")
    assert (full["low_bits"], full["parts"]) == (2, 50)  # 6-bit features as 4 + 2 bits, up to 50 sums of 4 bits
    assert "--xgbreg-depth" not in bench.peer_args(["tree"], False, 2, 1)


def test_encrypted_regressor_equals_the_quantized_model(diabetes):
    _xgboost()
    bench = _load("bench_taurus")
    est, enc, _, _ = bench.xgb_model(TINY, diabetes, params=INSECURE_TFHE_P4)
    assert enc.trees.input_bits and max(enc.trees.input_bits) <= 3 and len(enc.trees.trees) == 3
    x = diabetes.x_test[:4]
    enc.keygen(seed=SEED)
    out = enc.run(enc.encrypt(x))
    np.testing.assert_array_equal(enc.decision(out), enc.decision_approximated(x))  # exactly, not approximately
    got = enc.decrypt(out)
    assert got.shape == (4,) and np.array_equal(got, enc.predict_approximated(x))
    # the quantized model is a fair copy of XGBoost's: predictions within a few output steps on the test split
    step = float(enc.trees.step[0])
    assert np.median(np.abs(enc.predict_approximated(diabetes.x_test) - est.predict(diabetes.x_test))) < 4 * step


def test_measure_reports_r2_and_exact(monkeypatch):
    _xgboost()
    bench = _load("bench_taurus")
    from crossfhe.tfhe import presets

    monkeypatch.setitem(presets.PRESETS, "INSECURE_TFHE_P4", INSECURE_TFHE_P4)
    monkeypatch.setitem(bench.MODELS, "xgb", lambda quick: ("diabetes", dict(TINY)))
    args = bench._parse(["--workloads", "xgb", "--no-peer", "--batch", "3", "--reps", "3", "--max-seconds", "0",
                         "--unoptimized", ""])
    rec = bench.measure("xgb", args, {})
    json.dumps(rec, default=float)
    assert rec["exact"] and rec["agreement"] == 1.0 and rec["encrypted_samples"] == 3
    assert "accuracy" not in rec and rec["r2"]["encrypted"] == rec["r2"]["plain_same_samples"]
    assert rec["train"] == 353 and rec["test"] == 89 and rec["preset"] == "INSECURE_TFHE_P4" and rec["trees"] == 3
    assert rec["counts_after"]["bootstraps"] > 0 and rec["median_ms"] > 0 and rec["ms_per_sample_batched"] > 0
    assert rec["paper_ms"] == bench.PAPER_MS["xgb"]
