"""Tracing: a plain Python function called on symbolic values records a :class:`~crossfhe.compiler.ir.Graph`.

Each scheme's symbolic value (:class:`Value` subclasses in :mod:`crossfhe.compiler.ckks`, ``bfv``, ``tfhe``)
overloads the operators users already write on encrypted values; every operator appends a node to the
active :class:`Trace` with the user's source line. Combining values of two schemes, or of two traces, is
refused there (:class:`~crossfhe.compiler.ir.CircuitError`, naming the operation and the line).
"""

from __future__ import annotations

import operator
import os
import sys
from dataclasses import dataclass

import numpy as np

from crossfhe.compiler.ir import Builder, CircuitError

_HERE = os.path.dirname(os.path.abspath(__file__))


def source_line() -> str:
    """"file.py:LINE" of the innermost frame outside this package (the user's code that made the value)."""
    frame = sys._getframe(1)
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == _HERE:
        frame = frame.f_back
    if frame is None:
        return ""
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


class Trace:
    """The graph being recorded for one scheme; the values made while it is open refer to it."""

    def __init__(self, scheme: str):
        self.scheme = scheme
        self.builder = Builder(scheme)
        self.inputs: list[int] = []

    def node(self, op: str, args=(), attrs: dict | None = None, *, loc: str | None = None) -> int:
        return self.builder.add(op, args, attrs, source_line() if loc is None else loc, merge=False)


@dataclass(frozen=True, eq=False)
class Value:
    """A symbolic encrypted value: node ``node`` of ``trace``. Subclasses add the scheme's operators."""

    trace: Trace
    node: int

    scheme = "?"
    __array_ufunc__ = None  # NumPy scalars and arrays defer to the value's own operators

    def _same(self, other: Value, what: str) -> None:
        if other.trace.scheme != self.trace.scheme:
            raise CircuitError(
                f"{what} at {source_line()}: a {self.trace.scheme.upper()} value and a {other.trace.scheme.upper()} "
                "value are combined without a conversion; a circuit computes in one scheme (convert explicitly)"
            )
        if other.trace is not self.trace:
            raise CircuitError(f"{what} at {source_line()}: the operands come from two different circuits' traces")

    def __bool__(self):
        raise CircuitError(
            f"at {source_line()}: an encrypted value has no truth value while tracing (the branch would depend on "
            "secret data); compute both sides and select arithmetically, or use a lookup table"
        )


def _is_int(c) -> bool:
    return isinstance(c, (int, np.integer)) and not isinstance(c, (bool, np.bool_))


def width_of(length: int) -> int:
    """The power of two a vector of ``length`` values is padded to."""
    return 1 << max(0, (length - 1).bit_length())


class SlotVector(Value):
    """What the CKKS and BFV vectors share: ``length`` values zero-padded to the power of two ``width`` and repeated
    over the slots; NumPy broadcasting of lengths, ``@``, ``**``, ``rotate`` and ``sum``. Subclasses give ``_new``
    (a value of their kind for a new node) and the arithmetic operators."""

    length: int = 1
    width: int = 1
    clean: bool = True
    """Whether the padding slots (``length`` to ``width``) hold zeros, as NumPy's padded vector would: a scalar
    added, a rotation or a broadcast single value fills them; :meth:`sum` and :meth:`rotate` clear them first."""
    _ARRAYS = (np.ndarray, list, tuple)

    def __len__(self) -> int:
        return self.length

    def _make(self, node: int, length: int, width: int, clean: bool, **extra):  # pragma: no cover - subclasses
        raise NotImplementedError

    def _new(self, op, args, attrs=None, *, length=None, width=None, other=None, **extra):
        """The value of a new node ``op`` (``other``: the second vector operand), with its padding state."""
        length, width = length or self.length, width or self.width
        node = self.trace.node(op, args, attrs)
        return self._make(node, length, width, self._result_clean(op, other, length, width), **extra)

    def _result_clean(self, op: str, other, length: int, width: int) -> bool:
        from crossfhe.api.ckks import padding_clean

        return padding_clean(op, length, width, (self.length, self.clean),
                             None if other is None else (other.length, other.clean))

    def _masked(self):
        """This value with its padding slots zeroed (a product with a 0/1 plaintext; for CKKS it costs a level)."""
        if self.clean or self.length == self.width:
            return self
        return self * np.ones(self.length, dtype=np.int64)

    def _scalar_fills_padding(self) -> bool:
        """Whether adding a scalar to every slot would put it into zero padding (then it is added as a plaintext
        zero-padded like the vector)."""
        return self.length < self.width and self.clean

    def _shape_with(self, length: int, what: str) -> tuple[int, int]:
        """(length, width) of the result with an operand of ``length`` values: equal lengths, or one of them 1."""
        if length == self.length or length == 1:
            return self.length, self.width
        if self.length == 1:
            return length, width_of(length)
        raise CircuitError(f"{what} at {source_line()}: operands of lengths {self.length} and {length} cannot be "
                           "combined (NumPy would not broadcast them either)")

    def __matmul__(self, other):
        """The inner product in every slot (equal lengths): ``(self * other).sum()``."""
        if isinstance(other, Value) and not isinstance(other, type(self)):
            self._same(other, "@")
        if not isinstance(other, (type(self), *self._ARRAYS)) and not hasattr(other, "__array__"):
            return NotImplemented
        length = other.length if isinstance(other, type(self)) else np.shape(other)[-1]
        if length != self.length:
            raise CircuitError(f"@ at {source_line()}: operands of lengths {self.length} and {length}: an inner "
                               "product needs equal lengths")
        return (self * other).sum()

    __rmatmul__ = __matmul__

    def __pow__(self, k):
        """x ** k for an integer k >= 1, by repeated squaring (multiplicative depth ceil(log2 k))."""
        if not _is_int(k) or k < 1:
            raise CircuitError(f"** at {source_line()}: the exponent must be an integer >= 1, got {k!r}")
        result, base = None, self
        while k:
            if k & 1:
                result = base if result is None else result * base
            k >>= 1
            if k:
                base = base * base
        return result

    def rotate(self, k: int):
        """Values rotated left by k over the width-periodic slots (value j of the result is value (j + k) mod
        width), any integer k: one rotation by k mod width, whose key the circuit's keys get."""
        try:
            k = operator.index(k)
        except TypeError:
            raise CircuitError(f"rotate at {source_line()}: the offset must be an integer, got {k!r}") from None
        r = k % self.width
        if r == 0:
            return self
        x = self._masked()
        return x._new("rotate", (x.node,), {"k": r})

    def sum(self):
        """Every value holds the sum of the values: log2(width) rotations by powers of two and additions, on the
        padding cleared first (it then holds the sum too)."""
        x, step = self._masked(), 1
        while step < self.width:
            x = x + x._new("rotate", (x.node,), {"k": step})
            step *= 2
        return x._make(x.node, x.length, x.width, x.length == x.width)  # the padding holds the sum too


__all__ = ["SlotVector", "Trace", "Value", "source_line", "width_of"]
