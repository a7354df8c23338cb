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

**Bootstraps.** A model deeper than the parameters' levels runs on a bootstrappable preset (``params=None`` picks
``N16_BOOT_L9`` when no preset without bootstrapping has the depth): :func:`place_bootstraps` puts a bootstrap
before each step that needs more levels than are left, with the value brought into [-1, 1] for free by the step
before (most often it is a layer's normalized input u, already there) and declared bounded by 1
(:meth:`crossfhe.EncryptedVector.bootstrap` ``bound``: the compiler's interval bound on a polynomial's output,
the sum of its coefficients' magnitudes times its terms', is far above the polynomial's real range). Inputs
outside the calibrated intervals would break that bound as they break the polynomial.

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
    (on u already normalized), ``("square",)`` or ``("bootstrap", s)`` (:func:`place_bootstraps`: the values,
    which the step before brought into [-1, 1] by dividing them by s, a power of two, bootstrapped and multiplied
    by s again); ``d`` the vector length; ``approximations`` per non-linear layer."""

    steps: tuple
    d: int
    approximations: tuple
    n_in: int
    n_out: int
    input_peak: float = 1.0
    """The largest |value| of the calibration samples."""

    @property
    def input_bound(self) -> float:
        """The bound a circuit that bootstraps declares on its input: the smallest power of two at or above twice
        :attr:`input_peak` (at least 1)."""
        return float(2.0 ** max(0, math.ceil(math.log2(max(2 * self.input_peak, 1e-300)))))

    def forward(self, x: np.ndarray) -> np.ndarray:
        """The approximated model in float64 on samples ``[B, n_in]``: ``[B, n_out]``."""
        h = np.zeros((x.shape[0], self.d))
        h[:, : x.shape[1]] = x
        for step in self.steps:
            if step[0] == "affine":
                h = h @ step[1].T + step[2]
            elif step[0] == "poly":
                h = chebyshev_eval(np.asarray(step[1]), h)
            elif step[0] == "square":
                h = h * h
            else:  # ("bootstrap", s): the same values, times s (the step before divided them by s)
                h = h * step[1]
        return h[:, : self.n_out]

    @property
    def bootstraps(self) -> int:
        """How many bootstraps a sample goes through (:func:`place_bootstraps`)."""
        return sum(step[0] == "bootstrap" for step in self.steps)


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
    return Plan(tuple(steps), d, tuple(approximations), net.n_in, h_width,
                float(np.abs(samples).max()) if samples.size else 0.0)


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
            elif step[0] == "square":
                x = x * x
            else:  # |x| <= 1 on the calibration samples (place_bootstraps); times an integer costs no level
                x = x.bootstrap(bound=1.0) * int(step[1])
        return x

    return model


@dataclass
class Report:
    """What compiling a model did: the approximations (intervals, degrees, errors, levels), the levels the model
    uses in all (:func:`depth`; bootstraps, counted in ``cost``, restore them) and the preset, and the agreement
    of the approximated model (float64) and the encrypted one with the float model on the calibration samples."""

    model: str
    params: str
    d: int
    depth: int
    approximations: tuple
    approximated: Agreement
    encrypted: Agreement | None = None
    cost: dict = field(default_factory=dict)

    def __str__(self) -> str:
        boots = self.cost.get("bootstraps", 0)
        lines = [f"{self.model}: CKKS, {self.params}, one vector of {self.d} values per sample, depth {self.depth}, "
                 f"{self.cost.get('key_switches', '?')} key switches"
                 + (f" and {boots} bootstrap{'s' if boots > 1 else ''}" if boots else "") + " per sample"]
        for a in self.approximations:
            what = "exact square" if a.kind == "square" else (
                f"degree {a.degree} on [{a.interval[0]:.4g}, {a.interval[1]:.4g}] (seen [{a.seen[0]:.4g}, "
                f"{a.seen[1]:.4g}]), max error {a.max_error:.3g}")
            lines.append(f"  {a.source}: {a.kind}, {what}, {a.levels} levels")
        lines.append(f"  approximated vs float {self.approximated}")
        if self.encrypted is not None:
            lines.append(f"  encrypted vs float {self.encrypted}")
        return "\n".join(lines)


def place_bootstraps(p: Plan, levels: int, samples: np.ndarray, *, name: str = "model") -> Plan:
    """``p`` with a bootstrap wherever the next step needs more levels than are left, for parameters that leave
    ``levels`` after each bootstrap (and at the input). Each step's levels as :func:`depth` counts them; a step
    that needs more than ``levels`` alone (a polynomial of too high a degree) is a ModelError naming it.

    A bootstrap keeps values in [-1, 1] only. Before one, the value's largest magnitude m on the calibration
    ``samples`` (``[B, n_in]``; for a polynomial's output, also its largest on all of [-1, 1]) gives s, the
    smallest power of two >= m (>= 1): the step before is divided by s for free (an affine layer's W and b, a
    polynomial's coefficients; before a square, the affine layer before it by sqrt(s), s a power of four), and the
    bootstrapped value multiplied by s, an integer (no level). Most bootstraps fall on a layer's normalized input
    u, in [-1, 1] by construction (s = 1). The relative error of a bootstrap (about 2^-25 of 1 at the N 2^16
    presets) is multiplied by s with the values."""
    if levels < 1:
        raise ModelError(f"{name}: the parameters leave {levels} levels after a bootstrap; a model needs at least 1")
    approx = iter(p.approximations)
    costs = []
    for step in p.steps:
        if step[0] == "bootstrap":
            raise ModelError(f"{name}: the plan already bootstraps")
        costs.append(1 if step[0] == "affine" else next(approx).levels)
    approx = iter(p.approximations)
    h = np.zeros((samples.shape[0], p.d))
    h[:, : samples.shape[1]] = samples
    out: list = []
    left = levels
    peak = 0.0  # the largest magnitude of the last step's output: on the samples, and for a polynomial on [-1, 1]
    for step, c in zip(p.steps, costs):
        a = next(approx) if step[0] != "affine" else None
        if c > levels:
            fits = 2 ** (levels - 1)  # ceil(log2 D) + 1 <= levels
            hint = f"a degree of at most {fits} fits (degree={fits})"
            raise ModelError(f"{name}: {a.source} ({a.kind}, degree {a.degree}) needs {c} levels, and these parameters "
                             f"leave {levels} after a bootstrap (a polynomial cannot be split across one): {hint}, or "
                             "use a preset with more levels after bootstrapping (N16_BOOT_L9: 9)")
        if c > left:
            kind = out[-1][0]
            if kind == "square":  # x^2 / s from (x / t)^2, t = sqrt(s): the affine layer before it
                t = 1 if peak <= 1 else 2 ** math.ceil(0.5 * math.log2(peak))
                scale = t * t
                if t > 1:
                    _, w, b = out[-2]
                    out[-2] = ("affine", w / t, b / t)
            else:
                scale = 1 if peak <= 1 else 2 ** math.ceil(math.log2(peak))
                if scale > 1 and kind == "affine":
                    out[-1] = ("affine", out[-1][1] / scale, out[-1][2] / scale)
                elif scale > 1:
                    out[-1] = ("poly", tuple(float(v) / scale for v in out[-1][1]))
            out.append(("bootstrap", scale))
            left = levels
        out.append(step)
        left -= c
        if step[0] == "affine":
            h = h @ step[1].T + step[2]
            peak = float(np.abs(h).max())
        elif step[0] == "poly":
            h = chebyshev_eval(np.asarray(step[1]), h)
            grid = chebyshev_eval(np.asarray(step[1]), np.linspace(-1.0, 1.0, GRID))
            peak = max(float(np.abs(h).max()), float(np.abs(grid).max()))
        else:
            h = h * h
            peak = float(np.abs(h).max())
    return Plan(tuple(out), p.d, p.approximations, p.n_in, p.n_out, p.input_peak)


def fit_levels(p: Plan, samples: np.ndarray, *, params=None, name: str = "model"):
    """(plan, params): ``p`` as it runs on ``params``. Where its depth (:func:`depth`) fits the parameters (or,
    ``params`` None, the deepest secure preset without bootstrapping), ``p`` and ``params`` unchanged (None: the
    compiler picks the smallest preset). Else, on bootstrappable parameters (``params`` None: ``N16_BOOT_L9``, the
    one with the most levels between bootstraps), ``p`` with its bootstraps placed (:func:`place_bootstraps`);
    on any other, ModelError saying what would fit."""
    need = depth(p)
    deepest = max(q.user_levels for q in presets.SECURE.values() if not q.bootstrap_levels)
    if params is None:
        if need <= deepest:
            return p, None
        params = presets.N16_BOOT_L9
    if need <= params.user_levels:
        return p, params
    if params.bootstrap_levels:
        return place_bootstraps(p, params.user_levels, samples, name=name), params
    raise ModelError(
        f"{name}: the model needs multiplicative depth {need} on CKKS ({', '.join(_levels(p))}) and "
        f"{presets.name_of(params) or 'these parameters'} has {params.user_levels} levels: use a preset with that "
        f"depth, or a bootstrappable one ({', '.join(presets.BOOTSTRAP)}; params=None picks N16_BOOT_L9 for a model "
        "this deep), where bootstraps are placed between layers; or lower the activations' degree (degree=7: 4 levels "
        "each), or compile with scheme='tfhe' (no depth limit: each activation is one lookup)")


def compile_plan(p: Plan, *, params=None, precision: float | None = None, name: str = "model", cache: bool = True):
    """The :class:`crossfhe.Circuit` of ``p``: one input ``CKKSVector(p.d)``; ``params`` as :func:`crossfhe.compile`
    (default: the smallest secure preset with the depth and ``precision``). A plan that bootstraps
    (:func:`fit_levels`) needs bootstrappable ``params``; its input's bound is declared as the next power of two
    at or above twice the largest value of the steps' (so that encrypt takes the inputs the model was calibrated
    on, and refuses values far beyond them)."""
    spec = CKKSVector(p.d)
    if p.bootstraps:
        if params is None or not params.bootstrap_levels:
            raise ModelError(f"{name}: the plan bootstraps; compile it on a bootstrappable preset "
                             f"({', '.join(presets.BOOTSTRAP)})")
        spec = CKKSVector(p.d, bound=p.input_bound)
    try:
        return compile_circuit(function(p), spec, params=params, precision=precision, name=name, cache=cache)
    except CircuitError as e:
        raise ModelError(f"{name}: {e}") from e


def _levels(p: Plan) -> list[str]:
    out, it = [], iter(p.approximations)
    for step in p.steps:
        if step[0] == "affine":
            out.append("dense 1")
        elif step[0] != "bootstrap":
            a = next(it)
            out.append(f"{a.kind} {a.levels}")
    return out


def depth(p: Plan) -> int:
    """The levels ``p`` uses: one per dense layer, each approximation's own (``Approximation.levels``); a bootstrap
    (:func:`place_bootstraps`) uses none and restores them."""
    it = iter(p.approximations)
    return sum(1 if step[0] == "affine" else next(it).levels for step in p.steps if step[0] != "bootstrap")
