"""Eager values run each operation as a one-operation circuit: the same graph, passes, runtime and lowering as a
compiled circuit, one compiled program per operation and operand layout, cached.

An operation on concrete values (``x * y`` on two :class:`~crossfhe.api.ckks.EncryptedVector` s) is the graph

    %0 = input {fixed operand metadata}     (level and scale, noise, interval: what the operand is now)
    %1 = input {...}
    %2 = <op> %0, %1 {attributes}
    %3 = output %2

run through the scheme's eager passes (:meth:`Scheme.eager_passes`: the bookkeeping rules, e.g. for CKKS the
relinearization and the rescale after a product, level drops and scale alignment between operands) and lowered by
the scheme's ``interpret`` (the kernels a compiled circuit runs). The lowered graph, its program and the part of
its runtime that does not depend on the operation's constants (keys, key-switching plans, rescale tables) are made
once per (scheme, key set, operation, static attributes, operands' metadata, batch shapes) and kept here; a call
then costs a dictionary lookup and one dispatch of one executable. An operation's constants (a scalar, a plaintext
vector, a lookup table: the attributes the scheme names in ``value_attrs``) are not part of that key, so ``x * 0.25``
and ``x * 0.5`` share one program; their encodings (:meth:`Scheme.with_constants`) are kept by their values (a
plaintext by its content key), the most recently used first, up to :data:`CONSTANT_BYTES` of encoded words, so a
constant used again (a mask, a layer's weights) is not encoded again.

Batch sizes share programs. The n values of a call run in one batch axis of :func:`bucket` (n) rows: n up to 16,
above that n rounded up so that only its four leading bits remain (fewer than n / 8 rows added), the rows beyond n
zero words (trivial encryptions of zero) that are dropped from the result. The rows are independent (the program
maps the operation over them), so the n results are the words an n-row program gives: ``x < y`` on 100 values and
on 104 run one program, and a [3, 4] batch runs the program of 12.

Called while a trace is in progress (operands holding a user's ``jax.jit`` or ``vmap`` tracers), the lowered
graph's ``interpret`` runs inside the caller's trace instead of a program of its own. Programs are
:class:`crossfhe.math.xla.Program` s: every table the lowering reads is an argument, never an embedded constant.
"""

from __future__ import annotations

import functools
import math
import weakref

import jax
import numpy as np

from crossfhe.api.ir import Builder, CircuitError, Graph
from crossfhe.api.trace import source_line
from crossfhe.errors import ParameterError
from crossfhe.math import xla

EAGER_MARK = "eager"
"""The attribute that marks the operation's own node in the one-operation graph (its constants are substituted per
call); passes carry attributes over, so the lowered node that computes it still has it."""

_CACHE: dict = {}
_LIMIT = 4096

CONSTANT_BYTES = 256 << 20
"""The most bytes of encoded constants kept for eager operations (plaintexts, scalars' residues, lookup tables),
over every context: past it the least recently used go first."""
_CONSTANTS: dict = {}  # (program key, constants' values) -> (runtime, its flattened leaves, bytes); in use order
_CONSTANT_BYTES = [0]


_WATCHED: dict = {}


def _watch(public) -> None:
    """Drop ``public``'s programs (and the key material their runtimes hold) when it is collected: entries are keyed
    by its ``id``, which a later object may reuse."""
    key_id = id(public)
    if key_id in _WATCHED:
        return

    def forget(_ref, key_id=key_id, watched=_WATCHED, cache=_CACHE, consts=_CONSTANTS, used=_CONSTANT_BYTES):
        watched.pop(key_id, None)
        for k in [k for k in cache if k[1] == key_id]:
            cache.pop(k, None)
        for k in [k for k in consts if k[0][1] == key_id]:
            used[0] -= consts.pop(k)[2]

    try:
        _WATCHED[key_id] = weakref.ref(public, forget)
    except TypeError:
        _WATCHED[key_id] = None


def _masked(attrs: dict, value_attrs: frozenset) -> tuple:
    """The attributes that decide the program: constants replaced by their shape and dtype."""
    out = []
    for k, v in sorted(attrs.items()):
        if k in value_attrs:
            arr = np.asarray(v)
            out.append((k, ("value", arr.shape, arr.dtype.str)))
        else:
            out.append((k, v))
    return tuple(out)


