"""HELR (crossfhe.apps.helr): logistic regression trained on encrypted data, with bootstrapping.

At a small insecure bootstrappable set (N 2^11, 5 user levels, the N 2^16 chain's primes otherwise) the encrypted
weights equal the NumPy recursion with the same cubic sigmoid (train_plain) within 2^-20 after 4 iterations and 3
bootstraps (measured: 2^-28.4; the margin covers other seeds and data), every row of the replicated result
included. The full HELR-1024 shape at N 2^16 runs in `crossfhe bench ml` and the slow test.
"""

import math

import numpy as np
import pytest

from crossfhe.apps import datasets, helr
from crossfhe.ckks import bootstrap as bt
from crossfhe.ckks import ops
from crossfhe.errors import KeyMismatchError, ParameterError

P = bt.bootstrappable_params(log_n=11, levels_left=helr.DEPTH, log_scale=52, dnum=3, cts_levels=2, stc_levels=2,
                             insecure=True)
BITS = 20
FEATURES = 12  # + the intercept: F = 16 slots per sample (3 of them padding), 64 samples per ciphertext


@pytest.fixture(scope="module")
def cancer():
    s = datasets.breast_cancer(train=100, seed=1)
    return s.x_train[:, :FEATURES], s.y_train, s.x_test[:, :FEATURES], s.y_test


@pytest.fixture(scope="module")
def setup(cancer):
    x, y, _, _ = cancer
    z = helr.design(x, y)
    layout = helr.Layout(len(z), z.shape[1], P.slots)
    sk, ek = ops.keygen(P, rotations=layout.rotations(), seed=bytes(range(32)))
    keys = bt.keygen(sk, ek, helr.bootstrap_config(P, layout), seed=bytes(range(1, 33)))
    return sk, ek, keys, layout, z


def test_layout_packs_rows_and_replicates():
    lay = helr.Layout(samples=100, features=16, slots=1024)
    assert (lay.width, lay.rows, lay.count) == (16, 64, 2)
    z = np.arange(1600, dtype=float).reshape(100, 16)
    packed = lay.pack(z)
    assert packed.shape == (2, 1024)
    np.testing.assert_array_equal(packed[1, 16 * 3: 16 * 4], z[67])
    assert not packed[1, 16 * 36:].any()  # samples 100..127 are zero padding
    w = np.arange(16.0)
    rep = lay.replicate(w)
    np.testing.assert_array_equal(lay.weights(rep), w)
    with pytest.raises(ParameterError, match="expected 16 weights"):
        lay.replicate(np.arange(13.0))
    assert set(lay.rotations()) == {1, 2, 4, 8, -1, -2, -4, -8, 16, 32, 64, 128, 256, 512}


def test_layout_rejects_bad_shapes():
    with pytest.raises(ParameterError, match="do not fit"):
        helr.Layout(samples=4, features=2000, slots=1024)
    with pytest.raises(ParameterError, match="expected"):
        helr.Layout(samples=4, features=3, slots=1024).pack(np.zeros((4, 4)))


def test_nesterov_schedule():
    eta = helr.nesterov(5)
    assert eta[0] == 1.0 and eta[1] == 0.0 and (eta[2:] < 0).all() and (np.diff(eta) < 0).all()
    lam = [0.0]
    for _ in range(5):
        lam.append((1 + math.sqrt(1 + 4 * lam[-1] ** 2)) / 2)
    np.testing.assert_allclose(eta, [(1 - a) / b for a, b in zip(lam, lam[1:])], rtol=0, atol=1e-15)


def test_encrypted_training_equals_the_plain_recursion(setup, cancer):
    sk, ek, keys, layout, z = setup
    x, y, _, _ = cancer
    data = helr.encrypt_data(ek, P, x, y)
    stats = helr.Stats()
    w = helr.train(data, keys, iterations=4, rate=3.0, weight_bound=2.0, stats=stats)
    assert (stats.iterations, stats.bootstraps) == (4, 3)
    want, _ = helr.train_plain(z, 4, 3.0)
    rows = np.real(ops.decode(ops.decrypt(sk, w))).reshape(layout.rows, layout.width) * 2.0
    err = np.abs(rows[:, : layout.features] - want).max()
    assert err < 2.0**-BITS, -math.log2(err)
    assert np.abs(rows[:, layout.features:]).max() < 2.0**-BITS  # the padding features stay zero


