"""The BFV facade (crossfhe.api.bfv): every operator decrypts to NumPy's result mod t exactly; misuse names the
problem; no secret travels with a value; values decrypt themselves only at the key owner.

Parameters: INSECURE_BFV_N256 (N 256, t 65537), so a vector holds up to 256 values and rotates over rows of 128."""

import pickle

import numpy as np
import pytest

import crossfhe
from crossfhe import BFVContext, BFVPublicContext, EncryptedIntVector, io
from crossfhe.bfv import ops
from crossfhe.errors import InsecureParametersError, KeyMismatchError, ParameterError, SecretMaterialError
from crossfhe.testing import INSECURE_BFV_N256 as P
from crossfhe.testing import INSECURE_BFV_N256_COEFF

T = P.t


@pytest.fixture(scope="module")
def ctx():
    return BFVContext.create(P, rotations=[3], seed=bytes(range(1, 33)), insecure=True)


@pytest.fixture(scope="module")
def other():
    return BFVContext.create(P, seed=bytes(range(2, 34)), insecure=True)


def padded(v, width):
    return np.concatenate([v, np.zeros(width - len(v), dtype=np.int64)])


def test_operators_match_numpy_mod_t(ctx):
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, T, 100), rng.integers(0, T, 100)
    x, y = ctx.encrypt(a), ctx.encrypt(b)
    cases = {
        "x + y": (x + y, a + b), "x - y": (x - y, a - b), "x * y": (x * y, a * b), "-x": (-x, -a),
        "x + 7": (x + 7, a + 7), "x - 7": (x - 7, a - 7), "7 - x": (7 - x, 7 - a), "x * -3": (x * -3, -3 * a),
        "3 * x": (3 * x, 3 * a), "x + b": (x + b, a + b), "b - x": (b - x, b - a), "x * b": (x * b, a * b),
        "b + x (NumPy on the left)": (b + x, a + b), "x * [-1]": (x * [-1], -a),
        "x * y + 5 x - 1": (x * y + 5 * x - 1, a * b + 5 * a - 1), "x @ y": (x @ y, [a @ b]),
        "x @ b": (x @ b, [a @ b]), "b @ x": (b @ x, [a @ b]), "x.sum()": (x.sum(), [a.sum()]),
    }
    for name, (got, want) in cases.items():
        out = ctx.decrypt(got)
        assert out.dtype == np.int64 and np.array_equal(out, np.mod(want, T)), name
    assert len(x) == 100 and len(x @ y) == 1 and (x + y).decrypt().shape == (100,)


def test_broadcasting_and_padding(ctx):
    a, one = np.array([10, 20, 30]), np.array([5])
    x, o = ctx.encrypt(a), ctx.encrypt(one)
    assert np.array_equal((x + o).decrypt(), a + 5) and np.array_equal((o * a).decrypt(), 5 * a)
    assert np.array_equal((o - [1, 2, 3, 4, 5]).decrypt(), 5 - np.arange(1, 6))
    # Sums see NumPy's zero-padded vector: neither a scalar nor a broadcast value reaches the padding.
    assert (x + 1).sum().decrypt()[0] == (a + 1).sum() and (o + x).sum().decrypt()[0] == (a + 5).sum()
    assert x.rotate(1).sum().decrypt()[0] == a.sum()  # np.roll keeps every value


def test_rotations(ctx):
    rng = np.random.default_rng(5)
    v = rng.integers(0, T, 128)  # a full row: rotation is np.roll
    x = ctx.encrypt(v)
    for k in (1, 3, -1, -5, 127, 128 + 3):
        assert np.array_equal(x.rotate(k).decrypt(), np.roll(v, -k)), k
    w = rng.integers(0, T, 100)  # any length: np.roll (two rotations and two mask products)
    assert np.array_equal(ctx.encrypt(w).rotate(-3).decrypt(), np.roll(w, 3))
    # Longer than a row (width N): the rows exchange their ends (the row swap and two masks).
    full, part = rng.integers(0, T, 256), rng.integers(0, T, 200)
    xf, xp = ctx.encrypt(full), ctx.encrypt(part)
    for k in (5, 128, 200, -1):
        assert np.array_equal(xf.rotate(k).decrypt(), np.roll(full, -k)), k
    assert np.array_equal(xp.rotate(130).decrypt(), np.roll(part, -130))
    assert xf.sum().decrypt()[0] == full.sum() % T and (xp @ part).decrypt()[0] == part @ part % T


