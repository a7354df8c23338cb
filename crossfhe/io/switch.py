"""CKKS <-> TFHE scheme-switching keys to bytes and back: :class:`crossfhe.convert.switch.SwitchKeys` in one blob.

The blob is one :mod:`crossfhe.io.format` container of kind ``switch.keys``. It holds the public material only
(the keys hold no secret): the two ring keys, PackLWEs's Galois keys, the CKKS evaluation keys, the CKKS
bootstrapping keys (if any) and the TFHE server key, each laid out as its own scheme module lays it out, its array
names behind a prefix. Besides ``kind`` and the array table, the header holds:

* ``ckks_params_digest`` and ``ckks_params``: the CKKS parameters' digest and description
  (:func:`crossfhe.io.ckks.describe_params`);
* ``tfhe_params_digest`` and ``tfhe_params``: the TFHE parameters' (:func:`crossfhe.io.tfhe.describe_params`);
* ``meta``: ``slots``, ``ckks_key_id`` and ``tfhe_key_id`` (32 hex digits or null) and one entry per part below.

With N the CKKS ring degree, q0 the CKKS level-0 primes (L0 of them) and l a ring key's gadget levels:

==============  ===================================================  ===============================================
part            arrays                                               meta
==============  ===================================================  ===============================================
``to_tfhe``     ``to_tfhe.a``, ``to_tfhe.b``: uint32[l, L0, N]        moduli (= q0), gadget {base_log, levels}, sigma
``to_ckks``     ``to_ckks.a``, ``to_ckks.b``: as ``to_tfhe``'s        as ``to_tfhe``'s
``packing``     ``packing.<g>.*``: key-switching keys over q0 and    a list: element, sigma, dnum, a, a_sha256
                the first special prime (one per g = 2^i + 1)
``evaluation``  ``evaluation.public.*``, ``evaluation.relin.*``,     as ``ckks.evaluation_keys``'s meta
                ``evaluation.galois.<g>.*``
``bootstrap``   ``bootstrap.to_sparse.*``, ``bootstrap.to_dense.*``  null (no bootstrapping keys), or to_sparse,
                (and ``bootstrap.evaluation.*`` unless shared)       to_dense, config as ``ckks.bootstrap_keys``'s
                                                                     and evaluation: "shared" (the bootstrapping
                                                                     keys' evaluation keys are ``evaluation``, as
                                                                     ``keygen`` makes them) or their own meta
``server``      ``server.bsk``, ``server.ksk``: as ``tfhe.server_key``  (none)
==============  ===================================================  ===============================================

Sigmas (and the bootstrapping configuration's K) are ``float.hex`` strings; key-switching keys store their seed
instead of ``a`` where it re-expands to it (:mod:`crossfhe.io.ckks`, "Seeds").

Loading checks, after the container's own: both parameter descriptions rebuild valid parameters whose digests
are the header's (and those the caller passes, if any); every header field has its type and keys; the ring keys'
moduli are the CKKS level-0 primes and their gadget is exact; the packing keys are those of every element
2^i + 1 <= N + 1; the bootstrapping configuration is the parameters' for ``max(2, slots)`` slots; ``slots`` is a
power of two <= N/2; the TFHE long key fits the CKKS ring; every array is present (none else), of its dtype and
shape, and every residue below its modulus; the key ids, where stored, are those of the CKKS public key and the
TFHE server key. Each failure raises :class:`~crossfhe.errors.SerializationError` naming what is wrong.

    blob = io.switch.dumps_switch_keys(keys)      # or io.dumps(keys)
    keys2 = io.switch.loads_switch_keys(blob)     # or io.loads(blob); params= checks either scheme's parameters
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from crossfhe.ckks import bootstrap as bt
from crossfhe.ckks.params import Params as CKKSParams
from crossfhe.convert import packing as cpacking
from crossfhe.convert import switch as sw
from crossfhe.errors import CrossFHEError, SerializationError
from crossfhe.io import _common as com
from crossfhe.io import checks
from crossfhe.io import ckks as cio
from crossfhe.io import format as fmt
from crossfhe.io import tfhe as tio
from crossfhe.math.decompose import Gadget
from crossfhe.tfhe.params import Params as TFHEParams

KIND_SWITCH_KEYS = "switch.keys"

FIELDS = {"ckks_params_digest", "ckks_params", "tfhe_params_digest", "tfhe_params", "meta"}
META = {"slots", "ckks_key_id", "tfhe_key_id", "to_tfhe", "to_ckks", "packing", "evaluation", "bootstrap"}
_RING_KEYS = ("to_tfhe", "to_ckks")
_GADGET_KEY_META = {"moduli", "gadget", "sigma"}
_MAX_GADGET_LEVELS = 64
"""The most digits a ring key's gadget may have (q0 < 2^62 and a base of at least 2: 62 always suffice)."""
_SHARED = "shared"


