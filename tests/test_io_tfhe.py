"""TFHE serialization (crossfhe.io.tfhe): round trips are bit-exact and the keys still work after loading;
the streamed writer lays blobs out exactly as crossfhe.io.format.pack does; truncated, corrupted,
out-of-range, mismatched and other-scheme blobs are refused with a SerializationError naming the problem.

Blobs are edited with the helpers of tests/test_io.py, written from the byte layout in
crossfhe/io/format.py's docstring (not from its code).
"""

import dataclasses
import json
import os
import stat
import tracemalloc

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_io import flip, reseal, split_blob, with_word

from crossfhe import io
from crossfhe.core.lwe import LWECiphertext
from crossfhe.errors import ParameterError, SerializationError
from crossfhe.io import format as fmt
from crossfhe.io import tfhe as tio
from crossfhe.testing import INSECURE_BFV_N256, INSECURE_CKKS_N10, INSECURE_TFHE_P2, INSECURE_TFHE_P4
from crossfhe.tfhe import ops, presets
from crossfhe.tfhe.ops import ClientKey, ServerKey
from crossfhe.tfhe.params import Params

P = INSECURE_TFHE_P2
L, KN, N, K, n = len(P.moduli), P.long_dim, P.poly_size, P.glwe_dim, P.lwe_dim
BSK_SHAPE = (n, (K + 1) * P.pbs_gadget.levels, K + 1, L, N)


# --------------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def keys():
    """(ck, sk, m, ct): keys from a fixed seed, messages int [2, 3] and their encryption."""
    ck, sk = ops.keygen(P, b"tfhe-io-test-seed".ljust(32, b"\0"))
    m = np.arange(6).reshape(2, 3) % 2**P.message_bits
    ct = ops.encrypt(ck, m, key=bytes(range(32)))
    return ck, sk, m, ct


@pytest.fixture(scope="module")
def ct_blob(keys):
    return tio.dumps(keys[3], params=P)


@pytest.fixture(scope="module")
def sk_blob(keys):
    return tio.dumps(keys[1])


def same(x, y) -> bool:
    x, y = np.asarray(x), np.asarray(y)
    return x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)


def same_ct(x: LWECiphertext, y: LWECiphertext) -> bool:
    return x.moduli == y.moduli and same(x.b, y.b) and same(x.a, y.a)


def edited(blob: bytes, edit) -> bytes:
    """The blob with ``edit(header)`` applied to a copy of its header, SHA-256 recomputed."""
    header = json.loads(json.dumps(split_blob(blob)[1]))
    edit(header)
    return reseal(blob, header=header)


def table_entry(blob: bytes, name: str) -> dict:
    return next(e for e in split_blob(blob)[1]["arrays"] if e["name"] == name)


# --------------------------------------------------------------------------------------------------
# Round trips
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("params", [P, INSECURE_TFHE_P4, *presets.PRESETS.values()],
                         ids=lambda p: f"tfhe/{p.name}/p={p.message_bits}/N={p.poly_size}")
def test_params_round_trip(params):
    blob = tio.dumps(params)
    back = tio.loads(blob, expected=Params)
    assert back == params and back.digest() == params.digest() and back.name == params.name
    assert back.glwe_sigma == params.glwe_sigma and back.max_norm2 == params.max_norm2
    assert tio.loads(blob, params=params) is params
    assert tio.params_from_description(tio.describe_params(params)) == params
    header = split_blob(blob)[1]
    assert header["kind"] == "tfhe.params" and header["params"]["moduli"] == list(params.moduli)


def test_ciphertext_round_trip_keeps_batch_and_decrypts(keys, ct_blob):
    ck, _, m, ct = keys
    back = tio.loads(ct_blob, params=P, expected=LWECiphertext)
    assert same_ct(back, ct) and back.batch_shape == (2, 3)
    assert np.array_equal(ops.decrypt(ck, back), m)
    header = split_blob(ct_blob)[1]
    assert header["kind"] == "tfhe.ciphertext" and header["meta"] == {"key_id": ck.key_id}
    assert table_entry(ct_blob, "a")["shape"] == [2, 3, L, KN] and table_entry(ct_blob, "b")["shape"] == [2, 3, L]


