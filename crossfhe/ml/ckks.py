"""A :class:`~crossfhe.ml.network.Network` as a CKKS circuit: one sample per ciphertext, one compiled program.

**Layout.** A sample's ``n_in`` values are one :class:`crossfhe.EncryptedVector` of length d, the smallest power of
two at or above every layer's width (zero-padded, and replicated over the slots as vectors are), so a rotation of
the slots is the cyclic rotation of the d values. A batch of samples is a batch of ciphertexts, run by the same
program (:meth:`crossfhe.Circuit.run` over the leading axis).

**Affine layers** (y = W x + b, W padded to d x d): the diagonal method with baby-step giant-step. With
diag_k[i] = W[i, (i + k) mod d] and k = g B + j (B a power of two),

    y = sum_g rot( sum_j rot(diag_{gB+j}, -gB) * rot(x, j), gB ) + b,

only the k whose diagonal is nonzero taken: the rotations by j (one ModUp, hoisted by the compiler) and by g B are
the keys the circuit's key generation makes; each plaintext product costs one level. B minimizes the number of
distinct rotations.

**Non-linear layers**: f on the interval [lo, hi] its inputs took on the calibration samples, widened by ``margin``
of its length on each side, is replaced by its Chebyshev interpolant of degree D on u in [-1, 1]; the map
x -> u = (2x - lo - hi) / (hi - lo) is folded into the preceding affine layer (so it costs no level). The
polynomial runs as T_k(u) by T_{m+n} = 2 T_m T_n - T_{m-n} (depth ceil(log2 k)) and one scalar product per
coefficient: ceil(log2 D) + 1 levels. Squares (x * x, Pow 2) are exact: one product. **Inputs outside the
calibrated interval** make the polynomial diverge from f (the encrypted model cannot see its values): the report
states the intervals; calibrate on samples that cover the data the model will see.

**Errors.** The approximation's own (max |p - f| on a 4097-point grid of each interval, reported per layer), then
CKKS's noise on top (about 2^-precision of the preset relative to each value's bound). The report compares the
float model, the approximated model in float64, and (``check``) the encrypted model on the calibration samples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from crossfhe.api import CircuitError, CKKSVector
from crossfhe.api import compile as compile_circuit
from crossfhe.ckks import presets
from crossfhe.ckks.polynomial import chebyshev_coefficients, chebyshev_eval
from crossfhe.ml.network import FUNCTIONS, Affine, Agreement, ModelError, Network, Nonlinear

DEGREES = {"relu": 15, "leaky_relu": 15, "sigmoid": 15, "tanh": 15, "gelu": 15, "gelu_tanh": 15, "softplus": 15}
"""Default Chebyshev degree per activation (5 levels each: ceil(log2 15) + 1)."""

GRID = 4097
"""Points of the uniform grid (ends included) on which each approximation's error is measured."""


@dataclass(frozen=True)
class Approximation:
    """How one non-linear layer runs: ``kind`` on ``interval`` (calibrated and widened) by a Chebyshev polynomial
    of ``degree`` (``coeffs`` on u in [-1, 1]; none for an exact square), its ``max_error`` on the interval, the
    ``levels`` it costs, and the range its inputs took on the calibration samples (``seen``)."""

    source: str
    kind: str
    interval: tuple[float, float]
    seen: tuple[float, float]
    degree: int
    coeffs: tuple[float, ...]
    max_error: float
    levels: int

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """The polynomial on the layer's input x (float64), what the encrypted layer computes without noise."""
        if self.kind == "square":
            return x * x
        return chebyshev_eval(np.asarray(self.coeffs), x, self.interval)


def fit(layer: Nonlinear, seen: tuple[float, float], degree: int, margin: float) -> Approximation:
    """The :class:`Approximation` of ``layer`` for inputs seen in [lo, hi]: the interval widened by ``margin``
    times its length on each side (at least 1e-3 wide), the Chebyshev interpolant of ``degree``."""
    lo, hi = float(seen[0]), float(seen[1])
    if layer.kind == "square":
        return Approximation(layer.source, "square", (lo, hi), (lo, hi), 2, (), 0.0, 1)
    if not isinstance(degree, int) or degree < 1:
        raise ModelError(f"{layer.source}: the polynomial degree must be an integer >= 1, got {degree!r}")
    pad = max(margin * (hi - lo), 5e-4)
    a, b = lo - pad, hi + pad

    def f(x):
        return FUNCTIONS[layer.kind](x, layer.alpha)

    c = chebyshev_coefficients(f, degree, (a, b))
    grid = np.linspace(a, b, GRID)
    err = float(np.max(np.abs(chebyshev_eval(c, grid, (a, b)) - f(grid))))
    levels = max(1, math.ceil(math.log2(degree))) + 1 if degree > 1 else 1
    return Approximation(layer.source, layer.kind, (a, b), (lo, hi), degree, tuple(float(v) for v in c), err,
                         levels)


