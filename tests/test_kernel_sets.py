"""The kernel sets give bit-identical ciphertexts: a representative operator of each scheme run on VECTOR
(radix-2), NATIVE (the CPU custom calls, where they are built) and MATRIX (CROSS MAT/BAT int8 matrix products),
same keys, same randomness.

The MATRIX set is slow on a CPU, so this is a small subset: CKKS multiply + rescale + rotation (hybrid
key switching, ModUp/ModDown, rescale NTTs), BFV multiply + row rotation (HPS basis extensions), TFHE
programmable bootstrapping (the blind rotation's external products), all on insecure test presets.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from crossfhe import testing
from crossfhe.bfv import ops as bfv
from crossfhe.ckks import ops as ckks
from crossfhe.errors import ParameterError
from crossfhe.kernels import AUTO, GPU, MATRIX, NATIVE, VECTOR, default_kernels, gpu_native
from crossfhe.math.random import seed_key
from crossfhe.ring import ntt as ring_ntt
from crossfhe.tfhe import ops as tfhe

# NATIVE needs the C/C++ build on a CPU backend; on a GPU machine or without a compiler it cannot run (the fallback is
# tests/test_ntt_native.py::test_fallback_without_compiler), so that case is skipped there, with the reason.
OTHERS = [pytest.param(MATRIX, id="matrix"), pytest.param(NATIVE, id="native", marks=pytest.mark.skipif(
    default_kernels() is not NATIVE, reason="no native CPU kernels here (a GPU backend, or no compiler)"))]
# GPU needs a CUDA device and nvcc: it runs in benchmarks/gpu_session.sh on a lent GPU (on a CPU its kernel's exactness
# is checked by tests/test_kernels_gpu.py through the CPU emulation of the same source)
_NO_GPU = f"no GPU kernels here: {gpu_native.status()}"
OTHERS.append(pytest.param(GPU, id="gpu", marks=pytest.mark.skipif(not gpu_native.available(), reason=_NO_GPU)))


def _same(x, y):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def _key(label: str):
    return seed_key(label.encode().ljust(32, b"."))


def test_with_kernels_keeps_the_digest_and_is_checked():
    p = testing.INSECURE_CKKS_N10
    m = p.with_kernels(MATRIX)
    assert p.kernels is AUTO and m.kernels == MATRIX and m != p
    assert m.digest() == p.digest() and m.with_kernels("auto") == p and p.with_kernels(NATIVE).kernels is NATIVE
    t = testing.INSECURE_TFHE_P2
    assert t.with_kernels(MATRIX).digest() == t.digest()
    assert testing.INSECURE_BFV_N256.with_kernels("matrix").kernels == MATRIX
    with pytest.raises(ParameterError, match="unknown kernel set"):
        p.with_kernels("tensor")


@pytest.mark.parametrize("other", OTHERS)
def test_ckks_mul_rescale_rotate_bit_identical(other):
    outs = []
    for params in (testing.INSECURE_CKKS_N10.with_kernels(VECTOR), testing.INSECURE_CKKS_N10.with_kernels(other)):
        sk, ek = ckks.keygen(params, rotations=[1, 3], seed=bytes(range(32)))
        rng = np.random.default_rng(0)
        z = rng.uniform(-1, 1, params.slots)
        w = rng.uniform(-1, 1, params.slots)
        cz = ckks.encrypt(ek, ckks.encode(params, z), key=_key("z"))
        cw = ckks.encrypt(ek, ckks.encode(params, w), key=_key("w"))
        prod = ckks.rescale(ckks.mul(cz, cw, ek))
        rot = ckks.rotate(prod, 1, ek)
        many = ckks.rotate_many(cz, [1, 3], ek)
        got = ckks.decode(ckks.decrypt(sk, rot)).real
        # Product error after relinearization and rescale, then a key switch: far below 2^-10 at scale 2^30.
        assert np.max(np.abs(got - np.roll(z * w, -1))) < 2**-10
        outs.append((prod, rot, many[3]))
    for a, b in zip(*outs, strict=True):
        _same(a.c0.data, b.c0.data)
        _same(a.c1.data, b.c1.data)


# slow: 90 s cold in CI; the kernel sets' equality runs by default on CKKS and TFHE, and BFV's NTTs and key switches
# are CKKS's
@pytest.mark.slow
@pytest.mark.parametrize("other", OTHERS)
def test_bfv_mul_rotate_bit_identical(other):
    outs = []
    for params in (testing.INSECURE_BFV_N256.with_kernels(VECTOR), testing.INSECURE_BFV_N256.with_kernels(other)):
        sk, ek = bfv.keygen(params, rotations=(1,), seed=bytes(32))
        rng = np.random.default_rng(1)
        a = rng.integers(0, params.t, (2, params.n // 2))
        b = rng.integers(0, params.t, (2, params.n // 2))
        ca = bfv.encrypt(ek, bfv.encode(params, a), key=_key("a"))
        cb = bfv.encrypt(ek, bfv.encode(params, b), key=_key("b"))
        prod = bfv.mul(ca, cb, ek)
        rot = bfv.rotate_rows(prod, 1, ek)
        np.testing.assert_array_equal(bfv.decode(bfv.decrypt(sk, rot)), np.roll(a * b % params.t, -1, axis=1))
        outs.append((prod, rot))
    for x, y in zip(*outs, strict=True):
        _same(x.c0.data, y.c0.data)
        _same(x.c1.data, y.c1.data)


def test_tfhe_pbs_bit_identical():
    # the key prepared for the NTT product: the blind rotation through the set's NTT (by default it goes through
    # the float64 FFT, which uses no kernel set)
    outs = []
    for params in (testing.INSECURE_TFHE_P2, testing.INSECURE_TFHE_P2.with_kernels(MATRIX)):
        ck, sk = tfhe.keygen(params, b"kernel-sets".ljust(32, b"\0"))
        m = np.arange(4)
        ct = tfhe.encrypt(ck, m, key=b"kernel-sets-ct".ljust(32, b"\0"))
        sk = tfhe.prepare(sk, product=tfhe.NTTProduct)
        assert sk.prepared.kernels == params.kernels.resolve()
        out = tfhe.pbs(sk, ct, lambda v: (3 * v + 1) % 4)
        np.testing.assert_array_equal(tfhe.decrypt(ck, out), (3 * m + 1) % 4)
        outs.append((sk, out))
    (sk_v, out_v), (sk_m, out_m) = outs
    _same(sk_v.bsk, sk_m.bsk)  # keys built on either set are the same words too
    _same(out_v.b, out_m.b)
    _same(out_v.a, out_m.a)


# slow (about 38 s on CI's 2 cores): HMVP runs the NTT and key switch whose kernel sets the CKKS and BFV tests
# above already compare bit for bit
@pytest.mark.slow
@pytest.mark.parametrize("other", OTHERS)
def test_hmvp_bit_identical(other):
    # CHAM's matrix-vector product: the dot products' NTTs and ModDown, then LWE packing's key switches.
    from crossfhe.linalg import hmvp as H

    outs = []
    base = testing.INSECURE_BFV_N256_COEFF
    for params in (base.with_kernels(VECTOR), base.with_kernels(other)):
        sk, ek = bfv.keygen(params, galois_elements=H.required_galois_elements(params), relin=False, seed=bytes(32))
        rng = np.random.default_rng(2)
        a = rng.integers(0, params.t, size=(5, 40))
        v = rng.integers(0, params.t, size=40)
        res = H.hmvp(H.encode_matrix(params, a), H.encrypt_vector(ek, params, v, key=_key("v")), ek)
        np.testing.assert_array_equal(H.decrypt_result(sk, res), H.matvec_reference(a, v, params.t))
        outs.append(res.ciphertexts[0])
    _same(outs[0].c0.data, outs[1].c0.data)
    _same(outs[0].c1.data, outs[1].c1.data)


def test_blobs_cross_kernel_sets():
    # The kernel set is not in the digest: a ciphertext saved on MATRIX loads under VECTOR parameters
    # (and takes them), and a blob loaded with no parameters comes back on AUTO (the process's default).
    from crossfhe.io import ckks as io_ckks

    vec = testing.INSECURE_CKKS_N10.with_kernels(VECTOR)
    mat = vec.with_kernels(MATRIX)
    _, ek = ckks.keygen(mat, seed=bytes(32))
    ct = ckks.encrypt(ek, ckks.encode(mat, np.ones(4)), key=_key("io"))
    blob = io_ckks.dumps(ct)
    back = io_ckks.loads(blob, params=vec)
    assert back.params.kernels is VECTOR and io_ckks.loads(blob).params.kernels is AUTO
    _same(back.c0.data, ct.c0.data)
    assert io_ckks.loads(io_ckks.dumps(back), params=mat).params.kernels == MATRIX


def test_the_environment_names_what_auto_stands_for(monkeypatch):
    # $CROSSFHE_KERNELS: the caller's choice for code left on AUTO, read once per process, checked like a name given
    # to a context; unset, the rule of default_kernels again
    from crossfhe.kernels import sets
    from crossfhe.math import native

    try:
        for value, want in (("vector", VECTOR), (" MATRIX ", MATRIX)):
            monkeypatch.setenv(sets.ENV, value)
            sets.default_kernels.cache_clear()
            assert sets.default_kernels() is want and AUTO.resolve() is want
        for value, match in (("tensor", "CROSSFHE_KERNELS: unknown kernel set 'tensor'"), ("auto", "not auto")):
            monkeypatch.setenv(sets.ENV, value)
            sets.default_kernels.cache_clear()
            with pytest.raises(ValueError, match=match):
                sets.default_kernels()
        monkeypatch.setenv(sets.ENV, "gpu")
        monkeypatch.setattr(gpu_native, "_cuda_device", lambda: "no CUDA device (a test)")
        native.reset_all()
        sets.default_kernels.cache_clear()
        with pytest.raises(RuntimeError, match=r"CROSSFHE_KERNELS=gpu needs the CUDA kernels.*no CUDA device"):
            sets.default_kernels()
    finally:
        monkeypatch.delenv(sets.ENV, raising=False)
        sets.default_kernels.cache_clear()
        native.reset_all()
    assert sets.default_kernels() is (NATIVE if ring_ntt.NATIVE.available() and jax.default_backend() == "cpu"
                                      else VECTOR)
