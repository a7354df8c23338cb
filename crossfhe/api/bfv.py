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

import numbers
from dataclasses import dataclass

import jax
import numpy as np

from crossfhe.api import eager
from crossfhe.api._owner import KeyOwned
from crossfhe.api._owner import same_keys as _same_keys
from crossfhe.api._owner import set_owner as _set_owner
from crossfhe.api.bfv_lower import SCHEME
from crossfhe.api.context import Context, PublicContext, prepare_create
from crossfhe.api.ir import const_key
from crossfhe.api.trace import Value, register_value, width_of
from crossfhe.api.vector import SlotVector, is_int, scalar_operand
from crossfhe.bfv import ops
from crossfhe.bfv import ops as bfv_ops
from crossfhe.bfv.ciphertext import Ciphertext, EvaluationKeys
from crossfhe.bfv.encoder import slot_matrix
from crossfhe.bfv.params import Params
from crossfhe.core.keys import SecretKey
from crossfhe.errors import ParameterError, SerializationError
from crossfhe.io import bfv as bio
from crossfhe.io import format as fmt
from crossfhe.io.registry import register_kind, register_type
from crossfhe.kernels import as_kernel_set
from crossfhe.ring.poly import Domain, RNSPoly

_ARRAYS = (np.ndarray, jax.Array, list, tuple)

KIND_VECTOR = "bfv.vector"
"""The kind of an :class:`EncryptedIntVector` blob: the ``bfv.ciphertext`` layout (:mod:`crossfhe.io.bfv`) with
one more header field, ``vector``: ``{"length", "width", "clean"}``."""





def _ints(values, t: int, what: str) -> np.ndarray:
    """values as int64 in [0, t): integers in (-t, t), a negative v taken as t + v. TypeError for non-integers,
    ParameterError for values out of range."""
    v = np.asarray(values)
    if v.dtype == object and all(is_int(e) for e in v.reshape(-1)):
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


def _check_batching(params: Params) -> None:
    if not params.batching:
        raise ParameterError(
            f"encrypted vectors need batching: t prime with t = 1 (mod 2N = {2 * params.n}); t = {params.t} is not "
            "(use a preset of crossfhe.presets.bfv, or ParamsLiteral(plain_bits=...))")