# --------------------------------------------------------------------------------------------------
# Ring keys (GadgetKey)
# --------------------------------------------------------------------------------------------------


def _gadget_key_parts(key, params: CKKSParams, name: str) -> tuple[dict, dict]:
    if not isinstance(key, sw.GadgetKey):
        raise SerializationError(f"{name} must be a convert.switch.GadgetKey, got {type(key).__name__}")
    moduli = params.moduli_at(0)
    if tuple(key.moduli) != tuple(moduli):
        raise SerializationError(f"{name} is over {list(key.moduli)}, not the CKKS level-0 primes {list(moduli)}")
    shape = (key.gadget.levels, len(moduli), params.n)
    arrays = {}
    for part in ("a", "b"):
        data = com.host(getattr(key, part), f"{name}.{part}")
        if data.dtype != np.uint32 or data.shape != shape:
            raise SerializationError(f"{name}.{part} is {data.dtype}{list(data.shape)}, expected uint32{list(shape)}")
        com.check_residues(data, moduli, f"{name}.{part}")
        arrays[f"{name}.{part}"] = data
    meta = {"moduli": list(moduli), "gadget": {"base_log": key.gadget.base_log, "levels": key.gadget.levels},
            "sigma": com.float_hex(key.sigma, f"{name}.sigma")}
    return meta, arrays


def _gadget_of(value, what: str, modulus: int) -> Gadget:
    g = com.keys(value, {"base_log", "levels"}, what)
    base_log = checks.json_int(g["base_log"], f"{what}.base_log", lo=1, hi=30)
    levels = checks.json_int(g["levels"], f"{what}.levels", lo=1, hi=_MAX_GADGET_LEVELS)
    gadget = Gadget(base_log, levels)
    if not gadget.is_exact_for(modulus):
        raise SerializationError(f"{what} = 2^{base_log} x {levels} digits does not decompose exactly mod q0 "
                                 f"({modulus.bit_length()} bits)")
    return gadget


def _read_gadget_key(m: dict, arrays: dict, params: CKKSParams, name: str) -> sw.GadgetKey:
    what = f"meta.{name}"
    m = com.keys(m, _GADGET_KEY_META, what)
    moduli = params.moduli_at(0)
    if m["moduli"] != list(moduli):
        raise SerializationError(f"{what}.moduli = {checks.shown(m['moduli'])}, expected the CKKS level-0 primes "
                                 f"{list(moduli)}")
    gadget = _gadget_of(m["gadget"], f"{what}.gadget", math.prod(moduli))
    sigma = com.float_from_hex(m["sigma"], f"{what}.sigma")
    shape = (gadget.levels, len(moduli), params.n)
    parts = []
    for part in ("a", "b"):
        data = com.check_array(arrays, f"{name}.{part}", np.uint32, shape)
        com.check_residues(data, moduli, f"{name}.{part}")
        parts.append(jnp.asarray(data))
    return sw.GadgetKey(parts[0], parts[1], tuple(moduli), gadget, sigma)


# --------------------------------------------------------------------------------------------------
# PackLWEs's Galois keys
# --------------------------------------------------------------------------------------------------


