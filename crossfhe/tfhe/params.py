"""Multi-bit TFHE parameters: a checked frozen set, its noise model and its failure probability.

A parameter set fixes

* the **message**: ``message_bits`` p (1 to 10) and one padding bit, so a message m in [0, 2^p) is
  carried as m Delta with Delta = round(Q / 2^(p+1)) and the top half of the torus stays free for the
  negacyclic blind rotation;
* the **long key**: a binary GLWE key of ``glwe_dim`` k polynomials of degree ``poly_size`` N over
  Q = q_0 q_1 ... (word-size NTT primes, ARCHITECTURE.md); sample extraction gives LWE ciphertexts of
  dimension k N under its coefficients. Ciphertexts live here between bootstraps;
* the **short key**: a binary LWE key of dimension ``lwe_dim`` n; the key-switching key takes the long
  LWE key to it modulo 2^32 (native ``uint32`` wrap-around, no reduction at all);
* the **gadgets**: ``pbs_gadget`` (base 2^b, l levels) of the external product and ``ks_gadget`` of the
  key switch;
* the **extension** nu (default 0): the blind rotation runs on an accumulator of N' = 2^nu N coefficients,
  so the modulus switch goes to 2N' instead of 2N while every key stays at N (below);
* the **grouping** g (default 1): the blind rotation takes the short key's bits g at a time, one external
  product per group instead of one per bit (below).

Bootstrapping is key switch first (Taurus Fig. 3): Q -> 2^32 (rounding), key switch long -> short,
2^32 -> 2N' (rounding), blind rotation, sample extraction (:mod:`crossfhe.tfhe.ops`).

Extended blind rotation (nu > 0). The rounding 2^32 -> 2N' costs (n/4 + 1) / (12 (2N')^2) of variance, and
for p = 10 at N = 2^17 that alone exceeds the 2^-64 budget; a larger N makes every key and every external
product larger. Instead the accumulator lives in Z_Q[X]/(X^N' + 1), N' = 2^nu N, under the key
S(X^(2^nu)). Writing A(X) = sum_(j < 2^nu) X^j A_j(X^(2^nu)), each A_j is a polynomial of Z_Q[Y]/(Y^N + 1)
(Y = X^(2^nu), Y^N = X^N' = -1) and the ciphertext's component j is an ordinary GLWE under S: the external
product with a GGSW of a constant (a key bit) acts on the 2^nu components separately, with the N-sized
bootstrapping key. X^r ACC moves each component to another index and rotates it in the ring of degree N
(:func:`crossfhe.core.ggsw.rotate_components`); coefficient 0 of the result is coefficient 0 of component 0,
so sample extraction gives an LWE of dimension k N under the usual key. A CMux costs 2^nu external
products (one batch, one read of the GGSW); the bootstrapping key, the key-switching key and the noise of
each external product are those of N.
This is the ring-splitting behind the "extended" bootstrapping of the TFHE literature; here it serves only
to make the modulus switch finer.

Grouped blind rotation (g > 1; the multi-bit blind rotation of TFHE-rs, its "grouping factor"). The short
key's bits go in groups of g (the last group padded with zero bits); for each group the bootstrapping key
holds 2^g - 1 GGSWs, of the indicators [s_group = c] for the nonzero patterns c in {0, 1}^g. With
e_c = sum_j a_j c_j the rotation a pattern calls for, X^(sum_j a_j s_j) = 1 + sum_(c != 0) (X^(e_c) - 1) [s_group = c],
so a step is ACC <- ACC + sum_c (X^(e_c) - 1) (GGSW_c [x] ACC): the accumulator is decomposed and
transformed once, multiplied by the 2^g - 1 keys, each product rotated (in the Fourier domain, a pointwise
product with the monomial's values) and summed, and transformed back once. n / g such steps replace n
CMux steps: fewer transforms for 2^g - 1 times the multiply-accumulate work and key. g = 2 pays where the
transforms dominate the step (k = 1, l = 1: P4, see :mod:`crossfhe.tfhe.presets`).

Noise model (variances relative to the modulus, i.e. on the torus; TFHE literature: Chillotti et al.,
"TFHE: fast fully homomorphic encryption over the torus", J. Cryptology 2020, Thm 4.1 and Lemma 4.3;
Bergerat et al., "Parameter optimization and larger precision for (T)FHE", J. Cryptology 2023, §2):

* fresh encryption under the long key: sigma_glwe^2;
* rounding Q -> 2^32: (k N / 2 + 1) / (12 * 2^64) (each of the k N + 1 roundings is uniform with variance
  2^-64 / 12 and meets a key bit of mean square 1/2);
* key switch, digits d in [-B/2, B/2) (E[d^2] = (B^2 + 2) / 12) against a key of noise sigma_lwe, plus the
  dropped low bits of each a_i: k N l_ks (B_ks^2 + 2) / 12 sigma_lwe^2 + (k N / 2) 2^(-2 b_ks l_ks) / 12;
* rounding 2^32 -> 2N': (n / 4 + 1) / (12 (2N')^2). The a_i move by e_i (uniform, variance 1 / 12 in units of
  1 / 2N'), the phase by sum e_i s_i; the key switch knows the e_i and takes their mean over a binary key,
  sum e_i / 2, off b (the centered-mean modulus switch of TFHE-rs), leaving sum e_i (s_i - 1/2) of variance n / 48
  for any key, plus b's own rounding (n / 2 + 1 without the correction, which needs n < 2N');
* blind rotation, n CMux external products, each adding
  (k + 1) l N (B^2 + 2) / 12 sigma_glwe^2 + (k N / 2 + 1) 2^(-2 b l) / 12
  (gadget digits against the key noise; the decomposition error against the key, bounded by taking the
  bootstrapping key's bit as 1). The output of a bootstrap has this variance times n: ``var_pbs``. With
  nu > 0 each component of the accumulator goes through the same n external products, so this is unchanged;
* the FFT kernel of the external product (:mod:`crossfhe.core.fourier`, float64) adds its rounding error,
  ``var_fft`` = c log2(N) (k + 1) l N (B^2 + 2) / 12 * (1/12) * 2^-106 per external product: the variance of a
  sum of (k + 1) l N products of a digit and a uniform key coefficient (mean square Q^2 / 12), times the
  float64 unit roundoff squared and log2(N) (the depth of the transforms), c = :data:`FFT_ERROR_CONSTANT`, an
  upper bound of the ratio of the measured error to this model against the exact NTT product, on XLA:CPU, on
  a GPU (cuFFT) and through the native CPU kernel, for the plain and the grouped step (tests/tfhe/test_fourier.py,
  test_grouping.py and test_native.py check it; the figures are in benchmarks/README.md). That is the
  error of each word of the product; in the phase b + <a, s> the k N mask errors meet the key, weight k N / 2
  on average, so the phase carries ``var_fft_phase`` = (k N / 2 + 1) var_fft (as the decomposition term does).
  The first step of a bootstrap is different: its accumulator is the test vector, whose long constant runs give
  digits of concentrated spectrum and an FFT error of concentrated spectrum that meets the key's mean
  coherently (tens of times a later step's); so the first step runs through the exact NTT whatever
  the kernel (:func:`crossfhe.tfhe.ops.pbs`). The bootstrap uses the FFT (``fft_kernel``) only where its
  rounding, over the whole blind rotation and weighted by nu^2, is at most 1/64 of the decision variance the
  exact product would give, or where p_fail with that rounding counted :data:`FFT_MARGIN` times over still meets
  2^-64, the floor every preset guarantees (P10: 2^-285.9 exact, 2^-176.6 with the FFT, 2^-83.5 with it four
  times), and ``var_cmux`` then includes it once: every preset (not, for example, a set of N 8192 with 28-bit
  digits, where the rounding would dominate; it bootstraps through the NTT). The second clause became the one
  that matters for P4 and P8 when the centered modulus switch shrank their decision variance;
* with grouping g > 1, a step of the blind rotation (one group) adds 2 (2^g - 1) times the digit and FFT
  phase terms (each of the 2^g - 1 products carries its own key noise, and X^e - 1 doubles a variance) plus
  twice the decomposition term (it meets the one indicator that is 1, times X^e - 1): ``var_step``. The
  output has n / g (rounded up) times that: for g = 2, three times the key noise of the plain blind
  rotation and the same decomposition error.

A bootstrap's input is a linear combination of bootstrap outputs with sum of squared weights at most
``max_norm2`` (``nu^2``, the budget the linear operations may spend). It decrypts wrongly when the error at
the blind rotation's input, variance ``var_decision`` = nu^2 var_pbs + (rounding Q -> 2^32) + (key switch)
+ (rounding 2^32 -> 2N'), exceeds Delta/2 = 1 / 2^(p+2) in absolute value:
p_fail = erfc(1 / (2^(p+2) sqrt(2 var_decision))). Tests measure the output noise of bootstraps and the
decision noise and check them against this model (tests/tfhe/test_noise.py).

Security (checked by :meth:`Params.__post_init__`): each LWE problem, the short key's (n, sigma_lwe / 2^32)
and the long key's (k N, sigma_glwe / Q), must be at least as hard as a published point: a TFHE-rs
parameter set (tfhe 1.8.2, ``shortint/parameters``: Gaussian noise, binary keys, modulus 2^64,
128-bit per the lattice estimator) of dimension <= ours and relative noise <= ours. Same dimension and
same relative noise are the published instance up to the modulus (2^32 and about 2^62 here, 2^64 there);
that the estimate depends on the noise rate and not on the modulus is an assumption TFHE-rs itself makes
for its 32-bit key switch. A set not covered is refused unless ``insecure=True``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
from dataclasses import dataclass
from functools import cached_property

from crossfhe.core import fourier
from crossfhe.errors import InsecureParametersError, ParameterError
from crossfhe.kernels import AUTO, KernelSet, as_kernel_set
from crossfhe.math import primes
from crossfhe.math.decompose import Gadget

KS_MODULUS_BITS = 32
"""The key switch runs modulo 2^32: uint32 arithmetic wraps, so it needs no modular reduction."""
FFT_ERROR_CONSTANT = 2.5
"""c of ``var_fft`` (module docstring): an upper bound of the measured ratio on XLA:CPU, the native CPU kernel
and a GPU (cuFFT), plain and grouped steps. Every preset keeps the FFT kernel."""
FFT_MARGIN = 4
"""The FFT's modeled rounding, counted this many times over, must still leave p_fail at most 2^P_FAIL_FLOOR
(``Params.fft_kernel``): a margin on c."""
P_FAIL_FLOOR = -64
"""log2 of the failure probability every preset guarantees at least (the 2^-128 family: its own, lower)."""

MAX_MESSAGE_BITS = 10
MAX_EXTENSION = 8
"""Largest nu (the accumulator has at most 2^8 components)."""
MAX_GROUPING = 3
"""Largest g of the grouped blind rotation (7 GGSWs per group)."""
MAX_ACC_SIZE = 2**20
"""Largest accumulator N' = 2^nu N (its test vector and each batch item's accumulator are (k + 1) L N' words)."""

