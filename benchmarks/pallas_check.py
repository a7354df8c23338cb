"""Pallas BAT matmul vs XLA's ``bat.matmul`` (benchmarks/PALLAS_NOTES.md, variant 1): times both at the notes'
shapes A and B for several tiles (median of 20 calls after a warm-up), checks exactness on the device, and
reports tiles the Triton compiler refuses. On CPU it runs a tiny shape in interpret mode as a smoke test
(interpret-mode times say nothing about a GPU).

    python benchmarks/pallas_check.py
"""

from __future__ import annotations

import time
from functools import partial

import jax
import numpy as np

from crossfhe.kernels import bat
from crossfhe.kernels.pallas import bat_matmul_pallas
from crossfhe.math.primes import ntt_primes

GPU = jax.default_backend() == "gpu"
SHAPES = [(1, 16384, 256, 256), (40, 256, 256, 256)] if GPU else [(2, 64, 32, 64)]  # (L, H, V, W)
TILES = [(64, 64, 64), (32, 128, 64), (16, 256, 64), (64, 64, 128), (128, 64, 32)] if GPU else [(32, 32, 16)]


def bench(f, *args, reps: int = 20) -> float:
    """Median microseconds of ``reps`` blocking calls after one warm-up call."""
    jax.block_until_ready(f(*args))
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        jax.block_until_ready(f(*args))
        ts.append(time.perf_counter() - t)
    return 1e6 * float(np.median(ts))


def main() -> None:
    for limbs, h, v, w in SHAPES:
        qs = ntt_primes(31, 2**16, limbs)
        rng = np.random.default_rng(0)
        q = np.array(qs, dtype=np.int64).reshape(-1, 1, 1)
        b = (rng.integers(0, 2**62, (limbs, v, w)) % q).astype(np.uint32)
        a = jax.device_put((rng.integers(0, 2**62, (limbs, h, v)) % q).astype(np.uint32))
        op = jax.device_put(bat.bat_right(b, qs))
        want = bat.matmul(a, op)
        print(f"L={limbs} H={h} V={v} W={w}  xla bat.matmul: {bench(bat.matmul, a, op):.1f} us", flush=True)
        for bh, bw, bv in TILES:
            f = partial(bat_matmul_pallas, block_h=bh, block_w=bw, block_v=bv, interpret=not GPU)
            try:
                ok = bool((f(a, op) == want).all())
                print(f"  pallas {bh}x{bw}x{bv}: {bench(f, a, op):.1f} us  exact={ok}", flush=True)
            except Exception as e:  # a tile the Triton compiler refuses (registers, shared memory)
                print(f"  pallas {bh}x{bw}x{bv}: failed: {type(e).__name__}: {str(e)[:200]}", flush=True)


if __name__ == "__main__":
    main()
