"""CKKS at the 128-bit preset N14_L7 (`make test-slow`): encryption, a product, a rotation and the
full depth, against NumPy, with the bounds of test_ckks_ops."""

import math

import numpy as np
import pytest

from crossfhe.ckks import ops, presets

pytestmark = pytest.mark.slow
P = presets.N14_L7
FRESH = 7 * math.sqrt(P.n * (4 / 3 * P.n + 1)) * 3.19 / P.scale + P.n / (2 * P.scale)


def ks_slot_bound(params) -> float:
    """7 standard deviations of a slot's key-switching error. Digit j adds X_j e_j / P with X_j uniform in
    [0, |D_j| D_j) and e_j of variance sigma^2: coefficient variance N (|D_j| D_j / P)^2 sigma^2 / 3; ModDown
    rounding adds r0 + r1 s with |r| <= 1/2 + K: variance (1 + 2N/3)(K^2 + 1) / 12."""
    n, q, p = params.n, params.q, params.p
    size = math.ceil(len(q) / params.dnum)
    big_p = math.prod(p)
    var = sum(n * (len(q[i : i + size]) * math.prod(q[i : i + size]) / big_p) ** 2 * 3.19**2 / 3
              for i in range(0, len(q), size))
    var += (1 + 2 * n / 3) * (len(p) ** 2 + 1) / 12
    return 7 * math.sqrt(n * var) / params.scale


KS = ks_slot_bound(P)


@pytest.fixture(scope="module")
def keys():
    return ops.keygen(P, rotations=[1, 7], conjugation=True, seed=bytes(range(32)))


def test_n14_l7_operations(keys):
    sk, ek = keys
    rng = np.random.default_rng(14)
    z = rng.uniform(-1, 1, P.slots) + 1j * rng.uniform(-1, 1, P.slots)
    c = ops.encrypt(ek, ops.encode(P, z))
    dec = lambda ct: ops.decode(ops.decrypt(sk, ct))  # noqa: E731
    assert np.max(np.abs(dec(c) - z)) <= FRESH
    assert np.max(np.abs(dec(ops.rotate(c, 7, ek)) - np.roll(z, -7))) <= FRESH + KS
    assert np.max(np.abs(dec(ops.conjugate(c, ek)) - np.conj(z))) <= FRESH + KS
    prod, ref = c, z
    for _ in range(P.levels):
        prod = ops.rescale(ops.mul(prod, c, ek))
        ref = ref * z
    assert prod.level == 0
    assert np.max(np.abs(dec(prod) - ref)) <= (P.levels + 2) * 2 ** ((P.levels + 1) / 2) * (4 * FRESH + KS)
