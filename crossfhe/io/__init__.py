"""Serialization: CKKS, BFV and TFHE parameters, ciphertexts, plaintexts, public and evaluation keys to bytes and files.

A blob is a versioned container (:mod:`crossfhe.io.format`: magic, format version, a JSON header with the
kind, the parameter digest and description, metadata and an array table, raw little-endian uint32/int32
payloads, a SHA-256). Loading refuses truncated, corrupted, tampered-with-but-unresealed, out-of-range or
mismatched data with a :class:`~crossfhe.errors.SerializationError`. Nothing is ever unpickled.

    blob = io.dumps(ct)                       # Params, Ciphertext, Plaintext, EvaluationKeys
    ct2 = io.loads(blob, params=params, expected=Ciphertext)
    io.save(ek, "keys.cfhe"); ek2 = io.load("keys.cfhe", params=params)
    io.save_secret_key(sk, "sk.cfhe", params=params)   # never by dumps/save

The names above are CKKS's (:mod:`crossfhe.io.ckks`); BFV objects have the same functions in
:mod:`crossfhe.io.bfv` (``io.bfv.dumps(ct)``, ``io.bfv.loads(blob, params=params)``, ...) and TFHE objects
(parameters, LWE ciphertexts, server and client keys) in :mod:`crossfhe.io.tfhe`. The kinds of the schemes
differ (``"ckks.ciphertext"``, ``"bfv.ciphertext"``, ``"tfhe.ciphertext"``), so each refuses the others' blobs.
"""

from crossfhe.io import bfv, ckks, tfhe
from crossfhe.io.ckks import (
    describe_params,
    dumps,
    dumps_secret_key,
    load,
    load_secret_key,
    loads,
    loads_secret_key,
    params_from_description,
    save,
    save_secret_key,
)
from crossfhe.io.format import FORMAT_VERSION, MAGIC

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "bfv",
    "ckks",
    "describe_params",
    "dumps",
    "dumps_secret_key",
    "load",
    "load_secret_key",
    "loads",
    "loads_secret_key",
    "params_from_description",
    "save",
    "save_secret_key",
    "tfhe",
]
