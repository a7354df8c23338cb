"""examples/multihost_circuit.py runs as documented: a client, two server processes joined by jax.distributed, and
the client's decryption of the joined shares."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "multihost_circuit.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


# slow: 51 s cold in CI (two processes); the sharded batch is the same program (test_batches_run_itemwise runs by
# default)
@pytest.mark.slow
def test_multihost_example(tmp_path):
    env = dict(os.environ, CROSSFHE_CACHE_DIR=str(tmp_path / "cache"))  # not the user's cache directory
    run = lambda *a: subprocess.run([sys.executable, str(EXAMPLE), *a], capture_output=True, text=True,  # noqa: E731
                                    timeout=600, env=env)
    assert run("client", str(tmp_path)).returncode == 0
    coordinator = f"localhost:{_free_port()}"
    servers = [subprocess.Popen([sys.executable, str(EXAMPLE), "server", str(tmp_path), "--process-id", str(i),
                                 "--num-processes", "2", "--coordinator", coordinator], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env) for i in range(2)]
    outs = [s.communicate(timeout=600) for s in servers]
    assert all(s.returncode == 0 for s in servers), outs[0][1][-2000:] + outs[1][1][-2000:]
    assert "items 0..3" in outs[0][0] and "items 4..7" in outs[1][0]
    res = run("decrypt", str(tmp_path))
    assert res.returncode == 0, res.stderr[-2000:]
    errors = [float(e) for e in res.stdout.split("max error:")[1].split()]
    assert max(errors) < 2.0**-6  # N13_L3 keeps 2^-12.3 per slot; a sum of 16 products and its square lose 6 bits
