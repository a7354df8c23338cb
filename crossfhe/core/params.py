"""Ring parameters: the security table, and the literal -> checked, frozen, hashable parameter pattern.

A scheme's parameters are written as a literal (sizes: ``log_n``, prime bit lengths), then turned into a
checked frozen set that holds the actual primes (``RingParams.from_literal``). A checked set is hashable
and compares by value, so it can be a ``jax.jit`` static argument; ``digest()`` is a stable fingerprint
for serialization headers. The CKKS, BFV and TFHE parameter types follow the same pattern and embed a
``RingParams``.

Security: the largest log2(PQ) (ciphertext modulus Q times special modulus P) for a ring degree N at
128, 192 or 256 bits of classical security, with a uniform ternary secret, from the
HomomorphicEncryption.org security standard (Albrecht et al., "Homomorphic Encryption Security
Standard", 2018, Table 1, N = 2^10 ... 2^15) and, for N = 2^16 and 2^17, the lattice-estimator values
that OpenFHE added in openfheorg/openfhe-development PR #807 (2024-06, commit f387eaf0,
src/core/lib/lattice/stdlatticeparms.cpp). A set above the bound is refused unless ``insecure=True``.

A sparse secret (a fixed Hamming weight h, far below the 2N/3 nonzero coefficients of a uniform ternary
secret) is easier to find: the table above does not hold for it (at h = 1 the secret is one of the 2N
monomials +-X^i and falls out of the public key at once). A sparse set is accepted only where a published
estimate covers its N, log2(PQ) and weight (:data:`SPARSE_ESTIMATES`), otherwise it needs ``insecure=True``.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import math
import operator
from dataclasses import dataclass, field

from crossfhe.errors import InsecureParametersError, ParameterError
from crossfhe.kernels import AUTO, KernelSet, as_kernel_set
from crossfhe.math import primes
from crossfhe.ring.ntt import MAX_LIMBS, MAX_LOG_N, MIN_LOG_N  # the NTT plan's limits bound every set


class SecurityLevel(enum.IntEnum):
    """Classical security level in bits (HomomorphicEncryption.org standard)."""

    BITS_128 = 128
    BITS_192 = 192
    BITS_256 = 256


class SecretDistribution(enum.Enum):
    """Distribution of the secret key's coefficients.

    TERNARY: uniform in {-1, 0, 1}, the distribution of the security table. BINARY (uniform in {0, 1},
    as TFHE often uses) has less entropy than ternary, so the ternary bound does not hold for it; it has
    no table here, and a set with a binary secret must be declared ``insecure=True``.
    """

    TERNARY = "ternary"
    BINARY = "binary"


# max log2(PQ), uniform ternary secret, classical attacks. N = 2^10 ... 2^15: HomomorphicEncryption.org
# standard (2018), Table 1. N = 2^16, 2^17: lattice-estimator values in OpenFHE (PR #807, 2024-06,
# src/core/lib/lattice/stdlatticeparms.cpp).
_MAX_LOG_PQ_TERNARY: dict[SecurityLevel, dict[int, int]] = {
    SecurityLevel.BITS_128: {
        2**10: 27, 2**11: 54, 2**12: 109, 2**13: 218, 2**14: 438, 2**15: 881, 2**16: 1747, 2**17: 3523,
    },
    SecurityLevel.BITS_192: {
        2**10: 19, 2**11: 37, 2**12: 75, 2**13: 152, 2**14: 305, 2**15: 611, 2**16: 1199, 2**17: 2411,
    },
    SecurityLevel.BITS_256: {
        2**10: 14, 2**11: 29, 2**12: 58, 2**13: 118, 2**14: 237, 2**15: 476, 2**16: 929, 2**17: 1866,
    },
}  # fmt: skip


@dataclass(frozen=True)
class SparseEstimate:
    """A published security estimate for a sparse ternary secret: ring degree ``n``, Hamming weight
    ``hamming_weight``, the largest log2(PQ) it covers at ``level``, and where it was published."""

    n: int
    hamming_weight: int
    max_log_pq: int
    level: SecurityLevel
    source: str


_BTH22 = (
    "Bossuat, Troncoso-Pastoriza, Hubaux, 'Bootstrapping for approximate homomorphic encryption with negligible "
    "failure-probability by using sparse-secret encapsulation', ACNS 2022 (ePrint 2022/024), parameter set {}, "
    "estimated at 128 bits with the lattice estimator; Lattigo v5 ships it as a default bootstrapping set"
)
_BTH22_EPHEMERAL = (
    "Bossuat, Troncoso-Pastoriza, Hubaux, ACNS 2022 (ePrint 2022/024): the ephemeral secret of sparse-secret "
    "encapsulation, Hamming weight 32, defined only modulo Q0 P0 (log2 about 60 + 61 = 121 at their N = 2^16 sets); "
    "Lattigo v4-v6 generate it so (bootstrapping GenEncapsulationSwitchingKeys: Q[:1], P[:1])"
)
SPARSE_ESTIMATES: tuple[SparseEstimate, ...] = (
    SparseEstimate(2**15, 192, 768, SecurityLevel.BITS_128, _BTH22.format("N15QP768H192H32")),
    SparseEstimate(2**16, 192, 1553, SecurityLevel.BITS_128, _BTH22.format("N16QP1553H192H32")),
    SparseEstimate(2**16, 32, 121, SecurityLevel.BITS_128, _BTH22_EPHEMERAL),
)
"""The sparse-secret estimates the parameter check accepts. An estimate at weight h_e also covers any weight
h >= h_e (every attack the estimator runs gets no cheaper as nonzero coefficients are added: the secret's
norm and its number of candidates both grow up to the 2N/3 of a uniform ternary secret), never a smaller
one. Sets beyond these need ``insecure=True``."""


def _security_level(level) -> SecurityLevel:
    try:
        return SecurityLevel(level)
    except ValueError:
        raise ParameterError(f"security = {level!r}: must be 128, 192 or 256 (a SecurityLevel)") from None


def _check_weight(hamming_weight, n: int) -> int | None:
    if hamming_weight is None:
        return None
    h = _as_int(hamming_weight, "hamming_weight")
    if not 1 <= h <= n:
        raise ParameterError(f"hamming_weight = {h}: must be in [1, N = {n}] (or None for a uniform ternary secret)")
    return h


def max_log_pq(
    n: int,
    level: SecurityLevel = SecurityLevel.BITS_128,
    secret: SecretDistribution = SecretDistribution.TERNARY,
    hamming_weight: int | None = None,
) -> int:
    """The largest log2(PQ) for ring degree n at the given classical security level.

    n: 2^10 ... 2^17. ``hamming_weight`` None: a uniform ternary secret (the HomomorphicEncryption.org
    table). A fixed weight h: the largest bound of the :data:`SPARSE_ESTIMATES` for this n and level with
    weight <= h. Other secrets, other n, and weights no estimate covers raise ParameterError.
    """
    level = _security_level(level)
    if secret is not SecretDistribution.TERNARY:
        raise ParameterError(
            f"secret = {secret}: the security table covers only uniform ternary secrets; "
            "declare the set insecure=True to use another secret distribution"
        )
    table = _MAX_LOG_PQ_TERNARY[level]
    if n not in table:
        why = "below 2^10 no ring is secure at these levels" if n < min(table) else "N is not in the table"
        raise ParameterError(
            f"N = {n} has no security table entry (the table covers N = 2^10 ... 2^17; {why}); "
            "pass insecure=True only for experiments"
        )
    h = _check_weight(hamming_weight, n)
    if h is None:
        return table[n]
    bounds = [e.max_log_pq for e in SPARSE_ESTIMATES if e.n == n and e.level == level and e.hamming_weight <= h]
    if not bounds:
        known = ", ".join(f"h >= {e.hamming_weight} at N = 2^{e.n.bit_length() - 1} (log2(PQ) <= {e.max_log_pq})"
                          for e in SPARSE_ESTIMATES if e.level == level) or "none"
        raise ParameterError(
            f"a sparse secret of Hamming weight {h} at N = {n} has no published {int(level)}-bit estimate: the "
            f"uniform-ternary table does not hold for sparse secrets (they are easier to find; at weight 1 the "
            f"secret is one of 2N monomials). Estimates known here: {known}. Use a uniform ternary secret "
            "(hamming_weight=None), or pass insecure=True only for experiments"
        )
    return max(bounds)


def check_security(
    n: int,
    log_pq: float,
    level: SecurityLevel = SecurityLevel.BITS_128,
    *,
    secret: SecretDistribution = SecretDistribution.TERNARY,
    hamming_weight: int | None = None,
    insecure: bool = False,
) -> None:
    """Raise InsecureParametersError unless ``log_pq <= max_log_pq(n, level, secret, hamming_weight)`` or
    ``insecure``.

    With ``insecure=True`` nothing is checked (for tests and experiments only). Otherwise an N, a secret
    distribution or a Hamming weight without an estimate is refused too.
    """
    if insecure:
        return
    level = _security_level(level)
    try:
        bound = max_log_pq(n, level, secret, hamming_weight)
    except ParameterError as e:
        raise InsecureParametersError(
            f"cannot certify N = {n}, log2(PQ) = {log_pq:.2f} at {int(level)}-bit security: {e}"
        ) from None
    if log_pq > bound:
        if hamming_weight is None:
            source = f"HomomorphicEncryption.org, {secret.value} secret"
        else:
            source = f"published estimate, sparse secret of Hamming weight {hamming_weight}"
        raise InsecureParametersError(
            f"N = {n}, log2(PQ) = {log_pq:.2f} exceeds the {int(level)}-bit security bound "
            f"log2(PQ) <= {bound} ({source}); use fewer or smaller primes or a larger N, or pass insecure=True "
            "only for experiments"
        )


# --------------------------------------------------------------------------------------------------
# Literal -> checked parameters
# --------------------------------------------------------------------------------------------------


def _as_int(value, name: str) -> int:
    """value as a Python int (NumPy integers accepted; bools and floats refused)."""
    if isinstance(value, bool):
        raise ParameterError(f"{name} = {value!r} must be an int")
    try:
        return operator.index(value)
    except TypeError:
        raise ParameterError(f"{name} = {value!r} must be an int") from None


def _int_tuple(value, name: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise ParameterError(f"{name} = {value!r} must be a sequence of ints")
    return tuple(_as_int(v, f"{name}[{i}]") for i, v in enumerate(value))


@dataclass(frozen=True)
class RingParamsLiteral:
    """Ring parameters as written by a user: sizes, not primes.

    log_n: ring degree N = 2^log_n, 4 <= log_n <= 17 (N < 2^10 needs ``insecure=True``).
    q_bits: bit size of each ciphertext prime (Q = q_0 q_1 ...), each <= 31.
    p_bits: bit size of each special (key-switching) prime (P = p_0 p_1 ...), each <= 31.
    q, p: explicit primes instead of q_bits / p_bits (give one of the two for each).
    hamming_weight: None for a uniform ternary secret, else the fixed number h of nonzero secret
    coefficients (a sparse secret: checked against :data:`SPARSE_ESTIMATES`).
    Generated primes are :func:`crossfhe.math.primes.ntt_primes`, assigned in order of appearance over
    q then p: the k-th use of a size b gets the k-th largest b-bit prime = 1 (mod 2N) not given
    explicitly.
    Sequences are stored as tuples, so a literal is hashable too.
    """

    log_n: int
    q_bits: tuple[int, ...] = ()
    p_bits: tuple[int, ...] = ()
    security: SecurityLevel = SecurityLevel.BITS_128
    secret: SecretDistribution = SecretDistribution.TERNARY
    insecure: bool = False
    q: tuple[int, ...] | None = None
    p: tuple[int, ...] | None = None
    hamming_weight: int | None = None

    def __post_init__(self):
        for name in ("q_bits", "p_bits", "q", "p"):
            object.__setattr__(self, name, _int_tuple(getattr(self, name), name))


def _check_ring_degree(n: int) -> int:
    n = _as_int(n, "n")
    if n < 1 or n & (n - 1) or not MIN_LOG_N <= n.bit_length() - 1 <= MAX_LOG_N:
        raise ParameterError(f"n = {n}: N must be a power of two in [2^{MIN_LOG_N}, 2^{MAX_LOG_N}]")
    return n


def _check_prime(q: int, n: int, name: str) -> None:
    if not 2 < q < 2**primes.MAX_WORD_PRIME_BITS:
        raise ParameterError(f"{name} = {q}: primes must satisfy 2 < q < 2^31 (at most 31 bits)")
    if not primes.is_prime(q):
        raise ParameterError(f"{name} = {q} is not prime")
    if q % (2 * n) != 1:
        raise ParameterError(
            f"{name} = {q} is not NTT-friendly for N = {n}: need q = 1 (mod 2N = {2 * n}), got {q % (2 * n)}"
        )


@dataclass(frozen=True)
class RingParams:
    """A checked, frozen, hashable RNS ring: N, ciphertext primes q, special primes p, security.

    Invariants (checked on construction): N is a power of two in [2^4, 2^17]; every prime is below 2^31
    and = 1 (mod 2N); all primes are distinct; 1 <= len(q) and len(q) + len(p) <= 64; log2(PQ) is within
    the security bound for (N, security, secret, hamming_weight) unless ``insecure``. Equal sets compare
    and hash equal, so a RingParams can be a ``jax.jit`` static argument. ``hamming_weight``: None for a
    uniform ternary secret, else the fixed number of nonzero secret coefficients (1 <= h <= N).
    """

    n: int
    q: tuple[int, ...]
    p: tuple[int, ...] = ()
    security: SecurityLevel = SecurityLevel.BITS_128
    secret: SecretDistribution = SecretDistribution.TERNARY
    insecure: bool = False
    kernels: KernelSet = AUTO
    hamming_weight: int | None = None
    _log_pq: float = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        n = _check_ring_degree(self.n)
        q = _int_tuple(self.q, "q")
        p = _int_tuple(self.p, "p")
        security = _security_level(self.security)
        if not isinstance(self.secret, SecretDistribution):
            raise ParameterError(f"secret = {self.secret!r} must be a SecretDistribution")
        if not isinstance(self.insecure, bool):
            raise ParameterError(f"insecure = {self.insecure!r} must be a bool")
        try:
            object.__setattr__(self, "kernels", as_kernel_set(self.kernels))
        except ValueError as e:
            raise ParameterError(str(e)) from None
        if not q:
            raise ParameterError("q is empty: a ring needs at least one ciphertext prime")
        if len(q) + len(p) > MAX_LIMBS:
            raise ParameterError(f"len(q) + len(p) = {len(q) + len(p)} limbs exceeds the maximum {MAX_LIMBS}")
        for name, moduli in (("q", q), ("p", p)):
            for i, m in enumerate(moduli):
                _check_prime(m, n, f"{name}[{i}]")
        _check_distinct(q, p)
        h = _check_weight(self.hamming_weight, n)
        log_pq = math.log2(math.prod(q + p))
        check_security(n, log_pq, security, secret=self.secret, hamming_weight=h, insecure=self.insecure)
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "q", q)
        object.__setattr__(self, "p", p)
        object.__setattr__(self, "security", security)
        object.__setattr__(self, "hamming_weight", h)
        object.__setattr__(self, "_log_pq", log_pq)

    @classmethod
    def from_literal(cls, lit: RingParamsLiteral) -> RingParams:
        """Generate the primes a literal asks for and check the result (raises ParameterError)."""
        log_n = _as_int(lit.log_n, "log_n")
        if not MIN_LOG_N <= log_n <= MAX_LOG_N:
            raise ParameterError(f"log_n = {log_n}: must be in [{MIN_LOG_N}, {MAX_LOG_N}] (N = 2^log_n)")
        n = 1 << log_n
        q, p = _moduli_from_literal(lit, n)
        return cls(n=n, q=q, p=p, security=lit.security, secret=lit.secret, insecure=lit.insecure,
                   hamming_weight=lit.hamming_weight)

    @property
    def log_n(self) -> int:
        return self.n.bit_length() - 1

    def with_kernels(self, kernels) -> RingParams:
        """The same ring on another kernel set (:mod:`crossfhe.kernels`: VECTOR, NATIVE, GPU, MATRIX or AUTO). The
        kernel set changes how plans compute, never what: it is not part of :meth:`canonical_encoding`."""
        return dataclasses.replace(self, kernels=kernels)

    @property
    def moduli(self) -> tuple[int, ...]:
        """All primes, q then p (the extended basis QP used by key switching)."""
        return self.q + self.p

    @property
    def log_q(self) -> float:
        """log2(Q), Q = prod(q)."""
        return math.log2(math.prod(self.q))

    @property
    def log_p(self) -> float:
        """log2(P), P = prod(p); 0 if there are no special primes."""
        return math.log2(math.prod(self.p))

    @property
    def log_pq(self) -> float:
        """log2(PQ), the quantity bounded by the security table."""
        return self._log_pq

    def canonical_encoding(self) -> bytes:
        """A canonical byte encoding (sorted-key compact JSON, versioned) of every field but the kernel set.
        ``hamming_weight`` appears only when set, so uniform-ternary sets keep their digests."""
        obj = {
            "type": "crossfhe.RingParams",
            "version": 1,
            "n": self.n,
            "q": list(self.q),
            "p": list(self.p),
            "security": int(self.security),
            "secret": self.secret.value,
            "insecure": self.insecure,
        }
        if self.hamming_weight is not None:
            obj["hamming_weight"] = self.hamming_weight
        return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode("ascii")

    def digest(self) -> str:
        """SHA-256 of :meth:`canonical_encoding`, hex: stable across processes, platforms and versions
        of this library that keep encoding version 1."""
        return hashlib.sha256(self.canonical_encoding()).hexdigest()


def _check_distinct(q: tuple[int, ...], p: tuple[int, ...]) -> None:
    seen: dict[int, str] = {}
    for name, moduli in (("q", q), ("p", p)):
        for i, m in enumerate(moduli):
            here = f"{name}[{i}]"
            if m in seen:
                raise ParameterError(f"{here} = {m} repeats {seen[m]}: primes must be distinct")
            seen[m] = here


def _check_sizes(bits: tuple[int, ...], n: int, name: str) -> None:
    least = n.bit_length() + 1  # q = 1 (mod 2N), q > 2N needs at least log2(N) + 2 bits
    for i, b in enumerate(bits):
        if not least <= b <= primes.MAX_WORD_PRIME_BITS:
            raise ParameterError(
                f"{name}[{i}] = {b}: prime sizes must be in [{least}, {primes.MAX_WORD_PRIME_BITS}] bits "
                f"for N = {n} (uint32 words, q = 1 mod 2N)"
            )


def _moduli_from_literal(lit: RingParamsLiteral, n: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Explicit primes as given; sized ones from ntt_primes, excluding the explicit ones."""
    for bits_name, explicit_name in (("q_bits", "q"), ("p_bits", "p")):
        if getattr(lit, bits_name) and getattr(lit, explicit_name) is not None:
            raise ParameterError(f"give {bits_name} or {explicit_name}, not both")
    if lit.q is None and not lit.q_bits:
        raise ParameterError("q_bits is empty: give at least one ciphertext prime size (or explicit q)")
    sizes = {"q": lit.q_bits if lit.q is None else (), "p": lit.p_bits if lit.p is None else ()}
    for name, bits in sizes.items():
        _check_sizes(bits, n, f"{name}_bits")
    explicit = (lit.q or ()) + (lit.p or ())
    wanted = sizes["q"] + sizes["p"]
    if len(explicit) + len(wanted) > MAX_LIMBS:
        raise ParameterError(
            f"{len(explicit) + len(wanted)} limbs (q and p together) exceeds the maximum {MAX_LIMBS}"
        )
    pools = {}
    for b in sorted(set(wanted)):
        try:
            pools[b] = iter(primes.ntt_primes(b, n, wanted.count(b), exclude=explicit))
        except ParameterError as e:
            raise ParameterError(f"cannot generate the {b}-bit primes for N = {n}: {e}") from None
    q = lit.q if lit.q is not None else tuple(next(pools[b]) for b in sizes["q"])
    p = lit.p if lit.p is not None else tuple(next(pools[b]) for b in sizes["p"])
    return q, p
