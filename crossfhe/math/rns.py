"""RNS bases, exact CRT, fast basis conversion, ModUp, ModDown and rescaling on ``uint32`` words.

An RNS polynomial is ``uint32[..., limbs, N]``: limb i holds the coefficients modulo ``q_i`` of the basis
``Q = q_0 ... q_{L-1}``. Everything here works on the coefficient domain (the NTT lives in ``ring/``).

* :class:`RNSBasis`: a frozen, hashable tuple of pairwise coprime odd moduli below 2^31 with its CRT
  constants (Python ints) and its :class:`~crossfhe.math.modular.ModulusTable`.
* :func:`decompose` / :func:`compose`: Python integers <-> residues, exact (offline / reference, NumPy).
* :func:`fast_basis_conversion`: the approximate conversion Conv_{C->B} of CROSS §3.1.2 (step 1: a Shoup
  product per limb; step 2: a matrix product summing n terms per target limb and reducing once,
  Alchemist's (M A)_n R, run as an exact float64 GEMM on the centered digits split in 16-bit halves). Exact
  as an integer identity: the result is ``x + alpha C mod b_j`` with ``0 <= alpha < len(C)``.
* :func:`mod_up` (CASA Alg. 6, Alchemist eq. 2), :func:`mod_down` (CASA Alg. 7, Alchemist eq. 3) and
  :func:`rescale` (CASA Alg. 5, with rounding).

Plans (:class:`BasisConversion`, :class:`ModUpPlan`, :class:`ModDownPlan`, :class:`RescalePlan`) are
pytrees: their precomputed NumPy tables are leaves and their bases are static metadata, so passing a plan
to a jitted function passes the tables as arguments (never as embedded constants). Inputs and outputs are
``uint32`` words; the conversion's matrix product runs in float64 inside a scoped ``jax.enable_x64(True)``
(no global setting), so every kernel is exact under a user's ``jax.jit`` with x64 off.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from crossfhe.errors import BasisMismatchError, ParameterError
from crossfhe.math import conv as conv_native
from crossfhe.math.modular import (
    U32,
    ModulusTable,
    add_mod,
    barrett_reduce,
    centered_gemm_rows,
    gemm_chunk,
    gemm_weights,
    shoup_mul,
    shoup_precompute,
    sub_mod,
)
from crossfhe.math.xla import jit, plan_cache

_MAX_MODULUS = 2**31
_MIN_TARGET_MODULUS = 2**15  # the MATRIX set recombines through reduce_u64, which needs q > 2^15

_static = partial(field, metadata={"static": True})


def _u32_col(values) -> np.ndarray:
    """Python ints (each < 2^32) as a uint32 column of shape ``[len, 1]``."""
    return np.array([int(v) for v in values], dtype=np.uint32).reshape(-1, 1)


def _shoup(w: int, q: int) -> int:
    return (int(w) << 32) // int(q)


# --------------------------------------------------------------------------------------------------
# Bases
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RNSBasis:
    """A basis of pairwise coprime odd moduli ``2 < q_i < 2^31``; frozen and hashable (by its moduli).

    CRT constants, all Python ints computed exactly: ``product`` Q = prod q_i; ``hat`` Q/q_i;
    ``hat_inv`` [(Q/q_i)^-1]_{q_i}; ``hat_inv_shoup`` floor(hat_inv_i 2^32 / q_i). ``table`` holds the
    per-limb reduction constants as uint32 arrays of shape ``[limbs, 1]``.
    Raises :class:`~crossfhe.errors.ParameterError` for an empty basis, an even or out-of-range modulus,
    or two moduli that share a factor (duplicates included).
    """

    moduli: tuple[int, ...]
    product: int = field(init=False, repr=False, compare=False)
    hat: tuple[int, ...] = field(init=False, repr=False, compare=False)
    hat_inv: tuple[int, ...] = field(init=False, repr=False, compare=False)
    hat_inv_shoup: tuple[int, ...] = field(init=False, repr=False, compare=False)
    table: ModulusTable = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        moduli = tuple(int(q) for q in self.moduli)
        _check_moduli(moduli)
        product = math.prod(moduli)
        hat = tuple(product // q for q in moduli)
        hat_inv = tuple(pow(h % q, -1, q) for h, q in zip(hat, moduli, strict=True))
        set_ = partial(object.__setattr__, self)
        set_("moduli", moduli)
        set_("product", product)
        set_("hat", hat)
        set_("hat_inv", hat_inv)
        set_("hat_inv_shoup", tuple(_shoup(w, q) for w, q in zip(hat_inv, moduli, strict=True)))
        set_("table", ModulusTable.create(moduli))

    def __len__(self) -> int:
        return len(self.moduli)

    def prefix(self, n: int) -> RNSBasis:
        """The sub-basis of the first ``n`` limbs (1 <= n <= len)."""
        if not 1 <= n <= len(self):
            raise ParameterError(f"prefix length must be in [1, {len(self)}], got {n}")
        return RNSBasis(self.moduli[:n])

    def drop_last(self) -> RNSBasis:
        """The basis without its last modulus (the basis after a rescale)."""
        return self.prefix(len(self) - 1)

    def sub(self, start: int, stop: int) -> RNSBasis:
        """The contiguous sub-basis ``moduli[start:stop]`` (non-empty)."""
        if not 0 <= start < stop <= len(self):
            raise ParameterError(f"sub-basis [{start}, {stop}) is empty or outside [0, {len(self)})")
        return RNSBasis(self.moduli[start:stop])

    def concat(self, other: RNSBasis) -> RNSBasis:
        """The basis ``self ∪ other`` with self's limbs first (e.g. Q ∪ P); moduli must stay coprime."""
        return RNSBasis(self.moduli + tuple(other.moduli))


