"""crossfhe: fully homomorphic encryption on one RNS/NTT substrate in JAX.

Public names: the CKKS contexts and encrypted vectors (:mod:`crossfhe.api`), the errors, and the
substrate's parameters and rings; the submodules (``crossfhe.ckks``, ``crossfhe.bfv``, ``crossfhe.tfhe``,
``crossfhe.io``, ``crossfhe.math``, ``crossfhe.ring``, ``crossfhe.core``) hold the rest.
"""

from crossfhe.api import CKKSContext, CKKSPublicContext, EncryptedVector
from crossfhe.compiler import BFVVector, CircuitError, CKKSVector, TFHEInt, circuit, compile  # noqa: A004
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

__version__ = "0.1.0"

__all__ = [
    "SPARSE_ESTIMATES",
    "BFVVector",
    "CKKSVector",
    "CircuitError",
    "TFHEInt",
    "circuit",
    "compile",
    "BasisMismatchError",
    "CKKSContext",
    "CKKSPublicContext",
    "ChaChaKey",
    "CrossFHEError",
    "Domain",
    "DomainMismatchError",
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
    "SecretMaterialError",
    "SecurityLevel",
    "SerializationError",
    "check_security",
    "intt",
    "max_log_pq",
    "ntt",
    "seed_key",
]
