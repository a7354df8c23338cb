"""Scheme-switching keys (crossfhe.io.switch, kind ``switch.keys``): one blob of every part of
:class:`crossfhe.convert.switch.SwitchKeys`, a word-for-word round trip whose keys still switch, and every malformed,
edited-and-resealed blob refused with a SerializationError.

At insecure sizes (CKKS N 2^11 with bootstrapping levels, TFHE 4-bit messages), the keys of tests/test_switch.py.
"""

from __future__ import annotations

import json
import random

import jax
import numpy as np
import pytest
from test_io import reseal, split_blob
from test_io_checks import Case, Range, mutations, outcome

from crossfhe import io, testing
from crossfhe.api.ckks import CKKSContext, CKKSPublicContext
from crossfhe.api.switch import SchemeSwitch
from crossfhe.api.tfhe import TFHEContext, TFHEPublicContext
from crossfhe.convert import switch as sw
from crossfhe.errors import SerializationError
from crossfhe.io import format as fmt
from crossfhe.io import switch as sio

CKKS_P = testing.INSECURE_CKKS_BOOT_N11
TFHE_P = testing.INSECURE_TFHE_P4
KIND = "switch.keys"


@pytest.fixture(scope="module")
def setup():
    ck = CKKSContext.create(CKKS_P, insecure=True, seed=b"switch-ckks".ljust(32, b"\0"), progress=None)
    tf = TFHEContext.create(TFHE_P, insecure=True, seed=b"switch-tfhe".ljust(32, b"\0"), progress=None)
    s = SchemeSwitch.create(ck, tf, slots=8, seed=b"switch-keys".ljust(32, b"\0"), progress=None)
    blob = io.dumps(s.keys)
    return ck, tf, s, blob


@pytest.fixture(scope="module")
def loaded(setup):
    """The keys read back for the contexts' parameters (whose kernel set, resolved by the context, a blob does not
    record: parameters read from the blob alone are equal but for it)."""
    keys = setup[2].keys
    return sio.loads_switch_keys(setup[3], keys.ckks_params, tfhe_params=keys.tfhe_params)


def _tolerance(tparams) -> float:
    """tests/test_switch.py's bound on a value back in CKKS, in output steps."""
    noise, evalmod = sw.shift_errors(tparams, sw.shift_for(tparams))
    return 8 * noise + evalmod + 2.0**-10


def refused(blob, load=io.loads) -> str:
    with pytest.raises(SerializationError) as e:
        load(blob)
    return str(e.value)


def edited(blob: bytes, edit) -> bytes:
    """The blob with ``edit(header)`` applied to its JSON header, resealed (lengths and SHA-256 recomputed)."""
    header = split_blob(blob)[1]
    edit(header)
    return reseal(blob, header=header)


def with_arrays(blob: bytes, edit) -> bytes:
    """The blob with ``edit(arrays)`` applied to a copy of its arrays, repacked (a valid container)."""
    c = fmt.unpack(blob)
    arrays = {k: v.copy() for k, v in c.arrays.items()}
    edit(arrays)
    return fmt.pack(c.kind, c.fields, arrays)


# --------------------------------------------------------------------------------------------------
# Round trip
# --------------------------------------------------------------------------------------------------


