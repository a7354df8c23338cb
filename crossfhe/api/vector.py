"""What CKKS and BFV vectors share: NumPy's semantics for a vector of ``length`` values held in slots.

Layout. ``length`` values are zero-padded to the power of two ``width`` >= length and repeated over the slots, so
slot i holds value i mod width. Operands of one length combine slot-wise; a length-1 operand (or a scalar)
broadcasts, as in NumPy. ``clean`` says whether the padding slots (``length`` to ``width``) hold zeros, as NumPy's
padded vector would: a scalar added, a raw rotation or a broadcast single value fills them, and the operations that
read them (:meth:`SlotVector.sum`, :meth:`SlotVector.rotate`) clear them first where they must (a plaintext product
by a 0/1 mask: a level in CKKS, noise in BFV).

NumPy's habits (each with its cost, the scheme's primitives underneath):

======================  ===============================================================================================
``x.rotate(k)``         ``np.roll(values, -k)`` for any length and any integer k. A power-of-two length: one rotation
``np.roll(x, s)``       (a key switch). Another length: two rotations and two 0/1 mask products (a level in CKKS).
``x.sum()``, ``np.sum`` the sum, a length-1 vector: log2(width) rotations (a mask product first if the padding is not
                        clean). ``x.mean()``, ``np.mean``: the sum times 1 / length (CKKS).
``x @ y``, ``np.dot``   the inner product, a length-1 vector: a product and a sum.
``x ** k``              repeated squaring, ceil(log2 k) products in depth (k a positive int).
``x / c``               a product by the public 1 / c (CKKS; BFV: the modular inverse when asked for explicitly).
``x[i]``                value i as a length-1 vector: one 0/1 mask product and log2(width) rotations (the sum over
                        the width adds every slot's noise: CKKS keeps about log2(width) / 2 bits less).
``x[a:b]``              values a .. b-1 (step 1): one rotation, one mask product, log2(width / new width) rotations.
``np.where(m, x, y)``   m a public 0/1 (or boolean) array: m x + (1 - m) y, two mask products.
``len(x)``              the length; ``x.shape`` (batch axes, then the length), ``x.ndim``, ``x.size``, ``x.dtype``:
                        those of the decrypted values.
======================  ===============================================================================================

Anything else NumPy might dispatch here raises TypeError naming what exists instead, and so do the operators with no
encrypted counterpart (``==`` and ``!=``, whose Python default would compare the objects and answer False or True,
``abs``, ``//``, ``%``, the bitwise ones) and the conversions ``np.asarray(x)``, ``float(x)``, ``int(x)``,
``round(x)`` (decrypt first).
"""

from __future__ import annotations

import math
import numbers
import operator

import jax
import numpy as np

from crossfhe.api._owner import same_keys, set_owner
from crossfhe.api.trace import Value, width_of

ARRAYS = (np.ndarray, jax.Array, list, tuple)

_INDEXABLE_TYPES = (int, np.integer)


def is_int(c) -> bool:
    return isinstance(c, (int, np.integer)) and not isinstance(c, (bool, np.bool_))


def scalar_operand(other):
    """A 0-d array operand as the Python number it holds (it then acts as a scalar); others unchanged."""
    if isinstance(other, Value):
        return other
    if isinstance(other, np.generic) or (hasattr(other, "shape") and hasattr(other, "dtype") and np.ndim(other) == 0):
        return np.asarray(other).item()
    return other


def power(x, k: int):
    """x ** k for an int k >= 1 by repeated squaring: floor(log2 k) squarings and one product more per further set
    bit of k (multiplicative depth ceil(log2 k)), with the value's own ``*``."""
    result, base = None, x
    while k:
        if k & 1:
            result = base if result is None else result * base
        k >>= 1
        if k:
            base = base * base
    return result


