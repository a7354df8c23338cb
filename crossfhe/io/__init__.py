"""Serialization: the parameters, keys and ciphertexts of every scheme to bytes and files, and back.

A blob is a versioned container (:mod:`crossfhe.io.format`: magic, format version, a JSON header with the
kind, the parameter digest and description, metadata and an array table, raw little-endian uint32/int32
payloads, a SHA-256). Loading refuses truncated, corrupted, tampered-with-but-unresealed, out-of-range or
mismatched data with a :class:`~crossfhe.errors.SerializationError`. Nothing is ever unpickled.

    blob = io.dumps(obj)                      # CKKS, BFV, TFHE objects, HMVP and api vectors, public contexts
    obj2 = io.loads(blob)                     # dispatched on the blob's kind; params= checks the parameters
    ct2 = io.loads(blob, params=params, expected=Ciphertext)
    x2 = io.loads(vector_blob, context=ctx)   # an api EncryptedVector needs its context
    io.kind_of(blob)                          # "ckks.ciphertext", "tfhe.server_key", ...
    io.save(ek, "keys.cfhe"); ek2 = io.load("keys.cfhe")
    io.save_secret_key(sk, "sk.cfhe", params=params)   # never by dumps/save

:func:`dumps`, :func:`loads` and the others above dispatch on the object's type and the blob's kind
(:mod:`crossfhe.io.registry`: the types, kinds and what each needs) to the schemes' modules, which hold
the layouts and checks and can be called directly: :mod:`crossfhe.io.ckks`, :mod:`crossfhe.io.bfv` (also
HMVP vectors), :mod:`crossfhe.io.tfhe` (parameters, LWE ciphertexts, server and client keys) and
:mod:`crossfhe.io.switch` (CKKS <-> TFHE scheme-switching keys, kind ``switch.keys``). The kinds
of the schemes differ (``"ckks.ciphertext"``, ``"bfv.ciphertext"``, ``"tfhe.ciphertext"``), so each
scheme module refuses the others' blobs. :func:`describe_params` and :func:`params_from_description` are
CKKS's.

For the circuit layer: :mod:`crossfhe.io.circuit_value` writes and reads a circuit's encrypted values (kind
``circuit.value``, each leaf checked against the circuit's :class:`~crossfhe.io.circuit_value.LeafSpec`),
:mod:`crossfhe.io.circuit_file` the exported-circuit file (``CFHECIR1``), and :mod:`crossfhe.io.checks` holds the
checks every loader makes (residues against their limbs' moduli, value bounds, JSON field types), each raising a
SerializationError that names the object, the field or array, what was expected and what was found.
"""

from crossfhe.io import bfv, checks, circuit_file, circuit_value, ckks, registry, switch, tfhe
from crossfhe.io.ckks import describe_params, params_from_description
from crossfhe.io.format import FORMAT_VERSION, MAGIC
from crossfhe.io.registry import (
    dumps,
    dumps_secret_key,
    kind_of,
    kinds,
    load,
    load_secret_key,
    loads,
    loads_secret_key,
    register_kind,
    register_type,
    save,
    save_secret_key,
)

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "bfv",
    "checks",
    "circuit_file",
    "circuit_value",
    "ckks",
    "describe_params",
    "dumps",
    "dumps_secret_key",
    "kind_of",
    "kinds",
    "load",
    "load_secret_key",
    "loads",
    "loads_secret_key",
    "params_from_description",
    "register_kind",
    "register_type",
    "registry",
    "save",
    "save_secret_key",
    "switch",
    "tfhe",
]
