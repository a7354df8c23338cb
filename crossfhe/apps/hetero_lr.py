"""Vertically partitioned logistic regression with HMVP gradients (CHAM §V-B3, FATE's HeteroLR).

Parties: A (:class:`FeatureHolder`) holds features X_A (n x d_A); B (:class:`LabelHolder`) holds features
X_B (n x d_B) on the same n samples and the labels y in {-1, 1}; the arbiter C (:class:`Arbiter`) holds
the BFV secret key and publishes the public key with the packing Galois keys. Each data holder keeps its
own weights w_A, w_B (float64).

**Loss and gradient** (FATE, second-order Taylor expansion of log(1 + e^-z) at 0): with u = X_A w_A + X_B w_B,
loss ~ log 2 - y u / 2 + u^2 / 8, whose gradient is g = X^T d / n with the residual d = u / 4 - y / 2.

**Fixed point** (:class:`FixedPoint`, scales are powers of two so everything stays integral):
X_int = round(X 2^fx), u_int = round(u_P 2^fu) for each party's margin u_P = X_P w_P, and

    d_int = u_A,int + u_B,int - y 2^(fu + 1)   (= 4 d 2^fu: d at scale 2^(fu + 2), no division needed)
    g_int = X_int^T d_int                        (= n g at scale S = 2^(fx + fu + 2)).

Signed values travel mod t (negatives as t - |x|) and are centered after decryption. No value wraps as long
as n x_max (2 u_max + 2^(fu + 1)) <= (t - 1) / 2, x_max = round(x_bound 2^fx), u_max = round(u_bound 2^fu)
(:meth:`FixedPoint.check`, enforced when the parties are built; each party checks its own |X| <= x_bound
and |u_P| <= u_bound at every step). Then the protocol's g_int equals :func:`fixed_point_gradients` exactly
and, with g = g_int / (n S),

    |g - g_float| <= 2^-(fx+1) (d_max + 2^-(fu+2)) + x_bound 2^-(fu+2),   d_max = u_bound / 2 + 1 / 2

entry-wise (:meth:`FixedPoint.error_bound`: |X_int / 2^fx - X| <= 2^-(fx+1) and
|d_int / 2^(fu+2) - d| <= 2^-(fu+2)); a step w <- w - lr g moves the weights at most lr times that far from
the float step.

**One step** (:func:`train_step`):

1. A computes u_A,int and sends Enc_C(u_A,int) (a coefficient-encoded HMVP vector under C's public key) to B.
2. B adds u_B,int - y 2^(fu+1) as a plaintext (:func:`crossfhe.apps.beaver.add_plain_vector`, no fresh
   noise) and sends Enc_C(d_int) to A.
3. A and B each compute Enc_C(g_P,int) = HMVP(X_P,int^T, Enc_C(d_int)), add a mask rho_P uniform in
   Z_t^(d_P) (ChaCha20), re-randomize with a fresh encryption of zero and send it to C.
4. C decrypts g_P,int + rho_P and returns it to P; P removes rho_P, centers, and updates w_P.

**Security** (semi-honest, no collusion between C and a data holder, as in FATE):

* A and B only see ciphertexts under C's key; C only sees values masked by uniform rho_P.
* **No noise flooding**: the noise C sees when it decrypts depends on the HMVP's matrix X_P,int^T and on
  d, so it may leak information about them to C (see :mod:`crossfhe.apps.beaver` for what flooding
  needs). Re-randomization only hides how the ciphertext was computed, not its noise.
* Inherent to the FATE protocol, not to the encryption: each data holder learns its own gradient
  X_P^T d / n in the clear, which over several steps reveals information about d, hence about the other
  party's margins and the labels.

**Parameters.** BFV on 32-bit words needs t < every prime of Q ∪ P, so a t near 2^30 means 31-bit primes.
With the default :class:`FixedPoint` (fx = fu = 8, |X| <= 1, |u_P| <= 4) a step takes at most 819 samples
for t = 2^30 - 35 (n 2^8 (2 2^10 + 2^9) <= (t - 1) / 2; :meth:`FixedPoint.max_samples`), and the gradient
error bound is 2^-9 (2.5 + 2^-10) + 2^-10 < 0.0059 (measured: below 1e-4 on uniform features).

* :data:`LR_N4096` (CHAM's N): Q two 31-bit primes, P one, log2 PQ = 93 <= 109 (128-bit). Noise budget
  measured after a step (n = 800, d_A = d_B = 16, C's secret key): 11 to 12 bits of log2(Q / t) = 32. The
  worst-case bound of the packing alone, (N - 1) B_ks = 2^30.4 (:func:`crossfhe.convert.packing.pack_noise_bound`),
  would leave under a bit: correctness rests on the measured (square-root) behaviour of the noise.
* :data:`LR_N8192`: Q four 31-bit primes, P two, log2 PQ = 186 <= 218. Measured budget 72 bits after a
  step (same data); the worst-case packing bound 2^33.4 leaves 59 bits: room for 40-bit noise flooding
  (F = 2^40 2^33.4 would leave about 19 bits), which this module does not apply.

The mask rho is added as round(Q rho / t) (:func:`crossfhe.apps.beaver.add_plain_result`, through
``bfv.ops.add_plain``): adding floor(Q / t) rho instead costs up to t^2 / Q of invariant noise, which at
t ~ 2^30, Q ~ 2^62 took the budget of LR_N4096 from 11 bits to 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from crossfhe.apps.beaver import add_plain_result, add_plain_vector, child_seed, rerandomize_result, uniform_vector
from crossfhe.bfv import ops as bfv
from crossfhe.bfv.ciphertext import EvaluationKeys
from crossfhe.bfv.params import Params, ParamsLiteral
from crossfhe.errors import ParameterError
from crossfhe.linalg import hmvp
from crossfhe.linalg.hmvp import CoefficientVector, HMVPResult
from crossfhe.math import random as crandom

LR_N4096 = Params.from_literal(ParamsLiteral(log_n=12, q_bits=(31, 31), p_bits=(31,), plain_modulus=2**30 - 35, dnum=2))
"""N 4096, two 31-bit ciphertext primes, one 31-bit special prime (dnum 2), t = 2^30 - 35 (prime, < every
ciphertext prime as BFV on 32-bit words requires). log2 PQ = 93 <= 109 (128-bit, HomomorphicEncryption.org).
Noise budget: module docstring."""


LR_N8192 = Params.from_literal(
    ParamsLiteral(log_n=13, q_bits=(31,) * 4, p_bits=(31, 31), plain_modulus=2**30 - 35, dnum=2)
)
"""N 8192, four 31-bit ciphertext primes, two 31-bit special primes (dnum 2), t = 2^30 - 35. log2 PQ = 186
<= 218 (128-bit). Noise budget: module docstring."""

# --------------------------------------------------------------------------------------------------
# Fixed point
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FixedPoint:
    """Fixed-point scales and the public bounds that keep HeteroLR's integers from wrapping mod t.

    frac_bits_x: fx, X_int = round(X 2^fx). frac_bits_u: fu, u_int = round(u_P 2^fu) per party.
    x_bound: |X| entries are at most this (features normalized). u_bound: each party's margin |X_P w_P|
    is at most this. Bounds and error: module docstring.
    """

    frac_bits_x: int = 8
    frac_bits_u: int = 8
    x_bound: float = 1.0
    u_bound: float = 4.0

    def __post_init__(self):
        for name in ("frac_bits_x", "frac_bits_u"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 24:
                raise ParameterError(f"{name} must be an int in [0, 24], got {v!r}")
        for name in ("x_bound", "u_bound"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ParameterError(f"{name} must be a positive finite number, got {v!r}")

    @property
    def x_max(self) -> int:
        """The largest |X_int|."""
        return math.floor(self.x_bound * 2**self.frac_bits_x + 0.5)

    @property
    def u_max(self) -> int:
        """The largest |u_P,int|."""
        return math.floor(self.u_bound * 2**self.frac_bits_u + 0.5)

    @property
    def residual_max(self) -> int:
        """The largest |d_int| = |u_A,int + u_B,int - y 2^(fu+1)|."""
        return 2 * self.u_max + 2 ** (self.frac_bits_u + 1)

    @property
    def gradient_scale(self) -> int:
        """S = 2^(fx + fu + 2): g = g_int / (n S)."""
        return 2 ** (self.frac_bits_x + self.frac_bits_u + 2)

    def gradient_max(self, n_samples: int) -> int:
        """The largest |g_int| = |X_int^T d_int| for n samples."""
        return int(n_samples) * self.x_max * self.residual_max

    def max_samples(self, t: int) -> int:
        """The most samples per step for which nothing wraps mod t."""
        return ((t - 1) // 2) // (self.x_max * self.residual_max)

    def error_bound(self) -> float:
        """Entry-wise bound on |g - g_float| (module docstring)."""
        d_max = self.u_bound / 2 + 0.5
        fx, fu = self.frac_bits_x, self.frac_bits_u
        return 2.0 ** -(fx + 1) * (d_max + 2.0 ** -(fu + 2)) + self.x_bound * 2.0 ** -(fu + 2)

    def check(self, t: int, n_samples: int) -> None:
        """ParameterError unless n_samples x_max residual_max <= (t - 1) / 2 (no value wraps mod t)."""
        if self.gradient_max(n_samples) > (t - 1) // 2:
            raise ParameterError(
                f"fixed point: |g_int| may reach {self.gradient_max(n_samples)} > (t - 1) / 2 = {(t - 1) // 2} with "
                f"{n_samples} samples; use at most {self.max_samples(t)} samples per step, fewer fractional bits, "
                "or a larger t"
            )


def quantize(x, frac_bits: int) -> np.ndarray:
    """round(x 2^frac_bits) as int64 (round half to even)."""
    return np.rint(np.asarray(x, dtype=np.float64) * 2.0**frac_bits).astype(np.int64)


def to_mod(x, t: int) -> np.ndarray:
    """Signed integers -> [0, t) (int64)."""
    return np.mod(np.asarray(x, dtype=np.int64), t)


def centered(x, t: int) -> np.ndarray:
    """[0, t) -> (-t/2, t/2] (int64)."""
    x = np.asarray(x, dtype=np.int64)
    return np.where(x > t // 2, x - t, x)


def _check_features(x, fp: FixedPoint, what: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or 0 in x.shape:
        raise ParameterError(f"{what}: features must be a non-empty n_samples x d matrix, got shape {x.shape}")
    if not np.all(np.isfinite(x)) or np.max(np.abs(x)) > fp.x_bound:
        raise ParameterError(f"{what}: features must be finite with |X| <= x_bound = {fp.x_bound}")
    return x


def _check_labels(y, n: int) -> np.ndarray:
    y = np.asarray(y)
    if y.shape != (n,):
        raise ParameterError(f"shape mismatch: {n} samples but labels of shape {y.shape}")
    if not np.all((y == 1) | (y == -1)):
        raise ParameterError("labels must be -1 or 1")
    return y.astype(np.int64)


def _check_weights(w, d: int, what: str) -> np.ndarray:
    w = np.zeros(d) if w is None else np.asarray(w, dtype=np.float64).copy()
    if w.shape != (d,):
        raise ParameterError(f"{what}: shape mismatch: {d} features but weights of shape {w.shape}")
    return w


def margin_int(x, w, fp: FixedPoint, what: str = "margin") -> np.ndarray:
    """u_int = round(X w 2^fu) (int64 [n]); ParameterError if |X w| > u_bound (the weights outgrew the fixed
    point: raise u_bound, which needs a larger t or fewer samples)."""
    u = np.asarray(x, dtype=np.float64) @ np.asarray(w, dtype=np.float64)
    if not np.all(np.isfinite(u)) or np.max(np.abs(u)) > fp.u_bound:
        raise ParameterError(f"{what}: |X w| = {np.max(np.abs(u)):.3g} exceeds u_bound = {fp.u_bound}")
    return quantize(u, fp.frac_bits_u)


# --------------------------------------------------------------------------------------------------
# Plaintext references
# --------------------------------------------------------------------------------------------------


def fixed_point_gradients(x_a, x_b, y, w_a, w_b, fp: FixedPoint) -> tuple[np.ndarray, np.ndarray]:
    """(g_A,int, g_B,int), int64 [d_A], [d_B]: the integer gradients of one step, in plaintext, with the same
    quantization as the protocol (module docstring)."""
    x_a, x_b = _check_features(x_a, fp, "x_a"), _check_features(x_b, fp, "x_b")
    if x_a.shape[0] != x_b.shape[0]:
        raise ParameterError(f"shape mismatch: x_a has {x_a.shape[0]} samples, x_b {x_b.shape[0]}")
    y = _check_labels(y, x_a.shape[0])
    d = margin_int(x_a, w_a, fp) + margin_int(x_b, w_b, fp) - y * 2 ** (fp.frac_bits_u + 1)
    return quantize(x_a, fp.frac_bits_x).T @ d, quantize(x_b, fp.frac_bits_x).T @ d


def float_gradients(x_a, x_b, y, w_a, w_b) -> tuple[np.ndarray, np.ndarray]:
    """(g_A, g_B) = X_P^T (u / 4 - y / 2) / n in float64, u = X_A w_A + X_B w_B."""
    x_a, x_b = np.asarray(x_a, dtype=np.float64), np.asarray(x_b, dtype=np.float64)
    d = 0.25 * (x_a @ np.asarray(w_a, dtype=np.float64) + x_b @ np.asarray(w_b, dtype=np.float64)) - 0.5 * np.asarray(y)
    n = x_a.shape[0]
    return x_a.T @ d / n, x_b.T @ d / n


def taylor_loss(x_a, x_b, y, w_a, w_b) -> float:
    """The Taylor-approximated loss log 2 - mean(y u) / 2 + mean(u^2) / 8 (float64)."""
    u = np.asarray(x_a, dtype=np.float64) @ np.asarray(w_a) + np.asarray(x_b, dtype=np.float64) @ np.asarray(w_b)
    y = np.asarray(y, dtype=np.float64)
    return float(math.log(2.0) - np.mean(y * u) / 2 + np.mean(u * u) / 8)


# --------------------------------------------------------------------------------------------------
# Parties
# --------------------------------------------------------------------------------------------------


class Arbiter:
    """Party C: holds the BFV secret key (private) and publishes :attr:`keys` (public key and HMVP's
    packing Galois keys). Sees only masked gradients. seed: 32 bytes, tests only."""

    def __init__(self, params: Params, *, seed: bytes | None = None):
        if not isinstance(params, Params):
            raise TypeError(f"Arbiter takes bfv.Params, got {type(params).__name__}")
        self.params = params
        rng = crandom.Rng(seed)
        self._sk, self.keys = bfv.keygen(
            params,
            galois_elements=hmvp.required_galois_elements(params),
            relin=False,
            seed=None if seed is None else child_seed(rng),
        )

    def decrypt(self, masked: HMVPResult) -> np.ndarray:
        """The masked gradient g_int + rho (int64 [d] in [0, t)), returned to the party that sent it."""
        return hmvp.decrypt_result(self._sk, masked)

    def noise_budget(self, masked: HMVPResult) -> int:
        """The smallest noise budget (bits) of a received result."""
        return hmvp.noise_budget(self._sk, masked)

    def __repr__(self) -> str:
        return f"hetero_lr.Arbiter({self.params!r})"


class _DataHolder:
    """Features X_P (float64, private), their fixed-point transpose encoded for HMVP, weights w_P, and the
    mask of the gradient in flight."""

    def __init__(self, features, keys: EvaluationKeys, fp: FixedPoint, weights, seed: bytes | None, what: str):
        if not isinstance(keys, EvaluationKeys):
            raise TypeError(f"{what} takes the arbiter's EvaluationKeys, got {type(keys).__name__}")
        if not isinstance(fp, FixedPoint):
            raise TypeError(f"{what} takes a FixedPoint, got {type(fp).__name__}")
        self.params = keys.params
        self.keys = keys
        self.fixed_point = fp
        self._x = _check_features(features, fp, what)
        fp.check(self.params.t, self._x.shape[0])
        self._xt = hmvp.encode_matrix(self.params, to_mod(quantize(self._x, fp.frac_bits_x).T, self.params.t))
        self.weights = _check_weights(weights, self._x.shape[1], what)
        self._rng = crandom.Rng(seed)
        self._mask = None
        self._what = what

    @property
    def n_samples(self) -> int:
        return self._x.shape[0]

    def _margin(self) -> np.ndarray:
        return margin_int(self._x, self.weights, self.fixed_point, f"{self._what} margin")

    def masked_gradient(self, residual: CoefficientVector) -> HMVPResult:
        """Enc_C(X_int^T d_int + rho) for Enc_C(d_int); rho uniform in Z_t^d is kept until :meth:`update`."""
        if not isinstance(residual, CoefficientVector):
            raise TypeError(f"masked_gradient takes a CoefficientVector, got {type(residual).__name__}")
        if residual.length != self.n_samples:
            raise ParameterError(
                f"{self._what}: shape mismatch: {self.n_samples} samples but a residual of {residual.length}"
            )
        grad = hmvp.hmvp(self._xt, residual, self.keys)
        self._mask = uniform_vector(self._rng, self._xt.shape[0], self.params.t)
        return rerandomize_result(add_plain_result(grad, self._mask), self.keys, key=self._rng.next_key())

    def update(self, masked, *, learning_rate: float) -> np.ndarray:
        """Remove the mask from the arbiter's decryption, center, and take w <- w - lr g_int / (n S).
        Returns g_int (int64 [d])."""
        if self._mask is None:
            raise ParameterError(f"{self._what}: no masked gradient in flight (call masked_gradient first)")
        masked = np.asarray(masked, dtype=np.int64)
        if masked.shape != self._mask.shape:
            raise ParameterError(
                f"{self._what}: shape mismatch: {self._mask.shape} gradient entries, got {masked.shape}"
            )
        g_int = centered(np.mod(masked - self._mask, self.params.t), self.params.t)
        self._mask = None
        self.weights = self.weights - learning_rate * g_int / (self.n_samples * self.fixed_point.gradient_scale)
        return g_int


class FeatureHolder(_DataHolder):
    """Party A: features X_A (n x d_A, |X| <= x_bound) and weights w_A (default 0). Uses the arbiter's public
    ``keys``. seed: 32 bytes for reproducible masks and encryptions (tests only)."""

    def __init__(self, features, keys: EvaluationKeys, fp: FixedPoint = FixedPoint(), *, weights=None, seed=None):
        super().__init__(features, keys, fp, weights, seed, "FeatureHolder")

    def encrypted_margin(self) -> CoefficientVector:
        """Enc_C(u_A,int mod t), the message to B."""
        return hmvp.encrypt_vector(
            self.keys, self.params, to_mod(self._margin(), self.params.t), key=self._rng.next_key()
        )

    def __repr__(self) -> str:
        return f"hetero_lr.FeatureHolder(n={self.n_samples}, d={self.weights.size})"


class LabelHolder(_DataHolder):
    """Party B: features X_B (n x d_B), labels y in {-1, 1} (n), weights w_B (default 0). Uses the arbiter's
    public ``keys``. seed: 32 bytes (tests only)."""

    def __init__(
        self, features, labels, keys: EvaluationKeys, fp: FixedPoint = FixedPoint(), *, weights=None, seed=None
    ):
        super().__init__(features, keys, fp, weights, seed, "LabelHolder")
        self._y = _check_labels(labels, self.n_samples)

    def residual(self, margin_a: CoefficientVector) -> CoefficientVector:
        """Enc_C(d_int) = Enc_C(u_A,int) + (u_B,int - y 2^(fu+1)) mod t, the message to A."""
        if not isinstance(margin_a, CoefficientVector):
            raise TypeError(f"residual takes a CoefficientVector, got {type(margin_a).__name__}")
        if margin_a.length != self.n_samples:
            raise ParameterError(
                f"LabelHolder: shape mismatch: {self.n_samples} samples but a margin of {margin_a.length}"
            )
        own = self._margin() - self._y * 2 ** (self.fixed_point.frac_bits_u + 1)
        return add_plain_vector(margin_a, to_mod(own, self.params.t))

    def __repr__(self) -> str:
        return f"hetero_lr.LabelHolder(n={self.n_samples}, d={self.weights.size})"


# --------------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepTranscript:
    """What one simulated step produced, for checks: A's and B's integer gradients (each known to its own
    party only) and the smallest noise budget C measured on the results it decrypted."""

    grad_a: np.ndarray
    grad_b: np.ndarray
    noise_budget: int


def train_step(a: FeatureHolder, b: LabelHolder, c: Arbiter, *, learning_rate: float) -> StepTranscript:
    """One HeteroLR step (module docstring, steps 1-4) with the three parties in this process; A's and B's
    weights are updated in place."""
    if not (a.params == b.params == c.params):
        raise ParameterError("train_step: the parties use different parameters")
    if a.n_samples != b.n_samples:
        raise ParameterError(f"train_step: shape mismatch: A has {a.n_samples} samples, B {b.n_samples}")
    if a.fixed_point != b.fixed_point:
        raise ParameterError("train_step: A and B use different fixed-point settings")
    residual = b.residual(a.encrypted_margin())
    masked_a, masked_b = a.masked_gradient(residual), b.masked_gradient(residual)
    budget = min(c.noise_budget(masked_a), c.noise_budget(masked_b))
    grad_a = a.update(c.decrypt(masked_a), learning_rate=learning_rate)
    grad_b = b.update(c.decrypt(masked_b), learning_rate=learning_rate)
    return StepTranscript(grad_a, grad_b, budget)


def reference_step(x_a, x_b, y, w_a, w_b, fp: FixedPoint, *, learning_rate: float):
    """The plaintext fixed-point step: (w_A', w_B', g_A,int, g_B,int), bit-for-bit what :func:`train_step`
    computes."""
    g_a, g_b = fixed_point_gradients(x_a, x_b, y, w_a, w_b, fp)
    scale = np.asarray(x_a).shape[0] * fp.gradient_scale
    return np.asarray(w_a) - learning_rate * g_a / scale, np.asarray(w_b) - learning_rate * g_b / scale, g_a, g_b


__all__ = [
    "LR_N4096",
    "LR_N8192",
    "Arbiter",
    "FeatureHolder",
    "FixedPoint",
    "LabelHolder",
    "StepTranscript",
    "centered",
    "fixed_point_gradients",
    "float_gradients",
    "margin_int",
    "quantize",
    "reference_step",
    "taylor_loss",
    "to_mod",
    "train_step",
]
