"""The TFHE facade (crossfhe.api.tfhe): every operator decrypts to the exact integer result; each value carries the
interval it can take, and an operation that could leave the p-bit message space (or exceed the noise a bootstrap
tolerates) is refused rather than wrapped; no secret travels with a value; values decrypt themselves only at the key
owner.

Parameters: INSECURE_TFHE_P4 (4-bit messages). Batches keep to two shapes, () and (16,), each compiled once."""

import pickle
import re

import numpy as np
import pytest

import crossfhe
from crossfhe import EncryptedInt, TFHEContext, TFHEPublicContext, io
from crossfhe.api.tfhe import Bound, noise_budget
from crossfhe.errors import InsecureParametersError, KeyMismatchError, ParameterError, SecretMaterialError
from crossfhe.io import format as fmt
from crossfhe.testing import INSECURE_TFHE_P4 as P


@pytest.fixture(scope="module")
def ctx():
    return TFHEContext.create(P, seed=bytes(range(1, 33)), insecure=True)


@pytest.fixture(scope="module")
def batch(ctx):
    """a, b in [0, 3] (2 bits) over a batch of 16, every pair once; their encryptions."""
    a, b = np.divmod(np.arange(16), 4)
    return a, b, ctx.encrypt(a, bits=2), ctx.encrypt(b, bits=2)


def test_linear_operators_exact(ctx, batch):
    a, b, x, y = batch
    cases = {
        "x + y": (x + y, a + b), "x + 3 y": (x + 3 * y, a + 3 * b), "x + 4 - y": (x + 4 - y, a + 4 - b),
        "3 - x": (3 - x, 3 - a), "x * 5": (x * 5, 5 * a), "x + b (an array)": (x + b, a + b),
        "12 - x - y * 3": (12 - x - y * 3, 12 - a - 3 * b), "x - x": (x - x, 0 * a),
        "x + y - y": (x + y - y, a), "NumPy on the left": (np.arange(16) % 4 + x, a + np.arange(16) % 4),
    }
    for name, (got, want) in cases.items():
        out = ctx.decrypt(got)
        assert out.shape == (16,) and np.array_equal(out, want), name
        assert got.range[0] <= want.min() and want.max() <= got.range[1], name
    assert (x + y).range == (0, 6) and (x * 5).range == (0, 15) and (x - x).range == (0, 0)
    assert (x + 3 * y).bound.noise == 10 and (x + y - y).bound.noise == 1  # sum of squared weights
    s = ctx.encrypt(9)
    assert ctx.decrypt(s) == 9 and isinstance(ctx.decrypt(s), int) and (15 - s).decrypt() == 6
    assert np.array_equal((x + ctx.encrypt(2, bits=2)).decrypt(), a + 2)  # a scalar broadcasts over a batch


def test_lookups_and_comparisons(ctx, batch):
    a, b, x, y = batch
    sq = (x + 4 * y).apply(lambda v: (v >> 2) * (v % 4))  # the product of two 2-bit values, one bootstrap
    assert np.array_equal(sq.decrypt(), a * b) and sq.range == (0, 9)
    table = np.arange(16)[::-1]
    r = x.apply(table)
    assert np.array_equal(r.decrypt(), 15 - a) and r.range == (12, 15)
    for name, got, want in (("x < y", x < y, a < b), ("x <= y", x <= y, a <= b), ("x > y", x > y, a > b),
                            ("x >= y", x >= y, a >= b), ("x < 2", x < 2, a < 2), ("2 < x", 2 < x, 2 < a),
                            ("x >= 3", x >= 3, a >= 3), ("x == y", x == y, a == b), ("x != y", x != y, a != b),
                            ("x == 2", x == 2, a == 2), ("1 != x", 1 != x, a != 1)):
        assert np.array_equal(got.decrypt(), want.astype(np.int64)), name
        assert got.range[0] >= 0 and got.range[1] <= 1


