"""TFHE keys: the client key, the server key and its prepared forms, key generation.

A :class:`ServerKey` is the pair the server evaluates with: the bootstrapping key (GGSWs of the short key's bits,
or of its groups' indicators) and the key-switching key, what is saved and sent, plus its :class:`PreparedKey`,
the forms the kernels read, made once from the key on the host (:func:`prepare`) and carried as pytree leaves:
a key passed to ``jax.jit`` as an argument brings them along. The external-product kernel of the blind rotation is
part of it, a value (:mod:`crossfhe.core.blind_rotation`: :class:`~crossfhe.core.blind_rotation.NTTProduct`,
:class:`~crossfhe.core.blind_rotation.FFTProduct`, :class:`~crossfhe.core.blind_rotation.NativeProduct` or
:class:`~crossfhe.core.blind_rotation.GPUProduct`), chosen once where the key is prepared (:func:`product_for`).
Nothing is cached on a key after it is made: another product is another key (``prepare(sk, product=...)``, sharing
the arrays).
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from functools import cache, partial

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.core import fourier as F
from crossfhe.core import ggsw as G
from crossfhe.core.blind_rotation import PRODUCTS, FFTProduct, GPUProduct, NativeProduct, NTTProduct
from crossfhe.core.fourier import FourierPlan, ggsw_to_fourier
from crossfhe.core.keys import SecretHolder, check_key_ids, key_id
from crossfhe.core.lwe import LWECiphertext
from crossfhe.errors import BasisMismatchError, ParameterError
from crossfhe.kernels import MATRIX, NATIVE, KernelSet, cpu_native, gpu_native
from crossfhe.math import random as crandom
from crossfhe.math.decompose import Gadget, RNSGadgetPlan
from crossfhe.math.modular import ModulusTable, add_mod, barrett_mul, sub_mod
from crossfhe.math.rns import RNSBasis
from crossfhe.math.xla import jit, to_device
from crossfhe.progress import callback as progress_callback
from crossfhe.progress import report
from crossfhe.ring.ntt import NTTPlan, intt, ntt
from crossfhe.tfhe.params import KS_MODULUS_BITS, Params

U32 = jnp.uint32
I32 = jnp.int32
_static = partial(field, metadata={"static": True})

GAUSSIAN_MAX_SIGMA = 64.0
"""Noise of standard deviation up to this is drawn from the discrete Gaussian (CDT table); above it, from
the uniform distribution on [-B, B] of the same variance (B (B + 1) / 3 = sigma^2): the lattice estimator
models the error by its standard deviation, as TFHE-rs's TUniform parameter sets do."""

KEYGEN_CHUNK_BYTES = 64 << 20
"""Keys are generated in chunks of about this many bytes (bounded peak memory for the N 2^15 keys)."""


