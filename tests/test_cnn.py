"""CNN inference on encrypted images (crossfhe.apps.cnn, crossfhe.linalg.simd) at a small insecure set.

Bounds: at N 2^10 with scale 2^30 each simd layer's outputs are within 2^-12 of NumPy for inputs in [-1, 1] and
unit weights (measured about 2^-14); through a trained network (squares double relative errors, logits up to
~70) the logits agree with NumPy's within 2^-6 (measured about 2^-11 at N 2^14) and the labels are equal.
"""

import numpy as np
import pytest

from crossfhe.apps import cnn, datasets
from crossfhe.ckks import ops
from crossfhe.ckks.params import Params, ParamsLiteral
from crossfhe.errors import ParameterError
from crossfhe.linalg import simd

P = Params.from_literal(ParamsLiteral(log_n=10, levels=6, log_scale=30, dnum=3, insecure=True))


@pytest.fixture(scope="module")
def keys():
    return ops.keygen(P, seed=bytes(range(32)))


@pytest.fixture(scope="module")
def digits():
    return datasets.digits(28)


def _stack(ek, rows, level):
    return simd.stack([ops.encrypt(ek, ops.encode(P, r, level=level)) for r in rows])


def test_layer_equals_numpy(keys):
    sk, ek = keys
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (7, P.slots))
    w, b = rng.normal(size=(5, 7)) / 3, rng.normal(size=5)
    ct = _stack(ek, x, 4)
    layer = simd.encode_layer(P, w, b, level=4, in_scale=ct.scale)
    out = simd.apply(layer, ct)
    assert out.level == 3 and simd.count(out) == 5 and out.scale == ct.scale
    got = np.real(ops.decode(ops.decrypt(sk, out)))
    assert np.abs(got - (w @ x + b[:, None])).max() < 2.0**-12


@pytest.mark.parametrize("side,k,stride,maps", [(9, 3, 2, 2), (10, 4, 3, 3)])
def test_conv_equals_numpy(keys, side, k, stride, maps):
    sk, ek = keys
    rng = np.random.default_rng(side)
    imgs = rng.uniform(0, 1, (P.slots, side, side))
    w, b = rng.normal(size=(maps, k, k)) / k, rng.normal(size=maps)
    ct = _stack(ek, imgs.reshape(P.slots, -1).T, 4)
    conv = simd.encode_conv(P, w, b, side=side, stride=stride, level=4, in_scale=ct.scale)
    got = np.real(ops.decode(ops.decrypt(sk, simd.conv2d(conv, ct))))
    out = simd.conv_output_side(side, k, stride)
    ref = np.empty((maps, out, out, P.slots))
    for r in range(out):
        for c in range(out):
            win = imgs[:, r * stride: r * stride + k, c * stride: c * stride + k]
            ref[:, r, c] = np.einsum("mij,nij->mn", w, win) + b[:, None]
    assert np.abs(got - ref.reshape(maps * out * out, -1)).max() < 2.0**-12


def test_layers_refuse_bad_input(keys):
    sk, ek = keys
    ct = _stack(ek, np.zeros((3, P.slots)), 4)
    layer = simd.encode_layer(P, np.ones((2, 4)), level=4, in_scale=ct.scale)
    with pytest.raises(ParameterError, match="takes 4 inputs"):
        simd.apply(layer, ct)
    with pytest.raises(ParameterError, match="encoded for level 5"):
        simd.apply(simd.encode_layer(P, np.ones((2, 3)), level=5, in_scale=ct.scale), ct)
    with pytest.raises(ParameterError, match="bias"):
        simd.encode_layer(P, np.ones((2, 3)), np.ones(3), level=4, in_scale=ct.scale)
    with pytest.raises(ParameterError, match="does not fit"):
        simd.conv_output_side(4, 5, 1)


@pytest.mark.parametrize("architecture", ["tenseal", "lola"])
def test_encrypted_network_equals_numpy(keys, digits, architecture):
    sk, ek = keys
    net = cnn.CNN(architecture, params=P, progress=False).fit(digits.x_train, digits.y_train, epochs=4)
    x = digits.x_test[:64]
    model = net.encoded()
    ct, n = cnn.encrypt_images(ek, model, x)
    got = cnn.decrypt_logits(sk, cnn.infer(model, ct, ek), n)
    want = net.logits(x)
    assert np.abs(got - want).max() < 2.0**-6
    np.testing.assert_array_equal(got.argmax(1), want.argmax(1))
    assert (want.argmax(1) == digits.y_test[:64]).mean() > 0.8  # trained: well above chance (0.1)


def test_cnn_api_and_errors(digits, tmp_path):
    net = cnn.CNN("tenseal", params=P, progress=False)
    with pytest.raises(ParameterError, match="not trained"):
        net.predict(digits.x_test[:2])
    net.fit(digits.x_train[:200], digits.y_train[:200], epochs=1)
    got = net.encrypted_predict(digits.x_test[:3], seed=bytes(range(32)))
    np.testing.assert_array_equal(got, net.predict(digits.x_test[:3]))
    assert net.stats_["images"] == 3
    with pytest.raises(ParameterError, match=r"\[n, 28, 28\]"):
        net.predict(np.zeros((2, 14, 14)))
    with pytest.raises(ParameterError, match=r"\[0, 1\]"):
        net.predict(np.full((1, 28, 28), 2.0))
    with pytest.raises(ParameterError, match="architecture"):
        cnn.CNN("resnet")
    path = tmp_path / "w.npz"
    net.weights.save_npz(path)
    back = cnn.Weights.load_npz(path)
    np.testing.assert_array_equal(cnn.forward(back, digits.x_test[:5]), net.logits(digits.x_test[:5]))
    np.savez(tmp_path / "bad.npz", conv_w=np.zeros(3))
    with pytest.raises(ParameterError, match="not a CNN weights file"):
        cnn.Weights.load_npz(tmp_path / "bad.npz")
    with pytest.raises(ParameterError, match="levels"):
        cnn.encode_model(P, net.weights, level=3)
