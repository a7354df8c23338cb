"""crossfhe: fully homomorphic encryption on one RNS/NTT substrate in JAX.

Public names: the contexts and encrypted values of the three schemes (:mod:`crossfhe.api`: ``CKKSContext``,
``BFVContext``, ``TFHEContext``, their public contexts, ``EncryptedVector``, ``EncryptedIntVector``,
``EncryptedInt``, ``EncryptedInteger``: NumPy's integer types on TFHE, with ``where``, ``minimum``, ``maximum``),
the named parameter sets (``crossfhe.presets.ckks``, ``.bfv``, ``.tfhe``), circuits, the
errors, and the substrate's parameters and rings; the submodules (``crossfhe.ckks``, ``crossfhe.bfv``,
``crossfhe.tfhe``, ``crossfhe.io``, ``crossfhe.math``, ``crossfhe.ring``, ``crossfhe.core``) hold the rest.

    import crossfhe
    ctx = crossfhe.BFVContext.create(crossfhe.presets.bfv.N8192)
    x = ctx.encrypt([1, 2, 3]); (x * x + 1).decrypt()
"""

from types import SimpleNamespace as _Namespace

from crossfhe.api import (
    BFVContext,
    BFVPublicContext,
    CKKSContext,
    CKKSPublicContext,
    EncryptedInt,
    EncryptedInteger,
    EncryptedIntVector,
    EncryptedVector,
    SchemeSwitch,
    TFHEContext,
    TFHEPublicContext,
    maximum,
    minimum,
    where,
)
from crossfhe.api.circuit import Circuit, circuit, compile  # noqa: A004
from crossfhe.api.circuit import load as load_circuit
from crossfhe.api.ir import CircuitError
from crossfhe.api.specs import BFVVector, CKKSVector, TFHEInt, TFHEInteger
from crossfhe.bfv import presets as _bfv_presets
from crossfhe.ckks import presets as _ckks_presets
from crossfhe.core.params import (
    SPARSE_ESTIMATES,
    RingParams,
    RingParamsLiteral,
    SecretDistribution,
    SecurityLevel,
    check_security,
    max_log_pq,
)
from crossfhe.errors import (
    BasisMismatchError,
    CrossFHEError,
    DomainMismatchError,
    InsecureParametersError,
    KeyMismatchError,
    ParameterError,
    SecretMaterialError,
    SerializationError,
)
from crossfhe.math.random import ChaChaKey, Rng, seed_key
from crossfhe.ring.ntt import NTTPlan, intt, ntt
from crossfhe.ring.poly import Domain, RNSPoly
from crossfhe.tfhe import presets as _tfhe_presets

presets = _Namespace(ckks=_ckks_presets, bfv=_bfv_presets, tfhe=_tfhe_presets)
"""The named parameter sets of each scheme: ``presets.ckks`` (:mod:`crossfhe.ckks.presets`), ``presets.bfv``
(:mod:`crossfhe.bfv.presets`), ``presets.tfhe`` (:mod:`crossfhe.tfhe.presets`); each docstring states what it
guarantees. Test-only sets are ``crossfhe.testing.INSECURE_*``."""

from crossfhe._version import __version__ as __version__  # noqa: E402 - one source: pyproject reads it too

__all__ = [
    "SPARSE_ESTIMATES",
    "BFVVector",
    "CKKSVector",
    "Circuit",
    "CircuitError",
    "TFHEInt",
    "TFHEInteger",
    "circuit",
    "compile",
    "BasisMismatchError",
    "BFVContext",
    "BFVPublicContext",
    "CKKSContext",
    "CKKSPublicContext",
    "ChaChaKey",
    "CrossFHEError",
    "Domain",
    "DomainMismatchError",
    "EncryptedInt",
    "EncryptedInteger",
    "EncryptedIntVector",
    "EncryptedVector",
    "InsecureParametersError",
    "KeyMismatchError",
    "NTTPlan",
    "ParameterError",
    "RNSPoly",
    "Rng",
    "RingParams",
    "RingParamsLiteral",
    "SecretDistribution",
    "SchemeSwitch",
    "SecretMaterialError",
    "SecurityLevel",
    "SerializationError",
    "TFHEContext",
    "TFHEPublicContext",
    "maximum",
    "minimum",
    "where",
    "check_security",
    "intt",
    "load_circuit",
    "max_log_pq",
    "ntt",
    "presets",
    "seed_key",
]
