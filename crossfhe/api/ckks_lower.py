"""The CKKS primitives' rules and kernels: the passes that place relinearizations, rescales, level drops and
bootstraps, and the lowering onto :mod:`crossfhe.core.evaluator` with every key, plan and constant an argument.
The value class that records and runs them is :class:`crossfhe.api.ckks.EncryptedVector`.

Primitives (what the operators record): ``input``, ``add``, ``sub``, ``neg``, ``add_scalar {c}``,
``add_plain {const}``, ``mul`` (two ciphertexts), ``mul_scalar {c}`` (a real c), ``mul_int {c}``,
``mul_plain {const}``, ``rotate {k}``, ``conjugate``, ``bootstrap``, ``output {length, width, complex}``. The passes
add ``tensor`` (the degree-2 product, three polynomials), ``relin``, ``rescale``, ``drop {level}``,
``rotate_many {ks}`` and ``pick {k}``, and annotate every node with its ``level`` and ``scale``.

Semantics are those of :class:`crossfhe.EncryptedVector` (:mod:`crossfhe.api.vector`). The eager passes
(:meth:`CKKSScheme.eager_passes`) are its bookkeeping rules operation by operation: a product relinearized and
rescaled right away, operands brought to one level and scale. A compiled circuit's passes choose the levels for the
whole graph: a product is rescaled when a consumer needs it at the working scale (a sum of products is rescaled,
and relinearized, once), plaintext and scalar factors are encoded at the scale that makes a sum's operands agree
exactly, and an operation runs at the lowest level its consumers need.
"""

from __future__ import annotations

import math

import jax
import numpy as np

from crossfhe.api import ir
from crossfhe.api.circuit import RingScheme, key_switch_counts
from crossfhe.api.ir import Builder, CircuitError, Graph, Node
from crossfhe.api.passes import cse, hoist_rotations
from crossfhe.api.specs import CKKSVector
from crossfhe.api.trace import Trace
from crossfhe.ckks import bootstrap, encoder, presets
from crossfhe.ckks import ops as ckks_ops
from crossfhe.ckks.ciphertext import Ciphertext, EvaluationKeys
from crossfhe.ckks.params import Params
from crossfhe.core import evaluator as ev
from crossfhe.core import keyswitch as ks
from crossfhe.core import rlwe
from crossfhe.core.keys import SecretKey
from crossfhe.errors import KeyMismatchError, ParameterError
from crossfhe.kernels import as_kernel_set
from crossfhe.math.modular import add_mod, shoup_mul
from crossfhe.ring import poly
from crossfhe.ring.poly import Domain, RNSPoly

_ARRAYS = (np.ndarray, jax.Array, list, tuple)

# --------------------------------------------------------------------------------------------------
# Passes
# --------------------------------------------------------------------------------------------------

_PRODUCTS = {"tensor", "mul_scalar", "mul_plain"}
"""Ops whose result carries a scale factor a rescale should remove (pending)."""
_KEEP_PENDING = {"add", "sub", "neg", "add_scalar", "add_plain", "mul_int", "relin", "drop"}
"""Ops that take pending (and, except drop, degree-3) operands as they are."""


def sink_factors(g: Graph, params: Params) -> Graph:
    """c (a b) becomes (c a) b, the scalar or plaintext factor moved onto the shallower operand of a product used only
    there: the factor's level is then spent beside the deeper operand's, and the product needs one level less.
    Exact up to the factor's encoding (the same rounding either way)."""
    depth: list[int] = []
    for n in g.nodes:
        d = max((depth[a] for a in n.args), default=0)
        depth.append(d + (1 if n.op in ("mul", "mul_scalar", "mul_plain") else 0))
    uses = [len(u) for u in g.users()]

    def visit(b: Builder, i: int, n: Node, args: list[int]) -> int:
        m = g.nodes[n.args[0]] if n.args else None
        if n.op in ("mul_scalar", "mul_plain") and m.op == "mul" and uses[n.args[0]] == 1:
            x, y = m.args
            if depth[x] != depth[y]:
                low, high = (x, y) if depth[x] < depth[y] else (y, x)
                where = b.nodes[args[0]].args  # the product's operands in the new graph, in m's order
                new_low, new_high = (where[0], where[1]) if low == x else (where[1], where[0])
                f = b.add(n.op, (new_low,), dict(n.attrs), n.loc, merge=False)
                return b.add("mul", (f, new_high), dict(m.attrs), m.loc, merge=False)
        return b.add(n.op, args, dict(n.attrs), n.loc, merge=False)

    return ir.dead_code(ir.rebuild(g, visit))


def _pending_and_degree(g: Graph):
    """Per node: (pending, degree) as the placement passes see them, pending meaning a product not rescaled yet."""
    pend, deg = [], []
    for n in g.nodes:
        a = [(pend[x], deg[x]) for x in n.args]
        if n.op in _PRODUCTS:
            pend.append(True)
            deg.append(3 if n.op == "tensor" else 2)
        elif n.op in ("add", "sub"):
            pend.append(a[0][0] and a[1][0])
            deg.append(max(a[0][1], a[1][1]))
        elif n.op in _KEEP_PENDING:
            pend.append(a[0][0])
            deg.append(2 if n.op == "relin" else a[0][1])
        elif n.op == "rescale":
            pend.append(False)
            deg.append(2)
        else:
            pend.append(False)
            deg.append(2)
    return pend, deg


def relinearize(g: Graph, params: Params, *, lazy: bool = True) -> Graph:
    """``mul`` becomes ``tensor`` (three polynomials) and a ``relin`` placed right after it, or (``lazy``) only
    where a consumer needs two polynomials: a rotation, another product, a rescale (a pending product added to a
    rescaled value) or an output. A sum of k products is then relinearized once instead of k times."""
    src_pend, _ = _pending_and_degree(_as_tensors(g))
    b = Builder(g.scheme, g.consts)
    where: list[int] = []
    three: set[int] = set()  # new nodes holding three polynomials
    relined: dict[int, int] = {}

    def two(v: int, loc: str) -> int:  # node v with two polynomials
        if v not in three:
            return v
        if v not in relined:
            relined[v] = b.add("relin", (v,), {}, loc)
        return relined[v]

    uses = [len(u) for u in g.users()]
    for i, n in enumerate(g.nodes):
        if n.op == "mul":
            v = b.add("tensor", tuple(two(where[a], n.loc) for a in n.args), {}, n.loc)
            three.add(v)
            # a product used twice is relinearized once, where it is made
            where.append(v if lazy and uses[i] == 1 else two(v, n.loc))
            continue
        if n.op in ("add", "sub"):
            mixed = src_pend[n.args[0]] != src_pend[n.args[1]]  # the pending one is rescaled first: two polys
            args = [two(where[a], n.loc) if mixed and src_pend[a] else where[a] for a in n.args]
        elif n.op in _KEEP_PENDING:
            args = [where[a] for a in n.args]
        else:
            args = [two(where[a], n.loc) for a in n.args]
        v = b.add(n.op, args, dict(n.attrs), n.loc)
        if n.op in _KEEP_PENDING and any(a in three for a in args):
            three.add(v)
            if uses[i] > 1:
                v = two(v, n.loc)
        where.append(v)
    return ir.dead_code(b.graph([where[i] for i in g.inputs], [where[o] for o in g.outputs]))


