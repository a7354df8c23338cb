"""The TFHE scheme of the compiler: symbolic integers, range and noise checks, the Taurus deduplications, batched
bootstraps, and the lowering onto :func:`crossfhe.tfhe.ops.pbs_rows` with the server key, its plans and the
lookup tables as arguments of the program.

Values. An encrypted integer (:class:`EncryptedInt`; input spec :class:`~crossfhe.api.specs.TFHEInt`) holds a
message m in [0, 2^p), p = ``params.message_bits``, as m Delta plus noise, with one padding bit above it
(:mod:`crossfhe.tfhe.params`). Users write ``x + y``, ``x - y``, ``-x``, ``x + 3``, ``3 - x``, ``x * 3`` (int
constants) and lookups ``x.apply(f)``: f a callable on ints or an array of ints, applied as f(m) mod 2^p (as
:func:`crossfhe.tfhe.ops.pbs`). Linear operations are exact mod 2^(p+1) (the message and its padding bit), so a
value in between may leave [0, 2^p) (``x - y + 8`` is fine); what a lookup reads and what an output holds must lie
in [0, 2^p) for every input in its declared range, else :class:`~crossfhe.api.ir.CircuitError` names the
operation that made the value and its source line.

Analysis (:func:`analyze`). Every value is an affine form c + sum_s w_s v_s over sources s (inputs and lookup
results), each in a known interval: an input in [0, 2^bits), a lookup's result in its table's image over its
input's interval. The form gives the value's interval (exact over independent sources; x - x is 0) and its noise
as a multiple of a bootstrap's, sum_s w_s^2; a lookup's input and an output may carry up to
:func:`noise_budget`: ``params.norm2`` (``max_norm2``, the squared norm the presets' failure probability is quoted
at, :mod:`crossfhe.tfhe.presets`) or more while a bootstrap still fails with probability at most 2^-64.

Traced ops: ``input {index[, bits]}``, ``add``, ``sub``, ``neg``, ``add_scalar {c}``, ``mul_int {c}``, ``lookup
{raw[, raw_error]}`` (``raw``: the user's table, f(m) mod 2^10 for m in [0, L), L <= :data:`MAX_TABLE`;
``raw_error``: why a callable stopped before 2^10). The passes (:meth:`TFHEScheme.passes`), each a pure
``Graph, Params -> Graph``:

=============  ================================================================================================
``dead_code``  drops what no output needs (required: what is dropped is not checked either)
``tables``     each lookup's table for p (``lookup {table}``: 2^p ints mod 2^p); every value annotated with its
               interval (``range``); raises for overflow or noise beyond the budget (required)
``cse``        merges equal values (operands of + ordered): equal (input, table mod 2^p) lookups become one
``compose``    a lookup of c + w s, s one lookup's result and no other source, becomes one lookup of s's input
               with the composed table (:func:`compose`): chains of lookups cost one bootstrap level
``ks_dedup``   the lookups of one input become one ``pbs`` node, its input key-switched once (Taurus §V
               KS-dedup), and a ``pick {index}`` per table
``acc_dedup``  the launches read the program's test vectors (``shared``): one per distinct table, however many
               inputs and launches apply it (Taurus §V ACC-dedup)
``batch``      the launches at one bootstrap depth (hence independent) become one ``pbs`` over the stacked
               inputs, one (input, table) row per result, tables per row where they differ
=============  ================================================================================================

A ``pbs`` node's args are its inputs (each key-switched once); ``tables`` are content keys, ``rows`` the (input
position, table position) pair of each result. :func:`cost` counts ``bootstraps`` (blind rotations),
``pbs_calls`` (launches), ``key_switches``, ``test_vectors`` (built by the program), ``linear_ops`` and ``depth``
(bootstraps on the longest path).

Lowering (:func:`interpret`): one item's circuit, each launch one :func:`crossfhe.tfhe.ops.pbs_rows`. The linear
operations between launches are not lowered one by one: :func:`linear_plan` writes each value a launch or an
output reads as integer coefficients over the sources (inputs, lookups, picks) plus its constants, and each such
segment runs either as one int32 matrix product on the sources' words split into bytes (:func:`_fused`) or, where
few coefficients are nonzero, as one gathered source row per nonzero term on the words' 16-bit halves
(:func:`_sparse`); both exact mod q, the coefficients and constants arguments (``linear`` in the runtime). A
launch's results stay one array, gathered by runs of rows. A network layer of 92 neurons over 840 inputs is then
one product, not 77,000 additions in the program (a four-layer network compiled in 5.5 s instead of 84 s,
benchmarks/README.md). A launch of more than :data:`LAUNCH_ROWS` rows runs in chunks of rows inside the program
(:func:`jax.lax.map`; per chunk its sparse segment rows and :func:`crossfhe.tfhe.ops.pbs_each`), so the program's
working memory follows the chunk, not the circuit. The runtime
(:func:`runtime`) is :func:`crossfhe.tfhe.ops.program_key` of the server key (the route of the eager ``pbs``,
decided there on the host) and the tables, int32 ``[T, 2^p]``. The FFT routes' float64 arrays need
``jax.enable_x64``: :meth:`TFHEScheme.scope`.
"""

from __future__ import annotations

import weakref
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.api import ir
from crossfhe.api.circuit import Scheme
from crossfhe.api.ir import Builder, CircuitError, Graph, Node
from crossfhe.api.passes import cse, dead_code
from crossfhe.api.specs import TFHEInt
from crossfhe.api.trace import source_line
from crossfhe.core.lwe import LWECiphertext
from crossfhe.errors import KeyMismatchError, ParameterError
from crossfhe.kernels import cpu_native, gpu_native
from crossfhe.math.modular import ModulusTable, add_mod, barrett_mul
from crossfhe.tfhe import ops, presets
from crossfhe.tfhe.bound import Bound
from crossfhe.tfhe.linear import add_const_words, linear_words, mul_const_words
from crossfhe.tfhe.params import LOG2_P_FAIL, MAX_MESSAGE_BITS, Params, noise_budget

MAX_TABLE = 1 << MAX_MESSAGE_BITS
"""A traced table keeps f(m) mod 2^10 for m < 2^10: enough for every p (f(m) mod 2^p is its residue)."""

LINEAR = ("add", "sub", "neg", "add_scalar", "mul_int")
LAUNCHES = ("lookup", "pbs")



SELECTABLE = (presets.P2, presets.P4, presets.P6, presets.P7, presets.P8, presets.P10)
"""The secure presets :meth:`TFHEScheme.select` chooses from, smallest first."""


def _is_int(c) -> bool:
    return isinstance(c, (int, np.integer)) and not isinstance(c, (bool, np.bool_))


# --------------------------------------------------------------------------------------------------
# Tracing
# --------------------------------------------------------------------------------------------------


