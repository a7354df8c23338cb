"""OpenFHE CKKS peer: the same operations as ``bench_ckks.py`` in OpenFHE, run in a separate interpreter.

OpenFHE's Python wheels (``openfhe`` on PyPI) are built for CPython 3.10 only (Ubuntu 22.04 builds), so the
peer runs in its own virtual environment, by default ``.venv-openfhe`` at the repository root
(``make openfhe-peer`` creates it from a ``python3.10`` on the PATH), or the interpreter named by
``--openfhe-python`` / ``CROSSFHE_OPENFHE_PYTHON``:

    from openfhe_peer import find_python, run
    rec = run(find_python(), log_n=16, levels=21, log_scale=56, dnum=3, threads=2)

This file is both the driver (imported by ``bench_ckks.py``; standard library only) and the worker (run as
``python openfhe_peer.py --log-n 16 ...`` by that interpreter; it imports ``openfhe``). The worker builds an
RNS-CKKS context with the chain [60] + [log_scale] * levels (``FIXEDMANUAL`` rescaling, like the SEAL peer
and ours), hybrid key switching with ``dnum`` digits (OpenFHE picks its special primes), a ternary secret,
and prints one JSON object: key generation seconds, and per operation the median, min and max ms of
``reps`` calls or more. OpenMP threads: ``threads`` (``OMP_NUM_THREADS``), on as many CPUs (the last ones,
as ``crossfhe.cli.benchutil.pin_threads`` chooses).

Operations (OpenFHE's API): encrypt_pk = ``Encrypt(pk, pt)``; he_add = ``EvalAdd``; pmult = ``EvalMult(ct,
pt)``; he_mult_relin = ``EvalMult(ct, ct)`` (the tensor product and its relinearization); rescale =
``Rescale``; rotate = ``EvalRotate(ct, 1)``. No bare key switch is timed (OpenFHE's needs a key made by
``KeySwitchGen``, which the Python API does not expose for a chosen digit count).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_VENV = ROOT / ".venv-openfhe"
OPS = ("encrypt_pk", "he_add", "pmult", "he_mult_relin", "rescale", "rotate")


def _say(msg: str) -> None:
    print(f"# openfhe: {msg}", file=sys.stderr)


# --------------------------------------------------------------------------------------------------
# Driver (standard library only)
# --------------------------------------------------------------------------------------------------


def find_python(explicit: str | None = None) -> str | None:
    """The interpreter that has ``openfhe``: ``explicit``, else ``CROSSFHE_OPENFHE_PYTHON``, else
    ``.venv-openfhe/bin/python``; None (with a message) when there is none."""
    cand = explicit or os.environ.get("CROSSFHE_OPENFHE_PYTHON")
    if cand:
        found = shutil.which(cand) or (cand if Path(cand).exists() else None)
        if found is None:
            _say(f"interpreter {cand!r} not found, peer skipped")
        return found
    venv_python = DEFAULT_VENV / "bin" / "python"
    if venv_python.exists():
        return str(venv_python)
    _say("no .venv-openfhe (make openfhe-peer; needs python3.10) and no --openfhe-python: peer skipped")
    return None


def run(python: str, *, log_n: int, levels: int, log_scale: int, dnum: int, threads: int, reps: int = 10,
        min_seconds: float = 0.5, max_seconds: float = 4.0, timeout_s: float = 1800) -> dict | None:
    """One worker run; its JSON record, or None (with a message on stderr) if it fails."""
    cmd = [python, str(Path(__file__).resolve()), "--log-n", str(log_n), "--levels", str(levels),
           "--log-scale", str(log_scale), "--dnum", str(dnum), "--threads", str(threads), "--reps", str(reps),
           "--min-seconds", str(min_seconds), "--max-seconds", str(max_seconds)]
    return run_worker(cmd, threads, timeout_s)[0]


def run_worker(cmd: list[str], threads: int, timeout_s: float, what: str = "peer") -> tuple[dict | None, str]:
    """Run a worker command with ``threads`` OpenMP threads; (its last stdout line as JSON, its stderr), or (None,
    stderr) with a message on stderr if it fails, times out or prints no record."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as e:
        _say(f"worker did not finish ({e}), {what} skipped")
        return None, ""
    if r.returncode != 0:
        _say(f"worker failed (exit {r.returncode}), {what} skipped:\n{r.stderr[-2000:]}")
        return None, r.stderr
    try:
        return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr
    except (ValueError, IndexError):
        _say(f"worker printed no JSON record, {what} skipped:\n{r.stdout[-500:]}")
        return None, r.stderr


# --------------------------------------------------------------------------------------------------
# Worker (run by the interpreter that has openfhe)
# --------------------------------------------------------------------------------------------------


