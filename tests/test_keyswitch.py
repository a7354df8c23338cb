"""core/keys.py and core/keyswitch.py: key relations checked through exact CRT (Python big integers), hybrid
key switching within its noise bound for several dnum and levels, bit-exact with the plain ModUp / MAC /
ModDown pipeline of math/rns.py, under jit and vmap; mismatches raise named errors.

Insecure test ring: N = 2^10, six 30-bit ciphertext primes, two 31-bit special primes (P ~ 2^62).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crossfhe.core import keys as K
from crossfhe.core import keyswitch as KS
from crossfhe.core.params import RingParams, RingParamsLiteral
from crossfhe.errors import BasisMismatchError, DomainMismatchError, ParameterError
from crossfhe.math import random as R
from crossfhe.math.rns import ModDownPlan, ModUpPlan, RNSBasis, compose, mod_down, mod_up
from crossfhe.ring import poly as P
from crossfhe.ring.ntt import NTTPlan, intt, ntt

PARAMS = RingParams.from_literal(RingParamsLiteral(log_n=10, q_bits=(30,) * 6, p_bits=(31, 31), insecure=True))
N, Q, PP = PARAMS.n, PARAMS.q, PARAMS.p
L = len(Q)
B_E = K.gaussian_bound(K.SIGMA)


def _key(i: int) -> R.ChaChaKey:
    return R.seed_key(bytes([i]) * 32)


def _centered(poly: P.RNSPoly) -> np.ndarray:
    """Centered integer coefficients (object array) of an RNSPoly in either domain, by exact CRT."""
    if poly.domain == P.Domain.EVAL:
        poly = P.to_coeff(poly, NTTPlan.create(poly.n, poly.basis))
    return compose(np.asarray(poly.data), RNSBasis(poly.basis), centered=True)


def _max_abs(x) -> int:
    return max(abs(int(v)) for v in np.ravel(x))


@jax.jit
def _residual(u0, u1, d, s, s_from):
    return u0 + u1 * s - d * s_from


@jax.jit
def _decrypt(b, a, s):
    return b + a * s


def _switch_error(u0, u1, d, s, s_from) -> int:
    """||u0 + u1 s - d s'||_inf, centered mod Q_k (EVAL-domain ring arithmetic, then exact CRT)."""
    return _max_abs(_centered(_residual(u0, u1, d, s, s_from)))


@pytest.fixture(scope="module")
def sk():
    return K.gen_secret_key(PARAMS, _key(1))


@pytest.fixture(scope="module")
def relin_keys(sk):
    cache = {}

    def get(dnum):
        if dnum not in cache:
            cache[dnum] = KS.gen_relin_key(sk, PARAMS, _key(10 + dnum), dnum=dnum)
        return cache[dnum]

    return get


def _random_d(seed: int, active: int) -> P.RNSPoly:
    return K.sample_uniform(_key(seed), Q[:active], N, domain=P.Domain.EVAL)


# --------------------------------------------------------------------------------------------------
# Secret and public keys
# --------------------------------------------------------------------------------------------------


def test_secret_key_is_ternary_with_consistent_residues(sk):
    s = np.asarray(sk.coeffs)
    assert s.shape == (N,) and set(np.unique(s)) <= {-1, 0, 1}
    assert sk.poly.domain == P.Domain.EVAL and sk.poly.basis == Q + PP
    assert (_centered(sk.poly) == s.astype(object)).all()
    assert (np.asarray(sk.residues(Q[:3]).data) == np.asarray(sk.poly.data[:3])).all()
    assert "coeffs" not in repr(sk) and str(s[:4]) not in repr(sk)


def test_secret_key_with_hamming_weight():
    sk_h = K.gen_secret_key(PARAMS, _key(2), hamming_weight=64)
    s = np.asarray(sk_h.coeffs)
    assert np.count_nonzero(s) == 64 and set(np.unique(s)) <= {-1, 0, 1}
    assert (_centered(sk_h.poly) == s.astype(object)).all()
    with pytest.raises(ParameterError, match="hamming_weight"):
        K.gen_secret_key(PARAMS, _key(2), hamming_weight=N + 1)