@dataclass(frozen=True)
class Plan:
    """The network as the circuit runs it: ``steps``, each ``("affine", W [d, d], b [d])``, ``("poly", coeffs)``
    (on u already normalized) or ``("square",)``; ``d`` the vector length; ``approximations`` per non-linear
    layer."""

    steps: tuple
    d: int
    approximations: tuple
    n_in: int
    n_out: int

    def forward(self, x: np.ndarray) -> np.ndarray:
        """The approximated model in float64 on samples ``[B, n_in]``: ``[B, n_out]``."""
        h = np.zeros((x.shape[0], self.d))
        h[:, : x.shape[1]] = x
        for step in self.steps:
            if step[0] == "affine":
                h = h @ step[1].T + step[2]
            elif step[0] == "poly":
                h = chebyshev_eval(np.asarray(step[1]), h)
            else:
                h = h * h
        return h[:, : self.n_out]


def plan(net: Network, samples: np.ndarray, *, degree=None, margin: float = 0.1) -> Plan:
    """Calibrate ``net``'s non-linear layers on ``samples`` (``[B, n_in]``) and lay every layer out at one width
    d (module docstring). ``degree``: one for every activation, or ``{kind: degree}`` (default :data:`DEGREES`)."""
    if not 0 <= margin <= 10:
        raise ModelError(f"margin is a fraction of each interval's length in [0, 10], got {margin!r}")
    inputs = net.nonlinear_inputs(samples)
    layers = list(net.layers)
    widths = [net.n_in] + [w for layer in layers if isinstance(layer, Affine) for w in layer.shape]
    d = CKKSVector(max(widths)).width
    steps, approximations, k = [], [], 0
    pending: Affine | None = None
    h_width = net.n_in
    for layer in layers + [None]:
        if isinstance(layer, Affine):
            if pending is not None:  # two affine layers in a row: one
                pending = Affine(layer.weight @ pending.weight, layer.weight @ pending.bias + layer.bias,
                                 pending.source + " + " + layer.source)
            else:
                pending = layer
            continue
        if isinstance(layer, Nonlinear):
            seen = inputs[k]
            k += 1
            deg = degree.get(layer.kind, DEGREES.get(layer.kind)) if isinstance(degree, dict) else degree
            a = fit(layer, (float(seen.min()), float(seen.max())), deg or DEGREES.get(layer.kind, 15), margin)
            approximations.append(a)
            if pending is None:  # a non-linear step on the input or right after another: an identity map
                pending = Affine(np.eye(h_width), np.zeros(h_width), "identity")
            w, b = pending.weight, pending.bias
            if a.kind != "square":  # u = (2x - lo - hi) / (hi - lo) folded into W and b
                lo, hi = a.interval
                s = 2.0 / (hi - lo)
                w, b = w * s, (b - 0.5 * (lo + hi)) * s
            steps.append(("affine", _padded(w, d), _padded_vec(b, d)))
            steps.append(("square",) if a.kind == "square" else ("poly", a.coeffs))
            h_width = w.shape[0]
            pending = None
            continue
        if pending is not None:  # the end
            steps.append(("affine", _padded(pending.weight, d), _padded_vec(pending.bias, d)))
            h_width = pending.shape[0]
    return Plan(tuple(steps), d, tuple(approximations), net.n_in, h_width)


def _padded(w: np.ndarray, d: int) -> np.ndarray:
    out = np.zeros((d, d))
    out[: w.shape[0], : w.shape[1]] = w
    return out


def _padded_vec(b: np.ndarray, d: int) -> np.ndarray:
    out = np.zeros(d)
    out[: b.shape[0]] = b
    return out


