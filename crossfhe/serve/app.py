"""The HTTP server: exported circuits and models behind a small JSON and binary API, on Starlette and uvicorn.

Why this stack: the bodies are binary blobs (keys, ciphertexts), not JSON documents, so FastAPI's request models
(pydantic) would add a dependency and a layer without checking anything our loaders do not; Starlette is the small
ASGI toolkit FastAPI itself is built on (streamed request bodies, plain routing, lifespan), and uvicorn is the
reference ASGI server, with ``--workers`` processes sharing one socket.

Endpoints (``{name}``: a hosted model's name; errors are JSON ``{"error": code, "message": text}`` with a 4xx, never a
500 for bad input):

======================================  ============================================================================
``GET  /v1/health``                     ``{"status": "ok", "models": n, "worker": pid}``
``GET  /metrics``                       Prometheus text (:mod:`crossfhe.serve.metrics`)
``GET  /v1/models``                     the models: name, scheme, digest, inputs, outputs, specs, keys they need
``GET  /v1/models/{name}``              one model and its ``header``: a circuit's exported header (graph, specs,
                                        parameters, a model's client side: what
                                        :func:`crossfhe.api.circuit.from_header` rebuilds), or a switching
                                        function's blob (``{"function": base64}``)
``POST /v1/models/{name}/keys``         body: evaluation keys (``crossfhe.io.dumps(keys.public)``; a switching
                                        function: ``io.dumps(switch.keys)``), streamed to
                                        disk; 201 ``{"key_id", "created": true}``, 200 if already held
``POST /v1/models/{name}/run``          body: a bundle (:mod:`crossfhe.io.bundle`) of one ``circuit.value`` per
                                        input (a switching function: one ``ckks.vector``); reply: a bundle of the
                                        outputs
======================================  ============================================================================

With a token (``CROSSFHE_SERVE_TOKEN`` or ``--token-file``), key uploads and runs need ``Authorization: Bearer
<token>``; without one the server says at start-up that anyone who reaches it may upload keys and run models.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import sys
import threading
import time
from dataclasses import asdict, dataclass, field

from crossfhe.errors import CrossFHEError, SerializationError
from crossfhe.io.bundle import pack_bundle
from crossfhe.serve.batcher import Batcher, ShuttingDown
from crossfhe.serve.metrics import Metrics
from crossfhe.serve.models import Hosted, RequestError, open_model
from crossfhe.serve.store import KeyConflict, Store, UploadTooLarge

log = logging.getLogger("crossfhe.serve")

CONFIG_ENV = "CROSSFHE_SERVE_CONFIG"
TOKEN_ENV = "CROSSFHE_SERVE_TOKEN"


@dataclass
class Config:
    """A deployment: ``models`` (exported circuit files), ``store`` (the key store's directory, shared by the
    workers), ``window_ms`` (how long a request waits for others to join its launch), ``max_items`` (items per
    launch), ``max_request_bytes`` (a run request's body), ``max_key_bytes`` (an upload), ``key_cache_bytes`` (keys
    kept in memory per worker)."""

    models: list = field(default_factory=list)
    store: str = "crossfhe-keys"
    window_ms: float = 5.0
    max_items: int = 64
    max_request_bytes: int = 512 << 20
    max_key_bytes: int = 8 << 30
    key_cache_bytes: int = 8 << 30

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Config:
        return cls(**json.loads(text))


class _State:
    def __init__(self, config: Config, token: str | None):
        from crossfhe import runtime

        runtime.enable_compilation_cache()  # a restarted worker loads its programs ($CROSSFHE_JAX_CACHE=0: off)
        self.config = config
        self.token = token
        self.metrics = Metrics()
        self.store = Store(config.store, cache_bytes=config.key_cache_bytes, max_key_bytes=config.max_key_bytes)
        self.models: dict[str, Hosted] = {}
        for path in config.models:
            hosted = open_model(path)
            if hosted.name in self.models:
                raise CrossFHEError(f"two models are named {hosted.name!r} ({self.models[hosted.name].path} and "
                                    f"{path}); export one under another name")
            self.models[hosted.name] = hosted
        self.batcher = Batcher(self.metrics, window_s=config.window_ms / 1000, max_items=config.max_items)


def create_app(config: Config, token: str | None = None):
    """The ASGI application of ``config`` (module docstring); ``token``: the bearer token guarding key uploads and
    runs (None: open, said at start-up)."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route

    state = _State(config, token)
    worker = str(os.getpid())

    def error(status: int, code: str, message: str):
        return JSONResponse({"error": code, "message": message}, status_code=status)

    def guarded(route: str, handler):
        async def endpoint(request):
            t0 = time.perf_counter()
            try:
                if state.token is not None and route in ("keys", "run"):
                    given = request.headers.get("authorization", "")
                    if not hmac.compare_digest(given.encode(), f"Bearer {state.token}".encode()):
                        raise RequestError(401, "unauthorized", "this server needs a bearer token for key uploads "
                                                                "and runs (Authorization: Bearer <token>)")
                response = await handler(request)
            except RequestError as e:
                response = error(e.status, e.code, str(e))
            except SerializationError as e:
                response = error(400, "malformed", str(e))
            except KeyConflict as e:
                response = error(409, "key_conflict", str(e))
            except UploadTooLarge as e:
                response = error(413, "too_large", str(e))
            except ShuttingDown as e:  # the client retries it against the restarted server
                response = error(503, "shutting_down", str(e))
            except CrossFHEError as e:  # the library's own refusals (parameters, keys): the request's fault
                response = error(400, "refused", str(e))
            except Exception:  # noqa: BLE001 - a bug of ours: logged, answered without internals
                log.exception("internal error on %s", request.url.path)
                response = error(500, "internal", "internal error (logged by the server)")
            response.headers["X-Crossfhe-Worker"] = worker
            state.metrics.request(route, response.status_code,
                                  time.perf_counter() - t0 if route == "run" else None)
            return response

        return endpoint

    def hosted(request) -> Hosted:
        name = request.path_params["name"]
        found = state.models.get(name)
        if found is None:
            raise RequestError(404, "unknown_model", f"no model named {name!r} here; the models are "
                                                     f"{sorted(state.models)}")
        return found

    async def body(request, limit: int, what: str) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise UploadTooLarge(f"{what} of {int(declared)} bytes is over this server's limit of {limit}")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise UploadTooLarge(f"{what} is over this server's limit of {limit} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    async def health(request):
        return JSONResponse({"status": "ok", "models": len(state.models), "worker": os.getpid()})

    async def metrics(request):
        return PlainTextResponse(state.metrics.render(state.store.stats()),
                                 media_type="text/plain; version=0.0.4; charset=utf-8")

    async def models(request):
        return JSONResponse({"models": [m.describe() for m in state.models.values()]})

    async def model(request):
        m = hosted(request)
        return JSONResponse({**m.describe(), "header": m.public_header()})

    async def keys(request):
        m = hosted(request)
        limit = state.store.max_key_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise UploadTooLarge(f"keys of {int(declared)} bytes are over this server's limit of {limit}")
        f, path = state.store.open_incoming()
        try:
            size = 0
            with f:
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > limit:
                        raise UploadTooLarge(f"the keys are over this server's limit of {limit} bytes")
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
        except BaseException:
            state.store.discard(path)
            raise
        if size == 0:
            state.store.discard(path)
            raise RequestError(400, "malformed", "the upload is empty: send crossfhe.io.dumps(keys.public)")
        key_id, created, _ = await state.batcher.run_keys(state.store.admit, path, m.check_keys, m.load_keys)
        return JSONResponse({"key_id": key_id, "created": created, "model": m.name}, status_code=201 if created
                            else 200)

    async def run(request):
        m = hosted(request)
        data = await body(request, state.config.max_request_bytes, "the request")
        req = await asyncio.to_thread(m.check_request, data)
        del data
        try:
            public = await state.batcher.run_keys(state.store.get, req.key_id, m.load_keys)
        except KeyError:
            raise RequestError(404, "unknown_key", f"this server holds no evaluation keys with id {req.key_id}: "
                                                   f"upload them first (POST /v1/models/{m.name}/keys)") from None
        m.check_keys(public, req.key_id)
        req = await asyncio.to_thread(m.prepare, req, public)
        outs = await state.batcher.submit(m, public, req)
        return Response(pack_bundle(outs), media_type="application/octet-stream")

    @contextlib.asynccontextmanager
    async def lifespan(app):
        state.batcher.start()
        if state.token is None:
            print(f"crossfhe serve: OPEN - no token is set ({TOKEN_ENV} or --token-file), so anyone who can reach "
                  "this server may upload keys and run its models", file=sys.stderr, flush=True)
        yield
        await state.batcher.stop()

    routes = [Route("/v1/health", guarded("health", health)), Route("/metrics", guarded("metrics", metrics)),
              Route("/v1/models", guarded("models", models)), Route("/v1/models/{name}", guarded("model", model)),
              Route("/v1/models/{name}/keys", guarded("keys", keys), methods=["POST", "PUT"]),
              Route("/v1/models/{name}/run", guarded("run", run), methods=["POST"])]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.crossfhe = state
    return app


def app_from_env():
    """The application of the configuration in ``$CROSSFHE_SERVE_CONFIG`` (uvicorn's factory for ``--workers``
    processes, each of which calls it) and the token in ``$CROSSFHE_SERVE_TOKEN``."""
    text = os.environ.get(CONFIG_ENV)
    if not text:
        raise CrossFHEError(f"${CONFIG_ENV} is not set: start the server with `crossfhe serve`")
    return create_app(Config.from_json(text), os.environ.get(TOKEN_ENV) or None)


def serve(config: Config, *, host: str = "127.0.0.1", port: int = 8000, workers: int = 1,
          token: str | None = None, log_level: str = "info") -> None:
    """Run the server in this process (uvicorn) until interrupted; ``workers`` > 1: that many processes."""
    import uvicorn

    for path in config.models:  # refuse a bad file here, before any worker starts
        open_model(path)
    os.environ[CONFIG_ENV] = config.to_json()
    if token is not None:
        os.environ[TOKEN_ENV] = token
    uvicorn.run("crossfhe.serve.app:app_from_env", factory=True, host=host, port=port, workers=workers,
                log_level=log_level, timeout_graceful_shutdown=30)


class Server:
    """A server on a background thread of this process (notebooks, tests, the tutorial)::

        with Server(["model.cfhe"], store="keys") as server:
            client = crossfhe.client.Client(server.url)

    ``port`` 0 takes a free port; ``url`` is where it listens once started."""

    def __init__(self, models, *, store, host: str = "127.0.0.1", port: int = 0, token: str | None = None,
                 **options):
        import uvicorn

        self.config = Config(models=[os.fspath(m) for m in models], store=os.fspath(store), **options)
        self.app = create_app(self.config, token)
        self._server = uvicorn.Server(uvicorn.Config(self.app, host=host, port=port, log_level="warning",
                                                     lifespan="on"))
        self._thread = threading.Thread(target=self._server.run, name="crossfhe-serve", daemon=True)
        self.host = host
        self.url = None

    def start(self) -> Server:
        self._thread.start()
        deadline = time.monotonic() + 60
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise CrossFHEError("the server did not start (see the log above)")
            time.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://{self.host}:{port}"
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


__all__ = ["CONFIG_ENV", "TOKEN_ENV", "Config", "Server", "app_from_env", "create_app", "serve"]
