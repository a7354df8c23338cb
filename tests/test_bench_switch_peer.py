"""The OpenFHE scheme-switching peer (benchmarks/openfhe_switch_peer.py) at its smallest size: CKKS -> FHEW,
FHEW -> CKKS, comparison and max/argmax run at 128-bit parameters and agree with NumPy where OpenFHE's precision
resolves the data.

It needs OpenFHE's Python wheel, which exists for CPython 3.10 only and lives in its own environment
(``make openfhe-peer`` makes ``.venv-openfhe``); without it those tests skip. One run takes minutes and about
7 GB of memory (N 2^16 CKKS keys and FHEW STD128 bootstrapping keys), hence ``slow``; the driver's own tests are
quick.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
PEER = ROOT / "benchmarks" / "openfhe_switch_peer.py"
PYTHON = ROOT / ".venv-openfhe" / "bin" / "python"


def _openfhe_python() -> tuple[str | None, str]:
    if not PYTHON.exists():
        return None, f"no {PYTHON} (make openfhe-peer; needs python3.10)"
    try:
        r = subprocess.run([str(PYTHON), "-c", "import openfhe"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{PYTHON} does not run: {e}"
    if r.returncode != 0:
        return None, f"{PYTHON} cannot import openfhe: {r.stderr.strip().splitlines()[-1:]}"
    return str(PYTHON), ""


@pytest.fixture(scope="module")
def peer():
    spec = importlib.util.spec_from_file_location("openfhe_switch_peer", PEER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_options(peer):
    # standard library only at import (the driver runs in any interpreter); --quick keeps the smallest slot count
    a = peer._parse(["--quick", "--slots", "64,8", "--interval=-2,3"])
    assert a.slots == [8] and a.interval == (-2.0, 3.0) and a.reps == 3 and a.threads == 1
    assert peer._parse([]).slots == [8, 64]
    with pytest.raises(SystemExit):
        peer._parse(["--interval=1,1"])


def test_driver_degrades_to_none(peer, tmp_path, capsys):
    assert peer.run_switch(None) is None
    assert "peer skipped" in capsys.readouterr().err
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho broken >&2\nexit 3\n")
    fake.chmod(0o755)
    assert peer.run_switch(str(fake), timeout_s=60) is None
    assert "worker failed (exit 3)" in capsys.readouterr().err


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    python, why = _openfhe_python()
    if python is None:  # no .venv-openfhe (CI has none; `make openfhe-peer` builds it): nothing to run the peer in
        pytest.skip(f"OpenFHE scheme-switching peer not testable: {why}")
    out = tmp_path_factory.mktemp("switch-peer") / "switch.json"
    env = dict(os.environ, MALLOC_ARENA_MAX="1")
    r = subprocess.run([python, str(PEER), "--quick", "--slots", "8", "--reps", "1", "--threads", "1",
                        "--seed", "3", "--json", str(out)], capture_output=True, text=True, timeout=3600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    rec = json.loads(r.stdout.strip().splitlines()[-1])
    assert json.loads(out.read_text()) == rec  # --json writes the object printed on stdout
    assert "ckks_to_fhew" in r.stderr and "max_argmax" in r.stderr  # the table
    return rec


@pytest.mark.slow
def test_record_fields(record):
    assert record["suite"] == "switch" and record["peer"].startswith("openfhe ")
    assert record["threads"] == 1 and record["omp_num_threads"] == "1" and len(record["cpus"]) == 1
    assert record["slots"] == [8] and record["interval"] == [-4.0, 4.0]
    names = {r["name"] for r in record["records"]}
    assert names == {"ckks_to_fhew", "fhew_to_ckks", "compare", "max_argmax", "keygen_switch_context",
                     "keygen_argmax_context"}
    for r in record["records"]:
        assert r["suite"] == "switch" and r["params"]["slots"] == 8 and r["median_ms"] > 0
        assert r["device"] == "cpu" and r["threads"] == 1
    res = record["results"]["8"]
    for ctx in ("switch_context", "argmax_context"):
        c = res[ctx]
        assert c["ckks"]["security"] == "HEStd_128_classic" and c["ckks"]["N"] >= 2**15
        assert c["ckks"]["log_q"] > 0 and c["keygen_s"]["total_s"] > 0
        kb = c["key_bytes"]
        for key in ("ckks_relin_key", "ckks_rotation_keys", "fhew_to_ckks_key", "fhew_bootstrap_keys",
                    "ckks_to_fhew_key_in_context"):
            assert kb[key] > 0, key
        assert kb["num_rotation_keys"] > 0
    assert res["argmax_context"]["ckks"]["mult_depth"] == res["switch_context"]["ckks"]["mult_depth"] + 3
    fhew = res["fhew"]
    assert fhew["paramset"] == "STD128" and fhew["p_large"] == 2**25 // (2 * fhew["beta"])


@pytest.mark.slow
def test_ckks_to_fhew_rounds(record):
    res = record["results"]["8"]
    c = res["ckks_to_fhew"]
    x = np.array(res["data"]["x"])
    assert c["num_lwe"] >= 8 and c["lwe_modulus_bits"] == 25
    want = np.rint(x * c["scale"])
    assert np.array_equal(np.array(c["expected_round"]), want)
    # round(x * s) up to one unit (a value within switching noise of a rounding boundary may round the other way)
    assert np.max(np.abs(np.array(c["decrypted"]) - want)) <= 1


@pytest.mark.slow
def test_fhew_to_ckks(record):
    res = record["results"]["8"]
    f = res["fhew_to_ckks"]
    x = np.array(res["data"]["x"])
    assert np.array_equal(np.array(f["input_m"]), np.rint(x * f["scale"]))
    assert f["max_abs_err_units"] < 0.5  # each integer comes back nearest to itself


@pytest.mark.slow
def test_compare_agrees_with_numpy(record):
    res = record["results"]["8"]
    c = res["compare"]
    x, y = np.array(res["data"]["x"]), np.array(res["data"]["y"])
    got = np.array(c["decrypted"])
    resolved = np.abs(x - y) > c["resolution"]
    assert resolved.sum() == c["num_resolved"] and resolved.sum() >= 6  # uniform data: ties are rare
    assert np.array_equal(got[resolved] > 0.5, (x < y)[resolved])
    assert np.max(np.abs(got[resolved] - (x < y)[resolved])) < 0.05


@pytest.mark.slow
def test_argmax_agrees_with_numpy(record):
    res = record["results"]["8"]
    m = res["max_argmax"]
    z = np.array(res["data"]["z"])
    onehot = np.array(m["onehot"])
    assert m["max_numpy"] == pytest.approx(z.max())
    srt = np.sort(z)
    if srt[-1] - srt[-2] > m["resolution"]:
        assert int(np.argmax(onehot)) == int(np.argmax(z)) == m["argmax"]
        assert np.max(np.abs(onehot - np.eye(len(z))[np.argmax(z)])) < 0.05
        assert abs(m["max"] - z.max()) < 0.05
    else:  # the two largest closer than OpenFHE resolves: either is a right answer
        assert z[int(np.argmax(onehot))] >= z.max() - m["resolution"]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-m", "slow"]))
