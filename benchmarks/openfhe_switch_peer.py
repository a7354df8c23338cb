"""OpenFHE CKKS <-> FHEW scheme-switching peer: time, precision and key sizes of OpenFHE's switching API.

Run by the interpreter that has ``openfhe`` (its wheels are built for CPython 3.10 only: ``.venv-openfhe``, made by
``make openfhe-peer``; see ``openfhe_peer.py``):

    MALLOC_ARENA_MAX=1 .venv-openfhe/bin/python benchmarks/openfhe_switch_peer.py --slots 8,64 --threads 1 \\
        --json /tmp/openfhe_switch.json

It prints one JSON object on stdout (``--json PATH`` also writes it) and a table on stderr. ``run_switch`` (standard
library only) runs it from another interpreter, as ``openfhe_boot_peer.run_bootstrap`` does for bootstrapping.

What it measures, for each slot count n (``--slots``, default 8,64; ``--quick``: the smallest only), on n values
drawn by ``numpy.random.default_rng([seed, n])`` uniformly from ``--interval=lo,hi`` (default -4,4):

- ``ckks_to_fhew``: ``EvalCKKStoFHEW`` of a fresh CKKS ciphertext of x into n FHEW (LWE) ciphertexts, after
  ``EvalCKKStoFHEWPrecompute(s / p)``: the LWE ciphertexts (modulus 2^25) then decrypt, with plaintext modulus p,
  to round(x * s) mod p. p = 2^25 / (2 beta) is OpenFHE's "large precision" plaintext modulus (beta: the FHEW
  noise bound, 128 at STD128, so p = 2^17) and s = 2^k the largest power of two with max|x| * s <= p / 4
  (k = 13 for the default interval): the switch keeps k fractional bits. Reported: the decrypted values, the
  expected round(x * s), the largest difference in units of 1/s and the fraction that are exact.
- ``fhew_to_ckks``: ``EvalFHEWtoCKKS`` of n fresh FHEW encryptions (secret key, plaintext modulus p, modulus 2^25)
  of m = round(x * s2) into one CKKS ciphertext of n slots. OpenFHE recovers m through a sine, p/(2 pi) *
  sin(2 pi m / p), exact only for |m| << p ("the messages have to be much smaller than the FHEW plaintext modulus",
  its example says), so s2 is the largest power of two with max|x| * s2 <= p / 2^11 (s2 = 2^4 here: the sine's
  bias is then below 1e-4 of a unit). Reported: max |decrypted - m| and max |decrypted / s2 - x|.
- ``compare``: ``EvalCompareSchemeSwitching(ct_x, ct_y, n, n)`` after ``EvalCompareSwitchPrecompute(p, scale_sign)``
  (timed apart): CKKS x - y -> FHEW -> ``EvalSign`` (functional bootstrapping, one per value) -> CKKS; the result
  decrypts to about 1 where x < y and 0 elsewhere. scale_sign = 2^j, the largest with (hi - lo) * scale_sign <=
  p / 4 (2^12 here): differences are rounded to multiples of 1/scale_sign in FHEW, so the sign is only
  determined where |x - y| > ``resolution`` = 2 / scale_sign (a unit of rounding and a unit of switching noise).
  Reported: max |decrypted - (x < y)| over all slots and over the resolved ones, and the count that round right.
- ``max_argmax``: ``EvalMaxSchemeSwitching(ct_z, pk, n, n)`` (its own context, set up with ``SetComputeArgmin``;
  same precompute): the max in slot 0 and the one-hot argmax in slots 0..n-1. Reported: the error of the max, the
  one-hot vector's error, the index it picks, NumPy's, and the gap between the two largest values.
- key generation (CKKS ``KeyGen``, ``EvalSchemeSwitchingSetup``, ``EvalSchemeSwitchingKeyGen``; the last makes the
  rotation/conjugation keys of both linear transforms, the relinearization key, the CKKS -> FHEW key switching key,
  the FHEW -> CKKS key (a CKKS encryption of the LWE secret) and the FHEW bootstrapping keys for ``EvalSign``) and
  the serialized (BINARY) size of each key set, written to a temporary directory: the CKKS public key, relin key,
  rotation keys (and their count), the FHEW -> CKKS key (``GetSwkFC``), the FHEW bootstrapping keys
  (``GetBTKey``: refresh and LWE key-switching keys), the FHEW context, and the CKKS context before setup and after
  key generation: OpenFHE serializes the CKKS -> FHEW switching key (and its intermediate context's ciphertext)
  with the CKKS context, so the difference is reported as ``ckks_to_fhew_key_in_context``.

Parameters, following OpenFHE's scheme-switching examples (``examples/pke/scheme-switching.py``) at 128-bit
security: CKKS ``HEStd_128_classic`` (OpenFHE chooses the ring dimension: 2^16 for these chains), ``FIXEDAUTO``
scaling, scaling mod size 50, first mod size 60, ``UNIFORM_TERNARY`` secret, ``HYBRID`` key switching with
OpenFHE's default digit count, batch size n; depth 13 for the switching/comparison context (3 double-angle
steps + a Chebyshev series of depth up to 9 + 1 post-scaling level in FHEW -> CKKS) and 13 + log2(n) for the
argmax context (one more level per round of the tournament); FHEW ``STD128`` (GINX), large-precision ciphertext
modulus 2^25, the intermediate CKKS context of the switch at ``HEStd_128_classic``.

Each timing is the median (and min/max) of ``--reps`` calls (default 3) after one warm-up call (its time is kept as
``first_ms``) where a warm-up makes sense: a first call slower than ``--warmup-max-s`` (default 5 s; the FHEW
bootstrapping steps take seconds per value, and OpenFHE has no one-time cost there worth excluding) is counted
as the first timed call instead (``"warmup": false`` in its timing). Threads: ``--threads N`` sets
``OMP_NUM_THREADS`` before ``openfhe`` is imported and pins the process to the first N of the CPUs it may use
(``os.sched_setaffinity``). The two contexts of a slot count are built one after the other, and each is released
before the next (their key sets take GBs: run one such process at a time, with ``MALLOC_ARENA_MAX=1``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

SCALE_MOD_SIZE = 50
FIRST_MOD_SIZE = 60
LOGQ_LWE = 25  # FHEW large-precision ciphertext modulus (SetCtxtModSizeFHEWLargePrec), OpenFHE's default
FHEW_TO_CKKS_DEPTH = 13  # 3 double-angle iterations + Chebyshev depth <= 9 + 1 post-scaling (OpenFHE's examples)
SUITE = "switch"


def _say(msg: str) -> None:
    print(f"# openfhe-switch: {msg}", file=sys.stderr)


# --------------------------------------------------------------------------------------------------
# Driver (standard library only): run the peer from another interpreter
# --------------------------------------------------------------------------------------------------


def run_switch(python: str | None, *, slots: tuple[int, ...] = (8,), threads: int = 1, reps: int = 3,
               seed: int = 0, interval: tuple[float, float] = (-4.0, 4.0), timeout_s: float = 3600) -> dict | None:
    """One peer run in ``python`` (e.g. ``openfhe_peer.find_python()``); its JSON object, or None (with a message on
    stderr) when the interpreter is missing or the run fails."""
    if not python:
        _say("no interpreter with openfhe (make openfhe-peer), scheme-switching peer skipped")
        return None
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    from openfhe_peer import run_worker

    cmd = [python, str(Path(__file__).resolve()), "--slots", ",".join(map(str, slots)), "--threads", str(threads),
           "--reps", str(reps), "--seed", str(seed), f"--interval={interval[0]},{interval[1]}"]
    return run_worker(cmd, threads, timeout_s, "scheme-switching peer")[0]


# --------------------------------------------------------------------------------------------------
# Worker (run by the interpreter that has openfhe)
# --------------------------------------------------------------------------------------------------


def _pin(threads: int) -> list[int]:
    """Set OMP_NUM_THREADS (before openfhe's libgomp starts) and pin to the first ``threads`` usable CPUs."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    if not hasattr(os, "sched_setaffinity"):
        return []
    try:
        cpus = sorted(os.sched_getaffinity(0))[:threads]
        os.sched_setaffinity(0, set(cpus))
        return sorted(os.sched_getaffinity(0))
    except OSError:
        return sorted(os.sched_getaffinity(0))


def _rss_mb() -> dict:
    import resource

    cur = None
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    cur = int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return {"rss_mb": cur, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}


def _loadavg() -> str | None:
    try:
        return Path("/proc/loadavg").read_text().strip()
    except OSError:
        return None


def _timed(fn, reps: int, warmup_max_s: float):
    """(the last call's result, timing). The first call is a warm-up (timed as ``first_ms``, not in the median)
    when it takes under ``warmup_max_s``; a slower first call (seconds of FHEW bootstrapping, no one-time cost
    worth excluding) counts as the first of the ``reps`` timed calls instead."""
    t0 = time.perf_counter()
    out = fn()
    first = (time.perf_counter() - t0) * 1e3
    warm = first < warmup_max_s * 1e3
    ts = [] if warm else [first]
    while len(ts) < max(1, reps):
        t0 = time.perf_counter()
        out = fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return out, {"median_ms": statistics.median(ts), "min_ms": min(ts), "max_ms": max(ts), "reps": len(ts),
                 "warmup": warm, "first_ms": first, "times_ms": ts}


def _pow2_floor(v: float) -> int:
    """log2 of the largest power of two <= v."""
    return int(math.floor(math.log2(v)))


def _ckks_context(of, depth: int, slots: int):
    pp = of.CCParamsCKKSRNS()
    pp.SetMultiplicativeDepth(depth)
    pp.SetScalingModSize(SCALE_MOD_SIZE)
    pp.SetFirstModSize(FIRST_MOD_SIZE)
    pp.SetScalingTechnique(of.ScalingTechnique.FIXEDAUTO)
    pp.SetSecurityLevel(of.SecurityLevel.HEStd_128_classic)
    pp.SetSecretKeyDist(of.SecretKeyDist.UNIFORM_TERNARY)
    pp.SetKeySwitchTechnique(of.KeySwitchTechnique.HYBRID)
    pp.SetBatchSize(slots)
    t0 = time.perf_counter()
    cc = of.GenCryptoContext(pp)
    for feature in (of.PKESchemeFeature.PKE, of.PKESchemeFeature.KEYSWITCH, of.PKESchemeFeature.LEVELEDSHE,
                    of.PKESchemeFeature.ADVANCEDSHE, of.PKESchemeFeature.SCHEMESWITCH):
        cc.Enable(feature)
    return cc, time.perf_counter() - t0


def _ckks_params(of, cc, depth: int) -> dict:
    moduli, dnum = [], None
    try:  # Q's RNS moduli and the digit count, from the context's JSON (as openfhe_boot_peer does)
        if str(HERE) not in sys.path:
            sys.path.insert(0, str(HERE))
        from openfhe_boot_peer import _context_info, _special_primes

        moduli, dnum = _context_info(of, cc)
    except Exception as e:  # noqa: BLE001 - informative only
        _say(f"could not read the RNS moduli: {e}")
    log_q = cc.GetElementParams().GetModulus().bit_length()
    params = {"N": cc.GetRingDimension(), "mult_depth": depth, "log_q": log_q, "num_q_moduli": len(moduli) or None,
              "scaling_mod_size": SCALE_MOD_SIZE, "first_mod_size": FIRST_MOD_SIZE, "scaling": "FIXEDAUTO",
              "key_switching": "HYBRID", "dnum": dnum, "secret_dist": "UNIFORM_TERNARY",
              "security": "HEStd_128_classic"}
    if moduli and dnum and math.prod(moduli).bit_length() == log_q:
        try:
            primes_p = _special_primes(moduli, dnum, cc.GetRingDimension())
            params.update(num_p_moduli=len(primes_p), log_p=math.prod(primes_p).bit_length(),
                          log_pq=(math.prod(moduli) * math.prod(primes_p)).bit_length())
        except Exception as e:  # noqa: BLE001
            _say(f"could not recompute P: {e}")
    return params


def _switch_setup(of, cc, slots: int, argmin: bool):
    """CKKS key pair, scheme-switching setup and keys; (keys, lwe secret key, FHEW context, seconds per step)."""
    times = {}
    t0 = time.perf_counter()
    keys = cc.KeyGen()
    times["ckks_keygen_s"] = time.perf_counter() - t0
    sp = of.SchSwchParams()
    sp.SetSecurityLevelCKKS(of.SecurityLevel.HEStd_128_classic)
    sp.SetSecurityLevelFHEW(of.BINFHE_PARAMSET.STD128)
    sp.SetCtxtModSizeFHEWLargePrec(LOGQ_LWE)
    sp.SetNumSlotsCKKS(slots)
    sp.SetNumValues(slots)
    if argmin:
        sp.SetComputeArgmin(True)
    t0 = time.perf_counter()
    lwesk = cc.EvalSchemeSwitchingSetup(sp)
    times["switch_setup_s"] = time.perf_counter() - t0
    cclwe = cc.GetBinCCForSchemeSwitch()
    t0 = time.perf_counter()
    cc.EvalSchemeSwitchingKeyGen(keys, lwesk)
    times["switch_keygen_s"] = time.perf_counter() - t0
    times["total_s"] = sum(times.values())
    return keys, lwesk, cclwe, times


def _fhew_params(cclwe) -> dict:
    beta = int(cclwe.GetBeta())
    p = (1 << LOGQ_LWE) // (2 * beta)
    return {"paramset": "STD128", "method": "GINX", "lwe_n": cclwe.Getn(), "lwe_q": int(cclwe.Getq()),
            "ring_N": cclwe.GetN(), "log_ring_Q": int(cclwe.GetQ()).bit_length(), "beta": beta,
            "log_q_large_precision": LOGQ_LWE, "p_small": int(cclwe.GetMaxPlaintextSpace()), "p_large": p}


def _key_sizes(of, cc, keys, cclwe, ctx_bytes_before: int, folder: str) -> dict:
    """Serialized (BINARY) sizes in bytes of the key sets of one context, written one at a time to ``folder``."""
    tag = keys.secretKey.GetKeyTag()
    path = os.path.join(folder, "obj.bin")

    def size(write) -> int | None:
        try:
            ok = write(path)
            n = os.path.getsize(path) if ok is not False and os.path.exists(path) else None
        except Exception as e:  # noqa: BLE001 - a key the bindings cannot write is reported as None
            _say(f"serialization failed: {e}")
            n = None
        if os.path.exists(path):
            os.remove(path)
        return n

    t0 = time.perf_counter()
    out = {
        "ckks_public_key": size(lambda p: of.SerializeToFile(p, keys.publicKey, of.BINARY)),
        "ckks_relin_key": size(lambda p: cc.SerializeEvalMultKey(p, of.BINARY, tag)),
        "ckks_rotation_keys": size(lambda p: cc.SerializeEvalAutomorphismKey(p, of.BINARY, tag)),
        "num_rotation_keys": len(cc.GetExistingEvalAutomorphismKeyIndices(tag)),
        "fhew_to_ckks_key": size(lambda p: of.SerializeToFile(p, cc.GetSwkFC(), of.BINARY)),
        "fhew_bootstrap_keys": size(lambda p: of.SerializeToFile(p, cclwe.GetBTKey(), of.BINARY)),
        "fhew_context": size(lambda p: of.SerializeToFile(p, cclwe, of.BINARY)),
        "ckks_context_before_setup": ctx_bytes_before,
        "ckks_context_after_keygen": size(lambda p: of.SerializeToFile(p, cc, of.BINARY)),
    }
    if out["ckks_context_after_keygen"] is not None and ctx_bytes_before is not None:
        out["ckks_to_fhew_key_in_context"] = out["ckks_context_after_keygen"] - ctx_bytes_before
    out["serialize_s"] = time.perf_counter() - t0
    out["total_eval_keys"] = sum(v for k, v in out.items() if v is not None and k in (
        "ckks_relin_key", "ckks_rotation_keys", "fhew_to_ckks_key", "fhew_bootstrap_keys",
        "ckks_to_fhew_key_in_context"))
    return out


def _context_bytes(of, cc, folder: str) -> int | None:
    path = os.path.join(folder, "ctx.bin")
    try:
        of.SerializeToFile(path, cc, of.BINARY)
        return os.path.getsize(path)
    except Exception as e:  # noqa: BLE001
        _say(f"context serialization failed: {e}")
        return None
    finally:
        if os.path.exists(path):
            os.remove(path)


def _release(of, cc) -> None:
    for clear in ("ClearEvalMultKeys", "ClearEvalAutomorphismKeys", "ClearSchemeSwitchPrecom"):
        try:
            getattr(cc, clear)()
        except Exception:  # noqa: BLE001, S110 - best effort
            pass
    of.ReleaseAllContexts()
    import gc

    gc.collect()


def _collect(of) -> None:
    """Once a phase's objects are gone: collect Python cycles, let OpenFHE drop its caches and trim the heap."""
    import gc

    gc.collect()
    of.ReleaseAllContexts()


def _signed(v: int, p: int) -> int:
    v %= p
    return v - p if v >= p // 2 else v


def _bits(err: float) -> float:
    return round(-math.log2(max(err, 2.0**-60)), 2)


def _new_context(of, n: int, depth: int, argmin: bool, folder: str):
    """A CKKS context with its scheme-switching keys; (cc, keys, lwe secret key, FHEW context, context record)."""
    cc, ctx_s = _ckks_context(of, depth, n)
    ctx_bytes = _context_bytes(of, cc, folder)
    keys, lwesk, cclwe, kg = _switch_setup(of, cc, n, argmin=argmin)
    ctx = {"ckks": _ckks_params(of, cc, depth), "context_s": ctx_s, "keygen_s": kg, "argmin_setup": argmin,
           "key_bytes": _key_sizes(of, cc, keys, cclwe, ctx_bytes, folder), "memory_after_keygen": _rss_mb()}
    _say(f"n={n}: {'argmax' if argmin else 'switch'} context N={ctx['ckks']['N']} logQ={ctx['ckks']['log_q']}, "
         f"keys in {kg['total_s']:.1f} s")
    return cc, keys, lwesk, cclwe, ctx


def _switch_phase(of, np, n: int, x, y, args, folder: str, res: dict) -> None:
    """CKKS -> FHEW, FHEW -> CKKS and the comparison, in the depth-13 context (filled into ``res``)."""
    lo, hi = args.interval
    maxabs = max(abs(lo), abs(hi))
    cc, keys, lwesk, cclwe, ctx = _new_context(of, n, FHEW_TO_CKKS_DEPTH, False, folder)
    fp = _fhew_params(cclwe)
    p = fp["p_large"]
    res["fhew"] = fp
    res["switch_context"] = ctx

    # CKKS -> FHEW
    k = _pow2_floor(p / (4 * maxabs))
    s = 2.0**k
    t0 = time.perf_counter()
    cc.EvalCKKStoFHEWPrecompute(s / p)
    pre_s = time.perf_counter() - t0
    ct_x = cc.Encrypt(keys.publicKey, cc.MakeCKKSPackedPlaintext(x.tolist(), 1, 0, None, n))
    lwes, tm = _timed(lambda: cc.EvalCKKStoFHEW(ct_x, n), args.reps, args.warmup_max_s)
    dec = np.array([_signed(cclwe.Decrypt(lwesk, c, p), p) for c in lwes[:n]], dtype=np.int64)
    want = np.rint(x * s).astype(np.int64)
    diff = np.abs(dec - want)
    res["ckks_to_fhew"] = {
        "timing": tm, "precompute_s": pre_s, "num_lwe": len(lwes),
        "lwe_modulus_bits": int(lwes[0].GetModulus()).bit_length() - 1, "plaintext_modulus": p, "scale": s,
        "fraction_bits": k, "decrypted": dec.tolist(), "expected_round": want.tolist(),
        "max_diff_units": int(diff.max()), "exact_fraction": float(np.mean(diff == 0)),
        "max_abs_err": float(np.max(np.abs(dec / s - x)))}
    _say(f"n={n}: ckks->fhew {tm['median_ms']:.1f} ms, max diff {int(diff.max())} units of 2^-{k}")

    # FHEW -> CKKS
    k2 = _pow2_floor(p / (2**11 * maxabs))
    s2 = 2.0**k2
    m = np.rint(x * s2).astype(np.int64)
    fresh = [cclwe.Encrypt(lwesk, int(v) % p, of.BINFHE_OUTPUT.FRESH, p, 1 << LOGQ_LWE) for v in m]
    ct_back, tm = _timed(lambda: cc.EvalFHEWtoCKKS(fresh, n, n, p, 0.0, float(p)), args.reps, args.warmup_max_s)
    pt = cc.Decrypt(keys.secretKey, ct_back)
    pt.SetLength(n)
    got = np.array(pt.GetRealPackedValue()[:n])
    sine = p / (2 * math.pi) * np.sin(2 * math.pi * m / p)
    err = float(np.max(np.abs(got - m)))
    res["fhew_to_ckks"] = {
        "timing": tm, "plaintext_modulus": p, "scale": s2, "fraction_bits": k2, "input_m": m.tolist(),
        "decrypted": got.tolist(), "max_abs_err_units": err,
        "max_abs_err_vs_sine_model": float(np.max(np.abs(got - sine))),
        "max_abs_err_vs_x": float(np.max(np.abs(got / s2 - x))), "precision_bits_units": _bits(err),
        "output_level": ct_back.GetLevel()}
    _say(f"n={n}: fhew->ckks {tm['median_ms']:.1f} ms, max err {err:.2e} units")

    # comparison
    j = _pow2_floor(p / (4 * (hi - lo)))
    scale_sign = 2.0**j
    t0 = time.perf_counter()
    cc.EvalCompareSwitchPrecompute(p, scale_sign)
    pre_s = time.perf_counter() - t0
    ct_y = cc.Encrypt(keys.publicKey, cc.MakeCKKSPackedPlaintext(y.tolist(), 1, 0, None, n))
    ct_cmp, tm = _timed(lambda: cc.EvalCompareSchemeSwitching(ct_x, ct_y, n, n), args.reps, args.warmup_max_s)
    pt = cc.Decrypt(keys.secretKey, ct_cmp)
    pt.SetLength(n)
    got = np.array(pt.GetRealPackedValue()[:n])
    want = (x < y).astype(float)
    resolution = 2.0 / scale_sign
    resolved = np.abs(x - y) > resolution
    err = np.abs(got - want)
    right = (got > 0.5) == (want > 0.5)
    res["compare"] = {
        "timing": tm, "precompute_s": pre_s, "plaintext_modulus": p, "scale_sign": scale_sign,
        "resolution": resolution, "decrypted": got.tolist(), "expected": want.tolist(),
        "max_abs_err": float(err.max()),
        "max_abs_err_resolved": float(err[resolved].max()) if resolved.any() else None,
        "num_resolved": int(resolved.sum()), "num_correct": int(right.sum()),
        "num_correct_resolved": int(right[resolved].sum()), "output_level": ct_cmp.GetLevel()}
    _say(f"n={n}: compare {tm['median_ms']:.1f} ms, max err {err.max():.2e}, {int(right.sum())}/{n} right")
    res["memory_switch_context"] = _rss_mb()
    _release(of, cc)


def _argmax_phase(of, np, n: int, z, args, folder: str, res: dict) -> None:
    """Max and argmax in the depth 13 + log2(n) context set up for argmin (filled into ``res``)."""
    lo, hi = args.interval
    cc, keys, lwesk, cclwe, ctx = _new_context(of, n, FHEW_TO_CKKS_DEPTH + int(math.log2(n)), True, folder)
    res["argmax_context"] = ctx
    p = _fhew_params(cclwe)["p_large"]
    scale_sign = 2.0 ** _pow2_floor(p / (4 * (hi - lo)))
    resolution = 2.0 / scale_sign
    t0 = time.perf_counter()
    cc.EvalCompareSwitchPrecompute(p, scale_sign)
    pre_s = time.perf_counter() - t0
    ct_z = cc.Encrypt(keys.publicKey, cc.MakeCKKSPackedPlaintext(z.tolist(), 1, 0, None, n))
    out, tm = _timed(lambda: cc.EvalMaxSchemeSwitching(ct_z, keys.publicKey, n, n), args.reps, args.warmup_max_s)
    pt = cc.Decrypt(keys.secretKey, out[0])
    pt.SetLength(1)
    got_max = float(pt.GetRealPackedValue()[0])
    pt = cc.Decrypt(keys.secretKey, out[1])
    pt.SetLength(n)
    onehot = np.array(pt.GetRealPackedValue()[:n])
    idx_np = int(np.argmax(z))
    idx_he = int(np.argmax(onehot))
    top2 = np.sort(z)[-2:]
    res["max_argmax"] = {
        "timing": tm, "precompute_s": pre_s, "plaintext_modulus": p, "scale_sign": scale_sign,
        "resolution": resolution, "max": got_max, "max_numpy": float(z.max()),
        "max_abs_err": abs(got_max - float(z.max())), "onehot": onehot.tolist(),
        "onehot_max_abs_err": float(np.max(np.abs(onehot - np.eye(n)[idx_np]))),
        "argmax": idx_he, "argmax_numpy": idx_np, "argmax_correct": idx_he == idx_np,
        "top2_gap": float(top2[1] - top2[0]), "picked_within_resolution": bool(z[idx_he] >= z.max() - resolution),
        "output_levels": [out[0].GetLevel(), out[1].GetLevel()]}
    _say(f"n={n}: max/argmax {tm['median_ms']:.1f} ms, max err {res['max_argmax']['max_abs_err']:.2e}, "
         f"argmax {idx_he} (numpy {idx_np})")
    res["memory_argmax_context"] = _rss_mb()
    _release(of, cc)


def bench_slots(of, np, n: int, args) -> dict:
    """Both contexts for ``n`` slots, one after the other; the detail record (parameters, keys, operations and
    their correctness against NumPy)."""
    if n < 2 or n & (n - 1):
        raise SystemExit(f"slot counts must be powers of two >= 2, got {n}")
    lo, hi = args.interval
    rng = np.random.default_rng([args.seed, n])
    x, y, z = (rng.uniform(lo, hi, n) for _ in range(3))
    res: dict = {"n": n, "data": {"x": x.tolist(), "y": y.tolist(), "z": z.tolist()}}
    with tempfile.TemporaryDirectory(prefix="openfhe-switch-") as folder:
        _switch_phase(of, np, n, x, y, args, folder, res)
        _collect(of)
        res["memory_after_switch_release"] = _rss_mb()
        _argmax_phase(of, np, n, z, args, folder, res)
        _collect(of)
        res["memory_after_argmax_release"] = _rss_mb()
    return res


def _records(res: dict, peer: str, threads: int) -> list[dict]:
    """Records in docs/BENCHMARKS.md's format, one per operation and slot count."""
    out = []
    for n, r in res.items():
        sw, am = r["switch_context"], r["argmax_context"]
        common = {"slots": int(n), "fhew": "STD128", "log_q_lwe": LOGQ_LWE}
        rows = [
            ("ckks_to_fhew", sw, r["ckks_to_fhew"], f"max diff {r['ckks_to_fhew']['max_diff_units']} units of "
             f"2^-{r['ckks_to_fhew']['fraction_bits']}, exact {r['ckks_to_fhew']['exact_fraction']:.2f}"),
            ("fhew_to_ckks", sw, r["fhew_to_ckks"], f"max err {r['fhew_to_ckks']['max_abs_err_units']:.2e} units "
             f"(p {r['fhew_to_ckks']['plaintext_modulus']})"),
            ("compare", sw, r["compare"], f"{r['compare']['num_correct']}/{n} right, max err "
             f"{r['compare']['max_abs_err']:.2e}, resolution {r['compare']['resolution']:.1e}"),
            ("max_argmax", am, r["max_argmax"], f"argmax {'ok' if r['max_argmax']['argmax_correct'] else 'WRONG'}, "
             f"max err {r['max_argmax']['max_abs_err']:.2e}"),
        ]
        for name, ctx, op, note in rows:
            t = op["timing"]
            out.append({"suite": SUITE, "name": name,
                        "params": {**common, "N": ctx["ckks"]["N"], "log_q": ctx["ckks"]["log_q"],
                                   "mult_depth": ctx["ckks"]["mult_depth"]},
                        "median_ms": t["median_ms"], "min_ms": t["min_ms"], "max_ms": t["max_ms"], "reps": t["reps"],
                        "device": "cpu", "backend": "openfhe", "threads": threads, "peer": peer, "note": note})
        for cname, ctx in (("switch", sw), ("argmax", am)):
            out.append({"suite": SUITE, "name": f"keygen_{cname}_context",
                        "params": {**common, "N": ctx["ckks"]["N"], "log_q": ctx["ckks"]["log_q"],
                                   "mult_depth": ctx["ckks"]["mult_depth"]},
                        "median_ms": ctx["keygen_s"]["total_s"] * 1e3, "min_ms": None, "max_ms": None, "reps": 1,
                        "device": "cpu", "backend": "openfhe", "threads": threads, "peer": peer,
                        "note": f"eval keys {ctx['key_bytes']['total_eval_keys'] / 2**20:.0f} MiB serialized"})
    return out


def _table(rec: dict) -> str:
    lines = [f"OpenFHE {rec['openfhe_version']} scheme switching, threads {rec['threads']}, "
             f"interval {rec['interval']}, reps {rec['reps']}",
             f"{'slots':>5} {'operation':<24} {'median ms':>11} {'min ms':>11} {'max ms':>11}  note"]
    for r in rec["records"]:
        mn = f"{r['min_ms']:11.1f}" if r["min_ms"] is not None else f"{'':>11}"
        mx = f"{r['max_ms']:11.1f}" if r["max_ms"] is not None else f"{'':>11}"
        lines.append(f"{r['params']['slots']:>5} {r['name']:<24} {r['median_ms']:11.1f} {mn} {mx}  {r['note']}")
    for n, r in rec["results"].items():
        for cname in ("switch_context", "argmax_context"):
            c = r[cname]
            kb = c["key_bytes"]
            mib = {k: (v / 2**20 if isinstance(v, int) and not k.startswith("num") else v) for k, v in kb.items()}
            lines.append(f"{n:>5} {cname}: N {c['ckks']['N']}, log Q {c['ckks']['log_q']}, depth "
                         f"{c['ckks']['mult_depth']}, dnum {c['ckks']['dnum']}; keygen "
                         f"{c['keygen_s']['total_s']:.1f} s; MiB: rot {mib['ckks_rotation_keys']:.0f} "
                         f"({kb['num_rotation_keys']} keys), relin "
                         f"{mib['ckks_relin_key']:.1f}, FHEW->CKKS {mib['fhew_to_ckks_key']:.1f}, "
                         f"CKKS->FHEW (in ctx) {mib.get('ckks_to_fhew_key_in_context', float('nan')):.1f}, FHEW BT "
                         f"{mib['fhew_bootstrap_keys']:.0f}")
    return "\n".join(lines)


def _parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--slots", default="8,64", help="comma-separated powers of two (default 8,64)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--warmup-max-s", type=float, default=5.0,
                   help="a first call faster than this is an untimed warm-up; a slower one is the first timed rep")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--interval", default="-4,4",
                   help="lo,hi of the uniform inputs (default -4,4; write --interval=-2,2 when lo is negative)")
    p.add_argument("--quick", action="store_true", help="the smallest slot count only")
    p.add_argument("--json", default=None, help="also write the JSON object here")
    a = p.parse_args(argv)
    a.slots = sorted({int(s) for s in str(a.slots).split(",") if s.strip()})
    if a.quick:
        a.slots = a.slots[:1]
    lo, hi = (float(v) for v in a.interval.split(","))
    if not lo < hi:
        p.error("--interval needs lo < hi")
    a.interval = (lo, hi)
    if a.threads < 1:
        p.error("--threads must be >= 1")
    return a


