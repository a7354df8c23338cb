"""Polynomials on CKKS ciphertexts: Chebyshev interpolation and baby-step giant-step evaluation.

A polynomial p(u) = sum_{j <= d} c_j T_j(u) on the Chebyshev basis of [-1, 1] (T_0 = 1, T_1 = u,
T_{a+b} = 2 T_a T_b - T_{|a-b|}) is evaluated by the Paterson-Stockmeyer recursion on that basis
(Bossuat, Mouchet, Troncoso-Pastoriza, Hubaux, Eurocrypt 2021, Alg. 2; Lee et al. for the Chebyshev form):

    p = q T_m + r,   m = B 2^k the largest giant power <= d,   deg r < m,   deg q = d - m,

(:func:`chebyshev_divmod`), recursively, down to polynomials of degree < B, which are linear combinations
of the baby powers T_0 ... T_{B-1}. Powers cost one level each doubling: T_i is computed at depth
ceil(log2 i). A degree-d polynomial costs ceil(log2(d + 1)) + 1 levels (:func:`depth`; the +1 is the scalar
products of the baby combinations) and about B + log2(d / B) + d / B ciphertext products.

Scales are exact, never aligned by spending a level: every evaluation is asked for a *target* scale and
builds it, top down. A baby combination at level l multiplies each T_i by the integer
round(c_i Delta_t q_l / Delta_i) (so every term has the scale Delta_t q_l exactly), adds them, and rescales by
the level's primes q_l to Delta_t; a product q T_m asks q for the scale Delta_t q_l / Delta_m. A ciphertext
added to an unrescaled product of larger scale is first multiplied by round(Delta_product / Delta) (relative
error below 2^-40 at the scales used here). Error: each rescale adds its rounding noise (at most (1 + N) / 2
per coefficient, :func:`crossfhe.ckks.ops.rescale`), each relinearization its key-switching noise; the
coefficients' rounding to integers adds below 2^-40 relative to each term.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from crossfhe.ckks import ops
from crossfhe.ckks.ciphertext import Ciphertext, EvaluationKeys
from crossfhe.errors import ParameterError

BABY = 8
"""The baby-step size B (a power of two): T_0 ... T_7 are combined linearly, T_8, T_16, ... are the giants."""


# --------------------------------------------------------------------------------------------------
# Chebyshev series (NumPy)
# --------------------------------------------------------------------------------------------------


def chebyshev_coefficients(f: Callable, degree: int, interval: tuple[float, float] = (-1.0, 1.0)) -> np.ndarray:
    """c[0..degree] of the Chebyshev interpolant of f at the degree + 1 Chebyshev nodes of ``interval``:
    p(x) = sum_j c_j T_j(u), u = (2x - a - b) / (b - a). f takes and returns float64 arrays. The interpolant's
    error is within a factor 2 + (2/pi) log(degree + 1) of the best degree-d approximation."""
    degree = _check_degree(degree)
    a, b = check_interval(interval)
    k = np.arange(degree + 1)
    u = np.cos(np.pi * (k + 0.5) / (degree + 1))
    y = np.asarray(f(0.5 * (b - a) * u + 0.5 * (a + b)), dtype=np.float64)
    if y.shape != u.shape or not np.all(np.isfinite(y)):
        raise ParameterError("chebyshev_coefficients: f must return one finite value per node")
    c = np.array([2.0 / (degree + 1) * np.sum(y * np.cos(np.pi * j * (k + 0.5) / (degree + 1)))
                  for j in range(degree + 1)])
    c[0] /= 2
    return c


def chebyshev_eval(c, x, interval: tuple[float, float] = (-1.0, 1.0)) -> np.ndarray:
    """sum_j c_j T_j(u(x)) in float64 (Clenshaw): the plaintext reference of :func:`evaluate`."""
    a, b = check_interval(interval)
    u = (2 * np.asarray(x, dtype=np.float64) - a - b) / (b - a)
    return np.polynomial.chebyshev.chebval(u, np.asarray(c, dtype=np.float64))


def chebyshev_divmod(c, m: int) -> tuple[np.ndarray, np.ndarray]:
    """(q, r) with sum_j c_j T_j = (sum_j q_j T_j) T_m + sum_j r_j T_j, deg r < m, for m <= d < 2m (d = deg c);
    from T_m T_j = (T_{m+j} + T_{|m-j|}) / 2, exact in exact arithmetic."""
    c = np.asarray(c, dtype=np.float64)
    d = len(c) - 1
    if not 1 <= m <= d < 2 * m:
        raise ParameterError(f"chebyshev_divmod needs m <= deg < 2m, got m = {m}, deg = {d}")
    r = c.copy()
    q = np.zeros(d - m + 1)
    for j in range(d, m - 1, -1):
        a = r[j]
        if j == m:
            q[0] += a
            r[j] -= a
        else:
            q[j - m] += 2 * a
            r[j] -= a
            r[2 * m - j] -= a
    return q, r[:m]


def depth(degree: int) -> int:
    """The levels :func:`evaluate` spends on a degree-``degree`` polynomial on [-1, 1] (one more for another
    interval: the affine map)."""
    degree = _check_degree(degree)
    return _depth_of(degree, {i: math.ceil(math.log2(i)) if i > 1 else 0 for i in _powers_needed(degree)})


# --------------------------------------------------------------------------------------------------
# Homomorphic evaluation
# --------------------------------------------------------------------------------------------------


def evaluate(ct: Ciphertext, coeffs, keys: EvaluationKeys, *, interval: tuple[float, float] = (-1.0, 1.0),
             scale: float | None = None) -> Ciphertext:
    """p(x) slot-wise for p = sum_j coeffs_j T_j(u(x)) (:func:`chebyshev_coefficients`), at the scale ``scale``
    (default: the product of the primes of the level above the result, so scales stay near the primes).

    Slots must lie in ``interval`` (else the result is p's extrapolation). Costs :func:`depth` levels; raises
    ParameterError (before any work) if ``ct`` has fewer. Error: module docstring. On [-1, 1] the input's scale
    should be near its level's primes (products of powers keep it there); on another interval the affine map
    puts it there.
    """
    c = np.asarray(coeffs, dtype=np.float64)
    if c.ndim != 1 or not len(c) or not np.all(np.isfinite(c)):
        raise ParameterError("evaluate: coefficients must be a non-empty 1-D array of finite numbers")
    a, b = check_interval(interval)
    need = depth(len(c) - 1) + (0 if (a, b) == (-1.0, 1.0) else 1)
    if ct.level < need:
        raise ParameterError(f"a degree-{len(c) - 1} polynomial needs {need} levels; the ciphertext is at level "
                             f"{ct.level}: bootstrap or start higher")
    if (a, b) != (-1.0, 1.0):  # the affine map lands at the scale of the primes below, where products keep it
        below = float(math.prod(ct.params.rescale_primes(ct.level - 1))) if ct.level > 1 else ct.scale
        ct = scale_to(ct, 2.0 / (b - a), -(a + b) / (b - a), below)
    ev = _Evaluator(ct, keys, len(c) - 1)
    level = ev.level_of(c)
    target = float(math.prod(ct.params.rescale_primes(level + 1))) if scale is None else float(scale)
    return ev.run(c, target)


def scale_to(ct: Ciphertext, c: float, const: float, scale: float) -> Ciphertext:
    """c ct + const at one level lower, with scale exactly ``scale``: the product by round(c scale q / Delta)
    (q the level's primes), the constant added at that scale, then the rescale."""
    return _combine([(c, ct)], const, ct.level, scale)


def lift(ct: Ciphertext, level: int, scale: float) -> Ciphertext:
    """ct at ``level`` (<= its level) with scale ``scale`` >= 2^20 ct.scale, unrescaled: the product by the
    integer w = round(scale / Delta), exact up to the relative 1 / (2w) of the rounding. No level spent."""
    ct = ops.drop_level(ct, level)
    w = lift_factor(ct, scale)
    return ops._mul_integer(ct, w, ct.scale * w)


def lift_factor(ct: Ciphertext, scale: float) -> int:
    """w = round(scale / Delta) of :func:`lift`; ParameterError below 2^20 (the rounding would show)."""
    w = round(scale / ct.scale)
    if w < 2**20:
        raise ParameterError(
            f"lift: scale 2^{math.log2(scale):.1f} is not far enough above 2^{math.log2(ct.scale):.1f}")
    return w


def _combine(terms, const: float, level: int, target: float) -> Ciphertext:
    """sum_i c_i x_i + const, each x_i (at level >= ``level``) multiplied by round(c_i target q / Delta_i) at
    ``level``, the sum rescaled to ``level - 1`` with scale ``target`` (q = the level's primes); one program
    (:func:`crossfhe.ckks.ops.combine_rescale`)."""
    params = terms[0][1].params
    big = target * math.prod(params.rescale_primes(level))
    ints = [(x, round(c * big / x.scale)) for c, x in terms if c != 0]
    # every coefficient 0: the constant alone, on the first term's ciphertext times 0
    return ops.combine_rescale(ints or [(terms[0][1], 0)], const, level, big)


def _powers_needed(d: int) -> list[int]:
    baby = list(range(1, min(BABY, d + 1)))
    giants = []
    m = BABY
    while m <= d:
        giants.append(m)
        m *= 2
    return baby + giants


def _depth_of(d: int, power_depth: dict) -> int:
    """Levels below the input at which the recursion leaves a degree-d polynomial (powers at ``power_depth``)."""
    if d < BABY:
        return 1 + max([power_depth[i] for i in range(1, d + 1)], default=0)
    m = BABY
    while 2 * m <= d:
        m *= 2
    dq = _depth_of(d - m, power_depth)
    prod = 1 + max(dq, power_depth[m])
    dr = _depth_of(m - 1, power_depth) if m > 1 else 0
    return max(prod, dr)


class _Evaluator:
    """The powers T_i of one input and the recursion of :func:`evaluate`."""

    def __init__(self, x: Ciphertext, keys: EvaluationKeys, degree: int):
        self.keys = keys
        self.t = {1: x}
        for i in sorted(_powers_needed(degree)):
            self._power(i)

    def _power(self, i: int) -> Ciphertext:
        if i in self.t:
            return self.t[i]
        a = 1 << (i.bit_length() - 1)
        # T_2a = 2 T_a^2 - 1 and T_i = 2 T_a T_(i-a) - T_(2a-i): the product, then one program for the rest
        if a == i:
            h = self._power(i // 2)
            self.t[i] = ops.combine_rescale([], -1.0, h.level, h.scale**2, product=(h, h, self.keys, 2))
        else:
            ta, tb, tc = self._power(a), self._power(i - a), self._power(2 * a - i)
            level, scale = min(ta.level, tb.level), ta.scale * tb.scale
            self.t[i] = ops.combine_rescale([(tc, -lift_factor(tc, scale))], 0.0, level, scale,
                                            product=(ta, tb, self.keys, 2))
        return self.t[i]

    def level_of(self, c) -> int:
        d = len(c) - 1
        if d < BABY:
            return min(self.t[i].level for i in range(1, max(d, 1) + 1)) - 1
        m = self._giant(d)
        q, r = chebyshev_divmod(c, m)
        at = min(self.level_of(q), self.t[m].level) - 1
        return at if len(r) <= 1 or not np.any(r[1:]) else min(at, self.level_of(r))

    @staticmethod
    def _giant(d: int) -> int:
        m = BABY
        while 2 * m <= d:
            m *= 2
        return m

    def run(self, c, target: float) -> Ciphertext:
        d = len(c) - 1
        if d < BABY:
            level = min(self.t[i].level for i in range(1, max(d, 1) + 1))
            return _combine([(c[i], self.t[i]) for i in range(1, d + 1)] or [(0.0, self.t[1])], c[0], level, target)
        m = self._giant(d)
        q, r = chebyshev_divmod(c, m)
        g = self.t[m]
        at = min(self.level_of(q), g.level)
        big = target * math.prod(g.params.rescale_primes(at))
        qct = self.run(q, big / g.scale)
        prod = ops.mul(ops.drop_level(qct, at), ops.drop_level(g, at), self.keys)
        if len(r) == 1 or not np.any(r[1:]):
            if r[0]:
                prod = ops.add_scalar(prod, r[0])
            return ops.rescale(prod)
        res = ops.rescale(prod)
        rct = self.run(r, target)
        level = min(res.level, rct.level)
        return ops.add(ops.drop_level(res, level), ops.drop_level(rct, level))


def _check_degree(degree) -> int:
    if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or not 1 <= degree <= 1023:
        raise ParameterError(f"degree must be an int in [1, 1023], got {degree!r}")
    return int(degree)


def check_interval(interval) -> tuple[float, float]:
    """(a, b) as floats, finite with a < b; ParameterError naming the problem otherwise."""
    try:
        a, b = (float(v) for v in interval)
    except (TypeError, ValueError):
        raise ParameterError(f"interval must be a pair (a, b) of numbers, got {interval!r}") from None
    if not (math.isfinite(a) and math.isfinite(b) and a < b):
        raise ParameterError(f"interval must be finite with a < b, got {interval!r}")
    return a, b


__all__ = ["BABY", "chebyshev_coefficients", "chebyshev_divmod", "chebyshev_eval", "check_interval", "depth",
           "evaluate", "lift", "lift_factor", "scale_to"]
