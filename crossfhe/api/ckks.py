"""Encrypted NumPy-like vectors on CKKS: a thin facade over :mod:`crossfhe.ckks.ops` and :mod:`crossfhe.io`.

    ctx = CKKSContext.create(presets.N14_L7, rotations=[1, 2])    # the key owner's context (secret key)
    x = ctx.encrypt(np.array([...]))                               # EncryptedVector
    y = (x * x + 0.5 * x).rotate(-1)                               # products are relinearized and rescaled
    ctx.decrypt(y)                                                 # np.ndarray (real if the input was real)

Who holds what. :class:`CKKSContext` is the key owner's object: the secret key and a
:class:`CKKSPublicContext` (parameters and evaluation keys: public material only). Encrypted vectors refer
to the public context, never to the owner's, so a vector, a list of them or the public context can be
pickled or sent to a server and carry no secret; pickling a :class:`CKKSContext` is refused
(:class:`~crossfhe.errors.SecretMaterialError`). Blobs: :meth:`EncryptedVector.serialize` /
:meth:`EncryptedVector.load`, :meth:`CKKSPublicContext.serialize` / :meth:`CKKSPublicContext.load`, and
``crossfhe.io.save_secret_key`` for the secret key; ``crossfhe.io.dumps`` / ``crossfhe.io.loads`` take vectors
(``context=``) and public contexts too. Every ciphertext carries its key pair's id; vectors and
contexts of different key pairs are refused (:class:`~crossfhe.errors.KeyMismatchError`). A vector the key owner
made (or computed from one) remembers its owner in this process only, never in a pickle or a blob, so
``x.decrypt()`` works there; elsewhere it says to call ``ctx.decrypt(x)`` with the key owner's context.

Vectors. ``length`` values are zero-padded to a power-of-two ``width`` and replicated over the N/2 slots, so
slot i holds value i mod width. Operands combine like NumPy arrays of the same length; a length-1 operand
(or a scalar) broadcasts. Products rescale right away (a level per product); ``@`` is the inner product
(every slot holds it); ``rotate(k)`` rotates the width-periodic slots left by k, any integer k.
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
from crossfhe.ckks import ops
from crossfhe.ckks.ciphertext import Ciphertext, EvaluationKeys
from crossfhe.ckks.params import Params
from crossfhe.core.keys import SecretHolder, SecretKey
from crossfhe.errors import InsecureParametersError, ParameterError
from crossfhe.io import ckks as io
from crossfhe.io import format as fmt
from crossfhe.io.registry import register_kind, register_type
from crossfhe.kernels import as_kernel_set
from crossfhe.progress import callback as progress_callback

_ARRAYS = (np.ndarray, jax.Array, list, tuple)


def _width(length: int) -> int:
    return 1 << max(0, (length - 1).bit_length())


def _operand(other):
    """A 0-d array operand as the Python number it holds (it then acts as a scalar); others unchanged."""
    if isinstance(other, (np.ndarray, jax.Array, np.generic)) and np.ndim(other) == 0:
        return np.asarray(other).item()
    return other


def _is_complex(x) -> bool:
    return bool(np.iscomplexobj(x))


def _padded(v: np.ndarray, width: int) -> np.ndarray:
    """v [..., length] zero-padded to [..., width] (float64 or complex128)."""
    out = np.zeros(v.shape[:-1] + (width,), dtype=np.result_type(v, np.float64))
    out[..., : v.shape[-1]] = v
    return out


def _values(values, what: str) -> np.ndarray:
    """values as a numeric array with a value axis (shape [..., length], length >= 1)."""
    v = np.asarray(values)
    if not (np.issubdtype(v.dtype, np.number) or v.dtype == bool):
        raise TypeError(f"{what} takes real or complex numbers, got an array of dtype {v.dtype}")
    if v.ndim == 0:
        raise ParameterError(
            f"{what} takes a vector of values (shape [..., length]), got the scalar {v.item()!r}: wrap it in a "
            f"list, [{v.item()!r}]"
        )
    if v.shape[-1] == 0:
        raise ParameterError(f"{what} takes at least one value, got shape {v.shape}")
    return v


def padding_clean(op: str, length: int, width: int, a: tuple[int, bool], b: tuple[int, bool] | None = None) -> bool:
    """Whether the padding slots (``length`` to ``width``) of the result of ``op`` hold zeros, from its operands'
    (length, clean): the NumPy view of a zero-padded vector holds only where they do. A broadcast single value and a
    rotation fill the padding; a product with a zero-padded plaintext or a clean operand clears it."""
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


@dataclass(frozen=True, repr=False)
class CKKSPublicContext:
    """Parameters and evaluation keys (public key, relinearization and Galois keys): what encrypted vectors
    refer to and what an evaluator needs. Holds no secret; safe to pickle, serialize and send."""

    params: Params
    keys: EvaluationKeys
    bootstrap_keys: object = None
    """The bootstrapping keys (:class:`crossfhe.ckks.bootstrap.Keys`, public material), or None."""

    def __post_init__(self):
        if not isinstance(self.params, Params):
            raise TypeError(f"params must be ckks.Params, got {type(self.params).__name__}")
        if not isinstance(self.keys, EvaluationKeys):
            raise TypeError(f"keys must be ckks.EvaluationKeys, got {type(self.keys).__name__}")
        if self.bootstrap_keys is not None:
            from crossfhe.ckks import bootstrap as bt

            if not isinstance(self.bootstrap_keys, bt.Keys):
                raise TypeError(f"bootstrap_keys must be ckks.bootstrap.Keys, got {type(self.bootstrap_keys).__name__}")
            _same_keys("CKKSPublicContext", self.keys.key_id, self.bootstrap_keys.key_id)
        if self.params.kernels.name == "auto":  # the kernel set is chosen here, once (crossfhe.kernels)
            object.__setattr__(self, "params", self.params.with_kernels(self.params.kernels.resolve()))
        if self.keys.params != self.params:
            if self.keys.params.digest() != self.params.digest():
                raise ParameterError("the evaluation keys were made for other parameters than params")
            # the same parameters on another kernel set: the keys' words serve any set, and this context's runs
            object.__setattr__(self, "keys", dataclasses.replace(self.keys, params=self.params))

    @property
    def key_id(self) -> str | None:
        """The key pair's identifier (:func:`crossfhe.core.keys.key_id`)."""
        return self.keys.key_id

    @property
    def rotations(self) -> list[int]:
        """The slot rotations r in [1, N/2) whose Galois keys (5^r mod 2N) the context holds."""
        out, element, two_n = [], 1, 2 * self.params.n
        for r in range(1, self.params.slots):
            element = element * 5 % two_n
            if element in self.keys.galois:
                out.append(r)
        return out

    def encrypt(self, values) -> EncryptedVector:
        """Encrypt 1 to N/2 values (shape [..., length]) with the public key; padded to a power of two
        ``width`` and replicated over the slots. Values whose encoding (plus the fresh noise) would not fit
        the modulus are refused (ParameterError), as are scalars, empty and non-numeric input."""
        v = _values(values, "encrypt")
        length = v.shape[-1]
        if length > self.params.slots:
            raise ParameterError(f"{length} values do not fit the {self.params.slots} slots of N = {self.params.n}")
        width = _width(length)
        ct = ops.encrypt(self.keys, ops.encode(self.params, _padded(v, width)))
        return EncryptedVector(ct, self, _is_complex(v), length, width)

    def decrypt(self, x) -> np.ndarray:
        raise ParameterError(
            "a public context holds no secret key and cannot decrypt: decrypt with the CKKSContext that made the "
            "keys (ctx.decrypt(x)), on the key owner's side"
        )

    def serialize(self) -> bytes:
        """The context's blob (kind ``ckks.public_context``, laid out as its evaluation keys: parameters,
        public, relinearization and Galois keys; no secret); also ``crossfhe.io.dumps(ctx)``. A context with
        bootstrapping keys writes ``ckks.bootstrap_keys`` (the same layout plus the encapsulation keys)."""
        if self.bootstrap_keys is not None:
            return io.dumps_bootstrap_keys(self.bootstrap_keys)
        return io.dumps_public_context(self.keys)

    @classmethod
    def load(cls, blob, *, params: Params | None = None) -> CKKSPublicContext:
        """The public context of a :meth:`serialize` blob or of its evaluation keys' blob (for ``params``, if
        given); every check of :func:`crossfhe.io.ckks.loads`."""
        if fmt.peek_kind(blob) == io.KIND_BOOTSTRAP_KEYS:
            boot = io.loads_bootstrap_keys(blob, params=params)
            return cls(boot.params, boot.evaluation, boot)
        keys = io.loads_public_context(blob, params=params)
        return cls(keys.params, keys)

    def __repr__(self) -> str:
        return (f"CKKSPublicContext(N={self.params.n}, levels={self.params.levels}, scale=2^{self.params.log_scale}, "
                f"rotations={len(self.rotations)}, key_id={self.key_id})")


