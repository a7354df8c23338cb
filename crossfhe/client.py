"""The client of a crossfhe server (``crossfhe serve``): keys made here, only their public part sent.

    client = Client("http://127.0.0.1:8000")          # token="..." where the server needs one
    client.models()                                     # what it hosts
    model = client.model("mlp")                         # the circuit's description, rebuilt here
    y = model.predict(x)                                # keys made and uploaded once, then encrypt -> run -> decrypt

Step by step: ``model.keygen()`` (kept in ``model.keys``; the secret part never leaves this process),
``model.upload_keys()`` (the evaluation keys, ``crossfhe.io.dumps(keys.public)``; returns the key id),
``enc = model.encrypt(...)``, ``out = model.run(enc)``, ``model.decrypt(out)``. A model exported by
:mod:`crossfhe.ml` takes samples and gives its predictions (its client side travels in the header); a plain circuit
takes and gives one array per input and output, as :meth:`crossfhe.Circuit.encrypt` and ``decrypt`` do.

Requests that fail to connect or lose their connection (a server restarting) or get 502/503/504 are retried with
backoff (``retries`` times): running a model is a pure function of its inputs and keys, so a retry gives the same
answer. A request that times out is not retried (the server may still be running it): TimeoutError. A refusal
(4xx) raises :class:`ServerError` with the server's code and message.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse

import numpy as np

from crossfhe import io
from crossfhe.api.circuit import Circuit, Encrypted, from_header
from crossfhe.errors import CrossFHEError
from crossfhe.io.bundle import pack_bundle, unpack_bundle


class ServerError(CrossFHEError):
    """A request the server refused: ``status`` (HTTP), ``code`` (e.g. ``"unknown_key"``), and its message."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


_RETRY_STATUS = (502, 503, 504)