def raw_table(table, what: str, *, limit: int = MAX_TABLE, error=None) -> tuple[np.ndarray, str | None]:
    """(f(m) mod ``limit`` for m in [0, L), int64 [L]; why L < ``limit`` or None) of a callable (evaluated from 0 up
    to its first exception or non-int value: a partial table) or a 1-D integer array. Eager values and circuits
    read a table the same way (:meth:`crossfhe.api.tfhe.EncryptedInt.apply`). ``error(kind, message)``: the
    exception to raise for an unusable table (default a CircuitError naming the user's line)."""
    if error is None:
        def error(kind, message):
            return CircuitError(f"{what} at {source_line()}: {message}")
    if callable(table):
        vals, why = [], None
        for m in range(limit):
            try:
                v = table(m)
            except Exception as e:  # noqa: BLE001 - the table may be partial; reachable entries are checked later
                why = f"raised {type(e).__name__}: {e} at {m}"
                break
            if not _is_int(v):
                why = f"returned {v!r} ({type(v).__name__}) at {m}, not an int"
                break
            vals.append(int(v) % limit)
        if not vals:
            raise error(TypeError, f"the table {why}")
        return np.array(vals, dtype=np.int64), why
    arr = np.asarray(table)
    ok = arr.ndim == 1 and 1 <= arr.shape[0] <= max(limit, MAX_TABLE) and (
        (arr.dtype == object and all(_is_int(v) for v in arr.tolist()))
        or (np.issubdtype(arr.dtype, np.integer) and arr.dtype != bool))
    if not ok:
        raise error(TypeError, f"a table is a callable on ints or a 1-D array of at most {limit} ints (entry m is "
                    f"f(m)), got {type(table).__name__} of shape {arr.shape} and dtype {arr.dtype}")
    return np.array([int(v) % limit for v in arr.tolist()[:limit]], dtype=np.int64), None


# --------------------------------------------------------------------------------------------------
# Analysis: intervals and noise
# --------------------------------------------------------------------------------------------------


def _table_key(n: Node) -> str:
    key = n.attr("table")
    if key is None:
        raise CircuitError(f"internal: the lookup at {n.loc} has no table for p; run the tables pass first")
    return key


def _launch_tables(n: Node) -> tuple[str, ...]:
    """The table keys a launch applies (a traced lookup: its raw table)."""
    if n.op == "lookup":
        return (n.attr("table") or n.attr("raw"),)
    return tuple(n.attr("tables"))


def _rows(n: Node) -> tuple[tuple[int, int], ...]:
    return ((0, 0),) if n.op == "lookup" else tuple(n.attr("rows"))


def describe(g: Graph, i: int) -> str:
    """Node i in the user's terms: "`a + b` at f.py:12", "input 0 (TFHEInt(bits=3))"."""
    n = g.nodes[i]
    if n.op == "input":
        bits = n.attr("bits")
        return f"input {n.attr('index')} ({f'TFHEInt(bits={bits})' if bits else 'TFHEInt()'})"
    text = {"add": "a + b", "sub": "a - b", "neg": "-a", "add_scalar": f"a + {n.attr('c')}",
            "mul_int": f"a * {n.attr('c')}", "lookup": "a.apply(table)", "pick": "a.apply(table)",
            "pbs": "a.apply(table)"}.get(n.op, n.op)
    if n.op == "add_scalar" and n.attr("c") < 0:
        text = f"a - {-n.attr('c')}"
    return f"`{text}` at {n.loc or '?'}"


def _image(table: np.ndarray, lo: int, hi: int) -> tuple[int, int]:
    part = table[lo: hi + 1]
    return int(part.min()), int(part.max())


def table_for(g: Graph, n: Node, params: Params, lo: int, hi: int) -> np.ndarray:
    """The table of lookup ``n`` for ``params``: int32 [2^p], f(m) mod 2^p (0 where the user's table has no entry,
    which the interval [lo, hi] of its input must not reach: CircuitError)."""
    size = 1 << params.message_bits
    if n.attr("table") is not None:
        t = g.const(n.attr("table"))
        if t.shape != (size,):
            raise CircuitError(f"internal: the lookup at {n.loc} has a table for {t.shape[0]} messages, not {size}")
        return t
    raw = g.const(n.attr("raw"))
    if hi >= raw.shape[0]:
        why = n.attr("raw_error")
        raise CircuitError(
            f"`a.apply(table)` at {n.loc}: its input may reach {hi}, but the table "
            + (f"{why}" if why else f"has {raw.shape[0]} entries") + f"; it must cover every value in [{lo}, {hi}]")
    t = np.zeros(size, dtype=np.int32)
    m = min(size, raw.shape[0])
    t[:m] = raw[:m] % size
    return t


class Analysis:
    """Per node: its :class:`Bound` (``bounds``) and the interval (``lo``, ``hi``) it gives; for a launch the
    intervals of its rows (``rows``); the materialized tables (``tables``: node -> list of int32 [2^p], one per
    table of the launch)."""

    def __init__(self):
        self.bounds: dict[int, Bound] = {}
        self.lo: dict[int, int] = {}
        self.hi: dict[int, int] = {}
        self.rows: dict[int, list[tuple[int, int]]] = {}
        self.tables: dict[int, list[np.ndarray]] = {}

    def set(self, i: int, bound: Bound) -> None:
        self.bounds[i], self.lo[i], self.hi[i] = bound, bound.lo, bound.hi

    def norm2(self, i: int) -> int:
        return self.bounds[i].noise


def _too_big(g: Graph, params: Params, a: Analysis, i: int, use: str) -> None:
    """Raise if value i may leave [0, 2^p) or carries more noise than :func:`noise_budget`; ``use`` says who reads
    it."""
    p, size = params.message_bits, 1 << params.message_bits
    name = params.name or "these parameters"
    lo, hi = a.lo[i], a.hi[i]
    if lo < 0 or hi >= size:
        reach = f"reach {hi}, beyond" if hi >= size else f"reach {lo}, below"
        raise CircuitError(
            f"{describe(g, i)} may {reach} the {p}-bit message space [0, {size}) of {name}; {use}. Linear operations "
            f"are exact mod 2^{p + 1}, but what a lookup reads and what an output holds must lie in [0, {size}): "
            "narrow the inputs (TFHEInt(bits=...)), reduce the value with a lookup first, or use parameters with "
            "more message bits (compile without params= picks them)")
    nu2 = a.norm2(i)
    if nu2 > noise_budget(params):
        raise CircuitError(
            f"{describe(g, i)}: its noise is {nu2} times a bootstrap's (the sum of its squared weights), beyond the "
            f"{noise_budget(params)} that {name} allows (a bootstrap's failure probability 2^"
            f"{params.log2_p_fail(nu2):.1f} > 2^{LOG2_P_FAIL}); {use}. Apply a lookup (a bootstrap) in between, use "
            "smaller constants, or larger parameters")


def apply_linear(op: str, c, bounds: list[Bound]) -> Bound:
    """The :class:`Bound` of a linear operation's result from its operands': ``add``, ``sub``, ``neg``,
    ``add_scalar {c}``, ``mul_int {c}`` (the rule eager values and the compiler's analysis share)."""
    if op == "add":
        return bounds[0] + bounds[1]
    if op == "sub":
        return bounds[0] + bounds[1].scaled(-1)
    if op == "neg":
        return bounds[0].scaled(-1)
    if op == "add_scalar":
        return bounds[0] + int(c)
    if op == "mul_int":
        return bounds[0].scaled(c)
    raise CircuitError(f"internal: {op!r} is not a linear TFHE operation")


