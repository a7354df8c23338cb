"""Serving (crossfhe.serve, crossfhe.client): a real server on a free localhost port, talked to over HTTP.

The in-process server (:class:`crossfhe.serve.Server`, uvicorn on a thread) hosts circuits of each scheme on the
insecure test sets; the last tests start ``crossfhe serve`` as processes (two workers sharing a key store; a server
killed and restarted). Every result is decrypted and compared with the plain function; every refusal is a 4xx with
the server's code, never a 500.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import crossfhe
from crossfhe import io, testing
from crossfhe.api.circuit import Encrypted
from crossfhe.api.specs import BFVVector, CKKSVector, TFHEInt, TFHEInteger
from crossfhe.client import Client, ServerError
from crossfhe.io import format as fmt
from crossfhe.io.bundle import pack_bundle, unpack_bundle
from crossfhe.serve import Server

pytest.importorskip("starlette")  # the serve extra; `make test` installs it (dev extra)

CKKS_BOUND = 1e-3  # INSECURE_CKKS_N10 at scale 2^30: a square and a constant stay within 1e-4 (measured ~1e-6)


def _lin(x, y):
    return (x * 3 + y).apply(lambda v: (v * v) % 16)


def _poly(x):
    return x * x + 0.5


def _bfv(x):
    return x * x + 3


def _u8(x, y):
    return x + y


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    out = {}
    for name, fn, specs, params in (
            ("lin", _lin, (TFHEInt(2), TFHEInt(2)), testing.INSECURE_TFHE_P4),
            ("poly", _poly, (CKKSVector(8),), testing.INSECURE_CKKS_N10),
            ("bfv", _bfv, (BFVVector(8),), testing.INSECURE_BFV_N256),
            ("u8", _u8, (TFHEInteger("uint8"), TFHEInteger("uint8")), testing.INSECURE_TFHE_P4)):
        c = crossfhe.compile(fn, *specs, params=params, name=name, cache=False)
        c.keygen(seed=name.encode().ljust(32, b"\0"))
        out[name] = c.export(d / f"{name}.cfhe")
    return out


@pytest.fixture(scope="module")
def server(files, tmp_path_factory):
    with Server(list(files.values()), store=tmp_path_factory.mktemp("store"), window_ms=50) as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    return Client(server.url, retries=1)


@pytest.fixture(scope="module")
def lin(client):
    m = client.model("lin")
    m.keygen(seed=b"lin-client".ljust(32, b"\0"))
    m.upload_keys()
    return m


def _post(client, path, body):
    try:
        return client.request("POST", path, body)
    except ServerError as e:
        return e


# --------------------------------------------------------------------------------------------------
# What the server hosts, and runs
# --------------------------------------------------------------------------------------------------


def test_models_are_listed_and_rebuilt_from_their_headers(client, files):
    listed = {m["name"]: m for m in client.models()}
    assert sorted(listed) == ["bfv", "lin", "poly", "u8"]
    assert listed["lin"]["inputs"] == 2 and listed["lin"]["outputs"] == 1 and listed["lin"]["scheme"] == "tfhe"
    local = crossfhe.load_circuit(files["poly"])  # the file carries its parameters
    remote = client.model("poly").circuit
    assert remote.digest == local.digest == listed["poly"]["digest"]
    assert client.health()["status"] == "ok"


def test_an_exported_file_carries_its_parameters(files, tmp_path):
    """load_circuit(path) without parameters reads them from the file; edited ones (resealed) are refused."""
    import base64

    from crossfhe.errors import SerializationError
    from crossfhe.io import circuit_file

    header, body = circuit_file.read_circuit_file(files["bfv"])
    assert crossfhe.load_circuit(files["bfv"]).params.digest() == testing.INSECURE_BFV_N256.digest()
    for value in ("not base64!", base64.b64encode(b"junk").decode(),
                  base64.b64encode(io.dumps(testing.INSECURE_BFV_N256_COEFF)).decode(),
                  base64.b64encode(io.dumps(testing.INSECURE_CKKS_N10)).decode()):
        circuit_file.write_circuit_file(tmp_path / "edited.cfhe", {**header, "parameters": value}, body)
        with pytest.raises(SerializationError, match="parameters"):
            crossfhe.load_circuit(tmp_path / "edited.cfhe")


def test_tfhe_circuit_one_item_and_a_batch(lin):
    x, y = np.array([0, 1, 2, 3, 3]), np.array([3, 2, 1, 0, 3])
    np.testing.assert_array_equal(lin(x, y), ((x * 3 + y) ** 2) % 16)
    assert int(lin(np.array(2), np.array(1))) == 49 % 16


def test_ckks_bfv_and_integer_circuits(client):
    rng = np.random.default_rng(1)
    poly = client.model("poly")
    v = rng.uniform(-1, 1, (3, 8))
    assert np.max(np.abs(poly(v).real - (v * v + 0.5))) < CKKS_BOUND
    bfv = client.model("bfv")
    w = rng.integers(0, 50, 8)
    t = bfv.circuit.params.t
    np.testing.assert_array_equal(bfv(w), (w * w + 3) % t)
    u8 = client.model("u8")
    a, b = np.array([200, 17, 255], dtype=np.uint8), np.array([100, 1, 1], dtype=np.uint8)
    np.testing.assert_array_equal(u8(a, b), (a.astype(np.int64) + b) % 256)


def test_requests_within_the_window_run_as_one_launch(server, client, lin):
    """Eight concurrent requests under one key set, and four under another: each key set's arrive within the 50 ms
    window, so they take fewer launches than requests; every reply is its own request's."""
    other = client.model("lin")
    other.keygen(seed=b"lin-other".ljust(32, b"\0"))
    other.upload_keys()
    metrics = server.app.state.crossfhe.metrics
    before = (metrics.batch_requests.count, metrics.batch_requests.sum)
    jobs = [(lin, i % 4, (i * 3) % 4) for i in range(8)] + [(other, i % 4, 1) for i in range(4)]
    encrypted = [(m, x, y, m.encrypt(np.array(x), np.array(y))) for m, x, y in jobs]
    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
        outs = list(pool.map(lambda job: job[0].run(job[3]), encrypted))
    for (m, x, y, _), out in zip(encrypted, outs, strict=True):
        assert int(m.decrypt(out)) == ((x * 3 + y) ** 2) % 16
    launches = metrics.batch_requests.count - before[0]
    assert metrics.batch_requests.sum - before[1] == len(jobs)
    assert 2 <= launches < len(jobs)  # at least one per key set, fewer than one per request


