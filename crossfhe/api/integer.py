"""Encrypted integers of NumPy's types on TFHE: ``uint8`` to ``uint64``, ``int8`` to ``int64`` and ``bool``, with
every operator a NumPy (or TFHE-rs ``FheUint``) user writes, eagerly and inside :func:`crossfhe.compile`.

    ctx = TFHEContext.create(presets.tfhe.P4_128)
    x = ctx.encrypt(np.array([1200, 7], dtype=np.uint16))    # a batch of two uint16
    y = ctx.encrypt(300, dtype=np.uint16)
    z = crossfhe.where(x > y, x - y, y * 3)                   # encrypted bool, select, products
    ctx.decrypt(z)                                            # array([900, 900], dtype=uint16)

Semantics. Values hold x mod 2^bits: ``+``, ``-``, ``*``, unary ``-``, ``<<`` and casts to fewer bits wrap as NumPy's
integer types do; signed types read the same bits in two's complement (``>>`` is arithmetic, comparisons, ``min``,
``max``, ``//`` and ``%`` are signed, ``abs(-2^(bits-1))`` wraps to itself). ``//`` and ``%`` floor as NumPy's do; by
an encrypted zero they give what TFHE-rs gives (unsigned: 2^bits - 1 and x; signed: -1 for x >= 0, 1 for x < 0, and
x), never an error (the divisor is secret); by a constant zero, ZeroDivisionError. Shifts and rotations by a constant
k: k >= bits shifts everything out (rotations take k mod bits); by an encrypted amount, the amount is taken mod
bits, as TFHE-rs does. Comparisons give an encrypted ``bool``; ``&``, ``|``, ``^`` and ``~`` on bools are logical.
Operands are of one type (``astype`` converts: wider types are zero- or sign-extended by the source's signedness,
narrower ones wrap); int constants must lie in the type's range (NumPy 2's rule), and ``x + c`` with a constant
costs less than with a ciphertext (``x * 3`` is a few bootstraps, ``x * y`` a product of blocks).
``overflowing_add``/``_sub``/``_mul`` give the result and an encrypted bool saying whether it wrapped.

How it runs. An integer is radix blocks of m message bits (default half the parameters' p: 2 on P4_128, TFHE-rs's
default layout; ``msg_bits=`` chooses), whose carries and noise are tracked per block from the public types alone
(:mod:`crossfhe.api.integer_lower`), so no operator ever leaves a block's message space: additions are lazy and
the next operator that needs room propagates. Each operator is one primitive: eagerly one cached compiled program,
inside a circuit one node, where equal operators merge and independent ones of one kind run as one batched call.

Who holds what, errors, batches, pickling and blobs: as :class:`crossfhe.api.tfhe.EncryptedInt` (the key owner
encrypts; values hold no secret; ``ctx.decrypt(x)`` or ``x.decrypt()`` at the key owner; KeyMismatchError across
key pairs).
"""

from __future__ import annotations

import numbers

import jax.numpy as jnp
import numpy as np

from crossfhe.api import eager
from crossfhe.api import integer_lower as il
from crossfhe.api._owner import KeyOwned
from crossfhe.api._owner import same_keys as _same_keys
from crossfhe.api._owner import set_owner as _set_owner
from crossfhe.api.specs import integer_dtype
from crossfhe.api.tfhe import INTEGER_TYPES, TFHEContext, TFHEPublicContext
from crossfhe.api.trace import Value, register_value
from crossfhe.api.vector import is_int, power, scalar_operand
from crossfhe.core.lwe import LWECiphertext
from crossfhe.errors import ParameterError, SerializationError
from crossfhe.io import format as fmt
from crossfhe.io import tfhe as tio
from crossfhe.io.registry import register_kind, register_type
from crossfhe.tfhe import integer as ri
from crossfhe.tfhe.params import Params

KIND_RADIX = "tfhe.radix"
"""The kind of an :class:`EncryptedInteger` blob: the ``tfhe.ciphertext`` layout (:mod:`crossfhe.io.tfhe`) of its
blocks (batch shape ``(*shape, B)``) with one more header field, ``radix``: ``{"dtype", "msg_bits", "degrees",
"norms"}`` (a loaded value is checked against the parameters' bounds)."""