def test_public_key_relation_and_seed(sk):
    pk = K.gen_public_key(sk, PARAMS, _key(3))
    assert pk.b.basis == Q + PP and pk.b.domain == P.Domain.EVAL
    e = _centered(_decrypt(pk.b, pk.a, sk.residues(Q + PP)))
    assert 0 < _max_abs(e) <= B_E
    a = K.sample_uniform(pk.seed, Q + PP, N, domain=P.Domain.EVAL)
    assert (np.asarray(a.data) == np.asarray(pk.a.data)).all()


def test_samplers_shapes_domains_and_ranges():
    basis = Q[:4]
    u = K.sample_uniform(_key(4), basis, N, domain=P.Domain.COEFF)
    assert u.data.shape == (4, N) and u.domain == P.Domain.COEFF
    assert (np.asarray(u.data) < np.array(basis, dtype=np.uint32).reshape(-1, 1)).all()
    g = K.sample_gaussian(_key(5), basis, N)
    assert g.domain == P.Domain.COEFF and 0 < _max_abs(_centered(g)) <= B_E
    g_eval = K.sample_gaussian(_key(5), basis, N, domain=P.Domain.EVAL)
    assert (_centered(g_eval) == _centered(g)).all()
    t = K.sample_ternary(_key(6), basis, N)
    assert _max_abs(_centered(t)) == 1


# --------------------------------------------------------------------------------------------------
# Key-switching keys
# --------------------------------------------------------------------------------------------------


