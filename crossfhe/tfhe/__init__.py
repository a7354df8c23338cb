"""Multi-bit TFHE (key-switch-first programmable bootstrapping) on the shared RNS/NTT substrate.

Modules, as TFHE-rs splits them: ``tfhe.params`` the checked parameter sets (:class:`Params`, built by :func:`make`
from a :class:`ParamsLiteral`) and their noise model; ``tfhe.presets`` the named ones (P2 ... P10 at 2^-64 or
better, P2_128 ... P6_128 at 2^-128); ``tfhe.keys`` key generation and the prepared server key; ``tfhe.encryption``,
``tfhe.linear``, ``tfhe.keyswitch`` and ``tfhe.bootstrap`` the operations; ``tfhe.ops`` all their public functions in
one namespace; ``tfhe.integer`` radix integers of several blocks. The blind rotation is written once
(:mod:`crossfhe.core.blind_rotation`); its external-product kernel (:class:`NTTProduct`, :class:`FFTProduct`,
:class:`NativeProduct`, :class:`GPUProduct`) is a value the server key carries. The NumPy-like facade (``TFHEContext``,
``EncryptedInt``) is :mod:`crossfhe.api.tfhe`, also importable from ``crossfhe``.
"""

from crossfhe.core.blind_rotation import FFTProduct, GPUProduct, NativeProduct, NTTProduct
from crossfhe.tfhe import bootstrap, encryption, keys, keyswitch, linear, ops, params, presets
from crossfhe.tfhe.bootstrap import pbs, pbs_many
from crossfhe.tfhe.encryption import decrypt, encrypt
from crossfhe.tfhe.keys import ClientKey, ServerKey, keygen, prepare
from crossfhe.tfhe.params import Params, ParamsLiteral, make

__all__ = ["ClientKey", "FFTProduct", "GPUProduct", "NTTProduct", "NativeProduct", "Params", "ParamsLiteral",
           "ServerKey", "bootstrap", "decrypt", "encrypt", "encryption", "keygen", "keys", "keyswitch", "linear",
           "make", "ops", "params", "pbs", "pbs_many", "prepare", "presets"]
