"""The Taurus benchmark's deep networks (benchmarks/bench_taurus.py, workloads ``nn20`` and ``nn50``): left out of
the default list (minutes per image) but run when named, their model specs, and the peer asked for the same
architecture without a warm-up run (Concrete compiles ahead of time)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_taurus", ROOT / "benchmarks" / "bench_taurus.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_taurus"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_heavy_workloads_only_when_named(bench):
    default = bench._workloads(None)
    assert "nn20" not in default and "nn50" not in default and "tree" in default
    assert bench._workloads("nn20,nn50") == ["nn20", "nn50"]
    with pytest.raises(SystemExit, match="unknown workloads"):
        bench._workloads("nn30")


def test_deep_network_specs(bench):
    for name, depth in (("nn20", 20), ("nn50", 50)):
        kind, spec = bench.MODELS[name](False)
        assert kind == "digits" and spec["depth"] == depth and spec["width"] == 92 and spec["kernel"] == [10, 11]
        # the class's defaults: NN-50's integer model keeps its accuracy at P8 only (benchmarks/README.md)
        assert spec["preset"] == ("P7" if depth == 20 else "P8")
        assert spec["qat_batch"] == bench._model(name, False).qat_batch == (64 if depth == 20 else 128)
        assert spec["act_bits"] == 2 and spec["start"] == "looks-linear"
        quick = bench.MODELS[name](True)[1]
        assert quick["preset"] == "P4" and quick["depth"] < 6
    model = bench._model("nn20", True)
    assert model.depth == 4 and model.params.name == "P4" and model.kernel == (24, 24)


def test_peer_arguments(bench):
    args = bench.peer_args(["nn20"], False, 1, 1)
    assert args[args.index("--models") + 1] == "nn20"
    assert args[args.index("--warmup") + 1] == "0"
    mixed = bench.peer_args(["tree", "nn20"], False, 1, 1)
    assert "--warmup" not in mixed  # the small models keep their warm-up run