# --------------------------------------------------------------------------------------------------
# Keys
# --------------------------------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False, repr=False)
class ClientKey(SecretHolder):
    """The secret keys: ``lwe_key`` int32 ``[n]`` (short, binary) and ``glwe_key`` int32 ``[k, N]`` (binary;
    its coefficients, flattened, are the long LWE key). Pickling is refused: a client key leaves the process
    only through ``crossfhe.io.tfhe.save_secret_key`` / ``dumps_secret_key``."""

    lwe_key: jax.Array
    glwe_key: jax.Array
    params: Params = _static()
    key_id: str | None = _static(default=None)

    SAVE_WITH = "crossfhe.io.tfhe.save_secret_key(ck, path)"

    @property
    def long_key(self) -> jax.Array:
        return self.glwe_key.reshape(-1)

    def __repr__(self) -> str:
        return f"tfhe.ClientKey({self.params.name or self.params!r})"


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False)
class PreparedKey:
    """What the kernels read of a server key, made once from it on the host (:func:`prepare`): a pytree of device
    arrays and plans, the argument of the compiled programs (:func:`crossfhe.tfhe.bootstrap.program_key`).

    ``bsk``, ``ksk``: the key's arrays (:class:`ServerKey`; the blind rotation's first step always reads ``bsk``'s
    first group through the exact NTT, see :func:`crossfhe.tfhe.bootstrap.pbs_many`). ``ksk_bytes``: the
    key-switching key's signed bytes int8 ``[4 (n + 1), k N l_ks]`` (:func:`ksk_bytes`) on the ``NATIVE`` and
    ``MATRIX`` kernel sets, else None. ``rest``: the other steps' GGSWs in ``product``'s layout, leading axis
    ``groups - 1`` (FFT: complex128 ``[G - 1, 2^g - 1, (k+1) l, k+1, N/2]``; native: float64 ``[G - 1, N/16, 2^g - 1,
    (k+1) l, k+1, 2, 8]``), None for the NTT product (``bsk`` itself). ``product``: the external-product kernel of
    those steps (:mod:`crossfhe.core.blind_rotation`); ``first``: the NTT product of the first step; ``ms_plan``: the
    modulus switch Q -> 2^32's digit plan. Static: ``kernels``, the resolved kernel set."""

    bsk: jax.Array
    ksk: jax.Array
    ksk_bytes: jax.Array | None
    rest: jax.Array | None
    product: NTTProduct | FFTProduct | NativeProduct | GPUProduct
    first: NTTProduct
    ms_plan: RNSGadgetPlan
    kernels: KernelSet = _static()

    @property
    def x64(self) -> bool:
        """Whether programs reading this key trace under ``jax.enable_x64(True)`` (the FFT products)."""
        return self.product.X64

    def rest_keys(self, per: int):
        """The steps after the first, in ``product``'s layout (the NTT product: ``bsk``'s, grouped by step)."""
        if self.rest is not None:
            return self.rest
        return self.bsk[per:].reshape((-1, per) + self.bsk.shape[1:])


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False, repr=False)
class ServerKey:
    """The evaluation keys (public: what a client sends a server).

    ``bsk`` uint32 ``[params.ggsw_count, (k+1) l, k+1, L, N]`` (GGSWs under the GLWE key, EVAL domain, of the short
    key's n bits, or with grouping g > 1 of the indicators of each group's 2^g - 1 nonzero bit patterns,
    group-major: :func:`bsk_bits`) and ``ksk`` int32 ``[n + 1, k N l_ks]`` (LWE encryptions mod 2^32 under the short
    key of s_i 2^32 / B^(j+1), one per column i l_ks + j, body in the last row: the key switch is a matrix-vector
    product with this matrix) are ``prepared.bsk`` and ``prepared.ksk``: the key is its :class:`PreparedKey`, made
    with it (:meth:`create`, :func:`keygen`, :func:`prepare`); ``nbytes`` counts ``bsk`` and ``ksk`` (what is saved
    and sent; the prepared forms are as many bytes again for the FFT). ``key_id``: the key pair's identifier,
    :func:`~crossfhe.core.keys.key_id` of the key-switching key's body row (its client key and ciphertexts carry the
    same; operations refuse others). Pickled as its two arrays, prepared again when unpickled."""

    prepared: PreparedKey
    params: Params = _static()
    key_id: str | None = _static(default=None)

    @classmethod
    def create(cls, bsk, ksk, params: Params, key_id: str | None = None, *, product=None,
               progress=None) -> ServerKey:
        """The key of arrays ``bsk`` and ``ksk`` (as :class:`ServerKey` describes them; shapes and dtypes checked),
        prepared for ``product`` (:func:`product_for`; default: by the parameters)."""
        if not isinstance(params, Params):
            raise ParameterError(f"params must be tfhe.Params, got {type(params).__name__}")
        k1, rows = params.glwe_dim + 1, (params.glwe_dim + 1) * params.pbs_gadget.levels
        want = {"bsk": ((params.ggsw_count, rows, k1, len(params.moduli), params.poly_size), np.uint32),
                "ksk": ((params.lwe_dim + 1, params.long_dim * params.ks_gadget.levels), np.int32)}
        for name, arr in (("bsk", bsk), ("ksk", ksk)):
            shape, dtype = want[name]
            if tuple(np.shape(arr)) != shape or np.dtype(arr.dtype) != dtype:
                raise ParameterError(f"a server key's {name} for {params.name or 'these parameters'} is "
                                     f"{dtype.__name__} {shape}, got {np.dtype(arr.dtype)} {tuple(np.shape(arr))}")
        made = _make_prepared(params, jnp.asarray(bsk), jnp.asarray(ksk), product_for(params, product),
                              progress_callback(progress))
        return cls(made, params, key_id)

    @property
    def bsk(self) -> jax.Array:
        return self.prepared.bsk

    @property
    def ksk(self) -> jax.Array:
        return self.prepared.ksk

    @property
    def product(self) -> type:
        """The blind rotation's external-product kernel: ``NTTProduct``, ``FFTProduct``, ``NativeProduct`` or
        ``GPUProduct``."""
        return type(self.prepared.product)

    @property
    def nbytes(self) -> int:
        return int(self.bsk.nbytes + self.ksk.nbytes)

    def __reduce__(self):
        # the key's arrays only (NumPy, exact dtypes); the prepared forms are made again when it is loaded
        return (_restore, (np.asarray(self.bsk), np.asarray(self.ksk), self.params, self.key_id, self.product))

    def __repr__(self) -> str:
        return (f"tfhe.ServerKey({self.params.name or 'params'}, {self.nbytes / 2**20:.1f} MiB, "
                f"{self.product.__name__})")


