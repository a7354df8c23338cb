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
:class:`Bound`: the affine form of the circuit compiler's TFHE analysis (:mod:`crossfhe.compiler.tfhe`), applied
at once: c + sum_s w_s v_s over independent sources (a fresh encryption in [0, 2^bits - 1], a lookup's result in
its table's image, a loaded value), which gives the interval the value can take (exact over independent sources:
``x - x`` is 0) and its noise, sum_s w_s^2 bootstraps' worth. An operation whose result could leave [0, 2^p), or
carry more noise than a bootstrap of it tolerates (:func:`noise_budget`), raises ParameterError naming the bound;
nothing wraps silently. The compiler is more lenient in between (linear operations are exact mod 2^(p+1), and it
checks only what a lookup reads and what an output holds); here every result must fit, so order the operations
(``x + 8 - y``, not ``x - y + 8``) or reduce a value with :meth:`EncryptedInt.apply`. Bounds are public: they
derive from the declared ``bits`` and the tables, never from the encrypted values.
"""

from __future__ import annotations

import functools
import numbers
import os
from dataclasses import dataclass

import jax
import numpy as np

from crossfhe import runtime
from crossfhe.api._owner import KeyOwned
from crossfhe.api._owner import same_keys as _same_keys
from crossfhe.api._owner import set_owner as _set_owner
from crossfhe.core.keys import SecretHolder
from crossfhe.core.lwe import LWECiphertext
from crossfhe.errors import InsecureParametersError, ParameterError, SerializationError
from crossfhe.io import format as fmt
from crossfhe.io import tfhe as tio
from crossfhe.io.registry import register_kind, register_type
from crossfhe.progress import callback as progress_callback
from crossfhe.tfhe import ops
from crossfhe.tfhe.params import Params

KIND_INTEGER = "tfhe.integer"
"""The kind of an :class:`EncryptedInt` blob: the ``tfhe.ciphertext`` layout (:mod:`crossfhe.io.tfhe`) with one more
header field, ``integer``: ``{"lo", "hi", "noise"}`` (its interval and noise; a loaded value is one source)."""

LOG2_P_FAIL = -64
"""The failure probability (log2, per bootstrap) a value's noise may lead to: the presets' target."""

_MAX_NOISE = 1 << 40


def _is_int(x) -> bool:
    return isinstance(x, (numbers.Integral, np.integer)) and not isinstance(x, (bool, np.bool_))


def _scalar(other):
    if isinstance(other, (np.ndarray, jax.Array, np.generic)) and np.ndim(other) == 0:
        return np.asarray(other).item()
    return other


def _int_array(values, what: str) -> np.ndarray:
    v = np.asarray(values)
    if v.dtype == bool or not (np.issubdtype(v.dtype, np.integer) or v.dtype == object):
        raise TypeError(f"{what} takes integers, got dtype {v.dtype}")
    if v.dtype == object:
        if not all(_is_int(e) for e in v.reshape(-1)):
            raise TypeError(f"{what} takes integers, got {values!r}")
        if v.size and (min(v.reshape(-1)) < -2**62 or max(v.reshape(-1)) >= 2**62):
            raise ParameterError(f"{what}: integers beyond 2^62 cannot be encrypted values or constants")
        v = v.astype(np.int64)
    return v.astype(np.int64)


@functools.cache
def noise_budget(params: Params) -> int:
    """The most noise a value may carry on ``params``, in bootstraps' output variances (a fresh encryption counts
    1, ``x * c`` c^2 times x's, ``x + y`` the sum over independent sources): ``params.norm2``, where the presets
    quote their failure probability, or more as long as a bootstrap of it fails with probability at most
    2^:data:`LOG2_P_FAIL` (``params.log2_p_fail``); at most 2^40."""
    def ok(norm2: int) -> bool:
        return params.log2_p_fail(norm2) <= LOG2_P_FAIL

    good = params.norm2
    if not ok(good):
        return good
    bad = 2 * good
    while ok(bad):
        if bad >= _MAX_NOISE:
            return _MAX_NOISE
        good, bad = bad, 2 * bad
    while bad - good > 1:  # log2_p_fail grows with the noise: bisect the last good value
        mid = (good + bad) // 2
        good, bad = (mid, bad) if ok(mid) else (good, mid)
    return good


@dataclass(frozen=True)
class Bound:
    """What an encrypted value can hold: the affine form ``const`` + sum_s w_s v_s over independent sources s,
    ``terms`` the tuples (source id, w_s, lo_s, hi_s, noise_s), sorted by id: source s lies in [lo_s, hi_s] and
    carries noise_s bootstraps' variance (0 for a constant array). Source ids are random 64-bit ints, so values
    that travel between processes do not alias."""

    const: int = 0
    terms: tuple = ()

    @classmethod
    def source(cls, lo: int, hi: int, noise: int = 1) -> Bound:
        """A new independent source in [lo, hi]."""
        return cls(0, ((int.from_bytes(os.urandom(8), "little"), 1, int(lo), int(hi), int(noise)),))

    @property
    def lo(self) -> int:
        return self.const + sum(w * (lo if w > 0 else hi) for _, w, lo, hi, _ in self.terms)

    @property
    def hi(self) -> int:
        return self.const + sum(w * (hi if w > 0 else lo) for _, w, lo, hi, _ in self.terms)

    @property
    def noise(self) -> int:
        """sum_s w_s^2 noise_s: the value's noise in bootstraps' output variances."""
        return sum(w * w * nz for _, w, _, _, nz in self.terms)

    def __add__(self, other) -> Bound:
        if _is_int(other):
            return Bound(self.const + int(other), self.terms)
        if not isinstance(other, Bound):
            return NotImplemented
        merged = {t[0]: list(t) for t in self.terms}
        for sid, w, lo, hi, nz in other.terms:
            if sid in merged:
                merged[sid][1] += w
            else:
                merged[sid] = [sid, w, lo, hi, nz]
        terms = tuple(tuple(t) for _, t in sorted(merged.items()) if t[1])
        return Bound(self.const + other.const, terms)

    def scaled(self, c: int) -> Bound:
        """The bound of c times this value."""
        c = int(c)
        return Bound(c * self.const, tuple((s, c * w, lo, hi, nz) for s, w, lo, hi, nz in self.terms if c * w))


@dataclass(frozen=True, repr=False)
class TFHEPublicContext:
    """Parameters and the server key (bootstrapping and key-switching keys): what encrypted integers refer to and
    what an evaluator needs. Holds no secret; safe to pickle, serialize and send."""

    params: Params
    server_key: ops.ServerKey

    def __post_init__(self):
        if not isinstance(self.params, Params):
            raise TypeError(f"params must be tfhe.Params, got {type(self.params).__name__}")
        if not isinstance(self.server_key, ops.ServerKey):
            raise TypeError(f"server_key must be a tfhe.ServerKey, got {type(self.server_key).__name__}")
        if self.server_key.params != self.params:
            if self.server_key.params.digest() != self.params.digest():
                raise ParameterError("the server key was made for other parameters than params")
            object.__setattr__(self, "params", self.server_key.params)  # the kernel set the key is prepared for

    @property
    def key_id(self) -> str | None:
        """The key pair's identifier (:func:`crossfhe.core.keys.key_id`)."""
        return self.server_key.key_id

    @property
    def bits(self) -> int:
        """p: messages are integers in [0, 2^p)."""
        return self.params.message_bits

    @property
    def noise_budget(self) -> int:
        """:func:`noise_budget` of the parameters."""
        return noise_budget(self.params)

    def encrypt(self, values, bits: int | None = None):
        raise ParameterError(
            "TFHE encrypts with the secret (client) key, which a public context does not hold: encrypt on the key "
            "owner's side (TFHEContext.encrypt) and send the values; here, combine them with int constants (x + 3)")

    def decrypt(self, x):
        raise ParameterError(
            "a public context holds no secret key and cannot decrypt: decrypt with the TFHEContext that made the "
            "keys (ctx.decrypt(x)), on the key owner's side")

    def serialize(self) -> bytes:
        """The context's blob: its server key's (kind ``tfhe.server_key``, :mod:`crossfhe.io.tfhe`; tens to hundreds
        of MB for the presets; no secret). Read it back with :meth:`load`."""
        return tio.dumps(self.server_key)

    @classmethod
    def load(cls, blob, *, params: Params | None = None) -> TFHEPublicContext:
        """The public context of a :meth:`serialize` blob (for ``params``, if given); every check of
        :func:`crossfhe.io.tfhe.loads`. The server key is prepared for its kernels on first use."""
        sk = tio.loads(blob, params=params, expected=ops.ServerKey)
        return cls(sk.params, sk)

    def __repr__(self) -> str:
        return f"TFHEPublicContext({self.params.name or 'params'}, bits={self.bits}, key_id={self.key_id})"


