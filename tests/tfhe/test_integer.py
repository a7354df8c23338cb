"""Radix integers (crossfhe.tfhe.integer): exact against Python integer arithmetic on random and edge inputs,
narrow blocks (p = 4, 2 message bits: 8- and 16-bit integers) and one wide block (p = 6, 4 or 5 bits).

Operands are batches of 8 integers (16-bit ones: 4, so 32 blocks as for 8 bits), so the compiled shapes of
the bootstraps are shared between tests (the first call at each shape compiles).
"""

import dataclasses
import functools

import jax
import numpy as np
import pytest

from crossfhe import testing
from crossfhe.errors import ParameterError
from crossfhe.tfhe import integer, ops

_rng = np.random.default_rng(20261)
A8 = np.concatenate([[0, 255, 17, 200, 128, 3], _rng.integers(0, 256, 2)])
B8 = np.concatenate([[0, 1, 17, 255, 127, 200], _rng.integers(0, 256, 2)])
A16 = np.concatenate([[65535, 4660, 40000], _rng.integers(0, 2**16, 1)])  # 4 x 8 blocks: x8's 32 block shape
B16 = np.concatenate([[1, 4660, 40001], _rng.integers(0, 2**16, 1)])
A4 = np.concatenate([[0, 15, 7, 8, 3], _rng.integers(0, 16, 3)])
B4 = np.concatenate([[0, 1, 7, 15, 12], _rng.integers(0, 16, 3)])

COMPARISONS = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}


def _seed(tag: str) -> bytes:
    return tag.encode().ljust(32, b"\0")


@pytest.fixture(scope="module")
def narrow(keys_p4):
    """8-bit integers as 4 blocks of 2 message + 2 carry bits."""
    ck, sk = keys_p4
    x = integer.encrypt(ck, A8, bits=8, seed=_seed("int-x8"))
    y = integer.encrypt(ck, B8, bits=8, seed=_seed("int-y8"))
    return ck, sk, x, y


@pytest.fixture(scope="module")
def wide(keys_p6):
    """4-bit integers in one 6-bit block (2 carry bits)."""
    ck, sk = keys_p6
    x = integer.encrypt(ck, A4, bits=4, msg_bits=4, seed=_seed("int-x4"))
    y = integer.encrypt(ck, B4, bits=4, msg_bits=4, seed=_seed("int-y4"))
    return ck, sk, x, y


# --------------------------------------------------------------------------------------------------
# Narrow blocks: 8 bits = 4 x (2 + 2)
# --------------------------------------------------------------------------------------------------


def test_encrypt_layout_and_round_trip(narrow):
    ck, _, x, _ = narrow
    assert (x.num_blocks, x.msg_bits, x.carry_bits, x.bits, x.batch_shape) == (4, 2, 2, 8, (8,))
    assert x.degrees == (3, 3, 3, 3) and x.norms == (1, 1, 1, 1) and x.is_clean
    np.testing.assert_array_equal(integer.decrypt(ck, x), A8)
    blocks = ops.decrypt(ck, x.blocks)  # little-endian base-4 digits
    np.testing.assert_array_equal(blocks, [(A8 >> (2 * i)) & 3 for i in range(4)])
    one = integer.encrypt(ck, 201, bits=8)
    assert one.batch_shape == () and int(integer.decrypt(ck, one)) == 201


def test_add_sub_neg_are_linear(narrow):
    ck, sk, x, y = narrow
    s = integer.add(sk, x, y)
    assert s.degrees == (6, 6, 6, 6) and s.norms == (2, 2, 2, 2) and not s.is_clean
    np.testing.assert_array_equal(integer.decrypt(ck, s), (A8 + B8) % 256)
    for a, b, xa, xb in ((A8, B8, x, y), (B8, A8, y, x)):  # both orders: wrap-around below 0
        d = integer.sub(sk, xa, xb)
        np.testing.assert_array_equal(integer.decrypt(ck, d), (a - b) % 256)
    assert integer.sub(sk, x, y).degrees == (7, 6, 6, 6)  # x + (-y): -y has degrees (4, 3, 3, 3)
    n = integer.neg(sk, x)
    assert n.degrees == (4, 3, 3, 3)
    np.testing.assert_array_equal(integer.decrypt(ck, n), (-A8) % 256)
    for op in (integer.add, integer.sub):
        assert integer.cost(op, sk, x, y) == integer.Cost(pbs=0, keyswitches=0, calls=0)