def _timeit(fn, *, reps: int, min_seconds: float, max_seconds: float) -> list[float]:
    """As ``crossfhe.cli.benchutil.timeit``: at least ``reps`` calls and ``min_seconds``, or at least 3
    calls once ``max_seconds`` have passed."""
    times: list[float] = []
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        elapsed = time.perf_counter() - start
        if (len(times) >= reps and elapsed >= min_seconds) or (len(times) >= 3 and elapsed >= max_seconds):
            return times


def worker(args: argparse.Namespace) -> dict:
    import importlib.metadata
    import random

    import openfhe as of

    # The driver may be pinned to fewer CPUs than the peer's threads: choose from all of the machine's.
    if hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, set(range(os.cpu_count() or 1)[-args.threads:]))
        except OSError:
            pass  # a cpuset narrower than the machine: keep the inherited CPUs
    pp = of.CCParamsCKKSRNS()
    pp.SetRingDim(1 << args.log_n)
    pp.SetMultiplicativeDepth(args.levels)
    pp.SetScalingModSize(args.log_scale)
    pp.SetFirstModSize(60)
    pp.SetScalingTechnique(of.FIXEDMANUAL)
    pp.SetKeySwitchTechnique(of.HYBRID)
    pp.SetNumLargeDigits(args.dnum)
    pp.SetSecretKeyDist(of.UNIFORM_TERNARY)
    pp.SetBatchSize(1 << (args.log_n - 1))
    # The chain is checked against the HE standard by the caller (as for the SEAL peer); OpenFHE's own
    # table would also refuse N 2^16 sets whose log PQ it computes with its larger special primes.
    pp.SetSecurityLevel(of.HEStd_NotSet)
    t0 = time.perf_counter()
    cc = of.GenCryptoContext(pp)
    for feature in (of.PKESchemeFeature.PKE, of.PKESchemeFeature.KEYSWITCH, of.PKESchemeFeature.LEVELEDSHE):
        cc.Enable(feature)
    context_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    kp = cc.KeyGen()
    cc.EvalMultKeyGen(kp.secretKey)
    cc.EvalRotateKeyGen(kp.secretKey, [1])
    keygen_s = time.perf_counter() - t0
    rng = random.Random(args.log_n + args.levels)
    slots = 1 << (args.log_n - 1)
    x = [rng.uniform(-1, 1) for _ in range(slots)]
    y = [rng.uniform(-1, 1) for _ in range(slots)]
    pt, pty = cc.MakeCKKSPackedPlaintext(x), cc.MakeCKKSPackedPlaintext(y)
    ct, cty = cc.Encrypt(kp.publicKey, pt), cc.Encrypt(kp.publicKey, pty)
    prod = cc.EvalMult(ct, cty)
    # A check that the context computes what it should: the product decrypts to x * y (a wrong context
    # is off by about 1; a 26-bit scale leaves about 2^-8).
    back = cc.Decrypt(kp.secretKey, cc.Rescale(prod))
    back.SetLength(slots)
    got = back.GetRealPackedValue()
    err = max(abs(g - a * b) for g, a, b in zip(got, x, y))
    if not err < 0.05:
        raise SystemExit(f"OpenFHE product off by {err}")
    fns = {
        "encrypt_pk": lambda: cc.Encrypt(kp.publicKey, pt),
        "he_add": lambda: cc.EvalAdd(ct, cty),
        "pmult": lambda: cc.EvalMult(ct, pty),
        "he_mult_relin": lambda: cc.EvalMult(ct, cty),
        "rescale": lambda: cc.Rescale(prod),
        "rotate": lambda: cc.EvalRotate(ct, 1),
    }
    timing = {"reps": args.reps, "min_seconds": args.min_seconds, "max_seconds": args.max_seconds}
    ops = {}
    for name in OPS:
        fns[name]()  # warm-up
        ts = _timeit(fns[name], **timing)
        ops[name] = {"median_ms": statistics.median(ts) * 1e3, "min_ms": min(ts) * 1e3, "max_ms": max(ts) * 1e3,
                     "reps": len(ts)}
    return {"peer": f"openfhe {importlib.metadata.version('openfhe')}", "threads": args.threads,
            "params": {"N": cc.GetRingDimension(), "levels": args.levels, "log_scale": args.log_scale,
                       "first_mod_bits": 60, "dnum": args.dnum, "scaling": "FIXEDMANUAL", "key_switching": "HYBRID",
                       "log2_err_mul_rescale": round(math.log2(max(err, 2.0**-60)), 2)},
            "context_s": context_s, "keygen_s": keygen_s, "ops": ops}


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--log-n", type=int, required=True)
    p.add_argument("--levels", type=int, required=True)
    p.add_argument("--log-scale", type=int, required=True)
    p.add_argument("--dnum", type=int, required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--min-seconds", type=float, default=0.5)
    p.add_argument("--max-seconds", type=float, default=4.0)
    return p.parse_args()


if __name__ == "__main__":
    print(json.dumps(worker(_parse())))
