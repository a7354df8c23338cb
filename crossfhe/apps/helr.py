"""HELR: logistic regression trained on encrypted data (Kim, Song, Kim, Lee, Cheon, "Logistic regression model
training based on the approximate homomorphic encryption", BMC Med. Genomics 2018), the workload of CROSS
(§6, HELR-1024) and Alchemist (§6.2.2): Nesterov's accelerated gradient descent over n samples of f
features, CKKS with bootstrapping when the levels run out.

**The model and the update.** Labels y_i in {-1, +1}, features x_i, z_i = y_i (1, x_i) (f = features + 1, the
first entry the intercept). Gradient ascent on the mean log-likelihood with Nesterov's momentum
(lambda_0 = 0, lambda_{t+1} = (1 + sqrt(1 + 4 lambda_t^2)) / 2, eta_t = (1 - lambda_t) / lambda_{t+1} <= 0):

    w_{t+1} = v_t + (gamma_t / n) sum_i sigma(-z_i . v_t) z_i
    v_{t+1} = (1 - eta_t) w_{t+1} + eta_t w_t,         w_0 = v_0 = 0,  gamma_t = rate / (t + 1),

with sigma replaced by HELR's least-squares cubic on [-8, 8], sigma_3(x) = 0.5 + a1 x + a3 x^3 (a1 = 1.20096 / 8,
a3 = -0.81562 / 8^3): what is encrypted computes exactly this recursion, up to the CKKS error.
:func:`train_plain` runs it in NumPy (``sigmoid="cubic"``: the same arithmetic; ``"exact"``: the logistic
function, the reference the accuracy is compared with).

**Layout** (:class:`Layout`). F = the power of two >= f; each ciphertext holds R = (N/2) / F samples, sample r
in slots [r F, r F + F) (zero-padded features), so n samples take C = ceil(n / R) ciphertexts Z_0 .. Z_{C-1}
(padding samples are zero and add nothing). Weights are *replicated*: the F-vector repeated in every row, which
is a sparse-slot CKKS message of F slots, so it bootstraps with F slots (:func:`crossfhe.ckks.bootstrap.config_for`).
Weights are kept divided by ``weight_bound`` B (w~ = w / B, |w~| <= 1 wanted: a bootstrapped message must stay
within [-1, 1]); the factor is folded into the cubic's coefficients and the step size, so it costs no level.

**One iteration** (v~ at level L; keys: rotations +-1 ... +-F/2 and F, 2F, ... N/4, plus the bootstrap's):

1. x_j = Z_j (.) v~  (C products, relinearized, 1 level), then log2 F rotations by 1, 2, ... F/2 summed: slot r F
   holds (z_r . v) / B.
2. The cubic on slot r F only, with the mask and the step folded into two plaintexts M1, M3 (zero off slot r F):
   h = M1 (.) x + (M3 (.) x) (.) x^2 (2 levels), then log2 F rotations by -1, ... -F/2 summed (every slot of row r),
   plus the constant: h_r = (gamma_t / (n B)) sigma_3(-z_r . v) in row r.
3. g = sum_j h (.) Z_j (C products, 1 level), then log2 R rotations by F, 2F, ... summed: g = (gamma_t / (n B))
   sum_i sigma_3(-z_i . v) z_i, replicated in every row.
4. w~_{t+1} = v~ + g; v~_{t+1} = (1 - eta_t) w~_{t+1} + eta_t w~_t (1 level): 5 levels from v~ (:data:`DEPTH`).
5. Bootstrap v~_{t+1} (F slots) when fewer than :data:`DEPTH` levels are left: with :data:`PARAMS` (5 user
   levels) after every iteration. w~ needs none: it is refreshed from v~ each iteration.

Steps 1-4 of an iteration run operation by operation, or with ``train(..., one_program=True)`` as one compiled
program (:class:`crossfhe.math.xla.Program`, the same words): the data, the weights, the keys and the iteration's
encoded constants (the masked coefficients and scalars that change with gamma_t and eta_t, encoded on the host
before the call) are its arguments; step 5 is :func:`crossfhe.ckks.bootstrap.bootstrap`.

Scales: every plaintext is encoded at the scale that brings its product back to the weights' scale
Delta_w exactly, so v~, w~ and g share Delta_w across iterations and bootstraps (no alignment level).

**Error.** The encrypted weights equal :func:`train_plain` (``sigmoid="cubic"``) up to the CKKS error: the
bootstrap's (about 2^-25 of the slot range at N 2^16 for random full-slot data; F-slot messages of 2F
coefficients are more concentrated, module docstring of :mod:`crossfhe.ckks.bootstrap`) and each iteration's
rescale and key-switch noise, propagated by the recursion (contracting for a small step; measured and asserted in
tests/test_helr.py). Accuracy: against the exact-sigmoid NumPy training, benchmarks/README.md ("Encrypted ML").

**Roles.** :func:`encrypt_data` is the data owner's (public key), :func:`train` the server's (only public
evaluation and bootstrapping keys: no secret), the decryption of the weights the data owner's again.
:class:`LogisticRegression` runs all three in one process for the fit/predict user.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field

import jax
import numpy as np

from crossfhe.ckks import bootstrap as boot
from crossfhe.ckks import encoder, ops
from crossfhe.ckks.ciphertext import Ciphertext, EvaluationKeys, Plaintext
from crossfhe.ckks.params import Params
from crossfhe.core import evaluator as ev
from crossfhe.core import rlwe
from crossfhe.errors import KeyMismatchError, ParameterError
from crossfhe.math.xla import Program
from crossfhe.progress import callback as progress_callback
from crossfhe.progress import report
from crossfhe.ring.poly import Domain, RNSPoly

A1 = 1.20096 / 8
A3 = -0.81562 / 8**3
"""HELR's cubic: sigma(x) ~ 0.5 + A1 x + A3 x^3 on [-8, 8] (least squares; max error 0.033 on the interval)."""

