"""Primes for RNS moduli: primality, NTT-friendly primes, roots of unity, sparse primes, close chains.

Offline precomputation on Python ints (no JAX). Every function is deterministic: the same arguments give
the same primes in the same order, so a parameter set built from bit sizes is reproducible.

* :func:`is_prime`: Miller-Rabin, deterministic below 2^64 (and up to 3.18 * 10^23).
* :func:`ntt_primes`: primes ``q = 1 (mod 2n)`` of a given bit length, largest first. Such a q has a
  primitive 2n-th root of unity, which the negacyclic NTT of length n needs.
* :func:`ntt_primes_near`: NTT-friendly primes closest to 2^bits, alternately above and below (CKKS
  scale primes, whose product should stay close to 2^(bits * count)).
* :func:`close_prime_chain`: NTT-friendly primes all within a factor ``1 +- 2^-eta`` of 2^bits, so
  rescaling by any of them keeps the CKKS scale within ``2^-eta`` (CASA §3.1.5).
* :func:`primitive_root`, :func:`root_of_unity`, :func:`minimal_root_of_unity`.
* :func:`sparse_primes`: primes with few signed binary digits, ``2^a +- 2^b + 1`` and wider forms, each
  returned as a :class:`SparsePrime` with its signed-power decomposition, for reduction by shifts and
  adds (CASA §3.1.5; CHAM §IV uses 2^34 + 2^27 + 1, 2^34 + 2^19 + 1 and 2^38 + 2^23 + 1).

The library's words are uint32, so the NTT prime generators return primes below 2^31. The primality and
sparse-prime functions also accept larger numbers (for reproducing papers' moduli).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from crossfhe.errors import ParameterError

MAX_WORD_PRIME_BITS = 31
"""Largest bit length of a prime stored in a uint32 word with one spare bit (q < 2^31)."""

_SMALL_PRIMES = tuple(p for p in range(2, 100) if all(p % d for d in range(2, p)))  # the 25 primes < 100
_MR_BASES = _SMALL_PRIMES[:12]  # 2, 3, ..., 37
_MR_BASES_EXTRA = _SMALL_PRIMES[:20]  # 2, 3, ..., 71
_PSI_12 = 318665857834031151167461  # least strong pseudoprime to the first 12 prime bases
_JAESCHKE = 4759123141  # least strong pseudoprime to the bases 2, 7 and 61


# --------------------------------------------------------------------------------------------------
# Primality and factoring
# --------------------------------------------------------------------------------------------------


def _is_strong_probable_prime(n: int, a: int) -> bool:
    """Miller-Rabin round: with n - 1 = d * 2^s (d odd), a^d = 1 or a^(d 2^r) = -1 (mod n), some r < s."""
    d = n - 1
    s = (d & -d).bit_length() - 1
    d >>= s
    x = pow(a, d, n)
    if x == 1 or x == n - 1:
        return True
    for _ in range(s - 1):
        x = x * x % n
        if x == n - 1:
            return True
    return False


def is_prime(n: int) -> bool:
    """True iff the integer n is prime. Exact for every n < 3.18 * 10^23, in particular every n < 2^64.

    Trial division by the primes below 100, then Miller-Rabin: below 4759123141 (> 2^32) to the bases
    {2, 7, 61}, which have no strong pseudoprime below it (Jaeschke, "On strong pseudoprimes to several
    bases", Math. Comp. 61 (1993)); above, to the first 12 prime bases
    {2, 3, 5, ..., 37}. That base set has no strong pseudoprime below psi_12 = 318665857834031151167461
    > 2^64 (Sorenson and Webster, "Strong pseudoprimes to twelve prime bases", Math. Comp. 86 (2017);
    the bound for 2^64 was first shown by Jiang and Deng, Math. Comp. 83 (2014)). For n >= psi_12 the
    first 20 prime bases (2 ... 71) are used: a strong probable prime test, not a proof.
    Returns False for 0, 1 and negative n.
    """
    n = int(n)
    if n < 2:
        return False
    for p in _SMALL_PRIMES:
        if n % p == 0:
            return n == p
    if n < _SMALL_PRIMES[-1] ** 2:
        return True
    bases = (2, 7, 61) if n < _JAESCHKE else _MR_BASES if n < _PSI_12 else _MR_BASES_EXTRA
    return all(_is_strong_probable_prime(n, a) for a in bases)


def _pollard_brent(n: int) -> int:
    """A non-trivial factor of an odd composite n (Brent's variant of Pollard's rho; deterministic)."""
    for c in itertools.count(1):
        y, m, g, r, q = 2, 64, 1, 1, 1
        x = ys = y
        while g == 1:
            x = y
            for _ in range(r):
                y = (y * y + c) % n
            k = 0
            while k < r and g == 1:
                ys = y
                for _ in range(min(m, r - k)):
                    y = (y * y + c) % n
                    q = q * abs(x - y) % n
                g = math.gcd(q, n)
                k += m
            r *= 2
        if g == n:
            g = 1
            while g == 1:
                ys = (ys * ys + c) % n
                g = math.gcd(abs(x - ys), n)
        if g != n:
            return g
    raise AssertionError("unreachable")  # pragma: no cover


@lru_cache(maxsize=1024)
def prime_factors(n: int) -> tuple[int, ...]:
    """The distinct prime factors of an integer n >= 1, ascending (trial division, then Pollard rho)."""
    n = int(n)
    if n < 1:
        raise ParameterError(f"prime_factors needs n >= 1, got {n}")
    found: set[int] = set()
    for p in _SMALL_PRIMES:
        while n % p == 0:
            found.add(p)
            n //= p
    stack = [n] if n > 1 else []
    while stack:
        m = stack.pop()
        if is_prime(m):
            found.add(m)
        else:
            f = _pollard_brent(m)
            stack += [f, m // f]
    return tuple(sorted(found))


# --------------------------------------------------------------------------------------------------
# Roots of unity
# --------------------------------------------------------------------------------------------------


def _check_prime_modulus(q: int) -> int:
    q = int(q)
    if not is_prime(q):
        raise ParameterError(f"q = {q} is not prime")
    return q


def has_exact_order(w: int, order: int, q: int) -> bool:
    """True iff w has multiplicative order exactly ``order`` modulo q: w^order = 1 and w^(order/p) != 1
    for every prime p dividing order."""
    if pow(w, order, q) != 1:
        return False
    return all(pow(w, order // p, q) != 1 for p in prime_factors(order))


@lru_cache(maxsize=1024)
def primitive_root(q: int) -> int:
    """The smallest generator g of the multiplicative group (Z/qZ)^* of a prime q.

    g is a generator iff g^((q-1)/p) != 1 (mod q) for every prime p dividing q - 1.
    """
    q = _check_prime_modulus(q)
    if q == 2:
        return 1
    for g in range(2, q):
        if has_exact_order(g, q - 1, q):
            return g
    raise AssertionError("unreachable: a prime has a primitive root")  # pragma: no cover


def _check_order(order: int, q: int) -> tuple[int, int]:
    q = _check_prime_modulus(q)
    order = int(order)
    if order < 1 or (q - 1) % order:
        raise ParameterError(
            f"no root of unity of order {order} modulo q = {q}: the order must divide q - 1 = {q - 1}"
        )
    return order, q


@lru_cache(maxsize=1024)
def root_of_unity(order: int, q: int) -> int:
    """The primitive ``order``-th root of unity ``g^((q-1)/order) mod q``, g = :func:`primitive_root`.

    The canonical choice of this library (for the negacyclic NTT of length n, order = 2n). Raises
    ParameterError if q is not prime or order does not divide q - 1. The result is checked to have exact
    order ``order``.
    """
    order, q = _check_order(order, q)
    w = pow(primitive_root(q), (q - 1) // order, q)
    if not has_exact_order(w, order, q):  # pragma: no cover - follows from g being a generator
        raise AssertionError(f"{w} is not a primitive {order}-th root of unity mod {q}")
    return w


def powers_mod(base: int, count: int, q: int) -> np.ndarray:
    """[base^0, base^1, ..., base^(count-1)] mod q as uint64, for q < 2^32 (products stay below 2^64): log2(count)
    vector steps, each doubling the known prefix."""
    if not 1 < q < 2**32:
        raise ValueError(f"powers_mod needs 1 < q < 2^32, got {q}")
    out = np.empty(max(count, 1), dtype=np.uint64)
    out[0] = 1
    known, step = 1, int(base) % q
    while known < count:
        take = min(known, count - known)
        out[known : known + take] = out[:take] * np.uint64(step) % np.uint64(q)
        known += take
        step = step * step % q
    return out[:count]


@lru_cache(maxsize=256)
def minimal_root_of_unity(order: int, q: int) -> int:
    """The smallest primitive ``order``-th root of unity modulo a prime q (the choice SEAL makes).

    The primitive roots of that order are w^k for gcd(k, order) = 1, w = :func:`root_of_unity`; this
    walks all of them (O(order) multiplications).
    """
    order, q = _check_order(order, q)
    w = root_of_unity(order, q)
    if order & (order - 1) == 0 and q < 2**32:  # the primitive ones are the odd powers
        return int(powers_mod(w, order, q)[1::2].min())
    best, x = w, w
    for k in range(2, order):
        x = x * w % q
        if x < best and math.gcd(k, order) == 1:
            best = x
    return best


# --------------------------------------------------------------------------------------------------
# NTT-friendly primes
# --------------------------------------------------------------------------------------------------


def _check_ring_degree(n: int) -> int:
    n = int(n)
    if n < 1 or n & (n - 1):
        raise ParameterError(f"n = {n} must be a power of two (the ring degree N)")
    return n


def _check_word_bits(bits: int, *, name: str = "bits") -> int:
    bits = int(bits)
    if not 2 <= bits <= MAX_WORD_PRIME_BITS:
        raise ParameterError(
            f"{name} = {bits}: NTT primes must have 2 to {MAX_WORD_PRIME_BITS} bits (q < 2^31, uint32 words)"
        )
    return bits


def _check_count(count: int) -> int:
    count = int(count)
    if count < 0:
        raise ParameterError(f"count = {count} must be >= 0")
    return count


def _primes_down(n: int, start: int, stop: int) -> Iterator[int]:
    """Primes q = 1 (mod 2n) with stop <= q < start, descending."""
    m = 2 * n
    q = (start - 2) // m * m + 1  # largest q = 1 (mod m) with q < start
    while q >= max(stop, 2):
        if is_prime(q):
            yield q
        q -= m


def _primes_up(n: int, start: int, stop: int) -> Iterator[int]:
    """Primes q = 1 (mod 2n) with start < q < stop, ascending."""
    m = 2 * n
    q = start // m * m + 1
    if q <= start:
        q += m
    while q < stop:
        if is_prime(q):
            yield q
        q += m


def _take(primes: Iterable[int], count: int, exclude: frozenset[int]) -> tuple[int, ...]:
    return tuple(itertools.islice((q for q in primes if q not in exclude), count))


def _interleave(first: Iterator[int], second: Iterator[int]) -> Iterator[int]:
    """first[0], second[0], first[1], second[1], ...; when one runs out the other continues."""
    sentinel = object()
    for a, b in itertools.zip_longest(first, second, fillvalue=sentinel):
        if a is not sentinel:
            yield a
        if b is not sentinel:
            yield b


def _not_enough(found: int, count: int, what: str) -> ParameterError:
    return ParameterError(f"only {found} {what} exist, {count} requested")


@lru_cache(maxsize=512)
def _ntt_primes(bits: int, n: int, count: int, below: int | None, exclude: frozenset[int]) -> tuple[int, ...]:
    top = 1 << bits if below is None else min(1 << bits, below)
    found = _take(_primes_down(n, top, 1 << (bits - 1)), count, exclude)
    if len(found) < count:
        where = f" below {below}" if below is not None else ""
        skip = f" (excluding {len(exclude)} given)" if exclude else ""
        raise _not_enough(len(found), count, f"{bits}-bit primes q = 1 (mod 2n = {2 * n}){where}{skip}")
    return found


def ntt_primes(
    bits: int, n: int, count: int, *, below: int | None = None, exclude: Iterable[int] = ()
) -> tuple[int, ...]:
    """``count`` primes q with q = 1 (mod 2n) and bit length exactly ``bits``, in descending order.

    The list is the largest such primes below ``min(2^bits, below)``, skipping those in ``exclude``;
    it is a prefix of the same list for a larger count (stable). Such a q has a primitive 2n-th root of
    unity, as the negacyclic NTT of length n needs.
    bits: 2 ... 31 (uint32 words with a spare bit); n: a power of two.
    Raises ParameterError if fewer than ``count`` exist.
    """
    bits = _check_word_bits(bits)
    n = _check_ring_degree(n)
    return _ntt_primes(bits, n, _check_count(count), below, frozenset(int(q) for q in exclude))


@lru_cache(maxsize=512)
def _ntt_primes_near(bits: int, n: int, count: int, exclude: frozenset[int]) -> tuple[int, ...]:
    center = 1 << bits
    up = _primes_up(n, center, min(center << 1, 1 << MAX_WORD_PRIME_BITS))
    down = _primes_down(n, center, center >> 1)
    found = _take(_interleave(up, down), count, exclude)
    if len(found) < count:
        raise _not_enough(len(found), count, f"primes q = 1 (mod {2 * n}) in [2^{bits - 1}, 2^{bits + 1})")
    return found


def ntt_primes_near(bits: int, n: int, count: int, *, exclude: Iterable[int] = ()) -> tuple[int, ...]:
    """``count`` primes q = 1 (mod 2n) nearest to 2^bits, alternately above and below.

    Order: the smallest such prime above 2^bits, the largest below, the second above, the second below,
    ...; when one side runs out (q must stay in [2^(bits-1), 2^(bits+1)) and below 2^31) the other
    continues. Alternating keeps the product of the first k primes close to 2^(bits * k), as CKKS scale
    primes want (the choice of Lattigo and OpenFHE's scaling-prime generators).
    bits: 2 ... 31; n: a power of two. Raises ParameterError if fewer than ``count`` exist.
    """
    bits = _check_word_bits(bits)
    n = _check_ring_degree(n)
    return _ntt_primes_near(bits, n, _check_count(count), frozenset(int(q) for q in exclude))


@lru_cache(maxsize=512)
def _close_prime_chain(bits: int, n: int, count: int, eta: int, exclude: frozenset[int]) -> tuple[int, ...]:
    center = 1 << bits
    radius = center >> eta  # |q - 2^bits| < 2^(bits - eta)  <=>  |q / 2^bits - 1| < 2^-eta
    up = _primes_up(n, center, min(center + radius, 1 << MAX_WORD_PRIME_BITS))
    down = _primes_down(n, center, center - radius + 1)
    found = _take(_interleave(up, down), count, exclude)
    if len(found) < count:
        raise ParameterError(
            f"only {len(found)} primes q = 1 (mod 2n = {2 * n}) lie within a factor (1 +- 2^-{eta}) of "
            f"2^{bits} (and below 2^31), {count} requested; lower eta or n, or raise bits"
        )
    return found


def close_prime_chain(
    bits: int, n: int, count: int, eta: int, *, exclude: Iterable[int] = ()
) -> tuple[int, ...]:
    """``count`` NTT-friendly primes q_i, each with ``|q_i / 2^bits - 1| < 2^-eta``.

    Rescaling a CKKS ciphertext of scale 2^bits by any q_i then leaves the scale equal to 2^bits up to a
    factor within 2^-eta, and any two satisfy ``q_i / q_j in ((1 - e) / (1 + e), (1 + e) / (1 - e))``,
    e = 2^-eta (CASA §3.1.5 groups primes with ``q_i / q_j in (1 - 2^-eta, 1 + 2^-eta)``, after
    Cheon-Han-Kim-Kim-Song, "A full RNS variant of approximate HE", SAC 2018; the paper prints 2^eta).
    Order as in :func:`ntt_primes_near` (nearest first, alternately above and below 2^bits).
    With uint32 words the window [2^bits (1 - 2^-eta), 2^bits (1 + 2^-eta)) holds about
    2^(bits - eta) / (n ln 2^bits) such primes, so eta is at most about ``bits - log2(2n) - 4``.
    Raises ParameterError if fewer than ``count`` exist.
    """
    bits = _check_word_bits(bits)
    n = _check_ring_degree(n)
    eta = int(eta)
    if not 1 <= eta < bits:
        raise ParameterError(f"eta = {eta} must satisfy 1 <= eta < bits = {bits}")
    return _close_prime_chain(bits, n, _check_count(count), eta, frozenset(int(q) for q in exclude))


# --------------------------------------------------------------------------------------------------
# Sparse (low Hamming weight) primes
# --------------------------------------------------------------------------------------------------


def signed_digits(x: int) -> tuple[int, ...]:
    """The non-adjacent form (NAF) of x >= 0 as signed powers of two, largest magnitude first.

    The NAF is the unique signed binary representation with no two adjacent non-zero digits; it has
    the fewest non-zero digits of any signed binary representation (Reitwiesner 1960).
    sum(signed_digits(x)) == x.
    """
    x = int(x)
    if x < 0:
        raise ParameterError(f"signed_digits needs x >= 0, got {x}")
    terms = []
    e = 0
    while x:
        if x & 1:
            d = 2 - (x & 3)  # +1 if x = 1 (mod 4), -1 if x = 3 (mod 4)
            terms.append(d << e)
            x -= d
        x >>= 1
        e += 1
    return tuple(reversed(terms))


@dataclass(frozen=True)
class SparsePrime:
    """A prime q with its signed-power decomposition ``terms``: sum(terms) == q, each term +-2^e.

    terms are the non-adjacent form of q (fewest signed digits), largest magnitude first, so that
    ``q = 2^a +- 2^b +- ... +- 1`` and ``2^a = -(terms[1] + ...) (mod q)`` folds the high part of a
    product down by shifts and adds.
    """

    q: int
    terms: tuple[int, ...]

    def __post_init__(self):
        if sum(self.terms) != self.q:
            raise ParameterError(f"terms {self.terms} do not sum to q = {self.q}")
        for t in self.terms:
            if t == 0 or abs(t) & (abs(t) - 1):
                raise ParameterError(f"term {t} of q = {self.q} is not a signed power of two")

    @property
    def weight(self) -> int:
        """Number of non-zero signed digits (the constant 1 included)."""
        return len(self.terms)

    @property
    def exponents(self) -> tuple[int, ...]:
        """The exponents e of the terms +-2^e, descending."""
        return tuple(abs(t).bit_length() - 1 for t in self.terms)

    @property
    def signed_exponents(self) -> tuple[tuple[int, int], ...]:
        """The terms as ``((sign, exponent), ...)``, e.g. ``((1, 34), (1, 27), (1, 0))``."""
        return tuple((1 if t > 0 else -1, e) for t, e in zip(self.terms, self.exponents, strict=True))

    @property
    def form(self) -> str:
        """The decomposition as text, e.g. ``'2^34 + 2^27 + 1'``."""
        parts = []
        for t, e in zip(self.terms, self.exponents, strict=True):
            sign = "-" if t < 0 else "+"
            parts.append(f"{sign} {'1' if e == 0 else f'2^{e}'}")
        return " ".join(parts).removeprefix("+ ")

    def __str__(self) -> str:
        return self.form


def _sparse_candidates(bits: int, low: int, max_terms: int, constants: tuple[int, ...]) -> set[int]:
    """Numbers 2^a +- 2^(e_1) +- ... +- 2^(e_k) + c of bit length ``bits``, with a in {bits - 1, bits},
    a > e_1 > ... > e_k >= low, k <= max_terms - 2, c in constants."""
    found = set()
    for a in (bits - 1, bits):
        for k in range(max_terms - 1):
            for exps in itertools.combinations(range(a - 1, low - 1, -1), k):
                for signs in itertools.product((1, -1), repeat=k):
                    head = (1 << a) + sum(s << e for s, e in zip(signs, exps, strict=True))
                    for c in constants:
                        if (head + c).bit_length() == bits:
                            found.add(head + c)
    return found


@lru_cache(maxsize=128)
def _sparse_primes(bits: int, n: int | None, max_terms: int) -> tuple[SparsePrime, ...]:
    low = 1 if n is None else (2 * n).bit_length() - 1  # exponents >= log2(2n) make q = 1 (mod 2n)
    constants = (1, -1) if n is None else (1,)
    primes = [SparsePrime(q, signed_digits(q)) for q in _sparse_candidates(bits, low, max_terms, constants)]
    modulus = 2 if n is None else 2 * n
    primes = [p for p in primes if p.weight <= max_terms and p.q % modulus == 1 and is_prime(p.q)]
    return tuple(sorted(primes, key=lambda p: (p.weight, -p.q)))


def sparse_primes(
    bits: int, *, n: int | None = None, max_terms: int = 3, count: int | None = None
) -> tuple[SparsePrime, ...]:
    """Primes of bit length ``bits`` with at most ``max_terms`` signed binary digits.

    With the default max_terms = 3 these are ``2^(bits-1) + 2^b + 1`` and ``2^bits - 2^b + 1``; with 4,
    also ``2^a +- 2^b +- 2^c + 1``, and so on (the CSD / low-Hamming-weight primes of CASA §3.1.5 and
    CHAM §IV-A, whose products reduce by shifts and adds). Each prime comes with its non-adjacent form
    (:class:`SparsePrime`); forms with fewer digits are found too (e.g. 2^31 - 1 when n is None).
    n: if given (a power of two), only primes q = 1 (mod 2n), i.e. every digit but the constant +1 is a
    multiple of 2n. If None, the constant may also be -1.
    Order: fewest digits first, then largest q first. ``count``: return the first count, raising
    ParameterError if fewer exist. bits: 3 ... 64 (words hold <= 31; larger sizes reproduce papers'
    moduli); max_terms: 2 ... 5. Cost grows as bits^(max_terms - 2).
    """
    bits = int(bits)
    if not 3 <= bits <= 64:
        raise ParameterError(f"bits = {bits} must be in [3, 64]")
    max_terms = int(max_terms)
    if not 2 <= max_terms <= 5:
        raise ParameterError(f"max_terms = {max_terms} must be in [2, 5]")
    found = _sparse_primes(bits, None if n is None else _check_ring_degree(n), max_terms)
    if count is None:
        return found
    count = _check_count(count)
    if len(found) < count:
        ntt = "" if n is None else f" with q = 1 (mod {2 * n})"
        raise _not_enough(len(found), count, f"{bits}-bit primes of at most {max_terms} signed digits{ntt}")
    return found[:count]
