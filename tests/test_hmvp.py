"""Coefficient-encoded HMVP (CHAM Alg. 1): exact against NumPy mod t for m < N, m = N, m > N, n > N."""

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


def _run(keys, m, n, seed, *, rows_per_call=H.DEFAULT_ROWS_PER_CALL, public=True):
    sk, ek = keys
    rng = np.random.default_rng(seed)
    a = rng.integers(0, P.t, size=(m, n))
    v = rng.integers(0, P.t, size=n)
    vec = H.encrypt_vector(ek if public else sk, P, v, key=seed_key(seed.to_bytes(2, "little") * 16))
    res = H.hmvp(H.encode_matrix(P, a), vec, ek, rows_per_call=rows_per_call)
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
def test_hmvp_is_exact_mod_t(keys, m, n):
    got, want, res = _run(keys, m, n, seed=m + n)
    assert got.shape == (m,)
    assert np.array_equal(got, want)
    assert len(res.ciphertexts) == -(-m // P.n)
    assert H.noise_budget(keys[0], res) > 0


def test_hmvp_row_chunks_give_the_same_result(keys):
    """rows_per_call splits the dot products into several kernel calls (with padding): same decryption."""
    got, want, _ = _run(keys, 70, 90, seed=7, rows_per_call=32)
    assert np.array_equal(got, want)


def test_hmvp_with_a_secret_key_encrypted_vector(keys):
    got, want, _ = _run(keys, 9, 33, seed=9, public=False)
    assert np.array_equal(got, want)


def test_packed_result_has_zeros_between_rows(keys):
    """Rows sit at stride N / n'; every other coefficient decrypts to 0 (the trace cleared the garbage)."""
    sk, _ = keys
    got, want, res = _run(keys, 5, 17, seed=5)
    coeffs = ops.decode(ops.decrypt(sk, res.ciphertexts[0], encoding="coeff"))
    stride = res.strides[0]
    assert stride == P.n // 8
    mask = np.zeros(P.n, dtype=bool)
    mask[: 5 * stride : stride] = True
    assert np.array_equal(coeffs[mask], want)
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
    broken = H.HMVPResult((bad,), res.strides, res.length)
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
