"""Gadget decomposition (one word modulus and RNS) and RNS digit groups, against Python big integers."""

from __future__ import annotations

import functools
import random
from fractions import Fraction

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crossfhe.errors import BasisMismatchError, ParameterError
from crossfhe.math import primes
from crossfhe.math.decompose import (
    Gadget,
    RNSGadgetPlan,
    decompose_signed,
    decompose_signed_rns,
    digit_bases,
    digit_partition,
    digit_residues,
    digits_to_residues,
    gadget_digits_rns,
)
from crossfhe.math.rns import RNSBasis, compose, decompose


def ntt_primes(bits: int, count: int, two_n: int = 1 << 17) -> tuple[int, ...]:
    """The ``count`` largest primes q < 2^bits with q = 1 mod two_n."""
    return primes.ntt_primes(bits, two_n // 2, count)


Q30 = ntt_primes(30, 1)[0]  # 1073479681
Q31 = 2**31 - 1  # Mersenne prime, 31 bits


def centered(x: int, m: int) -> int:
    x %= m
    return x - m if x > m // 2 else x


def edge_values(modulus: int, gadget: Gadget) -> list[int]:
    """0, 1, -1, around M/2, around powers B^j and B^j / 2, and inputs whose x B^l / M is close to a
    half-integer (the rounding boundaries of the approximate decomposition)."""
    b, l = gadget.base, gadget.levels
    vals = [0, 1, modulus - 1, modulus // 2, modulus // 2 + 1, modulus // 2 - 1]
    for j in range(1, l + 1):
        for p in (b**j, b**j // 2):
            vals += [p - 1, p, p + 1]
    for m in (0, 1, b**l // 2 - 1, b**l // 2, b**l - 1, 12345):
        t = (2 * m + 1) * modulus // (2 * b**l)
        vals += [t, t + 1]
    return [v % modulus for v in vals]


def check_digits(digits, xs: list[int], modulus: int, gadget: Gadget) -> None:
    """Digit ranges, and reconstruction: exact (over Z, to the centered x) or within the error bound."""
    d = np.asarray(digits)
    assert d.dtype == np.int32 and d.shape == (gadget.levels, len(xs))
    b, l, half = gadget.base, gadget.levels, gadget.base // 2
    exact = gadget.is_exact_for(modulus)
    assert d.min() >= -half and d.max() <= half
    assert d[1:].max(initial=-half) <= half - 1
    if not exact:
        assert d[0].max() <= half - 1
    g, bound = gadget.vector(modulus), gadget.error_bound(modulus)
    for n, x in enumerate(xs):
        col = [int(v) for v in d[:, n]]
        v = sum(dj * b ** (l - 1 - j) for j, dj in enumerate(col))
        recon = sum(dj * gj for dj, gj in zip(col, g, strict=True))
        if exact:
            assert v == centered(x, modulus)
            assert (recon - x) % modulus == 0
        else:
            assert (v - (x * b**l + modulus // 2) // modulus) % b**l == 0  # v = round(x B^l / M) mod B^l
            assert abs(centered(x - recon, modulus)) <= bound


# --------------------------------------------------------------------------------------------------
# Gadget
# --------------------------------------------------------------------------------------------------


def test_gadget_known_answers():
    g = Gadget(base_log=4, levels=2)
    assert g.base == 16 and not g.is_exact_for(2**16)
    assert g.vector(2**16) == (4096, 256)  # TFHE's q / B^(j+1) for a power-of-two modulus
    assert g.error_bound(2**16) == 128  # q / (2 B^l): the rounded low bits
    assert Gadget(10, 3).vector(Q30) == (2**20, 2**10, 1) and Gadget(10, 3).error_bound(Q30) == 0
    g8 = Gadget(8, 2)
    assert g8.vector(Q30) == (round(Fraction(Q30, 2**8)), round(Fraction(Q30, 2**16)))
    assert g8.error_bound(Q30) > Fraction(Q30, 2**17)
    assert Gadget(3, 2) == Gadget(3, 2) and hash(Gadget(3, 2)) == hash(Gadget(3, 2))


@pytest.mark.parametrize("base_log,levels", [(0, 1), (31, 1), (8, 0)], ids=["k=0", "k=31", "l=0"])
def test_gadget_rejects(base_log, levels):
    with pytest.raises(ParameterError):
        Gadget(base_log, levels)


# --------------------------------------------------------------------------------------------------
# One word modulus
# --------------------------------------------------------------------------------------------------

SINGLE_CASES = [
    (Q30, 10, 3),  # exact, 30 = 30 bits
    (Q30, 6, 5),  # exact
    (Q30, 7, 5),  # exact with a spare bit
    (Q30, 1, 30),  # exact, binary digits
    (Q30, 30, 1),  # exact, one digit
    (Q30, 8, 2),  # approximate
    (Q30, 4, 3),
    (Q30, 1, 5),
    (Q30, 29, 1),
    (Q31, 16, 2),  # exact, 31-bit modulus
    (Q31, 30, 1),  # approximate, one 30-bit digit
    (Q31, 5, 4),
    (2**20, 5, 2),  # power of two: TFHE's top bits, error <= q / (2 B^l)
    (2**20, 5, 4),  # power of two, exact
    (3, 1, 2),
    (1000, 3, 3),  # even, not a power of two, B^l < q
]


@pytest.mark.parametrize(
    "q,base_log,levels", SINGLE_CASES, ids=[f"q={q}/k={k}/l={l}" for q, k, l in SINGLE_CASES]
)
def test_decompose_signed(q, base_log, levels):
    gadget = Gadget(base_log, levels)
    rng = random.Random(f"single-{q}-{base_log}-{levels}")
    xs = edge_values(q, gadget) + [rng.randrange(q) for _ in range(200)]
    check_digits(decompose_signed(np.array(xs, dtype=np.uint32), q, gadget), xs, q, gadget)


@settings(max_examples=15, deadline=None)  # each example compiles (q and the gadget are static)
@given(
    q=st.integers(min_value=2, max_value=2**31 - 1),
    base_log=st.integers(min_value=1, max_value=30),
    levels=st.integers(min_value=1, max_value=6),
    data=st.data(),
)
def test_decompose_signed_property(q, base_log, levels, data):
    gadget = Gadget(base_log, levels)
    xs = data.draw(st.lists(st.integers(min_value=0, max_value=q - 1), min_size=1, max_size=16))
    check_digits(decompose_signed(np.array(xs, dtype=np.uint32), q, gadget), xs, q, gadget)


def test_decompose_signed_batch_shape_and_errors():
    gadget = Gadget(8, 2)
    x = np.arange(24, dtype=np.uint32).reshape(2, 3, 4) * 1000003
    assert decompose_signed(x, Q30, gadget).shape == (2, 2, 3, 4)
    for q in (1, 2**31):
        with pytest.raises(ParameterError):
            decompose_signed(x, q, gadget)


def test_digits_to_residues():
    basis = RNSBasis(ntt_primes(30, 3))
    rng = np.random.default_rng(5)
    d = rng.integers(-(2**9), 2**9 + 1, size=(3, 2, 16), dtype=np.int32)
    d[0, 0, :3] = (-(2**9), 0, 2**9)
    out = np.asarray(digits_to_residues(d, basis.table.q))
    assert out.shape == (3, 2, 3, 16) and out.dtype == np.uint32
    for i, q in enumerate(basis.moduli):
        np.testing.assert_array_equal(out[..., i, :], (d.astype(np.int64) % q).astype(np.uint32))


# --------------------------------------------------------------------------------------------------
# Whole integers mod Q of an RNS basis
# --------------------------------------------------------------------------------------------------

RNS_CASES = [
    (1, 30, 8, 2),  # approximate
    (1, 30, 10, 3),  # exact
    (2, 30, 8, 3),  # approximate, Q ~ 2^60
    (2, 30, 10, 5),  # approximate, 50 bits, v spans two words
    (2, 30, 1, 7),
    (2, 30, 30, 2),  # exact with B^l = 2^60 > Q
    (2, 30, 16, 4),  # exact
    (3, 28, 7, 4),  # approximate, Q ~ 2^84
    (3, 28, 25, 3),  # approximate, 75 bits
    (3, 28, 22, 4),  # exact
    (4, 31, 10, 4),  # approximate, Q ~ 2^124
    (4, 31, 30, 4),  # approximate, 120 bits: v spans four words
    (4, 31, 30, 5),  # exact
]


@functools.cache
def rns_basis(limbs: int, bits: int) -> RNSBasis:
    return RNSBasis(ntt_primes(bits, limbs))


@pytest.mark.parametrize(
    "limbs,bits,base_log,levels", RNS_CASES, ids=[f"L={n}/bits={b}/k={k}/l={l}" for n, b, k, l in RNS_CASES]
)
def test_decompose_signed_rns(limbs, bits, base_log, levels):
    basis, gadget = rns_basis(limbs, bits), Gadget(base_log, levels)
    big_q = basis.product
    assert RNSGadgetPlan.create(basis, gadget).exact == gadget.is_exact_for(big_q)
    rng = random.Random(f"rns-{limbs}-{bits}-{base_log}-{levels}")
    xs = edge_values(big_q, gadget) + [rng.randrange(big_q) for _ in range(200)]
    digits = decompose_signed_rns(decompose(xs, basis), basis, gadget)
    check_digits(digits, xs, big_q, gadget)
    if limbs == 1:  # one definition for a word modulus and a one-limb basis
        one_word = decompose_signed(np.array(xs, dtype=np.uint32), big_q, gadget)
        np.testing.assert_array_equal(np.asarray(digits), np.asarray(one_word))


def test_decompose_signed_rns_batch_and_user_jit():
    assert not jax.config.jax_enable_x64
    basis, gadget = rns_basis(2, 30), Gadget(7, 6)
    plan = RNSGadgetPlan.create(basis, gadget)
    rng = random.Random(99)
    xs = [rng.randrange(basis.product) for _ in range(2 * 32)]
    x = decompose(np.array(xs, dtype=object).reshape(2, 32), basis)
    digits = jax.jit(lambda x, plan: gadget_digits_rns(x, plan))(x, plan)
    assert digits.shape == (6, 2, 32)
    check_digits(np.asarray(digits).reshape(6, -1), xs, basis.product, gadget)
    with pytest.raises(BasisMismatchError):
        decompose_signed_rns(x[:, :1], basis, gadget)


# --------------------------------------------------------------------------------------------------
# RNS digits (dnum)
# --------------------------------------------------------------------------------------------------


PARTITION_CASES = [
    (6, 1, None, [(0, 6)]),
    (6, 3, None, [(0, 2), (2, 4), (4, 6)]),
    (5, 2, None, [(0, 3), (3, 5)]),
    (5, 4, None, [(0, 2), (2, 4), (4, 5)]),  # alpha = 2: three groups, as OpenFHE
    (6, 3, 3, [(0, 2), (2, 3)]),
    (6, 3, 1, [(0, 1)]),
    (4, 4, None, [(0, 1), (1, 2), (2, 3), (3, 4)]),
]


@pytest.mark.parametrize(
    "n_limbs,dnum,active,expected",
    PARTITION_CASES,
    ids=[f"limbs={n}/dnum={d}/active={a or n}" for n, d, a, _ in PARTITION_CASES],
)
def test_digit_partition(n_limbs, dnum, active, expected):
    groups = digit_partition(n_limbs, dnum, active=active)
    assert [(g.start, g.stop) for g in groups] == expected


@pytest.mark.parametrize(
    "n_limbs,dnum,active",
    [(4, 0, None), (4, 5, None), (4, 2, 0), (4, 2, 5)],
    ids=["limbs=4/dnum=0", "limbs=4/dnum=5", "limbs=4/dnum=2/active=0", "limbs=4/dnum=2/active=5"],
)
def test_digit_partition_rejects(n_limbs, dnum, active):
    with pytest.raises(ParameterError):
        digit_partition(n_limbs, dnum, active=active)


def test_digit_residues_and_bases():
    basis = RNSBasis(ntt_primes(30, 5))
    groups = digit_partition(5, 3)
    rng = random.Random(11)
    xs = [rng.randrange(basis.product) for _ in range(8)]
    x = decompose(xs, basis)
    parts, bases = digit_residues(x, groups), digit_bases(basis, groups)
    assert [len(b) for b in bases] == [2, 2, 1]
    assert tuple(q for b in bases for q in b.moduli) == basis.moduli
    for part, sub in zip(parts, bases, strict=True):
        assert list(compose(part, sub)) == [v % sub.product for v in xs]
