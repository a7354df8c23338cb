"""Multi-bit TFHE: keys, encryption, linear operations and programmable bootstrapping (key switch first).

Ciphertexts are :class:`crossfhe.core.lwe.LWECiphertext` of dimension k N over the GLWE modulus Q (the
long key: the coefficients of the GLWE secret), with phase b + <a, s> = m Delta + e, Delta =
round(Q / 2^(p+1)) (:mod:`crossfhe.tfhe.params`). Leading axes are batch axes: ``encrypt`` of an array of
messages gives a batch, and every operation here works on batches.

Programmable bootstrapping (Taurus Fig. 3, key switch first), :func:`pbs`:

1. round Q -> 2^32 (each residue vector composed by exact fixed point: ``gadget_digits_rns``);
2. key switch long -> short modulo 2^32: the l_ks signed digits of each a_i times the key-switching key,
   one int32 matrix product whose wrap-around is the reduction mod 2^32 (on the ``NATIVE`` and ``MATRIX``
   kernel sets, from :data:`KS_BYTES_FROM` inputs, four int8 products with the key's signed bytes: the same
   words);
3. round 2^32 -> 2N' (N' = 2^nu N, ``params.acc_size``: N unless the parameters have an ``extension``);
4. blind rotation of the test vector by n CMux steps (:func:`crossfhe.core.fourier.blind_rotate`, external
   products through a float64 FFT, or :func:`crossfhe.core.ggsw.blind_rotate` through the exact NTT:
   ``kernel`` of :func:`pbs`): every item of the batch goes through step i together, so each
   bootstrapping-key GGSW is read once per step for the whole batch (Taurus's key reuse; on the ``NATIVE``
   kernel set, once per chunk of :data:`CPU_BATCH_WORDS` accumulator words, which keeps a step in a CPU's
   cache); with an extension nu the accumulator's 2^nu components of degree N share it too
   (:func:`crossfhe.core.ggsw.cmux_step`); with a grouping g > 1, n / g grouped steps instead
   (:func:`crossfhe.core.fourier.blind_rotate_grouped`, on the ``NATIVE`` kernel set the C kernel
   :func:`crossfhe.core.fourier.blind_rotate_grouped_native`), each reading the 2^g - 1 GGSWs of its group;
5. sample extraction: back to dimension k N over Q.

KS-dedup (Taurus §V): ``pbs_many(server_key, ct, [f, g, h])`` key-switches each input once and blind-rotates it
against all tables (the tables are one more batch axis of step 4).

Tables: a function f: Z_{2^p} -> Z_{2^p} given as an array of 2^p ints or a Python callable on ints
(:func:`lookup_table`); outputs are taken mod 2^p. A batch may also carry one table per input (an integer
array of shape ``batch_shape + (2^p,)``, :func:`per_input_tables`): each input's accumulator starts from
its own test vector, and the batch still shares every pass over the bootstrapping key.

Programs. Every operation on ciphertexts is one call of a cached compiled program (its Python work checks the
arguments and builds small host values: bounded, independent of N), and the same program runs inside a caller's
``jax.jit`` or ``vmap``. Its route is a value: the kernel set the server key was prepared for
(``params.kernels`` resolved once, :func:`prepare`) and the ``kernel`` argument; nothing looks at tracers,
devices or the backend.
"""

from __future__ import annotations

import contextlib
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
from crossfhe.core.fourier import FourierPlan, ggsw_to_fourier
from crossfhe.core.keys import SecretHolder, check_key_ids, key_id
from crossfhe.core.lwe import LWECiphertext
from crossfhe.errors import BasisMismatchError, ParameterError
from crossfhe.kernels import MATRIX, NATIVE, KernelSet, cpu_native
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
from crossfhe.math.xla import jit, plan_cache, to_device
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

KERNELS = ("auto", "fft", "ntt", "native")
"""How the blind rotation computes its external products (``kernel=`` of :func:`pbs`), an explicit value:
``"fft"`` through a float64 FFT (:mod:`crossfhe.core.fourier`; adds the rounding variance
``params.var_fft_phase`` per product; the first step, on the test vector, still goes through the exact NTT:
:func:`_first_step`), with the server key's Fourier form (made by :func:`prepare`); on the ``NATIVE`` kernel set
and grouped parameters (g > 1) the FFT blind rotation is the native CPU kernel
(:mod:`crossfhe.kernels.cpu_native`), elsewhere the XLA one. ``"native"``: ``"fft"``, refused unless it is the
native kernel (a key prepared on the ``NATIVE`` set, grouped parameters). ``"ntt"``: exactly through the NTT of
the key's kernel set. ``"auto"`` (default): ``"fft"`` where ``params.fft_kernel`` (its rounding small against
the decision noise, or p_fail still below 2^-128; the noise model then counts it: every preset), else
``"ntt"``."""

KS_BYTES_FROM = 2
"""On the ``NATIVE`` and ``MATRIX`` kernel sets, batches of at least this many inputs key-switch through the key's
signed bytes (:func:`_ksk_bytes`, four int8 x int8 -> int32 products; the same words as the int32 product)."""

CPU_BATCH_WORDS = 2**16
"""On the ``NATIVE`` kernel set (a CPU), the XLA blind rotations (``"ntt"``, and ``"fft"`` without grouping) run
the batch in chunks of at most this many accumulator coefficients (items x tables x 2^nu x (k+1) x N), one after
the other inside the program, so that a step's arrays stay in cache; the same words as one piece. Elsewhere the
batch is not split."""

