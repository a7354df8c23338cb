"""Input specifications: what each argument of a traced function is."""

from __future__ import annotations

import math
from dataclasses import dataclass

from crossfhe.errors import ParameterError


@dataclass(frozen=True)
class InputSpec:
    """Base of the input specifications (``CKKSVector``, ``BFVVector``, ``TFHEInt``)."""

    scheme = "?"

    def describe(self) -> str:
        return repr(self)


@dataclass(frozen=True)
class CKKSVector(InputSpec):
    """An encrypted CKKS vector of ``length`` real (or ``complex``) values, padded to a power of two and replicated
    over the slots, as :class:`crossfhe.EncryptedVector` is. ``bound``: a public bound on the values' magnitude
    (``circuit.encrypt`` refuses values beyond it); the compiler tracks bounds from it through every operation and
    refuses a bootstrap of a value that may leave [-1, 1]. Undeclared, an input of a circuit that bootstraps is taken
    to lie in [-1, 1] (and encrypt refuses values that do not); one that never bootstraps is not checked."""

    length: int
    complex: bool = False
    bound: float | None = None

    scheme = "ckks"

    def __post_init__(self):
        if not isinstance(self.length, int) or self.length < 1:
            raise ParameterError(f"CKKSVector takes a positive length, got {self.length!r}")
        if self.bound is not None:
            ok = isinstance(self.bound, (int, float)) and not isinstance(self.bound, bool)
            if not ok or not math.isfinite(self.bound) or self.bound <= 0:
                raise ParameterError(f"CKKSVector's bound is a positive finite number, got {self.bound!r}")
            object.__setattr__(self, "bound", float(self.bound))

    @property
    def width(self) -> int:
        return 1 << max(0, (self.length - 1).bit_length())


@dataclass(frozen=True)
class BFVVector(InputSpec):
    """An encrypted BFV vector of ``length`` integers mod t (batch encoding)."""

    length: int

    scheme = "bfv"

    def __post_init__(self):
        if not isinstance(self.length, int) or self.length < 1:
            raise ParameterError(f"BFVVector takes a positive length, got {self.length!r}")


@dataclass(frozen=True)
class TFHEInt(InputSpec):
    """An encrypted TFHE integer of ``bits`` bits (default: the parameters' message bits), values in [0, 2^bits)."""

    bits: int | None = None

    scheme = "tfhe"

    def __post_init__(self):
        if self.bits is not None and (not isinstance(self.bits, int) or not 1 <= self.bits <= 10):
            raise ParameterError(f"TFHEInt takes bits in [1, 10], got {self.bits!r}")


INTEGER_DTYPES = ("bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64")
"""The encrypted integer types (:class:`crossfhe.api.integer.EncryptedInteger`): NumPy's names."""


def integer_dtype(dtype, what: str = "dtype") -> str:
    """The name in :data:`INTEGER_DTYPES` of ``dtype`` (a NumPy dtype, its scalar type, ``bool`` or a name such as
    "uint16"); ParameterError naming the types otherwise."""
    import numpy as np

    try:
        name = "bool" if dtype is bool else np.dtype(dtype).name
    except TypeError:
        name = None
    if name not in INTEGER_DTYPES:
        raise ParameterError(f"{what}: encrypted integers are {', '.join(INTEGER_DTYPES)}, got {dtype!r}")
    return name


@dataclass(frozen=True)
class TFHEInteger(InputSpec):
    """An encrypted integer of NumPy type ``dtype`` (``np.uint8`` to ``np.int64``, or ``bool``) on radix blocks of
    ``msg_bits`` message bits each (default: half the parameters' message bits, :mod:`crossfhe.tfhe.integer`), as
    :class:`crossfhe.EncryptedInteger` is; values in the type's range, arithmetic mod 2^bits."""

    dtype: str
    msg_bits: int | None = None

    scheme = "integer"

    def __post_init__(self):
        object.__setattr__(self, "dtype", integer_dtype(self.dtype, "TFHEInteger"))
        if self.msg_bits is not None and (isinstance(self.msg_bits, bool) or not isinstance(self.msg_bits, int)
                                          or not 1 <= self.msg_bits <= 5):
            raise ParameterError(f"TFHEInteger takes msg_bits in [1, 5], got {self.msg_bits!r}")


__all__ = ["INTEGER_DTYPES", "BFVVector", "CKKSVector", "TFHEInt", "TFHEInteger", "integer_dtype"]
