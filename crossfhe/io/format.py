"""The crossfhe container: a versioned JSON header and raw array payloads, sealed by a SHA-256. No pickle.

Byte layout (integers little-endian):

=============  ======  ===================================================================================
offset         size    field
=============  ======  ===================================================================================
0              5       magic ``b"CFHE\\0"``
5              2       format version, u16 (this library writes and reads version 1)
7              4       H, the header's length in bytes, u32
11             8       D, the payload's length in bytes, u64
19             H       header: a JSON object, UTF-8 (written as ASCII, sorted keys, no NaN or infinity)
19 + H         D       payload: the arrays' raw little-endian bytes, back to back, in table order
19 + H + D     32      SHA-256 of bytes [0, 19 + H + D)
=============  ======  ===================================================================================

Header keys owned by the container: ``"kind"`` (what the blob holds, e.g. ``"ckks.ciphertext"``) and
``"arrays"``, the array table: a list of ``{"name", "dtype", "shape", "offset", "length"}`` with dtype
``"uint32"`` or ``"int32"`` (nothing else is stored), offset relative to the payload's start, and
``length = 4 * prod(shape)``. The arrays are contiguous and cover the payload exactly: offset_0 = 0,
offset_{i+1} = offset_i + length_i, sum of lengths = D. Every other header key belongs to the kind
(:mod:`crossfhe.io.ckks` adds the parameter digest, the parameter description and metadata).

:func:`unpack` checks, in this order, and raises :class:`~crossfhe.errors.SerializationError` naming the
first failure: the magic; the version (a newer or unknown version is refused); the lengths (a truncated
blob, or trailing bytes); the SHA-256; the header's JSON (:func:`parse_header`: UTF-8, one object, no
duplicate keys, no NaN or infinity, integers of at most 4300 digits);
the kind (against ``expected_kind``); the array table (names, dtypes, shapes, offsets and lengths).

Integrity, not authenticity: the SHA-256 is unkeyed. It detects accidental corruption (a flipped bit, a
cut transfer) and naive tampering, but anyone who edits a blob can recompute it. To know who wrote a blob,
sign it or MAC it outside this format. The loaders therefore still check every value they rebuild
(parameters, shapes, residue ranges; :mod:`crossfhe.io.checks`) as if the hash were absent, and a blob
edited and resealed raises SerializationError, never another exception.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import struct
import tempfile
from dataclasses import dataclass

import numpy as np

from crossfhe.errors import SerializationError

MAGIC = b"CFHE\0"
FORMAT_VERSION = 1
"""The container version this library writes; it reads versions 1 ... FORMAT_VERSION."""

_PREAMBLE = struct.Struct("<5sHIQ")  # magic, version, header length, payload length
PREAMBLE_SIZE = _PREAMBLE.size  # 19
DIGEST_SIZE = hashlib.sha256().digest_size  # 32
_MAX_HEADER = 2**32 - 1
_DTYPES = {"uint32": np.dtype("<u4"), "int32": np.dtype("<i4")}
_TABLE_KEYS = {"name", "dtype", "shape", "offset", "length"}


@dataclass(frozen=True)
class Container:
    """A checked blob: its ``kind``, the other header ``fields`` (a dict), and ``arrays`` by name
    (native-order NumPy arrays, uint32 or int32, in table order)."""

    kind: str
    fields: dict
    arrays: dict


# --------------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------------


def _dtype_name(name: str, array: np.ndarray) -> str:
    for dtype_name, dtype in _DTYPES.items():
        if (array.dtype.kind, array.dtype.itemsize) == (dtype.kind, dtype.itemsize):
            return dtype_name
    raise SerializationError(f"array {name!r} has dtype {array.dtype}; only uint32 and int32 arrays are stored")


def pack(kind: str, fields: dict, arrays: dict) -> bytes:
    """The blob of ``kind`` with header ``fields`` (JSON-serializable, without "kind" or "arrays") and
    ``arrays`` (name -> uint32 or int32 array), laid out as in the module docstring."""
    if not isinstance(kind, str) or not kind:
        raise SerializationError(f"kind must be a non-empty str, got {kind!r}")
    if "kind" in fields or "arrays" in fields:
        raise SerializationError('header fields may not use the container\'s keys "kind" and "arrays"')
    table, chunks, offset = [], [], 0
    for name, array in arrays.items():
        array = np.asarray(array)
        dtype_name = _dtype_name(name, array)
        raw = np.ascontiguousarray(array, dtype=_DTYPES[dtype_name]).tobytes()
        table.append({"name": name, "dtype": dtype_name, "shape": list(array.shape), "offset": offset,
                      "length": len(raw)})
        chunks.append(raw)
        offset += len(raw)
    header_obj = {**fields, "kind": kind, "arrays": table}
    try:
        header = json.dumps(header_obj, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("ascii")
    except (TypeError, ValueError) as e:
        raise SerializationError(f"header fields are not plain JSON: {e}") from None
    if len(header) > _MAX_HEADER:
        raise SerializationError(f"header of {len(header)} bytes exceeds the u32 length field")
    body = _PREAMBLE.pack(MAGIC, FORMAT_VERSION, len(header), offset) + header + b"".join(chunks)
    return body + hashlib.sha256(body).digest()


# --------------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------------


def _as_bytes(blob) -> bytes:
    if isinstance(blob, (bytes, bytearray, memoryview)):
        return bytes(blob)
    raise TypeError(f"expected bytes, got {type(blob).__name__}")


def _check_magic(blob: bytes) -> None:
    head = blob[: len(MAGIC)]
    if head == MAGIC:
        return
    if len(blob) < len(MAGIC) and MAGIC.startswith(head):
        raise SerializationError(f"truncated: {len(blob)} bytes, too short to hold the magic {MAGIC!r}")
    raise SerializationError(f"not a crossfhe blob: starts with {head!r}, expected the magic {MAGIC!r}")


def _check_version(blob: bytes) -> None:
    if len(blob) < len(MAGIC) + 2:
        raise SerializationError(f"truncated: {len(blob)} bytes, too short to hold the format version")
    (version,) = struct.unpack_from("<H", blob, len(MAGIC))
    if version > FORMAT_VERSION:
        raise SerializationError(
            f"format version {version} is newer than this library reads (up to {FORMAT_VERSION}); "
            "upgrade crossfhe to load it"
        )
    if version < 1:
        raise SerializationError(f"unknown format version {version} (this library reads 1 ... {FORMAT_VERSION})")


def _check_lengths(blob: bytes) -> tuple[int, int]:
    """(H, D) after checking that the blob holds exactly preamble + H + D + the SHA-256."""
    if len(blob) < PREAMBLE_SIZE:
        raise SerializationError(f"truncated: {len(blob)} bytes, shorter than the {PREAMBLE_SIZE}-byte preamble")
    _, _, header_len, payload_len = _PREAMBLE.unpack_from(blob)
    total = PREAMBLE_SIZE + header_len + payload_len + DIGEST_SIZE
    if len(blob) < total:
        raise SerializationError(
            f"truncated: {len(blob)} bytes, the preamble announces {total} (header {header_len}, payload "
            f"{payload_len}, SHA-256 {DIGEST_SIZE})"
        )
    if len(blob) > total:
        raise SerializationError(f"{len(blob) - total} unexpected bytes after the SHA-256 (the blob should be {total})")
    return header_len, payload_len


def _check_digest(blob: bytes) -> None:
    body, digest = blob[:-DIGEST_SIZE], blob[-DIGEST_SIZE:]
    if hashlib.sha256(body).digest() != digest:
        raise SerializationError(
            "SHA-256 mismatch: the blob is corrupted or was modified after it was written (the unkeyed hash "
            "detects corruption and naive tampering; authenticity needs a signature or MAC)"
        )


def _no_duplicates(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise SerializationError(f"header JSON repeats the key {key!r}")
        obj[key] = value
    return obj


def _no_constant(name):
    raise SerializationError(f"header JSON holds {name}, which is not a number this format writes")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise SerializationError(f"header JSON holds the number {text}, which overflows a float")
    return value


def parse_header(raw: bytes) -> dict:
    """The JSON object of a header's bytes: UTF-8, one object, no repeated key, no NaN or infinity, integers
    of at most 4300 digits, nesting within Python's recursion limit. SerializationError otherwise."""
    try:
        text = raw.decode("utf-8")
        header = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant, parse_float=_finite)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError, JSONDecodeError, int digits past the limit
        raise SerializationError(f"header is not valid UTF-8 JSON: {e}") from None
    if not isinstance(header, dict):
        raise SerializationError(f"header must be a JSON object, got {type(header).__name__}")
    return header


