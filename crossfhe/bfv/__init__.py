"""BFV: exact arithmetic mod t on encrypted integer vectors (batch encoding) or polynomials
(coefficient encoding), RNS on 32-bit words with HPS multiplication.

``bfv.ops`` holds the pure functions, ``bfv.presets`` the named parameter sets.
"""

from crossfhe.bfv import ops, presets
from crossfhe.bfv.ciphertext import Ciphertext, Encoding, EvaluationKeys, Plaintext
from crossfhe.bfv.params import Params, ParamsLiteral

__all__ = ["Ciphertext", "Encoding", "EvaluationKeys", "Params", "ParamsLiteral", "Plaintext", "ops", "presets"]
