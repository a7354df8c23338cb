"""Coefficient-encoded homomorphic matrix-vector product (CHAM Alg. 1, with input-output packing) on BFV.

u = A v mod t for a plaintext matrix A (m x n, entries in [0, t)) and an encrypted vector v (n entries). R rows
share each plaintext product (``rows_per_product``, a power of two, R <= N; R = 1 is CHAM as published), and
each vector block holds w = N / R entries:

1. **Vector** (once): v is cut into B = ceil(n / w) blocks v_b of w entries, each coefficient-encoded,
   pt(v_b) = sum_{j<w} v_{b w + j} X^j, and encrypted over Q ∪ P (:func:`crossfhe.bfv.ops.encrypt_extended`:
   Delta' = floor(QP / t)).
2. **Dot products**: the rows in groups of R; group g, block b is the polynomial
   pt(A_{g,b}) = sum_{u<R} sum_{j<w} A_{gR+u, bw+j} X^(u w - j) (X^(-j) = -X^(N-j); for R = 1 this is CHAM
   eq. (1)), so coefficient u w of pt(A_{g,b}) pt(v_b) is the inner product of row gR + u with v_b: the terms
   X^(u' w - j + j') land on u w only for u' = u, j' = j (|j' - j| < w). This is Cheetah's encoding of a
   matrix-vector product (Huang et al., USENIX Security 2022). The lifts of the plaintexts are transformed
   over Q ∪ P once (:func:`encode_matrix`); per group the B point-wise products are summed over Q ∪ P.
3. **Rescale by P** (CHAM §III-A, stage 4): ModDown from Q ∪ P to Q divides the phase by P: the message
   becomes Delta = Q/t-scaled (up to a rounding of m r / (t P), r = QP mod t) and the noise of the
   plaintext product, up to N t B / 2 times the fresh noise, shrinks by P. One ModDown per group (R rows).
4. **Extraction**: with R = 1 only the constant coefficient matters, and (c0_0, c1), c0_0 the constant
   coefficient of c0 as a constant polynomial, has the same constant coefficient of its phase (ExtractLWE
   followed by CHAM's re-embedding, eq. 3), computed in the EVAL domain as N^-1 sum_k c0(psi_k) and rescaled
   alone (a ModDown acts on each coefficient by itself), with no transform. With R > 1 the whole product is
   rescaled: the packing ignores the coefficients off the multiples of w.
5. **Packing** (:func:`crossfhe.convert.packing.pack_lwes` with ``first_level`` = log2(R) + 1, Rhombus's
   input-output packing, He et al., CCS 2024): the G groups of a tile of at most N rows go into one
   ciphertext, row gR + u at coefficient u w + g w / G' (G' = the next power of two >= G; positions in
   :attr:`HMVPResult.positions`), the other coefficients 0. G' - 1 + log2(w / G') key switches per tile
   instead of CHAM's N' - 1 + log2(N / N') (N' >= the tile's rows).

Rows are processed ``rows_per_call`` at a time (a batched kernel per chunk of groups: no Python loop per row);
m > N gives ceil(m / N) output ciphertexts. :func:`hmvp_program` runs the dot products and every tile's packing tree
as one compiled executable (the same words as :func:`hmvp`, whose kernel calls are separate programs).

Noise: the result's phase error is the rescaled dot-product error, at most
(N t B / 2)(fresh noise) / P + (1 + h) / 2 per input (h = Hamming weight of s, N for a uniform ternary s),
plus the packing's key-switch errors, at most (w - 1) B_ks
(B_ks = :func:`~crossfhe.core.keyswitch.keyswitch_noise_bound`; :func:`crossfhe.convert.packing.pack_noise_bound`).
:func:`crossfhe.bfv.ops.noise_budget` measures what is left.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe._deprecated import module_names
from crossfhe.bfv import ops as bfv
from crossfhe.bfv.ciphertext import Ciphertext, Encoding, EvaluationKeys
from crossfhe.bfv.encoder import check_values
from crossfhe.bfv.params import Params
from crossfhe.convert.packing import pack_lwes, packing_galois_elements
from crossfhe.core import evaluator as ev
from crossfhe.core.keys import check_key_ids
from crossfhe.core.keyswitch import mod_down_eval
from crossfhe.errors import ParameterError
from crossfhe.math import random as crandom
from crossfhe.math import xla
from crossfhe.math.modular import (
    ModulusTable,
    add_mod,
    barrett_mul,
    reduce_u64,
    shoup_mul,
    shoup_precompute,
    sub_mod,
    sum_wide,
)
from crossfhe.math.rns import ModDownPlan, RNSBasis, fast_basis_conversion
from crossfhe.math.xla import jit, plan_cache
from crossfhe.ring.ntt import NTTPlan, ntt
from crossfhe.ring.poly import Domain, RNSPoly

_static = partial(field, metadata={"static": True})

DEFAULT_ROWS_PER_CALL = 256
"""Rows per call of the dot-product kernel: bounds its memory (rows x B x (L + K) x N words / R, twice)."""

DEFAULT_ROWS_PER_PRODUCT = 16
"""R, the rows sharing a plaintext product (module docstring): packing key switches and ModDowns fall R-fold,
the vector takes R times as many ciphertexts. Measured against R = 1 and 64 in benchmarks/README.md (issue 32)."""


UNROLLED_BLOCKS = 32
"""Column blocks up to which the dot kernel's sum over them is unrolled (past it, a loop)."""


