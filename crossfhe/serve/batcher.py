"""Requests of one model and one key set, arriving within a window, run as one launch.

Each (model, key id) pair has a queue; the queues take turns (round robin), so a key set with many requests waiting
does not hold back another's. The scheduler sleeps until a request arrives, waits ``window_s`` for others to join
it, then empties the queues in turn, at most ``max_items`` items per launch (a request larger than that runs alone).
While a launch runs, new requests queue; they have waited that long already, so the next launch starts at once.

Launches run one at a time on one worker thread (the circuit's program uses the machine's cores itself); the event
loop stays free for uploads, health checks and metrics. A launch that raises is retried request by request, so a
request that fails fails alone.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from crossfhe.serve.models import Hosted, Request, run_batch


class ShuttingDown(Exception):
    """A request still queued when the server stops (answered 503: clients retry)."""


@dataclass
class _Pending:
    hosted: Hosted
    public: object
    request: Request
    future: asyncio.Future
    arrived: float = field(default_factory=time.perf_counter)


class Batcher:
    """The scheduler of one server process (module docstring); ``metrics``: a
    :class:`crossfhe.serve.metrics.Metrics`."""

    def __init__(self, metrics, *, window_s: float = 0.005, max_items: int = 64):
        self.metrics = metrics
        self.window_s = float(window_s)
        self.max_items = int(max_items)
        self._queues: dict[tuple, deque] = {}
        self._order: deque = deque()
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="crossfhe-launch")
        self._keys = ThreadPoolExecutor(max_workers=1, thread_name_prefix="crossfhe-keys")

    def start(self) -> None:
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        for q in self._queues.values():
            for p in q:
                if not p.future.done():
                    p.future.set_exception(ShuttingDown("the server is shutting down; retry"))
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._keys.shutdown(wait=False, cancel_futures=True)

    @property
    def depth(self) -> int:
        """Requests waiting (not yet in a launch)."""
        return sum(len(q) for q in self._queues.values())

    async def submit(self, hosted: Hosted, public, request: Request) -> list[bytes]:
        """The outputs of ``request`` (serialized values), once its launch has run."""
        future = asyncio.get_running_loop().create_future()
        group = (hosted.name, request.key_id)
        if group not in self._queues:
            self._queues[group] = deque()
            self._order.append(group)
        self._queues[group].append(_Pending(hosted, public, request, future))
        self.metrics.queue_depth = self.depth
        self._wake.set()
        return await future

    async def run_in_pool(self, fn, *args):
        """``fn(*args)`` on the launch thread."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def run_keys(self, fn, *args):
        """``fn(*args)`` on the key thread: parsing uploads and loading keys from disk, one at a time (each holds a
        blob and its arrays), beside the launches rather than between them."""
        return await asyncio.get_running_loop().run_in_executor(self._keys, fn, *args)

    async def _loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self.window_s > 0:
                await asyncio.sleep(self.window_s)
            while self._order:
                group = self._order.popleft()
                queue = self._queues[group]
                taken, items = [queue.popleft()], 0
                items = taken[0].request.items
                while queue and items + queue[0].request.items <= self.max_items:
                    items += queue[0].request.items
                    taken.append(queue.popleft())
                if queue:
                    self._order.append(group)
                else:
                    del self._queues[group]
                self.metrics.queue_depth = self.depth
                await self._launch(taken)

    async def _launch(self, taken: list[_Pending]) -> None:
        first = taken[0]
        t0 = time.perf_counter()
        try:
            outs = await self.run_in_pool(run_batch, first.hosted, first.public, [p.request for p in taken])
        except Exception as e:  # noqa: BLE001 - retried one by one below, so that a failing request fails alone
            if len(taken) == 1:
                _settle(first.future, error=e)
                self.metrics.launched(1, first.request.items, time.perf_counter() - t0)
                return
            for p in taken:
                await self._launch([p])
            return
        self.metrics.launched(len(taken), sum(p.request.items for p in taken), time.perf_counter() - t0)
        for p, out in zip(taken, outs, strict=True):
            _settle(p.future, result=out)


def _settle(future: asyncio.Future, *, result=None, error=None) -> None:
    if future.done():  # the client went away
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


__all__ = ["Batcher", "ShuttingDown"]
