"""CKKS bootstrapping: latency of one bootstrap and its stages, key sizes, precision, against OpenFHE in the same run.

    python benchmarks/bench_bootstrap.py [--presets N16_BOOT_L3,N16_BOOT_L9] [--threads 1,2] [--reps 2]
                                         [--repeats 10] [--slots N] [--precise] [--other-keys] [--no-peer]
                                         [--openfhe-python PATH] [--peer-first] [--quick] [--heap kept|default]
                                         [--json PATH]

For each preset and thread count, ours runs in its own process (pinned to that many CPUs before JAX starts, as
``crossfhe.cli.benchutil.pin_threads`` does): key generation (seconds, MiB of bootstrapping keys), then a full-slot
bootstrap of 2^15 values uniform in [-1, 1] from level 0, timed ``reps`` times after a first (compiling) call, and
its stages (encapsulation + ModRaise, CoeffToSlot, EvalMod on both halves, SlotToCoeff) timed separately, then the
real-message path (``real=True``, what the front end runs for a vector of real values: EvalMod on one half) timed
the same number of times; ``--slots
n``: a sparse bootstrap of n values instead (replicated over the slots; n <= N/4 runs EvalMod once, on both halves
packed in one ciphertext), OpenFHE at the same n; precision = -log2 of the max slot error; with ``--repeats`` k, the
precision after each of k bootstraps in a row (the value goes back in each time: the drift curve); ``--precise``: the
two-iteration bootstrap (``precise=True``) timed the same way on both paths, its precision against the values and
against the input's own decryption (``N16_BOOT_HP`` is the preset made for it). Bootstrapping keys take the form
the preset names (``Params.compact_keys``: compact at N16_BOOT_L3, whole at the others); ``--other-keys`` (or
``--compact``, its old name): each preset and thread count once more in a process of its own with the other form
from key generation on; each record says which (``"keys": "compact"`` or ``"full"``). OpenFHE 1.6.1
(``openfhe_boot_peer.py``, its own interpreter) runs after ours (``--peer-first``: before; its record says which,
``"ran"``) at the same N, slots and levels left, level budget
(3, 3) like our CoeffToSlot and SlotToCoeff, ``FLEXIBLEAUTO`` with 59/60-bit moduli, at the same thread count.
OpenFHE refuses these chains at HEStd_128_classic at N 2^16 (its bootstrap is deeper for a uniform ternary secret:
log PQ 2491 for 9 levels left), so its runs use HEStd_NotSet: the comparison is ours at 128 bits against OpenFHE
with the security check off. ``--quick``: the N 2^11 test set against OpenFHE at N 2^12 (a smoke test, not a
comparison). ``--heap``: every worker, ours and OpenFHE's, runs with ``crossfhe.runtime.HEAP_ENV`` (glibc keeps and
reuses its heap, as the CLI and the other benchmarks set it; the default) or with glibc's defaults (``default``:
ours with one arena only, what this script did before 2026-11-30); each record says which (``allocator``).
Prints a table and writes JSON (``--json``).
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import openfhe_boot_peer  # noqa: E402

from crossfhe.runtime import HEAP_ENV  # noqa: E402


def _parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--presets", default="N16_BOOT_L3,N16_BOOT_L9")
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--repeats", type=int, default=0, help="bootstraps in a row for the drift curve (0: none)")
    p.add_argument("--no-peer", action="store_true")
    p.add_argument("--openfhe-python", default=None)
    p.add_argument("--quick", action="store_true", help="the N 2^11 test set (smoke test)")
    p.add_argument("--slots", type=int, default=None, help="a sparse bootstrap of this many slots (default N/2)")
    p.add_argument("--precise", action="store_true", help="also time the two-iteration bootstrap (precise=True)")
    p.add_argument("--other-keys", "--compact", dest="other_keys", action="store_true",
                   help="also run with the bootstrapping key form the preset does not name (compact or whole)")
    p.add_argument("--heap", choices=("kept", "default"), default="kept",
                   help="allocator settings of every worker, ours and the peer's: crossfhe.runtime.HEAP_ENV (kept, "
                        "what the CLI and the other benchmarks use) or glibc's defaults (ours with one arena only)")
    p.add_argument("--peer-first", action="store_true", help="run OpenFHE before ours at each thread count "
                   "(default: after), to see whether the order matters on a machine where fresh memory is costly")
    p.add_argument("--json", default=None)
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def _params(name: str):
    if name == "TEST_N11":
        from crossfhe.testing import INSECURE_CKKS_BOOT_N11

        return INSECURE_CKKS_BOOT_N11
    from crossfhe.ckks import presets

    return presets.BOOTSTRAP[name]


def worker(name: str, threads: int, reps: int, repeats: int, slots: int | None = None, precise: bool = False,
           compact: bool | None = None) -> dict:
    from crossfhe.cli.benchutil import enable_compilation_cache, pin_threads

    pin_threads(threads)
    enable_compilation_cache()
    import resource

    import jax
    import numpy as np

    from crossfhe.ckks import bootstrap as bt
    from crossfhe.ckks import ops

    def rss() -> float:  # the process's current resident set, MiB
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    p = _params(name)
    cfg = bt.config_for(p, slots)
    t0 = time.perf_counter()
    sk, ek = ops.keygen(p)
    t1 = time.perf_counter()
    bk = bt.keygen(sk, ek, cfg, compact=compact)
    t2 = time.perf_counter()
    mem = {"after_keygen_mib": rss()}
    pl = bt.plan_for(p, cfg, compact=bk.is_compact)
    t3 = time.perf_counter()
    mem["after_plan_mib"] = rss()
    rng = np.random.default_rng(0)
    x = np.tile(rng.uniform(-1, 1, cfg.slots), p.slots // cfg.slots)
    ct = ops.drop_level(ops.encrypt(ek, ops.encode(p, x)), 0)
    ev = bk.evaluation

    def block(c):
        jax.block_until_ready((c.c0.data, c.c1.data))
        return c

    def stages():
        s, c = {}, time.perf_counter()
        raised = block(bt.encapsulate_and_raise(ct, bk, pl.raise_scale))
        s["modraise_ms"], c = (time.perf_counter() - c) * 1e3, time.perf_counter()
        parts = tuple(block(t) for t in bt.coeff_to_slot(raised, pl, ev))
        s["coeff_to_slot_ms"], c = (time.perf_counter() - c) * 1e3, time.perf_counter()
        parts = tuple(block(bt.eval_mod(t, pl, ev)) for t in parts)
        s["eval_mod_ms"], c = (time.perf_counter() - c) * 1e3, time.perf_counter()
        block(bt.slot_to_coeff(parts, pl, ev))
        s["slot_to_coeff_ms"] = (time.perf_counter() - c) * 1e3
        return s

    c = time.perf_counter()
    out = block(bt.bootstrap(ct, bk))
    first_s = time.perf_counter() - c
    mem["after_first_call_mib"] = rss()
    times = []
    for _ in range(reps):
        c = time.perf_counter()
        out = block(bt.bootstrap(ct, bk))
        times.append((time.perf_counter() - c) * 1e3)
    st = [stages() for _ in range(max(1, reps))]
    counts = _count_key_switches(lambda: block(bt.bootstrap(ct, bk)))
    bits = float(-np.log2(np.abs(ops.decode(ops.decrypt(sk, out)).real - x).max()))
    # the peak of the work the peer's worker does (keys, plan, general bootstraps), before the real path's own
    # factor and programs
    peak_general = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    real = {}
    if not pl.packed:  # the real-message path (what the front end runs for a real vector): EvalMod once
        c = time.perf_counter()
        out_r = block(bt.bootstrap(ct, bk, real=True))
        real["first_call_s"] = time.perf_counter() - c
        real_times = []
        for _ in range(reps):
            c = time.perf_counter()
            out_r = block(bt.bootstrap(ct, bk, real=True))
            real_times.append((time.perf_counter() - c) * 1e3)
        z = ops.decode(ops.decrypt(sk, out_r))
        real.update(median_ms=statistics.median(real_times), times_ms=real_times,
                    precision_bits=float(-np.log2(np.abs(z.real - x).max())),
                    imag_bits=float(-np.log2(np.abs(z.imag).max())),
                    key_switches=_count_key_switches(lambda: block(bt.bootstrap(ct, bk, real=True))))
    precise_rec = {}
    if precise:  # two iterations, the general path and (full slots) the real one
        dec_in = ops.decode(ops.decrypt(sk, ct))
        for path, is_real in (("general", False), ("real", True)) if not pl.packed else (("general", False),):
            c = time.perf_counter()
            out_p = block(bt.bootstrap(ct, bk, real=is_real, precise=True))
            first = time.perf_counter() - c
            ptimes = []
            for _ in range(reps):
                c = time.perf_counter()
                out_p = block(bt.bootstrap(ct, bk, real=is_real, precise=True))
                ptimes.append((time.perf_counter() - c) * 1e3)
            z = ops.decode(ops.decrypt(sk, out_p)).real
            precise_rec[path] = {"first_call_s": first, "median_ms": statistics.median(ptimes), "times_ms": ptimes,
                                 "precision_bits": float(-np.log2(np.abs(z - x).max())),
                                 "vs_input_bits": float(-np.log2(np.abs(z - dec_in.real).max())),
                                 "input_bits": float(-np.log2(np.abs(dec_in.real - x).max())),
                                 "level": out_p.level}
    curve = []
    y = ct
    for _ in range(repeats):
        y = bt.bootstrap(y, bk)
        curve.append(float(-np.log2(np.abs(ops.decode(ops.decrypt(sk, y)).real - x).max())))
        y = ops.drop_level(y, 0)

    return {
        "peer": "crossfhe", "preset": name, "threads": threads, "n": p.n, "slots": cfg.slots,
        "keys": "compact" if bk.is_compact else "full",
        "levels_left": p.user_levels, "log_pq": p.log_pq, "dnum": p.dnum, "config": cfg.__dict__,
        "keygen_s": t1 - t0, "bootstrap_keygen_s": t2 - t1, "plan_s": t3 - t2, "key_mib": bk.nbytes() / 2**20,
        "galois_keys": len(ev.galois), "plan_mib": pl.nbytes() / 2**20,
        "first_call_s": first_s, "median_ms": statistics.median(times), "min_ms": min(times), "times_ms": times,
        "stages_ms": {k: statistics.median(s[k] for s in st) for k in st[0]}, "eval_mods": 1 if pl.packed else 2,
        "precision_bits": bits,
        "key_switches": counts, "real_path": real, "precise": precise_rec,
        "precision_curve_bits": curve, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "peak_general_rss_mib": peak_general,
        "rss_mib": mem,
        "load": os.getloadavg(),
        "allocator": _allocator(),
    }


def _count_key_switches(fn) -> dict:
    """Calls of the key-switching operations during fn(): relinearizations (ops.mul), rotations (ops.rotate),
    hoisted rotation sets (ops.rotate_many: one ModUp, one ModDown per offset) and their offsets, conjugations."""
    from crossfhe.ckks import ops

    counts = {"mul": 0, "rotate": 0, "rotate_many": 0, "hoisted_offsets": 0, "conjugate": 0}
    saved = {k: getattr(ops, k) for k in ("mul", "rotate", "rotate_many", "conjugate")}

    def wrap(name):
        def f(*a, **k):
            counts[name] += 1
            if name == "rotate_many":
                counts["hoisted_offsets"] += len([r for r in a[1] if r % a[0].params.slots])
            return saved[name](*a, **k)
        return f

    try:
        for k in saved:
            setattr(ops, k, wrap(k))
        fn()
    finally:
        for k, v in saved.items():
            setattr(ops, k, v)
    return counts


def _allocator() -> dict:
    """The glibc allocator settings workers run with (``--heap``)."""
    return {k: os.environ.get(k) for k in HEAP_ENV}


def _run_ours(name: str, threads: int, reps: int, repeats: int, slots: int | None, precise: bool = False,
              compact: bool | None = None) -> dict | None:
    form = "" if compact is None else int(compact)  # "": the form the preset names
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker",
           f"{name}:{threads}:{reps}:{repeats}:{slots or 0}:{int(precise)}:{form}"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, MALLOC_ARENA_MAX="1"))
    if r.returncode:
        print(f"# crossfhe worker failed:\n{r.stderr[-3000:]}", file=sys.stderr)
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def _run_peer(python, args, name: str, t: int, shape: dict):
    """OpenFHE's general bootstrap at ``name``'s shape (:func:`_shape`) on ``t`` threads (its record, or None)."""
    of = openfhe_boot_peer.run_bootstrap(python, log_n=shape["log_n"], slots=shape["slots"],
                                         levels_left=shape["levels_left"],
                                         level_budget=(3, 3), threads=t, reps=args.reps, repeats=args.repeats,
                                         security="none")
    if of:
        of.update(peer="openfhe", preset=name, threads=t, allocator=_allocator(), ran="first" if args.peer_first
                  else "second")
    return of


def _shape(args, name: str) -> dict:
    """The peer's shape for preset ``name``: log2 of its ring degree (12 for ``--quick``), slots (``--slots`` or
    full) and the levels left after a bootstrap (ours)."""
    params = _params(name)
    log_n = 12 if args.quick else params.n.bit_length() - 1
    return {"log_n": log_n, "slots": args.slots or (1 << (log_n - 1)), "levels_left": params.user_levels}


def main(argv=None) -> int:
    args = _parse(argv)
    if args.worker:
        name, threads, reps, repeats, slots, precise, compact = args.worker.split(":")
        print(json.dumps(worker(name, int(threads), int(reps), int(repeats), int(slots) or None, precise == "1",
                                None if compact == "" else compact == "1")))
        return 0
    if args.heap == "kept":  # inherited by every worker, ours and the peer's (the parent computes nothing)
        os.environ.update(HEAP_ENV)
    records = collect(args)
    _report(records)
    print(json.dumps(records))
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1))
    return 0


def collect(args) -> list[dict]:
    """Ours and the peer's records for every preset and thread count of ``args``, ours with their ratios to the
    peer's (each side in worker processes of its own)."""
    names = ["TEST_N11"] if args.quick else args.presets.split(",")
    threads = [int(t) for t in args.threads.split(",")]
    python = None if args.no_peer else openfhe_boot_peer.find_python(args.openfhe_python)
    records = []
    for name in names:
        shape = _shape(args, name)
        for t in threads:
            if python and args.peer_first:  # the peer's general bootstrap first
                early = _run_peer(python, args, name, t, shape)
            ours = _run_ours(name, t, args.reps, args.repeats, args.slots, args.precise)
            if ours is None:
                continue
            records.append(ours)
            print(f"# {name} {t} thread(s): {ours['median_ms']:.0f} ms, {ours['precision_bits']:.2f} bits", flush=True)
            if args.other_keys:
                other = _run_ours(name, t, args.reps, args.repeats, args.slots, args.precise,
                                  compact=ours["keys"] != "compact")
                if other is not None:
                    records.append(other)
                    print(f"# {name} {t} thread(s), {other['keys']} keys: {other['median_ms']:.0f} ms, "
                          f"{other['key_mib']:.0f} MiB of keys", flush=True)
            if python:
                of = early if args.peer_first else _run_peer(python, args, name, t, shape)
                if of:
                    records.append(of)
                    for mine in [r for r in records if r["peer"] == "crossfhe" and r["preset"] == name
                                 and r["threads"] == t]:
                        for rec in (mine, mine["real_path"], *mine["precise"].values()):
                            if rec:
                                rec["ratio_openfhe"] = rec["median_ms"] / of["bootstrap_ms"]["median"]
                        peer_peak = of.get("memory", {}).get("peak_rss_mb")
                        if peer_peak:  # the peer's worker runs the general path alone
                            mine["peak_ratio_openfhe"] = mine["peak_general_rss_mib"] / peer_peak
                if ours["precise"]:  # OpenFHE's iterative bootstrap (two iterations, one level more in its chain)
                    it = openfhe_boot_peer.run_bootstrap(python, log_n=shape["log_n"], slots=shape["slots"],
                                                         levels_left=shape["levels_left"], level_budget=(3, 3),
                                                         threads=t, reps=args.reps, repeats=1, security="none",
                                                         iterations=2)
                    if it:
                        it.update(peer="openfhe", preset=name, threads=t)
                        records.append(it)
                        for rec in ours["precise"].values():
                            rec["ratio_openfhe_iterative"] = rec["median_ms"] / it["bootstrap_ms"]["median"]
    return records


