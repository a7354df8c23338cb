"""``jit``: :func:`jax.jit` with XLA:CPU code-generation options for the library's kernels; ``program``: a whole
workload as one compiled executable whose tables are arguments.

The options are compile options of each jitted function (part of its compilation-cache key), never a
process-wide setting: a user's own jitted code, and JAX's configuration, stay as they were.

:data:`CPU_OPTIONS` asks XLA:CPU to prefer 512-bit vectors where the CPU has them (its default is
256-bit; a CPU without 512-bit vectors keeps its widest); the words are the same either way, and what it
gained is in benchmarks/README.md. Set :data:`ENABLED` to False to compare.

On another backend (GPU, TPU) a :func:`jit` function is a plain :func:`jax.jit` one, and so it is when
called while a trace is in progress (under a caller's ``jax.jit``, ``vmap`` or ``grad``): JAX refuses compile
options on a nested jit, and XLA compiles the enclosing computation with the caller's options anyway.
"""

from __future__ import annotations

import functools

import jax
import numpy as np

try:  # True when no trace is in progress (compile options are refused on a jit nested in a trace)
    from jax._src.core import trace_state_clean as _top_level
except ImportError:  # pragma: no cover - a JAX without it: only the arguments tell
    _top_level = None

CPU_OPTIONS: dict[str, object] = {"xla_cpu_prefer_vector_width": 512}
"""The compile options of :func:`jit` functions on the CPU backend."""

ENABLED = True
"""Whether :func:`jit` functions use :data:`CPU_OPTIONS` on the CPU backend (read at each call; for A/B
measurements)."""


class _Jit:
    """Two :func:`jax.jit` wrappers of one function, with and without :data:`CPU_OPTIONS`, picked per call."""

    def __init__(self, fun, kwargs: dict):
        self._plain = jax.jit(fun, **kwargs)
        self._cpu = jax.jit(fun, compiler_options=CPU_OPTIONS, **kwargs)
        functools.update_wrapper(self, fun)

    def _pick(self, args, kwargs):
        if not ENABLED or jax.default_backend() != "cpu":
            return self._plain
        if _top_level is not None:
            return self._cpu if _top_level() else self._plain
        traced = any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves((args, kwargs)))
        return self._plain if traced else self._cpu

    def __call__(self, *args, **kwargs):
        return self._pick(args, kwargs)(*args, **kwargs)

    def lower(self, *args, **kwargs):
        return self._pick(args, kwargs).lower(*args, **kwargs)

    def trace(self, *args, **kwargs):
        return self._pick(args, kwargs).trace(*args, **kwargs)

    def __get__(self, obj, objtype=None):  # as a method: bind like a function
        return self if obj is None else functools.partial(self, obj)


def jit(fun=None, /, **kwargs):
    """:func:`jax.jit` (same keyword arguments) with :data:`CPU_OPTIONS` on the CPU backend; usable as
    ``@jit``, ``@partial(jit, static_argnames=...)`` or ``jit(f, ...)``."""
    if fun is None:
        return functools.partial(jit, **kwargs)
    return _Jit(fun, kwargs)


def plan_cache(maxsize: int = 128, *, on_device: bool = False):
    """:func:`functools.lru_cache` for functions that build plans and tables, run under
    :func:`jax.ensure_compile_time_eval`: the arrays they make are concrete even when the first call
    happens while a caller's ``jax.jit`` or ``vmap`` is tracing, so the cache never holds a tracer.

    ``on_device``: the result's NumPy leaves are placed on the default device once (:func:`to_device`), for
    plans that are arguments of compiled programs: a NumPy argument is copied host to device on every call."""

    def wrap(fun):
        cached = functools.lru_cache(maxsize=maxsize)(_eager(fun, on_device))
        functools.update_wrapper(cached, fun)
        return cached

    return wrap


def _eager(fun, on_device: bool = False):
    @functools.wraps(fun)
    def run(*args, **kwargs):
        with jax.ensure_compile_time_eval():
            out = fun(*args, **kwargs)
        return to_device(out) if on_device else out

    return run


_DEVICE_DTYPES = frozenset(
    np.dtype(t) for t in ("uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool")
)


def to_device(tree):
    """``tree`` with its NumPy array (and NumPy scalar) leaves of at most 32 bits made device arrays (concrete, also
    when called under a trace). 64-bit leaves stay NumPy: with x64 off, a device array of them would be narrowed, and
    the kernels that read them widen them inside a scoped ``jax.enable_x64``.

    Read such a leaf on the host as ``np.asarray(leaf)``: a device array's own ``astype(np.uint64)`` is narrowed to
    32 bits when x64 is off."""

    def put(a):
        if isinstance(a, (np.ndarray, np.generic)) and a.dtype in _DEVICE_DTYPES:
            return jax.device_put(a)
        return a

    with jax.ensure_compile_time_eval():
        return jax.tree_util.tree_map(put, tree)