def _with_constants(scheme, entry, key, attrs: dict, consts: dict, params, public) -> tuple:
    """(runtime, its flattened leaves) of this call: the entry's static runtime with the call's constants encoded,
    kept by their values (:data:`CONSTANT_BYTES`)."""
    values = tuple((k, attrs[k]) for k in sorted(attrs) if k in scheme.value_attrs)
    try:
        ckey = (key, values)
        hit = _CONSTANTS.pop(ckey, None)
    except TypeError:  # a value that is not hashable: encoded for this call only
        ckey = hit = None
    if hit is not None:
        _CONSTANTS[ckey] = hit  # the most recently used last
        return hit[0], hit[1]
    static = entry.static_rt
    rt = scheme.with_constants(static, _substituted(entry.lowered, attrs, consts, scheme.value_attrs), params, public)
    leaves = tuple(jax.tree_util.tree_leaves(rt))
    if ckey is not None:
        size = sum(int(getattr(a, "nbytes", 0)) for k, v in rt.items() if static.get(k) is not v
                   for a in jax.tree_util.tree_leaves(v))
        if size <= CONSTANT_BYTES:
            while _CONSTANTS and _CONSTANT_BYTES[0] + size > CONSTANT_BYTES:
                _CONSTANT_BYTES[0] -= _CONSTANTS.pop(next(iter(_CONSTANTS)))[2]
            _CONSTANTS[ckey] = (rt, leaves, size)
            _CONSTANT_BYTES[0] += size
    return rt, leaves


def _batch(word, item: int) -> tuple:
    """The leading (batch) axes of ``word``, an array whose last ``item`` axes are one value's."""
    try:
        shape = word.shape
    except AttributeError:
        shape = np.shape(word)
    return tuple(shape[: len(shape) - item])


def _broadcast(batches: tuple) -> tuple:
    """The batch shape of a call: its operands' batch shapes broadcast (NumPy's rules)."""
    return batches[0] if len(set(batches)) == 1 else tuple(np.broadcast_shapes(*batches))


