"""The operator facade: each operator decrypts to the NumPy result within a bound from the parameters."""

import math

import numpy as np
import pytest

from crossfhe.ckks import CKKSContext
from crossfhe.testing import INSECURE_CKKS_N10 as P

# Per-slot error of one fresh encryption (7 standard deviations, see test_ckks_ops.fresh_bound).
FRESH = 7 * math.sqrt(P.n * (4 / 3 * P.n + 1)) * 3.19 / P.scale + P.n / (2 * P.scale)


@pytest.fixture(scope="module")
def ctx():
    return CKKSContext.create(P, rotations=[1], seed=bytes(range(1, 33)))


def test_operators(ctx):
    rng = np.random.default_rng(3)
    x, y = rng.uniform(-1, 1, 100), rng.uniform(-1, 1, 100)
    ex, ey = ctx.encrypt(x), ctx.encrypt(y)
    got = ctx.decrypt(ex * ey + 0.5 * ex - y + 2)
    assert got.shape == (100,) and got.dtype == np.float64
    assert np.max(np.abs(got - (x * y + 0.5 * x - y + 2))) <= 12 * FRESH
    assert np.max(np.abs(ctx.decrypt(ex - ey) - (x - y))) <= 2 * FRESH
    assert np.max(np.abs(ctx.decrypt(ex.rotate(1))[:99] - x[1:])) <= 8 * FRESH
    # Sums over the 128-slot period of the padded vector: 128 slot errors add up.
    assert abs(ctx.decrypt(ex.sum())[0] - x.sum()) <= 128 * 8 * FRESH
    assert abs(ctx.decrypt(ex @ ey)[0] - x @ y) <= 128 * 12 * FRESH


def test_complex_and_errors(ctx):
    z = np.exp(1j * np.arange(8))
    ez = ctx.encrypt(z)
    got = ctx.decrypt(ez * (1 - 1j))
    assert np.iscomplexobj(got) and np.max(np.abs(got - z * (1 - 1j))) <= 4 * FRESH
    with pytest.raises(ValueError, match="do not fit"):
        ctx.encrypt(np.zeros(P.slots + 1))
    evaluator = CKKSContext(P, ctx.keys)
    with pytest.raises(ValueError, match="no secret key"):
        evaluator.decrypt(ez)
