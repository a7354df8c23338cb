"""Encrypted integers on multi-bit TFHE: a thin facade over :mod:`crossfhe.tfhe.ops` and :mod:`crossfhe.io`, with the
conventions of the CKKS facade (:mod:`crossfhe.api.ckks`).

    ctx = TFHEContext.create(presets.tfhe.P4)          # the key owner's context (client key, server key)
    x, y = ctx.encrypt(5, bits=3), ctx.encrypt(2, bits=3)
    z = (x + 2 * y).apply(lambda v: v * v % 16)        # linear operations, then a lookup (one bootstrap)
    ctx.decrypt(z), z.decrypt(), ctx.decrypt(x < y)    # 1, 1, 0

Who holds what. :class:`TFHEContext` is the key owner's: the client key (secret) and a
:class:`TFHEPublicContext` (parameters and server key: public material only) that values refer to. TFHE encrypts
with the secret key only, so only the key owner encrypts; an evaluator holding the public context computes
(linear operations, integer constants, lookups). Values and the public context pickle and serialize without any
secret; pickling a :class:`TFHEContext` is refused (:class:`~crossfhe.errors.SecretMaterialError`). A value the
key owner made (or computed from one) remembers its owner in this process only, so ``x.decrypt()`` works there; a
value loaded, unpickled or computed elsewhere has none, and ``x.decrypt()`` says to call ``ctx.decrypt(x)``.
Values of different key pairs are refused (:class:`~crossfhe.errors.KeyMismatchError`).

Values and bounds. A message is an integer in [0, 2^p), p the parameters' ``message_bits`` (:attr:`bits`), with
one padding bit (:mod:`crossfhe.tfhe.params`). An :class:`EncryptedInt` is one message, or a batch of them when
encrypted from an array (operations broadcast over batch shapes as NumPy does). Each value carries a
:class:`Bound`, the one rule a compiled circuit's analysis applies too (:mod:`crossfhe.api.tfhe_lower`):
c + sum_s w_s v_s over independent sources (a fresh encryption in [0, 2^bits - 1], a lookup's result in its
table's image, a loaded value), which gives the interval the value can take (exact over independent sources:
``x - x`` is 0) and its noise, sum_s w_s^2 bootstraps' worth. Linear operations are exact mod 2^(p+1), so a value
in between may leave [0, 2^p) (``x - y + 8`` is fine); what a bootstrap reads (a lookup, a comparison) and what is
decrypted or serialized must lie in [0, 2^p) and carry at most :func:`noise_budget`: else ParameterError names the
bound, nothing wraps silently. Bounds are public: they derive from the declared ``bits`` and the tables, never from
the encrypted values.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe._deprecated import alias as _alias
from crossfhe.api import eager
from crossfhe.api._owner import KeyOwned
from crossfhe.api._owner import same_keys as _same_keys
from crossfhe.api._owner import set_owner as _set_owner
from crossfhe.api.context import Context, PublicContext, prepare_create
from crossfhe.api.ir import const_key
from crossfhe.api.tfhe_lower import LOG2_P_FAIL, SCHEME, Bound, apply_linear, noise_budget, raw_table
from crossfhe.api.trace import Value, register_value
from crossfhe.api.vector import is_int, scalar_operand
from crossfhe.core.lwe import LWECiphertext
from crossfhe.errors import ParameterError, SerializationError
from crossfhe.io import format as fmt
from crossfhe.io import tfhe as tio
from crossfhe.io.registry import register_kind, register_type
from crossfhe.math import xla
from crossfhe.tfhe import ops
from crossfhe.tfhe import ops as tfhe_ops
from crossfhe.tfhe.params import Params

_ARRAYS = (np.ndarray, jax.Array, list, tuple)

KIND_INTEGER = "tfhe.integer"
"""The kind of an :class:`EncryptedInt` blob: the ``tfhe.ciphertext`` layout (:mod:`crossfhe.io.tfhe`) with one more
header field, ``integer``: ``{"lo", "hi", "noise"}`` (its interval and noise; a loaded value is one source)."""





INTEGER_TYPES: dict = {}
"""``encrypt(ctx, values, dtype, msg_bits)`` and ``decrypt(ctx, x)`` of the integer types, registered by
:mod:`crossfhe.api.integer` (which builds on this module; ``crossfhe.api`` imports both)."""


def _int_array(values, what: str) -> np.ndarray:
    v = np.asarray(values)
    if v.dtype == bool or not (np.issubdtype(v.dtype, np.integer) or v.dtype == object):
        raise TypeError(f"{what} takes integers, got dtype {v.dtype}")
    if v.dtype == object:
        if not all(is_int(e) for e in v.reshape(-1)):
            raise TypeError(f"{what} takes integers, got {values!r}")
        if v.size and (min(v.reshape(-1)) < -2**62 or max(v.reshape(-1)) >= 2**62):
            raise ParameterError(f"{what}: integers beyond 2^62 cannot be encrypted values or constants")
        v = v.astype(np.int64)
    return v.astype(np.int64)


@dataclass(frozen=True, repr=False)
class TFHEPublicContext(PublicContext):
    """Parameters and the server key (bootstrapping and key-switching keys): what encrypted integers refer to and
    what an evaluator needs. Holds no secret; safe to pickle, serialize and send."""

    params: Params
    keys: ops.ServerKey
    """The evaluation keys (the server key: bootstrapping and key-switching keys)."""

    server_key = _alias("keys", "TFHEPublicContext.server_key", "TFHEPublicContext.keys")
    OWNER = "TFHEContext"

    def __post_init__(self):
        if not isinstance(self.params, Params):
            raise TypeError(f"params must be tfhe.Params, got {type(self.params).__name__}")
        if not isinstance(self.keys, ops.ServerKey):
            raise TypeError(f"keys must be a tfhe.ServerKey, got {type(self.keys).__name__}")
        if self.keys.params != self.params:
            if self.keys.params.digest() != self.params.digest():
                raise ParameterError("the server key was made for other parameters than params")
            object.__setattr__(self, "params", self.keys.params)  # the kernel set the key is prepared for

    @property
    def bits(self) -> int:
        """p: messages are integers in [0, 2^p)."""
        return self.params.message_bits

    @property
    def noise_budget(self) -> int:
        """:func:`noise_budget` of the parameters."""
        return noise_budget(self.params)

    def encrypt(self, values, bits: int | None = None, *, dtype=None, msg_bits: int | None = None):
        raise ParameterError(
            "TFHE encrypts with the secret (client) key, which a public context does not hold: encrypt on the key "
            "owner's side (TFHEContext.encrypt) and send the values; here, combine them with int constants (x + 3)")

    def serialize(self) -> bytes:
        """The context's blob: its server key's (kind ``tfhe.server_key``, :mod:`crossfhe.io.tfhe`; tens to hundreds
        of MB for the presets; no secret). Read it back with :meth:`load`."""
        return tio.dumps(self.keys)

    @classmethod
    def load(cls, blob, *, params: Params | None = None) -> TFHEPublicContext:
        """The public context of a :meth:`serialize` blob (for ``params``, if given); every check of
        :func:`crossfhe.io.tfhe.loads`. The server key is prepared for its kernels on first use."""
        sk = tio.loads(blob, params=params, expected=ops.ServerKey)
        return cls(sk.params, sk)

    def __repr__(self) -> str:
        return f"TFHEPublicContext({self.params.name or 'params'}, bits={self.bits}, key_id={self.key_id})"


@dataclass(frozen=True, repr=False)
class TFHEContext(Context):
    """The key owner's context: the client key and the :class:`TFHEPublicContext` (``public``) that values refer
    to. Encrypts and decrypts; refuses to be pickled (the client key leaves the process only through
    ``crossfhe.io.save_secret_key``). Hand ``ctx.public`` (or its blob) to an evaluator."""

    public: TFHEPublicContext
    secret_key: ops.ClientKey
    """The secret (client) key: it encrypts and decrypts, and never leaves the key owner."""

    SAVE_WITH = "crossfhe.io.save_secret_key(ctx.secret_key, path), and pickle or send ctx.public"

    client_key = _alias("secret_key", "TFHEContext.client_key", "TFHEContext.secret_key")
    PUBLIC, SECRET = TFHEPublicContext, ops.ClientKey

    @classmethod
    def create(cls, params: Params, *, seed: bytes | None = None, kernels=None, insecure: bool = False,
               progress="auto") -> TFHEContext:
        """Generate the client and server keys for ``params`` (e.g. ``crossfhe.presets.tfhe.P4``;
        :func:`crossfhe.tfhe.ops.keygen`). ``seed``: 32 bytes for reproducible keys (tests). ``kernels``: the kernel
        set the server key is prepared for (default the parameters', resolved once). ``progress``: as for
        :meth:`crossfhe.api.ckks.CKKSContext.create` (the presets' keys take seconds to minutes), and so is the
        compilation cache. Parameters marked insecure
        (``crossfhe.testing``) are refused unless ``insecure=True``."""
        progress = prepare_create("TFHEContext", params, Params, insecure=insecure, progress=progress,
                                  presets="crossfhe.presets.tfhe")
        if kernels is not None:
            params = params.with_kernels(kernels)
        ck, sk = ops.keygen(params, seed, progress=progress)
        return cls(TFHEPublicContext(sk.params, sk), ck)

    server_key = _alias("keys", "TFHEContext.server_key", "TFHEContext.keys")

    @property
    def bits(self) -> int:
        return self.public.bits

    def encrypt(self, values, bits: int | None = None, *, dtype=None, msg_bits: int | None = None):
        """Encrypt an integer, or an integer array (a batch of that shape).

        With ``dtype`` (``np.uint8`` to ``np.uint64``, ``np.int8`` to ``np.int64``, ``bool``, or their names): an
        :class:`~crossfhe.api.integer.EncryptedInteger` of that type, values in its range, arithmetic mod 2^bits, on
        radix blocks of ``msg_bits`` message bits (default p // 2). Without: an :class:`EncryptedInt`, one p-bit
        message in [0, 2^bits), ``bits`` at most the parameters' p (default p); its interval is [0, 2^bits - 1]:
        declare fewer bits to leave room for sums. ParameterError for values out of range or bits beyond p; TypeError
        for non-integers."""
        if dtype is not None:
            if bits is not None:
                raise ParameterError("encrypt: give dtype= (an integer type) or bits= (one message), not both")
            return INTEGER_TYPES["encrypt"](self, values, dtype, msg_bits)
        if msg_bits is not None:
            raise ParameterError("encrypt: msg_bits= chooses the blocks of an integer type; give dtype= too")
        p = self.bits
        bits = p if bits is None else bits
        if not is_int(bits) or not 1 <= bits <= p:
            raise ParameterError(f"encrypt: bits must be an int in [1, {p}] (the parameters hold {p}-bit messages), "
                                 f"got {bits!r}")
        v = _int_array(values, "encrypt")
        if v.size and (v.min() < 0 or v.max() >= 2**bits):
            raise ParameterError(
                f"encrypt: values must be integers in [0, {2**bits - 1}] ({bits} bits), got values in [{v.min()}, "
                f"{v.max()}]" + (f"; use parameters with more message bits than {p}" if v.max() >= 2**p else "")
                + ("; for signed values add an offset first" if v.min() < 0 else ""))
        ct = ops.encrypt(self.secret_key, v)
        return _set_owner(EncryptedInt(ct, self.public, Bound.source(0, 2**bits - 1)), self)

    def decrypt(self, x: EncryptedInt):
        """The value(s): a Python int, or an int64 array of the batch shape (an encrypted integer type: a NumPy
        scalar or array of its type). KeyMismatchError for a value of another context; ParameterError for one whose
        interval may leave [0, 2^p) or whose noise is beyond the budget (its value would be wrong)."""
        if getattr(x, "scheme", None) == "integer" and not x.traced:
            _same_keys("decrypt", self.key_id, x.ct.key_id)
            return INTEGER_TYPES["decrypt"](self, x)
        self._own(x, "decrypt")._check_usable("decrypt")
        v = ops.decrypt(self.secret_key, x.ct)
        return int(v) if v.ndim == 0 else v



class EncryptedInt(KeyOwned, Value):
    """An encrypted p-bit integer, or a batch of them (NumPy's broadcasting): concrete (``ct`` an LWE ciphertext,
    ``ctx`` its public context and ``bound`` its :class:`Bound`; each operator runs at once) or symbolic inside
    :func:`crossfhe.compile` (each operator recorded; the compiler's analysis computes the same bounds). ``+`` and
    ``-`` with another EncryptedInt, an int or an int array; ``*`` by an int; unary ``-``; :meth:`apply` (a lookup
    table, one bootstrap); ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=`` (encrypted 0/1, one bootstrap). Linear
    operations are exact mod 2^(p+1), so a value in between may leave [0, 2^p) (``x - y + 8`` is fine); what a lookup
    reads and what is decrypted must lie in [0, 2^p) with noise within :func:`noise_budget`, else ParameterError
    names the bound. No product of two values (pack them and apply a table, see ``*``); other operators (``//``,
    ``abs``, bitwise ones) are lookups written with :meth:`apply`, and raise TypeError saying so."""

    scheme = "tfhe"
    __array_ufunc__ = None  # a NumPy operand on the left defers to the reflected operators here

    _FIELDS = ("ct", "ctx", "bound", "trace", "node")

    def __init__(self, ct: LWECiphertext | None = None, ctx: TFHEPublicContext | None = None,
                 bound: Bound | None = None, *, trace=None, node: int | None = None):
        self.__dict__.update(ct=ct, ctx=ctx, bound=bound, trace=trace, node=node)

    @classmethod
    def symbolic(cls, trace, node: int, spec) -> EncryptedInt:
        """The traced value of an input node (:class:`~crossfhe.api.specs.TFHEInt` ``spec``)."""
        return cls(trace=trace, node=node)

    @property
    def bits(self) -> int:
        """p: the message width of the parameters."""
        if self.traced:
            raise self._error(TypeError, "a traced value's parameters are the circuit's (circuit.params)")
        return self.ctx.bits

    @property
    def range(self) -> tuple[int, int]:
        """(lo, hi): the interval the value can take."""
        if self.traced:
            raise self._error(TypeError, "a traced value's interval is the compiler's analysis (circuit.graph)")
        return self.bound.lo, self.bound.hi

    @property
    def shape(self) -> tuple[int, ...]:
        """The batch shape (() for a single integer)."""
        return tuple(self.ct.b.shape[:-1])

    def __repr__(self) -> str:
        if self.traced:
            return f"EncryptedInt(%{self.node}, traced)"
        batch = f", batch={self.shape}" if self.shape else ""
        return f"EncryptedInt(bits={self.bits}, range=[{self.bound.lo}, {self.bound.hi}]{batch})"

    def __bool__(self):
        raise self._error(TypeError, "an encrypted integer has no truth value: decrypt it first (ctx.decrypt(x)), or "
                          "select arithmetically with a lookup table")

    __hash__ = object.__hash__

    def _lookup_instead(self, what: str):
        raise self._error(TypeError, f"{what} is not an operator of lookup-table integers: write it as a table, "
                          f"x.apply(lambda m: ...) (one bootstrap); what exists: + - (values, ints, int arrays), "
                          f"* by an int, apply, == != < <= > >=; NumPy's integer types with every operator: "
                          f"ctx.encrypt(values, dtype=np.uint8)")

    def __array__(self, *args, **kwargs):
        raise self._error(TypeError, "an encrypted integer is not a NumPy array (its values are secret): decrypt it "
                          "first (ctx.decrypt(x))")

    # Serialization ---------------------------------------------------------------------------------

    def serialize(self) -> bytes:
        """The value's blob (kind ``tfhe.integer``: the ciphertext as :func:`crossfhe.io.tfhe.dumps` stores it, with
        its key id, and its interval and noise); no key material. Read it back with :meth:`load`."""
        if self.traced:
            raise self._error(TypeError, "a traced value has no words to serialize; serialize the circuit's outputs")
        self._check_usable("serialize")
        c = fmt.unpack(tio.dumps(self.ct, params=self.ctx.params))
        integer = {"lo": self.bound.lo, "hi": self.bound.hi, "noise": self.bound.noise}
        return fmt.pack(KIND_INTEGER, {**c.fields, "integer": integer}, c.arrays)

    @classmethod
    def load(cls, ctx, blob) -> EncryptedInt:
        """The value of a :meth:`serialize` blob, attached to ``ctx`` (a TFHEContext or TFHEPublicContext of the same
        parameters and keys: SerializationError or KeyMismatchError otherwise), one new source with the stored
        interval and noise; every check of :func:`crossfhe.io.tfhe.loads`. Loaded with the key owner's context, the
        value can decrypt itself."""
        public = ctx.public if isinstance(ctx, TFHEContext) else ctx
        if not isinstance(public, TFHEPublicContext):
            raise TypeError(f"load takes a TFHEContext or TFHEPublicContext, got {type(ctx).__name__}")
        c = fmt.unpack(blob, expected_kind=KIND_INTEGER)
        fields = dict(c.fields)
        integer = fields.pop("integer", None)
        if not isinstance(integer, dict) or set(integer) != {"lo", "hi", "noise"}:
            raise SerializationError(f"a {KIND_INTEGER} blob's header must hold integer: {{lo, hi, noise}}")
        lo, hi, nz = integer["lo"], integer["hi"], integer["noise"]
        if not (all(fmt.is_json_int(v) for v in (lo, hi, nz)) and 0 <= lo <= hi < 2**public.bits
                and 0 <= nz <= noise_budget(public.params)):
            raise SerializationError(f"a {KIND_INTEGER} blob's bound is invalid for {public.bits}-bit messages: "
                                     f"{integer}")
        ct = tio.loads(fmt.pack(tio.KIND_CIPHERTEXT, fields, c.arrays), params=public.params, expected=LWECiphertext)
        _same_keys("EncryptedInt.load", public.key_id, ct.key_id)
        x = cls(ct, public, Bound.source(lo, hi, nz))
        return _set_owner(x, ctx if isinstance(ctx, TFHEContext) else None)

    # Checks ----------------------------------------------------------------------------------------

    def _check_usable(self, what: str) -> None:
        """Refuse to bootstrap or decrypt a value that may leave [0, 2^p) or carries more noise than a bootstrap of it
        tolerates (``what`` says who reads it)."""
        p, size = self.bits, 1 << self.bits
        name = self.ctx.params.name or "these parameters"
        lo, hi = self.bound.lo, self.bound.hi
        if lo < 0 or hi >= size:
            reach = f"reach {hi}, beyond" if hi >= size else f"reach {lo}, below"
            raise ParameterError(
                f"{what}: the value may {reach} the {p}-bit message space [0, {size - 1}] of {name} (its interval is "
                f"[{lo}, {hi}]). Linear operations are exact mod 2^{p + 1}, but what a lookup reads and what is "
                f"decrypted must lie in [0, {size}): add a constant to bring it there, reduce an operand first with "
                f".apply(...) (e.g. x.apply(lambda v: min(v, {size // 2 - 1}))), encrypt with fewer bits "
                f"(ctx.encrypt(v, bits={max(1, p - 1)})), or use parameters with more message bits "
                "(crossfhe.presets.tfhe)")
        budget = noise_budget(self.ctx.params)
        if self.bound.noise > budget:
            raise ParameterError(
                f"{what}: the value's noise is {self.bound.noise} times a bootstrap's (sum of squared weights), beyond "
                f"the {budget} that {name} allows (a bootstrap would fail with probability 2^"
                f"{self.ctx.params.log2_p_fail(self.bound.noise):.1f} > 2^{LOG2_P_FAIL}); apply a lookup in between "
                "(x * c as x.apply(lambda v: c * v) is exact and resets the noise), or use smaller constants")

    # Primitives ------------------------------------------------------------------------------------

    def _apply(self, op: str, others=(), attrs: dict | None = None, *, bound: Bound | None = None, consts=None):
        """The value of primitive ``op`` (:mod:`crossfhe.api.tfhe_lower`): recorded while tracing, else run as a
        one-operation circuit (:mod:`crossfhe.api.eager`) with result bound ``bound``."""
        attrs = attrs or {}
        if self.traced:
            return self._record(op, others, attrs, consts)
        public = self.ctx
        operands = [({"range": (v.bound.lo, v.bound.hi)}, (v.ct.b, v.ct.a)) for v in (self, *others)]
        _, (b, a) = eager.run(SCHEME, public.params, public.keys, op, attrs, operands, consts=consts)
        ct = LWECiphertext(b, a, self.ct.moduli, self.ct.key_id)
        return _set_owner(self._replace(ct=ct, bound=bound), self._owner_of((self, *others)))

    def _constant(self, c, what: str):
        """An int, or (eagerly) an int array that broadcasts to this batch as a trivial ciphertext (b = c Delta,
        a = 0) with its Bound (a source of noise 0)."""
        c = scalar_operand(c)
        if is_int(c):
            return int(c)
        if isinstance(c, Value):
            self._same(c, what)
        if not isinstance(c, _ARRAYS):
            raise self._error(TypeError, f"{what}: a TFHE value combines with encrypted TFHE values and int "
                              f"constants, got {type(c).__name__} {c!r}")
        if self.traced:
            raise self._error(TypeError, f"{what}: inside a circuit a TFHE value combines with encrypted TFHE values "
                              "and int constants (each input is one integer of the batch the circuit runs on)")
        arr = _int_array(c, what)
        if arr.size == 0:
            raise ParameterError(f"{what}: an empty constant array")
        try:
            shape = np.broadcast_shapes(self.shape, arr.shape)
        except ValueError:
            raise ParameterError(f"{what}: a constant of shape {arr.shape} does not broadcast to the batch "
                                 f"{self.shape}") from None
        b = jnp.asarray(np.broadcast_to(tfhe_ops.encode(self.ctx.params, arr), shape + (len(self.ct.moduli),)))
        a = xla.zeros_like(jnp.broadcast_to(self.ct.a, shape + self.ct.a.shape[-2:]))
        ct = LWECiphertext(b, a, self.ct.moduli, self.ct.key_id)
        return EncryptedInt(ct, self.ctx, Bound.source(arr.min(), arr.max(), 0))

    # Arithmetic ------------------------------------------------------------------------------------

    def _linear(self, op: str, other=None, c=None):
        if other is not None:
            self._pair(other, {"add": "x + y", "sub": "x - y"}[op])
        others = [] if other is None else [other]
        bound = None if self.traced else apply_linear(op, c, [v.bound for v in (self, *others)])
        return self._apply(op, others, {} if c is None else {"c": int(c)}, bound=bound)

    def __add__(self, other):
        if isinstance(other, EncryptedInt):
            return self._linear("add", other)
        try:
            c = self._constant(other, "x + c")
        except TypeError:
            if isinstance(scalar_operand(other), (numbers.Number, *_ARRAYS)) or isinstance(other, Value):
                raise
            return NotImplemented
        if isinstance(c, EncryptedInt):
            return self._linear("add", c)
        return self if c == 0 else self._linear("add_scalar", c=c)

    __radd__ = __add__

    def __sub__(self, other):
        if isinstance(other, EncryptedInt):
            return self._linear("sub", other)
        c = self._constant(other, "x - c")
        if isinstance(c, EncryptedInt):
            return self._linear("sub", c)
        return self if c == 0 else self._linear("add_scalar", c=-c)

    def __rsub__(self, other):
        c = self._constant(other, "c - x")
        if isinstance(c, EncryptedInt):
            return c - self
        return (-self) + c

    def __neg__(self):
        return self._linear("neg")

    def __mul__(self, other):
        other = scalar_operand(other)
        if isinstance(other, EncryptedInt):
            self._same(other, "x * y")
            raise self._error(TypeError, "x * y: TFHE multiplies an encrypted integer by int constants only; for the "
                              "product of two values pack them and apply a table, e.g. (x * 2**k + y).apply(lambda "
                              "v: (v >> k) * (v % 2**k)) with x, y below 2**k")
        if isinstance(other, Value):
            self._same(other, "x * c")
        if is_int(other):
            return self if other == 1 else self._linear("mul_int", c=int(other))
        if isinstance(other, _ARRAYS):
            raise self._error(TypeError, "x * c: TFHE multiplies by one int constant; for per-element constants "
                              "apply a table per value, or multiply the batch's slices one by one")
        if isinstance(other, numbers.Number):
            raise self._error(TypeError, f"x * c: a TFHE value combines with encrypted TFHE values and int constants, "
                              f"got {type(other).__name__} {other!r}")
        return NotImplemented

    __rmul__ = __mul__

    # Lookups ---------------------------------------------------------------------------------------

    def apply(self, table) -> EncryptedInt:
        """table(m) mod 2^p for the message m (one programmable bootstrap, :func:`crossfhe.tfhe.ops.pbs`, fresh
        noise): ``table`` a callable on ints, or a 1-D integer array (entry m is the value at m). Only the entries this
        value can reach (its interval) are read; they must exist. The result's interval is the table's image over this
        value's. The value read must lie in [0, 2^p) with noise within :func:`noise_budget` (ParameterError)."""
        if self.traced:
            raw, why = raw_table(table, "apply")
            attrs = {"raw": self.trace.builder.const(raw)}
            if why is not None:
                attrs["raw_error"] = why
            return self._apply("lookup", [], attrs)
        self._check_usable("x.apply(table)")
        size = 1 << self.bits
        lo, hi = self.range
        raw, why = raw_table(table, "apply", limit=size, error=lambda kind, message: kind(f"apply: {message}"))
        if raw.shape[0] <= hi:
            reason = why or f"has {raw.shape[0]} entries"
            raise ParameterError(f"apply: this value may reach {hi}, but the table {reason}; it must cover [{lo}, "
                                 f"{hi}] (at most {size} entries)")
        full = np.zeros(size, dtype=np.int32)
        full[: raw.shape[0]] = raw
        key = const_key(full)
        part = full[lo: hi + 1]
        return self._apply("lookup", [], {"table": key}, bound=Bound.source(int(part.min()), int(part.max())),
                           consts={key: full})

    def _compare(self, other, op: str) -> EncryptedInt:
        other = scalar_operand(other)
        if is_int(other):
            c = int(other)
            test = {"<": lambda v: v < c, "<=": lambda v: v <= c, ">": lambda v: v > c, ">=": lambda v: v >= c,
                    "==": lambda v: v == c, "!=": lambda v: v != c}[op]
            return self.apply(lambda v: int(test(v)))
        if not isinstance(other, EncryptedInt):
            if op in ("==", "!="):
                raise self._error(TypeError, f"x {op} y: an encrypted integer is compared with an int or another "
                                  f"encrypted integer, got {type(other).__name__}")
            return NotImplemented
        if op in (">", ">="):
            return other._compare(self, {">": "<", ">=": "<="}[op])
        what = f"x {op} y"
        self._pair(other, what)
        if self.traced:
            raise self._error(TypeError, f"{what}: inside a circuit compare through a lookup on the difference with an "
                              "offset that keeps it in range, e.g. (x - y + 2**(p-1)).apply(lambda d: int(d < "
                              "2**(p-1))) for x, y below 2**(p-1)")
        diff = self.bound + other.bound.scaled(-1)
        shift = -diff.lo  # x - y + shift lies in [0, span]
        span = diff.hi - diff.lo
        if span >= 1 << self.bits:
            raise ParameterError(
                f"{what}: x - y spans [{diff.lo}, {diff.hi}], more values than the {self.bits}-bit message space "
                f"holds, so one lookup cannot compare them; encrypt with fewer bits (at most {self.bits - 1} each) or "
                "reduce the operands with .apply(...) first")
        d = self - other + shift
        tests = {"<": lambda v: int(v < shift), "<=": lambda v: int(v <= shift), "==": lambda v: int(v == shift),
                 "!=": lambda v: int(v != shift)}
        return d.apply(tests[op])

    def __eq__(self, other):
        """1 where the message equals ``other`` (an int, or another encrypted integer: a lookup on their difference
        as for ``<``), else 0: encrypted, one bootstrap."""
        return self._compare(other, "==")

    def __ne__(self, other):
        return self._compare(other, "!=")

    def __lt__(self, other):
        return self._compare(other, "<")

    def __le__(self, other):
        return self._compare(other, "<=")

    def __gt__(self, other):
        return self._compare(other, ">")

    def __ge__(self, other):
        return self._compare(other, ">=")


_LOOKUP_OPERATORS = {"__abs__": "abs(x)", "__floordiv__": "//", "__rfloordiv__": "//", "__mod__": "%",
                     "__rmod__": "%", "__divmod__": "divmod", "__rdivmod__": "divmod", "__truediv__": "/",
                     "__rtruediv__": "/", "__pow__": "**", "__rpow__": "**", "__and__": "&", "__rand__": "&",
                     "__or__": "|", "__ror__": "|", "__xor__": "^", "__rxor__": "^", "__invert__": "~",
                     "__lshift__": "<<", "__rlshift__": "<<", "__rshift__": ">>", "__rrshift__": ">>",
                     "__matmul__": "@", "__rmatmul__": "@"}
"""Operators a NumPy user writes that lookup-table integers express as tables (:meth:`EncryptedInt.apply`)."""
for _name, _what in _LOOKUP_OPERATORS.items():
    setattr(EncryptedInt, _name, lambda self, *args, _what=_what: self._lookup_instead(_what))
del _name, _what

register_value(EncryptedInt)
SCHEME.value_class = TFHEContext.VALUE = EncryptedInt


# crossfhe.io.dumps / loads take these objects (io cannot import the api: the api registers them).
register_type(TFHEPublicContext, tio.KIND_SERVER_KEY, lambda c, params: c.serialize(), params_of=lambda c: c.params)
register_type(EncryptedInt, KIND_INTEGER, lambda x, params: x.serialize(), params_of=lambda x: x.ctx.params)
register_kind(KIND_INTEGER, lambda blob, params, context: EncryptedInt.load(context, blob), params=Params,
              context="an encrypted TFHE integer: load it with crossfhe.EncryptedInt.load(ctx, blob) or "
                      "crossfhe.io.loads(blob, context=ctx), ctx the TFHEContext or TFHEPublicContext it belongs to")

__all__ = ["KIND_INTEGER", "Bound", "EncryptedInt", "TFHEContext", "TFHEPublicContext", "noise_budget"]
