"""CKKS <-> TFHE scheme switching (issue 29): the switches and the functions on CKKS vectors, against OpenFHE's.

    python benchmarks/bench_switch.py [--quick] [--ckks N16_BOOT_L3] [--tfhe P4,P6] [--slots 8,64]
                                      [--threads 1] [--reps 3] [--interval -4,4] [--no-peer] [--json PATH]

Ours (crossfhe.api.switch.SchemeSwitch): per TFHE preset, the switching keys of a bootstrappable CKKS preset and that
TFHE preset (made together: time and bytes per part), then per slot count n, on n values uniform in the interval:
``to_tfhe`` (CKKS -> TFHE integers, bits = P - 1), ``to_ckks`` (those integers back), ``relu``, ``greater`` (x > y,
two vectors), ``max`` and ``argmax``; each timed as the median of ``--reps`` calls after one warm-up (compiles), with
its largest error against NumPy on the same quantized values in output steps and whether rounding gives exactly
NumPy's answer. The values lie within 0.4 of a grid step of a grid point (of x and of x - y): a value nearer a
rounding boundary may round either way under the switch's noise, which is the switch's contract, not an error.
The model's failure probability per value (log2) is reported with each preset.

Peer: OpenFHE's scheme switching (CKKS <-> FHEW: EvalCKKStoFHEW, EvalFHEWtoCKKS, EvalCompareSchemeSwitching,
EvalMaxSchemeSwitching) in its own process right after ours (benchmarks/openfhe_switch_peer.py, the
``.venv-openfhe`` environment), same n, interval, seed and threads. ``--quick``: insecure toy sizes (CKKS N 2^11,
TFHE N_t 1024), n = 8, no peer: a smoke test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from crossfhe.cli.benchutil import fmt, load_average, pin_threads, write_json  # noqa: E402


def _parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ckks", default="N16_BOOT_L3", help="a bootstrappable CKKS preset (crossfhe.presets.ckks)")
    p.add_argument("--tfhe", default="P4,P6", help="comma-separated TFHE presets")
    p.add_argument("--slots", default="8,64", help="comma-separated vector lengths (powers of two)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--interval", default="-4,4")
    p.add_argument("--seed", type=int, default=29)
    p.add_argument("--ops", default="to_tfhe,to_ckks,relu,greater,max,argmax")
    p.add_argument("--quick", action="store_true", help="insecure toy sizes, n = 8, no peer")
    p.add_argument("--no-peer", action="store_true", help="skip OpenFHE")
    p.add_argument("--json", default=str(HERE / "results" / "switch.json"))
    return p.parse_args(argv)


def _done(out):
    """``out`` once its arrays are computed (JAX dispatches asynchronously)."""
    import jax

    jax.block_until_ready(out.ct)
    return out


def _median(fn, reps: int) -> tuple[object, float, float]:
    t0 = time.perf_counter()
    out = _done(fn())
    first = time.perf_counter() - t0
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = _done(fn())
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times) * 1e3, first


def ours(args) -> list[dict]:
    import numpy as np

    from crossfhe import testing
    from crossfhe.api.ckks import CKKSContext
    from crossfhe.api.switch import SchemeSwitch
    from crossfhe.api.tfhe import TFHEContext
    from crossfhe.ckks import presets as cp
    from crossfhe.tfhe import presets as tp

    lo, hi = (float(v) for v in args.interval.split(","))
    slots = [int(s) for s in args.slots.split(",")]
    ops_wanted = args.ops.split(",")
    if args.quick:
        ckks_p, tfhe_ps = testing.INSECURE_CKKS_BOOT_N11, [("INSECURE_TFHE_P4", testing.INSECURE_TFHE_P4)]
    else:
        ckks_p = cp.BOOTSTRAP[args.ckks]
        tfhe_ps = [(n, tp.PRESETS[n]) for n in args.tfhe.split(",")]
    recs = []
    t0 = time.perf_counter()
    ck = CKKSContext.create(ckks_p, insecure=args.quick, progress=None)
    ckks_keygen = time.perf_counter() - t0
    rng = np.random.default_rng(args.seed)
    for name, tparams in tfhe_ps:
        t0 = time.perf_counter()
        tf = TFHEContext.create(tparams, insecure=args.quick, progress=None)
        tfhe_keygen = time.perf_counter() - t0
        t0 = time.perf_counter()
        sw = SchemeSwitch.create(ck, tf, slots=max(slots), progress=None)
        keygen = time.perf_counter() - t0
        base = dict(ckks=args.ckks if not args.quick else "INSECURE_CKKS_BOOT_N11", tfhe=name, threads=args.threads,
                    impl="crossfhe")
        recs.append(dict(base, op="keygen", switch_keygen_s=keygen, ckks_keygen_s=ckks_keygen,
                         tfhe_keygen_s=tfhe_keygen, key_bytes=sw.sizes(), log2_p_fail=sw.log2_p_fail(),
                         load_avg=load_average()))
        qz = sw.quantizer((lo, hi), None)
        for n in slots:
            # values at most 0.4 of a step from a grid point: rounding is then unambiguous under the switch's noise
            qd = sw.quantizer((lo - hi, hi - lo), None)
            v = qz.dequantize(rng.integers(0, 2**qz.bits, n)) + rng.uniform(-0.4, 0.4, n) * qz.step
            w = v - qd.dequantize(rng.integers(0, 2**qd.bits, n)) - rng.uniform(-0.4, 0.4, n) * qd.step
            x, y = ck.encrypt(v), ck.encrypt(w)
            q = qz.dequantize(qz.quantize(v))
            d = qd.dequantize(qd.quantize(v - w))
            ints = sw.to_tfhe(x, (lo, hi))
            cases = {  # the calls bind this iteration's values (defaults)
                "to_tfhe": (lambda s=sw, a=x: s.to_tfhe(a, (lo, hi)), qz.quantize(v), 1.0, True),
                "to_ckks": (lambda s=sw, i=ints: s.to_ckks(i), qz.quantize(v), 1.0, False),
                "relu": (lambda s=sw, a=x: s.relu(a, (lo, hi)), np.maximum(q, 0), qz.step / 2, False),
                "greater": (lambda s=sw, a=x, b=y: s.greater(a, b, (lo - hi, hi - lo)), (d > 0) * 1.0, 1.0, False),
                "max": (lambda s=sw, a=x: s.max(a, (lo, hi)), np.array([q.max()]) - lo, qz.step, False),
                "argmax": (lambda s=sw, a=x: s.argmax(a, (lo, hi)), (q == q.max()) * 1.0, 1.0, False),
            }
            for op in ops_wanted:
                fn, ref, step, is_tfhe = cases[op]
                out, ms, first = _median(fn, args.reps)
                got = np.asarray(tf.decrypt(out) if is_tfhe else ck.decrypt(out), dtype=np.float64)
                if op == "max":  # on the input grid: steps from lo
                    got = got - lo
                err = float(np.max(np.abs(got - ref)) / step)
                exact = bool(np.array_equal(np.rint(got / step), np.rint(np.asarray(ref) / step)))
                recs.append(dict(base, op=op, n=n, median_ms=ms, first_call_s=first, reps=args.reps,
                                 max_error_steps=err, exact_after_rounding=exact, load_avg=load_average()))
                print(f"{name} n={n} {op}: {ms:.1f} ms, error {err:.4f} steps, exact {exact}", file=sys.stderr)
    return recs


def peer(args) -> list[dict]:
    exe = ROOT / ".venv-openfhe" / "bin" / "python"
    script = HERE / "openfhe_switch_peer.py"
    if args.no_peer or args.quick or not exe.exists() or not script.exists():
        return []
    out = HERE / "results" / "switch_openfhe.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [str(exe), str(script), "--slots", args.slots, "--threads", str(args.threads), "--reps", str(args.reps),
           f"--interval={args.interval}", "--seed", str(args.seed), "--json", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        print(f"OpenFHE peer failed ({r.returncode}): {r.stderr[-2000:]}", file=sys.stderr)
        return []
    data = json.loads(out.read_text())
    recs = []
    for r in data.get("records", []):
        recs.append(dict(r, impl="openfhe", op=r["name"], n=r.get("params", {}).get("slots"),
                         peer=data.get("peer"), peer_memory=data.get("memory")))
    return recs


def _table(recs: list[dict]) -> None:
    print(f"{'impl':9} {'tfhe':6} {'op':8} {'n':>4} {'ms':>10} {'err (steps)':>12} exact", file=sys.stderr)
    for r in recs:
        if r.get("op") == "keygen" or "median_ms" not in r:
            continue
        print(f"{r.get('impl', 'openfhe'):9} {str(r.get('tfhe', '')):6} {r['op']:8} {r.get('n', 0):>4} "
              f"{fmt(r['median_ms'], 10)} {fmt(r.get('max_error_steps'), 12, '.4f')} "
              f"{r.get('exact_after_rounding', '')}", file=sys.stderr)


def main(argv=None) -> int:
    args = _parse(argv)
    pin_threads(args.threads)
    if args.quick:
        args.slots = "8"
    recs = ours(args)
    recs += peer(args)
    write_json(recs, args.json)
    print(json.dumps(recs, indent=1, default=str))
    _table(recs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
