"""bfv: parameters, encodings, and every operation exact against integer arithmetic mod t; the noise budget
against bounds computed from the parameters; the errors.

All keys and encryption randomness are seeded, so every number here is reproducible. The insecure test sets
(``crossfhe.testing``): N256 (t = 65537, batching) for the ciphertext operations, N256_COEFF (t = 2^16,
coefficient encoding) for the coefficient products, N1024_CHAM for the fresh budget only.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from crossfhe.bfv import Ciphertext, Encoding, Params, ParamsLiteral, Plaintext, ops, presets
from crossfhe.core.keys import SIGMA, gaussian_bound
from crossfhe.core.params import max_log_pq
from crossfhe.errors import BasisMismatchError, InsecureParametersError, KeyMismatchError, ParameterError
from crossfhe.math import primes
from crossfhe.math.random import seed_key
from crossfhe.ring.ntt import negacyclic_convolution
from crossfhe.ring.poly import Domain, RNSPoly
from crossfhe.testing import INSECURE_BFV_N256, INSECURE_BFV_N256_COEFF, INSECURE_BFV_N1024_CHAM

BATCH = INSECURE_BFV_N256
COEFF = INSECURE_BFV_N256_COEFF
ROTATIONS = (1, 3, -1, -7)


def ekey(label: str):
    """A reproducible encryption key for ``label``."""
    return seed_key(label.encode().ljust(32, b"."))


def slot_matrix(params: Params, seed: int) -> np.ndarray:
    """Uniform values in [0, t) as the [2, N/2] slot matrix."""
    return np.random.default_rng(seed).integers(0, params.t, size=(2, params.n // 2), dtype=np.int64)


@pytest.fixture(scope="module")
def batch_keys():
    return ops.keygen(BATCH, rotations=ROTATIONS, row_swap=True, seed=bytes(32))


@pytest.fixture(scope="module")
def coeff_keys():
    """No relinearization key: the coefficient tests need none, and the missing-key error uses these."""
    return ops.keygen(COEFF, relin=False, seed=bytes(32))


@pytest.fixture(scope="module")
def operands(batch_keys):
    """Two public-key encryptions (a, b) of random slot matrices, with the matrices."""
    _, keys = batch_keys
    a, b = slot_matrix(BATCH, 1), slot_matrix(BATCH, 2)
    ca = ops.encrypt(keys, ops.encode(BATCH, a), key=ekey("a"))
    cb = ops.encrypt(keys, ops.encode(BATCH, b), key=ekey("b"))
    return a, b, ca, cb


def dec(sk, ct: Ciphertext) -> np.ndarray:
    return ops.decode(ops.decrypt(sk, ct))


def dec_coeffs(sk, ct: Ciphertext) -> np.ndarray:
    return ops.decode(ops.decrypt(sk, ct, encoding=Encoding.COEFF))


def same_words(x: Ciphertext, y: Ciphertext) -> bool:
    return np.array_equal(np.asarray(x.c0.data), np.asarray(y.c0.data)) and np.array_equal(
        np.asarray(x.c1.data), np.asarray(y.c1.data)
    )


def negacyclic_mod(a, b, t: int) -> np.ndarray:
    """(sum a_i X^i)(sum b_j X^j) in Z_t[X]/(X^N + 1), schoolbook with Python ints."""
    n = len(a)
    out = [0] * n
    for i, ai in enumerate(int(v) for v in a):
        if ai:
            for j, bj in enumerate(int(v) for v in b):
                k = i + j
                if k < n:
                    out[k] += ai * bj
                else:
                    out[k - n] -= ai * bj
    return np.array([v % t for v in out], dtype=np.int64)


def automorphism(coeffs, g: int, t: int) -> np.ndarray:
    """m(X) -> m(X^g) in Z_t[X]/(X^N + 1): coefficient i moves to i g mod 2N, negated past N."""
    n = len(coeffs)
    out = [0] * n
    for i, c in enumerate(int(v) for v in coeffs):
        k = i * g % (2 * n)
        out[k % n] = c if k < n else (-c) % t
    return np.array(out, dtype=np.int64)


# --------------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------------


def lit(**kw) -> ParamsLiteral:
    base = dict(log_n=8, q_bits=(30, 30, 30), p_bits=(31, 31), plain_modulus=65537, dnum=2, insecure=True)
    base.update(kw)
    return ParamsLiteral(**base)


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(plain_modulus=2**30), r"2 <= t < min\(q\)"),  # the 30-bit primes are below 2^30
        (dict(plain_modulus=1), r"2 <= t < min\(q\)"),
        (dict(plain_modulus=65537.0), "must be an int"),
        (dict(q_bits=(30,), p_bits=(31,), plain_modulus=2**21, dnum=1), "leaves no room for noise"),
        (dict(p_bits=()), "at least one special prime"),
        (dict(dnum=0), r"dnum = 0 must be an int in \[1, L = 3\]"),
        (dict(dnum=4), r"dnum = 4 must be an int in \[1, L = 3\]"),
        (dict(p_bits=(20,), dnum=1), "must cover the largest key-switching digit"),
        (dict(plain_bits=17), "exactly one of plain_modulus"),
        (dict(plain_modulus=None), "exactly one of plain_modulus"),
        (dict(plain_modulus=None, plain_bits=5), "no 5-bit batching prime"),  # t = 1 (mod 512) needs >= 10 bits
        (dict(hamming_weight=257), "hamming_weight"),
    ],
    ids=[
        "t>=min(q)", "t<2", "t-float", "log2(Q/t)<10", "no-P", "dnum=0", "dnum>L", "P<digit", "t-and-bits",
        "no-t", "no-batching-prime", "hw>N",
    ],
)  # fmt: skip
def test_bad_literals(kw, match):
    with pytest.raises(ParameterError, match=match):
        Params.from_literal(lit(**kw))


def test_room_bound_is_exactly_ten_bits():
    """The boundary of log2(Q / t) >= 10: with one prime q0, t = floor(q0 / 2^10) passes and t + 1 fails."""
    q0 = Params.from_literal(lit(q_bits=(30,), p_bits=(31,), dnum=1)).q[0]
    ok = Params.from_literal(lit(q_bits=(30,), p_bits=(31,), plain_modulus=q0 >> 10, dnum=1))
    assert ok.ring.log_q - math.log2(ok.t) >= 10
    with pytest.raises(ParameterError, match="leaves no room"):
        Params.from_literal(lit(q_bits=(30,), p_bits=(31,), plain_modulus=(q0 >> 10) + 1, dnum=1))


def test_insecure_set_refused_naming_the_bound():
    with pytest.raises(InsecureParametersError, match=r"log2\(PQ\) <= 109"):
        Params.from_literal(lit(log_n=12, q_bits=(30,) * 3, p_bits=(31,), insecure=False))
    with pytest.raises(InsecureParametersError, match="N = 256 has no security table entry"):
        Params.from_literal(lit(insecure=False))
    assert Params.from_literal(lit()).ring.insecure


def test_batching_property():
    assert BATCH.batching and BATCH.slots == BATCH.n
    assert not COEFF.batching and COEFF.slots == 0  # t = 2^16 is not prime
    ring = BATCH.ring
    assert primes.is_prime(65539) and 65539 % 512 == 3
    assert not Params(ring=ring, t=65539, dnum=2).batching  # prime, but not 1 (mod 2N)
    assert 2049 % 512 == 1 and 2049 == 3 * 683
    assert not Params(ring=ring, t=2049, dnum=2).batching  # 1 (mod 2N), but composite
    bits17 = Params.from_literal(lit(plain_modulus=None, plain_bits=17))
    assert bits17.batching and bits17.t.bit_length() == 17 and bits17.t not in bits17.ring.moduli


@pytest.mark.parametrize("params", [BATCH, COEFF, INSECURE_BFV_N1024_CHAM], ids=["N256", "N256_COEFF", "N1024_CHAM"])
def test_mult_primes(params):
    r = params.mult_primes
    assert not set(r) & set(params.q + params.p) and len(set(r)) == len(r)
    assert all(primes.is_prime(x) and x % (2 * params.n) == 1 and x < 2**31 for x in r)
    assert math.prod(r) > 8 * params.t * params.n * params.big_q


def test_params_hashable_digest_stable_and_distinct():
    a, b = Params.from_literal(lit()), Params.from_literal(lit())
    assert a == b and hash(a) == hash(b) and a.digest() == b.digest() == BATCH.digest()
    other_t = Params.from_literal(lit(plain_modulus=65536))
    assert other_t.ring == a.ring and other_t.digest() != a.digest()
    assert Params.from_literal(lit(dnum=3)).digest() != a.digest()
    f = jax.jit(lambda x, params: x * params.t, static_argnames=("params",))
    assert int(f(3, params=a)) == 3 * 65537
    assert a.delta == a.big_q // 65537


@pytest.mark.parametrize("name", sorted(presets.PRESETS))
def test_presets_within_128_bit_bound(name):
    p = presets.PRESETS[name]
    assert not p.ring.insecure
    assert p.log_pq <= max_log_pq(p.n), (name, p.log_pq)
    assert p.batching and p.t.bit_length() == 20
    assert p.ring.log_q - math.log2(p.t) >= 10


def test_cham_preset_known_values():
    """The docstring's numbers: t = 1032193 (largest 20-bit prime = 1 mod 8192), log2 PQ = 90.0."""
    p = presets.CHAM_N4096
    assert p.t == 1032193 and p.q == presets.CHAM_SPARSE_Q and p.p == presets.CHAM_SPARSE_P
    assert all(not primes.is_prime(x) for x in range(p.t + 8192, 2**20, 8192))
    assert round(p.log_pq, 1) == 90.0


