"""The user-facing objects: contexts and encrypted values with operators, over the schemes' pure functions
and :mod:`crossfhe.io` (a layer above both: values serialize themselves).

:mod:`crossfhe.api.ckks`: :class:`CKKSContext` (the key owner's, with the secret key),
:class:`CKKSPublicContext` (what an evaluator holds) and :class:`EncryptedVector`.
"""

from crossfhe.api.ckks import CKKSContext, CKKSPublicContext, EncryptedVector

__all__ = ["CKKSContext", "CKKSPublicContext", "EncryptedVector"]
