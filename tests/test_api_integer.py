"""Encrypted integers of NumPy's types (crossfhe.api.integer, issue 48): every operator decrypts to NumPy's result
on the same types (wrap-around mod 2^bits, two's complement, floor division), eagerly and inside crossfhe.compile
(one function, both ways); the compiler merges equal operators and batches independent ones; bad input is refused
in the user's terms; values serialize and pickle without any secret.

Parameters: INSECURE_TFHE_P4 (blocks of 2 message and 2 carry bits, as P4_128). 8-bit pairs cover every carry and
the edge values (0, 1, 127, 128, 255: the sign boundary of int8); wider types in the slow run."""

import pickle

import jax
import numpy as np
import pytest

import crossfhe
from crossfhe import EncryptedInteger, TFHEContext, TFHEInteger, io
from crossfhe.api import eager, integer_lower
from crossfhe.errors import KeyMismatchError, ParameterError, SecretMaterialError, SerializationError
from crossfhe.io import format as fmt
from crossfhe.testing import INSECURE_TFHE_P4 as P

_rng = np.random.default_rng(4812)
_EDGE = [(0, 0), (255, 1), (1, 255), (17, 17), (200, 255), (128, 127), (127, 128), (255, 255), (128, 128), (1, 0),
         (0, 128), (85, 170), (3, 200), (64, 2)]
A = np.array([a for a, _ in _EDGE] + list(_rng.integers(0, 256, 2)), dtype=np.uint8)
B = np.array([b for _, b in _EDGE] + list(_rng.integers(0, 256, 2)), dtype=np.uint8)


@pytest.fixture(scope="module")
def ctx():
    return TFHEContext.create(P, seed=b"integer-api".ljust(32, b"\0"), insecure=True)


@pytest.fixture(scope="module")
def u8(ctx):
    return ctx.encrypt(A, dtype=np.uint8), ctx.encrypt(B, dtype=np.uint8)


def _same(got, want, what=""):
    want = np.asarray(want)
    got = np.asarray(got)
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    assert np.array_equal(got, want), (what, got, want)


def _binary(x, y):
    """Operators of two unsigned values (a function of the front end's values: eager or traced alike)."""
    return {"x + y": x + y, "x - y": x - y, "x * y": x * y, "x & y": x & y, "x | y": x | y, "x ^ y": x ^ y,
            "x < y": x < y, "x >= y": x >= y, "x == y": x == y, "x != y": x != y,
            "min": crossfhe.minimum(x, y), "max": np.maximum(x, y)}


def _reference(a, b):
    with np.errstate(over="ignore"):
        return {"x + y": a + b, "x - y": a - b, "x * y": a * b, "x & y": a & b, "x | y": a | b, "x ^ y": a ^ b,
                "x < y": a < b, "x >= y": a >= b, "x == y": a == b, "x != y": a != b,
                "min": np.minimum(a, b), "max": np.maximum(a, b)}


