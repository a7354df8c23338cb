"""The passes every scheme shares, each a pure ``Graph, params -> Graph`` (the scheme-specific ones, level placement,
noise budgets, the TFHE analysis and deduplications, live with their scheme's lowering: :mod:`crossfhe.api.ckks_lower`,
``bfv_lower``, ``tfhe_lower``).

- :func:`cse`: equal values merged (the operands of the commutative ``add`` and ``mul`` ordered first), dead code
  dropped.
- :func:`dead_code`: what no output needs dropped (inputs stay, so argument positions hold).
- :func:`hoist_rotations`: rotations of one ciphertext by several offsets become one ``rotate_many {ks}`` (one
  decomposition and ModUp shared, :func:`crossfhe.core.evaluator.galois_hoisted`) and a ``pick {k}`` per offset
  (CKKS and BFV: the same key switching).
"""

from __future__ import annotations

from crossfhe.api import ir
from crossfhe.api.ir import Builder, Graph, Node

COMMUTATIVE = frozenset({"add", "mul"})


def cse(g: Graph, params=None) -> Graph:
    """Common subexpressions merged, commutative operands ordered, dead code dropped."""
    def visit(b: Builder, i: int, n: Node, args: list[int]) -> int:
        if n.op in COMMUTATIVE:
            args = sorted(args)
        return b.add(n.op, args, dict(n.attrs), n.loc)

    return ir.dead_code(ir.rebuild(g, visit))


def dead_code(g: Graph, params=None) -> Graph:
    """Nodes no output depends on dropped (:func:`crossfhe.api.ir.dead_code`)."""
    return ir.dead_code(g)


def hoist_rotations(g: Graph, params=None) -> Graph:
    """Rotations of one ciphertext by several offsets become one ``rotate_many {ks}`` and a ``pick {k}`` each."""
    groups: dict[int, set[int]] = {}
    for n in g.nodes:
        if n.op == "rotate":
            groups.setdefault(n.args[0], set()).add(n.attr("k"))

    def visit(b: Builder, i: int, n: Node, args: list[int]) -> int:
        if n.op == "rotate" and len(groups[n.args[0]]) > 1:
            many = b.add("rotate_many", args, {"ks": tuple(sorted(groups[n.args[0]]))}, n.loc)
            return b.add("pick", (many,), {"k": n.attr("k")}, n.loc)
        return b.add(n.op, args, dict(n.attrs), n.loc, merge=False)

    return ir.dead_code(ir.rebuild(g, visit))


__all__ = ["COMMUTATIVE", "cse", "dead_code", "hoist_rotations"]
