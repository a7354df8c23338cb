"""Coefficient-encoded HMVP (CHAM Alg. 1, with R rows per plaintext product): exact against NumPy mod t for m < N,
m = N, m > N, n > N, at R = 1 (CHAM as published), the default R and R = N (one product per column block)."""

import numpy as np
import pytest

from crossfhe.bfv import ops
from crossfhe.errors import KeyMismatchError, ParameterError
from crossfhe.linalg import hmvp as H
from crossfhe.math.random import seed_key
from crossfhe.testing import INSECURE_BFV_N256, INSECURE_BFV_N256_COEFF

# CHAM's shape (two ciphertext primes, one special prime) at N = 256, t = 2^16 (not a batching modulus:
# coefficient encoding works for any t).
P = INSECURE_BFV_N256_COEFF


@pytest.fixture(scope="module")
def keys():
    return ops.keygen(P, galois_elements=H.required_galois_elements(P), relin=False, seed=bytes(range(32)))


def _run(keys, m, n, seed, *, rows_per_call=H.DEFAULT_ROWS_PER_CALL, public=True, r=H.DEFAULT_ROWS_PER_PRODUCT):
    sk, ek = keys
    rng = np.random.default_rng(seed)
    a = rng.integers(0, P.t, size=(m, n))
    v = rng.integers(0, P.t, size=n)
    vec = H.encrypt_vector(ek if public else sk, P, v, key=seed_key(seed.to_bytes(2, "little") * 16),
                           rows_per_product=r)
    res = H.hmvp(H.encode_matrix(P, a, rows_per_product=r), vec, ek, rows_per_call=rows_per_call)
    return H.decrypt_result(sk, res), H.matvec_reference(a, v, P.t), res


