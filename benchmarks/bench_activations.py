"""CKKS activations (crossfhe.ckks.activations): levels, plaintext and encrypted max error, latency.

    python benchmarks/bench_activations.py [--quick] [--presets N14_L7,N15_L19] [--threads 1] [--json PATH]

For each preset and each activation that fits its levels: one encryption of ``slots`` values uniform in the
activation's interval (ends and 0 included) at the top level, ``apply`` timed after a first (compiling) call
(median, min, max of at least 5 calls or 2 s), the plaintext max error (``activation.max_error``, float64 grid)
and the encrypted one (max over the slots of |decrypted - f(x)|, and against the plaintext polynomial). No peer:
the cost of an activation is its polynomial evaluation, which the ``ckks`` suite's operations bound.
``--quick``: a local insecure N 2^10 set with 12 levels (a smoke test, seconds). Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--presets", default="N14_L7")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="an insecure N 2^10 set with 12 levels")
    p.add_argument("--no-peer", action="store_true", help="accepted for the suites' common options; no peer here")
    p.add_argument("--json", default=str(HERE / "results" / "activations.json"))
    return p.parse_args(argv)


def _params(name: str):
    from crossfhe.ckks import presets
    from crossfhe.ckks.params import Params, ParamsLiteral

    if name == "TEST_N10_L12":
        return Params.from_literal(ParamsLiteral(log_n=10, levels=12, log_scale=30, dnum=3, insecure=True))
    return presets.SECURE[name]


def _activations():
    import numpy as np

    from crossfhe.ckks import activations as A

    return [A.square(), A.sigmoid(degree=7), A.sigmoid(degree=15), A.sigmoid(), A.relu_smooth(degree=12),
            A.relu_smooth(), A.relu(sign_degrees=(11,)), A.relu(sign_degrees=(11, 11)), A.relu(),
            A.from_function(np.tanh, (-3, 3), 15, name="tanh")]


def run(name: str, threads: int) -> list[dict]:
    from crossfhe.cli.benchutil import enable_compilation_cache, first_call, pin_threads, timeit

    pin_threads(threads)
    enable_compilation_cache()
    import jax
    import numpy as np

    from crossfhe.ckks import activations as A
    from crossfhe.ckks import ops

    p = _params(name)
    sk, ek = ops.keygen(p)
    rng = np.random.default_rng(0)
    records = []
    for act in _activations():
        if act.levels > p.user_levels:
            continue
        a, b = act.interval
        x = rng.uniform(a, b, p.slots)
        x[:3] = (a, 0.0, b)
        ct = ops.encrypt(ek, ops.encode(p, x))
        out, first_s = first_call(lambda act=act, ct=ct: A.apply(ct, act, ek))
        times = timeit(lambda act=act, ct=ct: A.apply(ct, act, ek), reps=5, min_seconds=2.0, max_seconds=20.0)
        got = ops.decode(ops.decrypt(sk, out)).real
        records.append({
            "suite": "activations", "name": act.name,
            "params": {"preset": name, "N": p.n, "levels": p.user_levels, "log_scale": p.log_scale,
                       "interval": list(act.interval), "degrees": list(act.degrees), "act_levels": act.levels},
            "median_ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3, "max_ms": max(times) * 1e3,
            "reps": len(times), "first_call_s": first_s, "device": jax.default_backend(),
            "backend": p.kernels.name if hasattr(p.kernels, "name") else str(p.kernels), "jax": jax.__version__,
            "threads": threads, "peer": None, "peer_median_ms": None, "ratio": None, "floor_ms": None,
            "plain_max_error": act.max_error,
            "enc_max_error": float(np.abs(got - act.function(x)).max()),
            "ckks_error_vs_polynomial": float(np.abs(got - act.approx(x)).max()),
            "note": "max errors over the slots; plain_max_error over a 2^16 + 1 point grid",
        })
    return records


def main(argv=None) -> int:
    args = _parse(argv)
    from crossfhe.cli.benchutil import fmt, load_average, write_json

    names = ["TEST_N10_L12"] if args.quick else args.presets.split(",")
    records = []
    t0 = time.perf_counter()
    for name in names:
        records += run(name, args.threads)
    head = (f"{'preset':>13} {'activation':>12} {'interval':>10} {'degrees':>12} {'lv':>3} {'plain err':>10} "
            f"{'enc err':>10} {'ckks err':>9} {'median ms':>10} {'first s':>8}")
    print(head)
    for r in records:
        q = r["params"]
        a, b = q["interval"]
        print(f"{q['preset']:>13} {r['name']:>12} {f'[{a:g},{b:g}]':>10} {str(tuple(q['degrees'])):>12} "
              f"{q['act_levels']:>3} {r['plain_max_error']:>10.2e} {r['enc_max_error']:>10.2e} "
              f"{r['ckks_error_vs_polynomial']:>9.1e} {fmt(r['median_ms'], 10)} {fmt(r['first_call_s'], 8)}")
    print(f"load {load_average()}, {time.perf_counter() - t0:.0f} s")
    write_json(records, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
