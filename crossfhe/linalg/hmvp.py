"""Coefficient-encoded homomorphic matrix-vector product (CHAM Alg. 1) on BFV.

u = A v mod t for a plaintext matrix A (m x n, entries in [0, t)) and an encrypted vector v (n entries):

1. **Vector** (once): v is cut into B = ceil(n / N) blocks v_b, each coefficient-encoded,
   pt(v_b) = sum_j v_{b,j} X^j, and encrypted over Q ∪ P (:func:`crossfhe.bfv.ops.encrypt_extended`:
   Delta' = floor(QP / t)).
2. **Dot products**: row i, block b is encoded as in CHAM eq. (1), pt(A_{i,b}) = A_{i,b,0} -
   sum_{j>=1} A_{i,b,j} X^(N-j), so the constant coefficient of pt(A_{i,b}) pt(v_b) is the inner product
   <A_{i,b}, v_b> (eq. 2). One plaintext product per row and block (the row's centered lift, NTT over
   Q ∪ P, point-wise product), the B partial rows summed (aggregation for n > N).
3. **Rescale by P** (CHAM §III-A, stage 4): ModDown from Q ∪ P to Q divides the phase by P: the message
   becomes Delta = Q/t-scaled (up to a rounding of m r / (t P), r = QP mod t) and the noise of the
   plaintext product, up to N t B / 2 times the fresh noise, shrinks by P.
4. **Extraction** (eq. 3): the RLWE ciphertext (c0_0, c1), with c0_0 the constant coefficient of c0 as a
   constant polynomial, has the same constant coefficient of its phase as (c0, c1): that is ExtractLWE
   followed by CHAM's re-embedding, done in the EVAL domain as c0_0 = N^-1 sum_k c0(psi_k) (a constant
   polynomial evaluates to itself everywhere), with no transform.
5. **Packing** (CHAM Alg. 2-3 and the trace, :func:`crossfhe.convert.packing.pack_lwes`): the rows of a
   tile of at most N rows go into one ciphertext, row i at coefficient i N / n' (n' = the next power of
   two >= the tile's rows), the other coefficients 0. n' - 1 + log2(N / n') key switches per tile.

Rows are processed ``rows_per_call`` at a time (a jitted, batched kernel per chunk: no Python loop per
row); m > N gives ceil(m / N) output ciphertexts.

Noise: the result's phase error is the rescaled dot-product error, at most
(N t B / 2)(fresh noise) / P + (1 + h) / 2 per input (h = Hamming weight of s, N for a uniform ternary s),
plus the packing's key-switch errors, at most (N - 1) B_ks
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

from crossfhe.bfv import ops as bfv
from crossfhe.bfv.ciphertext import Ciphertext, Encoding, EvaluationKeys
from crossfhe.bfv.encoder import check_values
from crossfhe.bfv.params import Params
from crossfhe.convert.packing import pack_lwes, packing_galois_elements
from crossfhe.core.keys import check_key_ids
from crossfhe.core.keyswitch import mod_down_eval
from crossfhe.errors import ParameterError
from crossfhe.math import random as crandom
from crossfhe.math.modular import ModulusTable, add_mod, barrett_mul, reduce_u64, shoup_mul, shoup_precompute, sum_wide
from crossfhe.math.rns import ModDownPlan, RNSBasis
from crossfhe.math.xla import jit, plan_cache
from crossfhe.ring.ntt import NTTPlan, ntt
from crossfhe.ring.poly import Domain, RNSPoly

_static = partial(field, metadata={"static": True})

DEFAULT_ROWS_PER_CALL = 256
"""Rows per call of the dot-product kernel: bounds its memory (rows x B x (L + K) x N words, twice)."""


def required_galois_elements(params: Params) -> tuple[int, ...]:
    """The Galois elements HMVP's packing needs (2^l + 1, l = 1..log2 N), for ``bfv.ops.keygen(...,
    galois_elements=...)``."""
    return tuple(packing_galois_elements(params.n))


# --------------------------------------------------------------------------------------------------
# The encrypted vector
# --------------------------------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False)
class EncryptedVector:
    """An encrypted vector of ``length`` values mod t for HMVP: ``c0``, ``c1`` RNSPoly EVAL over Q ∪ P,
    uint32 [B, L + K, N], block b coefficient-encoding entries b N ... b N + N - 1 (module docstring).
    ``key_id``: the key pair it was encrypted under (:func:`crossfhe.core.keys.key_id`)."""

    c0: RNSPoly
    c1: RNSPoly
    params: Params = _static()
    length: int = _static()
    key_id: str | None = _static(default=None)

    @property
    def blocks(self) -> int:
        return self.c0.data.shape[0]


def encrypt_vector(key_material, params: Params, v, *, key: crandom.ChaChaKey | None = None) -> EncryptedVector:
    """Encrypt v (1-D, n >= 1 integers in [0, t)) for :func:`hmvp` with a PublicKey / EvaluationKeys or a
    SecretKey. ``key``: a ChaChaKey used once (default: fresh from os.urandom)."""
    v = check_values(v, params.t, "encrypt_vector")
    if v.ndim != 1 or v.size == 0:
        raise ParameterError(f"encrypt_vector takes a non-empty 1-D vector, got shape {v.shape}")
    n, blocks = v.size, math.ceil(v.size / params.n)
    padded = np.zeros(blocks * params.n, dtype=np.uint32)
    padded[:n] = v
    c0, c1 = bfv.encrypt_extended(key_material, params, jnp.asarray(padded.reshape(blocks, params.n)), key=key)
    return EncryptedVector(c0, c1, params, n, key_material.key_id)


# --------------------------------------------------------------------------------------------------
# The matrix
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class EncodedMatrix:
    """A plaintext matrix ready for :func:`hmvp`: ``rows`` uint32 [m, B, N] in [0, t), row i, block b in
    the order of CHAM eq. (1) (coefficient 0 = A_{i,bN}, coefficient N - j = -A_{i,bN+j} mod t)."""

    rows: np.ndarray
    params: Params
    shape: tuple[int, int]


def encode_matrix(params: Params, a) -> EncodedMatrix:
    """Check a (m x n integers in [0, t)) and lay its rows out as CHAM eq. (1) polynomials (NumPy)."""
    a = check_values(a, params.t, "encode_matrix")
    if a.ndim != 2 or 0 in a.shape:
        raise ParameterError(f"encode_matrix takes a non-empty 2-D matrix, got shape {a.shape}")
    m, n = a.shape
    blocks = math.ceil(n / params.n)
    padded = np.zeros((m, blocks * params.n), dtype=np.int64)
    padded[:, :n] = a
    padded = padded.reshape(m, blocks, params.n)
    rows = np.empty_like(padded)
    rows[..., 0] = padded[..., 0]
    rows[..., 1:] = (-padded[..., :0:-1]) % params.t  # coefficient N - j holds -A_j
    return EncodedMatrix(rows.astype(np.uint32), params, (m, n))


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
    tq: np.ndarray
    q: tuple
    n_inv: tuple


@plan_cache(maxsize=16, on_device=True)
def _dot_tables(params: Params) -> _DotTables:
    qp = params.q + params.p
    t_qp, t_q = ModulusTable.create(qp), ModulusTable.create(params.q)
    n_inv = np.array([pow(params.n, -1, m) for m in params.q], dtype=np.uint32).reshape(-1, 1)
    kern = params.kernels
    return _DotTables(
        ntt_qp=NTTPlan.create(params.n, qp, kern),
        ntt_q=NTTPlan.create(params.n, params.q, kern),
        ntt_p=NTTPlan.create(params.n, params.p, kern),
        down=ModDownPlan.create(RNSBasis(params.q), RNSBasis(params.p), exact=True, kernels=kern),
        qp=(t_qp.q, t_qp.barrett_mu, t_qp.bits),
        tq=np.array([m - params.t for m in qp], dtype=np.uint32).reshape(-1, 1),
        q=(t_q.q, t_q.barrett_mu, t_q.bits, t_q.mont_qinv, t_q.mont_r2),
        n_inv=(n_inv, shoup_precompute(n_inv, t_q.q.astype(np.uint64))),
    )


@jit
def _k_dot(rows, v0, v1, tables: _DotTables, t):
    """Dot products, rescale by P, extraction: rows uint32 [r, B, N] in [0, t); v0, v1 [B, L + K, N] EVAL.

    Returns (c0, c1) uint32 [r, L, N] EVAL over Q: c0 the constant polynomial of coefficient 0 of the
    rescaled product, c1 the rescaled product's c1 (module docstring, steps 2-4).
    """
    q, mu, bits = tables.qp
    x = rows[..., None, :]
    x = jnp.where(x > t // 2, x + tables.tq, jnp.broadcast_to(x, x.shape[:-2] + (tables.tq.shape[0], x.shape[-1])))
    x = ntt(x, tables.ntt_qp)  # [r, B, L + K, N]
    acc = None
    for b in range(x.shape[-3]):  # B is small: partial rows of the column blocks, added mod q
        xb = x[..., b, :, :]
        prod = jnp.stack([barrett_mul(xb, v0[b], q, mu, bits), barrett_mul(xb, v1[b], q, mu, bits)], axis=-3)
        acc = prod if acc is None else add_mod(acc, prod, q[None])
    c = mod_down_eval(acc, tables.down, tables.ntt_q, tables.ntt_p)  # [r, 2, L, N]
    c0, c1 = c[..., 0, :, :], c[..., 1, :, :]
    hi, lo = sum_wide(jnp.zeros_like(c0), c0, axis=-1)
    qq, qmu, qbits, qinv, r2 = tables.q
    const = reduce_u64(hi[..., None], lo[..., None], qq, qmu, qbits, qinv, r2)  # sum of the evaluations = N c0_0
    const = shoup_mul(const, tables.n_inv[0], tables.n_inv[1], qq)
    return jnp.broadcast_to(const, c0.shape), c1


def _dot_products(mat: EncodedMatrix, vec: EncryptedVector, start: int, stop: int, rows_per_call: int):
    """(c0, c1) RNSPoly [stop - start, L, N] EVAL over Q for rows start..stop-1."""
    params = mat.params
    tables = _dot_tables(params)
    parts0, parts1 = [], []
    for lo in range(start, stop, rows_per_call):
        hi = min(lo + rows_per_call, stop)
        rows = mat.rows[lo:hi]
        size = min(rows_per_call, 1 << (hi - lo - 1).bit_length())  # compiled shapes: powers of two only
        if size > hi - lo:
            rows = np.concatenate([rows, np.zeros((size - (hi - lo),) + rows.shape[1:], rows.dtype)])
        c0, c1 = _k_dot(jnp.asarray(rows), vec.c0.data, vec.c1.data, tables, np.uint32(params.t))
        parts0.append(c0[: hi - lo])
        parts1.append(c1[: hi - lo])
    cat = lambda ps: ps[0] if len(ps) == 1 else jnp.concatenate(ps)  # noqa: E731
    return RNSPoly(cat(parts0), params.q, Domain.EVAL), RNSPoly(cat(parts1), params.q, Domain.EVAL)


# --------------------------------------------------------------------------------------------------
# HMVP
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class HMVPResult:
    """u = A v mod t encrypted: ``ciphertexts[k]`` holds rows k N ... k N + N - 1 (at most N), row i of tile
    k at coefficient (i - k N) ``strides[k]``; ``length`` = m."""

    ciphertexts: tuple[Ciphertext, ...]
    strides: tuple[int, ...]
    length: int


def _check_inputs(mat: EncodedMatrix, vec: EncryptedVector, keys: EvaluationKeys) -> Params:
    if not isinstance(mat, EncodedMatrix):
        raise TypeError(f"hmvp takes an EncodedMatrix (encode_matrix), got {type(mat).__name__}")
    if not isinstance(vec, EncryptedVector):
        raise TypeError(f"hmvp takes an EncryptedVector (encrypt_vector), got {type(vec).__name__}")
    params = mat.params
    if vec.params != params or keys.params != params:
        raise ParameterError("hmvp: the matrix, the vector and the keys belong to different parameter sets")
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


def hmvp(
    mat: EncodedMatrix,
    vec: EncryptedVector,
    keys: EvaluationKeys,
    *,
    rows_per_call: int = DEFAULT_ROWS_PER_CALL,
    timings: dict | None = None,
) -> HMVPResult:
    """u = A v mod t (module docstring). ``keys`` must hold the packing Galois keys
    (:func:`required_galois_elements`). ``timings``: if a dict, the seconds spent in "dot" (products,
    rescale, extraction) and "pack" (packing key switches) are added to it (the stages are then waited on,
    which costs a little overlap)."""
    params = _check_inputs(mat, vec, keys)
    m = mat.shape[0]
    outs, strides = [], []
    for start in range(0, m, params.n):
        stop = min(start + params.n, m)
        t0 = time.perf_counter()
        c0, c1 = _dot_products(mat, vec, start, stop, rows_per_call)
        if timings is not None:
            jax.block_until_ready((c0.data, c1.data))
            t1 = time.perf_counter()
            timings["dot"] = timings.get("dot", 0.0) + t1 - t0
        p0, p1 = pack_lwes(c0, c1, keys.galois, kernels=params.kernels)
        if timings is not None:
            jax.block_until_ready((p0.data, p1.data))
            timings["pack"] = timings.get("pack", 0.0) + time.perf_counter() - t1
        outs.append(Ciphertext(p0, p1, params, vec.key_id))
        strides.append(params.n // (1 << (stop - start - 1).bit_length()))
    return HMVPResult(tuple(outs), tuple(strides), m)


def decrypt_result(sk, res: HMVPResult, *, check: bool = True) -> np.ndarray:
    """u (int64 [m] in [0, t)) from an :class:`HMVPResult` with the secret key. With ``check`` (default) a
    ciphertext whose noise budget is exhausted raises ParameterError instead of decrypting to garbage."""
    decrypt = bfv.decrypt_checked if check else bfv.decrypt
    out = []
    for k, (ct, stride) in enumerate(zip(res.ciphertexts, res.strides)):
        rows = min(ct.params.n, res.length - k * ct.params.n)
        coeffs = bfv.decode(decrypt(sk, ct, encoding=Encoding.COEFF))
        out.append(coeffs[: rows * stride : stride])
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
    "EncryptedVector",
    "HMVPResult",
    "decrypt_result",
    "encode_matrix",
    "encrypt_vector",
    "hmvp",
    "matvec_reference",
    "noise_budget",
    "required_galois_elements",
]
