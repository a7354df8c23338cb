"""RLWE encryption and decryption, shared by the schemes (CKKS scales the message, BFV multiplies by Q/t).

A ciphertext is a tuple of RNSPoly (c0, c1[, c2]) in the EVAL domain over the same basis, a prefix
q_0..q_{k-1} of the key's ciphertext primes; its phase is c0 + c1 s (+ c2 s^2) = m + e (mod Q_k).

* :func:`encrypt_sk`: (c0, c1) = (-a s + e + m, a), a uniform, e discrete Gaussian. Fresh noise |e| <= B_e
  = ceil(GAUSSIAN_TAIL sigma) per coefficient.
* :func:`encrypt_pk`: (c0', c1') = (v b + e0, v a + e1) over Q_k ∪ P, v ternary, (b, a) the public key
  over Q_L ∪ P; then ModDown to Q_k (divide by P) and add m. The phase is m + (v e + e0 + e1 s) / P plus the
  ModDown remainder: coefficients of order (1 + N) rather than N B_e (SEAL's encryption does the same).
* :func:`decrypt`: the phase, EVAL domain.

:func:`fresh_noise_bound` bounds the phase error of both encryptions: (2N + 1) B_e, B_e = ceil(13 sigma).
For :func:`encrypt_sk` the error is e itself (<= B_e). For :func:`encrypt_pk` it is
(v e + e0 + e1 s) / P plus the ModDown rounding r0 + r1 s (|r_i| <= 1/2), at most (2N + 1) B_e / P + (1 + N) / 2
<= (2N + 1) B_e, as ||v||_1, ||s||_1 <= N.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from crossfhe.core.keys import (
    SIGMA,
    PublicKey,
    SecretKey,
    gaussian_bound,
    sample_gaussian,
    sample_ternary,
    sample_uniform,
)
from crossfhe.core.keyswitch import mod_down_eval
from crossfhe.errors import BasisMismatchError, DomainMismatchError
from crossfhe.math import random as crandom
from crossfhe.math.modular import add_mod
from crossfhe.math.rns import ModDownPlan, RNSBasis
from crossfhe.math.xla import jit, plan_cache
from crossfhe.ring.ntt import NTTPlan
from crossfhe.ring.poly import Domain, RNSPoly, add, mul, neg


def fresh_noise_bound(n: int, sigma: float = SIGMA) -> int:
    """(2N + 1) ceil(13 sigma): a bound on every coefficient of the phase error of a fresh :func:`encrypt_pk` or
    :func:`encrypt_sk` encryption (module docstring). A message coefficient plus this bound must stay
    below Q/2 for the encryption to decrypt with the right sign."""
    return (2 * int(n) + 1) * gaussian_bound(sigma)


def _check_message(m: RNSPoly, q: tuple[int, ...]) -> None:
    if not isinstance(m, RNSPoly):
        raise TypeError(f"the message must be an RNSPoly, got {type(m).__name__}")
    if m.domain != Domain.EVAL:
        raise DomainMismatchError("RLWE encryption takes the message in the EVAL domain")
    if m.basis != q[: m.limbs]:
        raise BasisMismatchError(
            f"the message's moduli {m.basis} are not a prefix of the key's ciphertext primes {q}"
        )


def _prefix(poly: RNSPoly, k: int) -> RNSPoly:
    return RNSPoly(poly.data[..., :k, :], poly.basis[:k], poly.domain)


def encrypt_sk(sk: SecretKey, m: RNSPoly, key: crandom.ChaChaKey, *, sigma: float = SIGMA, kernels=None):
    """(c0, c1) = (-a s + e + m, a) over m's basis (a prefix of the key's q), EVAL domain.

    m: RNSPoly EVAL, uint32[..., k, N] (leading axes batch). ``key``: a ChaChaKey, used once. ``kernels``:
    the kernel set of the error's NTT (:mod:`crossfhe.kernels`; default VECTOR), the same words either way.
    """
    _check_message(m, sk.q)
    n, moduli = m.n, m.basis
    batch = m.data.shape[:-2]
    key_a, key_e = crandom.split(key)
    plan = NTTPlan.create(n, moduli, kernels)
    a = sample_uniform(key_a, moduli, n, domain=Domain.EVAL, batch=batch)
    e = sample_gaussian(key_e, moduli, n, sigma, domain=Domain.EVAL, batch=batch, plan=plan)
    c0 = add(add(neg(mul(a, sk.residues(moduli))), e), m)
    return c0, a


@plan_cache(maxsize=64)
def _down_tables(n: int, q: tuple[int, ...], p: tuple[int, ...], kernels):
    down = ModDownPlan.create(RNSBasis(q), RNSBasis(p), exact=True, kernels=kernels)
    return down, NTTPlan.create(n, q, kernels), NTTPlan.create(n, p, kernels)


@jit
def _k_encrypt_pk(pk_b, pk_a, v, e, m, down: ModDownPlan, ntt_q: NTTPlan, ntt_p: NTTPlan):
    """ModDown(v (b, a) + (e0, e1)) + (m, 0); v, b, a EVAL over Q_k ∪ P ``[..., k + K, N]``, e = (e0, e1)
    COEFF ``[..., 2, k + K, N]`` (added inside ModDown, no transform of their own), m EVAL over Q_k."""
    masked = jnp.stack([mul(v, pk_b).data, mul(v, pk_a).data], axis=-3)  # [..., 2, k + K, N]
    c = mod_down_eval(masked, down, ntt_q, ntt_p, e=e)
    return add_mod(c[..., 0, :, :], m, ntt_q.q), c[..., 1, :, :]


def encrypt_pk(
    pk: PublicKey, m: RNSPoly, key: crandom.ChaChaKey, *, sigma: float = SIGMA, p: tuple[int, ...], kernels=None
):
    """(c0, c1) = ModDown(v b + e0, v a + e1) + (m, 0) over m's basis Q_k, EVAL domain; v uniform ternary.

    m: RNSPoly EVAL over a prefix Q_k of the key's ciphertext primes, uint32[..., k, N]. ``p``: the special
    primes (the last limbs of the public key). ``key``: used once. v is transformed once; e0 and e1 enter
    ModDown in the coefficient domain (:func:`~crossfhe.core.keyswitch.mod_down_eval`), one jitted kernel.
    ``kernels``: the kernel set of its NTTs and ModDown (default VECTOR), the same words either way.
    """
    _check_message(m, pk.q)
    n, q_k, k = m.n, m.basis, m.limbs
    if pk.q[-len(p) :] != tuple(p):
        raise BasisMismatchError(f"the public key's last limbs {pk.q[-len(p):]} are not the special primes {p}")
    moduli = q_k + tuple(p)
    idx = list(range(k)) + list(range(len(pk.q) - len(p), len(pk.q)))
    b = RNSPoly(pk.b.data[..., np.array(idx), :], moduli, Domain.EVAL)
    a = RNSPoly(pk.a.data[..., np.array(idx), :], moduli, Domain.EVAL)
    batch = m.data.shape[:-2]
    key_v, key_e0, key_e1 = crandom.split(key, 3)
    plan = NTTPlan.create(n, moduli, kernels)
    v = sample_ternary(key_v, moduli, n, domain=Domain.EVAL, batch=batch, plan=plan)
    e0 = sample_gaussian(key_e0, moduli, n, sigma, domain=Domain.COEFF, batch=batch)
    e1 = sample_gaussian(key_e1, moduli, n, sigma, domain=Domain.COEFF, batch=batch)
    down, ntt_q, ntt_p = _down_tables(n, q_k, tuple(p), kernels)
    e = jnp.stack([e0.data, e1.data], axis=-3)
    c0, c1 = _k_encrypt_pk(b, a, v, e, m.data, down, ntt_q, ntt_p)
    return RNSPoly(c0, q_k, Domain.EVAL), RNSPoly(c1, q_k, Domain.EVAL)


@jit
def _phase(parts, s):
    acc, power = parts[0], s
    for i, c in enumerate(parts[1:]):
        if i:
            power = mul(power, s)
        acc = add(acc, mul(c, power))
    return acc


def decrypt(sk: SecretKey, parts) -> RNSPoly:
    """The phase c0 + c1 s (+ c2 s^2) of a ciphertext (tuple of RNSPoly, EVAL, same basis), EVAL domain."""
    c0 = parts[0]
    for c in parts[1:]:
        if c.basis != c0.basis or c.domain != Domain.EVAL or c0.domain != Domain.EVAL:
            raise BasisMismatchError("ciphertext parts must share one basis and be in the EVAL domain")
    return _phase(tuple(parts), sk.residues(c0.basis))
