"""Concrete (concrete-python) on any of our TFHE circuits: reads a circuit exported by ``export_graph``
(benchmarks/graph_export.py: the unoptimized graph, its lookup tables, sample inputs and our outputs on them),
compiles the same integer computation with Zama's TFHE compiler, runs it encrypted one sample at a time, checks
that its outputs equal ours, and prints JSON.

    .venv-concrete/bin/python benchmarks/concrete_graph_peer.py GRAPH.json [GRAPH.json ...] [--samples 3]
        [--p-error 2^-64 | tfhe-rs] [--threads 1] [--warmup 1] [--linear affine|nodes] [--compress-keys]
        [--json PATH]

This file imports only numpy, the standard library and concrete (imported inside the functions that need it), not
crossfhe: it runs in ``.venv-concrete`` (benchmarks/setup_concrete.sh), and our tests import it for its NumPy
half. Output: a table on stderr and one line of JSON on stdout, ``{"suite": "concrete-graph", "concrete_python":
VERSION, "models": {FILE STEM: RECORD}, ...}``; a model that fails gives ``{"error": "..."}`` and the others go on.
Exit status 0, or 1 when a model failed or its decrypted outputs differ from ``expected``.

**The graph.** Nodes in topological order: ``input`` (attr ``index``, ``bits``), ``add``, ``sub``, ``neg``,
``add_scalar`` (c), ``mul_int`` (c), ``lookup`` (``table``: a key of ``consts``, 2^p ints in [0, 2^p)); each node's
``range`` [lo, hi] is the interval our compiler proved for it. Sources are the inputs and the lookup results; the
value a lookup reads or an output returns (a *sink*) lies in [0, 2^p), but values in between may leave it (our
linear operations are exact mod 2^(p+1), e.g. ``-3 x`` before ``+ 12``).

**The program** (:func:`plan`): a straight-line list of integer steps that :func:`execute` runs either on NumPy
int64 arrays (one entry per sample; every value is checked against its planned interval) or on Concrete tracers,
so the tests check the very order of operations Concrete compiles. Two forms (``--linear``):

- ``affine`` (default): walking the graph in order, linear nodes only update affine forms c + sum_s w_s v_s over
  the sources (equal sources merged, as our runtime's ``linear_plan`` does); at each sink its form is emitted as
  clear-constant multiplications, additions and subtractions in an order chosen so that every intermediate value,
  every product and every constant stays in [0, 2^p) by interval arithmetic over the sources' ranges: greedily the
  constant first, then positive terms (``acc + v * w``), then negative ones (``acc - v * |w|``, or ``c - v * |w|``
  first), taking the first step that keeps the interval inside; a weight whose product could reach 2^p is split
  into smaller multiples of the same source. A sink with no such order (not met in our circuits so far) is emitted
  in the plain order and counted in ``sinks_wider_than_p``.
- ``nodes``: one Concrete operation per graph node, as traced; values outside [0, 2^p) make Concrete widen (a
  negative intermediate makes its whole linear component signed, p + 1 bits, lookups included).

**Lookups.** ``fhe.LookupTable(table)[v]`` with the table's 2^p ints. Concrete builds a TLU's table by evaluating
``table[k]`` for every k its input's original width admits (0 .. 2^w - 1, then the negatives for a signed input);
an entry it cannot evaluate is filled from its neighbours. With the hints below w = p, so the table is ours entry
for entry. ``fhe.univariate(lambda v, t=table: t[v])`` would give the same table (Concrete evaluates it the same
way); LookupTable is preferred because its output width comes from the table's values, not from tracing a Python
function, and for an input whose measured width is below p it still indexes the first 2^w entries correctly.

**Bit widths.** Concrete gives a value the width of the bounds measured on the inputset, unified over each linear
component (an addition's operands and result share one width; a clear constant gets one bit more), at least
``fhe.hint(v, bit_width=b)``. Every value the program makes is hinted with b = p where its planned interval lies in
[0, 2^p) (else the width Concrete would need for it), so every lookup input is p bits as in our circuit, even
where the inputset reaches fewer. The inputset: the file's samples, all zeros, all maximal (2^input_bits - 1), and
8 uniform random input vectors (seed 0). With ``affine`` on our circuits Concrete assigns p bits to every
encrypted value, including the inputs (which our circuit encrypts at p bits of message space too, of which an
input uses its declared ``input_bits``): the record's ``tlu_input_bits`` and ``max_encrypted_bits`` say what it
assigned and ``bits_equal_p`` whether every lookup input and encrypted value is exactly p bits.

**Configuration.** ``fhe.Configuration(p_error=P, global_p_error=None)``: P per PBS (``--p-error``, default 2^-64,
the bound of our presets); ``--threads N`` sets the thread variables before concrete is imported and pins the
process to N of its CPUs; with N = 1 Concrete's loop, dataflow and auto parallelization are off. Evaluation keys
uncompressed unless ``--compress-keys``; ``optimize_tlu_based_on_measured_bounds`` stays off.

**Measured.** compile s (tracing, inputset, bit widths, parameter optimization, MLIR), keygen s
(``keygen(force=True)``), evaluation key bytes (serialized) and Concrete's bootstrap / key-switch key sizes, its
statistics (PBS and key-switch counts, complexity, parameters), the program's size, and per sample, one at a
time after ``--warmup`` untimed runs, encrypt / run / decrypt / total ms (median, min, max); ``exact`` and
``mismatches`` (output values differing from ``expected`` over all samples run); load average and peak RSS.

**What Concrete made of it** (concrete-python 2.10, ``--linear affine``, 2^-64 per PBS, one thread, through
bench_taurus.py on 2026-12-01): the GPT-2 head d_model 8, 2 heads, 3 tokens at P4 (242 lookups, 24 two-bit
inputs): every encrypted value 4 bits, inputs included (``bits_equal_p``), 239 TLU nodes, 80 PBS and 80 key
switches in its statistics, 889 ms per sample (11 ms per reported PBS, 3.7 per TLU node; which of the two it runs
was not determined), all outputs equal ours. d_model 64, 4 heads, 4 tokens at P6 (1424 lookups, 160 of them
reading one other lookup's result alone): every value 6 bits, 1264 PBS (our ``compose`` pass gives the same
count).

**Caveats.** Concrete picks its own TFHE parameters for this circuit (optimizing for its norms and p_error), where
our presets are fixed; a PBS failure (probability p_error each) would show as a mismatch; one sample per run (no
batching across samples), scalar operations (the graph has no tensor structure to exploit).
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from pathlib import Path

import numpy as np

FORMAT = "crossfhe-tfhe-graph/1"
OPS = ("input", "add", "sub", "neg", "add_scalar", "mul_int", "lookup")
sys.path.insert(0, str(Path(__file__).resolve().parent))  # concrete_common.py, also when loaded by path

from concrete_common import (  # noqa: E402
    compile_and_run,
    parse_probability,
    set_threads,
    statistics_of,
)
from concrete_common import jsonable as _jsonable  # noqa: E402
from concrete_common import load_average as _load_average  # noqa: E402
from concrete_common import log as _log  # noqa: E402
from concrete_common import peak_rss_mib as _peak_rss_mib  # noqa: E402

# --------------------------------------------------------------------------------------------------
# The exported graph
# --------------------------------------------------------------------------------------------------


def _attr(v):
    """An attribute as written by crossfhe.api.ir.graph_to_json (tuples as {"t": [...]}) -> Python values."""
    if isinstance(v, dict):
        return tuple(_attr(x) for x in v["t"])
    return v


def load_graph(path) -> dict:
    """The file of ``export_graph``, checked: ``nodes`` (list of {op, args, attrs, loc}), ``inputs`` / ``outputs``
    (node indices), ``tables`` ({key: int64 [2^p]}), ``p``, ``input_bits``, ``q`` int64 [n, inputs], ``expected``
    int64 [n, outputs], ``name``. ValueError for a malformed file."""
    data = json.loads(Path(path).read_text())
    if data.get("format") != FORMAT:
        raise ValueError(f"{path}: format {data.get('format')!r}, expected {FORMAT!r}")
    g, p = data["graph"], int(data["p"])
    if g.get("scheme") != "tfhe":
        raise ValueError(f"{path}: a {g.get('scheme')!r} graph, not tfhe")
    tables = {}
    for key, (dtype, shape, b64) in g["consts"].items():
        t = np.frombuffer(base64.b64decode(b64), dtype=np.dtype(dtype)).reshape(shape).astype(np.int64)
        if t.shape != (1 << p,) or t.min() < 0 or t.max() >= 1 << p:
            raise ValueError(f"{path}: table {key} has shape {t.shape} or values outside [0, 2^{p})")
        tables[key] = t
    nodes = []
    for i, (op, args, attrs, loc) in enumerate(g["nodes"]):
        if op not in OPS:
            raise ValueError(f"{path}: node %{i} is {op!r}; this peer handles {OPS}")
        if any(not 0 <= a < i for a in args) or len(args) != {"input": 0, "add": 2, "sub": 2}.get(op, 1):
            raise ValueError(f"{path}: node %{i} ({op}) has operands {args}")
        a = {k: _attr(v) for k, v in attrs}
        if op == "lookup" and a.get("table") not in tables:
            raise ValueError(f"{path}: node %{i} looks up a missing table {a.get('table')!r}")
        nodes.append({"op": op, "args": list(args), "attrs": a, "loc": loc})
    q = np.asarray(data["q"], dtype=np.int64).reshape(len(data["q"]), -1)
    expected = np.asarray(data["expected"], dtype=np.int64).reshape(len(data["expected"]), -1)
    inputs, outputs = list(g["inputs"]), list(g["outputs"])
    if q.shape[1] != len(inputs) or expected.shape != (len(q), len(outputs)):
        raise ValueError(f"{path}: q {q.shape}, expected {expected.shape} for {len(inputs)} inputs, "
                         f"{len(outputs)} outputs")
    return {"name": data.get("name", Path(path).stem), "p": p, "params": data.get("params"),
            "input_bits": [int(b) for b in data["input_bits"]], "nodes": nodes, "inputs": inputs, "outputs": outputs,
            "tables": tables, "q": q, "expected": expected}


def _range(g: dict, i: int) -> tuple[int, int]:
    """Node i's proved interval (its ``range``; for an input without one [0, 2^bits - 1], for a lookup without one
    its table's image)."""
    n = g["nodes"][i]
    r = n["attrs"].get("range")
    if r is not None:
        return int(r[0]), int(r[1])
    if n["op"] == "input":
        return 0, (1 << int(n["attrs"].get("bits") or g["p"])) - 1
    if n["op"] == "lookup":
        t = g["tables"][n["attrs"]["table"]]
        return int(t.min()), int(t.max())
    raise ValueError(f"node %{i} ({n['op']}) has no range; export it after the tables pass")


