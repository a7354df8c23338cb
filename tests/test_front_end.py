"""The one front end: each operation of each scheme gives the same words eagerly, inside a user's jax.jit and vmap,
and inside a compiled circuit (the same primitive, bookkeeping rule and kernel); an eager operation dispatches one
executable; NumPy's habits on the value classes; errors in the user's terms."""

from __future__ import annotations

import re

import jax
import numpy as np
import pytest

import crossfhe
import crossfhe.api as fhe
from crossfhe.errors import ParameterError
from crossfhe.testing import INSECURE_BFV_N256, INSECURE_CKKS_N10, INSECURE_TFHE_P4


@pytest.fixture(scope="module")
def ckks():
    return crossfhe.CKKSContext.create(INSECURE_CKKS_N10, rotations=[1, 3], conjugation=True, seed=bytes(32),
                                       insecure=True, progress=None)


@pytest.fixture(scope="module")
def bfv():
    return crossfhe.BFVContext.create(INSECURE_BFV_N256, rotations=[1, 3], seed=bytes(32), insecure=True,
                                      progress=None)


@pytest.fixture(scope="module")
def tfhe():
    return crossfhe.TFHEContext.create(INSECURE_TFHE_P4, seed=bytes(32), insecure=True, progress=None)


A = np.linspace(-0.9, 0.8, 8)
B = np.cos(np.arange(8)) / 2
CKKS_OPS = {
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "neg": lambda x, y: -x,
    "add_scalar": lambda x, y: x + 0.25,
    "add_plain": lambda x, y: x + B,
    "mul": lambda x, y: x * y,
    "mul_int": lambda x, y: x * 3,
    "mul_scalar": lambda x, y: x * 0.5,
    "mul_plain": lambda x, y: x * B,
    "rotate": lambda x, y: x.rotate(3),
    "conjugate": lambda x, y: x.conjugate(),
    "sum": lambda x, y: x.sum(),
    "square_then_add": lambda x, y: x * x + y,  # operands at two levels: the eager rules align them
}
BFV_OPS = {
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "neg": lambda x, y: -x,
    "add_scalar": lambda x, y: x + 5,
    "add_plain": lambda x, y: x + np.arange(8),
    "mul": lambda x, y: x * y,
    "mul_int": lambda x, y: x * 7,
    "mul_plain": lambda x, y: x * np.arange(8),
    "rotate": lambda x, y: x.rotate(3),
    "sum": lambda x, y: x.sum(),
}
TFHE_OPS = {
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y + 4,
    "neg": lambda x, y: 8 - x,
    "add_scalar": lambda x, y: x + 3,
    "mul_int": lambda x, y: x * 3,
    "lookup": lambda x, y: x.apply(lambda m: (m * m) % 16),
}


def _words(v):
    return [np.asarray(a) for a in jax.tree_util.tree_leaves(v)]


def _same(a, b, name):
    wa, wb = _words(a), _words(b)
    assert len(wa) == len(wb), name
    for p, q in zip(wa, wb, strict=True):
        assert p.shape == q.shape and np.array_equal(p, q), name


@pytest.mark.parametrize("name", list(CKKS_OPS))
def test_ckks_eager_equals_user_jit_and_vmap(ckks, name):
    op = CKKS_OPS[name]
    x, y = ckks.encrypt(A), ckks.encrypt(B)
    eager = op(x, y)
    _same(eager, jax.jit(op)(x, y), name)
    xs = jax.tree_util.tree_map(lambda a: np.stack([a, a]), x)
    ys = jax.tree_util.tree_map(lambda a: np.stack([a, a]), y)
    batched = jax.vmap(op)(xs, ys)
    _same(jax.tree_util.tree_map(lambda a: a[1], batched), eager, name)


@pytest.mark.parametrize("name", list(BFV_OPS))
def test_bfv_eager_equals_user_jit(bfv, name):
    op = BFV_OPS[name]
    x, y = bfv.encrypt(np.arange(8) * 11), bfv.encrypt(np.arange(8)[::-1] * 3)
    _same(op(x, y), jax.jit(op)(x, y), name)


