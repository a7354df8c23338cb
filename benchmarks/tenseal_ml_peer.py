"""TenSEAL 0.3.x running the ML workloads of ``bench ml`` (issue 28) the way its own tutorials do: the peer process.

    python benchmarks/tenseal_ml_peer.py [--lr-data LR.npz [--lr-iterations 1] [--lr-samples N] [--lr-rate 1.0]]
                                         [--cnn-weights [NET=]W.npz ... --cnn-images X.npz [--cnn-count 20]]
                                         [--threads 1] [--json PATH]
    python benchmarks/tenseal_ml_peer.py --self-test

Prints one JSON object on stdout (one line; bench_ml.py reads the last line), logs and a short table on stderr:
``{"peer": "tenseal", "tenseal": "0.3.18", "threads": T, "threads_applied": bool, "lr": {...} | null,
"cnn": {NET: {...}}, "notes": [...], "load": [1, 5, 15 min], "wall_s": s}``.

**Logistic regression** (``lr``), TenSEAL's tutorial 1 "Encrypted Logistic Regression": every sample its own
``CKKSVector`` (x) and its label another (y); per iteration the weights and bias are encrypted, then per sample
forward ``enc_x.dot(w) + b``, the sigmoid 0.5 + 0.197 z - 0.004 z^3 (``polyval``, the tutorial's, from Kim et al.
2018), backward ``dw += enc_x * (out - y)``, ``db += out - y``; then the update ``w -= rate * dw / n + decay * w``,
``b -= rate * db / n`` (the tutorial's plain gradient descent: its rate is 1 and its ``decay`` 0.05, a
regularization that keeps ``w.x + b`` inside the cubic's range [-5, 5]), and the weights are decrypted (and
re-encrypted at the next iteration): TenSEAL has no bootstrapping, so this is how the tutorial trains for more
iterations than its levels allow. Context: the tutorial's, N 8192, coeff_mod_bit_sizes [40, 21 x 6, 40], scale 2^21,
Galois keys (``--lr-context tutorial``, the default; ``precise``: N 16384, [60, 40 x 6, 60], scale 2^40, for a
check that the training is computed right, see the notes). Weights start at zero. ``LR.npz``: x float64[n, f],
y int[n] (0/1), optional x_test, y_test.
Reported: ms per iteration (weights' encryption, all samples' forward and backward, update, decryption; median of
the iterations run), ms per sample-iteration, the samples' encryption apart, the test accuracy of the weights
trained under encryption and of the same training in NumPy (the same cubic, and the exact sigmoid for context), and
the largest weight difference to the NumPy cubic run.

**CNN** (``cnn``), TenSEAL's tutorial 4 "Encrypted Convolution on MNIST": per image ``im2col_encoding`` (encrypts
the image), ``conv2d_im2col`` per kernel plus its bias, ``pack_vectors``, square, ``mm`` (fc1, weights transposed to
(in, out)), square, ``mm`` (fc2), decrypt, argmax. ``W.npz``: conv_w [maps, k, k], conv_b [maps], stride, pad (zero
rows/cols added at the bottom/right), fc1_w [hidden, maps out^2] (map-major flatten), fc1_b, fc2_w [10, hidden],
fc2_b (``crossfhe.apps.cnn.Weights.save_npz``). ``X.npz``: x [n, 28, 28] in [0, 1], y [n]. The network is named
from its shape ("tenseal": 4 maps 7 x 7 stride 3, hidden 64; "lola": 5 maps 5 x 5 stride 2, pad 1, hidden 100;
else the file's stem) unless given as NET=PATH. Timed per image, encryption and decryption included as in the
tutorial's loop, after one untimed warm-up image; predictions compared with NumPy inference of the same weights.

Parameters: TenSEAL's pipeline takes 6 rescales for the network's 5 multiplicative layers (``pack_vectors``
multiplies by masks: one level), so the tutorial's chain [31, 26 x 6, 31] (218 bits) is also the smallest with
its 26-bit scale that runs; [31, 26 x 5, 31] fails with "scale out of bounds" (``--self-test`` checks this).
``im2col_encoding`` pads each window to a power of two: windows x 2^ceil(log2 k^2) slots: the tutorial net
64 x 64 = 4096 (N 8192), LoLa 169 x 32 = 5408 > 4096, so N 16384 (218 <= 438 bits: 128-bit). A net that does not
fit N 32768 or fails is reported with ``"error"`` instead of aborting.

Precision: TenSEAL resets a ciphertext's scale to the global scale after every rescale (OpenMined/TenSEAL#38,
#253), though the prime it divided by is not that scale. ``params.rescale_drift`` measures the effect per level.
With the LR tutorial's 21-bit primes at N 8192 the drift reaches x6 by the sixth rescale, and key switching at a
2^21 scale adds about 0.5 to a 196-entry dot product, so the tutorial's encrypted gradients are far from exact
(1024 x 196, one step: cosine about 0.1 to NumPy's). ``--lr-context precise`` runs the same code within 1e-5 of
NumPy. For the CNN chain the drift reaches 3% (N 8192) or 7% (N 16384).

Threads: ``--threads T`` is ``ts.context(..., n_threads=T)`` (TenSEAL's dispatcher for the ops it parallelizes;
the tutorials' per-sample and per-image loops stay sequential; CKKSVector.mm was not faster with 2 here).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

LR_CONTEXTS = {  # name: (N, coeff_mod_bit_sizes, scale bits)
    "tutorial": (8192, [40, 21, 21, 21, 21, 21, 21, 40], 21),  # TenSEAL's tutorial 1
    "precise": (16384, [60, 40, 40, 40, 40, 40, 40, 60], 40),  # the same 6 levels with 40-bit primes (360 <= 438)
}
SIGMOID3 = (0.5, 0.197, 0.0, -0.004)  # the tutorial's polyval coefficients, lowest degree first
LR_DECAY = 0.05  # the tutorial's regularization in update_parameters

CNN_BITS = [31, 26, 26, 26, 26, 26, 26, 31]
CNN_SCALE_BITS = 26
CNN_LEVELS = 6  # conv, pack_vectors' masks, square, fc1, square, fc2
MAX_LOG_Q_128 = {4096: 109, 8192: 218, 16384: 438, 32768: 881}  # HE standard, SEAL's tc128 bounds

NETS = {  # pad, maps, k, stride, hidden: as crossfhe.apps.cnn.ARCHITECTURES (kept here: the peer needs no crossfhe)
    "lola": {"pad": 1, "maps": 5, "k": 5, "stride": 2, "hidden": 100},
    "tenseal": {"pad": 0, "maps": 4, "k": 7, "stride": 3, "hidden": 64},
}

NOTES = [
    "TenSEAL has no bootstrapping: the tutorial's logistic regression decrypts and re-encrypts the weights every "
    "iteration (a client round trip; the key holder sees the weights)",
    "one sample / one image per ciphertext, as the tutorials; encrypted inputs, the CNN weights in plaintext",
    "TenSEAL's CNN pipeline takes 6 rescales (pack_vectors masks), one more than the network's 5 multiplicative "
    "layers",
    "TenSEAL sets a ciphertext's scale back to the global scale after each rescale although the prime divided by "
    "differs from it: params.rescale_drift is the decryption of 1 x 1.0 x 1.0 ... after each rescale (the "
    "tutorial LR context's 21-bit primes at N 8192 lie 15-45% below 2^21: x6 after 6 rescales), and key "
    "switching at a 2^21 scale adds about 0.5 to a 196-entry dot product: the tutorial's LR parameters give "
    "gradients far from the exact ones (max_weight_error); --lr-context precise (N 16384, 40-bit primes, scale "
    "2^40) computes the same training to ~1e-6",
]


def _log(*a) -> None:
    print(*a, file=sys.stderr, flush=True)


def _load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else []


def _rss_gib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def tenseal_version() -> str:
    import tenseal as ts

    return getattr(ts, "__version__", "?")


def make_context(n: int, bits: list[int], scale_bits: int, threads: int):
    """A CKKS context with Galois keys; (context, threads_applied, keygen seconds). ``n_threads`` is passed where
    this TenSEAL accepts it."""
    import tenseal as ts

    t0 = time.perf_counter()
    try:
        ctx = ts.context(ts.SCHEME_TYPE.CKKS, poly_modulus_degree=n, coeff_mod_bit_sizes=list(bits),
                         n_threads=threads)
        applied = True
    except TypeError:  # an older TenSEAL without n_threads
        ctx = ts.context(ts.SCHEME_TYPE.CKKS, poly_modulus_degree=n, coeff_mod_bit_sizes=list(bits))
        applied = False
    ctx.global_scale = 2.0**scale_bits
    ctx.generate_galois_keys()
    return ctx, applied, time.perf_counter() - t0


def rescale_drift(ctx, levels: int) -> list[float]:
    """Decryptions of [1.0] multiplied by the plaintext 1.0 once, twice, ... ``levels`` times: how far TenSEAL's
    scale (reset to the global scale after each rescale) is from the true one at each level (1.0: exact)."""
    import tenseal as ts

    v, out = ts.ckks_vector(ctx, [1.0]), []
    for _ in range(levels):
        v = v * 1.0
        out.append(round(float(v.decrypt()[0]), 5))
    return out


def _params(n: int, bits: list[int], scale_bits: int, ctx=None) -> dict:
    out = {"N": n, "coeff_mod_bit_sizes": list(bits), "scale_bits": scale_bits, "log_qp": sum(bits),
           "max_log_qp_128": MAX_LOG_Q_128.get(n), "levels": len(bits) - 2, "galois_keys": True,
           "security": "128-bit (SEAL's default tc128 check)"}
    if ctx is not None:
        out["rescale_drift"] = rescale_drift(ctx, len(bits) - 2)
    return out


def _timing(ts_: list[float]) -> dict:
    return {"median": 1e3 * statistics.median(ts_), "mean": 1e3 * statistics.mean(ts_), "min": 1e3 * min(ts_),
            "max": 1e3 * max(ts_)}


# --------------------------------------------------------------------------------------------------
# Logistic regression (tutorial 1)
# --------------------------------------------------------------------------------------------------


def sigmoid3(z: np.ndarray) -> np.ndarray:
    c0, c1, c2, c3 = SIGMOID3
    return c0 + c1 * z + c2 * z**2 + c3 * z**3


def lr_train_numpy(x, y, iterations: int, rate: float, decay: float = LR_DECAY, sigmoid: str = "cubic"):
    """The tutorial's training in NumPy (float64) from zero weights: (w, b)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    f = sigmoid3 if sigmoid == "cubic" else (lambda z: 1.0 / (1.0 + np.exp(-z)))
    w, b = np.zeros(x.shape[1]), 0.0
    for _ in range(iterations):
        diff = f(x @ w + b) - y
        w = w - rate * (x.T @ diff) / len(x) - decay * w
        b = b - rate * diff.sum() / len(x)
    return w, b


