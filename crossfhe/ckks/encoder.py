"""CKKS encoding: the canonical embedding, its special FFT, and integer plaintexts in RNS form.

Slots. A real polynomial m(X) of R[X]/(X^N + 1) has the N/2 complex slots

    z_j = m(zeta^(5^j mod 2N)),   j = 0 .. N/2 - 1,   zeta = exp(i pi / N),

the canonical embedding at one root of each conjugate pair, ordered by powers of 5 (Cheon, Kim, Kim, Song,
"Homomorphic Encryption for Arithmetic of Approximate Numbers", ASIACRYPT 2017; the slot order of HEAAN
and SEAL). In this order the automorphism X -> X^(5^r mod 2N) rotates the slots left by r
(z'_j = z_{j+r}) and X -> X^(2N-1) conjugates them.

Special FFT. As 5^j = 1 (mod 4), zeta^(5^j N/2) = i, so z_j = sum_{k<N/2} w_k zeta^(5^j k) with
w_k = m_k + i m_{N/2+k}: the complex polynomial w evaluated at the 2N-th roots zeta^(5^j). For s a power
of two and xi = exp(i pi / (2 s)), :func:`special_fft` maps w in C^s to z_j = sum_{k<s} w_k xi^(5^j k) by
decimation in time: w(x) = w_even(x^2) + x w_odd(x^2), the points xi^(2 5^j) are those of size s/2
(5 has order s/2 mod 2s) and xi^(5^(j+s/2)) = -xi^(5^j) (5^(s/2) = 2s + 1 mod 4s), so
z_j = E_j + xi^(5^j) O_j and z_{j+s/2} = E_j - xi^(5^j) O_j. Bit-reversed input, log2(s) butterfly
stages (HEAAN's ``fftSpecial`` / ``fftSpecialInv``), O(s log s), tables in a :class:`SpecialFFTPlan`.

Sparse packing. s < N/2 slots (s a power of two) use the subring R[Y]/(Y^(2s) + 1) with Y = X^g,
g = N/(2s): m(X) = m'(X^g) has non-zero coefficients only at multiples of g, and its N/2 slots are the s
slots of m' repeated g times (5^j mod 4s has period s). So encoding s values equals encoding them tiled
to N/2 slots (packing by replication); decoding s slots reads the coefficients on the stride g, which
is the average of the g replicas of each slot (the trace onto the subring).

Encoding is host-side preprocessing in NumPy float64 / complex128; plaintexts are ``uint32[..., limbs, N]``
coefficient-domain residues. :func:`special_fft_jax` is the decoding FFT as a jitted JAX kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.errors import BasisMismatchError, ParameterError
from crossfhe.math.modular import ModulusTable, barrett_mul, reduce_u64
from crossfhe.math.rns import RNSBasis, compose_float
from crossfhe.math.xla import jit, plan_cache

_MANTISSA_BITS = 53
_FLOAT_MAX_EXPONENT = 1023

_static = partial(field, metadata={"static": True})


# --------------------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------------------


def _is_power_of_two(x: int) -> bool:
    return x >= 1 and x & (x - 1) == 0


def _check_ring_degree(n) -> int:
    if not isinstance(n, (int, np.integer)) or not _is_power_of_two(int(n)) or n < 2:
        raise ParameterError(f"ring degree N must be a power of two >= 2, got {n!r}")
    return int(n)


def slots(n: int) -> int:
    """The number of complex slots of R[X]/(X^N + 1): N / 2 (N a power of two >= 2)."""
    return _check_ring_degree(n) // 2


def _check_slot_count(s: int, n: int, what: str) -> int:
    if not (_is_power_of_two(s) and (n // 2) % s == 0):
        raise ParameterError(
            f"{what}: the slot count must be a power of two dividing N/2 = {n // 2} (N = {n}), got {s}"
        )
    return s


def _check_scale(scale) -> float:
    try:
        value = float(scale)
    except (TypeError, ValueError, OverflowError) as err:
        raise ParameterError(f"scale must be a positive finite number, got {scale!r}") from err
    if not (math.isfinite(value) and value > 0):
        raise ParameterError(f"scale must be a positive finite number, got {scale!r}")
    return value


def _basis(moduli) -> RNSBasis:
    return RNSBasis(tuple(int(q) for q in moduli))


def _as_slot_vector(values, what: str) -> np.ndarray:
    z = np.asarray(values)
    if z.dtype == object or not (np.issubdtype(z.dtype, np.number) or z.dtype == bool):
        raise ParameterError(f"{what}: values must be a numeric (real or complex) array, got dtype {z.dtype}")
    if z.ndim < 1:
        raise ParameterError(f"{what}: values must have a slot axis (shape [..., slots]), got a scalar")
    z = z.astype(np.complex128)
    if not np.isfinite(z).all():
        raise ParameterError(f"{what}: values must be finite (found NaN or infinity)")
    return z


# --------------------------------------------------------------------------------------------------
# Special FFT
# --------------------------------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False)
class SpecialFFTPlan:
    """Tables of the special FFT of size s (a power of two); create with :meth:`create` (cached).

    ``bitrev``: int32[s], the log2(s)-bit reversal permutation. ``roots``: complex128[s - 1]; the stage of
    half-length h (blocks of 2h) uses ``roots[h - 1 : 2h - 1]``, root_j = exp(2 pi i (5^j mod 8h) / 8h),
    j < h. ``size`` is static. A pytree: passed to :func:`special_fft_jax` the tables are arguments.
    """

    bitrev: np.ndarray
    roots: np.ndarray
    size: int = _static()

    @staticmethod
    def create(size: int) -> SpecialFFTPlan:
        if not isinstance(size, (int, np.integer)) or not _is_power_of_two(int(size)):
            raise ParameterError(f"special FFT size must be a power of two >= 1, got {size!r}")
        return _create_plan(int(size))


@plan_cache(maxsize=32)
def _create_plan(s: int) -> SpecialFFTPlan:
    log_s = s.bit_length() - 1
    idx = np.arange(s, dtype=np.int64)
    rev = np.zeros(s, dtype=np.int64)
    for b in range(log_s):
        rev |= ((idx >> b) & 1) << (log_s - 1 - b)
    roots = np.zeros(max(s - 1, 0), dtype=np.complex128)
    h = 1
    while h < s:
        period = 8 * h
        k = np.array([pow(5, j, period) for j in range(h)], dtype=np.float64)
        roots[h - 1 : 2 * h - 1] = np.exp(2j * np.pi * k / period)
        h *= 2
    rev = rev.astype(np.int32)
    rev.flags.writeable = False
    roots.flags.writeable = False
    return SpecialFFTPlan(bitrev=rev, roots=roots, size=s)


def _forward(w, plan: SpecialFFTPlan, xp):
    """Butterflies of :func:`special_fft` on ``w[..., s]`` with NumPy or jnp (``xp``)."""
    s = plan.size
    batch = w.shape[:-1]
    v = xp.take(w, plan.bitrev, axis=-1)
    h = 1
    while h < s:
        v = v.reshape(batch + (s // (2 * h), 2, h))
        a, b = v[..., 0, :], v[..., 1, :] * plan.roots[h - 1 : 2 * h - 1]
        v = xp.stack([a + b, a - b], axis=-2).reshape(batch + (s,))
        h *= 2
    return v


def special_fft(w) -> np.ndarray:
    """z_j = sum_{k<s} w_k xi^(5^j k), xi = exp(i pi / (2s)), for j < s. NumPy, O(s log s).

    w: complex[..., s], s a power of two. Returns complex128[..., s]. With w_k = m_k + i m_{s+k} this is
    the slot vector of the real polynomial m of R[X]/(X^(2s) + 1) (:func:`embed`). Each output has an
    absolute error of a few units of 2^-53 log2(s) sum_k |w_k| (float64 butterflies).
    """
    w = np.asarray(w, dtype=np.complex128)
    return _forward(w, SpecialFFTPlan.create(w.shape[-1]), np)


def special_fft_inverse(z) -> np.ndarray:
    """The inverse of :func:`special_fft`: w with special_fft(w) = z. NumPy, O(s log s).

    z: complex[..., s], s a power of two. Returns complex128[..., s]: Gentleman-Sande butterflies with the
    conjugate roots in the mirrored order, then the bit reversal and a division by s.
    """
    z = np.asarray(z, dtype=np.complex128)
    plan = SpecialFFTPlan.create(z.shape[-1])
    s = plan.size
    batch = z.shape[:-1]
    v = z
    h = s // 2
    while h >= 1:
        v = v.reshape(batch + (s // (2 * h), 2, h))
        a, b = v[..., 0, :], v[..., 1, :]
        v = np.stack([a + b, (a - b) * np.conj(plan.roots[h - 1 : 2 * h - 1])], axis=-2).reshape(batch + (s,))
        h //= 2
    return np.take(v, plan.bitrev, axis=-1) / s


@jit
def special_fft_jax(w, plan: SpecialFFTPlan):
    """:func:`special_fft` as a jitted JAX kernel (the core of decoding, runnable on an accelerator).

    w: complex[..., s] with s = ``plan.size``. Returns complex[..., s] in the dtype of w: complex128
    (same precision as :func:`special_fft`) inside ``with jax.enable_x64(True):``, complex64 otherwise
    (the tables are then rounded to complex64 as well: relative error about 2^-24 log2(s)). complex128
    needs a backend with float64 (CPU, GPU; not TPU).
    """
    w = jnp.asarray(w)
    if w.shape[-1] != plan.size:
        raise ParameterError(f"special_fft_jax: input has {w.shape[-1]} entries, the plan is for {plan.size}")
    return _forward(w, plan, jnp)


# --------------------------------------------------------------------------------------------------
# Canonical embedding
# --------------------------------------------------------------------------------------------------


def embed(m) -> np.ndarray:
    """The N/2 slots of real polynomials: z_j = m(zeta^(5^j mod 2N)), zeta = exp(i pi / N).

    m: real float[..., N] (coefficients m_0..m_{N-1}), N a power of two >= 2. Returns complex128[..., N/2],
    computed as :func:`special_fft` of w_k = m_k + i m_{N/2+k}. O(N log N).
    """
    m = np.asarray(m, dtype=np.float64)
    if m.ndim < 1:
        raise ParameterError("embed: m must have a coefficient axis (shape [..., N]), got a scalar")
    half = slots(m.shape[-1])
    return special_fft(m[..., :half] + 1j * m[..., half:])


def embed_inverse(z, n: int) -> np.ndarray:
    """The real polynomial of degree < N whose slots are z (before scaling): embed(embed_inverse(z, N)) = z.

    z: complex (or real: imaginary part 0) [..., s], s a power of two dividing N/2. For s = N/2 the result
    is the unique real m with those slots; for s < N/2 it is m(X) = m'(X^g), g = N/(2s), the polynomial
    whose N/2 slots are z repeated g times (sparse packing by replication): the coefficients
    m_{kg} = Re w_k and m_{N/2+kg} = Im w_k with w = :func:`special_fft_inverse` (z), all others 0.
    Returns float64[..., N]. O(s log s + N). Raises ParameterError for a bad slot count or non-finite z.
    """
    n = _check_ring_degree(n)
    z = _as_slot_vector(z, "embed_inverse")
    s = _check_slot_count(z.shape[-1], n, "embed_inverse")
    w = special_fft_inverse(z)
    g = n // (2 * s)
    m = np.zeros(z.shape[:-1] + (n,), dtype=np.float64)
    m[..., : n // 2 : g] = w.real
    m[..., n // 2 :: g] = w.imag
    return m


def _slot_exponents(n: int) -> np.ndarray:
    """5^j mod 2N for j < N/2, int64."""
    e = np.ones(n // 2, dtype=np.int64)
    for j in range(1, n // 2):
        e[j] = e[j - 1] * 5 % (2 * n)
    return e


def embed_definition(m) -> np.ndarray:
    """:func:`embed` by its definition, z_j = sum_k m_k zeta^((5^j k) mod 2N). O(N^2): a test reference."""
    m = np.asarray(m, dtype=np.float64)
    n = m.shape[-1]
    e = (_slot_exponents(n)[:, None] * np.arange(n)[None, :]) % (2 * n)
    return m @ np.exp(1j * np.pi * e / n).T


def embed_inverse_definition(z, n: int) -> np.ndarray:
    """:func:`embed_inverse` for s = N/2 by its definition: m_k = (2/N) Re sum_j z_j zeta^(-(5^j k) mod 2N)
    (the inverse canonical embedding, each conjugate pair counted once). O(N^2): a test reference."""
    z = np.asarray(z, dtype=np.complex128)
    e = (_slot_exponents(n)[:, None] * np.arange(n)[None, :]) % (2 * n)
    return (2.0 / n) * (z @ np.exp(-1j * np.pi * e / n)).real


# --------------------------------------------------------------------------------------------------
# Integers in RNS form
# --------------------------------------------------------------------------------------------------


def _pow2_table(moduli: tuple[int, ...], max_shift: int) -> np.ndarray:
    """int64[limbs, max_shift + 1]: 2^t mod q_i."""
    return np.array([[pow(2, t, q) for t in range(max_shift + 1)] for q in moduli], dtype=np.int64)


def _integral_floats_to_residues(x: np.ndarray, moduli: tuple[int, ...]) -> np.ndarray:
    """Residues of integer-valued float64 x[..., n] (any magnitude below 2^1024) modulo each q_i. Exact.

    Below 2^53 x converts to int64 exactly; above, x = f 2^e (frexp) = M 2^(e - 53) with the integer
    |M| < 2^53, and [x]_q = [M]_q [2^(e-53)]_q mod q (products below 2^62 in int64).
    Returns uint32[..., limbs, n] in [0, q_i).
    """
    mant, shift = _mantissa_and_shift(x)
    q = np.array(moduli, dtype=np.int64).reshape(-1, 1)
    pow2 = _pow2_table(moduli, int(shift.max())) if shift.any() else None
    out = np.empty(x.shape[:-1] + (len(moduli), x.shape[-1]), dtype=np.uint32)
    # In runs of _RESIDUE_CHUNK coefficients, so that each pass over [limbs, chunk] stays in cache.
    for c0 in range(0, x.shape[-1], _RESIDUE_CHUNK):
        part = slice(c0, c0 + _RESIDUE_CHUNK)
        r = _mod_int64(mant[..., None, part], q)
        if pow2 is not None:
            r = _mod_int64(r * np.moveaxis(pow2[:, shift[..., part]], 0, -2), q)
        out[..., part] = r
    return out


_RESIDUE_CHUNK = 2048


def _mantissa_and_shift(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(M int64, t int32) with x = M 2^t exactly for integer-valued float64 x: t = 0 below 2^53, else |M| < 2^53."""
    f, e = np.frexp(x)
    big = e > _MANTISSA_BITS
    return (np.where(big, np.ldexp(f, _MANTISSA_BITS), x).astype(np.int64),
            np.where(big, e - _MANTISSA_BITS, 0).astype(np.int32))

