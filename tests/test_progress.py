"""Progress reports (crossfhe.progress): one callback shape across schemes, the forms a user passes, the bars; and the
persistent compilation cache the contexts turn on (crossfhe.runtime.enable_compilation_cache)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from crossfhe import progress as P
from crossfhe.bfv import ops as B
from crossfhe.ckks import ops as C
from crossfhe.testing import INSECURE_BFV_N256, INSECURE_CKKS_N10, INSECURE_TFHE_P4
from crossfhe.tfhe import ops as T

ROOT = Path(__file__).resolve().parents[1]


class Recorder:
    def __init__(self):
        self.calls: list[tuple[int, int, str]] = []

    def __call__(self, done, total, what):
        self.calls.append((done, total, what))


def _check_stages(calls):
    """Within each stage done rises by at least one per call and ends at total; returns the stage names in order."""
    assert calls, "no progress reported"
    stages, last, prev_done, prev_total = [], None, 0, 0
    for done, total, what in calls:
        assert isinstance(done, int) and isinstance(total, int) and isinstance(what, str) and what
        assert 1 <= done <= total
        if what != last:
            if last is not None:
                assert prev_done == prev_total, f"stage {last!r} ended at {prev_done}/{prev_total}"
            stages.append(what)
        else:
            assert done > prev_done
        last, prev_done, prev_total = what, done, total
    assert prev_done == prev_total
    return stages


def test_callback_forms():
    assert P.callback(None) is None and P.callback(False) is None
    f = Recorder()
    assert P.callback(f) is f
    assert isinstance(P.callback(True), P.Bars) and P.callback(True).delay == 0
    auto = P.callback("auto")
    assert isinstance(auto, P.Bars) and auto.delay == P.AUTO_DELAY_S
    for bad in ("yes", 3, ["x"]):
        with pytest.raises(TypeError, match="progress must be"):
            P.callback(bad)


def test_ckks_keygen_reports_every_key_and_the_keys_do_not_change():
    rec = Recorder()
    seed = bytes(range(32))
    sk1, ek1 = C.keygen(INSECURE_CKKS_N10, rotations=[1, 2, -1], seed=seed, progress=rec)
    assert _check_stages(rec.calls) == ["CKKS keys"]
    assert [c[0] for c in rec.calls] == [1, 2, 3, 4, 5]  # public, relinearization, three Galois keys
    sk2, ek2 = C.keygen(INSECURE_CKKS_N10, rotations=[1, 2, -1], seed=seed)
    leaves1, leaves2 = jax.tree_util.tree_leaves(ek1), jax.tree_util.tree_leaves(ek2)
    assert len(leaves1) == len(leaves2) > 0
    assert all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(leaves1, leaves2))
    assert sorted(ek1.galois) == sorted(ek2.galois) and ek1.key_id == ek2.key_id


def test_bfv_keygen_reports_every_key():
    rec = Recorder()
    B.keygen(INSECURE_BFV_N256, rotations=[1, 3], row_swap=True, seed=bytes(32), progress=rec)
    assert _check_stages(rec.calls) == ["BFV keys"]
    assert rec.calls[-1][:2] == (5, 5)


def test_tfhe_keygen_and_bootstrap_report_in_the_same_shape():
    rec = Recorder()
    ck, sk = T.keygen(INSECURE_TFHE_P4, seed=bytes(32), progress=rec)
    stages = _check_stages(rec.calls)
    assert stages[:2] == ["bootstrapping key", "key-switching key"]
    rec2 = Recorder()
    ct = T.encrypt(ck, np.arange(4))
    out = T.pbs(sk, ct, lambda m: (3 * m + 1) % 16, progress=rec2)
    assert _check_stages(rec2.calls) == ["blind rotation"]
    assert (T.decrypt(ck, out) == (3 * np.arange(4) + 1) % 16).all()
    with pytest.raises(TypeError, match="progress must be"):
        T.pbs(sk, ct, lambda m: m, progress="loud")


def test_bars_draw_each_stage(capsys):
    bars = P.Bars()
    for i in range(1, 4):
        bars(i, 3, "stage one")
    bars(1, 2, "stage two")
    bars(2, 2, "stage two")
    err = capsys.readouterr().err
    assert "stage one" in err and "3/3" in err and "stage two" in err and "2/2" in err


def _cache_probe(env_updates: dict, tmp_path: Path) -> dict:
    code = (
        "import json, jax\n"
        "from crossfhe.runtime import enable_compilation_cache\n"
        "got = enable_compilation_cache()\n"
        "print(json.dumps({'returned': None if got is None else str(got), "
        "'config': jax.config.jax_compilation_cache_dir}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("CROSSFHE_JAX_CACHE", "JAX_COMPILATION_CACHE_DIR")}
    env.update(PYTHONPATH=str(ROOT), CROSSFHE_CACHE_DIR=str(tmp_path / "cache"), **env_updates)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_compilation_cache_default_user_setting_and_opt_out(tmp_path):
    default = _cache_probe({}, tmp_path)
    assert default["returned"] == default["config"] == str(tmp_path / "cache" / "xla")
    theirs = _cache_probe({"JAX_COMPILATION_CACHE_DIR": str(tmp_path / "mine")}, tmp_path)
    assert theirs["returned"] == theirs["config"] == str(tmp_path / "mine")  # the user's own setting wins
    moved = _cache_probe({"CROSSFHE_JAX_CACHE": str(tmp_path / "elsewhere")}, tmp_path)
    assert moved["config"] == str(tmp_path / "elsewhere")
    off = _cache_probe({"CROSSFHE_JAX_CACHE": "0"}, tmp_path)
    assert off["returned"] is None and not off["config"]