def _check_rows_per_product(params: Params, r) -> int:
    if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 1 or r & (r - 1) or r > params.n:
        raise ParameterError(f"rows_per_product must be a power of two in [1, N = {params.n}], got {r!r}")
    return int(r)


def required_galois_elements(params: Params) -> tuple[int, ...]:
    """The Galois elements HMVP's packing needs (2^l + 1, l = 1..log2 N), for ``bfv.ops.keygen(...,
    galois_elements=...)``."""
    return tuple(packing_galois_elements(params.n))


# --------------------------------------------------------------------------------------------------
# The encrypted vector
# --------------------------------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False)
class CoefficientVector:
    """An encrypted vector of ``length`` values mod t for HMVP: ``c0``, ``c1`` RNSPoly EVAL over Q ∪ P,
    uint32 [B, L + K, N], block b coefficient-encoding entries b w ... b w + w - 1 in its coefficients 0 .. w - 1,
    w = N / ``rows_per_product`` (module docstring). ``key_id``: the key pair it was encrypted under
    (:func:`crossfhe.core.keys.key_id`)."""

    c0: RNSPoly
    c1: RNSPoly
    params: Params = _static()
    length: int = _static()
    key_id: str | None = _static(default=None)
    rows_per_product: int = _static(default=1)

    @property
    def blocks(self) -> int:
        return self.c0.data.shape[0]

    @property
    def width(self) -> int:
        """w, the entries per block."""
        return self.params.n // self.rows_per_product


def vector_blocks(params: Params, v, rows_per_product: int) -> np.ndarray:
    """uint32 [B, N]: v (1-D, in [0, t)) in blocks of w = N / ``rows_per_product`` entries, block b holding
    v_{b w + j} at coefficient j < w and 0 above."""
    width = params.n // rows_per_product
    blocks = math.ceil(v.size / width)
    padded = np.zeros(blocks * width, dtype=np.uint32)
    padded[: v.size] = v
    out = np.zeros((blocks, params.n), dtype=np.uint32)
    out[:, :width] = padded.reshape(blocks, width)
    return out


def encrypt_vector(
    key_material,
    params: Params,
    v,
    *,
    key: crandom.ChaChaKey | None = None,
    rows_per_product: int = DEFAULT_ROWS_PER_PRODUCT,
) -> CoefficientVector:
    """Encrypt v (1-D, n >= 1 integers in [0, t)) for :func:`hmvp` with a PublicKey / EvaluationKeys or a
    SecretKey, in ceil(n R / N) blocks (R = ``rows_per_product``, which the matrix must be encoded with too).
    ``key``: a ChaChaKey used once (default: fresh from os.urandom)."""
    v = check_values(v, params.t, "encrypt_vector")
    if v.ndim != 1 or v.size == 0:
        raise ParameterError(f"encrypt_vector takes a non-empty 1-D vector, got shape {v.shape}")
    r = _check_rows_per_product(params, rows_per_product)
    c0, c1 = bfv.encrypt_extended(key_material, params, jnp.asarray(vector_blocks(params, v, r)), key=key)
    return CoefficientVector(c0, c1, params, v.size, key_material.key_id, r)


