"""Tracing: a plain Python function called on symbolic values records a :class:`~crossfhe.api.ir.Graph`.

Each scheme's value class (:class:`Value` subclasses: :mod:`crossfhe.api.ckks`, ``bfv``, ``tfhe``) overloads the
operators users write on encrypted values; on a symbolic value every operator appends a node to the active
:class:`Trace` with the user's source line. Combining values of two schemes, or of two traces, is
refused there (:class:`~crossfhe.api.ir.CircuitError`, naming the operation and the line).
"""

from __future__ import annotations

import os
import sys

from crossfhe.api.ir import Builder, CircuitError

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

    def __init__(self, scheme: str, params=None):
        self.scheme = scheme
        self.params = params
        """The parameters given to :func:`crossfhe.compile` (None: chosen after tracing); a scheme whose bookkeeping
        depends on them while tracing (the radix integers' carries) reads them here."""
        self.builder = Builder(scheme)
        self.inputs: list[int] = []

    def node(self, op: str, args=(), attrs: dict | None = None, *, loc: str | None = None) -> int:
        return self.builder.add(op, args, attrs, source_line() if loc is None else loc, merge=False)


class Value:
    """An encrypted value of the front end, of one scheme (subclasses: :class:`crossfhe.api.ckks.EncryptedVector`,
    :class:`crossfhe.api.bfv.EncryptedIntVector`, :class:`crossfhe.api.tfhe.EncryptedInt`). The same class serves
    both ways: a concrete value holds its words and the public context they belong to, and each operator runs its
    primitive at once (:mod:`crossfhe.api.eager`); a symbolic value (``trace`` set, inside :func:`crossfhe.compile`)
    is node ``node`` of the graph being traced, and each operator appends its primitive there, with the user's
    source line."""

    scheme = "?"
    trace: Trace | None = None
    node: int | None = None
    _FIELDS: tuple = ()
    """The attributes that make a value (its words, context and bookkeeping; ``trace`` and ``node``)."""

    def __setattr__(self, name, value):
        raise AttributeError(f"an {type(self).__name__} is immutable (setting {name})")

    def _replace(self, **changes):
        """A copy with ``changes`` to :attr:`_FIELDS`, remembering the same key owner."""
        new = object.__new__(type(self))
        mine = self.__dict__
        d = new.__dict__
        for k in self._FIELDS:
            d[k] = mine[k]
        d.update(changes)
        owner = mine.get("_owner")
        if owner is not None:
            d["_owner"] = owner
        return new

    def _record(self, op: str, others, attrs: dict, consts: dict | None, **fields):
        """The symbolic value of primitive ``op`` on this value and ``others``: its node appended to the trace (with
        the plaintext constants it names), the result's bookkeeping ``fields``."""
        for key, array in (consts or {}).items():
            self.trace.builder.consts.setdefault(key, array)
        node = self.trace.node(op, (self.node, *(o.node for o in others)), attrs)
        return self._replace(node=node, **fields)

    @staticmethod
    def _owner_of(values):
        """The key owner the first of ``values`` that has one remembers (None: none)."""
        return next((v.__dict__["_owner"] for v in values if v.__dict__.get("_owner") is not None), None)

    @property
    def traced(self) -> bool:
        """Whether this is a symbolic value of a circuit being traced."""
        return self.trace is not None

    def _error(self, kind, message: str) -> Exception:
        """The error to raise: while tracing a :class:`~crossfhe.api.ir.CircuitError` naming the user's line,
        eagerly ``kind`` (a ValueError is raised as :class:`~crossfhe.errors.ParameterError`)."""
        if self.traced:
            return CircuitError(f"at {source_line()}: {message}")
        if kind is ValueError:
            from crossfhe.errors import ParameterError

            return ParameterError(message)
        return kind(message)

    def _same(self, other: Value, what: str) -> None:
        """Refuse operands of two schemes, or of a trace and a concrete value, or of two traces."""
        if other.scheme != self.scheme:
            raise self._error(TypeError, f"{what}: a {self.scheme.upper()} value and a {other.scheme.upper()} value "
                              "are combined without a conversion; convert explicitly (crossfhe.SchemeSwitch)")
        if self.traced != other.traced:
            raise self._error(TypeError, f"{what}: a value of the circuit being traced and a concrete encrypted value "
                              "are combined; pass the concrete value as an input of the circuit")
        if self.traced and other.trace is not self.trace:
            raise CircuitError(f"{what} at {source_line()}: the operands come from two different circuits' traces")


class Same:
    """A reference compared by identity: a context in a pytree's static data (contexts hold arrays)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other):
        return isinstance(other, Same) and other.obj is self.obj

    def __hash__(self):
        return id(self.obj)


def register_value(cls, leaves: tuple[str, ...] = ("ct",)) -> None:
    """Make the value class ``cls`` a JAX pytree: its ``leaves`` fields are the children (the ciphertext's words),
    every other field of :attr:`Value._FIELDS` and the remembered key owner are static data (contexts compared by
    identity), so a user's ``jax.jit`` or ``vmap`` takes and returns concrete values. A symbolic value is not a JAX
    value (TypeError)."""
    static = tuple(f for f in cls._FIELDS if f not in leaves and f not in ("trace", "node"))

    def flatten(x):
        if x.traced:
            raise TypeError(f"a traced {cls.__name__} (inside crossfhe.compile) is not a JAX value; return it from the "
                            "traced function instead")
        aux = tuple(Same(getattr(x, f)) if f == "ctx" else getattr(x, f) for f in static)
        return tuple(getattr(x, f) for f in leaves), (aux, Same(x.__dict__.get("_owner")))

    def unflatten(aux, children):
        fields, owner = aux
        new = object.__new__(cls)
        new.__dict__.update(trace=None, node=None)
        new.__dict__.update(zip(leaves, children, strict=True))
        new.__dict__.update((f, v.obj if isinstance(v, Same) else v) for f, v in zip(static, fields, strict=True))
        if owner.obj is not None:
            new.__dict__["_owner"] = owner.obj
        return new

    import jax

    jax.tree_util.register_pytree_node(cls, flatten, unflatten)


def width_of(length: int) -> int:
    """The power of two a vector of ``length`` values is padded to."""
    return 1 << max(0, (length - 1).bit_length())


__all__ = ["Same", "Trace", "Value", "register_value", "source_line", "width_of"]
