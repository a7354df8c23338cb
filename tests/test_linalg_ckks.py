"""crossfhe.linalg.ckks against NumPy: plaintext and encrypted matrices times vectors, sums and replications.

Every product is checked on all N/2 slots (padding and replicas included) within the module's stated bound,
computed from the measured input errors, and below 2^-10 (the bounds at INSECURE_CKKS_N10, scale 2^30, with
entries in [-1, 1], are near 2^-12; the measured errors near 2^-16).
"""

import numpy as np
import pytest

from crossfhe.ckks import ops
from crossfhe.errors import ParameterError
from crossfhe.linalg import ckks as la
from crossfhe.testing import INSECURE_CKKS_N10 as P

SLOTS = P.slots  # 512
FIXED = 2.0**-10

# (m, n): square, tall, wide, 1 x n, m x 1, m above the slot count (2 block rows), n above it (2 block columns)
SHAPES = [(16, 16), (40, 9), (7, 50), (1, 33), (21, 1), (600, 100), (100, 600)]
CHAIN = ((10, 12), (7, 10), 16)  # A then B with one block size d = 16
WEIGHTS = (5, 12)  # encrypted m x n weights, d = 16


def _rotations():
    rots = set()
    for m, n in SHAPES:
        rots |= set(la.required_rotations(P, m, n))
    for m, n in CHAIN[:2]:
        rots |= set(la.required_rotations(P, m, n, block=CHAIN[2]))
    rots |= set(la.sum_rotations(P, SLOTS)) | set(la.replicate_rotations(P, 1))
    rots |= set(range(1, 16))  # the diagonal offsets of the encrypted weights
    return sorted(rots)


@pytest.fixture(scope="module")
def keys():
    return ops.keygen(P, rotations=_rotations(), seed=bytes(range(32)))


@pytest.fixture(scope="module")
def rng():
    return np.random.default_rng(2028)


def _slots(sk, ct):
    return ops.decode(ops.decrypt(sk, ct)).real