def _as_tensors(g: Graph) -> Graph:
    """g with ``mul`` renamed ``tensor`` (for the pending analysis before relinearization is placed)."""
    return Graph(g.scheme, tuple(Node("tensor", n.args, n.attrs, n.loc) if n.op == "mul" else n for n in g.nodes),
                 g.inputs, g.outputs, g.consts)


def multiplicative_depth(g: Graph) -> int:
    """The largest number of products (with a ciphertext, a non-integer scalar or a plaintext) on a path from an
    input to an output: the levels the circuit consumes when nothing else costs one."""
    depth = []
    for n in g.nodes:
        d = max((depth[a] for a in n.args), default=0)
        depth.append(d + (1 if n.op in ("mul", "tensor", "mul_scalar", "mul_plain") else 0))
    return max((depth[o] for o in g.outputs), default=0)


def place_levels(g: Graph, params: Params, *, lazy: bool = True, bootstrap: bool | None = None) -> Graph:
    """Rescales, level drops and scale alignment; every node annotated with its ``level`` and ``scale``.

    - A pending product is rescaled where a consumer needs the working scale (``lazy``) or right after it; a
      rescale of three polynomials is preceded by their relinearization.
    - Operands of a sum are brought to one level by dropping primes from the higher one (exact, free). Where their
      scales differ by more than 2^-20 relatively, a plaintext or scalar factor feeding one of them (used once) is
      re-encoded so that the scales agree exactly; otherwise both are rescaled if pending, and the higher one is
      multiplied by round(s_y q / s_x) and rescaled (one level), as :func:`crossfhe.ckks.ops.add` does.
    - Every level-preserving operation runs at the lowest level its consumers need (inputs are encrypted there):
      the cheapest modulus dropping; outputs keep the level the products leave them at.

    - An input with a ``scale`` attribute is a concrete operand (an eager value, :mod:`crossfhe.api.eager`): it sits
      at its ``level`` and ``scale``, never lower.
    - Where a product would need a level below 0, the operand is bootstrapped back to the top user level when
      ``bootstrap`` (default: the parameters reserve bootstrapping levels) holds.

    A fixpoint of forward passes: each pass finds every factor to re-encode and every operation that can run lower;
    the next one applies them. Raises CircuitError naming the operation, its line, the depth the expression needs and
    the presets that fit when the depth runs out.
    """
    bootstrap = bool(params.bootstrap_levels) if bootstrap is None else bootstrap
    hints: dict[int, float] = {}
    run_at: dict[int, int] = {}
    for _ in range(4 * len(g.nodes) + 8):
        out, made, new_hints = _levels_forward(g, params, hints, run_at, lazy, bootstrap)
        if new_hints:
            hints.update(new_hints)
            continue
        need = _needed_levels(out)
        changed = False
        for i, n in enumerate(g.nodes):
            v = made[i]
            if n.op in ("rescale", "output") or v is None or need[v] >= out.nodes[v].attr("level"):
                continue
            if n.op == "input" and n.attr("scale") is not None:
                continue
            if run_at.get(i, math.inf) > need[v]:
                run_at[i] = need[v]
                changed = True
        if not changed:
            return ir.dead_code(out)
    raise CircuitError("internal: level placement did not converge")


