"""The two kernel sets behind one interface: ``VECTOR`` (radix-2, CPU default) and ``MATRIX`` (CROSS MAT/BAT).

A kernel set is a value chosen once, where the parameters of a scheme are made
(``ckks.Params.with_kernels(MATRIX)``, ``bfv.Params.with_kernels``, ``tfhe.Params.with_kernels``), and
carried by every plan built from them: :class:`~crossfhe.ring.ntt.NTTPlan` and
:class:`~crossfhe.math.rns.BasisConversion` hold the set (static) and its tables (pytree leaves), and
their kernels hand the work to it. Nothing inspects the hardware. Both sets compute the same exact
functions, so a scheme gives bit-identical ciphertexts on either.

* ``VECTOR``: the radix-2 NTT of :mod:`crossfhe.ring.ntt` and the basis conversion of
  :mod:`crossfhe.math.rns` as an exact float64 GEMM (:func:`crossfhe.math.modular.centered_gemm_rows`).
  On XLA:CPU the fast choice (float64 is slow or absent on TPUs, which take ``MATRIX``).
* ``MATRIX``: the 4-step NTT as two BAT int8 matrix products (:mod:`crossfhe.kernels.ntt_matrix`) and the
  basis conversion's (N, l, l') modular matmul through BAT (:mod:`crossfhe.kernels.bconv_matrix`), the
  CROSS lowering for matrix engines (tensor cores, TPU MXUs). On a CPU it is correct but slow.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from crossfhe.kernels import bconv_matrix, ntt_matrix


@dataclass(frozen=True)
class KernelSet:
    """A named kernel set (hashable: it keys the plan caches and is a static jit argument)."""

    name: str

    def __post_init__(self):
        if self.name not in ("vector", "matrix"):
            raise ValueError(f"unknown kernel set {self.name!r}: use crossfhe.kernels.VECTOR or MATRIX")

    def __repr__(self) -> str:
        return self.name.upper()

    @property
    def uses_tables(self) -> bool:
        """True when plans need this set's own tables (MATRIX); VECTOR plans are the plain ones."""
        return self.name == "matrix"

    # NTT ---------------------------------------------------------------------------------------------

    def ntt_tables(self, n: int, moduli: tuple[int, ...]):
        return ntt_matrix.MatrixNTTPlan.create(n, moduli)

    def concat_ntt_tables(self, tables: list):
        """The tables of several plans over their limbs in turn (moduli may repeat across them)."""
        return ntt_matrix.concat(tables)

    def ntt(self, x, tables):
        return ntt_matrix.ntt(x, tables)

    def intt(self, x, tables):
        return ntt_matrix.intt(x, tables)

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
MATRIX = KernelSet("matrix")


def as_kernel_set(value) -> KernelSet:
    """A KernelSet from a KernelSet or its name ('vector', 'matrix'); ValueError otherwise."""
    if isinstance(value, KernelSet):
        return value
    if isinstance(value, str):
        return KernelSet(value.lower())
    raise ValueError(f"kernels must be crossfhe.kernels.VECTOR or MATRIX (or 'vector' / 'matrix'), got {value!r}")
