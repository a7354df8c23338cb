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
(every slot holds it); ``rotate(k)`` rotates the width-periodic slots left by k, any integer k. Each vector
carries a public bound on |value| (:attr:`EncryptedVector.bound`), which decides whether it may be bootstrapped.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import jax
import numpy as np

from crossfhe.api import eager
from crossfhe.api._owner import KeyOwned, switch_for
from crossfhe.api._owner import same_keys as _same_keys
from crossfhe.api._owner import set_owner as _set_owner
from crossfhe.api.ckks_lower import BOOTSTRAP_BOUND, BOUND_SLACK, SCHEME, bound_rule, check_bootstrap_bounds
from crossfhe.api.context import Context, PublicContext, prepare_create
from crossfhe.api.ir import const_key
from crossfhe.api.trace import Value, register_value, width_of
from crossfhe.api.vector import SlotVector, is_int, scalar_operand
from crossfhe.ckks import ops
from crossfhe.ckks import ops as ckks_ops
from crossfhe.ckks.ciphertext import Ciphertext, EvaluationKeys
from crossfhe.ckks.params import Params
from crossfhe.core.keys import SecretKey
from crossfhe.errors import ParameterError
from crossfhe.io import ckks as io
from crossfhe.io import format as fmt
from crossfhe.io.registry import register_kind, register_type
from crossfhe.kernels import as_kernel_set
from crossfhe.ring.poly import Domain, RNSPoly

_ARRAYS = (np.ndarray, jax.Array, list, tuple)



def _checked_bound(bound, what: str) -> float:
    """``bound`` as a positive float (math.inf: unknown); ParameterError otherwise."""
    if isinstance(bound, (bool, np.bool_)) or not isinstance(bound, numbers.Real) or not bound > 0:
        raise ParameterError(f"{what}: a bound is a positive number, got {bound!r}")
    return float(bound)


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


