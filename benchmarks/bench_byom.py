"""Bring your own model (issue 47): one PyTorch CNN through crossfhe and through Concrete ML, in the same run.

    python benchmarks/bench_byom.py [--samples 5] [--threads 1] [--params P6,P8] [--epochs 30] [--json PATH] [--quick]
    python benchmarks/bench_byom.py --deep 2,3,5 [--samples 5] [--json PATH]

Concrete ML's side (``benchmarks/concrete_torch_peer.py`` in ``.venv-concrete``, made by
``bash benchmarks/setup_concrete.sh``) trains the CNN on scikit-learn's digits, compiles it with
``compile_torch_model`` and runs ``--samples`` test images encrypted, one at a time; it writes the trained network to
an ONNX file. crossfhe's side compiles that file with :func:`crossfhe.ml.compile_onnx`, on TFHE (each preset of
``--params``, bits chosen on the calibration images) and on CKKS (the smallest secure preset with the depth), and
runs the same test images encrypted one at a time. Both calibrate on the first 200 training images, and both run on
``--threads`` CPUs (process affinity; the peer also sets its OpenMP and Rayon threads).

``--deep 2,3,5`` measures instead CKKS networks deeper than any preset without bootstrapping: for each count of
tanh layers (8 wide, degree 15, random weights), the network compiled on ``N16_BOOT_L9`` with its bootstraps
placed (:func:`crossfhe.ml.ckks.place_bootstraps`), each in a process of its own: bootstraps per sample, key
generation, the first run (it compiles the whole model as one program), the median of ``--samples`` later runs,
the largest difference from the approximated model in float64, and the process's peak resident memory.

Prints one JSON object and a table: accuracy on the 360 test images (float, and each library's quantized or
approximated model in the clear), compile and key generation seconds, milliseconds per encrypted sample (median;
crossfhe's after one untimed run that compiles its batch-1 program), and whether the encrypted predictions equal
the clear model's. Without ``.venv-concrete`` the peer row says so.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _digits():
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.images / 16.0)[:, None]
    perm = np.random.default_rng(0).permutation(len(x))
    tr, te = perm[:1437], perm[1437:]
    return x[tr], d.target[tr], x[te], d.target[te]


def run_peer(onnx_path: Path, args) -> dict:
    python = ROOT / ".venv-concrete" / "bin" / "python"
    if not python.exists():
        return {"error": "no .venv-concrete (bash benchmarks/setup_concrete.sh)"}
    r = subprocess.run([str(python), str(HERE / "concrete_torch_peer.py"), str(onnx_path), "--samples",
                        str(args.samples), "--threads", str(args.threads), "--epochs", str(args.epochs)],
                       capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        return {"error": r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"}
    return json.loads(r.stdout.strip().splitlines()[-1])


def ours(onnx_path: Path, scheme: str, args, preset: str | None = None) -> dict:
    import jax

    import crossfhe.ml as ml
    from crossfhe.tfhe import presets

    xtr, _, xte, yte = _digits()
    options = {"params": presets.PRESETS[preset]} if scheme == "tfhe" else {}
    t0 = time.perf_counter()
    model = ml.compile_onnx(str(onnx_path), xtr[:200], scheme=scheme, check=0, progress=None, **options)
    t1 = time.perf_counter()
    model.keygen()
    t2 = time.perf_counter()
    clear = model.predict_approximated(xte).argmax(1)
    model.predict(xte[:1])  # the batch-1 program compiled (XLA) once, before the timed runs
    times, enc_pred = [], []
    for i in range(args.samples):
        t = time.perf_counter()
        out = model.run(model.encrypt(xte[i:i + 1]))
        jax.block_until_ready([o.leaves for o in (out if isinstance(out, list) else [out])])
        times.append(time.perf_counter() - t)
        enc_pred.append(int(model.decrypt(out).argmax(1)[0]))
    float_pred = model.predict_plain(xte).argmax(1)
    return {"scheme": scheme, "params": model.report.params, "accuracy_float": float(np.mean(float_pred == yte)),
            "accuracy_quantized": float(np.mean(clear == yte)), "compile_s": t1 - t0, "keygen_s": t2 - t1,
            "samples": args.samples, "ms_per_sample": 1e3 * statistics.median(times),
            "ms_all": [1e3 * t for t in times],
            "fhe_equals_clear": bool(np.array_equal(enc_pred, clear[:args.samples])),
            "report": str(model.report)}


def deep_one(layers: int, samples: int) -> dict:
    """One row of ``--deep``: ``layers`` tanh layers on N16_BOOT_L9 (module docstring)."""
    import resource

    import jax

    import crossfhe.ml as ml
    from crossfhe.ckks import presets
    from crossfhe.ml import ckks as ckks_ml

    rng = np.random.default_rng(3)
    net = ml.Network(tuple(
        layer for i in range(layers) for layer in (ml.Affine(rng.normal(size=(8, 8)) * 0.5, np.zeros(8), f"fc{i}"),
                                                   ml.Nonlinear("tanh", source=f"t{i}"))
    ) + (ml.Affine(rng.normal(size=(2, 8)), np.zeros(2), "out"),), (8,), f"tanh x{layers}")
    x = rng.normal(size=(16, 8))
    t0 = time.perf_counter()
    model = ml.compile_network(net, x, params=presets.N16_BOOT_L9, check=0, progress=None)
    t1 = time.perf_counter()
    model.keygen()
    t2 = time.perf_counter()
    enc = model.encrypt(x[:1])
    out = model.run(enc)
    jax.block_until_ready(out.leaves)
    t3 = time.perf_counter()
    times = []
    for _ in range(samples):
        t = time.perf_counter()
        jax.block_until_ready(model.run(enc).leaves)
        times.append(time.perf_counter() - t)
    diff = float(np.abs(model.decrypt(out) - model.predict_approximated(x[:1])).max())
    return {"layers": layers, "depth": ckks_ml.depth(model.plan), "bootstraps": model.plan.bootstraps,
            "compile_s": t1 - t0, "keygen_s": t2 - t1, "first_run_s": t3 - t2,
            "ms_per_sample": 1e3 * statistics.median(times), "ms_all": [1e3 * t for t in times],
            "max_abs_diff": diff, "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}


def deep(args, cpu: str) -> int:
    rows = []
    for n in (int(v) for v in args.deep.split(",")):
        res = subprocess.run([sys.executable, __file__, "--deep-one", str(n), "--samples", str(args.samples)],
                             capture_output=True, text=True)
        rows.append(json.loads(res.stdout.strip().splitlines()[-1]) if res.returncode == 0 else
                    {"layers": n, "error": (res.stderr.strip().splitlines() or ["killed"])[-1][:300]})
    out = {"suite": "byom-deep", "cpu": cpu, "params": "N16_BOOT_L9",
           "load": [round(v, 2) for v in os.getloadavg()], "rows": rows}
    print(json.dumps(out))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    print(f"{'layers':>7}{'depth':>7}{'boots':>7}{'keygen s':>10}{'first run s':>13}{'ms/sample':>11}{'max diff':>10}"
          f"{'peak GiB':>10}", file=sys.stderr)
    for r in rows:
        if "error" in r:
            print(f"{r['layers']:>7}  {r['error']}", file=sys.stderr)
            continue
        print(f"{r['layers']:>7}{r['depth']:>7}{r['bootstraps']:>7}{r['keygen_s']:>10.1f}{r['first_run_s']:>13.1f}"
              f"{r['ms_per_sample']:>11.0f}{r['max_abs_diff']:>10.1e}{r['peak_rss_gib']:>10.1f}", file=sys.stderr)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--samples", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--params", default="P6,P8", help="the TFHE presets of crossfhe's TFHE rows (comma-separated)")
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--json", type=Path)
    p.add_argument("--quick", action="store_true", help="2 samples, P6 only, 10 epochs")
    p.add_argument("--deep", help="CKKS networks of these many tanh layers on N16_BOOT_L9 (comma-separated)")
    p.add_argument("--deep-one", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.deep_one is not None:
        print(json.dumps(deep_one(args.deep_one, args.samples)))
        return 0
    if args.quick:
        args.samples, args.params, args.epochs = 2, "P6", 10
    from crossfhe.cli.benchutil import cpu_name

    cpu = cpu_name()
    if args.deep:
        return deep(args, cpu)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cnn.onnx"
        peer = run_peer(path, args)
        if hasattr(os, "sched_setaffinity"):  # crossfhe on as many CPUs as the peer (it pins itself the same way)
            os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:args.threads]))
        rows = [] if "error" in peer else [*(ours(path, "tfhe", args, name) for name in args.params.split(",")),
                                           ours(path, "ckks", args)]
    out = {"suite": "byom", "cpu": cpu, "threads": args.threads, "load": [round(v, 2) for v in os.getloadavg()],
           "concrete_ml": peer, "crossfhe": rows}
    print(json.dumps(out))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    head = f"{'library':<22}{'scheme':<8}{'float':>7}{'clear':>7}{'compile s':>11}{'keygen s':>10}{'ms/sample':>11}"
    print(head + "  encrypted = clear", file=sys.stderr)
    if "error" in peer:
        print(f"{'Concrete ML':<22}{peer['error']}", file=sys.stderr)
    else:
        print(f"{peer['peer']:<22}{'TFHE':<8}{peer['accuracy_float']:>7.3f}{peer['accuracy_quantized']:>7.3f}"
              f"{peer['compile_s']:>11.1f}{peer['keygen_s']:>10.1f}{peer['ms_per_sample']:>11.0f}  "
              f"{peer['fhe_equals_clear']}", file=sys.stderr)
    for r in rows:
        print(f"{'crossfhe ' + r['params']:<22}{r['scheme'].upper():<8}{r['accuracy_float']:>7.3f}"
              f"{r['accuracy_quantized']:>7.3f}{r['compile_s']:>11.1f}{r['keygen_s']:>10.1f}{r['ms_per_sample']:>11.0f}"
              f"  {r['fhe_equals_clear']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
