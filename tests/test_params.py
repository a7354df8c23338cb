"""Tests of crossfhe.core.params: security table, check_security, RingParamsLiteral -> RingParams."""

import dataclasses
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from crossfhe.core.params import (
    MAX_LIMBS,
    SPARSE_ESTIMATES,
    RingParams,
    RingParamsLiteral,
    SecretDistribution,
    SecurityLevel,
    check_security,
    max_log_pq,
)
from crossfhe.errors import InsecureParametersError, ParameterError
from crossfhe.math.primes import is_prime, ntt_primes

B128, B192, B256 = SecurityLevel.BITS_128, SecurityLevel.BITS_192, SecurityLevel.BITS_256

# HomomorphicEncryption.org standard (2018), Table 1, uniform ternary secret, classical, N = 2^10..2^15;
# N = 2^16, 2^17 from OpenFHE's lattice-estimator table (stdlatticeparms.cpp, PR #807).
TABLE = {
    B128: [27, 54, 109, 218, 438, 881, 1747, 3523],
    B192: [19, 37, 75, 152, 305, 611, 1199, 2411],
    B256: [14, 29, 58, 118, 237, 476, 929, 1866],
}
TABLE_CASES = [(level, 2 ** (10 + i), bound) for level, row in TABLE.items() for i, bound in enumerate(row)]
TABLE_IDS = [f"N=2^{n.bit_length() - 1}/{int(level)}" for level, n, _ in TABLE_CASES]


@pytest.mark.parametrize(("level", "n", "bound"), TABLE_CASES, ids=TABLE_IDS)
def test_max_log_pq_table(level, n, bound):
    assert max_log_pq(n, level) == bound
    assert max_log_pq(n, int(level), SecretDistribution.TERNARY) == bound


def test_max_log_pq_architecture_values():
    assert max_log_pq(2**16) == 1747 and max_log_pq(2**17) == 3523  # default: 128 bits, ternary


def test_table_monotone():
    for row in TABLE.values():
        assert all(b > a for a, b in zip(row, row[1:], strict=False))
    for i in range(8):
        assert TABLE[B128][i] > TABLE[B192][i] > TABLE[B256][i]


@pytest.mark.parametrize("n", [512, 2**18, 3000])
def test_max_log_pq_outside_table(n):
    with pytest.raises(ParameterError, match=f"N = {n} has no security table entry"):
        max_log_pq(n)


def test_max_log_pq_bad_level_and_secret():
    with pytest.raises(ParameterError, match="security = 100"):
        max_log_pq(4096, 100)
    with pytest.raises(ParameterError, match="only uniform ternary"):
        max_log_pq(4096, B128, SecretDistribution.BINARY)


@pytest.mark.parametrize(("level", "n", "bound"), TABLE_CASES, ids=TABLE_IDS)
def test_check_security(level, n, bound):
    check_security(n, bound, level)
    check_security(n, bound - 0.5, level)
    with pytest.raises(InsecureParametersError) as info:
        check_security(n, bound + 0.01, level)
    msg = str(info.value)
    for part in (
        f"N = {n}",
        f"log2(PQ) = {bound + 0.01:.2f}",
        f"{int(level)}-bit",
        f"<= {bound}",
        "insecure=True",
    ):
        assert part in msg
    check_security(n, bound + 1000, level, insecure=True)


def test_check_security_outside_table_and_binary():
    with pytest.raises(InsecureParametersError, match=r"N = 256.*no ring is secure.*insecure=True"):
        check_security(256, 10)
    check_security(256, 10, insecure=True)
    with pytest.raises(InsecureParametersError, match="ternary"):
        check_security(4096, 30, secret=SecretDistribution.BINARY)
    check_security(4096, 30, secret=SecretDistribution.BINARY, insecure=True)


def test_sparse_estimates():
    """Sparse secrets: accepted only under a cited estimate, at its weight or above, at its N and level."""
    for e in SPARSE_ESTIMATES:
        assert "ePrint 2022/024" in e.source and e.max_log_pq < max_log_pq(e.n, e.level)
    assert max_log_pq(2**16, hamming_weight=192) == 1553 and max_log_pq(2**16, hamming_weight=30000) == 1553
    assert max_log_pq(2**15, hamming_weight=192) == 768
    check_security(2**16, 1553, hamming_weight=192)
    with pytest.raises(InsecureParametersError, match="log2\\(PQ\\) <= 1553 \\(published estimate, sparse secret"):
        check_security(2**16, 1553.5, hamming_weight=192)
    # the ephemeral secret of bootstrapping (h = 32, log PQ <= 121) covers weights 32 ... 191 at that modulus only
    assert max_log_pq(2**16, hamming_weight=191) == 121 and max_log_pq(2**16, hamming_weight=32) == 121
    with pytest.raises(InsecureParametersError, match="log2\\(PQ\\) <= 121"):
        check_security(2**16, 122, hamming_weight=64)
    for n, h, level in ((2**16, 31, B128), (2**14, 192, B128), (2**16, 192, B192)):
        with pytest.raises(ParameterError, match=f"Hamming weight {h} at N = {n} has no published {int(level)}-bit"):
            max_log_pq(n, level, hamming_weight=h)
    check_security(2**14, 400, hamming_weight=1, insecure=True)
    for bad in (0, 2**16 + 1, True, 1.5):
        with pytest.raises(ParameterError, match="hamming_weight"):
            max_log_pq(2**16, hamming_weight=bad)