def accuracy(w, b, x, y) -> float:
    """Fraction of samples with (x.w + b > 0) == (y == 1): sigmoid > 0.5, as the tutorial's |y - out| < 0.5."""
    return float((((np.asarray(x) @ w + b) > 0) == (np.asarray(y) == 1)).mean())


def lr_train_tenseal(ctx, x, y, iterations: int, rate: float, decay: float = LR_DECAY, progress=_log) -> dict:
    """Encrypt the samples, train ``iterations`` iterations as the tutorial (weights from zero), return the
    decrypted weights and the times (seconds)."""
    import tenseal as ts

    n, f = x.shape
    t0 = time.perf_counter()
    enc_x = [ts.ckks_vector(ctx, row.tolist()) for row in x]
    enc_y = [ts.ckks_vector(ctx, [float(v)]) for v in y]
    encrypt_s = time.perf_counter() - t0
    progress(f"tenseal lr: {n} samples x {f} features encrypted in {encrypt_s:.1f} s")
    w, b = np.zeros(f), 0.0
    c0, c1, c2, c3 = SIGMOID3
    iters, stages = [], {"encrypt_weights": [], "forward_backward": [], "update": [], "decrypt": []}
    for it in range(iterations):
        t_start = time.perf_counter()
        ew, eb = ts.ckks_vector(ctx, w.tolist()), ts.ckks_vector(ctx, [b])  # EncryptedLR.encrypt
        t1 = time.perf_counter()
        dw = db = None
        for ex, ey in zip(enc_x, enc_y):
            out = (ex.dot(ew) + eb).polyval([c0, c1, c2, c3])  # forward + sigmoid
            diff = out - ey  # backward
            g = ex * diff
            dw = g if dw is None else dw + g
            db = diff if db is None else db + diff
        t2 = time.perf_counter()
        ew = ew - dw * (rate / n) - ew * decay  # update_parameters
        eb = eb - db * (rate / n)
        t3 = time.perf_counter()
        w, b = np.asarray(ew.decrypt(), dtype=np.float64), float(eb.decrypt()[0])  # EncryptedLR.decrypt
        t4 = time.perf_counter()
        iters.append(t4 - t_start)
        for k, v in zip(stages, (t1 - t_start, t2 - t1, t3 - t2, t4 - t3)):
            stages[k].append(v)
        progress(f"tenseal lr iteration {it + 1}/{iterations}: {iters[-1]:.1f} s "
                 f"({1e3 * (t2 - t1) / n:.1f} ms per sample)")
    return {"w": w, "b": b, "encrypt_s": encrypt_s, "iteration_s": iters, "stage_s": stages}


