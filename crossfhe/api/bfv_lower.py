"""The BFV scheme of the compiler: symbolic integer vectors mod t, the passes (CSE, rotation hoisting, lazy
relinearization, the noise-budget check) and the lowering onto :mod:`crossfhe.core.evaluator` and
:mod:`crossfhe.bfv.ops` with every key, plan and constant an argument of the one program.

Values. A :class:`~crossfhe.api.specs.BFVVector` of ``length`` integers mod t (t = ``params.t``) is zero-padded
to the power of two ``width`` >= length and repeated over the slots: batch encoding (:mod:`crossfhe.bfv.encoder`)
arranges the N slots as a 2 x N/2 matrix, and both rows hold the padded vector N / (2 width) times, so slot j of
either row holds value j mod width. Operations are slot-wise mod t, like NumPy on int arrays reduced mod t; an
operand of length 1 (a scalar, or a 1-value vector) broadcasts. ``rotate(k)`` rotates the width-periodic slots left
by k (value j of the result is value (j + k) mod width: one row rotation, X -> X^(5^k), which moves every period the
same way); ``sum()`` puts the sum of the width slots in every slot (log2(width) rotations); ``x @ y`` is
``(x * y).sum()``. For a length that is not a power of two, the values are those of NumPy on the zero-padded
vector: a scalar is added as a plaintext zero-padded like the vector, and where a rotation or a broadcast single
value has filled the padding, ``sum()`` and ``rotate`` first multiply by a 0/1 plaintext (:class:`~crossfhe.api.
trace.SlotVector`). Integer constants are taken mod t when the parameters are known; inputs must lie in [0, t).

Traced ops (what the operators record): ``input {index, length, width}``, ``add``, ``sub``, ``neg``,
``add_scalar {c}``, ``add_plain {const}``, ``mul`` (two ciphertexts: HPS tensor, scale and relinearization),
``mul_int {c}``, ``mul_plain {const}``, ``rotate {k}`` (0 < k < width), ``output {length, width}``. The passes add
``rotate_many {ks}`` and ``pick {k}`` (hoisted rotations), ``tensor`` (a degree-2 product: d0, d1 EVAL and d2
COEFF over Q) and ``relin``, and annotate every node with its estimated noise ``budget`` in bits.

Noise (:func:`noise_budgets`). The invariant noise v (a ciphertext decrypts while |v| < 1/2; the budget is
-log2(2 |v|), :func:`crossfhe.bfv.ops.noise_budget`) is estimated per node from the growth model of
:mod:`crossfhe.bfv.ops`, in its typical (not worst) case and rounded up: a fresh encryption t (2 sqrt(N)) / Q; a sum
adds; an integer product multiplies by |c| (c centered mod t); a plaintext product by 2 ||m||_2 (m the plaintext's
centered coefficients); a ciphertext product gives N t (v_a + v_b); a key switch (relinearization, rotation) adds
t e / Q with e = 2 sqrt(keyswitch_noise_bound). The estimate stays below the budget measured through the secret key
(the tests check it on their circuits) and admits the depth each preset was measured to reach
(:mod:`crossfhe.bfv.presets`), and not one product more. A circuit whose estimate falls below :data:`MARGIN_BITS`
anywhere is refused at compile time, naming the operation, its line and the smallest preset that fits.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import jax
import numpy as np

from crossfhe.api import ir
from crossfhe.api.circuit import RingScheme, key_switch_counts
from crossfhe.api.ir import Builder, CircuitError, Graph, Node
from crossfhe.api.passes import cse, dead_code, hoist_rotations
from crossfhe.api.specs import BFVVector
from crossfhe.bfv import encoder, noise, presets
from crossfhe.bfv import ops as bfv_ops
from crossfhe.bfv.ciphertext import Ciphertext, EvaluationKeys
from crossfhe.bfv.params import Params
from crossfhe.core import evaluator as ev
from crossfhe.core import keyswitch as ks
from crossfhe.core.keys import PublicKey, SecretKey
from crossfhe.errors import KeyMismatchError, ParameterError
from crossfhe.kernels import as_kernel_set
from crossfhe.math.modular import add_mod, shoup_mul
from crossfhe.ring import poly
from crossfhe.ring.poly import Domain, RNSPoly

_ARRAYS = (np.ndarray, jax.Array, list, tuple)

MARGIN_BITS = 4
"""The estimated noise budget every value must keep (bits): below it the compiler refuses the circuit."""


def _width(length: int) -> int:
    return 1 << max(0, (length - 1).bit_length())


def _is_int(c) -> bool:
    return isinstance(c, (int, np.integer)) and not isinstance(c, (bool, np.bool_))


# --------------------------------------------------------------------------------------------------
# Passes
# --------------------------------------------------------------------------------------------------

_LINEAR = frozenset({"add", "sub", "neg", "mul_int", "add_scalar", "add_plain"})
"""Ops that apply to a degree-2 ciphertext (d0, d1, d2) polynomial by polynomial: a sum of products may stay in the
degree-2 form through them."""
_KEY_SWITCHES = frozenset({"mul", "relin", "rotate", "rotate_many", "swap_rows"})


def lazy_relinearization(g: Graph, params: Params) -> Graph:
    """Sums of ciphertext products relinearized once: ``mul`` becomes ``tensor`` (a degree-2 ciphertext over Q, the
    HPS product already scaled by t/Q: :func:`crossfhe.bfv.ops.tensor_traced`) where its value only flows, through
    linear ops (add, sub, neg, integer and constant terms), into one node that needs two polynomials, and one
    ``relin`` is placed after the last linear op.

    Exactness: degree-2 ciphertexts add word by word mod Q, and decrypting (1, s, s^2) is linear, so the degree-2 sum
    decrypts to the sum of the products, with the sum of their noises (each product scaled and rounded on its own:
    Q R leaves room for one tensor only); one key switch then replaces k, so the noise is lower than with k
    relinearizations. A group is made lazy only when it holds at least two products: the count of relinearizations
    never grows, and a single product keeps its fused program."""
    users = g.users()
    n_nodes = len(g.nodes)
    uses = [len(u) for u in users]
    for o in g.outputs:
        uses[o] += 1

    def next_linear(i: int) -> int | None:
        """The one user of node i when there is exactly one and it is linear (the degree-2 value flows on)."""
        if uses[i] == 1 and users[i] and g.nodes[users[i][0]].op in _LINEAR:
            return users[i][0]
        return None

    deg2 = [False] * n_nodes
    for i, n in enumerate(g.nodes):
        if n.op == "mul":
            deg2[i] = True
        elif n.op in _LINEAR and any(deg2[a] and next_linear(a) == i for a in n.args):
            deg2[i] = True
    # group every degree-2 node under the root its value flows into (the node that is relinearized)
    root = list(range(n_nodes))
    for i in range(n_nodes - 1, -1, -1):
        if deg2[i]:
            u = next_linear(i)
            if u is not None and deg2[u]:
                root[i] = root[u]
    products: dict[int, int] = {}
    for i, n in enumerate(g.nodes):
        if n.op == "mul":
            products[root[i]] = products.get(root[i], 0) + 1
    lazy = {i for i in range(n_nodes) if deg2[i] and products.get(root[i], 0) >= 2}
    if not lazy:
        return g

    def visit(b: Builder, i: int, n: Node, args: list[int]) -> int:
        if i not in lazy:
            return b.add(n.op, args, dict(n.attrs), n.loc, merge=False)
        v = b.add("tensor" if n.op == "mul" else n.op, args, dict(n.attrs), n.loc, merge=False)
        return b.add("relin", (v,), {}, n.loc, merge=False) if root[i] == i else v

    return ir.dead_code(ir.rebuild(g, visit))


def multiplicative_depth(g: Graph) -> int:
    """The largest number of ciphertext products (``mul``, ``tensor``) on a path from an input to an output (plaintext
    and integer products cost noise, :func:`noise_budgets`, but are not counted)."""
    depth = []
    for n in g.nodes:
        d = max((depth[a] for a in n.args), default=0)
        depth.append(d + (1 if n.op in ("mul", "tensor") else 0))
    return max((depth[o] for o in g.outputs), default=0)


def noise_budgets(g: Graph, params: Params) -> list[float]:
    """Per node, the estimated noise budget in bits, -log2(2 v) for the estimated invariant noise v of the growth
    model (:func:`crossfhe.bfv.noise.growth`), at most log2(Q / t) (a value without noise, e.g. a product by 0);
    hoisted rotations (``rotate_many``) give the budget of each of their rotations."""
    model = noise.model(params)
    lv: list[float] = []
    for n in g.nodes:
        op = {"output": "neg", "pick": "neg", "rotate_many": "rotate", "swap_rows": "rotate"}.get(n.op, n.op)
        values = g.const(n.attr("const")) if n.op == "mul_plain" else None
        try:
            lv.append(noise.growth(params, model, op, [lv[x] for x in n.args], c=n.attr("c"), plaintext=values,
                                   plaintext_key=n.attr("const")))
        except KeyError:
            raise CircuitError(f"internal: the BFV noise model does not know the op {n.op!r}") from None
    top = math.log2(params.big_q / params.t)
    return [min(-(v + 1), top) for v in lv]


def _problems(g: Graph, params: Params):
    """(node, message) of the first thing ``params`` cannot run: a vector wider than a slot row, or a value whose
    estimated budget falls below MARGIN_BITS; None if none. Also returns the budgets."""
    row = params.n // 2
    for i, n in enumerate(g.nodes):
        width = n.attr("width")
        if width is not None and width > row:
            return (i, f"{n.op} at {n.loc}: a vector of {n.attr('length')} values needs {width} slots per row; "
                       f"{presets.describe(params)} has {row}"), None
    budgets = noise_budgets(g, params)
    for i, b in enumerate(budgets):
        if b < MARGIN_BITS:
            n = g.nodes[i]
            return (i, f"the noise budget runs out at {n.op} at {n.loc}: about {math.floor(b)} bits estimated left "
                       f"after it (at least {MARGIN_BITS} are kept) with {presets.describe(params)}"), budgets
    return None, budgets


def _fitting_preset(g: Graph, bits: int | None = None):
    for name, p in presets.PRESETS.items():
        if bits is not None and p.t < 2**bits:
            continue
        if _problems(g, p)[0] is None:
            return name, p
    return None, None


def check_noise(g: Graph, params: Params) -> Graph:
    """Refuse (CircuitError naming the operation, its line, the circuit's depth and the smallest preset that fits) a
    circuit that ``params`` cannot run: a vector wider than N/2 slots, or an estimated noise budget below
    :data:`MARGIN_BITS` at some node (:func:`noise_budgets`); else annotate every node with its ``budget`` (bits,
    rounded down)."""
    problem, budgets = _problems(g, params)
    if problem is not None:
        _, message = problem
        name, fit = _fitting_preset(g)
        depth = multiplicative_depth(g)
        if fit is None:
            hint = "no BFV preset fits it: split the circuit or lower its depth"
        else:
            left = min(noise_budgets(g, fit)[o] for o in g.outputs)
            hint = (f"the smallest preset that fits is bfv.presets.{name} (about {math.floor(left)} bits left): "
                    f"compile(..., params=crossfhe.bfv.presets.{name}), or leave params out")
        raise CircuitError(f"{message}; the circuit has multiplicative depth {depth}; {hint}")

    def visit(b: Builder, i: int, n: Node, args: list[int]) -> int:
        return b.add(n.op, args, dict(n.attrs, budget=math.floor(budgets[i])), n.loc, merge=False)

    return ir.rebuild(g, visit)


# --------------------------------------------------------------------------------------------------
# Costs
# --------------------------------------------------------------------------------------------------


def cost(g: Graph, params: Params, annotated: bool = True) -> dict:
    """Operation counts: ``key_switches`` (relinearizations + rotations), ``relinearizations``, ``rotations``,
    ``modups`` (a hoisted group of rotations shares one), ``tensor_products`` (ciphertext products),
    ``plain_products`` (by constant vectors), ``scalar_products`` (by integers), ``additions`` and ``depth``
    (multiplicative depth in ciphertext products); annotated, ``budget``: the smallest estimated noise budget of the
    outputs, in bits."""
    c = g.counts()
    out = {
        **key_switch_counts(g, c["relin"] + c["mul"], ("rotate", "swap_rows")),
        "tensor_products": c["mul"] + c["tensor"],
        "plain_products": c["mul_plain"],
        "scalar_products": c["mul_int"],
        "additions": c["add"] + c["sub"] + c["add_plain"] + c["add_scalar"],
        "depth": multiplicative_depth(g),
    }
    if annotated and g.outputs and all(g.nodes[o].attr("budget") is not None for o in g.outputs):
        out["budget"] = min(g.nodes[o].attr("budget") for o in g.outputs)
    return out


# --------------------------------------------------------------------------------------------------
# Keys, plans and constants
# --------------------------------------------------------------------------------------------------


def _rotations(g: Graph) -> dict[int, str]:
    """Rotation offset -> the source line of its first use."""
    out: dict[int, str] = {}
    for n in g.nodes:
        for k in ((n.attr("k"),) if n.op == "rotate" else n.attr("ks") if n.op == "rotate_many" else ()):
            out.setdefault(k, n.loc)
    return out


def _galois_elements(g: Graph, params: Params) -> list[int]:
    out = {bfv_ops.rotation_element(params, k) for k in _rotations(g)}
    if _swaps(g):
        out.add(bfv_ops.row_swap_element(params))
    return sorted(out)


def _swaps(g: Graph) -> bool:
    return any(n.op == "swap_rows" for n in g.nodes)


def _needs_relin(g: Graph) -> bool:
    return any(n.op in ("mul", "relin") for n in g.nodes)


def _const_name(n: Node) -> str:
    return f"{n.op}:{n.attr('const') if n.op in ('add_plain', 'mul_plain') else n.attr('c')}"


_CONSTANTS: OrderedDict = OrderedDict()


def _constant(g: Graph, params: Params, n: Node):
    """The argument a constant node reads: add_plain, round(Q m / t) (EVAL over Q); mul_plain, the centered lift of m
    (EVAL over Q); add_scalar, the words of round(Q c / t) [L, 1]; mul_int, c centered mod t as Shoup words. Made
    once per parameters and constant (cached)."""
    ck = (params.digest(), _const_name(n))
    if ck in _CONSTANTS:
        _CONSTANTS.move_to_end(ck)
        return _CONSTANTS[ck]
    t, q = params.t, params.q
    if n.op in ("add_plain", "mul_plain"):
        values = g.const(n.attr("const"))
        coeffs = encoder.encode_batch(encoder.slot_matrix(np.mod(values, t), values.shape[-1], params.n), params.n, t)
        lift = bfv_ops.scaled_message if n.op == "add_plain" else bfv_ops.lifted_plaintext
        value = lift(params, coeffs)
    elif n.op == "add_scalar":
        scaled = (params.big_q * (n.attr("c") % t) + t // 2) // t
        value = np.array([scaled % m for m in q], dtype=np.uint32).reshape(-1, 1)
    else:
        value = ev.integer_words(noise.centered(n.attr("c"), t), q)
    _CONSTANTS[ck] = value
    if len(_CONSTANTS) > 512:
        _CONSTANTS.popitem(last=False)
    return value


def runtime(g: Graph, params: Params, keys: EvaluationKeys) -> dict:
    """The program's arguments besides the inputs: ``relin`` (if the circuit multiplies ciphertexts), ``galois``
    (element -> key, the hoisted rotations), ``ks`` (the key-switch plan), ``mul`` (the HPS plan) and ``consts``
    (:func:`constants`)."""
    out: dict = {"galois": {}}
    if _needs_relin(g):
        out["relin"] = keys.relin_key()
    for n in g.nodes:
        if n.op == "rotate_many":
            for k in n.attr("ks"):
                e = bfv_ops.rotation_element(params, k)
                out["galois"][e] = keys.galois_key(e)
    if any(n.op in _KEY_SWITCHES for n in g.nodes):
        out["ks"] = ks.keyswitch_plan(params, kernels=params.kernels)
    if any(n.op in ("mul", "tensor") for n in g.nodes):
        out["mul"] = bfv_ops.mul_plan(params)
    out["consts"] = constants(g, params, keys)
    return out


def constants(g: Graph, params: Params, keys: EvaluationKeys | None) -> dict:
    """Per node index, what it reads besides its operands: each constant as :func:`_constant` makes it, and for a
    rotation or the row swap its Galois element (a uint32 word: one program serves every rotation) and key."""
    out = {}
    for i, n in enumerate(g.nodes):
        name = str(i)
        if n.op in ("rotate", "swap_rows"):
            e = bfv_ops.rotation_element(params, n.attr("k")) if n.op == "rotate" else bfv_ops.row_swap_element(params)
            out[name] = (ev.word(e), keys.galois_key(e))
        elif n.op in ("add_plain", "mul_plain", "add_scalar", "mul_int"):
            out[name] = _constant(g, params, n)
    return out


# --------------------------------------------------------------------------------------------------
# Lowering
# --------------------------------------------------------------------------------------------------


def _combine(x: tuple, y: tuple, subtract: bool) -> tuple:
    """x +- y for ciphertexts of two or three polynomials (a missing d2 is 0)."""
    f = poly.sub if subtract else poly.add
    out = [f(p, r) for p, r in zip(x, y)]
    if len(x) > len(y):
        out += x[len(y):]
    elif len(y) > len(x):
        out += [poly.neg(r) if subtract else r for r in y[len(x):]]
    return tuple(out)


def interpret(g: Graph, params: Params, inputs, rt) -> list:
    """The circuit on one item (traceable; the caller's jit makes it one program): ``inputs`` a tuple of (c0, c1)
    data uint32 [L, N] (EVAL over Q) per input, ``rt`` the :func:`runtime` pytree; returns (c0, c1) data per output.
    Key switches are :mod:`crossfhe.core.evaluator`'s, products :func:`crossfhe.bfv.ops.mul_traced` and
    :func:`~crossfhe.bfv.ops.tensor_traced`."""
    q = params.q
    qcol = poly.modulus_table(q).q
    vals: list = []
    for i, n in enumerate(g.nodes):
        a = [vals[x] for x in n.args]
        op = n.op
        if op == "input":
            c0, c1 = inputs[g.inputs.index(i)]
            vals.append((RNSPoly(c0, q, Domain.EVAL), RNSPoly(c1, q, Domain.EVAL)))
        elif op in ("add", "sub"):
            vals.append(_combine(a[0], a[1], op == "sub"))
        elif op == "neg":
            vals.append(tuple(poly.neg(p) for p in a[0]))
        elif op == "add_scalar":
            x = a[0]
            vals.append((x[0]._replace(add_mod(x[0].data, rt["consts"][str(i)], qcol)),) + x[1:])
        elif op == "add_plain":
            x = a[0]
            vals.append((poly.add(x[0], rt["consts"][str(i)]),) + x[1:])
        elif op == "mul_int":
            w, ws = rt["consts"][str(i)]
            vals.append(tuple(p._replace(shoup_mul(p.data, w, ws, qcol)) for p in a[0]))
        elif op == "mul_plain":
            m = rt["consts"][str(i)]
            vals.append(tuple(poly.mul(p, m) for p in a[0]))
        elif op == "mul":
            vals.append(bfv_ops.mul_traced(*a[0], *a[1], rt["mul"], rt["relin"], rt["ks"]))
        elif op == "tensor":
            vals.append(bfv_ops.tensor_traced(*a[0], *a[1], rt["mul"]))
        elif op == "relin":
            vals.append(ev.relinearize_traced(*a[0], rt["relin"], rt["ks"]))
        elif op in ("rotate", "swap_rows"):
            word, key = rt["consts"][str(i)]
            vals.append(ev.galois(*a[0], key, rt["ks"], word))
        elif op == "rotate_many":
            elements = tuple(bfv_ops.rotation_element(params, k) for k in n.attr("ks"))
            vals.append(ev.galois_hoisted(*a[0], tuple(rt["galois"][e] for e in elements), rt["ks"], elements))
        elif op == "pick":
            vals.append(tuple(a[0][g.nodes[n.args[0]].attr("ks").index(n.attr("k"))]))
        elif op == "output":
            vals.append(a[0])
        else:
            raise CircuitError(f"internal: no BFV lowering for {op!r}")
    return [tuple(p.data for p in vals[o]) for o in g.outputs]


# --------------------------------------------------------------------------------------------------
# The scheme
# --------------------------------------------------------------------------------------------------


class BFVScheme(RingScheme):
    """The compiler's BFV (module docstring)."""

    name = "bfv"
    annotated_after = frozenset({"noise_budget"})

    value_attrs = frozenset({"c", "const", "k"})
    item_ndims = (2, 2)

    def input_attrs(self, index: int, spec: BFVVector) -> dict:
        return {"index": index, "length": spec.length, "width": _width(spec.length)}

    def output_node(self, trace, value, position: int = 0) -> int:
        return trace.node("output", (value.node,), {"length": value.length, "width": value.width},
                          loc=f"output {position}")

    def passes(self, optimize: bool = True):
        if not optimize:
            return [("dead_code", dead_code), ("noise_budget", check_noise)]
        return [("cse", cse), ("hoist_rotations", hoist_rotations), ("lazy_relinearization", lazy_relinearization),
                ("noise_budget", check_noise)]

    def cost(self, graph, params, annotated: bool = True) -> dict:
        return cost(graph, params, annotated)

    def select(self, graph, precision=None, bits=None) -> Params:
        """The smallest BFV preset (:data:`crossfhe.bfv.presets.PRESETS`, all 128-bit secure) whose slots hold the
        vectors and whose noise budget lasts through the circuit; ``bits``: values of that many bits must fit, t >=
        2^bits."""
        if precision is not None:
            raise CircuitError("precision= is for CKKS circuits; a BFV circuit computes exactly mod t (bits= asks for "
                               "a plaintext modulus t of at least that many bits)")
        graph = ir.dead_code(graph)
        name, fit = _fitting_preset(graph, bits)
        if fit is None:
            largest_t = max(p.t for p in presets.PRESETS.values())
            if bits is not None and largest_t < 2**bits:
                raise CircuitError(f"no BFV preset has a plaintext modulus t >= 2^{bits} (the largest t is "
                                   f"{largest_t}): ask for fewer bits, or pass params with a larger t")
            problem, _ = _problems(graph, list(presets.PRESETS.values())[-1])
            raise CircuitError(f"no BFV preset fits this circuit (multiplicative depth {multiplicative_depth(graph)}): "
                               f"{problem[1]}; split the circuit or lower its depth")
        return fit

    def prepare_params(self, params) -> Params:
        if not isinstance(params, Params):
            raise ParameterError(f"a BFV circuit takes bfv.Params (e.g. crossfhe.bfv.presets.N8192), got "
                                 f"{type(params).__name__}")
        if not params.batching:
            raise ParameterError(f"a BFV circuit computes on slots, which need a batching t (prime, t = 1 mod 2N = "
                                 f"{2 * params.n}); t = {params.t} is not: use a preset or "
                                 "ParamsLiteral(plain_bits=...)")
        return params.with_kernels(as_kernel_set(params.kernels).resolve())

    def requirements(self, graph, params) -> dict:
        return {"relin": _needs_relin(graph), "rotations": sorted(_rotations(graph)), "row_swap": _swaps(graph),
                "galois_elements": _galois_elements(graph, params)}

    def keygen(self, params, req, seed):
        return bfv_ops.keygen(params, galois_elements=req["galois_elements"], relin=req["relin"], seed=seed)

    def check_keys(self, graph, params, public, key_id) -> None:
        if not isinstance(public, EvaluationKeys):
            raise TypeError(f"a BFV circuit runs with bfv.EvaluationKeys (circuit.keys.public), got "
                            f"{type(public).__name__}")
        if public.params.digest() != params.digest():
            raise ParameterError(f"the evaluation keys were made for other parameters "
                                 f"({presets.describe(public.params)}) than the circuit's ({presets.describe(params)})")
        if key_id is not None and public.key_id != key_id:
            raise KeyMismatchError(f"the inputs were encrypted under key pair {key_id}, the evaluation keys are of "
                                   f"{public.key_id}: use the keys of the pair that encrypted them")
        if _needs_relin(graph) and public.relin is None:
            loc = next(n.loc for n in graph.nodes if n.op in ("mul", "relin"))
            raise ParameterError(f"the circuit multiplies ciphertexts (at {loc}) but the evaluation keys hold no "
                                 "relinearization key; make keys with circuit.keygen()")
        missing = [(k, loc) for k, loc in _rotations(graph).items()
                   if bfv_ops.rotation_element(params, k) not in public.galois]
        if _swaps(graph) and bfv_ops.row_swap_element(params) not in public.galois:
            missing.append(("the row swap", next(n.loc for n in graph.nodes if n.op == "swap_rows")))
        if missing:
            which = ", ".join(f"rotate by {k} at {loc}" for k, loc in sorted(missing, key=str))
            raise ParameterError(f"the evaluation keys hold no Galois key for {which}; make keys with circuit.keygen() "
                                 "(it knows the rotations)")

    def encrypt(self, params, public, spec: BFVVector, values):
        if not isinstance(public, (EvaluationKeys, PublicKey, SecretKey)):
            raise TypeError(f"encrypt takes the circuit's keys, got {type(public).__name__}")
        v = np.asarray(values)
        if v.dtype.kind not in "iub":
            raise ParameterError(f"a BFV input holds integers in [0, t), got an array of dtype {v.dtype}")
        if v.ndim == 0 or v.shape[-1] != spec.length:
            raise ParameterError(f"input of {spec!r} takes values of shape [..., {spec.length}], got shape {v.shape}")
        width = _width(spec.length)
        if width > params.n // 2:
            raise ParameterError(f"{spec!r} needs {width} slots per row; these parameters have {params.n // 2}")
        v = encoder.check_values(v, params.t, f"input {spec!r}")
        ct = bfv_ops.encrypt(public, bfv_ops.encode(params, encoder.slot_matrix(v, width, params.n)))
        return (ct.c0.data, ct.c1.data), tuple(v.shape[:-1]), ct.key_id

    def decrypt(self, params, secret, graph, node, leaves, batch_shape):
        n = graph.nodes[node]
        c0, c1 = (RNSPoly(jax.numpy.asarray(x), params.q, Domain.EVAL) for x in leaves)
        pt = bfv_ops.decrypt(secret, Ciphertext(c0, c1, params, None))
        return bfv_ops.decode(pt)[..., 0, : n.attr("length")]

    def leaf_specs(self, graph, params, node: int) -> list:
        """(item shape, dtype, moduli, limb axis) of each leaf: c0 and c1 over Q."""
        return [((len(params.q), params.n), np.uint32, tuple(params.q), -2)] * 2

    def runtime(self, graph, params, public, *, one_program: bool = True):
        return runtime(graph, params, public)

    def interpret(self, graph, params, inputs, rt, items: int = 1):
        return interpret(graph, params, inputs, rt)

    # The eager values' one-operation circuits (crossfhe.api.eager) -------------------------------------

    def eager_output(self, builder, node: int, inputs) -> int:
        return builder.add("output", (node,), {"length": 1, "width": 1}, "result", merge=False)

    def eager_passes(self, params, public):
        """Eager semantics: every product relinearized at once; the noise is measured where it matters, at
        decryption (:meth:`crossfhe.api.bfv.BFVContext.decrypt`), not estimated."""
        return [("dead_code", dead_code)]

    def with_constants(self, rt: dict, graph, params, public) -> dict:
        return {**rt, "consts": constants(graph, params, public)}


SCHEME = BFVScheme()

__all__ = ["MARGIN_BITS", "SCHEME", "BFVScheme", "check_noise", "cost", "cse", "dead_code",
           "hoist_rotations", "interpret", "lazy_relinearization", "multiplicative_depth", "noise_budgets",
           "runtime"]
