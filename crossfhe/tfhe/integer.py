"""Radix integers: integers wider than one TFHE message, as several p-bit blocks with carries propagated by PBS.

Representation. A parameter set carries p-bit messages (one padding bit, :mod:`crossfhe.tfhe.params`). A
:class:`RadixInteger` of ``bits`` = m B bits is B blocks, little-endian, each an LWE ciphertext of a value
v_i in [0, 2^p):

    x = sum_i v_i M^i  (mod 2^bits),   M = 2^m,

m = ``msg_bits`` message bits and c = p - m >= 1 carry bits per block. A block is *clean* when v_i < M
(only message bits set); after an addition it holds v_i up to 2 (M - 1), whose excess over M is a carry not
yet moved to block i + 1. Narrow blocks (p = 4, m = 2: TFHE-rs's 2_2; 8 bits = 4 blocks) and a single wide
block (p = 6, m = 4 or 5: the whole integer in one message, c = 2 or 1 spare bits) are the same type; the
Taurus comparison of narrow against wide representations (§III-A2) is ``cost(...)`` on each.

Static bookkeeping (per block, part of the pytree's static data, never secret-dependent):

* ``degrees``: d_i, the largest value v_i can hold. Every operation keeps d_i <= 2^p - 1, so the padding bit
  stays clear and the block can be bootstrapped;
* ``norms``: n_i, the sum of squared weights of the linear combination of bootstrap outputs (or fresh
  encryptions, weight 1 each) that block i is; every operation keeps n_i <= ``params.norm2``, the budget
  under which a bootstrap of it meets the parameter set's failure probability.

An operation whose result would break either bound first propagates the carries of an operand (below),
which makes its blocks clean with n_i <= 1; if even clean operands would break a bound (parameters too
small for the operation), it raises :class:`ParameterError`. Additions are lazy: ``add`` returns unclean
blocks and propagates only when the next operation needs room.

Operations (x, y radix integers of the same shape, all on batches):

* ``add``: blockwise LWE addition, v_i = x_i + y_i; d_i and n_i add. 0 PBS unless a bound forces a
  propagation first.
* ``neg``: two's complement without a negative block. With k_{-1} = 0 and k_i = ceil((d_i + k_{i-1}) / M),
  block i becomes k_i M - k_{i-1} - x_i >= 0 (degree k_i M - k_{i-1}); the offsets sum to
  sum_i (k_i M - k_{i-1}) M^i = k_{B-1} M^B = 0 mod 2^bits, so the blocks encode -x. 0 PBS (a negation and a
  constant per block). For clean x: degrees M, M - 1, ..., M - 1.
* ``sub``: x + neg(y). 0 PBS on clean operands; the padding bit is never set.
* ``propagate_carries``: sequential (ripple) propagation. For i = 0 .. B - 1: s = v_i + carry_{i-1}, then one
  key switch and two tables on it (``ops.pbs_many``, KS-dedup): v_i <- s mod M and carry_i <- floor(s / M)
  (only the first for the top block, whose carry leaves the integer mod 2^bits). A block that is already
  clean with no carry coming in is left alone; one whose s is provably < M takes one table (to refresh its
  noise). Cost for B unclean blocks: 2B - 1 PBS, B key switches, B sequential calls. If some
  s = d_i + deg(carry) could exceed 2^p - 1 (blocks filled close to 2^p - 1 by additions), one batched call
  first splits every unclean block into (v mod M, floor(v / M)) and adds each carry to the next block,
  leaving blocks of degree <= M - 1 + 2^c - 1.
* ``mul_const``: c (mod 2^bits) in base M digits c_j. c x = sum_j c_j x M^j. Digit 1 is free (x shifted by j
  blocks). A single nonzero digit c_j > 1 is a linear c_j x shifted when c_j (M - 1) and c_j^2 n stay in the
  bounds. Otherwise, on clean x, one batched call bootstraps each block against the two tables
  lo_d(v) = d v mod M and hi_d(v) = floor(d v / M) of every distinct digit d > 1 (KS-dedup: one key switch
  per block), term j is lo_{c_j}(x_{i-j}) + hi_{c_j}(x_{i-j-1}) at block i, and the terms are summed with
  ``add`` (which propagates when a block fills). One wide block: one PBS (the table v -> c v mod M). When
  -c mod 2^bits has fewer digits to pay for than c (c = 2^bits - 1), c x = neg((-c) x).
* comparisons: on clean x and y, the block differences d_i = x_i - y_i in [-(M - 1), M - 1] (norm 2) are
  bootstrapped as they are: where d_i < 0 the padding bit is set, and the blind rotation then returns the table's
  entry for d_i + 2^p negated (the negacyclic half). The table v -> 2^j [v != 0] so gives 2^j sign(d_i), a signed
  digit, with j each block's place in its group of K = min(p, norm2) consecutive blocks (one table per input, one
  call). A group's sum S = sum_j 2^j s_j lies in [-(2^K - 1), 2^K - 1], inside (-2^p, 2^p), with norm K, and
  sign(S) is the group's comparison, most significant block first; the groups' signs are merged the same way, a
  level per call, until one sum is left. The last bootstrap reads it through the constant table 1 at half the
  message scale (``out_delta`` = Delta / 2), giving +-Delta / 2 by the sign of S (0 counts as positive);
  Delta / 2 added gives [S >= 0] (``ge``), subtracted from Delta / 2 [S < 0] (``lt``); ``le`` and ``gt`` swap the
  operands. B + ceil(B / K) + ceil(B / K^2) + ... + 1 PBS in 1 + ceil(log_K B) calls (one PBS for one block).
  ``eq``/``ne``: the per-block bits [d_i != 0] (on d_i + M - 1, no padding bit) are summed (up to
  min(2^p - 1, norm2) per block) and a table tests the sum for zero: B + 1 PBS in 2 calls.
  Comparisons return an ``LWECiphertext`` of the inputs' batch shape encrypting 0 or 1
  (``ops.decrypt`` reads it).

``trivial(params, values, bits=...)`` encrypts public constants without a key (norm 0, degrees the
digits), for adding or comparing against a constant. ``cost(op, sk, *args)`` counts the bootstraps of an
operation without running any (it traces the operation with ``jax.eval_shape`` against a counting key): PBS,
key switches and sequential ``pbs_many`` calls per integer. All operations are pure functions of their
inputs and trace under ``jax.jit`` (the plan depends only on the static degrees and norms); each operation with
a server key is one compiled program (cached per layout, degrees and norms).

PBS / sequential calls per integer (``cost``, clean operands; they depend only on the layout):

=====================  ===============  =========  =====  =====  =====  ======================
layout                 add, sub, neg    propagate  lt     eq     x 7    lt(x + y, z)
=====================  ===============  =========  =====  =====  =====  ======================
8 bits, 4 x 2 (p = 4)  0 / 0            7 / 4      5 / 2  5 / 2  8 / 1  12 / 6
8 bits, 2 x 4 (p = 8)  0 / 0            3 / 2      3 / 2  3 / 2  0 / 0  6 / 4
7 bits, 1 x 7 (p = 8)  0 / 0            1 / 1      1 / 1  1 / 1  1 / 1  2 / 2
16 bits, 8 x 2 (p = 4) 0 / 0            15 / 8     11 / 3 9 / 2  16 / 1 26 / 11
=====================  ===============  =========  =====  =====  =====  ======================

("propagate" of x + y; a wide block pays for its one bootstrap with a larger N: :mod:`crossfhe.tfhe.presets`.)

References: Bergerat et al., "Parameter optimization and larger precision for (T)FHE", J. Cryptology 2023
(radix decomposition, carries kept in each block's spare bits); TFHE-rs ``integer`` (blocks with message and
carry bits, degrees, comparison by block signs); Taurus §III-A2 (narrow vs wide representations) and §V
(KS-dedup).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.core.keys import check_key_ids
from crossfhe.core.lwe import LWECiphertext
from crossfhe.errors import ParameterError
from crossfhe.tfhe import ops
from crossfhe.tfhe.linear import add_const_words
from crossfhe.tfhe.params import Params

_static = partial(field, metadata={"static": True})

MAX_BITS = 64
"""Widest integer: decrypt returns int64 (uint64 at 64 bits)."""



# --------------------------------------------------------------------------------------------------
# The type
# --------------------------------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False, repr=False)
class RadixInteger:
    """An encrypted integer mod 2^(msg_bits num_blocks) (a pytree; see the module docstring).

    ``blocks``: LWECiphertext of batch shape ``(num_blocks, *batch_shape)``, block 0 least significant.
    Static: ``params``, ``msg_bits`` (m), ``degrees`` (the largest value each block can hold) and ``norms``
    (each block's sum of squared weights of bootstrap outputs since its last bootstrap).
    """

    blocks: LWECiphertext
    params: Params = _static()
    msg_bits: int = _static()
    degrees: tuple[int, ...] = _static()
    norms: tuple[int, ...] = _static()

    @property
    def num_blocks(self) -> int:
        return len(self.degrees)

    @property
    def bits(self) -> int:
        return self.msg_bits * self.num_blocks

    @property
    def carry_bits(self) -> int:
        return self.params.message_bits - self.msg_bits

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return self.blocks.batch_shape[1:]

    @property
    def is_clean(self) -> bool:
        """Every block holds only message bits (degree < 2^m) and is a single bootstrap output (norm <= 1)."""
        top = 2**self.msg_bits - 1
        return all(d <= top for d in self.degrees) and all(n <= 1 for n in self.norms)

    def __repr__(self) -> str:
        return (
            f"RadixInteger({self.bits} bits = {self.num_blocks} x {self.msg_bits}-bit blocks of "
            f"{self.params.name or self.params!r}, batch={self.batch_shape}, degrees={self.degrees})"
        )


@dataclass(frozen=True)
class Cost:
    """Bootstrapping work of one operation, per integer of the batch (``cost``).

    ``pbs``: blind rotations (one per block and table); ``keyswitches``: key switches (one per block
    bootstrapped, shared by its tables); ``calls``: ``pbs_many`` calls in sequence, each one pass over the
    bootstrapping key for the whole batch: the latency in bootstraps.
    """

    pbs: int
    keyswitches: int
    calls: int


class _Tally:
    """A stand-in server key that counts bootstraps instead of running them (used by :func:`cost` only)."""

    def __init__(self, params: Params):
        self.params = params
        self.items = self.rotations = self.calls = 0

    def record(self, shape: tuple[int, ...], tables: int) -> None:
        k = math.prod(shape)
        self.items += k
        self.rotations += k * tables
        self.calls += 1


def _program(*static: str, idle: Callable[..., bool] | None = None):
    """An operation ``op(sk, *args)`` as one compiled program per call (its plan depends only on static degrees,
    norms and ``static`` arguments, so the program is cached): the server key (its prepared forms included:
    :class:`crossfhe.tfhe.keys.PreparedKey`) is passed as an argument. A stand-in key (:func:`cost`), or arguments for
    which ``idle(*args)`` says there is nothing to compute, run it as it is."""

    def wrap(fun):
        jitted = jax.jit(fun, static_argnames=static)

        @functools.wraps(fun)
        def run(sk, *args, **kwargs):
            if isinstance(sk, ops.ServerKey) and not (idle is not None and idle(*args, **kwargs)):
                return jitted(sk, *args, **kwargs)
            return fun(sk, *args, **kwargs)

        return run

    return wrap


# --------------------------------------------------------------------------------------------------
# Helpers on blocks
# --------------------------------------------------------------------------------------------------


def _params_of(key, kind: type = ops.ServerKey) -> Params:
    if isinstance(key, (kind, _Tally)):
        return key.params
    raise ParameterError(f"expected a tfhe {kind.__name__}, got {type(key).__name__}")


def _check(key, *xs: RadixInteger, kind: type = ops.ServerKey) -> Params:
    params = _params_of(key, kind)
    for x in xs:
        if not isinstance(x, RadixInteger):
            raise ParameterError(f"expected a RadixInteger, got {type(x).__name__}")
        if x.params != params:
            raise ParameterError(
                f"integer of {x.params.name or x.params!r} used with a key of {params.name or params!r}"
            )
    for x in xs[1:]:
        if (x.msg_bits, x.num_blocks) != (xs[0].msg_bits, xs[0].num_blocks):
            raise ParameterError(
                f"integers of different widths: {xs[0].num_blocks} x {xs[0].msg_bits} bits and "
                f"{x.num_blocks} x {x.msg_bits} bits"
            )
    return params


def _take(ct: LWECiphertext, idx) -> LWECiphertext:
    """ct[idx] along the leading (block) axis; idx an int, a slice or an index array."""
    return LWECiphertext(ct.b[idx], ct.a[idx], ct.moduli, ct.key_id)


def _stack(cts: list[LWECiphertext], axis: int = 0) -> LWECiphertext:
    kid = check_key_ids("stack", *(c.key_id for c in cts))
    return LWECiphertext(
        jnp.stack([c.b for c in cts], axis=axis), jnp.stack([c.a for c in cts], axis=axis), cts[0].moduli, kid
    )


def _concat(cts: list[LWECiphertext]) -> LWECiphertext:
    kid = check_key_ids("concatenate", *(c.key_id for c in cts))
    return LWECiphertext(jnp.concatenate([c.b for c in cts]), jnp.concatenate([c.a for c in cts]), cts[0].moduli, kid)


def _zero_like(ct: LWECiphertext) -> LWECiphertext:
    """An encryption of 0 with no noise and no key (phase 0): degree 0, norm 0."""
    return LWECiphertext(jnp.zeros_like(ct.b), jnp.zeros_like(ct.a), ct.moduli)


def _sum(cts: list[LWECiphertext]) -> LWECiphertext:
    out = cts[0]
    for c in cts[1:]:
        out = ops.add(out, c)
    return out


def _add_block_consts(params: Params, ct: LWECiphertext, consts) -> LWECiphertext:
    """Block i (leading axis) + consts[i] (ints, taken mod 2^(p+1)); no noise is added."""
    c = np.array([int(v) for v in consts], dtype=np.int64).reshape((len(consts),) + (1,) * (ct.b.ndim - 2))
    return ops.add_scalar(params, ct, c)


def _bootstrap(sk, ct: LWECiphertext, tables: list, out_delta: int | None = None) -> list[LWECiphertext]:
    """``ops.pbs_many`` (one key switch per input, one blind rotation per input and table), or its count."""
    if isinstance(sk, _Tally):
        sk.record(ct.batch_shape, len(tables))
        return [ct] * len(tables)
    return ops.pbs_many(sk, ct, list(tables), out_delta=out_delta)


def _table(params: Params, f: Callable[[int], int]) -> np.ndarray:
    return ops.lookup_table(params, f)


def _broadcast(x: RadixInteger, y: RadixInteger) -> tuple[RadixInteger, RadixInteger]:
    if x.batch_shape == y.batch_shape:
        return x, y
    try:
        shape = np.broadcast_shapes(x.batch_shape, y.batch_shape)
    except ValueError as e:
        raise ParameterError(f"batch shapes {x.batch_shape} and {y.batch_shape} do not broadcast") from e
    return _broadcast_to(x, shape), _broadcast_to(y, shape)


def _broadcast_to(x: RadixInteger, shape: tuple[int, ...]) -> RadixInteger:
    nb, blk = x.num_blocks, x.blocks
    b = jnp.broadcast_to(blk.b[(slice(None),) + (None,) * (len(shape) - len(x.batch_shape))], (nb, *shape, blk.limbs))
    a = jnp.broadcast_to(
        blk.a[(slice(None),) + (None,) * (len(shape) - len(x.batch_shape))], (nb, *shape, blk.limbs, blk.n)
    )
    return RadixInteger(LWECiphertext(b, a, blk.moduli, blk.key_id), x.params, x.msg_bits, x.degrees, x.norms)


def _replace(x: RadixInteger, blocks: LWECiphertext, degrees, norms) -> RadixInteger:
    return RadixInteger(blocks, x.params, x.msg_bits, tuple(int(d) for d in degrees), tuple(int(n) for n in norms))


# --------------------------------------------------------------------------------------------------
# Encryption
# --------------------------------------------------------------------------------------------------


def _layout(params: Params, bits, msg_bits) -> tuple[int, int]:
    p = params.message_bits
    if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= MAX_BITS:
        raise ParameterError(f"bits must be an int in [1, {MAX_BITS}], got {bits!r}")
    if msg_bits is None:
        msg_bits = max(1, p // 2)
    if isinstance(msg_bits, bool) or not isinstance(msg_bits, int) or not 1 <= msg_bits < p:
        raise ParameterError(
            f"msg_bits must be an int in [1, {p - 1}] for {p}-bit blocks (at least one carry bit), got {msg_bits!r}"
        )
    if bits % msg_bits:
        raise ParameterError(f"bits = {bits} is not a multiple of msg_bits = {msg_bits} (blocks are whole)")
    return bits // msg_bits, msg_bits


def encrypt(ck: ops.ClientKey, values, *, bits: int, msg_bits: int | None = None, seed=None) -> RadixInteger:
    """Encrypt integers in [0, 2^bits) (an int or an int array: the batch shape) as bits / msg_bits blocks.

    ``msg_bits``: message bits per block, default p // 2 (p the parameter set's message bits); the rest of
    each block's p bits hold carries. One wide block: ``msg_bits=bits`` (needs bits < p). ``seed`` as for
    :func:`crossfhe.tfhe.ops.encrypt`. Fresh blocks are clean: degree 2^msg_bits - 1, norm 1.
    """
    params = _params_of(ck, ops.ClientKey)
    nb, m = _layout(params, bits, msg_bits)
    blocks = ops.encrypt(ck, _split_digits(values, bits, nb, m), key=seed)
    return RadixInteger(blocks, params, m, (2**m - 1,) * nb, (1,) * nb)


def trivial(params: Params, values, *, bits: int, msg_bits: int | None = None) -> RadixInteger:
    """A keyless, noiseless encryption of public integers (``ops.trivial`` blocks): norm 0, and each block's
    degree the largest digit it holds, so constants cost little room. Layout and checks as :func:`encrypt`."""
    if not isinstance(params, Params):
        raise ParameterError(f"params must be tfhe.Params, got {type(params).__name__}")
    nb, m = _layout(params, bits, msg_bits)
    digits = _split_digits(values, bits, nb, m)
    degs = tuple(int(digits[i].max(initial=0)) for i in range(nb))
    return RadixInteger(ops.trivial(params, digits), params, m, degs, (0,) * nb)


def _split_digits(values, bits: int, nb: int, m: int) -> np.ndarray:
    """int64 [nb, *shape]: the base-2^m digits of integers in [0, 2^bits), least significant first."""
    arr = np.asarray(values)
    if arr.dtype == object and all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
                                   for v in arr.flat):
        arr = np.vectorize(int, otypes=[object])(arr) if arr.size else arr
    elif arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        raise ParameterError(f"values must be integers, got dtype {arr.dtype}")
    bad = [int(v) for v in arr.flat if not 0 <= int(v) <= 2**bits - 1]
    if bad:
        raise ParameterError(f"value {bad[0]} is out of range [0, 2^{bits})")
    arr = np.asarray(np.vectorize(int, otypes=[object])(arr) if arr.size else arr, dtype=np.uint64)
    return np.stack([(arr >> np.uint64(m * i)) & np.uint64(2**m - 1) for i in range(nb)]).astype(np.int64)


def decrypt(ck: ops.ClientKey, x: RadixInteger) -> np.ndarray:
    """The integers mod 2^bits, int64 (uint64 at 64 bits) of x's batch shape (clean or not: each block holds a value
    < 2^p)."""
    _check(ck, x, kind=ops.ClientKey)
    v = ops.decrypt(ck, x.blocks).astype(object)  # [B, *batch]
    total = sum(v[i] * (1 << (x.msg_bits * i)) for i in range(x.num_blocks))
    dtype = np.uint64 if x.bits > 63 else np.int64
    return np.asarray(np.asarray(total, dtype=object) % (1 << x.bits), dtype=dtype).reshape(x.batch_shape)


# --------------------------------------------------------------------------------------------------
# Carry propagation
# --------------------------------------------------------------------------------------------------

_KEEP, _MOD, _SPLIT = "keep", "mod", "split"


def _ripple_plan(x: RadixInteger):
    """The sequential pass: (actions, degrees, norms) after it, or None if some block + carry would leave
    the bounds (2^p - 1, norm2)."""
    m, p, budget = x.msg_bits, x.params.message_bits, x.params.norm2
    big_m, top = 2**m, 2**p - 1
    acts, degs, norms = [], [], []
    cdeg = cnorm = 0
    for i, (d, n) in enumerate(zip(x.degrees, x.norms, strict=True)):
        d, n = d + cdeg, n + cnorm
        if d > top or n > budget:
            return None
        if d < big_m and n <= 1:
            acts.append(_KEEP)
            degs.append(d)
            norms.append(n)
            cdeg = cnorm = 0
        elif d < big_m or i == x.num_blocks - 1:
            acts.append(_MOD)
            degs.append(min(d, big_m - 1))
            norms.append(1)
            cdeg = cnorm = 0
        else:
            acts.append(_SPLIT)
            degs.append(big_m - 1)
            norms.append(1)
            cdeg, cnorm = d // big_m, 1
    return acts, tuple(degs), tuple(norms)


def _unclean(x: RadixInteger) -> list[int]:
    return [i for i, (d, n) in enumerate(zip(x.degrees, x.norms, strict=True)) if d >= 2**x.msg_bits or n > 1]


def _presplit(sk, x: RadixInteger) -> RadixInteger:
    """One batched call: every unclean block -> (v mod M, floor(v / M)); each carry added to the next block."""
    big_m = 2**x.msg_bits
    dirty = _unclean(x)
    tables = [_table(x.params, lambda v: v % big_m), _table(x.params, lambda v: v // big_m)]
    msg, carry = _bootstrap(sk, _take(x.blocks, np.array(dirty)), tables)
    pos = {i: k for k, i in enumerate(dirty)}
    blocks = []
    for i in range(x.num_blocks):
        blk = _take(msg, pos[i]) if i in pos else _take(x.blocks, i)
        if i > 0 and x.degrees[i - 1] >= big_m:
            blk = ops.add(blk, _take(carry, pos[i - 1]))
        blocks.append(blk)
    meta = _presplit_meta(x)
    return _replace(x, _stack(blocks), meta.degrees, meta.norms)


def _propagation_meta(x: RadixInteger):
    """(degrees, norms) after :func:`propagate_carries`, without running it; None if it cannot be done."""
    if x.is_clean:
        return x.degrees, x.norms
    plan = _ripple_plan(x)
    if plan is None:
        plan = _ripple_plan(_presplit_meta(x))
    return None if plan is None else plan[1:]


def _presplit_meta(x: RadixInteger) -> RadixInteger:
    """x with the degrees and norms :func:`_presplit` gives (the same blocks)."""
    big_m, dirty = 2**x.msg_bits, set(_unclean(x))
    degs, norms = [], []
    for i, (d, n) in enumerate(zip(x.degrees, x.norms, strict=True)):
        d2, n2 = (min(d, big_m - 1), 1) if i in dirty else (d, n)
        if i > 0 and x.degrees[i - 1] >= big_m:
            d2, n2 = d2 + x.degrees[i - 1] // big_m, n2 + 1
        degs.append(d2)
        norms.append(n2)
    return _replace(x, x.blocks, degs, norms)


@_program(idle=lambda x: isinstance(x, RadixInteger) and x.is_clean)
def propagate_carries(sk: ops.ServerKey, x: RadixInteger) -> RadixInteger:
    """Move every block's carry into the next block: a clean integer (degrees < 2^m, norms <= 1) with the
    same value mod 2^bits. Sequential: one ``pbs_many`` call (tables v mod M, floor(v / M)) per block that
    needs one, preceded by one batched split of all unclean blocks when a block could overflow its p bits. Where no
    block carries (each block's degree below 2^m, some norm above 1, as after a select), one call refreshes them all.
    Already clean: returned as is, 0 PBS."""
    _check(sk, x)
    if x.is_clean:
        return x
    plan = _ripple_plan(x)
    if plan is None:
        x = _presplit(sk, x)
        plan = _ripple_plan(x)
        if plan is None:
            raise ParameterError(
                f"carry propagation of blocks with degrees {x.degrees}, norms {x.norms} does not fit "
                f"{x.params.message_bits}-bit blocks with norm2 {x.params.norm2}"
            )
    acts, degs, norms = plan
    big_m = 2**x.msg_bits
    t_mod = _table(x.params, lambda v: v % big_m)
    t_div = _table(x.params, lambda v: v // big_m)
    if _SPLIT not in acts:  # no carry moves: every block that needs it refreshed in one call
        mods = [i for i, act in enumerate(acts) if act == _MOD]
        (fresh,) = _bootstrap(sk, _take(x.blocks, np.array(mods)), [t_mod])
        blocks = [_take(fresh, mods.index(i)) if i in mods else _take(x.blocks, i) for i in range(x.num_blocks)]
        return _replace(x, _stack(blocks), degs, norms)
    out, carry = [], None
    for i, act in enumerate(acts):
        blk = _take(x.blocks, i)
        if carry is not None:
            blk = ops.add(blk, carry)
        carry = None
        if act == _MOD:
            (blk,) = _bootstrap(sk, blk, [t_mod])
        elif act == _SPLIT:
            blk, carry = _bootstrap(sk, blk, [t_mod, t_div])
        out.append(blk)
    return _replace(x, _stack(out), degs, norms)


def _propagate_pair(sk, x: RadixInteger, y: RadixInteger) -> tuple[RadixInteger, RadixInteger]:
    """Both propagated in one pass (stacked on a batch axis: half the calls); equal batch shapes."""
    degs = tuple(max(a, b) for a, b in zip(x.degrees, y.degrees, strict=True))
    norms = tuple(max(a, b) for a, b in zip(x.norms, y.norms, strict=True))
    both = _replace(x, _stack([x.blocks, y.blocks], axis=1), degs, norms)
    out = propagate_carries(sk, both)
    blk = out.blocks
    split = [LWECiphertext(blk.b[:, k], blk.a[:, k], blk.moduli, blk.key_id) for k in (0, 1)]
    return _replace(x, split[0], out.degrees, out.norms), _replace(y, split[1], out.degrees, out.norms)


def _fit_pair(sk, x: RadixInteger, y: RadixInteger, ok: Callable, what: str):
    """x, y or their propagated forms such that ok(dx, nx, dy, ny) (metadata tuples) holds, cheapest first:
    as they are, the less clean one propagated, the other, both (one stacked pass)."""
    if ok(x.degrees, x.norms, y.degrees, y.norms):
        return x, y
    mx, my = _propagation_meta(x), _propagation_meta(y)
    order = [0, 1] if sum(x.degrees) + sum(x.norms) >= sum(y.degrees) + sum(y.norms) else [1, 0]
    for which in order:
        if which == 0 and mx is not None and ok(*mx, y.degrees, y.norms):
            return propagate_carries(sk, x), y
        if which == 1 and my is not None and ok(x.degrees, x.norms, *my):
            return x, propagate_carries(sk, y)
    if mx is not None and my is not None and ok(*mx, *my):
        if x.is_clean or y.is_clean:
            return propagate_carries(sk, x), propagate_carries(sk, y)
        return _propagate_pair(sk, x, y)
    p = x.params
    raise ParameterError(
        f"{what} of {x.num_blocks} x {x.msg_bits}-bit blocks does not fit {p.message_bits}-bit blocks with "
        f"norm2 {p.norm2} even on clean operands"
    )


# --------------------------------------------------------------------------------------------------
# Arithmetic
# --------------------------------------------------------------------------------------------------


def _add_ok(params: Params):
    top, budget = 2**params.message_bits - 1, params.norm2

    def ok(dx, nx, dy, ny):
        return all(a + b <= top for a, b in zip(dx, dy, strict=True)) and all(
            a + b <= budget for a, b in zip(nx, ny, strict=True)
        )

    return ok


@_program()
def add(sk: ops.ServerKey, x: RadixInteger, y: RadixInteger) -> RadixInteger:
    """x + y mod 2^bits (batch shapes broadcast). Blockwise; the result's carries are not propagated. An
    operand is propagated first only when a block sum could pass 2^p - 1 or the norm budget."""
    params = _check(sk, x, y)
    x, y = _broadcast(x, y)
    x, y = _fit_pair(sk, x, y, _add_ok(params), "addition")
    degs = [a + b for a, b in zip(x.degrees, y.degrees, strict=True)]
    norms = [a + b for a, b in zip(x.norms, y.norms, strict=True)]
    return _replace(x, ops.add(x.blocks, y.blocks), degs, norms)


def _neg_offsets(degrees, big_m: int) -> list[int]:
    out, prev = [], 0
    for d in degrees:
        k = -(-(d + prev) // big_m)
        out.append(k * big_m - prev)
        prev = k
    return out


@_program()
def neg(sk: ops.ServerKey, x: RadixInteger) -> RadixInteger:
    """-x mod 2^bits: block i -> k_i M - k_{i-1} - x_i (module docstring); 0 PBS unless x must be
    propagated first (an offset would pass 2^p - 1)."""
    params = _check(sk, x)
    top, big_m = 2**params.message_bits - 1, 2**x.msg_bits
    offs = _neg_offsets(x.degrees, big_m)
    if max(offs) > top:
        x = propagate_carries(sk, x)
        offs = _neg_offsets(x.degrees, big_m)
        if max(offs) > top:
            raise ParameterError(f"negation does not fit {params.message_bits}-bit blocks")
    return _replace(x, _add_block_consts(params, ops.negate(x.blocks), offs), offs, x.norms)


@_program()
def sub(sk: ops.ServerKey, x: RadixInteger, y: RadixInteger) -> RadixInteger:
    """x - y mod 2^bits (wraps around): x + neg(y); no block is ever negative."""
    _check(sk, x, y)
    return add(sk, x, neg(sk, y))


def _zero(x: RadixInteger) -> RadixInteger:
    return _replace(x, _zero_like(x.blocks), (0,) * x.num_blocks, (0,) * x.num_blocks)


def _shift(x: RadixInteger, j: int) -> RadixInteger:
    """x M^j: the blocks moved up j places, zeros below, the top j dropped (mod 2^bits)."""
    if j == 0:
        return x
    nb = x.num_blocks
    z = _zero_like(_take(x.blocks, slice(0, j)))
    blocks = _concat([z, _take(x.blocks, slice(0, nb - j))])
    return _replace(x, blocks, (0,) * j + x.degrees[: nb - j], (0,) * j + x.norms[: nb - j])


@_program("c")
def mul_const(sk: ops.ServerKey, x: RadixInteger, c: int) -> RadixInteger:
    """c x mod 2^bits for a Python int c (any sign: taken mod 2^bits). See the module docstring: free for
    digits 0 and 1 and for one small digit; otherwise one batched call of lo/hi product tables (KS-dedup)
    and additions that propagate when a block fills. When -c has fewer digits to pay for (c = 2^bits - 1:
    -x), the result is neg(mul_const(x, -c)). The result is not propagated."""
    params = _check(sk, x)
    if isinstance(c, bool) or not isinstance(c, (int, np.integer)):
        raise ParameterError(f"mul_const takes a Python int, got {type(c).__name__}")
    c = int(c) % (1 << x.bits)
    if _digit_weight(x, (-c) % (1 << x.bits)) < _digit_weight(x, c):
        return neg(sk, mul_const(sk, x, -c))
    m, nb = x.msg_bits, x.num_blocks
    big_m, top, budget = 2**m, 2**params.message_bits - 1, params.norm2
    digits = _digits(x, c)
    nonzero = [j for j, d in enumerate(digits) if d]
    if not nonzero:
        return _zero(x)
    if len(nonzero) == 1:
        j, d = nonzero[0], digits[nonzero[0]]
        if d == 1:
            return _shift(x, j)
        if all(d * a <= top for a in x.degrees) and all(d * d * n <= budget for n in x.norms):
            y = _replace(x, ops.mul_scalar(params, x.blocks, d), [d * a for a in x.degrees],
                         [d * d * n for n in x.norms])
            return _shift(y, j)
    if any(d > 1 for d in digits) and not x.is_clean:
        x = propagate_carries(sk, x)
    values = sorted({d for d in digits if d > 1})
    products = {}
    if values:
        jmin = min(j for j, d in enumerate(digits) if d > 1)
        used = nb - jmin  # blocks 0 .. used-1 are read by some product
        need_hi = {d: any(dj == d and j <= nb - 2 for j, dj in enumerate(digits)) for d in values}
        tables, keys = [], []
        for d in values:
            tables.append(_table(params, lambda v, d=d: d * v % big_m))
            keys.append((d, "lo"))
            if need_hi[d]:
                tables.append(_table(params, lambda v, d=d: d * v // big_m))
                keys.append((d, "hi"))
        outs = _bootstrap(sk, _take(x.blocks, slice(0, used)), tables)
        products = dict(zip(keys, outs, strict=True))
    terms = [_mul_term(x, digits[j], j, products) for j in nonzero]
    acc = terms[0]
    for t in terms[1:]:
        acc = add(sk, acc, t)
    return acc


def _digits(x: RadixInteger, c: int) -> list[int]:
    return [(c >> (x.msg_bits * j)) & (2**x.msg_bits - 1) for j in range(x.num_blocks)]


def _digit_weight(x: RadixInteger, c: int) -> tuple[int, int]:
    """(distinct digits > 1, nonzero digits) of c: what mul_const pays for, in that order."""
    digits = _digits(x, c)
    return len({d for d in digits if d > 1}), sum(1 for d in digits if d)


def _mul_term(x: RadixInteger, d: int, j: int, products: dict) -> RadixInteger:
    """d x M^j with d x split into lo/hi parts per block (d > 1), or x M^j (d = 1)."""
    if d == 1:
        return _shift(x, j)
    big_m, nb = 2**x.msg_bits, x.num_blocks
    zero = _zero_like(_take(x.blocks, 0))
    blocks, degs, norms = [], [], []
    for i in range(nb):
        parts, deg = [], 0
        if i >= j:
            parts.append(_take(products[(d, "lo")], i - j))
            deg += max(d * v % big_m for v in range(x.degrees[i - j] + 1))
        if i >= j + 1:
            parts.append(_take(products[(d, "hi")], i - j - 1))
            deg += max(d * v // big_m for v in range(x.degrees[i - j - 1] + 1))
        blocks.append(_sum(parts) if parts else zero)
        degs.append(deg)
        norms.append(len(parts))
    return _replace(x, _stack(blocks), degs, norms)


# --------------------------------------------------------------------------------------------------
# Comparisons
# --------------------------------------------------------------------------------------------------


def _block_diffs(sk, x: RadixInteger, y: RadixInteger) -> tuple[RadixInteger, LWECiphertext]:
    """Clean operands and w_i = x_i - y_i + (M - 1) in [0, 2M - 2] for every block (shape [B, *batch])."""
    params = _check(sk, x, y)
    x, y = _broadcast(x, y)
    big_m, top, budget = 2**x.msg_bits, 2**params.message_bits - 1, params.norm2

    def ok(dx, nx, dy, ny):
        return (
            all(d < big_m for d in dx + dy)
            and 2 * (big_m - 1) <= top
            and all(a + b <= budget for a, b in zip(nx, ny, strict=True))
        )

    x, y = _fit_pair(sk, x, y, ok, "comparison")
    w = _add_block_consts(params, ops.sub(x.blocks, y.blocks), [big_m - 1] * x.num_blocks)
    return x, w


def _signed_sign_table(params: Params, scale: int) -> np.ndarray:
    """The table v -> scale [v != 0] on [0, 2^p): bootstrapped on a phase d in (-2^p, 2^p), whose negative half the
    blind rotation negates (the padding bit), it gives scale sign(d)."""
    return _table(params, lambda v: scale if v else 0)


def _fan_in(params: Params) -> int:
    """K: the most signs one bootstrap merges (sum_j 2^j s_j over K signs stays in (-2^p, 2^p), norm K)."""
    return min(params.message_bits, params.norm2)


def _order(sk, x: RadixInteger, y: RadixInteger, negate: bool) -> LWECiphertext:
    """[S >= 0] (``negate``: [S < 0]) as an encrypted bit, S the sign of x - y read block by block from the top
    (module docstring: signed digits in the padding bit's negacyclic half, K signs per bootstrap)."""
    params = _check(sk, x, y)
    x, y = _broadcast(x, y)
    big_m, budget = 2**x.msg_bits, params.norm2

    def ok(dx, nx, dy, ny):
        return all(d < big_m for d in dx + dy) and all(a + b <= budget for a, b in zip(nx, ny, strict=True))

    x, y = _fit_pair(sk, x, y, ok, "comparison")
    k = _fan_in(params)
    if k < 2 and x.num_blocks > 1:
        raise ParameterError(f"comparing multi-block integers merges two signs per bootstrap, which needs p >= 2 and "
                             f"norm2 >= 2 (p = {params.message_bits}, norm2 = {params.norm2})")
    level = ops.sub(x.blocks, y.blocks)  # d_i = x_i - y_i in [-(M - 1), M - 1]: the padding bit set where negative
    count = x.num_blocks
    while count > 1:  # each value's sign, scaled by 2^(its place in its group of K), then the groups' sums
        groups = -(-count // k)
        tables = np.stack([_signed_sign_table(params, 1 << (i % k)) for i in range(count)])
        shape = level.batch_shape
        per_input = np.broadcast_to(tables.reshape((count,) + (1,) * (len(shape) - 1) + tables.shape[1:]),
                                    shape + tables.shape[1:])
        (signs,) = _bootstrap(sk, level, [per_input])
        level = _stack([_sum([_take(signs, i) for i in range(g * k, min(count, (g + 1) * k))]) for g in range(groups)])
        count = groups
    half = params.delta // 2  # the bit as (1 +- sign) Delta / 2: [S >= 0] or [S < 0], at the message scale
    (res,) = _bootstrap(sk, _take(level, 0), [_table(params, lambda v: 1)], out_delta=half)
    if negate:
        res = ops.negate(res)
    return _add_raw(params, res, half)


def _add_raw(params: Params, ct: LWECiphertext, value: int) -> LWECiphertext:
    """ct + value in the body (value an integer multiple of the torus unit, not of Delta; no noise added)."""
    enc = np.array([value % q for q in params.moduli], dtype=np.uint32)
    return LWECiphertext(add_const_words(ct.b, enc, moduli=params.moduli), ct.a, ct.moduli, ct.key_id)


def _equality(sk, x: RadixInteger, y: RadixInteger, want_equal: bool) -> LWECiphertext:
    params, nb = _check(sk, x, y), x.num_blocks
    per = min(2**params.message_bits - 1, params.norm2)  # bits summed in one block
    if nb > 1 and per < 2:
        raise ParameterError("equality of multi-block integers needs 2^p - 1 >= 2 and norm2 >= 2")
    x, w = _block_diffs(sk, x, y)
    mid = 2**x.msg_bits - 1
    if nb == 1:
        return _take(_bootstrap(sk, w, [_table(params, lambda v: int((v == mid) == want_equal))])[0], 0)
    (bits,) = _bootstrap(sk, w, [_table(params, lambda v: int(v != mid))])  # 1 where the blocks differ
    count = nb
    while True:
        groups = -(-count // per)
        size = -(-count // groups)
        pad = groups * size - count
        if pad:
            bits = _concat([bits, _zero_like(_take(bits, slice(0, pad)))])
        sums = _sum([_take(bits, slice(t, groups * size, size)) for t in range(size)])
        if groups == 1:
            table = _table(params, lambda s: int((s == 0) == want_equal))
            return _take(_bootstrap(sk, sums, [table])[0], 0)
        (bits,) = _bootstrap(sk, sums, [_table(params, lambda s: int(s != 0))])
        count = groups


@_program()
def eq(sk: ops.ServerKey, x: RadixInteger, y: RadixInteger) -> LWECiphertext:
    """[x == y] as an LWECiphertext of the batch shape (message 0 or 1; read it with ``ops.decrypt``)."""
    return _equality(sk, x, y, True)


@_program()
def ne(sk: ops.ServerKey, x: RadixInteger, y: RadixInteger) -> LWECiphertext:
    """[x != y], as :func:`eq`."""
    return _equality(sk, x, y, False)


@_program()
def lt(sk: ops.ServerKey, x: RadixInteger, y: RadixInteger) -> LWECiphertext:
    """[x < y] (unsigned), an LWECiphertext encrypting 0 or 1 of the batch shape."""
    return _order(sk, x, y, negate=True)


@_program()
def le(sk: ops.ServerKey, x: RadixInteger, y: RadixInteger) -> LWECiphertext:
    """[x <= y] (unsigned), as :func:`lt`: [y >= x]."""
    return _order(sk, y, x, negate=False)


@_program()
def gt(sk: ops.ServerKey, x: RadixInteger, y: RadixInteger) -> LWECiphertext:
    """[x > y] (unsigned), as :func:`lt`: [y < x]."""
    return _order(sk, y, x, negate=True)


@_program()
def ge(sk: ops.ServerKey, x: RadixInteger, y: RadixInteger) -> LWECiphertext:
    """[x >= y] (unsigned), as :func:`lt`."""
    return _order(sk, x, y, negate=False)


# --------------------------------------------------------------------------------------------------
# Cost
# --------------------------------------------------------------------------------------------------


def cost(op: Callable, key, *args, **kwargs) -> Cost:
    """The bootstrapping work of ``op(key, *args, **kwargs)`` per integer of the batch, without running it.

    ``op``: one of this module's operations (``add``, ``mul_const``, ``lt``, ``propagate_carries``, ...);
    ``key``: a ServerKey (or just the Params). The operation is traced with ``jax.eval_shape`` against a key
    that counts ``pbs_many`` calls, so the count is the one the real call makes on these operands (it depends
    only on their static degrees and norms). Example: ``cost(integer.mul_const, sk, x, 5).pbs``.
    """
    params = key if isinstance(key, Params) else _params_of(key)
    tally = _Tally(params)
    jax.eval_shape(lambda: op(tally, *args, **kwargs))
    shapes = [a.batch_shape for a in args if isinstance(a, RadixInteger)]
    batch = math.prod(np.broadcast_shapes(*shapes)) if shapes else 1
    if tally.items % batch or tally.rotations % batch:
        raise ParameterError("cost: the operation bootstrapped a number of ciphertexts not a multiple of the batch")
    return Cost(pbs=tally.rotations // batch, keyswitches=tally.items // batch, calls=tally.calls)


__all__ = [
    "Cost",
    "RadixInteger",
    "add",
    "cost",
    "decrypt",
    "encrypt",
    "eq",
    "ge",
    "gt",
    "le",
    "lt",
    "mul_const",
    "ne",
    "neg",
    "propagate_carries",
    "sub",
    "trivial",
]
