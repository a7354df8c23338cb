"""A native CPU kernel for the TFHE blind rotation through the FFT, built on first use with the system C compiler.

The XLA kernel (:func:`crossfhe.core.fourier.blind_rotate_grouped`) is the reference and runs everywhere (CPU,
GPU, TPU, under ``jit`` and ``vmap``). On a CPU, XLA compiles its complex products to scalar code and runs
each FFT as a library call. ``tfhe_fft.c`` (next to this module) is the same computation step for step in
vector loops, with the FFT's short stages on register tiles where AVX-512 is present; :mod:`crossfhe.tfhe.ops`
uses it for concrete inputs on a CPU when it is available (:func:`crossfhe.tfhe.ops.native_applies`).
Measured on the dev box (AMD EPYC with AVX-512, one CPU, the two kernels in one process, XLA against native):
a P4 blind rotation of 416 group steps, 44.4 against 27.9 us per step at batch 1 and 40.6 against 19.6 per
item at batch 8; a whole P4 bootstrap, 22.1 against 15.7 ms at batch 1 and 15.8 against 10.5 ms per bootstrap
at batch 8; P6 (4 accumulator components), 124.8 against 93.3 ms at batch 1 and 126.2 against 82.3 at batch 8.

Building and loading: :mod:`crossfhe.math.native` (compiled with ``$CC`` and :data:`FLAGS` on the first
:func:`library` call, cached under a hashed name in ``$CROSSFHE_NATIVE_CACHE``). Without a compiler, or with
``CROSSFHE_NATIVE=0``, :func:`library` returns None and :func:`status` says why; callers then take the XLA kernel.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from crossfhe.math import native

SOURCE = Path(__file__).with_name("tfhe_fft.c")
FLAGS = native.FLAGS
ABI_VERSION = 3
BLOCK = 8
"""Slots per block of the key layout (``VB`` in ``tfhe_fft.c``)."""


def _load() -> tuple[ctypes.CDLL | None, str]:
    lib, why = native.build_and_load(SOURCE, FLAGS, "cf_abi_version", ABI_VERSION)
    if lib is None:
        return None, why
    p, i64 = ctypes.c_void_p, ctypes.c_int64
    lib.cf_fft_forward.argtypes = [p, p, p, i64]
    lib.cf_fft_inverse.argtypes = [p, p, p, i64]
    lib.cf_blind_rotate_grouped.argtypes = [p, p, p, p, i64, i64, i64, i64, i64, i64, i64, i64, ctypes.c_double,
                                            ctypes.c_uint64, ctypes.c_double, p, p, p, p, p]
    lib.cf_blind_rotate_grouped.restype = ctypes.c_int
    return lib, why


_NATIVE = native.Native(_load)


def library() -> ctypes.CDLL | None:
    """The compiled kernel (built and cached on first use), or None when it cannot be had (:func:`status`)."""
    return _NATIVE.library()


def available() -> bool:
    return _NATIVE.available()


def status() -> str:
    """Why :func:`library` returned what it did: where the kernel was built, or why there is none."""
    return _NATIVE.status()


def reset() -> None:
    """Forget the loaded libraries, this one and every other native kernel's (tests: the next :func:`library` call
    looks again, with the environment of then)."""
    native.reset_all()


def _require() -> ctypes.CDLL:
    lib = library()
    if lib is None:
        raise RuntimeError(f"the native CPU kernel is not available: {status()}")
    return lib


def fft_twiddles(h: int) -> np.ndarray:
    """float64 ``[2, h]``: tw[m + j] = exp(-2 pi i j / (2m)) for m = 1, 2, 4, ..., h / 2 (cos, sin rows)."""
    return np.stack(_unit_roots(h))


def powers_of_unity(h: int) -> np.ndarray:
    """float64 ``[2, h]``: cos and sin of -2 pi j / h (the powers of exp(-2 pi i / h)), each rounded once from long
    double (as :func:`fft_twiddles`)."""
    pi = np.longdouble("3.14159265358979323846264338327950288")
    ang = -2 * pi * np.arange(h).astype(np.longdouble) / h
    return np.stack([np.cos(ang).astype(np.float64), np.sin(ang).astype(np.float64)])


def _unit_roots(h: int) -> tuple[np.ndarray, np.ndarray]:
    """(cos, sin) of -pi j / m at index m + j, each rounded once to float64 from long double arithmetic (the
    angle reduced exactly first): np.cos of a float64 angle is off by about an ulp, and twiddles that far off
    made the transform's error 1.7x NumPy's (rms, N/2 = 1024); 0 and +-1 come out exact."""
    cos, sin = np.zeros(h), np.zeros(h)
    pi = np.longdouble("3.14159265358979323846264338327950288")
    m = 1
    while m < h:
        ang = -pi * np.arange(m).astype(np.longdouble) / m
        cos[m : 2 * m], sin[m : 2 * m] = np.cos(ang).astype(np.float64), np.sin(ang).astype(np.float64)
        m *= 2
    return cos, sin


def _transform(x: np.ndarray, name: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.complex128)
    h = x.shape[-1]
    re, im = np.ascontiguousarray(x.real), np.ascontiguousarray(x.imag)
    tw = fft_twiddles(h)
    getattr(_require(), name)(re.ctypes.data, im.ctypes.data, tw.ctypes.data, h)
    return re + 1j * im


def fft_forward(x: np.ndarray) -> np.ndarray:
    """complex ``[h]`` -> its DFT (numpy's sign convention) in the kernel's slot order (:func:`slot_order`)."""
    return _transform(x, "cf_fft_forward")


def fft_inverse(y: np.ndarray) -> np.ndarray:
    """The inverse of :func:`fft_forward` times h: slot order in, natural order out."""
    return _transform(y, "cf_fft_inverse")


def slot_order(h: int) -> np.ndarray:
    """int ``[h]``: position p of :func:`fft_forward`'s output holds DFT index ``slot_order(h)[p]``. Read off the
    kernel (the transform of the impulse at 1 is exp(-2 pi i k / h) at index k); a permutation, checked."""
    x = np.zeros(h, dtype=np.complex128)
    x[1] = 1.0
    y = fft_forward(x)
    k = np.rint(-np.angle(y) * h / (2 * np.pi)).astype(np.int64) % h
    if not np.array_equal(np.sort(k), np.arange(h)) or np.abs(np.exp(-2j * np.pi * k / h) - y).max() > 1e-9:
        raise RuntimeError("the native FFT's output is not a permutation of the DFT")
    return k


def blind_rotate_grouped(acc: np.ndarray, src: np.ndarray, power: np.ndarray, key: np.ndarray, *, levels: int,
                         base_log: int, scale: float, q: int, inv_q: float, tw: np.ndarray, twist: np.ndarray,
                         roots: np.ndarray, zeta: np.ndarray, slot_k: np.ndarray) -> None:
    """Run the kernel on acc uint64 ``[B, 2^nu, k+1, N]`` (C-contiguous; updated in place), src and power int32
    ``[B, G, 2^nu, T]`` (:func:`crossfhe.core.ggsw.component_move` of each step's exponents), key float64
    ``[G, N/2 / BLOCK, T, (k+1) l, k+1, 2, BLOCK]`` and the tables (see ``tfhe_fft.c``)."""
    lib = _require()
    batch, comps, k1, n = acc.shape
    groups, t_count = power.shape[1], power.shape[3]
    want = (groups, n // 2 // BLOCK, t_count, k1 * levels, k1, 2, BLOCK)
    if (acc.dtype != np.uint64 or power.dtype != np.int32 or src.dtype != np.int32 or src.shape != power.shape
            or power.shape[:3] != (batch, groups, comps) or key.shape != want):
        raise ValueError(f"native blind rotation: acc {acc.dtype}{acc.shape}, src {src.dtype}{src.shape}, power "
                         f"{power.dtype}{power.shape}, key {key.shape} (want {want})")
    arrays = (acc, src, power, key, tw, twist, roots, zeta, slot_k)
    if not all(a.flags.c_contiguous for a in arrays):
        raise ValueError("native blind rotation: every array must be C-contiguous")
    if comps > 1 and (int(src.min(initial=0)) < 0 or int(src.max(initial=0)) >= comps):
        raise ValueError(f"native blind rotation: src must index the {comps} components")
    rc = lib.cf_blind_rotate_grouped(acc.ctypes.data, src.ctypes.data, power.ctypes.data, key.ctypes.data, batch,
                                     groups, comps, t_count, k1, levels, n, base_log, scale, q, inv_q, tw.ctypes.data,
                                     twist.ctypes.data, roots.ctypes.data, zeta.ctypes.data, slot_k.ctypes.data)
    if rc != 0:
        raise MemoryError(f"native blind rotation failed ({rc}): no scratch memory" if rc == -1 else f"code {rc}")
