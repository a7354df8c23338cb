"""Soundness: no secret key in anything a user pickles, an honest check of sparse secrets, no silent wrong
answers from values at the modulus' limit. Each test reproduces a finding of the soundness issue."""

from __future__ import annotations

import copy
import math
import pickle

import numpy as np
import pytest

from crossfhe import CKKSContext, EncryptedVector
from crossfhe.bfv import Params as BFVParams
from crossfhe.bfv import ParamsLiteral as BFVLiteral
from crossfhe.bfv import ops as bfv
from crossfhe.ckks import Params, ParamsLiteral, ops, presets
from crossfhe.core.keys import gaussian_bound
from crossfhe.core.params import RingParams
from crossfhe.core.rlwe import fresh_noise_bound
from crossfhe.errors import InsecureParametersError, ParameterError, SecretMaterialError
from crossfhe.linalg import hmvp
from crossfhe.math.primes import ntt_primes
from crossfhe.ring import poly
from crossfhe.ring.ntt import NTTPlan
from crossfhe.ring.poly import Domain, RNSPoly
from crossfhe.testing import INSECURE_BFV_N1024_CHAM, INSECURE_CKKS_N10

SEED = bytes(range(7, 39))


@pytest.fixture(scope="module")
def ctx():
    return CKKSContext.create(INSECURE_CKKS_N10, rotations=[3], seed=SEED, insecure=True)


def _secret_patterns(sk) -> list[bytes]:
    """Byte strings whose presence in a pickle would mean the secret travelled: its int32 coefficients and
    each limb of its EVAL residues, as NumPy stores them."""
    coeffs = np.asarray(sk.coeffs)
    residues = np.asarray(sk.poly.data)
    return [coeffs.tobytes(), coeffs.astype(np.int64).tobytes()] + [limb.tobytes() for limb in residues]


def _assert_no_secret(obj, patterns) -> None:
    blob = pickle.dumps(obj)
    for pattern in patterns:
        assert pattern not in blob


# --------------------------------------------------------------------------------------------------
# 1. Keys never travel by accident
# --------------------------------------------------------------------------------------------------


def test_public_ckks_objects_pickle_without_secret(ctx):
    patterns = _secret_patterns(ctx.secret_key)
    x = ctx.encrypt(np.linspace(-1, 1, 5))
    y = x * x
    pt = ops.encode(ctx.params, np.ones(4))
    keys = ctx.keys
    objects = [ctx.params, ctx.public, keys, keys.public, keys.relin, *keys.galois.values(), x, [x, y], x.ct, pt]
    for obj in objects:
        _assert_no_secret(obj, patterns)
    back = pickle.loads(pickle.dumps([x, y]))
    assert back[0].ctx.key_id == ctx.key_id
    got = ctx.decrypt(back[0] + back[1])
    want = np.linspace(-1, 1, 5) + np.linspace(-1, 1, 5) ** 2
    assert np.max(np.abs(got - want)) < 1e-4


def test_secret_holders_refuse_pickle(ctx):
    for obj, where in ((ctx, "save_secret_key(ctx.secret_key"), (ctx.secret_key, "save_secret_key(sk")):
        with pytest.raises(SecretMaterialError, match="crossfhe.io") as info:
            pickle.dumps(obj)
        assert where in str(info.value)
    # Copies stay in the process: allowed, and the same immutable object.
    assert copy.deepcopy(ctx) is ctx and copy.copy(ctx.secret_key) is ctx.secret_key


def test_bfv_public_objects_pickle_without_secret():
    params = INSECURE_BFV_N1024_CHAM
    sk, keys = bfv.keygen(params, galois_elements=hmvp.required_galois_elements(params), seed=SEED)
    patterns = _secret_patterns(sk)
    ct = bfv.encrypt(keys, bfv.encode(params, np.arange(params.n) % params.t))
    vec = hmvp.encrypt_vector(keys, params, np.arange(10))
    for obj in (params, keys, keys.public, keys.relin, ct, vec):
        _assert_no_secret(obj, patterns)
    with pytest.raises(SecretMaterialError):
        pickle.dumps(sk)