def padding_clean(op: str, length: int, width: int, a: tuple[int, bool], b: tuple[int, bool] | None = None) -> bool:
    """Whether the padding slots (``length`` to ``width``) of the result of ``op`` hold zeros, from its operands'
    (length, clean): the NumPy view of a zero-padded vector holds only where they do. A broadcast single value and a
    raw rotation fill the padding; a product with a zero-padded plaintext or a clean operand clears it."""
    if length == width:
        return True

    def as_result(x):
        return x[1] if x[0] == length else False  # a single value broadcast over every slot

    if op in ("add", "sub"):
        return as_result(a) and as_result(b)
    if op == "mul":
        return as_result(a) or as_result(b)
    if op == "mul_plain":
        return True
    if op in ("rotate", "sum"):
        return False
    return as_result(a)


_UFUNCS = {np.add: "__add__", np.subtract: "__sub__", np.multiply: "__mul__", np.true_divide: "__truediv__",
           np.negative: "__neg__", np.positive: "__pos__", np.power: "__pow__", np.matmul: "__matmul__",
           np.greater: "__gt__", np.greater_equal: "__ge__", np.less: "__lt__", np.less_equal: "__le__"}
_REFLECTED = {"__add__": "__radd__", "__sub__": "__rsub__", "__mul__": "__rmul__", "__truediv__": "__rtruediv__",
              "__matmul__": "__rmatmul__", "__gt__": "__lt__", "__ge__": "__le__", "__lt__": "__gt__",
              "__le__": "__ge__"}
SUPPORTED = ("+ - * / ** @ (and np.add, np.subtract, np.multiply, np.divide, np.power, np.matmul), np.sum, np.mean, "
             "np.dot, np.matmul, np.roll, np.where with a public mask, indexing x[i] and slices x[a:b], len")