@dataclass(frozen=True, repr=False)
class CKKSPublicContext(PublicContext):
    """Parameters and evaluation keys (public key, relinearization and Galois keys): what encrypted vectors
    refer to and what an evaluator needs. Holds no secret; safe to pickle, serialize and send."""

    params: Params
    keys: EvaluationKeys
    bootstrap_keys: object = None
    """The bootstrapping keys (:class:`crossfhe.ckks.bootstrap.Keys`, public material), or None."""

    OWNER = "CKKSContext"

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
        self._settle()

    @property
    def runtime_keys(self):
        """The key set the primitives' runtime reads (:meth:`crossfhe.api.ckks_lower.CKKSScheme.runtime`): the
        bootstrapping keys where the context has them (they hold the evaluation keys), else the evaluation keys."""
        return self.bootstrap_keys if self.bootstrap_keys is not None else self.keys

    @property
    def rotations(self) -> list[int]:
        """The slot rotations r in [1, N/2) whose Galois keys (5^r mod 2N) the context holds."""
        return self._rotations(self.params.slots)

    def encrypt(self, values, *, bound: float | None = None) -> EncryptedVector:
        """Encrypt 1 to N/2 values (shape [..., length]) with the public key; padded to a power of two
        ``width`` and replicated over the slots. Values whose encoding (plus the fresh noise) would not fit
        the modulus are refused (ParameterError), as are scalars, empty and non-numeric input.

        ``bound``: the vector's public bound on |value| (:attr:`EncryptedVector.bound`; it travels with the vector
        and decides whether a bootstrap is allowed). Default: 1 for values in [-1, 1], else the next power of two
        above the largest magnitude, so it says no more about the values than that; a larger bound hides more
        (ParameterError below the largest magnitude)."""
        v = _values(values, "encrypt")
        length = v.shape[-1]
        if length > self.params.slots:
            raise ParameterError(f"{length} values do not fit the {self.params.slots} slots of N = {self.params.n}")
        if not np.all(np.isfinite(v)):
            raise ParameterError("encrypt: the values hold NaN or infinity")
        largest = float(np.max(np.abs(v)))
        if bound is None:
            # within the checks' slack of 1 counts as 1: |exp(i t)| computes to 1 + 2^-52 for some t
            bound = (BOOTSTRAP_BOUND if largest <= BOOTSTRAP_BOUND * (1 + BOUND_SLACK)
                     else 2.0 ** math.ceil(math.log2(largest)))
        else:
            bound = _checked_bound(bound, "encrypt")
            if largest > bound * (1 + BOUND_SLACK):
                raise ParameterError(f"encrypt: the values reach {largest:.6g} in magnitude, above bound={bound:g}")
        width = width_of(length)
        ct = ops.encrypt(self.keys, ops.encode(self.params, _padded(v, width)))
        return EncryptedVector(ct, self, _is_complex(v), length, width, bound=bound)

    def serialize(self) -> bytes:
        """The context's blob (kind ``ckks.public_context``, laid out as its evaluation keys: parameters,
        public, relinearization and Galois keys; no secret); also ``crossfhe.io.dumps(ctx)``. A context with
        bootstrapping keys writes ``ckks.bootstrap_keys`` (the same layout plus the encapsulation keys)."""
        if self.bootstrap_keys is not None:
            return io.dumps_bootstrap_keys(self.bootstrap_keys)
        return io.dumps_public_context(self.keys)

    @classmethod
    def load(cls, blob, *, params: Params | None = None, compact_keys: bool | None = None) -> CKKSPublicContext:
        """The public context of a :meth:`serialize` blob or of its evaluation keys' blob (for ``params``, if
        given); every check of :func:`crossfhe.io.ckks.loads`. ``compact_keys``: bootstrapping keys in their compact
        form (as :meth:`CKKSContext.create`'s ``compact_keys``), each key dropped to it as it is read; None: as
        ``params`` say (whole keys where ``params`` are not given)."""
        if fmt.peek_kind(blob) == io.KIND_BOOTSTRAP_KEYS:
            boot = io.loads_bootstrap_keys(blob, params=params, compact=compact_keys)
            return cls(boot.params, boot.evaluation, boot)
        keys = io.loads_public_context(blob, params=params)
        return cls(keys.params, keys)

    def __repr__(self) -> str:
        return (f"CKKSPublicContext(N={self.params.n}, levels={self.params.levels}, scale=2^{self.params.log_scale}, "
                f"rotations={len(self.rotations)}, key_id={self.key_id})")


