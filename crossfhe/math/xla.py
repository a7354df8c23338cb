"""``jit``: :func:`jax.jit` with XLA:CPU code-generation options for the library's kernels; ``program``: a whole
workload as one compiled executable whose tables are arguments.

The options are compile options of each jitted function (part of its compilation-cache key), never a
process-wide setting: a user's own jitted code, and JAX's configuration, stay as they were.

:data:`CPU_OPTIONS` asks XLA:CPU to prefer 512-bit vectors where the CPU has them (its default is
256-bit; a CPU without 512-bit vectors keeps its widest); the words are the same either way, and what it
gained is in benchmarks/README.md. Set :data:`ENABLED` to False to compare. The options are one constant value
on every backend: XLA's compile options are fields of one set shared by all its compilers, and a GPU's reads
none of the XLA:CPU ones, so nothing here asks which backend or device runs a program.

JAX takes compile options only on the outermost program: called while a trace is in progress (under a caller's
``jax.jit``, ``vmap`` or ``grad``, or inside a :class:`Program`) a :func:`jit` function is a plain :func:`jax.jit`
one, its operations part of the caller's program, which XLA compiles with the caller's options. That is the one
thing :func:`jit` asks of JAX at a call (whether its trace state is clean), and it picks no route: both forms
compile the same computation to the same words.

**Executables kept across processes.** JAX's persistent compilation cache saves the compile, but a new process
still traces and lowers every program before it can look one up, most of the README's first example's program loading
(benchmarks/README.md, "Start-up"). A :func:`jit` function marked ``persist=True`` (the
programs a process calls once or a few times: key generation, encryption, decryption) and the eager operations'
programs (:mod:`crossfhe.api.eager`) are instead kept as serialized executables in
:func:`crossfhe.runtime.executable_cache` (on once a context is created), under a digest of the function, its static
arguments, the structure, shapes and dtypes of the others, the compile options, the device, the CPU's features,
the library's sources and JAX's version: a later process loads the executable and runs it, nothing traced. Any
failure to save or load falls back to the ordinary path, and a damaged entry is removed.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import pickle
import threading

import jax
import numpy as np

from crossfhe import runtime

try:  # True when no trace is in progress (compile options are refused on a jit nested in a trace)
    from jax._src.core import trace_state_clean as _top_level
except ImportError:  # pragma: no cover - a JAX without it: no options (module docstring)
    _top_level = None

CPU_OPTIONS: dict[str, object] = {"xla_cpu_prefer_vector_width": 512}
"""The compile options of the programs :func:`jit` functions and :class:`Program` make (XLA:CPU code generation;
other backends' compilers do not read them)."""

ENABLED = True
"""Whether :func:`jit` functions use :data:`CPU_OPTIONS` (read at each call; for A/B measurements)."""


class _Jit:
    """Two :func:`jax.jit` wrappers of one function, with and without :data:`CPU_OPTIONS`: the first for a call at
    the top level, the second for one while a trace is in progress (module docstring); with ``persist``, top-level
    calls run executables kept across processes."""

    def __init__(self, fun, kwargs: dict, persist: bool = False):
        self._plain = jax.jit(fun, **kwargs)
        self._cpu = jax.jit(fun, compiler_options=CPU_OPTIONS, **kwargs)
        self._persist = _Persisted(fun, kwargs) if persist else None
        functools.update_wrapper(self, fun)

    def _pick(self):
        """The options-carrying jit at the top level (where JAX accepts options), else the plain one. A JAX without
        ``trace_state_clean`` gets the plain one everywhere: the same words, without the options."""
        return self._cpu if ENABLED and _top_level is not None and _top_level() else self._plain

    def __call__(self, *args, **kwargs):
        fn = self._pick()
        if self._persist is not None and _store() is not None and (_top_level is None or _top_level()):
            return self._persist(fn, fn is self._cpu, args, kwargs)
        if not getattr(_MATERIALIZE, "on", False):
            return fn(*args, **kwargs)
        _MATERIALIZE.on = False  # this call is a step of a materializing Program: the calls inside it are not
        try:
            out = fn(*args, **kwargs)
        finally:
            _MATERIALIZE.on = True
        return _materialized(out, (args, kwargs))

    def lower(self, *args, **kwargs):
        return self._pick().lower(*args, **kwargs)

    def trace(self, *args, **kwargs):
        return self._pick().trace(*args, **kwargs)

    def __get__(self, obj, objtype=None):  # as a method: bind like a function
        return self if obj is None else functools.partial(self, obj)


_MATERIALIZE = threading.local()
"""``on`` while a :class:`Program` with ``materialize`` traces its function outside any :func:`jit` call (per
thread: each thread traces its own)."""


def materializing(fn):
    """``fn``, whose :func:`jit` kernels' results are materialized while it is traced, as inside a :class:`Program`
    with ``materialize`` (a conditional XLA:CPU cannot fuse through; on other platforms nothing). For a caller that
    traces its own program (a compiled circuit): XLA would otherwise fuse each kernel's elementwise tail into every
    consumer and compute it again in each. The same words either way."""

    @functools.wraps(fn)
    def traced(*args, **kwargs):
        outer, _MATERIALIZE.on = getattr(_MATERIALIZE, "on", False), True
        try:
            return fn(*args, **kwargs)
        finally:
            _MATERIALIZE.on = outer

    return traced


def _materialized(out, inputs):
    """``out`` with each integer or float array through :func:`crossfhe.math.modular.fusion_barrier` (a conditional
    XLA:CPU cannot fuse into the array's consumers), its predicate read from the first array of ``inputs``. Other
    leaves pass through."""
    import jax.numpy as jnp

    from crossfhe.math.modular import fusion_barrier

    words = [x for x in jax.tree_util.tree_leaves(inputs) if isinstance(x, jax.Array) and x.size]
    if not words:
        return out

    def barrier(x):
        numeric = isinstance(x, jax.Array) and x.size and (jnp.issubdtype(x.dtype, jnp.integer)
                                                            or jnp.issubdtype(x.dtype, jnp.floating))
        return fusion_barrier(x, words[0]) if numeric else x

    return jax.tree_util.tree_map(barrier, out)


def jit(fun=None, /, *, persist: bool = False, **kwargs):
    """:func:`jax.jit` (same keyword arguments) with :data:`CPU_OPTIONS` at the top level; usable as
    ``@jit``, ``@partial(jit, static_argnames=...)`` or ``jit(f, ...)``. ``persist``: top-level calls run
    executables kept across processes (module docstring), for a module-level function whose static arguments are
    plain values (numbers, strings, tuples of them, enums, frozen dataclasses of them)."""
    if fun is None:
        return functools.partial(jit, persist=persist, **kwargs)
    return _Jit(fun, kwargs, persist)


# --------------------------------------------------------------------------------------------------
# Executables kept across processes
# --------------------------------------------------------------------------------------------------

_FORMAT = "crossfhe-executable-1"


@functools.cache
def _machine() -> str:
    """The host CPU's model and feature flags (an XLA:CPU executable is machine code for them), the library's and
    JAX's versions, and ``XLA_FLAGS`` (read once, when XLA starts: flags that change the code it makes, such as its
    optimization level)."""
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            lines = [ln for ln in f if ln.startswith(("model name", "flags"))]
        cpu = hashlib.sha256("".join(sorted(set(lines))).encode()).hexdigest()[:16]
    except OSError:
        import platform

        cpu = platform.processor() or platform.machine()
    versions = f"jax {jax.__version__}, jaxlib {jax.lib.__version__}"
    flags = os.environ.get("XLA_FLAGS", "")
    return f"{_FORMAT}, cpu {cpu}, sources {runtime.source_digest()}, {versions}, xla flags {flags!r}"


def _device() -> str:
    d = jax.local_devices()[0]
    return f"{d.platform} {getattr(d, 'device_kind', '')} {len(jax.local_devices())}"


def _store():
    """:func:`crossfhe.runtime.executable_cache`, or None where the process sees more than one device: an executable
    is loaded for the default device, while ``jax.jit`` places a call by its arguments' devices and shardings."""
    root = runtime.executable_cache()
    return root if root is not None and _one_device() else None


@functools.cache
def _one_device() -> bool:
    return jax.device_count() == 1


def executable_path(parts) -> os.PathLike | None:
    """The file that holds the executable named by ``parts`` (strings), or None when the store is off
    (:func:`_store`)."""
    root = _store()
    if root is None:
        return None
    optimized = "unoptimized" if jax.config.values.get("jax_disable_most_optimizations") else "optimized"
    text = "|".join([*parts, _device(), _machine(), optimized])
    return root / (hashlib.sha256(text.encode()).hexdigest()[:40] + ".exe")


def _trusted(path) -> bool:
    """Whether ``path`` and its directory belong to this user and other users may not write them (POSIX;
    elsewhere True)."""
    if not hasattr(os, "getuid"):
        return True
    for p in (path, path.parent):
        st = os.stat(p)
        if st.st_uid != os.getuid() or st.st_mode & 0o002:
            return False
    return True


def load_blob(path):
    """The object :func:`save_blob` wrote at ``path``, or None (absent, not trusted, or damaged: then removed)."""
    if path is None or not path.exists():
        return None
    try:
        if not _trusted(path):
            return None
        data = path.read_bytes()
        if len(data) < 32 or hashlib.sha256(data[:-32]).digest() != data[-32:]:
            raise ValueError("checksum")
        return pickle.loads(data[:-32])
    except Exception:  # noqa: BLE001 - a damaged or stale entry is made again, never trusted
        path.unlink(missing_ok=True)
        return None


def save_blob(path, obj) -> bool:
    """Write ``obj`` pickled to ``path`` atomically, readable by this user only, a checksum after it; False (nothing
    written) when it cannot be."""
    try:
        blob = pickle.dumps(obj)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        tmp.write_bytes(blob + hashlib.sha256(blob).digest())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except Exception:  # noqa: BLE001 - what cannot be kept is made again next time
        return False
    return True


def load_executable(path):
    """The :class:`jax.stages.Compiled` :func:`save_executable` wrote at ``path``, or None."""
    from jax.experimental import serialize_executable

    saved = load_blob(path)
    if saved is None:
        return None
    try:
        return serialize_executable.deserialize_and_load(*saved)
    except Exception:  # noqa: BLE001 - stale (another JAX or device): compiled again
        path.unlink(missing_ok=True)
        return None


def compile_fresh(lowered):
    """``lowered.compile()`` by XLA itself, JAX's persistent compilation cache skipped for this one compile; returns
    (executable, whether it was compiled here). An XLA:CPU executable that cache returns has been deserialized, and
    serializing such an executable again drops its machine code (its copy fails with "Function ... not found"), so
    only a freshly compiled one may be kept (:func:`save_executable`). Where JAX's cache cannot be skipped (a JAX
    without the hook), the executable is compiled as usual and reported as not fresh."""
    try:
        from jax._src import compilation_cache as cc

        used = cc.is_cache_used
    except (ImportError, AttributeError):
        return lowered.compile(), False
    try:  # nor an executable this process compiled earlier through JAX's cache, kept in memory by computation
        from jax._src.interpreters import pxla

        pxla._cached_compilation.cache_clear()
    except (ImportError, AttributeError):
        pass
    cc.is_cache_used = lambda backend: False
    try:
        return lowered.compile(), True
    finally:
        cc.is_cache_used = used


def lost_code(error: Exception) -> bool:
    """Whether ``error``, raised by a call of a kept executable or when its result is read, says part of its machine
    code is missing: XLA:CPU's serialized executable can lack a kernel (seen: "Function multiply_add_fusion not
    found") that a later process then cannot resolve. The first call of a loaded executable waits for its result
    (:class:`Executable`), and on this error the file is dropped for good (:func:`drop_lost`) and the program
    compiled in this process."""
    return isinstance(error, jax.errors.JaxRuntimeError) and "not found" in str(error) and "Function" in str(error)


def _lost_marker(path):
    return path.with_suffix(".lost")


def drop_lost(path) -> None:
    """Remove the kept executable at ``path``, which lost its code (:func:`lost_code`), and mark the path so that it
    is never kept again (:func:`save_executable`): its copies would lose their code again."""
    if path is None:
        return
    path.unlink(missing_ok=True)
    try:
        _lost_marker(path).touch()
    except OSError:
        pass


def save_executable(path, compiled) -> None:
    """Keep ``compiled``, compiled by :func:`compile_fresh`, at ``path`` (nothing written when it cannot be
    serialized, ``path`` is None or the path is marked by :func:`drop_lost`)."""
    if path is None or _lost_marker(path).exists():
        return
    from jax.experimental import serialize_executable

    try:
        saved = serialize_executable.serialize(compiled)
    except Exception:  # noqa: BLE001 - an executable that cannot be kept still runs
        return
    save_blob(path, saved)


class Executable:
    """A compiled executable called as a :func:`jit` function is (``name`` for :mod:`crossfhe.testing.trace`)."""

    __slots__ = ("compiled", "__name__", "heal", "_call")

    def __init__(self, compiled, name: str, heal=None):
        self.compiled, self.__name__, self.heal, self._call = compiled, name, heal, None

    def __call__(self, *args):
        """The executable on ``args``. A loaded one (``heal`` given) is checked on its first call: its result is
        waited for, and where it lost its code (:func:`lost_code`) ``heal(*args)`` (which drops the kept copy and
        compiles again for these arguments) replaces it; later calls run asynchronously as any. After the first
        call, the compiled object's own dispatcher is called directly (:func:`_dispatcher`)."""
        if self._call is not None:
            return self._call(*args)
        if self.heal is None:
            out = self.compiled(*args)
        else:
            try:
                out = jax.block_until_ready(self.compiled(*args))
            except Exception as e:
                if not lost_code(e):
                    raise
                self.compiled = self.heal(*args)
                out = self.compiled(*args)
            self.heal = None
        self._call = _dispatcher(self.compiled)
        return out


def _dispatcher(compiled):
    """The callable that ``compiled(*args)`` (a ``jax.stages.Compiled``, called once) forwards to: JAX's C++
    dispatcher, which ``Compiled.__call__`` reaches through a Python frame of its own (benchmarks/README.md, "Eager
    operations' Python"). ``compiled`` itself where it has none (another JAX version)."""
    call = getattr(compiled, "_call", None)
    return call if callable(call) else compiled


def _aval(x) -> tuple:
    if isinstance(x, jax.Array):
        return (x.shape, x.dtype, x.weak_type)
    if isinstance(x, (np.ndarray, np.generic)):
        return (x.shape, x.dtype, False)
    return (type(x).__name__,)


def _stable(value) -> str | None:
    """A text that names ``value`` across processes (every field of a dataclass, not only those its repr shows), or
    None for a value it cannot name so (then its program is not kept)."""
    import dataclasses
    import enum

    if value is None or isinstance(value, (bool, int, float, complex, str, bytes, enum.Enum, np.generic)):
        return repr(value)
    if isinstance(value, np.dtype):
        return f"dtype {value.str}"
    if isinstance(value, (tuple, list, frozenset)):
        items = [_stable(v) for v in (sorted(value, key=repr) if isinstance(value, frozenset) else value)]
        return None if None in items else f"{type(value).__name__}({', '.join(items)})"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = [_stable(getattr(value, f.name)) for f in dataclasses.fields(value)]
        if None in items:
            return None
        cls = type(value)
        return f"{cls.__module__}.{cls.__qualname__}({', '.join(items)})"
    return None


class _Persisted:
    """A :func:`jit` function's executables per (options, static arguments, argument structure and types), loaded
    from or saved to :func:`crossfhe.runtime.executable_cache`."""

    _all: list = []

    def __init__(self, fun, kwargs: dict):
        if "<locals>" in fun.__qualname__ or getattr(fun, "__closure__", None):
            raise ValueError(f"persist=True needs a module-level function without a closure, got {fun.__qualname__}")
        nums, names = kwargs.get("static_argnums"), kwargs.get("static_argnames")
        try:
            from jax._src.api_util import infer_argnums_and_argnames

            nums, names = infer_argnums_and_argnames(inspect.signature(fun), nums, names)
        except Exception:  # noqa: BLE001 - a JAX without it: the arguments as given
            nums = (nums,) if isinstance(nums, int) else tuple(nums or ())
            names = (names,) if isinstance(names, str) else tuple(names or ())
        self.nums, self.names = frozenset(nums), frozenset(names)
        self.name = f"{fun.__module__}.{fun.__qualname__}"
        self.loaded: dict = {}
        _Persisted._all.append(self)

    def __call__(self, jitted, cpu: bool, args, kwargs):
        if self.nums:
            dyn = tuple(a for i, a in enumerate(args) if i not in self.nums)
            static = tuple((i, args[i]) for i in sorted(self.nums) if i < len(args))
        else:
            dyn, static = args, ()
        if self.names and kwargs:
            dyn_kw = {k: v for k, v in kwargs.items() if k not in self.names}
            static += tuple(sorted((k, v) for k, v in kwargs.items() if k in self.names))
        else:
            dyn_kw = kwargs
        leaves, tree = jax.tree_util.tree_flatten((dyn, dyn_kw))
        key = (cpu, static, tree, tuple([_aval(x) for x in leaves]), jax.config.jax_enable_x64)
        exe = self.loaded.get(key)
        if exe is None:
            exe, path, loaded = self._load_or_compile(jitted, cpu, static, tree, key[3], args, kwargs)
            self.loaded[key] = exe
            if exe is False:
                return jitted(*args, **kwargs)
            try:  # the first call of a loaded executable is checked (lost_code)
                out = jax.block_until_ready(exe(*dyn, **dyn_kw)) if loaded else exe(*dyn, **dyn_kw)
            except Exception as e:
                if not (loaded and lost_code(e)):
                    raise
                drop_lost(path)
                exe = compile_fresh(jitted.lower(*args, **kwargs))[0]
                out = exe(*dyn, **dyn_kw)
            self.loaded[key] = _dispatcher(exe)  # later calls skip Compiled.__call__
            return out
        if exe is False:
            return jitted(*args, **kwargs)
        return exe(*dyn, **dyn_kw)

    def _load_or_compile(self, jitted, cpu, static, tree, avals, args, kwargs):
        """(executable or False where it cannot be kept, its path, whether it was loaded) for one call's structure:
        loaded, or compiled (and kept)."""
        named = _stable(static)
        if named is None or " at 0x" in str(tree):
            return False, None, False
        path = executable_path([self.name, named, str(tree), repr(avals), f"x64 {jax.config.jax_enable_x64}",
                                repr(CPU_OPTIONS) if cpu else "plain"])
        exe = load_executable(path)
        if exe is not None and exe.in_tree != tree:  # the digest named another structure (metadata a repr hides)
            exe = None
        if exe is not None:
            return exe, path, True
        exe, fresh = compile_fresh(jitted.lower(*args, **kwargs))
        if fresh:
            save_executable(path, exe)
        return exe, path, False


def clear_executables() -> None:
    """Drop the executables :func:`jit` functions marked ``persist`` hold in this process (they stay on disk)."""
    for p in _Persisted._all:
        p.loaded.clear()


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

    ``materialize``: the arrays each :func:`jit` kernel ``fn`` calls directly returns are materialized (a
    conditional XLA:CPU cannot fuse through), as the same kernels' results are between separate programs. Without
    it XLA fuses a kernel's elementwise tail into every consumer in the next kernels and computes it again in each
    (a whole workload ran several times slower as one program than kernel by kernel: benchmarks/README.md,
    "Workloads as one program, without recomputation"). The same words either way.
    """

    def __init__(self, fn, *, x64: bool = False, name: str | None = None, materialize: bool = False):
        self.fn = fn
        self.x64 = x64
        self.materialize = materialize
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
            outer, _MATERIALIZE.on = getattr(_MATERIALIZE, "on", False), self.materialize
            try:
                with self._scope():
                    closed, out_shape = jax.make_jaxpr(lambda *a: self.fn(*a), return_shape=True)(*args)
            finally:
                _MATERIALIZE.on = outer
            out_tree = jax.tree_util.tree_structure(out_shape)
            jaxpr = closed.jaxpr

            def run(consts, *leaves):
                return jax.core.eval_jaxpr(jaxpr, consts, *leaves)

            run.__name__ = self.name
            entry = (tuple(to_device(list(closed.consts))), jit(run), out_tree, tree, jaxpr)
            self._entries[key] = entry
        return entry, flat

    def __call__(self, *args):
        if _top_level is not None and not _top_level():
            if not self.materialize:
                return self.fn(*args)
            outer, _MATERIALIZE.on = getattr(_MATERIALIZE, "on", False), True
            try:
                return self.fn(*args)
            finally:
                _MATERIALIZE.on = outer
        (consts, exe, out_tree, *_), flat = self._entry(args)
        with self._scope():
            out = exe(consts, *flat)
        return jax.tree_util.tree_unflatten(out_tree, out)

    def inline(self, consts, *args):
        """``fn(*args)`` as the program's operations with ``consts`` (:meth:`constants` of the same structure, or a
        caller's tracers standing for them) in place of its constants: inside a caller's trace (a circuit's program)
        the tables stay arguments of the caller's program instead of becoming its embedded constants, and the
        materializing barriers are the program's own. ValueError where ``consts`` are not as many as the program
        takes."""
        (own, _, out_tree, _, jaxpr), flat = self._entry(args)
        consts = tuple(consts)
        if len(consts) != len(own):
            raise ValueError(f"{self.name}: {len(consts)} constants given, the program takes {len(own)}")
        with self._scope():
            out = jax.core.eval_jaxpr(jaxpr, consts, *flat)
        return jax.tree_util.tree_unflatten(out_tree, out)

    def constants(self, *args) -> tuple:
        """The arrays the program for ``args``' structure takes besides them (traced once, as a call would)."""
        return self._entry(args)[0][0]

    def lower(self, *args):
        """The lowered program for ``args``' structure (``.as_text()``, ``.compile()``), constants as arguments."""
        (consts, exe, *_), flat = self._entry(args)
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
