"""benchmarks/plot.py: the PNG of a suite's records, ours against the peers (``crossfhe bench <suite> --plot``)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

# matplotlib is an optional extra (crossfhe[plot]); the dev venv has it, so these run there and skip elsewhere.
pytest.importorskip("matplotlib")

_PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "plot.py"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
BASE = {"device": "cpu", "jax": "0.10.2", "threads": 1, "cpu": "x86_64", "note": ""}


@pytest.fixture(scope="module")
def plot():
    spec = importlib.util.spec_from_file_location("crossfhe_bench_plot", _PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop(spec.name, None)


def _ckks() -> list[dict]:
    prm = {"preset": "N13_L3", "N": 8192, "limbs": 4, "special": 2, "dnum": 2}
    recs = []
    for name, ours, seal, ofhe in (("he_add", 0.034, 0.058, 0.049), ("he_mult_relin", 0.6, 14.8, 5.9),
                                   ("keyswitch", 0.5, 9.3, None)):
        recs.append(dict(BASE, suite="ckks", name=name, params=prm, median_ms=ours, min_ms=ours * 0.9,
                         max_ms=ours * 1.5, reps=10, peer="seal-python 4.4.0", peer_median_ms=seal,
                         peer_min_ms=seal * 0.95, ratio=ours / seal, floor_ms=None, openfhe="openfhe 1.6.1",
                         openfhe_median_ms=ofhe, openfhe_min_ms=ofhe, ratio_openfhe=ofhe and ours / ofhe))
    recs.append(dict(BASE, suite="ckks", name="precision_rotate", kind="precision", params=prm, median_ms=None,
                     log2_err=-12.4, peer="seal-python 4.4.0", peer_median_ms=None, ratio=None, floor_ms=None))
    return recs


def _ntt() -> list[dict]:
    return [dict(BASE, suite="ntt", name=f"ntt_{op}", params={"N": n, "limbs": 8, "prime_bits": 30}, median_ms=t,
                 min_ms=t * 0.9, max_ms=t * 2, numpy_median_ms=t * 30, floor_ms=t / 5, peer="tfhe-ntt 0.7.1",
                 peer_median_ms=t / 5, ratio=5.0)
            for op in ("forward", "inverse") for n, t in ((4096, 0.077), (16384, 0.37))]


def _kernels() -> list[dict]:  # no external peer: the MATRIX records carry the VECTOR time
    out = [dict(BASE, suite="kernels", name="int8_matmul_rate", backend="MATRIX", params={"M": 1024, "K": 1024,
                "N": 1024}, median_ms=40.0, min_ms=39.0, max_ms=44.0, floor_ms=None)]
    for backend, t in (("MATRIX", 1.2), ("VECTOR", 0.3)):
        out.append(dict(BASE, suite="kernels", name="ntt_forward", backend=backend,
                        params={"N": 4096, "limbs": 8}, median_ms=t, min_ms=t, max_ms=t, floor_ms=0.05,
                        peer=None, peer_median_ms=None))
    out[1].update(peer="crossfhe.ring.ntt (VECTOR, radix-2)", peer_median_ms=0.3, ratio=4.0)
    return out


def _bars(fig) -> int:
    from matplotlib.container import BarContainer

    return sum(len(c) for ax in fig.axes for c in ax.containers if isinstance(c, BarContainer))


def _legend(fig) -> list[str]:
    return [t.get_text() for lg in fig.legends for t in lg.get_texts()]


@pytest.mark.parametrize("suite, records", [("ckks", _ckks()), ("ntt", _ntt()), ("kernels", _kernels())])
def test_writes_a_png(plot, tmp_path, suite, records):
    import matplotlib.image

    out = plot.plot_records(records, suite, tmp_path / "img" / f"{suite}.png")
    data = out.read_bytes()
    assert data[:8] == PNG_SIGNATURE and len(data) > 1000
    img = matplotlib.image.imread(out)
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100


def test_peers_in_the_legend_and_one_bar_each(plot):
    fig = plot.figure(_ckks(), "ckks", date="2026-11-26")
    legend = _legend(fig)
    assert "crossfhe" in legend and "seal-python 4.4.0" in legend and "openfhe 1.6.1" in legend
    # three timed operations: ours and SEAL each, OpenFHE where it has a time (2); the precision record has none
    assert _bars(fig) == 3 + 3 + 2
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert "0.041x" in texts and "0.10x" in texts  # ours / SEAL and ours / OpenFHE beside the peers' bars
    assert "ckks" in fig._suptitle.get_text() and "2026-11-26" in fig._suptitle.get_text()


def test_floor_and_ours_only(plot):
    fig = plot.figure(_ntt(), "ntt")
    assert "floor (ours)" in _legend(fig) and "tfhe-ntt 0.7.1" in _legend(fig)
    assert _bars(fig) == 4 * 3  # ours, the peer, our NumPy reference
    fig = plot.figure(_kernels(), "kernels")
    assert _bars(fig) == 1 + 2  # the rate; MATRIX NTT and its VECTOR peer (not a row of its own)
    assert "floor (ours)" in _legend(fig)


def test_log_scale_only_for_wide_spans(plot):
    fig = plot.figure(_ckks(), "ckks")
    assert fig.axes[0].get_xscale() == "log"  # 0.034 ms .. 14.8 ms
    narrow = [dict(r, median_ms=1.0 + i / 10, min_ms=None, max_ms=None) for i, r in enumerate(_ntt())]
    narrow = [dict(r, peer=None, peer_median_ms=None, numpy_median_ms=None, floor_ms=None) for r in narrow]
    assert plot.figure(narrow, "ntt").axes[0].get_xscale() == "linear"


def test_cli_empty_json_exits_2(plot, tmp_path, capsys):
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    assert plot.main(["--suite", "tfhe", "--json", str(empty), "--out", str(tmp_path / "x.png")]) == 2
    assert "tfhe" in capsys.readouterr().err
    other = tmp_path / "ckks.json"  # records of another suite: nothing to plot for this one
    other.write_text(json.dumps(_ckks()))
    assert plot.main(["--suite", "hmvp", "--json", str(other), "--out", str(tmp_path / "x.png")]) == 2
    assert "hmvp" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


def test_cli_as_a_script(tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    r = subprocess.run([sys.executable, str(_PATH), "--suite", "ntt", "--json", str(empty), "--out",
                        str(tmp_path / "x.png")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "'ntt'" in r.stderr
    recs = tmp_path / "ntt.json"
    recs.write_text(json.dumps(_ntt()))
    r = subprocess.run([sys.executable, str(_PATH), "--suite", "ntt", "--json", str(recs), "--out",
                        str(tmp_path / "ntt.png")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "ntt.png").read_bytes()[:8] == PNG_SIGNATURE


def test_without_matplotlib_prints_the_install_hint(plot, tmp_path, monkeypatch, capsys):
    recs = tmp_path / "ntt.json"
    recs.write_text(json.dumps(_ntt()))
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    assert plot.main(["--suite", "ntt", "--json", str(recs), "--out", str(tmp_path / "x.png")]) == 2
    assert '--plot needs matplotlib: pip install "crossfhe[plot]"' in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()
