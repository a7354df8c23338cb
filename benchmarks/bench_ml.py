"""Encrypted machine learning on CKKS (issue 28): HELR training and CNN inference, against TenSEAL in the same run.

    python benchmarks/bench_ml.py [--quick] [--threads 1,2] [--iterations 32] [--cnn-images 100] [--one-program]
                                  [--peer-lr-iterations 1] [--no-peer] [--json PATH]

**HELR** (crossfhe.apps.helr): logistic regression trained on 1024 encrypted digits (scikit-learn's, resized to
14 x 14 = 196 features, label "digit >= 5"), 32 Nesterov iterations at crossfhe.apps.helr.PARAMS (N 2^16, 128-bit),
the weights bootstrapped (256 slots) after every iteration. Reported: ms per iteration (gradient + update +
bootstrap; each also apart), key generation, test accuracy of the encrypted model against the same training in
NumPy (exact sigmoid, and the cubic the encryption computes), the largest weight error against the cubic NumPy run.

**CNN** (crossfhe.apps.cnn): the LoLa-MNIST network and TenSEAL's tutorial network on 28 x 28 digits, trained in
NumPy, then run on encrypted images with plaintext weights: ms per image one image at a time and per image with the
images packed into the slots, and the fraction of predictions equal to plaintext inference.

**Peer**: TenSEAL 0.3.18 (the ``bench`` extra) in its own process right after ours (benchmarks/tenseal_ml_peer.py):
its tutorial's logistic-regression training (one ciphertext per sample, the weights decrypted and re-encrypted each
iteration: TenSEAL has no bootstrapping) on the same 1024 x 196 data, timed per iteration, and its tutorial's
encrypted convolution on the same trained weights and images, timed per image. Ratios are ours / TenSEAL per
iteration and per image (below 1: we are faster).

Each of our rows is its own process pinned to that many CPUs (crossfhe.cli.benchutil.pin_threads). ``--quick``: an
insecure N 2^11 chain, breast-cancer data (12 features, 100 samples), 3 iterations, 4 images, TenSEAL at its
smallest (a smoke test of the whole path).
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

HERE = Path(__file__).resolve().parent


def _worker_env() -> dict:
    """Every worker's environment, ours and the peer's: crossfhe.runtime.HEAP_ENV (glibc keeps and reuses freed
    memory, as the CLI and bench_bootstrap.py run; with glibc's defaults XLA:CPU faults its temporaries in afresh on
    every call: benchmarks/README.md, "Fewer rotation keys, and the benchmark's allocator")."""
    from crossfhe.runtime import HEAP_ENV

    return dict(os.environ, **HEAP_ENV)


def _parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts (one process each)")
    p.add_argument("--iterations", type=int, default=32, help="HELR iterations")
    p.add_argument("--rate", type=float, default=3.0, help="HELR step size: gamma_t = rate / (t + 1)")
    p.add_argument("--cnn-images", type=int, default=100, help="encrypted test images per network")
    p.add_argument("--parts", default="helr,cnn", help="which workloads: helr, cnn")
    p.add_argument("--peer-lr-iterations", type=int, default=1, help="TenSEAL logistic-regression iterations timed")
    p.add_argument("--peer-cnn-images", type=int, default=10, help="TenSEAL images timed per network")
    p.add_argument("--peer-cnn-seconds", type=float, default=120.0, help="TenSEAL's time cap per network (>= 2 images)")
    p.add_argument("--quick", action="store_true", help="insecure N 2^11, small data: a smoke test")
    p.add_argument("--one-program", action="store_true",
                   help="HELR: each iteration's steps as one compiled program (helr.train(one_program=True))")
    p.add_argument("--no-peer", action="store_true", help="skip TenSEAL")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--json", default=str(HERE / "results" / "ml.json"))
    return p.parse_args(argv)


# --------------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------------


def lr_data(quick: bool):
    from crossfhe.apps import datasets

    if quick:
        s = datasets.breast_cancer(train=100, seed=1)
        return s.x_train[:, :12], s.y_train, s.x_test[:, :12], s.y_test, "breast cancer, 12 features"
    s = datasets.digits(14, binary={5, 6, 7, 8, 9}, train=1024, flatten=True)
    return s.x_train, s.y_train, s.x_test, s.y_test, "digits 14x14, digit >= 5"


def lr_params(quick: bool):
    from crossfhe.apps import helr
    from crossfhe.ckks import bootstrap as bt

    if quick:
        return bt.bootstrappable_params(log_n=11, levels_left=helr.DEPTH, log_scale=52, dnum=3, cts_levels=2,
                                        stc_levels=2, insecure=True)
    return helr.PARAMS


# --------------------------------------------------------------------------------------------------
# Workers (one process per thread count)
# --------------------------------------------------------------------------------------------------


def _rss_gib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def helr_worker(threads: int, iterations: int, rate: float, quick: bool, one_program: bool = False) -> dict:
    from crossfhe.cli.benchutil import enable_compilation_cache, load_average, pin_threads

    pin_threads(threads)
    enable_compilation_cache()
    import jax
    import numpy as np

    from crossfhe.apps import helr
    from crossfhe.ckks import bootstrap as bt
    from crossfhe.ckks import ops

    x, y, xt, yt, what = lr_data(quick)
    params = lr_params(quick)
    z = helr.design(x, y)
    layout = helr.Layout(len(z), z.shape[1], params.slots)
    t0 = time.perf_counter()
    sk, ek = ops.keygen(params, rotations=layout.rotations())
    keys = bt.keygen(sk, ek, helr.bootstrap_config(params, layout))
    keygen_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    data = helr.encrypt_data(ek, params, x, y)
    jax.block_until_ready(data.z[-1].c1.data)
    encrypt_s = time.perf_counter() - t0
    per_iter: list[float] = []
    stats = helr.Stats()
    marks = [time.perf_counter()]

    def progress(done, total, what):
        marks.append(time.perf_counter())
        per_iter.append(marks[-1] - marks[-2])

    w = helr.train(data, keys, iterations=iterations, rate=rate, stats=stats, progress=progress,
                   one_program=one_program)
    jax.block_until_ready(w.c1.data)
    weights = layout.weights(ops.decode(ops.decrypt(sk, w))) * 2.0
    cubic, _ = helr.train_plain(z, iterations, rate)
    exact, _ = helr.train_plain(z, iterations, rate, sigmoid_kind="exact")

    def accuracy(wv):
        return float((((np.hstack([np.ones((len(xt), 1)), xt]) @ wv) > 0) == (yt == 1)).mean())

    # the first two iterations compile (the gradient programs, then the bootstrap's): the steady state is the rest
    steady = per_iter[2:] if len(per_iter) > 3 else per_iter
    return {
        "suite": "ml", "name": "helr", "peer": "crossfhe", "threads": threads, "data": what,
        "samples": len(x), "features": x.shape[1], "iterations": iterations, "rate": rate,
        "form": "one program" if one_program else "operations",
        "params": {"N": params.n, "user_levels": params.user_levels, "dnum": params.dnum,
                   "log_pq": round(params.ring.log_pq, 1) if hasattr(params.ring, "log_pq") else None},
        "layout": {"F": layout.width, "rows": layout.rows, "ciphertexts": layout.count},
        "keygen_s": keygen_s, "encrypt_s": encrypt_s, "bootstrap_key_mib": keys.nbytes() / 2**20,
        "median_ms": 1e3 * statistics.median(steady), "min_ms": 1e3 * min(steady), "max_ms": 1e3 * max(steady),
        "first_two_ms": [1e3 * t for t in per_iter[:2]], "total_s": sum(per_iter),
        "stage_s": stats.seconds, "bootstraps": stats.bootstraps,
        "accuracy": {"encrypted": accuracy(weights), "numpy_exact": accuracy(exact), "numpy_cubic": accuracy(cubic)},
        "max_weight_error": float(np.abs(weights - cubic).max()), "test_samples": len(xt),
        "peak_rss_gib": _rss_gib(), "load": load_average(), "jax": jax.__version__,
        "paper_ms": {"CROSS TPUv4": 84.0, "Cheddar H100": 40.7},
    }


def cnn_worker(threads: int, images: int, quick: bool, workdir: str) -> list[dict]:
    """Both networks: NumPy training (seeded), then encrypted inference of ``images`` test images packed in one
    batch (timed twice: the first run compiles), agreement with NumPy's predictions. Writes the weights and the
    test images for the peer into ``workdir``."""
    from crossfhe.cli.benchutil import enable_compilation_cache, load_average, pin_threads

    pin_threads(threads)
    enable_compilation_cache()
    import jax
    import numpy as np

    from crossfhe.apps import cnn, datasets
    from crossfhe.ckks import ops

    s = datasets.digits(28)
    x, y = s.x_test[:images], s.y_test[:images]
    np.savez(os.path.join(workdir, "cnn_images.npz"), x=x, y=y)
    params = cnn.parameters()
    if quick:
        from crossfhe.ckks.params import Params, ParamsLiteral

        params = Params.from_literal(ParamsLiteral(log_n=10, levels=6, log_scale=30, dnum=3, insecure=True))
    records = []
    for net_name in ("tenseal", "lola"):
        t0 = time.perf_counter()
        net = cnn.CNN(net_name, params=params, progress=False).fit(s.x_train, s.y_train, epochs=3 if quick else 20)
        train_s = time.perf_counter() - t0
        weights = os.path.join(workdir, f"cnn_{net_name}.npz")
        net.weights.save_npz(weights)
        plain = net.predict(x)
        model = net.encoded()
        sk, keys = ops.keygen(params)
        runs = []
        for _ in range(2):
            t0 = time.perf_counter()
            ct, n = cnn.encrypt_images(keys, model, x)
            jax.block_until_ready(ct.c1.data)
            t1 = time.perf_counter()
            out = cnn.infer(model, ct, keys)
            jax.block_until_ready(out.c1.data)
            t2 = time.perf_counter()
            logits = cnn.decrypt_logits(sk, out, n)
            runs.append((t1 - t0, t2 - t1, time.perf_counter() - t2))
        enc_s, infer_s, dec_s = runs[-1]
        batch_s = enc_s + infer_s + dec_s
        records.append({
            "suite": "ml", "name": f"cnn_{net_name}", "network": net_name, "peer": "crossfhe", "threads": threads,
            "label": f"CNN {net_name} per image (batch)", "images": n, "batch_capacity": params.slots,
            "params": {"N": params.n, "levels": params.levels, "input_level": model.level},
            "train_s": train_s, "first_run_s": sum(runs[0]), "batch_s": batch_s,
            "stage_s": {"encrypt": enc_s, "infer": infer_s, "decrypt": dec_s},
            "ms_per_image": 1e3 * batch_s / n, "ms_per_image_full_batch": 1e3 * batch_s / params.slots,
            "latency_ms": 1e3 * batch_s,
            "agreement": float((logits.argmax(1) == plain).mean()),
            "accuracy": {"encrypted": float((logits.argmax(1) == y).mean()), "numpy": float((plain == y).mean())},
            "max_logit_error": float(np.abs(logits - net.logits(x)).max()),
            "peak_rss_gib": _rss_gib(), "load": load_average(), "jax": jax.__version__,
            "paper_ms": {"CROSS LoLa-MNIST TPUv4": 49.0} if net_name == "lola" else {},
        })
    # encrypted weights: the blocked layout (one run = its capacity of images), second run timed
    for net_name in ("tenseal", "lola"):
        net = cnn.CNN.load_npz(os.path.join(workdir, f"cnn_{net_name}.npz"), params=params, progress=False)
        enc = net.encrypted("encrypted")
        t0 = time.perf_counter()
        enc.keygen()
        keygen_s = time.perf_counter() - t0
        xs = x[: enc.capacity]
        for _ in range(2):
            t0 = time.perf_counter()
            logits = enc.decrypt(enc.run(enc.encrypt(xs)))
            run_s = time.perf_counter() - t0
        plain = net.predict(xs)
        records.append({
            "suite": "ml", "name": f"cnn_{net_name}_encrypted_weights", "network": f"{net_name}_encw",
            "peer": "crossfhe", "threads": threads, "label": f"CNN {net_name}, enc. weights, per image",
            "images": len(xs), "batch_capacity": enc.capacity, "params": {"N": params.n},
            "keygen_and_weights_s": keygen_s, "batch_s": run_s, "latency_ms": 1e3 * run_s,
            "ms_per_image": 1e3 * run_s / len(xs), "ms_per_image_full_batch": 1e3 * run_s / len(xs),
            "agreement": float((logits.argmax(1) == plain).mean()),
            "accuracy": {"encrypted": float((logits.argmax(1) == y[: len(xs)]).mean()),
                         "numpy": float((plain == y[: len(xs)]).mean())},
            "max_logit_error": float(np.abs(logits - net.logits(xs)).max()), "load": load_average(),
        })
    nets = ("tenseal", "lola")
    records[0]["peer_files"] = {"weights": {net: os.path.join(workdir, f"cnn_{net}.npz") for net in nets},
                                "images": os.path.join(workdir, "cnn_images.npz")}
    return records


def _run_worker(spec: str, args) -> list | dict | None:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", spec, "--iterations", str(args.iterations),
           "--rate", str(args.rate), "--cnn-images", str(args.cnn_images)] + (["--quick"] if args.quick else []) \
        + (["--one-program"] if args.one_program else [])
    r = subprocess.run(cmd, capture_output=True, text=True, env=_worker_env())
    if r.returncode:
        print(f"# crossfhe worker {spec} failed:\n{r.stderr[-3000:]}", file=sys.stderr)
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------------
# The peer
# --------------------------------------------------------------------------------------------------


def _peer(args, threads: int, lr_npz: str | None, cnn: dict | None) -> dict | None:
    try:
        import tenseal  # noqa: F401
    except ImportError:
        print("# TenSEAL not installed (pip install 'crossfhe[bench]'): no peer", file=sys.stderr)
        return None
    cmd = [sys.executable, str(HERE / "tenseal_ml_peer.py"), "--threads", str(threads)]
    if lr_npz:
        cmd += ["--lr-data", lr_npz, "--lr-iterations", str(args.peer_lr_iterations)]  # the tutorial's rate
    if cnn:
        for net, path in cnn["weights"].items():
            cmd += ["--cnn-weights", f"{net}={path}"]
        cmd += ["--cnn-images", cnn["images"], "--cnn-count", str(args.peer_cnn_images),
                "--cnn-max-seconds", str(args.peer_cnn_seconds)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=_worker_env())
    if r.returncode:
        print(f"# TenSEAL peer failed:\n{r.stderr[-3000:]}", file=sys.stderr)
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    args = _parse(argv)
    if args.worker:
        kind, threads = args.worker.split(":")[:2]
        if kind == "helr":
            out = helr_worker(int(threads), args.iterations, args.rate, args.quick, args.one_program)
        else:
            out = cnn_worker(int(threads), args.cnn_images, args.quick, args.worker.split(":", 2)[2])
        print(json.dumps(out))
        return 0
    import numpy as np

    parts = set(args.parts.split(","))
    threads = [int(t) for t in args.threads.split(",")]
    if args.quick:
        args.iterations = min(args.iterations, 3)
        args.cnn_images = min(args.cnn_images, 4)
        args.peer_lr_iterations = 1
        args.peer_cnn_images = 1
    records: list[dict] = []
    tmp = tempfile.mkdtemp(prefix="crossfhe-bench-ml-")
    lr_npz = None
    if "helr" in parts:
        x, y, xt, yt, _ = lr_data(args.quick)
        lr_npz = os.path.join(tmp, "lr.npz")
        np.savez(lr_npz, x=x, y=y, x_test=xt, y_test=yt)
    cnn_files = None
    for t in threads:
        ours_lr = _run_worker(f"helr:{t}", args) if "helr" in parts else None
        if ours_lr:
            records.append(ours_lr)
            print(f"# HELR {t} thread(s): {ours_lr['median_ms']:.0f} ms per iteration, accuracy "
                  f"{ours_lr['accuracy']['encrypted']:.4f}", flush=True)
        ours_cnn = _run_worker(f"cnn:{t}:{tmp}", args) if "cnn" in parts else None
        if ours_cnn:
            records.extend(ours_cnn)
            cnn_files = ours_cnn[0].get("peer_files") if ours_cnn else None
        if args.no_peer:
            continue
        peer = _peer(args, t, lr_npz if ours_lr else None, cnn_files)
        if peer is None:
            continue
        peer.update(suite="ml", peer="tenseal", threads=t)
        records.append(peer)
        lr = peer.get("lr") or {}
        if ours_lr and lr.get("ms_per_iteration"):
            ours_lr["peer_median_ms"] = lr["ms_per_iteration"]
            ours_lr["ratio"] = ours_lr["median_ms"] / lr["ms_per_iteration"]
        for rec in ours_cnn or []:
            peer_net = (peer.get("cnn") or {}).get(rec.get("network"), {})
            if peer_net.get("ms_per_image") and rec.get("ms_per_image"):
                rec["peer_ms_per_image"] = peer_net["ms_per_image"]
                rec["ratio"] = rec["ms_per_image"] / peer_net["ms_per_image"]
                rec["ratio_full_batch"] = rec["ms_per_image_full_batch"] / peer_net["ms_per_image"]
                rec["ratio_latency"] = rec["latency_ms"] / peer_net["ms_per_image"]
    _table(records)
    print(json.dumps(records))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(records, indent=1))
    return 0


def _table(records: list[dict]) -> None:
    print(f"\n{'workload':<34}{'thr':>4}{'peer':>10}{'ms':>10}{'ours/peer':>10}{'accuracy / agreement':>24}")
    for r in records:
        if r.get("peer") == "crossfhe" and r["name"] == "helr":
            acc = r["accuracy"]
            label = f"HELR iteration ({r['samples']} x {r['features']})"
            print(f"{label:<34}{r['threads']:>4}{'crossfhe':>10}{r['median_ms']:>10.0f}"
                  f"{r.get('ratio', float('nan')):>10.3f}   enc {acc['encrypted']:.4f} / numpy "
                  f"{acc['numpy_exact']:.4f}")
            st = r["stage_s"]
            it = max(1, r["iterations"])
            print(f"{'':<38}mean s per iteration (bootstraps apart): {st['iteration'] / it:.2f}, "
                  f"bootstrap {st['bootstrap'] / max(1, r['bootstraps']):.2f}; keygen {r['keygen_s']:.0f} s; "
                  f"max weight error {r['max_weight_error']:.2e}")
        elif r.get("peer") == "crossfhe":
            print(f"{r.get('label', r['name']):<34}{r['threads']:>4}{'crossfhe':>10}{r.get('ms_per_image', 0):>10.1f}"
                  f"{r.get('ratio', float('nan')):>10.3f}   agree {r.get('agreement', float('nan')):.4f}, "
                  f"acc {r['accuracy']['encrypted']:.4f}")
            print(f"{'':<38}{r['images']} images in {r['batch_s']:.1f} s (latency); {r['ms_per_image_full_batch']:.2f}"
                  f" ms per image at a full batch of {r['batch_capacity']}; max logit error {r['max_logit_error']:.1e}")
        elif r.get("peer") == "tenseal":
            lr = r.get("lr") or {}
            if lr.get("ms_per_iteration"):
                print(f"{'HELR iteration (TenSEAL tutorial)':<34}{r['threads']:>4}{'tenseal':>10}"
                      f"{lr['ms_per_iteration']:>10.0f}{'':>10}   {lr.get('note', '')}")
            for net, c in (r.get("cnn") or {}).items():
                if c.get("ms_per_image"):
                    print(f"{net + ' (TenSEAL)':<34}{r['threads']:>4}{'tenseal':>10}{c['ms_per_image']:>10.1f}"
                          f"{'':>10}   agree {c.get('agreement', float('nan')):.4f}")
                else:
                    print(f"{net + ' (TenSEAL)':<34}{r['threads']:>4}{'tenseal':>10}{'-':>10}{'':>10}   "
                          f"{c.get('error', c.get('note', ''))}")


if __name__ == "__main__":
    raise SystemExit(main())
