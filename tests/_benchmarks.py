"""A script of benchmarks/ imported by path, for the tests that check its NumPy half (the benchmarks are not a
package): ``load("bench_taurus")``."""

import importlib.util
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def load(name: str):
    """benchmarks/{name}.py executed as the module ``name`` (registered in sys.modules, as its dataclasses need)."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