@dataclass(frozen=True, repr=False)
class TFHEContext(SecretHolder):
    """The key owner's context: the client key and the :class:`TFHEPublicContext` (``public``) that values refer
    to. Encrypts and decrypts; refuses to be pickled (the client key leaves the process only through
    ``crossfhe.io.save_secret_key``). Hand ``ctx.public`` (or its blob) to an evaluator."""

    public: TFHEPublicContext
    client_key: ops.ClientKey

    SAVE_WITH = "crossfhe.io.save_secret_key(ctx.client_key, path), and pickle or send ctx.public"

    def __post_init__(self):
        if not isinstance(self.public, TFHEPublicContext):
            raise TypeError(f"public must be a TFHEPublicContext, got {type(self.public).__name__}")
        if not isinstance(self.client_key, ops.ClientKey):
            raise TypeError(f"client_key must be a tfhe.ClientKey, got {type(self.client_key).__name__}")
        _same_keys("TFHEContext", self.public.key_id, self.client_key.key_id)

    @classmethod
    def create(cls, params: Params, *, seed: bytes | None = None, kernels=None, insecure: bool = False,
               progress="auto") -> TFHEContext:
        """Generate the client and server keys for ``params`` (e.g. ``crossfhe.presets.tfhe.P4``;
        :func:`crossfhe.tfhe.ops.keygen`). ``seed``: 32 bytes for reproducible keys (tests). ``kernels``: the kernel
        set the server key is prepared for (default the parameters', resolved once). ``progress``: as for
        :meth:`crossfhe.api.ckks.CKKSContext.create` (the presets' keys take seconds to minutes), and so is the
        compilation cache. Parameters marked insecure
        (``crossfhe.testing``) are refused unless ``insecure=True``."""
        if not isinstance(params, Params):
            raise TypeError(f"params must be tfhe.Params, got {type(params).__name__}")
        if params.insecure and not insecure:
            raise InsecureParametersError(
                f"{params!r} is marked insecure (below the 128-bit bound): TFHEContext.create(params, "
                "insecure=True) to use it anyway (tests only), or take a preset of crossfhe.presets.tfhe")
        progress = progress_callback(progress)
        runtime.enable_compilation_cache()
        if kernels is not None:
            params = params.with_kernels(kernels)
        ck, sk = ops.keygen(params, seed, progress=progress)
        return cls(TFHEPublicContext(sk.params, sk), ck)

    @property
    def params(self) -> Params:
        return self.public.params

    @property
    def server_key(self) -> ops.ServerKey:
        return self.public.server_key

    @property
    def key_id(self) -> str | None:
        return self.public.key_id

    @property
    def bits(self) -> int:
        return self.public.bits

    def encrypt(self, values, bits: int | None = None) -> EncryptedInt:
        """Encrypt an integer, or an integer array (a batch of that shape), in [0, 2^bits); ``bits`` at most the
        parameters' p (default p). The value's interval is [0, 2^bits - 1]: declare fewer bits to leave room for
        sums. ParameterError for values out of range or bits beyond p; TypeError for non-integers."""
        p = self.bits
        bits = p if bits is None else bits
        if not _is_int(bits) or not 1 <= bits <= p:
            raise ParameterError(f"encrypt: bits must be an int in [1, {p}] (the parameters hold {p}-bit messages), "
                                 f"got {bits!r}")
        v = _int_array(values, "encrypt")
        if v.size and (v.min() < 0 or v.max() >= 2**bits):
            raise ParameterError(
                f"encrypt: values must be integers in [0, {2**bits - 1}] ({bits} bits), got values in [{v.min()}, "
                f"{v.max()}]" + (f"; use parameters with more message bits than {p}" if v.max() >= 2**p else "")
                + ("; for signed values add an offset first" if v.min() < 0 else ""))
        ct = ops.encrypt(self.client_key, v)
        return _set_owner(EncryptedInt(ct, self.public, Bound.source(0, 2**bits - 1)), self)

    def decrypt(self, x: EncryptedInt):
        """The value(s): a Python int, or an int64 array of the batch shape. KeyMismatchError for a value of another
        context."""
        if not isinstance(x, EncryptedInt):
            raise TypeError(f"decrypt takes an EncryptedInt, got {type(x).__name__}")
        _same_keys("decrypt", self.key_id, x.ct.key_id)
        v = ops.decrypt(self.client_key, x.ct)
        return int(v) if v.ndim == 0 else v

    def __repr__(self) -> str:
        return f"TFHEContext(with secret key, {self.public!r})"