def _restore(bsk, ksk, params, kid, product):
    return ServerKey.create(bsk, ksk, params, kid, product=product)


def _key_of(seed) -> crandom.ChaChaKey:
    if isinstance(seed, crandom.ChaChaKey):
        return seed
    if seed is None:
        return crandom.seed_key(os.urandom(32))
    if isinstance(seed, (bytes, bytearray)):
        return crandom.seed_key(bytes(seed))
    raise ParameterError(f"seed must be None, bytes or a ChaChaKey, got {type(seed).__name__}")


def sample_noise(key, shape, sigma: float):
    """int32 noise of standard deviation sigma (:data:`GAUSSIAN_MAX_SIGMA`), from the ChaCha key ``key``."""
    if sigma <= GAUSSIAN_MAX_SIGMA:
        return crandom.discrete_gaussian(key, shape, sigma)
    bound = max(1, round((-1 + math.sqrt(1 + 12 * sigma * sigma)) / 2))
    if bound >= 2**30:
        raise ParameterError(f"noise sigma {sigma} too large for int32 samples")
    return (crandom.uniform_mod(key, shape, 2 * bound + 1).astype(I32) - I32(bound)).astype(I32)


def _binary(key, shape):
    return (crandom.random_bits(key, shape) & U32(1)).astype(I32)




class Tables:
    """Host-side constants of a parameter set (cached per Params; made outside any trace), passed to kernels as
    arguments: the NTT plan, gadget plans, modulus constants, the gadget vector's residues."""

    _cache: dict = {}

    def __new__(cls, params: Params):
        hit = cls._cache.get(params)
        if hit is not None:
            return hit
        self = super().__new__(cls)
        with jax.ensure_compile_time_eval():
            self.params = params
            self.basis = RNSBasis(params.moduli)
            self.plan = NTTPlan.create(params.poly_size, params.moduli, params.kernels)
            self.gplan = RNSGadgetPlan.create(self.basis, params.pbs_gadget)
            self.ms_plan = RNSGadgetPlan.create(self.basis, Gadget(16, 2))
            t = ModulusTable.create(params.moduli)
            self.mac = (t.q, t.barrett_mu, t.bits, t.mont_qinv, t.mont_r2)
            self.q = t.q
            self.barrett = (t.barrett_mu, t.bits)
            self.gvec = G.gadget_residues(params.pbs_gadget.vector(params.big_q), params.moduli)  # [l, L]
        for name in ("plan", "gplan", "ms_plan", "mac", "q", "barrett", "gvec"):  # arguments: on the device once
            setattr(self, name, to_device(getattr(self, name)))
        cls._cache[params] = self
        return self

    @property
    def ntt_product(self) -> NTTProduct:
        return NTTProduct(self.plan, self.gplan, self.mac)

    @property
    def gpu_product(self) -> GPUProduct:
        made = self.__dict__.get("_gpu_product")
        if made is None:
            with jax.ensure_compile_time_eval():
                made = to_device(GPUProduct.create(self.plan, self.gplan))
            self._gpu_product = made
        return made