def _levels_forward(g: Graph, params: Params, hints: dict, run_at: dict, lazy: bool, bootstrap: bool):
    """One forward pass of :func:`place_levels`: (the annotated graph, the node each old node made before any
    eager rescale, the factor scales still to apply {old node: scale}; when not empty, the graph is discarded)."""
    b = Builder(g.scheme, g.consts)
    info: list[tuple[int, float, bool, int]] = []  # per new node: (level, scale, pending, polynomials)
    where: list[int | None] = []
    made: list[int | None] = []
    new_hints: dict[int, float] = {}
    uses = [len(u) for u in g.users()]
    # new node -> (the old scalar/plaintext factor nodes that set its scale, the primes rescaled since): a value
    # made only of single-use factor products, whose factors can be re-encoded to put it on another scale
    origin: dict[int, tuple[frozenset, float]] = {}
    top = params.user_levels

    def emit(op, args, attrs, loc, level, scale, pending, polys=2) -> int:
        attrs = dict(attrs)
        attrs.update(level=level, scale=scale)
        v = b.add(op, args, attrs, loc)
        while len(info) < len(b.nodes):
            info.append((level, scale, pending, polys))
        return v

    def rescale(v: int, loc: str) -> int:
        level, scale, _, polys = info[v]
        if level == 0:
            raise _depth_error(g, params, loc)
        src = origin.get(v)
        if polys == 3:
            v = emit("relin", (v,), {}, loc, level, scale, True)
        q = math.prod(params.rescale_primes(level))
        r = emit("rescale", (v,), {}, loc, level - 1, scale / q, False)
        if src is not None:
            origin[r] = (src[0], src[1] * q)
        return r

    def settled(v: int, loc: str) -> int:
        return rescale(v, loc) if info[v][2] else v

    def refreshed(v: int, loc: str) -> int:
        """v (settled) bootstrapped back to the top user level when it sits at level 0 and the parameters can
        bootstrap: a product there would need a level below 0."""
        if info[v][0] or not bootstrap:
            return v
        return emit("bootstrap", (v,), {}, loc, params.user_levels, info[v][1], False)

    def drop(v: int, level: int, loc: str) -> int:
        lv, scale, pending, polys = info[v]
        if level >= lv:
            return v
        d = emit("drop", (v,), {"to": level}, loc, level, scale, pending, polys)
        if v in origin:
            origin[d] = origin[v]
        return d

    def at(i: int, level: int) -> int:
        return min(level, run_at.get(i, level))

    def follow(i: int, v: int, *sources) -> None:
        """Old node i made v from ``sources`` (new nodes): v keeps their factors if i is used once and all have."""
        got = [origin.get(x) for x in sources]
        if uses[i] == 1 and got and all(o is not None and o[1] == got[0][1] for o in got):
            origin[v] = (frozenset().union(*(o[0] for o in got)), got[0][1])

    for i, n in enumerate(g.nodes):
        args = [where[a] for a in n.args]
        loc = n.loc
        v = None
        if n.op == "input":
            if n.attr("scale") is not None:  # a concrete operand, where it is
                v = emit("input", (), dict(n.attrs), loc, n.attr("level"), n.attr("scale"), False)
            else:
                v = emit("input", (), dict(n.attrs), loc, at(i, top), params.scale, False)
        elif n.op in ("add", "sub"):
            x, y = args
            if info[x][2] != info[y][2]:
                x, y = settled(x, loc), settled(y, loc)
            aligned = _close(info[x][1], info[y][1])
            if not aligned:
                for mine, other in ((y, x), (x, y)):
                    if mine in origin:
                        factors, mult = origin[mine]
                        for o in factors:
                            if not math.isclose(hints.get(o, 0.0), info[other][1] * mult, rel_tol=1e-12):
                                new_hints[o] = info[other][1] * mult
                        aligned = True  # this pass is discarded when a hint is new; the next one has it
                        break
            if not aligned:
                x, y = settled(x, loc), settled(y, loc)
                if not _close(info[x][1], info[y][1]):
                    x, y = _align(x, y, info, emit, rescale, drop, params, loc, g)
            lvl = at(i, min(info[x][0], info[y][0]))
            x, y = drop(x, lvl, loc), drop(y, lvl, loc)
            level, scale, pending, _ = info[x]
            v = emit(n.op, (x, y), {}, loc, level, scale, pending, max(info[x][3], info[y][3]))
            follow(i, v, x, y)
        elif n.op == "relin" and info[args[0]][3] == 2:  # already relinearized here (before a rescale it needed)
            v = args[0]
        elif n.op in ("neg", "relin"):
            x = drop(args[0], at(i, info[args[0]][0]), loc)
            level, scale, pending, polys = info[x]
            v = emit(n.op, (x,), {}, loc, level, scale, pending, 2 if n.op == "relin" else polys)
            follow(i, v, x)
        elif n.op in ("add_scalar", "add_plain", "mul_int"):
            x = drop(args[0], at(i, info[args[0]][0]), loc)
            level, scale, pending, polys = info[x]
            v = emit(n.op, (x,), dict(n.attrs), loc, level, scale, pending, polys)
            if n.op != "mul_int":
                follow(i, v, x)
            if n.op == "add_scalar":
                _check_constant(params, abs(n.attr("c")), scale, level, n)
        elif n.op in ("mul_scalar", "mul_plain"):
            x = refreshed(settled(args[0], loc), loc)
            x = drop(x, at(i, info[x][0]), loc)
            level, scale, _, _ = info[x]
            if level == 0:
                raise _depth_error(g, params, loc)
            factor = hints[i] / scale if i in hints else math.prod(params.rescale_primes(level))
            v = emit(n.op, (x,), dict(n.attrs, factor=factor), loc, level, scale * factor, True)
            _check_product(params, scale * factor, level, n)
            if uses[i] == 1:
                origin[v] = (frozenset({i}), 1.0)
        elif n.op == "tensor":
            x, y = (settled(a, loc) for a in args)
            if min(info[x][0], info[y][0]) == 0:
                x = refreshed(x, loc)
                y = x if args[0] == args[1] else refreshed(y, loc)
            lvl = at(i, min(info[x][0], info[y][0]))
            if lvl == 0:  # its rescale, needed before any use, would go below level 0
                raise _depth_error(g, params, loc)
            x, y = drop(x, lvl, loc), drop(y, lvl, loc)
            scale = info[x][1] * info[y][1]
            _check_product(params, scale, lvl, n)
            v = emit("tensor", (x, y), {}, loc, lvl, scale, True, 3)
        elif n.op == "bootstrap":
            if not bootstrap:
                raise CircuitError(f"bootstrap at {loc}: these keys cannot bootstrap; use a bootstrappable preset ("
                                   f"{', '.join(presets.BOOTSTRAP)}) with bootstrapping keys (CKKSContext.create("
                                   "params, bootstrap=True); a compiled circuit's keygen() makes them)")
            x = settled(args[0], loc)
            v = emit("bootstrap", (x,), dict(n.attrs), loc, params.user_levels, info[x][1], False)
        elif n.op in ("rotate", "rotate_many", "conjugate", "output"):
            x = settled(args[0], loc)
            x = drop(x, at(i, info[x][0]), loc)
            level, scale, _, _ = info[x]
            v = emit(n.op, (x,), dict(n.attrs), loc, level, scale, False)
        elif n.op == "pick":
            level, scale, _, _ = info[args[0]]
            v = emit("pick", tuple(args), dict(n.attrs), loc, level, scale, False)
        else:
            raise CircuitError(f"internal: the level pass does not know the op {n.op!r}")
        made.append(v)
        eager = not lazy and (n.op in ("mul_scalar", "mul_plain") or (n.op == "relin" and info[v][2]))
        where.append(rescale(v, loc) if eager else v)
    return b.graph([where[i] for i in g.inputs], [where[o] for o in g.outputs]), made, new_hints


def _close(a: float, b: float) -> bool:
    return abs(a / b - 1.0) <= ckks_ops.SCALE_TOLERANCE


def _align(x, y, info, emit, rescale, drop, params, loc, g):
    """Two operands at one level whose scales differ: the higher (or x, at equal levels) multiplied by
    round(s_y q / s_x) and rescaled by q, the prime(s) of the level above the target (one level)."""
    swap = info[y][0] > info[x][0]
    a, c = (y, x) if swap else (x, y)
    target = info[c][0] if info[a][0] > info[c][0] else info[c][0] - 1
    if target < 0:
        raise _depth_error(g, params, loc)
    a = drop(a, target + 1, loc)
    q = math.prod(params.rescale_primes(target + 1))
    k = round(info[c][1] * q / info[a][1])
    level, scale, pending, _ = info[a]
    a = emit("mul_int", (a,), {"c": k}, loc, level, scale * k, pending, info[a][3])
    a = rescale(a, loc)
    c = drop(c, target, loc)
    if not _close(info[a][1], info[c][1]):  # k too small to carry the ratio: the alignment would lose precision
        raise CircuitError(f"add at {loc}: the operands' scales 2^{math.log2(info[a][1]):.4f} and "
                           f"2^{math.log2(info[c][1]):.4f} cannot be aligned exactly; rescale one side differently")
    return (c, a) if swap else (a, c)


def _check_product(params: Params, scale: float, level: int, n: Node) -> None:
    log_q = sum(math.log2(q) for q in params.moduli_at(level))
    if math.log2(scale) + 1 >= log_q:
        raise CircuitError(f"{n.op} at {n.loc}: a product at scale 2^{math.log2(scale):.1f} would overflow the modulus "
                           f"at level {level} (log2 Q = {log_q:.1f})")


def _check_constant(params: Params, c: float, scale: float, level: int, n: Node) -> None:
    log_q = sum(math.log2(q) for q in params.moduli_at(level))
    if c and math.log2(c) + math.log2(scale) + 1 >= log_q:
        raise CircuitError(f"{n.op} at {n.loc}: the constant {c!r} at scale 2^{math.log2(scale):.1f} would overflow "
                           f"the modulus at level {level} (log2 Q = {log_q:.1f}); scale it down or divide the values "
                           "first")


