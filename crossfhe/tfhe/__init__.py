"""Multi-bit TFHE (key-switch-first programmable bootstrapping) on the shared RNS/NTT substrate.

``tfhe.params`` holds the checked parameter sets (:class:`Params`, built by :func:`make`) and their noise model,
``tfhe.presets`` the named ones (P2 ... P10 at 2^-64 or better, P2_128 ... P6_128 at 2^-128), ``tfhe.ops`` the pure
functions (keys, encryption, linear operations, key switching, bootstrapping), ``tfhe.integer`` radix integers of
several blocks. The NumPy-like facade (``TFHEContext``, ``EncryptedInt``) is :mod:`crossfhe.api.tfhe`, also
importable from ``crossfhe``.
"""

from crossfhe.tfhe import ops, params, presets
from crossfhe.tfhe.ops import ClientKey, ServerKey, decrypt, encrypt, keygen, pbs, pbs_many
from crossfhe.tfhe.params import Params, ParamsLiteral, make

__all__ = ["ClientKey", "Params", "ParamsLiteral", "ServerKey", "decrypt", "encrypt", "keygen", "make", "ops",
           "params", "pbs", "pbs_many", "presets"]
