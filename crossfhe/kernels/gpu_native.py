"""The GPU set's CUDA kernels (``gpu_ntt.cu``), XLA FFI custom calls on the GPU: the RNS NTT, and the TFHE blind
rotation in one kernel.

``gpu_ntt.cu`` computes :func:`crossfhe.ring.ntt.ntt` and :func:`~crossfhe.ring.ntt.intt` (the same words: every
output in [0, q)) in one or two passes over memory per transform, where XLA's radix-2 kernel takes about one pass
per two stages (its docstring gives the schedule). It is one operation of a compiled program, so it runs under
``jax.jit``, ``vmap`` and ``lax.scan``; the :data:`crossfhe.kernels.GPU` kernel set hands its transforms here and runs
everything else as ``VECTOR`` does, except TFHE's grouped blind rotation: its keys are prepared for
:class:`crossfhe.core.blind_rotation.GPUProduct`, whose every step after the first is one call of :func:`blind_rotate`
(one block, or a cluster of blocks, per accumulator; the NTT product's words).

Building: ``nvcc`` (``$NVCC``, else the one on ``PATH``, else ``/usr/local/cuda/bin/nvcc``) compiles the source for
``sm_$CROSSFHE_CUDA_ARCH`` (default 90: the H100 and H200; PTX for the same architecture is embedded too) into one
shared library in ``$CROSSFHE_NATIVE_CACHE``, under a name that hashes the source, the flags, nvcc's version and
jaxlib's version, written to a temporary file that is renamed into place. The handlers are registered for the CUDA
platform as :data:`TARGET` and :data:`ROTATE_TARGET`. Without nvcc, or without a CUDA device, :func:`available` is
False and :func:`status` says why. The kernels read a GPU-set plan's twiddles, which are in the textbook order
(:data:`crossfhe.ring.ntt.NATURAL_FROM`).

On a CPU, :func:`emulate` and :func:`emulate_blind_rotate` run the same kernels and schedule with one thread per
block (built with the host's C++ compiler and ``gpu_emulate.h``; a cluster's blocks phase by phase): the tests' check
that the CUDA source computes the transform and the rotation exactly.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.math import native

SOURCE = Path(__file__).with_name("gpu_ntt.cu")
EMULATE_HEADER = Path(__file__).with_name("gpu_emulate.h")
ABI_VERSION = 3
TARGET = "crossfhe_gpu_ntt"
ROTATE_TARGET = "crossfhe_gpu_blind_rotate"
ROTATE_THREADS = (512, 1024, 256, 128)
"""Threads a block of the blind rotation may have (the first is the default: built for at most 512, 128 registers a
thread, where the 1024-thread build spills at its 64)."""
ROTATE_CLUSTERS = (1, 2, 4, 8)
"""Blocks per accumulator of the blind rotation (1, the default: one block does a whole rotation; more: a thread-block
cluster sharing each step's lines, one-component accumulators only)."""
MAX_SHARED = 231424
"""Dynamic shared memory the rotation may take, bytes (sm_90: 227 KB a block, less 1 KB for its static arrays): it keeps
a step's digits and sums there."""
VARIANTS = 6
"""Launch variants of the kernel (``gpu_ntt.cu``: 3 or 4 stages per group in registers, 256, 128 or 512 threads a
block), all computing the same words; :func:`transform` runs variant 0 unless told (the benchmark times them all)."""
U32 = jnp.uint32


def nvcc() -> str | None:
    """The CUDA compiler to build with, or None."""
    if os.environ.get("NVCC"):
        return os.environ["NVCC"]
    found = shutil.which("nvcc")
    if found:
        return found
    default = Path("/usr/local/cuda/bin/nvcc")
    return str(default) if default.exists() else None


def flags() -> tuple[str, ...]:
    arch = os.environ.get("CROSSFHE_CUDA_ARCH", "90")
    return ("-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC",
            f"-gencode=arch=compute_{arch},code=sm_{arch}", f"-gencode=arch=compute_{arch},code=compute_{arch}")


def _hashed_target(stem: str, parts: list[bytes]) -> Path:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part)
    return native.cache_dir() / f"{stem}-{digest.hexdigest()[:20]}.so"