def expression_depth(g: Graph, params: Params) -> int:
    """:func:`multiplicative_depth`, with the levels a concrete operand (an input with a fixed ``scale``, an eager
    value) has already used counted from the top user level: the depth the whole expression needs."""
    depth = []
    for n in g.nodes:
        if n.op == "input" and n.attr("scale") is not None:
            d = max(0, params.user_levels - n.attr("level"))
        else:
            d = max((depth[a] for a in n.args), default=0)
        depth.append(d + (1 if n.op in ("mul", "tensor", "mul_scalar", "mul_plain") else 0))
    return max((depth[o] for o in g.outputs), default=0)


def _depth_error(g: Graph, params: Params, loc: str) -> CircuitError:
    depth = expression_depth(g, params)
    name = presets.name_of(params) or "these parameters"
    fits = [f"{k} ({p.levels})" for k, p in presets.SECURE.items() if p.levels >= depth]
    options = (f"presets with that depth: {', '.join(fits)}; or" if fits else "no secure preset has that depth "
               "without bootstrapping:")
    verb = "have" if name == "these parameters" else "has"
    return CircuitError(
        f"depth exhausted at {loc}: the expression needs multiplicative depth {depth}, {name} {verb} "
        f"{params.user_levels} levels; {options} a bootstrappable preset ({', '.join(presets.BOOTSTRAP)}), where "
        "compiled circuits bootstrap when their levels run out, and so do values of a context made with "
        "CKKSContext.create(params, bootstrap=True) (or call x.bootstrap() yourself)")


def _needed_levels(g: Graph) -> list[int]:
    """Per node, the highest level any consumer needs it at (outputs: their own level)."""
    need = [-1] * len(g.nodes)
    for o in g.outputs:
        need[o] = max(need[o], g.nodes[o].attr("level"))
    for i in range(len(g.nodes) - 1, -1, -1):
        n = g.nodes[i]
        if need[i] < 0:
            need[i] = n.attr("level") if n.op == "output" else 0
        consume = need[i] + 1 if n.op == "rescale" else need[i]
        if n.op == "drop":
            consume = n.attr("to")
        if n.op == "bootstrap":
            consume = 0
        for a in n.args:
            need[a] = max(need[a], min(consume, g.nodes[a].attr("level")))
    return need


def _bounds(g: Graph, params: Params) -> Graph:
    """The graph unchanged, after :func:`check_bootstrap_bounds` (every bootstrap, asked for or placed, of a value
    bounded by 1; CircuitError otherwise)."""
    check_bootstrap_bounds(g, error=CircuitError)
    return g


def levels(g: Graph, params: Params) -> Graph:
    """:func:`place_levels` with lazy rescaling."""
    return place_levels(g, params, lazy=True)


def _eager_relin(g: Graph, params: Params) -> Graph:
    return relinearize(g, params, lazy=False)


def _eager_levels(g: Graph, params: Params) -> Graph:
    return place_levels(g, params, lazy=False)


# --------------------------------------------------------------------------------------------------
# Costs
# --------------------------------------------------------------------------------------------------


def _keyswitch_ntts(params: Params, limbs: int) -> tuple[int, int]:
    """(ModUp, ModDown) limb transforms of one key switch at ``limbs`` active limbs
    (:func:`~crossfhe.core.keyswitch.transform_counts`)."""
    return ks.transform_counts(len(params.q), len(params.p), params.dnum, limbs)


def cost(g: Graph, params: Params, annotated: bool = True) -> dict:
    """Operation counts: ``key_switches`` (relinearizations + rotations), ``modups`` (hoisted rotations share
    one), ``rescales``, ``tensor_products``, ``plain_products``, ``additions``, ``ntt_limbs`` (limb transforms,
    annotated graphs only), ``bootstraps`` (a precise one counts twice: two iterations) and ``depth`` (multiplicative
    depth; annotated: levels consumed from the top)."""
    c = g.counts()
    out = {
        **key_switch_counts(g, c["relin"] + (c["mul"] if "tensor" not in c else 0), ("rotate", "conjugate")),
        "rescales": c["rescale"],
        "tensor_products": c["tensor"] + c["mul"],
        "plain_products": c["mul_plain"] + c["mul_scalar"] + c["mul_int"],
        "additions": c["add"] + c["sub"] + c["add_plain"] + c["add_scalar"],
        "bootstraps": sum(2 if n.attr("precise") else 1 for n in g.nodes if n.op == "bootstrap"),
        "depth": multiplicative_depth(g),
    }
    if annotated and all(n.attr("level") is not None for n in g.nodes):
        ntts = 0
        for n in g.nodes:
            limbs = len(params.moduli_at(n.attr("level"))) if n.op != "rescale" else None
            if n.op in ("relin", "rotate", "conjugate"):
                up, down = _keyswitch_ntts(params, limbs)
                ntts += up + down
            elif n.op == "rotate_many":
                up, down = _keyswitch_ntts(params, limbs)
                ntts += up + down * len(n.attr("ks"))
            elif n.op == "rescale":
                ntts += 2 * len(params.moduli_at(g.nodes[n.args[0]].attr("level")))
        out["ntt_limbs"] = ntts
        top = max(n.attr("level") for n in g.nodes)
        out["depth"] = params.levels - min(g.nodes[o].attr("level") for o in g.outputs)
        out["input_level"] = top
    return out


# --------------------------------------------------------------------------------------------------
# Lowering
# --------------------------------------------------------------------------------------------------


def _limbs(params: Params, level: int) -> int:
    return len(params.moduli_at(level))


def _poly(params: Params, level: int, data) -> RNSPoly:
    return RNSPoly(data, params.moduli_at(level), Domain.EVAL)


def _evaluation(keys):
    """The EvaluationKeys of ``keys`` (bootstrapping keys hold them)."""
    return keys.evaluation if isinstance(keys, bootstrap.Keys) else keys


def _rotations(g: Graph) -> set[int]:
    """The rotation amounts of ``g``'s rotate and rotate_many nodes."""
    out = set()
    for n in g.nodes:
        if n.op == "rotate":
            out.add(n.attr("k"))
        elif n.op == "rotate_many":
            out.update(n.attr("ks"))
    return out


def _galois_elements(g: Graph, params: Params) -> list[int]:
    out = {ckks_ops.rotation_element(params, k) for k in _rotations(g)}
    if any(n.op == "conjugate" for n in g.nodes):
        out.add(ckks_ops.conjugation_element(params))
    return sorted(out)


def bootstrap_width(g: Graph, params: Params) -> int:
    """A bound on the width (the power-of-two period of the slots) of every value ``g`` bootstraps, 0 if it
    bootstraps none: an input's width is its spec's, an operation's at most the largest of its operands' and of its
    plaintext constant's length (N/2 for a constant of another length). The bootstrapping keys must serve it
    (:func:`crossfhe.ckks.bootstrap.slots_for`): a sparse bootstrap of a wider value would drop its other slots."""
    widths: list[int] = []
    out = 0
    for n in g.nodes:
        if n.op == "input":
            w = int(n.attr("width") or params.slots)
        else:
            w = max((widths[a] for a in n.args), default=params.slots)
            if n.attr("const") is not None:
                c = len(np.asarray(g.const(n.attr("const"))).reshape(-1))
                w = max(w, c if c and not c & (c - 1) else params.slots)
        widths.append(w)
        if n.op == "bootstrap":
            out = max(out, widths[n.args[0]])
    return out