def main(argv: list[str] | None = None) -> int:
    a = _parse(argv)
    cpus = _pin(a.threads)  # before openfhe (and its OpenMP runtime) is loaded
    # OpenFHE prints its notices on the C++ stdout: send them to stderr, keep stdout for the JSON object
    sys.stdout.flush()
    out_fd = os.dup(1)
    os.dup2(2, 1)
    try:
        import importlib.metadata

        import numpy as np
        import openfhe as of

        wheel = importlib.metadata.version("openfhe")
        peer = f"openfhe {wheel}"
        rec = {"suite": SUITE, "peer": peer, "openfhe_version": getattr(of, "__version__", None) or wheel,
               "openfhe_wheel": wheel, "native_int": of.get_native_int(), "threads": a.threads, "cpus": cpus,
               "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
               "malloc_arena_max": os.environ.get("MALLOC_ARENA_MAX"), "seed": a.seed, "interval": list(a.interval),
               "reps": a.reps, "warmup_max_s": a.warmup_max_s, "quick": a.quick, "slots": a.slots,
               "loadavg_start": _loadavg()}
        t0 = time.perf_counter()
        results = {str(n): bench_slots(of, np, n, a) for n in a.slots}
        rec["wall_s"] = time.perf_counter() - t0
        rec["loadavg_end"] = _loadavg()
        rec["memory"] = _rss_mb()
        rec["records"] = _records(results, peer, a.threads)
        rec["results"] = results
        sys.stdout.flush()
        try:  # and whatever the C library still buffers for fd 1
            import ctypes

            ctypes.CDLL(None).fflush(None)
        except (OSError, AttributeError):
            pass
    finally:
        os.dup2(out_fd, 1)
        os.close(out_fd)
    text = json.dumps(rec)
    print(text, flush=True)
    print(_table(rec), file=sys.stderr)
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
