"""Exceptions raised by crossfhe. Every error names what is wrong and, where one applies, the bound."""


class CrossFHEError(Exception):
    """Base class of every error crossfhe raises on purpose."""


class ParameterError(CrossFHEError, ValueError):
    """A parameter set or argument is invalid (wrong size, not prime, not NTT-friendly, ...)."""


class InsecureParametersError(ParameterError):
    """A parameter set exceeds the security bound; pass ``insecure=True`` only for experiments."""


class DomainMismatchError(CrossFHEError, TypeError):
    """Polynomials in different domains (coefficient vs evaluation) were combined."""


class BasisMismatchError(CrossFHEError, ValueError):
    """Polynomials or tables over different RNS bases (moduli lists or ring degrees) were combined."""


class SerializationError(CrossFHEError, ValueError):
    """Serialized data is truncated, tampered with, of an unknown version or for other parameters."""


class KeyMismatchError(CrossFHEError, ValueError):
    """Ciphertexts, keys or contexts made under different key pairs were combined (their key ids differ)."""


class SecretMaterialError(CrossFHEError, TypeError):
    """An object holding secret key material was pickled; secret keys are written only by the explicit
    ``crossfhe.io`` secret-key functions."""