def test_a_request_that_fails_in_a_launch_fails_alone(server, lin, monkeypatch):
    """A launch that raises is retried request by request: the faulty request gets its error, the others their
    answers. The fault is injected: a run of 3 items raises (no valid request makes a checked circuit raise)."""
    from crossfhe.serve import batcher

    real = batcher.run_batch

    def faulty(hosted, public, requests):
        if any(r.items == 3 for r in requests):
            raise crossfhe.errors.ParameterError("injected fault")
        return real(hosted, public, requests)

    monkeypatch.setattr(batcher, "run_batch", faulty)
    good = [lin.encrypt(np.array([i % 4, 1]), np.array([1, 2])) for i in range(3)]
    bad = lin.encrypt(np.array([1, 2, 3]), np.array([0, 0, 0]))
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(lin.run, e) for e in [*good, bad]]
        results = [f.exception() or f.result() for f in futures]
    for i, r in enumerate(results[:3]):
        np.testing.assert_array_equal(lin.decrypt(r), ((np.array([i % 4, 1]) * 3 + np.array([1, 2])) ** 2) % 16)
    assert isinstance(results[3], ServerError) and results[3].status == 400 and "injected" in results[3].message


def test_metrics_are_prometheus_text(client, lin):
    lin(np.array(1), np.array(1))
    _, headers, data = client.request("GET", "/metrics")
    text = data.decode()
    assert headers["content-type"].startswith("text/plain")
    for name in ("crossfhe_requests_total", "crossfhe_request_seconds_bucket", "crossfhe_batch_requests_count",
                 "crossfhe_queue_depth", 'crossfhe_keys{'):
        assert name in text
    ok = [ln for ln in text.splitlines() if ln.startswith("crossfhe_requests_total") and 'route="run"' in ln
          and 'status="200"' in ln]
    assert ok and int(ok[0].rsplit(" ", 1)[1]) >= 1


