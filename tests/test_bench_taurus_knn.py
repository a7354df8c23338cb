"""The Taurus benchmark's paper-size workloads (benchmarks/bench_taurus.py): ``tree10``, ``knn`` and ``knn10``, and
GPT-2's attention (``gpt2_head``, ``gpt2_block``). The knn of all 455 training points and the GPT-2 workloads are
left out of the default list but run when named, ``--knn`` takes ``all``, the peer is asked for the same sizes
(concrete_peer.py's ``tree10`` and ``knn10``) and never for GPT-2 (no Concrete ML model of it)."""

from __future__ import annotations

import sys

import pytest
from _benchmarks import load as _load


@pytest.fixture(scope="module")
def bench():
    return _load("bench_taurus")


def test_paper_size_workloads(bench):
    default = bench._workloads(None)
    assert "knn" not in default and "tree10" in default and "knn10" in default
    assert bench._workloads("tree10,knn") == ["tree10", "knn"]
    spec = bench.MODELS["knn"](False)[1]
    assert spec["n_train"] is None and spec["ties"] == "class"  # all 455 points, the count circuit
    assert bench.MODELS["tree10"](False)[1]["max_depth"] == 10
    assert bench.MODELS["knn10"](False)[1]["n_train"] == 10


def test_knn_size_argument(bench):
    assert bench.knn_size("allx4x3") == {"n_train": None, "n_features": 4, "bits": 3}
    assert bench.knn_size("100x2x3") == {"n_train": 100, "n_features": 2, "bits": 3}
    for bad in ("100x2", "somex2x3", "1x2x3x4"):
        with pytest.raises(SystemExit, match="TRAINxFEATURESxBITS"):
            bench.knn_size(bad)


def test_peer_gets_the_same_sizes(bench):
    peer = _load("concrete_peer")
    args = bench.peer_args(["tree10", "knn", "knn10"], False, 1, 1)
    assert args[args.index("--models") + 1] == "tree10,knn,knn10"
    assert all(m in peer.MODELS for m in ("tree10", "knn10"))
    assert args[args.index("--knn-train") + 1] == "455"  # all of breast_cancer(seed=0)'s training rows
    bits = dict(kv.split("=") for kv in args[args.index("--n-bits") + 1].split(","))
    assert bits["tree10"] == "6" and bits["knn"] == "3" and bits["knn10"] == str(bench.KNN10["bits"])
    assert peer.KNN10_SIZE == (bench.KNN10["n_train"], bench.KNN10["n_features"]) and peer.TREE10_DEPTH == 10
    assert bench.CANCER_TRAIN == len(peer.breast_cancer()[0])


def test_gpt2_workloads(bench, capsys):
    default = bench._workloads(None)
    assert "gpt2_head" not in default and "gpt2_block" not in default
    kind, spec = bench.MODELS["gpt2_head"](False)
    assert kind == "gpt2" and (spec["d_model"], spec["n_heads"], spec["seq_len"]) == (768, 12, 8)
    assert spec["class"] == "AttentionHead" and bench.MODELS["gpt2_block"](False)[1]["class"] == "AttentionBlock"
    assert "gpt2_head" not in bench.PEER_NAMES and "gpt2_block" not in bench.PEER_NAMES
    model = bench._model("gpt2_head", True)
    assert (model.d_model, model.seq_len, model.params.name) == (8, 3, "P4")
    counts = {"bootstraps": 1, "pbs_calls": 1, "key_switches": 1, "test_vectors": 1}
    bench._table([{"name": "gpt2_head", "preset": "P4", "error": {"cosine": 0.5}, "exact": True, "median_ms": 1.0,
                   "ms_per_sample_batched": 1.0, "counts_before": counts, "counts_after": counts,
                   "key_mib": {"server": 1.0}}])
    assert "cos 0.500" in capsys.readouterr().out


def test_a_failed_peer_model_keeps_the_others(bench):
    """Concrete ML exits 1 when one model fails (knn at 455 points: NoParametersFound); the others' records stay."""
    import json
    import subprocess

    out = {"models": {"tree10": {"ms_per_sample": 1200.0}, "knn": {"error": "RuntimeError: NoParametersFound"}}}
    script = f"import sys; print({json.dumps(json.dumps(out))}); sys.exit(1)"
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    got = bench.finish_peer(proc, ["tree10", "knn"])
    assert got["tree10"]["ms_per_sample"] == 1200.0 and "NoParametersFound" in got["knn"]["error"]
    crashed = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(9)"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    assert bench.finish_peer(crashed, ["tree10"]) == {}