@pytest.mark.parametrize("shape", [(), (4,), (1, 2, 1)], ids=["scalar", "batch=4", "batch=1x2x1"])
def test_ciphertext_batch_shapes(keys, shape):
    ck = keys[0]
    m = np.arange(int(np.prod(shape))).reshape(shape) % 4
    ct = ops.encrypt(ck, m, key=bytes(32))
    back = tio.loads(tio.dumps(ct, params=P), params=P)
    assert back.batch_shape == shape and same_ct(back, ct)
    assert np.array_equal(ops.decrypt(ck, back), m)


def test_server_key_round_trip_bootstraps_bit_for_bit(keys, sk_blob):
    ck, sk, m, ct = keys
    back = tio.loads(sk_blob, params=P, expected=ServerKey)
    assert same(back.bsk, sk.bsk) and same(back.ksk, sk.ksk) and back.params == P
    assert back.bsk.shape == BSK_SHAPE and len(sk_blob) < sk.nbytes + 1024
    f = [3, 2, 0, 1]
    want, got = ops.pbs(sk, ct, f), ops.pbs(back, ct, f)
    assert same_ct(got, want)
    assert np.array_equal(ops.decrypt(ck, got), np.take(f, m))


def test_client_key_explicit_round_trip(keys, tmp_path):
    ck, _, m, ct = keys
    path = tmp_path / "ck.cfhe"
    tio.save_secret_key(ck, path)
    if os.name == "posix":
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    back = tio.load_secret_key(path, params=P)
    assert same(back.lwe_key, ck.lwe_key) and same(back.glwe_key, ck.glwe_key) and back.params == P
    assert np.array_equal(ops.decrypt(back, ct), m)
    blob = tio.dumps_secret_key(ck, params=P)
    assert path.read_bytes() == blob and split_blob(blob)[1]["kind"] == "tfhe.client_key"
    assert same(tio.loads_secret_key(blob).glwe_key, ck.glwe_key)
    with pytest.raises(SerializationError, match="client key"):
        tio.load(path)
    with pytest.raises(SerializationError, match="other parameters"):
        tio.load_secret_key(path, params=INSECURE_TFHE_P4)
    with pytest.raises(SerializationError, match="differ"):
        tio.dumps_secret_key(ck, params=INSECURE_TFHE_P4)
    with pytest.raises(SerializationError, match="wrong kind: expected tfhe.client_key, the blob holds tfhe.params"):
        tio.loads_secret_key(tio.dumps(P))


def test_files_round_trip(keys, tmp_path):
    _, sk, _, ct = keys
    tio.save(P, tmp_path / "params.cfhe")
    tio.save(ct, str(tmp_path / "ct.cfhe"), params=P)
    tio.save(sk, tmp_path / "sk.cfhe")
    assert tio.load(tmp_path / "params.cfhe") == P
    assert same_ct(tio.load(tmp_path / "ct.cfhe", params=P), ct)
    assert same(tio.load(tmp_path / "sk.cfhe", expected=ServerKey).bsk, sk.bsk)
    assert sorted(os.listdir(tmp_path)) == ["ct.cfhe", "params.cfhe", "sk.cfhe"]
    assert (tmp_path / "sk.cfhe").read_bytes() == tio.dumps(sk)


# --------------------------------------------------------------------------------------------------
# The streamed writer: the container's layout, in pieces, one full-size buffer
# --------------------------------------------------------------------------------------------------


def packed(kind: str, params: Params, arrays: dict, meta: dict | None = None) -> bytes:
    """The same object through crossfhe.io.format.pack (the reference layout)."""
    fields = {"params_digest": params.digest(), "params": tio.describe_params(params), "meta": meta or {}}
    return fmt.pack(kind, fields, {name: np.asarray(a) for name, a in arrays.items()})


