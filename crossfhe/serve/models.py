"""What a server hosts, and running several requests of one as one launch.

Two kinds, one interface (:class:`Hosted`: ``describe``, ``public_header``, ``check_request``, ``check_keys``,
``prepare``, ``run_batch``), chosen by the file (:func:`open_model`):

- an exported circuit (:meth:`crossfhe.Circuit.export`, :mod:`crossfhe.ml` models: :class:`HostedCircuit`). A
  request holds one encrypted value per circuit input (``circuit.value`` blobs), all under one key pair and of one
  batch shape: ``()`` for one item, ``(b,)`` for b items. Every value is loaded and checked against the circuit
  before it is queued (layout, circuit and position, shapes, dtypes, residues), so a bad value is refused alone and
  never reaches a batch. A launch stacks the requests' items on the batch axis, pads the stack to a power of two
  (so a server compiles a handful of programs, one per size, not one per total) with copies of the first item, runs
  the circuit once, and splits the outputs back per request, each in its own batch shape.
- a scheme-switching function (:class:`crossfhe.api.switch.SwitchFunction`, saved with ``crossfhe.io.save``:
  :class:`HostedSwitch`). A request holds one CKKS vector (``ckks.vector``); keys are the client's switching keys
  (``switch.keys``). The switch's programs take one vector each, so a launch runs its requests one after another.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from crossfhe import io
from crossfhe.api.circuit import Circuit, Encrypted, load
from crossfhe.api.switch import KIND_FUNCTION, SchemeSwitch, SwitchFunction
from crossfhe.errors import KeyMismatchError, ParameterError, SerializationError
from crossfhe.io import circuit_file
from crossfhe.io import format as fmt
from crossfhe.io.bundle import unpack_bundle


class RequestError(Exception):
    """A request refused in the user's terms: ``status`` (a 4xx), ``code`` (a short name) and the message."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code = status, code


class Hosted:
    """A hosted model (module docstring): its ``name`` and ``path``; the methods the server calls."""

    name: str
    path: Path

    def describe(self) -> dict:
        """What the model list shows: name, scheme, digest, inputs and outputs, the keys it needs."""
        raise NotImplementedError

    def public_header(self) -> dict:
        """What a client rebuilds the model from (no program, no key)."""
        raise NotImplementedError

    def check_request(self, body) -> Request:
        """The request in ``body``, checked as far as it can be without keys; RequestError (400) otherwise."""
        raise NotImplementedError

    def check_keys(self, public, key_id: str | None = None) -> None:
        """RequestError (400) if ``public`` cannot run this model."""
        raise NotImplementedError

    def load_keys(self, blob):
        """The evaluation keys of ``blob`` (checked by their loader), as this model runs them."""
        return io.loads(blob)

    def prepare(self, request: Request, public) -> Request:
        """The request, its values checked against the keys (the checks that need them)."""
        return request

    def run_batch(self, public, requests: list) -> list[list[bytes]]:
        """The outputs of ``requests`` (one key set), serialized, per request."""
        raise NotImplementedError


def open_model(path) -> Hosted:
    """The model in the file at ``path``: an exported circuit or a saved switching function (SerializationError for
    anything else)."""
    with open(os.fspath(path), "rb") as f:
        head = f.read(len(circuit_file.MAGIC))
    if head == circuit_file.MAGIC:
        return HostedCircuit.open(path)
    data = fmt.read_bytes(path)
    kind = io.kind_of(data)
    if kind != KIND_FUNCTION:
        raise SerializationError(f"{path} is a {kind} blob, not an exported circuit or a switching function")
    fn = SwitchFunction.load(data)
    return HostedSwitch(fn.name, Path(os.fspath(path)), fn, data)


@dataclass
class HostedCircuit(Hosted):
    """A served circuit: its ``name``, the loaded ``circuit`` and its exported ``header`` (graph, specs, parameters,
    a model's client side; no program) as clients fetch it."""

    name: str
    path: Path
    circuit: Circuit
    header: dict = field(repr=False)

    @classmethod
    def open(cls, path, name: str | None = None) -> HostedCircuit:
        """The circuit exported at ``path`` (:meth:`crossfhe.Circuit.export`), with the parameters its file carries."""
        header, _ = circuit_file.read_circuit_file(path)
        circuit = load(path)
        return cls(name or header["name"], Path(os.fspath(path)), circuit, header)

    def describe(self) -> dict:
        c = self.circuit
        return {"name": self.name, "scheme": c.scheme.name, "digest": c.digest, "inputs": len(c.specs),
                "outputs": len(c.graph.outputs), "specs": self.header["specs"],
                "model": "model" in self.header, "requirements": _plain(c.requirements)}

    def public_header(self) -> dict:
        return dict(self.header)

    def check_request(self, body) -> Request:
        return check_request(self, body)

    def check_keys(self, public, key_id: str | None = None) -> None:
        check_keys(self, public, key_id)

    def run_batch(self, public, requests: list) -> list[list[bytes]]:
        return _run_circuit(self, public, requests)


