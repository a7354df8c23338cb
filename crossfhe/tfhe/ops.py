"""Multi-bit TFHE: keys, encryption, linear operations and programmable bootstrapping (key switch first).

Ciphertexts are :class:`crossfhe.core.lwe.LWECiphertext` of dimension k N over the GLWE modulus Q (the
long key: the coefficients of the GLWE secret), with phase b + <a, s> = m Delta + e, Delta =
round(Q / 2^(p+1)) (:mod:`crossfhe.tfhe.params`). Leading axes are batch axes: ``encrypt`` of an array of
messages gives a batch, and every operation here works on batches.

Programmable bootstrapping (Taurus Fig. 3, key switch first), :func:`pbs`:

1. round Q -> 2^32 (each residue vector composed by exact fixed point: ``gadget_digits_rns``);
2. key switch long -> short modulo 2^32: the l_ks signed digits of each a_i times the key-switching key,
   one int32 matrix product whose wrap-around is the reduction mod 2^32;
3. round 2^32 -> 2N' (N' = 2^nu N, ``params.acc_size``: N unless the parameters have an ``extension``);
4. blind rotation of the test vector by n CMux steps (:func:`crossfhe.core.fourier.blind_rotate`, external
   products through a float64 FFT, or :func:`crossfhe.core.ggsw.blind_rotate` through the exact NTT:
   ``kernel`` of :func:`pbs`): every item of the batch goes through step i together, so each
   bootstrapping-key GGSW is read once per step for the whole batch (Taurus's key reuse; on a CPU, once per
   chunk of :data:`CPU_BATCH_WORDS` accumulator words, which keeps a step in cache); with an extension nu
   the accumulator's 2^nu components of degree N share it too (:func:`crossfhe.core.ggsw.cmux_step`); with
   a grouping g > 1, n / g grouped steps instead (:func:`crossfhe.core.fourier.blind_rotate_grouped`), each
   reading the 2^g - 1 GGSWs of its group;
5. sample extraction: back to dimension k N over Q.

KS-dedup (Taurus §V): ``pbs_many(server_key, ct, [f, g, h])`` key-switches each input once and blind-rotates it
against all tables (the tables are one more batch axis of step 4).

Tables: a function f: Z_{2^p} -> Z_{2^p} given as an array of 2^p ints or a Python callable on ints
(:func:`lookup_table`); outputs are taken mod 2^p. A batch may also carry one table per input (an integer
array of shape ``batch_shape + (2^p,)``, :func:`per_input_tables`): each input's accumulator starts from
its own test vector, and the batch still shares every pass over the bootstrapping key.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, partial

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.core import fourier as F
from crossfhe.core import ggsw as G
from crossfhe.core.fourier import FourierPlan, ggsw_to_fourier
from crossfhe.core.keys import SecretHolder, check_key_ids, key_id
from crossfhe.core.lwe import LWECiphertext
from crossfhe.errors import BasisMismatchError, ParameterError
from crossfhe.kernels import cpu_native
from crossfhe.math import random as crandom
from crossfhe.math.decompose import Gadget, RNSGadgetPlan, gadget_digits_rns
from crossfhe.math.modular import (
    ModulusTable,
    add_mod,
    add_wide,
    barrett_mul,
    fusion_barrier,
    neg_mod,
    reduce_u64,
    sub_mod,
    sum_wide,
)
from crossfhe.math.rns import RNSBasis
from crossfhe.math.xla import jit
from crossfhe.ring.ntt import NTTPlan, intt, ntt, worker_pool
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

KERNELS = ("auto", "fft", "ntt", "native")
"""How the blind rotation computes its external products (``kernel=`` of :func:`pbs`): ``"fft"`` through a
float64 FFT (:mod:`crossfhe.core.fourier`; 4-5x faster than the NTT at P4 and P8 on a CPU; adds the
rounding variance ``params.var_fft_phase`` per product; the first step, on the test vector, still goes through
the exact NTT: :func:`_first_step`), ``"native"`` the same FFT blind rotation in the native CPU kernel
(:mod:`crossfhe.kernels.cpu_native`; grouped parameters, such as P4, P6 and P8, on a CPU, where a C compiler
is present: :func:`native_applies`), ``"ntt"`` exactly through the NTT of ``params.kernels``,
``"auto"`` (default) the FFT where ``params.fft_kernel`` (its rounding small against the decision noise, or
p_fail still below 2^-128; the noise model then counts it: every preset), natively where
:func:`native_applies`, the NTT elsewhere."""


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
@dataclass(frozen=True, eq=False, repr=False)
class ServerKey:
    """The evaluation keys: ``bsk`` uint32 ``[params.ggsw_count, (k+1) l, k+1, L, N]`` (GGSWs under the GLWE
    key, EVAL domain, of the short key's n bits, or with grouping g > 1 of the indicators of each group's
    2^g - 1 nonzero bit patterns, group-major: :func:`bsk_bits`) and ``ksk`` int32 ``[n + 1, k N l_ks]``
    (LWE encryptions mod 2^32 under the short key of s_i 2^32 / B^(j+1), one per column i l_ks + j, body in
    the last row: the key switch is a matrix-vector product with this matrix, which XLA:CPU runs 3x faster
    than with its transpose, 5.8 ms against 16.8 for P4's at batch 1, one CPU, and as fast from batch 4).
    The FFT kernel also keeps the bootstrapping key's Fourier form (complex128, as many bytes again), made
    by :func:`keygen` or on the first bootstrap after a load, and a batch of two inputs or more on a CPU the
    key-switching key's signed bytes (:func:`_ksk_bytes`, as many bytes again, made on first use);
    ``nbytes`` counts the key itself (what is saved and sent). ``key_id``: the key pair's identifier,
    :func:`~crossfhe.core.keys.key_id` of the key-switching key's body row (its client key and ciphertexts
    carry the same; operations refuse others)."""

    bsk: jax.Array
    ksk: jax.Array
    params: Params = _static()
    key_id: str | None = _static(default=None)

    @property
    def nbytes(self) -> int:
        return int(self.bsk.nbytes + self.ksk.nbytes)

    def __repr__(self) -> str:
        return f"tfhe.ServerKey({self.params.name or 'params'}, {self.nbytes / 2**20:.1f} MiB)"


def _key_of(seed) -> crandom.ChaChaKey:
    if isinstance(seed, crandom.ChaChaKey):
        return seed
    if seed is None:
        return crandom.seed_key(os.urandom(32))
    if isinstance(seed, (bytes, bytearray)):
        return crandom.seed_key(bytes(seed))
    raise ParameterError(f"seed must be None, bytes or a ChaChaKey, got {type(seed).__name__}")


def _noise(key, shape, sigma: float):
    """int32 noise of standard deviation sigma (module constant GAUSSIAN_MAX_SIGMA)."""
    if sigma <= GAUSSIAN_MAX_SIGMA:
        return crandom.discrete_gaussian(key, shape, sigma)
    bound = max(1, round((-1 + math.sqrt(1 + 12 * sigma * sigma)) / 2))
    if bound >= 2**30:
        raise ParameterError(f"noise sigma {sigma} too large for int32 samples")
    return (crandom.uniform_mod(key, shape, 2 * bound + 1).astype(I32) - I32(bound)).astype(I32)


def _binary(key, shape):
    return (crandom.random_bits(key, shape) & U32(1)).astype(I32)


class _Tables:
    """Host-side constants of a parameter set (cached per Params), passed to kernels as arguments."""

    _cache: dict = {}

    def __new__(cls, params: Params):
        hit = cls._cache.get(params)
        if hit is not None:
            return hit
        self = super().__new__(cls)
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
        cls._cache[params] = self
        return self


def keygen(params: Params, seed=None, *, progress: Callable[[str, float], None] | None = None):
    """(ClientKey, ServerKey) for ``params``. ``seed``: None (os.urandom), 32 bytes, or a ChaChaKey: the
    same seed gives the same keys. ``progress(stage, fraction)`` is called as the keys are built."""
    if not isinstance(params, Params):
        raise ParameterError(f"params must be tfhe.Params, got {type(params).__name__}")
    root = _key_of(seed)
    k_lwe, k_glwe, k_bsk, k_ksk = (crandom.fold_in(root, i) for i in range(4))
    lwe_key = _binary(k_lwe, (params.lwe_dim,))
    glwe_key = _binary(k_glwe, (params.glwe_dim, params.poly_size))
    ck = ClientKey(lwe_key, glwe_key, params)
    bsk = _gen_bsk(ck, k_bsk, progress)
    ksk = _gen_ksk(ck, k_ksk, progress)
    kid = key_id(ksk[-1])
    ck, sk = dataclasses.replace(ck, key_id=kid), ServerKey(bsk, ksk, params, kid)
    if params.fft_kernel:
        (_native_bsk if native_applies(params) else _fourier_bsk)(sk, progress)
    return ck, sk


@cache
def _fourier_plan(params: Params) -> FourierPlan:
    return FourierPlan.create(params.poly_size, params.moduli, params.pbs_gadget, params.glwe_dim)


def _derived(sk: ServerKey, name: str, make: Callable[[], object]):
    """A form of the key derived on the host (``make()``), made once per key object and kept on it: a cache,
    not a pytree field, so ServerKey stays frozen and ``nbytes`` counts what is saved and sent. Made under
    ``jax.ensure_compile_time_eval``: concrete arrays even when first needed inside a caller's jit."""
    hit = sk.__dict__.get(name)
    if hit is None:
        with jax.ensure_compile_time_eval():
            hit = make()
        object.__setattr__(sk, name, hit)
    return hit