DEPTH = 5
"""Levels one iteration spends (steps 1-4 of the module docstring)."""

PARAMS = boot.bootstrappable_params(log_n=16, levels_left=DEPTH, log_scale=52, dnum=4)
"""HELR's chain: N 2^16, exactly :data:`DEPTH` levels after each bootstrap, scale 2^52 on two primes per level,
dnum 4 (log PQ ~1712 <= 1747: 128-bit for a uniform ternary secret), the bootstrap (message ratio, EvalMod and
CoeffToSlot primes) of
:data:`crossfhe.ckks.presets.N16_BOOT_L9` (CoeffToSlot 3, EvalMod 11, SlotToCoeff 3 levels)."""


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float64)))


def sigmoid_cubic(x):
    x = np.asarray(x, dtype=np.float64)
    return 0.5 + A1 * x + A3 * x**3


def nesterov(iterations: int) -> np.ndarray:
    """eta_0 .. eta_{iterations-1} of the module docstring: HELR's lambda_0 = 0 gives eta_0 = 1 (v_1 = w_0: the
    second step starts again from w_0 with half the step, a damped start), eta_1 = 0, then negative, tending to -1.
    (FISTA's lambda_0 = 1 skips that restart; on the digits at rate 3 it drove HELR's cubic out of [-8, 8] and
    diverged, benchmarks/README.md "Encrypted ML".)"""
    lam, out = 0.0, []
    for _ in range(iterations):
        nxt = (1 + math.sqrt(1 + 4 * lam * lam)) / 2
        out.append((1 - lam) / nxt)
        lam = nxt
    return np.asarray(out)


def step_sizes(iterations: int, rate: float) -> np.ndarray:
    """gamma_t = rate / (t + 1)."""
    return rate / (np.arange(iterations) + 1.0)


def design(x, y) -> np.ndarray:
    """z_i = y_i (1, x_i) with y in {0, 1} mapped to {-1, +1}: float64[n, features + 1]."""
    x, y = _check_xy(x, y)
    return np.hstack([np.ones((len(x), 1)), x]) * (2.0 * y - 1.0)[:, None]


