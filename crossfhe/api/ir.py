"""The circuit IR: a printable graph of the library's operations, in topological order.

A :class:`Graph` is a tuple of :class:`Node` s; node i's value is ``%i``. Each node names an operation
(``op``), its operand nodes (``args``), hashable attributes (``attrs``: offsets, levels, constants' keys) and
the source line that made it (``loc``, "file.py:12", for errors). Constants (plaintext vectors, lookup
tables) live in ``Graph.consts`` by a content key, so equal constants are one entry and nodes compare by
value. Graphs are immutable: every pass is a pure function ``Graph -> Graph``.

The ops of each scheme are listed where they are lowered (:mod:`crossfhe.api.ckks_lower`,
:mod:`crossfhe.api.bfv_lower`, :mod:`crossfhe.api.tfhe_lower`); the ones every scheme shares are ``input``
(attrs ``index`` and the input's spec) and the graph's ``outputs``.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

import numpy as np

from crossfhe.errors import CrossFHEError


class CircuitError(CrossFHEError, ValueError):
    """A circuit cannot be compiled or run as written: the message names the operation and its source line."""


@dataclass(frozen=True)
class Node:
    """One operation: ``op`` on the values of the nodes ``args``, with ``attrs`` (a tuple of (name, value)
    pairs, hashable) made at ``loc``."""

    op: str
    args: tuple[int, ...] = ()
    attrs: tuple[tuple[str, object], ...] = ()
    loc: str = ""

    def attr(self, name: str, default=None):
        for k, v in self.attrs:
            if k == name:
                return v
        return default

    def with_attrs(self, **changes) -> Node:
        """This node with attributes set (or, for the value None, removed); the order stays sorted."""
        d = dict(self.attrs)
        for k, v in changes.items():
            if v is None:
                d.pop(k, None)
            else:
                d[k] = v
        return replace(self, attrs=tuple(sorted(d.items())))

    def key(self) -> tuple:
        """What makes two nodes compute the same value (op, operands, attributes; not the source line)."""
        return (self.op, self.args, self.attrs)


def const_key(array) -> str:
    """The content key of a constant: dtype, shape and a digest of its bytes."""
    a = np.ascontiguousarray(array)
    return f"{a.dtype.str}{list(a.shape)}:{hashlib.sha256(a.tobytes()).hexdigest()[:16]}"


@dataclass(frozen=True)
class Graph:
    """A circuit of one ``scheme`` ("ckks", "bfv" or "tfhe"): ``nodes`` in topological order (every node's args
    are smaller indices), ``inputs`` (node indices of the ``input`` nodes, by argument position), ``outputs``
    (node indices, by output position) and ``consts`` ({key: NumPy array})."""

    scheme: str
    nodes: tuple[Node, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    consts: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        for i, n in enumerate(self.nodes):
            if any(not 0 <= a < i for a in n.args):
                raise CircuitError(f"IR node %{i} ({n.op}) uses a later or missing node: {n.args}")
        if any(not 0 <= o < len(self.nodes) for o in self.outputs):
            raise CircuitError(f"IR outputs name missing nodes: {self.outputs}")

    def const(self, key: str) -> np.ndarray:
        return self.consts[key]

    def users(self) -> list[list[int]]:
        """For each node, the nodes that use its value (in order, with repeats)."""
        out: list[list[int]] = [[] for _ in self.nodes]
        for i, n in enumerate(self.nodes):
            for a in n.args:
                out[a].append(i)
        return out

    def counts(self) -> Counter:
        """How many nodes of each op."""
        return Counter(n.op for n in self.nodes)

    def digest(self) -> str:
        """A digest of the graph's structure and constants (not of source lines): the compile caches' key."""
        h = hashlib.sha256(self.scheme.encode())
        for n in self.nodes:
            h.update(repr(n.key()).encode())
        h.update(repr((self.inputs, self.outputs)).encode())
        for k in sorted(self.consts):
            h.update(k.encode())
        return h.hexdigest()

    def __str__(self) -> str:
        lines = [f"circuit ({self.scheme}, {len(self.nodes)} nodes)"]
        for i, n in enumerate(self.nodes):
            args = ", ".join(f"%{a}" for a in n.args)
            attrs = ", ".join(f"{k}={_short(v)}" for k, v in n.attrs)
            body = f"%{i} = {n.op}" + (f" {args}" if args else "") + (f" {{{attrs}}}" if attrs else "")
            lines.append(f"  {body:<64}" + (f"  # {n.loc}" if n.loc else ""))
        lines.append("  return " + ", ".join(f"%{o}" for o in self.outputs))
        return "\n".join(lines)


def _short(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, str) and ":" in v and len(v) > 24:  # a constant's key
        return v[: v.index(":") + 9] + "..."
    if isinstance(v, tuple) and len(v) > 8:
        return f"({', '.join(map(str, v[:8]))}, ... {len(v)})"
    return str(v)


class Builder:
    """Appends nodes, with common subexpressions merged as they are made (a node equal to an earlier one
    returns that one's index): the graph that tracing or a pass produces."""

    def __init__(self, scheme: str, consts: dict | None = None):
        self.scheme = scheme
        self.nodes: list[Node] = []
        self.consts: dict = dict(consts or {})
        self._seen: dict[tuple, int] = {}

    def add(self, op: str, args: Iterable[int] = (), attrs: dict | None = None, loc: str = "", *,
            merge: bool = True) -> int:
        node = Node(op, tuple(args), tuple(sorted((attrs or {}).items())), loc)
        key = node.key()
        if merge and key in self._seen:
            return self._seen[key]
        self.nodes.append(node)
        self._seen[key] = len(self.nodes) - 1
        return len(self.nodes) - 1

    def const(self, array) -> str:
        a = np.ascontiguousarray(array)
        key = const_key(a)
        self.consts.setdefault(key, a)
        return key

    def graph(self, inputs, outputs) -> Graph:
        return Graph(self.scheme, tuple(self.nodes), tuple(inputs), tuple(outputs), self.consts)


def rebuild(g: Graph, visit: Callable[[Builder, int, Node, list[int]], int]) -> Graph:
    """A new graph made by calling ``visit(builder, i, node, new_args)`` for every node in order; ``visit``
    appends whatever replaces node i (or nothing, returning an existing index) and returns the index of the
    value that stands for it. Inputs and outputs are mapped; unused nodes stay until :func:`dead_code`."""
    b = Builder(g.scheme, g.consts)
    where: list[int] = []
    for i, n in enumerate(g.nodes):
        where.append(visit(b, i, n, [where[a] for a in n.args]))
    return b.graph([where[i] for i in g.inputs], [where[o] for o in g.outputs])


def dead_code(g: Graph) -> Graph:
    """Drop nodes no output depends on (inputs always stay, so argument positions hold); unused constants too."""
    live = [False] * len(g.nodes)
    for o in g.outputs:
        live[o] = True
    for i in g.inputs:
        live[i] = True
    for i in range(len(g.nodes) - 1, -1, -1):
        if live[i]:
            for a in g.nodes[i].args:
                live[a] = True
    b = Builder(g.scheme)
    where: dict[int, int] = {}
    for i, n in enumerate(g.nodes):
        if live[i]:
            where[i] = b.add(n.op, [where[a] for a in n.args], dict(n.attrs), n.loc, merge=False)
    used = {v for n in b.nodes for _, v in n.attrs if isinstance(v, str) and v in g.consts}
    used |= {k for n in b.nodes for _, v in n.attrs if isinstance(v, tuple) for k in v
             if isinstance(k, str) and k in g.consts}
    b.consts = {k: a for k, a in g.consts.items() if k in used}
    return b.graph([where[i] for i in g.inputs], [where[o] for o in g.outputs])


def common_subexpressions(g: Graph) -> Graph:
    """Merge nodes that compute the same value (same op, operands and attributes), in one forward sweep;
    inputs are never merged (each has its own index attribute)."""
    return dead_code(rebuild(g, lambda b, i, n, args: b.add(n.op, args, dict(n.attrs), n.loc)))




# --------------------------------------------------------------------------------------------------
# JSON (exported circuits)
# --------------------------------------------------------------------------------------------------


def _attr_to_json(v):
    if isinstance(v, tuple):
        return {"t": [_attr_to_json(x) for x in v]}
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, (np.integer, np.floating)):
        return v.item()
    raise CircuitError(f"IR attribute {v!r} ({type(v).__name__}) cannot be written")