# --------------------------------------------------------------------------------------------------
# Keys
# --------------------------------------------------------------------------------------------------


def test_key_upload_is_idempotent(client, lin):
    blob = io.dumps(lin.keys.public)
    status, _, data = client.request("POST", "/v1/models/lin/keys", blob)
    assert status == 200 and json.loads(data) == {"key_id": lin.key_id, "created": False, "model": "lin"}


def test_secret_keys_and_other_blobs_are_refused_by_kind(client, lin, files):
    sk = io.dumps_secret_key(lin.keys.secret, params=lin.circuit.params)
    e = _post(client, "/v1/models/lin/keys", sk)
    assert isinstance(e, ServerError) and e.status == 400 and "secret key" in e.message
    ct = lin.encrypt(np.array(1), np.array(1))[0].serialize()
    e = _post(client, "/v1/models/lin/keys", ct)
    assert e.status == 400 and "circuit.value" in e.message
    e = _post(client, "/v1/models/lin/keys", b"")
    assert e.status == 400


def test_keys_another_model_cannot_use_are_refused(client):
    poly = client.model("poly")
    poly.keygen(seed=b"poly-keys".ljust(32, b"\0"))
    e = _post(client, "/v1/models/lin/keys", io.dumps(poly.keys.public))
    assert e.status == 400 and e.code == "wrong_keys"


def test_a_key_id_held_with_other_content_is_a_conflict(client, lin):
    """A TFHE server key's id comes from its key-switching key: another bootstrapping key under the same id (one
    word changed, in range, resealed) is refused, and the held key stays."""
    c = fmt.unpack(io.dumps(lin.keys.public))
    arrays = dict(c.arrays)
    name = next(n for n in arrays if n.startswith("bsk"))
    a = arrays[name].copy()
    a.reshape(-1)[0] = (int(a.reshape(-1)[0]) + 1) % 2
    arrays[name] = a
    e = _post(client, "/v1/models/lin/keys", fmt.pack(c.kind, c.fields, arrays))
    assert e.status == 409 and lin.key_id in e.message
    assert int(lin(np.array(1), np.array(2))) == 25 % 16


# --------------------------------------------------------------------------------------------------
# Bad requests: each a 4xx in the user's terms
# --------------------------------------------------------------------------------------------------


def _body(model, *values):
    return pack_bundle([x.serialize() for x in model.encrypt(*values)])


def test_values_under_keys_the_server_does_not_hold(client):
    m = client.model("lin")
    m.keygen(seed=b"never-uploaded".ljust(32, b"\0"))
    e = _post(client, "/v1/models/lin/run", _body(m, np.array(1), np.array(1)))
    assert e.status == 404 and e.code == "unknown_key" and m.keys.public.key_id in e.message


def test_tampered_truncated_and_malformed_requests(client, lin):
    body = bytearray(_body(lin, np.array(1), np.array(2)))
    flipped = bytearray(body)
    flipped[-40] ^= 1  # inside the last value's payload: its SHA-256 no longer matches
    for bad, code in ((bytes(flipped), "malformed"), (bytes(body[:-7]), "malformed"), (b"junk", "malformed"),
                      (pack_bundle([bytes(body)]), "malformed")):
        e = _post(client, "/v1/models/lin/run", bad)
        assert isinstance(e, ServerError) and e.status == 400 and e.code == code, e


