"""Shared test fixtures, the test process's compilation-cache setting and its bound on live programs."""

import gc
import os
from pathlib import Path

import jax
import pytest

from crossfhe.testing import trace

# Test-harness configuration, not library code (the library turns the cache on through
# crossfhe.runtime.enable_compilation_cache, which leaves a directory set here alone): one persistent compilation
# cache for the test process and the processes it starts (the docs pages, tests/test_docs.py), at
# $CROSSFHE_JAX_CACHE, else the repository's .jax_cache; CROSSFHE_JAX_CACHE=0 turns it off for both.
_CACHE = os.environ.get("CROSSFHE_JAX_CACHE") or str(Path(__file__).resolve().parent.parent / ".jax_cache")
if _CACHE.lower() not in ("0", "off", "false", "no"):
    jax.config.update("jax_compilation_cache_dir", _CACHE)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    # the library's executable store beside it (crossfhe.runtime.enable_compilation_cache), not in the user's cache
    # directory, and shared with the docs pages' processes, which inherit the variable: 5 pages cold took 281 s with
    # one store against 314 s with one per page (2-core AMD EPYC, 2026-11-29)
    os.environ.setdefault("CROSSFHE_JAX_CACHE", _CACHE)


def _map_limit() -> int | None:
    """Half the kernel's limit on a process's memory mappings (Linux), None where there is none to read."""
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read()) // 2
    except (OSError, ValueError):
        return None


def _maps() -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


_MAP_LIMIT = _map_limit()


@pytest.fixture(autouse=True, scope="module")
def _bounded_programs():
    """Drop JAX's compiled programs after a test module when the process holds more than half the memory mappings
    the kernel allows (``vm.max_map_count``, 65530 by default). Every live XLA:CPU executable holds about three
    mappings and a test run compiles tens of thousands of programs; at the limit the next compile or serialization
    fails inside XLA with a segmentation fault (a full CI run died so, at test 765 of 1848, 2026-11-29), so the
    bound is kept here, over JAX's caches and the library's own (the eager programs, the persisted executables).
    Later tests recompile (or load from the persistent caches) what they need."""
    yield
    if _MAP_LIMIT is not None and _maps() > _MAP_LIMIT:
        from crossfhe.api import eager
        from crossfhe.math import xla

        jax.clear_caches()
        eager.clear()
        xla.clear_executables()
        gc.collect()


@pytest.fixture
def count_programs():
    """The library's compiled programs dispatched during a test (:func:`crossfhe.testing.trace.programs`)."""
    with trace.programs() as seen:
        yield seen
