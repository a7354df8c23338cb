"""Pictures of benchmark records: ours against the peers, one PNG per suite (``crossfhe bench <suite> --plot``).

    python benchmarks/plot.py --suite SUITE --json PATH --out PNG

Reads the JSON records a ``bench_*.py`` script wrote (``docs/BENCHMARKS.md``) and draws, per operation and
parameter point, grouped horizontal bars of the median time: ours (crossfhe) and each peer the records name
(``peer``, ``peer_median_ms``; the CKKS records' OpenFHE columns too) in their own colours, error bars from the
min/max where the records have them, a thin black tick on our bar at ``floor_ms``, and ours / peer in the right
margin level with each peer's bar. Axes whose values span more than ~30x are logarithmic. Our other variants
(eager calls, jax.jit, separate calls, the NumPy reference) are lighter blue bars without a ratio; suites or
records without a peer (profile, ntt without cargo) show ours and the floors. One function per suite (``SUITES``)
turns its records into labelled rows and panels; other suites get a generic one.

matplotlib is an optional extra (``pip install "crossfhe[plot]"``): without it the command exits with status 2
and says so; it also exits 2 when the JSON holds no record it can plot for the suite. ``plot_records`` (writes
the PNG) and ``figure`` (returns the matplotlib Figure) are the same drawing for tests and other callers.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import re
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

INSTALL_HINT = '--plot needs matplotlib: pip install "crossfhe[plot]"'
OURS = "crossfhe"
LOG_SPAN = 30.0  # an axis whose largest value is over this many times its smallest is logarithmic
DPI = 110
LABEL_CHARS = 52  # longest row label; longer ones are shortened
PEER_COLORS = ["#e07b00", "#2ca02c", "#c0392b", "#8e44ad"]
VARIANT_COLORS = ["#8fbce6", "#c4ddf3", "#5a8fc4"]


class NothingToPlot(ValueError):
    """The records hold nothing this module can draw for the suite."""


@dataclass
class Bar:
    series: str  # legend entry: OURS, a peer's name, or one of our variants ("crossfhe eager", ...)
    ms: float
    lo: float | None = None
    hi: float | None = None
    peer: bool = False  # a peer: ours / this is annotated


@dataclass
class Row:
    panel: str
    label: str
    bars: list[Bar] = field(default_factory=list)
    floor_ms: float | None = None

    def ratios(self) -> list[tuple[str, float]]:
        ours = next((b.ms for b in self.bars if b.series == OURS), None)
        if not ours:
            return []
        return [(b.series, ours / b.ms) for b in self.bars if b.peer and b.ms]


# --------------------------------------------------------------------------------------------------
# Records -> rows
# --------------------------------------------------------------------------------------------------


def _num(x) -> float | None:
    """x as a positive finite float, else None (missing, null, zero or NaN figures are not drawn)."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and v > 0 else None


_REC = object()  # _ours's default: the record's own field


def _ours(r: dict, ms=_REC, lo=_REC, hi=_REC, series: str = OURS) -> Bar | None:
    """A bar of ours (or of our variant ``series``): median, min and max from the record unless given (None:
    no figure)."""
    ms = _num(r.get("median_ms") if ms is _REC else ms)
    if ms is None:
        return None
    return Bar(series, ms, _num(r.get("min_ms") if lo is _REC else lo), _num(r.get("max_ms") if hi is _REC else hi))


def _div(x, d: float):
    return x / d if _num(x) else None


def _peer_bars(r: dict) -> list[Bar]:
    """The peers of a record: ``peer`` / ``peer_median_ms`` (+ ``peer_min_ms``, ``peer_max_ms``), and the CKKS
    records' second peer ``openfhe`` / ``openfhe_median_ms``."""
    out = []
    ms = _num(r.get("peer_median_ms"))
    if ms is not None:
        out.append(Bar(str(r.get("peer") or "peer"), ms, _num(r.get("peer_min_ms")), _num(r.get("peer_max_ms")),
                       peer=True))
    ms = _num(r.get("openfhe_median_ms"))
    if ms is not None:
        out.append(Bar(str(r.get("openfhe") or "OpenFHE"), ms, _num(r.get("openfhe_min_ms")),
                       _num(r.get("openfhe_max_ms")), peer=True))
    return out


