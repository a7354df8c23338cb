"""Secret and public keys of RLWE, and the samplers of the polynomials they are made of (all schemes).

A ring is given by any ``params_like`` object with ``n`` (ring degree N), ``q`` (ciphertext primes
q_0..q_{L-1}) and ``p`` (special primes p_0..p_{K-1}, possibly empty), e.g.
:class:`crossfhe.core.params.RingParams`. Keys are kept in the evaluation (EVAL) domain.

* :class:`SecretKey`: ternary s, as int32 coefficients and as EVAL residues over Q_L ∪ P.
* :class:`PublicKey`: (b, a) over Q_L ∪ P with b = -a s + e, a uniform from a seed the key keeps.
* :func:`sample_uniform`, :func:`sample_gaussian`, :func:`sample_ternary`: RNSPoly samplers from a
  :class:`~crossfhe.math.random.ChaChaKey` (ChaCha20, never ``jax.random``).

Noise: the Gaussian sampler is the CDT sampler of :func:`crossfhe.math.random.discrete_gaussian` with
tail cut ``GAUSSIAN_TAIL`` sigma, so every error coefficient satisfies |e| <= :func:`gaussian_bound`
(sigma) = ceil(13 sigma) (42 for sigma = 3.19), a worst-case bound the noise analyses use.

Reference: Lyubashevsky, Peikert, Regev, "On ideal lattices and learning with errors over rings", 2010
(RLWE public key); HomomorphicEncryption.org security standard, 2018 (ternary secret, sigma = 3.19).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from functools import partial

import jax
import numpy as np

from crossfhe.errors import BasisMismatchError, KeyMismatchError, ParameterError, SecretMaterialError
from crossfhe.math import random as crandom
from crossfhe.math.modular import fusion_barrier
from crossfhe.math.xla import jit
from crossfhe.ring.ntt import NTTPlan, ntt
from crossfhe.ring.poly import Domain, RNSPoly, add, mul, neg

SIGMA = 3.19
"""Standard deviation of the error distribution (HomomorphicEncryption.org standard)."""
GAUSSIAN_TAIL = 13.0
"""Tail cut of the Gaussian sampler in multiples of sigma: samples lie in [-ceil(13 sigma), ceil(13 sigma)]."""

_static = partial(field, metadata={"static": True})


# --------------------------------------------------------------------------------------------------
# Rings and bases
# --------------------------------------------------------------------------------------------------


def ring_of(params_like) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """(n, q, p) of a ``params_like`` (anything with attributes ``n``, ``q``, ``p``), as Python ints."""
    try:
        n, q, p = params_like.n, params_like.q, params_like.p
    except AttributeError:
        raise TypeError(
            f"expected ring parameters with attributes n, q, p (e.g. RingParams), got {type(params_like).__name__}"
        ) from None
    return int(n), tuple(int(m) for m in q), tuple(int(m) for m in p)


def moduli_of(basis) -> tuple[int, ...]:
    """The moduli of a basis given as an RNSBasis, an NTTPlan-like object with ``moduli``, or a sequence."""
    return tuple(int(m) for m in getattr(basis, "moduli", basis))


def _qcol(moduli: tuple[int, ...]) -> np.ndarray:
    return np.array(moduli, dtype=np.uint32).reshape(-1, 1)


def _plan_for(domain: Domain, n: int, moduli: tuple[int, ...], plan: NTTPlan | None) -> NTTPlan | None:
    """The NTT plan a sample in ``domain`` needs (EVAL: ``plan``, default the cached radix-2 plan), checked."""
    if domain == Domain.EVAL:
        plan = NTTPlan.create(n, moduli) if plan is None else plan
        if plan.moduli != moduli or plan.n != n:
            raise BasisMismatchError(f"NTT plan (N = {plan.n}, moduli {plan.moduli}) is not for N = {n}, {moduli}")
        return plan
    if domain != Domain.COEFF:
        raise TypeError(f"domain must be a Domain, got {domain!r}")
    return None


def _residues(x, key, moduli: tuple[int, ...], plan: NTTPlan | None):
    """Small integer coefficients x ``[..., 1, N]`` as residues mod every modulus, then NTT'd if ``plan``. x is
    materialized first: inside a larger program XLA:CPU fuses the sampler (the ChaCha20 stream, the CDT search)
    into the residues' broadcast over the limbs and runs it once per limb."""
    r = crandom.to_residues(fusion_barrier(x, key.words), _qcol(moduli))
    return r if plan is None else ntt(r, plan)


