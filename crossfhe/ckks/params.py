"""CKKS parameters: a literal, then a checked, frozen, hashable set.

A CKKS ciphertext modulus chain on 32-bit words is

    Q_L = (base primes) x (level L's scale primes) x ... x (level 1's scale primes),

and a ciphertext at level l holds the base primes and the scale primes of levels 1..l, in that order:
``moduli_at(l) = q[: base_count + l * primes_per_level]``. Rescaling at level l divides by the last
``primes_per_level`` primes, whose product is close to the scale Delta = 2^log_scale, and drops them.
With ``primes_per_level = 2`` (composite scaling) a scale of 2^40-2^60 rests on two primes of 20-30 bits
each, so precision does not need 64-bit words. The special primes P (hybrid key switching, dnum digits)
follow the chain. The base primes hold the result of a computation at level 0, so their product must
exceed the scale with room for the message.

Scale primes are chosen close to 2^(log_scale / primes_per_level), alternately above and below, so the
scale stays near Delta after every rescale (its exact value is tracked in each ciphertext).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass

from crossfhe.core.params import RingParams, SecretDistribution, SecurityLevel
from crossfhe.errors import ParameterError
from crossfhe.math import primes

MESSAGE_HEADROOM_BITS = 10
"""Bits the base primes must hold beyond the scale: |message| < 2^10 at level 0 decrypts without wrap."""


@dataclass(frozen=True)
class ParamsLiteral:
    """What a user asks for; :meth:`Params.from_literal` checks it and chooses the primes.

    log_n: ring degree 2^log_n. levels: multiplicative depth L (number of rescales). log_scale: log2 of
    the scale Delta. primes_per_level: 1, or 2 for composite scaling (default: 1 if log_scale <= 30,
    else 2). base_bits: bit sizes of the base primes (default: enough 31-bit primes to exceed
    log_scale + 10 bits). special_bits: bit sizes of the special primes P (default: enough 31-bit primes
    to exceed the largest key-switching digit). dnum: number of key-switching digits.
    hamming_weight: None for a uniform ternary secret, else a fixed Hamming weight (a sparse secret: accepted
    as secure only where a published estimate covers it, :data:`crossfhe.core.params.SPARSE_ESTIMATES`).
    bootstrap_levels: the top levels reserved for bootstrapping (:mod:`crossfhe.ckks.bootstrap`); fresh
    encryptions go to level ``levels - bootstrap_levels``. wide_levels: how many of the top levels rest on
    primes near 2^wide_bits instead of 2^(log_scale / primes_per_level) (bootstrapping's CoeffToSlot and
    EvalMod run there, at a scale near 2^(wide_bits primes_per_level), for precision). compact_keys: the form
    bootstrapping keys take by default (:attr:`Params.compact_keys`).
    """

    log_n: int
    levels: int
    log_scale: int
    dnum: int = 1
    primes_per_level: int | None = None
    base_bits: tuple[int, ...] | None = None
    special_bits: tuple[int, ...] | None = None
    hamming_weight: int | None = None
    security: SecurityLevel = SecurityLevel.BITS_128
    insecure: bool = False
    bootstrap_levels: int = 0
    wide_levels: int = 0
    wide_bits: int = 30
    compact_keys: bool = False


@dataclass(frozen=True)
class Params:
    """Checked CKKS parameters (frozen, hashable: usable as a ``jax.jit`` static argument).

    ``ring`` holds N, the ciphertext primes q (base first, then the scale primes of levels 1..L) and the
    special primes p, the secret's distribution (``ring.hamming_weight``), and carries the security check.
    Build with :meth:`from_literal`.

    ``compact_keys``: how bootstrapping keys are made and held unless the caller says otherwise
    (:func:`crossfhe.ckks.bootstrap.keygen`, ``CKKSContext.create``): True for their compact form
    (:meth:`crossfhe.ckks.bootstrap.Keys.compact`: half the memory, each key switch making its key's uniform half
    from a seed), False for whole keys. Like the kernel set, it decides how the keys are held, never a result, and is
    not part of :meth:`digest`.
    """

    ring: RingParams
    levels: int
    log_scale: int
    primes_per_level: int
    base_count: int
    dnum: int
    bootstrap_levels: int = 0
    compact_keys: bool = False

    def __post_init__(self):
        q = self.ring.q
        if not isinstance(self.compact_keys, bool):
            raise ParameterError(f"compact_keys must be True or False, got {self.compact_keys!r}")
        if self.levels < 1:
            raise ParameterError(f"levels must be >= 1, got {self.levels}")
        if not 0 <= self.bootstrap_levels < self.levels:
            raise ParameterError(
                f"bootstrap_levels must be in [0, levels = {self.levels}) (at least one level left for computation), "
                f"got {self.bootstrap_levels}")
        if self.primes_per_level not in (1, 2):
            raise ParameterError(f"primes_per_level must be 1 or 2, got {self.primes_per_level}")
        if len(q) != self.base_count + self.levels * self.primes_per_level:
            raise ParameterError(
                f"{len(q)} ciphertext primes do not make {self.base_count} base primes plus {self.levels} levels "
                f"of {self.primes_per_level}"
            )
        if not 1 <= self.dnum <= len(q):
            raise ParameterError(f"dnum must be in [1, {len(q)}] (the number of ciphertext primes), got {self.dnum}")
        digit = math.ceil(len(q) / self.dnum)
        if not self.ring.p:
            raise ParameterError("CKKS key switching needs at least one special prime")
        log_p = sum(math.log2(p) for p in self.ring.p)
        log_digit = max(sum(math.log2(x) for x in q[i : i + digit]) for i in range(0, len(q), digit))
        if log_p < log_digit - 1:  # key-switching noise grows with digit / P: at most 2x here
            raise ParameterError(
                f"the special primes (log2 P = {log_p:.1f}) must cover the largest key-switching digit "
                f"(log2 = {log_digit:.1f}, {digit} primes with dnum = {self.dnum}); add special primes or raise dnum"
            )
        log_base = sum(math.log2(x) for x in q[: self.base_count])
        if log_base < self.log_scale + 1:
            raise ParameterError(
                f"the base primes (log2 = {log_base:.1f}) must exceed the scale 2^{self.log_scale} (by about "
                f"{MESSAGE_HEADROOM_BITS} bits for messages up to 2^{MESSAGE_HEADROOM_BITS}) so that results "
                f"decrypt at level 0"
            )

    @classmethod
    def from_literal(cls, lit: ParamsLiteral) -> Params:
        n = 1 << lit.log_n
        ppl = lit.primes_per_level or (1 if lit.log_scale <= 30 else 2)
        if ppl not in (1, 2):
            raise ParameterError(f"primes_per_level must be 1 or 2, got {ppl}")
        bits = lit.log_scale / ppl
        if not 0 <= lit.wide_levels <= lit.bootstrap_levels:
            raise ParameterError(
                f"wide_levels must be in [0, bootstrap_levels = {lit.bootstrap_levels}], got {lit.wide_levels}")
        if lit.wide_levels and not 17 <= lit.wide_bits <= 31:
            raise ParameterError(f"wide_bits must be in [17, 31], got {lit.wide_bits}")
        if not 17 <= bits <= 31:
            raise ParameterError(
                f"log_scale {lit.log_scale} with {ppl} prime(s) per level needs primes of {bits:.1f} bits; "
                f"use 17-31 bits per prime (composite scaling: primes_per_level=2 for scales above 2^31)"
            )
        base_bits = lit.base_bits or (31,) * math.ceil((lit.log_scale + MESSAGE_HEADROOM_BITS) / 31)
        used: list[int] = []
        base = _take_primes(base_bits, n, used)
        scale_primes = _scale_primes(round(bits), n, (lit.levels - lit.wide_levels) * ppl, used)
        if lit.wide_levels:
            scale_primes += _scale_primes(lit.wide_bits, n, lit.wide_levels * ppl, used)
        q = base + scale_primes
        dnum = lit.dnum
        digit = math.ceil(len(q) / dnum)
        log_digit = max(sum(math.log2(x) for x in q[i : i + digit]) for i in range(0, len(q), digit))
        special_bits = lit.special_bits or (31,) * max(1, math.ceil((log_digit - 1) / 31))
        p = _take_primes(special_bits, n, used)
        secret = SecretDistribution.TERNARY
        ring = RingParams(n=n, q=q, p=p, security=lit.security, secret=secret, insecure=lit.insecure,
                          hamming_weight=lit.hamming_weight)
        return cls(ring, lit.levels, lit.log_scale, ppl, len(base), dnum, lit.bootstrap_levels, lit.compact_keys)

    @property
    def n(self) -> int:
        return self.ring.n

    @property
    def hamming_weight(self) -> int | None:
        """The secret's fixed Hamming weight, or None for a uniform ternary secret."""
        return self.ring.hamming_weight

    @property
    def kernels(self):
        """The kernel set the evaluation operators run on (:mod:`crossfhe.kernels`; default AUTO, resolved once
        per process by :func:`crossfhe.kernels.default_kernels`)."""
        return self.ring.kernels

    def with_kernels(self, kernels) -> Params:
        """These parameters on another kernel set: ``crossfhe.kernels.MATRIX`` (the CROSS int8 matrix
        lowering, for matrix engines), ``NATIVE`` (the CPU custom calls), ``VECTOR`` (XLA radix-2) or
        ``AUTO``. Ciphertexts and keys are bit-identical on any, and the digest (serialization) does not
        change. Key switching, rescale,
        multiplication, rotation, encoding and encryption use the set; key generation and decryption run the
        radix-2 kernels on either (client-side work, the same words)."""
        return dataclasses.replace(self, ring=self.ring.with_kernels(kernels))

    @property
    def user_levels(self) -> int:
        """The level fresh encryptions start at: ``levels - bootstrap_levels`` (the levels left for computation
        after each bootstrap, :mod:`crossfhe.ckks.bootstrap`); ``levels`` for a set that does not bootstrap."""
        return self.levels - self.bootstrap_levels

    @property
    def slots(self) -> int:
        return self.ring.n // 2

    @property
    def q(self) -> tuple[int, ...]:
        return self.ring.q

    @property
    def p(self) -> tuple[int, ...]:
        return self.ring.p

    @property
    def scale(self) -> float:
        return float(2**self.log_scale)

    @property
    def log_pq(self) -> float:
        return self.ring.log_pq

    def moduli_at(self, level: int) -> tuple[int, ...]:
        """The ciphertext primes of a ciphertext at ``level`` (0 <= level <= levels)."""
        if not 0 <= level <= self.levels:
            raise ParameterError(f"level must be in [0, {self.levels}], got {level}")
        return self.q[: self.base_count + level * self.primes_per_level]

    def level_of(self, limbs: int) -> int:
        """The level of a ciphertext with ``limbs`` ciphertext primes."""
        level, rest = divmod(limbs - self.base_count, self.primes_per_level)
        if rest or not 0 <= level <= self.levels:
            raise ParameterError(f"{limbs} limbs is not a level of these parameters")
        return level

    def rescale_primes(self, level: int) -> tuple[int, ...]:
        """The primes a rescale at ``level`` (>= 1) divides by and drops."""
        moduli = self.moduli_at(level)
        if level < 1:
            raise ParameterError("a ciphertext at level 0 cannot be rescaled: the levels are exhausted")
        return moduli[-self.primes_per_level :]

    def digest(self) -> str:
        """SHA-256 of the ring's canonical encoding and the CKKS fields (for serialization headers)."""
        extra = f"ckks:{self.levels}:{self.log_scale}:{self.primes_per_level}:{self.base_count}:{self.dnum}:"
        extra += f"{self.hamming_weight}"
        if self.bootstrap_levels:
            extra += f":boot{self.bootstrap_levels}"
        return hashlib.sha256(self.ring.canonical_encoding() + extra.encode()).hexdigest()


def _take_primes(bits: tuple[int, ...], n: int, used: list[int]) -> tuple[int, ...]:
    out = []
    for b in bits:
        q = primes.ntt_primes(b, n, 1, exclude=used)[0]
        used.append(q)
        out.append(q)
    return tuple(out)


def _scale_primes(bits: int, n: int, count: int, used: list[int]) -> tuple[int, ...]:
    """``count`` NTT primes near 2^bits, alternately above and below it (so scales stay near Delta)."""
    try:
        chosen = primes.ntt_primes_near(bits, n, count, exclude=used)
    except ParameterError as e:
        raise ParameterError(
            f"not enough NTT-friendly primes near 2^{bits} for N = {n} ({count} needed): {e}; "
            f"use a larger scale per prime or fewer levels"
        ) from e
    used.extend(chosen)
    return tuple(chosen)
