"""Export one of our TFHE circuits, unoptimized, with sample inputs and our outputs on them, for peers that compile
the same integers with another TFHE compiler (benchmarks/concrete_graph_peer.py, in Concrete's environment).

    from benchmarks.graph_export import export_graph          # or load this file by path
    export_graph(model_or_circuit, q, "head.json")

The file is one JSON object (:data:`FORMAT`):

- ``graph``: :func:`crossfhe.api.ir.graph_to_json` of the circuit after the ``dead_code`` and ``tables`` passes
  only (what ``compile(..., optimize=False)`` runs): nodes in topological order, each ``[op, args, attrs, loc]``
  with op one of :data:`OPS`; a ``lookup`` names its table, a key of ``consts`` (int32 [2^p], f(m) mod 2^p, as
  [dtype, shape, base64 bytes]); every node carries ``range`` [lo, hi], the interval our analysis proved for its
  value over all inputs (a lookup's input and every output lie in [0, 2^p); a value in between may leave it).
- ``p`` (message bits), ``params`` (the preset's name), ``input_bits`` (per input: its declared width, p where the
  spec gives none), ``outputs`` (count), ``op_counts``, ``lookups`` (one programmable bootstrap each, unoptimized).
- ``q`` int64 [n, inputs] (sample inputs, each in [0, 2^input_bits)) and ``expected`` int64 [n, outputs]: our
  outputs on them, from ``model.outputs_plain(q)`` for a :class:`crossfhe.apps.tfhe_ml.TFHEModel`, else from
  :func:`crossfhe.api.tfhe_lower.evaluate_plain` (``expected_from``). For a model both are computed and must agree
  (else ValueError: the graph would not be the model).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np

from crossfhe.api import ir
from crossfhe.api import tfhe_lower as ctfhe
from crossfhe.api.circuit import Circuit

FORMAT = "crossfhe-tfhe-graph/1"
OPS = ("input", "add", "sub", "neg", "add_scalar", "mul_int", "lookup")
"""The ops an unoptimized TFHE graph holds (``pick`` and ``pbs`` come from the ks_dedup and batch passes)."""


def unoptimized_graph(circuit: Circuit) -> ir.Graph:
    """The circuit's graph after ``dead_code`` and ``tables`` only: its own graph when compiled with
    ``optimize=False``, else those two passes rerun on its traced graph (the same graph an unoptimized compile
    makes). ValueError if an op outside :data:`OPS` remains or the circuit is not TFHE."""
    if circuit.scheme.name != "tfhe":
        raise ValueError(f"export_graph takes a TFHE circuit, got a {circuit.scheme.name} one")
    g = circuit.graph
    if any(n.op not in OPS for n in g.nodes):
        if circuit.traced is None:
            raise ValueError("the circuit is optimized and keeps no traced graph; compile it with optimize=False")
        g = circuit.traced
        for _, pass_fn in circuit.scheme.passes(optimize=False):
            g = pass_fn(g, circuit.params)
    bad = sorted({n.op for n in g.nodes} - set(OPS))
    if bad:
        raise ValueError(f"ops {bad} in the unoptimized graph; the exporter handles {OPS}")
    if any(n.op == "lookup" and n.attr("table") is None for n in g.nodes):
        raise ValueError("a lookup has no table for p (the tables pass did not run)")
    return g


def export_graph(model_or_circuit, q, path) -> dict:
    """Write the unoptimized circuit of ``model_or_circuit`` (a ``TFHEModel``: its ``compile(optimize=False)``; or a
    compiled TFHE ``Circuit``) with sample inputs ``q`` (int64 [n, inputs]) and our outputs on them to ``path``
    (JSON, the module docstring's format); returns the object written."""
    is_model = hasattr(model_or_circuit, "outputs_plain") and hasattr(model_or_circuit, "compile")
    circuit = model_or_circuit.compile(optimize=False) if is_model else model_or_circuit
    if not isinstance(circuit, Circuit):
        raise TypeError(f"export_graph takes a TFHEModel or a compiled Circuit, got {type(model_or_circuit).__name__}")
    g = unoptimized_graph(circuit)
    params = circuit.params
    p = int(params.message_bits)
    q = np.asarray(q, dtype=np.int64)
    if q.ndim != 2 or q.shape[1] != len(g.inputs):
        raise ValueError(f"q must be int64 [n, {len(g.inputs)}] (one column per input), got shape {q.shape}")
    input_bits = [int(g.nodes[i].attr("bits") or p) for i in g.inputs]
    top = (1 << np.asarray(input_bits, dtype=np.int64)) - 1
    if (q < 0).any() or (q > top).any():
        raise ValueError("q holds values outside [0, 2^input_bits) for some input")
    from_graph = np.stack([np.asarray(o, dtype=np.int64).reshape(len(q))
                           for o in ctfhe.evaluate_plain(g, params, *[q[:, i] for i in range(q.shape[1])])], axis=1)
    if is_model:
        expected = np.asarray(model_or_circuit.outputs_plain(q), dtype=np.int64).reshape(len(q), -1)
        if not np.array_equal(expected, from_graph):
            raise ValueError("the model's outputs_plain differ from its circuit's evaluate_plain on q")
    else:
        expected = from_graph
    counts = Counter(n.op for n in g.nodes)
    data = {
        "format": FORMAT, "name": getattr(circuit, "name", "circuit"), "params": params.name, "p": p,
        "input_bits": input_bits, "outputs": len(g.outputs), "op_counts": dict(sorted(counts.items())),
        "lookups": counts.get("lookup", 0), "graph": ir.graph_to_json(g),
        "q": q.tolist(), "expected": expected.tolist(),
        "expected_from": "outputs_plain" if is_model else "evaluate_plain",
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    return data


def load_export(path) -> tuple[ir.Graph, dict]:
    """(the graph, the rest of the object) of a file written by :func:`export_graph` (our side of the round trip;
    the peer parses the file without crossfhe)."""
    data = json.loads(Path(path).read_text())
    if data.get("format") != FORMAT:
        raise ValueError(f"{path}: format {data.get('format')!r}, expected {FORMAT!r}")
    return ir.graph_from_json(data["graph"]), data


__all__ = ["FORMAT", "OPS", "export_graph", "load_export", "unoptimized_graph"]
