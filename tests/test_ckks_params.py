"""ckks/params.py: literal -> checked parameters, the level structure, and the errors."""

import math

import jax
import pytest

from crossfhe.ckks.params import Params, ParamsLiteral
from crossfhe.errors import InsecureParametersError, ParameterError
from crossfhe.math.primes import is_prime


def test_single_scaling_chain():
    p = Params.from_literal(ParamsLiteral(log_n=14, levels=7, log_scale=30, dnum=3))
    assert p.n == 2**14 and p.slots == 2**13 and p.primes_per_level == 1 and p.base_count == 2
    assert len(p.q) == 2 + 7 and len(set(p.q + p.p)) == len(p.q) + len(p.p)
    assert all(is_prime(x) and (x - 1) % (2 * p.n) == 0 for x in p.q + p.p)
    for x in p.q[p.base_count :]:
        assert abs(math.log2(x) - 30) < 0.01  # scale primes close to the scale
    assert p.log_pq <= 438
    assert p.moduli_at(7) == p.q and p.moduli_at(0) == p.q[:2] and p.level_of(5) == 3
    assert p.rescale_primes(3) == (p.q[4],)


def test_composite_scaling_chain():
    p = Params.from_literal(ParamsLiteral(log_n=12, levels=3, log_scale=50, insecure=True))
    assert p.primes_per_level == 2 and len(p.q) == p.base_count + 6
    for level in range(1, 4):
        a, b = p.rescale_primes(level)
        assert abs(math.log2(a * b) - 50) < 0.05  # each level's pair multiplies to about the scale


def test_params_hashable_static_and_digest_stable():
    lit = ParamsLiteral(log_n=10, levels=2, log_scale=30, insecure=True)
    a, b = Params.from_literal(lit), Params.from_literal(lit)
    assert a == b and hash(a) == hash(b) and a.digest() == b.digest()
    other = Params.from_literal(ParamsLiteral(log_n=10, levels=3, log_scale=30, insecure=True))
    assert other.digest() != a.digest()
    f = jax.jit(lambda x, params: x * params.levels, static_argnames=("params",))
    assert int(f(3, params=a)) == 6


def test_insecure_set_refused_with_bound():
    with pytest.raises(InsecureParametersError, match=r"438"):
        Params.from_literal(ParamsLiteral(log_n=14, levels=12, log_scale=30, dnum=1))
    assert Params.from_literal(ParamsLiteral(log_n=14, levels=12, log_scale=30, dnum=1, insecure=True)).ring.insecure


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(log_n=10, levels=0, log_scale=30), "levels"),
        (dict(log_n=10, levels=2, log_scale=70), "17-31 bits per prime"),
        (dict(log_n=10, levels=2, log_scale=30, primes_per_level=3), "primes_per_level"),
        (dict(log_n=10, levels=2, log_scale=30, dnum=9), "dnum"),
        (dict(log_n=10, levels=2, log_scale=30, base_bits=(29,)), "exceed the scale"),
        (dict(log_n=10, levels=2, log_scale=30, special_bits=(20,)), "special primes"),
        (dict(log_n=14, levels=8, log_scale=40), "not enough NTT-friendly primes near 2\\^20"),
        (dict(log_n=10, levels=2, log_scale=30, hamming_weight=5000), "hamming_weight"),
    ],
    ids=["no-levels", "scale-too-big", "ppl-3", "dnum-too-big", "base-below-scale", "small-P", "few-primes", "hw"],
)
def test_bad_literals(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        Params.from_literal(ParamsLiteral(insecure=True, **kwargs))
    with pytest.raises(ParameterError, match="level must be in"):
        Params.from_literal(ParamsLiteral(log_n=10, levels=2, log_scale=30, insecure=True)).moduli_at(3)


def test_presets_secure_and_insecure():
    import dataclasses

    from crossfhe.ckks import presets

    for name, p in presets.SECURE.items():
        bound = {12: 109, 13: 218, 14: 438, 15: 881, 16: 1747}[p.n.bit_length() - 1]
        assert not p.ring.insecure and p.log_pq <= bound, name
    for name, p in presets.INSECURE.items():
        assert p.ring.insecure and p.log_pq > 1747, name
    for lit in (presets.CROSS_SET6_LITERAL, presets.ALCHEMIST_LITERAL):
        with pytest.raises(InsecureParametersError, match="1747"):
            Params.from_literal(dataclasses.replace(lit, insecure=False))
