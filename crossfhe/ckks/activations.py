"""Activation functions on CKKS ciphertexts: polynomial approximations with their levels and plaintext error.

An :class:`Activation` is a chain of polynomial stages on the Chebyshev basis, each evaluated by
:func:`crossfhe.ckks.polynomial.evaluate` (Paterson-Stockmeyer, baby-step giant-step, exact scales), then, for
the :attr:`Form.TIMES_INPUT` form, one product with the input:

    POLYNOMIAL:   y = p_k( ... p_2(p_1(x)))
    TIMES_INPUT:  y = x * p_k( ... p_1(x))        (no stage: y = x * x)

Stage 1 reads x on the activation's interval [a, b]; each later stage reads the previous stage's output on
the interval it states. Levels: stage i costs ``polynomial.depth(d_i)`` (+1 when its interval is not [-1, 1]:
the affine map), the product with x one more.

Two errors are kept apart. ``max_error`` is the approximation's own: max |y(x) - f(x)| in float64 over a dense
grid of [a, b] (2^16 + 1 points, both ends), measured when the activation is built. The CKKS error comes on
top: each stage's rescaling and key-switching noise (:mod:`crossfhe.ckks.polynomial`), carried through the
later stages with their slope (at most the product of max |p_i'| over their intervals) and, for TIMES_INPUT,
multiplied by |x| <= max(|a|, |b|).

Constructors: :func:`sigmoid`, :func:`relu` (composite odd sign polynomials), :func:`relu_smooth` (one
Chebyshev fit), :func:`square` (exact) and :func:`from_function` (any f, one Chebyshev interpolant).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from crossfhe.ckks import ops, polynomial
from crossfhe.ckks.ciphertext import Ciphertext, EvaluationKeys
from crossfhe.errors import ParameterError

GRID_POINTS = 2**16 + 1
"""Points of the uniform grid (ends included) on which ``max_error`` is measured."""

UNIT = (-1.0, 1.0)


class Form(enum.Enum):
    """What is done with the last stage's output: kept (POLYNOMIAL), or multiplied by the input (TIMES_INPUT)."""

    POLYNOMIAL = "polynomial"
    TIMES_INPUT = "times_input"


@dataclass(frozen=True)
class Stage:
    """One polynomial p(x) = sum_j coeffs_j T_j(u), u = (2x - a - b) / (b - a), read on ``interval`` = (a, b).
    ``levels``: what :func:`polynomial.evaluate` spends on it (depth(degree), +1 off [-1, 1])."""

    coeffs: tuple[float, ...]
    interval: tuple[float, float]

    @property
    def degree(self) -> int:
        return len(self.coeffs) - 1

    @property
    def levels(self) -> int:
        return polynomial.depth(self.degree) + (0 if self.interval == UNIT else 1)

    def __call__(self, x) -> np.ndarray:
        return polynomial.chebyshev_eval(np.asarray(self.coeffs), x, self.interval)


@dataclass(frozen=True)
class Activation:
    """An approximation of ``function`` on ``interval``: ``stages`` composed, then ``form`` (module docstring).

    levels: the levels :func:`apply` consumes. max_error: max |approximation - function| over
    :data:`GRID_POINTS` uniform points of ``interval`` in float64 (plaintext error only, no CKKS noise).
    Build with the constructors of this module, which measure both.
    """

    name: str
    interval: tuple[float, float]
    stages: tuple[Stage, ...]
    form: Form
    levels: int
    max_error: float
    function: Callable = field(compare=False, repr=False)

    @property
    def degrees(self) -> tuple[int, ...]:
        return tuple(s.degree for s in self.stages)

    def approx(self, x) -> np.ndarray:
        """The approximation in float64 (what :func:`apply` computes, without CKKS noise)."""
        x = np.asarray(x, dtype=np.float64)
        y = x
        for s in self.stages:
            y = s(y)
        return x * y if self.form is Form.TIMES_INPUT else y

    def __repr__(self) -> str:
        a, b = self.interval
        return (f"Activation({self.name} on [{a:g}, {b:g}], degrees {self.degrees}, {self.form.value}, "
                f"{self.levels} levels, max error {self.max_error:.3e})")


