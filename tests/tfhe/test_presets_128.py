"""The 2^-128 presets P2_128, P4_128 and P6_128: the model's failure probability, the security check, the key
sizes against TFHE-rs's 2^-128 KS-PBS sets of the same width, the kernel route, and one real bootstrap each
(marked slow where keys and compilation take over ~20 s)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from crossfhe.tfhe import ops, params, presets

NEW = ("P2_128", "P4_128", "P6_128")
SIBLING = {"P2_128": "P2", "P4_128": "P4", "P6_128": "P6"}

TFHERS_2M128_KEY_BYTES = {"P2_128": 133_439_344, "P4_128": 120_419_192, "P6_128": 917_966_328}
"""TFHE-rs 1.8.2 server-key sizes (bincode) of V1_8_PARAM_MESSAGE_{1,2,3}_CARRY_{1,2,3}_KS_PBS_TUNIFORM_2M128, as
the harness in benchmarks/tfhers_peer reports them (benchmarks/search_tfhe_params.TFHERS_2M128)."""


@pytest.mark.parametrize("name", NEW)
def test_registered_with_sibling_width(name):
    prm = presets.PRESETS[name]
    assert prm is getattr(presets, name)
    assert prm.name == name
    assert prm.message_bits == presets.PRESETS[SIBLING[name]].message_bits
    assert prm.norm2 == 2**prm.message_bits + 1


def test_existing_presets_kept():
    assert {"P2", "P4", "P6", "P8", "P10"} <= set(presets.PRESETS)
    for name in ("P2", "P4", "P6", "P8", "P10"):
        assert presets.PRESETS[name].log2_p_fail() <= -64
    # with the centered modulus switch P6's own parameters meet 2^-128: P6_128 is P6 under that name
    assert presets.P6_128.digest() == presets.P6.digest() and presets.P6_128.name != presets.P6.name


@pytest.mark.parametrize("name", NEW)
def test_p_fail_at_most_2m128(name):
    prm = presets.PRESETS[name]
    assert prm.log2_p_fail() <= -128.0
    assert prm.log2_p_fail(prm.norm2) <= -128.0
    assert prm.fft_kernel  # the FFT's rounding is in that p_fail


@pytest.mark.parametrize("name", NEW)
def test_security_check(name):
    prm = presets.PRESETS[name]
    assert not prm.insecure
    lwe_rate = np.log2(prm.lwe_sigma) - params.KS_MODULUS_BITS
    glwe_rate = np.log2(prm.glwe_sigma) - prm.log_q
    assert params.lwe_is_published_secure(prm.lwe_dim, lwe_rate)
    assert params.lwe_is_published_secure(prm.long_dim, glwe_rate)
    # rebuilding it runs Params.__post_init__'s check again; a noisier-than-published key would be refused
    dataclasses.replace(prm)
    with pytest.raises(params.InsecureParametersError):
        dataclasses.replace(prm, lwe_sigma=prm.lwe_sigma / 2)


@pytest.mark.parametrize("name", NEW)
def test_keys_no_larger_than_tfhers(name):
    prm = presets.PRESETS[name]
    assert prm.bsk_bytes + prm.ksk_bytes <= TFHERS_2M128_KEY_BYTES[name]


EXPECTED_SIZES = {
    "P2_128": (76_873_728, 19_218_432),  # 391 groups x 3 GGSWs of 2 x 2 polynomials; 2048 x 3 LWEs of 782 words
    "P4_128": (96_141_312, 24_035_328),  # 489 groups x 3 GGSWs of 2 x 2 polynomials; 2048 x 3 LWEs of 978 words
    "P6_128": (192_282_624, 48_070_656),  # P6's: l = 2; KSK 2048 x 6 x 978 words
}
"""(BSK, KSK) bytes (``Params.bsk_bytes``, ``ksk_bytes``)."""


def test_key_sizes():
    sizes = {n: (presets.PRESETS[n].bsk_bytes, presets.PRESETS[n].ksk_bytes) for n in NEW}
    assert sizes == EXPECTED_SIZES


def _seed(name: str) -> bytes:
    return f"presets-128-{name}".encode().ljust(32, b"\0")


def _check_pbs(name: str) -> None:
    prm = presets.PRESETS[name]
    p = prm.message_bits
    ck, sk = ops.keygen(prm, _seed(name))
    m = np.arange(2**p) if p <= 4 else np.random.default_rng(6).permutation(2**p)[:8]
    f = lambda x: (x * x + 3 * x + 1) % 2**p  # noqa: E731
    out = ops.pbs(sk, ops.encrypt(ck, m, key=_seed(name + "-ct")), ops.lookup_table(prm, f))
    np.testing.assert_array_equal(ops.decrypt(ck, out), f(m))


@pytest.mark.slow
def test_pbs_p2_128():
    _check_pbs("P2_128")


@pytest.mark.slow
def test_pbs_p4_128():
    _check_pbs("P4_128")


@pytest.mark.slow
def test_pbs_p6_128():
    _check_pbs("P6_128")
