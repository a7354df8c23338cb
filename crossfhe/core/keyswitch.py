"""Hybrid key switching (dnum digits, special modulus P), written once for every RLWE scheme.

Notation: ring degree N; ciphertext primes Q_L = q_0 ... q_{L-1}, of which a ciphertext at some level
uses the prefix Q_k = q_0 ... q_{k-1} (k active limbs); special primes P = p_0 ... p_{K-1}. The L limbs
are split once into contiguous digit groups (:func:`~crossfhe.math.decompose.digit_partition`(L, dnum):
alpha = ceil(L / dnum) limbs each, ceil(L / alpha) <= dnum groups); at k active limbs the digits are
those groups cut to the prefix, empty ones dropped (``digit_partition(L, dnum, active=k)``), so one key
serves every level. D_j is the product of the primes of digit j.

**Key.** For s' (the secret to switch from) and s (to), digit j holds, over Q_L ∪ P in the EVAL domain,

    b_j = -a_j s + e_j + P g_j s'   (mod Q_L P),   g_j = 1 mod q_i for q_i in digit j, 0 mod the others,

so P g_j s' has residues (P mod q_i) s'_i on the limbs of digit j and 0 elsewhere (also 0 mod each p).
a_j is uniform, e_j discrete Gaussian (sigma 3.19, |e| <= ceil(13 sigma)).

**Switching** (Han and Ki, "Better bootstrapping for approximate homomorphic encryption", CT-RSA 2020;
CASA Alg. 4 with ModUp Alg. 6 and ModDown Alg. 7; Alchemist eq. 2-3). For d over Q_k:

1. X_j = ModUp([d]_{D_j}) over Q_k ∪ P: X_j = [d]_{D_j} + alpha_j D_j, 0 <= X_j < |D_j| D_j (|D_j| limbs);
2. (c0, c1) = sum_j X_j (b_j, a_j) (mod Q_k P), so c0 + c1 s = P d s' + sum_j X_j e_j (mod Q_k P);
3. (u0, u1) = ModDown(c0, c1) = ((c - [c]_P - beta P) / P mod Q_k), 0 <= beta < K.

Hence u0 + u1 s = d s' + e_ks (mod Q_k) with e_ks = (sum_j X_j e_j - C0 - C1 s) / P - (beta0 + beta1 s),
C_i = [c_i]_P in [0, P), bounded by :func:`keyswitch_noise_bound`.

**Kernel.** Steps that are linear and limb-wise run in the EVAL domain, which gives the same words as
the plain pipeline (INTT, ModUp, NTT, MAC, INTT, ModDown, NTT; a test checks it bit for bit) with fewer
transforms: ModUp only transforms the limbs it creates (a digit's own limbs are already the input's
evaluations), and ModDown converts only the P limbs in the coefficient domain:
out = (c_Q - NTT(Conv_{P->Q}(INTT(c_P)))) P^-1 mod q_i. The basis conversions of all digits run as one
batched multiply-accumulate (:class:`DigitModUp`, the tables of ``rns.ModUpPlan`` stacked) and their
outputs as one NTT call, so the compiled size does not grow with dnum. The products with the key are
multiply-accumulated over the digits with one reduction per output (Alchemist's (M A)_n R, the products
summed in a two-word accumulator, unrolled over the digits), in chunks of at most
``Modulus.mac_max_terms`` digits (4 when some prime is >= 2^30) whose partial sums are added mod q_i.
Four transform calls per switch; in limbs, k (INTT of d, or NTT for a COEFF input) + sum_j (k + K -
|D_j|) + 2K + 2k, which is 3k fewer than the plain pipeline.

Tables live in a :class:`KeySwitchPlan` (cached per (N, Q_L, P, dnum, k), a pytree passed to the jitted
kernel as an argument, never closed over).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from crossfhe.core.keys import (
    SIGMA,
    SecretKey,
    check_secret_key,
    eval_residues,
    gaussian_bound,
    key_plan,
    moduli_of,
    ring_of,
    sample_gaussian,
)
from crossfhe.core.keys import sample_uniform as _sample_uniform
from crossfhe.errors import BasisMismatchError, DomainMismatchError, ParameterError
from crossfhe.math import conv
from crossfhe.math import random as crandom
from crossfhe.math.decompose import digit_partition
from crossfhe.math.modular import (
    Modulus,
    ModulusTable,
    add_mod,
    add_wide,
    after,
    barrett_mul,
    centered_gemm_rows,
    gemm_weights,
    mul_wide,
    reduce_u64,
    shoup_mul,
    sub_mod,
)
from crossfhe.math.rns import ModDownPlan, ModUpPlan, RNSBasis, fast_basis_conversion
from crossfhe.math.xla import jit, plan_cache
from crossfhe.ring.ntt import (
    NTTPlan,
    fusion_barrier,
    intt,
    native_mac_digits,
    ntt,
    permute_slots,
    slot_exponents,
    slot_of_exponent,
    transform_operand,
)
from crossfhe.ring.poly import Domain, RNSPoly, add, mul, sub

_static = partial(field, metadata={"static": True})


# --------------------------------------------------------------------------------------------------
# Digits
# --------------------------------------------------------------------------------------------------


def _dnum_of(params_like, dnum: int | None) -> int:
    if dnum is None:
        dnum = getattr(params_like, "dnum", None)
        if dnum is None:
            raise ParameterError("dnum is needed: pass dnum=... or parameters that carry a dnum")
    if isinstance(dnum, bool) or not isinstance(dnum, (int, np.integer)):
        raise ParameterError(f"dnum must be an int, got {dnum!r}")
    return int(dnum)


def digit_groups(n_limbs: int, dnum: int, active: int | None = None) -> tuple[tuple[int, int], ...]:
    """The digit groups as (start, stop) limb ranges: ``digit_partition(n_limbs, dnum, active=active)``.

    Raises ParameterError (naming the bound) unless 1 <= dnum <= n_limbs and 1 <= active <= n_limbs.
    """
    if not 1 <= dnum <= n_limbs:
        raise ParameterError(f"dnum = {dnum} must be in [1, L] with L = {n_limbs} ciphertext limbs")
    if active is not None and not 1 <= active <= n_limbs:
        raise ParameterError(f"active = {active} limbs must be in [1, L = {n_limbs}]")
    return tuple((g.start, g.stop) for g in digit_partition(n_limbs, dnum, active=active))


def transform_counts(n_limbs: int, p_limbs: int, dnum: int, active: int | None = None) -> tuple[int, int]:
    """(ModUp, ModDown) limb transforms of one hybrid key switch with ``active`` of the ``n_limbs`` ciphertext limbs
    (default all) and ``p_limbs`` special primes: ModUp inverts the active limbs once and transforms each digit's
    extension to the other limbs and P; ModDown inverts P and transforms the limbs, for both output polynomials."""
    active = n_limbs if active is None else active
    up = active + sum(active + p_limbs - (hi - lo) for lo, hi in digit_groups(n_limbs, dnum, active))
    return up, 2 * (p_limbs + active)


def _gadget_factors(q: tuple[int, ...], p: tuple[int, ...], groups) -> np.ndarray:
    """uint32 [digits, L + K, 1]: (P mod q_i) on the limbs of digit j, 0 elsewhere (the residues of P g_j)."""
    big_p = math.prod(p)
    f = np.zeros((len(groups), len(q) + len(p), 1), dtype=np.uint32)
    for j, (start, stop) in enumerate(groups):
        for i in range(start, stop):
            f[j, i, 0] = big_p % q[i]
    return f


# --------------------------------------------------------------------------------------------------
# Key-switching keys
# --------------------------------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False, repr=False)
class KeySwitchKey:
    """Hybrid key-switching key from s' to s: a pytree (math in the module docstring).

    ``b``, ``a``: RNSPoly ``uint32[digits, L + K, N]`` over Q_L ∪ P (q limbs first), EVAL domain, in
    [0, q_i), with b_j + a_j s = e_j + P g_j s' (mod Q_L P); digits = len(digit_partition(L, dnum)) <= dnum.
    ``seed``: the ChaChaKey of a, ``a = expand_keyswitch_a(seed, q + p, N, digits)``, so a serializer may
    store the seed instead of a. ``a`` None: the compact form (:func:`compact`, half the memory), whose key
    switches make the rows of a they read from the seed each time (the same words). Static: ``q``, ``p``,
    ``dnum``, ``sigma``.
    """

    b: RNSPoly
    a: RNSPoly | None
    seed: crandom.ChaChaKey
    q: tuple[int, ...] = _static()
    p: tuple[int, ...] = _static()
    dnum: int = _static()
    sigma: float = _static()

    @property
    def n(self) -> int:
        return self.b.n

    @property
    def digits(self) -> int:
        return self.b.data.shape[-3]

    @property
    def compact(self) -> bool:
        """Whether a is kept as its seed only (:func:`compact`)."""
        return self.a is None

    def nbytes(self) -> int:
        """Bytes held: b, and a unless the key is compact."""
        return int(self.b.data.nbytes) + (0 if self.a is None else int(self.a.data.nbytes))

    def __repr__(self) -> str:
        form = ", compact" if self.a is None else ""
        return (f"KeySwitchKey(n={self.n}, L={len(self.q)}, K={len(self.p)}, dnum={self.dnum}, "
                f"digits={self.digits}{form})")


def compact(ksk: KeySwitchKey) -> KeySwitchKey:
    """``ksk`` with its uniform part a kept as the seed only: half the memory; each key switch then makes the rows
    of a it reads (its level's limbs and P, its digits) from the seed: the native sampler's rows on the NATIVE kernel
    set, a full expansion on the others (what it costs: benchmarks/README.md, "Compact keys"). The same words in
    every key switch. :func:`expand` undoes it."""
    if not isinstance(ksk, KeySwitchKey):
        raise TypeError(f"compact takes a KeySwitchKey, got {type(ksk).__name__}")
    return ksk if ksk.a is None else dataclasses.replace(ksk, a=None)


def expand(ksk: KeySwitchKey, kernels=None) -> KeySwitchKey:
    """``ksk`` with a expanded from its seed (:func:`expand_keyswitch_a`; unchanged if it has a)."""
    if not isinstance(ksk, KeySwitchKey):
        raise TypeError(f"expand takes a KeySwitchKey, got {type(ksk).__name__}")
    if ksk.a is not None:
        return ksk
    return dataclasses.replace(ksk, a=expand_keyswitch_a(ksk.seed, ksk.q + ksk.p, ksk.n, ksk.digits, kernels))


RELIN = 0
"""Among the elements of :func:`evaluation_key_batches`, the relinearization key (s' = s^2): no Galois element is
even, so 0 names no automorphism."""

KEY_BATCH_BYTES = 2**28
"""The most bytes of keys (b and a) one program of :func:`evaluation_key_batches` makes, at least one key: the keys
of a batch exist twice at its end (stacked, then as the keys' own arrays); its other temporaries are one key's.
N 2^14 with 12 limbs and 3 digits (N14_L7): 4.7 MB a key, 56 keys a batch; N 2^16 with 56 limbs and 3 digits
(N16_BOOT_L3): 88 MB a key, 3 keys a batch."""


def _expand_a_traced(seed, moduli: tuple[int, ...], n: int, digits: int, native: bool = False):
    """uint32 ``[digits, limbs, N]``: a_j = ``sample_uniform(fold_in(seed, j), moduli, N)``, mapped over j;
    ``native`` (the NATIVE kernel set): the same words from the native sampler
    (:func:`crossfhe.math.random.uniform_mod_native`, one custom call)."""
    js = jnp.arange(digits, dtype=jnp.uint32)
    if native and n % 16 == 0:
        return crandom.uniform_mod_native(jax.vmap(lambda j: crandom.fold_in(seed, j))(js), moduli, n)

    def one(j):
        return _sample_uniform(crandom.fold_in(seed, j), moduli, n, domain=Domain.EVAL).data

    return jax.vmap(one)(js)


def _native(kernels) -> bool:
    """Whether ``kernels`` is NATIVE; if so the native sampler is loaded (its target registered) before a program
    kept across processes runs it untraced."""
    if kernels is None or not kernels.resolve().native:
        return False
    crandom.NATIVE.require("the NATIVE kernel set's uniform sampler")
    return True


@partial(jit, persist=True, static_argnames=("moduli", "n", "digits", "native"))
def _k_expand_a(seed, *, moduli, n, digits, native):
    return _expand_a_traced(seed, moduli, n, digits, native)


def expand_keyswitch_a(seed, moduli, n: int, digits: int, kernels=None) -> RNSPoly:
    """The uniform part of a key-switching key from its seed: RNSPoly ``uint32[digits, limbs, N]``, EVAL,
    a_j = ``sample_uniform(fold_in(seed, j), moduli, N)`` (one sampler shape for every dnum), one program; on the
    NATIVE kernel set (``kernels``, e.g. the parameters') the native sampler makes the same words."""
    moduli = moduli_of(moduli)
    data = _k_expand_a(seed, moduli=moduli, n=int(n), digits=int(digits), native=_native(kernels))
    return RNSPoly(data, moduli, Domain.EVAL)


def _check_target(s_from, n: int, moduli: tuple[int, ...]) -> None:
    if isinstance(s_from, SecretKey):
        if s_from.n != n:
            raise BasisMismatchError(f"s_from is a secret key of N = {s_from.n}, the key's ring has N = {n}")
        return
    if not isinstance(s_from, RNSPoly):
        raise TypeError(f"s_from must be an RNSPoly (EVAL over Q_L ∪ P) or a SecretKey, got {type(s_from).__name__}")
    if s_from.domain != Domain.EVAL:
        raise DomainMismatchError(f"s_from must be in the EVAL domain, got {s_from.domain.name}")
    if s_from.n != n or s_from.basis != moduli or s_from.data.ndim != 2:
        raise BasisMismatchError(
            f"s_from must be one polynomial over Q_L ∪ P = {moduli} with N = {n}; "
            f"got shape {tuple(s_from.data.shape)} over {s_from.basis}"
        )


@jit
def _key_digit(a: RNSPoly, e: RNSPoly, s: RNSPoly, s_from: RNSPoly, factor) -> RNSPoly:
    """b_j = e_j - a_j s + f_j s' over Q_L ∪ P (EVAL), f_j = ``factor`` uint32 ``[limbs, 1]`` (P g_j's residues)."""
    t = ModulusTable.create(a.basis)
    gs = RNSPoly(barrett_mul(s_from.data, factor, t.q, t.barrett_mu, t.bits), a.basis, Domain.EVAL)
    return add(sub(e, mul(a, s)), gs)


def _ksk_traced(key, s_to, s_from, factors, plan: NTTPlan, moduli: tuple[int, ...], n: int, sigma: float):
    """(b, a, seed) of the key from s' = ``s_from`` to s = ``s_to`` (uint32 ``[limbs, N]``, EVAL over ``moduli``) with
    gadget ``factors`` uint32 ``[digits, limbs, 1]``: seed, k_e = split(key); a = expand_keyswitch_a(seed);
    e_j = sample_gaussian(fold_in(k_e, j)) in EVAL through ``plan``; b_j = e_j - a_j s + f_j s'. Traceable."""
    digits = factors.shape[0]
    seed, key_e = crandom.split(key)
    a = _expand_a_traced(seed, moduli, n, digits, _native(plan.kernels))
    s, s_prime = RNSPoly(s_to, moduli, Domain.EVAL), RNSPoly(s_from, moduli, Domain.EVAL)

    def digit(j, a_j, f_j):
        e = sample_gaussian(crandom.fold_in(key_e, j), moduli, n, sigma, domain=Domain.EVAL, plan=plan)
        return _key_digit(RNSPoly(a_j, moduli, Domain.EVAL), e, s, s_prime, f_j).data

    b = jax.vmap(digit)(jnp.arange(digits, dtype=jnp.uint32), a, factors)
    return b, a, seed


@partial(jit, persist=True, static_argnames=("moduli", "n", "sigma"))
def _k_keyswitch_key(key, s_to, s_from, factors, plan, *, moduli, n, sigma):
    return _ksk_traced(key, s_to, s_from, factors, plan, moduli, n, sigma)


@partial(jit, persist=True, static_argnames=("moduli", "n", "sigma"))
def _k_keyswitch_key_from_secret(key, s_to, coeffs_from, factors, plan, *, moduli, n, sigma):
    return _ksk_traced(key, s_to, eval_residues(coeffs_from, moduli, plan), factors, plan, moduli, n, sigma)


@partial(jit, persist=True, static_argnames=("moduli", "n", "sigma"))
def _k_evaluation_keys(key, elements, s, factors, plan, *, moduli, n, sigma):
    """The keys of ``elements`` uint32 ``[m]`` (:data:`RELIN` or odd Galois elements) one after another
    (``lax.map``: one key's temporaries at a time), returned as m separate (b, a, seed)."""
    s_poly = RNSPoly(s, moduli, Domain.EVAL)
    square = mul(s_poly, s_poly).data

    def one(g):
        s_g = jnp.take(s, slot_permutation(n, g | 1), axis=-1)
        s_from = jnp.where(g == RELIN, square, s_g)
        return _ksk_traced(crandom.fold_in(key, g), s, s_from, factors, plan, moduli, n, sigma)

    b, a, seed = lax.map(one, elements)
    return tuple((b[i], a[i], crandom.ChaChaKey(seed.words[i], seed.stream[i])) for i in range(elements.shape[0]))


@plan_cache(maxsize=32, on_device=True)
def _gadget_table(q: tuple[int, ...], p: tuple[int, ...], dnum: int) -> np.ndarray:
    return _gadget_factors(q, p, digit_groups(len(q), dnum))


def _key_setup(sk_to: SecretKey, params_like, dnum: int | None):
    """(n, q, p, dnum, Q_L ∪ P, gadget factors, NTT plan) of a key-switching key to ``sk_to``, checked."""
    n, q, p = check_secret_key(sk_to, params_like)
    dnum = _dnum_of(params_like, dnum)
    if not p:
        raise ParameterError("hybrid key switching needs at least one special prime (p is empty)")
    digit_groups(len(q), dnum)
    moduli = q + p
    plan = key_plan(params_like, n, moduli)
    _native(plan.kernels)  # loads the native sampler before a program kept across processes runs it untraced
    return n, q, p, dnum, moduli, _gadget_table(q, p, dnum), plan


def _key(b, a, seed, q, p, dnum, sigma) -> KeySwitchKey:
    moduli = q + p
    return KeySwitchKey(
        b=RNSPoly(b, moduli, Domain.EVAL),
        a=RNSPoly(a, moduli, Domain.EVAL),
        seed=seed,
        q=q,
        p=p,
        dnum=dnum,
        sigma=float(sigma),
    )


def gen_keyswitch_key(
    sk_to: SecretKey, s_from, params_like, key, *, dnum: int | None = None, sigma: float = SIGMA
) -> KeySwitchKey:
    """A key that switches d s' (s' = ``s_from``) to a pair under ``sk_to``: b_j = -a_j s + e_j + P g_j s'. One
    program.

    s_from: RNSPoly ``uint32[L + K, N]``, EVAL over Q_L ∪ P (another key's s, s^2, s(X^k)), or a SecretKey of the
    same N on any ring (its ternary coefficients are taken mod Q_L ∪ P: the key switches from that secret). dnum:
    the number of digits (default ``params_like.dnum``), 1 <= dnum <= L; needs K >= 1 special primes. a from
    ``split(key)[0]`` (kept as the seed, expanded by :func:`expand_keyswitch_a`), e_j from ``fold_in(split(key)[1],
    j)``. Raises ParameterError, BasisMismatchError or DomainMismatchError naming the mismatch.
    """
    n, q, p, dnum, moduli, factors, plan = _key_setup(sk_to, params_like, dnum)
    _check_target(s_from, n, moduli)
    if isinstance(s_from, SecretKey):
        out = _k_keyswitch_key_from_secret(
            key, sk_to.poly.data, s_from.coeffs, factors, plan, moduli=moduli, n=n, sigma=float(sigma)
        )
    else:
        out = _k_keyswitch_key(key, sk_to.poly.data, s_from.data, factors, plan, moduli=moduli, n=n, sigma=float(sigma))
    return _key(*out, q, p, dnum, sigma)


def evaluation_key_batches(
    sk: SecretKey,
    params_like,
    key,
    elements,
    *,
    dnum: int | None = None,
    sigma: float = SIGMA,
    batch_bytes: int | None = None,
):
    """The relinearization key and Galois keys of ``elements`` (:data:`RELIN`, or odd k taken mod 2N; repeats
    dropped), made batch by batch: yields one ``{element: KeySwitchKey}`` per batch, each once its keys are computed.

    The key of element k is :func:`gen_keyswitch_key` to s from s' = s^2 (k = RELIN) or s' = s(X^k) (the EVAL slots
    of s permuted, :func:`slot_permutation`) with the ChaChaKey ``fold_in(key, k)``: each element's key has the key
    words of its own ChaCha20 block (the same whichever other elements are asked for), and within it a, its seed and
    each digit's error come from distinct children (``split``, ``fold_in``). A batch holds
    m = min(count, max(1, batch_bytes // key bytes)) keys (default :data:`KEY_BATCH_BYTES`), made by one program
    that takes the elements as an argument array uint32 ``[m]``: the same executable for every batch and every set
    of m elements (a last, shorter batch is padded with its last element, whose repeat is dropped). Within it the
    keys are made one after another (``lax.map``), so its temporaries are one key's. Raises ParameterError for an
    even element other than RELIN, and as :func:`gen_keyswitch_key`.
    """
    n, q, p, dnum, moduli, factors, plan = _key_setup(sk, params_like, dnum)
    wanted = []
    for g in elements:
        g = int(g) % (2 * n)
        if g % 2 == 0 and g != RELIN:
            raise ParameterError(f"Galois elements must be odd (mod 2N = {2 * n}), got {g}")
        if g not in wanted:
            wanted.append(g)
    if not wanted:
        return
    key_bytes = 2 * factors.shape[0] * len(moduli) * n * 4
    batch_bytes = KEY_BATCH_BYTES if batch_bytes is None else int(batch_bytes)
    size = min(len(wanted), max(1, batch_bytes // key_bytes))
    for start in range(0, len(wanted), size):
        batch = wanted[start : start + size]
        padded = np.array(batch + batch[-1:] * (size - len(batch)), dtype=np.uint32)
        out = _k_evaluation_keys(key, padded, sk.poly.data, factors, plan, moduli=moduli, n=n, sigma=float(sigma))
        out = jax.block_until_ready(out[: len(batch)])
        yield {g: _key(*parts, q, p, dnum, sigma) for g, parts in zip(batch, out)}


def gen_galois_keys(
    sk: SecretKey,
    params_like,
    key,
    elements,
    *,
    dnum: int | None = None,
    sigma: float = SIGMA,
    batch_bytes: int | None = None,
) -> dict[int, KeySwitchKey]:
    """``{k: key}`` for the Galois elements ``elements``: every batch of :func:`evaluation_key_batches` together."""
    keys: dict[int, KeySwitchKey] = {}
    for batch in evaluation_key_batches(
        sk, params_like, key, elements, dnum=dnum, sigma=sigma, batch_bytes=batch_bytes
    ):
        keys.update(batch)
    return keys


def gen_relin_key(sk: SecretKey, params_like, key, *, dnum: int | None = None, sigma: float = SIGMA) -> KeySwitchKey:
    """The relinearization key: switches d s^2 to s. The key :func:`evaluation_key_batches` makes for :data:`RELIN`
    with the same ``key`` (ChaChaKey ``fold_in(key, 0)``), by the same program."""
    return gen_galois_keys(sk, params_like, key, [RELIN], dnum=dnum, sigma=sigma)[RELIN]


def gen_galois_key(
    sk: SecretKey, params_like, key, galois_element: int, *, dnum: int | None = None, sigma: float = SIGMA
) -> KeySwitchKey:
    """The key of the automorphism X -> X^k (k = ``galois_element``, odd): switches d s(X^k) to s. The key
    :func:`evaluation_key_batches` makes for k with the same ``key`` (ChaChaKey ``fold_in(key, k)``)."""
    check_secret_key(sk, params_like)
    k = int(galois_element) % (2 * sk.n)
    if k % 2 == 0:
        raise ParameterError(f"automorphism X -> X^k needs an odd k, got k = {galois_element}")
    return gen_galois_keys(sk, params_like, key, [k], dnum=dnum, sigma=sigma)[k]


# --------------------------------------------------------------------------------------------------
# Plans
# --------------------------------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False)
class DigitModUp:
    """ModUp of all digits at once: the tables of the per-digit ModUpPlans D_j -> Q_k ∪ P, stacked.

    Each digit is padded to alpha = the largest digit size and its targets (Q_k ∪ P without D_j, in
    conversion order) to m = the most targets; padding has zero weights, so it adds nothing. Tables:
    ``src_q``, ``hat_inv``, ``hat_inv_shoup`` ``[digits, alpha, 1]``; ``weights`` ``[digits, m, alpha]`` =
    [D_j / q_i]_t and ``gemm`` int32 ``[digits, m, 2 alpha]``, its operand for the float64 product
    (:func:`~crossfhe.math.modular.gemm_weights`); ``dst`` (q, barrett_mu, bits, mont_qinv, mont_r2) of the
    targets, ``[digits, m, 1]``; ``ntt``: one NTT plan over the real targets of every digit in turn (moduli
    repeat across digits, which the limb-wise kernel allows; on the NATIVE set it shares the rows of one plan over
    the whole chain, :func:`chain_ntt_plan`, with every level's, no copies). Static: ``chunk`` (source limbs per float64
    product, the smallest of the digits' BasisConversion chunks), ``rows`` (the real target rows of the
    flattened ``[digits * m]``, or None when there is no padding), ``assemble`` (for each digit and limb of
    Q_k ∪ P, its row in the concatenation of the transformed targets and the input's own EVAL limbs).
    """

    src_q: np.ndarray
    hat_inv: np.ndarray
    hat_inv_shoup: np.ndarray
    src_half: np.ndarray
    weights: np.ndarray
    dst: tuple[np.ndarray, ...]
    gemm: np.ndarray
    ntt: NTTPlan
    matrix: object
    native: object
    chunk: int = _static()
    rows: tuple[int, ...] | None = _static()
    assemble: tuple[tuple[int, ...], ...] = _static()
    kernels: object = _static()

    @classmethod
    def create(cls, n: int, groups, q_basis: RNSBasis, target: RNSBasis, kernels=None,
               chain: tuple[int, ...] | None = None) -> DigitModUp:
        """``kernels``: None / VECTOR, or a kernel set with its own tables (MATRIX): the conversion matmul
        and the NTT of the new limbs then run on it (``matrix``: its conversion tables), same words. ``chain``: the
        moduli of the whole ring (Q_L ∪ P); on the NATIVE set the NTT then reads the rows of its plan in place."""
        kernels = None if kernels is None else kernels.resolve()
        ntt_kernels = kernels
        if kernels is not None and not kernels.uses_tables:
            kernels = None
        ups = [ModUpPlan.create(q_basis.sub(start, stop), target, centered=True) for start, stop in groups]
        convs = [up.conv for up in ups]
        alpha = max(stop - start for start, stop in groups)
        if any(start != j * alpha for j, (start, _) in enumerate(groups)):
            raise ParameterError(f"digits must be contiguous groups of {alpha} limbs from 0, got {groups}")
        m = max(len(c.to_basis) for c in convs)
        src = np.zeros((3, len(groups), alpha, 1), dtype=np.uint32)
        src[0] = convs[0].src_q[0, 0]  # padding rows: x = 0 times w = 0 stays 0 for any modulus
        weights = np.zeros((len(groups), m, alpha), dtype=np.uint32)
        half = np.full((len(groups), alpha, 1), 0xFFFFFFFF, dtype=np.uint32)  # padding digits never count
        dst = np.zeros((5, len(groups), m, 1), dtype=np.uint32)
        rows, assemble, base = [], [], 0
        n_real = sum(len(c.to_basis) for c in convs)
        for j, ((start, stop), c) in enumerate(zip(groups, convs)):
            a, b = stop - start, len(c.to_basis)
            src[:, j, :a] = c.src_q, c.hat_inv, c.hat_inv_shoup
            weights[j, :b, :a] = c.hat_mod_dst
            half[j, :a] = c.src_half
            dst[:, j] = np.stack([c.dst_q, c.dst_mu, c.dst_bits, c.dst_qinv, c.dst_r2])[:, :1]  # padding
            dst[:, j, :b] = c.dst_q, c.dst_mu, c.dst_bits, c.dst_qinv, c.dst_r2
            rows += [j * m + r for r in range(b)]
            own = range(n_real + start, n_real + stop)
            assemble.append(tuple(range(base, base + start)) + tuple(own) + tuple(range(base + start, base + b)))
            base += b
        moduli = [m for c in convs for m in c.to_basis.moduli]
        if chain is not None and ntt_kernels is not None and ntt_kernels.native:
            ntt_plan = NTTPlan.gathered(chain_ntt_plan(n, chain, ntt_kernels), moduli)
        else:
            ntt_plan = NTTPlan.concat([NTTPlan.create(n, c.to_basis.moduli, ntt_kernels) for c in convs])
        matrix = None if kernels is None else kernels.conversion_tables(weights, src[0], dst[0])
        native_tables = None
        if ntt_kernels is not None and ntt_kernels.native and conv.fast():  # the native kernel, where it is faster
            native_tables = conv.ConvTables.create(weights, src[0], half, dst[0])
        return cls(
            src_q=src[0],
            hat_inv=src[1],
            hat_inv_shoup=src[2],
            src_half=half,
            weights=weights,
            dst=tuple(dst),
            ntt=ntt_plan,
            matrix=matrix,
            native=native_tables,
            gemm=gemm_weights(weights, dst[0]),
            chunk=min(c.chunk for c in convs),
            rows=None if len(rows) == len(groups) * m else tuple(rows),
            assemble=tuple(assemble),
            kernels=kernels,
        )


@plan_cache(maxsize=8, on_device=True)
def chain_ntt_plan(n: int, chain: tuple[int, ...], kernels) -> NTTPlan:
    """The NTT plan over a whole chain Q_L ∪ P whose rows every level's ModUp reads in place (NATIVE set): kept in
    a cache of its own, apart from :meth:`NTTPlan.create`'s, so that the levels' plans made one after another
    share one copy (4 tables of N words per modulus: 56 MiB for N16_BOOT_L3's 56 moduli, where a copy per level
    of each digit's targets came to 1.2 GiB)."""
    return NTTPlan.create(n, chain, kernels)


def level_ntt_plan(n: int, moduli, chain, kernels) -> NTTPlan:
    """The NTT plan over ``moduli`` (some of ``chain``'s, e.g. a level's), for the plans made per level (key
    switching's, rescaling's): on the NATIVE set one that reads :func:`chain_ntt_plan`'s rows in place
    (:meth:`NTTPlan.gathered`), so that the levels share one copy of the tables (each level's own came to 0.4 GiB at
    N16_BOOT_L3); on the other sets (whose kernels would gather the rows inside every program) a plan of its own."""
    resolved = None if kernels is None else kernels.for_plans()
    if resolved is not None and resolved.native:
        return NTTPlan.gathered(chain_ntt_plan(n, tuple(int(m) for m in chain), resolved), moduli)
    return NTTPlan.create(n, moduli, kernels)


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False)
class KeySwitchPlan:
    """Tables of key switching at k active limbs; create with :func:`keyswitch_plan` (cached).

    ``up``: :class:`DigitModUp`, the ModUp tables of every active digit; ``ntt_q``, ``ntt_p``: NTT plans of
    Q_k and P; ``down``: the ModDownPlan Q_k ∪ P -> Q_k; ``mac``: (q, barrett_mu, bits, mont_qinv, mont_r2)
    of Q_k ∪ P, uint32 ``[k + K, 1]``. Static: ``n``, ``q`` (all L primes), ``p``, ``dnum``, ``active``
    (k), ``groups`` ((start, stop) of each active digit), ``mac_terms`` (digits per reduction).
    """

    up: DigitModUp
    ntt_q: NTTPlan
    ntt_p: NTTPlan
    down: ModDownPlan
    mac: tuple[np.ndarray, ...]
    n: int = _static()
    q: tuple[int, ...] = _static()
    p: tuple[int, ...] = _static()
    dnum: int = _static()
    active: int = _static()
    groups: tuple[tuple[int, int], ...] = _static()
    mac_terms: int = _static()


@plan_cache(maxsize=128, on_device=True)
def _create_plan(n: int, q: tuple[int, ...], p: tuple[int, ...], dnum: int, active: int, kernels) -> KeySwitchPlan:
    if not p:
        raise ParameterError("hybrid key switching needs at least one special prime (p is empty)")
    groups = digit_groups(len(q), dnum, active)
    if kernels is not None and kernels.native:  # a compact key's switch calls the native sampler: loaded (once per
        crandom.NATIVE.library()  # plan and process) before a program kept across processes runs it
    q_basis, p_basis = RNSBasis(q[:active]), RNSBasis(p)
    target = q_basis.concat(p_basis)
    t = target.table
    return KeySwitchPlan(
        up=DigitModUp.create(n, groups, q_basis, target, kernels, chain=q + p),
        ntt_q=level_ntt_plan(n, q_basis.moduli, q + p, kernels),
        ntt_p=level_ntt_plan(n, p, q + p, kernels),
        down=ModDownPlan.create(q_basis, p_basis, exact=True, kernels=kernels),
        mac=(t.q, t.barrett_mu, t.bits, t.mont_qinv, t.mont_r2),
        n=n,
        q=q,
        p=p,
        dnum=dnum,
        active=active,
        groups=groups,
        mac_terms=min(Modulus.create(m).mac_max_terms for m in target.moduli),
    )


def keyswitch_plan(
    params_like, *, active: int | None = None, dnum: int | None = None, kernels=None
) -> KeySwitchPlan:
    """The cached :class:`KeySwitchPlan` of the ring (n, q, p) of ``params_like`` at ``active`` limbs
    (default all L). ``params_like`` may be a :class:`KeySwitchKey` (its dnum is the default) or any
    object with n, q, p (and dnum, or pass ``dnum``). ``kernels``: the kernel set (default: that of
    ``params_like`` if it has one, else VECTOR)."""
    n, q, p = ring_of(params_like)
    dnum = _dnum_of(params_like, dnum)
    active = len(q) if active is None else int(active)
    kernels = getattr(params_like, "kernels", None) if kernels is None else kernels
    if kernels is not None:
        kernels = kernels.resolve()
    return _create_plan(n, q, p, dnum, active, kernels)


# --------------------------------------------------------------------------------------------------
# Key switching
# --------------------------------------------------------------------------------------------------


def _check_operands(d, ksk, plan: KeySwitchPlan) -> None:
    if not isinstance(d, RNSPoly):
        raise TypeError(f"keyswitch takes an RNSPoly d, got {type(d).__name__}")
    if not isinstance(ksk, KeySwitchKey) or not isinstance(plan, KeySwitchPlan):
        raise TypeError(
            f"keyswitch takes a KeySwitchKey and a KeySwitchPlan, got {type(ksk).__name__}, {type(plan).__name__}"
        )
    if (ksk.n, ksk.q, ksk.p, ksk.dnum) != (plan.n, plan.q, plan.p, plan.dnum):
        raise BasisMismatchError(
            f"key (N = {ksk.n}, q = {ksk.q}, p = {ksk.p}, dnum = {ksk.dnum}) and plan (N = {plan.n}, "
            f"q = {plan.q}, p = {plan.p}, dnum = {plan.dnum}) are for different rings or digit splits"
        )
    q_active = plan.q[: plan.active]
    if d.n != plan.n or d.basis != q_active:
        raise BasisMismatchError(
            f"keyswitch: d (N = {d.n}, moduli {d.basis}) does not match the plan's level (N = {plan.n}, "
            f"{plan.active} active limbs {q_active}); use keyswitch_plan(..., active={d.limbs}) for a "
            "prefix of the key's q"
        )


def _convert_digits(x, up: DigitModUp):
    """Conv_{D_j -> Q_k ∪ P \\ D_j} of every digit (fast basis conversion, CROSS §3.1.2), batched over digits.

    x: uint32 ``[..., k, N]``, coefficients mod Q_k. Returns ``[..., sum_j |targets_j|, N]``: the targets of
    digit 0, then digit 1, ...; the same words as the centered ``fast_basis_conversion`` of each digit.
    """
    n_digits, alpha = up.src_q.shape[:2]
    pad = n_digits * alpha - x.shape[-2]
    if pad:
        x = jnp.pad(x, [(0, 0)] * (x.ndim - 2) + [(0, pad), (0, 0)])
    x = x.reshape(x.shape[:-2] + (n_digits, alpha, x.shape[-1]))
    y = shoup_mul(x, up.hat_inv, up.hat_inv_shoup, up.src_q)  # [..., digits, alpha, N]
    if up.native is not None:  # the NATIVE set (the same words)
        z = conv.convert_centered(y, up.native)  # [..., digits, m, N]
    elif up.kernels is not None:  # both kernels sum the centered digits (y_i > q_i / 2 as y_i - q_i)
        z = up.kernels.convert_centered(y, up.src_q, up.matrix)  # [..., digits, m, N]
    else:
        z = centered_gemm_rows(y, up.src_half, up.src_q, up.gemm, up.dst[0], chunk=up.chunk)  # [..., digits, m, N]
    z = z.reshape(z.shape[:-3] + (-1, z.shape[-1]))  # [..., digits * m, N]
    return z if up.rows is None else jnp.take(z, np.array(up.rows, dtype=np.int32), axis=-2)


def _mod_up_eval(d_coeff, d_eval, plan: KeySwitchPlan):
    """NTT(ModUp(d_j)) of every digit, as its two parts (z, d_eval): only the new limbs are transformed (z, one NTT
    call for all digits), a digit's own limbs are the input's evaluations. Row ``plan.up.assemble[j][l]`` of z's rows
    followed by d_eval's is digit j's limb l (:func:`_assembled`)."""
    return ntt(transform_operand(_convert_digits(d_coeff, plan.up), plan.up.ntt), plan.up.ntt), d_eval


def _assembled(parts, plan: KeySwitchPlan):
    """uint32 ``[..., digits, k + K, N]``: the ModUp digits of :func:`_mod_up_eval`'s parts, assembled."""
    rows = jnp.concatenate(parts, axis=-2)
    return jnp.take(rows, np.array(plan.up.assemble, dtype=np.int32), axis=-2)


def _mac_digits(y, key, plan: KeySwitchPlan, rows: slice = slice(None)):
    """sum_j y_j key_j mod each modulus; y ``[..., digits, l, N]``, key ``[..., digits, l, N]``, axis -3;
    ``rows``: which of Q_k ∪ P's limbs the l rows are (the reduction constants' rows).

    The products of a run of ``plan.mac_terms`` digits are summed in a two-word accumulator, unrolled
    into one elementwise fusion, and reduced once (``mac_reduce``'s bound); runs are added mod q. Measured
    at N 2^16 ([3, 59] limbs times a [2, 3, 59] key, one CPU): 31-32 ms unrolled against 70-73 ms for
    ``mac_reduce`` along the digit axis (an XLA reduction)."""
    n_digits = y.shape[-3]
    out = None
    for start in range(0, n_digits, plan.mac_terms):
        hi = lo = None
        for j in range(start, min(start + plan.mac_terms, n_digits)):
            h, l_ = mul_wide(y[..., j, :, :], key[..., j, :, :])
            hi, lo = (h, l_) if hi is None else add_wide(hi, lo, h, l_)
        mac = [t[rows] for t in plan.mac]
        part = reduce_u64(hi, lo, *mac)
        out = part if out is None else add_mod(out, part, mac[0])
    return out


def mod_down_eval(c, down: ModDownPlan, ntt_q: NTTPlan, ntt_p: NTTPlan, e=None):
    """ModDown of c ``[..., k + K, N]`` (EVAL over Q_k ∪ P) to EVAL over Q_k: (c_Q - NTT(Conv~([c]_P))) P^-1.

    With ``down`` centered (``ModDownPlan.create(..., centered=True)``) the result is round(c / P) - alpha,
    alpha of mean 0 and |alpha| <= K/2 + 1: no bias. A floor would bias every coefficient by about -1/2 -
    alpha, and a key-dependent multiple of s through c1, which the slots see amplified by |sum_j zeta^j|
    (up to about N / pi): 4 bits of precision at N 2^14. With ``exact=True`` (what key switching and
    encryption use) alpha is removed as well (HPS, float32 estimate): round(c / P), off by one at most
    near half-integers. Through c1 the term alpha s has K times the spread of the rounding alone: with
    K = 14 special primes at N 2^16 fresh ciphertexts lost 2 bits to SEAL (one special prime, no alpha).
    Only P's limbs are transformed; the same words as NTT(mod_down(INTT(c))).

    ``e``: optional ``[..., k + K, N]`` residues in [0, q_i) of a polynomial in the COEFFICIENT domain added
    to c first (an encryption's noise): by linearity it joins the P limbs after their inverse transform and
    leaves the Q limbs inside the one forward transform, so it costs no transform of its own. The same
    words as ModDown of c + NTT(e).
    """
    k = c.shape[-2] - ntt_p.limbs
    return mod_down_split(c[..., :k, :], c[..., k:, :], down, ntt_q, ntt_p, e=e)


def mod_down_split(cq, cp, down: ModDownPlan, ntt_q: NTTPlan, ntt_p: NTTPlan, e=None):
    """:func:`mod_down_eval` of c given as its Q_k limbs cq ``[..., k, N]`` and its P limbs cp ``[..., K, N]``
    (the key switch's products are made that way, so that they are never joined). Same words."""
    k = cq.shape[-2]
    cp = intt(transform_operand(cp, ntt_p), ntt_p)
    if e is None:
        z = fast_basis_conversion(cp, down.conv)
    else:
        cp = add_mod(cp, e[..., k:, :], ntt_p.q)
        z = sub_mod(fast_basis_conversion(cp, down.conv), e[..., :k, :], down.q)
    z = ntt(transform_operand(z, ntt_q), ntt_q)
    return shoup_mul(sub_mod(cq, z, down.q), down.p_inv, down.p_inv_shoup, down.q)


def _both_domains(d: RNSPoly, plan: KeySwitchPlan):
    """(EVAL, COEFF) words of d over Q_k: one transform from whichever domain d is in."""
    if d.domain == Domain.EVAL:
        return d.data, intt(d.data, plan.ntt_q)
    return ntt(d.data, plan.ntt_q), d.data


def _key_a(ksk: KeySwitchKey, plan: KeySwitchPlan, n_digits: int):
    """The rows of a that a key switch at the plan's level reads: (Q_k's ``[digits, k, N]``, P's ``[digits, K,
    N]``), sliced from a or, for a compact key, made from its seed (:func:`_seeded_a`)."""
    k, n_q = plan.active, len(plan.q)
    if ksk.a is not None:
        return ksk.a.data[:n_digits, :k, :], ksk.a.data[:n_digits, n_q:, :]
    a = _seeded_a(ksk, plan, n_digits)
    return a[:, :k, :], a[:, k:, :]


def _seeded_a(ksk: KeySwitchKey, plan: KeySwitchPlan, n_digits: int):
    """uint32 ``[digits, k + K, N]``: a compact key's a at the plan's level (Q_k's limbs, then P's), made from its
    seed: the native sampler's rows on the NATIVE set, else a full expansion and its rows."""
    k, n_q = plan.active, len(plan.q)
    moduli = ksk.q + ksk.p
    rows = tuple(range(k)) + tuple(range(n_q, len(moduli)))
    kernels = plan.ntt_q.kernels
    if kernels is not None and kernels.native and plan.n % 256 == 0:
        seeds = jax.vmap(lambda j: crandom.fold_in(ksk.seed, j))(jnp.arange(n_digits, dtype=jnp.uint32))
        return crandom.uniform_mod_native_rows(seeds, moduli, rows, plan.n)
    return jnp.take(_expand_a_traced(ksk.seed, moduli, plan.n, n_digits), np.array(rows, dtype=np.int32), axis=1)


def _switch_digits(parts, ksk: KeySwitchKey, plan: KeySwitchPlan):
    """ModDown(sum_j y_j (b_j, a_j)): the switched pair ``[..., 2, k, N]`` from the ModUp digits y ``[..., digits,
    k + K, N]`` (given as :func:`_mod_up_eval`'s parts). On NATIVE one custom call reads the parts and the key in
    place (``native_mac_digits``, the same words). Else the products are summed from slices of the assembled y and
    the key, Q_k's limbs apart from P's, so that neither the key nor the products are copied (a stacked key was a
    93 MB copy per call at N 2^16)."""
    k, n_digits, n_q = plan.active, len(plan.groups), len(plan.q)
    kernels = plan.ntt_q.kernels
    if kernels is not None and kernels.resolve().native:
        b_rows = np.r_[0:k, n_q : n_q + len(plan.p)].astype(np.int32)
        if ksk.a is not None:
            a, a_rows = ksk.a.data, b_rows
        else:
            a = _seeded_a(ksk, plan, n_digits)
            a_rows = np.arange(a.shape[-2], dtype=np.int32)
        u = native_mac_digits(*parts, plan.up.assemble, ksk.b.data, a, b_rows, a_rows, plan.mac[0].reshape(-1))
        return mod_down_split(u[..., :k, :], u[..., k:, :], plan.down, plan.ntt_q, plan.ntt_p)
    y = _assembled(parts, plan)
    a_rows = _key_a(ksk, plan, n_digits)
    halves = []
    for rows, key_rows, a in ((slice(0, k), slice(0, k), a_rows[0]), (slice(k, None), slice(n_q, None), a_rows[1])):
        keys = (ksk.b.data[:n_digits, key_rows, :], a)
        halves.append(jnp.stack([_mac_digits(y[..., rows, :], key, plan, rows) for key in keys], axis=-3))
    return mod_down_split(*halves, plan.down, plan.ntt_q, plan.ntt_p)


@jit
def _keyswitch(d: RNSPoly, ksk: KeySwitchKey, plan: KeySwitchPlan):
    d_eval, d_coeff = _both_domains(d, plan)
    y = _mod_up_eval(d_coeff, d_eval, plan)  # the digits [..., digits, k + K, N], in two parts
    u = _switch_digits(y, ksk, plan)  # [..., 2, k, N]
    q_active = plan.q[: plan.active]
    return RNSPoly(u[..., 0, :, :], q_active, Domain.EVAL), RNSPoly(u[..., 1, :, :], q_active, Domain.EVAL)


def keyswitch(d: RNSPoly, ksk: KeySwitchKey, *, plan: KeySwitchPlan) -> tuple[RNSPoly, RNSPoly]:
    """Hybrid key switching of d s' to s: (u0, u1) with u0 + u1 s = d s' + e_ks (mod Q_k). One jitted kernel.

    d: RNSPoly ``uint32[..., k, N]`` over Q_k = q_0..q_{k-1} (a prefix of the key's q, k = ``plan.active``)
    in [0, q_i), EVAL or COEFF domain (leading axes are batch axes; or map with ``jax.vmap``). ksk: a
    :class:`KeySwitchKey` for s' -> s. plan: ``keyswitch_plan(ksk, active=k)``.
    Returns (u0, u1): RNSPoly ``uint32[..., k, N]`` over Q_k in [0, q_i), always EVAL; the same words
    for either input domain. ||e_ks||_inf (centered) <= :func:`keyswitch_noise_bound`. Raises
    BasisMismatchError at trace time when d, the key and the plan are not for the same ring, digits and level.
    Algorithm, MAC reduction and transform counts: module docstring.
    """
    _check_operands(d, ksk, plan)
    return _keyswitch(d, ksk, plan)


def slot_permutation(n: int, element):
    """Indices p' with out[p] = in[p'] for X -> X^element on EVAL-domain slots (the same for every prime).
    ``element``: an odd int or a traced uint32 scalar."""
    mask = jnp.uint32(2 * n - 1)
    return slot_of_exponent((slot_exponents(n, jnp) * jnp.uint32(element)) & mask, n).astype(jnp.int32)


def galois_permutation(plan: KeySwitchPlan, element):
    """:func:`slot_permutation` of ``plan.n`` for a traced ``element``, materialized once: fused into each
    gather that reads it, its index arithmetic runs per gathered word (a [45, 2^16] gather measured 22 ms
    against 8 ms)."""
    return fusion_barrier(slot_permutation(plan.n, element), plan.ntt_q.w)


def keyswitch_hoisted_traced(d: RNSPoly, ksks: tuple, plan: KeySwitchPlan, elements: tuple):
    """:func:`keyswitch_hoisted` as a traceable function (``elements``: a tuple of ints)."""
    d_eval, d_coeff = _both_domains(d, plan)
    y = _mod_up_eval(d_coeff, d_eval, plan)  # one ModUp for every element
    q_active = plan.q[: plan.active]
    out = []
    for ksk, g in zip(ksks, elements):
        _check_operands(d, ksk, plan)
        perm = slot_permutation(plan.n, g)
        if out:  # one element's permuted digits, key rows and products at a time (modular.after)
            dep = out[-1][1].data
            perm = after(perm, dep)
            if ksk.a is None:
                seed = dataclasses.replace(ksk.seed, words=after(ksk.seed.words, dep))
                ksk = dataclasses.replace(ksk, seed=seed)
        u = _switch_digits(tuple(permute_slots(part, perm, plan.ntt_q) for part in y), ksk, plan)
        out.append((RNSPoly(u[..., 0, :, :], q_active, Domain.EVAL), RNSPoly(u[..., 1, :, :], q_active, Domain.EVAL)))
    return out


def keyswitch_hoisted(d: RNSPoly, ksks, elements, *, plan: KeySwitchPlan) -> list[tuple[RNSPoly, RNSPoly]]:
    """Key switches of d(X^g) for several Galois elements g, sharing one ModUp of d (hoisting).

    An automorphism permutes EVAL-domain slots the same way for every prime, and the permuted ModUp
    digits sigma_g(X_j) are again congruent to sigma_g(d) mod D_j with the same norm, so they serve as
    the ModUp of sigma_g(d): the INTT and basis conversions of d are done once, and each element costs
    a permutation, the multiply-accumulate with its key, and a ModDown. ``ksks[t]`` switches from
    s(X^elements[t]) (a Galois key). Returns [(u0, u1)] with u0 + u1 s = d(X^g) s(X^g) + e_ks, each as
    :func:`keyswitch` (same noise bound).
    """
    elements = tuple(int(g) for g in elements)
    if len(ksks) != len(elements):
        raise ParameterError(f"{len(ksks)} keys for {len(elements)} Galois elements")
    return _keyswitch_hoisted(d, tuple(ksks), plan, elements)


_keyswitch_hoisted = partial(jit, static_argnames=("elements",))(keyswitch_hoisted_traced)


# --------------------------------------------------------------------------------------------------
# Noise
# --------------------------------------------------------------------------------------------------


def keyswitch_noise_bound(
    n: int,
    q_active,
    p,
    dnum: int,
    sigma: float = SIGMA,
    *,
    q_limbs: int | None = None,
    hamming_weight: int | None = None,
) -> int:
    """Worst-case bound on ||e_ks||_inf, e_ks = u0 + u1 s - d s' centered mod Q_k, for any d and ternary s.

    n: N. q_active: the k active primes. p: the special primes (P = prod p, K = len p). dnum, q_limbs: the
    key's digit split, made for L = ``q_limbs`` (default k) limbs, cut to k. hamming_weight: h, the number of
    nonzero coefficients of s (default N, any ternary s). With B = ceil(13 sigma) (the sampler's hard tail),
    |D_j| the number of limbs of digit j and X_j <= |D_j| D_j - sum_{i in j} D_j / q_i the largest ModUp
    coefficient (module docstring), products bounded by ||x y|| <= N ||x|| ||y|| and ||x s|| <= h ||x||:

        ||e_ks|| <= N B sum_j X_j / P  +  (1 + h)(P - 1) / P  +  (K - 1)(1 + h)

    (the key errors carried through ModDown; the ModDown remainder [c]_P / P for c0 + c1 s; the conversion
    overshoot beta0 + beta1 s, 0 <= beta < K). Returns the floor, an int. When P >= max D_j (the usual
    choice) X_j / P < |D_j|, so the bound is below N B k + K (1 + h). It is a worst case: on random
    inputs the error is a sum of independent terms and measures about its square root (tests: a few
    hundred at N = 2^10, against a bound near 2^17).
    """
    q_active, p = tuple(int(m) for m in q_active), tuple(int(m) for m in p)
    if not p:
        raise ParameterError("hybrid key switching needs at least one special prime (p is empty)")
    k = len(q_active)
    q_limbs = k if q_limbs is None else int(q_limbs)
    h = int(n) if hamming_weight is None else int(hamming_weight)
    big_p = math.prod(p)
    x_max = 0
    for start, stop in digit_groups(q_limbs, int(dnum), k):
        digit = q_active[start:stop]
        big_d = math.prod(digit)
        x_max += len(digit) * big_d - sum(big_d // m for m in digit)
    bound = Fraction(int(n) * gaussian_bound(sigma) * x_max, big_p)
    bound += Fraction((1 + h) * (big_p - 1), big_p) + (len(p) - 1) * (1 + h)
    return math.floor(bound)


__all__ = [
    "KeySwitchKey",
    "KeySwitchPlan",
    "compact",
    "level_ntt_plan",
    "expand",
    "digit_groups",
    "transform_counts",
    "expand_keyswitch_a",
    "KEY_BATCH_BYTES",
    "RELIN",
    "evaluation_key_batches",
    "gen_galois_key",
    "gen_galois_keys",
    "gen_keyswitch_key",
    "gen_relin_key",
    "keyswitch",
    "keyswitch_noise_bound",
    "keyswitch_plan",
]
