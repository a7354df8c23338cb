"""What the schemes' serializers share: the parameter header, array and residue checks, seeded keys,
evaluation and secret keys, and dumps / loads driven by a :class:`Scheme`.

:mod:`crossfhe.io.ckks` and :mod:`crossfhe.io.bfv` describe their own parameters, ciphertexts and
plaintexts and hand them to these functions; the layouts are documented in those modules. Public keys,
key-switching keys, evaluation keys and secret keys come from :mod:`crossfhe.core`, so they are stored the
same way in every scheme (only the kind's prefix and the parameter description differ).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.core import keyswitch as ks
from crossfhe.core.keys import PublicKey, SecretKey, key_id, sample_uniform
from crossfhe.core.keyswitch import KeySwitchKey
from crossfhe.core.params import RingParams, SecretDistribution, SecurityLevel
from crossfhe.errors import CrossFHEError, SerializationError
from crossfhe.io import checks
from crossfhe.io import format as fmt
from crossfhe.io.format import is_json_int
from crossfhe.math import random as crandom
from crossfhe.ring.ntt import NTTPlan, ntt
from crossfhe.ring.poly import Domain, RNSPoly

FIELDS = {"params_digest", "params", "meta"}
A_KEYS = ("a", "a_sha256")  # how a key's uniform part is stored, and the SHA-256 of a re-expanded one
SCHEME_NAMES = ("bfv", "ckks", "tfhe")  # the kind prefixes of crossfhe.io's modules
SECRET_REFUSAL = (
    "refusing to serialize a SecretKey with dumps/save: a secret key is written only by an explicit call, "
    "save_secret_key(sk, path, params=...) or dumps_secret_key(sk, params=...)"
)


# --------------------------------------------------------------------------------------------------
# Schemes
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scheme:
    """What one scheme plugs into the shared code: its name (kinds are ``"<name>.<object>"``), its types,
    how its parameters are described, rebuilt and summarized in messages, and how its ciphertexts and
    plaintexts become (meta, arrays) and back. ``relin_optional``: whether evaluation keys may lack the
    relinearization key (stored as meta ``"relin": null``). ``hints``: kind -> what the blob holds and how to
    load it, for kinds of this scheme that :func:`loads` does not read."""

    name: str
    params: type
    ciphertext: type
    plaintext: type
    evaluation_keys: type
    describe: Callable
    rebuild: Callable
    summary: Callable
    write_ciphertext: Callable
    read_ciphertext: Callable
    write_plaintext: Callable
    read_plaintext: Callable
    relin_optional: bool = False
    hints: dict = field(default_factory=dict)

    @property
    def kinds(self) -> dict:
        """Object type -> kind, for every type :func:`dumps` takes."""
        types = {"params": self.params, "ciphertext": self.ciphertext, "plaintext": self.plaintext,
                 "public_key": PublicKey, "evaluation_keys": self.evaluation_keys}
        return {t: f"{self.name}.{what}" for what, t in types.items()}

    @property
    def secret_kind(self) -> str:
        return f"{self.name}.secret_key"

    def check_params(self, params) -> None:
        if not isinstance(params, self.params):
            raise TypeError(f"params must be {self.name}.Params, got {type(params).__name__}")


# --------------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------------


def describe_ring(ring: RingParams) -> dict:
    """The ring's part of a parameter description: ``n``, the primes ``q`` and ``p``, ``security``,
    ``secret``, ``insecure``, ``hamming_weight`` (null for a uniform ternary secret)."""
    return {"n": ring.n, "q": list(ring.q), "p": list(ring.p), "security": int(ring.security),
            "secret": ring.secret.value, "insecure": ring.insecure, "hamming_weight": ring.hamming_weight}


def json_int(value, what: str) -> int:
    if not is_json_int(value):
        raise SerializationError(f"{what} must be an integer, got {value!r}")
    return value


def _int_list(value, what: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise SerializationError(f"{what} must be a list of integers, got {value!r}")
    return tuple(json_int(v, f"{what}[{i}]") for i, v in enumerate(value))


def params_from_description(desc, int_keys: tuple[str, ...], build: Callable):
    """Rebuild the parameters of a description holding the ring's keys (:func:`describe_ring`),
    ``hamming_weight`` (an int or null) and the integers ``int_keys``: ``build(ring, ints)``, where
    ``ints`` maps "n", "security" and ``int_keys`` to their values. SerializationError if invalid."""
    keys = {"n", "q", "p", "security", "secret", "insecure", "hamming_weight", *int_keys}
    if not isinstance(desc, dict) or set(desc) != keys:
        got = sorted(desc) if isinstance(desc, dict) else type(desc).__name__
        raise SerializationError(f"parameter description must have the keys {sorted(keys)}, got {got}")
    ints = {k: json_int(desc[k], f"params.{k}") for k in ("n", "security", *int_keys)}
    h = desc["hamming_weight"]
    if h is not None:
        h = json_int(h, "params.hamming_weight")
    if not isinstance(desc["insecure"], bool) or not isinstance(desc["secret"], str):
        raise SerializationError("params.insecure must be a bool and params.secret a string")
    try:
        ring = RingParams(n=ints["n"], q=_int_list(desc["q"], "params.q"), p=_int_list(desc["p"], "params.p"),
                          security=SecurityLevel(ints["security"]), secret=SecretDistribution(desc["secret"]),
                          insecure=desc["insecure"], hamming_weight=h)
        return build(ring, ints)
    except (CrossFHEError, ValueError, TypeError, ArithmeticError) as e:
        raise SerializationError(f"the parameters in the header are invalid: {e}") from None


def header_params(scheme: Scheme, fields: dict, given):
    """The parameters of a blob: rebuilt, checked against their digest and against ``given``."""
    if set(fields) != FIELDS:
        raise SerializationError(f"header must have the keys {sorted(FIELDS | {'kind', 'arrays'})}, got "
                                 f"{sorted(fields | {'kind': 0, 'arrays': 0})}")
    return checked_params(scheme.rebuild(fields["params"]), fields["params_digest"], given, scheme.summary,
                          check_given=scheme.check_params)


def checked_params(params, claimed, given, summary, *, digest_what: str = "parameter digest", which: str = "",
                   check_given=None):
    """``params`` (rebuilt from a header) after checking that they hash to the header's ``claimed`` digest; where
    ``given`` (the caller's parameters) is not None, ``given`` after ``check_given(given)`` and checking that it is
    the same parameters. SerializationError naming ``digest_what`` or ``which`` ("CKKS ", ...) parameters, with
    ``summary`` of each."""
    digest = params.digest()
    if claimed != digest:
        raise SerializationError(f"{digest_what} mismatch: the header says {str(claimed)[:16]}..., the parameters it "
                                 f"describes hash to {digest[:16]}...")
    if given is None:
        return params
    if check_given is not None:
        check_given(given)
    if given.digest() != digest:
        raise SerializationError(f"the blob is for other {which}parameters: {summary(params)} (digest "
                                 f"{digest[:16]}...), not {summary(given)} (digest {given.digest()[:16]}...)")
    return given


# --------------------------------------------------------------------------------------------------
# Scalars and arrays
# --------------------------------------------------------------------------------------------------


def float_hex(x: float, what: str) -> str:
    x = float(x)
    if not math.isfinite(x) or x <= 0:
        raise SerializationError(f"{what} must be a finite positive float, got {x!r}")
    return x.hex()


def float_from_hex(value, what: str) -> float:
    try:
        x = float.fromhex(value) if isinstance(value, str) else None
    except (ValueError, OverflowError):
        x = None
    if x is None or not math.isfinite(x) or x <= 0:
        raise SerializationError(f"{what} must be a float.hex string of a finite positive float, got {value!r}")
    return x


def keys(obj, names: set, what: str) -> dict:
    """``obj`` after checking that it is a JSON object with exactly the keys ``names``."""
    if not isinstance(obj, dict) or set(obj) != names:
        got = sorted(obj) if isinstance(obj, dict) else type(obj).__name__
        raise SerializationError(f"{what} must have the keys {sorted(names)}, got {got}")
    return obj


def meta(fields: dict, names: set, optional: frozenset = frozenset()) -> dict:
    """The ``meta`` object of a header, which must hold the keys ``names`` and may hold ``optional`` ones
    (keys newer writers add: absent ones read as None)."""
    obj = fields.get("meta")
    if isinstance(obj, dict) and names <= set(obj) <= names | optional:
        return {**dict.fromkeys(optional), **obj}
    return keys(obj, names, "meta")


KEY_ID = frozenset({"key_id"})
"""The optional meta key of ciphertexts and secret keys: the key pair's id (:func:`crossfhe.core.keys.key_id`)."""


def key_id_meta(kid: str | None) -> dict:
    """``{"key_id": kid}`` for an object made under a known key pair, else ``{}``."""
    return {} if kid is None else {"key_id": kid}


def read_key_id(value):
    """A stored key id (32 lowercase hex digits) or None; SerializationError otherwise."""
    if value is None:
        return None
    if not (isinstance(value, str) and len(value) == 32 and all(ch in "0123456789abcdef" for ch in value)):
        raise SerializationError(f"meta.key_id must be 32 lowercase hex digits, got {value!r}")
    return value


def host(x, what: str) -> np.ndarray:
    try:
        return np.asarray(x)
    except jax.errors.JAXTypeError as e:
        raise SerializationError(f"cannot serialize {what} while it is traced (inside jit or vmap): {e}") from None


def check_names(arrays: dict, names: set) -> None:
    """Exactly the arrays ``names``; the message names the missing and the unexpected ones."""
    if set(arrays) != names:
        missing, extra = sorted(names - set(arrays)), sorted(set(arrays) - names)
        parts = ([f"missing {missing}"] if missing else []) + ([f"unexpected {extra}"] if extra else [])
        raise SerializationError(f"the blob holds arrays {sorted(arrays)}, expected {sorted(names)} "
                                 f"({', '.join(parts)})")


def check_array(arrays: dict, name: str, dtype, shape: tuple) -> np.ndarray:
    """Array ``name`` after checking that it is present, of ``dtype`` and of ``shape``."""
    a = arrays.get(name)
    if a is None:
        raise SerializationError(f"the blob has no array {name!r} (it holds {sorted(arrays)})")
    if a.dtype != np.dtype(dtype) or a.shape != tuple(shape):
        raise SerializationError(f"array {name!r} is {a.dtype}{list(a.shape)}, expected {np.dtype(dtype)}{list(shape)}")
    return a


def check_residues(data: np.ndarray, moduli: tuple[int, ...], name: str) -> None:
    """Every residue of ``data`` [..., limbs, N] below its limb's modulus (:func:`.checks.check_residues`)."""
    checks.check_residues(data, moduli, what=f"array {name!r}")


def poly_array(poly, moduli: tuple[int, ...], n: int, name: str) -> np.ndarray:
    """The residues of an RNSPoly after checking its basis, dtype and range (the writer's checks)."""
    if not isinstance(poly, RNSPoly):
        raise SerializationError(f"{name} must be an RNSPoly, got {type(poly).__name__}")
    if poly.basis != tuple(moduli) or poly.n != n:
        raise SerializationError(
            f"{name} is over {poly.basis} with N = {poly.n}, expected {tuple(moduli)} with N = {n}"
        )
    data = host(poly.data, name)
    if data.dtype != np.uint32:
        raise SerializationError(f"{name} has dtype {data.dtype}, expected uint32")
    check_residues(data, moduli, name)
    return data


def load_poly(arrays: dict, name: str, shape: tuple, moduli: tuple[int, ...], domain: Domain) -> RNSPoly:
    data = check_array(arrays, name, np.uint32, shape)
    check_residues(data, moduli, name)
    return RNSPoly(jnp.asarray(data), tuple(moduli), domain)


def batch_shape(arrays: dict, name: str, tail: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of array ``name`` after checking that it ends in ``tail`` (leading axes batch)."""
    shape = arrays[name].shape
    if len(shape) < len(tail) or shape[len(shape) - len(tail) :] != tuple(tail):
        raise SerializationError(f"array {name!r} has shape {list(shape)}, expected [..., {', '.join(map(str, tail))}]")
    return shape


def pair_arrays(c0, c1, moduli: tuple[int, ...], n: int) -> dict:
    """{"c0", "c1"}: a ciphertext's residues over ``moduli``, checked, of one shape and domain."""
    d0, d1 = poly_array(c0, moduli, n, "c0"), poly_array(c1, moduli, n, "c1")
    if d0.shape != d1.shape or c0.domain != c1.domain:
        raise SerializationError(f"c0 {list(d0.shape)} {c0.domain.name} and c1 {list(d1.shape)} "
                                 f"{c1.domain.name} differ in shape or domain")
    return {"c0": d0, "c1": d1}


def read_pair(arrays: dict, moduli: tuple[int, ...], n: int, domain: Domain) -> tuple[RNSPoly, RNSPoly]:
    """(c0, c1) of a blob that holds exactly the arrays c0 and c1, uint32[..., limbs, N] over ``moduli``."""
    check_names(arrays, {"c0", "c1"})
    shape = batch_shape(arrays, "c0", (len(moduli), n))
    return load_poly(arrays, "c0", shape, moduli, domain), load_poly(arrays, "c1", shape, moduli, domain)


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
        words, stream = host(seed.words, "seed"), host(seed.stream, "seed")
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
        return load_poly(arrays, f"{prefix}a", shape, moduli, Domain.EVAL), None
    words = check_array(arrays, f"{prefix}seed.words", np.uint32, (8,))
    stream = check_array(arrays, f"{prefix}seed.stream", np.uint32, (2,))
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


def _pk_expand(params):
    return lambda seed: sample_uniform(seed, params.q + params.p, params.n, domain=Domain.EVAL)


def public_key_parts(pk: PublicKey, params, prefix: str = ""):
    if not isinstance(pk, PublicKey):
        raise SerializationError(f"expected a PublicKey, got {type(pk).__name__}")
    moduli = params.q + params.p
    b = poly_array(pk.b, moduli, params.n, f"{prefix}b")
    a = poly_array(pk.a, moduli, params.n, f"{prefix}a")
    if b.shape != (len(moduli), params.n):
        raise SerializationError(f"{prefix}b has shape {list(b.shape)}, expected [{len(moduli)}, {params.n}]")
    a_meta, arrays = _uniform_part(prefix, pk.seed, a, _pk_expand(params))
    return {"sigma": float_hex(pk.sigma, "sigma"), **a_meta}, {f"{prefix}b": b, **arrays}


def _read_public_key(meta, arrays: dict, params, prefix: str = "") -> PublicKey:
    sigma = float_from_hex(meta["sigma"], f"{prefix}sigma")
    moduli = params.q + params.p
    shape = (len(moduli), params.n)
    b = load_poly(arrays, f"{prefix}b", shape, moduli, Domain.EVAL)
    a, seed = _load_uniform(arrays, prefix, meta, shape, moduli, _pk_expand(params))
    return PublicKey(b=b, a=a, seed=seed, sigma=sigma, key_id=key_id(b))


def _ksk_expand(params, digits: int):
    return lambda seed: ks.expand_keyswitch_a(seed, params.q + params.p, params.n, digits, params.kernels)


def _ksk_digits(params, dnum, what: str) -> int:
    dnum = json_int(dnum, f"{what}.dnum")
    try:
        return len(ks.digit_groups(len(params.q), dnum))
    except CrossFHEError as e:
        raise SerializationError(f"{what}.dnum: {e}") from None


def _ksk_parts(ksk: KeySwitchKey, params, prefix: str):
    if not isinstance(ksk, KeySwitchKey):
        raise SerializationError(f"{prefix}: expected a KeySwitchKey, got {type(ksk).__name__}")
    if (ksk.q, ksk.p) != (params.q, params.p):
        raise SerializationError(f"{prefix}: the key is for q = {ksk.q}, p = {ksk.p}, not the parameters' primes")
    moduli = params.q + params.p
    if ksk.a is None:  # a compact key: its a, expanded for this blob only (the digest of a is part of the format)
        ksk = ks.expand(ksk, params.kernels)
    b = poly_array(ksk.b, moduli, params.n, f"{prefix}b")
    a = poly_array(ksk.a, moduli, params.n, f"{prefix}a")
    digits = _ksk_digits(params, int(ksk.dnum), prefix)
    if b.shape != (digits, len(moduli), params.n) or a.shape != b.shape:
        raise SerializationError(f"{prefix}: b {list(b.shape)} / a {list(a.shape)}, expected "
                                 f"[{digits}, {len(moduli)}, {params.n}] for dnum = {ksk.dnum}")
    a_meta, arrays = _uniform_part(prefix, ksk.seed, a, _ksk_expand(params, digits))
    meta = {"sigma": float_hex(ksk.sigma, f"{prefix}sigma"), "dnum": int(ksk.dnum), **a_meta}
    return meta, {f"{prefix}b": b, **arrays}


def _read_ksk(meta, arrays: dict, params, prefix: str, compact: bool = False) -> KeySwitchKey:
    """A key-switching key, checked; ``compact``: in its compact form (:func:`crossfhe.core.keyswitch.compact`) where
    the blob stores a as its seed (a is expanded once for the digest check, then dropped)."""
    sigma = float_from_hex(meta["sigma"], f"{prefix}sigma")
    digits = _ksk_digits(params, meta["dnum"], prefix)
    moduli = params.q + params.p
    shape = (digits, len(moduli), params.n)
    b = load_poly(arrays, f"{prefix}b", shape, moduli, Domain.EVAL)
    a, seed = _load_uniform(arrays, prefix, meta, shape, moduli, _ksk_expand(params, digits))
    key = KeySwitchKey(b=b, a=a, seed=seed, q=params.q, p=params.p, dnum=meta["dnum"], sigma=sigma)
    return ks.compact(key) if compact and seed is not None else key


# --------------------------------------------------------------------------------------------------
# Evaluation keys
# --------------------------------------------------------------------------------------------------


def _evaluation_keys_parts(scheme: Scheme, ek, prefix: str = ""):
    """(meta, arrays) of evaluation keys: meta {"public", "relin", "galois"}, arrays ``<prefix>public.*``,
    ``<prefix>relin.*``, ``<prefix>galois.<g>.*`` (``prefix``: for evaluation keys inside a larger blob)."""
    params = ek.params
    pk_meta, arrays = public_key_parts(ek.public, params, f"{prefix}public.")
    if ek.relin is None and scheme.relin_optional:
        relin_meta = None
    else:
        relin_meta, relin_arrays = _ksk_parts(ek.relin, params, f"{prefix}relin.")
        arrays.update(relin_arrays)
    galois_meta = []
    for g in sorted(ek.galois):
        g_meta, g_arrays = _ksk_parts(ek.galois[g], params, f"{prefix}galois.{int(g)}.")
        galois_meta.append({"element": int(g), **g_meta})
        arrays.update(g_arrays)
    return {"public": pk_meta, "relin": relin_meta, "galois": galois_meta}, arrays


def _galois_element(value, params) -> int:
    g = json_int(value, "galois element")
    if not (1 <= g < 2 * params.n and g % 2):
        raise SerializationError(f"galois element {g} must be odd and in [1, 2N = {2 * params.n})")
    return g


def _expected_ek_names(meta: dict, params, prefix: str = "") -> set:
    names = {f"{prefix}public.b"} | _uniform_names(f"{prefix}public.", meta["public"].get("a"))
    if meta["relin"] is not None:
        names |= {f"{prefix}relin.b"} | _uniform_names(f"{prefix}relin.", meta["relin"].get("a"))
    for entry in meta["galois"]:
        g = _galois_element(entry["element"], params)
        names |= {f"{prefix}galois.{g}.b"} | _uniform_names(f"{prefix}galois.{g}.", entry.get("a"))
    return names


def _check_ek_meta(scheme: Scheme, m: dict, what: str = "meta") -> dict:
    """``m`` (an evaluation keys' meta {"public", "relin", "galois"}) after checking its entries' keys."""
    m = keys(m, {"public", "relin", "galois"}, what)
    if m["relin"] is not None or not scheme.relin_optional:
        keys(m["relin"], {"sigma", "dnum", *A_KEYS}, f"{what}.relin")
    keys(m["public"], {"sigma", *A_KEYS}, f"{what}.public")
    if not isinstance(m["galois"], list):
        raise SerializationError(f"{what}.galois must be a list")
    for i, entry in enumerate(m["galois"]):
        keys(entry, {"element", "sigma", "dnum", *A_KEYS}, f"{what}.galois[{i}]")
    return m


def _read_ek_arrays(scheme: Scheme, m: dict, arrays: dict, params, compact_galois: bool = False, prefix: str = ""):
    """The evaluation keys of a checked meta (:func:`_check_ek_meta`) and the arrays ``<prefix>public.*``, ..."""
    public = _read_public_key(m["public"], arrays, params, f"{prefix}public.")
    relin = None if m["relin"] is None else _read_ksk(m["relin"], arrays, params, f"{prefix}relin.")
    galois = {}
    for entry in m["galois"]:
        g = _galois_element(entry["element"], params)
        if g in galois:
            raise SerializationError(f"galois element {g} appears twice")
        galois[g] = _read_ksk(entry, arrays, params, f"{prefix}galois.{g}.", compact_galois)
    return scheme.evaluation_keys(public=public, relin=relin, galois=galois, params=params)


def _read_evaluation_keys(scheme: Scheme, c: fmt.Container, params, compact_galois: bool = False):
    m = _check_ek_meta(scheme, meta(c.fields, {"public", "relin", "galois"}))
    check_names(c.arrays, _expected_ek_names(m, params))
    return _read_ek_arrays(scheme, m, c.arrays, params, compact_galois)


def dumps_evaluation_keys(scheme: Scheme, ek, kind: str) -> bytes:
    """The blob of evaluation keys under another ``kind`` than ``"<scheme>.evaluation_keys"`` (the same
    layout): for objects that are their evaluation keys, such as the api's public context."""
    if not isinstance(ek, scheme.evaluation_keys):
        raise TypeError(f"expected {scheme.name}.EvaluationKeys, got {type(ek).__name__}")
    return pack(scheme, kind, ek.params, *_evaluation_keys_parts(scheme, ek))


def loads_evaluation_keys(scheme: Scheme, blob, params, kinds: tuple[str, ...]):
    """The evaluation keys of a blob of one of ``kinds``, all laid out as evaluation keys."""
    if params is not None:
        scheme.check_params(params)
    c = fmt.unpack(blob, expected_kind=kinds)
    with checks.about(c.kind):
        return _read_evaluation_keys(scheme, c, header_params(scheme, c.fields, params))


def _read_public_key_blob(c: fmt.Container, params) -> PublicKey:
    m = meta(c.fields, {"sigma", *A_KEYS})
    check_names(c.arrays, {"b"} | _uniform_names("", m["a"]))
    return _read_public_key(m, c.arrays, params)


def _read_params(c: fmt.Container, params):
    meta(c.fields, set())
    check_names(c.arrays, set())
    return params


# --------------------------------------------------------------------------------------------------
# Secret keys
# --------------------------------------------------------------------------------------------------


def _secret_key_parts(scheme: Scheme, sk: SecretKey, params):
    if not isinstance(sk, SecretKey):
        raise TypeError(f"expected a SecretKey, got {type(sk).__name__}")
    if (sk.n, sk.q, sk.p) != (params.n, params.q, params.p):
        raise SerializationError(f"the secret key is for N = {sk.n}, q = {sk.q}, p = {sk.p}; the parameters "
                                 f"are {scheme.summary(params)}")
    coeffs = host(sk.coeffs, "coeffs")
    if coeffs.dtype != np.int32 or coeffs.shape != (params.n,):
        raise SerializationError(
            f"secret coefficients are {coeffs.dtype}{list(coeffs.shape)}, expected int32[{params.n}]"
        )
    h = sk.hamming_weight
    return {"hamming_weight": None if h is None else int(h), **key_id_meta(sk.key_id)}, {"coeffs": coeffs}


def _secret_poly(coeffs: np.ndarray, params) -> RNSPoly:
    """The EVAL residues of s over Q_L ∪ P, computed as ``gen_secret_key`` computes them."""
    moduli = params.q + params.p
    qcol = np.array(moduli, dtype=np.uint32).reshape(-1, 1)
    residues = crandom.to_residues(jnp.asarray(coeffs)[None, :], qcol)
    return RNSPoly(ntt(residues, NTTPlan.create(params.n, moduli)), moduli, Domain.EVAL)


def _read_secret_key(c: fmt.Container, params) -> SecretKey:
    m = meta(c.fields, {"hamming_weight"}, KEY_ID)
    h = m["hamming_weight"]
    check_names(c.arrays, {"coeffs"})
    coeffs = check_array(c.arrays, "coeffs", np.int32, (params.n,))
    checks.check_bounds(coeffs, -1, 2, what="array 'coeffs'", meaning="secret coefficients must be in {-1, 0, 1}")
    if h is not None and (not is_json_int(h) or int(np.count_nonzero(coeffs)) != h):
        raise SerializationError(f"meta.hamming_weight = {h!r}, but the key has {np.count_nonzero(coeffs)} nonzero "
                                 "coefficients")
    poly = _secret_poly(coeffs, params)
    return SecretKey(coeffs=jnp.asarray(coeffs), poly=poly, q=params.q, p=params.p, hamming_weight=h,
                     key_id=read_key_id(m["key_id"]))


# --------------------------------------------------------------------------------------------------
# Blobs and files
# --------------------------------------------------------------------------------------------------


def _parts(scheme: Scheme, obj, params):
    """(kind, params, meta, arrays) of a serializable object."""
    if isinstance(obj, SecretKey):
        raise SerializationError(SECRET_REFUSAL)
    kinds = scheme.kinds
    kind = kinds.get(type(obj))
    if kind is None:
        raise TypeError(f"dumps takes {scheme.name}.Params, Ciphertext, Plaintext, PublicKey or EvaluationKeys, got "
                        f"{type(obj).__name__}")
    if params is not None:
        scheme.check_params(params)
    if type(obj) is PublicKey:
        if params is None:
            raise SerializationError("a PublicKey does not carry its parameters: pass dumps(pk, params=...)")
        return kind, params, *public_key_parts(obj, params)
    own = obj if type(obj) is scheme.params else obj.params
    if params is not None and params != own:
        raise SerializationError(f"params = {scheme.summary(params)} differ from the object's own parameters")
    if type(obj) is scheme.params:
        return kind, own, {}, {}
    if type(obj) is scheme.evaluation_keys:
        return kind, own, *_evaluation_keys_parts(scheme, obj)
    write = scheme.write_ciphertext if type(obj) is scheme.ciphertext else scheme.write_plaintext
    return kind, own, *write(obj)


def pack(scheme: Scheme, kind: str, params, meta: dict, arrays: dict) -> bytes:
    """A blob of ``kind`` with the parameter header of ``params``, ``meta`` and ``arrays``."""
    fields = {"params_digest": params.digest(), "params": scheme.describe(params), "meta": meta}
    return fmt.pack(kind, fields, arrays)


def dumps(scheme: Scheme, obj, params) -> bytes:
    """The blob of ``obj`` (the scheme module's ``dumps``)."""
    return pack(scheme, *_parts(scheme, obj, params))


def _readers(scheme: Scheme) -> dict:
    k = scheme.kinds
    return {
        k[scheme.params]: _read_params,
        k[scheme.ciphertext]: scheme.read_ciphertext,
        k[scheme.plaintext]: scheme.read_plaintext,
        k[PublicKey]: _read_public_key_blob,
        k[scheme.evaluation_keys]: lambda c, params: _read_evaluation_keys(scheme, c, params),
    }


def _expected_kind(scheme: Scheme, expected):
    if expected is None or isinstance(expected, str):
        return expected
    if expected is SecretKey:
        raise SerializationError("load a secret key with load_secret_key / loads_secret_key")
    kinds = scheme.kinds
    try:
        return kinds[expected]
    except (KeyError, TypeError):
        raise TypeError(f"expected must be a kind string or one of {[t.__name__ for t in kinds]}, "
                        f"got {expected!r}") from None


def loads(scheme: Scheme, blob, params, expected):
    """The object of a blob (the scheme module's ``loads``)."""
    c = fmt.unpack(blob, expected_kind=_expected_kind(scheme, expected))
    if c.kind == scheme.secret_kind:
        raise SerializationError("the blob holds a secret key: load it explicitly with load_secret_key / "
                                 "loads_secret_key")
    readers = _readers(scheme)
    reader = readers.get(c.kind)
    if reader is None:
        if c.kind in scheme.hints:
            raise SerializationError(f"the blob holds {scheme.hints[c.kind]}")
        other = c.kind.partition(".")[0]
        if other != scheme.name and other in SCHEME_NAMES:
            raise SerializationError(f"the blob holds a {c.kind}, not a {scheme.name} object: load it with "
                                     f"crossfhe.io.{other}, not crossfhe.io.{scheme.name}")
        raise SerializationError(f"unknown kind {c.kind!r}; this library reads {sorted(readers)}")
    with checks.about(c.kind):
        return reader(c, header_params(scheme, c.fields, params))


def save(scheme: Scheme, obj, path, params) -> None:
    fmt.write_atomic(path, dumps(scheme, obj, params))


def dumps_secret_key(scheme: Scheme, sk: SecretKey, params) -> bytes:
    scheme.check_params(params)
    return pack(scheme, scheme.secret_kind, params, *_secret_key_parts(scheme, sk, params))


def loads_secret_key(scheme: Scheme, blob, params) -> SecretKey:
    scheme.check_params(params)
    c = fmt.unpack(blob, expected_kind=scheme.secret_kind)
    with checks.about(c.kind):
        return _read_secret_key(c, header_params(scheme, c.fields, params))


def save_secret_key(scheme: Scheme, sk: SecretKey, path, params) -> None:
    fmt.write_atomic(path, dumps_secret_key(scheme, sk, params), mode=0o600)