def test_values_out_of_range_and_bad_operands(ctx):
    x = ctx.encrypt([1, 2, 3])
    assert np.array_equal(ctx.encrypt([-1, 0, T - 1]).decrypt(), [T - 1, 0, T - 1])  # negative v means t + v
    for bad in ([T], [-T], [0, 2**40]):
        with pytest.raises(ParameterError, match=r"integers in \(-t, t\) = \(-65537, 65537\)"):
            ctx.encrypt(bad)
    for op in (lambda: x + T, lambda: x * [T, 0, 0], lambda: x - (-T)):
        with pytest.raises(ParameterError, match="np.mod"):
            op()
    with pytest.raises(TypeError, match="integers"):
        ctx.encrypt([1.5])
    with pytest.raises(ParameterError, match=r"scalar 3: wrap it in a list, \[3\]"):
        ctx.encrypt(3)
    with pytest.raises(ParameterError, match="at least one value"):
        ctx.encrypt([])
    with pytest.raises(ParameterError, match="1-D"):
        ctx.encrypt([[1, 2], [3, 4]])
    with pytest.raises(ParameterError, match="257 values do not fit the 256 slots"):
        ctx.encrypt(np.zeros(257, dtype=int))
    for op in (lambda: x + 1.5, lambda: x * "a", lambda: x @ object()):
        with pytest.raises(TypeError):
            op()
    with pytest.raises(TypeError, match="truth value"):
        bool(x)
    with pytest.raises(TypeError, match="integer offset"):
        x.rotate(1.5)


def test_lengths_must_match_or_broadcast(ctx):
    x8, x3 = ctx.encrypt(np.arange(8)), ctx.encrypt([1, 2, 3])
    for op in (lambda: x8 + x3, lambda: x3 - x8, lambda: x8 * x3, lambda: x8 @ x3, lambda: x8 + [1, 2, 3],
               lambda: x8 * np.ones(3, dtype=int)):
        with pytest.raises(ParameterError, match="lengths (8 and 3|3 and 8)"):
            op()


def test_other_context_refused(ctx, other):
    x, y = ctx.encrypt([1, 2]), other.encrypt([1, 2])
    for op in (lambda: x + y, lambda: x - y, lambda: x * y, lambda: x @ y, lambda: ctx.decrypt(y),
               lambda: ctx.noise_budget(y), lambda: EncryptedIntVector.load(ctx, y.serialize())):
        with pytest.raises(KeyMismatchError, match="different contexts"):
            op()


def test_missing_rotation_key_names_it():
    sk, keys = ops.keygen(P, seed=bytes(32))
    server = BFVPublicContext(P, keys)  # evaluation keys without any Galois key
    x = server.encrypt(np.arange(8))
    with pytest.raises(ParameterError, match=r"rotate\(3\).*BFVContext.create\(params, rotations=\[3\]\)"):
        x.rotate(3)
    with pytest.raises(ParameterError, match="power-of-two keys"):
        x.sum()
    with pytest.raises(ParameterError, match=r"no key owner.*ctx.decrypt\(x\)"):
        x.decrypt()  # made at a server: no key owner
    assert np.array_equal(ops.decode(ops.decrypt(sk, (x + 1).ct)).reshape(-1)[:8], np.arange(1, 9))


def test_parameters_refused():
    with pytest.raises(InsecureParametersError, match="insecure=True"):
        BFVContext.create(P)
    with pytest.raises(ParameterError, match="need batching"):
        BFVContext.create(INSECURE_BFV_N256_COEFF, insecure=True)


