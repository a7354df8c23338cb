"""The ``crossfhe`` command: ``demo``, ``bench <suite>``, ``params``, ``serve``, ``client``, ``--version``."""

from __future__ import annotations

import argparse
import os
import runpy
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH_SUITES = ("ntt", "ckks", "hmvp", "tfhe", "kernels", "dispatch", "circuits", "bootstrap", "profile",
                "activations", "ml", "switch", "taurus", "startup", "workload_programs", "byom", "integers", "serve",
                "gpu_kernels")

SUITE_SUMMARIES = {
    "ntt": "the negacyclic NTT: the jitted radix-2 kernel against plain NumPy and Zama's tfhe-ntt",
    "ckks": "CKKS operations against Microsoft SEAL (and OpenFHE after `make openfhe-peer`): latency, precision",
    "hmvp": "encrypted vector x plaintext matrix: CHAM's HMVP against the diagonal method and TenSEAL",
    "tfhe": "TFHE programmable bootstrapping at P2-P10 against TFHE-rs: latency, batch throughput, key sizes",
    "kernels": "CROSS's BAT modular matmul and the matrix NTT against direct kernels and measured floors",
    "dispatch": "the overhead of an eager operation against one bare jitted program and the memory floor",
    "circuits": "compiled circuits against eager calls: time per operation, compile time, a fresh process's first run",
    "bootstrap": "CKKS bootstrapping against OpenFHE: latency, stages, key sizes, precision",
    "profile": "per operation on any device: executables, kernels, copies and time against floors",
    "activations": "CKKS activations (sigmoid, ReLU, square): levels, approximation and encrypted error, latency",
    "ml": "encrypted ML on CKKS: HELR training with bootstrapping and CNN inference against TenSEAL",
    "switch": "CKKS <-> TFHE scheme switching: ReLU, comparison, max, argmax on CKKS vectors against OpenFHE",
    "taurus": "Taurus workloads on TFHE circuits (trees, boosting, XGBoost regression, KNN, MLP, CNN) vs Concrete ML",
    "startup": "the README's first example in a fresh process (warm caches) against the same task in TenSEAL",
    "workload_programs": "HMVP and bootstrapping as one compiled program against their operations as separate ones",
    "byom": "a user's PyTorch CNN through crossfhe.ml (TFHE and CKKS) against Concrete ML's compile_torch_model",
    "integers": "encrypted 8- to 64-bit integers: each radix operator against TFHE-rs's FheUint, on 1 and 2 threads",
    "serve": "crossfhe serve under load: concurrent clients on TFHE and CKKS, batched vs one at a time, all checked",
    "gpu_kernels": "the GPU kernel set's CUDA NTT against XLA's radix-2 kernels on one device: exactness, time, floor",
}
"""One line per suite for ``crossfhe bench`` (known without the benchmarks directory)."""

BENCH_USAGE = "crossfhe bench SUITE [--quick] [--plot [PNG]] [suite options]"

REPOSITORY = "https://github.com/crossfhe/crossfhe"

BENCHMARKS_ENV = "CROSSFHE_BENCHMARKS"
"""Names a benchmarks directory (a source checkout's ``benchmarks/``) to use instead of the one beside the package."""


def version_line() -> str:
    """``crossfhe X.Y.Z (jax A, jaxlib B, numpy C, Python D, backend cpu|gpu|tpu)``; imports JAX."""
    import platform

    import jax
    import jaxlib
    import numpy as np

    from crossfhe._version import __version__

    try:
        backend = jax.default_backend()
    except RuntimeError as e:  # pragma: no cover - no usable backend at all
        backend = f"none ({e})"
    return (
        f"crossfhe {__version__} (jax {jax.__version__}, jaxlib {jaxlib.__version__}, numpy {np.__version__}, "
        f"Python {platform.python_version()}, backend {backend})"
    )