class SlotVector(Value):
    """The shared part of :class:`crossfhe.api.ckks.EncryptedVector` and :class:`crossfhe.api.bfv.EncryptedIntVector`
    (module docstring): the arithmetic operators and NumPy's habits over the scheme's hooks, ``_apply`` (a primitive
    on this value and others), ``_operand`` (a scalar operand checked and normalized), ``_add_scalar`` and
    ``_mul_scalar``, ``_plain`` (a public array operand as a graph constant), ``_raw_rotate`` (a rotation of the
    width-periodic slots) and ``_fold_sum`` (the sum of the width slots in every slot)."""

    length: int = 1
    width: int = 1
    clean: bool = True
    _MASK_DTYPE = np.float64

    __hash__ = object.__hash__

    def _reshaped(self, length: int, width: int):
        """The same words read as a vector of ``length`` values with period ``width`` (the caller has made the slots
        hold that), padding clean."""
        return self._replace(length=length, width=width, clean=True)

    def _binary(self, op: str, other, what: str):
        """``op`` (add, sub, mul) of two vectors of one scheme and key pair, lengths broadcast as NumPy's."""
        self._same(other, what)
        if not self.traced:
            same_keys(what, self.ct.key_id, other.ct.key_id)
        length, width = self._shape_with(other.length, what)
        return self._apply(op, [other], length=length, width=width, clean=padding_clean(
            op, length, width, (self.length, self.clean), (other.length, other.clean)))

    def _plain_op(self, op: str, other, what: str):
        """``op`` (add_plain, mul_plain) with a public array operand, zero-padded like this vector."""
        key, consts, length, width, cx = self._plain(other, what)
        clean = True if op == "mul_plain" else padding_clean("add", length, width, (self.length, self.clean),
                                                              (length, True))
        return self._apply(op, [], {"const": key}, length=length, width=width, is_complex=cx, consts=consts,
                           clean=clean)

    # Arithmetic ------------------------------------------------------------------------------------

    def __add__(self, other):
        if type(other) is type(self):  # the common case first: no operand conversion to try
            return self._binary("add", other, "+")
        other = self._operand(other, "+")
        if isinstance(other, SlotVector):
            return self._binary("add", other, "+")
        if isinstance(other, numbers.Number):
            return self if other == 0 else self._add_scalar(other)
        if isinstance(other, ARRAYS):
            return self._plain_op("add_plain", other, "+")
        return NotImplemented

    __radd__ = __add__

    def __neg__(self):
        return self._apply("neg")

    def __sub__(self, other):
        if type(other) is type(self):
            return self._binary("sub", other, "-")
        other = self._operand(other, "-")
        if isinstance(other, SlotVector):
            return self._binary("sub", other, "-")
        if isinstance(other, numbers.Number):
            return self + (-other)
        if isinstance(other, ARRAYS):
            return self + (-np.asarray(other))
        return NotImplemented

    def __rsub__(self, other):
        other = self._operand(other, "-")
        if isinstance(other, (numbers.Number, *ARRAYS)):
            return (-self) + other
        return NotImplemented

    def __mul__(self, other):
        if type(other) is type(self):
            return self._binary("mul", other, "*")
        other = self._operand(other, "*")
        if isinstance(other, SlotVector):
            return self._binary("mul", other, "*")
        if is_int(other):
            return self if other == 1 else self._apply("mul_int", [], {"c": int(other)})
        if isinstance(other, numbers.Number):
            return self._mul_scalar(other)
        if isinstance(other, ARRAYS):
            return self._plain_op("mul_plain", other, "*")
        return NotImplemented

    __rmul__ = __mul__

    def __len__(self) -> int:
        return self.length

    @property
    def shape(self) -> tuple[int, ...]:
        """NumPy's shape of the decrypted values: the batch axes, then the length (a traced value is one item of the
        circuit's batch: ``(length,)``)."""
        if self.traced:
            return (self.length,)
        return tuple(self.ct.c0.data.shape[:-2]) + (self.length,)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def dtype(self) -> np.dtype:
        """The NumPy type of the decrypted values."""
        return np.dtype(self._MASK_DTYPE)

    def __bool__(self):
        raise self._error(TypeError, "an encrypted vector has no truth value (it would depend on secret data): "
                          "decrypt it first, or compute both sides and select with np.where and a public mask")

    def __iter__(self):
        raise self._error(TypeError, f"an encrypted vector is not iterable; take values with x[i] (a mask product "
                          f"and log2(width) rotations each) or decrypt it ({self.length} values)")

    def _shape_with(self, length: int, what: str) -> tuple[int, int]:
        """(length, width) of the result with an operand of ``length`` values: equal lengths, or one of them 1."""
        if length == self.length or length == 1:
            return self.length, self.width
        if self.length == 1:
            return length, width_of(length)
        raise self._error(ValueError, f"{what}: operands of lengths {self.length} and {length} cannot be combined "
                          "(NumPy would not broadcast them either); use vectors of one length, or a single value")

    def _masked(self):
        """This value with its padding slots zeroed (a product with a 0/1 plaintext; for CKKS it costs a level)."""
        if self.clean or self.length == self.width:
            return self
        return self * np.ones(self.length, dtype=self._MASK_DTYPE)

    def _apply(self, op: str, others=(), attrs: dict | None = None, *, length: int | None = None,
               width: int | None = None, clean: bool | None = None, is_complex: bool = False, consts=None):
        """The value of primitive ``op`` on this value and ``others`` (the scheme's lowering): recorded while
        tracing, else run as a one-operation circuit (:meth:`_run`, :mod:`crossfhe.api.eager`). ``length``,
        ``width``, ``clean``: the result's (default: this value's, padding as :func:`padding_clean` says)."""
        attrs = attrs or {}
        length = self.length if length is None else length
        width = self.width if width is None else width
        clean = padding_clean("same", length, width, (self.length, self.clean)) if clean is None else clean
        fields = self._fields(op, attrs, others, is_complex=is_complex, consts=consts)
        fields.update(length=length, width=width, clean=clean)
        if self.trace is not None:
            return self._record(op, others, attrs, consts, **fields)
        fields["ct"] = self._run(op, attrs, others, consts)
        out = self._replace(**fields)  # keeps this value's key owner
        return out if "_owner" in out.__dict__ else set_owner(out, self._owner_of(others))

    def _fields(self, op: str, attrs: dict, others, *, is_complex: bool, consts) -> dict:
        """The scheme's own fields of the result of ``op`` (CKKS: whether it is complex, its bound)."""
        return {}

    def _scalar_fills_padding(self) -> bool:
        """Whether adding a scalar to every slot would put it into zero padding (then it is added as a plaintext
        zero-padded like the vector)."""
        return self.length < self.width and self.clean

    # Rotations and reductions ----------------------------------------------------------------------

    def rotate(self, k: int):
        """``np.roll(values, -k)``: value j of the result is value (j + k) mod length, any integer k. A length that
        is a power of two: one rotation of the slots (a key switch). Another length: two rotations, by k mod length
        and by that minus the length, combined by two 0/1 mask products (one level in CKKS); the padding is clean
        after. A rotation whose key the context lacks is composed from the power-of-two keys (one key switch per set
        bit; the second rotation is made from the first where that takes fewer): for length n, holding keys for k
        and k - n makes the whole roll two key switches."""
        try:
            k = operator.index(k)
        except TypeError:
            raise self._error(TypeError, f"rotate takes an integer offset, got {type(k).__name__}") from None
        r = k % self.length
        if r == 0:
            return self
        if self.length == self.width:
            return self._raw_rotate(r)
        lo = np.zeros(self.length, dtype=self._MASK_DTYPE)
        lo[: self.length - r] = 1
        head = self._raw_rotate(r)
        # the tail is x rotated by r - length, or the head rotated on by width - length: whichever takes fewer
        # key switches with the context's keys
        back, direct = self.width - self.length, (r - self.length) % self.width
        if self._key_switches(back) < self._key_switches(direct):
            tail = head._raw_rotate(back)
        else:
            tail = self._raw_rotate(direct)
        return head * lo + tail * (1 - lo)

    def _key_switches(self, r: int) -> int:
        """How many key switches :meth:`_raw_rotate` takes for ``r`` with this value's keys (0: not counted)."""
        return 0

    def _has_rotation_key(self, offset: int) -> bool:
        """Whether the context holds the key that rotates the slots by ``offset`` (the scheme's Galois element)."""
        raise NotImplementedError

    def _switches_for(self, r: int, offsets) -> int:
        """Key switches of :meth:`_rotated_with_keys` (r, offsets): one with a key of ``offsets``, else one per set
        bit of r (traced values: one)."""
        if self.trace is not None or any(self._has_rotation_key(o) for o in offsets):
            return 1
        return bin(r).count("1")

    def _rotated_with_keys(self, r: int, offsets, what: str, create: str):
        """The slots rotated by r > 0: one key switch with the key of the first of ``offsets`` (the offsets that
        rotate these slots as r does) the context holds, else one per set bit of r with the power-of-two keys. A
        traced value records one rotation by ``offsets[0]``, whose key the circuit's keys get. ValueError (in
        ``what``'s terms, suggesting ``create``) where neither exists."""
        if self.trace is not None:
            return self._apply("rotate", [], {"k": offsets[0]}, clean=False)
        offset = next((o for o in offsets if self._has_rotation_key(o)), None)
        if offset is not None:
            return self._apply("rotate", [], {"k": offset}, clean=False)
        steps = [1 << i for i in range(r.bit_length()) if r >> i & 1]
        missing = [s for s in steps if not self._has_rotation_key(s)]
        if missing:
            held = " or ".join(map(str, offsets))
            raise self._error(ValueError, f"{what}: the context holds no rotation key for {held} nor the power-of-two "
                              f"keys {missing} to compose it; create the context with {create}")
        x = self
        for s in steps:
            x = x._apply("rotate", [], {"k": s}, clean=False)
        return x

    def roll(self, shift: int):
        """``np.roll(values, shift)``: :meth:`rotate` by -shift."""
        try:
            shift = operator.index(shift)
        except TypeError:
            raise self._error(TypeError, f"roll takes an integer shift, got {type(shift).__name__}") from None
        return self.rotate(-shift)

    def sum(self):
        """The sum of the values, a length-1 vector (every slot holds it): log2(width) rotations by powers of two
        and additions, the padding cleared first where it is not clean."""
        return self._fold_sum(self._masked())

    def mean(self):
        """The mean of the values, a length-1 vector: :meth:`sum` times 1 / length."""
        return self.sum() * (1.0 / self.length)

    def __matmul__(self, other):
        """The inner product, a length-1 vector (equal lengths): ``(self * other).sum()``."""
        if isinstance(other, Value) and not isinstance(other, type(self)):
            self._same(other, "@")
        if not isinstance(other, (type(self), np.ndarray, list, tuple)) and not hasattr(other, "__array__"):
            return NotImplemented
        length = other.length if isinstance(other, type(self)) else np.shape(other)[-1]
        if length != self.length:
            raise self._error(ValueError, f"@: operands of lengths {self.length} and {length}: an inner product needs "
                              "equal lengths")
        return (self * other).sum()

    __rmatmul__ = __matmul__

    def dot(self, other):
        """``self @ other``."""
        return self @ other

    def __pow__(self, k):
        """x ** k for an integer k >= 1, by repeated squaring (multiplicative depth ceil(log2 k))."""
        if not is_int(k) or k < 1:
            raise self._error(TypeError, f"**: the exponent must be an integer >= 1, got {k!r}")
        return power(self, int(k))

    def __pos__(self):
        return self

    # What NumPy has and encrypted vectors do not --------------------------------------------------------

    _EQUALITY = "equality of encrypted values is not a polynomial operation; decrypt first"
    """Why ``==`` and ``!=`` are refused, in the scheme's terms (Python's default would compare identities and
    answer False or True for any values: a silently wrong result)."""
    _INTEGER_OPS = "decrypt first"
    """What to use instead of ``//``, ``%``, ``abs`` and the bitwise operators, in the scheme's terms."""

    def _refuse(self, what: str, instead: str):
        raise self._error(TypeError, f"{what} is not defined on encrypted vectors: {instead}; what exists: "
                          f"{SUPPORTED}")

    def __eq__(self, other):
        self._refuse("==", self._EQUALITY)

    def __ne__(self, other):
        self._refuse("!=", self._EQUALITY)

    def __abs__(self):
        self._refuse("abs(x)", self._INTEGER_OPS)

    def _integer_op(what):  # noqa: N805 - makes the refusing methods below
        def refuse(self, *args):
            self._refuse(what, self._INTEGER_OPS)
        return refuse

    __floordiv__ = __rfloordiv__ = _integer_op("//")
    __mod__ = __rmod__ = _integer_op("%")
    __divmod__ = __rdivmod__ = _integer_op("divmod")
    __and__ = __rand__ = _integer_op("&")
    __or__ = __ror__ = _integer_op("|")
    __xor__ = __rxor__ = _integer_op("^")
    __invert__ = _integer_op("~")
    __lshift__ = __rlshift__ = _integer_op("<<")
    __rshift__ = __rrshift__ = _integer_op(">>")
    del _integer_op

    def _not_a_number(self, *args):
        raise self._error(TypeError, "an encrypted vector is not a number nor a NumPy array (its values are "
                          "secret): decrypt it first (ctx.decrypt(x))")

    __array__ = __float__ = __int__ = __complex__ = __round__ = _not_a_number

    # Indexing --------------------------------------------------------------------------------------

    def __getitem__(self, index):
        """``x[i]`` (value i as a length-1 vector) or ``x[a:b]`` (values a .. b-1): module docstring for the cost."""
        if isinstance(index, _INDEXABLE_TYPES) and not isinstance(index, (bool, np.bool_)):
            i = int(index)
            if not -self.length <= i < self.length:
                raise IndexError(f"index {i} is out of range for an encrypted vector of length {self.length}")
            i %= self.length
            mask = np.zeros(self.length, dtype=self._MASK_DTYPE)
            mask[i] = 1
            picked = self * mask
            return picked._fold_sum(picked, length=1)
        if isinstance(index, slice):
            start, stop, step = index.indices(self.length)
            if step != 1:
                raise self._error(TypeError, f"slices of encrypted vectors take step 1, got {step}: slice the "
                                  "decrypted values, or take the elements one by one")
            m = stop - start
            if m <= 0:
                raise IndexError(f"the slice {index} of an encrypted vector of length {self.length} is empty")
            if start == 0 and m == self.length:
                return self
            return self._slice(start, m)
        raise self._error(TypeError, f"encrypted vectors take an int or a slice as index, got {type(index).__name__}; "
                          f"what exists: {SUPPORTED}")

    def _slice(self, start: int, m: int):
        """Values start .. start+m-1 as a vector of length m: rotate by start over the width period, mask, then fold
        the period from width down to width_of(m) (each fold one rotation and an addition)."""
        y = self._raw_rotate(start) if start else self
        mask = np.zeros(self.length, dtype=self._MASK_DTYPE)
        mask[:m] = 1
        y = y * mask
        target = width_of(m)
        w = self.width
        while w > target:
            w //= 2
            y = y + y._raw_rotate(w)
        return y._reshaped(m, target)

    # NumPy's dispatch ------------------------------------------------------------------------------

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        name = _UFUNCS.get(ufunc)
        if method == "reduce" and ufunc is np.add and inputs[0] is self:
            return self.sum()
        if method != "__call__" or name is None or kwargs.get("out") is not None:
            raise self._error(TypeError, f"numpy.{ufunc.__name__} ({method}) is not defined on encrypted vectors; "
                              f"what exists: {SUPPORTED}")
        if len(inputs) == 1:
            return getattr(self, name)()
        a, b = inputs
        if a is self:
            out = getattr(self, name)(b)
        else:
            out = getattr(self, _REFLECTED.get(name, name))(a)
        if out is NotImplemented:
            raise self._error(TypeError, f"numpy.{ufunc.__name__} of {type(a).__name__} and {type(b).__name__} is not "
                              f"defined on encrypted vectors; what exists: {SUPPORTED}")
        return out

    def __array_function__(self, func, types, args, kwargs):
        handler = _FUNCTIONS.get(func)
        if handler is None:
            raise self._error(TypeError, f"numpy.{func.__name__} is not defined on encrypted vectors; what exists: "
                              f"{SUPPORTED}")
        return handler(*args, **kwargs)


