"""Negacyclic number-theoretic transform over an RNS basis: plans, references and a radix-2 kernel.

For a ring Z_q[X]/(X^N + 1) with q = 1 (mod 2N) and psi the smallest primitive 2N-th root of unity
mod q, the forward transform maps coefficients a_0..a_{N-1} to evaluations at the odd powers of psi:

    A[p] = a(psi^e(p)) = sum_j a_j psi^(e(p) j)   (mod q),   e(p) = 2 brv(k(p)) + 1,

with brv the log2(N)-bit reversal and the *slot order* k(p) = (p mod N1) N2 + floor(p / N1), where
N = N1 N2 and N2 = min(32, N) (:func:`slot_exponents`). That is the bit-reversed order of the
Cooley-Tukey butterflies, read as an N1 x N2 matrix and transposed: the kernel runs the stages with
butterfly distance >= N2 on rows of length N2, transposes once, and runs the last log2(N2) stages on
rows of length N1 (on XLA:CPU the short-distance stages are slow in row-major order; see
benchmarks/README.md). Point-wise products do not care about the order; automorphisms use :func:`slot_of_exponent`.

The twist by psi^j is merged into the butterflies (twiddles are powers of psi, not psi^2). The inverse
is the Gentleman-Sande transform, in the mirrored order, with N^-1 folded into its last stage.

Layout: ``uint32[..., limbs, N]``; leading axes are batch axes. One plan per (N, moduli) holds the
twiddle tables, already arranged in the order the kernels read them; a plan is a pytree whose leaves
are the tables, so they are passed to the jitted kernels as arguments, never closed over.

Lazy ranges (Harvey 2014, "Faster arithmetic for number-theoretic transforms"): when every modulus is
below 2^30 the forward butterflies keep values in [0, 4q) and the inverse ones in [0, 2q); for moduli in
[2^30, 2^31) they keep [0, 2q) and [0, q) at one more conditional subtraction per butterfly. Outputs of
:func:`ntt` and :func:`intt` are in [0, q); :func:`ntt_lazy` stops at [0, 2q).

Kernel sets: a plan's ``kernels`` (static) is None for the radix-2 XLA kernels of this module (VECTOR),
NATIVE for ``rns_ntt.c`` as an XLA FFI custom call (:func:`native_transform`: the same stages on the same
tables, so the same words; :func:`ntt_lazy`'s may differ by q, the C code taking the narrower lazy range per
modulus and XLA per plan), or a set with its own tables (MATRIX). The choice is the caller's, made once with
the parameters; measurements behind these kernels are in benchmarks/README.md ("Why the kernels look as they do").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.errors import BasisMismatchError, ParameterError
from crossfhe.math import conv, native, random
from crossfhe.math.modular import fusion_barrier, mulhi, shoup_precompute  # noqa: F401 (fusion_barrier: re-exported)
from crossfhe.math.primes import is_prime, minimal_root_of_unity, powers_mod
from crossfhe.math.xla import jit, plan_cache

U32 = jnp.uint32
MIN_LOG_N = 4
MAX_LOG_N = 17
MAX_LIMBS = 128
TAIL = 32
"""N2: the last log2(N2) forward stages (first inverse stages) run in the transposed layout."""
NATURAL_FROM = 64
"""From this N a kernel set with ``natural_twiddles`` (GPU) gets its plans' twiddles in the textbook order; smaller
rings go to the radix-2 kernels, which read the kernel order."""


# --------------------------------------------------------------------------------------------------
# Slot order
# --------------------------------------------------------------------------------------------------


def split(n: int) -> tuple[int, int]:
    """(N1, N2) with N = N1 N2, N2 = min(32, N)."""
    n2 = min(TAIL, n)
    return n // n2, n2


def bit_reverse(i, log_n: int):
    """Reverse the low ``log_n`` bits of each index (NumPy or jnp integer array, or int)."""
    r = i * 0
    for b in range(log_n):
        r = r | (((i >> b) & 1) << (log_n - 1 - b))
    return r


def slot_exponents(n: int, xp=np):
    """e(p) for p = 0..N-1: slot p of the evaluation domain holds a(psi^e(p)). ``xp``: np or jnp."""
    n1, n2 = split(n)
    p = xp.arange(n, dtype=xp.uint32 if xp is jnp else np.int64)
    k = (p % n1) * n2 + p // n1
    return 2 * bit_reverse(k, n.bit_length() - 1) + 1


def slot_of_exponent(e, n: int):
    """The slot p holding a(psi^e) for odd e in [0, 2N) (array or int; inverse of :func:`slot_exponents`)."""
    n1, n2 = split(n)
    k = bit_reverse((e - 1) >> 1, n.bit_length() - 1)
    return (k % n2) * n1 + k // n2


# --------------------------------------------------------------------------------------------------
# Offline tables (Python ints / NumPy)
# --------------------------------------------------------------------------------------------------


@plan_cache(maxsize=64)
def _natural_tables(n: int, q: int):
    """psi^brv(i) and psi^-brv(i), i < N, as uint32 (the tables of the textbook radix-2 transform)."""
    log_n = n.bit_length() - 1
    psi = minimal_root_of_unity(2 * n, q)
    brv = bit_reverse(np.arange(n), log_n)
    w = powers_mod(psi, n, q)[brv].astype(np.uint32)
    wi = powers_mod(pow(psi, -1, q), n, q)[brv].astype(np.uint32)
    return w, wi


def _arrange(table: np.ndarray, n: int) -> np.ndarray:
    """Twiddles of the transposed stages (m >= N1 blocks) reordered from [N1, m / N1] to [m / N1, N1]."""
    n1, _ = split(n)
    out = table.copy()
    m = n1
    while m < n:
        out[m : 2 * m] = table[m : 2 * m].reshape(n1, m // n1).T.reshape(m)
        m *= 2
    return out


@plan_cache(maxsize=64)
def _limb_tables(n: int, q: int, natural: bool = False):
    """Kernel-order forward and inverse twiddles of one limb with their Shoup companions (``natural``: in the
    textbook order psi^brv(i), for kernels that read them so)."""
    w, wi = _natural_tables(n, q)
    n_inv = pow(n, -1, q)
    # The last inverse stage (one block) multiplies the sum by N^-1 and the difference by psi^-1 N^-1.
    last = np.array([n_inv, int(wi[1]) * n_inv % q], dtype=np.uint32)
    if not natural:
        w, wi = _arrange(w, n), _arrange(wi, n)
    return w, shoup_precompute(w, q), wi, shoup_precompute(wi, q), last, shoup_precompute(last, q)


# --------------------------------------------------------------------------------------------------
# Plan
# --------------------------------------------------------------------------------------------------


@jax.tree_util.register_pytree_node_class
@dataclass(frozen=True, eq=False)
class NTTPlan:
    """Precomputed tables of the negacyclic NTT for ring degree ``n`` over ``moduli``.

    Arrays (leaves; uint32): ``q`` [limbs, 1] (NumPy); on the device ``w``, ``w_shoup`` [limbs, N], the
    forward twiddles psi^brv(i) and their Shoup companions, and ``wi``, ``wi_shoup``, the inverse twiddles
    psi^-brv(i), all arranged in kernel order (the textbook order i itself on a kernel set with
    ``natural_twiddles``, from N = :data:`NATURAL_FROM`); ``inv_last``, ``inv_last_shoup`` [limbs, 2], the constants
    N^-1 and psi^-1 N^-1 of the last inverse stage. Static: ``n``, ``moduli``. Create with :meth:`create`
    (cached per (n, moduli, kernels)).

    Shared tables: ``table_moduli`` (static) is None when the tables' rows are the limbs' own, in order; a plan made
    by :meth:`gathered` sets it to the moduli of its tables' rows (another plan's: the same arrays, no copy), and limb
    l takes the row whose modulus is moduli[l]. The NATIVE kernel reads such rows in place; the other kernels gather
    them inside the program (:meth:`expanded`).

    Kernel set: ``kernels`` (static) is None for the radix-2 kernels of this module (the VECTOR set), or a
    kernel set from :mod:`crossfhe.kernels` whose ``ntt``/``intt`` run on its own tables ``matrix`` (a
    pytree child; e.g. the CROSS 4-step matrix transform). :func:`ntt` and :func:`intt` hand the work to it,
    with the same words as the radix-2 kernels. The set is chosen by whoever creates the plan (from the
    scheme's parameters), never detected here.
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
    matrix: object = None
    kernels: object = None
    table_moduli: tuple[int, ...] | None = None

    @staticmethod
    def create(n: int, moduli, kernels=None) -> NTTPlan:
        """The plan of (n, moduli); ``kernels``: None or a VECTOR kernel set for the radix-2 kernels, or a
        kernel set with matrix tables (:data:`crossfhe.kernels.MATRIX`)."""
        if kernels is not None:
            kernels = kernels.for_plans()
        return _create_plan(int(n), tuple(int(q) for q in moduli), kernels)

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
        leaves = (self.q, self.w, self.w_shoup, self.wi, self.wi_shoup, self.inv_last, self.inv_last_shoup, self.matrix)
        return leaves, (self.n, self.moduli, self.kernels, self.table_moduli)

    @classmethod
    def tree_unflatten(cls, aux, leaves):
        return cls(aux[0], aux[1], *leaves, kernels=aux[2], table_moduli=aux[3])

    @staticmethod
    def gathered(tables: NTTPlan, moduli) -> NTTPlan:
        """A plan over ``moduli`` (which may repeat, e.g. ModUp's digits one after another) that holds the twiddle
        tables of ``tables`` itself, not copies of its rows: ``table_moduli`` = tables.moduli, and limb l reads the
        row of moduli[l]. Every modulus must be one of tables.moduli; plans with matrix tables cannot share rows
        (ParameterError)."""
        moduli = tuple(int(m) for m in moduli)
        if tables.table_moduli is not None:
            tables = tables.expanded()
        missing = sorted(set(moduli) - set(tables.moduli))
        if missing:
            raise ParameterError(f"NTTPlan.gathered: moduli {missing} have no row in the tables {tables.moduli}")
        if _has_tables(tables.kernels):
            raise ParameterError("NTTPlan.gathered: a kernel set with matrix tables cannot share rows")
        q = np.array(moduli, dtype=np.uint32).reshape(-1, 1)
        return NTTPlan(tables.n, moduli, q, tables.w, tables.w_shoup, tables.wi, tables.wi_shoup, tables.inv_last,
                       tables.inv_last_shoup, kernels=tables.kernels, table_moduli=tables.moduli)

    def expanded(self) -> NTTPlan:
        """This plan with one table row per limb (a gather of the shared rows; itself when it has its own). Works
        on traced tables too: the rows are static."""
        if self.table_moduli is None:
            return self
        index = [self.table_moduli.index(m) for m in self.moduli]
        rows = [self.w, self.w_shoup, self.wi, self.wi_shoup, self.inv_last, self.inv_last_shoup]
        if all(isinstance(t, np.ndarray) for t in rows):
            rows = [t[index] for t in rows]
        else:
            idx = np.asarray(index, dtype=np.int32)
            rows = [jnp.take(jnp.asarray(t), idx, axis=0) for t in rows]
        return NTTPlan(self.n, self.moduli, self.q, *rows, kernels=self.kernels)

    def sub_plan(self, limbs: slice | list[int]) -> NTTPlan:
        """The plan restricted to some limbs (e.g. after dropping the last modulus), same kernel set."""
        idx = list(range(self.limbs))[limbs] if isinstance(limbs, slice) else list(limbs)
        return NTTPlan.create(self.n, [self.moduli[i] for i in idx], self.kernels)

    @staticmethod
    def concat(plans: list[NTTPlan]) -> NTTPlan:
        """One plan over the limbs of several plans in turn (moduli may repeat): every table, the kernel
        set's included, has the limb axis first and the kernels treat limbs independently. The radix-2 tables come
        back on the host (NumPy); the plan caches that call this put them on the device once."""
        plans = [p.expanded() for p in plans]
        kernels = {p.kernels for p in plans}
        if len(kernels) != 1 or len({p.n for p in plans}) != 1:
            raise ParameterError("NTTPlan.concat: the plans must share N and the kernel set")
        moduli = tuple(m for plan in plans for m in plan.moduli)
        tables = [np.concatenate([np.asarray(t) for t in ts], axis=0)
                  for ts in zip(*(plan.tree_flatten()[0][:7] for plan in plans), strict=True)]
        kernels = plans[0].kernels
        matrix = kernels.concat_ntt_tables([plan.matrix for plan in plans]) if _has_tables(kernels) else None
        return NTTPlan(plans[0].n, moduli, *tables, matrix=matrix, kernels=kernels)


@plan_cache(maxsize=32, on_device=True)
def _create_plan(n: int, moduli: tuple[int, ...], kernels) -> NTTPlan:
    if n <= 0 or n & (n - 1) or not (MIN_LOG_N <= n.bit_length() - 1 <= MAX_LOG_N):
        raise ParameterError(f"ring degree N must be a power of two in [2^{MIN_LOG_N}, 2^{MAX_LOG_N}], got {n}")
    if not 1 <= len(moduli) <= MAX_LIMBS:
        raise ParameterError(f"an NTT plan takes 1 to {MAX_LIMBS} moduli, got {len(moduli)}")
    if len(set(moduli)) != len(moduli):
        raise ParameterError(f"moduli must be distinct, got {moduli}")
    for q in moduli:
        if not (2 < q < 2**31) or (q - 1) % (2 * n) or not is_prime(q):
            raise ParameterError(f"modulus {q} is not an NTT-friendly prime below 2^31 for N = {n} (q = 1 mod 2N)")
    # a set whose kernel reads the textbook order (GPU) gets it; rings it hands to the radix-2 kernels keep theirs
    natural = kernels is not None and kernels.natural_twiddles and n >= NATURAL_FROM
    tables = [_limb_tables(n, q, natural) for q in moduli]
    stacked = [np.stack([t[i] for t in tables]) for i in range(6)]
    qa = np.array(moduli, dtype=np.uint32).reshape(-1, 1)
    matrix = kernels.ntt_tables(n, moduli) if _has_tables(kernels) else None
    return NTTPlan(n, moduli, qa, *stacked, matrix=matrix, kernels=kernels)


def _has_tables(kernels) -> bool:
    return kernels is not None and kernels.uses_tables


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


_FORWARD_RADIX4_FROM = 4 * 2**20
"""From this many bytes per transform call the forward head takes two stages per pass (benchmarks/README.md)."""


def _pass_sizes(log_n: int, *, stages_per_pass: int) -> list[int]:
    """How the row-major stages are grouped into memory passes: ``stages_per_pass`` each, and the
    remainder first. A fused pass computes every output element on its own, so shared butterfly work is
    recomputed: a two-stage Cooley-Tukey pass needs 3 Shoup products per output, a Gentleman-Sande one
    1.5 (its first-stage sums need none). The forward head takes one stage per pass below
    :data:`_FORWARD_RADIX4_FROM` bytes and two above; the inverse head two (benchmarks/README.md).
    """
    k = stages_per_pass
    return [log_n % k] * (log_n % k > 0) + [k] * (log_n // k)


def _ct(hi, lo, w, ws, q, wide):
    """Cooley-Tukey butterfly (hi + w lo, hi - w lo); lazy [0, 4q) -> [0, 4q), or [0, 2q) if wide."""
    v = _shoup_lazy(lo, w, ws, q)
    if wide:
        hi = jnp.where(hi >= q, hi - q, hi)
        v = jnp.where(v >= q, v - q, v)
        return hi + v, hi - v + q
    two_q = q + q
    hi = jnp.where(hi >= two_q, hi - two_q, hi)
    return hi + v, hi - v + two_q


def _gs(hi, lo, w, ws, q, wide):
    """Gentleman-Sande butterfly (hi + lo, w (hi - lo)); lazy [0, 2q) -> [0, 2q), or [0, q) if wide."""
    bound = q if wide else q + q
    s = hi + lo
    v = _shoup_lazy(hi - lo + bound, w, ws, q)
    if wide:
        v = jnp.where(v >= q, v - q, v)
    return jnp.where(s >= bound, s - bound, s), v


def _gs_last(hi, lo, last, lasts, q, wide):
    """The last Gentleman-Sande stage, (N^-1 (hi + lo), psi^-1 N^-1 (hi - lo)), output in [0, q)."""
    bound = q if wide else q + q
    u = _shoup_lazy(hi + lo, last[:, 0:1], lasts[:, 0:1], q)
    v = _shoup_lazy(hi - lo + bound, last[:, 1:2], lasts[:, 1:2], q)
    return jnp.where(u >= q, u - q, u), jnp.where(v >= q, v - q, v)


def _forward(x, q, w, ws, *, wide: bool, full: bool):
    """Forward transform; input [0, q), output in slot order (module docstring), in [0, q) if ``full``
    else [0, 2q).

    Head (m < N1 blocks): a pass of k stages views x as [..., m, 2^k, t_k]; slice i (k bits, most
    significant first) meets slice i ^ 2^(k-1-j) at stage j, twiddle w[m 2^j + block 2^j + i >> (k-j)].
    Tail: x as [..., N2, N1]; the stage with m = N1 2^s blocks views it as [..., 2^s, 2, t, N1] and
    reads its twiddles as [2^s, N1] (arranged offline).
    """
    n = x.shape[-1]
    lead = x.shape[:-1]
    limbs = x.shape[-2]
    n1, n2 = split(n)
    qh = q[..., None]
    m, t = 1, n
    spp = 2 if math.prod(x.shape) * 4 >= _FORWARD_RADIX4_FROM else 1
    for k in _pass_sizes(n1.bit_length() - 1, stages_per_pass=spp):
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
                    parts[i], parts[i | half] = _ct(
                        parts[i], parts[i | half], wj[:, :, pre, None], wsj[:, :, pre, None], qh, wide
                    )
        x = jnp.stack(parts, axis=-2).reshape(lead + (n,))
        m <<= k
    x = jnp.swapaxes(x.reshape(lead + (n1, n2)), -1, -2)
    qt = q[..., None, None]
    s = 0
    while m < n:
        t = n2 >> (s + 1)
        a = x.reshape(lead + (1 << s, 2, t, n1))
        tw = (w[:, m : 2 * m].reshape(limbs, 1 << s, 1, n1), ws[:, m : 2 * m].reshape(limbs, 1 << s, 1, n1))
        u, v = _ct(a[..., 0, :, :], a[..., 1, :, :], *tw, qt, wide)
        if 2 * m == n:  # last stage: reduce here rather than in one more pass over memory
            u, v = _reduce_output(u, qt, wide, full), _reduce_output(v, qt, wide, full)
        x = jnp.stack((u, v), axis=-3)
        m <<= 1
        s += 1
    return x.reshape(lead + (n,))


def _reduce_output(x, q, wide, full):
    """From the butterflies' range ([0, 4q), or [0, 2q) if wide) to [0, q) if ``full``, else [0, 2q)."""
    if not wide:
        x = jnp.where(x >= q + q, x - (q + q), x)
    return jnp.where(x >= q, x - q, x) if full else x


def _inverse(x, q, wi, wis, last, lasts, *, wide: bool):
    """Inverse transform; input [0, q) in slot order, output [0, q) coefficients.

    Tail first (x as [..., N2, N1]; the stage with m = N1 2^s blocks views it as [..., 2^s, 2, t, N1]),
    transpose, then the head: a pass of k stages starting at pair distance t views x as
    [..., M, 2^k, t]; slice i meets slice i + 2^j at stage j, twiddle wi[m_j + block 2^(k-j-1) + i >> (j+1)],
    m_j = N / (2 t 2^j). The stage with one block (m = 1) folds in N^-1.
    """
    n = x.shape[-1]
    lead = x.shape[:-1]
    limbs = x.shape[-2]
    n1, n2 = split(n)
    qt = q[..., None, None]
    s = n2.bit_length() - 2
    m = n // 2
    while m >= n1 and m >= 1:
        t = n2 >> (s + 1)
        a = x.reshape(lead + (1 << s, 2, t, n1))
        hi, lo = a[..., 0, :, :], a[..., 1, :, :]
        if m == 1:
            u, v = _gs_last(hi, lo, last[..., None, None], lasts[..., None, None], qt, wide)
        else:
            tw = (wi[:, m : 2 * m].reshape(limbs, 1 << s, 1, n1), wis[:, m : 2 * m].reshape(limbs, 1 << s, 1, n1))
            u, v = _gs(hi, lo, *tw, qt, wide)
        x = jnp.stack((u, v), axis=-3)
        m >>= 1
        s -= 1
    x = jnp.swapaxes(x.reshape(lead + (n2, n1)), -1, -2).reshape(lead + (n,))
    qh = q[..., None]
    t = n2
    for k in _pass_sizes(n1.bit_length() - 1, stages_per_pass=2):
        blocks = n // (t << k)
        a = x.reshape(lead + (blocks, 1 << k, t))
        parts = [a[..., i, :] for i in range(1 << k)]
        for j in range(k):
            mj = n // (t << (j + 1))
            step = 1 << j
            if mj > 1:
                wj = wi[:, mj : 2 * mj].reshape(limbs, blocks, 1 << (k - j - 1))
                wsj = wis[:, mj : 2 * mj].reshape(limbs, blocks, 1 << (k - j - 1))
            for i in range(1 << k):
                if i & step:
                    continue
                hi, lo = parts[i], parts[i | step]
                if mj == 1:
                    parts[i], parts[i | step] = _gs_last(hi, lo, last[..., None], lasts[..., None], qh, wide)
                else:
                    pre = i >> (j + 1)
                    parts[i], parts[i | step] = _gs(hi, lo, wj[:, :, pre, None], wsj[:, :, pre, None], qh, wide)
        x = jnp.stack(parts, axis=-2).reshape(lead + (n,))
        t <<= k
    return x


def ntt_lazy(x, plan: NTTPlan):
    """Forward negacyclic NTT of each limb, evaluations in slot order.

    x: uint32[..., limbs, N] in [0, q_i), coefficient domain. Returns the evaluation domain with values
    in [0, 2 q_i). Exact.
    """
    _check(x, plan)
    if plan.kernels is not None:
        return plan.kernels.ntt(x, plan, full=False)
    plan = plan.expanded()
    return _forward_jit(x, plan.q, plan.w, plan.w_shoup, wide=plan.wide)


def ntt(x, plan: NTTPlan):
    """Forward negacyclic NTT (module docstring); x: uint32[..., limbs, N] in [0, q_i), coefficients.

    Returns uint32[..., limbs, N] in [0, q_i): the evaluation domain in slot order. Exact. Runs on the
    plan's kernel set (module docstring).
    """
    _check(x, plan)
    if plan.kernels is not None:
        return plan.kernels.ntt(x, plan)
    plan = plan.expanded()
    return _ntt_jit(x, plan.q, plan.w, plan.w_shoup, wide=plan.wide)


def intt(x, plan: NTTPlan):
    """Inverse of :func:`ntt`: x: uint32[..., limbs, N] in [0, q_i), evaluation domain in slot order.

    Returns the coefficients in [0, q_i). Exact. Runs on the plan's kernel set.
    """
    _check(x, plan)
    if plan.kernels is not None:
        return plan.kernels.intt(x, plan)
    plan = plan.expanded()
    return _intt_jit(x, plan.q, plan.wi, plan.wi_shoup, plan.inv_last, plan.inv_last_shoup, wide=plan.wide)


# --------------------------------------------------------------------------------------------------
# The native CPU kernel (rns_ntt.c) as an XLA custom call
# --------------------------------------------------------------------------------------------------

NATIVE_SOURCES = (Path(__file__).with_name("rns_ntt.c"), Path(__file__).with_name("rns_ntt_ffi.cc"))
NATIVE_HEADERS = (Path(__file__).parent.parent / "math" / "ffi_parallel.h",)
NATIVE_ABI = 4
NATIVE_TARGET = "crossfhe_rns_ntt"
NATIVE_ROWS_TARGET = "crossfhe_rns_ntt_rows"
PERMUTE_TARGET = "crossfhe_permute"
MAC_TARGET = "crossfhe_mac_digits"


def _load_native():
    lib, why = native.build_and_load(NATIVE_SOURCES, "cf_ntt_abi_version", NATIVE_ABI, hashed=NATIVE_HEADERS)
    if lib is not None:
        native.register(lib, {NATIVE_TARGET: "cf_rns_ntt_ffi", NATIVE_ROWS_TARGET: "cf_rns_ntt_rows_ffi",
                              PERMUTE_TARGET: "cf_permute_ffi", MAC_TARGET: "cf_mac_digits_ffi"})
    return lib, why


NATIVE = native.Native(_load_native)
"""The native transform (``rns_ntt.c`` with its FFI handler, built on first use by :mod:`crossfhe.math.native`):
the radix-2 kernels' function on their tables, so the same words; ``NATIVE.status()`` says where it was built or
why there is none."""


def native_targets() -> tuple[str, ...]:
    """The custom-call targets a ring scheme's program may hold on the NATIVE kernel set (what ``jax.export`` is told
    to accept): the transform, the permutation, key switching's multiply-accumulate, the keys' uniform rows (compact
    keys) and, where it is used (:func:`crossfhe.math.conv.fast`), the basis conversion."""
    out = (NATIVE_TARGET, NATIVE_ROWS_TARGET, PERMUTE_TARGET, MAC_TARGET, random.NATIVE_ROWS_TARGET)
    return out + ((conv.TARGET,) if conv.fast() else ())


def native_build() -> str:
    """An identifier of the native kernels a NATIVE ring program uses: "native", with "+conv" where the basis
    conversion is the native one (its programs then take the conversion's tables as arguments)."""
    return "native+conv" if conv.fast() else "native"


def transform_operand(x, plan: NTTPlan):
    """x as the operand of a transform by ``plan``: through :func:`fusion_barrier` where the transform is XLA's (its
    first pass would recompute an expensive fused producer for both outputs of every butterfly), x itself where it
    is the native custom call, whose operand XLA materializes anyway (there the barrier's conditional only adds a
    copy)."""
    if plan.kernels is not None and plan.kernels.resolve().native:
        return x
    return fusion_barrier(x, plan.w)


def permute_slots(x, idx, plan: NTTPlan):
    """x ``uint32[..., N]`` with its last axis permuted, out[..., j] = x[..., idx[j]] (``idx`` int32 ``[N]``, a
    permutation): an automorphism of EVAL slots. On a NATIVE plan one custom call (its result a buffer of its own:
    an XLA:CPU gather fused into several consumers is recomputed in each); else ``jnp.take``."""
    if plan.kernels is None or not plan.kernels.native:
        return jnp.take(x, idx, axis=-1)
    call = jax.ffi.ffi_call(PERMUTE_TARGET, jax.ShapeDtypeStruct(x.shape, U32), vmap_method="expand_dims")
    return call(x, idx.astype(jnp.int32))


def native_mac_digits(y1, y2, ymap, b, a, brow, arow, q):
    """``[..., 2, L, N]``: sum_j Y_j b_j and sum_j Y_j a_j mod q per row, one native custom call
    (``crossfhe_mac_digits`` in rns_ntt_ffi.cc), where the digits Y ``[..., D, L, N]`` are row ``ymap[j, l]`` of y1
    ``[..., R1, N]`` followed by y2 ``[..., R2, N]`` (read in place, never assembled); ymap int32 ``[D, L]``. b, a
    uint32 ``[D', L', N]`` (D <= D'), read in place at rows ``brow``, ``arow`` (int32 ``[L]``); q uint32 ``[L]`` below
    2^31; every word in [0, q). Exact: the words of the XLA multiply-accumulate
    (:func:`crossfhe.core.keyswitch._mac_digits`)."""
    NATIVE.require("the NATIVE kernel set's key-switching multiply-accumulate")
    ymap = np.asarray(ymap, dtype=np.int32)
    out = jax.ShapeDtypeStruct(y1.shape[:-2] + (2, ymap.shape[-1], y1.shape[-1]), U32)
    call = jax.ffi.ffi_call(MAC_TARGET, out, vmap_method="expand_dims")
    return call(y1, y2, ymap, b, a, np.asarray(brow, dtype=np.int32), np.asarray(arow, dtype=np.int32),
                jnp.asarray(q, U32))


def native_transform(x, plan: NTTPlan, *, inverse: bool, full: bool = True):
    """The transform of x ``uint32[..., limbs, N]`` by the native kernel, one custom call of the program (runs under
    ``jit``, ``vmap`` and ``scan``); for N below 64 the radix-2 kernels (the same words). Outputs as :func:`ntt` /
    :func:`intt` (``full=False``: the forward in [0, 2q), per modulus, so its words may differ from the radix-2
    kernel's lazy ones by q)."""
    NATIVE.require("the NATIVE kernel set's NTT")
    if plan.n < 64:  # the kernel's layout needs two rows of N2 = 32: smaller rings take the radix-2 kernels
        return radix2_transform(x, plan, inverse=inverse, full=full)
    w, ws = (plan.wi, plan.wi_shoup) if inverse else (plan.w, plan.w_shoup)
    flags = {"inverse": np.int32(inverse), "full": np.int32(full)}
    if plan.table_moduli is not None:  # shared rows, read in place (NTTPlan.gathered)
        call = jax.ffi.ffi_call(NATIVE_ROWS_TARGET, jax.ShapeDtypeStruct(x.shape, U32), vmap_method="expand_dims")
        tq = np.array(plan.table_moduli, dtype=np.uint32)
        return call(x, jnp.asarray(plan.q), tq, w, ws, plan.inv_last, plan.inv_last_shoup, **flags)
    call = jax.ffi.ffi_call(NATIVE_TARGET, jax.ShapeDtypeStruct(x.shape, U32), vmap_method="expand_dims")
    return call(x, jnp.asarray(plan.q), w, ws, plan.inv_last, plan.inv_last_shoup, **flags)


def radix2_transform(x, plan: NTTPlan, *, inverse: bool, full: bool = True):
    """The transform of x by this module's radix-2 kernels, whatever the plan's kernel set (the other sets' kernels
    hand rings they do not take to it)."""
    plan = plan.expanded()
    if inverse:
        return _intt_jit(x, plan.q, plan.wi, plan.wi_shoup, plan.inv_last, plan.inv_last_shoup, wide=plan.wide)
    return (_ntt_jit if full else _forward_jit)(x, plan.q, plan.w, plan.w_shoup, wide=plan.wide)


@partial(jit, static_argnames=("wide",))
def _forward_jit(x, q, w, ws, *, wide):
    return _forward(x, q, w, ws, wide=wide, full=False)


@partial(jit, static_argnames=("wide",))
def _ntt_jit(x, q, w, ws, *, wide):
    return _forward(x, q, w, ws, wide=wide, full=True)


@partial(jit, static_argnames=("wide",))
def _intt_jit(x, q, wi, wis, last, lasts, *, wide):
    return _inverse(x, q, wi, wis, last, lasts, wide=wide)


# --------------------------------------------------------------------------------------------------
# References (NumPy, Python ints)
# --------------------------------------------------------------------------------------------------


def _to_slot_order(x: np.ndarray, n: int) -> np.ndarray:
    n1, n2 = split(n)
    return np.swapaxes(x.reshape(x.shape[:-1] + (n1, n2)), -1, -2).reshape(x.shape)


def _from_slot_order(x: np.ndarray, n: int) -> np.ndarray:
    n1, n2 = split(n)
    return np.swapaxes(x.reshape(x.shape[:-1] + (n2, n1)), -1, -2).reshape(x.shape)


def ntt_reference(x, plan: NTTPlan) -> np.ndarray:
    """Textbook in-place radix-2 forward transform in NumPy (uint64 products, bit-reversed output),
    then the slot-order permutation; bit-exact with :func:`ntt`. Also the NumPy baseline of the benchmark.
    """
    x = np.asarray(x, dtype=np.uint64).copy()
    n = plan.n
    q = np.array(plan.moduli, dtype=np.uint64).reshape(-1, 1, 1)
    w = np.stack([_natural_tables(n, qi)[0] for qi in plan.moduli]).astype(np.uint64)
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
    return _to_slot_order(x, n).astype(np.uint32)


def intt_reference(x, plan: NTTPlan) -> np.ndarray:
    """Textbook radix-2 inverse transform in NumPy from slot order; bit-exact with :func:`intt`."""
    n = plan.n
    x = _from_slot_order(np.asarray(x, dtype=np.uint64), n).copy()
    q = np.array(plan.moduli, dtype=np.uint64).reshape(-1, 1, 1)
    wi = np.stack([_natural_tables(n, qi)[1] for qi in plan.moduli]).astype(np.uint64)
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
    n_inv = np.array([pow(n, -1, qi) for qi in plan.moduli], dtype=np.uint64).reshape(-1, 1)
    return (x * n_inv % q[..., 0]).astype(np.uint32)


def ntt_definition(x, plan: NTTPlan) -> np.ndarray:
    """The transform by its definition, A[p] = a(psi^e(p)) (:func:`slot_exponents`), in Python ints.
    O(N^2): for small N in tests."""
    x = np.asarray(x)
    out = np.zeros(x.shape, dtype=np.uint32)
    exps = slot_exponents(plan.n)
    for li, q in enumerate(plan.moduli):
        psi = minimal_root_of_unity(2 * plan.n, q)
        for idx in np.ndindex(*x.shape[:-2]):
            coeffs = [int(c) for c in x[idx + (li,)]]
            for p in range(plan.n):
                r = pow(psi, int(exps[p]), q)
                acc, power = 0, 1
                for c in coeffs:
                    acc += c * power
                    power = power * r % q
                out[idx + (li, p)] = acc % q
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