@pytest.mark.parametrize("name", list(TFHE_OPS))
def test_tfhe_eager_equals_user_jit(tfhe, name):
    op = TFHE_OPS[name]
    x, y = tfhe.encrypt(np.arange(4), bits=2), tfhe.encrypt(np.array([3, 1, 2, 0]), bits=2)
    eager = op(x, y)
    _same(eager, jax.jit(op)(x, y), name)
    assert np.array_equal(tfhe.decrypt(eager), tfhe.decrypt(jax.jit(op)(x, y)))


def _circuit_words(ctx, op, spec, x, y, params):
    """``op`` compiled without the optimizing passes (the eager rules), run on the eager values' own words (y is an
    output too, so that both inputs sit at the top level, where the eager values are)."""
    c = fhe.compile(lambda x, y: (op(x, y), y), spec, spec, params=params, optimize=False, cache=False)
    ins = [fhe.Encrypted(tuple(_words(v)), (), v.ct.key_id, c.digest, i, False) for i, v in enumerate((x, y))]
    keys = ctx.public.runtime_keys if hasattr(ctx.public, "runtime_keys") else ctx.keys
    return c.run(*ins, keys=keys)[0].leaves


@pytest.mark.parametrize("name", [n for n in CKKS_OPS if n not in ("square_then_add",)])
def test_ckks_eager_equals_circuit(ckks, name):
    x, y = ckks.encrypt(A), ckks.encrypt(B)
    eager = CKKS_OPS[name](x, y)
    got = _circuit_words(ckks, CKKS_OPS[name], fhe.CKKSVector(8), x, y, ckks.params)
    for p, q in zip(_words(eager), got, strict=True):
        assert np.array_equal(p, np.asarray(q)), name


@pytest.mark.parametrize("name", list(BFV_OPS))
def test_bfv_eager_equals_circuit(bfv, name):
    x, y = bfv.encrypt(np.arange(8) * 11), bfv.encrypt(np.arange(8)[::-1] * 3)
    eager = BFV_OPS[name](x, y)
    got = _circuit_words(bfv, BFV_OPS[name], fhe.BFVVector(8), x, y, bfv.params)
    for p, q in zip(_words(eager), got, strict=True):
        assert np.array_equal(p, np.asarray(q)), name


@pytest.mark.parametrize("name", list(TFHE_OPS))
def test_tfhe_eager_equals_circuit(tfhe, name):
    x, y = tfhe.encrypt(np.arange(4), bits=2), tfhe.encrypt(np.array([3, 1, 2, 0]), bits=2)
    eager = TFHE_OPS[name](x, y)
    c = fhe.compile(TFHE_OPS[name], fhe.TFHEInt(2), fhe.TFHEInt(2), params=tfhe.params, optimize=False, cache=False)
    ins = [fhe.Encrypted(tuple(_words(v)), (4,), v.ct.key_id, c.digest, i, False) for i, v in enumerate((x, y))]
    got = c.run(*ins, keys=tfhe.public.keys)[0].leaves
    for p, q in zip(_words(eager), got, strict=True):
        assert np.array_equal(p, np.asarray(q)), name


@pytest.mark.parametrize("name", ["add", "mul", "mul_scalar", "add_plain", "rotate"])
def test_an_eager_operation_is_one_program(ckks, count_programs, name):
    """An eager operation, its bookkeeping (level alignment, relinearization, rescale) included, is one call of one
    compiled program once its program is made (another constant is encoded, not recompiled)."""
    x, y = ckks.encrypt(A), ckks.encrypt(B)
    CKKS_OPS[name](x, y)
    count_programs.calls.clear()
    CKKS_OPS[name](x, y)
    assert len(count_programs.calls) == 1, count_programs.calls
    if name == "mul_scalar":  # another constant: the same program
        count_programs.calls.clear()
        x * 0.125
        assert len(count_programs.calls) == 1, count_programs.calls


