"""TFHE linear operations (no bootstrapping): exact mod Q on ciphertexts of any batch shape, messages mod 2^(p+1)
(the padding bit included: keep results below 2^p for a later bootstrap); one compiled program each. The
operations with a plaintext constant take the parameters first (``add_const(params, x, c)``,
``mul_const(params, x, c)``), which they check the ciphertext against.
"""

from __future__ import annotations

from functools import partial

import jax
import numpy as np

from crossfhe._deprecated import renamed
from crossfhe.core.keys import check_key_ids
from crossfhe.core.lwe import LWECiphertext
from crossfhe.errors import BasisMismatchError, ParameterError
from crossfhe.math.modular import ModulusTable, add_mod, barrett_mul, neg_mod, sub_mod
from crossfhe.tfhe.encryption import encode
from crossfhe.tfhe.keys import _check_ct
from crossfhe.tfhe.params import Params


def _pair(x: LWECiphertext, y: LWECiphertext, what: str) -> str | None:
    """The key id x and y share (None: neither has one), after checking that they can be combined."""
    if not isinstance(x, LWECiphertext) or not isinstance(y, LWECiphertext):
        raise ParameterError("add/sub take two LWECiphertext")
    if x.moduli != y.moduli or x.n != y.n:
        raise BasisMismatchError(f"ciphertexts over different moduli or dimensions ({x!r}, {y!r})")
    return check_key_ids(what, x.key_id, y.key_id)


def _q_cols(moduli):
    q = np.array(moduli, dtype=np.uint32)
    return q, q.reshape(-1, 1)


@partial(jax.jit, static_argnames=("moduli", "op"))
def linear_words(xb, xa, yb, ya, *, moduli, op: str):
    """add_mod / sub_mod of two ciphertexts' (b, a), or neg_mod of the first (op "add", "sub", "neg")."""
    qb, qa = _q_cols(moduli)
    if op == "neg":
        return neg_mod(xb, qb), neg_mod(xa, qa)
    f = add_mod if op == "add" else sub_mod
    return f(xb, yb, qb), f(xa, ya, qa)


def add(x: LWECiphertext, y: LWECiphertext) -> LWECiphertext:
    """Encrypts m_x + m_y (mod 2^(p+1): keep sums below 2^p for a later bootstrap). Noise variances add."""
    kid = _pair(x, y, "add")
    return LWECiphertext(*linear_words(x.b, x.a, y.b, y.a, moduli=x.moduli, op="add"), x.moduli, kid)


def sub(x: LWECiphertext, y: LWECiphertext) -> LWECiphertext:
    """Encrypts m_x - m_y mod 2^(p+1); a negative result sets the padding bit (add 2^p first to avoid it)."""
    kid = _pair(x, y, "sub")
    return LWECiphertext(*linear_words(x.b, x.a, y.b, y.a, moduli=x.moduli, op="sub"), x.moduli, kid)


def negate(x: LWECiphertext) -> LWECiphertext:
    """Encrypts -m mod 2^(p+1) (sets the padding bit unless m = 0)."""
    return LWECiphertext(*linear_words(x.b, x.a, None, None, moduli=x.moduli, op="neg"), x.moduli, x.key_id)


@partial(jax.jit, static_argnames=("moduli",))
def mul_const_words(xb, xa, cr, *, moduli):
    t = ModulusTable.create(moduli)
    b = barrett_mul(xb, cr, t.q.reshape(-1), t.barrett_mu.reshape(-1), t.bits.reshape(-1))
    a = barrett_mul(xa, cr[:, None], t.q, t.barrett_mu, t.bits)
    return b, a


def mul_scalar(params: Params, x: LWECiphertext, c: int) -> LWECiphertext:
    """Encrypts c m mod 2^(p+1) (c a Python int, any sign); the noise variance is multiplied by c^2."""
    if isinstance(c, bool) or not isinstance(c, (int, np.integer)):
        raise ParameterError(f"mul_scalar takes a Python int, got {type(c).__name__}")
    _check_ct(params, x)
    cr = np.array([int(c) % q for q in x.moduli], dtype=np.uint32)
    return LWECiphertext(*mul_const_words(x.b, x.a, cr, moduli=x.moduli), x.moduli, x.key_id)


@partial(jax.jit, static_argnames=("moduli",))
def add_const_words(xb, c, *, moduli):
    qb, _ = _q_cols(moduli)
    return add_mod(xb, c, qb)


def add_scalar(params: Params, x: LWECiphertext, c) -> LWECiphertext:
    """Encrypts m + c (c an int, or an integer array broadcasting against x's batch shape; taken mod
    2^(p+1)); no noise is added."""
    if isinstance(c, bool):
        raise ParameterError("add_scalar takes integers, got a bool")
    _check_ct(params, x)
    return LWECiphertext(add_const_words(x.b, encode(params, c), moduli=x.moduli), x.a, x.moduli, x.key_id)



add_const = renamed(add_scalar, "crossfhe.tfhe.ops.add_const", "add_scalar (one vocabulary: docs/vocabulary.md)")
mul_const = renamed(mul_scalar, "crossfhe.tfhe.ops.mul_const", "mul_scalar (one vocabulary: docs/vocabulary.md)")

__all__ = ["add", "add_const", "add_scalar", "mul_const", "mul_scalar", "negate", "sub"]
