"""Serialization (crossfhe.io): round trips are bit-exact, and truncated, corrupted, resealed-but-tampered,
out-of-range or mismatched blobs are refused with a SerializationError naming the problem.

The tampering tests edit blobs with the helpers below, written from the byte layout in
crossfhe/io/format.py's docstring (not from its code), and recompute the SHA-256 where a test needs to get
past the hash to reach a later check.
"""

import hashlib
import json
import math
import os
import stat
import struct

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crossfhe import io
from crossfhe.ckks import ops
from crossfhe.ckks.ciphertext import Ciphertext, EvaluationKeys, Plaintext
from crossfhe.ckks.params import Params, ParamsLiteral
from crossfhe.core.keys import PublicKey, sample_uniform
from crossfhe.core.keyswitch import KeySwitchKey, expand_keyswitch_a
from crossfhe.errors import SerializationError
from crossfhe.io import format as fmt
from crossfhe.math.random import seed_key
from crossfhe.ring.poly import Domain
from crossfhe.testing import INSECURE_CKKS_N10, INSECURE_CKKS_N11_COMPOSITE

P = INSECURE_CKKS_N10
PREAMBLE = struct.Struct("<5sHIQ")


# --------------------------------------------------------------------------------------------------
# Blob surgery (independent of the implementation)
# --------------------------------------------------------------------------------------------------


def split_blob(blob: bytes):
    """(version, header dict, header bytes, payload) of a well-formed blob."""
    _, version, h, d = PREAMBLE.unpack_from(blob)
    raw = blob[PREAMBLE.size : PREAMBLE.size + h]
    return version, json.loads(raw), raw, blob[PREAMBLE.size + h : PREAMBLE.size + h + d]


def reseal(blob: bytes, *, header=None, header_bytes=None, payload=None, version=None) -> bytes:
    """The blob with its header, payload or version replaced, lengths and SHA-256 recomputed."""
    old_version, _, old_raw, old_payload = split_blob(blob)
    if header is not None:
        header_bytes = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    raw = old_raw if header_bytes is None else header_bytes
    payload = old_payload if payload is None else payload
    version = old_version if version is None else version
    body = PREAMBLE.pack(b"CFHE\0", version, len(raw), len(payload)) + raw + payload
    return body + hashlib.sha256(body).digest()


def flip(blob: bytes, index: int, mask: int = 0x01) -> bytes:
    out = bytearray(blob)
    out[index] ^= mask
    return bytes(out)


def array_entry(header: dict, name: str) -> dict:
    return next(e for e in header["arrays"] if e["name"] == name)


def with_word(blob: bytes, name: str, index: int, value: int) -> bytes:
    """The blob with word ``index`` (flat) of array ``name`` set to ``value``, hash recomputed."""
    _, header, _, payload = split_blob(blob)
    start = array_entry(header, name)["offset"] + 4 * index
    payload = payload[:start] + struct.pack("<I", value) + payload[start + 4 :]
    return reseal(blob, payload=payload)


def same_poly(x, y) -> bool:
    return x.basis == y.basis and x.domain == y.domain and np.array_equal(np.asarray(x.data), np.asarray(y.data))


def same_ksk(x: KeySwitchKey, y: KeySwitchKey) -> bool:
    return (same_poly(x.b, y.b) and same_poly(x.a, y.a) and (x.q, x.p, x.dnum, x.sigma) == (y.q, y.p, y.dnum, y.sigma)
            and np.array_equal(np.asarray(x.seed.words), np.asarray(y.seed.words))
            and np.array_equal(np.asarray(x.seed.stream), np.asarray(y.seed.stream)))


def unseeded(k):
    """The same key with no seed, so a writer must store its ``a``."""
    if isinstance(k, PublicKey):
        return PublicKey(k.b, k.a, None, k.sigma)
    return KeySwitchKey(k.b, k.a, None, k.q, k.p, k.dnum, k.sigma)


# --------------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ctx():
    sk, ek = ops.keygen(P, rotations=[1], conjugation=True, seed=bytes(32))
    rng = np.random.default_rng(10)
    z = rng.uniform(-1, 1, P.slots) + 1j * rng.uniform(-1, 1, P.slots)
    pt = ops.encode(P, z)
    ct = ops.encrypt(ek, pt, key=seed_key(bytes(range(32))))
    return sk, ek, z, pt, ct


@pytest.fixture(scope="module")
def ct_blob(ctx):
    return io.dumps(ctx[4])