def analyze(g: Graph, params: Params, *, check_outputs: bool = True) -> Analysis:
    """The :class:`Bound` of every value of ``g`` on ``params`` (module docstring), the tables materialized;
    raises CircuitError for an input wider than p bits, a lookup's input or (``check_outputs``) an output that may
    leave [0, 2^p) or carries noise beyond :func:`noise_budget`, a table without entries its input may reach. An
    input with a ``range`` attribute (an eager value's operand) is a source in that interval with its ``noise``."""
    a = Analysis()
    p = params.message_bits
    for i, n in enumerate(g.nodes):
        args = n.args
        if n.op == "input":
            if n.attr("range") is not None:
                lo, hi = n.attr("range")
                a.set(i, Bound.source(lo, hi, n.attr("noise") or 1, sid=i))
                continue
            bits = n.attr("bits") or p
            if bits > p:
                raise CircuitError(f"{describe(g, i)} holds values up to {2**bits - 1}, beyond the {p}-bit message "
                                   f"space of {params.name or 'these parameters'}; use parameters with at least "
                                   f"{bits} message bits")
            a.set(i, Bound.source(0, 2**bits - 1, sid=i))
            continue
        if n.op in LINEAR:
            a.set(i, apply_linear(n.op, n.attr("c"), [a.bounds[x] for x in args]))
            continue
        if n.op in LAUNCHES:
            where = f"the lookup at {n.loc or '?'} reads it"
            for x in args:
                _too_big(g, params, a, x, where)
            if n.op == "lookup":
                tabs = [table_for(g, n, params, a.lo[args[0]], a.hi[args[0]])]
            else:
                tabs = [g.const(k) for k in n.attr("tables")]
                if any(t.shape != (1 << p,) for t in tabs):
                    raise CircuitError(f"internal: the launch at {n.loc} has tables for other parameters")
            a.tables[i] = tabs
            a.rows[i] = [_image(tabs[t], a.lo[args[x]], a.hi[args[x]]) for x, t in _rows(n)]
            if n.op == "lookup":
                a.set(i, Bound.source(*a.rows[i][0], sid=i))
            continue
        if n.op == "pick":
            a.set(i, Bound.source(*a.rows[args[0]][n.attr("index")], sid=i))
            continue
        raise CircuitError(f"internal: the TFHE analysis does not know the op {n.op!r}")
    for j, o in enumerate(g.outputs):
        if o not in a.bounds:
            raise CircuitError(f"internal: output {j} is not a value")
        if check_outputs:
            _too_big(g, params, a, o, f"it is output {j} of the circuit")
    return a


def evaluate_plain(g: Graph, params: Params, *inputs) -> list[np.ndarray]:
    """The circuit on messages in the clear (the reference an encrypted run equals): ``inputs`` integer arrays of
    one shape, the linear operations on Python integers, each lookup its table for p; int64 per output. The
    graph is checked first (:func:`analyze`), so every lookup's input and every output lies in [0, 2^p)."""
    a = analyze(g, params)
    vals: list = []
    for i, n in enumerate(g.nodes):
        x = [vals[j] for j in n.args]
        if n.op == "input":
            vals.append(np.asarray(inputs[g.inputs.index(i)]).astype(np.int64).astype(object))
        elif n.op in ("add", "sub"):
            vals.append(x[0] + x[1] if n.op == "add" else x[0] - x[1])
        elif n.op == "neg":
            vals.append(-x[0])
        elif n.op == "add_scalar":
            vals.append(x[0] + n.attr("c"))
        elif n.op == "mul_int":
            vals.append(x[0] * n.attr("c"))
        elif n.op in LAUNCHES:
            outs = [a.tables[i][t].astype(np.int64)[x[j].astype(np.int64)].astype(object) for j, t in _rows(n)]
            vals.append(outs[0] if n.op == "lookup" else outs)
        elif n.op == "pick":
            vals.append(x[0][n.attr("index")])
    return [np.asarray(vals[o]).astype(np.int64) for o in g.outputs]


def bootstrap_depth(g: Graph) -> list[int]:
    """Per node: the most bootstraps on a path from an input to it (a launch counts itself)."""
    d: list[int] = []
    for n in g.nodes:
        below = max((d[x] for x in n.args), default=0)
        d.append(below + 1 if n.op in LAUNCHES else below)
    return d


# --------------------------------------------------------------------------------------------------
# Passes
# --------------------------------------------------------------------------------------------------


def tables(g: Graph, params: Params, *, check_outputs: bool = True) -> Graph:
    """Each lookup's table for p (``lookup {table}``, the user's ``raw`` table dropped), every value annotated with
    its interval ``range`` (lo, hi); CircuitError where :func:`analyze` finds the circuit cannot run on
    ``params``. Every node stays (dead code is :func:`dead_code`'s)."""
    a = analyze(g, params, check_outputs=check_outputs)

    def visit(b: Builder, i: int, n: Node, args: list[int]) -> int:
        attrs = dict(n.attrs)
        if n.op == "lookup" and "raw" in attrs:
            attrs.pop("raw")
            attrs.pop("raw_error", None)
            attrs["table"] = b.const(a.tables[i][0])
        if i in a.lo:
            attrs["range"] = (a.lo[i], a.hi[i])
        return b.add(n.op, args, attrs, n.loc, merge=False)

    out = ir.rebuild(g, visit)
    used = {v for n in out.nodes for _, v in n.attrs if isinstance(v, str)}
    used |= {k for n in out.nodes for _, v in n.attrs if isinstance(v, tuple) for k in v if isinstance(k, str)}
    return Graph(out.scheme, out.nodes, out.inputs, out.outputs, {k: a for k, a in out.consts.items() if k in used})


def _single_sources(g: Graph) -> list:
    """Per node, its value as c + w s over at most one non-linear node s (an input, a lookup or a pick) as
    (c, s, w), s None for a constant (w 0); None where it depends on several."""
    form: list = []
    for i, n in enumerate(g.nodes):
        if n.op not in LINEAR:
            form.append((0, i, 1))
            continue
        a = [form[x] for x in n.args]
        if any(f is None for f in a):
            form.append(None)
        elif n.op in ("add", "sub"):
            sign = 1 if n.op == "add" else -1
            (c0, s0, w0), (c1, s1, w1) = a
            if s0 is not None and s1 is not None and s0 != s1:
                form.append(None)
                continue
            w = w0 + sign * w1
            form.append((c0 + sign * c1, (s0 if s0 is not None else s1) if w else None, w))
        elif n.op == "neg":
            c, s_, w = a[0]
            form.append((-c, s_, -w))
        elif n.op == "add_scalar":
            c, s_, w = a[0]
            form.append((c + int(n.attr("c")), s_, w))
        else:  # mul_int
            c, s_, w = a[0]
            k = int(n.attr("c"))
            form.append((c * k, s_ if k else None, w * k))
    return form


