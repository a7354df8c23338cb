"""TenSEAL (0.3.x) running the ML workloads of ``bench ml`` the way its own tutorials do, for a side-by-side run.

    python benchmarks/tenseal_ml.py [--lr-data LR.npz --lr-iterations 1] [--cnn-weights W.npz --cnn-images X.npz
                                    --cnn-net tenseal --cnn-count 20] [--threads 1]

Prints one JSON object (stdout's last line): {"lr": {...}, "cnn": {net: {...}}, "tenseal": version, ...}.

* Logistic regression, TenSEAL's tutorial "Encrypted Logistic Regression" (tutorial 1): every sample its own
  CKKSVector, forward ``x.dot(w) + b``, the sigmoid 0.5 + 0.197 x - 0.004 x^3 (``polyval``), the gradient summed over
  the samples, the weights updated and then decrypted and re-encrypted (TenSEAL has no bootstrapping). The
  tutorial's context: N 8192, coeff_mod_bit_sizes [40, 21, 21, 21, 21, 21, 21, 40], scale 2^21, Galois keys.
  ``LR.npz``: x [n, f], y [n], optional x_test, y_test. Timed per iteration (the samples' encryption apart).
* CNN, TenSEAL's tutorial "Encrypted Convolution on MNIST" (tutorial 4): ``im2col_encoding`` of one image,
  ``conv2d_im2col`` per kernel plus its bias, ``pack_vectors``, square, ``mm`` (fc1), square, ``mm`` (fc2). The
  tutorial's context for its network (N 8192, [31, 26 x 6, 31], scale 2^26); LoLa's 169 windows of 25 pixels
  (4225 slots) need N 16384 (the same chain, 218 bits <= 438: 128-bit). ``W.npz``: the keys of
  ``crossfhe.apps.cnn.Weights.save_npz``; ``X.npz``: x [n, 28, 28] in [0, 1], y [n]. Timed per image (the
  image's encryption included, as the tutorial's loop does), predictions compared with NumPy's inference.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np


def _log(*a):
    print(*a, file=sys.stderr, flush=True)


def lr(path: str, iterations: int, rate: float, threads: int) -> dict:
    import tenseal as ts

    d = np.load(path)
    x, y = d["x"], d["y"].astype(np.float64)
    ctx = ts.context(ts.SCHEME_TYPE.CKKS, poly_modulus_degree=8192,
                     coeff_mod_bit_sizes=[40, 21, 21, 21, 21, 21, 21, 40], n_threads=threads)
    ctx.global_scale = 2**21
    ctx.generate_galois_keys()
    t0 = time.perf_counter()
    enc_x = [ts.ckks_vector(ctx, row.tolist()) for row in x]
    enc_y = [ts.ckks_vector(ctx, [float(v)]) for v in y]
    encrypt_s = time.perf_counter() - t0
    f = x.shape[1]
    w, b = np.zeros(f), 0.0
    times = []
    for it in range(iterations):
        t0 = time.perf_counter()
        ew, eb = ts.ckks_vector(ctx, w.tolist()), ts.ckks_vector(ctx, [b])
        dw = db = None
        for ex, ey in zip(enc_x, enc_y):
            out = ex.dot(ew) + eb
            out = out.polyval([0.5, 0.197, 0, -0.004])
            diff = out - ey
            gw = ex * diff
            dw = gw if dw is None else dw + gw
            db = diff if db is None else db + diff
        # the tutorial's update (gradient step with its 0.05 weight decay), then decryption and re-encryption
        ew = ew - dw * (rate / len(x)) - ew * 0.05
        eb = eb - db * (rate / len(x))
        w, b = np.asarray(ew.decrypt()), float(eb.decrypt()[0])
        times.append(time.perf_counter() - t0)
        _log(f"tenseal lr iteration {it + 1}: {times[-1]:.1f} s")
    out = {"ms_per_iteration": 1e3 * statistics.median(times), "iterations": iterations, "samples": len(x),
           "features": f, "encrypt_s": encrypt_s, "ms_per_sample_iteration": 1e3 * statistics.median(times) / len(x),
           "params": {"N": 8192, "coeff_mod_bit_sizes": [40, 21, 21, 21, 21, 21, 21, 40], "scale_bits": 21},
           "note": "tutorial training: one ciphertext per sample, weights decrypted and re-encrypted each iteration "
                   "(no bootstrapping in TenSEAL)"}
    if "x_test" in d.files:
        out["test_accuracy_after"] = float((((d["x_test"] @ w + b) > 0) == (d["y_test"] == 1)).mean())
    return out


def _forward(wts, img: np.ndarray) -> np.ndarray:
    pad = int(wts["pad"])
    x = np.pad(img, ((0, pad), (0, pad)))
    cw, stride = wts["conv_w"], int(wts["stride"])
    m, k, _ = cw.shape
    out = (x.shape[0] - k) // stride + 1
    h = np.empty((m, out, out))
    for r in range(out):
        for c in range(out):
            h[:, r, c] = np.einsum("mij,ij->m", cw, x[r * stride: r * stride + k, c * stride: c * stride + k])
    h = (h + wts["conv_b"][:, None, None]).reshape(-1) ** 2
    h = (wts["fc1_w"] @ h + wts["fc1_b"]) ** 2
    return wts["fc2_w"] @ h + wts["fc2_b"]


def cnn(weights: str, images: str, count: int, threads: int) -> dict:
    import tenseal as ts

    wts = {k: np.asarray(v) for k, v in np.load(weights).items()}
    data = np.load(images)
    x, y = data["x"][:count], data["y"][:count]
    pad, stride = int(wts["pad"]), int(wts["stride"])
    m, k, _ = wts["conv_w"].shape
    side = 28 + pad
    windows = ((side - k) // stride + 1) ** 2
    n = 8192 if windows * k * k <= 4096 else 16384
    bits = [31, 26, 26, 26, 26, 26, 26, 31]
    ctx = ts.context(ts.SCHEME_TYPE.CKKS, poly_modulus_degree=n, coeff_mod_bit_sizes=bits, n_threads=threads)
    ctx.global_scale = 2**26
    ctx.generate_galois_keys()
    fc1 = wts["fc1_w"].T.tolist()
    fc2 = wts["fc2_w"].T.tolist()
    kernels = [wts["conv_w"][i].tolist() for i in range(m)]
    times, agree, correct = [], 0, 0
    for img, label in zip(x, y):
        t0 = time.perf_counter()
        enc, nb = ts.im2col_encoding(ctx, np.pad(img, ((0, pad), (0, pad))).tolist(), k, k, stride)
        chans = [enc.conv2d_im2col(kern, nb) + float(bias) for kern, bias in zip(kernels, wts["conv_b"])]
        h = ts.CKKSVector.pack_vectors(chans)
        h.square_()
        h = h.mm(fc1) + wts["fc1_b"].tolist()
        h.square_()
        h = h.mm(fc2) + wts["fc2_b"].tolist()
        logits = np.asarray(h.decrypt())
        times.append(time.perf_counter() - t0)
        agree += int(logits.argmax() == _forward(wts, img).argmax())
        correct += int(logits.argmax() == label)
    return {"ms_per_image": 1e3 * statistics.median(times), "ms_per_image_mean": 1e3 * statistics.mean(times),
            "images": len(x), "agreement": agree / len(x), "accuracy": correct / len(x),
            "params": {"N": n, "coeff_mod_bit_sizes": bits, "scale_bits": 26},
            "note": "tutorial inference: one image per ciphertext (im2col), encryption and decryption included"}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--lr-data")
    p.add_argument("--lr-iterations", type=int, default=1)
    p.add_argument("--lr-rate", type=float, default=1.0)
    p.add_argument("--cnn-weights", action="append", default=[], help="NET=PATH (repeatable)")
    p.add_argument("--cnn-images")
    p.add_argument("--cnn-count", type=int, default=20)
    args = p.parse_args(argv)
    import tenseal as ts

    out = {"tenseal": getattr(ts, "__version__", "?"), "threads": args.threads, "lr": None, "cnn": {}}
    if args.lr_data:
        out["lr"] = lr(args.lr_data, args.lr_iterations, args.lr_rate, args.threads)
    for spec in args.cnn_weights:
        net, path = spec.split("=", 1)
        try:
            out["cnn"][net] = cnn(path, args.cnn_images, args.cnn_count, args.threads)
        except Exception as e:  # a network TenSEAL cannot run is reported, not fatal
            out["cnn"][net] = {"error": f"{type(e).__name__}: {e}"}
        _log(f"tenseal cnn {net}: {out['cnn'][net]}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
