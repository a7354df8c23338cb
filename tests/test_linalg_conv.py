"""crossfhe.linalg.conv against NumPy: convolutions on encrypted packed images, in both packings (one image as k^2
kernel-entry ciphertexts; images across slots in G blocks), with plaintext and with encrypted weights.

Parameters: a local insecure set, N 2^10, 6 levels of one 30-bit prime (scale 2^30), dnum 3. Every result is
checked on all slots against the module's stated bound (kappa = 6 standard deviations), computed from the measured
input error, and against a fixed 2^-12 (a dense layer after the convolution: 2^-8, its inputs reach ~3).
"""

import numpy as np
import pytest

from crossfhe.ckks import ops
from crossfhe.ckks.params import Params, ParamsLiteral
from crossfhe.errors import KeyMismatchError, ParameterError
from crossfhe.linalg import conv as C

P = Params.from_literal(ParamsLiteral(log_n=10, levels=6, log_scale=30, dnum=3, insecure=True))
LAYOUT = C.blocks(P, groups=8)  # 64 images per ciphertext
SIDE, K, STRIDE, MAPS = 9, 3, 2, 2  # out 4: 2 x 4 x 4 = 32 outputs
OUT = C.output_side(SIDE, K, STRIDE)
WEIGHTS = ["plain", "encrypted"]


@pytest.fixture(scope="module")
def keys():
    return ops.keygen(P, rotations=LAYOUT.rotations, seed=bytes(range(32)))


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    imgs = rng.uniform(0, 1, (LAYOUT.batch, SIDE, SIDE))
    w, b = rng.normal(size=(MAPS, K, K)) / K, rng.normal(size=MAPS) / 2
    return imgs, w, b


def _encrypt_rows(sk, ek, rows, level):
    cts = [ops.encrypt(ek, ops.encode(P, r, level=level)) for r in rows]
    err = max(float(np.abs(ops.decode(ops.decrypt(sk, c)).real - np.resize(r, P.slots)).max())
              for c, r in zip(cts, rows))
    return cts, err


def _slots(sk, ct):
    return ops.decode(ops.decrypt(sk, ct)).real


def test_conv_matrix_and_im2col_are_the_convolution(data):
    imgs, w, b = data
    ref = C.conv2d_reference(imgs, w, b, stride=STRIDE)  # [n, M, out, out]
    a = C.conv_matrix(w, side=SIDE, stride=STRIDE)
    np.testing.assert_allclose(imgs.reshape(len(imgs), -1) @ a.T + np.repeat(b, OUT * OUT), ref.reshape(len(imgs), -1),
                               atol=1e-12)
    cols = C.im2col(imgs[:3], k=K, stride=STRIDE, maps=MAPS, block=64)  # [n, k^2, d]
    wv = np.repeat(w.reshape(MAPS, -1), OUT * OUT, axis=0)  # [M P, k^2]
    got = np.einsum("nep,pe->np", cols[:, :, :MAPS * OUT * OUT], wv) + np.repeat(b, OUT * OUT)
    np.testing.assert_allclose(got, ref[:3].reshape(3, -1), atol=1e-12)
    assert not cols[:, :, MAPS * OUT * OUT:].any()
    # a direct loop, independent of the module's indexing
    x = imgs[0]
    for m in range(MAPS):
        for r in range(OUT):
            for c in range(OUT):
                v = (x[r * STRIDE:r * STRIDE + K, c * STRIDE:c * STRIDE + K] * w[m]).sum() + b[m]
                assert abs(ref[0, m, r, c] - v) < 1e-12