def compose(g: Graph, params: Params) -> Graph:
    """Lookup fusion (what Concrete's compiler does for chains of univariate operations): a lookup T_L whose input
    is c + w s, with s = T_s[x] the result of one other lookup and no other source, becomes one lookup of x with the
    table T[m] = T_L[c + w T_s[m]] for m in x's interval (0 elsewhere, never read). One bootstrap level less, and
    T_s's bootstrap gone where nothing else reads s. Exact: the analysis bounded c + w s over the image of T_s on
    x's interval (one source: that interval is exact) within [0, 2^p), so the composed index is the one the two
    lookups read. Composed in order, so a chain of lookups becomes one. The noise is x's, which T_s read too."""
    top = 1 << params.message_bits
    form = _single_sources(g)
    b = Builder(g.scheme, g.consts)
    where: list[int] = []
    for n in g.nodes:
        args = [where[a] for a in n.args]
        f = form[n.args[0]] if n.op == "lookup" else None
        src = b.nodes[where[f[1]]] if f is not None and f[1] is not None else None
        if src is not None and src.op == "lookup" and n.attr("table") and src.attr("table"):
            c, _, w = f
            x = src.args[0]
            rng = b.nodes[x].attr("range")
            if rng is not None:
                m = np.arange(max(int(rng[0]), 0), min(int(rng[1]), top - 1) + 1)
                inner = b.consts[src.attr("table")].astype(np.int64)[m]
                idx = c + w * inner
                if len(m) and idx.min() >= 0 and idx.max() < top:
                    outer = g.consts[n.attr("table")]
                    table = np.zeros(top, dtype=outer.dtype)
                    table[m] = outer[idx]
                    attrs = dict(n.attrs, table=b.const(table))
                    where.append(b.add("lookup", (x,), attrs, n.loc))  # equal compositions merge
                    continue
        where.append(b.add(n.op, args, dict(n.attrs), n.loc, merge=False))
    return ir.dead_code(b.graph([where[i] for i in g.inputs], [where[o] for o in g.outputs]))  # drops unused tables


def ks_dedup(g: Graph, params: Params) -> Graph:
    """Taurus KS-dedup: the lookups of one value become one ``pbs`` node (its input key-switched once, a row per
    distinct table) placed at the first of them, and each lookup a ``pick {index}`` of its row."""
    groups: dict[int, list[int]] = {}
    for i, n in enumerate(g.nodes):
        if n.op == "lookup":
            groups.setdefault(n.args[0], []).append(i)
    groups = {x: ids for x, ids in groups.items() if len({_table_key(g.nodes[j]) for j in ids}) > 1}
    made: dict[int, tuple[int, list[str]]] = {}

    def visit(b: Builder, i: int, n: Node, args: list[int]) -> int:
        if n.op != "lookup" or n.args[0] not in groups:
            return b.add(n.op, args, dict(n.attrs), n.loc, merge=False)
        x = n.args[0]
        if x not in made:
            members = [g.nodes[j] for j in groups[x]]
            keys = list(dict.fromkeys(_table_key(m) for m in members))
            attrs = {"tables": tuple(keys), "rows": tuple((0, t) for t in range(len(keys)))}
            if all(m.attr("shared") for m in members):
                attrs["shared"] = True
            made[x] = (b.add("pbs", args, attrs, n.loc, merge=False), keys)
        node, keys = made[x]
        return b.add("pick", (node,), {"index": keys.index(_table_key(n)), "range": n.attr("range")}, n.loc)

    return ir.dead_code(ir.rebuild(g, visit))


def acc_dedup(g: Graph, params: Params) -> Graph:
    """Taurus ACC-dedup: every launch marked ``shared``: the program builds the test vector of each distinct table
    once and every launch's accumulators start from those (instead of a launch building its own)."""
    def visit(b: Builder, i: int, n: Node, args: list[int]) -> int:
        attrs = dict(n.attrs)
        if n.op in LAUNCHES:
            attrs["shared"] = True
        return b.add(n.op, args, attrs, n.loc, merge=False)

    return ir.rebuild(g, visit)


def batch(g: Graph, params: Params) -> Graph:
    """Batched bootstraps: the launches at one bootstrap depth (none depends on another: a launch's result is one
    bootstrap deeper than its input) become one ``pbs`` over the distinct inputs of them all, one row per distinct
    (input, table), placed after every value of the depth below; each former result is a ``pick`` of its row.
    The nodes are reordered by (depth, launches first, position), a topological order."""
    depth = bootstrap_depth(g)
    levels: dict[int, list[int]] = {}
    for i, n in enumerate(g.nodes):
        if n.op in LAUNCHES:
            levels.setdefault(depth[i], []).append(i)
    merged = {d for d, ids in levels.items() if len(ids) > 1}
    order = sorted(range(len(g.nodes)), key=lambda i: (depth[i], g.nodes[i].op not in LAUNCHES, i))
    b = Builder(g.scheme, g.consts)
    where: dict[int, int] = {}
    rows_of: dict[int, tuple[int, list[int]]] = {}  # old launch -> (new pbs node, its rows' new indices)

    def merge(ids: list[int]) -> None:
        inputs: list[int] = []
        keys: list[str] = []
        rows: dict[tuple[int, int], int] = {}
        parts = {}
        for j in ids:
            n = g.nodes[j]
            mine = []
            for x, t in _rows(n):
                arg = where[n.args[x]]
                key = _table_key(n) if n.op == "lookup" else n.attr("tables")[t]
                if arg not in inputs:
                    inputs.append(arg)
                if key not in keys:
                    keys.append(key)
                row = (inputs.index(arg), keys.index(key))
                mine.append(rows.setdefault(row, len(rows)))
            parts[j] = mine
        attrs = {"tables": tuple(keys), "rows": tuple(rows)}
        if all(g.nodes[j].attr("shared") for j in ids):
            attrs["shared"] = True
        node = b.add("pbs", inputs, attrs, g.nodes[ids[0]].loc, merge=False)
        for j in ids:
            rows_of[j] = (node, parts[j])

    for i in order:
        n = g.nodes[i]
        if n.op in LAUNCHES and depth[i] in merged:
            if i not in rows_of:
                merge(levels[depth[i]])
            node, rows = rows_of[i]
            if n.op == "lookup":
                where[i] = b.add("pick", (node,), {"index": rows[0], "range": n.attr("range")}, n.loc)
            continue
        if n.op == "pick" and n.args[0] in rows_of:
            node, rows = rows_of[n.args[0]]
            where[i] = b.add("pick", (node,), {"index": rows[n.attr("index")], "range": n.attr("range")}, n.loc)
            continue
        where[i] = b.add(n.op, [where[a] for a in n.args], dict(n.attrs), n.loc, merge=False)
    return ir.dead_code(b.graph([where[i] for i in g.inputs], [where[o] for o in g.outputs]))


PASSES = (("dead_code", dead_code), ("tables", tables), ("cse", cse), ("compose", compose), ("ks_dedup", ks_dedup),
          ("acc_dedup", acc_dedup), ("batch", batch))
"""The passes of an optimized compile, in order (``optimize=False``: ``dead_code`` and ``tables``, what running
needs: a value no output needs is neither checked nor computed)."""


# --------------------------------------------------------------------------------------------------
# Costs
# --------------------------------------------------------------------------------------------------


def cost(g: Graph, params: Params | None = None, annotated: bool = True) -> dict:
    """Counts: ``bootstraps`` (blind rotations: one per lookup, one per row of a ``pbs``), ``pbs_calls`` (launches),
    ``key_switches`` (one per input of a launch), ``test_vectors`` (the program builds one per table of each launch,
    and one per distinct table for all ``shared`` launches together), ``linear_ops`` (additions, subtractions,
    negations, constant additions and products) and ``depth`` (bootstraps on the longest path)."""
    boots = calls = switches = own = 0
    shared: set[str] = set()
    for n in g.nodes:
        if n.op not in LAUNCHES:
            continue
        calls += 1
        boots += len(_rows(n))
        switches += len(n.args)
        keys = set(_launch_tables(n))
        if n.attr("shared"):
            shared |= keys
        else:
            own += len(keys)
    counts = g.counts()
    return {
        "bootstraps": boots,
        "pbs_calls": calls,
        "key_switches": switches,
        "test_vectors": own + len(shared),
        "linear_ops": sum(counts[op] for op in LINEAR),
        "depth": max(bootstrap_depth(g), default=0),
    }


