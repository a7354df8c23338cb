"""Helpers shared by the benchmark scripts in ``benchmarks/``."""

from __future__ import annotations

import os
import time


def pin_threads(threads: int) -> None:
    """Restrict this process (and any peer it starts or loads) to ``threads`` CPUs. Call it before the
    first JAX computation: JAX creates its CPU client then and sizes its thread pool, and so its loop
    partitioning, by the CPUs the process may use (an XLA flag alone does not stop small loops being
    split over both cores)."""
    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, set(cpus[-threads:]))


def timeit(fn, *, reps: int, min_seconds: float, max_seconds: float) -> list[float]:
    """Times of calls to fn (blocked on): at least ``reps`` calls and ``min_seconds``, or at least 3 calls
    once ``max_seconds`` have passed."""
    import jax

    times: list[float] = []
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
        elapsed = time.perf_counter() - start
        if (len(times) >= reps and elapsed >= min_seconds) or (len(times) >= 3 and elapsed >= max_seconds):
            return times


def first_call(fn) -> tuple[object, float]:
    """(fn(), seconds) for one blocked call: the compile (or cache load) and the run."""
    import jax

    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    return out, time.perf_counter() - t0


def cpu_name() -> str:
    """The CPU's model name as ``lscpu`` prints it ("?" where it cannot be read): benchmarks name the machine."""
    import subprocess

    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return "?"
    return next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name")), "?")


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (empty where the platform has none)."""
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else []


def enable_compilation_cache() -> None:
    """JAX's persistent compilation cache (:func:`crossfhe.runtime.enable_compilation_cache`: $CROSSFHE_JAX_CACHE,
    default ~/.cache/crossfhe/xla)."""
    from crossfhe.runtime import enable_compilation_cache as enable

    enable()


def fmt(x, width: int, spec: str = ".1f") -> str:
    """A table cell: ``x`` right-aligned with ``spec``, or '-' for None."""
    return f"{'-':>{width}}" if x is None else f"{x:>{width}{spec}}"


def write_json(records: list, path) -> None:
    """Write the records as JSON to ``path`` (parents created) and say where."""
    import json
    from pathlib import Path

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(records, indent=1, default=float))
    print(f"JSON: {out}")