def test_propagate_carries(narrow):
    ck, sk, x, y = narrow
    s = integer.add(sk, x, y)
    assert integer.cost(integer.propagate_carries, sk, s) == integer.Cost(pbs=7, keyswitches=4, calls=4)
    p = integer.propagate_carries(sk, s)
    assert p.is_clean and p.degrees == (3, 3, 3, 3)
    np.testing.assert_array_equal(integer.decrypt(ck, p), (A8 + B8) % 256)
    np.testing.assert_array_equal(ops.decrypt(ck, p.blocks), [(((A8 + B8) % 256) >> (2 * i)) & 3 for i in range(4)])
    assert integer.propagate_carries(sk, x) is x  # clean: nothing to do


def test_blocks_filled_to_the_top(narrow):
    """5 x: every block of degree 15 = 2^p - 1; the ripple would overflow, so a batched split comes first;
    one more addition must propagate its operand first."""
    ck, sk, x, _ = narrow
    acc = x
    for _ in range(4):
        acc = integer.add(sk, acc, x)
    assert acc.degrees == (15, 15, 15, 15) and acc.norms == (5, 5, 5, 5)
    np.testing.assert_array_equal(integer.decrypt(ck, acc), 5 * A8 % 256)
    # split of the 4 blocks (8 PBS), then the ripple: block 0 is clean (kept), 2 + 2 + 1 PBS
    assert integer.cost(integer.propagate_carries, sk, acc) == integer.Cost(pbs=13, keyswitches=7, calls=4)
    p = integer.propagate_carries(sk, acc)
    assert p.is_clean
    np.testing.assert_array_equal(integer.decrypt(ck, p), 5 * A8 % 256)
    assert integer.cost(integer.add, sk, acc, x).pbs > 0
    more = integer.add(sk, acc, x)
    assert max(more.degrees) <= 15
    np.testing.assert_array_equal(integer.decrypt(ck, more), 6 * A8 % 256)


def test_norm_budget_forces_a_bootstrap(narrow):
    """Blocks whose noise already spent the budget (norm 17 = params.norm2, 2^p + 1 as the presets') are refreshed
    before an addition."""
    ck, sk, x, y = narrow
    budget = x.params.norm2
    assert budget == 17
    spent = dataclasses.replace(x, norms=(budget,) * 4)
    assert integer.cost(integer.add, sk, spent, y).pbs > 0
    s = integer.add(sk, spent, y)
    assert max(s.norms) <= budget
    np.testing.assert_array_equal(integer.decrypt(ck, s), (A8 + B8) % 256)


MUL_CONSTANTS = {
    0: 0,  # zero: no bootstrap
    1: 0,
    2: 0,  # one small digit: linear
    3: 0,
    5: 0,  # digits 1, 1: x + (x << 1 block)
    16: 0,  # a shift by two blocks
    255: 0,  # -x
    7: 8,  # digits 3, 1: lo/hi of 3 on 4 blocks
    200: None,  # digits 0, 2, 0, 3
    -3: None,  # 253 = digits 1, 3, 3, 3: as -(3 x)
    256 + 7: 8,  # taken mod 2^8
}