def _packing_ring(params: CKKSParams):
    try:
        return sw.packing_ring(params)
    except (CrossFHEError, ValueError, TypeError) as e:
        raise SerializationError(f"the CKKS parameters have no packing ring (level 0, a special prime): {e}") from None


def _packing_elements(params: CKKSParams) -> tuple[int, ...]:
    return cpacking.packing_galois_elements(params.n)


def _packing_parts(keys: dict, params: CKKSParams) -> tuple[list, dict]:
    if not isinstance(keys, dict):
        raise SerializationError(f"packing must be a dict Galois element -> KeySwitchKey, got {type(keys).__name__}")
    want = _packing_elements(params)
    if sorted(keys) != sorted(want):
        raise SerializationError(f"packing holds the Galois keys of {sorted(keys)}, expected those of {list(want)}")
    ring = _packing_ring(params)
    meta, arrays = [], {}
    for g in sorted(keys):
        m, a = com._ksk_parts(keys[g], ring, f"packing.{int(g)}.")
        meta.append({"element": int(g), **m})
        arrays.update(a)
    return meta, arrays


def _check_packing_meta(value, params: CKKSParams) -> list:
    if not isinstance(value, list):
        raise SerializationError(f"meta.packing must be a list, got {checks.shown(value)}")
    seen = []
    for i, entry in enumerate(value):
        com.keys(entry, {"element", "sigma", "dnum", *com.A_KEYS}, f"meta.packing[{i}]")
        seen.append(com._galois_element(entry["element"], params))
    want = _packing_elements(params)
    if sorted(seen) != sorted(want) or len(set(seen)) != len(seen):
        raise SerializationError(f"meta.packing holds the elements {seen}, expected each of {list(want)} once")
    return value


def _packing_names(entries: list) -> set:
    names = set()
    for entry in entries:
        prefix = f"packing.{entry['element']}."
        names |= {f"{prefix}b"} | com._uniform_names(prefix, entry["a"])
    return names


def _read_packing(entries: list, arrays: dict, params: CKKSParams) -> dict:
    ring = _packing_ring(params)
    return {entry["element"]: com._read_ksk(entry, arrays, ring, f"packing.{entry['element']}.")
            for entry in entries}


# --------------------------------------------------------------------------------------------------
# The CKKS evaluation and bootstrapping keys
# --------------------------------------------------------------------------------------------------


def _same_parts(a: tuple[dict, dict], b: tuple[dict, dict], prefix_a: str, prefix_b: str) -> bool:
    """Whether two evaluation keys' (meta, arrays), written under two prefixes, are the same words."""
    (meta_a, arrays_a), (meta_b, arrays_b) = a, b
    if meta_a != meta_b or len(arrays_a) != len(arrays_b):
        return False
    for name, x in arrays_a.items():
        y = arrays_b.get(prefix_b + name[len(prefix_a):])
        if y is None or x.shape != y.shape or not np.array_equal(x, y):
            return False
    return True


def _keys_parts(keys: sw.SwitchKeys, params: CKKSParams) -> tuple[dict, dict]:
    """(meta, arrays) of the evaluation and bootstrapping keys."""
    ev = keys.evaluation
    ev_parts = com._evaluation_keys_parts(cio.SCHEME, ev, "evaluation.")
    meta, arrays = {"evaluation": ev_parts[0]}, dict(ev_parts[1])
    boot = keys.bootstrap
    if boot is None:
        meta["bootstrap"] = None
        return meta, arrays
    if not isinstance(boot, bt.Keys):
        raise SerializationError(f"bootstrap must be ckks.bootstrap.Keys or None, got {type(boot).__name__}")
    if boot.params.digest() != params.digest():
        raise SerializationError("the bootstrapping keys are for other CKKS parameters than the evaluation keys")
    _check_boot_slots(boot.config.slots, keys.slots, "bootstrap.config.slots")
    boot_meta, boot_arrays = cio._encapsulation_parts(boot, "bootstrap.")
    if boot.evaluation is ev:
        boot_meta["evaluation"] = _SHARED
    else:
        own = com._evaluation_keys_parts(cio.SCHEME, boot.evaluation, "bootstrap.evaluation.")
        if _same_parts(ev_parts, own, "evaluation.", "bootstrap.evaluation."):
            boot_meta["evaluation"] = _SHARED
        else:
            boot_meta["evaluation"] = own[0]
            boot_arrays.update(own[1])
    meta["bootstrap"] = boot_meta
    arrays.update(boot_arrays)
    return meta, arrays


