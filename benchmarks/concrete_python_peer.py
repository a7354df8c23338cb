"""Concrete (concrete-python) on our exact integer network: compiles the integers of one of our quantized MLP / CNN
models, exported as an .npz by ``export_network`` in benchmarks/bench_taurus.py, with Zama's TFHE compiler, runs it
encrypted one sample at a time, checks that its outputs equal our integer model's, and prints JSON.

    .venv-concrete/bin/python benchmarks/concrete_python_peer.py NET.npz [NET.npz ...] [--samples 3]
        [--p-error 2^-64 | tfhe-rs] [--threads 1] [--warmup 1] [--compress-keys] [--json PATH]

benchmarks/bench_taurus.py calls it in its own environment (``.venv-concrete``, made by
benchmarks/setup_concrete.sh); this file imports only numpy, the standard library and concrete, not crossfhe.
Output: a table on stderr and one line of JSON on stdout, ``{"suite": "taurus-concrete-python", "concrete_python":
VERSION, "models": {NPZ BASENAME: RECORD}, ...}``; a model that fails gives ``{"error": "..."}`` and the others go on.
Exit status 0, or 1 when a model failed or its outputs differ from ``expected`` (the JSON is printed either way).

**The same model.** Concrete ML's own CNN compiles to wrong outputs, so the comparison is on identical integers:
the .npz holds the network exactly as our circuit computes it (``in_bits``, message bits ``p``, ``layers`` = L;
per hidden layer i ``w{i}`` [out, in], ``off{i}`` [out], ``tables{i}`` [out, 2^p]; the output layer ``out_w``
[C, in], ``out_off`` [C]; sample inputs ``q`` and our outputs on them ``expected``). Hidden layer: acc_j =
sum_i a_i w_ji + off_j, which the exporter guarantees lies in [0, 2^p) for every input, then a'_j = tables_j[acc_j];
output layer: out_c = sum_i a_i out_w_ci + out_off_c, also in [0, 2^p), the circuit's C outputs. The concrete
function is this with clear weights and offsets on an encrypted input vector (``x @ W.T``), and the tables as one
multi-table lookup: ``fhe.LookupTable([fhe.LookupTable(t_j) for j])[acc]`` applies table j to element j (one PBS
per neuron). No rounding, no approximation: every integer is exact, and each decrypted sample is compared with
``expected`` (``exact``, ``mismatches``).

**Bit widths.** Concrete gives every encrypted value a bit width from the bounds it measures on an inputset, and a
linear operation's encrypted inputs, clear constants and output all share one width. So (1) the inputset holds the
npz's samples plus, for each first-layer neuron, the inputs that maximize and minimize its accumulator (inputs at
2^in_bits - 1 where its weight is positive, resp. negative, else 0), all zeros and all 2^in_bits - 1; (2) every
linear result is marked ``fhe.hint(v, bit_width=p)``, so Concrete gives it at least p bits whatever the inputset
reaches; (3) each linear layer is written so that no intermediate needs more than p bits, by interval arithmetic
over the possible inputs (first layer [0, 2^in_bits - 1], later layers each table's [min, max]): ``x @ W.T + off``
when the matmul alone fits p bits (signed or not), else ``(off - x @ max(-W, 0).T) + x @ max(W, 0).T``, where
every intermediate lies between 0 and the final accumulator's range (a signed matmul of [-9, -1] plus offset 14
would otherwise make Concrete give the whole layer, and its table lookups, p + 1 bits). The split has the
same noise growth (Concrete's norm of the summed matmuls is that of W) at twice the clear multiplications. The
record gives each layer's form, the widths Concrete assigned (``tlu_input_bits``, ``max_encrypted_bits``) and
``bits_equal_p``: whether every table lookup and encrypted value is exactly p bits, as in our circuit.

**Configuration.** ``fhe.Configuration(p_error=P, global_p_error=None)``: P per PBS (``--p-error``, default 2^-64 =
``tfhe-rs``, the bound our presets use); the circuit's actual ``p_error`` and ``global_p_error`` are reported.
``--threads N`` sets OMP_NUM_THREADS, RAYON_NUM_THREADS, MKL/OPENBLAS_NUM_THREADS before concrete is imported and
pins the process to N of its CPUs; with N = 1 ``loop_parallelize``, ``dataflow_parallelize`` and
``auto_parallelize`` are off (Concrete's default turns loop parallelization on). Evaluation keys uncompressed
unless ``--compress-keys``; ``optimize_tlu_based_on_measured_bounds`` stays off (Concrete's default), so the tables
are not shrunk to the inputset's range.

**Measured.** compile seconds (tracing, inputset evaluation, parameter optimization, MLIR compilation), key
generation seconds (``circuit.keygen(force=True)``), key sizes (serialized evaluation keys, and the circuit's
``size_of_bootstrap_keys``, ``size_of_keyswitch_keys``, ``size_of_secret_keys``), statistics (PBS and key-switch
counts, complexity, parameters), and per sample, one at a time after ``--warmup`` untimed runs: encrypt, run,
decrypt and their sum in ms (median, min, max); load average and peak RSS.

**Caveats.** Concrete picks its own TFHE parameters per circuit (it optimizes for this circuit's norms and p_error,
where our presets are fixed); its inputs are encrypted at p bits (the width shared by the first matmul), not
in_bits; a PBS failure (probability p_error each) would show as a mismatch; Concrete does not exploit the weights'
sparsity (its matmuls are dense over all inputs).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # concrete_common.py, also when loaded by path

from concrete_common import (  # noqa: E402
    compile_and_run,
    parse_probability,
    set_threads,
    statistics_of,
)
from concrete_common import jsonable as _jsonable  # noqa: E402
from concrete_common import load_average as _load_average  # noqa: E402
from concrete_common import log as _log  # noqa: E402
from concrete_common import peak_rss_mib as _peak_rss_mib  # noqa: E402

# --------------------------------------------------------------------------------------------------
# The network
# --------------------------------------------------------------------------------------------------


def load_network(path: Path) -> dict:
    """The .npz of ``export_network`` as plain int64 arrays, with its shapes checked."""
    with np.load(path) as d:
        net = {k: np.asarray(d[k], dtype=np.int64) for k in d.files}
    p, layers, in_bits = int(net["p"]), int(net["layers"]), int(net["in_bits"])
    hidden = [(net[f"w{i}"], net[f"off{i}"], net[f"tables{i}"]) for i in range(layers)]
    width = net["q"].shape[1]
    for i, (w, off, t) in enumerate(hidden):
        if w.shape[1] != width or off.shape != (w.shape[0],) or t.shape != (w.shape[0], 2**p):
            raise ValueError(f"layer {i}: w {w.shape}, off {off.shape}, tables {t.shape} (inputs {width}, p {p})")
        width = w.shape[0]
    out_w, out_off = net["out_w"], net["out_off"]
    if out_w.shape[1] != width or out_off.shape != (out_w.shape[0],):
        raise ValueError(f"output layer: out_w {out_w.shape}, out_off {out_off.shape} (inputs {width})")
    if net["expected"].shape != (net["q"].shape[0], out_w.shape[0]):
        raise ValueError(f"expected {net['expected'].shape}, q {net['q'].shape}, outputs {out_w.shape[0]}")
    return {"p": p, "in_bits": in_bits, "hidden": hidden, "out_w": out_w, "out_off": out_off, "q": net["q"],
            "expected": net["expected"]}


def plain_outputs(net: dict, x: np.ndarray) -> np.ndarray:
    """The integer network on inputs ``x`` [n, inputs] in numpy (checks the export against ``expected``)."""
    a = np.asarray(x, dtype=np.int64)
    for w, off, t in net["hidden"]:
        acc = a @ w.T + off
        a = t[np.arange(t.shape[0]), acc]
    return a @ net["out_w"].T + net["out_off"]


def _range(w: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row [min, max] of ``a @ w.T`` over a_i in [lo_i, hi_i] (interval arithmetic)."""
    return np.minimum(w * lo, w * hi).sum(axis=1), np.maximum(w * lo, w * hi).sum(axis=1)


