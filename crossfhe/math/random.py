"""Cryptographic randomness: a ChaCha20 counter stream in JAX, functional keys, and the samplers of RLWE.

**Stream.** :func:`chacha20_block` is the ChaCha20 block function of RFC 8439 §2.3 on ``uint32`` words only
(add, rotate, xor), so it runs on any device with 64-bit types off and never changes a global JAX setting.
The 10 double rounds are a loop of the program (``lax.fori_loop``); blocks are computed many at a time, one per
counter.

**Keys.** A :class:`ChaChaKey` is a 256-bit ChaCha20 key ``k`` (``words``, uint32[8]) and a 64-bit stream id
``s = (s0, s1)`` (``stream``, uint32[2]). Everything a key produces is a ChaCha20 block under ``k`` with
nonce ``(domain, s0, s1)``, one reserved domain per use, so no block serves two purposes:

* domain 0, :func:`random_bits`: block ``j`` gives output words ``16 j .. 16 j + 15`` (the RFC keystream of
  key ``k`` and nonce ``(0, s0, s1)`` from counter 0);
* domain 1, :func:`split`: child ``i`` has key words = the first 8 words of block ``i``, stream 0;
* domain 2, :func:`fold_in`: ``fold_in(key, d)`` has key words = the first 8 words of block ``d``, stream 0.

Children are therefore independent pseudorandom keys as long as ChaCha20 is a PRF. Like ``jax.random``
keys, a key is used once: give each consumer its own child. ``jax.random`` is not used.

**Samplers** (each takes a key and a static shape and returns a jnp array):

================================  =======  ===================  =============================================
function                          dtype    values               distance from the ideal distribution
================================  =======  ===================  =============================================
:func:`uniform_mod`               uint32   [0, q)               <= q / 2^98 <= 2^-67 (96-bit simple modular)
:func:`ternary`                   int32    {-1, 0, 1}           <= 3 / 2^98
:func:`ternary_hamming`           int32    {-1, 0, 1}, h != 0   <= n^2 / 2^97 (ties of 96-bit sort keys)
:func:`discrete_gaussian`         int32    [-K, K]              < 2^-64 (tail) + 2^-90 (96-bit table)
:func:`centered_binomial`         int32    [-eta, eta]          exact
================================  =======  ===================  =============================================

:func:`to_residues` maps signed samples to residues ``[0, q)`` of each modulus of a table
(``q`` of shape ``[limbs, 1]`` as in :class:`crossfhe.math.modular.ModulusTable`).

References: RFC 8439 (ChaCha20); D. J. Bernstein, "ChaCha, a variant of Salsa20", 2008; NIST SP 800-90A
Rev. 1, Appendix A.5.3 (simple modular method); Knuth, TAOCP vol. 2, §3.4.2 (random permutations by
sorting random keys); Dwarakanath and Galbraith, "Sampling from discrete Gaussians for lattice-based
cryptography on a constrained device", 2014 (CDT); Bos et al., "CRYSTALS-Kyber", 2018 (centered binomial).
"""

from __future__ import annotations

import dataclasses
import decimal
import math
import operator
import os
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from crossfhe.errors import ParameterError
from crossfhe.math import native
from crossfhe.math.modular import mul_wide, mulhi, reduce_once
from crossfhe.math.xla import jit, plan_cache

U32 = jnp.uint32
I32 = jnp.int32
_MASK32 = 0xFFFFFFFF

_SIGMA = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)
_DOMAIN_BITS, _DOMAIN_SPLIT, _DOMAIN_FOLD_IN = 0, 1, 2

# Row order that turns the diagonals (0,5,10,15), (1,6,11,12), (2,7,8,13), (3,4,9,14) into columns.
_DIAGONALS = np.array([0, 1, 2, 3, 5, 6, 7, 4, 10, 11, 8, 9, 15, 12, 13, 14], dtype=np.int32)
_COLUMNS = np.argsort(_DIAGONALS).astype(np.int32)

# Blocks per pass of the round function: the [16, blocks] state stays in cache (128 KiB), measured
# fastest of 512 ... 8192 on XLA:CPU.
_CHUNK_BLOCKS = 2048
_MAX_BLOCKS = 2**32
_MAX_SIGMA = 128.0
_MAX_ETA = 2**16