def test_eager_constants_are_kept_by_value_within_their_budget(monkeypatch):
    """An eager operation's encoded constants are kept by value: the same plaintext again is not encoded again and
    gives the same words, another one its own product; the kept encodings stay within eager.CONSTANT_BYTES, the
    least recently used dropped first; a context's are dropped with it."""
    import gc

    from crossfhe.api import ckks_lower, eager

    ctx = crossfhe.CKKSContext.create(INSECURE_CKKS_N10, seed=bytes(32), insecure=True, progress=None)
    encodings = []
    real = ckks_lower.constants
    monkeypatch.setattr(ckks_lower, "constants", lambda *a, **k: encodings.append(1) or real(*a, **k))
    x = ctx.encrypt(A)
    first = x * B  # the program's first call (its runtime is made with the graph's constants too)
    made = len(encodings)
    again = x * B
    assert len(encodings) == made  # kept
    _same(first, again, "mul_plain kept")
    other = x * (B + 0.25)
    assert len(encodings) == made + 1
    assert np.abs(ctx.decrypt(other) - A * (B + 0.25)).max() < 1e-3  # CKKS_N10's precision at one product
    assert np.abs(ctx.decrypt(again) - A * B).max() < 1e-3
    mine = [k for k in eager._CONSTANTS if k[0][1] == id(ctx.public.runtime_keys)]
    size = eager._CONSTANTS[mine[0]][2]
    assert size > 0 and len(mine) == 2
    monkeypatch.setattr(eager, "CONSTANT_BYTES", 2 * size)  # room for two plaintexts' words
    for c in (0.5, 0.75, 1.5):
        x * (B * c)
        assert eager._CONSTANT_BYTES[0] <= 2 * size
    assert len(encodings) == made + 4
    x * (B * 0.75)  # among the two most recent: kept
    assert len(encodings) == made + 4
    x * B  # dropped by the budget: encoded again
    assert len(encodings) == made + 5
    key_id = id(ctx.public.runtime_keys)
    del ctx, x, first, again, other
    gc.collect()
    assert not [k for k in eager._CONSTANTS if k[0][1] == key_id]


@pytest.mark.parametrize("scheme", ["ckks", "bfv"])
def test_roll_takes_the_cheaper_second_rotation(scheme, ckks, bfv, count_programs):
    """rotate on a length that is not a power of two: the tail rotation is made from the head where that takes
    fewer key switches. 84 values (width 128), by 1, with the power-of-two keys: the head is one key switch, the
    tail x by 1 - 84 = 45 mod 128 (four set bits: 5 rotations in all) or the head by 128 - 84 = 44 (three): 4
    rotations in all, and the values are np.roll's."""
    ctx = ckks if scheme == "ckks" else bfv
    n = 84
    a = np.linspace(-0.9, 0.8, n) if scheme == "ckks" else np.arange(n) % 17
    x = ctx.encrypt(a)
    count_programs.calls.clear()
    y = x.rotate(1)
    rotations = [c for c in count_programs.calls if "rotate" in c]
    assert len(rotations) == 4, count_programs.calls
    if scheme == "ckks":
        assert np.abs(ctx.decrypt(y) - np.roll(a, -1)).max() < 1e-3  # CKKS_N10 after a mask product
    else:
        assert np.array_equal(ctx.decrypt(y), np.roll(a, -1))