def _cosine(a, b) -> float | None:
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return float(a @ b / (na * nb)) if na and nb else None


def lr_benchmark(path: str, iterations: int, samples: int | None, rate: float, decay: float, threads: int,
                 context: str = "tutorial") -> dict:
    d = np.load(path)
    x_all, y_all = np.asarray(d["x"], np.float64), np.asarray(d["y"]).astype(np.int64)
    n = len(x_all) if samples is None else min(int(samples), len(x_all))
    x, y = x_all[:n], y_all[:n]
    lr_n, lr_bits, lr_scale = LR_CONTEXTS[context]
    ctx, applied, keygen_s = make_context(lr_n, lr_bits, lr_scale, threads)
    r = lr_train_tenseal(ctx, x, y, iterations, rate, decay)
    cubic = lr_train_numpy(x, y, iterations, rate, decay)
    exact = lr_train_numpy(x, y, iterations, rate, decay, sigmoid="exact")
    it_ms = 1e3 * statistics.median(r["iteration_s"])
    out = {
        "workload": "TenSEAL tutorial 1: encrypted logistic-regression training",
        "context": context, "params": _params(lr_n, lr_bits, lr_scale, ctx), "threads": threads,
        "threads_applied": applied,
        "samples": n, "samples_in_file": len(x_all), "features": x.shape[1], "iterations": iterations,
        "rate": rate, "decay": decay, "init": "zeros", "sigmoid": list(SIGMOID3),
        "keygen_ms": 1e3 * keygen_s, "encrypt_ms": 1e3 * r["encrypt_s"],
        "encrypt_ms_per_sample": 1e3 * r["encrypt_s"] / n,
        "ms_per_iteration": it_ms, "iteration_ms": [1e3 * t for t in r["iteration_s"]],
        "ms_per_sample_iteration": it_ms / n,
        "stage_ms": {k: 1e3 * statistics.median(v) for k, v in r["stage_s"].items()},
        "max_weight_error": float(max(np.abs(r["w"] - cubic[0]).max(), abs(r["b"] - cubic[1]))),
        "weight_norms": {"tenseal": float(np.linalg.norm(np.append(r["w"], r["b"]))),
                         "numpy_cubic": float(np.linalg.norm(np.append(*cubic)))},
        "weight_cosine": _cosine(np.append(r["w"], r["b"]), np.append(*cubic)),
        "accuracy": {"train": {"tenseal": accuracy(r["w"], r["b"], x, y), "numpy_cubic": accuracy(*cubic, x, y),
                               "numpy_exact": accuracy(*exact, x, y)}},
        "peak_rss_gib": _rss_gib(),
        "note": "tutorial training: one ciphertext per sample, per iteration the weights encrypted, all samples' "
                "forward/backward, the update, the weights decrypted (no bootstrapping in TenSEAL); "
                "ms_per_iteration includes the weights' encryption and decryption, not the samples' encryption",
    }
    if "x_test" in d.files and "y_test" in d.files:
        xt, yt = np.asarray(d["x_test"], np.float64), np.asarray(d["y_test"])
        out["test_samples"] = len(xt)
        out["accuracy"]["test"] = {"tenseal": accuracy(r["w"], r["b"], xt, yt),
                                   "numpy_cubic": accuracy(*cubic, xt, yt), "numpy_exact": accuracy(*exact, xt, yt),
                                   "initial": accuracy(np.zeros(x.shape[1]), 0.0, xt, yt)}
    return out


