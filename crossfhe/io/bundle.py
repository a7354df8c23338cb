"""A bundle: several blobs in one body (a served circuit's inputs in a request, its outputs in the reply).

Byte layout (integers little-endian):

=============  ======  ===================================================================================
offset         size    field
=============  ======  ===================================================================================
0              8       magic ``b"CFHEBND1"``
8              4       n, the number of blobs, u32 (at most :data:`MAX_ITEMS`)
12             8 n     the blobs' lengths, u64 each
12 + 8 n       ...     the blobs, back to back; they end exactly where the bundle does
=============  ======  ===================================================================================

The bundle adds no digest: each blob is a sealed container of its own (:mod:`crossfhe.io.format`), checked by
whoever loads it. :func:`unpack_bundle` checks the magic, the count against what the caller expects and the lengths
against the bundle's size, and raises :class:`~crossfhe.errors.SerializationError` naming the first failure.
"""

from __future__ import annotations

import struct

from crossfhe.errors import SerializationError

MAGIC = b"CFHEBND1"
MAX_ITEMS = 4096
"""The most blobs a bundle holds."""

_COUNT = struct.Struct("<I")


def pack_bundle(blobs) -> bytes:
    """The bytes of a bundle of ``blobs`` (bytes-like each, at most :data:`MAX_ITEMS`)."""
    blobs = [bytes(b) for b in blobs]
    if len(blobs) > MAX_ITEMS:
        raise SerializationError(f"a bundle holds at most {MAX_ITEMS} blobs, got {len(blobs)}")
    lengths = struct.pack(f"<{len(blobs)}Q", *(len(b) for b in blobs))
    return b"".join([MAGIC, _COUNT.pack(len(blobs)), lengths, *blobs])


def unpack_bundle(data, *, count: int | None = None, what: str = "the bundle") -> list[memoryview]:
    """The blobs of a bundle (views into ``data``, no copy), after the module docstring's checks; ``count``: the
    number of blobs expected (None: any). SerializationError naming ``what`` and the first failure."""
    view = memoryview(data).cast("B")
    start = len(MAGIC) + _COUNT.size
    if len(view) < start or bytes(view[: len(MAGIC)]) != MAGIC:
        raise SerializationError(f"{what} is not a crossfhe bundle: it does not start with {MAGIC!r}")
    (n,) = _COUNT.unpack_from(view, len(MAGIC))
    if n > MAX_ITEMS:
        raise SerializationError(f"{what} announces {n} blobs, more than {MAX_ITEMS}")
    if count is not None and n != count:
        raise SerializationError(f"{what} holds {n} blobs, {count} expected")
    if len(view) < start + 8 * n:
        raise SerializationError(f"{what} is truncated: {len(view)} bytes, its table of {n} lengths needs "
                                 f"{start + 8 * n}")
    lengths = struct.unpack_from(f"<{n}Q", view, start)
    offset = start + 8 * n
    if offset + sum(lengths) != len(view):
        raise SerializationError(f"{what}: its lengths announce {offset + sum(lengths)} bytes, it holds "
                                 f"{len(view)} (truncated or altered)")
    out = []
    for length in lengths:
        out.append(view[offset : offset + length])
        offset += length
    return out


__all__ = ["MAGIC", "MAX_ITEMS", "pack_bundle", "unpack_bundle"]
