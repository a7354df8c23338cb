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
``ckks.ciphertext``       ``c0``, ``c1``: uint32[..., limbs, N]        scale, level, domain
``ckks.plaintext``        ``poly``: uint32[..., limbs, N]              scale, level, domain
``ckks.public_key``       ``b``: uint32[L+K, N]; seed or ``a``           sigma, a ("seed" or "stored"), a_sha256
``ckks.evaluation_keys``  ``public.*``, ``relin.*``, ``galois.<g>.*``  public, relin, galois (a list)
``ckks.secret_key``       ``coeffs``: int32[N] in {-1, 0, 1}           hamming_weight
========================  ===========================================  ======================================

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

import hashlib
import math

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.ckks.ciphertext import Ciphertext, EvaluationKeys, Plaintext
from crossfhe.ckks.params import Params
from crossfhe.core import keyswitch as ks
from crossfhe.core.keys import PublicKey, SecretKey, sample_uniform
from crossfhe.core.keyswitch import KeySwitchKey
from crossfhe.core.params import RingParams, SecretDistribution, SecurityLevel
from crossfhe.errors import CrossFHEError, SerializationError
from crossfhe.io import format as fmt
from crossfhe.io.format import is_json_int
from crossfhe.math import random as crandom
from crossfhe.ring.ntt import NTTPlan, ntt
from crossfhe.ring.poly import Domain, RNSPoly

KIND_PARAMS = "ckks.params"
KIND_CIPHERTEXT = "ckks.ciphertext"
KIND_PLAINTEXT = "ckks.plaintext"
KIND_PUBLIC_KEY = "ckks.public_key"
KIND_EVALUATION_KEYS = "ckks.evaluation_keys"
KIND_SECRET_KEY = "ckks.secret_key"

_KINDS = {
    Params: KIND_PARAMS,
    Ciphertext: KIND_CIPHERTEXT,
    Plaintext: KIND_PLAINTEXT,
    PublicKey: KIND_PUBLIC_KEY,
    EvaluationKeys: KIND_EVALUATION_KEYS,
}
_FIELDS = {"params_digest", "params", "meta"}
_A_KEYS = ("a", "a_sha256")  # how a key's uniform part is stored, and the SHA-256 of a re-expanded one
_PARAM_KEYS = {"n", "q", "p", "security", "secret", "insecure", "levels", "log_scale", "primes_per_level",
               "base_count", "dnum", "hamming_weight"}
_SECRET_REFUSAL = (
    "refusing to serialize a SecretKey with dumps/save: a secret key is written only by an explicit call, "
    "save_secret_key(sk, path, params=...) or dumps_secret_key(sk, params=...)"
)


# --------------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------------


def describe_params(params: Params) -> dict:
    """The canonical JSON description of ``params`` (every field needed to rebuild it exactly)."""
    ring = params.ring
    return {
        "n": ring.n, "q": list(ring.q), "p": list(ring.p), "security": int(ring.security),
        "secret": ring.secret.value, "insecure": ring.insecure, "levels": params.levels,
        "log_scale": params.log_scale, "primes_per_level": params.primes_per_level,
        "base_count": params.base_count, "dnum": params.dnum, "hamming_weight": params.hamming_weight,
    }  # fmt: skip


def _json_int(value, what: str) -> int:
    if not is_json_int(value):
        raise SerializationError(f"{what} must be an integer, got {value!r}")
    return value


