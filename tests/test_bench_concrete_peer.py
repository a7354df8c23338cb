"""The Concrete ML peer (benchmarks/concrete_peer.py): its copy of our data loaders matches crossfhe.apps.datasets,
and, where its own virtual environment exists (.venv-concrete, made by benchmarks/setup_concrete.sh), a tiny run
prints the JSON fields the benchmarks read, with FHE predictions equal to Concrete ML's clear quantized ones."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
_PATH = ROOT / "benchmarks" / "concrete_peer.py"
_VENV_PYTHON = Path(os.environ.get("CROSSFHE_CONCRETE_PYTHON", ROOT / ".venv-concrete" / "bin" / "python"))


@pytest.fixture(scope="module")
def peer():
    spec = importlib.util.spec_from_file_location("concrete_peer", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_data_matches_crossfhe_loaders(peer):
    # the peer copies datasets.py's split and resize (its venv has no jax): the same arrays, bit for bit
    pytest.importorskip("sklearn")
    from crossfhe.apps import datasets

    ours = datasets.breast_cancer()
    theirs = peer.breast_cancer()
    for a, b in zip((ours.x_train, ours.y_train, ours.x_test, ours.y_test), theirs):
        np.testing.assert_array_equal(a, b)
    ours = datasets.digits(28)
    theirs = peer.digits(28)
    assert theirs[0].shape == (1437, 28, 28) and theirs[2].shape == (360, 28, 28)
    for a, b in zip((ours.x_train, ours.y_train, ours.x_test, ours.y_test), theirs):
        np.testing.assert_array_equal(a, b)


def test_option_parsing(peer):
    assert peer.parse_probability("2^-64") == 2.0**-64 == peer.parse_probability("tfhe-rs")
    assert peer.parse_probability("2**-40") == 2.0**-40
    assert peer.parse_probability("5.4e-20") == 5.4e-20
    assert peer.parse_probability(None) is None and peer.parse_probability("default") is None
    assert peer.parse_n_bits("5") == {m: 5 for m in peer.MODELS}
    assert peer.parse_n_bits("tree=8,knn=3") == dict(peer.N_BITS, tree=8, knn=3)


# skipped where the peer's environment is absent (CI: concrete-ml pulls 6 GB with torch and is not installed there);
# the data-equality test above runs everywhere
@pytest.mark.skipif(not _VENV_PYTHON.exists(),
                    reason="no .venv-concrete (bash benchmarks/setup_concrete.sh; concrete-ml from PyPI): the "
                           "Concrete ML peer runs only in its own virtual environment")
@pytest.mark.parametrize("model", ["tree", "mlp"])
def test_peer_runs_and_fhe_matches_clear_quantized(model, tmp_path):
    out = tmp_path / "concrete.json"
    cmd = [str(_VENV_PYTHON), str(_PATH), "--quick", "--models", model, "--samples", "1", "--warmup", "0",
           "--threads", "1", "--json", str(out)]
    if model == "tree":
        cmd += ["--tree-depth", "3"]
    else:
        cmd += ["--mlp-hidden", "16", "--epochs", "2", "--calibration", "50"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    rec = json.loads(r.stdout.strip().splitlines()[-1])
    assert rec == json.loads(out.read_text())
    assert rec["suite"] == "concrete_ml" and rec["peer"].startswith("concrete-ml ")
    assert rec["versions"]["concrete-python"] and rec["threads"] == 1
    m = rec["models"][model]
    assert "error" not in m, m.get("error")
    assert m["samples"] == 1 and len(m["fhe_predictions"]) == 1
    for key in ("compile_s", "keygen_s", "ms_per_sample"):
        assert m[key] > 0
    assert m["keys"]["evaluation_keys_bytes"] > 0 and m["keys"]["bootstrap_keys_bytes"] > 0
    assert m["circuit"]["max_bit_width"] >= 1 and m["circuit"]["pbs_count"] > 0
    assert 0 < m["circuit"]["p_error"] < 1e-6  # Concrete ML's default is 2^-40 per PBS
    assert set(m["accuracy"]) >= {"float", "quantized_clear", "fhe_on_samples"}
    # the encrypted evaluation computes Concrete ML's clear quantized inference exactly (barring a PBS failure)
    assert m["fhe_predictions"] == m["clear_predictions"]
    assert m["agreement"] == 1.0 and m["raw_agreement"] == 1.0
