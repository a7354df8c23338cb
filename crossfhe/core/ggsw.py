"""GLWE and GGSW ciphertexts over an RNS modulus, the external product, CMux blind rotation, sample extraction.

Layouts (uint32 residues in [0, q_i) of Q = q_0 ... q_{L-1}, word-size NTT primes; leading axes batch):

* **GLWE** of dimension k: ``[..., k + 1, L, N]`` in the coefficient domain; components 0..k-1 are the
  masks a_c, component k the body b, and the phase is b + sum_c a_c s_c (the sign convention of
  :mod:`crossfhe.core.rlwe` and :mod:`crossfhe.core.lwe`). The key s: k binary polynomials.
* **GGSW** of a small integer m: ``[(k + 1) l, k + 1, L, N]`` in the **evaluation** domain (NTT, slot
  order), row r = c l + j a GLWE encryption of zero plus m g_j on component c, g the gadget vector of
  :class:`~crossfhe.math.decompose.Gadget` mod Q (MSB first).

External product (Chillotti et al., TFHE, J. Cryptology 2020, §3.4): the k + 1 components of a GLWE are
decomposed into l signed digits each (:func:`~crossfhe.math.decompose.gadget_digits_rns`, exact fixed point
from the residues), the (k + 1) l digit polynomials go through the forward NTT, are multiplied with the
GGSW rows and summed (multiply-accumulate at most 4 terms, reduce once: :func:`crossfhe.math.modular.mac_reduce`),
and the k + 1 sums come back through the inverse NTT. Phase: m times the input's phase plus
sum d e_row (digit noise) plus m <decomposition error, (s, 1)>.

Blind rotation steps: ACC <- ACC + BSK_i [x] (X^(r_i) ACC - ACC) (:func:`cmux_step`, a CMux of ACC and
X^(r_i) ACC selected by the key bit in BSK_i), or a grouped step (:func:`group_step`); the rotation that runs
them, once for all kernels, is :func:`crossfhe.core.blind_rotation.blind_rotate` (its ``NTTProduct``). The
accumulator is held as 2^nu components of degree N (nu = 0: one, the plain blind rotation; nu > 0: the extended
blind rotation over the ring of degree 2^nu N, :func:`cmux_step`), and each step's external product covers all
of them in one batch.

Everything is exact integer arithmetic on uint32/int32 (no x64).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.errors import BasisMismatchError, ParameterError
from crossfhe.math.decompose import Gadget, RNSGadgetPlan, digits_to_residues, gadget_digits_rns
from crossfhe.math.modular import ModulusTable, add_mod, fusion_barrier, mac_reduce, neg_mod, sub_mod
from crossfhe.math.rns import RNSBasis
from crossfhe.math.xla import jit
from crossfhe.ring.ntt import NTTPlan, intt, ntt

U32 = jnp.uint32
I32 = jnp.int32
_static = partial(field, metadata={"static": True})
MAC_TERMS = 4
"""Products summed before one reduction: (2^31)^2 * 4 < 2^64 (``Modulus.mac_max_terms`` for q < 2^31)."""


def rotate_mod(x, shift, q):
    """x(X) * X^shift in Z_Q[X]/(X^N + 1) for per-item shifts: a negacyclic rotation. Exact.

    x: uint32 ``[B, ..., L, N]`` residues mod q (uint32 ``[L, 1]``); shift: int32 ``[B]`` in [0, 2N).
    Coefficient j of the result is x_t for t = (j - shift) mod 2N when t < N, and -x_(t - N) otherwise.
    """
    n = x.shape[-1]
    t = (jnp.arange(n, dtype=I32)[None, :] - shift[:, None]) % (2 * n)  # [B, N]
    idx = jnp.where(t >= n, t - n, t)
    extra = x.ndim - 2
    idx_b = idx.reshape((idx.shape[0],) + (1,) * extra + (n,))
    g = jnp.take_along_axis(x, jnp.broadcast_to(idx_b, x.shape), axis=-1)
    flip = (t >= n).reshape(idx_b.shape)
    return jnp.where(flip, neg_mod(g, q), g)


def external_product(ggsw, glwe, plan: NTTPlan, gplan: RNSGadgetPlan, mac):
    """GGSW [x] GLWE (module docstring). ggsw: uint32 ``[(k+1) l, k+1, L, N]`` (EVAL); glwe: uint32
    ``[..., k+1, L, N]`` (COEFF). ``mac``: the tuple (q, mu, bits, qinv, r2) of uint32 ``[L, 1]`` columns.
    Returns ``[..., k+1, L, N]`` (COEFF). Traceable (call inside jit)."""
    return _mac_intt(_digits_eval(glwe, plan, gplan), ggsw, plan, mac)


def _digits_eval(glwe, plan: NTTPlan, gplan: RNSGadgetPlan):
    """The gadget digits of glwe ``[..., k+1, L, N]`` through the forward NTT: ``[..., (k+1) l, L, N]``."""
    k1, n = glwe.shape[-3], glwe.shape[-1]
    digits = gadget_digits_rns(glwe, gplan)  # int32 [l, ..., k+1, N]
    levels = digits.shape[0]
    d = jnp.moveaxis(digits, 0, -2)  # [..., k+1, l, N]: row c l + j
    d = d.reshape(d.shape[:-3] + (k1 * levels, n))
    return ntt(fusion_barrier(digits_to_residues(d, plan.q), plan.w), plan)  # [..., R, L, N]


def _mac_intt(ev, ggsw, plan: NTTPlan, mac):
    """sum_r ev_r GGSW_r back in the coefficient domain: ``[..., k+1, L, N]``."""
    rows = ev.shape[-3]
    out = None
    for start in range(0, rows, MAC_TERMS):
        stop = min(start + MAC_TERMS, rows)
        part = mac_reduce(ev[..., start:stop, None, :, :], ggsw[start:stop], *mac, axis=-4)
        out = part if out is None else add_mod(out, part, mac[0])
    return intt(fusion_barrier(out, plan.w), plan)


def split_components(x, extension: int):
    """Elements of Z_Q[X]/(X^(2^nu N) + 1), ``[B, ..., 2^nu N]``, as their 2^nu components
    ``[B, 2^nu, ..., N]``: A(X) = sum_j X^j A_j(X^(2^nu)), A_j in Z_Q[Y]/(Y^N + 1) with Y = X^(2^nu)
    (coefficient m of A_j is coefficient m 2^nu + j of A). The blind rotation keeps its accumulator in this
    layout (:func:`cmux_step`). A pure rearrangement."""
    n = x.shape[-1] >> extension
    y = x.reshape(x.shape[:-1] + (n, 1 << extension))
    return jnp.moveaxis(y, -1, 1)


def merge_components(y, extension: int):
    """The inverse of :func:`split_components`: ``[B, 2^nu, ..., N]`` -> ``[B, ..., 2^nu N]``."""
    x = jnp.moveaxis(y, 1, -1)
    return x.reshape(x.shape[:-2] + (x.shape[-2] << extension,))


def component_move(shift, comps: int):
    """For X^shift on 2^nu = ``comps`` components (:func:`rotate_components`), shift int32 ``[...]`` in
    [0, 2^(nu+1) N): (src, power) int32 ``[..., 2^nu]``, component r of the result being component src[r]
    times Y^power[r] (power in [0, 2N]: s_hi, or s_hi + 1 where r < s_lo)."""
    nu = comps.bit_length() - 1
    r = jnp.arange(comps, dtype=I32)
    lo, hi = (shift & (comps - 1))[..., None], (shift >> nu)[..., None]
    return (r - lo) & (comps - 1), hi + (r < lo).astype(I32)


def rotate_components(x, shift, q):
    """X^shift A(X) in Z_Q[X]/(X^N' + 1), N' = 2^nu N, on the components of A (:func:`split_components`).

    x: uint32 ``[B, 2^nu, ..., L, N]``; shift: int32 ``[B]`` in [0, 2N'). With shift = 2^nu s_hi + s_lo,
    X^shift X^j A_j(Y) = X^(j + s_lo) Y^(s_hi) A_j(Y): component r of the result is component
    j = r - s_lo (mod 2^nu) rotated by Y^(s_hi), or by Y^(s_hi + 1) when r < s_lo (the index wrapped).
    One gather over the component axis and one negacyclic rotation per component (:func:`rotate_mod`)."""
    comps = x.shape[1]
    if comps == 1:
        return rotate_mod(x.reshape(x.shape[:1] + x.shape[2:]), shift, q)[:, None]
    src, y_shift = component_move(shift, comps)  # [B, 2^nu]; y_shift in [0, 2N]: rotate_mod reduces mod 2N
    idx = src.reshape(src.shape + (1,) * (x.ndim - 2))
    moved = jnp.take_along_axis(x, jnp.broadcast_to(idx, x.shape), axis=1)
    flat = moved.reshape((-1,) + x.shape[2:])
    return rotate_mod(flat, y_shift.reshape(-1), q).reshape(x.shape)


def cmux_step(acc, shift, ggsw, plan: NTTPlan, gplan: RNSGadgetPlan, mac):
    """ACC + GGSW [x] (X^shift ACC - ACC): ACC when the GGSW encrypts 0, X^shift ACC when it encrypts 1
    (plus noise). acc: ``[B, 2^nu, k+1, L, N]``, the 2^nu components of an accumulator over the ring of
    degree N' = 2^nu N (nu = 0: one component, the plain blind rotation); shift int32 ``[B]`` in [0, 2N').

    For nu > 0 the accumulator is under the key S(X^(2^nu)) (:mod:`crossfhe.tfhe.params`): the rotation is
    negacyclic in N' (:func:`rotate_components`), and the external product with the GGSW of a constant (over
    N) acts on each component separately, one batch that reads the GGSW once."""
    q = mac[0]
    diff = sub_mod(rotate_components(acc, shift, q), acc, q)
    return add_mod(acc, external_product(ggsw, diff, plan, gplan, mac), q)



def group_step(acc, exps, ggsws, plan: NTTPlan, gplan: RNSGadgetPlan, mac):
    """One step of the grouped blind rotation (:mod:`crossfhe.tfhe.params`): ACC + sum_t (X^(e_t) ACC_t -
    ACC_t), ACC_t = GGSW_t [x] ACC, on ``[B, 2^nu, k+1, L, N]``. exps: int32 ``[B, T]`` in [0, 2N') (one
    rotation per nonzero pattern t of the group's key bits); ggsws: ``[T, (k+1) l, k+1, L, N]`` (EVAL), the
    GGSWs of the indicators [bits = t]. ACC is decomposed and transformed once, then T products come back
    and are rotated in the coefficient domain (:func:`rotate_components`)."""
    q = mac[0]
    ev = _digits_eval(acc, plan, gplan)
    out = acc
    for t in range(ggsws.shape[0]):
        part = _mac_intt(ev, ggsws[t], plan, mac)
        out = add_mod(out, sub_mod(rotate_components(part, exps[:, t], q), part, q), q)
    return out



def sample_extract(glwe, q):
    """The LWE ciphertext of coefficient 0 of a GLWE's phase, under the key (s_0 coeffs, ..., s_{k-1} coeffs).
    (Of an accumulator in components, :func:`cmux_step`, coefficient 0 is that of component 0.)

    glwe: uint32 ``[..., k+1, L, N]`` (COEFF); q: uint32 ``[L, 1]``. Returns (b ``[..., L]``, a ``[..., L, k N]``):
    b = body_0, a_(c N) = a_c[0], a_(c N + j) = -a_c[N - j] for j >= 1 (X^N = -1), so that
    b + <a, s> is coefficient 0 of b + sum_c a_c s_c. Exact.
    """
    n = glwe.shape[-1]
    b = glwe[..., -1, :, 0]
    masks = glwe[..., :-1, :, :]  # [..., k, L, N]
    rev = jnp.concatenate([masks[..., :1], neg_mod(jnp.flip(masks[..., 1:], axis=-1), q)], axis=-1)
    k = masks.shape[-3]
    a = jnp.moveaxis(rev, -3, -2).reshape(rev.shape[:-3] + (rev.shape[-2], k * n))  # [..., L, k N]
    return b, a


def gadget_residues(gadget_vector, moduli) -> np.ndarray:
    """uint32 ``[l, L]``: g_j mod q_i (host precomputation for GGSW encryption)."""
    return np.array([[g % q for q in moduli] for g in gadget_vector], dtype=np.uint32)


# --------------------------------------------------------------------------------------------------
# Typed wrappers (the kernels above take raw arrays: the blind rotation's scan carries them)
# --------------------------------------------------------------------------------------------------


def _check_u32(data, what: str):
    data = jnp.asarray(data)
    if data.dtype != U32:
        raise TypeError(f"{what} residues must be uint32, got {data.dtype}")
    return data


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False)
class GLWECiphertext:
    """A GLWE ciphertext (or a batch): ``data`` uint32 ``[..., k+1, L, N]``, coefficient domain, masks then
    body, phase b + sum_c a_c s_c mod Q (module docstring). Static: ``moduli``."""

    data: jax.Array
    moduli: tuple[int, ...] = _static()

    @classmethod
    def create(cls, data, moduli) -> GLWECiphertext:
        moduli = tuple(int(q) for q in moduli)
        data = _check_u32(data, "GLWE")
        if data.ndim < 3 or data.shape[-3] < 2 or data.shape[-2] != len(moduli):
            raise BasisMismatchError(
                f"GLWE data of shape {tuple(data.shape)}: expected [..., k+1 >= 2, {len(moduli)}, N]"
            )
        return cls(data, moduli)

    @property
    def glwe_dim(self) -> int:
        return self.data.shape[-3] - 1

    @property
    def poly_size(self) -> int:
        return self.data.shape[-1]


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False)
class GGSWCiphertext:
    """A GGSW ciphertext: ``data`` uint32 ``[(k+1) l, k+1, L, N]`` in the evaluation domain (slot order),
    row c l + j = GLWE(0) + m g_j on component c. Static: ``moduli``, ``gadget``."""

    data: jax.Array
    moduli: tuple[int, ...] = _static()
    gadget: Gadget = _static()

    @classmethod
    def create(cls, data, moduli, gadget: Gadget) -> GGSWCiphertext:
        moduli = tuple(int(q) for q in moduli)
        data = _check_u32(data, "GGSW")
        if not isinstance(gadget, Gadget):
            raise ParameterError(f"gadget must be a Gadget, got {type(gadget).__name__}")
        if data.ndim != 4 or data.shape[-2] != len(moduli) or data.shape[0] != data.shape[1] * gadget.levels:
            raise BasisMismatchError(
                f"GGSW data of shape {tuple(data.shape)}: expected [(k+1) {gadget.levels}, k+1, {len(moduli)}, N]"
            )
        return cls(data, moduli, gadget)


@lru_cache(maxsize=32)
def _plans(n: int, moduli: tuple[int, ...], gadget: Gadget):
    t = ModulusTable.create(moduli)
    mac = (t.q, t.barrett_mu, t.bits, t.mont_qinv, t.mont_r2)
    return NTTPlan.create(n, moduli), RNSGadgetPlan.create(RNSBasis(moduli), gadget), mac


def ggsw_times_glwe(ggsw: GGSWCiphertext, glwe: GLWECiphertext) -> GLWECiphertext:
    """The external product on typed values (checks that they match; tables cached per shape)."""
    if not isinstance(ggsw, GGSWCiphertext) or not isinstance(glwe, GLWECiphertext):
        raise TypeError("ggsw_times_glwe takes a GGSWCiphertext and a GLWECiphertext")
    if ggsw.moduli != glwe.moduli or ggsw.data.shape[1:] != glwe.data.shape[-3:]:
        raise BasisMismatchError(
            f"GGSW {tuple(ggsw.data.shape)} over {ggsw.moduli} does not match GLWE {tuple(glwe.data.shape)} over "
            f"{glwe.moduli}"
        )
    plan, gplan, mac = _plans(glwe.poly_size, glwe.moduli, ggsw.gadget)
    return GLWECiphertext(_external_product_jit(ggsw.data, glwe.data, plan, gplan, mac), glwe.moduli)


@jit
def _external_product_jit(g, x, plan, gplan, mac):
    return external_product(g, x, plan, gplan, mac)
