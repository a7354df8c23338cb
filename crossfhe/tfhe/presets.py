"""Named TFHE parameter sets: 128-bit security, failure probability at most 2^-64 per bootstrap (P2-P10; the table
gives each one's) or at most 2^-128 (P2_128, P4_128, P6_128: TFHE-rs's default failure probability).

Each preset is p-bit messages with one padding bit; its key sizes and log2 p_fail (from the noise model of
:mod:`crossfhe.tfhe.params`, for an input whose squared norm is ``max_norm2`` = 2^p + 1, e.g. a x 2^(p/2) + b
of two bootstrap outputs, the bivariate-table pattern) are in the table. The GLWE modulus is two 31-bit NTT
primes (log2 Q = 62); the key switch runs mod 2^32.

Security: the short key (n, rate) is a published TFHE-rs 128-bit point (tfhe 1.8.2, ``*_KS_PBS_GAUSSIAN_2M64``
of the same width: n and the noise rate are theirs); the long key (k N, rate) is covered by TFHE-rs's GLWE
points (k N = 2048: rate 2^-48.32), see ``PUBLISHED_LWE_POINTS``.
The 2^-64 presets were chosen by searching the noise model for the cheapest blind rotation (l = 1 where the model
allows it) that meets 2^-64 at these points, before the key switch took the mean of its rounding error off b (the
centered modulus switch, :mod:`crossfhe.tfhe.params`); with it the same parameters fail far less often (table:
2^-108 to 2^-177), as the rounding to 2N' was their largest error term.

=========  ===  ====  ============  ========  ==========  ========  ========  ==========  ==========
preset     p    n     k x N x 2^nu  grouping  pbs b x l   ks b x l  p_fail    BSK         KSK
=========  ===  ====  ============  ========  ==========  ========  ========  ==========  ==========
P2         2    781   4x512         1         23 x 1      3 x 4     2^-120.2  80 MB       26 MB
P4         4    833   1x2048        2         23 x 1      2 x 7     2^-108.0  82 MB       48 MB
P6         6    977   1x2048x2^2    2         16 x 2      3 x 6     2^-135.8  192 MB      48 MB
P7         7    977   1x2048x2^3    2         16 x 2      2 x 10    2^-129.4  192 MB      80 MB
P8         8    1110  1x2048x2^4    2         16 x 2      2 x 11    2^-128.4  218 MB      100 MB
P10        10   1110  1x2048x2^7    1         16 x 2      2 x 11    2^-176.6  145 MB      100 MB
P2_128     2    781   1x2048        2         23 x 1      4 x 3     2^-175.0  77 MB       19 MB
P4_128     4    977   1x2048        2         23 x 1      5 x 3     2^-128.9  96 MB       24 MB
P6_128     6    977   1x2048x2^2    2         16 x 2      3 x 6     2^-135.8  192 MB      48 MB
=========  ===  ====  ============  ========  ==========  ========  ========  ==========  ==========

**The 2^-128 presets** (P2_128, P4_128, P6_128) meet TFHE-rs's default failure probability at ``max_norm2`` =
2^p + 1, through the FFT, at the same published points, with keys no larger than TFHE-rs's server key at its
2^-128 KS-PBS sets of the same width (tfhe 1.8.2, ``V1_8_PARAM_MESSAGE_{1,2,3}_CARRY_{1,2,3}_KS_PBS_TUNIFORM_2M128``:
133, 120 and 918 MB; ours 96, 120 and 240 MB). ``benchmarks/search_tfhe_params.py`` enumerates and ranks candidates
by estimated work. What 2^-128 costs is the rounding to 2N'; with the centered modulus switch it halves, so that
P6's own parameters already meet 2^-128 (P6_128 is P6 under the 2^-128 name) and 4 bits need no extension: P4_128
is P4's ring and bootstrapping gadget with P6's short key (n 977, rate 2^-21.66) and a key switch of 5 x 3 digits,
2^-128.9 (2^-132.1 with exact products), a thin margin, as TFHE-rs's own 2_2 set has (2^-129.6). The search under
the earlier model had needed N' = 2^12 for 4 bits and 2^14 for 6 (about twice P4's and P6's blind rotations).
P2_128 is P4's shape (k = 1, N = 2048, two key bits per step) with P2's short key: cheaper than P2's k = 4 x N = 512
here, as the native kernel has unrolled key products for k = 1 only (the search's ``W_GENERIC``). Measured (batch 1,
one thread, ``bench_tfhe.py --presets P2,P2_128,P4,P4_128,P6,P6_128 --batches 1``): see benchmarks/README.md.

**P6, P7, P8 and P10 use the extended blind rotation** (``extension`` nu, :mod:`crossfhe.tfhe.params`): their
keys are those of N = 2048, and the accumulator has N' = 2^nu N coefficients (2^13 for P6, 2^14 for P7, 2^15 for
P8, 2^18 for P10), so the rounding to 2N' leaves room for 6, 7, 8 and 10 bits. Without it, 10 bits cannot meet 2^-64 at
N <= 2^17: the rounding to 2N alone, (n/2 + 1) / (12 (2N)^2) at the n = 1267 that a key switch from a
2^17-dimensional key needs, is above the budget (the best plain set reaches 2^-58.8 with 21 GB of keys).

P10 takes N' = 2^18 with l = 2 (2^-185.7 with exact products, 2^-133.0 with the FFT's rounding) rather
than the model's cheapest set, N' = 2^17 with l = 3 (2^-64.0 exactly, about 2/3 of the NTT work): p_fail
falls steeply with N' here, and 2^-64.0 would leave no
margin for the model's approximations. P8 and P10 share n, N and the gadgets (P8's bootstrapping key has
3 GGSWs per 2 bits, P10's one per bit). P8 was N = 32768 without extension (3.93 GB of keys, 2^-64.1): the extended
form costs 16x less key and measured 30% less time per CMux on the dev box (6.9 vs 9.9 ms, batch 1, one
CPU, load ~1).

P7 sits between P6 and P8 for accumulators of 7 bits (a dense layer of 92 two-bit inputs with sum |w| <= 42: the
deep networks of :mod:`crossfhe.apps.qnn`). It is P6's short key and bootstrapping gadget over twice P6's
accumulator, with the cheapest key switch of that short key that meets 2^-128 (2 x 10 digits, 2^-129.4; 3 x 7
gives 2^-108.7). Its time against P6's and P8's: benchmarks/README.md, "P7".

**P4, P6, P7 and P8 take the key's bits two at a time** (``grouping`` 2, :mod:`crossfhe.tfhe.params`): P4 has 417
steps, each one forward and one inverse transform of the accumulator and three key products, instead of 833
CMux steps; 1.5x the bootstrapping key (3 GGSWs per 2 bits) and three times its key and FFT noise (p_fail
2^-68.8 -> 2^-68.2). Measured on the dev box (one CPU, per bootstrap, the two runs back to back): 37.6 against
54.1 ms at batch 1, 30.9 against 59.8 at batch 8; its output noise 2.35e-9 through the FFT, 0.81 of the
model's var_pbs (64 bootstraps; 1.31e-9 = 0.45 through the NTT). P6 (489 steps) keeps 2^-72.7, as its failure
probability is the modulus switch's and the key switch's; measured on the AMD box (one CPU, whole
bootstraps, the two sets alternating in one process): 143.6 against 165.5 ms at batch 1, 125.0 against 149.4
per bootstrap at batch 8, output noise 2.16e-13 = 0.79 of var_pbs (128 bootstraps; one bit per step:
7.99e-14 = 0.85). Earlier, before the kernels preferred 512-bit vectors (:mod:`crossfhe.math.xla`), P6's
grouped blind rotation had measured 206 against 249 ms on one box and 333 against 333 on a busier one. P8
(2^-66.9 -> 2^-66.6): 703 -> 534 ms per bootstrap at batch 1 (the same conditions), output noise 0.90 of
var_pbs (64 bootstraps). P2 keeps one bit per step: with k = 4 the three products cost much of what the
saved transforms do (per blind rotation with random keys, batch 1, back to back: 26.3 against 29.8 ms; a
whole bootstrap 37.8 against 42.9 ms at batch 1 but 28.4 against 24.8 at batch 8), and so does P10, whose
FFT rounding, tripled, would no longer fit the FFT's budget (``Params.fft_kernel``). Three bits at a time
(g = 3, 7 GGSWs per group) made P4 slower: 36.3 against 27.7 ms at batch 1.

Every preset bootstraps through the float64 FFT (``Params.fft_kernel``; its rounding is in the noise model
and in the p_fail above). P6 was N = 8192 with 28-bit digits (l = 1, 2^-69.4, 256 + 288 MB of keys), which
only the exact NTT can multiply (the FFT's rounding grows with the digit size): about 1.4 s per bootstrap on
the dev box against 0.39 s for the extended set through the FFT (batch 1, one CPU; then one key bit per step,
with 30% of the keys).
"""