def _check_kind(header: dict, expected_kind) -> str:
    kind = header.get("kind")
    if not isinstance(kind, str):
        raise SerializationError(f'header has no "kind" string (got {kind!r})')
    if expected_kind is not None:
        allowed = (expected_kind,) if isinstance(expected_kind, str) else tuple(expected_kind)
        if kind not in allowed:
            want = allowed[0] if len(allowed) == 1 else " or ".join(allowed)
            raise SerializationError(f"wrong kind: expected {want}, the blob holds {kind}")
    return kind


def is_json_int(value) -> bool:
    """A JSON integer as parsed (an int, not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _check_entry(entry, index: int, offset: int) -> tuple[str, np.dtype, tuple[int, ...], int]:
    """(name, dtype, shape, length) of one table entry that starts at ``offset``."""
    if not isinstance(entry, dict) or set(entry) != _TABLE_KEYS:
        raise SerializationError(f"array table entry {index} must be an object with keys {sorted(_TABLE_KEYS)}")
    name, dtype, shape = entry["name"], entry["dtype"], entry["shape"]
    if not isinstance(name, str) or not name:
        raise SerializationError(f"array table entry {index}: name must be a non-empty string, got {name!r}")
    if not isinstance(dtype, str) or dtype not in _DTYPES:
        raise SerializationError(f"array {name!r}: dtype {dtype!r} is not allowed (only uint32 and int32)")
    if not isinstance(shape, list) or not all(is_json_int(d) and d >= 0 for d in shape):
        raise SerializationError(f"array {name!r}: shape must be a list of non-negative ints, got {shape!r}")
    if entry["offset"] != offset or not is_json_int(entry["offset"]):
        raise SerializationError(
            f"array {name!r}: offset {entry['offset']!r}, expected {offset} (arrays are contiguous)"
        )
    length = _DTYPES[dtype].itemsize * math.prod(shape)
    if entry["length"] != length or not is_json_int(entry["length"]):
        raise SerializationError(f"array {name!r}: length {entry['length']!r}, but {dtype}{shape} takes {length} bytes")
    return name, _DTYPES[dtype], tuple(shape), length


def _read_arrays(table, payload: memoryview) -> dict:
    if not isinstance(table, list):
        raise SerializationError(f'header "arrays" must be a list, got {type(table).__name__}')
    arrays, offset = {}, 0
    for index, entry in enumerate(table):
        name, dtype, shape, length = _check_entry(entry, index, offset)
        if name in arrays:
            raise SerializationError(f"array {name!r} appears twice in the array table")
        if offset + length > len(payload):
            raise SerializationError(
                f"array {name!r} ends at byte {offset + length}, past the {len(payload)}-byte payload"
            )
        flat = np.frombuffer(payload, dtype=dtype, count=math.prod(shape), offset=offset)
        arrays[name] = flat.astype(dtype.newbyteorder("=")).reshape(shape)
        offset += length
    if offset != len(payload):
        raise SerializationError(f"the arrays cover {offset} bytes of the {len(payload)}-byte payload")
    return arrays


def unpack(blob, *, expected_kind: str | tuple[str, ...] | None = None) -> Container:
    """Check a blob in the order of the module docstring and return its :class:`Container`.

    expected_kind: a kind, or a tuple of kinds, the caller accepts (None: any). Raises SerializationError
    naming the first check that fails; TypeError if ``blob`` is not bytes-like.
    """
    blob = _as_bytes(blob)
    _check_magic(blob)
    _check_version(blob)
    header_len, payload_len = _check_lengths(blob)
    _check_digest(blob)
    header = parse_header(blob[PREAMBLE_SIZE : PREAMBLE_SIZE + header_len])
    kind = _check_kind(header, expected_kind)
    start = PREAMBLE_SIZE + header_len
    arrays = _read_arrays(header.get("arrays"), memoryview(blob)[start : start + payload_len])
    fields = {key: value for key, value in header.items() if key not in ("kind", "arrays")}
    return Container(kind, fields, arrays)


def peek_kind(blob) -> str:
    """The kind of a blob, read from its preamble and header without hashing it or reading its arrays
    (so it is cheap for a large key): for dispatching to the loader that then checks everything. If the
    preamble or header cannot be read, raises what :func:`unpack` raises (the first failing check, in the
    documented order: a cut or corrupted blob is reported as such, not as bad JSON). The kind returned is
    unverified until :func:`unpack` has checked the SHA-256. TypeError if ``blob`` is not bytes-like."""
    blob = _as_bytes(blob)
    try:
        _check_magic(blob)
        _check_version(blob)
        header_len, _ = _check_lengths(blob)
        return _check_kind(parse_header(blob[PREAMBLE_SIZE : PREAMBLE_SIZE + header_len]), None)
    except SerializationError:
        unpack(blob)  # raises the first failing check
        raise


# --------------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------------


def write_atomic(path, data: bytes, *, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file in the same directory (created with mode
    0o600), flushed and fsynced, given ``mode``, then moved over ``path`` with ``os.replace``. On any
    error the temporary file is removed and ``path`` is left as it was."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def read_bytes(path) -> bytes:
    """The bytes of the file at ``path`` (OSError if it cannot be read)."""
    with open(os.fspath(path), "rb") as f:
        return f.read()


__all__ = [
    "DIGEST_SIZE",
    "FORMAT_VERSION",
    "MAGIC",
    "PREAMBLE_SIZE",
    "Container",
    "is_json_int",
    "pack",
    "parse_header",
    "peek_kind",
    "read_bytes",
    "unpack",
    "write_atomic",
]