# --------------------------------------------------------------------------------------------------
# Lowering
# --------------------------------------------------------------------------------------------------


def table_keys(g: Graph) -> list[str]:
    """The distinct tables the launches apply, in order of first use: the rows of the runtime's ``tables``."""
    keys: dict[str, None] = {}
    for n in g.nodes:
        if n.op in LAUNCHES:
            for k in (_table_key(n),) if n.op == "lookup" else n.attr("tables"):
                keys.setdefault(k)
    return list(keys)


_REPREPARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _key_for(sk: ops.ServerKey, params: Params) -> ops.ServerKey:
    """The server key prepared for ``params``' kernel set and default product (:func:`crossfhe.tfhe.keys.product_for`):
    the same key, or once per key object the same arrays prepared again where it was prepared for another set or
    product."""
    if sk.params == params and sk.product is ops.product_for(params):
        return sk
    if sk not in _REPREPARED:
        _REPREPARED[sk] = ops.ServerKey.create(sk.bsk, sk.ksk, params, sk.key_id)
    return _REPREPARED[sk]


def runtime(g: Graph, params: Params, sk: ops.ServerKey) -> dict:
    """The program's arguments besides the inputs: ``tables`` int32 [T, 2^p] (:func:`table_keys`) and, where the
    circuit bootstraps, ``key``: :func:`crossfhe.tfhe.ops.program_key` of the server key (made here, on the host)."""
    out = constants(g, params)
    if table_keys(g):
        out["key"] = ops.program_key(_key_for(sk, params))
    return out


# --------------------------------------------------------------------------------------------------
# Linear segments as matrix products
# --------------------------------------------------------------------------------------------------

FUSE_L1 = (1 << 31) // 255
"""A segment row is fused when the sum of its coefficients' magnitudes is below this: its product with a byte
column (< 256) then fits int32."""

_PLANS: dict = {}


def linear_plan(g: Graph) -> dict | None:
    """The linear operations between bootstraps as matrix products, or None where a coefficient is too large.

    Every value a launch reads, and every output, is an affine form over the circuit's sources (inputs, lookups,
    picks): sum_s c_s x_s + sum_k d_k e_k, the e_k the ``add_scalar`` constants it passed through. The plan gives,
    per consumer (a launch's node index, or "out"), the sources it reads (node indices, increasing), the integer
    coefficients int64 [rows, sources] and, per row, the (``add_scalar`` node, d_k) pairs. Each form is found by one
    backward sweep over the nodes its row reaches (a row of m terms costs O(m), not the O(m^2) of building it add by
    add). Computed once per graph (cached by identity). None where a row's sum_s |c_s| >= :data:`FUSE_L1`: the
    interpreter then runs the operations one by one."""
    hit = _PLANS.get(id(g))
    if hit is not None and hit[0] is g:
        return hit[1]
    nodes = g.nodes
    consumers = [(i, n.args) for i, n in enumerate(nodes) if n.op in LAUNCHES] + [("out", g.outputs)]
    plan: dict | None = {}
    for key, roots in consumers:
        rows = []
        for root in roots:
            coef: dict[int, int] = {root: 1}
            src: dict[int, int] = {}
            consts: list = []
            stack, seen = [root], {root}
            while stack:  # the linear nodes this row reaches
                x = stack.pop()
                if nodes[x].op in LINEAR:
                    for y in nodes[x].args:
                        if y not in seen:
                            seen.add(y)
                            stack.append(y)
            for x in sorted(seen, reverse=True):  # args have smaller indices: a reverse topological sweep
                c = coef.pop(x, 0)
                if not c:
                    continue
                n = nodes[x]
                if n.op not in LINEAR:
                    src[x] = src.get(x, 0) + c
                    continue
                if n.op == "add_scalar":
                    consts.append((x, c))
                spread = ((c * int(n.attr("c")),) if n.op == "mul_int" else
                          {"add": (c, c), "sub": (c, -c), "neg": (-c,), "add_scalar": (c,)}[n.op])
                for y, cy in zip(n.args, spread):
                    coef[y] = coef.get(y, 0) + cy
            terms = {k: v for k, v in src.items() if v}
            if sum(abs(v) for v in terms.values()) >= FUSE_L1:
                break
            rows.append((terms, consts))
        else:
            sources = sorted({x for r, _ in rows for x in r})
            col = {x: j for j, x in enumerate(sources)}
            mat = np.zeros((len(rows), len(sources)), dtype=np.int64)  # |c| < FUSE_L1: int64 holds them
            for r, (terms, _) in enumerate(rows):
                mat[r, [col[x] for x in terms]] = list(terms.values())
            plan[key] = (tuple(sources), mat, tuple(tuple(c) for _, c in rows))
            continue
        plan = None
        break
    if len(_PLANS) > 8:
        _PLANS.clear()
    _PLANS[id(g)] = (g, plan)
    return plan


SPARSE_L1 = 1 << 15
"""A segment runs sparse (:func:`_sparse`) only where every row's sum of |c| is below this: its products with a
word's 16-bit halves then fit int32."""

SPARSE_GAIN = 10
"""A segment runs sparse where its nonzero coefficients, times this, are fewer than its dense matrix's entries:
measured on one CPU core on P6 words (benchmarks/README.md, "Sparse segments"), a sparse term (a gathered row, two
16-bit products) costs about as much as ten dense ones (four byte planes through int32 matrix products)."""

SPARSE_TERMS = 24
"""A segment below :data:`LAUNCH_ROWS` rows runs sparse only where no row has more nonzero terms than this: the
terms are unrolled, and each adds about 35 ms to the program's compile on a CPU (a 4 x 784 segment with 100
terms: 3.4 s against 0.3 s dense), which a circuit compiled once and run a few times does not win back."""

LAUNCH_ROWS = 2048
"""A launch of more rows runs as chunks of this many rows, one after another (:func:`jax.lax.map`): its segment
and its bootstraps per chunk, so the program's temporary memory follows the chunk, not the launch (GPT-2 small's
projections are 45,536 rows of 16,385 words)."""


