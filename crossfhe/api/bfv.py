"""Encrypted integer vectors on BFV: a thin facade over :mod:`crossfhe.bfv.ops` and :mod:`crossfhe.io`, with the
conventions of the CKKS facade (:mod:`crossfhe.api.ckks`).

    ctx = BFVContext.create(presets.bfv.N8192, rotations=[3])    # the key owner's context (secret key)
    x = ctx.encrypt([1, 2, 3])                                     # EncryptedIntVector: integers mod t
    y = (x * x + 5 * x - 1).rotate(1)                              # products are relinearized
    ctx.decrypt(y), y.decrypt()                                    # int64 arrays in [0, t)

Who holds what. :class:`BFVContext` is the key owner's: the secret key and a :class:`BFVPublicContext`
(parameters and evaluation keys: public material only) that vectors refer to. A vector, the public context, or
a list of them pickle and serialize without any secret; pickling a :class:`BFVContext` is refused
(:class:`~crossfhe.errors.SecretMaterialError`). A vector the key owner made (or an operation on one) remembers
its owner in this process only, so ``x.decrypt()`` works there; a vector loaded, unpickled, or made from a
public context has no owner, and ``x.decrypt()`` says to call ``ctx.decrypt(x)`` with the key owner's context.
Every ciphertext carries its key pair's id; vectors of different key pairs are refused
(:class:`~crossfhe.errors.KeyMismatchError`).

Values are integers mod the plaintext modulus t. Anything given (to ``encrypt`` or as a plain operand) must be an
integer in (-t, t); a negative v stands for t + v. Results decrypt to [0, t); for signed results take
``np.where(r > t // 2, r - t, r)``.

Vectors. The N slots form a 2 x N/2 matrix (rows of N/2, :mod:`crossfhe.bfv.encoder`); read row-major they are
N slots. ``length`` values (1 to N) are zero-padded to a power of two ``width`` and repeated over the N slots, so
slot i holds value i mod width. Operands combine like NumPy arrays of one length; a length-1 operand (or an int)
broadcasts. ``*`` of two vectors is the HPS product, relinearized; ``@`` the inner product and :meth:`sum` the
sum, both a length-1 vector; :meth:`rotate` rotates left over the padded period (zeros included), any integer
offset. Each product (by a vector, a plaintext vector or an int) costs noise budget;
:meth:`BFVContext.noise_budget` measures what is left, and :meth:`BFVContext.decrypt` refuses a vector whose
budget is exhausted rather than return wrong values.
"""

from __future__ import annotations

import dataclasses
import numbers
import operator
from dataclasses import dataclass

import jax
import numpy as np

from crossfhe import runtime
from crossfhe.api._owner import KeyOwned
from crossfhe.api._owner import same_keys as _same_keys
from crossfhe.api._owner import set_owner as _set_owner
from crossfhe.api.ckks import padding_clean
from crossfhe.bfv import ops
from crossfhe.bfv.ciphertext import Ciphertext, EvaluationKeys
from crossfhe.bfv.params import Params
from crossfhe.core.keys import SecretHolder, SecretKey
from crossfhe.errors import InsecureParametersError, ParameterError, SerializationError
from crossfhe.io import bfv as bio
from crossfhe.io import format as fmt
from crossfhe.io.registry import register_kind, register_type
from crossfhe.kernels import as_kernel_set
from crossfhe.progress import callback as progress_callback

KIND_VECTOR = "bfv.vector"
"""The kind of an :class:`EncryptedIntVector` blob: the ``bfv.ciphertext`` layout (:mod:`crossfhe.io.bfv`) with
one more header field, ``vector``: ``{"length", "width", "clean"}``."""


def _width(length: int) -> int:
    return 1 << max(0, (length - 1).bit_length())


def _is_int(x) -> bool:
    return isinstance(x, (numbers.Integral, np.integer)) and not isinstance(x, (bool, np.bool_))


