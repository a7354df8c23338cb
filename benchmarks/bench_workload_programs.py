"""Workloads as one compiled program against the same operations as separate programs, on this machine.

    python benchmarks/bench_workload_programs.py [--workloads hmvp,bootstrap_tiny] [--calls 3] [--quick] [--json PATH]

Each (workload, form) runs in a fresh Python process with an empty compilation cache, pinned to one CPU: the first
call (tracing and compiling included), then ``--calls`` more calls (each waited on), and the process's peak RSS.
Forms: ``operations`` (the default entry points: ``hmvp.hmvp``, ``bootstrap.bootstrap``) and ``program``
(``hmvp.hmvp_program``, ``bootstrap.bootstrap_program``), which give the same words. Workloads:

- ``hmvp``: the README's BFV example, a 300 x 1000 matrix at ``CHAM_N4096``;
- ``bootstrap_tiny``: the smallest bootstrap of the tests (N 2^10, 4 slots, EvalMod of degree 3);
- ``bootstrap_n11``: ``INSECURE_CKKS_BOOT_N11`` at full slots (its program takes about 2 GB and half a minute to
  compile on a 2-core EPYC; not in the default list).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

CHILD = r'''
import json, resource, sys, time
import jax, numpy as np
workload, form, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
if workload == "hmvp":
    from crossfhe.bfv import ops, presets
    from crossfhe.linalg import hmvp as H
    p = presets.CHAM_N4096
    sk, keys = ops.keygen(p, galois_elements=H.required_galois_elements(p), relin=False, seed=bytes(32))
    rng = np.random.default_rng(0)
    a, v = rng.integers(0, p.t, size=(300, 1000)), rng.integers(0, p.t, size=1000)
    mat, vec = H.encode_matrix(p, a), H.encrypt_vector(keys, p, v)
    fn = H.hmvp_program if form == "program" else H.hmvp
    call = lambda: fn(mat, vec, keys)
    words = lambda r: [(c.c0.data, c.c1.data) for c in r.ciphertexts]
    check = lambda r: bool((H.decrypt_result(sk, r) == a @ v % p.t).all())
else:
    from crossfhe.ckks import bootstrap as bt, ops as C
    if workload == "bootstrap_tiny":
        p = bt.bootstrappable_params(log_n=10, levels_left=1, dnum=2, cts_levels=1, stc_levels=1, degree=3,
                                     double_angle=1, insecure=True)
        sk, ek = C.keygen(p, seed=bytes(range(32)))
        bk = bt.keygen(sk, ek, bt.config_for(p, 4, degree=3, double_angle=1), seed=bytes(range(1, 33)))
        x = np.random.default_rng(1).uniform(-0.5, 0.5, 4)
    else:
        from crossfhe.testing import INSECURE_CKKS_BOOT_N11 as p
        sk, ek = C.keygen(p, seed=bytes(range(32)))
        bk = bt.keygen(sk, ek, seed=bytes(range(1, 33)))
        x = np.random.default_rng(1).uniform(-1, 1, p.slots)
    ct = C.drop_level(C.encrypt(ek, C.encode(p, x)), 0)
    fn = bt.bootstrap_program if form == "program" else bt.bootstrap
    call = lambda: fn(ct, bk)
    words = lambda r: (r.c0.data, r.c1.data)
    check = lambda r: r.level == p.user_levels
t0 = time.perf_counter()
out = call()
jax.block_until_ready(words(out))
first = time.perf_counter() - t0
later = []
for _ in range(calls):
    t0 = time.perf_counter()
    jax.block_until_ready(words(call()))
    later.append(time.perf_counter() - t0)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print("RESULT " + json.dumps({"first_s": first, "later_s": later, "peak_rss_mb": rss, "ok": check(out)}))
'''


def _parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", default="hmvp,bootstrap_tiny",
                   help="comma-separated: hmvp, bootstrap_tiny, bootstrap_n11")
    p.add_argument("--calls", type=int, default=3, help="calls after the first")
    p.add_argument("--cpu", type=int, default=None, help="the CPU to pin to (default: the last one allowed)")
    p.add_argument("--quick", action="store_true", help="hmvp only, one call after the first")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    if args.quick:
        args.workloads, args.calls = "hmvp", 1
    return args


def _run(workload: str, form: str, calls: int, cpu: int) -> dict:
    env = dict(os.environ, CROSSFHE_JAX_CACHE=tempfile.mkdtemp(prefix="crossfhe-wp-"),
               CROSSFHE_CACHE_DIR=tempfile.mkdtemp(prefix="crossfhe-wp-"),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-c", CHILD, workload, form, str(calls)]
    if sys.platform.startswith("linux"):
        cmd = ["taskset", "-c", str(cpu)] + cmd
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")]
    if res.returncode != 0 or not lines:
        raise RuntimeError(f"{workload} {form} failed:\n{res.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def main(argv=None) -> None:
    args = _parse(argv)
    sys.path.insert(0, str(ROOT))
    import jax

    from crossfhe.cli.benchutil import load_average, write_json

    cpu = args.cpu if args.cpu is not None else sorted(os.sched_getaffinity(0))[-1]
    records = []
    print(f"{'workload':<16}{'form':<12}{'first s':>9}{'median s':>10}{'min':>8}{'max':>8}{'RSS MB':>8}")
    for workload in args.workloads.split(","):
        for form in ("operations", "program"):
            r = _run(workload, form, args.calls, cpu)
            med = statistics.median(r["later_s"])
            records.append({"suite": "workload_programs", "name": workload, "form": form,
                            "first_call_ms": r["first_s"] * 1e3, "median_ms": med * 1e3,
                            "min_ms": min(r["later_s"]) * 1e3, "max_ms": max(r["later_s"]) * 1e3,
                            "reps": len(r["later_s"]), "peak_rss_mb": r["peak_rss_mb"], "checked": r["ok"],
                            "device": "cpu", "jax": jax.__version__, "threads": 1, "load": load_average(),
                            "note": "fresh process, empty compilation cache; first call includes compiling"})
            print(f"{workload:<16}{form:<12}{r['first_s']:>9.1f}{med:>10.3f}{min(r['later_s']):>8.3f}"
                  f"{max(r['later_s']):>8.3f}{r['peak_rss_mb']:>8.0f}", flush=True)
    write_json(records, args.json or HERE / "results" / "workload_programs.json")


if __name__ == "__main__":
    main()
