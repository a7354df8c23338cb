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
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_M_ARENA_MAX = -8
_INT_MAX = 2**31 - 1


def keep_heap() -> bool:
    """Make glibc's malloc keep and reuse freed memory: one arena for all threads, no ``mmap`` for large
    blocks, and no return of the heap's free top to the system below 2 GiB. The process then keeps its
    peak heap, and repeated jitted calls reuse the same pages instead of faulting in new ones.

    Same effect as starting Python with ``MALLOC_ARENA_MAX=1 MALLOC_MMAP_MAX_=0
    MALLOC_TRIM_THRESHOLD_=2147483647``. Call it before JAX runs anything (threads that already have an
    arena keep it). Returns True when applied; False off Linux/glibc, where nothing changes.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    settings = ((_M_ARENA_MAX, 1), (_M_MMAP_MAX, 0), (_M_TRIM_THRESHOLD, _INT_MAX))
    return all(mallopt(param, value) == 1 for param, value in settings)
