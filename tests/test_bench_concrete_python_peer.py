"""The same-model Concrete peer (benchmarks/concrete_python_peer.py): our quantized networks exported by
bench_taurus.export_network are read back by the peer's loader and its NumPy twin computes our circuit's outputs on
the whole test split, and, where Concrete's virtual environment exists (.venv-concrete, made by
benchmarks/setup_concrete.sh), concrete-python compiles a tiny export and its encrypted outputs equal ours."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from _benchmarks import load as _load

pytest.importorskip("sklearn")  # the digits and the MLP come from scikit-learn (the `ml` extra)

from crossfhe.apps import datasets  # noqa: E402
from crossfhe.apps.qnn import QuantizedCNN, QuantizedMLP  # noqa: E402
from crossfhe.tfhe import presets  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
_VENV_PYTHON = Path(os.environ.get("CROSSFHE_CONCRETE_PYTHON", ROOT / ".venv-concrete" / "bin" / "python"))




@pytest.fixture(scope="module")
def digits28():
    return datasets.digits(28, seed=0)


@pytest.fixture(scope="module")
def tiny(digits28):
    return QuantizedMLP(hidden=4, input_bits=1, act_bits=2, weight_max=3, params=presets.P4, max_iter=20,
                        qat_epochs=2).fit(digits28.x_train, digits28.y_train)


@pytest.mark.parametrize("which", ["mlp", "cnn"])
def test_export_round_trip(which, tiny, digits28, tmp_path):
    """export_network -> the peer's load_network -> its NumPy evaluation equals our integer model on all 360 test
    images (the integers the peer compiles are ours); a truncated export is refused by the loader."""
    bench, peer = _load("bench_taurus"), _load("concrete_python_peer")
    model = tiny if which == "mlp" else QuantizedCNN(channels=1, kernel=14, stride=14, input_bits=1, act_bits=2,
                                                     weight_max=3, params=presets.P4, epochs=2).fit(
        digits28.x_train, digits28.y_train)
    q = model.encode(digits28.x_test)
    bench.export_network(model, q, tmp_path / "net.npz")
    net = peer.load_network(tmp_path / "net.npz")
    np.testing.assert_array_equal(net["expected"], model.outputs_plain(q))
    np.testing.assert_array_equal(peer.plain_outputs(net, q), model.outputs_plain(q))
    with np.load(tmp_path / "net.npz") as d:
        arrays = dict(d)
    arrays["tables0"] = arrays["tables0"][:, :-1]
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ValueError, match="tables"):
        peer.load_network(tmp_path / "bad.npz")


# Skipped where Concrete is not installed (CI, a fresh clone): concrete-python lives in its own environment,
# made by benchmarks/setup_concrete.sh, as the Concrete ML peer does. The export round trip above runs
# everywhere.
@pytest.mark.skipif(not _VENV_PYTHON.exists(), reason="no .venv-concrete (bash benchmarks/setup_concrete.sh)")
def test_concrete_python_runs_our_network(tiny, digits28, tmp_path):
    """concrete-python compiles the tiny export at 4 bits (one PBS per hidden neuron) and decrypts our outputs."""
    bench = _load("bench_taurus")
    bench.export_network(tiny, tiny.encode(digits28.x_test[:2]), tmp_path / "tiny.npz")
    r = subprocess.run([str(_VENV_PYTHON), str(ROOT / "benchmarks" / "concrete_python_peer.py"),
                        str(tmp_path / "tiny.npz"), "--samples", "2", "--warmup", "0"], capture_output=True, text=True,
                       env=dict(os.environ, MALLOC_ARENA_MAX="1"), timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    rec = json.loads(r.stdout.strip().splitlines()[-1])["models"]["tiny"]
    assert rec["exact"] and rec["mismatches"] == 0
    assert rec["circuit"]["bits_equal_p"] and rec["circuit"]["pbs_count"] == 4