@dataclass(frozen=True, repr=False)
class CKKSContext(Context):
    """The key owner's context: the secret key and the :class:`CKKSPublicContext` (``public``) that
    encrypted vectors refer to. Decrypts; refuses to be pickled (the secret key leaves the process only
    through ``crossfhe.io.save_secret_key``). Hand ``ctx.public`` (or its :meth:`~CKKSPublicContext.serialize`
    blob) to an evaluator."""

    public: CKKSPublicContext
    secret_key: SecretKey

    SAVE_WITH = "crossfhe.io.save_secret_key(ctx.secret_key, path, params=ctx.params), and pickle or send ctx.public"
    PUBLIC, SECRET = CKKSPublicContext, SecretKey

    @classmethod
    def create(cls, params: Params, *, rotations=(), conjugation: bool = False, seed: bytes | None = None,
               kernels=None, bootstrap: bool = False, bootstrap_length: int | None = None, insecure: bool = False,
               progress="auto", compact_keys: bool | None = None):
        """Generate keys for ``params``; ``rotations``: slot offsets (any sign) to hold exact Galois keys for.
        The powers of two 1 ... N/4 are always added: ``sum()`` needs them, and :meth:`EncryptedVector.rotate`
        composes any other rotation from them. ``seed``: 32 bytes for reproducible keys (tests).

        ``bootstrap``: also make the bootstrapping keys (:func:`crossfhe.ckks.bootstrap.keygen`; the parameters
        must reserve bootstrapping levels, as the presets in ``crossfhe.ckks.presets.BOOTSTRAP`` do, else
        ParameterError), so that :meth:`EncryptedVector.bootstrap` works. ``bootstrap_length``: the longest vector
        they serve (implies ``bootstrap``; default N/2 values, any vector): keys for vectors of up to N/4 values are
        fewer and their bootstrap runs EvalMod once instead of twice (:func:`crossfhe.ckks.bootstrap.slots_for`); a
        longer vector's bootstrap is then refused. ``compact_keys``: the bootstrapping keys in their compact form
        (:meth:`crossfhe.ckks.bootstrap.Keys.compact`: half the memory; each key switch makes its key's uniform half
        from a seed, which costs time: the sizes and times are in benchmarks/README.md, "Compact keys"), or whole;
        default: as the parameters say (:attr:`crossfhe.ckks.params.Params.compact_keys`: compact on
        ``N16_BOOT_L3``, whole on the other presets).
        ``progress``: :mod:`crossfhe.progress`, one step per key (at N 2^16 the bootstrapping keys are about 40, a
        few seconds each); the default draws a bar once key generation has taken 2 s. Parameters marked insecure
        (``crossfhe.testing``) are refused unless ``insecure=True``. Creating a context turns on JAX's persistent
        compilation cache (:func:`crossfhe.runtime.enable_compilation_cache`: a cache of your own wins;
        ``CROSSFHE_JAX_CACHE=0`` opts out), so a later process loads what this one compiled.

        ``kernels``: the kernel set every operation of this context runs on (``crossfhe.kernels.VECTOR``,
        ``NATIVE``, ``GPU``, ``MATRIX``, or their names); by default the parameters' own, where AUTO is resolved
        here, once, by :func:`crossfhe.kernels.default_kernels` (NATIVE on a CPU with the native build, else
        VECTOR). The choice never changes a result, only its speed; a set whose kernels cannot run here (NATIVE
        without its build, GPU without a CUDA device or nvcc) raises RuntimeError before any key is made."""
        progress = prepare_create("CKKSContext", params, Params, insecure=insecure, progress=progress,
                                  presets="crossfhe.presets.ckks")
        chosen = as_kernel_set(params.kernels if kernels is None else kernels).require("CKKSContext.create")
        params = params.with_kernels(chosen)
        wanted = {int(r) % params.slots for r in rotations} - {0}  # 0: the identity, no key
        rotations = sorted(wanted | set(ops.power_of_two_rotations(params)))
        boot = None
        bootstrap = bool(bootstrap) or bootstrap_length is not None
        if bootstrap:
            from crossfhe.ckks import bootstrap as bt

            # refuses a set that cannot bootstrap, or a length it cannot serve, before any key is made
            config = bt.config_for(params, bt.slots_for(params, bootstrap_length))
        sk, ek = ops.keygen(params, rotations=rotations, conjugation=conjugation, seed=seed, progress=progress)
        if bootstrap:
            sub = None if seed is None else bytes(b ^ 0x5A for b in seed)
            boot = bt.keygen(sk, ek, config, seed=sub, progress=progress, compact=compact_keys)
            ek = boot.evaluation
        return cls(CKKSPublicContext(params, ek, boot), sk)

    def decrypt(self, x: EncryptedVector) -> np.ndarray:
        """The values of an encrypted vector: float64 [..., length] (complex128 if it holds complex values).
        Raises KeyMismatchError for a vector of another context."""
        x = self._own(x, "decrypt")
        z = ops.decode(ops.decrypt(self.secret_key, x.ct))[..., : x.length]
        return z if x.complex else z.real


