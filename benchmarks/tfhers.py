"""TFHE-rs peer: build and run the Rust harness in ``benchmarks/tfhers_peer`` (two executables).

    from tfhers import build, run, run_integers
    recs = run(["1_1", "2_2", "3_3"], reps=5, threads=1)   # builds on first use
    recs = run_integers([8, 16], ["add", "mul"], reps=5, threads=1)

``run``: shortint programmable bootstrapping (``tfhers_peer``). Each record is one TFHE-rs shortint parameter set
(KS-PBS, p-fail 2^-64 by default): key generation times, server-key size, and the median/min/max latency of one
``apply_lookup_table`` (key switch + PBS of one ciphertext), with ``correct`` telling whether every output
decrypted to f(m).

``run_integers``: the high-level encrypted integers (``integers``): ``FheUint8/16/32/64`` under
``ConfigBuilder::default()``, one record per (operator, width): the median and all samples of ``reps`` calls
after a warm-up, the PBS count of one call (tfhe's ``pbs-stats`` counter) and ``correct``; run pinned to
``threads`` CPUs with a rayon pool of that size. See ``tfhers_peer/README.md``.

Run as a script it prints the records as JSON: ``python benchmarks/tfhers.py --params 2_2 --reps 5``, or
``python benchmarks/tfhers.py --integers --widths 8,16 --reps 2 --threads 1``.
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
INTEGERS_EXE = PEER_DIR / "target" / "release" / "integers"
INTEGER_OPS = ("add", "mul", "lt", "eq", "min", "and", "shl3", "select")
INTEGER_WIDTHS = (8, 16, 32, 64)
# Same code generation as ntt_peer (whose .cargo/config.toml sets it); an explicit RUSTFLAGS wins.
RUSTFLAGS = "-C target-cpu=native"
MIN_REPS = 3


def _say(msg: str) -> None:
    print(f"# tfhe-rs: {msg}", file=sys.stderr)


def build(quiet: bool = True, exe: Path = EXE) -> Path | None:
    """Build the harness (``cargo build --release``: both executables); ``exe`` (default the shortint one,
    ``INTEGERS_EXE`` for the integers), or None with a message on stderr.

    The first build fetches tfhe from the Rust package registry and takes several minutes on 2 cores (fat LTO of
    each executable); later calls are no-ops unless the sources or RUSTFLAGS changed."""
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
    if not exe.exists():
        _say(f"build succeeded but {exe} is missing, peer skipped")
        return None
    return exe


def pinned_cpus(threads: int) -> list[int]:
    """The CPUs a run on ``threads`` threads is pinned to: the last ``threads`` of those this process may use
    (the choice of ``crossfhe.cli.benchutil.pin_threads``, so both sides of a comparison share them)."""
    if not hasattr(os, "sched_getaffinity"):
        return []
    return sorted(os.sched_getaffinity(0))[-max(1, int(threads)):]


def _read_doc(cmd: list[str], env: dict, timeout_s: float, cpus: list[int] | None = None) -> dict | None:
    """Run one harness command (pinned to ``cpus`` if given); its last stdout line as JSON, or None with a
    message on stderr."""
    pin = (lambda: os.sched_setaffinity(0, set(cpus))) if cpus and hasattr(os, "sched_setaffinity") else None
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s, preexec_fn=pin)
    except subprocess.TimeoutExpired:
        _say(f"timed out after {timeout_s:g} s: {' '.join(cmd)}")
        return None
    except (OSError, subprocess.SubprocessError) as e:
        _say(f"could not start {cmd[0]} ({e})")
        return None
    if r.returncode != 0:
        _say(f"failed (exit {r.returncode}): {' '.join(cmd)}\n{r.stderr[-1000:]}")
        return None
    lines = r.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError) as e:
        _say(f"unreadable output ({e}): {r.stdout[-500:]!r}")
        return None


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
    doc = _read_doc(cmd, env, timeout_s)
    if doc is None:
        return []
    recs = doc.get("records", [])
    for rec in recs:
        rec.setdefault("peer", doc.get("peer"))
        rec.setdefault("pfail", doc.get("pfail"))
        rec.setdefault("noise", doc.get("noise"))
        rec.setdefault("threads", doc.get("rayon_threads"))
    return recs


KEY_FIELDS = ("peer", "api", "param_name", "atomic_pattern", "message_modulus", "carry_modulus", "log2_p_fail",
              "lwe_dimension", "glwe_dimension", "polynomial_size", "pbs_base_log", "pbs_level", "ks_base_log",
              "ks_level", "lwe_noise", "glwe_noise", "modulus_switch", "bsk_bytes_from_params", "ksk_bytes_from_params",
              "client_keygen_ms", "server_keygen_ms", "server_key_bytes", "server_key_bytes_method", "seed",
              "pbs_stats")
"""What each ``run_integers`` record carries, under ``keys``, of its run (parameters, key generation, key size)."""


def run_integers(widths: list[int], ops: list[str], reps: int, threads: int = 1, timeout_s: float = 3600.0, *,
                 cpus: list[int] | None = None, seed: int = 48, exe: Path | None = None) -> list[dict]:
    """Run the integers harness: one dict per (operator, width), width outer and operator inner.

    ``widths`` from 8, 16, 32, 64; ``ops`` from ``INTEGER_OPS``; ``reps`` timed calls after one warm-up.
    The harness runs pinned to ``cpus`` (default :func:`pinned_cpus` of ``threads``) with a rayon pool of
    ``threads`` threads (its ``--threads``, and RAYON_NUM_THREADS). Builds the harness when ``exe`` is None.
    Any failure (no cargo, build error, crash, timeout, unreadable output) gives [] with a message on stderr.

    A record: ``op``, ``bits``, the clear operands ``a`` and ``b``, ``ms`` (median), ``ms_all``, ``warmup_ms``,
    ``pbs`` (PBS of the warm-up call, tfhe's counter; None without the counter), ``pbs_all`` (each timed call's),
    ``correct`` (every output decrypted to the clear result); plus ``threads`` (rayon's pool size), ``cpus``,
    and ``keys``: the run's :data:`KEY_FIELDS` (the same dict in every record of a run)."""
    if not widths or not ops:
        return []
    bad = set(ops) - set(INTEGER_OPS) or set(map(int, widths)) - set(INTEGER_WIDTHS)
    if bad:
        _say(f"unknown operators or widths {sorted(map(str, bad))}, peer skipped")
        return []
    exe = exe or build(exe=INTEGERS_EXE)
    if exe is None:
        return []
    cpus = pinned_cpus(threads) if cpus is None else list(cpus)
    n = max(1, int(threads))
    cmd = [str(exe), "--widths", ",".join(map(str, widths)), "--ops", ",".join(ops), "--reps",
           str(max(1, int(reps))), "--threads", str(n), "--seed", str(int(seed))]
    env = dict(os.environ)
    env["RAYON_NUM_THREADS"] = str(n)
    doc = _read_doc(cmd, env, timeout_s, cpus)
    if doc is None:
        return []
    keys = {k: doc.get(k) for k in KEY_FIELDS}
    if not doc.get("pbs_stats"):
        keys["pbs_stats"] = False
    recs = doc.get("records", [])
    for rec in recs:
        if not keys["pbs_stats"]:
            rec["pbs"] = rec["pbs_all"] = None
        rec.update(threads=doc.get("rayon_threads"), cpus=cpus, keys=keys)
    return recs


def _main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--params", default="1_1,2_2,3_3")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--pfail", default="2m64", choices=["2m64", "2m128"])
    p.add_argument("--noise", default="tuniform", choices=["tuniform", "gaussian"])
    p.add_argument("--integers", action="store_true", help="run the integers harness (--widths, --ops) instead")
    p.add_argument("--widths", default=",".join(map(str, INTEGER_WIDTHS)))
    p.add_argument("--ops", default=",".join(INTEGER_OPS))
    a = p.parse_args()
    if a.integers:
        recs = run_integers([int(w) for w in a.widths.split(",") if w], [o for o in a.ops.split(",") if o], a.reps,
                            a.threads)
    else:
        recs = run([s for s in a.params.split(",") if s], a.reps, a.threads, pfail=a.pfail, noise=a.noise)
    print(json.dumps(recs, indent=1))
    return 0 if recs and all(r.get("correct") for r in recs) else 1


if __name__ == "__main__":
    sys.exit(_main())
