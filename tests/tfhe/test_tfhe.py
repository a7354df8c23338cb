"""tfhe/ops.py on the insecure test presets (crossfhe.testing.INSECURE_TFHE_P2/P4/P6: n 64, k 1, N 2^8 / 2^10 /
2^12, pbs 12 x 2, ks 4 x 5).

* encryption round trips (batch shapes, fresh noise within its hard bound, seeds reproduce words);
* linear operations exact on the messages mod 2^(p+1), with the error bound each one states;
* every table entry: all 4 inputs under the 24 permutations and 4 constants of Z_4, and under identity,
  constant, callable tables with 8 encryptions of each input (p = 2); all 16 inputs under tables covering
  every (input, output) pair plus random, callable and constant tables (p = 4); random tables on random
  inputs (p = 6); a bootstrap of bootstraps' linear combination (norm^2 = max_norm2); k = 2;
* KS-dedup (``pbs_many``) and batching give the same words as separate single bootstraps;
* measured noise against the model of tfhe.params: the bootstrap output and the blind rotation's input;
* errors: messages and tables out of range or of the wrong type, ciphertexts of other parameters.

Keys come from the session fixtures of conftest.py. Batch shapes are reused to keep the number of compiles low.
"""

from __future__ import annotations

import itertools
import math

import jax
import numpy as np
import pytest

from crossfhe import testing
from crossfhe.core.lwe import LWECiphertext
from crossfhe.errors import BasisMismatchError, ParameterError
from crossfhe.tfhe import bootstrap, keys, keyswitch, ops
from crossfhe.tfhe.params import make

P2, P4, P6 = testing.INSECURE_TFHE_P2, testing.INSECURE_TFHE_P4, testing.INSECURE_TFHE_P6


def _seed(i: int) -> bytes:
    return bytes([i]) * 32


def _fresh_bound(params) -> int:
    """|e| of a fresh encryption, absolute: the test presets' sigma (2^-45 Q ~ 2^17) is above
    keys.GAUSSIAN_MAX_SIGMA, so e is uniform on [-B, B] with B (B + 1) / 3 = sigma^2, i.e. B < sqrt(3) sigma."""
    assert params.glwe_sigma > keys.GAUSSIAN_MAX_SIGMA
    return math.ceil(math.sqrt(3) * params.glwe_sigma)


def _wrap_error(params) -> int:
    """|r| for r = 2^(p+1) Delta - Q: what one wrap of a message mod 2^(p+1) leaves in the error (<= 2^p)."""
    r = abs(2 ** (params.message_bits + 1) * params.delta - params.big_q)
    assert r <= 2**params.message_bits
    return r


def _abs_noise(ck, ct, m) -> np.ndarray:
    """|phase - m Delta| (m mod 2^(p+1)) in absolute units of Q, as Python ints (exact)."""
    params = ck.params
    e = (ops.phase(ck, ct) - np.asarray(m, dtype=object) % 2 ** (params.message_bits + 1) * params.delta) % params.big_q
    return np.where(e > params.big_q // 2, params.big_q - e, e)


def _assert_same_words(x, y):
    np.testing.assert_array_equal(np.asarray(x.b), np.asarray(y.b))
    np.testing.assert_array_equal(np.asarray(x.a), np.asarray(y.a))


# --------------------------------------------------------------------------------------------------
# encryption
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(), (3,), (2, 3)], ids=lambda s: f"batch={s}")
def test_encrypt_decrypt_round_trip(keys_p2, shape):
    ck, _ = keys_p2
    rng = np.random.default_rng(len(shape))
    m = rng.integers(0, 2**P2.message_bits, shape)
    ct = ops.encrypt(ck, m, key=_seed(1))
    assert ct.batch_shape == shape and ct.n == P2.long_dim and ct.moduli == P2.moduli
    out = ops.decrypt(ck, ct)
    assert out.shape == shape and out.dtype == np.int64
    np.testing.assert_array_equal(out, m)
    assert (_abs_noise(ck, ct, m) <= _fresh_bound(P2)).all()


def test_encrypt_seed_reproducible(keys_p2):
    ck, _ = keys_p2
    m = np.arange(4)
    _assert_same_words(ops.encrypt(ck, m, key=_seed(7)), ops.encrypt(ck, m, key=_seed(7)))
    other = ops.encrypt(ck, m, key=_seed(8))
    assert not np.array_equal(np.asarray(other.a), np.asarray(ops.encrypt(ck, m, key=_seed(7)).a))
    np.testing.assert_array_equal(ops.decrypt(ck, other), m)