@pytest.mark.parametrize(
    ("m", "n"),
    [
        (1, 1),
        (3, 200),  # m < N, not a power of two: the pack pads to 4 rows at stride N / 4
        (256, 256),  # m = n = N
        (300, 40),  # m > N: two output ciphertexts (256 + 44 rows)
        (20, 600),  # n > N: three column blocks aggregated before the rescale
    ],
)
@pytest.mark.parametrize("r", [1, H.DEFAULT_ROWS_PER_PRODUCT])
def test_hmvp_is_exact_mod_t(keys, m, n, r):
    got, want, res = _run(keys, m, n, seed=m + n, r=r)
    assert got.shape == (m,)
    assert np.array_equal(got, want)
    assert len(res.ciphertexts) == -(-m // P.n)
    assert H.noise_budget(keys[0], res) > 0


def test_one_product_per_column(keys):
    """R = N: w = 1, each vector entry its own block and each product one column of N rows: no packing key switch
    but the trace's."""
    got, want, res = _run(keys, 70, 6, seed=3, r=P.n)
    assert np.array_equal(got, want)


def test_hmvp_row_chunks_give_the_same_result(keys):
    """rows_per_call splits the dot products into several kernel calls (with padding): same decryption."""
    for r in (1, 4):
        got, want, _ = _run(keys, 70, 90, seed=7, rows_per_call=32, r=r)
        assert np.array_equal(got, want)


def test_rows_per_product_must_match_and_be_a_power_of_two(keys):
    sk, ek = keys
    vec = H.encrypt_vector(ek, P, np.ones(10, dtype=np.int64), rows_per_product=4)
    with pytest.raises(ParameterError, match="rows_per_product=8.*rows_per_product=4"):
        H.hmvp(H.encode_matrix(P, np.ones((3, 10), dtype=np.int64), rows_per_product=8), vec, ek)
    for bad in (3, 0, 2 * P.n, True):
        with pytest.raises(ParameterError, match="power of two"):
            H.encode_matrix(P, np.ones((3, 10), dtype=np.int64), rows_per_product=bad)


def test_hmvp_with_a_secret_key_encrypted_vector(keys):
    got, want, _ = _run(keys, 9, 33, seed=9, public=False)
    assert np.array_equal(got, want)


def test_packed_result_has_zeros_between_rows(keys):
    """Rows sit at their positions (rows_per_product 1: stride N / n'); every other coefficient decrypts to 0 (the
    trace cleared the garbage)."""
    sk, ek = keys
    group_of_four = np.array([0, 1, 2, 3, 0]) * (P.n // 4) + np.array([0, 0, 0, 0, P.n // 8])  # G' = 2 groups
    for r, want_pos in ((1, np.arange(5) * (P.n // 8)), (4, group_of_four)):
        rng = np.random.default_rng(5)
        a, v = rng.integers(0, P.t, (5, 17)), rng.integers(0, P.t, 17)
        res = H.hmvp(H.encode_matrix(P, a, rows_per_product=r), H.encrypt_vector(ek, P, v, rows_per_product=r), ek)
        coeffs = ops.decode(ops.decrypt(sk, res.ciphertexts[0], encoding="coeff"))
        assert np.array_equal(res.positions[0], want_pos)
        mask = np.zeros(P.n, dtype=bool)
        mask[res.positions[0]] = True
        assert np.array_equal(coeffs[res.positions[0]], H.matvec_reference(a, v, P.t))
        assert not coeffs[~mask].any()


def test_hmvp_errors(keys):
    sk, ek = keys
    vec = H.encrypt_vector(ek, P, np.ones(10, dtype=np.int64))
    with pytest.raises(ParameterError, match="shape mismatch"):
        H.hmvp(H.encode_matrix(P, np.ones((3, 11), dtype=np.int64)), vec, ek)
    with pytest.raises(ParameterError, match=r"\[0, t\)"):
        H.encode_matrix(P, np.full((2, 2), P.t))
    with pytest.raises(ParameterError, match=r"\[0, t\)"):
        H.encrypt_vector(ek, P, [-1, 2])
    with pytest.raises(ParameterError, match="2-D"):
        H.encode_matrix(P, np.ones(4, dtype=np.int64))
    _, ek_no_galois = ops.keygen(P, relin=False, seed=bytes(32))
    with pytest.raises(ParameterError, match="missing Galois keys"):
        H.hmvp(H.encode_matrix(P, np.ones((3, 10), dtype=np.int64)), vec, ek_no_galois)
    _, ek_other = ops.keygen(INSECURE_BFV_N256, seed=bytes(32))
    with pytest.raises(ParameterError, match="different parameter sets"):
        H.hmvp(H.encode_matrix(P, np.ones((3, 10), dtype=np.int64)), vec, ek_other)
    _, ek_stranger = ops.keygen(P, galois_elements=H.required_galois_elements(P), relin=False, seed=b"\x05" * 32)
    with pytest.raises(KeyMismatchError, match="different key pairs"):
        H.hmvp(H.encode_matrix(P, np.ones((3, 10), dtype=np.int64)), vec, ek_stranger)


def test_exhausted_noise_budget_is_refused(keys):
    """A result whose c0 is replaced by random words has no budget left: decrypt_result raises."""
    import jax.numpy as jnp

    from crossfhe.bfv import Ciphertext
    from crossfhe.ring.poly import RNSPoly

    sk, _ = keys
    _, _, res = _run(keys, 4, 9, seed=4)
    ct = res.ciphertexts[0]
    rng = np.random.default_rng(1)
    junk = (rng.integers(0, 2**30, size=ct.c0.data.shape) % np.array(P.q)[:, None]).astype(np.uint32)
    bad = Ciphertext(RNSPoly(jnp.asarray(junk), ct.c0.basis, ct.c0.domain), ct.c1, P)
    broken = H.HMVPResult((bad,), res.positions, res.length)
    with pytest.raises(ParameterError, match="noise budget"):
        H.decrypt_result(sk, broken)
    assert H.decrypt_result(sk, broken, check=False).shape == (4,)


@pytest.mark.slow
def test_noise_budget_positive_at_the_cham_preset():
    """At the 128-bit CHAM-shaped preset (N 4096, two sparse 30-bit primes, one special prime, t = 1032193):
    a full tile of N rows with n > N columns decrypts exactly with budget left (measured: about 20 bits)."""
    from crossfhe.bfv import presets

    params = presets.CHAM_N4096
    sk, ek = ops.keygen(params, galois_elements=H.required_galois_elements(params), relin=False)
    rng = np.random.default_rng(3)
    a = rng.integers(0, params.t, size=(params.n, params.n + 100))
    v = rng.integers(0, params.t, size=params.n + 100)
    res = H.hmvp(H.encode_matrix(params, a), H.encrypt_vector(ek, params, v), ek)
    assert np.array_equal(H.decrypt_result(sk, res), H.matvec_reference(a, v, params.t))
    assert H.noise_budget(sk, res) > 0