def _int_list(value, what: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise SerializationError(f"{what} must be a list of integers, got {value!r}")
    return tuple(_json_int(v, f"{what}[{i}]") for i, v in enumerate(value))


def params_from_description(desc) -> Params:
    """Rebuild (and re-check) the Params of a :func:`describe_params` dict; SerializationError if invalid."""
    if not isinstance(desc, dict) or set(desc) != _PARAM_KEYS:
        got = sorted(desc) if isinstance(desc, dict) else type(desc).__name__
        raise SerializationError(f"parameter description must have the keys {sorted(_PARAM_KEYS)}, got {got}")
    ints = {k: _json_int(desc[k], f"params.{k}") for k in ("n", "security", "levels", "log_scale",
                                                           "primes_per_level", "base_count", "dnum")}
    h = desc["hamming_weight"]
    if h is not None:
        h = _json_int(h, "params.hamming_weight")
    if not isinstance(desc["insecure"], bool) or not isinstance(desc["secret"], str):
        raise SerializationError("params.insecure must be a bool and params.secret a string")
    try:
        ring = RingParams(n=ints["n"], q=_int_list(desc["q"], "params.q"), p=_int_list(desc["p"], "params.p"),
                          security=SecurityLevel(ints["security"]), secret=SecretDistribution(desc["secret"]),
                          insecure=desc["insecure"])
        return Params(ring, ints["levels"], ints["log_scale"], ints["primes_per_level"], ints["base_count"],
                      ints["dnum"], h)
    except (CrossFHEError, ValueError, TypeError) as e:
        raise SerializationError(f"the parameters in the header are invalid: {e}") from None


def _header_params(fields: dict, given: Params | None) -> Params:
    """The parameters of a blob: rebuilt, checked against their digest and against ``given``."""
    if set(fields) != _FIELDS:
        raise SerializationError(f"header must have the keys {sorted(_FIELDS | {'kind', 'arrays'})}, got "
                                 f"{sorted(fields | {'kind': 0, 'arrays': 0})}")
    params = params_from_description(fields["params"])
    digest = params.digest()
    if fields["params_digest"] != digest:
        raise SerializationError(f"parameter digest mismatch: the header says {str(fields['params_digest'])[:16]}..., "
                                 f"the parameters it describes hash to {digest[:16]}...")
    if given is None:
        return params
    if not isinstance(given, Params):
        raise TypeError(f"params must be ckks.Params, got {type(given).__name__}")
    if given.digest() != digest:
        raise SerializationError(
            f"the blob is for other parameters: {_params_summary(params)} (digest {digest[:16]}...), "
            f"not {_params_summary(given)} (digest {given.digest()[:16]}...)"
        )
    return given


def _params_summary(params: Params) -> str:
    return f"N = {params.n}, {len(params.q)} + {len(params.p)} primes, levels = {params.levels}, dnum = {params.dnum}"


# --------------------------------------------------------------------------------------------------
# Scalars and arrays
# --------------------------------------------------------------------------------------------------


def _float_hex(x: float, what: str) -> str:
    x = float(x)
    if not math.isfinite(x) or x <= 0:
        raise SerializationError(f"{what} must be a finite positive float, got {x!r}")
    return x.hex()


def _float_from_hex(value, what: str) -> float:
    try:
        x = float.fromhex(value) if isinstance(value, str) else None
    except (ValueError, OverflowError):
        x = None
    if x is None or not math.isfinite(x) or x <= 0:
        raise SerializationError(f"{what} must be a float.hex string of a finite positive float, got {value!r}")
    return x


def _keys(obj, keys: set, what: str) -> dict:
    """``obj`` after checking that it is a JSON object with exactly ``keys``."""
    if not isinstance(obj, dict) or set(obj) != keys:
        got = sorted(obj) if isinstance(obj, dict) else type(obj).__name__
        raise SerializationError(f"{what} must have the keys {sorted(keys)}, got {got}")
    return obj


def _meta(fields: dict, keys: set) -> dict:
    return _keys(fields.get("meta"), keys, "meta")


def _host(x, what: str) -> np.ndarray:
    try:
        return np.asarray(x)
    except jax.errors.JAXTypeError as e:
        raise SerializationError(f"cannot serialize {what} while it is traced (inside jit or vmap): {e}") from None


def _check_names(arrays: dict, names: set) -> None:
    if set(arrays) != names:
        raise SerializationError(f"the blob holds arrays {sorted(arrays)}, expected {sorted(names)}")


def _check_array(arrays: dict, name: str, dtype, shape: tuple) -> np.ndarray:
    a = arrays[name]
    if a.dtype != np.dtype(dtype) or a.shape != tuple(shape):
        raise SerializationError(f"array {name!r} is {a.dtype}{list(a.shape)}, expected {np.dtype(dtype)}{list(shape)}")
    return a


def _check_residues(data: np.ndarray, moduli: tuple[int, ...], name: str) -> None:
    """Every residue of ``data`` [..., limbs, N] below its limb's modulus."""
    q = np.asarray(moduli, dtype=np.uint32).reshape(-1, 1)
    bad = data >= q
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        raise SerializationError(
            f"array {name!r} holds {int(data[index])} at index {index}, not below its modulus "
            f"q = {moduli[index[-2]]}: out of range (corrupted or tampered)"
        )


def _poly_array(poly, moduli: tuple[int, ...], n: int, name: str) -> np.ndarray:
    """The residues of an RNSPoly after checking its basis, dtype and range (the writer's checks)."""
    if not isinstance(poly, RNSPoly):
        raise SerializationError(f"{name} must be an RNSPoly, got {type(poly).__name__}")
    if poly.basis != tuple(moduli) or poly.n != n:
        raise SerializationError(
            f"{name} is over {poly.basis} with N = {poly.n}, expected {tuple(moduli)} with N = {n}"
        )
    data = _host(poly.data, name)
    if data.dtype != np.uint32:
        raise SerializationError(f"{name} has dtype {data.dtype}, expected uint32")
    _check_residues(data, moduli, name)
    return data


def _load_poly(arrays: dict, name: str, shape: tuple, moduli: tuple[int, ...], domain: Domain) -> RNSPoly:
    data = _check_array(arrays, name, np.uint32, shape)
    _check_residues(data, moduli, name)
    return RNSPoly(jnp.asarray(data), tuple(moduli), domain)


def _domain(value) -> Domain:
    try:
        return Domain(value)
    except ValueError:
        raise SerializationError(f"meta.domain must be one of {[d.value for d in Domain]}, got {value!r}") from None


def _level(value, params: Params) -> int:
    level = _json_int(value, "meta.level")
    if not 0 <= level <= params.levels:
        raise SerializationError(f"meta.level = {level} is not a level of the parameters (0 ... {params.levels})")
    return level


# --------------------------------------------------------------------------------------------------
# Ciphertexts and plaintexts
# --------------------------------------------------------------------------------------------------


def _poly_level(poly, params: Params, name: str) -> int:
    if not isinstance(poly, RNSPoly):
        raise SerializationError(f"{name} must be an RNSPoly, got {type(poly).__name__}")
    try:
        return params.level_of(poly.limbs)
    except CrossFHEError as e:
        raise SerializationError(f"{name}: {e}") from None


def _leveled_meta(scale: float, level: int, domain: Domain) -> dict:
    return {"scale": _float_hex(scale, "scale"), "level": level, "domain": domain.value}


def _read_leveled_meta(fields: dict, params: Params) -> tuple[float, tuple[int, ...], Domain]:
    meta = _meta(fields, {"scale", "level", "domain"})
    moduli = params.moduli_at(_level(meta["level"], params))
    return _float_from_hex(meta["scale"], "meta.scale"), moduli, _domain(meta["domain"])


def _batch_shape(arrays: dict, name: str, moduli: tuple[int, ...], n: int) -> tuple[int, ...]:
    shape = arrays[name].shape
    if len(shape) < 2 or shape[-2:] != (len(moduli), n):
        raise SerializationError(f"array {name!r} has shape {list(shape)}, expected [..., {len(moduli)}, {n}]")
    return shape


def _ciphertext_parts(ct: Ciphertext):
    params = ct.params
    level = _poly_level(ct.c0, params, "c0")
    moduli = params.moduli_at(level)
    c0, c1 = _poly_array(ct.c0, moduli, params.n, "c0"), _poly_array(ct.c1, moduli, params.n, "c1")
    if c0.shape != c1.shape or ct.c0.domain != ct.c1.domain:
        raise SerializationError(f"c0 {list(c0.shape)} {ct.c0.domain.name} and c1 {list(c1.shape)} "
                                 f"{ct.c1.domain.name} differ in shape or domain")
    return _leveled_meta(ct.scale, level, ct.c0.domain), {"c0": c0, "c1": c1}


def _read_ciphertext(c: fmt.Container, params: Params) -> Ciphertext:
    scale, moduli, domain = _read_leveled_meta(c.fields, params)
    _check_names(c.arrays, {"c0", "c1"})
    shape = _batch_shape(c.arrays, "c0", moduli, params.n)
    c0 = _load_poly(c.arrays, "c0", shape, moduli, domain)
    c1 = _load_poly(c.arrays, "c1", shape, moduli, domain)
    return Ciphertext(c0, c1, params, scale)


def _plaintext_parts(pt: Plaintext):
    params = pt.params
    level = _poly_level(pt.poly, params, "poly")
    data = _poly_array(pt.poly, params.moduli_at(level), params.n, "poly")
    return _leveled_meta(pt.scale, level, pt.poly.domain), {"poly": data}


def _read_plaintext(c: fmt.Container, params: Params) -> Plaintext:
    scale, moduli, domain = _read_leveled_meta(c.fields, params)
    _check_names(c.arrays, {"poly"})
    shape = _batch_shape(c.arrays, "poly", moduli, params.n)
    return Plaintext(_load_poly(c.arrays, "poly", shape, moduli, domain), params, scale)


# --------------------------------------------------------------------------------------------------
# Seeded uniform parts
# --------------------------------------------------------------------------------------------------


def _seed_reproduces(seed, a: np.ndarray, expand) -> bool:
    """True if ``seed`` is a single ChaChaKey whose expansion ``expand(seed)`` equals ``a`` bit for bit."""
    if not isinstance(seed, crandom.ChaChaKey) or seed.shape != ():
        return False
    return np.array_equal(np.asarray(expand(seed).data), a)


def _sha256_words(a) -> str:
    """SHA-256 (hex) of the little-endian uint32 words of ``a``."""
    return hashlib.sha256(np.ascontiguousarray(np.asarray(a), dtype="<u4").tobytes()).hexdigest()


def _uniform_part(prefix: str, seed, a: np.ndarray, expand) -> tuple[dict, dict]:
    """(meta, arrays): {"a": "seed", "a_sha256": SHA-256 of a} and the seed's arrays when the seed
    re-expands to ``a``, else {"a": "stored", "a_sha256": None} and ``a`` itself."""
    if _seed_reproduces(seed, a, expand):
        words, stream = _host(seed.words, "seed"), _host(seed.stream, "seed")
        seed_arrays = {f"{prefix}seed.words": words, f"{prefix}seed.stream": stream}
        return {"a": "seed", "a_sha256": _sha256_words(a)}, seed_arrays
    return {"a": "stored", "a_sha256": None}, {f"{prefix}a": a}


def _uniform_names(prefix: str, how) -> set:
    if how == "seed":
        return {f"{prefix}seed.words", f"{prefix}seed.stream"}
    if how == "stored":
        return {f"{prefix}a"}
    raise SerializationError(f'{prefix}meta "a" must be "seed" or "stored", got {how!r}')


def _load_uniform(arrays: dict, prefix: str, meta: dict, shape: tuple, moduli, expand):
    """(a, seed): a re-expanded from its seed and checked against ``a_sha256`` (which catches a sampler
    that no longer expands seeds as the writer's did), or a stored array and seed None."""
    if meta["a"] == "stored":
        return _load_poly(arrays, f"{prefix}a", shape, moduli, Domain.EVAL), None
    words = _check_array(arrays, f"{prefix}seed.words", np.uint32, (8,))
    stream = _check_array(arrays, f"{prefix}seed.stream", np.uint32, (2,))
    seed = crandom.ChaChaKey(jnp.asarray(words), jnp.asarray(stream))
    a = expand(seed)
    if _sha256_words(a.data) != meta["a_sha256"]:
        raise SerializationError(
            f"{prefix}a re-expanded from its seed does not match the SHA-256 the writer recorded: the seed was "
            "altered, or this library's sampler expands seeds differently from the writer's"
        )
    return a, seed


# --------------------------------------------------------------------------------------------------
# Public keys and key-switching keys
# --------------------------------------------------------------------------------------------------


def _pk_expand(params: Params):
    return lambda seed: sample_uniform(seed, params.q + params.p, params.n, domain=Domain.EVAL)


def _public_key_parts(pk: PublicKey, params: Params, prefix: str = ""):
    if not isinstance(pk, PublicKey):
        raise SerializationError(f"expected a PublicKey, got {type(pk).__name__}")
    moduli = params.q + params.p
    b = _poly_array(pk.b, moduli, params.n, f"{prefix}b")
    a = _poly_array(pk.a, moduli, params.n, f"{prefix}a")
    if b.shape != (len(moduli), params.n):
        raise SerializationError(f"{prefix}b has shape {list(b.shape)}, expected [{len(moduli)}, {params.n}]")
    a_meta, arrays = _uniform_part(prefix, pk.seed, a, _pk_expand(params))
    return {"sigma": _float_hex(pk.sigma, "sigma"), **a_meta}, {f"{prefix}b": b, **arrays}


def _read_public_key(meta, arrays: dict, params: Params, prefix: str = "") -> PublicKey:
    sigma = _float_from_hex(meta["sigma"], f"{prefix}sigma")
    moduli = params.q + params.p
    shape = (len(moduli), params.n)
    b = _load_poly(arrays, f"{prefix}b", shape, moduli, Domain.EVAL)
    a, seed = _load_uniform(arrays, prefix, meta, shape, moduli, _pk_expand(params))
    return PublicKey(b=b, a=a, seed=seed, sigma=sigma)


def _ksk_expand(params: Params, digits: int):
    return lambda seed: ks.expand_keyswitch_a(seed, params.q + params.p, params.n, digits)


def _ksk_digits(params: Params, dnum, what: str) -> int:
    dnum = _json_int(dnum, f"{what}.dnum")
    try:
        return len(ks.digit_groups(len(params.q), dnum))
    except CrossFHEError as e:
        raise SerializationError(f"{what}.dnum: {e}") from None


def _ksk_parts(ksk: KeySwitchKey, params: Params, prefix: str):
    if not isinstance(ksk, KeySwitchKey):
        raise SerializationError(f"{prefix}: expected a KeySwitchKey, got {type(ksk).__name__}")
    if (ksk.q, ksk.p) != (params.q, params.p):
        raise SerializationError(f"{prefix}: the key is for q = {ksk.q}, p = {ksk.p}, not the parameters' primes")
    moduli = params.q + params.p
    b = _poly_array(ksk.b, moduli, params.n, f"{prefix}b")
    a = _poly_array(ksk.a, moduli, params.n, f"{prefix}a")
    digits = _ksk_digits(params, int(ksk.dnum), prefix)
    if b.shape != (digits, len(moduli), params.n) or a.shape != b.shape:
        raise SerializationError(f"{prefix}: b {list(b.shape)} / a {list(a.shape)}, expected "
                                 f"[{digits}, {len(moduli)}, {params.n}] for dnum = {ksk.dnum}")
    a_meta, arrays = _uniform_part(prefix, ksk.seed, a, _ksk_expand(params, digits))
    meta = {"sigma": _float_hex(ksk.sigma, f"{prefix}sigma"), "dnum": int(ksk.dnum), **a_meta}
    return meta, {f"{prefix}b": b, **arrays}


def _read_ksk(meta, arrays: dict, params: Params, prefix: str) -> KeySwitchKey:
    sigma = _float_from_hex(meta["sigma"], f"{prefix}sigma")
    digits = _ksk_digits(params, meta["dnum"], prefix)
    moduli = params.q + params.p
    shape = (digits, len(moduli), params.n)
    b = _load_poly(arrays, f"{prefix}b", shape, moduli, Domain.EVAL)
    a, seed = _load_uniform(arrays, prefix, meta, shape, moduli, _ksk_expand(params, digits))
    return KeySwitchKey(b=b, a=a, seed=seed, q=params.q, p=params.p, dnum=meta["dnum"], sigma=sigma)


# --------------------------------------------------------------------------------------------------
# Evaluation keys
# --------------------------------------------------------------------------------------------------


def _evaluation_keys_parts(ek: EvaluationKeys):
    params = ek.params
    pk_meta, arrays = _public_key_parts(ek.public, params, "public.")
    relin_meta, relin_arrays = _ksk_parts(ek.relin, params, "relin.")
    arrays.update(relin_arrays)
    galois_meta = []
    for g in sorted(ek.galois):
        g_meta, g_arrays = _ksk_parts(ek.galois[g], params, f"galois.{int(g)}.")
        galois_meta.append({"element": int(g), **g_meta})
        arrays.update(g_arrays)
    return {"public": pk_meta, "relin": relin_meta, "galois": galois_meta}, arrays


def _galois_element(value, params: Params) -> int:
    g = _json_int(value, "galois element")
    if not (1 <= g < 2 * params.n and g % 2):
        raise SerializationError(f"galois element {g} must be odd and in [1, 2N = {2 * params.n})")
    return g


def _expected_ek_names(meta: dict, params: Params) -> set:
    names = {"public.b", "relin.b"} | _uniform_names("public.", meta["public"].get("a"))
    names |= _uniform_names("relin.", meta["relin"].get("a"))
    for entry in meta["galois"]:
        g = _galois_element(entry["element"], params)
        names |= {f"galois.{g}.b"} | _uniform_names(f"galois.{g}.", entry.get("a"))
    return names


def _read_evaluation_keys(c: fmt.Container, params: Params) -> EvaluationKeys:
    meta = _meta(c.fields, {"public", "relin", "galois"})
    _keys(meta["relin"], {"sigma", "dnum", *_A_KEYS}, "meta.relin")
    _keys(meta["public"], {"sigma", *_A_KEYS}, "meta.public")
    if not isinstance(meta["galois"], list):
        raise SerializationError("meta.galois must be a list")
    for i, entry in enumerate(meta["galois"]):
        _keys(entry, {"element", "sigma", "dnum", *_A_KEYS}, f"meta.galois[{i}]")
    _check_names(c.arrays, _expected_ek_names(meta, params))
    public = _read_public_key(meta["public"], c.arrays, params, "public.")
    relin = _read_ksk(meta["relin"], c.arrays, params, "relin.")
    galois = {}
    for entry in meta["galois"]:
        g = _galois_element(entry["element"], params)
        if g in galois:
            raise SerializationError(f"galois element {g} appears twice")
        galois[g] = _read_ksk(entry, c.arrays, params, f"galois.{g}.")
    return EvaluationKeys(public=public, relin=relin, galois=galois, params=params)


def _read_public_key_blob(c: fmt.Container, params: Params) -> PublicKey:
    meta = _meta(c.fields, {"sigma", *_A_KEYS})
    _check_names(c.arrays, {"b"} | _uniform_names("", meta["a"]))
    return _read_public_key(meta, c.arrays, params)


# --------------------------------------------------------------------------------------------------
# Secret keys
# --------------------------------------------------------------------------------------------------


def _secret_key_parts(sk: SecretKey, params: Params):
    if not isinstance(sk, SecretKey):
        raise TypeError(f"expected a SecretKey, got {type(sk).__name__}")
    if (sk.n, sk.q, sk.p) != (params.n, params.q, params.p):
        raise SerializationError(f"the secret key is for N = {sk.n}, q = {sk.q}, p = {sk.p}; the parameters "
                                 f"are {_params_summary(params)}")
    coeffs = _host(sk.coeffs, "coeffs")
    if coeffs.dtype != np.int32 or coeffs.shape != (params.n,):
        raise SerializationError(
            f"secret coefficients are {coeffs.dtype}{list(coeffs.shape)}, expected int32[{params.n}]"
        )
    h = sk.hamming_weight
    return {"hamming_weight": None if h is None else int(h)}, {"coeffs": coeffs}


def _secret_poly(coeffs: np.ndarray, params: Params) -> RNSPoly:
    """The EVAL residues of s over Q_L ∪ P, computed as ``gen_secret_key`` computes them."""
    moduli = params.q + params.p
    qcol = np.array(moduli, dtype=np.uint32).reshape(-1, 1)
    residues = crandom.to_residues(jnp.asarray(coeffs)[None, :], qcol)
    return RNSPoly(ntt(residues, NTTPlan.create(params.n, moduli)), moduli, Domain.EVAL)


def _read_secret_key(c: fmt.Container, params: Params) -> SecretKey:
    meta = _meta(c.fields, {"hamming_weight"})
    h = meta["hamming_weight"]
    _check_names(c.arrays, {"coeffs"})
    coeffs = _check_array(c.arrays, "coeffs", np.int32, (params.n,))
    if np.any(np.abs(coeffs) > 1):
        raise SerializationError("secret coefficients must be in {-1, 0, 1} (corrupted or tampered)")
    if h is not None and (not is_json_int(h) or int(np.count_nonzero(coeffs)) != h):
        raise SerializationError(f"meta.hamming_weight = {h!r}, but the key has {np.count_nonzero(coeffs)} nonzero "
                                 "coefficients")
    poly = _secret_poly(coeffs, params)
    return SecretKey(coeffs=jnp.asarray(coeffs), poly=poly, q=params.q, p=params.p, hamming_weight=h)


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


def _parts(obj, params: Params | None):
    """(kind, params, meta, arrays) of a serializable object."""
    if isinstance(obj, SecretKey):
        raise SerializationError(_SECRET_REFUSAL)
    kind = _KINDS.get(type(obj))
    if kind is None:
        raise TypeError(f"dumps takes ckks.Params, Ciphertext, Plaintext, PublicKey or EvaluationKeys, got "
                        f"{type(obj).__name__}")
    if kind == KIND_PUBLIC_KEY:
        if params is None:
            raise SerializationError("a PublicKey does not carry its parameters: pass dumps(pk, params=...)")
        return kind, params, *_public_key_parts(obj, params)
    own = obj if kind == KIND_PARAMS else obj.params
    if params is not None and params != own:
        raise SerializationError(f"params = {_params_summary(params)} differ from the object's own parameters")
    if kind == KIND_PARAMS:
        return kind, own, {}, {}
    parts = {KIND_CIPHERTEXT: _ciphertext_parts, KIND_PLAINTEXT: _plaintext_parts,
             KIND_EVALUATION_KEYS: _evaluation_keys_parts}[kind]
    return kind, own, *parts(obj)


def _pack(kind: str, params: Params, meta: dict, arrays: dict) -> bytes:
    fields = {"params_digest": params.digest(), "params": describe_params(params), "meta": meta}
    return fmt.pack(kind, fields, arrays)


def dumps(obj, *, params: Params | None = None) -> bytes:
    """The blob of a ckks Params, Ciphertext, Plaintext, PublicKey or EvaluationKeys (layout: module docstring).

    params: required for a PublicKey (it does not carry its parameters); for other objects, if given, it
    must equal the object's parameters. A SecretKey is refused (SerializationError): use
    :func:`dumps_secret_key`. Raises SerializationError if the object is inconsistent with its parameters
    (basis, shapes, residues out of range), TypeError for an unsupported type.
    """
    return _pack(*_parts(obj, params))


def _read_params(c: fmt.Container, params: Params) -> Params:
    _meta(c.fields, set())
    _check_names(c.arrays, set())
    return params


_READERS = {
    KIND_PARAMS: _read_params,
    KIND_CIPHERTEXT: _read_ciphertext,
    KIND_PLAINTEXT: _read_plaintext,
    KIND_PUBLIC_KEY: _read_public_key_blob,
    KIND_EVALUATION_KEYS: _read_evaluation_keys,
}


def _expected_kind(expected):
    if expected is None or isinstance(expected, str):
        return expected
    if expected is SecretKey:
        raise SerializationError("load a secret key with load_secret_key / loads_secret_key")
    try:
        return _KINDS[expected]
    except (KeyError, TypeError):
        raise TypeError(f"expected must be a kind string or one of {[t.__name__ for t in _KINDS]}, "
                        f"got {expected!r}") from None


def loads(blob, *, params: Params | None = None, expected=None):
    """The object of a blob written by :func:`dumps`, after every check of the module docstring.

    params: if given, the blob must be for exactly these parameters (and the result uses this instance).
    expected: the kind the caller wants, as a class (``Ciphertext``, ``Params``, ...) or kind string;
    another kind is refused. A secret-key blob is refused (use :func:`loads_secret_key`).
    Raises SerializationError naming what is wrong.
    """
    c = fmt.unpack(blob, expected_kind=_expected_kind(expected))
    if c.kind == KIND_SECRET_KEY:
        raise SerializationError("the blob holds a secret key: load it explicitly with load_secret_key / "
                                 "loads_secret_key")
    reader = _READERS.get(c.kind)
    if reader is None:
        raise SerializationError(f"unknown kind {c.kind!r}; this library reads {sorted(_READERS)}")
    return reader(c, _header_params(c.fields, params))


def save(obj, path, *, params: Params | None = None) -> None:
    """Write :func:`dumps` ``(obj)`` to ``path`` atomically (a temporary file, then ``os.replace``); the
    object is serialized first, so a refused object (a SecretKey, an inconsistent ciphertext) leaves no file."""
    fmt.write_atomic(path, dumps(obj, params=params))


def load(path, *, params: Params | None = None, expected=None):
    """:func:`loads` of the file at ``path``."""
    return loads(fmt.read_bytes(path), params=params, expected=expected)


def dumps_secret_key(sk: SecretKey, *, params: Params) -> bytes:
    """The blob of a secret key for ``params`` (kind ``ckks.secret_key``): its coefficients int32[N].
    Explicit on purpose: whoever holds this blob can decrypt everything under the key."""
    if not isinstance(params, Params):
        raise TypeError(f"params must be ckks.Params, got {type(params).__name__}")
    return _pack(KIND_SECRET_KEY, params, *_secret_key_parts(sk, params))


def loads_secret_key(blob, *, params: Params) -> SecretKey:
    """The SecretKey of a :func:`dumps_secret_key` blob, which must be for ``params``."""
    if not isinstance(params, Params):
        raise TypeError(f"params must be ckks.Params, got {type(params).__name__}")
    c = fmt.unpack(blob, expected_kind=KIND_SECRET_KEY)
    return _read_secret_key(c, _header_params(c.fields, params))


def save_secret_key(sk: SecretKey, path, *, params: Params) -> None:
    """Write :func:`dumps_secret_key` to ``path`` atomically, readable by the owner only (mode 0o600)."""
    fmt.write_atomic(path, dumps_secret_key(sk, params=params), mode=0o600)


def load_secret_key(path, *, params: Params) -> SecretKey:
    """:func:`loads_secret_key` of the file at ``path``."""
    return loads_secret_key(fmt.read_bytes(path), params=params)


__all__ = [
    "KIND_CIPHERTEXT",
    "KIND_EVALUATION_KEYS",
    "KIND_PARAMS",
    "KIND_PLAINTEXT",
    "KIND_PUBLIC_KEY",
    "KIND_SECRET_KEY",
    "describe_params",
    "dumps",
    "dumps_secret_key",
    "load",
    "load_secret_key",
    "loads",
    "loads_secret_key",
    "params_from_description",
    "save",
    "save_secret_key",
]
