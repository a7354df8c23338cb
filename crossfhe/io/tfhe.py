"""TFHE objects to bytes and files, and back: parameters, ciphertexts, server keys and, explicitly, client keys.

Every blob is a :mod:`crossfhe.io.format` container whose header holds, besides ``kind`` and the array
table:

* ``params_digest``: ``tfhe.Params.digest()`` of the parameters the object belongs to;
* ``params``: the canonical description that rebuilds those parameters exactly (an equal ``Params``):
  ``message_bits``, ``lwe_dim``, ``glwe_dim``, ``poly_size``, the primes ``moduli`` themselves,
  ``glwe_sigma`` and ``lwe_sigma`` (``float.hex`` strings, exact), ``pbs_gadget`` and ``ks_gadget``
  (``{"base_log", "levels"}``), ``max_norm2`` (an int or null), ``name``, ``insecure``, and
  ``extension`` only when it is not 0 and ``grouping`` only when it is not 1 (so blobs of parameters
  without them read as before they existed);
* ``meta``: ``{}``, but for a ciphertext or a client key made under a known key pair ``{"key_id": ...}``
  (:func:`crossfhe.core.keys.key_id`; a server key's is recomputed from its ``ksk``).

With n = ``lwe_dim``, k = ``glwe_dim``, N = ``poly_size``, L = ``len(moduli)``, l = ``pbs_gadget.levels``,
l_ks = ``ks_gadget.levels``, G = ``ggsw_count`` (n, or 2^g - 1 per group of g key bits with a grouping g):

===================  ==================================================================  ====================
kind                 arrays                                                              size (P2 / P8)
===================  ==================================================================  ====================
``tfhe.params``      none                                                                ~0.5 KiB
``tfhe.ciphertext``  ``b``: uint32[..., L], ``a``: uint32[..., L, kN], residues mod q_i  16 KiB / 16 KiB
``tfhe.server_key``  ``bsk``: uint32[G, (k+1) l, k+1, L, N] (EVAL), ``ksk``:             106 MB / 246 MB
                     int32[n+1, kN l_ks] (mod 2^32)
``tfhe.client_key``  ``lwe_key``: int32[n], ``glwe_key``: int32[k, N], bits in {0, 1}    11 KiB / 12 KiB
===================  ==================================================================  ====================

A ciphertext's size is 4 L (kN + 1) bytes per item of its batch (leading batch axes are kept); a server
key's is ``params.bsk_bytes + params.ksk_bytes`` (presets P2 106 MB, P4 102 MB, P6 176 MB, P8 and P10 246 MB),
plus a header under 1 KiB and 51 bytes of preamble and hash. An :class:`~crossfhe.core.lwe.LWECiphertext`
does not carry its parameters: ``dumps(ct, params=params)``.

Memory. :func:`dumps` and :func:`save` stream: the header is laid out first (it depends on shapes only),
then every array goes, in pieces of at most ``CHUNK_BYTES`` (64 MiB) along its first axis, from the device
to the host, through the range checks and the SHA-256, into the output. :func:`dumps` writes into one
buffer of the blob's final size, which ``BytesIO.getvalue`` hands over without copying (CPython): the
blob is the only full-size copy it makes. :func:`save` writes the pieces straight into the temporary file,
so it needs no full-size buffer at all (a 3.9 GB server key saves through pieces of 64 MiB). Loading
goes through :func:`crossfhe.io.format.unpack`, which holds the blob beside a copy of its body (while
hashing) and then beside a host copy of its arrays, before the arrays go to the device: about twice the
blob on the host, three times on a CPU backend (whose device arrays are host memory too); for a 3.9 GB server
key (N = 2^15 without extension), 8 to 12 GB.

Loading checks, after the container's own checks (magic, version, lengths, SHA-256, JSON, kind): the
parameter description rebuilds valid TFHE parameters whose digest equals ``params_digest`` and, if given,
the caller's ``params``; ``meta`` is ``{}`` or a well-formed key id; the array names, dtypes and shapes are those of the
parameters; every residue is below its prime (``bsk``, ``a``, ``b``) and every key coefficient is 0 or 1.
A CKKS or BFV blob is refused with a message that names it. Each failure raises
:class:`~crossfhe.errors.SerializationError`. The writer makes the same checks before anything reaches the
output is handed over (the range checks run on each piece as it is written), and :func:`save` leaves no
partial file: it writes a temporary file beside ``path`` and moves it over ``path`` only when complete and
checked, as :func:`crossfhe.io.format.write_atomic` does; on any error it removes the temporary file.

A client key is never written by :func:`dumps` or :func:`save`; use :func:`save_secret_key` (the file
gets mode 0o600) or :func:`dumps_secret_key`, and read it back only with :func:`load_secret_key` or
:func:`loads_secret_key`.

    blob = io.tfhe.dumps(sk)                             # Params, ServerKey; a ciphertext needs params=
    sk2 = io.tfhe.loads(blob, params=params, expected=ServerKey)
    io.tfhe.save(ct, "ct.cfhe", params=params); ct2 = io.tfhe.load("ct.cfhe", params=params)
    io.tfhe.save_secret_key(ck, "ck.cfhe")               # never by dumps/save
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import struct
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from io import BytesIO

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.core.keys import key_id
from crossfhe.core.lwe import LWECiphertext
from crossfhe.errors import CrossFHEError, SerializationError
from crossfhe.io import _common as com
from crossfhe.io import checks
from crossfhe.io import format as fmt
from crossfhe.math.decompose import Gadget
from crossfhe.tfhe.ops import ClientKey, ServerKey
from crossfhe.tfhe.params import Params

KIND_PARAMS = "tfhe.params"
KIND_CIPHERTEXT = "tfhe.ciphertext"
KIND_SERVER_KEY = "tfhe.server_key"
KIND_CLIENT_KEY = "tfhe.client_key"

CHUNK_BYTES = 64 << 20
"""Arrays are moved to the host, checked, hashed and written in pieces of at most about this many bytes."""

_KINDS = {Params: KIND_PARAMS, LWECiphertext: KIND_CIPHERTEXT, ServerKey: KIND_SERVER_KEY}
_OTHER_SCHEMES = ("bfv", "ckks")
_PREAMBLE = struct.Struct("<5sHIQ")  # magic, version, header length, payload length (format.py's layout)
_LE = {"uint32": np.dtype("<u4"), "int32": np.dtype("<i4")}
_SECRET_REFUSAL = (
    "refusing to serialize a ClientKey with dumps/save: a client key is written only by an explicit call, "
    "save_secret_key(ck, path) or dumps_secret_key(ck)"
)


# --------------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------------


def _gadget(g: Gadget) -> dict:
    return {"base_log": g.base_log, "levels": g.levels}


def describe_params(params: Params) -> dict:
    """The canonical JSON description of TFHE ``params``: every field, so it rebuilds an equal Params."""
    _check_params_type(params)
    return {
        "message_bits": params.message_bits,
        "lwe_dim": params.lwe_dim,
        "glwe_dim": params.glwe_dim,
        "poly_size": params.poly_size,
        "moduli": list(params.moduli),
        "glwe_sigma": com.float_hex(params.glwe_sigma, "glwe_sigma"),
        "lwe_sigma": com.float_hex(params.lwe_sigma, "lwe_sigma"),
        "pbs_gadget": _gadget(params.pbs_gadget),
        "ks_gadget": _gadget(params.ks_gadget),
        "max_norm2": params.max_norm2,
        "name": params.name,
        "insecure": params.insecure,
    } | ({"extension": params.extension} if params.extension else {}) | (  # absent for nu = 0, as before nu
        {"grouping": params.grouping} if params.grouping != 1 else {}  # likewise for g = 1
    )


_PARAM_KEYS = {"message_bits", "lwe_dim", "glwe_dim", "poly_size", "moduli", "glwe_sigma", "lwe_sigma",
               "pbs_gadget", "ks_gadget", "max_norm2", "name", "insecure"}


def _gadget_from(value, what: str) -> Gadget:
    g = com.keys(value, {"base_log", "levels"}, what)
    return Gadget(com.json_int(g["base_log"], f"{what}.base_log"), com.json_int(g["levels"], f"{what}.levels"))


def params_from_description(desc) -> Params:
    """Rebuild (and re-check) the tfhe.Params of a :func:`describe_params` dict; SerializationError if invalid."""
    optional = {k for k in ("extension", "grouping") if isinstance(desc, dict) and k in desc}
    d = com.keys(desc, _PARAM_KEYS | optional, "parameter description")
    ints = {k: com.json_int(d[k], f"params.{k}") for k in ("message_bits", "lwe_dim", "glwe_dim", "poly_size")}
    for k in sorted(optional):
        ints[k] = com.json_int(d[k], f"params.{k}")
    if not isinstance(d["moduli"], list):
        raise SerializationError(f"params.moduli must be a list of integers, got {d['moduli']!r}")
    moduli = tuple(com.json_int(q, f"params.moduli[{i}]") for i, q in enumerate(d["moduli"]))
    max_norm2 = d["max_norm2"]
    if max_norm2 is not None:
        max_norm2 = com.json_int(max_norm2, "params.max_norm2")
    if not isinstance(d["name"], str) or not isinstance(d["insecure"], bool):
        raise SerializationError("params.name must be a string and params.insecure a bool")
    try:
        return Params(
            **ints,
            moduli=moduli,
            glwe_sigma=com.float_from_hex(d["glwe_sigma"], "params.glwe_sigma"),
            lwe_sigma=com.float_from_hex(d["lwe_sigma"], "params.lwe_sigma"),
            pbs_gadget=_gadget_from(d["pbs_gadget"], "params.pbs_gadget"),
            ks_gadget=_gadget_from(d["ks_gadget"], "params.ks_gadget"),
            max_norm2=max_norm2,
            name=d["name"],
            insecure=d["insecure"],
        )
    except SerializationError:
        raise
    except (CrossFHEError, ValueError, TypeError, ArithmeticError) as e:
        raise SerializationError(f"the parameters in the header are invalid: {e}") from None


def _check_params_type(params) -> None:
    if not isinstance(params, Params):
        raise TypeError(f"params must be tfhe.Params, got {type(params).__name__}")


def _summary(params: Params) -> str:
    return (f"{params.name or 'tfhe'} (p = {params.message_bits}, n = {params.lwe_dim}, k = {params.glwe_dim}, "
            f"N = {params.poly_size}{f' x 2^{params.extension}' if params.extension else ''}, "
            f"{f'grouping {params.grouping}, ' if params.grouping != 1 else ''}{len(params.moduli)} primes)")


def _header_params(fields: dict, given: Params | None) -> Params:
    """The parameters of a blob: rebuilt, checked against their digest and against ``given``."""
    if set(fields) != com.FIELDS:
        raise SerializationError(f"header must have the keys {sorted(com.FIELDS | {'kind', 'arrays'})}, got "
                                 f"{sorted(set(fields) | {'kind', 'arrays'})}")
    return com.checked_params(params_from_description(fields["params"]), fields["params_digest"], given, _summary)


# --------------------------------------------------------------------------------------------------
# Arrays: checks and pieces
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Array:
    """An array to write: ``value`` (NumPy or JAX, dtype and shape already checked), its stored dtype, and
    the primes its residues must lie below along ``limb_axis`` (counted from the end), if any."""

    name: str
    value: object
    dtype: str
    moduli: tuple[int, ...] | None = None
    limb_axis: int = -2

    @property
    def nbytes(self) -> int:
        return 4 * math.prod(self.value.shape)


def _check_below(data: np.ndarray, moduli: tuple[int, ...], limb_axis: int, name: str, start: int = 0) -> None:
    """Every residue of ``data`` below its prime (``moduli`` along ``limb_axis``); ``data`` holds rows
    ``start ...`` of array ``name``, for the message."""
    checks.check_residues(data, moduli, what=f"array {name!r}", axis=limb_axis, start=start)


def _check_bits(data: np.ndarray, name: str) -> None:
    checks.check_bounds(data, 0, 2, what=f"array {name!r}", meaning="key coefficients must be 0 or 1")


def _rows_per_chunk(shape: tuple[int, ...], limb_axis: int | None) -> int | None:
    """Rows of axis 0 per piece, or None to take the array whole (small, or axis 0 is its limb axis)."""
    size = 4 * math.prod(shape)
    if len(shape) == 0 or size <= CHUNK_BYTES or (limb_axis is not None and len(shape) + limb_axis == 0):
        return None
    return max(1, CHUNK_BYTES // (size // shape[0]))


@partial(jax.jit, static_argnames=("size",))
def _rows(x, start, *, size: int):
    return jax.lax.dynamic_slice_in_dim(x, start, size, axis=0)


def _pieces(arr: _Array):
    """(first row, host array) pieces of ``arr.value`` along axis 0, little-endian and contiguous, each
    range-checked. A JAX array is moved to the host one piece at a time (one compiled slice per size)."""
    x, le = arr.value, _LE[arr.dtype]
    rows = _rows_per_chunk(tuple(x.shape), arr.limb_axis if arr.moduli else None)
    if rows is None:
        spans = [(0, None)]
    else:
        spans = [(s, min(rows, x.shape[0] - s)) for s in range(0, x.shape[0], rows)]
    for start, size in spans:
        if size is None:
            part = x
        elif isinstance(x, np.ndarray):
            part = x[start : start + size]
        else:
            part = _rows(x, start, size=size)
        host = np.ascontiguousarray(com.host(part, arr.name), dtype=le)
        if arr.moduli is not None:
            _check_below(host, arr.moduli, arr.limb_axis, arr.name, start)
        yield start, host


def _loaded(arrays: dict, name: str, dtype, shape: tuple, moduli=None, limb_axis: int = -2) -> np.ndarray:
    """Array ``name`` of a blob after checking its dtype, shape and (in pieces) residue range."""
    a = com.check_array(arrays, name, dtype, shape)
    if moduli is not None:
        rows = _rows_per_chunk(a.shape, limb_axis)
        if rows is None:
            _check_below(a, moduli, limb_axis, name)
        else:
            for start in range(0, a.shape[0], rows):
                _check_below(a[start : start + rows], moduli, limb_axis, name, start)
    return a


def _source(x, name: str, dtype: str, shape: tuple, **check) -> _Array:
    """An :class:`_Array` for ``x`` after checking (without moving it) that it is a concrete array of
    ``dtype`` and ``shape``."""
    if isinstance(x, jax.core.Tracer):
        raise SerializationError(f"cannot serialize {name} while it is traced (inside jit or vmap)")
    if not isinstance(x, (np.ndarray, jax.Array)):
        x = com.host(x, name)
    if x.dtype != np.dtype(dtype) or tuple(x.shape) != tuple(shape):
        raise SerializationError(f"{name} is {x.dtype}{list(x.shape)}, expected {dtype}{list(shape)}")
    return _Array(name, x, dtype, **check)


# --------------------------------------------------------------------------------------------------
# Objects to arrays and back
# --------------------------------------------------------------------------------------------------


def _ciphertext_arrays(ct: LWECiphertext, params: Params) -> list[_Array]:
    if tuple(ct.moduli) != params.moduli or ct.a.ndim < 2 or ct.n != params.long_dim:
        raise SerializationError(f"the ciphertext (dimension {ct.n}, moduli {ct.moduli}) does not belong to "
                                 f"{_summary(params)} (dimension {params.long_dim}, moduli {params.moduli})")
    limbs = len(params.moduli)
    batch = tuple(ct.a.shape[:-2])
    return [_source(ct.b, "b", "uint32", batch + (limbs,), moduli=params.moduli, limb_axis=-1),
            _source(ct.a, "a", "uint32", batch + (limbs, params.long_dim), moduli=params.moduli)]


def _read_ciphertext(c: fmt.Container, params: Params) -> LWECiphertext:
    meta = com.meta(c.fields, set(), com.KEY_ID)
    com.check_names(c.arrays, {"b", "a"})
    limbs = len(params.moduli)
    shape = com.batch_shape(c.arrays, "b", (limbs,))
    b = _loaded(c.arrays, "b", np.uint32, shape, params.moduli, limb_axis=-1)
    a = _loaded(c.arrays, "a", np.uint32, shape + (params.long_dim,), params.moduli)
    return LWECiphertext(jnp.asarray(b), jnp.asarray(a), params.moduli, com.read_key_id(meta["key_id"]))


def _bsk_shape(params: Params) -> tuple[int, ...]:
    k1 = params.glwe_dim + 1
    return (params.ggsw_count, k1 * params.pbs_gadget.levels, k1, len(params.moduli), params.poly_size)


def _ksk_shape(params: Params) -> tuple[int, int]:
    return (params.lwe_dim + 1, params.long_dim * params.ks_gadget.levels)


def _server_key_arrays(sk: ServerKey, prefix: str = "") -> list[_Array]:
    """The arrays ``<prefix>bsk`` and ``<prefix>ksk`` of a server key (``prefix``: inside a larger blob)."""
    if not isinstance(sk, ServerKey):
        raise SerializationError(f"expected a tfhe.ServerKey, got {type(sk).__name__}")
    params = sk.params
    return [_source(sk.bsk, f"{prefix}bsk", "uint32", _bsk_shape(params), moduli=params.moduli),
            _source(sk.ksk, f"{prefix}ksk", "int32", _ksk_shape(params))]


def _server_key_host_arrays(sk: ServerKey, prefix: str = "") -> dict:
    """{name: host array} of :func:`_server_key_arrays`, range-checked, for :func:`crossfhe.io.format.pack`."""
    out = {}
    for arr in _server_key_arrays(sk, prefix):
        pieces = [piece for _, piece in _pieces(arr)]
        out[arr.name] = pieces[0] if len(pieces) == 1 else np.concatenate(pieces, axis=0)
    return out


def _read_server_key_arrays(arrays: dict, params: Params, prefix: str = "") -> ServerKey:
    """The server key of the arrays ``<prefix>bsk`` and ``<prefix>ksk``, checked against ``params``."""
    bsk = _loaded(arrays, f"{prefix}bsk", np.uint32, _bsk_shape(params), params.moduli)
    ksk = _loaded(arrays, f"{prefix}ksk", np.int32, _ksk_shape(params))
    return ServerKey.create(bsk, ksk, params, key_id(ksk[-1]))


def _read_server_key(c: fmt.Container, params: Params) -> ServerKey:
    com.meta(c.fields, set())
    com.check_names(c.arrays, {"bsk", "ksk"})
    return _read_server_key_arrays(c.arrays, params)


def _client_key_arrays(ck: ClientKey) -> list[_Array]:
    params = ck.params
    arrays = [_source(ck.lwe_key, "lwe_key", "int32", (params.lwe_dim,)),
              _source(ck.glwe_key, "glwe_key", "int32", (params.glwe_dim, params.poly_size))]
    for arr in arrays:
        _check_bits(com.host(arr.value, arr.name), arr.name)
    return arrays


def _read_client_key(c: fmt.Container, params: Params) -> ClientKey:
    meta = com.meta(c.fields, set(), com.KEY_ID)
    com.check_names(c.arrays, {"lwe_key", "glwe_key"})
    lwe_key = com.check_array(c.arrays, "lwe_key", np.int32, (params.lwe_dim,))
    glwe_key = com.check_array(c.arrays, "glwe_key", np.int32, (params.glwe_dim, params.poly_size))
    _check_bits(lwe_key, "lwe_key")
    _check_bits(glwe_key, "glwe_key")
    return ClientKey(jnp.asarray(lwe_key), jnp.asarray(glwe_key), params, com.read_key_id(meta["key_id"]))


def _read_params(c: fmt.Container, params: Params) -> Params:
    com.meta(c.fields, set())
    com.check_names(c.arrays, set())
    return params


_READERS = {KIND_PARAMS: _read_params, KIND_CIPHERTEXT: _read_ciphertext, KIND_SERVER_KEY: _read_server_key}


def _parts(obj, params: Params | None) -> tuple[str, Params, list[_Array], dict]:
    """(kind, params, arrays, meta) of a serializable object, its shapes and dtypes checked."""
    if isinstance(obj, ClientKey):
        raise SerializationError(_SECRET_REFUSAL)
    kind = _KINDS.get(type(obj))
    if kind is None:
        raise TypeError(f"dumps takes tfhe.Params, LWECiphertext or tfhe.ServerKey, got {type(obj).__name__}")
    if params is not None:
        _check_params_type(params)
    if kind == KIND_CIPHERTEXT:
        if params is None:
            raise SerializationError("an LWECiphertext does not carry its parameters: pass dumps(ct, params=...)")
        return kind, params, _ciphertext_arrays(obj, params), com.key_id_meta(obj.key_id)
    own = obj if kind == KIND_PARAMS else obj.params
    if params is not None and params != own:
        raise SerializationError(f"params = {_summary(params)} differ from the object's own parameters "
                                 f"{_summary(own)}")
    return kind, own, [] if kind == KIND_PARAMS else _server_key_arrays(obj), {}


# --------------------------------------------------------------------------------------------------
# Writing: the layout of crossfhe.io.format, streamed
# --------------------------------------------------------------------------------------------------


def _header(kind: str, params: Params, arrays: list[_Array], meta: dict) -> tuple[bytes, int]:
    """(header bytes, payload length): the JSON header exactly as :func:`crossfhe.io.format.pack` lays it out."""
    table, offset = [], 0
    for arr in arrays:
        table.append({"name": arr.name, "dtype": arr.dtype, "shape": [int(d) for d in arr.value.shape],
                      "offset": offset, "length": arr.nbytes})
        offset += arr.nbytes
    obj = {"params_digest": params.digest(), "params": describe_params(params), "meta": meta, "kind": kind,
           "arrays": table}
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("ascii"), offset


def _emit(header: bytes, payload_len: int, arrays: list[_Array], write: Callable) -> None:
    """Write the blob to ``write`` piece by piece: preamble, header, arrays (checked), SHA-256."""
    sha = hashlib.sha256()

    def put(data) -> None:
        sha.update(data)
        write(data)

    put(_PREAMBLE.pack(fmt.MAGIC, fmt.FORMAT_VERSION, len(header), payload_len))
    put(header)
    for arr in arrays:
        for _, piece in _pieces(arr):
            put(piece)
    write(sha.digest())


def _blob(kind: str, params: Params, arrays: list[_Array], meta: dict) -> bytes:
    header, payload_len = _header(kind, params, arrays, meta)
    total = fmt.PREAMBLE_SIZE + len(header) + payload_len + fmt.DIGEST_SIZE
    out = BytesIO()
    out.seek(total - 1)
    out.write(b"\0")  # one buffer of the final size; the pieces overwrite it in place
    out.seek(0)
    _emit(header, payload_len, arrays, out.write)
    if out.tell() != total:
        raise SerializationError(f"wrote {out.tell()} bytes, the layout announces {total}")
    return out.getvalue()


def _save(kind: str, params: Params, arrays: list[_Array], meta: dict, path, mode: int) -> None:
    """Stream the blob into a temporary file beside ``path``, fsync it, give it ``mode`` and move it over
    ``path``; on any error remove the temporary file and leave ``path`` as it was (format.write_atomic)."""
    header, payload_len = _header(kind, params, arrays, meta)
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            _emit(header, payload_len, arrays, f.write)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


def _expected_kind(expected):
    if expected is None or isinstance(expected, str):
        return expected
    if expected is ClientKey:
        raise SerializationError("load a client key with load_secret_key / loads_secret_key")
    try:
        return _KINDS[expected]
    except (KeyError, TypeError):
        raise TypeError(f"expected must be a kind string or one of {[t.__name__ for t in _KINDS]}, "
                        f"got {expected!r}") from None


def dumps(obj, *, params: Params | None = None) -> bytes:
    """The blob of a tfhe.Params, LWECiphertext or tfhe.ServerKey (layout and sizes: module docstring).

    params: required for an LWECiphertext (it does not carry its parameters), else checked against the
    object's own. A ClientKey is refused: use :func:`dumps_secret_key`. SerializationError if the object
    is inconsistent with its parameters (shapes, dtypes, a residue not below its prime); TypeError for
    another type. The blob is the only full-size copy made (module docstring, Memory).
    """
    return _blob(*_parts(obj, params))


def loads(blob, *, params: Params | None = None, expected=None):
    """The TFHE object of a :func:`dumps` blob, after every check of the module docstring.

    params: if given, the blob must be for these tfhe.Params (same digest; the result then uses this
    instance). expected: a class (``tfhe.Params``, ``LWECiphertext``, ``tfhe.ServerKey``) or kind string;
    any other kind is refused, as are client-key blobs (:func:`loads_secret_key`) and CKKS or BFV blobs.
    Raises SerializationError.
    """
    if params is not None:
        _check_params_type(params)
    c = fmt.unpack(blob, expected_kind=_expected_kind(expected))
    if c.kind == KIND_CLIENT_KEY:
        raise SerializationError("the blob holds a client key: load it explicitly with load_secret_key / "
                                 "loads_secret_key")
    reader = _READERS.get(c.kind)
    if reader is None:
        other = c.kind.partition(".")[0]
        if other in _OTHER_SCHEMES:
            raise SerializationError(f"the blob holds a {c.kind}, not a tfhe object: load it with "
                                     f"crossfhe.io.{other}, not crossfhe.io.tfhe")
        raise SerializationError(f"unknown kind {c.kind!r}; crossfhe.io.tfhe reads {sorted(_READERS)}")
    with checks.about(c.kind):
        return reader(c, _header_params(c.fields, params))


def save(obj, path, *, params: Params | None = None) -> None:
    """Write :func:`dumps` ``(obj)`` to ``path`` atomically, streamed (no full-size buffer in memory);
    if a check fails or the write does, ``path`` is left as it was and no temporary file remains."""
    _save(*_parts(obj, params), path, 0o644)


def load(path, *, params: Params | None = None, expected=None):
    """:func:`loads` of the file at ``path``."""
    return loads(fmt.read_bytes(path), params=params, expected=expected)


def _client_key_parts(ck: ClientKey, params: Params | None) -> tuple[str, Params, list[_Array], dict]:
    if not isinstance(ck, ClientKey):
        raise TypeError(f"expected a tfhe.ClientKey, got {type(ck).__name__}")
    if params is not None:
        _check_params_type(params)
        if params != ck.params:
            raise SerializationError(f"params = {_summary(params)} differ from the key's own {_summary(ck.params)}")
    return KIND_CLIENT_KEY, ck.params, _client_key_arrays(ck), com.key_id_meta(ck.key_id)


def dumps_secret_key(ck: ClientKey, *, params: Params | None = None) -> bytes:
    """The blob (kind ``tfhe.client_key``) of a client key: its binary keys, int32[n] and int32[k, N].
    Explicit on purpose: whoever holds this blob can decrypt everything under the key. ``params``, if
    given, must equal the key's own."""
    return _blob(*_client_key_parts(ck, params))


def loads_secret_key(blob, *, params: Params | None = None) -> ClientKey:
    """The ClientKey of a :func:`dumps_secret_key` blob (for ``params``, if given)."""
    if params is not None:
        _check_params_type(params)
    c = fmt.unpack(blob, expected_kind=KIND_CLIENT_KEY)
    with checks.about(c.kind):
        return _read_client_key(c, _header_params(c.fields, params))


def save_secret_key(ck: ClientKey, path, *, params: Params | None = None) -> None:
    """Write :func:`dumps_secret_key` to ``path`` atomically, readable by the owner only (mode 0o600)."""
    _save(*_client_key_parts(ck, params), path, 0o600)


def load_secret_key(path, *, params: Params | None = None) -> ClientKey:
    """:func:`loads_secret_key` of the file at ``path``."""
    return loads_secret_key(fmt.read_bytes(path), params=params)


__all__ = [
    "CHUNK_BYTES",
    "KIND_CIPHERTEXT",
    "KIND_CLIENT_KEY",
    "KIND_PARAMS",
    "KIND_SERVER_KEY",
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
