"""Concrete ML peer for issue 47's row: one PyTorch CNN, trained here, exported to ONNX for crossfhe, and compiled by
Concrete ML's ``compile_torch_model``; run one encrypted sample at a time.

    .venv-concrete/bin/python benchmarks/concrete_torch_peer.py ONNX_OUT [--samples 5] [--threads 1] [--n-bits 6]
        [--rounding-bits 6] [--epochs 30]

Runs in Concrete ML's own virtual environment (``bash benchmarks/setup_concrete.sh``); imports neither jax nor
crossfhe. Prints one JSON object on stdout: the data split, the model, float accuracy, Concrete ML's quantized
accuracy in the clear (``fhe="disable"``), compile and key generation seconds, the encrypted run's milliseconds
per sample (median over ``--samples`` test samples, batch 1), and whether the encrypted predictions equal the
quantized clear ones. The model's weights go to ``ONNX_OUT`` (opset 17), which ``benchmarks/bench_byom.py``
compiles with crossfhe, so both libraries run the same trained network.

**Data**: scikit-learn's digits (8 x 8, pixels / 16), split by ``numpy.random.default_rng(0).permutation(1797)``:
the first 1437 train, the other 360 test. **Model**: ``Conv2d(1, 4, 3, stride 2, padding 1) -> ReLU ->
AvgPool2d(2) -> Flatten -> Linear(16, 10)``, Adam (lr 1e-2, batch 64, ``--epochs``), ``torch.manual_seed(0)``.
Calibration for Concrete ML: the first 200 training images; ``n_bits`` 6 and accumulators rounded to 6 bits before
each lookup (``rounding_threshold_bits``, exact rounding), as ``benchmarks/concrete_peer.py`` compiles its CNN.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
from concrete_peer import set_threads  # the same directory: the peer scripts share their thread settings


def digits():
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None]
    perm = np.random.default_rng(0).permutation(len(x))
    tr, te = perm[:1437], perm[1437:]
    return x[tr], d.target[tr], x[te], d.target[te]


def model():
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, stride=2, padding=1), torch.nn.ReLU(), torch.nn.AvgPool2d(2),
                               torch.nn.Flatten(), torch.nn.Linear(16, 10))


def train(net, x, y, epochs: int):
    import torch

    torch.manual_seed(0)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    loss = torch.nn.CrossEntropyLoss()
    xs, ys = torch.tensor(x), torch.tensor(y)
    gen = torch.Generator().manual_seed(0)
    net.train()
    for _ in range(epochs):
        for idx in torch.randperm(len(xs), generator=gen).split(64):
            opt.zero_grad()
            loss(net(xs[idx]), ys[idx]).backward()
            opt.step()
    return net.eval()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("onnx_out")
    p.add_argument("--samples", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--n-bits", type=int, default=6)
    p.add_argument("--rounding-bits", type=int, default=6)
    p.add_argument("--epochs", type=int, default=30)
    args = p.parse_args(argv)
    set_threads(args.threads)
    import torch

    torch.set_num_threads(args.threads)
    import importlib.metadata as md

    t_start = time.perf_counter()
    xtr, ytr, xte, yte = digits()
    net = train(model(), xtr, ytr, args.epochs)
    with torch.no_grad():
        float_pred = net(torch.tensor(xte)).numpy().argmax(1)
        torch.onnx.export(net, (torch.tensor(xtr[:1]),), args.onnx_out, opset_version=17, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    from concrete.ml.torch.compile import compile_torch_model

    t0 = time.perf_counter()
    rounding = {"n_bits": args.rounding_bits, "method": "exact"} if args.rounding_bits else None
    qm = compile_torch_model(net, xtr[:200], n_bits=args.n_bits, rounding_threshold_bits=rounding)
    t1 = time.perf_counter()
    qm.fhe_circuit.keygen()
    t2 = time.perf_counter()
    clear_pred = np.asarray(qm.forward(xte, fhe="disable")).argmax(1)
    times, fhe_pred = [], []
    for i in range(args.samples):
        t = time.perf_counter()
        out = qm.forward(xte[i:i + 1], fhe="execute")
        times.append(time.perf_counter() - t)
        fhe_pred.append(int(np.asarray(out).argmax(1)[0]))
    res = {
        "suite": "byom_concrete", "peer": f"concrete-ml {md.version('concrete-ml')}",
        "versions": {k: md.version(k) for k in ("concrete-ml", "concrete-python", "torch", "numpy")},
        "threads": args.threads, "n_bits": args.n_bits, "rounding_bits": args.rounding_bits, "epochs": args.epochs,
        "model": "Conv2d(1,4,3,s2,p1) ReLU AvgPool2d(2) Flatten Linear(16,10)", "test": len(yte),
        "accuracy_float": float(np.mean(float_pred == yte)), "accuracy_quantized": float(np.mean(clear_pred == yte)),
        "compile_s": t1 - t0, "keygen_s": t2 - t1, "samples": args.samples,
        "ms_per_sample": 1e3 * statistics.median(times), "ms_all": [1e3 * t for t in times],
        "fhe_equals_clear": bool(np.array_equal(fhe_pred, clear_pred[:args.samples])),
        "max_bit_width": int(qm.fhe_circuit.graph.maximum_integer_bit_width()),
        "load": [round(v, 2) for v in os.getloadavg()], "wall_s": time.perf_counter() - t_start,
    }
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
