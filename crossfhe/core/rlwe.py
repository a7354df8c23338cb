"""RLWE encryption and decryption, shared by the schemes (CKKS scales the message, BFV multiplies by Q/t).

A ciphertext is a tuple of RNSPoly (c0, c1[, c2]) in the EVAL domain over the same basis, a prefix
q_0..q_{k-1} of the key's ciphertext primes; its phase is c0 + c1 s (+ c2 s^2) = m + e (mod Q_k).

* :func:`encrypt_sk`: (c0, c1) = (-a s + e + m, a), a uniform, e discrete Gaussian. Fresh noise |e| <= B_e
  = ceil(GAUSSIAN_TAIL sigma) per coefficient.
* :func:`encrypt_pk`: (c0, c1) = (v b + e0 + m, v a + e1), v ternary, with (b, a) the public key; the phase
  is m + v e + e0 + e1 s, coefficients below N B_e + B_e + N B_e in magnitude (the ternary products are
  sums of at most N terms of size B_e).
* :func:`decrypt`: the phase, EVAL domain.
"""

from __future__ import annotations

from crossfhe.core.keys import SIGMA, PublicKey, SecretKey, sample_gaussian, sample_ternary, sample_uniform
from crossfhe.errors import BasisMismatchError, DomainMismatchError
from crossfhe.math import random as crandom
from crossfhe.ring.ntt import NTTPlan
from crossfhe.ring.poly import Domain, RNSPoly, add, mul, neg


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


def encrypt_sk(sk: SecretKey, m: RNSPoly, key: crandom.ChaChaKey, *, sigma: float = SIGMA):
    """(c0, c1) = (-a s + e + m, a) over m's basis (a prefix of the key's q), EVAL domain.

    m: RNSPoly EVAL, uint32[..., k, N] (leading axes batch). ``key``: a ChaChaKey, used once.
    """
    _check_message(m, sk.q)
    n, moduli = m.n, m.basis
    batch = m.data.shape[:-2]
    key_a, key_e = crandom.split(key)
    plan = NTTPlan.create(n, moduli)
    a = sample_uniform(key_a, moduli, n, domain=Domain.EVAL, batch=batch)
    e = sample_gaussian(key_e, moduli, n, sigma, domain=Domain.EVAL, batch=batch, plan=plan)
    c0 = add(add(neg(mul(a, sk.residues(moduli))), e), m)
    return c0, a


def encrypt_pk(pk: PublicKey, m: RNSPoly, key: crandom.ChaChaKey, *, sigma: float = SIGMA):
    """(c0, c1) = (v b + e0 + m, v a + e1) over m's basis, EVAL domain; v uniform ternary.

    m: RNSPoly EVAL over a prefix of the public key's primes, uint32[..., k, N]. ``key``: used once.
    """
    _check_message(m, pk.q)
    n, moduli, k = m.n, m.basis, m.limbs
    batch = m.data.shape[:-2]
    key_v, key_e0, key_e1 = crandom.split(key, 3)
    plan = NTTPlan.create(n, moduli)
    v = sample_ternary(key_v, moduli, n, domain=Domain.EVAL, batch=batch, plan=plan)
    e0 = sample_gaussian(key_e0, moduli, n, sigma, domain=Domain.EVAL, batch=batch, plan=plan)
    e1 = sample_gaussian(key_e1, moduli, n, sigma, domain=Domain.EVAL, batch=batch, plan=plan)
    c0 = add(add(mul(v, _prefix(pk.b, k)), e0), m)
    c1 = add(mul(v, _prefix(pk.a, k)), e1)
    return c0, c1


def decrypt(sk: SecretKey, parts) -> RNSPoly:
    """The phase c0 + c1 s (+ c2 s^2) of a ciphertext (tuple of RNSPoly, EVAL, same basis), EVAL domain."""
    c0 = parts[0]
    for c in parts[1:]:
        if c.basis != c0.basis or c.domain != Domain.EVAL or c0.domain != Domain.EVAL:
            raise BasisMismatchError("ciphertext parts must share one basis and be in the EVAL domain")
    s = sk.residues(c0.basis)
    acc = c0
    power = s
    for i, c in enumerate(parts[1:]):
        if i:
            power = mul(power, s)
        acc = add(acc, mul(c, power))
    return acc
