"""apps: matrix-vector Beaver triples (CHAM §V-B4) and a HeteroLR step (CHAM §V-B3), checked against
plaintext computation; what each party object holds; the errors.

Beaver runs on ``INSECURE_BFV_N256_COEFF`` (CHAM's shape at N = 256, t = 2^16), the logistic regression on
the same primes with t = 2^29 - 3, so both share compiled kernels with ``tests/test_hmvp.py``. Keys and
randomness are seeded. The 128-bit LR parameter sets are exercised by the ``slow`` test at the end.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crossfhe import io
from crossfhe.apps import beaver as bv
from crossfhe.apps import hetero_lr as lr
from crossfhe.bfv import Ciphertext, EvaluationKeys, Params, ParamsLiteral
from crossfhe.core.keys import SecretKey
from crossfhe.errors import ParameterError
from crossfhe.linalg import hmvp as H
from crossfhe.testing import INSECURE_BFV_N256_COEFF

P = INSECURE_BFV_N256_COEFF
LR_P = Params.from_literal(ParamsLiteral(log_n=8, q=P.q, p=P.p, plain_modulus=2**29 - 3, dnum=2, insecure=True))
FP = lr.FixedPoint()


def seed(label: str) -> bytes:
    return label.encode().ljust(32, b".")


def holds(obj, predicate, depth: int = 4) -> bool:
    """Whether obj or anything reachable through its attributes, dicts and sequences satisfies predicate."""
    if predicate(obj):
        return True
    if depth == 0:
        return False
    if isinstance(obj, dict):
        children = list(obj.values())
    elif isinstance(obj, (list, tuple)):
        children = list(obj)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        children = [getattr(obj, f.name) for f in dataclasses.fields(obj)]
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        children = list(vars(obj).values())
    else:
        children = []
    return any(holds(c, predicate, depth - 1) for c in children)


def is_secret_key(x) -> bool:
    return isinstance(x, SecretKey)


# --------------------------------------------------------------------------------------------------
# Beaver triples
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client():
    return bv.Client(P, seed=seed("client"))


def server_for(client, m, n, label):
    w = np.random.default_rng(m * 1000 + n).integers(0, P.t, size=(m, n))
    return w, bv.Server(P, w, client.keys, seed=seed(label))


@pytest.mark.parametrize(
    ("m", "n", "count"),
    [
        (5, 17, 3),  # m < N, not a power of two
        (300, 40, 1),  # m > N: the reply is two ciphertexts, masks placed in both
        (20, 600, 1),  # n > N: three column blocks
    ],
    ids=["m=5/n=17", "m=300/n=40", "m=20/n=600"],
)
def test_triples_satisfy_z_plus_s_equals_w_r(client, m, n, count):
    w, server = server_for(client, m, n, f"server{m}")
    ours, theirs = bv.generate_triples(client, server, count)
    assert len(ours) == len(theirs) == count
    for a, b in zip(ours, theirs):
        assert a.r.shape == (n,) and a.z.shape == (m,) and b.s.shape == (m,)
        assert bv.check_triple(w, a, b, P.t)
        assert not bv.check_triple(w, a, bv.ServerTriple((b.s + 1) % P.t), P.t)
    if count > 1:  # fresh r and s per triple
        assert not np.array_equal(ours[0].r, ours[1].r)
        assert not np.array_equal(theirs[0].s, theirs[1].s)


def test_shared_matvec_gives_shares_of_w_x(client):
    """CHAM §II-F: A's share encrypted, B's share added to the encrypted vector, W applied, masked."""
    w, server = server_for(client, 5, 17, "shared")
    rng = np.random.default_rng(3)
    x_a, x_b = rng.integers(0, P.t, size=17), rng.integers(0, P.t, size=17)
    y_a, y_b = bv.shared_matvec(client, server, x_a, x_b)
    assert np.array_equal((y_a + y_b) % P.t, H.matvec_reference(w, (x_a + x_b) % P.t, P.t))


def test_messages_cross_as_bytes(client):
    """The client's keys and the server's reply survive crossfhe.io.bfv; the reply is still exact and masked,
    and its noise budget is left positive."""
    keys = io.bfv.loads(io.bfv.dumps(client.keys), params=P, expected=EvaluationKeys)
    w = np.random.default_rng(5).integers(0, P.t, size=(5, 17))
    server = bv.Server(P, w, keys, seed=seed("bytes"))
    r = client.random_vector(17)
    s, reply = server.respond(client.encrypt(r))
    cts = tuple(io.bfv.loads(io.bfv.dumps(ct), params=P, expected=Ciphertext) for ct in reply.ciphertexts)
    z = client.decrypt(H.HMVPResult(cts, reply.positions, reply.length))
    assert np.array_equal((z + s) % P.t, H.matvec_reference(w, r, P.t))
    assert not np.array_equal(z, H.matvec_reference(w, r, P.t))
    assert client.noise_budget(reply) > 0


def test_parties_hold_only_their_own_secrets(client):
    w, server = server_for(client, 5, 17, "secrets")
    assert holds(client, is_secret_key)
    assert not holds(server, is_secret_key)  # B never holds A's secret key
    assert not holds(client, lambda x: isinstance(x, H.EncodedMatrix))  # A never holds W
    ours, theirs = bv.generate_triples(client, server, 1)
    s = theirs[0].s
    assert not holds(client, lambda x: isinstance(x, np.ndarray) and x.shape == s.shape and np.array_equal(x, s))
    assert not holds(server, lambda x: isinstance(x, np.ndarray) and x.shape == (17,) and np.array_equal(x, ours[0].r))
    assert "SecretKey" not in repr(client) and "SecretKey" not in repr(server)


def test_beaver_errors(client):
    w, server = server_for(client, 5, 17, "errors")
    with pytest.raises(ParameterError, match="shape mismatch"):
        server.respond(client.encrypt(np.ones(16, dtype=np.int64)))
    with pytest.raises(ParameterError, match="shape mismatch"):
        bv.shared_matvec(client, server, np.ones(17, dtype=np.int64), np.ones(18, dtype=np.int64))
    with pytest.raises(ParameterError, match="count"):
        bv.generate_triples(client, server, 0)
    with pytest.raises(ParameterError, match=r"\[0, t\)"):
        bv.Server(P, np.full((2, 2), P.t), client.keys)
    with pytest.raises(ParameterError, match="other parameters"):
        bv.Server(LR_P, np.ones((2, 2), dtype=np.int64), client.keys)
    with pytest.raises(TypeError, match="EvaluationKeys"):
        bv.Server(P, np.ones((2, 2), dtype=np.int64), client._sk)
    with pytest.raises(ParameterError, match="shape mismatch"):
        bv.add_plain_vector(client.encrypt(np.ones(4, dtype=np.int64)), np.ones(5, dtype=np.int64))


# --------------------------------------------------------------------------------------------------
# HeteroLR
# --------------------------------------------------------------------------------------------------


def lr_data(n=300, d_a=5, d_b=7, seed_=0):
    rng = np.random.default_rng(seed_)
    x_a, x_b = rng.uniform(-1, 1, (n, d_a)), rng.uniform(-1, 1, (n, d_b))
    y = np.where(x_a[:, 0] + x_b[:, 0] + 0.3 * rng.normal(size=n) > 0, 1, -1)
    w_a, w_b = rng.normal(0, 0.2, d_a), rng.normal(0, 0.2, d_b)
    return x_a, x_b, y, w_a, w_b


@pytest.fixture(scope="module")
def arbiter():
    return lr.Arbiter(LR_P, seed=seed("arbiter"))


def test_lr_steps_match_the_fixed_point_reference(arbiter):
    """Two steps on 300 samples (> N: two column blocks), 5 + 7 features (the shapes keep the kernels
    compiled for the Beaver tests): the integer gradients equal the plaintext
    fixed-point ones exactly, the weights equal the plaintext step's bit for bit and stay within
    lr * error_bound of a float step, and the budget stays positive."""
    x_a, x_b, y, w_a, w_b = lr_data()
    assert FP.max_samples(LR_P.t) >= 300
    a = lr.FeatureHolder(x_a, arbiter.keys, FP, weights=w_a, seed=seed("A"))
    b = lr.LabelHolder(x_b, y, arbiter.keys, FP, weights=w_b, seed=seed("B"))
    lrate = 0.5
    for _ in range(2):
        before_a, before_b = a.weights.copy(), b.weights.copy()
        tr = lr.train_step(a, b, arbiter, learning_rate=lrate)
        ref_a, ref_b, g_a, g_b = lr.reference_step(x_a, x_b, y, before_a, before_b, FP, learning_rate=lrate)
        assert np.array_equal(tr.grad_a, g_a) and np.array_equal(tr.grad_b, g_b)
        assert np.array_equal(a.weights, ref_a) and np.array_equal(b.weights, ref_b)
        f_a, f_b = lr.float_gradients(x_a, x_b, y, before_a, before_b)
        bound = lrate * FP.error_bound()
        assert np.max(np.abs(a.weights - (before_a - lrate * f_a))) <= bound
        assert np.max(np.abs(b.weights - (before_b - lrate * f_b))) <= bound
        assert tr.noise_budget > 0
    assert lr.taylor_loss(x_a, x_b, y, a.weights, b.weights) < lr.taylor_loss(x_a, x_b, y, w_a, w_b)


def test_lr_parties_hold_only_their_own_secrets(arbiter):
    x_a, x_b, y, _, _ = lr_data(n=20)
    a = lr.FeatureHolder(x_a, arbiter.keys, FP)
    b = lr.LabelHolder(x_b, y, arbiter.keys, FP)
    assert holds(arbiter, is_secret_key)
    for party in (a, b):
        assert not holds(party, is_secret_key)
    assert not holds(arbiter, lambda v: isinstance(v, (H.EncodedMatrix, np.ndarray)))  # no features, no labels
    assert not holds(a, lambda v: isinstance(v, np.ndarray) and v.shape == y.shape and np.array_equal(v, y))
    assert not holds(a, lambda v: isinstance(v, np.ndarray) and v.shape == x_b.shape)


def test_masked_gradient_looks_uniform_to_the_arbiter(arbiter):
    """The arbiter's decryption is g + rho: two runs on the same data give unrelated values."""
    x_a, x_b, y, w_a, w_b = lr_data(n=20)
    a = lr.FeatureHolder(x_a, arbiter.keys, FP, weights=w_a, seed=seed("A1"))
    b = lr.LabelHolder(x_b, y, arbiter.keys, FP, weights=w_b, seed=seed("B1"))
    residual = b.residual(a.encrypted_margin())
    first = arbiter.decrypt(a.masked_gradient(residual))
    second = arbiter.decrypt(a.masked_gradient(residual))
    g_a, _ = lr.fixed_point_gradients(x_a, x_b, y, w_a, w_b, FP)
    assert not np.array_equal(first, second)
    assert np.array_equal(lr.centered((second - a._mask) % LR_P.t, LR_P.t), g_a)