def _attr_from_json(v):
    if isinstance(v, dict):
        return tuple(_attr_from_json(x) for x in v["t"])
    return v


def graph_to_json(g: Graph) -> dict:
    """The graph as JSON-able data (constants as lists with dtype and shape)."""
    import base64

    return {
        "scheme": g.scheme,
        "nodes": [[n.op, list(n.args), [[k, _attr_to_json(v)] for k, v in n.attrs], n.loc] for n in g.nodes],
        "inputs": list(g.inputs), "outputs": list(g.outputs),
        "consts": {k: [a.dtype.str, list(a.shape), base64.b64encode(np.ascontiguousarray(a).tobytes()).decode()]
                   for k, a in g.consts.items()},
    }


def graph_from_json(d: dict) -> Graph:
    """Inverse of :func:`graph_to_json`; every constant's key is checked against its bytes."""
    import base64

    consts = {}
    for k, (dt, shape, data) in d["consts"].items():
        a = np.frombuffer(base64.b64decode(data), dtype=np.dtype(dt)).reshape(shape).copy()
        if const_key(a) != k:
            raise CircuitError(f"constant {k} does not match its data")
        consts[k] = a
    nodes = tuple(Node(op, tuple(args), tuple((k, _attr_from_json(v)) for k, v in attrs), loc)
                  for op, args, attrs, loc in d["nodes"])
    return Graph(d["scheme"], nodes, tuple(d["inputs"]), tuple(d["outputs"]), consts)


__all__ = ["Builder", "CircuitError", "Graph", "Node", "common_subexpressions", "const_key", "dead_code",
           "graph_from_json",
           "graph_to_json", "rebuild"]