_MAX_SHIFT = _FLOAT_MAX_EXPONENT + 1 - _MANTISSA_BITS
"""The largest t of x = M 2^t (|M| < 2^53) for a finite float64 x: frexp's exponent is at most 1024."""


def integral_residues(x: np.ndarray, moduli: tuple[int, ...]) -> jax.Array:
    """:func:`_integral_floats_to_residues` (the same words, uint32 ``[..., limbs, n]``) with the reduction on the
    device: x = sign |M| 2^t is split on the host (|M| < 2^53 as two 32-bit words, t <= 971), and one program
    reduces |M| modulo each q_i (:func:`~crossfhe.math.modular.reduce_u64`), multiplies by 2^t mod q_i (a table
    made once per basis) and negates: every limb's row in one vectorized pass, where NumPy took two int64
    reductions per chunk. Moduli below 2^16 take the host path."""
    moduli = tuple(int(q) for q in moduli)
    if min(moduli) < 1 << 16:
        return jnp.asarray(_integral_floats_to_residues(x, moduli))
    return _k_residues(*integral_split(x), *_residue_tables(moduli))


def integral_split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(neg bool, hi uint32, lo uint32, t int16) with x = (-1)^neg (hi 2^32 + lo) 2^t, each of x's shape, for
    integer-valued float64 x (|x| < 2^1024): the host's part of :func:`integral_residues` (|M| < 2^53 in two words,
    t <= 971), 11 bytes per coefficient. :func:`split_residues` finishes it, inside a caller's program too."""
    m, shift = _mantissa_and_shift(x)
    a = np.abs(m).astype(np.uint64)
    hi = (a >> np.uint64(32)).astype(np.uint32)
    lo = (a & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    return m < 0, hi, lo, shift.astype(np.int16)


def split_residues(neg, hi, lo, shift, tables):
    """uint32 ``[..., limbs, n]``: x mod each q_i of :func:`integral_split`'s (neg, hi, lo, t) (the words of
    :func:`integral_residues`); traceable. ``tables``: :func:`residue_tables` of the moduli (>= 2^16), an argument
    of the caller's program."""
    return _k_residues(neg, hi, lo, shift, *tables)


def residue_tables(moduli) -> tuple:
    """The tables :func:`split_residues` reads for ``moduli`` (made once per basis, on the device)."""
    return _residue_tables(tuple(int(q) for q in moduli))


@plan_cache(maxsize=64, on_device=True)
def _residue_tables(moduli: tuple[int, ...]):
    """(q, mu, bits, qinv, r2) as ``[limbs, 1]`` and 2^t mod q_i as ``[limbs, _MAX_SHIFT + 1]``, uint32."""
    t = ModulusTable.create(moduli)
    pow2 = np.array([[pow(2, k, q) for k in range(_MAX_SHIFT + 1)] for q in moduli], dtype=np.uint32)
    return t.q, t.barrett_mu, t.bits, t.mont_qinv, t.mont_r2, pow2


@jit
def _k_residues(neg, hi, lo, shift, q, mu, bits, qinv, r2, pow2):
    r = reduce_u64(hi[..., None, :], lo[..., None, :], q, mu, bits, qinv, r2)  # |M| mod q_i, [..., limbs, n]
    limbs = jnp.arange(pow2.shape[0]).reshape(-1, 1)
    r = barrett_mul(r, pow2[limbs, shift[..., None, :]], q, mu, bits)
    return jnp.where(neg[..., None, :] & (r != 0), q - r, r)


def _mod_int64(a: np.ndarray, q: np.ndarray) -> np.ndarray:
    """a mod q in [0, q) for int64 |a| < 2^62 and odd q < 2^31, q ``[limbs, 1]`` (a broadcast against it). Exact:
    for q >= 2^16 the quotient t = floor(fl(a) fl(1/q)) is within one of floor(a / q) (relative error below 2^-51 on
    |a / q| < 2^46), and a - t q, exact in int64, is in [-q, 2q) before one correction either way; smaller moduli
    take NumPy's int64 remainder (a division)."""
    if int(np.min(q)) < 1 << 16:
        return np.broadcast_to(a, np.broadcast_shapes(a.shape, q.shape)) % q
    t = np.floor(a * (1.0 / q.astype(np.float64))).astype(np.int64)
    r = a - t * q
    r += q & (r >> 63)  # r < 0: + q
    r -= q & ~((r - q) >> 63)  # r >= q: - q
    return r


def _round_scaled(m: np.ndarray, scale: float, basis: RNSBasis, what: str, margin: int = 0) -> np.ndarray:
    """rint(scale * m) in float64 (ties to even), checked to leave ``margin`` of the centered range:
    max |x| + margin <= (Q-1)/2 (``margin``: the noise the plaintext must still hold, e.g. a fresh
    encryption's, so that the phase cannot wrap either)."""
    with np.errstate(over="ignore"):
        x = np.rint(m * scale)
    if not np.isfinite(x).all():
        raise ParameterError(f"{what}: scale {scale!r} times the coefficients is not finite (overflow)")
    peak = int(np.max(np.abs(x))) if x.size else 0
    half = (basis.product - 1) // 2
    if peak + int(margin) > half:
        noise = f" plus the fresh-encryption noise bound 2^{math.log2(margin):.2f}" if margin else ""
        room = max(half - int(margin), 0)
        raise ParameterError(
            f"{what}: the encoding would wrap modulo Q: scale 2^{math.log2(scale):.2f} gives max |coefficient| "
            f"2^{math.log2(peak):.2f}{noise} > Q/2 with log2(Q) = {math.log2(basis.product):.2f} "
            f"({len(basis)} moduli); scale the values down by at least {peak / max(room, 1):.3g}x, lower the "
            "scale, or encode at a higher level"
        )
    return x


def encode(values, *, n: int, moduli, scale, margin: int = 0) -> np.ndarray:
    """CKKS encoding: residues of round(scale * embed_inverse(values, N)) modulo each q_i.

    values: complex or real [..., s], s a power of two dividing N/2 (s < N/2: replicated, see
    :func:`embed_inverse`), finite. moduli: the primes q_i of the level (odd, pairwise coprime, < 2^31).
    scale: Delta > 0 (int or float; used as a float64).
    Returns uint32[..., limbs, N] in [0, q_i), the coefficient domain. The integer coefficient is the one
    nearest to the float64 product scale * m_k (ties to even), reduced exactly for any magnitude (e.g.
    constants at scale^2 ~ 2^100), so the plaintext is exact for scales up to 2^53 |m|^-1 and carries a
    relative float64 error of 2^-53 above.
    Precision: decode(encode(z)) - z has each slot within s / scale (rounding: at most 1/2 on each of the
    2s non-zero coefficients) plus the float64 error of the two FFTs (about 2^-50 log2(s) max|z|).
    margin: an integer the coefficients must leave free below (Q - 1)/2, the noise the plaintext will carry
    (a fresh encryption's bound, :func:`crossfhe.core.rlwe.fresh_noise_bound`): then the phase m + e of its
    encryption cannot wrap either, and decryption keeps every sign.
    Raises ParameterError if max |coefficient| + margin > (Q - 1)/2 (the plaintext or its encryption would
    wrap), for a bad slot count, non-finite values or scale <= 0.
    """
    x = encode_integers(values, n=n, moduli=moduli, scale=scale, margin=margin)
    return _integral_floats_to_residues(x, _basis(moduli).moduli)


def encode_integers(values, *, n: int, moduli, scale, margin: int = 0) -> np.ndarray:
    """:func:`encode` before its reduction: the integer coefficients round(scale * embed_inverse(values, N)) as
    float64 ``[..., N]``, checked as there (:func:`integral_residues` reduces them on the device)."""
    n = _check_ring_degree(n)
    scale = _check_scale(scale)
    m = embed_inverse(values, n)
    return _round_scaled(m, scale, _basis(moduli), "encode", margin)


def encode_scalar_constant(c, *, moduli, scale, margin: int = 0, what: str = "encode_scalar_constant") -> np.ndarray:
    """The constant polynomial round(c * scale): every slot holds c. For multiplying by a scalar.

    c: a real number (a complex c with a non-zero imaginary part is refused: a + ib is the polynomial
    round(a scale) + round(b scale) X^(N/2), not a constant, since X^(N/2) takes the value i in every
    slot; encode it with :func:`encode`). Rounding as in :func:`encode` (float64 product, nearest integer).
    Returns uint32[limbs]: [round(c scale)]_{q_i}. Raises ParameterError on wrap (|round(c scale)| +
    ``margin`` > (Q-1)/2, ``margin`` as in :func:`encode`), non-finite c or scale <= 0; its messages start
    with ``what``.
    """
    scale = _check_scale(scale)
    basis = _basis(moduli)
    if isinstance(c, (complex, np.complexfloating)):
        if c.imag != 0:
            raise ParameterError(
                f"{what}: only real constants are supported, got {c!r} "
                "(a complex constant a + ib is round(a scale) + round(b scale) X^(N/2); use encode)"
            )
        c = c.real
    try:
        value = float(c)
    except (TypeError, ValueError, OverflowError) as err:
        raise ParameterError(f"{what}: c must be a real number, got {c!r}") from err
    if not math.isfinite(value):
        raise ParameterError(f"{what}: c must be finite, got {c!r}")
    x = _round_scaled(np.array([value]), scale, basis, what, margin)
    return _integral_floats_to_residues(x, basis.moduli)[:, 0]


def decode(residues, *, moduli, scale, slots: int | None = None) -> np.ndarray:
    """CKKS decoding: embed(c / scale) with c the centered integer coefficients of the plaintext.

    residues: uint32[..., limbs, N] (NumPy or JAX), coefficient domain, residues modulo ``moduli``.
    c = CRT(residues) in [-(Q-1)/2, (Q-1)/2] in float64 (:func:`crossfhe.math.rns.compose_float`: exact
    mixed-radix digits, then a float Horner sum, a few ulps), then divided by ``scale``. slots: s (a power
    of two dividing N/2; default N/2). For s < N/2 only the
    coefficients c_{kg}, c_{N/2+kg}, g = N/(2s), are read: the average of the g replicas of each slot.
    Returns complex128[..., s]. Raises BasisMismatchError if the limb axis does not match ``moduli`` and
    ParameterError for a bad N, slot count or scale.
    """
    scale = _check_scale(scale)
    basis = _basis(moduli)
    r = np.asarray(residues)
    if r.ndim < 2 or r.shape[-2] != len(basis):
        raise BasisMismatchError(
            f"decode: expected residues of shape [..., {len(basis)}, N] for {len(basis)} moduli, "
            f"got shape {tuple(r.shape)}"
        )
    n = _check_ring_degree(r.shape[-1])
    s = n // 2 if slots is None else _check_slot_count(int(slots), n, "decode")
    g = n // (2 * s)
    stride = np.concatenate([np.arange(0, n // 2, g), np.arange(n // 2, n, g)])
    c = compose_float(r[..., stride], basis)
    if not np.all(np.isfinite(c)):
        raise ParameterError("decode: a centered coefficient exceeds the float64 range (2^1024)")
    c = c / scale
    return special_fft(c[..., :s] + 1j * c[..., s:])