@dataclass(frozen=True, repr=False)
class BFVPublicContext(PublicContext):
    """Parameters and evaluation keys (public key, relinearization key, Galois keys): what encrypted vectors refer
    to and what an evaluator needs. Holds no secret; safe to pickle, serialize and send."""

    params: Params
    keys: EvaluationKeys

    OWNER = "BFVContext"

    def __post_init__(self):
        if not isinstance(self.params, Params):
            raise TypeError(f"params must be bfv.Params, got {type(self.params).__name__}")
        if not isinstance(self.keys, EvaluationKeys):
            raise TypeError(f"keys must be bfv.EvaluationKeys, got {type(self.keys).__name__}")
        _check_batching(self.params)
        self._settle()

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
        return self._rotations(self.params.n // 2)

    def encrypt(self, values) -> EncryptedIntVector:
        """Encrypt 1 to N integers in (-t, t) (a 1-D vector; a negative v stands for t + v) with the public key,
        padded to a power of two ``width`` and repeated over the slots. ParameterError for scalars, empty input,
        too many values or values out of range; TypeError for non-integers."""
        v = _vector(values, self.t, "encrypt")
        length = v.shape[0]
        if length > self.slots:
            raise ParameterError(f"{length} values do not fit the {self.slots} slots of N = {self.params.n}")
        width = width_of(length)
        ct = ops.encrypt(self.keys, ops.encode(self.params, slot_matrix(v, width, self.params.n)))
        return EncryptedIntVector(ct, self, length, width)

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
class BFVContext(Context):
    """The key owner's context: the secret key and the :class:`BFVPublicContext` (``public``) that encrypted
    vectors refer to. Decrypts and measures noise budgets; refuses to be pickled (the secret key leaves the process
    only through ``crossfhe.io.save_secret_key``). Hand ``ctx.public`` (or its blob) to an evaluator."""

    public: BFVPublicContext
    secret_key: SecretKey

    SAVE_WITH = "crossfhe.io.save_secret_key(ctx.secret_key, path, params=ctx.params), and pickle or send ctx.public"
    PUBLIC, SECRET = BFVPublicContext, SecretKey

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
        progress = prepare_create("BFVContext", params, Params, insecure=insecure, progress=progress,
                                  presets="crossfhe.presets.bfv")
        _check_batching(params)
        chosen = as_kernel_set(params.kernels if kernels is None else kernels).require("BFVContext.create")
        params = params.with_kernels(chosen)
        half = params.n // 2
        wanted = {int(r) % half for r in rotations} - {0}
        wanted |= {1 << i for i in range(max(0, half.bit_length() - 1))}
        sk, ek = ops.keygen(params, rotations=sorted(wanted), row_swap=True, seed=seed, progress=progress)
        return cls(BFVPublicContext(params, ek), sk)

    def noise_budget(self, x: EncryptedIntVector) -> int:
        """The vector's invariant noise budget in bits (:func:`crossfhe.bfv.ops.noise_budget`, SEAL's): each
        product spends some; at 0 decryption may be wrong. Needs the secret key."""
        return ops.noise_budget(self.secret_key, self._own(x, "noise_budget").ct)

    def decrypt(self, x: EncryptedIntVector) -> np.ndarray:
        """The values of an encrypted vector: int64 [length] in [0, t). Raises KeyMismatchError for a vector of
        another context and ParameterError if its noise budget is exhausted (the values would be wrong)."""
        ct = self._own(x, "decrypt").ct
        if ops.noise_budget(self.secret_key, ct) <= 0:
            raise ParameterError(
                "decrypt: the noise budget of this vector is exhausted (0 bits), its values would be wrong. Use fewer "
                "products in a row, or parameters with a larger Q / t (crossfhe.presets.bfv: N8192 holds 3 products, "
                "N16384 9, N32768 20)")
        return ops.decode(ops.decrypt(self.secret_key, ct)).reshape(-1)[: x.length]



class EncryptedIntVector(KeyOwned, SlotVector):
    """An encrypted vector of ``length`` integers mod t, padded to the power of two ``width`` and repeated over the N
    slots (:mod:`crossfhe.api.vector`): concrete (``ct`` a BFV ciphertext and ``ctx`` its public context; each
    operator runs at once) or symbolic inside :func:`crossfhe.compile` (each operator recorded). ``clean`` if the
    padding slots hold zeros (:func:`~crossfhe.api.vector.padding_clean`)."""

    scheme = "bfv"
    _MASK_DTYPE = np.int64
    _EQUALITY = ("equality mod t is not a low-degree polynomial; decrypt first, or compare TFHE integers "
                 "(crossfhe.TFHEContext: ctx.encrypt(values, dtype=np.int32), then x == y)")
    _INTEGER_OPS = ("BFV values are integers mod t under + - * only; integer division, remainders, abs and bitwise "
                    "operators exist on TFHE integers (crossfhe.TFHEContext: ctx.encrypt(values, dtype=np.int32))")

    _FIELDS = ("ct", "ctx", "length", "width", "clean", "trace", "node")

    def __init__(self, ct: Ciphertext | None = None, ctx: BFVPublicContext | None = None, length: int = 1,
                 width: int = 1, clean: bool = True, *, trace=None, node: int | None = None):
        self.__dict__.update(ct=ct, ctx=ctx, length=int(length), width=int(width), clean=bool(clean), trace=trace,
                             node=node)

    @classmethod
    def symbolic(cls, trace, node: int, spec) -> EncryptedIntVector:
        """The traced value of an input node (:class:`~crossfhe.api.specs.BFVVector` ``spec``)."""
        return cls(None, None, spec.length, width_of(spec.length), True, trace=trace, node=node)

    @property
    def t(self) -> int:
        return self.ctx.t if not self.traced else None

    def __repr__(self) -> str:
        if self.traced:
            return f"EncryptedIntVector(%{self.node}, length={self.length}, traced)"
        return f"EncryptedIntVector(length={self.length}, t={self.t}, N={self.ctx.params.n})"

    # Serialization ---------------------------------------------------------------------------------

    def serialize(self) -> bytes:
        """The vector's blob (kind ``bfv.vector``: the ciphertext as :func:`crossfhe.io.bfv.dumps` stores it, with
        its key id, and the length, width and padding state); no key material. Read it back with :meth:`load`."""
        if self.traced:
            raise self._error(TypeError, "a traced value has no words to serialize; serialize the circuit's outputs")
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
        if not (fmt.is_json_int(length) and 1 <= length <= public.params.n and width == width_of(length)
                and isinstance(clean, bool)):
            raise SerializationError(f"a {KIND_VECTOR} blob's vector shape is invalid: {shape}")
        ct = bio.loads(fmt.pack(bio.KIND_CIPHERTEXT, fields, c.arrays), params=public.params, expected=Ciphertext)
        _same_keys("EncryptedIntVector.load", public.key_id, ct.key_id)
        x = cls(ct, public, length, width, clean)
        return _set_owner(x, ctx if isinstance(ctx, BFVContext) else None)

    # The primitives and their operands -------------------------------------------------------------------

    def _run(self, op: str, attrs: dict, others, consts) -> Ciphertext:
        """The ciphertext of primitive ``op`` run eagerly (:mod:`crossfhe.api.bfv_lower`)."""
        public = self.ctx
        operands = [({}, (v.ct.c0.data, v.ct.c1.data)) for v in (self, *others)]
        _, (c0, c1) = eager.run(SCHEME, public.params, public.keys, op, attrs, operands, consts=consts)
        q = public.params.q
        return Ciphertext(RNSPoly(c0, q, Domain.EVAL), RNSPoly(c1, q, Domain.EVAL), public.params, self.ct.key_id)

    def _operand(self, other, what: str):
        """An int operand taken mod t (concrete values: it must lie in (-t, t), a negative c standing for t + c);
        other operands as they are (a non-integer number: TypeError)."""
        other = scalar_operand(other)
        if isinstance(other, Value) and not isinstance(other, EncryptedIntVector):
            self._same(other, what)
        if isinstance(other, (bool, np.bool_)):
            other = int(other)
        if isinstance(other, numbers.Number) and not is_int(other):
            raise self._error(TypeError, f"{what}: BFV values are integers mod t; got the constant {other!r}")
        if is_int(other) and not self.traced:
            return int(_ints(np.array(int(other), dtype=object), self.t, what))
        return int(other) if is_int(other) else other

    def _add_scalar(self, c: int):
        if self._scalar_fills_padding():
            return self + np.full(self.length, c, dtype=np.int64)
        return self._apply("add_scalar", [], {"c": c})

    def _plain(self, other, what: str):
        """(constant key, {key: int64 [width]}, length, width, False) of a 1-D integer array operand, zero-padded."""
        v = np.asarray(other)
        if v.dtype.kind not in "iub" and v.dtype != object:
            raise self._error(TypeError, f"{what}: BFV values are integers mod t; a plaintext operand is a 1-D array "
                              f"of integers, got dtype {v.dtype}")
        if v.ndim != 1 or v.shape[0] == 0:
            raise self._error(ValueError, f"{what}: a plaintext operand is a non-empty 1-D array of integers, got "
                              f"shape {v.shape}")
        if not self.traced:
            v = _ints(v, self.t, what)
        elif v.dtype.kind == "u" and v.size and int(v.max()) > np.iinfo(np.int64).max:
            raise self._error(ValueError, f"{what}: the plaintext values must fit 64-bit signed integers")
        v = v.astype(np.int64)
        length, width = self._shape_with(v.shape[0], what)
        v = np.broadcast_to(v, (length,)) if v.shape[0] == 1 else v
        out = np.zeros(width, dtype=np.int64)
        out[:length] = v
        key = const_key(out)
        return key, {key: out}, length, width, False

    def __truediv__(self, other):
        raise self._error(TypeError, "/: BFV computes exactly with integers mod t, where division is the product by a "
                          "modular inverse: x * pow(c, -1, t) (exact when c divides the value); for real division "
                          "use CKKS (crossfhe.CKKSContext)")

    __rtruediv__ = __truediv__

    def mean(self):
        raise self._error(TypeError, "mean: BFV holds integers mod t; take the sum (x.sum(), np.sum(x)) and divide "
                          "after decryption, or use CKKS for real values")

    def _compare(self, other, op: str):
        raise self._error(TypeError, f"{op}: comparisons of BFV vectors are not polynomial; decrypt first, or compare "
                          "on TFHE integers (crossfhe.TFHEContext), or on CKKS vectors through a SchemeSwitch")

    def __gt__(self, other):
        return self._compare(other, ">")

    __ge__ = __lt__ = __le__ = __gt__

    # Slots -----------------------------------------------------------------------------------------

    def _has_rotation_key(self, offset: int) -> bool:
        return bfv_ops.rotation_element(self.ctx.params, offset) in self.ctx.keys.galois

    def _rows_rotated(self, r: int, period: int, what: str) -> EncryptedIntVector:
        """Both slot rows rotated left by r (0 < r < period), for data of ``period`` (a power of two dividing N/2):
        one key switch with the key for r or r - period, else one per set bit of r
        (:meth:`~crossfhe.api.vector.SlotVector._rotated_with_keys`)."""
        return self._rotated_with_keys(r, (r, r - period), what, f"BFVContext.create(params, rotations=[{r}])")

    def _swapped(self, what: str) -> EncryptedIntVector:
        if not self.traced and bfv_ops.row_swap_element(self.ctx.params) not in self.ctx.keys.galois:
            raise self._error(ValueError, f"{what}: the context holds no row-swap key (vectors longer than N/2 need "
                              "it); create the context with BFVContext.create, which always makes it")
        return self._apply("swap_rows", clean=False)

    def _half(self) -> int:
        return (self.ctx.params.n if not self.traced else 2**30) // 2

    def _key_switches(self, r: int) -> int:
        if self.trace is None and self.width > self._half():
            return 0  # not counted: rotations at width N add the row swap and masks
        return self._switches_for(r, (r, r - self.width))

    def _raw_rotate(self, r: int) -> EncryptedIntVector:
        """The width-periodic slots rotated left by r (0 < r < width). Up to width N/2: row rotations (key switches
        only). At width N the two rows exchange their ends: also the row swap and two 0/1 mask products."""
        half = self._half()
        if self.width <= half:
            return self._rows_rotated(r, self.width, f"rotate({r})")
        x = self
        if r >= half:  # a rotation by N/2 is the row swap
            x, r = x._swapped(f"rotate({r})"), r - half
        if r:
            rot = x._rows_rotated(r, half, f"rotate({r})")
            n = 2 * half
            keep = (np.arange(n) % half < half - r).astype(np.int64)
            x = rot * keep[: self.length] + rot._swapped(f"rotate({r})") * (1 - keep)[: self.length]
            x = x._reshaped(self.length, self.width)
        return x

    def _fold_sum(self, x: EncryptedIntVector, length: int = 1) -> EncryptedIntVector:
        """Every slot of the width period holding the sum of x's width slots: log2(width) row rotations by powers
        of two, and the row swap at width N; read as a vector of ``length`` (1: the sum)."""
        half = self._half()
        step = 1
        while step < min(x.width, half):
            x = x + x._rows_rotated(step, half, "sum")
            step *= 2
        if x.width > half:
            x = x + x._swapped("sum")
        return x._reshaped(length, 1 if length == 1 else x.width)


register_value(EncryptedIntVector)
SCHEME.value_class = BFVContext.VALUE = EncryptedIntVector


# crossfhe.io.dumps / loads take these objects (io cannot import the api: the api registers them).
register_type(BFVPublicContext, bio.KIND_EVALUATION_KEYS, lambda c, params: c.serialize(),
              params_of=lambda c: c.params)
register_type(EncryptedIntVector, KIND_VECTOR, lambda x, params: x.serialize(), params_of=lambda x: x.ctx.params)
register_kind(KIND_VECTOR, lambda blob, params, context: EncryptedIntVector.load(context, blob), params=Params,
              context="an encrypted BFV vector: load it with crossfhe.EncryptedIntVector.load(ctx, blob) or "
                      "crossfhe.io.loads(blob, context=ctx), ctx the BFVContext or BFVPublicContext it belongs to")

__all__ = ["KIND_VECTOR", "BFVContext", "BFVPublicContext", "EncryptedIntVector"]
