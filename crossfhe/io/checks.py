"""Checks of loaded arrays and header values, shared by every loader and by the layers above ``io``.

Each function returns nothing (or the checked value) and raises :class:`~crossfhe.errors.SerializationError` naming
``what`` (the object and array, in the user's terms), the expected range or type and the value found. They look at
the content only, never at the SHA-256: a blob can be edited and resealed, so every word and field a loader rebuilds
an object from goes through one of them.

    check_residues(leaf, (q0, q1, q2), what="circuit.value leaf0")     # uint32 [..., 3, N] in [0, q_i)
    check_bounds(bits, 0, 2, what="tfhe.client_key array 'lwe_key'")   # int32 key bits in {0, 1}
"""

from __future__ import annotations

import contextlib

import numpy as np

from crossfhe.errors import SerializationError
from crossfhe.io.format import is_json_int


def _first(bad: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(bad)[0])


def check_residues(array, moduli, *, what: str, axis: int = -2, start: int = 0) -> None:
    """Every word of ``array`` in [0, q_i), q_i the modulus of its limb.

    array: an integer NumPy (or JAX, moved to the host) array [..., limbs, ...] with the limb axis ``axis``
    (negative: counted from the end; -2 for RNS polynomials [..., limbs, N], -1 for LWE bodies [..., limbs]).
    moduli: one positive int per limb, below 2^63 (ValueError otherwise: the caller's error, not the data's).
    start: the index along axis 0 of ``array``'s first row when it is a piece of a larger array (only the
    messages use it). Raises SerializationError naming ``what``, the limb, its modulus, the index and the value
    when a word is negative or >= its modulus, or when the array is not of integers, has no axis ``axis`` or
    another number of limbs than ``moduli`` holds.
    """
    data = np.asarray(array)
    moduli = tuple(int(q) for q in moduli)
    if not all(0 < q < 2**63 for q in moduli):
        raise ValueError(f"moduli must be positive ints below 2^63, got {list(moduli)}")
    if data.dtype.kind not in "iu":
        raise SerializationError(f"{what}: residues must be integers, got dtype {data.dtype}")
    if not -data.ndim <= axis < data.ndim or data.shape[axis] != len(moduli):
        raise SerializationError(f"{what}: shape {list(data.shape)} has no limb axis {axis} of {len(moduli)} limbs "
                                 f"(one per modulus {list(moduli)})")
    if data.size == 0:
        return
    axis %= data.ndim
    fits = max(moduli) <= np.iinfo(data.dtype).max  # compare in the words' own type: no wider temporary
    q = np.asarray(moduli, dtype=data.dtype if fits else np.int64).reshape((-1,) + (1,) * (data.ndim - axis - 1))
    bad = data >= q if data.dtype.kind == "u" else (data < 0) | (data >= q)
    if bad.any():
        index = _first(bad)
        limb = index[axis]
        at = (index[0] + start,) + index[1:]
        raise SerializationError(
            f"{what} holds {int(data[index])} at index {at}, not in [0, q) for its limb {limb}, "
            f"q = {moduli[limb]}: out of range (corrupted or tampered)"
        )


def check_bounds(array, lo: int, hi: int, *, what: str, meaning: str = "") -> None:
    """Every word of the integer array ``array`` in [lo, hi). ``meaning``: what the range is, for the message
    ("key coefficients must be 0 or 1"). Raises SerializationError naming ``what``, the index and the value."""
    data = np.asarray(array)
    if data.dtype.kind not in "iu":
        raise SerializationError(f"{what}: expected integers, got dtype {data.dtype}")
    if data.size == 0:
        return
    wide = data.astype(np.int64) if data.dtype.itemsize <= 4 else data
    bad = (wide < lo) | (wide >= hi)
    if bad.any():
        index = _first(bad)
        why = meaning or f"expected values in [{lo}, {hi})"
        raise SerializationError(f"{what} holds {int(data[index])} at index {index}: {why} (corrupted or tampered)")


def json_int(value, what: str, *, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` after checking that it is a JSON integer in [lo, hi] (bounds inclusive, None: open)."""
    if not is_json_int(value):
        raise SerializationError(f"{what} must be an integer, got {shown(value)}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        span = f"[{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}]"
        raise SerializationError(f"{what} must be an integer in {span}, got {shown(value)}")
    return value


def json_str(value, what: str) -> str:
    """``value`` after checking that it is a JSON string."""
    if not isinstance(value, str):
        raise SerializationError(f"{what} must be a string, got {shown(value)}")
    return value


def json_bool(value, what: str) -> bool:
    """``value`` after checking that it is a JSON true or false (not 0 or 1)."""
    if not isinstance(value, bool):
        raise SerializationError(f"{what} must be true or false, got {shown(value)}")
    return value


def json_hex(value, what: str, digits: int) -> str:
    """``value`` after checking that it is a string of exactly ``digits`` lowercase hex digits."""
    if not (isinstance(value, str) and len(value) == digits and all(ch in "0123456789abcdef" for ch in value)):
        raise SerializationError(f"{what} must be {digits} lowercase hex digits, got {shown(value)}")
    return value


def json_shape(value, what: str, *, max_rank: int = 32) -> tuple[int, ...]:
    """``value`` (a list of at most ``max_rank`` non-negative JSON integers) as a tuple."""
    if not isinstance(value, list) or len(value) > max_rank or not all(is_json_int(d) and d >= 0 for d in value):
        raise SerializationError(f"{what} must be a list of at most {max_rank} non-negative integers, got "
                                 f"{shown(value)}")
    return tuple(value)


def json_keys(obj, required: set, what: str, optional: set = frozenset()) -> dict:
    """``obj`` after checking that it is a JSON object holding every key of ``required`` and otherwise only keys
    of ``optional``; names the missing and the unknown keys."""
    if not isinstance(obj, dict):
        raise SerializationError(f"{what} must be a JSON object, got {type(obj).__name__}")
    missing, unknown = sorted(set(required) - set(obj)), sorted(set(obj) - set(required) - set(optional))
    if missing or unknown:
        parts = ([f"missing {missing}"] if missing else []) + ([f"unknown {unknown}"] if unknown else [])
        raise SerializationError(f"{what} must have the keys {sorted(required)}"
                                 f"{f' (optionally {sorted(optional)})' if optional else ''}; {', '.join(parts)}")
    return obj


@contextlib.contextmanager
def about(kind: str):
    """Within the block, a SerializationError's message is prefixed with ``kind`` (the blob's kind, so a user
    reading ``array 'c0' holds ...`` learns which object it was), unless it names it already."""
    try:
        yield
    except SerializationError as e:
        if str(e).startswith(kind):
            raise
        raise SerializationError(f"{kind}: {e}") from None


def shown(value) -> str:
    """A short repr of a header value for a message (a long string or list is cut)."""
    text = repr(value) if not is_json_int(value) or abs(value) < 10**30 else f"an int of {value.bit_length()} bits"
    return text if len(text) <= 80 else text[:77] + "..."


__all__ = [
    "about",
    "check_bounds",
    "check_residues",
    "is_json_int",
    "json_bool",
    "json_hex",
    "json_int",
    "json_keys",
    "json_shape",
    "json_str",
    "shown",
]