def _sparse_form(mat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(idx int32 [rows, K], coef int32 [rows, K]): each row's nonzero coefficients and their columns, K the most
    in a row (at least 1), padded with coefficient 0 on column 0."""
    rows, cols = np.nonzero(mat)  # row-major: each row's columns increasing
    nnz = np.bincount(rows, minlength=len(mat))
    most = max(1, int(nnz.max()) if len(nnz) else 1)
    slot = np.arange(len(rows)) - np.repeat(np.cumsum(nnz) - nnz, nnz)
    idx = np.zeros((len(mat), most), np.int32)
    coef = np.zeros((len(mat), most), np.int32)
    idx[rows, slot], coef[rows, slot] = cols, mat[rows, cols]
    return idx, coef


def _plan_constants(g: Graph, params: Params, plan: dict) -> dict:
    """The fused segments' arguments by consumer, ``const`` uint32 [rows, limbs] (sum_k d_k e_k mod each q, e_k the
    encoded constants) and either ``coef`` int32 [rows, sources] (dense: :func:`_fused`) or ``idx`` and ``coef``
    int32 [rows, K] (sparse, :func:`_sparse_form`: :func:`_sparse`, where every row's sum |c| < :data:`SPARSE_L1`,
    K <= :data:`SPARSE_TERMS` and the nonzeros are fewer than 1 / :data:`SPARSE_GAIN` of the entries). A launch of
    more than :data:`LAUNCH_ROWS` rows whose segment can run sparse gets its rows' forms instead (row r: its input's,
    any K), padded
    to whole chunks, [chunks, LAUNCH_ROWS, ...], with ``slot`` int32 [chunks, LAUNCH_ROWS]: row r's table among the
    launch's (:func:`_launch_tables`). ``radix`` uint32 [4, limbs]: 2^(8k) mod q."""
    q = [int(x) for x in params.moduli]
    out = {"radix": np.array([[pow(2, 8 * k, x) for x in q] for k in range(4)], dtype=np.uint32)}
    for key, (_, mat, consts) in plan.items():
        const = np.zeros((len(consts), len(q)), dtype=np.uint32)
        for r, pairs in enumerate(consts):
            acc = [0] * len(q)
            for node, d in pairs:
                e = ops.encode(params, g.nodes[node].attr("c"))
                acc = [(a + d * int(w)) % x for a, w, x in zip(acc, e, q)]
            const[r] = acc
        small = mat.size == 0 or int(np.abs(mat).sum(axis=1).max()) < SPARSE_L1
        rows = _rows(g.nodes[key]) if key != "out" else ()
        if small and len(rows) > LAUNCH_ROWS:
            idx, coef = _sparse_form(mat)
            pick = np.array([r[0] for r in rows], np.int64)
            pad = -len(rows) % LAUNCH_ROWS

            def chunked(x, pick=pick, pad=pad):
                x = np.concatenate([x[pick], np.zeros((pad,) + x.shape[1:], x.dtype)])
                return x.reshape((-1, LAUNCH_ROWS) + x.shape[1:])

            slot = np.concatenate([np.array([r[1] for r in rows], np.int32), np.zeros(pad, np.int32)])
            out[str(key)] = {"idx": chunked(idx), "coef": chunked(coef), "const": chunked(const),
                             "slot": slot.reshape(-1, LAUNCH_ROWS)}
        elif (small and SPARSE_GAIN * int((mat != 0).sum()) < mat.size
              and int((mat != 0).sum(axis=1).max()) <= SPARSE_TERMS):
            idx, coef = _sparse_form(mat)
            out[str(key)] = {"idx": idx, "coef": coef, "const": const}
        else:
            out[str(key)] = {"coef": mat.astype(np.int32), "const": const}
    return out


def _fused(words, seg: dict, radix, moduli):
    """One segment: the rows sum_s c_s x_s + const of the sources' words ``words`` uint32 [m, L, 1 + kN] (b then a),
    exact mod each q: (b [rows, L], a [rows, L, kN]). The words (< 2^31) are split into 4 bytes; each byte plane is
    one int32 matrix product (a row's sum |c| < 2^31 / 255 keeps it exact), reduced mod q and weighted by
    2^(8k) mod q."""
    qa = np.array(moduli, np.uint32).reshape(-1, 1)
    m, limbs, width = words.shape
    t = ModulusTable.create(moduli)
    total = None
    for k in range(4):
        plane = ((words >> np.uint32(8 * k)) & np.uint32(255)).astype(jnp.int32).reshape(m, -1)
        r = jnp.matmul(seg["coef"], plane, preferred_element_type=jnp.int32).reshape(-1, limbs, width)
        r = jnp.remainder(r, qa.astype(np.int32)[None]).astype(jnp.uint32)  # [rows, L, W] in [0, q)
        if k:
            r = barrett_mul(r, radix[k][:, None], t.q, t.barrett_mu, t.bits)
        total = r if total is None else add_mod(total, r, qa)
    return add_mod(total[..., 0], seg["const"], qa.reshape(-1)), total[..., 1:]


def _sparse(words, seg: dict, moduli):
    """One sparse segment (:func:`_sparse_form`): row r is sum_j coef[r, j] x_idx[r, j] + const[r] of the sources'
    words ``words`` uint32 [m, L, 1 + kN], exact mod each q: (b [rows, L], a [rows, L, kN]). Each word is split into
    16-bit halves, each half's sum an int32 (sum |c| < 2^15), reduced mod q and the high one weighted by 2^16 mod q;
    one gathered row per term, the K terms unrolled."""
    qa = np.array(moduli, np.uint32).reshape(-1, 1)
    t = ModulusTable.create(moduli)
    idx, coef = seg["idx"], seg["coef"]
    lo = hi = None
    for j in range(idx.shape[1]):
        x = words[idx[:, j]]
        c = coef[:, j][:, None, None]
        tl, th = c * (x & np.uint32(0xFFFF)).astype(jnp.int32), c * (x >> np.uint32(16)).astype(jnp.int32)
        lo, hi = (tl, th) if lo is None else (lo + tl, hi + th)
    q32 = qa.astype(np.int32)[None]
    lo = jnp.remainder(lo, q32).astype(jnp.uint32)
    hi = jnp.remainder(hi, q32).astype(jnp.uint32)
    shift = np.array([pow(2, 16, int(x)) for x in moduli], np.uint32)[:, None]
    total = add_mod(lo, barrett_mul(hi, shift, t.q, t.barrett_mu, t.bits), qa)
    return add_mod(total[..., 0], seg["const"], qa.reshape(-1)), total[..., 1:]


def _segment_words(words, seg: dict, radix, moduli):
    """A segment's rows by the form its arguments hold: :func:`_sparse` or :func:`_fused`."""
    return _sparse(words, seg, moduli) if "idx" in seg else _fused(words, seg, radix, moduli)


def _launcher(g: Graph, params: Params, rt, items: int):
    """run(node, b [m, L], a [m, L, kN]) -> (b [R, L], a [R, L, kN]): a launch as one
    :func:`crossfhe.tfhe.ops.pbs_rows`, its test vectors made from ``rt["tables"]`` (the ``shared`` ones once per
    program, here); ``run.chunked(node, words, seg)``: a launch of more than :data:`LAUNCH_ROWS` rows from its
    sources' words and its chunked sparse segment."""
    index = {k: t for t, k in enumerate(table_keys(g))}
    shared = sorted({index[k] for n in g.nodes if n.op in LAUNCHES and n.attr("shared") for k in _launch_tables(n)})
    tv_shared = ops.make_test_vectors(params, rt["tables"][np.asarray(shared, np.int32)]) if shared else None

    def vectors(n: Node):
        keys = _launch_tables(n)
        if n.attr("shared"):
            return tv_shared, [shared.index(index[k]) for k in keys]
        return ops.make_test_vectors(params, rt["tables"][np.asarray([index[k] for k in keys], np.int32)]), \
            list(range(len(keys)))

    def run(n: Node, b, a):
        rows = _rows(n)
        tv, slot = vectors(n)
        return ops.pbs_rows(rt["key"], b, a, tv, tuple(r[0] for r in rows), tuple(slot[r[1]] for r in rows),
                            params=params, items=items)

    def chunked(n: Node, words, seg: dict):
        """A launch of more than :data:`LAUNCH_ROWS` rows: per chunk of rows, their segment rows (sparse) and
        their bootstraps (:func:`crossfhe.tfhe.ops.pbs_each`), the chunks one after another."""
        tv, slot = vectors(n)
        if slot != list(range(len(slot))):
            tv = tv[np.asarray(slot, np.int32)]

        def one(xs):
            b, a = _sparse(words, {"idx": xs[0], "coef": xs[1], "const": xs[2]}, params.moduli)
            return ops.pbs_each(rt["key"], b, a, tv, xs[3], params=params, items=items)

        ob, oa = jax.lax.map(one, (seg["idx"], seg["coef"], seg["const"], seg["slot"]))
        total = len(_rows(n))
        return ob.reshape((-1,) + ob.shape[2:])[:total], oa.reshape((-1,) + oa.shape[2:])[:total]

    run.chunked = chunked
    return run


