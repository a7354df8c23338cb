"""Negacyclic NTT as a 4-step matrix product (CROSS MAT, §5.1, Fig. 9), bit-exact with :mod:`crossfhe.ring.ntt`.

Derivation. For N = R C, write the coefficient index j = j1 + R j2 (j1 < R, j2 < C), so the coefficients
reshaped row-major are X[j2, j1], a C x R matrix, and the output index t = t2 + C t1 (t2 < C, t1 < R).
With psi the smallest primitive 2N-th root of unity mod q (the one :mod:`crossfhe.ring.ntt` uses) and
psi^(2 C R t1 j2) = psi^(2N t1 j2) = 1,

    A(t) = sum_j a_j psi^((2t + 1) j)
         = sum_j1 psi^(2C t1 j1) psi^((2 t2 + 1) j1) sum_j2 psi^(R (2 t2 + 1) j2) X[j2, j1].

    Step 1  Y = W1 X,        W1[t2, j2] = psi^(R (2 t2 + 1) j2)    C x C, known left operand
    Step 2  Y[t2, j1] *= psi^((2 t2 + 1) j1)                        element-wise twist (Shoup)
    Step 3  Z = Y W2,        W2[j1, t1] = psi^(2C t1 j1)            R x R, known right operand

and Z[t2, t1] = A(t2 + C t1). Step 1 is C-point negacyclic NTTs of the R columns; step 3 R-point cyclic
ones of the C rows. Both products run as BAT int8 matrix products (:mod:`crossfhe.kernels.bat`).

Slot order without a transpose of the data. Slot p of :func:`crossfhe.ring.ntt.slot_exponents` holds
A(t(p)). The rows of W1 (with the twist's rows) and the columns of W2 are permuted offline,
Z'[alpha, beta] = Z[sigma(alpha), tau(beta)], such that the slot-order output is a reshape of Z':

    O = Z'.reshape(C, N2, R / N2).transpose(1, 0, 2).reshape(N),   (N1, N2) = split(N), N2 = min(32, N).

So p = n2 N1 + alpha R / N2 + r holds Z'[alpha, n2 R / N2 + r], and sigma, tau are read off t(p)
(:func:`_orders`, which checks that t(p) mod C depends on alpha only and t(p) // C on beta only; it does,
since t(p) = brv_5(n2) N1 + brv(r) C + brv(alpha), each field bit-reversed within its own width, for R a
multiple of N2). This needs R >= N2: for N < 32 the plan takes C = 1, R = N (no step 1), otherwise
R = 2^ceil(log N / 2) but at least 32.

Inverse. a_j = N^-1 sum_t A(t) psi^-((2t + 1) j) runs the same steps backwards: the slot-order input
reshaped to Z' (the inverse reshape), U = Z' V2 with V2[beta, j1] = psi^(-2C tau(beta) j1) (R x R, right),
U[alpha, j1] *= N^-1 psi^-((2 sigma(alpha) + 1) j1) (N^-1 folded into the twist), X = V1 U with
V1[j2, alpha] = psi^(-R (2 sigma(alpha) + 1) j2) (C x C, left), and X read row-major is the coefficients.

Layout: ``uint32[..., limbs, N]`` in [0, q_i), leading axes are batch axes; the kernels view each limb as
[C, R]. Work per limb-transform with K = :func:`~crossfhe.kernels.chunks.chunk_count` digits (K = 4
for 25- to 31-bit moduli): N (C + R) K^2 int8 multiply-accumulates (step 1: C K x C K by C K x R;
step 3: C x R K by R K x R K), plus N Shoup products and 2 K-chunk recombinations per output.
Tables per limb and direction: K^2 (C^2 + R^2) bytes of int8 BAT matrices and 8 N bytes of twist with
its Shoup companions (N 2^16, K 4: 2 MiB + 512 KiB; N 2^12: 128 KiB + 32 KiB).

The twisted product is materialized (:func:`~crossfhe.ring.ntt.fusion_barrier`) before it is cut into
digits: fused, XLA:CPU recomputes the recombination and the twist for each of the K digits (one
process, 1 CPU, N 2^12 x 4 limbs: forward 0.64 -> 0.48 ms, inverse 0.68 -> 0.34 ms; N 2^16: 4.2 -> 3.1
and 2.5 -> 1.8 ms).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.errors import BasisMismatchError
from crossfhe.kernels import bat
from crossfhe.math.modular import shoup_mul, shoup_precompute
from crossfhe.math.primes import minimal_root_of_unity
from crossfhe.math.xla import plan_cache
from crossfhe.ring.ntt import NTTPlan, fusion_barrier, slot_exponents, split

U32 = jnp.uint32


def _static():
    return field(metadata={"static": True})


def shape_of(n: int) -> tuple[int, int]:
    """(R, C) with N = R C: R = 2^ceil(log2(N) / 2), at least N2 = min(32, N) (so C = 1 below N = 32)."""
    log_n = n.bit_length() - 1
    _, n2 = split(n)
    r = max(1 << ((log_n + 1) // 2), n2)
    return r, n // r


def _orders(n: int, r: int, c: int) -> tuple[np.ndarray, np.ndarray]:
    """sigma [C], tau [R]: output position (alpha, beta) of Z' holds A(sigma(alpha) + C tau(beta)).

    Read from :func:`~crossfhe.ring.ntt.slot_exponents`; raises AssertionError if the slot order is not
    separable over the [C, R] grid (it is for every R that is a multiple of N2).
    """
    _, n2 = split(n)
    t = (slot_exponents(n).astype(np.int64) - 1) // 2
    grid = t.reshape(n2, c, r // n2).transpose(1, 0, 2).reshape(c, r)
    sigma, tau = grid[:, 0] % c, grid[0, :] // c
    assert (grid % c == sigma[:, None]).all() and (grid // c == tau[None, :]).all(), "slot order not separable"
    assert (np.sort(sigma) == np.arange(c)).all() and (np.sort(tau) == np.arange(r)).all()
    return sigma, tau


def _psi_powers(n: int, q: int) -> tuple[np.ndarray, int]:
    """int64 [2N]: psi^e mod q for e < 2N, by doubling (each block is the previous one times psi^m)."""
    psi = minimal_root_of_unity(2 * n, q)
    pw = np.ones(2 * n, dtype=np.int64)
    m = 1
    while m < 2 * n:
        pw[m : 2 * m] = pw[:m] * pow(psi, m, q) % q
        m *= 2
    return pw, psi


@plan_cache(maxsize=64)
def _limb_matrices(n: int, q: int, r: int, c: int):
    """Forward (W1, twist, W2) and inverse (V2, twist, V1) matrices of one limb, residues as int64."""
    sigma, tau = _orders(n, r, c)
    pw, _ = _psi_powers(n, q)
    two_n = 2 * n
    odd = 2 * sigma + 1  # [C]: the exponent 2 t2 + 1 of each row of Z'
    j1, j2 = np.arange(r), np.arange(c)
    e_w1 = (r * odd[:, None] * j2[None, :]) % two_n  # [C (alpha), C (j2)]
    e_tw = (odd[:, None] * j1[None, :]) % two_n  # [C (alpha), R (j1)]
    e_w2 = (2 * c * j1[:, None] * tau[None, :]) % two_n  # [R (j1), R (beta)]
    n_inv = pow(n, -1, q)
    forward = (pw[e_w1], pw[e_tw], pw[e_w2])
    inverse = (pw[(-e_w2.T) % two_n], pw[(-e_tw) % two_n] * n_inv % q, pw[(-e_w1.T) % two_n])
    return forward, inverse


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False)
class MatrixNTTPlan:
    """Tables of the 4-step matrix NTT (module docstring) for ring degree ``n`` over ``moduli``.

    Leaves: ``q`` uint32 [L, 1, 1]; forward ``w1`` (left, C x C; None when C = 1) and ``w2`` (right,
    R x R) BAT operands, ``twist`` / ``twist_shoup`` uint32 [L, C, R]; inverse ``v2`` (right, R x R),
    ``itwist`` / ``itwist_shoup`` (N^-1 folded in), ``v1`` (left, C x C; None when C = 1). Static: ``n``,
    ``moduli``, ``r``, ``c`` (N = R C). Create with :meth:`create` (cached per (n, moduli)).
    """

    q: np.ndarray
    w1: bat.BATOperand | None
    twist: np.ndarray
    twist_shoup: np.ndarray
    w2: bat.BATOperand
    v2: bat.BATOperand
    itwist: np.ndarray
    itwist_shoup: np.ndarray
    v1: bat.BATOperand | None
    n: int = _static()
    moduli: tuple[int, ...] = _static()
    r: int = _static()
    c: int = _static()

    @staticmethod
    def create(n: int, moduli) -> MatrixNTTPlan:
        return _create_plan(int(n), tuple(int(q) for q in moduli))

    @property
    def limbs(self) -> int:
        return len(self.moduli)

    @property
    def nbytes(self) -> int:
        """Bytes of all tables (both directions, all limbs)."""
        ops = [o for o in (self.w1, self.w2, self.v2, self.v1) if o is not None]
        tw = (self.twist, self.twist_shoup, self.itwist, self.itwist_shoup)
        return sum(o.nbytes for o in ops) + sum(int(np.asarray(t).nbytes) for t in tw)


@plan_cache(maxsize=32)
def _create_plan(n: int, moduli: tuple[int, ...]) -> MatrixNTTPlan:
    NTTPlan.create(n, moduli)  # validates N and the moduli (ParameterError)
    return _build(n, moduli)


def concat(plans: list[MatrixNTTPlan]) -> MatrixNTTPlan:
    """One plan over the limbs of several plans in turn (moduli may repeat; the kernels treat limbs
    independently). Built afresh, so the digit count and bounds are those of all the moduli together."""
    if len({p.n for p in plans}) != 1:
        raise ValueError("concat: the plans must share N")
    return _concat_cached(plans[0].n, tuple(m for p in plans for m in p.moduli))


@plan_cache(maxsize=32)
def _concat_cached(n: int, moduli: tuple[int, ...]) -> MatrixNTTPlan:
    return _build(n, moduli)


def _build(n: int, moduli: tuple[int, ...]) -> MatrixNTTPlan:
    r, c = shape_of(n)
    limbs = [_limb_matrices(n, q, r, c) for q in moduli]
    qa = np.array(moduli, dtype=np.int64).reshape(-1, 1, 1)

    def stack(direction, i):
        return np.stack([t[direction][i] for t in limbs])

    def twist(direction):
        w = stack(direction, 1)
        return jnp.asarray(w.astype(np.uint32)), jnp.asarray(shoup_precompute(w, qa))

    tw, tws = twist(0)
    itw, itws = twist(1)
    return MatrixNTTPlan(
        q=qa.astype(np.uint32),
        w1=bat.bat_left(stack(0, 0), moduli) if c > 1 else None,
        twist=tw,
        twist_shoup=tws,
        w2=bat.bat_right(stack(0, 2), moduli),
        v2=bat.bat_right(stack(1, 0), moduli),
        itwist=itw,
        itwist_shoup=itws,
        v1=bat.bat_left(stack(1, 2), moduli) if c > 1 else None,
        n=n,
        moduli=moduli,
        r=r,
        c=c,
    )


def _check(x, plan: MatrixNTTPlan):
    if x.shape[-2:] != (plan.limbs, plan.n):
        raise BasisMismatchError(
            f"array of shape {tuple(x.shape)} does not match the NTT plan: expected [..., {plan.limbs}, {plan.n}]"
        )
    if x.dtype != U32:
        raise TypeError(f"NTT input must be uint32 residues, got {x.dtype}")


@jax.jit
def _forward(x, plan: MatrixNTTPlan):
    lead = x.shape[:-1]
    _, n2 = split(plan.n)
    y = x.reshape(lead + (plan.c, plan.r))
    if plan.w1 is not None:
        y = bat.matmul(y, plan.w1)
    y = fusion_barrier(shoup_mul(y, plan.twist, plan.twist_shoup, plan.q), plan.twist)
    z = bat.matmul(y, plan.w2)
    z = jnp.swapaxes(z.reshape(lead + (plan.c, n2, plan.r // n2)), -3, -2)
    return z.reshape(lead + (plan.n,))


@jax.jit
def _inverse(x, plan: MatrixNTTPlan):
    lead = x.shape[:-1]
    _, n2 = split(plan.n)
    z = jnp.swapaxes(x.reshape(lead + (n2, plan.c, plan.r // n2)), -3, -2).reshape(lead + (plan.c, plan.r))
    u = bat.matmul(z, plan.v2)
    u = fusion_barrier(shoup_mul(u, plan.itwist, plan.itwist_shoup, plan.q), plan.itwist)
    if plan.v1 is not None:
        u = bat.matmul(u, plan.v1)
    return u.reshape(lead + (plan.n,))


def ntt(x, plan: MatrixNTTPlan):
    """Forward negacyclic NTT of each limb as two BAT matrix products and a twist (module docstring).

    x: uint32[..., limbs, N] in [0, q_i), coefficient domain. Returns uint32[..., limbs, N] in [0, q_i),
    the evaluation domain in slot order; bit-exact with :func:`crossfhe.ring.ntt.ntt`.
    """
    _check(x, plan)
    return _forward(x, plan)


def intt(x, plan: MatrixNTTPlan):
    """Inverse of :func:`ntt`: x: uint32[..., limbs, N] in [0, q_i), evaluation domain in slot order.

    Returns the coefficients in [0, q_i); bit-exact with :func:`crossfhe.ring.ntt.intt`.
    """
    _check(x, plan)
    return _inverse(x, plan)