def gpu_rotation_fits(params: Params) -> bool:
    """Whether the GPU kernel set's blind rotation (:class:`~crossfhe.core.blind_rotation.GPUProduct`) takes keys of
    ``params``: grouped key bits, the approximate gadget (B^l < Q), and a step's digits and sums in a block's shared
    memory (:func:`crossfhe.kernels.gpu_native.rotation_fits`: N <= 4096, at most 4 components of the extended
    accumulator at N 2048 with l = 2)."""
    comps = params.acc_size // params.poly_size
    return (params.grouping > 1 and not params.pbs_gadget.is_exact_for(params.big_q)
            and gpu_native.rotation_fits(params.poly_size, len(params.moduli), params.glwe_dim + 1, comps,
                                         params.pbs_gadget.levels))


def keygen(params: Params, seed=None, *, product=None, progress=None):
    """(ClientKey, ServerKey) for ``params``. ``seed``: None (os.urandom), 32 bytes, or a ChaChaKey: the
    same seed gives the same keys. ``product``: the blind rotation's external-product kernel (:func:`product_for`;
    default by the parameters). ``progress``: :mod:`crossfhe.progress` (stages: the bootstrapping key, the
    key-switching key, the Fourier form; default silent). Asking for the ``NATIVE`` kernel set where the native
    kernels cannot be built raises RuntimeError saying why."""
    if not isinstance(params, Params):
        raise ParameterError(f"params must be tfhe.Params, got {type(params).__name__}")
    product = product_for(params, product)
    progress = progress_callback(progress)
    root = _key_of(seed)
    k_lwe, k_glwe, k_bsk, k_ksk = (crandom.fold_in(root, i) for i in range(4))
    lwe_key = _binary(k_lwe, (params.lwe_dim,))
    glwe_key = _binary(k_glwe, (params.glwe_dim, params.poly_size))
    ck = ClientKey(lwe_key, glwe_key, params)
    bsk = _gen_bsk(ck, k_bsk, progress)
    ksk = _gen_ksk(ck, k_ksk, progress)
    kid = key_id(ksk[-1])
    sk = ServerKey(_make_prepared(params, bsk, ksk, product, progress), params, kid)
    return dataclasses.replace(ck, key_id=kid), sk


@cache
def fourier_plan(params: Params) -> FourierPlan:
    return FourierPlan.create(params.poly_size, params.moduli, params.pbs_gadget, params.glwe_dim)


def product_for(params: Params, product=None) -> type:
    """The external-product kernel a key of ``params`` is prepared for: ``product`` (``NTTProduct``, ``FFTProduct``,
    ``NativeProduct`` or ``GPUProduct``, checked against the parameters), or by default: ``GPUProduct`` on the ``GPU``
    kernel set where :func:`gpu_rotation_fits` (exact, so within the FFT's noise budget), else ``NTTProduct`` unless
    ``params.fft_kernel`` (the FFT's rounding counted by the noise model: every preset), then ``NativeProduct`` on the
    ``NATIVE`` kernel set with grouped key bits where the native kernel is built, else ``FFTProduct``. ``FFTProduct``
    on parameters without ``fft_kernel`` runs (the noise model then omits its rounding); ``NativeProduct`` and
    ``GPUProduct`` elsewhere raise ParameterError saying why. Decided from the parameters and the kernel set alone."""
    kernels = params.kernels.resolve()
    native_ok = kernels.native and params.grouping > 1 and cpu_native.available()
    gpu_ok = kernels.gpu and gpu_rotation_fits(params)
    if product is None:
        if gpu_ok:
            return GPUProduct
        if not params.fft_kernel:
            return NTTProduct
        if kernels.native and params.grouping > 1 and params.kernels.native:  # asked for by name: say why not
            cpu_native.NATIVE.require("the NATIVE kernel set's TFHE blind rotation")
        return NativeProduct if native_ok else FFTProduct
    if product not in PRODUCTS:
        raise ParameterError(f"product must be one of NTTProduct, FFTProduct, NativeProduct, GPUProduct (crossfhe.core."
                             f"blind_rotation), got {product!r}")
    if product is GPUProduct and not gpu_ok:
        why = (f"the kernel set is {kernels!r} (params.with_kernels(GPU))" if not kernels.gpu else
               f"{params.name or 'the parameters'} need grouped key bits, the approximate gadget and a step in one "
               f"block's shared memory")
        raise ParameterError(f"the GPU blind rotation cannot run here: {why}; use NTTProduct or FFTProduct")
    if product is NativeProduct and not native_ok:
        why = (f"the kernel set is {kernels!r} (params.with_kernels(NATIVE))" if not kernels.native else
               f"{params.name or 'the parameters'} have grouping {params.grouping}; the native kernel takes grouped "
               f"key bits (grouping > 1)" if params.grouping == 1 else f"it is not available ({cpu_native.status()})")
        raise ParameterError(f"the native blind rotation cannot run here: {why}; use FFTProduct")
    return product


