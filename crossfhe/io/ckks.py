"""CKKS objects to bytes and files, and back: parameters, ciphertexts, plaintexts, public and evaluation keys.

Every blob is a :mod:`crossfhe.io.format` container whose header holds, besides ``kind`` and the array
table:

* ``params_digest``: ``Params.digest()`` of the parameters the object belongs to;
* ``params``: the canonical description that rebuilds those parameters exactly: ``n``, the primes ``q``
  and ``p`` themselves, ``security``, ``secret``, ``insecure``, ``levels``, ``log_scale``,
  ``primes_per_level``, ``base_count``, ``dnum``, ``hamming_weight``;
* ``meta``: the kind's metadata; floats (scale, sigma) as ``float.hex`` strings, which round-trip exactly.

========================  ===========================================  ======================================
kind                      arrays                                       meta
========================  ===========================================  ======================================
``ckks.params``           none                                         ``{}``
``ckks.ciphertext``       ``c0``, ``c1``: uint32[..., limbs, N]        scale, level, domain[, key_id]
``ckks.plaintext``        ``poly``: uint32[..., limbs, N]              scale, level, domain
``ckks.public_key``       ``b``: uint32[L+K, N]; seed or ``a``           sigma, a ("seed" or "stored"), a_sha256
``ckks.evaluation_keys``  ``public.*``, ``relin.*``, ``galois.<g>.*``  public, relin, galois (a list)
``ckks.secret_key``       ``coeffs``: int32[N] in {-1, 0, 1}           hamming_weight[, key_id]
``ckks.vector``           ``c0``, ``c1``, as a ciphertext's            a ciphertext's, length, width, complex
``ckks.public_context``   as ``ckks.evaluation_keys``                  as ``ckks.evaluation_keys``
``ckks.bootstrap_keys``   the evaluation keys', ``to_sparse.*``,       the evaluation keys', to_sparse,
                          ``to_dense.*``                               to_dense (as a key-switching key), config
========================  ===========================================  ======================================

``key_id`` (when known) is the identifier of the key pair a ciphertext was encrypted under and a secret key
belongs to (:func:`crossfhe.core.keys.key_id`, 32 hex digits; a public key's is recomputed from its ``b``).
Leading batch axes of ciphertexts and plaintexts are kept. A key-switching key stores ``b``:
uint32[digits, L + K, N] and its meta sigma, dnum, a and a_sha256 (a Galois key also its element).

Seeds. A public key and a key-switching key keep the ChaCha20 key their uniform part ``a`` was expanded
from (``sample_uniform`` / ``expand_keyswitch_a``), so a blob stores that seed (``seed.words`` uint32[8],
``seed.stream`` uint32[2], 40 bytes) instead of ``a`` and the loader re-expands it, bit for bit: this
halves public and evaluation keys (N = 2^10 test set: public key 40 KiB -> 20 KiB, a key-switching key
128 KiB -> 64 KiB). The writer first checks that the seed reproduces ``a``; if it does not, ``a`` is
stored as is (meta ``"a": "stored"``). With a seed the meta also records ``a_sha256``, the SHA-256 of
``a``'s little-endian words, and the loader checks the re-expanded ``a`` against it, so a sampler that
changed between writer and reader is refused instead of silently giving another key. The seed is public
(it only determines ``a``). A secret key is stored as its ternary coefficients only; its EVAL residues
are recomputed on load.

Loading checks, after the container's own checks (magic, version, lengths, SHA-256, JSON, kind): the
parameter description rebuilds valid parameters whose digest equals ``params_digest``; they equal the
``params`` the caller passes, if any; the metadata is well formed; the array names, dtypes and shapes are
those of the parameters and level; every residue is below its modulus (a secret coefficient in {-1, 0, 1},
with the stated Hamming weight). Each failure raises :class:`~crossfhe.errors.SerializationError`.

A secret key is never written by :func:`dumps` or :func:`save`; use :func:`save_secret_key` (the file gets
mode 0o600) or :func:`dumps_secret_key`, and read it back only with :func:`load_secret_key` or
:func:`loads_secret_key`.
"""

from __future__ import annotations

import math