@pytest.fixture(scope="module")
def params_blob():
    return io.dumps(P)


# --------------------------------------------------------------------------------------------------
# Round trips
# --------------------------------------------------------------------------------------------------


SPARSE_N10 = Params.from_literal(ParamsLiteral(log_n=10, levels=2, log_scale=30, hamming_weight=64, insecure=True))


@pytest.mark.parametrize("params", [INSECURE_CKKS_N10, INSECURE_CKKS_N11_COMPOSITE, SPARSE_N10],
                         ids=["N10", "N11-composite", "N10-sparse"])
def test_params_round_trip(params):
    blob = io.dumps(params)
    back = io.loads(blob, expected=Params)
    assert back == params and back.digest() == params.digest() and back.ring.q == params.ring.q
    assert io.loads(blob, params=params) is params
    assert io.params_from_description(io.describe_params(params)) == params
    assert back.hamming_weight == params.hamming_weight


def test_ciphertext_round_trip_bit_exact_and_decrypts(ctx, ct_blob):
    sk, _, z, _, ct = ctx
    back = io.loads(ct_blob, params=P, expected=Ciphertext)
    assert same_poly(back.c0, ct.c0) and same_poly(back.c1, ct.c1)
    assert back.scale == ct.scale and back.level == ct.level == P.levels and back.params == P
    got = ops.decode(ops.decrypt(sk, back))
    assert np.array_equal(got, ops.decode(ops.decrypt(sk, ct)))
    assert np.max(np.abs(got - z)) < 1e-4


def test_ciphertext_scale_and_lower_level_exact(ctx):
    ct = ctx[4]
    scale = 2.0**30 / P.q[-1] * 1.000000000000001  # a full 53-bit mantissa
    odd = ops.drop_level(Ciphertext(ct.c0, ct.c1, P, scale), 1)
    back = io.loads(io.dumps(odd))
    assert back.scale == scale and back.level == 1 and back.c0.basis == P.moduli_at(1)
    assert same_poly(back.c0, odd.c0) and same_poly(back.c1, odd.c1)


def test_batched_ciphertext_round_trip(ctx):
    sk, _, _, _, ct = ctx
    batch = jax.tree.map(lambda x: jnp.stack([x, x[..., ::-1], x]).reshape((3, 1) + x.shape), ct)
    back = io.loads(io.dumps(batch), params=P)
    assert back.c0.data.shape == (3, 1, len(P.q), P.n)
    assert same_poly(back.c0, batch.c0) and same_poly(back.c1, batch.c1)
    first = jax.tree.map(lambda x: x[0, 0], back)
    assert np.array_equal(ops.decode(ops.decrypt(sk, first)), ops.decode(ops.decrypt(sk, ct)))


def test_plaintext_round_trip(ctx):
    pt = ctx[3]
    back = io.loads(io.dumps(pt), expected=Plaintext)
    assert same_poly(back.poly, pt.poly) and back.scale == pt.scale and back.level == pt.level
    assert np.array_equal(ops.decode(back), ops.decode(pt))


def test_public_key_seed_re_expands_bit_for_bit(ctx):
    pk = ctx[1].public
    blob = io.dumps(pk, params=P)
    back = io.loads(blob, params=P, expected=PublicKey)
    assert same_poly(back.b, pk.b) and same_poly(back.a, pk.a) and back.sigma == pk.sigma
    assert same_poly(sample_uniform(back.seed, P.q + P.p, P.n, domain=Domain.EVAL), pk.a)
    _, header, _, _ = split_blob(blob)
    assert {e["name"] for e in header["arrays"]} == {"b", "seed.words", "seed.stream"}
    full = io.dumps(unseeded(pk), params=P)
    assert len(blob) < 0.52 * len(full)  # a 40-byte seed instead of a: uint32[L, N]
    back_full = io.loads(full, params=P)
    assert same_poly(back_full.a, pk.a) and back_full.seed is None


def test_public_key_needs_params(ctx):
    with pytest.raises(SerializationError, match="params="):
        io.dumps(ctx[1].public)