# --------------------------------------------------------------------------------------------------
# ChaCha20 block function (RFC 8439 §2.3)
# --------------------------------------------------------------------------------------------------


def _rotl(x, n):
    return (x << n) | (x >> (32 - n))


def _quarter_round(a, b, c, d):
    """RFC 8439 §2.1 on whole arrays."""
    a = a + b
    d = _rotl(d ^ a, 16)
    c = c + d
    b = _rotl(b ^ c, 12)
    a = a + b
    d = _rotl(d ^ a, 8)
    c = c + d
    b = _rotl(b ^ c, 7)
    return a, b, c, d


def _column_round(s):
    """Quarter rounds on the four columns of ``s``: uint32[16, m], row-major 4 x 4 states."""
    return jnp.concatenate(_quarter_round(s[0:4], s[4:8], s[8:12], s[12:16]), axis=0)


def _double_round(s):
    """Column round, then diagonal round (RFC 8439 §2.3) as a column round on permuted rows.

    The row permutations are gathers, which XLA does not duplicate into their consumers; without them
    XLA:CPU fuses the rounds into 16 loops, one per output word, each recomputing the shared rounds
    (measured 2.5x slower, and 5 s instead of 0.5 s to compile).
    """
    s = _column_round(s)
    s = _column_round(s[_DIAGONALS])
    return s[_COLUMNS]


def _initial_state(key_words, counters, nonce):
    m = counters.shape[0]
    rows = [jnp.full((m,), c, U32) for c in _SIGMA]
    rows += [jnp.broadcast_to(key_words[i], (m,)) for i in range(8)]
    rows += [counters] + [jnp.broadcast_to(nonce[i], (m,)) for i in range(3)]
    return jnp.stack(rows)


def _blocks_chunk(key_words, counters, nonce):
    """uint32[16, m]: the blocks of counters uint32[m]. The 10 double rounds are one loop (``lax.fori_loop``), so
    every program that draws randomness holds one double round, not twenty rounds, to trace, lower and compile."""
    s0 = _initial_state(key_words, counters, nonce)
    s = lax.fori_loop(0, 10, lambda _, s: _double_round(s), s0)
    return s + s0


def _blocks(key_words, counters, nonce):
    """uint32[m, 16]: the blocks of counters uint32[m].

    More than ``_CHUNK_BLOCKS`` blocks are computed in passes (``lax.map`` over chunks of counters), measured 3x
    faster than one pass over 2^18 blocks.
    """
    m = counters.shape[0]
    if m <= _CHUNK_BLOCKS:
        return _blocks_chunk(key_words, counters, nonce).T
    passes = -(-m // _CHUNK_BLOCKS)
    padded = jnp.pad(counters, (0, passes * _CHUNK_BLOCKS - m))
    out = lax.map(lambda c: _blocks_chunk(key_words, c, nonce), padded.reshape(passes, _CHUNK_BLOCKS))
    return out.transpose(0, 2, 1).reshape(-1, 16)[:m]


def chacha20_block(key_words, counter, nonce) -> jax.Array:
    """ChaCha20 blocks (RFC 8439 §2.3), one per counter.

    key_words: uint32[8], the 32-byte key read as little-endian words. counter: uint32[...] (any shape).
    nonce: uint32[3], the 12-byte nonce as little-endian words. Returns uint32[..., 16]: the state after 20
    rounds plus the input state; its little-endian bytes are the 64-byte keystream block. Exact.
    Batch keys or nonces with ``jax.vmap``.
    """
    return _chacha20_block(_as_u32(key_words), _as_u32(counter), _as_u32(nonce))


def _as_u32(x):
    return x.astype(U32) if isinstance(x, jax.Array) else jnp.asarray(np.asarray(x, dtype=np.uint32))


@jit
def _chacha20_block(key_words, counter, nonce):
    if key_words.shape != (8,) or nonce.shape != (3,):
        raise ParameterError(
            f"key_words must be uint32[8] and nonce uint32[3], got shapes {key_words.shape} and {nonce.shape}"
        )
    out = _blocks(key_words, counter.reshape(-1), nonce)
    return out.reshape(counter.shape + (16,))


# --------------------------------------------------------------------------------------------------
# Keys
# --------------------------------------------------------------------------------------------------


@partial(jax.tree_util.register_dataclass, data_fields=["words", "stream"], meta_fields=[])
@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ChaChaKey:
    """A ChaCha20 key and stream id: a pytree of ``words`` uint32[..., 8] and ``stream`` uint32[..., 2].

    A single key has ``words.shape == (8,)``; :func:`split` returns a batch of shape ``(num,)``, which is
    indexed (``keys[i]``) or unpacked (``k1, k2 = split(key)``). Samplers take single keys; map them over a
    batch with ``jax.vmap``. The repr shows the shape only, never the key.
    """

    words: jax.Array
    stream: jax.Array

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.words.shape[:-1])

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("a single ChaChaKey has no length; split it to get a batch")
        return self.shape[0]

    def __getitem__(self, index) -> ChaChaKey:
        if not self.shape:
            raise TypeError("a single ChaChaKey cannot be indexed; split it to get a batch")
        return ChaChaKey(self.words[index], self.stream[index])

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        return f"ChaChaKey(shape={self.shape})"


