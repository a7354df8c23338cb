"""CKKS operations on small insecure parameters: every result decrypts to the NumPy result within a
bound computed from the parameters; errors name the problem.

Error model used for the bounds (coefficients, then slots). Fresh public-key encryption leaves a phase
error v e + e0 + e1 s with coefficient variance V = (4/3 N + 1) sigma^2 (v, s uniform ternary); a slot is
a sum of N such coefficients times roots of unity, so its error has standard deviation sqrt(N V) / Delta.
We bound it by 7 standard deviations (a per-slot failure chance below 1e-11), plus the encoding rounding
N / (2 Delta). Products, rescales and key switches add terms stated where they are used.
"""

import math

import jax
import numpy as np
import pytest

from crossfhe.ckks import ops
from crossfhe.errors import BasisMismatchError, ParameterError
from crossfhe.kernels import MATRIX, NATIVE
from crossfhe.ring import ntt as ring_ntt
from crossfhe.testing import INSECURE_CKKS_N10, INSECURE_CKKS_N11_COMPOSITE

SIGMA = 3.19


def fresh_bound(params, scale=None):
    n = params.n
    scale = params.scale if scale is None else scale
    return 7 * math.sqrt(n * (4 / 3 * n + 1)) * SIGMA / scale + n / (2 * scale)


@pytest.fixture(scope="module", params=[INSECURE_CKKS_N10, INSECURE_CKKS_N11_COMPOSITE], ids=["N10", "N11-composite"])
def ctx(request):
    params = request.param
    rotations = [1, 3, -2] + ops.power_of_two_rotations(params)
    sk, ek = ops.keygen(params, rotations=rotations, conjugation=True, seed=bytes(range(32)))
    rng = np.random.default_rng(params.n)
    z = rng.uniform(-1, 1, params.slots) + 1j * rng.uniform(-1, 1, params.slots)
    w = rng.uniform(-1, 1, params.slots) + 1j * rng.uniform(-1, 1, params.slots)
    cz = ops.encrypt(ek, ops.encode(params, z))
    cw = ops.encrypt(ek, ops.encode(params, w))
    return params, sk, ek, z, w, cz, cw


def err(sk, ct, ref):
    return float(np.max(np.abs(ops.decode(ops.decrypt(sk, ct)) - ref)))


def test_encrypt_decrypt_public_and_secret(ctx):
    params, sk, ek, z, _, cz, _ = ctx
    assert err(sk, cz, z) <= fresh_bound(params)
    csk = ops.encrypt(sk, ops.encode(params, z))
    # Symmetric encryption: phase error e only, coefficient std sigma.
    assert err(sk, csk, z) <= 7 * math.sqrt(params.n) * SIGMA / params.scale + params.n / (2 * params.scale)
    assert cz.level == params.levels


def test_add_sub_neg_plain_scalar(ctx):
    params, sk, _, z, w, cz, cw = ctx
    b = 2 * fresh_bound(params)
    assert err(sk, ops.add(cz, cw), z + w) <= b
    assert err(sk, ops.sub(cz, cw), z - w) <= b
    assert err(sk, ops.negate(cz), -z) <= b / 2
    assert err(sk, ops.add_plain(cz, ops.encode(params, w)), z + w) <= b
    assert err(sk, ops.sub_plain(cz, ops.encode(params, w)), z - w) <= b
    assert err(sk, ops.add_scalar(cz, 1.25), z + 1.25) <= b
    assert err(sk, ops.add_scalar(cz, 0.5 - 2j), z + 0.5 - 2j) <= b
    assert err(sk, ops.mul_scalar(cz, 3), 3 * z) <= 3 * b


def rescale_bound(params, scale):
    """A rescale divides the error by q and adds the rounding of the division (|r| <= 1/2 per
    coefficient, times (1 + |s|) for both parts): at most (1 + N)/2 per coefficient, N (1 + N) / 2 per slot
    in the worst case; as in fresh_bound we use 7 standard deviations: 7 sqrt(N (1 + 2N/3) / 12)."""
    return 7 * math.sqrt(params.n * (1 + 2 * params.n / 3) / 12) * params.primes_per_level / scale


def test_mul_relinearize_rescale(ctx):
    params, sk, ek, z, w, cz, cw = ctx
    prod = ops.rescale(ops.mul(cz, cw, ek))
    assert prod.level == params.levels - 1
    f = fresh_bound(params)
    # |zw - (z + e1)(w + e2)| <= |z| e2 + |w| e1 + e1 e2, plus relinearization and rescale noise.
    bound = 2 * math.sqrt(2) * f + f * f + 2 * rescale_bound(params, prod.scale)
    assert err(sk, prod, z * w) <= bound
    assert abs(math.log2(prod.scale) - params.log_scale) < 0.01


