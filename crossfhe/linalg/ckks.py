"""Linear algebra on CKKS slots: plaintext matrix x encrypted vector (diagonal method, baby-step giant-step,
hoisted rotations, tiled), encrypted weights (encrypted diagonals x plaintext or encrypted vector), and sums
and replications across slots. Pure functions on :mod:`crossfhe.ckks` ciphertexts; keys and plans are passed in.

Layout. A vector of n values lives in blocks of d slots, d a power of two dividing N/2 (default: the smallest
power of two >= max(m, n), at most N/2; pass ``block`` to share one d between chained products). Chunk J holds
v[J d : J d + d] in slots [0, d), zero-padded, and the ciphertext is *replicated*: slot i holds chunk slot
i mod d, which is what encoding d values does (:func:`crossfhe.ckks.ops.encode` repeats fewer than N/2 values;
:func:`replicate` makes it from a zero-padded ciphertext). Replication lets a rotation by k in [0, d) act as
the cyclic rotation of the d-vector, so the transforms of :mod:`crossfhe.ckks.lintrans` apply unchanged. The
result of every product here is in the same layout, so products chain.

Plaintext matrix (:func:`matvec`). A (m x n, real) is cut into d x d blocks A_IJ, zero-padded; R = ceil(m/d)
block rows, C = ceil(n/d) block columns. With diag_k[i] = A_IJ[i, (i + k) mod d] and rot(z, k)_i = z_{i+k},

    u_I = sum_J A_IJ v_J = sum_J sum_k diag_k ⊙ rot(v_J, k),

the offsets k running over the ones nonzero by shape, (-(m_I - 1), n_J) mod d. Each (I, J) block is a
:class:`crossfhe.ckks.lintrans.Diagonals` evaluated by :func:`crossfhe.ckks.lintrans.apply` (BSGS, baby steps
hoisted, diagonals pre-rotated and encoded once by :func:`encode_matrix`). Output: R ciphertexts, block I in
the layout above (slots [m_I, d) of each period hold 0 up to the error). Input slots [n_J, d) of a period are
ignored (they meet zero diagonal entries). One level: the input at ``encoded.level`` (higher: dropped) and
scale ``encoded.in_scale``; the output at level - 1 with scale ``encoded.out_scale`` exactly. Rotations: the
baby and giant steps of every block (:func:`required_rotations`, from the shapes alone).

Error model. Slot errors are stated for a polynomial error e with independent centered coefficients of
variance V: each slot of e / Delta has E|.|^2 = N V / Delta^2, and the bound is kappa = 6 standard deviations
(a complex Gaussian exceeds it with probability e^-36 per slot). Variances per coefficient: rounding to an
integer (encoding) 1/12; a rescale (1 + h) / 12 (c0 and c1 s rounded, h the Hamming weight of s, N if not
fixed); a key switch V_ks = N sigma^2 sum_j (X_j / P)^2 + (1 + h) / 3 + (K - 1)^2 (1 + h) (the key errors
times the ModUp digits bounded by X_j, then ModDown's remainder and overshoot; the terms of
:func:`crossfhe.core.keyswitch.keyswitch_noise_bound`, summed as variances instead of worst cases). Input
errors propagate exactly: a linear map with row sums ||A_i||_1 turns an input slot error eps_in into at
most max_i ||A_i||_1 eps_in. Each ``*_error_bound`` function returns that propagated term plus kappa times
the standard deviation of the new error; eps_in is the largest slot error of the input over all N/2 slots
(padding included), x_max its largest slot magnitude.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import numpy as np

from crossfhe.ckks import lintrans, ops
from crossfhe.ckks.ciphertext import Ciphertext, EvaluationKeys
from crossfhe.ckks.params import Params
from crossfhe.core import evaluator as ev
from crossfhe.core.keys import SIGMA
from crossfhe.core.keyswitch import digit_groups
from crossfhe.errors import ParameterError
from crossfhe.ring import poly

KAPPA = 6.0
"""Standard deviations in every stated error bound (a complex Gaussian slot exceeds it w.p. e^-36)."""


# --------------------------------------------------------------------------------------------------
# Shapes and plans
# --------------------------------------------------------------------------------------------------


def _dims(m, n) -> tuple[int, int]:
    for name, x in (("m", m), ("n", n)):
        if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 1:
            raise ParameterError(f"matrix dimension {name} must be a positive int, got {x!r}")
    return int(m), int(n)


def _block(params: Params, m: int, n: int, block: int | None) -> int:
    if block is None:
        return min(params.slots, 1 << (max(m, n) - 1).bit_length())
    block = int(block)
    if block < 1 or block & (block - 1) or block > params.slots:
        raise ParameterError(f"block must be a power of two in [1, N/2 = {params.slots}], got {block}")
    return block


def _offsets(rows: int, cols: int, d: int) -> tuple[int, ...]:
    """The diagonals of a rows x cols block (zero-padded to d x d) nonzero by shape: (-(rows - 1), cols) mod d."""
    if rows + cols - 1 >= d:
        return tuple(range(d))
    return tuple(sorted(k % d for k in range(-(rows - 1), cols)))


def _extent(total: int, d: int, i: int) -> int:
    return min(d, total - i * d)


@dataclass(frozen=True)
class MatvecPlan:
    """The schedule of an m x n product in d x d blocks (module docstring), from the shapes alone: ``plans[I][J]``
    is the :class:`crossfhe.ckks.lintrans.Plan` of block (I, J). Hashable."""

    slots: int
    rows: int
    cols: int
    block: int
    plans: tuple

    @property
    def row_blocks(self) -> int:
        return -(-self.rows // self.block)

    @property
    def col_blocks(self) -> int:
        return -(-self.cols // self.block)

    @property
    def rotations(self) -> tuple[int, ...]:
        """The slot rotations (in [1, d)) :func:`matvec` needs keys for."""
        return tuple(sorted(set().union(*(p.rotations() for row in self.plans for p in row))))

    def terms(self, i: int) -> int:
        """The plaintext products of output block ``i`` (its nonzero-by-shape diagonals over all J)."""
        return sum(sum(len(bs) for _, bs in p.giants) for p in self.plans[i])

    def giant_steps(self, i: int) -> int:
        return sum(len(p.giant_rotations) for p in self.plans[i])


def plan_matvec(params: Params, m: int, n: int, *, block: int | None = None) -> MatvecPlan:
    """The :class:`MatvecPlan` of an m x n plaintext matrix times an encrypted n-vector under ``params``."""
    m, n = _dims(m, n)
    d = _block(params, m, n, block)
    plans = tuple(
        tuple(lintrans.plan(_shape_diagonals(_extent(m, d, i), _extent(n, d, j), d)) for j in range(-(-n // d)))
        for i in range(-(-m // d))
    )
    return MatvecPlan(params.slots, m, n, d, plans)


def _shape_diagonals(rows: int, cols: int, d: int) -> lintrans.Diagonals:
    return lintrans.Diagonals(d, {k: np.ones(d) for k in _offsets(rows, cols, d)})


def required_rotations(params: Params, m: int, n: int, *, block: int | None = None) -> tuple[int, ...]:
    """The rotations to pass to ``ckks.ops.keygen(params, rotations=...)`` for :func:`matvec` of an m x n matrix."""
    return plan_matvec(params, m, n, block=block).rotations


def _check_keys(keys: EvaluationKeys, rotations, what: str) -> None:
    missing = [r for r in rotations if ops.rotation_element(keys.params, r) not in keys.galois]
    if missing:
        raise ParameterError(f"{what}: the evaluation keys lack the rotations {missing}; make keys with "
                             f"ckks.ops.keygen(params, rotations=...) including them")


# --------------------------------------------------------------------------------------------------
# Plaintext matrix x encrypted vector
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class EncodedMatrix:
    """A real m x n matrix as encoded blocks for :func:`matvec`: ``blocks[I][J]`` a
    :class:`crossfhe.ckks.lintrans.Encoded`, all at ``level`` for inputs at ``in_scale``, output at level - 1 with
    ``out_scale``. ``a_max`` = max |A_ij|, ``row_l1`` = max_i ||A_i||_1, ``row_l2`` = max_i ||A_i||_2 (for the
    error bound)."""

    plan: MatvecPlan
    blocks: tuple
    params: Params
    level: int
    in_scale: float
    out_scale: float
    a_max: float
    row_l1: float
    row_l2: float


def encode_matrix(params: Params, a, *, level: int | None = None, scale: float | None = None,
                  out_scale: float | None = None, block: int | None = None) -> EncodedMatrix:
    """A (float64[m, n], real, finite) encoded once for :func:`matvec` at ``level`` (default the top user level,
    at least 1) for inputs at ``scale`` (default Delta), output at ``out_scale`` (default ``scale``). Every
    diagonal nonzero by shape is encoded (zeros included) so the rotations depend on the shape only. Each
    diagonal is rounded at scale out_scale q_l / scale (:func:`crossfhe.ckks.lintrans.encode`)."""
    a = np.asarray(a)
    if a.ndim != 2 or a.size == 0 or not np.issubdtype(a.dtype, np.number) or np.iscomplexobj(a):
        raise ParameterError(f"encode_matrix takes a real 2-D matrix, got shape {a.shape} and dtype {a.dtype}")
    a = a.astype(np.float64)
    if not np.isfinite(a).all():
        raise ParameterError("encode_matrix: entries must be finite")
    level = params.user_levels if level is None else int(level)
    scale = params.scale if scale is None else float(scale)
    out_scale = scale if out_scale is None else float(out_scale)
    m, n = a.shape
    pl = plan_matvec(params, m, n, block=block)
    d = pl.block
    padded = np.zeros((pl.row_blocks * d, pl.col_blocks * d))
    padded[:m, :n] = a
    idx = np.arange(d)
    blocks = []
    for i in range(pl.row_blocks):
        row = []
        for j in range(pl.col_blocks):
            sub = padded[i * d:(i + 1) * d, j * d:(j + 1) * d]
            offs = _offsets(_extent(m, d, i), _extent(n, d, j), d)
            diags = lintrans.Diagonals(d, {k: sub[idx, (idx + k) % d].astype(np.complex128) for k in offs})
            enc = lintrans.encode(params, diags, level=level, in_scale=scale, out_scale=out_scale,
                                  n1=pl.plans[i][j].n1)
            if enc.plan != pl.plans[i][j]:
                raise AssertionError("the encoded plan differs from the shape plan")
            row.append(enc)
        blocks.append(tuple(row))
    return EncodedMatrix(pl, tuple(blocks), params, level, scale, out_scale, float(np.max(np.abs(a))),
                         float(np.max(np.sum(np.abs(a), axis=1))), float(np.max(np.linalg.norm(a, axis=1))))


def _inputs(cts, count: int, what: str) -> list[Ciphertext]:
    cts = [cts] if isinstance(cts, Ciphertext) else list(cts)
    if len(cts) != count or not all(isinstance(c, Ciphertext) for c in cts):
        raise ParameterError(f"{what}: expected {count} input ciphertext(s) (one per block of the vector), got "
                             f"{len(cts)}")
    return cts


def matvec(encoded: EncodedMatrix, cts, keys: EvaluationKeys) -> list[Ciphertext]:
    """u = A v: ``cts`` the C = ceil(n/d) chunks of v (one Ciphertext when C = 1), replicated with period d
    (module docstring), at level >= ``encoded.level`` and scale ``encoded.in_scale``. Returns R = ceil(m/d)
    ciphertexts, chunk I of u in the same layout, at ``encoded.level`` - 1 and scale ``encoded.out_scale``.
    Cost per (I, J) block: the baby rotations of v_J (hoisted, one ModUp), the giant rotations, one plaintext
    product per diagonal; then one rescale. Error: :func:`matvec_error_bound`."""
    pl = encoded.plan
    cts = _inputs(cts, pl.col_blocks, "matvec")
    for ct in cts:
        if ct.params.digest() != encoded.params.digest():
            raise ParameterError("matvec: the ciphertext and the encoded matrix belong to different parameters")
    _check_keys(keys, pl.rotations, "matvec")
    out = []
    for row in encoded.blocks:
        acc = None
        for ct, enc in zip(cts, row):
            y = lintrans.apply(ct, enc, keys)
            acc = y if acc is None else ops.add(acc, y)
        out.append(acc)
    return out


def _keyswitch_variance(params: Params, level: int) -> float:
    """V_ks at ``level`` (module docstring)."""
    active = params.moduli_at(level)
    big_p = math.prod(params.p)
    h = params.n if params.hamming_weight is None else params.hamming_weight
    acc = 0.0
    for start, stop in digit_groups(len(params.q), params.dnum, len(active)):
        digit = active[start:stop]
        big_d = math.prod(digit)
        x = len(digit) * big_d - sum(big_d // q for q in digit)
        acc += (x / big_p) ** 2
    return params.n * SIGMA**2 * acc + (1 + h) / 3 + (len(params.p) - 1) ** 2 * (1 + h)


def _rescale_variance(params: Params) -> float:
    h = params.n if params.hamming_weight is None else params.hamming_weight
    return (1 + h) / 12


def matvec_error_bound(encoded: EncodedMatrix, *, x_max: float, input_error: float = 0.0) -> float:
    """A bound on every output slot's error |u~_i - (A v)_i| of :func:`matvec` (module docstring, kappa = 6):

        row_l1 eps_in + kappa sqrt(N) sqrt( row_l2^2 V_ks / Delta_in^2              (baby rotations of v)
                                            + T x_max^2 / (12 s_pt^2)                 (diagonal rounding)
                                            + G V_ks / (Delta_out q_l)^2              (giant rotations)
                                            + C (1 + h) / (12 Delta_out^2) )          (C rescales)

    with T the plaintext products and G the giant rotations of the output block, C the block columns,
    s_pt = Delta_out q_l / Delta_in the diagonals' scale. ``x_max``: the largest input slot magnitude,
    ``input_error``: eps_in, the input's largest slot error."""
    p, pl = encoded.params, encoded.plan
    n = p.n
    q = math.prod(p.rescale_primes(encoded.level))
    s_pt = encoded.out_scale * q / encoded.in_scale
    v_ks = _keyswitch_variance(p, encoded.level)
    worst = 0.0
    for i in range(pl.row_blocks):
        var = (encoded.row_l2**2 * v_ks / encoded.in_scale**2 + pl.terms(i) * x_max**2 / (12 * s_pt**2)
               + pl.giant_steps(i) * v_ks / (encoded.out_scale * q) ** 2
               + pl.col_blocks * _rescale_variance(p) / encoded.out_scale**2)
        worst = max(worst, var)
    return encoded.row_l1 * input_error + KAPPA * math.sqrt(n * worst)


