"""Matrix-engine lowering of the ring kernels (CROSS BAT/MAT) and the kernel sets that select it.

* :mod:`~crossfhe.kernels.chunks`: residues as signed 8-bit digits, accumulator bounds, recombination.
* :mod:`~crossfhe.kernels.bat`: BAT, a modular product by a known operand as one int8 matmul.
* :mod:`~crossfhe.kernels.ntt_matrix`: MAT, the negacyclic NTT as a 4-step matrix product.
* :mod:`~crossfhe.kernels.bconv_matrix`: basis conversion's modular matmul through BAT.
* :mod:`~crossfhe.kernels.gpu_native`: the NTT as a CUDA kernel (the ``GPU`` set's transform).
* :mod:`~crossfhe.kernels.sets`: ``VECTOR``, ``NATIVE``, ``GPU`` and ``MATRIX``, the kernel sets behind one interface.

This layer imports only ``crossfhe.math`` and ``crossfhe.ring``; its kernels are bit-exact with
``crossfhe.ring.ntt`` (whose slot order they reproduce) and ``crossfhe.math.rns``.
"""

from crossfhe.kernels.sets import (
           AUTO,
           GPU,
           MATRIX,
           NATIVE,
           VECTOR,
           KernelSet,
           as_kernel_set,
           default_kernels,
           native_status,
)

__all__ = ["AUTO", "GPU", "MATRIX", "NATIVE", "VECTOR", "KernelSet", "as_kernel_set", "default_kernels",
           "native_status"]