def test_unsigned_operators_as_numpy(ctx, u8):
    x, y = u8
    want = _reference(A, B)
    for name, got in _binary(x, y).items():
        _same(ctx.decrypt(got), want[name], name)
    with np.errstate(over="ignore"):
        consts = {"x + 200": (x + 200, A + np.uint8(200)), "7 - x": (7 - x, np.uint8(7) - A),
                  "x * 3": (x * 3, A * np.uint8(3)), "x ^ 0x5A": (x ^ 0x5A, A ^ np.uint8(0x5A)),
                  "~x": (~x, ~A), "-x": (-x, (0 - A.astype(np.int64)).astype(np.uint8)),
                  "x << 3": (x << 3, A << np.uint8(3)), "x >> 5": (x >> 5, A >> np.uint8(5)),
                  "x << 9": (x << 9, np.zeros_like(A)), "rotl 3": (x.rotl(3), (A << 3) | (A >> 5)),
                  "x % 16": (x % 16, A % np.uint8(16)), "x // 4": (x // 4, A // np.uint8(4)),
                  "x > 100": (x > 100, A > 100), "3 < x": (3 < x, 3 < A),
                  "np.add(5, x)": (np.add(5, x), A + np.uint8(5)),
                  "x + array": (x + B, A + B)}
    for name, (got, want) in consts.items():
        _same(ctx.decrypt(got), want, name)


def test_signed_views_and_casts(ctx, u8):
    x, y = u8
    sa, sb = A.astype(np.int8), B.astype(np.int8)
    s, t = x.astype(np.int8), y.astype(np.int8)
    assert s.dtype == np.int8 and s.bits == 8
    with np.errstate(over="ignore"):
        cases = {"s < t": (s < t, sa < sb), "s <= -3": (s <= -3, sa <= -3),
                 "max": (np.maximum(s, t), np.maximum(sa, sb)),
                 "s >> 2": (s >> 2, sa >> 2), "abs": (abs(s), np.abs(sa)), "-s": (-s, -sa), "s + t": (s + t, sa + sb),
                 "s * -3": (s * -3, sa * np.int8(-3)),
                 "int8 -> int16": (s.astype(np.int16), sa.astype(np.int16)),
                 "uint8 -> uint16": (x.astype(np.uint16), A.astype(np.uint16)),
                 "int8 -> uint16": (s.astype(np.uint16), sa.astype(np.uint16)),
                 "uint16 -> uint8": (x.astype(np.uint16).astype(np.uint8), A),
                 "-> bool": (x.astype(bool), A != 0)}
    for name, (got, want) in cases.items():
        _same(ctx.decrypt(got), want, name)
    w = x.astype(np.uint16) * 300  # no wrap at 16 bits
    _same(ctx.decrypt(w), A.astype(np.uint16) * np.uint16(300), "uint16 product")


def test_bools_select_and_overflow(ctx, u8):
    x, y = u8
    c, d = x < y, x == y
    _same(ctx.decrypt(c & ~d), (A < B) & ~(A == B))
    _same(ctx.decrypt(c | d), (A < B) | (A == B))
    _same(ctx.decrypt(c ^ True), ~(A < B))
    _same(ctx.decrypt(crossfhe.where(c, y - x, x - y)), np.where(A < B, B - A, A - B))
    _same(ctx.decrypt(np.where(c, x, 7)), np.where(A < B, A, np.uint8(7)))
    _same(ctx.decrypt(c.if_then_else(x, y)), np.minimum(A, B))
    _same(ctx.decrypt(c.astype(np.uint8) + x), A + (A < B).astype(np.uint8))
    v, flag = x.overflowing_add(y)
    _same(ctx.decrypt(v), A + B)
    _same(ctx.decrypt(flag), A.astype(int) + B > 255)
    v, flag = x.overflowing_sub(y)
    _same(ctx.decrypt(flag), A < B)


def test_scalars_broadcast_and_decrypt_as_numpy_scalars(ctx, u8):
    x, _ = u8
    z = ctx.encrypt(200, dtype="uint8")
    assert z.shape == () and x.shape == (16,)
    out = ctx.decrypt(z + 100)
    assert isinstance(out, np.uint8) and out == np.uint8(44)  # wraps mod 2^8
    _same(ctx.decrypt(x - z), A - np.uint8(200))  # a scalar broadcasts over a batch
    m = ctx.encrypt(np.array([[1, 2], [3, 4]]), dtype=np.int32)
    assert m.shape == (2, 2)
    _same(ctx.decrypt(m * m - 5), np.array([[1, 2], [3, 4]], dtype=np.int32) ** 2 - 5)
    b = ctx.encrypt([True, False], dtype=bool)
    _same(ctx.decrypt(~b), np.array([False, True]))


def test_batch_sizes_share_programs(ctx):
    """n values run in eager.bucket(n) rows: 17 and 18 values one program (one cache entry), a [3, 4] batch that of
    12; the padding rows (zero words) change no result."""
    assert [eager.bucket(n) for n in (0, 1, 15, 16, 17, 18, 31, 33, 100, 104, 1000)] == [
        0, 1, 15, 16, 18, 18, 32, 36, 104, 104, 1024]
    a = _rng.integers(0, 256, 18).astype(np.uint8)
    b = _rng.integers(0, 256, 18).astype(np.uint8)
    before = len(eager._CACHE)
    with np.errstate(over="ignore"):
        for n in (18, 17):
            x, y = ctx.encrypt(a[:n], dtype=np.uint8), ctx.encrypt(b[:n], dtype=np.uint8)
            _same(ctx.decrypt(x + y), a[:n] + b[:n], n)
            _same(ctx.decrypt(x - 7), a[:n] - np.uint8(7), n)
            assert len(eager._CACHE) == before + 2, n  # x + y and x - 7, made for 18 rows, run 17 as well
        m = ctx.encrypt(a[:12].reshape(3, 4), dtype=np.uint8)
        row = ctx.encrypt(b[:4], dtype=np.uint8)
        _same(ctx.decrypt(m + row), a[:12].reshape(3, 4) + b[:4])  # broadcast, flattened to 12 rows, reshaped


def test_bucketed_words_keep_their_64_bit_type():
    """The padding and the cut of a bucketed call keep 64-bit words whole with x64 off (a scheme whose words are
    uint64): 17 rows become 18, the added row zeros, and the cut gives the words back."""
    class Scheme:
        item_ndims = (1, 2)

    with jax.enable_x64(True):
        b = jax.numpy.asarray(np.arange(51, dtype=np.uint64).reshape(17, 3) + (1 << 40))
        a = jax.numpy.asarray(np.arange(204, dtype=np.uint64).reshape(17, 3, 4) + (1 << 40))
    operands, batches, shape = eager._bucketed(Scheme, [({}, (b, a))], ((17,),))
    pb, pa = operands[0][1]
    assert batches == ((18,),) and shape == ((17,), 17)
    assert pb.dtype == np.uint64 and pb.shape == (18, 3) and int(pb[0, 0]) == 1 << 40 and not np.asarray(pa[17]).any()
    back = eager._unbucketed((pb, pa), shape)
    assert back[0].dtype == np.uint64 and np.array_equal(np.asarray(back[1]), np.asarray(a))


def test_jax_jit_takes_the_values(ctx, u8):
    x, y = u8
    out = jax.jit(lambda a, b: (a + b) * 3)(x, y)
    assert isinstance(out, EncryptedInteger)
    _same(ctx.decrypt(out), (A + B) * np.uint8(3))


def _program(x, y):
    s = x + y
    return crossfhe.where(x < y, y - x, x - y), s * 3, (x < y) & (s > 99), y < x


def test_compiled_equals_eager_and_merges_and_batches(ctx, u8):
    x, y = u8
    eager = [ctx.decrypt(v) for v in _program(x, y)]
    circuit = crossfhe.compile(_program, TFHEInteger("uint8"), TFHEInteger("uint8"), params=P)
    circuit.keygen(seed=b"integer-circuit".ljust(32, b"\0"))
    compiled = circuit.decrypt(*circuit.run(*circuit.encrypt(A, B)))
    for e, c in zip(eager, compiled, strict=True):
        _same(c, e)
    with np.errstate(over="ignore"):
        _same(compiled[0], np.where(A < B, B - A, A - B))
        _same(compiled[2], (A < B) & ((A + B) > 99))
    _same(compiled[3], B < A)
    # x < y is traced twice and merged; y < x and x < y (one kind, one depth) run as one batched call, and so do
    # y - x and x - y
    traced, graph = circuit.traced.counts(), circuit.graph.counts()
    assert traced["lt"] == 3 and "lt" not in graph and "sub" not in graph and graph["batch"] == 2
    # the counts are the rule's: each node's bootstraps; batching keeps them and shortens the sequence of calls
    before, after = dict(circuit.report)["traced"], dict(circuit.report)["batch"]
    assert after["bootstraps"] < before["bootstraps"]  # the merged comparison
    assert after["pbs_calls"] < dict(circuit.report)["cse"]["pbs_calls"]


def test_circuit_exports_and_loads(ctx, tmp_path):
    circuit = crossfhe.compile(lambda a, b: np.minimum(a, b) + 1, TFHEInteger("int16"), TFHEInteger("int16"),
                               params=P)
    keys = circuit.keygen(seed=b"integer-export".ljust(32, b"\0"))
    a, b = np.array([-300, 7, 32767], dtype=np.int16), np.array([5, -9, 0], dtype=np.int16)
    circuit.export(tmp_path / "m.cfhe", batch_shape=(3,))
    loaded = crossfhe.load_circuit(tmp_path / "m.cfhe", P)
    out = loaded.run(*circuit.encrypt(a, b), keys=keys.public)
    with np.errstate(over="ignore"):
        _same(circuit.decrypt(*out), np.minimum(a, b) + np.int16(1))


def test_bad_input_is_refused_in_the_users_terms(ctx, u8):
    x, y = u8
    with pytest.raises(TypeError, match="operands of types uint8 and uint16; convert one first"):
        x + x.astype(np.uint16)
    with pytest.raises(ParameterError, match=r"the constant 300 is outside uint8's range \[0, 255\]"):
        x + 300
    with pytest.raises(ParameterError, match=r"-1 is outside uint8's range"):
        ctx.encrypt([1, -1], dtype=np.uint8)
    with pytest.raises(TypeError, match="takes integers"):
        ctx.encrypt([1.5], dtype=np.uint8)
    with pytest.raises(ParameterError, match="encrypted integers are bool, uint8"):
        ctx.encrypt(1, dtype=np.float32)
    with pytest.raises(TypeError, match="arithmetic on encrypted bools"):
        (x < y) + (x < y)
    with pytest.raises(ZeroDivisionError, match="constant 0"):
        x // 0
    with pytest.raises(TypeError, match="condition is an encrypted bool"):
        crossfhe.where(x, x, y)
    with pytest.raises(TypeError, match="no truth value"):
        bool(x < y)
    with pytest.raises(ParameterError, match="not a multiple of the 3-bit blocks"):
        ctx.encrypt(1, dtype=np.uint8, msg_bits=3)
    with pytest.raises(ParameterError, match="dtype= .* or bits="):
        ctx.encrypt(1, bits=3, dtype=np.uint8)
    with pytest.raises(ParameterError, match="do not broadcast"):
        x + ctx.encrypt(np.arange(3), dtype=np.uint8)
    with pytest.raises(TypeError, match="unsigned encrypted integer"):
        x << x.astype(np.int8)
    with pytest.raises(ParameterError, match="secret"):
        ctx.public.encrypt(1, dtype=np.uint8)  # an evaluator holds no key to encrypt with
    other = TFHEContext.create(P, seed=b"integer-other".ljust(32, b"\0"), insecure=True)
    with pytest.raises(KeyMismatchError):
        x + other.encrypt(A, dtype=np.uint8)
    with pytest.raises(KeyMismatchError):
        other.decrypt(x)
    with pytest.raises(crossfhe.CircuitError, match="types uint8 and int8"):
        crossfhe.compile(lambda a, b: a + b, TFHEInteger("uint8"), TFHEInteger("int8"), params=P)
    with pytest.raises(crossfhe.CircuitError, match="one int per operand"):
        crossfhe.compile(lambda a: a + np.arange(3), TFHEInteger("uint8"), params=P)


def test_powers_batch_items_and_what_integers_lack(ctx):
    """x ** k wraps as NumPy's integer power; x[i], slices, masks, len and iteration select items of the batch (no
    cryptographic work); NumPy operators and functions with no encrypted counterpart raise TypeError naming what
    exists (before: Python's or NumPy's bare messages, and np.asarray made an object array)."""
    v = np.array([[3, 200, 7], [1, 2, 255]], dtype=np.uint8)
    x = ctx.encrypt(v, dtype=np.uint8)
    with np.errstate(over="ignore"):
        _same(ctx.decrypt(x ** 3), v ** 3, "x ** 3")
        _same(ctx.decrypt(x ** 0), v ** 0, "x ** 0")
        s = np.array([-128, -3, 11], dtype=np.int8)
        _same(ctx.decrypt(np.power(ctx.encrypt(s, dtype=np.int8), 2)), s ** 2, "np.power, int8")
    _same(ctx.decrypt(x[1, 2]), v[1, 2])
    _same(ctx.decrypt(x[:, 1]), v[:, 1])
    _same(ctx.decrypt(x[np.array([False, True])]), v[np.array([False, True])])
    assert len(x) == 2 and x[0].shape == (3,) and [ctx.decrypt(r).tolist() for r in x] == v.tolist()
    refusals = {r"x / y is true division": lambda: x / 2, "c \\*\\* x with an encrypted exponent": lambda: 2 ** x,
                "@ is not defined": lambda: x @ x, "numpy.sum is not defined": lambda: np.sum(x),
                r"numpy.exp \(__call__\) is not defined": lambda: np.exp(x)}
    for what, op in refusals.items():
        with pytest.raises(TypeError, match=f"{what}.*what exists: \\+ - \\* //"):
            op()
    with pytest.raises(TypeError, match="not a NumPy array .* decrypt it first"):
        np.asarray(x)
    with pytest.raises(TypeError, match="x == y: an encrypted uint8 is compared with .* got str"):
        x == "3"  # noqa: B015 - the comparison raises (it answered False)
    with pytest.raises(ParameterError, match="negative integer powers"):
        x ** -1
    with pytest.raises(TypeError, match="exponent is an int constant"):
        x ** 1.5
    with pytest.raises(TypeError, match="ints, slices and public integer or boolean arrays"):
        x[..., 0]
    with pytest.raises(IndexError, match=r"too many indices for an encrypted batch of shape \(2, 3\)"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="out of bounds"):
        x[2]
    with pytest.raises(TypeError, match="only a batch has a length"):
        len(x[0, 0])
    with pytest.raises(crossfhe.CircuitError, match="one item of the circuit's batch"):
        crossfhe.compile(lambda a: a[0], TFHEInteger("uint8"), params=P)


def test_values_travel_without_secrets(ctx, u8):
    x, y = u8
    z = x * y + 1  # lazy carries: the blob keeps its bookkeeping
    blob = z.serialize()
    back = EncryptedInteger.load(ctx.public, blob)
    with pytest.raises(ParameterError, match="no key owner here"):
        back.decrypt()
    with np.errstate(over="ignore"):
        _same(ctx.decrypt(back), A * B + np.uint8(1))
        _same(ctx.decrypt(io.loads(io.dumps(z), context=ctx)), A * B + np.uint8(1))
    state = pickle.loads(pickle.dumps(z))
    assert "_owner" not in state.__dict__
    with pytest.raises(SecretMaterialError):
        pickle.dumps(ctx)
    c = fmt.unpack(blob)
    for bad in ({**c.fields["radix"], "degrees": [99] * 4}, {**c.fields["radix"], "dtype": "float32"},
                {**c.fields["radix"], "norms": [1, 1]}):
        with pytest.raises(SerializationError, match="radix"):
            EncryptedInteger.load(ctx, fmt.pack(c.kind, {**c.fields, "radix": bad}, c.arrays))
    other = TFHEContext.create(P, seed=b"integer-other".ljust(32, b"\0"), insecure=True)
    with pytest.raises(KeyMismatchError):
        EncryptedInteger.load(other, blob)


def test_rule_counts_match_the_radix_layer(ctx):
    """The bookkeeping rule's counts are the radix layer's own (crossfhe.tfhe.integer.cost): the figures the
    benchmark reports per operator."""
    meta = integer_lower.fresh("uint8", P)
    _, cost = integer_lower.rule(P, "lt", (), (meta, meta))
    assert (cost.pbs, cost.calls) == (5, 2)  # the table in crossfhe.tfhe.integer's docstring: 8 bits, 4 x 2
    _, cost = integer_lower.rule(P, "and", (), (meta, meta))
    assert (cost.pbs, cost.keyswitches, cost.calls) == (4, 4, 1)


@pytest.mark.slow  # every operator at 16, 32 and 64 bits: minutes of bootstraps on insecure parameters
@pytest.mark.parametrize("dtype", [np.uint16, np.int32, np.uint64, np.int64])
def test_wide_types_random(ctx, dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(int(np.dtype(dtype).itemsize))
    a = rng.integers(info.min, info.max, 4, dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, 4, dtype=dtype, endpoint=True)
    a[0], b[0] = info.max, info.min
    x, y = ctx.encrypt(a, dtype=dtype), ctx.encrypt(b, dtype=dtype)
    with np.errstate(over="ignore"):
        want = {"x + y": a + b, "x - y": a - b, "x * y": a * b, "x & y": a & b, "x < y": a < b, "x == y": a == b,
                "min": np.minimum(a, b), "x >> 7": a >> 7, "x << 9": a << dtype(9), "-x": -a}
    got = {"x + y": x + y, "x - y": x - y, "x * y": x * y, "x & y": x & y, "x < y": x < y, "x == y": x == y,
           "min": np.minimum(x, y), "x >> 7": x >> 7, "x << 9": x << 9, "-x": -x}
    for name, v in got.items():
        _same(ctx.decrypt(v), want[name], f"{np.dtype(dtype).name} {name}")


@pytest.mark.slow  # 8-bit division by a ciphertext: bits (B + 6) sequential calls, about a minute per call here
def test_division_by_ciphertexts(ctx, u8):
    x, y = u8
    _same(ctx.decrypt(x // 10), A // np.uint8(10))
    z = ctx.encrypt(200, dtype="uint8")
    assert (z // 7).decrypt() == 200 // 7 and (z % 7).decrypt() == 200 % 7  # one integer: no batch axis
    safe = np.where(B == 0, 1, B)
    q, r = divmod(x, y)
    _same(ctx.decrypt(q), np.where(B == 0, np.uint8(255), A // safe))  # by zero: as TFHE-rs
    _same(ctx.decrypt(r), np.where(B == 0, A, A % safe))
    s, t = x.astype(np.int8), y.astype(np.int8)
    sa, sb = A.astype(np.int8), B.astype(np.int8)
    ssafe = np.where(sb == 0, 1, sb)
    with np.errstate(over="ignore"):
        _same(ctx.decrypt(s // t), np.where(sb == 0, np.where(sa >= 0, -1, 1).astype(np.int8), sa // ssafe))
    _same(ctx.decrypt(s % t), np.where(sb == 0, sa, sa % ssafe))


@pytest.mark.slow  # shifts by encrypted amounts: log2(bits) selects each
def test_shifts_by_ciphertexts(ctx, u8):
    x, _ = u8
    k = ctx.encrypt(np.arange(16) % 11, dtype=np.uint8)
    amount = (np.arange(16) % 11) % 8  # taken mod bits, as TFHE-rs
    _same(ctx.decrypt(x << k), (A.astype(np.int64) << amount).astype(np.uint8))
    _same(ctx.decrypt(x.astype(np.int8) >> k), A.astype(np.int8) >> amount.astype(np.int8))
    _same(ctx.decrypt(x.rotr(k)), ((A.astype(np.int64) >> amount) | (A.astype(np.int64) << (8 - amount)) & 255)
          .astype(np.uint8))
