"""Process-wide settings that make crossfhe faster, applied only when asked (the CLI and the benchmarks
ask; a library import changes nothing).

:func:`keep_heap`: XLA:CPU allocates each jitted call's temporaries as one block and frees it after the
call. glibc serves blocks above 32 MiB (and any block from a worker thread's arena above 64 MiB) with a
fresh ``mmap`` and returns them with ``munmap``, so every call pays a page fault per 4 KiB it touches: at
N 2^16 a CKKS key switch touched about 57,000 new pages per call (measured with ``getrusage``), 30% of
its time on the dev box. Keeping freed memory in one heap removes them (0 faults per call).
"""

from __future__ import annotations

import ctypes
import os
import sys

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