def bucket(n: int) -> int:
    """The rows an eager program runs for ``n`` values at once: n up to 16, above that n rounded up to a multiple of
    2^(bit_length(n) - 4), so that only its four leading bits remain (fewer than n / 8 rows added; eight sizes per
    doubling: 17 and 18 run as 18, 100 to 104 as 104)."""
    if n <= 16:
        return n
    step = 1 << (n.bit_length() - 4)
    return -(-n // step) * step


def _bucketed(scheme, operands, batches: tuple) -> tuple:
    """(operands, batches, shape) of a call on concrete words: every batched operand broadcast to the call's batch
    shape, its batch axes flattened into one of :func:`bucket` (n) rows, zero words in the rows past n; ``shape``
    (the batch shape, n) for :func:`_unbucketed`. Unchanged (shape None) where that is the call already or an
    operand's words do not match the scheme's ``item_ndims``."""
    import jax.numpy as jnp

    items = scheme.item_ndims
    full = _broadcast(batches)
    n = math.prod(full)
    rows = bucket(n)
    if (len(full) == 1 and rows == n) or any(len(w) != len(items) for _, w in operands):
        return operands, batches, None
    out = []
    with jax.enable_x64(True):  # words of 64 bits keep their type (scoped: no global setting)
        for (attrs, words), b in zip(operands, batches, strict=True):
            if b:
                padded = []
                for w, k in zip(words, items, strict=True):
                    w = jnp.asarray(w)
                    tail = w.shape[w.ndim - k:]
                    w = jnp.broadcast_to(w, full + tail).reshape((n,) + tail)
                    if rows > n:
                        w = jnp.concatenate([w, jnp.zeros((rows - n,) + tail, w.dtype)])
                    padded.append(w)
                words = tuple(padded)
            out.append((attrs, words))
    return out, tuple((rows,) if b else () for b in batches), (full, n)


def _unbucketed(words, shape):
    """The result words of a bucketed call (:func:`_bucketed`): the first n rows, in the call's batch shape."""
    if shape is None:
        return words
    full, n = shape
    with jax.enable_x64(True):
        return jax.tree_util.tree_map(lambda a: a[:n].reshape(full + a.shape[1:]), words)


def _graph(scheme, op: str, attrs: dict, inputs: list[dict], consts: dict) -> Graph:
    b = Builder(scheme.name)
    for key, array in consts.items():
        b.consts[key] = array
    args = [b.add("input", (), dict(a, index=i), f"operand {i}", merge=False) for i, a in enumerate(inputs)]
    node = b.add(op, args, dict(attrs, **{EAGER_MARK: 1}), source_line() or op, merge=False)
    out = scheme.eager_output(b, node, inputs)
    return b.graph(args, [out])


def _substituted(lowered: Graph, attrs: dict, consts: dict, value_attrs: frozenset) -> Graph:
    """``lowered`` with the marked node's constants (``value_attrs`` of ``attrs``) taken from this call."""
    new = {k: v for k, v in attrs.items() if k in value_attrs}
    nodes = tuple(n.with_attrs(**new) if n.attr(EAGER_MARK) else n for n in lowered.nodes)
    merged = dict(lowered.consts)
    merged.update(consts)
    return Graph(lowered.scheme, nodes, lowered.inputs, lowered.outputs, merged)


class _Entry:
    __slots__ = ("lowered", "static_rt", "program", "has_values", "compiled", "by_operation", "rt_leaves", "out")

    def __init__(self, lowered, static_rt, program, has_values):
        self.lowered, self.static_rt, self.program, self.has_values = lowered, static_rt, program, has_values
        self.compiled = None  # (constants, executable, output structure), made on the first call outside a trace
        self.by_operation = False  # the graph bootstraps: its operations run as separate programs
        self.rt_leaves = None if has_values else tuple(jax.tree_util.tree_leaves(static_rt))  # flattened once
        self.out = lowered.nodes[lowered.outputs[0]]


def _item_fn(scheme, lowered: Graph, params, batches: list[tuple], batch: tuple):
    """The lowered graph on operands with leading ``batches`` axes, broadcast to ``batch`` (NumPy's rules)."""

    def item(inputs, rt, items: int = 1):
        return tuple(tuple(o) for o in scheme.interpret(lowered, params, inputs, rt, items=items))

    if not batch:
        return item
    items = math.prod(batch)

    def run(inputs, rt):
        import jax.numpy as jnp

        full = tuple(tuple(jnp.broadcast_to(a, batch + a.shape[len(b):]) for a in x) if b != batch else x
                     for x, b in zip(inputs, batches, strict=True))
        fn = functools.partial(item, items=items)
        for _ in batch:
            fn = jax.vmap(fn, in_axes=(0, None))
        return fn(full, rt)

    return run


def run(scheme, params, public, op: str, attrs: dict, operands, *, consts: dict | None = None, check=None):
    """(result node, result words) of ``op`` on ``operands`` (a list of (input attributes, tuple of word arrays))
    with ``attrs`` (constants referenced by key in ``consts``, :meth:`crossfhe.api.ir.Builder.const`'s keys), under
    the key set ``public``. The result node is the lowered graph's output node: its attributes are the result's
    metadata (level and scale, interval, ...). ``check``: called with the lowered graph on every call whose graph
    runs operation by operation (:meth:`Scheme.by_operation`: a CKKS bootstrap, asked for or placed), before any
    work; it raises on what this call's operands forbid (their bounds, which the cached graph does not depend on)."""
    consts = consts or {}
    value_attrs = scheme.value_attrs
    item, eager_key = scheme.item_ndims[0], scheme.eager_key
    metas, batches = [], []
    for a, w in operands:
        metas.append(eager_key(a))
        batches.append(_batch(w[0], item))
    batches = tuple(batches)
    nested = xla._top_level is not None and not xla._top_level()
    shape = None
    if not nested and any(batches):
        operands, batches, shape = _bucketed(scheme, operands, batches)
    key = (scheme.name, id(public), op, _masked(attrs, value_attrs) if attrs else (), tuple(metas), batches)
    entry = _CACHE.get(key)
    if entry is None:
        batch = _broadcast(batches)
        graph = _graph(scheme, op, attrs, [a for a, _ in operands], consts)
        lowered = graph
        try:
            for _, fn in scheme.eager_passes(params, public):
                lowered = fn(lowered, params)
        except CircuitError as e:  # the rules' refusal, in an eager user's terms (no circuit here)
            raise ParameterError(str(e)) from None
        has_values = any(k in value_attrs for k in attrs)
        static_rt = scheme.runtime(lowered, params, public, one_program=not scheme.by_operation(lowered))
        program = xla.Program(_item_fn(scheme, lowered, params, batches, batch), x64=scheme.x64(params),
                              name=f"{scheme.name}_{op}")
        entry = _Entry(lowered, static_rt, program, has_values)
        entry.by_operation = scheme.by_operation(lowered)
        if len(_CACHE) >= _LIMIT:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = entry
        _watch(public)
    if check is not None and entry.by_operation:
        check(entry.lowered)
    if entry.has_values:
        rt, rt_leaves = _with_constants(scheme, entry, key, attrs, consts, params, public)
    else:
        rt, rt_leaves = entry.static_rt, entry.rt_leaves
    compiled = entry.compiled
    if compiled is not None and not nested:
        # the common call: a compiled program whose runtime bundle was flattened once; only the words travel
        constants, exe, out_tree = compiled
        leaves = [a for _, w in operands for a in w]
        if entry.program.x64:
            with jax.enable_x64(True):
                out = exe(constants, *leaves, *rt_leaves)
        else:
            out = exe(constants, *leaves, *rt_leaves)
        return entry.out, _unbucketed(jax.tree_util.tree_unflatten(out_tree, out)[0], shape)
    lowered = entry.lowered
    inputs = tuple(tuple(w) for _, w in operands)
    if nested or entry.by_operation:
        # inside a caller's trace its program takes the operations in; a bootstrap runs operation by operation
        with entry.program._scope():
            words = entry.program.fn(inputs, rt)
    else:
        if compiled is None:
            entry.compiled = compiled = _compile(scheme, params, lowered, entry.program, key, inputs, rt)
        constants, exe, out_tree = compiled
        with entry.program._scope():
            words = jax.tree_util.tree_unflatten(out_tree, exe(constants, *jax.tree_util.tree_leaves((inputs, rt))))
    return entry.out, _unbucketed(words[0], shape)


def _compile(scheme, params, lowered: Graph, program, key, inputs, rt):
    """(constants, executable, output structure) of ``program`` for these arguments, kept across processes as a
    compiled executable (:func:`crossfhe.math.xla.load_executable`; on once a context is created) together with the
    program's constants and output structure, under a digest of the operation, the operands' layout, the arguments'
    structure, the parameters, the kernel set and the native build (the store adds the device, the CPU, the
    library's sources and JAX's version): a later process loads it instead of tracing, lowering and compiling it
    again. The constants stay arguments of the executable, as in :class:`~crossfhe.math.xla.Program`. Without the
    store, or on any failure to save or load, it is traced here."""
    flat, treedef = jax.tree_util.tree_flatten((inputs, rt))
    kernels = scheme.kernels(params)
    parts = ["eager", repr(key[0:1] + key[2:]), str(treedef), repr([(np.shape(x), str(x.dtype)) for x in flat]),
             scheme.params_digest(params), getattr(kernels, "name", str(kernels)), scheme.build_id(params),
             f"x64 {program.x64}"]
    path = xla.executable_path(parts) if xla.ENABLED else None
    side = None if path is None else path.with_suffix(".consts")
    loaded = xla.load_executable(path)
    saved = None if loaded is None else xla.load_blob(side)
    if saved is not None:
        host_consts, out_tree = saved

        def heal(constants, *leaves):  # the kept executable lost its code: dropped for good, compiled here
            xla.drop_lost(path)
            again = jax.tree_util.tree_unflatten(treedef, leaves)
            return _compile(scheme, params, lowered, program, key, *again)[1].compiled

        return tuple(xla.to_device(list(host_consts))), xla.Executable(loaded, program.name, heal), out_tree
    (constants, exe, out_tree, *_), _ = program._entry((inputs, rt))
    if path is None:
        return constants, exe, out_tree
    with program._scope():
        compiled, fresh = xla.compile_fresh(exe.lower(constants, *flat))
    if fresh and xla.save_blob(side, ([np.asarray(c) for c in constants], out_tree)):
        xla.save_executable(path, compiled)
    return constants, xla.Executable(compiled, program.name), out_tree


def clear() -> None:
    """Forget every cached eager program and encoded constant (tests; a process that changes kernel sets)."""
    _CACHE.clear()
    _CONSTANTS.clear()
    _CONSTANT_BYTES[0] = 0


__all__ = ["CONSTANT_BYTES", "EAGER_MARK", "bucket", "clear", "run"]