def _check_boot_slots(config_slots: int, slots: int, what: str) -> None:
    if config_slots != max(2, slots):
        raise SerializationError(f"{what} = {config_slots}, but keys of {slots} slots bootstrap {max(2, slots)} "
                                 "(convert.switch.keygen)")


def _check_bootstrap_meta(value, params: CKKSParams, slots: int):
    """(meta, config, sparse ring, own evaluation meta or None) of meta.bootstrap (not null)."""
    m = com.keys(value, {"to_sparse", "to_dense", "config", "evaluation"}, "meta.bootstrap")
    config, ring = cio._check_encapsulation_meta(m, params, "meta.bootstrap")
    _check_boot_slots(config.slots, slots, "meta.bootstrap.config.slots")
    own = m["evaluation"]
    if own == _SHARED:
        own = None
    elif isinstance(own, dict):
        own = com._check_ek_meta(cio.SCHEME, own, "meta.bootstrap.evaluation")
    else:
        raise SerializationError(f'meta.bootstrap.evaluation must be "{_SHARED}" or an evaluation keys\' meta, got '
                                 f"{checks.shown(own)}")
    return m, config, ring, own


# --------------------------------------------------------------------------------------------------
# Parameters and key ids
# --------------------------------------------------------------------------------------------------


def _rebuild(fields: dict, name: str, rebuild, summary, given):
    """The parameters of the header's ``<name>_params``, checked against ``<name>_params_digest`` and ``given``."""
    try:
        params = rebuild(fields[f"{name}_params"])
    except SerializationError as e:
        raise SerializationError(f"{name}_params: {e}") from None
    return com.checked_params(params, fields[f"{name}_params_digest"], given, summary,
                              digest_what=f"{name}_params_digest", which=f"{name.upper()} ")


def _key_id(value, what: str):
    try:
        return com.read_key_id(value)
    except SerializationError:
        raise SerializationError(f"{what} must be 32 lowercase hex digits or null, got {checks.shown(value)}") from None


def _check_slots(slots, params: CKKSParams, what: str) -> int:
    if not (fmt.is_json_int(slots) and 1 <= slots <= params.slots and slots & (slots - 1) == 0):
        raise SerializationError(f"{what} must be a power of two in [1, N/2 = {params.slots}], got "
                                 f"{checks.shown(slots)}")
    return slots


def _check_fit(params: CKKSParams, tparams: TFHEParams) -> None:
    if tparams.long_dim > params.n:
        raise SerializationError(f"the TFHE long key has {tparams.long_dim} coefficients; the CKKS ring only "
                                 f"{params.n}")


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


def _split_params(params, tfhe_params):
    """(CKKS params or None, TFHE params or None) of ``params`` (either scheme's) and ``tfhe_params``."""
    if isinstance(params, TFHEParams):
        if tfhe_params is not None:
            raise TypeError("params is a tfhe.Params and tfhe_params is given too; pass the CKKS parameters as params")
        return None, params
    if params is not None and not isinstance(params, CKKSParams):
        raise TypeError(f"params must be ckks.Params or tfhe.Params, got {type(params).__name__}")
    if tfhe_params is not None and not isinstance(tfhe_params, TFHEParams):
        raise TypeError(f"tfhe_params must be tfhe.Params, got {type(tfhe_params).__name__}")
    return params, tfhe_params