def width(lo: int, hi: int) -> int:
    """Bits of the smallest integer type holding [lo, hi] (unsigned if lo >= 0, else two's complement), as
    Concrete's ``Integer.that_can_represent``."""
    if lo >= 0:
        return max(1, int(hi).bit_length())
    return max(int(-lo - 1).bit_length(), int(max(hi, 0)).bit_length()) + 1


# --------------------------------------------------------------------------------------------------
# The program: one straight-line list of integer steps for NumPy and Concrete alike
# --------------------------------------------------------------------------------------------------


class _Program:
    """Steps ``(op, dst, operands...)`` over numbered values, each value's planned interval and hint width."""

    def __init__(self, p: int):
        self.p, self.top = p, (1 << p) - 1
        self.steps: list[tuple] = []
        self.ranges: list[tuple[int, int]] = []

    def emit(self, op: str, lo: int, hi: int, *operands) -> int:
        dst = len(self.ranges)
        self.ranges.append((int(lo), int(hi)))
        self.steps.append((op, dst, *operands))
        return dst

    def fits(self, lo: int, hi: int) -> bool:
        return 0 <= lo and hi <= self.top

    def bits(self, v: int) -> int:
        lo, hi = self.ranges[v]
        return self.p if self.fits(lo, hi) else max(self.p, width(lo, hi))


