"""OpenFHE CKKS bootstrapping peer: time, precision and memory of ``EvalBootstrap``, run in a separate interpreter.

As for ``openfhe_peer.py`` (whose ``find_python`` this file re-exports), OpenFHE's Python wheels are built for
CPython 3.10 only, so the worker runs in ``.venv-openfhe`` (``make openfhe-peer``) or the interpreter named by
``CROSSFHE_OPENFHE_PYTHON``:

    from openfhe_boot_peer import find_python, run_bootstrap
    rec = run_bootstrap(find_python(), log_n=16, slots=1 << 15, levels_left=4, level_budget=(4, 3), threads=1,
                        dnum=13)

or, end to end from a shell (the driver; any Python 3.10+, standard library only):

    python benchmarks/openfhe_boot_peer.py --driver --log-n 12 --slots 8 --levels-left 2 --security none

This file is both the driver (``run_bootstrap``; standard library only) and the worker (run as
``python openfhe_boot_peer.py --log-n 16 ...`` by that interpreter; it imports ``openfhe`` and numpy). The worker
follows OpenFHE's own bootstrapping examples (``simple-ckks-bootstrapping``, ``advanced-ckks-bootstrapping``) for
64-bit native integers, the wheels' build:

- ring dimension 2^log_n, security ``HEStd_128_classic`` (OpenFHE refuses a ring dimension too small for the
  chain's log PQ; ``security="none"`` gives ``HEStd_NotSet``, as the examples use for N 2^12), the default
  ``UNIFORM_TERNARY`` secret;
- ``FLEXIBLEAUTO`` scaling, scaling mod size 59, first mod size 60 (the examples' choice for NATIVEINT 64;
  ``FIXEDAUTO`` with 78/89 is their choice for NATIVEINT 128 only), ``HYBRID`` key switching with OpenFHE's
  default digit count unless ``dnum`` is given;
- multiplicative depth = levels_left + ``GetBootstrapDepth(level_budget, UNIFORM_TERNARY)``;
- ``EvalBootstrapSetup(level_budget, [0, 0], slots)``, ``KeyGen``, ``EvalMultKeyGen``,
  ``EvalBootstrapKeyGen(sk, slots)``;
- the input: ``slots`` values uniform in [-1, 1] (numpy, fixed seed) encoded with ``MakeCKKSPackedPlaintext(x, 1,
  depth - 1, None, slots)`` and encrypted under the public key: the level the examples bootstrap from (one level
  left; with FLEXIBLEAUTO two RNS moduli).

It prints one JSON object (see ``worker``): the parameters (with log Q and log PQ), the seconds of context
generation and of each key generation step, the median/min/max ms of ``reps`` ``EvalBootstrap`` calls on that
input after ``warmup`` untimed ones (default 1: ours times its first, compiling call apart), the precision in bits
after one bootstrap and over ``repeats`` repeated bootstraps, the levels left after
bootstrapping, and the process's peak RSS. OpenMP threads: ``threads`` (``OMP_NUM_THREADS``); the worker keeps
the CPUs it inherits (so ``taskset -c 0 python ... --threads 1`` stays on CPU 0) unless they are fewer than
``threads``, then it takes the machine's last ``threads`` CPUs as ``openfhe_peer.py`` does.

Sizes (OpenFHE 1.6.1 wheel, measured): the uniform-ternary bootstrap takes depth 21 at level budget (4, 3), so at
N 2^16 HEStd_128_classic admits levels_left <= 4 (depth 25, log PQ 1656, only with dnum 13: two special primes;
at the default dnum 3 not even depth 21 fits). levels_left 9 at (4, 3) is depth 30, log Q 1831, log PQ 2491:
OpenFHE asks for N 2^17 and the worker fails unless ``security="none"``. That run (one thread) held 15.3 GB peak
RSS (about 14.4 GB of keys) and took 70 s of key generation and 33 s per bootstrap. With fewer slots than a
level budget entry can use (log2(slots) < budget), OpenFHE lowers the budget (its warning is kept in the record)
and more levels than requested are left.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # openfhe_peer.py, also when this file is loaded by path
from openfhe_peer import find_python, run_worker  # noqa: E402

__all__ = ["find_python", "run_bootstrap"]

SCALING_MOD_SIZE = 59
FIRST_MOD_SIZE = 60
AUX_MOD_SIZE = 60  # OpenFHE's AUXMODSIZE (special primes of HYBRID key switching) for NATIVEINT 64


def _say(msg: str) -> None:
    print(f"# openfhe-boot: {msg}", file=sys.stderr)


# --------------------------------------------------------------------------------------------------
# Driver (standard library only)
# --------------------------------------------------------------------------------------------------


def run_bootstrap(python: str | None, *, log_n: int, slots: int, levels_left: int,
                  level_budget: tuple[int, int] = (4, 3), threads: int, reps: int = 3, repeats: int = 10,
                  timeout_s: float = 3600, security: str = "HEStd_128_classic", dnum: int = 0,
                  scaling: str = "FLEXIBLEAUTO", iterations: int = 1) -> dict | None:
    """One worker run; its JSON record, or None (with a message on stderr) if the interpreter is missing or the
    worker fails (an OpenFHE exception, e.g. a ring dimension too small for ``security``, ends up there).

    ``security``: ``"HEStd_128_classic"`` (default) or ``"none"`` (``HEStd_NotSet``, for small test rings);
    ``dnum``: HYBRID digits, 0 for OpenFHE's default; ``scaling``: ``"FLEXIBLEAUTO"`` or ``"FIXEDAUTO"``;
    ``iterations``: 2 times OpenFHE's iterative bootstrap (Meta-BTS, ``EvalBootstrap(ct, 2, precision)``) instead,
    as its ``iterative-ckks-bootstrapping`` example does: one level more in the chain, the one-iteration precision
    measured first (``one_iteration_bits``) and passed in, floored."""
    if not python:
        _say("no interpreter with openfhe (make openfhe-peer), bootstrapping peer skipped")
        return None
    cmd = [python, str(Path(__file__).resolve()), "--log-n", str(log_n), "--slots", str(slots),
           "--levels-left", str(levels_left), "--level-budget", str(level_budget[0]), str(level_budget[1]),
           "--threads", str(threads), "--reps", str(reps), "--repeats", str(repeats), "--security", security,
           "--dnum", str(dnum), "--scaling", scaling, "--iterations", str(iterations)]
    rec, stderr = run_worker(cmd, threads, timeout_s, "bootstrapping peer")
    if rec is None:
        return None
    # OpenFHE's own notices (e.g. "level budget for encoding too large. Setting it to 3" when log2(slots) is
    # below a budget entry, which leaves more levels than requested), printed by the library to the worker's stderr
    rec["openfhe_warnings"] = sorted({ln.strip() for ln in stderr.splitlines() if "Warning" in ln})
    return rec


# --------------------------------------------------------------------------------------------------
# Worker (run by the interpreter that has openfhe)
# --------------------------------------------------------------------------------------------------


def _is_prime(n: int) -> bool:
    """Deterministic Miller-Rabin for n < 3.3e24 (the bases cover every 64-bit n)."""
    if n < 2:
        return False
    small = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)
    for p in small:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in small:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _special_primes(moduli_q: list[int], dnum: int, ring_dim: int) -> list[int]:
    """HYBRID key switching's special primes P as OpenFHE chooses them (``CryptoParametersRNS::
    PrecomputeCRTTables``, v1.5/1.6): Q's moduli in ``dnum`` digits of ceil(#Q / dnum) moduli, ceil(max digit bits
    / 60) primes = 1 mod 2N, the largest below 2^60 (FirstPrime(60, 2N) then PreviousPrime) that are not in Q.
    The Python API does not expose P, so this recomputes it."""
    m = 2 * ring_dim
    per = math.ceil(len(moduli_q) / dnum)
    max_bits = max(math.prod(moduli_q[j * per:(j + 1) * per]).bit_length() for j in range(dnum))
    size_p = math.ceil(max_bits / AUX_MOD_SIZE)
    q = 1 << AUX_MOD_SIZE
    p = q + 1 - q % m + (m if q % m else 0)  # FirstPrime(60, 2N)
    while not _is_prime(p):
        p += m
    primes: list[int] = []
    in_q = set(moduli_q)
    while len(primes) < size_p:
        p -= m
        while not _is_prime(p) or p in in_q:
            p -= m
        primes.append(p)
    return primes


def _context_info(of, cc) -> tuple[list[int], int]:
    """Q's RNS moduli and the HYBRID digit count, read from the context's JSON serialization (the Python API has
    no getter for either)."""
    doc = json.loads(of.Serialize(cc, of.JSON))
    found: dict[str, object] = {}

    def walk(o):
        if isinstance(o, dict):
            if "dnum" in o and "dnum" not in found:
                found["dnum"] = o["dnum"]
            if "elp" in o and "elp" not in found:
                found["elp"] = o["elp"]
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(doc)
    moduli: list[int] = []

    def collect(o):  # every ILNativeParams {"co", "rd", "cm": {"v": q}} under the element parameters' "p" list
        if isinstance(o, dict):
            cm = o.get("cm")
            if "co" in o and isinstance(cm, dict) and isinstance(cm.get("v"), int):
                moduli.append(cm["v"])
            for k, v in o.items():
                if k not in ("ru", "bm", "br"):
                    collect(v)
        elif isinstance(o, list):
            for v in o:
                collect(v)

    elp = found.get("elp")
    collect(elp.get("ptr_wrapper", {}).get("data", {}).get("p", []) if isinstance(elp, dict) else [])
    return moduli, int(found.get("dnum", 0))


def _rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def worker(args: argparse.Namespace) -> dict:
    """The record: ``params`` (N, slots, levels_left_requested, level_budget, bootstrap_depth, mult_depth,
    scaling_mod_size, first_mod_size, scaling, key_switching, dnum, secret_dist, security, num_q_moduli, log_q,
    num_p_moduli, log_p, log_pq, openfhe_version, openfhe_wheel, native_int); ``context_s``; ``keygen_s``
    (bootstrap_setup_s, keygen_s, mult_keygen_s, bootstrap_keygen_s, total_s); ``bootstrap_ms`` (median, min, max,
    reps); ``input_levels_left``, ``levels_left``, ``output_level``, ``output_noise_scale_deg``;
    ``precision_bits`` / ``max_abs_err`` and ``mean_precision_bits`` / ``mean_abs_err`` after one bootstrap;
    ``precision_curve_bits`` (max-error bits after 1, 2, ... ``repeats`` bootstraps in a row) and
    ``repeat_bootstrap_ms``; ``memory`` (peak RSS in MB after context, after keys, at the end). The driver adds
    ``openfhe_warnings``."""
    import importlib.metadata

    import numpy as np
    import openfhe as of

    if hasattr(os, "sched_getaffinity"):
        try:
            if len(os.sched_getaffinity(0)) < args.threads:
                os.sched_setaffinity(0, set(range(os.cpu_count() or 1)[-args.threads:]))
        except OSError:
            pass  # a cpuset narrower than the machine: keep the inherited CPUs
    ring_dim, slots = 1 << args.log_n, args.slots
    if slots < 1 or slots & (slots - 1) or slots > ring_dim // 2:
        raise SystemExit(f"slots must be a power of two <= N/2 = {ring_dim // 2}, got {slots}")
    budget = list(args.level_budget)
    key_dist = of.SecretKeyDist.UNIFORM_TERNARY
    scaling = {"FLEXIBLEAUTO": of.ScalingTechnique.FLEXIBLEAUTO, "FIXEDAUTO": of.ScalingTechnique.FIXEDAUTO}
    security = {"HEStd_128_classic": of.SecurityLevel.HEStd_128_classic, "none": of.SecurityLevel.HEStd_NotSet}
    boot_depth = of.CryptoContext.GetBootstrapDepth(budget, key_dist)  # FHECKKSRNS.GetBootstrapDepth in C++
    depth = args.levels_left + boot_depth + (args.iterations - 1)  # an extra iteration spends a level

    pp = of.CCParamsCKKSRNS()
    pp.SetSecretKeyDist(key_dist)
    pp.SetSecurityLevel(security[args.security])
    pp.SetRingDim(ring_dim)
    pp.SetScalingModSize(SCALING_MOD_SIZE)
    pp.SetFirstModSize(FIRST_MOD_SIZE)
    pp.SetScalingTechnique(scaling[args.scaling])
    pp.SetKeySwitchTechnique(of.KeySwitchTechnique.HYBRID)
    if args.dnum:
        pp.SetNumLargeDigits(args.dnum)
    pp.SetMultiplicativeDepth(depth)
    t0 = time.perf_counter()
    cc = of.GenCryptoContext(pp)
    for feature in (of.PKESchemeFeature.PKE, of.PKESchemeFeature.KEYSWITCH, of.PKESchemeFeature.LEVELEDSHE,
                    of.PKESchemeFeature.ADVANCEDSHE, of.PKESchemeFeature.FHE):
        cc.Enable(feature)
    context_s = time.perf_counter() - t0

    moduli_q, dnum = _context_info(of, cc)
    log_q = cc.GetElementParams().GetModulus().bit_length()
    params = {"N": cc.GetRingDimension(), "slots": slots, "levels_left_requested": args.levels_left,
              "level_budget": budget, "bootstrap_depth": boot_depth, "mult_depth": depth,
              "scaling_mod_size": SCALING_MOD_SIZE, "first_mod_size": FIRST_MOD_SIZE, "scaling": args.scaling,
              "key_switching": "HYBRID", "dnum": dnum, "secret_dist": "UNIFORM_TERNARY",
              "security": "HEStd_128_classic" if args.security == "HEStd_128_classic" else "HEStd_NotSet",
              "num_q_moduli": len(moduli_q), "log_q": log_q,
              "openfhe_version": getattr(of, "__version__", None),
              "openfhe_wheel": importlib.metadata.version("openfhe"), "native_int": of.get_native_int()}
    if moduli_q and dnum and math.prod(moduli_q).bit_length() == log_q:
        primes_p = _special_primes(moduli_q, dnum, ring_dim)
        params.update(num_p_moduli=len(primes_p), log_p=math.prod(primes_p).bit_length(),
                      log_pq=(math.prod(moduli_q) * math.prod(primes_p)).bit_length())
    mem = {"after_context_mb": _rss_mb()}

    keygen = {}
    t0 = time.perf_counter()
    cc.EvalBootstrapSetup(budget, [0, 0], slots)
    keygen["bootstrap_setup_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    kp = cc.KeyGen()
    keygen["keygen_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    cc.EvalMultKeyGen(kp.secretKey)
    keygen["mult_keygen_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    cc.EvalBootstrapKeyGen(kp.secretKey, slots)
    keygen["bootstrap_keygen_s"] = time.perf_counter() - t0
    keygen["total_s"] = sum(keygen.values())
    mem["after_keygen_mb"] = _rss_mb()

    rng = np.random.default_rng(20240 + args.log_n)
    x = rng.uniform(-1.0, 1.0, slots)
    pt = cc.MakeCKKSPackedPlaintext(x, 1, depth - 1, None, slots)
    ct = cc.Encrypt(kp.publicKey, pt)

    def levels(c) -> int:
        # What OpenFHE's simple-ckks-bootstrapping example prints: depth - level - (noiseScaleDeg - 1). GetLevel()
        # counts the rescalings done (moduli dropped) since a fresh depth-`depth` ciphertext; with FLEXIBLEAUTO a
        # ciphertext whose last product is not yet rescaled (noiseScaleDeg 2) owes one more, so that is taken off.
        return depth - c.GetLevel() - (c.GetNoiseScaleDeg() - 1)

    def errors(c) -> tuple[float, float]:
        """max and mean over the slots of |decrypt(c) - x|"""
        dec = cc.Decrypt(kp.secretKey, c)
        dec.SetLength(slots)
        e = np.abs(np.asarray(dec.GetRealPackedValue()) - x)
        return float(np.max(e)), float(np.mean(e))

    def bits(err: float) -> float:
        return round(-math.log2(max(err, 2.0**-60)), 3)

    times, out = [], None
    one_bits = None
    if args.iterations > 1:  # the precision of one iteration, which EvalBootstrap takes as an argument
        one_bits = bits(errors(cc.EvalBootstrap(ct))[0])
    for _ in range(args.warmup):  # untimed, as ours is: its first call (compiling) is timed apart
        cc.EvalBootstrap(ct, args.iterations, int(one_bits or 0))
    for _ in range(max(1, args.reps)):
        t0 = time.perf_counter()
        out = cc.EvalBootstrap(ct, args.iterations, int(one_bits or 0))
        times.append(time.perf_counter() - t0)
    err1, mean1 = errors(out)
    curve, curve_ms, cur = [bits(err1)], [], out
    for _ in range(args.repeats - 1):  # bootstrap the last result again: the error after k bootstraps
        t0 = time.perf_counter()
        cur = cc.EvalBootstrap(cur)
        curve_ms.append((time.perf_counter() - t0) * 1e3)
        curve.append(bits(errors(cur)[0]))
    mem["peak_rss_mb"] = _rss_mb()

    return {"peer": f"openfhe {importlib.metadata.version('openfhe')}", "threads": args.threads,
            "params": params, "context_s": context_s, "keygen_s": keygen,
            "bootstrap_ms": {"median": statistics.median(times) * 1e3, "min": min(times) * 1e3,
                             "max": max(times) * 1e3, "reps": len(times),
                             "warmup": args.warmup},
            "input_levels_left": levels(ct), "levels_left": levels(out),
            "output_level": out.GetLevel(), "output_noise_scale_deg": out.GetNoiseScaleDeg(),
            "precision_bits": bits(err1), "max_abs_err": err1,
            "mean_precision_bits": bits(mean1), "mean_abs_err": mean1,
            "precision_curve_bits": curve, "repeat_bootstrap_ms": curve_ms,
            "iterations": args.iterations, "one_iteration_bits": one_bits,
            "memory": mem}


def _parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--driver", action="store_true",
                   help="run the driver (find the openfhe interpreter, run the worker, print its record)")
    p.add_argument("--openfhe-python", default=None, help="driver: the interpreter that has openfhe")
    p.add_argument("--timeout-s", type=float, default=3600, help="driver: worker time limit")
    p.add_argument("--log-n", type=int, required=True)
    p.add_argument("--slots", type=int, default=None, help="default N/2")
    p.add_argument("--levels-left", type=int, required=True)
    p.add_argument("--level-budget", type=int, nargs=2, default=[4, 3], metavar=("CTS", "STC"))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1, help="untimed bootstraps before the timed ones")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--security", choices=("HEStd_128_classic", "none"), default="HEStd_128_classic")
    p.add_argument("--dnum", type=int, default=0, help="HYBRID digits; 0: OpenFHE's default")
    p.add_argument("--scaling", choices=("FLEXIBLEAUTO", "FIXEDAUTO"), default="FLEXIBLEAUTO")
    p.add_argument("--iterations", type=int, choices=(1, 2), default=1, help="2: iterative bootstrapping (Meta-BTS)")
    a = p.parse_args(argv)
    if a.slots is None:
        a.slots = 1 << (a.log_n - 1)
    return a


def main(argv: list[str] | None = None) -> int:
    a = _parse(argv)
    if not a.driver:
        # OpenFHE prints its warnings on the C++ stdout: send them to stderr, keep stdout for the one JSON line
        sys.stdout.flush()
        out_fd = os.dup(1)
        os.dup2(2, 1)
        rec = worker(a)
        sys.stdout.flush()
        try:  # and whatever the C library still buffers for fd 1
            import ctypes

            ctypes.CDLL(None).fflush(None)
        except (OSError, AttributeError):
            pass
        os.dup2(out_fd, 1)
        os.close(out_fd)
        print(json.dumps(rec), flush=True)
        return 0
    rec = run_bootstrap(find_python(a.openfhe_python), log_n=a.log_n, slots=a.slots, levels_left=a.levels_left,
                        level_budget=tuple(a.level_budget), threads=a.threads, reps=a.reps, repeats=a.repeats,
                        timeout_s=a.timeout_s, security=a.security, dnum=a.dnum, scaling=a.scaling,
                        iterations=a.iterations)
    if rec is None:
        return 1
    print(json.dumps(rec, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
