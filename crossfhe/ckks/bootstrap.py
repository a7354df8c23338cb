"""CKKS bootstrapping: a ciphertext at any level back to ``params.user_levels`` levels, same message.

The algorithm (Cheon, Han, Kim, Kim, Song, Eurocrypt 2018; Chen, Chillotti, Song, Eurocrypt 2019; Bossuat,
Mouchet, Troncoso-Pastoriza, Hubaux, Eurocrypt 2021; sparse-secret encapsulation: Bossuat, Troncoso-Pastoriza,
Hubaux, ACNS 2022), for a ciphertext of n slots (n a power of two, n <= N/2) whose message m has scale
Delta_in:

1. **Encapsulation and ModRaise.** At level 0 (modulus q0, the base primes) the ciphertext is key-switched
   from the dense secret s to an ephemeral sparse secret s' of Hamming weight h (32), with a key that lives
   only modulo q0 p0 (p0 one special prime), then both polynomials are lifted centered to the top modulus
   Q_L: the phase becomes c = m + q0 I over the integers with ||I||_inf <= h / 2 (each coefficient of
   c0 + c1 s' is a sum of h + 1 terms of absolute value at most q0 / 2), and a key switch from s' to s at the
   top (key under the dense s) returns to the user's secret. Nothing fails with some probability here:
   |I| <= 16 always for h = 32 (the EvalMod interval K = 16.5 covers it).
2. **SubSum** (n < N/2 only): log2(N / 2n) rotations by n, 2n, ... keep the coefficients of the subring
   Z[X^(N/2n)] (times N/2n), the only ones a sparse-slot message has.
3. **CoeffToSlot**: the inverse special DFT (the slots then hold w = c_k + i c_{N/2+k}, bit-reversed), as
   ``cts_levels`` merged factors of the radix-2 special FFT (:func:`dft_factors`), each one level, applied
   with baby-step giant-step and hoisted rotations (:mod:`crossfhe.ckks.lintrans`); a conjugation splits
   the real and imaginary parts into two ciphertexts holding t = coefficient / (K q0) in [-1, 1]; for a sparse
   message of n <= N/4 slots into the two halves of one ciphertext of 2n slots instead (CoeffToSlot's last factor
   and SlotToCoeff's first act on 2n slots, :func:`pack_factors`; no level more), so EvalMod runs once, not twice.
   A real message of N/2 slots (``real``) keeps the real part alone: its coefficients are antisymmetric
   (m_(N-k) = -m_k), so the low half determines the high one (:func:`real_first_factor`), and EvalMod runs once.
4. **EvalMod**: x = (q0 / (2 pi Delta_in)) arcsin(sin(2 pi K t)), i.e. m / Delta_in = (c mod q0) / Delta_in
   for |m| < q0 / 4: a Chebyshev interpolant of cos(2 pi (K t - 1/4) / 2^r) of degree ``degree`` (Paterson-
   Stockmeyer, :mod:`crossfhe.ckks.polynomial`), r double-angle steps c <- 2 c^2 - 1 (which turn it into
   sin(2 pi K t)), and an arcsine correction p(y) = y + y^3 r(y^2) of degree ``arcsine_degree``
   (:func:`arcsine_coefficients`, evaluated in log2(degree + 1) levels by :func:`odd_polynomial`). The constant
   alpha = gamma / (2 pi), gamma = q0 / Delta the message ratio, is spread over the steps (each double angle becomes
   c <- 2 c^2 - beta). Coefficients, not slots, enter EvalMod, and slot values in [-1, 1] give coefficients
   |m_k| = |(2 / N) Re sum_j z_j zeta_j^-k| <= Delta, reached by a constant vector (coefficient 0 is the mean of the
   slots' real parts) and by alternating or replicated short vectors (n distinct values sit on 2n coefficients).
   Approximation: the sine's relative error is (2 pi m / q0)^2 / 6, arcsin's Taylor cubic leaves
   3 (2 pi m / q0)^4 / 40 (9.2 bits at m = Delta with gamma = 2^4, the previous design), the degree-7 correction
   interpolated over |m| <= :data:`COEFFICIENT_BOUND` Delta leaves at most 2^-27.9 Delta at gamma = 2^5 for every
   |m| <= Delta (decaying like (2 pi m / q0)^9; exact to first order, so the small coefficients of spread-out
   messages get no gain error). Noise: every rescale of EvalMod adds rounding noise at the scale of the wide primes,
   which the polynomial's powers (about (2 pi K / 2^r)^2), the double angles and gamma amplify, and CoeffToSlot's
   output noise reaches the result multiplied by K gamma = 2 pi K alpha; SlotToCoeff then sums the errors of all N
   coefficients into each slot (a factor about sqrt(N)), so at N 2^16 EvalMod's noise and CoeffToSlot's set the
   precision (module constants below; the presets' docstrings give the measured figures) and the approximation
   error adds at most 2^-27.9 on messages concentrated in a few coefficients. The design: gamma = 2^5 with
   CoeffToSlot and EvalMod on 31-bit primes (a scale near 2^62). Lattigo's gamma = 2^8 with the degree-3 arcsine
   (Bossuat et al. 2021) would amplify that noise 8 times (3 bits) more at the same scale, and 32-bit words cap the
   scale near 2^62; gamma = 2^4 needs an arcsine of degree 15 (one level more) for 24 bits at m = Delta.
5. **SlotToCoeff**: the special DFT on re + i im (``stc_levels`` merged factors), at the user's levels: EvalMod's
   output and the intermediate factors at the wide scale ``Plan.em_scale`` (about 2^62: their rescale noise is then
   negligible although later factors amplify it), the last factor at ``params.scale``. A real message: the DFT of
   the low coefficients alone (m_0 halved, folded into the first factor) on 2 Re t, then y + conj(y).

6. **Precise** (opt-in, ``precise``): a second iteration bootstraps the first one's error, scaled up by
   2^:data:`PRECISE_GAIN_BITS`, and adds it back divided by the same (folded into SlotToCoeff's last factor:
   :func:`refine_last_factor`), so one bootstrap's noise (about 2^-26) becomes 2^-20 times the second's, and what
   is left is the rescale rounding at the scale Delta (Bae et al., META-BTS, CCS 2022; :func:`refine_steps`).

Levels, top down: CoeffToSlot uses levels L ... L - cts + 1, EvalMod the next :func:`evalmod_levels`,
SlotToCoeff the next ``stc_levels``; the result is at L - bootstrap_levels = ``params.user_levels``, scale
Delta_in. CoeffToSlot and EvalMod run on the wide primes of the chain (:class:`~crossfhe.ckks.params.ParamsLiteral`
``wide_levels``, near 2^62 per level), SlotToCoeff on the user's. Error: see the presets' measured precision
(:mod:`crossfhe.ckks.presets`): at least 24 bits for every input with |x| <= 1 (a bound on slots, not on the shape
of the vector: constants, alternating signs, short vectors and complex values included). A larger value wraps
around without an error here (this module sees no bound); the front end refuses it before any work from the bound it
tracks on every value (:func:`crossfhe.api.ckks_lower.check_bootstrap_bounds`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.ckks import lintrans, ops, polynomial
from crossfhe.ckks.ciphertext import Ciphertext, EvaluationKeys
from crossfhe.ckks.encoder import SpecialFFTPlan
from crossfhe.ckks.params import Params
from crossfhe.core import evaluator as ev
from crossfhe.core import keyswitch as ks
from crossfhe.core.keys import SecretKey, check_key_ids, gen_secret_key
from crossfhe.core.params import RingParams
from crossfhe.errors import ParameterError
from crossfhe.math import random as crandom
from crossfhe.math.rns import BasisConversion, RNSBasis, fast_basis_conversion
from crossfhe.math.xla import Program, plan_cache
from crossfhe.progress import callback as progress_callback
from crossfhe.progress import report
from crossfhe.ring import poly
from crossfhe.ring.ntt import NTTPlan, ntt
from crossfhe.ring.poly import Domain, RNSPoly

EPHEMERAL_WEIGHT = 32
"""Hamming weight h of the ephemeral secret (BTH22's and Lattigo's): ||I||_inf <= h / 2 after ModRaise."""

LOG_MESSAGE_RATIO = 5
"""log2 of the message ratio q0 / Delta of :func:`bootstrappable_params` (and of the presets' base primes)."""

PRECISE_GAIN_BITS = 20
"""A precise bootstrap (:func:`bootstrap` ``precise``) bootstraps the first iteration's error times 2^20: valid
while that error stays below 2^-20 (every preset keeps at least 24 bits), and the second iteration's own error
reaches the result divided by 2^20."""

COEFFICIENT_BOUND = 1.125
"""EvalMod's arcsine is fitted for message coefficients |m| <= COEFFICIENT_BOUND Delta (slots in [-1, 1] give
|m| <= Delta): module docstring, step 4."""


@dataclass(frozen=True)
class Config:
    """How a parameter set bootstraps: ``slots`` n (a power of two <= N/2), the levels of CoeffToSlot and
    SlotToCoeff (each merges log2(n) / levels radix-2 stages), EvalMod's interval K (|I| <= K - 1/2), its
    Chebyshev ``degree``, ``double_angle`` steps r and the degree of its arcsine correction (2^k - 1: k levels)."""

    slots: int
    cts_levels: int = 3
    stc_levels: int = 3
    K: float = 16.5
    degree: int = 55
    double_angle: int = 2
    arcsine_degree: int = 7

    @property
    def evalmod_levels(self) -> int:
        return evalmod_levels(self.degree, self.double_angle, self.arcsine_degree)

    @property
    def depth(self) -> int:
        return self.cts_levels + self.evalmod_levels + self.stc_levels


def evalmod_levels(degree: int = 55, double_angle: int = 2, arcsine_degree: int = 7) -> int:
    """Levels EvalMod spends: the polynomial's :func:`~crossfhe.ckks.polynomial.depth`, one per double angle,
    log2(arcsine_degree + 1) for the arcsine (ParameterError unless arcsine_degree + 1 is a power of two)."""
    a = int(arcsine_degree)
    if a < 1 or (a + 1) & a:
        raise ParameterError(f"arcsine_degree must be 2^k - 1 (1, 3, 7, 15, ...), got {arcsine_degree}")
    return polynomial.depth(degree) + double_angle + (a + 1).bit_length() - 1


def config_for(params: Params, slots: int | None = None, **evalmod) -> Config:
    """The :class:`Config` of a bootstrappable set: SlotToCoeff on the non-wide bootstrap levels, EvalMod
    (``evalmod``: degree, double_angle, arcsine_degree, K) and CoeffToSlot on the wide ones. ParameterError if the
    set does not bootstrap or the levels do not add up."""
    if not isinstance(params, Params):
        raise TypeError(f"bootstrapping takes ckks.Params, got {type(params).__name__}")
    if not params.bootstrap_levels:
        raise ParameterError(
            "these parameters reserve no bootstrapping levels (bootstrap_levels = 0): use a bootstrappable preset "
            "(crossfhe.ckks.presets.BOOTSTRAP) or crossfhe.ckks.bootstrap.bootstrappable_params")
    slots = params.slots if slots is None else int(slots)
    if slots < 2 or slots & (slots - 1) or slots > params.slots:
        raise ParameterError(f"slots must be a power of two in [2, N/2 = {params.slots}], got {slots}")
    wide = _wide_levels(params)
    stc = params.bootstrap_levels - wide
    em = evalmod_levels(**{k: v for k, v in evalmod.items() if k != "K"})
    cts = wide - em
    if stc < 1 or cts < 1:
        raise ParameterError(
            f"the chain reserves {params.bootstrap_levels} bootstrap levels ({wide} wide); EvalMod needs {em} wide "
            f"levels plus at least one for CoeffToSlot, and SlotToCoeff at least one more")
    log_n = slots.bit_length() - 1
    return Config(slots=slots, cts_levels=min(cts, log_n), stc_levels=min(stc, log_n), **evalmod)


def slots_for(params: Params, length: int | None = None) -> int:
    """The slot count of the bootstrap that serves vectors of up to ``length`` values (default N/2): the smallest
    power of two >= length that :func:`config_for` takes (at least 2^levels of CoeffToSlot and SlotToCoeff). A
    vector of width w (its values repeat every w slots) bootstraps with n slots for every power of two n >= w; n <=
    N/4 runs EvalMod once (:func:`pack_factors`). ParameterError for a length outside [1, N/2]."""
    full = config_for(params)
    if length is None:
        return full.slots
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or not 1 <= length <= params.slots:
        raise ParameterError(f"a bootstrap serves 1 to N/2 = {params.slots} values, got {length!r}")
    return max(1 << (int(length) - 1).bit_length(), 1 << max(full.cts_levels, full.stc_levels))


def _wide_levels(params: Params) -> int:
    """How many top levels rest on the wide primes (read off the primes: those more than half a bit above the
    scale's, which :func:`~crossfhe.ckks.params.Params.from_literal` takes within a fraction of a bit of it)."""
    ppl, base = params.primes_per_level, params.base_count
    nominal = params.log_scale / ppl
    count = 0
    for level in range(params.levels, 0, -1):
        primes = params.q[base + (level - 1) * ppl : base + level * ppl]
        if min(math.log2(p) for p in primes) > nominal + 0.5:
            count += 1
        else:
            break
    return count


def bootstrappable_params(*, log_n: int, levels_left: int, log_scale: int = 45, dnum: int, cts_levels: int = 3,
                          stc_levels: int = 3, base_bits: tuple[int, ...] | None = None, wide_bits: int = 31,
                          special_bits: tuple[int, ...] | None = None, insecure: bool = False, **evalmod) -> Params:
    """A CKKS chain that bootstraps with ``levels_left`` levels after each bootstrap: user and SlotToCoeff
    levels on two primes near 2^(log_scale / 2), CoeffToSlot and EvalMod levels on two primes near 2^wide_bits (the
    largest NTT primes below 2^31 by default: a scale near 2^62), base primes of about log_scale +
    :data:`LOG_MESSAGE_RATIO` bits (q0 / Delta = 2^5, EvalMod's message ratio). Checked for security like any set
    (ParameterError / InsecureParametersError)."""
    from crossfhe.ckks.params import ParamsLiteral

    wide = cts_levels + evalmod_levels(**{k: v for k, v in evalmod.items() if k != "K"})
    boot = wide + stc_levels
    if base_bits is None:
        half = (log_scale + LOG_MESSAGE_RATIO) / 2
        base_bits = (math.floor(half), math.ceil(half))
    lit = ParamsLiteral(log_n=log_n, levels=levels_left + boot, log_scale=log_scale, dnum=dnum, primes_per_level=2,
                        base_bits=base_bits, special_bits=special_bits, insecure=insecure, bootstrap_levels=boot,
                        wide_levels=wide, wide_bits=wide_bits)
    return Params.from_literal(lit)


# --------------------------------------------------------------------------------------------------
# The special DFT as merged radix-2 factors
# --------------------------------------------------------------------------------------------------


def _stage(n: int, h: int, inverse: bool) -> lintrans.Diagonals:
    """Stage h of :func:`crossfhe.ckks.encoder.special_fft` of size n (or its inverse) in diagonal form."""
    roots = SpecialFFTPlan.create(n).roots[h - 1 : 2 * h - 1]
    i = np.arange(n)
    p = i % (2 * h)
    low = p < h
    r = roots[np.where(low, p, p - h)]
    one = np.ones(n, dtype=np.complex128)
    if not inverse:  # out[i] = v[i] + r v[i+h] (low);  v[i-h] - r v[i] (high)
        d0 = np.where(low, one, -r)
        dp = np.where(low, r, 0)
        dm = np.where(low, 0, one)
    else:  # v[i] = (o[i] + o[i+h]) / 2 (low);  (o[i-h] - o[i]) conj(r) / 2 (high)
        d0 = np.where(low, 0.5, -np.conj(r) / 2)
        dp = np.where(low, 0.5, 0)
        dm = np.where(low, 0, np.conj(r) / 2)
    diags = {0: d0.astype(np.complex128), h % n: dp.astype(np.complex128)}
    key = (n - h) % n
    diags[key] = diags[key] + dm if key in diags else dm.astype(np.complex128)
    return lintrans.Diagonals(n, diags)


def _chunks(items: list, parts: int) -> list[list]:
    k, extra = divmod(len(items), parts)
    out, start = [], 0
    for j in range(parts):
        size = k + (1 if j < extra else 0)
        out.append(items[start : start + size])
        start += size
    return [c for c in out if c]


def dft_factors(n: int, levels: int, *, inverse: bool) -> list[lintrans.Diagonals]:
    """The special DFT of n slots (:func:`~crossfhe.ckks.encoder.special_fft`) without its bit reversal, as
    ``levels`` merged factors in the order they are applied: forward, z = F_last ... F_1 (P w) with P the
    bit reversal; inverse, P w = G_last ... G_1 z. Each factor merges about log2(n) / levels radix-2 stages
    and has at most 2^(stages + 1) - 1 diagonals."""
    hs = [1 << e for e in range(n.bit_length() - 1)]
    order = list(reversed(hs)) if inverse else hs  # inverse: undo the last stage first
    out = []
    for group in _chunks(order, levels):
        m = _stage(n, group[0], inverse)
        for h in group[1:]:
            m = lintrans.compose(_stage(n, h, inverse), m)
        out.append(m)
    return out


# --------------------------------------------------------------------------------------------------
# Plans: everything public that a bootstrap needs, made once per (params, config)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Plan:
    """The encoded CoeffToSlot and SlotToCoeff factors, the EvalMod coefficients and the rotation set of
    (params, config). Public (no key material); made once by :func:`plan_for` and cached.

    A pytree: the encoded factors (:class:`crossfhe.ckks.lintrans.Encoded`) are its children, everything else is
    static, so the plan is an argument of the bootstrap's compiled program, never a constant embedded in it."""

    params: Params
    config: Config
    cts: tuple  # lintrans.Encoded, applied in order
    stc: tuple  # lintrans.Encoded, applied in order (inputs at params.scale, EvalMod's output scale)
    cheb: np.ndarray
    betas: tuple  # beta_1 .. beta_r of the double-angle steps
    arcsine: tuple  # a_1, a_3, ..., the odd monomial coefficients of the arcsine correction on the scaled sine
    gamma: float  # the nominal message ratio q0 / Delta
    em_scale: float  # EvalMod's output scale, SlotToCoeff's inputs' (the product of the last wide level's primes)
    raise_scale: float
    subsum: tuple  # SubSum rotations (sparse slots)

    @property
    def packed(self) -> bool:
        """Whether the real and imaginary halves share one ciphertext of 2n slots (n <= N/4: :func:`pack_factors`)."""
        return 2 * self.config.slots <= self.params.slots

    def rotations(self) -> list[int]:
        """Every rotation offset a bootstrap uses (slots of N/2, 0 left out)."""
        rots = set(self.subsum)
        for enc in self.cts + self.stc:
            rots |= enc.plan.rotations()
        return sorted(r % self.params.slots for r in rots if r % self.params.slots)

    def nbytes(self) -> int:
        return sum(e.nbytes() for e in self.cts + self.stc)


def _flatten_plan(pl: Plan):
    static = (pl.params, pl.config, tuple(float(c) for c in pl.cheb), pl.betas, pl.arcsine, pl.gamma, pl.em_scale,
              pl.raise_scale, pl.subsum)
    return (pl.cts, pl.stc), static


def _unflatten_plan(static, children) -> Plan:
    params, config, cheb, betas, arcsine, gamma, em_scale, raise_scale, subsum = static
    cts, stc = children
    return Plan(params, config, cts, stc, np.asarray(cheb), betas, arcsine, gamma, em_scale, raise_scale, subsum)


jax.tree_util.register_pytree_node(Plan, _flatten_plan, _unflatten_plan)


def plan_for(params: Params, config: Config | None = None, *, compact: bool = False) -> Plan:
    """The cached :class:`Plan` of (params, config) (default config: :func:`config_for` at N/2 slots).

    ``compact``: the plan that compact keys (:meth:`Keys.compact`) bootstrap with, the one for the least memory: its
    first :data:`COMPACT_FACTORS` CoeffToSlot factors hold their diagonals as integer coefficients
    (:class:`crossfhe.ckks.lintrans.CompactDiagonal`) and make their words at each use. The same words."""
    config = config_for(params) if config is None else config
    return _plan(params, config, bool(compact))


COMPACT_FACTORS = 1
"""How many CoeffToSlot factors, from the first, a compact plan (:func:`plan_for`) holds compact. The first is the
largest (its diagonals span every limb of the top level: 336 MiB of N16_BOOT_L3's 2054), and each diagonal it holds
compact costs one forward transform of its limbs per bootstrap (benchmarks/README.md, "Compact diagonals")."""


PERMUTE_ROW = 0.5
"""What permuting one limb row of N words costs, in forward transforms of a row (measured on the NATIVE set at N
2^16: benchmarks/README.md, "Fewer rotation keys")."""

MAC_ROW = 0.35
"""What one digit row of the key switch's multiply-accumulate (with both key halves) costs, in the same unit
(measured as :data:`PERMUTE_ROW`)."""


def giant_step_cost(params: Params, level: int) -> float:
    """A full rotation's cost in units of a hoisted one at ``level``, counted in limb transforms. A full one pays
    the ModUp of every digit (the inverse transform of the limbs, each digit's extension to the others and P: up),
    the multiply-accumulate of its D digit rows (D = digits x (limbs + K)) and a ModDown (2 (K + limbs)); a hoisted
    one pays the permutation of its D digit rows (:data:`PERMUTE_ROW` each), the multiply-accumulate and the
    ModDown. The weight :func:`crossfhe.ckks.lintrans.plan` gives giant steps: about 1.4 at the top of the N 2^16
    presets (as measured there), so that their splits of 63 diagonals take 8 baby steps, and the transforms of one
    stride in CoeffToSlot and SlotToCoeff share their keys."""
    limbs, k = len(params.moduli_at(level)), len(params.p)
    groups = ks.digit_groups(len(params.q), params.dnum, limbs)
    rows = len(groups) * (limbs + k)
    up = limbs + sum(limbs + k - (hi - lo) for lo, hi in groups)
    down = 2 * (k + limbs)
    mac = MAC_ROW * rows
    return (up + mac + down) / (PERMUTE_ROW * rows + mac + down)


KEY_BYTES_FOR_16_BABIES = 128 * 2**20
"""Where one key-switching key is larger (dnum digits x (L + K) limbs x N x 8 bytes), the transforms take at most 8
baby steps, fewer keys: N16_BOOT_L9's keys are 244 MiB each, 39 of them 10 GiB, and 16 baby steps would add 12."""


def _max_babies(params: Params) -> int:
    digits = len(ks.digit_groups(len(params.q), params.dnum))
    key = digits * (len(params.q) + len(params.p)) * params.n * 8
    return 16 if key <= KEY_BYTES_FOR_16_BABIES else 8


def _split_args(params: Params, level: int) -> dict:
    """How every factor encoded at ``level`` is split into baby and giant steps (:func:`crossfhe.ckks.lintrans.plan`'s
    ``giant_cost`` and ``max_n1``): the one rule the plan, its rotation set and the keys follow."""
    return {"giant_cost": giant_step_cost(params, level), "max_n1": _max_babies(params)}


@plan_cache(maxsize=2)
def _plan(params: Params, cfg: Config, compact: bool) -> Plan:
    n = cfg.slots
    q0 = math.prod(params.moduli_at(0))
    g = params.slots // n
    raise_scale = 2.0 * cfg.K * q0 * g
    level = params.levels
    cts_factors, stc_factors = _factors(params, cfg)
    cts, scale = [], raise_scale
    for i, m in enumerate(cts_factors):
        target = float(math.prod(params.rescale_primes(level - 1)))
        cts.append(lintrans.encode(params, m, level=level, in_scale=scale, out_scale=target,
                                   compact=compact and i < COMPACT_FACTORS, **_split_args(params, level)))
        scale, level = target, level - 1
    em_scale = _em_scale(params, cfg)
    stc = [_encode_stc(params, cfg, j, m) for j, m in enumerate(stc_factors)]
    gamma = q0 / params.scale
    r = cfg.double_angle
    alpha = gamma / (2 * math.pi)
    betas = tuple(alpha ** (1.0 / 2 ** (r - k)) for k in range(r + 1))
    b0, K = betas[0], cfg.K
    cheb = polynomial.chebyshev_coefficients(lambda t: b0 * np.cos(2 * np.pi * (K * t - 0.25) / 2**r), cfg.degree)
    return Plan(params, cfg, tuple(cts), tuple(stc), cheb, betas[1:], arcsine_coefficients(gamma, cfg.arcsine_degree),
                gamma, em_scale, raise_scale, _subsum(params, cfg))


def _subsum(params: Params, cfg: Config) -> tuple:
    return tuple(cfg.slots << j for j in range((params.slots // cfg.slots).bit_length() - 1))


@plan_cache(maxsize=2)
def _factors(params: Params, cfg: Config) -> tuple[tuple, tuple]:
    """CoeffToSlot's and SlotToCoeff's factors (:func:`dft_factors`; packed where n <= N/4: :func:`pack_factors`)."""
    if params.levels - cfg.depth != params.user_levels:
        raise ParameterError(f"the configuration spends {cfg.depth} levels; the parameters reserve "
                             f"{params.bootstrap_levels} for bootstrapping")
    n = cfg.slots
    cts_factors = dft_factors(n, cfg.cts_levels, inverse=True)
    stc_factors = dft_factors(n, cfg.stc_levels, inverse=False)
    if 2 * n <= params.slots:  # Plan.packed
        cts_factors[-1], stc_factors[0] = pack_factors(cts_factors[-1], stc_factors[0])
    return tuple(cts_factors), tuple(stc_factors)


def _stc_level(params: Params, cfg: Config, j: int) -> int:
    return params.levels - cfg.cts_levels - cfg.evalmod_levels - j


def rotations_for(params: Params, config: Config | None = None) -> list[int]:
    """:meth:`Plan.rotations` of :func:`plan_for` (params, config), without encoding the plan: the baby-step
    giant-step splits of the factors alone (:func:`crossfhe.ckks.lintrans.plan`, as :func:`plan_for` splits them).
    Key generation makes the keys from it before the plan's diagonals, so that the two never hold their temporaries
    at once."""
    cfg = config_for(params) if config is None else config
    cts_factors, stc_factors = _factors(params, cfg)
    levels = [params.levels - i for i in range(len(cts_factors))]
    levels += [_stc_level(params, cfg, j) for j in range(len(stc_factors))]
    rots = set(_subsum(params, cfg))
    for m, level in zip(cts_factors + stc_factors, levels):
        rots |= lintrans.plan(m, **_split_args(params, level)).rotations()
    return sorted(r % params.slots for r in rots if r % params.slots)


def _em_scale(params: Params, cfg: Config) -> float:
    """EvalMod's output scale: the product of the primes of the last wide level."""
    return float(math.prod(params.rescale_primes(params.levels - cfg.cts_levels - cfg.evalmod_levels + 1)))


def _encode_stc(params: Params, cfg: Config, j: int, m: lintrans.Diagonals) -> lintrans.Encoded:
    """SlotToCoeff's factor ``j`` (of ``cfg.stc_levels``), ``m``, encoded at its level: inputs at EvalMod's output
    scale, output at that scale again (the last factor: ``params.scale``)."""
    level = _stc_level(params, cfg, j)
    em_scale = _em_scale(params, cfg)
    out = params.scale if j == cfg.stc_levels - 1 else em_scale
    return lintrans.encode(params, m, level=level, in_scale=em_scale, out_scale=out,
                           **_split_args(params, level))


def real_first_factor(params: Params, config: Config | None = None) -> lintrans.Encoded | None:
    """SlotToCoeff's first factor for a real message of N/2 slots (:func:`bootstrap` with ``real=True``), or None
    where the plan is packed (n <= N/4: EvalMod already runs once).

    Slots that are real make the message's coefficients antisymmetric: m_(N-k) = -m_k (k >= 1) and m_(N/2) = 0,
    since m(X^-1) = m(X) in R. So the slots z_j = sum_k m_k zeta_j^k are 2 Re(V D lo) with lo = (m_0 .. m_(N/2-1))
    (CoeffToSlot's real part, the only one EvalMod then reduces), V the special DFT of SlotToCoeff on the low
    coefficients alone, and D = diag(1/2, 1, ..., 1) (m_0 counted once). :func:`slot_to_coeff` takes t + conj(t)
    of EvalMod's output t first (2 Re t: EvalMod's rescales leave imaginary noise as large as the real, which the
    final real part would otherwise count twice: 0.4 bits at N 2^16), so this factor is SlotToCoeff's first composed
    with D / 2 (slot 0 holds coefficient 0 in the bit-reversed order), with the same offsets, so the same rotations;
    it ends with y + conj(y). Two conjugations at SlotToCoeff's levels replace the second EvalMod; the real parts'
    error is 2 Re of one half's instead of the sum of two independent halves' (0.5 bits in a float model, about 1
    bit measured at N 2^16: :mod:`crossfhe.ckks.presets`). Made once per (params, config) and cached."""
    config = config_for(params) if config is None else config
    if 2 * config.slots <= params.slots:
        return None
    return _real_first(params, config)


@plan_cache(maxsize=2)
def _real_first(params: Params, cfg: Config) -> lintrans.Encoded:
    n = cfg.slots
    first = dft_factors(n, cfg.stc_levels, inverse=False)[0]
    half = lintrans.Diagonals(n, {0: np.where(np.arange(n) == 0, 0.25, 0.5).astype(np.complex128)})
    enc = _encode_stc(params, cfg, 0, lintrans.compose(first, half))
    first = _factors(params, cfg)[1][0]
    level = _stc_level(params, cfg, 0)
    if not enc.plan.rotations() <= lintrans.plan(first, **_split_args(params, level)).rotations():
        raise ParameterError("internal: the real-message factor needs rotations its plan's keys lack")
    return enc


def refine_last_factor(params: Params, config: Config | None = None) -> lintrans.Encoded:
    """SlotToCoeff's last factor divided by 2^:data:`PRECISE_GAIN_BITS` (same offsets, same keys, same level): the
    second iteration of a precise bootstrap (:func:`bootstrap` ``precise``) ends with it, so its output is the first
    iteration's error at the message's scale without a level for the division. Made once per (params, config) and
    cached; ParameterError where SlotToCoeff has a single factor (it is then also the first, which packing or a real
    message replace)."""
    config = config_for(params) if config is None else config
    if config.stc_levels < 2:
        raise ParameterError("a precise bootstrap needs SlotToCoeff on at least 2 levels (its last factor carries "
                             f"the division by 2^{PRECISE_GAIN_BITS}); this configuration has 1")
    return _refine_last(params, config)


@plan_cache(maxsize=2)
def _refine_last(params: Params, cfg: Config) -> lintrans.Encoded:
    last = dft_factors(cfg.slots, cfg.stc_levels, inverse=False)[-1]
    gain = 2.0 ** -PRECISE_GAIN_BITS
    return _encode_stc(params, cfg, cfg.stc_levels - 1,
                       lintrans.Diagonals(last.n, {k: d * gain for k, d in last.diags.items()}))


def widen(m: lintrans.Diagonals, n2: int) -> lintrans.Diagonals:
    """m (a map of n slots) as a map of n2 slots (n | n2) that agrees with it on n-periodic inputs: each diagonal
    repeated, each offset k taken as its signed representative (k or k - n) mod n2, so that its rotation is the one m
    uses (on an n-periodic vector rotating by k and by k - n agree)."""
    n = m.n
    if n2 % n:
        raise ParameterError(f"a map of {n} slots does not widen to {n2}")
    return lintrans.Diagonals(n2, {lintrans._signed(k, n) % n2: np.tile(d, n2 // n) for k, d in m.diags.items()})


def pack_factors(last_cts: lintrans.Diagonals, first_stc: lintrans.Diagonals
                 ) -> tuple[lintrans.Diagonals, lintrans.Diagonals]:
    """CoeffToSlot's last factor and SlotToCoeff's first for a sparse message of n <= N/4 slots, both as maps of 2n
    slots, so that EvalMod runs once on both halves.

    CoeffToSlot: diag(a) M with a = (1, ..., 1, -i, ..., -i) (n of each): on w = M z (n-periodic) it gives y with
    y_j = w_j (j < n) and -i w_(j-n) (j >= n), so y + conj(y) = (2 Re w | 2 Im w), the two halves that
    :func:`coeff_to_slot` otherwise returns as two ciphertexts, now in the 2n slots of one. SlotToCoeff: F E with
    E p = p + i rot(p, n) on the low half and rot(p, n) + i p on the high one (diagonals 0 and n): the n-periodic
    Re + i Im that the first factor F takes. Neither costs a level (both are folded into factors that spend one);
    the CoeffToSlot factor keeps its offsets, the SlotToCoeff factor's double (k and k + n)."""
    n = last_cts.n
    n2 = 2 * n
    low = np.arange(n2) < n
    a = np.where(low, 1.0 + 0j, -1j)
    cts = lintrans.compose(lintrans.Diagonals(n2, {0: a}), widen(last_cts, n2))
    e = lintrans.Diagonals(n2, {0: np.where(low, 1.0 + 0j, 1j), n: np.where(low, 1j, 1.0 + 0j)})
    return cts, lintrans.compose(widen(first_stc, n2), e)


def arcsine_coefficients(gamma: float, degree: int, bound: float = COEFFICIENT_BOUND) -> tuple[float, ...]:
    """a_1, a_3, ..., a_degree of the arcsine correction p(y) = sum_j a_j y^j ~ alpha arcsin(y / alpha), alpha =
    gamma / (2 pi), for |y| <= y_max = alpha sin(2 pi bound / gamma) (the scaled sines of coefficients |m| <= bound
    Delta): p(y) = y + y^3 r(y^2), r of degree (degree - 3) / 2 interpolating (alpha arcsin(y / alpha) - y) / y^3 at
    the Chebyshev nodes of s = y^2 in [0, y_max^2] (degree 1: p(y) = y). So p(alpha sin(2 pi m / q0)) = m / Delta up to
    |y|^3 times r's interpolation error: exact to first order (no gain error on small coefficients), the largest
    error at |m| = bound Delta, decaying like (y_max / alpha)^(degree + 2) (module docstring, step 4)."""
    alpha = gamma / (2 * math.pi)
    if not 0 < 2 * math.pi * bound / gamma < math.pi / 2:
        raise ParameterError(f"the message ratio q0 / Delta = {gamma:.3g} is too small for coefficients up to "
                             f"{bound} Delta (it must exceed {4 * bound})")
    if degree == 1:
        return (1.0,)
    s_max = (alpha * math.sin(2 * math.pi * bound / gamma)) ** 2

    def r(s):
        y = np.sqrt(s)
        return (alpha * np.arcsin(y / alpha) - y) / (s * y)

    fit = np.polynomial.Chebyshev.interpolate(r, (degree - 3) // 2, domain=[0.0, s_max])
    return (1.0, *(float(a) for a in fit.convert(kind=np.polynomial.Polynomial).coef))


# --------------------------------------------------------------------------------------------------
# Keys
# --------------------------------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False, repr=False)
class Keys:
    """Public bootstrapping material: ``evaluation`` (relinearization, the Galois keys of every rotation the
    plan uses, conjugation), ``to_sparse`` (dense s -> ephemeral s', modulo q0 p0 only) and ``to_dense`` (s' -> s,
    at the top), with the plan's ``config``. Safe to send to an evaluator (it holds no secret)."""

    evaluation: EvaluationKeys
    to_sparse: ks.KeySwitchKey
    to_dense: ks.KeySwitchKey
    sparse_ring: RingParams = dataclasses.field(metadata={"static": True})
    config: Config = dataclasses.field(metadata={"static": True})

    @property
    def params(self) -> Params:
        return self.evaluation.params

    @property
    def key_id(self) -> str | None:
        return self.evaluation.key_id

    def nbytes(self) -> int:
        """Bytes of the key material held in memory (b of every key-switching key, and a unless it is compact)."""
        keys = [self.evaluation.relin, *self.evaluation.galois.values(), self.to_sparse, self.to_dense]
        return sum(k.nbytes() for k in keys)

    @property
    def is_compact(self) -> bool:
        """Whether these keys are in their compact form (:meth:`compact`); they then bootstrap with the compact plan
        (:func:`plan_for` ``compact``)."""
        return self.to_dense.compact

    def compact(self) -> Keys:
        """These keys with every Galois key and the encapsulation keys in their compact form
        (:func:`crossfhe.core.keyswitch.compact`: a made from its seed at each use, half their memory; the
        relinearization key, which EvalMod uses some 20-40 times a bootstrap, stays whole). The same words in every
        bootstrap; the time it costs: benchmarks/README.md ("Compact keys")."""
        galois = {g: ks.compact(k) for g, k in self.evaluation.galois.items()}
        evaluation = dataclasses.replace(self.evaluation, galois=galois)
        return dataclasses.replace(self, evaluation=evaluation, to_sparse=ks.compact(self.to_sparse),
                                   to_dense=ks.compact(self.to_dense))

    def __repr__(self) -> str:
        form = ", compact" if self.is_compact else ""
        return (f"bootstrap.Keys(N={self.params.n}, slots={self.config.slots}, "
                f"{len(self.evaluation.galois)} Galois keys, {self.nbytes() / 2**20:.0f} MiB{form})")


def sparse_ring(params: Params) -> RingParams:
    """The ring of the ephemeral secret: q0's primes and the first special prime, Hamming weight
    :data:`EPHEMERAL_WEIGHT`; checked against the sparse-secret estimates (insecure sets stay insecure)."""
    return RingParams(n=params.n, q=params.moduli_at(0), p=params.p[:1], security=params.ring.security,
                      insecure=params.ring.insecure, hamming_weight=EPHEMERAL_WEIGHT)


def keygen(sk: SecretKey, keys: EvaluationKeys, config: Config | None = None, *, seed: bytes | None = None,
           progress=None, compact: bool | None = None) -> Keys:
    """The bootstrapping keys of ``keys.params`` for the secret ``sk`` (whose public material ``keys`` is): the
    Galois keys of :meth:`Plan.rotations` and conjugation added to ``keys``, and the two encapsulation keys.
    ``progress``: :mod:`crossfhe.progress` (one step per key, the Galois keys' reported as each batch of them is done;
    default silent). ``seed``: 32 bytes for reproducible keys (tests).

    Programs: the Galois keys one per batch (:func:`~crossfhe.core.keyswitch.evaluation_key_batches`, one executable
    for all batches), then one each for the ephemeral secret and the two encapsulation keys. ChaCha20 keys, from
    ``Rng(seed)`` in turn: one from which the Galois key of element k takes ``fold_in(., k)``, then the ephemeral
    secret's, the encapsulation key's to it (``to_sparse``) and the one's back (``to_dense``). ``compact``: the result's
    :meth:`Keys.compact` (the new Galois keys compacted batch by batch, as they are made); None: as the parameters
    say (:attr:`crossfhe.ckks.params.Params.compact_keys`)."""
    progress = progress_callback(progress)
    params = keys.params
    compact = params.compact_keys if compact is None else bool(compact)
    config = config_for(params) if config is None else config
    rng = crandom.Rng(seed)
    elements = sorted({ops.rotation_element(params, r) for r in rotations_for(params, config)}
                      | {ops.conjugation_element(params)})
    todo = [g for g in elements if g not in keys.galois]
    total, what = len(todo) + 2, "bootstrapping keys"
    galois = dict(keys.galois)
    done = 0
    for batch in ks.evaluation_key_batches(sk, params, rng.next_key(), todo, dnum=params.dnum):
        galois.update({g: ks.compact(k) for g, k in batch.items()} if compact else batch)
        for _ in batch:
            done += 1
            report(progress, done, total, what)
    ring = sparse_ring(params)
    sk_sparse = gen_secret_key(ring, rng.next_key(), hamming_weight=EPHEMERAL_WEIGHT)
    to_sparse = ks.gen_keyswitch_key(sk_sparse, sk, ring, rng.next_key(), dnum=len(ring.q))
    jax.block_until_ready(to_sparse)
    report(progress, total - 1, total, what)
    to_dense = jax.block_until_ready(ks.gen_keyswitch_key(sk, sk_sparse, params, rng.next_key(), dnum=params.dnum))
    report(progress, total, total, what)
    evaluation = dataclasses.replace(keys, galois=galois)
    out = Keys(evaluation, to_sparse, to_dense, ring, config)
    plan_for(params, config, compact=compact)  # encoded (and cached) after the keys: the first bootstrap does not wait
    return out.compact() if compact else out


def _residues_eval(coeffs, moduli: tuple[int, ...], n: int) -> RNSPoly:
    col = np.array(moduli, dtype=np.uint32).reshape(-1, 1)
    data = ntt(crandom.to_residues(jnp.asarray(coeffs)[None, :], col), NTTPlan.create(n, moduli))
    return RNSPoly.create(data, moduli, Domain.EVAL)


# --------------------------------------------------------------------------------------------------
# The steps
# --------------------------------------------------------------------------------------------------


@plan_cache(maxsize=8, on_device=True)
def raise_plan(q_in: tuple[int, ...], q_out: tuple[int, ...], kernels=None):
    """The tables of :func:`mod_raise`: the exact (HPS) basis conversion from q0's primes to the others of
    ``q_out`` and the NTT plans of both bases (a pytree: an argument of compiled code)."""
    rest = q_out[len(q_in):]
    if q_out[: len(q_in)] != tuple(q_in):
        raise ParameterError("ModRaise targets a basis that starts with q0's primes")
    conv = BasisConversion.create(RNSBasis(tuple(q_in)), RNSBasis(rest), exact=True)
    return conv


def mod_raise(x: RNSPoly, q_out: tuple[int, ...], conv, ntt_in: NTTPlan, ntt_out: NTTPlan) -> RNSPoly:
    """The centered lift of x (EVAL over q0's primes) to ``q_out`` (EVAL): residues mod the other primes of the
    representative in (-q0/2, q0/2] (:func:`crossfhe.math.rns.fast_basis_conversion` with ``exact``: where a
    coefficient lies within 2^-22 q0 of +-q0/2 the other representative may be taken, which changes I by one
    and keeps |c| <= (h + 1) q0 / 2 + 2^-22 q0, inside EvalMod's interval). Traceable."""
    coeff = poly.to_coeff(x, ntt_in)
    ext = fast_basis_conversion(coeff.data, conv)
    data = jnp.concatenate([coeff.data, ext], axis=-2)
    return poly.to_eval(RNSPoly(data, tuple(q_out), Domain.COEFF), ntt_out)


def mod_raise_coeffs(x: np.ndarray, q_in: tuple[int, ...], q_out: tuple[int, ...]) -> np.ndarray:
    """:func:`mod_raise` on coefficients: uint32 [k, N] residues mod q_in -> uint32 [len(q_out), N] residues of the
    centered lift (the same words as inside a bootstrap)."""
    conv = raise_plan(tuple(q_in), tuple(q_out))
    ext = np.asarray(fast_basis_conversion(jnp.asarray(x, dtype=jnp.uint32), conv))
    return np.concatenate([np.asarray(x, dtype=np.uint32), ext], axis=0)


@plan_cache(maxsize=16)
def _monomial(n: int, moduli: tuple[int, ...], power: int, sign: int, kernels) -> RNSPoly:
    """sign X^power (EVAL over moduli): multiplies every slot by sign * i^(power / (N/2)) for power = N/2."""
    c = np.zeros((len(moduli), n), dtype=np.uint32)
    for j, q in enumerate(moduli):
        c[j, power] = 1 if sign > 0 else q - 1
    return poly.to_eval(RNSPoly.create(jnp.asarray(c), moduli), NTTPlan.create(n, moduli, kernels))


def times_i(ct: Ciphertext, sign: int = 1) -> Ciphertext:
    """sign * i * ct, exactly (the product by the monomial sign X^(N/2): no level, no scale change)."""
    m = _monomial(ct.params.n, ct.c0.basis, ct.params.n // 2, sign, ct.params.kernels)
    return ops._like(ct, *ev.mul_plain(ct.c0, ct.c1, m))


def encapsulate_and_raise(ct: Ciphertext, keys: Keys, scale: float) -> Ciphertext:
    """Step 1: ct at level 0, switched to s', lifted to the top, switched back to s; declared at ``scale``."""
    params = keys.params
    ct = ops.drop_level(ct, 0)
    q0 = ct.c0.basis
    kernels = params.kernels
    plan0 = ks.keyswitch_plan(keys.to_sparse, active=len(q0), kernels=kernels)
    u0, u1 = ks.keyswitch(ct.c1, keys.to_sparse, plan=plan0)
    c0, c1 = poly.add(ct.c0, u0), u1
    top = params.moduli_at(params.levels)
    conv = raise_plan(q0, top)
    chain = params.q + params.p
    ntt_in, ntt_out = ks.level_ntt_plan(params.n, q0, chain, kernels), ks.level_ntt_plan(params.n, top, chain, kernels)
    c0, c1 = mod_raise(c0, top, conv, ntt_in, ntt_out), mod_raise(c1, top, conv, ntt_in, ntt_out)
    plan_top = ks.keyswitch_plan(keys.to_dense, active=len(top), kernels=kernels)
    v0, v1 = ks.keyswitch(c1, keys.to_dense, plan=plan_top)
    return Ciphertext(poly.add(c0, v0), v1, params, scale, ct.key_id)


def coeff_to_slot(ct: Ciphertext, pl: Plan, keys: EvaluationKeys, *, real: bool = False
                  ) -> tuple[Ciphertext, ...]:
    """Steps 2-3: the parts EvalMod takes, each holding t = coefficient / (K q0) in its slots (bit-reversed order):
    (re, im) for N/2 slots, (re,) alone for a real message (``real``: :func:`real_first_factor`); for n <= N/4 slots
    one ciphertext of 2n slots, re in the low n, im in the high n (``pl.packed``, :func:`pack_factors`)."""
    for r in pl.subsum:
        ct = ops.add(ct, ops.rotate(ct, r, keys))
    for enc in pl.cts:
        ct = lintrans.apply(ct, enc, keys)
    conj = ops.conjugate(ct, keys)
    if pl.packed or real:
        return (ops.add(ct, conj),)
    return ops.add(ct, conj), times_i(ops.sub(ct, conj), -1)


def eval_mod(t: Ciphertext, pl: Plan, keys: EvaluationKeys) -> Ciphertext:
    """Step 4: gamma (c mod q0) / q0 per slot, gamma = q0 / Delta (the nominal message ratio), at scale
    ``pl.em_scale`` (about a wide level's primes: the last rescale's rounding stays far below the message's
    precision)."""
    c = polynomial.evaluate(t, pl.cheb, keys)
    for beta in pl.betas:
        prod = ops.mul(c, c, keys)
        c = ops.rescale(ops.add_scalar(ops._mul_integer(prod, 2, prod.scale), -beta))
    out = odd_polynomial(c, pl.arcsine, keys, pl.em_scale)
    return ops._like(out, out.c0, out.c1, pl.em_scale)  # equal to it up to float rounding, by construction


def odd_polynomial(y: Ciphertext, coeffs, keys: EvaluationKeys, scale: float) -> Ciphertext:
    """sum_j coeffs[j] y^(2j + 1) slot-wise, for 2^(k-1) coefficients (degree 2^k - 1), at level y.level - k with
    scale ``scale`` (exactly, up to float rounding).

    Depth k, optimal for the degree: p = lo + y^(2^(k-1)) hi with lo and hi odd of degree 2^(k-1) - 1 (recursively;
    a single term a y is :func:`crossfhe.ckks.polynomial.scale_to`, one level), the even power by k - 1 squarings,
    and lo lifted to the product's scale by an integer (relative 2^-53). 2^k - 2 scalar products, 2^(k-1) - 1
    ciphertext products plus k - 1 squarings. Error: each rescale's rounding and each relinearization's noise, at the
    scale of the rescaled term, times the coefficients that multiply it (small here: p is near the identity)."""
    powers = {1: y}

    def power(m: int) -> Ciphertext:
        if m not in powers:
            h = power(m // 2)
            powers[m] = ops.mul_rescale(h, h, keys)
        return powers[m]

    def run(a: tuple, target: float) -> Ciphertext:
        if len(a) == 1:
            return polynomial.scale_to(y, a[0], 0.0, target)
        half = len(a) // 2
        pw = power(len(a))
        q = float(math.prod(y.params.rescale_primes(pw.level)))
        hi = run(a[half:], target * q / pw.scale)
        lo = run(a[:half], target)
        # hi pw + lift(lo), rescaled: one program
        level, scale = min(hi.level, pw.level), hi.scale * pw.scale
        return ops.combine_rescale([(lo, polynomial.lift_factor(lo, scale))], 0.0, level, scale,
                                   product=(hi, pw, keys, 1))

    a = tuple(float(x) for x in coeffs)
    if not a or len(a) & (len(a) - 1):
        raise ParameterError(f"odd_polynomial takes 2^(k-1) coefficients (degree 2^k - 1), got {len(a)}")
    return run(a, float(scale))


def slot_to_coeff(parts: tuple[Ciphertext, ...], pl: Plan, keys: EvaluationKeys,
                  first: lintrans.Encoded | None = None, last: lintrans.Encoded | None = None) -> Ciphertext:
    """Step 5: the special DFT of re + i im (``parts`` = (re, im), or the packed (re | im) whose first factor forms
    it), at the user's top level, scale ``params.scale``. With ``first`` (:func:`real_first_factor`; ``parts`` =
    (re,) of a real message): t + conj(t) of that part, that factor, the others, then y + conj(y). ``last``: another
    last factor (:func:`refine_last_factor`: the same one divided by 2^:data:`PRECISE_GAIN_BITS`)."""
    factors = list(pl.stc)
    if first is not None:
        factors[0] = first
    if last is not None:
        factors[-1] = last
    if first is not None:
        ct = ops.add(parts[0], ops.conjugate(parts[0], keys))
    elif len(parts) == 1:
        ct = parts[0]
    else:
        re, im = parts
        level = min(re.level, im.level)
        ct = ops.add(ops.drop_level(re, level), times_i(ops.drop_level(im, level)))
    for enc in factors:
        ct = lintrans.apply(ct, enc, keys)
    return ops.add(ct, ops.conjugate(ct, keys)) if first is not None else ct


def _check(ct: Ciphertext, keys: Keys) -> Plan:
    """The plan of a bootstrap of ``ct`` with ``keys``, after checking both."""
    if not isinstance(ct, Ciphertext):
        raise TypeError(f"bootstrap takes a ckks.Ciphertext, got {type(ct).__name__}")
    if not isinstance(keys, Keys):
        raise TypeError(f"bootstrap takes bootstrap.Keys (crossfhe.ckks.bootstrap.keygen), got {type(keys).__name__}")
    params = keys.params
    ops._same_params(ct.params, params, "bootstrap")
    check_key_ids("bootstrap", ct.key_id, keys.key_id)
    if ct.c0.data.ndim != 2:
        raise ParameterError("bootstrap takes one ciphertext (no batch axes)")
    pl = plan_for(params, keys.config, compact=keys.is_compact)
    missing = [r for r in pl.rotations() if ops.rotation_element(params, r) not in keys.evaluation.galois]
    if missing:
        raise ParameterError(
            f"these bootstrapping keys lack the Galois keys of {len(missing)} rotations their plan uses (e.g. "
            f"{missing[:3]}): they were made for another layout of this configuration (keys saved by a crossfhe "
            "older than its baby-step giant-step splits); make them again with crossfhe.ckks.bootstrap.keygen or "
            "CKKSContext.create(..., bootstrap=True)")
    return pl


def eval_mod_each(parts: tuple[Ciphertext, ...], pl: Plan, keys: EvaluationKeys) -> tuple[Ciphertext, ...]:
    """:func:`eval_mod` of each part of :func:`coeff_to_slot`, one after the other (eagerly: each operation its own
    program)."""
    return tuple(eval_mod(t, pl, keys) for t in parts)


def eval_mod_loop(parts: tuple[Ciphertext, ...], pl: Plan, keys: EvaluationKeys) -> tuple[Ciphertext, ...]:
    """:func:`eval_mod` of the parts as a loop (:func:`jax.lax.map`) over them stacked on a new leading axis where
    there are two: the same words as :func:`eval_mod_each`, and a compiled program holds EvalMod's operations once
    instead of twice. The parts share their level and scale (:func:`coeff_to_slot`)."""
    if len(parts) == 1:
        return (eval_mod(parts[0], pl, keys),)
    both = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *parts)
    out = jax.lax.map(lambda t: eval_mod(t, pl, keys), both)
    return tuple(jax.tree_util.tree_map(lambda x, j=j: x[j], out) for j in range(len(parts)))


def bootstrap_steps(ct: Ciphertext, keys: Keys, pl: Plan, eval_mods=eval_mod_each,
                    first: lintrans.Encoded | None = None) -> Ciphertext:
    """Steps 1-5 of the module docstring on a checked ``ct`` with the plan ``pl`` (:func:`plan_for` of the keys'
    parameters and configuration), EvalMod's parts through ``eval_mods`` (:func:`eval_mod_each` or
    :func:`eval_mod_loop`: the same words); ``first``: :func:`real_first_factor` for a real message (EvalMod on
    the real part alone). Traceable: under a trace it records the whole bootstrap; called eagerly each operation
    runs as its own compiled program (:func:`bootstrap`; under :func:`bootstrap_program`, one). The words do not
    depend on ct's scale, only the result's declared scale does (:func:`_declared`)."""
    return _declared(_steps(ct, keys, pl, eval_mods, first), ct, pl)


def _steps(ct: Ciphertext, keys: Keys, pl: Plan, eval_mods, first=None, last=None) -> Ciphertext:
    """:func:`bootstrap_steps` up to SlotToCoeff's output (scale ``params.scale``, before :func:`_declared`)."""
    raised = encapsulate_and_raise(ct, keys, pl.raise_scale)
    parts = coeff_to_slot(raised, pl, keys.evaluation, real=first is not None)
    return slot_to_coeff(eval_mods(parts, pl, keys.evaluation), pl, keys.evaluation, first, last)


def refine_steps(ct: Ciphertext, keys: Keys, pl: Plan, eval_mods=eval_mod_each,
                 first: lintrans.Encoded | None = None, last: lintrans.Encoded | None = None) -> Ciphertext:
    """The two-iteration bootstrap (:func:`bootstrap` ``precise``) of a checked ``ct``: ``last`` is
    :func:`refine_last_factor` of the plan. Words as :func:`bootstrap_steps`'s, scale ct's."""
    out = _declared(_steps(ct, keys, pl, eval_mods, first), ct, pl)
    low = ops.drop_level(ct, 0)
    d = ops.sub(low, ops.drop_level(out, 0))
    d = ops._mul_integer(d, 1 << PRECISE_GAIN_BITS, d.scale)
    fix = _declared(_steps(d, keys, pl, eval_mods, first, last), ct, pl)
    return ops.add(out, fix)


def _first(pl: Plan, real: bool) -> lintrans.Encoded | None:
    return real_first_factor(pl.params, pl.config) if real else None


def _declared(out: Ciphertext, ct: Ciphertext, pl: Plan) -> Ciphertext:
    """SlotToCoeff's output ``out`` declared at ct's scale Delta_in, with ct's key id: it holds gamma m / q0 =
    (Delta_in / params.scale) m / Delta_in at scale params.scale."""
    ratio = (math.prod(ct.params.moduli_at(0)) / ct.scale) / pl.gamma
    return dataclasses.replace(out, scale=out.scale / ratio, key_id=ct.key_id)


def _anonymous(ct: Ciphertext, keys: Keys) -> tuple[Ciphertext, Keys]:
    """ct and keys without what the words do not depend on (ct's scale, set to ``params.scale``, and the key pair's
    identifier), so that one compiled program serves every input scale and every key pair of the parameters."""
    public = dataclasses.replace(keys.evaluation.public, key_id=None)
    keys = dataclasses.replace(keys, evaluation=dataclasses.replace(keys.evaluation, public=public))
    return dataclasses.replace(ct, scale=float(ct.params.scale), key_id=None), keys


def _program_steps(ct: Ciphertext, keys: Keys, pl: Plan, first: lintrans.Encoded | None = None,
                   last: lintrans.Encoded | None = None) -> Ciphertext:
    if last is not None:
        return refine_steps(ct, keys, pl, eval_mod_loop, first, last)
    return _steps(ct, keys, pl, eval_mod_loop, first)


_BOOTSTRAP = Program(_program_steps, name="bootstrap", materialize=True)


def bootstrap(ct: Ciphertext, keys: Keys, *, real: bool = False, precise: bool = False) -> Ciphertext:
    """A fresh-level encryption of ct's message: level ``params.user_levels``, scale ct.scale (values within
    the preset's measured precision). Slot values must lie in [-1, 1] (message coefficients up to Delta; EvalMod's
    arcsine is fitted up to :data:`COEFFICIENT_BOUND` Delta, its error grows fast beyond, and coefficients beyond
    q0 / 4 fold back: module docstring, step 4).

    ``real``: the slots hold real values (imaginary parts at the noise's level), and a bootstrap of N/2 slots runs
    EvalMod once instead of twice (:func:`real_first_factor`; two conjugations more, at SlotToCoeff's levels, and
    about 1 bit less on the real parts: the presets' docstrings); the result's imaginary parts are then zero up to
    noise. An imaginary part that is not noise is not kept, and it corrupts the real parts: the front end sets
    ``real`` only for vectors that hold real values (:class:`crossfhe.api.ckks.EncryptedVector` ``complex``
    False). Sparse plans (n <= N/4) run EvalMod once either way, and ignore it.

    ``precise``: two iterations (Bae, Cheon, Kim, Kim, Stehle, "META-BTS", CCS 2022), twice the time, the same
    keys and the same output level. The first gives ct' = m + e1; ct - ct' at level 0 holds -e1 (ct's own noise is
    part of its message m), which times 2^:data:`PRECISE_GAIN_BITS` is bootstrapped with SlotToCoeff's last factor
    divided by that (:func:`refine_last_factor`), giving -e1 + e2 / 2^20; the sum is m + e2 / 2^20. What is left is
    the rescale rounding of the two outputs at the scale Delta (about N / Delta per slot): the set's precision at
    its scale, 40 bits or more on :data:`crossfhe.ckks.presets.N16_BOOT_HP` (scale 2^60), about 35 at the scale 2^52
    of the other presets, where one iteration gives 25-26.

    Operation by operation (:func:`bootstrap_steps`), each operation its own cached compiled program;
    :func:`bootstrap_program` is the same words in one executable, which on XLA:CPU compiles for longer and runs
    faster at N 2^11, a little slower at N 2^16 (benchmarks/README.md, "Workloads as one program, without
    recomputation")."""
    pl = _check(ct, keys)
    if precise:
        return refine_steps(ct, keys, pl, first=_first(pl, real), last=refine_last_factor(pl.params, pl.config))
    return bootstrap_steps(ct, keys, pl, first=_first(pl, real))


def bootstrap_program(ct: Ciphertext, keys: Keys, *, real: bool = False, precise: bool = False) -> Ciphertext:
    """:func:`bootstrap` as one compiled executable per call (:class:`crossfhe.math.xla.Program`): the same words
    (``real`` as there).

    The keys and the plan (the encoded transforms, :func:`plan_for`) are arguments of the executable, as are the
    tables its operations read (NTT, key-switching and rescaling plans); EvalMod's two halves (N/2 slots) are one loop
    (:func:`eval_mod_loop`). It is traced and compiled once per argument structure: the parameters, the configuration
    and the ciphertext's level (its scale and the key pair's identifier are left out: the words do not depend on
    them), and reused by every call that shares it; a call at another input level is another program. Under a
    caller's trace (``jax.jit``, ``vmap``, a circuit) the steps join that trace."""
    pl, first, last = _program_arguments(ct, keys, real, precise)
    anon_ct, anon_keys = _anonymous(ct, keys)
    return _declared(_BOOTSTRAP(anon_ct, anon_keys, pl, first, last), ct, pl)


def _program_arguments(ct: Ciphertext, keys: Keys, real: bool, precise: bool) -> tuple:
    """(plan, first, last) of :func:`bootstrap_program` for ``ct`` and ``keys``, after checking both."""
    pl = _check(ct, keys)
    return pl, _first(pl, real), refine_last_factor(pl.params, pl.config) if precise else None


def program_tables(ct: Ciphertext, keys: Keys, *, real: bool = False, precise: bool = False) -> tuple:
    """(plan, first, last, constants): every array :func:`bootstrap_program` of a ciphertext of ct's structure (its
    level; its words and scale do not matter) reads besides the ciphertext and the keys: the plan (:func:`plan_for`),
    the real-message and two-iteration factors (None where ``real`` or ``precise`` is off) and the constants of the
    program (:meth:`crossfhe.math.xla.Program.constants`: NTT, key-switching and rescaling tables). A circuit that
    bootstraps takes them as arguments (:func:`bootstrap_inline`), made once per key set; they are the cached tables,
    not copies. The first call for a structure traces the bootstrap (seconds at N 2^16)."""
    pl, first, last = _program_arguments(ct, keys, real, precise)
    anon_ct, anon_keys = _anonymous(ct, keys)
    return pl, first, last, _BOOTSTRAP.constants(anon_ct, anon_keys, pl, first, last)


def bootstrap_inline(ct: Ciphertext, keys: Keys, tables: tuple) -> Ciphertext:
    """:func:`bootstrap_program`'s words inside a caller's trace, with ``tables`` (:func:`program_tables` of the same
    structure, ``real`` and ``precise``; concrete or the caller's tracers) in place of the tables the program would
    read: under a circuit's program every table stays an argument of that program, none is embedded. The keys and
    ct may be tracers; their structure must be the one ``tables`` were made for (ValueError otherwise)."""
    pl, first, last, consts = tables
    anon_ct, anon_keys = _anonymous(ct, keys)
    return _declared(_BOOTSTRAP.inline(consts, anon_ct, anon_keys, pl, first, last), ct, pl)


__all__ = ["COEFFICIENT_BOUND", "COMPACT_FACTORS", "EPHEMERAL_WEIGHT", "LOG_MESSAGE_RATIO", "PRECISE_GAIN_BITS",
           "Config", "Keys", "Plan",
           "arcsine_coefficients", "bootstrap", "bootstrap_inline", "bootstrap_program", "bootstrap_steps",
           "bootstrappable_params", "coeff_to_slot", "config_for", "dft_factors", "encapsulate_and_raise", "eval_mod",
           "eval_mod_each", "eval_mod_loop", "evalmod_levels", "keygen", "mod_raise_coeffs", "odd_polynomial",
           "pack_factors", "plan_for", "program_tables", "real_first_factor", "refine_last_factor", "refine_steps",
           "rotations_for", "slot_to_coeff", "slots_for", "sparse_ring", "times_i", "widen"]