def test_numpy_habits_on_ckks(ckks):
    x = ckks.encrypt(A)
    tol = 1e-3
    assert np.abs(ckks.decrypt(x / 2) - A / 2).max() < tol
    assert np.abs(ckks.decrypt(x ** 2) - A ** 2).max() < tol
    assert np.abs(ckks.decrypt(x[3]) - A[3]).max() < tol and len(x[3]) == 1
    assert np.abs(ckks.decrypt(x[2:5]) - A[2:5]).max() < tol and len(x[2:5]) == 3
    assert np.abs(ckks.decrypt(x[-1]) - A[-1]).max() < tol
    assert np.abs(ckks.decrypt(np.sum(x, axis=0)) - A.sum()).max() < tol
    assert np.abs(ckks.decrypt(np.mean(x)) - A.mean()).max() < tol
    assert np.abs(ckks.decrypt(np.dot(x, B)) - A @ B).max() < tol
    assert np.abs(ckks.decrypt(np.matmul(x, ckks.encrypt(B))) - A @ B).max() < tol
    assert np.abs(ckks.decrypt(np.roll(x, 2)) - np.roll(A, 2)).max() < tol
    mask = np.arange(8) % 2 == 0
    assert np.abs(ckks.decrypt(np.where(mask, x, 0.5 * x)) - np.where(mask, A, 0.5 * A)).max() < tol
    assert np.abs(ckks.decrypt(np.add(B, x)) - (A + B)).max() < tol
    five = ckks.encrypt(A[:5])  # any length rotates as np.roll does
    for k in (1, 3, -2):
        assert np.abs(ckks.decrypt(five.rotate(k)) - np.roll(A[:5], -k)).max() < tol, k
    with pytest.raises(IndexError, match="out of range"):
        x[8]
    with pytest.raises(TypeError, match="step 1"):
        x[::2]
    with pytest.raises(TypeError, match="numpy.exp .* what exists"):
        np.exp(x)
    with pytest.raises(TypeError, match="numpy.sort is not defined on encrypted vectors; what exists"):
        np.sort(x)
    with pytest.raises(ValueError, match="one axis"):
        np.sum(x, axis=1)
    with pytest.raises(TypeError, match="SchemeSwitch"):
        x > 0  # noqa: B015 - the comparison raises
    with pytest.raises(TypeError, match="division by an encrypted value"):
        1 / x
    with pytest.raises(ZeroDivisionError):
        x / 0


def test_numpy_habits_on_bfv(bfv):
    v = np.arange(8) * 5
    x = bfv.encrypt(v)
    t = bfv.params.t
    assert np.array_equal(x[2].decrypt(), [v[2]]) and np.array_equal(x[1:4].decrypt(), v[1:4])
    assert np.array_equal(np.sum(x).decrypt(), [v.sum() % t])
    assert np.array_equal((x ** 3).decrypt(), v ** 3 % t)
    assert np.array_equal(np.roll(x, -3).decrypt(), np.roll(v, -3))
    with pytest.raises(TypeError, match="modular inverse"):
        x / 2
    with pytest.raises(TypeError, match="mean: BFV holds integers"):
        np.mean(x)
    with pytest.raises(TypeError, match="comparisons of BFV vectors"):
        x > 1  # noqa: B015 - the comparison raises


@pytest.mark.parametrize("scheme", ["ckks", "bfv"])
def test_what_vectors_lack_is_refused_not_answered(scheme, ckks, bfv):
    """NumPy operators with no encrypted counterpart raise TypeError naming what exists. Before, x == 1 answered
    False (Python's identity comparison: a silently wrong result), np.asarray(x) failed inside NumPy and abs, // or &
    gave Python's bare message."""
    ctx = ckks if scheme == "ckks" else bfv
    x = ctx.encrypt(np.arange(8) % 3)
    refusals = {"==": lambda: x == 1, "!=": lambda: x != x, "abs(x)": lambda: abs(x), "//": lambda: x // 2,
                "%": lambda: 3 % x, "&": lambda: x & 1, "|": lambda: 1 | x, "^": lambda: x ^ x, "~": lambda: ~x,
                "<<": lambda: x << 1, ">>": lambda: x >> 1, "divmod": lambda: divmod(x, 2)}
    for what, op in refusals.items():
        with pytest.raises(TypeError, match=rf"^{re.escape(what)} is not defined on encrypted vectors: .*; what "
                           "exists: \\+ - \\*"):
            op()
    for op in (lambda: np.asarray(x), lambda: float(x[0]), lambda: int(x[0]), lambda: complex(x), lambda: round(x)):
        with pytest.raises(TypeError, match="not a number nor a NumPy array .* decrypt it first"):
            op()
    with pytest.raises(TypeError, match="can't multiply sequence"):  # no __index__: Python's own message
        "a" * x
    assert x in [x] and len({x, x}) == 1  # identity still works where Python uses it
    assert (x.shape, x.ndim, x.size) == ((8,), 1, 8) and x.dtype == ctx.decrypt(x).dtype
    if scheme == "ckks":  # CKKS encrypts a batch of vectors at once, BFV one vector
        batch = ctx.encrypt(np.ones((3, 5)))
        assert (batch.shape, batch.ndim, batch.size) == ((3, 5), 2, 15) == (ctx.decrypt(batch).shape, 2, 15)
        z = ctx.encrypt(np.array([1 + 2j, 3]))
        assert z.dtype == ctx.decrypt(z).dtype == np.complex128


