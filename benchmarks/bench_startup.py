"""The first hour: the README's first example in a fresh process, against the same task in TenSEAL run right after it.

    python benchmarks/bench_startup.py [--pairs 5] [--threads 2] [--json PATH]

The README's first code block (CKKS at N14_L7: two vectors of 1000 values, ``x * y + 0.5 * x - 2``, ``x @ y``,
``x.rotate(1)``, decrypted and printed) is run as written, each time in a new Python process, wall time from the
interpreter's start to its end (``python -c ...``). The first run fills the caches (a cold start, reported
separately; TenSEAL gets one untimed run too); then ``--pairs`` alternating runs of ours (a warm start: the
compilation caches in place, as on a user's second run) and of TenSEAL's same task (N 2^14, the same chain, Galois
keys, the same three results and the decryptions; ``pip install tenseal``). Both run with Python's bytecode cache
allowed (``PYTHONDONTWRITEBYTECODE`` removed from their environment), as an installed package has it. Ours also
reports its phases from ``-X importtime``-free timers: import, context (key generation), encrypt, compute, decrypt.
Without TenSEAL its columns are empty.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=5, help="alternating warm runs of ours and TenSEAL's")
    p.add_argument("--threads", type=int, default=2, help="CPUs the processes may use (the whole box by default)")
    p.add_argument("--no-peer", action="store_true")
    p.add_argument("--json", type=Path, default=None)
    return p.parse_args(argv)


def readme_example() -> str:
    """The README's first ```python block."""
    text = (ROOT / "README.md").read_text()
    m = re.search(r"```python\n(.*?)```", text, re.S)
    if m is None:
        raise SystemExit("README.md has no python block")
    return m.group(1)


PHASES = '''
import time as _t
_t0 = _t.perf_counter()
_marks = {}
def _mark(name):
    _marks[name] = _t.perf_counter() - _t0
'''

TENSEAL = '''
import time
t0 = time.perf_counter()
import numpy as np
import tenseal as ts
ctx = ts.context(ts.SCHEME_TYPE.CKKS, 16384, coeff_mod_bit_sizes=[60, 40, 40, 40, 40, 40, 40, 40, 60])
ctx.global_scale = 2**40
ctx.generate_galois_keys()
a, b = np.linspace(-1, 1, 1000), np.cos(np.arange(1000))
x, y = ts.ckks_vector(ctx, a), ts.ckks_vector(ctx, b)
z = x * y + x * 0.5 - 2
ip = x.dot(y)
zz, ipp = np.array(z.decrypt()), ip.decrypt()
assert np.allclose(zz, a * b + 0.5 * a - 2, atol=1e-3)
assert abs(ipp[0] - a @ b) < 1e-2
print(zz[:4], ipp[0])
'''


def _instrumented(code: str) -> str:
    """The README block with timers after the import, the context, the encryptions, the arithmetic and at the end."""
    lines = code.splitlines()
    out = [PHASES]
    for line in lines:
        out.append(line)
        if line.startswith("from crossfhe import") or line.startswith("import crossfhe"):
            out.append("_mark('import')")
        elif "Context.create" in line:
            out.append("_mark('keys')")
        elif "ctx.encrypt(" in line and "x, y" in line:
            out.append("_mark('encrypt')")
        elif line.startswith("z = "):
            out.append("_mark('compute')")
    out.append("_mark('total')")
    out.append("import json as _json, sys as _sys; _sys.stderr.write('PHASES ' + _json.dumps(_marks) + '\\n')")
    return "\n".join(out)


def _run(code: str, env: dict, threads: int) -> tuple[float, dict]:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(code)
        path = f.name
    cmd = [sys.executable, path]
    if threads and sys.platform.startswith("linux"):
        cmd = ["taskset", "-c", ",".join(str(c) for c in sorted(os.sched_getaffinity(0))[:threads])] + cmd
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - t0
    os.unlink(path)
    if res.returncode != 0:
        raise RuntimeError(f"the run failed:\n{res.stderr[-3000:]}")
    phases = {}
    for line in res.stderr.splitlines():
        if line.startswith("PHASES "):
            phases = json.loads(line[len("PHASES "):])
    return wall, phases


def _have_tenseal() -> bool:
    return subprocess.run([sys.executable, "-c", "import tenseal"], capture_output=True).returncode == 0


def main(argv=None) -> None:
    args = _parse(argv)
    sys.path.insert(0, str(ROOT))
    from crossfhe.cli.benchutil import load_average, write_json

    code = _instrumented(readme_example())
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its bytecode compiled
    peer = not args.no_peer and _have_tenseal()
    cold_dir = tempfile.mkdtemp(prefix="crossfhe-startup-")
    cold_env = dict(env, CROSSFHE_CACHE_DIR=cold_dir)
    cold_env.pop("CROSSFHE_JAX_CACHE", None)
    cold, cold_phases = _run(code, cold_env, args.threads)
    if peer:
        _run(TENSEAL, env, args.threads)
    warm_env = cold_env  # the cache the cold run filled
    ours, theirs, phases = [], [], []
    for _ in range(args.pairs):
        wall, ph = _run(code, warm_env, args.threads)
        ours.append(wall)
        phases.append(ph)
        if peer:
            theirs.append(_run(TENSEAL, env, args.threads)[0])
    med = statistics.median(ours)
    peer_med = statistics.median(theirs) if theirs else None

    def phase(name):
        return statistics.median(p.get(name, float("nan")) for p in phases)

    split = {k: phase(k) for k in ("import", "keys", "encrypt", "compute", "total")}
    import jax

    rec = {"suite": "startup", "name": "readme_first_example", "params": {"preset": "N14_L7", "values": 1000},
           "median_ms": med * 1e3, "min_ms": min(ours) * 1e3, "max_ms": max(ours) * 1e3, "reps": len(ours),
           "cold_ms": cold * 1e3, "cold_phases_s": cold_phases, "phases_s": split, "device": "cpu",
           "jax": jax.__version__, "threads": args.threads, "peer": "tenseal" if peer else None,
           "peer_median_ms": peer_med * 1e3 if peer_med else None,
           "peer_runs_ms": [t * 1e3 for t in theirs], "runs_ms": [t * 1e3 for t in ours],
           "ratio": med / peer_med if peer_med else None, "load": load_average(),
           "note": "wall time of a fresh process, warm caches; TenSEAL's same task right after each of ours"}
    print(f"{'':<22}{'median s':>10}{'min':>8}{'max':>8}")
    print(f"{'ours (warm)':<22}{med:>10.2f}{min(ours):>8.2f}{max(ours):>8.2f}")
    if theirs:
        print(f"{'TenSEAL':<22}{peer_med:>10.2f}{min(theirs):>8.2f}{max(theirs):>8.2f}")
        print(f"ratio ours / TenSEAL: {med / peer_med:.2f}")
    print(f"cold start: {cold:.2f} s; warm phases (s from start): "
          + ", ".join(f"{k} {v:.2f}" for k, v in split.items()))
    write_json([rec], args.json or HERE / "results" / "startup.json")


if __name__ == "__main__":
    main()