def test_blobs_equal_format_pack(keys, ct_blob, sk_blob):
    ck, sk, _, ct = keys
    kid = {"key_id": ck.key_id}
    assert ct_blob == packed("tfhe.ciphertext", P, {"b": ct.b, "a": ct.a}, kid)
    assert sk_blob == packed("tfhe.server_key", P, {"bsk": sk.bsk, "ksk": sk.ksk})
    assert tio.dumps_secret_key(ck) == packed("tfhe.client_key", P, {"lwe_key": ck.lwe_key, "glwe_key": ck.glwe_key},
                                              kid)
    assert tio.dumps(P) == packed("tfhe.params", P, {})


@pytest.mark.parametrize("backing", ["jax", "numpy"])
def test_pieces_give_the_same_blob(keys, sk_blob, tmp_path, monkeypatch, backing):
    sk = keys[1]
    monkeypatch.setattr(tio, "CHUNK_BYTES", 3 * sk.bsk.nbytes // n + 5)  # 3 GGSW a piece, a short last piece
    if backing == "numpy":  # the key's arrays as NumPy arrays (ServerKey.create would move them to the device)
        sk = ServerKey(dataclasses.replace(sk.prepared, bsk=np.asarray(sk.bsk), ksk=np.asarray(sk.ksk)), P)
        assert isinstance(sk.bsk, np.ndarray) and isinstance(sk.ksk, np.ndarray)
    assert tio.dumps(sk) == sk_blob
    tio.save(sk, tmp_path / "sk.cfhe")
    assert (tmp_path / "sk.cfhe").read_bytes() == sk_blob


def test_dumps_makes_one_full_size_copy(monkeypatch):
    """Host memory of dumps, traced by tracemalloc, for a key in NumPy arrays (fmt.pack makes about four
    copies: the pieces, their join, the preamble + join, + the SHA-256)."""
    rng = np.random.default_rng(1)
    q = np.asarray(P.moduli, np.uint32).reshape(-1, 1)
    bsk = (rng.integers(0, 2**31, BSK_SHAPE) % q).astype(np.uint32)
    ksk = rng.integers(-(2**31), 2**31, (n + 1, KN * P.ks_gadget.levels)).astype(np.int32)
    made = ServerKey.create(bsk, ksk, P, product=ops.NTTProduct)  # its prepared form, holding the NumPy arrays
    sk = ServerKey(dataclasses.replace(made.prepared, bsk=bsk, ksk=ksk), P)
    assert sk.bsk is bsk and sk.ksk is ksk
    monkeypatch.setattr(tio, "CHUNK_BYTES", 1 << 16)
    tracemalloc.start()
    try:
        blob = tio.dumps(sk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(blob) > 1_000_000 and peak < len(blob) + 4 * (1 << 16) + (1 << 16)
    assert tio.loads(blob).bsk.shape == BSK_SHAPE


# --------------------------------------------------------------------------------------------------
# Secret keys: explicit only
# --------------------------------------------------------------------------------------------------


def test_client_key_not_written_implicitly(keys, sk_blob, tmp_path):
    ck = keys[0]
    with pytest.raises(SerializationError, match="dumps_secret_key"):
        tio.dumps(ck)
    with pytest.raises(SerializationError, match="save_secret_key"):
        tio.save(ck, tmp_path / "ck.cfhe")
    with pytest.raises(SerializationError, match="load_secret_key"):
        tio.loads(sk_blob, expected=ClientKey)
    with pytest.raises(TypeError, match="ClientKey"):
        tio.dumps_secret_key(keys[1])
    assert os.listdir(tmp_path) == []


# --------------------------------------------------------------------------------------------------
# Refusals: container
# --------------------------------------------------------------------------------------------------


def test_truncated_blobs_refused(ct_blob):
    _, _, raw, payload = split_blob(ct_blob)
    h, d = len(raw), len(payload)
    for cut in [0, 4, 7, 18, 19 + h // 2, 19 + h, 19 + h + d // 2, len(ct_blob) - 1]:
        with pytest.raises(SerializationError, match="truncated"):
            tio.loads(ct_blob[:cut])


@pytest.mark.parametrize("where", ["header", "payload", "hash"])
def test_flipped_bit_refused(sk_blob, where):
    _, _, raw, payload = split_blob(sk_blob)
    index = {"header": 19 + len(raw) // 2, "payload": 19 + len(raw) + len(payload) // 3, "hash": len(sk_blob) - 5}
    with pytest.raises(SerializationError, match="SHA-256 mismatch"):
        tio.loads(flip(sk_blob, index[where]))


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_random_corruption_refused(ct_blob, data):
    i = data.draw(st.integers(0, len(ct_blob) - 1))
    with pytest.raises(SerializationError):
        tio.loads(flip(ct_blob, i, data.draw(st.integers(1, 255))))
    with pytest.raises(SerializationError):
        tio.loads(ct_blob[: data.draw(st.integers(0, len(ct_blob) - 1))])


# --------------------------------------------------------------------------------------------------
# Refusals: kinds and schemes
# --------------------------------------------------------------------------------------------------


def test_wrong_kind_refused(ct_blob, sk_blob):
    with pytest.raises(SerializationError, match="expected tfhe.server_key, the blob holds tfhe.ciphertext"):
        tio.loads(ct_blob, expected=ServerKey)
    with pytest.raises(SerializationError, match="wrong kind: expected tfhe.ciphertext"):
        tio.loads(sk_blob, expected="tfhe.ciphertext")
    with pytest.raises(SerializationError, match="unknown kind"):
        tio.loads(edited(ct_blob, lambda h: h.update(kind="tfhe.bogus")))
    with pytest.raises(TypeError, match="expected must be"):
        tio.loads(ct_blob, expected=int)


def test_other_scheme_refused(ct_blob):
    bfv_blob = io.bfv.dumps(INSECURE_BFV_N256)
    with pytest.raises(SerializationError, match="holds a bfv.params, not a tfhe object: load it with crossfhe.io.bfv"):
        tio.loads(bfv_blob)
    with pytest.raises(SerializationError, match="wrong kind: expected tfhe.params, the blob holds bfv.params"):
        tio.loads(bfv_blob, expected=Params)
    with pytest.raises(SerializationError, match="holds a ckks.params, not a tfhe object"):
        tio.loads(io.ckks.dumps(INSECURE_CKKS_N10))
    for other in (io.bfv, io.ckks):  # refused by the other modules too (as an unknown kind)
        with pytest.raises(SerializationError, match="tfhe.ciphertext"):
            other.loads(ct_blob)
    with pytest.raises(TypeError, match="tfhe.Params"):
        tio.loads(ct_blob, params=INSECURE_BFV_N256)
    with pytest.raises(TypeError, match="dumps takes tfhe.Params"):
        tio.dumps(INSECURE_BFV_N256)


# --------------------------------------------------------------------------------------------------
# Refusals: parameters and contents
# --------------------------------------------------------------------------------------------------


def test_other_params_refused(keys, ct_blob, sk_blob):
    _, sk, _, ct = keys
    for blob in (ct_blob, sk_blob, tio.dumps(P)):
        with pytest.raises(SerializationError, match="other parameters"):
            tio.loads(blob, params=INSECURE_TFHE_P4)
    with pytest.raises(SerializationError, match="params="):
        tio.dumps(ct)
    with pytest.raises(SerializationError, match="does not belong"):
        tio.dumps(ct, params=INSECURE_TFHE_P4)
    with pytest.raises(SerializationError, match="differ"):
        tio.dumps(sk, params=INSECURE_TFHE_P4)
    with pytest.raises(TypeError, match="tfhe.Params"):
        tio.dumps(ct, params=INSECURE_BFV_N256)


def test_parameter_description_tampering_refused(ct_blob):
    with pytest.raises(SerializationError, match="digest mismatch"):
        tio.loads(edited(ct_blob, lambda h: h["params"].update(lwe_dim=65)))  # valid parameters, another digest
    with pytest.raises(SerializationError, match="digest mismatch"):
        tio.loads(edited(ct_blob, lambda h: h["params"].update(glwe_sigma=(2.0 * P.glwe_sigma).hex())))
    with pytest.raises(SerializationError, match="invalid"):
        tio.loads(edited(ct_blob, lambda h: h["params"].update(moduli=[P.moduli[0] + 2, P.moduli[1]])))
    with pytest.raises(SerializationError, match="invalid"):
        tio.loads(edited(ct_blob, lambda h: h["params"].update(message_bits=11)))
    with pytest.raises(SerializationError, match="params.pbs_gadget.levels must be an integer"):
        tio.loads(edited(ct_blob, lambda h: h["params"]["pbs_gadget"].update(levels="2")))
    with pytest.raises(SerializationError, match="float.hex"):
        tio.loads(edited(ct_blob, lambda h: h["params"].update(lwe_sigma=1.5)))
    with pytest.raises(SerializationError, match="parameter description must have the keys"):
        tio.loads(edited(ct_blob, lambda h: h["params"].pop("name")))
    with pytest.raises(SerializationError, match="digest mismatch"):
        tio.loads(edited(ct_blob, lambda h: h.update(params_digest="0" * 64)))
    renamed = tio.loads(edited(ct_blob, lambda h: h["params"].update(name="renamed")))  # not part of the digest
    assert renamed.moduli == P.moduli


@pytest.mark.parametrize(("name", "index", "value"), [
    ("a", KN + 5, P.moduli[1]),  # limb 1 of item 0
    ("a", 5 * L * KN, 0xFFFFFFFF),  # the last item of the batch
    ("b", 3, P.moduli[1]),
])
def test_out_of_range_ciphertext_residue_refused(ct_blob, name, index, value):
    with pytest.raises(SerializationError, match="out of range"):
        tio.loads(with_word(ct_blob, name, index, value))
    tio.loads(with_word(ct_blob, name, index, P.moduli[1] - 1))  # the same surgery in range loads


def test_out_of_range_key_residue_refused(sk_blob, monkeypatch):
    last = int(np.prod(BSK_SHAPE)) - 1  # the last word: GGSW n-1, limb L-1
    with pytest.raises(SerializationError, match=rf"index \({n - 1}, .*q = {P.moduli[-1]}: out of range"):
        tio.loads(with_word(sk_blob, "bsk", last, P.moduli[-1]))
    monkeypatch.setattr(tio, "CHUNK_BYTES", 4096)  # checked in pieces: the index is still global
    with pytest.raises(SerializationError, match=rf"index \({n - 1}, .*out of range"):
        tio.loads(with_word(sk_blob, "bsk", last, 0xFFFFFFFF))
    tio.loads(with_word(sk_blob, "ksk", 0, 0xFFFFFFFF))  # the key-switching key is mod 2^32: any word


def test_client_key_bits_checked(keys):
    blob = tio.dumps_secret_key(keys[0])
    with pytest.raises(SerializationError, match="must be 0 or 1"):
        tio.loads_secret_key(with_word(blob, "glwe_key", 7, 2))
    with pytest.raises(SerializationError, match="must be 0 or 1"):
        tio.loads_secret_key(with_word(blob, "lwe_key", 0, 0xFFFFFFFF))
    bad = ClientKey(keys[0].lwe_key.at[0].set(-1), keys[0].glwe_key, P)
    with pytest.raises(SerializationError, match="must be 0 or 1"):
        tio.dumps_secret_key(bad)


def test_wrong_shapes_and_dtypes_refused(keys, ct_blob, sk_blob):
    def reshape(name, shape, dtype=None):
        def edit(header):
            entry = next(e for e in header["arrays"] if e["name"] == name)
            entry["shape"] = shape
            if dtype is not None:
                entry["dtype"] = dtype

        return edit

    with pytest.raises(SerializationError, match=rf"expected \[\.\.\., {L}\]"):
        tio.loads(edited(ct_blob, reshape("b", [6 * L])))
    with pytest.raises(SerializationError, match=rf"array 'a' is uint32\[6, {L}, {KN}\], expected uint32\[2, 3, "):
        tio.loads(edited(ct_blob, reshape("a", [6, L, KN])))
    with pytest.raises(SerializationError, match=r"array 'ksk' is uint32\[.*expected int32"):
        tio.loads(edited(sk_blob, reshape("ksk", table_entry(sk_blob, "ksk")["shape"], "uint32")))
    with pytest.raises(SerializationError, match=r"array 'bsk' is uint32\[.*expected uint32\[64, 4, 2, 2, 256\]"):
        tio.loads(edited(sk_blob, reshape("bsk", [2 * n, 2, 2, L, N])))
    with pytest.raises(SerializationError, match="meta must have the keys"):
        tio.loads(edited(ct_blob, lambda h: h["meta"].update(level=1)))
    with pytest.raises(SerializationError, match="meta.key_id must be 32 lowercase hex digits"):
        tio.loads(edited(ct_blob, lambda h: h["meta"].update(key_id="not-a-key-id")))
    # a malformed key cannot be made (ServerKey.create checks the arrays), so it can never be written; one
    # assembled around the check is refused by dumps itself
    sk = keys[1]
    with pytest.raises(ParameterError, match=r"bsk .* is uint32 \(64, 4, 2, 2, 256\), got uint32 \(63, 4, 2, 2, 256\)"):
        ServerKey.create(sk.bsk[:-1], sk.ksk, P)
    with pytest.raises(ParameterError, match=r"ksk .* is int32 .*, got uint32"):
        ServerKey.create(sk.bsk, sk.ksk.astype(jnp.uint32), P)
    with pytest.raises(SerializationError, match="expected"):
        tio.dumps(ServerKey(dataclasses.replace(sk.prepared, bsk=sk.bsk[:-1]), P))
    with pytest.raises(SerializationError, match="ksk is uint32"):
        tio.dumps(ServerKey(dataclasses.replace(sk.prepared, ksk=sk.ksk.astype(jnp.uint32)), P))


def test_traced_values_refused(keys):
    ct = keys[3]
    with pytest.raises(SerializationError, match="traced"):
        jax.jit(lambda b: tio.dumps(LWECiphertext(b, ct.a, ct.moduli), params=P) and b)(ct.b)


# --------------------------------------------------------------------------------------------------
# Atomic writes
# --------------------------------------------------------------------------------------------------


def test_refused_save_leaves_old_file(keys, tmp_path):
    ct = keys[3]
    path = tmp_path / "ct.cfhe"
    tio.save(ct, path, params=P)
    before = path.read_bytes()
    bad = LWECiphertext(ct.b, ct.a.at[1, 2, 1, 0].set(0xFFFFFFFF), ct.moduli)
    with pytest.raises(SerializationError, match="out of range"):
        tio.save(bad, path, params=P)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["ct.cfhe"]


def test_failure_mid_stream_leaves_old_file(keys, tmp_path, monkeypatch):
    """A bad residue in a late piece of a server key: the temporary file is already partly written."""
    sk = keys[1]
    path = tmp_path / "sk.cfhe"
    tio.save(sk, path)
    before = path.read_bytes()
    monkeypatch.setattr(tio, "CHUNK_BYTES", 4096)
    bad = ServerKey.create(sk.bsk.at[n - 1, 0, 0, 0, 0].set(P.moduli[0]), sk.ksk, P, product=ops.NTTProduct)
    with pytest.raises(SerializationError, match="out of range"):
        tio.save(bad, path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["sk.cfhe"]


def test_failed_write_removes_temporary(keys, tmp_path, monkeypatch):
    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        tio.save(keys[1], tmp_path / "sk.cfhe")
    with pytest.raises(OSError, match="disk full"):
        tio.save_secret_key(keys[0], tmp_path / "ck.cfhe")
    assert os.listdir(tmp_path) == []
