"""kernels/pallas.py in interpret mode: bit-exact with bat.matmul and with Python-integer products mod q.

Moduli: two 31-bit NTT primes (>= 2^30, K = 4 digits), two 28-bit ones (K = 4) and two 17-bit ones
(K = 3; their recombination takes the wide reduction, ``single_barrett`` False).
"""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.sharding import AbstractDevice, AbstractMesh, use_abstract_mesh

from crossfhe.kernels import bat
from crossfhe.kernels.pallas import bat_matmul_pallas
from crossfhe.math.primes import ntt_primes

MODULI = {bits: ntt_primes(bits, 2**10, 2) for bits in (31, 28, 17)}


def _uniform(rng, qs, shape, batch=()):
    """uint32 [*batch, L, *shape] with limb l uniform in [0, qs[l])."""
    q = np.array(qs, dtype=np.int64).reshape((-1,) + (1,) * len(shape))
    return (rng.integers(0, 2**62, size=batch + (len(qs),) + shape) % q).astype(np.uint32)


def _reference(a, b, qs):
    return bat.matmul_reference(a, b, np.array(qs).reshape(-1, 1, 1))


def _case(bits, h, v, w, seed=0, batch=()):
    rng = np.random.default_rng(seed)
    qs = MODULI[bits]
    b = _uniform(rng, qs, (v, w))
    a = _uniform(rng, qs, (h, v), batch)
    return a, b, qs


# (bits, H, V, W, block_h, block_w, block_v); None = the default tile gcd(n, 64)
CASES = [
    (31, 64, 32, 64, 32, 32, 16),
    (31, 64, 128, 64, None, None, None),
    (28, 64, 64, 64, 16, 32, 32),
    (17, 32, 96, 32, None, None, None),
]


@pytest.mark.parametrize(
    "bits,h,v,w,bh,bw,bv",
    CASES,
    ids=[f"q={c[0]}b/L=2/H={c[1]}/V={c[2]}/W={c[3]}/tile={c[4]}x{c[5]}x{c[6]}" for c in CASES],
)
def test_matches_bat_and_reference(bits, h, v, w, bh, bw, bv):
    a, b, qs = _case(bits, h, v, w)
    op = bat.bat_right(b, qs)
    got = np.asarray(bat_matmul_pallas(a, op, block_h=bh, block_w=bw, block_v=bv, interpret=True))
    np.testing.assert_array_equal(got, np.asarray(bat.matmul(a, op)))
    np.testing.assert_array_equal(got, _reference(a, b, qs))


def test_batch_axes_fold_into_rows():
    a, b, qs = _case(31, 16, 32, 32, seed=1, batch=(2, 3))
    op = bat.bat_right(b, qs)
    got = np.asarray(bat_matmul_pallas(a, op, block_h=8, interpret=True))
    assert got.shape == (2, 3, 2, 16, 32)
    np.testing.assert_array_equal(got, np.asarray(bat.matmul(a, op)))
    np.testing.assert_array_equal(got, _reference(a, b, qs))


@pytest.mark.parametrize("bits", [31, 17], ids=lambda b: f"q={b}b")
def test_extreme_inputs(bits):
    qs = MODULI[bits]
    q = np.array(qs, dtype=np.uint32).reshape(-1, 1, 1)
    top = np.broadcast_to(q - 1, (2, 64, 64)).copy()  # all q - 1: the largest products
    np.testing.assert_array_equal(
        np.asarray(bat_matmul_pallas(top, bat.bat_right(top, qs), interpret=True)), _reference(top, top, qs)
    )
    # the centering boundary q // 2, q // 2 + 1 (top digits of both signs), 0, 1 and q - 1, cycled
    edge = np.stack([q[:, 0, 0] * 0, q[:, 0, 0] * 0 + 1, q[:, 0, 0] // 2, q[:, 0, 0] // 2 + 1, q[:, 0, 0] - 1], -1)
    a = np.take(edge, np.arange(32 * 64).reshape(32, 64) % 5, axis=1).astype(np.uint32)
    b = np.take(edge, (np.arange(64 * 64).reshape(64, 64) * 3) % 5, axis=1).astype(np.uint32)
    np.testing.assert_array_equal(
        np.asarray(bat_matmul_pallas(a, bat.bat_right(b, qs), interpret=True)), _reference(a, b, qs)
    )


@pytest.mark.parametrize("bv", [8, 16], ids=lambda bv: f"block_v={bv}")
def test_inner_splits_reduced_separately(bv):
    """An operand whose inner dimension is cut in runs of 16 items (as chunks.inner_splits cuts one
    beyond 131071 digit pairs): the kernel reduces runs of whole v-blocks no longer than a split."""
    a, b, qs = _case(31, 32, 48, 32, seed=2)
    op = dataclasses.replace(bat.bat_right(b, qs), splits=((0, 16), (16, 32), (32, 48)))
    got = np.asarray(bat_matmul_pallas(a, op, block_v=bv, interpret=True))
    np.testing.assert_array_equal(got, np.asarray(bat.matmul(a, op)))
    np.testing.assert_array_equal(got, _reference(a, b, qs))


def test_bad_arguments_raise():
    a, b, qs = _case(31, 64, 32, 64)
    op = bat.bat_right(b, qs)
    for tiles in ({"block_h": 48}, {"block_w": 0}, {"block_v": 24}, {"block_h": 128}):
        with pytest.raises(ValueError, match="positive divisor"):
            bat_matmul_pallas(a, op, interpret=True, **tiles)
    split = dataclasses.replace(op, splits=((0, 16), (16, 32)))
    with pytest.raises(ValueError, match="longest inner split"):
        bat_matmul_pallas(a, split, block_v=32, interpret=True)
    with pytest.raises(ValueError, match="does not match"):
        bat_matmul_pallas(a[..., :16], op, interpret=True)
    with pytest.raises(ValueError, match="right operand"):
        bat_matmul_pallas(a, bat.bat_left(b, qs), interpret=True)
    per_column = bat.bat_right(b[:1], np.full((1, 1, 64), qs[0]))
    with pytest.raises(ValueError, match="one modulus per limb"):
        bat_matmul_pallas(a[:1], per_column, interpret=True)


def test_lowers_to_triton_ir():
    """The kernel passes Pallas's Triton lowering rules (int8 dots, strided loads, uint32 epilogue) for a
    CUDA target; compiling that IR to PTX needs a GPU and is not checked here."""
    a, b, qs = _case(31, 64, 64, 64)
    op = bat.bat_right(b, qs)
    # From jax 0.11 Pallas's Triton lowering reads the target GPU from the device, or, with none, from an
    # abstract mesh's device (an ahead-of-time target): an H100 here.
    target = AbstractDevice(device_kind="NVIDIA H100 80GB HBM3", num_cores=132, platform="cuda")
    with use_abstract_mesh(AbstractMesh((1,), ("x",), abstract_device=target)):
        traced = bat_matmul_pallas.trace(a, op, block_h=32, block_w=32, block_v=32)
        assert "xla.gpu.triton" in traced.lower(lowering_platforms=("cuda",)).as_text()


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_random_inputs(seed):
    a, b, qs = _case(28, 32, 32, 32, seed=seed)
    got = np.asarray(bat_matmul_pallas(a, bat.bat_right(b, qs), interpret=True))
    np.testing.assert_array_equal(got, _reference(a, b, qs))