def plan_linear(w: np.ndarray, off: np.ndarray, lo: np.ndarray, hi: np.ndarray, p: int) -> dict:
    """How to write ``a @ w.T + off`` so that every value and constant fits p bits (Concrete's widths): ``single``
    (matmul, then + off), else ``split`` ((off - a @ max(-w, 0).T) + a @ max(w, 0).T), else ``single`` with
    ``fits`` False (Concrete then takes the widths from the inputset). Also the accumulator's interval."""
    from concrete.fhe.dtypes import Integer

    def bits(vmin, vmax) -> int:
        return Integer.that_can_represent([int(np.min(vmin)), int(np.max(vmax))]).bit_width

    smin, smax = _range(w, lo, hi)
    acc = (int((smin + off).min()), int((smax + off).max()))
    single = max(bits(smin, smax), bits(w, w), bits(off, off), bits(smin + off, smax + off))
    wp, wn = np.maximum(w, 0), np.maximum(-w, 0)
    nmin, nmax = _range(wn, lo, hi)
    pmin, pmax = _range(wp, lo, hi)
    split = max(bits(nmin, nmax), bits(pmin, pmax), bits(off - nmax, off - nmin), bits(wp, wp), bits(wn, wn),
                bits(off, off), bits(smin + off, smax + off))
    if single <= p:
        form = "single"
    elif split <= p:
        form = "split"
    else:
        form = "single"
    return {"form": form, "fits": min(single, split) <= p, "bits_needed": min(single, split), "acc_range": acc,
            "acc_in_range": 0 <= acc[0] and acc[1] < 2**p}