def test_residues_out_of_range_are_refused(client, lin):
    x = lin.encrypt(np.array(1), np.array(2))
    c = fmt.unpack(x[0].serialize())
    arrays = dict(c.arrays)
    leaf = arrays["leaf1"].copy()
    leaf.reshape(-1)[0] = np.iinfo(leaf.dtype).max  # above every modulus of the insecure P4 set
    arrays["leaf1"] = leaf
    e = _post(client, "/v1/models/lin/run", pack_bundle([fmt.pack(c.kind, c.fields, arrays), x[1].serialize()]))
    assert e.status == 400 and "leaf1" in e.message


def test_wrong_model_and_wrong_parameters(client, lin, tmp_path):
    e = _post(client, "/v1/models/bfv/run", pack_bundle([lin.encrypt(np.array(1), np.array(2))[0].serialize()]))
    assert e.status == 400 and e.code == "wrong_model"
    other = crossfhe.compile(_lin, TFHEInt(2), TFHEInt(2), params=testing.INSECURE_TFHE_P4_G2, name="lin",
                             cache=False)  # the same function at other parameters
    other.keygen(seed=b"other-params".ljust(32, b"\0"))
    e = _post(client, "/v1/models/lin/run", pack_bundle([v.serialize() for v in other.encrypt(np.array(1),
                                                                                               np.array(2))]))
    assert e.status == 400 and e.code == "wrong_model"
    e = _post(client, "/v1/models/nope/run", b"")
    assert e.status == 404 and e.code == "unknown_model"


def test_inputs_under_two_key_pairs_are_refused(client, lin):
    m = client.model("lin")
    m.keygen(seed=b"second-pair".ljust(32, b"\0"))
    a = lin.encrypt(np.array(1), np.array(2))
    b = m.encrypt(np.array(1), np.array(2))
    e = _post(client, "/v1/models/lin/run", pack_bundle([a[0].serialize(), b[1].serialize()]))
    assert e.status == 400 and e.code == "wrong_key"


def test_size_limits_and_the_token(files, tmp_path):
    with Server([files["lin"]], store=tmp_path / "store", token="s3cret", max_request_bytes=1 << 16,
                max_key_bytes=1 << 20) as s:
        open_client = Client(s.url, retries=0)
        assert open_client.health()["status"] == "ok"  # health, models and metrics stay open
        m = open_client.model("lin")
        m.keygen(seed=b"tok".ljust(32, b"\0"))
        e = _post(open_client, "/v1/models/lin/keys", io.dumps(m.keys.public))
        assert e.status == 401
        authed = Client(s.url, token="s3cret", retries=0)
        e = _post(authed, "/v1/models/lin/keys", io.dumps(m.keys.public))  # 5 MiB against a 1 MiB limit
        assert e.status == 413 and e.code == "too_large"
        e = _post(authed, "/v1/models/lin/run", b"\0" * (1 << 17))
        assert e.status == 413
        assert not list((tmp_path / "store" / "incoming").iterdir())  # nothing half-written left


# --------------------------------------------------------------------------------------------------
# A scheme-switching function
# --------------------------------------------------------------------------------------------------


