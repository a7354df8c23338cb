"""Radix-integer operators (crossfhe.tfhe.integer_ops, issue 48): bitwise, shifts and rotations, products, selects,
minimum and maximum, signed views, casts, division and overflow flags, exact against Python integers on 8-bit pairs
that cover every carry and the edge values (0, 1, 127, 128, 255), unsigned and signed; wider integers in the slow
run. 8-bit integers are 4 blocks of 2 message and 2 carry bits (INSECURE_TFHE_P4).
"""

import numpy as np
import pytest

from crossfhe.errors import ParameterError
from crossfhe.tfhe import integer, integer_ops, ops

_rng = np.random.default_rng(4811)
# edge pairs (zero, one, the sign boundary 127 / 128, all ones, equal values, carries through every block), then random
_EDGE = [(0, 0), (255, 1), (1, 255), (17, 17), (200, 255), (128, 127), (127, 128), (255, 255), (128, 128), (1, 0),
         (0, 128), (85, 170), (3, 200), (64, 2)]
A = np.array([a for a, _ in _EDGE] + list(_rng.integers(0, 256, 2)))
B = np.array([b for _, b in _EDGE] + list(_rng.integers(0, 256, 2)))
MASK = 255


def _s(v):
    """Two's complement view of 8-bit values."""
    v = np.asarray(v, dtype=np.int64)
    return np.where(v >= 128, v - 256, v)


def _seed(tag: str) -> bytes:
    return tag.encode().ljust(32, b"\0")


@pytest.fixture(scope="module")
def ints(keys_p4):
    ck, sk = keys_p4
    x = integer.encrypt(ck, A, bits=8, seed=_seed("ops-x8"))
    y = integer.encrypt(ck, B, bits=8, seed=_seed("ops-y8"))
    return ck, sk, x, y


def _dec(ck, v):
    return integer.decrypt(ck, v).astype(np.int64)


def _bit(ck, c):
    return np.asarray(ops.decrypt(ck, c)).astype(np.int64)


def test_bitwise_against_python(ints):
    ck, sk, x, y = ints
    assert np.array_equal(_dec(ck, integer_ops.bitand(sk, x, y)), A & B)
    assert np.array_equal(_dec(ck, integer_ops.bitor(sk, x, y)), A | B)
    assert np.array_equal(_dec(ck, integer_ops.bitxor(sk, x, y)), A ^ B)
    assert np.array_equal(_dec(ck, integer_ops.bitxor(sk, x, 0x5A)), A ^ 0x5A)  # a public operand
    assert np.array_equal(_dec(ck, integer_ops.bitnot(sk, x)), MASK - A)
    # one bootstrap per block, one call; ~ costs none
    assert integer.cost(integer_ops.bitand, sk, x, y) == integer.Cost(pbs=4, keyswitches=4, calls=1)
    assert integer.cost(integer_ops.bitnot, sk, x).pbs == 0
    # on unclean operands (a sum): propagated first, still exact
    s = integer.add(sk, x, y)
    assert np.array_equal(_dec(ck, integer_ops.bitand(sk, s, y)), ((A + B) & MASK) & B)


# three amounts in the default run (within a block, whole blocks, past the width); every other in the slow run
@pytest.mark.parametrize("k", [3, 8, 11] + [pytest.param(k, marks=pytest.mark.slow) for k in (0, 1, 2, 7)])
def test_shifts_and_rotations_by_constants(ints, k):
    ck, sk, x, _ = ints
    assert np.array_equal(_dec(ck, integer_ops.shl(sk, x, k)), (A << k) & MASK if k < 8 else 0 * A)
    assert np.array_equal(_dec(ck, integer_ops.shr(sk, x, k)), A >> k if k < 8 else 0 * A)
    assert np.array_equal(_dec(ck, integer_ops.shr(sk, x, k, signed=True)), (_s(A) >> min(k, 7)) & MASK)
    r = k % 8
    assert np.array_equal(_dec(ck, integer_ops.rotl(sk, x, k)), ((A << r) | (A >> (8 - r))) & MASK)
    assert np.array_equal(_dec(ck, integer_ops.rotr(sk, x, k)), ((A >> r) | (A << (8 - r))) & MASK)
    if k % 2 == 0:  # whole blocks move: no bootstrap
        assert integer.cost(integer_ops.shl, sk, x, k).pbs == 0


@pytest.mark.slow
def test_shifts_by_an_encrypted_amount(ints):
    ck, sk, x, _ = ints
    k = np.arange(len(A)) % 11  # 8, 9, 10 taken mod 8
    amount = integer.encrypt(ck, k, bits=8, seed=_seed("ops-k"))
    assert np.array_equal(_dec(ck, integer_ops.shl_by(sk, x, amount)), (A << (k % 8)) & MASK)
    assert np.array_equal(_dec(ck, integer_ops.rotr_by(sk, x, amount)),
                          ((A >> (k % 8)) | (A << (8 - k % 8))) & MASK)