def seed_key(seed: bytes | None = None, *, stream: int = 0) -> ChaChaKey:
    """A key from a 32-byte seed (the ChaCha20 key, RFC 8439 byte order), or from ``os.urandom(32)``.

    ``stream`` in [0, 2^64) selects one of 2^64 independent streams of the same seed (nonce words 1 and 2).
    Raises TypeError for a seed that is not bytes and ParameterError (a ValueError) for a wrong length.
    """
    if seed is None:
        seed = os.urandom(32)
    if not isinstance(seed, (bytes, bytearray)):
        raise TypeError(f"seed must be bytes (32 of them) or None, got {type(seed).__name__}")
    if len(seed) != 32:
        raise ParameterError(f"seed must be exactly 32 bytes (256 bits), got {len(seed)} bytes")
    if not isinstance(stream, (int, np.integer)) or isinstance(stream, bool) or not 0 <= stream < 2**64:
        raise ParameterError(f"stream must be an integer in [0, 2^64), got {stream!r}")
    stream = int(stream)
    words = np.frombuffer(bytes(seed), dtype="<u4").astype(np.uint32)
    stream_words = np.array([stream & _MASK32, stream >> 32], dtype=np.uint32)
    return ChaChaKey(jax.device_put(words), jax.device_put(stream_words))


def _check_key(key) -> None:
    if not isinstance(key, ChaChaKey):
        raise TypeError(f"expected a ChaChaKey (from seed_key, split or fold_in), got {type(key).__name__}")
    if key.words.shape != (8,) or key.stream.shape != (2,):
        raise ParameterError(
            f"expected a single key (words uint32[8]), got a batch of shape {key.shape}; "
            "index it or map over it with jax.vmap"
        )
    if key.words.dtype != U32 or key.stream.dtype != U32:
        raise TypeError(f"key words must be uint32, got {key.words.dtype} and {key.stream.dtype}")


def _nonce(domain: int, key: ChaChaKey):
    return jnp.concatenate([jnp.full((1,), domain, U32), key.stream])


@partial(jit, static_argnames=("num",))
def _split(key: ChaChaKey, num: int) -> ChaChaKey:
    blocks = _blocks(key.words, jnp.arange(num, dtype=U32), _nonce(_DOMAIN_SPLIT, key))
    return ChaChaKey(blocks[:, :8], jnp.zeros((num, 2), U32))


def split(key: ChaChaKey, num: int = 2) -> ChaChaKey:
    """``num`` independent child keys, a batch of shape ``(num,)``.

    Child i: key words = words 0..7 of the ChaCha20 block of counter i, nonce (1, s0, s1); stream 0.
    """
    _check_key(key)
    if not isinstance(num, (int, np.integer)) or not 1 <= num <= _MAX_BLOCKS:
        raise ParameterError(f"num must be an integer in [1, 2^32], got {num!r}")
    return _split(key, int(num))


@jit
def _fold_in(key: ChaChaKey, data) -> ChaChaKey:
    block = chacha20_block(key.words, data, _nonce(_DOMAIN_FOLD_IN, key))
    return ChaChaKey(block[:8], jnp.zeros((2,), U32))