def test_vector_serialize_load_keeps_shape(ctx):
    z = np.array([1 + 2j, -0.5j, 0.25])
    x = ctx.encrypt(z)
    blob = x.serialize()
    back = EncryptedVector.load(ctx.public, blob)
    assert (back.length, back.width, back.complex, back.level) == (3, 4, True, x.level)
    assert np.max(np.abs(ctx.decrypt(back) - z)) < 1e-5
    assert ctx.encrypt([2.0]).serialize() != blob
    # The public context travels as evaluation keys; vectors loaded under it combine with the originals.
    public = type(ctx.public).load(ctx.public.serialize())
    assert public.key_id == ctx.key_id
    got = ctx.decrypt(EncryptedVector.load(public, blob) + x)
    assert np.max(np.abs(got - 2 * z)) < 1e-5
    for pattern in _secret_patterns(ctx.secret_key):
        assert pattern not in ctx.public.serialize() and pattern not in blob


# --------------------------------------------------------------------------------------------------
# 2. Sparse secrets
# --------------------------------------------------------------------------------------------------

WEIGHT_ONE = dict(log_n=12, levels=1, log_scale=25, base_bits=(31,), dnum=2, hamming_weight=1)


def _recover_weight_one(pk, n: int) -> np.ndarray:
    """The secret +-X^i of a weight-1 key from its public key alone: b + a s = e is small for exactly one of
    the 2N candidates (checked on the first prime, in the coefficient domain)."""
    q = pk.b.basis[0]
    plan = NTTPlan.create(n, (q,))
    b, a = (np.asarray(poly.to_coeff(RNSPoly(x.data[:1], (q,), Domain.EVAL), plan).data[0]).astype(np.int64)
            for x in (pk.b, pk.a))
    found = []
    for i in range(n):
        shifted = np.concatenate([-a[n - i :], a[: n - i]])  # a X^i in Z_q[X]/(X^N + 1)
        for sign in (1, -1):
            e = (b + sign * shifted) % q
            e = np.where(e > q // 2, e - q, e)
            if np.max(np.abs(e)) <= gaussian_bound():
                found.append((i, sign))
    assert len(found) == 1
    (i, sign), = found
    s = np.zeros(n, dtype=np.int32)
    s[i] = sign
    return s


def test_weight_one_secret_is_recovered_and_refused():
    with pytest.raises(InsecureParametersError, match="Hamming weight 1") as info:
        Params.from_literal(ParamsLiteral(**WEIGHT_ONE))
    assert "insecure=True" in str(info.value)
    with pytest.raises(InsecureParametersError, match="Hamming weight 1"):
        BFVParams.from_literal(BFVLiteral(log_n=12, q_bits=(27, 27, 27), p_bits=(27,), plain_bits=20, dnum=3,
                                          hamming_weight=1))
    params = Params.from_literal(ParamsLiteral(**WEIGHT_ONE, insecure=True))
    sk, ek = ops.keygen(params, seed=SEED)
    assert np.array_equal(_recover_weight_one(ek.public, params.n), np.asarray(sk.coeffs))


def test_sparse_secret_accepted_only_under_an_estimate():
    q16 = ntt_primes(31, 2**16, 50)  # 1550 bits: within the h = 192 estimate at N 2^16 (1553)
    RingParams(n=2**16, q=q16, hamming_weight=192)
    RingParams(n=2**16, q=q16, hamming_weight=20000)  # any weight above an estimate's
    for h in (191, 64):  # covered by the h = 32 estimate of bootstrapping's ephemeral secret: log PQ <= 121 only
        with pytest.raises(InsecureParametersError, match="log2\\(PQ\\) <= 121"):
            RingParams(n=2**16, q=q16, hamming_weight=h)
    RingParams(n=2**16, q=q16[:3], hamming_weight=32)  # 93 bits: under the h = 32 estimate
    with pytest.raises(InsecureParametersError, match="Hamming weight 31 at N = 65536 has no published"):
        RingParams(n=2**16, q=q16[:3], hamming_weight=31)
    with pytest.raises(InsecureParametersError, match="exceeds the 128-bit security bound log2\\(PQ\\) <= 1553"):
        RingParams(n=2**16, q=q16 + ntt_primes(30, 2**16, 1, exclude=q16), hamming_weight=192)
    with pytest.raises(InsecureParametersError, match="no published 128-bit estimate"):
        RingParams(n=2**14, q=ntt_primes(30, 2**14, 2), hamming_weight=192)  # no estimate at N 2^14
    assert RingParams(n=2**14, q=ntt_primes(30, 2**14, 2), hamming_weight=192, insecure=True).hamming_weight == 192


# --------------------------------------------------------------------------------------------------
# 3. Range: values at the limit, scalars
# --------------------------------------------------------------------------------------------------


def _top53(x: int) -> int:
    """x with all but its 53 leading bits cleared: a float64 below or at x."""
    shift = max(0, x.bit_length() - 53)
    return (x >> shift) << shift


def _limits(params, level):
    """(the largest constant that encodes at ``level``, the next float64 above it, which is refused, and
    (Q - 1)/2), the constants as exact float64 multiples of 1 / scale."""
    half = (math.prod(params.moduli_at(level)) - 1) // 2
    room = half - fresh_noise_bound(params.n)
    ok = _top53(room)
    above = ok + (1 << max(0, room.bit_length() - 53))
    return ok / params.scale, above / params.scale, half


# Level 0 of every preset, and the top level where its limit is a float64 (above, no value reaches it).
LIMIT_CASES = [(name, level) for name, p in presets.SECURE.items() for level in sorted({0, p.levels})
               if math.prod(p.moduli_at(level)).bit_length() < 1000]


@pytest.mark.parametrize(("name", "level"), LIMIT_CASES, ids=[f"{n}/level={lv}" for n, lv in LIMIT_CASES])
def test_encode_refuses_values_without_room_for_noise(name, level):
    params = presets.SECURE[name]
    ok, above, half = _limits(params, level)
    ops.encode(params, [ok], level=level)
    ops.encode(params, [-ok], level=level)
    with pytest.raises(ParameterError, match="fresh-encryption noise bound"):
        ops.encode(params, [above], level=level)
    if half - _top53(half) < fresh_noise_bound(params.n):  # a float in the noise's reach of Q/2, accepted before
        with pytest.raises(ParameterError, match="fresh-encryption noise bound"):
            ops.encode(params, [_top53(half) / params.scale], level=level)


@pytest.mark.parametrize(("name", "level"), [("N12_L1", 0), ("N12_L1", 1), ("N13_L3", 0)])
def test_values_at_the_limit_decrypt_with_their_sign(name, level):
    """Before the fix, 30-90% of encryptions of the largest accepted constant came back negated."""
    params = presets.SECURE[name]
    sk, ek = ops.keygen(params, seed=SEED)
    ok, _, _ = _limits(params, level)
    values = np.array([[ok], [-ok]] * 16)
    got = ops.decode(ops.decrypt(sk, ops.encrypt(ek, ops.encode(params, values, level=level))))[:, 0].real
    assert np.all(np.sign(got) == np.sign(values[:, 0]))
    assert np.max(np.abs(got - values[:, 0])) <= 2 * fresh_noise_bound(params.n) / params.scale


@pytest.fixture(scope="module")
def n12():
    return CKKSContext.create(presets.N12_L1, seed=SEED, insecure=True)


def test_scalars_out_of_range_are_refused(n12):
    x = n12.encrypt(np.linspace(-1, 1, 8))
    for bad in (lambda: x + 1e40, lambda: x - 1e40, lambda: x * 1e40, lambda: x * 2**140, lambda: x * -(2**80),
                lambda: x + 1e40j, lambda: x * (1e40 + 1j)):
        with pytest.raises(ParameterError, match="wrap|overflow"):
            bad()
    for bad in (float("nan"), float("inf"), -float("inf"), complex(float("nan"), 0)):
        with pytest.raises(ParameterError, match="finite"):
            x + bad
        with pytest.raises(ParameterError, match="finite"):
            x * bad
    # In range they work, up to the largest constant that leaves the product room at this level.
    got = n12.decrypt(x * 7 + 3.5)
    assert np.max(np.abs(got - (7 * np.linspace(-1, 1, 8) + 3.5))) < 1e-2


def test_add_scalar_at_its_limit(n12):
    params = n12.params
    x = n12.encrypt(np.zeros(4))
    half = (math.prod(params.moduli_at(x.level)) - 1) // 2
    ok = _top53(half - fresh_noise_bound(params.n)) / params.scale
    assert np.all(n12.decrypt(x + ok) > 0)
    with pytest.raises(ParameterError, match="add_scalar"):
        x + _top53(half) / params.scale
