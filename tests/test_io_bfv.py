"""BFV serialization (crossfhe.io.bfv): round trips are bit-exact and the keys still work after loading;
truncated, corrupted, out-of-range, mismatched and other-scheme blobs are refused with a SerializationError
naming the problem.

Blobs are edited with the helpers of tests/test_io.py, written from the byte layout in
crossfhe/io/format.py's docstring (not from its code).
"""

import json
import os
import stat

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_io import flip, reseal, same_ksk, same_poly, split_blob, with_word

from crossfhe import ckks, io
from crossfhe.bfv import ops
from crossfhe.bfv.ciphertext import Ciphertext, Encoding, EvaluationKeys, Plaintext
from crossfhe.bfv.params import Params
from crossfhe.core.keys import PublicKey
from crossfhe.errors import SerializationError
from crossfhe.math.random import seed_key
from crossfhe.ring.poly import Domain, RNSPoly
from crossfhe.testing import INSECURE_BFV_N256, INSECURE_BFV_N256_COEFF, INSECURE_CKKS_N10

P = INSECURE_BFV_N256
PC = INSECURE_BFV_N256_COEFF
L, N, T = len(P.q), P.n, P.t


# --------------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ctx():
    """sk, ek, the slot matrix v (int64 [2, N/2] in [0, t)), its plaintext and a public-key encryption."""
    sk, ek = ops.keygen(P, rotations=[1], row_swap=True, seed=b"bfv-io-test-seed".ljust(32, b"\0"))
    v = np.random.default_rng(7).integers(0, T, size=(2, N // 2))
    pt = ops.encode(P, v)
    ct = ops.encrypt(ek, pt, key=seed_key(bytes(range(32))))
    return sk, ek, v, pt, ct


@pytest.fixture(scope="module")
def ct_blob(ctx):
    return io.bfv.dumps(ctx[4])


@pytest.fixture(scope="module")
def ek_blob(ctx):
    return io.bfv.dumps(ctx[1])


def decrypted(sk, ct) -> np.ndarray:
    return ops.decode(ops.decrypt(sk, ct))


def ckks_ciphertext() -> ckks.Ciphertext:
    """A well-formed CKKS ciphertext (zeros) without running CKKS keygen."""
    zero = RNSPoly(jnp.zeros((len(INSECURE_CKKS_N10.q), INSECURE_CKKS_N10.n), jnp.uint32), INSECURE_CKKS_N10.q,
                   Domain.EVAL)
    return ckks.Ciphertext(zero, zero, INSECURE_CKKS_N10, 2.0**30)


def edited(blob: bytes, edit) -> bytes:
    """The blob with ``edit(header)`` applied to a copy of its header, SHA-256 recomputed."""
    header = json.loads(json.dumps(split_blob(blob)[1]))
    edit(header)
    return reseal(blob, header=header)


# --------------------------------------------------------------------------------------------------
# Round trips
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("params", [P, PC], ids=["bfv/N=256/L=3/t=65537", "bfv/N=256/L=2/t=2^16"])
def test_params_round_trip(params):
    blob = io.bfv.dumps(params)
    back = io.bfv.loads(blob, expected=Params)
    assert back == params and back.digest() == params.digest() and back.t == params.t and back.ring.q == params.ring.q
    assert io.bfv.loads(blob, params=params) is params
    assert io.bfv.params_from_description(io.bfv.describe_params(params)) == params
    assert split_blob(blob)[1]["kind"] == "bfv.params"


def test_ciphertext_round_trip_bit_exact_and_decrypts(ctx, ct_blob):
    sk, _, v, _, ct = ctx
    back = io.bfv.loads(ct_blob, params=P, expected=Ciphertext)
    assert same_poly(back.c0, ct.c0) and same_poly(back.c1, ct.c1) and back.params == P
    assert np.array_equal(decrypted(sk, back), v)


def test_batched_ciphertext_round_trip(ctx):
    sk, _, v, _, ct = ctx
    batch = jax.tree.map(lambda x: jnp.stack([x, x[..., ::-1], x]).reshape((3, 1) + x.shape), ct)
    back = io.bfv.loads(io.bfv.dumps(batch), params=P)
    assert back.batch_shape == (3, 1) and same_poly(back.c0, batch.c0) and same_poly(back.c1, batch.c1)
    assert np.array_equal(decrypted(sk, jax.tree.map(lambda x: x[2, 0], back)), v)


@pytest.mark.parametrize(("params", "encoding"), [(P, Encoding.BATCH), (PC, Encoding.COEFF)], ids=["batch", "coeff"])
def test_plaintext_round_trip_keeps_encoding(params, encoding):
    values = np.random.default_rng(3).integers(0, params.t, size=(2, params.n))  # a batch of two
    pt = ops.encode(params, values, encoding=encoding)
    back = io.bfv.loads(io.bfv.dumps(pt), params=params, expected=Plaintext)
    assert back.encoding == encoding and back.params == params
    assert np.asarray(back.coeffs).dtype == np.uint32 and np.array_equal(np.asarray(back.coeffs), np.asarray(pt.coeffs))
    assert np.array_equal(ops.decode(back), ops.decode(pt))


def test_evaluation_keys_round_trip_bit_exact(ctx, ek_blob):
    ek = ctx[1]
    back = io.bfv.loads(ek_blob, params=P, expected=EvaluationKeys)
    assert sorted(back.galois) == sorted(ek.galois) == sorted([ops.rotation_element(P, 1), 2 * N - 1])
    assert same_poly(back.public.b, ek.public.b) and same_poly(back.public.a, ek.public.a)
    assert same_ksk(back.relin, ek.relin) and all(same_ksk(back.galois[g], k) for g, k in ek.galois.items())
    names = {e["name"] for e in split_blob(ek_blob)[1]["arrays"]}
    assert "relin.seed.words" in names and not any(name.endswith(".a") for name in names)  # seeds, not a


def test_loaded_keys_rotate_multiply_and_encrypt(ctx, ek_blob):
    sk, _, v, _, ct = ctx
    ek = io.bfv.loads(ek_blob, params=P)
    assert np.array_equal(decrypted(sk, ops.rotate_rows(ct, 1, ek)), np.roll(v, -1, axis=-1))
    assert np.array_equal(decrypted(sk, ops.swap_rows(ct, ek)), v[::-1])
    assert np.array_equal(decrypted(sk, ops.mul(ct, ct, ek)), v * v % T)
    fresh = ops.encrypt(ek, ops.encode(P, v[::-1]), key=seed_key(bytes(32)))
    assert np.array_equal(decrypted(sk, fresh), v[::-1])


def test_evaluation_keys_without_relin(ctx):
    ek = ctx[1]
    no_relin = EvaluationKeys(ek.public, None, ek.galois, P)
    blob = io.bfv.dumps(no_relin)
    _, header, _, _ = split_blob(blob)
    assert header["meta"]["relin"] is None and not any(e["name"].startswith("relin.") for e in header["arrays"])
    back = io.bfv.loads(blob, params=P)
    assert back.relin is None and sorted(back.galois) == sorted(ek.galois)


def test_public_key_round_trip(ctx):
    pk = ctx[1].public
    with pytest.raises(SerializationError, match="params="):
        io.bfv.dumps(pk)
    blob = io.bfv.dumps(pk, params=P)
    back = io.bfv.loads(blob, params=P, expected=PublicKey)
    assert same_poly(back.b, pk.b) and same_poly(back.a, pk.a) and back.sigma == pk.sigma
    assert split_blob(blob)[1]["kind"] == "bfv.public_key"


def test_files_round_trip(ctx, tmp_path):
    _, ek, _, pt, ct = ctx
    for name, obj in [("ct.cfhe", ct), ("ek.cfhe", ek), ("pt.cfhe", pt), ("params.cfhe", P)]:
        io.bfv.save(obj, tmp_path / name)
    io.bfv.save(ek.public, str(tmp_path / "pk.cfhe"), params=P)
    assert same_poly(io.bfv.load(tmp_path / "ct.cfhe", params=P).c1, ct.c1)
    assert same_ksk(io.bfv.load(tmp_path / "ek.cfhe").galois[2 * N - 1], ek.galois[2 * N - 1])
    assert io.bfv.load(tmp_path / "pt.cfhe").encoding == Encoding.BATCH
    assert io.bfv.load(tmp_path / "params.cfhe") == P
    assert same_poly(io.bfv.load(tmp_path / "pk.cfhe", params=P).b, ek.public.b)
    assert sorted(os.listdir(tmp_path)) == ["ct.cfhe", "ek.cfhe", "params.cfhe", "pk.cfhe", "pt.cfhe"]
    assert (tmp_path / "ct.cfhe").read_bytes() == io.bfv.dumps(ct)


def test_refused_save_leaves_old_file(ctx, tmp_path):
    ct = ctx[4]
    path = tmp_path / "ct.cfhe"
    io.bfv.save(ct, path)
    before = path.read_bytes()
    bad = Ciphertext(ct.c0, ct.c1._replace(ct.c1.data.at[0, 0].set(0xFFFFFFFF)), P)
    with pytest.raises(SerializationError, match="out of range"):
        io.bfv.save(bad, path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["ct.cfhe"]


# --------------------------------------------------------------------------------------------------
# Secret keys: explicit only
# --------------------------------------------------------------------------------------------------


def test_secret_key_not_written_implicitly(ctx, ek_blob, tmp_path):
    sk = ctx[0]
    with pytest.raises(SerializationError, match="save_secret_key"):
        io.bfv.dumps(sk)
    with pytest.raises(SerializationError, match="save_secret_key"):
        io.bfv.save(sk, tmp_path / "sk.cfhe")
    assert os.listdir(tmp_path) == []
    assert np.asarray(sk.coeffs).tobytes() not in ek_blob
    assert np.asarray(sk.poly.data[0]).tobytes() not in ek_blob


def test_secret_key_explicit_round_trip(ctx, tmp_path):
    sk, _, v, _, ct = ctx
    path = tmp_path / "sk.cfhe"
    io.bfv.save_secret_key(sk, path, params=P)
    if os.name == "posix":
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    back = io.bfv.load_secret_key(path, params=P)
    assert np.array_equal(np.asarray(back.coeffs), np.asarray(sk.coeffs)) and same_poly(back.poly, sk.poly)
    assert np.array_equal(decrypted(back, ct), v)
    with pytest.raises(SerializationError, match="secret key"):
        io.bfv.load(path)
    with pytest.raises(SerializationError, match="other parameters"):
        io.bfv.load_secret_key(path, params=PC)
    with pytest.raises(SerializationError, match="wrong kind: expected bfv.secret_key, the blob holds ckks.params"):
        io.bfv.loads_secret_key(io.dumps(INSECURE_CKKS_N10), params=P)


# --------------------------------------------------------------------------------------------------
# Refusals: container
# --------------------------------------------------------------------------------------------------


def test_truncated_blobs_refused(ct_blob):
    _, _, raw, payload = split_blob(ct_blob)
    h, d = len(raw), len(payload)
    for cut in [0, 4, 7, 18, 19 + h // 2, 19 + h, 19 + h + d // 2, len(ct_blob) - 1]:
        with pytest.raises(SerializationError, match="truncated"):
            io.bfv.loads(ct_blob[:cut])


@pytest.mark.parametrize("where", ["header", "payload", "hash"])
def test_flipped_bit_refused(ek_blob, where):
    _, _, raw, payload = split_blob(ek_blob)
    index = {"header": 19 + len(raw) // 2, "payload": 19 + len(raw) + len(payload) // 3, "hash": len(ek_blob) - 5}
    with pytest.raises(SerializationError, match="SHA-256 mismatch"):
        io.bfv.loads(flip(ek_blob, index[where]))


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_random_corruption_refused(ct_blob, data):
    i = data.draw(st.integers(0, len(ct_blob) - 1))
    with pytest.raises(SerializationError):
        io.bfv.loads(flip(ct_blob, i, data.draw(st.integers(1, 255))))
    with pytest.raises(SerializationError):
        io.bfv.loads(ct_blob[: data.draw(st.integers(0, len(ct_blob) - 1))])


# --------------------------------------------------------------------------------------------------
# Refusals: kinds and schemes
# --------------------------------------------------------------------------------------------------


def test_wrong_kind_refused(ctx, ct_blob):
    pk_blob = io.bfv.dumps(ctx[1].public, params=P)
    with pytest.raises(SerializationError, match="wrong kind: expected bfv.ciphertext, the blob holds bfv.public_key"):
        io.bfv.loads(pk_blob, expected=Ciphertext)
    with pytest.raises(SerializationError, match="wrong kind"):
        io.bfv.loads(ct_blob, expected=Plaintext)
    with pytest.raises(SerializationError, match="unknown kind"):
        io.bfv.loads(edited(ct_blob, lambda h: h.update(kind="bfv.bogus")))


def test_other_scheme_refused(ct_blob):
    ckks_blob = io.dumps(ckks_ciphertext())
    with pytest.raises(SerializationError, match="holds a ckks.ciphertext, not a bfv object"):
        io.bfv.loads(ckks_blob)
    with pytest.raises(SerializationError, match="wrong kind: expected bfv.ciphertext, the blob holds ckks.ciphertext"):
        io.bfv.loads(ckks_blob, expected=Ciphertext)
    with pytest.raises(SerializationError, match="holds a ckks.params, not a bfv object"):
        io.bfv.loads(io.dumps(INSECURE_CKKS_N10))
    with pytest.raises(SerializationError, match="holds a bfv.ciphertext, not a ckks object"):
        io.ckks.loads(ct_blob)
    with pytest.raises(SerializationError, match="wrong kind: expected ckks.ciphertext, the blob holds bfv.ciphertext"):
        io.ckks.loads(ct_blob, expected=ckks.Ciphertext)
    with pytest.raises(TypeError, match="bfv.Params"):
        io.bfv.loads(ct_blob, params=INSECURE_CKKS_N10)
    with pytest.raises(TypeError, match="dumps takes bfv.Params"):
        io.bfv.dumps(ckks_ciphertext())


# --------------------------------------------------------------------------------------------------
# Refusals: parameters and contents
# --------------------------------------------------------------------------------------------------


def test_blob_for_other_params_refused(ctx, ct_blob):
    with pytest.raises(SerializationError, match="other parameters"):
        io.bfv.loads(ct_blob, params=PC)
    with pytest.raises(SerializationError, match="other parameters"):
        io.bfv.loads(io.bfv.dumps(P), params=PC)
    with pytest.raises(SerializationError, match="differ"):
        io.bfv.dumps(ctx[4], params=PC)


def test_parameter_description_tampering_refused(ct_blob):
    with pytest.raises(SerializationError, match="digest mismatch"):
        io.bfv.loads(edited(ct_blob, lambda h: h["params"].update(t=257)))  # valid parameters, another digest
    with pytest.raises(SerializationError, match="invalid"):
        io.bfv.loads(edited(ct_blob, lambda h: h["params"].update(t=1)))
    with pytest.raises(SerializationError, match="params.dnum must be an integer"):
        io.bfv.loads(edited(ct_blob, lambda h: h["params"].update(dnum="2")))
    with pytest.raises(SerializationError, match="parameter description must have the keys"):
        io.bfv.loads(edited(ct_blob, lambda h: h["params"].update(levels=3)))
    with pytest.raises(SerializationError, match="digest mismatch"):
        io.bfv.loads(edited(ct_blob, lambda h: h.update(params_digest="0" * 64)))


@pytest.mark.parametrize(("limb", "value"), [(0, 0xFFFFFFFF), (0, P.q[0]), (L - 1, P.q[-1])])
def test_out_of_range_residue_refused(ct_blob, limb, value):
    with pytest.raises(SerializationError, match="out of range"):
        io.bfv.loads(with_word(ct_blob, "c1", limb * N + 7, value))
    ok = value - 1 if value == P.q[limb] else 1
    io.bfv.loads(with_word(ct_blob, "c1", limb * N + 7, ok))  # the same surgery in range loads


def test_out_of_range_key_residue_refused(ek_blob):
    name = f"galois.{2 * N - 1}.b"
    with pytest.raises(SerializationError, match="out of range"):
        io.bfv.loads(with_word(ek_blob, name, L * N, 0xFFFFFFFF))  # first word of the first special-prime limb


def test_plaintext_value_at_least_t_refused(ctx):
    blob = io.bfv.dumps(ctx[3])
    with pytest.raises(SerializationError, match="plaintext modulus t = 65537"):
        io.bfv.loads(with_word(blob, "coeffs", 5, T))
    io.bfv.loads(with_word(blob, "coeffs", 5, T - 1))
    bad = Plaintext(ctx[3].coeffs.at[0].set(T), P, Encoding.BATCH)
    with pytest.raises(SerializationError, match="plaintext modulus"):
        io.bfv.dumps(bad)


def test_plaintext_encoding_tampering_refused():
    blob = io.bfv.dumps(ops.encode(PC, [1, 2, 3], encoding=Encoding.COEFF))
    with pytest.raises(SerializationError, match="batching t"):
        io.bfv.loads(edited(blob, lambda h: h["meta"].update(encoding="batch")))
    with pytest.raises(SerializationError, match="encoding must be one of"):
        io.bfv.loads(edited(blob, lambda h: h["meta"].update(encoding="ntt")))


def test_wrong_shapes_refused(ct_blob):
    def as_flat(name):
        def edit(header):
            entry = next(e for e in header["arrays"] if e["name"] == name)
            entry["shape"] = [L * N]  # the same length, so only the shape check notices

        return edit

    with pytest.raises(SerializationError, match=r"expected \[\.\.\., 3, 256\]"):
        io.bfv.loads(edited(ct_blob, as_flat("c0")))
    with pytest.raises(SerializationError, match=r"array 'c1' is uint32\[768\], expected uint32\[3, 256\]"):
        io.bfv.loads(edited(ct_blob, as_flat("c1")))
    with pytest.raises(SerializationError, match="meta must have the keys"):
        io.bfv.loads(edited(ct_blob, lambda h: h["meta"].update(level=1)))


def test_altered_seed_refused(ek_blob):
    with pytest.raises(SerializationError, match="re-expanded"):
        io.bfv.loads(with_word(ek_blob, "relin.seed.words", 3, 12345))