class Program:
    """``fn`` as one compiled executable per argument structure, with every array it reads that is not an argument
    (the plans, tables and encoded constants its library calls fetch from their caches) passed in as an argument
    rather than embedded in the program.

    On the first call for a structure (the pytree structure of the arguments, their shapes and dtypes) ``fn`` is
    traced once (:func:`jax.make_jaxpr`): its Python runs with abstract arguments, the library's plan caches build
    their tables concretely (:func:`plan_cache`), and every concrete array the trace reads becomes a constant of the
    jaxpr. The executable is :func:`jit` of that jaxpr with its constants as its first argument, so a bootstrap's
    gigabytes of encoded diagonals travel as arguments (compiles stay small, :meth:`export` can write it) and each
    call is one dispatch: what a GPU needs, where every separate executable is a synchronous launch. The constants
    are kept with the executable (they are the cached tables the trace read, not copies).

    Called while a trace is in progress (under a caller's ``jax.jit``, ``vmap`` or another program) it is ``fn``
    itself: the caller's trace takes the operations in. ``x64``: trace and run inside ``jax.enable_x64(True)`` (the
    float64 Fourier kernels of TFHE). The result's pytree structure (static metadata included: levels, scales, key
    ids) is the one the trace produced.
    """

    def __init__(self, fn, *, x64: bool = False, name: str | None = None):
        self.fn = fn
        self.x64 = x64
        self.name = name or getattr(fn, "__name__", "program")
        self._entries: dict = {}
        functools.update_wrapper(self, fn)

    @staticmethod
    def _signature(flat) -> tuple:
        return tuple((tuple(np.shape(x)), str(getattr(x, "dtype", None) or np.asarray(x).dtype)) for x in flat)

    def _scope(self):
        import contextlib

        return jax.enable_x64(True) if self.x64 else contextlib.nullcontext()

    def _entry(self, args):
        flat, tree = jax.tree_util.tree_flatten(args)
        key = (tree, self._signature(flat))
        entry = self._entries.get(key)
        if entry is None:
            with self._scope():
                closed, out_shape = jax.make_jaxpr(lambda *a: self.fn(*a), return_shape=True)(*args)
            out_tree = jax.tree_util.tree_structure(out_shape)
            jaxpr = closed.jaxpr

            def run(consts, *leaves):
                return jax.core.eval_jaxpr(jaxpr, consts, *leaves)

            run.__name__ = self.name
            entry = (tuple(to_device(list(closed.consts))), jit(run), out_tree, tree)
            self._entries[key] = entry
        return entry, flat

    def __call__(self, *args):
        if _top_level is not None and not _top_level():
            return self.fn(*args)
        (consts, exe, out_tree, _), flat = self._entry(args)
        with self._scope():
            out = exe(consts, *flat)
        return jax.tree_util.tree_unflatten(out_tree, out)

    def constants(self, *args) -> tuple:
        """The arrays the program for ``args``' structure takes besides them (traced once, as a call would)."""
        return self._entry(args)[0][0]

    def lower(self, *args):
        """The lowered program for ``args``' structure (``.as_text()``, ``.compile()``), constants as arguments."""
        (consts, exe, _, _), flat = self._entry(args)
        with self._scope():
            return exe.lower(consts, *flat)


def program(fn=None, /, **kwargs):
    """:class:`Program` as a decorator: ``@program`` or ``@program(x64=True)``."""
    if fn is None:
        return functools.partial(program, **kwargs)
    return Program(fn, **kwargs)


@functools.partial(jax.jit, static_argnums=(1, 2))
def _rows_program(x, start: int, stop: int):
    return x[start:stop]


def rows(x, start: int, stop: int):
    """``x[start:stop]`` along the first axis as one compiled program with static bounds. An eager ``x[a:b]`` on a
    device array dispatches a dynamic slice and copies its start indices host to device on each call (a synchronous
    copy on a GPU); under a trace this is the plain slice."""
    return _rows_program(x, int(start), int(stop))


@functools.partial(jax.jit, static_argnums=1)
def _split_program(x, size: int):
    return tuple(x[i : i + size] for i in range(0, x.shape[0], size))


def split_rows(x, size: int) -> tuple:
    """``x`` cut along the first axis into consecutive blocks of ``size`` rows (the last may be shorter), all in one
    compiled program (:func:`rows` says why)."""
    return _split_program(x, int(size))


@functools.partial(jax.jit, static_argnums=1)
def _pad_program(x, total: int):
    return jax.numpy.concatenate([x, jax.numpy.zeros((total - x.shape[0],) + x.shape[1:], x.dtype)])


def pad_rows(x, total: int):
    """``x`` with zero rows appended along the first axis up to ``total`` rows, in one compiled program (an eager
    ``jnp.pad`` or ``jnp.zeros`` copies its fill value host to device)."""
    if total < x.shape[0]:
        raise ValueError(f"pad_rows: {x.shape[0]} rows do not fit in {total}")
    return x if total == x.shape[0] else _pad_program(x, int(total))


_zeros_program = jax.jit(jax.numpy.zeros_like)


def zeros_like(x):
    """``jnp.zeros_like(x)`` as one compiled program (an eager one copies its fill value host to device)."""
    return _zeros_program(x)


@jax.jit
def unstack(x) -> tuple:
    """``(x[0], x[1], ...)`` along the first axis, in one compiled program (:func:`rows` says why)."""
    return tuple(x[i] for i in range(x.shape[0]))