def test_mul_plain_and_real_scalar(ctx):
    params, sk, _, z, w, cz, _ = ctx
    f = fresh_bound(params)
    pw = ops.rescale(ops.mul_plain(cz, ops.encode(params, w)))
    assert err(sk, pw, z * w) <= math.sqrt(2) * (f + params.n / params.scale) + 2 * rescale_bound(params, pw.scale)
    s = ops.rescale(ops.mul_scalar(cz, 0.37))
    assert s.scale == pytest.approx(cz.scale, rel=1e-15)  # the constant is encoded at the rescale primes
    assert err(sk, s, 0.37 * z) <= 0.37 * f + 2 * rescale_bound(params, s.scale)


def test_chain_exhausts_the_levels(ctx):
    params, sk, ek, z, _, cz, _ = ctx
    c, ref = cz, z
    for _ in range(params.levels):
        c = ops.rescale(ops.mul(c, cz, ek))
        ref = ref * z
    assert c.level == 0
    # Relative error grows by about the fresh error per multiplication; |ref| <= 2^(levels + 1) / 2.
    per_step = fresh_bound(params) + 4 * rescale_bound(params, c.scale)
    bound = (params.levels + 2) * 2 ** ((params.levels + 1) / 2) * per_step
    assert err(sk, c, ref) <= bound
    with pytest.raises(ParameterError, match="levels are exhausted"):
        ops.rescale(c)


def test_rotations_and_conjugation(ctx):
    params, sk, ek, z, _, cz, _ = ctx
    # Key switching adds a small multiple of the fresh error at these sizes (see test_keyswitch).
    b = 8 * fresh_bound(params)
    for k in (1, 3, -2, 4):
        assert err(sk, ops.rotate(cz, k, ek), np.roll(z, -k)) <= b, k
    assert err(sk, ops.conjugate(cz, ek), np.conj(z)) <= b
    assert err(sk, ops.sum_slots(cz, ek), np.full(params.slots, z.sum())) <= params.slots * b
    with pytest.raises(ParameterError, match="no Galois key for element"):
        ops.rotate(cz, 5, ek)


def test_levels_and_scales_align(ctx):
    params, sk, ek, z, w, cz, cw = ctx
    low = ops.rescale(ops.mul(cz, cw, ek))
    assert err(sk, ops.add(low, cz), z * w + z) <= 20 * fresh_bound(params)
    assert err(sk, ops.add(cz, low), z * w + z) <= 20 * fresh_bound(params)
    dropped = ops.drop_level(cz, 1)
    assert dropped.level == 1 and err(sk, dropped, z) <= fresh_bound(params)


def test_errors(ctx):
    params, sk, ek, z, _, cz, _ = ctx
    other = INSECURE_CKKS_N11_COMPOSITE if params is INSECURE_CKKS_N10 else INSECURE_CKKS_N10
    _, ek_other = ops.keygen(other, seed=bytes(32))
    with pytest.raises(BasisMismatchError, match="different parameter sets"):
        ops.add(cz, ops.encrypt(ek_other, ops.encode(other, z[: other.slots])))
    with pytest.raises(BasisMismatchError, match="different parameter sets"):
        ops.mul(cz, cz, ek_other)
    with pytest.raises(ParameterError, match="would overflow"):
        c = cz
        for _ in range(params.levels + 4):
            c = ops.mul(c, cz, ek)  # never rescaled: the scale outgrows Q
    with pytest.raises(ParameterError, match="cannot raise a level"):
        ops.drop_level(ops.drop_level(cz, 0), 1)


def test_user_jit_and_vmap(ctx):
    assert not jax.config.jax_enable_x64
    params, sk, ek, z, w, cz, cw = ctx
    eager = ops.rescale(ops.mul(ops.add(cz, cw), cw, ek))
    jitted = jax.jit(lambda a, b: ops.rescale(ops.mul(ops.add(a, b), b, ek)))(cz, cw)
    assert (np.asarray(jitted.c0.data) == np.asarray(eager.c0.data)).all()
    assert (np.asarray(jitted.c1.data) == np.asarray(eager.c1.data)).all()
    batch = jax.tree_util.tree_map(lambda x, y: np.stack([x, y]), cz, cw)
    rotated = jax.vmap(lambda c: ops.rotate(c, 1, ek))(batch)
    one = ops.rotate(cw, 1, ek)
    assert (np.asarray(rotated.c0.data[1]) == np.asarray(one.c0.data)).all()


def test_hoisted_rotations_equal_separate(ctx):
    params, sk, ek, z, _, cz, _ = ctx
    many = ops.rotate_many(cz, [1, 3, -2, 0], ek)
    assert many[0] is cz
    for k in (1, 3, -2):
        one = ops.rotate(cz, k, ek)
        # The permuted ModUp digits differ from ModUp of the permuted input only in the representative
        # chosen for each wrapped coefficient, so hoisting agrees with separate rotations within the
        # key-switching noise rather than bit for bit.
        assert err(sk, many[k], np.roll(z, -k)) <= 8 * fresh_bound(params)
        separate = ops.decode(ops.decrypt(sk, one))
        assert np.max(np.abs(ops.decode(ops.decrypt(sk, many[k])) - separate)) <= 16 * fresh_bound(params)