def _report(records: list[dict]) -> None:
    """The records as a table on standard output."""
    print(f"\n{'preset':<13}{'thr':>4}{'peer':>10}{'boot ms':>10}{'bits':>7}{'left':>6}{'keys MiB':>10}"
          f"{'keygen s':>10}{'ours/OFHE':>10}")
    for r in records:
        if r["peer"] == "crossfhe":
            who = "ours" + (" cmp" if r.get("keys") == "compact" else "")
            print(f"{r['preset']:<13}{r['threads']:>4}{who:>10}{r['median_ms']:>10.0f}{r['precision_bits']:>7.2f}"
                  f"{r['levels_left']:>6}{r['key_mib']:>10.0f}{r['keygen_s'] + r['bootstrap_keygen_s']:>10.1f}"
                  f"{r.get('ratio_openfhe', float('nan')):>10.2f}")
            st = r["stages_ms"]
            print(f"{'':<17}stages ms: ModRaise {st['modraise_ms']:.0f}, CoeffToSlot {st['coeff_to_slot_ms']:.0f}, "
                  f"EvalMod x{r['eval_mods']} {st['eval_mod_ms']:.0f}, SlotToCoeff {st['slot_to_coeff_ms']:.0f}")
            print(f"{'':<17}key switches: {r['key_switches']}; peak resident memory "
                  f"{r['peak_rss_mib'] / 1024:.2f} GiB, "
                  f"{r['peak_general_rss_mib'] / 1024:.2f} GiB before the real path (ours/OFHE "
                  f"{r.get('peak_ratio_openfhe', float('nan')):.2f})")
            rp = r.get("real_path")
            if rp:
                ratio = rp.get("ratio_openfhe", float("nan"))
                print(f"{'':<17}real-message path (EvalMod x1): {rp['median_ms']:.0f} ms, {rp['precision_bits']:.2f} "
                      f"bits (imaginary parts {rp['imag_bits']:.2f}), ours/OFHE {ratio:.2f}; key switches "
                      f"{rp['key_switches']}")
            for path, pr in r.get("precise", {}).items():
                print(f"{'':<17}precise (two iterations), {path} path: {pr['median_ms']:.0f} ms, "
                      f"{pr['precision_bits']:.2f} bits ({pr['vs_input_bits']:.2f} against the input's decryption, "
                      f"whose own error is {pr['input_bits']:.2f} bits), level {pr['level']}, ours/OFHE "
                      f"{pr.get('ratio_openfhe', float('nan')):.2f}, ours/OFHE two iterations "
                      f"{pr.get('ratio_openfhe_iterative', float('nan')):.2f}")
            if r["precision_curve_bits"]:
                print(f"{'':<17}bits over {len(r['precision_curve_bits'])} bootstraps: "
                      + " ".join(f"{b:.2f}" for b in r["precision_curve_bits"]))
        else:
            mem = r.get("memory", {})
            peer = "openfhe" if r.get("iterations", 1) == 1 else "ofhe x2"
            print(f"{r['preset']:<13}{r['threads']:>4}{peer:>10}{r['bootstrap_ms']['median']:>10.0f}"
                  f"{r['precision_bits']:>7.2f}{r['levels_left']:>6}{'':>10}{r['keygen_s']['total_s']:>10.1f}"
                  f"   N {r['params']['N']}, log PQ {r['params'].get('log_pq', float('nan')):.0f}, no security "
                  f"check; peak {mem.get('peak_rss_mb', mem)}")
            if r.get("precision_curve_bits"):
                print(f"{'':<17}bits over {len(r['precision_curve_bits'])} bootstraps: "
                      + " ".join(f"{b:.2f}" for b in r["precision_curve_bits"]))


if __name__ == "__main__":
    raise SystemExit(main())
