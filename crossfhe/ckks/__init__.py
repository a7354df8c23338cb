"""CKKS: approximate arithmetic on encrypted complex vectors.

``ckks.ops`` holds the pure functions and ``ckks.presets`` the named parameter sets; the NumPy-like
facade (``CKKSContext``, ``EncryptedVector``) is :mod:`crossfhe.api.ckks`, also importable from ``crossfhe``.
"""

from crossfhe.ckks import ops, presets
from crossfhe.ckks.ciphertext import Ciphertext, EvaluationKeys, Plaintext
from crossfhe.ckks.params import Params, ParamsLiteral

__all__ = ["Ciphertext", "EvaluationKeys", "Params", "ParamsLiteral", "Plaintext", "ops", "presets"]