def test_a_switching_function_is_served(tmp_path):
    """ReLU on an encrypted CKKS vector through TFHE, saved without keys, hosted, called by a client whose
    switching keys (public material) are all the server holds; CKKS keys refused by kind, a vector under other
    parameters refused. Values sit at least a fifth of a step from the grid's rounding boundaries, so the
    reference is exact up to the switch's error bound (tests/test_switch.py's _tolerance)."""
    from crossfhe.api.switch import SwitchFunction
    from crossfhe.client import RemoteSwitch
    from crossfhe.convert import switch as sw

    fn = SwitchFunction.create(testing.INSECURE_CKKS_BOOT_N11, testing.INSECURE_TFHE_P4, "relu", (-1, 1), slots=8,
                               name="relu")
    io.save(fn, tmp_path / "relu.cfhe")
    assert io.load(tmp_path / "relu.cfhe").digest == fn.digest
    with Server([tmp_path / "relu.cfhe"], store=tmp_path / "store") as s:
        client = Client(s.url, retries=0)
        m = client.model("relu")
        assert isinstance(m, RemoteSwitch) and client.models()[0]["scheme"] == "switch"
        m.keygen(seed=b"served-switch".ljust(32, b"\0"), insecure=True, progress=None)
        e = _post(client, "/v1/models/relu/keys", io.dumps(m.ckks.public.keys))
        assert e.status == 400 and e.code == "wrong_keys", e  # CKKS keys alone cannot switch
        assert m.upload_keys() == m.ckks.key_id
        qz = sw.Quantizer(-1.0, 1.0, fn.bits, 4)
        v = qz.dequantize(np.array([0, 2, 3, 4, 5, 7, 6, 1])) + np.array([0.2, -0.3, 0.25, -0.2, 0.3, 0, 0.1, -0.1]) \
            * qz.step
        noise, evalmod = sw.shift_errors(testing.INSECURE_TFHE_P4, sw.shift_for(testing.INSECURE_TFHE_P4))
        tol = (8 * noise + evalmod + 2.0**-10) * fn.out_step
        np.testing.assert_allclose(m(v), fn.reference(v), atol=tol)
        other = client.model("relu")
        other.ckks = crossfhe.CKKSContext.create(testing.INSECURE_CKKS_N10, insecure=True, progress=None)
        e = _post(client, "/v1/models/relu/run", pack_bundle([other.ckks.encrypt(v).serialize()]))
        assert e.status == 400 and e.code == "wrong_model"


# --------------------------------------------------------------------------------------------------
# Processes: workers sharing the store, a restart
# --------------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(files, store, port, workers=1):
    cmd = [sys.executable, "-m", "crossfhe", "serve", files["lin"], "--port", str(port), "--store", str(store),
           "--workers", str(workers), "--window-ms", "1"]
    proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    client = Client(f"http://127.0.0.1:{port}", retries=40)
    client.health()  # retried until the server answers
    return proc, client


def _stop(proc, sig=signal.SIGTERM):
    os.killpg(proc.pid, sig)
    out, _ = proc.communicate(timeout=60)
    return out.decode(errors="replace")


def test_two_workers_share_the_key_store(files, tmp_path):
    """``--workers 2``: keys uploaded through one worker serve runs through the other (the kernel hands
    connections to either worker; runs are sent until the other one answers)."""
    proc, client = _start(files, tmp_path / "store", _free_port(), workers=2)
    try:
        m = client.model("lin")
        m.keygen(seed=b"workers".ljust(32, b"\0"))
        _, headers, data = client.request("POST", "/v1/models/lin/keys", io.dumps(m.keys.public))
        uploader = headers["x-crossfhe-worker"]
        m.key_id = json.loads(data)["key_id"]
        served = set()
        for i in range(60):
            x, y = np.array(i % 4), np.array((i + 1) % 4)
            _, headers, data = client.request("POST", "/v1/models/lin/run", _body(m, x, y))
            out = [Encrypted.load(b) for b in unpack_bundle(data)]
            assert int(m.decrypt(out)) == ((int(x) * 3 + int(y)) ** 2) % 16
            served.add(headers["x-crossfhe-worker"])
            if served - {uploader}:
                break
        assert served - {uploader}, f"every run went to the uploading worker {uploader}"
    finally:
        log = _stop(proc)
    assert "OPEN - no token" in log