def _row(panel: str, label: str, r: dict, ours: Bar | None, *extra: Bar | None, floor=_REC,
         peers: bool = True) -> Row | None:
    """A row: ours, our variants ``extra``, then the record's peers (``peers``); None without a time of ours."""
    if ours is None:
        return None
    bars = [ours, *[b for b in extra if b is not None]] + (_peer_bars(r) if peers else [])
    return Row(panel, label, bars, _num(r.get("floor_ms") if floor is _REC else floor))


def _p(r: dict) -> dict:
    return r.get("params") or {}


def _pow2(n) -> str:
    try:
        n = int(n)
    except (TypeError, ValueError):
        return str(n)
    return f"2^{n.bit_length() - 1}" if n > 0 and n & (n - 1) == 0 else str(n)


def _ckks(records: list[dict]) -> list[Row]:
    rows = []
    for r in records:
        if r.get("kind") == "precision":
            continue
        p = _p(r)
        panel = (f"{p.get('preset', '?')}: N {_pow2(p.get('N'))}, {p.get('limbs', '?')} limbs + "
                 f"{p.get('special', '?')} special, dnum {p.get('dnum', '?')}")
        rows.append(_row(panel, r.get("name", "?"), r, _ours(r)))
    return rows


def _tfhe(records: list[dict]) -> list[Row]:
    rows = []
    for r in records:
        p, name = _p(r), r.get("name", "?")
        panel = (f"{p.get('preset', '?')}: p {p.get('p', '?')}, n {p.get('n', '?')}, k x N "
                 f"{p.get('k', '?')} x {p.get('N', '?')}")
        peer_at = next((o.get("peer_params") for o in records if _p(o).get("preset") == p.get("preset")
                        and o.get("peer_params")), None)
        if peer_at:  # 'tfhe::shortint::parameters::v1_6::V1_6_PARAM_MESSAGE_1_CARRY_1_KS_PBS_TUNIFORM_2M64'
            panel += "; TFHE-rs at " + re.sub(r"^V\d+_\d+_PARAM_", "", str(peer_at).split("::")[-1])
        if name == "pbs":
            b = max(1, int(p.get("batch") or 1))
            ours = _ours(r, r.get("ms_per_pbs"), _div(r.get("min_ms"), b), _div(r.get("max_ms"), b))
            label = f"pbs, per PBS in a batch of {b} ({p.get('kernel', '?')})"
            rows.append(_row(panel, label, r, ours, floor=r.get("floor_ms_per_pbs")))
        elif name == "pbs_many":
            sep = _ours(r, r.get("separate_median_ms"), r.get("separate_min_ms"), r.get("separate_max_ms"),
                        series=f"{OURS}, 2 separate pbs calls")
            rows.append(_row(panel, "pbs_many, 2 tables, batch 1", r, _ours(r), sep))
        elif name == "keygen":
            rows.append(_row(panel, "keygen, with its compile (peer: server key)", r, _ours(r)))
        elif name.startswith("unit_"):
            what = "FFT of N/2 points" if name == "unit_fft" else "limb NTT"
            rows.append(_row(panel, f"one {what} (floor unit)", r, _ours(r)))
        else:
            rows.append(_row(panel, name, r, _ours(r)))
    return rows


def _hmvp(records: list[dict]) -> list[Row]:
    rows = []
    for r in sorted(records, key=lambda r: str(r.get("name", "")).startswith("unit_")):  # the unit costs last
        p, name = _p(r), r.get("name", "?")
        if name.startswith("unit_"):
            label = f"{name[5:]} at {p.get('preset', '?')}"
            rows.append(_row("unit costs (per item, batch of "
                             f"{p.get('batch', '?')})", label, r, _ours(r)))
            continue
        shape = f"{p.get('m', '?')} x {p.get('n', '?')}"
        if name == "hmvp":
            label = f"{shape} hmvp (R={p.get('rows_per_product', '?')})"
        elif name == "diagonal":
            label = f"{shape} diagonal ({p.get('preset', '?')})"
        else:
            label = f"{shape} {name}"
        panel = f"encrypted vector x plaintext matrix, BFV N {_pow2(p.get('N'))}"
        if any(_num(o.get("peer_median_ms")) for o in records):
            panel += "; TenSEAL: CKKS, no BFV matmul"
        rows.append(_row(panel, label, r, _ours(r)))
    return rows