def _scalar(other):
    """A 0-d array operand as the Python number it holds (it then acts as a scalar); others unchanged."""
    if isinstance(other, (np.ndarray, jax.Array, np.generic)) and np.ndim(other) == 0:
        return np.asarray(other).item()
    return other


def _ints(values, t: int, what: str) -> np.ndarray:
    """values as int64 in [0, t): integers in (-t, t), a negative v taken as t + v. TypeError for non-integers,
    ParameterError for values out of range."""
    v = np.asarray(values)
    if v.dtype == object and all(_is_int(e) for e in v.reshape(-1)):
        v = np.array([int(e) for e in v.reshape(-1)], dtype=object).reshape(v.shape)
    elif v.dtype == bool or not np.issubdtype(v.dtype, np.integer):
        raise TypeError(f"{what} takes integers (BFV computes mod t = {t}), got dtype {v.dtype}")
    if v.size:
        lo, hi = v.min(), v.max()
        if lo <= -t or hi >= t:
            raise ParameterError(
                f"{what}: values must be integers in (-t, t) = (-{t}, {t}) (a negative v stands for t + v: "
                f"arithmetic is mod t), got values in [{lo}, {hi}]; reduce them mod t first (np.mod(v, {t})) if "
                "that is what you mean, or use parameters with a larger t"
            )
    return np.asarray(np.mod(v, t)).astype(np.int64)


def _vector(values, t: int, what: str) -> np.ndarray:
    """values as a 1-D int64 vector in [0, t) of at least one value."""
    v = np.asarray(values)
    if v.ndim == 0:
        item = v.item()
        raise ParameterError(f"{what} takes a vector of integers, got the scalar {item!r}: wrap it in a list, "
                             f"[{item!r}]")
    if v.ndim != 1:
        raise ParameterError(f"{what} takes a 1-D vector of integers, got shape {v.shape} (encrypt each row)")
    if v.shape[0] == 0:
        raise ParameterError(f"{what} takes at least one value, got shape {v.shape}")
    return _ints(v, t, what)