def test_keygen_seed_reproducible(keys_p2):
    """The same seed gives the same keys (the fixture's seed, regenerated); progress reaches 1 for both keys
    and for the bootstrapping key's Fourier form (P2 bootstraps through the FFT kernel)."""
    ck, sk = keys_p2
    calls = []
    ck2, sk2 = ops.keygen(P2, b"tfhe-test-p2".ljust(32, b"\0"),
                          progress=lambda done, total, stage: calls.append((stage, done / total)))
    stages = ("bootstrapping key", "key-switching key", "bootstrapping key (Fourier form)")
    assert P2.fft_kernel and {st for st, _ in calls} == set(stages)
    for stage in stages:
        fs = [f for st, f in calls if st == stage]
        assert fs == sorted(fs) and fs[-1] == 1.0
    for x, y in ((ck.lwe_key, ck2.lwe_key), (ck.glwe_key, ck2.glwe_key), (sk.bsk, sk2.bsk), (sk.ksk, sk2.ksk)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert set(np.unique(np.asarray(ck.lwe_key))) == {0, 1} and set(np.unique(np.asarray(ck.glwe_key))) == {0, 1}
    assert sk.bsk.shape == (P2.lwe_dim, 2 * P2.pbs_gadget.levels, 2, 2, P2.poly_size)
    assert sk.ksk.shape == (P2.lwe_dim + 1, P2.long_dim * P2.ks_gadget.levels)


def test_trivial_is_noiseless(keys_p2):
    ck, sk = keys_p2
    m = np.array([[0, 1], [2, 3]])
    ct = ops.trivial(P2, m)
    assert (np.asarray(ct.a) == 0).all()
    np.testing.assert_array_equal(ops.phase(ck, ct), (m.astype(object) * P2.delta) % P2.big_q)
    np.testing.assert_array_equal(ops.decrypt(ck, ct), m)
    np.testing.assert_array_equal(ops.noise(ck, ct, m), np.zeros(m.shape))


# --------------------------------------------------------------------------------------------------
# linear operations: messages mod 2^(p+1) (the padding bit), decrypt mod 2^p
# --------------------------------------------------------------------------------------------------


def _pair(ck, seed):
    rng = np.random.default_rng(seed)
    mx, my = rng.integers(0, 16, 16), rng.integers(0, 16, 16)
    return mx, my, ops.encrypt(ck, mx, key=_seed(seed)), ops.encrypt(ck, my, key=_seed(seed + 1))


def test_add_sub_negate(keys_p4):
    """Sums and differences of messages in [0, 16) cover the padding bit (results in (-16, 31))."""
    ck, _ = keys_p4
    mx, my, x, y = _pair(ck, 20)
    b, r = _fresh_bound(P4), _wrap_error(P4)
    for ct, want in ((ops.add(x, y), mx + my), (ops.sub(x, y), mx - my), (ops.negate(x), -mx)):
        np.testing.assert_array_equal(ops.decrypt(ck, ct), want % 16)
        assert (_abs_noise(ck, ct, want) <= 2 * b + r).all()  # the phase carries want mod 32, not only mod 16
    # negate then add 2^p: 2^p - m, padding bit clear
    ct = ops.add_scalar(P4, ops.negate(x), 16)
    assert (_abs_noise(ck, ct, 16 - mx) <= b).all()  # -(e + m Delta) + 16 Delta: no wrap


@pytest.mark.parametrize("c", [0, 3, -5, 40])
def test_mul_const_add_const(keys_p4, c):
    """Bounds: mul_const multiplies the error by |c|; each wrap of the message mod 2^(p+1) = 32 leaves
    r = 32 Delta - Q (|r| <= 16) in the error: at most |c| + 1 wraps, so + |r| (|c| + 1) absolute."""
    ck, _ = keys_p4
    mx, _, x, _ = _pair(ck, 30)
    b, r = _fresh_bound(P4), _wrap_error(P4)
    ct = ops.mul_scalar(P4, x, c)
    np.testing.assert_array_equal(ops.decrypt(ck, ct), (c * mx) % 16)
    assert (_abs_noise(ck, ct, c * mx) <= abs(c) * b + r * (abs(c) + 1)).all()
    ct = ops.add_scalar(P4, x, c)
    np.testing.assert_array_equal(ops.decrypt(ck, ct), (mx + c) % 16)
    assert (_abs_noise(ck, ct, mx + c) <= b + r).all()  # m + (c mod 32) wraps at most once
    np.testing.assert_array_equal(np.asarray(ct.a), np.asarray(x.a))  # a constant touches only b


# --------------------------------------------------------------------------------------------------
# bootstrapping: every table entry
# --------------------------------------------------------------------------------------------------


def test_p2_every_input_output_pair(keys_p2):
    """All 24 permutations of Z_4 and the 4 constant functions on each of the 4 messages: every (input,
    output) pair, injective and constant tables, in one KS-dedup call (112 bootstraps)."""
    ck, sk = keys_p2
    tables = [list(t) for t in itertools.permutations(range(4))] + [[c] * 4 for c in range(4)]
    ct = ops.encrypt(ck, np.arange(4), key=_seed(40))
    outs = ops.pbs_many(sk, ct, tables)
    got = np.stack([ops.decrypt(ck, o) for o in outs])
    np.testing.assert_array_equal(got, np.array(tables))


P2_BATCH = np.tile(np.arange(4), 8)  # every message, 8 encryptions each (both signs of noise at each box edge)


@pytest.mark.parametrize(
    "table",
    [[0, 1, 2, 3], [2, 2, 2, 2], [3, 0, 2, 1], lambda m: 3 * m * m + 1, lambda m: -m],
    ids=["identity", "constant", "permutation", "callable-poly", "callable-negative"],
)
def test_p2_tables_repeated_inputs(keys_p2, table):
    ck, sk = keys_p2
    want = ops.lookup_table(P2, table)[P2_BATCH]
    out = ops.pbs(sk, ops.encrypt(ck, P2_BATCH, key=_seed(41)), table)
    np.testing.assert_array_equal(ops.decrypt(ck, out), want)


def test_p4_every_input_output_pair(keys_p4):
    """Tables m -> m + t mod 16 for t = 0..15 map every input to every output: 256 pairs in one call. The
    same call is the KS-dedup check: three of its outputs equal separate bootstraps word for word."""
    ck, sk = keys_p4
    m = np.arange(16)
    tables = [(m + t) % 16 for t in range(16)]
    ct = ops.encrypt(ck, m, key=_seed(50))
    outs = ops.pbs_many(sk, ct, tables)
    assert len(outs) == 16 and all(o.batch_shape == (16,) for o in outs)
    np.testing.assert_array_equal(np.stack([ops.decrypt(ck, o) for o in outs]), np.stack(tables))
    for t in (0, 7, 15):
        _assert_same_words(outs[t], ops.pbs(sk, ct, tables[t]))


P4_RNG = np.random.default_rng(51)


@pytest.mark.parametrize(
    "table",
    [
        P4_RNG.integers(0, 16, 16),
        P4_RNG.permutation(16),
        np.full(16, 9),
        lambda m: (m * m + 3) % 16,
        lambda m: 1 if m >= 8 else 0,
    ],
    ids=["random", "random-permutation", "constant", "callable-square", "callable-msb"],
)
def test_p4_tables_all_inputs(keys_p4, table):
    ck, sk = keys_p4
    m = np.random.default_rng(52).permutation(16)
    out = ops.pbs(sk, ops.encrypt(ck, m, key=_seed(52)), table)
    np.testing.assert_array_equal(ops.decrypt(ck, out), ops.lookup_table(P4, table)[m])


# slow: 25 s cold in CI; P4's every input and output pair runs by default
@pytest.mark.slow
def test_p6_random_tables_random_inputs(keys_p6):
    ck, sk = keys_p6
    rng = np.random.default_rng(60)
    m = rng.integers(0, 64, 32)
    tables = [rng.integers(0, 64, 64), rng.integers(0, 64, 64)]
    outs = ops.pbs_many(sk, ops.encrypt(ck, m, key=_seed(60)), tables)
    for t, o in zip(tables, outs):
        np.testing.assert_array_equal(ops.decrypt(ck, o), t[m])


def test_pbs_of_trivial_ciphertext(keys_p2):
    """A public constant (a = 0) bootstraps like any ciphertext: batch of 4, reusing the (4,) shape."""
    ck, sk = keys_p2
    out = ops.pbs(sk, ops.trivial(P2, np.arange(4)), [1, 3, 0, 2])
    np.testing.assert_array_equal(ops.decrypt(ck, out), [1, 3, 0, 2])


def test_batch_equals_one_at_a_time(keys_p2):
    """pbs is a deterministic function of the ciphertext: a batch (flat or 2-D) gives the items' words."""
    ck, sk = keys_p2
    table = [3, 1, 0, 2]
    ct = ops.encrypt(ck, np.array([0, 1, 2, 3]), key=_seed(70))
    batch = ops.pbs(sk, ct, table)
    for i in range(4):
        single = ops.pbs(sk, LWECiphertext(ct.b[i], ct.a[i], ct.moduli), table)
        assert single.batch_shape == ()
        np.testing.assert_array_equal(np.asarray(single.b), np.asarray(batch.b[i]))
        np.testing.assert_array_equal(np.asarray(single.a), np.asarray(batch.a[i]))
    ct2 = LWECiphertext(ct.b.reshape(2, 2, -1), ct.a.reshape(2, 2, *ct.a.shape[1:]), ct.moduli)
    out2 = ops.pbs(sk, ct2, table)
    assert out2.batch_shape == (2, 2)
    np.testing.assert_array_equal(np.asarray(out2.b).reshape(batch.b.shape), np.asarray(batch.b))
    np.testing.assert_array_equal(np.asarray(out2.a).reshape(batch.a.shape), np.asarray(batch.a))
    bt, at = ops.keyswitch(sk, ct)
    bt1, at1 = ops.keyswitch(sk, LWECiphertext(ct.b[1], ct.a[1], ct.moduli))
    assert int(bt1) == int(bt[1]) and np.array_equal(np.asarray(at1), np.asarray(at[1]))


def test_progress_reports_and_same_words(keys_p2):
    """With a progress callback the blind rotation runs in chunks (n = 64: 16 chunks of 4 steps): the
    fractions rise to 1.0, one call per chunk, and the outputs are the words of the call without it (also
    for KS-dedup). A non-callable progress is refused."""
    ck, sk = keys_p2
    ct = ops.encrypt(ck, np.array([0, 1, 2, 3]), key=_seed(75))
    tables = [[3, 1, 0, 2], [1, 1, 0, 0]]
    calls = []
    with_progress = ops.pbs_many(sk, ct, tables,
                                 progress=lambda done, total, stage: calls.append((stage, done / total)))
    plain = ops.pbs_many(sk, ct, tables)
    for x, y in zip(with_progress, plain, strict=True):
        _assert_same_words(x, y)
    chunks = math.ceil(P2.lwe_dim / math.ceil(P2.lwe_dim / min(ops.PROGRESS_CHUNKS, P2.lwe_dim)))
    assert len(calls) == chunks and {s for s, _ in calls} == {"blind rotation"}
    fractions = [f for _, f in calls]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and fractions[0] > 0
    with pytest.raises(TypeError, match="progress must be a callable"):
        ops.pbs(sk, ct, tables[0], progress="yes")


def test_chained_bootstraps_bivariate(keys_p4):
    """f(x) = x mod 4, g(y) = y mod 4, then h(4 g + f) = f g: the input of h is 4 PBS + PBS, squared norm
    4^2 + 1 = 17 = max_norm2 (the budget the presets are sized for)."""
    ck, sk = keys_p4
    rng = np.random.default_rng(80)
    x, y = rng.permutation(16), rng.integers(0, 16, 16)
    fx = ops.pbs(sk, ops.encrypt(ck, x, key=_seed(80)), lambda m: m % 4)
    gy = ops.pbs(sk, ops.encrypt(ck, y, key=_seed(81)), lambda m: m % 4)
    v = ops.add(ops.mul_scalar(P4, gy, 4), fx)
    np.testing.assert_array_equal(ops.decrypt(ck, v), (x % 4) + 4 * (y % 4))
    out = ops.pbs(sk, v, lambda m: (m % 4) * (m // 4))
    np.testing.assert_array_equal(ops.decrypt(ck, out), (x % 4) * (y % 4))


# slow: 20 s cold in CI; the GLWE dimension 1 pipeline runs by default
@pytest.mark.slow
def test_glwe_dim_2_pipeline():
    """k = 2 (the P2 preset has k = 4; the test presets k = 1): keygen, bootstrap of all 4 messages."""
    params = make(2, lwe_dim=16, glwe_dim=2, poly_size=64, glwe_log2_rate=-45.0, lwe_log2_rate=-22.0,
                  pbs=(12, 2), ks=(4, 5), name="k2", insecure=True)
    ck, sk = ops.keygen(params, _seed(90))
    assert ck.glwe_key.shape == (2, 64) and ck.long_key.shape == (128,)
    ct = ops.encrypt(ck, np.arange(4), key=_seed(91))
    outs = ops.pbs_many(sk, ct, [[2, 0, 3, 1], [1, 1, 0, 0]])
    np.testing.assert_array_equal(ops.decrypt(ck, outs[0]), [2, 0, 3, 1])
    np.testing.assert_array_equal(ops.decrypt(ck, outs[1]), [1, 1, 0, 0])


# --------------------------------------------------------------------------------------------------
# noise against the model
# --------------------------------------------------------------------------------------------------


def test_pbs_output_noise_within_model(keys_p4):
    """256 bootstrap outputs at INSECURE_TFHE_P4, error (phase - f(m) Delta) / Q.

    The model var_pbs = n var_cmux counts the decomposition error of every CMux as if every key bit were 1
    and the GLWE key had weight k N / 2; here that term dominates (digit noise ~5e-18 vs 1.5e-13 per step),
    so the expectation for this key is var_pbs_key = n digits + h_lwe (h_glwe + 1) B^(-2l) / 12 (only the
    h_lwe CMuxes whose bit is 1 add a decomposition error). For the fixture's key h_lwe = 22 of 64, so
    var_pbs_key = 3.56e-12 ~ 0.37 var_pbs (9.7e-12). Measured with this seed: 2.84e-12 (0.80 var_pbs_key,
    0.29 var_pbs); over 21 other seeds measured / var_pbs_key ranged 0.83-1.11 (std ~8%).

    Bounds: the 256 errors are i.i.d. given the key (fresh decomposition errors per input), sums of many
    uniform terms: the sample variance has relative std ~sqrt(2/256) = 8.8%, and [0.65, 1.35] of
    var_pbs_key is about 4 std. The model is an upper bound: measured <= var_pbs, and measured >=
    var_pbs / 4 holds for this key (expected 0.37). The mean is checked within 4 std / sqrt(256)."""
    ck, sk = keys_p4
    rng = np.random.default_rng(100)
    m = rng.integers(0, 16, 256)
    table = rng.integers(0, 16, 16)
    out = ops.pbs(sk, ops.encrypt(ck, m, key=_seed(100)), table)
    np.testing.assert_array_equal(ops.decrypt(ck, out), table[m])
    e = ops.noise(ck, out, table[m])
    measured = float(np.mean(e**2))
    g, h_lwe, h_glwe = P4.pbs_gadget, int(np.sum(ck.lwe_key)), int(np.sum(ck.glwe_key))
    digits = (P4.glwe_dim + 1) * g.levels * P4.poly_size * (g.base**2 + 2) / 12 * P4.var_fresh
    for_key = P4.lwe_dim * digits + h_lwe * (h_glwe + 1) * 4.0 ** -(g.base_log * g.levels) / 12
    assert 0.65 * for_key <= measured <= 1.35 * for_key, (measured, for_key, P4.var_pbs)
    assert measured <= P4.var_pbs, (measured, P4.var_pbs)
    assert measured >= P4.var_pbs / 4, (measured, P4.var_pbs)
    assert abs(float(np.mean(e))) <= 4 * math.sqrt(for_key / 256)


def test_blind_rotation_input_noise_within_model(keys_p4):
    """The short LWE (b~, a~) mod 2N from ``keyswitch`` of 2048 fresh encryptions under the short key s:
    d = b~ + <a~, s> - 2N m / 2^(p+1) mod 2N (centered, in units of 1/(2N)).

    Model for a fresh input (var_decision with var_fresh as the input term): (var_fresh + var_round_q +
    var_ks + var_round_2n) (2N)^2, dominated by the rounding to 2N: (n/4 + 1) / 12 = 1.42 with the centered-mean
    correction, for any key (without it, (h_lwe + 1) / 12 for a key of weight h_lwe). The errors are i.i.d.
    given the key (fresh rounding per input), integer-valued sums of ~23 uniform terms: relative std of the
    sample variance ~ sqrt(2/2048) = 3.1%; [0.85, 1.15] is ~5 std. Every message must also decode at the blind
    rotation's input: |d| < 2N / 2^(p+2)."""
    ck, sk = keys_p4
    rng = np.random.default_rng(110)
    m = rng.integers(0, 16, 2048)
    bt, at = ops.keyswitch(sk, ops.encrypt(ck, m, key=_seed(110)))
    two_n = 2 * P4.poly_size
    assert bt.shape == (2048,) and at.shape == (2048, P4.lwe_dim)
    assert (0 <= np.asarray(bt)).all() and (np.asarray(bt) < two_n).all() and (np.asarray(at) < two_n).all()
    s = np.asarray(ck.lwe_key).astype(np.int64)
    ph = (np.asarray(bt).astype(np.int64) + np.asarray(at).astype(np.int64) @ s) % two_n
    d = (ph - two_n * m // 2 ** (P4.message_bits + 1) + two_n // 2) % two_n - two_n // 2
    assert np.abs(d).max() < two_n // 2 ** (P4.message_bits + 2)
    measured = float(np.mean(d.astype(np.float64) ** 2))
    rest = (P4.var_fresh + P4.var_round_q + P4.var_ks) * two_n**2
    model = rest + P4.var_round_2n * two_n**2
    assert 0.85 * model <= measured <= 1.15 * model, (measured, model)
    assert abs(float(np.mean(d))) <= 5 * math.sqrt(model / 2048)


# --------------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("m", [4, -1, [0, 1, 4], [[0], [7]]], ids=["4", "-1", "list", "2-D"])
def test_message_out_of_range(keys_p2, m):
    ck, _ = keys_p2
    with pytest.raises(ParameterError, match="out of range"):
        ops.encrypt(ck, m)
    with pytest.raises(ParameterError, match="out of range"):
        ops.trivial(P2, m)


@pytest.mark.parametrize("m", [1.0, [0.5, 1.0], "1", None], ids=["float", "floats", "str", "None"])
def test_message_not_integer(keys_p2, m):
    ck, _ = keys_p2
    with pytest.raises(ParameterError, match="integers"):
        ops.encrypt(ck, m)


@pytest.mark.parametrize(
    "table, match",
    [([0, 1, 2], "4 entries"), ([0, 1, 2, 3, 0], "4 entries"), ([[0, 1], [2, 3]], "4 entries"),
     (["a", "b", "c", "d"], "integers"), ([0, 1, None, 3], "integers"), (lambda m: "x", "integers")],
    ids=["short", "long", "2-D", "strings", "None", "callable-str"],
)
def test_bad_table(keys_p2, table, match):
    _, sk = keys_p2
    with pytest.raises(ParameterError, match=match):
        ops.lookup_table(P2, table)
    with pytest.raises(ParameterError, match=match):
        ops.pbs(sk, ops.trivial(P2, np.arange(4)), table)


def test_per_input_tables_equal_separate_calls(keys_p2):
    """One table per input: every input decrypts to its own table's value, and the words equal a separate
    pbs of that input with that table (same key switch, same accumulator start)."""
    ck, sk = keys_p2
    m = np.array([[0, 1], [2, 3]])
    ct = ops.encrypt(ck, m, key=_seed(71))
    rng = np.random.default_rng(71)
    tables = rng.integers(0, 4, (2, 2, 4))
    out = ops.pbs(sk, ct, tables)
    np.testing.assert_array_equal(ops.decrypt(ck, out), np.take_along_axis(tables, m[..., None], -1)[..., 0])
    for i, j in np.ndindex(2, 2):
        single = ops.pbs(sk, LWECiphertext(ct.b[i, j], ct.a[i, j], ct.moduli), tables[i, j])
        np.testing.assert_array_equal(np.asarray(single.b), np.asarray(out.b[i, j]))
        np.testing.assert_array_equal(np.asarray(single.a), np.asarray(out.a[i, j]))
    # Mixed with a shared table under KS-dedup: both outputs as if applied alone.
    shared, own = ops.pbs_many(sk, ct, [lambda v: 3 - v, tables])
    np.testing.assert_array_equal(np.asarray(own.b), np.asarray(out.b))
    np.testing.assert_array_equal(ops.decrypt(ck, shared), 3 - m)


def test_per_input_tables_refused_when_malformed(keys_p2):
    _, sk = keys_p2
    ct = ops.trivial(P2, np.arange(4))
    with pytest.raises(ParameterError, match=r"shape \(4, 4\) \(one table of 4 entries per input\), got \(3, 4\)"):
        ops.pbs(sk, ct, np.zeros((3, 4), dtype=np.int64))
    with pytest.raises(ParameterError, match="must be integers"):
        ops.pbs(sk, ct, np.zeros((4, 4)))
    with pytest.raises(ParameterError, match="must be integers"):
        ops.per_input_tables(P2, np.zeros((4, 4), dtype=bool), (4,))


@pytest.mark.parametrize("table", [[0.0, 1.5, 2.0, 3.0], lambda m: m / 2], ids=["floats", "callable-float"])
def test_table_non_integer_values_refused(table):
    with pytest.raises(ParameterError):
        ops.lookup_table(P2, table)


def test_pbs_many_needs_a_list(keys_p2):
    _, sk = keys_p2
    ct = ops.trivial(P2, np.arange(4))
    for bad in ([], lambda m: m, np.arange(4), (x for x in [[0, 1, 2, 3]])):
        with pytest.raises(ParameterError, match="non-empty list"):
            ops.pbs_many(sk, ct, bad)


def test_ciphertext_of_other_params(keys_p2, keys_p4):
    ck2, sk2 = keys_p2
    ck4, sk4 = keys_p4
    ct2, ct4 = ops.encrypt(ck2, [1, 2]), ops.encrypt(ck4, [1, 2])
    for call in (
        lambda: ops.pbs(sk4, ct2, lambda m: m),
        lambda: ops.pbs_many(sk4, ct2, [lambda m: m]),
        lambda: ops.keyswitch(sk4, ct2),
        lambda: ops.decrypt(ck4, ct2),
        lambda: ops.noise(ck4, ct2, [1, 2]),
        lambda: ops.add_scalar(P4, ct2, 1),
        lambda: ops.add(ct2, ct4),
        lambda: ops.sub(ct4, ct2),
    ):
        with pytest.raises(BasisMismatchError):
            call()
    with pytest.raises(ParameterError):
        ops.check_compatible(ck2, sk4)
    ops.check_compatible(ck2, sk2)  # same parameters: no error


def test_bad_arguments(keys_p2):
    ck, _ = keys_p2
    x = ops.encrypt(ck, [1])
    for call in (
        lambda: ops.keygen("P2"),
        lambda: ops.keygen(P2, seed=1234),
        lambda: ops.encrypt("key", [1]),
        lambda: ops.mul_scalar(P2, x, 1.5),
        lambda: ops.mul_scalar(P2, x, True),
        lambda: ops.add_scalar(P2, x, 0.5),
        lambda: ops.add(x, "y"),
    ):
        with pytest.raises(ParameterError):
            call()


def test_encrypt_decrypt_with_server_key_refused(keys_p2):
    ck, sk = keys_p2
    x = ops.encrypt(ck, [1])
    for call in (
        lambda: ops.encrypt(sk, [1]),
        lambda: ops.decrypt(sk, x),
        lambda: ops.noise(sk, x, [1]),
        lambda: ops.pbs(ck, x, [0, 1, 2, 3]),
        lambda: ops.keyswitch(ck, x),
    ):
        with pytest.raises(ParameterError, match="expected a tfhe"):
            call()


def test_phase_exact_beyond_2_16_terms():
    """<a, s> over a long key of k N = 2^18 > 2^16 (the limit of one sum_wide) with every term 0xFFFF:
    the phase equals the exact integer sum mod Q (a regression test: one unsplit sum overflowed)."""
    import jax.numpy as jnp

    from crossfhe.core.lwe import LWECiphertext
    from crossfhe.tfhe.params import make

    params = make(2, lwe_dim=16, glwe_dim=2, poly_size=2**17, glwe_log2_rate=-45.0, lwe_log2_rate=-22.0,
                  pbs=(12, 2), ks=(4, 5), insecure=True)
    ck = ops.ClientKey(jnp.zeros(16, jnp.int32), jnp.ones((2, 2**17), jnp.int32), params)
    ct = LWECiphertext.create(np.zeros(2, np.uint32), np.full((2, 2**18), 65535, np.uint32), params.moduli)
    assert int(ops.phase(ck, ct)) == (2**18 * 65535) % params.big_q


def test_batch_chunks_cover_the_batch():
    """The NATIVE set's batch split of the blind rotations: equal chunk sizes covering the rows (tables x items),
    each chunk at most CPU_BATCH_WORDS accumulator words for the XLA products and FUSED_BATCH_WORDS for the native
    kernel (or one row); one piece on the other sets."""
    from crossfhe.kernels import MATRIX, NATIVE, VECTOR

    assert bootstrap.batch_chunks(P4, 100, VECTOR, ops.FFTProduct) == (1, 100)
    assert bootstrap.batch_chunks(P4, 100, MATRIX, ops.NTTProduct) == (1, 100)
    assert bootstrap.batch_chunks(P4, 100, NATIVE, ops.NativeProduct) == (1, 100)
    assert bootstrap.batch_chunks(P4, 10**4, NATIVE, ops.NativeProduct)[0] > 1
    for params, rows in ((P4, 1), (P4, 100), (P4, 111), (P4, 5000), (testing.INSECURE_TFHE_P6_EXT, 18)):
        for product, most in ((ops.FFTProduct, ops.CPU_BATCH_WORDS), (ops.NTTProduct, ops.CPU_BATCH_WORDS),
                              (ops.NativeProduct, bootstrap.FUSED_BATCH_WORDS)):
            count, size = bootstrap.batch_chunks(params, rows, NATIVE, product)
            per_row = (params.glwe_dim + 1) * params.acc_size
            assert count * size >= rows > (count - 1) * size
            assert size == 1 or size * per_row <= most


def test_split_batch_equals_one_piece(keys_p4, monkeypatch):
    """A batch blind-rotated in chunks inside the program (here 3 rows each, the last padded) gives the same words
    as in one piece, for one table and for per-input tables with KS-dedup (through the exact NTT: the XLA FFT's
    rounding, hence its words, may depend on the shape it runs on; chunked, it still decrypts)."""
    ck, sk = keys_p4
    ntt_key, fft_key = ops.prepare(sk, product=ops.NTTProduct), ops.prepare(sk, product=ops.FFTProduct)
    assert ntt_key.product is ops.NTTProduct and fft_key.product is ops.FFTProduct
    m = np.arange(7) % 2**P4.message_bits
    ct = ops.encrypt(ck, m, key=b"split".ljust(32, b"\0"))
    tables = [lambda v: (v * v) % 16, np.outer(np.arange(7), np.arange(16)) % 16]
    monkeypatch.setattr(bootstrap, "batch_chunks", lambda params, rows, kernels, product: (1, rows))
    whole = ops.pbs_many(ntt_key, ct, tables)
    monkeypatch.setattr(bootstrap, "batch_chunks", lambda params, rows, kernels, product: (-(-rows // 3), 3))
    split = ops.pbs_many(ntt_key, ct, tables)
    np.testing.assert_array_equal(ops.decrypt(ck, ops.pbs(fft_key, ct, tables[0])), (m * m) % 16)
    for x, y in zip(whole, split, strict=True):
        np.testing.assert_array_equal(np.asarray(x.b), np.asarray(y.b))
        np.testing.assert_array_equal(np.asarray(x.a), np.asarray(y.a))
    np.testing.assert_array_equal(ops.decrypt(ck, split[1]), (np.arange(7) * m) % 16)
    g2 = testing.INSECURE_TFHE_P4_G2  # the native kernel takes grouped key bits
    ck2, sk2 = ops.keygen(g2, b"split-g2".ljust(32, b"\0"))
    native = ops.prepare(sk2, product=ops.NativeProduct)
    ct2 = ops.encrypt(ck2, m, key=b"split2".ljust(32, b"\0"))
    monkeypatch.setattr(bootstrap, "batch_chunks", lambda params, rows, kernels, product: (1, rows))
    whole = ops.pbs_many(native, ct2, tables)
    monkeypatch.setattr(bootstrap, "batch_chunks", lambda params, rows, kernels, product: (-(-rows // 3), 3))
    np.testing.assert_array_equal(ops.decrypt(ck2, whole[0]), (m * m) % 16)
    for x, y in zip(whole, ops.pbs_many(native, ct2, tables), strict=True):  # the native kernel, chunked
        np.testing.assert_array_equal(np.asarray(x.b), np.asarray(y.b))
        np.testing.assert_array_equal(np.asarray(x.a), np.asarray(y.a))


def test_keyswitch_through_key_bytes(keys_p4):
    """With the key's signed bytes prepared (the NATIVE and MATRIX sets), batches of KS_BYTES_FROM inputs and more
    key-switch through four int8 products: the bytes sum back to the key mod 2^32, and the short ciphertexts are
    the words of the int32 product, for every input of a batch, eagerly and under jit. A gadget whose byte
    products could overflow int32 (or whose digits do not fit int8) has no bytes."""
    import dataclasses

    ck, sk = keys_p4
    by = keys.ksk_bytes(sk.params, sk.ksk)
    planes = np.asarray(by).astype(np.int64).reshape(4, sk.ksk.shape[0], -1)
    assert planes.min() >= -128 and planes.max() <= 127
    total = sum(planes[b] << (8 * b) for b in range(4)) % 2**32
    np.testing.assert_array_equal(total, np.asarray(sk.ksk).view(np.uint32))
    with_bytes = dataclasses.replace(sk, prepared=dataclasses.replace(sk.prepared, ksk_bytes=by))
    without = dataclasses.replace(sk, prepared=dataclasses.replace(sk.prepared, ksk_bytes=None))
    assert keyswitch.ks_key(with_bytes.prepared, 6).dtype == np.int8
    assert keyswitch.ks_key(with_bytes.prepared, 1).dtype == np.int32
    assert keyswitch.ks_key(without.prepared, 6).dtype == np.int32
    ct = ops.encrypt(ck, np.arange(6) % 16, key=_seed(120))
    bt, at = ops.keyswitch(with_bytes, ct)  # 6 >= KS_BYTES_FROM: the bytes
    bt32, at32 = ops.keyswitch(without, ct)  # the int32 product
    bt_jit, at_jit = jax.jit(ops.keyswitch)(with_bytes, ct)  # a traced key: the bytes too
    for x, y in ((bt, bt32), (at, at32), (bt_jit, bt), (at_jit, at)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    wide = dataclasses.replace(sk.params, ks_gadget=dataclasses.replace(sk.params.ks_gadget, base_log=8, levels=2))
    assert keys.ksk_bytes(wide, sk.ksk) is None


def test_pbs_with_a_key_traced_under_jit(keys_p4):
    """A server key passed to jax.jit as an argument carries its prepared forms (pytree leaves): the key prepared by
    default and for the FFT product give the eager words, and so does a key closed over. A key made from its arrays
    (as after a load) is prepared when it is made, also inside a trace from concrete arrays (closed over); from
    traced arrays (the key's arrays passed as arguments) it is refused with a message naming the way out, and a key
    made outside the trace is accepted as an argument."""
    ck, sk = keys_p4
    m = np.array([0, 5, 11])
    ct = ops.encrypt(ck, m, key=_seed(130))
    table = (np.arange(16) * 3 + 1) % 16
    eager = ops.pbs(sk, ct, table)
    np.testing.assert_array_equal(ops.decrypt(ck, eager), table[m])
    for product in (None, ops.FFTProduct):
        key = ops.prepare(sk, product=product)
        _assert_same_words(jax.jit(lambda s, c: ops.pbs(s, c, table))(key, ct), eager)
    _assert_same_words(jax.jit(lambda c: ops.pbs(sk, c, table))(ct), eager)

    def fresh(bsk, ksk):  # as after a load: a key made from its arrays
        return ops.ServerKey.create(bsk, ksk, sk.params, sk.key_id)

    with pytest.raises(ParameterError, match="prepare"):
        jax.jit(lambda b, k, c: ops.pbs(fresh(b, k), c, table))(sk.bsk, sk.ksk, ct)
    _assert_same_words(jax.jit(lambda c: ops.pbs(fresh(sk.bsk, sk.ksk), c, table))(ct), eager)  # made in the trace
    other = fresh(sk.bsk, sk.ksk)
    assert other.prepared is not None and other.product is sk.product
    _assert_same_words(jax.jit(lambda s, c: ops.pbs(s, c, table))(other, ct), eager)