def _chunks(w: int, hi: int, top: int) -> list[int]:
    """|w| as a sum of multiples no larger than top // hi (so each product v * k of a v in [.., hi] fits top), with
    w's sign; [w] when w fits or cannot be split."""
    cap = top // hi if hi > 0 else abs(w)
    if cap < 1 or abs(w) <= cap:
        return [w]
    sign, rest, out = (1 if w > 0 else -1), abs(w), []
    while rest:
        k = min(cap, rest)
        out.append(sign * k)
        rest -= k
    return out


def _emit_form(pr: _Program, form: tuple[dict, int], src_val: dict, src_rng: dict, stats: dict,
               any_source: int) -> int:
    """Emit c + sum_s w_s v_s (``form``: ({source: w}, c)); see the module docstring (``affine``)."""
    terms, c = form
    items = []
    for s in sorted(terms):
        w = terms[s]
        lo, hi = src_rng[s]
        if w == 0 or (lo == 0 and hi == 0):
            continue
        ks = _chunks(w, max(abs(lo), abs(hi)), pr.top)
        stats["split_terms"] += len(ks) > 1
        items += [(s, k) for k in ks]
    if not items:  # a constant (no source reaches it): v * 0 + c, as Concrete needs an encrypted value
        zero = pr.emit("mul", 0, 0, src_val[any_source], 0)
        return pr.emit("add_c", c, c, zero, c) if c else zero
    cur, lo, hi, pending, ok = None, 0, 0, c, True

    def product(s, k):  # interval of v_s * |k|
        a, b = src_rng[s]
        return min(a * abs(k), b * abs(k)), max(a * abs(k), b * abs(k))

    while items or pending:
        choice = None
        if pending and cur is not None and pr.fits(lo + pending, hi + pending):
            choice = "const"
        if choice is None:
            for j, (s, k) in enumerate(items):
                plo, phi = product(s, k)
                if not pr.fits(plo, phi):
                    continue
                if k > 0:
                    nlo, nhi = (lo + plo, hi + phi)
                elif cur is None:
                    nlo, nhi = (pending - phi, pending - plo)
                else:
                    nlo, nhi = (lo - phi, hi - plo)
                if pr.fits(nlo, nhi) and (k > 0 or choice is None):
                    choice = j
                    if k > 0:
                        break
        if choice is None:  # no step keeps the interval inside [0, 2^p): take the next one as it comes
            ok = False
            choice = "const" if pending and cur is not None else 0
        if choice == "const":
            cur, lo, hi, pending = pr.emit("add_c", lo + pending, hi + pending, cur, pending), lo + pending, \
                hi + pending, 0
            continue
        s, k = items.pop(choice)
        plo, phi = product(s, k)
        prod = src_val[s] if abs(k) == 1 else pr.emit("mul", plo, phi, src_val[s], abs(k))
        if k > 0:
            lo, hi = (plo, phi) if cur is None else (lo + plo, hi + phi)
            cur = prod if cur is None else pr.emit("add", lo, hi, cur, prod)
        elif cur is None:
            lo, hi, c0, pending = pending - phi, pending - plo, pending, 0
            cur = pr.emit("rsub_c", lo, hi, c0, prod)
        else:
            lo, hi = lo - phi, hi - plo
            cur = pr.emit("sub", lo, hi, cur, prod)
    stats["sinks"] += 1
    stats["sinks_wider_than_p"] += not ok
    return cur


