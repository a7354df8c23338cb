"""Encrypted integers (issue 48): each radix operator at 8, 16, 32 and 64 bits, one integer at a time, against
TFHE-rs's high-level ``FheUint`` in the same run.

    python benchmarks/bench_integers.py [--params P4_128] [--widths 8,16,32,64] [--ops add,mul,...] [--reps 5]
                                        [--threads 1,2] [--no-peer] [--json PATH] [--quick]

crossfhe's side: :mod:`crossfhe.tfhe.integer` and :mod:`crossfhe.tfhe.integer_ops` on a secure preset (default
P4_128: blocks of 2 message and 2 carry bits, the layout of TFHE-rs's default ``FheUint`` parameters).
TFHE-rs's side: ``run_integers`` of ``benchmarks/tfhers.py``, the executable ``integers`` of the Rust harness
``benchmarks/tfhers_peer`` (built with cargo on first use; skipped, with a message, under --no-peer or where cargo
or the build is missing): ``FheUint8/16/32/64`` under ``ConfigBuilder::default()``, which tfhe 1.8.2 resolves to
``PARAM_MESSAGE_2_CARRY_2_KS_PBS_TUNIFORM_2M128`` (KS-PBS, p-fail 2^-128; ``peer_params`` in the JSON), and its
operators ``a + b``, ``a * b``, ``a.lt(&b)``, ``a.eq(&b)``, ``a.min(&b)``, ``a & b``, ``a << 3u32`` and
``cond.if_then_else(&a, &b)``.

For each thread count T of --threads (default 1,2) both sides run, each in a process of its own, pinned to the
same T CPUs (the last T this process may use, the choice of ``crossfhe.cli.benchutil.pin_threads``): TFHE-rs
first, with a rayon pool of T threads, then crossfhe in a fresh Python process (JAX sizes its thread pool by the
CPUs it may use when it starts). The two sides' keys are never in memory together.

Per thread count, operator and width, for each side: the median latency of ``--reps`` calls after one untimed
call (which compiles crossfhe's program), the bootstraps one integer costs (crossfhe:
:func:`crossfhe.tfhe.integer.cost`, with its key switches and sequential ``pbs_many`` calls; TFHE-rs: its
``pbs-stats`` counter over the untimed call), and whether the results decrypted to the clear ones (crossfhe checks
its untimed call's, TFHE-rs every call's); ``ratio`` = crossfhe's median / TFHE-rs's.
Operands are clean (fresh encryptions) with the top bit of ``a`` set, so that every carry runs through; each
side draws its own (both sides' operators take the same time whatever the values). ``add`` includes propagating
its carries, as TFHE-rs's ``+`` does; the select's condition is the encrypted comparison ``b < a`` on both sides.
Prints one JSON object (with the CPU's ``lscpu`` model name and the load average before and after each side) and
a table; exits with status 1 if any result of either side was wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # tfhers.py, also when run through `crossfhe bench integers`

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
    """crossfhe's side, in this process (pinned beforehand): key generation, then every operator and width."""
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
            print(f"# crossfhe {bits:>2} bits {op:<7} {rows[-1]['ms']:9.1f} ms", file=sys.stderr, flush=True)
        jax.clear_caches()
    return {"params": args.params, "keygen_s": keygen_s, "rows": rows}