def _check_bootstrap_width(g: Graph, params: Params, keys) -> None:
    """ParameterError where ``keys`` (bootstrapping keys) were made for fewer slots than a value ``g`` bootstraps."""
    width = bootstrap_width(g, params)
    slots = keys.config.slots
    if width > slots:
        raise ParameterError(
            f"this bootstraps a vector of width {width} (its values repeat every {width} slots), but the "
            f"bootstrapping keys serve vectors of up to {slots} values: make them with CKKSContext.create(params, "
            f"bootstrap_length={width}) or without bootstrap_length (every vector), or with circuit.keygen()")


BOOTSTRAP_BOUND = 1.0
"""Bootstrapping keeps values with |x| <= BOOTSTRAP_BOUND (:mod:`crossfhe.ckks.bootstrap`: larger ones wrap around,
silently, so a value whose tracked bound exceeds it is refused before any work)."""

BOUND_SLACK = 2.0**-20
"""Relative slack on bound checks: a bound computed in floating point (0.1 times 10) may pass 1 by a rounding."""


def _largest(values) -> float:
    v = np.asarray(values)
    return float(np.max(np.abs(v))) if v.size else 0.0


def _times(a: float, b: float) -> float:
    return 0.0 if a == 0 or b == 0 else a * b  # 0 times an unknown (infinite) bound is 0


def bound_rule(op: str, attrs: dict, args: list[float], const=None) -> float:
    """A bound on max |value| over the slots of ``op``'s result (the modulus for complex values) from its operands'
    bounds ``args``: a sum by the sum of the bounds, a product by their product, a scalar or plaintext operand by
    its largest magnitude (``const``: the plaintext operand of add_plain and mul_plain), and a rotation, the
    conjugate, a relinearization, a rescale, a level drop and a bootstrap keep it (a bootstrap with a ``bound``
    attribute, declared by its caller, gives the smaller of the two). Interval arithmetic: a bound,
    not the maximum (x - x is bounded by 2 max |x|); CKKS's approximation error is left out (it is far below
    :data:`BOUND_SLACK` of any value). math.inf for an unknown bound."""
    if op in ("add", "sub"):
        return args[0] + args[1]
    if op in ("mul", "tensor"):
        return _times(args[0], args[1])
    if op == "add_scalar":
        return args[0] + abs(attrs["c"])
    if op in ("mul_scalar", "mul_int"):
        return _times(args[0], abs(attrs["c"]))
    if op == "add_plain":
        return args[0] + _largest(const)
    if op == "mul_plain":
        return _times(args[0], _largest(const))
    if op == "bootstrap" and attrs.get("bound") is not None:  # the bound its caller declared (it knows more)
        return min(args[0], float(attrs["bound"]))
    if op in ("neg", "rotate", "rotate_many", "pick", "conjugate", "relin", "rescale", "drop", "bootstrap",
              "output"):
        return args[0]
    return math.inf


def value_bounds(g: Graph, inputs: list[float] | None = None) -> list[float]:
    """:func:`bound_rule` over ``g``: per node, a bound on max |value|. An input's bound is ``inputs[index]`` where
    given (an eager operand's own), else its ``bound`` attribute (a circuit input's declared
    :class:`~crossfhe.api.specs.CKKSVector` bound), else :data:`BOOTSTRAP_BOUND` (undeclared inputs of a circuit
    are taken to lie in [-1, 1]; :meth:`CKKSScheme.encrypt_input` refuses values that do not)."""
    out: list[float] = []
    for n in g.nodes:
        if n.op == "input":
            if inputs is not None:
                b = inputs[n.attr("index")]
            else:
                b = n.attr("bound")
                b = BOOTSTRAP_BOUND if b is None else b
        else:
            const = g.const(n.attr("const")) if n.attr("const") is not None else None
            b = bound_rule(n.op, dict(n.attrs), [out[a] for a in n.args], const)
        out.append(float(b))
    return out


def value_complex(g: Graph) -> list[bool]:
    """Per node, whether its value may hold complex values: an input's ``complex`` attribute (a circuit input's
    :class:`~crossfhe.api.specs.CKKSVector` ``complex``, an eager operand's own; absent: True), an operation's when
    an operand's is or its scalar or plaintext constant has a complex type. A real value's imaginary parts are noise
    only, and its bootstrap runs EvalMod once (:func:`crossfhe.ckks.bootstrap.bootstrap` ``real``)."""
    out: list[bool] = []
    for n in g.nodes:
        if n.op == "input":
            cx = n.attr("complex")
            out.append(True if cx is None else bool(cx))
            continue
        cx = any(out[a] for a in n.args)
        if n.attr("c") is not None and np.iscomplexobj(n.attr("c")):
            cx = True
        if n.attr("const") is not None and np.iscomplexobj(g.const(n.attr("const"))):
            cx = True
        out.append(cx)
    return out


def check_bootstrap_bounds(g: Graph, inputs: list[float] | None = None, *, error=ParameterError) -> None:
    """``error`` (ParameterError, CircuitError for a circuit) where ``g`` bootstraps a value whose bound
    (:func:`value_bounds`, ``inputs`` as there) exceeds :data:`BOOTSTRAP_BOUND`: its bootstrap would wrap it."""
    bounds = None
    for n in g.nodes:
        if n.op != "bootstrap":
            continue
        bounds = value_bounds(g, inputs) if bounds is None else bounds
        b = bounds[n.args[0]] if n.attr("bound") is None else min(bounds[n.args[0]], n.attr("bound"))
        if b <= BOOTSTRAP_BOUND * (1 + BOUND_SLACK):
            continue
        fix = ("if you know its values are smaller, declare it: x.with_bound(b) for a vector, CKKSVector(n, "
               "bound=b) for a circuit's input")
        if math.isinf(b):
            raise error(f"bootstrap at {n.loc}: the value's bound is unknown (computed from a vector loaded from a "
                        f"blob written before bounds were kept), and bootstrapping keeps only values with |x| <= "
                        f"{BOOTSTRAP_BOUND:g} (larger ones wrap around); {fix}")
        scale = 2.0 ** math.ceil(math.log2(b / BOOTSTRAP_BOUND))
        raise error(f"bootstrap at {n.loc}: the value may reach {b:.6g} in magnitude (the bound tracked "
                    f"from its inputs' bounds through each operation), and bootstrapping keeps only values with |x| "
                    f"<= {BOOTSTRAP_BOUND:g} (larger ones wrap around: 1.5 would come back near 1.49, 4 near 3): "
                    f"scale it into [-1, 1] first (x * {1 / scale:g}, a level) and back after (* {scale:g}, no "
                    f"level; it costs log2 {scale:g} bits), or, {fix}")


