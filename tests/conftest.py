"""Shared test fixtures. The persistent compilation cache makes repeated runs compile less."""

import os

import jax
import pytest

# Test-harness configuration, not library code: the library itself never touches jax.config.
jax.config.update("jax_compilation_cache_dir", os.environ.get("CROSSFHE_JAX_CACHE", ".jax_cache"))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


@pytest.fixture
def counting_pool():
    """A one-worker thread pool (as crossfhe.ring.ntt makes on two CPUs) and the list its submissions append to."""
    from concurrent.futures import ThreadPoolExecutor

    submitted = []

    class Pool(ThreadPoolExecutor):
        def submit(self, *a, **k):
            submitted.append(1)
            return super().submit(*a, **k)

    pool = Pool(max_workers=1)
    yield pool, submitted
    pool.shutdown()