# --------------------------------------------------------------------------------------------------
# Samplers
# --------------------------------------------------------------------------------------------------


def gaussian_bound(sigma: float = SIGMA) -> int:
    """ceil(GAUSSIAN_TAIL sigma): the largest |e| :func:`sample_gaussian` can return (a hard bound)."""
    return math.ceil(GAUSSIAN_TAIL * float(sigma))


def sample_uniform(key, basis, n: int, *, domain: Domain = Domain.EVAL, batch: tuple[int, ...] = ()) -> RNSPoly:
    """A uniform polynomial of Z_Q[X]/(X^N + 1): RNSPoly ``uint32[*batch, limbs, N]`` in [0, q_i).

    Each residue is :func:`~crossfhe.math.random.uniform_mod` of its own modulus (one call, key ``key``),
    which is uniform mod Q by the CRT. Uniform coefficients have uniform evaluations (the NTT is a
    bijection), so the values are drawn directly in ``domain`` and no transform runs: the same key gives
    the same words in either domain. Deterministic in ``key`` (a seeded ``a`` is re-expanded with it).
    """
    moduli = moduli_of(basis)
    data = crandom.uniform_mod(key, tuple(batch) + (len(moduli), int(n)), _qcol(moduli))
    return RNSPoly.create(data, moduli, domain)


def sample_gaussian(
    key,
    basis,
    n: int,
    sigma: float = SIGMA,
    *,
    domain: Domain = Domain.COEFF,
    batch: tuple[int, ...] = (),
    plan: NTTPlan | None = None,
) -> RNSPoly:
    """A polynomial with discrete Gaussian coefficients D_{Z,sigma}, |e_i| <= gaussian_bound(sigma).

    Coefficients: int32 ``[*batch, N]`` from :func:`~crossfhe.math.random.discrete_gaussian` (tail
    ``GAUSSIAN_TAIL`` sigma), reduced mod every q_i of ``basis``. Returns RNSPoly ``uint32[*batch, limbs, N]``
    in [0, q_i), in ``domain``; EVAL applies the forward NTT of ``plan`` (default: the cached plan of
    (N, basis); pass one explicitly when calling inside a jitted function).
    """
    moduli = moduli_of(basis)
    plan = _plan_for(domain, int(n), moduli, plan)
    data = _k_gaussian(key, plan, moduli=moduli, n=int(n), sigma=float(sigma), batch=tuple(batch))
    return RNSPoly.create(data, moduli, domain)


@partial(jit, persist=True, static_argnames=("moduli", "n", "sigma", "batch"))
def _k_gaussian(key, plan, *, moduli, n, sigma, batch):
    e = crandom.discrete_gaussian(key, batch + (1, n), sigma, tail=GAUSSIAN_TAIL)
    return _residues(e, key, moduli, plan)


def ternary_coeffs(key, n: int, *, hamming_weight: int | None = None, batch: tuple[int, ...] = ()):
    """int32 ``[*batch, N]`` in {-1, 0, 1}: uniform ternary, or exactly ``hamming_weight`` nonzero entries
    (uniform support and signs; :func:`~crossfhe.math.random.ternary_hamming`)."""
    if hamming_weight is None:
        return crandom.ternary(key, tuple(batch) + (int(n),))
    return crandom.ternary_hamming(key, tuple(batch), int(n), int(hamming_weight))


def sample_ternary(
    key,
    basis,
    n: int,
    *,
    hamming_weight: int | None = None,
    domain: Domain = Domain.COEFF,
    batch: tuple[int, ...] = (),
    plan: NTTPlan | None = None,
) -> RNSPoly:
    """A ternary polynomial (coefficients of :func:`ternary_coeffs`) as RNSPoly ``uint32[*batch, limbs, N]``
    in [0, q_i), in ``domain`` (EVAL through ``plan`` as in :func:`sample_gaussian`)."""
    moduli = moduli_of(basis)
    plan = _plan_for(domain, int(n), moduli, plan)
    hw = None if hamming_weight is None else int(hamming_weight)
    data = _k_ternary(key, plan, moduli=moduli, n=int(n), hamming_weight=hw, batch=tuple(batch))
    return RNSPoly.create(data, moduli, domain)


