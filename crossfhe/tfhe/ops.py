"""Multi-bit TFHE's pure functions in one namespace, as the tfhe-rs way splits them into modules:

* keys (:mod:`crossfhe.tfhe.keys`): :class:`ClientKey`, :class:`ServerKey` and its :class:`PreparedKey`,
  :func:`keygen`, :func:`prepare` (another external-product kernel: ``NTTProduct``, ``FFTProduct``,
  ``NativeProduct``, ``GPUProduct``);
* encryption (:mod:`crossfhe.tfhe.encryption`): :func:`encrypt`, :func:`decrypt`, :func:`phase`, :func:`noise`,
  :func:`encode`, :func:`trivial`;
* linear operations (:mod:`crossfhe.tfhe.linear`): :func:`add`, :func:`sub`, :func:`negate`,
  :func:`add_scalar`, :func:`mul_scalar` (``add_const``, ``mul_const``: their deprecated names);
* key switching (:mod:`crossfhe.tfhe.keyswitch`): :func:`keyswitch`;
* bootstrapping (:mod:`crossfhe.tfhe.bootstrap`): :func:`pbs`, :func:`pbs_many`, :func:`lookup_table`,
  :func:`per_input_tables`, and for programs :func:`program_key`, :func:`pbs_rows`, :func:`pbs_each`,
  :func:`make_test_vectors`.

Ciphertexts are :class:`crossfhe.core.lwe.LWECiphertext` of dimension k N over the GLWE modulus Q (the long key:
the coefficients of the GLWE secret), phase b + <a, s> = m Delta + e, Delta = round(Q / 2^(p+1))
(:mod:`crossfhe.tfhe.params`). Leading axes are batch axes: ``encrypt`` of an array of messages gives a batch, and
every operation works on batches.
"""

from crossfhe.core.blind_rotation import FFTProduct, GPUProduct, NativeProduct, NTTProduct
from crossfhe.tfhe.bootstrap import (
    CPU_BATCH_WORDS,
    PROGRESS_CHUNKS,
    lookup_table,
    make_test_vectors,
    pbs,
    pbs_each,
    pbs_many,
    pbs_rows,
    per_input_tables,
    program_key,
    program_key_shapes,
)
from crossfhe.tfhe.encryption import decrypt, encode, encrypt, noise, phase, trivial
from crossfhe.tfhe.keys import (
    ClientKey,
    PreparedKey,
    ServerKey,
    bsk_bits,
    check_compatible,
    keygen,
    patterns,
    prepare,
    product_for,
)
from crossfhe.tfhe.keyswitch import KS_BYTES_FROM, keyswitch
from crossfhe.tfhe.linear import add, add_const, add_scalar, mul_const, mul_scalar, negate, sub

__all__ = [
    "CPU_BATCH_WORDS",
    "KS_BYTES_FROM",
    "PROGRESS_CHUNKS",
    "ClientKey",
    "FFTProduct",
    "GPUProduct",
    "NTTProduct",
    "NativeProduct",
    "PreparedKey",
    "ServerKey",
    "add",
    "add_const",
    "add_scalar",
    "bsk_bits",
    "check_compatible",
    "decrypt",
    "encode",
    "encrypt",
    "keygen",
    "keyswitch",
    "lookup_table",
    "make_test_vectors",
    "mul_const",
    "mul_scalar",
    "negate",
    "noise",
    "patterns",
    "pbs",
    "pbs_each",
    "pbs_many",
    "pbs_rows",
    "per_input_tables",
    "phase",
    "prepare",
    "product_for",
    "program_key",
    "program_key_shapes",
    "sub",
    "trivial",
]
