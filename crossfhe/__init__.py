"""crossfhe: fully homomorphic encryption on one RNS/NTT substrate in JAX.

Public names of the substrate; the submodules (``crossfhe.math``, ``crossfhe.ring``, ``crossfhe.core``)
hold the rest.
"""

from crossfhe.core.params import (
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
    ParameterError,
    SerializationError,
)
from crossfhe.math.random import ChaChaKey, Rng, seed_key
from crossfhe.ring.ntt import NTTPlan, intt, ntt
from crossfhe.ring.poly import Domain, RNSPoly

__version__ = "0.1.0"

__all__ = [
    "BasisMismatchError",
    "ChaChaKey",
    "CrossFHEError",
    "Domain",
    "DomainMismatchError",
    "InsecureParametersError",
    "NTTPlan",
    "ParameterError",
    "RNSPoly",
    "Rng",
    "RingParams",
    "RingParamsLiteral",
    "SecretDistribution",
    "SecurityLevel",
    "SerializationError",
    "check_security",
    "intt",
    "max_log_pq",
    "ntt",
    "seed_key",
]