@partial(jit, persist=True, static_argnames=("moduli", "n", "hamming_weight", "batch"))
def _k_ternary(key, plan, *, moduli, n, hamming_weight, batch):
    s = ternary_coeffs(key, n, hamming_weight=hamming_weight, batch=batch)
    return _residues(s[..., None, :], key, moduli, plan)


# --------------------------------------------------------------------------------------------------
# Secret key
# --------------------------------------------------------------------------------------------------


class SecretHolder:
    """Mixin of the immutable objects that hold a secret key: pickling raises SecretMaterialError (naming
    ``SAVE_WITH``, the explicit way to store it), and copies are the object itself, so a secret key never
    leaves the process by accident (multiprocessing, Ray, a cache) and never goes through pickle."""

    SAVE_WITH = "crossfhe.io's save_secret_key"

    def __reduce__(self):
        raise SecretMaterialError(
            f"refusing to pickle a {type(self).__name__}: it holds the secret key, and whoever holds the bytes can "
            f"decrypt everything encrypted under it. Save it explicitly with {self.SAVE_WITH}; to hand work to "
            "another process or a server, send public material only (a public context, evaluation keys, "
            "ciphertexts: crossfhe.io.dumps)"
        )

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


def residues_of(s: RNSPoly, moduli) -> RNSPoly:
    """A key polynomial s (EVAL) over a sub-basis of its moduli, in the order given; traceable."""
    moduli = moduli_of(moduli)
    where = {m: i for i, m in enumerate(s.basis)}
    missing = [m for m in moduli if m not in where]
    if missing:
        raise BasisMismatchError(f"the secret key has no residues mod {missing} (its moduli: {s.basis})")
    idx = [where[m] for m in moduli]
    if idx == list(range(idx[0], idx[0] + len(idx))):
        data = s.data[..., idx[0] : idx[0] + len(idx), :]
    else:
        data = s.data[..., np.array(idx), :]
    return RNSPoly(data, moduli, Domain.EVAL)


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False, repr=False)
class SecretKey(SecretHolder):
    """A ternary secret s in Z[X]/(X^N + 1): a pytree.

    ``coeffs``: int32[N] in {-1, 0, 1}. ``poly``: RNSPoly ``uint32[L + K, N]``, the EVAL-domain residues of s
    over Q_L ∪ P (q limbs first, then p limbs, the order of ``RingParams.moduli``). Static: ``q``, ``p``
    (the moduli), ``hamming_weight`` (None for a uniform ternary secret) and ``key_id`` (the
    :func:`key_id` of its public key, None if made without one). The repr never shows s, and pickling is
    refused (:class:`~crossfhe.errors.SecretMaterialError`): a secret key leaves the process only through
    ``crossfhe.io.save_secret_key`` / ``dumps_secret_key``.
    """

    coeffs: jax.Array
    poly: RNSPoly
    q: tuple[int, ...] = _static()
    p: tuple[int, ...] = _static()
    hamming_weight: int | None = _static()
    key_id: str | None = _static(default=None)

    SAVE_WITH = "crossfhe.io.save_secret_key(sk, path, params=...)"

    @property
    def n(self) -> int:
        return self.poly.n

    def residues(self, moduli) -> RNSPoly:
        """s over a sub-basis of Q_L ∪ P (any moduli of the key, in the order given), EVAL domain."""
        return residues_of(self.poly, moduli)

    def __repr__(self) -> str:
        return f"SecretKey(n={self.n}, q limbs={len(self.q)}, p limbs={len(self.p)}, key id={self.key_id})"


def key_plan(params_like, n: int, moduli: tuple[int, ...]) -> NTTPlan:
    """The NTT plan key generation uses for (N, moduli): on the kernel set of ``params_like`` (its ``kernels``,
    AUTO resolved; VECTOR when it has none). Every kernel set gives the same words."""
    kernels = getattr(params_like, "kernels", None)
    return NTTPlan.create(n, moduli, None if kernels is None else kernels.resolve())


def eval_residues(coeffs, moduli: tuple[int, ...], plan: NTTPlan):
    """uint32 ``[..., limbs, N]``: the EVAL residues over ``moduli`` of small signed coefficients int32
    ``[..., N]`` (a secret): ``NTT(coeffs mod q_i)`` with ``plan``. Exact; traceable."""
    return ntt(crandom.to_residues(coeffs[..., None, :], _qcol(moduli)), plan)


