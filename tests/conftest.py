"""Shared test fixtures. The persistent compilation cache makes repeated runs compile less."""

import os

import jax
import pytest

from crossfhe.testing import trace

# Test-harness configuration, not library code: the library itself never touches jax.config.
jax.config.update("jax_compilation_cache_dir", os.environ.get("CROSSFHE_JAX_CACHE", ".jax_cache"))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


@pytest.fixture
def count_programs():
    """The library's compiled programs dispatched during a test (:func:`crossfhe.testing.trace.programs`)."""
    with trace.programs() as seen:
        yield seen
