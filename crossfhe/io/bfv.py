"""BFV objects to bytes and files, and back: parameters, ciphertexts, plaintexts, public and evaluation keys.

The container, header and checks are those of :mod:`crossfhe.io.ckks` (read its docstring for the seeds,
the order of the checks and the secret-key rule); only the parameter description and the kinds differ.
Every blob is a :mod:`crossfhe.io.format` container whose header holds, besides ``kind`` and the array
table:

* ``params_digest``: ``bfv.Params.digest()`` of the parameters the object belongs to;
* ``params``: the canonical description that rebuilds those parameters exactly: ``n``, the primes ``q``
  and ``p`` themselves, ``security``, ``secret``, ``insecure``, ``t``, ``dnum``, ``hamming_weight``;
* ``meta``: the kind's metadata (sigma as a ``float.hex`` string).

=======================  ===========================================  =======================================
kind                     arrays                                       meta
=======================  ===========================================  =======================================
``bfv.params``           none                                         ``{}``
``bfv.ciphertext``       ``c0``, ``c1``: uint32[..., L, N], EVAL      ``{}`` or key_id
``bfv.plaintext``        ``coeffs``: uint32[..., N] in [0, t)         encoding (``"batch"`` or ``"coeff"``)
``bfv.public_key``       ``b``: uint32[L+K, N]; seed or ``a``          sigma, a ("seed" or "stored"), a_sha256
``bfv.evaluation_keys``  ``public.*``, ``relin.*``, ``galois.<g>.*``  public, relin (null: none), galois
``bfv.secret_key``       ``coeffs``: int32[N] in {-1, 0, 1}           hamming_weight[, key_id]
``bfv.hmvp_vector``      ``c0``, ``c1``: uint32[B, L+K, N], EVAL      length[, rows_per_product, key_id]
=======================  ===========================================  =======================================

A BFV ciphertext is always in the EVAL domain over all of Q (the scheme has no levels), so its meta holds
only its key pair's id (as in :mod:`crossfhe.io.ckks`), when known; leading batch axes of ciphertexts and
plaintexts are kept. A plaintext is its message coefficients and the encoding :func:`crossfhe.bfv.ops.decode`
reads it with; a batch-encoded plaintext is refused for parameters without batching. An HMVP encrypted
vector (:class:`crossfhe.linalg.hmvp.CoefficientVector`, :func:`dumps_hmvp_vector`) is over Q ∪ P, its
B = ceil(length / N) blocks along the first axis. Evaluation keys made
with ``keygen(..., relin=False)`` store ``"relin": null`` and no ``relin.*`` arrays. Keys store the seeds
of their uniform parts as in CKKS.

Loading checks, after the container's own checks: the parameter description rebuilds valid BFV
parameters whose digest equals ``params_digest`` and, if given, the caller's ``params``; the metadata is
well formed; the array names, dtypes and shapes are those of the parameters; every residue is below its
modulus and every plaintext coefficient below t. A CKKS blob is refused with a message that names it
(and a BFV blob by :mod:`crossfhe.io.ckks`). Each failure raises :class:`~crossfhe.errors.SerializationError`.

    blob = io.bfv.dumps(ct)                    # Params, Ciphertext, Plaintext, EvaluationKeys
    ct2 = io.bfv.loads(blob, params=params, expected=Ciphertext)
    io.bfv.save_secret_key(sk, "sk.cfhe", params=params)   # never by dumps/save
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from crossfhe.bfv.ciphertext import Ciphertext, Encoding, EvaluationKeys, Plaintext
from crossfhe.bfv.params import Params
from crossfhe.core.keys import SecretKey
from crossfhe.errors import SerializationError
from crossfhe.io import _common as com
from crossfhe.io import checks
from crossfhe.io import format as fmt
from crossfhe.linalg.hmvp import CoefficientVector as HMVPVector
from crossfhe.ring.poly import Domain

KIND_PARAMS = "bfv.params"
KIND_CIPHERTEXT = "bfv.ciphertext"
KIND_PLAINTEXT = "bfv.plaintext"
KIND_PUBLIC_KEY = "bfv.public_key"
KIND_EVALUATION_KEYS = "bfv.evaluation_keys"
KIND_SECRET_KEY = "bfv.secret_key"
KIND_HMVP_VECTOR = "bfv.hmvp_vector"


# --------------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------------


def describe_params(params: Params) -> dict:
    """The canonical JSON description of BFV ``params`` (every field needed to rebuild it exactly)."""
    return {**com.describe_ring(params.ring), "t": params.t, "dnum": params.dnum}


def _build(ring, ints: dict) -> Params:
    return Params(ring=ring, t=ints["t"], dnum=ints["dnum"])


def params_from_description(desc) -> Params:
    """Rebuild (and re-check) the bfv.Params of a :func:`describe_params` dict; SerializationError if invalid."""
    return com.params_from_description(desc, ("t", "dnum"), _build)


def _params_summary(params: Params) -> str:
    return f"N = {params.n}, {len(params.q)} + {len(params.p)} primes, t = {params.t}, dnum = {params.dnum}"


# --------------------------------------------------------------------------------------------------
# Ciphertexts and plaintexts
# --------------------------------------------------------------------------------------------------


def _ciphertext_parts(ct: Ciphertext):
    arrays = com.pair_arrays(ct.c0, ct.c1, ct.params.q, ct.params.n)
    if ct.c0.domain != Domain.EVAL:
        raise SerializationError(f"a BFV ciphertext is stored in the EVAL domain, this one is in {ct.c0.domain.name}")
    return com.key_id_meta(ct.key_id), arrays


def _read_ciphertext(c: fmt.Container, params: Params) -> Ciphertext:
    m = com.meta(c.fields, set(), com.KEY_ID)
    c0, c1 = com.read_pair(c.arrays, params.q, params.n, Domain.EVAL)
    return Ciphertext(c0, c1, params, com.read_key_id(m["key_id"]))


def _check_messages(coeffs: np.ndarray, t: int, name: str) -> None:
    """Every coefficient of ``coeffs`` below the plaintext modulus t."""
    checks.check_bounds(coeffs, 0, t, what=f"array {name!r}",
                        meaning=f"not below the plaintext modulus t = {t}: out of range")


def _encoding(value, params: Params) -> Encoding:
    try:
        encoding = Encoding(value)
    except ValueError:
        raise SerializationError(f"encoding must be one of {[e.value for e in Encoding]}, got {value!r}") from None
    if encoding == Encoding.BATCH and not params.batching:
        raise SerializationError(f"a batch-encoded plaintext needs a batching t; t = {params.t} is not (t prime, "
                                 f"t = 1 mod 2N = {2 * params.n})")
    return encoding


def _plaintext_parts(pt: Plaintext):
    params = pt.params
    coeffs = com.host(pt.coeffs, "coeffs")
    if coeffs.dtype != np.uint32 or coeffs.ndim < 1 or coeffs.shape[-1] != params.n:
        raise SerializationError(f"plaintext coefficients are {coeffs.dtype}{list(coeffs.shape)}, expected "
                                 f"uint32[..., {params.n}]")
    _check_messages(coeffs, params.t, "coeffs")
    return {"encoding": _encoding(pt.encoding, params).value}, {"coeffs": coeffs}


def _read_plaintext(c: fmt.Container, params: Params) -> Plaintext:
    encoding = _encoding(com.meta(c.fields, {"encoding"})["encoding"], params)
    com.check_names(c.arrays, {"coeffs"})
    shape = com.batch_shape(c.arrays, "coeffs", (params.n,))
    coeffs = com.check_array(c.arrays, "coeffs", np.uint32, shape)
    _check_messages(coeffs, params.t, "coeffs")
    return Plaintext(jnp.asarray(coeffs), params, encoding)


SCHEME = com.Scheme(
    name="bfv", params=Params, ciphertext=Ciphertext, plaintext=Plaintext, evaluation_keys=EvaluationKeys,
    describe=describe_params, rebuild=params_from_description, summary=_params_summary,
    write_ciphertext=_ciphertext_parts, read_ciphertext=_read_ciphertext,
    write_plaintext=_plaintext_parts, read_plaintext=_read_plaintext, relin_optional=True,
    hints={KIND_HMVP_VECTOR: "an HMVP encrypted vector: load it with crossfhe.io.loads(blob) or "
                             "crossfhe.io.bfv.loads_hmvp_vector(blob)"},
)
"""How :mod:`crossfhe.io._common` reads and writes BFV objects."""


# --------------------------------------------------------------------------------------------------
# HMVP encrypted vectors (over Q ∪ P)
# --------------------------------------------------------------------------------------------------


def _hmvp_blocks(length, params: Params, rows_per_product=1) -> int:
    if not fmt.is_json_int(length) or length < 1:
        raise SerializationError(f"an HMVP vector's length must be a positive integer, got {length!r}")
    r = rows_per_product
    if not fmt.is_json_int(r) or r < 1 or r & (r - 1) or r > params.n:
        raise SerializationError(f"an HMVP vector's rows_per_product must be a power of two <= N, got {r!r}")
    return -(-length // (params.n // r))


def dumps_hmvp_vector(vec: HMVPVector, *, params: Params | None = None) -> bytes:
    """The blob (kind ``bfv.hmvp_vector``) of an HMVP encrypted vector: ``c0``, ``c1`` uint32[B, L+K, N]
    (EVAL, over Q ∪ P) and its length and key id in the meta. ``params``, if given, must equal the
    vector's. SerializationError if the vector is inconsistent with its parameters."""
    if not isinstance(vec, HMVPVector):
        raise TypeError(f"dumps_hmvp_vector takes a crossfhe.linalg.hmvp.CoefficientVector, got {type(vec).__name__}")
    own = vec.params
    if params is not None:
        SCHEME.check_params(params)
        if params != own:
            raise SerializationError(f"params = {_params_summary(params)} differ from the vector's own parameters")
    length = int(vec.length) if isinstance(vec.length, np.integer) else vec.length
    moduli = own.q + own.p
    arrays = com.pair_arrays(vec.c0, vec.c1, moduli, own.n)
    shape = (_hmvp_blocks(length, own, vec.rows_per_product), len(moduli), own.n)
    if vec.c0.domain != Domain.EVAL or arrays["c0"].shape != shape:
        raise SerializationError(f"an HMVP vector of {length} values is uint32{list(shape)} in the EVAL domain, "
                                 f"this one is {list(arrays['c0'].shape)} in {vec.c0.domain.name}")
    meta = {"length": length, "rows_per_product": int(vec.rows_per_product), **com.key_id_meta(vec.key_id)}
    return com.pack(SCHEME, KIND_HMVP_VECTOR, own, meta, arrays)