def test_round_trip_is_word_for_word(setup, loaded):
    _, _, s, blob = setup
    keys = s.keys
    assert io.kind_of(blob) == KIND and KIND in io.kinds()
    assert isinstance(loaded, sw.SwitchKeys)
    leaves, tree = jax.tree_util.tree_flatten(keys)
    leaves2, tree2 = jax.tree_util.tree_flatten(loaded)
    assert tree2 == tree  # every static: slots, key ids, moduli, gadgets, sigmas, parameters, configuration
    assert len(leaves2) == len(leaves)
    for x, y in zip(leaves, leaves2, strict=True):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)
    assert (loaded.slots, loaded.ckks_key_id, loaded.tfhe_key_id) == (keys.slots, keys.ckks_key_id, keys.tfhe_key_id)
    for name in ("to_tfhe", "to_ckks"):
        a, b = getattr(keys, name), getattr(loaded, name)
        assert (b.moduli, b.gadget, b.sigma) == (a.moduli, a.gadget, a.sigma)
    assert sorted(loaded.packing) == sorted(keys.packing)
    assert loaded.bootstrap.config == keys.bootstrap.config
    assert loaded.bootstrap.sparse_ring == keys.bootstrap.sparse_ring
    assert loaded.bootstrap.evaluation is loaded.evaluation  # stored once, shared as keygen makes them
    assert loaded.ckks_params is keys.ckks_params and loaded.tfhe_params is keys.tfhe_params
    assert io.dumps(loaded) == blob
    alone = io.loads(blob)
    assert alone.ckks_params.digest() == CKKS_P.digest() and alone.tfhe_params == TFHE_P
    assert io.dumps(alone) == blob


def test_loads_checks_params_and_holds_no_secret(setup):
    ck, tf, s, blob = setup
    assert io.loads(blob, params=CKKS_P, expected=sw.SwitchKeys).ckks_params is CKKS_P
    assert sio.loads_switch_keys(blob, TFHE_P).tfhe_params is TFHE_P
    assert io.loads(blob, context=ck.public).slots == 8
    assert "other CKKS parameters" in refused(blob, lambda b: io.loads(b, params=testing.INSECURE_CKKS_N11_COMPOSITE))
    assert "other TFHE parameters" in refused(blob, lambda b: io.loads(b, params=testing.INSECURE_TFHE_P2))
    assert "params differ" in refused(None, lambda _: io.dumps(s.keys, params=testing.INSECURE_TFHE_P2))
    header = split_blob(blob)[1]
    names = {e["name"].rpartition(".")[2] for e in header["arrays"]}
    assert not names & {"coeffs", "lwe_key", "glwe_key"}
    for secret in (np.asarray(ck.secret_key.coeffs, "<i4"), np.asarray(tf.secret_key.glwe_key, "<i4")):
        assert secret.tobytes() not in blob
    assert {"ckks_params", "ckks_params_digest", "tfhe_params", "tfhe_params_digest", "meta"} < set(header)
    assert header["meta"]["to_tfhe"]["gadget"] == {"base_log": s.keys.to_tfhe.gadget.base_log,
                                                    "levels": sw.GADGET_LEVELS}


# slow: 28 s cold in a 2-core run; by default the loaded keys equal the saved ones word for word
# (test_round_trip_is_word_for_word), and a server switches with keys it loaded (tests/test_serve.py,
# test_a_switching_function_is_served)
@pytest.mark.slow
def test_loaded_keys_switch(setup, loaded):
    """The loaded keys alone (public contexts, as a server holds them) run ReLU through TFHE and back, within
    tests/test_switch.py's bound for the original keys."""
    ck, _, s, _ = setup
    public = SchemeSwitch(CKKSPublicContext(loaded.ckks_params, loaded.evaluation, loaded.bootstrap),
                          TFHEPublicContext(loaded.tfhe_params, loaded.server), loaded)
    interval = (-3.0, 3.0)
    qz = public.quantizer(interval)
    v = qz.dequantize(np.array([0, 2, 3, 5, 7])) + np.array([0.2, -0.3, 0.1, 0.25, -0.1]) * qz.step
    y = public.relu(ck.encrypt(v), interval)
    ref = np.maximum(qz.dequantize(qz.quantize(v)), 0)
    np.testing.assert_allclose(ck.decrypt(y), ref, atol=_tolerance(loaded.tfhe_params) * qz.step / 2)


# --------------------------------------------------------------------------------------------------
# Refusals
# --------------------------------------------------------------------------------------------------


