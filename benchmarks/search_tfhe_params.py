"""Search the TFHE noise model for the cheapest blind rotation at a failure probability (default 2^-128).

    python benchmarks/search_tfhe_params.py [--bits 2,4,6] [--log2-pfail -128] [--top 8]
                                            [--measure K] [--threads 1] [--json PATH]

How :mod:`crossfhe.tfhe.presets` P2_128, P4_128 and P6_128 were chosen (and how to check the choice). For each
message width p (``max_norm2`` = 2^p + 1, as the presets), every combination of

* the short key: n and its noise rate at a published 128-bit point
  (``crossfhe.tfhe.params.PUBLISHED_LWE_POINTS``: a larger n at the same rate only costs more steps and noise);
* the long key: k x N with k N in [2048, 16384], at the smallest noise rate the points allow for k N
  (2^-48.32 at k N = 2048, 2^-62 from 4096 up);
* the blind rotation: extension nu in [0, 5], grouping g in [1, 3], gadget levels l in [1, 4] with the base
  2^b of least step noise (FFT rounding included) that the FFT kernel takes (``fourier.supports``);
* the key switch: the fewest levels l_ks (then the least noise) that meet the target,

is kept when the model (``Params.log2_p_fail()`` at ``max_norm2``) meets the target, the bootstrap runs through
the FFT (``Params.fft_kernel``), the parameters pass the security check, and the keys (``Params.bsk_bytes +
ksk_bytes``) are no larger than TFHE-rs's server key at its 2^-128 KS-PBS parameters of the same width
(``TFHERS_2M128``: tfhe 1.8.2, ``V1_8_PARAM_MESSAGE_{1,2,3}_CARRY_{1,2,3}_KS_PBS_TUNIFORM_2M128``, the sizes the
harness ``benchmarks/tfhers_peer`` reports). The candidates are ranked by the estimated work of one bootstrap:

    steps x 2^nu x [(k+1)(l+1) FFTs of N/2 points + (2^g - 1)(k+1)^2 l key products of N/2 points]
    + k N l_ks (n + 1) key-switch words

with an FFT of M points costing M log2(M) units, a key product of M points ``--w-product`` M units and a key-switch
word ``--w-ks`` units (defaults calibrated from single-thread timings on the dev box, see ``--measure``): steps is
ceil(n / g); each step transforms the (k+1) l digit polynomials forward and the k+1 sums back, and multiplies the
digits by the 2^g - 1 GGSWs of its group. Two measured factors make the ranking follow the kernels as they are:
``W_GENERIC`` on the products of shapes the native kernel has no unrolled loop for, ``W_XLA`` on blind rotations
of one key bit per step (the XLA FFT kernel). One unit is about 0.2 ns on the dev box (one thread). Every
candidate printed is rebuilt by ``crossfhe.tfhe.params.make`` (the library's own model and checks).

``--measure K`` generates keys for the K cheapest candidates of each width and times ``ops.pbs`` at batch 1 (median
of >= 20 calls and 2 s, one thread unless --threads) and ``ops.keyswitch`` alone, checking every output against
the table; it is heavy (tens of seconds per candidate, more at 6 bits).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

TFHERS_2M128 = {
    # width: TFHE-rs 1.8.2 KS-PBS TUniform 2^-128 parameters (v1_8 = v1_4 values) and the sizes its harness reports
    2: {"name": "V1_8_PARAM_MESSAGE_1_CARRY_1_KS_PBS_TUNIFORM_2M128", "n": 879, "k": 4, "N": 512, "pbs": (23, 1),
        "ks": (5, 3), "log2_p_fail": -144.322, "server_key_bytes": 133_439_344, "bsk_bytes": 90_009_600,
        "ksk_bytes": 43_253_760},
    4: {"name": "V1_8_PARAM_MESSAGE_2_CARRY_2_KS_PBS_TUNIFORM_2M128", "n": 918, "k": 1, "N": 2048, "pbs": (23, 1),
        "ks": (4, 4), "log2_p_fail": -129.581, "server_key_bytes": 120_419_192, "bsk_bytes": 60_162_048,
        "ksk_bytes": 60_227_584},
    6: {"name": "V1_8_PARAM_MESSAGE_3_CARRY_3_KS_PBS_TUNIFORM_2M128", "n": 1077, "k": 1, "N": 8192, "pbs": (15, 2),
        "ks": (4, 5), "log2_p_fail": -128.992, "server_key_bytes": 917_966_328, "bsk_bytes": 564_658_176,
        "ksk_bytes": 353_239_040},
}
"""TFHE-rs's 2^-128 KS-PBS parameters by message width (message + carry bits), with its server key's bincode size
and the BSK / KSK sizes from the parameters (``benchmarks/tfhers_peer``: u64 words, Fourier BSK at 8 N bytes per
polynomial)."""

GLWE_SHAPES = [(k, n) for k in (1, 2, 4) for n in (512, 1024, 2048, 4096, 8192) if 2048 <= k * n <= 16384]
LEVELS = (1, 2, 3, 4)
EXTENSIONS = range(0, 6)
GROUPINGS = (1, 2, 3)
W_PRODUCT = 3.9
"""A key product of M complex points against an FFT of M points' M log2 M: measured on the dev box, one thread, the
native kernel at P4's shape (1024 points, 16-byte key words streamed from memory: 0.79 us per product, 2.0 us per
FFT)."""
W_KS = 0.35
"""A key-switch word (one uint32 multiply-accumulate, 4 key bytes streamed) in the same units."""
W_GENERIC = 2.8
"""Factor on the key products where the native kernel runs its generic product loop (``products_any`` in
``crossfhe/kernels/tfhe_fft.c``: nu = 0 and not k = 1, g = 2, l in {1, 2}, the shapes with unrolled loops):
fitted to the 2-bit candidates 781 / 2 x 1024 / g 2 (15.2 ms per bootstrap) against 781 / 1 x 2048 / g 2
(7.6 ms), whose plain counts are within 10%."""
W_XLA = 1.4
"""Factor on the whole blind rotation where it runs through the XLA FFT kernel (g = 1: the native kernel takes
grouped key bits only): fitted to the 4-bit candidates 833 / 1 x 2048 x 2^1 with g = 1 (31.0 ms) and g = 2
(17.9 ms)."""


@dataclass(order=True)
class Candidate:
    cost: float
    p: int = field(compare=False)
    n: int = field(compare=False)
    k: int = field(compare=False)
    big_n: int = field(compare=False)
    nu: int = field(compare=False)
    g: int = field(compare=False)
    pbs: tuple[int, int] = field(compare=False)
    ks: tuple[int, int] = field(compare=False)
    log2_p_fail: float = field(compare=False)
    bsk_bytes: int = field(compare=False)
    ksk_bytes: int = field(compare=False)
    br_cost: float = field(compare=False)
    ks_cost: float = field(compare=False)
    route: str = field(compare=False)

    def kwargs(self) -> dict:
        from crossfhe.tfhe import params as P

        return dict(lwe_dim=self.n, glwe_dim=self.k, poly_size=self.big_n,
                    glwe_log2_rate=P._published_rate(self.k * self.big_n),
                    lwe_log2_rate=P._published_rate(self.n), pbs=self.pbs, ks=self.ks,
                    max_norm2=2**self.p + 1, extension=self.nu, grouping=self.g)

    def params(self, name: str = ""):
        from crossfhe.tfhe.params import make

        return make(self.p, name=name, **self.kwargs())

    def row(self) -> dict:
        ref = TFHERS_2M128[self.p]["server_key_bytes"]
        return {"p": self.p, "n": self.n, "k": self.k, "N": self.big_n, "nu": self.nu, "g": self.g,
                "pbs": list(self.pbs), "ks": list(self.ks), "log2_p_fail": round(self.log2_p_fail, 2),
                "bsk_mb": round(self.bsk_bytes / 1e6, 1), "ksk_mb": round(self.ksk_bytes / 1e6, 1),
                "keys_vs_tfhers": round((self.bsk_bytes + self.ksk_bytes) / ref, 3),
                "steps": -(-self.n // self.g), "cost": round(self.cost / 1e6, 2),
                "br_cost": round(self.br_cost / 1e6, 2), "ks_cost": round(self.ks_cost / 1e6, 2),
                "route": self.route}


def _var_round_2n(n: int, acc: int) -> float:
    """``Params.var_round_2n``: the rounding 2^32 -> 2N' (N' = ``acc``) against a binary key of dimension n."""
    return (n / 2 + 1) / (12 * (2 * acc) ** 2)


def _work(n, k, big_n, nu, g, levels, ks_levels, w_product, w_ks) -> tuple[float, float]:
    """(blind rotation, key switch) estimated work (module docstring)."""
    m = big_n // 2
    steps = -(-n // g)
    transforms = (k + 1) * (levels + 1) * m * math.log2(m)
    products = ((1 << g) - 1) * (k + 1) ** 2 * levels * m * w_product
    if g > 1 and nu == 0 and not (k == 1 and g == 2 and levels in (1, 2)):
        products *= W_GENERIC
    br = steps * (1 << nu) * (transforms + products) * (W_XLA if g == 1 else 1.0)
    return br, k * big_n * ks_levels * (n + 1) * w_ks


def search(bits: int, target: float, w_product: float, w_ks: float, budget: int | None) -> list[Candidate]:
    """Every admissible candidate for ``bits``-bit messages (module docstring), cheapest first."""
    from crossfhe.core import fourier
    from crossfhe.math.decompose import Gadget
    from crossfhe.tfhe import params as P

    short = sorted({d for d, _ in P.PUBLISHED_LWE_POINTS if d < 2048})
    norm2 = 2**bits + 1
    out: list[Candidate] = []
    for k, big_n in GLWE_SHAPES:
        glwe_rate = P._published_rate(k * big_n)
        base = dict(lwe_dim=short[0], glwe_dim=k, poly_size=big_n, glwe_log2_rate=glwe_rate,
                    lwe_log2_rate=P._published_rate(short[0]), ks=(4, 4), insecure=True)
        probe = P.make(bits, pbs=(23, 1), **base)
        moduli, var_fresh, var_round_q = probe.moduli, probe.var_fresh, probe.var_round_q
        # the step noise (FFT rounding included) of each (l, g) at its best base
        steps: dict[tuple[int, int], tuple[float, int]] = {}
        for levels, g in itertools.product(LEVELS, GROUPINGS):
            best = None
            for b in range(2, min(30, 62 // levels) + 1):
                if not fourier.supports(moduli, big_n, Gadget(b, levels), k):
                    continue
                prm = P.make(bits, pbs=(b, levels), grouping=g, **base)
                exact = prm.var_step - (prm.var_step_fft if prm.fft_kernel else 0.0)
                v = exact + prm.var_step_fft
                if best is None or v < best[0]:
                    best = (v, b)
            if best is not None:
                steps[levels, g] = best
        for n in short:
            lwe_rate = P._published_rate(n)
            # key-switch noise of each gadget (it depends on k N and the short key's noise only)
            ks_opts = []
            for bk in range(1, 9):
                for lk in range(1, 32 // bk + 1):
                    prm = P.make(bits, pbs=(23, 1), **dict(base, lwe_dim=n, lwe_log2_rate=lwe_rate, ks=(bk, lk)))
                    ks_opts.append((lk, prm.var_ks, bk))
            ks_opts.sort()
            for nu, (levels, g) in itertools.product(EXTENSIONS, steps):
                acc = big_n << nu
                if 2 * acc < 2 ** (bits + 1) or acc > P.MAX_ACC_SIZE:
                    continue
                var_step, b = steps[levels, g]
                var_pbs = -(-n // g) * var_step
                var_round_2n = _var_round_2n(n, acc)
                fixed = norm2 * max(var_pbs, var_fresh) + var_round_q + var_round_2n
                z_need = None
                for lk, var_ks, bk in ks_opts:
                    v = fixed + var_ks
                    z = 1.0 / (2 ** (bits + 2) * math.sqrt(2 * v))
                    if P._log2_erfc(z) <= target:
                        z_need = (lk, bk)
                        break
                if z_need is None:
                    continue
                lk, bk = z_need
                cand = _candidate(bits, n, k, big_n, nu, g, (b, levels), (bk, lk), w_product, w_ks)
                if cand is None or (budget is not None and cand.bsk_bytes + cand.ksk_bytes > budget):
                    continue
                if cand.log2_p_fail <= target:
                    out.append(cand)
    out.sort()
    return out


def _candidate(bits, n, k, big_n, nu, g, pbs, ks, w_product, w_ks) -> Candidate | None:
    """The candidate as the library builds it (None where make refuses it or it would not use the FFT)."""
    from crossfhe.errors import ParameterError
    from crossfhe.tfhe import ops
    from crossfhe.tfhe import params as P

    try:
        prm = P.make(bits, lwe_dim=n, glwe_dim=k, poly_size=big_n, glwe_log2_rate=P._published_rate(k * big_n),
                     lwe_log2_rate=P._published_rate(n), pbs=pbs, ks=ks, max_norm2=2**bits + 1, extension=nu,
                     grouping=g)
    except ParameterError:
        return None
    if not prm.fft_kernel:
        return None
    br, kc = _work(n, k, big_n, nu, g, pbs[1], ks[1], w_product, w_ks)
    return Candidate(br + kc, bits, n, k, big_n, nu, g, pbs, ks, prm.log2_p_fail(), prm.bsk_bytes, prm.ksk_bytes,
                     br, kc, ops.product_for(prm).__name__.removesuffix("Product").lower())


# --------------------------------------------------------------------------------------------------
# Measurement (--measure)
# --------------------------------------------------------------------------------------------------


def measure(cand: Candidate, seed: int = 2024) -> dict:
    """Keys, then ``ops.pbs`` at batch 1 (table (x^2 + 3x + 1) mod 2^p) and ``ops.keyswitch`` alone, timed."""
    import jax
    import numpy as np

    from crossfhe.cli.benchutil import first_call, load_average, timeit
    from crossfhe.tfhe import ops

    prm = cand.params(name="candidate")
    p = prm.message_bits
    load0 = load_average()
    ck, sk = jax.block_until_ready(ops.keygen(prm, f"search-{seed}".encode().ljust(32, b"\0")))
    table = ops.lookup_table(prm, lambda x: (x * x + 3 * x + 1) % 2**p)
    msgs = np.random.default_rng([seed, p]).integers(0, 2**p, 1, dtype=np.int64)
    ct = jax.block_until_ready(ops.encrypt(ck, msgs, f"search-ct-{seed}".encode().ljust(32, b"\0")))
    out, first = first_call(lambda: ops.pbs(sk, ct, table))
    ok = bool(np.all(ops.decrypt(ck, out) == (msgs * msgs + 3 * msgs + 1) % 2**p))
    timing = {"reps": 20, "min_seconds": 2.0, "max_seconds": 6.0}
    t = timeit(lambda: ops.pbs(sk, ct, table), **timing)
    first_call(lambda: ops.keyswitch(sk, ct))
    t_ks = timeit(lambda: ops.keyswitch(sk, ct), **timing)
    jax.clear_caches()
    return {"pbs_ms": float(np.median(t)) * 1e3, "pbs_min_ms": min(t) * 1e3, "reps": len(t),
            "keyswitch_ms": float(np.median(t_ks)) * 1e3, "first_call_s": first, "correct": ok,
            "load_avg": [load0, load_average()]}


def _print(bits: int, cands: list[Candidate], top: int) -> None:
    ref = TFHERS_2M128[bits]
    print(f"\n{bits} bits: {len(cands)} candidates; TFHE-rs {ref['name']} (n {ref['n']}, {ref['k']}x{ref['N']}, "
          f"pbs {ref['pbs'][0]}x{ref['pbs'][1]}, ks {ref['ks'][0]}x{ref['ks'][1]}, 2^{ref['log2_p_fail']}, server key "
          f"{ref['server_key_bytes'] / 1e6:.1f} MB)")
    head = (f"{'#':>3}{'n':>6}{'k x N x 2^nu':>15}{'g':>3}{'pbs':>7}{'ks':>6}{'log2 pf':>9}{'BSK MB':>8}{'KSK MB':>8}"
            f"{'vs rs':>7}{'steps':>6}{'cost':>8}{'BR':>8}{'KS':>7}{'route':>8}")
    print(head)
    print("-" * len(head))
    for i, c in enumerate(cands[:top]):
        r = c.row()
        shape = f"{c.k}x{c.big_n}" + (f"x2^{c.nu}" if c.nu else "")
        print(f"{i:>3}{c.n:>6}{shape:>15}{c.g:>3}{'{}x{}'.format(*c.pbs):>7}{'{}x{}'.format(*c.ks):>6}{c.log2_p_fail:>9.1f}"
              f"{r['bsk_mb']:>8.1f}{r['ksk_mb']:>8.1f}{r['keys_vs_tfhers']:>7.2f}{r['steps']:>6}{r['cost']:>8.2f}"
              f"{r['br_cost']:>8.2f}{r['ks_cost']:>7.2f}{c.route:>8}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bits", default="2,4,6", help="message widths (2, 4, 6: the TFHE-rs 2^-128 sets known here)")
    ap.add_argument("--log2-pfail", type=float, default=-128.0, help="target log2 p_fail per bootstrap")
    ap.add_argument("--top", type=int, default=8, help="candidates printed per width")
    ap.add_argument("--w-product", type=float, default=W_PRODUCT, help="key product of M points, in M units")
    ap.add_argument("--w-ks", type=float, default=W_KS, help="key-switch word, in units")
    ap.add_argument("--no-budget", action="store_true", help="do not cap the keys at TFHE-rs's server key")
    ap.add_argument("--measure", type=int, default=0, help="time the K cheapest candidates of each width (heavy)")
    ap.add_argument("--threads", type=int, default=1, help="CPUs for --measure")
    ap.add_argument("--json", type=Path, default=None, help="write the candidates (and measurements) here")
    a = ap.parse_args()
    if a.measure:
        from crossfhe.cli.benchutil import pin_threads

        pin_threads(a.threads)
        os.environ.setdefault("MALLOC_ARENA_MAX", "1")
    widths = [int(x) for x in a.bits.split(",") if x.strip()]
    doc = []
    for bits in widths:
        if bits not in TFHERS_2M128:
            raise SystemExit(f"no TFHE-rs 2^-128 reference for {bits} bits (have {sorted(TFHERS_2M128)})")
        budget = None if a.no_budget else TFHERS_2M128[bits]["server_key_bytes"]
        cands = search(bits, a.log2_pfail, a.w_product, a.w_ks, budget)
        _print(bits, cands, a.top)
        rows = [c.row() for c in cands[: a.top]]
        for i, c in enumerate(cands[: a.measure]):
            m = measure(c)
            rows[i]["measured"] = m
            print(f"  #{i}: pbs {m['pbs_ms']:.2f} ms (min {m['pbs_min_ms']:.2f}, {m['reps']} reps), keyswitch "
                  f"{m['keyswitch_ms']:.2f} ms, {'correct' if m['correct'] else 'WRONG'}, load {m['load_avg']}",
                  flush=True)
        doc.append({"bits": bits, "tfhers": TFHERS_2M128[bits], "candidates": rows})
    if a.json:
        a.json.write_text(json.dumps(doc, indent=1))
        print(f"JSON: {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
