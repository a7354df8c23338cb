"""crossfhe.runtime.keep_heap, in fresh processes (it changes the allocator of the process it runs in)."""

import subprocess
import sys

import pytest

_PROBE = """
import os, sys
import crossfhe.runtime as r
before = all(os.environ.get(k) == v for k, v in r.HEAP_ENV.items())
kept = r.keep_heap(reexec=sys.argv[1] == "reexec")
print(before, kept, all(os.environ.get(k) == v for k, v in r.HEAP_ENV.items()))
"""


def _probe(mode: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, check=True)
    return out.stdout.split()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt is glibc's; elsewhere keep_heap is a no-op")
def test_keep_heap_applies_and_reexec_restarts_with_the_environment():
    """In-process it applies the settings and leaves the environment alone; with reexec the process
    restarts once, and the restarted process (which prints) starts with HEAP_ENV set."""
    assert _probe("inplace") == ["False", "True", "False"]
    assert _probe("reexec") == ["True", "True", "True"]