from crossfhe.ckks.ciphertext import Ciphertext, EvaluationKeys, Plaintext
from crossfhe.ckks.params import Params
from crossfhe.core.keys import SecretKey
from crossfhe.errors import CrossFHEError, SerializationError
from crossfhe.io import _common as com
from crossfhe.io import checks
from crossfhe.io import format as fmt
from crossfhe.ring.poly import Domain, RNSPoly

KIND_PARAMS = "ckks.params"
KIND_CIPHERTEXT = "ckks.ciphertext"
KIND_PLAINTEXT = "ckks.plaintext"
KIND_PUBLIC_KEY = "ckks.public_key"
KIND_EVALUATION_KEYS = "ckks.evaluation_keys"
KIND_SECRET_KEY = "ckks.secret_key"
KIND_VECTOR = "ckks.vector"
KIND_PUBLIC_CONTEXT = "ckks.public_context"
KIND_BOOTSTRAP_KEYS = "ckks.bootstrap_keys"

_INT_KEYS = ("levels", "log_scale", "primes_per_level", "base_count", "dnum")


# --------------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------------


def describe_params(params: Params) -> dict:
    """The canonical JSON description of ``params`` (every field needed to rebuild it exactly);
    ``bootstrap_levels`` appears only when nonzero, so the descriptions of other sets are unchanged."""
    desc = {
        **com.describe_ring(params.ring), "levels": params.levels, "log_scale": params.log_scale,
        "primes_per_level": params.primes_per_level, "base_count": params.base_count, "dnum": params.dnum,
    }  # fmt: skip
    if params.bootstrap_levels:
        desc["bootstrap_levels"] = params.bootstrap_levels
    return desc


def _build(ring, ints: dict) -> Params:
    return Params(ring, ints["levels"], ints["log_scale"], ints["primes_per_level"], ints["base_count"],
                  ints["dnum"], ints.get("bootstrap_levels", 0))


def params_from_description(desc) -> Params:
    """Rebuild (and re-check) the Params of a :func:`describe_params` dict; SerializationError if invalid."""
    keys = _INT_KEYS + ("bootstrap_levels",) if isinstance(desc, dict) and "bootstrap_levels" in desc else _INT_KEYS
    return com.params_from_description(desc, keys, _build)


def _params_summary(params: Params) -> str:
    return f"N = {params.n}, {len(params.q)} + {len(params.p)} primes, levels = {params.levels}, dnum = {params.dnum}"


# --------------------------------------------------------------------------------------------------
# Ciphertexts and plaintexts
# --------------------------------------------------------------------------------------------------


def _domain(value) -> Domain:
    try:
        return Domain(value)
    except ValueError:
        raise SerializationError(f"meta.domain must be one of {[d.value for d in Domain]}, got {value!r}") from None


def _level(value, params: Params) -> int:
    level = com.json_int(value, "meta.level")
    if not 0 <= level <= params.levels:
        raise SerializationError(f"meta.level = {level} is not a level of the parameters (0 ... {params.levels})")
    return level


def _poly_level(poly, params: Params, name: str) -> int:
    if not isinstance(poly, RNSPoly):
        raise SerializationError(f"{name} must be an RNSPoly, got {type(poly).__name__}")
    try:
        return params.level_of(poly.limbs)
    except CrossFHEError as e:
        raise SerializationError(f"{name}: {e}") from None


def _leveled_meta(scale: float, level: int, domain: Domain) -> dict:
    return {"scale": com.float_hex(scale, "scale"), "level": level, "domain": domain.value}


def _read_leveled_meta(fields: dict, params: Params, optional=frozenset()):
    """(scale, moduli, domain, meta) of a leveled object's header."""
    meta = com.meta(fields, {"scale", "level", "domain"}, optional)
    moduli = params.moduli_at(_level(meta["level"], params))
    return com.float_from_hex(meta["scale"], "meta.scale"), moduli, _domain(meta["domain"]), meta


def _ciphertext_parts(ct: Ciphertext):
    params = ct.params
    level = _poly_level(ct.c0, params, "c0")
    arrays = com.pair_arrays(ct.c0, ct.c1, params.moduli_at(level), params.n)
    return {**_leveled_meta(ct.scale, level, ct.c0.domain), **com.key_id_meta(ct.key_id)}, arrays


