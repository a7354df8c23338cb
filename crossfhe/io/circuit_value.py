"""The blob of a circuit's encrypted input or output (kind ``circuit.value``), written and read with every check.

A :mod:`crossfhe.io.format` container whose header holds, besides ``kind`` and the array table, exactly:

==============  ==========================================================================================
field           value
==============  ==========================================================================================
``batch_shape``  list of non-negative ints (at most 32): the leading axes every leaf starts with
``key_id``       32 lowercase hex digits (:func:`crossfhe.core.keys.key_id` of the key pair), or null
``circuit``      64 lowercase hex digits: the digest of the circuit the value belongs to
``position``     int in [0, 2^31): the input or output index
``output``       bool: an output (true) or an input (false)
==============  ==========================================================================================

and the arrays ``leaf0`` ... ``leaf{K-1}`` (K >= 1, no others), uint32 or int32, each of shape
``batch_shape + item shape``. What the leaves mean (ciphertext parts, their moduli) is the circuit's: it passes
one :class:`LeafSpec` per leaf to :func:`unpack_circuit_value`, which then also checks every leaf's dtype, shape
and residue range (:func:`crossfhe.io.checks.check_residues`). Any other field, a missing one, one of another
JSON type, or a leaf that does not fit raises :class:`~crossfhe.errors.SerializationError`, resealed or not.

    blob = pack_circuit_value(leaves, batch_shape=(4,), key_id=kid, circuit=digest, position=0, output=False)
    value = unpack_circuit_value(blob, leaves=[LeafSpec((3, 1024), "uint32", moduli)] * 2)
"""

from __future__ import annotations

import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from crossfhe.errors import SerializationError
from crossfhe.io import checks
from crossfhe.io import format as fmt

KIND_CIRCUIT_VALUE = "circuit.value"
FIELDS = ("batch_shape", "key_id", "circuit", "position", "output")
MAX_POSITION = 2**31 - 1
_LEAF = re.compile(r"leaf(0|[1-9][0-9]*)")
_DTYPES = ("uint32", "int32")


@dataclass(frozen=True)
class LeafSpec:
    """What one leaf must be: ``shape`` per item (the batch axes come before it), ``dtype`` ("uint32" or
    "int32"), and for residues the ``moduli`` of the limbs along ``axis`` (negative, counted from the end of the
    leaf; -2 for an RNS polynomial [..., limbs, N], -1 for an LWE body [..., limbs]); ``moduli`` None: any word."""

    shape: tuple[int, ...]
    dtype: str = "uint32"
    moduli: tuple[int, ...] | None = None
    axis: int = -2

    def __post_init__(self):
        if self.dtype not in _DTYPES:
            raise ValueError(f"LeafSpec dtype must be one of {_DTYPES}, got {self.dtype!r}")
        if self.moduli is not None and not -len(self.shape) <= self.axis < 0:
            raise ValueError(f"LeafSpec axis must be negative and within the item shape {self.shape}, got {self.axis}")


@dataclass(frozen=True, eq=False)
class CircuitValue:
    """The checked content of a ``circuit.value`` blob, in the order of the circuit's ``Encrypted`` fields:
    ``leaves`` (NumPy arrays, uint32 or int32, batch axes first), ``batch_shape``, ``key_id`` (or None),
    ``circuit`` (hex digest), ``position``, ``output``."""

    leaves: tuple[np.ndarray, ...]
    batch_shape: tuple[int, ...]
    key_id: str | None
    circuit: str
    position: int
    output: bool


def _fields(batch_shape, key_id, circuit, position, output) -> dict:
    """The header fields after checking each one's type and range (shared by writer and reader)."""
    return {
        "batch_shape": list(checks.json_shape(batch_shape, "circuit.value batch_shape")),
        "key_id": None if key_id is None else checks.json_hex(key_id, "circuit.value key_id", 32),
        "circuit": checks.json_hex(circuit, "circuit.value circuit (the circuit's digest)", 64),
        "position": checks.json_int(position, "circuit.value position", lo=0, hi=MAX_POSITION),
        "output": checks.json_bool(output, "circuit.value output"),
    }


def _ints(value, what: str):
    """A writer's integer (or sequence of integers: a list) as plain ints: NumPy integers are taken, bools not."""
    try:
        if isinstance(value, (tuple, list)):
            return [_ints(v, what) for v in value]
        if isinstance(value, bool):
            raise TypeError
        return operator.index(value)
    except TypeError:
        raise SerializationError(f"circuit.value {what} must be an integer or a list of integers, got "
                                 f"{value!r}") from None


