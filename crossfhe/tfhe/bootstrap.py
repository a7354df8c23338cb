"""TFHE programmable bootstrapping, key switch first (Taurus Fig. 3), of a batch of LWE ciphertexts:

1-3. key switch long -> short and modulus switch to 2N' (:mod:`crossfhe.tfhe.keyswitch`; N' = 2^nu N,
   ``params.acc_size``: N unless the parameters have an ``extension``);
4. blind rotation of the test vector (:func:`crossfhe.core.blind_rotation.blind_rotate`, written once): the
   server key's first group of key bits through the exact NTT (the accumulator is the test vector there, whose
   long constant runs make an FFT's rounding error meet the key coherently, 20-30x a later step's:
   :mod:`crossfhe.tfhe.params`), the other groups through the key's external-product kernel, a value carried by
   the prepared key (:class:`~crossfhe.tfhe.keys.PreparedKey`: NTT, XLA FFT or the native CPU FFT). Every item of
   the batch goes through step i together, so each step's GGSWs are read once per step for the whole batch
   (Taurus's key reuse; on the ``NATIVE`` kernel set, once per chunk of :data:`CPU_BATCH_WORDS` accumulator words
   for the XLA products, which keeps a step in a CPU's cache, and of :data:`FUSED_BATCH_WORDS` for the native one,
   which bounds its temporaries); with an extension nu the accumulator's 2^nu components of degree N share
   it too; with a grouping g > 1, n / g grouped steps, each reading the 2^g - 1 GGSWs of its group;
5. sample extraction: back to dimension k N over Q.

KS-dedup (Taurus §V): ``pbs_many(server_key, ct, [f, g, h])`` key-switches each input once and blind-rotates it
against all tables (the tables are one more batch axis of step 4).

Tables: a function f: Z_{2^p} -> Z_{2^p} given as an array of 2^p ints or a Python callable on ints
(:func:`lookup_table`); outputs are taken mod 2^p. A batch may also carry one table per input (an integer
array of shape ``batch_shape + (2^p,)``, :func:`per_input_tables`): each input's accumulator starts from
its own test vector, and the batch still shares every pass over the bootstrapping key.

Programs. Every bootstrap is one call of a cached compiled program taking the prepared key as an argument (its
Python work checks the arguments and builds small host values: bounded, independent of N), and the same program
runs inside a caller's ``jax.jit`` or ``vmap``. Its route is the key's product, a value; nothing looks at
tracers, devices or the backend.
"""

from __future__ import annotations

import contextlib
import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.core import ggsw as G
from crossfhe.core.blind_rotation import FFTProduct, GPUProduct, NativeProduct, NTTProduct, blind_rotate
from crossfhe.core.fourier import NativeTables
from crossfhe.core.keys import check_key_ids
from crossfhe.core.lwe import LWECiphertext
from crossfhe.errors import ParameterError
from crossfhe.kernels import MATRIX, NATIVE, KernelSet, cpu_native
from crossfhe.math.modular import ModulusTable, barrett_mul
from crossfhe.math.xla import jit, plan_cache
from crossfhe.progress import callback as progress_callback
from crossfhe.tfhe.keys import (
    PreparedKey,
    ServerKey,
    Tables,
    _check_ct,
    _params_of,
    fourier_plan,
    ksk_bytes_fit,
    patterns,
    product_for,
)
from crossfhe.tfhe.keyswitch import KS_BYTES_FROM, keyswitch_words, ks_key
from crossfhe.tfhe.params import Params

U32 = jnp.uint32
I32 = jnp.int32

CPU_BATCH_WORDS = 2**16
"""On the ``NATIVE`` kernel set (a CPU), the XLA blind rotations (NTT and XLA FFT products) run the batch in chunks
of at most this many accumulator coefficients (items x tables x 2^nu x (k+1) x N), one after the other inside the
program, so that a step's arrays stay in cache; the same words as one piece. Elsewhere the batch is not split."""

