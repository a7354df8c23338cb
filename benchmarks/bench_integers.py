"""Encrypted integers (issue 48): each radix operator at 8, 16, 32 and 64 bits, one integer at a time.

    python benchmarks/bench_integers.py [--params P4_128] [--widths 8,16,32,64] [--ops add,mul,...] [--reps 5]
                                        [--threads 1] [--json PATH] [--quick]

crossfhe's side only so far: :mod:`crossfhe.tfhe.integer` and :mod:`crossfhe.tfhe.integer_ops` on a secure preset
(default P4_128: blocks of 2 message and 2 carry bits, the layout of TFHE-rs's default ``FheUint`` parameters),
pinned to ``--threads`` CPUs. TFHE-rs's high-level API in the same run is the issue's requirement 4 and not here
yet: its Rust harness (``benchmarks/tfhers_peer``) builds the shortint layer only; the table says so.

Per operator and width: the median latency of ``--reps`` calls after one untimed call (which compiles its program),
the bootstraps, key switches and sequential ``pbs_many`` calls one integer costs (:func:`crossfhe.tfhe.integer.cost`),
and whether the result decrypted to Python's. Operands are clean (fresh encryptions); ``add`` includes propagating
its carries, as TFHE-rs's ``+`` does. Prints one JSON object and a table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

OPS = ("add", "mul", "lt", "eq", "min", "and", "shl3", "select")


def _ops(integer, io, x, y, c):
    """Each operator as a function of the server key (the real one, or the counting stand-in of ``integer.cost``)."""
    return {
        "add": lambda k: integer.propagate_carries(k, integer.add(k, x, y)),
        "mul": lambda k: integer.propagate_carries(k, io.mul(k, x, y)),
        "lt": lambda k: integer.lt(k, x, y),
        "eq": lambda k: integer.eq(k, x, y),
        "min": lambda k: integer.propagate_carries(k, io.minimum(k, x, y)),
        "and": lambda k: io.bitand(k, x, y),
        "shl3": lambda k: io.shl(k, x, 3),
        "select": lambda k: integer.propagate_carries(k, io.select(k, c, x, y)),
    }


def _reference(op: str, a: int, b: int, bits: int, c: int) -> int:
    top = (1 << bits) - 1
    return {"add": (a + b) & top, "mul": (a * b) & top, "lt": int(a < b), "eq": int(a == b), "min": min(a, b),
            "and": a & b, "shl3": (a << 3) & top, "select": a if c else b}[op]


def run(args) -> dict:
    import jax

    from crossfhe.tfhe import integer, ops, presets
    from crossfhe.tfhe import integer_ops as io

    params = presets.PRESETS[args.params]
    t0 = time.perf_counter()
    ck, sk = ops.keygen(params, None)
    keygen_s = time.perf_counter() - t0
    rng = np.random.default_rng(48)
    rows = []
    for bits in (int(w) for w in args.widths.split(",")):
        a, b = (int(v) for v in rng.integers(0, 2**min(bits, 62), 2, dtype=np.uint64))
        a |= 1 << (bits - 1)  # the top block set: every carry runs through
        x = integer.encrypt(ck, np.array([a], dtype=object), bits=bits)
        y = integer.encrypt(ck, np.array([b], dtype=object), bits=bits)
        cbit, c = integer.lt(sk, y, x), int(b < a)  # the select's condition
        for op in args.ops.split(","):
            fun = _ops(integer, io, x, y, cbit)[op]
            t = time.perf_counter()
            out = fun(sk)
            jax.block_until_ready(out)
            first = time.perf_counter() - t
            times = []
            for _ in range(args.reps):
                t = time.perf_counter()
                jax.block_until_ready(fun(sk))
                times.append(time.perf_counter() - t)
            got = (int(ops.decrypt(ck, out).reshape(-1)[0]) if not isinstance(out, integer.RadixInteger)
                   else int(integer.decrypt(ck, out)[0]))
            cost = integer.cost(lambda k, *_, fun=fun: fun(k), sk, x, y)
            rows.append({"bits": bits, "op": op, "ms": 1e3 * statistics.median(times),
                         "ms_all": [1e3 * v for v in times],
                         "first_call_s": first, "pbs": cost.pbs, "keyswitches": cost.keyswitches, "calls": cost.calls,
                         "correct": got == _reference(op, a, b, bits, c)})
            print(f"# {bits:>2} bits {op:<7} {rows[-1]['ms']:9.1f} ms", file=sys.stderr, flush=True)
        jax.clear_caches()
    return {"params": args.params, "keygen_s": keygen_s, "rows": rows}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--params", default="P4_128")
    p.add_argument("--widths", default="8,16,32,64")
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json")
    p.add_argument("--quick", action="store_true", help="8 and 16 bits, 2 repetitions")
    args = p.parse_args(argv)
    if args.quick:
        args.widths, args.reps = "8,16", 2
    bad = set(args.ops.split(",")) - set(OPS)
    if bad:
        p.error(f"unknown operators {sorted(bad)}; known: {','.join(OPS)}")
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[: args.threads]))
    import subprocess

    cpu = next((ln.split(":", 1)[1].strip() for ln in subprocess.run(["lscpu"], capture_output=True, text=True)
                .stdout.splitlines() if ln.startswith("Model name")), "?")
    res = run(args)
    out = {"suite": "integers", "cpu": cpu, "threads": args.threads,
           "load": [round(v, 2) for v in os.getloadavg()], "tfhe_rs": "not run: the harness builds shortint only",
           **res}
    print(json.dumps(out))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    print(f"{'bits':>5} {'op':<8}{'ms':>10}{'PBS':>6}{'KS':>6}{'calls':>7}  correct", file=sys.stderr)
    for r in res["rows"]:
        print(f"{r['bits']:>5} {r['op']:<8}{r['ms']:>10.1f}{r['pbs']:>6}{r['keyswitches']:>6}{r['calls']:>7}  "
              f"{r['correct']}", file=sys.stderr)
    return 0 if all(r["correct"] for r in res["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
