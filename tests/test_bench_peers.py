"""The OpenFHE peer driver of the CKKS benchmark (benchmarks/openfhe_peer.py) degrades to empty columns."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "openfhe_peer.py"


@pytest.fixture(scope="module")
def peer():
    spec = importlib.util.spec_from_file_location("openfhe_peer", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_missing_interpreter_gives_none(peer, tmp_path, capsys):
    assert peer.find_python(str(tmp_path / "no-such-python")) is None
    assert "not found" in capsys.readouterr().err


def test_failing_worker_gives_none(peer, tmp_path, capsys):
    # An "interpreter" that exits with an error: the driver reports it instead of raising, so the
    # benchmark keeps its other columns.
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho broken >&2\nexit 3\n")
    fake.chmod(0o755)
    rec = peer.run(str(fake), log_n=10, levels=1, log_scale=30, dnum=1, threads=1, reps=1, timeout_s=60)
    assert rec is None
    err = capsys.readouterr().err
    assert "worker failed (exit 3)" in err and "broken" in err