def _read_ciphertext(c: fmt.Container, params: Params) -> Ciphertext:
    scale, moduli, domain, meta = _read_leveled_meta(c.fields, params, com.KEY_ID)
    c0, c1 = com.read_pair(c.arrays, moduli, params.n, domain)
    return Ciphertext(c0, c1, params, scale, com.read_key_id(meta["key_id"]))


def _plaintext_parts(pt: Plaintext):
    params = pt.params
    level = _poly_level(pt.poly, params, "poly")
    data = com.poly_array(pt.poly, params.moduli_at(level), params.n, "poly")
    return _leveled_meta(pt.scale, level, pt.poly.domain), {"poly": data}


def _read_plaintext(c: fmt.Container, params: Params) -> Plaintext:
    scale, moduli, domain, _ = _read_leveled_meta(c.fields, params)
    com.check_names(c.arrays, {"poly"})
    shape = com.batch_shape(c.arrays, "poly", (len(moduli), params.n))
    return Plaintext(com.load_poly(c.arrays, "poly", shape, moduli, domain), params, scale)


# --------------------------------------------------------------------------------------------------
# Encrypted vectors (a ciphertext and the shape of the values it holds)
# --------------------------------------------------------------------------------------------------

VECTOR_SHAPE = ("length", "width", "complex")
"""What a ``ckks.vector`` blob stores beside its ciphertext: the number of values, the power-of-two period
they are padded to and replicated with (1 <= length <= width <= N/2), and whether they are complex."""


def _vector_shape(length, width, is_complex, params: Params, what) -> dict:
    ok = (fmt.is_json_int(length) and fmt.is_json_int(width) and isinstance(is_complex, bool)
          and 1 <= width <= params.slots and width & (width - 1) == 0 and 1 <= length <= width)
    if not ok:
        raise what(f"a vector's shape must be 1 <= length <= width <= N/2 = {params.slots} with width a power of two "
                   f"and complex a bool, got length = {length!r}, width = {width!r}, complex = {is_complex!r}")
    return {"length": length, "width": width, "complex": is_complex}


def dumps_vector(ct: Ciphertext, *, length: int, width: int, complex: bool, clean: bool = False,
                 bound: float = math.inf) -> bytes:
    """The blob (kind ``ckks.vector``) of an encrypted vector: the ciphertext as :func:`dumps` stores it and
    ``length``, ``width``, ``complex`` (:data:`VECTOR_SHAPE`), ``clean`` (its padding slots hold zeros) and ``bound``
    (a public bound on |value|, float.hex; math.inf, unknown, is left out) in its meta. No key material is stored; a
    reader pairs it with the public context whose key id it carries (``crossfhe.api``)."""
    if not isinstance(ct, Ciphertext):
        raise TypeError(f"dumps_vector takes a ckks.Ciphertext, got {type(ct).__name__}")
    shape = _vector_shape(length, width, complex, ct.params, SerializationError)
    meta, arrays = _ciphertext_parts(ct)
    extra = {} if math.isinf(bound) else {"bound": com.float_hex(bound, "bound")}
    return com.pack(SCHEME, KIND_VECTOR, ct.params, {**meta, **shape, "clean": bool(clean), **extra}, arrays)


def loads_vector(blob, *, params: Params | None = None) -> tuple[Ciphertext, dict]:
    """(ciphertext, shape) of a :func:`dumps_vector` blob, after every check of :func:`loads` and of the shape
    (:data:`VECTOR_SHAPE`). ``params``: if given, the blob must be for exactly these parameters."""
    c = fmt.unpack(blob, expected_kind=KIND_VECTOR)
    with checks.about(KIND_VECTOR):
        return _read_vector(c, com.header_params(SCHEME, c.fields, params))