class _Row:
    """A launch's output row, not sliced out: (launch node, row)."""

    __slots__ = ("launch", "row")

    def __init__(self, launch: int, row: int):
        self.launch, self.row = launch, row


def _interpret_fused(g: Graph, params: Params, inputs, rt, items: int, plan: dict) -> list:
    """:func:`interpret` with the linear operations as :func:`linear_plan`'s matrix products: a launch's outputs
    stay one array [R, ...] and the sources of a segment are gathered by runs of rows (one gather per run), so the
    program holds one product per segment, not one operation per addition or slice."""
    moduli = params.moduli
    launch = _launcher(g, params, rt, items)
    vals: list = [None] * len(g.nodes)

    def gather(sources):
        parts, run = [], None

        def flush():
            if run is not None:
                ob, oa = vals[run[0]]
                rows = np.asarray(run[1], np.int32)
                whole = len(rows) == ob.shape[0] and (rows == np.arange(len(rows))).all()
                parts.append((ob, oa) if whole else (ob[rows], oa[rows]))

        for x in sources:
            v = vals[x]
            if isinstance(v, _Row):
                if run is not None and run[0] == v.launch:
                    run[1].append(v.row)
                    continue
                flush()
                run = (v.launch, [v.row])
            else:
                flush()
                run = None
                parts.append((v[0][None], v[1][None]))
        flush()
        if len(parts) == 1:
            return parts[0]
        return jnp.concatenate([p[0] for p in parts]), jnp.concatenate([p[1] for p in parts])

    def words_of(sources):
        b, a = gather(sources)
        return jnp.concatenate([b[..., None], a], axis=-1)

    def segment(key):
        sources, mat, consts = plan[key]
        if not any(consts) and (mat.sum(axis=1) == 1).all() and (np.abs(mat).sum(axis=1) == 1).all():
            b, a = gather(sources)
            pick = mat.argmax(axis=1)  # each row one source as it is
            return (b, a) if (pick == np.arange(len(sources))).all() else (b[pick], a[pick])
        return _segment_words(words_of(sources), rt["linear"][str(key)], rt["linear"]["radix"], moduli)

    for i, n in enumerate(g.nodes):
        if n.op in LINEAR:
            continue  # computed where a launch or an output reads it
        if n.op == "input":
            vals[i] = inputs[g.inputs.index(i)]
        elif n.op in LAUNCHES and "slot" in rt["linear"][str(i)]:
            vals[i] = launch.chunked(n, words_of(plan[i][0]), rt["linear"][str(i)])
        elif n.op in LAUNCHES:
            ob, oa = launch(n, *segment(i))
            vals[i] = (ob[0], oa[0]) if n.op == "lookup" else (ob, oa)
        elif n.op == "pick":
            vals[i] = _Row(n.args[0], n.attr("index"))
        else:
            raise CircuitError(f"internal: no TFHE lowering for {n.op!r}")
    b, a = segment("out")
    return [(b[j], a[j]) for j in range(len(g.outputs))]


def constants(g: Graph, params: Params, *, fuse: bool = True) -> dict:
    """The program's constants: ``tables`` int32 [T, 2^p] (:func:`table_keys`) and either ``linear`` (the fused
    segments' arguments, :func:`linear_plan`; with ``fuse`` and where the plan exists) or ``consts``, by node index,
    each ``add_scalar``'s encoded constant (uint32 [limbs], c Delta mod each q) and ``mul_int``'s residues (c mod q):
    :func:`interpret` runs the one it finds, the same words either way."""
    keys = table_keys(g)
    size = 1 << params.message_bits
    out = {"tables": np.stack([g.const(k) for k in keys]).astype(np.int32) if keys else np.zeros((0, size), np.int32),
           "consts": {}}
    plan = linear_plan(g) if fuse else None
    if plan is not None:
        out["linear"] = _plan_constants(g, params, plan)
        return out
    for i, n in enumerate(g.nodes):
        if n.op == "add_scalar":
            out["consts"][str(i)] = np.asarray(ops.encode(params, n.attr("c")), dtype=np.uint32)
        elif n.op == "mul_int":
            out["consts"][str(i)] = np.array([n.attr("c") % q for q in params.moduli], dtype=np.uint32)
    return out


def interpret(g: Graph, params: Params, inputs, rt, items: int = 1) -> list:
    """The circuit on one item (traceable): ``inputs`` a tuple of (b uint32 [L], a uint32 [L, kN]) per input;
    returns (b, a) per output. Linear operations are :mod:`crossfhe.tfhe.ops`' (exact mod Q); each launch is one
    :func:`crossfhe.tfhe.ops.pbs_rows`, its test vectors made from ``rt["tables"]`` (once for the ``shared``
    launches)."""
    if "linear" in rt:
        return _interpret_fused(g, params, inputs, rt, items, linear_plan(g))
    moduli = params.moduli
    launch = _launcher(g, params, rt, items)
    vals: list = []
    for i, n in enumerate(g.nodes):
        a = [vals[x] for x in n.args]
        if n.op == "input":
            b_, a_ = inputs[g.inputs.index(i)]
            vals.append((b_, a_))
        elif n.op in ("add", "sub"):
            vals.append(linear_words(a[0][0], a[0][1], a[1][0], a[1][1], moduli=moduli, op=n.op))
        elif n.op == "neg":
            vals.append(linear_words(a[0][0], a[0][1], None, None, moduli=moduli, op="neg"))
        elif n.op == "add_scalar":
            vals.append((add_const_words(a[0][0], rt["consts"][str(i)], moduli=moduli), a[0][1]))
        elif n.op == "mul_int":
            vals.append(mul_const_words(a[0][0], a[0][1], rt["consts"][str(i)], moduli=moduli))
        elif n.op in LAUNCHES:
            ob, oa = launch(n, jnp.stack([v[0] for v in a]), jnp.stack([v[1] for v in a]))
            outs = [(ob[r], oa[r]) for r in range(len(_rows(n)))]
            vals.append(outs[0] if n.op == "lookup" else outs)
        elif n.op == "pick":
            vals.append(a[0][n.attr("index")])
        else:
            raise CircuitError(f"internal: no TFHE lowering for {n.op!r}")
    return [vals[o] for o in g.outputs]


