"""The operator facade: each operator decrypts to the NumPy result within a bound from the parameters."""

import math

import numpy as np
import pytest

from crossfhe import CKKSContext, CKKSPublicContext, EncryptedVector
from crossfhe.ckks import ops
from crossfhe.errors import KeyMismatchError
from crossfhe.testing import INSECURE_CKKS_N10 as P

# Per-slot error of one fresh encryption (7 standard deviations, see test_ckks_ops.fresh_bound).
FRESH = 7 * math.sqrt(P.n * (4 / 3 * P.n + 1)) * 3.19 / P.scale + P.n / (2 * P.scale)


@pytest.fixture(scope="module")
def ctx():
    return CKKSContext.create(P, rotations=[1], seed=bytes(range(1, 33)), insecure=True)


def test_operators(ctx):
    rng = np.random.default_rng(3)
    x, y = rng.uniform(-1, 1, 100), rng.uniform(-1, 1, 100)
    ex, ey = ctx.encrypt(x), ctx.encrypt(y)
    got = ctx.decrypt(ex * ey + 0.5 * ex - y + 2)
    assert got.shape == (100,) and got.dtype == np.float64
    assert np.max(np.abs(got - (x * y + 0.5 * x - y + 2))) <= 12 * FRESH
    assert np.max(np.abs(ctx.decrypt(ex - ey) - (x - y))) <= 2 * FRESH
    assert np.max(np.abs(ctx.decrypt(ex.rotate(1))[:99] - x[1:])) <= 8 * FRESH
    # Sums over the 128-slot period of the padded vector: 128 slot errors add up.
    assert abs(ctx.decrypt(ex.sum())[0] - x.sum()) <= 128 * 8 * FRESH
    assert abs(ctx.decrypt(ex @ ey)[0] - x @ y) <= 128 * 12 * FRESH


def test_complex_and_errors(ctx):
    z = np.exp(1j * np.arange(8))
    ez = ctx.encrypt(z)
    got = ctx.decrypt(ez * (1 - 1j))
    assert np.iscomplexobj(got) and np.max(np.abs(got - z * (1 - 1j))) <= 4 * FRESH
    with pytest.raises(ValueError, match="do not fit"):
        ctx.encrypt(np.zeros(P.slots + 1))
    evaluator = CKKSPublicContext(P, ctx.keys)
    with pytest.raises(ValueError, match="no secret key"):
        evaluator.decrypt(ez)


# --------------------------------------------------------------------------------------------------
# Misuse: every case names the problem (the soundness issue's repros)
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def other():
    return CKKSContext.create(P, seed=bytes(range(2, 34)), insecure=True)


def test_lengths_must_match_or_broadcast(ctx):
    x8, x3, x1 = ctx.encrypt(np.arange(8) / 8), ctx.encrypt([1.0, 2.0, 3.0]), ctx.encrypt([0.5])
    for op in (lambda: x8 + x3, lambda: x3 - x8, lambda: x8 * x3, lambda: x8 @ x3, lambda: x8 + [1.0, 2.0, 3.0],
               lambda: x8 * np.ones(3)):
        with pytest.raises(ValueError, match="lengths (8 and 3|3 and 8)"):
            op()
    got = ctx.decrypt(x8 + x1)  # a single value broadcasts, as in NumPy
    assert got.shape == (8,) and np.max(np.abs(got - (np.arange(8) / 8 + 0.5))) <= 2 * FRESH
    got = ctx.decrypt(x1 * np.arange(4.0))
    assert got.shape == (4,) and np.max(np.abs(got - 0.5 * np.arange(4.0))) <= 8 * FRESH


