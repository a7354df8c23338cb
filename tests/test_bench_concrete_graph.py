"""The generic Concrete peer (benchmarks/concrete_graph_peer.py) and its exporter (benchmarks/graph_export.py): an
exported circuit reads back as the very graph an unoptimized compile runs (nodes, tables, samples, our outputs),
the peer's straight-line program (the order of operations it hands Concrete) computes our outputs exactly in
NumPy with every value inside its planned interval, and, where Concrete's environment exists (.venv-concrete),
concrete-python compiles a tiny GPT-2 attention head and decrypts our outputs (slow)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from _benchmarks import load as _load

from crossfhe.api import TFHEInt
from crossfhe.api import compile as compile_circuit
from crossfhe.api import tfhe_lower as ctfhe
from crossfhe.apps.attention import AttentionHead
from crossfhe.apps.tfhe_ml import sixteen_lookups, sixteen_lookups_reference
from crossfhe.tfhe import presets

ROOT = Path(__file__).resolve().parent.parent
_VENV_PYTHON = Path(os.environ.get("CROSSFHE_CONCRETE_PYTHON", ROOT / ".venv-concrete" / "bin" / "python"))




@pytest.fixture(scope="module")
def export():
    return _load("graph_export")


@pytest.fixture(scope="module")
def peer():
    return _load("concrete_graph_peer")


@pytest.fixture(scope="module")
def head():
    """GPT-2 attention head, d_model 8, 2 heads, 3 tokens, at P4: 24 two-bit inputs, 12 outputs, 242 lookups."""
    model = AttentionHead(d_model=8, n_heads=2, seq_len=3, params=presets.P4)
    return model.fit(model.sample_inputs(32))


@pytest.fixture(scope="module")
def sixteen():
    """sixteen_lookups at P4 over two 4-bit inputs, compiled with the optimizing passes (the exporter must go
    back to the unoptimized graph)."""
    return compile_circuit(sixteen_lookups, TFHEInt(4), TFHEInt(4), params=presets.P4)


def _all_pairs() -> np.ndarray:
    x, y = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
    return np.stack([x.ravel(), y.ravel()], axis=1).astype(np.int64)


def _same_graph(a, b) -> None:
    assert a == b  # scheme, nodes (op, args, attrs with tables' keys and ranges, loc), inputs, outputs
    assert sorted(a.consts) == sorted(b.consts)
    for k in a.consts:
        np.testing.assert_array_equal(a.consts[k], b.consts[k])


def test_export_round_trip_circuit(export, sixteen, tmp_path):
    """An optimized circuit exports its unoptimized graph (only input, linear and lookup nodes, one table of 2^p
    per lookup); the file reads back to that graph, the samples and evaluate_plain's outputs, which are
    sixteen_lookups_reference's on all 256 input pairs."""
    q = _all_pairs()
    data = export.export_graph(sixteen, q, tmp_path / "sixteen.json")
    g, back = export.load_export(tmp_path / "sixteen.json")
    unopt = compile_circuit(sixteen_lookups, TFHEInt(4), TFHEInt(4), params=presets.P4, optimize=False).graph
    _same_graph(g, unopt)
    assert {n.op for n in g.nodes} <= set(export.OPS)
    assert back["op_counts"] == data["op_counts"] == {"add": 4, "input": 2, "lookup": 16, "mul_int": 4}
    assert (back["p"], back["input_bits"], back["outputs"], back["expected_from"]) == (4, [4, 4], 8, "evaluate_plain")
    assert all(g.consts[n.attr("table")].shape == (16,) for n in g.nodes if n.op == "lookup")
    np.testing.assert_array_equal(np.asarray(back["q"]), q)
    np.testing.assert_array_equal(np.asarray(back["expected"]), np.stack(sixteen_lookups_reference(q[:, 0], q[:, 1]),
                                                                          axis=1))


