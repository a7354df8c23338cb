"""TFHE key switching: a long LWE ciphertext over Q (dimension k N) to a short one mod 2N' (dimension n), the
first half of a bootstrap (Taurus Fig. 3, key switch first):

1. round Q -> 2^32 (each residue vector composed by exact fixed point: ``gadget_digits_rns``);
2. key switch long -> short modulo 2^32: the l_ks signed digits of each a_i times the key-switching key, one int32
   matrix product whose wrap-around is the reduction mod 2^32 (on the ``NATIVE`` and ``MATRIX`` kernel sets, from
   :data:`KS_BYTES_FROM` inputs, four int8 products with the key's signed bytes: the same words);
3. round 2^32 -> 2N' (N' = 2^nu N, ``params.acc_size``), centered where ``params.centered_modulus_switch``.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp

from crossfhe.core.keys import check_key_ids
from crossfhe.core.lwe import LWECiphertext
from crossfhe.math.decompose import gadget_digits_rns
from crossfhe.math.modular import fusion_barrier
from crossfhe.math.xla import jit
from crossfhe.tfhe.keys import ServerKey, _check_ct, _params_of
from crossfhe.tfhe.params import KS_MODULUS_BITS, Params

U32 = jnp.uint32
I32 = jnp.int32

KS_BYTES_FROM = 2
"""On the ``NATIVE`` and ``MATRIX`` kernel sets, batches of at least this many inputs key-switch through the key's
signed bytes (:func:`crossfhe.tfhe.keys.ksk_bytes`, four int8 x int8 -> int32 products; the same words as the int32
product)."""


@partial(jit, static_argnames=("params",))
def keyswitch_words(b, a, ksk, ms_plan, *, params: Params):
    """Long LWE over Q (b [B, L], a [B, L, kN]) -> short LWE mod 2^32 -> mod 2N' (N' = 2^nu N): (b~ [B],
    a~ [B, n]) int32. ``ksk``: the int32 key, or its signed bytes (:func:`crossfhe.tfhe.keys.ksk_bytes`): the same
    words."""
    g = params.ks_gadget
    x = jnp.concatenate([a, b[..., None]], axis=-1)  # [B, L, kN + 1]
    d = gadget_digits_rns(x, ms_plan)  # [2, B, kN + 1]: round(x 2^32 / Q) in base 2^16
    v = (d[0].astype(U32) << 16) + d[1].astype(U32)  # mod 2^32
    va, vb = v[:, :-1], v[:, -1]
    # signed digits of the top b l bits of each a_i, rounded
    shift = KS_MODULUS_BITS - g.base_log * g.levels
    t = (va + U32((1 << shift) >> 1)) >> shift if shift else va
    # materialized: fused into the digits below, the rounding from the residues ran once per digit level
    t = fusion_barrier(t, ms_plan.q)
    base, half = 1 << g.base_log, 1 << (g.base_log - 1)
    digits = []
    carry = jnp.zeros_like(t)
    for _ in range(g.levels):  # least significant first
        r = (t & U32(base - 1)) + carry
        t = t >> g.base_log
        carry = (r >= U32(half)).astype(U32)
        digits.append(r.astype(I32) - (carry.astype(I32) << g.base_log))
    dig = jnp.stack(digits[::-1], axis=-1)  # [B, kN, l] MSB first
    dig = dig.reshape(dig.shape[0], -1)  # [B, kN l]: row i l + j
    if ksk.dtype == jnp.int8:  # the key's signed bytes (_ksk_bytes): four int8 products, shifted and summed
        parts = jax.lax.dot_general(dig.astype(jnp.int8), ksk, (((1,), (1,)), ((), ())), preferred_element_type=I32)
        parts = jax.lax.bitcast_convert_type(parts, U32).reshape(dig.shape[0], 4, -1)  # [B, byte, n + 1]
        out = parts[:, 0] + (parts[:, 1] << 8) + (parts[:, 2] << 16) + (parts[:, 3] << 24)  # wraps mod 2^32
    else:
        out = jnp.matmul(ksk, dig.T, preferred_element_type=I32).T  # wraps mod 2^32
        out = jax.lax.bitcast_convert_type(out, U32)
    bb = out[:, -1] + vb
    aa = out[:, :-1]
    log2n = params.acc_size.bit_length()  # log2(2N')
    sh = KS_MODULUS_BITS - log2n
    rnd = U32(1 << (sh - 1))
    mask = U32(2 * params.acc_size - 1)
    ar = (aa + rnd) >> sh
    if params.centered_modulus_switch:
        # each a_i moves by e_i = 2^sh round(a_i / 2^sh) - a_i; the phase by sum e_i s_i, whose mean over the binary
        # key is sum e_i / 2: taken off b (params.var_round_2n). |sum e_i| <= n 2^(sh-1) < 2^31 (n < 2N').
        err = jax.lax.bitcast_convert_type((ar << sh) - aa, I32)
        bb = bb - jax.lax.bitcast_convert_type(jnp.sum(err, axis=-1, dtype=I32) >> 1, U32)
    return ((bb + rnd) >> sh & mask).astype(I32), (ar & mask).astype(I32)


def ks_key(prepared, batch: int):
    """The key the key switch of ``batch`` inputs multiplies (``prepared``: a :class:`~crossfhe.tfhe.keys.PreparedKey`):
    its bytes where it has them and the batch is at least :data:`KS_BYTES_FROM` (a static shape), else the int32
    key."""
    by = prepared.ksk_bytes
    return by if by is not None and batch >= KS_BYTES_FROM else prepared.ksk


@partial(jit, static_argnames=("params", "shape"))
def _keyswitch_program(b, a, ksk, ms_plan, *, params: Params, shape: tuple):
    limbs = len(params.moduli)
    bt, at = keyswitch_words(b.reshape((-1, limbs)), a.reshape((-1, limbs, params.long_dim)), ksk, ms_plan,
                             params=params)
    return bt.reshape(shape), at.reshape(shape + (params.lwe_dim,))


def keyswitch(sk: ServerKey, ct: LWECiphertext):
    """Steps 1-3 (module docstring) of a bootstrap: (b~ int32 [...], a~ int32 [..., n]) in [0, 2N'), the short LWE
    the blind rotation takes. Exposed for noise tests and for callers that apply several tables themselves."""
    params = _params_of(sk, ServerKey)
    _check_ct(params, ct)
    check_key_ids("keyswitch", sk.key_id, ct.key_id)
    shape = ct.batch_shape
    ksk = ks_key(sk.prepared, math.prod(shape))
    return _keyswitch_program(ct.b, ct.a, ksk, sk.prepared.ms_plan, params=params, shape=shape)



__all__ = ["KS_BYTES_FROM", "keyswitch", "keyswitch_words", "ks_key"]
