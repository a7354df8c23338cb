"""Serving compiled circuits and models over HTTP: ``crossfhe serve MODEL.cfhe``.

A server holds exported circuits (:meth:`crossfhe.Circuit.export`, and :mod:`crossfhe.ml` models' files) and its
clients' evaluation keys; clients (:mod:`crossfhe.client`) hold their secret keys, and only ciphertexts and public
keys travel. Requests of one model under one key set that arrive within a window run as one launch of the compiled
program (:mod:`crossfhe.serve.batcher`); keys live on disk by key id (:mod:`crossfhe.serve.store`), shared by the
server's worker processes. The HTTP API: :mod:`crossfhe.serve.app`. Needs the ``serve`` extra (Starlette, uvicorn).
"""

from crossfhe.serve.app import Config, Server, create_app, serve

__all__ = ["Config", "Server", "create_app", "serve"]