def test_noise_budget_and_exhaustion(ctx):
    x = ctx.encrypt([2, 3])
    fresh, once = ctx.noise_budget(x), ctx.noise_budget(x * x)
    assert fresh > once > 0
    y = x
    while ctx.noise_budget(y) > 0:
        y = y * y
    with pytest.raises(ParameterError, match="noise budget of this vector is exhausted"):
        ctx.decrypt(y)


def test_repr_is_short(ctx):
    x = ctx.encrypt(np.arange(100))
    for text in (repr(x), repr(ctx), repr(ctx.public), repr(x @ x)):
        assert len(text) < 160 and str(P.q[0]) not in text and "secret" not in text.replace("with secret key", "")
    assert repr(x) == "EncryptedIntVector(length=100, t=65537, N=256)"


def test_decrypt_at_owner_only_and_pickling(ctx):
    a = np.array([4, 5, 6])
    x = ctx.encrypt(a)
    y = x * x + 1
    assert np.array_equal(y.decrypt(), a * a + 1)
    data = pickle.dumps(y)
    sk = ctx.secret_key
    for secret in (np.asarray(sk.coeffs).tobytes(), np.asarray(sk.poly.data)[0].tobytes()):
        assert secret not in data
    back = pickle.loads(data)
    with pytest.raises(ParameterError, match=r"no key owner.*ctx.decrypt\(x\)"):
        back.decrypt()
    assert np.array_equal(ctx.decrypt(back), a * a + 1)
    with pytest.raises(SecretMaterialError, match="refusing to pickle a BFVContext"):
        pickle.dumps(ctx)
    with pytest.raises(SecretMaterialError):
        pickle.dumps([x, ctx])
    server = pickle.loads(pickle.dumps(ctx.public))  # the evaluator's side
    z = server.encrypt([1, 2, 3]) * 2
    with pytest.raises(ParameterError, match="no key owner"):
        z.decrypt()
    with pytest.raises(ParameterError, match="no secret key"):
        server.decrypt(z)
    assert np.array_equal(ctx.decrypt(z), [2, 4, 6])


def test_serialize_round_trips(ctx):
    a = np.array([7, 8, 9])
    x = ctx.encrypt(a)._raw_rotate(1)  # a raw slot rotation fills the padding: the state travels
    blob = x.serialize()
    assert io.kind_of(blob) == "bfv.vector"
    public = BFVPublicContext.load(ctx.public.serialize())
    assert public.key_id == ctx.key_id and public.rotations == ctx.public.rotations
    y = EncryptedIntVector.load(public, blob)
    assert (y.length, y.width, y.clean) == (x.length, x.width, x.clean) == (3, 4, False)
    assert np.array_equal(ctx.decrypt(y), [8, 9, 0])
    with pytest.raises(ParameterError, match="no key owner"):
        y.decrypt()
    assert np.array_equal(EncryptedIntVector.load(ctx, blob).decrypt(), [8, 9, 0])  # loaded by the key owner
    assert np.array_equal(ctx.decrypt(io.loads(io.dumps(x), context=public)), [8, 9, 0])
    assert isinstance(io.loads(io.dumps(ctx.public)), crossfhe.bfv.EvaluationKeys)
    with pytest.raises(ValueError, match="encrypted BFV vector: load it with"):
        io.loads(blob)
    with pytest.raises(ValueError):
        EncryptedIntVector.load(public, blob[:-1])


def test_top_level_names():
    assert crossfhe.presets.bfv.N8192 is crossfhe.bfv.presets.N8192
    assert crossfhe.presets.ckks is crossfhe.ckks.presets and crossfhe.presets.tfhe.P4.message_bits == 4
    for name in ("BFVContext", "BFVPublicContext", "EncryptedIntVector", "TFHEContext", "TFHEPublicContext",
                 "EncryptedInt", "CKKSContext", "presets"):
        assert name in crossfhe.__all__ and hasattr(crossfhe, name)