def test_truncated_and_corrupted_blobs_refused(setup):
    blob = setup[3]
    assert "truncated" in refused(blob[:-1])
    assert "truncated" in refused(blob[: len(blob) // 2])
    assert "SHA-256" in refused(blob[:-40] + bytes([blob[-40] ^ 1]) + blob[-39:])  # a payload byte flipped
    assert "SHA-256" in refused(blob[:30] + bytes([blob[30] ^ 4]) + blob[31:])  # a header byte flipped
    assert "wrong kind" in refused(io.dumps(CKKS_P), sio.loads_switch_keys)
    assert "truncated" in refused(blob[:-1], sio.loads_switch_keys)


def _set(path, value):
    def edit(header):
        obj = header
        for key in path[:-1]:
            obj = obj[key]
        obj[path[-1]] = value
    return edit


HEADER_EDITS = [
    (("meta", "slots"), 3, "meta.slots"),
    (("meta", "slots"), 16, "meta.bootstrap.config.slots"),
    (("meta", "slots"), "8", "meta.slots"),
    (("meta", "ckks_key_id"), "0" * 32, "ckks_key_id"),
    (("meta", "tfhe_key_id"), "0" * 32, "tfhe_key_id"),
    (("meta", "tfhe_key_id"), "XYZ", "meta.tfhe_key_id"),
    (("meta", "to_tfhe", "moduli"), [268369921], "meta.to_tfhe.moduli"),
    (("meta", "to_tfhe", "gadget", "levels"), 3, "does not decompose exactly"),
    (("meta", "to_ckks", "gadget", "levels"), 10**400, "meta.to_ckks.gadget.levels"),
    (("meta", "to_ckks", "gadget", "base_log"), 0, "meta.to_ckks.gadget.base_log"),
    (("meta", "to_ckks", "gadget", "levels"), 5, "'to_ckks.a'"),
    (("meta", "to_tfhe", "sigma"), "nan", "meta.to_tfhe.sigma"),
    (("meta", "to_tfhe", "sigma"), 3.19, "meta.to_tfhe.sigma"),
    (("meta", "packing"), {}, "meta.packing"),
    (("meta", "packing", 0, "element"), 7, "meta.packing"),
    (("meta", "bootstrap", "evaluation"), "mine", "meta.bootstrap.evaluation"),
    (("meta", "bootstrap", "config", "slots"), 16, "meta.bootstrap.config"),
    (("meta", "evaluation", "relin"), None, "meta.evaluation.relin"),
    (("meta", "evaluation", "galois"), [], "arrays"),
    (("meta", "bootstrap"), None, "arrays"),
    (("meta", "server"), {}, "meta"),
    (("tfhe_params_digest",), "0" * 64, "tfhe_params_digest mismatch"),
    (("ckks_params_digest",), 5, "ckks_params_digest mismatch"),
    (("ckks_params", "n"), 4096, "ckks_params"),
    (("tfhe_params", "message_bits"), "4", "tfhe_params"),
    (("params",), {}, "header must have the keys"),
]


@pytest.mark.parametrize(("path", "value", "named"), HEADER_EDITS, ids=[f"{'.'.join(map(str, p))}={v!r}"[:60]
                                                                        for p, v, _ in HEADER_EDITS])
def test_edited_header_fields_resealed_refused(setup, path, value, named):
    message = refused(edited(setup[3], _set(path, value)))
    assert message.startswith(KIND) and named in message, message


def test_tfhe_parameters_too_large_for_the_ckks_ring_refused(setup):
    """Valid TFHE parameters, their digest recomputed, whose long key (k N_t) does not fit the CKKS ring."""
    def edit(header):
        header["tfhe_params"]["glwe_dim"] = 3  # k N_t = 3072 > N = 2048
        header["tfhe_params_digest"] = io.tfhe.params_from_description(header["tfhe_params"]).digest()

    message = refused(edited(setup[3], edit))
    assert message.startswith(KIND) and "the TFHE long key has 3072 coefficients" in message, message


def _ranges(keys: sw.SwitchKeys):
    """The residue range of each array of a switch.keys blob (None: int32 words mod 2^32, seeds)."""
    params, tparams = keys.ckks_params, keys.tfhe_params
    q0 = tuple(params.moduli_at(0))
    chain = tuple(params.q) + tuple(params.p)
    sparse = tuple(keys.bootstrap.sparse_ring.q + keys.bootstrap.sparse_ring.p)

    def ranges(name: str, shape: tuple):
        last = name.rpartition(".")[2]
        if name == "server.bsk":
            return Range(0, tuple(tparams.moduli))
        if last not in ("a", "b") or len(shape) < 2:
            return None
        if name.startswith(("to_tfhe.", "to_ckks.")):
            return Range(0, q0)
        if name.startswith("packing."):
            return Range(0, q0 + tuple(params.p[:1]))
        if name.startswith("bootstrap.to_sparse."):
            return Range(0, sparse)
        return Range(0, chain[: shape[-2]])

    return ranges


def test_residues_at_or_above_their_modulus_refused(setup):
    """In each part, a word set to its limb's modulus (and one to 2^32 - 1), resealed: refused, naming the array."""
    blob = setup[3]
    c = fmt.unpack(blob)
    ranges = _ranges(setup[2].keys)
    rng = random.Random("io-switch-words")
    galois = max(setup[2].keys.evaluation.galois)
    names = ["to_tfhe.a", "to_tfhe.b", "to_ckks.a", "to_ckks.b", "packing.3.b", "evaluation.public.b",
             "evaluation.relin.b", f"evaluation.galois.{galois}.b", "bootstrap.to_sparse.b", "bootstrap.to_dense.b",
             "server.bsk"]
    for name in names:
        a = c.arrays[name]
        index = tuple(rng.randrange(d) for d in a.shape)
        q = ranges(name, a.shape).at(index)[1]
        for word in (q, 2**32 - 1):
            def edit(arrays, name=name, index=index, word=word):
                arrays[name][index] = word
            message = refused(with_arrays(blob, edit))
            assert message.startswith(KIND) and repr(name) in message and "out of range" in message, message


def test_missing_extra_and_reshaped_arrays_refused(setup):
    blob = setup[3]
    for name in ("to_ckks.a", "packing.5.b", "evaluation.relin.b", "bootstrap.to_dense.seed.words", "server.ksk"):
        message = refused(with_arrays(blob, lambda arrays, name=name: arrays.pop(name)))
        assert message.startswith(KIND) and name in message and "missing" in message, message
    message = refused(with_arrays(blob, lambda arrays: arrays.update({"evaluation.galois.7.b": arrays["to_tfhe.a"]})))
    assert "unexpected" in message and "evaluation.galois.7.b" in message

    def reshape(arrays):
        arrays["to_tfhe.b"] = np.ascontiguousarray(arrays["to_tfhe.b"][:-1])

    assert "'to_tfhe.b'" in refused(with_arrays(blob, reshape))

    def retype(arrays):
        arrays["server.ksk"] = arrays["server.ksk"].view(np.uint32)

    assert "'server.ksk'" in refused(with_arrays(blob, retype))


def test_resealed_mutations_are_refused_or_harmless(setup):
    """tests/test_io_checks.py's seeded mutations (header values, array table, words, arrays, header bytes), resealed:
    refused with a SerializationError or loaded as keys whose every word is in range; nothing else escapes."""
    _, _, s, blob = setup
    case = Case(KIND, blob, io.loads, io.dumps, _ranges(s.keys))
    tally = dict.fromkeys(("refused", "equal", "different"), 0)
    for m in mutations(case, random.Random("io-switch"), 60):
        try:
            result = outcome(case, m)
        except Exception as e:  # noqa: BLE001 - the failure this test exists to catch
            pytest.fail(f"{m.label}: {type(e).__name__} escaped the load: {e}")
        assert result in tally, f"{m.label}: {result}"
        tally[result] += 1
    assert tally["refused"] >= 30, tally


def test_header_json_is_the_documented_one(setup):
    """The header's own keys, and meta's, are those the module docstring lists (a JSON object, sorted, ASCII)."""
    header = split_blob(setup[3])[1]
    assert set(header) == sio.FIELDS | {"kind", "arrays"}
    assert set(header["meta"]) == sio.META
    assert json.loads(json.dumps(header)) == header