def test_lr_errors(arbiter):
    x_a, x_b, y, _, _ = lr_data(n=20)
    keys = arbiter.keys
    with pytest.raises(ParameterError, match="labels"):
        lr.LabelHolder(x_b, np.zeros(20), keys, FP)
    with pytest.raises(ParameterError, match="shape mismatch"):
        lr.LabelHolder(x_b, y[:19], keys, FP)
    with pytest.raises(ParameterError, match="x_bound"):
        lr.FeatureHolder(2 * x_a, keys, FP)
    with pytest.raises(ParameterError, match="shape mismatch"):
        lr.FeatureHolder(x_a, keys, FP, weights=np.zeros(4))
    with pytest.raises(ParameterError, match="samples per step"):
        lr.FeatureHolder(np.zeros((FP.max_samples(LR_P.t) + 1, 2)), keys, FP)
    a = lr.FeatureHolder(x_a, keys, FP)
    b_short = lr.LabelHolder(x_b[:19], y[:19], keys, FP)
    with pytest.raises(ParameterError, match="shape mismatch"):
        lr.train_step(a, b_short, arbiter, learning_rate=0.1)
    with pytest.raises(ParameterError, match="shape mismatch"):
        b_short.residual(a.encrypted_margin())
    with pytest.raises(ParameterError, match="in flight"):
        a.update(np.zeros(5, dtype=np.int64), learning_rate=0.1)
    big = lr.FeatureHolder(x_a, keys, FP, weights=np.full(5, 10.0))
    with pytest.raises(ParameterError, match="u_bound"):
        big.encrypted_margin()
    with pytest.raises(ParameterError, match="frac_bits_x"):
        lr.FixedPoint(frac_bits_x=-1)