def dumps_switch_keys(keys: sw.SwitchKeys, *, params=None) -> bytes:
    """The blob (kind ``switch.keys``) of :class:`crossfhe.convert.switch.SwitchKeys` (layout: module docstring).
    No secret is in it (the keys hold none). ``params``: if given (ckks.Params or tfhe.Params), it must be the keys'
    own parameters of its scheme. SerializationError if the keys are inconsistent (moduli, shapes, residues, slots,
    key ids); TypeError for another type."""
    if not isinstance(keys, sw.SwitchKeys):
        raise TypeError(f"dumps_switch_keys takes convert.switch.SwitchKeys, got {type(keys).__name__}")
    ckks_given, tfhe_given = _split_params(params, None)
    ev = keys.evaluation
    if not isinstance(ev, cio.SCHEME.evaluation_keys):
        raise SerializationError(f"evaluation must be ckks.EvaluationKeys, got {type(ev).__name__}")
    if not isinstance(keys.server, tio.ServerKey):
        raise SerializationError(f"server must be a tfhe.ServerKey, got {type(keys.server).__name__}")
    ckks_params, tfhe_params = ev.params, keys.server.params
    if ckks_given is not None and ckks_given != ckks_params:
        raise SerializationError("params differ from the switch keys' own CKKS parameters")
    if tfhe_given is not None and tfhe_given != tfhe_params:
        raise SerializationError("params differ from the switch keys' own TFHE parameters")
    _check_fit(ckks_params, tfhe_params)
    slots = _check_slots(keys.slots, ckks_params, "slots")
    meta = {"slots": slots, "ckks_key_id": _key_id(keys.ckks_key_id, "ckks_key_id"),
            "tfhe_key_id": _key_id(keys.tfhe_key_id, "tfhe_key_id")}
    if meta["ckks_key_id"] is not None and ev.key_id is not None and meta["ckks_key_id"] != ev.key_id:
        raise SerializationError(f"ckks_key_id {meta['ckks_key_id']} is not the CKKS evaluation keys' {ev.key_id}")
    if meta["tfhe_key_id"] is not None and keys.server.key_id is not None and meta["tfhe_key_id"] != keys.server.key_id:
        raise SerializationError(f"tfhe_key_id {meta['tfhe_key_id']} is not the TFHE server key's {keys.server.key_id}")
    arrays = {}
    for name in _RING_KEYS:
        meta[name], a = _gadget_key_parts(getattr(keys, name), ckks_params, name)
        arrays.update(a)
    meta["packing"], a = _packing_parts(keys.packing, ckks_params)
    arrays.update(a)
    m, a = _keys_parts(keys, ckks_params)
    meta.update(m)
    arrays.update(a)
    arrays.update(tio._server_key_host_arrays(keys.server, "server."))
    fields = {"ckks_params_digest": ckks_params.digest(), "ckks_params": cio.describe_params(ckks_params),
              "tfhe_params_digest": tfhe_params.digest(), "tfhe_params": tio.describe_params(tfhe_params),
              "meta": meta}
    return fmt.pack(KIND_SWITCH_KEYS, fields, arrays)


def loads_switch_keys(blob, params=None, *, tfhe_params=None) -> sw.SwitchKeys:
    """The :class:`crossfhe.convert.switch.SwitchKeys` of a :func:`dumps_switch_keys` blob, after every check of the
    module docstring. ``params``: the CKKS parameters (or the TFHE ones) the keys must be for; ``tfhe_params``: the
    TFHE ones; the result uses the instances given. The Galois and encapsulation keys of the bootstrapping keys are
    in their compact form where the CKKS parameters say so (:attr:`crossfhe.ckks.params.Params.compact_keys`), as
    :func:`crossfhe.convert.switch.keygen` makes them. Raises SerializationError naming what is wrong."""
    ckks_given, tfhe_given = _split_params(params, tfhe_params)
    c = fmt.unpack(blob, expected_kind=KIND_SWITCH_KEYS)
    with checks.about(KIND_SWITCH_KEYS):
        return _read(c, ckks_given, tfhe_given)


