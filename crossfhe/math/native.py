"""Native CPU kernels: C/C++ sources of the package built on first use and registered as XLA FFI custom calls.

A native kernel computes the same function as an XLA kernel of the library, faster where XLA:CPU's code is weak
(the RNS NTT, :mod:`crossfhe.ring.ntt`; the TFHE FFT blind rotation, :mod:`crossfhe.kernels.cpu_native`). It runs
as one operation of a compiled program (``jax.ffi.ffi_call``), so it works under ``jax.jit``, ``vmap`` and
``lax.scan`` like any other; it is one of the kernel sets (``crossfhe.kernels.NATIVE``), chosen as a value.

Building: the C sources (``.c``) are compiled with ``$CC`` (default ``cc``), the C++ FFI handlers (``.cc``) with
``$CXX`` (default ``c++``, C++17, JAX's FFI headers from ``jax.ffi.include_dir()`` as system headers), both with
:data:`FLAGS` and :data:`WARNINGS`, and linked into one shared library in ``$CROSSFHE_NATIVE_CACHE`` (default
``~/.cache/crossfhe/native``) under a name that hashes the sources, the flags, the compilers' versions, jaxlib's
version and this CPU's model and flags (a cache shared between machines never hands one a binary built for
another's instructions). The linker writes a temporary file that is renamed into place, so a concurrent or
interrupted build leaves nothing half-written. Without a compiler, :meth:`Native.library` returns None,
:meth:`Native.status` says why, and the default kernel set is ``VECTOR`` (:func:`crossfhe.kernels.default_kernels`).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import subprocess
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import jax

FLAGS = ("-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-fPIC")
"""-fno-math-errno and -fno-trapping-math let GCC vectorize floor() and the float/integer conversions; neither
changes a result (no kernel reads errno or traps). Never -ffast-math: the kernels' rounding steps are exact."""

WARNINGS = ("-Wall", "-Wextra", "-Werror")
"""Every source builds clean under these (the FFI headers are included with -isystem: they warn)."""

PORTABLE_FLAGS = tuple("-march=x86-64-v2" if f == "-march=native" else f for f in FLAGS)
"""A build without AVX-512 (tests build it to check the kernels' scalar paths)."""


def compiler() -> str:
    return os.environ.get("CC", "cc")


def cxx_compiler() -> str:
    return os.environ.get("CXX", "c++")


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


def run_compiler(cmd: list[str]) -> None:
    """Run one compiler or linker command; OSError with its message where it fails."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise OSError(f"{cmd[0]} failed ({proc.returncode}): {proc.stderr.strip()[:800]}")


def build(sources: Sequence[Path], target: Path, *, flags: Sequence[str] = FLAGS, cc: str | None = None,
          cxx: str | None = None) -> None:
    """Compile ``sources`` (``.c`` with ``cc``, ``.cc`` with ``cxx``) and link them into the shared library
    ``target``; raises OSError with the compiler's message on failure, and leaves no partial file behind."""
    cc, cxx = cc or compiler(), cxx or cxx_compiler()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        objects = []
        for i, src in enumerate(sources):
            obj = os.path.join(tmp, f"{i}-{src.stem}.o")
            if src.suffix == ".cc":
                cmd = [cxx, "-std=c++17", "-isystem", jax.ffi.include_dir(), *flags, *WARNINGS, "-c", str(src)]
            else:
                cmd = [cc, "-std=gnu11", *flags, *WARNINGS, "-c", str(src)]
            run_compiler(cmd + ["-o", obj])
            objects.append(obj)
        out = os.path.join(tmp, "lib.so")
        run_compiler([cxx, "-shared", *flags, "-o", out, *objects, "-lm", "-lpthread"])
        os.replace(out, target)


def _version(cmd: str) -> str:
    return subprocess.run([cmd, "--version"], capture_output=True, text=True, timeout=30).stdout


def build_and_load(sources: Sequence[Path], abi_symbol: str, abi: int, *, hashed: Sequence[Path] = (),
                   flags: Sequence[str] = FLAGS) -> tuple[ctypes.CDLL | None, str]:
    """Build ``sources`` (cached, module docstring; ``hashed``: headers they include) and load the library; its
    ``int abi_symbol(void)`` must return ``abi``. Returns (library, where it was built) or (None, why not)."""
    cc, cxx = compiler(), cxx_compiler()
    try:
        versions = _version(cc) + _version(cxx)
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"no C/C++ compiler ({cc}, {cxx}: {e})"
    digest = hashlib.sha256()
    for path in (*sources, *hashed):
        digest.update(path.read_bytes())
    import jaxlib

    for part in (" ".join(flags), versions, jaxlib.__version__, cpu_fingerprint()):
        digest.update(part.encode())
    target = cache_dir() / f"{Path(sources[0]).stem}-{digest.hexdigest()[:20]}.so"
    try:
        if not target.exists():
            build(sources, target, flags=flags, cc=cc, cxx=cxx)
        lib = ctypes.CDLL(str(target))
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"build failed: {e}"
    got = getattr(lib, abi_symbol)()
    if got != abi:
        return None, f"{target} has ABI {got}, expected {abi}"
    return lib, f"built with {cc} / {cxx} at {target}"


_REGISTERED: dict[str, int] = {}
_REGISTER_LOCK = threading.Lock()


def register(lib: ctypes.CDLL, targets: dict[str, str]) -> None:
    """Register the FFI handlers of ``lib`` as CPU custom calls: ``targets`` maps a target name to the handler's
    symbol. A target is registered once per process (a later library under the same name is not registered
    again: XLA keeps the first handler, and the library it lives in stays loaded)."""
    with _REGISTER_LOCK:
        for name, symbol in targets.items():
            if name not in _REGISTERED:
                fn = getattr(lib, symbol)
                jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(fn), platform="cpu")
                _REGISTERED[name] = ctypes.cast(fn, ctypes.c_void_p).value or 0


class Native:
    """One native library, loaded (and its FFI targets registered) on the first :meth:`library` call of a process
    by ``load()``, which returns the library or None, and a status line; :meth:`reset` forgets it (the next call
    loads again, with the environment of then). ``needs`` and ``instead`` word :meth:`require`'s error (what is
    missing, what to use instead)."""

    _all: list[Native] = []

    def __init__(self, load: Callable[[], tuple[ctypes.CDLL | None, str]], *, needs: str = "the native CPU kernels",
                 instead: str = "the VECTOR kernel set (crossfhe.kernels.VECTOR)"):
        self._load = load
        self._needs, self._instead = needs, instead
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

    def require(self, what: str) -> ctypes.CDLL:
        """The library, or RuntimeError naming ``what`` needed it and why there is none."""
        lib = self.library()
        if lib is None:
            raise RuntimeError(f"{what} needs {self._needs}, which are not available: {self.status()}; "
                               f"use {self._instead}")
        return lib

    def reset(self) -> None:
        with self._lock:
            self._state.clear()


def reset_all() -> None:
    """Forget every loaded native library (tests that change the build's environment)."""
    for lib in Native._all:
        lib.reset()