# --------------------------------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------------------------------


def test_batch_round_trip_and_row_major_fill():
    a = slot_matrix(BATCH, 10)
    pt = ops.encode(BATCH, a)
    assert pt.coeffs.shape == (BATCH.n,) and pt.encoding == Encoding.BATCH
    assert int(np.max(np.asarray(pt.coeffs))) < BATCH.t
    assert np.array_equal(ops.decode(pt), a)
    short = [5, 6, 7]
    want = np.zeros((2, BATCH.n // 2), dtype=np.int64)
    want[0, :3] = short
    assert np.array_equal(ops.decode(ops.encode(BATCH, short)), want)
    assert np.array_equal(ops.decode(ops.encode(BATCH, a.reshape(-1))), a)  # N values fill row by row


def test_batch_slots_multiply_pointwise():
    """encode(a) * encode(b) in Z_t[X]/(X^N + 1) decodes to a * b slot by slot (two independent products:
    the library's convolution reference and a Python-int schoolbook)."""
    t = BATCH.t
    a, b = slot_matrix(BATCH, 11), slot_matrix(BATCH, 12)
    ma, mb = np.asarray(ops.encode(BATCH, a).coeffs), np.asarray(ops.encode(BATCH, b).coeffs)
    prod = negacyclic_convolution(ma[None], mb[None], (t,))[0]
    assert np.array_equal(prod.astype(np.int64), negacyclic_mod(ma, mb, t))
    got = ops.decode(Plaintext(jnp.asarray(prod), BATCH, Encoding.BATCH))
    assert np.array_equal(got, a * b % t)


def test_batch_automorphisms_rotate_and_swap_rows():
    t, n = BATCH.t, BATCH.n
    a = slot_matrix(BATCH, 13)
    m = np.asarray(ops.encode(BATCH, a).coeffs)
    for r in (1, 2, -1):
        g = ops.rotation_element(BATCH, r)
        rot = ops.decode(Plaintext(jnp.asarray(automorphism(m, g, t).astype(np.uint32)), BATCH, Encoding.BATCH))
        assert np.array_equal(rot, np.roll(a, -r, axis=1)), r
    assert ops.rotation_element(BATCH, 1) == 5 and ops.row_swap_element(BATCH) == 2 * n - 1
    sw = automorphism(m, 2 * n - 1, t).astype(np.uint32)
    assert np.array_equal(ops.decode(Plaintext(jnp.asarray(sw), BATCH, Encoding.BATCH)), a[::-1])


def test_coefficient_round_trip():
    v = np.random.default_rng(14).integers(0, COEFF.t, size=COEFF.n)
    pt = ops.encode(COEFF, v, encoding="coeff")
    assert np.array_equal(np.asarray(pt.coeffs), v) and pt.encoding == Encoding.COEFF
    assert np.array_equal(ops.decode(pt), v)
    short = ops.decode(ops.encode(COEFF, [COEFF.t - 1, 0, 3], encoding=Encoding.COEFF))
    assert short[:3].tolist() == [COEFF.t - 1, 0, 3] and not short[3:].any()


@pytest.mark.parametrize("encoding", ["batch", "coeff"])
@pytest.mark.parametrize(
    "values,match",
    [([0, -1], r"\[0, t\) = \[0, 65537\), got values in \[-1, 0\]"), ([65537], "got values in"),
     (np.array([1.5, 2.0]), "must be integers"), (np.array([1.0]), "must be integers"),
     (["1"], "must be integers"), (np.zeros(257, dtype=np.int64), "up to N = 256")],
    ids=["negative", "t", "float", "integral-float", "str", "N+1"],
)  # fmt: skip
def test_encode_rejects_bad_values(encoding, values, match):
    with pytest.raises(ParameterError, match=match):
        ops.encode(BATCH, values, encoding=encoding)


def test_batch_encoding_needs_batching_t():
    with pytest.raises(ParameterError, match="batch encoding needs t prime"):
        ops.encode(COEFF, [1, 2, 3])
    with pytest.raises(ValueError):
        ops.encode(COEFF, [1], encoding="slots")


# --------------------------------------------------------------------------------------------------
# Operations, exact mod t
# --------------------------------------------------------------------------------------------------


def test_encrypt_decrypt_public_and_secret_key(batch_keys, operands):
    sk, keys = batch_keys
    a, _, ca, _ = operands
    assert np.array_equal(dec(sk, ca), a)
    assert np.array_equal(dec(sk, ops.encrypt(keys.public, ops.encode(BATCH, a), key=ekey("pk"))), a)
    cs = ops.encrypt(sk, ops.encode(BATCH, a), key=ekey("sk"))
    assert np.array_equal(dec(sk, cs), a)
    assert np.array_equal(ops.decode(ops.decrypt_checked(sk, cs)), a)
    # the same key gives the same ciphertext; another key another one
    assert same_words(ca, ops.encrypt(keys, ops.encode(BATCH, a), key=ekey("a")))
    assert not same_words(ca, ops.encrypt(keys, ops.encode(BATCH, a), key=ekey("a2")))


def test_linear_ops_exact(batch_keys, operands):
    sk, _ = batch_keys
    a, b, ca, cb = operands
    t = BATCH.t
    pb = ops.encode(BATCH, b)
    assert np.array_equal(dec(sk, ops.add(ca, cb)), (a + b) % t)
    assert np.array_equal(dec(sk, ops.sub(ca, cb)), (a - b) % t)
    assert np.array_equal(dec(sk, ops.negate(ca)), (-a) % t)
    assert np.array_equal(dec(sk, ops.add_plain(ca, pb)), (a + b) % t)
    assert np.array_equal(dec(sk, ops.sub_plain(ca, pb)), (a - b) % t)
    assert np.array_equal(dec(sk, ops.mul_plain(ca, pb)), a * b % t)
    for c in (0, 1, 7, -1, -12345, t - 1, t + 5, 3 * t - 2, 10**30):
        assert np.array_equal(dec(sk, ops.add_scalar(ca, c)), (a + c % t) % t), c
        want = a.astype(object) * c % t
        assert np.array_equal(dec(sk, ops.mul_scalar(ca, c)), want.astype(np.int64)), c
    assert np.array_equal(dec(sk, ops.mul_scalar(ca, np.int64(-2))), (-2 * a) % t)


def test_coefficient_encoding_ops_exact(coeff_keys):
    """Coefficient encoding with t = 2^16: mul_plain is the negacyclic product mod t, add_scalar adds to
    coefficient 0, and the linear ops act coefficient-wise."""
    sk, keys = coeff_keys
    t, n = COEFF.t, COEFF.n
    rng = np.random.default_rng(20)
    u, v = rng.integers(0, t, size=n), rng.integers(0, t, size=n)
    cu = ops.encrypt(keys, ops.encode(COEFF, u, encoding="coeff"), key=ekey("u"))
    cv = ops.encrypt(sk, ops.encode(COEFF, v, encoding="coeff"), key=ekey("v"))
    assert np.array_equal(dec_coeffs(sk, cu), u) and np.array_equal(dec_coeffs(sk, cv), v)
    assert np.array_equal(ops.decode(ops.decrypt(sk, cu)), u)  # without a batching t, decrypt defaults to COEFF
    with pytest.raises(ParameterError, match="batch decoding needs t prime"):
        ops.decrypt(sk, cu, encoding="batch")
    assert np.array_equal(dec_coeffs(sk, ops.add(cu, cv)), (u + v) % t)
    assert np.array_equal(dec_coeffs(sk, ops.sub(cu, cv)), (u - v) % t)
    assert np.array_equal(dec_coeffs(sk, ops.mul_scalar(cu, -3)), (-3 * u) % t)
    want = u.copy()
    want[0] = (want[0] + t + 9) % t
    assert np.array_equal(dec_coeffs(sk, ops.add_scalar(cu, t + 9)), want)
    # a sparse multiplier (a few signed monomials, as rotations by X^k use) and a dense one
    w = np.zeros(n, dtype=np.int64)
    w[[0, 5, 255]] = [3, t - 1, 2]
    for mult in (w, rng.integers(0, t, size=n)):
        got = dec_coeffs(sk, ops.mul_plain(cu, ops.encode(COEFF, mult, encoding="coeff")))
        assert np.array_equal(got, negacyclic_mod(u, mult, t))


def test_multiply_relinearize_exact(batch_keys, operands):
    sk, keys = batch_keys
    a, b, ca, cb = operands
    t = BATCH.t
    prod = ops.mul(ca, cb, keys)
    assert np.array_equal(dec(sk, prod), a * b % t)
    assert np.array_equal(dec(sk, ops.square(ca, keys)), a * a % t)
    # the product composes with the linear ops
    assert np.array_equal(dec(sk, ops.add_plain(prod, ops.encode(BATCH, b))), (a * b + b) % t)


def test_multiplication_chain_until_budget_runs_out(batch_keys, operands):
    """x <- x * c_i with fresh factors: every multiply lowers the budget; while it is positive the
    decryption is the exact product. Q / t = 2^74 and about 23 bits per product give 3 products."""
    sk, keys = batch_keys
    a, _, ca, _ = operands
    t = BATCH.t
    x, want = ca, a.copy()
    budgets = [ops.noise_budget(sk, x)]
    for i in range(6):
        f = slot_matrix(BATCH, 100 + i)
        x = ops.mul(x, ops.encrypt(keys, ops.encode(BATCH, f), key=ekey(f"chain{i}")), keys)
        want = want * f % t
        budgets.append(ops.noise_budget(sk, x))
        assert budgets[-1] < budgets[-2] or budgets[-1] == 0, budgets
        if budgets[-1] == 0:
            break
        assert np.array_equal(dec(sk, x), want), (i, budgets)
    # 3 products at these seeds ([58, 35, 12, 0] when written); 4 would still match 74 / 23 bits
    assert budgets[-1] == 0 and 3 <= len(budgets) - 1 <= 4, budgets


def test_rotations_and_row_swap(batch_keys, operands):
    sk, keys = batch_keys
    a, _, ca, _ = operands
    for k in ROTATIONS + (0, 128, 129, -127):  # 129 = 1 and -127 = 1 (mod N/2 = 128)
        assert np.array_equal(dec(sk, ops.rotate_rows(ca, k, keys)), np.roll(a, -k, axis=1)), k
    assert np.array_equal(dec(sk, ops.swap_rows(ca, keys)), a[::-1])
    both = ops.swap_rows(ops.rotate_rows(ca, 3, keys), keys)
    assert np.array_equal(dec(sk, both), np.roll(a, -3, axis=1)[::-1])
    # Galois elements are taken mod 2N: -1 and 4N - 1 are the row swap 2N - 1, word for word
    swapped = ops.swap_rows(ca, keys)
    for g in (-1, 4 * BATCH.n - 1):
        assert same_words(ops.apply_galois(ca, g, keys), swapped), g


def test_gen_galois_keys_adds_a_rotation(batch_keys, operands):
    sk, keys = batch_keys
    a, _, ca, _ = operands
    more = ops.gen_galois_keys(sk, keys, [ops.rotation_element(BATCH, 2)], seed=b"\x02" * 32)
    assert set(more.galois) == set(keys.galois) | {25} and more.relin is keys.relin
    assert all(more.galois[g] is keys.galois[g] for g in keys.galois)  # kept, not regenerated
    assert np.array_equal(dec(sk, ops.rotate_rows(ca, 2, more)), np.roll(a, -2, axis=1))
    with pytest.raises(ParameterError, match="Galois elements must be odd"):
        ops.gen_galois_keys(sk, keys, [6])


def test_batch_axes_equal_items_one_at_a_time(batch_keys):
    """A stacked batch of 3 ciphertexts gives, word for word, the ciphertexts of the items one at a time,
    through add, mul_plain, rotate_rows and multiply."""
    sk, keys = batch_keys
    t = BATCH.t
    mats = [slot_matrix(BATCH, 30 + i) for i in range(3)]
    items = [ops.encrypt(keys, ops.encode(BATCH, m), key=ekey(f"item{i}")) for i, m in enumerate(mats)]
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *items)
    assert stacked.batch_shape == (3,)
    pt = ops.encode(BATCH, slot_matrix(BATCH, 40))
    one = [ops.mul(ops.rotate_rows(ops.mul_plain(ops.add(c, c), pt), 1, keys), c, keys) for c in items]
    many = ops.mul(ops.rotate_rows(ops.mul_plain(ops.add(stacked, stacked), pt), 1, keys), stacked, keys)
    for i in range(3):
        assert same_words(jax.tree.map(lambda x, i=i: x[i], many), one[i]), i
    p = ops.decode(pt)
    want = np.stack([np.roll(2 * m * p % t, -1, axis=1) * m % t for m in mats])
    assert np.array_equal(dec(sk, many), want)
    # encrypting a batch of plaintexts decrypts item by item too
    batch_ct = ops.encrypt(keys, ops.encode(BATCH, np.stack(mats)), key=ekey("batch"))
    assert batch_ct.batch_shape == (3,) and np.array_equal(dec(sk, batch_ct), np.stack(mats))


def test_ops_under_jit_and_vmap(batch_keys, operands):
    sk, _ = batch_keys
    a, b, ca, cb = operands
    t = BATCH.t
    p = slot_matrix(BATCH, 50)
    pt = ops.encode(BATCH, p)

    def f(x, y, m):
        return ops.mul_scalar(ops.mul_plain(ops.add(x, y), m), 3)

    jitted = jax.jit(f)(ca, cb, pt)
    assert isinstance(jitted, Ciphertext) and jitted.params == BATCH
    assert same_words(jitted, f(ca, cb, pt))
    assert np.array_equal(dec(sk, jitted), 3 * (a + b) * p % t)
    stacked_a = jax.tree.map(lambda *xs: jnp.stack(xs), ca, cb)
    stacked_b = jax.tree.map(lambda *xs: jnp.stack(xs), cb, ca)
    mapped = jax.vmap(f, in_axes=(0, 0, None))(stacked_a, stacked_b, pt)
    assert mapped.batch_shape == (2,)
    assert same_words(jax.tree.map(lambda x: x[1], mapped), f(cb, ca, pt))
    assert np.array_equal(dec(sk, mapped), np.stack([3 * (a + b) * p % t] * 2))


# --------------------------------------------------------------------------------------------------
# Noise budget
# --------------------------------------------------------------------------------------------------


def fresh_noise_bound(params: Params, *, public: bool) -> float:
    """Worst-case |[c0 + c1 s - Delta m]_Q| plus the rounding of Delta, in units of Q / t:
    e <= (2N + 1) B (v e + e0 + e1 s, B = ceil(13 sigma) the sampler's tail cut) plus N + 1 (the ModDown by P
    of the public-key encryption) for a public key (the ModDown in fact divides the first term by P; the
    bound does not rely on it), B for a secret key; Delta m = Q m / t - m (Q mod t) / t adds
    m (Q mod t) / t < t, which dominates at these sets (an encryption of 0 has ~11 bits more budget)."""
    bound_b = gaussian_bound(SIGMA)
    e = (2 * params.n + 1) * bound_b + params.n + 1 if public else bound_b
    return e + params.t


@pytest.mark.parametrize(
    "params", [BATCH, COEFF, pytest.param(INSECURE_BFV_N1024_CHAM, marks=pytest.mark.slow)],  # CHAM: 26 s cold in CI
    ids=["N256-t65537", "N256-t2^16", "N1024_CHAM"]
)
def test_fresh_budget_within_bounds(params):
    """budget = bits(Q) - bits(max |[t x]_Q|) - 1 with t x = Q m + t e' (e' the noise in units of Q/t):
    at least log2(Q/t) - log2(2 bound) - 2 (two floors), at most log2(Q/t) - log2(2 sigma) (the largest of
    N Gaussian-sized coefficients exceeds sigma except with negligible probability)."""
    sk, keys = ops.keygen(params, relin=False, seed=bytes(32))
    enc = Encoding.BATCH if params.batching else Encoding.COEFF
    m = np.random.default_rng(60).integers(0, params.t, size=params.n)
    pt = ops.encode(params, m, encoding=enc)
    room = math.log2(params.big_q / params.t)
    for material, public in ((keys, True), (sk, False)):
        budget = ops.noise_budget(sk, ops.encrypt(material, pt, key=ekey("fresh")))
        lo = room - math.log2(2 * fresh_noise_bound(params, public=public)) - 2
        assert lo <= budget <= room - math.log2(2 * SIGMA), (public, budget, lo, room)


def test_budget_drop_of_one_multiply(batch_keys, operands):
    """One product costs about log2(N t) bits. The dominant term is t r_a v_b (r_a = (c1 s - [c1 s]_Q) / Q,
    coefficients of standard deviation sqrt(N / 18) for a uniform ternary s; its convolution with v_b adds
    sqrt(N)): about t N / 4 |v|, i.e. log2(N t) - 2 bits, so check log2(N t) +- 4 (the fluctuation of a
    maximum over N coefficients is a bit or two; the worst case t N^2 / 2 |v| never occurs in practice)."""
    sk, keys = batch_keys
    _, _, ca, cb = operands
    fresh = min(ops.noise_budget(sk, ca), ops.noise_budget(sk, cb))
    after = ops.noise_budget(sk, ops.mul(ca, cb, keys))
    expect = math.log2(BATCH.n * BATCH.t)
    assert expect - 4 <= fresh - after <= expect + 4, (fresh, after)


def test_random_c0_has_budget_zero_and_decrypt_checked_refuses(batch_keys, operands):
    sk, _ = batch_keys
    _, _, ca, _ = operands
    rng = np.random.default_rng(70)
    q = np.array(BATCH.q, dtype=np.int64)[:, None]
    words = (rng.integers(0, 2**62, size=(len(BATCH.q), BATCH.n)) % q).astype(np.uint32)
    bad = Ciphertext(RNSPoly(jnp.asarray(words), BATCH.q, Domain.EVAL), ca.c1, BATCH)
    assert ops.noise_budget(sk, bad) == 0
    with pytest.raises(ParameterError, match="noise budget of this ciphertext is exhausted"):
        ops.decrypt_checked(sk, bad)


def test_wrong_secret_key_refused_by_key_id(batch_keys, operands):
    """Another secret key of the same parameters is refused by the ciphertext's key id; a ciphertext without
    one (made by hand) still decrypts to a uniform phase under it: budget zero."""
    other_sk, _ = ops.keygen(BATCH, relin=False, seed=b"\x01" * 32)
    _, _, ca, _ = operands
    for f in (ops.noise_budget, ops.decrypt):
        with pytest.raises(KeyMismatchError, match="different key pairs"):
            f(other_sk, ca)
    assert ops.noise_budget(other_sk, dataclasses.replace(ca, key_id=None)) == 0


# --------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------


def test_mixing_parameter_sets_refused(batch_keys, coeff_keys, operands):
    sk, keys = batch_keys
    csk, ckeys = coeff_keys
    _, _, ca, _ = operands
    cc = ops.encrypt(ckeys, ops.encode(COEFF, [1, 2], encoding="coeff"), key=ekey("cc"))
    for op in (ops.add, ops.sub):
        with pytest.raises(BasisMismatchError, match="different parameter sets"):
            op(ca, cc)
    with pytest.raises(BasisMismatchError, match="different parameter sets"):
        ops.mul(ca, ca, ckeys)
    with pytest.raises(BasisMismatchError, match="different parameter sets"):
        ops.rotate_rows(cc, 1, keys)
    with pytest.raises(BasisMismatchError, match="different parameter sets"):
        ops.encrypt(keys, ops.encode(COEFF, [1], encoding="coeff"))
    with pytest.raises(BasisMismatchError, match="secret key is not for"):
        ops.decrypt(csk, ca)
    # COEFF's Q is a prefix of BATCH's Q: the key sizes alone would let these through
    assert BATCH.q[: len(COEFF.q)] == COEFF.q
    with pytest.raises(BasisMismatchError, match="secret key is not for"):
        ops.encrypt(sk, ops.encode(COEFF, [1], encoding="coeff"))
    with pytest.raises(BasisMismatchError, match="public key is not for"):
        ops.encrypt(keys.public, ops.encode(COEFF, [1], encoding="coeff"))
    with pytest.raises(BasisMismatchError, match="public key is not for"):
        ops.encrypt(ckeys.public, ops.encode(BATCH, [1]))
    with pytest.raises(BasisMismatchError, match="secret key is not for"):
        ops.noise_budget(sk, cc)
    pc = ops.encode(COEFF, [1], encoding="coeff")
    for op in (ops.add_plain, ops.sub_plain, ops.mul_plain):
        with pytest.raises(BasisMismatchError, match="different parameter sets"):
            op(ca, pc)


def test_missing_keys_named(batch_keys, coeff_keys, operands):
    _, keys = batch_keys
    _, ckeys = coeff_keys
    _, _, ca, _ = operands
    with pytest.raises(ParameterError, match=rf"no Galois key for element {pow(5, 2, 512)}\b"):
        ops.rotate_rows(ca, 2, keys)
    with pytest.raises(ParameterError, match="no Galois key for element 17"):
        ops.apply_galois(ca, 17, keys)
    cc = ops.encrypt(ckeys, ops.encode(COEFF, [1, 2], encoding="coeff"), key=ekey("cc"))
    with pytest.raises(ParameterError, match="no relinearization key"):
        ops.mul(cc, cc, ckeys)
    with pytest.raises(ParameterError, match="no Galois key for element 511"):
        ops.swap_rows(cc, ckeys)
    with pytest.raises(ParameterError, match="Galois elements must be odd"):
        ops.keygen(COEFF, relin=False, galois_elements=(4,), seed=bytes(32))


def test_wrong_types_refused(batch_keys, operands):
    sk, keys = batch_keys
    a, _, ca, _ = operands
    pa = ops.encode(BATCH, a)
    with pytest.raises(TypeError, match="expected a bfv.Ciphertext"):
        ops.add(ca, pa)
    with pytest.raises(TypeError, match="expected a bfv.Ciphertext"):
        ops.negate(pa)
    with pytest.raises(TypeError, match="takes a bfv.Plaintext"):
        ops.add_plain(ca, a)
    with pytest.raises(TypeError, match="takes a bfv.Plaintext"):
        ops.mul_plain(ca, ca)
    with pytest.raises(TypeError, match="takes a bfv.Plaintext"):
        ops.encrypt(keys, a)
    for c in (1.5, True, "3"):
        with pytest.raises(TypeError, match="mul_scalar takes an integer"):
            ops.mul_scalar(ca, c)
        with pytest.raises(TypeError, match="add_scalar takes an integer"):
            ops.add_scalar(ca, c)
    with pytest.raises(TypeError, match="encrypt takes a PublicKey"):
        ops.encrypt(keys.relin, pa)
    with pytest.raises(TypeError, match="expected a SecretKey"):
        ops.decrypt(keys.public, ca)
    with pytest.raises(TypeError, match="expected bfv.Params"):
        ops.keygen(BATCH.ring)
    with pytest.raises(TypeError, match="expected bfv.Params"):
        ops.encode(BATCH.ring, [1])


@pytest.mark.parametrize("t", [2, 3, 2**16, 65537, 1032193, 2**30 + 3, 2**31 - 1])
def test_message_rounding_is_exact(t):
    """_round_rm_over_t (the round(r m / t) of round(Q m / t)) equals Python's integer rounding, incl. the ends."""
    from crossfhe.bfv.ops import _round_rm_over_t

    rng = np.random.default_rng(t)
    r = int(rng.integers(0, t))
    m = rng.integers(0, t, size=4000, dtype=np.int64)
    m[:3] = [0, t - 1, t // 2]
    bits = t.bit_length()
    consts = (np.uint32(r), np.uint32(t), np.uint32((1 << (2 * bits)) // t), np.uint32(bits))
    got = np.asarray(_round_rm_over_t(jnp.asarray(m.astype(np.uint32)), *consts))
    assert np.array_equal(got, [(r * int(x) + t // 2) // t for x in m])
