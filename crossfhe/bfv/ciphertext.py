"""BFV data types: plaintexts, ciphertexts and evaluation keys, as pytrees (arrays are leaves, the
parameters static)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from functools import partial

import jax

from crossfhe.bfv.params import Params
from crossfhe.core.keys import PublicKey
from crossfhe.core.keyswitch import KeySwitchKey
from crossfhe.errors import ParameterError
from crossfhe.ring.poly import RNSPoly

_static = partial(field, metadata={"static": True})


class Encoding(enum.Enum):
    """How a plaintext's values sit in its polynomial: BATCH (N slots, a 2 x N/2 matrix, t prime and
    t = 1 mod 2N) or COEFF (value j is coefficient j)."""

    BATCH = "batch"
    COEFF = "coeff"


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False)
class Plaintext:
    """A message polynomial m in Z_t[X]/(X^N + 1): ``coeffs`` uint32[..., N] in [0, t) (leading axes batch).
    Static: ``params``, ``encoding`` (how :func:`crossfhe.bfv.ops.decode` reads it)."""

    coeffs: jax.Array
    params: Params = _static()
    encoding: Encoding = _static()


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False)
class Ciphertext:
    """(c0, c1): RNSPoly EVAL over Q, uint32[..., L, N] (leading axes batch), c0 + c1 s = Delta m + e (mod Q).
    Static: ``params`` and ``key_id``, the :func:`~crossfhe.core.keys.key_id` of the key pair it was
    encrypted under (None: unknown); operations on two ciphertexts, or with keys, refuse different key ids."""

    c0: RNSPoly
    c1: RNSPoly
    params: Params = _static()
    key_id: str | None = _static(default=None)

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return tuple(self.c0.data.shape[:-2])

    def __repr__(self) -> str:
        return f"bfv.Ciphertext(N={self.params.n}, t={self.params.t}, batch={self.batch_shape})"


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False, repr=False)
class EvaluationKeys:
    """Public material: the public key, the relinearization key (None if not generated) and Galois keys by
    Galois element (5^r mod 2N rotates both rows left by r; 2N - 1 swaps the rows; 2^l + 1 for packing).
    Safe to send to an evaluator."""

    public: PublicKey
    relin: KeySwitchKey | None
    galois: dict
    params: Params = _static()

    @property
    def key_id(self) -> str | None:
        """The key pair's identifier (:func:`~crossfhe.core.keys.key_id` of the public key)."""
        return self.public.key_id

    def galois_key(self, element: int) -> KeySwitchKey:
        try:
            return self.galois[element]
        except KeyError:
            have = sorted(self.galois)
            raise ParameterError(
                f"no Galois key for element {element}; the keys hold {have}. Generate it with "
                "bfv.ops.keygen(..., rotations=[...], row_swap=True, galois_elements=[...])"
            ) from None

    def relin_key(self) -> KeySwitchKey:
        if self.relin is None:
            raise ParameterError("no relinearization key: generate the keys with keygen(..., relin=True)")
        return self.relin

    def __repr__(self) -> str:
        return f"bfv.EvaluationKeys(N={self.params.n}, relin={self.relin is not None}, galois={sorted(self.galois)})"