FUSED_BATCH_WORDS = 2**21
"""On the ``NATIVE`` kernel set, the native (fused) blind rotation runs the batch in chunks of at most this many
accumulator coefficients (128 rows at P6, 512 at P4), one after the other inside the program: its temporaries grow
with the rows of a launch (a KNN launch of 1,600 lookups at P6 held about 8 GB whole; benchmarks/README.md, "Native
blind rotations in chunks"). The same words as one piece."""

PROGRESS_CHUNKS = 20
"""With a ``progress`` callback, the blind rotation runs in this many chunks of steps (at most two compiled chunk
shapes), and the callback is called after each one."""


# --------------------------------------------------------------------------------------------------
# Lookup tables and test vectors
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


def make_test_vectors(params: Params, tables):
    """The test vectors of ``tables`` int ``[..., 2^p]`` (entries in [0, 2^p)) in the accumulator's 2^nu components:
    uint32 ``[..., 2^nu, L, N]`` (traceable; :func:`pbs_rows` starts its accumulators from them)."""
    return _components(params, _test_vector(params, tables))


# --------------------------------------------------------------------------------------------------
# The bootstrap, traceable
# --------------------------------------------------------------------------------------------------


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


def group_exponents(shifts, grouping: int, n2: int):
    """int32 [B, m] rotations, one per key bit, in [0, 2N') -> [B, ceil(m / g), 2^g - 1]: per group and
    nonzero pattern t, sum_j shifts_j t_j mod 2N' (the rotation the pattern calls for; padded bits: 0). With
    g = 1: the shifts, one pattern per step."""
    m = shifts.shape[1]
    groups = -(-m // grouping)
    s = jnp.pad(shifts, ((0, 0), (0, groups * grouping - m))).reshape(shifts.shape[0], groups, grouping)
    return jnp.sum(s[:, :, None, :] * patterns(grouping)[None, None], axis=-1, dtype=I32) % n2


def _exponents(a_t, tcount: int, params: Params):
    """Per row (tables x items) and step, the rotations of the group's patterns: X^(-a~_i), phase b~ + sum a~_i s_i."""
    n2 = 2 * params.acc_size
    return group_exponents(jnp.tile((n2 - a_t) % n2, (tcount, 1)), params.grouping, n2)


def _extract(acc, q, tcount: int, params: Params):
    ob, oa = G.sample_extract(acc[:, 0], q)
    limbs = len(params.moduli)
    return ob.reshape(tcount, -1, limbs), oa.reshape(tcount, -1, limbs, params.long_dim)


def batch_chunks(params: Params, rows: int, kernels: KernelSet, product: type) -> tuple[int, int]:
    """(count, size) of the batch chunks for ``rows`` accumulators (tables x items): on the ``NATIVE`` set only, at
    most :data:`CPU_BATCH_WORDS` accumulator words per chunk for the XLA products and :data:`FUSED_BATCH_WORDS` for
    the fused native one; equal sizes, the last one padded."""
    if not kernels.native:
        return 1, rows
    per_row = (params.glwe_dim + 1) * params.acc_size
    most = max(1, (FUSED_BATCH_WORDS if product.FUSED else CPU_BATCH_WORDS) // per_row)
    count = -(-rows // most)
    return count, -(-rows // count)


def _rotate_chunked(acc, exps, keys, product, *, unroll: int, chunks: tuple[int, int]):
    """:func:`~crossfhe.core.blind_rotation.blind_rotate` on the whole batch, or on ``chunks`` = (count, size) pieces
    of the batch axis one after the other (the batch padded with zero items to count x size): the same words."""
    count, size = chunks
    if count == 1:
        return blind_rotate(acc, exps, keys, product, unroll=unroll)
    total = acc.shape[0]
    pad = count * size - total
    acc = jnp.pad(acc, [(0, pad)] + [(0, 0)] * (acc.ndim - 1)).reshape((count, size) + acc.shape[1:])
    exps = jnp.pad(exps, [(0, pad), (0, 0), (0, 0)]).reshape((count, size) + exps.shape[1:])
    out = jax.lax.map(lambda xs: blind_rotate(xs[0], xs[1], keys, product, unroll=unroll), (acc, exps))
    return out.reshape((count * size,) + out.shape[2:])[:total]


def _start(key: PreparedKey, bt, at, tv, *, params: Params):
    """The accumulators ``[T B, 2^nu, k+1, L, N]`` after the first step (through the exact NTT: module docstring),
    and the other steps' exponents ``[T B, G - 1, 2^g - 1]``."""
    per = (1 << params.grouping) - 1
    acc = _initial_acc(bt, tv, key.first.mac[0], params)
    exps = _exponents(at, tv.shape[0], params)
    return key.first.step(acc, exps[:, 0], key.bsk[:per]), exps[:, 1:]


def _bootstrap(key: PreparedKey, bt, at, tv, *, params: Params, unroll: int, chunks: tuple[int, int]):
    """Steps 4-5 on short ciphertexts (b~ [B], a~ [B, n]) against test vectors tv [T, 1 or B, 2^nu, L, N]: per table,
    (b [B, L], a [B, L, kN])."""
    acc, exps = _start(key, bt, at, tv, params=params)
    per = (1 << params.grouping) - 1
    acc = _rotate_chunked(acc, exps, key.rest_keys(per), key.product, unroll=unroll, chunks=chunks)
    return _extract(acc, key.first.mac[0], tv.shape[0], params)


@partial(jit, static_argnames=("params", "shape", "unroll", "chunks", "delta"))
def _pbs_program(key: PreparedKey, b, a, tables, *, params: Params, shape: tuple, unroll: int,
                 chunks: tuple[int, int], delta: int | None = None):
    """:func:`pbs_many` in one program: key switch (b [*shape, L], a [*shape, L, kN]), the test vectors of ``tables``
    int [T, 1 or B, 2^p], the blind rotation and the sample extraction: per table, (b [*shape, L],
    a [*shape, L, kN])."""
    limbs, tcount = len(params.moduli), tables.shape[0]
    rows = math.prod(shape)
    bt, at = keyswitch_words(b.reshape((-1, limbs)), a.reshape((-1, limbs, params.long_dim)), ks_key(key, rows),
                             key.ms_plan, params=params)
    tv = _components(params, _test_vector(params, tables, delta))  # [T, 1 or B, 2^nu, L, N]
    ob, oa = _bootstrap(key, bt, at, tv, params=params, unroll=unroll, chunks=chunks)
    return tuple((ob[i].reshape(shape + (limbs,)), oa[i].reshape(shape + (limbs, params.long_dim)))
                 for i in range(tcount))


# --------------------------------------------------------------------------------------------------
# Eager bootstraps
# --------------------------------------------------------------------------------------------------


def _x64(key: PreparedKey):
    """The FFT products' float64 and 64-bit integer arrays exist only under x64 (scoped, not global)."""
    return jax.enable_x64(True) if key.x64 else contextlib.nullcontext()


def pbs(sk: ServerKey, ct: LWECiphertext, table, *, unroll: int = 1, progress=None) -> LWECiphertext:
    """Programmable bootstrapping of ct (any batch shape): an LWECiphertext of the same batch shape
    encrypting table(m), with fresh noise (variance ``params.var_pbs``). ``table``: an array of 2^p ints
    or a callable on ints (:func:`lookup_table`), applied to every input; or an integer array of shape
    ``ct.batch_shape + (2^p,)``, one table per input (:func:`per_input_tables`). Either way the whole
    batch shares each pass over the bootstrapping key (on the ``NATIVE`` kernel set, each chunk of
    :func:`batch_chunks`). One compiled program (with ``progress``: one per chunk of steps).
    ``progress``: :mod:`crossfhe.progress`; if given, called as the blind rotation advances (:data:`PROGRESS_CHUNKS`
    times); the result is the same either way. The external-product kernel is the key's (``sk.product``; another:
    :func:`crossfhe.tfhe.keys.prepare`). Under a caller's ``jax.jit`` or ``vmap`` the same words as eagerly, the
    server key closed over or passed as an argument.
    """
    return pbs_many(sk, ct, [table], unroll=unroll, progress=progress)[0]


def _device_tables(tab: np.ndarray) -> jax.Array:
    """The tables ``tab`` as a device array, copied once per distinct content (a program applies the same tables
    many times; each NumPy argument would be copied to the device on every call)."""
    return _device_copy(tab.tobytes(), tab.shape, tab.dtype.str)


@plan_cache(maxsize=256, on_device=True)
def _device_copy(data: bytes, shape: tuple, dtype: str) -> np.ndarray:
    return np.frombuffer(data, dtype=dtype).reshape(shape)


def pbs_many(sk: ServerKey, ct: LWECiphertext, tables, *, unroll: int = 1, progress=None,
             out_delta: int | None = None) -> list[LWECiphertext]:
    """Several tables applied to the same input(s) with one key switch per input (KS-dedup, Taurus §V).

    Returns one LWECiphertext per table, each of ct's batch shape; equal to ``[pbs(sk, ct, f) for f in
    tables]`` (same key switch, so the same short ciphertext; through the NTT product the same outputs bit
    for bit, through the FFT the same up to its rounding, which may depend on the batch's shape: other
    words, the same message and noise model). The tables are one more batch axis of the blind rotation.
    Each entry is a table for every input or an array of per-input tables (as for :func:`pbs`).
    ``progress``: as for :func:`pbs`. ``out_delta``: the outputs' scale, f(m) out_delta (default
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
    shape = ct.batch_shape
    per_input = [not callable(f) and np.ndim(f) > 1 for f in tables]
    batch = math.prod(shape) if any(per_input) else 1
    rows = []
    for f, own in zip(tables, per_input, strict=True):
        t = per_input_tables(params, f, shape).reshape(-1, 2**params.message_bits) if own else lookup_table(params, f)
        rows.append(np.broadcast_to(t, (batch, 2**params.message_bits)))
    tab = _device_tables(np.stack(rows).astype(np.int32))  # [T, 1 or B, 2^p]
    key = sk.prepared
    with _x64(key):
        if progress is None:
            chunks = batch_chunks(params, len(tables) * math.prod(shape), key.kernels, type(key.product))
            outs = _pbs_program(key, ct.b, ct.a, tab, params=params, shape=shape, unroll=unroll, chunks=chunks,
                                delta=None if out_delta is None else int(out_delta))
        else:
            outs = _pbs_with_progress(key, ct.b, ct.a, tab, params=params, shape=shape, unroll=unroll,
                                      progress=progress)
    return [LWECiphertext(b, a, params.moduli, sk.key_id) for b, a in outs]


# The same computation in pieces, for progress reports: the blind rotation's steps run in chunks.
@partial(jit, static_argnames=("params",))
def _start_jit(key: PreparedKey, b, a, tables, *, params: Params):
    limbs = len(params.moduli)
    bt, at = keyswitch_words(b.reshape((-1, limbs)), a.reshape((-1, limbs, params.long_dim)),
                             ks_key(key, b.size // limbs), key.ms_plan, params=params)
    return _start(key, bt, at, _components(params, _test_vector(params, tables)), params=params)


@partial(jit, static_argnames=("unroll",))
def _rotate_jit(acc, exps, keys, product, *, unroll: int):
    return blind_rotate(acc, exps, keys, product, unroll=unroll)


@partial(jit, static_argnames=("tcount", "params", "shape"))
def _finish_jit(acc, q, *, tcount: int, params: Params, shape: tuple):
    limbs = len(params.moduli)
    ob, oa = _extract(acc, q, tcount, params)
    return tuple((ob[i].reshape(shape + (limbs,)), oa[i].reshape(shape + (limbs, params.long_dim)))
                 for i in range(tcount))


def _pbs_with_progress(key: PreparedKey, b, a, tables, *, params: Params, shape: tuple, unroll: int, progress):
    """:func:`_pbs_program` (its words), in pieces, with ``progress(steps done, steps, "blind rotation")`` after each
    chunk of steps (the first step, through the NTT, with the key switch)."""
    n = params.groups  # n steps of g key bits each, 2^g - 1 GGSWs each (g = 1: one)
    acc, exps = _start_jit(key, b, a, tables, params=params)
    keys = key.rest_keys((1 << params.grouping) - 1)
    if n == 1:
        progress(1, 1, "blind rotation")
    size = -(-(n - 1) // min(PROGRESS_CHUNKS, max(1, n - 1)))
    for start in range(0, n - 1, size):
        stop = min(n - 1, start + size)
        acc = _rotate_jit(acc, exps[:, start:stop], keys[start:stop], key.product, unroll=unroll)
        jax.block_until_ready(acc)
        progress(stop + 1, n, "blind rotation")
    return _finish_jit(acc, key.first.mac[0], tcount=tables.shape[0], params=params, shape=shape)


# --------------------------------------------------------------------------------------------------
# Bootstraps inside a caller's program (the circuit compiler, crossfhe.api.tfhe_lower)
# --------------------------------------------------------------------------------------------------


def program_key(sk: ServerKey) -> PreparedKey:
    """What :func:`pbs_rows` reads: the key's :class:`~crossfhe.tfhe.keys.PreparedKey`, a pytree that a caller passes
    to its ``jax.jit`` program as an argument (nothing is created inside the trace; no key identifier in it, so one
    program serves every key of the parameters). Its product is the route, part of the pytree's structure. The FFT
    products' arrays are float64 and complex128: pass and trace them under ``jax.enable_x64(True)``
    (``key.x64``)."""
    _params_of(sk, ServerKey)
    return sk.prepared


def program_key_shapes(params: Params, product=None) -> PreparedKey:
    """:func:`program_key` of any key of ``params`` prepared for ``product`` (:func:`~crossfhe.tfhe.keys.product_for`)
    with ``jax.ShapeDtypeStruct`` leaves, without a key (for ``jax.export``): the plans are made, the keys' shapes
    computed. Call under ``jax.enable_x64(True)`` for the FFT products' dtypes."""
    product = product_for(params, product)
    kernels = params.kernels.resolve()
    k1, levels, big_n = params.glwe_dim + 1, params.pbs_gadget.levels, params.poly_size
    rows, ks_cols = k1 * levels, params.long_dim * params.ks_gadget.levels
    by = kernels in (NATIVE, MATRIX) and ksk_bytes_fit(params)
    per = (1 << params.grouping) - 1
    sds = jax.ShapeDtypeStruct
    t = Tables(params)
    first = t.ntt_product
    rest, made = None, first
    if product is GPUProduct:
        made = t.gpu_product
    elif product is not NTTProduct:
        fplan = jax.tree_util.tree_map(jnp.asarray, fourier_plan(params))
        if product is NativeProduct:
            blk = cpu_native.BLOCK
            rest = sds((params.groups - 1, big_n // 2 // blk, per, rows, k1, 2, blk), jnp.float64)
            made = NativeProduct(fplan, NativeTables.create(fourier_plan(params)))
        else:
            rest = sds((params.groups - 1, per, rows, k1, big_n // 2), jnp.complex128)
            made = FFTProduct(fplan)
    key = PreparedKey(
        bsk=sds((params.ggsw_count, rows, k1, len(params.moduli), big_n), U32),
        ksk=sds((params.lwe_dim + 1, ks_cols), I32),
        ksk_bytes=sds((4 * (params.lwe_dim + 1), ks_cols), jnp.int8) if by else None,
        rest=rest, product=made, first=first, ms_plan=t.ms_plan, kernels=kernels,
    )
    return jax.tree_util.tree_map(lambda a: a if isinstance(a, sds) else sds(np.shape(a), np.asarray(a).dtype), key)


def pbs_rows(key: PreparedKey, b, a, tv, inputs: tuple[int, ...], tables_of: tuple[int, ...], *, params: Params,
             unroll: int = 1, items: int = 1):
    """Bootstraps of m inputs against R (input, table) rows in one program (traceable: a caller's ``jax.jit`` and
    ``vmap``): each input is key-switched once (KS-dedup), and row r blind-rotates the test vector
    ``tv[tables_of[r]]`` by input ``inputs[r]``, all rows through each step of the bootstrapping key together.

    ``key``: :func:`program_key` (an argument of the caller's program); ``b`` uint32 ``[m, L]``, ``a`` uint32
    ``[m, L, kN]``; ``tv``: :func:`make_test_vectors` ``[T, 2^nu, L, N]``; ``inputs`` and ``tables_of``: static
    tuples of R ints in [0, m) and [0, T). ``items``: how many items the caller runs this on at once (the batch of a
    ``vmap`` around it, invisible here): the key switch of items x m inputs multiplies the key :func:`ks_key` picks
    for that many (the int32 key for one input: its signed bytes took 4x as long there, benchmarks/README.md,
    "Serving"). Returns (b ``[R, L]``, a ``[R, L, kN]``): row r encrypts table_r(m_input_r), the same words as
    ``pbs`` with the same key through the NTT product, through the FFT the same up to its rounding."""
    if len(inputs) != len(tables_of) or not inputs:
        raise ParameterError(f"pbs_rows takes as many input as table indices (at least one), got {len(inputs)} and "
                             f"{len(tables_of)}")
    chunks = batch_chunks(params, len(inputs), key.kernels, type(key.product))
    ksk = ks_key(key, int(items) * int(b.shape[0]))
    return _pbs_rows_program(key, ksk, b, a, tv, params=params, inputs=tuple(inputs), tables_of=tuple(tables_of),
                             unroll=unroll, chunks=chunks)


def pbs_each(key: PreparedKey, b, a, tv, slots, *, params: Params, unroll: int = 1, items: int = 1):
    """Bootstraps of m inputs, input i against the test vector ``tv[slots[i]]`` (traceable): :func:`pbs_rows` with
    one row per input and the tables picked by an array, ``slots`` int32 ``[m]`` in [0, T) (an argument of the
    caller's program, not a static tuple: one program serves every chunk of a large launch). ``b`` uint32
    ``[m, L]``, ``a`` uint32 ``[m, L, kN]``, ``tv`` :func:`make_test_vectors` ``[T, 2^nu, L, N]``; returns
    (b ``[m, L]``, a ``[m, L, kN]``), the same words as :func:`pbs_rows` with ``inputs`` = 0 .. m - 1 and
    ``tables_of`` = ``slots``."""
    chunks = batch_chunks(params, int(b.shape[0]), key.kernels, type(key.product))
    bt, at = keyswitch_words(b, a, ks_key(key, int(items) * int(b.shape[0])), key.ms_plan, params=params)
    ob, oa = _bootstrap(key, bt, at, tv[slots][None], params=params, unroll=unroll, chunks=chunks)
    return ob[0], oa[0]


@partial(jit, static_argnames=("params", "inputs", "tables_of", "unroll", "chunks"))
def _pbs_rows_program(key: PreparedKey, ksk, b, a, tv, *, params: Params, inputs: tuple, tables_of: tuple,
                      unroll: int, chunks: tuple[int, int]):
    # one key switch per input, through ``ksk``: the int32 key or its bytes (the same words)
    bt, at = keyswitch_words(b, a, ksk, key.ms_plan, params=params)
    if inputs != tuple(range(b.shape[0])):
        pick = np.asarray(inputs, dtype=np.int32)
        bt, at = bt[pick], at[pick]
    if len(set(tables_of)) == 1:
        tv = tv[tables_of[0]][None, None]  # one test vector for every row
    else:
        tv = tv[np.asarray(tables_of, dtype=np.int32)][None]
    ob, oa = _bootstrap(key, bt, at, tv, params=params, unroll=unroll, chunks=chunks)
    return ob[0], oa[0]


__all__ = [
    "CPU_BATCH_WORDS",
    "FUSED_BATCH_WORDS",
    "KS_BYTES_FROM",
    "PROGRESS_CHUNKS",
    "batch_chunks",
    "group_exponents",
    "lookup_table",
    "make_test_vectors",
    "pbs",
    "pbs_each",
    "pbs_many",
    "pbs_rows",
    "per_input_tables",
    "program_key",
    "program_key_shapes",
]