PROGRESS_CHUNKS = 20
"""With a ``progress`` callback, the blind rotation runs in this many chunks of steps (CMux steps, or group
steps with a grouping; at most two compiled chunk shapes), and the callback is called after each one."""


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
    """The forms of a server key its kernels read, made once from the key on the host (:func:`prepare`) and
    carried with it as pytree leaves (so a key passed to ``jax.jit`` as an argument keeps them).

    ``fourier_key``: the bootstrapping key after its first step's 2^g - 1 GGSWs (that step runs through the exact
    NTT, :func:`_first_step`) in the Fourier domain: complex128 ``[ggsw_count - 2^g + 1, (k+1) l, k+1, N/2]``
    (:func:`crossfhe.core.fourier.ggsw_to_fourier`, the XLA FFT kernel), or for the native kernel float64
    ``[groups - 1, N/16, 2^g - 1, (k+1) l, k+1, 2, 8]`` (:func:`crossfhe.core.fourier.native_key`); ``fourier``:
    the :class:`~crossfhe.core.fourier.FourierPlan` (device arrays); ``native``: the native kernel's
    :class:`~crossfhe.core.fourier.NativeTables`; all None without the FFT. ``ksk_bytes``: the key-switching key's
    signed bytes int8 ``[4 (n + 1), k N l_ks]`` (:func:`_ksk_bytes`) on the ``NATIVE`` and ``MATRIX`` sets, else
    None. Static: ``kernels``, the resolved kernel set."""

    fourier_key: jax.Array | None
    fourier: FourierPlan | None
    native: F.NativeTables | None
    ksk_bytes: jax.Array | None
    kernels: KernelSet = _static()


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False, repr=False)
class ServerKey:
    """The evaluation keys: ``bsk`` uint32 ``[params.ggsw_count, (k+1) l, k+1, L, N]`` (GGSWs under the GLWE
    key, EVAL domain, of the short key's n bits, or with grouping g > 1 of the indicators of each group's
    2^g - 1 nonzero bit patterns, group-major: :func:`bsk_bits`) and ``ksk`` int32 ``[n + 1, k N l_ks]``
    (LWE encryptions mod 2^32 under the short key of s_i 2^32 / B^(j+1), one per column i l_ks + j, body in
    the last row: the key switch is a matrix-vector product with this matrix). ``prepared``: the forms the
    kernels read (:class:`PreparedKey`: the Fourier form of the bootstrapping key, as many bytes again, and on
    some kernel sets the key-switching key's bytes), made by :func:`keygen`, or by :func:`prepare` on first use
    after a load; ``nbytes`` counts the key itself (what is saved and sent). ``key_id``: the key pair's
    identifier, :func:`~crossfhe.core.keys.key_id` of the key-switching key's body row (its client key and
    ciphertexts carry the same; operations refuse others)."""

    bsk: jax.Array
    ksk: jax.Array
    params: Params = _static()
    key_id: str | None = _static(default=None)
    prepared: PreparedKey | None = None

    @property
    def nbytes(self) -> int:
        return int(self.bsk.nbytes + self.ksk.nbytes)

    def __getstate__(self):
        # The prepared forms stay behind: JAX restores arrays in its default precision, and a complex128 Fourier key
        # unpickled as complex64 bootstrapped to wrong results. They are made again on first use (prepare).
        state = dict(self.__dict__)
        state["prepared"] = None
        return state

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
    """Host-side constants of a parameter set (cached per Params; made outside any trace), passed to kernels as
    arguments."""

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


def keygen(params: Params, seed=None, *, progress=None):
    """(ClientKey, ServerKey) for ``params``. ``seed``: None (os.urandom), 32 bytes, or a ChaChaKey: the
    same seed gives the same keys. ``progress``: :mod:`crossfhe.progress` (stages: the bootstrapping key, the
    key-switching key, the Fourier form; default silent). The server
    key comes prepared (:func:`prepare`) for the kernel set ``params.kernels`` resolves to; asking for ``NATIVE``
    where the native kernels cannot be built raises RuntimeError saying why."""
    if not isinstance(params, Params):
        raise ParameterError(f"params must be tfhe.Params, got {type(params).__name__}")
    progress = progress_callback(progress)
    root = _key_of(seed)
    k_lwe, k_glwe, k_bsk, k_ksk = (crandom.fold_in(root, i) for i in range(4))
    lwe_key = _binary(k_lwe, (params.lwe_dim,))
    glwe_key = _binary(k_glwe, (params.glwe_dim, params.poly_size))
    ck = ClientKey(lwe_key, glwe_key, params)
    bsk = _gen_bsk(ck, k_bsk, progress)
    ksk = _gen_ksk(ck, k_ksk, progress)
    kid = key_id(ksk[-1])
    ck, sk = dataclasses.replace(ck, key_id=kid), ServerKey(bsk, ksk, params, kid)
    return ck, prepare(sk, progress=progress)


@cache
def _fourier_plan(params: Params) -> FourierPlan:
    return FourierPlan.create(params.poly_size, params.moduli, params.pbs_gadget, params.glwe_dim)


def prepare(sk: ServerKey, *, fourier: bool | None = None, progress=None) -> ServerKey:
    """The server key with its :class:`PreparedKey` (``sk.prepared``), made once per key object on the host and
    kept on it: :func:`keygen` does it; a key built from its arrays (a load) gets it on its first use, or from this
    call. The kernel set is ``params.kernels`` resolved (:meth:`~crossfhe.kernels.KernelSet.resolve`, once
    per process); the Fourier form is made where ``params.fft_kernel`` (``fourier=True``: also elsewhere, for
    ``kernel="fft"``). Inside a caller's ``jax.jit`` a key closed over is prepared there (its arrays are
    concrete); a key passed as an argument must have been prepared before (ParameterError otherwise)."""
    if not isinstance(sk, ServerKey):
        raise ParameterError(f"expected a tfhe ServerKey, got {type(sk).__name__}")
    progress = progress_callback(progress)
    want = sk.params.fft_kernel if fourier is None else bool(fourier)
    have = sk.prepared
    if have is not None and (have.fourier_key is not None or not want):
        return sk
    try:
        with jax.ensure_compile_time_eval():
            made = _make_prepared(sk, want, progress)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError) as e:
        raise ParameterError(
            "the server key's prepared forms (its Fourier form for the FFT kernel) are made from the key on the "
            "host: call tfhe.ops.prepare(sk) before passing the key to jax.jit or vmap as an argument (keygen's "
            "keys come prepared), or close over the key"
        ) from e
    object.__setattr__(sk, "prepared", made)
    return sk


