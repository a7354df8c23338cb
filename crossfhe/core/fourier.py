"""The TFHE external product through a floating-point negacyclic FFT, for GLWE over an RNS modulus Q.

The blind rotation multiplies small digit polynomials (|d| <= B/2) by bootstrapping-key polynomials mod Q.
Through the exact NTT (:func:`crossfhe.core.ggsw.external_product`) that costs (k+1) l L forward and (k+1) L
inverse limb transforms of size N per CMux; through a complex FFT of size N/2 in float64 it costs (k+1) l
forward and k+1 inverse transforms, whatever L, and XLA:CPU's FFT of 1024 complex points took about 8 us
against about 17 us for one radix-2 limb NTT of 2048 points. TFHE-rs and Concrete bootstrap the same way.

The price is rounding: the float64 product carries an error (module :func:`crossfhe.tfhe.params`
``var_fft``), which the noise model adds to each external product; the keys, the ciphertexts and every
other step stay exact RNS arithmetic. This module only changes how one product is computed:

* **Key side** (:func:`ggsw_to_fourier`, on the host, once per key): each GGSW polynomial, residues mod
  q_0..q_{L-1}, is lifted to its centered integer in (-Q/2, Q/2] (Garner's mixed radix), rounded to float64
  (relative error 2^-53) and transformed.
* **Data side** (:func:`external_product`, traced under ``jax.enable_x64(True)``): the gadget digits of the
  GLWE (exact, from the residues) go through the forward FFT, are multiplied with the key rows and summed,
  and come back through the inverse FFT as float64 values of integers of up to about 2^100, rounded to the
  nearest integer. Such a value y is split exactly into y = a_2 2^64 + a_1 2^32 + a_0 with |a_i| < 2^53,
  each part reduced mod q_i in float64 (exact below 2^53) and the parts recombined with Shoup products
  (:func:`to_residues`): the residues of one integer, which differs from the exact product by the
  rounding error only, so the limbs stay consistent.

Negacyclic folding: a(X) in R[X]/(X^N + 1) maps to c_j = (a_j + i a_(j+N/2)) w^j, w = exp(i pi / N), and
the FFT of c gives a at the N/2 points x_k = w exp(-2 pi i k / (N/2)), where x_k^(N/2) = i: a product of
polynomials is the pointwise product there, and the inverse undoes the twist and unfolds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.errors import ParameterError
from crossfhe.math.decompose import Gadget
from crossfhe.math.modular import U32, reduce_once, shoup_mul, sub_mod

F64 = jnp.float64
U64 = jnp.uint64
_static = partial(field, metadata={"static": True})
MAX_PRODUCT_BITS = 126
"""The inverse FFT's values must stay below 2^126 for :func:`to_residues` (four parts of at most 2^31)."""


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class FourierPlan:
    """Constants of the FFT product for ring degree N and moduli q_i, passed to kernels as arguments.

    ``twist`` float64 ``[2, N/2]`` (cos, sin of pi j / N); ``qf`` float64 ``[L, 1]``; ``q`` uint32
    ``[L, 1]``; ``c``, ``cs`` uint32 ``[3, L, 1]``: 2^32, 2^64, 2^96 mod q_i and their Shoup companions; ``garner`` and
    ``garner_s`` uint32 ``[L, L]``, entry (i, j) = q_j^-1 mod q_i and its Shoup companion. Arrays are NumPy,
    so they become float64 only inside ``jax.enable_x64(True)``, where the kernels run. Static: the ring
    degree, the gadget (base_log, levels), the digit scale B^l / Q (1 for an exact gadget) and Q as a
    float."""

    twist: np.ndarray
    qf: np.ndarray
    q: np.ndarray
    c: np.ndarray
    cs: np.ndarray
    garner: np.ndarray
    garner_s: np.ndarray
    n: int = _static()
    base_log: int = _static()
    levels: int = _static()
    scale: float = _static()
    big_q: float = _static()

    @classmethod
    def create(cls, n: int, moduli: tuple[int, ...], gadget: Gadget) -> FourierPlan:
        if max(moduli) >= 2**31 or max(moduli) >= 2 * min(moduli):
            raise ParameterError(
                f"the FFT external product needs moduli below 2^31 within a factor 2 of each other, got {moduli}"
                " (use kernel='ntt')"
            )
        big_q = math.prod(moduli)
        limbs = len(moduli)
        garner = np.zeros((limbs, limbs), dtype=np.uint32)
        garner_s = np.zeros((limbs, limbs), dtype=np.uint32)
        for i, qi in enumerate(moduli):
            for jj in range(i):
                garner[i, jj] = pow(moduli[jj] % qi, -1, qi)
                garner_s[i, jj] = (int(garner[i, jj]) << 32) // qi
        j = np.arange(n // 2)
        twist = np.stack([np.cos(np.pi * j / n), np.sin(np.pi * j / n)])

        def col(values):
            return np.array(values, dtype=np.uint32)[:, None]

        c = [[(1 << (32 * i)) % q for q in moduli] for i in (1, 2, 3)]
        return cls(
            twist=twist,
            qf=np.array(moduli, dtype=np.float64)[:, None],
            q=col(moduli),
            c=np.stack([col(row) for row in c]),
            cs=np.stack([col([(w << 32) // q for w, q in zip(row, moduli, strict=True)]) for row in c]),
            garner=garner,
            garner_s=garner_s,
            n=n,
            base_log=gadget.base_log,
            levels=gadget.levels,
            scale=1.0 if gadget.is_exact_for(big_q) else float(Fraction(gadget.base**gadget.levels, big_q)),
            big_q=float(big_q),
        )


# --------------------------------------------------------------------------------------------------
# Transforms (traced under x64)
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


def _barrier(x, table):
    """x, materialized (as :func:`crossfhe.ring.ntt.fusion_barrier`, for float arrays): a conditional on a
    runtime value (``table``, residues below 2^31) whose branches are both the identity."""
    pred = table[(0,) * table.ndim] < jnp.uint32(2**31)
    return jax.lax.cond(pred, lambda u: u, lambda u: u + 0.0, x)


def _round(x):
    """Nearest integer (ties up) of float64 x; exact (x + 0.5 is exact where x has a fraction part)."""
    return jnp.floor(x + 0.5)


def _mod_small(a, q):
    """Integer-valued float64 a in [-2^31, 2^31] -> a mod q in [0, q), uint64 (q in (2^30, 2^31))."""
    q = q.astype(jnp.int64)
    v = a.astype(jnp.int64) + 2 * q  # in [0, 4q): -2^31 > -2q and 2^31 < 2q
    v = jnp.where(v >= 2 * q, v - 2 * q, v)
    return jnp.where(v >= q, v - q, v).astype(U64)


def to_residues(y, plan: FourierPlan):
    """Integer-valued float64 ``[..., N]``, |y| < 2^126 -> its residues uint32 ``[..., L, N]``. Exact.

    y = a_3 2^96 + a_2 2^64 + a_1 2^32 + a_0, each a_i = round(rest 2^-32i) of what the higher parts left:
    each rest is a representable float64 (a multiple of y's unit in the last place below 2^(32 i + 31)),
    so the split is exact and |a_i| <= 2^31. Then r = a_0 + sum_i (a_i mod q) (2^32i mod q), Shoup products
    with native 64-bit integers (x64)."""
    parts = []
    rest = y
    for i in (3, 2, 1):
        a = _round(rest * 2.0 ** (-32 * i))
        rest = rest - a * 2.0 ** (32 * i)
        parts.append(a)
    parts.append(rest)
    # materialized once per coefficient, not recomputed for each limb by the fused consumer
    parts = _barrier(jnp.stack(parts[::-1])[..., None, :], plan.q)  # [4, ..., 1, N]: a_0 .. a_3
    q = plan.q
    s = _mod_small(parts[0], q)
    for i in range(1, 4):
        s = s + _shoup64(_mod_small(parts[i], q), plan.c[i - 1], plan.cs[i - 1], q)  # < 7q < 2^34
    for step in (4, 2, 1):
        s = jnp.where(s >= step * q.astype(U64), s - step * q.astype(U64), s)
    return s.astype(U32)


def _shoup64(x, w, ws, q):
    """x w mod q in [0, 2q) for x, w < q < 2^31 (Shoup, with native 64-bit products under x64)."""
    w, ws, q = w.astype(U64), ws.astype(U64), q.astype(U64)
    return x * w - ((x * ws) >> 32) * q


def centered_approx(x, plan: FourierPlan):
    """uint32 residues ``[..., L, N]`` -> float64 ``[..., N]``: the centered representative in (-Q/2, Q/2],
    rounded to float64 (relative error 2^-53). Garner's mixed-radix digits are exact (Shoup products; the
    moduli lie within a factor 2, so v_j mod q_i is one conditional subtraction), the sum is float64."""
    limbs = x.shape[-2]
    q = plan.q
    digits = []
    for i in range(limbs):
        t = x[..., i, :]
        qi = q[i]
        for j in range(i):
            vj = reduce_once(digits[j], qi)
            t = shoup_mul(sub_mod(t, vj, qi), plan.garner[i, j], plan.garner_s[i, j], qi)
        digits.append(t)
    v = digits[-1].astype(F64)
    for i in reversed(range(limbs - 1)):
        v = v * plan.qf[i] + digits[i].astype(F64)
    return jnp.where(v > 0.5 * plan.big_q, v - plan.big_q, v)


def gadget_digits(x, plan: FourierPlan):
    """Signed gadget digits of residues ``[..., L, N]``, float64 ``[..., l, N]`` (MSB first), from the
    float64 value of x, as :func:`crossfhe.math.decompose.gadget_digits_rns` takes them: v = round(x_c B^l / Q)
    and all digits balanced in [-B/2, B/2) with the top carry dropped (approximate gadget), or v = x_c with
    digit 0 taking the rest, in [-B/2, B/2] (exact gadget). sum_j d_j g_j (g of :meth:`Gadget.vector`) is x up to
    the gadget's rounding plus 2^-53 relative error from the float value (counted in ``var_fft``)."""
    v = _round(centered_approx(x, plan) * plan.scale)
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


def external_product(ggsw_f, glwe, plan: FourierPlan):
    """GGSW [x] GLWE through the FFT (module docstring). ggsw_f: complex128 ``[(k+1) l, k+1, N/2]``
    (:func:`ggsw_to_fourier`); glwe: uint32 ``[..., k+1, L, N]`` (COEFF). Returns uint32 ``[..., k+1, L, N]``
    (COEFF): the exact product plus the rounding error. Traceable under ``jax.enable_x64(True)``."""
    k1, n = glwe.shape[-3], glwe.shape[-1]
    d = gadget_digits(glwe, plan)  # [..., k+1, l, N]: row c l + j
    d = d.reshape(d.shape[:-3] + (k1 * plan.levels, n))
    d = _barrier(d, plan.q)  # the twist reads two digits per point: computed once, not twice
    ev = forward(d, plan.twist)  # [..., R, N/2]
    acc = ev[..., 0, None, :] * ggsw_f[0]
    for r in range(1, ev.shape[-2]):
        acc = acc + ev[..., r, None, :] * ggsw_f[r]  # [..., k+1, N/2]
    return to_residues(inverse(acc, plan.twist), plan)


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