# --------------------------------------------------------------------------------------------------
# The scheme
# --------------------------------------------------------------------------------------------------


class TFHEScheme(Scheme):
    """The compiler's TFHE (:mod:`crossfhe.tfhe`): keys are (ClientKey, ServerKey) of :func:`crossfhe.tfhe.ops.keygen`;
    encryption takes the client key (TFHE's LWE encryption is secret-key)."""

    name = "tfhe"
    annotated_after = frozenset(name for name, _ in PASSES)
    secret_key_encryption = True

    value_attrs = frozenset({"c", "table"})
    item_ndims = (1, 2)

    def input_attrs(self, index: int, spec: TFHEInt) -> dict:
        if not isinstance(spec, TFHEInt):
            raise CircuitError(f"input {index}: a TFHE circuit takes TFHEInt specs, got {spec!r}")
        return {"index": index} if spec.bits is None else {"index": index, "bits": spec.bits}

    def passes(self, optimize: bool = True):
        return list(PASSES) if optimize else list(PASSES[:2])

    def cost(self, graph, params, annotated: bool = True) -> dict:
        return cost(graph, params, annotated)

    def select(self, graph, precision=None, bits=None) -> Params:
        if precision is not None:
            raise ParameterError("precision= is a CKKS option; a TFHE circuit takes bits= (its message bits)")
        why = None
        for params in SELECTABLE:
            if bits is not None and params.message_bits < bits:
                continue
            try:
                analyze(ir.dead_code(graph), params)
            except CircuitError as e:
                why = e
                continue
            return params
        raise CircuitError(f"no TFHE preset (P2 to P10) fits this circuit{f' with {bits} bits' if bits else ''}: at "
                           f"{SELECTABLE[-1].name}, {why}")

    def prepare_params(self, params) -> Params:
        if not isinstance(params, Params):
            raise ParameterError(f"a TFHE circuit takes tfhe.Params (e.g. crossfhe.tfhe.presets.P4), got "
                                 f"{type(params).__name__}")
        return params.with_kernels(params.kernels.resolve())

    def requirements(self, graph, params) -> dict:
        """Whether the circuit needs the server key (it bootstraps) and how many bootstraps it runs; :meth:`keygen`
        makes the key pair either way (the client key's id is the server key's)."""
        c = cost(graph, params)
        return {"server_key": c["bootstraps"] > 0, "bootstraps": c["bootstraps"]}

    def keygen(self, params, req, seed):
        return ops.keygen(params, seed)

    @staticmethod
    def _check_key(key, kind, params, expected: str) -> None:
        """Refuse a ``key`` that is not a ``kind`` (``expected`` says what to pass) or not made for ``params``."""
        if not isinstance(key, kind):
            raise TypeError(f"{expected}, got {type(key).__name__}")
        if key.params.digest() != params.digest():
            what = "server key" if kind is ops.ServerKey else "client key"
            raise ParameterError(f"the {what} was made for {key.params.name or 'other parameters'}, the circuit for "
                                 f"{params.name or 'other ones'} (their digests differ)")

    def check_keys(self, graph, params, public, key_id) -> None:
        self._check_key(public, ops.ServerKey, params,
                        "a TFHE circuit runs with a tfhe ServerKey (circuit.keys.public)")
        if key_id is not None and public.key_id is not None and public.key_id != key_id:
            raise KeyMismatchError(f"the inputs were encrypted under key pair {key_id}, the server key is of "
                                   f"{public.key_id}: run with the server key of the client key that encrypted them")

    def check_client_key(self, params, secret) -> None:
        """Refuse what is not a client key of ``params`` (TFHE encrypts with the secret key)."""
        self._check_key(secret, ops.ClientKey, params,
                        "TFHE encrypts with the client key (circuit.keys, or its .secret)")

    def encrypt(self, params, secret, spec: TFHEInt, values):
        self.check_client_key(params, secret)
        v = np.asarray(values)
        if v.dtype == bool or not np.issubdtype(v.dtype, np.integer):
            raise ParameterError(f"a TFHE input takes integers, got dtype {v.dtype}")
        bits = spec.bits or params.message_bits
        if v.size and (v.min() < 0 or v.max() >= 1 << bits):
            bad = v[(v < 0) | (v >= 1 << bits)].flat[0]
            raise ParameterError(f"{spec!r} takes values in [0, {1 << bits}), got {bad}")
        ct = ops.encrypt(secret, v.astype(np.int64))
        return (ct.b, ct.a), v.shape, secret.key_id

    def decrypt(self, params, secret, graph, node, leaves, batch_shape):
        b, a = leaves
        return ops.decrypt(secret, LWECiphertext(jnp.asarray(b), jnp.asarray(a), params.moduli, secret.key_id))

    def leaf_specs(self, graph, params, node: int) -> list:
        """(item shape, dtype, moduli, limb axis) of each leaf: b [limbs] and a [limbs, kN] mod the moduli."""
        limbs, moduli = len(params.moduli), tuple(params.moduli)
        return [((limbs,), np.uint32, moduli, -1), ((limbs, params.long_dim), np.uint32, moduli, -2)]

    def runtime(self, graph, params, public, *, one_program: bool = True):
        return runtime(graph, params, public)

    def interpret(self, graph, params, inputs, rt, items: int = 1):
        return interpret(graph, params, inputs, rt, items)

    def x64(self, params) -> bool:
        return bool(ops.product_for(params).X64)

    def eager_output(self, builder, node: int, inputs) -> int:
        return node

    def eager_passes(self, params, public):
        """Eager semantics: the tables materialized; the ranges and noise are the values' own :class:`Bound` s,
        checked where a bootstrap reads a value and where it is decrypted (:mod:`crossfhe.api.tfhe`)."""
        return [("tables", lambda g, p: tables(g, p, check_outputs=False))]

    def with_constants(self, rt: dict, graph, params, public) -> dict:
        return {**rt, **constants(graph, params)}

    def params_digest(self, params) -> str:
        return params.digest()

    def kernels(self, params):
        return params.kernels.resolve()

    def custom_calls(self, params) -> tuple[str, ...]:
        from crossfhe.ring import ntt

        kernels = params.kernels.resolve()
        out = ntt.native_targets() if kernels.native else gpu_native.targets() if kernels.gpu else ()
        return out + (cpu_native.targets() if ops.product_for(params) is ops.NativeProduct else ())

    def build_id(self, params) -> str:
        from crossfhe.ring import ntt

        parts = []
        if params.kernels.resolve().native:
            lib = ntt.NATIVE.library()
            parts.append(Path(lib._name).name if lib is not None else "none")
        if params.kernels.resolve().gpu:
            parts.append(gpu_native.build_id())
        if ops.product_for(params) is ops.NativeProduct:
            parts.append(cpu_native.targets()[0])
        return "|".join(parts)


SCHEME = TFHEScheme()


__all__ = ["LAUNCHES", "LINEAR", "LOG2_P_FAIL", "MAX_TABLE", "PASSES", "SCHEME", "SELECTABLE",
           "Analysis", "Bound", "TFHEScheme", "acc_dedup", "analyze", "apply_linear", "batch", "bootstrap_depth",
           "constants", "cost", "cse", "dead_code", "describe", "evaluate_plain", "interpret", "ks_dedup",
           "noise_budget", "raw_table", "runtime", "table_for", "table_keys", "tables"]
