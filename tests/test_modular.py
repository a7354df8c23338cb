"""math/modular.py against Python integers, on random and edge inputs (0, q-1, lazy-range maxima)."""

import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from crossfhe.math import modular as M

# Odd moduli of every size class the kernels promise: tiny, 17-bit, NTT primes near 2^28/2^30, and
# the wide range [2^30, 2^31) up to the Mersenne prime 2^31 - 1.
MODULI = [3, 65537, 268369921, 1073479681, 1073741827, 2013265921, 2**31 - 1]
WIDE_Q = [q for q in MODULI if q > 2**15]


def _inputs(q, count=3000, seed=0):
    rnd = random.Random(seed * 7919 + q)
    edge = [0, 1, q - 1, q - 2, q // 2]
    a = edge + edge[::-1] + [rnd.randrange(q) for _ in range(count)]
    b = edge[::-1] + edge + [rnd.randrange(q) for _ in range(count)]
    return a, b


def _u32(xs):
    return np.array(xs, dtype=np.uint32)


def _consts(q):
    t = M.ModulusTable.create([q])
    return {k: getattr(t, k)[0] for k in ("q", "bits", "barrett_mu", "mont_qinv", "mont_r2", "r_mod_q")}


@pytest.mark.parametrize("q", MODULI, ids=lambda q: f"q={q}")
def test_mul_wide_exact(q):
    rnd = random.Random(q)
    a = [0, 1, 2**32 - 1, 2**31, 65535, 65536] + [rnd.randrange(2**32) for _ in range(2000)]
    b = [2**32 - 1, 2**32 - 1, 2**32 - 1, 2**31, 65535, 65536] + [rnd.randrange(2**32) for _ in range(2000)]
    hi, lo = M.mul_wide(_u32(a), _u32(b))
    want = [x * y for x, y in zip(a, b)]
    assert np.asarray(hi).tolist() == [w >> 32 for w in want]
    assert np.asarray(lo).tolist() == [w & 0xFFFFFFFF for w in want]


@pytest.mark.parametrize("q", MODULI, ids=lambda q: f"q={q}")
def test_add_sub_neg(q):
    a, b = _inputs(q)
    A, B = _u32(a), _u32(b)
    assert np.asarray(M.add_mod(A, B, np.uint32(q))).tolist() == [(x + y) % q for x, y in zip(a, b)]
    assert np.asarray(M.sub_mod(A, B, np.uint32(q))).tolist() == [(x - y) % q for x, y in zip(a, b)]
    assert np.asarray(M.neg_mod(A, np.uint32(q))).tolist() == [(-x) % q for x in a]


@pytest.mark.parametrize("q", MODULI, ids=lambda q: f"q={q}")
def test_barrett(q):
    c = _consts(q)
    a, b = _inputs(q)
    got = M.barrett_mul(_u32(a), _u32(b), c["q"], c["barrett_mu"], c["bits"])
    assert np.asarray(got).tolist() == [x * y % q for x, y in zip(a, b)]
    # Largest two-word input of the stated domain z < 2^(2s), and single words (any uint32 when q > 2^15).
    s = q.bit_length()
    zmax = 2 ** (2 * s) - 1
    got = M.barrett_reduce_wide(_u32([zmax >> 32]), _u32([zmax & 0xFFFFFFFF]), c["q"], c["barrett_mu"], c["bits"])
    assert int(got[0]) == zmax % q
    if q > 2**15:
        xs = [0, q - 1, q, 2**32 - 1] + [random.Random(q).randrange(2**32) for _ in range(1000)]
        got = M.barrett_reduce(_u32(xs), c["q"], c["barrett_mu"], c["bits"])
        assert np.asarray(got).tolist() == [x % q for x in xs]


@pytest.mark.parametrize("q", [q for q in MODULI if q < 2**30], ids=lambda q: f"q={q}")
def test_barrett_lazy_range(q):
    c = _consts(q)
    a, b = _inputs(q)
    got = np.asarray(M.barrett_mul_lazy(_u32(a), _u32(b), c["q"], c["barrett_mu"], c["bits"])).astype(np.int64)
    assert (got < 2 * q).all()
    assert (got % q).tolist() == [x * y % q for x, y in zip(a, b)]


@pytest.mark.parametrize("q", MODULI, ids=lambda q: f"q={q}")
def test_shoup(q):
    rnd = random.Random(q + 1)
    xs = [0, 1, 2**32 - 1, 4 * q - 1 if 4 * q < 2**32 else 2 * q - 1] + [rnd.randrange(2**32) for _ in range(3000)]
    ws = [q - 1, 0, q - 1, q - 1] + [rnd.randrange(q) for _ in range(3000)]
    X, W = _u32(xs), _u32(ws)
    wsh = M.shoup_precompute(W, q)
    assert wsh.tolist() == [(w << 32) // q for w in ws]
    lazy = np.asarray(M.shoup_mul_lazy(X, W, wsh, np.uint32(q))).astype(np.int64)
    assert (lazy < 2 * q).all()
    want = [x * w % q for x, w in zip(xs, ws)]
    assert (lazy % q).tolist() == want
    assert np.asarray(M.shoup_mul(X, W, wsh, np.uint32(q))).tolist() == want


@pytest.mark.parametrize("q", MODULI, ids=lambda q: f"q={q}")
def test_montgomery(q):
    c = _consts(q)
    a, b = _inputs(q)
    r_inv = pow(2**32, -1, q)
    A, B = _u32(a), _u32(b)
    lazy = np.asarray(M.montgomery_mul_lazy(A, B, c["q"], c["mont_qinv"])).astype(np.int64)
    assert (lazy < 2 * q).all()
    want = [x * y * r_inv % q for x, y in zip(a, b)]
    assert (lazy % q).tolist() == want
    assert np.asarray(M.montgomery_mul(A, B, c["q"], c["mont_qinv"])).tolist() == want
    # Round trip through Montgomery form, and a product of Montgomery forms.
    am = M.to_montgomery(A, c["q"], c["mont_qinv"], c["mont_r2"])
    assert np.asarray(am).tolist() == [x * 2**32 % q for x in a]
    assert np.asarray(M.from_montgomery(am, c["q"], c["mont_qinv"])).tolist() == a
    # Largest input of the lazy domain z < q 2^32: a = 2^32 - 1, b = q - 1.
    big = M.montgomery_mul(_u32([2**32 - 1]), _u32([q - 1]), c["q"], c["mont_qinv"])
    assert int(big[0]) == (2**32 - 1) * (q - 1) * r_inv % q


@pytest.mark.parametrize("q", WIDE_Q, ids=lambda q: f"q={q}")
def test_reduce_u64(q):
    c = _consts(q)
    rnd = random.Random(q + 2)
    zs = [0, 2**64 - 1, 2**63, q * 2**32, q * q] + [rnd.randrange(2**64) for _ in range(2000)]
    got = M.reduce_u64(_u32([z >> 32 for z in zs]), _u32([z & 0xFFFFFFFF for z in zs]), c["q"],
                       c["barrett_mu"], c["bits"], c["mont_qinv"], c["mont_r2"])
    assert np.asarray(got).tolist() == [z % q for z in zs]


@pytest.mark.parametrize("q", WIDE_Q, ids=lambda q: f"q={q}")
def test_mac_reduce_at_max_terms(q):
    c = _consts(q)
    n = min(M.Modulus.create(q).mac_max_terms, 512)
    rnd = random.Random(q + 3)
    cols = 64
    a = np.array([[q - 1] * 4 + [rnd.randrange(q) for _ in range(cols - 4)] for _ in range(n)], dtype=np.uint32)
    b = np.array([[q - 1] * 4 + [rnd.randrange(q) for _ in range(cols - 4)] for _ in range(n)], dtype=np.uint32)
    got = M.mac_reduce(a, b, c["q"], c["barrett_mu"], c["bits"], c["mont_qinv"], c["mont_r2"], axis=0)
    want = [sum(int(a[i, j]) * int(b[i, j]) for i in range(n)) % q for j in range(cols)]
    assert np.asarray(got).tolist() == want


def test_mac_max_terms_is_the_overflow_bound():
    for q in WIDE_Q:
        n = M.Modulus.create(q).mac_max_terms
        assert n * (q - 1) ** 2 < 2**64
        assert n == 2**16 or (n + 1) * (q - 1) ** 2 >= 2**64


@pytest.mark.parametrize("bad", [2, 4, 2**31, 2**31 + 1, -7, 1])
def test_modulus_rejects_bad(bad):
    with pytest.raises(ValueError, match="modulus"):
        M.Modulus.create(bad)


def test_kernels_exact_under_user_jit_without_x64():
    assert not jax.config.jax_enable_x64, "the test must run with x64 off, as users have it"
    q = 2013265921
    c = _consts(q)
    a, b = _inputs(q, count=500)

    @jax.jit
    def user_fn(x, y):
        return M.barrett_mul(x, y, c["q"], c["barrett_mu"], c["bits"]) + jnp.uint32(0)

    got = user_fn(_u32(a), _u32(b))
    assert got.dtype == jnp.uint32
    assert np.asarray(got).tolist() == [x * y % q for x, y in zip(a, b)]


@pytest.mark.parametrize("unroll_from", [0, 2**40], ids=["unrolled", "broadcast"])
@pytest.mark.parametrize(("n", "chunk"), [(64, 4), (256, 3), (128, 7), (96, 16)])
def test_mac_reduce_rows_matches_integer_matrix_product(n, chunk, unroll_from, monkeypatch):
    """W X mod q_j per column, in both forms (the size threshold moved to force each), for chunks that
    divide the source count (7) and that do not; the largest residues sit in the first columns and rows."""
    monkeypatch.setattr(M, "_ROWS_UNROLL_FROM", unroll_from)
    moduli = [2**31 - 1, 2013265921, 1073479681] if chunk <= 4 else [268369921, 65537, 1073479681]
    src_q = 2**31 - 1 if chunk <= 4 else 268369921
    rnd = np.random.default_rng(n + chunk)
    s, batch = 7, 2
    x = rnd.integers(0, src_q, (batch, s, n), dtype=np.uint64)
    x[:, :, :3] = src_q - 1
    w = np.stack([rnd.integers(0, q, (s,), dtype=np.uint64) for q in moduli])  # [M, S]
    w[:, 0] = np.array(moduli) - 1
    t = M.ModulusTable.create(moduli)
    got = M.mac_reduce_rows(
        x.astype(np.uint32), w.astype(np.uint32), t.q, t.barrett_mu, t.bits, t.mont_qinv, t.mont_r2,
        chunk=chunk,
    )
    xo, wo = x.astype(object), w.astype(object)
    want = np.stack([(wo @ xo[b]) % np.array(moduli, dtype=object)[:, None] for b in range(batch)])
    assert np.asarray(got).shape == (batch, len(moduli), n)
    assert (np.asarray(got).astype(object) == want).all()


# --------------------------------------------------------------------------------------------------
# Modular matrix product through a float64 GEMM
# --------------------------------------------------------------------------------------------------


def _center(y, c):
    return np.where(y > c // 2, y - c, y)


def _gemm_case(s, seed, dst=(2**31 - 1, 2013265921, 1073479681, 268369921)):
    """Sources near 2^31 with their extreme centered values (+-(c - 1) / 2 and the lo/hi corner
    -2^30 + 2^16 - 1) in the first columns, targets with weights at +-q / 2 in the first column."""
    rnd = np.random.default_rng(seed)
    src = np.array([2**31 - 1, 2147352577, 2146959361][: min(s, 3)] * s, dtype=np.int64)[:s, None]
    y = rnd.integers(0, src, (2, s, 24), dtype=np.int64)
    y[:, :, 0] = src[:, 0] // 2  # centered (c - 1) / 2
    y[:, :, 1] = src[:, 0] // 2 + 1  # centered -(c - 1) / 2
    y[:, :, 2] = (src[:, 0] - 2**30 + 2**16 - 1)  # centered -2^30 + 2^16 - 1: lo = 2^16 - 1, hi = -2^14
    y[:, :, 3] = src[:, 0] - 1
    q = np.array(dst, dtype=np.int64)[:, None]
    w = rnd.integers(0, q, (len(dst), s), dtype=np.int64)
    w[:, 0] = q[:, 0] // 2
    w[:, 1] = q[:, 0] // 2 + 1
    want = np.stack([(_center(w, q).astype(object) @ _center(y[b], src).astype(object)) % q.astype(object)
                     for b in range(2)])
    args = (y.astype(np.uint32), (src // 2).astype(np.uint32), src.astype(np.uint32),
            M.gemm_weights(w, q), q.astype(np.uint32))
    return args, want


@pytest.mark.parametrize(("s", "chunk"), [(7, None), (7, 3), (51, None), (60, None), (60, 17)])
def test_centered_gemm_rows_matches_integers(s, chunk):
    """sum_i center(y_i) w_ji mod q_j against Python integers, at the largest safe chunk (51 sources for
    31-bit targets: the float64 sums reach their bound) and in several chunks (even and uneven)."""
    args, want = _gemm_case(s, seed=s)
    bound = M.gemm_chunk(args[-1])
    assert bound == 51
    got = M.centered_gemm_rows(*args, chunk=bound if chunk is None else chunk)
    assert got.dtype == jnp.uint32 and got.shape == want.shape
    assert (np.asarray(got).astype(object) == want).all()


def test_centered_gemm_rows_under_user_jit_and_vmap():
    """x64 stays off outside; jit of a vmap (the batching rule re-enters the float64 scope), and a vmap
    over the weights too, give the eager words."""
    args, want = _gemm_case(9, seed=3)
    assert not jax.config.jax_enable_x64
    y, half, src, wg, q = args

    @jax.jit
    def over_data(y):
        return jax.vmap(lambda v: M.centered_gemm_rows(v, half, src, wg, q, chunk=4))(y)

    assert (np.asarray(over_data(y)).astype(object) == want).all()
    wg2 = np.stack([wg, wg])
    both = jax.jit(jax.vmap(lambda v, w: M.centered_gemm_rows(v, half, src, w, q, chunk=51)))(y, wg2)
    assert (np.asarray(both).astype(object) == want).all()
    assert not jax.config.jax_enable_x64


def test_gemm_chunk_bound():
    """floor(2^52 / ((2^16 - 1 + 2^14) floor(max q / 2))): the largest source count whose sums stay exact."""
    for q, want in [(2**31 - 1, 51), (1073479681, 102), (268369921, 409)]:
        assert M.gemm_chunk(np.array([[q]])) == want == 2**52 // ((2**16 - 1 + 2**14) * (q // 2))