def test_export_round_trip_model(export, head, tmp_path):
    """A TFHEModel exports model.compile(optimize=False).graph with its input widths, and its outputs_plain as
    expected (equal to evaluate_plain of the graph: the exporter checks)."""
    q = head.encode(head.sample_inputs(4, seed=3))
    export.export_graph(head, q, tmp_path / "head.json")
    g, back = export.load_export(tmp_path / "head.json")
    _same_graph(g, head.compile(optimize=False).graph)
    assert back["input_bits"] == list(head.input_bits) and back["p"] == 4 and back["lookups"] == 242
    assert back["expected_from"] == "outputs_plain"
    np.testing.assert_array_equal(np.asarray(back["q"]), q)
    np.testing.assert_array_equal(np.asarray(back["expected"]), head.outputs_plain(q))
    with pytest.raises(ValueError, match="q must be"):
        export.export_graph(head, q[:, :5], tmp_path / "bad.json")
    with pytest.raises(ValueError, match="outside"):
        export.export_graph(head, q + 4, tmp_path / "bad.json")


@pytest.mark.parametrize("linear", ["affine", "nodes"])
def test_peer_program_circuit(export, peer, sixteen, tmp_path, linear):
    """The peer's program of sixteen_lookups (read without crossfhe) equals the reference on all 256 pairs, every
    value in its planned interval; the affine form keeps every value at 4 bits, one lookup per table use."""
    q = _all_pairs()
    export.export_graph(sixteen, q, tmp_path / "sixteen.json")
    g = peer.load_graph(tmp_path / "sixteen.json")
    prog = peer.plan(g, linear)
    np.testing.assert_array_equal(peer.plain_outputs(g, prog, q), g["expected"])
    assert prog["stats"]["lookups"] == 16 and prog["stats"]["max_bits"] == 4


@pytest.mark.parametrize("linear", ["affine", "nodes"])
def test_peer_program_head(export, peer, head, tmp_path, linear):
    """The peer's program of the attention head equals our integer model on its samples and on 64 fresh ones.
    ``affine``: every sink's ordered affine form stays in [0, 16) (4-bit hints everywhere, its intervals equal our
    analysis'); ``nodes``: the graph as traced, whose negative intermediates need 5 bits."""
    q = head.encode(head.sample_inputs(3, seed=5))
    export.export_graph(head, q, tmp_path / "head.json")
    g = peer.load_graph(tmp_path / "head.json")
    prog = peer.plan(g, linear)
    np.testing.assert_array_equal(peer.plain_outputs(g, prog, g["q"]), g["expected"])
    fresh = head.encode(head.sample_inputs(64, seed=11))
    np.testing.assert_array_equal(peer.plain_outputs(g, prog, fresh), head.outputs_plain(fresh))
    st = prog["stats"]
    assert st["lookups"] == 242
    if linear == "affine":
        assert st["max_bits"] == 4 and st["sinks_wider_than_p"] == 0 and st["forms_equal_ranges"]
        assert set(prog["bits"]) == {4}
    else:
        assert st["max_bits"] == 5 and st["values_outside_p_bits"] > 0


def test_peer_program_random_inputs(export, peer, head, tmp_path):
    """Uniform random inputs (not model-like): the program still equals evaluate_plain of our graph exactly."""
    q = head.encode(head.sample_inputs(2, seed=5))
    export.export_graph(head, q, tmp_path / "head.json")
    g = peer.load_graph(tmp_path / "head.json")
    graph = head.compile(optimize=False).graph
    r = np.random.default_rng(7).integers(0, 4, size=(200, q.shape[1])).astype(np.int64)
    want = np.stack(ctfhe.evaluate_plain(graph, head.params, *[r[:, i] for i in range(r.shape[1])]), axis=1)
    np.testing.assert_array_equal(peer.plain_outputs(g, peer.plan(g), r), want)
    sets = peer.inputset(g)
    assert len(sets) == 2 + 2 + 8 and all(s.shape == (24,) and s.min() >= 0 and s.max() <= 3 for s in sets)