def _axis_ok(axis, what: str) -> None:
    if axis not in (None, 0, -1, (0,), (-1,)):
        raise ValueError(f"{what}: an encrypted vector has one axis; axis must be None, 0 or -1, got {axis!r}")


def _np_sum(a, axis=None, dtype=None, out=None, keepdims=False, **kwargs):
    _axis_ok(axis, "np.sum")
    if out is not None:
        raise TypeError("np.sum of an encrypted vector takes no out=")
    return a.sum()


def _np_mean(a, axis=None, dtype=None, out=None, keepdims=False, **kwargs):
    _axis_ok(axis, "np.mean")
    if out is not None:
        raise TypeError("np.mean of an encrypted vector takes no out=")
    return a.mean()


def _np_dot(a, b, out=None):
    if out is not None:
        raise TypeError("np.dot of encrypted vectors takes no out=")
    return a @ b if isinstance(a, SlotVector) else b.__rmatmul__(a)


def _np_roll(a, shift, axis=None):
    _axis_ok(axis, "np.roll")
    if not isinstance(a, SlotVector):
        raise TypeError("np.roll: the encrypted operand is the array to roll")
    return a.roll(shift)


def _np_where(condition, x=None, y=None):
    if x is None or y is None:
        raise TypeError("np.where(condition) alone would reveal where an encrypted condition holds; give both "
                        "branches, np.where(mask, x, y), with a public mask")
    if isinstance(condition, Value):
        raise TypeError("np.where takes a public (plaintext) mask; an encrypted condition would be selected "
                        "arithmetically: c * x + (1 - c) * y")
    m = np.asarray(condition)
    if m.dtype == bool:
        m = m.astype(np.int64)
    if m.ndim > 1 or not np.all((m == 0) | (m == 1)):
        raise ValueError("np.where on encrypted vectors takes a 1-D mask of 0/1 (or booleans)")
    vec = x if isinstance(x, SlotVector) else y
    m = m.astype(vec._MASK_DTYPE)
    return x * m + y * (1 - m)


_FUNCTIONS = {np.sum: _np_sum, np.mean: _np_mean, np.dot: _np_dot, np.matmul: lambda a, b, **k: a @ b,
              np.roll: _np_roll, np.where: _np_where}

__all__ = ["ARRAYS", "SUPPORTED", "SlotVector", "is_int", "padding_clean", "power", "scalar_operand"]