from __future__ import annotations

import dataclasses

from crossfhe.math.decompose import Gadget
from crossfhe.tfhe.params import Params, make

P2 = make(
    2,
    lwe_dim=781,
    glwe_dim=4,
    poly_size=512,
    glwe_log2_rate=-48.32,
    lwe_log2_rate=-16.78,
    pbs=(23, 1),
    ks=(3, 4),
    max_norm2=2**2 + 1,
    name="P2",
)
"""2-bit messages: n 781, GLWE k 4 x N 512 (TFHE-rs's MESSAGE_1_CARRY_1 shape)."""

P4 = make(
    4,
    lwe_dim=833,
    glwe_dim=1,
    poly_size=2048,
    glwe_log2_rate=-48.32,
    lwe_log2_rate=-18.08,
    pbs=(23, 1),
    ks=(2, 7),
    max_norm2=2**4 + 1,
    name="P4",
    grouping=2,
)
"""4-bit messages: n 833, N 2048 (TFHE-rs's MESSAGE_2_CARRY_2 shape), the key's bits two at a time."""

P6 = make(
    6,
    lwe_dim=977,
    glwe_dim=1,
    poly_size=2048,
    glwe_log2_rate=-48.32,
    lwe_log2_rate=-21.66,
    pbs=(16, 2),
    ks=(3, 6),
    max_norm2=2**6 + 1,
    name="P6",
    extension=2,
    grouping=2,
)
"""6-bit messages: n 977, N 2048, extended blind rotation over N' = 2^13 (4 components), the key's bits two at
a time."""