def _compile(cmd_prefix: list[str], target: Path) -> None:
    """Run ``cmd_prefix + ['-o', tmp]`` and rename tmp to ``target`` (nothing half-written is left)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        out = os.path.join(tmp, "lib.so")
        native.run_compiler([*cmd_prefix, "-o", out])
        os.replace(out, target)


def _cuda_device() -> str | None:
    """Why there is no CUDA device for the kernel, or None when there is one."""
    try:
        jax.devices("cuda")
    except RuntimeError as e:
        return f"no CUDA device ({str(e).splitlines()[0][:200]})"
    return None


def _load() -> tuple[ctypes.CDLL | None, str]:
    missing = _cuda_device()
    if missing:
        return None, missing
    compiler = nvcc()
    if compiler is None:
        return None, "no CUDA compiler (set NVCC, or put nvcc on PATH)"
    try:
        version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"{compiler} does not run: {e}"
    import jaxlib

    target = _hashed_target("gpu_ntt", [SOURCE.read_bytes(), " ".join(flags()).encode(), version.encode(),
                                        jaxlib.__version__.encode()])
    try:
        if not target.exists():
            _compile([compiler, *flags(), "-isystem", jax.ffi.include_dir(), str(SOURCE)], target)
        lib = ctypes.CDLL(str(target))
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"build failed: {e}"
    if lib.cf_gpu_abi_version() != ABI_VERSION:
        return None, f"{target} has ABI {lib.cf_gpu_abi_version()}, expected {ABI_VERSION}"
    jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(lib.cf_gpu_ntt_ffi), platform="CUDA")
    jax.ffi.register_ffi_target(ROTATE_TARGET, jax.ffi.pycapsule(lib.cf_gpu_blind_rotate_ffi), platform="CUDA")
    return lib, f"built with {compiler} at {target}"


GPU = native.Native(_load, needs="the CUDA kernels (crossfhe/kernels/gpu_ntt.cu)", instead="crossfhe.kernels.VECTOR")
"""The CUDA library (built and registered on first use)."""


def available() -> bool:
    return GPU.available()


def status() -> str:
    """Where the CUDA kernels were built, or why there are none."""
    return GPU.status()


def targets() -> tuple[str, ...]:
    """The custom-call targets a program on the GPU set may hold (what ``jax.export`` is told to accept)."""
    return (TARGET, ROTATE_TARGET)


def build_id() -> str:
    """An identifier of the kernels a GPU-set program calls (their ABI: the target's operands and attributes). Also
    loads and registers the library where it can be had, so that a program loaded from a file, which never traces
    :func:`transform`, finds its handler."""
    GPU.library()
    return f"gpu-abi{ABI_VERSION}"


def check_natural(plan) -> None:
    """ValueError unless ``plan`` is a GPU-set plan, whose twiddles the kernels read in the textbook order."""
    if plan.kernels is None or not plan.kernels.natural_twiddles:
        raise ValueError(f"the GPU NTT reads a GPU-set plan's twiddles (textbook order); got a plan on "
                         f"{plan.kernels!r}")


def transform(x, plan, *, inverse: bool, full: bool = True, variant: int = 0):
    """The NTT (``inverse=False``) or its inverse of x ``uint32[..., limbs, N]`` on ``plan``, one custom call on the
    GPU (:func:`crossfhe.ring.ntt.ntt` / :func:`~crossfhe.ring.ntt.intt`'s words; ``full`` is accepted: the outputs
    are always in [0, q)). Rings below N = 64 take the radix-2 kernels. ``variant``: the launch (:data:`VARIANTS`).
    RuntimeError when the kernel is missing."""
    from crossfhe.ring import ntt as ring_ntt

    GPU.require("the GPU kernel set's NTT")
    plan = plan.expanded()
    if plan.n < ring_ntt.NATURAL_FROM:
        return ring_ntt.radix2_transform(x, plan, inverse=inverse, full=full)
    check_natural(plan)
    w, ws = (plan.wi, plan.wi_shoup) if inverse else (plan.w, plan.w_shoup)
    shape = jax.ShapeDtypeStruct(x.shape, U32)
    call = jax.ffi.ffi_call(TARGET, (shape, shape), vmap_method="expand_dims")
    if not 0 <= variant < VARIANTS:
        raise ValueError(f"variant must be in [0, {VARIANTS}), got {variant}")
    out, _ = call(x, jnp.asarray(plan.q), w, ws, plan.inv_last, plan.inv_last_shoup, inverse=np.int32(inverse),
                  full=np.int32(full), variant=np.int32(variant))
    return out


def rotation_shared(n: int, limbs: int, k1: int, comps: int, levels: int, cluster: int = 1) -> int:
    """Bytes of shared memory one block of the blind rotation takes: its share of the (L (k+1) l + L 2^nu (k+1)) lines
    of N + N/32 words, with ``cluster`` blocks per accumulator."""
    return limbs * (k1 * levels + comps * k1) // cluster * (n + n // 32) * 4


def rotation_fits(n: int, limbs: int, k1: int, comps: int, levels: int) -> bool:
    """Whether :func:`blind_rotate` takes accumulators of this shape (64 <= N <= 4096, at most 8 limbs and 8 gadget
    digits, a block's shared memory)."""
    return (64 <= n <= 4096 and limbs <= 8 and levels <= 8
            and rotation_shared(n, limbs, k1, comps, levels) <= MAX_SHARED)


_ROTATION_TABLES = ("q", "w", "ws", "wi", "wis", "last", "lasts", "hat_inv", "hat_invs", "words", "pw", "pws")


def cluster_fits(cluster: int, limbs: int, k1: int, comps: int, levels: int) -> bool:
    """Whether ``cluster`` blocks can share an accumulator: one component, and they divide the digit lines L (k+1) l
    and the sum lines L (k+1)."""
    return cluster == 1 or (cluster in ROTATE_CLUSTERS and comps == 1 and (limbs * k1 * levels) % cluster == 0
                            and (limbs * k1) % cluster == 0)


def _rotation_check(acc, exps, keys, tables: dict, levels: int, cluster: int = 1) -> None:
    if acc.ndim != 5 or exps.ndim != 3 or keys.ndim != 6:
        raise ValueError(f"the GPU blind rotation takes acc [B, 2^nu, k+1, L, N], exps [B, G, T] and keys "
                         f"[G, T, (k+1) l, k+1, L, N]; got {acc.shape}, {exps.shape}, {keys.shape}")
    b, comps, k1, limbs, n = acc.shape
    if exps.shape[0] != b or keys.shape[:2] != exps.shape[1:] or keys.shape[2:] != (k1 * levels, k1, limbs, n):
        raise ValueError(f"exps {exps.shape} or keys {keys.shape} do not match the accumulator {acc.shape} with "
                         f"{levels} gadget digits")
    if not rotation_fits(n, limbs, k1, comps, levels):
        raise ValueError(f"the GPU blind rotation takes N in [64, 4096] and at most {MAX_SHARED} bytes of shared "
                         f"memory; accumulators [{comps}, {k1}, {limbs}, {n}] with {levels} digits need "
                         f"{rotation_shared(n, limbs, k1, comps, levels)}")
    if not cluster_fits(cluster, limbs, k1, comps, levels):
        raise ValueError(f"a cluster of {cluster} blocks cannot share accumulators [{comps}, {k1}, {limbs}, {n}] with "
                         f"{levels} digits: it takes one component and must divide {limbs * k1 * levels} digit lines "
                         f"and {limbs * k1} sum lines ({ROTATE_CLUSTERS})")
    missing = set(_ROTATION_TABLES + ("root_exp",)) - set(tables)
    if missing:
        raise ValueError(f"the GPU blind rotation's tables lack {sorted(missing)}")
    wrong = [f"{name} is {np.dtype(x.dtype)}" for name, x, want in
             [("acc", acc, np.uint32), ("exps", exps, np.int32), ("keys", keys, np.uint32),
              ("root_exp", tables["root_exp"], np.int32)] + [(k, tables[k], np.uint32) for k in _ROTATION_TABLES]
             if np.dtype(x.dtype) != want]
    if wrong:
        raise ValueError(f"the GPU blind rotation takes uint32 words and int32 exponents: {', '.join(wrong)}")


def blind_rotate(acc, exps, keys, tables: dict, *, levels: int, base_log: int, frac_words: int,
                 threads: int = ROTATE_THREADS[0], cluster: int = 1):
    """Every step of the grouped blind rotation after the first, one custom call on the GPU (``gpu_ntt.cu``: one
    block per accumulator runs them all; :func:`crossfhe.core.ggsw.group_step`'s words). acc uint32
    ``[B, 2^nu, k+1, L, N]`` (residues, coefficient domain), exps int32 ``[B, G, T]`` in [0, 2^(nu+1) N), keys uint32
    ``[G, T, (k+1) l, k+1, L, N]`` (NTT domain, slot order). ``tables``:
    :class:`crossfhe.core.blind_rotation.GPUProduct`'s (the NTT's textbook-order twiddles, the gadget's CRT words,
    the powers of psi and the slots' root exponents). ``threads`` a block, ``cluster`` blocks an accumulator
    (:data:`ROTATE_CLUSTERS`; more than one: a thread-block cluster, one-component accumulators). The same words for
    every launch. RuntimeError when the kernel is missing."""
    GPU.require("the GPU kernel set's blind rotation")
    _rotation_check(acc, exps, keys, tables, levels, cluster)
    if threads not in ROTATE_THREADS:
        raise ValueError(f"threads must be one of {ROTATE_THREADS}, got {threads}")
    call = jax.ffi.ffi_call(ROTATE_TARGET, jax.ShapeDtypeStruct(acc.shape, U32), vmap_method="sequential")
    return call(acc, exps, keys, *[tables[k] for k in _ROTATION_TABLES], tables["root_exp"], levels=np.int32(levels),
                base_log=np.int32(base_log), frac_words=np.int32(frac_words), threads=np.int32(threads),
                cluster=np.int32(cluster))


# --------------------------------------------------------------------------------------------------
# The same kernels on the CPU (tests)
# --------------------------------------------------------------------------------------------------


def _load_emulation() -> tuple[ctypes.CDLL | None, str]:
    cxx = native.cxx_compiler()
    try:
        version = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"no C++ compiler ({cxx}: {e})"
    cmd = [cxx, "-std=c++17", "-O2", "-fPIC", "-shared", *native.WARNINGS, "-Wno-unknown-pragmas",  # CUDA's unroll
           "-DCROSSFHE_GPU_EMULATE", "-include",
           str(EMULATE_HEADER), "-x", "c++", str(SOURCE)]
    target = _hashed_target("gpu_ntt_emulated", [SOURCE.read_bytes(), EMULATE_HEADER.read_bytes(), version.encode(),
                                                 " ".join(cmd[1:]).encode()])
    try:
        if not target.exists():
            _compile(cmd, target)
        return ctypes.CDLL(str(target)), f"built with {cxx} at {target}"
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"build failed: {e}"


EMULATION = native.Native(_load_emulation, needs="the CPU emulation of the GPU kernels",
                          instead="a C++ compiler ($CXX) to build it")


def emulate(x, plan, *, inverse: bool, variant: int = 0) -> np.ndarray:
    """:func:`transform` computed by ``gpu_ntt.cu``'s kernels and launch schedule on the CPU, one thread per block
    (NumPy in and out; N >= 64; ``plan`` on the GPU set, whose twiddles are in the textbook order)."""
    lib = EMULATION.require("emulating the GPU NTT")
    plan = plan.expanded()
    check_natural(plan)
    x = np.ascontiguousarray(np.asarray(x), dtype=np.uint32)
    if x.shape[-2:] != (plan.limbs, plan.n) or plan.n < 64:
        raise ValueError(f"x of shape {x.shape} does not match the plan's [..., {plan.limbs}, {plan.n}] (N >= 64)")
    out, scratch = np.zeros_like(x), np.zeros_like(x)
    w, ws = (plan.wi, plan.wi_shoup) if inverse else (plan.w, plan.w_shoup)
    tables = [np.ascontiguousarray(np.asarray(t), dtype=np.uint32)
              for t in (plan.q, w, ws, plan.inv_last, plan.inv_last_shoup)]
    ptr = ctypes.c_void_p
    lib.cf_gpu_ntt_emulate(x.ctypes.data_as(ptr), out.ctypes.data_as(ptr), scratch.ctypes.data_as(ptr),
                           ctypes.c_int64(x.size // plan.n), ctypes.c_int(plan.log_n), ctypes.c_int(plan.limbs),
                           *[t.ctypes.data_as(ptr) for t in tables], ctypes.c_int(int(inverse)), ctypes.c_int(variant))
    return out


def emulate_blind_rotate(acc, exps, keys, tables: dict, *, levels: int, base_log: int, frac_words: int,
                         cluster: int = 1) -> np.ndarray:
    """:func:`blind_rotate` computed by ``gpu_ntt.cu``'s kernel on the CPU, one thread per block, the blocks of a
    cluster phase by phase as its barriers order them (NumPy in and out; clusters of at most 4 blocks)."""
    lib = EMULATION.require("emulating the GPU blind rotation")
    acc = np.ascontiguousarray(np.asarray(acc), dtype=np.uint32)
    exps = np.ascontiguousarray(np.asarray(exps), dtype=np.int32)
    keys = np.ascontiguousarray(np.asarray(keys), dtype=np.uint32)
    _rotation_check(acc, exps, keys, tables, levels, cluster)
    arrays = [np.ascontiguousarray(np.asarray(tables[k]), dtype=np.uint32) for k in _ROTATION_TABLES]
    root_exp = np.ascontiguousarray(np.asarray(tables["root_exp"]), dtype=np.int32)
    ptr = ctypes.c_void_p
    table_ptrs = (ptr * len(arrays))(*[a.ctypes.data for a in arrays])
    shape = np.array(list(acc.shape) + [exps.shape[1], exps.shape[2], keys.shape[2], arrays[9].shape[-1]],
                     dtype=np.int64)
    out = np.zeros_like(acc)
    rc = lib.cf_gpu_blind_rotate_emulate(acc.ctypes.data_as(ptr), out.ctypes.data_as(ptr), exps.ctypes.data_as(ptr),
                                         keys.ctypes.data_as(ptr), table_ptrs, root_exp.ctypes.data_as(ptr),
                                         shape.ctypes.data_as(ptr), ctypes.c_int(levels), ctypes.c_int(base_log),
                                         ctypes.c_int(frac_words), ctypes.c_int(cluster))
    if rc != 0:
        raise ValueError(f"the emulated blind rotation refused its arguments (code {rc})")
    return out


def abi_version_of_source() -> int:
    """The ABI the CUDA source declares, read from its CPU emulation build (tests: it must equal :data:`ABI_VERSION`,
    or the device build would be refused when it loads)."""
    return int(EMULATION.require("reading the GPU kernels' ABI").cf_gpu_abi_version())
