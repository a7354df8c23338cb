"""crossfhe.runtime.keep_heap, in fresh processes (it changes the allocator of the process it runs in)."""

import subprocess
import sys

import pytest

_FAULTS = """
import resource, sys
import crossfhe.runtime
kept = crossfhe.runtime.keep_heap() if sys.argv[1] == "keep" else None
import jax, jax.numpy as jnp
from jax import lax
# a 64 MiB temporary (kept apart by the conditional) reduced to 16 KiB: above glibc's mmap thresholds
f = jax.jit(lambda x: jnp.sum(lax.cond(x[0, 0] < 5, lambda u: u * 2 + 1, lambda u: u * 3, x), axis=1))
x = jnp.ones((4096, 4096), jnp.float32)
for _ in range(3):
    f(x).block_until_ready()
r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    f(x).block_until_ready()
print(kept, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0) // 5)
"""


def _faults_per_call(mode: str) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", _FAULTS, mode], capture_output=True, text=True, check=True)
    kept, faults = out.stdout.split()
    return kept, int(faults)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt is glibc's; elsewhere keep_heap is a no-op")
def test_keep_heap_stops_page_faults_of_repeated_large_calls():
    """Without it every call maps its 64 MiB temporary afresh (16384 pages, one fault each); with it the
    pages are reused (a few faults at most). (Large *outputs* still fault in part with it: about 60% of
    their pages, measured; the temporaries of a key switch are what it removes.)"""
    kept, faults = _faults_per_call("keep")
    assert kept == "True"
    assert faults < 100
    _, faults_default = _faults_per_call("default")
    assert faults_default > 8000