def plan(g: dict, linear: str = "affine") -> dict:
    """The program of graph ``g`` (:func:`load_graph`): ``steps``, ``ranges`` (planned interval per value),
    ``bits`` (hint width per value), ``outputs`` (value per graph output), ``inputs`` (value per input position),
    and ``stats``: ``sinks`` (emitted affine forms), ``sinks_wider_than_p``, ``split_terms``, ``forms_equal_ranges``
    (each sink's planned interval equals the exporter's ``range``), ``steps``, ``lookups``, ``max_bits``."""
    if linear not in ("affine", "nodes"):
        raise ValueError(f"linear must be 'affine' or 'nodes', got {linear!r}")
    pr = _Program(g["p"])
    nodes = g["nodes"]
    stats = {"linear": linear, "sinks": 0, "sinks_wider_than_p": 0, "split_terms": 0, "forms_equal_ranges": True}
    in_val = {}
    for pos, i in enumerate(g["inputs"]):
        in_val[i] = pr.emit("input", *_range(g, i), pos)
    if linear == "nodes":
        val: dict[int, int] = dict(in_val)
        for i, n in enumerate(nodes):
            if n["op"] == "input":
                continue
            lo, hi = _range(g, i)
            a, c = [val[j] for j in n["args"]], n["attrs"].get("c")
            if n["op"] == "lookup":
                val[i] = pr.emit("lookup", lo, hi, a[0], n["attrs"]["table"])
            elif n["op"] in ("add", "sub"):
                val[i] = pr.emit(n["op"], lo, hi, a[0], a[1])
            elif n["op"] == "neg":
                val[i] = pr.emit("neg", lo, hi, a[0])
            elif n["op"] == "add_scalar":
                val[i] = pr.emit("add_c", lo, hi, a[0], int(c))
            else:
                val[i] = pr.emit("mul", lo, hi, a[0], int(c))
        outputs = [val[o] for o in g["outputs"]]
        stats["values_outside_p_bits"] = sum(not pr.fits(*pr.ranges[v]) for v in range(len(pr.ranges)))
    else:
        forms: dict[int, tuple[dict, int]] = {}
        src_val, src_rng = dict(in_val), {i: _range(g, i) for i in in_val}
        done: dict[int, int] = {}

        def sink(i: int) -> int:
            if i not in done:
                terms, c = forms[i]
                if c == 0 and len(terms) == 1 and next(iter(terms.values())) == 1:
                    done[i] = src_val[next(iter(terms))]
                else:
                    done[i] = _emit_form(pr, forms[i], src_val, src_rng, stats, g["inputs"][0])
                    if pr.ranges[done[i]] != _range(g, i):
                        stats["forms_equal_ranges"] = False
            return done[i]

        for i, n in enumerate(nodes):
            op, args = n["op"], n["args"]
            if op in ("input", "lookup"):
                if op == "lookup":
                    src_val[i] = pr.emit("lookup", *_range(g, i), sink(args[0]), n["attrs"]["table"])
                    src_rng[i] = _range(g, i)
                forms[i] = ({i: 1}, 0)
            elif op in ("add", "sub"):
                (ta, ca), (tb, cb) = forms[args[0]], forms[args[1]]
                sign = 1 if op == "add" else -1
                t = dict(ta)
                for s, w in tb.items():
                    t[s] = t.get(s, 0) + sign * w
                forms[i] = ({s: w for s, w in t.items() if w}, ca + sign * cb)
            elif op == "neg":
                ta, ca = forms[args[0]]
                forms[i] = ({s: -w for s, w in ta.items()}, -ca)
            elif op == "add_scalar":
                ta, ca = forms[args[0]]
                forms[i] = (ta, ca + int(n["attrs"]["c"]))
            else:  # mul_int
                ta, ca = forms[args[0]]
                k = int(n["attrs"]["c"])
                forms[i] = ({s: w * k for s, w in ta.items() if w * k}, ca * k)
        outputs = [sink(o) for o in g["outputs"]]
    bits = [pr.bits(v) for v in range(len(pr.ranges))]
    stats.update(steps=len(pr.steps), lookups=sum(s[0] == "lookup" for s in pr.steps), max_bits=max(bits))
    return {"p": g["p"], "steps": pr.steps, "ranges": pr.ranges, "bits": bits, "outputs": outputs,
            "inputs": [in_val[i] for i in g["inputs"]], "stats": stats}