@pytest.mark.parametrize("c", list(MUL_CONSTANTS))
def test_mul_const(narrow, c):
    ck, sk, x, _ = narrow
    want = MUL_CONSTANTS[c]
    cost = integer.cost(integer.mul_const, sk, x, c)
    if want is not None:
        assert cost.pbs == want
    r = integer.mul_const(sk, x, c)
    assert max(r.degrees) <= 15 and max(r.norms) <= 16
    np.testing.assert_array_equal(integer.decrypt(ck, r), A8 * c % 256)


def test_mul_const_of_an_unclean_operand(narrow):
    ck, sk, x, y = narrow
    s = integer.add(sk, x, y)
    r = integer.mul_const(sk, s, 7)
    np.testing.assert_array_equal(integer.decrypt(ck, r), (A8 + B8) * 7 % 256)


# slow: 26 s cold in a 2-core run; the default run keeps every comparison on 4-bit integers of 1-bit blocks
# (test_comparisons_on_two_bit_messages) and on 8-bit ones through the front end (tests/test_api_integer.py)
@pytest.mark.slow
def test_comparisons(narrow):
    ck, sk, x, y = narrow
    for name, ref in COMPARISONS.items():
        bit = getattr(integer, name)(sk, x, y)
        assert bit.batch_shape == (8,)
        np.testing.assert_array_equal(ops.decrypt(ck, bit), ref(A8, B8).astype(np.int64), err_msg=name)


def test_comparison_costs(narrow):
    """8-bit comparisons of 2-bit blocks: 4 signs, then 1 merge (counted without running)."""
    _, sk, x, y = narrow
    assert integer.cost(integer.lt, sk, x, y) == integer.Cost(pbs=5, keyswitches=5, calls=2)
    assert integer.cost(integer.eq, sk, x, y) == integer.Cost(pbs=5, keyswitches=5, calls=2)


# slow: 32 s cold in CI; comparisons run by default (test_comparisons_on_two_bit_messages, tests/test_api_integer.py)
@pytest.mark.slow
def test_comparison_of_unclean_operands(narrow):
    """Both operands unclean: propagated together in one stacked pass, then compared."""
    ck, sk, x, y = narrow
    s, t = integer.add(sk, x, y), integer.sub(sk, x, y)
    c = integer.cost(integer.ge, sk, s, t)
    assert c.calls == 4 + 2 and c.pbs == 2 * 7 + 5
    np.testing.assert_array_equal(ops.decrypt(ck, integer.ge(sk, s, t)), ((A8 + B8) % 256 >= (A8 - B8) % 256))


def test_add_under_jit(narrow):
    ck, sk, x, y = narrow
    s = jax.jit(functools.partial(integer.add, sk))(x, y)
    assert s.degrees == (6, 6, 6, 6)
    np.testing.assert_array_equal(integer.decrypt(ck, s), (A8 + B8) % 256)


# slow: 71 s cold in CI; 8-bit radix arithmetic and comparisons run by default
@pytest.mark.slow
def test_sixteen_bits(keys_p4):
    ck, sk = keys_p4
    x = integer.encrypt(ck, A16, bits=16, seed=_seed("int-x16"))
    y = integer.encrypt(ck, B16, bits=16, seed=_seed("int-y16"))
    assert x.num_blocks == 8
    s = integer.propagate_carries(sk, integer.add(sk, x, y))
    np.testing.assert_array_equal(integer.decrypt(ck, s), (A16 + B16) % 2**16)
    np.testing.assert_array_equal(integer.decrypt(ck, integer.sub(sk, x, y)), (A16 - B16) % 2**16)
    np.testing.assert_array_equal(ops.decrypt(ck, integer.lt(sk, x, y)), A16 < B16)
    np.testing.assert_array_equal(ops.decrypt(ck, integer.eq(sk, x, y)), A16 == B16)
    assert integer.cost(integer.lt, sk, x, y) == integer.Cost(pbs=11, keyswitches=11, calls=3)  # 8 + 2 + 1


# --------------------------------------------------------------------------------------------------
# One wide block: 4 bits in p = 6 (2 carry bits), 5 bits (1 carry bit)
# --------------------------------------------------------------------------------------------------