def _build(name: str, f: Callable, interval, stages: tuple[Stage, ...], form: Form) -> Activation:
    levels = sum(s.levels for s in stages) + (1 if form is Form.TIMES_INPUT else 0)
    act = Activation(name, interval, stages, form, levels, 0.0, f)
    x = np.linspace(interval[0], interval[1], GRID_POINTS)
    err = float(np.max(np.abs(act.approx(x) - np.asarray(f(x), dtype=np.float64))))
    return Activation(name, interval, stages, form, levels, err, f)


def _fit(f: Callable, degree: int, interval: tuple[float, float]) -> Stage:
    return Stage(tuple(float(c) for c in polynomial.chebyshev_coefficients(f, degree, interval)), interval)


# --------------------------------------------------------------------------------------------------
# Constructors
# --------------------------------------------------------------------------------------------------


def from_function(f: Callable, interval, degree: int, *, name: str = "f") -> Activation:
    """f on ``interval`` by its degree-``degree`` Chebyshev interpolant (one stage, :func:`polynomial.evaluate`).

    f: float64 array -> float64 array, finite on ``interval``. Levels: depth(degree), +1 off [-1, 1]. The
    interpolant's error is within 2 + (2/pi) log(degree + 1) of the best degree-d approximation's.
    """
    interval = polynomial.check_interval(interval)
    return _build(name, f, interval, (_fit(f, degree, interval),), Form.POLYNOMIAL)


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=np.float64)))  # 1 / (1 + e^-x), no overflow


def sigmoid(interval=(-8.0, 8.0), degree: int = 27) -> Activation:
    """1 / (1 + e^-x) on ``interval`` by a Chebyshev interpolant of degree ``degree``.

    Degree 27 is the largest that 6 levels allow off [-1, 1] (depth 5 + the affine map); 11 the largest for 5.
    Measured max errors on [-8, 8] (float64, this module's grid) are in ``max_error``; e.g. degree 7: 3.0e-2,
    11: 6.2e-3, 15: 1.4e-3, 27: 1.4e-5. Outside the interval the polynomial diverges.
    """
    interval = polynomial.check_interval(interval)
    return _build("sigmoid", _sigmoid, interval, (_fit(_sigmoid, degree, interval),), Form.POLYNOMIAL)