def _read_vector(c: fmt.Container, params: Params) -> tuple[Ciphertext, dict]:
    scale, moduli, domain, meta = _read_leveled_meta(c.fields, params,
                                                     com.KEY_ID | set(VECTOR_SHAPE) | {"clean", "bound"})
    if any(meta[k] is None for k in VECTOR_SHAPE):
        raise SerializationError(f"a ckks.vector blob's meta must hold {list(VECTOR_SHAPE)}")
    shape = _vector_shape(*(meta[k] for k in VECTOR_SHAPE), params, SerializationError)
    if meta["clean"] is not None and not isinstance(meta["clean"], bool):
        raise SerializationError(f"a ckks.vector blob's meta.clean must be true or false, got {meta['clean']!r}")
    shape["clean"] = meta["clean"] is True  # absent (older blobs): the padding is not known to be zero
    # absent (older blobs): no bound is known, and a bootstrap is refused until one is declared
    shape["bound"] = math.inf if meta["bound"] is None else com.float_from_hex(meta["bound"], "meta.bound")
    c0, c1 = com.read_pair(c.arrays, moduli, params.n, domain)
    return Ciphertext(c0, c1, params, scale, com.read_key_id(meta["key_id"])), shape


# --------------------------------------------------------------------------------------------------
# Public contexts (evaluation keys under their own kind)
# --------------------------------------------------------------------------------------------------


def dumps_public_context(keys: EvaluationKeys) -> bytes:
    """The blob (kind ``ckks.public_context``) of a public context, which is its evaluation keys: the layout
    of ``ckks.evaluation_keys`` under its own kind, so :func:`crossfhe.io.loads` gives back a context (the
    api's :class:`~crossfhe.api.ckks.CKKSPublicContext` registers it). No secret."""
    return com.dumps_evaluation_keys(SCHEME, keys, KIND_PUBLIC_CONTEXT)


def loads_public_context(blob, *, params: Params | None = None) -> EvaluationKeys:
    """The evaluation keys of a :func:`dumps_public_context` blob, or of a ``ckks.evaluation_keys`` blob
    (how public contexts were written before they had a kind), after every check of :func:`loads`."""
    return com.loads_evaluation_keys(SCHEME, blob, params, (KIND_PUBLIC_CONTEXT, KIND_EVALUATION_KEYS))


# --------------------------------------------------------------------------------------------------
# Bootstrapping keys
# --------------------------------------------------------------------------------------------------

_CONFIG_INTS = ("slots", "cts_levels", "stc_levels", "degree", "double_angle", "arcsine_degree")
_CONFIG_OLD_ARCSINE = 3
"""The arcsine degree of a configuration written without ``arcsine_degree`` (before issue 45 every bootstrap ran
arcsin's degree-3 Taylor polynomial)."""


def dumps_bootstrap_keys(keys) -> bytes:
    """The blob (kind ``ckks.bootstrap_keys``) of :class:`crossfhe.ckks.bootstrap.Keys`: the evaluation keys'
    layout (so a public context with bootstrapping is this blob), plus the two encapsulation keys (``to_sparse``
    over q0 and the first special prime, ``to_dense`` over the whole chain; both public) and the configuration.
    No secret."""
    from crossfhe.ckks import bootstrap as bt

    if not isinstance(keys, bt.Keys):
        raise TypeError(f"expected ckks.bootstrap.Keys, got {type(keys).__name__}")
    meta, arrays = com._evaluation_keys_parts(SCHEME, keys.evaluation)
    enc_meta, enc_arrays = _encapsulation_parts(keys)
    return com.pack(SCHEME, KIND_BOOTSTRAP_KEYS, keys.params, {**meta, **enc_meta}, {**arrays, **enc_arrays})


def _encapsulation_parts(keys, prefix: str = "") -> tuple[dict, dict]:
    """(meta, arrays) of a bootstrap.Keys' own part beside its evaluation keys: meta ``to_sparse`` and ``to_dense``
    (as key-switching keys) and ``config``; arrays ``<prefix>to_sparse.*`` and ``<prefix>to_dense.*``."""
    meta, arrays = {}, {}
    for name, ksk, ring in (("to_sparse", keys.to_sparse, keys.sparse_ring), ("to_dense", keys.to_dense, keys.params)):
        m, a = com._ksk_parts(ksk, ring, f"{prefix}{name}.")
        meta[name] = m
        arrays.update(a)
    cfg = keys.config
    meta["config"] = {**{k: int(getattr(cfg, k)) for k in _CONFIG_INTS}, "K": com.float_hex(cfg.K, "config.K")}
    return meta, arrays