# --------------------------------------------------------------------------------------------------
# CNN inference (tutorial 4)
# --------------------------------------------------------------------------------------------------


def load_weights(path: str) -> dict:
    with np.load(path) as f:
        missing = {"conv_w", "conv_b", "fc1_w", "fc1_b", "fc2_w", "fc2_b", "stride", "pad"} - set(f.files)
        if missing:
            raise ValueError(f"{path}: missing {sorted(missing)}")
        w = {k: np.asarray(f[k], np.float64) for k in ("conv_w", "conv_b", "fc1_w", "fc1_b", "fc2_w", "fc2_b")}
        w["stride"], w["pad"] = int(f["stride"]), int(f["pad"])
    return w


def net_shape(w: dict, side: int = 28) -> dict:
    maps, k, _ = w["conv_w"].shape
    out = (side + w["pad"] - k) // w["stride"] + 1
    windows = out * out
    enc = windows * (1 << math.ceil(math.log2(k * k)))  # im2col_encoding's vector: windows x k^2 padded to 2^j
    return {"maps": maps, "k": k, "stride": w["stride"], "pad": w["pad"], "out": out, "windows": windows,
            "hidden": w["fc1_w"].shape[0], "conv_outputs": maps * windows, "im2col_slots": enc}


def net_name(w: dict) -> str | None:
    s = net_shape(w)
    for name, a in NETS.items():
        if all(s[key] == a[key] for key in ("pad", "maps", "k", "stride", "hidden")):
            return name
    return None