def _read(c: fmt.Container, ckks_given, tfhe_given) -> sw.SwitchKeys:
    if set(c.fields) != FIELDS:
        raise SerializationError(f"header must have the keys {sorted(FIELDS | {'kind', 'arrays'})}, got "
                                 f"{sorted(set(c.fields) | {'kind', 'arrays'})}")
    params = _rebuild(c.fields, "ckks", cio.params_from_description, cio._params_summary, ckks_given)
    tparams = _rebuild(c.fields, "tfhe", tio.params_from_description, tio._summary, tfhe_given)
    _check_fit(params, tparams)
    m = com.meta(c.fields, META)
    slots = _check_slots(m["slots"], params, "meta.slots")
    ckks_key_id = _key_id(m["ckks_key_id"], "meta.ckks_key_id")
    tfhe_key_id = _key_id(m["tfhe_key_id"], "meta.tfhe_key_id")
    for name in _RING_KEYS:
        com.keys(m[name], _GADGET_KEY_META, f"meta.{name}")
    packing_meta = _check_packing_meta(m["packing"], params)
    ev_meta = com._check_ek_meta(cio.SCHEME, m["evaluation"], "meta.evaluation")
    boot = None if m["bootstrap"] is None else _check_bootstrap_meta(m["bootstrap"], params, slots)
    names = ({f"{name}.{part}" for name in _RING_KEYS for part in "ab"} | _packing_names(packing_meta)
             | com._expected_ek_names(ev_meta, params, "evaluation.") | {"server.bsk", "server.ksk"})
    if boot is not None:
        names |= cio._encapsulation_names(boot[0], "bootstrap.")
        if boot[3] is not None:
            names |= com._expected_ek_names(boot[3], params, "bootstrap.evaluation.")
    com.check_names(c.arrays, names)
    to_tfhe, to_ckks = (_read_gadget_key(m[name], c.arrays, params, name) for name in _RING_KEYS)
    pack = _read_packing(packing_meta, c.arrays, params)
    compact = params.compact_keys
    shared = boot is not None and boot[3] is None
    evaluation = com._read_ek_arrays(cio.SCHEME, ev_meta, c.arrays, params, compact and shared, "evaluation.")
    bootstrap = None
    if boot is not None:
        bm, config, ring, own = boot
        boot_ev = evaluation if own is None else com._read_ek_arrays(cio.SCHEME, own, c.arrays, params, compact,
                                                                     "bootstrap.evaluation.")
        to_sparse, to_dense = cio._read_encapsulation(bm, c.arrays, params, ring, compact, "bootstrap.")
        bootstrap = bt.Keys(boot_ev, to_sparse, to_dense, ring, config)
    server = tio._read_server_key_arrays(c.arrays, tparams, "server.")
    if ckks_key_id is not None and ckks_key_id != evaluation.key_id:
        raise SerializationError(f"meta.ckks_key_id {ckks_key_id} is not the key id of the CKKS public key "
                                 f"({evaluation.key_id})")
    if tfhe_key_id is not None and tfhe_key_id != server.key_id:
        raise SerializationError(f"meta.tfhe_key_id {tfhe_key_id} is not the key id of the TFHE server key "
                                 f"({server.key_id})")
    return sw.SwitchKeys(to_tfhe, to_ckks, pack, bootstrap, evaluation, server, slots, ckks_key_id, tfhe_key_id)


def save_switch_keys(keys: sw.SwitchKeys, path, *, params=None) -> None:
    """Write :func:`dumps_switch_keys` to ``path`` atomically (a refused object leaves no file)."""
    fmt.write_atomic(path, dumps_switch_keys(keys, params=params))


def load_switch_keys(path, params=None, *, tfhe_params=None) -> sw.SwitchKeys:
    """:func:`loads_switch_keys` of the file at ``path``."""
    return loads_switch_keys(fmt.read_bytes(path), params, tfhe_params=tfhe_params)


__all__ = [
    "KIND_SWITCH_KEYS",
    "dumps_switch_keys",
    "load_switch_keys",
    "loads_switch_keys",
    "save_switch_keys",
]
