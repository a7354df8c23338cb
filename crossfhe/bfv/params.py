"""BFV parameters: a literal, then a checked, frozen, hashable set.

RNS BFV (Fan-Vercauteren, with the RNS variant of Halevi, Polyakov and Shoup) on 32-bit words: the
ciphertext modulus Q = q_0 ... q_{L-1} is a product of NTT primes below 2^31, the special primes
P = p_0 ... p_{K-1} serve hybrid key switching with ``dnum`` digits (:mod:`crossfhe.core.keyswitch`, the
same code as CKKS), and the plaintext modulus t is any integer 2 <= t < min(q) (coefficient encoding);
batch encoding (N slots as a 2 x N/2 matrix) needs t prime with t = 1 (mod 2N).

A message m in Z_t[X]/(X^N + 1) is carried as Delta m with Delta = floor(Q / t); a ciphertext (c0, c1)
over Q decrypts to m = round(t [c0 + c1 s]_Q / Q) mod t while the invariant noise
v = t [c0 + c1 s]_Q / Q - m (mod t) has |v| < 1/2. The noise budget is -log2(2 max|v|) bits.

Multiplication (HPS) extends both operands exactly from Q to Q ∪ R, where R is a set of auxiliary NTT
primes with R > 8 t N Q (so the tensor times t fits in Q R with room), forms the tensor there, and
divides by Q/t with rounding: a ModDown by Q of t times the tensor (:mod:`crossfhe.bfv.ops`). R is
chosen once per parameter set (:meth:`Params.mult_primes`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass
from functools import cached_property

from crossfhe.core.params import RingParams, RingParamsLiteral, SecurityLevel
from crossfhe.errors import ParameterError
from crossfhe.math import primes

MIN_NOISE_ROOM_BITS = 10
"""log2(Q / t) must be at least this: below it a fresh ciphertext would have almost no noise budget."""


@dataclass(frozen=True)
class ParamsLiteral:
    """What a user asks for; :meth:`Params.from_literal` checks it and chooses the primes.

    log_n: ring degree N = 2^log_n. q_bits / q: sizes of the ciphertext primes, or the primes themselves
    (e.g. sparse 2^a + 2^b + 1 primes). p_bits / p: the same for the special primes (at least one).
    plain_modulus: t. Or ``plain_bits``: t is then the largest prime of that many bits with t = 1 (mod 2N)
    (batching). dnum: key-switching digits (default: L, one prime per digit). hamming_weight: None for a
    uniform ternary secret, else a fixed Hamming weight.
    """

    log_n: int
    q_bits: tuple[int, ...] = ()
    p_bits: tuple[int, ...] = ()
    plain_modulus: int | None = None
    plain_bits: int | None = None
    dnum: int | None = None
    q: tuple[int, ...] | None = None
    p: tuple[int, ...] | None = None
    hamming_weight: int | None = None
    security: SecurityLevel = SecurityLevel.BITS_128
    insecure: bool = False


@dataclass(frozen=True)
class Params:
    """Checked BFV parameters (frozen, hashable: usable as a ``jax.jit`` static argument).

    ``ring``: N, the ciphertext primes q, the special primes p, security, the secret's Hamming weight
    (``ring.hamming_weight``, None for a uniform ternary secret). ``t``: the plaintext modulus.
    ``dnum``: key-switching digits. Build with :meth:`from_literal` or directly.
    Invariants: 2 <= t < min(q) and t < 2^31; log2(Q / t) >= ``MIN_NOISE_ROOM_BITS``; at least one
    special prime, and P covers the largest key-switching digit (within a factor 2).
    """

    ring: RingParams
    t: int
    dnum: int

    def __post_init__(self):
        q, p = self.ring.q, self.ring.p
        t = self.t
        if isinstance(t, bool) or not isinstance(t, int):
            raise ParameterError(f"plain_modulus t = {t!r} must be an int")
        if not 2 <= t < min(q):
            raise ParameterError(
                f"plain_modulus t = {t} must satisfy 2 <= t < min(q) = {min(q)} (messages are lifted word by word)"
            )
        if self.ring.log_q - math.log2(t) < MIN_NOISE_ROOM_BITS:
            raise ParameterError(
                f"log2(Q / t) = {self.ring.log_q - math.log2(t):.1f} bits leaves no room for noise (need >= "
                f"{MIN_NOISE_ROOM_BITS}): use more or larger ciphertext primes or a smaller t"
            )
        if not p:
            raise ParameterError("BFV key switching needs at least one special prime (p is empty)")
        if isinstance(self.dnum, bool) or not isinstance(self.dnum, int) or not 1 <= self.dnum <= len(q):
            raise ParameterError(f"dnum = {self.dnum!r} must be an int in [1, L = {len(q)}]")
        digit = math.ceil(len(q) / self.dnum)
        log_digit = max(sum(math.log2(x) for x in q[i : i + digit]) for i in range(0, len(q), digit))
        if self.ring.log_p < log_digit - 1:
            raise ParameterError(
                f"the special primes (log2 P = {self.ring.log_p:.1f}) must cover the largest key-switching digit "
                f"(log2 = {log_digit:.1f}, {digit} primes with dnum = {self.dnum}); add special primes or raise dnum"
            )

    @classmethod
    def from_literal(cls, lit: ParamsLiteral) -> Params:
        """Choose the primes a literal asks for and check the result (raises ParameterError)."""
        if (lit.plain_modulus is None) == (lit.plain_bits is None):
            raise ParameterError("give exactly one of plain_modulus (t) and plain_bits (a batching prime t)")
        ring = RingParams.from_literal(
            RingParamsLiteral(
                log_n=lit.log_n,
                q_bits=lit.q_bits,
                p_bits=lit.p_bits,
                q=lit.q,
                p=lit.p,
                security=lit.security,
                insecure=lit.insecure,
                hamming_weight=lit.hamming_weight,
            )
        )
        if lit.plain_modulus is not None:
            t = lit.plain_modulus
        else:
            try:
                t = primes.ntt_primes(int(lit.plain_bits), ring.n, 1, exclude=ring.moduli)[0]
            except ParameterError as e:
                why = f"no {lit.plain_bits}-bit batching prime t = 1 (mod 2N) for N = {ring.n}: {e}"
                raise ParameterError(why) from e
        dnum = len(ring.q) if lit.dnum is None else lit.dnum
        return cls(ring=ring, t=t, dnum=dnum)

    @property
    def hamming_weight(self) -> int | None:
        """The secret's fixed Hamming weight, or None for a uniform ternary secret."""
        return self.ring.hamming_weight

    @property
    def n(self) -> int:
        return self.ring.n

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
    def q(self) -> tuple[int, ...]:
        return self.ring.q

    @property
    def p(self) -> tuple[int, ...]:
        return self.ring.p

    @property
    def big_q(self) -> int:
        return math.prod(self.ring.q)

    @property
    def delta(self) -> int:
        """Delta = floor(Q / t), the factor a message is carried with."""
        return self.big_q // self.t

    @property
    def log_pq(self) -> float:
        return self.ring.log_pq

    @property
    def batching(self) -> bool:
        """Whether t allows batch encoding: t prime and t = 1 (mod 2N)."""
        return self.t > 2 and self.t % (2 * self.n) == 1 and primes.is_prime(self.t)

    @property
    def slots(self) -> int:
        """N slots (a 2 x N/2 matrix) when :attr:`batching`, else 0."""
        return self.n if self.batching else 0

    @cached_property
    def mult_primes(self) -> tuple[int, ...]:
        """The auxiliary primes R of multiplication: 31-bit NTT primes not in Q ∪ P with R > 8 t N Q.

        The tensor of two centered ciphertexts has coefficients below N Q^2 / 2 (twice that when a
        representative is off by Q, which the float estimate of the exact conversion allows rarely);
        t times it must stay below QR / 2.
        """
        need = self.ring.log_q + math.log2(self.t) + math.log2(self.n) + 3
        count = math.ceil(need / 30.9)
        while True:
            r = primes.ntt_primes(31, self.n, count, exclude=self.ring.moduli)
            if sum(math.log2(x) for x in r) > need:
                return r
            count += 1

    def digest(self) -> str:
        """SHA-256 of the ring's canonical encoding and the BFV fields (for serialization headers)."""
        extra = f"bfv:{self.t}:{self.dnum}:{self.hamming_weight}"
        return hashlib.sha256(self.ring.canonical_encoding() + extra.encode()).hexdigest()

    def __repr__(self) -> str:
        return (
            f"bfv.Params(N={self.n}, log2 Q={self.ring.log_q:.1f} ({len(self.q)} primes), "
            f"log2 P={self.ring.log_p:.1f} ({len(self.p)}), t={self.t}, dnum={self.dnum}, "
            f"log2 PQ={self.log_pq:.1f}{', insecure' if self.ring.insecure else ''})"
        )
