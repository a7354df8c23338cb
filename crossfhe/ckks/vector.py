"""A thin NumPy-like facade over :mod:`crossfhe.ckks.ops`: a context that holds the keys and encrypted
vectors with operators. Everything it does is one or two calls of the pure functions.

    ctx = CKKSContext.create(presets.N14_L7, rotations=[1, 2])
    x = ctx.encrypt(np.array([...]))            # EncryptedVector
    y = (x * x + 0.5 * x).rotate(1)             # products are relinearized and rescaled
    ctx.decrypt(y)                              # np.ndarray (real if the input was real)

Products rescale right away (a level per product); ``@`` is the inner product (every slot holds it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from crossfhe.ckks import ops
from crossfhe.ckks.ciphertext import Ciphertext, EvaluationKeys
from crossfhe.ckks.params import Params
from crossfhe.core.keys import SecretKey


@dataclass(frozen=True)
class CKKSContext:
    """Parameters and keys. ``secret_key`` is None on an evaluator that only holds public material."""

    params: Params
    keys: EvaluationKeys
    secret_key: SecretKey | None = None

    @classmethod
    def create(cls, params: Params, *, rotations=(), conjugation: bool = False, seed: bytes | None = None):
        """Generate keys for ``params``; ``rotations``: the slot offsets :meth:`EncryptedVector.rotate`
        will use (``sum()`` needs the powers of two, added automatically)."""
        rotations = sorted(set(rotations) | set(ops.power_of_two_rotations(params)))
        sk, ek = ops.keygen(params, rotations=rotations, conjugation=conjugation, seed=seed)
        return cls(params, ek, sk)

    def encrypt(self, values) -> EncryptedVector:
        """Encrypt up to N/2 values; shorter vectors are zero-padded to a power of two and replicated."""
        values = np.asarray(values)
        length = values.shape[-1]
        if length > self.params.slots:
            raise ValueError(f"{length} values do not fit the {self.params.slots} slots of N = {self.params.n}")
        width = 1 << max(0, (length - 1).bit_length())
        padded = np.zeros(values.shape[:-1] + (width,), dtype=np.result_type(values, np.float64))
        padded[..., :length] = values
        ct = ops.encrypt(self.keys, ops.encode(self.params, padded))
        return EncryptedVector(ct, self, np.iscomplexobj(values), length, width)

    def decrypt(self, x: EncryptedVector) -> np.ndarray:
        if self.secret_key is None:
            raise ValueError("this context has no secret key: it can evaluate but not decrypt")
        z = ops.decode(ops.decrypt(self.secret_key, x.ct))[..., : x.length]
        return z if x.complex else z.real


@dataclass(frozen=True)
class EncryptedVector:
    """A ciphertext with its context; ``length`` and ``complex`` shape the decrypted result."""

    ct: Ciphertext
    ctx: CKKSContext
    complex: bool = False
    length: int = 0
    width: int = 1

    def _wrap(self, ct: Ciphertext, other=None) -> EncryptedVector:
        is_complex = self.complex or bool(getattr(other, "complex", False)) or np.iscomplexobj(other)
        return EncryptedVector(ct, self.ctx, is_complex, self.length, self.width)

    def _plain(self, values):
        """An array operand padded like this vector (zeros up to ``width``)."""
        values = np.asarray(values)
        padded = np.zeros(values.shape[:-1] + (self.width,), dtype=np.result_type(values, np.float64))
        padded[..., : values.shape[-1]] = values
        return padded

    @property
    def level(self) -> int:
        return self.ct.level

    def __add__(self, other):
        if isinstance(other, EncryptedVector):
            return self._wrap(ops.add(self.ct, other.ct), other)
        if np.isscalar(other):
            return self._wrap(ops.add_scalar(self.ct, other), other)
        pt = ops.encode(self.ctx.params, self._plain(other), level=self.level, scale=self.ct.scale)
        return self._wrap(ops.add_plain(self.ct, pt), other)

    __radd__ = __add__

    def __neg__(self):
        return self._wrap(ops.negate(self.ct))

    def __sub__(self, other):
        if isinstance(other, EncryptedVector):
            return self._wrap(ops.sub(self.ct, other.ct), other)
        return self + (-np.asarray(other) if not np.isscalar(other) else -other)

    def __rsub__(self, other):
        return (-self) + other

    def __mul__(self, other):
        if isinstance(other, EncryptedVector):
            return self._wrap(ops.rescale(ops.mul(self.ct, other.ct, self.ctx.keys)), other)
        if isinstance(other, (int, np.integer)):
            return self._wrap(ops.mul_scalar(self.ct, int(other)))
        if np.isscalar(other):
            return self._wrap(ops.rescale(ops.mul_scalar(self.ct, other)), other)
        pt = ops.encode(self.ctx.params, self._plain(other), level=self.level)
        return self._wrap(ops.rescale(ops.mul_plain(self.ct, pt)), other)

    __rmul__ = __mul__

    def __matmul__(self, other: EncryptedVector):
        """Inner product: every slot holds sum_i self_i other_i."""
        return (self * other).sum()

    def rotate(self, k: int) -> EncryptedVector:
        """Slots rotated left by k (slot i holds slot i + k)."""
        return self._wrap(ops.rotate(self.ct, k, self.ctx.keys))

    def conjugate(self) -> EncryptedVector:
        return self._wrap(ops.conjugate(self.ct, self.ctx.keys))

    def sum(self) -> EncryptedVector:
        """Every slot holds the sum of the vector's values."""
        return self._wrap(ops.sum_slots(self.ct, self.ctx.keys, width=self.width))