class _VersionAction(argparse.Action):
    """``--version``: prints :func:`version_line` and exits (computed only when asked: it imports JAX)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line())
        parser.exit()


def _benchmarks_dir() -> Path:
    """``$CROSSFHE_BENCHMARKS`` if set, else ``benchmarks/`` of the source checkout this package runs from (it may
    not exist: a wheel ships no benchmarks)."""
    override = os.environ.get(BENCHMARKS_ENV)
    if override:
        return Path(override).expanduser().resolve()
    return Path(__file__).resolve().parents[2] / "benchmarks"


def _no_benchmarks(suite: str, where: Path) -> SystemExit:
    """The exit (status 2) of ``crossfhe bench`` where the suite's script is not found."""
    print(
        f"crossfhe bench: no benchmark suite {suite!r} here (looked for {where / f'bench_{suite}.py'}).\n"
        "The benchmarks ship with the source, not with the installed package. To run them:\n"
        f"    git clone {REPOSITORY} && cd crossfhe && make bench\n"
        f'or, in the clone, pip install -e ".[bench]" and then: crossfhe bench {suite}\n'
        f"(or set {BENCHMARKS_ENV} to a checkout's benchmarks/ directory).",
        file=sys.stderr,
    )
    return SystemExit(2)


def bench_usage() -> str:
    """What ``crossfhe bench`` and ``crossfhe bench --help`` print: the suites, one line each, and how to run one."""
    width = max(map(len, BENCH_SUITES))
    lines = [
        f"usage: {BENCH_USAGE}",
        "",
        "Runs one benchmark suite (its peers in the same run where installed). Suites:",
        *(f"  {s:<{width}}  {SUITE_SUMMARIES[s]}" for s in BENCH_SUITES),
        "",
        "--quick runs a short version of a suite; `crossfhe bench SUITE --help` lists that suite's options.",
        "--plot [PNG] draws the suite's records after the run (default benchmarks/results/SUITE.png; needs",
        '  pip install "crossfhe[plot]"). `make bench` runs every suite.',
    ]
    where = _benchmarks_dir()
    if not any(where.glob("bench_*.py")):
        lines += [
            "",
            f"The benchmarks are not installed here (no bench_*.py in {where}): they ship with the source.",
            f"    git clone {REPOSITORY} && cd crossfhe && make bench",
        ]
    return "\n".join(lines)


def _plot_args(rest: list[str], *, default_png: Path, temp_json: Path) -> tuple[list[str], Path | None, Path | None]:
    """Split ``--plot [PNG]`` off a suite's arguments: (arguments for the suite, JSON path, PNG path).

    Without ``--plot``: (rest, None, None), rest unchanged. With it (``--plot``, ``--plot PNG`` or ``--plot=PNG``;
    a following argument that starts with ``-`` is the suite's, not a PNG): the suite's arguments keep the user's
    ``--json PATH`` (or ``--json=PATH``) and that path is the JSON the plot reads; without one, ``--json temp_json``
    is added. The PNG defaults to ``default_png``.
    """
    suite_args: list[str] = []
    png: Path | None = None
    plot = False
    json_path: Path | None = None
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg == "--plot":
            plot = True
            if i + 1 < len(rest) and not rest[i + 1].startswith("-"):
                png = Path(rest[i + 1])
                i += 1
        elif arg.startswith("--plot="):
            plot = True
            png = Path(arg.split("=", 1)[1])
        else:
            if arg == "--json" and i + 1 < len(rest):
                json_path = Path(rest[i + 1])
            elif arg.startswith("--json="):
                json_path = Path(arg.split("=", 1)[1])
            suite_args.append(arg)
        i += 1
    if not plot:
        return list(rest), None, None
    if json_path is None:
        json_path = temp_json
        suite_args += ["--json", str(temp_json)]
    return suite_args, json_path, png or default_png