def test_what_lookup_integers_lack_is_refused(ctx, batch):
    """Operators that are lookups here raise TypeError pointing to apply (before: Python's bare messages), and
    np.asarray refuses instead of wrapping the value in an object array."""
    _, _, x, y = batch
    for what, op in {"abs(x)": lambda: abs(x), "//": lambda: x // 2, "%": lambda: 7 % x, "/": lambda: x / y,
                     "**": lambda: x ** 2, "&": lambda: x & y, "~": lambda: ~x, "<<": lambda: x << 1,
                     "@": lambda: x @ y}.items():
        with pytest.raises(TypeError, match=rf"^{re.escape(what)} is not an operator of lookup-table integers: .*"
                           r"x\.apply"):
            op()
    with pytest.raises(TypeError, match="not a NumPy array"):
        np.asarray(x)
    with pytest.raises(TypeError, match="compared with an int or another encrypted integer, got float"):
        x == 1.5  # noqa: B015 - the comparison raises


def test_overflow_is_refused_with_the_bound(ctx, batch):
    """Linear operations are exact mod 2^(p+1), as in a compiled circuit: an intermediate value may leave [0, 2^p)
    (x - y + 3 is fine), but decrypting, serializing or bootstrapping one that may be outside is refused, naming its
    interval."""
    a, b, x, y = batch
    assert np.array_equal((x - y + 3).decrypt(), a - b + 3)
    z = ctx.encrypt(np.zeros(16, dtype=int))  # 4 bits: [0, 15]
    for op, bound in ((lambda: z + z, r"reach 30, beyond the 4-bit message space \[0, 15\]"),
                      (lambda: z * 2, r"reach 30"), (lambda: x * 6, r"reach 18"), (lambda: x - y, r"reach -3, below"),
                      (lambda: -x, r"reach -3"), (lambda: z + 1, r"reach 16"), (lambda: z + np.arange(16), "reach 30")):
        value = op()
        for use, what in ((value.decrypt, "decrypt"), (value.serialize, "serialize"),
                          (lambda v=value: v.apply(lambda m: m), r"x.apply\(table\)")):
            with pytest.raises(ParameterError, match=f"{what}: the value may {bound}") as e:
                use()
            assert ".apply(" in str(e.value)
    assert np.array_equal(z.apply(lambda v: 2 * v).decrypt(), np.zeros(16))  # tables are taken mod 2^p
    with pytest.raises(ParameterError, match="table has 4 entries; it must cover"):
        z.apply([0, 1, 2, 3])
    with pytest.raises(ParameterError, match=r"x < y: x - y spans \[-15, 15\]"):
        z < ctx.encrypt(np.ones(16, dtype=int))  # noqa: B015 - the comparison raises
    with pytest.raises(TypeError, match="pack them and apply a table"):
        x * y


def test_noise_budget():
    """The budget is the circuit compiler's; a value whose noise exceeds it is refused (P4 allows 393 bootstraps'
    worth, the insecure test set far more, so a loaded value with a stated noise stands in)."""
    from crossfhe.api.tfhe_lower import noise_budget as compiler_budget

    for params in crossfhe.presets.tfhe.PRESETS.values():
        assert noise_budget(params) == compiler_budget(params), params.name
    assert noise_budget(crossfhe.presets.tfhe.P4) == 393
    x, y = Bound.source(0, 1), Bound.source(0, 1)
    assert (x.scaled(15) + y.scaled(-15) + 15).noise == 450  # beyond P4's 393: refused there


def test_noise_beyond_budget_is_refused(ctx):
    x = ctx.encrypt(1, bits=1)
    c = fmt.unpack(x.serialize())
    budget = noise_budget(P)
    blob = fmt.pack(c.kind, {**c.fields, "integer": {"lo": 0, "hi": 1, "noise": budget}}, c.arrays)
    y = EncryptedInt.load(ctx, blob)
    assert y.bound.noise == budget and (y + 1).decrypt() == 2
    for use in (lambda: (y + x).decrypt(), lambda: (y + x).apply(lambda m: m)):
        with pytest.raises(ParameterError, match=rf"the value's noise is {budget + 1} times a bootstrap's"):
            use()
    bad = fmt.pack(c.kind, {**c.fields, "integer": {"lo": 0, "hi": 1, "noise": budget + 1}}, c.arrays)
    with pytest.raises(ValueError, match="bound is invalid"):
        EncryptedInt.load(ctx, bad)


