"""The encrypted-integer scheme of the front end: NumPy's integer types (``uint8`` to ``int64`` and ``bool``) on TFHE
radix blocks, each operator one primitive of :mod:`crossfhe.tfhe.integer` / :mod:`crossfhe.tfhe.integer_ops`.

Values. An integer of ``bits`` bits is B = bits / m blocks of m message bits (:mod:`crossfhe.tfhe.integer`: each
block a p-bit TFHE message with p - m carry bits), held as ``b`` uint32 [..., B, L] and ``a`` uint32 [..., B, L, n]
(the leading axes are the batch). Its metadata (``meta``) is the tuple (dtype, m, degrees, norms): the type's name,
the block width, and per block the largest value it can hold and its noise (the sum of squared weights of the
bootstraps it sums), the radix layer's static bookkeeping. A ``bool`` is one block holding 0 or 1. Arithmetic is mod
2^bits; a signed type reads the same words in two's complement (NumPy's and TFHE-rs's semantics).

Primitives. Each operator is a node ``op {attrs, meta}`` whose bookkeeping rule (:func:`rule`) is its radix function
traced with ``jax.eval_shape`` against a counting key (:func:`crossfhe.tfhe.integer.cost`): the result's metadata
(the carries each block may hold after the lazy additions and propagations the function plans) and its bootstraps,
key switches and sequential ``pbs_many`` calls, without running anything. The rule depends only on the operands'
metadata and the parameters, so it is the same eagerly and while tracing, where it runs as the user writes the
operator (errors then name the line). The kernel (:func:`interpret`) runs the same function with the server key:

=================================================  ==============================================================
``add``, ``sub``, ``mul`` (``c``: a constant)       x + y, x - y (``c_first``: c - x), x * y mod 2^bits (lazy
                                                    carries: propagated when the next operator needs room)
``neg``, ``not``, ``abs``                           -x, ~x (bool: 1 - x), |x| (signed; |min| = min)
``and``, ``or``, ``xor``                            bitwise (bool: logical)
``shl``, ``shr``, ``rotl``, ``rotr`` {k}            by a constant k (shifts: k >= bits gives 0, or the sign)
``shl_by``, ``shr_by``, ``rotl_by``, ``rotr_by``    by an encrypted amount, taken mod bits (as TFHE-rs)
``eq``, ``ne``, ``lt``, ``le``, ``gt``, ``ge``      a ``bool`` (signed types compare in two's complement)
``min``, ``max``                                    a comparison and a select
``select``                                          (cond, a, b): a where cond else b
``cast`` {dtype}                                    to another width or signedness (extended by the source's sign)
``divmod``                                          (x // y, x % y): floor semantics; by zero as TFHE-rs
``overflowing_add``/``_sub``/``_mul``               (result, bool: the exact result left the type's range)
``pick`` {index}                                    one result of a multi-result node (or of a ``batch``)
``batch`` {of, count, arity, attrs}                 ``count`` independent nodes of one kind run as one call
=================================================  ==============================================================

Passes (:meth:`IntegerScheme.passes`): ``dead_code``; ``cse`` (equal operators on the same operands merged: the
Taurus deduplications inside one operator are the radix layer's own, one key switch per block for all its tables);
``batch``: the nodes of one kind (operator, attributes, operands' metadata) at one depth of the graph, independent by
construction, become one ``batch`` node whose kernel stacks their operands on a batch axis, so each of the operator's
sequential ``pbs_many`` calls is one pass over the bootstrapping key for all of them (Taurus's batched
bootstrapping). :func:`cost`: ``bootstraps``, ``key_switches``, ``pbs_calls`` (launches), ``depth`` (sequential
launches on the longest path).

Parameters. The rule needs them while tracing (a block's carry room is p - m bits, its noise budget ``norm2``): a
circuit compiled without ``params=`` uses :data:`DEFAULT` (P4_128: TFHE-rs's default layout of 2 message and 2 carry
bits, failure probability 2^-128).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.api import ir
from crossfhe.api.ir import Builder, CircuitError, Graph, Node
from crossfhe.api.passes import dead_code
from crossfhe.api.specs import TFHEInteger
from crossfhe.api.tfhe_lower import TFHEScheme, _key_for
from crossfhe.core.lwe import LWECiphertext
from crossfhe.errors import ParameterError
from crossfhe.tfhe import integer as ri
from crossfhe.tfhe import integer_ops as io
from crossfhe.tfhe import ops, presets
from crossfhe.tfhe.params import Params

DEFAULT = presets.P4_128
"""The parameters of a circuit of integers compiled without ``params=``."""


# --------------------------------------------------------------------------------------------------
# Types and metadata
# --------------------------------------------------------------------------------------------------


def width(dtype: str) -> int:
    """Bits of the type (``bool``: 1)."""
    return 1 if dtype == "bool" else np.dtype(dtype).itemsize * 8


def is_signed(dtype: str) -> bool:
    return dtype.startswith("int")


def value_range(dtype: str) -> tuple[int, int]:
    """[lo, hi] of the type's values."""
    bits = width(dtype)
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if is_signed(dtype) else (0, (1 << bits) - 1)


