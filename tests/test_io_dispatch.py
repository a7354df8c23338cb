"""crossfhe.io.dumps / loads dispatch on the object's type and the blob's kind, for every scheme: the blob is
the scheme module's own (no second serializer), the round trip gives the object back, the api's vectors and
public contexts go through it, unsupported types, missing parameters or contexts and secret keys are refused
with errors that say what to do, and malformed blobs get the container's errors.

Blobs are edited with the helpers of tests/test_io.py (written from the byte layout, not from the code).
"""

import os

import numpy as np
import pytest
from test_io import flip, reseal, split_blob

from crossfhe import CKKSContext, CKKSPublicContext, EncryptedVector, io
from crossfhe.bfv import ops as bfv
from crossfhe.ckks import ops as ckks
from crossfhe.core.keys import PublicKey
from crossfhe.errors import SerializationError
from crossfhe.io import registry
from crossfhe.linalg import hmvp
from crossfhe.math.random import seed_key
from crossfhe.testing import (
    INSECURE_BFV_N256,
    INSECURE_CKKS_N10,
    INSECURE_CKKS_N11_COMPOSITE,
    INSECURE_TFHE_P2,
    INSECURE_TFHE_P4,
)
from crossfhe.tfhe import ops as tfhe

CP, BP, TP = INSECURE_CKKS_N10, INSECURE_BFV_N256, INSECURE_TFHE_P2


# --------------------------------------------------------------------------------------------------
# Fixtures: one object of each kind
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ckks_objects():
    sk, ek = ckks.keygen(CP, rotations=[1], seed=bytes(32))
    pt = ckks.encode(CP, np.linspace(-1, 1, CP.slots))
    ct = ckks.encrypt(ek, pt, key=seed_key(bytes(range(32))))
    return sk, ek, pt, ct


@pytest.fixture(scope="module")
def bfv_objects():
    sk, ek = bfv.keygen(BP, rotations=[1], seed=b"bfv-dispatch".ljust(32, b"\0"))
    pt = bfv.encode(BP, np.arange(BP.n) % BP.t)
    ct = bfv.encrypt(ek, pt, key=seed_key(bytes(range(32))))
    vec = hmvp.encrypt_vector(ek, BP, np.arange(300) % BP.t, key=seed_key(bytes(32)))
    return sk, ek, pt, ct, vec


@pytest.fixture(scope="module")
def tfhe_objects():
    ck, sk = tfhe.keygen(TP, b"tfhe-dispatch".ljust(32, b"\0"))
    ct = tfhe.encrypt(ck, np.array([1, 0, 1]), key=bytes(range(32)))
    return ck, sk, ct


@pytest.fixture(scope="module")
def api_ctx():
    return CKKSContext.create(CP, seed=b"api-dispatch".ljust(32, b"\0"), insecure=True)


def round_trip(obj, module, *, params=None, kind):
    """io.dumps gives the scheme module's own blob of ``kind``; io.loads gives back an object of the same
    type that serializes to the same bytes (bit-exact)."""
    blob = io.dumps(obj, params=params)
    assert blob == module.dumps(obj, params=params)
    assert io.kind_of(blob) == kind
    back = io.loads(blob)
    assert type(back) is type(obj)
    assert io.dumps(back, params=params) == blob
    return back


# --------------------------------------------------------------------------------------------------
# Round trips, every scheme
# --------------------------------------------------------------------------------------------------


def test_ckks_round_trips(ckks_objects):
    _, ek, pt, ct = ckks_objects
    assert round_trip(CP, io.ckks, kind="ckks.params") == CP
    round_trip(pt, io.ckks, kind="ckks.plaintext")
    assert round_trip(ct, io.ckks, kind="ckks.ciphertext").key_id == ct.key_id
    round_trip(ek, io.ckks, kind="ckks.evaluation_keys")
    round_trip(ek.public, io.ckks, params=CP, kind="ckks.public_key")
    assert io.loads(io.dumps(ct), params=CP).params is CP


def test_bfv_round_trips(bfv_objects):
    sk, ek, pt, ct, _ = bfv_objects
    assert round_trip(BP, io.bfv, kind="bfv.params") == BP
    round_trip(pt, io.bfv, kind="bfv.plaintext")
    back = round_trip(ct, io.bfv, kind="bfv.ciphertext")
    assert np.array_equal(bfv.decode(bfv.decrypt(sk, back)), bfv.decode(bfv.decrypt(sk, ct)))
    round_trip(ek, io.bfv, kind="bfv.evaluation_keys")
    round_trip(ek.public, io.bfv, params=BP, kind="bfv.public_key")