def build_function(net: dict, plans: list[dict]):
    """The concrete function of the network (``plans``: one :func:`plan_linear` per linear layer)."""
    from concrete import fhe

    p = net["p"]
    luts = [fhe.LookupTable([fhe.LookupTable(row) for row in t]) for _, _, t in net["hidden"]]
    linear = [(w, off) for w, off, _ in net["hidden"]] + [(net["out_w"], net["out_off"])]

    def apply_linear(a, w, off, plan):
        if plan["form"] == "single":
            return fhe.hint(fhe.hint(a @ w.T.copy(), bit_width=p) + off, bit_width=p)
        wp, wn = np.maximum(w, 0), np.maximum(-w, 0)
        if not wn.any():
            return fhe.hint(fhe.hint(a @ wp.T.copy(), bit_width=p) + off, bit_width=p)
        neg = fhe.hint(off - fhe.hint(a @ wn.T.copy(), bit_width=p), bit_width=p)
        if not wp.any():
            return neg
        return fhe.hint(neg + fhe.hint(a @ wp.T.copy(), bit_width=p), bit_width=p)

    def f(x):
        a = x
        for (w, off), plan, lut in zip(linear, plans, luts):
            a = lut[apply_linear(a, w, off, plan)]
        return apply_linear(a, *linear[-1], plans[-1])

    return f


def inputset(net: dict) -> list[np.ndarray]:
    """The npz's samples, each first-layer neuron's accumulator maximizer and minimizer, all zeros, all maximum."""
    top = 2 ** net["in_bits"] - 1
    w = net["hidden"][0][0] if net["hidden"] else net["out_w"]
    out = [row for row in net["q"]]
    out += [np.where(row > 0, top, 0).astype(np.int64) for row in w]
    out += [np.where(row < 0, top, 0).astype(np.int64) for row in w]
    n = net["q"].shape[1]
    out += [np.zeros(n, dtype=np.int64), np.full(n, top, dtype=np.int64)]
    return out


# --------------------------------------------------------------------------------------------------
# One model
# --------------------------------------------------------------------------------------------------


def circuit_info(circuit, p: int) -> dict:
    """Widths Concrete assigned and its statistics."""
    graph = circuit.graph
    tlu_bits, tlu_ranges = [], []
    for node in graph.query_nodes(operation_filter="tlu"):
        pred = graph.ordered_preds_of(node)[0]
        tlu_bits.append(int(pred.output.dtype.bit_width))
        if pred.bounds is not None:
            tlu_ranges.append([int(pred.bounds[0]), int(pred.bounds[1])])
    max_enc = int(graph.maximum_integer_bit_width(is_encrypted_filter=True, assigned_bit_width=True))
    info = {
        "tlu_input_bits": tlu_bits, "tlu_input_range_measured": tlu_ranges, "max_encrypted_bits": max_enc,
        "bits_equal_p": bool(max_enc == p and all(b == p for b in tlu_bits)),
    }
    info.update(statistics_of(circuit))
    return info


def run_model(path: Path, samples: int, warmup: int, p_error: float, threads: int, compress: bool) -> dict:
    rec: dict = {"npz": str(path), "load_start": _load_average()}
    net = load_network(path)
    p = net["p"]
    hidden = [w.shape[0] for w, _, _ in net["hidden"]]
    rec.update(p=p, in_bits=net["in_bits"], inputs=int(net["q"].shape[1]), hidden=hidden,
               outputs=int(net["out_w"].shape[0]), tlus_expected=sum(hidden))
    plain = plain_outputs(net, net["q"])
    rec["export_consistent"] = bool(np.array_equal(plain, net["expected"]))
    if not rec["export_consistent"]:
        _log(f"# {path.name}: numpy evaluation of the npz differs from its 'expected'")

    plans, lo, hi = [], np.zeros(rec["inputs"], np.int64), np.full(rec["inputs"], 2 ** net["in_bits"] - 1)
    for w, off, t in net["hidden"]:
        plans.append(plan_linear(w, off, lo, hi, p))
        lo, hi = t.min(axis=1), t.max(axis=1)
    plans.append(plan_linear(net["out_w"], net["out_off"], lo, hi, p))
    rec["linear_forms"] = [pl["form"] for pl in plans]
    rec["linear_fits_p_bits"] = [pl["fits"] for pl in plans]
    rec["acc_ranges_analytic"] = [list(pl["acc_range"]) for pl in plans]
    if not all(pl["acc_in_range"] for pl in plans):
        _log(f"# {path.name}: interval bounds of some accumulator leave [0, 2^{p}) {rec['acc_ranges_analytic']}")

    rec.update(compile_and_run(build_function(net, plans), inputset(net), p_error, threads, compress,
                               net["q"], net["expected"], samples, warmup, path.stem,
                               lambda circuit: circuit_info(circuit, p)))
    return rec


