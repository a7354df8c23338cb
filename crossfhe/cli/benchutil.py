"""Helpers shared by the benchmark scripts in ``benchmarks/``."""

from __future__ import annotations

import os


def pin_threads(threads: int) -> None:
    """Restrict this process (and any peer it starts or loads) to ``threads`` CPUs. Call it before the
    first JAX computation: JAX creates its CPU client then and sizes its thread pool, and so its loop
    partitioning, by the CPUs the process may use (an XLA flag alone does not stop small loops being
    split over both cores)."""
    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, set(cpus[-threads:]))
