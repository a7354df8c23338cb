"""What a call runs, read from a JAX profiler trace: executables dispatched, device kernels with their time, and
host-device copies. The same reading on a CPU and a GPU (on a CPU there are no device kernels or copies to list).
Used by the tests (an eager operation dispatches one executable) and by ``benchmarks/bench_profile.py``.

The trace is the profiler's Perfetto JSON (``jax.profiler.trace(..., create_perfetto_trace=True)``). An executable
run shows as one host event named ``...Executable::ExecuteHelper...`` (PjRt's name for the run of one compiled
program on one device); device work as complete events on the device's processes (names holding ``GPU``, ``TPU``
or ``/device:``; on a GPU only the stream lines, not the derived ``XLA Ops`` ones); copies as device events whose
name holds ``memcpy`` (``MemcpyH2D``, ``MemcpyD2H``, ``MemcpyD2D``).
"""

from __future__ import annotations

import collections
import contextlib
import gzip
import json
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import jax

_EXECUTE = re.compile(r"Executable::ExecuteHelper(OnSingleDevice)?$|Executable::Execute$")
_DEVICE = re.compile(r"GPU|TPU|/device:", re.IGNORECASE)
_COPY = re.compile(r"memcpy", re.IGNORECASE)


@dataclass
class Profile:
    """Per-call counts and times (the totals over ``calls`` calls divided by ``calls``).

    ``executions``: compiled programs run; ``kernels``: device kernels launched (copies excluded);
    ``kernel_us``: their summed device time, microseconds; ``copies``: device copy events by name (``MemcpyH2D``
    and the like); ``top``: (name, count per call, us per call) of the kernels with the most device time;
    ``event_names``: every event name seen with its count (for reading a new backend's trace)."""

    calls: int
    executions: float
    kernels: float
    kernel_us: float
    copies: dict = field(default_factory=dict)
    top: list = field(default_factory=list)
    event_names: dict = field(default_factory=dict)

    @property
    def host_device_copies(self) -> float:
        """Copies between host and device per call (H2D and D2H; device-to-device ones are not counted)."""
        return sum(v for k, v in self.copies.items() if re.search(r"h2d|d2h|htod|dtoh", k, re.IGNORECASE))


def profile(fn, *, calls: int = 3, top: int = 8, keep: str | Path | None = None) -> Profile:
    """Run ``fn()`` ``calls`` times under the profiler (blocking on each result) and count what ran. ``fn`` should
    have run once before, so that compilation and plan building stay out of the counts. ``keep``: a folder to leave
    the trace in (default: a temporary one, removed)."""
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(keep) if keep is not None else Path(tmp)
        with jax.profiler.trace(str(where), create_perfetto_trace=True):
            for _ in range(calls):
                jax.block_until_ready(fn())
        files = sorted(where.glob("plugins/profile/*/perfetto_trace.json.gz"), key=lambda p: p.stat().st_mtime)
        if not files:
            raise RuntimeError(f"the profiler wrote no Perfetto trace under {where}")
        with gzip.open(files[-1], "rt") as f:
            data = json.load(f)
    return summarize(data, calls=calls, top=top)


def summarize(data, *, calls: int = 1, top: int = 8) -> Profile:
    """:class:`Profile` of a loaded Perfetto trace (a dict with ``traceEvents`` or the list of events)."""
    events = data["traceEvents"] if isinstance(data, dict) else data
    names = {e["pid"]: str(e.get("args", {}).get("name", "")) for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    device = {pid for pid, name in names.items() if _DEVICE.search(name)}
    threads = {(e["pid"], e.get("tid")): str(e.get("args", {}).get("name", "")) for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name" and e["pid"] in device}
    # A GPU trace also has derived lines (``XLA Modules``, ``XLA Ops``) repeating the streams' kernels.
    streams = {k for k, name in threads.items() if name.lower().startswith("stream")}
    seen = collections.Counter()
    executions = collections.Counter()
    kernels = collections.Counter()
    kernel_us = collections.Counter()
    copies = collections.Counter()
    for e in events:
        if e.get("ph") != "X":
            continue
        name = str(e.get("name", ""))
        seen[name] += 1
        if e.get("pid") in device:
            if streams and (e["pid"], e.get("tid")) not in streams:
                continue
            if _COPY.search(name):
                copies[name] += 1
            else:
                kernels[name] += 1
                kernel_us[name] += float(e.get("dur", 0.0))
        elif _EXECUTE.search(name):
            executions[name] += 1
    ranked = sorted(kernel_us, key=kernel_us.get, reverse=True)[:top]
    return Profile(
        calls=calls,
        executions=max(executions.values(), default=0) / calls,
        kernels=sum(kernels.values()) / calls,
        kernel_us=sum(kernel_us.values()) / calls,
        copies={k: v / calls for k, v in copies.items()},
        top=[(k, kernels[k] / calls, kernel_us[k] / calls) for k in ranked],
        event_names=dict(seen.most_common(60)),
    )


@dataclass
class Programs:
    """The names of the library's compiled programs called at top level (dispatches: a program called inside
    another's trace is part of that program, not a dispatch), in call order (:func:`programs`)."""

    calls: list = field(default_factory=list)


@contextlib.contextmanager
def programs():
    """Count, inside the block, the library's compiled programs (:func:`crossfhe.math.xla.jit`,
    :class:`crossfhe.math.xla.Program`) a call dispatches: yields a :class:`Programs` whose ``calls`` receives each
    program's name. Cheaper than :func:`profile` (no profiler) and blind to JAX's own jitted helpers."""
    from crossfhe.math import xla

    seen = Programs()
    originals = {cls: cls.__call__ for cls in (xla._Jit, xla.Executable)}

    def counted(original):
        def call(obj, *args, **kwargs):
            if xla._top_level is None or xla._top_level():
                seen.calls.append(obj.__name__)
            return original(obj, *args, **kwargs)

        return call

    for cls, original in originals.items():
        cls.__call__ = counted(original)
    try:
        yield seen
    finally:
        for cls, original in originals.items():
            cls.__call__ = original


__all__ = ["Profile", "Programs", "profile", "programs", "summarize"]