def _run_suite(script: Path, args: list[str]) -> int:
    """Run a suite's script as ``__main__`` with ``args``; its exit status (``sys.exit``: None is 0, a message is
    printed and is 1, as Python does)."""
    saved = sys.argv
    sys.argv = [str(script), *args]
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        print(e.code, file=sys.stderr)
        return 1
    finally:
        sys.argv = saved
    return 0


def _cmd_bench(suite: str | None, rest: list[str]) -> int:
    if suite is None:
        if not rest or set(rest) & {"-h", "--help"}:
            print(bench_usage())
            return 0
        print(f"{bench_usage()}\n\ncrossfhe bench: name a suite before its options ({' '.join(rest)})", file=sys.stderr)
        return 2
    where = _benchmarks_dir()
    script = where / f"bench_{suite}.py"
    if not script.is_file():
        raise _no_benchmarks(suite, where)
    # A fixed name (no file made now): a suite may restart the process (crossfhe.runtime.keep_heap), same pid.
    temp_json = Path(tempfile.gettempdir()) / f"crossfhe-bench-{suite}-{os.getpid()}.json"
    suite_args, json_path, png = _plot_args(rest, default_png=where / "results" / f"{suite}.png", temp_json=temp_json)
    try:
        status = _run_suite(script, suite_args)
        if png is None or status != 0:
            return status
        plotter = where / "plot.py"
        if not plotter.is_file():
            print(f"crossfhe bench --plot: {plotter} not found", file=sys.stderr)
            return 2
        png.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, str(plotter), "--suite", suite, "--json", str(json_path), "--out", str(png)]
        return subprocess.run(cmd, check=False).returncode
    finally:
        temp_json.unlink(missing_ok=True)


def _cmd_demo(args) -> int:
    from crossfhe.cli import demo
    from crossfhe.cli.benchutil import enable_compilation_cache
    from crossfhe.runtime import keep_heap

    keep_heap(reexec=True)  # restarts once with the allocator settings (crossfhe.runtime)
    enable_compilation_cache()
    if args.what == "ntt":
        return 0 if demo.run(log_n=args.log_n, limbs=args.limbs) else 1
    if args.what == "tfhe":
        return 0 if demo.run_tfhe() else 1
    return 0 if demo.run_ckks() else 1


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


def _cmd_serve(args) -> int:
    from crossfhe.errors import CrossFHEError

    try:
        from crossfhe.serve import Config, serve
    except ModuleNotFoundError as e:
        print(f"crossfhe serve needs the serve extra (Starlette and uvicorn): pip install 'crossfhe[serve]' ({e})",
              file=sys.stderr)
        return 2
    token = None
    if args.token_file:
        token = Path(args.token_file).read_text().strip()
        if not token:
            print(f"crossfhe serve: {args.token_file} is empty", file=sys.stderr)
            return 2
    config = Config(models=[os.path.abspath(m) for m in args.models], store=os.path.abspath(args.store),
                    window_ms=args.window_ms, max_items=args.max_items,
                    max_request_bytes=int(args.max_request_mb * (1 << 20)),
                    max_key_bytes=int(args.max_key_mb * (1 << 20)), key_cache_bytes=int(args.key_cache_mb * (1 << 20)))
    try:
        serve(config, host=args.host, port=args.port, workers=args.workers, token=token)
    except (CrossFHEError, OSError) as e:
        print(f"crossfhe serve: {e}", file=sys.stderr)
        return 2
    return 0