def loads_hmvp_vector(blob, *, params: Params | None = None) -> HMVPVector:
    """The HMVP encrypted vector of a :func:`dumps_hmvp_vector` blob (for ``params``, if given), after
    the checks of :func:`loads`: shapes [ceil(length / N), L+K, N] and every residue below its modulus."""
    if params is not None:
        SCHEME.check_params(params)
    c = fmt.unpack(blob, expected_kind=KIND_HMVP_VECTOR)
    with checks.about(KIND_HMVP_VECTOR):
        return _read_hmvp_vector(c, com.header_params(SCHEME, c.fields, params))


def _read_hmvp_vector(c: fmt.Container, params: Params) -> HMVPVector:
    m = com.meta(c.fields, {"length"}, com.KEY_ID | {"rows_per_product"})
    rows = 1 if m["rows_per_product"] is None else m["rows_per_product"]  # blobs before it: CHAM's layout
    moduli = params.q + params.p
    shape = (_hmvp_blocks(m["length"], params, rows), len(moduli), params.n)
    com.check_names(c.arrays, {"c0", "c1"})
    c0 = com.load_poly(c.arrays, "c0", shape, moduli, Domain.EVAL)
    c1 = com.load_poly(c.arrays, "c1", shape, moduli, Domain.EVAL)
    return HMVPVector(c0, c1, params, m["length"], com.read_key_id(m["key_id"]), rows)


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