def _extended(p: int, extension: int, grouping: int) -> Params:
    """The extended-blind-rotation shape of P8 and P10: n 1110, N 2048, p-bit messages."""
    return make(
        p,
        lwe_dim=1110,
        glwe_dim=1,
        poly_size=2048,
        glwe_log2_rate=-48.32,
        lwe_log2_rate=-24.97,
        pbs=(16, 2),
        ks=(2, 11),
        max_norm2=2**p + 1,
        name=f"P{p}",
        extension=extension,
        grouping=grouping,
    )


P7 = dataclasses.replace(P6, message_bits=7, max_norm2=2**7 + 1, ks_gadget=Gadget(2, 10), extension=3, name="P7")
"""7-bit messages: P6's short key and bootstrapping gadget (n 977, N 2048, 16 x 2) over N' = 2^14 (8 components),
a key switch of 2 x 10 digits; meets 2^-128 too (2^-129.4)."""

P8 = _extended(8, 4, 2)
"""8-bit messages: n 1110, N 2048, extended blind rotation over N' = 2^15 (16 components), the key's bits two
at a time."""

P10 = _extended(10, 7, 1)
"""10-bit messages: n 1110, N 2048, extended blind rotation over N' = 2^18 (128 components per CMux)."""

P2_128 = make(
    2,
    lwe_dim=781,
    glwe_dim=1,
    poly_size=2048,
    glwe_log2_rate=-48.32,
    lwe_log2_rate=-16.78,
    pbs=(23, 1),
    ks=(4, 3),
    max_norm2=2**2 + 1,
    name="P2_128",
    grouping=2,
)
"""2-bit messages at p_fail <= 2^-128: n 781, N 2048, the key's bits two at a time (P4's blind rotation with P2's
short key)."""

P4_128 = make(
    4,
    lwe_dim=977,
    glwe_dim=1,
    poly_size=2048,
    glwe_log2_rate=-48.32,
    lwe_log2_rate=-21.66,
    pbs=(23, 1),
    ks=(5, 3),
    max_norm2=2**4 + 1,
    name="P4_128",
    grouping=2,
)
"""4-bit messages at p_fail <= 2^-128: P4's ring and bootstrapping key shape with P6's short key (n 977) and a key
switch of 5 x 3 digits."""

P6_128 = dataclasses.replace(P6, name="P6_128")
"""6-bit messages at p_fail <= 2^-128: P6's parameters (with the centered modulus switch they meet 2^-128)."""

PRESETS: dict[str, Params] = {
    "P2": P2,
    "P4": P4,
    "P6": P6,
    "P7": P7,
    "P8": P8,
    "P10": P10,
    "P2_128": P2_128,
    "P4_128": P4_128,
    "P6_128": P6_128,
}
