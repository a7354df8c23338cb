"""A server process's counters in Prometheus's text format (version 0.0.4), written without a client library.

``crossfhe_requests_total{route,status}``, ``crossfhe_request_seconds`` (a histogram of run requests' latency,
arrival to reply), ``crossfhe_batch_requests`` and ``crossfhe_batch_items`` (histograms: requests and items per
launch), ``crossfhe_launch_seconds`` (a histogram), ``crossfhe_queue_depth`` (requests waiting), and the keys held
(``crossfhe_keys{where="disk"|"memory"}``, ``crossfhe_key_bytes{...}``). Each worker process counts its own; the
``worker`` label tells them apart.
"""

from __future__ import annotations

import os
import threading
from collections import Counter

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class _Histogram:
    def __init__(self, buckets):
        self.buckets = tuple(buckets)
        self.counts = [0] * len(self.buckets)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        for i, b in enumerate(self.buckets):
            if value <= b:
                self.counts[i] += 1
        self.sum += value
        self.count += 1

    def lines(self, name: str, labels: str) -> list[str]:
        out = [f'{name}_bucket{{{labels},le="{b:g}"}} {c}' for b, c in zip(self.buckets, self.counts, strict=True)]
        out.append(f'{name}_bucket{{{labels},le="+Inf"}} {self.count}')
        out += [f"{name}_sum{{{labels}}} {self.sum:.6f}", f"{name}_count{{{labels}}} {self.count}"]
        return out


class Metrics:
    """The counters of one server process (module docstring)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.requests: Counter = Counter()
        self.latency = _Histogram(LATENCY_BUCKETS)
        self.batch_requests = _Histogram(SIZE_BUCKETS)
        self.batch_items = _Histogram(SIZE_BUCKETS)
        self.launch_seconds = _Histogram(LATENCY_BUCKETS)
        self.queue_depth = 0

    def request(self, route: str, status: int, seconds: float | None = None) -> None:
        with self._lock:
            self.requests[(route, status)] += 1
            if seconds is not None:
                self.latency.observe(seconds)

    def launched(self, requests: int, items: int, seconds: float) -> None:
        with self._lock:
            self.batch_requests.observe(requests)
            self.batch_items.observe(items)
            self.launch_seconds.observe(seconds)

    def render(self, keys: dict) -> str:
        """The text format; ``keys``: :meth:`crossfhe.serve.store.Store.stats`."""
        w = f'worker="{os.getpid()}"'
        out = ["# HELP crossfhe_requests_total HTTP requests by route and status.",
               "# TYPE crossfhe_requests_total counter"]
        with self._lock:
            for (route, status), n in sorted(self.requests.items()):
                out.append(f'crossfhe_requests_total{{{w},route="{route}",status="{status}"}} {n}')
            for name, hist, text in (
                    ("crossfhe_request_seconds", self.latency, "Run requests' latency, arrival to reply."),
                    ("crossfhe_batch_requests", self.batch_requests, "Requests per launch."),
                    ("crossfhe_batch_items", self.batch_items, "Items (samples) per launch."),
                    ("crossfhe_launch_seconds", self.launch_seconds, "Seconds per launch.")):
                out += [f"# HELP {name} {text}", f"# TYPE {name} histogram", *hist.lines(name, w)]
            out += ["# HELP crossfhe_queue_depth Run requests waiting for a launch.",
                    "# TYPE crossfhe_queue_depth gauge", f"crossfhe_queue_depth{{{w}}} {self.queue_depth}"]
        out += ["# HELP crossfhe_keys Evaluation key sets held.", "# TYPE crossfhe_keys gauge",
                f'crossfhe_keys{{{w},where="disk"}} {keys["disk_keys"]}',
                f'crossfhe_keys{{{w},where="memory"}} {keys["memory_keys"]}',
                "# HELP crossfhe_key_bytes Bytes of the evaluation keys held.", "# TYPE crossfhe_key_bytes gauge",
                f'crossfhe_key_bytes{{{w},where="disk"}} {keys["disk_bytes"]}',
                f'crossfhe_key_bytes{{{w},where="memory"}} {keys["memory_bytes"]}']
        return "\n".join(out) + "\n"


__all__ = ["Metrics"]
