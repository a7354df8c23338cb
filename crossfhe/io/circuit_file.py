"""The exported-circuit file (``Circuit.export``): written atomically, read with every check.

Byte layout (integers little-endian):

=============  ======  ===================================================================================
offset         size    field
=============  ======  ===================================================================================
0              8       magic ``b"CFHECIR1"``
8              8       H, the header's length in bytes, u64
16             8       B, the body's length in bytes, u64
24             H       header: a JSON object, UTF-8 (no NaN or infinity, no repeated key)
24 + H         B       body: the lowered program, ``jax.export`` serialized bytes (B >= 1; B = 0 where
                       ``runs`` is "operation by operation": files of crossfhe 0.x before circuits that
                       bootstrap ran as one program)
24 + H + B     32      SHA-256 of bytes [0, 24 + H + B)
=============  ======  ===================================================================================

The header holds exactly these fields (:data:`HEADER_FIELDS`, and :data:`OPTIONAL_FIELDS` where present), each
of its JSON type; a missing or unknown field is refused:

===============  ==================================  ===============================================================
field            type                                what
===============  ==================================  ===============================================================
``scheme``       str                                 the circuit's scheme ("ckks", "bfv", "tfhe")
``name``         str                                 the circuit's name
``digest``       str, 64 lowercase hex digits        the circuit's digest (graph and parameters)
``params``       str                                 the parameters' digest
``kernels``      str                                 the kernel set's name
``build``        str                                 the native build's id ("" for none)
``batch_shape``  list of non-negative ints (<= 32)   the batch shape the program was lowered for
``versions``     str                                 library sources' digest and jax versions
``graph``        object                              the graph (the circuit layer reads it)
``specs``        list of objects                     the input specs (the circuit layer reads them)
``runtime``      str                                 the digest of the runtime arguments' structure
``runs``         "one program" or                    how a server runs it: the body's program, or (older files
                 "operation by operation"            of a circuit that bootstraps; no body) the graph, traced
``model``        object (optional)                   a compiled model's client side (:mod:`crossfhe.ml` reads it:
                                                     how samples are encoded and outputs decoded)
``parameters``   str (optional)                      the parameters themselves: their io blob (kind
                                                     ``<scheme>.params``), base64; :func:`crossfhe.load_circuit`
                                                     reads it when no parameters are given
===============  ==================================  ===============================================================

:func:`read_circuit_file` raises :class:`~crossfhe.errors.SerializationError` naming the file and the first
failure, in this order: the length (too short to hold magic, lengths and SHA-256), the magic, the section
lengths against the file's size, the SHA-256, the header's JSON, the header's fields. Like
:mod:`crossfhe.io.format`'s digest, the SHA-256 is unkeyed (integrity, not authenticity), so the header is
checked field by field as if it were absent. The body stays opaque here: whoever deserializes it
(``jax.export.deserialize``) and the graph and specs are the circuit layer's to check.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path

from crossfhe.errors import SerializationError
from crossfhe.io import checks
from crossfhe.io import format as fmt

MAGIC = b"CFHECIR1"
_LENGTHS = struct.Struct("<QQ")
_START = len(MAGIC) + _LENGTHS.size  # 24
_DIGEST = hashlib.sha256().digest_size  # 32

HEADER_FIELDS = {"scheme": "str", "name": "str", "digest": "hex64", "params": "str", "kernels": "str",
                 "build": "str", "batch_shape": "shape", "versions": "str", "graph": "object",
                 "specs": "list of objects", "runtime": "str", "runs": "runs"}
"""Every field of an exported circuit's header and its type (module docstring)."""

OPTIONAL_FIELDS = {"model": "object", "parameters": "str"}
"""Fields a header may hold (module docstring)."""

RUNS = ("one program", "operation by operation")
"""The values of the header's ``runs`` field."""


def check_circuit_header(header) -> dict:
    """``header`` after checking that it holds exactly :data:`HEADER_FIELDS` (and any of :data:`OPTIONAL_FIELDS`),
    each of its type (module docstring).
    Raises SerializationError naming the missing, unknown or mistyped field, what was expected and what was found."""
    optional = set(OPTIONAL_FIELDS) & set(header) if isinstance(header, dict) else set()
    checks.json_keys(header, set(HEADER_FIELDS) | optional, "an exported circuit's header")
    for name, kind in {**HEADER_FIELDS, **{k: OPTIONAL_FIELDS[k] for k in sorted(optional)}}.items():
        value, what = header[name], f"an exported circuit's header field {name!r}"
        if kind == "str":
            checks.json_str(value, what)
        elif kind == "hex64":
            checks.json_hex(value, what, 64)
        elif kind == "shape":
            checks.json_shape(value, what)
        elif kind == "runs":
            if value not in RUNS:
                raise SerializationError(f"{what} must be one of {list(RUNS)}, got {checks.shown(value)}")
        elif kind == "object":
            if not isinstance(value, dict):
                raise SerializationError(f"{what} must be a JSON object, got {type(value).__name__}")
        elif not (isinstance(value, list) and all(isinstance(s, dict) for s in value)):
            raise SerializationError(f"{what} must be a list of JSON objects, got {checks.shown(value)}")
    return header