_ARRAYS = (np.ndarray, list, tuple)

SUPPORTED = ("+ - * // % divmod ** (int exponents) & | ^ ~ << >> rotl rotr == != < <= > >= abs, np.minimum, "
             "np.maximum, crossfhe.where (np.where), astype, overflowing_add/_sub/_mul, x[i] and len over the batch")
"""What encrypted integers support, named by the errors that refuse the rest."""


class EncryptedInteger(KeyOwned, Value):
    """An encrypted integer of a NumPy type, or a batch of them (NumPy's broadcasting between batches): concrete
    (``ct`` its blocks' words, ``ctx`` its public context) or symbolic inside :func:`crossfhe.compile`. ``meta``: the
    type and the blocks' public bookkeeping (:mod:`crossfhe.api.integer_lower`). See the module docstring for the
    operators and their semantics."""

    scheme = "integer"
    __array_priority__ = 1000

    _FIELDS = ("ct", "ctx", "meta", "trace", "node")

    def __init__(self, ct: LWECiphertext | None = None, ctx: TFHEPublicContext | None = None, meta: tuple = (), *,
                 trace=None, node: int | None = None):
        self.__dict__.update(ct=ct, ctx=ctx, meta=meta, trace=trace, node=node)

    @classmethod
    def symbolic(cls, trace, node: int, meta: tuple) -> EncryptedInteger:
        """The traced value of an input node (its metadata from the :class:`~crossfhe.api.specs.TFHEInteger` spec)."""
        return cls(trace=trace, node=node, meta=meta)

    # Description -----------------------------------------------------------------------------------

    @property
    def dtype(self) -> np.dtype:
        """The NumPy type (``np.dtype('uint16')``, ``np.dtype(bool)``)."""
        return np.dtype(self.meta[0])

    @property
    def bits(self) -> int:
        """The type's width (a bool: 1)."""
        return il.width(self.meta[0])

    @property
    def msg_bits(self) -> int:
        """Message bits per radix block."""
        return self.meta[1]

    @property
    def shape(self) -> tuple[int, ...]:
        """The batch shape (() for one integer; a traced value is one item of the circuit's batch)."""
        if self.traced:
            return ()
        return tuple(self.ct.b.shape[:-2])

    @property
    def params(self) -> Params:
        return self.trace.params if self.traced else self.ctx.params

    def __repr__(self) -> str:
        if self.traced:
            return f"EncryptedInteger(%{self.node}, {self.meta[0]}, traced)"
        batch = f", batch={self.shape}" if self.shape else ""
        return f"EncryptedInteger({self.meta[0]}, {il.blocks_of(self.meta)} x {self.msg_bits}-bit blocks{batch})"

    def __bool__(self):
        raise self._error(TypeError, "an encrypted integer has no truth value: decrypt it first (ctx.decrypt(x)), or "
                          "choose between values with crossfhe.where(cond, a, b)")

    def __index__(self):
        raise self._error(TypeError, "an encrypted integer is not a Python int: decrypt it first (ctx.decrypt(x))")

    def __array__(self, *args, **kwargs):
        raise self._error(TypeError, "an encrypted integer is not a NumPy array (its values are secret): decrypt it "
                          "first (ctx.decrypt(x))")

    # The batch -------------------------------------------------------------------------------------

    def __len__(self) -> int:
        if not self.shape:
            raise self._error(TypeError, "len() of one encrypted integer (batch shape ()): only a batch has a length")
        return self.shape[0]

    def __getitem__(self, index):
        """Items of the batch, as NumPy indexes an array of this shape (ints, slices, integer or boolean arrays, one
        per batch axis at most): no cryptographic work, the blocks' words are selected. A traced value is one item
        of the circuit's batch and takes no index."""
        if self.traced:
            raise self._error(TypeError, "a traced encrypted integer is one item of the circuit's batch; index the "
                              "batch outside the circuit")
        parts = index if isinstance(index, tuple) else (index,)
        if any(p is None or p is Ellipsis or isinstance(p, Value) for p in parts):
            raise self._error(TypeError, f"encrypted integers take ints, slices and public integer or boolean arrays "
                              f"as indexes of their batch axes, got {index!r}")
        parts = tuple(np.asarray(p) if isinstance(p, (list, jnp.ndarray)) else p for p in parts)
        axes = sum(p.ndim if isinstance(p, np.ndarray) and p.dtype == bool else 1 for p in parts)
        if axes > len(self.shape):
            raise IndexError(f"too many indices for an encrypted batch of shape {self.shape}: {index!r}")
        try:
            np.empty(self.shape, dtype=np.int8)[parts]  # NumPy's own checks of the index against the batch
        except IndexError as e:
            raise IndexError(f"{e} (an encrypted batch of shape {self.shape})") from None
        b, a = self.ct.b[parts], self.ct.a[parts]
        out = EncryptedInteger(LWECiphertext(b, a, self.ct.moduli, self.ct.key_id), self.ctx, self.meta)
        return _set_owner(out, self._owner_of((self,)))

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    __hash__ = object.__hash__

    # Primitives ------------------------------------------------------------------------------------

    def _run(self, op: str, others=(), **attrs):
        """The result(s) of primitive ``op`` on this value and ``others``: the rule's metadata first (the same eagerly
        and traced; its refusals in the user's terms), then recorded while tracing or run as one cached program."""
        operands = (self, *others)
        items = tuple(sorted(attrs.items()))
        try:
            metas, _ = il.rule(self.params, op, items, tuple(v.meta for v in operands))
        except ParameterError as e:
            raise self._error(ParameterError, str(e)) from None
        many = len(metas) > 1
        node_attrs = dict(attrs, **({"metas": metas} if many else {"meta": metas[0]}))
        if self.traced:
            out = self._record(op, others, node_attrs, None, meta=metas[0] if not many else ())
            if not many:
                return out
            return tuple(self._replace(node=self.trace.node("pick", (out.node,), {"index": j, "meta": m}), meta=m)
                         for j, m in enumerate(metas))
        public = self.ctx
        words = [({"meta": v.meta}, (v.ct.b, v.ct.a)) for v in operands]
        _, res = eager.run(il.SCHEME, public.params, public.keys, op, node_attrs, words)
        owner = self._owner_of(operands)
        results = res if many else (res,)
        out = tuple(_set_owner(EncryptedInteger(LWECiphertext(b, a, self.ct.moduli, self.ct.key_id), public, m),
                               owner) for (b, a), m in zip(results, metas, strict=True))
        return out if many else out[0]

    def _other(self, other, what: str):
        """(an EncryptedInteger operand, or None, and the constant int, or None) of ``other``; arrays of constants
        (eagerly) become trivial encryptions of this type."""
        if not isinstance(other, EncryptedInteger):
            other = scalar_operand(other)
        if isinstance(other, EncryptedInteger):
            self._pair(other, what)
            if other.meta[0] != self.meta[0]:
                raise self._error(TypeError, f"{what}: operands of types {self.meta[0]} and {other.meta[0]}; convert "
                                  f"one first (y.astype(np.{self.meta[0]})): encrypted integers do not promote")
            return other, None
        if isinstance(other, Value):
            self._same(other, what)
        if isinstance(other, (numbers.Integral, np.integer, bool, np.bool_)):
            try:
                return None, il.constant(self.meta[0], other, what)
            except (TypeError, ParameterError) as e:
                raise self._error(type(e), str(e)) from None
        if isinstance(other, _ARRAYS) and not self.traced:
            return self._trivial(other, what), None
        if isinstance(other, (numbers.Number, *_ARRAYS)):
            raise self._error(TypeError, f"{what}: an encrypted {self.meta[0]} combines with encrypted "
                              f"{self.meta[0]} values and int constants"
                              + (" (inside a circuit: one int per operand)" if self.traced else "")
                              + f", got {type(other).__name__} {other!r}")
        return NotImplemented, None

    def _constant_value(self, c, what: str) -> EncryptedInteger:
        """A constant operand as a value of this type: an int lifted (:meth:`_lift`), an array of them a trivial
        encryption."""
        y, k = self._other(c, what)
        if y is NotImplemented:
            raise TypeError(f"{what}: takes encrypted integers or int constants, got {type(c).__name__}")
        return y if y is not None else self._lift(k)

    def _trivial(self, values, what: str) -> EncryptedInteger:
        """Public integers of this type (an array of the batch, or broadcasting to it) as a keyless, noiseless
        encryption (:func:`crossfhe.tfhe.integer.trivial`): what an array constant becomes."""
        v = il.check_values(self.meta[0], values, what)
        params = self.ctx.params
        if self.meta[0] == "bool":
            raise self._error(TypeError, f"{what}: combine encrypted bools with encrypted bools or True/False")
        r = ri.trivial(params, v, bits=self.bits, msg_bits=self.msg_bits)
        b, a = il.to_batch_first(r.blocks.b, r.blocks.a)
        return EncryptedInteger(LWECiphertext(b, a, self.ct.moduli, self.ct.key_id), self.ctx,
                                (self.meta[0], r.msg_bits, r.degrees, r.norms))

    def _binary(self, op: str, other, what: str, *, reflected: bool = False, **attrs):
        y, c = self._other(other, what)
        if y is NotImplemented:
            return NotImplemented
        if y is not None:
            return (y._run(op, (self,), **attrs) if reflected else self._run(op, (y,), **attrs))
        return self._run(op, c=c, **({"c_first": True} if reflected else {}), **attrs)

    def _numeric(self, what: str) -> None:
        if self.meta[0] == "bool":
            raise self._error(TypeError, f"{what}: arithmetic on encrypted bools; use & | ^ ~, or convert with "
                              "astype(np.uint8)")

    # Arithmetic ------------------------------------------------------------------------------------

    def __add__(self, other):
        self._numeric("x + y")
        return self._binary("add", other, "x + y")

    __radd__ = __add__

    def __sub__(self, other):
        self._numeric("x - y")
        return self._binary("sub", other, "x - y")

    def __rsub__(self, other):
        self._numeric("c - x")
        return self._binary("sub", other, "c - x", reflected=True)

    def __mul__(self, other):
        self._numeric("x * y")
        return self._binary("mul", other, "x * y")

    __rmul__ = __mul__

    def __neg__(self):
        self._numeric("-x")
        return self._run("neg")

    def __pos__(self):
        return self

    def __abs__(self):
        self._numeric("abs(x)")
        return self._run("abs") if il.is_signed(self.meta[0]) else self

    def __pow__(self, k):
        """x ** k for an int constant k >= 0, wrapping mod 2^bits as NumPy's integer power does: repeated squaring,
        floor(log2 k) squarings and one product more per further set bit of k (each a product of blocks); x ** 0 is
        1 for every item."""
        self._numeric("x ** k")
        if not isinstance(k, Value):
            k = scalar_operand(k)
        if not is_int(k):
            raise self._error(TypeError, f"x ** k: the exponent is an int constant >= 0, got {type(k).__name__} "
                              f"{k!r}" + ("; an encrypted exponent is not an operator here (1 << k shifts by an "
                                          "encrypted amount)" if isinstance(k, Value) else ""))
        if k < 0:
            raise self._error(ValueError, f"x ** k: integers to negative integer powers are not allowed (NumPy's "
                              f"rule), got k = {k}")
        return (self - self) + 1 if k == 0 else power(self, int(k))

    def __rpow__(self, c):
        raise self._error(TypeError, f"c ** x with an encrypted exponent is not defined on encrypted integers (1 << x "
                          f"shifts by one); what exists: {SUPPORTED}")

    def __truediv__(self, other):
        raise self._error(TypeError, f"x / y is true division, which gives floats; encrypted integers divide with // "
                          f"and % (flooring, as NumPy's); what exists: {SUPPORTED}")

    __rtruediv__ = __truediv__

    def __matmul__(self, other):
        raise self._error(TypeError, f"@ is not defined on encrypted integers (a batch is not a vector to contract); "
                          f"multiply and add explicitly; what exists: {SUPPORTED}")

    __rmatmul__ = __matmul__

    def divmod(self, other):
        """(x // y, x % y) in one division (module docstring: floor semantics, division by zero)."""
        self._numeric("divmod(x, y)")
        y, c = self._other(other, "divmod(x, y)")
        if y is NotImplemented:
            return NotImplemented
        if y is None and c == 0:
            raise self._error(ZeroDivisionError, "divmod: division by the constant 0")
        return self._run("divmod", (y,)) if y is not None else self._run("divmod", c=c)

    def __divmod__(self, other):
        return self.divmod(other)

    def __rdivmod__(self, other):
        y, c = self._other(other, "divmod(c, x)")
        if y is NotImplemented:
            return NotImplemented
        return self._lift(c).divmod(self) if y is None else y.divmod(self)

    def __floordiv__(self, other):
        out = self.divmod(other)
        return out if out is NotImplemented else out[0]

    def __mod__(self, other):
        out = self.divmod(other)
        return out if out is NotImplemented else out[1]

    def __rfloordiv__(self, other):
        out = self.__rdivmod__(other)
        return out if out is NotImplemented else out[0]

    def __rmod__(self, other):
        out = self.__rdivmod__(other)
        return out if out is NotImplemented else out[1]

    def _lift(self, c: int) -> EncryptedInteger:
        """A constant as an operand of this type (eagerly: a trivial encryption; traced: ``x * 0 + c``)."""
        if self.traced:
            return self._run("mul", c=0)._run("add", c=c)
        return self._trivial(np.asarray(c if not il.is_signed(self.meta[0]) or c < 1 << (self.bits - 1)
                                           else c - (1 << self.bits)), "constant")

    def overflowing_add(self, other):
        """(x + y mod 2^bits, an encrypted bool: the exact sum left the type's range)."""
        self._numeric("overflowing_add")
        return self._binary("overflowing_add", other, "overflowing_add")

    def overflowing_sub(self, other):
        """(x - y mod 2^bits, an encrypted bool: the exact difference left the type's range)."""
        self._numeric("overflowing_sub")
        return self._binary("overflowing_sub", other, "overflowing_sub")

    def overflowing_mul(self, other):
        """(x y mod 2^bits, an encrypted bool: the exact product left the type's range)."""
        self._numeric("overflowing_mul")
        return self._binary("overflowing_mul", other, "overflowing_mul")

    # Bitwise, shifts -------------------------------------------------------------------------------

    def __and__(self, other):
        return self._binary("and", other, "x & y")

    def __or__(self, other):
        return self._binary("or", other, "x | y")

    def __xor__(self, other):
        return self._binary("xor", other, "x ^ y")

    __rand__, __ror__, __rxor__ = __and__, __or__, __xor__

    def __invert__(self):
        return self._run("not")

    def _shift(self, op: str, k, what: str):
        self._numeric(what)
        if not isinstance(k, EncryptedInteger):
            k = scalar_operand(k)
        if isinstance(k, EncryptedInteger):
            self._pair(k, what)
            if k.meta[0] == "bool" or il.is_signed(k.meta[0]):
                raise self._error(TypeError, f"{what}: the amount is an unsigned encrypted integer, got {k.meta[0]}")
            return self._run(f"{op}_by", (k,))
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (numbers.Integral, np.integer)) or k < 0:
            raise self._error(TypeError if not isinstance(k, (numbers.Integral, np.integer)) else ParameterError,
                              f"{what}: the amount is a non-negative int or an unsigned encrypted integer, got {k!r}")
        k = int(k)
        if op in ("rotl", "rotr"):
            k %= self.bits
        elif k >= self.bits:
            k = self.bits
        if k == 0:
            return self
        return self._run(op, k=k)

    def __lshift__(self, k):
        return self._shift("shl", k, "x << k")

    def __rshift__(self, k):
        return self._shift("shr", k, "x >> k")

    def rotl(self, k):
        """x rotated left by k bits (k an int, or an unsigned encrypted integer taken mod bits)."""
        return self._shift("rotl", k, "rotl")

    def rotr(self, k):
        """x rotated right by k bits, as :meth:`rotl`."""
        return self._shift("rotr", k, "rotr")

    # Comparisons, selects ----------------------------------------------------------------------------

    def _equality(self, op: str, other, what: str):
        """``==`` / ``!=``: an encrypted bool; an operand of no numeric kind is refused (Python's fallback would
        compare identities and answer False or True)."""
        out = self._binary(op, other, what)
        if out is NotImplemented:
            raise self._error(TypeError, f"{what}: an encrypted {self.meta[0]} is compared with encrypted "
                              f"{self.meta[0]} values and int constants, got {type(other).__name__}")
        return out

    def __eq__(self, other):
        return self._equality("eq", other, "x == y")

    def __ne__(self, other):
        return self._equality("ne", other, "x != y")

    def __lt__(self, other):
        return self._binary("lt", other, "x < y")

    def __le__(self, other):
        return self._binary("le", other, "x <= y")

    def __gt__(self, other):
        return self._binary("gt", other, "x > y")

    def __ge__(self, other):
        return self._binary("ge", other, "x >= y")

    def minimum(self, other):
        """The smaller of x and y (signed types in two's complement): a comparison and a select."""
        self._numeric("minimum")
        return self._binary("min", other, "minimum(x, y)")

    def maximum(self, other):
        """The larger of x and y, as :meth:`minimum`."""
        self._numeric("maximum")
        return self._binary("max", other, "maximum(x, y)")

    def if_then_else(self, a, b):
        """``a`` where this encrypted bool is true, else ``b`` (TFHE-rs's name; :func:`where`)."""
        return where(self, a, b)

    def astype(self, dtype) -> EncryptedInteger:
        """This value as another type: wider, zero-extended (unsigned or bool source) or sign-extended (signed);
        narrower, wrapped mod 2^bits; to ``bool``, x != 0. The same block width (``msg_bits``)."""
        name = integer_dtype(dtype, "astype")
        if name == self.meta[0]:
            return self
        return self._run("cast", dtype=name)

    # NumPy -----------------------------------------------------------------------------------------

    _UFUNCS = {"add": "__add__", "subtract": "__sub__", "multiply": "__mul__", "floor_divide": "__floordiv__",
               "remainder": "__mod__", "bitwise_and": "__and__", "bitwise_or": "__or__", "bitwise_xor": "__xor__",
               "left_shift": "__lshift__", "right_shift": "__rshift__", "equal": "__eq__", "not_equal": "__ne__",
               "less": "__lt__", "less_equal": "__le__", "greater": "__gt__", "greater_equal": "__ge__",
               "minimum": "minimum", "maximum": "maximum", "divmod": "divmod", "power": "__pow__",
               "true_divide": "__truediv__", "matmul": "__matmul__"}
    _REFLECTED = {"add": "__radd__", "subtract": "__rsub__", "multiply": "__rmul__", "floor_divide": "__rfloordiv__",
                  "remainder": "__rmod__", "bitwise_and": "__rand__", "bitwise_or": "__ror__",
                  "bitwise_xor": "__rxor__", "equal": "__eq__", "not_equal": "__ne__", "less": "__gt__",
                  "less_equal": "__ge__", "greater": "__lt__", "greater_equal": "__le__", "minimum": "minimum",
                  "maximum": "maximum", "divmod": "__rdivmod__", "power": "__rpow__", "true_divide": "__rtruediv__",
                  "matmul": "__rmatmul__"}
    _UNARY = {"negative": "__neg__", "invert": "__invert__", "bitwise_not": "__invert__", "absolute": "__abs__",
              "positive": "__pos__"}

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """NumPy's ufuncs on encrypted integers (``np.maximum(x, y)``, ``np.add(3, x)``, ...): the operators; any
        other ufunc, method or keyword raises TypeError naming what exists."""
        if method == "__call__" and not kwargs:
            if len(inputs) == 1 and ufunc.__name__ in self._UNARY:
                return getattr(inputs[0], self._UNARY[ufunc.__name__])()
            if len(inputs) == 2:
                a, b = inputs
                if isinstance(a, EncryptedInteger) and ufunc.__name__ in self._UFUNCS:
                    return getattr(a, self._UFUNCS[ufunc.__name__])(b)
                if isinstance(b, EncryptedInteger) and ufunc.__name__ in self._REFLECTED:
                    return getattr(b, self._REFLECTED[ufunc.__name__])(a)
        extra = f" with {sorted(kwargs)}" if kwargs else ""
        raise self._error(TypeError, f"numpy.{ufunc.__name__} ({method}{extra}) is not defined on encrypted integers; "
                          f"what exists: {SUPPORTED}")

    def __array_function__(self, func, types, args, kwargs):
        """``np.where(cond, a, b)`` on encrypted values (:func:`where`); any other NumPy function raises TypeError
        naming what exists."""
        if func is np.where and len(args) == 3 and not kwargs:
            return where(*args)
        raise self._error(TypeError, f"numpy.{func.__name__} is not defined on encrypted integers; what exists: "
                          f"{SUPPORTED}")

    # Serialization ---------------------------------------------------------------------------------

    def serialize(self) -> bytes:
        """The value's blob (kind ``tfhe.radix``: its blocks as :func:`crossfhe.io.tfhe.dumps` stores a ciphertext, with
        the key id, and the type and bookkeeping); no key material. Read it back with :meth:`load`."""
        if self.traced:
            raise self._error(TypeError, "a traced value has no words to serialize; serialize the circuit's outputs")
        c = fmt.unpack(tio.dumps(self.ct, params=self.ctx.params))
        dtype, m, degrees, norms = self.meta
        radix = {"dtype": dtype, "msg_bits": m, "degrees": list(degrees), "norms": list(norms)}
        return fmt.pack(KIND_RADIX, {**c.fields, "radix": radix}, c.arrays)

    @classmethod
    def load(cls, ctx, blob) -> EncryptedInteger:
        """The value of a :meth:`serialize` blob attached to ``ctx`` (the TFHEContext or TFHEPublicContext of its keys;
        KeyMismatchError otherwise); its bookkeeping is checked against the parameters (every block within 2^p - 1
        and the noise budget, the type's block count), every check of :func:`crossfhe.io.tfhe.loads`."""
        public = ctx.public if isinstance(ctx, TFHEContext) else ctx
        if not isinstance(public, TFHEPublicContext):
            raise TypeError(f"load takes a TFHEContext or TFHEPublicContext, got {type(ctx).__name__}")
        c = fmt.unpack(blob, expected_kind=KIND_RADIX)
        fields = dict(c.fields)
        radix = fields.pop("radix", None)
        params = public.params
        meta = _meta_of(radix, params)
        ct = tio.loads(fmt.pack(tio.KIND_CIPHERTEXT, fields, c.arrays), params=params, expected=LWECiphertext)
        if tuple(ct.b.shape[-2:-1]) != (il.blocks_of(meta),):
            raise SerializationError(f"a {KIND_RADIX} blob holds {ct.b.shape[-2] if ct.b.ndim > 1 else 0} blocks, its "
                                     f"header {il.blocks_of(meta)}")
        _same_keys("EncryptedInteger.load", public.key_id, ct.key_id)
        return _set_owner(cls(ct, public, meta), ctx if isinstance(ctx, TFHEContext) else None)