def runtime(g: Graph, params: Params, keys: EvaluationKeys, *, one_program: bool = True) -> dict:
    """The program's arguments besides the inputs: the keys it uses, a key-switch plan per level it switches at,
    rescale tables per level (made here, once per key set) and the per-node constants and keys
    (:func:`constants`); where ``g`` bootstraps and runs as ``one_program``, each bootstrap's tables
    (:func:`_bootstrap_tables`; without them :func:`interpret` bootstraps operation by operation). ParameterError
    where the bootstrapping keys do not serve a value's width."""
    out = {"galois": {}, "ks": {}, "rescale": {}}
    if any(n.op == "bootstrap" for n in g.nodes):
        if isinstance(keys, bootstrap.Keys):
            _check_bootstrap_width(g, params, keys)
        out["bootstrap"] = keys
        if one_program:
            out["bootstrap_tables"] = _bootstrap_tables(g, params, keys)
    evaluation = _evaluation(keys)
    if any(n.op == "relin" for n in g.nodes):
        out["relin"] = evaluation.relin
    for n in g.nodes:
        if n.op == "rotate_many":
            for k in n.attr("ks"):
                e = ckks_ops.rotation_element(params, k)
                out["galois"][str(e)] = evaluation.galois_key(e)
    for n in g.nodes:
        level = n.attr("level")
        if n.op in ("relin", "rotate", "rotate_many", "conjugate"):
            limbs = _limbs(params, level)
            if str(limbs) not in out["ks"]:
                out["ks"][str(limbs)] = ks.keyswitch_plan(evaluation.relin, active=limbs, kernels=params.kernels)
        elif n.op == "rescale":
            src = g.nodes[n.args[0]].attr("level")
            if str(src) not in out["rescale"]:
                out["rescale"][str(src)] = ckks_ops.rescale_plan(params, src)
    out["consts"] = constants(g, params, keys)
    return out


def _bootstrap_form(g: Graph, n: Node, cx: dict) -> tuple[int, bool, bool]:
    """What a bootstrap node's tables depend on: its input's level, whether it is real, whether precise."""
    return g.nodes[n.args[0]].attr("level"), not cx[n.args[0]], bool(n.attr("precise"))


def _bootstrap_key(g: Graph, n: Node, cx: dict) -> str:
    """The key of a bootstrap node's tables in the runtime (:func:`_bootstrap_form` as a string)."""
    return "/".join(str(int(v)) for v in _bootstrap_form(g, n, cx))


def _bootstrap_tables(g: Graph, params: Params, keys) -> dict:
    """The tables of each distinct bootstrap of ``g`` (:func:`crossfhe.ckks.bootstrap.program_tables`), by
    :func:`_bootstrap_key`; empty where ``keys`` are not bootstrapping keys (:func:`check_keys` refuses them)."""
    if not isinstance(keys, bootstrap.Keys):
        return {}
    cx, out = value_complex(g), {}
    for n in g.nodes:
        if n.op == "bootstrap":
            key = _bootstrap_key(g, n, cx)
            if key not in out:
                level, real, precise = _bootstrap_form(g, n, cx)
                zero = _poly(params, level, np.zeros((len(params.moduli_at(level)), params.n), np.uint32))
                ct = Ciphertext(zero, zero, params, params.scale, keys.key_id)
                out[key] = bootstrap.program_tables(ct, keys, real=real, precise=precise)
    return out


def _check_scalar(params: Params, c: float, scale: float, level: int, n: Node) -> None:
    """Refuse a product by the scalar c whose unit message, at the product's ``scale`` and times |c|, would reach Q/2
    at ``level``: it, and everything after it, would wrap."""
    log_q = sum(math.log2(q) for q in params.moduli_at(level))
    need = math.log2(scale) + math.log2(max(1.0, abs(c)))
    if need + 1 >= log_q:
        raise ParameterError(
            f"{n.op} at {n.loc}: multiplying by {c!r} would overflow the modulus at level {level}: a unit message at "
            f"scale 2^{math.log2(scale):.1f} times |c| = 2^{math.log2(max(1.0, abs(c))):.1f} needs 2^{need + 1:.1f} > "
            f"Q (log2 Q = {log_q:.1f}); multiply by a smaller number")


def constants(g: Graph, params: Params, keys=None) -> dict:
    """Each constant of the annotated graph as its node reads it, by node index: a scalar added as the residues of
    round(c scale) [limbs, 1]; an integer (or a real c encoded as round(c factor)) as Shoup words; a plaintext vector
    encoded at its operand's level and scale (added) or at ``factor`` (multiplied); a rotation or conjugation its
    Galois element (a uint32 word: one program serves every rotation of a level) and its key from ``keys``. Every
    constant is checked: its encoding within Q/2 with the fresh-noise margin, a product by it within Q/2
    (ParameterError)."""
    out = {}
    margin = rlwe.fresh_noise_bound(params.n)
    for i, n in enumerate(g.nodes):
        level = n.attr("level")
        if n.op in ("rotate", "conjugate"):
            e = (ckks_ops.rotation_element(params, n.attr("k")) if n.op == "rotate"
                 else ckks_ops.conjugation_element(params))
            out[str(i)] = (ev.word(e), None if keys is None else _evaluation(keys).galois_key(e))
        elif n.op == "add_scalar":
            moduli = params.moduli_at(level)
            w = encoder.encode_scalar_constant(n.attr("c"), moduli=moduli, scale=n.attr("scale"), margin=margin,
                                               what="add_scalar")
            out[str(i)] = np.asarray(w, dtype=np.uint32).reshape(-1, 1)
        elif n.op in ("mul_int", "mul_scalar"):
            src = g.nodes[n.args[0]]
            if n.op == "mul_int":
                c = n.attr("c")
                _check_scalar(params, c, src.attr("scale"), src.attr("level"), n)
            else:
                _check_scalar(params, n.attr("c"), n.attr("scale"), src.attr("level"), n)
                c = round(n.attr("c") * n.attr("factor"))
            out[str(i)] = ev.integer_words(int(c), params.moduli_at(src.attr("level")))
        elif n.op in ("add_plain", "mul_plain"):
            src = g.nodes[n.args[0]]
            scale = src.attr("scale") if n.op == "add_plain" else n.attr("factor")
            pt = ckks_ops.encode(params, g.const(n.attr("const")), level=src.attr("level"), scale=scale)
            out[str(i)] = pt.poly.data
    return out