def test_train_checks_its_inputs(setup, cancer):
    sk, ek, keys, layout, z = setup
    x, y, _, _ = cancer
    data = helr.encrypt_data(ek, P, x, y)
    with pytest.raises(ParameterError, match="iterations"):
        helr.train(data, keys, iterations=0)
    other_sk, other_ek = ops.keygen(P, rotations=layout.rotations(), seed=bytes(range(2, 34)))
    with pytest.raises(KeyMismatchError, match="different secret keys"):
        helr.train(helr.encrypt_data(other_ek, P, x, y), keys, iterations=1)
    no_rot = bt.keygen(sk, ops.keygen(P, seed=bytes(range(32)))[1], helr.bootstrap_config(P, layout),
                       seed=bytes(range(1, 33)))
    with pytest.raises(KeyMismatchError, match="lack rotations"):
        helr.train(data, no_rot, iterations=1)
    with pytest.raises(TypeError, match="EncryptedData"):
        helr.train(data.z, keys, iterations=1)


def test_design_and_labels():
    z = helr.design([[0.5, -1.0]], [0])
    np.testing.assert_array_equal(z, [[-1.0, -0.5, 1.0]])
    with pytest.raises(ParameterError, match="0 or 1"):
        helr.design([[0.5]], [2])
    with pytest.raises(ParameterError, match="one label per sample"):
        helr.design([[0.5], [0.2]], [1])
    with pytest.raises(ParameterError, match="NaN"):
        helr.design([[np.nan]], [1])


def test_logistic_regression_fit_predict(cancer):
    x, y, xt, yt = cancer
    model = helr.LogisticRegression(iterations=3, params=P, progress=False, seed=bytes(range(5, 37)))
    model.fit(x, y)
    cubic = helr.LogisticRegression(iterations=3, params=P).fit_plain(x, y, sigmoid_kind="cubic")
    exact = helr.LogisticRegression(iterations=3, params=P).fit_plain(x, y)
    assert abs(model.intercept_ - cubic.intercept_) < 2.0**-BITS
    np.testing.assert_allclose(model.coef_, cubic.coef_, rtol=0, atol=2.0**-BITS)
    # the encrypted model predicts as the NumPy model with the same arithmetic, on every test sample
    np.testing.assert_array_equal(model.predict(xt), cubic.predict(xt))
    majority = max(yt.mean(), 1 - yt.mean())
    assert model.score(xt, yt) > majority and exact.score(xt, yt) > majority  # both learned something
    assert model.stats_.iterations == 3 and model.timings_["train"] > 0
    assert 0.0 <= model.predict_proba(xt).min() and model.predict_proba(xt).max() <= 1.0


def test_logistic_regression_refuses_bad_input(cancer):
    x, y, _, _ = cancer
    model = helr.LogisticRegression(iterations=2, params=P)
    with pytest.raises(ParameterError, match=r"\[-1, 1\]"):
        model.fit(x * 3, y)
    with pytest.raises(ParameterError, match="not fitted"):
        model.predict(x)
    with pytest.raises(ParameterError, match="weight_bound"):
        helr.LogisticRegression(iterations=8, rate=3.0, weight_bound=0.5, params=P).fit(x, y)
    with pytest.raises(ParameterError, match="diverges"):
        helr.LogisticRegression(iterations=8, rate=50.0, params=P).fit(x, y)
    with pytest.raises(ParameterError, match="bootstrappable"):
        helr.LogisticRegression(params=_shallow())
    model.fit_plain(x, y)
    with pytest.raises(ParameterError, match="features"):
        model.predict(x[:, :3])


def _shallow():
    from crossfhe.testing import INSECURE_CKKS_N10

    return INSECURE_CKKS_N10


@pytest.mark.slow
def test_helr_1024_at_n16_one_iteration_block():
    """The HELR-1024 shape (1024 digits, 14 x 14 = 196 features) at the 128-bit chain: 3 iterations, 2 sparse
    bootstraps, weights equal to the NumPy recursion within 2^-20."""
    s = datasets.digits(14, binary={5, 6, 7, 8, 9}, train=1024, flatten=True)
    z = helr.design(s.x_train, s.y_train)
    layout = helr.Layout(len(z), z.shape[1], helr.PARAMS.slots)
    sk, ek = ops.keygen(helr.PARAMS, rotations=layout.rotations())
    keys = bt.keygen(sk, ek, helr.bootstrap_config(helr.PARAMS, layout))
    w = helr.train(helr.encrypt_data(ek, helr.PARAMS, s.x_train, s.y_train), keys, iterations=3)
    want, _ = helr.train_plain(z, 3, 3.0)
    got = layout.weights(ops.decode(ops.decrypt(sk, w))) * 2.0
    assert np.abs(got - want).max() < 2.0**-BITS
