"""TFHE-rs programmable-bootstrapping peer: build and run the Rust harness in ``benchmarks/tfhers_peer``.

    from tfhers import build, run
    recs = run(["1_1", "2_2", "3_3"], reps=5, threads=1)   # builds on first use

Each record is one TFHE-rs shortint parameter set (KS-PBS, p-fail 2^-64 by default): key generation times,
server-key size, and the median/min/max latency of one ``apply_lookup_table`` (key switch + PBS of one
ciphertext), with ``correct`` telling whether every output decrypted to f(m). See ``tfhers_peer/README.md``.
Run as a script (``python benchmarks/tfhers.py --params 2_2 --reps 5``) it prints the records as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

PEER_DIR = Path(__file__).resolve().parent / "tfhers_peer"
EXE = PEER_DIR / "target" / "release" / "tfhers_peer"
# Same code generation as ntt_peer (whose .cargo/config.toml sets it); an explicit RUSTFLAGS wins.
RUSTFLAGS = "-C target-cpu=native"
MIN_REPS = 3


def _say(msg: str) -> None:
    print(f"# tfhe-rs: {msg}", file=sys.stderr)


def build(quiet: bool = True) -> Path | None:
    """Build the harness (``cargo build --release``); the executable, or None with a message on stderr.

    The first build fetches tfhe from crates.io and takes about 4 minutes on 2 cores; later calls are
    no-ops unless the sources or RUSTFLAGS changed."""
    if shutil.which("cargo") is None:
        _say("cargo not found, peer skipped")
        return None
    env = dict(os.environ)
    env.setdefault("RUSTFLAGS", RUSTFLAGS)
    cmd = ["cargo", "build", "--release"] + (["--quiet"] if quiet else [])
    try:
        # Not quiet: cargo's progress goes to our stderr; stdout stays clean either way.
        r = subprocess.run(cmd, cwd=PEER_DIR, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE if quiet else None, text=True)
    except OSError as e:
        _say(f"cargo could not be started ({e}), peer skipped")
        return None
    if r.returncode != 0:
        tail = (r.stderr or "")[-2000:] if quiet else "(see cargo output above)"
        _say(f"build failed, peer skipped:\n{tail}")
        return None
    if not EXE.exists():
        _say(f"build succeeded but {EXE} is missing, peer skipped")
        return None
    return EXE


def run(params: list[str], reps: int, threads: int = 1, timeout_s: float = 1800.0, *,
        pfail: str = "2m64", noise: str = "tuniform", exe: Path | None = None) -> list[dict]:
    """Run the harness on ``params`` (e.g. ``["1_1", "2_2", "3_3"]``); one dict per parameter set.

    ``reps`` timed lookups after one warm-up (at least 3; the harness stops early after a call over 1 s).
    ``threads`` becomes RAYON_NUM_THREADS (key generation is parallel; one lookup is single-threaded).
    ``pfail`` "2m64" (default, like our presets) or "2m128"; ``noise`` "tuniform" or "gaussian".
    Builds the harness when ``exe`` is None. Any failure (no cargo, build error, crash, timeout,
    unreadable output) gives [] with a message on stderr. Each record also carries ``peer``
    ("tfhe-rs <version>"), ``pfail``, ``noise`` and ``threads``."""
    if not params:
        return []
    exe = exe or build()
    if exe is None:
        return []
    cmd = [str(exe), "--params", ",".join(params), "--reps", str(max(MIN_REPS, int(reps))),
           "--pfail", pfail, "--noise", noise]
    env = dict(os.environ)
    env["RAYON_NUM_THREADS"] = str(max(1, int(threads)))
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _say(f"timed out after {timeout_s:g} s: {' '.join(cmd)}")
        return []
    except OSError as e:
        _say(f"could not start {exe} ({e})")
        return []
    if r.returncode != 0:
        _say(f"failed (exit {r.returncode}): {' '.join(cmd)}\n{r.stderr[-1000:]}")
        return []
    lines = r.stdout.strip().splitlines()
    try:
        doc = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError) as e:
        _say(f"unreadable output ({e}): {r.stdout[-500:]!r}")
        return []
    recs = doc.get("records", [])
    for rec in recs:
        rec.setdefault("peer", doc.get("peer"))
        rec.setdefault("pfail", doc.get("pfail"))
        rec.setdefault("noise", doc.get("noise"))
        rec.setdefault("threads", doc.get("rayon_threads"))
    return recs


def _main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--params", default="1_1,2_2,3_3")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--pfail", default="2m64", choices=["2m64", "2m128"])
    p.add_argument("--noise", default="tuniform", choices=["tuniform", "gaussian"])
    a = p.parse_args()
    recs = run([s for s in a.params.split(",") if s], a.reps, a.threads, pfail=a.pfail, noise=a.noise)
    print(json.dumps(recs, indent=1))
    return 0 if recs and all(r.get("correct") for r in recs) else 1


if __name__ == "__main__":
    sys.exit(_main())