def interpret(g: Graph, params: Params, inputs, rt) -> list:
    """The annotated graph on one item: ``inputs`` a tuple of (c0, c1) data per input; returns (c0, c1) data per
    output. Every operation is the evaluator's (one program under the caller's jit)."""
    vals: list = []
    cx = value_complex(g) if any(n.op == "bootstrap" for n in g.nodes) else None
    for i, n in enumerate(g.nodes):
        level = n.attr("level")
        a = [vals[x] for x in n.args]
        if n.op == "input":
            c0, c1 = inputs[g.inputs.index(i)]
            vals.append((_poly(params, level, c0), _poly(params, level, c1)))
        elif n.op == "drop":
            vals.append(tuple(ev.cut(p, _limbs(params, level)) for p in a[0]))
        elif n.op in ("add", "sub"):
            x, y = a
            f = poly.add if n.op == "add" else poly.sub
            m = max(len(x), len(y))
            x = x + (None,) * (m - len(x))
            y = y + (None,) * (m - len(y))
            vals.append(tuple(p if q is None else (q if p is None and n.op == "add" else
                                                   poly.neg(q) if p is None else f(p, q)) for p, q in zip(x, y)))
        elif n.op == "neg":
            vals.append(tuple(poly.neg(p) for p in a[0]))
        elif n.op == "add_scalar":
            x = a[0]
            q = poly.modulus_table(x[0].basis).q
            vals.append((x[0]._replace(add_mod(x[0].data, rt["consts"][str(i)], q)),) + x[1:])
        elif n.op == "add_plain":
            x = a[0]
            vals.append((poly.add(x[0], _poly(params, level, rt["consts"][str(i)])),) + x[1:])
        elif n.op in ("mul_int", "mul_scalar"):
            w, ws = rt["consts"][str(i)]
            q = poly.modulus_table(a[0][0].basis).q
            vals.append(tuple(p._replace(shoup_mul(p.data, w, ws, q)) for p in a[0]))
        elif n.op == "mul_plain":
            m = _poly(params, level, rt["consts"][str(i)])
            vals.append(tuple(poly.mul(p, m) for p in a[0]))
        elif n.op == "tensor":
            vals.append(ev.tensor(*a[0], *a[1]))
        elif n.op == "relin":
            plan = rt["ks"][str(_limbs(params, level))]
            vals.append(ev.relinearize_traced(*a[0], rt["relin"], plan))
        elif n.op == "rescale":
            src = g.nodes[n.args[0]].attr("level")
            vals.append(ckks_ops.rescale_traced(*a[0], rt["rescale"][str(src)]))
        elif n.op in ("rotate", "conjugate"):
            word, key = rt["consts"][str(i)]
            plan = rt["ks"][str(_limbs(params, level))]
            vals.append(ev.galois(*a[0], key, plan, word))
        elif n.op == "rotate_many":
            elements = tuple(ckks_ops.rotation_element(params, k) for k in n.attr("ks"))
            plan = rt["ks"][str(_limbs(params, level))]
            vals.append(ev.galois_hoisted(*a[0], tuple(rt["galois"][str(e)] for e in elements), plan, elements))
        elif n.op == "pick":
            src = g.nodes[n.args[0]]
            vals.append(tuple(a[0][src.attr("ks").index(n.attr("k"))]))
        elif n.op == "bootstrap":
            src = g.nodes[n.args[0]]
            ct = Ciphertext(*a[0], params, src.attr("scale"), rt["bootstrap"].key_id)
            if "bootstrap_tables" in rt:  # one program: the bootstrap's tables are arguments of the caller's program
                out = bootstrap.bootstrap_inline(ct, rt["bootstrap"], rt["bootstrap_tables"][_bootstrap_key(g, n, cx)])
            else:  # operation by operation (eager values): each operation its own cached program
                out = bootstrap.bootstrap(ct, rt["bootstrap"], real=not cx[n.args[0]],
                                          precise=bool(n.attr("precise")))
            vals.append((out.c0, out.c1))
        elif n.op == "output":
            vals.append(a[0])
        else:
            raise CircuitError(f"internal: no lowering for {n.op!r}")
    return [tuple(p.data for p in vals[o]) for o in g.outputs]


# --------------------------------------------------------------------------------------------------
# The scheme
# --------------------------------------------------------------------------------------------------

def preset_for(depth: int, precision: float | None = None) -> Params:
    """:func:`crossfhe.ckks.presets.smallest`, or CircuitError if no secure preset has that depth (and precision):
    a deeper program needs a bootstrappable preset (:data:`crossfhe.ckks.presets.BOOTSTRAP`)."""
    fit = presets.smallest(depth, precision)
    if fit is not None:
        return fit
    raise CircuitError(f"no secure CKKS preset has depth {depth}" +
                       (f" and {precision} bits of precision" if precision else "") +
                       "; pass params= a bootstrappable preset (" + ", ".join(presets.BOOTSTRAP) +
                       "): the circuit then bootstraps where its levels run out")