# --------------------------------------------------------------------------------------------------
# The matrix
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class EncodedMatrix:
    """A plaintext matrix ready for :func:`hmvp`: ``rows`` uint32 [G, B, N] in [0, t), the plaintext of row
    group g and column block b (module docstring, step 2: R = ``rows_per_product`` rows, w = N / R columns), and
    ``evals`` uint32 [G, B, L + K, N], their centered lifts transformed over Q ∪ P (a device array, made once:
    the plaintext side of every product, as the diagonal method encodes its diagonals offline)."""

    rows: np.ndarray
    params: Params
    shape: tuple[int, int]
    evals: jax.Array | None = None
    rows_per_product: int = 1


def matrix_polynomials(params: Params, a: np.ndarray, rows_per_product: int) -> np.ndarray:
    """uint32 [G, B, N]: the plaintexts of :class:`EncodedMatrix` for a (m x n, in [0, t)); groups never span two
    tiles of N rows, since R divides N."""
    r, n_ = rows_per_product, params.n
    width = n_ // r
    m, n = a.shape
    groups, blocks = math.ceil(m / r), math.ceil(n / width)
    padded = np.zeros((groups * r, blocks * width), dtype=np.int64)
    padded[:m, :n] = a
    vals = padded.reshape(groups, r, blocks, width).transpose(0, 2, 1, 3)  # [G, B, u, j]
    u, j = np.arange(r)[:, None], np.arange(width)[None, :]
    negative = (u == 0) & (j > 0)  # X^(-j) = -X^(N - j)
    vals = np.where(negative, (-vals) % params.t, vals)
    out = np.zeros((groups, blocks, n_), dtype=np.uint32)
    out[..., ((u * width - j) % n_).ravel()] = vals.reshape(groups, blocks, n_)
    return out