def _ntt(records: list[dict]) -> list[Row]:
    rows = []
    for r in records:
        p, name = _p(r), r.get("name", "?")
        op = name[4:] if name.startswith("ntt_") else name
        limbs = p.get("limbs", "?")
        label = f"{op}, N {_pow2(p.get('N'))} x {limbs} limb{'s' if limbs != 1 else ''}"
        panel = f"NTT, {p.get('prime_bits', '?')}-bit primes"
        ref = _ours(r, r.get("numpy_median_ms"), None, None, series=f"{OURS} NumPy reference")
        rows.append(_row(panel, label, r, _ours(r), ref))
    return rows


def _kernels(records: list[dict]) -> list[Row]:
    rows = []
    for r in records:
        p, name, backend = _p(r), r.get("name", "?"), r.get("backend", "?")
        if backend == "direct" or r.get("skipped"):  # the direct records are the MATRIX records' peer
            continue
        if name.endswith("_rate"):
            if "M" in p:
                label = f"{name[:-5]} {p['M']}^3"
            else:
                label = f"{name[:-5]} {p.get('bytes', 0) / 2**20:.0f} MiB"
            rows.append(_row("calibration (rates of the floors)", label, r, _ours(r)))
        elif name.startswith("ntt_"):
            if backend == "VECTOR" and any(o.get("backend") == "MATRIX" and o.get("name") == name
                                           and _num(o.get("peer_median_ms")) and _p(o).get("N") == p.get("N")
                                           and _p(o).get("limbs") == p.get("limbs") for o in records):
                continue  # the MATRIX record carries it as its peer
            label = f"{name[4:]} N {_pow2(p.get('N'))} x {p.get('limbs', '?')}, {backend}"
            rows.append(_row("NTT: MATRIX (int8 matmul) vs VECTOR (radix-2)", label, r, _ours(r)))
        else:
            label = f"{name} {p.get('H', '?')}x{p.get('V', '?')}x{p.get('W', '?')}, {backend}"
            rows.append(_row("modular matmul: BAT (int8) vs direct uint64", label, r, _ours(r)))
    return rows


def _bootstrap(records: list[dict]) -> list[Row]:
    rows = []
    peers = {(r.get("preset"), r.get("threads")): r for r in records if r.get("peer") not in (None, OURS)}
    for r in records:
        if r.get("peer") not in (None, OURS):
            continue
        key = (r.get("preset"), r.get("threads"))
        ours = _ours(r, hi=max(r.get("times_ms") or [0]))
        of = peers.get(key)
        bars = []
        if of is not None and isinstance(of.get("bootstrap_ms"), dict):
            bm = of["bootstrap_ms"]
            if _num(bm.get("median")):
                bars.append(Bar(str(of.get("peer")), float(bm["median"]), _num(bm.get("min")), _num(bm.get("max")),
                                peer=True))
        label = f"{r.get('preset', '?')}, {r.get('threads', '?')} thread(s)"
        row = _row("CKKS bootstrap", label, r, ours, peers=False)
        if row:
            row.bars += bars
            rows.append(row)
    return rows


def _circuits(records: list[dict]) -> list[Row]:
    rows = []
    for r in records:
        label = f"{r.get('name', '?')} ({_p(r).get('preset', '?')})"
        eager = _ours(r, r.get("eager_median_ms"), r.get("eager_min_ms"), r.get("eager_max_ms"),
                      series=f"{OURS} eager")
        rows.append(_row("one run of the compiled circuit vs the same operations called eagerly", label, r,
                         _ours(r), eager))
    for r in records:  # a fresh process doing the whole task: ours with a cold and a warm cache, and the peer
        cold = _ours(r, _div(r.get("cold_s"), 1e-3), None, None, series=f"{OURS}, cold cache")
        warm = _ours(r, _div(r.get("warm_s"), 1e-3), None, None)
        peer = None
        if _num(r.get("peer_fresh_s")):
            peer = Bar(str(r.get("peer") or "peer"), r["peer_fresh_s"] * 1e3, peer=True)
        if warm is not None:
            rows.append(Row("a fresh process: import, keys, encrypt, run, decrypt (ours: warm cache)",
                            f"{r.get('name', '?')}", [b for b in (warm, cold, peer) if b is not None]))
    return rows


