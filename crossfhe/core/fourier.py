"""The TFHE blind rotation through a floating-point negacyclic FFT, on an accumulator held modulo Q.

The blind rotation multiplies small digit polynomials (|d| <= B/2) by bootstrapping-key polynomials mod Q.
Through the exact NTT (:func:`crossfhe.core.ggsw.external_product`) that costs (k+1) l L forward and (k+1) L
inverse limb transforms of size N per CMux; through a complex FFT of size N/2 in float64 it costs (k+1) l
forward and k+1 inverse transforms, whatever L. TFHE-rs and Concrete bootstrap the same way.

The price is rounding: each word of the float64 product carries an error (``var_fft`` of
:mod:`crossfhe.tfhe.params`), which meets the key in the phase (``var_fft_phase``, (kN/2 + 1) times as much)
and which the noise model adds to each external product. An input of concentrated spectrum (a test vector's
long constant runs) gives an error of concentrated spectrum that meets the key's mean coherently, so a
bootstrap's first step, on the test vector, goes through the exact NTT (:mod:`crossfhe.tfhe.ops`). Keys and
ciphertexts stay RNS; only the blind rotation changes (its ``FFTProduct`` and ``NativeProduct``,
:mod:`crossfhe.core.blind_rotation`, traced under ``jax.enable_x64(True)``):

* **Key side** (:func:`ggsw_to_fourier`, on the host, once per key): each GGSW polynomial, residues mod
  q_0..q_{L-1}, is lifted to its centered integer in (-Q/2, Q/2] (Garner's mixed radix), rounded to float64
  (relative error 2^-53) and transformed.
* **Accumulator**: its residues are composed once into one uint64 word in [0, Q) per coefficient (exact
  CRT; Q < 2^63, so at most two 31-bit primes) and decomposed back after the last step. In between the
  rotations, additions and subtractions are single-word arithmetic mod Q.
* **External product**: the gadget digits come from the float64 value of the centered coefficient (its
  2^-53 relative rounding joins the decomposition error), go through the forward FFT, are multiplied with
  the key rows and summed, and come back through the inverse FFT as float64 values y of integers of up to
  about 2^100, rounded to the nearest integer. y mod Q needs no exact arithmetic beyond 64 bits: with
  m = floor(y / Q) from float64 (off by at most one), y - m Q is a small integer, so it equals its value
  mod 2^64, (y mod 2^64) - m Q with wrapping int64 products; y mod 2^64 comes from an exact split of y
  into 32-bit parts (:func:`reduce_mod_q`).

Negacyclic folding: a(X) in R[X]/(X^N + 1) maps to c_j = (a_j + i a_(j+N/2)) w^j, w = exp(i pi / N), and
the FFT of c gives a at the N/2 points x_k = w exp(-2 pi i k / (N/2)), where x_k^(N/2) = i: a product of
polynomials is the pointwise product there, and the inverse undoes the twist and unfolds. x_k = w^(1 - 4k),
so a monomial X^e takes the value w^(e (1 - 4k) mod 2N) at slot k: the grouped blind rotation's step
(:func:`group_step`) rotates in this domain by a pointwise product.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.core.ggsw import component_move, rotate_mod
from crossfhe.errors import ParameterError
from crossfhe.kernels import cpu_native
from crossfhe.math.decompose import Gadget
from crossfhe.math.modular import add_mod, neg_mod, sub_mod
from crossfhe.ring.ntt import fusion_barrier

F64 = jnp.float64
I64 = jnp.int64
U64 = jnp.uint64
_static = partial(field, metadata={"static": True})
MAX_QUOTIENT_BITS = 48
"""|y| / Q < 2^48 (y the products' values, at most (k+1) l N B/4 Q): floor(y / Q) from float64 is then
within one of the true quotient (:func:`reduce_mod_q`)."""


def supports(moduli: tuple[int, ...], n: int, gadget: Gadget, glwe_dim: int) -> bool:
    """Whether the FFT blind rotation takes these parameters: Q < 2^63 and the quotient bound."""
    rows = (glwe_dim + 1) * gadget.levels
    return math.prod(moduli) < 2**63 and math.log2(rows * n) + gadget.base_log - 2 <= MAX_QUOTIENT_BITS


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class FourierPlan:
    """Constants of the FFT blind rotation, passed to kernels as arguments (NumPy arrays: float64 and
    64-bit integers only inside ``jax.enable_x64(True)``, where the kernels run).

    ``twist`` float64 ``[2, N/2]`` (cos, sin of pi j / N); ``roots`` complex128 ``[2N]`` (exp(i pi j / N),
    the powers of w); ``slot_exp`` int32 ``[N/2]``: (1 - 4k) mod 2N, slot k's point is w to this
    power; ``q`` uint64 ``[L, 1]`` (the primes);
    ``big_q`` uint64 ``[]``; ``garner`` uint64 ``[L]``: q_0^-1 mod q_1 (Q < 2^63: L <= 2; for L = 1 unused).
    Static: the ring degree, the gadget (base_log, levels) and the digit scale B^l / Q (1 for an exact
    gadget), Q as a float and as an int."""

    twist: np.ndarray
    roots: np.ndarray
    slot_exp: np.ndarray
    q: np.ndarray
    big_q: np.ndarray
    garner: np.ndarray
    n: int = _static()
    base_log: int = _static()
    levels: int = _static()
    scale: float = _static()
    big_qf: float = _static()
    modulus: int = _static(default=0)

    @classmethod
    def create(cls, n: int, moduli: tuple[int, ...], gadget: Gadget, glwe_dim: int = 1) -> FourierPlan:
        if not supports(moduli, n, gadget, glwe_dim):
            raise ParameterError(
                f"the FFT blind rotation needs Q < 2^63 (at most two 31-bit primes) and (k+1) l N B < 2^50, got "
                f"log2 Q = {math.log2(math.prod(moduli)):.1f}, N {n}, gadget {gadget} (prepare the key for NTTProduct)"
            )
        big_q = math.prod(moduli)
        j, j2 = np.arange(n // 2), np.arange(2 * n)
        inv = pow(moduli[0], -1, moduli[1]) if len(moduli) == 2 else 0
        return cls(
            twist=np.stack([np.cos(np.pi * j / n), np.sin(np.pi * j / n)]),
            roots=np.cos(np.pi * j2 / n) + 1j * np.sin(np.pi * j2 / n),
            slot_exp=((1 - 4 * j) % (2 * n)).astype(np.int32),
            q=np.array(moduli, dtype=np.uint64)[:, None],
            big_q=np.array(big_q, dtype=np.uint64),
            garner=np.array([0, inv], dtype=np.uint64)[: len(moduli)],
            n=n,
            base_log=gadget.base_log,
            levels=gadget.levels,
            scale=1.0 if gadget.is_exact_for(big_q) else float(Fraction(gadget.base**gadget.levels, big_q)),
            big_qf=float(big_q),
            modulus=big_q,
        )


# --------------------------------------------------------------------------------------------------
# Transforms and conversions (traced under x64)
# --------------------------------------------------------------------------------------------------


def forward(a, twist):
    """float64 ``[..., N]`` (a polynomial mod X^N + 1) -> complex128 ``[..., N/2]``, its values at x_k."""
    h = a.shape[-1] // 2
    cos, sin = twist[0], twist[1]
    lo, hi = a[..., :h], a[..., h:]
    c = jax.lax.complex(lo * cos - hi * sin, lo * sin + hi * cos)
    return jnp.fft.fft(c, axis=-1)


def inverse(c, twist):
    """The inverse of :func:`forward`, rounded to the nearest integer: complex128 ``[..., N/2]`` -> float64
    ``[..., N]``."""
    z = jnp.fft.ifft(c, axis=-1)
    re, im = jnp.real(z), jnp.imag(z)
    cos, sin = twist[0], twist[1]
    return _round(jnp.concatenate([re * cos + im * sin, im * cos - re * sin], axis=-1))


def _round(x):
    """Nearest integer (ties up) of float64 x; exact (x + 0.5 is exact where x has a fraction part)."""
    return jnp.floor(x + 0.5)


def compose(x, plan: FourierPlan):
    """uint32 residues ``[..., L, N]`` -> uint64 ``[..., N]`` in [0, Q): exact CRT (Garner, L <= 2)."""
    r = x.astype(U64)
    if r.shape[-2] == 1:
        return r[..., 0, :]
    q0, q1 = plan.q[0], plan.q[1]
    r0, r1 = r[..., 0, :], r[..., 1, :]
    v = (r1 + q1 - r0 % q1) % q1 * plan.garner[1] % q1  # products < 2^62
    return r0 + q0 * v


def decompose(x, plan: FourierPlan):
    """uint64 ``[..., N]`` in [0, Q) -> uint32 residues ``[..., L, N]``. Exact."""
    return (x[..., None, :] % plan.q).astype(jnp.uint32)


def reduce_mod_q(y, plan: FourierPlan):
    """Integer-valued float64 y, |y| < 2^48 Q -> an integer in [0, Q) congruent to y mod Q, uint64. Exact.

    m = floor(y / Q) in float64 is within one of the true quotient (two roundings of relative size 2^-53
    on a value below 2^48 move it by less than 2^-4), so t = y - m Q lies in [-Q, 2Q) and equals its value
    mod 2^64: (y mod 2^64) - m Q in wrapping
    int64 arithmetic. y mod 2^64 = a_1 2^32 + a_0 (wrapping), from y = a_2 2^64 + a_1 2^32 + a_0 with
    a_2 = round(y 2^-64), a_1 = round((y - a_2 2^64) 2^-32): each rest is a representable float64 (a multiple
    of y's unit in the last place, below 2^63 resp. 2^31), so |a_1|, |a_0| <= 2^31 exactly."""
    m = jnp.floor(y * (1.0 / plan.big_qf)).astype(I64)
    rest = y - _round(y * 2.0**-64) * 2.0**64
    a1 = _round(rest * 2.0**-32)
    a0 = rest - a1 * 2.0**32
    low = (a1.astype(I64) << 32) + a0.astype(I64)  # y mod 2^64 (wraps)
    qs = plan.big_q.astype(I64)
    t = low - m * qs  # wraps to the true value in [-Q, 2Q)
    t = jnp.where(t < 0, t + qs, t)
    t = jnp.where(t >= qs, t - qs, t)
    return t.astype(U64)


def gadget_digits(x, plan: FourierPlan):
    """Signed gadget digits of x uint64 ``[..., N]`` in [0, Q), float64 ``[..., l, N]`` (MSB first), as
    :func:`crossfhe.math.decompose.gadget_digits_rns` takes them, from the float64 value of the centered x:
    v = round(x_c B^l / Q) and all digits balanced in [-B/2, B/2) with the top carry dropped (approximate
    gadget), or v = x_c with digit 0 taking the rest, in [-B/2, B/2] (exact gadget). sum_j d_j g_j (g of
    :meth:`Gadget.vector`) is x up to the gadget's rounding plus 2^-53 Q from the float value.

    v is rint(x_c scale), one rounding of the product (ties to even), not floor(x_c scale + 0.5): a compiler may
    or may not contract that multiply-add into one FMA (XLA:CPU and GCC do, XLA's GPU build did not), and the two
    round differently where x_c scale lies within an ulp of a half-integer: for B^l >= 2^53 a few coefficients in
    a hundred, and one digit changed changes every word of the product. The native kernel computes v the same
    way."""
    qs = plan.big_q
    xc = jnp.where(x > qs >> 1, x.astype(I64) - qs.astype(I64), x.astype(I64))
    v = jnp.round(xc.astype(F64) * plan.scale)
    base = float(1 << plan.base_log)
    out = []
    for _ in range(plan.levels - 1):  # least significant first
        hi = _round(v * (1.0 / base))
        out.append(v - hi * base)
        v = hi
    if plan.scale != 1.0:  # approximate gadget: the carry out of the top digit is dropped (B^l g ~ Q = 0)
        v = v - _round(v * (1.0 / base)) * base
    out.append(v)
    return jnp.stack(out[::-1], axis=-2)


# --------------------------------------------------------------------------------------------------
# External product and blind rotation (traced under x64)
# --------------------------------------------------------------------------------------------------


def _digits_fourier(glwe, plan: FourierPlan):
    """The gadget digits of glwe uint64 ``[..., k+1, N]`` through the forward FFT: complex128
    ``[..., (k+1) l, N/2]`` (row c l + j)."""
    k1, n = glwe.shape[-2], glwe.shape[-1]
    d = gadget_digits(glwe, plan)  # [..., k+1, l, N]: row c l + j
    # materialized: fused into the FFT's input, the digits (and the rotation before them) are recomputed per
    # element the FFT reads (benchmarks/README.md)
    d = fusion_barrier(d, plan.q)
    return forward(d.reshape(d.shape[:-3] + (k1 * plan.levels, n)), plan.twist)


def external_product(ggsw_f, glwe, plan: FourierPlan):
    """GGSW [x] GLWE through the FFT (module docstring). ggsw_f: complex128 ``[(k+1) l, k+1, N/2]``
    (:func:`ggsw_to_fourier`); glwe: uint64 ``[..., k+1, N]`` in [0, Q) (COEFF). Returns uint64
    ``[..., k+1, N]``: the exact product plus the rounding error."""
    ev = _digits_fourier(glwe, plan)  # [..., R, N/2]
    acc = ev[..., 0, None, :] * ggsw_f[0]
    for r in range(1, ev.shape[-2]):
        acc = acc + ev[..., r, None, :] * ggsw_f[r]  # [..., k+1, N/2]
    return reduce_mod_q(inverse(acc, plan.twist), plan)


def rotate(x, shift, q):
    """X^shift A(X) on the 2^nu components of A (:func:`crossfhe.core.ggsw.rotate_components`, the same
    result) in one gather: x ``[B, 2^nu, k+1, N]`` (any integer dtype), shift int32 ``[B]`` in [0, 2^(nu+1) N).
    Output component r, coefficient j, is +-x[(r - s_lo) mod 2^nu, :, (j - s') mod N] with s' = s_hi + [r <
    s_lo] (s = 2^nu s_hi + s_lo) and the sign of the negacyclic wrap, read through one flat index (one pass
    over memory instead of a component gather then a rotation)."""
    batch, comps, k1, n = x.shape
    if comps == 1:  # no component gather: the plain negacyclic rotation
        return rotate_mod(x[:, 0], shift, q)[:, None]
    src, power = (v[..., None] for v in component_move(shift, comps))  # [B, 2^nu, 1]
    t = (jnp.arange(n, dtype=jnp.int32) - power) % (2 * n)  # [B, 2^nu, N]
    neg = t >= n
    idx = (src * k1 * n + jnp.where(neg, t - n, t))[:, :, None, :]
    idx = idx + (jnp.arange(k1, dtype=jnp.int32) * n)[None, None, :, None]  # [B, 2^nu, k+1, N]
    g = jnp.take_along_axis(x.reshape(batch, -1), idx.reshape(batch, -1), axis=1).reshape(x.shape)
    return jnp.where(neg[:, :, None, :], neg_mod(g, q), g)


def cmux_step(acc, shift, ggsw_f, plan: FourierPlan):
    """ACC + GGSW [x] (X^shift ACC - ACC) on uint64 ``[B, 2^nu, k+1, N]`` (as
    :func:`crossfhe.core.ggsw.cmux_step`, one word mod Q per coefficient)."""
    q = plan.big_q
    # materialized: recomputed by each digit level otherwise
    diff = fusion_barrier(sub_mod(rotate(acc, shift, q), acc, q), plan.q)
    return add_mod(acc, external_product(ggsw_f, diff, plan), q)



def group_step(acc, exps, keys_f, plan: FourierPlan):
    """One step of the grouped blind rotation (:mod:`crossfhe.tfhe.params`): ACC + sum_t (X^(e_t) - 1)
    (GGSW_t [x] ACC) on uint64 ``[B, 2^nu, k+1, N]``. exps: int32 ``[B, T]`` in [0, 2N') (e_t, one per
    nonzero pattern t of the group's bits); keys_f: complex128 ``[T, (k+1) l, k+1, N/2]``.

    ACC is decomposed and transformed once; the T products P_t are summed after a pointwise product with
    X^(e_t) - 1, which on the 2^nu components is :func:`rotate`'s component move plus X^(s') in the ring
    of degree N, the value w^(s' (1 - 4k)) at slot k (``plan.roots``); one inverse transform."""
    q = plan.big_q
    comps, n = acc.shape[1], acc.shape[-1]
    ev = _digits_fourier(acc, plan)  # [B, 2^nu, R, N/2]
    prod = ev[..., 0, None, None, :] * keys_f[:, 0]
    for r in range(1, ev.shape[-2]):
        prod = prod + ev[..., r, None, None, :] * keys_f[:, r]  # [B, 2^nu, T, k+1, N/2]
    src, power = (jnp.swapaxes(v, 1, 2) for v in component_move(exps, comps))  # [B, 2^nu, T], s' in [0, 2N]
    idx = (power[..., None] * plan.slot_exp) & (2 * n - 1)  # [B, 2^nu, T, N/2]: mod 2N, exact as it wraps
    mono = plan.roots[idx]  # [B, 2^nu, T, N/2]
    if comps == 1:
        out = jnp.sum((mono - 1.0)[..., None, :] * prod, axis=2)
    else:
        # materialized: the gather below would recompute the products per element read
        prod = fusion_barrier(prod, plan.q)
        moved = jnp.take_along_axis(prod, src[..., None, None], axis=1)
        out = jnp.sum(mono[..., None, :] * moved - prod, axis=2)  # [B, 2^nu, k+1, N/2]
    return add_mod(acc, reduce_mod_q(inverse(out, plan.twist), plan), q)



# --------------------------------------------------------------------------------------------------
# Key side (host)
# --------------------------------------------------------------------------------------------------


def centered_float(residues: np.ndarray, moduli: tuple[int, ...]) -> np.ndarray:
    """uint32 residues ``[..., L, N]`` of integers mod Q -> float64 ``[..., N]``, the centered representative
    in (-Q/2, Q/2] rounded to float64 (Garner's mixed-radix digits, exact in uint64; Horner in float64):
    within 2^-53 Q of it modulo Q (near +-Q/2 the rounding may land on the other end, the same class)."""
    r = residues.astype(np.uint64)
    digits = []  # v_i: x = v_0 + v_1 q_0 + v_2 q_0 q_1 + ..., v_i in [0, q_i)
    for i, qi in enumerate(moduli):
        q = np.uint64(qi)
        t = r[..., i, :] % q
        for j in range(i):  # t <- (t - v_j) / q_j mod q_i
            t = (t + q - digits[j] % q) % q * np.uint64(pow(moduli[j] % qi, -1, qi)) % q
        digits.append(t)
    x = np.zeros(r.shape[:-2] + r.shape[-1:], dtype=np.float64)
    for i in reversed(range(len(moduli))):
        x = x * float(moduli[i]) + digits[i].astype(np.float64)
    big_q = float(np.prod([float(q) for q in moduli]))
    return np.where(x > big_q / 2, x - big_q, x)


def ggsw_to_fourier(ggsw_coeff: np.ndarray, moduli: tuple[int, ...]) -> np.ndarray:
    """GGSW rows in the coefficient domain, uint32 ``[..., L, N]`` -> complex128 ``[..., N/2]`` (the key
    operand of :func:`external_product`), on the host."""
    x = centered_float(np.asarray(ggsw_coeff), moduli)
    n = x.shape[-1]
    h = n // 2
    j = np.arange(h)
    c = (x[..., :h] + 1j * x[..., h:]) * np.exp(1j * np.pi * j / n)
    return np.fft.fft(c, axis=-1)


# --------------------------------------------------------------------------------------------------
# The native CPU kernel (crossfhe.kernels.cpu_native): the same grouped blind rotation, one custom call
# --------------------------------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class NativeTables:
    """Constants of the native blind rotation (:class:`crossfhe.core.blind_rotation.NativeProduct`) for one
    :class:`FourierPlan` and one build of the kernel,
    made once (on the host, outside any trace) and passed to it as arguments: ``order`` int32 ``[N/2]`` (the
    kernel's FFT slot order, :func:`crossfhe.kernels.cpu_native.slot_order`: position p holds the point
    x_k = w^(1 - 4k), k = order[p]), ``tw`` float64 ``[2, N/2]`` (its FFT twiddles), ``twist`` float64 ``[2, N/2]``
    (the plan's), ``roots`` float64 ``[2, 2N]`` (cos, sin planes of the plan's roots, the powers of w), ``zeta``
    float64 ``[2, N/2]`` (the powers of w^-4: X^e at x_k is w^e (w^-4)^(e k)). Static: ``target``, the custom
    call of the build whose slot order ``order`` is (a key laid out by :func:`native_key` for these tables is
    rotated by that build)."""

    order: jax.Array
    tw: jax.Array
    twist: jax.Array
    roots: jax.Array
    zeta: jax.Array
    target: str = _static()

    @classmethod
    def create(cls, plan: FourierPlan) -> NativeTables:
        """The tables of the loaded build (RuntimeError if there is none), as device arrays (float64)."""
        h = plan.n // 2
        target, _ = cpu_native.targets()
        order = cpu_native.slot_order(h)
        with jax.ensure_compile_time_eval(), jax.enable_x64(True):
            return cls(
                order=jnp.asarray(order, dtype=jnp.int32),
                tw=jnp.asarray(cpu_native.fft_twiddles(h)),
                twist=jnp.asarray(plan.twist, dtype=F64),
                roots=jnp.asarray(np.stack([np.real(plan.roots), np.imag(plan.roots)])),
                zeta=jnp.asarray(cpu_native.powers_of_unity(h)),
                target=target,
            )


def native_key(keys_f: np.ndarray, tables: NativeTables) -> np.ndarray:
    """The grouped Fourier key complex128 ``[G, T, (k+1) l, k+1, N/2]`` (:func:`ggsw_to_fourier`, natural slot
    order) as the native kernel reads it: float64 ``[G, N/2 / 8, T, (k+1) l, k+1, 2, 8]``, real and imaginary
    planes in the kernel's slot order, blocked by 8 slots so that a step reads its keys in one stream. Host."""
    k = np.asarray(keys_f)[..., np.asarray(tables.order)]
    planes = np.stack([k.real, k.imag], axis=-2)  # [G, T, R, k+1, 2, N/2]
    block = cpu_native.BLOCK
    planes = planes.reshape(planes.shape[:-1] + (planes.shape[-1] // block, block))
    return np.ascontiguousarray(np.moveaxis(planes, -2, 1))