def test_depth_errors_say_what_fits(ckks):
    """Exceeding the depth eagerly names the depth the expression needs, the parameters' and what fits."""
    x = ckks.encrypt(A)
    for _ in range(INSECURE_CKKS_N10.levels):
        x = x * x
    with pytest.raises(ParameterError) as e:
        x * x
    text = str(e.value)
    assert f"needs multiplicative depth {INSECURE_CKKS_N10.levels + 1}" in text and "test_front_end.py:" in text
    assert f"have {INSECURE_CKKS_N10.levels} levels" in text and "N13_L3" not in text and "N14_L7 (7)" in text
    assert "bootstrap=True" in text and "N16_BOOT_L3" in text


def test_tfhe_lenient_in_between_and_checked_where_read(tfhe):
    """As in a compiled circuit, linear operations are exact mod 2^(p+1): x - y + 8 works eagerly; a value that may
    leave [0, 2^p) is refused where a bootstrap or decryption reads it."""
    a, b = np.arange(8) % 4, np.arange(8)[::-1] % 4
    x, y = tfhe.encrypt(a, bits=2), tfhe.encrypt(b, bits=2)
    assert np.array_equal(tfhe.decrypt(x - y + 8), a - b + 8)
    with pytest.raises(ParameterError, match=r"decrypt: the value may reach -3, below"):
        tfhe.decrypt(x - y)
    with pytest.raises(ParameterError, match=r"x.apply\(table\): the value may reach -3"):
        (x - y).apply(lambda m: m)


def test_circuit_value_with_words_out_of_range_is_refused(ckks):
    """A circuit value whose residue words were set to q, resealed with a valid digest, is refused where it is read
    (the circuit knows the moduli), not decrypted to garbage."""
    from crossfhe.io import format as fmt

    c = fhe.compile(lambda x: x * 2.0, fhe.CKKSVector(8), params=ckks.params, cache=False)
    c.keygen(seed=bytes(32))
    (x,) = c.encrypt(A)
    blob = x.serialize()
    box = fmt.unpack(blob)
    leaf = np.array(box.arrays["leaf0"])
    leaf[0, 5] = c.params.moduli_at(c.graph.nodes[c.graph.inputs[0]].attr("level"))[0]
    bad = fmt.pack(box.kind, box.fields, {**box.arrays, "leaf0": leaf})
    loaded = fhe.Encrypted.load(bad)  # the layout is fine: checked against the circuit where it is used
    for use in (lambda: c.run(loaded), lambda: c.load_value(bad)):
        with pytest.raises(crossfhe.SerializationError, match=r"leaf0.*not in \[0, q\)"):
            use()
    assert np.abs(c.decrypt(*c.run(c.load_value(blob))) - 2 * A).max() < 1e-3


def test_run_without_a_relinearization_key_says_so(ckks):
    import dataclasses

    c = fhe.compile(lambda x, y: x * y, fhe.CKKSVector(8), fhe.CKKSVector(8), params=ckks.params, cache=False)
    c.keygen(seed=bytes(32))
    no_relin = dataclasses.replace(c.keys.public, relin=None)
    with pytest.raises(ParameterError, match="no relinearization key"):
        c.run(*c.encrypt(A, B), keys=no_relin)