def _profile(records: list[dict]) -> list[Row]:
    rows = []
    for r in records:
        if "error" in r or not _num(r.get("eager_ms")):
            continue
        scheme = r.get("scheme", "?")
        if scheme == "tfhe":
            label = f"{r.get('op', '?')} batch {r.get('batch', '?')}"
            panel = f"TFHE {r.get('preset', '?')}"
        else:
            label = f"{r.get('op', '?')} ({r.get('kset', '?')})"
            panel = f"CKKS {r.get('preset', '?')}: N {_pow2(r.get('n'))}, {r.get('limbs', '?')} limbs"
        jit = _ours(r, r.get("jit_ms"), None, None, series=f"{OURS} in jax.jit") if r.get("jit_ms") else None
        rows.append(_row(panel, label, r, _ours(r, r["eager_ms"], None, None), jit, peers=False))
    return rows


def _generic(records: list[dict]) -> list[Row]:
    keys = ("preset", "N", "limbs", "m", "n", "M", "batch")
    rows = []
    for r in records:
        p = _p(r)
        label = " ".join([str(r.get("name", r.get("op", "?")))] + [f"{k} {p[k]}" for k in keys if k in p])
        rows.append(_row(str(r.get("suite", r.get("bench", ""))), label, r, _ours(r)))
    return rows


SUITES = {"ckks": _ckks, "tfhe": _tfhe, "hmvp": _hmvp, "ntt": _ntt, "kernels": _kernels, "bootstrap": _bootstrap,
          "circuits": _circuits, "profile": _profile}
"""Per suite: records -> rows (label, panel, bars); other suites take ``_generic``."""


def rows_for(records: list[dict], suite: str) -> list[Row]:
    """The rows of the plot: the suite's records (those naming another suite dropped) through its function."""
    mine = [r for r in records if isinstance(r, dict) and r.get("suite", r.get("bench", suite)) == suite]
    return [row for row in SUITES.get(suite, _generic)(mine) if row is not None]


# --------------------------------------------------------------------------------------------------
# Drawing
# --------------------------------------------------------------------------------------------------


def fmt_ms(v: float) -> str:
    """A time for a bar's end: s, ms, us or ns with 3 significant digits."""
    for scale, unit in ((1e3, "s"), (1.0, "ms"), (1e-3, "us"), (1e-6, "ns")):
        if v >= scale or unit == "ns":
            return f"{v / scale:.3g} {unit}"
    return f"{v:.3g} ms"


def fmt_ratio(q: float) -> str:
    """ours / peer as printed beside the peer's bar: 2 decimals, 3 below 0.1."""
    return f"{q:.2f}x" if q >= 0.1 else f"{q:.3f}x"


def _short(name: str) -> str:
    """A peer's name in a ratio annotation: its first word ('seal-python 4.4.0' -> 'seal-python')."""
    return name.split()[0].rstrip(",:")


def _title(records: list[dict], suite: str, date: str | None) -> str:
    def one(key):
        vals = sorted({str(r[key]) for r in records if isinstance(r, dict) and r.get(key) not in (None, "")})
        return ", ".join(vals)

    peers = list(dict.fromkeys(b.series for row in rows_for(records, suite) for b in row.bars if b.peer))
    head = f"crossfhe bench {suite}" + (f": ours vs {', '.join(_short(p) for p in peers)}" if peers else "")
    date = date or next((str(r["date"]) for r in records if isinstance(r, dict) and r.get("date")), None)
    date = date or _dt.date.today().isoformat()
    loads = [x for r in records if isinstance(r, dict) for x in _loads(r.get("load_avg", r.get("load")))]
    load = f"load {min(loads):.1f}-{max(loads):.1f}" if loads else ""
    device, cpu = one("device"), one("cpu")
    parts = [f"device {device}" + (f" ({cpu})" if cpu and cpu != device else "") if device else "",
             f"jax {one('jax')}" if one("jax") else "", f"threads {one('threads')}" if one("threads") else "",
             load, date]
    return f"{head}\n" + ", ".join(x for x in parts if x)


