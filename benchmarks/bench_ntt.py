"""NTT benchmark: crossfhe's jitted radix-2 kernel vs plain NumPy vs Zama's tfhe-ntt, in one run.

    python benchmarks/bench_ntt.py [--quick] [--json PATH] [--threads 1] [--no-peer]
    crossfhe bench ntt [same options]

Forward and inverse negacyclic NTT for N in {2^12, 2^14, 2^16} and limbs in {1, 8, 32} with 30-bit
primes; median of >= 10 timed calls after a warm-up (compile time reported apart). Reports ns per
butterfly ((N/2) log2 N butterflies per limb), the ratio to NumPy (the same radix-2 algorithm,
``ntt_reference``) and to tfhe-ntt (``benchmarks/ntt_peer``, built with cargo when cargo is present),
and a memory floor: the bytes a transform must move (read x and the two twiddle tables, write the
result), timed as one fused elementwise pass at the same working-set size in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PEER_DIR = HERE / "ntt_peer"


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="N 2^12, 2^14 and limbs 1, 8 only; fewer repetitions")
    p.add_argument("--json", type=Path, default=None, help="write the JSON records here")
    p.add_argument("--threads", type=int, default=1, help="CPUs to run on (1 matches the single-thread peer)")
    p.add_argument("--no-peer", action="store_true", help="skip tfhe-ntt")
    p.add_argument("--reps", type=int, default=None)
    return p.parse_args()


from crossfhe.cli.benchutil import pin_threads  # noqa: E402
from crossfhe.runtime import keep_heap  # noqa: E402

ARGS = _parse() if __name__ == "__main__" else None
if ARGS is not None:
    pin_threads(ARGS.threads)
    HEAP_KEPT = keep_heap(reexec=True)  # restarts once with the allocator settings: crossfhe.runtime

import jax  # noqa: E402
import numpy as np  # noqa: E402

from crossfhe.math.primes import ntt_primes  # noqa: E402
from crossfhe.ring import ntt as T  # noqa: E402


def _timeit(fn, *, reps: int, min_seconds: float = 0.0) -> list[float]:
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < reps or time.perf_counter() - start < min_seconds:
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return times


_STREAM = jax.jit(lambda x, w, ws: x + w + ws)


def _memory_floor_ms(x, w, ws) -> float:
    """The memory floor at this working set: one fused pass that reads x and both twiddle tables and
    writes N words (the traffic any transform needs), timed like the transform itself."""
    jax.block_until_ready(_STREAM(x, w, ws))
    return float(np.median(_timeit(lambda: _STREAM(x, w, ws), reps=20))) * 1e3


def build_peer() -> Path | None:
    """Build the tfhe-ntt harness with cargo; None (with a message) when cargo or the build is missing."""
    if shutil.which("cargo") is None:
        print("# tfhe-ntt: cargo not found, peer skipped", file=sys.stderr)
        return None
    r = subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=PEER_DIR, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"# tfhe-ntt: build failed, peer skipped:\n{r.stderr[-2000:]}", file=sys.stderr)
        return None
    exe = PEER_DIR / "target" / "release" / "ntt_peer"
    return exe if exe.exists() else None


def run_peer(exe: Path, log_n: int, primes, reps: int) -> dict | None:
    cmd = [str(exe), "--log-n", str(log_n), "--limbs", str(len(primes)), "--reps", str(reps),
           "--primes", ",".join(str(p) for p in primes)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"# tfhe-ntt failed: {' '.join(cmd)}\n{r.stderr[-1000:]}", file=sys.stderr)
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(args: argparse.Namespace) -> list[dict]:
    sizes = [12, 14] if args.quick else [12, 14, 16]
    limb_counts = [1, 8] if args.quick else [1, 8, 32]
    reps = args.reps or (10 if args.quick else 20)
    peer = None if args.no_peer else build_peer()
    base = {"suite": "ntt", "device": jax.devices()[0].platform, "backend": "VECTOR", "jax": jax.__version__,
            "threads": args.threads, "cpu": platform.processor() or platform.machine()}
    records = []
    for log_n in sizes:
        n = 1 << log_n
        for limbs in limb_counts:
            primes = ntt_primes(30, n, limbs)
            plan = T.NTTPlan.create(n, primes)
            rng = np.random.default_rng(log_n * 100 + limbs)
            x = (rng.integers(0, 2**32, (limbs, n), dtype=np.uint64) % plan.q.astype(np.uint64)).astype(np.uint32)
            xd = jax.device_put(x)
            t0 = time.perf_counter()
            y = jax.block_until_ready(T.ntt(xd, plan))  # the forward's first call: compile + run
            first_call = {"fwd": time.perf_counter() - t0}
            butterflies = limbs * (n // 2) * log_n
            floor_ms = _memory_floor_ms(xd, plan.w, plan.w_shoup)
            np_reps = max(3, min(reps, int(2e8 // (limbs * n * log_n)) or 3))
            np_fwd = float(np.median(_timeit(lambda x=x, plan=plan: T.ntt_reference(x, plan), reps=np_reps)))
            y_host = np.asarray(y)
            np_inv = float(
                np.median(_timeit(lambda y_host=y_host, plan=plan: T.intt_reference(y_host, plan), reps=np_reps))
            )
            pr = run_peer(peer, log_n, primes, reps) if peer else None
            for name, fn, np_s, peer_key in (
                ("ntt_forward", lambda xd=xd, plan=plan: T.ntt(xd, plan), np_fwd, "fwd"),
                ("ntt_inverse", lambda y=y, plan=plan: T.intt(y, plan), np_inv, "inv"),
            ):
                if peer_key not in first_call:
                    t0 = time.perf_counter()
                    jax.block_until_ready(fn())
                    first_call[peer_key] = time.perf_counter() - t0
                first = first_call[peer_key]
                ts = _timeit(fn, reps=reps)
                med = float(np.median(ts))
                rec = dict(base, name=name, params={"N": n, "limbs": limbs, "prime_bits": 30},
                           median_ms=med * 1e3, min_ms=min(ts) * 1e3, max_ms=max(ts) * 1e3, reps=len(ts),
                           first_call_ms=first * 1e3, ns_per_butterfly=med * 1e9 / butterflies,
                           numpy_median_ms=np_s * 1e3, numpy_ratio=med / np_s,
                           floor_ms=floor_ms, floor_fraction=floor_ms / (med * 1e3),
                           peer=None, peer_median_ms=None, ratio=None,
                           note="floor: one fused pass reading x, w, w_shoup and writing N words")
                if pr:
                    peer_ms = pr[f"{peer_key}_median_us"] / 1e3
                    rec.update(peer=pr["peer"], peer_median_ms=peer_ms, ratio=med * 1e3 / peer_ms,
                               peer_ns_per_butterfly=peer_ms * 1e6 / butterflies)
                records.append(rec)
    return records


def print_table(records: list[dict]) -> None:
    head = (f"{'op':<12}{'N':>7}{'limbs':>6}{'ms':>10}{'ns/bfly':>9}{'numpy ms':>10}{'x numpy':>8}"
            f"{'peer ms':>9}{'/peer':>7}{'floor%':>7}")
    print(head)
    print("-" * len(head))
    for r in records:
        p = r["params"]
        peer = f"{r['peer_median_ms']:>9.3f}{r['ratio']:>7.2f}" if r["peer"] else f"{'-':>9}{'-':>7}"
        print(f"{r['name'][4:]:<12}{p['N']:>7}{p['limbs']:>6}{r['median_ms']:>10.3f}{r['ns_per_butterfly']:>9.2f}"
              f"{r['numpy_median_ms']:>10.2f}{1 / r['numpy_ratio']:>8.1f}{peer}{100 * r['floor_fraction']:>7.1f}")
    peers = {r["peer"] for r in records if r["peer"]}
    print(f"jax {records[0]['jax']}, {records[0]['device']}, threads {records[0]['threads']}; "
          f"peer: {', '.join(peers) or 'none'}; 'x numpy' = NumPy time / ours; '/peer' = ours / peer")


if __name__ == "__main__":
    cache = os.environ.get("CROSSFHE_JAX_CACHE", str(Path.home() / ".cache" / "crossfhe" / "jax"))
    jax.config.update("jax_compilation_cache_dir", cache)
    recs = main(ARGS)
    print_table(recs)
    out = ARGS.json or HERE / "results" / "ntt.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(recs, indent=1))
    print(f"JSON: {out}")
