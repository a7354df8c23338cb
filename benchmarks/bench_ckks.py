"""CKKS benchmark: crossfhe's CKKS operations vs Microsoft SEAL (seal-python), latency and precision, in one run.

    python benchmarks/bench_ckks.py [--quick] [--full] [--json PATH] [--threads 1] [--no-peer] [--chains]
                                    [--openfhe-python PATH] [--openfhe-threads K]
    crossfhe bench ckks [same options]

Latency: median of >= 10 timed calls (or >= 3 calls once 4 s have passed, for slow operations) after a
first call, whose time (jit compile, or a load from the persistent compilation cache, plus one run) is
reported apart as ``first_call_ms``; every result is blocked on (``jax.block_until_ready``). Operations:
encode, public-key encrypt, decrypt, decode, HE-Add, Pmult (ciphertext x plaintext), HE-Mult with
relinearization, a bare hybrid key switch of one polynomial at the top level, rescale, rotation by one slot;
all at the top level. Key generation (secret, public, relinearization and one Galois key) is timed too.

Presets: N13_L3 and N14_L7 (CASA sets II and III), N16_L21_DNUM3 (the secure set beside CROSS set 6);
--quick: N13_L3 only; --full adds N15_L19 and N16_L22_DNUM4 (beside the Alchemist set).

Peer: SEAL through seal-python, in this process, single-threaded (SEAL's evaluator is), at the same N,
the same number of levels and the same scale: coeff_modulus = CoeffModulus.Create(N, [60] + [log_scale] * L
+ [60]) (the last prime is SEAL's one special prime). SEAL keeps a 64-bit word per prime, so its chain has
fewer, larger primes than ours (31-bit words, composite scaling above 2^31). ``ratio`` = ours / SEAL.
OpenFHE (``openfhe_peer.py``) where an interpreter with its wheel is found (``make openfhe-peer``, or
``--openfhe-python``): the same chain, ``FIXEDMANUAL`` rescaling and hybrid key switching at the preset's
dnum, with ``--openfhe-threads`` OpenMP threads (default ``--threads``), run in its own process after ours
and SEAL's at each preset; ``ratio_openfhe`` = ours / OpenFHE.

Precision (max over slots of |decoded - exact|, values uniform in [-1, 1], log2 reported): after
encrypt/decrypt, after one multiply + rescale, after a depth-L chain (the running product multiplied by a
fresh ciphertext and rescaled L times) and after one rotation, ours and SEAL at the same N, scale and depth:
single-prime scales (N 2^13 / 2^26, N 2^14 / 2^30) and a composite scale (N 2^14 / 2^50, two 25-bit primes
per level for us, one 50-bit prime for SEAL). Paper figures (CASA Tab. 5, CROSS Tab. 5, Alchemist Tab. 7)
are printed as context with their platform in ``note``; they are not measured here.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import math
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="N13_L3 only, short timing windows (< 1 min on 2 cores)")
    p.add_argument("--full", action="store_true", help="also N15_L19 and N16_L22_DNUM4")
    p.add_argument("--presets", default=None, help="comma-separated preset names (overrides --quick/--full)")
    p.add_argument("--json", type=Path, default=None, help="write the JSON records here")
    p.add_argument("--threads", type=int, default=1, help="CPUs to run on (1 matches the single-thread peer)")
    p.add_argument("--no-peer", action="store_true", help="skip the peers (SEAL and OpenFHE)")
    p.add_argument("--openfhe-python", default=None,
                   help="interpreter with the openfhe wheel (default: CROSSFHE_OPENFHE_PYTHON, else .venv-openfhe "
                        "from `make openfhe-peer`); without one the OpenFHE columns are empty")
    p.add_argument("--openfhe-threads", type=int, default=None,
                   help="OpenMP threads of the OpenFHE peer (default: --threads)")
    p.add_argument("--kernels", choices=("auto", "vector", "native", "matrix"), default="auto",
                   help="kernel set (auto: crossfhe.kernels.default_kernels(), NATIVE on a CPU with the native build)")
    p.add_argument("--no-precision", action="store_true", help="skip the precision comparison")
    p.add_argument("--chains", action="store_true",
                   help="depth-L chains for every preset in the run (N 2^16: minutes, one compilation per level)")
    p.add_argument("--reps", type=int, default=10,
                   help="minimum timed calls (slow ops: >= 3 calls once 4 s, --quick 1 s, have passed)")
    return p.parse_args()


from crossfhe.cli.benchutil import (  # noqa: E402
    enable_compilation_cache,
    first_call,
    load_average,
    pin_threads,
    timeit,
    write_json,
)
from crossfhe.runtime import keep_heap  # noqa: E402

sys.path.insert(0, str(HERE))  # openfhe_peer.py, also when run through `crossfhe bench ckks`
import openfhe_peer  # noqa: E402

ARGS = _parse() if __name__ == "__main__" else None
if ARGS is not None:
    pin_threads(ARGS.threads)
    HEAP_KEPT = keep_heap(reexec=True)  # restarts once with the allocator settings: crossfhe.runtime

import jax  # noqa: E402
import numpy as np  # noqa: E402

from crossfhe.ckks import ops, presets  # noqa: E402
from crossfhe.ckks.params import Params, ParamsLiteral  # noqa: E402
from crossfhe.core import keyswitch as ks  # noqa: E402
from crossfhe.kernels import as_kernel_set  # noqa: E402
from crossfhe.ring import ntt as ring_ntt  # noqa: E402

try:
    import seal
except ImportError:  # the peer is optional: pip install "crossfhe[bench]"
    seal = None

QUICK = ("N13_L3",)
DEFAULT = ("N13_L3", "N14_L7", "N16_L21_DNUM3")
FULL = DEFAULT + ("N15_L19", "N16_L22_DNUM4")
OPS = ("encode", "encrypt_pk", "decrypt", "decode", "he_add", "pmult", "he_mult_relin", "keyswitch", "rescale",
       "rotate")
N16_BUDGET_S = 300.0  # keygen + first calls at N 2^16 above this would move N 2^16 behind --full

# --------------------------------------------------------------------------------------------------
# Paper figures (context only): ms, with table, platform and parameters. Alchemist Tab. 7 gives
# throughput (operations per second); the latency printed is 1000 / throughput ms.
# --------------------------------------------------------------------------------------------------

_CASA2 = "CASA Tab. 5, param. set II (N 2^13, log PQ 218, L 3)"
_CASA3 = "CASA Tab. 5, param. set III (N 2^14, log PQ 438, L 7)"
_CROSS = "CROSS Tab. 5, set 6 (N 2^16, 51 limbs of 28 bits, dnum 3, log PQ 1904): CROSS on TPUv4"
_LATTIGO = "CROSS Tab. 5, set 2: Lattigo on i5-6600k CPU (N 2^16, L 31, log PQ 1728)"
_ALCH = "Alchemist Tab. 7 (N 2^16, L 44, dnum 4; throughput -> 1000/x ms)"
_ALCH_CPU = "Alchemist Tab. 7 CPU: Xeon Gold 6234 @3.3 GHz, single thread (N 2^16, L 44, dnum 4)"


def _alch(ops_per_s: float) -> float:
    return 1000.0 / ops_per_s


_PAPER_N16 = {
    "he_add": (0.00326, f"{_CROSS} 3.26 us", _alch(35.56),
               f"{_ALCH_CPU}: 35.56 op/s; {_LATTIGO}: 4500 us; Alchemist ASIC 710,227 op/s"),
    "he_mult_relin": (1.628, f"{_CROSS} 1628 us", _alch(0.38),
                      f"{_ALCH_CPU} Cmult: 0.38 op/s; {_LATTIGO}: 19400 us; Alchemist ASIC 7,143 op/s"),
    "rescale": (0.216, f"{_CROSS} 216 us", 65.7, f"{_LATTIGO}: 65700 us"),
    "rotate": (1.128, f"{_CROSS} 1128 us", _alch(0.39), f"{_ALCH_CPU}: 0.39 op/s; Alchemist ASIC 7,179 op/s"),
    "pmult": (_alch(946970), f"{_ALCH}: Alchemist ASIC 946,970 op/s", _alch(38.14), f"{_ALCH_CPU}: 38.14 op/s"),
    "keyswitch": (_alch(7246), f"{_ALCH}: Alchemist ASIC 7,246 op/s", _alch(0.4), f"{_ALCH_CPU}: 0.4 op/s"),
}

# (preset, op) -> (paper_ms, source of paper_ms, paper_cpu_ms or None, other figures)
PAPER: dict[tuple[str, str], tuple[float, str, float | None, str]] = {
    ("N13_L3", "he_add"): (0.047, f"{_CASA2}: CASA on Artix-7 FPGA 47 us", None, ""),
    ("N13_L3", "he_mult_relin"): (1.097, f"{_CASA2}: CASA on Artix-7 FPGA 1097 us", 11.905,
                                  "same table: [RLPD20] single-thread Xeon Silver 4108 @1.8 GHz CPU 11905 us"),
    ("N13_L3", "rescale"): (0.379, f"{_CASA2}: CASA on Artix-7 FPGA 379 us", None, ""),
    ("N14_L7", "he_add"): (0.193, f"{_CASA3}: CASA on Artix-7 FPGA 193 us", None,
                           "same table: [ABHM+20] GPU (DGX-1, 8x V100, log Q 360) 40 us"),
    ("N14_L7", "he_mult_relin"): (4.833, f"{_CASA3}: CASA on Artix-7 FPGA 4833 us", None,
                                  "same table: [ABHM+20] GPU (DGX-1, 8x V100, log Q 360) 740 us"),
    ("N14_L7", "rescale"): (1.522, f"{_CASA3}: CASA on Artix-7 FPGA 1522 us", None,
                            "same table: [ABHM+20] GPU (DGX-1, 8x V100, log Q 360) 0.14 us as printed"),
}
for _preset in ("N16_L21_DNUM3", "N16_L22_DNUM4"):
    for _op, _fig in _PAPER_N16.items():
        PAPER[(_preset, _op)] = _fig


# --------------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------------


def _log2_err(got, want) -> float:
    err = float(np.max(np.abs(np.real(np.asarray(got))[: len(want)] - want)))
    return math.log2(err) if err > 0 else float("-inf")


# --------------------------------------------------------------------------------------------------
# Ours
# --------------------------------------------------------------------------------------------------


def _params_record(name: str, p: Params) -> dict:
    return {"preset": name, "N": p.n, "levels": p.levels, "limbs": len(p.q), "special": len(p.p), "dnum": p.dnum,
            "log_scale": p.log_scale, "primes_per_level": p.primes_per_level, "log_pq": round(p.log_pq, 1),
            "insecure": p.ring.insecure}


def ours_keygen(p: Params, *, again: bool) -> tuple[tuple, dict]:
    keys, first = first_call(lambda: ops.keygen(p, rotations=[1]))
    out = {"first_call_s": first, "steady_s": None}
    if again:
        keys, out["steady_s"] = first_call(lambda: ops.keygen(p, rotations=[1]))
    return keys, out


def ours_ops(p: Params, sk, ek, x, y) -> tuple[dict, dict]:
    """(name -> zero-argument callable running one operation at the top level, name -> first-call seconds).

    The first calls run here, in this order, and their outputs are the later operations' inputs, so each
    first-call time holds the compilations that operation triggers first (the key-switch kernel is compiled
    by ``keyswitch``, and ``he_mult_relin`` and ``rotate`` reuse it)."""
    first: dict[str, float] = {}

    def once(name, fn):
        out, first[name] = first_call(fn)
        return out

    pt = once("encode", lambda: ops.encode(p, x))
    pty = ops.encode(p, y)
    ct = once("encrypt_pk", lambda: ops.encrypt(ek, pt))
    cty = ops.encrypt(ek, pty)
    dec = once("decrypt", lambda: ops.decrypt(sk, ct))
    once("decode", lambda: ops.decode(dec))
    once("he_add", lambda: ops.add(ct, cty))
    once("pmult", lambda: ops.mul_plain(ct, pty))
    plan = ks.keyswitch_plan(ek.relin, active=ct.c1.limbs, kernels=p.kernels)
    once("keyswitch", lambda: ks.keyswitch(ct.c1, ek.relin, plan=plan))
    prod = once("he_mult_relin", lambda: ops.mul(ct, cty, ek))
    once("rescale", lambda: ops.rescale(prod))
    once("rotate", lambda: ops.rotate(ct, 1, ek))
    fns = {
        "encode": lambda: ops.encode(p, x),
        "encrypt_pk": lambda: ops.encrypt(ek, pt),
        "decrypt": lambda: ops.decrypt(sk, ct),
        "decode": lambda: ops.decode(dec),
        "he_add": lambda: ops.add(ct, cty),
        "pmult": lambda: ops.mul_plain(ct, pty),
        "he_mult_relin": lambda: ops.mul(ct, cty, ek),
        "keyswitch": lambda: ks.keyswitch(ct.c1, ek.relin, plan=plan),
        "rescale": lambda: ops.rescale(prod),
        "rotate": lambda: ops.rotate(ct, 1, ek),
    }
    return {op: fns[op] for op in OPS}, first


def ours_precision(p: Params, sk, ek, xs: list[np.ndarray], depth: int | None) -> dict:
    def err(ct, want):
        return _log2_err(ops.decode(ops.decrypt(sk, ct)), want)

    x, y = xs[0], xs[1]
    ct, cty = ops.encrypt(ek, ops.encode(p, x)), ops.encrypt(ek, ops.encode(p, y))
    out = {"encrypt_decrypt": err(ct, x), "mul_rescale": err(ops.rescale(ops.mul(ct, cty, ek)), x * y),
           "rotate": err(ops.rotate(ct, 1, ek), np.roll(x, -1))}
    if depth:
        acc, want = ct, x.copy()
        for i in range(1, depth + 1):
            fresh = ops.drop_level(ops.encrypt(ek, ops.encode(p, xs[i])), acc.level)
            acc, want = ops.rescale(ops.mul(acc, fresh, ek)), want * xs[i]
        out[f"chain_depth{depth}"] = err(acc, want)
    return out


# --------------------------------------------------------------------------------------------------
# SEAL
# --------------------------------------------------------------------------------------------------


def seal_version() -> str:
    try:
        return f"seal-python {importlib.metadata.version('seal-python')}"
    except importlib.metadata.PackageNotFoundError:
        return "seal-python"


class Seal:
    """A SEAL CKKS context at N, L levels and scale 2^log_scale: [60] + [log_scale] * L + [60]."""

    def __init__(self, n: int, levels: int, log_scale: int):
        self.bits = [60] + [log_scale] * levels + [60]
        self.scale = 2.0**log_scale
        parms = seal.EncryptionParameters(seal.scheme_type.ckks)
        parms.set_poly_modulus_degree(n)
        parms.set_coeff_modulus(seal.CoeffModulus.Create(n, self.bits))
        self.security = "tc128"
        self.ctx = seal.SEALContext(parms, True, seal.sec_level_type.tc128)
        if not self.ctx.parameters_set():
            # SEAL's own table stops at N 2^15; at N 2^16 the chain is checked against the HE standard here.
            self.security = f"SEAL check off ({self.ctx.parameter_error_message()}); log Q {sum(self.bits)} bits"
            self.ctx = seal.SEALContext(parms, True, seal.sec_level_type.none)
        if not self.ctx.parameters_set():
            raise RuntimeError(f"SEAL rejects {self.bits} at N {n}: {self.ctx.parameter_error_message()}")
        self.n = n
        t0 = time.perf_counter()
        kg = seal.KeyGenerator(self.ctx)
        self.sk = kg.secret_key()
        self.pk = kg.create_public_key()
        self.rk = kg.create_relin_keys()
        self.gk = seal.GaloisKeys()
        kg.create_galois_keys([1], self.gk)
        self.keygen_s = time.perf_counter() - t0
        self.enc = seal.Encryptor(self.ctx, self.pk)
        self.dec = seal.Decryptor(self.ctx, self.sk)
        self.ev = seal.Evaluator(self.ctx)
        self.ce = seal.CKKSEncoder(self.ctx)

    def params(self) -> dict:
        cm = self.ctx.key_context_data().parms().coeff_modulus()
        return {"N": self.n, "coeff_modulus_bits": [m.bit_count() for m in cm], "log_pq": sum(self.bits),
                "scale": f"2^{round(math.log2(self.scale))}", "special_primes": 1, "security": self.security}

    def ops(self, x, y) -> dict:
        ev, ce = self.ev, self.ce
        pt, pty = ce.encode(x, self.scale), ce.encode(y, self.scale)
        ct, cty = self.enc.encrypt(pt), self.enc.encrypt(pty)
        d3 = ev.multiply(ct, cty)  # size 3: relinearize = one key switch of c2 (+ adds)
        prod = ev.relinearize(d3, self.rk)
        dec = self.dec.decrypt(ct)

        def mult():
            m = ev.multiply(ct, cty)
            ev.relinearize_inplace(m, self.rk)
            return m

        return {
            "encode": lambda: ce.encode(x, self.scale),
            "encrypt_pk": lambda: self.enc.encrypt(pt),
            "decrypt": lambda: self.dec.decrypt(ct),
            "decode": lambda: ce.decode(dec),
            "he_add": lambda: ev.add(ct, cty),
            "pmult": lambda: ev.multiply_plain(ct, pty),
            "he_mult_relin": mult,
            "keyswitch": lambda: ev.relinearize(d3, self.rk),
            "rescale": lambda: ev.rescale_to_next(prod),
            "rotate": lambda: ev.rotate_vector(ct, 1, self.gk),
        }

    def precision(self, xs: list[np.ndarray], depth: int | None) -> dict:
        ev, ce = self.ev, self.ce

        def enc(v):
            return self.enc.encrypt(ce.encode(v, self.scale))

        def err(ct, want):
            return _log2_err(ce.decode(self.dec.decrypt(ct)), want)

        x, y = xs[0], xs[1]
        ct, cty = enc(x), enc(y)
        m = ev.multiply(ct, cty)
        ev.relinearize_inplace(m, self.rk)
        ev.rescale_to_next_inplace(m)
        out = {"encrypt_decrypt": err(ct, x), "mul_rescale": err(m, x * y),
               "rotate": err(ev.rotate_vector(ct, 1, self.gk), np.roll(x, -1))}
        if depth:
            acc, want = ct, x.copy()
            for i in range(1, depth + 1):
                fresh = enc(xs[i])
                ev.mod_switch_to_inplace(fresh, acc.parms_id())
                acc = ev.multiply(acc, fresh)
                ev.relinearize_inplace(acc, self.rk)
                ev.rescale_to_next_inplace(acc)
                want = want * xs[i]
            out[f"chain_depth{depth}"] = err(acc, want)
        return out


# --------------------------------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------------------------------

PEER_NOTE = {
    "keyswitch": "SEAL: relinearize of a size-3 ciphertext (one key switch of c2, dnum = all primes, 1 special "
                 "prime, plus two adds); SEAL has no bare key switch in its API",
    "encrypt_pk": "SEAL encrypts at the key level (with the special prime) and divides it out",
}


def _base(args) -> dict:
    backend = repr(as_kernel_set(args.kernels).resolve())
    return {"suite": "ckks", "device": jax.devices()[0].platform, "backend": backend,
            "jax": jax.__version__, "threads": args.threads, "cpu": platform.processor() or platform.machine(),
            "heap_kept": HEAP_KEPT, "native_kernels": ring_ntt.NATIVE.status()}


def bench_preset(name: str, args, base: dict, peer: str | None, timing: dict) -> tuple[list[dict], tuple]:
    p = getattr(presets, name).with_kernels(args.kernels)
    prm = _params_record(name, p)
    load_before = load_average()
    t_start = time.perf_counter()
    (sk, ek), kg = ours_keygen(p, again=True)
    rng = np.random.default_rng(p.n + p.levels)
    x, y = rng.uniform(-1, 1, p.slots), rng.uniform(-1, 1, p.slots)
    seal_ctx = Seal(p.n, p.levels, p.log_scale) if peer else None
    records = []
    seal_fns = seal_ctx.ops(x, y) if seal_ctx else {}
    fns, firsts = ours_ops(p, sk, ek, x, y)
    first_total = kg["first_call_s"] + sum(firsts.values())
    for op, fn in fns.items():
        first = firsts[op]
        ts = timeit(fn, **timing)
        med = float(np.median(ts))
        rec = dict(base, name=op, params=prm, median_ms=med * 1e3, min_ms=min(ts) * 1e3, max_ms=max(ts) * 1e3,
                   reps=len(ts), first_call_ms=first * 1e3, peer=None, peer_median_ms=None, ratio=None,
                   floor_ms=None, paper_ms=None, note="")
        notes = []
        if op in seal_fns:
            sfn = seal_fns[op]
            sfn()  # warm-up
            st = timeit(sfn, **timing)
            smed = float(np.median(st))
            rec.update(peer=peer, peer_median_ms=smed * 1e3, peer_min_ms=min(st) * 1e3, peer_reps=len(st),
                       ratio=med / smed, peer_params=seal_ctx.params())
            if op in PEER_NOTE:
                notes.append(PEER_NOTE[op])
        if (name, op) in PAPER:
            paper_ms, src, cpu_ms, other = PAPER[(name, op)]
            rec.update(paper_ms=paper_ms, paper_cpu_ms=cpu_ms)
            notes.append(f"paper_ms: {src}" + (f"; other figures: {other}" if other else ""))
        rec["note"] = "; ".join(notes)
        records.append(rec)
    setup_s = time.perf_counter() - t_start
    kg_rec = dict(base, name="keygen", params=prm, median_ms=(kg["steady_s"] or kg["first_call_s"]) * 1e3,
                  min_ms=None, max_ms=None, reps=1, first_call_ms=kg["first_call_s"] * 1e3,
                  peer=peer, peer_median_ms=seal_ctx.keygen_s * 1e3 if seal_ctx else None,
                  ratio=(kg["steady_s"] / seal_ctx.keygen_s) if seal_ctx and kg["steady_s"] else None,
                  floor_ms=None, paper_ms=None,
                  note=f"secret + public + relinearization + 1 Galois key; one call after the first; keygen + first "
                       f"calls of all ops {first_total:.1f} s; preset wall time {setup_s:.1f} s")
    if seal_ctx:
        kg_rec["peer_params"] = seal_ctx.params()
    records.insert(0, kg_rec)
    _add_openfhe(records, p, args, timing)
    for r in records:
        r["load_avg"] = [load_before, load_average()]
    return records, (p, sk, ek, seal_ctx, first_total)


def _add_openfhe(records: list[dict], p: Params, args, timing: dict) -> None:
    """The OpenFHE peer at p's N, levels, scale and dnum (``openfhe_peer.py``, its own interpreter), run
    after ours and SEAL's: ``openfhe_*`` fields and ``ratio_openfhe`` = ours / OpenFHE in each record it
    has (None where it has none or there is no interpreter)."""
    threads = args.openfhe_threads or args.threads
    of = None
    if args.openfhe_python_found:
        of = openfhe_peer.run(args.openfhe_python_found, log_n=p.n.bit_length() - 1, levels=p.levels,
                              log_scale=p.log_scale, dnum=p.dnum, threads=threads, **timing)
    for r in records:
        got = None
        if of is not None and r["name"] == "keygen":
            got = {"median_ms": of["keygen_s"] * 1e3, "min_ms": None}
        elif of is not None:
            got = of["ops"].get(r["name"])
        r.update(openfhe=of["peer"] if got else None, openfhe_threads=threads if got else None,
                 openfhe_median_ms=got["median_ms"] if got else None, openfhe_min_ms=got["min_ms"] if got else None,
                 ratio_openfhe=r["median_ms"] / got["median_ms"] if got else None,
                 openfhe_params=of["params"] if got else None)


PRECISION = {
    # label: (preset name or literal, chain depth)
    "N13_L3 (scale 2^26, single prime)": ("N13_L3", 3),
    "N14_L7 (scale 2^30, single prime)": ("N14_L7", 7),
    "N14_L5_S50 (scale 2^50, composite)": (ParamsLiteral(log_n=14, levels=5, log_scale=50, dnum=4), 5),
}


def precision_section(names: list[str], ctxs: dict, args, base: dict, peer: str | None) -> list[dict]:
    wanted = ["N13_L3 (scale 2^26, single prime)"]
    if not args.quick:
        wanted += ["N14_L7 (scale 2^30, single prime)", "N14_L5_S50 (scale 2^50, composite)"]
    chains = {}
    for n in names:  # other presets in the run: no chain unless --chains (a full chain compiles every level)
        if n not in ("N13_L3", "N14_L7"):
            pn = getattr(presets, n)
            kind = "composite" if pn.primes_per_level > 1 else "single prime"
            label = f"{n} (scale 2^{pn.log_scale}, {kind}{'' if args.chains else ', no chain'})"
            wanted.append(label)
            chains[label] = (n, pn.levels if args.chains else None)
    records = []
    for label in wanted:
        src, depth = PRECISION.get(label) or chains[label]
        if isinstance(src, str) and src in ctxs:
            p, sk, ek, seal_ctx, _ = ctxs[src]
        else:
            p = Params.from_literal(src) if isinstance(src, ParamsLiteral) else getattr(presets, src)
            sk, ek = ops.keygen(p, rotations=[1])
            seal_ctx = Seal(p.n, p.levels, p.log_scale) if peer else None
        rng = np.random.default_rng(12345)
        xs = [rng.uniform(-1, 1, p.slots) for _ in range(max(2, (depth or 0) + 1))]
        t0 = time.perf_counter()
        ours = ours_precision(p, sk, ek, xs, depth)
        ours_s = time.perf_counter() - t0
        theirs = seal_ctx.precision(xs, depth) if seal_ctx else {}
        for stage, e in ours.items():
            pe = theirs.get(stage)
            note = "max over slots of |Re(decoded) - exact|, log2; values uniform in [-1, 1], public-key encryption"
            if stage == "rotate":
                note += "; SEAL's special prime (60 bits) is not larger than its first prime: more key-switch noise"
            records.append(dict(base, name=f"precision_{stage}", kind="precision", config=label,
                                params=_params_record(label.split()[0], p),
                                log2_err=e, peer=peer if pe is not None else None, peer_log2_err=pe,
                                bits_gained=(pe - e) if pe is not None else None,
                                peer_params=seal_ctx.params() if seal_ctx else None,
                                ours_wall_s=ours_s, median_ms=None, min_ms=None, max_ms=None, reps=1,
                                peer_median_ms=None, ratio=None, floor_ms=None, paper_ms=None, note=note))
    return records


def main(args: argparse.Namespace) -> list[dict]:
    if args.presets:
        names = [s.strip() for s in args.presets.split(",") if s.strip()]
    else:
        names = list(QUICK if args.quick else FULL if args.full else DEFAULT)
    timing = ({"reps": args.reps, "min_seconds": 0.2, "max_seconds": 1.0} if args.quick else
              {"reps": args.reps, "min_seconds": 0.5, "max_seconds": 4.0})
    peer = None if args.no_peer or seal is None else seal_version()
    args.openfhe_python_found = None if args.no_peer else openfhe_peer.find_python(args.openfhe_python)
    if seal is None and not args.no_peer:
        print("# seal-python not importable (pip install 'crossfhe[bench]'): SEAL columns skipped")
    base = _base(args)
    print(f"# load average before: {load_average()} on {os.cpu_count()} CPUs; pinned to {args.threads}")
    records, ctxs = [], {}
    for name in names:
        t0 = time.perf_counter()
        recs, ctxs[name] = bench_preset(name, args, base, peer, timing)
        records += recs
        first_total = ctxs[name][4]
        msg = f"# {name}: {time.perf_counter() - t0:.1f} s (keygen + first calls {first_total:.1f} s)"
        if getattr(presets, name).n >= 1 << 16:
            verdict = "within" if first_total <= N16_BUDGET_S else "ABOVE"
            msg += f"; N 2^16 keygen + compile {verdict} the {N16_BUDGET_S:.0f} s budget for the default run"
        print(msg, flush=True)
    if not args.no_precision:
        records += precision_section(names, ctxs, args, base, peer)
    return records


def fmt(x, width: int, spec: str = ".3f") -> str:
    sign, spec = ("+", spec[1:]) if spec.startswith("+") else ("", spec)
    return f"{'-':>{width}}" if x is None else f"{x:>{sign}{width}{spec}}"


def print_table(records: list[dict]) -> None:
    timing = [r for r in records if r.get("kind") != "precision"]
    head = (f"{'preset':<15}{'op':<15}{'ours ms':>11}{'first ms':>10}{'SEAL ms':>10}{'ours/SEAL':>10}"
            f"{'OpenFHE ms':>11}{'ours/OFHE':>10}{'paper ms':>10}{'paper CPU':>10}")
    print(head)
    print("-" * len(head))
    for r in timing:
        print(f"{r['params']['preset']:<15}{r['name']:<15}{fmt(r['median_ms'], 11)}"
              f"{fmt(r['first_call_ms'], 10, '.0f')}{fmt(r['peer_median_ms'], 10)}{fmt(r['ratio'], 10, '.2f')}"
              f"{fmt(r.get('openfhe_median_ms'), 11)}{fmt(r.get('ratio_openfhe'), 10, '.2f')}"
              f"{fmt(r['paper_ms'], 10, '.4g')}"
              f"{fmt(r.get('paper_cpu_ms'), 10, '.5g')}")
    r0 = timing[0] if timing else records[0]
    print(f"jax {r0['jax']}, {r0['device']}, threads {r0['threads']}; peer: {r0['peer'] or 'none'}; "
          "first ms = compile (or persistent-cache load) + one run, a kernel counted where first used "
          "(keyswitch before he_mult_relin and rotate); paper figures: see 'note' in the JSON")
    print(f"  kernel set {r0.get('backend')}; native kernels (crossfhe.ring.ntt.NATIVE): {r0.get('native_kernels')}")
    seen = set()
    for r in timing:
        if r["peer"] and r["params"]["preset"] not in seen:
            seen.add(r["params"]["preset"])
            pp = r["peer_params"]
            print(f"  SEAL at {r['params']['preset']}: N {pp['N']}, coeff_modulus bits {pp['coeff_modulus_bits']}, "
                  f"scale {pp['scale']}, {pp['security']}")
    ofr = next((r for r in timing if r.get("openfhe")), None)
    if ofr:
        print(f"  {ofr['openfhe']} in its own interpreter, {ofr['openfhe_threads']} OpenMP thread(s): chain [60] + "
              "[log_scale] * L, FIXEDMANUAL rescaling, HYBRID key switching at the preset's dnum")
    prec = [r for r in records if r.get("kind") == "precision"]
    if prec:
        print()
        head = (f"{'precision config':<52}{'stage':<17}{'ours log2 err':>14}{'SEAL log2 err':>14}"
                f"{'ours - SEAL bits':>17}")
        print(head)
        print("-" * len(head))
        for r in prec:
            print(f"{r['config']:<52}{r['name'][10:]:<17}{fmt(r['log2_err'], 14, '.2f')}"
                  f"{fmt(r['peer_log2_err'], 14, '.2f')}{fmt(r['bits_gained'], 17, '+.2f')}")
        print("log2 of the max error over slots (lower is better); 'ours - SEAL bits' > 0: ours keeps more bits")
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    enable_compilation_cache()
    recs = main(ARGS)
    print_table(recs)
    write_json(recs, ARGS.json or HERE / "results" / "ckks.json")
