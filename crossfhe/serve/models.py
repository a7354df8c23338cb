"""The circuits a server hosts, and running several requests of one as one launch.

A request holds one encrypted value per circuit input (``circuit.value`` blobs), all under one key pair and of
one batch shape: ``()`` for one item, ``(b,)`` for b items. :func:`check_request` loads and checks every value
against the circuit before it is queued (layout, circuit and position, shapes, dtypes, residues), so a bad value is
refused alone and never reaches a batch. :func:`run_batch` stacks the requests' items on the batch axis, pads the
stack to a power of two (so a server compiles a handful of programs, one per size, not one per total) with copies of
the first item, runs the circuit once, and splits the outputs back per request, each in its own batch shape.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from crossfhe.api.circuit import Circuit, Encrypted, load
from crossfhe.errors import KeyMismatchError, ParameterError, SerializationError
from crossfhe.io import circuit_file
from crossfhe.io.bundle import pack_bundle, unpack_bundle


class RequestError(Exception):
    """A request refused in the user's terms: ``status`` (a 4xx), ``code`` (a short name) and the message."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code = status, code


@dataclass
class Hosted:
    """A served circuit: its ``name``, the loaded ``circuit`` and its exported ``header`` (graph, specs, parameters,
    a model's client side; no program) as clients fetch it."""

    name: str
    path: Path
    circuit: Circuit
    header: dict = field(repr=False)

    @classmethod
    def open(cls, path, name: str | None = None) -> Hosted:
        """The circuit exported at ``path`` (:meth:`crossfhe.Circuit.export`), with the parameters its file carries."""
        header, _ = circuit_file.read_circuit_file(path)
        circuit = load(path)
        return cls(name or header["name"], Path(os.fspath(path)), circuit, header)

    def describe(self) -> dict:
        """What the model list shows: name, scheme, digest, inputs and outputs, the keys it needs."""
        c = self.circuit
        return {"name": self.name, "scheme": c.scheme.name, "digest": c.digest, "inputs": len(c.specs),
                "outputs": len(c.graph.outputs), "specs": self.header["specs"],
                "model": "model" in self.header, "requirements": _plain(c.requirements)}

    def public_header(self) -> dict:
        return dict(self.header)


def _plain(obj):
    """A JSON-able copy of the requirements (tuples and sets as lists, numbers as numbers)."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [_plain(v) for v in sorted(obj, key=repr)] if isinstance(obj, (set, frozenset)) else [
            _plain(v) for v in obj]
    if isinstance(obj, (bool, int, float, str)) or obj is None:
        return obj
    if isinstance(obj, np.integer):
        return int(obj)
    return repr(obj)


@dataclass
class Request:
    """A checked request: its values (one per input, batch shape ``()`` or ``(b,)``), key id and item count."""

    values: list
    key_id: str
    batch_shape: tuple

    @property
    def items(self) -> int:
        return self.batch_shape[0] if self.batch_shape else 1


def check_request(hosted: Hosted, body) -> Request:
    """The request in ``body`` (a bundle of one ``circuit.value`` blob per input), every value checked against
    ``hosted``'s circuit; :class:`RequestError` (400) naming the input and what is wrong."""
    c = hosted.circuit
    try:
        blobs = unpack_bundle(body, count=len(c.specs), what=f"the request to {hosted.name}")
    except SerializationError as e:
        raise RequestError(400, "malformed", str(e)) from None
    values = []
    for i, blob in enumerate(blobs):
        try:
            x = c.load_value(blob)
        except SerializationError as e:
            raise RequestError(400, "malformed", f"input {i}: {e}") from None
        except ParameterError as e:
            raise RequestError(400, "wrong_model", f"input {i}: {e} (fetch {hosted.name}'s spec and encrypt for "
                                                   "it)") from None
        if x.output or x.position != i:
            raise RequestError(400, "wrong_position", f"input {i} holds {x!r}; send input {i} of {hosted.name}")
        values.append(x)
    keys = {x.key_id for x in values}
    shapes = {x.batch_shape for x in values}
    if len(keys) != 1 or None in keys:
        raise RequestError(400, "wrong_key", f"the inputs of one request must be encrypted under one key pair, got "
                                             f"{sorted(str(k) for k in keys)}")
    if len(shapes) != 1 or len(next(iter(shapes))) > 1:
        raise RequestError(400, "wrong_shape", f"the inputs must share one batch shape, () or (b,), got "
                                               f"{sorted(shapes)}")
    batch = next(iter(shapes))
    if batch and batch[0] == 0:
        raise RequestError(400, "wrong_shape", "the inputs hold no item (batch shape (0,))")
    return Request(values, keys.pop(), batch)


def check_keys(hosted: Hosted, public, key_id: str | None = None) -> None:
    """RequestError (400) if ``public`` cannot run ``hosted`` (another scheme, parameters or key pair, a key it
    lacks)."""
    c = hosted.circuit
    try:
        c.scheme.check_keys(c.graph, c.params, public, key_id)
    except (ParameterError, KeyMismatchError, TypeError) as e:
        raise RequestError(400, "wrong_keys", f"these evaluation keys cannot run {hosted.name}: {e}") from None


def bucket(items: int) -> int:
    """The batch size a stack of ``items`` runs at: the next power of two."""
    return 1 << max(0, (items - 1).bit_length())


def run_batch(hosted: Hosted, public, requests: list[Request]) -> list[list[bytes]]:
    """The outputs of ``requests`` (one key pair) as serialized ``circuit.value`` blobs per request, from one launch
    of the circuit at :func:`bucket` of their items."""
    c = hosted.circuit
    total = sum(r.items for r in requests)
    size = bucket(total)
    stacked = []
    for i in range(len(c.specs)):
        parts = [_leading(r.values[i]) for r in requests]
        pad = size - total
        if pad:
            first = parts[0]
            parts.append(Encrypted(tuple(np.repeat(np.asarray(a)[:1], pad, axis=0) for a in first.leaves), (pad,),
                                   first.key_id, first.circuit, first.position, False))
        stacked.append(Encrypted.concatenate(parts))
    outs = c.run(*stacked, keys=public)
    replies, start = [], 0
    for r in requests:
        stop = start + r.items
        mine = []
        for o in outs:
            leaves = tuple(np.asarray(a)[start:stop] for a in o.leaves)
            if not r.batch_shape:
                leaves = tuple(a[0] for a in leaves)
            mine.append(Encrypted(leaves, r.batch_shape, o.key_id, o.circuit, o.position, True).serialize())
        replies.append(mine)
        start = stop
    return replies


def _leading(x: Encrypted) -> Encrypted:
    """``x`` with a batch axis of its own (``()`` becomes ``(1,)``)."""
    if x.batch_shape:
        return x
    return Encrypted(tuple(np.asarray(a)[None] for a in x.leaves), (1,), x.key_id, x.circuit, x.position, x.output)


def reply(blobs: list[bytes]) -> bytes:
    """A request's outputs as one body (a bundle)."""
    return pack_bundle(blobs)


__all__ = ["Hosted", "Request", "RequestError", "bucket", "check_keys", "check_request", "reply", "run_batch"]
