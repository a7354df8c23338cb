"""Tests of crossfhe.math.primes: primality, NTT-friendly primes, roots of unity, sparse primes, chains."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crossfhe.errors import ParameterError
from crossfhe.math import primes
from crossfhe.math.primes import (
    SparsePrime,
    close_prime_chain,
    has_exact_order,
    is_prime,
    minimal_root_of_unity,
    ntt_primes,
    ntt_primes_near,
    prime_factors,
    primitive_root,
    root_of_unity,
    signed_digits,
    sparse_primes,
)


def _ids(names, cases):
    """Test ids that spell the parameters, e.g. 'bits=30/n=4096'."""
    return ["/".join(f"{k}={v}" for k, v in zip(names, case, strict=True)) for case in cases]


# --------------------------------------------------------------------------------------------------
# is_prime
# --------------------------------------------------------------------------------------------------


def _sieve(limit):
    flags = bytearray([1]) * limit
    flags[0:2] = b"\x00\x00"
    for i in range(2, math.isqrt(limit - 1) + 1):
        if flags[i]:
            flags[i * i :: i] = bytearray(len(range(i * i, limit, i)))
    return flags


def _is_sprp(n, a):
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    x = pow(a, d, n)
    if x in (1, n - 1):
        return True
    for _ in range(s - 1):
        x = x * x % n
        if x == n - 1:
            return True
    return False


def test_is_prime_matches_sieve_below_1e5():
    flags = _sieve(10**5)
    assert [n for n in range(10**5) if is_prime(n)] == [n for n in range(10**5) if flags[n]]


@pytest.mark.parametrize("n", [0, 1, -1, -2, -3, -7, -(2**61 - 1)])
def test_is_prime_small_and_negative(n):
    assert not is_prime(n)


# Known primes: Mersenne 2^31-1, 2^61-1, 2^89-1; 2^64-59 (largest prime below 2^64); NTT primes of
# Kyber (3329), Falcon / NewHope (12289), 998244353 = 119 * 2^23 + 1; Fermat prime 65537.
KNOWN_PRIMES = [2**31 - 1, 2**61 - 1, 2**64 - 59, 2**89 - 1, 3329, 12289, 65537, 998244353]

# Carmichael numbers (OEIS A002997), composite Fermat / Mersenne numbers, 2^64 - 1.
CARMICHAEL = [561, 1105, 1729, 2465, 2821, 6601, 8911, 41041, 825265, 321197185, 5394826801]
KNOWN_COMPOSITES = CARMICHAEL + [2**32 + 1, 2**64 + 1, 2**67 - 1, 2**64 - 1, 2**61 + 1, (2**31 - 1) ** 2]

# Least strong pseudoprimes to the first k prime bases, psi_k (OEIS A014233): composite numbers that
# pass Miller-Rabin for every base in bases. psi_12 > 2^64 needs the extra bases beyond 37.
STRONG_PSEUDOPRIMES = [
    (2047, (2,)),
    (1373653, (2, 3)),
    (25326001, (2, 3, 5)),
    (3215031751, (2, 3, 5, 7)),
    (2152302898747, (2, 3, 5, 7, 11)),
    (3474749660383, (2, 3, 5, 7, 11, 13)),
    (341550071728321, (2, 3, 5, 7, 11, 13, 17)),
    (3825123056546413051, (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31)),
    (318665857834031151167461, (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)),
]


@pytest.mark.parametrize("n", KNOWN_PRIMES)
def test_is_prime_known_primes(n):
    assert is_prime(n)


@pytest.mark.parametrize("n", KNOWN_COMPOSITES)
def test_is_prime_known_composites(n):
    assert not is_prime(n)


@pytest.mark.parametrize(("n", "bases"), STRONG_PSEUDOPRIMES, ids=[str(n) for n, _ in STRONG_PSEUDOPRIMES])
def test_is_prime_rejects_strong_pseudoprimes(n, bases):
    assert all(_is_sprp(n, a) for a in bases), "test vector is not a strong pseudoprime to its bases"
    assert not is_prime(n)


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 2**32), st.integers(2, 2**32))
def test_is_prime_rejects_products(a, b):
    assert not is_prime(a * b)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**9))
def test_is_prime_matches_trial_division(n):
    expected = n >= 2 and all(n % d for d in range(2, math.isqrt(n) + 1))
    assert is_prime(n) == expected


def test_prime_factors():
    assert prime_factors(1) == ()
    assert prime_factors(2**64 - 1) == (3, 5, 17, 257, 641, 65537, 6700417)
    assert prime_factors(2**67 - 1) == (193707721, 761838257287)  # Cole, 1903
    assert prime_factors(12288) == (2, 3)


# --------------------------------------------------------------------------------------------------
# NTT-friendly primes
# --------------------------------------------------------------------------------------------------


def _naive_ntt_primes_down(bits, n):
    """Every prime k * 2n + 1 of exactly ``bits`` bits, descending."""
    ks = range(((1 << bits) - 2) // (2 * n), 0, -1)
    return [k * 2 * n + 1 for k in ks if (k * 2 * n + 1).bit_length() == bits and is_prime(k * 2 * n + 1)]


_NTT_CASES = [(20, 16, 10), (25, 1024, 8), (30, 4096, 12), (31, 2**16, 20), (31, 2**17, 64)]


@pytest.mark.parametrize(("bits", "n", "count"), _NTT_CASES, ids=_ids(("bits", "n", "count"), _NTT_CASES))
def test_ntt_primes_properties(bits, n, count):
    qs = ntt_primes(bits, n, count)
    assert len(qs) == count
    assert all(q % (2 * n) == 1 and q.bit_length() == bits and is_prime(q) for q in qs)
    assert list(qs) == sorted(qs, reverse=True) and len(set(qs)) == count
    assert ntt_primes(bits, n, count // 2) == qs[: count // 2]  # stable: a prefix for a smaller count


def test_ntt_primes_are_the_largest():
    assert list(ntt_primes(20, 16, 15)) == _naive_ntt_primes_down(20, 16)[:15]
    assert ntt_primes(30, 4096, 3) == (1073692673, 1073668097, 1073651713)


def test_ntt_primes_below_and_exclude():
    full = ntt_primes(28, 1024, 6)
    assert ntt_primes(28, 1024, 3, below=full[2]) == full[3:6]
    assert ntt_primes(28, 1024, 4, exclude=(full[0], full[2])) == (full[1],) + full[3:6]


def test_ntt_primes_exhausted():
    all_20 = _naive_ntt_primes_down(20, 2**12)
    assert ntt_primes(20, 2**12, len(all_20)) == tuple(all_20)
    with pytest.raises(
        ParameterError, match=rf"only {len(all_20)} 20-bit primes .* {len(all_20) + 1} requested"
    ):
        ntt_primes(20, 2**12, len(all_20) + 1)


@pytest.mark.parametrize(
    ("bits", "n", "match"),
    [(32, 16, "bits = 32"), (0, 16, "bits = 0"), (30, 12, "power of two"), (30, 0, "n = 0")],
)
def test_ntt_primes_bad_arguments(bits, n, match):
    with pytest.raises(ParameterError, match=match):
        ntt_primes(bits, n, 1)


@pytest.mark.parametrize(
    ("bits", "n"),
    [(30, 4096), (25, 1024), (31, 2**15)],
    ids=["bits=30/n=4096", "bits=25/n=1024", "bits=31/n=32768"],
)
def test_ntt_primes_near_alternates(bits, n):
    qs = ntt_primes_near(bits, n, 8)
    c = 1 << bits
    above = [q for q in qs if q > c]
    below = [q for q in qs if q < c]
    assert all(q % (2 * n) == 1 and is_prime(q) and q < 2**31 for q in qs)
    if bits < 31:
        assert qs[0::2] == tuple(above) and qs[1::2] == tuple(below)
        up_naive = (q for q in range(c + 1, 2 * c, 2 * n) if is_prime(q))  # c = 0 (mod 2n)
        assert above == list(itertools.islice(up_naive, len(above)))
    else:
        assert not above  # nothing above 2^31 fits a word
    assert below == list(ntt_primes(bits, n, len(below)))


def test_ntt_primes_near_known_answer():
    assert ntt_primes_near(30, 4096, 4) == (1073750017, 1073692673, 1073815553, 1073668097)


# --------------------------------------------------------------------------------------------------
# Close prime chains (CASA §3.1.5)
# --------------------------------------------------------------------------------------------------


_CHAIN_CASES = [(30, 4096, 8, 10), (28, 1024, 10, 10), (31, 2**15, 6, 8), (30, 2**16, 4, 6)]


@pytest.mark.parametrize(
    ("bits", "n", "count", "eta"), _CHAIN_CASES, ids=_ids(("bits", "n", "count", "eta"), _CHAIN_CASES)
)
def test_close_prime_chain_ratio(bits, n, count, eta):
    qs = close_prime_chain(bits, n, count, eta)
    assert len(set(qs)) == count
    assert all(q % (2 * n) == 1 and is_prime(q) and q < 2**31 for q in qs)
    e = 2.0**-eta
    for q in qs:
        assert abs(q - (1 << bits)) * 2**eta < (1 << bits)  # exact: |q / 2^bits - 1| < 2^-eta
        assert abs(q / 2**bits - 1) < e
    for qi in qs:
        for qj in qs:
            assert (1 - e) / (1 + e) < qi / qj < (1 + e) / (1 - e)
    assert close_prime_chain(bits, n, count - 1, eta) == qs[:-1]


def test_close_prime_chain_impossible():
    with pytest.raises(ParameterError, match=r"within a factor \(1 \+- 2\^-20\) of 2\^30"):
        close_prime_chain(30, 4096, 2, 20)
    with pytest.raises(ParameterError, match="eta"):
        close_prime_chain(30, 4096, 2, 30)


# --------------------------------------------------------------------------------------------------
# Roots of unity
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("q", "g"),
    [(12289, 11), (998244353, 3), (2**31 - 1, 7), (65537, 3), (3329, 3)],
)
def test_primitive_root_known(q, g):
    assert primitive_root(q) == g
    assert has_exact_order(g, q - 1, q)
    assert all(not has_exact_order(h, q - 1, q) for h in range(2, g))


def test_minimal_roots_newhope():
    # NewHope (q = 12289, n = 1024): gamma = 7 is the 2048-th root, omega = 49 the 1024-th root.
    assert minimal_root_of_unity(2048, 12289) == 7
    assert minimal_root_of_unity(1024, 12289) == 49
    assert has_exact_order(17, 256, 3329)  # Kyber's zeta


@pytest.mark.parametrize(("bits", "n"), [(30, 4096), (31, 2**16), (20, 16), (31, 2**17)])
def test_root_of_unity_exact_order(bits, n):
    for q in ntt_primes(bits, n, 3):
        for w in (root_of_unity(2 * n, q), minimal_root_of_unity(2 * n, q)):
            assert pow(w, 2 * n, q) == 1
            assert pow(w, n, q) == q - 1  # order exactly 2n (a power of two)
        assert root_of_unity(2 * n, q) == pow(primitive_root(q), (q - 1) // (2 * n), q)
        assert minimal_root_of_unity(2 * n, q) <= root_of_unity(2 * n, q)


def test_minimal_root_is_minimal_brute_force():
    for q in ntt_primes(14, 64, 4):
        w = minimal_root_of_unity(128, q)
        assert has_exact_order(w, 128, q)
        assert not any(has_exact_order(x, 128, q) for x in range(1, w))


def test_root_of_unity_errors():
    with pytest.raises(ParameterError, match="not prime"):
        root_of_unity(4, 12288)
    with pytest.raises(ParameterError, match="must divide q - 1"):
        root_of_unity(2**13, 12289)


# --------------------------------------------------------------------------------------------------
# Sparse primes (CASA §3.1.5, CHAM §IV-A)
# --------------------------------------------------------------------------------------------------

CHAM_MODULI = [2**34 + 2**27 + 1, 2**34 + 2**19 + 1, 2**38 + 2**23 + 1]  # q0, q1, special p; N = 4096


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**70))
def test_signed_digits_is_naf(x):
    terms = signed_digits(x)
    assert sum(terms) == x
    exps = [abs(t).bit_length() - 1 for t in terms]
    assert all(a - b >= 2 for a, b in zip(exps, exps[1:], strict=False))  # non-adjacent
    assert len(terms) <= bin(x).count("1")


def test_cham_moduli_are_prime_and_sparse():
    for q in CHAM_MODULI:
        assert is_prime(q)
        assert q % (2 * 4096) == 1
    assert set(CHAM_MODULI[:2]) <= {p.q for p in sparse_primes(35, n=4096)}
    assert CHAM_MODULI[2] in {p.q for p in sparse_primes(39, n=4096)}
    cham_q0 = next(p for p in sparse_primes(35, n=4096) if p.q == CHAM_MODULI[0])
    assert cham_q0.terms == (2**34, 2**27, 1) and cham_q0.form == "2^34 + 2^27 + 1"
    assert cham_q0.signed_exponents == ((1, 34), (1, 27), (1, 0)) and cham_q0.exponents == (34, 27, 0)


def test_cham_substitutes_in_31_bits():
    """31-bit primes of CHAM's form 2^a + 2^b + 1 that are NTT-friendly for N = 4096."""
    subs = [p for p in sparse_primes(31, n=4096) if all(t > 0 for t in p.terms)]
    assert [p.form for p in subs] == [
        "2^30 + 2^25 + 1",
        "2^30 + 2^19 + 1",
        "2^30 + 2^17 + 1",
        "2^30 + 2^13 + 1",
    ]
    for p in subs:
        assert p.q < 2**31 and p.q % 8192 == 1 and is_prime(p.q) and p.weight == 3
    naive = [2**30 + 2**b + 1 for b in range(13, 29) if is_prime(2**30 + 2**b + 1)]
    assert sorted(p.q for p in subs) == sorted(naive)


