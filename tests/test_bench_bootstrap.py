"""benchmarks/bench_bootstrap.py's driver: the peer's shape without running ours, and ``--peer-first`` (OpenFHE's
worker before ours at each thread count, the record saying which ran first); the workers are replaced by stubs."""

from __future__ import annotations

import pytest
from _benchmarks import load as _load

from crossfhe.testing import INSECURE_CKKS_BOOT_N11


@pytest.fixture(scope="module")
def bench():
    return _load("bench_bootstrap")


def test_peer_shape_follows_the_preset_and_the_flags(bench):
    args = bench._parse(["--quick"])
    assert bench._shape(args, "TEST_N11") == {"log_n": 12, "slots": 2048,
                                              "levels_left": INSECURE_CKKS_BOOT_N11.user_levels}
    args = bench._parse(["--slots", "256"])
    shape = bench._shape(args, "N16_BOOT_L3")
    assert shape["log_n"] == 16 and shape["slots"] == 256


@pytest.mark.parametrize("first", [False, True])
def test_peer_first_orders_the_workers(bench, monkeypatch, first):
    calls = []

    def ours(name, t, *rest, **kw):
        calls.append(("ours", t))
        return {"peer": "crossfhe", "preset": name, "threads": t, "n": 2048, "slots": 1024, "levels_left": 2,
                "median_ms": 1.0, "precision_bits": 30.0, "keys": "full", "real_path": None, "precise": {},
                "peak_general_rss_mib": 100.0}

    def peer(python, args, name, t, shape):
        calls.append(("peer", t))
        return {"peer": "openfhe", "preset": name, "threads": t, "bootstrap_ms": {"median": 4.0},
                "ran": "first" if args.peer_first else "second"}

    monkeypatch.setattr(bench, "_run_ours", ours)
    monkeypatch.setattr(bench, "_run_peer", peer)
    monkeypatch.setattr(bench.openfhe_boot_peer, "find_python", lambda explicit: "python")
    argv = ["--quick", "--threads", "1,2"] + (["--peer-first"] if first else [])
    records = bench.collect(bench._parse(argv))
    want = [("peer", 1), ("ours", 1), ("peer", 2), ("ours", 2)] if first else [
        ("ours", 1), ("peer", 1), ("ours", 2), ("peer", 2)]
    assert calls == want
    mine = [r for r in records if r["peer"] == "crossfhe"]
    assert [r["ratio_openfhe"] for r in mine] == [0.25, 0.25]
    assert {r["ran"] for r in records if r["peer"] == "openfhe"} == {"first" if first else "second"}