# --------------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------------


def _table(out: dict) -> None:
    _log(f"\n{'model':<16}{'p':>3}{'hidden':>8}{'n':>3}{'exact':>6}{'ms/sample':>10}{'run ms':>9}{'compile s':>10}"
         f"{'keygen s':>9}{'PBS':>6}{'TLU bits':>9}{'eval keys MiB':>14}{'BSK MiB':>9}{'KSK MiB':>9}")
    for name, r in out["models"].items():
        if "error" in r:
            _log(f"{name:<16}   {r['error'][:100]}")
            continue
        if "circuit" not in r:
            continue
        c, k = r["circuit"], r["keys"]

        def mib(v):
            return float("nan") if v is None else v / 2**20

        bits = ",".join(str(b) for b in sorted(set(c["tlu_input_bits"])))
        _log(f"{name:<16}{r['p']:>3}{'+'.join(map(str, r['hidden'])):>8}{r['samples']:>3}"
             f"{'yes' if r['exact'] else 'NO':>6}{r['ms_per_sample']:>10.0f}{r['run_ms']['median']:>9.0f}"
             f"{r['compile_s']:>10.1f}{r['keygen_s']:>9.1f}{c['pbs_count']:>6}{bits:>9}"
             f"{mib(k.get('evaluation_keys_bytes')):>14.1f}{mib(k.get('bootstrap_keys_bytes')):>9.1f}"
             f"{mib(k.get('keyswitch_keys_bytes')):>9.1f}")
    _log(f"threads {out['threads']}, p_error {out['p_error_requested']:.2e}, load {out['load']}, "
         f"peak RSS {out['peak_rss_mib']:.0f} MiB, {out['wall_s']:.0f} s")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("npz", nargs="+", type=Path, help="networks written by bench_taurus.export_network")
    p.add_argument("--samples", type=int, default=3, help="samples of each npz's q run encrypted, one at a time")
    p.add_argument("--p-error", default="2^-64", help="failure probability per PBS: 2^-64 (default), tfhe-rs, 1e-20")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=1, help="untimed encrypted runs before the timed ones")
    p.add_argument("--compress-keys", action="store_true", help="compress_evaluation_keys (seeded keys)")
    p.add_argument("--json", type=Path, help="also write the JSON object here")
    args = p.parse_args(argv)
    try:
        p_error = parse_probability(args.p_error)
    except ValueError as e:
        p.error(f"--p-error: {e}")
    if args.threads < 1 or args.samples < 1 or args.warmup < 0:
        p.error("--threads and --samples must be >= 1, --warmup >= 0")
    threads = set_threads(args.threads)
    t_start = time.perf_counter()

    from concrete import fhe  # after the thread variables

    out = {"suite": "taurus-concrete-python", "concrete_python": fhe.__version__,
           "python": sys.version.split()[0], "numpy": np.__version__, "threads": args.threads,
           "threads_applied": threads, "p_error_requested": p_error, "samples": args.samples,
           "warmup": args.warmup, "models": {}}
    for path in args.npz:
        try:
            out["models"][path.stem] = run_model(path, args.samples, args.warmup, p_error, args.threads,
                                                 args.compress_keys)
        except Exception as e:  # one failing model must not stop the others
            _log(f"# {path.name}: {type(e).__name__}: {e}")
            out["models"][path.stem] = {"npz": str(path), "error": f"{type(e).__name__}: {e}"}
    out["load"] = _load_average()
    out["peak_rss_mib"] = _peak_rss_mib()
    out["wall_s"] = time.perf_counter() - t_start
    _table(out)
    text = json.dumps(_jsonable(out))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    print(text, flush=True)
    ok = all("error" not in r and r.get("exact") for r in out["models"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