@dataclass(frozen=True, repr=False)
class CKKSContext(SecretHolder):
    """The key owner's context: the secret key and the :class:`CKKSPublicContext` (``public``) that
    encrypted vectors refer to. Decrypts; refuses to be pickled (the secret key leaves the process only
    through ``crossfhe.io.save_secret_key``). Hand ``ctx.public`` (or its :meth:`~CKKSPublicContext.serialize`
    blob) to an evaluator."""

    public: CKKSPublicContext
    secret_key: SecretKey

    SAVE_WITH = "crossfhe.io.save_secret_key(ctx.secret_key, path, params=ctx.params), and pickle or send ctx.public"

    def __post_init__(self):
        if not isinstance(self.public, CKKSPublicContext):
            raise TypeError(f"public must be a CKKSPublicContext, got {type(self.public).__name__}")
        if not isinstance(self.secret_key, SecretKey):
            raise TypeError(f"secret_key must be a SecretKey, got {type(self.secret_key).__name__}")
        _same_keys("CKKSContext", self.public.key_id, self.secret_key.key_id)

    @classmethod
    def create(cls, params: Params, *, rotations=(), conjugation: bool = False, seed: bytes | None = None,
               kernels=None, bootstrap: bool = False, insecure: bool = False, progress="auto"):
        """Generate keys for ``params``; ``rotations``: slot offsets (any sign) to hold exact Galois keys for.
        The powers of two 1 ... N/4 are always added: ``sum()`` needs them, and :meth:`EncryptedVector.rotate`
        composes any other rotation from them. ``seed``: 32 bytes for reproducible keys (tests).

        ``bootstrap``: also make the bootstrapping keys (:func:`crossfhe.ckks.bootstrap.keygen`; the parameters
        must reserve bootstrapping levels, as the presets in ``crossfhe.ckks.presets.BOOTSTRAP`` do, else
        ParameterError), so that :meth:`EncryptedVector.bootstrap` works. ``progress``: :mod:`crossfhe.progress`, one
        step per key (at N 2^16 the bootstrapping keys are about 40, a few seconds each); the default draws a bar
        once key generation has taken 2 s. Parameters marked insecure (``crossfhe.testing``) are refused unless
        ``insecure=True``. Creating a context turns on JAX's persistent compilation cache
        (:func:`crossfhe.runtime.enable_compilation_cache`: a cache of your own wins; ``CROSSFHE_JAX_CACHE=0`` opts
        out), so a later process loads what this one compiled.

        ``kernels``: the kernel set every operation of this context runs on (``crossfhe.kernels.VECTOR``,
        ``NATIVE``, ``MATRIX``, or their names); by default the parameters' own, where AUTO is resolved here, once,
        by :func:`crossfhe.kernels.default_kernels` (NATIVE on a CPU with the native build, else VECTOR). The
        choice never changes a result, only its speed."""
        if not isinstance(params, Params):
            raise TypeError(f"params must be ckks.Params, got {type(params).__name__}")
        if params.ring.insecure and not insecure:
            raise InsecureParametersError(
                f"{params!r} is marked insecure (below the 128-bit bound): CKKSContext.create(params, insecure=True) "
                "to use it anyway (tests only), or take a preset of crossfhe.presets.ckks")
        progress = progress_callback(progress)
        runtime.enable_compilation_cache()
        chosen = as_kernel_set(params.kernels if kernels is None else kernels).resolve()
        params = params.with_kernels(chosen)
        wanted = {int(r) % params.slots for r in rotations} - {0}  # 0: the identity, no key
        rotations = sorted(wanted | set(ops.power_of_two_rotations(params)))
        boot = None
        if bootstrap:
            from crossfhe.ckks import bootstrap as bt

            config = bt.config_for(params)  # refuses a set that cannot bootstrap before any key is made
        sk, ek = ops.keygen(params, rotations=rotations, conjugation=conjugation, seed=seed, progress=progress)
        if bootstrap:
            sub = None if seed is None else bytes(b ^ 0x5A for b in seed)
            boot = bt.keygen(sk, ek, config, seed=sub, progress=progress)
            ek = boot.evaluation
        return cls(CKKSPublicContext(params, ek, boot), sk)

    @property
    def params(self) -> Params:
        return self.public.params

    @property
    def keys(self) -> EvaluationKeys:
        return self.public.keys

    @property
    def key_id(self) -> str | None:
        return self.public.key_id

    def encrypt(self, values) -> EncryptedVector:
        """:meth:`CKKSPublicContext.encrypt` (the vector refers to ``self.public``); the vector (and what is computed
        from it) can then :meth:`decrypt <EncryptedVector.decrypt>` itself in this process."""
        return _set_owner(self.public.encrypt(values), self)

    def decrypt(self, x: EncryptedVector) -> np.ndarray:
        """The values of an encrypted vector: float64 [..., length] (complex128 if it holds complex values).
        Raises KeyMismatchError for a vector of another context."""
        if not isinstance(x, EncryptedVector):
            raise TypeError(f"decrypt takes an EncryptedVector, got {type(x).__name__}")
        _same_keys("decrypt", self.key_id, x.ct.key_id)
        z = ops.decode(ops.decrypt(self.secret_key, x.ct))[..., : x.length]
        return z if x.complex else z.real

    def __repr__(self) -> str:
        return f"CKKSContext(with secret key, {self.public!r})"


