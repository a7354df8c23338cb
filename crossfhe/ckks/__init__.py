"""CKKS: approximate arithmetic on encrypted complex vectors.

``ckks.ops`` holds the pure functions, ``ckks.presets`` the named parameter sets, and
``CKKSContext`` / ``EncryptedVector`` a NumPy-like facade over them.
"""

from crossfhe.ckks import ops, presets
from crossfhe.ckks.ciphertext import Ciphertext, EvaluationKeys, Plaintext
from crossfhe.ckks.params import Params, ParamsLiteral
from crossfhe.ckks.vector import CKKSContext, EncryptedVector

__all__ = ["CKKSContext", "Ciphertext", "EncryptedVector", "EvaluationKeys", "Params", "ParamsLiteral",
           "Plaintext", "ops", "presets"]
