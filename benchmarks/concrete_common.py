"""What the concrete-python peers share (benchmarks/concrete_python_peer.py for our integer networks,
benchmarks/concrete_graph_peer.py for any TFHE graph of ours): the failure probability's spelling, thread
pinning, Concrete's configuration, its circuit statistics, key generation with the keys' sizes, and the timed
runs, one sample at a time, checked against our outputs.

Imports only the standard library and NumPy at module level (the peers run in ``.venv-concrete``; our tests import
them for their NumPy half); ``concrete`` is imported inside :func:`configuration`.
"""

from __future__ import annotations

import os
import resource
import statistics
import sys
import time

import numpy as np

P_ERROR_TFHE_RS = 2.0**-64  # TFHE-rs's default failure probability per PBS, the bound of our presets


def log(*a) -> None:
    print(*a, file=sys.stderr, flush=True)


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else []


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def parse_probability(text: str) -> float:
    """``tfhe-rs`` (2^-64), ``2^-64``, ``2**-64`` or a float."""
    t = text.strip().lower()
    if t in ("tfhe-rs", "tfhers", "tfhe_rs"):
        return P_ERROR_TFHE_RS
    for op in ("**", "^"):
        if op in t:
            base, exp = t.split(op, 1)
            return float(base) ** float(exp)
    return float(t)


