"""The TFHE grouped blind rotation through the FFT as a native CPU kernel: an XLA FFI custom call.

The XLA kernel (:class:`crossfhe.core.blind_rotation.FFTProduct`) is the reference and runs everywhere (CPU,
GPU, TPU). ``tfhe_fft.c`` (next to this module) is the same computation step for step in vector loops, with the
FFT's short stages on register tiles where AVX-512 is present; ``tfhe_fft_ffi.cc`` wraps it as an XLA FFI handler,
so it is one operation of a compiled program and runs under ``jax.jit``, ``vmap`` and ``lax.scan``. It is the
blind rotation of the ``NATIVE`` kernel set (:mod:`crossfhe.kernels.sets`) for grouped parameters; the TFHE
server key lays its Fourier key out for it once (:func:`crossfhe.core.fourier.native_key`) and carries its
tables (:class:`crossfhe.core.fourier.NativeTables`).

Building and loading: :mod:`crossfhe.math.native` (compiled with ``$CC`` / ``$CXX`` and :data:`FLAGS` on the
first :func:`library` call, cached under a hashed name in ``$CROSSFHE_NATIVE_CACHE``). The custom calls are
registered under names that carry the build's hash (:func:`targets`), so a rebuild with other flags in the same
process (tests) registers its own and a key laid out for one build's slot order keeps calling that build.
Without a compiler :func:`library` returns None and :func:`status` says why.
"""

from __future__ import annotations

import contextlib
import ctypes
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.math import native

SOURCES = (Path(__file__).with_name("tfhe_fft.c"), Path(__file__).with_name("tfhe_fft_ffi.cc"))
HEADERS = (Path(__file__).parent.parent / "math" / "ffi_parallel.h",)
FLAGS = native.FLAGS
ABI_VERSION = 4
BLOCK = 8
"""Slots per block of the key layout (``VB`` in ``tfhe_fft.c``)."""

_ROTATE, _FFT = "crossfhe_tfhe_rotate", "crossfhe_tfhe_fft"


def _suffix(lib: ctypes.CDLL) -> str:
    """The build's hash, from the library's file name (``tfhe_fft-<hash>.so``)."""
    return Path(lib._name).stem.rsplit("-", 1)[-1]


def _load() -> tuple[ctypes.CDLL | None, str]:
    lib, why = native.build_and_load(SOURCES, "cf_abi_version", ABI_VERSION, hashed=HEADERS, flags=FLAGS)
    if lib is not None:
        tag = _suffix(lib)
        native.register(lib, {f"{_ROTATE}_{tag}": "cf_tfhe_rotate_ffi", f"{_FFT}_{tag}": "cf_tfhe_fft_ffi"})
    return lib, why


NATIVE = native.Native(_load)
"""The kernel (built on first use, :mod:`crossfhe.math.native`)."""


def library() -> ctypes.CDLL | None:
    """The compiled kernel (built and cached on first use), or None when it cannot be had (:func:`status`)."""
    return NATIVE.library()


def available() -> bool:
    return NATIVE.available()


def status() -> str:
    """Why :func:`library` returned what it did: where the kernel was built, or why there is none."""
    return NATIVE.status()


def reset() -> None:
    """Forget the loaded libraries, this one and every other native kernel's (tests: the next :func:`library` call
    looks again, with the environment of then)."""
    native.reset_all()


def targets() -> tuple[str, str]:
    """The custom-call names (blind rotation, FFT) of the loaded build; RuntimeError when there is none."""
    tag = _suffix(NATIVE.require("the TFHE native blind rotation"))
    return f"{_ROTATE}_{tag}", f"{_FFT}_{tag}"


# --------------------------------------------------------------------------------------------------
# Tables (host, NumPy)
# --------------------------------------------------------------------------------------------------


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
    angle reduced exactly first): np.cos of a float64 angle is off by about an ulp, which raises the transform's
    rounding error; 0 and +-1 come out exact."""
    cos, sin = np.zeros(h), np.zeros(h)
    pi = np.longdouble("3.14159265358979323846264338327950288")
    m = 1
    while m < h:
        ang = -pi * np.arange(m).astype(np.longdouble) / m
        cos[m : 2 * m], sin[m : 2 * m] = np.cos(ang).astype(np.float64), np.sin(ang).astype(np.float64)
        m *= 2
    return cos, sin


# --------------------------------------------------------------------------------------------------
# The custom calls
# --------------------------------------------------------------------------------------------------


def _on_cpu():
    """Eager evaluation on the CPU with 64-bit types (the FFT custom call is registered for the CPU only)."""
    stack = contextlib.ExitStack()
    stack.enter_context(jax.ensure_compile_time_eval())
    stack.enter_context(jax.default_device(jax.devices("cpu")[0]))
    stack.enter_context(jax.enable_x64(True))
    return stack


def _transform(x: np.ndarray, inverse: bool) -> np.ndarray:
    x = np.asarray(x, dtype=np.complex128)
    h = x.shape[-1]
    _, fft = targets()
    with _on_cpu():
        out = jax.ShapeDtypeStruct(x.shape, jnp.float64)
        re, im = jax.ffi.ffi_call(fft, (out, out))(np.ascontiguousarray(x.real), np.ascontiguousarray(x.imag),
                                                   fft_twiddles(h), inverse=np.int32(inverse))
        return np.asarray(re) + 1j * np.asarray(im)


def fft_forward(x: np.ndarray) -> np.ndarray:
    """complex ``[..., h]`` -> its DFT (numpy's sign convention) in the kernel's slot order (:func:`slot_order`),
    by the kernel's own FFT (a custom call, run on the CPU)."""
    return _transform(x, inverse=False)


def fft_inverse(y: np.ndarray) -> np.ndarray:
    """The inverse of :func:`fft_forward` times h: slot order in, natural order out."""
    return _transform(y, inverse=True)


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


def blind_rotate(acc, src, power, key, tw, twist, roots, zeta, slot_k, *, target: str, levels: int, base_log: int,
                 scale: float, q: int, inv_q: float):
    """The grouped blind rotation by the kernel, one custom call (traceable; 64-bit types: under
    ``jax.enable_x64``): acc uint64 ``[B, 2^nu, k+1, N]`` in [0, q), src and power int32 ``[B, G, 2^nu, T]``
    (:func:`crossfhe.core.ggsw.component_move` of each step's exponents), key float64 ``[G, N/2 / BLOCK, T,
    (k+1) l, k+1, 2, BLOCK]`` and the tables (:class:`crossfhe.core.fourier.NativeTables`). ``target``: the rotation
    custom call of the build the key was laid out for (:func:`targets`). Returns the rotated accumulator, uint64
    of acc's shape. Under ``vmap`` the batch axes of acc and src / power broadcast against each other (the key and
    the tables must not be batched). A src entry outside [0, 2^nu) is refused (an XLA error)."""
    call = jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(acc.shape, jnp.uint64), vmap_method="expand_dims")
    return call(acc, src, power, key, tw, twist, roots, zeta, slot_k, levels=np.int64(levels),
                base_log=np.int64(base_log), scale=np.float64(scale), q=np.int64(q), inv_q=np.float64(inv_q))