_SPARSE_CASES = [(31, 4096, 3), (30, 1024, 4), (31, None, 3), (24, 16, 5)]


@pytest.mark.parametrize(
    ("bits", "n", "max_terms"), _SPARSE_CASES, ids=_ids(("bits", "n", "max_terms"), _SPARSE_CASES)
)
def test_sparse_primes_forms(bits, n, max_terms):
    found = sparse_primes(bits, n=n, max_terms=max_terms)
    assert found
    for p in found:
        assert sum(p.terms) == p.q and p.weight <= max_terms and is_prime(p.q) and p.q.bit_length() == bits
        assert all(abs(t) & (abs(t) - 1) == 0 for t in p.terms)
        assert p.terms == signed_digits(p.q)
        if n is not None:
            assert (
                p.q % (2 * n) == 1 and p.terms[-1] == 1 and min(p.exponents[:-1]) >= (2 * n).bit_length() - 1
            )
    keys = [(p.weight, -p.q) for p in found]
    assert keys == sorted(keys)
    assert sparse_primes(bits, n=n, max_terms=max_terms) == found


def test_sparse_primes_complete_for_three_terms():
    """Every prime 2^30 +- 2^b + 1 and 2^31 - 2^b + 1 (b >= 11) of 31 bits is found, with N = 1024."""
    naive = {2**30 + 2**b + 1 for b in range(11, 30)} | {2**31 - 2**b + 1 for b in range(11, 30)}
    naive = {q for q in naive if is_prime(q) and q.bit_length() == 31}
    assert {p.q for p in sparse_primes(31, n=1024)} == naive