# slow: 43 s cold in CI; 2-bit-block arithmetic runs by default
@pytest.mark.slow
def test_wide_block_arithmetic(wide):
    ck, sk, x, y = wide
    assert (x.num_blocks, x.msg_bits, x.carry_bits, x.degrees) == (1, 4, 2, (15,))
    s = integer.add(sk, x, y)
    assert s.degrees == (30,)
    np.testing.assert_array_equal(integer.decrypt(ck, s), (A4 + B4) % 16)
    p = integer.propagate_carries(sk, s)
    assert p.is_clean and integer.cost(integer.propagate_carries, sk, s) == integer.Cost(1, 1, 1)
    np.testing.assert_array_equal(ops.decrypt(ck, p.blocks)[0], (A4 + B4) % 16)
    np.testing.assert_array_equal(integer.decrypt(ck, integer.sub(sk, x, y)), (A4 - B4) % 16)
    np.testing.assert_array_equal(integer.decrypt(ck, integer.sub(sk, y, x)), (B4 - A4) % 16)
    np.testing.assert_array_equal(integer.decrypt(ck, integer.neg(sk, x)), (-A4) % 16)
    for c in (0, 1, 2, 3, 5, 11, 15, -2):
        r = integer.mul_const(sk, x, c)
        assert integer.cost(integer.mul_const, sk, x, c).pbs <= 1
        np.testing.assert_array_equal(integer.decrypt(ck, r), A4 * c % 16, err_msg=f"c = {c}")


# slow: 38 s cold in CI; comparisons run by default (test_comparisons), wide blocks' arithmetic too
@pytest.mark.slow
def test_wide_block_comparisons(wide):
    ck, sk, x, y = wide
    for name, ref in COMPARISONS.items():
        op = getattr(integer, name)
        assert integer.cost(op, sk, x, y) == integer.Cost(pbs=1, keyswitches=1, calls=1)
        np.testing.assert_array_equal(ops.decrypt(ck, op(sk, x, y)), ref(A4, B4).astype(np.int64), err_msg=name)


def test_wide_block_one_carry_bit(keys_p6):
    ck, sk = keys_p6
    a, b = A4 * 2 + 1, B4 * 2
    x = integer.encrypt(ck, a, bits=5, msg_bits=5)
    y = integer.encrypt(ck, b, bits=5, msg_bits=5)
    s = integer.add(sk, x, y)
    assert s.degrees == (62,)
    np.testing.assert_array_equal(integer.decrypt(ck, s), (a + b) % 32)
    d = integer.sub(sk, x, y)
    assert d.degrees == (63,)
    np.testing.assert_array_equal(integer.decrypt(ck, d), (a - b) % 32)
    np.testing.assert_array_equal(ops.decrypt(ck, integer.gt(sk, x, y)), a > b)
    # s has no room for another addition: its block is bootstrapped (mod 32) first
    s2 = integer.add(sk, s, x)
    np.testing.assert_array_equal(integer.decrypt(ck, s2), (2 * a + b) % 32)


def test_cost_narrow_vs_wide(narrow, wide):
    """The Taurus comparison (§III-A2) as numbers: PBS per 8-bit operation on 4 narrow blocks vs one block."""
    _, sk4, x4, y4 = narrow
    _, sk6, x6, y6 = wide
    assert integer.cost(integer.lt, x4.params, x4, y4).pbs == 5
    assert integer.cost(integer.lt, x6.params, x6, y6).pbs == 1
    s4 = integer.add(sk4, x4, y4)
    s6 = integer.add(sk6, x6, y6)
    assert integer.cost(integer.propagate_carries, sk4, s4).pbs == 7
    assert integer.cost(integer.propagate_carries, sk6, s6).pbs == 1


# --------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------