def fold_in(key: ChaChaKey, data) -> ChaChaKey:
    """The child key of ``key`` for ``data``, an int in [0, 2^32) or a uint32 scalar (traced ones too).

    Key words = words 0..7 of the ChaCha20 block of counter ``data``, nonce (2, s0, s1); stream 0.
    """
    _check_key(key)
    if isinstance(data, (int, np.integer)) and not isinstance(data, bool):
        if not 0 <= data < 2**32:
            raise ParameterError(f"data must be in [0, 2^32), got {data}")
        data = np.uint32(data)
    data = jnp.asarray(data)
    if data.shape != () or not jnp.issubdtype(data.dtype, jnp.integer):
        raise ParameterError(f"data must be an integer scalar, got {data.dtype}{list(data.shape)}")
    return _fold_in(key, data.astype(U32))


@partial(jit, persist=True)
def _split_pair(key: ChaChaKey) -> tuple[ChaChaKey, ChaChaKey]:
    keys = _split(key, 2)
    return keys[0], keys[1]


class Rng:
    """A host-side source of fresh keys: each :meth:`next_key` splits the held key and keeps one half.

    ``Rng()`` seeds from ``os.urandom(32)``; ``Rng(seed)`` is reproducible. Not thread-safe.
    """

    def __init__(self, seed: bytes | None = None):
        self._key = seed_key(seed)

    @classmethod
    def from_key(cls, key: ChaChaKey) -> Rng:
        _check_key(key)
        rng = cls.__new__(cls)
        rng._key = key
        return rng

    def next_key(self) -> ChaChaKey:
        """Child 1 of ``split(held key)``; child 0 becomes the held key. One program."""
        self._key, child = _split_pair(self._key)
        return child

    def __repr__(self) -> str:
        return "Rng()"


# --------------------------------------------------------------------------------------------------
# Random words
# --------------------------------------------------------------------------------------------------


