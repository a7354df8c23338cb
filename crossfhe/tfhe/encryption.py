"""TFHE encryption: messages in [0, 2^p) as LWE ciphertexts under the long key (the GLWE key's coefficients),
phase b + <a, s> = m Delta + e over Q, Delta = round(Q / 2^(p+1)) (:mod:`crossfhe.tfhe.params`); leading axes
are batch axes. Decryption, phases and noise for tests; encodings and trivial (keyless) ciphertexts.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe._deprecated import warn
from crossfhe.core.keys import check_key_ids
from crossfhe.core.lwe import LWECiphertext
from crossfhe.errors import ParameterError
from crossfhe.math import random as crandom
from crossfhe.math.modular import ModulusTable, add_mod, add_wide, barrett_mul, reduce_u64, sub_mod, sum_wide
from crossfhe.math.xla import jit
from crossfhe.tfhe.keys import ClientKey, Tables, _check_ct, _key_of, _params_of, sample_noise
from crossfhe.tfhe.params import Params

U32 = jnp.uint32

def _check_messages(params: Params, m) -> np.ndarray:
    arr = np.asarray(m)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == bool):
        raise ParameterError(f"messages must be integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    bad = arr[(arr < 0) | (arr >= 2**params.message_bits)]
    if bad.size:
        raise ParameterError(f"message {int(bad.flat[0])} is out of range [0, 2^{params.message_bits})")
    return arr


@partial(jit, persist=True, static_argnames=("params",))
def _encrypt(key, m, s_long, q, *, params: Params):
    """LWE under the long key: b = -<a, s> + e + m Delta; m int32 of any batch shape: (b [*shape, L], a [*shape,
    L, kN])."""
    limbs, dim = len(params.moduli), params.long_dim
    shape = m.shape
    m = m.reshape(-1)
    batch = m.shape[0]
    ka, ke = crandom.split(key)
    a = crandom.uniform_mod(ka, (batch, limbs, dim), q)
    e = sample_noise(ke, (batch, 1), params.glwe_sigma)
    dot = _dot_binary(a, s_long, params.moduli)  # [B, L]
    delta = np.array([params.delta % x for x in params.moduli], dtype=np.uint32)
    t = ModulusTable.create(params.moduli)
    md = barrett_mul(
        crandom.to_residues(m[:, None], q.reshape(-1)),
        delta,
        q.reshape(-1),
        t.barrett_mu.reshape(-1),
        t.bits.reshape(-1),
    )
    b = add_mod(sub_mod(crandom.to_residues(e, q.reshape(-1)), dot, q.reshape(-1)), md, q.reshape(-1))
    return b.reshape(shape + (limbs,)), a.reshape(shape + (limbs, dim))


def _dot_binary(a, s, moduli: tuple[int, ...]):
    """<a, s> mod q for a uint32 [..., L, D] residues and s int32 [D] in {0, 1}: exact for any D (sums of
    at most 2^16 terms, the limit of ``sum_wide``, then added in two words: D < 2^32 terms below 2^31)."""
    terms = jnp.where(s.astype(bool), a, U32(0))
    hi = lo = None
    for start in range(0, terms.shape[-1], 2**16):
        h, l = sum_wide(jnp.zeros_like(terms[..., :1]), terms[..., start : start + 2**16], axis=-1)
        hi, lo = (h, l) if hi is None else add_wide(hi, lo, h, l)
    t = ModulusTable.create(moduli)
    return reduce_u64(
        hi,
        lo,
        t.q.reshape(-1),
        t.barrett_mu.reshape(-1),
        t.bits.reshape(-1),
        t.mont_qinv.reshape(-1),
        t.mont_r2.reshape(-1),
    )


def encrypt(ck: ClientKey, m, seed=None, *, key=None) -> LWECiphertext:
    """Encrypt integer message(s) in [0, 2^p) under the long key; the batch shape is ``np.shape(m)``. ``key``: a
    ChaChaKey used once, as the other schemes' ``encrypt`` take it (default: fresh from os.urandom); ``seed`` (32
    bytes or a ChaChaKey) is its deprecated name."""
    if seed is not None:
        if key is not None:
            raise ParameterError("encrypt takes key= (a ChaChaKey), not both key= and its deprecated name seed=")
        warn("crossfhe.tfhe.ops.encrypt(..., seed)", "key= (a ChaChaKey, crossfhe.math.random.seed_key(bytes)), as "
             "the other schemes' encrypt take it")
        key = seed
    params = _params_of(ck, ClientKey)
    arr = _check_messages(params, m)
    b, a = _encrypt(_key_of(key), arr.astype(np.int32), ck.long_key, Tables(params).q, params=params)
    return LWECiphertext(b, a, params.moduli, ck.key_id)


@partial(jit, persist=True, static_argnames=("moduli",))
def _phase(b, a, s, *, moduli):
    q = np.array(moduli, dtype=np.uint32)
    return add_mod(b, _dot_binary(a, s, moduli), q)


def phase(ck: ClientKey, ct: LWECiphertext) -> np.ndarray:
    """b + <a, s> mod Q as Python ints (object array of the batch shape): for noise measurement."""
    params = _params_of(ck, ClientKey)
    _check_ct(params, ct)
    check_key_ids("decrypt", ck.key_id, ct.key_id)
    res = np.asarray(_phase(ct.b, ct.a, ck.long_key, moduli=params.moduli)).astype(object)
    basis = Tables(params).basis
    big_q = params.big_q
    out = sum(res[..., i] * ((basis.hat[i] * basis.hat_inv[i]) % big_q) for i in range(len(params.moduli)))
    return out % big_q


def decrypt(ck: ClientKey, ct: LWECiphertext) -> np.ndarray:
    """The messages: round(phase 2^(p+1) / Q) mod 2^p, int64 of the batch shape.

    A set padding bit (a result that went past 2^p, or below 0) wraps mod 2^p."""
    params = _params_of(ck, ClientKey)
    ph = phase(ck, ct)
    big_q, p = params.big_q, params.message_bits
    v = (ph * 2 ** (p + 1) + big_q // 2) // big_q
    return np.asarray(v % 2**p, dtype=np.int64)


def noise(ck: ClientKey, ct: LWECiphertext, m) -> np.ndarray:
    """The error of ct relative to Q (float64, centered): (phase - m Delta) / Q, for tests and the model."""
    params = _params_of(ck, ClientKey)
    ph = phase(ck, ct)
    big_q = params.big_q
    m = np.asarray(m, dtype=object) % 2 ** (params.message_bits + 1)
    e = (ph - m * params.delta) % big_q
    e = np.where(e > big_q // 2, e - big_q, e)
    return np.asarray([float(x) / big_q for x in np.ravel(e)]).reshape(np.shape(e))


def encode(params: Params, values) -> np.ndarray:
    """uint32 ``[*shape, L]``: the residues of (v mod 2^(p+1)) Delta mod Q for integer values v (any shape)."""
    if isinstance(values, int) and not isinstance(values, bool):
        values = values % 2 ** (params.message_bits + 1)  # any Python int, also beyond int64
    arr = np.asarray(values)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        raise ParameterError(f"values to encode must be integers, got dtype {arr.dtype}")
    v = arr.astype(np.int64) % 2 ** (params.message_bits + 1)
    q = np.array(params.moduli, dtype=np.int64)
    delta = np.array([params.delta % x for x in params.moduli], dtype=np.int64)
    return (v[..., None] * delta % q).astype(np.uint32)  # < 2^11 * 2^31: exact in int64



@partial(jax.jit, static_argnames=("dim",))
def _trivial(b, *, dim: int):
    return b, jnp.zeros(b.shape + (dim,), U32)


def trivial(params: Params, m) -> LWECiphertext:
    """A noiseless, keyless encryption of m (a = 0): a public constant."""
    arr = _check_messages(params, m)
    b, a = _trivial(encode(params, arr), dim=params.long_dim)
    return LWECiphertext(b, a, params.moduli)



__all__ = ["decrypt", "encode", "encrypt", "noise", "phase", "trivial"]
