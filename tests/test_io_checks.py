"""Every load is checked from the content, whatever the kind: a blob edited and resealed (its SHA-256
recomputed, as anyone who edits a blob can do) is either loaded as an equal object (a harmless edit), or as
another object whose every word lies in its declared range, or refused with a SerializationError; no other
exception escapes, and a word set to its limb's modulus or above is always refused.

The mutation tests take one valid blob of each kind (small insecure presets of crossfhe.testing), apply a
seeded, bounded set of edits (header JSON bytes flipped or cut, header values replaced by other JSON types,
keys removed or added, array table entries changed, array words set to q, 2^31 and 2^32 - 1, arrays reshaped,
retyped, dropped or added) and reseal each with :func:`crossfhe.io.format.pack` (or, for edits below the
JSON, by the byte layout of crossfhe/io/format.py's docstring, with the helpers of tests/test_io.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import stat
import struct
from collections.abc import Callable
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np
import pytest
from test_io import reseal, split_blob

from crossfhe import BFVContext, CKKSContext, TFHEContext, io
from crossfhe.bfv import ops as bfv
from crossfhe.ckks import bootstrap as bt
from crossfhe.ckks import ops as ckks
from crossfhe.core import keyswitch as ks
from crossfhe.core.keys import PublicKey, gen_secret_key
from crossfhe.errors import SerializationError
from crossfhe.io import circuit_file as cf
from crossfhe.io import format as fmt
from crossfhe.io.checks import check_residues
from crossfhe.io.circuit_value import LeafSpec, pack_circuit_value, unpack_circuit_value
from crossfhe.linalg import hmvp
from crossfhe.math.random import Rng, seed_key
from crossfhe.testing import INSECURE_BFV_N256, INSECURE_CKKS_BOOT_N11, INSECURE_CKKS_N10, INSECURE_TFHE_P2
from crossfhe.tfhe import ops as tfhe

CP, BP, TP, BOOT = INSECURE_CKKS_N10, INSECURE_BFV_N256, INSECURE_TFHE_P2, INSECURE_CKKS_BOOT_N11
MUTATIONS = int(os.environ.get("CROSSFHE_IO_MUTATIONS", "40"))
"""Mutations per kind (seeded; the same ones every run)."""


# --------------------------------------------------------------------------------------------------
# Cases: one valid blob of each kind, how to load it, how to write the loaded object, the words' ranges
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Range:
    """Valid words: ``lo <= w < hi``, ``hi`` an int or one bound per index of axis ``axis`` (a limb's modulus)."""

    lo: int
    hi: int | tuple[int, ...]
    axis: int = -2

    def at(self, index: tuple) -> tuple[int, int]:
        return self.lo, self.hi if isinstance(self.hi, int) else self.hi[index[self.axis]]

    def holds(self, a: np.ndarray) -> bool:
        hi = np.asarray(self.hi, dtype=np.int64)
        if hi.ndim:
            hi = hi.reshape((-1,) + (1,) * (-self.axis - 1))
        a = a.astype(np.int64)
        return bool(np.all((a >= self.lo) & (a < hi)))


Ranges = Callable[[str, tuple], "Range | None"]
"""(array name, shape) -> the array's Range, or None where any word is valid."""


@dataclass(frozen=True)
class Case:
    kind: str
    blob: bytes
    load: Callable  # blob -> object
    dump: Callable  # object -> blob
    ranges: Ranges


def rlwe_ranges(params, sparse: tuple[int, ...] = ()) -> Ranges:
    """Residue arrays of CKKS and BFV blobs: [..., limbs, N] over a prefix of Q ∪ P (``to_sparse.*``: over
    ``sparse``); BFV plaintext coefficients below t."""
    chain = tuple(params.q) + tuple(params.p)

    def ranges(name: str, shape: tuple):
        last = name.rpartition(".")[2]
        if last in ("c0", "c1", "poly", "b", "a") and len(shape) >= 2:
            return Range(0, sparse if name.startswith("to_sparse.") else chain[: shape[-2]])
        if name == "coeffs":
            return Range(0, params.t)
        return None

    return ranges


def secret_ranges(name: str, shape: tuple):
    return Range(-1, 2) if name == "coeffs" else None


def tfhe_ranges(params) -> Ranges:
    def ranges(name: str, shape: tuple):
        if name in ("a", "bsk"):
            return Range(0, tuple(params.moduli))
        if name == "b":
            return Range(0, tuple(params.moduli), -1)
        if name in ("lwe_key", "glwe_key"):
            return Range(0, 2)
        return None  # ksk: int32 words mod 2^32

    return ranges


def minimal_bootstrap_keys(sk, ek):
    """bootstrap.Keys with the encapsulation keys of :func:`crossfhe.ckks.bootstrap.keygen` but no Galois keys
    (serialization does not need them; the full key set takes a minute to make)."""
    params, rng = ek.params, Rng(bytes(range(5, 37)))
    ring = bt.sparse_ring(params)
    sk_sparse = gen_secret_key(ring, rng.next_key(), hamming_weight=bt.EPHEMERAL_WEIGHT)
    to_sparse = ks.gen_keyswitch_key(sk_sparse, sk.residues(ring.q + ring.p), ring, rng.next_key(), dnum=len(ring.q))
    to_dense = ks.gen_keyswitch_key(sk, sk.residues(params.q + params.p), params, rng.next_key(), dnum=params.dnum)
    return bt.Keys(ek, to_sparse, to_dense, ring, bt.config_for(params, 8))


def _unseeded(pk: PublicKey) -> PublicKey:
    return PublicKey(pk.b, pk.a, None, pk.sigma)


def ckks_cases() -> list[Case]:
    ctx = CKKSContext.create(CP, seed=b"io-checks-ckks".ljust(32, b"\0"), insecure=True, progress=False)
    sk, ek = ctx.secret_key, ctx.public.keys
    pt = ckks.encode(CP, np.linspace(-1, 1, CP.slots))
    ct = ckks.encrypt(ek, pt, key=seed_key(bytes(range(32))))
    r, load = rlwe_ranges(CP), io.loads
    cases = [Case("ckks.params", io.dumps(CP), load, io.dumps, r),
             Case("ckks.ciphertext", io.dumps(ct), load, io.dumps, r),
             Case("ckks.ciphertext/level1", io.dumps(ckks.drop_level(ct, 1)), load, io.dumps, r),
             Case("ckks.plaintext", io.dumps(pt), load, io.dumps, r),
             Case("ckks.public_key", io.dumps(ek.public, params=CP), load, lambda k: io.dumps(k, params=CP), r),
             Case("ckks.public_key/stored", io.dumps(_unseeded(ek.public), params=CP), load,
                  lambda k: io.dumps(k, params=CP), r),
             Case("ckks.evaluation_keys", io.dumps(ek), load, io.dumps, r),
             Case("ckks.secret_key", io.dumps_secret_key(sk, params=CP),
                  lambda b: io.loads_secret_key(b, params=CP), lambda k: io.dumps_secret_key(k, params=CP),
                  secret_ranges),
             Case("ckks.vector", io.dumps(ctx.encrypt(np.linspace(-1, 1, 5))),
                  lambda b: io.loads(b, context=ctx.public), io.dumps, r),
             Case("ckks.public_context", io.dumps(ctx.public), load, io.dumps, r)]
    bsk, bek = ckks.keygen(BOOT, seed=bytes(range(2, 34)))
    boot = minimal_bootstrap_keys(bsk, bek)
    cases.append(Case("ckks.bootstrap_keys", io.ckks.dumps_bootstrap_keys(boot), io.ckks.loads_bootstrap_keys,
                      io.ckks.dumps_bootstrap_keys, rlwe_ranges(BOOT, tuple(boot.sparse_ring.q + boot.sparse_ring.p))))
    return cases


def bfv_cases() -> list[Case]:
    ctx = BFVContext.create(BP, seed=b"io-checks-bfv".ljust(32, b"\0"), insecure=True, progress=False)
    sk, ek = ctx.secret_key, ctx.public.keys
    pt = bfv.encode(BP, np.arange(BP.n) % BP.t)
    ct = bfv.encrypt(ek, pt, key=seed_key(bytes(range(32))))
    vec = hmvp.encrypt_vector(ek, BP, np.arange(300) % BP.t, key=seed_key(bytes(32)))
    r, load = rlwe_ranges(BP), io.loads
    return [Case("bfv.params", io.dumps(BP), load, io.dumps, r),
            Case("bfv.ciphertext", io.dumps(ct), load, io.dumps, r),
            Case("bfv.plaintext", io.dumps(pt), load, io.dumps, r),
            Case("bfv.public_key", io.dumps(ek.public, params=BP), load, lambda k: io.dumps(k, params=BP), r),
            Case("bfv.evaluation_keys", io.dumps(ek), load, io.dumps, r),
            Case("bfv.secret_key", io.dumps_secret_key(sk, params=BP),
                 lambda b: io.loads_secret_key(b, params=BP), lambda k: io.dumps_secret_key(k, params=BP),
                 secret_ranges),
            Case("bfv.hmvp_vector", io.dumps(vec), load, io.dumps, r),
            Case("bfv.vector", io.dumps(ctx.encrypt([1, 2, 3])), lambda b: io.loads(b, context=ctx.public), io.dumps,
                 r)]


def tfhe_cases() -> list[Case]:
    ctx = TFHEContext.create(TP, seed=b"io-checks-tfhe".ljust(32, b"\0"), insecure=True, progress=False)
    ck, server_key = ctx.secret_key, ctx.public.keys
    ct = tfhe.encrypt(ck, np.array([[1, 0, 1], [0, 1, 1]]), key=bytes(range(32)))
    r = tfhe_ranges(TP)
    load = io.loads
    x = ctx.encrypt(1)
    return [Case("tfhe.params", io.dumps(TP), load, io.dumps, r),
            Case("tfhe.ciphertext", io.dumps(ct, params=TP), lambda b: io.loads(b, params=TP),
                 lambda c: io.dumps(c, params=TP), r),
            Case("tfhe.server_key", io.dumps(server_key), load, io.dumps, r),
            Case("tfhe.client_key", io.dumps_secret_key(ck), io.loads_secret_key, io.dumps_secret_key, r),
            Case("tfhe.integer", io.dumps(x), lambda b: io.loads(b, context=ctx.public), io.dumps, r),
            Case("tfhe.radix", io.dumps(ctx.encrypt(np.array([3, 200]), dtype=np.uint8) + 1),
                 lambda b: io.loads(b, context=ctx.public), io.dumps, r)]


def switch_cases() -> list[Case]:
    """Scheme-switching keys of 8 slots (CKKS N 2^11 bootstrappable, TFHE 4-bit): every part of the blob; a served
    switching function (ReLU, its table's words in [0, 2^P))."""
    from crossfhe.api.switch import SchemeSwitch
    from crossfhe.testing import INSECURE_TFHE_P4

    ck = CKKSContext.create(BOOT, seed=b"io-checks-switch-c".ljust(32, b"\0"), insecure=True, progress=False)
    tf = TFHEContext.create(INSECURE_TFHE_P4, seed=b"io-checks-switch-t".ljust(32, b"\0"), insecure=True,
                            progress=False)
    keys = SchemeSwitch.create(ck, tf, slots=8, seed=b"io-checks-switch".ljust(32, b"\0"), progress=False).keys
    q0, chain = tuple(BOOT.moduli_at(0)), tuple(BOOT.q) + tuple(BOOT.p)
    sparse = tuple(keys.bootstrap.sparse_ring.q + keys.bootstrap.sparse_ring.p)

    def ranges(name: str, shape: tuple):
        if name == "server.bsk":
            return Range(0, tuple(INSECURE_TFHE_P4.moduli))
        if name.rpartition(".")[2] not in ("a", "b") or len(shape) < 2:
            return None  # seeds; server.ksk: int32 words mod 2^32
        if name.startswith(("to_tfhe.", "to_ckks.")):
            return Range(0, q0)
        if name.startswith("packing."):
            return Range(0, q0 + tuple(BOOT.p[:1]))
        return Range(0, sparse if name.startswith("bootstrap.to_sparse.") else chain[: shape[-2]])

    from crossfhe.api.switch import SwitchFunction

    fn = SwitchFunction.create(BOOT, INSECURE_TFHE_P4, "relu", (-1, 1), slots=8, name="relu")
    return [Case("switch.keys", io.dumps(keys), io.loads, io.dumps, ranges),
            Case("switch.function", io.dumps(fn), io.loads, io.dumps,
                 lambda name, shape: Range(0, 2**INSECURE_TFHE_P4.message_bits))]


CIRCUIT = hashlib.sha256(b"a circuit").hexdigest()
KEY_ID = "0123456789abcdef" * 2


def circuit_value_case() -> Case:
    """A circuit value of two CKKS-like leaves (uint32 [2, limbs, N], batch [2]) read against its leaf specs."""
    moduli = tuple(CP.q)
    rng = np.random.default_rng(3)
    leaves = tuple(np.stack([rng.integers(0, q, (2, CP.n)) for q in moduli], axis=1).astype(np.uint32)
                   for _ in range(2))
    specs = (LeafSpec((len(moduli), CP.n), "uint32", moduli), LeafSpec((len(moduli), CP.n), "uint32", moduli))
    blob = pack_circuit_value(leaves, batch_shape=(2,), key_id=KEY_ID, circuit=CIRCUIT, position=1, output=True)

    def load(b):
        return unpack_circuit_value(b, leaves=specs)

    def dump(v):
        return pack_circuit_value(v.leaves, batch_shape=v.batch_shape, key_id=v.key_id, circuit=v.circuit,
                                  position=v.position, output=v.output)

    return Case("circuit.value", blob, load, dump, lambda name, shape: Range(0, moduli))


# --------------------------------------------------------------------------------------------------
# Mutations
# --------------------------------------------------------------------------------------------------

JSON_VALUES = (None, True, False, 0, 1, -1, 2**31, 2**64 + 1, -(2**63), 10**30, 0.5, -0.0, 1e300, "", "x",
               "0" * 64, "seed", [], [0], [1, 2], {}, {"x": 1})
"""Values a header field is replaced with: every JSON type, edge integers, strings of the format's own words."""
WORDS = (2**31, 2**32 - 1, 2, 1)
"""Array words tried besides the limb's modulus q."""


@dataclass(frozen=True)
class Mutation:
    label: str
    blob: bytes
    must_fail: bool = False


def frame(header: bytes, payload: bytes, version: int = 1) -> bytes:
    """A blob from raw header bytes and payload: preamble, header, payload and a valid SHA-256."""
    body = struct.pack("<5sHIQ", b"CFHE\0", version, len(header), len(payload)) + header + payload
    return body + hashlib.sha256(body).digest()


def json_paths(obj, path=()):
    """Every path (tuple of keys and indices) into a JSON value, the root excluded."""
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for key, value in items:
        yield path + (key,)
        yield from json_paths(value, path + (key,))


def _set(obj, path, value):
    for key in path[:-1]:
        obj = obj[key]
    obj[path[-1]] = value


def _delete(obj, path):
    for key in path[:-1]:
        obj = obj[key]
    del obj[path[-1]]


def _get(obj, path):
    for key in path:
        obj = obj[key]
    return obj


def _signed(word: int, dtype) -> int:
    return word - 2**32 if np.dtype(dtype) == np.int32 and word >= 2**31 else word


def _word_mutations(case: Case, c: fmt.Container, rng: random.Random):
    name = rng.choice(sorted(c.arrays))
    a = c.arrays[name]
    if a.size == 0:
        return
    index = tuple(rng.randrange(d) for d in a.shape)
    bounds = case.ranges(name, a.shape)
    lo_hi = None if bounds is None or len(a.shape) < -bounds.axis else bounds.at(index)
    words = ([lo_hi[1] % 2**32] if lo_hi is not None else []) + [rng.choice(WORDS)]
    for word in words:
        arrays = {k: v.copy() for k, v in c.arrays.items()}
        arrays[name][index] = np.array(word, dtype=np.uint32).view(a.dtype) if a.dtype == np.int32 else word
        value = _signed(word, a.dtype)
        bad = lo_hi is not None and not lo_hi[0] <= value < lo_hi[1]
        yield Mutation(f"{name}{list(index)} := {word}", fmt.pack(c.kind, c.fields, arrays), must_fail=bad)


def _array_mutations(c: fmt.Container, rng: random.Random):
    name = rng.choice(sorted(c.arrays) or ["none"])
    arrays = dict(c.arrays)
    a = arrays.get(name, np.zeros(0, np.uint32))
    choice = rng.randrange(7)
    if choice == 0:
        arrays[name] = a.reshape(-1)
    elif choice == 1:
        arrays[name] = a[None]
    elif choice == 2 and a.ndim and a.shape[-1] > 1:
        arrays[name] = np.ascontiguousarray(a[..., :-1])
    elif choice == 3:
        arrays[name] = a.view(np.int32 if a.dtype == np.uint32 else np.uint32)
    elif choice == 4:
        arrays.pop(name, None)
    elif choice == 5:
        arrays[rng.choice(["extra", f"{name}x", "leaf9", "galois.3.b"])] = np.zeros((2,), np.uint32)
    else:
        arrays[name] = np.concatenate([a, a[..., :1, :]], axis=-2) if a.ndim >= 2 else np.concatenate([a, a[:1]])
    return Mutation(f"array {name}: edit {choice}", fmt.pack(c.kind, c.fields, arrays))


def _field_mutations(c: fmt.Container, rng: random.Random):
    fields = json.loads(json.dumps(c.fields))
    paths = list(json_paths(fields))
    choice = rng.randrange(5)
    if choice == 0 or not paths:
        target = fields if not paths or rng.random() < 0.3 else _get(fields, rng.choice(paths))
        if isinstance(target, dict):
            target["zz_unknown"] = rng.choice(JSON_VALUES)
        elif isinstance(target, list):
            target.append(rng.choice(JSON_VALUES))
        label = "added a field"
    elif choice == 1:
        path = rng.choice(paths)
        _delete(fields, path)
        label = f"removed {list(path)}"
    elif choice == 2:
        kind = rng.choice(["ckks.ciphertext", "bfv.ciphertext", "tfhe.ciphertext", "ckks.secret_key", "circuit.value",
                           "zz.unknown", "ckks.vector", "tfhe.server_key", "ckks.bootstrap_keys"])
        return Mutation(f"kind := {kind}", fmt.pack(kind, c.fields, c.arrays))
    else:
        path = rng.choice(paths)
        value = rng.choice(JSON_VALUES)
        _set(fields, path, value)
        label = f"{list(path)} := {value!r}"
    return Mutation(label, fmt.pack(c.kind, fields, c.arrays))


def _table_mutations(blob: bytes, rng: random.Random):
    """Edits of the array table that :func:`crossfhe.io.format.pack` cannot make (it writes the table itself)."""
    _, header, _, payload = split_blob(blob)
    table = header["arrays"]
    if not table:
        header["arrays"] = [{"name": "x", "dtype": "uint32", "shape": [1], "offset": 0, "length": 4}]
        return Mutation("table: an array in an empty table", frame(json.dumps(header).encode(), payload + bytes(4)))
    i = rng.randrange(len(table))
    e = table[i]
    choice = rng.randrange(6)
    if choice == 0:
        shape = e["shape"]
        e["shape"] = rng.choice([[int(np.prod(shape))], [1, *shape], shape[::-1], [*shape[:-1], 2, -1]
                                 if shape and shape[-1] % 2 == 0 else [0, *shape]])
        if -1 in e["shape"]:
            e["shape"] = [*shape[:-1], 2, shape[-1] // 2]
    elif choice == 1:
        e["dtype"] = rng.choice(["int32", "uint32", "float32", "uint64", 5, None, ["uint32"]])
    elif choice == 2:
        e[rng.choice(["offset", "length"])] = rng.choice(JSON_VALUES)
    elif choice == 3:
        e["name"] = rng.choice(["", "zz", 5, None, table[-1]["name"]])
    elif choice == 4:
        e["extra"] = 1
    else:
        e["shape"] = [rng.choice([2**62, 2**31, -1, 0])] + e["shape"][1:]
    return Mutation(f"table entry {i}: edit {choice}", frame(json.dumps(header).encode(), payload))


def _byte_mutations(blob: bytes, rng: random.Random):
    """Edits of the header's bytes (the JSON itself), resealed."""
    _, _, raw, payload = split_blob(blob)
    choice = rng.randrange(8)
    if choice == 0:
        i = rng.randrange(len(raw))
        raw = raw[:i] + bytes([raw[i] ^ (1 << rng.randrange(8))]) + raw[i + 1 :]
    elif choice == 1:
        i = rng.randrange(len(raw))
        raw = raw[:i] + b"\xff\xfe" + raw[i:]
    elif choice == 2:
        raw = raw[: rng.randrange(len(raw))]
    elif choice == 3:
        raw = rng.choice([b"[]", b"null", b"{}", b'"x"', b"1", b"[" * 100_000 + b"]" * 100_000, b"\xef\xbb\xbf{}"])
    elif choice == 4:
        raw = b'{"kind":"x",' + raw[1:]
    elif choice == 5:
        digits = rng.choice([b"9" * 5000, b"NaN", b"Infinity", b"1e999", b"-0"])
        raw = raw.replace(b'"meta":', b'"meta":' + digits + b',"zz":', 1) if b'"meta":' in raw else raw + digits
    elif choice == 6:
        return Mutation("version 0", reseal(blob, version=0))
    else:
        return Mutation("payload cut", frame(raw, payload[: len(payload) // 2]))
    return Mutation(f"header bytes: edit {choice}", frame(raw, payload))


def mutations(case: Case, rng: random.Random, count: int):
    """``count`` seeded mutations of ``case.blob``, each resealed."""
    c = fmt.unpack(case.blob)
    families = [_word_mutations, _array_mutations, _field_mutations, _table_mutations, _byte_mutations]
    made = 0
    while made < count:
        family = rng.choice(families)
        if family is _word_mutations:
            if not c.arrays:
                continue
            for m in _word_mutations(case, c, rng):
                made += 1
                yield m
            continue
        made += 1
        yield family(case.blob if family in (_table_mutations, _byte_mutations) else c, rng)


def in_range(case: Case, blob: bytes) -> bool:
    """Whether every word of every array of ``blob`` lies in the range the case declares for it."""
    for name, a in fmt.unpack(blob).arrays.items():
        bounds = case.ranges(name, a.shape)
        if bounds is not None and not bounds.holds(a):
            return False
    return True


def outcome(case: Case, m: Mutation) -> str:
    """"refused" (SerializationError), "equal" (loaded and written back bit for bit), "different" (loaded as
    another object whose words are all in range); anything else is a failure (other exceptions propagate)."""
    try:
        obj = case.load(m.blob)
    except SerializationError:
        return "refused"
    if m.must_fail:
        return f"accepted an out-of-range word ({m.label})"
    again = case.dump(obj)
    if again == case.blob:
        return "equal"
    return "different" if in_range(case, again) else f"loaded out-of-range words ({m.label})"


# --------------------------------------------------------------------------------------------------
# Fixtures: the cases, built once per scheme on first use
# --------------------------------------------------------------------------------------------------

KINDS = {
    "ckks": ["ckks.params", "ckks.ciphertext", "ckks.ciphertext/level1", "ckks.plaintext", "ckks.public_key",
             "ckks.public_key/stored", "ckks.evaluation_keys", "ckks.secret_key", "ckks.vector", "ckks.public_context",
             "ckks.bootstrap_keys"],
    "bfv": ["bfv.params", "bfv.ciphertext", "bfv.plaintext", "bfv.public_key", "bfv.evaluation_keys", "bfv.secret_key",
            "bfv.hmvp_vector", "bfv.vector"],
    "tfhe": ["tfhe.params", "tfhe.ciphertext", "tfhe.server_key", "tfhe.client_key", "tfhe.integer", "tfhe.radix"],
    "circuit": ["circuit.value"],
    "switch": ["switch.keys", "switch.function"],
}
ALL_KINDS = [kind for kinds in KINDS.values() for kind in kinds]
_MAKERS = {"ckks": ckks_cases, "bfv": bfv_cases, "tfhe": tfhe_cases, "circuit": lambda: [circuit_value_case()],
           "switch": switch_cases}


@pytest.fixture(scope="module")
def cases():
    """kind -> its Case; each scheme's objects are made on the first request for one of its kinds."""
    built: dict[str, Case] = {}

    def get(kind: str) -> Case:
        scheme = kind.partition(".")[0]
        if kind not in built:
            made = _MAKERS[scheme]()
            assert [c.kind for c in made] == KINDS[scheme]
            built.update({c.kind: c for c in made})
        return built[kind]

    return get


def refused(load, blob) -> str:
    """The message of the SerializationError ``load(blob)`` raises (the test fails on anything else)."""
    with pytest.raises(SerializationError) as e:
        load(blob)
    return str(e.value)


# --------------------------------------------------------------------------------------------------
# 1. Every kind, every way to be wrong: seeded resealed mutations
# --------------------------------------------------------------------------------------------------


def test_every_loadable_kind_has_a_case():
    """Each kind crossfhe.io reads (those the front end registers included) and each secret-key kind is mutated
    below; a kind added without a case fails here."""
    covered = {kind.partition("/")[0] for kind in ALL_KINDS}
    assert set(io.kinds()) | {"ckks.secret_key", "bfv.secret_key", "tfhe.client_key"} <= covered


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_resealed_mutations_are_refused_or_harmless(kind, cases):
    case = cases(kind)
    tally = dict.fromkeys(("refused", "equal", "different"), 0)
    for m in mutations(case, random.Random(f"io-checks/{kind}"), MUTATIONS):
        try:
            result = outcome(case, m)
        except Exception as e:  # noqa: BLE001 - the failure this test exists to catch
            pytest.fail(f"{kind}, {m.label}: {type(e).__name__} escaped the load: {e}")
        assert result in tally, f"{kind}, {m.label}: {result}"
        tally[result] += 1
    assert tally["refused"] >= MUTATIONS // 2, tally


NAMED_AS = {"bfv.vector": "bfv.ciphertext", "tfhe.integer": "tfhe.ciphertext", "tfhe.radix": "tfhe.ciphertext",
            "circuit.value": "circuit.value array"}
"""Kinds whose loader (the front end's) reports the array as that of the kind it holds."""


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_words_at_or_above_their_range_are_refused(kind, cases):
    """In every array with a declared range, one word set to its bound (q of its limb, t, 2 for a key bit) and one
    to 2^32 - 1 (or INT32_MIN where -1 is a valid word), resealed: refused, the message names the kind and array."""
    case = cases(kind)
    c = fmt.unpack(case.blob)
    rng = random.Random(f"io-checks-words/{kind}")
    checked = 0
    for name, a in sorted(c.arrays.items()):
        bounds = case.ranges(name, a.shape)
        if bounds is None:
            continue
        index = tuple(rng.randrange(d) for d in a.shape)
        lo, hi = bounds.at(index)
        for value in (hi, 2**32 - 1 if lo == 0 else -(2**31)):
            arrays = {k: v.copy() for k, v in c.arrays.items()}
            arrays[name].view(np.uint32)[index] = value % 2**32
            message = refused(case.load, fmt.pack(c.kind, c.fields, arrays))
            assert repr(name) in message and ("out of range" in message or "must be" in message), message
            assert message.startswith(NAMED_AS.get(c.kind, c.kind)), message
            checked += 1
    assert checked or not c.arrays or kind == "tfhe.params"


def test_the_reported_case_q_in_a_residue_word(cases):
    """The reported bug: a value's residue word set to q of its limb, resealed, loaded and decrypted to ~1e28.
    Refused, naming the kind, the array, the limb, q and the value."""
    case = cases("ckks.vector")
    c = fmt.unpack(case.blob)
    arrays = dict(c.arrays, c1=c.arrays["c1"].copy())
    arrays["c1"][2, 17] = CP.q[2]
    message = refused(case.load, fmt.pack(c.kind, c.fields, arrays))
    assert message.startswith("ckks.vector: array 'c1' holds") and f"limb 2, q = {CP.q[2]}" in message
    assert f"holds {CP.q[2]} at index (2, 17)" in message


# --------------------------------------------------------------------------------------------------
# 1. Explicit: non-residue ranges, shapes, dtypes, arrays, headers
# --------------------------------------------------------------------------------------------------


def test_secret_coefficient_int32_min_refused(cases):
    """|INT32_MIN| overflows int32, so an abs() check passed it; the bounds are checked directly."""
    for kind in ("ckks.secret_key", "bfv.secret_key"):
        case = cases(kind)
        c = fmt.unpack(case.blob)
        coeffs = c.arrays["coeffs"].copy()
        coeffs[5] = np.iinfo(np.int32).min
        message = refused(case.load, fmt.pack(c.kind, c.fields, {"coeffs": coeffs}))
        assert f"{kind}: array 'coeffs' holds -2147483648 at index (5,)" in message and "{-1, 0, 1}" in message


def test_client_key_bits_and_plaintext_messages_checked(cases):
    case = cases("tfhe.client_key")
    c = fmt.unpack(case.blob)
    for value in (2, -1):
        arrays = {k: v.copy() for k, v in c.arrays.items()}
        arrays["glwe_key"][0, 3] = value
        assert "must be 0 or 1" in refused(case.load, fmt.pack(c.kind, c.fields, arrays))
    case = cases("bfv.plaintext")
    c = fmt.unpack(case.blob)
    coeffs = c.arrays["coeffs"].copy()
    coeffs[9] = BP.t
    message = refused(case.load, fmt.pack(c.kind, c.fields, {"coeffs": coeffs}))
    assert f"bfv.plaintext: array 'coeffs' holds {BP.t} at index (9,): not below the plaintext modulus" in message


@pytest.mark.parametrize("kind", ["ckks.ciphertext", "bfv.evaluation_keys", "tfhe.server_key", "ckks.bootstrap_keys",
                                  "bfv.hmvp_vector", "circuit.value"])
def test_wrong_shapes_dtypes_missing_and_extra_arrays_refused(kind, cases):
    case = cases(kind)
    c = fmt.unpack(case.blob)
    name = sorted(c.arrays)[0]
    a = c.arrays[name]
    edits = {
        "flattened": dict(c.arrays, **{name: a.reshape(-1)}),
        "a limb short": dict(c.arrays, **{name: np.ascontiguousarray(a[..., :-1, :])}),
        "retyped": dict(c.arrays, **{name: a.view(np.int32 if a.dtype == np.uint32 else np.uint32)}),
        "missing": {k: v for k, v in c.arrays.items() if k != name},
        "extra": dict(c.arrays, **{f"{name}.extra": np.zeros(3, np.uint32)}),
    }
    for what, arrays in edits.items():
        message = refused(case.load, fmt.pack(c.kind, c.fields, arrays))
        assert name in message or "arrays" in message, (what, message)


def header_of(blob: bytes) -> dict:
    return split_blob(blob)[1]


@pytest.mark.parametrize("edit", [
    "meta not an object", "meta missing", "meta unknown key", "digest an int", "params a list", "params.n negative",
    "params.n huge", "params.q strings", "kind a number", "arrays not a list", "dtype a list", "shape negative",
    "shape huge", "offset a string", "length wrong", "header not UTF-8", "header cut", "header an array",
    "integer of 5000 digits", "float overflow", "NaN", "repeated key", "lengths do not add up",
])
def test_malformed_headers_refused(edit, cases):
    case = cases("ckks.ciphertext")
    _, header, raw, payload = split_blob(case.blob)
    h = json.loads(raw)
    entry = h["arrays"][0]
    raw_edits = {
        "header not UTF-8": raw[:20] + b"\xff\xfe" + raw[20:],
        "header cut": raw[: len(raw) // 2],
        "header an array": b"[1, 2]",
        "integer of 5000 digits": raw.replace(b'"meta":', b'"zz":' + b"9" * 5000 + b',"meta":'),
        "float overflow": raw.replace(b'"meta":', b'"zz":1e999,"meta":'),
        "NaN": raw.replace(b'"meta":', b'"zz":NaN,"meta":'),
        "repeated key": b'{"meta":{},' + raw[1:],
    }
    dict_edits = {
        "meta not an object": lambda: h.update(meta=[1]),
        "meta missing": lambda: h.pop("meta"),
        "meta unknown key": lambda: h["meta"].update(zz=1),
        "digest an int": lambda: h.update(params_digest=5),
        "params a list": lambda: h.update(params=[]),
        "params.n negative": lambda: h["params"].update(n=-1024),
        "params.n huge": lambda: h["params"].update(n=2**64),
        "params.q strings": lambda: h["params"].update(q=[str(q) for q in h["params"]["q"]]),
        "kind a number": lambda: h.update(kind=7),
        "arrays not a list": lambda: h.update(arrays={"c0": entry}),
        "dtype a list": lambda: entry.update(dtype=["uint32"]),
        "shape negative": lambda: entry.update(shape=[-1, *entry["shape"][1:]]),
        "shape huge": lambda: entry.update(shape=[2**62, *entry["shape"][1:]], length=4 * 2**62 * CP.n),
        "offset a string": lambda: entry.update(offset="0"),
        "length wrong": lambda: entry.update(length=entry["length"] - 4),
    }
    if edit in raw_edits:
        blob = frame(raw_edits[edit], payload)
    elif edit == "lengths do not add up":
        blob = bytearray(case.blob)
        struct.pack_into("<Q", blob, 11, len(payload) + 8)
        body = bytes(blob[:-32])
        blob = body + hashlib.sha256(body).digest()
    else:
        dict_edits[edit]()
        blob = frame(json.dumps(h).encode(), payload)
    loads = (case.load, io.ckks.loads) + ((io.kind_of,) if edit in raw_edits else ())
    for load in loads:
        assert refused(load, blob)


def test_bootstrap_keys_meta_and_arrays_checked(cases):
    """Regressions: meta not an object raised TypeError, a missing encapsulation array KeyError, and an extra
    ``to_sparse.*`` array was ignored."""
    case = cases("ckks.bootstrap_keys")
    c = fmt.unpack(case.blob)
    assert "meta must have the keys" in refused(case.load, fmt.pack(c.kind, dict(c.fields, meta=[1, 2]), c.arrays))
    missing = {k: v for k, v in c.arrays.items() if k != "to_dense.b"}
    assert "missing ['to_dense.b']" in refused(case.load, fmt.pack(c.kind, c.fields, missing))
    extra = dict(c.arrays, **{"to_sparse.junk": np.zeros(2, np.uint32)})
    assert "unexpected ['to_sparse.junk']" in refused(case.load, fmt.pack(c.kind, c.fields, extra))
    meta = json.loads(json.dumps(c.fields["meta"]))
    meta["config"]["degree"] = 10**9
    assert "meta.config is invalid" in refused(case.load, fmt.pack(c.kind, dict(c.fields, meta=meta), c.arrays))
    meta["config"]["degree"] = 47
    meta["config"]["cts_levels"] += 1
    assert "does not match" in refused(case.load, fmt.pack(c.kind, dict(c.fields, meta=meta), c.arrays))


def test_vector_clean_flag_is_a_bool(cases):
    case = cases("ckks.vector")
    c = fmt.unpack(case.blob)
    for value in (1, 0, "true"):
        fields = dict(c.fields, meta=dict(c.fields["meta"], clean=value))
        assert "meta.clean must be true or false" in refused(case.load, fmt.pack(c.kind, fields, c.arrays))


# --------------------------------------------------------------------------------------------------
# 2a. check_residues
# --------------------------------------------------------------------------------------------------


def test_check_residues_names_what_limb_value_and_index():
    moduli = (17, 97, 193)
    x = np.zeros((2, 3, 8), np.uint32)
    check_residues(x + np.array(moduli, np.uint32).reshape(3, 1) - 1, moduli, what="leaf0")
    x[1, 2, 5] = 193
    with pytest.raises(SerializationError, match=r"^leaf0 holds 193 at index \(1, 2, 5\), not in \[0, q\) for its "
                                                 r"limb 2, q = 193: out of range"):
        check_residues(x, moduli, what="leaf0")
    with pytest.raises(SerializationError, match=r"index \(11, 2, 5\)"):
        check_residues(x, moduli, what="a piece", start=10)
    b = np.zeros((4, 3), np.int32)
    b[3, 0] = -1
    with pytest.raises(SerializationError, match=r"lwe b holds -1 at index \(3, 0\).*limb 0, q = 17"):
        check_residues(b, moduli, what="lwe b", axis=-1)
    with pytest.raises(SerializationError, match="no limb axis -2 of 3 limbs"):
        check_residues(np.zeros((2, 8), np.uint32), moduli, what="short")
    with pytest.raises(SerializationError, match="no limb axis -3"):
        check_residues(np.zeros(8, np.uint32), moduli, what="flat", axis=-3)
    with pytest.raises(SerializationError, match="must be integers"):
        check_residues(np.zeros((3, 8), np.float64), moduli, what="floats")
    with pytest.raises(ValueError, match="positive"):
        check_residues(x, (17, 0, 193), what="caller error")
    check_residues(jnp.zeros((3, 4), jnp.uint32), moduli, what="a JAX array")


# --------------------------------------------------------------------------------------------------
# 2b. The exported-circuit file
# --------------------------------------------------------------------------------------------------

BODY = b"\x01jax-export-bytes\x00" * 8


def circuit_header() -> dict:
    """A header as Circuit.export writes it (every field of crossfhe.io.circuit_file.HEADER_FIELDS)."""
    return {"scheme": "ckks", "name": "f", "digest": CIRCUIT, "params": CP.digest(), "kernels": "vector", "build": "",
            "batch_shape": [2], "versions": "crossfhe sources 0123, jax 0.10, jaxlib 0.10",
            "graph": {"scheme": "ckks", "nodes": [["input", [], [["index", 0]], "f.py:3"]], "inputs": [0],
                      "outputs": [0], "consts": {}},
            "specs": [{"type": "CKKSVector", "length": 4}], "runtime": hashlib.sha256(b"treedef").hexdigest(),
            "runs": "one program"}


def circuit_frame(head: bytes, body: bytes, magic: bytes = b"CFHECIR1") -> bytes:
    """An exported-circuit file from raw parts, by its byte layout, with a valid SHA-256."""
    data = magic + struct.pack("<QQ", len(head), len(body)) + head + body
    return data + hashlib.sha256(data).digest()


def test_circuit_file_round_trip_and_atomic_write(tmp_path):
    path = tmp_path / "f.cfhecir"
    assert cf.write_circuit_file(path, circuit_header(), BODY) == path
    assert cf.read_circuit_file(path) == (circuit_header(), BODY)
    data = path.read_bytes()
    assert data.startswith(b"CFHECIR1") and hashlib.sha256(data[:-32]).digest() == data[-32:]
    head_len, body_len = struct.unpack_from("<QQ", data, 8)
    assert json.loads(data[24 : 24 + head_len]) == circuit_header() and data[24 + head_len : -32] == BODY
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    bad = dict(circuit_header(), batch_shape=[-1])
    with pytest.raises(SerializationError, match="batch_shape"):
        cf.write_circuit_file(path, bad, BODY)
    with pytest.raises(SerializationError, match="body"):
        cf.write_circuit_file(path, circuit_header(), b"")
    by_operation = dict(circuit_header(), runs="operation by operation")
    with pytest.raises(SerializationError, match="body .* holds"):
        cf.write_circuit_file(path, by_operation, BODY)
    assert path.read_bytes() == data and sorted(os.listdir(tmp_path)) == ["f.cfhecir"]
    other = tmp_path / "g.cfhecir"
    cf.write_circuit_file(other, by_operation, b"")
    assert cf.read_circuit_file(other) == (by_operation, b"")
    with_model = dict(circuit_header(), model={"format": 1})  # the optional field: a compiled model's client side
    cf.write_circuit_file(other, with_model, BODY)
    assert cf.read_circuit_file(other) == (with_model, BODY)
    with pytest.raises(SerializationError, match="'model' must be a JSON object"):
        cf.write_circuit_file(other, dict(circuit_header(), model=[1]), BODY)
    with pytest.raises(SerializationError, match="models"):
        cf.write_circuit_file(other, dict(circuit_header(), models={}), BODY)


@pytest.mark.parametrize("field", sorted(cf.HEADER_FIELDS))
def test_circuit_file_every_field_type_checked(field):
    wrong = {"str": 5, "hex64": "ABC", "shape": [1, -2], "object": [], "list of objects": [{"a": 1}, 3],
             "runs": "in parallel"}
    for value in (wrong[cf.HEADER_FIELDS[field]], None, True, 1.5):
        header = dict(circuit_header(), **{field: value})
        message = refused(cf.unpack_circuit_file, circuit_frame(json.dumps(header).encode(), BODY))
        assert f"field {field!r}" in message, message
    missing = {k: v for k, v in circuit_header().items() if k != field}
    assert f"missing ['{field}']" in refused(cf.unpack_circuit_file, circuit_frame(json.dumps(missing).encode(), BODY))


def test_circuit_file_malformed_refused(tmp_path):
    head = json.dumps(circuit_header()).encode()
    good = circuit_frame(head, BODY)
    cases_ = {
        "unknown field": circuit_frame(json.dumps(dict(circuit_header(), extra=1)).encode(), BODY),
        "not UTF-8": circuit_frame(head[:10] + b"\xff" + head[10:], BODY),
        "not JSON": circuit_frame(b"{" + head, BODY),
        "a JSON array": circuit_frame(b"[]", BODY),
        "NaN": circuit_frame(head.replace(b'"name"', b'"zz": NaN, "name"'), BODY),
        "huge integer": circuit_frame(head.replace(b'"batch_shape": [2]', b'"batch_shape": [' + b"9" * 5000 + b"]"),
                                      BODY),
        "empty body": circuit_frame(head, b""),
        "a body where none runs": circuit_frame(json.dumps(dict(circuit_header(), runs="operation by operation")
                                                           ).encode(), BODY),
        "bad magic": circuit_frame(head, BODY, b"CFHECIR2"),
        "short": good[:40],
        "truncated": good[:-1],
        "trailing bytes": good + b"\0",
        "digest": good[:-1] + bytes([good[-1] ^ 1]),
        "lengths": good[:8] + struct.pack("<QQ", 2**64 - 1, 2**64 - 1) + good[24:],
    }
    for what, data in cases_.items():
        with pytest.raises(SerializationError) as e:
            cf.unpack_circuit_file(data, source="test.cfhecir")
        assert str(e.value).startswith("test.cfhecir"), (what, str(e.value))
    path = tmp_path / "bad.cfhecir"
    path.write_bytes(cases_["unknown field"])
    with pytest.raises(SerializationError, match=rf"^{re.escape(str(path))}: .*unknown \['extra'\]"):
        cf.read_circuit_file(path)


def test_circuit_file_mutations_refused_or_valid():
    """Seeded edits of the header (values of every JSON type, fields removed or added, bytes flipped or cut) and
    of the section lengths, each resealed: the reader returns a header that passes its own schema, or refuses."""
    header, rng = circuit_header(), random.Random("io-checks/circuit-file")
    head = json.dumps(header).encode()
    for _ in range(4 * MUTATIONS):
        choice = rng.randrange(4)
        h = json.loads(head)
        if choice == 0:
            path = rng.choice(list(json_paths(h)))
            _set(h, path, rng.choice(JSON_VALUES))
            raw = json.dumps(h).encode()
        elif choice == 1:
            path = rng.choice(list(json_paths(h)))
            _delete(h, path)
            raw = json.dumps(h).encode()
        elif choice == 2:
            i = rng.randrange(len(head))
            raw = head[:i] + bytes([head[i] ^ (1 << rng.randrange(8))]) + head[i + 1 :]
        else:
            raw = head[: rng.randrange(len(head))]
        try:
            got, body = cf.unpack_circuit_file(circuit_frame(raw, BODY))
        except SerializationError:
            continue
        assert body == BODY and cf.check_circuit_header(got) is got


# --------------------------------------------------------------------------------------------------
# 2c. circuit.value blobs
# --------------------------------------------------------------------------------------------------


def test_circuit_value_round_trip(cases):
    case = cases("circuit.value")
    v = case.load(case.blob)
    assert (v.batch_shape, v.key_id, v.circuit, v.position, v.output) == ((2,), KEY_ID, CIRCUIT, 1, True)
    assert len(v.leaves) == 2 and all(leaf.dtype == np.uint32 and leaf.shape == (2, len(CP.q), CP.n)
                                      for leaf in v.leaves)
    assert case.dump(v) == case.blob
    assert unpack_circuit_value(case.blob).leaves[1].shape == (2, len(CP.q), CP.n)  # without specs: layout only
    assert io.kind_of(case.blob) == "circuit.value"


@pytest.mark.parametrize("field, value, message", [
    ("batch_shape", [2.0], "batch_shape must be a list"), ("batch_shape", [-2], "batch_shape must be a list"),
    ("batch_shape", "2", "batch_shape must be a list"), ("key_id", 5, "key_id must be 32 lowercase hex"),
    ("key_id", "ab", "key_id must be 32 lowercase hex"), ("circuit", KEY_ID, "circuit .* must be 64 lowercase hex"),
    ("circuit", None, "circuit .* must be 64"), ("position", True, "position must be an integer"),
    ("position", -1, r"position must be an integer in \[0, "), ("position", 1.0, "position must be an integer"),
    ("output", 1, "output must be true or false"), ("output", None, "output must be true or false"),
    ("batch_shape", [3], "does not start with the batch shape"),
])
def test_circuit_value_fields_type_checked(field, value, message, cases):
    case = cases("circuit.value")
    c = fmt.unpack(case.blob)
    with pytest.raises(SerializationError, match=message):
        case.load(fmt.pack(c.kind, dict(c.fields, **{field: value}), c.arrays))
    with pytest.raises(SerializationError, match="must have the keys .*missing"):
        case.load(fmt.pack(c.kind, {k: v for k, v in c.fields.items() if k != field}, c.arrays))
    with pytest.raises(SerializationError, match=r"unknown \['zz'\]"):
        case.load(fmt.pack(c.kind, dict(c.fields, zz=0), c.arrays))


def test_circuit_value_leaves_checked_against_specs(cases):
    case = cases("circuit.value")
    c = fmt.unpack(case.blob)
    leaf0, leaf1, L = c.arrays["leaf0"], c.arrays["leaf1"], len(CP.q)
    for arrays, message in [
        ({"leaf1": leaf1}, "leaf0 ... leafK-1"), ({"leaf0": leaf0, "leaf2": leaf1}, "leaf0 ... leafK-1"),
        ({"leaf0": leaf0, "leaf01": leaf1}, "leaf0 ... leafK-1"), ({}, "leaf0 ... leafK-1"),
        ({"leaf0": leaf0}, "holds 2 leaves, got 1"),
        ({"leaf0": leaf0, "leaf1": leaf1.view(np.int32)}, r"'leaf1' is int32\[.*expected uint32"),
        ({"leaf0": leaf0, "leaf1": leaf1[:, :-1]},
         rf"'leaf1' is uint32\[2, {L - 1}, {CP.n}\], expected uint32\[2, {L}, "),
    ]:
        with pytest.raises(SerializationError, match=message):
            case.load(fmt.pack(c.kind, c.fields, arrays))
    bad = leaf1.copy()
    bad[1, 3, 7] = CP.q[3]
    with pytest.raises(SerializationError, match=rf"circuit.value array 'leaf1' holds {CP.q[3]} at index \(1, 3, 7\), "
                                                 rf"not in \[0, q\) for its limb 3, q = {CP.q[3]}"):
        case.load(fmt.pack(c.kind, c.fields, {"leaf0": leaf0, "leaf1": bad}))
    assert unpack_circuit_value(fmt.pack(c.kind, c.fields, {"leaf0": leaf0, "leaf1": bad})).leaves[1][1, 3, 7] == \
        CP.q[3]  # without specs the reader knows no moduli: the circuit passes them


def test_pack_circuit_value_checks_its_fields():
    leaf = np.zeros((2, 3), np.uint32)
    kwargs = dict(batch_shape=(2,), key_id=None, circuit=CIRCUIT, position=np.int64(0), output=False)
    v = unpack_circuit_value(pack_circuit_value([leaf], **kwargs))
    assert v.key_id is None and v.position == 0 and v.batch_shape == (2,)
    for change, message in [({"batch_shape": (3,)}, "does not start with"), ({"position": True}, "position"),
                            ({"circuit": "x"}, "circuit"), ({"output": "no"}, "output")]:
        with pytest.raises(SerializationError, match=message):
            pack_circuit_value([leaf], **{**kwargs, **change})
    with pytest.raises(SerializationError, match="at least one leaf"):
        pack_circuit_value([], **kwargs)
    with pytest.raises(SerializationError, match="only uint32 and int32"):
        pack_circuit_value([leaf.astype(np.float32)], **kwargs)
