"""The blind rotation, written once; its external-product kernel is a value.

ACC <- ACC X^(sum_i r_i s_i) for the key bits s_i inside a bootstrapping key, step by step: step i reads the
GGSWs of group i once for the whole batch (every ciphertext of the batch, every table of a KS-dedup fan-out).
With a grouping of g key bits per step (g = 1: the plain CMux rotation), the step takes the T = 2^g - 1 GGSWs
of the group's nonzero bit patterns t and their rotations e_t = sum_j r_(g i + j) t_j mod 2N'
(:mod:`crossfhe.tfhe.params`); with g = 1, T = 1 and e = r_i.

How a step computes its external products is the ``product`` argument of :func:`blind_rotate`, one of three
pytree values (their arrays, plans and tables are leaves: made once on the host, passed to the program as
arguments):

* :class:`NTTProduct`: exactly, through the NTT of each RNS limb (:func:`crossfhe.core.ggsw.cmux_step`,
  :func:`crossfhe.core.ggsw.group_step`); keys uint32 ``[G, T, (k+1) l, k+1, L, N]`` in the NTT domain.
* :class:`FFTProduct`: through a float64 negacyclic FFT on one word mod Q per coefficient
  (:func:`crossfhe.core.fourier.cmux_step`, :func:`crossfhe.core.fourier.group_step`; rounding variance
  ``var_fft`` per product); keys complex128 ``[G, T, (k+1) l, k+1, N/2]``
  (:func:`crossfhe.core.fourier.ggsw_to_fourier`).
* :class:`NativeProduct`: the FFT product's steps, all of them in one custom call of the native CPU kernel
  (:mod:`crossfhe.kernels.cpu_native`; grouped keys only); keys float64 in its layout
  (:func:`crossfhe.core.fourier.native_key`).
* :class:`GPUProduct`: the NTT product's steps, all of them in one CUDA kernel (:mod:`crossfhe.kernels.gpu_native`,
  one block per accumulator; grouped keys, the approximate gadget only); the NTT product's keys, the same words.

The choice is made once, where a server key is prepared (:func:`crossfhe.tfhe.keys.prepare`); nothing here
looks at devices, tracers or backends. The type of the value is the route; under ``jax.jit`` it is part of the
argument's structure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.core import fourier as F
from crossfhe.core import ggsw as G
from crossfhe.core.fourier import FourierPlan, NativeTables
from crossfhe.kernels import cpu_native, gpu_native
from crossfhe.math.decompose import RNSGadgetPlan
from crossfhe.math.modular import shoup_precompute
from crossfhe.math.primes import minimal_root_of_unity, powers_mod
from crossfhe.ring.ntt import NTTPlan, bit_reverse


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class NTTProduct:
    """External products through the exact NTT: ``plan`` (the limbs' NTT), ``gplan`` (the gadget's digits from
    the residues), ``mac`` (q, Barrett and Montgomery constants ``[L, 1]``:
    :class:`~crossfhe.math.modular.ModulusTable`). The accumulator stays in residues, uint32
    ``[B, 2^nu, k+1, L, N]``. No x64."""

    plan: NTTPlan
    gplan: RNSGadgetPlan
    mac: tuple

    FUSED: ClassVar[bool] = False
    X64: ClassVar[bool] = False

    def enter(self, acc):
        return acc

    def leave(self, x):
        return x

    def step(self, x, exps, keys):
        """One step: exps int32 ``[B, T]``, keys uint32 ``[T, (k+1) l, k+1, L, N]`` (NTT domain)."""
        if keys.shape[0] == 1:
            return G.cmux_step(x, exps[:, 0], keys[0], self.plan, self.gplan, self.mac)
        return G.group_step(x, exps, keys, self.plan, self.gplan, self.mac)


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class FFTProduct:
    """External products through the float64 FFT of :mod:`crossfhe.core.fourier` (``plan``: its
    :class:`~crossfhe.core.fourier.FourierPlan`, device arrays). The accumulator is composed into one uint64 word
    mod Q per coefficient on entry and decomposed into residues on exit. Traced under ``jax.enable_x64(True)``."""

    plan: FourierPlan

    FUSED: ClassVar[bool] = False
    X64: ClassVar[bool] = True

    def enter(self, acc):
        return F.compose(acc, self.plan)

    def leave(self, x):
        return F.decompose(x, self.plan)

    def step(self, x, exps, keys):
        """One step: exps int32 ``[B, T]``, keys complex128 ``[T, (k+1) l, k+1, N/2]``."""
        if keys.shape[0] == 1:
            return F.cmux_step(x, exps[:, 0], keys[0], self.plan)
        return F.group_step(x, exps, keys, self.plan)


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class NativeProduct:
    """The FFT product's steps in one custom call of the native CPU kernel (grouped keys; CPU only): ``plan`` as
    :class:`FFTProduct`'s, ``tables`` the kernel's :class:`~crossfhe.core.fourier.NativeTables` (its build's slot
    order: a key laid out for them by :func:`crossfhe.core.fourier.native_key` is rotated by that build).

    Words: both FFT kernels compute the same digits and round the same inverse transform; they differ only in the
    FFTs' rounding (order of operations, twiddles), each within ``var_fft``; where every product's values stay
    below about 2^45 (N 2^11) both round to the same integers and the words are equal."""

    plan: FourierPlan
    tables: NativeTables

    FUSED: ClassVar[bool] = True
    X64: ClassVar[bool] = True

    def enter(self, acc):
        return F.compose(acc, self.plan)

    def leave(self, x):
        return F.decompose(x, self.plan)

    def rotate(self, x, exps, keys):
        """All steps: x uint64 ``[B, 2^nu, k+1, N]``, exps int32 ``[B, G, T]``, keys float64 ``[G, N/16, T, ...]``."""
        p, t = self.plan, self.tables
        src, power = (jnp.swapaxes(v, -1, -2).astype(jnp.int32) for v in G.component_move(exps, x.shape[1]))
        return cpu_native.blind_rotate(
            x, src, power, keys, t.tw, t.twist, t.roots, t.zeta, t.order, target=t.target,
            levels=p.levels, base_log=p.base_log, scale=p.scale, q=p.modulus, inv_q=1.0 / p.big_qf,
        )


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class GPUProduct:
    """The NTT product's steps in one custom call of the GPU kernel set (:func:`crossfhe.kernels.gpu_native.
    blind_rotate`; grouped keys, the approximate gadget): ``plan`` a GPU-set NTT plan (textbook-order twiddles),
    ``gplan`` the gadget's, ``pw``, ``pws`` uint32 ``[L, 2N]`` the powers psi^i of each limb's root and their Shoup
    companions, ``root_exp`` int32 ``[N]`` the odd exponent 2 brv(s) + 1 of the point that the transform's stage index s
    evaluates at (so that X^e is a pointwise product in the evaluation domain). Words: :class:`NTTProduct`'s (exact
    arithmetic, every value canonical). Keys: the NTT product's, uint32 ``[G, T, (k+1) l, k+1, L, N]``. Static: the
    launch, ``threads`` a block and ``cluster`` blocks an accumulator (:data:`crossfhe.kernels.gpu_native.
    ROTATE_CLUSTERS`; the same words for each). Make with :meth:`create` (on the host, once per parameter set)."""

    plan: NTTPlan
    gplan: RNSGadgetPlan
    pw: jax.Array
    pws: jax.Array
    root_exp: jax.Array
    threads: int = field(default=gpu_native.ROTATE_THREADS[0], metadata={"static": True})
    cluster: int = field(default=1, metadata={"static": True})

    FUSED: ClassVar[bool] = True
    X64: ClassVar[bool] = False

    @classmethod
    def create(cls, plan: NTTPlan, gplan: RNSGadgetPlan) -> GPUProduct:
        gpu_native.check_natural(plan)
        n = plan.n
        pw = np.stack([powers_mod(minimal_root_of_unity(2 * n, q), 2 * n, q) for q in plan.moduli]).astype(np.uint32)
        pws = shoup_precompute(pw, np.asarray(plan.moduli, dtype=np.uint64).reshape(-1, 1))
        root_exp = (2 * bit_reverse(np.arange(n, dtype=np.int64), n.bit_length() - 1) + 1).astype(np.int32)
        return cls(plan, gplan, pw, pws, root_exp)

    def enter(self, acc):
        return acc

    def leave(self, x):
        return x

    def tables(self) -> dict:
        p, g = self.plan.expanded(), self.gplan
        return dict(q=jnp.asarray(p.q).reshape(-1), w=p.w, ws=p.w_shoup, wi=p.wi, wis=p.wi_shoup, last=p.inv_last,
                    lasts=p.inv_last_shoup, hat_inv=jnp.asarray(g.hat_inv).reshape(-1),
                    hat_invs=jnp.asarray(g.hat_inv_shoup).reshape(-1), words=g.words, pw=self.pw, pws=self.pws,
                    root_exp=self.root_exp)

    def rotate(self, x, exps, keys):
        """All steps: x uint32 ``[B, 2^nu, k+1, L, N]``, exps int32 ``[B, G, T]``, keys
        ``[G, T, (k+1) l, k+1, L, N]``."""
        g = self.gplan
        return gpu_native.blind_rotate(x, exps, keys, self.tables(), levels=g.gadget.levels,
                                       base_log=g.gadget.base_log, frac_words=g.frac_words, threads=self.threads,
                                       cluster=self.cluster)


PRODUCTS = (NTTProduct, FFTProduct, NativeProduct, GPUProduct)
"""The external-product kernels, by type (a prepared key's route)."""


def blind_rotate(acc, exps, keys, product, *, unroll: int = 1):
    """ACC X^(sum_i r_i s_i): acc uint32 ``[B, 2^nu, k+1, L, N]`` (residues, COEFF; the 2^nu components of an
    accumulator of degree 2^nu N), exps int32 ``[B, G, T]`` in [0, 2^(nu+1) N) (per step and pattern, module
    docstring), keys: G steps' GGSWs in ``product``'s layout (leading axis G). Returns residues of acc's shape.
    Step i reads keys[i] once for the whole batch (a ``lax.scan``, ``unroll`` steps per iteration; the native
    product runs all steps in one call). Traceable (the FFT products under x64)."""
    x = product.enter(acc)
    if product.FUSED:
        x = product.rotate(x, exps, keys)
    else:

        def step(a, xs):
            e, k = xs
            return product.step(a, e, k), None

        x, _ = jax.lax.scan(step, x, (jnp.moveaxis(exps, 1, 0), keys), unroll=unroll)
    return product.leave(x)


__all__ = ["FFTProduct", "GPUProduct", "NTTProduct", "NativeProduct", "PRODUCTS", "blind_rotate"]