class Client:
    """A connection to a crossfhe server at ``url`` (module docstring). ``timeout``: seconds per request;
    ``retries``: attempts after a failed connection or a 502/503/504, with backoff doubling from 0.25 s."""

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 600.0, retries: int = 6):
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"the server's URL must be http://host:port or https://host:port, got {url!r}")
        self.url = url.rstrip("/")
        self._parsed = parsed
        self.token = token
        self.timeout = float(timeout)
        self.retries = int(retries)

    # HTTP ----------------------------------------------------------------------------------------

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, dict, bytes]:
        """(status, headers, body) of one request, retried as the class docstring says; 4xx raise ServerError."""
        headers = {"Content-Type": "application/octet-stream"} if body is not None else {}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        delay, last = 0.25, None
        for attempt in range(self.retries + 1):
            conn_cls = http.client.HTTPSConnection if self._parsed.scheme == "https" else http.client.HTTPConnection
            conn = conn_cls(self._parsed.hostname, self._parsed.port, timeout=self.timeout)
            try:
                conn.request(method, path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                status, got = resp.status, {k.lower(): v for k, v in resp.getheaders()}
            except TimeoutError:
                conn.close()
                raise TimeoutError(f"{self.url}{path}: no answer within {self.timeout:g} s (not retried: the server "
                                   "may still be running it; raise timeout= for long runs)") from None
            except (ConnectionError, http.client.HTTPException, OSError) as e:
                last = e
            else:
                if status not in _RETRY_STATUS:
                    if status >= 400:
                        raise _server_error(status, data)
                    return status, got, data
                last = _server_error(status, data)
            finally:
                conn.close()
            if attempt < self.retries:
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
        if isinstance(last, ServerError):
            raise last
        raise ConnectionError(f"{self.url}{path}: no answer after {self.retries + 1} attempts ({last})") from last

    def json(self, path: str) -> dict:
        return json.loads(self.request("GET", path)[2])

    # the API -------------------------------------------------------------------------------------

    def health(self) -> dict:
        return self.json("/v1/health")

    def models(self) -> list[dict]:
        """The hosted models: name, scheme, digest, inputs, outputs, the keys they need."""
        return self.json("/v1/models")["models"]

    def model(self, name: str) -> RemoteModel | RemoteSwitch:
        """The model ``name``, its circuit rebuilt here from its exported header (no program: this side only
        makes keys, encrypts and decrypts); a switching function as a :class:`RemoteSwitch`."""
        info = self.json(f"/v1/models/{urllib.parse.quote(name, safe='')}")
        if info.get("scheme") == "switch":
            return RemoteSwitch(self, name, _switch_function(info, f"{self.url}'s model {name!r}"))
        circuit = from_header(info["header"], source=f"{self.url}'s model {name!r}")
        if circuit.digest != info["digest"]:
            raise CrossFHEError(f"{name}: the server's description does not match its digest")
        return RemoteModel(self, name, circuit)


def _server_error(status: int, data: bytes) -> ServerError:
    try:
        obj = json.loads(data)
        return ServerError(status, str(obj.get("error", "error")), str(obj.get("message", "")))
    except (ValueError, AttributeError):
        return ServerError(status, "error", data[:200].decode("utf-8", "replace"))


class RemoteModel:
    """A served model as its client sees it (module docstring): ``circuit`` (rebuilt from the header), ``spec``
    (a :mod:`crossfhe.ml` model's client side, or None), ``keys`` once made, ``key_id`` once uploaded."""

    def __init__(self, client: Client, name: str, circuit: Circuit):
        self.client, self.name, self.circuit = client, name, circuit
        self.spec = None
        if circuit.model is not None:
            from crossfhe.ml.client import ClientSpec

            self.spec = ClientSpec.from_json(circuit.model, f"{client.url}'s model {name!r}")
        self.key_id: str | None = None

    def __repr__(self) -> str:
        return f"RemoteModel({self.name!r} at {self.client.url}, {self.circuit!r})"

    @property
    def keys(self):
        return self.circuit.keys

    def _path(self, what: str) -> str:
        return f"/v1/models/{urllib.parse.quote(self.name, safe='')}/{what}"

    def keygen(self, *, seed: bytes | None = None):
        """Make this model's keys here (``seed``: 32 bytes, tests only); returns them (CircuitKeys)."""
        self.key_id = None
        return self.circuit.keygen(seed=seed)

    def upload_keys(self) -> str:
        """Send the evaluation keys (never the secret key) and return their key id (made first if needed)."""
        if self.circuit.keys is None:
            self.keygen()
        _, _, data = self.client.request("POST", self._path("keys"), io.dumps(self.circuit.keys.public))
        self.key_id = json.loads(data)["key_id"]
        return self.key_id

    def encrypt(self, *values) -> list[Encrypted]:
        """The circuit's encrypted inputs: one array per input (a plain circuit), or samples ``x`` (a model from
        :mod:`crossfhe.ml`: one sample or a batch ``[B, ...]``)."""
        if self.circuit.keys is None:
            self.keygen()
        if self.spec is not None:
            if len(values) != 1:
                raise TypeError(f"{self.name} is a model: encrypt takes the samples x, got {len(values)} arguments")
            return self.circuit.encrypt(*self.spec.encode(self.spec.samples(values[0])))
        return self.circuit.encrypt(*values)

    def run(self, inputs) -> list[Encrypted]:
        """The model run by the server on ``inputs`` (from :meth:`encrypt`); keys uploaded first if needed."""
        inputs = list(inputs)
        if self.key_id is None:
            self.upload_keys()
        body = pack_bundle([x.serialize() for x in inputs])
        _, _, data = self.client.request("POST", self._path("run"), body)
        blobs = unpack_bundle(data, count=len(self.circuit.graph.outputs), what=f"{self.name}'s reply")
        return [Encrypted.load(b) for b in blobs]

    def decrypt(self, outputs):
        """The outputs' values: a model's predictions, or the circuit's arrays (one, or a list)."""
        values = self.circuit.decrypt(*outputs)
        if self.spec is None:
            return values
        return self.spec.finish(self.spec.values(values))

    def __call__(self, *values):
        """``decrypt(run(encrypt(*values)))``."""
        return self.decrypt(self.run(self.encrypt(*values)))

    def predict(self, x) -> np.ndarray:
        """A :mod:`crossfhe.ml` model's predictions for samples ``x`` (one sample: its own row)."""
        if self.spec is None:
            raise TypeError(f"{self.name} is a plain circuit, not a model: call it with its inputs")
        y = self(x)
        return y[0] if self.spec.one(x) else y


def _switch_function(info: dict, source: str):
    import base64
    import binascii

    from crossfhe.api.switch import SwitchFunction

    try:
        blob = base64.b64decode(info["header"]["function"], validate=True)
    except (KeyError, TypeError, binascii.Error, ValueError):
        raise CrossFHEError(f"{source}: the server's description holds no switching function") from None
    fn = SwitchFunction.load(blob)
    if fn.digest != info.get("digest"):
        raise CrossFHEError(f"{source}: the server's description does not match its digest")
    return fn


class RemoteSwitch:
    """A served scheme-switching function (:class:`crossfhe.api.switch.SwitchFunction`) as its client sees it:
    :meth:`keygen` makes a CKKS and a TFHE key pair here and the switching keys between them, :meth:`upload_keys`
    sends the switching keys (public material), ``model(x)`` encrypts a real vector of up to ``function.slots``
    values, has the server run the function and decrypts the result. ``insecure=True`` for test parameters."""

    def __init__(self, client: Client, name: str, function):
        self.client, self.name, self.function = client, name, function
        self.ckks = self.tfhe = self.switch = None
        self.key_id: str | None = None

    def __repr__(self) -> str:
        return f"RemoteSwitch({self.name!r} at {self.client.url}, {self.function.op} on {self.function.slots} slots)"

    def _path(self, what: str) -> str:
        return f"/v1/models/{urllib.parse.quote(self.name, safe='')}/{what}"

    def keygen(self, *, seed: bytes | None = None, insecure: bool = False, progress="auto"):
        """The two key pairs (kept here) and the switching keys; ``seed``: 32 bytes (tests only)."""
        from crossfhe.api.ckks import CKKSContext
        from crossfhe.api.switch import SchemeSwitch
        from crossfhe.api.tfhe import TFHEContext

        f = self.function
        sub = (lambda tag: None) if seed is None else (lambda tag: __import__("hashlib").sha256(seed + tag).digest())
        self.ckks = CKKSContext.create(f.ckks_params, insecure=insecure, seed=sub(b"ckks"), progress=progress)
        self.tfhe = TFHEContext.create(f.tfhe_params, insecure=insecure, seed=sub(b"tfhe"), progress=progress)
        self.switch = SchemeSwitch.create(self.ckks, self.tfhe, slots=f.slots, seed=sub(b"switch"), progress=progress)
        self.key_id = None
        return self.switch

    def upload_keys(self) -> str:
        """Send the switching keys (public material only) and return their key id."""
        if self.switch is None:
            self.keygen()
        _, _, data = self.client.request("POST", self._path("keys"), io.dumps(self.switch.keys))
        self.key_id = json.loads(data)["key_id"]
        return self.key_id

    def encrypt(self, x):
        """A real vector of up to ``function.slots`` values, encrypted under this client's CKKS key."""
        if self.ckks is None:
            self.keygen()
        return self.ckks.encrypt(np.asarray(x, dtype=np.float64))

    def run(self, x):
        """The function on the encrypted vector ``x``, run by the server: an encrypted vector."""
        from crossfhe.api.ckks import EncryptedVector

        if self.key_id is None:
            self.upload_keys()
        _, _, data = self.client.request("POST", self._path("run"), pack_bundle([x.serialize()]))
        (blob,) = unpack_bundle(data, count=1, what=f"{self.name}'s reply")
        return EncryptedVector.load(self.ckks, blob)

    def decrypt(self, y) -> np.ndarray:
        return np.asarray(self.ckks.decrypt(y)).real

    def __call__(self, x) -> np.ndarray:
        return self.decrypt(self.run(self.encrypt(x)))


__all__ = ["Client", "RemoteModel", "RemoteSwitch", "ServerError"]
