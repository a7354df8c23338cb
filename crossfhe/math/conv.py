"""The centered fast basis conversion as a native CPU kernel (``conv_ffi.cc``, an XLA custom call): the words of
:func:`crossfhe.math.modular.centered_gemm_rows` (its outputs are canonical residues, so any exact method gives
them), in one pass over the source rows instead of XLA's float64 product and the passes around it.

The NATIVE kernel set's ModUp and ModDown take it where its build has AVX-512 IFMA (:func:`fast`: products summed
as their low and high 52 bits in 64-bit lanes, 8 per instruction); elsewhere they keep the float64 product, which
neither the portable path nor an AVX2 form (two FMAs per term on split weights) beats. Measured: benchmarks/README.md
("Key switching on the CPU: radix-4 transforms, a native multiply-accumulate and conversion"; "The basis
conversion's blocks sized to the level-1 cache")."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.math import native

TARGET = "crossfhe_conv_centered"
_SOURCES = (Path(__file__).with_name("conv_ffi.cc"),)
_ABI = 3


def _load():
    lib, why = native.build_and_load(_SOURCES, "cf_conv_abi_version", _ABI,
                                     hashed=(Path(__file__).with_name("ffi_parallel.h"),))
    if lib is not None:
        native.register(lib, {TARGET: "cf_conv_centered_ffi"})
    return lib, why


NATIVE = native.Native(_load)
"""The native conversion (built on first use); ``NATIVE.status()`` says where it was built or why there is none."""


def fast() -> bool:
    """Whether the native conversion is built here with its IFMA path (so faster than XLA's float64 product). Loads
    it (building on first use); False where there is no native build."""
    lib = NATIVE.library()
    if lib is None:
        return False
    fn = lib.cf_conv_fast
    fn.restype = ctypes.c_int
    return bool(fn())


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class ConvTables:
    """The tables of :func:`convert_centered` for D groups of weights (made once, on the host): ``half`` and ``c``
    [D, S] (floor(c_i / 2) and the source moduli c_i; half 2^32 - 1 for padding rows), ``w`` [D, M, S], ``negk``
    (-sum_i c_i w_ji mod q_j) and ``q`` [D, M], all uint32."""

    half: jax.Array
    c: jax.Array
    w: jax.Array
    negk: jax.Array
    q: jax.Array

    @classmethod
    def create(cls, weights, src_q, half, dst_q) -> ConvTables:
        """From ``weights`` [D, M, S] (w_ji = the source's hat value mod q_j, in [0, q_j)), ``src_q`` and ``half``
        [D, S] (or [D, S, 1]), ``dst_q`` [D, M] (or [D, M, 1]). ValueError for unreduced weights."""
        w = np.asarray(weights, dtype=np.uint64)
        d, m, s = w.shape
        c = np.asarray(src_q, dtype=np.uint64).reshape(d, s)
        q = np.asarray(dst_q, dtype=np.uint64).reshape(d, m)
        if (w >= q[:, :, None]).any():
            raise ValueError("conversion weights must be reduced modulo their target")
        k = [[-sum(int(ci) * int(wi) for ci, wi in zip(c[g], w[g, j], strict=True)) % int(q[g, j]) for j in range(m)]
             for g in range(d)]
        u32 = lambda a: jnp.asarray(np.asarray(a, dtype=np.uint64).astype(np.uint32))  # noqa: E731
        return cls(u32(np.asarray(half, dtype=np.uint64).reshape(d, s)), u32(c), u32(w), u32(k), u32(q))


def convert_centered(y, tables: ConvTables) -> jax.Array:
    """uint32 ``[..., D, M, N]``: z[..., d, j, n] = sum_i center(y[..., d, i, n]) w[d, j, i] mod q[d, j] for y uint32
    ``[..., D, S, N]`` with y[..., d, i, :] < c_i (center: minus c_i above half_i). One custom call; traceable.
    RuntimeError where the native build is missing."""
    NATIVE.require("the native basis conversion")
    d, m, s = tables.w.shape
    if y.shape[-3:-1] != (d, s):
        raise ValueError(f"y {y.shape} does not match tables of [D, S] = [{d}, {s}]")
    lead, n = y.shape[:-3], y.shape[-1]
    g = int(np.prod(lead, dtype=np.int64)) * d
    out = jax.ShapeDtypeStruct((g, m, n), jnp.uint32)
    call = jax.ffi.ffi_call(TARGET, out, vmap_method="sequential")
    z = call(jnp.reshape(y, (g, s, n)), tables.half, tables.c, tables.w, tables.negk, tables.q)
    return jnp.reshape(z, (*lead, d, m, n))


__all__ = ["NATIVE", "ConvTables", "convert_centered", "fast"]
