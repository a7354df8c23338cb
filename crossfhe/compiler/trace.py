"""Tracing: a plain Python function called on symbolic values records a :class:`~crossfhe.compiler.ir.Graph`.

Each scheme's symbolic value (:class:`Value` subclasses in :mod:`crossfhe.compiler.ckks`, ``bfv``, ``tfhe``)
overloads the operators users already write on encrypted values; every operator appends a node to the
active :class:`Trace` with the user's source line. Combining values of two schemes, or of two traces, is
refused there (:class:`~crossfhe.compiler.ir.CircuitError`, naming the operation and the line).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

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


__all__ = ["Trace", "Value", "source_line"]