def prepare(sk: ServerKey, *, product=None, progress=None) -> ServerKey:
    """``sk`` prepared for ``product`` (:func:`product_for`): ``sk`` itself if it already is, else a new key sharing
    its arrays (the NTT product costs nothing; the FFT ones transform the bootstrapping key on the host once)."""
    if not isinstance(sk, ServerKey):
        raise ParameterError(f"expected a tfhe ServerKey, got {type(sk).__name__}")
    product = product_for(sk.params, product)
    if product is sk.product:
        return sk
    made = _make_prepared(sk.params, sk.bsk, sk.ksk, product, progress_callback(progress))
    return ServerKey(made, sk.params, sk.key_id)


def _make_prepared(params: Params, bsk, ksk, product: type, progress) -> PreparedKey:
    kernels = params.kernels.resolve()
    t = Tables(params)
    try:
        with jax.ensure_compile_time_eval():
            by = ksk_bytes(params, ksk) if kernels in (NATIVE, MATRIX) else None
            if product is NTTProduct:
                return PreparedKey(bsk, ksk, by, None, t.ntt_product, t.ntt_product, t.ms_plan, kernels)
            if product is GPUProduct:  # the NTT product's keys, as they are
                return PreparedKey(bsk, ksk, by, None, t.gpu_product, t.ntt_product, t.ms_plan, kernels)
            rest, made = _fourier_keys(params, bsk, product, progress)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError) as e:
        raise ParameterError(
            "a server key's prepared forms (the Fourier form of its bootstrapping key, the key-switching key's bytes) "
            "are made from the key on the host, outside jax.jit: prepare the key before passing it to a program"
        ) from e
    return PreparedKey(bsk, ksk, by, rest, made, t.ntt_product, t.ms_plan, kernels)