def _loads(v) -> list[float]:
    """The 1-minute load averages in a record's ``load_avg`` ([before, after] of [1, 5, 15]) or ``load``."""
    if not isinstance(v, (list, tuple)) or not v:
        return []
    if all(isinstance(x, (int, float)) for x in v):
        return [float(v[0])]
    return [float(x[0]) for x in v if isinstance(x, (list, tuple)) and x and isinstance(x[0], (int, float))]


def figure(records: list[dict], suite: str, *, date: str | None = None):
    """The matplotlib Figure of the suite's records, on an Agg canvas (no display, and the caller's pyplot
    backend is left alone). Raises NothingToPlot."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    rows = rows_for(records, suite)
    if not rows:
        raise NothingToPlot(f"no records with a time to plot for suite {suite!r}")
    panels: dict[str, list[Row]] = {}
    for row in rows:
        panels.setdefault(row.panel, []).append(row)
    # ours first, then the peers (warm colours), then our variants (lighter blues)
    peers = list(dict.fromkeys(b.series for row in rows for b in row.bars if b.peer))
    variants = list(dict.fromkeys(b.series for row in rows for b in row.bars if not b.peer and b.series != OURS))
    series = [OURS] + peers + variants
    colors = {OURS: "#1f5fa8"}
    colors.update(zip(peers, PEER_COLORS * 4, strict=False))
    colors.update(zip(variants, VARIANT_COLORS * 4, strict=False))

    def slots(rs):
        return [s for s in series if any(b.series == s for r in rs for b in r.bars)]

    width = 10.0
    legend = [textwrap.shorten(s, 60, placeholder="...") for s in series]
    legend += ["floor (ours)"] if any(r.floor_ms for r in rows) else []
    entry = 0.5 + 0.056 * max(len(x) for x in legend)  # inches: handle, gap and the longest label at 7.5 pt
    ncol = max(1, min(len(legend), 5, int((width - 0.6) // entry)))
    top_in = 0.8 + 0.19 * math.ceil(len(legend) / ncol)  # title, legend rows
    heights = [len(rs) * (0.2 * len(slots(rs)) + 0.22) for rs in panels.values()]
    gap = 0.75  # inches between panels (title, x axis)
    total = sum(heights) + gap * (len(panels) - 1) + top_in + 0.55
    fig = Figure(figsize=(width, total), dpi=DPI)
    gs = fig.add_gridspec(len(panels), 1, height_ratios=heights, left=0.3, right=0.85, top=1 - top_in / total,
                          bottom=0.45 / total, hspace=gap / (sum(heights) / len(panels)))
    any_floor = False
    for i, (panel, rs) in enumerate(panels.items()):
        ax = fig.add_subplot(gs[i])
        present = slots(rs)
        k = len(present)
        h = 0.8 / k
        vals = [v for r in rs for b in r.bars for v in (b.ms, b.lo, b.hi) if v] + [r.floor_ms for r in rs if r.floor_ms]
        lo_v, hi_v = min(vals), max(vals)
        log = hi_v / lo_v > LOG_SPAN
        for j, s in enumerate(present):
            ys, xs, errs, has_err = [], [], [[], []], False
            for gi, r in enumerate(rs):
                b = next((b for b in r.bars if b.series == s), None)
                if b is None:
                    continue
                ys.append(gi + (j - (k - 1) / 2) * h)
                xs.append(b.ms)
                errs[0].append(max(0.0, b.ms - b.lo) if b.lo else 0.0)
                errs[1].append(max(0.0, b.hi - b.ms) if b.hi else 0.0)
                has_err |= bool(b.lo or b.hi)
            ax.barh(ys, xs, height=h * 0.92, color=colors[s], label=s,
                    xerr=errs if has_err else None, error_kw={"elinewidth": 0.8, "capsize": 1.5, "ecolor": "#333"})
            for y, x in zip(ys, xs, strict=True):  # the median at the bar's end, over its error bar
                ax.text(x * 1.06 if log else x + 0.01 * hi_v, y, fmt_ms(x), va="center", ha="left", fontsize=6.5,
                        color="#111", zorder=6, bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none",
                                                      "alpha": 0.75})
        y0 = -(k - 1) / 2 * h  # ours' slot in its group: the floor is ours
        for gi, r in enumerate(rs):
            if r.floor_ms:
                any_floor = True
                ax.plot([r.floor_ms, r.floor_ms], [gi + y0 - 0.62 * h, gi + y0 + 0.62 * h], color="black", lw=1.6,
                        zorder=5, solid_capstyle="butt")
            for name, q in r.ratios():  # ours / peer, in the right margin level with the peer's bar
                j = present.index(name)
                ax.annotate(fmt_ratio(q), xy=(1.012, gi + y0 + j * h), xycoords=("axes fraction", "data"),
                            va="center", ha="left", fontsize=7.5, color=colors[name], fontweight="bold")
        ax.set_yticks(range(len(rs)))
        ax.set_yticklabels([textwrap.shorten(r.label, LABEL_CHARS, placeholder="...") for r in rs], fontsize=8)
        ax.set_ylim(len(rs) - 0.5, -0.5)
        if log:
            ax.set_xscale("log")
            ax.set_xlim(lo_v / 1.6, hi_v * 4.5)
        else:
            ax.set_xlim(0, hi_v * 1.22)
        ax.tick_params(axis="x", labelsize=7.5)
        ax.grid(axis="x", which="major", color="#ddd", lw=0.6)
        ax.set_axisbelow(True)
        ax.set_title(textwrap.shorten(panel, 84, placeholder="..."), fontsize=8.5, loc="left")
        names = {n for r in rs for n, _ in r.ratios()}
        if names:
            head = f"ours / {_short(next(iter(names)))}" if len(names) == 1 else "ours / peer\n(beside each)"
            ax.annotate(head, xy=(1.01, 1.0), xycoords="axes fraction", va="bottom", ha="left",
                        fontsize=7, color="#555")
        ax.set_xlabel("median ms" + (" (log scale)" if log else ""), fontsize=7.5, labelpad=1)
    handles = [Patch(color=colors[s], label=lab) for s, lab in zip(series, legend, strict=False)]
    if any_floor:
        handles.append(Line2D([], [], color="black", lw=1.6, label="floor (ours)"))
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 1 - 0.5 / total), ncol=ncol, fontsize=7.5,
               frameon=False, handlelength=1.8, columnspacing=1.4)
    fig.suptitle(_title(records, suite, date), fontsize=9.5, y=1 - 0.08 / total, va="top")
    # the left margin from the widest row label as drawn (plus a little), so that none is cut off
    renderer = FigureCanvasAgg(fig).get_renderer()
    widest = max(t.get_window_extent(renderer).width for ax in fig.axes for t in ax.get_yticklabels())
    gs.update(left=min(0.5, (widest + 14) / (width * DPI)))
    return fig


def plot_records(records: list[dict], suite: str, out: Path, *, date: str | None = None) -> Path:
    """Draw the suite's records (``figure``) and write them to ``out`` as a PNG; ``out``."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig = figure(records, suite, date=date)
    fig.savefig(out, format="png", dpi=DPI)
    return out


# --------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", required=True, help="the suite the records are from (ckks, tfhe, hmvp, ntt, ...)")
    ap.add_argument("--json", required=True, type=Path, help="the suite's JSON records")
    ap.add_argument("--out", required=True, type=Path, help="the PNG to write")
    args = ap.parse_args(argv)
    try:
        import matplotlib
    except ImportError:
        print(INSTALL_HINT, file=sys.stderr)
        return 2
    matplotlib.use("Agg")  # no display, whatever MPLBACKEND says
    try:
        records = json.loads(args.json.read_text())
    except (OSError, json.JSONDecodeError) as e:
        print(f"plot: cannot read {args.json}: {e}", file=sys.stderr)
        return 2
    if isinstance(records, dict):  # a single record
        records = [records]
    date = _dt.date.fromtimestamp(args.json.stat().st_mtime).isoformat()
    try:
        out = plot_records(records if isinstance(records, list) else [], args.suite, args.out, date=date)
    except NothingToPlot:
        print(f"plot: {args.json} has no records to plot for suite {args.suite!r}", file=sys.stderr)
        return 2
    print(f"PNG: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
