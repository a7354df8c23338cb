"""LWE -> RLWE packing (PackLWEs) and the field trace, for RLWE ciphertexts of any scheme.

Chen, Dai, Kim, Song, "Efficient homomorphic conversion between (ring) LWE ciphertexts", ACNS 2021
(CDKS, Alg. 1-2); CHAM (Ren et al., DAC 2023) Alg. 2 (PackTwoLWEs) and Alg. 3 (PackLWEs).

Notation: ring R = Z[X]/(X^N + 1), N = 2^L; tau_g: X -> X^g for odd g, applied to both parts of a
ciphertext, after which c1 is key-switched from s(X^g) back to s with the Galois key of g. The inputs are
m RLWE ciphertexts ct_0 ... ct_{m-1} whose phases phi_i = c0_i + c1_i s have a constant coefficient
mu_i (+ noise) and arbitrary other coefficients (e.g. :func:`crossfhe.core.lwe.lwe_to_rlwe` of LWE
ciphertexts, or products whose constant coefficient is an inner product, CHAM §II-C). n = 2^ell is the
smallest power of two >= m; the inputs are padded with zero ciphertexts to n.

**PackTwo at level l** (1 <= l <= L, combining two packs of 2^(l-1) inputs each), k_l = N / 2^l:

    ct = (ct_even + X^(k_l) ct_odd) + tau_{2^l + 1}(ct_even - X^(k_l) ct_odd).

tau_{2^l+1} fixes X^(2 k_l t) and negates X^(k_l (2t+1)), so at the multiples of k_l the result's phase
is twice ct_even's phase (even multiples) and twice ct_odd's phase shifted by k_l (odd multiples); the other
coefficients mix. **Tree**: level l = 1 .. ell pairs entry j with entry j + h of the current batch of 2h
(j < h), all pairs of a level in one batched key switch; after the tree the single ciphertext holds n mu_i
at coefficient i N/n (other coefficients mixed). **Trace**: for l = ell + 1 .. L, ct = ct + tau_{2^l+1}(ct).
The product of the (1 + tau_{2^l+1}) over l = ell+1 .. L is the field trace Tr_{K_{2N}/K_{2n}}, the sum of
tau_g over the N/n elements g = 1 mod 2n, which maps X^j to (N/n) X^j when N/n divides j and to 0 otherwise.
Hence, noise aside and exactly,

    phase(output)_{i N/n} = N mu_i  (i < m),   all other coefficients 0

(the padding gives 0 at i N/n for m <= i < n). ``normalize=True`` multiplies the inputs by N^-1 mod Q
first (exact), so the output holds mu_i itself.

**Kernel.** One jitted PackTwo kernel, EVAL domain throughout: X^(k_l) is a point-wise product with its
EVAL table, tau_g a slot permutation; the table and g are arguments, so the kernel compiles once per batch
shape (n/2, n/4, ..., 1), not per level. A trace step is PackTwo with a zero odd part. L key-switch calls
in all, whatever m is: ell over a whole tree level (n/2^l ciphertexts each), L - ell on one ciphertext.

**Index convention.** Input i (the i-th entry of the batch axis) ends in coefficient i N/n, i < m, so the
packed polynomial is sum_i mu_i X^(i N/n); for m = N input i is coefficient i. (The pairing j, j + h per
level is the even/odd recursion of CDKS unrolled: PackLWEs(ct_0..ct_{n-1}) = PackTwo(PackLWEs(even
indices), PackLWEs(odd indices)).)

**Noise** (infinity norm of the phase error, coefficients). A PackTwo or trace step is linear with an
added key-switch error e_ks (||e_ks|| <= B_ks = :func:`~crossfhe.core.keyswitch.keyswitch_noise_bound`).
Every later level l' maps an error y to (1 + tau)(y) (even branch) or to X^k y - tau(X^k y) =
X^k (1 + tau)(y) (odd branch, k = k_l', as tau_{2^l'+1}(X^k) = X^(k + N) = -X^k), and the shifts X^k
commute with the tau of the levels after l' (tau_{2^l''+1}(X^(k_l')) = X^(k_l' + N 2^(l''-l')) = X^(k_l')),
so an error added at level l reaches the output as X^K Tr_l(e), Tr_l the product of (1 + tau_{2^l'+1}) for
l' > l: Tr_l(e) keeps the coefficients of e at multiples of N/2^l, times N/2^l, and zeroes the others.
The level-l node holding inputs j, j + n/2^l, ... has shift K = j N/n < N/2^l, so at any coefficient at
most one node of each level contributes, at most (N/2^l) B_ks. Summing over l = 1 .. L:

    ||e_out|| <= (N - 1) B_ks + c max_i |e_i,0|,   c = 1 with normalize, N without,

e_i,0 the constant coefficient of input i's phase error (the inputs' other coefficients, noise included,
are removed exactly). :func:`pack_noise_bound` evaluates it. It is a worst case: at N = 2^8, k = 2 of
three 30-bit primes, dnum = 3 (B_ks = 11008, bound 2.8e6) the measured largest error was 5.2e3 for m = N
and 1.4e3 for m = 3 (rms 1.6e3 and 1.7e2).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.core.evaluator import word
from crossfhe.core.keys import SIGMA, SecretKey, check_secret_key
from crossfhe.core.keyswitch import (
    KeySwitchKey,
    KeySwitchPlan,
    galois_permutation,
    gen_galois_key,
    keyswitch,
    keyswitch_noise_bound,
    keyswitch_plan,
)
from crossfhe.core.lwe import LWECiphertext, lwe_to_rlwe
from crossfhe.errors import BasisMismatchError, DomainMismatchError, ParameterError
from crossfhe.math import random as crandom
from crossfhe.math import xla
from crossfhe.math.modular import fusion_barrier
from crossfhe.math.primes import minimal_root_of_unity
from crossfhe.math.xla import jit, plan_cache
from crossfhe.ring.ntt import slot_exponents
from crossfhe.ring.poly import Domain, RNSPoly, add, mul, mul_scalar, sub


def _log2(n: int, what: str) -> int:
    n = int(n)
    if n < 1 or n & (n - 1):
        raise ParameterError(f"{what} = {n} must be a power of two")
    return n.bit_length() - 1


def packing_galois_elements(n: int) -> tuple[int, ...]:
    """The Galois elements 2^l + 1, l = 1 .. log2(N), of ring degree ``n`` = N (all below 2N): the keys
    every packing (any m) and every field trace needs."""
    log_n = _log2(n, "N")
    if log_n < 1:
        raise ParameterError(f"N = {n} must be at least 2")
    return tuple((1 << level) + 1 for level in range(1, log_n + 1))


def gen_packing_keys(
    sk: SecretKey, params_like, key: crandom.ChaChaKey, *, dnum: int | None = None, sigma: float = SIGMA
) -> dict[int, KeySwitchKey]:
    """The Galois keys of :func:`packing_galois_elements` (N): {g: key switching s(X^g) to s}.

    ``params_like``: the ring (n, q, p, and dnum unless given). The key of element g comes from
    ``fold_in(key, g)``. Each is :func:`~crossfhe.core.keyswitch.gen_galois_key`.
    """
    n, _, _ = check_secret_key(sk, params_like)
    return {
        g: gen_galois_key(sk, params_like, crandom.fold_in(key, g), g, dnum=dnum, sigma=sigma)
        for g in packing_galois_elements(n)
    }


def _galois_key(keys, level: int) -> KeySwitchKey:
    """The key of X -> X^(2^level + 1) from ``keys`` (a mapping element -> KeySwitchKey)."""
    if not isinstance(keys, Mapping):
        raise TypeError(
            f"keys must be a mapping Galois element -> KeySwitchKey (gen_packing_keys), got {type(keys).__name__}"
        )
    g = (1 << level) + 1
    try:
        ksk = keys[g]
    except KeyError:
        raise ParameterError(
            f"no Galois key for element {g} (X -> X^{g}, level {level} of the packing / trace); the keys hold "
            f"{sorted(keys)}. Generate all with gen_packing_keys(sk, params, key) or this one with "
            f"gen_galois_key(sk, params, key, {g})"
        ) from None
    if not isinstance(ksk, KeySwitchKey):
        raise TypeError(f"keys[{g}] must be a KeySwitchKey, got {type(ksk).__name__}")
    return ksk


def _check_pair(c0, c1, what: str) -> None:
    if not isinstance(c0, RNSPoly) or not isinstance(c1, RNSPoly):
        raise TypeError(f"{what} takes RNSPoly c0, c1, got {type(c0).__name__}, {type(c1).__name__}")
    if c0.domain != Domain.EVAL or c1.domain != Domain.EVAL:
        raise DomainMismatchError(f"{what} needs EVAL-domain ciphertexts, got {c0.domain.name}, {c1.domain.name}")
    if c0.basis != c1.basis or c0.data.shape != c1.data.shape:
        raise BasisMismatchError(
            f"{what}: c0 (moduli {c0.basis}, shape {tuple(c0.data.shape)}) and c1 (moduli {c1.basis}, "
            f"shape {tuple(c1.data.shape)}) must share one basis and shape"
        )


def _plan(ksk: KeySwitchKey, c0: RNSPoly, what: str, kernels=None) -> KeySwitchPlan:
    """The key-switching plan at c0's level, after checking c0 is over a prefix of the key's q. (Every key
    is checked against this plan when it is used: keys of another ring or dnum raise BasisMismatchError.)"""
    k = c0.limbs
    if c0.n != ksk.n or c0.basis != ksk.q[:k]:
        raise BasisMismatchError(
            f"{what}: the ciphertexts (N = {c0.n}, moduli {c0.basis}) are not over a prefix of the keys' "
            f"ciphertext primes (N = {ksk.n}, q = {ksk.q})"
        )
    return keyswitch_plan(ksk, active=k, kernels=kernels)


@plan_cache(maxsize=256, on_device=True)
def _monomial(n: int, moduli: tuple[int, ...], shift: int) -> jax.Array:
    """uint32 [k, N]: X^shift in the EVAL domain, slot p = psi_i^(e(p) shift) mod q_i (psi_i the NTT's 2N-th
    root, e(p) :func:`~crossfhe.ring.ntt.slot_exponents`). Computed in NumPy (safe under a trace), kept on the
    device (an argument of the PackTwo program)."""
    e = slot_exponents(n).astype(np.uint64)
    rows = []
    for q in moduli:
        base, out = pow(minimal_root_of_unity(2 * n, q), shift, q), np.ones(n, dtype=np.uint64)
        for bit in range((2 * n).bit_length()):  # square and multiply over e(p) < 2N; products < 2^62
            out = np.where((e >> np.uint64(bit)) & np.uint64(1), out * np.uint64(base) % np.uint64(q), out)
            base = base * base % q
        rows.append(out)
    return np.stack(rows).astype(np.uint32)


def _rows(p: RNSPoly, start: int, stop: int) -> RNSPoly:
    return RNSPoly(xla.rows(p.data, start, stop), p.basis, p.domain)


def _permute(p: RNSPoly, idx) -> RNSPoly:
    return RNSPoly(jnp.take(p.data, idx, axis=-1), p.basis, p.domain)


@jit
def _k_pack_two(e0, e1, o0, o1, mono, element, ksk, plan):
    """(e + X^k o) + tau_g(e - X^k o), tau_g's c1 key-switched; ``mono`` = X^k (EVAL), ``element`` = g a
    traced uint32, so one compilation per batch shape serves every level and every trace step."""
    mono = RNSPoly(mono, e0.basis, Domain.EVAL)
    x0, x1 = mul(o0, mono), mul(o1, mono)
    idx = galois_permutation(plan, element)
    u0, u1 = keyswitch(_permute(sub(e1, x1), idx), ksk, plan=plan)
    # Materialized: fused into the sum with the key switch's output, XLA:CPU recomputes this gather at a cost
    # above the key switch's (benchmarks/README.md, issue 32).
    t0 = _permute(sub(e0, x0), idx)
    t0 = t0._replace(fusion_barrier(t0.data, mono.data))
    return add(add(add(e0, x0), t0), u0), add(add(e1, x1), u1)


def _pack_level(even, odd, keys, level: int, plan: KeySwitchPlan):
    e0 = even[0]
    mono = _monomial(e0.n, e0.basis, e0.n >> level)
    return _k_pack_two(*even, *odd, mono, word((1 << level) + 1), _galois_key(keys, level), plan)


PACK_CHUNK = 16
"""Pairs per call of the PackTwo kernel in :func:`pack_lwes`: a level of h > 1 pairs runs as h / 16 calls of
16 pairs, or one call padded with zero ciphertexts to 16 when h < 16, so only two batch shapes (16 and 1)
are ever compiled instead of log2(N). Each compile of the kernel (a key switch inside) takes seconds,
while the padding costs at most 16 (log2(16) - 1) = 48 extra key switches per packing, a few percent of
the N - 1 of a full one."""


def _pack_level_chunked(even, odd, keys, level: int, plan: KeySwitchPlan):
    """:func:`_pack_level` over h pairs in calls of :data:`PACK_CHUNK` pairs (module docstring of it)."""
    h = even[0].data.shape[0]
    if h == 1:
        return _pack_level(even, odd, keys, level, plan)
    size = max(h, PACK_CHUNK)
    if size > h:
        pad = lambda p: RNSPoly(xla.pad_rows(p.data, size), p.basis, p.domain)  # noqa: E731
        even, odd = tuple(map(pad, even)), tuple(map(pad, odd))
    out0, out1 = [], []
    blocks = [[RNSPoly(b, p.basis, p.domain) for b in xla.split_rows(p.data, PACK_CHUNK)] for p in (*even, *odd)]
    for e0, e1, o0, o1 in zip(*blocks):
        d0, d1 = _pack_level((e0, e1), (o0, o1), keys, level, plan)
        out0.append(d0.data)
        out1.append(d1.data)
    cat = lambda parts, like: RNSPoly(xla.rows(jnp.concatenate(parts), 0, h), like.basis, Domain.EVAL)  # noqa: E731
    return cat(out0, even[0]), cat(out1, even[1])


def _trace(c0, c1, keys, first: int, last: int, plan: KeySwitchPlan):
    """Trace steps ct + tau_{2^l+1}(ct), l = first .. last: PackTwo with a zero odd part (same kernel)."""
    zero = RNSPoly(xla.zeros_like(c0.data), c0.basis, Domain.EVAL)
    for level in range(first, last + 1):
        c0, c1 = _pack_level((c0, c1), (zero, zero), keys, level, plan)
    return c0, c1


def pack_two_lwes(even, odd, keys, *, level: int, kernels=None) -> tuple[RNSPoly, RNSPoly]:
    """CHAM Alg. 2 (PackTwoLWEs) at ``level`` l: (e + X^(N/2^l) o) + tau_{2^l+1}(e - X^(N/2^l) o).

    even, odd: RLWE ciphertexts (c0, c1), RNSPoly ``uint32[..., k, N]`` (same shape; leading axes batch),
    EVAL over a prefix Q_k of the keys' q. keys: {Galois element: KeySwitchKey} holding 2^l + 1
    (:func:`gen_packing_keys`). 1 <= l <= log2(N). Returns (c0, c1) of the same shape, EVAL. If the phases
    of even and odd hold u_t and v_t at coefficient t N/2^(l-1) (t < 2^(l-1)), the output's phase holds
    2 u_t at coefficient 2t N/2^l and 2 v_t at (2t+1) N/2^l (other coefficients mixed), plus a key-switch
    error <= B_ks. Module docstring: the tree, the noise. ``kernels``: the key switches' kernel set
    (:mod:`crossfhe.kernels`; default VECTOR).
    """
    _check_pair(*even, "pack_two_lwes")
    _check_pair(*odd, "pack_two_lwes")
    if even[0].basis != odd[0].basis or even[0].data.shape != odd[0].data.shape:
        raise BasisMismatchError(
            f"pack_two_lwes: even (moduli {even[0].basis}, shape {tuple(even[0].data.shape)}) and odd (moduli "
            f"{odd[0].basis}, shape {tuple(odd[0].data.shape)}) must share one basis and shape"
        )
    log_n = _log2(even[0].n, "N")
    if isinstance(level, bool) or not isinstance(level, (int, np.integer)) or not 1 <= level <= log_n:
        raise ParameterError(f"level = {level!r} must be an int in [1, log2(N) = {log_n}]")
    level = int(level)
    return _pack_level(even, odd, keys, level, _plan(_galois_key(keys, level), even[0], "pack_two_lwes", kernels))


def field_trace(c0: RNSPoly, c1: RNSPoly, keys, *, n: int, kernels=None) -> tuple[RNSPoly, RNSPoly]:
    """Tr_{K_{2N}/K_{2n}}: ct <- ct + tau_{2^l+1}(ct) for l = log2(n) + 1 .. log2(N) (key-switched).

    c0, c1: RNSPoly ``uint32[..., k, N]``, EVAL over a prefix of the keys' q; n: a power of two dividing N.
    The phase's coefficient j becomes (N/n) phi_j when N/n divides j, else 0; added noise <= (N/n - 1) B_ks
    (and the input's noise at the kept coefficients times N/n). log2(N/n) key switches; n = N: no-op.
    """
    _check_pair(c0, c1, "field_trace")
    log_n, log_small = _log2(c0.n, "N"), _log2(n, "n")
    if log_small > log_n:
        raise ParameterError(f"n = {n} must divide N = {c0.n}")
    if log_small == log_n:
        return c0, c1
    plan = _plan(_galois_key(keys, log_small + 1), c0, "field_trace", kernels)
    return _trace(c0, c1, keys, log_small + 1, log_n, plan)


def pack_lwes(
    c0: RNSPoly, c1: RNSPoly, keys, *, normalize: bool = True, kernels=None, first_level: int = 1
) -> tuple[RNSPoly, RNSPoly]:
    """PackLWEs then the field trace (module docstring): m ciphertexts -> one, input i at coefficient i N/n.

    c0, c1: RNSPoly ``uint32[m, k, N]``, EVAL over a prefix Q_k of the keys' q, 1 <= m <= N; the constant
    coefficient of input i's phase is mu_i (the others are ignored). keys: {Galois element: KeySwitchKey}
    with every element of :func:`packing_galois_elements` (N) (:func:`gen_packing_keys`). Returns (c0, c1):
    RNSPoly ``uint32[k, N]``, EVAL, whose phase has mu_i at coefficient i N/n (n = the power of two >= m),
    0 elsewhere, plus noise <= :func:`pack_noise_bound`. ``normalize`` (default): inputs times N^-1 mod Q_k
    first (exact), so the output holds mu_i (and the inputs' noise times 1); otherwise N mu_i (noise times N).
    The key-switch noise is the same either way. Each tree level runs batched, in calls of
    :data:`PACK_CHUNK` pairs (two compiled shapes in all), and each trace step is one call. ``kernels``:
    the key switches' kernel set (:mod:`crossfhe.kernels`; default VECTOR).

    ``first_level`` = a + 1 > 1 packs RLWE ciphertexts that each carry 2^a values, at the coefficients
    u N / 2^a (u < 2^a; the others ignored): the tree starts at level a + 1, whose PackTwo keeps exactly those
    coefficients (the module docstring's argument with N / 2^(l-1) for the constant coefficient), so packing m
    such ciphertexts costs m - 1 + log2(N / (2^a n)) key switches for 2^a m values (Rhombus's input-output
    packing, He et al., CCS 2024). Value u of input i ends at coefficient u N / 2^a + i N / (2^a n), m <= N / 2^a;
    the scale is N / 2^a (``normalize`` divides by it). first_level = 1 is PackLWEs.
    Raises ParameterError (m, first_level, missing key), BasisMismatchError, DomainMismatchError naming the problem.
    """
    _check_pair(c0, c1, "pack_lwes")
    if c0.data.ndim != 3:
        raise BasisMismatchError(f"pack_lwes takes c0, c1 of shape [m, k, N], got {tuple(c0.data.shape)}")
    m, log_n = c0.data.shape[0], _log2(c0.n, "N")
    if isinstance(first_level, bool) or not isinstance(first_level, (int, np.integer)) or not (
        1 <= first_level <= log_n + 1
    ):
        raise ParameterError(f"first_level = {first_level!r} must be an int in [1, log2(N) + 1 = {log_n + 1}]")
    first_level = int(first_level)
    most = c0.n >> (first_level - 1)
    if not 1 <= m <= most:
        raise ParameterError(f"pack_lwes packs m in [1, N / 2^(first_level - 1) = {most}] ciphertexts, got m = {m}")
    plan = _plan(_galois_key(keys, min(first_level, log_n)), c0, "pack_lwes", kernels)
    if normalize:
        n_inv = pow(most, -1, math.prod(c0.basis))
        c0, c1 = mul_scalar(c0, n_inv), mul_scalar(c1, n_inv)
    ell = (m - 1).bit_length()
    if m < 1 << ell:
        c0, c1 = (RNSPoly(xla.pad_rows(c.data, 1 << ell), c.basis, Domain.EVAL) for c in (c0, c1))
    start = first_level
    if 1 << ell > 2 * PACK_CHUNK:
        # Levels with more than PACK_CHUNK pairs on a list of PACK_CHUNK-row blocks: the pairs (j, j + h) of a
        # level are row for row the blocks (i, i + h / PACK_CHUNK), so no level slices or joins whole arrays.
        blocks = [tuple(RNSPoly(b, c0.basis, Domain.EVAL) for b in pair)
                  for pair in zip(xla.split_rows(c0.data, PACK_CHUNK), xla.split_rows(c1.data, PACK_CHUNK))]
        while len(blocks) > 1:
            half = len(blocks) // 2
            blocks = [_pack_level(blocks[i], blocks[i + half], keys, start, plan) for i in range(half)]
            start += 1
        c0, c1 = blocks[0]
    for level in range(start, first_level + ell):
        h = c0.data.shape[0] // 2
        even, odd = ((_rows(c0, a, b), _rows(c1, a, b)) for a, b in ((0, h), (h, 2 * h)))
        c0, c1 = _pack_level_chunked(even, odd, keys, level, plan)
    c0, c1 = _trace(c0, c1, keys, first_level + ell, log_n, plan)  # batch [1, k, N], the tree's last shape
    return tuple(RNSPoly(xla.rows(c.data, 0, 1).reshape(c.data.shape[1:]), c.basis, c.domain) for c in (c0, c1))


def pack_lwe_ciphertexts(
    lwes: LWECiphertext, keys, *, normalize: bool = True, kernels=None
) -> tuple[RNSPoly, RNSPoly]:
    """:func:`pack_lwes` of the RLWE embeddings (:func:`~crossfhe.core.lwe.lwe_to_rlwe`, CHAM eq. 3) of m
    LWE ciphertexts: b ``[m, k]``, a ``[m, k, N]`` over a prefix of the keys' q. The phase of the result
    has LWE phase i at coefficient i N/n (n the power of two >= m), 0 elsewhere, plus noise
    <= :func:`pack_noise_bound` (with input noise the LWE noise bound). ``kernels``: as for pack_lwes."""
    if not isinstance(lwes, LWECiphertext):
        raise TypeError(f"pack_lwe_ciphertexts takes an LWECiphertext, got {type(lwes).__name__}")
    if lwes.a.ndim != 3:
        raise BasisMismatchError(f"pack_lwe_ciphertexts takes one batch axis: a [m, k, N], got {tuple(lwes.a.shape)}")
    c0, c1 = lwe_to_rlwe(lwes, domain=Domain.EVAL)
    return pack_lwes(c0, c1, keys, normalize=normalize, kernels=kernels)


def pack_noise_bound(
    n: int,
    q_active,
    p,
    dnum: int,
    sigma: float = SIGMA,
    *,
    q_limbs: int | None = None,
    hamming_weight: int | None = None,
    input_noise: int = 0,
    normalize: bool = True,
) -> int:
    """Worst-case ||e_out||_inf of :func:`pack_lwes` (module docstring): (N - 1) B_ks + c input_noise.

    n = N; q_active, p, dnum, sigma, q_limbs, hamming_weight: as for
    :func:`~crossfhe.core.keyswitch.keyswitch_noise_bound` (B_ks). input_noise: a bound on |e_i,0|, the
    constant coefficient of each input's phase error; c = 1 with ``normalize``, N without. Independent of m.
    """
    b_ks = keyswitch_noise_bound(n, q_active, p, dnum, sigma, q_limbs=q_limbs, hamming_weight=hamming_weight)
    return (int(n) - 1) * b_ks + (1 if normalize else int(n)) * int(input_noise)


__all__ = [
    "field_trace",
    "gen_packing_keys",
    "pack_lwe_ciphertexts",
    "pack_lwes",
    "pack_noise_bound",
    "pack_two_lwes",
    "packing_galois_elements",
]