@dataclass(frozen=True, repr=False, eq=False)
class EncryptedInt(KeyOwned):
    """An LWE ciphertext (or a batch) with its public context and its :class:`Bound`. ``+`` and ``-`` with another
    EncryptedInt, an int or an int array; ``*`` by an int; unary ``-``; :meth:`apply` (a lookup table, one
    bootstrap); ``<``, ``<=``, ``>``, ``>=`` (encrypted 0/1, one bootstrap). No ``==`` (identity, as for any
    object) and no product of two values (pack them and apply a table, see ``*``)."""

    ct: LWECiphertext
    ctx: TFHEPublicContext
    bound: Bound

    __array_ufunc__ = None  # a NumPy operand on the left defers to the reflected operators here

    @property
    def bits(self) -> int:
        """p: the message width of the parameters."""
        return self.ctx.bits

    @property
    def range(self) -> tuple[int, int]:
        """(lo, hi): the interval the value can take."""
        return self.bound.lo, self.bound.hi

    @property
    def shape(self) -> tuple[int, ...]:
        """The batch shape (() for a single integer)."""
        return tuple(self.ct.b.shape[:-1])

    def __repr__(self) -> str:
        batch = f", batch={self.shape}" if self.shape else ""
        return f"EncryptedInt(bits={self.bits}, range=[{self.bound.lo}, {self.bound.hi}]{batch})"

    def __bool__(self):
        raise TypeError("an encrypted integer has no truth value: decrypt it first (ctx.decrypt(x))")

    # Key owner -------------------------------------------------------------------------------------

    # Serialization ---------------------------------------------------------------------------------

    def serialize(self) -> bytes:
        """The value's blob (kind ``tfhe.integer``: the ciphertext as :func:`crossfhe.io.tfhe.dumps` stores it, with
        its key id, and its interval and noise); no key material. Read it back with :meth:`load`."""
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

    # Checked results -------------------------------------------------------------------------------

    def _result(self, ct: LWECiphertext, bound: Bound, what: str, other: EncryptedInt | None = None) -> EncryptedInt:
        """The value (ct, bound) after checking that it fits the message space and the noise budget."""
        p, size = self.bits, 1 << self.bits
        name = self.ctx.params.name or "these parameters"
        lo, hi = bound.lo, bound.hi
        if lo < 0 or hi >= size:
            reach = f"reach {hi}, beyond" if hi >= size else f"reach {lo}, below"
            fix = ("reduce an operand first with .apply(...) (a lookup table, e.g. x.apply(lambda v: min(v, "
                   f"{size // 2 - 1}))), encrypt with fewer bits (ctx.encrypt(v, bits={p - 1})), or use parameters "
                   "with more message bits (crossfhe.presets.tfhe)")
            if lo < 0:
                fix = f"add a constant before subtracting (x + {-lo} - y rather than x - y + {-lo}), or " + fix
            raise ParameterError(
                f"{what} may {reach} the {p}-bit message space [0, {size - 1}] of {name} (its interval is [{lo}, "
                f"{hi}]); TFHE values here never wrap silently: {fix}")
        budget = noise_budget(self.ctx.params)
        if bound.noise > budget:
            raise ParameterError(
                f"{what}: its noise would be {bound.noise} times a bootstrap's (sum of squared weights), beyond the "
                f"{budget} that {name} allows (a bootstrap would fail with probability 2^"
                f"{self.ctx.params.log2_p_fail(bound.noise):.1f} > 2^{LOG2_P_FAIL}); apply a lookup in between (x * c "
                "as x.apply(lambda v: c * v) is exact and resets the noise), or use smaller constants")
        owner = self.__dict__.get("_owner") or (other.__dict__.get("_owner") if other is not None else None)
        return _set_owner(EncryptedInt(ct, self.ctx, bound), owner)

    def _pair(self, other: EncryptedInt, what: str) -> None:
        _same_keys(what, self.ct.key_id, other.ct.key_id)
        try:
            np.broadcast_shapes(self.shape, other.shape)
        except ValueError:
            raise ParameterError(f"{what}: batches of shapes {self.shape} and {other.shape} do not broadcast") from None

    def _constant(self, c, what: str) -> tuple[int | np.ndarray, Bound, str]:
        """(encodable constant, its Bound, how to name it) of an int or an integer array that broadcasts to this
        batch."""
        c = _scalar(c)
        if _is_int(c):
            return int(c), Bound(int(c)), str(int(c))
        arr = _int_array(c, what)
        try:
            fits = np.broadcast_shapes(self.shape, arr.shape) == self.shape
        except ValueError:
            fits = False
        if not fits:
            raise ParameterError(f"{what}: a constant of shape {arr.shape} does not broadcast to the batch "
                                 f"{self.shape}")
        if arr.size == 0:
            raise ParameterError(f"{what}: an empty constant array")
        return arr, Bound.source(arr.min(), arr.max(), 0), "c"

    # Arithmetic ------------------------------------------------------------------------------------

    def _plain_operand(self, other) -> bool:
        return _is_int(_scalar(other)) or isinstance(other, (np.ndarray, jax.Array, list, tuple))

    def __add__(self, other):
        if isinstance(other, EncryptedInt):
            self._pair(other, "x + y")
            return self._result(ops.add(self.ct, other.ct), self.bound + other.bound, "x + y", other)
        if self._plain_operand(other):
            c, term, text = self._constant(other, "x + c")
            return self._result(ops.add_const(self.ctx.params, self.ct, c), self.bound + term, f"x + {text}")
        return NotImplemented

    __radd__ = __add__

    def __sub__(self, other):
        if isinstance(other, EncryptedInt):
            self._pair(other, "x - y")
            return self._result(ops.sub(self.ct, other.ct), self.bound + other.bound.scaled(-1), "x - y", other)
        if self._plain_operand(other):
            c, term, text = self._constant(other, "x - c")
            return self._result(ops.add_const(self.ctx.params, self.ct, -c), self.bound + term.scaled(-1),
                                f"x - {text}")
        return NotImplemented

    def __rsub__(self, other):
        if self._plain_operand(other):
            c, term, text = self._constant(other, "c - x")
            ct = ops.add_const(self.ctx.params, ops.negate(self.ct), c)
            return self._result(ct, self.bound.scaled(-1) + term, f"{text} - x")
        return NotImplemented

    def __neg__(self):
        return self._result(ops.negate(self.ct), self.bound.scaled(-1), "-x")

    def __mul__(self, other):
        other = _scalar(other)
        if isinstance(other, EncryptedInt):
            raise TypeError(
                "x * y: TFHE multiplies an encrypted integer by int constants only; for the product of two values "
                "pack them and apply a table, e.g. (x * 2**k + y).apply(lambda v: (v >> k) * (v % 2**k)) with x, y "
                "below 2**k")
        if _is_int(other):
            return self._result(ops.mul_const(self.ctx.params, self.ct, int(other)), self.bound.scaled(other),
                                f"x * {other}")
        return NotImplemented

    __rmul__ = __mul__

    # Lookups ---------------------------------------------------------------------------------------

    def apply(self, table) -> EncryptedInt:
        """table(m) for the message m (one programmable bootstrap, :func:`crossfhe.tfhe.ops.pbs`, fresh noise):
        ``table`` a callable on ints, or a 1-D integer array (entry m is the value at m). Only the entries this value
        can reach (its interval) are read, and each must lie in [0, 2^p) (ParameterError otherwise: reduce it
        yourself, e.g. ``% 2**p``). The result's interval is the table's image over this value's."""
        p, size = self.bits, 1 << self.bits
        lo, hi = self.range
        if callable(table):
            vals = [table(m) for m in range(lo, hi + 1)]
        else:
            arr = np.asarray(table)
            if arr.ndim != 1 or arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == object):
                raise TypeError(f"apply takes a callable on ints or a 1-D integer array, got {type(table).__name__} "
                                f"of shape {arr.shape} and dtype {arr.dtype}")
            if arr.shape[0] <= hi:
                raise ParameterError(f"apply: this value may reach {hi}, but the table has {arr.shape[0]} entries; it "
                                     f"must cover [{lo}, {hi}] (at most {size} entries)")
            vals = arr[lo: hi + 1].tolist()
        for m, v in enumerate(vals, start=lo):
            if not _is_int(v):
                raise TypeError(f"apply: the table's value at {m} is {v!r} ({type(v).__name__}), not an int")
            if not 0 <= v < size:
                raise ParameterError(f"apply: the table's value at {m} is {v}, outside the {p}-bit message space "
                                     f"[0, {size - 1}]; reduce it (e.g. % {size}) if wrapping is what you mean")
        full = np.zeros(size, dtype=np.int64)
        full[lo: hi + 1] = vals
        ct = ops.pbs(self.ctx.server_key, self.ct, full)
        return self._result(ct, Bound.source(min(vals), max(vals)), "x.apply(table)")

    def _compare(self, other, op: str) -> EncryptedInt:
        other = _scalar(other)
        if _is_int(other):
            c = int(other)
            test = {"<": lambda v: v < c, "<=": lambda v: v <= c, ">": lambda v: v > c, ">=": lambda v: v >= c}[op]
            return self.apply(lambda v: int(test(v)))
        if not isinstance(other, EncryptedInt):
            return NotImplemented
        if op in (">", ">="):
            return other._compare(self, {">": "<", ">=": "<="}[op])
        what = f"x {op} y"
        self._pair(other, what)
        diff = self.bound + other.bound.scaled(-1)
        shift = -diff.lo  # x - y + shift lies in [0, span]
        span = diff.hi - diff.lo
        if span >= 1 << self.bits:
            raise ParameterError(
                f"{what}: x - y spans [{diff.lo}, {diff.hi}], more values than the {self.bits}-bit message space "
                f"holds, so one lookup cannot compare them; encrypt with fewer bits (at most {self.bits - 1} each) or "
                "reduce the operands with .apply(...) first")
        d = self._result(ops.add_const(self.ctx.params, ops.sub(self.ct, other.ct), shift), diff + shift, what, other)
        return d.apply((lambda v: int(v < shift)) if op == "<" else (lambda v: int(v <= shift)))

    def __lt__(self, other):
        return self._compare(other, "<")

    def __le__(self, other):
        return self._compare(other, "<=")

    def __gt__(self, other):
        return self._compare(other, ">")

    def __ge__(self, other):
        return self._compare(other, ">=")


# crossfhe.io.dumps / loads take these objects (io cannot import the api: the api registers them).
register_type(TFHEPublicContext, tio.KIND_SERVER_KEY, lambda c, params: c.serialize(), params_of=lambda c: c.params)
register_type(EncryptedInt, KIND_INTEGER, lambda x, params: x.serialize(), params_of=lambda x: x.ctx.params)
register_kind(KIND_INTEGER, lambda blob, params, context: EncryptedInt.load(context, blob), params=Params,
              context="an encrypted TFHE integer: load it with crossfhe.EncryptedInt.load(ctx, blob) or "
                      "crossfhe.io.loads(blob, context=ctx), ctx the TFHEContext or TFHEPublicContext it belongs to")

__all__ = ["KIND_INTEGER", "Bound", "EncryptedInt", "TFHEContext", "TFHEPublicContext", "noise_budget"]
