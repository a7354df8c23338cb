"""Native CPU kernels: C sources of the package built on first use with the system C compiler, loaded with ctypes.

XLA (:mod:`crossfhe.math.xla`) runs every kernel everywhere; a few CPU hot spots also have a C twin that computes
the same function faster where XLA:CPU's code is weak (the TFHE FFT blind rotation, :mod:`crossfhe.kernels.cpu_native`;
the RNS NTT of concrete arrays, :mod:`crossfhe.ring.ntt`). A twin is an optimisation only: without a compiler, or
with ``CROSSFHE_NATIVE=0``, :meth:`Native.library` returns None, :meth:`Native.status` says why, and callers take
the XLA kernel.

Building: a source is compiled with ``$CC`` (default ``cc``) and :data:`FLAGS` into ``$CROSSFHE_NATIVE_CACHE``
(default ``~/.cache/crossfhe/native``), under a name that hashes the source, the flags, the compiler's version and
this CPU's model and flags (so a cache shared between machines never hands one a binary built for another's
instructions). The compiler writes a temporary file that is renamed into place, so a concurrent or interrupted build
leaves nothing half-written. A library is loaded once per process (a forked child loads its own).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

FLAGS = ("-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-fPIC", "-shared")
"""-fno-math-errno and -fno-trapping-math let GCC vectorize floor() and the float/integer conversions; neither
changes a result (no kernel reads errno or traps). Never -ffast-math: the kernels' rounding steps are exact."""


def compiler() -> str:
    return os.environ.get("CC", "cc")


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "crossfhe" / "native"
    return Path(os.environ.get("CROSSFHE_NATIVE_CACHE", str(default)))


def cpu_fingerprint() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    keep = [line for line in text.splitlines() if line.startswith(("model name", "flags"))]
    return "\n".join(sorted(set(keep)))


def _build(source: Path, flags: tuple[str, ...], target: Path, cc: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        proc = subprocess.run([cc, *flags, "-o", tmp, str(source), "-lm"], capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise OSError(f"{cc} failed ({proc.returncode}): {proc.stderr.strip()[:500]}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def build_and_load(source: Path, flags: tuple[str, ...], abi_symbol: str, abi: int) -> tuple[ctypes.CDLL | None, str]:
    """Build ``source`` (cached, module docstring) and load it; the library's ``int abi_symbol(void)`` must return
    ``abi``. Returns (library, where it was built) or (None, why not)."""
    if os.environ.get("CROSSFHE_NATIVE", "1") == "0":
        return None, "disabled by CROSSFHE_NATIVE=0"
    cc = compiler()
    try:
        version = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"no C compiler ({cc}: {e})"
    digest = hashlib.sha256()
    for part in (source.read_bytes(), " ".join(flags).encode(), version.encode(), cpu_fingerprint().encode()):
        digest.update(part)
    target = cache_dir() / f"{source.stem}-{digest.hexdigest()[:20]}.so"
    try:
        if not target.exists():
            _build(source, flags, target, cc)
        lib = ctypes.CDLL(str(target))
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"build failed: {e}"
    got = getattr(lib, abi_symbol)()
    if got != abi:
        return None, f"{target} has ABI {got}, expected {abi}"
    return lib, f"built with {cc} at {target}"


class Native:
    """One native library, loaded on the first :meth:`library` call of a process by ``load()`` (which returns the
    library or None, and a status line); :meth:`reset` forgets it (the next call loads again, with the environment
    of then)."""

    _all: list[Native] = []

    def __init__(self, load: Callable[[], tuple[ctypes.CDLL | None, str]]):
        self._load = load
        self._lock = threading.Lock()
        self._state: dict = {}
        Native._all.append(self)

    def library(self) -> ctypes.CDLL | None:
        pid = os.getpid()
        with self._lock:
            if self._state.get("pid") != pid:
                self._state.update(pid=pid, result=self._load())
            return self._state["result"][0]

    def available(self) -> bool:
        return self.library() is not None

    def status(self) -> str:
        """Where the library was built, or why there is none."""
        self.library()
        return self._state["result"][1]

    def reset(self) -> None:
        with self._lock:
            self._state.clear()


def reset_all() -> None:
    """Forget every loaded native library (tests that change the build's environment)."""
    for lib in Native._all:
        lib.reset()