def _as_shape(shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        shape = tuple(operator.index(d) for d in shape)
    except TypeError as e:
        raise TypeError(f"shape must be an int or a tuple of ints, got {shape!r}") from e
    if any(d < 0 for d in shape):
        raise ParameterError(f"shape must have non-negative dimensions, got {shape}")
    return shape


@partial(jit, static_argnames=("shape",))
def _random_bits(key: ChaChaKey, shape: tuple[int, ...]):
    n = math.prod(shape)
    num_blocks = -(-n // 16)
    blocks = _blocks(key.words, jnp.arange(num_blocks, dtype=U32), _nonce(_DOMAIN_BITS, key))
    return blocks.reshape(-1)[:n].reshape(shape)


def random_bits(key: ChaChaKey, shape) -> jax.Array:
    """uint32[shape] uniform words: the ChaCha20 keystream of the key, nonce (0, s0, s1), counters 0, 1, ...

    Word ``i`` of the row-major output is word ``i mod 16`` of block ``i // 16``. At most 2^36 words.
    """
    _check_key(key)
    shape = _as_shape(shape)
    if math.prod(shape) > 16 * _MAX_BLOCKS:
        raise ParameterError(f"at most 2^36 words per key, asked for {math.prod(shape)}")
    return _random_bits(key, shape)


# --------------------------------------------------------------------------------------------------
# Reduction modulo q of wide words
# --------------------------------------------------------------------------------------------------


def _reciprocal(q):
    """``m = floor((2^64 - 1) / q)`` as ``(m_hi, m_lo)`` for 1 <= q <= 2^31, from uint32 operations only.

    m_hi and r = (2^32 - 1) mod q by one-word division; m_lo = floor((r 2^32 + 2^32 - 1) / q) by 32 steps
    of binary long division (r < q <= 2^31, so 2 r + 1 < 2^32), a loop: this runs once per modulus, off
    the per-sample path.
    """
    ones = jnp.full(q.shape, _MASK32, U32)

    def step(_, carry):
        r, m_lo = carry
        r = (r << 1) | 1
        ge = r >= q
        return jnp.where(ge, r - q, r), (m_lo << 1) | ge.astype(U32)

    _, m_lo = lax.fori_loop(0, 32, step, (lax.rem(ones, q), jnp.zeros_like(ones)))
    return lax.div(ones, q), m_lo


def _mod_wide(hi, lo, q, m_hi, m_lo):
    """``(hi 2^32 + lo) mod q`` in [0, q) for any uint32 hi, lo and 1 <= q <= 2^31. Exact.

    With Z = hi 2^32 + lo and m = floor((2^64 - 1) / q), q m >= 2^64 - q, so Z/q - 1 < Z m / 2^64 <= Z/q
    and qhat = floor(Z m / 2^64) is floor(Z/q) or one less: Z - qhat q is in [0, 2q) and is computed
    modulo 2^32 (2q <= 2^32). qhat mod 2^32 comes from the four 32 x 32-bit partial products.
    """
    t = mulhi(lo, m_lo)
    a_hi, a_lo = mul_wide(hi, m_lo)
    b_hi, b_lo = mul_wide(lo, m_hi)
    s1 = a_lo + b_lo
    s2 = s1 + t
    carry = (s1 < a_lo).astype(U32) + (s2 < s1).astype(U32)
    qhat = hi * m_hi + a_hi + b_hi + carry
    return reduce_once(lo - qhat * q, q)


def _as_moduli(q, shape: tuple[int, ...] | None):
    """q as a uint32 array with 2 <= q <= 2^31 (checked unless traced), broadcastable to ``shape``."""
    if isinstance(q, jax.core.Tracer):
        if not jnp.issubdtype(q.dtype, jnp.integer):
            raise TypeError(f"q must be an integer array, got {q.dtype}")
        arr = q.astype(U32)
    else:
        if isinstance(q, (int, np.integer)) and not 2 <= q <= 2**31:
            raise ParameterError(f"q must satisfy 2 <= q <= 2^31, got {q}")
        qn = np.asarray(q)
        if not np.issubdtype(qn.dtype, np.integer):
            raise TypeError(f"q must be an int or an integer array, got {qn.dtype}")
        if qn.size and (qn.min() < 2 or qn.max() > 2**31):
            raise ParameterError(f"q must satisfy 2 <= q <= 2^31, got values in [{qn.min()}, {qn.max()}]")
        arr = jnp.asarray(qn.astype(np.uint32))
    if shape is not None and not _broadcasts_to(arr.shape, shape):
        raise ParameterError(f"q of shape {arr.shape} does not broadcast to the sample shape {shape}")
    return arr


def _broadcasts_to(small: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    if len(small) > len(shape):
        return False
    return all(a in (1, b) for a, b in zip(reversed(small), reversed(shape)))


@partial(jit, static_argnames=("shape",))
def _uniform_mod(key: ChaChaKey, q, shape: tuple[int, ...]):
    w = _random_bits(key, (3,) + shape)
    m_hi, m_lo = _reciprocal(q)
    r = _mod_wide(w[0], w[1], q, m_hi, m_lo)
    return _mod_wide(r, w[2], q, m_hi, m_lo)


def uniform_mod(key: ChaChaKey, shape, q) -> jax.Array:
    """uint32[shape], uniform in [0, q): ``V mod q`` for the 96-bit ``V = w0 2^64 + w1 2^32 + w2``.

    ``(w0, w1, w2) = random_bits(key, (3, *shape))``; reduced exactly (``_mod_wide``, Horner in two steps).
    q: an int or an integer array broadcastable to ``shape`` with 2 <= q <= 2^31 (e.g. ``table.q`` of
    shape [limbs, 1] for samples [..., limbs, N]); it may be traced (then unchecked), and pass it
    unbroadcast: its reduction constants are computed per element of q. Statistical distance from uniform
    b (q - b) / (q 2^96) <= q / 2^98 <= 2^-67, b = 2^96 mod q (NIST SP 800-90A A.5.3, 65 extra bits).
    """
    _check_key(key)
    shape = _as_shape(shape)
    return _uniform_mod(key, _as_moduli(q, shape), shape)


# --------------------------------------------------------------------------------------------------
# The native sampler (uniform_ffi.cc) as an XLA custom call
# --------------------------------------------------------------------------------------------------

NATIVE_TARGET = "crossfhe_uniform_mod"
NATIVE_ROWS_TARGET = "crossfhe_uniform_mod_rows"
_NATIVE_SOURCES = (Path(__file__).with_name("uniform_ffi.cc"),)
_NATIVE_ABI = 2


def _load_native():
    lib, why = native.build_and_load(_NATIVE_SOURCES, "cf_uniform_abi_version", _NATIVE_ABI,
                                     hashed=(Path(__file__).with_name("ffi_parallel.h"),))
    if lib is not None:
        native.register(lib, {NATIVE_TARGET: "cf_uniform_mod_ffi", NATIVE_ROWS_TARGET: "cf_uniform_mod_rows_ffi"})
    return lib, why


NATIVE = native.Native(_load_native)
"""The native :func:`uniform_mod` over a stack of moduli (``uniform_ffi.cc``, built on first use); ``NATIVE.status()``
says where it was built or why there is none."""


def _native_call(what: str, keys: ChaChaKey, q, n: int, multiple: int) -> tuple[int, ...]:
    """The moduli of a native sampler call, after checking its arguments (ParameterError) and the build."""
    if not isinstance(keys, ChaChaKey) or len(keys.shape) != 1:
        raise ParameterError(f"{what} takes a batch of keys (words uint32[d, 8])")
    q = tuple(int(x) for x in q)
    if not q or min(q) < 2 or max(q) > 2**31:
        raise ParameterError(f"q must be moduli in [2, 2^31], got {q[:4]}...")
    if int(n) % multiple or int(n) < multiple:
        raise ParameterError(f"n must be a positive multiple of {multiple}, got {n}")
    if 3 * len(q) * int(n) // 16 > _MAX_BLOCKS:
        raise ParameterError(f"at most 2^36 words per key, asked for {3 * len(q) * int(n)}")
    NATIVE.require("the native uniform sampler")
    return q


def uniform_mod_native(keys: ChaChaKey, q: tuple[int, ...], n: int) -> jax.Array:
    """uint32 ``[d, limbs, n]``: row j is ``uniform_mod(keys[j], (limbs, n), q_col)`` (q_col = q as a column), the
    same words, from one custom call of the program (runs under ``jit``; the keys may be traced). ``keys``: a batch
    of d keys; ``q``: the moduli, each in [2, 2^31]; n a multiple of 16. Its speed against the JAX sampler:
    benchmarks/README.md. RuntimeError where the native build is missing (``NATIVE.status()``)."""
    q = _native_call("uniform_mod_native", keys, q, n, 16)
    out = jax.ShapeDtypeStruct((keys.shape[0], len(q), int(n)), U32)
    call = jax.ffi.ffi_call(NATIVE_TARGET, out, vmap_method="sequential")
    return call(keys.words.astype(U32), keys.stream.astype(U32), jnp.asarray(np.array(q, dtype=np.uint32)))


def uniform_mod_native_rows(keys: ChaChaKey, q: tuple[int, ...], rows: tuple[int, ...], n: int) -> jax.Array:
    """uint32 ``[d, len(rows), n]``: rows ``rows`` of :func:`uniform_mod_native` ``(keys, q, n)``, the same words,
    each computed alone (a key switch below the top level reads only its limbs' rows of a key's uniform part). n a
    multiple of 256; ParameterError for a row outside [0, len(q))."""
    q = _native_call("uniform_mod_native_rows", keys, q, n, 256)
    rows = tuple(int(r) for r in rows)
    if not rows or min(rows) < 0 or max(rows) >= len(q):
        raise ParameterError(f"rows must lie in [0, {len(q)}), got {rows[:4]}...")
    out = jax.ShapeDtypeStruct((keys.shape[0], len(rows), int(n)), U32)
    call = jax.ffi.ffi_call(NATIVE_ROWS_TARGET, out, vmap_method="sequential")
    return call(keys.words.astype(U32), keys.stream.astype(U32), jnp.asarray(np.array(q, dtype=np.uint32)),
                jnp.asarray(np.array(rows, dtype=np.int32)))


@partial(jit, static_argnames=("shape",))
def _ternary(key: ChaChaKey, shape: tuple[int, ...]):
    return _uniform_mod(key, jnp.full((), 3, U32), shape).astype(I32) - 1


def ternary(key: ChaChaKey, shape) -> jax.Array:
    """int32[shape], uniform in {-1, 0, 1}: ``uniform_mod(key, shape, 3) - 1`` (one program); distance
    <= 3 / 2^98."""
    _check_key(key)
    return _ternary(key, _as_shape(shape))


@jit
def _to_residues(x, q):
    neg = x < 0
    u = lax.bitcast_convert_type(x, U32)
    magnitude = jnp.where(neg, U32(0) - u, u)
    m_hi, m_lo = _reciprocal(q)
    r = _mod_wide(jnp.zeros_like(magnitude), magnitude, q, m_hi, m_lo)
    return jnp.where(neg & (r != 0), q - r, r)


def to_residues(x, q) -> jax.Array:
    """``x mod q`` in [0, q) as uint32, for signed x: int32[...] and q (as in :func:`uniform_mod`).

    Output shape: ``broadcast(x.shape, q.shape)``, e.g. x int32[..., 1, N] and q [limbs, 1] give
    [..., limbs, N]. Exact for every int32 x.
    """
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.signedinteger) or x.dtype.itemsize > 4:
        raise TypeError(f"x must be a signed integer array of at most 32 bits, got {x.dtype}")
    return _to_residues(x.astype(I32), _as_moduli(q, None))


# --------------------------------------------------------------------------------------------------
# Fixed Hamming weight
# --------------------------------------------------------------------------------------------------


@partial(jit, static_argnames=("shape", "h"))
def _ternary_hamming(key: ChaChaKey, shape: tuple[int, ...], h: int):
    w = _random_bits(key, (4,) + shape)
    index = lax.broadcasted_iota(U32, shape, len(shape) - 1)
    order = lax.sort((w[0], w[1], w[2], index), num_keys=4)[-1]
    rank = lax.sort((order, index), num_keys=1)[-1]
    sign = 1 - 2 * (w[3] & 1).astype(I32)
    return jnp.where(rank < h, sign, 0)


def ternary_hamming(key: ChaChaKey, shape_prefix, n: int, h: int) -> jax.Array:
    """int32[*shape_prefix, n]: each length-n vector has exactly h entries ±1 (signs uniform), the rest 0.

    The support is the h indices of smallest 96-bit random sort key; it is a uniform h-subset unless two of
    the n keys of a vector tie, which has probability <= n (n - 1) / 2^97 (< 2^-65 for n <= 2^16; ties are
    broken by index). Signs are the low bits of independent words.
    """
    _check_key(key)
    shape = _as_shape(shape_prefix) + _as_shape(n)
    if not isinstance(h, (int, np.integer)) or not 0 <= h <= shape[-1] or shape[-1] >= 2**32:
        raise ParameterError(f"need 0 <= h <= n < 2^32, got n = {n}, h = {h}")
    return _ternary_hamming(key, shape, int(h))


# --------------------------------------------------------------------------------------------------
# Discrete Gaussian (cumulative distribution table)
# --------------------------------------------------------------------------------------------------


@plan_cache(maxsize=32)
def _gaussian_cdt(sigma: float, tail: float) -> np.ndarray:
    bound = math.ceil(tail * sigma)
    far = max(bound, math.ceil(17 * sigma))  # exp(-17^2 / 2) < 2^-208: the mass beyond is negligible
    with decimal.localcontext() as ctx:
        ctx.prec = 120
        two_s2 = 2 * decimal.Decimal(sigma) ** 2
        weight = [(-decimal.Decimal(k * k) / two_s2).exp() * (1 if k == 0 else 2) for k in range(far + 1)]
        above = [decimal.Decimal(0)] * (far + 1)
        for k in range(far - 1, -1, -1):
            above[k] = above[k + 1] + weight[k + 1]
        limit = sum(weight) * decimal.Decimal(2) ** -64
        if above[bound] >= limit:
            need = next(k for k in range(far + 1) if above[k] < limit)
            log2_cut = float((above[bound] / sum(weight)).ln() / decimal.Decimal(2).ln())
            raise ParameterError(
                f"tail = {tail} cuts probability mass 2^{log2_cut:.1f} >= 2^-64 at sigma = {sigma}; "
                f"use tail >= {need / sigma:.2f}"
            )
        inside = sum(weight[: bound + 1])
        thresholds = []
        cdf = decimal.Decimal(0)
        for k in range(bound):
            cdf += weight[k]
            t = int((cdf / inside * 2**96).to_integral_value(rounding=decimal.ROUND_HALF_EVEN))
            if t >= 2**96:
                break
            thresholds.append(t)
    table = np.array([[t >> 64, (t >> 32) & _MASK32, t & _MASK32] for t in thresholds], dtype=np.uint32)
    table = table.reshape(-1, 3).T.copy()
    table.setflags(write=False)
    return table


def gaussian_cdt(sigma: float = 3.19, tail: float = 13.0) -> np.ndarray:
    """The table of :func:`discrete_gaussian`: uint32[3, K'] words (hi, mid, lo) of 96-bit thresholds.

    For X ~ D_{Z,sigma} restricted to [-K, K], K = ceil(tail sigma): t_k = round(2^96 P(|X| <= k)) for
    k = 0, 1, ..., kept while t_k < 2^96 (K' <= K entries). Computed with 120-digit decimals; cached.
    Raises ParameterError if the mass of D_{Z,sigma} outside [-K, K] is not below 2^-64 (tail >~ 9.5)
    or sigma is not in (0, 128].
    """
    sigma = float(sigma)
    tail = float(tail)
    if not (math.isfinite(sigma) and 0 < sigma <= _MAX_SIGMA):
        raise ParameterError(f"sigma must be in (0, {_MAX_SIGMA:g}] for the CDT sampler, got {sigma}")
    if not (math.isfinite(tail) and tail > 0):
        raise ParameterError(f"tail must be a positive multiple of sigma, got {tail}")
    return _gaussian_cdt(sigma, tail)


@partial(jit, static_argnames=("shape",))
def _cdt_sample(key: ChaChaKey, table, shape: tuple[int, ...]):
    w = _random_bits(key, (4,) + shape)
    u2, u1, u0 = (x[..., None] for x in (w[0], w[1], w[2]))
    t2, t1, t0 = table[0], table[1], table[2]
    at_least = (u2 > t2) | ((u2 == t2) & ((u1 > t1) | ((u1 == t1) & (u0 >= t0))))
    magnitude = jnp.sum(at_least, axis=-1, dtype=I32)
    return jnp.where((w[3] & 1) == 1, -magnitude, magnitude)


def discrete_gaussian(key: ChaChaKey, shape, sigma: float = 3.19, *, tail: float = 13.0) -> jax.Array:
    """int32[shape] from the centered discrete Gaussian D_{Z,sigma}: P(x) ~ exp(-x^2 / (2 sigma^2)).

    |x| = #{k : u >= t_k} for a 96-bit uniform u and the table t of :func:`gaussian_cdt` (passed to the
    kernel as an argument); the sign is an independent bit (P(x) = P(|x|) / 2 for x != 0). Values in
    [-K, K], K = ceil(tail sigma). Distance from D_{Z,sigma}: tail mass < 2^-64 plus table rounding
    (<= 2^-96 per value, < 2^-90 in all for K <= 64).
    """
    _check_key(key)
    table = gaussian_cdt(sigma, tail)
    return _cdt_sample(key, jnp.asarray(table), _as_shape(shape))


# --------------------------------------------------------------------------------------------------
# Centered binomial
# --------------------------------------------------------------------------------------------------


@partial(jit, static_argnames=("shape", "eta"))
def _centered_binomial(key: ChaChaKey, shape: tuple[int, ...], eta: int):
    if 2 * eta <= 32:
        w = _random_bits(key, shape)
        mask = (1 << eta) - 1
        a = lax.population_count(w & mask).astype(I32)
        b = lax.population_count((w >> eta) & mask).astype(I32)
        return a - b
    words = -(-eta // 32)
    w = _random_bits(key, (2, words) + shape)
    masks = np.full((words,), _MASK32, dtype=np.uint32)
    masks[-1] = (1 << (eta - 32 * (words - 1))) - 1
    masks = jnp.asarray(masks).reshape((1, words) + (1,) * len(shape))
    counts = jnp.sum(lax.population_count(w & masks).astype(I32), axis=1, dtype=I32)
    return counts[0] - counts[1]


def centered_binomial(key: ChaChaKey, shape, eta: int) -> jax.Array:
    """int32[shape]: sum of eta uniform bits minus the sum of eta others; values in [-eta, eta].

    Exact: P(x) = C(2 eta, eta + x) / 4^eta, mean 0, variance eta / 2. One word per sample for
    eta <= 16, else 2 ceil(eta / 32).
    """
    _check_key(key)
    if not isinstance(eta, (int, np.integer)) or not 1 <= eta <= _MAX_ETA:
        raise ParameterError(f"eta must be an integer in [1, 2^16], got {eta!r}")
    return _centered_binomial(key, _as_shape(shape), int(eta))