def cnn_forward_numpy(w: dict, images) -> np.ndarray:
    """Plaintext inference of [n, 28, 28] images: logits float64[n, 10] (as crossfhe.apps.cnn.forward)."""
    x = np.pad(np.asarray(images, np.float64), ((0, 0), (0, w["pad"]), (0, w["pad"])))
    maps, k, _ = w["conv_w"].shape
    out = (x.shape[1] - k) // w["stride"] + 1
    idx = np.arange(out)[:, None] * w["stride"] + np.arange(k)[None, :]
    win = x[:, idx[:, None, :, None], idx[None, :, None, :]].reshape(len(x), out * out, k * k)
    a1 = win @ w["conv_w"].reshape(maps, k * k).T + w["conv_b"]  # [n, windows, maps]
    h1 = a1.transpose(0, 2, 1).reshape(len(x), -1) ** 2  # map-major
    h2 = (h1 @ w["fc1_w"].T + w["fc1_b"]) ** 2
    return h2 @ w["fc2_w"].T + w["fc2_b"]


class EncConvNet:
    """The tutorial's EncConvNet: plaintext weights as lists, fc weights transposed to (in, out)."""

    def __init__(self, w: dict):
        self.k, self.stride, self.pad = w["conv_w"].shape[1], w["stride"], w["pad"]
        self.conv_w = [kern.tolist() for kern in w["conv_w"]]
        self.conv_b = [float(v) for v in w["conv_b"]]
        self.fc1_w, self.fc1_b = w["fc1_w"].T.tolist(), w["fc1_b"].tolist()
        self.fc2_w, self.fc2_b = w["fc2_w"].T.tolist(), w["fc2_b"].tolist()

    def run(self, ctx, image: np.ndarray, stages: dict | None = None) -> np.ndarray:
        import tenseal as ts

        t0 = time.perf_counter()
        img = np.pad(np.asarray(image, np.float64), ((0, self.pad), (0, self.pad)))
        enc_x, windows_nb = ts.im2col_encoding(ctx, img.tolist(), self.k, self.k, self.stride)
        t1 = time.perf_counter()
        chans = [enc_x.conv2d_im2col(kern, windows_nb) + bias for kern, bias in zip(self.conv_w, self.conv_b)]
        enc = ts.CKKSVector.pack_vectors(chans)
        t2 = time.perf_counter()
        enc.square_()
        enc = enc.mm(self.fc1_w) + self.fc1_b
        enc.square_()
        enc = enc.mm(self.fc2_w) + self.fc2_b
        t3 = time.perf_counter()
        logits = np.asarray(enc.decrypt(), dtype=np.float64)
        t4 = time.perf_counter()
        if stages is not None:
            for k, v in zip(("encrypt", "conv_pack", "fc", "decrypt"), (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                stages.setdefault(k, []).append(v)
        return logits


def cnn_parameters(shape: dict) -> tuple[int, list[int]]:
    """The smallest N whose slots hold the im2col vector and the packed conv outputs, and the chain."""
    need = max(shape["im2col_slots"], shape["conv_outputs"], shape["hidden"])
    for n in (8192, 16384, 32768):
        if need <= n // 2:
            return n, list(CNN_BITS)
    raise ValueError(f"needs {need} slots: more than N 32768 gives")


def cnn_benchmark(weights_path: str, images_path: str, count: int, threads: int, net: str | None = None,
                  max_seconds: float | None = None, bits: list[int] | None = None,
                  warmup: bool = True) -> tuple[str, dict]:
    """(network name, record); a network that cannot run (or weights that cannot be read) gives a record with
    "error" instead of raising."""
    name = net or Path(weights_path).stem
    rec: dict = {"workload": "TenSEAL tutorial 4: encrypted convolution (im2col), one image per ciphertext",
                 "network": name, "threads": threads}
    try:
        w = load_weights(weights_path)
        shape = net_shape(w)
        name = net or net_name(w) or name
        rec.update(network=name, shape=shape)
        n, chain = cnn_parameters(shape)
        chain = list(bits) if bits else chain
        rec["params"] = _params(n, chain, CNN_SCALE_BITS)  # the drift is added once the context exists
        rec["params"]["chain_choice"] = (
            f"N {n}: the smallest whose {n // 2} slots hold the im2col vector ({shape['im2col_slots']} = "
            f"{shape['windows']} windows x k^2 padded to a power of two); chain {chain} ({sum(chain)} bits <= "
            f"{MAX_LOG_Q_128[n]}): 6 rescales at the tutorial's 26-bit scale, one fewer fails")
        with np.load(images_path) as f:
            x, y = np.asarray(f["x"], np.float64)[:count], np.asarray(f["y"])[:count]
        ctx, applied, keygen_s = make_context(n, chain, CNN_SCALE_BITS, threads)
        rec.update(threads_applied=applied, keygen_ms=1e3 * keygen_s)
        rec["params"]["rescale_drift"] = rescale_drift(ctx, len(chain) - 2)
        model = EncConvNet(w)
        if warmup:
            t0 = time.perf_counter()
            model.run(ctx, x[0])  # warm-up (first use of the keys and pools), not counted
            rec["warmup_ms"] = 1e3 * (time.perf_counter() - t0)
        ref = cnn_forward_numpy(w, x)
        times, stages, logits = [], {}, []
        start = time.perf_counter()
        for i, img in enumerate(x):
            t0 = time.perf_counter()
            logits.append(model.run(ctx, img, stages))
            times.append(time.perf_counter() - t0)
            _log(f"tenseal cnn {name} image {i + 1}/{len(x)}: {1e3 * times[-1]:.0f} ms")
            if max_seconds is not None and i >= 1 and time.perf_counter() - start > max_seconds:
                break
        got = np.array(logits)
        m = len(got)
        t = _timing(times)
        rec.update(
            images=m, images_asked=int(count), ms_per_image=t["median"], ms_per_image_mean=t["mean"],
            ms_per_image_min=t["min"], ms_per_image_max=t["max"],
            stage_ms={k: 1e3 * statistics.median(v) for k, v in stages.items()},
            agreement=float((got.argmax(1) == ref[:m].argmax(1)).mean()),
            accuracy=float((got.argmax(1) == y[:m]).mean()), accuracy_numpy=float((ref[:m].argmax(1) == y[:m]).mean()),
            max_logit_error=float(np.abs(got - ref[:m]).max()), logit_scale=float(np.abs(ref[:m]).max()),
            peak_rss_gib=_rss_gib(),
            note="per image: im2col encryption, conv2d_im2col per kernel + bias, pack_vectors, square, mm, square, "
                 "mm, decryption (the tutorial's loop); median after one warm-up image")
    except Exception as e:  # a network TenSEAL cannot run is reported, not fatal
        rec["error"] = f"{type(e).__name__}: {e}"
        _log(f"tenseal cnn {name}: {rec['error']}")
    return name, rec


# --------------------------------------------------------------------------------------------------
# Self-test
# --------------------------------------------------------------------------------------------------


def random_weights(net: str, seed: int = 0) -> dict:
    """Random weights of ``net``'s shapes, scaled so that every layer's values stay O(1) (logits within the
    chain's last prime: |logit| < 2^(31 - 26))."""
    a = NETS[net]
    rng = np.random.default_rng(seed)
    k, maps, hidden = a["k"], a["maps"], a["hidden"]
    out = (28 + a["pad"] - k) // a["stride"] + 1
    fan1 = maps * out * out
    return {"conv_w": rng.normal(0, 1 / k, (maps, k, k)), "conv_b": rng.normal(0, 0.1, maps),
            "fc1_w": rng.normal(0, 1 / math.sqrt(fan1), (hidden, fan1)), "fc1_b": rng.normal(0, 0.1, hidden),
            "fc2_w": rng.normal(0, 1 / math.sqrt(hidden), (10, hidden)), "fc2_b": rng.normal(0, 0.1, 10),
            "stride": np.int64(a["stride"]), "pad": np.int64(a["pad"])}


def write_inputs(folder: str, *, lr_samples: int = 32, images: int = 2, nets=("tenseal", "lola")) -> dict:
    """Temp npz files: the HELR data (digits 14 x 14, digit >= 5; the first ``lr_samples`` training samples,
    all test samples), ``images`` 28 x 28 digits, random weights per net. Paths by name."""
    from crossfhe.apps import datasets

    s = datasets.digits(14, binary={5, 6, 7, 8, 9}, train=1024, flatten=True)
    paths = {"lr": os.path.join(folder, "lr.npz"), "images": os.path.join(folder, "images.npz")}
    np.savez(paths["lr"], x=s.x_train[:lr_samples], y=s.y_train[:lr_samples], x_test=s.x_test, y_test=s.y_test)
    c = datasets.digits(28)
    np.savez(paths["images"], x=c.x_test[:images], y=c.y_test[:images])
    for i, net in enumerate(nets):
        paths[net] = os.path.join(folder, f"{net}.npz")
        np.savez(paths[net], **random_weights(net, seed=i))
    return paths


def five_level_chain_fails(folder_paths: dict, threads: int) -> str:
    """Run the tutorial net once at [31, 26 x 5, 31]: TenSEAL's error message (expected "scale out of bounds"),
    or "ran" if it did."""
    w = load_weights(folder_paths["tenseal"])
    with np.load(folder_paths["images"]) as f:
        img = np.asarray(f["x"][0], np.float64)
    ctx, _, _ = make_context(8192, [31] + [26] * 5 + [31], CNN_SCALE_BITS, threads)
    try:
        EncConvNet(w).run(ctx, img)
        return "ran"
    except Exception as e:
        return f"{type(e).__name__}: {e}"


def self_test(threads: int = 1, *, lr_samples: int = 32, images: int = 2, nets=("tenseal", "lola"),
              lr_iterations: int = 1, precise_samples: int = 8, check_chain: bool = True) -> dict:
    """Random-weight nets and a few digits in temp npz files, run through the same functions as a real run.
    Checks: CNN predictions equal NumPy's, logits within 0.25 (|logits| <~ 1); LR at the tutorial's context runs
    and its weights point the NumPy cubic run's way (cosine > 0.5: its parameters are too coarse for closer, see
    NOTES); LR at ``precise`` (on ``precise_samples`` samples) within 1e-4 of NumPy's cubic run; the tutorial net
    fails at [31, 26 x 5, 31]."""
    with tempfile.TemporaryDirectory(prefix="tenseal-ml-peer-") as tmp:
        paths = write_inputs(tmp, lr_samples=lr_samples, images=images, nets=nets)
        lr = lr_benchmark(paths["lr"], lr_iterations, None, 1.0, LR_DECAY, threads)
        precise = (lr_benchmark(paths["lr"], lr_iterations, precise_samples, 1.0, LR_DECAY, threads, "precise")
                   if precise_samples else None)
        cnn = {}
        for net in nets:
            name, rec = cnn_benchmark(paths[net], paths["images"], images, threads)
            cnn[name] = rec
        chain = five_level_chain_fails(paths, threads) if check_chain and "tenseal" in nets else None
    checks = {"lr_tutorial_weights_cosine": (lr["weight_cosine"] or 0.0) > 0.5}
    if precise is not None:
        checks["lr_precise_matches_numpy"] = precise["max_weight_error"] < 1e-4
    for name, rec in cnn.items():
        checks[f"cnn_{name}_ran"] = "error" not in rec
        checks[f"cnn_{name}_agrees"] = rec.get("agreement") == 1.0 and rec.get("max_logit_error", 1.0) < 0.25
    if chain is not None:
        checks["five_level_chain_fails"] = "scale out of bounds" in chain
    return {"ok": all(checks.values()), "checks": checks, "five_level_chain": chain, "lr": lr, "lr_precise": precise,
            "cnn": cnn}


# --------------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------------


def _table(out: dict) -> None:
    lr = out.get("lr")
    _log(f"\n{'workload':<36}{'thr':>4}{'ms':>11}{'per':>22}   check")
    if lr:
        acc = lr["accuracy"].get("test", lr["accuracy"]["train"])
        _log(f"{'LR iteration (' + str(lr['samples']) + ' x ' + str(lr['features']) + ')':<36}{lr['threads']:>4}"
             f"{lr['ms_per_iteration']:>11.0f}{lr['ms_per_sample_iteration']:>13.2f} /sample   "
             f"acc {acc['tenseal']:.4f} (numpy cubic {acc['numpy_cubic']:.4f}), max |w - w_np| "
             f"{lr['max_weight_error']:.1e}")
    for net, c in (out.get("cnn") or {}).items():
        if "error" in c:
            _log(f"{'CNN ' + net:<36}{c['threads']:>4}{'-':>11}{'':>22}   {c['error']}")
        else:
            _log(f"{'CNN ' + net + ' (N ' + str(c['params']['N']) + ')':<36}{c['threads']:>4}"
                 f"{c['ms_per_image']:>11.0f}{c['images']:>13d} images   agree {c['agreement']:.4f}, "
                 f"acc {c['accuracy']:.4f}, max logit err {c['max_logit_error']:.1e}")
    _log(f"load {out.get('load')}, {out.get('wall_s', 0):.0f} s")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1, help="TenSEAL context n_threads")
    p.add_argument("--lr-data", help="npz with x [n, f], y [n], optional x_test, y_test")
    p.add_argument("--lr-iterations", type=int, default=1, help="training iterations timed")
    p.add_argument("--lr-samples", type=int, default=None, help="train on the first n samples (default all)")
    p.add_argument("--lr-rate", type=float, default=1.0, help="gradient-descent step (the tutorial: 1)")
    p.add_argument("--lr-context", choices=sorted(LR_CONTEXTS), default="tutorial",
                   help="tutorial: N 8192, [40, 21 x 6, 40], 2^21; precise: N 16384, [60, 40 x 6, 60], 2^40")
    p.add_argument("--lr-decay", type=float, default=LR_DECAY, help="weight decay per step (the tutorial: 0.05)")
    p.add_argument("--cnn-weights", action="append", default=[],
                   help="[NET=]PATH.npz, repeatable or comma-separated")
    p.add_argument("--cnn-images", help="npz with x [n, 28, 28] in [0, 1], y [n]")
    p.add_argument("--cnn-count", type=int, default=20, help="images timed per network")
    p.add_argument("--cnn-max-seconds", type=float, default=None,
                   help="stop a network's timed images after this many seconds (at least 2 images)")
    p.add_argument("--self-test", action="store_true",
                   help="random weights of both nets, 2 digits each, 1 LR iteration on 32 samples; checks vs NumPy")
    p.add_argument("--json", help="also write the JSON object here")
    args = p.parse_args(argv)
    t_start = time.perf_counter()
    out = {"suite": "ml", "peer": "tenseal", "tenseal": tenseal_version(), "threads": args.threads,
           "lr": None, "cnn": {}, "notes": list(NOTES)}
    if args.self_test:
        st = self_test(args.threads)
        out.update(lr=st["lr"], cnn=st["cnn"], self_test={k: st[k] for k in ("ok", "checks", "five_level_chain")})
        out["self_test"]["lr_precise"] = st["lr_precise"]
    else:
        if args.lr_data:
            out["lr"] = lr_benchmark(args.lr_data, args.lr_iterations, args.lr_samples, args.lr_rate, args.lr_decay,
                                     args.threads, args.lr_context)
        specs = [s for spec in args.cnn_weights for s in spec.split(",") if s]
        if specs and not args.cnn_images:
            p.error("--cnn-weights needs --cnn-images")
        for spec in specs:
            net, path = spec.split("=", 1) if "=" in spec else (None, spec)
            name, rec = cnn_benchmark(path, args.cnn_images, args.cnn_count, args.threads, net, args.cnn_max_seconds)
            out["cnn"][name] = rec
    applied = [r.get("threads_applied") for r in [out["lr"] or {}, *out["cnn"].values()] if "threads_applied" in r]
    out["threads_applied"] = all(applied) if applied else None
    out["load"] = _load_average()
    out["wall_s"] = time.perf_counter() - t_start
    _table(out)
    text = json.dumps(out, default=float)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(text)
    print(text, flush=True)
    return 0 if out.get("self_test", {}).get("ok", True) else 1


if __name__ == "__main__":
    raise SystemExit(main())