def test_sparse_primes_mersenne_and_count():
    assert sparse_primes(31, count=1)[0] == SparsePrime(2**31 - 1, (2**31, -1))
    assert str(sparse_primes(31, count=1)[0]) == "2^31 - 1"
    assert sparse_primes(31, count=1)[0].signed_exponents == ((1, 31), (-1, 0))
    with pytest.raises(ParameterError, match="requested"):
        sparse_primes(31, n=4096, count=100)
    with pytest.raises(ParameterError, match="max_terms"):
        sparse_primes(31, max_terms=6)


def test_sparse_prime_validates_terms():
    with pytest.raises(ParameterError, match="do not sum"):
        SparsePrime(17, (16, 2))
    with pytest.raises(ParameterError, match="signed power of two"):
        SparsePrime(17, (14, 3))


def test_powers_and_roots_with_numpy_match_python_integers():
    for base, count, q in [(3, 1, 97), (5, 17, 97), (12289 - 2, 1000, 12289), (1234567, 4096, 2**31 - 1)]:
        assert primes.powers_mod(base, count, q).tolist() == [pow(base, j, q) for j in range(count)]
    with pytest.raises(ValueError):
        primes.powers_mod(2, 4, 2**32 + 15)
    for order, q in [(16, 97), (2048, 12289), (8192, 40961)]:
        w = primes.root_of_unity(order, q)
        want = min(pow(w, k, q) for k in range(1, order) if k % 2)
        assert primes.minimal_root_of_unity(order, q) == want


def test_is_prime_below_and_above_the_three_base_bound():
    n = 200_000
    sieve = np.ones(n, dtype=bool)
    sieve[:2] = False
    for i in range(2, int(n**0.5) + 1):
        if sieve[i]:
            sieve[i * i :: i] = False
    assert [primes.is_prime(i) for i in range(n)] == sieve.tolist()
    # strong pseudoprimes: to the bases 2, 3, 5, 7 (3215031751) and to 2, 7, 61 (4759123141, where the three-base
    # test stops); a Carmichael number; primes near 2^32 and 2^61
    assert not any(primes.is_prime(c) for c in (3215031751, 4759123141, 25326001, 561, 2**32 + 1))
    assert all(primes.is_prime(p) for p in (2**31 - 1, 4294967291, 4759123151, 2**61 - 1))