def _fourier_keys(params: Params, bsk, product: type, progress):
    """The steps after the first in the Fourier domain, grouped by step, and the product value."""
    plan = fourier_plan(params)
    tables = F.NativeTables.create(plan) if product is NativeProduct else None
    per = (1 << params.grouping) - 1
    tplan, n = Tables(params).plan, params.ggsw_count
    chunk = per * max(1, min(n // per, KEYGEN_CHUNK_BYTES // (params.bsk_bytes // n) // per))
    parts = []
    for start in range(per, n, chunk):
        keys_f = ggsw_to_fourier(np.asarray(intt(bsk[start : start + chunk], tplan)), params.moduli)
        keys_f = keys_f.reshape((-1, per) + keys_f.shape[1:])
        parts.append(F.native_key(keys_f, tables) if tables is not None else keys_f)
        report(progress, min(start + chunk, n), n, "bootstrapping key (Fourier form)")
    if not parts:  # one group (or one key bit): the first step is the whole rotation
        k1, rows, h = params.glwe_dim + 1, (params.glwe_dim + 1) * params.pbs_gadget.levels, params.poly_size // 2
        if tables is not None:
            parts.append(np.zeros((0, h // cpu_native.BLOCK, per, rows, k1, 2, cpu_native.BLOCK)))
        else:
            parts.append(np.zeros((0, per, rows, k1, h), np.complex128))
    with jax.enable_x64(True):
        rest = jnp.asarray(np.concatenate(parts))
        fplan = jax.tree_util.tree_map(jnp.asarray, plan)
    made = NativeProduct(fplan, tables) if tables is not None else FFTProduct(fplan)
    return rest, made


def ksk_bytes(params: Params, ksk) -> jax.Array | None:
    """The key-switching key as signed bytes, int8 ``[4 (n + 1), k N l_ks]``: row ``b (n + 1) + c`` holds byte
    b of row c, with k = sum_b 2^(8 b) s_b mod 2^32 and s_b in [-128, 128). Each product of a byte row
    and the digits sums k N l_ks terms of at most 128 B_ks / 2 (checked below), so it fits int32, and their
    shifted sum is the key's product mod 2^32. None for a gadget whose byte products could overflow int32, or
    whose digits do not fit int8."""
    if not ksk_bytes_fit(params):
        return None
    k = np.asarray(ksk).view(np.uint32).astype(np.int64)
    planes = []
    for _ in range(4):
        low = k & 255
        planes.append(np.where(low >= 128, low - 256, low).astype(np.int8))
        k = (k >> 8) + (low >= 128)  # the borrow of a negative byte
    return jnp.asarray(np.concatenate(planes, axis=0))


def ksk_bytes_fit(params: Params) -> bool:
    """Whether the key switch of ``params`` can run through the key's signed bytes (:func:`ksk_bytes`): its
    k N l_ks products of at most 128 B_ks / 2 fit int32 and its digits fit int8."""
    g = params.ks_gadget
    return params.long_dim * g.levels * 128 * (1 << (g.base_log - 1)) < 2**31 and g.base_log <= 7


def _glwe_key_eval(ck: ClientKey, tables: Tables):
    res = crandom.to_residues(ck.glwe_key[:, None, :], tables.q)  # [k, L, N]
    return ntt(res, tables.plan)


@partial(jit, persist=True, static_argnames=("params",))
def _bsk_chunk(key, bits, s_eval, q, gvec, plan, *, params: Params):
    """GGSW encryptions (EVAL) of ``bits`` int32 [c]: [c, (k+1) l, k+1, L, N]."""
    k, n_poly, levels = params.glwe_dim, params.poly_size, params.pbs_gadget.levels
    limbs, rows, c = len(params.moduli), (k + 1) * levels, bits.shape[0]
    ka, ke = crandom.split(key)
    a = crandom.uniform_mod(ka, (c, rows, k, limbs, n_poly), q)  # EVAL domain directly (uniform either way)
    e = sample_noise(ke, (c, rows, 1, n_poly), params.glwe_sigma)
    e_ev = ntt(crandom.to_residues(e, q), plan)  # [c, rows, L, N]
    mu, bits_q = Tables(params).barrett
    dot = None
    for comp in range(k):
        term = barrett_mul(a[:, :, comp], s_eval[comp], q, mu, bits_q)
        dot = term if dot is None else add_mod(dot, term, q)
    body = sub_mod(e_ev, dot, q)  # phase b + sum_c a_c s_c = e
    glwe = jnp.concatenate([a, body[:, :, None]], axis=2)  # [c, rows, k+1, L, N]
    # + m g_j on component comp of row comp * l + j (a constant polynomial: the same in every slot)
    msg = (bits.astype(U32)[:, None, None] * gvec[None]) % q.reshape(1, 1, -1)  # [c, l, L] (m in {0, 1})
    eye = jnp.eye(k + 1, dtype=U32)  # [row component, glwe component]
    add = eye[None, :, None, :, None] * msg[:, None, :, None, :]  # [c, k+1, l, k+1, L]
    add = add.reshape(c, rows, k + 1, limbs, 1)
    return add_mod(glwe, add, q)


def patterns(grouping: int) -> np.ndarray:
    """The nonzero bit patterns of a group of g key bits, int32 ``[2^g - 1, g]``: row t - 1 holds the bits
    of t, least significant first (bit j goes with the group's j-th key bit)."""
    t = np.arange(1, 1 << grouping)[:, None]
    return ((t >> np.arange(grouping)[None, :]) & 1).astype(np.int32)


def bsk_bits(params: Params, lwe_key) -> jax.Array:
    """The bits the bootstrapping key's GGSWs encrypt, int32 ``[params.ggsw_count]``: the short key itself
    (grouping 1), or for each group of g key bits (the last padded with zeros) the indicators
    [bits = t] of the patterns t of :func:`patterns`, group-major."""
    g = params.grouping
    if g == 1:
        return jnp.asarray(lwe_key)
    s = jnp.pad(jnp.asarray(lwe_key), (0, params.groups * g - params.lwe_dim)).reshape(params.groups, g)
    return jnp.all(s[:, None, :] == patterns(g)[None], axis=-1).astype(I32).reshape(-1)


def _gen_bsk(ck: ClientKey, key, progress):
    params = ck.params
    tables = Tables(params)
    s_eval = _glwe_key_eval(ck, tables)
    count = params.ggsw_count
    per = params.bsk_bytes // count
    chunk = max(1, min(count, KEYGEN_CHUNK_BYTES // per))
    parts, key_bits = [], bsk_bits(params, ck.lwe_key)
    for i, start in enumerate(range(0, count, chunk)):
        bits = key_bits[start : start + chunk]
        if bits.shape[0] < chunk:  # one compiled shape: pad the last chunk
            bits = jnp.pad(bits, (0, chunk - bits.shape[0]))
        part = _bsk_chunk(crandom.fold_in(key, i), bits, s_eval, tables.q, tables.gvec, tables.plan, params=params)
        parts.append(part[: min(chunk, count - start)])
        report(progress, min(start + chunk, count), count, "bootstrapping key")
    return jnp.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]


@partial(jit, persist=True, static_argnames=("params",))
def _ksk_chunk(key, s_bits, lwe_key, *, params: Params):
    """KSK columns for long-key bits ``s_bits`` int32 [c]: int32 [n + 1, c l_ks]."""
    g, n = params.ks_gadget, params.lwe_dim
    c = s_bits.shape[0]
    ka, ke = crandom.split(key)
    a = crandom.random_bits(ka, (c, g.levels, n))  # uniform mod 2^32
    e = sample_noise(ke, (c, g.levels), params.lwe_sigma).astype(U32)
    dot = jnp.sum(a * lwe_key.astype(U32), axis=-1, dtype=U32)  # <a, s> mod 2^32 (wraps)
    shifts = np.array([KS_MODULUS_BITS - g.base_log * (j + 1) for j in range(g.levels)], dtype=np.uint32)
    msg = s_bits.astype(U32)[:, None] << shifts[None, :]
    b = msg + e - dot  # phase b + <a, s> = s_i 2^32 / B^(j+1) + e
    rows = jnp.concatenate([a, b[..., None]], axis=-1)  # [c, l, n + 1]
    return jax.lax.bitcast_convert_type(rows.reshape(c * g.levels, n + 1).T, I32)


def _gen_ksk(ck: ClientKey, key, progress):
    params = ck.params
    long_dim, row = params.long_dim, params.ks_gadget.levels * (params.lwe_dim + 1) * 4
    chunk = max(1, min(long_dim, KEYGEN_CHUNK_BYTES // row))
    parts, long_key = [], ck.long_key
    for i, start in enumerate(range(0, long_dim, chunk)):
        bits = long_key[start : start + chunk]
        if bits.shape[0] < chunk:
            bits = jnp.pad(bits, (0, chunk - bits.shape[0]))
        part = _ksk_chunk(crandom.fold_in(key, i), bits, ck.lwe_key, params=params)
        parts.append(part[:, : min(chunk, long_dim - start) * params.ks_gadget.levels])
        report(progress, min(start + chunk, long_dim), long_dim, "key-switching key")
    return jnp.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]


def _params_of(key, kind=(ClientKey, ServerKey)) -> Params:
    if not isinstance(key, kind):
        want = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise ParameterError(f"expected a tfhe {want}, got {type(key).__name__}")
    return key.params


def _check_ct(params: Params, ct) -> LWECiphertext:
    if not isinstance(ct, LWECiphertext):
        raise ParameterError(f"expected an LWECiphertext, got {type(ct).__name__}")
    if ct.moduli != params.moduli or ct.n != params.long_dim:
        raise BasisMismatchError(
            f"ciphertext (dimension {ct.n}, moduli {ct.moduli}) does not belong to these parameters "
            f"(dimension {params.long_dim}, moduli {params.moduli})"
        )
    return ct



def check_compatible(ck: ClientKey | None, sk: ServerKey | None) -> None:
    """Raise if the keys were made for different parameter sets (ParameterError) or are not one key pair
    (KeyMismatchError)."""
    if ck is not None and sk is not None:
        if ck.params != sk.params:
            raise ParameterError(f"client key ({ck.params!r}) and server key ({sk.params!r}) differ in parameters")
        check_key_ids("check_compatible", ck.key_id, sk.key_id)



__all__ = ["ClientKey", "PreparedKey", "ServerKey", "Tables", "bsk_bits", "check_compatible", "fourier_plan",
           "keygen", "ksk_bytes", "ksk_bytes_fit", "patterns", "prepare", "product_for",
           "sample_noise"]
