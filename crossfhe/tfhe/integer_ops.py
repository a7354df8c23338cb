"""Radix-integer operators beyond sums and comparisons (:mod:`crossfhe.tfhe.integer`): bitwise operations, shifts
and rotations, the product of two ciphertexts, selects, minimum and maximum, signed views, casts, division and
overflow flags.

Signedness is a view: a :class:`~crossfhe.tfhe.integer.RadixInteger` of ``bits`` bits holds x mod 2^bits, and the
signed operations read it in two's complement (x - 2^bits when x >= 2^(bits - 1)), as NumPy's int types and
TFHE-rs's ``FheInt`` do; ``add``, ``sub``, ``neg`` and ``mul`` are the same for both.

**Two blocks in one bootstrap.** Most operators here look at two clean blocks a, b < M = 2^m at once: the LWE
combination a M + b (degree M^2 - 1 <= 2^p - 1 and norm M^2 + 1 <= ``norm2`` when 2m <= p, as the presets' default
m = p // 2 gives: P4's norm2 is 17 = 4^2 + 1) bootstrapped through the table t -> f(t // M, t mod M). They need
blocks of at most p / 2 message bits (ParameterError otherwise). One such bootstrap per output block, all blocks in
one ``pbs_many`` call (one pass over the bootstrapping key for the whole batch):

* ``bitand``, ``bitor``, ``bitxor``: f = &, |, ^ per block: B PBS in one call. ``bitnot``: M - 1 - x_i, 0 PBS.
* ``shl``, ``shr``, ``rotl``, ``rotr`` by a constant k = q m + r: block i of the result is the funnel
  ((a M + b) >> s) mod M of the two source blocks its bits come from (for a left shift a = x_{i-q},
  b = x_{i-q-1}, s = m - r): B - q PBS in one call, none when r = 0 (the blocks move). An arithmetic right shift
  (``signed``) fills with the sign block (one more call, 1 PBS). By a ciphertext (``*_by``): a barrel shifter over
  the amount's log2(bits) bits, each a shift by 2^j and a select.
* ``mul``: every pair of blocks with i + j < B, (x_i, y_j) through lo = x_i y_j mod M and hi = floor(x_i y_j / M)
  (one call, B (B + 1) PBS), then the columns summed carry-save: each column's terms added while they fit the
  block's 2^p - 1 and norm2, every full group split into (v mod M, floor(v / M)) in one call per round, until each
  column holds one block (not propagated: lazy, as ``add``'s result).
* ``select(c, a, b)`` (``where``): (c, a_i) and (1 - c, b_i) through t -> v if s else 0, the two halves added
  (the degree is the larger of the two, since one is zero): 2B PBS in one call. ``minimum``/``maximum``: a
  comparison, then a select.

**Signed views.** ``lt``/``le``/``gt``/``ge`` with ``signed=True`` flip the top bit of both operands (the top
block v -> (v + M / 2) mod M, 2 PBS in one call) and compare unsigned. ``is_negative``: the top block through
v >= M / 2 (1 PBS). ``abs``: a select of x and -x on it.

**Casts** (``cast``): to more bits, zero blocks appended (unsigned source) or copies of the sign block (signed: 1
PBS); to fewer, the top blocks dropped (mod 2^bits) after the carries are propagated.

**Division** (``divmod``, unsigned): restoring division over the dividend's bits from the top, with the remainder
two blocks wider than the divisor so that 2 r + 1 and r - d never wrap: per bit a shift, a subtraction with
propagation, the sign of the difference (1 PBS) and a select; the quotient's bits added into its blocks. Division by
zero gives the quotient 2^bits - 1 and the remainder x, as TFHE-rs does. About bits (B + 6) sequential calls.

**Overflow flags** (``overflowing_add``, ``overflowing_sub``, ``overflowing_mul``): the result and an encrypted bit
saying whether the exact result left the type's range (unsigned: [0, 2^bits); signed: [-2^(bits-1), 2^(bits-1))).
Unsigned sums and differences by a comparison; signed ones from the operands' and the result's sign bits; products
from the double-width product.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import jax.numpy as jnp
import numpy as np

from crossfhe.core.lwe import LWECiphertext
from crossfhe.errors import ParameterError
from crossfhe.tfhe import integer as ri
from crossfhe.tfhe import ops
from crossfhe.tfhe.integer import (
    RadixInteger,
    _add_block_consts,
    _bootstrap,
    _broadcast,
    _check,
    _concat,
    _program,
    _propagate_pair,
    _replace,
    _stack,
    _table,
    _take,
    _zero_like,
    propagate_carries,
)

# --------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------


def _pairs_fit(x: RadixInteger, what: str) -> None:
    """ParameterError unless two clean blocks fit one bootstrap (2m <= p, M^2 + 1 <= norm2)."""
    p, m = x.params.message_bits, x.msg_bits
    if 2 * m > p or 4**m + 1 > x.params.norm2:
        raise ParameterError(f"{what} reads two blocks in one bootstrap, which needs blocks of at most p / 2 = "
                             f"{p // 2} message bits; these have {m} (encrypt with msg_bits={p // 2})")


def _clean_pair(sk, x: RadixInteger, y: RadixInteger) -> tuple[RadixInteger, RadixInteger]:
    """x and y (same batch shape) with their carries propagated, in one stacked pass when both need it."""
    if not x.is_clean and not y.is_clean:
        return _propagate_pair(sk, x, y)
    return propagate_carries(sk, x), propagate_carries(sk, y)


def _bivariate(sk, params, m: int, a: LWECiphertext, b: LWECiphertext, fs: list[Callable[[int, int], int]]):
    """One call: a M + b (a, b < M, norms <= 1) through t -> f(t // M, t mod M) for each f in ``fs``."""
    big_m = 2**m
    packed = ops.add(ops.mul_scalar(params, a, big_m), b)
    tables = [_table(params, lambda t, f=f: f(t // big_m, t % big_m) if t < big_m * big_m else 0) for f in fs]
    return _bootstrap(sk, packed, tables)


def _largest(f: Callable[[int, int], int], da: int, db: int) -> int:
    """max f(a, b) over a <= da, b <= db: the degree of a bivariate result."""
    return max(f(a, b) for a in range(da + 1) for b in range(db + 1))


def _bit_stack(c: LWECiphertext, nb: int, shape: tuple[int, ...]) -> LWECiphertext:
    """An encrypted bit of a batch shape broadcast to ``shape`` and repeated over ``nb`` blocks."""
    b = jnp.broadcast_to(c.b, (nb, *shape, c.b.shape[-1]))
    a = jnp.broadcast_to(c.a, (nb, *shape, *c.a.shape[-2:]))
    return LWECiphertext(b, a, c.moduli, c.key_id)


def _check_bit(c, x: RadixInteger, what: str) -> tuple[int, ...]:
    if not isinstance(c, LWECiphertext):
        raise ParameterError(f"{what}: the condition is an encrypted bit (the LWECiphertext a comparison returns), got "
                             f"{type(c).__name__}")
    try:
        return tuple(np.broadcast_shapes(c.batch_shape, x.batch_shape))
    except ValueError as e:
        raise ParameterError(f"{what}: the condition's batch shape {c.batch_shape} does not broadcast with the "
                             f"integers' {x.batch_shape}") from e


def _const(x: RadixInteger, c) -> RadixInteger:
    """A public int (or int array) as a trivial integer of x's layout, taken mod 2^bits."""
    if isinstance(c, (bool, np.bool_)) or not (isinstance(c, (int, np.integer)) or (
            isinstance(c, np.ndarray) and c.dtype.kind in "iuO")):
        raise ParameterError(f"an integer operand is a RadixInteger, an int or an int array, got {type(c).__name__}")
    v = np.vectorize(lambda t: int(t) % (1 << x.bits), otypes=[object])(c) if isinstance(c, np.ndarray) else \
        int(c) % (1 << x.bits)
    return ri.trivial(x.params, v, bits=x.bits, msg_bits=x.msg_bits)


def _operand(x: RadixInteger, y) -> RadixInteger:
    return y if isinstance(y, RadixInteger) else _const(x, y)


def _binary(*static: str):
    """:func:`crossfhe.tfhe.integer._program` for an operation ``op(sk, x, y, ...)`` whose y may be a public int (or
    int array): made a trivial integer of x's layout before the compiled program (a Python int would be traced)."""

    def wrap(fun):
        prog = _program(*static)(fun)

        @functools.wraps(fun)
        def run(sk, x, y, *args, **kwargs):
            if isinstance(x, RadixInteger) and not isinstance(y, RadixInteger):
                y = _const(x, y)
            return prog(sk, x, y, *args, **kwargs)

        return run

    return wrap


# --------------------------------------------------------------------------------------------------
# Bitwise
# --------------------------------------------------------------------------------------------------


def _bitwise(sk, x: RadixInteger, y, f: Callable[[int, int], int], what: str) -> RadixInteger:
    params = _check(sk, x, y)
    _pairs_fit(x, what)
    x, y = _clean_pair(sk, *_broadcast(x, y))
    (out,) = _bivariate(sk, params, x.msg_bits, x.blocks, y.blocks, [f])
    degs = [_largest(f, a, b) for a, b in zip(x.degrees, y.degrees, strict=True)]
    return _replace(x, out, degs, [1] * x.num_blocks)


@_binary()
def bitand(sk: ops.ServerKey, x: RadixInteger, y) -> RadixInteger:
    """x & y (y a RadixInteger or a public int): one bootstrap per block, one call."""
    return _bitwise(sk, x, y, lambda a, b: a & b, "&")


@_binary()
def bitor(sk: ops.ServerKey, x: RadixInteger, y) -> RadixInteger:
    """x | y, as :func:`bitand`."""
    return _bitwise(sk, x, y, lambda a, b: a | b, "|")


@_binary()
def bitxor(sk: ops.ServerKey, x: RadixInteger, y) -> RadixInteger:
    """x ^ y, as :func:`bitand`."""
    return _bitwise(sk, x, y, lambda a, b: a ^ b, "^")


@_program()
def bitnot(sk: ops.ServerKey, x: RadixInteger) -> RadixInteger:
    """~x = 2^bits - 1 - x: each block M - 1 - x_i (0 PBS on clean x)."""
    params = _check(sk, x)
    x = propagate_carries(sk, x)
    top = 2**x.msg_bits - 1
    return _replace(x, _add_block_consts(params, ops.negate(x.blocks), [top] * x.num_blocks),
                    [top] * x.num_blocks, x.norms)


# --------------------------------------------------------------------------------------------------
# Shifts and rotations
# --------------------------------------------------------------------------------------------------

_ZERO, _SIGN = "zero", "sign"


def _amount(k, what: str) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
        raise ParameterError(f"{what}: the amount is a non-negative int (or an encrypted integer: {what}_by), got "
                             f"{k!r}")
    return int(k)


def _sign_block(sk, x: RadixInteger) -> LWECiphertext:
    """M - 1 where x (clean) is negative in two's complement, else 0: one PBS on the top block."""
    big_m = 2**x.msg_bits
    (s,) = _bootstrap(sk, _take(x.blocks, x.num_blocks - 1), [_table(x.params, lambda v: big_m - 1 if v >= big_m // 2
                                                                       else 0)])
    return s


def _shifted(sk, x: RadixInteger, k: int, *, left: bool, rotate: bool, signed: bool) -> RadixInteger:
    """x (clean) shifted or rotated by k bits (module docstring): each result block from the two source blocks
    its bits come from, in one call."""
    params, nb, m = x.params, x.num_blocks, x.msg_bits
    big_m = 2**m
    k = k % x.bits if rotate else min(k, x.bits)
    if k == 0:
        return x
    if not left and rotate:
        left, k = True, x.bits - k
    q, r = divmod(k, m)
    fill = _SIGN if signed and not left else _ZERO

    def src(j: int):
        if rotate:
            return j % nb
        return j if 0 <= j < nb else fill

    if r:  # per result block: (hi source, lo source), their funnel ((hi M + lo) >> s) mod M
        plan = [(src(i - q), src(i - q - 1)) if left else (src(i + q + 1), src(i + q)) for i in range(nb)]
    else:  # whole blocks move
        plan = [(src(i - q if left else i + q),) * 2 for i in range(nb)]
    s = m - r if left else r
    sign = _sign_block(sk, x) if any(_SIGN in p for p in plan) else None
    zero = _zero_like(_take(x.blocks, 0))

    def block(source):
        """(ciphertext, degree, norm) of a source: a block index or a fill."""
        if source == _ZERO:
            return zero, 0, 0
        if source == _SIGN:
            return sign, big_m - 1, 1
        return _take(x.blocks, source), x.degrees[source], x.norms[source]

    if not r:
        parts = [block(hi) for hi, _ in plan]
        return _replace(x, _stack([p[0] for p in parts]), [p[1] for p in parts], [p[2] for p in parts])
    out: list = [None] * nb
    degs, norms = [0] * nb, [0] * nb
    todo = []
    for i, (hi, lo) in enumerate(plan):
        if hi == lo and hi in (_ZERO, _SIGN):  # all fill: the fill itself
            out[i], degs[i], norms[i] = block(hi)
        else:
            todo.append(i)
    if todo:

        def f(a, b):
            return ((a * big_m + b) >> s) % big_m

        a = _stack([block(plan[i][0])[0] for i in todo])
        b = _stack([block(plan[i][1])[0] for i in todo])
        (res,) = _bivariate(sk, params, m, a, b, [f])
        for n, i in enumerate(todo):
            out[i] = _take(res, n)
            degs[i] = _largest(f, block(plan[i][0])[1], block(plan[i][1])[1])
            norms[i] = 1
    return _replace(x, _stack(out), degs, norms)


def _shift_op(sk, x, k, *, left: bool, rotate: bool, signed: bool, what: str) -> RadixInteger:
    _check(sk, x)
    k = _amount(k, what)
    if (k % x.bits if rotate else min(k, x.bits)) % x.msg_bits:
        _pairs_fit(x, what)
    return _shifted(sk, propagate_carries(sk, x), k, left=left, rotate=rotate, signed=signed)


@_program("k")
def shl(sk: ops.ServerKey, x: RadixInteger, k: int) -> RadixInteger:
    """x << k mod 2^bits (k >= bits: 0). Free when k is a multiple of the block width, else one call."""
    return _shift_op(sk, x, k, left=True, rotate=False, signed=False, what="shl")


@_program("k", "signed")
def shr(sk: ops.ServerKey, x: RadixInteger, k: int, signed: bool = False) -> RadixInteger:
    """x >> k: logical (zeros shifted in), or arithmetic with ``signed`` (copies of the sign bit)."""
    return _shift_op(sk, x, k, left=False, rotate=False, signed=signed, what="shr")


@_program("k")
def rotl(sk: ops.ServerKey, x: RadixInteger, k: int) -> RadixInteger:
    """x rotated left by k mod bits bits."""
    return _shift_op(sk, x, k, left=True, rotate=True, signed=False, what="rotl")


@_program("k")
def rotr(sk: ops.ServerKey, x: RadixInteger, k: int) -> RadixInteger:
    """x rotated right by k mod bits bits."""
    return _shift_op(sk, x, k, left=False, rotate=True, signed=False, what="rotr")


def _amount_bits(sk, amount: RadixInteger, count: int) -> list[LWECiphertext]:
    """The low ``count`` bits of a clean integer as encrypted bits, one call (a table per bit position)."""
    m = amount.msg_bits
    blocks = sorted({j // m for j in range(count)})
    tables = [_table(amount.params, lambda v, t=t: (v >> t) & 1) for t in range(m)]
    outs = _bootstrap(sk, _take(amount.blocks, np.array(blocks)), tables)
    return [_take(outs[j % m], blocks.index(j // m)) for j in range(count)]


def _barrel(sk, x: RadixInteger, amount: RadixInteger, *, left: bool, rotate: bool, signed: bool, what: str):
    _check(sk, x)
    _check(sk, amount)
    if x.bits & (x.bits - 1):
        raise ParameterError(f"{what}: shifting by an encrypted amount takes it mod bits, which needs a power-of-two "
                             f"width; this integer has {x.bits} bits")
    _pairs_fit(x, what)
    steps = int(math.log2(x.bits))
    if amount.bits < steps:
        raise ParameterError(f"{what}: the amount has {amount.bits} bits, fewer than the {steps} that index {x.bits}")
    bits = _amount_bits(sk, propagate_carries(sk, amount), steps)
    x = propagate_carries(sk, x)
    for j, bit in enumerate(bits):
        moved = _shifted(sk, x, 1 << j, left=left, rotate=rotate, signed=signed)
        x = propagate_carries(sk, _select(sk, bit, moved, x))
    return x


@_program("signed")
def shl_by(sk: ops.ServerKey, x: RadixInteger, amount: RadixInteger, signed: bool = False) -> RadixInteger:
    """x << (amount mod bits), the amount encrypted (a power-of-two width): log2(bits) shifts and selects."""
    return _barrel(sk, x, amount, left=True, rotate=False, signed=False, what="shl_by")


@_program("signed")
def shr_by(sk: ops.ServerKey, x: RadixInteger, amount: RadixInteger, signed: bool = False) -> RadixInteger:
    """x >> (amount mod bits), logical or (``signed``) arithmetic, as :func:`shl_by`."""
    return _barrel(sk, x, amount, left=False, rotate=False, signed=signed, what="shr_by")


@_program()
def rotl_by(sk: ops.ServerKey, x: RadixInteger, amount: RadixInteger) -> RadixInteger:
    """x rotated left by (amount mod bits), as :func:`shl_by`."""
    return _barrel(sk, x, amount, left=True, rotate=True, signed=False, what="rotl_by")


@_program()
def rotr_by(sk: ops.ServerKey, x: RadixInteger, amount: RadixInteger) -> RadixInteger:
    """x rotated right by (amount mod bits), as :func:`shl_by`."""
    return _barrel(sk, x, amount, left=False, rotate=True, signed=False, what="rotr_by")


# --------------------------------------------------------------------------------------------------
# Products
# --------------------------------------------------------------------------------------------------


def _sum_columns(sk, like: RadixInteger, columns: list[list]) -> RadixInteger:
    """The integer whose block k is the sum of ``columns[k]`` (terms (ciphertext, degree, norm)) carried upwards,
    the top carry dropped: terms grouped while they fit 2^p - 1 and norm2, every group of a column with more than one
    split into (v mod M, floor(v / M)) in one call per round (carry-save), until one group per column remains."""
    params, m = like.params, like.msg_bits
    big_m, top, budget = 2**m, 2**params.message_bits - 1, params.norm2
    t_mod, t_div = _table(params, lambda v: v % big_m), _table(params, lambda v: v // big_m)
    zero = _zero_like(_take(like.blocks, 0))
    nb = len(columns)
    for _ in range(8 * params.message_bits * nb + 8):
        groups = []
        for col in columns:
            gs, cur = [], None
            for ct, d, n in col:
                if cur is not None and cur[1] + d <= top and cur[2] + n <= budget:
                    cur = (ops.add(cur[0], ct), cur[1] + d, cur[2] + n)
                else:
                    if cur is not None:
                        gs.append(cur)
                    cur = (ct, d, n)
            if cur is not None:
                gs.append(cur)
            groups.append(gs)
        if all(len(g) <= 1 for g in groups):
            return _replace(like, _stack([g[0][0] if g else zero for g in groups]),
                            [g[0][1] if g else 0 for g in groups], [g[0][2] if g else 0 for g in groups])
        split = [(k, t) for k, g in enumerate(groups) if len(g) > 1 for t in range(len(g))]
        lo, hi = _bootstrap(sk, _stack([groups[k][t][0] for k, t in split]), [t_mod, t_div])
        columns = [[g for t, g in enumerate(gs) if len(gs) == 1] for gs in groups]
        for n, (k, t) in enumerate(split):
            d = groups[k][t][1]
            columns[k].append((_take(lo, n), min(d, big_m - 1), 1))
            if k + 1 < nb and d >= big_m:
                columns[k + 1].append((_take(hi, n), d // big_m, 1))
    raise ParameterError("internal: the carry-save sum did not converge")


def mul(sk: ops.ServerKey, x: RadixInteger, y) -> RadixInteger:
    """x y mod 2^bits, y a RadixInteger or a public int (then :func:`crossfhe.tfhe.integer.mul_const`). Schoolbook
    on blocks (module docstring): one call of B (B + 1) bootstraps, then the carry-save sum; the result is not
    propagated."""
    if isinstance(y, (int, np.integer)) and not isinstance(y, (bool, np.bool_)):
        return ri.mul_const(sk, x, int(y))
    return _mul(sk, x, y)


@_program()
def _mul(sk, x: RadixInteger, y: RadixInteger) -> RadixInteger:
    params = _check(sk, x, y)
    _pairs_fit(x, "*")
    x, y = _clean_pair(sk, *_broadcast(x, y))
    nb, big_m = x.num_blocks, 2**x.msg_bits
    pairs = [(i, j) for i in range(nb) for j in range(nb - i)]
    f_lo, f_hi = (lambda a, b: a * b % big_m), (lambda a, b: a * b // big_m)
    lo, hi = _bivariate(sk, params, x.msg_bits, _take(x.blocks, np.array([i for i, _ in pairs])),
                        _take(y.blocks, np.array([j for _, j in pairs])), [f_lo, f_hi])
    columns: list[list] = [[] for _ in range(nb)]
    for n, (i, j) in enumerate(pairs):
        d_lo, d_hi = _largest(f_lo, x.degrees[i], y.degrees[j]), _largest(f_hi, x.degrees[i], y.degrees[j])
        if d_lo:
            columns[i + j].append((_take(lo, n), d_lo, 1))
        if i + j + 1 < nb and d_hi:
            columns[i + j + 1].append((_take(hi, n), d_hi, 1))
    return _sum_columns(sk, x, columns)


# --------------------------------------------------------------------------------------------------
# Selects, minimum, maximum
# --------------------------------------------------------------------------------------------------


def _select(sk, c: LWECiphertext, a: RadixInteger, b: RadixInteger) -> RadixInteger:
    shape = _check_bit(c, a, "select")
    a, b = ri._broadcast_to(a, shape), ri._broadcast_to(b, shape)
    a, b = _clean_pair(sk, a, b)
    nb, params = a.num_blocks, a.params
    cs = _bit_stack(c, nb, shape)
    not_c = _add_block_consts(params, ops.negate(cs), [1] * nb)
    (out,) = _bivariate(sk, params, a.msg_bits, _concat([cs, not_c]), _concat([a.blocks, b.blocks]),
                        [lambda s, v: v if s else 0])
    blocks = ops.add(_take(out, slice(0, nb)), _take(out, slice(nb, 2 * nb)))
    # one of the two halves is zero: the degree is the larger one's, not their sum
    return _replace(a, blocks, [max(u, v) for u, v in zip(a.degrees, b.degrees, strict=True)], [2] * nb)


def select(sk: ops.ServerKey, c: LWECiphertext, a: RadixInteger, b) -> RadixInteger:
    """``a`` where the encrypted bit ``c`` (a comparison's result) is 1, else ``b`` (a RadixInteger or a public
    int): 2B bootstraps in one call. The result's blocks are sums of two bootstraps (norm 2: not clean)."""
    return _select_program(sk, c, a, _operand(a, b) if isinstance(a, RadixInteger) else b)


@_program()
def _select_program(sk, c: LWECiphertext, a: RadixInteger, b: RadixInteger) -> RadixInteger:
    _check(sk, a, b)
    _pairs_fit(a, "select")
    a, b = _broadcast(a, b)
    return _select(sk, c, a, b)


def _flip_top(sk, x: RadixInteger, y: RadixInteger) -> tuple[RadixInteger, RadixInteger]:
    """x and y (clean, same shape) with their top bit flipped (x XOR 2^(bits-1)): one call, 2 PBS."""
    nb, big_m = x.num_blocks, 2**x.msg_bits
    both = _stack([_take(x.blocks, nb - 1), _take(y.blocks, nb - 1)])
    (flipped,) = _bootstrap(sk, both, [_table(x.params, lambda v: (v + big_m // 2) % big_m)])

    def put(z, top):
        blocks = _concat([_take(z.blocks, slice(0, nb - 1)), _stack([top])])
        return _replace(z, blocks, z.degrees[:-1] + (big_m - 1,), z.norms[:-1] + (1,))

    return put(x, _take(flipped, 0)), put(y, _take(flipped, 1))


def _compare(sk, x: RadixInteger, y, op: Callable, signed: bool) -> LWECiphertext:
    _check(sk, x, y)
    if not signed:
        return op(sk, x, y)
    x, y = _clean_pair(sk, *_broadcast(x, y))
    return op(sk, *_flip_top(sk, x, y))


@_binary("signed")
def lt(sk: ops.ServerKey, x: RadixInteger, y, signed: bool = False) -> LWECiphertext:
    """[x < y] as an encrypted bit; ``signed``: in two's complement (module docstring). y may be a public int."""
    return _compare(sk, x, y, ri.lt, signed)


@_binary("signed")
def le(sk: ops.ServerKey, x: RadixInteger, y, signed: bool = False) -> LWECiphertext:
    """[x <= y], as :func:`lt`."""
    return _compare(sk, x, y, ri.le, signed)


@_binary("signed")
def gt(sk: ops.ServerKey, x: RadixInteger, y, signed: bool = False) -> LWECiphertext:
    """[x > y], as :func:`lt`."""
    return _compare(sk, x, y, ri.gt, signed)


@_binary("signed")
def ge(sk: ops.ServerKey, x: RadixInteger, y, signed: bool = False) -> LWECiphertext:
    """[x >= y], as :func:`lt`."""
    return _compare(sk, x, y, ri.ge, signed)


@_binary("signed")
def minimum(sk: ops.ServerKey, x: RadixInteger, y, signed: bool = False) -> RadixInteger:
    """min(x, y) (``signed``: in two's complement): a comparison and a select."""
    x, y = _broadcast(x, y)
    return _select(sk, lt(sk, x, y, signed), x, y)


@_binary("signed")
def maximum(sk: ops.ServerKey, x: RadixInteger, y, signed: bool = False) -> RadixInteger:
    """max(x, y), as :func:`minimum`."""
    x, y = _broadcast(x, y)
    return _select(sk, gt(sk, x, y, signed), x, y)


# --------------------------------------------------------------------------------------------------
# Signed views and casts
# --------------------------------------------------------------------------------------------------


@_program()
def is_negative(sk: ops.ServerKey, x: RadixInteger) -> LWECiphertext:
    """[x < 0] in two's complement: the top block's top bit (1 PBS on clean x)."""
    _check(sk, x)
    x = propagate_carries(sk, x)
    big_m = 2**x.msg_bits
    (s,) = _bootstrap(sk, _take(x.blocks, x.num_blocks - 1), [_table(x.params, lambda v: int(v >= big_m // 2))])
    return s


@_program()
def absolute(sk: ops.ServerKey, x: RadixInteger) -> RadixInteger:
    """|x| in two's complement (|-2^(bits-1)| wraps to itself, as NumPy's and TFHE-rs's do)."""
    _check(sk, x)
    _pairs_fit(x, "abs")
    x = propagate_carries(sk, x)
    return _select(sk, is_negative(sk, x), propagate_carries(sk, ri.neg(sk, x)), x)


@_program("bits", "signed")
def cast(sk: ops.ServerKey, x: RadixInteger, bits: int, signed: bool = False) -> RadixInteger:
    """x as an integer of ``bits`` bits (a multiple of the block width): wider, zero-extended or (``signed``)
    sign-extended; narrower, taken mod 2^bits."""
    _check(sk, x)
    if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= ri.MAX_BITS or bits % x.msg_bits:
        raise ParameterError(f"cast: bits must be an int in [1, {ri.MAX_BITS}], a multiple of the {x.msg_bits}-bit "
                             f"blocks, got {bits!r}")
    return _resized(sk, x, bits // x.msg_bits, signed)


def _resized(sk, x: RadixInteger, nb: int, signed: bool) -> RadixInteger:
    """x on ``nb`` blocks (:func:`cast`; internal widths may pass MAX_BITS)."""
    if nb == x.num_blocks:
        return x
    x = propagate_carries(sk, x)
    if nb < x.num_blocks:
        return _replace(x, _take(x.blocks, slice(0, nb)), x.degrees[:nb], x.norms[:nb])
    extra = nb - x.num_blocks
    if signed:
        fill, deg, norm = _sign_block(sk, x), 2**x.msg_bits - 1, 1
    else:
        fill, deg, norm = _zero_like(_take(x.blocks, 0)), 0, 0
    blocks = _concat([x.blocks, _stack([fill] * extra)])
    return _replace(x, blocks, x.degrees + (deg,) * extra, x.norms + (norm,) * extra)


# --------------------------------------------------------------------------------------------------
# Division
# --------------------------------------------------------------------------------------------------


@_binary()
def divmod_(sk: ops.ServerKey, x: RadixInteger, d) -> tuple[RadixInteger, RadixInteger]:
    """(x // d, x mod d), unsigned, d a RadixInteger or a public int (module docstring); d = 0 gives
    (2^bits - 1, x)."""
    params = _check(sk, x, d)
    _pairs_fit(x, "divmod")
    x, d = _clean_pair(sk, *_broadcast(x, d))
    m, nb = x.msg_bits, x.num_blocks
    big_m = 2**m
    wide = x.bits + 2 * m
    dw = _resized(sk, d, wide // m, False)
    r = _replace(dw, _zero_like(dw.blocks), (0,) * (nb + 2), (0,) * (nb + 2))
    bits = _amount_bits(sk, x, x.bits)
    quotient: list[list] = [[] for _ in range(nb)]
    t_neg = _table(params, lambda v: int(v >= big_m // 2))
    for i in reversed(range(x.bits)):
        r = _shifted(sk, propagate_carries(sk, r), 1, left=True, rotate=False, signed=False)
        b0 = ops.add(_take(r.blocks, 0), bits[i])
        r = _replace(r, _concat([_stack([b0]), _take(r.blocks, slice(1, nb + 2))]),
                     (r.degrees[0] + 1,) + r.degrees[1:], (r.norms[0] + 1,) + r.norms[1:])
        r = propagate_carries(sk, r)
        diff = propagate_carries(sk, ri.sub(sk, r, dw))
        (neg,) = _bootstrap(sk, _take(diff.blocks, nb + 1), [t_neg])  # r < d: the difference wrapped
        r = propagate_carries(sk, _select(sk, neg, r, diff))
        ge_bit = ops.add_scalar(params, ops.negate(neg), 1)
        quotient[i // m].append((ops.mul_scalar(params, ge_bit, 1 << (i % m)), 1 << (i % m), 4 ** (i % m)))
    q_blocks = [ri._sum([t[0] for t in col]) for col in quotient]
    q = _replace(x, _stack(q_blocks), [sum(t[1] for t in col) for col in quotient],
                 [sum(t[2] for t in col) for col in quotient])
    rem = _replace(r, _take(r.blocks, slice(0, nb)), r.degrees[:nb], r.norms[:nb])
    return q, rem


@_binary()
def divmod_signed(sk: ops.ServerKey, x: RadixInteger, d) -> tuple[RadixInteger, RadixInteger]:
    """(x // d, x mod d) in two's complement with floor semantics, as Python's and NumPy's ``//`` and ``%``: the
    remainder has the divisor's sign. The magnitudes are divided unsigned (:func:`divmod_`; |-2^(bits-1)| = 2^(bits-1)
    is exact unsigned), the truncated quotient and remainder take their signs by selects, and where the signs differ
    and the remainder is not zero the quotient drops by 1 and the remainder gains d. Division by zero gives the
    quotient -1 for x >= 0 and 1 for x < 0 and the remainder x, as TFHE-rs's signed division does (the floor step is
    skipped for d = 0). -2^(bits-1) // -1 wraps to -2^(bits-1), as NumPy's does."""
    params = _check(sk, x, d)
    _pairs_fit(x, "divmod")
    x, d = _clean_pair(sk, *_broadcast(x, d))
    m = x.msg_bits
    sx, sd = _sign_bits(sk, x, d)

    def magnitude(v, s):
        return propagate_carries(sk, _select(sk, s, propagate_carries(sk, ri.neg(sk, v)), v))

    q0, r0 = divmod_(sk, magnitude(x, sx), magnitude(d, sd))
    q0, r0 = propagate_carries(sk, q0), propagate_carries(sk, r0)
    zero = ri.trivial(params, 0, bits=x.bits, msg_bits=m)
    r_nonzero, d_nonzero = ri.ne(sk, r0, zero), ri.ne(sk, d, zero)
    (differ,) = _bivariate(sk, params, m, sx, sd, [lambda a, b: a ^ b])
    (step,) = _bivariate(sk, params, m, differ, r_nonzero, [lambda a, b: a & b])
    (adjust,) = _bivariate(sk, params, m, step, d_nonzero, [lambda a, b: a & b])
    q = propagate_carries(sk, _select(sk, differ, propagate_carries(sk, ri.neg(sk, q0)), q0))
    r = propagate_carries(sk, _select(sk, sx, propagate_carries(sk, ri.neg(sk, r0)), r0))
    one = _resized(sk, _replace(x, _stack([adjust]), (1,), (1,)), x.num_blocks, False)
    q = propagate_carries(sk, ri.sub(sk, q, one))
    r = propagate_carries(sk, ri.add(sk, r, propagate_carries(sk, _select(sk, adjust, d, zero))))
    return q, r


# --------------------------------------------------------------------------------------------------
# Overflow flags
# --------------------------------------------------------------------------------------------------


def _sign_bits(sk, *xs: RadixInteger) -> list[LWECiphertext]:
    """Each clean integer's sign bit, one call."""
    big_m = 2**xs[0].msg_bits
    tops = _stack([_take(x.blocks, x.num_blocks - 1) for x in xs])
    (s,) = _bootstrap(sk, tops, [_table(xs[0].params, lambda v: int(v >= big_m // 2))])
    return [_take(s, k) for k in range(len(xs))]


def _signed_flag(sk, params, m: int, sa, sb, sr, same: bool) -> LWECiphertext:
    """[sa == sb (same) or sa != sb (not same)] and [sr != sa], from three encrypted bits: two calls."""
    e, d = _bivariate(sk, params, m, _stack([sa, sr]), _stack([sb, sa]),
                      [lambda a, b: int((a == b) == same), lambda a, b: int(a != b)])
    (flag,) = _bivariate(sk, params, m, _take(e, 0), _take(d, 1), [lambda a, b: a & b])
    return flag


def _overflowing(sk, x: RadixInteger, y: RadixInteger, signed: bool, subtract: bool):
    """(x +- y mod 2^bits, its overflow bit): unsigned by a comparison (a wrapped sum is below x; a difference wraps
    where x < y), signed from the operands' and the result's sign bits."""
    params = _check(sk, x, y)
    x, y = _clean_pair(sk, *_broadcast(x, y))
    s = propagate_carries(sk, (ri.sub if subtract else ri.add)(sk, x, y))
    if not signed:
        return s, ri.lt(sk, x, y) if subtract else ri.lt(sk, s, x)
    _pairs_fit(x, "overflowing_sub" if subtract else "overflowing_add")
    return s, _signed_flag(sk, params, x.msg_bits, *_sign_bits(sk, x, y, s), same=not subtract)


@_binary("signed")
def overflowing_add(sk: ops.ServerKey, x: RadixInteger, y, signed: bool = False):
    """(x + y mod 2^bits, [the exact sum left the type's range]), the result propagated."""
    return _overflowing(sk, x, y, signed, subtract=False)


@_binary("signed")
def overflowing_sub(sk: ops.ServerKey, x: RadixInteger, y, signed: bool = False):
    """(x - y mod 2^bits, [the exact difference left the type's range]), the result propagated."""
    return _overflowing(sk, x, y, signed, subtract=True)


@_binary("signed")
def overflowing_mul(sk: ops.ServerKey, x: RadixInteger, y, signed: bool = False):
    """(x y mod 2^bits, [the exact product left the type's range]): the product at twice the width (four times the
    bootstraps of :func:`mul`), the flag from its upper half."""
    _check(sk, x, y)
    x, y = _broadcast(x, y)
    nb = x.num_blocks
    full = propagate_carries(sk, _mul(sk, _resized(sk, x, 2 * nb, signed), _resized(sk, y, 2 * nb, signed)))
    low = _resized(sk, full, nb, False)
    return low, ri.ne(sk, full, _resized(sk, low, 2 * nb, signed))


__all__ = ["absolute", "bitand", "bitnot", "bitor", "bitxor", "cast", "divmod_", "divmod_signed", "ge", "gt",
           "is_negative", "le", "lt", "maximum", "minimum", "mul", "overflowing_add", "overflowing_mul",
           "overflowing_sub", "rotl", "rotl_by", "rotr", "rotr_by", "select", "shl", "shl_by", "shr", "shr_by"]
