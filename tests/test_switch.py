"""CKKS <-> TFHE scheme switching (crossfhe.convert.switch) and the functions on CKKS vectors (crossfhe.api.switch).

At insecure sizes (CKKS N 2^11 with bootstrapping levels, TFHE 4-bit messages over N_t 1024): the switched values
against the NumPy quantization exactly, the returned CKKS values against NumPy within the switch's error model, and
the errors a user can make."""

import pickle

import numpy as np
import pytest

from crossfhe import testing
from crossfhe.api.ckks import CKKSContext
from crossfhe.api.switch import SchemeSwitch
from crossfhe.api.tfhe import Bound, EncryptedInt, TFHEContext
from crossfhe.convert import switch as sw
from crossfhe.errors import KeyMismatchError, ParameterError
from crossfhe.tfhe import ops as tops

CKKS_P = testing.INSECURE_CKKS_BOOT_N11
TFHE_P = testing.INSECURE_TFHE_P4


@pytest.fixture(scope="module")
def ctx():
    ck = CKKSContext.create(CKKS_P, insecure=True, seed=b"switch-ckks".ljust(32, b"\0"), progress=None)
    tf = TFHEContext.create(TFHE_P, insecure=True, seed=b"switch-tfhe".ljust(32, b"\0"), progress=None)
    s = SchemeSwitch.create(ck, tf, slots=8, seed=b"switch-keys".ljust(32, b"\0"), progress=None)
    return ck, tf, s


def _tolerance(s: SchemeSwitch) -> float:
    """The error bound of a value back in CKKS, in output steps: 8 standard deviations of the TFHE bootstrap's noise
    plus EvalMod's worst-case residual (shift_errors) plus 2^-10 for the CKKS bootstrap's own error."""
    noise, evalmod = sw.shift_errors(s.tfhe.params, sw.shift_for(s.tfhe.params))
    return 8 * noise + evalmod + 2.0**-10


def test_quantizer_reference():
    qz = sw.Quantizer(-1.0, 1.0, 3, 4)
    assert qz.step == pytest.approx(2 / 7)
    assert qz.headroom == 4
    np.testing.assert_array_equal(qz.quantize([-5, -1, -0.86, -0.01, 0.15, 1, 3]), [0, 0, 0, 3, 4, 7, 7])
    lo, hi = qz.safe_interval
    assert lo == pytest.approx(-1 - 4.5 * 2 / 7) and hi == pytest.approx(1 + 4.5 * 2 / 7)
    np.testing.assert_array_equal(qz.table(), [0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 7, 7, 7, 7])
    np.testing.assert_array_equal(qz.table(lambda q: 7 - q)[4:12], [7, 6, 5, 4, 3, 2, 1, 0])
    for bad in [dict(lo=1.0, hi=1.0), dict(lo=0.0, hi=float("inf")), dict(bits=5), dict(bits=0)]:
        args = dict(lo=-1.0, hi=1.0, bits=3, message_bits=4) | bad
        with pytest.raises(ParameterError):
            sw.Quantizer(**args)