class CKKSScheme(RingScheme):
    name = "ckks"
    materialize_kernels = True
    annotated_after = frozenset({"levels", "levels (eager)", "bounds", "dead_code"})

    value_attrs = frozenset({"c", "const", "k"})
    item_ndims = (2, 2)

    def input_attrs(self, index: int, spec: CKKSVector) -> dict:
        return {"index": index, "length": spec.length, "width": spec.width, "complex": spec.complex,
                "bound": spec.bound}

    def output_node(self, trace: Trace, value, position: int = 0) -> int:
        return trace.node("output", (value.node,), {"length": value.length, "width": value.width,
                                                      "complex": value.complex}, loc=f"output {position}")

    def passes(self, optimize: bool = True):
        if not optimize:
            return [("relinearize (eager)", _eager_relin), ("levels (eager)", _eager_levels),
                    ("bounds", _bounds), ("dead_code", lambda g, p: ir.dead_code(g))]
        return [("cse", cse), ("sink_factors", sink_factors), ("hoist_rotations", hoist_rotations),
                ("relinearize (lazy)", relinearize),
                ("levels", levels), ("bounds", _bounds), ("dead_code", lambda g, p: ir.dead_code(g))]

    def cost(self, graph, params, annotated: bool = True) -> dict:
        return cost(graph, params, annotated)

    def select(self, graph, precision=None, bits=None) -> Params:
        return preset_for(multiplicative_depth(graph), precision)

    def prepare_params(self, params) -> Params:
        if not isinstance(params, Params):
            raise ParameterError(f"a CKKS circuit takes ckks.Params (e.g. crossfhe.ckks.presets.N14_L7), got "
                                 f"{type(params).__name__}")
        return params.with_kernels(as_kernel_set(params.kernels).resolve())

    def requirements(self, graph, params) -> dict:
        return {"relin": any(n.op == "relin" for n in graph.nodes), "rotations": sorted(_rotations(graph)),
                "conjugation": any(n.op == "conjugate" for n in graph.nodes),
                "galois_elements": _galois_elements(graph, params),
                "bootstrap": any(n.op == "bootstrap" for n in graph.nodes),
                "bootstrap_width": bootstrap_width(graph, params)}

    def keygen(self, params, req, seed):
        sk, ek = ckks_ops.keygen(params, rotations=req["rotations"], conjugation=req.get("conjugation", False),
                                 seed=seed)
        if req.get("bootstrap"):
            sub = None if seed is None else bytes(b ^ 0x5A for b in seed)
            width = req.get("bootstrap_width") or None  # absent in older requirements: every width
            config = bootstrap.config_for(params, bootstrap.slots_for(params, width))
            return sk, bootstrap.keygen(sk, ek, config, seed=sub)
        return sk, ek

    def check_keys(self, graph, params, public, key_id) -> None:
        if any(n.op == "bootstrap" for n in graph.nodes) and not isinstance(public, bootstrap.Keys):
            raise ParameterError("this circuit bootstraps where its levels run out: run it with bootstrapping keys "
                                 "(circuit.keygen() makes them)")
        if isinstance(public, bootstrap.Keys):
            _check_bootstrap_width(graph, params, public)
        public = _evaluation(public)
        if not isinstance(public, EvaluationKeys):
            raise TypeError(f"a CKKS circuit runs with ckks.EvaluationKeys (circuit.keys.public), got "
                            f"{type(public).__name__}")
        if public.params.digest() != params.digest():
            raise ParameterError("the evaluation keys were made for other parameters than the circuit's")
        if any(n.op == "relin" for n in graph.nodes) and getattr(public, "relin", None) is None:
            loc = next(n.loc for n in graph.nodes if n.op == "relin")
            raise ParameterError(f"the circuit multiplies ciphertexts (at {loc}) but the evaluation keys hold no "
                                 "relinearization key; make keys with circuit.keygen()")
        missing = [e for e in _galois_elements(graph, params) if e not in public.galois]
        if missing:
            where = []
            for n in graph.nodes:
                for k in (n.attr("ks") or (n.attr("k"),)) if n.op in ("rotate", "rotate_many") else ():
                    if ckks_ops.rotation_element(params, k) in missing:
                        where.append(f"rotate({k}) at {n.loc}")
                if n.op == "conjugate" and ckks_ops.conjugation_element(params) in missing:
                    where.append(f"conjugate() at {n.loc}")
            raise ParameterError(f"the evaluation keys hold no Galois key for {', '.join(where)} (elements {missing}); "
                                 "make keys with circuit.keygen(), which knows the rotations")
        if key_id is not None and public.key_id != key_id:
            raise KeyMismatchError(f"the inputs were encrypted under key pair {key_id}, the evaluation keys are of "
                                   f"{public.key_id}")

    def encrypt_input(self, graph, params, public, index: int, spec: CKKSVector, values):
        """Encrypt input ``index`` at the level the circuit first uses it (its ``input`` node's)."""
        public = _evaluation(public)
        if not isinstance(public, (EvaluationKeys, SecretKey)):
            raise TypeError(f"encrypt takes the circuit's keys, got {type(public).__name__}")
        v = np.asarray(values)
        if not (np.issubdtype(v.dtype, np.number) or v.dtype == bool):
            raise ParameterError(f"encrypt takes numbers, got an array of dtype {v.dtype}")
        if v.ndim == 0 or v.shape[-1] != spec.length:
            raise ParameterError(f"input of {spec!r} takes values of shape [..., {spec.length}], got shape {v.shape}")
        if np.iscomplexobj(v) and not spec.complex:
            raise ParameterError(f"{spec!r} holds real values; give complex=True for complex ones")
        limit = spec.bound
        if limit is None and any(n.op == "bootstrap" for n in graph.nodes):
            limit = BOOTSTRAP_BOUND
        if limit is not None and v.size and not _largest(v) <= limit * (1 + BOUND_SLACK):
            declared = "its declared bound" if spec.bound is not None else (
                "[-1, 1], where the circuit takes undeclared inputs to lie (it bootstraps)")
            raise ParameterError(f"input {index} ({spec!r}): values reach {_largest(v):.6g} in magnitude, beyond "
                                 f"{declared}: scale them into it, or compile with CKKSVector({spec.length}, "
                                 f"bound=...) (a bootstrap of a value beyond 1 is then refused at compile time)")
        padded = np.zeros(v.shape[:-1] + (spec.width,), dtype=np.result_type(v, np.float64))
        padded[..., : spec.length] = v
        level = graph.nodes[graph.inputs[index]].attr("level")
        pt = ckks_ops.encode(params, padded, level=level)
        ct = ckks_ops.encrypt(public, pt)
        return (ct.c0.data, ct.c1.data), v.shape[:-1], ct.key_id

    def encrypt(self, params, public, spec: CKKSVector, values):
        raise CircuitError("a CKKS input is encrypted at the level its circuit needs: use circuit.encrypt")

    def decrypt(self, params, secret, graph, node, leaves, batch_shape):
        n = graph.nodes[node]
        level, scale = n.attr("level"), n.attr("scale")
        key_id = secret.key_id
        ct = Ciphertext(_poly(params, level, leaves[0]), _poly(params, level, leaves[1]), params, scale, key_id)
        z = ckks_ops.decode(ckks_ops.decrypt(secret, ct))[..., : n.attr("length")]
        return z if n.attr("complex") else z.real

    def leaf_specs(self, graph, params, node: int) -> list:
        """(item shape, dtype, moduli, limb axis) of each leaf of node ``node``'s value: c0 and c1 at its level."""
        moduli = params.moduli_at(graph.nodes[node].attr("level"))
        return [((len(moduli), params.n), np.uint32, moduli, -2)] * 2

    def runtime(self, graph, params, public, *, one_program: bool = True):
        return runtime(graph, params, public, one_program=one_program)

    def interpret(self, graph, params, inputs, rt, items: int = 1):
        return interpret(graph, params, inputs, rt)

    # The eager values' one-operation circuits (crossfhe.api.eager) -------------------------------------

    def by_operation(self, graph) -> bool:
        return any(n.op == "bootstrap" for n in graph.nodes)

    def eager_key(self, attrs: dict) -> tuple:
        # the width only where the context's bootstrapping keys serve fewer than N/2 slots (CKKSContext.create's
        # bootstrap_length): it decides whether a bootstrap is allowed (bootstrap_width)
        # and whether it is complex where the context can bootstrap (a real value's bootstrap runs EvalMod once)
        return ((attrs["level"], attrs["scale"]) + ((attrs["width"],) if "width" in attrs else ())
                + ((attrs["complex"],) if "complex" in attrs else ()))

    def eager_output(self, builder, node: int, inputs) -> int:
        return builder.add("output", (node,), {"length": 1, "width": 1, "complex": False}, "result", merge=False)

    def eager_passes(self, params, public):
        """Eager semantics: a product is relinearized and rescaled right away; bootstrapping where a product would
        run out of levels when the keys can (bootstrapping keys)."""
        can = isinstance(public, bootstrap.Keys)
        return [("relinearize (eager)", _eager_relin),
                ("levels (eager)", lambda g, p: place_levels(g, p, lazy=False, bootstrap=can)),
                ("dead_code", lambda g, p: ir.dead_code(g))]

    def with_constants(self, rt: dict, graph, params, public) -> dict:
        return {**rt, "consts": constants(graph, params, public)}



SCHEME = CKKSScheme()

__all__ = ["BOOTSTRAP_BOUND", "SCHEME", "bound_rule", "check_bootstrap_bounds", "constants", "cost", "cse",
           "expression_depth", "hoist_rotations", "interpret", "levels", "multiplicative_depth", "place_levels",
           "relinearize", "runtime", "sink_factors", "value_bounds", "value_complex"]
