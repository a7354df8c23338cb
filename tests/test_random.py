"""Tests of crossfhe.math.random: RFC 8439 vectors, key derivation, and the samplers' distributions.

Statistical tests reject at a false-alarm rate of about 1e-6 each, so the file as a whole fails by chance
with probability below 1e-4; keys are fixed, so a run is reproducible.
"""

from __future__ import annotations

import itertools
import math
import struct

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crossfhe.errors import ParameterError
from crossfhe.math import random as R

# One-sided N(0, 1) quantile for a false-alarm rate of 1e-6; two-sided tests use Z_TWO_SIDED = 5.0
# (P(|N(0, 1)| > 5) = 5.7e-7).
Z_ONE_SIDED = 4.7534
Z_TWO_SIDED = 5.0
MASK32 = 0xFFFFFFFF


def chi2_threshold(df: int) -> float:
    """Upper 1e-6 quantile of chi-square with df degrees of freedom (Wilson-Hilferty approximation)."""
    c = 2.0 / (9.0 * df)
    return df * (1.0 - c + Z_ONE_SIDED * math.sqrt(c)) ** 3


def chi2_statistic(counts, expected) -> float:
    counts = np.asarray(counts, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    return float(np.sum((counts - expected) ** 2 / expected))


def words_le(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<u4").astype(np.uint32)


def to_bytes(words) -> bytes:
    return np.asarray(words).astype("<u4").tobytes()


def hexbytes(text: str) -> bytes:
    return bytes.fromhex("".join(text.split()))


@pytest.fixture(scope="module")
def key():
    return R.seed_key(bytes(range(100, 132)))


# --------------------------------------------------------------------------------------------------
# A plain-Python ChaCha20 (RFC 8439 §2.1-2.3), the reference for the vector kernel
# --------------------------------------------------------------------------------------------------


def _ref_quarter(x, a, b, c, d):
    def rotl(v, n):
        return ((v << n) | (v >> (32 - n))) & MASK32

    x[a] = (x[a] + x[b]) & MASK32
    x[d] = rotl(x[d] ^ x[a], 16)
    x[c] = (x[c] + x[d]) & MASK32
    x[b] = rotl(x[b] ^ x[c], 12)
    x[a] = (x[a] + x[b]) & MASK32
    x[d] = rotl(x[d] ^ x[a], 8)
    x[c] = (x[c] + x[d]) & MASK32
    x[b] = rotl(x[b] ^ x[c], 7)


def ref_block(key: bytes, counter: int, nonce: bytes) -> bytes:
    state = [0x61707865, 0x3320646E, 0x79622D32, 0x6B206574]
    state += list(struct.unpack("<8I", key)) + [counter] + list(struct.unpack("<3I", nonce))
    x = list(state)
    for _ in range(10):
        for q in ((0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15)):
            _ref_quarter(x, *q)
        for q in ((0, 5, 10, 15), (1, 6, 11, 12), (2, 7, 8, 13), (3, 4, 9, 14)):
            _ref_quarter(x, *q)
    return struct.pack("<16I", *((x[i] + state[i]) & MASK32 for i in range(16)))


# --------------------------------------------------------------------------------------------------
# RFC 8439 known-answer vectors
# --------------------------------------------------------------------------------------------------

KEY_0_TO_31 = bytes(range(32))

# RFC 8439 §2.3.2, "Test Vector for the ChaCha20 Block Function": serialized block.
BLOCK_2_3_2 = hexbytes(
    """
    10 f1 e7 e4 d1 3b 59 15 50 0f dd 1f a3 20 71 c4 c7 d1 f4 c7 33 c0 68 03 04 22 aa 9a c3 d4 6c 4e
    d2 82 64 46 07 9f aa 09 14 c2 d7 05 d9 8b 02 a2 b5 12 9c d1 de 16 4e b9 cb d0 83 e8 a2 50 3c 4e
    """
)

# RFC 8439 Appendix A.1, "ChaCha20 Block Functions", test vectors #1-#5: (key, counter, nonce, block).
A1_VECTORS = {
    1: (bytes(32), 0, bytes(12),
        "76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7"
        "da41597c5157488d7724e03fb8d84a376a43b8f41518a11cc387b669b2ee6586"),
    2: (bytes(32), 1, bytes(12),
        "9f07e7be5551387a98ba977c732d080dcb0f29a048e3656912c6533e32ee7aed"
        "29b721769ce64e43d57133b074d839d531ed1f28510afb45ace10a1f4b794d6f"),
    3: (bytes(31) + b"\x01", 1, bytes(12),
        "3aeb5224ecf849929b9d828db1ced4dd832025e8018b8160b82284f3c949aa5a"
        "8eca00bbb4a73bdad192b5c42f73f2fd4e273644c8b36125a64addeb006c13a0"),
    4: (b"\x00\xff" + bytes(30), 2, bytes(12),
        "72d54dfbf12ec44b362692df94137f328fea8da73990265ec1bbbea1ae9af0ca"
        "13b25aa26cb4a648cb9b9d1be65b2c0924a66c54d545ec1b7374f4872e99f096"),
    5: (bytes(32), 0, bytes(11) + b"\x02",
        "c2c64d378cd536374ae204b9ef933fcd1a8b2288b3dfa49672ab765b54ee27c7"
        "8a970e0e955c14f3a88e741b97c286f75f8fc299e8148362fa198a39531bed6d"),
}  # fmt: skip

A2_3_KEY = hexbytes(
    "1c 92 40 a5 eb 55 d3 8a f3 33 88 86 04 f6 b5 f0 47 39 17 c1 40 2b 80 09 9d ca 5c bc 20 70 75 c0"
)
SUNSCREEN = (
    b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, "
    b"sunscreen would be it."
)
IETF_CONTRIBUTION = (
    b"Any submission to the IETF intended by the Contributor for publication as all or part of an IETF "
    b"Internet-Draft or RFC and any statement made within the context of an IETF activity is considered "
    b'an "IETF Contribution". Such statements include oral statements in IETF sessions, as well as '
    b"written and electronic communications made at any time or place, which are addressed to"
)
JABBERWOCKY = (
    b"'Twas brillig, and the slithy toves\nDid gyre and gimble in the wabe:\n"
    b"All mimsy were the borogoves,\nAnd the mome raths outgrabe."
)

# RFC 8439 §2.4.2 ("Example and Test Vector for the ChaCha20 Cipher") and Appendix A.2 ("ChaCha20
# Encryption", test vectors #1-#3): (key, nonce, initial counter, plaintext, ciphertext).
ENCRYPTION_VECTORS = {
    "rfc8439-2.4.2/counter=1": (
        KEY_0_TO_31, hexbytes("00 00 00 00 00 00 00 4a 00 00 00 00"), 1, SUNSCREEN,
        """
        6e 2e 35 9a 25 68 f9 80 41 ba 07 28 dd 0d 69 81 e9 7e 7a ec 1d 43 60 c2 0a 27 af cc fd 9f ae 0b
        f9 1b 65 c5 52 47 33 ab 8f 59 3d ab cd 62 b3 57 16 39 d6 24 e6 51 52 ab 8f 53 0c 35 9f 08 61 d8
        07 ca 0d bf 50 0d 6a 61 56 a3 8e 08 8a 22 b6 5e 52 bc 51 4d 16 cc f8 06 81 8c e9 1a b7 79 37 36
        5a f9 0b bf 74 a3 5b e6 b4 0b 8e ed f2 78 5e 42 87 4d
        """,
    ),
    "rfc8439-A.2#1/counter=0": (
        bytes(32), bytes(12), 0, bytes(64),
        """
        76 b8 e0 ad a0 f1 3d 90 40 5d 6a e5 53 86 bd 28 bd d2 19 b8 a0 8d ed 1a a8 36 ef cc 8b 77 0d c7
        da 41 59 7c 51 57 48 8d 77 24 e0 3f b8 d8 4a 37 6a 43 b8 f4 15 18 a1 1c c3 87 b6 69 b2 ee 65 86
        """,
    ),
    "rfc8439-A.2#2/counter=1": (
        bytes(31) + b"\x01", bytes(11) + b"\x02", 1, IETF_CONTRIBUTION,
        """
        a3 fb f0 7d f3 fa 2f de 4f 37 6c a2 3e 82 73 70 41 60 5d 9f 4f 4f 57 bd 8c ff 2c 1d 4b 79 55 ec
        2a 97 94 8b d3 72 29 15 c8 f3 d3 37 f7 d3 70 05 0e 9e 96 d6 47 b7 c3 9f 56 e0 31 ca 5e b6 25 0d
        40 42 e0 27 85 ec ec fa 4b 4b b5 e8 ea d0 44 0e 20 b6 e8 db 09 d8 81 a7 c6 13 2f 42 0e 52 79 50
        42 bd fa 77 73 d8 a9 05 14 47 b3 29 1c e1 41 1c 68 04 65 55 2a a6 c4 05 b7 76 4d 5e 87 be a8 5a
        d0 0f 84 49 ed 8f 72 d0 d6 62 ab 05 26 91 ca 66 42 4b c8 6d 2d f8 0e a4 1f 43 ab f9 37 d3 25 9d
        c4 b2 d0 df b4 8a 6c 91 39 dd d7 f7 69 66 e9 28 e6 35 55 3b a7 6c 5c 87 9d 7b 35 d4 9e b2 e6 2b
        08 71 cd ac 63 89 39 e2 5e 8a 1e 0e f9 d5 28 0f a8 ca 32 8b 35 1c 3c 76 59 89 cb cf 3d aa 8b 6c
        cc 3a af 9f 39 79 c9 2b 37 20 fc 88 dc 95 ed 84 a1 be 05 9c 64 99 b9 fd a2 36 e7 e8 18 b0 4b 0b
        c3 9c 1e 87 6b 19 3b fe 55 69 75 3f 88 12 8c c0 8a aa 9b 63 d1 a1 6f 80 ef 25 54 d7 18 9c 41 1f
        58 69 ca 52 c5 b8 3f a3 6f f2 16 b9 c1 d3 00 62 be bc fd 2d c5 bc e0 91 19 34 fd a7 9a 86 f6 e6
        98 ce d7 59 c3 ff 9b 64 77 33 8f 3d a4 f9 cd 85 14 ea 99 82 cc af b3 41 b2 38 4d d9 02 f3 d1 ab
        7a c6 1d d2 9c 6f 21 ba 5b 86 2f 37 30 e3 7c fd c4 fd 80 6c 22 f2 21
        """,
    ),
    "rfc8439-A.2#3/counter=42": (
        A2_3_KEY,
        bytes(11) + b"\x02", 42, JABBERWOCKY,
        """
        62 e6 34 7f 95 ed 87 a4 5f fa e7 42 6f 27 a1 df 5f b6 91 10 04 4c 0d 73 11 8e ff a9 5b 01 e5 cf
        16 6d 3d f2 d7 21 ca f9 b2 1e 5f b1 4c 61 68 71 fd 84 c5 4f 9d 65 b2 83 19 6c 7f e4 f6 05 53 eb
        f3 9c 64 02 c4 22 34 e3 2a 35 6b 3e 76 43 12 a6 1a 55 32 05 57 16 ea d6 96 25 68 f8 7d 3f 3f 77
        04 c6 a8 d1 bc d1 bf 4d 50 d6 15 4b 6d a7 31 b1 87 b5 8d fd 72 8a fa 36 75 7a 79 7a c1 88 d1
        """,
    ),
}  # fmt: skip


def test_block_function_rfc8439_2_3_2():
    nonce = hexbytes("00 00 00 09 00 00 00 4a 00 00 00 00")
    out = R.chacha20_block(words_le(KEY_0_TO_31), 1, words_le(nonce))
    assert to_bytes(out) == BLOCK_2_3_2


@pytest.mark.parametrize("vector", sorted(A1_VECTORS), ids=lambda v: f"rfc8439-A.1#{v}")
def test_block_function_rfc8439_appendix_a1(vector):
    key, counter, nonce, expected = A1_VECTORS[vector]
    out = R.chacha20_block(words_le(key), counter, words_le(nonce))
    assert to_bytes(out) == bytes.fromhex(expected)


@pytest.mark.parametrize("name", sorted(ENCRYPTION_VECTORS))
def test_random_bits_is_the_rfc8439_keystream(name):
    """random_bits of seed_key(k, stream=s) is the RFC keystream of key k, nonce (0, s0, s1), counter 0.."""
    key, nonce, counter, plaintext, ciphertext = ENCRYPTION_VECTORS[name]
    ciphertext = hexbytes(ciphertext)
    assert len(ciphertext) == len(plaintext)
    n0, s0, s1 = words_le(nonce)
    assert n0 == 0
    words = R.random_bits(R.seed_key(key, stream=int(s0) | int(s1) << 32), (16 * 50,))
    stream = to_bytes(words)[64 * counter : 64 * counter + len(plaintext)]
    assert bytes(p ^ s for p, s in zip(plaintext, stream)) == ciphertext


@settings(max_examples=40, deadline=None)
@given(
    key=st.binary(min_size=32, max_size=32),
    nonce=st.binary(min_size=12, max_size=12),
    counter=st.one_of(st.sampled_from([0, 1, MASK32]), st.integers(0, MASK32)),
)
def test_block_matches_python_reference(key, nonce, counter):
    out = R.chacha20_block(words_le(key), np.uint32(counter), words_le(nonce))
    assert to_bytes(out) == ref_block(key, counter, nonce)


def test_many_blocks_match_python_reference_across_passes():
    """2500 counters (more than one pass of 2048 blocks), wrapping past 2^32 - 1, keep their order."""
    key, nonce = bytes(range(7, 39)), bytes(range(12))
    counters = (np.arange(2500, dtype=np.uint64) + (2**32 - 1000)) % 2**32
    out = np.asarray(R.chacha20_block(words_le(key), counters.astype(np.uint32), words_le(nonce)))
    assert out.shape == (2500, 16)
    for i in (0, 999, 1000, 2047, 2048, 2499):
        assert to_bytes(out[i]) == ref_block(key, int(counters[i]), nonce)


# --------------------------------------------------------------------------------------------------
# Keys: seeding, split, fold_in
# --------------------------------------------------------------------------------------------------


def test_seed_key_is_reproducible_and_seeds_differ():
    seed = bytes(range(32))
    a = R.random_bits(R.seed_key(seed), (64,))
    b = R.random_bits(R.seed_key(bytearray(seed)), (64,))
    np.testing.assert_array_equal(a, b)
    other_seed = R.random_bits(R.seed_key(seed[:-1] + b"\x00"), (64,))
    other_stream = R.random_bits(R.seed_key(seed, stream=1), (64,))
    fresh = [R.random_bits(R.seed_key(), (64,)) for _ in range(2)]
    for x in (other_seed, other_stream, *fresh):
        assert np.count_nonzero(np.asarray(x) != np.asarray(a)) > 60
    assert np.count_nonzero(np.asarray(fresh[0]) != np.asarray(fresh[1])) > 60


@pytest.mark.parametrize(
    "seed, error",
    [
        (b"", ParameterError),
        (bytes(31), ParameterError),
        (bytes(33), ParameterError),
        ("0" * 32, TypeError),
        (12345, TypeError),
        (list(range(32)), TypeError),
        (np.zeros(32, dtype=np.uint8), TypeError),
    ],
    ids=["length=0", "length=31", "length=33", "type=str", "type=int", "type=list", "type=ndarray"],
)
def test_bad_seed_raises(seed, error):
    with pytest.raises(error, match="seed must be"):
        R.seed_key(seed)


def test_bad_seed_length_is_a_value_error():
    with pytest.raises(ValueError, match="32 bytes"):
        R.seed_key(bytes(16))


@pytest.mark.parametrize(
    "stream", [-1, 2**64, 1.5, True], ids=["stream=-1", "stream=2^64", "stream=1.5", "stream=True"]
)
def test_bad_stream_raises(stream):
    with pytest.raises(ParameterError, match="stream"):
        R.seed_key(bytes(32), stream=stream)


def test_split_and_fold_in_follow_the_documented_derivation(key):
    s0, s1 = (int(w) for w in np.asarray(key.stream))
    children = R.split(key, 5)
    blocks = R.chacha20_block(key.words, np.arange(5, dtype=np.uint32), np.array([1, s0, s1], np.uint32))
    np.testing.assert_array_equal(children.words, np.asarray(blocks)[:, :8])
    np.testing.assert_array_equal(children.stream, np.zeros((5, 2), np.uint32))
    folded = R.fold_in(key, 12345)
    block = R.chacha20_block(key.words, 12345, np.array([2, s0, s1], np.uint32))
    np.testing.assert_array_equal(folded.words, np.asarray(block)[:8])
    bits = R.random_bits(key, (64,))
    blocks = R.chacha20_block(key.words, np.arange(4, dtype=np.uint32), np.array([0, s0, s1], np.uint32))
    np.testing.assert_array_equal(bits, np.asarray(blocks).reshape(-1))


def test_children_are_distinct_from_each_other_and_the_parent(key):
    children = R.split(key, 64)
    folded = [R.fold_in(key, d) for d in (0, 1, 2, 2**32 - 1)]
    words = [tuple(np.asarray(key.words))] + [tuple(np.asarray(c.words)) for c in children]
    words += [tuple(np.asarray(f.words)) for f in folded]
    assert len(set(words)) == len(words)
    first, second = R.split(key)
    a, b = R.random_bits(first, (64,)), R.random_bits(second, (64,))
    assert np.count_nonzero(np.asarray(a) != np.asarray(b)) > 60
    np.testing.assert_array_equal(R.split(key, 64).words, children.words)


def test_fold_in_with_traced_data_matches_eager(key):
    traced = jax.jit(R.fold_in)(key, jnp.uint32(77))
    np.testing.assert_array_equal(traced.words, R.fold_in(key, 77).words)


def test_vmap_over_split_keys_matches_each_key(key):
    keys = R.split(key, 5)
    batched = jax.vmap(lambda k: R.random_bits(k, (64,)))(keys)
    for i, k in enumerate(keys):
        np.testing.assert_array_equal(batched[i], R.random_bits(k, (64,)))


def test_rng_is_reproducible_and_gives_fresh_keys():
    seed = bytes(range(1, 33))
    a, b = R.Rng(seed), R.Rng(seed)
    keys_a = [a.next_key() for _ in range(4)]
    keys_b = [b.next_key() for _ in range(4)]
    for ka, kb in zip(keys_a, keys_b):
        np.testing.assert_array_equal(ka.words, kb.words)
    assert len({tuple(np.asarray(k.words)) for k in keys_a}) == 4
    c = R.Rng.from_key(R.seed_key(seed))
    np.testing.assert_array_equal(c.next_key().words, keys_a[0].words)


def test_repr_does_not_show_the_key(key):
    assert repr(key) == "ChaChaKey(shape=())"
    assert repr(R.split(key, 4)) == "ChaChaKey(shape=(4,))"
    assert repr(R.Rng(bytes(32))) == "Rng()"


def test_bad_keys_and_arguments_raise(key):
    with pytest.raises(TypeError, match="ChaChaKey"):
        R.random_bits(np.zeros(8, np.uint32), (4,))
    with pytest.raises(ParameterError, match="batch"):
        R.random_bits(R.split(key, 2), (4,))
    with pytest.raises(ParameterError, match="data"):
        R.fold_in(key, 2**32)
    with pytest.raises(ParameterError, match="num"):
        R.split(key, 0)
    with pytest.raises(ParameterError, match="shape"):
        R.random_bits(key, (-1,))
    with pytest.raises(TypeError, match="no length"):
        len(key)


# --------------------------------------------------------------------------------------------------
# Exact reductions
# --------------------------------------------------------------------------------------------------

TABLE_Q = np.array([[2], [3], [7], [65537], [1032193], [2**31 - 1], [2**31]], dtype=np.uint32)


def test_uniform_mod_is_the_documented_96_bit_reduction(key):
    shape = (7, 512)
    out = np.asarray(R.uniform_mod(key, shape, TABLE_Q))
    w = np.asarray(R.random_bits(key, (3,) + shape))
    for (i, j), r in np.ndenumerate(out):
        v = int(w[0, i, j]) << 64 | int(w[1, i, j]) << 32 | int(w[2, i, j])
        assert r == v % int(TABLE_Q[i, 0])


def _native_or_skip():
    from crossfhe.kernels import NATIVE, default_kernels

    if default_kernels() is not NATIVE:  # the custom call is CPU-only and needs a compiler (the JAX sampler is tested)
        pytest.skip("no native CPU kernels here (a GPU backend, or no compiler)")


@pytest.mark.parametrize("n", [16, 512])
def test_native_uniform_mod_gives_the_jax_words(key, n):
    """uniform_mod_native: row j is uniform_mod(keys[j], (limbs, n), q) word for word, the moduli of TABLE_Q (2 to
    2^31), keys with a stream id of their own, under jit and eagerly."""
    _native_or_skip()
    q = tuple(int(x) for x in TABLE_Q[:, 0])
    parents = R.split(key, 3)
    keys = R.ChaChaKey(parents.words, jnp.array([[0, 0], [5, 7], [2**32 - 1, 1]], dtype=jnp.uint32))
    want = np.stack([np.asarray(R.uniform_mod(keys[j], (len(q), n), TABLE_Q)) for j in range(3)])
    assert np.array_equal(np.asarray(R.uniform_mod_native(keys, q, n)), want)
    assert np.array_equal(np.asarray(jax.jit(lambda k: R.uniform_mod_native(k, q, n))(keys)), want)


def test_native_uniform_mod_rows_are_the_arrays_rows(key):
    """uniform_mod_native_rows: any rows, in any order and repeated, of uniform_mod_native's arrays, word for word;
    bad rows and sizes refused."""
    _native_or_skip()
    q = tuple(int(x) for x in TABLE_Q[:, 0])
    keys = R.split(key, 3)
    full = np.asarray(R.uniform_mod_native(keys, q, 512))
    for rows in ((0,), (6, 0, 3), (2, 2, 5, 1, 4)):
        got = np.asarray(jax.jit(lambda k, rows=rows: R.uniform_mod_native_rows(k, q, rows, 512))(keys))
        assert np.array_equal(got, full[:, list(rows)])
    with pytest.raises(ParameterError, match=r"rows must lie in \[0, 7\)"):
        R.uniform_mod_native_rows(keys, q, (7,), 512)
    with pytest.raises(ParameterError, match="multiple of 256"):
        R.uniform_mod_native_rows(keys, q, (0,), 128)


def test_native_uniform_mod_refuses_bad_arguments(key):
    _native_or_skip()
    keys = R.split(key, 2)
    with pytest.raises(ParameterError, match="batch of keys"):
        R.uniform_mod_native(key, (7,), 16)
    with pytest.raises(ParameterError, match=r"\[2, 2\^31\]"):
        R.uniform_mod_native(keys, (2**31 + 1,), 16)
    with pytest.raises(ParameterError, match="multiple of 16"):
        R.uniform_mod_native(keys, (7,), 24)


_mod_wide_kernel = jax.jit(lambda hi, lo, q: R._mod_wide(hi, lo, q, *R._reciprocal(q)))
_EDGE_WORDS = st.one_of(st.sampled_from([0, 1, 2**31 - 1, 2**31, MASK32 - 1, MASK32]), st.integers(0, MASK32))


@settings(max_examples=60, deadline=None)
@given(
    hi=st.lists(_EDGE_WORDS, min_size=32, max_size=32),
    lo=st.lists(_EDGE_WORDS, min_size=32, max_size=32),
    q=st.one_of(st.sampled_from([2, 3, 2**16 + 1, 2**31 - 1, 2**31]), st.integers(2, 2**31)),
)
def test_wide_reduction_is_exact(hi, lo, q):
    out = np.asarray(_mod_wide_kernel(np.array(hi, np.uint32), np.array(lo, np.uint32), np.uint32(q)))
    assert [int(r) for r in out] == [(h << 32 | low) % q for h, low in zip(hi, lo)]


@settings(max_examples=60, deadline=None)
@given(
    x=st.lists(
        st.one_of(st.sampled_from([-(2**31), -1, 0, 1, 2**31 - 1]), st.integers(-(2**31), 2**31 - 1)),
        min_size=32,
        max_size=32,
    ),
    q=st.one_of(st.sampled_from([2, 3, 12289, 2**31 - 1, 2**31]), st.integers(2, 2**31)),
)
def test_to_residues_is_exact(x, q):
    out = np.asarray(R.to_residues(np.array(x, np.int32), q))
    assert out.dtype == np.uint32
    assert [int(r) for r in out] == [v % q for v in x]


def test_to_residues_broadcasts_over_a_modulus_table(key):
    x = R.discrete_gaussian(key, (128,)).reshape(2, 1, 64)
    out = np.asarray(R.to_residues(x, TABLE_Q))
    assert out.shape == (2, 7, 64)
    expected = np.asarray(x).astype(np.int64) % TABLE_Q.astype(np.int64)
    np.testing.assert_array_equal(out, expected)


def test_bad_moduli_raise(key):
    for q in (0, 1, 2**31 + 1):
        with pytest.raises(ParameterError, match="2 <= q <= 2\\^31"):
            R.uniform_mod(key, (4,), q)
    with pytest.raises(ParameterError, match="broadcast"):
        R.uniform_mod(key, (4, 8), np.array([[3], [5], [7]]))
    with pytest.raises(TypeError, match="integer"):
        R.uniform_mod(key, (4,), 3.0)


# --------------------------------------------------------------------------------------------------
# Distributions
# --------------------------------------------------------------------------------------------------

N_SAMPLES = 2**20


@pytest.mark.parametrize("q", [2, 3, 17, 257, 1000], ids=lambda q: f"q={q}")
def test_uniform_mod_small_q_chi_square(key, q):
    """Pearson chi-square of the q cell counts against uniform; df = q - 1, rejected at 1e-6."""
    x = np.asarray(R.uniform_mod(R.fold_in(key, q), (N_SAMPLES,), q))
    assert x.dtype == np.uint32 and x.max() < q
    counts = np.bincount(x, minlength=q)
    assert chi2_statistic(counts, np.full(q, N_SAMPLES / q)) < chi2_threshold(q - 1)


def test_uniform_mod_table_in_range_with_uniform_mean_per_limb(key):
    """Samples [2, limbs, 2^15] against q [limbs, 1]: each limb below its q, mean (q-1)/2 within 5 sd.

    The sample mean of n uniform values on [0, q) has sd sqrt((q^2 - 1) / 12 n); |z| > 5 has probability
    5.7e-7 per limb (normal approximation, n = 2^16 per limb).
    """
    q = TABLE_Q[2:]
    x = np.asarray(R.uniform_mod(key, (2, len(q), 2**15), q)).astype(np.float64)
    assert np.all(x < q)
    n = 2 * 2**15
    for i, qi in enumerate(q[:, 0].astype(np.float64)):
        sd = math.sqrt((qi * qi - 1) / (12 * n))
        assert abs(x[:, i].mean() - (qi - 1) / 2) < Z_TWO_SIDED * sd
        assert x[:, i].max() >= (qi - 1) * (1 - 1e-3)


def test_ternary_frequencies(key):
    """Cells -1, 0, 1 against 1/3 each: chi-square df = 2, rejected at 1e-6."""
    x = np.asarray(R.ternary(key, (N_SAMPLES,)))
    assert x.dtype == np.int32 and set(np.unique(x)) <= {-1, 0, 1}
    counts = np.bincount(x + 1, minlength=3)
    assert chi2_statistic(counts, np.full(3, N_SAMPLES / 3)) < chi2_threshold(2)


def test_ternary_hamming_has_weight_h_and_uniform_positions(key):
    """512 vectors, n = 1024, h = 64: weight exactly h; index counts and signs uniform.

    Count c_i of vectors with index i in the support is Binomial(512, p = h/n); X = sum (c_i - 512 p)^2 /
    (512 p (1 - p)) has mean n and is close to chi-square with n - 1 df scaled by n/(n-1); it is compared
    with the 1e-6 quantile for n df. Sign count of the 512 h nonzeros: within 5 sd of half.
    """
    rows, n, h = 512, 1024, 64
    x = np.asarray(R.ternary_hamming(key, (rows,), n, h))
    assert x.shape == (rows, n) and x.dtype == np.int32
    assert set(np.unique(x)) <= {-1, 0, 1}
    np.testing.assert_array_equal(np.count_nonzero(x, axis=1), np.full(rows, h))
    counts = np.count_nonzero(x, axis=0)
    p = h / n
    stat = float(np.sum((counts - rows * p) ** 2) / (rows * p * (1 - p)))
    assert stat < chi2_threshold(n)
    plus, total = np.count_nonzero(x == 1), rows * h
    assert abs(plus - total / 2) < Z_TWO_SIDED * math.sqrt(total) / 2


def test_ternary_hamming_support_is_a_uniform_subset(key):
    """n = 4, h = 2: the 6 supports of 2^16 vectors against 1/6 each; chi-square df = 5 at 1e-6."""
    x = np.asarray(R.ternary_hamming(key, (2**16,), 4, 2))
    supports = [tuple(np.flatnonzero(row)) for row in x != 0]
    cells = list(itertools.combinations(range(4), 2))
    counts = [supports.count(c) for c in cells]
    assert sum(counts) == 2**16
    assert chi2_statistic(counts, np.full(6, 2**16 / 6)) < chi2_threshold(5)


@pytest.mark.parametrize("h", [0, 16], ids=lambda h: f"n=16/h={h}")
def test_ternary_hamming_extreme_weights(key, h):
    x = np.asarray(R.ternary_hamming(key, (3,), 16, h))
    np.testing.assert_array_equal(np.count_nonzero(x, axis=1), np.full(3, h))


def test_ternary_hamming_rejects_bad_weight(key):
    with pytest.raises(ParameterError, match="h <= n"):
        R.ternary_hamming(key, (2,), 8, 9)


def _gaussian_pmf(sigma: float, tail: float) -> dict[int, float]:
    """P(x) of the sampler, exactly as its table defines it: P(|x| = k) = (t_k - t_{k-1}) / 2^96."""
    t = R.gaussian_cdt(sigma, tail).astype(object)
    thresholds = [int(a) << 64 | int(b) << 32 | int(c) for a, b, c in zip(*t)]
    bounds = [0] + thresholds + [2**96]
    pmf = {}
    for k in range(len(bounds) - 1):
        p = (bounds[k + 1] - bounds[k]) / 2**96
        pmf[k] = p if k == 0 else p / 2
        if k:
            pmf[-k] = p / 2
    return pmf


@pytest.mark.parametrize("sigma", [3.19, 8.0], ids=lambda s: f"sigma={s}")
def test_discrete_gaussian_moments_and_tail(key, sigma):
    """Mean 0 and variance sigma^2 within 5 sd; max |x| within the tail cut; cells match the table.

    For sigma >= 1 the variance of D_{Z,sigma} equals sigma^2 to within 1e-8 (Poisson summation), far
    below the test resolution. sd of the sample variance: sqrt((mu4 - sigma^4) / n), mu4 from the table's
    exact probabilities. Cell counts for |x| <= 3 sigma plus two tail cells: chi-square at 1e-6.
    """
    n = 2**19
    x = np.asarray(R.discrete_gaussian(R.fold_in(key, 7), (n,), sigma))
    assert x.dtype == np.int32
    bound = math.ceil(13.0 * sigma)
    assert np.abs(x).max() <= bound
    pmf = _gaussian_pmf(sigma, 13.0)
    var = sum(v * v * p for v, p in pmf.items())
    mu4 = sum(v**4 * p for v, p in pmf.items())
    assert abs(var - sigma**2) < 1e-8 * sigma**2
    assert abs(x.mean()) < Z_TWO_SIDED * sigma / math.sqrt(n)
    assert abs(np.mean(x.astype(np.float64) ** 2) - var) < Z_TWO_SIDED * math.sqrt((mu4 - var**2) / n)
    edge = math.ceil(3 * sigma)
    cells = list(range(-edge, edge + 1))
    expected = [pmf[v] * n for v in cells]
    tail = sum(p for v, p in pmf.items() if v > edge) * n
    expected += [tail, tail]
    counts = [np.count_nonzero(x == v) for v in cells]
    counts += [np.count_nonzero(x < -edge), np.count_nonzero(x > edge)]
    assert chi2_statistic(counts, expected) < chi2_threshold(len(cells) + 1)


def test_gaussian_cdt_table_is_monotone_and_normalised():
    t = R.gaussian_cdt(3.19, 13.0)
    assert t.dtype == np.uint32 and t.shape[0] == 3 and not t.flags.writeable
    values = [int(a) << 64 | int(b) << 32 | int(c) for a, b, c in zip(*t.astype(object))]
    assert values == sorted(values) and values[-1] < 2**96
    p0 = values[0] / 2**96
    assert abs(p0 - 1 / (3.19 * math.sqrt(2 * math.pi))) < 1e-6


@pytest.mark.parametrize(
    "sigma, tail, match",
    [(3.19, 5.0, "tail >= 9"), (0.0, 13.0, "sigma"), (1000.0, 13.0, "sigma"), (3.19, -1.0, "tail")],
    ids=["tail=5", "sigma=0", "sigma=1000", "tail=-1"],
)
def test_gaussian_bad_parameters_raise(sigma, tail, match):
    with pytest.raises(ParameterError, match=match):
        R.gaussian_cdt(sigma, tail)


@pytest.mark.parametrize("eta", [2, 21, 40], ids=lambda e: f"eta={e}")
def test_centered_binomial_distribution(key, eta):
    """Values in [-eta, eta]; variance eta/2 within 5 sd; cells against C(2 eta, eta + x) / 4^eta.

    sd of the sample second moment: sqrt((mu4 - (eta/2)^2) / n) with mu4 = 3 (eta/2)^2 - eta/4 for the
    centered binomial. Cells with expected count below 5 are merged into two tail cells; chi-square at 1e-6.
    """
    n = 2**18
    x = np.asarray(R.centered_binomial(R.fold_in(key, eta), (n,), eta))
    assert x.dtype == np.int32 and np.abs(x).max() <= eta
    var = eta / 2
    mu4 = 3 * var**2 - eta / 4
    assert abs(np.mean(x.astype(np.float64) ** 2) - var) < Z_TWO_SIDED * math.sqrt((mu4 - var**2) / n)
    pmf = {v: math.comb(2 * eta, eta + v) / 4**eta for v in range(-eta, eta + 1)}
    edge = max(v for v in pmf if pmf[v] * n >= 5)
    cells = list(range(-edge, edge + 1))
    expected = [pmf[v] * n for v in cells]
    counts = [np.count_nonzero(x == v) for v in cells]
    if edge < eta:
        tail = sum(pmf[v] for v in pmf if v > edge) * n
        expected += [tail, tail]
        counts += [np.count_nonzero(x < -edge), np.count_nonzero(x > edge)]
    assert chi2_statistic(counts, expected) < chi2_threshold(len(counts) - 1)


def test_centered_binomial_rejects_bad_eta(key):
    with pytest.raises(ParameterError, match="eta"):
        R.centered_binomial(key, (4,), 0)


# --------------------------------------------------------------------------------------------------
# Under a user's jax.jit with 64-bit types off
# --------------------------------------------------------------------------------------------------


def test_user_jit_with_x64_off_matches_eager(key):
    """Every sampler, traced by a user's jax.jit (traced keys and moduli), gives the eager result."""
    assert not jax.config.jax_enable_x64

    def samplers(keys, q):
        gaussian = R.discrete_gaussian(keys[3], (128,))
        return (
            R.uniform_mod(keys[0], (7, 64), q),
            R.ternary(keys[1], (128,)),
            R.ternary_hamming(keys[2], (2,), 64, 8),
            gaussian,
            R.centered_binomial(keys[4], (128,), 21),
            R.to_residues(gaussian, q),
        )

    keys = R.split(key, 5)
    jitted = jax.jit(samplers)(keys, jnp.asarray(TABLE_Q))
    eager = samplers(keys, TABLE_Q)
    for a, b in zip(jitted, eager):
        assert a.dtype == b.dtype and a.dtype in (jnp.uint32, jnp.int32)
        np.testing.assert_array_equal(a, b)