def _check_xy(x, y=None):
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1:
        raise ParameterError(f"x must be a 2-D array [samples, features], got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ParameterError("x holds NaN or infinite values")
    if y is None:
        return x
    y = np.asarray(y)
    if y.shape != (len(x),):
        raise ParameterError(f"y must have one label per sample: x has {len(x)} samples, y has shape {y.shape}")
    labels = set(np.unique(y).tolist())
    if not labels <= {0, 1}:
        raise ParameterError(f"labels must be 0 or 1 (two classes), got {sorted(labels)[:5]}")
    return x, y.astype(np.float64)


def _recursion(z, iterations: int, rate: float, f):
    """Yields (w_{t+1}, v_{t+1}, z . v_t) for t = 0 .. iterations - 1."""
    z = np.asarray(z, dtype=np.float64)
    n = len(z)
    w = np.zeros(z.shape[1])
    v = w.copy()
    for gamma, eta in zip(step_sizes(iterations, rate), nesterov(iterations)):
        x = z @ v
        w1 = v + gamma / n * (f(-x) @ z)
        v, w = (1 - eta) * w1 + eta * w, w1
        yield w, v, x


def train_plain(z, iterations: int, rate: float, *, sigmoid_kind: str = "cubic") -> tuple[np.ndarray, np.ndarray]:
    """The recursion of the module docstring in float64: (w, v) after ``iterations`` steps, float64[f] each."""
    f = {"cubic": sigmoid_cubic, "exact": sigmoid}.get(sigmoid_kind)
    if f is None:
        raise ParameterError(f"sigmoid_kind is 'cubic' or 'exact', got {sigmoid_kind!r}")
    if int(iterations) < 1:
        raise ParameterError(f"iterations must be at least 1, got {iterations}")
    with np.errstate(over="ignore", invalid="ignore"):
        *_, (w, v, _) = _recursion(z, iterations, rate, f)
    return w, v


def plain_peaks(z, iterations: int, rate: float) -> tuple[float, float]:
    """(largest |w|, |v| entry; largest |z_i . v_t|) over the cubic recursion: what :class:`LogisticRegression`
    checks against ``weight_bound`` and the cubic's interval before encrypting anything (inf if it overflows)."""
    peak_w = peak_x = 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        for w, v, x in _recursion(z, iterations, rate, sigmoid_cubic):
            peak_w = max(peak_w, float(np.abs(w).max()), float(np.abs(v).max()))
            peak_x = max(peak_x, float(np.abs(x).max()))
            if not (math.isfinite(peak_w) and math.isfinite(peak_x)) or peak_x > 1e6:
                return math.inf, math.inf
    return peak_w, peak_x


INTERVAL_SLACK = 2.0
"""fit refuses a run whose inner products z . v pass INTERVAL_SLACK x 8 (the cubic then no longer tracks the sigmoid:
its x^3 term flips the gradient's sign and the recursion blows up)."""


# --------------------------------------------------------------------------------------------------
# Layout
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """``samples`` rows of ``features`` values (intercept included) in ciphertexts of ``slots`` slots: F = ``width``
    (power of two >= features) slots per sample, ``rows`` = slots / F samples per ciphertext, ``count`` ciphertexts."""

    samples: int
    features: int
    slots: int

    def __post_init__(self):
        if self.features > self.slots:
            raise ParameterError(f"{self.features} features (intercept included) do not fit {self.slots} slots")
        if self.samples < 1:
            raise ParameterError("at least one sample is needed")

    @property
    def width(self) -> int:
        return 1 << (self.features - 1).bit_length()

    @property
    def rows(self) -> int:
        return self.slots // self.width

    @property
    def count(self) -> int:
        return -(-self.samples // self.rows)

    def pack(self, z) -> np.ndarray:
        """float64[count, slots]: sample r of ciphertext j in slots [r F, r F + f) (zeros elsewhere)."""
        z = np.asarray(z, dtype=np.float64)
        if z.shape != (self.samples, self.features):
            raise ParameterError(f"expected [{self.samples}, {self.features}] rows, got {z.shape}")
        out = np.zeros((self.count * self.rows, self.width))
        out[: self.samples, : self.features] = z
        return out.reshape(self.count, self.slots)

    def replicate(self, w) -> np.ndarray:
        """float64[slots]: the f-vector zero-padded to F and repeated in every row."""
        w = np.asarray(w, dtype=np.float64)
        if w.shape != (self.features,):
            raise ParameterError(f"expected {self.features} weights, got shape {w.shape}")
        row = np.zeros(self.width)
        row[: self.features] = w
        return np.tile(row, self.rows)

    def weights(self, slots) -> np.ndarray:
        """The f weights back from a decoded replicated vector: the mean over the rows (each row holds a copy)."""
        s = np.real(np.asarray(slots))[: self.slots].reshape(self.rows, self.width)
        return s.mean(axis=0)[: self.features]

    def rotations(self) -> tuple[int, ...]:
        """The rotations one iteration uses (steps 1-3 of the module docstring)."""
        f = self.width
        inner = [1 << k for k in range(f.bit_length() - 1)]
        rows = [f << k for k in range(self.rows.bit_length() - 1)]
        return tuple(sorted(set(inner) | {-k for k in inner} | set(rows)))


# --------------------------------------------------------------------------------------------------
# The encrypted training
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class EncryptedData:
    """The data owner's upload: ``z`` (C ciphertexts of :class:`Layout`), the layout. No secret inside."""

    z: tuple[Ciphertext, ...]
    layout: Layout

    @property
    def params(self) -> Params:
        return self.z[0].params

    @property
    def key_id(self) -> str | None:
        return self.z[0].key_id


def encrypt_data(key_material, params: Params, x, y) -> EncryptedData:
    """Encrypt the design matrix of (x, y) (:func:`design`) in the layout of :class:`Layout`, at the top user level.
    ``key_material``: a PublicKey or EvaluationKeys (or the SecretKey: symmetric encryption)."""
    z = design(x, y)
    layout = Layout(len(z), z.shape[1], params.slots)
    cts = tuple(ops.encrypt(key_material, ops.encode(params, row)) for row in layout.pack(z))
    return EncryptedData(cts, layout)


def encrypt_weights(key_material, params: Params, layout: Layout, w, *, weight_bound: float) -> Ciphertext:
    """The replicated w / B (initial weights of :func:`train`; zeros by default there)."""
    return ops.encrypt(key_material, ops.encode(params, layout.replicate(np.asarray(w) / weight_bound)))


def bootstrap_config(params: Params, layout: Layout) -> boot.Config:
    """The bootstrap of the weights: F slots (the replicated vector is an F-slot message)."""
    return boot.config_for(params, slots=layout.width)


def required_rotations(layout: Layout) -> tuple[int, ...]:
    return layout.rotations()


@dataclass
class Stats:
    """Where the time of :func:`train` went (seconds, summed over iterations: "iteration" the iterations' programs,
    "bootstrap" the bootstraps, each waited on) and the counts."""

    iterations: int = 0
    bootstraps: int = 0
    seconds: dict = field(default_factory=lambda: {"iteration": 0.0, "bootstrap": 0.0})

    @property
    def ms_per_iteration(self) -> float:
        return 1e3 * sum(self.seconds.values()) / max(1, self.iterations)


def _rotate_sum(ct: Ciphertext, steps, keys: EvaluationKeys) -> Ciphertext:
    for k in steps:
        ct = ops.add(ct, ops.rotate(ct, k, keys))
    return ct


def _mask(layout: Layout, value: float) -> np.ndarray:
    m = np.zeros(layout.slots)
    m[:: layout.width] = value
    return m


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False)
class _Constants:
    """The encoded constants of one iteration (they change with gamma_t and eta_t, so they are arguments of its
    program, never constants in it): ``m3``, ``m1`` the masked cubic and linear coefficients (module docstring,
    step 2), ``half`` the words [limbs, 1] of c / 2 at h's scale, ``keep`` and ``momentum`` the (words, Shoup
    companions) of round((1 - eta) q) and round(eta q) (step 4; ``momentum`` None in the first iteration). Static:
    the layout and h's scale (checked while tracing)."""

    m3: Plaintext
    m1: Plaintext
    half: jax.Array
    keep: tuple
    momentum: tuple | None
    layout: Layout = field(metadata={"static": True})
    h_scale: float = field(metadata={"static": True})


def _metadata(params: Params, level: int, scale: float) -> Ciphertext:
    """A ciphertext without words at ``level`` and ``scale``: what the checks of scalar products read."""
    basis = params.moduli_at(level)
    return Ciphertext(RNSPoly(None, basis, Domain.EVAL), RNSPoly(None, basis, Domain.EVAL), params, scale)


def _scalar_words(params: Params, level: int, scale: float, c: float) -> tuple:
    """The words of ``ops.mul_scalar`` by a real c at ``level`` (round(c q), q the level's primes), after its
    checks."""
    q = math.prod(params.rescale_primes(level))
    ops._check_scalar_product(_metadata(params, level, scale), c, q, "mul_scalar")
    encoder.encode_scalar_constant(c, moduli=params.moduli_at(level), scale=q, margin=rlwe.fresh_noise_bound(params.n),
                                   what="mul_scalar")
    return ev.integer_words(round(c * q), params.moduli_at(level))


def _constants(data: EncryptedData, v: Ciphertext, w: Ciphertext | None, gamma: float, eta: float,
               bound: float) -> _Constants:
    """The host part of one iteration: its constants encoded at the levels and scales steps 1-4 reach from v~ (the
    same float operations as the steps, in the same order, so the words are those of an iteration run operation by
    operation)."""
    lay, params = data.layout, v.params
    q = lambda level: math.prod(params.rescale_primes(level))  # noqa: E731
    c = gamma / (lay.samples * bound)
    z_scale = data.z[0].scale
    level = v.level - 1  # x's
    x_scale = z_scale * v.scale / q(v.level)
    q1, q2, q_g = q(level), q(level - 1), q(level - 2)
    s_h = v.scale * q_g / z_scale
    x2_scale = x_scale * x_scale / q1
    s3 = s_h * q2 * q1 / (x_scale * x2_scale)
    m3 = ops.encode(params, _mask(lay, -c * A3 * bound**3), level=level, scale=s3)
    m1 = ops.encode(params, _mask(lay, -c * A1 * bound), level=level, scale=s_h * q1 / x_scale)
    h_scale = x_scale * s3 / q1 * x2_scale / q2
    half = encoder.encode_scalar_constant(c * 0.5, moduli=params.moduli_at(level - 2), scale=h_scale,
                                          margin=rlwe.fresh_noise_bound(params.n), what="add_scalar")
    keep = _scalar_words(params, level - 3, v.scale, 1.0 - eta)
    momentum = None if w is None else _scalar_words(params, level - 3, w.scale, eta)
    return _Constants(m3, m1, ops._constant_words(tuple(int(x) for x in half)), keep, momentum, lay, h_scale)


def _iteration_steps(z: tuple, v: Ciphertext, w: Ciphertext | None, k: _Constants,
                     keys: EvaluationKeys) -> tuple[Ciphertext, Ciphertext]:
    """Steps 1-4 (traceable): (w~_{t+1}, v~_{t+1}) from v~_t, w~_t (None: zero, the first iteration), the data's
    ciphertexts ``z`` and the iteration's constants ``k`` (:func:`_constants`). With eta_t = 0 the momentum term is
    a product by zero, whose rescale is zero: the words of leaving it out."""
    lay = k.layout
    f = lay.width
    inner = [1 << j for j in range(f.bit_length() - 1)]
    # 1. x = Z (.) v, summed over each row's F slots (the C ciphertexts hold different samples: kept apart)
    xs = [ops.mul_rescale(ops.drop_level(zj, v.level), v, keys) for zj in z]
    hs = []
    for x in xs:
        x = _rotate_sum(x, inner, keys)
        # 2. h = c (sigma_3(-B x) - 0.5) on slot r F = (-c A1 B) x + (-c A3 B^3) x^3, at the scale s_h that makes
        # g = rescale(h (.) Z) come out at the weights' scale: s_h s_z / q_g = Delta_w
        x2 = ops.mul_rescale(x, x, keys)  # scale s_x^2 / q1
        cubic = ops.mul_rescale(ops.rescale(ops.mul_plain(x, k.m3)), x2, keys)
        h = ops.add(cubic, ops.drop_level(ops.rescale(ops.mul_plain(x, k.m1)), cubic.level))
        h = _rotate_sum(h, [-j for j in inner], keys)
        if h.scale != k.h_scale:
            raise ParameterError(f"internal: h at scale {h.scale!r}, its constant encoded at {k.h_scale!r}")
        hs.append(ops._like(h, *ev.add_constant(h.c0, h.c1, k.half)))
    # 3. g = sum_j h_j (.) Z_j, summed over the rows
    g = None
    for h, zj in zip(hs, z):
        p = ops.mul(h, ops.drop_level(zj, h.level), keys)
        g = p if g is None else ops.add(g, p)
    g = ops.rescale(g)
    g = _rotate_sum(g, [f << j for j in range(lay.rows.bit_length() - 1)], keys)
    # 4. the update
    w_new = ops.add(ops.drop_level(v, g.level), g)
    q = math.prod(v.params.rescale_primes(w_new.level))
    v_new = ops.rescale(ops._like(w_new, *ev.mul_integer(w_new.c0, w_new.c1, *k.keep), w_new.scale * q))
    if w is not None:
        wd = ops.drop_level(w, w_new.level)
        v_new = ops.add(v_new, ops.rescale(ops._like(wd, *ev.mul_integer(wd.c0, wd.c1, *k.momentum), wd.scale * q)))
    return w_new, v_new


_ITERATION = Program(_iteration_steps, name="helr_iteration", materialize=True)


def _iteration_program(z: tuple, v: Ciphertext, w: Ciphertext | None, k: _Constants,
                       keys: EvaluationKeys) -> tuple[Ciphertext, Ciphertext]:
    """:func:`_iteration_steps` as one compiled executable: the data, the weights, the iteration's constants and the
    keys are its arguments. The key pair's identifier is left out of its argument structure (and put back on the
    results), so a training has two programs, the first iteration's (without w~) and the others', as long as the
    weights' scale stays the same (it does with a power-of-two scale), whatever the keys."""
    key_id = v.key_id
    anon = lambda c: None if c is None else dataclasses.replace(c, key_id=None)  # noqa: E731
    keys = dataclasses.replace(keys, public=dataclasses.replace(keys.public, key_id=None))
    w_new, v_new = _ITERATION(tuple(anon(c) for c in z), anon(v), anon(w), k, keys)
    return dataclasses.replace(w_new, key_id=key_id), dataclasses.replace(v_new, key_id=key_id)


def _iteration(data: EncryptedData, v: Ciphertext, w: Ciphertext | None, gamma: float, eta: float, bound: float,
               keys: EvaluationKeys, step=_iteration_steps) -> tuple[Ciphertext, Ciphertext]:
    """Steps 1-4: (w~_{t+1}, v~_{t+1}) from v~_t, w~_t (None: zero, the first iteration), through ``step``
    (:func:`_iteration_steps`, each operation its own program; :func:`_iteration_program`, one executable: the same
    words)."""
    return step(data.z, v, w, _constants(data, v, w, gamma, eta, bound), keys)


def train(data: EncryptedData, keys: boot.Keys, *, iterations: int = 32, rate: float = 3.0,
          weight_bound: float = 2.0, v0: Ciphertext | None = None, progress=None,
          stats: Stats | None = None, one_program: bool = False) -> Ciphertext:
    """The server's part: ``iterations`` of the module docstring's recursion on encrypted data, bootstrapping the
    weights when fewer than :data:`DEPTH` levels are left. Returns the encrypted w~ = w / ``weight_bound``
    (replicated; :meth:`Layout.weights` of its decryption, times the bound, is w). ``keys``: bootstrapping keys
    made with :func:`bootstrap_config` whose evaluation keys hold :func:`required_rotations`. ``v0``: encrypted
    initial weights (:func:`encrypt_weights`; default zeros, encrypted under the data's key by its public key).
    ``progress``: :mod:`crossfhe.progress` (one step per iteration). ``one_program``: steps 1-4 of each iteration
    as one compiled executable (two programs in a training, the first iteration's and the others'), else operation
    by operation: the same words; on XLA:CPU the program takes longer to compile (benchmarks/README.md, "Workloads
    as one program, without recomputation")."""
    if not isinstance(data, EncryptedData):
        raise TypeError(f"train takes EncryptedData (crossfhe.apps.helr.encrypt_data), got {type(data).__name__}")
    if not isinstance(keys, boot.Keys):
        raise TypeError(f"train takes bootstrapping keys (crossfhe.ckks.bootstrap.Keys), got {type(keys).__name__}")
    if iterations < 1:
        raise ParameterError(f"iterations must be at least 1, got {iterations}")
    if not weight_bound > 0 or not rate > 0:
        raise ParameterError(f"rate and weight_bound must be positive, got {rate} and {weight_bound}")
    params = keys.params
    ops._same_params(data.params, params, "train")
    if data.key_id != keys.key_id:
        raise KeyMismatchError("the data and the bootstrapping keys come from different secret keys")
    if keys.config.slots != data.layout.width:
        raise ParameterError(f"the bootstrapping keys are for {keys.config.slots} slots; this layout bootstraps "
                             f"{data.layout.width} (make them with helr.bootstrap_config)")
    if params.user_levels < DEPTH:
        raise ParameterError(f"one iteration needs {DEPTH} levels; these parameters leave {params.user_levels} after "
                             "a bootstrap (use crossfhe.apps.helr.PARAMS)")
    ev_keys = keys.evaluation
    missing = [k for k in data.layout.rotations()
               if ops.rotation_element(params, k) not in ev_keys.galois]
    if missing:
        raise KeyMismatchError(f"the evaluation keys lack rotations {missing} (helr.required_rotations)")
    progress = progress_callback(progress)
    stats = Stats() if stats is None else stats
    v = v0
    if v is None:
        v = ops.encrypt(ev_keys, ops.encode(params, np.zeros(params.slots)))
    elif v.key_id != keys.key_id:
        raise KeyMismatchError("v0 is encrypted under another key")
    step = _iteration_program if one_program else _iteration_steps
    return _train(data, keys, v, iterations, rate, weight_bound, progress, stats, step)


def _train(data: EncryptedData, keys: boot.Keys, v: Ciphertext, iterations: int, rate: float, bound: float, progress,
           stats: Stats, step) -> Ciphertext:
    """The loop of :func:`train` (checked arguments), each iteration through ``step`` (:func:`_iteration`)."""
    w = None
    for t, (gamma, eta) in enumerate(zip(step_sizes(iterations, rate), nesterov(iterations))):
        if v.level < DEPTH:
            t0 = time.perf_counter()
            v = jax.block_until_ready(boot.bootstrap(v, keys))
            stats.seconds["bootstrap"] += time.perf_counter() - t0
            stats.bootstraps += 1
        t0 = time.perf_counter()
        w, v = jax.block_until_ready(_iteration(data, v, w, float(gamma), float(eta), bound, keys.evaluation, step))
        stats.seconds["iteration"] += time.perf_counter() - t0
        stats.iterations += 1
        report(progress, t + 1, iterations, "HELR iterations")
    return w


# --------------------------------------------------------------------------------------------------
# The fit / predict user's entry point
# --------------------------------------------------------------------------------------------------


class LogisticRegression:
    """Binary logistic regression trained on encrypted data (HELR), scikit-learn style.

        model = LogisticRegression(iterations=32).fit(x_train, y_train)   # x in [-1, 1], y in {0, 1}
        model.predict(x_test)                                             # int64 labels
        model.coef_, model.intercept_, model.stats_.ms_per_iteration

    :meth:`fit` plays all three roles in one process: it makes a fresh secret key and the evaluation and
    bootstrapping keys, encrypts (x, y), trains on the ciphertexts only (:func:`train`), and decrypts the weights.
    The parameters are chosen for the user: :data:`PARAMS` (128-bit, the depth of one iteration after each
    bootstrap) unless ``params`` names another bootstrappable set with at least :data:`DEPTH` user levels (tests
    pass small insecure ones). ``rate``: gamma_t = rate / (t + 1); ``weight_bound``: B of the module docstring
    (weights beyond +-B would leave the bootstrap's range; :meth:`fit` checks the plaintext recursion's weights
    and raises before any key is made if they would). ``progress``: :mod:`crossfhe.progress` (``"auto"``: bars
    after 2 s). ``fit_plain`` trains the same model in NumPy (exact sigmoid or the cubic) for comparison.

    Features must lie in [-1, 1] (scale them first: the cubic sigmoid is fitted on [-8, 8] and the encrypted
    inner products must stay near it)."""

    def __init__(self, *, iterations: int = 32, rate: float = 3.0, weight_bound: float = 2.0,
                 params: Params | None = None, progress="auto", seed: bytes | None = None):
        if int(iterations) < 1:
            raise ParameterError(f"iterations must be at least 1, got {iterations}")
        if not rate > 0 or not weight_bound > 0:
            raise ParameterError(f"rate and weight_bound must be positive, got {rate} and {weight_bound}")
        self.iterations, self.rate, self.weight_bound = int(iterations), float(rate), float(weight_bound)
        self.params = PARAMS if params is None else params
        if not isinstance(self.params, Params) or self.params.user_levels < DEPTH or not self.params.bootstrap_levels:
            raise ParameterError(f"params must be a bootstrappable CKKS set with at least {DEPTH} user levels "
                                 "(crossfhe.apps.helr.PARAMS)")
        self.progress, self.seed = progress, seed
        self.coef_: np.ndarray | None = None
        self.intercept_: float | None = None
        self.stats_: Stats | None = None
        self.timings_: dict = {}

    def __repr__(self) -> str:
        state = "fitted" if self.coef_ is not None else "not fitted"
        return (f"LogisticRegression(iterations={self.iterations}, rate={self.rate}, N={self.params.n}, {state})")

    @staticmethod
    def _features(x) -> np.ndarray:
        x = _check_xy(x)
        if np.abs(x).max() > 1.0:
            raise ParameterError(f"features must lie in [-1, 1] (largest |x| is {np.abs(x).max():.3g}): scale them "
                                 "first, e.g. x / abs(x).max(axis=0)")
        return x

    def _check_fit(self, x, y):
        x = self._features(x)
        x, y = _check_xy(x, y)
        if x.shape[1] + 1 > self.params.slots:
            raise ParameterError(f"{x.shape[1]} features do not fit {self.params.slots} slots")
        return x, y

    def fit_plain(self, x, y, *, sigmoid_kind: str = "exact") -> LogisticRegression:
        """The same training in NumPy (no encryption): the reference for accuracy."""
        x, y = self._check_fit(x, y)
        w, _ = train_plain(design(x, y), self.iterations, self.rate, sigmoid_kind=sigmoid_kind)
        self.intercept_, self.coef_ = float(w[0]), w[1:].copy()
        return self

    def fit(self, x, y) -> LogisticRegression:
        x, y = self._check_fit(x, y)
        z = design(x, y)
        peak, inner = plain_peaks(z, self.iterations, self.rate)
        if inner > INTERVAL_SLACK * 8:
            raise ParameterError(f"the training diverges at rate = {self.rate}: the inner products reach "
                                 f"{inner:.3g}, far outside the cubic sigmoid's interval [-8, 8]; pass a smaller rate")
        if peak > self.weight_bound:
            raise ParameterError(f"the weights reach {peak:.3g} during training, beyond weight_bound = "
                                 f"{self.weight_bound}: pass weight_bound >= {math.ceil(peak * 1.25)} (or a smaller "
                                 "rate)")
        params = self.params
        layout = Layout(len(z), z.shape[1], params.slots)
        timings = {}
        t0 = time.perf_counter()
        seed = self.seed
        sk, ek = ops.keygen(params, rotations=layout.rotations(), seed=seed, progress=self.progress)
        sub = None if seed is None else bytes(b ^ 0x5A for b in seed)
        keys = boot.keygen(sk, ek, bootstrap_config(params, layout), seed=sub, progress=self.progress)
        t1 = time.perf_counter()
        data = encrypt_data(ek, params, x, y)
        t2 = time.perf_counter()
        stats = Stats()
        w = train(data, keys, iterations=self.iterations, rate=self.rate, weight_bound=self.weight_bound,
                  progress=self.progress, stats=stats)
        t3 = time.perf_counter()
        weights = layout.weights(ops.decode(ops.decrypt(sk, w))) * self.weight_bound
        timings.update(keygen=t1 - t0, encrypt=t2 - t1, train=t3 - t2, decrypt=time.perf_counter() - t3)
        self.intercept_, self.coef_ = float(weights[0]), weights[1:].copy()
        self.stats_, self.timings_ = stats, timings
        return self

    def decision_function(self, x) -> np.ndarray:
        if self.coef_ is None:
            raise ParameterError("the model is not fitted: call fit (or fit_plain) first")
        x = _check_xy(x)
        if x.shape[1] != len(self.coef_):
            raise ParameterError(f"the model has {len(self.coef_)} features, x has {x.shape[1]}")
        return x @ self.coef_ + self.intercept_

    def predict_proba(self, x) -> np.ndarray:
        """P(y = 1) per sample (the exact logistic function of the learned weights)."""
        return sigmoid(self.decision_function(x))

    def predict(self, x) -> np.ndarray:
        return (self.decision_function(x) > 0).astype(np.int64)

    def score(self, x, y) -> float:
        """Accuracy on (x, y)."""
        x, y = _check_xy(x, y)
        return float((self.predict(x) == y).mean())


__all__ = ["A1", "A3", "DEPTH", "INTERVAL_SLACK", "PARAMS", "EncryptedData", "Layout", "LogisticRegression", "Stats",
           "bootstrap_config", "design", "encrypt_data", "encrypt_weights", "nesterov", "plain_peaks",
           "required_rotations", "sigmoid", "sigmoid_cubic", "step_sizes", "train", "train_plain"]
