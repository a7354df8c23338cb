"""The kernel sets behind one interface: ``VECTOR`` (XLA radix-2), ``NATIVE`` (CPU custom calls), ``GPU`` (CUDA custom
calls), ``MATRIX`` (CROSS).

A kernel set is a value chosen once, where the parameters of a scheme or a context are made
(``ckks.Params.with_kernels(MATRIX)``, ``bfv.Params.with_kernels``, ``tfhe.Params.with_kernels``, the ``kernels=``
argument of the contexts), and carried by every plan built from them: :class:`~crossfhe.ring.ntt.NTTPlan` and
:class:`~crossfhe.math.rns.BasisConversion` hold the set (static) and its tables (pytree leaves), and their kernels
hand the work to it. No algorithm inspects tracers, devices or the backend to pick a route. Every set computes the
same exact functions, so a scheme gives bit-identical ciphertexts on any of them.

* ``VECTOR``: the radix-2 NTT of :mod:`crossfhe.ring.ntt` and the basis conversion of :mod:`crossfhe.math.rns`
  as an exact float64 GEMM (:func:`crossfhe.math.modular.centered_gemm_rows`), XLA everywhere.
* ``NATIVE``: ``VECTOR`` with the NTT (and the TFHE blind rotation) replaced by the C kernels of the package,
  registered as XLA FFI custom calls on the CPU (:mod:`crossfhe.math.native`): the same words, inside the same
  compiled program. CPU only.
* ``GPU``: ``VECTOR`` with the NTT replaced by the CUDA kernel of the package (:mod:`crossfhe.kernels.gpu_native`:
  one or two passes over memory per transform, where XLA's radix-2 stages take about one pass per two stages),
  registered as an XLA FFI custom call on the CUDA platform. CUDA GPUs only; built with nvcc on first use.
* ``MATRIX``: the 4-step NTT as two BAT int8 matrix products (:mod:`crossfhe.kernels.ntt_matrix`) and the basis
  conversion's (N, l, l') modular matmul through BAT (:mod:`crossfhe.kernels.bconv_matrix`), the CROSS lowering
  for matrix engines (tensor cores, TPU MXUs).
* ``AUTO`` (the default of parameters): :func:`default_kernels`, resolved when plans are made.

The rule of :func:`default_kernels`, applied once per process: the set ``$CROSSFHE_KERNELS`` names, where it is set;
else, on a CPU backend with the native build available, ``NATIVE``; otherwise (a CPU without a C/C++ compiler, a
GPU, a TPU) ``VECTOR``. On a GPU, ``GPU`` is faster (benchmarks/README.md) but not yet the default: the whole test
suite has not run on a device with it. On an H100 a whole N 2^16 multiply+rescale measured faster on ``VECTOR`` than
on ``MATRIX`` (benchmarks/README.md); a TPU, whose float64 is slow or absent, should be given ``MATRIX`` by the
caller.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import jax
import numpy as np

from crossfhe.kernels import bconv_matrix, gpu_native, ntt_matrix
from crossfhe.ring import ntt as ring_ntt

_NAMES = ("vector", "native", "gpu", "matrix", "auto")


@dataclass(frozen=True)
class KernelSet:
    """A named kernel set (hashable: it keys the plan caches and is a static jit argument)."""

    name: str

    def __post_init__(self):
        if self.name not in _NAMES:
            raise ValueError(f"unknown kernel set {self.name!r}: use crossfhe.kernels.VECTOR, NATIVE, GPU, MATRIX or "
                             "AUTO")

    def __repr__(self) -> str:
        return self.name.upper()

    @property
    def uses_tables(self) -> bool:
        """True when plans need this set's own tables (MATRIX); VECTOR and NATIVE plans are the radix-2 ones."""
        return self.name == "matrix"

    @property
    def native(self) -> bool:
        """True for NATIVE: the NTT and the TFHE blind rotation run as the CPU custom calls."""
        return self.name == "native"

    @property
    def natural_twiddles(self) -> bool:
        """True when this set's NTT kernel reads its plans' twiddles in the textbook order (GPU: coalesced loads in
        every stage), not in the radix-2 kernels' arranged order."""
        return self.name == "gpu"

    @property
    def gpu(self) -> bool:
        """True for GPU: the NTT runs as the CUDA custom call."""
        return self.name == "gpu"

    def resolve(self) -> KernelSet:
        """This set, with AUTO replaced by :func:`default_kernels`."""
        return default_kernels() if self.name == "auto" else self

    def require(self, what: str) -> KernelSet:
        """This set resolved, or RuntimeError naming ``what`` and the reason where its kernels cannot run here
        (NATIVE without its build; GPU without a CUDA device or nvcc): checked where work is about to start (the
        contexts' ``create``), before any key is made."""
        k = self.resolve()
        if k.native:
            ring_ntt.NATIVE.require(what)
        if k.gpu:
            gpu_native.GPU.require(what)
        return k

    def for_plans(self) -> KernelSet | None:
        """What an NTT plan stores: None for VECTOR (its plain radix-2 kernels), else the resolved set. Asking for
        NATIVE where the native build is missing raises RuntimeError with the reason (GPU is checked when its kernel
        is first traced: plans made on a host without the GPU stay usable there for everything but running)."""
        k = self.resolve()
        if k.name == "native":
            ring_ntt.NATIVE.require("the NATIVE kernel set")
        return None if k.name == "vector" else k

    # NTT ---------------------------------------------------------------------------------------------

    def ntt_tables(self, n: int, moduli: tuple[int, ...]):
        return ntt_matrix.MatrixNTTPlan.create(n, moduli)

    def concat_ntt_tables(self, tables: list):
        """The tables of several plans over their limbs in turn (moduli may repeat across them)."""
        return ntt_matrix.concat(tables)

    def ntt(self, x, plan, *, full: bool = True):
        """The forward transform of x on ``plan`` (:func:`crossfhe.ring.ntt.ntt`; ``full=False``: any
        representative in [0, 2q))."""
        if self.name == "native":
            return ring_ntt.native_transform(x, plan, inverse=False, full=full)
        if self.name == "gpu":
            return gpu_native.transform(x, plan, inverse=False, full=full)
        return ntt_matrix.ntt(x, plan.matrix)

    def intt(self, x, plan):
        if self.name == "native":
            return ring_ntt.native_transform(x, plan, inverse=True)
        if self.name == "gpu":
            return gpu_native.transform(x, plan, inverse=True)
        return ntt_matrix.intt(x, plan.matrix)

    # Basis conversion ----------------------------------------------------------------------------------

    def conversion_tables(self, weights: np.ndarray, src_q: np.ndarray, dst_q: np.ndarray):
        """BAT tables of the conversion matmul z[..., g, j, n] = sum_i y~[..., g, i, n] weights[g, j, i]
        mod dst_q[g, j], for ``weights`` ``[G, m, a]`` (or ``[m, a]``), ``src_q`` ``[G, a, 1]`` and
        ``dst_q`` ``[G, m, 1]`` (the moduli of the inputs and of the outputs)."""
        return bconv_matrix.conversion_operand(weights, src_q, dst_q)

    def convert_centered(self, y, src_q, tables):
        """sum_i center(y_i) w_ji mod b_j (:func:`crossfhe.kernels.bconv_matrix.centered_matmul`)."""
        return bconv_matrix.centered_matmul(y, src_q, tables)