def test_hamming_weight_is_part_of_the_ring():
    dense = RingParams(n=16, q=(97,), insecure=True)
    sparse = RingParams(n=16, q=(97,), insecure=True, hamming_weight=3)
    assert sparse != dense and sparse.digest() != dense.digest() and sparse.hamming_weight == 3
    assert b'"hamming_weight":3' in sparse.canonical_encoding()
    assert b"hamming_weight" not in dense.canonical_encoding()  # uniform-ternary digests are unchanged
    lit = RingParamsLiteral(log_n=10, q_bits=(25,), hamming_weight=64, insecure=True)
    assert RingParams.from_literal(lit).hamming_weight == 64
    with pytest.raises(ParameterError, match="hamming_weight = 17"):
        RingParams(n=16, q=(97,), insecure=True, hamming_weight=17)


def test_cross_set6_is_insecure():
    """CROSS parameter set 6 (N = 2^16, log PQ 1904) exceeds the 128-bit bound 1747."""
    with pytest.raises(InsecureParametersError, match="<= 1747"):
        check_security(2**16, 1904)


# --------------------------------------------------------------------------------------------------
# Literal -> RingParams
# --------------------------------------------------------------------------------------------------

LIT = RingParamsLiteral(log_n=12, q_bits=(30, 30, 20), p_bits=(28,))


def test_from_literal_round_trip():
    params = RingParams.from_literal(LIT)
    n = 4096
    assert params.n == n and params.log_n == 12
    assert params.q[:2] == ntt_primes(30, n, 2)
    assert params.q[2:] == ntt_primes(20, n, 1) and params.p == ntt_primes(28, n, 1)
    assert [q.bit_length() for q in params.q] == [30, 30, 20] and params.p[0].bit_length() == 28
    for m in params.moduli:
        assert is_prime(m) and m % (2 * n) == 1 and m < 2**31
    assert params.security is B128 and params.secret is SecretDistribution.TERNARY and not params.insecure
    assert params.log_q == pytest.approx(80, abs=0.05) and params.log_p == pytest.approx(28, abs=0.01)
    assert params.log_pq == pytest.approx(params.log_q + params.log_p)
    assert params.log_pq <= max_log_pq(n)
    # Explicit primes give the same set back.
    again = RingParams.from_literal(RingParamsLiteral(log_n=12, q=params.q, p=params.p))
    assert again == params
    assert RingParams(n=n, q=params.q, p=params.p) == params


def test_same_size_primes_are_distinct_across_q_and_p():
    params = RingParams.from_literal(RingParamsLiteral(log_n=12, q_bits=(27, 27), p_bits=(27,)))
    assert params.moduli == ntt_primes(27, 4096, 3)


def test_explicit_q_with_generated_p_excludes_q():
    q0 = ntt_primes(28, 4096, 1)[0]
    params = RingParams.from_literal(RingParamsLiteral(log_n=12, q=(q0,), p_bits=(28,)))
    assert params.p == (ntt_primes(28, 4096, 2)[1],)


def test_literal_normalizes_sequences():
    lit = RingParamsLiteral(log_n=12, q_bits=[30, 30, 20], p_bits=np.array([28]))
    assert lit == LIT and hash(lit) == hash(LIT)
    assert isinstance(lit.q_bits, tuple) and type(lit.p_bits[0]) is int


def test_params_equality_and_hash_stable():
    a = RingParams.from_literal(LIT)
    b = RingParams.from_literal(dataclasses.replace(LIT))
    assert a == b and hash(a) == hash(b) and a.digest() == b.digest()
    assert len({a, b}) == 1
    c = RingParams.from_literal(dataclasses.replace(LIT, security=B192, q_bits=(30, 30), p_bits=()))
    assert c != a and c.digest() != a.digest()
    d = RingParams(n=a.n, q=a.q, p=a.p, insecure=True)
    assert d != a and d.digest() != a.digest()
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.n = 8192


def test_digest_known_answer():
    """The canonical encoding (version 1) and its SHA-256 are part of the serialization format."""
    params = RingParams(n=16, q=(97,), insecure=True)
    assert params.canonical_encoding() == (
        b'{"insecure":true,"n":16,"p":[],"q":[97],"secret":"ternary","security":128,'
        b'"type":"crossfhe.RingParams","version":1}'
    )
    assert re.fullmatch("[0-9a-f]{64}", params.digest())
    assert params.digest() == "28176fdd1c319989063e1b6f8a8d10aa52d92d504547fe588b7995ab3453da1e"