def test_other_context_refused(ctx, other):
    x, y = ctx.encrypt(np.ones(4)), other.encrypt(np.ones(4))
    for op in (lambda: x + y, lambda: x - y, lambda: x * y, lambda: ctx.decrypt(y),
               lambda: EncryptedVector.load(ctx, y.serialize())):
        with pytest.raises(KeyMismatchError, match="different contexts"):
            op()
    # The pure functions check the ciphertexts' key ids as well.
    for op in (lambda: ops.add(x.ct, y.ct), lambda: ops.decrypt(ctx.secret_key, y.ct),
               lambda: ops.mul(x.ct, x.ct, other.keys), lambda: ops.rotate(x.ct, 1, other.keys)):
        with pytest.raises(KeyMismatchError, match="different key pairs"):
            op()


def test_bad_operands_raise_type_and_value_errors(ctx):
    x = ctx.encrypt(np.ones(4))
    with pytest.raises(ValueError, match=r"got the scalar 3.0: wrap it in a list, \[3.0\]"):
        ctx.encrypt(3.0)
    with pytest.raises(ValueError, match="at least one value"):
        ctx.encrypt([])
    with pytest.raises(TypeError, match="dtype <U1"):
        ctx.encrypt(["a"])
    for op in (lambda: x + "a", lambda: "a" + x, lambda: x * "a", lambda: x - object(), lambda: x @ "ab"):
        with pytest.raises(TypeError, match="EncryptedVector"):
            op()
    with pytest.raises(TypeError, match="integer offset"):
        x.rotate(1.5)


def test_negative_rotations(ctx):
    rng = np.random.default_rng(11)
    v = rng.uniform(-1, 1, 64)  # a full period: rotation is np.roll
    x = ctx.encrypt(v)
    for k in (-1, -5, 63, -64, 1 - 2**20):
        got = ctx.decrypt(x.rotate(k))
        assert np.max(np.abs(got - np.roll(v, -k))) <= 8 * 6 * FRESH, k
    # Any length rotates as np.roll does (two rotations and a mask product: one level).
    y = ctx.encrypt([1.0, 2.0, 3.0])
    for k in (-1, 1, 2, 5):
        got = ctx.decrypt(y.rotate(k))
        assert np.max(np.abs(got - np.roll([1.0, 2.0, 3.0], -k))) <= 8 * 4 * FRESH, k
    assert y.rotate(1).level == y.level - 1 and y.rotate(1).clean


def test_key_ids_survive_serialization(ctx):
    from crossfhe import io

    x = ctx.encrypt(np.ones(4))
    assert x.ct.key_id == ctx.key_id == ctx.secret_key.key_id
    assert io.loads(io.dumps(x.ct)).key_id == ctx.key_id
    assert io.loads(io.dumps(ctx.keys)).key_id == ctx.key_id
    assert io.loads_secret_key(io.dumps_secret_key(ctx.secret_key, params=P), params=P).key_id == ctx.key_id
    with pytest.raises(ValueError, match="encrypted vector: load it with crossfhe.EncryptedVector.load"):
        io.loads(x.serialize())


# slow: 45 s cold in CI; the kernel sets' equality runs by default in tests/test_kernel_sets.py
@pytest.mark.slow
def test_kernel_set_chosen_once_at_creation():
    """AUTO parameters get the process's default set at context creation (a value the context then carries);
    the caller may name another; the same seed gives the same words on either, and an unknown name is refused."""
    from crossfhe.kernels import AUTO, VECTOR, default_kernels

    assert P.kernels is AUTO
    auto = CKKSContext.create(P, seed=bytes(32), insecure=True)
    vector = CKKSContext.create(P, seed=bytes(32), kernels="vector", insecure=True)
    assert auto.params.kernels is default_kernels() and vector.params.kernels is VECTOR
    assert vector.keys.relin.b.data.tobytes() == auto.keys.relin.b.data.tobytes()
    x = np.linspace(-1, 1, 8)
    for c in (auto, vector):
        got = c.decrypt(c.encrypt(x) * c.encrypt(x))
        assert np.max(np.abs(got - x * x)) < 1e-3
    with pytest.raises(ValueError, match="unknown kernel set"):
        CKKSContext.create(P, seed=bytes(32), kernels="tensor", insecure=True)