def encode_matrix(
    params: Params,
    a,
    *,
    rows_per_call: int = DEFAULT_ROWS_PER_CALL,
    rows_per_product: int = DEFAULT_ROWS_PER_PRODUCT,
) -> EncodedMatrix:
    """Check a (m x n integers in [0, t)), lay its rows out as the plaintexts of step 2 of the module docstring
    (R = ``rows_per_product``, as the vector's) and transform their centered lifts over Q ∪ P
    (``rows_per_call`` rows per compiled call)."""
    a = check_values(a, params.t, "encode_matrix")
    if a.ndim != 2 or 0 in a.shape:
        raise ParameterError(f"encode_matrix takes a non-empty 2-D matrix, got shape {a.shape}")
    r = _check_rows_per_product(params, rows_per_product)
    rows = matrix_polynomials(params, a, r)
    tables = _dot_tables(params)
    per_call = max(1, rows_per_call // rows.shape[1])  # polynomials per call, as with R = 1
    parts = []
    for lo in range(0, rows.shape[0], per_call):
        chunk = _pad_rows(rows[lo : lo + per_call], per_call)
        parts.append(_k_lift(jnp.asarray(chunk), tables, ev.word(params.t))[: min(per_call, rows.shape[0] - lo)])
    evals = parts[0] if len(parts) == 1 else jnp.concatenate(parts)
    return EncodedMatrix(rows, params, a.shape, evals, r)


def _pad_rows(rows: np.ndarray, most: int) -> np.ndarray:
    """rows padded with zero rows to the next power of two (at most ``most``): compiled shapes stay few."""
    size = min(most, 1 << (len(rows) - 1).bit_length())
    if size > len(rows):
        rows = np.concatenate([rows, np.zeros((size - len(rows),) + rows.shape[1:], rows.dtype)])
    return rows


# --------------------------------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False)
class _DotTables:
    """Tables of the dot-product kernel: NTT over Q ∪ P, the lift constants, ModDown by P, Barrett of Q ∪ P."""

    ntt_qp: NTTPlan
    ntt_q: NTTPlan
    ntt_p: NTTPlan
    down: ModDownPlan
    qp: tuple
    qp_mont: tuple
    tq: np.ndarray
    n_inv_qp: tuple
    n_inv_q: tuple


@plan_cache(maxsize=16, on_device=True)
def _dot_tables(params: Params, width: int | None = None) -> _DotTables:
    """The kernels' tables; ``n_inv_q`` is width^-1 mod Q (default width N), the packing's normalization."""
    qp = params.q + params.p
    t_qp = ModulusTable.create(qp)
    n_inv = np.array([pow(params.n, -1, m) for m in qp], dtype=np.uint32).reshape(-1, 1)
    w_inv = np.array([pow(width or params.n, -1, m) for m in qp], dtype=np.uint32).reshape(-1, 1)
    kern = params.kernels
    return _DotTables(
        ntt_qp=NTTPlan.create(params.n, qp, kern),
        ntt_q=NTTPlan.create(params.n, params.q, kern),
        ntt_p=NTTPlan.create(params.n, params.p, kern),
        down=ModDownPlan.create(RNSBasis(params.q), RNSBasis(params.p), exact=True, kernels=kern),
        qp=(t_qp.q, t_qp.barrett_mu, t_qp.bits),
        qp_mont=(t_qp.mont_qinv, t_qp.mont_r2),
        tq=np.array([m - params.t for m in qp], dtype=np.uint32).reshape(-1, 1),
        n_inv_qp=(n_inv, shoup_precompute(n_inv, t_qp.q.astype(np.uint64))),
        n_inv_q=(w_inv[: len(params.q)], shoup_precompute(w_inv, t_qp.q.astype(np.uint64))[: len(params.q)]),
    )


@jit
def _k_lift(rows, tables: _DotTables, t):
    """rows uint32 [r, B, N] in [0, t) -> [r, B, L + K, N]: the centered lift (x > t/2 as x - t) over Q ∪ P, EVAL."""
    x = rows[..., None, :]
    x = jnp.where(x > t // 2, x + tables.tq, jnp.broadcast_to(x, x.shape[:-2] + (tables.tq.shape[0], x.shape[-1])))
    return ntt(x, tables.ntt_qp)


@jit
def _k_dot(x, v0, v1, tables: _DotTables):
    """Dot products, rescale by P, extraction: x uint32 [r, B, L + K, N] (:attr:`EncodedMatrix.evals`); v0, v1
    [B, L + K, N] EVAL.

    Returns (c0, c1) uint32 [r, L, N] EVAL over Q (module docstring, steps 2-4), both times N^-1 mod Q (the
    packing's normalization): c1 the rescaled product x v1; c0 the constant polynomial of the rescaled product
    x v0's coefficient 0. That coefficient is
    computed first, over Q ∪ P, as N^-1 times the sum of the product's evaluations, and rescaled alone: a
    ModDown acts on each coefficient by itself, so these are the words of the rescaled polynomial's
    coefficient 0, without its transforms.
    """
    q, mu, bits = tables.qp
    acc, const = None, None
    for b in range(x.shape[-3]):  # B is small: partial rows of the column blocks, added mod q
        xb = x[..., b, :, :]
        p1 = barrett_mul(xb, v1[b], q, mu, bits)
        hi, lo = sum_wide(jnp.zeros_like(xb), barrett_mul(xb, v0[b], q, mu, bits), axis=-1)
        s0 = reduce_u64(hi[..., None], lo[..., None], q, mu, bits, *tables.qp_mont)  # [r, L + K, 1]
        acc = p1 if acc is None else add_mod(acc, p1, q)
        const = s0 if const is None else add_mod(const, s0, q)
    const = shoup_mul(const, tables.n_inv_qp[0], tables.n_inv_qp[1], q)  # coefficient 0 over Q ∪ P
    k = tables.ntt_q.limbs
    c1 = mod_down_eval(acc, tables.down, tables.ntt_q, tables.ntt_p)  # [r, L, N]
    z = fast_basis_conversion(const[..., k:, :], tables.down.conv)
    c00 = shoup_mul(sub_mod(const[..., :k, :], z, tables.down.q), tables.down.p_inv, tables.down.p_inv_shoup,
                    tables.down.q)
    # times N^-1 mod Q: the packing's normalization (pack_lwes(normalize=True)), here where it costs no pass
    c00 = shoup_mul(c00, *tables.n_inv_q, tables.down.q)
    c1 = shoup_mul(c1, *tables.n_inv_q, tables.down.q)
    return jnp.broadcast_to(c00, c1.shape), c1


@jit
def _k_dot_full(x, v0, v1, tables: _DotTables):
    """:func:`_k_dot` for R > 1 (module docstring, step 4): both parts of the summed products rescaled whole,
    times w^-1 mod Q (``tables.n_inv_q`` holds it: :func:`_dot_tables` with the width)."""
    q, mu, bits = tables.qp
    v = jnp.stack([v0, v1], axis=1)  # [B, 2, L + K, N]

    def product(b):
        return barrett_mul(x[..., b, None, :, :], v[b], q, mu, bits)  # [r, 2, L + K, N]

    blocks = x.shape[-3]
    if blocks <= UNROLLED_BLOCKS:
        acc = product(0)
        for b in range(1, blocks):
            acc = add_mod(acc, product(b), q)
    else:  # many narrow blocks (large R): a loop, so that the program does not grow with n
        acc = jax.lax.fori_loop(1, blocks, lambda b, a: add_mod(a, product(b), q), product(0))
    c = mod_down_eval(acc, tables.down, tables.ntt_q, tables.ntt_p)
    c = shoup_mul(c, *tables.n_inv_q, tables.down.q)
    return c[..., 0, :, :], c[..., 1, :, :]


def _dot_products(mat: EncodedMatrix, vec: CoefficientVector, start: int, stop: int, rows_per_call: int):
    """(c0, c1) RNSPoly [stop - start, L, N] EVAL over Q for row groups start..stop-1."""
    params = mat.params
    tables = _dot_tables(params, params.n // mat.rows_per_product)
    kernel = _k_dot if mat.rows_per_product == 1 else _k_dot_full
    per_call = max(1, rows_per_call // mat.evals.shape[1])
    parts0, parts1 = [], []
    for lo in range(start, stop, per_call):
        hi = min(lo + per_call, stop)
        size = min(per_call, 1 << (hi - lo - 1).bit_length())  # compiled shapes: powers of two only
        x = mat.evals if (lo, hi) == (0, mat.evals.shape[0]) else xla.rows(mat.evals, lo, hi)
        x = xla.pad_rows(x, size)
        c0, c1 = kernel(x, vec.c0.data, vec.c1.data, tables)
        parts0.append(c0 if size == hi - lo else xla.rows(c0, 0, hi - lo))
        parts1.append(c1 if size == hi - lo else xla.rows(c1, 0, hi - lo))
    cat = lambda ps: ps[0] if len(ps) == 1 else jnp.concatenate(ps)  # noqa: E731
    return RNSPoly(cat(parts0), params.q, Domain.EVAL), RNSPoly(cat(parts1), params.q, Domain.EVAL)


# --------------------------------------------------------------------------------------------------
# HMVP
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class HMVPResult:
    """u = A v mod t encrypted: ``ciphertexts[k]`` holds rows k N ... k N + N - 1 (at most N), row k N + i at
    coefficient ``positions[k][i]`` (module docstring, step 5), every other coefficient 0; ``length`` = m."""

    ciphertexts: tuple[Ciphertext, ...]
    positions: tuple[np.ndarray, ...]
    length: int


def tile_positions(params: Params, rows: int, rows_per_product: int) -> np.ndarray:
    """int64 [rows]: the coefficient of each row of a tile of ``rows`` <= N rows after the packing: row g R + u at
    u w + g w / G' (w = N / R, G' = the next power of two >= the tile's groups)."""
    r, width = rows_per_product, params.n // rows_per_product
    groups = 1 << (math.ceil(rows / r) - 1).bit_length()
    i = np.arange(rows)
    return (i % r) * width + (i // r) * (width // groups)


def _check_inputs(mat: EncodedMatrix, vec: CoefficientVector, keys: EvaluationKeys) -> Params:
    if not isinstance(mat, EncodedMatrix):
        raise TypeError(f"hmvp takes an EncodedMatrix (encode_matrix), got {type(mat).__name__}")
    if not isinstance(vec, CoefficientVector):
        raise TypeError(f"hmvp takes an CoefficientVector (encrypt_vector), got {type(vec).__name__}")
    params = mat.params
    if vec.params != params or keys.params != params:
        raise ParameterError("hmvp: the matrix, the vector and the keys belong to different parameter sets")
    if mat.rows_per_product != vec.rows_per_product:
        raise ParameterError(
            f"hmvp: the matrix was encoded with rows_per_product={mat.rows_per_product}, the vector encrypted with "
            f"rows_per_product={vec.rows_per_product}; give both the same"
        )
    if mat.shape[1] != vec.length:
        raise ParameterError(
            f"hmvp: shape mismatch: the matrix has {mat.shape[1]} columns, the vector {vec.length} entries"
        )
    missing = [g for g in required_galois_elements(params) if g not in keys.galois]
    if missing:
        raise ParameterError(
            f"hmvp: missing Galois keys for the packing elements {missing}; generate them with "
            "bfv.ops.keygen(params, galois_elements=hmvp.required_galois_elements(params))"
        )
    check_key_ids("hmvp", vec.key_id, keys.key_id)
    return params


@jax.tree_util.register_static
@dataclass(frozen=True)
class _Shape:
    """What decides an :func:`hmvp` program besides its arrays' shapes: the matrix's shape, R and the rows per call
    (static: part of the program's argument structure)."""

    rows: int
    rows_per_product: int
    rows_per_call: int


def _tiles(evals, vec: CoefficientVector, galois: dict, shape: _Shape, timings: dict | None = None) -> tuple:
    """((c0, c1) RNSPoly EVAL over Q per tile of at most N rows): the dot products and the packing of each tile
    (module docstring, steps 2-5). Traceable; ``timings`` (eager calls only) as for :func:`hmvp`."""
    params = vec.params
    m, r = shape.rows, shape.rows_per_product
    mat = EncodedMatrix(None, params, (m, vec.length), evals, r)
    outs = []
    for start in range(0, m, params.n):
        stop = min(start + params.n, m)
        t0 = time.perf_counter()
        c0, c1 = _dot_products(mat, vec, start // r, -(-stop // r), shape.rows_per_call)
        if timings is not None:
            jax.block_until_ready((c0.data, c1.data))
            t1 = time.perf_counter()
            timings["dot"] = timings.get("dot", 0.0) + t1 - t0
        # normalized by the dot kernel (times w^-1 mod Q)
        p0, p1 = pack_lwes(c0, c1, galois, normalize=False, kernels=params.kernels, first_level=r.bit_length())
        if timings is not None:
            jax.block_until_ready((p0.data, p1.data))
            timings["pack"] = timings.get("pack", 0.0) + time.perf_counter() - t1
        outs.append((p0, p1))
    return tuple(outs)


_HMVP = xla.Program(_tiles, name="hmvp", materialize=True)


def _result(tiles: tuple, vec: CoefficientVector, shape: _Shape) -> HMVPResult:
    params, m = vec.params, shape.rows
    outs = tuple(Ciphertext(p0, p1, params, vec.key_id) for p0, p1 in tiles)
    positions = tuple(tile_positions(params, min(start + params.n, m) - start, shape.rows_per_product)
                      for start in range(0, m, params.n))
    return HMVPResult(outs, positions, m)


def _prepare(mat: EncodedMatrix, vec: CoefficientVector, keys: EvaluationKeys, rows_per_call: int):
    params = _check_inputs(mat, vec, keys)
    galois = {g: keys.galois[g] for g in required_galois_elements(params)}
    return galois, _Shape(mat.shape[0], mat.rows_per_product, int(rows_per_call))


def hmvp(
    mat: EncodedMatrix,
    vec: CoefficientVector,
    keys: EvaluationKeys,
    *,
    rows_per_call: int = DEFAULT_ROWS_PER_CALL,
    timings: dict | None = None,
) -> HMVPResult:
    """u = A v mod t (module docstring). ``keys`` must hold the packing Galois keys
    (:func:`required_galois_elements`). Each kernel call is its own cached compiled program (the dot-product
    chunks, every packing level's key switches); :func:`hmvp_program` gives the same words as one executable.

    ``timings``: if a dict, the seconds spent in "dot" (products, rescale, extraction) and "pack" (packing key
    switches) are added to it (the stages are then waited on, which costs a little overlap)."""
    galois, shape = _prepare(mat, vec, keys, rows_per_call)
    return _result(_tiles(mat.evals, vec, galois, shape, timings), vec, shape)


def hmvp_program(
    mat: EncodedMatrix,
    vec: CoefficientVector,
    keys: EvaluationKeys,
    *,
    rows_per_call: int = DEFAULT_ROWS_PER_CALL,
) -> HMVPResult:
    """:func:`hmvp` as one compiled executable per call (:class:`crossfhe.math.xla.Program`): the dot products and
    every tile's packing tree, with the matrix's transformed rows, the vector, the packing keys and every table as
    its arguments: the same words, one dispatch (what an accelerator needs). It is traced and compiled once per
    argument structure (the parameters, the matrix's shape, R, ``rows_per_call``, the key pair's identifier) and
    reused by every call that shares it. Its kernels' results are materialized (``Program(materialize=True)``), so
    XLA does not compute them again inside each step that reads them (benchmarks/README.md, "Workloads as one
    program, without recomputation")."""
    galois, shape = _prepare(mat, vec, keys, rows_per_call)
    return _result(_HMVP(mat.evals, vec, galois, shape), vec, shape)


@dataclass(frozen=True)
class Work:
    """The operations of one :func:`hmvp` call (module docstring), from the shapes: ``key_switches`` (per tile of
    at most N rows, G' - 1 + log2(w / G'), G' the next power of two >= its ceil(rows / R) groups), ``dot_limbs``
    (the ModDowns' limb transforms: K + L per rescaled polynomial, c1 alone at R = 1, both parts above),
    ``products`` (word products of the point-wise products: 2 (L + K) N per group and column block),
    ``groups``, ``blocks`` (column blocks B), ``vector_ciphertexts`` (= B)."""

    key_switches: int
    dot_limbs: int
    products: int
    groups: int
    blocks: int

    @property
    def vector_ciphertexts(self) -> int:
        return self.blocks


def work(params: Params, m: int, n: int, rows_per_product: int = DEFAULT_ROWS_PER_PRODUCT) -> Work:
    """:class:`Work` of an m x n :func:`hmvp` at ``params`` with R = ``rows_per_product``."""
    r = _check_rows_per_product(params, rows_per_product)
    width = params.n // r
    key_switches = groups_all = 0
    for start in range(0, m, params.n):
        groups = math.ceil(min(params.n, m - start) / r)
        groups_all += groups
        ell = (groups - 1).bit_length()
        key_switches += (1 << ell) - 1 + int(math.log2(width)) - ell
    k, kk = len(params.q), len(params.p)
    blocks = math.ceil(n / width)
    dot_limbs = groups_all * (k + kk) * (1 if r == 1 else 2)
    return Work(key_switches, dot_limbs, groups_all * blocks * 2 * (k + kk) * params.n, groups_all, blocks)


def decrypt_result(sk, res: HMVPResult, *, check: bool = True) -> np.ndarray:
    """u (int64 [m] in [0, t)) from an :class:`HMVPResult` with the secret key. With ``check`` (default) a
    ciphertext whose noise budget is exhausted raises ParameterError instead of decrypting to garbage."""
    decrypt = bfv.decrypt_checked if check else bfv.decrypt
    out = [bfv.decode(decrypt(sk, ct, encoding=Encoding.COEFF))[pos] for ct, pos in zip(res.ciphertexts, res.positions)]
    return np.concatenate(out)


def noise_budget(sk, res: HMVPResult) -> int:
    """The smallest noise budget (bits) among the result's ciphertexts."""
    return min(bfv.noise_budget(sk, ct) for ct in res.ciphertexts)


def matvec_reference(a, v, t: int) -> np.ndarray:
    """A v mod t exactly (Python ints), for tests and benchmarks."""
    a = np.asarray(a, dtype=object)
    v = np.asarray(v, dtype=object)
    return np.asarray((a.dot(v)) % t, dtype=np.int64)


__all__ = [
    "EncodedMatrix",
    "CoefficientVector",
    "HMVPResult",
    "decrypt_result",
    "encode_matrix",
    "encrypt_vector",
    "hmvp",
    "hmvp_program",
    "matrix_polynomials",
    "matvec_reference",
    "noise_budget",
    "required_galois_elements",
    "Work",
    "tile_positions",
    "vector_blocks",
    "work",
]


__getattr__ = module_names("crossfhe.linalg.hmvp", {"EncryptedVector": (CoefficientVector, "CoefficientVector")})
