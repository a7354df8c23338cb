"""BFV encodings: batch (N slots, a 2 x N/2 matrix) and coefficient (value j is coefficient j).

Batch encoding (t prime, t = 1 mod 2N): the message polynomial m in Z_t[X]/(X^N + 1) is the one whose
evaluations at the odd powers of a primitive 2N-th root psi of unity mod t hold the slots: row 0,
column j is m(psi^(5^j)), row 1, column j is m(psi^(-5^j)) (exponents mod 2N). The automorphism
X -> X^(5^r) then rotates both rows left by r and X -> X^(2N - 1) swaps the rows. Encoding is one
inverse NTT mod t of the slots placed in the NTT's slot order (:func:`crossfhe.ring.ntt.slot_of_exponent`),
decoding one forward NTT.

Coefficient encoding (any t): up to N values v_j are the coefficients of m = sum_j v_j X^j.

Values must lie in [0, t): anything else raises a ParameterError naming the offending range (reduce
signed values mod t yourself, e.g. ``np.mod(x, t)``, if that is what you mean).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from crossfhe.errors import ParameterError
from crossfhe.math.xla import plan_cache
from crossfhe.ring.ntt import NTTPlan, intt, ntt, slot_of_exponent


def check_values(values, t: int, what: str) -> np.ndarray:
    """``values`` as int64 after checking that they are integers in [0, t)."""
    a = np.asarray(values)
    if a.dtype == object or a.dtype.kind not in "iub":
        if a.dtype == object and all(isinstance(v, (int, np.integer)) for v in a.reshape(-1)):
            a = a.astype(object)
        else:
            raise ParameterError(f"{what}: values must be integers, got dtype {a.dtype}")
    if a.size:
        lo, hi = a.min(), a.max()
        if lo < 0 or hi >= t:
            raise ParameterError(f"{what}: values must lie in [0, t) = [0, {t}), got values in [{lo}, {hi}]")
    return a.astype(np.int64)


@plan_cache(maxsize=32)
def slot_positions(n: int) -> np.ndarray:
    """int32 [2, N/2]: the NTT slot (:func:`~crossfhe.ring.ntt.slot_exponents` order) holding row r, column j."""
    two_n = 2 * n
    e = np.array([pow(5, j, two_n) for j in range(n // 2)], dtype=np.int64)
    return np.stack([slot_of_exponent(e, n), slot_of_exponent(two_n - e, n)]).astype(np.int32)


def encode_batch(values, n: int, t: int) -> jnp.ndarray:
    """Slots -> message coefficients. values: ints in [0, t), shape [..., 2, N/2] (the slot matrix) or
    [..., k] with k <= N (row-major fill of the matrix, the rest 0). Returns uint32 [..., N] in [0, t)."""
    a = check_values(values, t, "batch encoding")
    if a.ndim >= 2 and a.shape[-2:] == (2, n // 2):
        mat = a.reshape(a.shape[:-2] + (n,))
    else:
        if a.ndim == 0 or a.shape[-1] > n:
            raise ParameterError(f"batch encoding takes up to N = {n} values (or a [2, {n // 2}] matrix), "
                                 f"got shape {a.shape}")
        mat = np.zeros(a.shape[:-1] + (n,), dtype=np.int64)
        mat[..., : a.shape[-1]] = a
    ev = np.zeros_like(mat)
    ev[..., slot_positions(n).reshape(-1)] = mat
    return intt(jnp.asarray(ev.astype(np.uint32))[..., None, :], NTTPlan.create(n, (t,)))[..., 0, :]


def decode_batch(coeffs, n: int, t: int) -> np.ndarray:
    """Message coefficients uint32 [..., N] in [0, t) -> slot matrix int64 [..., 2, N/2]."""
    ev = np.asarray(ntt(jnp.asarray(coeffs, dtype=jnp.uint32)[..., None, :], NTTPlan.create(n, (t,))))[..., 0, :]
    return ev[..., slot_positions(n)].astype(np.int64)


def encode_coeffs(values, n: int, t: int) -> jnp.ndarray:
    """values: ints in [0, t), shape [..., k] with k <= N -> uint32 [..., N] (zero-padded)."""
    a = check_values(values, t, "coefficient encoding")
    if a.ndim == 0 or a.shape[-1] > n:
        raise ParameterError(f"coefficient encoding takes up to N = {n} values per polynomial, got shape {a.shape}")
    out = np.zeros(a.shape[:-1] + (n,), dtype=np.uint32)
    out[..., : a.shape[-1]] = a
    return jnp.asarray(out)


def slot_matrix(values, width: int, n: int) -> np.ndarray:
    """The slot matrix of vectors: ``values`` int [..., k] (k <= width) zero-padded to ``width`` and repeated over the
    N slots read row-major, int64 [..., 2, N/2]: slot i holds value i mod width (for width <= N/2, slot j of either
    row holds value j mod width; at width N the vector runs over both rows)."""
    v = np.asarray(values, dtype=np.int64)
    padded = np.zeros(v.shape[:-1] + (width,), dtype=np.int64)
    padded[..., : v.shape[-1]] = v
    flat = np.tile(padded, (1,) * (v.ndim - 1) + (n // width,))
    return flat.reshape(v.shape[:-1] + (2, n // 2))