def test_exported_circuit_header_edits_are_refused(tmp_path, ckks):
    """Header edits of an exported circuit, resealed, raise SerializationError, never a JSON or attribute error."""
    import hashlib
    import json
    import struct

    c = fhe.compile(lambda x: x + 1.0, fhe.CKKSVector(8), params=ckks.params, cache=False)
    c.keygen(seed=bytes(32))
    path = c.export(tmp_path / "c.circuit")
    data = path.read_bytes()
    nh, nb = struct.unpack("<QQ", data[8:24])
    header = json.loads(data[24:24 + nh])
    body = data[24 + nh:24 + nh + nb]
    edits = [("graph", {"nodes": 3}), ("graph", "x"), ("specs", [{"type": "Nope"}]), ("batch_shape", [-1]),
             ("digest", "zz"), ("params", 5), ("extra", 1)]
    for key, value in edits:
        head = json.dumps({**header, key: value}).encode()
        out = data[:8] + struct.pack("<QQ", len(head), nb) + head + body
        (tmp_path / "bad.circuit").write_bytes(out + hashlib.sha256(out).digest())
        with pytest.raises(crossfhe.SerializationError):
            fhe.load(tmp_path / "bad.circuit", ckks.params)
    broken = bytearray(data)
    broken[24 + nh + 10] ^= 0xFF
    out = bytes(broken[:-32])
    (tmp_path / "bad.circuit").write_bytes(out + hashlib.sha256(out).digest())
    with pytest.raises(crossfhe.SerializationError):
        fhe.load(tmp_path / "bad.circuit", ckks.params)


def test_old_names_warn_and_still_work(tfhe):
    """One vocabulary (docs/vocabulary.md): the old names keep working for one release, each with a
    DeprecationWarning naming its replacement."""
    import importlib
    import sys

    from crossfhe.ckks import ops as C
    from crossfhe.linalg import diagonal, hmvp
    from crossfhe.math.random import seed_key
    from crossfhe.tfhe import ops as T

    x = T.encrypt(tfhe.secret_key, np.arange(4), key=seed_key(bytes(32)))
    cases = [
        (lambda: tfhe.client_key, tfhe.secret_key, "TFHEContext.secret_key"),
        (lambda: tfhe.server_key, tfhe.keys, "TFHEContext.keys"),
        (lambda: tfhe.public.server_key, tfhe.public.keys, "TFHEPublicContext.keys"),
        (lambda: C.galois_element(INSECURE_CKKS_N10, 3), C.rotation_element(INSECURE_CKKS_N10, 3), "rotation_element"),
        (lambda: hmvp.EncryptedVector, hmvp.CoefficientVector, "hmvp.CoefficientVector"),
        (lambda: diagonal.EncryptedVector, diagonal.SlotChunks, "diagonal.SlotChunks"),
    ]
    for old, new, name in cases:
        with pytest.warns(DeprecationWarning, match=name):
            assert old() is new or old() == new
    for old, new in ((T.add_const, T.add_scalar), (T.mul_const, T.mul_scalar)):
        with pytest.warns(DeprecationWarning, match=new.__name__):
            got = old(tfhe.params, x, 3)
        assert np.array_equal(np.asarray(got.b), np.asarray(new(tfhe.params, x, 3).b))
    with pytest.warns(DeprecationWarning, match="key="):
        again = T.encrypt(tfhe.secret_key, np.arange(4), seed_key(bytes(32)))
    assert np.array_equal(np.asarray(again.b), np.asarray(x.b))
    sys.modules.pop("crossfhe.compiler", None)
    with pytest.warns(DeprecationWarning, match="crossfhe.compiler is deprecated"):
        compiler = importlib.import_module("crossfhe.compiler")
    assert compiler.compile is fhe.compile and compiler.tfhe is fhe.tfhe_lower
