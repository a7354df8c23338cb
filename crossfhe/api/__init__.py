"""The user-facing objects: contexts and encrypted values with operators, over the schemes' pure functions
and :mod:`crossfhe.io` (a layer above both: values serialize themselves). One style across schemes: a key
owner's context (``create``, ``encrypt``, ``decrypt``, ``public``; never pickled), a public context (what an
evaluator holds; pickled, ``serialize`` / ``load``), and values with operators, ``.decrypt()`` (at the key owner)
and ``.serialize()`` / ``load(ctx, blob)``.

* :mod:`crossfhe.api.ckks`: :class:`CKKSContext`, :class:`CKKSPublicContext`, :class:`EncryptedVector`
  (approximate real or complex vectors).
* :mod:`crossfhe.api.bfv`: :class:`BFVContext`, :class:`BFVPublicContext`, :class:`EncryptedIntVector`
  (exact integer vectors mod t).
* :mod:`crossfhe.api.tfhe`: :class:`TFHEContext`, :class:`TFHEPublicContext`, :class:`EncryptedInt`
  (p-bit integers with lookups, their range tracked).
* :mod:`crossfhe.api.integer`: :class:`EncryptedInteger` (NumPy's integer types, uint8 to int64 and bool, on TFHE
  radix blocks; ``TFHEContext.encrypt(v, dtype=np.uint16)``), :func:`where`, :func:`minimum`, :func:`maximum`.
* :mod:`crossfhe.api.switch`: :class:`SchemeSwitch` (CKKS vectors <-> TFHE integers; ReLU, comparisons, max,
  argmax and any table on CKKS vectors).
"""

from crossfhe.api.bfv import BFVContext, BFVPublicContext, EncryptedIntVector
from crossfhe.api.circuit import Circuit, CircuitKeys, Encrypted, cache_dir, circuit, compile, load  # noqa: A004
from crossfhe.api.ckks import CKKSContext, CKKSPublicContext, EncryptedVector
from crossfhe.api.integer import EncryptedInteger, maximum, minimum, where
from crossfhe.api.ir import CircuitError, Graph, Node
from crossfhe.api.specs import BFVVector, CKKSVector, TFHEInt, TFHEInteger
from crossfhe.api.switch import SchemeSwitch
from crossfhe.api.tfhe import EncryptedInt, TFHEContext, TFHEPublicContext

__all__ = [
    "BFVVector",
    "CKKSVector",
    "Circuit",
    "CircuitError",
    "CircuitKeys",
    "Encrypted",
    "Graph",
    "Node",
    "TFHEInt",
    "TFHEInteger",
    "cache_dir",
    "circuit",
    "compile",
    "load",
    "BFVContext",
    "BFVPublicContext",
    "CKKSContext",
    "CKKSPublicContext",
    "EncryptedInt",
    "EncryptedInteger",
    "EncryptedIntVector",
    "EncryptedVector",
    "SchemeSwitch",
    "TFHEContext",
    "TFHEPublicContext",
    "maximum",
    "minimum",
    "where",
]
