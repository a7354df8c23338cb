"""Activations (crossfhe.ckks.activations): stored plaintext errors, levels, and encrypted evaluation.

Parameters: a local insecure set, N 2^10, 12 levels of one 30-bit prime (scale 2^30), dnum 3; crossfhe.testing has
no small set with more than 3 plain levels (INSECURE_CKKS_BOOT_N11's extra levels are bootstrapping's).

CKKS bound: at scale 2^30 and N 2^10 a fresh encryption is good to about 2^-25 per slot, each rescale and
relinearization adds noise near 2^-22 relative, and the stages multiply what the earlier ones left by their slope
(the composite ReLU's by up to c_13^2 = 17.5 near 0); measured max slot errors against the plaintext polynomial
were 2^-17.7 (ReLU on [-4, 2]: |x| up to 4 multiplies the sign's error) to 2^-20.1 (square). The tests ask for
2^-13, over 4 bits of margin.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crossfhe.ckks import activations as A
from crossfhe.ckks import ops, polynomial
from crossfhe.ckks.params import Params, ParamsLiteral
from crossfhe.errors import ParameterError

P = Params.from_literal(ParamsLiteral(log_n=10, levels=12, log_scale=30, dnum=3, insecure=True))
CKKS_BOUND = 2.0**-13


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _relu(x):
    return np.where(x > 0, x, 0.0)


CASES = {  # id -> (activation, the true function written independently of the module)
    "sigmoid/[-8,8]/d=7": (A.sigmoid(degree=7), _sigmoid),
    "sigmoid/[-8,8]/d=15": (A.sigmoid(degree=15), _sigmoid),
    "sigmoid/[-8,8]/d=27": (A.sigmoid(), _sigmoid),
    "sigmoid/[-4,6]/d=11": (A.sigmoid((-4, 6), degree=11), _sigmoid),
    "relu/[-1,1]/d=27,27": (A.relu(), _relu),
    "relu/[-1,1]/d=11,11": (A.relu(sign_degrees=(11, 11)), _relu),
    "relu/[-4,2]/d=27,27": (A.relu((-4, 2)), _relu),
    "relu_smooth/[-1,1]/d=28": (A.relu_smooth(), _relu),
    "relu_smooth/[-2,2]/d=12": (A.relu_smooth((-2, 2), degree=12), _relu),
    "square/[-1,1]": (A.square(), lambda x: x * x),
    "tanh/[-3,3]/d=15": (A.from_function(np.tanh, (-3, 3), 15, name="tanh"), np.tanh),
}


@pytest.fixture(scope="module")
def keys():
    return ops.keygen(P, seed=bytes(range(32)))


def _approx_independently(act, x):
    """The activation's polynomial from its stored coefficients, with NumPy's Chebyshev series."""
    y = x
    for s in act.stages:
        a, b = s.interval
        y = np.polynomial.chebyshev.chebval((2 * y - a - b) / (b - a), np.array(s.coeffs))
    return x * y if act.form is A.Form.TIMES_INPUT else y


# --- plaintext: the stored error, levels, the sign polynomials ----------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_stored_error_matches_a_fresh_grid(case):
    act, f = CASES[case]
    a, b = act.interval
    x = np.concatenate([[a, b], np.random.default_rng(7).uniform(a, b, 400_000)])
    err = np.abs(_approx_independently(act, x) - f(x)).max()
    if act.max_error == 0:
        assert err == 0
    else:
        assert abs(err - act.max_error) <= 0.01 * act.max_error


@settings(max_examples=30, deadline=None)
@given(st.floats(-8, 8), st.sampled_from([7, 11, 15, 27]))
def test_stored_error_bounds_every_point(x, degree):
    act = A.sigmoid(degree=degree)
    assert abs(float(act.approx(np.array([x]))[0]) - _sigmoid(x)) <= 1.001 * act.max_error + 1e-15


def test_levels_degrees_and_stated_errors():
    """The numbers the docstrings state (max errors to 2 digits)."""
    table = {  # activation -> (degrees, levels, max error)
        A.sigmoid(degree=7): ((7,), 5, 3.0e-2),
        A.sigmoid(degree=11): ((11,), 5, 6.2e-3),
        A.sigmoid(degree=15): ((15,), 6, 1.4e-3),
        A.sigmoid(): ((27,), 6, 1.4e-5),
        A.relu(): ((27, 27), 11, 7.7e-3),
        A.relu(sign_degrees=(11, 11)): ((11, 11), 9, 1.8e-2),
        A.relu(sign_degrees=(27, 27, 27)): ((27, 27, 27), 16, 1.9e-3),
        A.relu_smooth(degree=12): ((12,), 4, 2.3e-2),
        A.relu_smooth(): ((28,), 5, 1.0e-2),
        A.relu_smooth(degree=60): ((60,), 6, 4.9e-3),
        A.square(): ((), 1, 0.0),
    }
    for act, (degrees, levels, err) in table.items():
        assert act.degrees == degrees and act.levels == levels, act
        assert act.max_error == pytest.approx(err, rel=0.05, abs=1e-300), act
    assert A.relu((-4, 2)).levels == 12  # the first stage's affine map
    assert A.relu((-4, 2)).max_error == pytest.approx(4 * A.relu().max_error, rel=0.01)  # error scales with r = 4


def test_sign_polynomials_known_answers():
    """f_1 = (3x - x^3) / 2 and f_3 = (35x - 35x^3 + 21x^5 - 5x^7) / 16 (Cheon et al., Asiacrypt 2020)."""
    x = np.linspace(-1, 1, 101)
    np.testing.assert_allclose(A.sign_polynomial(1)(x), (3 * x - x**3) / 2, atol=1e-15)
    np.testing.assert_allclose(A.sign_polynomial(3)(x), (35 * x - 35 * x**3 + 21 * x**5 - 5 * x**7) / 16, atol=1e-15)
    for n in (1, 5, 13):
        f = A.sign_polynomial(n)
        assert f(np.array([1.0]))[0] == pytest.approx(1.0, abs=1e-14)
        assert np.all(np.abs(f(x)) <= 1 + 1e-14)
        assert f(np.array([1e-9]))[0] / 1e-9 == pytest.approx(math.prod(range(1, 2 * n + 2, 2)) /
                                                               math.prod(range(2, 2 * n + 1, 2)))


def test_description_is_frozen_hashable_and_stated():
    act = A.relu()
    assert act == A.relu() and hash(act) == hash(A.relu())
    assert "11 levels" in repr(act) and "7.745e-03" in repr(act) and "[-1, 1]" in repr(act)
    with pytest.raises(AttributeError):
        act.levels = 3


# --- encrypted ---------------------------------------------------------------------------------------------

ENCRYPTED = ["square/[-1,1]", pytest.param("sigmoid/[-8,8]/d=27", marks=pytest.mark.slow),  # 40 s cold in CI
             "sigmoid/[-8,8]/d=7", "relu_smooth/[-1,1]/d=28", "relu/[-1,1]/d=27,27",
             pytest.param("relu/[-4,2]/d=27,27", marks=pytest.mark.slow)]  # 16 s; relu/[-1,1] stays


@pytest.mark.parametrize("case", ENCRYPTED)
def test_encrypted_matches_polynomial_and_function(keys, case):
    sk, ek = keys
    act, f = CASES[case]
    a, b = act.interval
    x = np.random.default_rng(len(case)).uniform(a, b, P.slots)
    x[:3] = (a, 0.0, b)
    ct = ops.encrypt(ek, ops.encode(P, x, level=P.levels))
    out = A.apply(ct, act, ek)
    assert ct.level - out.level == act.levels
    got = ops.decode(ops.decrypt(sk, out)).real
    assert np.abs(got - act.approx(x)).max() < CKKS_BOUND
    assert np.abs(got - f(x)).max() <= act.max_error + CKKS_BOUND


# --- errors --------------------------------------------------------------------------------------------------


def test_refuses_too_few_levels(keys):
    _, ek = keys
    act = A.relu()
    ct = ops.encrypt(ek, ops.encode(P, np.zeros(P.slots), level=act.levels - 1))
    with pytest.raises(ParameterError, match="needs 11 levels; the ciphertext has 10"):
        A.apply(ct, act, ek)
    with pytest.raises(TypeError, match="Activation"):
        A.apply(ct, polynomial.chebyshev_coefficients(np.tanh, 3), ek)


@pytest.mark.parametrize("interval", [(1, -1), (0, 0), (float("nan"), 1), (0, math.inf), "ab", (1,)])
def test_refuses_bad_intervals(interval):
    for make in (A.sigmoid, A.relu, A.relu_smooth, A.square, lambda i: A.from_function(np.tanh, i, 5)):
        with pytest.raises(ParameterError, match="interval"):
            make(interval)


def test_refuses_bad_degrees():
    for degree in (0, -3, 2.5, True, 1024):
        with pytest.raises(ParameterError, match="degree"):
            A.sigmoid(degree=degree)
        with pytest.raises(ParameterError, match="degree"):
            A.from_function(np.tanh, (-1, 1), degree)
    for degrees in ((), (4,), (1,), (3.0,), (27, True), (1025,)):
        with pytest.raises(ParameterError, match="sign_degrees"):
            A.relu(sign_degrees=degrees)
    with pytest.raises(ParameterError, match="n must be"):
        A.sign_polynomial(0)
