"""Kernel benchmark: CROSS's BAT modular matmul vs a direct 64-bit one, and the MAT (matrix) NTT vs the radix-2
one, each against a floor measured in the same run.

    python benchmarks/bench_kernels.py [--quick | --full] [--shapes HxVxW,...] [--bits 30] [--limbs 8]
                                       [--json PATH] [--threads 1] [--reps 10]
    crossfhe bench kernels [same options]

**Modular matmul** C = A B mod q, A [H, V], B [V, W] (shapes H x V x W), one NTT prime q of ``--bits`` bits
(``crossfhe.math.primes.ntt_primes``, default 30), A and B uniform in [0, q). The shapes of CROSS Tab. 7:
"matmul" 256^3, 512^3, 512 x 1024 x 1024, 2048^3, 4096^3, 8192^3 and "basis_change" 16384 x 256 x 256,
16384 x 1024 x 256, 8192 x 256 x 1024 (a basis conversion reduces each output column mod its own prime; one
modulus for all is the same int8 work). B is the known operand (twiddles, conversion constants):

- **MATRIX** (BAT, ``crossfhe.kernels.bat``): B expanded offline by ``bat.bat_right`` into int8
  [V K, W K] (K = 4 signed 8-bit digits per residue); its time is ``offline_ms``, apart from the median.
  Online, ``bat.matmul``: A's digits [H, V K] times the expanded B as one int8 x int8 -> int32 product,
  then one recombination of the K chunks mod q.
- **direct**: ``a @ b mod q`` on uint64 under ``jax.enable_x64(True)``, exact: a product of two residues
  is below (q - 1)^2, so the inner dimension is cut into runs of r = floor((2^64 - 1) / (q - 1)^2) items
  (16 for 30-bit q, 4 for 31-bit, 256 for 28-bit; zero-padded to a multiple of r), each run's uint64
  product [H, r] @ [r, W] (no overflow) reduced mod q and added to an accumulator mod q (a ``lax.scan``
  over the runs).

Every measured shape checks MATRIX == direct on the whole output and direct == Python integers on a
2 x 64 corner; a mismatch is printed and the run exits with status 1 (after writing the JSON).

**NTT** of N = 2^16 (``--quick``: 2^12 and 2^14) over a batch of ``--limbs`` 30-bit limbs, forward and
inverse: **VECTOR** (``crossfhe.ring.ntt``, radix-2) and **MATRIX** (``crossfhe.kernels.ntt_matrix``, the
CROSS 4-step transform, N = R C, two BAT products per limb); MATRIX == VECTOR checked bit-exact both ways.
Reported: ns per butterfly ((N / 2) log2 N per limb) and limb transforms per second.

**Floors** (``floor_ms``, ``floor_fraction`` = floor / median, the achieved fraction), from rates measured
at the start of the run:

- int8 rate: ``jnp.einsum`` int8 x int8 -> int32 (``preferred_element_type``) on square products (CPU 1024
  and 2048, accelerators 2048 to 8192), the best median MAC/s; the int32 x int32 matmul rate beside it
  (record ``int32_matmul_rate``), for comparison only.
- bandwidth: a fused elementwise uint32 pass z = x + y (12 bytes per word), timed at the working set of
  each operation (so cache-resident shapes get their cache bandwidth) and once at 3 x 64 MiB
  (``elementwise_rate``: GB/s and int32 operations per second).
- BAT matmul: max(H (V K) (W K) int8 MACs / int8 rate, bytes / bandwidth), bytes = A (4 H V) + expanded B
  (V K W K) + C (4 H W). MATRIX NTT: max(limbs N (C + R) K^2 MACs / int8 rate, bytes / bandwidth); VECTOR
  NTT: bytes / bandwidth; NTT bytes = read and write 4 N per limb + one direction's tables.
  ``floor_bound`` says which term won. The direct baseline has no floor (null).

CROSS Tab. 7's TPUv4 figures (MAT+BAT column) are printed beside the matmul shapes as ``paper_ms``, context
rather than a comparison measured here. On a CPU the default run stops at 2048^3 (4096^3 and 8192^3 are in
the JSON as skipped, with the reason); ``--full`` runs them (8192^3: 1 GiB of expanded B, 9e12 int8 MACs,
and minutes per call of the direct baseline), as does naming them in ``--shapes``. On an accelerator every
shape runs by default.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from functools import partial
from pathlib import Path

HERE = Path(__file__).resolve().parent

PAPER_NOTE = "paper_ms: CROSS Tab. 7, MAT+BAT column, on TPUv4 (paper figure, not run here)"
# (kind, H, V, W, CROSS Tab. 7 MAT+BAT on TPUv4 in ms)
SHAPES = (
    ("matmul", 256, 256, 256, 24.83e-3),
    ("matmul", 512, 512, 512, 42.11e-3),
    ("matmul", 512, 1024, 1024, 124.38e-3),
    ("matmul", 2048, 2048, 2048, 1.36),
    ("matmul", 4096, 4096, 4096, 8.22),
    ("matmul", 8192, 8192, 8192, 76.54),
    ("basis_change", 16384, 256, 256, 345.90e-3),
    ("basis_change", 16384, 1024, 256, 806.75e-3),
    ("basis_change", 8192, 256, 1024, 707.52e-3),
)
QUICK_SHAPES = ((256, 256, 256), (512, 512, 512))
CPU_MAX_MACS = 2048**3  # default CPU run: shapes up to 2048^3 (H V W)
NTT_LOG_N = (16,)
QUICK_NTT_LOG_N = (12, 14)
DIRECT = "direct uint64 matmul (x64), runs of r products reduced mod q"


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="256^3 and 512^3, NTT N 2^12 and 2^14; short windows")
    g.add_argument("--full", action="store_true", help="every shape, also 4096^3 and 8192^3 on a CPU")
    p.add_argument("--shapes", default=None, help="comma-separated HxVxW matmul shapes instead of the default set")
    p.add_argument("--bits", type=int, default=30, help="bits of the prime(s) (default 30)")
    p.add_argument("--limbs", type=int, default=8, help="limbs in the NTT batch (default 8)")
    p.add_argument("--json", type=Path, default=None, help="write the JSON records here")
    p.add_argument("--threads", type=int, default=1, help="CPUs to run on (default 1)")
    p.add_argument("--reps", type=int, default=None, help="minimum timed calls (default 10, --quick 5)")
    return p.parse_args()


from crossfhe.cli.benchutil import (  # noqa: E402
    enable_compilation_cache,
    first_call,
    fmt,
    load_average,
    pin_threads,
    timeit,
    write_json,
)
from crossfhe.runtime import keep_heap  # noqa: E402

ARGS = _parse() if __name__ == "__main__" else None
if ARGS is not None:
    pin_threads(ARGS.threads)
    HEAP_KEPT = keep_heap(reexec=True)  # restarts once with the allocator settings: crossfhe.runtime

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jaxlib  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

from crossfhe.kernels import bat, ntt_matrix  # noqa: E402
from crossfhe.kernels.chunks import chunk_count  # noqa: E402
from crossfhe.math.primes import ntt_primes  # noqa: E402
from crossfhe.ring import ntt as vector_ntt  # noqa: E402


def _stats(ts: list[float]) -> dict:
    return {"median_ms": float(np.median(ts)) * 1e3, "min_ms": min(ts) * 1e3, "max_ms": max(ts) * 1e3,
            "reps": len(ts)}


def _on_cpu() -> bool:
    return jax.devices()[0].platform == "cpu"


# --------------------------------------------------------------------------------------------------
# Direct baseline
# --------------------------------------------------------------------------------------------------


def direct_run(q: int) -> int:
    """Items per exact uint64 run: the largest r with r (q - 1)^2 < 2^64."""
    return (2**64 - 1) // (q - 1) ** 2


@partial(jax.jit, static_argnames=("q", "run"))
def matmul_direct(a, b, *, q: int, run: int):
    """Exact a @ b mod q for uint64 a [H, V], b [V, W] in [0, q) (module docstring); call under x64."""
    h, v = a.shape
    w = b.shape[1]
    runs = -(-v // run)
    pad = runs * run - v
    a = jnp.pad(a, ((0, 0), (0, pad))).reshape(h, runs, run).transpose(1, 0, 2)
    b = jnp.pad(b, ((0, pad), (0, 0))).reshape(runs, run, w)
    qq = jnp.uint64(q)

    def step(acc, ab):
        part = jnp.dot(ab[0], ab[1]) % qq
        return (acc + part) % qq, None

    return lax.scan(step, jnp.zeros((h, w), jnp.uint64), (a, b))[0]


# --------------------------------------------------------------------------------------------------
# Rates
# --------------------------------------------------------------------------------------------------

_DOT = jax.jit(lambda a, b: jnp.einsum("ij,jk->ik", a, b, preferred_element_type=jnp.int32))
_STREAM = jax.jit(lambda x, y: x + y)


class Rates:
    """Rates measured in this run: int8 MAC/s, and the fused-pass bandwidth at a given working set."""

    STREAM_TIMING = {"reps": 10, "min_seconds": 0.2, "max_seconds": 1.0}

    def __init__(self, timing: dict):
        self.timing = timing
        self.int8_mac_s = 0.0
        self._bw: dict[int, tuple[float, float]] = {}

    def bandwidth(self, nbytes: int) -> tuple[float, float]:
        """(bytes/s, ms) of one fused pass z = x + y over uint32 arrays moving about ``nbytes`` bytes."""
        words = max(1024, -(-int(nbytes) // 12))
        words = 1 << (words - 1).bit_length()  # a power of two: nearby working sets share a measurement
        if words not in self._bw:
            x = jnp.arange(words, dtype=jnp.uint32)
            y = x ^ jnp.uint32(0x5A5A5A5A)
            jax.block_until_ready(_STREAM(x, y))
            t = float(np.median(timeit(lambda: _STREAM(x, y), **self.STREAM_TIMING)))
            self._bw[words] = (12 * words / t, t * 1e3)
        return self._bw[words][0], self._bw[words][1]

    def memory_floor_ms(self, nbytes: int) -> float:
        return nbytes / self.bandwidth(nbytes)[0] * 1e3

    def floor(self, *, macs: int, nbytes: int) -> tuple[float, str]:
        """(floor_ms, bound): max(macs / int8 rate, bytes / bandwidth) and which term it is."""
        mem = self.memory_floor_ms(nbytes)
        comp = macs / self.int8_mac_s * 1e3 if macs else 0.0
        return (comp, "int8") if comp > mem else (mem, "memory")


def calibrate(rates: Rates, base: dict, quick: bool) -> list[dict]:
    """Measure the int8 and int32 matmul rates and the large-pass bandwidth; fill ``rates``; records."""
    records = []
    rng = np.random.default_rng(1)
    sizes = (1024, 2048) if _on_cpu() else (2048, 4096, 8192)
    best = 0.0
    for n in sizes:
        a = jnp.asarray(rng.integers(-128, 128, (n, n), dtype=np.int8))
        b = jnp.asarray(rng.integers(-128, 128, (n, n), dtype=np.int8))
        _, first = first_call(lambda a=a, b=b: _DOT(a, b))
        st = _stats(timeit(lambda a=a, b=b: _DOT(a, b), **rates.timing))
        rate = n**3 / (st["median_ms"] / 1e3)
        best = max(best, rate)
        records.append(dict(base, name="int8_matmul_rate", backend="MATRIX", params={"M": n, "K": n, "N": n}, **st,
                            first_call_ms=first * 1e3, gmac_s=rate / 1e9, floor_ms=None,
                            note="jnp.einsum int8 x int8 -> int32 (preferred_element_type), square"))
    rates.int8_mac_s = best
    n = 512 if _on_cpu() else 4096
    a = jnp.asarray(rng.integers(-128, 128, (n, n), dtype=np.int32))
    b = jnp.asarray(rng.integers(-128, 128, (n, n), dtype=np.int32))
    _, first = first_call(lambda: _DOT(a, b))
    st = _stats(timeit(lambda: _DOT(a, b), **rates.timing))
    rate32 = n**3 / (st["median_ms"] / 1e3)
    records.append(dict(base, name="int32_matmul_rate", backend="VECTOR", params={"M": n, "K": n, "N": n}, **st,
                        first_call_ms=first * 1e3, gmac_s=rate32 / 1e9, int8_over_int32=best / rate32,
                        floor_ms=None, note="jnp.einsum int32 x int32 -> int32, square; for comparison only"))
    big = (3 << 24) if quick else (3 << 26)  # 3 x 16 MiB or 3 x 64 MiB
    bw, ms = rates.bandwidth(big)
    words = big // 12
    records.append(dict(base, name="elementwise_rate", backend="VECTOR", params={"words": words, "bytes": big},
                        median_ms=ms, min_ms=None, max_ms=None, reps=None, gb_s=bw / 1e9,
                        int32_gop_s=words / (ms / 1e3) / 1e9, floor_ms=None,
                        note="fused z = x + y over uint32 arrays (12 bytes and one int32 add per word)"))
    return records


# --------------------------------------------------------------------------------------------------
# Modular matmul
# --------------------------------------------------------------------------------------------------


def _shape_plan(args) -> list[tuple[str, int, int, int, float | None, str | None]]:
    """(kind, H, V, W, paper_ms, skip reason or None) for this run."""
    paper = {(h, v, w): (kind, ms) for kind, h, v, w, ms in SHAPES}
    if args.shapes:
        wanted = [tuple(int(d) for d in s.lower().split("x")) for s in args.shapes.split(",") if s.strip()]
        if any(len(s) != 3 for s in wanted):
            raise SystemExit(f"--shapes takes HxVxW,...; got {args.shapes!r}")
    elif args.quick:
        wanted = list(QUICK_SHAPES)
    else:
        wanted = [(h, v, w) for _, h, v, w, _ in SHAPES]
    plan = []
    for h, v, w in wanted:
        kind, ms = paper.get((h, v, w), ("matmul", None))
        skip = None
        if _on_cpu() and not (args.full or args.shapes) and h * v * w > CPU_MAX_MACS:
            skip = "cpu_default"
        plan.append((kind, h, v, w, ms, skip))
    return plan


def _skip_note(h: int, v: int, w: int, k: int, rates: Rates, direct_mac_s: float | None) -> str:
    macs = h * v * k * w * k
    est = f" (an int8 floor of {macs / rates.int8_mac_s:.0f} s per BAT call)" if rates.int8_mac_s else ""
    dest = (f"; the direct baseline about {h * v * w / direct_mac_s:.0f} s per call at its rate on the last shape"
            if direct_mac_s else "")
    return (f"skipped on CPU by default (--full runs it): B expands to {v * k * w * k / 2**20:.0f} MiB of int8, "
            f"A's digits take {h * v * k / 2**20:.0f} MiB and the int32 chunks {4 * h * w * k / 2**20:.0f} MiB; "
            f"{macs:.2e} int8 MACs{est}{dest}")


def bench_matmul(kind: str, h: int, v: int, w: int, paper_ms, q: int, args, base: dict, rates: Rates,
                 errors: list[str]) -> tuple[list[dict], float]:
    """Records of one shape (MATRIX and direct) and the direct baseline's MAC/s."""
    k = chunk_count([q])
    rng = np.random.default_rng([h, v, w])
    a = rng.integers(0, q, (h, v), dtype=np.uint64)
    b = rng.integers(0, q, (v, w), dtype=np.uint64)
    params = {"H": h, "V": v, "W": w, "prime_bits": q.bit_length(), "q": q, "K": k}
    label = f"{kind} {h}x{v}x{w}"

    load0 = load_average()
    t0 = time.perf_counter()
    op = bat.bat_right(b[None].astype(np.uint32), [q])
    jax.block_until_ready(op.w)
    offline = time.perf_counter() - t0
    ad = jax.device_put(a[None].astype(np.uint32))
    got, first = first_call(lambda ad=ad, op=op: bat.matmul(ad, op))
    got = np.asarray(got)[0]
    st = _stats(timeit(lambda ad=ad, op=op: bat.matmul(ad, op), **rates.timing))
    macs = h * (v * k) * (w * k)
    nbytes = 4 * h * v + (v * k) * (w * k) + 4 * h * w
    floor_ms, bound = rates.floor(macs=macs, nbytes=nbytes)
    bat_rec = dict(base, name=kind, backend="MATRIX", params=params, **st, first_call_ms=first * 1e3,
                   offline_ms=offline * 1e3, expanded_bytes=op.nbytes, splits=len(op.splits), int8_macs=macs,
                   bytes=nbytes, int8_gmac_s=macs / st["median_ms"] / 1e6,
                   floor_ms=floor_ms, floor_bound=bound, floor_fraction=floor_ms / st["median_ms"],
                   bandwidth_gb_s=rates.bandwidth(nbytes)[0] / 1e9, paper_ms=paper_ms,
                   note="bat.matmul (digits, one int8 x int8 -> int32 product, recombination); offline_ms: "
                        "bat.bat_right expansion of B (not in the median); floor: max(int8 MACs / int8 rate, "
                        "bytes of A + expanded B + C / bandwidth)" + (f"; {PAPER_NOTE}" if paper_ms else ""))
    del op, ad
    print(f"# {label}: BAT {st['median_ms']:.2f} ms (first {first:.1f} s, offline {offline:.1f} s)", flush=True)

    run = direct_run(q)
    with jax.enable_x64(True):
        a64, b64 = jax.device_put(a), jax.device_put(b)
        ref, dfirst = first_call(lambda a64=a64, b64=b64: matmul_direct(a64, b64, q=q, run=run))
        ref = np.asarray(ref)
        dst = _stats(timeit(lambda a64=a64, b64=b64: matmul_direct(a64, b64, q=q, run=run), **rates.timing))
    del a64, b64
    cols = min(w, 64)
    exact = (a[:2].astype(object) @ b[:, :cols].astype(object)) % q
    direct_ok = bool(np.array_equal(ref[:2, :cols].astype(object), exact))
    bat_ok = bool(np.array_equal(got.astype(np.uint64), ref))
    if not direct_ok:
        errors.append(f"{label}: direct baseline != Python integers on the 2 x {cols} corner")
    if not bat_ok:
        bad = int(np.sum(got.astype(np.uint64) != ref))
        errors.append(f"{label}: BAT differs from the direct baseline in {bad} of {h * w} entries")
    direct_mac_s = h * v * w / (dst["median_ms"] / 1e3)
    bat_rec.update(peer=DIRECT, peer_median_ms=dst["median_ms"], ratio=st["median_ms"] / dst["median_ms"],
                   correct=bat_ok and direct_ok)
    load1 = load_average()
    bat_rec["load_avg"] = [load0, load1]
    direct_rec = dict(base, name=kind, backend="direct", params=dict(params, run=run), **dst,
                      first_call_ms=dfirst * 1e3, offline_ms=None, gmac_s=direct_mac_s / 1e9, peer=None,
                      peer_median_ms=None, ratio=None, floor_ms=None, paper_ms=paper_ms, correct=direct_ok,
                      load_avg=[load0, load1],
                      note=f"exact uint64 a @ b mod q: runs of {run} inner items (sum < 2^64), each product "
                           f"reduced mod q and accumulated mod q (lax.scan); checked against Python integers "
                           f"on a 2 x {cols} corner; no floor")
    print(f"# {label}: direct {dst['median_ms']:.1f} ms ({dst['reps']} reps); "
          f"{'equal' if bat_ok and direct_ok else 'WRONG'}", flush=True)
    return [bat_rec, direct_rec], direct_mac_s


