"""Clients' evaluation keys on disk, by key id, with the ones in use kept in memory.

Layout of the store's directory (shared by every worker process of one deployment)::

    keys/<key id>.cfhe      the key blob as uploaded (crossfhe.io format), written atomically
    incoming/               uploads being received (removed when done or refused)

A key id is the key pair's own (``keys.public.key_id``: 32 lowercase hex digits, made with the secret key and
carried by every value encrypted under it), so values name the keys they need. A file appears whole or not at all:
an upload is streamed into ``incoming/``, flushed to disk, checked, and linked to its final name (``os.link``, which
refuses an existing name), so two workers receiving the same key at once keep one file and a killed server leaves
no half-written key. Uploading a key id the store holds with the same bytes is a no-op (idempotent); with other
bytes it is refused (:class:`KeyConflict`).

In memory: an LRU of loaded keys, bounded by the bytes their arrays hold (``cache_bytes``; a key larger than the
bound is loaded for its use and not kept). Each hosted circuit also keeps the runtime copy of the key set it ran
last (:meth:`crossfhe.Circuit.run`), outside this bound. A worker that misses loads the file another worker wrote.
An upload is read whole once (to parse it) beside its parsed arrays, then dropped.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import threading
import time
from collections import OrderedDict
from pathlib import Path

from crossfhe import io
from crossfhe.errors import SerializationError

KEY_ID = re.compile(r"^[0-9a-f]{32}$")

EVALUATION_KINDS = ("ckks.evaluation_keys", "bfv.evaluation_keys", "tfhe.server_key", "switch.keys")
"""The blob kinds a server accepts as evaluation keys. Every other kind is refused before it is parsed; secret
keys (``ckks.secret_key``, ``bfv.secret_key``, ``tfhe.client_key``) with a message saying never to send them."""

SECRET_KINDS = ("ckks.secret_key", "bfv.secret_key", "tfhe.client_key")


class KeyConflict(Exception):
    """A key id the store holds with other bytes."""


class UploadTooLarge(Exception):
    """An upload beyond the store's limit."""


class Store:
    """The key store of one deployment (module docstring): ``root`` its directory, ``cache_bytes`` the in-memory
    bound, ``max_key_bytes`` the largest upload."""

    def __init__(self, root, *, cache_bytes: int = 8 << 30, max_key_bytes: int = 8 << 30):
        self.root = Path(root)
        self.keys_dir = self.root / "keys"
        self.incoming = self.root / "incoming"
        self.keys_dir.mkdir(parents=True, exist_ok=True)
        self.incoming.mkdir(parents=True, exist_ok=True)
        self.cache_bytes = int(cache_bytes)
        self.max_key_bytes = int(max_key_bytes)
        self._lru: OrderedDict[str, tuple[object, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}
        for stale in self.incoming.glob("upload-*.part"):  # a killed server's unfinished uploads (an hour old)
            with contextlib.suppress(OSError):
                if time.time() - stale.stat().st_mtime > 3600:
                    stale.unlink()

    # receiving ---------------------------------------------------------------------------------

    def open_incoming(self):
        """(file object, path) of a new upload in ``incoming/`` (mode 0o600)."""
        fd, path = tempfile.mkstemp(dir=self.incoming, prefix="upload-", suffix=".part")
        return os.fdopen(fd, "wb"), Path(path)

    def discard(self, path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)

    def admit(self, path: Path, check, load=io.loads) -> tuple[str, bool, object]:
        """Check the received blob at ``path`` and keep it: ``load(blob)`` reads it (the model's way: the parameters
        it runs with), ``check(public) -> None`` raises for keys the model cannot use. Returns (key id, created, the
        loaded keys). SerializationError for a blob that is not evaluation keys (a secret key named as such),
        :class:`KeyConflict` for an id held with other bytes. The file at ``path`` is gone afterwards, kept or not."""
        try:
            data = path.read_bytes()
            public = self._parse(data, load)
            check(public)
            key_id = public.key_id
            digest = hashlib.sha256(data).digest()
            del data
            final = self.path_of(key_id)
            try:
                os.link(path, final)
                created = True
            except FileExistsError:
                created = False
                if _file_digest(final) != digest:
                    raise KeyConflict(f"key id {key_id} is held with other content: a key pair's id is unique; "
                                      "make new keys") from None
            with self._lock:
                self._remember(key_id, public, _resident(public, final.stat().st_size))
            return key_id, created, public
        finally:
            self.discard(path)

    @staticmethod
    def _parse(data: bytes, load):
        kind = io.kind_of(data)
        if kind in SECRET_KINDS:
            raise SerializationError(f"this blob is a secret key (kind {kind}): a secret key never leaves its owner; "
                                     "upload the evaluation keys (keys.public)")
        if kind not in EVALUATION_KINDS:
            raise SerializationError(f"this blob is a {kind}, not evaluation keys (kinds {list(EVALUATION_KINDS)})")
        public = load(data)
        key_id = getattr(public, "key_id", None)
        if not isinstance(key_id, str) or not KEY_ID.match(key_id):
            raise SerializationError("these evaluation keys carry no key id (keys made by crossfhe carry one)")
        return public

    # reading -----------------------------------------------------------------------------------

    def path_of(self, key_id: str) -> Path:
        if not KEY_ID.match(key_id or ""):
            raise KeyError(key_id)
        return self.keys_dir / f"{key_id}.cfhe"

    def holds(self, key_id: str) -> bool:
        try:
            return self.path_of(key_id).exists()
        except KeyError:
            return False

    def get(self, key_id: str, load=io.loads):
        """The keys of ``key_id``, from memory or from disk, read with ``load`` (KeyError if the store does not hold
        them)."""
        with self._lock:
            hit = self._lru.get(key_id)
            if hit is not None:
                self._lru.move_to_end(key_id)
                return hit[0]
            gate = self._loading.setdefault(key_id, threading.Lock())
        with gate:  # one load per key id at a time; the others wait for it
            with self._lock:
                hit = self._lru.get(key_id)
                if hit is not None:
                    return hit[0]
            path = self.path_of(key_id)
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                raise KeyError(key_id) from None
            public = self._parse(data, load)
            size = _resident(public, len(data))
            del data
            with self._lock:
                self._remember(key_id, public, size)
                self._loading.pop(key_id, None)
            return public

    def _remember(self, key_id: str, public, size: int) -> None:
        self._lru.pop(key_id, None)
        if size > self.cache_bytes:
            return
        self._lru[key_id] = (public, size)
        while sum(s for _, s in self._lru.values()) > self.cache_bytes:
            self._lru.popitem(last=False)

    def stats(self) -> dict:
        """Keys on disk and in memory (count and bytes)."""
        with self._lock:
            mem = len(self._lru), sum(s for _, s in self._lru.values())
        disk = [p.stat().st_size for p in self.keys_dir.glob("*.cfhe")]
        return {"disk_keys": len(disk), "disk_bytes": sum(disk), "memory_keys": mem[0], "memory_bytes": mem[1]}


def _resident(public, blob_bytes: int) -> int:
    """Bytes the loaded keys hold (their arrays; a TFHE server key holds twice its blob), at least the blob's."""
    import jax

    try:
        held = sum(int(getattr(x, "nbytes", 0)) for x in jax.tree.leaves(public))
    except Exception:  # noqa: BLE001 - an object JAX cannot flatten: its blob's size is the estimate
        held = 0
    return max(held, blob_bytes)


def _file_digest(path: Path) -> bytes:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.digest()


__all__ = ["EVALUATION_KINDS", "KEY_ID", "SECRET_KINDS", "KeyConflict", "Store", "UploadTooLarge"]
