"""The two-part RLWE ciphertext evaluator shared by CKKS and BFV: each operation one compiled program.

A ciphertext here is a pair (c0, c1) of :class:`~crossfhe.ring.poly.RNSPoly` in the EVAL domain over a prefix
Q_k of the ciphertext primes, decrypting to the phase c0 + c1 s (mod Q_k). The schemes check parameters, keys,
levels and scales in Python and call one function of this module per public operation; each is a jitted
program over the operands, the keys and the plans (pytrees passed as arguments, made once outside any trace),
so an eager call is one dispatch of a cached executable, and the same function composes under a caller's
``jax.jit`` or ``vmap``.

``limbs`` (static): where given, the operands are first cut to their first ``limbs`` limbs (CKKS level
alignment by dropping primes, exact), inside the same program.

Noise (infinity norm of the phase error): a sum adds the operands' errors; a plaintext product multiplies the
error by at most N ||m||; a key switch (:func:`relinearize`, :func:`galois`) adds
:func:`~crossfhe.core.keyswitch.keyswitch_noise_bound`.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from crossfhe.core import keyswitch as ks
from crossfhe.math.modular import add_mod, shoup_mul
from crossfhe.math.xla import jit, plan_cache
from crossfhe.ring import poly
from crossfhe.ring.ntt import permute_slots
from crossfhe.ring.poly import RNSPoly


def cut(x: RNSPoly, limbs: int | None) -> RNSPoly:
    """x restricted to its first ``limbs`` limbs (None: unchanged); traceable."""
    if limbs is None or limbs == x.limbs:
        return x
    return poly.drop_limbs(x, x.limbs - limbs)


def _cut_all(limbs, *xs):
    return tuple(cut(x, limbs) for x in xs)


@partial(jit, static_argnames=("limbs",))
def cut_pair(c0, c1, *, limbs: int):
    """(c0, c1) restricted to their first ``limbs`` limbs: one program (two eager slices would be two)."""
    return cut(c0, limbs), cut(c1, limbs)


@partial(jit, static_argnames=("limbs",))
def add(a0, a1, b0, b1, *, limbs=None):
    """(a0 + b0, a1 + b1)."""
    a0, a1, b0, b1 = _cut_all(limbs, a0, a1, b0, b1)
    return poly.add(a0, b0), poly.add(a1, b1)


@partial(jit, static_argnames=("limbs",))
def sub(a0, a1, b0, b1, *, limbs=None):
    """(a0 - b0, a1 - b1)."""
    a0, a1, b0, b1 = _cut_all(limbs, a0, a1, b0, b1)
    return poly.sub(a0, b0), poly.sub(a1, b1)


@jit
def negate(a0, a1):
    """(-a0, -a1)."""
    return poly.neg(a0), poly.neg(a1)


@partial(jit, static_argnames=("limbs", "subtract"))
def add_plain(a0, a1, m, *, limbs=None, subtract=False):
    """(a0 + m, a1), or (a0 - m, a1) with ``subtract``; m an EVAL RNSPoly (a plaintext)."""
    a0, a1, m = _cut_all(limbs, a0, a1, m)
    return (poly.sub(a0, m) if subtract else poly.add(a0, m)), a1


@partial(jit, static_argnames=("limbs",))
def mul_plain(a0, a1, m, *, limbs=None):
    """(a0 m, a1 m), the slot-wise product by a plaintext m (EVAL)."""
    a0, a1, m = _cut_all(limbs, a0, a1, m)
    return poly.mul(a0, m), poly.mul(a1, m)


def integer_words(c: int, basis: tuple[int, ...]):
    """(c mod q_i, its Shoup companion) as uint32 ``[limbs, 1]`` NumPy words: the operand of :func:`mul_integer`."""
    return poly.scalar_constants(int(c), tuple(basis))


@jit
def mul_integer(a0, a1, w, ws):
    """(c a0, c a1) for an integer c given as its words (:func:`integer_words`), exact; c is an argument, so one
    executable serves every c."""
    q = poly.modulus_table(a0.basis).q
    return a0._replace(shoup_mul(a0.data, w, ws, q)), a1._replace(shoup_mul(a1.data, w, ws, q))


@plan_cache(maxsize=256, on_device=True)
def combination_words(cs: tuple[int, ...], basis: tuple[int, ...]):
    """(c_k mod q_i, Shoup companions) as uint32 ``[K, limbs, 1]`` words for integers ``cs``: the operand of
    :func:`combination_traced` (device arrays, made once per coefficient tuple and basis)."""
    words = [poly.scalar_constants(int(c), tuple(basis)) for c in cs]
    return np.stack([w for w, _ in words]), np.stack([ws for _, ws in words])


def combination_traced(xs0: tuple, xs1: tuple, w, ws, *, limbs: int):
    """(sum_k c_k xs0[k], sum_k c_k xs1[k]) over the first ``limbs`` limbs, for integers c_k given as the words
    ``w, ws`` (:func:`combination_words`, ``[K, limbs, 1]``); the operands may hold more limbs (cut here, no copy).
    Exact; traceable: in one program, one pass over the K operand pairs (K products and K - 1 sums per word)."""
    xs0, xs1 = _cut_all(limbs, *xs0), _cut_all(limbs, *xs1)
    q = poly.modulus_table(xs0[0].basis).q
    acc0 = acc1 = None
    for k, (x0, x1) in enumerate(zip(xs0, xs1)):
        t0, t1 = shoup_mul(x0.data, w[k], ws[k], q), shoup_mul(x1.data, w[k], ws[k], q)
        acc0 = t0 if acc0 is None else add_mod(acc0, t0, q)
        acc1 = t1 if acc1 is None else add_mod(acc1, t1, q)
    return xs0[0]._replace(acc0), xs1[0]._replace(acc1)


@jit
def add_constant(a0, a1, w):
    """(a0 + c, a1) for a constant polynomial c given as its residues w ``[limbs, 1]`` (in EVAL, a constant is the
    same value at every slot)."""
    return a0._replace(add_mod(a0.data, w, poly.modulus_table(a0.basis).q)), a1


def tensor(a0, a1, b0, b1):
    """(a0 b0, a0 b1 + a1 b0, a1 b1): the degree-2 product, decrypting under (1, s, s^2); traceable."""
    return poly.mul(a0, b0), poly.add(poly.mul(a0, b1), poly.mul(a1, b0)), poly.mul(a1, b1)


def relinearize_traced(d0, d1, d2, rlk, plan):
    """(d0, d1) + the key switch of d2 (EVAL or COEFF) from s^2 to s with ``rlk``; traceable."""
    u0, u1 = ks.keyswitch(d2, rlk, plan=plan)
    return poly.add(d0, u0), poly.add(d1, u1)


relinearize = jit(relinearize_traced)
"""(d0, d1, d2) -> (d0 + u0, d1 + u1), u the key switch of d2 with the relinearization key; one program."""


@partial(jit, static_argnames=("limbs",))
def mul_relin(a0, a1, b0, b1, rlk, plan, *, limbs=None):
    """The tensor product of two ciphertexts relinearized (:func:`tensor`, :func:`relinearize`): one program."""
    a0, a1, b0, b1 = _cut_all(limbs, a0, a1, b0, b1)
    return relinearize_traced(*tensor(a0, a1, b0, b1), rlk, plan)


def _sigma(p: RNSPoly, idx, plan) -> RNSPoly:
    """p with its EVAL slots permuted by ``idx`` (:func:`~crossfhe.ring.ntt.permute_slots` on the plan's kernels)."""
    return RNSPoly(permute_slots(p.data, idx, plan.ntt_q), p.basis, p.domain)


@plan_cache(maxsize=1024, on_device=True)
def word(value: int):
    """``value`` (in [0, 2^32)) as a uint32 device scalar, made once per value: the Galois element of :func:`galois`
    and other integer arguments of compiled programs (a NumPy scalar would be copied to the device per call)."""
    return np.asarray(int(value), dtype=np.uint32)


@jit
def galois(c0, c1, gk, plan, element):
    """(sigma(c0) + u0, u1), (u0, u1) the key switch of sigma(c1) with the Galois key ``gk``, sigma: X -> X^element
    on EVAL slots (a permutation, the same for every prime). ``element``: a uint32 scalar (traced, so one
    executable serves every element of a level)."""
    idx = ks.galois_permutation(plan, element)
    u0, u1 = ks.keyswitch(_sigma(c1, idx, plan), gk, plan=plan)
    return poly.add(_sigma(c0, idx, plan), u0), u1


@partial(jit, static_argnames=("elements",))
def galois_hoisted(c0, c1, gks: tuple, plan, elements: tuple):
    """:func:`galois` for several elements sharing one ModUp of c1 (:func:`~crossfhe.core.keyswitch.keyswitch_hoisted`):
    a list of pairs, one per element."""
    switched = ks.keyswitch_hoisted_traced(c1, gks, plan, elements)
    return [(poly.add(poly.automorphism(c0, g), u0), u1) for g, (u0, u1) in zip(elements, switched)]


__all__ = [
    "add",
    "add_constant",
    "add_plain",
    "cut",
    "cut_pair",
    "galois",
    "galois_hoisted",
    "integer_words",
    "mul_integer",
    "mul_plain",
    "mul_relin",
    "negate",
    "relinearize",
    "relinearize_traced",
    "sub",
    "tensor",
    "word",
]