# NATIVE needs the native build (a C compiler at install); where it is missing the other cases still run, and
# test_ntt_native covers the missing build's message
_NATIVE_2 = pytest.param(2, NATIVE, marks=pytest.mark.skipif(not ring_ntt.NATIVE.available(),
                                                             reason="no native kernels (NATIVE's case only)"))


@pytest.mark.parametrize(("g", "kernels"), [(1, None), (2, None), (3, None), (2, MATRIX), _NATIVE_2])
def test_rescale_kernel_rounds_exactly(g, kernels):
    """The rescale kernel divides by the product D of the last g primes with one exact rounding:
    coefficient c becomes floor((x + (D - 1) / 2) / D) mod q_i, x in [0, Q) the CRT of the residues
    (Python integers), whatever g; extreme coefficients 0, Q - 1 and (D - 1) / 2 included. The MATRIX
    kernel set (4-step int8 NTTs) gives the same words, and so does NATIVE, whose plans read the rows of the
    chain's one table (keyswitch.level_ntt_plan)."""
    from crossfhe.ring.ntt import NTTPlan
    from crossfhe.ring.poly import Domain, RNSPoly, to_coeff, to_eval

    params = INSECURE_CKKS_N11_COMPOSITE
    moduli = params.moduli_at(params.levels)[:6]
    big_q, d = math.prod(moduli), math.prod(moduli[-g:])
    rnd = np.random.default_rng(g)
    xs = [int(v) for v in rnd.integers(0, 2**62, params.n).astype(object) * (big_q // 2**60) % big_q]
    xs[:3] = [0, big_q - 1, (d - 1) // 2]
    data = np.array([[x % m for x in xs] for m in moduli], dtype=np.uint32)
    p = to_eval(RNSPoly.create(data, moduli), NTTPlan.create(params.n, moduli))
    want = [[((x + (d - 1) // 2) // d) % m for x in xs] for m in moduli[:-g]]
    for out in ops._rescale_pair(p, p, g, kernels, params.q + params.p):
        assert out.basis == moduli[:-g] and out.domain == Domain.EVAL
        got = np.asarray(to_coeff(out, NTTPlan.create(params.n, moduli[:-g])).data)
        assert got.tolist() == want


def _words(ct):
    return np.asarray(ct.c0.data), np.asarray(ct.c1.data)


def test_combine_rescale_gives_the_words_of_its_steps(ctx):
    """combine_rescale (one program) equals the products, sums, constant and rescale it replaces, word for word,
    with terms at different levels, negative and zero coefficients; refuses a term below the level."""
    params, sk, ek, z, w, cz, cw = ctx
    level = params.levels - 1
    low = ops.drop_level(cw, level)
    scale = cz.scale * 5
    terms = [(cz, 5), (low, -7), (cz, 0), (low, 2**40 + 3)]
    got = ops.combine_rescale(terms, -0.75, level, scale)
    acc = None
    for x, c in terms:
        t = ops._mul_integer(ops.drop_level(x, level), c, scale)
        acc = t if acc is None else ops.add(acc, t)
    want = ops.rescale(ops.add_scalar(acc, -0.75))
    assert (got.level, got.scale) == (want.level, want.scale)
    for a, b in zip(_words(got), _words(want)):
        np.testing.assert_array_equal(a, b)
    # a relinearized product as the first term, in the same program
    fused = ops.combine_rescale([(cz, -3)], 0.25, level, cz.scale * cw.scale, product=(cz, low, ek, 2))
    prod = ops.mul(cz, low, ek)
    steps = ops.rescale(ops.add_scalar(ops.add(ops._mul_integer(prod, 2, prod.scale),
                                               ops._mul_integer(ops.drop_level(cz, level), -3, prod.scale)), 0.25))
    for a, b in zip(_words(fused), _words(steps)):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ParameterError, match="the product is at level"):
        ops.combine_rescale([], 0.0, level, cz.scale**2, product=(cz, cz, ek, 1))
    # with one scale for every product (3 Delta), the result decrypts to z - w + 0.5: each term's fresh error,
    # then the rescale's rounding
    one = ops.combine_rescale([(cz, 3), (low, -3)], 0.5, level, 3 * cz.scale)
    assert err(sk, one, z - w + 0.5) <= 2 * fresh_bound(params) + rescale_bound(params, one.scale)
    with pytest.raises(ParameterError, match="level >= "):
        ops.combine_rescale([(ops.drop_level(cw, level - 1), 1)], 0.0, level, scale)
    with pytest.raises(ParameterError, match="no terms"):
        ops.combine_rescale([], 0.0, level, scale)