def _fourier_bsk(sk: ServerKey, progress=None):
    """The bootstrapping key as the FFT kernel takes it: the first step's GGSWs as they are (that step runs
    through the exact NTT, :func:`_first_step`), and the others as complex128 ``[ggsw_count - 2^g + 1,
    (k+1) l, k+1, N/2]`` (:func:`crossfhe.core.fourier.ggsw_to_fourier`); made once per key object
    (:func:`_derived`)."""

    def make():
        params = sk.params
        first = (1 << params.grouping) - 1
        plan, n = _Tables(params).plan, params.ggsw_count
        chunk = max(1, min(n, KEYGEN_CHUNK_BYTES // (params.bsk_bytes // n)))
        parts = []
        for start in range(first, n, chunk):
            coeff = np.asarray(intt(sk.bsk[start : start + chunk], plan))
            parts.append(ggsw_to_fourier(coeff, params.moduli))
            if progress is not None:
                progress("bootstrapping key (Fourier form)", min(1.0, (start + chunk) / n))
        shape = (0, (params.glwe_dim + 1) * params.pbs_gadget.levels, params.glwe_dim + 1, params.poly_size // 2)
        with jax.enable_x64(True):
            rest = jnp.asarray(np.concatenate(parts) if parts else np.zeros(shape, np.complex128))
        return sk.bsk[:first], rest

    return _derived(sk, "_bsk_fourier", make)


def native_applies(params: Params) -> bool:
    """Whether ``kernel="auto"`` bootstraps these parameters through the native CPU kernel: the FFT kernel
    (``params.fft_kernel``), grouped key bits (g > 1: P4, P6 and P8 among the presets, with or without an
    extension), the default backend a CPU, and the kernel built (:func:`crossfhe.kernels.cpu_native.status`
    says why not where it is not)."""
    return params.fft_kernel and _native_shape(params) and _cpu_layout() and cpu_native.available()


def _native_shape(params: Params) -> bool:
    return params.grouping > 1 and (params.poly_size // 2) % cpu_native.BLOCK == 0


def _native_tables(params: Params) -> F.NativeTables:
    """The kernel's tables for these parameters, made once per loaded kernel (its slot order is read off it)."""
    return _native_tables_of(params, cpu_native.library())


@cache
def _native_tables_of(params: Params, library) -> F.NativeTables:
    return F.NativeTables.create(_fourier_plan(params))


def _native_bsk(sk: ServerKey, progress=None):
    """The bootstrapping key as the native kernel takes it: the first step's GGSWs as they are (NTT domain,
    :func:`_first_step`), and the others in the Fourier domain as :func:`crossfhe.core.fourier.native_key`
    lays them out, float64 ``[groups - 1, N/16, 2^g - 1, (k+1) l, k+1, 2, 8]`` on the host; made once per key
    object (:func:`_derived`), in chunks of whole groups."""

    def make():
        params = sk.params
        per = (1 << params.grouping) - 1
        plan, n, tables = _Tables(params).plan, params.ggsw_count, _native_tables(params)
        chunk = per * max(1, min(n // per, KEYGEN_CHUNK_BYTES // (params.bsk_bytes // n) // per))
        parts = []
        for start in range(per, n, chunk):
            coeff = np.asarray(intt(sk.bsk[start : start + chunk], plan))
            keys_f = ggsw_to_fourier(coeff, params.moduli)
            parts.append(F.native_key(keys_f.reshape((-1, per) + keys_f.shape[1:]), tables))
            if progress is not None:
                progress("bootstrapping key (Fourier form)", min(1.0, (start + chunk) / n))
        return sk.bsk[:per], np.concatenate(parts)

    # the layout follows the kernel's slot order: a kernel built otherwise (other flags, another CPU) gets its own
    return _derived(sk, f"_bsk_native_{_native_tables(sk.params).layout}", make)


def _glwe_key_eval(ck: ClientKey, tables: _Tables):
    res = crandom.to_residues(ck.glwe_key[:, None, :], tables.q)  # [k, L, N]
    return ntt(res, tables.plan)


@partial(jit, static_argnames=("params",))
def _bsk_chunk(key, bits, s_eval, q, gvec, plan, *, params: Params):
    """GGSW encryptions (EVAL) of ``bits`` int32 [c]: [c, (k+1) l, k+1, L, N]."""
    k, n_poly, levels = params.glwe_dim, params.poly_size, params.pbs_gadget.levels
    limbs, rows, c = len(params.moduli), (k + 1) * levels, bits.shape[0]
    ka, ke = crandom.split(key)
    a = crandom.uniform_mod(ka, (c, rows, k, limbs, n_poly), q)  # EVAL domain directly (uniform either way)
    e = _noise(ke, (c, rows, 1, n_poly), params.glwe_sigma)
    e_ev = ntt(crandom.to_residues(e, q), plan)  # [c, rows, L, N]
    mu, bits_q = _Tables(params).barrett
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
    tables = _Tables(params)
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
        if progress is not None:
            progress("bootstrapping key", min(1.0, (start + chunk) / count))
    return jnp.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]


@partial(jit, static_argnames=("params",))
def _ksk_chunk(key, s_bits, lwe_key, *, params: Params):
    """KSK columns for long-key bits ``s_bits`` int32 [c]: int32 [n + 1, c l_ks]."""
    g, n = params.ks_gadget, params.lwe_dim
    c = s_bits.shape[0]
    ka, ke = crandom.split(key)
    a = crandom.random_bits(ka, (c, g.levels, n))  # uniform mod 2^32
    e = _noise(ke, (c, g.levels), params.lwe_sigma).astype(U32)
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
        if progress is not None:
            progress("key-switching key", min(1.0, (start + chunk) / long_dim))
    return jnp.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]


# --------------------------------------------------------------------------------------------------
# Encryption
# --------------------------------------------------------------------------------------------------


def _check_messages(params: Params, m) -> np.ndarray:
    arr = np.asarray(m)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == bool):
        raise ParameterError(f"messages must be integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    bad = arr[(arr < 0) | (arr >= 2**params.message_bits)]
    if bad.size:
        raise ParameterError(f"message {int(bad.flat[0])} is out of range [0, 2^{params.message_bits})")
    return arr


@partial(jit, static_argnames=("params",))
def _encrypt(key, m, s_long, q, *, params: Params):
    """LWE under the long key: b = -<a, s> + e + m Delta; m int32 [B]."""
    limbs, dim = len(params.moduli), params.long_dim
    batch = m.shape[0]
    ka, ke = crandom.split(key)
    a = crandom.uniform_mod(ka, (batch, limbs, dim), q)
    e = _noise(ke, (batch, 1), params.glwe_sigma)
    dot = _dot_binary(a, s_long, params.moduli)  # [B, L]
    delta = np.array([params.delta % x for x in params.moduli], dtype=np.uint32)
    t = ModulusTable.create(params.moduli)
    md = barrett_mul(
        crandom.to_residues(m[:, None], q.reshape(-1)),
        delta,
        q.reshape(-1),
        t.barrett_mu.reshape(-1),
        t.bits.reshape(-1),
    )
    b = add_mod(sub_mod(crandom.to_residues(e, q.reshape(-1)), dot, q.reshape(-1)), md, q.reshape(-1))
    return b, a


def _dot_binary(a, s, moduli: tuple[int, ...]):
    """<a, s> mod q for a uint32 [..., L, D] residues and s int32 [D] in {0, 1}: exact for any D (sums of
    at most 2^16 terms, the limit of ``sum_wide``, then added in two words: D < 2^32 terms below 2^31)."""
    terms = jnp.where(s.astype(bool), a, U32(0))
    hi = lo = None
    for start in range(0, terms.shape[-1], 2**16):
        h, l = sum_wide(jnp.zeros_like(terms[..., :1]), terms[..., start : start + 2**16], axis=-1)
        hi, lo = (h, l) if hi is None else add_wide(hi, lo, h, l)
    t = ModulusTable.create(moduli)
    return reduce_u64(
        hi,
        lo,
        t.q.reshape(-1),
        t.barrett_mu.reshape(-1),
        t.bits.reshape(-1),
        t.mont_qinv.reshape(-1),
        t.mont_r2.reshape(-1),
    )


def encrypt(ck: ClientKey, m, seed=None) -> LWECiphertext:
    """Encrypt integer message(s) in [0, 2^p) under the long key; the batch shape is ``np.shape(m)``."""
    params = _params_of(ck, ClientKey)
    arr = _check_messages(params, m)
    tables = _Tables(params)
    flat = jnp.asarray(arr.reshape(-1), dtype=I32)
    b, a = _encrypt(_key_of(seed), flat, ck.long_key, tables.q, params=params)
    limbs = len(params.moduli)
    return LWECiphertext.create(
        b.reshape(arr.shape + (limbs,)), a.reshape(arr.shape + (limbs, params.long_dim)), params.moduli, ck.key_id
    )


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


@partial(jit, static_argnames=("moduli",))
def _phase(b, a, s, *, moduli):
    q = np.array(moduli, dtype=np.uint32)
    return add_mod(b, _dot_binary(a, s, moduli), q)


def phase(ck: ClientKey, ct: LWECiphertext) -> np.ndarray:
    """b + <a, s> mod Q as Python ints (object array of the batch shape): for noise measurement."""
    params = _params_of(ck, ClientKey)
    _check_ct(params, ct)
    check_key_ids("decrypt", ck.key_id, ct.key_id)
    res = np.asarray(_phase(ct.b, ct.a, ck.long_key, moduli=params.moduli)).astype(object)
    basis = _Tables(params).basis
    big_q = params.big_q
    out = sum(res[..., i] * ((basis.hat[i] * basis.hat_inv[i]) % big_q) for i in range(len(params.moduli)))
    return out % big_q


def decrypt(ck: ClientKey, ct: LWECiphertext) -> np.ndarray:
    """The messages: round(phase 2^(p+1) / Q) mod 2^p, int64 of the batch shape.

    A set padding bit (a result that went past 2^p, or below 0) wraps mod 2^p."""
    params = _params_of(ck, ClientKey)
    ph = phase(ck, ct)
    big_q, p = params.big_q, params.message_bits
    v = (ph * 2 ** (p + 1) + big_q // 2) // big_q
    return np.asarray(v % 2**p, dtype=np.int64)


def noise(ck: ClientKey, ct: LWECiphertext, m) -> np.ndarray:
    """The error of ct relative to Q (float64, centered): (phase - m Delta) / Q, for tests and the model."""
    params = _params_of(ck, ClientKey)
    ph = phase(ck, ct)
    big_q = params.big_q
    m = np.asarray(m, dtype=object) % 2 ** (params.message_bits + 1)
    e = (ph - m * params.delta) % big_q
    e = np.where(e > big_q // 2, e - big_q, e)
    return np.asarray([float(x) / big_q for x in np.ravel(e)]).reshape(np.shape(e))


# --------------------------------------------------------------------------------------------------
# Linear operations (no bootstrapping): exact mod Q, messages mod 2^(p+1)
# --------------------------------------------------------------------------------------------------


def _pair(x: LWECiphertext, y: LWECiphertext, what: str) -> str | None:
    """The key id x and y share (None: neither has one), after checking that they can be combined."""
    if not isinstance(x, LWECiphertext) or not isinstance(y, LWECiphertext):
        raise ParameterError("add/sub take two LWECiphertext")
    if x.moduli != y.moduli or x.n != y.n:
        raise BasisMismatchError(f"ciphertexts over different moduli or dimensions ({x!r}, {y!r})")
    return check_key_ids(what, x.key_id, y.key_id)


def _q_cols(moduli):
    q = np.array(moduli, dtype=np.uint32)
    return q, q.reshape(-1, 1)


def add(x: LWECiphertext, y: LWECiphertext) -> LWECiphertext:
    """Encrypts m_x + m_y (mod 2^(p+1): keep sums below 2^p for a later bootstrap). Noise variances add."""
    kid = _pair(x, y, "add")
    qb, qa = _q_cols(x.moduli)
    return LWECiphertext(add_mod(x.b, y.b, qb), add_mod(x.a, y.a, qa), x.moduli, kid)


def sub(x: LWECiphertext, y: LWECiphertext) -> LWECiphertext:
    """Encrypts m_x - m_y mod 2^(p+1); a negative result sets the padding bit (add 2^p first to avoid it)."""
    kid = _pair(x, y, "sub")
    qb, qa = _q_cols(x.moduli)
    return LWECiphertext(sub_mod(x.b, y.b, qb), sub_mod(x.a, y.a, qa), x.moduli, kid)


def negate(x: LWECiphertext) -> LWECiphertext:
    """Encrypts -m mod 2^(p+1) (sets the padding bit unless m = 0)."""
    qb, qa = _q_cols(x.moduli)
    return LWECiphertext(neg_mod(x.b, qb), neg_mod(x.a, qa), x.moduli, x.key_id)


def mul_const(x: LWECiphertext, c: int) -> LWECiphertext:
    """Encrypts c m (c a Python int, any sign); the noise variance is multiplied by c^2."""
    if isinstance(c, bool) or not isinstance(c, (int, np.integer)):
        raise ParameterError(f"mul_const takes a Python int, got {type(c).__name__}")
    t = ModulusTable.create(x.moduli)
    cr = np.array([int(c) % q for q in x.moduli], dtype=np.uint32)
    mu, bits = t.barrett_mu.reshape(-1), t.bits.reshape(-1)
    qb = t.q.reshape(-1)
    b = barrett_mul(x.b, cr, qb, mu, bits)
    a = barrett_mul(x.a, cr[:, None], t.q, t.barrett_mu, t.bits)
    return LWECiphertext(b, a, x.moduli, x.key_id)


def encode(params: Params, values) -> np.ndarray:
    """uint32 ``[*shape, L]``: the residues of (v mod 2^(p+1)) Delta mod Q for integer values v (any shape)."""
    if isinstance(values, int) and not isinstance(values, bool):
        values = values % 2 ** (params.message_bits + 1)  # any Python int, also beyond int64
    arr = np.asarray(values)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        raise ParameterError(f"values to encode must be integers, got dtype {arr.dtype}")
    v = arr.astype(np.int64) % 2 ** (params.message_bits + 1)
    q = np.array(params.moduli, dtype=np.int64)
    delta = np.array([params.delta % x for x in params.moduli], dtype=np.int64)
    return (v[..., None] * delta % q).astype(np.uint32)  # < 2^11 * 2^31: exact in int64


def add_const(params: Params, x: LWECiphertext, c) -> LWECiphertext:
    """Encrypts m + c (c an int, or an integer array broadcasting against x's batch shape; taken mod
    2^(p+1)); no noise is added."""
    if isinstance(c, bool):
        raise ParameterError("add_const takes integers, got a bool")
    _check_ct(params, x)
    qb, _ = _q_cols(x.moduli)
    return LWECiphertext(add_mod(x.b, jnp.asarray(encode(params, c)), qb), x.a, x.moduli, x.key_id)


def trivial(params: Params, m) -> LWECiphertext:
    """A noiseless, keyless encryption of m (a = 0): a public constant."""
    arr = _check_messages(params, m)
    b = encode(params, arr)
    a = np.zeros(arr.shape + (len(params.moduli), params.long_dim), dtype=np.uint32)
    return LWECiphertext.create(jnp.asarray(b), jnp.asarray(a), params.moduli)


# --------------------------------------------------------------------------------------------------
# Lookup tables and bootstrapping
# --------------------------------------------------------------------------------------------------


def lookup_table(params: Params, f) -> np.ndarray:
    """int64 ``[2^p]``: f(m) mod 2^p for m in [0, 2^p); f an array-like of 2^p ints or a callable on ints."""
    size = 2**params.message_bits
    if callable(f):
        vals = [f(m) for m in range(size)]
    else:
        vals = np.asarray(f)
        if vals.shape != (size,):
            raise ParameterError(
                f"a lookup table for {params.message_bits}-bit messages has {size} entries, got shape {vals.shape}"
            )
        vals = vals.tolist()
    bad = [v for v in vals if isinstance(v, bool) or not isinstance(v, (int, np.integer))]
    if bad:
        raise ParameterError(f"lookup table values must be integers, got {bad[0]!r} ({type(bad[0]).__name__})")
    return np.array([int(v) % size for v in vals], dtype=np.int64)


def per_input_tables(params: Params, tables, batch_shape: tuple[int, ...]) -> np.ndarray:
    """int64 ``batch_shape + [2^p]``: one lookup table per input (row i applies to ciphertext i), each entry
    reduced mod 2^p. ``tables``: an integer array of exactly that shape. ParameterError otherwise."""
    arr = np.asarray(tables)
    size = 2**params.message_bits
    want = tuple(batch_shape) + (size,)
    if arr.shape != want:
        raise ParameterError(
            f"per-input lookup tables for a batch of shape {tuple(batch_shape)} must have shape {want} (one table "
            f"of {size} entries per input), got {arr.shape}"
        )
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        raise ParameterError(f"lookup table values must be integers, got dtype {arr.dtype}")
    return arr.astype(np.int64) % size


def _test_vector(params: Params, table: np.ndarray) -> np.ndarray:
    """The test vector's residues uint32 [..., L, N'] of tables int64 [..., 2^p] (N' = 2^nu N, the
    accumulator's size): coefficient j holds f(m) Delta for the message box of j (boxes of N' / 2^p
    coefficients centered on m N' / 2^p), and -f(0) Delta on the last half box (which a message 0 with
    negative noise reaches through X^N' = -1)."""
    n, p = params.acc_size, params.message_bits
    box = n >> p
    j = np.arange(n)
    m = (j + box // 2) // box
    vals = np.where(m < 2**p, table[..., np.minimum(m, 2**p - 1)], table[..., :1])  # [..., N]
    sign = np.where(m < 2**p, 1, -1)
    q = np.array(params.moduli, dtype=np.int64)[:, None]
    delta = np.array([params.delta % x for x in params.moduli], dtype=np.int64)[:, None]
    # (sign f(m) mod q) (Delta mod q) < 2^31 * 2^31 fits int64: the residues of sign f(m) Delta mod Q
    return ((sign * vals)[..., None, :] % q * delta % q).astype(np.uint32)


@partial(jit, static_argnames=("params",))
def _keyswitch(b, a, ksk, ms_plan, *, params: Params):
    """Long LWE over Q (b [B, L], a [B, L, kN]) -> short LWE mod 2^32 -> mod 2N' (N' = 2^nu N): (b~ [B],
    a~ [B, n]) int32."""
    g = params.ks_gadget
    x = jnp.concatenate([a, b[..., None]], axis=-1)  # [B, L, kN + 1]
    d = gadget_digits_rns(x, ms_plan)  # [2, B, kN + 1]: round(x 2^32 / Q) in base 2^16
    v = (d[0].astype(U32) << 16) + d[1].astype(U32)  # mod 2^32
    va, vb = v[:, :-1], v[:, -1]
    # signed digits of the top b l bits of each a_i, rounded
    shift = KS_MODULUS_BITS - g.base_log * g.levels
    t = (va + U32((1 << shift) >> 1)) >> shift if shift else va
    # materialized: fused into the digits below, the rounding from the residues ran once per digit level
    # (P4, batch 32, one CPU: the digits' fusion took 11.4 ms of a 37 ms key switch)
    t = fusion_barrier(t, ms_plan.q)
    base, half = 1 << g.base_log, 1 << (g.base_log - 1)
    digits = []
    carry = jnp.zeros_like(t)
    for _ in range(g.levels):  # least significant first
        r = (t & U32(base - 1)) + carry
        t = t >> g.base_log
        carry = (r >= U32(half)).astype(U32)
        digits.append(r.astype(I32) - (carry.astype(I32) << g.base_log))
    dig = jnp.stack(digits[::-1], axis=-1)  # [B, kN, l] MSB first
    dig = dig.reshape(dig.shape[0], -1)  # [B, kN l]: row i l + j
    if ksk.dtype == jnp.int8:  # the key's signed bytes (_ksk_bytes): four int8 products, shifted and summed
        parts = jax.lax.dot_general(dig.astype(jnp.int8), ksk, (((1,), (1,)), ((), ())), preferred_element_type=I32)
        parts = jax.lax.bitcast_convert_type(parts, U32).reshape(dig.shape[0], 4, -1)  # [B, byte, n + 1]
        out = parts[:, 0] + (parts[:, 1] << 8) + (parts[:, 2] << 16) + (parts[:, 3] << 24)  # wraps mod 2^32
    else:
        out = jnp.matmul(ksk, dig.T, preferred_element_type=I32).T  # wraps mod 2^32
        out = jax.lax.bitcast_convert_type(out, U32)
    bb = out[:, -1] + vb
    aa = out[:, :-1]
    log2n = params.acc_size.bit_length()  # log2(2N')
    sh = KS_MODULUS_BITS - log2n
    rnd = U32(1 << (sh - 1))
    mask = U32(2 * params.acc_size - 1)
    return ((bb + rnd) >> sh & mask).astype(I32), ((aa + rnd) >> sh & mask).astype(I32)


def _initial_acc(b_t, tv, q, params: Params):
    """ACC_0 = X^(-b~) (0, ..., 0, TV) in 2^nu components, [T B, 2^nu, k+1, L, N]: the tables are one more
    batch axis (KS-dedup)."""
    n2 = 2 * params.acc_size
    k, nu = params.glwe_dim, params.extension
    tcount, batch = tv.shape[0], b_t.shape[0]
    comps = (1 << nu, len(params.moduli), params.poly_size)
    acc_body = jnp.broadcast_to(tv, (tcount, batch) + comps).reshape((tcount * batch,) + comps)
    acc_body = G.rotate_components(acc_body, jnp.tile((n2 - b_t) % n2, tcount), q)
    masks = jnp.zeros((tcount * batch, 1 << nu, k) + comps[1:], U32)
    return jnp.concatenate([masks, acc_body[:, :, None]], axis=2)


def _rotation_shifts(a_t, tcount: int, params: Params):
    n2 = 2 * params.acc_size
    return jnp.tile((n2 - a_t) % n2, (tcount, 1))  # X^(-a~_i): phase b~ + sum a~_i s_i


def _extract(acc, q, tcount: int, params: Params):
    ob, oa = G.sample_extract(acc[:, 0], q)
    limbs = len(params.moduli)
    return ob.reshape(tcount, -1, limbs), oa.reshape(tcount, -1, limbs, params.long_dim)


@partial(jit, static_argnames=("params", "unroll"))
def _bootstrap(b_t, a_t, tv, bsk, plan, gplan, mac, fourier, *, params: Params, unroll: int = 1):
    """Blind rotation + sample extraction. b_t int32 [B], a_t int32 [B, n] in [0, 2N'); tv uint32
    [T, 1 or B, 2^nu, L, N] (one per table, shared by the batch or one per input; its 2^nu components,
    N' = 2^nu N); bsk ``[params.ggsw_count, ...]``, the key of :func:`crossfhe.core.ggsw.blind_rotate` (fourier
    None) or of :func:`crossfhe.core.fourier.blind_rotate` (a FourierPlan, under x64), grouped by
    :func:`_rotate`; returns (b [T, B, L], a [T, B, L, kN])."""
    q, tcount, g = mac[0], tv.shape[0], params.grouping
    acc = _initial_acc(b_t, tv, q, params)
    shifts = _rotation_shifts(a_t, tcount, params)
    if fourier is not None:
        first, bsk = bsk
        acc = _first_step(acc, shifts[:, :g], first, plan, gplan, mac, grouping=g)
        shifts = shifts[:, g:]
    acc = _rotate(acc, shifts, bsk, plan, gplan, mac, fourier, unroll=unroll, grouping=g)
    return _extract(acc, q, tcount, params)


def _first_step(acc, shifts, keys, plan, gplan, mac, *, grouping: int):
    """The blind rotation's first step (its first g key bits, GGSWs ``keys`` in the NTT domain) through the
    exact NTT: the FFT kernel does all but this one. The accumulator is the test vector here, whose long
    constant runs make the FFT's rounding error meet the key coherently, 20-30x a later step's
    (:mod:`crossfhe.tfhe.params`)."""
    if grouping == 1:
        return G.cmux_step(acc, shifts[:, 0], keys[0], plan, gplan, mac)
    exps = _group_exponents(shifts, grouping, 2 * acc.shape[-1] * acc.shape[1])
    return G.group_step(acc, exps[:, 0], keys, plan, gplan, mac)


def _rotate(acc, shifts, bsk, plan, gplan, mac, fourier, *, unroll: int, grouping: int):
    """The blind rotation by ``shifts`` int32 [B, m] (m key bits, a multiple of g unless they end the key);
    bsk: the GGSWs of those bits (grouping 1) or of their groups' indicators (2^g - 1 per group)."""
    if grouping > 1:
        exps = _group_exponents(shifts, grouping, 2 * acc.shape[-1] * acc.shape[1])
        bsk = bsk.reshape((exps.shape[1], (1 << grouping) - 1) + bsk.shape[1:])
        if fourier is None:
            return G.blind_rotate_grouped(acc, exps, bsk, plan, gplan, mac, unroll=unroll)
        return F.blind_rotate_grouped(acc, exps, bsk, fourier, unroll=unroll)
    if fourier is None:
        return G.blind_rotate(acc, shifts, bsk, plan, gplan, mac, unroll=unroll)
    return F.blind_rotate(acc, shifts, bsk, fourier, unroll=unroll)


def _group_exponents(shifts, grouping: int, n2: int):
    """int32 [B, m] rotations, one per key bit, in [0, 2N') -> [B, ceil(m / g), 2^g - 1]: per group and
    nonzero pattern t, sum_j shifts_j t_j mod 2N' (the rotation the pattern calls for; padded bits: 0)."""
    m = shifts.shape[1]
    groups = -(-m // grouping)
    s = jnp.pad(shifts, ((0, 0), (0, groups * grouping - m))).reshape(shifts.shape[0], groups, grouping)
    return jnp.sum(s[:, :, None, :] * patterns(grouping)[None, None], axis=-1, dtype=I32) % n2


# The same computation in pieces, for progress reports: the blind rotation's steps run in chunks.
_start_jit = jit(_initial_acc, static_argnames=("params",))
_first_jit = jit(_first_step, static_argnames=("grouping",))
_rotate_chunk_jit = jit(_rotate, static_argnames=("unroll", "grouping"))
_extract_jit = jit(_extract, static_argnames=("tcount", "params"))

PROGRESS_CHUNKS = 20
"""With a ``progress`` callback, the blind rotation runs in this many chunks of steps (CMux steps, or group
steps with a grouping; at most two compiled chunk shapes), and the callback is called after each one."""


def _bootstrap_with_progress(b_t, a_t, tv, bsk, fourier, t: _Tables, params: Params, unroll: int, progress):
    """:func:`_bootstrap`, the same words, with ``progress("blind rotation", fraction)`` after each chunk."""
    q, tcount = t.mac[0], tv.shape[0]
    acc = _start_jit(b_t, tv, q, params=params)
    shifts = _rotation_shifts(a_t, tcount, params)
    g, n = params.grouping, params.groups  # n steps of g key bits each, 2^g - 1 GGSWs each (g = 1: one)
    per, done = (1 << g) - 1, 0
    if fourier is not None:  # the first step through the NTT (_first_step), the others from bsk's rest
        first, bsk = bsk
        acc = _first_jit(acc, shifts[:, :g], first, t.plan, t.gplan, t.mac, grouping=g)
        shifts, done = shifts[:, g:], 1
        if n == 1:
            progress("blind rotation", 1.0)
    size = -(-n // min(PROGRESS_CHUNKS, n))
    for start in range(0, n - done, size):
        stop = min(n - done, start + size)
        chunk_keys, chunk_shifts = bsk[start * per : stop * per], shifts[:, start * g : stop * g]
        args = (acc, chunk_shifts, chunk_keys, t.plan, t.gplan, t.mac, fourier)
        acc = _rotate_chunk_jit(*args, unroll=unroll, grouping=g)
        jax.block_until_ready(acc)
        progress("blind rotation", (stop + done) / n)
    return _extract_jit(acc, q, tcount=tcount, params=params)


KS_BYTES_FROM = 2
"""On a CPU, batches of at least this many inputs key-switch through the key's signed bytes (:func:`_ksk_bytes`):
four int8 x int8 -> int32 products in place of one int32 product, which XLA:CPU runs six times slower at
batch 2 than at batch 1 (one CPU, P4's [834, 14336] key, the product alone, ms, int32 against int8: batch 2
12.4 against 4.4, 8 15.8 against 8.3, 32 30.3 against 25.5, 64 49.5 against 44.4). One input stays with the
int32 matrix-vector product, at about the speed of reading the key (2.1 ms; the int8 one took 93)."""


def _ksk_bytes(sk: ServerKey) -> jax.Array:
    """The key-switching key as signed bytes, int8 ``[4 (n + 1), k N l_ks]``: row ``b (n + 1) + c`` holds byte
    b of row c, with k = sum_b 2^(8 b) s_b mod 2^32 and s_b in [-128, 128). Each product of a byte row
    and the digits sums k N l_ks terms of at most 128 B_ks / 2 (checked below), so it fits int32, and their
    shifted sum is the key's product mod 2^32. Made once per key object (:func:`_derived`; as many bytes as
    the key itself). A gadget whose byte products could overflow int32, or whose digits do not fit int8,
    gets the int32 key itself."""

    def make():
        g, rows = sk.params.ks_gadget, sk.ksk.shape[1]
        if rows * 128 * (1 << (g.base_log - 1)) >= 2**31 or g.base_log > 7:
            return sk.ksk
        k = np.asarray(sk.ksk).view(np.uint32).astype(np.int64)
        planes = []
        for _ in range(4):
            low = k & 255
            planes.append(np.where(low >= 128, low - 256, low).astype(np.int8))
            k = (k >> 8) + (low >= 128)  # the borrow of a negative byte
        return jnp.asarray(np.concatenate(planes, axis=0))

    return _derived(sk, "_ksk_int8", make)


def keyswitch(sk: ServerKey, ct: LWECiphertext):
    """Steps 1-3 of :func:`pbs`: (b~ int32 [...], a~ int32 [..., n]) in [0, 2N'), the short LWE the blind
    rotation takes. Exposed for noise tests and for callers that apply several tables themselves."""
    params = _params_of(sk, ServerKey)
    _check_ct(params, ct)
    check_key_ids("keyswitch", sk.key_id, ct.key_id)
    shape = ct.batch_shape
    flat_b = ct.b.reshape((-1, len(params.moduli)))
    flat_a = ct.a.reshape((-1, len(params.moduli), params.long_dim))
    ksk = sk.ksk
    if flat_b.shape[0] >= KS_BYTES_FROM and _cpu_layout() and not isinstance(ksk, jax.core.Tracer):
        ksk = _ksk_bytes(sk)  # (a key traced under a caller's jit keeps the int32 product)
    bt, at = _keyswitch(flat_b, flat_a, ksk, _Tables(params).ms_plan, params=params)
    return bt.reshape(shape), at.reshape(shape + (params.lwe_dim,))


def pbs(
    sk: ServerKey, ct: LWECiphertext, table, *, unroll: int = 1, progress=None, kernel: str = "auto"
) -> LWECiphertext:
    """Programmable bootstrapping of ct (any batch shape): an LWECiphertext of the same batch shape
    encrypting table(m), with fresh noise (variance ``params.var_pbs``). ``table``: an array of 2^p ints
    or a callable on ints (:func:`lookup_table`), applied to every input; or an integer array of shape
    ``ct.batch_shape + (2^p,)``, one table per input (:func:`per_input_tables`). Either way the whole
    batch shares each pass over the bootstrapping key (on a CPU, each chunk of :data:`CPU_BATCH_WORDS`).
    ``progress(stage, fraction)``, if given, is called as the blind rotation advances (:data:`PROGRESS_CHUNKS`
    times; a P10 bootstrap takes 15 to 20 s on one CPU); the result is the same either way. ``kernel``:
    ``"auto"``, ``"fft"`` or ``"ntt"`` (:data:`KERNELS`). A server key passed to ``jax.jit`` as an argument
    (traced) has no Fourier form there: ``"auto"`` then runs the NTT kernel, with a warning, and ``"fft"``
    raises ParameterError; a key the jitted function closes over keeps the FFT.
    """
    return pbs_many(sk, ct, [table], unroll=unroll, progress=progress, kernel=kernel)[0]


def pbs_many(
    sk: ServerKey, ct: LWECiphertext, tables, *, unroll: int = 1, progress=None, kernel: str = "auto"
) -> list[LWECiphertext]:
    """Several tables applied to the same input(s) with one key switch per input (KS-dedup, Taurus §V).

    Returns one LWECiphertext per table, each of ct's batch shape; equal to ``[pbs(sk, ct, f) for f in
    tables]`` (same key switch, so the same short ciphertext; through the NTT kernel the same outputs bit
    for bit, through the FFT the same up to its rounding, which may depend on the batch's shape: other
    words, the same message and noise model). The tables are one more batch axis of the blind rotation.
    Each entry is a table for every input or an array of per-input tables (as for :func:`pbs`).
    ``progress`` and ``kernel``: as for :func:`pbs`.
    """
    params = _params_of(sk, ServerKey)
    _check_ct(params, ct)
    check_key_ids("pbs", sk.key_id, ct.key_id)
    if kernel not in KERNELS:
        raise ParameterError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if callable(tables) or not isinstance(tables, (list, tuple)) or not tables:
        raise ParameterError("pbs_many takes a non-empty list of tables (use pbs for one table)")
    shape = ct.batch_shape
    per_input = [not callable(f) and np.ndim(f) > 1 for f in tables]
    batch = math.prod(shape) if any(per_input) else 1
    tvs = []
    for f, own in zip(tables, per_input, strict=True):
        if own:
            tv = _test_vector(params, per_input_tables(params, f, shape).reshape(-1, 2**params.message_bits))
        else:
            tv = _test_vector(params, lookup_table(params, f))[None]
        tvs.append(np.broadcast_to(tv, (batch,) + tv.shape[1:]))
    tv = np.stack(tvs)  # [T, 1 or B, L, N']
    nu = params.extension  # its 2^nu components (crossfhe.core.ggsw.split_components): [T, 1 or B, 2^nu, L, N]
    tv = np.moveaxis(tv.reshape(tv.shape[:-1] + (params.poly_size, 1 << nu)), -1, -3)
    if progress is not None and not callable(progress):
        raise ParameterError(f"progress must be a callable (stage, fraction) or None, got {type(progress).__name__}")
    traced_key = isinstance(sk.bsk, jax.core.Tracer)
    if traced_key and kernel in ("fft", "native"):
        raise ParameterError(
            f"the {kernel} kernel needs the bootstrapping key's Fourier form, made on the host once per key: pass "
            "the server key to jax.jit as a closed-over constant, not as an argument, or use kernel='ntt'"
        )
    if kernel == "native":
        _check_native(params, ct)
    if traced_key and kernel == "auto" and params.fft_kernel:
        warnings.warn(
            "server key traced under jit: the blind rotation runs through the exact NTT kernel, several times "
            "slower than the FFT one; close over the key (a constant of the jitted function) to get the FFT",
            stacklevel=3,
        )
        kernel = "ntt"
    t = _Tables(params)
    native = kernel == "native" or (
        kernel == "auto" and not traced_key and not isinstance(ct.b, jax.core.Tracer) and native_applies(params)
    )
    if native:
        with jax.enable_x64(True):
            return _bootstrap_native(sk, ct, tv, t, progress)
    bt, at = keyswitch(sk, ct)
    if kernel == "fft" or (kernel == "auto" and params.fft_kernel):
        # the FFT kernel's float64 and 64-bit integer arrays exist only under x64 (scoped, not global)
        keys, fourier, scope = _fourier_bsk(sk), _fourier_plan(params), jax.enable_x64(True)
    else:
        keys, fourier, scope = sk.bsk, None, contextlib.nullcontext()
    bt, at = bt.reshape(-1), at.reshape(-1, params.lwe_dim)
    with scope:
        if progress is None:
            parts = []
            shared = jnp.asarray(tv) if tv.shape[1] == 1 else None  # one table for all: sent to the device once
            for lo, hi, pad in _batch_chunks(params, len(tables), bt.shape[0]):
                tv_c = shared if shared is not None else jnp.asarray(_pad(tv[:, lo:hi], 1, pad))
                args = (_pad(bt[lo:hi], 0, pad), _pad(at[lo:hi], 0, pad), tv_c, keys)
                cb, ca = _bootstrap(*args, t.plan, t.gplan, t.mac, fourier, params=params, unroll=unroll)
                parts.append((cb[:, : hi - lo], ca[:, : hi - lo]))
            ob = jnp.concatenate([b for b, _ in parts], axis=1) if len(parts) > 1 else parts[0][0]
            oa = jnp.concatenate([a for _, a in parts], axis=1) if len(parts) > 1 else parts[0][1]
        else:
            args = (bt, at, jnp.asarray(tv), keys)
            ob, oa = _bootstrap_with_progress(*args, fourier, t, params, unroll, progress)
    limbs = len(params.moduli)
    return [
        LWECiphertext(ob[i].reshape(shape + (limbs,)), oa[i].reshape(shape + (limbs, params.long_dim)), params.moduli,
                      sk.key_id)
        for i in range(len(tables))
    ]


def _check_native(params: Params, ct: LWECiphertext) -> None:
    """Why ``kernel="native"`` cannot run here, as a ParameterError (or nothing)."""
    if isinstance(ct.b, jax.core.Tracer):
        raise ParameterError("the native kernel runs on concrete arrays: under jax.jit or vmap use kernel='fft'")
    if not F.supports(params.moduli, params.poly_size, params.pbs_gadget, params.glwe_dim):
        raise ParameterError(f"the native kernel is an FFT kernel, and {params!r} does not suit the FFT (Q >= 2^63 "
                             "or digits too wide): use kernel='ntt'")
    if not _native_shape(params):
        raise ParameterError(f"the native kernel takes grouped key bits (grouping > 1); {params!r} has grouping "
                             f"{params.grouping}: use kernel='fft'")
    if not cpu_native.available():
        raise ParameterError(f"the native kernel is not available ({cpu_native.status()}): use kernel='fft'")


@partial(jit, static_argnames=("params",))
def _native_start(b, a, ksk, ms_plan, tv, first, plan, gplan, mac, fourier, *, params: Params):
    """Everything before the native kernel's steps, in one program (traced under x64): the key switch of the
    ciphertexts b ``[..., L]``, a ``[..., L, kN]``, the test vectors rotated, the first step through the NTT
    (:func:`_first_step`), the accumulator composed to uint64 words ``[T B, 2^nu, k+1, N]``, and the other
    steps' exponents through the component move, src and power int32 ``[T B, groups - 1, 2^nu, 2^g - 1]``."""
    limbs = len(params.moduli)
    b_t, a_t = _keyswitch(b.reshape((-1, limbs)), a.reshape((-1, limbs, params.long_dim)), ksk, ms_plan, params=params)
    q, tcount, g = mac[0], tv.shape[0], params.grouping
    acc = _initial_acc(b_t, tv, q, params)
    shifts = _rotation_shifts(a_t, tcount, params)
    acc = _first_step(acc, shifts[:, :g], first, plan, gplan, mac, grouping=g)
    exps = _group_exponents(shifts[:, g:], g, 2 * acc.shape[-1] * acc.shape[1])
    src, power = (jnp.swapaxes(v, -1, -2) for v in G.component_move(exps, acc.shape[1]))  # [T B, G, 2^nu, T]
    return F.compose(acc, fourier), src, power


@partial(jit, static_argnames=("tcount", "shape", "params"))
def _native_finish(words, fourier, q, *, tcount: int, shape: tuple, params: Params):
    """The words back to residues and the samples extracted: per table, (b ``shape + [L]``, a ``shape + [L,
    kN]``)."""
    ob, oa = _extract(F.decompose(words, fourier), q, tcount, params)
    limbs = len(params.moduli)
    return tuple((ob[i].reshape(shape + (limbs,)), oa[i].reshape(shape + (limbs, params.long_dim)))
                 for i in range(tcount))


def _native_rotate(words, src, power, key, fourier, tables) -> None:
    """The native kernel on the whole batch; where the process may use two CPUs (the NTT's worker thread,
    :func:`crossfhe.ring.ntt.worker_pool`), a batch of two or more runs as two halves at once (each item's
    words are the same either way: the kernel computes items independently)."""
    pool, batch = worker_pool(), words.shape[0]
    if pool is None or batch < 2:
        F.blind_rotate_grouped_native(words, src, power, key, fourier, tables)
        return
    half = (batch + 1) // 2  # axis-0 slices of C-contiguous arrays: contiguous views, written in place
    second = pool.submit(F.blind_rotate_grouped_native, words[half:], src[half:], power[half:], key, fourier, tables)
    F.blind_rotate_grouped_native(words[:half], src[:half], power[:half], key, fourier, tables)
    second.result()


def _bootstrap_native(sk: ServerKey, ct: LWECiphertext, tv: np.ndarray, t: _Tables, progress) -> list[LWECiphertext]:
    """:func:`pbs_many` with the blind rotation after its first step in the native kernel: one program before
    (key switch to first step), the kernel on host arrays (the whole batch in one call: it reads each step's
    keys once for all of it; with ``progress``, in :data:`PROGRESS_CHUNKS` calls), one program after, no eager
    reshapes between (P4, batch 1, one CPU: the two programs took 4.1 of 18.0 ms, the key switch 3.1 of them).
    Traced under x64."""
    params = sk.params
    first, key = _native_bsk(sk)
    fourier, tables = _fourier_plan(params), _native_tables(params)
    ksk = _ksk_bytes(sk) if math.prod(ct.batch_shape) >= KS_BYTES_FROM else sk.ksk  # as keyswitch() on a CPU
    words, src, power = _native_start(ct.b, ct.a, ksk, t.ms_plan, tv, first, t.plan, t.gplan, t.mac, fourier,
                                      params=params)
    words = np.array(words)  # the kernel writes the words in place
    src, power = np.ascontiguousarray(src, dtype=np.int32), np.ascontiguousarray(power, dtype=np.int32)
    steps = power.shape[1]
    size = steps if progress is None else -(-steps // min(PROGRESS_CHUNKS, max(steps, 1)))
    if progress is not None:
        progress("blind rotation", 1 / params.groups)
    for lo in range(0, steps, max(size, 1)):
        hi = min(steps, lo + size)
        part = (src, power) if (lo, hi) == (0, steps) else (np.ascontiguousarray(v[:, lo:hi]) for v in (src, power))
        _native_rotate(words, *part, key[lo:hi], fourier, tables)
        if progress is not None:
            progress("blind rotation", (hi + 1) / params.groups)
    outs = _native_finish(words, fourier, t.mac[0], tcount=tv.shape[0], shape=ct.batch_shape, params=params)
    return [LWECiphertext(b, a, params.moduli, sk.key_id) for b, a in outs]


CPU_BATCH_WORDS = 2**16
"""On a CPU, a batch is blind-rotated in chunks of at most this many accumulator coefficients (items x tables
x 2^nu x (k+1) x N), one after the other, so that a step's arrays stay in cache. Measured on the dev box (one
CPU, per bootstrap): P4 batch 8 (2^15 words) 44.6 ms against 62.7 at batch 32 (2^17) in one piece, P6 batch
1 (2^14) 350 ms against 376 at batch 8 (2^17), while P2 still gained at batch 32 (2^16.3: 29.8 ms against
36.2 at batch 8). Each chunk reads the bootstrapping key once per step; on an accelerator, where that read is
what costs, the batch is not split."""


def _cpu_layout() -> bool:
    """Whether the CPU-tuned layouts apply (the batch split of :data:`CPU_BATCH_WORDS`, the key switch
    through the key's bytes from :data:`KS_BYTES_FROM` inputs): the default backend is a CPU. Both give the
    same words as the plain layout; tests take them on any device by replacing this function."""
    return jax.default_backend() == "cpu"


def _batch_chunks(params: Params, tables: int, batch: int):
    """(start, stop, padded size) of the batch chunks (:data:`CPU_BATCH_WORDS`): equal sizes, the last one
    padded so that every chunk has the same compiled shape."""
    if not _cpu_layout():
        return [(0, batch, batch)]
    per_item = tables * (params.glwe_dim + 1) * params.acc_size
    most = max(1, CPU_BATCH_WORDS // per_item)
    count = -(-batch // most)
    size = -(-batch // count)
    return [(lo, min(batch, lo + size), size) for lo in range(0, batch, size)]


def _pad(x, axis: int, size: int):
    """x padded with zeros along ``axis`` to ``size`` (a zero ciphertext is a valid input)."""
    extra = size - x.shape[axis]
    if extra == 0:
        return x
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, extra)
    return jnp.pad(x, widths) if isinstance(x, jax.Array) else np.pad(x, widths)


def check_compatible(ck: ClientKey | None, sk: ServerKey | None) -> None:
    """Raise if the keys were made for different parameter sets (ParameterError) or are not one key pair
    (KeyMismatchError)."""
    if ck is not None and sk is not None:
        if ck.params != sk.params:
            raise ParameterError(f"client key ({ck.params!r}) and server key ({sk.params!r}) differ in parameters")
        check_key_ids("check_compatible", ck.key_id, sk.key_id)


__all__ = [
    "ClientKey",
    "ServerKey",
    "add",
    "add_const",
    "bsk_bits",
    "check_compatible",
    "decrypt",
    "encode",
    "encrypt",
    "keygen",
    "keyswitch",
    "lookup_table",
    "mul_const",
    "negate",
    "noise",
    "pbs",
    "pbs_many",
    "patterns",
    "per_input_tables",
    "phase",
    "sub",
    "trivial",
]