def sign_polynomial(n: int) -> Callable:
    """f_n(x) = sum_{i=0}^{n} binom(2i, i) 4^-i x (1 - x^2)^i, the odd degree-(2n + 1) polynomial with
    f_n' = c_n (1 - x^2)^n and f_n(+-1) = +-1 (Cheon, Kim, Kim, Lee, Lee, "Efficient homomorphic comparison methods
    with optimal complexity", Asiacrypt 2020). It maps [-1, 1] onto [-1, 1], is flat to order n at +-1, and its
    slope at 0 is c_n = (2n + 1)!! / (2n)!! (1.5, 2.19, 2.71, 4.18 for n = 1, 3, 5, 13); composing k of them
    approximates sign(x) outside a neighbourhood of 0 of width about 1 / (c_n^k)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ParameterError(f"sign_polynomial: n must be an int >= 1, got {n!r}")
    w = [math.comb(2 * i, i) / 4**i for i in range(int(n) + 1)]

    def f(x):
        x = np.asarray(x, dtype=np.float64)
        t = 1.0 - x * x
        acc = np.zeros_like(x)
        for wi in reversed(w):  # Horner in t
            acc = acc * t + wi
        return x * acc

    return f


def _relu(x):
    return np.maximum(np.asarray(x, dtype=np.float64), 0.0)


def relu(interval=(-1.0, 1.0), *, sign_degrees: tuple[int, ...] = (27, 27)) -> Activation:
    """max(x, 0) = x (1 + sign(x)) / 2 on ``interval``, sign by a composition of odd sign polynomials.

    Stage 1 is f_{n_1}(x / r), r = max(|a|, |b|), on the Chebyshev basis of [a, b]; stage i > 1 is f_{n_i} on
    [-1, 1] (:func:`sign_polynomial`, degrees d_i = 2 n_i + 1, odd, >= 3); the last stage returns (1 + s) / 2,
    and the input multiplies it (Form.TIMES_INPUT). The error is largest near 0, where the composition is not yet
    +-1: max |x| (1 - |s(x)|) / 2, proportional to r. Default (27, 27): 11 levels on [-1, 1], max error 7.7e-3;
    (11, 11): 9 levels, 1.8e-2; (27, 27, 27): 16 levels, 1.9e-3. At equal levels a single Chebyshev fit
    (:func:`relu_smooth`) is as accurate here (no gap around 0 is assumed), with more ciphertext products;
    the composite costs few products per level.
    """
    interval = polynomial.check_interval(interval)
    degrees = tuple(sign_degrees)
    if not degrees or any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 3 or d % 2 == 0
                          or d > 1023 for d in degrees):
        raise ParameterError(f"relu: sign_degrees must be a non-empty tuple of odd ints in [3, 1023], got "
                             f"{sign_degrees!r}")
    r = max(abs(interval[0]), abs(interval[1]))
    stages = []
    for i, d in enumerate(degrees):
        f = sign_polynomial((d - 1) // 2)
        stages.append(_fit((lambda x, f=f: f(x / r)) if i == 0 else f, d, interval if i == 0 else UNIT))
    last = stages[-1]
    half = tuple(0.5 * c + (0.5 if j == 0 else 0.0) for j, c in enumerate(last.coeffs))
    stages[-1] = Stage(half, last.interval)
    return _build("relu", _relu, interval, tuple(stages), Form.TIMES_INPUT)


def relu_smooth(interval=(-1.0, 1.0), degree: int = 28) -> Activation:
    """max(x, 0) on ``interval`` by one Chebyshev interpolant of degree ``degree`` (even degrees do better: an
    odd one puts no node at the kink). Error about 0.29 r / degree, r the interval's half-width: on [-1, 1]
    degree 12 (4 levels) 2.3e-2, 28 (5 levels, the default) 1.0e-2, 60 (6 levels) 4.9e-3."""
    interval = polynomial.check_interval(interval)
    return _build("relu_smooth", _relu, interval, (_fit(_relu, degree, interval),), Form.POLYNOMIAL)


def _square(x):
    return np.asarray(x, dtype=np.float64) ** 2


def square(interval=(-1.0, 1.0)) -> Activation:
    """x^2, exactly: one ciphertext product and a rescale (1 level); ``max_error`` is 0. The interval only
    states the inputs' range (x^2 <= max(a^2, b^2) must fit the message space)."""
    return _build("square", _square, polynomial.check_interval(interval), (), Form.TIMES_INPUT)


# --------------------------------------------------------------------------------------------------
# Homomorphic evaluation
# --------------------------------------------------------------------------------------------------


def apply(ct: Ciphertext, activation: Activation, keys: EvaluationKeys) -> Ciphertext:
    """The activation slot-wise on ``ct`` (slots in ``activation.interval``), ``activation.levels`` levels lower.

    One :func:`polynomial.evaluate` per stage (stage i reads its input on ``stage.interval``), each at the scale
    evaluate chooses, except the last of a TIMES_INPUT activation, whose scale q_l^2 / Delta_x (q_l the primes
    of the level l it lands on) makes x * p_k(...) land on level l - 1 at scale q_l after the rescale.
    Result: ``activation.approx(x)`` + CKKS error (module docstring). Raises ParameterError, before any work, if
    ``ct`` has fewer levels than ``activation.levels``.
    """
    if not isinstance(activation, Activation):
        raise TypeError(f"apply takes an Activation, got {type(activation).__name__}")
    if ct.level < activation.levels:
        raise ParameterError(f"{activation.name} (degrees {activation.degrees}) needs {activation.levels} levels; "
                             f"the ciphertext has {ct.level}: bootstrap or start higher")
    params = ct.params
    y = ct
    for i, st in enumerate(activation.stages):
        scale = None
        if activation.form is Form.TIMES_INPUT and i == len(activation.stages) - 1:
            q = float(math.prod(params.rescale_primes(y.level - st.levels)))
            scale = q * q / ct.scale
        y = polynomial.evaluate(y, np.asarray(st.coeffs), keys, interval=st.interval, scale=scale)
    if activation.form is Form.TIMES_INPUT:
        y = ops.mul_rescale(ops.drop_level(ct, y.level), y, keys)
    return y


__all__ = ["GRID_POINTS", "Activation", "Form", "Stage", "apply", "from_function", "relu", "relu_smooth",
           "sigmoid", "sign_polynomial", "square"]