def test_a_restarted_server_keeps_its_keys_and_clients_retry(files, tmp_path):
    """kill -9 while clients run: the restarted server (same store) serves them without a new upload; the
    clients' retries carry them over the gap."""
    port = _free_port()
    proc, client = _start(files, tmp_path / "store", port)
    m = client.model("lin")
    m.keygen(seed=b"restart".ljust(32, b"\0"))
    m.upload_keys()
    assert int(m(np.array(1), np.array(1))) == 0
    results, done = [], threading.Event()

    def load():
        i = 0
        while not done.is_set():
            x, y = np.array(i % 4), np.array(2)
            got = int(m(x, y))
            results.append((time.monotonic(), got, ((i % 4 * 3 + 2) ** 2) % 16))
            i += 1

    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            job = pool.submit(load)
            time.sleep(1.0)
            _stop(proc, signal.SIGKILL)
            killed = time.monotonic()
            proc, _ = _start(files, tmp_path / "store", port)
            time.sleep(1.0)
            done.set()
            job.result(timeout=300)
    finally:
        _stop(proc)
    before = [r for r in results if r[0] < killed]
    after = [r for r in results if r[0] > killed]
    assert before and after  # runs on both sides of the kill, none lost: each call returned or raised
    assert all(got == want for _, got, want in results)


# --------------------------------------------------------------------------------------------------
# The parts on their own: the store's memory bound, the scheduler's turns
# --------------------------------------------------------------------------------------------------


def test_store_keeps_keys_on_disk_and_a_bounded_lru_in_memory(tmp_path, lin):
    from crossfhe.serve.store import Store

    blobs = []
    for seed in (b"lru-a", b"lru-b"):
        c = crossfhe.compile(_lin, TFHEInt(2), TFHEInt(2), params=testing.INSECURE_TFHE_P4, cache=False)
        blobs.append(io.dumps(c.keygen(seed=seed.ljust(32, b"\0")).public))
    from crossfhe.serve.store import _resident

    one = _resident(io.loads(blobs[0]), len(blobs[0]))
    assert one > len(blobs[0])  # a loaded server key holds more than its blob: the bound counts what it holds
    store = Store(tmp_path, cache_bytes=one + 10)  # room for one key set
    ids = []
    for blob in blobs:
        f, path = store.open_incoming()
        with f:
            f.write(blob)
        ids.append(store.admit(path, lambda public: None)[0])
    assert store.stats()["disk_keys"] == 2 and store.stats()["memory_keys"] == 1
    assert store.get(ids[0]).key_id == ids[0]  # evicted, read back from disk
    assert list(store._lru) == [ids[0]]
    assert Store(tmp_path).get(ids[1]).key_id == ids[1]  # another process's store: the same files
    for bad in ("../keys", "A" * 32, ""):
        assert not store.holds(bad)
        with pytest.raises(KeyError):
            store.get(bad)
    assert not list((tmp_path / "incoming").iterdir())


def test_key_sets_take_turns(monkeypatch):
    """Ten requests under key set A queued before one under B, two items per launch: B runs in the second launch,
    not after all of A's."""
    import asyncio

    from crossfhe.serve import batcher
    from crossfhe.serve.metrics import Metrics
    from crossfhe.serve.models import Request

    order = []

    def fake(hosted, public, requests):
        order.append([r.key_id for r in requests])
        return [[b""] for _ in requests]

    monkeypatch.setattr(batcher, "run_batch", fake)

    class Hosted:
        name = "m"

    async def main():
        b = batcher.Batcher(Metrics(), window_s=0.01, max_items=2)
        b.start()
        jobs = [b.submit(Hosted, None, Request([], "a" * 32, ())) for _ in range(10)]
        jobs.append(b.submit(Hosted, None, Request([], "b" * 32, ())))
        await asyncio.gather(*jobs)
        await b.stop()

    asyncio.run(main())
    assert order[0] == ["a" * 32] * 2 and order[1] == ["b" * 32]
    assert sum(len(launch) for launch in order) == 11