def test_peer_loader_rejects(export, peer, sixteen, tmp_path):
    """A table of the wrong size, an op the peer does not handle, or a sample count that differs is refused."""
    export.export_graph(sixteen, _all_pairs()[:3], tmp_path / "ok.json")
    data = json.loads((tmp_path / "ok.json").read_text())
    bad = json.loads(json.dumps(data))
    key = next(iter(bad["graph"]["consts"]))
    bad["graph"]["consts"][key][1] = [8, 2]
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="table"):
        peer.load_graph(tmp_path / "bad.json")
    bad = json.loads(json.dumps(data))
    bad["graph"]["nodes"][-1][0] = "pbs"
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="pbs"):
        peer.load_graph(tmp_path / "bad.json")
    bad = json.loads(json.dumps(data))
    bad["expected"] = bad["expected"][:2]
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="expected"):
        peer.load_graph(tmp_path / "bad.json")


def test_bench_taurus_hands_small_gpt2_graphs_to_the_peer(export, head, tmp_path, monkeypatch):
    """bench_taurus's gpt2 workloads: a circuit of at most GRAPH_PEER_MAX_LOOKUPS lookups is exported for
    concrete-python (the graph of the unoptimized compile), a larger one records why not; --gpt2-size is checked."""
    bench = _load("bench_taurus")
    monkeypatch.setattr(bench, "GRAPH_EXPORTS", {})
    q = head.encode(head.sample_inputs(2, seed=7))
    bench.export_graph_for_peer("gpt2_head", head, q, 242)
    g, back = export.load_export(bench.GRAPH_EXPORTS["gpt2_head"])
    _same_graph(g, head.compile(optimize=False).graph)
    np.testing.assert_array_equal(np.asarray(back["expected"]), head.outputs_plain(q))
    bench.export_graph_for_peer("gpt2_block", head, q, bench.GRAPH_PEER_MAX_LOOKUPS + 1)
    assert "above GRAPH_PEER_MAX_LOOKUPS" in bench.GRAPH_EXPORTS["gpt2_block"]
    assert bench.gpt2_size("64x4x4") == {"d_model": 64, "n_heads": 4, "seq_len": 4}
    for bad in ("64x4", "64x5x4", "0x1x1", "axbxc"):
        with pytest.raises(SystemExit, match="gpt2-size"):
            bench.gpt2_size(bad)


# concrete-python is not a crossfhe dependency: it lives in its own environment (benchmarks/setup_concrete.sh,
# Concrete ML's pinned numpy and torch), which CI does not build; skipped where it is absent, run where it exists.
@pytest.mark.slow
@pytest.mark.skipif(not _VENV_PYTHON.exists(), reason="no .venv-concrete (bash benchmarks/setup_concrete.sh)")
def test_concrete_runs_attention_head(export, head, tmp_path):
    """concrete-python compiles the tiny head's 242 lookups with every lookup input at 4 bits and decrypts our
    outputs exactly; its statistics report at least one PBS and no more than our lookups (80 with
    concrete-python 2.10: it fuses lookups)."""
    q = head.encode(head.sample_inputs(2, seed=5))
    export.export_graph(head, q, tmp_path / "head.json")
    r = subprocess.run([str(_VENV_PYTHON), str(ROOT / "benchmarks" / "concrete_graph_peer.py"),
                        str(tmp_path / "head.json"), "--samples", "2", "--warmup", "0"], capture_output=True,
                       text=True, env=dict(os.environ, MALLOC_ARENA_MAX="1"), timeout=1800)
    assert r.returncode == 0, r.stderr[-2000:]
    rec = json.loads(r.stdout.strip().splitlines()[-1])["models"]["head"]
    assert rec["exact"] and rec["mismatches"] == 0 and rec["samples"] == 2 and rec["export_consistent"]
    assert rec["circuit"]["bits_equal_p"] and rec["circuit"]["tlu_input_bits"] == [4] and rec["lookups"] == 242
    assert 0 < rec["circuit"]["pbs_count"] <= rec["lookups"]