def _check_encapsulation_meta(m: dict, params: Params, what: str = "meta"):
    """(Config, sparse ring) of the ``to_sparse``, ``to_dense`` and ``config`` entries of ``m``, their keys checked."""
    from crossfhe.ckks import bootstrap as bt

    for name in _ENCAPSULATION:
        com.keys(m[name], {"sigma", "dnum", *com.A_KEYS}, f"{what}.{name}")
    return _bootstrap_config(m["config"], params, bt, f"{what}.config")


def _encapsulation_names(m: dict, prefix: str = "") -> set:
    return {n for name in _ENCAPSULATION
            for n in {f"{prefix}{name}.b"} | com._uniform_names(f"{prefix}{name}.", m[name]["a"])}


def _read_encapsulation(m: dict, arrays: dict, params: Params, ring, compact: bool, prefix: str = ""):
    """(to_sparse, to_dense) of a checked meta (:func:`_check_encapsulation_meta`) and ``<prefix>to_*.`` arrays."""
    to_sparse = com._read_ksk(m["to_sparse"], arrays, ring, f"{prefix}to_sparse.", compact)
    to_dense = com._read_ksk(m["to_dense"], arrays, params, f"{prefix}to_dense.", compact)
    return to_sparse, to_dense


def loads_bootstrap_keys(blob, *, params: Params | None = None, compact: bool | None = None):
    """The :class:`crossfhe.ckks.bootstrap.Keys` of a :func:`dumps_bootstrap_keys` blob, after every check of
    :func:`loads` (and the configuration re-checked against the parameters); ``compact``: the Galois and
    encapsulation keys in their compact form (:meth:`crossfhe.ckks.bootstrap.Keys.compact`), each dropped to it as it
    is read, so that the whole set is never held. None: the form ``params`` name (:attr:`Params.compact_keys`;
    parameters read from the blob alone name whole keys)."""
    from crossfhe.ckks import bootstrap as bt

    c = fmt.unpack(blob, expected_kind=KIND_BOOTSTRAP_KEYS)
    with checks.about(KIND_BOOTSTRAP_KEYS):
        params = com.header_params(SCHEME, c.fields, params)
        compact = params.compact_keys if compact is None else bool(compact)
        m = com.meta(c.fields, {"public", "relin", "galois", *_ENCAPSULATION, "config"})
        config, ring = _check_encapsulation_meta(m, params)
        ek_meta = com._check_ek_meta(SCHEME, {k: m[k] for k in ("public", "relin", "galois")})
        com.check_names(c.arrays, com._expected_ek_names(ek_meta, params) | _encapsulation_names(m))
        ek = com._read_ek_arrays(SCHEME, ek_meta, c.arrays, params, compact_galois=compact)
        to_sparse, to_dense = _read_encapsulation(m, c.arrays, params, ring, compact)
    return bt.Keys(ek, to_sparse, to_dense, ring, config)


_ENCAPSULATION = ("to_sparse", "to_dense")


def _bootstrap_config(value, params: Params, bt, what: str = "meta.config"):
    """(Config, sparse ring) of a header's meta.config (``what``), after checking it is the configuration
    :func:`crossfhe.ckks.bootstrap.config_for` gives these parameters with its slots, degree, double angles, arcsine
    degree and K."""
    if isinstance(value, dict) and "arcsine_degree" not in value:
        value = {**value, "arcsine_degree": _CONFIG_OLD_ARCSINE}
    cfg = com.keys(value, {*_CONFIG_INTS, "K"}, what)
    ints = {k: com.json_int(cfg[k], f"{what}.{k}") for k in _CONFIG_INTS}
    K = com.float_from_hex(cfg["K"], f"{what}.K")
    try:
        config = bt.Config(**ints, K=K)
        ring = bt.sparse_ring(params)
        expected = bt.config_for(params, config.slots, degree=config.degree, double_angle=config.double_angle,
                                 arcsine_degree=config.arcsine_degree, K=K)
    except (CrossFHEError, ValueError, TypeError, ArithmeticError) as e:
        raise SerializationError(f"the bootstrapping configuration {what} is invalid: {e}") from None
    if expected != config:
        raise SerializationError(f"{what} {ints} does not match the parameters' bootstrapping levels "
                                 f"(expected cts_levels = {expected.cts_levels}, stc_levels = {expected.stc_levels})")
    return config, ring