def test_products(ints):
    ck, sk, x, y = ints
    assert np.array_equal(_dec(ck, integer_ops.mul(sk, x, y)), (A * B) & MASK)
    assert np.array_equal(_dec(ck, integer_ops.mul(sk, x, 7)), (A * 7) & MASK)
    # the square of a sum (unclean operand, a product of products: the carry-save sum's columns fill up)
    s = integer.add(sk, x, y)
    prod = integer_ops.mul(sk, s, s)
    assert np.array_equal(_dec(ck, prod), ((A + B) ** 2) & MASK)
    assert np.array_equal(_dec(ck, integer_ops.mul(sk, prod, y)), ((A + B) ** 2 * B) & MASK)
    # every pair of blocks with i + j < 4 in one call, two tables each
    c = integer.cost(integer_ops.mul, sk, x, y)
    assert c.keyswitches >= 10 and c.pbs >= 20


# slow: 38 s cold in a 2-core run; the default run compares, selects and takes minima and maxima, signed and
# unsigned, on the same 8-bit edge pairs of INSECURE_TFHE_P4 through the front end (tests/test_api_integer.py),
# which calls these functions
@pytest.mark.slow
def test_comparisons_selects_minimum_maximum_signed_and_unsigned(ints):
    ck, sk, x, y = ints
    assert np.array_equal(_bit(ck, integer_ops.lt(sk, x, y)), A < B)
    assert np.array_equal(_bit(ck, integer_ops.ge(sk, x, y, signed=True)), _s(A) >= _s(B))
    assert np.array_equal(_bit(ck, integer_ops.ge(sk, x, 100)), A >= 100)
    assert np.array_equal(_dec(ck, integer_ops.minimum(sk, x, y)), np.minimum(A, B))
    assert np.array_equal(_dec(ck, integer_ops.maximum(sk, x, y, signed=True)), np.maximum(_s(A), _s(B)) & MASK)
    c = integer_ops.lt(sk, x, y)
    picked = integer_ops.select(sk, c, x, 9)
    assert np.array_equal(_dec(ck, picked), np.where(A < B, A, 9))
    # a select's blocks need no carry, only a refresh: one call for all of them
    assert integer.cost(integer.propagate_carries, sk, picked) == integer.Cost(pbs=4, keyswitches=4, calls=1)
    assert np.array_equal(_dec(ck, integer_ops.select(sk, c, y, x)), np.where(A < B, B, A))


@pytest.mark.slow
def test_every_comparison_signed_and_unsigned(ints):
    ck, sk, x, y = ints
    for op, ref in (("lt", np.less), ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal)):
        fun = getattr(integer_ops, op)
        assert np.array_equal(_bit(ck, fun(sk, x, y)), ref(A, B)), op
        assert np.array_equal(_bit(ck, fun(sk, x, y, signed=True)), ref(_s(A), _s(B))), op


# slow: 21 s cold in a 2-core run; the front end's test of the same name runs these views and casts by default
@pytest.mark.slow
def test_signed_views_and_casts(ints):
    ck, sk, x, _ = ints
    assert np.array_equal(_bit(ck, integer_ops.is_negative(sk, x)), _s(A) < 0)
    assert np.array_equal(_dec(ck, integer_ops.absolute(sk, x)), np.abs(_s(A)) & MASK)  # |-128| wraps to 128
    assert np.array_equal(_dec(ck, integer_ops.cast(sk, x, 16, signed=True)), _s(A) & 0xFFFF)
    assert np.array_equal(_dec(ck, integer_ops.cast(sk, x, 16)), A)
    assert np.array_equal(_dec(ck, integer_ops.cast(sk, integer.add(sk, x, x), 4)), (2 * A) & 15)


def test_unsigned_sum_with_its_overflow_flag(ints):
    ck, sk, x, y = ints
    value, flag = integer_ops.overflowing_add(sk, x, y)
    assert np.array_equal(_dec(ck, value), (A + B) & MASK) and np.array_equal(_bit(ck, flag), A + B > MASK)


@pytest.mark.slow
def test_overflow_flags(ints):
    ck, sk, x, y = ints
    for signed in (False, True):
        a, b = (_s(A), _s(B)) if signed else (A, B)
        lo, hi = (-128, 127) if signed else (0, 255)
        for name, exact in (("overflowing_add", a + b), ("overflowing_sub", a - b), ("overflowing_mul", a * b)):
            value, flag = getattr(integer_ops, name)(sk, x, y, signed=signed)
            assert np.array_equal(_dec(ck, value), exact & MASK), (name, signed)
            assert np.array_equal(_bit(ck, flag), (exact < lo) | (exact > hi)), (name, signed)