def execute(prog: dict, inputs: list, *, lookup, hint=None, check: bool = False) -> list:
    """Run ``prog`` (:func:`plan`) on ``inputs`` (one value per input position: NumPy int64 arrays of one shape,
    or Concrete tracers): ``lookup(v, table_key)`` applies a table, ``hint(v, bits)`` (optional) marks each value
    made with its planned width. ``check``: every value must lie in its planned interval (NumPy; AssertionError
    naming the step otherwise). Returns the outputs' values."""
    vals: list = [None] * len(prog["ranges"])
    for st in prog["steps"]:
        op, dst = st[0], st[1]
        if op == "input":
            v = inputs[st[2]]
        elif op == "lookup":
            v = lookup(vals[st[2]], st[3])
        elif op == "add":
            v = vals[st[2]] + vals[st[3]]
        elif op == "sub":
            v = vals[st[2]] - vals[st[3]]
        elif op == "neg":
            v = -vals[st[2]]
        elif op == "add_c":
            v = vals[st[2]] + st[3]
        elif op == "rsub_c":
            v = st[2] - vals[st[3]]
        elif op == "mul":
            v = vals[st[2]] * st[3]
        else:
            raise ValueError(f"unknown step {st}")
        if hint is not None:
            v = hint(v, prog["bits"][dst])
        if check:
            lo, hi = prog["ranges"][dst]
            arr = np.asarray(v)
            assert arr.min() >= lo and arr.max() <= hi, f"step {st}: [{arr.min()}, {arr.max()}] not in [{lo}, {hi}]"
        vals[dst] = v
    return [vals[o] for o in prog["outputs"]]