def _meta_of(radix, params: Params) -> tuple:
    """The metadata of a blob's ``radix`` header, checked (SerializationError)."""
    ok = isinstance(radix, dict) and set(radix) == {"dtype", "msg_bits", "degrees", "norms"}
    try:
        if not ok:
            raise ValueError("its fields")
        dtype = integer_dtype(radix["dtype"])
        fresh = il.fresh(dtype, params, radix["msg_bits"])
        degrees, norms = radix["degrees"], radix["norms"]
        if not (isinstance(degrees, list) and isinstance(norms, list) and len(degrees) == len(norms)
                == len(fresh[2]) and all(fmt.is_json_int(v) for v in degrees + norms)
                and all(0 <= d < 1 << params.message_bits for d in degrees)
                and all(0 <= n <= params.norm2 for n in norms)):
            raise ValueError("degrees and norms out of the parameters' bounds")
    except (ValueError, ParameterError) as e:
        raise SerializationError(f"a {KIND_RADIX} blob's header must hold radix: {{dtype, msg_bits, degrees, norms}} "
                                 f"within the parameters' bounds ({e}); got {radix!r}") from None
    return (dtype, fresh[1], tuple(degrees), tuple(norms))


def where(cond, a, b):
    """``a`` where the encrypted bool ``cond`` holds, else ``b`` (elementwise over batches, NumPy's broadcasting): one
    select, 2B bootstraps in one call. ``a`` and ``b``: encrypted integers of one type, or one of them an int."""
    if not isinstance(cond, EncryptedInteger) or cond.meta[0] != "bool":
        raise TypeError(f"where: the condition is an encrypted bool (a comparison's result), got {cond!r}")
    like = a if isinstance(a, EncryptedInteger) else b
    if not isinstance(like, EncryptedInteger):
        raise TypeError("where: at least one of a and b is an encrypted integer")
    a, b = (v if isinstance(v, EncryptedInteger) else like._constant_value(v, "where") for v in (a, b))
    if a.meta[0] != b.meta[0]:
        raise a._error(TypeError, f"where: a and b of types {a.meta[0]} and {b.meta[0]}; convert one first "
                       f"(b.astype(np.{a.meta[0]}))")
    for v in (a, b):
        cond._pair(v, "where")
    return cond._run("select", (a, b))