def set_threads(threads: int) -> dict:
    """Thread-count variables (set before concrete is imported) and affinity to ``threads`` of this process's CPUs
    (the first ones it may use: under ``taskset -c 1`` that is CPU 1)."""
    for var in ("OMP_NUM_THREADS", "RAYON_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    cpus = None
    if hasattr(os, "sched_setaffinity"):
        allowed = sorted(os.sched_getaffinity(0))
        try:
            os.sched_setaffinity(0, set(allowed[:threads]))
        except OSError:
            pass
        cpus = sorted(os.sched_getaffinity(0))
    return {"threads": threads, "cpus": cpus}


def ms(ts: list[float]) -> dict:
    """Median, min and max of ``ts`` (seconds) in milliseconds."""
    if not ts:
        return {"median": None, "min": None, "max": None}
    return {"median": 1e3 * statistics.median(ts), "min": 1e3 * min(ts), "max": 1e3 * max(ts)}


def jsonable(v):
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


def configuration(p_error: float, threads: int, compress: bool):
    """``fhe.Configuration``: ``p_error`` per PBS (no global bound), loop parallelization only with more than one
    thread, no dataflow or auto parallelization, evaluation keys compressed where ``compress``."""
    from concrete import fhe

    return fhe.Configuration(p_error=p_error, global_p_error=None, show_progress=False,
                             loop_parallelize=threads > 1, dataflow_parallelize=False, auto_parallelize=False,
                             compress_evaluation_keys=compress)


def statistics_of(circuit) -> dict:
    """Concrete's statistics of a compiled ``circuit``: failure probabilities, PBS and key-switch counts (in all and
    per parameter set), complexity, the sizes of inputs and outputs, and the operation counts it reports."""
    st = circuit.statistics
    info = {
        "p_error": float(circuit.p_error), "global_p_error": float(circuit.global_p_error),
        "pbs_count": int(st["programmable_bootstrap_count"]), "ks_count": int(st["key_switch_count"]),
        "packing_ks_count": int(st.get("packing_key_switch_count", 0)), "complexity": float(st["complexity"]),
        "pbs_per_parameter": jsonable(st["programmable_bootstrap_count_per_parameter"]),
        "ks_per_parameter": jsonable(st["key_switch_count_per_parameter"]),
        "size_of_inputs": int(st["size_of_inputs"]), "size_of_outputs": int(st["size_of_outputs"]),
    }
    for k in ("clear_addition_count", "encrypted_addition_count", "clear_multiplication_count",
              "encrypted_negation_count"):
        if k in st:
            info[k] = int(st[k])
    return info


def keygen(circuit, compress: bool) -> tuple[float, dict]:
    """(seconds, sizes): ``circuit.keygen(force=True)`` timed, and the evaluation keys' serialized bytes with
    Concrete's bootstrap / key-switch / secret key sizes (None and the error where this version lacks one)."""
    t0 = time.perf_counter()
    circuit.keygen(force=True)
    seconds = time.perf_counter() - t0
    keys = {"evaluation_keys_compressed": compress}
    for name, get in (("evaluation_keys_bytes", lambda: len(circuit.client.evaluation_keys.serialize())),
                      ("bootstrap_keys_bytes", lambda: int(circuit.size_of_bootstrap_keys)),
                      ("keyswitch_keys_bytes", lambda: int(circuit.size_of_keyswitch_keys)),
                      ("secret_keys_bytes", lambda: int(circuit.size_of_secret_keys))):
        try:
            keys[name] = get()
        except Exception as e:  # report what this version offers
            keys[name] = None
            keys[f"{name}_error"] = f"{type(e).__name__}: {e}"
    return seconds, keys


def run_samples(circuit, q: np.ndarray, expected: np.ndarray, samples: int, warmup: int, label: str) -> dict:
    """``warmup`` untimed runs (the first loads the compiled library and touches the keys), then the first
    ``samples`` rows of ``q`` one at a time: encrypt, run, decrypt, each timed, the decrypted outputs (flattened)
    compared with ``expected``'s row. The record's fields: ``samples``, ``warmup``, ``exact``, ``mismatches``
    (output values that differ), ``mismatched_samples``, ``ms_per_sample`` (median end to end) and
    ``total_ms`` / ``encrypt_ms`` / ``run_ms`` / ``decrypt_ms`` (:func:`ms`)."""
    for i in range(warmup):
        circuit.decrypt(circuit.run(circuit.encrypt(q[i % len(q)])))
    n = min(samples, len(q))
    times: dict[str, list[float]] = {"encrypt": [], "run": [], "decrypt": [], "total": []}
    mismatches, bad = 0, []
    for i in range(n):
        t0 = time.perf_counter()
        enc = circuit.encrypt(q[i])
        t1 = time.perf_counter()
        res = circuit.run(enc)
        t2 = time.perf_counter()
        dec = circuit.decrypt(res)
        t3 = time.perf_counter()
        out = np.asarray(dec if isinstance(dec, tuple) else (dec,), dtype=np.int64).reshape(-1)
        for k, v in (("encrypt", t1 - t0), ("run", t2 - t1), ("decrypt", t3 - t2), ("total", t3 - t0)):
            times[k].append(v)
        diff = int(np.count_nonzero(out != np.asarray(expected[i]).reshape(-1)))
        mismatches += diff
        if diff:
            bad.append(i)
        log(f"{label}: sample {i}: {1e3 * (t3 - t0):.0f} ms ({'exact' if not diff else f'{diff} differ'})")
    return dict(samples=n, warmup=warmup, exact=mismatches == 0, mismatches=mismatches, mismatched_samples=bad,
                ms_per_sample=ms(times["total"])["median"], total_ms=ms(times["total"]),
                encrypt_ms=ms(times["encrypt"]), run_ms=ms(times["run"]), decrypt_ms=ms(times["decrypt"]))


def compile_and_run(function, data: list, p_error: float, threads: int, compress: bool, q: np.ndarray,
                    expected: np.ndarray, samples: int, warmup: int, label: str, info) -> dict:
    """``function`` (one encrypted argument ``x``) compiled on the inputset ``data`` (:func:`configuration`), its
    keys made (:func:`keygen`) and run on ``q`` (:func:`run_samples`), the circuit cleaned up afterwards.
    ``info(circuit)``: what the peer records of the compiled circuit (with ``pbs_count``, ``tlu_input_bits``,
    ``max_encrypted_bits`` and ``p_error``). The record's fields: ``inputset_size``, ``compile_s``, ``circuit``,
    ``keygen_s``, ``keys``, the runs', ``load_end`` and ``peak_rss_mib``."""
    from concrete import fhe

    rec: dict = {"inputset_size": len(data)}
    t0 = time.perf_counter()
    circuit = fhe.Compiler(function, {"x": "encrypted"}).compile(data, configuration(p_error, threads, compress))
    rec["compile_s"] = time.perf_counter() - t0
    try:
        rec["circuit"] = ci = info(circuit)
        rec["keygen_s"], rec["keys"] = keygen(circuit, compress)
        log(f"{label}: compiled in {rec['compile_s']:.1f} s ({ci['pbs_count']} PBS, TLU inputs "
            f"{sorted(set(ci['tlu_input_bits']))} bits, max {ci['max_encrypted_bits']}, p_error "
            f"{ci['p_error']:.2e}), keys in {rec['keygen_s']:.1f} s")
        rec.update(run_samples(circuit, q, expected, samples, warmup, label))
    finally:
        circuit.cleanup()
    rec["load_end"] = load_average()
    rec["peak_rss_mib"] = peak_rss_mib()
    return rec