def _check_moduli(moduli: tuple[int, ...]) -> None:
    if not moduli:
        raise ParameterError("an RNS basis needs at least one modulus")
    for q in moduli:
        if q % 2 == 0 or not 2 < q < _MAX_MODULUS:
            raise ParameterError(f"RNS moduli must be odd with 2 < q < 2^31, got {q}")
    for i, a in enumerate(moduli):
        for b in moduli[i + 1 :]:
            g = math.gcd(a, b)
            if g != 1:
                raise ParameterError(f"RNS moduli must be pairwise coprime: gcd({a}, {b}) = {g}")


def _check_limbs(x, basis: RNSBasis, what: str) -> None:
    if x.ndim < 2 or x.shape[-2] != len(basis):
        raise BasisMismatchError(
            f"{what}: expected residues of shape [..., {len(basis)}, N] for basis {basis.moduli}, "
            f"got shape {tuple(x.shape)}"
        )


# --------------------------------------------------------------------------------------------------
# Exact CRT (offline / reference)
# --------------------------------------------------------------------------------------------------


def decompose(x, basis: RNSBasis) -> np.ndarray:
    """Residues of integers: ``[x]_{q_i}`` for every modulus of ``basis``. Exact (NumPy, offline).

    x: a Python int, a (nested) list of ints or an integer / object NumPy array of shape ``[..., N]``;
    any sign and size (reduced mod each q_i). Returns uint32 ``[..., limbs, N]`` in [0, q_i)
    (``[limbs]`` for a scalar).
    """
    a = np.asarray(x, dtype=object)
    axis = -2 if a.ndim >= 1 else 0
    return np.stack([np.asarray(a % q, dtype=object).astype(np.uint32) for q in basis.moduli], axis=axis)


