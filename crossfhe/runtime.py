"""Process-wide settings that make crossfhe faster, applied only when asked (the CLI, the benchmarks, the contexts
and the circuits ask; a library import changes nothing).

:func:`enable_compilation_cache`: JAX's persistent compilation cache in the user's cache directory
(:func:`cache_dir`), so that a second process loads what the first compiled instead of compiling it again, and the
library's own store of compiled executables beside it (:func:`executable_cache`), so that it loads them without
tracing and lowering them first (the README's first CKKS example: measured in benchmarks/README.md, "Start-up"). A
cache the user configured in JAX wins; ``CROSSFHE_JAX_CACHE=0`` turns both off, ``CROSSFHE_JAX_CACHE=DIR`` moves
them.

:func:`keep_heap`: XLA:CPU allocates each jitted call's temporaries as one block and frees it after the
call. glibc serves blocks above 32 MiB (and any block from a worker thread's arena above 64 MiB) with a
fresh ``mmap`` and returns them with ``munmap``, so every call pays a page fault per 4 KiB it touches: at
N 2^16 a CKKS key switch touched about 57,000 new pages per call (measured with ``getrusage``), 30% of
its time on the dev box. Keeping freed memory in one heap removes them (0 faults per call).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import sys
from pathlib import Path

_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_M_ARENA_MAX = -8
_INT_MAX = 2**31 - 1
HEAP_ENV = {"MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(_INT_MAX)}
"""The environment that gives a process the same allocator settings from its start."""


def keep_heap(*, reexec: bool = False) -> bool:
    """Make glibc's malloc keep and reuse freed memory: one arena for all threads, no ``mmap`` for large
    blocks, and no return of the heap's free top to the system below 2 GiB. The process then keeps its
    peak heap, and repeated jitted calls reuse the same pages instead of faulting in new ones.

    In-process (``mallopt``) the arena limit only holds if no thread has yet asked glibc for an arena, so
    call it before JAX computes anything. ``reexec=True`` makes that certain: unless :data:`HEAP_ENV` is
    already in the environment, the process restarts itself (``os.execve``, same interpreter and
    arguments) with it, which glibc reads at startup. The CLI and the benchmarks do that. How many faults
    it removes depends on the allocation pattern: a CKKS key switch at N 2^16 went from about 57,000 to 0
    per call, while a small program with one 64 MiB temporary kept 3,000 to 13,000 of its 16,384.
    Returns True when the settings are in force; False off Linux/glibc, where nothing changes.
    """
    if not sys.platform.startswith("linux"):
        return False
    if reexec and any(os.environ.get(k) != v for k, v in HEAP_ENV.items()):
        os.execve(sys.executable, sys.orig_argv, {**os.environ, **HEAP_ENV})
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    settings = ((_M_ARENA_MAX, 1), (_M_MMAP_MAX, 0), (_M_TRIM_THRESHOLD, _INT_MAX))
    return all(mallopt(param, value) == 1 for param, value in settings)


_OFF = ("0", "off", "false", "no")


def cache_dir() -> Path:
    """The user's crossfhe cache directory: ``$CROSSFHE_CACHE_DIR``, else ``$XDG_CACHE_HOME/crossfhe``, else
    ``~/.cache/crossfhe``."""
    root = os.environ.get("CROSSFHE_CACHE_DIR")
    if root is None:
        root = os.path.join(os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache")), "crossfhe")
    return Path(root)


_EXECUTABLES: list[Path | None] = [None]


def executable_cache() -> Path | None:
    """Where the library keeps its compiled executables across processes (:func:`crossfhe.math.xla.jit` functions
    marked ``persist``, the eager operations' programs), or None: set by :func:`enable_compilation_cache`
    (``$CROSSFHE_JAX_CACHE``/executables, else :func:`cache_dir`/executables). An executable is machine code loaded
    into the process, as JAX's own cache's are: the directory must be as trusted as the library (entries in a
    directory other users can write to, or owned by another user, are not loaded)."""
    return _EXECUTABLES[0]


@functools.cache
def source_digest() -> str:
    """A digest of the library's sources (Python and native): a cached program is reused only by the code that
    made it."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for f in sorted(root.rglob("*")):
        if f.suffix in (".py", ".c", ".cc", ".h") and f.is_file():
            h.update(str(f.relative_to(root)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:24]


def enable_compilation_cache() -> Path | None:
    """Turn on JAX's persistent compilation cache for this process, every compile cached, at ``$CROSSFHE_JAX_CACHE``
    or :func:`cache_dir`/xla, and the library's executables beside it (:func:`executable_cache`). JAX's setting is
    left alone when JAX already has a cache directory (set by the user through ``jax.config`` or
    ``JAX_COMPILATION_CACHE_DIR``: theirs wins); nothing is turned on when ``CROSSFHE_JAX_CACHE`` is
    0/off/false/no. Returns JAX's directory in use (the user's, if theirs), or None when off. Idempotent and cheap:
    contexts call it on creation."""
    import jax

    setting = os.environ.get("CROSSFHE_JAX_CACHE", "")
    if setting.lower() in _OFF and setting:
        _EXECUTABLES[0] = None
        return None
    _EXECUTABLES[0] = Path(setting) / "executables" if setting else cache_dir() / "executables"
    current = jax.config.jax_compilation_cache_dir
    if current:
        return Path(current)
    path = Path(setting) if setting else cache_dir() / "xla"
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return path
