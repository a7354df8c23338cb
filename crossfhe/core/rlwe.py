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

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.core.keys import (
    SIGMA,
    PublicKey,
    SecretKey,
    gaussian_bound,
    residues_of,
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


@jax.tree_util.register_pytree_node_class
class Message:
    """A message made inside the encryption's program: ``fn(*args)`` gives its EVAL words ``uint32[*batch, limbs,
    N]`` over ``basis`` (e.g. BFV's round(Q m / t) and its NTT), so encoding and encryption are one program.
    Passed to :func:`encrypt_pk` / :func:`encrypt_sk` in place of an RNSPoly."""

    domain = Domain.EVAL

    def __init__(self, fn, args: tuple, basis: tuple[int, ...], n: int, batch: tuple[int, ...]):
        self.fn, self.args, self.basis, self.n, self.batch = fn, tuple(args), tuple(basis), int(n), tuple(batch)

    @property
    def limbs(self) -> int:
        return len(self.basis)

    def words(self):
        return self.fn(*self.args)

    def tree_flatten(self):
        return (self.args,), (self.fn, self.basis, self.n, self.batch)

    @classmethod
    def tree_unflatten(cls, aux, leaves):
        return cls(aux[0], leaves[0], *aux[1:])


def _words(m):
    """(EVAL words, batch shape) of an RNSPoly or a :class:`Message`."""
    if isinstance(m, Message):
        return m.words(), m.batch
    return m.data, m.data.shape[:-2]


def _check_message(m, q: tuple[int, ...]) -> None:
    if isinstance(m, Message):
        pass
    elif not isinstance(m, RNSPoly):
        raise TypeError(f"the message must be an RNSPoly, got {type(m).__name__}")
    if m.domain != Domain.EVAL:
        raise DomainMismatchError("RLWE encryption takes the message in the EVAL domain")
    if m.basis != q[: m.limbs]:
        raise BasisMismatchError(
            f"the message's moduli {m.basis} are not a prefix of the key's ciphertext primes {q}"
        )


def _check_key_moduli(sk: SecretKey, moduli) -> None:
    missing = [m for m in moduli if m not in sk.poly.basis]
    if missing:
        raise BasisMismatchError(f"the secret key has no residues mod {missing} (its moduli: {sk.poly.basis})")


def _prefix(poly: RNSPoly, k: int) -> RNSPoly:
    return RNSPoly(poly.data[..., :k, :], poly.basis[:k], poly.domain)


def encrypt_sk(sk: SecretKey, m: RNSPoly, key: crandom.ChaChaKey, *, sigma: float = SIGMA, kernels=None):
    """(c0, c1) = (-a s + e + m, a) over m's basis (a prefix of the key's q), EVAL domain.

    m: RNSPoly EVAL, uint32[..., k, N] (leading axes batch). ``key``: a ChaChaKey, used once. ``kernels``:
    the kernel set of the error's NTT (:mod:`crossfhe.kernels`; default VECTOR), the same words either way.
    """
    _check_message(m, sk.q)
    _check_key_moduli(sk, m.basis)
    return _k_encrypt_sk(sk.poly, m, key, NTTPlan.create(m.n, m.basis, kernels), sigma=float(sigma))


@partial(jit, persist=True, static_argnames=("sigma",))
def _k_encrypt_sk(s, m, key, plan: NTTPlan, *, sigma: float):
    """:func:`encrypt_sk` as one program: the samples drawn from ``key`` and the ciphertext (s: the key's EVAL
    polynomial)."""
    n, moduli = m.n, m.basis
    words, batch = _words(m)
    m = RNSPoly(words, moduli, Domain.EVAL)
    s = residues_of(s, moduli)
    key_a, key_e = crandom.split(key)
    a = sample_uniform(key_a, moduli, n, domain=Domain.EVAL, batch=batch)
    e = sample_gaussian(key_e, moduli, n, sigma, domain=Domain.EVAL, batch=batch, plan=plan)
    return add(add(neg(mul(a, s)), e), m), a


@plan_cache(maxsize=64, on_device=True)
def _down_tables(n: int, q: tuple[int, ...], p: tuple[int, ...], kernels):
    down = ModDownPlan.create(RNSBasis(q), RNSBasis(p), exact=True, kernels=kernels)
    return down, NTTPlan.create(n, q, kernels), NTTPlan.create(n, p, kernels)


@partial(jit, persist=True, static_argnames=("sigma", "rows"))
def _k_encrypt_pk(pk_b, pk_a, key, m, down: ModDownPlan, ntt_q: NTTPlan, ntt_p: NTTPlan, plan: NTTPlan, *,
                  sigma: float, rows: tuple[int, ...]):
    """ModDown(v (b, a) + (e0, e1)) + (m, 0) as one program: v ternary (EVAL through ``plan`` over Q_k ∪ P), e0, e1
    Gaussian in the coefficient domain (added inside ModDown, no transform of their own), all drawn from ``key``;
    b, a the public key's EVAL polynomials (``rows``: those of Q_k ∪ P), m EVAL over Q_k (an RNSPoly or a
    :class:`Message`)."""
    moduli = plan.moduli
    m, batch = _words(m)
    pick = np.array(rows, dtype=np.int32)  # the key's rows over Q_k ∪ P
    pk_b = RNSPoly(jnp.take(pk_b.data, pick, axis=-2), moduli, Domain.EVAL)
    pk_a = RNSPoly(jnp.take(pk_a.data, pick, axis=-2), moduli, Domain.EVAL)
    n = plan.n
    key_v, key_e0, key_e1 = crandom.split(key, 3)
    v = sample_ternary(key_v, moduli, n, domain=Domain.EVAL, batch=batch, plan=plan)
    e0 = sample_gaussian(key_e0, moduli, n, sigma, domain=Domain.COEFF, batch=batch)
    e1 = sample_gaussian(key_e1, moduli, n, sigma, domain=Domain.COEFF, batch=batch)
    e = jnp.stack([e0.data, e1.data], axis=-3)
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
    rows = tuple(range(k)) + tuple(range(len(pk.q) - len(p), len(pk.q)))
    down, ntt_q, ntt_p = _down_tables(n, q_k, tuple(p), kernels)
    c0, c1 = _k_encrypt_pk(pk.b, pk.a, key, m, down, ntt_q, ntt_p, NTTPlan.create(n, moduli, kernels),
                           sigma=float(sigma), rows=rows)
    return RNSPoly(c0, q_k, Domain.EVAL), RNSPoly(c1, q_k, Domain.EVAL)


@partial(jit, persist=True)
def _phase(parts, s):
    s = residues_of(s, parts[0].basis)
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
    _check_key_moduli(sk, c0.basis)
    return _phase(tuple(parts), sk.poly)