def _baby(ks: list[int], d: int) -> int:
    """The power of two B that minimizes the distinct rotations of the diagonals ``ks``, |{k mod B}| + |{k div B}|
    (zero not counted), the largest on a tie (baby steps share one ModUp, giant steps do not)."""
    best, cost = 1, None
    b = 1
    while b <= d:
        c = len({k % b for k in ks} - {0}) + len({k // b for k in ks} - {0})
        if cost is None or c <= cost:
            best, cost = b, c
        b <<= 1
    return best


def matvec(x, w: np.ndarray, b: np.ndarray):
    """W x + b on a traced or eager :class:`crossfhe.EncryptedVector` of length d = W's side (module docstring):
    one level; rotations by the baby steps j and the giant steps g B."""
    d = w.shape[0]
    rows = np.arange(d)
    diags = {k: w[rows, (rows + k) % d] for k in range(d)}
    ks = [k for k, v in diags.items() if np.any(v)]
    if not ks:
        return x * np.zeros(d) + b
    big = _baby(ks, d)
    babies = {j: (x if j == 0 else x.rotate(j)) for j in sorted({k % big for k in ks})}
    y = None
    for g in sorted({k // big for k in ks}):
        inner = None
        for k in (k for k in ks if k // big == g):
            term = babies[k % big] * np.roll(diags[k], g * big)
            inner = term if inner is None else inner + term
        inner = inner.rotate(g * big) if g else inner
        y = inner if y is None else y + inner
    return y + b if np.any(b) else y


def chebyshev(u, coeffs):
    """sum_k c_k T_k(u) on an encrypted u (in [-1, 1]): T_k by T_{m+n} = 2 T_m T_n - T_{m-n}, depth
    ceil(log2 k), then one scalar product per nonzero coefficient."""
    c = np.asarray(coeffs, dtype=np.float64)
    scale = float(np.abs(c).sum()) or 1.0
    t = {1: u}

    def tk(k):
        if k not in t:
            m = 1 << (k.bit_length() - 1)
            if m == k:
                half = tk(k // 2)
                t[k] = 2 * (half * half) - 1
            else:
                n = k - m
                prod = 2 * (tk(m) * tk(n))
                t[k] = prod - 1 if m == n else prod - tk(m - n)
        return t[k]

    y = None
    for k in range(1, len(c)):
        if abs(c[k]) <= 1e-13 * scale:
            continue
        term = tk(k) * float(c[k])
        y = term if y is None else y + term
    if y is None:
        raise ModelError("an activation's polynomial is constant on its interval; the layer does not depend on its "
                         "input there")
    return y + float(c[0]) if c[0] else y


def function(p: Plan):
    """The function over one :class:`crossfhe.EncryptedVector` of length ``p.d`` that the circuit traces."""

    def model(x):
        for step in p.steps:
            if step[0] == "affine":
                x = matvec(x, step[1], step[2])
            elif step[0] == "poly":
                x = chebyshev(x, step[1])
            else:
                x = x * x
        return x

    return model


@dataclass
class Report:
    """What compiling a model did: the approximations (intervals, degrees, errors, levels), the circuit's depth and
    preset, and the agreement of the approximated model (float64) and the encrypted one with the float model on
    the calibration samples."""

    model: str
    params: str
    d: int
    depth: int
    approximations: tuple
    approximated: Agreement
    encrypted: Agreement | None = None
    cost: dict = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"{self.model}: CKKS, {self.params}, one vector of {self.d} values per sample, depth {self.depth}, "
                 f"{self.cost.get('key_switches', '?')} key switches per sample"]
        for a in self.approximations:
            what = "exact square" if a.kind == "square" else (
                f"degree {a.degree} on [{a.interval[0]:.4g}, {a.interval[1]:.4g}] (seen [{a.seen[0]:.4g}, "
                f"{a.seen[1]:.4g}]), max error {a.max_error:.3g}")
            lines.append(f"  {a.source}: {a.kind}, {what}, {a.levels} levels")
        lines.append(f"  approximated vs float {self.approximated}")
        if self.encrypted is not None:
            lines.append(f"  encrypted vs float {self.encrypted}")
        return "\n".join(lines)


def compile_plan(p: Plan, *, params=None, precision: float | None = None, name: str = "model", cache: bool = True):
    """The :class:`crossfhe.Circuit` of ``p``: one input ``CKKSVector(p.d)``; ``params`` as :func:`crossfhe.compile`
    (default: the smallest secure preset with the depth and ``precision``)."""
    need = depth(p)
    deepest = max(q.user_levels for q in presets.SECURE.values() if not q.bootstrap_levels)
    have = params.user_levels if params is not None else deepest
    if need > have:
        where = (f"{presets.name_of(params) or 'these parameters'} has {have} levels" if params is not None else
                 f"the deepest secure preset has {deepest} levels")
        raise ModelError(
            f"{name}: the model needs multiplicative depth {need} on CKKS ({', '.join(_levels(p))}) and {where}; "
            "crossfhe does not place bootstraps inside a model yet (a bootstrap needs its input in [-1, 1], which the "
            "compiler cannot prove inside a polynomial): lower the activations' degree (degree=7: 4 levels each), "
            "use fewer layers, or compile with scheme='tfhe' (no depth limit: each activation is one lookup)")
    try:
        return compile_circuit(function(p), CKKSVector(p.d), params=params, precision=precision, name=name,
                                cache=cache)
    except CircuitError as e:
        raise ModelError(f"{name}: {e}") from e


def _levels(p: Plan) -> list[str]:
    out, it = [], iter(p.approximations)
    for step in p.steps:
        if step[0] == "affine":
            out.append("dense 1")
        else:
            a = next(it)
            out.append(f"{a.kind} {a.levels}")
    return out


def depth(p: Plan) -> int:
    """The levels ``p`` uses: one per dense layer, each approximation's own (``Approximation.levels``)."""
    it = iter(p.approximations)
    return sum(1 if step[0] == "affine" else next(it).levels for step in p.steps)