def test_padding_stays_zero_for_sums_and_rotations():
    """A length that is not a power of two: sums and rotations see NumPy's zero-padded vector (a scalar is not added
    to the padding; a rotation's or broadcast's fill is cleared first), and the state survives serialization."""
    import crossfhe
    from crossfhe.ckks import presets

    ctx = crossfhe.CKKSContext.create(presets.N13_L3, seed=bytes(32))
    a, one = np.array([0.1, 0.7, -0.3]), np.array([0.5])
    x, o = ctx.encrypt(a), ctx.encrypt(one)
    tol = 2.0**-9  # N13_L3 keeps 2^-12.3 per slot; a sum of four values loses two bits, one mask a few more
    assert np.abs(ctx.decrypt(((x - 0.5) * (x - 0.5)).sum()) - ((a - 0.5) ** 2).sum()).max() < tol
    assert np.abs(ctx.decrypt((x + 1.0).sum()) - (a + 1).sum()).max() < tol
    assert np.abs(ctx.decrypt(x.rotate(1).sum()) - a.sum()).max() < tol  # np.roll keeps every value
    assert np.abs(ctx.decrypt((o + x).sum()) - (one + a).sum()).max() < tol
    assert crossfhe.EncryptedVector.load(ctx, (x + 1.0).serialize()).clean
    filled = x._raw_rotate(1)  # the raw slot rotation fills the padding; the load keeps that state
    assert not filled.clean and not crossfhe.EncryptedVector.load(ctx, filled.serialize()).clean


def test_repr_is_short(ctx):
    x = ctx.encrypt(np.arange(100) / 100)
    assert repr(x) == "EncryptedVector(length=100, level=3/3, scale=2^30.0, bound=1, slots=512)"
    assert repr(ctx.encrypt([1j])).startswith("EncryptedVector(length=1, complex, level=3/3")
    for text in (repr(x * x), repr(ctx), repr(ctx.public)):
        assert len(text) < 160 and str(P.q[0]) not in text


def test_decrypt_at_owner_only_and_pickling(ctx):
    """A vector remembers the key owner's context in this process only: x.decrypt() works there, and neither a
    pickle nor a blob carries the owner (or its secret key)."""
    import pickle

    from crossfhe.errors import ParameterError, SecretMaterialError

    v = np.array([0.25, -0.5, 0.75])
    x = ctx.encrypt(v)
    y = (x * x + 1.0).rotate(1)
    assert np.max(np.abs(y.decrypt() - ctx.decrypt(y))) == 0
    assert np.max(np.abs(y.decrypt() - [v[1] ** 2 + 1, v[2] ** 2 + 1, v[0] ** 2 + 1])) <= 64 * FRESH
    data = pickle.dumps(y)
    sk = ctx.secret_key
    for secret in (np.asarray(sk.coeffs).tobytes(), np.asarray(sk.poly.data)[0].tobytes()):
        assert secret not in data
    back = pickle.loads(data)
    with pytest.raises(ParameterError, match=r"no key owner.*ctx.decrypt\(x\)"):
        back.decrypt()
    assert np.max(np.abs(ctx.decrypt(back) - ctx.decrypt(y))) == 0
    with pytest.raises(SecretMaterialError, match="refusing to pickle a CKKSContext"):
        pickle.dumps(ctx)
    public = CKKSPublicContext.load(ctx.public.serialize())
    for z in (EncryptedVector.load(public, x.serialize()), public.encrypt(v) * 2.0):
        with pytest.raises(ParameterError, match="no key owner"):
            z.decrypt()
    assert np.max(np.abs(EncryptedVector.load(ctx, x.serialize()).decrypt() - v)) <= FRESH


def test_insecure_parameters_need_consent():
    from crossfhe.errors import InsecureParametersError

    with pytest.raises(InsecureParametersError, match="insecure=True"):
        CKKSContext.create(P, seed=bytes(32))
    with pytest.raises(TypeError, match="ckks.Params"):
        CKKSContext.create("N14_L7")
