"""Negacyclic number-theoretic transform over an RNS basis: plans, a reference and a radix-2 kernel.

For a ring Z_q[X]/(X^N + 1) with q = 1 (mod 2N) and psi a primitive 2N-th root of unity mod q, the
forward transform maps coefficients a_0..a_{N-1} to the evaluations

    A[k] = a(psi^(2 brv(k) + 1)) = sum_j a_j psi^((2 brv(k) + 1) j)   (mod q),

i.e. the evaluations at the odd powers of psi in bit-reversed order (brv = log2(N)-bit reversal), the
order the Cooley-Tukey butterflies give without a permutation. The twist by psi^j is merged into the
butterflies (twiddles are powers of psi, not of psi^2). The inverse is the Gentleman-Sande transform
with N^-1 folded into its last stage.

Layout: ``uint32[..., limbs, N]``; every leading axis is a batch axis. One plan per (N, moduli): its
tables are arrays passed to the jitted kernels as arguments (a plan is a pytree whose leaves are the
tables and whose static part is (N, moduli)), never closed over.

Lazy ranges (Harvey 2014, "Faster arithmetic for number-theoretic transforms"): when every modulus is
below 2^30 the forward butterflies keep values in [0, 4q) and the inverse ones in [0, 2q); for moduli in
[2^30, 2^31) the kernels keep values in [0, 2q) and [0, q) instead, at one more conditional subtraction
per butterfly. Outputs of :func:`ntt` and :func:`intt` are in [0, q); :func:`ntt_lazy` stops at [0, 2q).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.errors import BasisMismatchError, ParameterError
from crossfhe.math.modular import mulhi, shoup_precompute
from crossfhe.math.primes import is_prime, minimal_root_of_unity

U32 = jnp.uint32
MIN_LOG_N = 4
MAX_LOG_N = 17
MAX_LIMBS = 64


# --------------------------------------------------------------------------------------------------
# Offline tables (Python ints / NumPy)
# --------------------------------------------------------------------------------------------------


def bit_reverse(i: np.ndarray | int, log_n: int):
    """Reverse the low ``log_n`` bits of each index (NumPy integer array or int)."""
    i = np.asarray(i, dtype=np.int64)
    r = np.zeros_like(i)
    for b in range(log_n):
        r |= ((i >> b) & 1) << (log_n - 1 - b)
    return r


@lru_cache(maxsize=64)
def _limb_tables(n: int, q: int):
    """Forward and inverse twiddle tables of one limb, as Python-int derived uint32 NumPy arrays."""
    log_n = n.bit_length() - 1
    psi = minimal_root_of_unity(2 * n, q)
    psi_inv = pow(psi, -1, q)
    brv = bit_reverse(np.arange(n), log_n)
    pw = np.empty(n, dtype=np.uint64)
    pw_inv = np.empty(n, dtype=np.uint64)
    acc, acc_inv = 1, 1
    powers, powers_inv = [0] * n, [0] * n
    for j in range(n):
        powers[j], powers_inv[j] = acc, acc_inv
        acc, acc_inv = acc * psi % q, acc_inv * psi_inv % q
    pw[:] = [powers[b] for b in brv]
    pw_inv[:] = [powers_inv[b] for b in brv]
    n_inv = pow(n, -1, q)
    # Inverse: the last GS stage (m = 1) multiplies by N^-1 and by psi_inv^brv(1) * N^-1.
    inv_last = np.array([n_inv, int(pw_inv[1]) * n_inv % q], dtype=np.uint64)
    w = pw.astype(np.uint32)
    wi = pw_inv.astype(np.uint32)
    return (
        w,
        shoup_precompute(w, q),
        wi,
        shoup_precompute(wi, q),
        inv_last.astype(np.uint32),
        shoup_precompute(inv_last, q),
    )


# --------------------------------------------------------------------------------------------------
# Plan
# --------------------------------------------------------------------------------------------------


@jax.tree_util.register_pytree_node_class
@dataclass(frozen=True, eq=False)
class NTTPlan:
    """Precomputed tables of the negacyclic NTT for ring degree ``n`` over ``moduli``.

    Arrays (leaves; uint32): ``q`` [limbs, 1]; ``w``, ``w_shoup`` [limbs, N] forward twiddles
    psi^brv(i) and Shoup companions; ``wi``, ``wi_shoup`` [limbs, N] inverse twiddles psi^-brv(i);
    ``inv_last``, ``inv_last_shoup`` [limbs, 2] the constants N^-1 and psi^-brv(1) N^-1 of the last
    inverse stage. Static: ``n``, ``moduli``. Create with :meth:`create` (cached per (n, moduli)).
    """

    n: int
    moduli: tuple[int, ...]
    q: np.ndarray
    w: np.ndarray
    w_shoup: np.ndarray
    wi: np.ndarray
    wi_shoup: np.ndarray
    inv_last: np.ndarray
    inv_last_shoup: np.ndarray

    @staticmethod
    def create(n: int, moduli) -> NTTPlan:
        return _create_plan(int(n), tuple(int(q) for q in moduli))

    @property
    def log_n(self) -> int:
        return self.n.bit_length() - 1

    @property
    def limbs(self) -> int:
        return len(self.moduli)

    @property
    def wide(self) -> bool:
        """True when some modulus is >= 2^30, so the kernels use the narrower lazy ranges."""
        return max(self.moduli) >= 2**30

    def tree_flatten(self):
        leaves = (self.q, self.w, self.w_shoup, self.wi, self.wi_shoup, self.inv_last, self.inv_last_shoup)
        return leaves, (self.n, self.moduli)

    @classmethod
    def tree_unflatten(cls, aux, leaves):
        return cls(aux[0], aux[1], *leaves)

    def sub_plan(self, limbs: slice | list[int]) -> NTTPlan:
        """The plan restricted to some limbs (e.g. after dropping the last modulus)."""
        idx = list(range(self.limbs))[limbs] if isinstance(limbs, slice) else list(limbs)
        return NTTPlan.create(self.n, [self.moduli[i] for i in idx])


@lru_cache(maxsize=32)
def _create_plan(n: int, moduli: tuple[int, ...]) -> NTTPlan:
    if n <= 0 or n & (n - 1) or not (MIN_LOG_N <= n.bit_length() - 1 <= MAX_LOG_N):
        raise ParameterError(f"ring degree N must be a power of two in [2^{MIN_LOG_N}, 2^{MAX_LOG_N}], got {n}")
    if not 1 <= len(moduli) <= MAX_LIMBS:
        raise ParameterError(f"an NTT plan takes 1 to {MAX_LIMBS} moduli, got {len(moduli)}")
    if len(set(moduli)) != len(moduli):
        raise ParameterError(f"moduli must be distinct, got {moduli}")
    for q in moduli:
        if not (2 < q < 2**31) or (q - 1) % (2 * n) or not is_prime(q):
            raise ParameterError(f"modulus {q} is not an NTT-friendly prime below 2^31 for N = {n} (q = 1 mod 2N)")
    tables = [_limb_tables(n, q) for q in moduli]
    stacked = [np.stack([t[i] for t in tables]) for i in range(6)]
    qa = np.array(moduli, dtype=np.uint32).reshape(-1, 1)
    return NTTPlan(n, moduli, qa, *stacked)


def _check(x, plan: NTTPlan):
    if x.shape[-2:] != (plan.limbs, plan.n):
        raise BasisMismatchError(
            f"array of shape {tuple(x.shape)} does not match the NTT plan: expected [..., {plan.limbs}, {plan.n}]"
        )
    if x.dtype != U32:
        raise TypeError(f"NTT input must be uint32 residues, got {x.dtype}")


# --------------------------------------------------------------------------------------------------
# Radix-2 kernels
# --------------------------------------------------------------------------------------------------


def _shoup_lazy(x, w, ws, q):
    return x * w - mulhi(x, ws) * q


def _pass_sizes(log_n: int) -> list[int]:
    """Stages per memory pass: radix-4 passes (two stages each), one radix-2 pass first if log N is odd.

    Two stages per pass measured 15-20% faster than one on XLA:CPU; three or four stages per pass, or
    a transposed layout for the short-stride stages, measured 2-4x slower.
    """
    return [1] * (log_n % 2) + [2] * (log_n // 2)


def _ct_butterfly(hi, lo, w, ws, q, wide):
    """Cooley-Tukey butterfly (hi + w lo, hi - w lo), lazy: [0, 4q) -> [0, 4q), or [0, 2q) if wide."""
    v = _shoup_lazy(lo, w, ws, q)
    if wide:
        hi = jnp.where(hi >= q, hi - q, hi)
        v = jnp.where(v >= q, v - q, v)
        return hi + v, hi - v + q
    two_q = q + q
    hi = jnp.where(hi >= two_q, hi - two_q, hi)
    return hi + v, hi - v + two_q


def _forward(x, q, w, ws, *, wide: bool):
    """Cooley-Tukey stages; input [0, q), output [0, 2q), bit-reversed order.

    A pass of k stages starting with m blocks views x as [..., m, 2^k, t_k]; slice i (k bits, most
    significant first) meets slice i ^ 2^(k-1-j) at stage j, with twiddle w[m 2^j + block 2^j + i >> (k-j)].
    """
    n = x.shape[-1]
    lead = x.shape[:-1]
    limbs = x.shape[-2]
    q = q[..., None]
    m, t = 1, n
    for k in _pass_sizes(n.bit_length() - 1):
        t >>= k
        a = x.reshape(lead + (m, 1 << k, t))
        parts = [a[..., i, :] for i in range(1 << k)]
        for j in range(k):
            mj = m << j
            wj = w[:, mj : 2 * mj].reshape(limbs, m, 1 << j)
            wsj = ws[:, mj : 2 * mj].reshape(limbs, m, 1 << j)
            half = 1 << (k - 1 - j)
            for i in range(1 << k):
                if not i & half:
                    pre = i >> (k - j)
                    parts[i], parts[i | half] = _ct_butterfly(
                        parts[i], parts[i | half], wj[:, :, pre, None], wsj[:, :, pre, None], q, wide
                    )
        x = jnp.stack(parts, axis=-2).reshape(lead + (n,))
        m <<= k
    q = q[..., 0]
    if not wide:
        x = jnp.where(x >= q + q, x - (q + q), x)
    return x


def _inverse(x, q, wi, wis, last, lasts, *, wide: bool):
    """Gentleman-Sande stages with N^-1 folded into the last; input [0, q), output [0, q).

    A pass of k stages starting at pair distance t views x as [..., M, 2^k, t] (M = N / (t 2^k) blocks);
    slice i meets slice i + 2^j at stage j (bits least significant first), with twiddle
    wi[m_j + block 2^(k-j-1) + i >> (j+1)], m_j = N / (2 t 2^j). Lazy range [0, 2q), or [0, q) if wide.
    """
    n = x.shape[-1]
    lead = x.shape[:-1]
    limbs = x.shape[-2]
    q = q[..., None]
    bound = q if wide else q + q
    t = 1
    for k in _pass_sizes(n.bit_length() - 1):
        blocks = n // (t << k)
        a = x.reshape(lead + (blocks, 1 << k, t))
        parts = [a[..., i, :] for i in range(1 << k)]
        for j in range(k):
            mj = n // (t << (j + 1))
            step = 1 << j
            if mj == 1:
                c0, c1 = last[:, 0:1, None], last[:, 1:2, None]
                s0, s1 = lasts[:, 0:1, None], lasts[:, 1:2, None]
            else:
                wj = wi[:, mj : 2 * mj].reshape(limbs, blocks, 1 << (k - j - 1))
                wsj = wis[:, mj : 2 * mj].reshape(limbs, blocks, 1 << (k - j - 1))
            for i in range(1 << k):
                if i & step:
                    continue
                hi, lo = parts[i], parts[i | step]
                s = hi + lo
                d = hi - lo + bound
                if mj == 1:
                    u = _shoup_lazy(s, c0, s0, q)
                    v = _shoup_lazy(d, c1, s1, q)
                    u = jnp.where(u >= q, u - q, u)
                    v = jnp.where(v >= q, v - q, v)
                else:
                    pre = i >> (j + 1)
                    u = jnp.where(s >= bound, s - bound, s)
                    v = _shoup_lazy(d, wj[:, :, pre, None], wsj[:, :, pre, None], q)
                    if wide:
                        v = jnp.where(v >= q, v - q, v)
                parts[i], parts[i | step] = u, v
        x = jnp.stack(parts, axis=-2).reshape(lead + (n,))
        t <<= k
    return x


def ntt_lazy(x, plan: NTTPlan):
    """Forward negacyclic NTT of each limb, evaluations in bit-reversed order.

    x: uint32[..., limbs, N] in [0, q_i), coefficient domain. Returns the evaluation domain with values
    in [0, 2 q_i). Exact.
    """
    _check(x, plan)
    return _forward_jit(x, plan.q, plan.w, plan.w_shoup, wide=plan.wide)


def ntt(x, plan: NTTPlan):
    """Forward negacyclic NTT (see module docstring); x: uint32[..., limbs, N] in [0, q_i).

    Returns uint32[..., limbs, N] in [0, q_i), evaluation domain, bit-reversed order. Exact.
    """
    _check(x, plan)
    return _ntt_jit(x, plan.q, plan.w, plan.w_shoup, wide=plan.wide)


def intt(x, plan: NTTPlan):
    """Inverse of :func:`ntt`: x: uint32[..., limbs, N] in [0, q_i), evaluation domain.

    Returns the coefficients in [0, q_i). Exact.
    """
    _check(x, plan)
    return _intt_jit(x, plan.q, plan.wi, plan.wi_shoup, plan.inv_last, plan.inv_last_shoup, wide=plan.wide)


@partial(jax.jit, static_argnames=("wide",))
def _forward_jit(x, q, w, ws, *, wide):
    return _forward(x, q, w, ws, wide=wide)


@partial(jax.jit, static_argnames=("wide",))
def _ntt_jit(x, q, w, ws, *, wide):
    y = _forward(x, q, w, ws, wide=wide)
    return jnp.where(y >= q, y - q, y)


@partial(jax.jit, static_argnames=("wide",))
def _intt_jit(x, q, wi, wis, last, lasts, *, wide):
    return _inverse(x, q, wi, wis, last, lasts, wide=wide)


# --------------------------------------------------------------------------------------------------
# References (NumPy, Python ints)
# --------------------------------------------------------------------------------------------------


def ntt_reference(x, plan: NTTPlan) -> np.ndarray:
    """Plain NumPy radix-2 forward transform (uint64 products), bit-exact with :func:`ntt`.

    Also the "plain NumPy" baseline of the NTT benchmark.
    """
    x = np.asarray(x, dtype=np.uint64).copy()
    n = plan.n
    q = plan.q.astype(np.uint64)[..., None]
    w = plan.w.astype(np.uint64)
    lead = x.shape[:-1]
    m, t = 1, n
    while m < n:
        t //= 2
        a = x.reshape(lead + (m, 2, t))
        u = a[..., 0, :].copy()
        v = a[..., 1, :] * w[:, m : 2 * m, None] % q
        a[..., 0, :] = (u + v) % q
        a[..., 1, :] = (u + q - v) % q
        x = a.reshape(lead + (n,))
        m *= 2
    return x.astype(np.uint32)


def intt_reference(x, plan: NTTPlan) -> np.ndarray:
    """Plain NumPy radix-2 inverse transform, bit-exact with :func:`intt`."""
    x = np.asarray(x, dtype=np.uint64).copy()
    n = plan.n
    q = plan.q.astype(np.uint64)[..., None]
    wi = plan.wi.astype(np.uint64)
    lead = x.shape[:-1]
    m, t = n // 2, 1
    while m >= 1:
        a = x.reshape(lead + (m, 2, t))
        u = a[..., 0, :].copy()
        v = a[..., 1, :].copy()
        a[..., 0, :] = (u + v) % q
        a[..., 1, :] = (u + q - v) % q * wi[:, m : 2 * m, None] % q
        x = a.reshape(lead + (n,))
        m //= 2
        t *= 2
    n_inv = np.array([pow(n, -1, int(qi)) for qi in plan.moduli], dtype=np.uint64).reshape(-1, 1)
    return (x * n_inv % plan.q.astype(np.uint64)).astype(np.uint32)


def ntt_definition(x, plan: NTTPlan) -> np.ndarray:
    """The transform by its definition, A[k] = a(psi^(2 brv(k) + 1)), with Python ints. O(N^2)."""
    x = np.asarray(x)
    out = np.zeros(x.shape, dtype=np.uint32)
    brv = bit_reverse(np.arange(plan.n), plan.log_n)
    for li, q in enumerate(plan.moduli):
        psi = minimal_root_of_unity(2 * plan.n, q)
        for idx in np.ndindex(*x.shape[:-2]):
            coeffs = [int(c) for c in x[idx + (li,)]]
            for k in range(plan.n):
                r = pow(psi, 2 * int(brv[k]) + 1, q)
                acc, p = 0, 1
                for c in coeffs:
                    acc += c * p
                    p = p * r % q
                out[idx + (li, k)] = acc % q
    return out


def negacyclic_convolution(a, b, moduli) -> np.ndarray:
    """Schoolbook product of a and b in Z_q[X]/(X^N + 1) per limb (uint32[..., limbs, N]). O(N^2)."""
    a = np.asarray(a, dtype=object)
    b = np.asarray(b, dtype=object)
    n = a.shape[-1]
    out = np.zeros(np.broadcast_shapes(a.shape, b.shape), dtype=object)
    for j in range(n):
        # a * (b_j X^j): shift a by j with sign flip on wrap-around.
        shifted = np.concatenate([-a[..., n - j :], a[..., : n - j]], axis=-1)
        out = out + shifted * b[..., j : j + 1]
    q = np.array(moduli, dtype=object).reshape(-1, 1)
    return (out % q).astype(np.uint32)