def _slots(v: np.ndarray, width: int, n: int) -> np.ndarray:
    """v [length] zero-padded to ``width`` and repeated over the N slots (slot i holds v[i mod width])."""
    padded = np.zeros(width, dtype=np.int64)
    padded[: v.shape[0]] = v
    return np.tile(padded, n // width)


def _check_batching(params: Params) -> None:
    if not params.batching:
        raise ParameterError(
            f"encrypted vectors need batching: t prime with t = 1 (mod 2N = {2 * params.n}); t = {params.t} is not "
            "(use a preset of crossfhe.presets.bfv, or ParamsLiteral(plain_bits=...))")


@dataclass(frozen=True, repr=False)
class BFVPublicContext:
    """Parameters and evaluation keys (public key, relinearization key, Galois keys): what encrypted vectors refer
    to and what an evaluator needs. Holds no secret; safe to pickle, serialize and send."""

    params: Params
    keys: EvaluationKeys

    def __post_init__(self):
        if not isinstance(self.params, Params):
            raise TypeError(f"params must be bfv.Params, got {type(self.params).__name__}")
        if not isinstance(self.keys, EvaluationKeys):
            raise TypeError(f"keys must be bfv.EvaluationKeys, got {type(self.keys).__name__}")
        _check_batching(self.params)
        if self.params.kernels.name == "auto":  # the kernel set is chosen here, once (crossfhe.kernels)
            object.__setattr__(self, "params", self.params.with_kernels(self.params.kernels.resolve()))
        if self.keys.params != self.params:
            if self.keys.params.digest() != self.params.digest():
                raise ParameterError("the evaluation keys were made for other parameters than params")
            object.__setattr__(self, "keys", dataclasses.replace(self.keys, params=self.params))

    @property
    def key_id(self) -> str | None:
        """The key pair's identifier (:func:`crossfhe.core.keys.key_id`)."""
        return self.keys.key_id

    @property
    def t(self) -> int:
        """The plaintext modulus: values are integers mod t."""
        return self.params.t

    @property
    def slots(self) -> int:
        """N: the most values a vector holds."""
        return self.params.n

    @property
    def rotations(self) -> list[int]:
        """The row rotations r in [1, N/2) whose Galois keys (5^r mod 2N) the context holds."""
        out, element, two_n = [], 1, 2 * self.params.n
        for r in range(1, self.params.n // 2):
            element = element * 5 % two_n
            if element in self.keys.galois:
                out.append(r)
        return out

    def encrypt(self, values) -> EncryptedIntVector:
        """Encrypt 1 to N integers in (-t, t) (a 1-D vector; a negative v stands for t + v) with the public key,
        padded to a power of two ``width`` and repeated over the slots. ParameterError for scalars, empty input,
        too many values or values out of range; TypeError for non-integers."""
        v = _vector(values, self.t, "encrypt")
        length = v.shape[0]
        if length > self.slots:
            raise ParameterError(f"{length} values do not fit the {self.slots} slots of N = {self.params.n}")
        width = _width(length)
        ct = ops.encrypt(self.keys, ops.encode(self.params, _slots(v, width, self.params.n)))
        return EncryptedIntVector(ct, self, length, width)

    def decrypt(self, x) -> np.ndarray:
        raise ParameterError(
            "a public context holds no secret key and cannot decrypt: decrypt with the BFVContext that made the "
            "keys (ctx.decrypt(x)), on the key owner's side"
        )

    def serialize(self) -> bytes:
        """The context's blob: its evaluation keys' (kind ``bfv.evaluation_keys``: parameters, public,
        relinearization and Galois keys; no secret). Read it back with :meth:`load`."""
        return bio.dumps(self.keys)

    @classmethod
    def load(cls, blob, *, params: Params | None = None) -> BFVPublicContext:
        """The public context of a :meth:`serialize` blob (for ``params``, if given); every check of
        :func:`crossfhe.io.bfv.loads`."""
        keys = bio.loads(blob, params=params, expected=EvaluationKeys)
        return cls(keys.params, keys)

    def __repr__(self) -> str:
        return (f"BFVPublicContext(N={self.params.n}, t={self.t}, log2 Q={self.params.ring.log_q:.0f}, "
                f"rotations={len(self.rotations)}, key_id={self.key_id})")


@dataclass(frozen=True, repr=False)
class BFVContext(SecretHolder):
    """The key owner's context: the secret key and the :class:`BFVPublicContext` (``public``) that encrypted
    vectors refer to. Decrypts and measures noise budgets; refuses to be pickled (the secret key leaves the process
    only through ``crossfhe.io.save_secret_key``). Hand ``ctx.public`` (or its blob) to an evaluator."""

    public: BFVPublicContext
    secret_key: SecretKey

    SAVE_WITH = "crossfhe.io.save_secret_key(ctx.secret_key, path, params=ctx.params), and pickle or send ctx.public"

    def __post_init__(self):
        if not isinstance(self.public, BFVPublicContext):
            raise TypeError(f"public must be a BFVPublicContext, got {type(self.public).__name__}")
        if not isinstance(self.secret_key, SecretKey):
            raise TypeError(f"secret_key must be a SecretKey, got {type(self.secret_key).__name__}")
        _same_keys("BFVContext", self.public.key_id, self.secret_key.key_id)

    @classmethod
    def create(cls, params: Params, *, rotations=(), seed: bytes | None = None, kernels=None,
               insecure: bool = False, progress="auto") -> BFVContext:
        """Generate keys for ``params`` (a batching set, e.g. ``crossfhe.presets.bfv.N8192``). ``rotations``: slot
        offsets (any sign) to hold exact Galois keys for; the powers of two 1 ... N/4 and the row swap are always
        added (``sum()`` needs them, and :meth:`EncryptedIntVector.rotate` composes any other offset from them).
        ``seed``: 32 bytes for reproducible keys (tests). ``kernels``: the kernel set (as for
        :meth:`crossfhe.api.ckks.CKKSContext.create`). Parameters marked insecure (``crossfhe.testing``) are refused
        unless ``insecure=True``. ``progress`` and the compilation cache: as for
        :meth:`crossfhe.api.ckks.CKKSContext.create`."""
        if not isinstance(params, Params):
            raise TypeError(f"params must be bfv.Params, got {type(params).__name__}")
        if params.ring.insecure and not insecure:
            raise InsecureParametersError(
                f"{params!r} is marked insecure (below the 128-bit bound): BFVContext.create(params, insecure=True) "
                "to use it anyway (tests only), or take a preset of crossfhe.presets.bfv")
        _check_batching(params)
        progress = progress_callback(progress)
        runtime.enable_compilation_cache()
        chosen = as_kernel_set(params.kernels if kernels is None else kernels).resolve()
        params = params.with_kernels(chosen)
        half = params.n // 2
        wanted = {int(r) % half for r in rotations} - {0}
        wanted |= {1 << i for i in range(max(0, half.bit_length() - 1))}
        sk, ek = ops.keygen(params, rotations=sorted(wanted), row_swap=True, seed=seed, progress=progress)
        return cls(BFVPublicContext(params, ek), sk)

    @property
    def params(self) -> Params:
        return self.public.params

    @property
    def keys(self) -> EvaluationKeys:
        return self.public.keys

    @property
    def key_id(self) -> str | None:
        return self.public.key_id

    def encrypt(self, values) -> EncryptedIntVector:
        """:meth:`BFVPublicContext.encrypt`; the vector (and what is computed from it) can then :meth:`decrypt
        <EncryptedIntVector.decrypt>` itself in this process."""
        return _set_owner(self.public.encrypt(values), self)

    def _check(self, x, what: str) -> EncryptedIntVector:
        if not isinstance(x, EncryptedIntVector):
            raise TypeError(f"{what} takes an EncryptedIntVector, got {type(x).__name__}")
        _same_keys(what, self.key_id, x.ct.key_id)
        return x

    def noise_budget(self, x: EncryptedIntVector) -> int:
        """The vector's invariant noise budget in bits (:func:`crossfhe.bfv.ops.noise_budget`, SEAL's): each
        product spends some; at 0 decryption may be wrong. Needs the secret key."""
        return ops.noise_budget(self.secret_key, self._check(x, "noise_budget").ct)

    def decrypt(self, x: EncryptedIntVector) -> np.ndarray:
        """The values of an encrypted vector: int64 [length] in [0, t). Raises KeyMismatchError for a vector of
        another context and ParameterError if its noise budget is exhausted (the values would be wrong)."""
        ct = self._check(x, "decrypt").ct
        if ops.noise_budget(self.secret_key, ct) <= 0:
            raise ParameterError(
                "decrypt: the noise budget of this vector is exhausted (0 bits), its values would be wrong. Use fewer "
                "products in a row, or parameters with a larger Q / t (crossfhe.presets.bfv: N8192 holds 3 products, "
                "N16384 9, N32768 20)")
        return ops.decode(ops.decrypt(self.secret_key, ct)).reshape(-1)[: x.length]

    def __repr__(self) -> str:
        return f"BFVContext(with secret key, {self.public!r})"


@dataclass(frozen=True, repr=False, eq=False)
class EncryptedIntVector(KeyOwned):
    """A BFV ciphertext with its public context: ``length`` integers mod t, padded to the power of two ``width``
    and repeated over the N slots; ``clean`` if the padding slots hold zeros (:func:`~crossfhe.api.ckks.padding_clean`:
    :meth:`sum` and :meth:`rotate` clear them first where they do not, a plaintext product)."""

    ct: Ciphertext
    ctx: BFVPublicContext
    length: int = 1
    width: int = 1
    clean: bool = True

    __array_ufunc__ = None  # a NumPy operand on the left defers to the reflected operators here

    @property
    def t(self) -> int:
        return self.ctx.t

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return f"EncryptedIntVector(length={self.length}, t={self.t}, N={self.ctx.params.n})"

    def __bool__(self):
        raise TypeError("an encrypted vector has no truth value: decrypt it first")

    # Key owner -------------------------------------------------------------------------------------

    # Serialization ---------------------------------------------------------------------------------

    def serialize(self) -> bytes:
        """The vector's blob (kind ``bfv.vector``: the ciphertext as :func:`crossfhe.io.bfv.dumps` stores it, with
        its key id, and the length, width and padding state); no key material. Read it back with :meth:`load`."""
        c = fmt.unpack(bio.dumps(self.ct))
        shape = {"length": self.length, "width": self.width, "clean": bool(self.clean)}
        return fmt.pack(KIND_VECTOR, {**c.fields, "vector": shape}, c.arrays)

    @classmethod
    def load(cls, ctx, blob) -> EncryptedIntVector:
        """The vector of a :meth:`serialize` blob, attached to ``ctx`` (a BFVContext or BFVPublicContext of the same
        parameters and keys: SerializationError or KeyMismatchError otherwise); every check of
        :func:`crossfhe.io.bfv.loads`. Loaded with the key owner's context, the vector can decrypt itself."""
        public = ctx.public if isinstance(ctx, BFVContext) else ctx
        if not isinstance(public, BFVPublicContext):
            raise TypeError(f"load takes a BFVContext or BFVPublicContext, got {type(ctx).__name__}")
        c = fmt.unpack(blob, expected_kind=KIND_VECTOR)
        fields = dict(c.fields)
        shape = fields.pop("vector", None)
        if not isinstance(shape, dict) or set(shape) != {"length", "width", "clean"}:
            raise SerializationError(f"a {KIND_VECTOR} blob's header must hold vector: {{length, width, clean}}")
        length, width, clean = shape["length"], shape["width"], shape["clean"]
        if not (fmt.is_json_int(length) and 1 <= length <= public.params.n and width == _width(length)
                and isinstance(clean, bool)):
            raise SerializationError(f"a {KIND_VECTOR} blob's vector shape is invalid: {shape}")
        ct = bio.loads(fmt.pack(bio.KIND_CIPHERTEXT, fields, c.arrays), params=public.params, expected=Ciphertext)
        _same_keys("EncryptedIntVector.load", public.key_id, ct.key_id)
        x = cls(ct, public, length, width, clean)
        return _set_owner(x, ctx if isinstance(ctx, BFVContext) else None)

    # Operands --------------------------------------------------------------------------------------

    def _wrap(self, ct: Ciphertext, length: int, width: int, op: str = "same",
              other: EncryptedIntVector | None = None) -> EncryptedIntVector:
        b = None if other is None else (other.length, other.clean)
        clean = padding_clean(op, length, width, (self.length, self.clean), b)
        owner = self.__dict__.get("_owner") or (other.__dict__.get("_owner") if other is not None else None)
        return _set_owner(EncryptedIntVector(ct, self.ctx, length, width, clean), owner)

    def _masked(self) -> EncryptedIntVector:
        """This vector with zeros in its padding slots (unchanged if they hold zeros already)."""
        if self.clean or self.length == self.width:
            return self
        return self * np.ones(self.length, dtype=np.int64)

    def _shape_with(self, length: int, what: str) -> tuple[int, int]:
        """(length, width) of the result of combining with an operand of ``length`` values, NumPy-style."""
        if length == self.length or length == 1:
            return self.length, self.width
        if self.length == 1:
            return length, _width(length)
        raise ParameterError(
            f"{what}: operands of lengths {self.length} and {length} cannot be combined (NumPy would not broadcast "
            "them either); use vectors of one length, or a single value"
        )

    def _vector(self, other: EncryptedIntVector, what: str) -> tuple[int, int]:
        _same_keys(what, self.ct.key_id, other.ct.key_id)
        return self._shape_with(other.length, what)

    def _plain(self, other, what: str):
        """(plaintext, length, width) of an integer vector operand, zero-padded and repeated like this vector."""
        v = _vector(other, self.t, what)
        length, width = self._shape_with(v.shape[0], what)
        if v.shape[0] == 1:
            v = np.broadcast_to(v, (length,))
        return ops.encode(self.ctx.params, _slots(v, width, self.ctx.params.n)), length, width

    def _int(self, c, what: str) -> int:
        return int(_ints(np.array(int(c), dtype=object), self.t, what))

    # Arithmetic ------------------------------------------------------------------------------------

    def __add__(self, other):
        other = _scalar(other)
        if isinstance(other, EncryptedIntVector):
            length, width = self._vector(other, "add")
            return self._wrap(ops.add(self.ct, other.ct), length, width, "add", other)
        if _is_int(other):
            c = self._int(other, "add")
            if self.clean and self.length < self.width:  # as NumPy's padded vector: the padding stays zero
                return self + np.full(self.length, c, dtype=np.int64)
            return self._wrap(ops.add_scalar(self.ct, c), self.length, self.width)
        if isinstance(other, (np.ndarray, jax.Array, list, tuple)):
            pt, length, width = self._plain(other, "add")
            return self._wrap(ops.add_plain(self.ct, pt), length, width)
        return NotImplemented

    __radd__ = __add__

    def __neg__(self):
        return self._wrap(ops.negate(self.ct), self.length, self.width)

    def __sub__(self, other):
        other = _scalar(other)
        if isinstance(other, EncryptedIntVector):
            length, width = self._vector(other, "sub")
            return self._wrap(ops.sub(self.ct, other.ct), length, width, "sub", other)
        if _is_int(other):
            return self + (self.t - self._int(other, "sub")) % self.t
        if isinstance(other, (np.ndarray, jax.Array, list, tuple)):
            pt, length, width = self._plain(other, "sub")
            return self._wrap(ops.sub_plain(self.ct, pt), length, width)
        return NotImplemented

    def __rsub__(self, other):
        other = _scalar(other)
        if _is_int(other) or isinstance(other, (np.ndarray, jax.Array, list, tuple)):
            return (-self) + other
        return NotImplemented

    def __mul__(self, other):
        other = _scalar(other)
        if isinstance(other, EncryptedIntVector):
            length, width = self._vector(other, "mul")
            return self._wrap(ops.mul(self.ct, other.ct, self.ctx.keys), length, width, "mul", other)
        if _is_int(other):
            return self._wrap(ops.mul_scalar(self.ct, self._int(other, "mul")), self.length, self.width)
        if isinstance(other, (np.ndarray, jax.Array, list, tuple)):
            pt, length, width = self._plain(other, "mul")
            return self._wrap(ops.mul_plain(self.ct, pt), length, width, "mul_plain")
        return NotImplemented

    __rmul__ = __mul__

    def __matmul__(self, other):
        """Inner product sum_i self_i other_i mod t, a length-1 vector (equal lengths)."""
        if not isinstance(other, (EncryptedIntVector, np.ndarray, jax.Array, list, tuple)):
            return NotImplemented
        length = other.length if isinstance(other, EncryptedIntVector) else np.shape(other)[-1]
        if length != self.length:
            raise ParameterError(f"@: operands of lengths {self.length} and {length}: an inner product needs equal "
                                 "lengths")
        return (self * other).sum()

    def __rmatmul__(self, other):
        return self.__matmul__(other)

    # Slots -----------------------------------------------------------------------------------------

    def _rows_rotated(self, ct: Ciphertext, k: int, period: int, what: str) -> Ciphertext:
        """Both slot rows rotated left by k, for data of ``period`` (a power of two dividing N/2): one key switch
        with the key for k (or k mod period, or that minus period), else one per set bit of k mod period."""
        params, keys = self.ctx.params, self.ctx.keys
        r = k % period
        for offset in (k, r, r - period):
            if ops.rotation_element(params, offset) in keys.galois:
                return ops.rotate_rows(ct, offset, keys)
        steps = [1 << i for i in range(r.bit_length()) if r >> i & 1]
        missing = [s for s in steps if ops.rotation_element(params, s) not in keys.galois]
        if missing:
            raise ParameterError(
                f"{what}: the context holds no rotation key for {k} (or {r} or {r - period}) nor the power-of-two keys "
                f"{missing} to compose it; create the context with BFVContext.create(params, rotations=[{k}])")
        for s in steps:
            ct = ops.rotate_rows(ct, s, keys)
        return ct

    def _swapped(self, ct: Ciphertext, what: str) -> Ciphertext:
        if ops.row_swap_element(self.ctx.params) not in self.ctx.keys.galois:
            raise ParameterError(f"{what}: the context holds no row-swap key (vectors longer than N/2 need it); create "
                                 "the context with BFVContext.create, which always makes it")
        return ops.swap_rows(ct, self.ctx.keys)

    def rotate(self, k: int) -> EncryptedIntVector:
        """The values rotated left by k over the width-periodic slots (slot i holds slot (i + k) mod width), any
        integer k. Up to width N/2: key switches only (:meth:`_rows_rotated`). At width N the two rows exchange
        their ends: also the row swap and two plaintext products by 0/1 masks (noise budget)."""
        try:
            k = operator.index(k)
        except TypeError:
            raise TypeError(f"rotate takes an integer offset, got {type(k).__name__}") from None
        r = k % self.width
        if r == 0:
            return self
        x = self._masked()  # values the padding holds would wrap into view
        half = self.ctx.params.n // 2
        if self.width <= half:
            return x._wrap(self._rows_rotated(x.ct, k, self.width, f"rotate({k})"), self.length, self.width, "rotate")
        ct = x.ct
        if r >= half:  # a rotation by N/2 is the row swap
            ct, r = self._swapped(ct, f"rotate({k})"), r - half
        if r:
            rot = self._rows_rotated(ct, r, half, f"rotate({k})")
            keep = (np.arange(self.ctx.params.n) % half < half - r).astype(np.int64)
            params = self.ctx.params
            ct = ops.add(ops.mul_plain(rot, ops.encode(params, keep)),
                         ops.mul_plain(self._swapped(rot, f"rotate({k})"), ops.encode(params, 1 - keep)))
        return x._wrap(ct, self.length, self.width, "rotate")

    def sum(self) -> EncryptedIntVector:
        """The sum of the values mod t, a length-1 vector (every slot holds it): log2(width) rotations by powers of
        two, and the row swap at width N; where the padding holds something it is cleared first."""
        x = self._masked()
        half = self.ctx.params.n // 2
        ct, step = x.ct, 1
        while step < min(self.width, half):
            ct = ops.add(ct, self._rows_rotated(ct, step, half, "sum"))
            step *= 2
        if self.width > half:
            ct = ops.add(ct, self._swapped(ct, "sum"))
        return _set_owner(EncryptedIntVector(ct, self.ctx, 1, 1, True), self.__dict__.get("_owner"))


# crossfhe.io.dumps / loads take these objects (io cannot import the api: the api registers them).
register_type(BFVPublicContext, bio.KIND_EVALUATION_KEYS, lambda c, params: c.serialize(),
              params_of=lambda c: c.params)
register_type(EncryptedIntVector, KIND_VECTOR, lambda x, params: x.serialize(), params_of=lambda x: x.ctx.params)
register_kind(KIND_VECTOR, lambda blob, params, context: EncryptedIntVector.load(context, blob), params=Params,
              context="an encrypted BFV vector: load it with crossfhe.EncryptedIntVector.load(ctx, blob) or "
                      "crossfhe.io.loads(blob, context=ctx), ctx the BFVContext or BFVPublicContext it belongs to")

__all__ = ["KIND_VECTOR", "BFVContext", "BFVPublicContext", "EncryptedIntVector"]
