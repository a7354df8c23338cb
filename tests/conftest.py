"""Shared test fixtures and the test process's compilation-cache setting."""

import os

import pytest

from crossfhe.testing import trace

# Test-harness configuration, not library code. The test process itself keeps no persistent compilation cache:
# XLA:CPU's executable serialization segfaulted the whole run once in about 1800 tests (2026-11-28, writing a key
# generation program's entry; not reproduced alone), and within one process JAX's in-memory caches already reuse
# every program. The processes the tests start (the docs pages, tests/test_docs.py) share it, at
# CROSSFHE_TEST_SUBPROCESS_CACHE.
os.environ.setdefault("CROSSFHE_TEST_SUBPROCESS_CACHE", os.environ.get("CROSSFHE_JAX_CACHE") or ".jax_cache")
os.environ["CROSSFHE_JAX_CACHE"] = "0"  # crossfhe.runtime's opt-out: contexts and circuits leave the cache off


@pytest.fixture
def count_programs():
    """The library's compiled programs dispatched during a test (:func:`crossfhe.testing.trace.programs`)."""
    with trace.programs() as seen:
        yield seen