def _secret_traced(key, plan, moduli, n, hamming_weight):
    s = ternary_coeffs(key, n, hamming_weight=hamming_weight)
    return s, eval_residues(s, moduli, plan)


@partial(jit, persist=True, static_argnames=("moduli", "n", "hamming_weight"))
def _k_secret(key, plan, *, moduli, n, hamming_weight):
    return _secret_traced(key, plan, moduli, n, hamming_weight)


def _secret_args(params_like, hamming_weight):
    n, q, p = ring_of(params_like)
    if hamming_weight is not None and not 1 <= int(hamming_weight) <= n:
        raise ParameterError(f"hamming_weight must be in [1, N = {n}], got {hamming_weight}")
    h = None if hamming_weight is None else int(hamming_weight)
    return n, q, p, h


def gen_secret_key(params_like, key, *, hamming_weight: int | None = None) -> SecretKey:
    """A fresh secret key for the ring (n, q, p) of ``params_like``, from a ChaChaKey (one program).

    s is uniform ternary (the distribution of the security table), or, with ``hamming_weight`` h, has
    exactly h coefficients ±1 (:func:`ternary_coeffs` of ``key``). Returns :class:`SecretKey` with s's EVAL
    residues over Q_L ∪ P (:func:`eval_residues`).
    """
    n, q, p, h = _secret_args(params_like, hamming_weight)
    moduli = q + p
    s, data = _k_secret(key, key_plan(params_like, n, moduli), moduli=moduli, n=n, hamming_weight=h)
    return SecretKey(coeffs=s, poly=RNSPoly(data, moduli, Domain.EVAL), q=q, p=p, hamming_weight=h)


def check_secret_key(sk: SecretKey, params_like) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """(n, q, p) of ``params_like`` after checking that ``sk`` was made for that ring."""
    if not isinstance(sk, SecretKey):
        raise TypeError(f"expected a SecretKey, got {type(sk).__name__}")
    n, q, p = ring_of(params_like)
    if (sk.n, sk.q, sk.p) != (n, q, p):
        raise BasisMismatchError(
            f"secret key is for N = {sk.n}, q = {sk.q}, p = {sk.p}; the parameters are N = {n}, q = {q}, p = {p}"
        )
    return n, q, p


# --------------------------------------------------------------------------------------------------
# Public key
# --------------------------------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False, repr=False)
class PublicKey:
    """An RLWE encryption of zero under s: a pytree.

    ``b``, ``a``: RNSPoly ``uint32[L + K, N]`` over Q_L ∪ P (q limbs, then p limbs), EVAL domain, with
    b + a s = e (mod Q_L P), e discrete Gaussian (|e| <= gaussian_bound(sigma)). Over Q P so that
    encryption can divide its noise by P (:func:`crossfhe.core.rlwe.encrypt_pk`), as SEAL does.
    ``seed``: the ChaChaKey ``a`` was expanded from, ``a = sample_uniform(seed, q + p, N, domain=EVAL)``,
    so a serializer may store ``seed`` instead of ``a`` (the seed is public). Static: ``sigma`` and
    ``key_id`` (:func:`key_id` of ``b``; ciphertexts encrypted under this key pair carry it).
    """

    b: RNSPoly
    a: RNSPoly
    seed: crandom.ChaChaKey
    sigma: float = _static()
    key_id: str | None = _static(default=None)

    @property
    def n(self) -> int:
        return self.b.n

    @property
    def q(self) -> tuple[int, ...]:
        return self.b.basis

    def __repr__(self) -> str:
        return f"PublicKey(n={self.n}, q limbs={len(self.q)}, sigma={self.sigma}, key id={self.key_id})"


@jit
def _rlwe_b(a: RNSPoly, e: RNSPoly, s: RNSPoly) -> RNSPoly:
    """b = -a s + e (EVAL domain, same basis)."""
    return add(neg(mul(a, s)), e)


def _public_traced(key, s, plan, moduli, n, sigma):
    seed, key_e = crandom.split(key)
    a = sample_uniform(seed, moduli, n, domain=Domain.EVAL)
    e = sample_gaussian(key_e, moduli, n, sigma, domain=Domain.EVAL, plan=plan)
    return _rlwe_b(a, e, RNSPoly(s, moduli, Domain.EVAL)).data, a.data, seed


@partial(jit, persist=True, static_argnames=("moduli", "n", "sigma"))
def _k_public(key, s, plan, *, moduli, n, sigma):
    return _public_traced(key, s, plan, moduli, n, sigma)