PUBLISHED_LWE_POINTS: tuple[tuple[int, float], ...] = (
    (781, -16.78),  # V1_1_PARAM_MESSAGE_1_CARRY_1_KS_PBS_GAUSSIAN_2M64 (lwe std 8.868e-06)
    (833, -18.08),  # V1_1_PARAM_MESSAGE_2_CARRY_2_KS_PBS_GAUSSIAN_2M64 (3.616e-06)
    (977, -21.66),  # V1_1_PARAM_MESSAGE_3_CARRY_3_KS_PBS_GAUSSIAN_2M64 (3.014e-07)
    (1110, -24.97),  # V1_1_PARAM_MESSAGE_4_CARRY_4_KS_PBS_GAUSSIAN_2M64 (3.038e-08)
    (1267, -28.88),  # the 128-bit TFHE-rs set of largest LWE dimension in tfhe 1.8.2 (std 2.03e-09)
    (2048, -48.32),  # the GLWE of k N = 2048 (MESSAGE_2_CARRY_2, glwe std 2.845e-15)
    (4096, -62.0),  # GLWE of N >= 4096 (MESSAGE_3_CARRY_3 and up: glwe std 2.168e-19 = 2^-62)
)
"""(dimension, log2 of the noise standard deviation relative to the modulus) of published 128-bit
instances with binary keys (tfhe-rs 1.8.2 ``shortint`` parameters, Gaussian noise, modulus 2^64)."""