def dumps(obj, *, params: Params | None = None) -> bytes:
    """The blob of a bfv Params, Ciphertext, Plaintext, PublicKey or EvaluationKeys (layout: module docstring).

    params: needed for a PublicKey only (it does not carry its parameters), else checked against the
    object's own. A SecretKey is refused: use :func:`dumps_secret_key`. SerializationError if the object
    is inconsistent with its parameters; TypeError for another type (a CKKS object: use crossfhe.io.ckks).
    """
    return com.dumps(SCHEME, obj, params)


def loads(blob, *, params: Params | None = None, expected=None):
    """The BFV object of a :func:`dumps` blob, after every check of the module docstring.

    params: if given, the blob must be for exactly these bfv.Params (the result then uses this instance).
    expected: a class (``bfv.Ciphertext``, ``bfv.Params``, ...) or kind string; any other kind is refused,
    as are secret-key blobs (:func:`loads_secret_key`) and CKKS blobs. Raises SerializationError.
    """
    return com.loads(SCHEME, blob, params, expected)


def save(obj, path, *, params: Params | None = None) -> None:
    """Write :func:`dumps` ``(obj)`` to ``path`` atomically; nothing is written if ``dumps`` refuses."""
    com.save(SCHEME, obj, path, params)


def load(path, *, params: Params | None = None, expected=None):
    """:func:`loads` of the file at ``path``."""
    return loads(fmt.read_bytes(path), params=params, expected=expected)


def dumps_secret_key(sk: SecretKey, *, params: Params) -> bytes:
    """The blob (kind ``bfv.secret_key``) of a secret key for BFV ``params``: its coefficients int32[N].
    Explicit on purpose: whoever holds this blob can decrypt everything under the key."""
    return com.dumps_secret_key(SCHEME, sk, params)


def loads_secret_key(blob, *, params: Params) -> SecretKey:
    """The SecretKey of a BFV :func:`dumps_secret_key` blob, which must be for ``params``."""
    return com.loads_secret_key(SCHEME, blob, params)


def save_secret_key(sk: SecretKey, path, *, params: Params) -> None:
    """Write :func:`dumps_secret_key` to ``path`` atomically, readable by the owner only (mode 0o600)."""
    com.save_secret_key(SCHEME, sk, path, params)


def load_secret_key(path, *, params: Params) -> SecretKey:
    """:func:`loads_secret_key` of the file at ``path``."""
    return loads_secret_key(fmt.read_bytes(path), params=params)


__all__ = [
    "KIND_CIPHERTEXT",
    "KIND_EVALUATION_KEYS",
    "KIND_HMVP_VECTOR",
    "KIND_PARAMS",
    "KIND_PLAINTEXT",
    "KIND_PUBLIC_KEY",
    "KIND_SECRET_KEY",
    "describe_params",
    "dumps",
    "dumps_hmvp_vector",
    "dumps_secret_key",
    "load",
    "load_secret_key",
    "loads",
    "loads_hmvp_vector",
    "loads_secret_key",
    "params_from_description",
    "save",
    "save_secret_key",
]