def test_tfhe_round_trips(tfhe_objects):
    ck, sk, ct = tfhe_objects
    assert round_trip(TP, io.tfhe, kind="tfhe.params") == TP
    back = round_trip(ct, io.tfhe, params=TP, kind="tfhe.ciphertext")
    assert np.array_equal(np.asarray(tfhe.decrypt(ck, back)), [1, 0, 1])
    round_trip(sk, io.tfhe, kind="tfhe.server_key")


def test_hmvp_vector_round_trip(bfv_objects):
    vec = bfv_objects[4]
    blob = io.dumps(vec)
    assert blob == io.bfv.dumps_hmvp_vector(vec) and io.kind_of(blob) == "bfv.hmvp_vector"
    back = io.loads(blob)
    assert isinstance(back, hmvp.CoefficientVector) and back.params is not None and back.params == BP
    width = BP.n // vec.rows_per_product
    assert (back.length, back.key_id, back.rows_per_product) == (300, vec.key_id, vec.rows_per_product)
    assert back.blocks == -(-300 // width)
    assert np.array_equal(np.asarray(back.c0.data), np.asarray(vec.c0.data))
    assert np.array_equal(np.asarray(back.c1.data), np.asarray(vec.c1.data))
    assert io.dumps(back) == blob
    with pytest.raises(SerializationError, match="HMVP encrypted vector: load it with crossfhe.io.loads"):
        io.bfv.loads(blob)
    # A length that does not match the blocks is refused.
    _, header, _, _ = split_blob(blob)
    header["meta"]["length"] = 3 * BP.n
    with pytest.raises(SerializationError, match=rf"expected uint32\[{3 * BP.n // width}, "):
        io.loads(reseal(blob, header=header))


def test_files_round_trip(ckks_objects, tfhe_objects, tmp_path):
    ct, server_key = ckks_objects[3], tfhe_objects[1]
    io.save(ct, tmp_path / "ct.cfhe")
    io.save(server_key, tmp_path / "sk.cfhe")  # streamed by io.tfhe
    io.save(ckks_objects[1].public, tmp_path / "pk.cfhe", params=CP)
    assert (tmp_path / "ct.cfhe").read_bytes() == io.dumps(ct)
    assert (tmp_path / "sk.cfhe").read_bytes() == io.dumps(server_key)
    assert isinstance(io.load(tmp_path / "sk.cfhe"), tfhe.ServerKey)
    assert isinstance(io.load(tmp_path / "pk.cfhe", params=CP), PublicKey)
    assert io.load(tmp_path / "ct.cfhe", expected=type(ct)).key_id == ct.key_id


# --------------------------------------------------------------------------------------------------
# The api's objects
# --------------------------------------------------------------------------------------------------


def test_encrypted_vector_through_io(api_ctx):
    x = api_ctx.encrypt([1.5, -2.0, 0.25])
    blob = io.dumps(x)
    assert blob == x.serialize() and io.kind_of(blob) == "ckks.vector"
    for ctx in (api_ctx, api_ctx.public):
        back = io.loads(blob, context=ctx)
        assert isinstance(back, EncryptedVector) and back.ctx is api_ctx.public
        assert (back.length, back.width, back.complex) == (3, 4, False)
        assert np.max(np.abs(api_ctx.decrypt(back) - [1.5, -2.0, 0.25])) < 1e-5
    assert io.loads(blob, context=api_ctx.public, params=CP, expected=EncryptedVector).length == 3


def test_encrypted_vector_needs_its_context(api_ctx):
    blob = io.dumps(api_ctx.encrypt([1.0]))
    with pytest.raises(SerializationError, match=r"encrypted vector: .*io.loads\(blob, context=ctx\)"):
        io.loads(blob)
    with pytest.raises(SerializationError, match="encrypted vector"):
        io.loads(blob, params=CP)
    other = CKKSContext.create(CP, seed=b"another-context".ljust(32, b"\0"), insecure=True)
    with pytest.raises(ValueError, match="different contexts"):
        io.loads(blob, context=other.public)


def test_public_context_through_io(api_ctx):
    public = api_ctx.public
    blob = io.dumps(public)
    assert blob == public.serialize() and io.kind_of(blob) == "ckks.public_context"
    back = io.loads(blob)
    assert isinstance(back, CKKSPublicContext) and back.key_id == public.key_id
    assert back.rotations == public.rotations and io.dumps(back) == blob
    assert isinstance(io.loads(blob, expected=CKKSPublicContext, params=CP), CKKSPublicContext)
    # Its evaluation keys' blob (how contexts were written before) still loads as a context.
    assert CKKSPublicContext.load(io.dumps(public.keys)).key_id == public.key_id
    with pytest.raises(SerializationError, match="public context: load it with crossfhe.io.loads"):
        io.ckks.loads(blob)
    # A vector loaded under the reloaded context combines with the original.
    x = api_ctx.encrypt([1.0, 2.0])
    y = io.loads(io.dumps(x), context=back)
    assert np.max(np.abs(api_ctx.decrypt(x + y) - [2.0, 4.0])) < 1e-5


# --------------------------------------------------------------------------------------------------
# Refusals
# --------------------------------------------------------------------------------------------------


def test_unsupported_type_refused():
    with pytest.raises(TypeError, match=r"cannot serialize .*dict.*ckks\.ciphertext.*tfhe\.server_key"):
        io.dumps({"a": 1})
    with pytest.raises(TypeError, match="bfv.hmvp_vector"):
        io.save(object(), "never-written.cfhe")
    assert not os.path.exists("never-written.cfhe")
    with pytest.raises(TypeError, match="expected must be"):
        io.loads(io.dumps(CP), expected=dict)


def test_missing_params_refused(ckks_objects, tfhe_objects):
    with pytest.raises(SerializationError, match="params="):
        io.dumps(ckks_objects[1].public)
    with pytest.raises(TypeError, match="ckks.Params or bfv.Params"):
        io.dumps(ckks_objects[1].public, params=TP)
    with pytest.raises(SerializationError, match="params="):
        io.dumps(tfhe_objects[2])
    with pytest.raises(SerializationError, match="differ"):
        io.dumps(ckks_objects[3], params=INSECURE_CKKS_N11_COMPOSITE)


def test_params_of_another_scheme_refused(ckks_objects, bfv_objects):
    with pytest.raises(SerializationError, match="bfv.ciphertext, an object for bfv.Params; params is a ckks.Params"):
        io.loads(io.dumps(bfv_objects[3]), params=CP)
    with pytest.raises(TypeError, match="params must be"):
        io.loads(io.dumps(ckks_objects[3]), params="N10")
    with pytest.raises(SerializationError, match="other parameters"):
        io.loads(io.dumps(TP), params=INSECURE_TFHE_P4)


def test_expected_kinds(ckks_objects, bfv_objects):
    pk_blob = io.dumps(bfv_objects[1].public, params=BP)
    assert isinstance(io.loads(pk_blob, expected=PublicKey), PublicKey)  # either scheme's public key
    with pytest.raises(SerializationError, match="wrong kind: expected ckks.ciphertext, the blob holds bfv.public_key"):
        io.loads(pk_blob, expected=type(ckks_objects[3]))
    with pytest.raises(SerializationError, match="wrong kind"):
        io.loads(pk_blob, expected=("ckks.params", "tfhe.params"))


def test_secret_keys_explicit_only(ckks_objects, bfv_objects, tfhe_objects, api_ctx, tmp_path):
    csk, bsk, ck = ckks_objects[0], bfv_objects[0], tfhe_objects[0]
    for secret, message in ((csk, "dumps_secret_key"), (ck, "dumps_secret_key"),
                            (api_ctx, r"save_secret_key\(ctx.secret_key")):
        with pytest.raises(SerializationError, match=message):
            io.dumps(secret)
        with pytest.raises(SerializationError, match=message):
            io.save(secret, tmp_path / "secret.cfhe")
    assert os.listdir(tmp_path) == []
    # The explicit calls dispatch too: a SecretKey by its params' scheme, a ClientKey by its type.
    for sk, params, kind in ((csk, CP, "ckks.secret_key"), (bsk, BP, "bfv.secret_key")):
        blob = io.dumps_secret_key(sk, params=params)
        assert io.kind_of(blob) == kind
        assert np.array_equal(np.asarray(io.loads_secret_key(blob, params=params).coeffs), np.asarray(sk.coeffs))
        with pytest.raises(SerializationError, match="loads_secret_key"):
            io.loads(blob)
        with pytest.raises(SerializationError, match="params="):
            io.loads_secret_key(blob)
    with pytest.raises(SerializationError, match="params="):
        io.dumps_secret_key(csk)
    with pytest.raises(SerializationError, match="params is a ckks.Params"):
        io.loads_secret_key(io.dumps_secret_key(bsk, params=BP), params=CP)
    io.save_secret_key(ck, tmp_path / "ck.cfhe")
    if os.name == "posix":
        assert os.stat(tmp_path / "ck.cfhe").st_mode & 0o777 == 0o600
    back = io.load_secret_key(tmp_path / "ck.cfhe")
    assert isinstance(back, tfhe.ClientKey) and io.dumps_secret_key(back) == io.dumps_secret_key(ck)
    with pytest.raises(SerializationError, match="wrong kind"):
        io.loads_secret_key(io.dumps(CP), params=CP)
    with pytest.raises(SerializationError, match="loads_secret_key"):
        io.loads(io.dumps(CP), expected=type(csk))


def test_malformed_blobs_get_the_container_errors(ckks_objects):
    blob = io.dumps(ckks_objects[3])
    with pytest.raises(SerializationError, match="truncated"):
        io.loads(blob[:-1])
    with pytest.raises(SerializationError, match="magic"):
        io.loads(b"PK\x03\x04" + blob[4:])
    with pytest.raises(SerializationError, match="SHA-256 mismatch"):
        io.loads(flip(blob, 40))  # inside the header: the hash is checked before the JSON
    with pytest.raises(SerializationError, match="SHA-256 mismatch"):
        io.loads(flip(blob, len(blob) - 100), expected="ckks.params")  # before the kind, too
    with pytest.raises(SerializationError, match="truncated"):
        io.kind_of(blob[:30])
    with pytest.raises(SerializationError, match="SHA-256 mismatch"):  # an unreadable header: the hash first
        io.kind_of(blob[:19] + b"[" + blob[20:])
    _, header, _, _ = split_blob(blob)
    with pytest.raises(SerializationError, match="unknown kind 'ckks.bogus'; crossfhe.io reads"):
        io.loads(reseal(blob, header={**header, "kind": "ckks.bogus"}))
    with pytest.raises(SerializationError, match="SHA-256 mismatch"):
        io.loads(flip(reseal(blob, header={**header, "kind": "ckks.bogus"}), len(blob) - 100))
    with pytest.raises(TypeError, match="expected bytes"):
        io.loads("not bytes")


# --------------------------------------------------------------------------------------------------
# The registration hook
# --------------------------------------------------------------------------------------------------


class Tagged:
    """An object of a layer above io: a CKKS ciphertext with a label that travels beside it (the context)."""

    def __init__(self, ct, label):
        self.ct, self.label = ct, label


def test_registration_hook(ckks_objects, monkeypatch):
    monkeypatch.setattr(registry, "_WRITERS", dict(registry._WRITERS))  # restored after the test
    monkeypatch.setattr(registry, "_READERS", dict(registry._READERS))
    ct = ckks_objects[3]
    io.register_type(Tagged, "test.tagged", lambda t, params: io.ckks.dumps(t.ct), params_of=lambda t: t.ct.params)
    with pytest.raises(SerializationError, match="differ"):
        io.dumps(Tagged(ct, "x"), params=INSECURE_CKKS_N11_COMPOSITE)
    with pytest.raises(SerializationError, match="wrong kind: expected test.tagged"):
        io.loads(io.dumps(Tagged(ct, "x")), expected=Tagged)
    io.register_kind("ckks.ciphertext", lambda blob, params, context: Tagged(io.ckks.loads(blob), context),
                     params=type(CP), context="a tagged ciphertext: pass its label as context=")
    with pytest.raises(SerializationError, match="the blob holds a tagged ciphertext"):
        io.loads(io.dumps(Tagged(ct, "x")))
    back = io.loads(io.dumps(Tagged(ct, "x")), context="y")
    assert isinstance(back, Tagged) and back.label == "y" and back.ct.key_id == ct.key_id


def test_hmvp_vector_layouts_round_trip(bfv_objects):
    """A vector of CHAM's layout (rows_per_product 1) round-trips as such, and a blob written before the meta had
    rows_per_product (no such key) reads as that layout."""
    from crossfhe.io import _common as com
    from crossfhe.io import bfv as iob

    ek = bfv_objects[1]
    vec = hmvp.encrypt_vector(ek, BP, np.arange(300) % BP.t, key=seed_key(bytes(32)), rows_per_product=1)
    back = io.loads(io.dumps(vec))
    assert (back.rows_per_product, back.blocks) == (1, 2)
    arrays = com.pair_arrays(vec.c0, vec.c1, BP.q + BP.p, BP.n)
    old = com.pack(iob.SCHEME, iob.KIND_HMVP_VECTOR, BP, {"length": 300}, arrays)
    back = io.loads(old)
    assert (back.rows_per_product, back.blocks, back.key_id) == (1, 2, None)
    assert np.array_equal(np.asarray(back.c1.data), np.asarray(vec.c1.data))
