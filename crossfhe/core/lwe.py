"""LWE ciphertexts over an RNS modulus: extraction from RLWE and the embedding back into RLWE (all schemes).

An LWE ciphertext (b, a) of dimension N over Q = q_0 ... q_{k-1} (stored as residues, like an RNSPoly) has
the phase

    phase = b + <a, s> = b + sum_j a_j s_j   (mod Q),

s_0 ... s_{N-1} the coefficients of the RLWE secret s(X) (``SecretKey.coeffs``). That is the sign
convention of the RLWE phase c0 + c1 s (:mod:`crossfhe.core.rlwe`), so every coefficient of an RLWE phase
is the phase of an LWE ciphertext under the same key, with no key switch.

* :func:`extract_lwe`: coefficient t of c0 + c1 s. In Z[X]/(X^N + 1),

      (c1 s)_t = sum_{j <= t} c1_{t-j} s_j - sum_{j > t} c1_{N+t-j} s_j,

  so b = c0_t, a_j = c1_{t-j} for j <= t and a_j = -c1_{N+t-j} for j > t.
* :func:`lwe_to_rlwe`: CHAM eq. (3): c0 = b (a constant polynomial), c1(X) = a_0 - sum_{j>=1} a_j X^{N-j}.
  Since X^{N-j} X^j = X^N = -1, the constant coefficient of c1 s is a_0 s_0 + sum_{j>=1} a_j s_j = <a, s>:
  the constant coefficient of the RLWE phase is the LWE phase, the other N - 1 coefficients are unrelated
  values (PackLWEs removes them). On c1 it is the inverse of extraction at t = 0.
* :func:`lwe_phase`: b + <a, s> exactly, for tests and decryption.

All three are exact rearrangements (or exact sums) of residues: no noise is added, the LWE noise is the
noise of the extracted RLWE coefficient.

References: Chen, Dai, Kim, Song, "Efficient homomorphic conversion between (ring) LWE ciphertexts",
ACNS 2021 (extraction, §2); Ren et al., "CHAM: a customized homomorphic encryption accelerator for fast
matrix-vector product", DAC 2023, eq. (3).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.errors import BasisMismatchError, DomainMismatchError, ParameterError
from crossfhe.math.modular import add_mod, neg_mod
from crossfhe.math.xla import jit
from crossfhe.ring.ntt import NTTPlan, intt, ntt
from crossfhe.ring.poly import Domain, RNSPoly

U32 = jnp.uint32
_static = partial(field, metadata={"static": True})


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False, repr=False)
class LWECiphertext:
    """LWE ciphertext(s) (b, a) with phase b + <a, s> mod Q: a pytree.

    ``b``: uint32 ``[..., limbs]``, ``a``: uint32 ``[..., limbs, N]``, residues in [0, q_i) mod the static
    ``moduli`` (q_0 ... q_{k-1}); leading axes are batch axes. s is the coefficient vector of the RLWE
    secret (int {-1, 0, 1}). Build with :meth:`create` to have shapes and dtypes checked. Static ``key_id``:
    the key pair it is encrypted under (:func:`crossfhe.core.keys.key_id`), None if unknown or keyless.
    """

    b: jax.Array
    a: jax.Array
    moduli: tuple[int, ...] = _static()
    key_id: str | None = _static(default=None)

    @classmethod
    def create(cls, b, a, moduli, key_id: str | None = None) -> LWECiphertext:
        """Wrap residues, checking dtypes (uint32) and shapes (``b.shape == a.shape[:-1]``, ``limbs`` axis)."""
        moduli = tuple(int(q) for q in moduli)
        b, a = jnp.asarray(b), jnp.asarray(a)
        if b.dtype != U32 or a.dtype != U32:
            raise TypeError(f"LWE residues must be uint32, got b {b.dtype} and a {a.dtype}")
        if a.ndim < 2 or a.shape[-2] != len(moduli) or b.shape != a.shape[:-1]:
            raise BasisMismatchError(
                f"LWE shapes b {tuple(b.shape)}, a {tuple(a.shape)} do not match {len(moduli)} moduli: "
                f"expected b [..., {len(moduli)}] and a [..., {len(moduli)}, N]"
            )
        return cls(b, a, moduli, key_id)

    @property
    def n(self) -> int:
        """The LWE dimension N (the ring degree it was extracted from)."""
        return self.a.shape[-1]

    @property
    def limbs(self) -> int:
        return len(self.moduli)

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return tuple(self.b.shape[:-1])

    def __repr__(self) -> str:
        return f"LWECiphertext(n={self.n}, limbs={self.limbs}, batch={self.batch_shape})"


def _qcol(moduli: tuple[int, ...]) -> np.ndarray:
    return np.array(moduli, dtype=np.uint32).reshape(-1, 1)


def _check_pair(c0: RNSPoly, c1: RNSPoly) -> None:
    if not isinstance(c0, RNSPoly) or not isinstance(c1, RNSPoly):
        raise TypeError(f"extract_lwe takes two RNSPoly (c0, c1), got {type(c0).__name__}, {type(c1).__name__}")
    if c0.domain != c1.domain:
        raise DomainMismatchError(f"c0 and c1 are in different domains ({c0.domain.name}, {c1.domain.name})")
    if c0.basis != c1.basis or c0.data.shape != c1.data.shape:
        raise BasisMismatchError(
            f"c0 (moduli {c0.basis}, shape {tuple(c0.data.shape)}) and c1 (moduli {c1.basis}, shape "
            f"{tuple(c1.data.shape)}) must share one basis and shape"
        )
    if c0.data.dtype != U32 or c1.data.dtype != U32:
        raise TypeError(f"RNS residues must be uint32, got {c0.data.dtype} and {c1.data.dtype}")


def _indices(index, n: int):
    """``index`` as an int32 array (0-d for a scalar), range-checked when it is concrete."""
    if isinstance(index, jax.core.Tracer):
        if not jnp.issubdtype(index.dtype, jnp.integer) or index.ndim > 1:
            raise ParameterError(f"index must be an integer scalar or 1-D array, got {index.dtype}{list(index.shape)}")
        return index.astype(jnp.int32)
    if isinstance(index, bool):
        raise ParameterError("index must be an int or a 1-D sequence of ints, got a bool")
    idx = np.asarray(index)
    if idx.ndim > 1 or (idx.size and not np.issubdtype(idx.dtype, np.integer)):
        raise ParameterError(f"index must be an int or a 1-D sequence of ints, got {idx.dtype}{list(idx.shape)}")
    idx = idx.astype(np.int64)
    bad = idx[(idx < 0) | (idx >= n)]
    if bad.size:
        raise ParameterError(f"coefficient index {int(bad[0])} is out of range [0, N = {n})")
    return jnp.asarray(idx, dtype=jnp.int32)


@jit
def _extract(c0, c1, idx, q):
    """b [..., (t,) k], a [..., (t,) k, N] of coefficient(s) ``idx`` of c0 + c1 s (COEFF residues)."""
    n = c1.shape[-1]
    t = idx[..., None]  # [(t,) 1]
    j = jnp.arange(n, dtype=jnp.int32)
    src = (t - j) % n  # [(t,) N]: c1_{t-j}, wrapping to c1_{N+t-j}
    a = jnp.take(c1, src, axis=-1)  # [..., k, (t,) N]
    b = jnp.take(c0, idx, axis=-1)  # [..., k, (t,)]
    wrapped = j > t  # [(t,) N]
    if idx.ndim:
        a = jnp.moveaxis(a, -2, -3)  # [..., t, k, N]
        b = jnp.moveaxis(b, -1, -2)  # [..., t, k]
        wrapped = wrapped[:, None, :]
    return b, jnp.where(wrapped, neg_mod(a, q), a)


def extract_lwe(c0: RNSPoly, c1: RNSPoly, index) -> LWECiphertext:
    """The LWE ciphertext(s) whose phase is coefficient ``index`` of the RLWE phase c0 + c1 s. Exact.

    c0, c1: RNSPoly ``uint32[..., k, N]`` over one basis, both COEFF or both EVAL (then inverse-transformed
    with ``NTTPlan.create(N, basis)`` first), residues in [0, q_i). ``index``: an int t in [0, N), or a
    1-D sequence / array of T such ints. Returns :class:`LWECiphertext` with b ``[..., k]`` and a
    ``[..., k, N]`` for an int; for a sequence the new axis of length T comes after the input's batch
    axes: b ``[..., T, k]``, a ``[..., T, k, N]``. b = c0_t, a_j = c1_{t-j} (j <= t), -c1_{N+t-j} (j > t).
    Jittable; a traced ``index`` is not range-checked. Raises ParameterError for an index out of range
    or not integral, BasisMismatchError / DomainMismatchError / TypeError for mismatched c0, c1.
    """
    _check_pair(c0, c1)
    idx = _indices(index, c0.n)
    d0, d1 = c0.data, c1.data
    if c0.domain == Domain.EVAL:
        plan = NTTPlan.create(c0.n, c0.basis)
        d0, d1 = intt(d0, plan), intt(d1, plan)
    b, a = _extract(d0, d1, idx, _qcol(c0.basis))
    return LWECiphertext(b, a, c0.basis)


def _check_lwe(lwe) -> None:
    if not isinstance(lwe, LWECiphertext):
        raise TypeError(f"expected an LWECiphertext, got {type(lwe).__name__}")
    if lwe.a.dtype != U32 or lwe.b.dtype != U32:
        raise TypeError(f"LWE residues must be uint32, got b {lwe.b.dtype} and a {lwe.a.dtype}")
    if lwe.a.shape[-2:-1] != (lwe.limbs,) or lwe.b.shape != lwe.a.shape[:-1]:
        raise BasisMismatchError(
            f"LWE shapes b {tuple(lwe.b.shape)}, a {tuple(lwe.a.shape)} do not match {lwe.limbs} moduli"
        )


@jit
def _embed_a(a, q):
    """COEFF c1 of the embedding: c1_0 = a_0, c1_i = -a_{N-i} (i >= 1)."""
    n = a.shape[-1]
    i = jnp.arange(n, dtype=jnp.int32)
    c1 = jnp.take(a, (n - i) % n, axis=-1)
    return jnp.where(i == 0, c1, neg_mod(c1, q))


def lwe_to_rlwe(lwe: LWECiphertext, *, domain: Domain = Domain.COEFF) -> tuple[RNSPoly, RNSPoly]:
    """CHAM eq. (3): the RLWE pair (c0, c1) = (b, a_0 - sum_{j>=1} a_j X^{N-j}). Exact.

    lwe: b ``[..., k]``, a ``[..., k, N]`` (N a power of two). Returns RNSPoly ``uint32[..., k, N]`` over
    ``lwe.moduli`` in [0, q_i), in ``domain``. EVAL: c1 by the forward NTT of ``NTTPlan.create(N, moduli)``
    (the moduli must be NTT-friendly for N); c0 needs none, a constant has every slot equal to b. The
    constant coefficient of c0 + c1 s equals the LWE phase b + <a, s>; the other coefficients are
    unrelated values. Raises TypeError / BasisMismatchError for a malformed ciphertext.
    """
    _check_lwe(lwe)
    if not isinstance(domain, Domain):
        raise TypeError(f"domain must be a Domain, got {domain!r}")
    c1 = _embed_a(lwe.a, _qcol(lwe.moduli))
    if domain == Domain.EVAL:
        c0 = jnp.broadcast_to(lwe.b[..., None], lwe.a.shape)
        c1 = ntt(c1, NTTPlan.create(lwe.n, lwe.moduli))
    else:
        c0 = jnp.zeros_like(lwe.a).at[..., 0].set(lwe.b)
    return RNSPoly.create(c0, lwe.moduli, domain), RNSPoly.create(c1, lwe.moduli, domain)


@partial(jit, persist=True)
def _phase(b, a, s, q):
    terms = jnp.where(s == 1, a, jnp.where(s == -1, neg_mod(a, q), jnp.zeros_like(a)))
    while terms.shape[-1] > 1:  # pairwise modular sum: exact in uint32 for any N
        half = terms.shape[-1] // 2
        head = add_mod(terms[..., :half], terms[..., half : 2 * half], q)
        terms = head if terms.shape[-1] % 2 == 0 else jnp.concatenate([head, terms[..., -1:]], axis=-1)
    return add_mod(b, terms[..., 0], q[:, 0])


def lwe_phase(lwe: LWECiphertext, secret_coeffs) -> jax.Array:
    """b + <a, s> mod q_i, exactly: uint32 ``[..., k]`` in [0, q_i) (compose with
    :func:`crossfhe.math.rns.compose` for the integer mod Q).

    secret_coeffs: integer ``[N]`` in {-1, 0, 1} (``SecretKey.coeffs``). Raises ParameterError for a
    secret of the wrong length, dtype or (when concrete) values.
    """
    _check_lwe(lwe)
    s = jnp.asarray(secret_coeffs)
    if s.shape != (lwe.n,) or not jnp.issubdtype(s.dtype, jnp.integer):
        raise ParameterError(f"the secret must be integer [N = {lwe.n}], got {s.dtype}{list(s.shape)}")
    if not isinstance(s, jax.core.Tracer) and not np.isin(np.asarray(s), (-1, 0, 1)).all():
        raise ParameterError("the secret's coefficients must be in {-1, 0, 1}")
    return _phase(lwe.b, lwe.a, s.astype(jnp.int32), _qcol(lwe.moduli))


__all__ = ["LWECiphertext", "extract_lwe", "lwe_phase", "lwe_to_rlwe"]