# --------------------------------------------------------------------------------------------------
# NTT
# --------------------------------------------------------------------------------------------------


def _table_bytes(plan) -> int:
    """One direction's tables: half the bytes of the plan's array leaves (forward and inverse are alike)."""
    return sum(int(np.asarray(t).nbytes) for t in jax.tree_util.tree_leaves(plan)) // 2


def bench_ntt(log_n: int, args, base: dict, rates: Rates, errors: list[str]) -> list[dict]:
    n, limbs = 1 << log_n, args.limbs
    primes = ntt_primes(args.bits, n, limbs)
    k = chunk_count(primes)
    rng = np.random.default_rng(log_n)
    q = np.array(primes, dtype=np.uint64).reshape(-1, 1)
    x = jax.device_put((rng.integers(0, 2**32, (limbs, n), dtype=np.uint64) % q).astype(np.uint32))
    t0 = time.perf_counter()
    vplan = vector_ntt.NTTPlan.create(n, primes)
    v_offline = time.perf_counter() - t0
    t0 = time.perf_counter()
    mplan = ntt_matrix.MatrixNTTPlan.create(n, primes)
    jax.block_until_ready(jax.tree_util.tree_leaves(mplan))
    m_offline = time.perf_counter() - t0
    r, c = mplan.r, mplan.c
    butterflies = limbs * (n // 2) * log_n
    params = {"N": n, "limbs": limbs, "prime_bits": args.bits, "K": k}
    backends = (
        ("VECTOR", vplan, vector_ntt.ntt, vector_ntt.intt, 0, v_offline),
        ("MATRIX", mplan, ntt_matrix.ntt, ntt_matrix.intt, limbs * n * (c + r) * k * k, m_offline),
    )
    records, outputs = [], {}
    for backend, plan, fwd, inv, macs, offline in backends:
        nbytes = limbs * 8 * n + _table_bytes(plan)
        floor_ms, bound = rates.floor(macs=macs, nbytes=nbytes)
        arg = x
        for name, fn in (("ntt_forward", fwd), ("ntt_inverse", inv)):
            load0 = load_average()
            out, first = first_call(lambda fn=fn, arg=arg, plan=plan: fn(arg, plan))
            outputs[(backend, name)] = np.asarray(out)
            st = _stats(timeit(lambda fn=fn, arg=arg, plan=plan: fn(arg, plan), **rates.timing))
            med_s = st["median_ms"] / 1e3
            rec = dict(base, name=name, backend=backend, params=dict(params, R=r, C=c) if macs else params, **st,
                       first_call_ms=first * 1e3, offline_ms=offline * 1e3, ns_per_butterfly=med_s * 1e9 / butterflies,
                       limb_transforms_per_s=limbs / med_s, int8_macs=macs or None, bytes=nbytes,
                       floor_ms=floor_ms, floor_bound=bound, floor_fraction=floor_ms / st["median_ms"],
                       bandwidth_gb_s=rates.bandwidth(nbytes)[0] / 1e9, peer=None, peer_median_ms=None,
                       ratio=None, paper_ms=None, load_avg=[load0, load_average()],
                       note=("floor: max(limbs N (C + R) K^2 int8 MACs / int8 rate, bytes / bandwidth)" if macs
                             else "floor: bytes / bandwidth") + "; bytes: read and write 4 N per limb + one "
                            "direction's tables; offline_ms: plan creation")
            records.append(rec)
            arg = out
        print(f"# NTT N 2^{log_n} x {limbs} {backend}: forward {records[-2]['median_ms']:.2f} ms, inverse "
              f"{records[-1]['median_ms']:.2f} ms", flush=True)
    xh = np.asarray(x)
    for name in ("ntt_forward", "ntt_inverse"):
        if not np.array_equal(outputs[("MATRIX", name)], outputs[("VECTOR", name)]):
            errors.append(f"NTT N 2^{log_n}: MATRIX {name} differs from VECTOR")
    for backend in ("VECTOR", "MATRIX"):
        if not np.array_equal(outputs[(backend, "ntt_inverse")], xh):
            errors.append(f"NTT N 2^{log_n}: {backend} intt(ntt(x)) != x")
    ok = not any(f"N 2^{log_n}:" in e for e in errors)
    for rec in records:
        rec["correct"] = ok
    # the MATRIX records carry the VECTOR time as their peer (ours / radix-2)
    vec = {r["name"]: r["median_ms"] for r in records if r["backend"] == "VECTOR"}
    for rec in records:
        if rec["backend"] == "MATRIX":
            rec.update(peer="crossfhe.ring.ntt (VECTOR, radix-2)", peer_median_ms=vec[rec["name"]],
                       ratio=rec["median_ms"] / vec[rec["name"]])
    return records


# --------------------------------------------------------------------------------------------------
# Run
# --------------------------------------------------------------------------------------------------


def _base(args) -> dict:
    d = jax.devices()[0]
    return {"suite": "kernels", "device": d.platform, "device_kind": d.device_kind, "jax": jax.__version__,
            "jaxlib": jaxlib.__version__, "numpy": np.__version__, "threads": args.threads,
            "cpu": platform.processor() or platform.machine()}


def main(args: argparse.Namespace) -> tuple[list[dict], list[str]]:
    t_run = time.perf_counter()
    reps = args.reps or (5 if args.quick else 10)
    timing = ({"reps": reps, "min_seconds": 0.3, "max_seconds": 1.0} if args.quick else
              {"reps": reps, "min_seconds": 2.0, "max_seconds": 6.0})
    base = _base(args)
    print(f"# {base['device']} ({base['device_kind']}), jax {base['jax']}; load average {load_average()}; "
          f"pinned to {args.threads} CPU(s)", flush=True)
    rates = Rates(timing)
    records = calibrate(rates, base, args.quick)
    print(f"# int8 matmul {rates.int8_mac_s / 1e9:.0f} GMAC/s; int32 matmul {records[-2]['gmac_s']:.1f} GMAC/s; "
          f"bandwidth {records[-1]['gb_s']:.1f} GB/s", flush=True)
    errors: list[str] = []
    q = ntt_primes(args.bits, 1 << 16, 1)[0]
    direct_mac_s = None
    for kind, h, v, w, paper_ms, skip in _shape_plan(args):
        if skip:
            k = chunk_count([q])
            records.append(dict(base, name=kind, backend="MATRIX", params={"H": h, "V": v, "W": w,
                                "prime_bits": q.bit_length(), "q": q, "K": k}, skipped=True, median_ms=None,
                                min_ms=None, max_ms=None, reps=0, floor_ms=None, paper_ms=paper_ms,
                                note=_skip_note(h, v, w, k, rates, direct_mac_s) + f"; {PAPER_NOTE}"))
            continue
        recs, direct_mac_s = bench_matmul(kind, h, v, w, paper_ms, q, args, base, rates, errors)
        records += recs
        jax.clear_caches()
    for log_n in QUICK_NTT_LOG_N if args.quick else NTT_LOG_N:
        records += bench_ntt(log_n, args, base, rates, errors)
    print(f"# run: {time.perf_counter() - t_run:.1f} s", flush=True)
    return records, errors


def _shape(p: dict) -> str:
    return f"{p['H']}x{p['V']}x{p['W']}"


def print_table(records: list[dict]) -> None:
    for r in records:
        if r["name"] == "int8_matmul_rate":
            print(f"int8 matmul {r['params']['M']}^3: {r['gmac_s']:.0f} GMAC/s")
        elif r["name"] == "int32_matmul_rate":
            print(f"int32 matmul {r['params']['M']}^3: {r['gmac_s']:.1f} GMAC/s (int8 best / int32: "
                  f"{r['int8_over_int32']:.0f}x)")
        elif r["name"] == "elementwise_rate":
            print(f"elementwise uint32 x + y, {r['params']['bytes'] / 2**20:.0f} MiB: {r['gb_s']:.1f} GB/s, "
                  f"{r['int32_gop_s']:.2f} G int32 ops/s")
    head = (f"{'shape':<16}{'kind':<14}{'BAT ms':>10}{'first s':>8}{'offl s':>7}{'GMAC/s':>8}{'floor ms':>10}"
            f"{'bound':>7}{'floor%':>7}{'direct ms':>11}{'BAT/dir':>8}{'paper ms':>9}{'ok':>4}")
    print(head)
    print("-" * len(head))
    for r in records:
        if r["name"] not in ("matmul", "basis_change") or r["backend"] != "MATRIX":
            continue
        p = r["params"]
        if r.get("skipped"):
            print(f"{_shape(p):<16}{r['name']:<14}{'skipped':>10}{'':>59}{fmt(r['paper_ms'], 9, '.3f')}")
            continue
        print(f"{_shape(p):<16}{r['name']:<14}{r['median_ms']:>10.3f}{r['first_call_ms'] / 1e3:>8.1f}"
              f"{r['offline_ms'] / 1e3:>7.1f}{r['int8_gmac_s']:>8.0f}{r['floor_ms']:>10.3f}{r['floor_bound']:>7}"
              f"{100 * r['floor_fraction']:>7.1f}{r['peer_median_ms']:>11.1f}{r['ratio']:>8.3f}"
              f"{fmt(r['paper_ms'], 9, '.3f')}{'yes' if r['correct'] else 'NO':>4}")
    head = (f"{'op':<9}{'N':>7}{'limbs':>6}{'backend':>8}{'ms':>10}{'ns/bfly':>9}{'limbs/s':>10}{'floor ms':>10}"
            f"{'bound':>7}{'floor%':>7}{'/VECTOR':>8}{'ok':>4}")
    print(head)
    print("-" * len(head))
    for r in records:
        if not r["name"].startswith("ntt_"):
            continue
        p = r["params"]
        print(f"{r['name'][4:]:<9}{p['N']:>7}{p['limbs']:>6}{r['backend']:>8}{r['median_ms']:>10.3f}"
              f"{r['ns_per_butterfly']:>9.2f}{r['limb_transforms_per_s']:>10.0f}{r['floor_ms']:>10.3f}"
              f"{r['floor_bound']:>7}{100 * r['floor_fraction']:>7.1f}{fmt(r.get('ratio'), 8, '.1f')}"
              f"{'yes' if r['correct'] else 'NO':>4}")
    r0 = records[0]
    print(f"jax {r0['jax']}, {r0['device']} ({r0['device_kind']}), threads {r0['threads']}; BAT/dir = BAT / direct "
          f"uint64; floor% = floor / median; paper = CROSS Tab. 7 MAT+BAT on TPUv4 (context); /VECTOR = ours / radix-2")
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    enable_compilation_cache()
    recs, errs = main(ARGS)
    print_table(recs)
    write_json(recs, ARGS.json or HERE / "results" / "kernels.json")
    if errs:
        print("WRONG RESULTS:\n  " + "\n  ".join(errs), file=sys.stderr)
        sys.exit(1)