def block_width(params: Params, msg_bits: int | None) -> int:
    """m: ``msg_bits`` checked, or the default half of the parameters' p (at least 1)."""
    p = params.message_bits
    m = max(1, p // 2) if msg_bits is None else msg_bits
    if isinstance(m, bool) or not isinstance(m, int) or not 1 <= m < p:
        raise ParameterError(f"msg_bits must be an int in [1, {p - 1}] for the {p}-bit messages of "
                             f"{params.name or 'these parameters'} (at least one carry bit), got {msg_bits!r}")
    return m


def fresh(dtype: str, params: Params, msg_bits: int | None = None) -> tuple:
    """The metadata of a fresh encryption: clean blocks (degree 2^m - 1, noise 1; a bool: one block of degree 1)."""
    m = block_width(params, msg_bits)
    if dtype == "bool":
        return (dtype, m, (1,), (1,))
    bits = width(dtype)
    if bits % m:
        raise ParameterError(f"{dtype} has {bits} bits, not a multiple of the {m}-bit blocks (msg_bits={m}); "
                             f"choose msg_bits dividing {bits}")
    return (dtype, m, ((1 << m) - 1,) * (bits // m), (1,) * (bits // m))


def constant(dtype: str, c, what: str) -> int:
    """A public int operand as the type holds it (mod 2^bits); ParameterError for one outside the type's range (as
    NumPy 2 refuses ``np.uint8(1) + 300``), TypeError for a non-integer."""
    if isinstance(c, (bool, np.bool_)) and dtype == "bool":
        return int(c)
    if isinstance(c, (bool, np.bool_)) or not isinstance(c, (int, np.integer)):
        raise TypeError(f"{what}: an encrypted {dtype} combines with encrypted {dtype} values and int constants, got "
                        f"{type(c).__name__} {c!r}")
    lo, hi = (0, 1) if dtype == "bool" else value_range(dtype)
    if not lo <= int(c) <= hi:
        raise ParameterError(f"{what}: the constant {int(c)} is outside {dtype}'s range [{lo}, {hi}]; cast first "
                             "(x.astype(...)) or use a constant the type holds")
    return int(c) % (1 << max(1, width(dtype)))


def blocks_of(meta: tuple) -> int:
    return len(meta[2])


# --------------------------------------------------------------------------------------------------
# Kernels: each operator on RadixIntegers (the real server key, or the counting stand-in)
# --------------------------------------------------------------------------------------------------


def _bool(ct: LWECiphertext, like: ri.RadixInteger) -> ri.RadixInteger:
    """An encrypted bit (a comparison's result) as a one-block integer of ``like``'s layout."""
    blocks = LWECiphertext(ct.b[None], ct.a[None], ct.moduli, ct.key_id)
    return ri.RadixInteger(blocks, like.params, like.msg_bits, (1,), (1,))


def _bit(x: ri.RadixInteger) -> LWECiphertext:
    """The encrypted bit of a bool."""
    return ri._take(x.blocks, 0)


def _operands(xs, attrs) -> list:
    """The operands with the constant ``c`` (a trivial integer of the first operand's layout) in its place."""
    if "c" not in attrs:
        return list(xs)
    c = io._const(xs[0], attrs["c"])
    return [c, *xs] if attrs.get("c_first") else [*xs, c]


def _not(sk, xs, attrs, dtypes):
    x = xs[0]
    if dtypes[0] != "bool":
        return [io.bitnot(sk, x)]
    x = ri.propagate_carries(sk, x)
    return [ri._replace(x, ri._add_block_consts(x.params, ops.negate(x.blocks), [1]), (1,), x.norms)]


def _divmod(sk, xs, attrs, dtypes):
    signed = is_signed(dtypes[0])
    if "c" in attrs and not signed and attrs["c"] & (attrs["c"] - 1) == 0:  # a power of two: a shift and a mask
        k = attrs["c"].bit_length() - 1
        return [io.shr(sk, xs[0], k), io.bitand(sk, xs[0], attrs["c"] - 1)]
    x, y = _operands(xs, attrs)
    return list((io.divmod_signed if signed else io.divmod_)(sk, x, y))


def _cast(sk, xs, attrs, dtypes):
    x, src, dst = xs[0], dtypes[0], attrs["dtype"]
    if dst == "bool":
        return [_bool(ri.ne(sk, x, io._const(x, 0)), x)]
    nb = width(dst) // x.msg_bits
    if width(dst) % x.msg_bits:
        raise ParameterError(f"astype: {dst} has {width(dst)} bits, not a multiple of the {x.msg_bits}-bit blocks")
    return [io._resized(sk, x, nb, is_signed(src) and src != "bool")]


def _overflowing(fn):
    def kernel(sk, xs, attrs, dtypes):
        v, flag = fn(sk, *_operands(xs, attrs), signed=is_signed(dtypes[0]))
        return [v, _bool(flag, v)]

    return kernel


def _compare(fn, signed_arg: bool = True):
    def kernel(sk, xs, attrs, dtypes):
        x, y = _operands(xs, attrs)
        out = fn(sk, x, y, signed=is_signed(dtypes[0])) if signed_arg else fn(sk, x, y)
        return [_bool(out, x)]

    return kernel


def _binary(fn, signed_arg: bool = False):
    def kernel(sk, xs, attrs, dtypes):
        x, y = _operands(xs, attrs)
        return [fn(sk, x, y, signed=is_signed(dtypes[0])) if signed_arg else fn(sk, x, y)]

    return kernel


def _mul(sk, xs, attrs, dtypes):
    if "c" in attrs:
        return [ri.mul_const(sk, xs[0], attrs["c"])]
    return [io.mul(sk, xs[0], xs[1])]


def _shift(fn, signed_arg: bool = False):
    def kernel(sk, xs, attrs, dtypes):
        if signed_arg:
            return [fn(sk, xs[0], attrs["k"], signed=is_signed(dtypes[0]))]
        return [fn(sk, xs[0], attrs["k"])]

    return kernel


def _shift_by(fn, signed_arg: bool = False):
    def kernel(sk, xs, attrs, dtypes):
        x, amount = xs
        if signed_arg:
            return [fn(sk, x, amount, signed=is_signed(dtypes[0]))]
        return [fn(sk, x, amount)]

    return kernel


def _select(sk, xs, attrs, dtypes):
    c, a, b = xs
    return [io.select(sk, _bit(c), a, b)]


# name: (arity without the constant, kernel, result types from (operand types, attrs))
_SAME, _BOOL = (lambda d, a: (d[0],)), (lambda d, a: ("bool",))
OPS: dict[str, tuple[int, Callable, Callable]] = {
    "add": (2, _binary(ri.add), _SAME),
    "sub": (2, _binary(ri.sub), _SAME),
    "mul": (2, _mul, _SAME),
    "neg": (1, lambda sk, xs, a, d: [ri.neg(sk, xs[0])], _SAME),
    "not": (1, _not, _SAME),
    "abs": (1, lambda sk, xs, a, d: [io.absolute(sk, xs[0])], _SAME),
    "and": (2, _binary(io.bitand), _SAME),
    "or": (2, _binary(io.bitor), _SAME),
    "xor": (2, _binary(io.bitxor), _SAME),
    "shl": (1, _shift(io.shl), _SAME),
    "shr": (1, _shift(io.shr, True), _SAME),
    "rotl": (1, _shift(io.rotl), _SAME),
    "rotr": (1, _shift(io.rotr), _SAME),
    "shl_by": (2, _shift_by(io.shl_by), _SAME),
    "shr_by": (2, _shift_by(io.shr_by, True), _SAME),
    "rotl_by": (2, _shift_by(io.rotl_by), _SAME),
    "rotr_by": (2, _shift_by(io.rotr_by), _SAME),
    "eq": (2, _compare(ri.eq, False), _BOOL),
    "ne": (2, _compare(ri.ne, False), _BOOL),
    "lt": (2, _compare(io.lt), _BOOL),
    "le": (2, _compare(io.le), _BOOL),
    "gt": (2, _compare(io.gt), _BOOL),
    "ge": (2, _compare(io.ge), _BOOL),
    "min": (2, _binary(io.minimum, True), _SAME),
    "max": (2, _binary(io.maximum, True), _SAME),
    "select": (3, _select, lambda d, a: (d[1],)),
    "cast": (1, _cast, lambda d, a: (a["dtype"],)),
    "divmod": (2, _divmod, lambda d, a: (d[0], d[0])),
    "overflowing_add": (2, _overflowing(io.overflowing_add), lambda d, a: (d[0], "bool")),
    "overflowing_sub": (2, _overflowing(io.overflowing_sub), lambda d, a: (d[0], "bool")),
    "overflowing_mul": (2, _overflowing(io.overflowing_mul), lambda d, a: (d[0], "bool")),
}


def _radix(params: Params, meta: tuple, b, a, key_id: str | None = None) -> ri.RadixInteger:
    """The RadixInteger of words b [B, *batch, L], a [B, *batch, L, n] with ``meta``'s bookkeeping."""
    return ri.RadixInteger(LWECiphertext(b, a, params.moduli, key_id), params, meta[1], meta[2], meta[3])


def _meta(dtype: str, r: ri.RadixInteger) -> tuple:
    return (dtype, r.msg_bits, tuple(int(d) for d in r.degrees), tuple(int(n) for n in r.norms))


_RULES: dict = {}


def rule(params: Params, op: str, attrs: tuple, metas: tuple) -> tuple[tuple, ri.Cost]:
    """(the results' metadata, the bootstrapping work of one integer) of ``op`` with ``attrs`` (sorted (name, value)
    pairs) on operands of metadata ``metas``: the kernel traced against the counting key, nothing run. Raises
    ParameterError where the operands cannot meet (other layouts, types) or the parameters cannot hold the operator."""
    key = (params.digest(), op, attrs, metas)
    hit = _RULES.get(key)
    if hit is not None:
        return hit
    arity, kernel, result_types = OPS[op]
    ad = dict(attrs)
    if len({m[1] for m in metas}) > 1:
        raise ParameterError(f"{op}: the operands are on blocks of different widths (msg_bits "
                             f"{sorted({m[1] for m in metas})}); encrypt them with the same msg_bits")
    dtypes = tuple(m[0] for m in metas)
    limbs, n = len(params.moduli), params.long_dim
    tally = ri._Tally(params)

    def go():
        xs = [_radix(params, m, jnp.zeros((blocks_of(m), limbs), jnp.uint32),
                     jnp.zeros((blocks_of(m), limbs, n), jnp.uint32)) for m in metas]
        return kernel(tally, xs, ad, dtypes)

    outs = jax.eval_shape(go)
    types = result_types(dtypes, ad)
    result = (tuple(_meta(t, r) for t, r in zip(types, outs, strict=True)),
              ri.Cost(pbs=tally.rotations, keyswitches=tally.items, calls=tally.calls))
    if len(_RULES) > 65536:
        _RULES.clear()
    _RULES[key] = result
    return result


# --------------------------------------------------------------------------------------------------
# Passes
# --------------------------------------------------------------------------------------------------


def _metas_of(n: Node) -> tuple:
    """The results' metadata of a node (one for most, several for ``divmod``, ``overflowing_*`` and ``batch``)."""
    many = n.attr("metas")
    return many if many is not None else (n.attr("meta"),)


def cse(g: Graph, params=None) -> Graph:
    """Equal operators on the same operands merged (operands never reordered: a result's metadata is the rule's on
    them in this order), dead code dropped."""
    return ir.common_subexpressions(g)


def _depths(g: Graph) -> list[int]:
    out: list[int] = []
    for n in g.nodes:
        if n.op == "input":
            out.append(0)
        elif n.op == "pick":
            out.append(out[n.args[0]])
        else:
            out.append(1 + max(out[a] for a in n.args))
    return out


def batch(g: Graph, params=None) -> Graph:
    """The nodes of one kind (operator, attributes and operands' metadata) at one depth become one ``batch`` node
    and a ``pick {index}`` each (module docstring). The graph is rebuilt in order of depth (a topological order:
    every operand is shallower, a ``pick`` as deep as what it picks from and after it), so a group's operands all
    exist where its first member is met."""
    depth = _depths(g)
    order = sorted(range(len(g.nodes)), key=lambda i: (depth[i], i))
    groups: dict[tuple, list[int]] = {}
    for i in order:
        n = g.nodes[i]
        if n.op in ("input", "pick", "batch"):
            continue
        kind = (depth[i], n.op, n.attrs, tuple(g.nodes[a].attr("meta") for a in n.args))
        groups.setdefault(kind, []).append(i)
    member_of = {i: (members, j) for members in groups.values() if len(members) > 1 for j, i in enumerate(members)}
    b = Builder(g.scheme, g.consts)
    where: dict[int, int] = {}
    made: dict[int, int] = {}
    for i in order:
        n = g.nodes[i]
        args = [where[a] for a in n.args]
        if i not in member_of:
            where[i] = b.add(n.op, args, dict(n.attrs), n.loc, merge=False)
            continue
        members, j = member_of[i]
        lead = members[0]
        if lead not in made:
            flat = [where[a] for m in members for a in g.nodes[m].args]
            made[lead] = b.add("batch", flat, {"of": n.op, "count": len(members), "arity": len(n.args),
                                               "attrs": _op_attrs(n),
                                               "metas": tuple(_metas_of(g.nodes[m]) for m in members)},
                               n.loc, merge=False)
        keep = {k: v for k, v in n.attrs if k in ("meta", "metas")}
        where[i] = b.add("pick", (made[lead],), {"index": j, **keep}, n.loc, merge=False)
    return ir.dead_code(b.graph([where[i] for i in g.inputs], [where[o] for o in g.outputs]))


PASSES = (("dead_code", dead_code), ("cse", cse), ("batch", batch))


def cost(g: Graph, params: Params) -> dict:
    """``bootstraps``, ``key_switches``, ``pbs_calls`` (launches of ``pbs_many``) and ``depth`` (launches on the
    longest path), per item, from each node's :func:`rule`."""
    total = ri.Cost(0, 0, 0)
    depth: list[int] = []
    for n in g.nodes:
        here = 0
        if n.op == "batch":
            metas = tuple(g.nodes[a].attr("meta") for a in n.args[: n.attr("arity")])
            _, c = rule(params, n.attr("of"), n.attr("attrs"), metas)
            k = n.attr("count")
            total = ri.Cost(total.pbs + k * c.pbs, total.keyswitches + k * c.keyswitches, total.calls + c.calls)
            here = c.calls
        elif n.op not in ("input", "pick"):
            _, c = rule(params, n.op, _op_attrs(n), tuple(g.nodes[a].attr("meta") for a in n.args))
            total = ri.Cost(total.pbs + c.pbs, total.keyswitches + c.keyswitches, total.calls + c.calls)
            here = c.calls
        depth.append(here + max((depth[a] for a in n.args), default=0))
    return {"bootstraps": total.pbs, "key_switches": total.keyswitches, "pbs_calls": total.calls,
            "depth": max((depth[o] for o in g.outputs), default=0), "nodes": len(g.nodes)}


def _op_attrs(n: Node) -> tuple:
    """The operator's own attributes (what :func:`rule` takes): the node's without its results' metadata."""
    return tuple((k, v) for k, v in n.attrs if k not in ("meta", "metas", "eager"))


# --------------------------------------------------------------------------------------------------
# Lowering
# --------------------------------------------------------------------------------------------------


def _words(r: ri.RadixInteger) -> tuple:
    return r.blocks.b, r.blocks.a


def _run(sk, params: Params, op: str, attrs: dict, metas: tuple, words: list) -> list:
    """The kernel of ``op`` on operand words (b [B, *batch, L], a [B, *batch, L, n]): the results' words."""
    _, kernel, _ = OPS[op]
    xs = [_radix(params, m, b, a) for m, (b, a) in zip(metas, words, strict=True)]
    return [_words(r) for r in kernel(sk, xs, attrs, tuple(m[0] for m in metas))]


def interpret(g: Graph, params: Params, inputs, rt) -> list:
    """The circuit on one item (traceable): ``inputs`` a tuple of (b [B, L], a [B, L, n]) per input; returns the
    (b, a) of each output. Each node runs its radix function with the server key of ``rt["key"]``; a ``batch`` node
    stacks its members' operands on a batch axis (after the block axis) and runs it once."""
    sk = ops.ServerKey(rt["key"], params)
    vals: list = []
    for i, n in enumerate(g.nodes):
        if n.op == "input":
            vals.append(tuple(inputs[g.inputs.index(i)]))
        elif n.op == "pick":
            vals.append(vals[n.args[0]][n.attr("index")])
        elif n.op == "batch":
            k, arity = n.attr("count"), n.attr("arity")
            metas = tuple(g.nodes[a].attr("meta") for a in n.args[:arity])
            stacked = [(jnp.stack([vals[n.args[j * arity + p]][0] for j in range(k)], axis=1),
                        jnp.stack([vals[n.args[j * arity + p]][1] for j in range(k)], axis=1)) for p in range(arity)]
            outs = _run(sk, params, n.attr("of"), dict(n.attr("attrs")), metas, stacked)
            members = [[(b[:, j], a[:, j]) for b, a in outs] for j in range(k)]
            vals.append([m[0] if len(m) == 1 else m for m in members])
        else:
            outs = _run(sk, params, n.op, dict(_op_attrs(n)), tuple(g.nodes[a].attr("meta") for a in n.args),
                        [vals[a] for a in n.args])
            vals.append(outs[0] if len(outs) == 1 else outs)
    return [vals[o] for o in g.outputs]


def to_blocks_first(b, a) -> tuple:
    """Words [*batch, B, L] / [*batch, B, L, n] (a value's layout) as the radix layer's [B, *batch, ...]."""
    return jnp.moveaxis(b, -2, 0), jnp.moveaxis(a, -3, 0)


def to_batch_first(b, a) -> tuple:
    """Inverse of :func:`to_blocks_first`."""
    return jnp.moveaxis(b, 0, -2), jnp.moveaxis(a, 0, -3)


def encrypt_words(ck: ops.ClientKey, dtype: str, msg_bits: int, values, key=None) -> tuple:
    """(b, a) in the value layout of integers of type ``dtype`` (values already checked and taken mod 2^bits)."""
    if dtype == "bool":
        ct = ops.encrypt(ck, np.asarray(values, dtype=np.int64)[None], key=key)
        return to_batch_first(ct.b, ct.a)
    r = ri.encrypt(ck, values, bits=width(dtype), msg_bits=msg_bits, seed=key)
    return to_batch_first(r.blocks.b, r.blocks.a)


def decrypt_words(ck: ops.ClientKey, meta: tuple, b, a, key_id: str | None) -> np.ndarray:
    """The values of words in the value layout: an array of the type, of the batch shape."""
    dtype = meta[0]
    b, a = to_blocks_first(jnp.asarray(b), jnp.asarray(a))
    r = _radix(ck.params, meta, b, a, key_id)
    if dtype == "bool":
        v = np.asarray(ops.decrypt(ck, ri._take(r.blocks, 0))).astype(np.int64)
        return (v % (1 << r.msg_bits)).astype(bool)
    raw = ri.decrypt(ck, r).astype(object)  # mod 2^(m B) = mod 2^bits
    bits = width(dtype)
    if is_signed(dtype):
        raw = np.where(raw >= 1 << (bits - 1), raw - (1 << bits), raw)
    return np.asarray(raw, dtype=object).astype(np.dtype(dtype))


def check_values(dtype: str, values, what: str) -> np.ndarray:
    """``values`` (an int, a bool for ``bool``, or an array of them) checked against the type's range and taken mod
    2^bits, as object ints (uint64 values do not fit int64)."""
    v = np.asarray(values)
    if dtype == "bool":
        if v.dtype != bool and not (np.issubdtype(v.dtype, np.integer) and np.isin(v, (0, 1)).all()):
            raise ParameterError(f"{what}: a bool takes True/False (or 0/1), got {values!r}")
        return v.astype(np.int64)
    if v.dtype == bool or not (np.issubdtype(v.dtype, np.integer) or v.dtype == object):
        raise TypeError(f"{what}: an encrypted {dtype} takes integers, got dtype {v.dtype}")
    obj = v.astype(object)
    if obj.dtype == object and not all(isinstance(e, (int, np.integer)) and not isinstance(e, (bool, np.bool_))
                                       for e in obj.reshape(-1)):
        raise TypeError(f"{what}: an encrypted {dtype} takes integers, got {values!r}")
    lo, hi = value_range(dtype)
    flat = [int(e) for e in obj.reshape(-1)]
    bad = [e for e in flat if not lo <= e <= hi]
    if bad:
        raise ParameterError(f"{what}: {bad[0]} is outside {dtype}'s range [{lo}, {hi}]")
    mask = (1 << width(dtype)) - 1
    return np.array([e & mask for e in flat], dtype=object).reshape(v.shape)


# --------------------------------------------------------------------------------------------------
# The scheme
# --------------------------------------------------------------------------------------------------


class IntegerScheme(TFHEScheme):
    """The compiler's encrypted integers: TFHE's keys, encryption and kernels (:class:`TFHEScheme`), radix values."""

    name = "integer"
    annotated_after = frozenset()
    value_attrs = frozenset()
    item_ndims = (2, 3)

    def trace_input(self, trace, index: int, spec):
        if not isinstance(spec, TFHEInteger):
            raise CircuitError(f"input {index}: a circuit of encrypted integers takes TFHEInteger specs, got {spec!r}")
        if trace.params is None:
            trace.params = DEFAULT
        params = self.prepare_params(trace.params)
        trace.params = params
        try:
            meta = fresh(spec.dtype, params, spec.msg_bits)
        except ParameterError as e:
            raise CircuitError(f"input {index} ({spec!r}): {e}") from None
        node = trace.node("input", (), {"index": index, "meta": meta}, loc=f"input {index}")
        trace.inputs.append(node)
        return self.value_class.symbolic(trace, node, meta)

    def passes(self, optimize: bool = True):
        return list(PASSES) if optimize else list(PASSES[:1])

    def cost(self, graph, params, annotated: bool = True) -> dict:
        return cost(graph, params)

    def select(self, graph, precision=None, bits=None) -> Params:
        if precision is not None or bits is not None:
            raise ParameterError("a circuit of encrypted integers takes its types from its TFHEInteger specs; pass "
                                 "params= (a tfhe preset) rather than precision= or bits=")
        return DEFAULT

    def prepare_params(self, params) -> Params:
        params = super().prepare_params(params)
        if params.message_bits < 2:
            raise ParameterError(f"encrypted integers need blocks of at least 2 bits (a message and a carry bit); "
                                 f"{params.name or 'these parameters'} hold {params.message_bits}")
        return params

    def requirements(self, graph, params) -> dict:
        c = cost(graph, params)
        return {"server_key": c["bootstraps"] > 0, "bootstraps": c["bootstraps"]}

    def encrypt(self, params, secret, spec: TFHEInteger, values):
        self.check_client_key(params, secret)
        v = check_values(spec.dtype, values, f"{spec!r}")
        b, a = encrypt_words(secret, spec.dtype, block_width(params, spec.msg_bits), v)
        return (b, a), v.shape, secret.key_id

    def decrypt(self, params, secret, graph, node, leaves, batch_shape):
        b, a = leaves
        return decrypt_words(secret, graph.nodes[node].attr("meta"), b, a, secret.key_id)

    def leaf_specs(self, graph, params, node: int) -> list:
        """b [B, L] and a [B, L, n] mod the moduli, B the node's blocks."""
        nb, limbs, moduli = blocks_of(graph.nodes[node].attr("meta")), len(params.moduli), tuple(params.moduli)
        return [((nb, limbs), np.uint32, moduli, -1), ((nb, limbs, params.long_dim), np.uint32, moduli, -2)]

    def runtime(self, graph, params, public, *, one_program: bool = True):
        """The server key's :func:`crossfhe.tfhe.ops.program_key` (every operator may bootstrap)."""
        return {"key": ops.program_key(_key_for(public, params))}

    def interpret(self, graph, params, inputs, rt, items: int = 1):
        return interpret(graph, params, inputs, rt)

    def eager_key(self, attrs: dict) -> tuple:
        return attrs["meta"]

    def eager_passes(self, params, public):
        """None: the bookkeeping is the rule each operator ran before it recorded or ran (:func:`rule`)."""
        return []

    def with_constants(self, rt: dict, graph, params, public) -> dict:
        return rt


SCHEME = IntegerScheme()


__all__ = ["DEFAULT", "OPS", "PASSES", "SCHEME", "IntegerScheme", "batch", "block_width", "check_values", "constant",
           "cost", "cse", "decrypt_words", "encrypt_words", "fresh", "interpret", "is_signed", "rule", "value_range",
           "width"]
