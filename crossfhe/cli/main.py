"""The ``crossfhe`` command: ``demo``, ``bench <suite>``, ``params``."""

from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path

BENCH_SUITES = ("ntt", "ckks", "hmvp", "tfhe", "kernels", "dispatch", "circuits", "bootstrap", "profile")


def _enable_compilation_cache() -> None:
    from crossfhe.cli.benchutil import enable_compilation_cache

    enable_compilation_cache()


def _benchmarks_dir() -> Path:
    here = Path(__file__).resolve().parents[2] / "benchmarks"
    if not here.is_dir():
        raise SystemExit("crossfhe bench: the benchmarks ship with the source checkout (benchmarks/ not found)")
    return here


def _cmd_demo(args) -> int:
    from crossfhe.cli import demo
    from crossfhe.runtime import keep_heap

    keep_heap(reexec=True)  # restarts once with the allocator settings (crossfhe.runtime)
    _enable_compilation_cache()
    if args.what == "ntt":
        return 0 if demo.run(log_n=args.log_n, limbs=args.limbs) else 1
    if args.what == "tfhe":
        return 0 if demo.run_tfhe() else 1
    return 0 if demo.run_ckks() else 1


def _cmd_bench(args, rest) -> int:
    script = _benchmarks_dir() / f"bench_{args.suite}.py"
    sys.argv = [str(script), *rest]
    runpy.run_path(str(script), run_name="__main__")
    return 0


def _cmd_params(args) -> int:
    from crossfhe.core import params
    from crossfhe.errors import ParameterError

    levels = list(params.SecurityLevel)
    print("Max log2(PQ) for a uniform ternary secret (HomomorphicEncryption.org standard, classical)")
    print(f"{'N':>8} " + " ".join(f"{int(lv):>6}-bit" for lv in levels))
    for log_n in range(10, 18):
        row = []
        for lv in levels:
            try:
                row.append(f"{params.max_log_pq(1 << log_n, lv):>10}")
            except ParameterError:
                row.append(f"{'-':>10}")
        print(f"{1 << log_n:>8} " + " ".join(row))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="crossfhe", description="crossfhe: FHE on one RNS/NTT substrate in JAX")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser(
        "demo", help="CKKS on a small dataset (default), 'tfhe': 4-bit lookup tables, or 'ntt': a polynomial product"
    )
    d.add_argument("what", nargs="?", choices=("ckks", "ntt", "tfhe"), default="ckks")
    d.add_argument("--log-n", type=int, default=14)
    d.add_argument("--limbs", type=int, default=8)
    b = sub.add_parser("bench", help="run a benchmark suite (options after the suite go to it)", add_help=False)
    b.add_argument("suite", choices=BENCH_SUITES)
    sub.add_parser("params", help="print the security table parameters are checked against")
    args, rest = parser.parse_known_args(argv)
    if args.command == "bench":
        return _cmd_bench(args, rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return _cmd_demo(args) if args.command == "demo" else _cmd_params(args)


if __name__ == "__main__":
    sys.exit(main())