# --------------------------------------------------------------------------------------------------
# Sums and replications across slots
# --------------------------------------------------------------------------------------------------


def _span(params: Params, length, what: str) -> int:
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or not 1 <= length <= params.slots:
        raise ParameterError(f"{what}: length must be an int in [1, N/2 = {params.slots}], got {length!r}")
    return 1 << (int(length) - 1).bit_length()


def sum_rotations(params: Params, length: int) -> tuple[int, ...]:
    """The rotations :func:`sum_slots` needs: 1, 2, ..., p/2 (p the power of two >= ``length``)."""
    p = _span(params, length, "sum_rotations")
    return tuple(1 << i for i in range(p.bit_length() - 1))


def replicate_rotations(params: Params, length: int) -> tuple[int, ...]:
    """The rotations :func:`replicate` needs: -p, -2p, ..., -N/4 (p the power of two >= ``length``), as
    N/2 - p 2^i in [1, N/2)."""
    p = _span(params, length, "replicate_rotations")
    return tuple(params.slots - (p << i) for i in range((params.slots // p).bit_length() - 1))


def sum_slots(ct: Ciphertext, keys: EvaluationKeys, *, length: int) -> Ciphertext:
    """Slot i holds sum_{t < p} x_{i + t} (p the power of two >= ``length``): with slots [length, p) zero, slot 0
    holds the sum of the first ``length`` slots; with the replicated layout of period p, every slot does.
    log2 p rotations and additions (:func:`sum_rotations`); no level. Error: :func:`sum_slots_error_bound`."""
    rots = sum_rotations(ct.params, length)
    _check_keys(keys, rots, "sum_slots")
    for r in rots:
        ct = ops.add(ct, ops.rotate(ct, r, keys))
    return ct


def replicate(ct: Ciphertext, keys: EvaluationKeys, *, length: int) -> Ciphertext:
    """The first p slots (p the power of two >= ``length``) repeated across the N/2 slots: slot i holds
    sum_{c < N/(2p)} x_{i - c p}, which is x_{i mod p} when slots [p, N/2) are zero (a zero-padded vector).
    log2(N / (2p)) rotations and additions (:func:`replicate_rotations`); no level.
    Error: :func:`replicate_error_bound`."""
    rots = replicate_rotations(ct.params, length)
    _check_keys(keys, rots, "replicate")
    for r in rots:
        ct = ops.add(ct, ops.rotate(ct, r, keys))
    return ct


def _rotation_sum_bound(params: Params, copies: int, *, level: int, scale: float, input_error: float) -> float:
    """copies eps_in + kappa sqrt((copies - 1) N V_ks) / Delta: the key-switching noise of step t is summed into
    copies / 2^(t+1) distinct slots of the output (distinct slots of one polynomial are uncorrelated)."""
    v_ks = _keyswitch_variance(params, level)
    return copies * input_error + KAPPA * math.sqrt((copies - 1) * params.n * v_ks) / scale


def sum_slots_error_bound(params: Params, *, length: int, level: int, scale: float, input_error: float = 0.0):
    """The largest slot error of :func:`sum_slots` on an input at ``level`` and ``scale`` with slot error eps_in:
    p eps_in + kappa sqrt((p - 1) N V_ks) / Delta (p the power of two >= ``length``)."""
    p = _span(params, length, "sum_slots_error_bound")
    return _rotation_sum_bound(params, p, level=level, scale=scale, input_error=input_error)


def replicate_error_bound(params: Params, *, length: int, level: int, scale: float, input_error: float = 0.0):
    """The largest slot error of :func:`replicate`: c eps_in + kappa sqrt((c - 1) N V_ks) / Delta, c = N / (2p)."""
    p = _span(params, length, "replicate_error_bound")
    return _rotation_sum_bound(params, params.slots // p, level=level, scale=scale, input_error=input_error)


# --------------------------------------------------------------------------------------------------
# Encrypted weights
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class EncryptedDiagonals:
    """An encrypted m x n matrix (m, n <= d) by its diagonals nonzero by shape: ``cts[k]`` encrypts
    diag_k[i] = A[i, (i + k) mod d] (zero-padded to d x d), replicated with period d."""

    rows: int
    cols: int
    block: int
    cts: dict

    @property
    def level(self) -> int:
        return min(c.level for c in self.cts.values())


def _one_block(params: Params, a, block: int | None, what: str):
    """(m, n, d, A zero-padded to d x d, arange(d)) for encrypted weights, which take one d x d block."""
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2 or a.size == 0:
        raise ParameterError(f"{what} takes a 2-D matrix, got shape {a.shape}")
    m, n = a.shape
    d = _block(params, m, n, block)
    if max(m, n) > d:
        raise ParameterError(f"encrypted weights take one block: m, n <= d = {d}, got {m} x {n}")
    sub = np.zeros((d, d))
    sub[:m, :n] = a
    return m, n, d, sub, np.arange(d)


def encrypt_diagonals(key_material, params: Params, a, *, level: int | None = None, scale: float | None = None,
                      block: int | None = None) -> EncryptedDiagonals:
    """Encrypt the diagonals of A (float64[m, n], m, n <= d <= N/2) with ``ckks.ops.encrypt`` (public or secret
    key), each at ``level`` and ``scale`` (defaults: the top user level, Delta). One ciphertext per diagonal
    nonzero by shape: min(d, m + n - 1) of them."""
    m, n, d, sub, idx = _one_block(params, a, block, "encrypt_diagonals")
    cts = {k: ops.encrypt(key_material, ops.encode(params, sub[idx, (idx + k) % d], level=level, scale=scale))
           for k in _offsets(m, n, d)}
    return EncryptedDiagonals(m, n, d, cts)


def enc_rotations(weights: EncryptedDiagonals) -> tuple[int, ...]:
    """The rotations :func:`enc_enc_matvec` needs: the nonzero diagonal offsets, in [1, d)."""
    return tuple(k for k in sorted(weights.cts) if k)


def _plain_vector(x, n: int, d: int, what: str) -> np.ndarray:
    x = np.asarray(x)
    if x.shape != (n,) or not np.issubdtype(x.dtype, np.number) or np.iscomplexobj(x):
        raise ParameterError(f"{what}: the vector must be real with shape ({n},), got {x.shape} {x.dtype}")
    out = np.zeros(d)
    out[:n] = x
    return out


def enc_matvec(weights: EncryptedDiagonals, x) -> Ciphertext:
    """u = A x for encrypted A (its diagonals) and a plaintext real x (n values): u = sum_k diag_k ⊙ rot(x, k),
    rot(x, k) computed in the clear, so no rotation and no key at all: one plaintext product per diagonal,
    then one rescale. (Rows would need log2 n rotations per row and a repacking; diagonals make the product
    rotation-free and the output land in the layout of :func:`matvec`.) Each rot(x, k) is encoded at
    q_l, the primes of the weights' level l: the output is at level l - 1 with the weights' scale (to a float ulp).

    Error: ||x||_1 eps_w + kappa sqrt(N) sqrt(T a_max^2 / (12 q_l^2) + (1 + h) / (12 Delta^2)) for weights
    with slot error eps_w and entries below a_max, T diagonals (:func:`enc_matvec_error_bound`)."""
    d = weights.block
    xp = _plain_vector(x, weights.cols, d, "enc_matvec")
    level = weights.level
    first = next(iter(weights.cts.values()))
    params = first.params
    q = math.prod(params.rescale_primes(level))
    acc = None
    for k, ct in weights.cts.items():
        t = ops.mul_plain(ops.drop_level(ct, level), ops.encode(params, np.roll(xp, -k), level=level, scale=q))
        acc = t if acc is None else ops.add(acc, t)
    return ops.rescale(acc)


def enc_matvec_error_bound(weights: EncryptedDiagonals, *, x, a_max: float, weight_error: float = 0.0) -> float:
    """The bound stated in :func:`enc_matvec`."""
    first = next(iter(weights.cts.values()))
    p, level = first.params, weights.level
    q = math.prod(p.rescale_primes(level))
    var = len(weights.cts) * a_max**2 / (12 * q**2) + _rescale_variance(p) / first.scale**2
    return float(np.sum(np.abs(x))) * weight_error + KAPPA * math.sqrt(p.n * var)


def enc_enc_matvec(weights: EncryptedDiagonals, ct: Ciphertext, keys: EvaluationKeys) -> Ciphertext:
    """u = A v, both encrypted: v (n values, replicated with period d) rotated by every nonzero offset k with
    one hoisted ModUp (:func:`crossfhe.ckks.ops.rotate_many`), then sum_k diag_k ⊙ rot(v, k) as T ciphertext
    products, each relinearized, and one rescale. Level: min(weights, v) - 1; scale Delta_w Delta_v / q_l.
    Rotations: :func:`enc_rotations` (T - 1 key switches plus T relinearizations).

    Error (:func:`enc_enc_matvec_error_bound`): with eps_w, eps_v the inputs' slot errors, a_max and x_max
    their largest slot magnitudes, T the diagonals,
    T (a_max eps_v + x_max eps_w + eps_w eps_v) + kappa sqrt(N) sqrt(T a_max^2 V_ks / Delta_v^2
    + T V_ks / (Delta_w Delta_v)^2 + (1 + h) / (12 Delta_out^2))."""
    if ct.params.digest() != next(iter(weights.cts.values())).params.digest():
        raise ParameterError("enc_enc_matvec: the vector and the weights belong to different parameters")
    _check_keys(keys, enc_rotations(weights), "enc_enc_matvec")
    level = min(weights.level, ct.level)
    rotated = ops.rotate_many(ops.drop_level(ct, level), list(weights.cts), keys)
    acc = None
    for k, w in weights.cts.items():
        t = ops.mul(ops.drop_level(w, level), rotated[k], keys)
        acc = t if acc is None else ops.add(acc, t)
    return ops.rescale(acc)


def enc_enc_matvec_error_bound(weights: EncryptedDiagonals, ct: Ciphertext, *, a_max: float, x_max: float,
                               weight_error: float = 0.0, input_error: float = 0.0) -> float:
    """The bound stated in :func:`enc_enc_matvec`."""
    w = next(iter(weights.cts.values()))
    p = w.params
    level = min(weights.level, ct.level)
    t = len(weights.cts)
    v_ks = _keyswitch_variance(p, level)
    out_scale = w.scale * ct.scale / math.prod(p.rescale_primes(level))
    var = (t * a_max**2 * v_ks / ct.scale**2 + t * v_ks / (w.scale * ct.scale) ** 2
           + _rescale_variance(p) / out_scale**2)
    return t * (a_max * input_error + x_max * weight_error + weight_error * input_error) + KAPPA * math.sqrt(p.n * var)




# --------------------------------------------------------------------------------------------------
# Encrypted weights, baby-step giant-step
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class EncryptedBSGS:
    """An encrypted m x n matrix (m, n <= d) for :func:`enc_enc_matvec_bsgs`: ``giants[j][i]`` encrypts the diagonal
    of offset k = j b + i pre-rotated by -j b, rot(diag_k, -j b), replicated with period d; ``baby`` = b. Only the
    weights' owner can pre-rotate (it knows the plaintext); the evaluator then needs b - 1 baby-step and one
    rotation per giant step instead of one per diagonal."""

    rows: int
    cols: int
    block: int
    baby: int
    giants: dict

    @property
    def level(self) -> int:
        return min(c.level for g in self.giants.values() for c in g.values())

    @property
    def count(self) -> int:
        return sum(len(g) for g in self.giants.values())


def encrypt_matrix_bsgs(key_material, params: Params, a, *, level: int | None = None, scale: float | None = None,
                        block: int | None = None, baby: int | None = None) -> EncryptedBSGS:
    """Encrypt A (float64[m, n], m, n <= d <= N/2) for :func:`enc_enc_matvec_bsgs`: one ciphertext per diagonal
    nonzero by shape (:func:`encrypt_diagonals`'s), pre-rotated per giant step. ``baby``: b, a power of two (default
    the one nearest sqrt(T) for T diagonals)."""
    m, n, d, sub, idx = _one_block(params, a, block, "encrypt_matrix_bsgs")
    offsets = _offsets(m, n, d)
    b = baby or 1 << max(0, round(math.log2(math.sqrt(len(offsets)))))
    if b & (b - 1) or not 1 <= b <= d:
        raise ParameterError(f"baby must be a power of two in [1, {d}], got {b}")
    giants: dict = {}
    for k in offsets:
        j, i = divmod(k, b)
        diag = np.roll(sub[idx, (idx + k) % d], j * b)  # rot(diag, -j b)
        giants.setdefault(j, {})[i] = ops.encrypt(key_material, ops.encode(params, diag, level=level, scale=scale))
    return EncryptedBSGS(m, n, d, b, giants)


def bsgs_rotations(weights: EncryptedBSGS) -> tuple[int, ...]:
    """The rotations :func:`enc_enc_matvec_bsgs` needs: the baby steps used and the nonzero giant steps j b."""
    babies = {i for g in weights.giants.values() for i in g if i}
    return tuple(sorted(babies | {j * weights.baby for j in weights.giants if j}))


def _sum_leading(p):
    """The sum mod q of an RNSPoly's leading axis (a halving tree of modular additions)."""
    while p.data.shape[0] > 1:
        n = p.data.shape[0]
        half = n // 2
        s = poly.add(p._replace(p.data[:half]), p._replace(p.data[half:2 * half]))
        if n % 2:
            s = s._replace(s.data.at[0].set(poly.add(s._replace(s.data[0]), p._replace(p.data[-1])).data))
        p = s
    return p._replace(p.data[0])


@jax.jit
def _tensor_sum(w0, w1, x0, x1):
    """sum_i (w_i x_i): the three polynomials of the summed degree-2 products of stacked operands."""
    return tuple(_sum_leading(d) for d in ev.tensor(w0, w1, x0, x1))


def enc_enc_matvec_bsgs(weights: EncryptedBSGS, ct: Ciphertext, keys: EvaluationKeys) -> Ciphertext:
    """u = A v with A encrypted as :func:`encrypt_matrix_bsgs` and v encrypted (n values, replicated with period d):

        u = sum_j rot( sum_i rot(diag_{j b + i}, -j b) ⊙ rot(v, i), j b ),

    the baby steps rot(v, i) hoisted (one ModUp, :func:`crossfhe.ckks.ops.rotate_many`), each giant step's inner sum
    accumulated as degree-2 products and relinearized once, then rotated: (b - 1) + (giants - 1) key switches and
    one relinearization per giant step, for T ciphertext products. Level min(weights, v) - 1, scale
    Delta_w Delta_v / q_l. Error: :func:`enc_enc_matvec_error_bound`'s terms (the same products, summed before
    fewer key switches)."""
    first = next(iter(next(iter(weights.giants.values())).values()))
    if ct.params.digest() != first.params.digest():
        raise ParameterError("enc_enc_matvec_bsgs: the vector and the weights belong to different parameters")
    _check_keys(keys, bsgs_rotations(weights), "enc_enc_matvec_bsgs")
    level = min(weights.level, ct.level)
    x = ops.drop_level(ct, level)
    babies = ops.rotate_many(x, sorted({i for g in weights.giants.values() for i in g}), keys)
    acc = None
    for j in sorted(weights.giants):
        items = sorted(weights.giants[j].items())
        ws = [ops.drop_level(w, level) for _, w in items]
        xs = [babies[i] for i, _ in items]

        def stacked(cs, part):
            p = getattr(cs[0], part)
            return p._replace(jax.numpy.stack([getattr(c, part).data for c in cs]))

        d0, d1, d2 = _tensor_sum(stacked(ws, "c0"), stacked(ws, "c1"), stacked(xs, "c0"), stacked(xs, "c1"))
        c0, c1 = ops.relinearize(d0, d1, d2, keys.relin, kernels=ct.params.kernels)
        inner = ops._like(x, c0, c1, ws[0].scale * x.scale)
        if j:
            inner = ops.rotate(inner, j * weights.baby, keys)
        acc = inner if acc is None else ops.add(acc, inner)
    return ops.rescale(acc)


__all__ = [
    "KAPPA",
    "EncodedMatrix",
    "EncryptedBSGS",
    "EncryptedDiagonals",
    "MatvecPlan",
    "bsgs_rotations",
    "enc_enc_matvec",
    "enc_enc_matvec_bsgs",
    "enc_enc_matvec_error_bound",
    "enc_matvec",
    "enc_matvec_error_bound",
    "enc_rotations",
    "encode_matrix",
    "encrypt_diagonals",
    "encrypt_matrix_bsgs",
    "matvec",
    "matvec_error_bound",
    "plan_matvec",
    "replicate",
    "replicate_error_bound",
    "replicate_rotations",
    "required_rotations",
    "sum_rotations",
    "sum_slots",
    "sum_slots_error_bound",
]