VECTOR = KernelSet("vector")
NATIVE = KernelSet("native")
GPU = KernelSet("gpu")
MATRIX = KernelSet("matrix")
AUTO = KernelSet("auto")
_BY_NAME = {k.name: k for k in (VECTOR, NATIVE, GPU, MATRIX, AUTO)}


ENV = "CROSSFHE_KERNELS"
"""Names the set AUTO stands for in a process (``vector``, ``native``, ``gpu``, ``matrix``), read once: the caller's
choice for code that leaves its parameters on AUTO (a test suite run on another set, say)."""


@functools.lru_cache(maxsize=1)
def default_kernels() -> KernelSet:
    """The kernel set AUTO stands for in this process (module docstring): the set ``$CROSSFHE_KERNELS`` names, if
    set (checked: RuntimeError where it cannot run here); else NATIVE on a CPU backend where the native build is
    available, else VECTOR. Evaluated once, outside any trace."""
    chosen = os.environ.get(ENV, "").strip()
    if chosen:
        try:
            kernels = as_kernel_set(chosen)
        except ValueError as e:
            raise ValueError(f"${ENV}: {e}") from None
        if kernels.name == "auto":
            raise ValueError(f"${ENV} names the set AUTO stands for: vector, native, gpu or matrix, not auto")
        return kernels.require(f"${ENV}={chosen}")
    if jax.default_backend() == "cpu" and ring_ntt.NATIVE.available():
        return NATIVE
    return VECTOR


def native_status() -> str:
    """Where the native kernels were built, or why there are none."""
    return ring_ntt.NATIVE.status()


def as_kernel_set(value) -> KernelSet:
    """A KernelSet from a KernelSet or its name ('vector', 'native', 'gpu', 'matrix', 'auto'); ValueError otherwise."""
    if isinstance(value, KernelSet):
        return value
    if isinstance(value, str):
        name = value.lower()
        return _BY_NAME.get(name) or KernelSet(name)  # an unknown name raises ValueError
    raise ValueError(
        f"kernels must be crossfhe.kernels.VECTOR, NATIVE, GPU, MATRIX or AUTO (or their names), got {value!r}"
    )