def test_ckks_to_lwe_phase_is_the_scaled_value(ctx):
    ck, tf, s = ctx
    rng = np.random.default_rng(5)
    v = rng.uniform(-1.3, 1.3, 8)
    qz = sw.Quantizer(-1.0, 1.0, 3, TFHE_P.message_bits)
    lwe = sw.ckks_to_lwe(ck.encrypt(v).ct, s.keys, qz, 8)
    assert lwe.key_id == tf.key_id and lwe.batch_shape == (8,)
    phase = np.array([int(x) for x in tops.phase(tf.secret_key, lwe)], dtype=object)
    got = np.array([float(x) / TFHE_P.delta for x in phase])
    want = (v - qz.lo) / qz.step + qz.headroom
    # error: CKKS noise after SlotToCoeff (about 2^6 against q0 ~ 2^56) and the key switch's, times 2^5 boxes
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_to_tfhe_rounds_and_clips(ctx):
    ck, tf, s = ctx
    qz = s.quantizer((-2.0, 2.0), None)
    k = np.array([0, 1, 2, 3, 4, 5, 6, 7])
    rng = np.random.default_rng(6)
    v = qz.dequantize(k) + rng.uniform(-0.3, 0.3, 8) * qz.step  # 0.2 of a step from any rounding boundary
    v[0], v[7] = -2.0 - 3.9 * qz.step, 2.0 + 4.2 * qz.step  # outside [lo, hi], inside the headroom: clipped
    x = s.to_tfhe(ck.encrypt(v), (-2.0, 2.0))
    np.testing.assert_array_equal(tf.decrypt(x), qz.quantize(v))
    assert x.range == (0, 7) and x.decrypt().tolist() == qz.quantize(v).tolist()
    y = s.to_tfhe(ck.encrypt(v[:5]), (-2.0, 2.0), table=lambda q: q // 2 + 8)
    np.testing.assert_array_equal(tf.decrypt(y), qz.quantize(v[:5]) // 2 + 8)
    assert y.range == (8, 11)
    z = y.apply(lambda m: m - 8)  # a TFHE value like any other
    np.testing.assert_array_equal(z.decrypt(), qz.quantize(v[:5]) // 2)


def test_functions_against_numpy(ctx):
    ck, _, s = ctx
    rng = np.random.default_rng(7)
    interval = (-3.0, 3.0)
    qz = s.quantizer(interval, None)
    k = rng.permutation(8)[:7]  # distinct grid points: argmax has one answer
    v = qz.dequantize(k) + rng.uniform(-0.3, 0.3, 7) * qz.step
    q = qz.dequantize(qz.quantize(v))
    x = ck.encrypt(v)
    tol = _tolerance(s)
    cases = [
        (s.relu(x, interval), np.maximum(q, 0), qz.step / 2),
        (s.sign(x, interval), np.sign(q), 1.0),
        (s.greater(x, 0.5, interval), (qz.dequantize(qz.quantize(v - 0.5)) > 0) * 1.0, 1.0),
        (s.max(x, interval), [q.max()], qz.step),
        (s.argmax(x, interval), np.eye(7)[np.argmax(q)], 1.0),
        (s.apply(x, lambda t: t * t, interval), q * q, None),
    ]
    for y, ref, step in cases:
        assert len(y) == len(ref)
        got = y.decrypt()
        if step is None:  # a non-grid output: 2^P points over fn's range, rounding adds half a step
            step = (np.max(ref) - 0) / (2**s.bits - 1)
            np.testing.assert_allclose(got, ref, atol=(0.5 + tol) * step)
        else:
            np.testing.assert_allclose(got, ref, atol=tol * step)


def test_greater_of_two_vectors(ctx):
    ck, _, s = ctx
    a, b = np.array([0.5, -1.0, 2.0, 0.1]), np.array([-0.5, 1.0, 1.0, 1.2])
    y = s.greater(ck.encrypt(a), ck.encrypt(b), (-3.0, 3.0))
    np.testing.assert_allclose(y.decrypt(), (a > b) * 1.0, atol=_tolerance(s))


def test_comparison_operators_go_through_the_switch(ctx):
    """x > y, x <= 0.5, ... on encrypted vectors (NumPy's habit) through the context's SchemeSwitch, on its interval
    for x - y (here the default (-1, 1)): 0/1 vectors within the switch's error bound."""
    ck, _, s = ctx
    a, b = np.array([0.5, -0.75, -0.25, 0.875]), np.array([-0.25, 0.25, 0.5, 0.375])  # differences >= 0.25 from 0
    x, y = ck.encrypt(a), ck.encrypt(b)
    assert s.interval == (-1.0, 1.0)
    for got, want in ((x > y, a > b), (x <= y, a <= b), (x < 0.2, a < 0.2), (x >= 0, a >= 0)):
        np.testing.assert_allclose(got.decrypt(), want * 1.0, atol=_tolerance(s))


def test_to_ckks_round_trip_and_arithmetic(ctx):
    ck, tf, s = ctx
    m = np.array([0, 3, 15, 7, 9])
    x = s.to_ckks(tf.encrypt(m))
    np.testing.assert_allclose(x.decrypt(), m, atol=_tolerance(s))
    np.testing.assert_allclose(s.to_ckks(tf.encrypt(m), table=lambda t: 15 - t).decrypt(), 15 - m,
                               atol=_tolerance(s))
    one = s.to_ckks(tf.encrypt(6))
    assert len(one) == 1
    v = np.array([0.25, -0.5, 1.0, 2.0, 0.0])
    np.testing.assert_allclose((x * 0.5 + ck.encrypt(v)).decrypt(), m * 0.5 + v, atol=_tolerance(s))
    np.testing.assert_allclose((ck.encrypt(v) + one).decrypt(), v + 6, atol=_tolerance(s))


def test_refusals(ctx):
    ck, tf, s = ctx
    x = ck.encrypt([0.1, 0.2, 0.3])
    with pytest.raises(ParameterError, match="interval"):
        s.relu(x, (1.0, -1.0))
    with pytest.raises(ParameterError, match="interval"):
        s.relu(x, 3.0)
    with pytest.raises(ParameterError, match="bits"):
        s.relu(x, (-1, 1), bits=5)
    with pytest.raises(ParameterError, match="values must lie"):
        s.to_tfhe(x, (-1, 1), table=lambda q: q + 16)
    with pytest.raises(ParameterError, match="slots"):
        s.relu(ck.encrypt(np.zeros(9)), (-1, 1))
    with pytest.raises(ParameterError, match="complex"):
        s.relu(ck.encrypt(np.array([1j, 2])), (-1, 1))
    low = ck.encrypt([0.5])
    while low.level:
        low = low * 1.0
    with pytest.raises(ParameterError, match="level 0"):
        s.relu(low, (-1, 1))
    y = tf.encrypt(7)
    with pytest.raises(ParameterError, match="outside"):  # a bound the facade would never make: checked again
        s.to_ckks(EncryptedInt(y.ct, tf.public, Bound.source(0, 20)))
    with pytest.raises(ParameterError, match="noise"):
        s.to_ckks(EncryptedInt(y.ct, tf.public, Bound.source(0, 3, noise=10**6)))
    with pytest.raises(TypeError):
        s.to_ckks(x)
    other = CKKSContext.create(CKKS_P, insecure=True, seed=b"other".ljust(32, b"\0"), progress=None)
    with pytest.raises(KeyMismatchError):
        s.relu(other.encrypt([0.1]), (-1, 1))
    tf2 = TFHEContext.create(TFHE_P, insecure=True, seed=b"other-t".ljust(32, b"\0"), progress=None)
    with pytest.raises(KeyMismatchError):
        s.to_ckks(tf2.encrypt(3))


def test_switch_pickles_without_secrets(ctx):
    ck, tf, s = ctx
    blob = pickle.dumps(s)
    t = pickle.loads(blob)
    assert "_owner" not in t.__dict__
    y = t.relu(ck.encrypt([0.5, -0.5]), (-1, 1))
    with pytest.raises(ParameterError, match="no key owner"):
        y.decrypt()
    np.testing.assert_allclose(ck.decrypt(y), [3 / 7, 0.0], atol=0.05)  # 0.5 rounds to -1 + 5 (2 / 7)
    with pytest.raises(Exception, match="secret"):
        pickle.dumps(ck)
    sizes = s.sizes()
    assert set(sizes) == {"to_tfhe", "to_ckks", "packing", "ckks_evaluation", "tfhe_server"}
    assert sizes["to_tfhe"] == 2 * sw.GADGET_LEVELS * len(CKKS_P.moduli_at(0)) * CKKS_P.n * 4


@pytest.mark.slow  # its own keys (about 15 s); test_to_tfhe_at_secure_presets covers the same path at N14_L7
def test_without_bootstrapping_only_to_tfhe():
    ck = CKKSContext.create(testing.INSECURE_CKKS_N11_COMPOSITE, insecure=True, seed=b"nb".ljust(32, b"\0"),
                            progress=None)
    tf = TFHEContext.create(TFHE_P, insecure=True, seed=b"nb-t".ljust(32, b"\0"), progress=None)
    s = SchemeSwitch.create(ck, tf, slots=4, progress=None)
    v = np.array([-0.9, 0.3, 0.6, 0.95])
    x = s.to_tfhe(ck.encrypt(v), (-1, 1), bits=4)
    np.testing.assert_array_equal(x.decrypt(), sw.Quantizer(-1, 1, 4, 4).quantize(v))
    with pytest.raises(ParameterError, match="bootstrap"):
        s.to_ckks(x)


def test_p_fail_model(ctx):
    _, _, s = ctx
    # the switch adds the CKKS and key-switch noise to the TFHE key switch's and roundings': far below the budget
    assert s.log2_p_fail() < TFHE_P.log2_p_fail()
    assert s.keys.to_tfhe.noise_variance() < 2.0**-40


def test_keys_hold_slot_to_coeff_rotations_for_every_width(ctx):
    # a vector narrower than the keys' slots runs SlotToCoeff at its own width: the keys hold each width's rotations
    _, _, s = ctx
    from crossfhe.ckks import ops as ckks_ops

    have = set(s.keys.evaluation.galois)
    for k in range(1, s.keys.slots.bit_length()):
        need = {ckks_ops.rotation_element(CKKS_P, r) for r in sw.s2c_rotations(CKKS_P, 1 << k)}
        assert need <= have, 1 << k


@pytest.mark.slow
def test_to_tfhe_at_secure_presets():
    """CKKS N14_L7 (128-bit, no bootstrapping) to TFHE P4: 64 values at most 0.4 of a step from a grid point switch to
    exactly NumPy's integers; the key to TFHE sits on the long key's published rate."""
    from crossfhe.ckks import presets as ckks_presets
    from crossfhe.tfhe import presets as tfhe_presets

    ck = CKKSContext.create(ckks_presets.N14_L7, seed=b"secure-ckks".ljust(32, b"\0"), progress=None)
    tf = TFHEContext.create(tfhe_presets.P4, seed=b"secure-tfhe".ljust(32, b"\0"), progress=None)
    s = SchemeSwitch.create(ck, tf, slots=64, progress=None)
    qz = s.quantizer((-4.0, 4.0), None)
    rng = np.random.default_rng(29)
    v = qz.dequantize(rng.integers(0, 8, 64)) + rng.uniform(-0.4, 0.4, 64) * qz.step
    np.testing.assert_array_equal(s.to_tfhe(ck.encrypt(v), (-4.0, 4.0)).decrypt(), qz.quantize(v))
    q0 = np.prod([float(q) for q in ck.params.moduli_at(0)])
    assert s.keys.to_tfhe.sigma == pytest.approx(max(3.19, 2.0**sw.TFHE_LONG_LOG2_RATE * q0))
    assert s.log2_p_fail() <= tfhe_presets.P4.log2_p_fail()
    with pytest.raises(ParameterError, match="bootstrap"):
        s.to_ckks(tf.encrypt(3))