class EncryptedVector(KeyOwned, SlotVector):
    """An encrypted vector of ``length`` real (or ``complex``) values, padded to the power of two ``width`` and
    repeated over the slots (:mod:`crossfhe.api.vector`): concrete (``ct``, a ciphertext, and ``ctx``, the public
    context it belongs to; each operator runs at once, products relinearized and rescaled) or symbolic inside
    :func:`crossfhe.compile` (each operator recorded; the compiler places the levels). The same operators either way.
    """

    scheme = "ckks"
    _FIELDS = ("ct", "ctx", "complex", "length", "width", "clean", "bound", "trace", "node")
    _EQUALITY = ("CKKS values are approximate, so == would compare their noise; compare the decrypted values with "
                 "np.isclose, or order encrypted ones with x > y and x < y through a crossfhe.SchemeSwitch")
    _INTEGER_OPS = ("CKKS values are real numbers; functions that are not polynomials go through a "
                    "crossfhe.SchemeSwitch (sw.apply(x, np.abs, interval)) or a polynomial approximation "
                    "(crossfhe.ckks.activations.from_function(f, interval, degree)); integer division and bitwise "
                    "operators exist on TFHE integers (crossfhe.TFHEContext)")

    def __init__(self, ct: Ciphertext | None = None, ctx: CKKSPublicContext | None = None, complex: bool = False,
                 length: int = 1, width: int = 1, clean: bool = True, *, bound: float | None = math.inf, trace=None,
                 node: int | None = None):
        self.__dict__.update(ct=ct, ctx=ctx, complex=bool(complex), length=int(length), width=int(width),
                             clean=bool(clean), bound=None if bound is None else float(bound), trace=trace, node=node)

    bound: float | None
    """A public bound on |value| over the vector's values (the modulus for complex ones): the encryption's (its
    ``bound``), carried through every operation by :func:`crossfhe.api.ckks_lower.bound_rule` (a sum adds bounds, a
    product multiplies them, rotations keep them). A bootstrap, asked for or placed where a product runs out of
    levels, is refused before any work where it exceeds 1: bootstrapping keeps values in [-1, 1] only (larger ones
    would wrap around). math.inf: unknown (a blob written before bounds were kept); None on a traced value (the
    compiler tracks bounds over the circuit from its inputs' :class:`~crossfhe.api.specs.CKKSVector` bounds)."""

    @classmethod
    def symbolic(cls, trace, node: int, spec) -> EncryptedVector:
        """The traced value of an input node (:class:`~crossfhe.api.specs.CKKSVector` ``spec``)."""
        return cls(None, None, spec.complex, spec.length, spec.width, True, bound=None, trace=trace, node=node)

    @property
    def dtype(self) -> np.dtype:
        """The NumPy type of the decrypted values: complex128 for a complex vector, else float64."""
        return np.dtype(np.complex128 if self.complex else np.float64)

    @property
    def level(self) -> int:
        """The ciphertext's level (a concrete value; a traced one's level is the compiler's to choose)."""
        if self.traced:
            raise self._error(TypeError, "a traced value has no level yet: the compiler places the levels")
        return self.ct.level

    @property
    def scale(self) -> float:
        if self.traced:
            raise self._error(TypeError, "a traced value has no scale yet: the compiler places the scales")
        return self.ct.scale

    def __repr__(self) -> str:
        kind = ", complex" if self.complex else ""
        if self.traced:
            return f"EncryptedVector(%{self.node}, length={self.length}{kind}, traced)"
        return (f"EncryptedVector(length={self.length}{kind}, level={self.level}/{self.ctx.params.levels}, "
                f"scale=2^{np.log2(self.scale):.1f}, bound={self.bound:.6g}, slots={self.ctx.params.slots})")

    # Serialization ---------------------------------------------------------------------------------

    def serialize(self) -> bytes:
        """The vector's blob (kind ``ckks.vector``: the ciphertext, its key id, length, width, complex, bound);
        no key material. Read it back with :meth:`load` and the public context."""
        if self.traced:
            raise self._error(TypeError, "a traced value has no words to serialize; serialize the circuit's outputs")
        return io.dumps_vector(self.ct, length=self.length, width=self.width, complex=self.complex, clean=self.clean,
                               bound=self.bound)

    @classmethod
    def load(cls, ctx, blob) -> EncryptedVector:
        """The vector of a :meth:`serialize` blob, attached to ``ctx`` (a CKKSContext or CKKSPublicContext of
        the same parameters and keys: SerializationError or KeyMismatchError otherwise)."""
        public = ctx.public if isinstance(ctx, CKKSContext) else ctx
        if not isinstance(public, CKKSPublicContext):
            raise TypeError(f"load takes a CKKSContext or CKKSPublicContext, got {type(ctx).__name__}")
        ct, shape = io.loads_vector(blob, params=public.params)
        _same_keys("EncryptedVector.load", public.key_id, ct.key_id)
        x = cls(ct, public, shape["complex"], shape["length"], shape["width"], shape["clean"], bound=shape["bound"])
        return _set_owner(x, ctx if isinstance(ctx, CKKSContext) else None)

    # The primitives and their operands -------------------------------------------------------------------

    def _fields(self, op: str, attrs: dict, others, *, is_complex: bool, consts) -> dict:
        cx = self.complex or is_complex or any(o.complex for o in others)
        if self.traced:
            return {"complex": cx}
        const = consts[attrs["const"]] if "const" in attrs else None
        return {"complex": cx, "bound": bound_rule(op, attrs, [v.bound for v in (self, *others)], const)}

    def with_bound(self, bound: float) -> EncryptedVector:
        """The same ciphertext with its :attr:`bound` declared as ``bound``: where you know more than the tracked
        bound (x - x is bounded by 2 max|x|, yet is 0), so that a bootstrap is allowed. Nothing checks it (the values
        are secret): a bootstrap of values beyond 1 returns wrong values. A traced value's bounds are the circuit's
        inputs' (CKKSVector(n, bound=...))."""
        if self.traced:
            raise self._error(TypeError, "with_bound: a traced value's bound comes from the circuit's inputs: declare "
                              "it with CKKSVector(n, bound=...), or where it is bootstrapped, x.bootstrap(bound=...)")
        return self._replace(bound=_checked_bound(bound, "with_bound"))

    def _run(self, op: str, attrs: dict, others, consts) -> Ciphertext:
        """The ciphertext of primitive ``op`` run eagerly (:mod:`crossfhe.api.ckks_lower`)."""
        public = self.ctx
        boot = public.bootstrap_keys
        values = (self, *others)
        operands = [({"level": v.ct.level, "scale": v.ct.scale}, (v.ct.c0.data, v.ct.c1.data)) for v in values]
        if boot is not None:
            # whether each operand is complex (a real value's bootstrap runs EvalMod once), and with keys for fewer
            # than N/2 slots the widths (they decide whether a bootstrap, asked or placed, is allowed)
            sparse = boot.config.slots < public.params.slots
            for (meta, _), v in zip(operands, values):
                meta.update({"width": v.width, "complex": v.complex} if sparse else {"complex": v.complex})
        node, (c0, c1) = eager.run(SCHEME, public.params, public.runtime_keys, op, attrs, operands, consts=consts,
                                   check=lambda g: check_bootstrap_bounds(g, [v.bound for v in values]))
        moduli = public.params.moduli_at(node.attr("level"))
        return Ciphertext(RNSPoly(c0, moduli, Domain.EVAL), RNSPoly(c1, moduli, Domain.EVAL), public.params,
                          node.attr("scale"), self.ct.key_id)

    def _operand(self, other, what: str):
        """A scalar operand as an int or a finite float or complex; other operands as they are."""
        other = scalar_operand(other)
        if isinstance(other, Value) and not isinstance(other, EncryptedVector):
            self._same(other, what)
        if isinstance(other, numbers.Number) and not is_int(other):
            if isinstance(other, (bool, np.bool_)):
                raise self._error(TypeError, f"{what}: a bool is not a number operand")
            z = complex(other)
            if not (math.isfinite(z.real) and math.isfinite(z.imag)):
                raise self._error(ValueError, f"{what}: the scalar must be finite, got {other!r}")
            return z if z.imag else z.real
        return other

    def _add_scalar(self, c):
        if isinstance(c, complex) or self._scalar_fills_padding():
            return self + np.full(self.length, c)
        return self._apply("add_scalar", [], {"c": float(c)})

    def _mul_scalar(self, c):
        if isinstance(c, complex):
            return self * np.full(self.length, c)
        return self._apply("mul_scalar", [], {"c": float(c)})

    def _plain(self, other, what: str):
        """(constant key, {key: array}, length, width, complex) of a 1-D array operand, zero-padded like this
        vector."""
        v = np.asarray(other)
        if not (np.issubdtype(v.dtype, np.number) or v.dtype == bool):
            raise self._error(TypeError, f"{what} takes real or complex numbers, got an array of dtype {v.dtype}")
        if v.ndim != 1 or v.shape[0] == 0:
            raise self._error(ValueError, f"{what}: a plaintext operand is a non-empty 1-D array of values, got shape "
                              f"{v.shape}")
        if not np.all(np.isfinite(v)):
            raise self._error(ValueError, f"{what}: the plaintext operand holds NaN or infinity")
        length, width = self._shape_with(v.shape[0], what)
        v = np.broadcast_to(v, (length,)) if v.shape[0] == 1 else v
        out = np.zeros(width, dtype=np.complex128 if np.iscomplexobj(v) else np.float64)
        out[:length] = v
        key = const_key(out)
        return key, {key: out}, length, width, bool(np.iscomplexobj(v))

    def __truediv__(self, other):
        """Division by a public nonzero scalar or array: the product by its reciprocal (a level, as any product)."""
        other = self._operand(other, "/")
        if isinstance(other, Value):
            return self.__rtruediv__(other)
        if isinstance(other, numbers.Number):
            if other == 0:
                raise ZeroDivisionError("division of an encrypted vector by zero")
            return self * (1 / other)
        if isinstance(other, _ARRAYS):
            arr = np.asarray(other)
            if arr.size and np.any(arr == 0):
                raise ZeroDivisionError("division of an encrypted vector by an array holding zeros")
            return self * (1 / arr)
        return NotImplemented

    def __rtruediv__(self, other):
        raise self._error(TypeError, "/: division by an encrypted value is not a polynomial operation; divide by "
                          "public numbers, or approximate 1/x with a polynomial (crossfhe.ckks.activations)")

    def _compare(self, other, op: str):
        if self.traced:
            raise self._error(TypeError, f"{op}: comparisons of CKKS values go through TFHE (crossfhe.SchemeSwitch), "
                              "which circuits do not trace; compare eagerly with a SchemeSwitch")
        sw = switch_for(self.ct.key_id)
        if sw is None:
            raise self._error(TypeError, f"{op}: encrypted CKKS values are compared through TFHE: create "
                              "crossfhe.SchemeSwitch.create(ckks_ctx, tfhe_ctx, interval=(lo, hi)) for this context "
                              "(then x > y, or sw.greater(x, y, interval), give 0/1 vectors); without it, compute a "
                              "polynomial approximation of the sign (crossfhe.ckks.activations)")
        return sw.compare(self, other, op)

    def __gt__(self, other):
        return self._compare(other, ">")

    def __ge__(self, other):
        return self._compare(other, ">=")

    def __lt__(self, other):
        return self._compare(other, "<")

    def __le__(self, other):
        return self._compare(other, "<=")

    # Slots -----------------------------------------------------------------------------------------

    def _has_rotation_key(self, offset: int) -> bool:
        return ckks_ops.rotation_element(self.ctx.params, offset) in self.ctx.keys.galois

    def _key_switches(self, r: int) -> int:
        return self._switches_for(r, (r, r - self.width))

    def _raw_rotate(self, r: int) -> EncryptedVector:
        """The width-periodic slots rotated left by r (0 < r < width; padding included): one key switch with the
        Galois key for r or r - width when the context holds it, else one per set bit of r with the power-of-two
        keys (:meth:`~crossfhe.api.vector.SlotVector._rotated_with_keys`)."""
        return self._rotated_with_keys(r, (r, r - self.width), "rotate", f"rotations=[{r}]")

    def _fold_sum(self, x: EncryptedVector, length: int = 1) -> EncryptedVector:
        """Every slot of the width period holding the sum of x's width slots (log2(width) rotations by powers of
        two), read as a vector of ``length`` (1: the sum)."""
        step = 1
        while step < x.width:
            x = x + x._raw_rotate(step)
            step *= 2
        return x._reshaped(length, 1 if length == 1 else x.width)

    def bootstrap(self, *, precise: bool = False, bound: float | None = None) -> EncryptedVector:
        """The same values at the top user level (``params.user_levels``), so computation can go on: CKKS
        bootstrapping (:func:`crossfhe.ckks.bootstrap.bootstrap`, one program), within the preset's stated precision.
        Needs a context made with ``bootstrap=True`` (traced: a bootstrappable preset, whose keygen makes the keys);
        the values must lie within [-1, 1] (larger ones would wrap around): a vector whose :attr:`bound` exceeds 1 is
        refused before any work (ParameterError), in a circuit at compile time (CircuitError). A vector of up to N/4
        values (width, the power of two its values repeat with) bootstraps with one EvalMod instead of two where the
        keys were made for it (``CKKSContext.create(..., bootstrap_length=...)``; a compiled circuit's keygen does it
        by itself).

        ``precise``: two iterations (:func:`crossfhe.ckks.bootstrap.bootstrap` ``precise``): twice the time, the same
        keys and levels, and the error of one bootstrap (25-26 bits) down to the scale's rounding: 40 bits or more on
        the preset made for it, ``N16_BOOT_HP`` (scale 2^60), about 35 on the others (scale 2^52).

        ``bound``: a bound on |value| you know to hold where the tracked one is larger, as :meth:`with_bound`
        declares it, and the way to declare it inside a circuit (a polynomial in u, |u| <= 1, whose tracked bound
        is the sum of its coefficients' magnitudes times their terms'); at most 1, else ParameterError. Nothing
        checks it (the values are secret): values beyond 1 come back wrong."""
        if not isinstance(precise, bool):
            raise TypeError(f"bootstrap(precise=...) takes True or False, got {precise!r}")
        attrs = {"precise": True} if precise else {}
        if bound is not None:
            bound = _checked_bound(bound, "bootstrap")
            if bound > BOOTSTRAP_BOUND:
                raise self._error(ParameterError, f"bootstrap(bound={bound:g}): bootstrapping keeps only values "
                                  f"with |x| <= {BOOTSTRAP_BOUND:g}; scale the values into [-1, 1] first")
            attrs["bound"] = bound
        if not self.traced and self.ctx.bootstrap_keys is None:
            raise self._error(ValueError, "this context holds no bootstrapping keys: create it with "
                              "CKKSContext.create(params, bootstrap=True) on a bootstrappable preset "
                              "(crossfhe.ckks.presets.BOOTSTRAP)")
        return self._apply("bootstrap", attrs=attrs or None)

    def conjugate(self) -> EncryptedVector:
        """The complex conjugate of every value (a key switch with the conjugation key)."""
        return self._apply("conjugate")


register_value(EncryptedVector)
SCHEME.value_class = CKKSContext.VALUE = EncryptedVector


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