@pytest.mark.parametrize("weights", WEIGHTS)
def test_entry_conv_equals_numpy(keys, data, weights):
    sk, ek = keys
    imgs, w, b = data
    d = 32
    rows = C.im2col(imgs[:1], k=K, stride=STRIDE, maps=MAPS, block=d)[0]
    cts, eps = _encrypt_rows(sk, ek, rows, 4)
    make = C.encode_entry_conv if weights == "plain" else lambda *a, **k: C.encrypt_entry_conv(ek, *a, **k)
    conv = make(P, w, b, side=SIDE, stride=STRIDE, level=4, in_scale=P.scale, block=d)
    y = C.entry_conv(conv, cts, ek)
    assert y.level == 3 and y.scale == P.scale
    want = np.tile(C.conv2d_reference(imgs[:1], w, b, stride=STRIDE).reshape(-1), P.slots // d)  # M out^2 = d
    err = np.abs(_slots(sk, y) - want).max()
    bound = C.entry_conv_error_bound(conv, x_max=1.0, input_error=eps)
    assert err <= bound < 2.0**-12, (err, bound)


@pytest.mark.parametrize("weights", WEIGHTS)
def test_block_conv_then_dense_equal_numpy(keys, data, weights):
    """SPREAD convolution (one output row per packed ciphertext), then a GATHER dense layer (log2 G rotations)."""
    sk, ek = keys
    imgs, w, b = data
    n = len(imgs)
    cts, eps = _encrypt_rows(sk, ek, C.pack(LAYOUT, imgs.reshape(n, -1)), 4)
    groups = C.conv_groups(MAPS, OUT)
    km = None if weights == "plain" else ek
    make = C.encode_layer if km is None else lambda *a, **k: C.encrypt_layer(km, *a, **k)
    a = C.conv_matrix(w, side=SIDE, stride=STRIDE)
    layer = make(P, LAYOUT, a, np.repeat(b, OUT * OUT), kind=C.Kind.SPREAD, groups=groups, level=4,
                 in_scale=P.scale)
    assert len(layer.weights.c0.data) - 1 == K * SIDE  # the rows share their weight blocks: k x side distinct
    y = C.apply_layer(layer, cts, ek)
    ref = C.conv2d_reference(imgs, w, b, stride=STRIDE).reshape(n, -1)
    want = C.pack(LAYOUT, ref, groups)
    err = np.abs(_slots(sk, y) - want).max()
    bound = C.layer_error_bound(layer, x_max=1.0, input_error=eps)
    assert err <= bound < 2.0**-12, (err, bound)
    np.testing.assert_allclose(C.unpack(LAYOUT, _slots(sk, y), n, groups, features=ref.shape[1]), ref, atol=bound)

    rng = np.random.default_rng(3)
    w2, b2 = rng.normal(size=(5, ref.shape[1])) / 8, rng.normal(size=5)
    dense = make(P, LAYOUT, w2, b2, kind=C.Kind.GATHER, groups=groups, level=3, in_scale=y.scale)
    z = C.apply_layer(dense, y, ek)
    assert z.level == 2 and C._count(z) == 5
    err2 = np.abs(_slots(sk, z) - C.pack(LAYOUT, ref @ w2.T + b2)).max()
    bound2 = C.layer_error_bound(dense, x_max=float(np.abs(ref).max()), input_error=bound)
    assert err2 <= bound2 < 2.0**-8, (err2, bound2)


def test_one_block_is_the_plain_batch_layout(keys, data):
    """G = 1: one image per slot, one feature per ciphertext, scalar products only (no rotation key needed)."""
    sk, ek = keys
    imgs, w, b = data
    layout = C.blocks(P, batch=P.slots)
    assert layout.groups == 1 and layout.rotations == ()
    x = np.random.default_rng(5).uniform(0, 1, (P.slots, SIDE, SIDE))
    cts, eps = _encrypt_rows(sk, ek, C.pack(layout, x.reshape(len(x), -1)), 4)
    h = MAPS * OUT * OUT
    layer = C.encode_layer(P, layout, C.conv_matrix(w, side=SIDE, stride=STRIDE), np.repeat(b, OUT * OUT),
                           kind=C.Kind.SPREAD, groups=[[i] for i in range(h)], level=4, in_scale=P.scale)
    y = C.apply_layer(layer, cts)
    ref = C.conv2d_reference(x, w, b, stride=STRIDE).reshape(len(x), -1)
    assert np.abs(_slots(sk, y) - ref.T).max() <= C.layer_error_bound(layer, input_error=eps)


def test_bad_input_raises(keys, data):
    sk, ek = keys
    imgs, w, b = data
    d = 32
    rows = C.im2col(imgs[:1], k=K, stride=STRIDE, maps=MAPS, block=d)[0]
    cts = [ops.encrypt(ek, ops.encode(P, r, level=2)) for r in rows]
    conv = C.encode_entry_conv(P, w, b, side=SIDE, stride=STRIDE, level=3, in_scale=P.scale, block=d)
    with pytest.raises(ParameterError, match="too few levels"):
        C.entry_conv(conv, cts)
    with pytest.raises(ParameterError, match="entry ciphertexts"):
        C.entry_conv(conv, cts[:-1])
    with pytest.raises(ParameterError, match="does not fit"):
        C.output_side(4, 5, 1)
    with pytest.raises(ParameterError, match="kernels are"):
        C.encode_entry_conv(P, np.ones((2, 3, 4)), side=SIDE, stride=1, level=3, in_scale=P.scale)
    with pytest.raises(ParameterError, match="block"):
        C.encode_entry_conv(P, w, b, side=SIDE, stride=STRIDE, level=3, in_scale=P.scale, block=16)
    with pytest.raises(ParameterError, match="images must be"):
        C.im2col(np.zeros((2, 9, 8)), k=K, stride=STRIDE, maps=MAPS, block=d)
    with pytest.raises(ParameterError, match="power of two"):
        C.blocks(P, batch=48)
    with pytest.raises(ParameterError, match="at most G"):
        C.encode_layer(P, LAYOUT, np.ones((20, 3)), kind=C.Kind.SPREAD, groups=[np.arange(20)], level=3,
                       in_scale=P.scale)
    # encrypted weights under another key pair: the product refuses
    other_sk, other = ops.keygen(P, seed=bytes(range(1, 33)))
    foreign = C.encrypt_entry_conv(other, P, w, b, side=SIDE, stride=STRIDE, level=2, in_scale=P.scale, block=d)
    with pytest.raises(KeyMismatchError):
        C.entry_conv(foreign, cts, ek)
    mine = C.encrypt_entry_conv(ek, P, w, b, side=SIDE, stride=STRIDE, level=2, in_scale=P.scale, block=d)
    with pytest.raises(ParameterError, match="evaluation keys"):
        C.entry_conv(mine, cts)
    with pytest.raises(KeyMismatchError):
        ops.decrypt(other_sk, C.entry_conv(mine, cts, ek))