def _make_prepared(sk: ServerKey, fourier: bool, progress) -> PreparedKey:
    params = sk.params
    kernels = params.kernels.resolve()
    ksk_bytes = _ksk_bytes(params, sk.ksk) if kernels in (NATIVE, MATRIX) else None
    if not fourier:
        return PreparedKey(None, None, None, ksk_bytes, kernels)
    plan = _fourier_plan(params)
    native = kernels.native and params.grouping > 1
    if native and params.kernels.native:  # asked for by name: say why it cannot be had
        cpu_native.NATIVE.require("the NATIVE kernel set's TFHE blind rotation")
    native = native and cpu_native.available()
    tables = F.NativeTables.create(plan) if native else None
    per = (1 << params.grouping) - 1
    tplan, n = _Tables(params).plan, params.ggsw_count
    chunk = per * max(1, min(n // per, KEYGEN_CHUNK_BYTES // (params.bsk_bytes // n) // per))
    parts = []
    for start in range(per, n, chunk):
        keys_f = ggsw_to_fourier(np.asarray(intt(sk.bsk[start : start + chunk], tplan)), params.moduli)
        if native:
            keys_f = F.native_key(keys_f.reshape((-1, per) + keys_f.shape[1:]), tables)
        parts.append(keys_f)
        report(progress, min(start + chunk, n), n, "bootstrapping key (Fourier form)")
    if not parts:  # one group (or one key bit): the first step is the whole rotation
        k1, rows, h = params.glwe_dim + 1, (params.glwe_dim + 1) * params.pbs_gadget.levels, params.poly_size // 2
        if native:
            parts.append(np.zeros((0, h // cpu_native.BLOCK, per, rows, k1, 2, cpu_native.BLOCK)))
        else:
            parts.append(np.zeros((0, rows, k1, h), np.complex128))
    with jax.enable_x64(True):
        key = jnp.asarray(np.concatenate(parts))
        fplan = jax.tree_util.tree_map(jnp.asarray, plan)
    return PreparedKey(key, fplan, tables, ksk_bytes, kernels)


def _ksk_bytes(params: Params, ksk) -> jax.Array | None:
    """The key-switching key as signed bytes, int8 ``[4 (n + 1), k N l_ks]``: row ``b (n + 1) + c`` holds byte
    b of row c, with k = sum_b 2^(8 b) s_b mod 2^32 and s_b in [-128, 128). Each product of a byte row
    and the digits sums k N l_ks terms of at most 128 B_ks / 2 (checked below), so it fits int32, and their
    shifted sum is the key's product mod 2^32. None for a gadget whose byte products could overflow int32, or
    whose digits do not fit int8."""
    g, rows = params.ks_gadget, ksk.shape[1]
    if rows * 128 * (1 << (g.base_log - 1)) >= 2**31 or g.base_log > 7:
        return None
    k = np.asarray(ksk).view(np.uint32).astype(np.int64)
    planes = []
    for _ in range(4):
        low = k & 255
        planes.append(np.where(low >= 128, low - 256, low).astype(np.int8))
        k = (k >> 8) + (low >= 128)  # the borrow of a negative byte
    return jnp.asarray(np.concatenate(planes, axis=0))


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
        report(progress, min(start + chunk, count), count, "bootstrapping key")
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
        report(progress, min(start + chunk, long_dim), long_dim, "key-switching key")
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
    """LWE under the long key: b = -<a, s> + e + m Delta; m int32 of any batch shape: (b [*shape, L], a [*shape,
    L, kN])."""
    limbs, dim = len(params.moduli), params.long_dim
    shape = m.shape
    m = m.reshape(-1)
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
    return b.reshape(shape + (limbs,)), a.reshape(shape + (limbs, dim))


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
    b, a = _encrypt(_key_of(seed), arr.astype(np.int32), ck.long_key, _Tables(params).q, params=params)
    return LWECiphertext(b, a, params.moduli, ck.key_id)


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
# Linear operations (no bootstrapping): exact mod Q, messages mod 2^(p+1); one program each
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


@partial(jax.jit, static_argnames=("moduli", "op"))
def _linear(xb, xa, yb, ya, *, moduli, op: str):
    """add_mod / sub_mod of two ciphertexts' (b, a), or neg_mod of the first (op "add", "sub", "neg")."""
    qb, qa = _q_cols(moduli)
    if op == "neg":
        return neg_mod(xb, qb), neg_mod(xa, qa)
    f = add_mod if op == "add" else sub_mod
    return f(xb, yb, qb), f(xa, ya, qa)


def add(x: LWECiphertext, y: LWECiphertext) -> LWECiphertext:
    """Encrypts m_x + m_y (mod 2^(p+1): keep sums below 2^p for a later bootstrap). Noise variances add."""
    kid = _pair(x, y, "add")
    return LWECiphertext(*_linear(x.b, x.a, y.b, y.a, moduli=x.moduli, op="add"), x.moduli, kid)


def sub(x: LWECiphertext, y: LWECiphertext) -> LWECiphertext:
    """Encrypts m_x - m_y mod 2^(p+1); a negative result sets the padding bit (add 2^p first to avoid it)."""
    kid = _pair(x, y, "sub")
    return LWECiphertext(*_linear(x.b, x.a, y.b, y.a, moduli=x.moduli, op="sub"), x.moduli, kid)


def negate(x: LWECiphertext) -> LWECiphertext:
    """Encrypts -m mod 2^(p+1) (sets the padding bit unless m = 0)."""
    return LWECiphertext(*_linear(x.b, x.a, None, None, moduli=x.moduli, op="neg"), x.moduli, x.key_id)


@partial(jax.jit, static_argnames=("moduli",))
def _mul_const(xb, xa, cr, *, moduli):
    t = ModulusTable.create(moduli)
    b = barrett_mul(xb, cr, t.q.reshape(-1), t.barrett_mu.reshape(-1), t.bits.reshape(-1))
    a = barrett_mul(xa, cr[:, None], t.q, t.barrett_mu, t.bits)
    return b, a


def mul_const(x: LWECiphertext, c: int) -> LWECiphertext:
    """Encrypts c m (c a Python int, any sign); the noise variance is multiplied by c^2."""
    if isinstance(c, bool) or not isinstance(c, (int, np.integer)):
        raise ParameterError(f"mul_const takes a Python int, got {type(c).__name__}")
    cr = np.array([int(c) % q for q in x.moduli], dtype=np.uint32)
    return LWECiphertext(*_mul_const(x.b, x.a, cr, moduli=x.moduli), x.moduli, x.key_id)


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


@partial(jax.jit, static_argnames=("moduli",))
def _add_const(xb, c, *, moduli):
    qb, _ = _q_cols(moduli)
    return add_mod(xb, c, qb)


def add_const(params: Params, x: LWECiphertext, c) -> LWECiphertext:
    """Encrypts m + c (c an int, or an integer array broadcasting against x's batch shape; taken mod
    2^(p+1)); no noise is added."""
    if isinstance(c, bool):
        raise ParameterError("add_const takes integers, got a bool")
    _check_ct(params, x)
    return LWECiphertext(_add_const(x.b, encode(params, c), moduli=x.moduli), x.a, x.moduli, x.key_id)


@partial(jax.jit, static_argnames=("dim",))
def _trivial(b, *, dim: int):
    return b, jnp.zeros(b.shape + (dim,), U32)


def trivial(params: Params, m) -> LWECiphertext:
    """A noiseless, keyless encryption of m (a = 0): a public constant."""
    arr = _check_messages(params, m)
    b, a = _trivial(encode(params, arr), dim=params.long_dim)
    return LWECiphertext(b, a, params.moduli)


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


def _test_vector(params: Params, table, delta: int | None = None):
    """The test vector's residues uint32 [..., L, N'] of tables int [..., 2^p] in [0, 2^p) (N' = 2^nu N, the
    accumulator's size; traceable): coefficient j holds f(m) Delta for the message box of j (boxes of N' / 2^p
    coefficients centered on m N' / 2^p), and -f(0) Delta on the last half box (which a message 0 with negative
    noise reaches through X^N' = -1). ``delta``: the output scale (default ``params.delta``; a smaller one makes
    outputs f(m) delta, as the switch to CKKS takes them: :mod:`crossfhe.convert.switch`)."""
    n, p = params.acc_size, params.message_bits
    box = n >> p
    m = (np.arange(n) + box // 2) // box
    idx = np.where(m < 2**p, np.minimum(m, 2**p - 1), 0)
    vals = jnp.take(jnp.asarray(table).astype(U32), jnp.asarray(idx, dtype=I32), axis=-1)[..., None, :]  # [..., 1, N']
    t = ModulusTable.create(params.moduli)  # q, mu, bits [L, 1]
    signed = jnp.where(jnp.asarray(m >= 2**p), (t.q - vals) % t.q, vals)  # sign f(m) mod q
    delta = params.delta if delta is None else delta
    delta = np.array([delta % x for x in params.moduli], dtype=np.uint32)[:, None]
    return barrett_mul(signed, delta, t.q, t.barrett_mu, t.bits)


def _components(params: Params, tv):
    """Test vectors [..., L, N'] -> their 2^nu components [..., 2^nu, L, N] (crossfhe.core.ggsw.split_components)."""
    return jnp.moveaxis(tv.reshape(tv.shape[:-1] + (params.poly_size, 1 << params.extension)), -1, -3)


@partial(jit, static_argnames=("params",))
def _keyswitch(b, a, ksk, ms_plan, *, params: Params):
    """Long LWE over Q (b [B, L], a [B, L, kN]) -> short LWE mod 2^32 -> mod 2N' (N' = 2^nu N): (b~ [B],
    a~ [B, n]) int32. ``ksk``: the int32 key, or its signed bytes (:func:`_ksk_bytes`): the same words."""
    g = params.ks_gadget
    x = jnp.concatenate([a, b[..., None]], axis=-1)  # [B, L, kN + 1]
    d = gadget_digits_rns(x, ms_plan)  # [2, B, kN + 1]: round(x 2^32 / Q) in base 2^16
    v = (d[0].astype(U32) << 16) + d[1].astype(U32)  # mod 2^32
    va, vb = v[:, :-1], v[:, -1]
    # signed digits of the top b l bits of each a_i, rounded
    shift = KS_MODULUS_BITS - g.base_log * g.levels
    t = (va + U32((1 << shift) >> 1)) >> shift if shift else va
    # materialized: fused into the digits below, the rounding from the residues ran once per digit level
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
    ar = (aa + rnd) >> sh
    if params.centered_modulus_switch:
        # each a_i moves by e_i = 2^sh round(a_i / 2^sh) - a_i; the phase by sum e_i s_i, whose mean over the binary
        # key is sum e_i / 2: taken off b (params.var_round_2n). |sum e_i| <= n 2^(sh-1) < 2^31 (n < 2N').
        err = jax.lax.bitcast_convert_type((ar << sh) - aa, I32)
        bb = bb - jax.lax.bitcast_convert_type(jnp.sum(err, axis=-1, dtype=I32) >> 1, U32)
    return ((bb + rnd) >> sh & mask).astype(I32), (ar & mask).astype(I32)


def _ks_key(sk: ServerKey, batch: int):
    """The key the key switch of ``batch`` inputs multiplies: the bytes (:func:`_ksk_bytes`) where the prepared key
    has them and the batch is at least :data:`KS_BYTES_FROM` (a static shape), else the int32 key."""
    by = sk.prepared.ksk_bytes if sk.prepared is not None else None
    return by if by is not None and batch >= KS_BYTES_FROM else sk.ksk


@partial(jit, static_argnames=("params", "shape"))
def _keyswitch_program(b, a, ksk, ms_plan, *, params: Params, shape: tuple):
    limbs = len(params.moduli)
    bt, at = _keyswitch(b.reshape((-1, limbs)), a.reshape((-1, limbs, params.long_dim)), ksk, ms_plan, params=params)
    return bt.reshape(shape), at.reshape(shape + (params.lwe_dim,))


def keyswitch(sk: ServerKey, ct: LWECiphertext):
    """Steps 1-3 of :func:`pbs`: (b~ int32 [...], a~ int32 [..., n]) in [0, 2N'), the short LWE the blind
    rotation takes. Exposed for noise tests and for callers that apply several tables themselves."""
    params = _params_of(sk, ServerKey)
    _check_ct(params, ct)
    check_key_ids("keyswitch", sk.key_id, ct.key_id)
    shape = ct.batch_shape
    ksk = _ks_key(sk, math.prod(shape))
    return _keyswitch_program(ct.b, ct.a, ksk, _Tables(params).ms_plan, params=params, shape=shape)


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


def _first_step(acc, shifts, keys, plan, gplan, mac, *, grouping: int):
    """The blind rotation's first step (its first g key bits, GGSWs ``keys`` in the NTT domain) through the
    exact NTT: the FFT kernel does all but this one. The accumulator is the test vector here, whose long
    constant runs make the FFT's rounding error meet the key coherently, 20-30x a later step's
    (:mod:`crossfhe.tfhe.params`)."""
    if grouping == 1:
        return G.cmux_step(acc, shifts[:, 0], keys[0], plan, gplan, mac)
    exps = _group_exponents(shifts, grouping, 2 * acc.shape[-1] * acc.shape[1])
    return G.group_step(acc, exps[:, 0], keys, plan, gplan, mac)


def _group_exponents(shifts, grouping: int, n2: int):
    """int32 [B, m] rotations, one per key bit, in [0, 2N') -> [B, ceil(m / g), 2^g - 1]: per group and
    nonzero pattern t, sum_j shifts_j t_j mod 2N' (the rotation the pattern calls for; padded bits: 0)."""
    m = shifts.shape[1]
    groups = -(-m // grouping)
    s = jnp.pad(shifts, ((0, 0), (0, groups * grouping - m))).reshape(shifts.shape[0], groups, grouping)
    return jnp.sum(s[:, :, None, :] * patterns(grouping)[None, None], axis=-1, dtype=I32) % n2


def _rotate_all(acc, shifts, keys, plan, gplan, mac, fourier, native, *, unroll: int, grouping: int,
                chunks: tuple[int, int]):
    """:func:`_rotate` on the whole batch, or on ``chunks`` = (count, size) pieces of the batch axis one after
    the other (the batch padded with zero items to count x size): the same words."""
    count, size = chunks
    if count == 1:
        return _rotate(acc, shifts, keys, plan, gplan, mac, fourier, native, unroll=unroll, grouping=grouping)
    total = acc.shape[0]
    pad = count * size - total
    acc = jnp.pad(acc, [(0, pad)] + [(0, 0)] * (acc.ndim - 1)).reshape((count, size) + acc.shape[1:])
    shifts = jnp.pad(shifts, [(0, pad), (0, 0)]).reshape(count, size, -1)

    def body(xs):
        return _rotate(xs[0], xs[1], keys, plan, gplan, mac, fourier, native, unroll=unroll, grouping=grouping)

    out = jax.lax.map(body, (acc, shifts))
    return out.reshape((count * size,) + out.shape[2:])[:total]


def _batch_chunks(params: Params, rows: int, kernels: KernelSet, route: str) -> tuple[int, int]:
    """(count, size) of the batch chunks (:data:`CPU_BATCH_WORDS`) for ``rows`` accumulators (tables x items):
    chunks only on the ``NATIVE`` set and only for the XLA rotations; equal sizes, the last one padded."""
    if not kernels.native or route == "native":
        return 1, rows
    per_row = (params.glwe_dim + 1) * params.acc_size
    most = max(1, CPU_BATCH_WORDS // per_row)
    count = -(-rows // most)
    return count, -(-rows // count)


@partial(jit, static_argnames=("params", "shape", "unroll", "chunks", "delta"))
def _pbs_program(b, a, tables, ksk, bsk, fkey, fourier, native, ms_plan, plan, gplan, mac, *, params: Params,
                 shape: tuple, unroll: int, chunks: tuple[int, int], delta: int | None = None):
    """:func:`pbs_many` in one program: key switch (b [*shape, L], a [*shape, L, kN]), the test vectors of
    ``tables`` int [T, 1 or B, 2^p], the blind rotation (through the NTT with ``bsk``, fourier None; else its first
    step through the NTT and the others through the FFT key ``fkey``, by the native kernel where ``native``) and
    the sample extraction: per table, (b [*shape, L], a [*shape, L, kN])."""
    limbs, tcount = len(params.moduli), tables.shape[0]
    bt, at = _keyswitch(b.reshape((-1, limbs)), a.reshape((-1, limbs, params.long_dim)), ksk, ms_plan, params=params)
    tv = _components(params, _test_vector(params, tables, delta))  # [T, 1 or B, 2^nu, L, N]
    q, g = mac[0], params.grouping
    acc = _initial_acc(bt, tv, q, params)
    shifts = _rotation_shifts(at, tcount, params)
    keys = bsk
    if fourier is not None:
        per = (1 << g) - 1
        acc = _first_step(acc, shifts[:, :g], bsk[:per], plan, gplan, mac, grouping=g)
        shifts, keys = shifts[:, g:], fkey
    acc = _rotate_all(acc, shifts, keys, plan, gplan, mac, fourier, native, unroll=unroll, grouping=g, chunks=chunks)
    ob, oa = _extract(acc, q, tcount, params)
    return tuple((ob[i].reshape(shape + (limbs,)), oa[i].reshape(shape + (limbs, params.long_dim)))
                 for i in range(tcount))


def pbs(
    sk: ServerKey, ct: LWECiphertext, table, *, unroll: int = 1, progress=None, kernel: str = "auto"
) -> LWECiphertext:
    """Programmable bootstrapping of ct (any batch shape): an LWECiphertext of the same batch shape
    encrypting table(m), with fresh noise (variance ``params.var_pbs``). ``table``: an array of 2^p ints
    or a callable on ints (:func:`lookup_table`), applied to every input; or an integer array of shape
    ``ct.batch_shape + (2^p,)``, one table per input (:func:`per_input_tables`). Either way the whole
    batch shares each pass over the bootstrapping key (on the ``NATIVE`` kernel set, each chunk of
    :data:`CPU_BATCH_WORDS`). One compiled program (with ``progress``: one per chunk of steps).
    ``progress``: :mod:`crossfhe.progress`; if given, called as the blind rotation advances (:data:`PROGRESS_CHUNKS`
    times); the result is the same either way. ``kernel``: ``"auto"``, ``"fft"``, ``"native"`` or ``"ntt"``
    (:data:`KERNELS`). Under a caller's ``jax.jit`` or ``vmap`` the same words as eagerly, the server key closed
    over or passed as an argument (then prepared before: :func:`prepare`).
    """
    return pbs_many(sk, ct, [table], unroll=unroll, progress=progress, kernel=kernel)[0]


def _device_tables(tab: np.ndarray) -> jax.Array:
    """The tables ``tab`` as a device array, copied once per distinct content (a program applies the same tables
    many times; each NumPy argument would be copied to the device on every call)."""
    return _device_copy(tab.tobytes(), tab.shape, tab.dtype.str)


@plan_cache(maxsize=256, on_device=True)
def _device_copy(data: bytes, shape: tuple, dtype: str) -> np.ndarray:
    return np.frombuffer(data, dtype=dtype).reshape(shape)


def _route(sk: ServerKey, kernel: str) -> str:
    """"ntt", "fft" (the XLA FFT kernel) or "native" for ``kernel`` on this key (prepared here if it is not)."""
    params = sk.params
    if kernel not in KERNELS:
        raise ParameterError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    prepare(sk, fourier=kernel in ("fft", "native") or (kernel == "auto" and params.fft_kernel))
    if kernel == "ntt" or (kernel == "auto" and sk.prepared.fourier_key is None):
        return "ntt"
    if sk.prepared.native is not None:
        return "native"
    if kernel == "native":
        kernels = sk.prepared.kernels
        why = (f"the key was prepared for the {kernels!r} kernel set (params.with_kernels(NATIVE))"
               if not kernels.native else
               f"{params!r} has grouping {params.grouping}; the native kernel takes grouped key bits (grouping > 1)"
               if params.grouping == 1 else f"it is not available ({cpu_native.status()})")
        raise ParameterError(f"kernel='native' cannot run here: {why}; use kernel='fft'")
    return "fft"


def pbs_many(
    sk: ServerKey, ct: LWECiphertext, tables, *, unroll: int = 1, progress=None, kernel: str = "auto",
    out_delta: int | None = None,
) -> list[LWECiphertext]:
    """Several tables applied to the same input(s) with one key switch per input (KS-dedup, Taurus §V).

    Returns one LWECiphertext per table, each of ct's batch shape; equal to ``[pbs(sk, ct, f) for f in
    tables]`` (same key switch, so the same short ciphertext; through the NTT kernel the same outputs bit
    for bit, through the FFT the same up to its rounding, which may depend on the batch's shape: other
    words, the same message and noise model). The tables are one more batch axis of the blind rotation.
    Each entry is a table for every input or an array of per-input tables (as for :func:`pbs`).
    ``progress`` and ``kernel``: as for :func:`pbs`. ``out_delta``: the outputs' scale, f(m) out_delta (default
    ``params.delta``, a TFHE message; a smaller one for the switch to CKKS, :mod:`crossfhe.convert.switch`), in
    (0, params.delta].
    """
    params = _params_of(sk, ServerKey)
    _check_ct(params, ct)
    check_key_ids("pbs", sk.key_id, ct.key_id)
    if callable(tables) or not isinstance(tables, (list, tuple)) or not tables:
        raise ParameterError("pbs_many takes a non-empty list of tables (use pbs for one table)")
    progress = progress_callback(progress)
    if out_delta is not None and (isinstance(out_delta, bool) or not isinstance(out_delta, (int, np.integer))
                                  or not 0 < out_delta <= params.delta):
        raise ParameterError(f"out_delta must be an int in (0, params.delta = {params.delta}], got {out_delta!r}")
    if out_delta is not None and progress is not None:
        raise ParameterError("out_delta and progress cannot be combined")
    route = _route(sk, kernel)
    shape = ct.batch_shape
    per_input = [not callable(f) and np.ndim(f) > 1 for f in tables]
    batch = math.prod(shape) if any(per_input) else 1
    rows = []
    for f, own in zip(tables, per_input, strict=True):
        t = per_input_tables(params, f, shape).reshape(-1, 2**params.message_bits) if own else lookup_table(params, f)
        rows.append(np.broadcast_to(t, (batch, 2**params.message_bits)))
    tab = _device_tables(np.stack(rows).astype(np.int32))  # [T, 1 or B, 2^p]
    t = _Tables(params)
    prep = sk.prepared
    fft = route != "ntt"
    args = (ct.b, ct.a, tab, _ks_key(sk, math.prod(shape)), sk.bsk, prep.fourier_key if fft else None,
            prep.fourier if fft else None, prep.native if route == "native" else None, t.ms_plan, t.plan, t.gplan,
            t.mac)
    # the FFT kernels' float64 and 64-bit integer arrays exist only under x64 (scoped, not global)
    with jax.enable_x64(True) if fft else contextlib.nullcontext():
        if progress is None:
            chunks = _batch_chunks(params, len(tables) * math.prod(shape), prep.kernels, route)
            outs = _pbs_program(*args, params=params, shape=shape, unroll=unroll, chunks=chunks,
                                delta=None if out_delta is None else int(out_delta))
        else:
            outs = _pbs_with_progress(*args, params=params, shape=shape, unroll=unroll, progress=progress)
    return [LWECiphertext(b, a, params.moduli, sk.key_id) for b, a in outs]


# --------------------------------------------------------------------------------------------------
# Bootstraps inside a caller's program (the circuit compiler, crossfhe.compiler.tfhe)
# --------------------------------------------------------------------------------------------------


def _route_of(params: Params, kernel: str = "auto") -> str:
    """The route :func:`_route` takes for a key of ``params`` prepared by :func:`prepare`, from the parameters
    alone (no key): "ntt", "fft" or "native"."""
    if kernel == "ntt" or (kernel == "auto" and not params.fft_kernel):
        return "ntt"
    kernels = params.kernels.resolve()
    if kernels.native and params.grouping > 1 and cpu_native.available():
        return "native"
    if kernel == "native":
        raise ParameterError(f"kernel='native' cannot run for {params!r}; use kernel='fft'")
    return "fft"


def program_key(sk: ServerKey, kernel: str = "auto") -> dict:
    """The arrays :func:`pbs_rows` reads, as a pytree that a caller passes to its ``jax.jit`` program as an argument
    (made here on the host from the prepared key; nothing is created inside the trace): ``ksk`` (the key-switching
    key, as its signed bytes where the prepared key has them: the same words), ``bsk``, the plans ``ms_plan``,
    ``plan``, ``gplan`` and ``mac``, and on the FFT routes ``fkey`` and ``fourier`` (and ``native`` on the native
    kernel), None elsewhere. The route is the one :func:`pbs` takes with ``kernel`` on this key, decided here;
    inside the program it is the pytree's structure. The FFT routes' arrays are float64 and complex128: make,
    pass and trace them under ``jax.enable_x64(True)``."""
    params = _params_of(sk, ServerKey)
    route = _route(sk, kernel)
    prep, t = sk.prepared, _Tables(params)
    fft = route != "ntt"
    return {
        "ksk": prep.ksk_bytes if prep.ksk_bytes is not None else sk.ksk,
        "bsk": sk.bsk,
        "fkey": prep.fourier_key if fft else None,
        "fourier": prep.fourier if fft else None,
        "native": prep.native if route == "native" else None,
        "ms_plan": t.ms_plan,
        "plan": t.plan,
        "gplan": t.gplan,
        "mac": t.mac,
    }


def program_key_shapes(params: Params, kernel: str = "auto") -> dict:
    """:func:`program_key` of any key of ``params`` (prepared for its kernel set) as ``jax.ShapeDtypeStruct`` s,
    without a key (for ``jax.export``): the plans are made, the keys' shapes computed. Call under
    ``jax.enable_x64(True)`` for the FFT routes' dtypes."""
    route = _route_of(params, kernel)
    kernels = params.kernels.resolve()
    k1, levels, big_n = params.glwe_dim + 1, params.pbs_gadget.levels, params.poly_size
    rows, ks_cols = k1 * levels, params.long_dim * params.ks_gadget.levels
    g = params.ks_gadget
    by = kernels in (NATIVE, MATRIX) and not (ks_cols * 128 * (1 << (g.base_log - 1)) >= 2**31 or g.base_log > 7)
    per = (1 << params.grouping) - 1
    sds = jax.ShapeDtypeStruct
    out = {
        "ksk": sds((4 * (params.lwe_dim + 1), ks_cols), jnp.int8) if by else sds((params.lwe_dim + 1, ks_cols), I32),
        "bsk": sds((params.ggsw_count, rows, k1, len(params.moduli), big_n), U32),
        "fkey": None,
        "fourier": None,
        "native": None,
    }
    t = _Tables(params)
    plans = {"ms_plan": t.ms_plan, "plan": t.plan, "gplan": t.gplan, "mac": t.mac}
    if route != "ntt":
        plan = _fourier_plan(params)
        plans["fourier"] = jax.tree_util.tree_map(jnp.asarray, plan)
        if route == "native":
            blk = cpu_native.BLOCK
            out["fkey"] = sds((params.groups - 1, big_n // 2 // blk, per, rows, k1, 2, blk), jnp.float64)
            plans["native"] = F.NativeTables.create(plan)
        else:
            out["fkey"] = sds((params.ggsw_count - per, rows, k1, big_n // 2), jnp.complex128)
    plans = jax.tree_util.tree_map(lambda a: sds(np.shape(a), np.asarray(a).dtype), plans)
    return {**out, **plans}


def make_test_vectors(params: Params, tables):
    """The test vectors of ``tables`` int ``[..., 2^p]`` (entries in [0, 2^p)) in the accumulator's 2^nu components:
    uint32 ``[..., 2^nu, L, N]`` (traceable; :func:`pbs_rows` starts its accumulators from them)."""
    return _components(params, _test_vector(params, tables))


def pbs_rows(key: dict, b, a, tv, inputs: tuple[int, ...], tables_of: tuple[int, ...], *, params: Params,
             unroll: int = 1):
    """Bootstraps of m inputs against R (input, table) rows in one program (traceable: a caller's ``jax.jit`` and
    ``vmap``): each input is key-switched once (KS-dedup), and row r blind-rotates the test vector
    ``tv[tables_of[r]]`` by input ``inputs[r]``, all rows through each step of the bootstrapping key together.

    ``key``: :func:`program_key` (an argument of the caller's program); ``b`` uint32 ``[m, L]``, ``a`` uint32
    ``[m, L, kN]``; ``tv``: :func:`make_test_vectors` ``[T, 2^nu, L, N]``; ``inputs`` and ``tables_of``: static
    tuples of R ints in [0, m) and [0, T). Returns (b ``[R, L]``, a ``[R, L, kN]``): row r encrypts
    table_r(m_input_r), the same words as ``pbs`` through the NTT route, through the FFT the same up to its
    rounding."""
    if len(inputs) != len(tables_of) or not inputs:
        raise ParameterError(f"pbs_rows takes as many input as table indices (at least one), got {len(inputs)} and "
                             f"{len(tables_of)}")
    route = "ntt" if key["fkey"] is None else "native" if key["native"] is not None else "fft"
    chunks = _batch_chunks(params, len(inputs), params.kernels.resolve(), route)
    return _pbs_rows_program(key, b, a, tv, params=params, inputs=tuple(inputs), tables_of=tuple(tables_of),
                             unroll=unroll, chunks=chunks)


@partial(jit, static_argnames=("params", "inputs", "tables_of", "unroll", "chunks"))
def _pbs_rows_program(key, b, a, tv, *, params: Params, inputs: tuple, tables_of: tuple, unroll: int,
                      chunks: tuple[int, int]):
    bt, at = _keyswitch(b, a, key["ksk"], key["ms_plan"], params=params)  # one key switch per input
    if inputs != tuple(range(b.shape[0])):
        pick = np.asarray(inputs, dtype=np.int32)
        bt, at = bt[pick], at[pick]
    if len(set(tables_of)) == 1:
        tv = tv[tables_of[0]][None, None]  # one test vector for every row
    else:
        tv = tv[np.asarray(tables_of, dtype=np.int32)][None]
    q, g, mac = key["mac"][0], params.grouping, key["mac"]
    acc = _initial_acc(bt, tv, q, params)  # [R, 2^nu, k+1, L, N]
    shifts = _rotation_shifts(at, 1, params)
    keys, fourier = key["bsk"], key["fourier"]
    if fourier is not None:
        per = (1 << g) - 1
        acc = _first_step(acc, shifts[:, :g], keys[:per], key["plan"], key["gplan"], mac, grouping=g)
        shifts, keys = shifts[:, g:], key["fkey"]
    acc = _rotate_all(acc, shifts, keys, key["plan"], key["gplan"], mac, fourier, key["native"], unroll=unroll,
                      grouping=g, chunks=chunks)
    ob, oa = _extract(acc, q, 1, params)
    return ob[0], oa[0]


def _rotate(acc, shifts, bsk, plan, gplan, mac, fourier, native, *, unroll: int, grouping: int):
    """The blind rotation by ``shifts`` int32 [B, m] (m key bits, a multiple of g unless they end the key);
    bsk: the GGSWs of those bits (grouping 1) or of their groups' indicators (2^g - 1 per group), in the NTT
    domain (fourier None), the Fourier domain, or the native kernel's layout (``native``: its tables)."""
    if grouping > 1:
        exps = _group_exponents(shifts, grouping, 2 * acc.shape[-1] * acc.shape[1])
        if native is not None:
            return F.blind_rotate_grouped_native(acc, exps, bsk, fourier, native)
        bsk = bsk.reshape((exps.shape[1], (1 << grouping) - 1) + bsk.shape[1:])
        if fourier is None:
            return G.blind_rotate_grouped(acc, exps, bsk, plan, gplan, mac, unroll=unroll)
        return F.blind_rotate_grouped(acc, exps, bsk, fourier, unroll=unroll)
    if fourier is None:
        return G.blind_rotate(acc, shifts, bsk, plan, gplan, mac, unroll=unroll)
    return F.blind_rotate(acc, shifts, bsk, fourier, unroll=unroll)


# The same computation in pieces, for progress reports: the blind rotation's steps run in chunks.
@partial(jit, static_argnames=("params", "grouping", "first"))
def _start_jit(b, a, tables, ksk, bsk, ms_plan, plan, gplan, mac, *, params: Params, grouping: int, first: bool):
    limbs, tcount = len(params.moduli), tables.shape[0]
    bt, at = _keyswitch(b.reshape((-1, limbs)), a.reshape((-1, limbs, params.long_dim)), ksk, ms_plan, params=params)
    acc = _initial_acc(bt, _components(params, _test_vector(params, tables)), mac[0], params)
    shifts = _rotation_shifts(at, tcount, params)
    if first:
        per = (1 << grouping) - 1
        acc = _first_step(acc, shifts[:, :grouping], bsk[:per], plan, gplan, mac, grouping=grouping)
        shifts = shifts[:, grouping:]
    return acc, shifts


_rotate_chunk_jit = jit(_rotate, static_argnames=("unroll", "grouping"))


@partial(jit, static_argnames=("tcount", "params", "shape"))
def _finish_jit(acc, q, *, tcount: int, params: Params, shape: tuple):
    limbs = len(params.moduli)
    ob, oa = _extract(acc, q, tcount, params)
    return tuple((ob[i].reshape(shape + (limbs,)), oa[i].reshape(shape + (limbs, params.long_dim)))
                 for i in range(tcount))


def _pbs_with_progress(b, a, tables, ksk, bsk, fkey, fourier, native, ms_plan, plan, gplan, mac, *,
                       params: Params, shape: tuple, unroll: int, progress):
    """:func:`_pbs_program` (its words), in pieces, with ``progress(steps done, steps, "blind rotation")`` after each
    chunk of steps."""
    g, n = params.grouping, params.groups  # n steps of g key bits each, 2^g - 1 GGSWs each (g = 1: one)
    per = (1 << g) - 1
    acc, shifts = _start_jit(b, a, tables, ksk, bsk, ms_plan, plan, gplan, mac, params=params, grouping=g,
                             first=fourier is not None)
    keys, done = bsk, 0
    if fourier is not None:  # the first step through the NTT (_first_step), the others from the Fourier key
        keys, done = fkey, 1
        if n == 1:
            progress(1, 1, "blind rotation")
    size = -(-n // min(PROGRESS_CHUNKS, n))
    for start in range(0, n - done, size):
        stop = min(n - done, start + size)
        chunk = keys[start:stop] if native is not None else keys[start * per : stop * per]
        args = (acc, shifts[:, start * g : stop * g], chunk, plan, gplan, mac, fourier, native)
        acc = _rotate_chunk_jit(*args, unroll=unroll, grouping=g)
        jax.block_until_ready(acc)
        progress(stop + done, n, "blind rotation")
    return _finish_jit(acc, mac[0], tcount=tables.shape[0], params=params, shape=shape)


def check_compatible(ck: ClientKey | None, sk: ServerKey | None) -> None:
    """Raise if the keys were made for different parameter sets (ParameterError) or are not one key pair
    (KeyMismatchError)."""
    if ck is not None and sk is not None:
        if ck.params != sk.params:
            raise ParameterError(f"client key ({ck.params!r}) and server key ({sk.params!r}) differ in parameters")
        check_key_ids("check_compatible", ck.key_id, sk.key_id)


__all__ = [
    "ClientKey",
    "PreparedKey",
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
    "make_test_vectors",
    "mul_const",
    "negate",
    "noise",
    "pbs",
    "pbs_many",
    "patterns",
    "per_input_tables",
    "pbs_rows",
    "phase",
    "prepare",
    "program_key",
    "program_key_shapes",
    "sub",
    "trivial",
]