def plain_outputs(g: dict, prog: dict, q) -> np.ndarray:
    """The program on inputs ``q`` int64 [n, inputs] in NumPy (intervals checked): int64 [n, outputs]."""
    q = np.asarray(q, dtype=np.int64)
    tables = g["tables"]
    outs = execute(prog, [q[:, i] for i in range(q.shape[1])], lookup=lambda v, key: tables[key][v], check=True)
    return np.stack([np.broadcast_to(np.asarray(o, dtype=np.int64), (len(q),)) for o in outs], axis=1)


def inputset(g: dict, random: int = 8, seed: int = 0) -> list[np.ndarray]:
    """The file's samples, all zeros, all maximal (2^input_bits - 1) and ``random`` uniform input vectors."""
    top = (1 << np.asarray(g["input_bits"], dtype=np.int64)) - 1
    rng = np.random.default_rng(seed)
    out = [row.copy() for row in g["q"]] + [np.zeros_like(top), top.copy()]
    out += [rng.integers(0, top + 1).astype(np.int64) for _ in range(random)]
    return out


# --------------------------------------------------------------------------------------------------
# One model
# --------------------------------------------------------------------------------------------------


def build_function(g: dict, prog: dict):
    """The concrete function of the program: one encrypted vector ``x`` [inputs], one output per graph output."""
    from concrete import fhe

    luts = {key: fhe.LookupTable(t) for key, t in g["tables"].items()}
    n_in = len(g["inputs"])

    def f(x):
        outs = execute(prog, [x[i] for i in range(n_in)], lookup=lambda v, key: luts[key][v],
                       hint=lambda v, b: fhe.hint(v, bit_width=b))
        return tuple(outs) if len(outs) > 1 else outs[0]

    return f


def circuit_info(circuit, p: int) -> dict:
    """Widths Concrete assigned (each TLU's input; the widest encrypted value) and its statistics."""
    graph = circuit.graph
    tlu_bits = [int(graph.ordered_preds_of(n)[0].output.dtype.bit_width)
                for n in graph.query_nodes(operation_filter="tlu")]
    max_enc = int(graph.maximum_integer_bit_width(is_encrypted_filter=True, assigned_bit_width=True))
    info = {
        "tlus": len(tlu_bits), "tlu_input_bits": sorted(set(tlu_bits)),
        "tlu_input_bits_count": {str(b): tlu_bits.count(b) for b in sorted(set(tlu_bits))},
        "max_encrypted_bits": max_enc, "bits_equal_p": bool(max_enc == p and all(b == p for b in tlu_bits)),
    }
    info.update(statistics_of(circuit))
    return info


def run_model(path: Path, samples: int, warmup: int, p_error: float, threads: int, compress: bool,
              linear: str) -> dict:
    rec: dict = {"file": str(path), "load_start": _load_average()}
    g = load_graph(path)
    p = g["p"]
    prog = plan(g, linear)
    rec.update(name=g["name"], params=g["params"], p=p, inputs=len(g["inputs"]), outputs=len(g["outputs"]),
               input_bits=sorted(set(g["input_bits"])), graph_nodes=len(g["nodes"]), lookups=prog["stats"]["lookups"],
               tables=len(g["tables"]), program=prog["stats"])
    rec["export_consistent"] = bool(np.array_equal(plain_outputs(g, prog, g["q"]), g["expected"]))
    if not rec["export_consistent"]:
        _log(f"# {path.name}: the NumPy run of the program differs from the file's 'expected'")

    rec.update(compile_and_run(build_function(g, prog), inputset(g), p_error, threads, compress,
                               g["q"], g["expected"], samples, warmup, path.stem,
                               lambda circuit: circuit_info(circuit, p)))
    return rec