@dataclass
class HostedSwitch(Hosted):
    """A served scheme-switching function (:class:`crossfhe.api.switch.SwitchFunction`) and its blob."""

    name: str
    path: Path
    function: SwitchFunction
    blob: bytes = field(repr=False)

    def load_keys(self, blob):
        """Switching keys, on the CKKS kernel set a context of these parameters would resolve (the vectors the
        server loads against them are on it)."""
        from crossfhe.io.switch import loads_switch_keys
        from crossfhe.kernels import as_kernel_set

        kind = io.kind_of(blob)
        if kind != "switch.keys":
            raise RequestError(400, "wrong_keys", f"{self.name} runs with scheme-switching keys "
                                                  f"(crossfhe.io.dumps(switch.keys)), got a {kind} blob")
        ck = self.function.ckks_params
        return loads_switch_keys(blob, params=ck.with_kernels(as_kernel_set(ck.kernels).resolve()))

    def describe(self) -> dict:
        f = self.function
        return {"name": self.name, "scheme": "switch", "digest": f.digest, "inputs": 1, "outputs": 1,
                "specs": [{"op": f.op, "slots": f.slots, "interval": list(f.interval), "bits": f.bits}],
                "model": False, "requirements": {"switch_keys": {"slots": f.slots, "bootstrap": True}}}

    def public_header(self) -> dict:
        import base64

        return {"function": base64.b64encode(self.blob).decode("ascii")}

    def check_request(self, body) -> Request:
        try:
            (blob,) = unpack_bundle(body, count=1, what=f"the request to {self.name}")
            c = fmt.unpack(blob, expected_kind="ckks.vector")
        except SerializationError as e:
            raise RequestError(400, "malformed", str(e)) from None
        if c.fields.get("params_digest") != self.function.ckks_params.digest():
            raise RequestError(400, "wrong_model", f"the vector was encrypted under other CKKS parameters than "
                                                   f"{self.name}'s")
        meta = c.fields.get("meta")
        key_id = meta.get("key_id") if isinstance(meta, dict) else None
        if not isinstance(key_id, str):
            raise RequestError(400, "wrong_key", "the vector carries no key id: encrypt it with a CKKSContext")
        return Request([bytes(blob)], key_id, ())

    def check_keys(self, public, key_id: str | None = None) -> None:
        try:
            self.function.check_keys(public)
        except (ParameterError, TypeError) as e:
            raise RequestError(400, "wrong_keys", f"these keys cannot run {self.name}: {e}") from None
        if key_id is not None and public.key_id != key_id:
            raise RequestError(400, "wrong_key", f"the vector is under key pair {key_id}, the keys are "
                                                 f"{public.key_id}'s")

    def prepare(self, request: Request, public) -> Request:
        from crossfhe.api.ckks import EncryptedVector

        sw = _switch_of(public)
        try:
            x = EncryptedVector.load(sw.ckks, request.values[0])
        except (SerializationError, KeyMismatchError) as e:
            raise RequestError(400, "malformed", f"the vector: {e}") from None
        if x.complex or x.width > self.function.slots or x.level < 1:
            raise RequestError(400, "wrong_shape", f"{self.name} takes a real vector of up to {self.function.slots} "
                                                   f"values above level 0, got {x!r}")
        return Request([x], request.key_id, ())

    def run_batch(self, public, requests: list) -> list[list[bytes]]:
        sw = _switch_of(public)
        return [[self.function.run(sw, r.values[0]).serialize()] for r in requests]


def _switch_of(public) -> SchemeSwitch:
    """The switch of stored keys, made once per key set (kept on the keys object, which the store caches)."""
    sw = getattr(public, "_crossfhe_switch", None)
    if sw is None:
        sw = SchemeSwitch.from_keys(public)
        object.__setattr__(public, "_crossfhe_switch", sw)
    return sw


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


def check_request(hosted: HostedCircuit, body) -> Request:
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


def check_keys(hosted: HostedCircuit, public, key_id: str | None = None) -> None:
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
    """The outputs of ``requests`` (one key set) as serialized values per request: one launch (module docstring)."""
    return hosted.run_batch(public, requests)


def _run_circuit(hosted: HostedCircuit, public, requests: list[Request]) -> list[list[bytes]]:
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


__all__ = ["Hosted", "HostedCircuit", "HostedSwitch", "Request", "RequestError", "bucket", "check_keys",
           "check_request", "open_model", "run_batch"]