def test_fixed_point_check_matches_max_samples():
    for t in (LR_P.t, lr.LR_N4096.t, 2**20 + 7):
        n = FP.max_samples(t)
        FP.check(t, n)
        with pytest.raises(ParameterError):
            FP.check(t, n + 1)
    assert lr.LR_N4096.t == lr.LR_N8192.t == 2**30 - 35
    assert FP.max_samples(lr.LR_N4096.t) == 819


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 64),
    d_a=st.integers(1, 5),
    d_b=st.integers(1, 5),
    fx=st.integers(0, 12),
    fu=st.integers(0, 12),
    data_seed=st.integers(0, 2**32 - 1),
)
def test_fixed_point_gradient_error_is_within_the_bound(n, d_a, d_b, fx, fu, data_seed):
    """|g_int / (n S) - g_float| <= FixedPoint.error_bound() for any data within the bounds (plaintext)."""
    fp = lr.FixedPoint(frac_bits_x=fx, frac_bits_u=fu)
    rng = np.random.default_rng(data_seed)
    x_a, x_b = rng.uniform(-1, 1, (n, d_a)), rng.uniform(-1, 1, (n, d_b))
    y = rng.choice([-1, 1], n)
    w_a, w_b = rng.uniform(-0.8, 0.8, d_a) / d_a, rng.uniform(-0.8, 0.8, d_b) / d_b
    g_a, g_b = lr.fixed_point_gradients(x_a, x_b, y, w_a, w_b, fp)
    assert max(np.max(np.abs(g_a)), np.max(np.abs(g_b))) <= fp.gradient_max(n)
    f_a, f_b = lr.float_gradients(x_a, x_b, y, w_a, w_b)
    scale = n * fp.gradient_scale
    assert np.max(np.abs(g_a / scale - f_a)) <= fp.error_bound()
    assert np.max(np.abs(g_b / scale - f_b)) <= fp.error_bound()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["LR_N4096", "LR_N8192"])
def test_lr_step_at_128_bit_parameters(name):
    """One step at the 128-bit sets, 800 samples, 16 + 16 features: exact, budget positive (measured 11-12
    bits at N 4096, 72 at N 8192; module docstring)."""
    params = getattr(lr, name)
    x_a, x_b, y, w_a, w_b = lr_data(n=800, d_a=16, d_b=16)
    c = lr.Arbiter(params, seed=seed("c"))
    a = lr.FeatureHolder(x_a, c.keys, FP, weights=w_a, seed=seed("a"))
    b = lr.LabelHolder(x_b, y, c.keys, FP, weights=w_b, seed=seed("b"))
    tr = lr.train_step(a, b, c, learning_rate=0.5)
    _, _, g_a, g_b = lr.reference_step(x_a, x_b, y, w_a, w_b, FP, learning_rate=0.5)
    assert np.array_equal(tr.grad_a, g_a) and np.array_equal(tr.grad_b, g_b)
    assert tr.noise_budget >= (5 if name == "LR_N4096" else 50)