# --------------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------------


def _table(out: dict) -> None:
    _log(f"\n{'model':<22}{'p':>3}{'lookups':>8}{'n':>3}{'exact':>6}{'ms/sample':>10}{'run ms':>9}{'compile s':>10}"
         f"{'keygen s':>9}{'PBS':>7}{'TLU bits':>9}{'eval keys MiB':>14}")
    for name, r in out["models"].items():
        if "error" in r:
            _log(f"{name:<22}   {r['error'][:100]}")
            continue
        if "samples" not in r:
            continue
        c, k = r["circuit"], r["keys"]
        ek = k.get("evaluation_keys_bytes")
        bits = ",".join(str(b) for b in c["tlu_input_bits"])
        _log(f"{name:<22}{r['p']:>3}{r['lookups']:>8}{r['samples']:>3}{'yes' if r['exact'] else 'NO':>6}"
             f"{r['ms_per_sample']:>10.0f}{r['run_ms']['median']:>9.0f}{r['compile_s']:>10.1f}{r['keygen_s']:>9.1f}"
             f"{c['pbs_count']:>7}{bits:>9}{(float('nan') if ek is None else ek / 2**20):>14.1f}")
    _log(f"threads {out['threads']}, p_error {out['p_error_requested']:.2e}, linear {out['linear']}, load "
         f"{out['load']}, peak RSS {out['peak_rss_mib']:.0f} MiB, {out['wall_s']:.0f} s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("graphs", nargs="+", type=Path, help="files written by benchmarks/graph_export.export_graph")
    ap.add_argument("--samples", type=int, default=3, help="samples of each file's q run encrypted, one at a time")
    ap.add_argument("--p-error", default="2^-64", help="failure probability per PBS: 2^-64 (default), tfhe-rs, 1e-20")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=1, help="untimed encrypted runs before the timed ones")
    ap.add_argument("--linear", choices=("affine", "nodes"), default="affine",
                    help="affine: each lookup input as one ordered affine form (default); nodes: one op per node")
    ap.add_argument("--compress-keys", action="store_true", help="compress_evaluation_keys (seeded keys)")
    ap.add_argument("--json", type=Path, help="also write the JSON object here")
    args = ap.parse_args(argv)
    try:
        p_error = parse_probability(args.p_error)
    except ValueError as e:
        ap.error(f"--p-error: {e}")
    if args.threads < 1 or args.samples < 1 or args.warmup < 0:
        ap.error("--threads and --samples must be >= 1, --warmup >= 0")
    threads = set_threads(args.threads)
    t_start = time.perf_counter()

    from concrete import fhe  # after the thread variables

    out = {"suite": "concrete-graph", "concrete_python": fhe.__version__, "python": sys.version.split()[0],
           "numpy": np.__version__, "threads": args.threads, "threads_applied": threads,
           "p_error_requested": p_error, "samples": args.samples, "warmup": args.warmup, "linear": args.linear,
           "models": {}}
    for path in args.graphs:
        try:
            out["models"][path.stem] = run_model(path, args.samples, args.warmup, p_error, args.threads,
                                                 args.compress_keys, args.linear)
        except Exception as e:  # one failing model must not stop the others
            _log(f"# {path.name}: {type(e).__name__}: {e}")
            out["models"][path.stem] = {"file": str(path), "error": f"{type(e).__name__}: {e}"}
    out["load"] = _load_average()
    out["peak_rss_mib"] = _peak_rss_mib()
    out["wall_s"] = time.perf_counter() - t_start
    _table(out)
    text = json.dumps(_jsonable(out))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    print(text, flush=True)
    ok = all("error" not in r and r.get("exact") and r.get("export_consistent") for r in out["models"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