def test_evaluation_keys_round_trip(ctx):
    ek = ctx[1]
    blob = io.dumps(ek)
    back = io.loads(blob, params=P, expected=EvaluationKeys)
    assert sorted(back.galois) == sorted(ek.galois) == sorted([ops.rotation_element(P, 1), 2 * P.n - 1])
    assert same_poly(back.public.b, ek.public.b) and same_poly(back.public.a, ek.public.a)
    assert same_ksk(back.relin, ek.relin)
    for g, key in ek.galois.items():
        assert same_ksk(back.galois[g], key)
        digits = key.b.data.shape[0]
        assert same_poly(expand_keyswitch_a(back.galois[g].seed, P.q + P.p, P.n, digits), key.a)
    full = EvaluationKeys(unseeded(ek.public), unseeded(ek.relin), {g: unseeded(k) for g, k in ek.galois.items()}, P)
    full_blob = io.dumps(full)
    assert len(blob) < 0.51 * len(full_blob)
    back_full = io.loads(full_blob)
    assert all(same_poly(back_full.galois[g].a, k.a) for g, k in ek.galois.items())


def test_files_round_trip(ctx, tmp_path):
    _, ek, _, pt, ct = ctx
    for name, obj in [("ct.cfhe", ct), ("ek.cfhe", ek), ("pt.cfhe", pt), ("params.cfhe", P)]:
        io.save(obj, tmp_path / name)
    io.save(ek.public, str(tmp_path / "pk.cfhe"), params=P)
    assert same_poly(io.load(tmp_path / "ct.cfhe", params=P).c1, ct.c1)
    assert same_ksk(io.load(tmp_path / "ek.cfhe").relin, ek.relin)
    assert same_poly(io.load(tmp_path / "pt.cfhe").poly, pt.poly)
    assert io.load(tmp_path / "params.cfhe") == P
    assert same_poly(io.load(tmp_path / "pk.cfhe", params=P).a, ek.public.a)
    assert sorted(os.listdir(tmp_path)) == ["ct.cfhe", "ek.cfhe", "params.cfhe", "pk.cfhe", "pt.cfhe"]
    assert (tmp_path / "ct.cfhe").read_bytes() == io.dumps(ct)


# --------------------------------------------------------------------------------------------------
# Secret keys: explicit only
# --------------------------------------------------------------------------------------------------


def test_secret_key_not_saved_implicitly(ctx, tmp_path):
    sk = ctx[0]
    with pytest.raises(SerializationError, match="save_secret_key"):
        io.dumps(sk)
    with pytest.raises(SerializationError, match="save_secret_key"):
        io.save(sk, tmp_path / "sk.cfhe")
    assert os.listdir(tmp_path) == []


def test_secret_key_explicit_round_trip(ctx, tmp_path):
    sk, _, _, _, ct = ctx
    path = tmp_path / "sk.cfhe"
    io.save_secret_key(sk, path, params=P)
    if os.name == "posix":
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    back = io.load_secret_key(path, params=P)
    assert np.array_equal(np.asarray(back.coeffs), np.asarray(sk.coeffs)) and same_poly(back.poly, sk.poly)
    assert (back.q, back.p, back.hamming_weight) == (sk.q, sk.p, sk.hamming_weight)
    assert np.array_equal(ops.decode(ops.decrypt(back, ct)), ops.decode(ops.decrypt(sk, ct)))
    with pytest.raises(SerializationError, match="secret key"):
        io.load(path)
    with pytest.raises(SerializationError, match="other parameters"):
        io.load_secret_key(path, params=INSECURE_CKKS_N11_COMPOSITE)
    with pytest.raises(SerializationError, match="wrong kind"):
        io.loads_secret_key(io.dumps(ct), params=P)
    bad = with_word(io.dumps_secret_key(sk, params=P), "coeffs", 0, 2)
    with pytest.raises(SerializationError, match="-1, 0, 1"):
        io.loads_secret_key(bad, params=P)


# --------------------------------------------------------------------------------------------------
# Refusals: container
# --------------------------------------------------------------------------------------------------