SCHEME = com.Scheme(
    name="ckks", params=Params, ciphertext=Ciphertext, plaintext=Plaintext, evaluation_keys=EvaluationKeys,
    describe=describe_params, rebuild=params_from_description, summary=_params_summary,
    write_ciphertext=_ciphertext_parts, read_ciphertext=_read_ciphertext,
    write_plaintext=_plaintext_parts, read_plaintext=_read_plaintext,
    hints={KIND_VECTOR: "an encrypted vector: load it with crossfhe.EncryptedVector.load(ctx, blob) or "
                        "crossfhe.io.loads(blob, context=ctx) (or crossfhe.io.ckks.loads_vector)",
           KIND_PUBLIC_CONTEXT: "a public context: load it with crossfhe.io.loads(blob) or "
                                "crossfhe.CKKSPublicContext.load(blob) (its evaluation keys: "
                                "crossfhe.io.ckks.loads_public_context)"},
)
"""How :mod:`crossfhe.io._common` reads and writes CKKS objects."""


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


def dumps(obj, *, params: Params | None = None) -> bytes:
    """The blob of a ckks Params, Ciphertext, Plaintext, PublicKey or EvaluationKeys (layout: module docstring).

    params: required for a PublicKey (it does not carry its parameters); for other objects, if given, it
    must equal the object's parameters. A SecretKey is refused (SerializationError): use
    :func:`dumps_secret_key`. Raises SerializationError if the object is inconsistent with its parameters
    (basis, shapes, residues out of range), TypeError for an unsupported type.
    """
    return com.dumps(SCHEME, obj, params)


def loads(blob, *, params: Params | None = None, expected=None):
    """The object of a blob written by :func:`dumps`, after every check of the module docstring.

    params: if given, the blob must be for exactly these parameters (and the result uses this instance).
    expected: the kind the caller wants, as a class (``Ciphertext``, ``Params``, ...) or kind string;
    another kind is refused. A secret-key blob is refused (use :func:`loads_secret_key`).
    Raises SerializationError naming what is wrong.
    """
    return com.loads(SCHEME, blob, params, expected)


def save(obj, path, *, params: Params | None = None) -> None:
    """Write :func:`dumps` ``(obj)`` to ``path`` atomically (a temporary file, then ``os.replace``); the
    object is serialized first, so a refused object (a SecretKey, an inconsistent ciphertext) leaves no file."""
    com.save(SCHEME, obj, path, params)


def load(path, *, params: Params | None = None, expected=None):
    """:func:`loads` of the file at ``path``."""
    return loads(fmt.read_bytes(path), params=params, expected=expected)


def dumps_secret_key(sk: SecretKey, *, params: Params) -> bytes:
    """The blob of a secret key for ``params`` (kind ``ckks.secret_key``): its coefficients int32[N].
    Explicit on purpose: whoever holds this blob can decrypt everything under the key."""
    return com.dumps_secret_key(SCHEME, sk, params)


def loads_secret_key(blob, *, params: Params) -> SecretKey:
    """The SecretKey of a :func:`dumps_secret_key` blob, which must be for ``params``."""
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
    "KIND_PARAMS",
    "KIND_PLAINTEXT",
    "KIND_PUBLIC_CONTEXT",
    "KIND_PUBLIC_KEY",
    "KIND_SECRET_KEY",
    "KIND_VECTOR",
    "VECTOR_SHAPE",
    "describe_params",
    "dumps",
    "dumps_public_context",
    "dumps_secret_key",
    "dumps_vector",
    "load",
    "load_secret_key",
    "loads",
    "loads_public_context",
    "loads_secret_key",
    "loads_vector",
    "params_from_description",
    "save",
    "save_secret_key",
]