def pack_circuit_file(header: dict, body: bytes) -> bytes:
    """The bytes of an exported-circuit file (module docstring) of ``header`` (checked by
    :func:`check_circuit_header`) and ``body`` (bytes-like, empty exactly where ``runs`` is "operation by
    operation"). SerializationError if either does not fit or the header is not plain JSON (a NaN or infinity, a
    non-JSON type)."""
    check_circuit_header(header)
    if not isinstance(body, (bytes, bytearray, memoryview)):
        raise SerializationError(f"an exported circuit's body must be bytes, got {type(body).__name__}")
    _check_body(header, len(body), "an exported circuit")
    try:
        head = json.dumps(header, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise SerializationError(f"an exported circuit's header is not plain JSON: {e}") from None
    data = MAGIC + _LENGTHS.pack(len(head), len(body)) + head + bytes(body)
    return data + hashlib.sha256(data).digest()


def unpack_circuit_file(data, *, source: str = "the exported circuit") -> tuple[dict, bytes]:
    """(header, body) of the bytes of an exported-circuit file, after every check of the module docstring;
    ``source`` names the file in the messages. Raises SerializationError; TypeError if ``data`` is not bytes-like."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) < _START + _DIGEST:
        raise SerializationError(f"{source} is not an exported crossfhe circuit: {len(data)} bytes, too short to hold "
                                 f"the magic, the section lengths and the SHA-256 ({_START + _DIGEST})")
    if not data.startswith(MAGIC):
        raise SerializationError(f"{source} is not an exported crossfhe circuit: starts with {data[:8]!r}, expected "
                                 f"the magic {MAGIC!r}")
    head_len, body_len = _LENGTHS.unpack_from(data, len(MAGIC))
    total = _START + head_len + body_len + _DIGEST
    if total != len(data):
        raise SerializationError(f"{source}: the section lengths (header {head_len}, body {body_len}) announce "
                                 f"{total} bytes, the file holds {len(data)} (truncated or altered)")
    if hashlib.sha256(data[:-_DIGEST]).digest() != data[-_DIGEST:]:
        raise SerializationError(f"{source}: the SHA-256 does not match (truncated or altered)")
    try:
        header = fmt.parse_header(data[_START : _START + head_len])
        check_circuit_header(header)
    except SerializationError as e:
        raise SerializationError(f"{source}: {e}") from None
    _check_body(header, body_len, source)
    return header, data[_START + head_len : _START + head_len + body_len]


def _check_body(header: dict, length: int, source: str) -> None:
    """A body (the lowered program) exactly where the header's ``runs`` says the circuit runs as one program."""
    if (length == 0) != (header["runs"] == "operation by operation"):
        what = "is empty" if length == 0 else f"holds {length} bytes"
        raise SerializationError(f"{source}: the body (the lowered program) {what}, but the header says the circuit "
                                 f"runs {header['runs']!r}")


def write_circuit_file(path, header: dict, body: bytes) -> Path:
    """Write :func:`pack_circuit_file` ``(header, body)`` to ``path`` atomically
    (:func:`crossfhe.io.format.write_atomic`: a refused header, or a failed write, leaves ``path`` as it was and
    no temporary file); returns ``path`` as a Path."""
    fmt.write_atomic(path, pack_circuit_file(header, body))
    return Path(os.fspath(path))


def read_circuit_file(path) -> tuple[dict, bytes]:
    """(header, body) of the exported-circuit file at ``path`` (:func:`unpack_circuit_file`; messages name the
    path). OSError if the file cannot be read."""
    return unpack_circuit_file(fmt.read_bytes(path), source=os.fspath(path))


__all__ = [
    "HEADER_FIELDS",
    "MAGIC",
    "OPTIONAL_FIELDS",
    "check_circuit_header",
    "pack_circuit_file",
    "read_circuit_file",
    "unpack_circuit_file",
    "write_circuit_file",
]
