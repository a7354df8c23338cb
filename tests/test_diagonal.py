"""The batch-encoded diagonal matrix-vector product: exact against NumPy, a slot-level simulation of the
plan, the rotation keys it needs (exactly those), the noise it costs, and its errors."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crossfhe.bfv import ops, presets
from crossfhe.errors import ParameterError
from crossfhe.linalg import diagonal
from crossfhe.linalg.diagonal import DiagonalPlan
from crossfhe.testing import INSECURE_BFV_N256 as P
from crossfhe.testing import INSECURE_BFV_N256_COEFF

SHAPES = [(5, 7), (128, 128), (200, 60), (60, 300)]


def _reference(a, v, t):
    """A v mod t in Python integers."""
    return np.array([sum(int(x) * int(y) for x, y in zip(row, v)) % t for row in a], dtype=np.int64)


def _simulate(plan: DiagonalPlan, a, v, t):
    """The plan run on plaintext slot rows with np.roll, from the definitions: diag_k[i] = A_IJ[i, (i + k) mod d],
    pre-rotated by -a_g, times the chunk rotated by b, summed, rotated by a_g; row 1 carries k + d/2."""
    d, half = plan.slots, plan.slots // 2
    m, n = a.shape
    full = np.zeros((len(plan.blocks) * d, plan.col_blocks * d), dtype=np.int64)
    full[:m, :n] = a
    chunks = np.zeros(plan.col_blocks * d, dtype=np.int64)
    chunks[:n] = v
    chunks = chunks.reshape(-1, d)
    rows = np.stack([chunks, np.roll(chunks, -half, axis=-1)], axis=1)  # [C, 2, d], encrypt_vector's layout
    i = np.arange(d)
    out = []
    for block_index, blk in enumerate(plan.blocks):
        acc = np.zeros((2, d), dtype=np.int64)
        for a_g, items in zip(blk.giant, blk.items):
            inner = np.zeros((2, d), dtype=np.int64)
            for j, b in items:
                block = full[block_index * d : (block_index + 1) * d, j * d : (j + 1) * d]
                for r in (0, 1) if blk.two_rows else (0,):
                    k = a_g + r * half + b
                    diag = block[i, (i + k) % d]
                    inner[r] += np.roll(diag, a_g) * np.roll(rows[j, r], -b)
            acc = (acc + np.roll(inner % t, -a_g, axis=-1)) % t
        out.append((acc[0] + acc[1]) % t if blk.two_rows else acc[0])
    return np.concatenate(out)[:m]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([4, 8, 16, 32]), st.integers(1, 80), st.integers(1, 80), st.integers(0, 2**32 - 1))
def test_plan_simulation_exact(d, m, n, seed):
    """Every nonzero diagonal is taken exactly once, in the right row, with the right rotations."""
    t = 97
    rng = np.random.default_rng(seed)
    a, v = rng.integers(0, t, (m, n)), rng.integers(0, t, n)
    plan = DiagonalPlan.create(d, m, n)
    assert np.array_equal(_simulate(plan, a, v, t), _reference(a, v, t))
    products = sum(len(it) for blk in plan.blocks for it in blk.items)
    assert plan.plain_products == products
    if m + n - 1 <= d // 2:
        assert products == m + n - 1 and not plan.row_swap


def test_costs_at_n4096():
    """The costs the module docstring quotes (d = 2048)."""
    small = diagonal.plan_matvec(presets.N4096, 256, 256)
    assert (small.key_switches, small.plain_products, small.row_swap) == (45, 511, False)
    big = diagonal.plan_matvec(presets.N4096, 4096, 4096)
    assert (big.baby_rotations, big.giant_rotations, big.row_swaps) == (62, 62, 2)
    assert (big.key_switches, big.plain_products) == (126, 4096)
    assert big.groups == ((0, 1),)
    assert diagonal.required_rotations(presets.N4096, 4096, 4096) == big.rotations
    assert len(big.rotations) <= 2 * math.isqrt(1024) + 2


def _keys(m, n, *, drop=None):
    rotations = [r for r in diagonal.required_rotations(P, m, n) if r != drop]
    return ops.keygen(P, rotations=rotations, row_swap=diagonal.needs_row_swap(P, m, n), seed=bytes(range(32)))


@pytest.mark.parametrize("m,n", SHAPES, ids=[f"bfv/N=256/t=65537/{m}x{n}" for m, n in SHAPES])
def test_matvec_exact(m, n, monkeypatch):
    sk, keys = _keys(m, n)
    applied = []  # (rotation or "swap", ciphertexts in the batch)
    rotate, swap = ops.rotate_rows, ops.swap_rows

    def count(what, ct):
        applied.append((what, math.prod(ct.batch_shape)))

    monkeypatch.setattr(ops, "rotate_rows", lambda ct, k, ek: count(k % (P.n // 2), ct) or rotate(ct, k, ek))
    monkeypatch.setattr(ops, "swap_rows", lambda ct, ek: count("swap", ct) or swap(ct, ek))
    rng = np.random.default_rng(m * 1000 + n)
    a, v = rng.integers(0, P.t, (m, n)), rng.integers(0, P.t, n)
    x = diagonal.encrypt_vector(P, keys, v)
    result = diagonal.matvec(diagonal.encode_matrix(P, a), x, keys)
    got = diagonal.decrypt_result(sk, result, m)
    assert got.shape == (m,) and np.array_equal(got, _reference(a, v, P.t))
    # The rotation set is exactly what matvec applies (a keygen with those keys sufficed above).
    plan = diagonal.plan_matvec(P, m, n)
    kinds = {what for what, _ in applied}
    assert kinds - {0, "swap"} == set(plan.rotations) and ("swap" in kinds) == plan.row_swap
    assert sum(size for what, size in applied if what != 0) == plan.key_switches
    # Noise: one plaintext product of T terms (N t / 2 each), then key switches (module docstring).
    terms = max(sum(len(it) for it in blk.items) for blk in plan.blocks)
    spent = ops.noise_budget(sk, x.ct) - ops.noise_budget(sk, result)
    assert spent <= math.ceil(math.log2(2 * terms * P.n * P.t / 2)) + 1


def test_errors():
    sk, keys = _keys(5, 7)
    a = np.ones((5, 7), dtype=np.int64)
    encoded = diagonal.encode_matrix(P, a)
    with pytest.raises(ParameterError, match="batch encoding"):
        diagonal.encode_matrix(INSECURE_BFV_N256_COEFF, a)
    with pytest.raises(ParameterError, match="batch encoding"):
        diagonal.required_rotations(INSECURE_BFV_N256_COEFF, 5, 7)
    with pytest.raises(ParameterError, match="batch encoding"):
        diagonal.encrypt_vector(INSECURE_BFV_N256_COEFF, keys, np.ones(7, dtype=np.int64))
    with pytest.raises(ParameterError, match=r"\[0, t\)"):
        diagonal.encode_matrix(P, np.full((5, 7), P.t))
    with pytest.raises(ParameterError, match=r"\[0, t\)"):
        diagonal.encrypt_vector(P, keys, -np.ones(7, dtype=np.int64))
    with pytest.raises(ParameterError, match="2-D"):
        diagonal.encode_matrix(P, np.ones(7, dtype=np.int64))
    with pytest.raises(ParameterError, match="7 columns but the vector has 8"):
        diagonal.matvec(encoded, diagonal.encrypt_vector(P, keys, np.ones(8, dtype=np.int64)), keys)
    x = diagonal.encrypt_vector(P, keys, np.ones(7, dtype=np.int64))
    missing = diagonal.required_rotations(P, 5, 7)[0]
    _, fewer = _keys(5, 7, drop=missing)
    with pytest.raises(ParameterError, match=f"no Galois key for element {ops.rotation_element(P, missing)}"):
        diagonal.matvec(encoded, x, fewer)
    result = diagonal.matvec(encoded, x, keys)
    assert np.array_equal(diagonal.decrypt_result(sk, result, 5), np.full(5, 7))
    with pytest.raises(ParameterError, match="ciphertexts"):
        diagonal.decrypt_result(sk, result, 200)


def test_diagonal_equals_hmvp():
    """The two methods decrypt to the same vector (and to A v mod t) for one matrix, one vector and one set of
    keys holding both the packing elements and the rotations."""
    from crossfhe.linalg import hmvp

    m, n = 40, 150
    plan = diagonal.plan_matvec(P, m, n)
    sk, ek = ops.keygen(
        P, rotations=plan.rotations, row_swap=plan.row_swap, galois_elements=hmvp.required_galois_elements(P),
        relin=False, seed=bytes(range(32, 64)),
    )
    rng = np.random.default_rng(11)
    a = rng.integers(0, P.t, size=(m, n))
    v = rng.integers(0, P.t, size=n)
    enc = diagonal.encrypt_vector(P, ek, v)
    diag = diagonal.decrypt_result(sk, diagonal.matvec(diagonal.encode_matrix(P, a), enc, ek), m)
    coef = hmvp.decrypt_result(sk, hmvp.hmvp(hmvp.encode_matrix(P, a), hmvp.encrypt_vector(ek, P, v), ek))
    assert np.array_equal(diag, coef)
    assert np.array_equal(coef, _reference(a, v, P.t))
