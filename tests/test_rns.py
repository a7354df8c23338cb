"""RNS bases, CRT, fast basis conversion, ModUp / ModDown and rescale against Python big integers."""

from __future__ import annotations

import functools
import math
import random
from fractions import Fraction

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crossfhe.errors import BasisMismatchError, ParameterError
from crossfhe.math import primes
from crossfhe.math.modular import shoup_mul, shoup_precompute
from crossfhe.math.rns import (
    BasisConversion,
    ModDownPlan,
    ModUpPlan,
    RescalePlan,
    RNSBasis,
    centered_fraction,
    compose,
    compose_float,
    decompose,
    fast_basis_conversion,
    mod_down,
    mod_up,
    rescale,
)

# --------------------------------------------------------------------------------------------------
# Test primes: q = 1 mod 2^17 (NTT-friendly up to N = 2^16), checked by deterministic Miller-Rabin.
# --------------------------------------------------------------------------------------------------

def ntt_primes(bits: int, count: int, two_n: int = 1 << 17) -> tuple[int, ...]:
    """The ``count`` largest primes q < 2^bits with q = 1 mod two_n."""
    return primes.ntt_primes(bits, two_n // 2, count)


def basis_of(bits: int, count: int, skip: int = 0) -> RNSBasis:
    return RNSBasis(ntt_primes(bits, skip + count)[skip:])


def spell(names: str):
    """Test ids that spell the parameters: spell("bits,limbs")((30, 4)) == "bits=30/limbs=4"."""
    keys = names.split(",")
    return lambda case: "/".join(f"{k}={v}" for k, v in zip(keys, case, strict=True))


def random_ints(rng: random.Random, bound: int, n: int, edges=()) -> list[int]:
    """n integers in [0, bound): the given edge values first (reduced), then uniform ones."""
    vals = [e % bound for e in edges][:n]
    return vals + [rng.randrange(bound) for _ in range(n - len(vals))]


# --------------------------------------------------------------------------------------------------
# Bases
# --------------------------------------------------------------------------------------------------


def test_basis_constants():
    basis = basis_of(30, 5)
    big_q = 1
    for q in basis.moduli:
        big_q *= q
    assert basis.product == big_q
    for i, q in enumerate(basis.moduli):
        assert basis.hat[i] == big_q // q
        assert basis.hat[i] * basis.hat_inv[i] % q == 1
        assert basis.hat_inv_shoup[i] == (basis.hat_inv[i] << 32) // q
    assert basis.table.q.shape == (5, 1) and basis.table.q.dtype == np.uint32
    assert [int(v) for v in basis.table.q[:, 0]] == list(basis.moduli)


def test_basis_is_frozen_and_hashable():
    a = RNSBasis([7, 11, 13])
    b = RNSBasis((7, 11, 13))
    assert a == b and hash(a) == hash(b) and a.moduli == (7, 11, 13)
    assert a != RNSBasis((7, 13, 11))
    assert len({a, b}) == 1
    with pytest.raises(AttributeError):
        a.moduli = (3,)


@pytest.mark.parametrize(
    "moduli",
    [(), (8,), (1,), (2**31 + 11,), (2**31 - 1, 2**31 - 1), (15, 35), (9, 7, 3)],
    ids=["empty", "even", "one", "above-2^31", "duplicate", "gcd-5", "gcd-3"],
)
def test_basis_rejects_bad_moduli(moduli):
    with pytest.raises(ParameterError):
        RNSBasis(moduli)


def test_sub_bases():
    basis = basis_of(30, 6)
    m = basis.moduli
    assert basis.drop_last().moduli == m[:5]
    assert basis.prefix(2).moduli == m[:2]
    assert basis.sub(2, 5).moduli == m[2:5]
    assert basis.prefix(3).concat(basis.sub(3, 6)) == basis
    with pytest.raises(ParameterError):
        basis.prefix(0)
    with pytest.raises(ParameterError):
        basis.sub(3, 3)
    with pytest.raises(ParameterError):
        RNSBasis(m[:1]).drop_last()
    with pytest.raises(ParameterError):
        basis.concat(basis.prefix(1))  # shared modulus


# --------------------------------------------------------------------------------------------------
# Exact CRT
# --------------------------------------------------------------------------------------------------


CRT_CASES = [(30, 1, 6), (30, 4, 8), (28, 10, 6), (31, 3, 10)]


@pytest.mark.parametrize("bits,limbs,log_n", CRT_CASES, ids=map(spell("bits,limbs,logN"), CRT_CASES))
def test_decompose_compose_roundtrip(bits, limbs, log_n):
    basis = basis_of(bits, limbs)
    big_q, n = basis.product, 1 << log_n
    rng = random.Random(f"crt-{bits}-{limbs}-{log_n}")
    xs = random_ints(rng, big_q, n, edges=(0, 1, big_q - 1, big_q // 2, big_q // 2 + 1))
    res = decompose(xs, basis)
    assert res.shape == (limbs, n) and res.dtype == np.uint32
    for i, q in enumerate(basis.moduli):
        assert [int(r) for r in res[i]] == [x % q for x in xs]
    assert list(compose(res, basis)) == xs
    centered = [x - big_q if x > big_q // 2 else x for x in xs]
    assert list(compose(res, basis, centered=True)) == centered
    assert max(centered) == (big_q - 1) // 2 and min(centered) == -((big_q - 1) // 2)


FLOAT_CASES = [(30, 1, 6), (28, 10, 6), (31, 3, 8), (31, 40, 6)]


@pytest.mark.parametrize("bits,limbs,log_n", FLOAT_CASES, ids=map(spell("bits,limbs,logN"), FLOAT_CASES))
def test_compose_float_is_the_centered_crt_within_ulps(bits, limbs, log_n):
    """The Garner digits + Horner float equals float(centered CRT) to 2^-50 relative, for values of
    every size (small ones, as a decoded plaintext has, and up to (Q - 1) / 2 of both signs); beyond
    float64's range it gives +-inf."""
    basis = basis_of(bits, limbs)
    big_q, n = basis.product, 1 << log_n
    rng = random.Random(f"crtf-{bits}-{limbs}-{log_n}")
    half = (big_q - 1) // 2
    xs = [0, 1, -1, half, -half, 2**40 + 3, -(2**55) - 7]
    xs += [rng.randrange(-(2 ** rng.randrange(1, 80)), 2 ** rng.randrange(1, 80)) for _ in range(n // 2)]
    xs = [x for x in xs if abs(x) <= half]
    xs += [rng.randrange(-half, half + 1) for _ in range(n - len(xs))]
    res = decompose([x % big_q for x in xs], basis)
    got = compose_float(res, basis)
    assert got.shape == (n,) and got.dtype == np.float64
    for g, x in zip(got.tolist(), xs):
        if abs(x) >= 2**1024:
            assert g == (math.inf if x > 0 else -math.inf)
        else:
            assert abs(g - float(x)) <= 2**-50 * abs(float(x))
    # any words are accepted: the residues plus a multiple of q_i decode the same
    bumped = res.astype(np.uint64) + np.array(basis.moduli, dtype=np.uint64)[:, None]
    bumped = np.where(bumped < 2**32, bumped, res).astype(np.uint32)
    assert np.array_equal(compose_float(bumped, basis), got)


FRACTION_CASES = [(30, 1), (14, 6), (31, 3), (28, 10), (30, 24), (31, 40)]


@pytest.mark.parametrize("bits,limbs", FRACTION_CASES, ids=map(spell("bits,limbs"), FRACTION_CASES))
def test_centered_fraction_is_x_over_q(bits, limbs):
    """centered_fraction = x / Q for the centered CRT value x, against exact Fractions: within 2^-45 relative
    plus limbs * 2^-1074 absolute. Why: the Garner digits are exact integers, and each of the k Horner steps
    r <- (r + d_j) / q_j rounds twice (2^-53 relative each) without cancellation (|r| <= 1/2 while a nonzero
    digit has |d_j| >= 1), so 2k 2^-53 <= 2^-45 for k <= 128; the absolute term covers steps in float64's
    subnormal range (x / Q below 2^-1022, as for small x when Q > 2^1100). 14-bit primes take the
    non-Barrett digit path. For Q > 2^1100 compose_float overflows to +-inf; this stays finite."""
    basis = RNSBasis(primes.ntt_primes(bits, 8, limbs)) if bits < 17 else basis_of(bits, limbs)
    big_q = basis.product
    rng = random.Random(f"cfrac-{bits}-{limbs}")
    half = (big_q - 1) // 2
    xs = [0, 1, -1, half, -half, half - 1, 2**40 + 3, -(2**55) - 7, big_q // 3, -(big_q // 7)]
    xs = [x for x in xs if abs(x) <= half]
    xs += [rng.randrange(-(2 ** rng.randrange(1, 80)), 2 ** rng.randrange(1, 80)) for _ in range(16)]
    xs += [rng.randrange(-half, half + 1) for _ in range(64 - len(xs))]
    res = decompose([x % big_q for x in xs], basis)
    got = centered_fraction(res, basis)
    assert got.shape == (64,) and got.dtype == np.float64 and np.all(np.abs(got) <= 0.5)
    exact = compose(res, basis, centered=True)
    for g, x in zip(got.tolist(), exact.tolist(), strict=True):
        want = Fraction(x, big_q)
        assert abs(Fraction(g) - want) <= Fraction(1, 2**45) * abs(want) + Fraction(limbs, 2**1074), (x, g)
    if big_q > 2**1100:
        assert np.all(np.isfinite(got)) and np.isinf(compose_float(res, basis)).any()
        assert got[xs.index(half)] == 0.5  # (Q - 1) / 2Q rounds to 1/2 at this size


@settings(max_examples=60, deadline=None)
@given(xs=st.lists(st.integers(min_value=-(2**200), max_value=2**200), min_size=1, max_size=8))
def test_decompose_compose_property(xs):
    basis = basis_of(30, 4)
    big_q = basis.product
    res = decompose(np.array(xs, dtype=object).reshape(1, -1), basis)
    assert res.shape == (1, 4, len(xs))
    assert list(compose(res, basis)[0]) == [x % big_q for x in xs]
    back = compose(res, basis, centered=True)[0]
    assert all((b - x) % big_q == 0 and abs(2 * b) < big_q for b, x in zip(back, xs, strict=True))


def test_decompose_scalar_and_batch_axes():
    basis = basis_of(30, 3)
    assert decompose(-1, basis).tolist() == [q - 1 for q in basis.moduli]
    xs = np.arange(24, dtype=np.int64).reshape(2, 3, 4) * 10**6
    res = decompose(xs, basis)
    assert res.shape == (2, 3, 3, 4)
    assert (compose(res, basis) == xs.astype(object)).all()


def test_compose_rejects_limb_mismatch():
    basis = basis_of(30, 3)
    with pytest.raises(BasisMismatchError):
        compose(np.zeros((2, 8), dtype=np.uint32), basis)


# --------------------------------------------------------------------------------------------------
# Fast basis conversion
# --------------------------------------------------------------------------------------------------


def conversion_alpha(x: int, src: RNSBasis) -> int:
    """alpha with sum_i [x (C/c_i)^-1]_{c_i} C/c_i = x + alpha C (the conversion's overshoot)."""
    s = sum((x % c) * inv % c * h for c, inv, h in zip(src.moduli, src.hat_inv, src.hat, strict=True))
    alpha, rem = divmod(s - x, src.product)
    assert rem == 0
    return alpha


def check_conversion(xs, src: RNSBasis, dst: RNSBasis, out) -> list[int]:
    """out == (x + alpha C) mod b_j with the exact alpha of each x, and 0 <= alpha < |C|."""
    out = np.asarray(out)
    assert out.dtype == np.uint32 and out.shape[-2:] == (len(dst), len(xs))
    alphas = []
    for n, x in enumerate(xs):
        alpha = conversion_alpha(x, src)
        assert 0 <= alpha < len(src)
        expect = [(x + alpha * src.product) % b for b in dst.moduli]
        assert [int(v) for v in out[:, n]] == expect
        alphas.append(alpha)
    return alphas


CONV_CASES = [(30, 1, 30, 1, 6), (30, 3, 30, 2, 8), (28, 10, 30, 4, 6), (31, 5, 28, 3, 7), (30, 8, 30, 8, 10)]


@pytest.mark.parametrize(
    "src_bits,src_limbs,dst_bits,dst_limbs,log_n",
    CONV_CASES,
    ids=map(spell("Cbits,Climbs,Bbits,Blimbs,logN"), CONV_CASES),
)
def test_fast_conversion_equals_x_plus_alpha_c(src_bits, src_limbs, dst_bits, dst_limbs, log_n):
    src = basis_of(src_bits, src_limbs)
    dst = basis_of(dst_bits, dst_limbs, skip=src_limbs if src_bits == dst_bits else 0)
    conv = BasisConversion.create(src, dst)
    rng = random.Random(f"conv-{src_bits}-{src_limbs}-{dst_bits}-{dst_limbs}")
    big_c = src.product
    xs = random_ints(rng, big_c, 1 << log_n, edges=(0, 1, big_c - 1, big_c // 2, big_c // 2 + 1))
    alphas = check_conversion(xs, src, dst, fast_basis_conversion(decompose(xs, src), conv))
    assert alphas[0] == 0  # x = 0 converts exactly
    if src_limbs >= 3:
        assert max(alphas) > 0  # the approximation is real, not vacuous


@settings(max_examples=25, deadline=None)
@given(xs=st.lists(st.integers(min_value=0, max_value=basis_of(30, 4).product - 1), min_size=8, max_size=8))
def test_fast_conversion_property(xs):
    src, dst = basis_of(30, 4), basis_of(30, 3, skip=4)
    conv = _cached_conversion(src, dst)
    check_conversion(xs, src, dst, fast_basis_conversion(decompose(xs, src), conv))


@functools.cache
def _cached_conversion(src, dst, chunk=None):
    return BasisConversion.create(src, dst, chunk=chunk)


def test_fast_conversion_chunked_110_limbs():
    """110 source limbs near 2^31 into 30-bit targets: the safe chunk is 102, so 2 partial sums."""
    src, dst = basis_of(31, 110), basis_of(30, 3)
    conv = _cached_conversion(src, dst)
    assert conv.chunk == 102
    rng = random.Random(44)
    xs = random_ints(rng, src.product, 64, edges=(0, 1, src.product - 1))
    check_conversion(xs, src, dst, fast_basis_conversion(decompose(xs, src), conv))


@pytest.mark.parametrize("chunk", [3, 4], ids=lambda c: f"limbs=10/chunk={c}")
def test_fast_conversion_smaller_chunks(chunk):
    """A lowered chunk (uneven last chunk included) gives the same exact result."""
    src, dst = basis_of(31, 10), basis_of(28, 2)
    rng = random.Random(10)
    xs = random_ints(rng, src.product, 32, edges=(0, src.product - 1))
    x = decompose(xs, src)
    out = fast_basis_conversion(x, _cached_conversion(src, dst, chunk))
    np.testing.assert_array_equal(
        np.asarray(out), np.asarray(fast_basis_conversion(x, _cached_conversion(src, dst)))
    )
    check_conversion(xs, src, dst, out)


def test_chunk_bound_from_targets():
    """Source limbs per float64 product: the sums of centered 31-bit digits split in 16-bit halves times
    centered weights stay below 2^52, a bound set by the largest target."""
    big, small = basis_of(31, 2), basis_of(28, 2)
    assert BasisConversion.create(big, small).chunk == 2**52 // ((2**16 - 1 + 2**14) * (max(small.moduli) // 2))
    assert BasisConversion.create(small, big).chunk == 51
    with pytest.raises(ParameterError):
        BasisConversion.create(big, small, chunk=10**6)
    with pytest.raises(ParameterError):
        BasisConversion.create(big, RNSBasis((32749,)))  # target below 2^15


def test_fast_conversion_batch_axes():
    src, dst = basis_of(30, 3), basis_of(30, 2, skip=3)
    rng = random.Random(7)
    xs = np.array(random_ints(rng, src.product, 2 * 3 * 16), dtype=object).reshape(2, 3, 16)
    out = np.asarray(fast_basis_conversion(decompose(xs, src), _cached_conversion(src, dst)))
    assert out.shape == (2, 3, 2, 16)
    flat = [int(v) for v in xs.reshape(-1)]
    check_conversion(flat, src, dst, out.transpose(2, 0, 1, 3).reshape(2, -1))


def test_fast_conversion_rejects_limb_mismatch():
    src, dst = basis_of(30, 3), basis_of(30, 2, skip=3)
    with pytest.raises(BasisMismatchError):
        fast_basis_conversion(np.zeros((2, 8), dtype=np.uint32), _cached_conversion(src, dst))


def test_user_jit_with_x64_off_is_exact():
    assert not jax.config.jax_enable_x64
    src, dst = basis_of(31, 6), basis_of(30, 4)
    conv = _cached_conversion(src, dst)
    rng = random.Random(64)
    xs = random_ints(rng, src.product, 128, edges=(0, src.product - 1))

    @jax.jit
    def user_fn(x, plan):
        return fast_basis_conversion(x, plan)

    out = user_fn(decompose(xs, src), conv)
    assert out.dtype == np.uint32
    check_conversion(xs, src, dst, out)
    # Closing over the plan (tables become constants of the user's trace) is exact too.
    check_conversion(xs, src, dst, jax.jit(lambda x: fast_basis_conversion(x, conv))(decompose(xs, src)))


# --------------------------------------------------------------------------------------------------
# ModUp / ModDown
# --------------------------------------------------------------------------------------------------


def mul_by_const(res: np.ndarray, basis: RNSBasis, c: int) -> np.ndarray:
    """Residues times the integer c, limb by limb (reference, NumPy object arithmetic)."""
    out = [
        (res[..., i, :].astype(object) * (c % q) % q).astype(np.uint32) for i, q in enumerate(basis.moduli)
    ]
    return np.stack(out, axis=-2)


UPDOWN_CASES = [(1, 1, 6), (4, 2, 8), (8, 3, 7), (3, 4, 6)]


@pytest.mark.parametrize("q_limbs,p_limbs,log_n", UPDOWN_CASES, ids=map(spell("Q,P,logN"), UPDOWN_CASES))
def test_mod_up_then_mod_down_of_p_times_x_is_exact(q_limbs, p_limbs, log_n):
    """ModUp(x) = x + alpha Q over Q ∪ P; times P it is P x mod QP; ModDown gives x back exactly."""
    q_basis, p_basis = basis_of(30, q_limbs), basis_of(30, p_limbs, skip=q_limbs)
    qp = q_basis.concat(p_basis)
    up, down = ModUpPlan.create(q_basis, qp), ModDownPlan.create(q_basis, p_basis)
    rng = random.Random(f"updown-{q_limbs}-{p_limbs}")
    xs = random_ints(rng, q_basis.product, 1 << log_n, edges=(0, 1, q_basis.product - 1))
    x = decompose(xs, q_basis)
    ext = np.asarray(mod_up(x, up))
    assert ext.shape == (len(qp), len(xs))
    np.testing.assert_array_equal(ext[:q_limbs], x)
    check_conversion(xs, q_basis, p_basis, ext[q_limbs:])
    back = mod_down(mul_by_const(ext, qp, p_basis.product), down)
    np.testing.assert_array_equal(np.asarray(back), x)


@pytest.mark.parametrize(
    "q_limbs,p_limbs", [(2, 1), (5, 2), (6, 5), (3, 14)], ids=map(spell("Q,P"), [(2, 1), (5, 2), (6, 5), (3, 14)])
)
def test_exact_mod_down_rounds_to_nearest(q_limbs, p_limbs):
    """ModDown with ``exact``: out = round(X / P) mod Q (X taken in (-QP/2, QP/2]) for random X, X next to
    multiples of P, and X at P/2 +- small offsets, where the float32 estimate of alpha may be one off and
    out is then the other neighbour of X / P (|X / P - out| <= 1, never more)."""
    q_basis, p_basis = basis_of(31, q_limbs), basis_of(31, p_limbs, skip=q_limbs)
    qp = q_basis.concat(p_basis)
    big_p, big_q, big = p_basis.product, q_basis.product, qp.product
    rng = random.Random(f"exact-down-{q_limbs}-{p_limbs}")
    xs = random_ints(rng, big, 256, edges=(0, 1, big - 1, big_p, 3 * big_p - 1, big_p // 2, big_p // 2 + 1))
    xs += [(7 * big_p + big_p // 2 + off) % big for off in (-3, -1, 0, 1, 2)]
    out = compose(mod_down(decompose(xs, qp), ModDownPlan.create(q_basis, p_basis, exact=True)), q_basis)
    off_by_one = 0
    for x, o in zip(xs, out, strict=True):
        xc = x - big if x > big // 2 else x
        nearest = (2 * xc + big_p) // (2 * big_p)  # round(xc / P), halves up
        diff = (int(o) - nearest) % big_q
        frac = abs(xc / big_p - round(xc / big_p))
        if diff:
            off_by_one += 1
            assert diff in (1, big_q - 1) and frac > 0.5 - p_limbs * 2.0**-22
    assert off_by_one <= 8  # only the handful of inputs placed at half-integers may round the other way


@pytest.mark.parametrize(
    "q_limbs,p_limbs", [(2, 1), (5, 2), (6, 5)], ids=map(spell("Q,P"), [(2, 1), (5, 2), (6, 5)])
)
def test_mod_down_error_bound(q_limbs, p_limbs):
    """ModDown(X) = floor(X / P) - alpha mod Q with 0 <= alpha < |P|: X/P - out in [0, |P|)."""
    q_basis, p_basis = basis_of(30, q_limbs), basis_of(30, p_limbs, skip=q_limbs)
    qp = q_basis.concat(p_basis)
    big_p, big_q = p_basis.product, q_basis.product
    rng = random.Random(f"down-{q_limbs}-{p_limbs}")
    xs = random_ints(
        rng, qp.product, 256, edges=(0, big_p - 1, big_p, qp.product - 1, 5 * big_p + big_p // 2)
    )
    out = compose(mod_down(decompose(xs, qp), ModDownPlan.create(q_basis, p_basis)), q_basis)
    deficits = [(x // big_p - int(o)) % big_q for x, o in zip(xs, out, strict=True)]
    assert all(0 <= d < p_limbs for d in deficits)
    for x, o, d in zip(xs, out, deficits, strict=True):
        assert d == conversion_alpha(x % big_p, p_basis)
        assert x % big_p != 0 or o == x // big_p % big_q


@pytest.mark.parametrize("dnum", [1, 2, 3], ids=lambda d: f"Q=6/P=2/dnum={d}")
def test_mod_up_of_digit_groups(dnum):
    """Hybrid key switching: each digit group D of Q extends to Q ∪ P in Q ∪ P's limb order."""
    q_basis, p_basis = basis_of(30, 6), basis_of(30, 2, skip=6)
    qp = q_basis.concat(p_basis)
    rng = random.Random(f"digits-{dnum}")
    xs = random_ints(rng, q_basis.product, 32)
    x = decompose(xs, q_basis)
    size = -(-6 // dnum)
    for start in range(0, 6, size):
        stop = min(start + size, 6)
        digit = q_basis.sub(start, stop)
        plan = ModUpPlan.create(digit, qp)
        assert plan.offset == start
        ext = np.asarray(mod_up(x[start:stop], plan))
        assert ext.shape == (8, 32)
        np.testing.assert_array_equal(ext[start:stop], x[start:stop])
        others = np.concatenate([ext[:start], ext[stop:]])
        rest = RNSBasis(qp.moduli[:start] + qp.moduli[stop:])
        check_conversion([v % digit.product for v in xs], digit, rest, others)


def test_mod_up_down_plan_errors():
    q_basis, p_basis = basis_of(30, 4), basis_of(30, 2, skip=4)
    qp = q_basis.concat(p_basis)
    with pytest.raises(ParameterError):
        ModUpPlan.create(RNSBasis((q_basis.moduli[0], q_basis.moduli[2])), qp)  # not contiguous
    with pytest.raises(ParameterError):
        ModUpPlan.create(qp, qp)  # nothing to extend to
    with pytest.raises(ParameterError):
        ModDownPlan.create(q_basis, q_basis.prefix(1))  # P shares a modulus with Q
    with pytest.raises(BasisMismatchError):
        mod_down(np.zeros((5, 8), dtype=np.uint32), ModDownPlan.create(q_basis, p_basis))
    with pytest.raises(BasisMismatchError):
        mod_up(np.zeros((3, 8), dtype=np.uint32), ModUpPlan.create(q_basis, qp))


def test_mod_up_down_under_user_jit():
    q_basis, p_basis = basis_of(30, 3), basis_of(30, 2, skip=3)
    qp = q_basis.concat(p_basis)
    up, down = ModUpPlan.create(q_basis, qp), ModDownPlan.create(q_basis, p_basis)
    p_mod = decompose(p_basis.product, qp).reshape(-1, 1)
    p_mod_shoup = shoup_precompute(p_mod, qp.table.q)

    @jax.jit
    def roundtrip(x, up, down, p_mod, p_mod_shoup, q):
        return mod_down(shoup_mul(mod_up(x, up), p_mod, p_mod_shoup, q), down)

    rng = random.Random(3)
    x = decompose(random_ints(rng, q_basis.product, 64), q_basis)
    np.testing.assert_array_equal(np.asarray(roundtrip(x, up, down, p_mod, p_mod_shoup, qp.table.q)), x)


# --------------------------------------------------------------------------------------------------
# Rescale
# --------------------------------------------------------------------------------------------------


RESCALE_CASES = [(30, 2, 6), (30, 5, 8), (28, 10, 6), (31, 3, 10)]


@pytest.mark.parametrize("bits,limbs,log_n", RESCALE_CASES, ids=map(spell("bits,limbs,logN"), RESCALE_CASES))
def test_rescale_is_exact_rounding(bits, limbs, log_n):
    basis = basis_of(bits, limbs)
    lower, q_last = basis.drop_last(), basis.moduli[-1]
    big_q, h = basis.product, (q_last - 1) // 2
    rng = random.Random(f"rescale-{bits}-{limbs}")
    edges = (0, 1, h, h + 1, q_last - 1, q_last, 7 * q_last + h, 7 * q_last + h + 1, big_q - 1, big_q - h - 1)
    xs = random_ints(rng, big_q, 1 << log_n, edges=edges)
    out = np.asarray(rescale(decompose(xs, basis), RescalePlan.create(basis)))
    assert out.shape == (limbs - 1, len(xs)) and out.dtype == np.uint32
    assert list(compose(out, lower)) == [(x + h) // q_last % lower.product for x in xs]
    # Centered: round(X_c / q_last) lands in the centered range of Q', so the equality is over Z.
    centered = [x - big_q if x > big_q // 2 else x for x in xs]
    assert list(compose(out, lower, centered=True)) == [(xc + h) // q_last for xc in centered]
    assert [int(v) for v in out[:, 1]] == [0] * (limbs - 1) and list(compose(out[:, 3:4], lower)) == [1]


def test_rescale_errors():
    with pytest.raises(ParameterError):
        RescalePlan.create(basis_of(30, 1))
    with pytest.raises(BasisMismatchError):
        rescale(np.zeros((2, 8), dtype=np.uint32), RescalePlan.create(basis_of(30, 3)))


# --- the native conversion (crossfhe.math.conv) ---------------------------------------------------------------


def _native_conv_or_skip():
    from crossfhe.kernels import NATIVE, default_kernels

    if default_kernels() is not NATIVE:  # the custom call is CPU-only and needs a compiler (the XLA path is tested)
        pytest.skip("no native CPU kernels here (a GPU backend, or no compiler)")


def _float64_conversion(y32, half, src, w, q):
    """centered_gemm_rows (the float64 product) of y32 with the tables the native kernel takes: half and src [D, S],
    w [D, M, S], q [D, M]."""
    from crossfhe.math.modular import centered_gemm_rows, gemm_chunk, gemm_weights

    u32 = lambda a: jax.numpy.asarray(np.asarray(a).astype(np.uint32))  # noqa: E731
    return centered_gemm_rows(y32, u32(half[..., None]), u32(src[..., None]),
                              jax.numpy.asarray(gemm_weights(w.astype(np.uint32), q.astype(np.uint32)[..., None])),
                              u32(q[..., None]), chunk=gemm_chunk(q.astype(np.uint32)[0, :, None]))


@pytest.mark.parametrize("bits", [20, 30, 31])
def test_native_conversion_gives_the_float64_products_words(bits):
    """conv.convert_centered: the words of centered_gemm_rows (canonical residues) for 2 digit groups of 5 and 4
    source limbs (one padding row: half 2^32 - 1, weight 0), 7 targets of ``bits`` bits (31: the wide moduli near
    2^31), leading batch axes, values at the centering boundary half and half + 1, under jit and vmap."""
    from crossfhe.math import conv

    _native_conv_or_skip()
    rng = np.random.default_rng(bits)
    n = 1536  # three blocks of the kernel's 512 coefficients
    src = np.array(primes.ntt_primes(30, 2048, 10), dtype=np.uint64).reshape(2, -1)[:, :5]  # [2, 5] (the last: padding)
    src = np.array([list(src[0]), list(src[1][:4]) + [src[0][0]]], dtype=np.uint64)
    half = src // 2
    half[1, 4] = 2**32 - 1
    dst = np.array(primes.ntt_primes(bits, 2048, 7, exclude=[int(x) for x in src.ravel()]), dtype=np.uint64)
    q = np.tile(dst, (2, 1))  # [2, 7]
    w = (rng.integers(0, 2**62, (2, 7, 5), dtype=np.uint64) % q[:, :, None])
    w[1, :, 4] = 0
    y = (rng.integers(0, 2**62, (3, 2, 5, n), dtype=np.uint64) % src[None, :, :, None])
    y[..., 4, :] = np.where(np.arange(2)[None, :, None] == 1, 0, y[..., 4, :])  # padding rows hold 0
    y[0, :, :, :2] = np.stack([half, half + 1], axis=-1)
    y32 = jax.numpy.asarray(y.astype(np.uint32))
    tables = conv.ConvTables.create(w, src, half, q)
    want = _float64_conversion(y32, half, src, w, q)
    got = jax.jit(conv.convert_centered)(y32, tables)
    assert got.shape == (3, 2, 7, n) and np.array_equal(np.asarray(got), np.asarray(want))
    one = jax.vmap(conv.convert_centered, in_axes=(0, None))(y32, tables)
    assert np.array_equal(np.asarray(one), np.asarray(want))
    with pytest.raises(ValueError, match="reduced"):
        conv.ConvTables.create(w + q[:, :, None], src, half, q)
    # the tail past the last full vector of 8 runs the portable code: 1536 + 5 coefficients
    y5 = jax.numpy.asarray(np.concatenate([y, y[..., :5]], axis=-1).astype(np.uint32))
    got5 = jax.jit(conv.convert_centered)(y5, tables)
    assert np.array_equal(np.asarray(got5)[..., :n], np.asarray(want))
    assert np.array_equal(np.asarray(got5)[..., n:], np.asarray(want)[..., :5])


@pytest.mark.parametrize("n_src", [40, 130])
def test_native_conversion_blocks_many_sources(n_src):
    """conv.convert_centered with many source limbs, where the kernel takes blocks of fewer coefficients so that a
    block's sources stay in a 32 KiB cache (40 sources: blocks of 64; 130: the smallest, 32), over a length that is
    not a multiple of the block (its last block partly vector, partly scalar): the float64 product's words."""
    from crossfhe.math import conv

    _native_conv_or_skip()
    rng = np.random.default_rng(n_src)
    n = 1000  # 15 blocks of 64 and 40 more; 31 blocks of 32 and 8 more
    src = np.array(primes.ntt_primes(30, 2048, n_src), dtype=np.uint64).reshape(1, n_src)
    dst = np.array(primes.ntt_primes(31, 2048, 5, exclude=[int(x) for x in src.ravel()]), dtype=np.uint64)[None]
    half = src // 2
    w = rng.integers(0, 2**62, (1, 5, n_src), dtype=np.uint64) % dst[:, :, None]
    y = rng.integers(0, 2**62, (2, 1, n_src, n), dtype=np.uint64) % src[None, :, :, None]
    y32 = jax.numpy.asarray(y.astype(np.uint32))
    want = _float64_conversion(y32, half, src, w, dst)
    got = jax.jit(conv.convert_centered)(y32, conv.ConvTables.create(w, src, half, dst))
    assert got.shape == (2, 1, 5, n) and np.array_equal(np.asarray(got), np.asarray(want))