def minimum(x, y):
    """NumPy's ``minimum`` on encrypted integers (:meth:`EncryptedInteger.minimum`)."""
    return x.minimum(y) if isinstance(x, EncryptedInteger) else y.minimum(x)


def maximum(x, y):
    """NumPy's ``maximum`` on encrypted integers (:meth:`EncryptedInteger.maximum`)."""
    return x.maximum(y) if isinstance(x, EncryptedInteger) else y.maximum(x)


def encrypt(ctx: TFHEContext, values, dtype, msg_bits: int | None = None) -> EncryptedInteger:
    """``ctx.encrypt(values, dtype=...)``: integers (or bools) of type ``dtype`` checked against its range, encrypted
    block by block under the context's client key."""
    name = integer_dtype(dtype, "encrypt")
    params = ctx.public.params
    meta = il.fresh(name, params, msg_bits)
    v = il.check_values(name, values, "encrypt")
    b, a = il.encrypt_words(ctx.secret_key, name, meta[1], v)
    ct = LWECiphertext(jnp.asarray(b), jnp.asarray(a), params.moduli, ctx.secret_key.key_id)
    return _set_owner(EncryptedInteger(ct, ctx.public, meta), ctx)


def decrypt(ctx: TFHEContext, x: EncryptedInteger):
    """``ctx.decrypt(x)``: a NumPy scalar of x's type, or an array of the batch shape."""
    out = il.decrypt_words(ctx.secret_key, x.meta, x.ct.b, x.ct.a, x.ct.key_id)
    return out[()] if out.ndim == 0 else out


register_value(EncryptedInteger)
il.SCHEME.value_class = EncryptedInteger
INTEGER_TYPES.update(encrypt=encrypt, decrypt=decrypt)

register_type(EncryptedInteger, KIND_RADIX, lambda x, params: x.serialize(), params_of=lambda x: x.ctx.params)
register_kind(KIND_RADIX, lambda blob, params, context: EncryptedInteger.load(context, blob), params=Params,
              context="an encrypted integer: load it with crossfhe.EncryptedInteger.load(ctx, blob) or "
                      "crossfhe.io.loads(blob, context=ctx), ctx the TFHEContext or TFHEPublicContext it belongs to")

__all__ = ["KIND_RADIX", "EncryptedInteger", "decrypt", "encrypt", "maximum", "minimum", "where"]