def _check_leaf(name: str, leaf: np.ndarray, batch: tuple[int, ...], spec: LeafSpec | None) -> None:
    what = f"circuit.value array {name!r}"
    if leaf.shape[: len(batch)] != batch or leaf.ndim < len(batch):
        raise SerializationError(f"{what} has shape {list(leaf.shape)}, which does not start with the batch shape "
                                 f"{list(batch)}")
    if spec is None:
        return
    shape = batch + tuple(spec.shape)
    if leaf.dtype != np.dtype(spec.dtype) or leaf.shape != shape:
        raise SerializationError(f"{what} is {leaf.dtype}{list(leaf.shape)}, expected {spec.dtype}{list(shape)}")
    if spec.moduli is not None:
        checks.check_residues(leaf, spec.moduli, what=what, axis=spec.axis)


def pack_circuit_value(leaves: Sequence, *, batch_shape, key_id: str | None, circuit: str, position: int,
                       output: bool) -> bytes:
    """The ``circuit.value`` blob of ``leaves`` (NumPy or JAX arrays, uint32 or int32, each starting with
    ``batch_shape``; at least one) and the fields of the module docstring (``batch_shape`` a tuple or list).
    SerializationError if a field or leaf does not fit; nothing of the circuit is checked (the reader does that
    against its leaf specs)."""
    fields = _fields(_ints(batch_shape, "batch_shape"), key_id, circuit, _ints(position, "position"), output)
    arrays = {}
    for i, x in enumerate(leaves):
        try:
            leaf = np.asarray(x)
        except Exception as e:  # noqa: BLE001 - a traced or foreign array: its own error, reported as ours
            raise SerializationError(f"circuit.value leaf{i} cannot be moved to the host: {e}") from None
        if leaf.dtype.name not in _DTYPES:
            raise SerializationError(f"circuit.value leaf{i} has dtype {leaf.dtype}; only uint32 and int32 are stored")
        _check_leaf(f"leaf{i}", leaf, tuple(fields["batch_shape"]), None)
        arrays[f"leaf{i}"] = leaf
    if not arrays:
        raise SerializationError("a circuit value has at least one leaf")
    return fmt.pack(KIND_CIRCUIT_VALUE, fields, arrays)


def unpack_circuit_value(blob, *, leaves: Sequence[LeafSpec] | None = None) -> CircuitValue:
    """The :class:`CircuitValue` of a :func:`pack_circuit_value` blob, after the container's checks and these:
    exactly the fields of the module docstring, each of its type and range; exactly the arrays ``leaf0`` ...
    ``leaf{K-1}``, K >= 1, each starting with ``batch_shape``. ``leaves``: the circuit's spec of each leaf (then
    K must equal ``len(leaves)`` and every leaf has the spec's dtype, shape and residue range). Raises
    SerializationError naming the field or leaf, what was expected and what was found; TypeError if ``blob``
    is not bytes-like."""
    c = fmt.unpack(blob, expected_kind=KIND_CIRCUIT_VALUE)
    f = checks.json_keys(c.fields, set(FIELDS), "a circuit.value header")
    fields = _fields(f["batch_shape"], f["key_id"], f["circuit"], f["position"], f["output"])
    batch = tuple(fields["batch_shape"])
    names = list(c.arrays)
    count = len(names)
    if count == 0 or any(not _LEAF.fullmatch(n) for n in names) or set(names) != {f"leaf{i}" for i in range(count)}:
        raise SerializationError(f"a circuit.value blob holds the arrays leaf0 ... leafK-1 (K >= 1), got {names}")
    if leaves is not None and len(leaves) != count:
        raise SerializationError(f"a circuit.value blob for this position holds {len(leaves)} leaves, got {count}")
    out = []
    for i in range(count):
        leaf = c.arrays[f"leaf{i}"]
        _check_leaf(f"leaf{i}", leaf, batch, None if leaves is None else leaves[i])
        out.append(leaf)
    return CircuitValue(tuple(out), batch, fields["key_id"], fields["circuit"], fields["position"], fields["output"])


__all__ = ["FIELDS", "KIND_CIRCUIT_VALUE", "CircuitValue", "LeafSpec", "pack_circuit_value", "unpack_circuit_value"]