def _cmd_client(args) -> int:
    import numpy as np

    from crossfhe.client import Client, RemoteSwitch, ServerError

    client = Client(args.url, token=os.environ.get("CROSSFHE_SERVE_TOKEN") or None, retries=args.retries)
    try:
        if args.action == "list":
            for m in client.models():
                kind = "model" if m["model"] else "circuit"
                print(f"{m['name']:<24} {m['scheme']:<8} {kind:<8} {m['inputs']} inputs, {m['outputs']} outputs, "
                      f"digest {m['digest'][:12]}")
            return 0
        if not args.model:
            print("crossfhe client URL run MODEL --input X.npy [...]: name the model", file=sys.stderr)
            return 2
        model = client.model(args.model)
        if not args.input:
            print(f"crossfhe client: give {model.name}'s inputs (--input FILE.npy, one per input; a model from "
                  "crossfhe.ml takes one: its samples)", file=sys.stderr)
            return 2
        values = [np.load(f, allow_pickle=False) for f in args.input]
        if args.insecure and isinstance(model, RemoteSwitch):
            model.keygen(insecure=True)
        key_id = model.upload_keys()
        if getattr(model, "spec", None) is not None:
            result = model.predict(values[0])
        else:
            result = model(*values)
        print(f"keys {key_id} (made here; the secret key stays in this process)")
        print(np.array2string(np.asarray(result) if not isinstance(result, list) else np.asarray(result[0]),
                              precision=6))
        return 0
    except (ServerError, ConnectionError, ValueError, TypeError) as e:
        print(f"crossfhe client: {e}", file=sys.stderr)
        return 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="crossfhe", description="crossfhe: FHE on one RNS/NTT substrate in JAX")
    parser.add_argument("--version", action=_VersionAction, help="print the versions of crossfhe, JAX, NumPy, Python")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser(
        "demo", help="CKKS on a small dataset (default), 'tfhe': 4-bit lookup tables, or 'ntt': a polynomial product"
    )
    d.add_argument("what", nargs="?", choices=("ckks", "ntt", "tfhe"), default="ckks")
    d.add_argument("--log-n", type=int, default=14)
    d.add_argument("--limbs", type=int, default=8)
    b = sub.add_parser(
        "bench", help="run a benchmark suite (`crossfhe bench` lists them; options after the suite go to it)",
        add_help=False, usage=BENCH_USAGE,
    )
    b.add_argument("suite", nargs="?", choices=BENCH_SUITES)
    sub.add_parser("params", help="print the security table parameters are checked against")
    s = sub.add_parser("serve", help="serve exported circuits and models over HTTP (batched, keys kept on disk)")
    s.add_argument("models", nargs="+", metavar="MODEL.cfhe", help="files from Circuit.export / CompiledModel.export")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--store", default="crossfhe-keys", help="the key store's directory (shared by the workers)")
    s.add_argument("--workers", type=int, default=1, help="server processes sharing the port and the key store")
    s.add_argument("--token-file", help="a file holding the bearer token for key uploads and runs (or set "
                                        "CROSSFHE_SERVE_TOKEN); without one the server is open")
    s.add_argument("--window-ms", type=float, default=5.0, help="how long a request waits for others to join its "
                                                                 "launch (0: no waiting)")
    s.add_argument("--max-items", type=int, default=64, help="items per launch (1: one request at a time)")
    s.add_argument("--max-request-mb", type=float, default=512.0)
    s.add_argument("--max-key-mb", type=float, default=8192.0)
    s.add_argument("--key-cache-mb", type=float, default=8192.0, help="evaluation keys kept in memory per worker")
    c = sub.add_parser("client", help="try a server: list its models, or run one on inputs from .npy files")
    c.add_argument("url", help="the server, e.g. http://127.0.0.1:8000 (token: $CROSSFHE_SERVE_TOKEN)")
    c.add_argument("action", choices=("list", "run"))
    c.add_argument("model", nargs="?")
    c.add_argument("--input", action="append", metavar="X.npy", help="an input (repeat per circuit input)")
    c.add_argument("--retries", type=int, default=6)
    c.add_argument("--insecure", action="store_true", help="allow a switching function's test parameters (keys made "
                                                           "here refuse them otherwise)")
    args, rest = parser.parse_known_args(argv)
    if args.command == "bench":
        return _cmd_bench(args.suite, rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command == "serve":
        return _cmd_serve(args)
    if args.command == "client":
        return _cmd_client(args)
    return _cmd_demo(args) if args.command == "demo" else _cmd_params(args)


if __name__ == "__main__":
    sys.exit(main())
