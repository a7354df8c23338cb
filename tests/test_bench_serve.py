"""The serving load test (benchmarks/bench_serve.py) in its quick mode: every request answered and right.

Timing: the quick run (insecure test parameters, 4 clients x 3 requests, four server starts) took 21-25 s on the
2-core development machine at load averages 1.4-2.6, and 41 s cold in a 2-core run of the whole default suite
(2026-12-04), so it runs in `make test-slow`; the default run keeps the server's own tests (tests/test_serve.py:
batched launches, answers, restarts) and this file's parsing of the metrics the benchmark reads.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

_PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_serve.py"


def _module():
    spec = importlib.util.spec_from_file_location("bench_serve", _PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_serve", mod)  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_launch_stats_from_metrics():
    mod = _module()
    page = "\n".join([
        'crossfhe_batch_requests_bucket{worker="7",le="1"} 2', 'crossfhe_batch_requests_bucket{worker="7",le="2"} 3',
        'crossfhe_batch_requests_bucket{worker="7",le="4"} 5', 'crossfhe_batch_requests_bucket{worker="7",le="+Inf"} 5',
        'crossfhe_batch_requests_sum{worker="7"} 11.0', 'crossfhe_batch_requests_count{worker="7"} 5',
        'crossfhe_keys{worker="7",where="disk"} 2', 'crossfhe_keys{worker="7",where="memory"} 1'])
    worker, hists, disk = mod._parse_metrics(page)
    assert (worker, disk) == ("7", 2)
    before = {"7": {"crossfhe_batch_requests": {"sum": 1.0, "count": 1, "buckets": {"1": 1, "2": 1, "4": 1,
                                                                                      "+Inf": 1}}}}
    launches, mean, bound = mod._launch_stats(mod._minus({"7": hists}, before))
    assert (launches, mean, bound) == (4, 2.5, 4.0)
    assert not mod._ckks_check([0.0, 0.5], [0.0, 0.5 + 2 * mod.CKKS_BOUND]) and mod._tfhe_check(3, 3)


@pytest.mark.slow
def test_quick_load_test_loses_nothing(tmp_path):
    out = tmp_path / "serve.json"
    r = subprocess.run([sys.executable, str(_PATH), "--quick", "--json", str(out)], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["ok"] and data["cpu"] and data["load"]["start"] is not None
    names = {rec["name"] for rec in data["records"]}
    assert names == {"tfhe_batched", "tfhe_one", "ckks_batched", "ckks_one"}
    for rec in data["records"]:
        assert rec["suite"] == "serve" and not rec.get("failed")
        assert rec["wrong"] == 0 and rec["lost"] == 0 and rec["warmup_wrong"] == 0 and rec["warmup_lost"] == 0
        assert rec["answered"] == rec["requests"] == 4 * 3
        for key in ("p50_ms", "p99_ms", "requests_per_s", "items_per_s", "mean_requests_per_launch",
                    "max_requests_per_launch_le", "compile_s", "warmup_s", "peak_mib", "memory_mib", "median_ms"):
            assert rec[key] is not None, key
        assert rec["memory_mib"] and rec["peak_mib"] > 0
    batched = {rec["name"]: rec for rec in data["records"]}
    assert batched["tfhe_one"]["max_requests_per_launch_le"] == 1
    assert batched["tfhe_batched"]["gain"] is not None and batched["ckks_batched"]["gain"] is not None