def test_truncated_blobs_refused(ct_blob):
    _, _, raw, payload = split_blob(ct_blob)
    h, d = len(raw), len(payload)
    cuts = [0, 3, 5, 6, 7, 12, 18, 19, 19 + h // 2, 19 + h, 19 + h + d // 2, 19 + h + d, len(ct_blob) - 1]
    for cut in cuts:
        with pytest.raises(SerializationError, match="truncated"):
            io.loads(ct_blob[:cut])


def test_trailing_bytes_refused(ct_blob):
    with pytest.raises(SerializationError, match="unexpected bytes"):
        io.loads(ct_blob + b"\0")


@pytest.mark.parametrize("where", ["header", "payload", "hash"])
def test_flipped_byte_refused(ct_blob, where):
    _, _, raw, payload = split_blob(ct_blob)
    index = {"header": 19 + len(raw) // 2, "payload": 19 + len(raw) + len(payload) // 3, "hash": len(ct_blob) - 5}
    with pytest.raises(SerializationError, match="SHA-256 mismatch"):
        io.loads(flip(ct_blob, index[where]))


def test_every_single_byte_flip_refused(params_blob):
    for i in range(len(params_blob)):
        with pytest.raises(SerializationError):
            io.loads(flip(params_blob, i, 0x80))


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_random_corruption_refused(ct_blob, data):
    i = data.draw(st.integers(0, len(ct_blob) - 1))
    mask = data.draw(st.integers(1, 255))
    cut = data.draw(st.integers(0, len(ct_blob) - 1))
    with pytest.raises(SerializationError):
        io.loads(flip(ct_blob, i, mask))
    with pytest.raises(SerializationError):
        io.loads(ct_blob[:cut])


def test_wrong_magic_refused(ct_blob):
    with pytest.raises(SerializationError, match="magic"):
        io.loads(b"PK\3\4" + ct_blob[4:])
    with pytest.raises(SerializationError, match="magic"):
        io.loads(b"\x80\x04\x95" + bytes(40))  # a pickle is not a crossfhe blob


@pytest.mark.parametrize(("version", "message"), [(2, "newer"), (0xFFFF, "newer"), (0, "unknown format version")])
def test_other_versions_refused(ct_blob, version, message):
    with pytest.raises(SerializationError, match=message):
        io.loads(reseal(ct_blob, version=version))


@pytest.mark.parametrize(
    "garbage", [b"{not json", b"[1, 2]", b'{"kind": "a", "kind": "b"}', b"\xff\xfe", b'{"x": NaN}', b""]
)
def test_json_garbage_refused(ct_blob, garbage):
    with pytest.raises(SerializationError, match="JSON"):
        io.loads(reseal(ct_blob, header_bytes=garbage))


def test_array_table_tampering_refused(ct_blob):
    _, header, _, _ = split_blob(ct_blob)
    for field, value, message in [("dtype", "float64", "not allowed"), ("offset", 4, "offset"),
                                  ("length", 8, "length"), ("shape", [5, -1024], "shape")]:
        bad = json.loads(json.dumps(header))
        array_entry(bad, "c1")[field] = value
        with pytest.raises(SerializationError, match=message):
            io.loads(reseal(ct_blob, header=bad))
    bad = json.loads(json.dumps(header))
    bad["arrays"].pop()
    with pytest.raises(SerializationError, match="cover"):
        io.loads(reseal(ct_blob, header=bad))


# --------------------------------------------------------------------------------------------------
# Refusals: kinds, parameters, contents
# --------------------------------------------------------------------------------------------------


def test_wrong_kind_refused(ctx, ct_blob, params_blob):
    pk_blob = io.dumps(ctx[1].public, params=P)
    message = "wrong kind: expected ckks.ciphertext, the blob holds ckks.public_key"
    with pytest.raises(SerializationError, match=message):
        io.loads(pk_blob, expected=Ciphertext)
    with pytest.raises(SerializationError, match="wrong kind"):
        io.loads(ct_blob, expected="ckks.params")
    with pytest.raises(SerializationError, match="wrong kind"):
        io.loads(params_blob, expected=EvaluationKeys)
    _, header, _, _ = split_blob(ct_blob)
    with pytest.raises(SerializationError, match="unknown kind"):
        io.loads(reseal(ct_blob, header={**header, "kind": "ckks.bogus"}))


def test_ciphertext_for_other_params_refused(ct_blob, params_blob):
    with pytest.raises(SerializationError, match="other parameters"):
        io.loads(ct_blob, params=INSECURE_CKKS_N11_COMPOSITE)
    with pytest.raises(SerializationError, match="other parameters"):
        io.loads(params_blob, params=INSECURE_CKKS_N11_COMPOSITE)


def test_ciphertext_dumped_with_other_params_refused(ctx):
    with pytest.raises(SerializationError, match="differ"):
        io.dumps(ctx[4], params=INSECURE_CKKS_N11_COMPOSITE)


def test_parameter_description_tampering_refused(ct_blob):
    _, header, _, _ = split_blob(ct_blob)
    bad = json.loads(json.dumps(header))
    bad["params"]["q"][0] = P.p[0]  # a valid prime, so only the digest notices
    bad["params"]["p"][0] = P.q[0]
    with pytest.raises(SerializationError, match="digest mismatch"):
        io.loads(reseal(ct_blob, header=bad))
    bad = json.loads(json.dumps(header))
    bad["params"]["q"][0] = 15
    with pytest.raises(SerializationError, match="invalid"):
        io.loads(reseal(ct_blob, header=bad))
    bad = json.loads(json.dumps(header))
    bad["params_digest"] = "0" * 64
    with pytest.raises(SerializationError, match="digest mismatch"):
        io.loads(reseal(ct_blob, header=bad))


def test_metadata_tampering_refused(ct_blob):
    _, header, _, _ = split_blob(ct_blob)
    for key, value, message in [("level", 2, "expected"), ("level", 9, "not a level"), ("scale", "0x0p+0", "scale"),
                                ("scale", 1.5, "scale"), ("domain", "spectral", "domain")]:
        bad = json.loads(json.dumps(header))
        bad["meta"][key] = value
        with pytest.raises(SerializationError, match=message):
            io.loads(reseal(ct_blob, header=bad))


@pytest.mark.parametrize(("limb", "value"), [(0, 0xFFFFFFFF), (0, P.q[0]), (len(P.q) - 1, P.q[-1])])
def test_out_of_range_residue_refused(ct_blob, limb, value):
    bad = with_word(ct_blob, "c1", limb * P.n + 7, value)
    with pytest.raises(SerializationError, match="out of range"):
        io.loads(bad)
    ok = with_word(ct_blob, "c1", limb * P.n + 7, value - 1 if value == P.q[limb] else 1)
    io.loads(ok)  # the same surgery with an in-range value loads


def test_out_of_range_key_residue_refused(ctx):
    blob = io.dumps(ctx[1])
    _, header, _, _ = split_blob(blob)
    name = next(e["name"] for e in header["arrays"] if e["name"].startswith("galois.") and e["name"].endswith(".b"))
    with pytest.raises(SerializationError, match="out of range"):
        io.loads(with_word(blob, name, len(P.q) * P.n, 0xFFFFFFFF))  # first word of a special-prime limb


# --------------------------------------------------------------------------------------------------
# Atomic writes
# --------------------------------------------------------------------------------------------------


def test_refused_save_leaves_old_file(ctx, tmp_path):
    ct = ctx[4]
    path = tmp_path / "ct.cfhe"
    io.save(ct, path)
    before = path.read_bytes()
    bad = Ciphertext(ct.c0, ct.c1._replace(ct.c1.data.at[0, 0].set(0xFFFFFFFF)), P, ct.scale)
    with pytest.raises(SerializationError, match="out of range"):
        io.save(bad, path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["ct.cfhe"]


def test_failed_write_removes_temporary(tmp_path, monkeypatch):
    path = tmp_path / "p.cfhe"

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(fmt.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        io.save(P, path)
    assert os.listdir(tmp_path) == []


def test_container_refuses_other_dtypes():
    with pytest.raises(SerializationError, match="only uint32 and int32"):
        fmt.pack("x", {}, {"a": np.zeros(3, np.float64)})
    blob = fmt.pack("x", {"note": "ok"}, {"a": np.arange(6, dtype=np.int32).reshape(2, 3)})
    c = fmt.unpack(blob, expected_kind="x")
    assert c.fields == {"note": "ok"} and np.array_equal(c.arrays["a"], np.arange(6).reshape(2, 3))
    assert math.prod(c.arrays["a"].shape) == 6 and c.arrays["a"].dtype == np.int32


def test_params_blob_with_arrays_refused(params_blob, ct_blob):
    _, header, _, payload = split_blob(ct_blob)
    _, p_header, _, _ = split_blob(params_blob)
    bad = reseal(params_blob, header={**p_header, "arrays": header["arrays"]}, payload=payload)
    with pytest.raises(SerializationError, match="arrays"):
        io.loads(bad)


def test_big_endian_arrays_are_written_little_endian():
    a = np.arange(4, dtype=">u4")
    c = fmt.unpack(fmt.pack("x", {}, {"a": a}))
    assert c.arrays["a"].dtype == np.uint32 and np.array_equal(c.arrays["a"], np.arange(4))
    assert fmt.pack("x", {}, {"a": a}) == fmt.pack("x", {}, {"a": np.arange(4, dtype="<u4")})


def test_altered_seed_refused(ctx):
    """A seed rewritten (hash recomputed) re-expands to another a: refused by the recorded SHA-256 of a."""
    blob = io.dumps(ctx[1])
    with pytest.raises(SerializationError, match="re-expanded"):
        io.loads(with_word(blob, "relin.seed.words", 3, 12345))