def test_encrypt_errors(ctx):
    for values, bits, match in ((16, None, r"\[0, 15\] \(4 bits\), got values in \[16, 16\]"),
                                (4, 2, r"\[0, 3\] \(2 bits\)"), (-1, None, "add an offset"),
                                (1, 5, r"bits must be an int in \[1, 4\]")):
        with pytest.raises(ParameterError, match=match):
            ctx.encrypt(values, bits=bits)
    for values in (1.5, True, ["a"]):
        with pytest.raises(TypeError, match="integers"):
            ctx.encrypt(values)
    with pytest.raises(TypeError, match="truth value"):
        bool(ctx.encrypt(1) < 2)
    with pytest.raises(InsecureParametersError, match="insecure=True"):
        TFHEContext.create(P)


def test_other_context_refused(ctx):
    other = TFHEContext.create(P, seed=bytes(range(2, 34)), insecure=True)
    x, y = ctx.encrypt(1, bits=2), other.encrypt(1, bits=2)
    for op in (lambda: x + y, lambda: x - y, lambda: x < y, lambda: ctx.decrypt(y),
               lambda: EncryptedInt.load(ctx, y.serialize())):
        with pytest.raises(KeyMismatchError, match="different contexts"):
            op()


def test_repr_is_short(ctx, batch):
    x = batch[2]
    assert repr(x) == "EncryptedInt(bits=4, range=[0, 3], batch=(16,))"
    assert repr(ctx.encrypt(3)) == "EncryptedInt(bits=4, range=[0, 15])"
    for text in (repr(x + x), repr(ctx), repr(ctx.public)):
        assert len(text) < 120 and str(P.moduli[0]) not in text


def test_decrypt_at_owner_only_and_pickling(ctx):
    x = ctx.encrypt(3, bits=2)
    y = (x * 3 + 1).apply(lambda v: v // 2)
    assert y.decrypt() == 5
    data = pickle.dumps(y)
    ck = ctx.secret_key
    for secret in (np.asarray(ck.glwe_key).tobytes(), np.asarray(ck.lwe_key).tobytes()):
        assert secret not in data
    back = pickle.loads(data)
    with pytest.raises(ParameterError, match=r"no key owner.*ctx.decrypt\(x\)"):
        back.decrypt()
    assert ctx.decrypt(back) == 5 and back.range == y.range
    with pytest.raises(SecretMaterialError, match="refusing to pickle a TFHEContext"):
        pickle.dumps(ctx)
    server = pickle.loads(pickle.dumps(ctx.public))  # the evaluator's side
    z = EncryptedInt.load(server, x.serialize()) + 1
    with pytest.raises(ParameterError, match="no key owner"):
        z.decrypt()
    for op in (lambda: server.decrypt(z), lambda: server.encrypt(1)):
        with pytest.raises(ParameterError, match="secret"):
            op()
    assert ctx.decrypt(z) == 4


def test_serialize_round_trips(ctx):
    x = ctx.encrypt(6, bits=3) + 2
    blob = x.serialize()
    assert io.kind_of(blob) == "tfhe.integer"
    public = TFHEPublicContext.load(ctx.public.serialize())
    assert public.key_id == ctx.key_id
    y = EncryptedInt.load(public, blob)
    assert y.range == x.range == (2, 9) and ctx.decrypt(y) == 8
    with pytest.raises(ParameterError, match="no key owner"):
        y.decrypt()
    assert ctx.decrypt(y.apply(lambda v: 15 - v)) == 7  # the loaded server key bootstraps
    assert EncryptedInt.load(ctx, blob).decrypt() == 8  # loaded by the key owner
    assert ctx.decrypt(io.loads(io.dumps(x), context=public)) == 8
    with pytest.raises(ValueError, match="encrypted TFHE integer: load it with"):
        io.loads(blob)
    with pytest.raises(ValueError):
        EncryptedInt.load(public, blob[:-1])
