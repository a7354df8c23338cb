"""CKKS data types: plaintexts, ciphertexts and evaluation keys, as pytrees.

Arrays are leaves; the parameters and the scale are static metadata. The scale is a Python float, exact
to 53 bits (a float32 leaf would round a 2^40 scale to 24 bits, a visible error in every decode), and
the level is the number of ciphertext primes in use (``params.level_of(limbs)``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import jax

from crossfhe.ckks.params import Params
from crossfhe.core.keys import PublicKey
from crossfhe.core.keyswitch import KeySwitchKey
from crossfhe.errors import ParameterError
from crossfhe.ring.poly import RNSPoly

_static = partial(field, metadata={"static": True})


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False)
class Plaintext:
    """An encoded vector: ``poly`` RNSPoly EVAL over ``params.moduli_at(level)``; value = decode(poly) / scale."""

    poly: RNSPoly
    params: Params = _static()
    scale: float = _static()

    @property
    def level(self) -> int:
        return self.params.level_of(self.poly.limbs)


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False)
class Ciphertext:
    """(c0, c1): RNSPoly EVAL over ``params.moduli_at(level)``, uint32[..., limbs, N] (leading axes batch),
    with c0 + c1 s = Delta m + e. Static: ``params``, ``scale`` (Delta, tracked exactly) and ``key_id``, the
    :func:`~crossfhe.core.keys.key_id` of the key pair it was encrypted under (None: unknown); operations
    on two ciphertexts, or with keys, refuse different key ids."""

    c0: RNSPoly
    c1: RNSPoly
    params: Params = _static()
    scale: float = _static()
    key_id: str | None = _static(default=None)

    @property
    def level(self) -> int:
        return self.params.level_of(self.c0.limbs)

    @property
    def moduli(self) -> tuple[int, ...]:
        return self.c0.basis

    def __repr__(self) -> str:
        return f"Ciphertext(N={self.params.n}, level={self.level}, scale=2^{_log2(self.scale):.2f})"


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False, repr=False)
class EvaluationKeys:
    """Public material: the public key, the relinearization key, and Galois keys by Galois element
    (5^r mod 2N rotates slots left by r; 2N - 1 conjugates). Safe to send to an evaluator."""

    public: PublicKey
    relin: KeySwitchKey
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
                "keygen(..., rotations=[...], conjugation=True)"
            ) from None

    def __repr__(self) -> str:
        return f"EvaluationKeys(N={self.params.n}, galois elements={sorted(self.galois)})"


def _log2(x: float) -> float:
    import math

    return math.log2(x) if x > 0 else float("-inf")