def run_ours(args, threads: int, cpus: list[int]) -> dict | None:
    """crossfhe's side on ``threads`` CPUs: this script again (``--worker``) in a process pinned to ``cpus``; its
    result, or None with a message."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--params", args.params, "--widths",
           args.widths, "--ops", args.ops, "--reps", str(args.reps), "--threads", str(threads)]
    pin = (lambda: os.sched_setaffinity(0, set(cpus))) if cpus and hasattr(os, "sched_setaffinity") else None
    r = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, preexec_fn=pin)
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        print(f"# crossfhe on {threads} threads failed (exit {r.returncode}); stdout: {r.stdout[-500:]!r}",
              file=sys.stderr)
        return None


def _merge(threads: int, ours: dict | None, peer: list[dict], widths: list[int], ops_: list[str]) -> list[dict]:
    """One row per (width, operator) of both sides; a side that did not run leaves its fields None."""
    mine = {(r["bits"], r["op"]): r for r in (ours or {}).get("rows", [])}
    theirs = {(r["bits"], r["op"]): r for r in peer}
    rows = []
    for bits in widths:
        for op in ops_:
            o, t = mine.get((bits, op), {}), theirs.get((bits, op), {})
            ms, pms = o.get("ms"), t.get("ms")
            rows.append({"threads": threads, "bits": bits, "op": op,
                         "ms": ms, "ms_all": o.get("ms_all"), "first_call_s": o.get("first_call_s"),
                         "pbs": o.get("pbs"), "keyswitches": o.get("keyswitches"), "calls": o.get("calls"),
                         "correct": o.get("correct"),
                         "peer_ms": pms, "peer_ms_all": t.get("ms_all"), "peer_warmup_ms": t.get("warmup_ms"),
                         "peer_pbs": t.get("pbs"), "peer_correct": t.get("correct"),
                         "ratio": ms / pms if ms is not None and pms else None})
    return rows


def print_table(out: dict) -> None:
    from crossfhe.cli.benchutil import fmt

    head = (f"{'thr':>3} {'bits':>4} {'op':<7}{'ours ms':>10}{'PBS':>6}{'KS':>6}{'calls':>6}"
            f"{'TFHE-rs ms':>12}{'PBS':>6}{'ratio':>7}  correct (ours/TFHE-rs)")
    print(head, file=sys.stderr)
    print("-" * len(head), file=sys.stderr)
    for r in out["rows"]:
        ok = "/".join("-" if v is None else str(v) for v in (r["correct"], r["peer_correct"]))
        print(f"{r['threads']:>3} {r['bits']:>4} {r['op']:<7}{fmt(r['ms'], 10)}{fmt(r['pbs'], 6, 'd')}"
              f"{fmt(r['keyswitches'], 6, 'd')}{fmt(r['calls'], 6, 'd')}{fmt(r['peer_ms'], 12)}"
              f"{fmt(r['peer_pbs'], 6, 'd')}{fmt(r['ratio'], 7, '.2f')}  {ok}", file=sys.stderr)
    for run_ in out["runs"]:
        pk = run_.get("peer_keys") or {}
        peer_kg = (f"; TFHE-rs keys {pk['client_keygen_ms'] / 1e3 + pk['server_keygen_ms'] / 1e3:.1f} s, server key "
                   f"{pk['server_key_bytes'] / 1e6:.0f} MB") if pk.get("server_keygen_ms") is not None else ""
        kg = f"{run_['keygen_s']:.1f} s" if run_.get("keygen_s") is not None else "-"
        print(f"threads {run_['threads']} (CPUs {run_['cpus']}): crossfhe keys {kg}{peer_kg}; load "
              f"{run_['load']}", file=sys.stderr)
    print(f"cpu {out['cpu']}; crossfhe {out['params']}; peer: {out['peer'] or out['peer_status']}"
          + (f" ({out['peer_params']})" if out.get("peer_params") else ""), file=sys.stderr)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--params", default="P4_128")
    p.add_argument("--widths", default="8,16,32,64")
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts, each a run of both sides")
    p.add_argument("--no-peer", action="store_true", help="skip TFHE-rs")
    p.add_argument("--json")
    p.add_argument("--quick", action="store_true", help="8 and 16 bits, 2 repetitions")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)  # crossfhe's side of one thread count
    args = p.parse_args(argv)
    if args.quick:
        args.widths, args.reps = "8,16", 2
    bad = set(args.ops.split(",")) - set(OPS)
    if bad:
        p.error(f"unknown operators {sorted(bad)}; known: {','.join(OPS)}")
    try:
        thread_counts = [int(t) for t in args.threads.split(",") if t.strip()]
    except ValueError:
        p.error(f"--threads {args.threads!r}: comma-separated integers")
    available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if not thread_counts or any(not 1 <= t <= available for t in thread_counts):
        p.error(f"--threads {args.threads!r}: each from 1 to the {available} CPUs this process may use")

    from crossfhe.cli.benchutil import cpu_name, load_average, pin_threads

    if args.worker:
        pin_threads(thread_counts[0])
        print(json.dumps(run(args)))
        return 0

    import tfhers

    widths, ops_ = [int(w) for w in args.widths.split(",")], args.ops.split(",")
    exe, peer_status = None, "skipped: --no-peer"
    if not args.no_peer:
        exe = tfhers.build(exe=tfhers.INTEGERS_EXE)
        peer_status = "ran" if exe else "skipped: no cargo or the build failed (see the message above)"
    out = {"suite": "integers", "cpu": cpu_name(), "cpus_available": available, "params": args.params,
           "widths": widths, "ops": ops_, "reps": args.reps, "threads": thread_counts, "peer": None,
           "peer_status": peer_status, "peer_params": None, "load": load_average(), "runs": [], "rows": []}
    for t in thread_counts:
        cpus = tfhers.pinned_cpus(t)
        load = {"before": load_average()}
        peer = []
        if exe:
            t0 = time.perf_counter()
            peer = tfhers.run_integers(widths, ops_, args.reps, t, cpus=cpus, exe=exe)
            load["after_peer"] = load_average()
            print(f"# tfhe-rs on {t} threads: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
            if peer:
                out.update(peer=peer[0]["keys"]["peer"], peer_params=peer[0]["keys"]["param_name"])
            else:
                out["peer_status"] = "failed (see the message above)"
        t0 = time.perf_counter()
        ours = run_ours(args, t, cpus)
        load["after_ours"] = load_average()
        print(f"# crossfhe on {t} threads: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
        out["runs"].append({"threads": t, "cpus": cpus, "keygen_s": (ours or {}).get("keygen_s"),
                            "peer_keys": peer[0]["keys"] if peer else None, "load": load})
        out["rows"] += _merge(t, ours, peer, widths, ops_)
    print(json.dumps(out))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    print_table(out)
    wrong = [r for r in out["rows"] if r["correct"] is not True or r["peer_correct"] is False]
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