def _published_rate(dim: int) -> float | None:
    """log2 of the smallest published noise rate at a dimension <= dim (None: no point covers dim)."""
    rates = [r for d, r in PUBLISHED_LWE_POINTS if d <= dim]
    return min(rates) if rates else None


def lwe_is_published_secure(dim: int, log2_rate: float) -> bool:
    """Whether an LWE instance of this dimension and noise rate is covered by a published 128-bit point."""
    ref = _published_rate(dim)
    return ref is not None and log2_rate >= ref - 1e-9


@dataclass(frozen=True)
class Params:
    """Checked TFHE parameters (frozen, hashable: a ``jax.jit`` static argument). See the module docstring.

    ``moduli``: the GLWE primes (q = 1 mod 2N, below 2^31). ``extension``: nu, the blind rotation's
    accumulator has N' = 2^nu N coefficients (module docstring; 0: the plain blind rotation). ``grouping``:
    g, the blind rotation takes the key bits g at a time (module docstring; 1: one CMux per bit).
    ``glwe_sigma``: std of the GLWE and bootstrapping-key noise in absolute units of Q; ``lwe_sigma``: std of
    the key-switching-key noise in
    units of 2^32. ``max_norm2``: the sum of squared weights of the linear combination of bootstrap outputs
    a bootstrap may take as input (default 2^p: e.g. 2^p additions of fresh outputs). ``name``: for reprs
    and benchmark records. ``kernels``: the kernel set (``crossfhe.kernels.VECTOR``, ``NATIVE``, ``MATRIX``, or
    ``AUTO``, the default, resolved once where the server key is prepared: :func:`crossfhe.tfhe.ops.prepare`).
    """

    message_bits: int
    lwe_dim: int
    glwe_dim: int
    poly_size: int
    moduli: tuple[int, ...]
    glwe_sigma: float
    lwe_sigma: float
    pbs_gadget: Gadget
    ks_gadget: Gadget
    max_norm2: int | None = None
    name: str = ""
    insecure: bool = False
    kernels: KernelSet = AUTO
    extension: int = 0
    grouping: int = 1

    def __post_init__(self):
        p, n, k, big_n = self.message_bits, self.lwe_dim, self.glwe_dim, self.poly_size
        try:
            object.__setattr__(self, "kernels", as_kernel_set(self.kernels))
        except ValueError as e:
            raise ParameterError(str(e)) from None
        ints = (("message_bits", p), ("lwe_dim", n), ("glwe_dim", k), ("poly_size", big_n))
        for what, v in ints + (("extension", self.extension), ("grouping", self.grouping)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise ParameterError(f"{what} must be an int, got {v!r}")
        if not 1 <= p <= MAX_MESSAGE_BITS:
            raise ParameterError(f"message_bits must be in [1, {MAX_MESSAGE_BITS}], got {p}")
        if big_n < 16 or big_n & (big_n - 1) or big_n > 2**17:
            raise ParameterError(f"poly_size N must be a power of two in [16, 2^17], got {big_n}")
        if not 0 <= self.extension <= MAX_EXTENSION or (big_n << self.extension) > MAX_ACC_SIZE:
            raise ParameterError(
                f"extension must be in [0, {MAX_EXTENSION}] with 2^extension N <= 2^{MAX_ACC_SIZE.bit_length() - 1}, "
                f"got {self.extension} at N = {big_n}"
            )
        if not 1 <= self.grouping <= MAX_GROUPING:
            raise ParameterError(f"grouping must be in [1, {MAX_GROUPING}], got {self.grouping}")
        if 2 * self.acc_size < 2 ** (p + 1):
            raise ParameterError(
                f"poly_size N = {big_n} with extension {self.extension} is too small for {p}-bit messages: need "
                f"2 N 2^extension >= 2^(p+1)"
            )
        if n < 1 or k < 1:
            raise ParameterError(f"lwe_dim and glwe_dim must be >= 1, got {n}, {k}")
        if not self.moduli or len(set(self.moduli)) != len(self.moduli):
            raise ParameterError(f"moduli must be distinct primes, got {self.moduli}")
        for q in self.moduli:
            if not (2**20 < q < 2**31) or (q - 1) % (2 * big_n) or not primes.is_prime(q):
                raise ParameterError(f"modulus {q} is not an NTT-friendly prime in (2^20, 2^31) for N = {big_n}")
        if not isinstance(self.pbs_gadget, Gadget) or not isinstance(self.ks_gadget, Gadget):
            raise ParameterError("pbs_gadget and ks_gadget must be crossfhe.math.decompose.Gadget values")
        if self.pbs_gadget.base_log * self.pbs_gadget.levels > self.big_q.bit_length():
            raise ParameterError(f"pbs_gadget {self.pbs_gadget} covers more bits than Q has ({self.log_q:.1f})")
        if self.ks_gadget.base_log * self.ks_gadget.levels > KS_MODULUS_BITS or self.ks_gadget.base_log > 8:
            raise ParameterError(
                f"ks_gadget {self.ks_gadget}: base_log <= 8 and base_log * levels <= {KS_MODULUS_BITS} (mod 2^32)"
            )
        if not (self.glwe_sigma > 0 and self.lwe_sigma > 0):
            raise ParameterError("glwe_sigma and lwe_sigma must be positive")
        if self.max_norm2 is not None and (not isinstance(self.max_norm2, int) or self.max_norm2 < 1):
            raise ParameterError(f"max_norm2 must be an int >= 1, got {self.max_norm2!r}")
        if not self.insecure:
            self._check_security()

    def _check_security(self) -> None:
        checks = (
            ("short LWE key", self.lwe_dim, math.log2(self.lwe_sigma) - KS_MODULUS_BITS),
            ("GLWE key", self.glwe_dim * self.poly_size, math.log2(self.glwe_sigma) - self.log_q),
        )
        for what, dim, rate in checks:
            if not lwe_is_published_secure(dim, rate):
                ref = _published_rate(dim)
                need = "no published 128-bit point at this dimension" if ref is None else f"need >= {ref:.2f}"
                raise InsecureParametersError(
                    f"{what}: dimension {dim} with noise rate 2^{rate:.2f} is not covered by a published 128-bit "
                    f"instance ({need}; tfhe.params.PUBLISHED_LWE_POINTS); pass insecure=True for tests"
                )

    # ---------------------------------------------------------------------------------------------
    # derived sizes
    # ---------------------------------------------------------------------------------------------

    @property
    def big_q(self) -> int:
        return math.prod(self.moduli)

    @property
    def log_q(self) -> float:
        return math.log2(self.big_q)

    @property
    def acc_size(self) -> int:
        """N' = 2^nu N: the coefficients of the blind rotation's accumulator (the modulus switch goes to 2N')."""
        return self.poly_size << self.extension

    @property
    def long_dim(self) -> int:
        """k N: the dimension of the LWE ciphertexts between bootstraps."""
        return self.glwe_dim * self.poly_size

    @property
    def groups(self) -> int:
        """Steps of the blind rotation: ceil(n / g) groups of key bits (the last one padded with zeros)."""
        return -(-self.lwe_dim // self.grouping)

    @property
    def ggsw_count(self) -> int:
        """GGSWs in the bootstrapping key: n, or 2^g - 1 per group with grouping g > 1."""
        return self.lwe_dim if self.grouping == 1 else self.groups * ((1 << self.grouping) - 1)

    @property
    def delta(self) -> int:
        """Delta = round(Q / 2^(p+1)): a message m is carried as m Delta (one padding bit)."""
        return (self.big_q + (1 << self.message_bits)) >> (self.message_bits + 1)

    @property
    def norm2(self) -> int:
        """The sum of squared weights the linear operations may spend before a bootstrap (``max_norm2``)."""
        return self.max_norm2 if self.max_norm2 is not None else 2**self.message_bits

    # ---------------------------------------------------------------------------------------------
    # noise model (module docstring); variances on the torus
    # ---------------------------------------------------------------------------------------------

    @cached_property
    def var_fresh(self) -> float:
        return (self.glwe_sigma / self.big_q) ** 2

    @cached_property
    def var_round_q(self) -> float:
        return (self.long_dim / 2 + 1) / (12 * 4.0**KS_MODULUS_BITS)

    @cached_property
    def var_ks(self) -> float:
        g = self.ks_gadget
        digits = self.long_dim * g.levels * (g.base**2 + 2) / 12 * (self.lwe_sigma / 2**KS_MODULUS_BITS) ** 2
        dropped = self.long_dim / 2 * 4.0 ** -(g.base_log * g.levels) / 12
        return digits + dropped

    @property
    def centered_modulus_switch(self) -> bool:
        """Whether the rounding 2^32 -> 2N' takes the mean of its error over the key off b (module docstring): where
        n < 2N', so that the sum of the n errors fits an int32."""
        return self.lwe_dim < 2 * self.acc_size

    @cached_property
    def var_round_2n(self) -> float:
        weight = 4 if self.centered_modulus_switch else 2
        return (self.lwe_dim / weight + 1) / (12 * (2 * self.acc_size) ** 2)

    @cached_property
    def var_cmux(self) -> float:
        """Noise of one CMux external product as bootstraps compute it (with ``var_fft_phase`` if
        ``fft_kernel``)."""
        return self.var_cmux_exact + (self.var_fft_phase if self.fft_kernel else 0.0)

    @cached_property
    def var_fft(self) -> float:
        """Rounding variance of one external product through the float64 FFT (module docstring)."""
        g, k, big_n = self.pbs_gadget, self.glwe_dim, self.poly_size
        terms = (k + 1) * g.levels * big_n * (g.base**2 + 2) / 12 / 12
        return FFT_ERROR_CONSTANT * math.log2(big_n) * terms * 2.0**-106

    @cached_property
    def var_fft_phase(self) -> float:
        """The phase variance of one product's FFT rounding: (k N / 2 + 1) ``var_fft`` (module docstring)."""
        return (self.glwe_dim * self.poly_size / 2 + 1) * self.var_fft

    @cached_property
    def fft_kernel(self) -> bool:
        """Whether bootstraps run their external products through the FFT: where the modulus suits it
        (Q < 2^63) and its rounding over the blind rotation, weighted by nu^2, is at most 1/64 of the decision
        variance with exact products, or p_fail with it :data:`FFT_MARGIN` times over is at most 2^-64 (module
        docstring)."""
        suits = fourier.supports(self.moduli, self.poly_size, self.pbs_gadget, self.glwe_dim)
        exact, fft = self._step_terms
        rest = self.var_round_q + self.var_ks + self.var_round_2n
        decision_exact = self.norm2 * max(self.groups * exact, self.var_fresh) + rest
        extra = self.norm2 * self.groups * fft
        return suits and (extra <= decision_exact / 64
                          or self._log2_p_fail_at(decision_exact + FFT_MARGIN * extra) <= P_FAIL_FLOOR)

    @cached_property
    def var_cmux_exact(self) -> float:
        """Noise of one CMux external product computed exactly (the NTT kernel)."""
        return self._var_digits + self._var_dropped

    @cached_property
    def _var_digits(self) -> float:
        g, k, big_n = self.pbs_gadget, self.glwe_dim, self.poly_size
        return (k + 1) * g.levels * big_n * (g.base**2 + 2) / 12 * self.var_fresh

    @cached_property
    def _var_dropped(self) -> float:
        g, k, big_n = self.pbs_gadget, self.glwe_dim, self.poly_size
        return (k * big_n / 2 + 1) * 4.0 ** -(g.base_log * g.levels) / 12

    @cached_property
    def _step_terms(self) -> tuple[float, float]:
        """(exact, FFT rounding) noise of one step of the blind rotation (module docstring)."""
        if self.grouping == 1:
            return self.var_cmux_exact, self.var_fft_phase
        twice = 2 * ((1 << self.grouping) - 1)
        return twice * self._var_digits + 2 * self._var_dropped, twice * self.var_fft_phase

    @cached_property
    def var_step_fft(self) -> float:
        """The FFT's rounding in one step's noise: ``var_fft_phase``, or 2 (2^g - 1) of it for a group (part of
        ``var_step`` where ``fft_kernel``)."""
        return self._step_terms[1]

    @cached_property
    def var_step(self) -> float:
        """Noise one step of the blind rotation adds: ``var_cmux`` (g = 1), or for a group of g > 1 bits
        2 (2^g - 1) (digits + FFT rounding) + 2 (decomposition error) (module docstring)."""
        exact, fft = self._step_terms
        return exact + (fft if self.fft_kernel else 0.0)

    @cached_property
    def var_pbs(self) -> float:
        """Variance of a bootstrap's output (n CMux steps, or n / g group steps, from a noiseless test vector)."""
        return self.groups * self.var_step

    def var_decision(self, norm2: float | None = None) -> float:
        """Variance of the error at the blind rotation's input, the input having squared norm ``norm2``."""
        nu2 = self.norm2 if norm2 is None else norm2
        return nu2 * max(self.var_pbs, self.var_fresh) + self.var_round_q + self.var_ks + self.var_round_2n

    def log2_p_fail(self, norm2: float | None = None) -> float:
        """log2 of the probability that one bootstrap decrypts wrongly (module docstring)."""
        return self._log2_p_fail_at(self.var_decision(norm2))

    def _log2_p_fail_at(self, var_decision: float) -> float:
        z = 1.0 / (2 ** (self.message_bits + 2) * math.sqrt(2 * var_decision))
        return _log2_erfc(z)

    # ---------------------------------------------------------------------------------------------
    # key sizes
    # ---------------------------------------------------------------------------------------------

    @property
    def bsk_bytes(self) -> int:
        """Bootstrapping key: ``ggsw_count`` GGSW of (k+1) l x (k+1) polynomials, len(moduli) uint32 limbs each."""
        k1, g = self.glwe_dim + 1, self.pbs_gadget
        return self.ggsw_count * k1 * g.levels * k1 * len(self.moduli) * self.poly_size * 4

    @property
    def ksk_bytes(self) -> int:
        """Key-switching key: k N l_ks LWE ciphertexts of dimension n mod 2^32."""
        return self.long_dim * self.ks_gadget.levels * (self.lwe_dim + 1) * 4

    @staticmethod
    def from_literal(lit: ParamsLiteral) -> Params:
        """The checked parameters of a :class:`ParamsLiteral`: the primes chosen, the noise made absolute, every
        check of ``__post_init__`` run (security included)."""
        return _from_literal(lit)

    def with_kernels(self, kernels) -> Params:
        """These parameters on another kernel set (``crossfhe.kernels.VECTOR``, ``NATIVE``, ``MATRIX`` or ``AUTO``,
        or their names): the NTTs run on it, and on ``NATIVE`` the grouped FFT blind rotation runs in the native
        CPU kernel; the set is resolved once where the keys are made (:func:`crossfhe.tfhe.ops.prepare`).
        Ciphertexts and keys are bit-identical across sets (the FFT blind rotation's words within its rounding)
        and the digest is unchanged."""
        return dataclasses.replace(self, kernels=kernels)

    def digest(self) -> str:
        """SHA-256 of the fields that define the ciphertext format (serialization headers)."""
        fields = (
            "tfhe",
            self.message_bits,
            self.lwe_dim,
            self.glwe_dim,
            self.poly_size,
            self.moduli,
            repr(self.glwe_sigma),
            repr(self.lwe_sigma),
            (self.pbs_gadget.base_log, self.pbs_gadget.levels),
            (self.ks_gadget.base_log, self.ks_gadget.levels),
        ) + ((("extension", self.extension),) if self.extension else ())  # nu = 0: the digests of before nu
        fields += (("grouping", self.grouping),) if self.grouping != 1 else ()  # likewise g = 1
        return hashlib.sha256(repr(fields).encode()).hexdigest()

    def __repr__(self) -> str:
        return (
            f"tfhe.Params({self.name + ', ' if self.name else ''}p={self.message_bits}, n={self.lwe_dim}, "
            f"k={self.glwe_dim}, N={self.poly_size}{f' x 2^{self.extension}' if self.extension else ''}, "
            f"{f'grouping={self.grouping}, ' if self.grouping != 1 else ''}"
            f"log2 Q={self.log_q:.1f} ({len(self.moduli)} primes), "
            f"pbs={self.pbs_gadget.base_log}x{self.pbs_gadget.levels}, ks={self.ks_gadget.base_log}x"
            f"{self.ks_gadget.levels}, log2 p_fail={self.log2_p_fail():.1f}{', insecure' if self.insecure else ''})"
        )


LOG2_P_FAIL = -64
"""The failure probability a bootstrap may have (log2, per bootstrap): the presets' target, the bound
:func:`noise_budget` keeps."""

_MAX_NOISE = 1 << 40


@functools.cache
def noise_budget(params: Params) -> int:
    """The most noise a value may carry where a bootstrap reads it (a lookup's input) or it is decrypted, on
    ``params``, in bootstraps' output variances (a fresh encryption counts 1, ``x * c`` c^2 times x's, ``x + y`` the
    sum over independent sources): ``params.norm2``, where the presets quote their failure probability, or more as
    long as a bootstrap of it fails with probability at most 2^:data:`LOG2_P_FAIL` (``params.log2_p_fail``); at most
    2^40."""
    def ok(norm2: int) -> bool:
        return params.log2_p_fail(norm2) <= LOG2_P_FAIL

    good = params.norm2
    if not ok(good):
        return good
    bad = 2 * good
    while ok(bad):
        if bad >= _MAX_NOISE:
            return _MAX_NOISE
        good, bad = bad, 2 * bad
    while bad - good > 1:  # log2_p_fail grows with the noise: bisect the last good value
        mid = (good + bad) // 2
        good, bad = (mid, bad) if ok(mid) else (good, mid)
    return good


def _log2_erfc(z: float) -> float:
    """log2 erfc(z), accurate in the far tail (asymptotic series where erfc underflows)."""
    if z < 20:
        v = math.erfc(z)
        if v > 0:
            return math.log2(v)
    # erfc(z) ~ exp(-z^2) / (z sqrt(pi)) (1 - 1/(2z^2) + 3/(4z^4))
    return (-(z * z) - math.log(z * math.sqrt(math.pi)) + math.log1p(-1 / (2 * z * z) + 3 / (4 * z**4))) / math.log(2)


@dataclass(frozen=True)
class ParamsLiteral:
    """What a user asks for; :meth:`Params.from_literal` checks it and chooses the primes (as CKKS's and BFV's
    literals). message_bits: p. lwe_dim: n, the short key. glwe_dim, poly_size: k and N of the long key.
    limbs: how many 31-bit NTT primes for N make Q (the largest ones). The GLWE noise is an absolute
    ``glwe_sigma`` or a rate ``glwe_log2_rate`` (sigma = 2^rate Q), exactly one of them; the key-switching noise a
    rate ``lwe_log2_rate`` (sigma = 2^rate 2^32). pbs, ks: (base_log, levels) of the gadgets. max_norm2, name,
    insecure, extension (nu), grouping (g): as :class:`Params`."""

    message_bits: int
    lwe_dim: int
    glwe_dim: int
    poly_size: int
    lwe_log2_rate: float
    pbs: tuple[int, int]
    ks: tuple[int, int]
    limbs: int = 2
    glwe_sigma: float | None = None
    glwe_log2_rate: float | None = None
    max_norm2: int | None = None
    name: str = ""
    insecure: bool = False
    extension: int = 0
    grouping: int = 1


def _from_literal(lit: ParamsLiteral) -> Params:
    if not isinstance(lit, ParamsLiteral):
        raise TypeError(f"from_literal takes a tfhe.params.ParamsLiteral, got {type(lit).__name__}")
    moduli = primes.ntt_primes(31, lit.poly_size, lit.limbs)
    big_q = math.prod(moduli)
    if (lit.glwe_sigma is None) == (lit.glwe_log2_rate is None):
        raise ParameterError("give exactly one of glwe_sigma and glwe_log2_rate")
    glwe_sigma = 2.0**lit.glwe_log2_rate * big_q if lit.glwe_sigma is None else lit.glwe_sigma
    return Params(
        message_bits=lit.message_bits,
        lwe_dim=lit.lwe_dim,
        glwe_dim=lit.glwe_dim,
        poly_size=lit.poly_size,
        moduli=moduli,
        glwe_sigma=float(glwe_sigma),
        lwe_sigma=2.0**lit.lwe_log2_rate * 2**KS_MODULUS_BITS,
        pbs_gadget=Gadget(*lit.pbs),
        ks_gadget=Gadget(*lit.ks),
        max_norm2=lit.max_norm2,
        name=lit.name,
        insecure=lit.insecure,
        extension=lit.extension,
        grouping=lit.grouping,
    )


def make(message_bits: int, **fields) -> Params:
    """``Params.from_literal(ParamsLiteral(message_bits, **fields))``: the keyword form the presets use."""
    return Params.from_literal(ParamsLiteral(message_bits, **fields))