def _public_key(b, a, seed, moduli, sigma) -> PublicKey:
    b = RNSPoly(b, moduli, Domain.EVAL)
    return PublicKey(b=b, a=RNSPoly(a, moduli, Domain.EVAL), seed=seed, sigma=float(sigma), key_id=key_id(b))


def gen_public_key(sk: SecretKey, params_like, key, *, sigma: float = SIGMA) -> PublicKey:
    """(b, a) = (-a s + e, a) over Q_L ∪ P, EVAL domain, one program; a from ``split(key)[0]`` (kept as the
    seed), e from ``split(key)[1]``. Raises BasisMismatchError if ``sk`` is for another ring."""
    n, q, p = check_secret_key(sk, params_like)
    moduli = q + p
    b, a, seed = _k_public(key, sk.poly.data, key_plan(params_like, n, moduli), moduli=moduli, n=n, sigma=float(sigma))
    return _public_key(b, a, seed, moduli, sigma)


def key_id(public) -> str:
    """The identifier of a key pair: the first 128 bits (hex) of SHA-256 over public words that depend on
    the secret, the public key's ``b`` (an RNSPoly; RLWE schemes) or the body row of TFHE's key-switching
    key (an array), as little-endian 32-bit words. Public (computed from public data) and, with overwhelming
    probability, different for different secrets. Must be concrete (not traced)."""
    words = np.ascontiguousarray(np.asarray(getattr(public, "data", public)))
    if words.dtype.itemsize != 4:
        raise TypeError(f"key_id hashes 32-bit words, got dtype {words.dtype}")
    data = words.astype(words.dtype.newbyteorder("<")).tobytes()
    return hashlib.sha256(b"crossfhe.key_id/v1:" + data).hexdigest()[:32]


@partial(jit, persist=True, static_argnames=("moduli", "n", "hamming_weight", "sigma"))
def _k_key_pair(key_s, key_p, plan, *, moduli, n, hamming_weight, sigma):
    s, s_eval = _secret_traced(key_s, plan, moduli, n, hamming_weight)
    return s, s_eval, _public_traced(key_p, s_eval, plan, moduli, n, sigma)


def gen_key_pair(params_like, rng: crandom.Rng, *, hamming_weight: int | None = None, sigma: float = SIGMA):
    """(SecretKey, PublicKey) for the ring of ``params_like``, from the next two keys of ``rng`` (the
    secret's, as :func:`gen_secret_key`, then the public key's, as :func:`gen_public_key`: the same words),
    in one program; the secret bound to the public key's :func:`key_id`."""
    n, q, p, h = _secret_args(params_like, hamming_weight)
    moduli = q + p
    key_s, key_p = rng.next_key(), rng.next_key()
    s, s_eval, (b, a, seed) = _k_key_pair(
        key_s, key_p, key_plan(params_like, n, moduli), moduli=moduli, n=n, hamming_weight=h, sigma=float(sigma)
    )
    pk = _public_key(b, a, seed, moduli, sigma)
    sk = SecretKey(coeffs=s, poly=RNSPoly(s_eval, moduli, Domain.EVAL), q=q, p=p, hamming_weight=h, key_id=pk.key_id)
    return sk, pk


def check_key_ids(what: str, *ids: str | None) -> str | None:
    """The key id the operands of ``what`` share (None if none is known). Raises KeyMismatchError if two of
    the known (not None) ids differ: the operands were made under different key pairs, and combining them
    would decrypt to noise."""
    known = sorted({i for i in ids if i is not None})
    if len(known) > 1:
        raise KeyMismatchError(
            f"{what}: the operands belong to different key pairs (key ids {', '.join(known)}): ciphertexts "
            "and keys of one context cannot be combined with another's. Encrypt them under one context, or "
            "decrypt with the secret key of the context that encrypted them"
        )
    return known[0] if known else None


__all__ = [
    "GAUSSIAN_TAIL",
    "SIGMA",
    "PublicKey",
    "SecretHolder",
    "SecretKey",
    "check_key_ids",
    "check_secret_key",
    "eval_residues",
    "gaussian_bound",
    "gen_key_pair",
    "gen_public_key",
    "gen_secret_key",
    "key_id",
    "key_plan",
    "moduli_of",
    "ring_of",
    "sample_gaussian",
    "sample_ternary",
    "sample_uniform",
    "ternary_coeffs",
]