@dataclass(frozen=True, repr=False)
class EncryptedVector(KeyOwned):
    """A ciphertext with its public context: ``length`` values padded to the power of two ``width``
    (replicated over the slots), ``complex`` if they are complex."""

    ct: Ciphertext
    ctx: CKKSPublicContext
    complex: bool = False
    length: int = 1
    width: int = 1
    clean: bool = True
    """Whether the padding slots hold zeros (:func:`padding_clean`); :meth:`sum` and :meth:`rotate` clear them first
    where they do not (a product with a 0/1 plaintext: one level)."""

    @property
    def level(self) -> int:
        return self.ct.level

    @property
    def scale(self) -> float:
        return self.ct.scale

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        kind = ", complex" if self.complex else ""
        return (f"EncryptedVector(length={self.length}{kind}, level={self.level}/{self.ctx.params.levels}, "
                f"scale=2^{np.log2(self.scale):.1f}, slots={self.ctx.params.slots})")

    # Key owner -------------------------------------------------------------------------------------

    # Serialization ---------------------------------------------------------------------------------

    def serialize(self) -> bytes:
        """The vector's blob (kind ``ckks.vector``: the ciphertext, its key id, length, width, complex);
        no key material. Read it back with :meth:`load` and the public context."""
        return io.dumps_vector(self.ct, length=self.length, width=self.width, complex=self.complex, clean=self.clean)

    @classmethod
    def load(cls, ctx, blob) -> EncryptedVector:
        """The vector of a :meth:`serialize` blob, attached to ``ctx`` (a CKKSContext or CKKSPublicContext of
        the same parameters and keys: SerializationError or KeyMismatchError otherwise)."""
        public = ctx.public if isinstance(ctx, CKKSContext) else ctx
        if not isinstance(public, CKKSPublicContext):
            raise TypeError(f"load takes a CKKSContext or CKKSPublicContext, got {type(ctx).__name__}")
        ct, shape = io.loads_vector(blob, params=public.params)
        _same_keys("EncryptedVector.load", public.key_id, ct.key_id)
        x = cls(ct, public, shape["complex"], shape["length"], shape["width"], shape["clean"])
        return _set_owner(x, ctx if isinstance(ctx, CKKSContext) else None)

    # Operands --------------------------------------------------------------------------------------

    def _wrap(self, ct: Ciphertext, length: int, width: int, is_complex: bool, op: str = "same",
              other: EncryptedVector | None = None) -> EncryptedVector:
        b = None if other is None else (other.length, other.clean)
        clean = padding_clean(op, length, width, (self.length, self.clean), b)
        owner = self.__dict__.get("_owner") or (other.__dict__.get("_owner") if other is not None else None)
        return _set_owner(EncryptedVector(ct, self.ctx, self.complex or is_complex, length, width, clean), owner)

    def _masked(self) -> EncryptedVector:
        """This vector with zeros in its padding slots (unchanged if they hold zeros already)."""
        if self.clean or self.length == self.width:
            return self
        return self * np.ones(self.length)

    def _shape_with(self, length: int, what: str) -> tuple[int, int]:
        """(length, width) of the result of combining with an operand of ``length`` values, NumPy-style:
        equal lengths, or one of them 1 (broadcast)."""
        if length == self.length or length == 1:
            return self.length, self.width
        if self.length == 1:
            return length, _width(length)
        raise ParameterError(
            f"{what}: operands of lengths {self.length} and {length} cannot be combined (NumPy would not broadcast "
            "them either); use vectors of one length, or a single value"
        )

    def _vector(self, other: EncryptedVector, what: str) -> tuple[int, int]:
        _same_keys(what, self.ct.key_id, other.ct.key_id)
        return self._shape_with(other.length, what)

    def _plain(self, other, what: str):
        """(padded values, length, width, complex) of an array operand, replicated like this vector."""
        v = _values(other, what)
        length, width = self._shape_with(v.shape[-1], what)
        if v.shape[-1] == 1:
            v = np.broadcast_to(v, v.shape[:-1] + (length,))
        return _padded(v, width), length, width, _is_complex(v)

    # Arithmetic ------------------------------------------------------------------------------------

    def __add__(self, other):
        other = _operand(other)
        if isinstance(other, EncryptedVector):
            length, width = self._vector(other, "add")
            return self._wrap(ops.add(self.ct, other.ct), length, width, other.complex, "add", other)
        if isinstance(other, numbers.Number):
            if self.clean and self.length < self.width:  # as NumPy's padded vector: the padding stays zero
                return self + np.full(self.length, other)
            return self._wrap(ops.add_scalar(self.ct, other), self.length, self.width, _is_complex(other))
        if isinstance(other, _ARRAYS):
            values, length, width, is_complex = self._plain(other, "add")
            pt = ops.encode(self.ctx.params, values, level=self.level, scale=self.ct.scale)
            return self._wrap(ops.add_plain(self.ct, pt), length, width, is_complex)
        return NotImplemented

    __radd__ = __add__

    def __neg__(self):
        return self._wrap(ops.negate(self.ct), self.length, self.width, False)

    def __sub__(self, other):
        other = _operand(other)
        if isinstance(other, EncryptedVector):
            length, width = self._vector(other, "sub")
            return self._wrap(ops.sub(self.ct, other.ct), length, width, other.complex, "sub", other)
        if isinstance(other, numbers.Number):
            return self + (-other)
        if isinstance(other, _ARRAYS):
            return self + (-np.asarray(other))
        return NotImplemented

    def __rsub__(self, other):
        other = _operand(other)
        if isinstance(other, (numbers.Number, *_ARRAYS)):
            return (-self) + other
        return NotImplemented

    def __mul__(self, other):
        other = _operand(other)
        if isinstance(other, EncryptedVector):
            length, width = self._vector(other, "mul")
            ct = ops.rescale(ops.mul(self.ct, other.ct, self.ctx.keys))
            return self._wrap(ct, length, width, other.complex, "mul", other)
        if isinstance(other, (int, np.integer)) and not isinstance(other, (bool, np.bool_)):
            return self._wrap(ops.mul_scalar(self.ct, int(other)), self.length, self.width, False)
        if isinstance(other, numbers.Number):
            ct = ops.rescale(ops.mul_scalar(self.ct, other))
            return self._wrap(ct, self.length, self.width, _is_complex(other))
        if isinstance(other, _ARRAYS):
            values, length, width, is_complex = self._plain(other, "mul")
            pt = ops.encode(self.ctx.params, values, level=self.level)
            return self._wrap(ops.rescale(ops.mul_plain(self.ct, pt)), length, width, is_complex, "mul_plain")
        return NotImplemented

    __rmul__ = __mul__

    def __matmul__(self, other):
        """Inner product: every slot holds sum_i self_i other_i (equal lengths)."""
        if not isinstance(other, (EncryptedVector, *_ARRAYS)):
            return NotImplemented
        length = other.length if isinstance(other, EncryptedVector) else np.shape(other)[-1]
        if length != self.length:
            raise ParameterError(f"@: operands of lengths {self.length} and {length}: an inner product needs equal "
                                 "lengths")
        return (self * other).sum()

    def __rmatmul__(self, other):
        return self.__matmul__(other)

    # Slots -----------------------------------------------------------------------------------------

    def rotate(self, k: int) -> EncryptedVector:
        """The values rotated left by k over the width-periodic slots (slot i holds slot (i + k) mod width),
        any integer k. One key switch with the Galois key for k (or for k mod width, or that minus width)
        when the context holds it, else one per set bit of k mod width with the power-of-two keys."""
        try:
            k = operator.index(k)
        except TypeError:
            raise TypeError(f"rotate takes an integer offset, got {type(k).__name__}") from None
        r = k % self.width
        if r == 0:
            return self
        keys, params = self.ctx.keys, self.ctx.params
        x = self._masked()  # values the padding holds would wrap into view
        for offset in (k, r, r - self.width):
            if ops.galois_element(params, offset) in keys.galois:
                return x._wrap(ops.rotate(x.ct, offset, keys), self.length, self.width, False, "rotate")
        steps = [1 << i for i in range(r.bit_length()) if r >> i & 1]
        missing = [s for s in steps if ops.galois_element(params, s) not in keys.galois]
        if missing:
            raise ParameterError(
                f"rotate({k}): the context holds no Galois key for {k} (or {r} or {r - self.width}) nor the "
                f"power-of-two keys {missing} to compose it; create the context with rotations=[{k}]"
            )
        ct = x.ct
        for s in steps:
            ct = ops.rotate(ct, s, keys)
        return x._wrap(ct, self.length, self.width, False, "rotate")

    def bootstrap(self) -> EncryptedVector:
        """The same values at the top user level (``params.user_levels``), so computation can go on: CKKS
        bootstrapping (:func:`crossfhe.ckks.bootstrap.bootstrap`), within the preset's stated precision. Needs a
        context made with ``bootstrap=True``; values must stay within [-1, 1] (larger ones wrap)."""
        boot = self.ctx.bootstrap_keys
        if boot is None:
            raise ParameterError(
                "this context holds no bootstrapping keys: create it with CKKSContext.create(params, bootstrap=True) "
                "on a bootstrappable preset (crossfhe.ckks.presets.BOOTSTRAP)")
        return self._wrap(ops.bootstrap(self.ct, boot), self.length, self.width, False)

    def conjugate(self) -> EncryptedVector:
        """Complex conjugate of every value (needs the context's conjugation key)."""
        return self._wrap(ops.conjugate(self.ct, self.ctx.keys), self.length, self.width, False)

    def sum(self) -> EncryptedVector:
        """Every slot holds the sum of the vector's values (log2(width) rotations by powers of two; where the padding
        holds something, it is cleared first, one level)."""
        x = self._masked()
        return x._wrap(ops.sum_slots(x.ct, self.ctx.keys, width=self.width), self.length, self.width, False, "sum")


# crossfhe.io.dumps / loads take these objects (io cannot import the api: the api registers them).
register_type(CKKSPublicContext, io.KIND_PUBLIC_CONTEXT, lambda c, params: c.serialize(), params_of=lambda c: c.params)
register_kind(io.KIND_PUBLIC_CONTEXT, lambda blob, params, context: CKKSPublicContext.load(blob, params=params),
              params=Params)
register_kind(io.KIND_BOOTSTRAP_KEYS, lambda blob, params, context: CKKSPublicContext.load(blob, params=params),
              params=Params)
register_type(EncryptedVector, io.KIND_VECTOR, lambda x, params: x.serialize(), params_of=lambda x: x.ctx.params)
register_kind(io.KIND_VECTOR, lambda blob, params, context: EncryptedVector.load(context, blob), params=Params,
              context="an encrypted vector: load it with crossfhe.EncryptedVector.load(ctx, blob) or "
                      "crossfhe.io.loads(blob, context=ctx), ctx the CKKSContext or CKKSPublicContext it belongs to")

__all__ = ["CKKSContext", "CKKSPublicContext", "EncryptedVector"]