def test_keyswitch_key_relation_per_digit(sk, relin_keys):
    """b_j + a_j s - P g_j s^2 = e_j (mod Q_L P), |e_j| <= ceil(13 sigma), for each digit j (dnum = 3)."""
    ksk = relin_keys(3)
    assert ksk.digits == 3 and ksk.b.data.shape == (3, L + len(PP), N)
    qp = Q + PP
    big_p = math.prod(PP)
    s2 = _centered(sk.poly * sk.poly)
    for j, (start, stop) in enumerate(KS.digit_groups(L, 3)):
        g = math.prod(Q) // math.prod(Q[start:stop])  # g_j = (Q/D_j) [(Q/D_j)^-1]_{D_j}: 1 mod D_j, 0 mod the rest
        g *= pow(g, -1, math.prod(Q[start:stop]))
        b = P.RNSPoly(ksk.b.data[j], qp, P.Domain.EVAL)
        a = P.RNSPoly(ksk.a.data[j], qp, P.Domain.EVAL)
        lhs = _centered(_decrypt(b, a, sk.poly))
        big_qp = math.prod(qp)
        e = [(int(x) - big_p * g * int(y)) % big_qp for x, y in zip(lhs, s2)]
        e = [x - big_qp if x > big_qp // 2 else x for x in e]
        assert 0 < _max_abs(e) <= B_E, j
    a = KS.expand_keyswitch_a(ksk.seed, qp, N, ksk.digits)
    assert (np.asarray(a.data) == np.asarray(ksk.a.data)).all()


# --------------------------------------------------------------------------------------------------
# Key switching: noise
# --------------------------------------------------------------------------------------------------

CASES = [(1, 6), (2, 6), (3, 6), (6, 6), (2, 4)]  # (dnum, active); dnum 6: 6 digits, more than 4 per mac_reduce


@pytest.mark.parametrize("dnum,active", CASES, ids=[f"logN=10/L={L}/dnum={d}/k={k}" for d, k in CASES])
def test_relinearization_within_bound(sk, relin_keys, dnum, active):
    ksk = relin_keys(dnum)
    plan = KS.keyswitch_plan(ksk, active=active)
    d = _random_d(20 + active, active)
    u0, u1 = KS.keyswitch(d, ksk, plan=plan)
    assert u0.basis == u1.basis == Q[:active] and u0.domain == u1.domain == P.Domain.EVAL
    s = sk.residues(Q[:active])
    measured = _switch_error(u0, u1, d, s, s * s)
    bound = KS.keyswitch_noise_bound(N, Q[:active], PP, dnum, q_limbs=L)
    assert measured <= bound
    if dnum >= 2:
        assert bound < math.prod(Q[:active]) // 2  # the bound says something
    if dnum >= 3:  # P >= every digit: the error is a few hundred at most
        assert bound < 2**17 and measured < 2**10


def test_galois_key_checked_with_big_integers(sk):
    """keyswitch with the key of X -> X^5, checked entirely on integer coefficients: s(X^5) from s's
    coefficients, negacyclic products by schoolbook convolution of Python ints."""
    ksk = KS.gen_galois_key(sk, PARAMS, _key(30), 5, dnum=2)
    plan = KS.keyswitch_plan(ksk, active=L)
    d = _random_d(31, L)
    u0, u1 = KS.keyswitch(d, ksk, plan=plan)
    s = np.asarray(sk.coeffs).astype(object)
    s5 = np.zeros(N, dtype=object)
    for i in range(N):  # X^i -> X^(5i) = (-1)^floor(5i / N) X^(5i mod N)
        s5[5 * i % N] += s[i] * (-1) ** (5 * i // N % 2)

    def negacyclic(a, b):
        full = np.convolve(a, b)
        return full[:N] - np.concatenate([full[N:], [0]])

    big_q = math.prod(Q)
    e = (_centered(u0) + negacyclic(_centered(u1), s) - negacyclic(_centered(d), s5)) % big_q
    e = np.where(e > big_q // 2, e - big_q, e)
    assert _max_abs(e) <= KS.keyswitch_noise_bound(N, Q, PP, 2)


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 255))
def test_random_inputs_within_bound(sk, relin_keys, seed):
    ksk = relin_keys(3)
    d = K.sample_uniform(R.fold_in(_key(40), seed), Q, N)
    u0, u1 = KS.keyswitch(d, ksk, plan=KS.keyswitch_plan(ksk))
    s = sk.residues(Q)
    assert _switch_error(u0, u1, d, s, s * s) <= KS.keyswitch_noise_bound(N, Q, PP, 3)


def test_noise_bound_formula():
    q, p = (101, 103, 107, 109), (113,)
    x = [101 * 103 * 2 - 103 - 101, 107 * 109 * 2 - 109 - 107]  # digits {101, 103}, {107, 109}
    want = math.floor(math.ceil(13 * 3.19) * 16 * sum(x) / 113 + 17 * 112 / 113)
    assert KS.keyswitch_noise_bound(16, q, p, 2) == want
    assert KS.keyswitch_noise_bound(16, q, p, 2, hamming_weight=4) < want
    assert KS.keyswitch_noise_bound(16, q[:3], p, 2, q_limbs=4) < want  # digit {107} at 3 limbs
    with pytest.raises(ParameterError, match="dnum"):
        KS.keyswitch_noise_bound(16, q, p, 5)


# --------------------------------------------------------------------------------------------------
# Key switching: exactness, jit, vmap
# --------------------------------------------------------------------------------------------------


def _plain_keyswitch(d: P.RNSPoly, ksk: KS.KeySwitchKey, active: int):
    """The textbook pipeline from math/rns.py: INTT, ModUp per digit, NTT, MAC, INTT, ModDown, NTT."""
    q_basis, p_basis = RNSBasis(Q[:active]), RNSBasis(PP)
    target = q_basis.concat(p_basis)
    plan_q, plan_qp = NTTPlan.create(N, q_basis.moduli), NTTPlan.create(N, target.moduli)
    rows = list(range(active)) + list(range(L, L + len(PP)))
    x = intt(d.data, plan_q)
    acc = None
    for j, (start, stop) in enumerate(KS.digit_groups(L, ksk.dnum, active)):
        y = P.RNSPoly(
            ntt(mod_up(x[start:stop], ModUpPlan.create(q_basis.sub(start, stop), target, centered=True)), plan_qp),
            target.moduli,
            P.Domain.EVAL,
        )
        b = P.RNSPoly(ksk.b.data[j][np.array(rows)], target.moduli, P.Domain.EVAL)
        a = P.RNSPoly(ksk.a.data[j][np.array(rows)], target.moduli, P.Domain.EVAL)
        term = (y * b, y * a)
        acc = term if acc is None else (acc[0] + term[0], acc[1] + term[1])
    down = ModDownPlan.create(q_basis, p_basis, exact=True)
    return tuple(ntt(mod_down(intt(c.data, plan_qp), down), plan_q) for c in acc)


def test_bit_exact_with_plain_pipeline(relin_keys):
    """dnum 2 at 4 of 6 limbs: digits {q0, q1, q2} and {q3} (the second cut by the level)."""
    dnum, active = 2, 4
    ksk = relin_keys(dnum)
    d = _random_d(20 + active, active)
    u0, u1 = KS.keyswitch(d, ksk, plan=KS.keyswitch_plan(ksk, active=active))
    w0, w1 = _plain_keyswitch(d, ksk, active)
    assert (np.asarray(u0.data) == np.asarray(w0)).all()
    assert (np.asarray(u1.data) == np.asarray(w1)).all()


def test_user_jit_vmap_and_coefficient_input(relin_keys):
    """A user's jit (x64 off) of a vmap over a batch of COEFF-domain inputs, with the key and plan passed as
    pytree arguments, gives the same words as one EVAL-domain call per input."""
    ksk = relin_keys(2)
    plan = KS.keyswitch_plan(ksk)
    assert not jax.config.jax_enable_x64
    ds = [_random_d(50 + i, L) for i in range(3)]
    plan_q = NTTPlan.create(N, Q)
    batch = P.RNSPoly(jnp.stack([P.to_coeff(d, plan_q).data for d in ds]), Q, P.Domain.COEFF)

    @jax.jit
    def switch_all(d, key, pl):
        return jax.vmap(lambda x: KS.keyswitch(x, key, plan=pl))(d)

    u0s, u1s = switch_all(batch, ksk, plan)
    assert u0s.data.shape == (3, L, N) and u0s.domain == P.Domain.EVAL
    for i, d in enumerate(ds):
        u0, u1 = KS.keyswitch(d, ksk, plan=plan)
        assert (np.asarray(u0s.data[i]) == np.asarray(u0.data)).all()
        assert (np.asarray(u1s.data[i]) == np.asarray(u1.data)).all()


# --------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------


def test_errors_name_the_mismatch(sk, relin_keys):
    ksk = relin_keys(2)
    plan = KS.keyswitch_plan(ksk)
    with pytest.raises(BasisMismatchError, match="N = 512"):
        KS.keyswitch(K.sample_uniform(_key(60), Q, 512), ksk, plan=plan)
    with pytest.raises(BasisMismatchError, match="active limbs"):
        KS.keyswitch(K.sample_uniform(_key(60), Q[1:] + PP[:1], N), ksk, plan=plan)
    with pytest.raises(BasisMismatchError, match="active=3"):  # a lower-level d with the top-level plan
        KS.keyswitch(_random_d(61, 3), ksk, plan=plan)
    with pytest.raises(BasisMismatchError, match="dnum"):  # a key for another digit split
        KS.keyswitch(_random_d(61, L), ksk, plan=KS.keyswitch_plan(PARAMS, dnum=3))
    other = RingParams(n=N, q=Q[:5], p=PP, insecure=True)
    with pytest.raises(BasisMismatchError, match="secret key"):
        KS.gen_relin_key(sk, other, _key(62), dnum=2)
    with pytest.raises(ParameterError, match=r"dnum = 7 must be in \[1, L\]"):
        KS.gen_relin_key(sk, PARAMS, _key(62), dnum=7)
    with pytest.raises(ParameterError, match="dnum"):
        KS.keyswitch_plan(PARAMS, dnum=7)
    with pytest.raises(ParameterError, match="dnum is needed"):
        KS.keyswitch_plan(PARAMS)
    with pytest.raises(DomainMismatchError):
        KS.gen_keyswitch_key(sk, P.to_coeff(sk.poly, NTTPlan.create(N, Q + PP)), PARAMS, _key(63), dnum=2)
    with pytest.raises(BasisMismatchError, match="s_from"):
        KS.gen_keyswitch_key(sk, sk.residues(Q), PARAMS, _key(63), dnum=2)
    with pytest.raises(ParameterError, match="odd"):
        KS.gen_galois_key(sk, PARAMS, _key(64), 4, dnum=2)
    no_p = RingParams(n=N, q=Q, insecure=True)
    with pytest.raises(ParameterError, match="special prime"):
        KS.gen_relin_key(K.gen_secret_key(no_p, _key(65)), no_p, _key(66), dnum=2)
    with pytest.raises(TypeError, match="n, q, p"):
        K.gen_secret_key(object(), _key(67))


def test_mod_down_with_coefficient_noise_is_mod_down_of_the_sum():
    """mod_down_eval(c, e=e) (e in the coefficient domain, added without a transform) gives the same
    words as mod_down_eval(c + NTT(e)), e Gaussian over Q_k ∪ P, on a batch of two."""
    k = 4
    moduli = Q[:k] + PP
    plan = NTTPlan.create(N, moduli)
    down = ModDownPlan.create(RNSBasis(Q[:k]), RNSBasis(PP), exact=True)
    ntt_q, ntt_p = NTTPlan.create(N, Q[:k]), NTTPlan.create(N, PP)
    c = K.sample_uniform(_key(40), moduli, N, batch=(2,)).data
    e = K.sample_gaussian(_key(41), moduli, N, batch=(2,)).data
    got = jax.jit(KS.mod_down_eval)(c, down, ntt_q, ntt_p, e)
    summed = P.add(P.RNSPoly(c, moduli, P.Domain.EVAL), P.RNSPoly(ntt(e, plan), moduli, P.Domain.EVAL)).data
    want = jax.jit(KS.mod_down_eval)(summed, down, ntt_q, ntt_p)
    assert np.array_equal(np.asarray(got), np.asarray(want))


# slow: 41 s cold in CI; the kernel sets' bit equality of key switches runs by default in tests/test_kernel_sets.py
@pytest.mark.slow
def test_native_kernel_set_equals_vector(relin_keys, sk):
    """Key switching on the NATIVE kernel set (the NTTs as the CPU custom calls, inside the one program) gives the
    VECTOR words, for EVAL and COEFF inputs, a batch axis, hoisted Galois key switches, and under a user's jit."""
    from crossfhe.kernels import NATIVE, VECTOR, default_kernels

    if default_kernels() is not NATIVE:  # the custom calls are CPU-only and need a compiler (VECTOR is tested above)
        pytest.skip("no native CPU kernels here (a GPU backend, or no compiler)")
    dnum, active = 2, 5
    ksk = relin_keys(dnum)
    d = _random_d(40, active)
    batch = P.RNSPoly(jnp.stack([d.data, d.data[::-1]]), d.basis, d.domain)
    coeff = P.to_coeff(d, NTTPlan.create(N, d.basis))
    elements = (5, 2 * N - 1)
    gks = [KS.gen_galois_key(sk, PARAMS, _key(50 + i), g, dnum=dnum) for i, g in enumerate(elements)]
    out = []
    for kernels in (VECTOR, NATIVE):
        plan = KS.keyswitch_plan(ksk, active=active, kernels=kernels)
        gplan = KS.keyswitch_plan(gks[0], active=active, kernels=kernels)
        got = [KS.keyswitch(x, ksk, plan=plan) for x in (d, batch, coeff)]
        got += KS.keyswitch_hoisted(d, gks, elements, plan=gplan)
        got.append(jax.jit(lambda x, k, p: KS.keyswitch(x, k, plan=p))(d, ksk, plan))
        out.append(got)
    for (w0, w1), (u0, u1) in zip(*out, strict=True):
        assert (np.asarray(u0.data) == np.asarray(w0.data)).all()
        assert (np.asarray(u1.data) == np.asarray(w1.data)).all()


def test_native_keygen_gives_the_vector_words(sk):
    """A key made on the NATIVE kernel set (its a from the native sampler) has the VECTOR key's words, and its seed
    re-expands to its a on either set."""
    from crossfhe.kernels import NATIVE, VECTOR, default_kernels

    if default_kernels() is not NATIVE:  # the custom calls are CPU-only and need a compiler
        pytest.skip("no native CPU kernels here (a GPU backend, or no compiler)")
    keys = [KS.gen_relin_key(sk, PARAMS.with_kernels(k), _key(60), dnum=2) for k in (VECTOR, NATIVE)]
    for part in ("b", "a"):
        assert np.array_equal(np.asarray(getattr(keys[0], part).data), np.asarray(getattr(keys[1], part).data))
    moduli, digits = keys[1].q + keys[1].p, keys[1].a.data.shape[0]
    for k in (VECTOR, NATIVE):
        again = KS.expand_keyswitch_a(keys[1].seed, moduli, N, digits, k)
        assert np.array_equal(np.asarray(again.data), np.asarray(keys[1].a.data))


def test_compact_key_switches_give_the_same_words(sk):
    """A compact key (a kept as its seed, made at each use: the native sampler's rows on NATIVE, a full expansion on
    VECTOR) switches to the words of the whole key at every level, alone and hoisted; it holds half the memory, its
    blob is the whole key's, and expand() gives the whole key back."""
    from crossfhe.io import _common as io_common
    from crossfhe.kernels import NATIVE, VECTOR, default_kernels

    ksk = KS.gen_relin_key(sk, PARAMS, _key(61), dnum=3)
    small = KS.compact(ksk)
    assert small.compact and not ksk.compact and KS.compact(small) is small
    assert small.nbytes() * 2 == ksk.nbytes() and "compact" in repr(small)
    rng = np.random.default_rng(9)
    sets = (VECTOR, NATIVE) if default_kernels() is NATIVE else (VECTOR,)  # NATIVE: CPU with a compiler only
    for kernels in sets:
        for active in (L, 4, 1):
            d = P.RNSPoly.create(jnp.asarray(np.stack([rng.integers(0, q, N) for q in Q[:active]]).astype(np.uint32)),
                                 Q[:active], P.Domain.EVAL)
            plan = KS.keyswitch_plan(ksk, active=active, kernels=kernels)
            want = KS.keyswitch(d, ksk, plan=plan)
            got = KS.keyswitch(d, small, plan=plan)
            assert all(np.array_equal(np.asarray(a.data), np.asarray(b.data)) for a, b in zip(want, got))
            hoisted = KS.keyswitch_hoisted(d, [small, ksk], [1, 1], plan=plan)
            for pair in hoisted:
                assert all(np.array_equal(np.asarray(a.data), np.asarray(b.data)) for a, b in zip(want, pair))
    whole = KS.expand(small)
    assert np.array_equal(np.asarray(whole.a.data), np.asarray(ksk.a.data))
    meta, arrays = io_common._ksk_parts(small, PARAMS, "k.")
    meta_full, arrays_full = io_common._ksk_parts(ksk, PARAMS, "k.")
    assert meta == meta_full and arrays.keys() == arrays_full.keys()
    assert all(np.array_equal(arrays[k], arrays_full[k]) for k in arrays)
    with pytest.raises(TypeError, match="KeySwitchKey"):
        KS.compact(ksk.b)


def test_native_levels_share_one_chain_table(relin_keys):
    """On the NATIVE set every level's ModUp reads the rows of one NTT plan over the whole chain Q_L ∪ P (no copy of
    a digit's targets per level); the other sets keep a plan of their own per level."""
    from crossfhe.kernels import NATIVE, VECTOR, default_kernels

    if default_kernels() is not NATIVE:  # the custom calls are CPU-only and need a compiler
        pytest.skip("no native CPU kernels here (a GPU backend, or no compiler)")
    ksk = relin_keys(2)
    top, low = (KS.keyswitch_plan(ksk, active=a, kernels=NATIVE) for a in (len(ksk.q), 3))
    chain = KS.chain_ntt_plan(N, ksk.q + ksk.p, NATIVE)
    for plan in (top, low):
        assert plan.up.ntt.w is chain.w and plan.up.ntt.table_moduli == ksk.q + ksk.p
    vector = KS.keyswitch_plan(ksk, active=3, kernels=VECTOR)
    assert vector.up.ntt.table_moduli is None and vector.up.ntt.w.shape[0] == vector.up.ntt.limbs


@pytest.mark.parametrize("digits", [3, 5])
def test_native_mac_digits_gives_the_exact_sums(digits):
    """ring.ntt.native_mac_digits: sum_j Y_j b_j and sum_j Y_j a_j mod q_l (Python integers), the digits read through
    ymap from two operands and the key's rows through brow / arow; 5 digits cross a run of four products (the carried
    residue); moduli near 2^31 and a small one; a batch axis, under jit and vmap; bad row indices are refused."""
    from crossfhe.kernels import NATIVE, default_kernels
    from crossfhe.ring.ntt import native_mac_digits

    if default_kernels() is not NATIVE:  # the custom call is CPU-only and needs a compiler (the XLA path is tested)
        pytest.skip("no native CPU kernels here (a GPU backend, or no compiler)")
    rng = np.random.default_rng(digits)
    n, rows = 4096 + 24, 6
    r1 = digits * rows - 10
    q = np.array([2**31 - 1, 2**31 - 19, 40961, 2**28 + 3, 1_000_003, 2**30 + 3], dtype=np.uint64)
    ymap = rng.permutation(digits * rows).astype(np.int32).reshape(digits, rows)  # each source row read once
    src = np.zeros((2, digits * rows, n), dtype=np.uint64)
    for j in range(digits):
        for l_ in range(rows):
            src[:, ymap[j, l_]] = rng.integers(0, int(q[l_]), (2, n), dtype=np.uint64)
    y1, y2 = src[:, :r1], src[:, r1:]
    ys = src[:, ymap, :]  # [2, digits, rows, n]
    brow = np.array([5, 0, 3, 1, 7, 2], dtype=np.int32)  # key rows 4 and 6 unused
    b = rng.integers(0, 7, (digits + 1, 8, n), dtype=np.uint64)
    for l_ in range(rows):
        b[:, brow[l_]] = rng.integers(0, int(q[l_]), (digits + 1, n), dtype=np.uint64)
    a = rng.integers(0, 2**62, (digits, rows, n), dtype=np.uint64) % q[None, :, None]
    arow = np.arange(rows, dtype=np.int32)
    qo = q.astype(object)[None, :, None]
    want_b = sum(ys[:, j].astype(object) * b[j, brow].astype(object)[None] for j in range(digits)) % qo
    want_a = sum(ys[:, j].astype(object) * a[j].astype(object)[None] for j in range(digits)) % qo
    u32 = lambda x: jnp.asarray(np.asarray(x).astype(np.uint32))  # noqa: E731
    f = jax.jit(lambda y1, y2, b, a: native_mac_digits(y1, y2, ymap, b, a, brow, arow, u32(q)))
    got = np.asarray(f(u32(y1), u32(y2), u32(b), u32(a)))
    assert got.shape == (2, 2, rows, n)
    assert np.array_equal(got[:, 0].astype(object), want_b) and np.array_equal(got[:, 1].astype(object), want_a)
    one = jax.vmap(f, in_axes=(0, 0, None, None))(u32(y1), u32(y2), u32(b), u32(a))
    assert np.array_equal(np.asarray(one), got)
    with pytest.raises(RuntimeError, match="out of range"):  # XLA's runtime error carries the handler's message
        bad = ymap + digits * rows
        jax.block_until_ready(native_mac_digits(u32(y1), u32(y2), bad, u32(b), u32(a), brow, arow, u32(q)))