def test_encrypt_rejects_bad_values_and_layouts(keys_p4):
    ck, sk = keys_p4
    for bad in (-1, 256, [3, 300]):
        with pytest.raises(ParameterError, match="out of range"):
            integer.encrypt(ck, bad, bits=8)
    with pytest.raises(ParameterError, match="integers"):
        integer.encrypt(ck, 1.5, bits=8)
    with pytest.raises(ParameterError, match="multiple"):
        integer.encrypt(ck, 1, bits=7)
    with pytest.raises(ParameterError, match="carry bit"):
        integer.encrypt(ck, 1, bits=8, msg_bits=4)
    with pytest.raises(ParameterError, match="bits must be"):
        integer.encrypt(ck, 1, bits=66)  # 64 bits is the widest (decrypt gives uint64 there)
    top = integer.encrypt(ck, np.array([2**64 - 1, 2**63], dtype=object), bits=64)
    assert integer.decrypt(ck, top).dtype == np.uint64 and list(integer.decrypt(ck, top)) == [2**64 - 1, 2**63]
    with pytest.raises(ParameterError, match="ClientKey"):
        integer.encrypt(sk, 1, bits=8)


def test_trivial_constants(narrow):
    """Public constants: no key, norm 0, degrees the digits they hold."""
    ck, sk, x, _ = narrow
    k = integer.trivial(x.params, 100, bits=8)  # digits 0, 1, 2, 1
    assert k.degrees == (0, 1, 2, 1) and k.norms == (0, 0, 0, 0)
    np.testing.assert_array_equal(integer.decrypt(ck, integer.add(sk, x, k)), (A8 + 100) % 256)
    np.testing.assert_array_equal(ops.decrypt(ck, integer.lt(sk, x, k)), A8 < 100)


def test_mismatches_are_refused(narrow, wide):
    ck, sk, x, y = narrow
    ck6, sk6, w, _ = wide
    # the encryptions below reuse compiled shapes: 32 blocks in all, as x's
    with pytest.raises(ParameterError, match="widths"):
        integer.add(sk, x, integer.encrypt(ck, A16, bits=16))
    with pytest.raises(ParameterError, match="widths"):
        integer.lt(sk, x, integer.encrypt(ck, A8[:4], bits=8, msg_bits=1))
    with pytest.raises(ParameterError, match="INSECURE_TFHE_P4"):
        integer.add(sk6, x, y)  # integers of P4 with the key of P6
    with pytest.raises(ParameterError, match="INSECURE_TFHE_P6"):
        integer.sub(sk, x, w)
    with pytest.raises(ParameterError):
        integer.decrypt(ck6, x)
    with pytest.raises(ParameterError, match="ServerKey"):
        integer.add(ck, x, y)
    with pytest.raises(ParameterError, match="broadcast"):
        integer.add(sk, x, integer.encrypt(ck, A8.reshape(2, 4), bits=8))
    with pytest.raises(ParameterError, match="int"):
        integer.mul_const(sk, x, 2.0)


def test_comparisons_on_two_bit_messages():
    """p = 2 (blocks of 1 message bit): the signed digits merge K = 2 at a time, the sum 2 s_hi + s_lo in [-3, 3]
    inside the padding bit's (-4, 4); every pair of 4-bit integers, against Python."""
    ck, sk = ops.keygen(testing.INSECURE_TFHE_P2, b"tfhe-test-p2".ljust(32, b"\0"))
    a, b = (v.reshape(-1) for v in np.meshgrid(np.arange(16), np.arange(16)))
    x = integer.encrypt(ck, a, bits=4, msg_bits=1)
    y = integer.encrypt(ck, b, bits=4, msg_bits=1)
    for name, ref in COMPARISONS.items():
        np.testing.assert_array_equal(ops.decrypt(ck, getattr(integer, name)(sk, x, y)), ref(a, b).astype(np.int64),
                                      err_msg=name)
    assert integer.cost(integer.lt, sk, x, y) == integer.Cost(pbs=4 + 2 + 1, keyswitches=7, calls=3)