def _chunks(v, d):
    """v zero-padded to whole blocks of d, as a list of float64[d]."""
    padded = np.zeros(-(-len(v) // d) * d)
    padded[: len(v)] = v
    return [padded[j : j + d] for j in range(0, len(padded), d)]


def _encrypt_vector(sk, keys_, v, d, level=None):
    """The chunks of v, encrypted replicated with period d; with the largest input slot magnitude and error."""
    cts, x_max, eps = [], 0.0, 0.0
    for chunk in _chunks(v, d):
        ct = ops.encrypt(keys_, ops.encode(P, chunk, level=level))
        got = _slots(sk, ct)
        cts.append(ct)
        x_max = max(x_max, float(np.max(np.abs(got))))
        eps = max(eps, float(np.max(np.abs(got - np.tile(chunk, SLOTS // d)))))
    return cts, x_max, eps


def _error(sk, cts, want, d):
    """Largest slot error of ciphertexts holding ``want`` in chunks of d, replicated, over all slots."""
    chunks = _chunks(want, d)
    assert len(cts) == len(chunks)
    return max(float(np.max(np.abs(_slots(sk, ct) - np.tile(c, SLOTS // d)))) for ct, c in zip(cts, chunks))


@pytest.mark.parametrize("shape", SHAPES, ids=[f"ckks/logN=10/{m}x{n}" for m, n in SHAPES])
def test_matvec_against_numpy(keys, rng, shape):
    sk, ek = keys
    m, n = shape
    a = rng.uniform(-1, 1, size=shape)
    v = rng.uniform(-1, 1, size=n)
    enc = la.encode_matrix(P, a)
    d = enc.plan.block
    assert d == min(SLOTS, 1 << (max(m, n) - 1).bit_length())
    cts, x_max, eps_in = _encrypt_vector(sk, ek, v, d)
    out = la.matvec(enc, cts if len(cts) > 1 else cts[0], ek)
    assert len(out) == -(-m // d)
    assert all(o.level == P.user_levels - 1 and o.scale == enc.out_scale for o in out)
    err = _error(sk, out, a @ v, d)
    bound = la.matvec_error_bound(enc, x_max=x_max, input_error=eps_in)
    assert err < bound
    assert err < FIXED


def test_matvec_chains_with_a_shared_block(keys, rng):
    sk, ek = keys
    (m1, n1), (m2, n2), d = CHAIN
    a, b = rng.uniform(-1, 1, size=(m1, n1)), rng.uniform(-1, 1, size=(m2, n2))
    v = rng.uniform(-1, 1, size=n1)
    cts, x_max, eps_in = _encrypt_vector(sk, ek, v, d)
    ea = la.encode_matrix(P, a, block=d)
    eb = la.encode_matrix(P, b, level=P.user_levels - 1, block=d)
    mid = la.matvec(ea, cts, ek)
    eps_mid = la.matvec_error_bound(ea, x_max=x_max, input_error=eps_in)
    out = la.matvec(eb, mid, ek)
    assert out[0].level == P.user_levels - 2
    err = _error(sk, out, b @ (a @ v), d)
    assert err < la.matvec_error_bound(eb, x_max=float(np.max(np.abs(a @ v))) + eps_mid, input_error=eps_mid)
    assert err < FIXED


def test_plan_depends_on_shape_only():
    pl = la.plan_matvec(P, 600, 100)
    assert (pl.block, pl.row_blocks, pl.col_blocks) == (512, 2, 1)
    assert all(1 <= r < pl.block for r in pl.rotations)
    assert la.required_rotations(P, 3, 5) == la.plan_matvec(P, 3, 5).rotations
    assert la.required_rotations(P, 1, 1) == ()
    # a 3 x 5 block at d = 8 has the diagonals -2 .. 4 mod 8 only
    assert la.plan_matvec(P, 3, 5).terms(0) == 7


def test_sum_slots_zero_padded_and_replicated(keys, rng):
    sk, ek = keys
    length, p = 100, 128
    v = rng.uniform(-1, 1, size=length)
    padded = np.zeros(SLOTS)
    padded[:length] = v
    for values, check in ((padded, slice(0, 1)), (np.tile(padded[:p], SLOTS // p), slice(None))):
        ct = ops.encrypt(ek, ops.encode(P, values))
        eps_in = float(np.max(np.abs(_slots(sk, ct) - values)))
        out = la.sum_slots(ct, ek, length=length)
        assert out.level == ct.level
        err = float(np.max(np.abs(_slots(sk, out)[check] - v.sum())))
        assert err < la.sum_slots_error_bound(P, length=length, level=ct.level, scale=ct.scale, input_error=eps_in)
        assert err < FIXED


def test_replicate(keys, rng):
    sk, ek = keys
    for length in (1, 100):
        p = 1 << (length - 1).bit_length()
        padded = np.zeros(SLOTS)
        padded[:length] = rng.uniform(-1, 1, size=length)
        ct = ops.encrypt(ek, ops.encode(P, padded))
        eps_in = float(np.max(np.abs(_slots(sk, ct) - padded)))
        out = la.replicate(ct, ek, length=length)
        err = float(np.max(np.abs(_slots(sk, out) - np.tile(padded[:p], SLOTS // p))))
        assert err < la.replicate_error_bound(P, length=length, level=ct.level, scale=ct.scale, input_error=eps_in)
        assert err < FIXED


def _weights(sk, ek, rng):
    m, n = WEIGHTS
    a = rng.uniform(-1, 1, size=(m, n))
    w = la.encrypt_diagonals(ek, P, a)
    d = w.block
    assert d == 16 and sorted(w.cts) == sorted(k % d for k in range(-(m - 1), n))
    idx = np.arange(d)
    sub = np.zeros((d, d))
    sub[:m, :n] = a
    eps_w = max(float(np.max(np.abs(_slots(sk, ct) - np.tile(sub[idx, (idx + k) % d], SLOTS // d))))
                for k, ct in w.cts.items())
    return a, w, eps_w


def test_enc_matvec_plain_vector(keys, rng):
    sk, ek = keys
    a, w, eps_w = _weights(sk, ek, rng)
    x = rng.uniform(-1, 1, size=WEIGHTS[1])
    out = la.enc_matvec(w, x)
    assert out.level == w.level - 1 and out.scale == pytest.approx(next(iter(w.cts.values())).scale, rel=1e-12)
    err = _error(sk, [out], a @ x, w.block)
    assert err < la.enc_matvec_error_bound(w, x=x, a_max=float(np.max(np.abs(a))) + eps_w, weight_error=eps_w)
    assert err < FIXED


def test_enc_enc_matvec(keys, rng):
    sk, ek = keys
    a, w, eps_w = _weights(sk, ek, rng)
    v = rng.uniform(-1, 1, size=WEIGHTS[1])
    (ct,), x_max, eps_in = _encrypt_vector(sk, ek, v, w.block)
    out = la.enc_enc_matvec(w, ct, ek)
    assert out.level == min(w.level, ct.level) - 1
    err = _error(sk, [out], a @ v, w.block)
    bound = la.enc_enc_matvec_error_bound(w, ct, a_max=float(np.max(np.abs(a))) + eps_w, x_max=x_max,
                                          weight_error=eps_w, input_error=eps_in)
    assert err < bound
    assert err < FIXED


@pytest.fixture(scope="module")
def bare_keys():
    return ops.keygen(P, seed=bytes(32))


def test_errors(keys, bare_keys):
    sk, ek = keys
    _, bare = bare_keys
    for bad in ((0, 3), (3, -1), (2.5, 3), (True, 3)):
        with pytest.raises(ParameterError, match="dimension"):
            la.plan_matvec(P, *bad)
    with pytest.raises(ParameterError, match="block"):
        la.plan_matvec(P, 4, 4, block=12)
    with pytest.raises(ParameterError, match="block"):
        la.plan_matvec(P, 4, 4, block=2 * SLOTS)
    with pytest.raises(ParameterError, match="2-D"):
        la.encode_matrix(P, np.ones(5))
    with pytest.raises(ParameterError, match="finite"):
        la.encode_matrix(P, np.full((2, 2), np.nan))
    enc = la.encode_matrix(P, np.ones((1, 3)), block=2)  # two block columns
    with pytest.raises(ParameterError, match="expected 2 input"):
        la.matvec(enc, ops.encrypt(ek, ops.encode(P, np.ones(2))), ek)
    small = la.encode_matrix(P, np.eye(4))
    x4 = ops.encrypt(ek, ops.encode(P, np.ones(4)))
    with pytest.raises(ParameterError, match="lack the rotations"):
        la.matvec(small, x4, bare)
    with pytest.raises(ParameterError, match="lack the rotations"):
        la.sum_slots(x4, bare, length=4)
    with pytest.raises(ParameterError, match="lack the rotations"):
        la.replicate(x4, bare, length=4)
    with pytest.raises(ParameterError, match="length"):
        la.sum_slots(x4, ek, length=0)
    with pytest.raises(ParameterError, match="length"):
        la.replicate(x4, ek, length=SLOTS + 1)
    with pytest.raises(ParameterError, match="level"):  # encoded for the top level, input one level lower
        la.matvec(small, ops.encrypt(ek, ops.encode(P, np.ones(4), level=P.user_levels - 1)), ek)
    w = la.encrypt_diagonals(ek, P, np.ones((2, 3)), block=4)
    with pytest.raises(ParameterError, match="shape"):
        la.enc_matvec(w, np.ones(4))
    with pytest.raises(ParameterError, match="one block"):
        la.encrypt_diagonals(ek, P, np.ones((2, 8)), block=4)
    with pytest.raises(ParameterError, match="lack the rotations"):
        la.enc_enc_matvec(w, x4, bare)