def test_params_as_jit_static_argument():
    traces = []

    @functools.partial(jax.jit, static_argnames="params")
    def add_first_prime(x, *, params):
        traces.append(params)
        return (x + params.q[0] % 1000) % params.n

    x = jnp.arange(4, dtype=jnp.int32)
    a = RingParams.from_literal(LIT)
    b = RingParams.from_literal(RingParamsLiteral(log_n=12, q_bits=(30, 30, 20), p_bits=(28,)))
    want = (np.arange(4) + a.q[0] % 1000) % 4096
    np.testing.assert_array_equal(add_first_prime(x, params=a), want)
    np.testing.assert_array_equal(add_first_prime(x, params=b), want)
    assert len(traces) == 1  # equal params hit the same cache entry
    c = RingParams.from_literal(dataclasses.replace(LIT, q_bits=(29,)))
    add_first_prime(x, params=c)
    assert len(traces) == 2


def test_small_ring_needs_insecure():
    lit = RingParamsLiteral(log_n=4, q_bits=(20,))
    with pytest.raises(InsecureParametersError, match="N = 16"):
        RingParams.from_literal(lit)
    params = RingParams.from_literal(dataclasses.replace(lit, insecure=True))
    assert params.n == 16 and params.q[0] % 32 == 1


def test_insecure_set_beyond_bound_is_accepted_only_when_declared():
    lit = RingParamsLiteral(log_n=12, q_bits=(30, 30, 30, 30))
    with pytest.raises(InsecureParametersError, match=r"N = 4096, log2\(PQ\) = 120\.00 .* <= 109"):
        RingParams.from_literal(lit)
    assert RingParams.from_literal(dataclasses.replace(lit, insecure=True)).log_pq > 109


Q12 = ntt_primes(30, 4096, 2)
BAD_LITERALS = {
    "log_n=3": (dict(log_n=3, q_bits=(20,), insecure=True), r"log_n = 3: must be in \[4, 17\]"),
    "log_n=18": (dict(log_n=18, q_bits=(31,)), r"log_n = 18"),
    "log_n=float": (dict(log_n=12.0, q_bits=(30,)), r"log_n = 12.0 must be an int"),
    "q_bits=32": (dict(log_n=12, q_bits=(30, 32)), r"q_bits\[1\] = 32: prime sizes must be in \[14, 31\]"),
    "p_bits=13": (dict(log_n=12, q_bits=(30,), p_bits=(13,)), r"p_bits\[0\] = 13"),
    "q_bits=empty": (dict(log_n=12), "q_bits is empty"),
    "q_bits+q": (dict(log_n=12, q_bits=(30,), q=Q12), "give q_bits or q, not both"),
    "duplicate-q": (dict(log_n=12, q=(Q12[0], Q12[1], Q12[0])), r"q\[2\] = \d+ repeats q\[0\]"),
    "duplicate-q-p": (dict(log_n=12, q=Q12, p=(Q12[1],)), r"p\[0\] = \d+ repeats q\[1\]"),
    "not-ntt-friendly": (dict(log_n=12, q=(Q12[0], 1073741827)), r"q\[1\] = 1073741827 is not NTT-friendly"),
    "not-ntt-friendly-N": (dict(log_n=13, q=(40961,)), r"q\[0\] = 40961 is not NTT-friendly for N = 8192"),
    "not-prime": (dict(log_n=12, q=(16385,)), r"q\[0\] = \d+ is not prime"),
    "32-bit-prime": (dict(log_n=12, q=(2**31 + 2**20 + 1,)), r"q\[0\] = 2148532225: .*at most 31 bits"),
    "129-limbs": (
        dict(log_n=12, q_bits=(30,) * 124, p_bits=(30,) * 5, insecure=True),
        "129 limbs .* maximum 128",
    ),
    "not-enough-primes": (
        dict(log_n=16, q_bits=(20, 20, 20), insecure=True),
        "cannot generate the 20-bit primes",
    ),
    "security=100": (dict(log_n=12, q_bits=(30,), security=100), "security = 100"),
    "q_bits=str": (dict(log_n=12, q_bits="30"), "q_bits = '30' must be a sequence of ints"),
    "q_bits=bool": (dict(log_n=12, q_bits=(True,)), r"q_bits\[0\] = True must be an int"),
}


@pytest.mark.parametrize(("kwargs", "match"), list(BAD_LITERALS.values()), ids=list(BAD_LITERALS))
def test_bad_literals(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        RingParams.from_literal(RingParamsLiteral(**kwargs))


def test_max_limbs_accepted():
    params = RingParams.from_literal(RingParamsLiteral(log_n=12, q_bits=(30,) * MAX_LIMBS, insecure=True))
    assert len(params.moduli) == MAX_LIMBS == len(set(params.moduli))


def test_direct_construction_is_checked():
    with pytest.raises(ParameterError, match=r"n = 3000: N must be a power of two"):
        RingParams(n=3000, q=(Q12[0],), insecure=True)
    with pytest.raises(ParameterError, match="q is empty"):
        RingParams(n=4096, q=())
    with pytest.raises(ParameterError, match="limbs exceeds the maximum 128"):
        RingParams(n=4096, q=ntt_primes(30, 4096, 129), insecure=True)
    with pytest.raises(ParameterError, match="secret"):
        RingParams(n=4096, q=Q12, secret="ternary")
    with pytest.raises(ParameterError, match="insecure"):
        RingParams(n=4096, q=Q12, insecure=1)