@pytest.mark.slow
def test_division_and_remainder(ints):
    ck, sk, x, y = ints
    q, r = integer_ops.divmod_(sk, x, y)
    safe = np.maximum(B, 1)
    assert np.array_equal(_dec(ck, q), np.where(B == 0, MASK, A // safe))  # by zero: all ones, as TFHE-rs
    assert np.array_equal(_dec(ck, r), np.where(B == 0, A, A % safe))
    q, r = integer_ops.divmod_(sk, x, 10)
    assert np.array_equal(_dec(ck, q), A // 10) and np.array_equal(_dec(ck, r), A % 10)


@pytest.mark.slow  # 8-bit signed division: about 3 restoring divisions' worth of bootstraps on the CPU
def test_signed_division_floors_as_python(ints):
    ck, sk, x, y = ints
    q, r = integer_ops.divmod_signed(sk, x, y)
    a, b = _s(A), _s(B)
    safe = np.where(b == 0, 1, b)
    want_q = np.where(b == 0, np.where(a >= 0, -1, 1), a // safe)  # by zero: as TFHE-rs's signed division
    want_r = np.where(b == 0, a, a % safe)
    assert np.array_equal(_s(_dec(ck, q)), _s(want_q & MASK))  # -128 // -1 wraps to -128, as NumPy's int8
    assert np.array_equal(_s(_dec(ck, r)), want_r)


def test_errors_name_the_problem(ints, keys_p6):
    ck, sk, x, y = ints
    ck6, sk6 = keys_p6
    wide = integer.encrypt(ck6, np.arange(4), bits=4, msg_bits=4, seed=_seed("ops-w"))
    with pytest.raises(ParameterError, match="at most p / 2 = 3 message bits; these have 4"):
        integer_ops.bitand(sk6, wide, wide)
    with pytest.raises(ParameterError, match="non-negative int"):
        integer_ops.shl(sk, x, -1)
    with pytest.raises(ParameterError, match="multiple of the 2-bit blocks"):
        integer_ops.cast(sk, x, 9)
    with pytest.raises(ParameterError, match="encrypted bit"):
        integer_ops.select(sk, x, x, y)
    with pytest.raises(ParameterError, match="int or an int array"):
        integer_ops.bitand(sk, x, 1.5)
    odd = integer.encrypt(ck, np.arange(4), bits=6, seed=_seed("ops-6"))
    with pytest.raises(ParameterError, match="power-of-two width"):
        integer_ops.shl_by(sk, odd, odd)


@pytest.mark.slow
@pytest.mark.parametrize("bits", [16, 32, 64])
def test_wider_integers_against_python(keys_p4, bits):
    """Random operands at 16, 32 and 64 bits (2-bit blocks): products, bitwise, comparisons, shifts, selects."""
    ck, sk = keys_p4
    rng = np.random.default_rng(bits)
    top = (1 << bits) - 1
    a = [int(v) for v in rng.integers(0, 2**32, 4, dtype=np.uint64)]
    a = [(v << (bits - 32)) | (v & 0xFFFF) if bits > 32 else v & top for v in a] + [top, 1 << (bits - 1)]
    b = [int(v) & top for v in rng.integers(0, 2**63, 5, dtype=np.uint64)] + [1]
    x = integer.encrypt(ck, np.array(a, dtype=object), bits=bits, seed=_seed(f"w{bits}x"))
    y = integer.encrypt(ck, np.array(b, dtype=object), bits=bits, seed=_seed(f"w{bits}y"))

    def dec(v):
        return [int(t) for t in integer.decrypt(ck, v)]

    assert dec(integer_ops.mul(sk, x, y)) == [(u * v) & top for u, v in zip(a, b)]
    assert dec(integer_ops.bitxor(sk, x, y)) == [u ^ v for u, v in zip(a, b)]
    assert dec(integer_ops.shr(sk, x, 5)) == [u >> 5 for u in a]
    assert dec(integer_ops.rotl(sk, x, bits // 2 + 1)) == [((u << (bits // 2 + 1)) | (u >> (bits // 2 - 1))) & top
                                                             for u in a]
    assert [int(t) for t in _bit(ck, integer_ops.lt(sk, x, y))] == [int(u < v) for u, v in zip(a, b)]
    assert dec(integer_ops.maximum(sk, x, y)) == [max(u, v) for u, v in zip(a, b)]
