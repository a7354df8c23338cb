"""One ``dumps`` / ``loads`` for the objects of every scheme, dispatched on the object's type and the blob's kind.

    blob = io.dumps(obj)                        # any registered object (params= for a PublicKey or LWECiphertext)
    obj2 = io.loads(blob)                       # the loader of the blob's kind
    x2 = io.loads(vector_blob, context=ctx)     # kinds that belong to a context need it
    io.kind_of(blob)                            # "ckks.ciphertext", "bfv.hmvp_vector", "tfhe.server_key", ...

Two tables: type -> (kinds, dump function), and kind -> (load function, the parameter classes of the kind,
whether it needs a ``context``). The scheme modules' types are registered here, each dump and load going to
its scheme module (:mod:`crossfhe.io.ckks`, :mod:`crossfhe.io.bfv`, :mod:`crossfhe.io.tfhe`; the scheme-switching
keys :mod:`crossfhe.io.switch`), which writes and checks the blob; layers above ``io`` (the api's ``EncryptedVector``
and ``CKKSPublicContext``) register their own with :func:`register_type` and :func:`register_kind` when they are
imported.

=========================================  ============================  =====================================
type                                       kind                          loading needs
=========================================  ============================  =====================================
ckks / bfv Params, Ciphertext, Plaintext,  ``<scheme>.params``, ...      nothing (the header holds the
EvaluationKeys                                                           parameters; ``params=`` checks them)
core PublicKey (dumps needs ``params=``)   ``<scheme>.public_key``       nothing
tfhe Params, ServerKey; LWECiphertext      ``tfhe.params``, ...          nothing
(dumps needs ``params=``)
linalg.hmvp CoefficientVector              ``bfv.hmvp_vector``           nothing
convert.switch SwitchKeys                  ``switch.keys``               nothing (``params=``: ckks or tfhe
                                                                         Params, checked)
api CKKSPublicContext                      ``ckks.public_context``       nothing
api EncryptedVector                        ``ckks.vector``               ``context=`` (its CKKS context)
=========================================  ============================  =====================================

Secret keys (core ``SecretKey``, tfhe ``ClientKey``) and anything else that holds one (a ``CKKSContext``)
are refused by :func:`dumps` and :func:`save` with a :class:`~crossfhe.errors.SerializationError` naming
the explicit call; :func:`dumps_secret_key` / :func:`save_secret_key` write them (a ``SecretKey`` with the
``params=`` of its scheme) and :func:`loads_secret_key` / :func:`load_secret_key` read them back, the loader
chosen by the blob's kind. :func:`loads` refuses a secret-key blob.

:func:`loads` reads the kind from the header without hashing the blob (:func:`crossfhe.io.format.peek_kind`);
the kind's loader then makes every check of its module. Where the dispatcher itself refuses a blob (wrong
or unknown kind, a missing context, parameters of another scheme), the container is checked first, so a
truncated or corrupted blob is reported as such.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from crossfhe.convert.switch import SwitchKeys
from crossfhe.core.keys import PublicKey, SecretHolder, SecretKey
from crossfhe.core.lwe import LWECiphertext
from crossfhe.errors import SerializationError
from crossfhe.io import _common as com
from crossfhe.io import bfv as bio
from crossfhe.io import ckks as cio
from crossfhe.io import format as fmt
from crossfhe.io import switch as sio
from crossfhe.io import tfhe as tio
from crossfhe.linalg.hmvp import CoefficientVector as HMVPVector
from crossfhe.tfhe.ops import ClientKey, ServerKey
from crossfhe.tfhe.params import Params as TFHEParams

# --------------------------------------------------------------------------------------------------
# The registry
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Writer:
    kinds: tuple[str, ...]
    dump: Callable  # dump(obj, params) -> bytes
    save: Callable | None  # save(obj, path, params); None: write_atomic(path, dump(obj, params))
    params_of: Callable | None  # the object's own parameters, checked against params= (None: dump checks)


@dataclass(frozen=True)
class _Reader:
    load: Callable  # load(blob, params, context) -> object
    params: tuple[type, ...]  # the parameter classes of the kind
    context: str | None  # None: no context needed; else what the blob holds and how to load it


_WRITERS: dict[type, _Writer] = {}
_READERS: dict[str, _Reader] = {}
_SECRET_KINDS = {cio.KIND_SECRET_KEY: cio, bio.KIND_SECRET_KEY: bio, tio.KIND_CLIENT_KEY: tio}
_RLWE = ((cio.SCHEME.params, cio), (bio.SCHEME.params, bio))  # the schemes whose keys are core's
_PARAMS = (cio.SCHEME.params, bio.SCHEME.params, TFHEParams)
_HINTS = {**cio.SCHEME.hints, **bio.SCHEME.hints}  # kinds whose loader a higher layer registers
_SECRET_REFUSALS = {SecretKey: com.SECRET_REFUSAL, ClientKey: tio._SECRET_REFUSAL}


def _name(cls: type) -> str:
    """``"ckks.Params"``, ``"core.PublicKey"``, ``"api.EncryptedVector"``: the crossfhe package and class."""
    parts = cls.__module__.split(".")
    return f"{parts[1]}.{cls.__qualname__}" if parts[0] == "crossfhe" and len(parts) > 1 else cls.__qualname__


def register_type(cls: type, kinds, dump: Callable, *, save: Callable | None = None,
                  params_of: Callable | None = None) -> None:
    """Make :func:`dumps` and :func:`save` take ``cls`` (and its subclasses) and :func:`loads`'s ``expected``
    accept it. ``kinds``: the kind (or tuple of kinds) its blobs have. ``dump(obj, params) -> bytes`` with
    ``params`` the caller's (or None); ``save(obj, path, params)``, default: ``dump`` written atomically.
    ``params_of(obj)``: the object's own parameters, which a given ``params`` must equal (else ``dump``
    checks ``params`` itself). Registering a type again replaces its entry."""
    kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
    _WRITERS[cls] = _Writer(kinds, dump, save, params_of)


def register_kind(kind: str, load: Callable, *, params, context: str | None = None) -> None:
    """Make :func:`loads` read blobs of ``kind`` with ``load(blob, params, context) -> object`` (``params``
    and ``context`` as the caller gave them, ``params`` None or an instance of the kind's classes).
    ``params``: the parameter class (or tuple of classes) of the kind. ``context``: None if the kind needs
    no context; else what the blob holds and how to load it (the message when ``context=`` is missing).
    Registering a kind again replaces its entry."""
    _READERS[kind] = _Reader(load, params if isinstance(params, tuple) else (params,), context)


def kinds() -> tuple[str, ...]:
    """The kinds :func:`loads` reads, sorted."""
    return tuple(sorted(_READERS))


def kind_of(blob) -> str:
    """The kind of a blob (``"ckks.ciphertext"``, ...), read from its header; not verified until loaded
    (:func:`crossfhe.io.format.peek_kind`). SerializationError if it is not a readable blob."""
    return fmt.peek_kind(blob)


# --------------------------------------------------------------------------------------------------
# Dumping
# --------------------------------------------------------------------------------------------------


def _writer(obj) -> _Writer:
    if isinstance(obj, SecretHolder):
        refusal = next((m for cls, m in _SECRET_REFUSALS.items() if isinstance(obj, cls)), None)
        raise SerializationError(refusal or (
            f"refusing to serialize a {type(obj).__name__} with dumps/save: it holds a secret key, which is written "
            f"only by an explicit call: {obj.SAVE_WITH}"))
    for cls in type(obj).__mro__:
        if cls in _WRITERS:
            return _WRITERS[cls]
    supported = "; ".join(f"{_name(cls)} ({', '.join(w.kinds)})" for cls, w in _WRITERS.items())
    raise TypeError(f"crossfhe.io.dumps cannot serialize an object of type {_name(type(obj))}; it takes: {supported}")


def _checked(obj, params) -> _Writer:
    w = _writer(obj)
    if params is not None and w.params_of is not None and params != w.params_of(obj):
        raise SerializationError(f"params ({_name(type(params))}) differ from the {type(obj).__name__}'s own "
                                 "parameters")
    return w


def dumps(obj, *, params=None) -> bytes:
    """The blob of any registered object (module docstring), written by its scheme's module.

    params: required for a core PublicKey (ckks.Params or bfv.Params: it picks the scheme) and a
    tfhe LWECiphertext, which do not carry their parameters; for other objects, if given, it must equal
    the object's own. A secret key, or an object holding one, is refused (SerializationError naming the
    explicit call, :func:`dumps_secret_key`); an unsupported type raises TypeError listing what is taken.
    """
    return _checked(obj, params).dump(obj, params)


def save(obj, path, *, params=None) -> None:
    """Write :func:`dumps` ``(obj)`` to ``path`` atomically (TFHE objects streamed); a refused object
    leaves no file."""
    w = _checked(obj, params)
    if w.save is not None:
        w.save(obj, path, params)
    else:
        fmt.write_atomic(path, w.dump(obj, params))


def _rlwe_module(params, what: str):
    """io.ckks or io.bfv, chosen by the type of ``params``, for an object that does not carry them."""
    for cls, module in _RLWE:
        if isinstance(params, cls):
            return module
    if params is None:
        raise SerializationError(f"a {what} does not carry its parameters: pass params=... (ckks.Params or "
                                 "bfv.Params), which also picks the scheme")
    raise TypeError(f"a {what} belongs to ckks.Params or bfv.Params, got params of type {_name(type(params))}")


# --------------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------------


def _expected_kinds(expected) -> tuple[str, ...] | None:
    """The kinds ``expected`` (a kind string, a registered class, or a tuple of them) stands for."""
    if expected is None:
        return None
    out = []
    for e in expected if isinstance(expected, tuple) else (expected,):
        if isinstance(e, str):
            out.append(e)
            continue
        if isinstance(e, type) and issubclass(e, SecretHolder):
            raise SerializationError("load a secret key with crossfhe.io.loads_secret_key / load_secret_key")
        w = next((_WRITERS[c] for c in e.__mro__ if c in _WRITERS), None) if isinstance(e, type) else None
        if w is None:
            raise TypeError(f"expected must be a kind string or a class crossfhe.io.dumps takes "
                            f"({', '.join(_name(c) for c in _WRITERS)}), got {e!r}")
        out.extend(w.kinds)
    return tuple(dict.fromkeys(out))


def _check_params(kind: str, accepted: tuple[type, ...], params) -> None:
    if params is None or isinstance(params, accepted):
        return
    names = " or ".join(_name(c) for c in accepted)
    if isinstance(params, _PARAMS):
        raise SerializationError(f"the blob holds a {kind}, an object for {names}; params is a {_name(type(params))}")
    raise TypeError(f"params must be {' or '.join(_name(c) for c in _PARAMS)}, got {type(params).__name__}")


def _reader(kind: str) -> _Reader:
    reader = _READERS.get(kind)
    if reader is not None:
        return reader
    if kind in _SECRET_KINDS:
        raise SerializationError(f"the blob holds a secret key ({kind}): load it explicitly with "
                                 "crossfhe.io.loads_secret_key / load_secret_key")
    if kind in _HINTS:
        raise SerializationError(f"the blob holds {_HINTS[kind]}")
    raise SerializationError(f"unknown kind {kind!r}; crossfhe.io reads {list(kinds())}")


def loads(blob, *, params=None, context=None, expected=None):
    """The object of a blob written by :func:`dumps` (or by a scheme module's ``dumps``), loaded by the
    loader of its kind after every check of that loader.

    params: if given, the blob must be for exactly these parameters (and the result uses this instance);
    parameters of another scheme than the blob's are refused. context: for kinds that belong to a context
    (an api EncryptedVector: its CKKSContext or CKKSPublicContext); a missing one is refused with a message
    saying what to pass. For other kinds a context only stands in for ``params`` (its ``params``).
    expected: a kind string, a class :func:`dumps` takes, or a tuple of them; another kind is refused.
    A secret-key blob is refused (:func:`loads_secret_key`). Raises SerializationError naming what is wrong.
    """
    kind = fmt.peek_kind(blob)
    wanted = _expected_kinds(expected)
    if wanted is not None and kind not in wanted:
        fmt.unpack(blob, expected_kind=wanted)  # "wrong kind", after the container's own checks
    if params is None and context is not None:
        params = getattr(context, "params", None)
    try:
        reader = _reader(kind)
        _check_params(kind, reader.params, params)
        if reader.context is not None:
            if context is None:
                raise SerializationError(f"the blob holds {reader.context}")
            own = getattr(context, "params", params)
            if params is not None and own != params and own.digest() != params.digest():  # any kernel set
                raise SerializationError(f"params differ from the parameters of the context {context!r}")
    except SerializationError:
        fmt.unpack(blob)  # a cut or corrupted blob is reported as such
        raise
    return reader.load(blob, params, context)


def load(path, *, params=None, context=None, expected=None):
    """:func:`loads` of the file at ``path``."""
    return loads(fmt.read_bytes(path), params=params, context=context, expected=expected)


# --------------------------------------------------------------------------------------------------
# Secret keys: explicit only
# --------------------------------------------------------------------------------------------------


def _secret_module(sk, params, what: str):
    if isinstance(sk, ClientKey):
        return tio
    if isinstance(sk, SecretKey):
        return _rlwe_module(params, f"SecretKey ({what})")
    raise TypeError(f"{what} takes a core SecretKey (with params=) or a tfhe.ClientKey, got {type(sk).__name__}")


def dumps_secret_key(sk, *, params=None) -> bytes:
    """The blob of a secret key, by its scheme's ``dumps_secret_key``: a core SecretKey with the
    ckks.Params or bfv.Params it was made for (they pick the scheme), or a tfhe.ClientKey. Explicit on
    purpose: whoever holds this blob can decrypt everything under the key."""
    return _secret_module(sk, params, "dumps_secret_key").dumps_secret_key(sk, params=params)


def save_secret_key(sk, path, *, params=None) -> None:
    """Write :func:`dumps_secret_key` to ``path`` atomically, readable by the owner only (mode 0o600)."""
    _secret_module(sk, params, "save_secret_key").save_secret_key(sk, path, params=params)


def loads_secret_key(blob, *, params=None):
    """The secret key of a :func:`dumps_secret_key` blob, by the loader of its kind (``ckks.secret_key``,
    ``bfv.secret_key``: ``params`` required, the key's scheme's; ``tfhe.client_key``: ``params`` optional)."""
    kind = fmt.peek_kind(blob)
    module = _SECRET_KINDS.get(kind)
    if module is None:
        fmt.unpack(blob, expected_kind=tuple(_SECRET_KINDS))  # "wrong kind", after the container's checks
    try:
        _check_params(kind, (module.SCHEME.params,) if module is not tio else (TFHEParams,), params)
        if params is None and module is not tio:
            raise SerializationError(f"the blob holds a {kind}: pass loads_secret_key(blob, params=...), the "
                                     "parameters the key is expected to be for")
    except SerializationError:
        fmt.unpack(blob)
        raise
    return module.loads_secret_key(blob, params=params)


def load_secret_key(path, *, params=None):
    """:func:`loads_secret_key` of the file at ``path``."""
    return loads_secret_key(fmt.read_bytes(path), params=params)


# --------------------------------------------------------------------------------------------------
# The schemes' types
# --------------------------------------------------------------------------------------------------


def _module_dump(module) -> Callable:
    return lambda obj, params: module.dumps(obj, params=params)


def _module_save(module) -> Callable:
    return lambda obj, path, params: module.save(obj, path, params=params)


def _module_load(module, kind: str) -> Callable:
    return lambda blob, params, context: module.loads(blob, params=params, expected=kind)


def _register_schemes() -> None:
    for module in (cio, bio):
        for cls, kind in module.SCHEME.kinds.items():
            register_kind(kind, _module_load(module, kind), params=module.SCHEME.params)
            if cls is not PublicKey:
                register_type(cls, kind, _module_dump(module), save=_module_save(module))
    register_type(PublicKey, (cio.KIND_PUBLIC_KEY, bio.KIND_PUBLIC_KEY),
                  lambda pk, params: _rlwe_module(params, "PublicKey").dumps(pk, params=params),
                  save=lambda pk, path, params: _rlwe_module(params, "PublicKey").save(pk, path, params=params))
    for cls, kind in ((TFHEParams, tio.KIND_PARAMS), (LWECiphertext, tio.KIND_CIPHERTEXT),
                      (ServerKey, tio.KIND_SERVER_KEY)):
        register_kind(kind, _module_load(tio, kind), params=TFHEParams)
        register_type(cls, kind, _module_dump(tio), save=_module_save(tio))
    register_type(HMVPVector, bio.KIND_HMVP_VECTOR, lambda v, params: bio.dumps_hmvp_vector(v, params=params))
    register_kind(bio.KIND_HMVP_VECTOR, lambda blob, params, context: bio.loads_hmvp_vector(blob, params=params),
                  params=bio.SCHEME.params)
    register_type(SwitchKeys, sio.KIND_SWITCH_KEYS, lambda k, params: sio.dumps_switch_keys(k, params=params),
                  save=lambda k, path, params: sio.save_switch_keys(k, path, params=params))
    register_kind(sio.KIND_SWITCH_KEYS, lambda blob, params, context: sio.loads_switch_keys(blob, params),
                  params=(cio.SCHEME.params, TFHEParams))


_register_schemes()


__all__ = [
    "dumps",
    "dumps_secret_key",
    "kind_of",
    "kinds",
    "load",
    "load_secret_key",
    "loads",
    "loads_secret_key",
    "register_kind",
    "register_type",
    "save",
    "save_secret_key",
]