def compose(residues, basis: RNSBasis, *, centered: bool = False) -> np.ndarray:
    """Exact CRT: the integer x mod Q with ``x = [x]_{q_i}`` on every limb (NumPy object array, offline).

    residues: uint32 ``[..., limbs, N]``. x = sum_i [r_i (Q/q_i)^-1]_{q_i} (Q/q_i) mod Q.
    Returns an object array ``[..., N]`` of Python ints in [0, Q), or in [-(Q-1)/2, (Q-1)/2] when
    ``centered`` (Q is odd).
    """
    r = np.asarray(residues)
    _check_limbs(r, basis, "compose")
    r = r.astype(object)
    x = np.zeros(r.shape[:-2] + r.shape[-1:], dtype=object)
    for i, q in enumerate(basis.moduli):
        x = x + (r[..., i, :] * basis.hat_inv[i] % q) * basis.hat[i]
    big_q = basis.product
    x = x % big_q
    if centered:
        x = np.where(x > big_q // 2, x - big_q, x)
    return x


@plan_cache(maxsize=64)
def _garner_tables(moduli: tuple[int, ...]):
    k = len(moduli)
    t = ModulusTable.create(moduli)
    inv = np.zeros((k, k), dtype=np.uint32)  # inv[l, j] = q_l^-1 mod q_j, j > l
    ql_mod = np.zeros((k, k), dtype=np.uint32)  # q_l mod q_j
    for l_ in range(k):
        for j in range(l_ + 1, k):
            inv[l_, j] = pow(moduli[l_], -1, moduli[j])
            ql_mod[l_, j] = moduli[l_] % moduli[j]
    inv_s = shoup_precompute(inv, np.array(moduli, dtype=np.uint64)[None, :])
    half = np.array(moduli, dtype=np.uint32) // 2
    return (t.q[:, 0], t.barrett_mu[:, 0], t.bits[:, 0], inv, inv_s, ql_mod, half)


@partial(jit, persist=True, static_argnames=("small",))
def _balanced_digits(x, tables, *, small: bool):
    """Balanced mixed-radix digits ``int32[..., k, N]`` of the residues x (Garner), one scan step per
    digit over all rows (masked): unrolled, the chain of k dependent steps fuses into one expression
    whose compilation grows exponentially (10 limbs: 4 s, 20: out of memory)."""
    q, mu, bits, inv, inv_s, ql_mod, half = tables
    k = x.shape[-2]
    qc, muc, bitsc = q[:, None], mu[:, None], bits[:, None]
    rows = jnp.arange(k)[:, None]

    def step(acc, per_digit):
        l_, inv_l, inv_s_l, ql_mod_l, q_l, half_l = per_digit
        v = lax.dynamic_index_in_dim(acc, l_, axis=-2, keepdims=False)  # final: digit l, in [0, q_l)
        neg = v > half_l
        digit = jnp.where(neg, v.astype(jnp.int32) - q_l.astype(jnp.int32), v.astype(jnp.int32))
        vj = v[..., None, :] % qc if small else barrett_reduce(v[..., None, :], qc, muc, bitsc)  # Barrett: q > 2^15
        # The balanced digit is v - q_l when v > q_l / 2: subtract q_l mod q_j from its residue too.
        vj = jnp.where(neg[..., None, :], sub_mod(vj, ql_mod_l[:, None], qc), vj)
        upd = shoup_mul(sub_mod(acc, vj, qc), inv_l[:, None], inv_s_l[:, None], qc)
        return jnp.where(rows > l_, upd, acc), digit

    acc = x % qc  # any words: the digits need residues in [0, q_j)
    _, digits = lax.scan(step, acc, (jnp.arange(k), inv, inv_s, ql_mod, q, half))
    return jnp.moveaxis(digits, 0, -2)


def compose_float(residues, basis: RNSBasis) -> np.ndarray:
    """The centered CRT value x in [-(Q-1)/2, (Q-1)/2] of each coefficient, as float64 (within a few ulps).

    residues: uint32 ``[..., limbs, N]`` (any words; reduced first). A jitted Garner pass gives the balanced mixed-radix
    digits d_j in (-q_j/2, q_j/2] with x = d_0 + q_0 (d_1 + q_1 (d_2 + ...)) exactly (no big integers;
    k scan steps over all k rows for k limbs), then a float64 Horner evaluation from the top digit, whose
    rounding errors are relative to x. Magnitudes beyond the float64 range come out as +-inf.
    """
    r = jnp.asarray(residues, dtype=U32)
    _check_limbs(r, basis, "compose_float")
    small = min(basis.moduli) <= _MIN_TARGET_MODULUS
    d = np.asarray(_balanced_digits(r, _garner_tables(basis.moduli), small=small)).astype(np.float64)
    out = d[..., -1, :]
    with np.errstate(over="ignore", invalid="ignore"):
        for j in range(len(basis) - 2, -1, -1):
            out = out * float(basis.moduli[j]) + d[..., j, :]
    return out


def centered_fraction(residues, basis: RNSBasis) -> np.ndarray:
    """x / Q in [-1/2, 1/2] as float64 for the centered CRT value x of each coefficient (no overflow).

    residues: uint32 ``[..., limbs, N]``. With the balanced Garner digits of :func:`compose_float`,
    x / Q = sum_j d_j / (q_j q_{j+1} ... q_{k-1}), evaluated as r <- (r + d_j) / q_j for j = 0 .. k-1: every
    step divides, so any Q works (``compose_float`` overflows past 2^1024), and the result's error is a
    few ulps of its largest term. BFV decryption reads the message as round(t x / Q) from it.
    """
    r = jnp.asarray(residues, dtype=U32)
    _check_limbs(r, basis, "centered_fraction")
    small = min(basis.moduli) <= _MIN_TARGET_MODULUS
    d = np.asarray(_balanced_digits(r, _garner_tables(basis.moduli), small=small)).astype(np.float64)
    out = np.zeros(d.shape[:-2] + d.shape[-1:], dtype=np.float64)
    for j, q in enumerate(basis.moduli):
        out = (out + d[..., j, :]) / float(q)
    return out


# --------------------------------------------------------------------------------------------------
# Fast basis conversion
# --------------------------------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False)
class BasisConversion:
    """Plan of the fast basis conversion Conv_{C->B} (CROSS §3.1.2); create with :meth:`create`.

    Tables (uint32): ``src_q``, ``hat_inv``, ``hat_inv_shoup`` ``[|C|, 1]`` (c_i, [(C/c_i)^-1]_{c_i} and
    its Shoup companion); ``hat_mod_dst`` ``[|B|, |C|]`` = [C/c_i]_{b_j}; ``dst_q``, ``dst_mu``,
    ``dst_bits``, ``dst_qinv``, ``dst_r2`` ``[|B|, 1]`` (the reduction constants of B); ``gemm`` int32
    ``[|B|, 2 |C|]``, the operand of the float64 product (:func:`~crossfhe.math.modular.gemm_weights`).
    Static: the two bases and ``chunk``, the number of source limbs summed per float64 matrix product.

    ``chunk`` = :func:`~crossfhe.math.modular.gemm_chunk` of B (51 for 31-bit targets, 102 for 30-bit,
    409 for 28-bit): every partial sum stays an exact float64 integer below 2^52. Partial sums are
    reduced mod b_j and added.
    """

    src_q: np.ndarray
    hat_inv: np.ndarray
    hat_inv_shoup: np.ndarray
    hat_mod_dst: np.ndarray
    dst_q: np.ndarray
    dst_mu: np.ndarray
    dst_bits: np.ndarray
    dst_qinv: np.ndarray
    dst_r2: np.ndarray
    src_half: np.ndarray
    prod_mod_dst: np.ndarray
    prod_mod_dst_shoup: np.ndarray
    src_inv: np.ndarray
    gemm: np.ndarray
    matrix: object
    native: object
    from_basis: RNSBasis = _static()
    to_basis: RNSBasis = _static()
    chunk: int = _static()
    centered: bool = _static()
    exact: bool = _static()
    kernels: object = _static()

    @classmethod
    def create(
        cls,
        from_basis: RNSBasis,
        to_basis: RNSBasis,
        *,
        chunk: int | None = None,
        centered: bool = False,
        exact: bool = False,
        kernels=None,
    ):
        """Precompute Conv_{from_basis -> to_basis}. ``chunk`` (default: the largest safe one) may be
        lowered, e.g. to exercise the chunked accumulation; above the safe bound it is refused.
        Target moduli must exceed 2^15. ``centered``: use the step-1 digits y_i - c_i when y_i > c_i / 2
        (see :func:`fast_basis_conversion`). ``exact`` (implies ``centered``): also remove alpha,
        estimated in float32 (HPS). ``kernels``: None or VECTOR for the float64 matrix product
        (:func:`~crossfhe.math.modular.centered_gemm_rows`), or a kernel set with its own tables (MATRIX:
        BAT int8 products, :mod:`crossfhe.kernels.bconv_matrix`), the same words either way.
        """
        small = [b for b in to_basis.moduli if b <= _MIN_TARGET_MODULUS]
        if small:
            raise ParameterError(f"fast basis conversion needs target moduli > 2^15, got {small}")
        bound = gemm_chunk(to_basis.table.q)
        chunk = bound if chunk is None else int(chunk)
        if not 1 <= chunk <= bound:
            raise ParameterError(f"chunk must be in [1, {bound}] for these bases, got {chunk}")
        dst = to_basis.table
        hat_mod_dst = np.array(
            [[h % b for h in from_basis.hat] for b in to_basis.moduli], dtype=np.uint32
        ).reshape(len(to_basis), len(from_basis))
        prod_mod_dst = [from_basis.product % b for b in to_basis.moduli]
        native = None
        if kernels is not None:
            kernels = kernels.resolve()
            if kernels.native and conv_native.fast():  # the NATIVE set's sums: the native kernel where it is faster
                native = conv_native.ConvTables.create(hat_mod_dst[None], from_basis.table.q.reshape(1, -1),
                                                       np.array([c // 2 for c in from_basis.moduli]).reshape(1, -1),
                                                       dst.q.reshape(1, -1))
            if not kernels.uses_tables:
                kernels = None
        matrix = None
        if kernels is not None:
            matrix = kernels.conversion_tables(hat_mod_dst, from_basis.table.q, dst.q)
        return cls(
            src_q=from_basis.table.q,
            hat_inv=_u32_col(from_basis.hat_inv),
            hat_inv_shoup=_u32_col(from_basis.hat_inv_shoup),
            hat_mod_dst=hat_mod_dst,
            dst_q=dst.q,
            dst_mu=dst.barrett_mu,
            dst_bits=dst.bits,
            dst_qinv=dst.mont_qinv,
            dst_r2=dst.mont_r2,
            src_half=_u32_col(c // 2 for c in from_basis.moduli),
            prod_mod_dst=_u32_col(prod_mod_dst),
            prod_mod_dst_shoup=_u32_col(_shoup(w, b) for w, b in zip(prod_mod_dst, to_basis.moduli, strict=True)),
            src_inv=np.array([1.0 / c for c in from_basis.moduli], dtype=np.float32).reshape(-1, 1),
            gemm=gemm_weights(hat_mod_dst, dst.q),
            matrix=matrix,
            native=native,
            from_basis=from_basis,
            to_basis=to_basis,
            chunk=chunk,
            centered=bool(centered or exact),
            exact=bool(exact),
            kernels=kernels,
        )


def _convert(x, conv: BasisConversion):
    x = jnp.asarray(x, dtype=U32)
    _check_limbs(x, conv.from_basis, "fast_basis_conversion")
    y = shoup_mul(x, conv.hat_inv, conv.hat_inv_shoup, conv.src_q)
    neg = y > conv.src_half
    # Both kernels sum the centered digits y~_i (each y_i > c_i / 2 as y_i - c_i).
    if conv.native is not None:
        out = conv_native.convert_centered(y[..., None, :, :], conv.native)[..., 0, :, :]
    elif conv.kernels is not None:
        out = conv.kernels.convert_centered(y, conv.src_q, conv.matrix)
    else:
        out = centered_gemm_rows(y, conv.src_half, conv.src_q, conv.gemm, conv.dst_q, chunk=conv.chunk)
    # Plain sum: add [C]_{b_j} back once per such digit; centered: nothing to add (alpha aside).
    count = -jnp.sum(neg.astype(jnp.int32), axis=-2, keepdims=True) if not conv.centered else None
    if conv.exact:
        count = jnp.zeros(out.shape[:-2] + (1, out.shape[-1]), jnp.int32)
    if count is not None:
        if conv.exact:
            # sum_i y~_i / c_i = X~ / C + alpha with |X~ / C| <= 1/2: alpha = round of the float32 sum.
            frac = jnp.where(neg, y.astype(jnp.int32) - conv.src_q.astype(jnp.int32), y.astype(jnp.int32))
            est = jnp.sum(frac.astype(jnp.float32) * conv.src_inv, axis=-2, keepdims=True)
            count = count + jnp.round(est).astype(jnp.int32)
        total = jnp.where(count < 0, count + conv.dst_q.astype(jnp.int32), count).astype(U32)
        out = sub_mod(out, shoup_mul(total, conv.prod_mod_dst, conv.prod_mod_dst_shoup, conv.dst_q), conv.dst_q)
    return out


@jit
def fast_basis_conversion(x, conv: BasisConversion):
    """Approximate basis conversion Conv_{C->B} (CROSS §3.1.2, Alchemist eq. 1). Jitted kernel.

    x: uint32 ``[..., |C|, N]`` representing X in [0, C) (any uint32 word is accepted: step 1 reduces it).
    Step 1: y_i = [x_i (C/c_i)^-1]_{c_i} (Shoup). Step 2: z_j = sum_i y_i [C/c_i]_{b_j} mod b_j
    (a float64 matrix product of the centered y_i over chunks of ``conv.chunk`` limbs, exact, partial sums
    reduced and added mod b_j).
    Returns uint32 ``[..., |B|, N]`` in [0, b_j) with z_j = (X + alpha C) mod b_j, where
    alpha = (sum_i y_i C/c_i - X) / C is an integer with 0 <= alpha < |C| (the same for every j).
    Exact as stated; alpha is not corrected (approximate conversion, HPS/BEHZ would remove it).
    With ``conv.centered``, the digits y_i > c_i / 2 are taken as y_i - c_i: the sum is then X~ + alpha C
    with X~ the centered representative of X (in (-C/2, C/2]) and alpha symmetric about 0, |alpha| <= |C|/2 + 1,
    which makes a ModDown round to nearest without a bias (its error -alpha has mean 0).
    With ``conv.exact`` (HPS: Halevi, Polyakov, Shoup, CT-RSA 2019), alpha is removed too: alpha =
    round(sum_i y~_i / c_i) from a float32 sum whose error is below |C| 2^-22, so z_j = X~ mod b_j exactly
    unless |X~ / C| is that close to 1/2, where the result may be the other representative X~ -+ C.
    """
    return _convert(x, conv)


# --------------------------------------------------------------------------------------------------
# ModUp / ModDown
# --------------------------------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False)
class ModUpPlan:
    """Plan of ModUp from a digit basis D to a target basis T that contains D as a contiguous run.

    For hybrid key switching D is a digit group of Q_l (D = Q_l when dnum = 1) and T = Q_l ∪ P.
    ``conv`` is Conv_{D -> T \\ D}; ``offset`` (static) is the position of D's first limb in T.
    """

    conv: BasisConversion
    digit_basis: RNSBasis = _static()
    target_basis: RNSBasis = _static()
    offset: int = _static()

    @classmethod
    def create(
        cls, digit_basis: RNSBasis, target_basis: RNSBasis, *, centered: bool = False, kernels=None
    ) -> ModUpPlan:
        """``centered``: the new limbs hold X~ + alpha D with X~ the centered representative of X and alpha
        of mean 0 (:func:`fast_basis_conversion`), so products with key errors carry no bias. ``kernels``:
        the kernel set of the conversion (:meth:`BasisConversion.create`)."""
        n, t = len(digit_basis), target_basis.moduli
        offsets = [s for s in range(len(t) - n + 1) if t[s : s + n] == digit_basis.moduli]
        if not offsets:
            raise ParameterError(
                f"ModUp: digit basis {digit_basis.moduli} is not a contiguous run of target {t}"
            )
        s = offsets[0]
        if s == 0 and n == len(t):
            raise ParameterError("ModUp: the target basis must be larger than the digit basis")
        rest = RNSBasis(t[:s] + t[s + n :])
        conv = BasisConversion.create(digit_basis, rest, centered=centered, kernels=kernels)
        return cls(conv=conv, digit_basis=digit_basis, target_basis=target_basis, offset=s)


@jit
def mod_up(x, plan: ModUpPlan):
    """ModUp (CASA Alg. 6, Alchemist eq. 2): extend x from basis D to T ⊇ D by fast basis conversion.

    x: uint32 ``[..., |D|, N]`` in [0, d_i), representing X in [0, D). Returns uint32 ``[..., |T|, N]``:
    the limbs of D are x itself, the others are (X + alpha D) mod t_j with 0 <= alpha < |D|, so the
    output represents X + alpha D in [0, |D| D) over T. Exact as stated.
    """
    x = jnp.asarray(x, dtype=U32)
    z = _convert(x, plan.conv)
    s = plan.offset
    return jnp.concatenate([z[..., :s, :], x, z[..., s:, :]], axis=-2)


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False)
class ModDownPlan:
    """Plan of ModDown from Q ∪ P (Q's limbs first) to Q.

    ``conv`` is Conv_{P -> Q}; ``p_inv``, ``p_inv_shoup`` are [P^-1]_{q_i} and Shoup companions and
    ``q`` the moduli of Q, all ``[|Q|, 1]`` uint32.
    """

    conv: BasisConversion
    q: np.ndarray
    p_inv: np.ndarray
    p_inv_shoup: np.ndarray
    q_basis: RNSBasis = _static()
    p_basis: RNSBasis = _static()

    @classmethod
    def create(
        cls, q_basis: RNSBasis, p_basis: RNSBasis, *, centered: bool = False, exact: bool = False, kernels=None
    ) -> ModDownPlan:
        """``centered``: round(X / P) - alpha with alpha of mean 0 (centered conversion) instead of
        floor(X / P) - alpha with 0 <= alpha < |P|. ``exact``: round(X / P), or one off when X / P is
        within |P| 2^-22 of a half-integer (alpha removed, :func:`fast_basis_conversion`). ``kernels``: the
        kernel set of the conversion (:meth:`BasisConversion.create`)."""
        q_basis.concat(p_basis)  # checks that Q and P are coprime
        big_p = p_basis.product
        p_inv = [pow(big_p % q, -1, q) for q in q_basis.moduli]
        return cls(
            conv=BasisConversion.create(p_basis, q_basis, centered=centered, exact=exact, kernels=kernels),
            q=q_basis.table.q,
            p_inv=_u32_col(p_inv),
            p_inv_shoup=_u32_col(_shoup(w, q) for w, q in zip(p_inv, q_basis.moduli, strict=True)),
            q_basis=q_basis,
            p_basis=p_basis,
        )


@jit
def mod_down(x, plan: ModDownPlan):
    """ModDown (CASA Alg. 7, Alchemist eq. 3): from Q ∪ P to Q, dividing by P.

    x: uint32 ``[..., |Q| + |P|, N]`` (Q's limbs first) representing X mod QP.
    out_i = (x_i - Conv_{P->Q}([X]_P)_i) P^-1 mod q_i. Returns uint32 ``[..., |Q|, N]`` in [0, q_i)
    representing floor(X / P) - alpha mod Q with 0 <= alpha < |P| (alpha of the conversion), for any
    representative X of the class mod QP. Hence 0 <= X / P - out < |P| and 0 <= round(X / P) - out <= |P|;
    out = X / P exactly (alpha = 0) when P divides X, e.g. for X = P * ModUp(x), which gives back x.
    """
    x = jnp.asarray(x, dtype=U32)
    n_q = len(plan.q_basis)
    if x.ndim < 2 or x.shape[-2] != n_q + len(plan.p_basis):
        raise BasisMismatchError(
            f"mod_down: expected shape [..., {n_q} + {len(plan.p_basis)}, N] (Q then P), got {x.shape}"
        )
    z = _convert(x[..., n_q:, :], plan.conv)
    d = sub_mod(x[..., :n_q, :], z, plan.q)
    return shoup_mul(d, plan.p_inv, plan.p_inv_shoup, plan.q)


# --------------------------------------------------------------------------------------------------
# Rescale
# --------------------------------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False)
class RescalePlan:
    """Plan of the rescale of basis (q_0, ..., q_l) to (q_0, ..., q_{l-1}); create with :meth:`create`.

    Tables (uint32, ``[l, 1]`` unless said): ``q`` the remaining moduli; ``last_inv``, ``last_inv_shoup``
    = [q_l^-1]_{q_i} and companions; ``half_mod`` = [h]_{q_i} with h = (q_l - 1) / 2; ``one_shoup`` =
    floor(2^32 / q_i) (Shoup companion of 1, to reduce a word mod q_i); ``last_q``, ``half`` ``[1, 1]``.
    """

    q: np.ndarray
    last_inv: np.ndarray
    last_inv_shoup: np.ndarray
    half_mod: np.ndarray
    one_shoup: np.ndarray
    last_q: np.ndarray
    half: np.ndarray
    basis: RNSBasis = _static()

    @classmethod
    def create(cls, basis: RNSBasis) -> RescalePlan:
        if len(basis) < 2:
            raise ParameterError("rescale needs a basis of at least two moduli")
        *rest, q_last = basis.moduli
        half = (q_last - 1) // 2
        inv = [pow(q_last % q, -1, q) for q in rest]
        return cls(
            q=_u32_col(rest),
            last_inv=_u32_col(inv),
            last_inv_shoup=_u32_col(_shoup(w, q) for w, q in zip(inv, rest, strict=True)),
            half_mod=_u32_col(half % q for q in rest),
            one_shoup=_u32_col(_shoup(1, q) for q in rest),
            last_q=_u32_col([q_last]),
            half=_u32_col([half]),
            basis=basis,
        )


@jit
def rescale(x, plan: RescalePlan):
    """Divide by the last modulus with rounding (CASA Alg. 5, with the standard rounding offset).

    x: uint32 ``[..., l + 1, N]`` representing X mod Q_l. With h = (q_l - 1) / 2 and
    r = [X + h]_{q_l} = [x_l + h]_{q_l}: out_i = (x_i + h - r) q_l^-1 mod q_i. Since q_l is odd,
    (X + h - r) / q_l = floor((X + h) / q_l) = round(X / q_l) with no ties. Returns uint32 ``[..., l, N]``
    in [0, q_i) representing round(X / q_l) mod Q_{l-1}, exactly, for any representative X
    (centered or not: shifting X by Q_l shifts the result by Q_{l-1}).
    """
    x = jnp.asarray(x, dtype=U32)
    _check_limbs(x, plan.basis, "rescale")
    r = add_mod(x[..., -1:, :], plan.half, plan.last_q)  # [..., 1, N] in [0, q_l)
    r = shoup_mul(r, 1, plan.one_shoup, plan.q)  # r mod q_i, exact for any uint32 r
    d = add_mod(sub_mod(x[..., :-1, :], r, plan.q), plan.half_mod, plan.q)
    return shoup_mul(d, plan.last_inv, plan.last_inv_shoup, plan.q)
