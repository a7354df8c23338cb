"""The native CPU kernel of the grouped FFT blind rotation (crossfhe.kernels.cpu_native: tfhe_fft.c as an XLA FFI
custom call): its FFT against NumPy's, its words against the XLA kernel's where both are exact (eagerly, under
jit, vmap and scan), its rounding against the noise model, bootstraps through it (the NATIVE kernel set), the
choice of kernel as a value, and the build (cache, refusal, fallback without a compiler)."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
from fractions import Fraction
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from crossfhe import testing
from crossfhe.core import fourier as F
from crossfhe.core import ggsw as G
from crossfhe.core.blind_rotation import PRODUCTS, FFTProduct, NativeProduct, blind_rotate
from crossfhe.core.lwe import LWECiphertext
from crossfhe.errors import ParameterError
from crossfhe.kernels import NATIVE, VECTOR, cpu_native, default_kernels
from crossfhe.math import native, primes
from crossfhe.math.decompose import Gadget, RNSGadgetPlan
from crossfhe.math.modular import ModulusTable
from crossfhe.math.rns import RNSBasis
from crossfhe.ring import ntt as ring_ntt
from crossfhe.ring.ntt import NTTPlan, ntt
from crossfhe.tfhe import ops
from crossfhe.tfhe.params import make

PG = testing.INSECURE_TFHE_P4_G2
CPU = jax.devices("cpu")[0]

# The kernel is built with the machine's C/C++ compilers; where none is installed the library runs the XLA
# kernel (test_fallback_without_compiler checks that path everywhere). The kernel itself runs on the CPU device
# whatever the default backend; bootstraps through it need the NATIVE set as the default (a CPU backend).
needs_kernel = pytest.mark.skipif(not cpu_native.available(), reason=f"no native kernel: {cpu_native.status()}")
needs_native_set = pytest.mark.skipif(
    not cpu_native.available() or default_kernels() is not NATIVE,
    reason="NATIVE is the default kernel set only on a CPU backend with the native build",
)


def _seed(i: int) -> bytes:
    return bytes([i]) * 32


def _same(x: LWECiphertext, y: LWECiphertext) -> None:
    np.testing.assert_array_equal(np.asarray(x.b), np.asarray(y.b))
    np.testing.assert_array_equal(np.asarray(x.a), np.asarray(y.a))


@pytest.fixture
def fresh_native(monkeypatch):
    """The loaders' state (and the default kernel set) forgotten before and after: a test that changes the
    environment of the build."""
    cpu_native.reset()
    default_kernels.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    cpu_native.reset()
    default_kernels.cache_clear()


# --------------------------------------------------------------------------------------------------
# the transform
# --------------------------------------------------------------------------------------------------


@needs_kernel
@pytest.mark.parametrize("h", [8, 64, 256, 1024, 2048])
def test_fft_is_the_dft_in_its_slot_order(h):
    """fft_forward (the kernel's FFT, a custom call) is NumPy's DFT up to a fixed permutation of the slots
    (slot_order), to float64 rounding (bound 1e-14 of the largest value), and fft_inverse undoes it (times h)."""
    rng = np.random.default_rng(h)
    order = cpu_native.slot_order(h)
    assert np.array_equal(np.sort(order), np.arange(h))
    x = rng.standard_normal((3, h)) + 1j * rng.standard_normal((3, h))
    want = np.fft.fft(x)
    got = cpu_native.fft_forward(x)
    assert np.abs(got - want[:, order]).max() <= 1e-14 * np.abs(want).max()
    assert np.abs(cpu_native.fft_inverse(got) / h - x).max() <= 1e-14 * np.abs(x).max()


# --------------------------------------------------------------------------------------------------
# the blind rotation against the XLA kernel
# --------------------------------------------------------------------------------------------------


def _rotation_inputs(n, glwe_dim, gadget, g, nu, groups, batch, rng, key_bits):
    """Residue accumulator [B, 2^nu, k+1, L, N], exponents [B, G, T] in [0, 2^(nu+1) N), and Fourier keys
    [G, T, R, k+1, N/2] of centered integers below 2^key_bits (small keys: every product exact in float64)."""
    moduli = tuple(primes.ntt_primes(31, n, 2))
    q_big = math.prod(moduli)
    k1, t_count = glwe_dim + 1, (1 << g) - 1
    words = rng.integers(0, q_big, size=(batch, 1 << nu, k1, n), dtype=np.uint64)
    acc = np.stack([(words % q).astype(np.uint32) for q in moduli], axis=-2)
    exps = rng.integers(0, 2 * (n << nu), size=(batch, groups, t_count)).astype(np.int32)
    coeff = rng.integers(-(2**key_bits), 2**key_bits, size=(groups, t_count, k1 * gadget.levels, k1, n))
    res = np.stack([(coeff % q).astype(np.uint32) for q in moduli], axis=-2)
    return moduli, acc, exps, F.ggsw_to_fourier(res, moduli)


def _native_operands(keys_f, plan):
    """The native kernel's key, plan and tables (on the CPU device, where the custom call runs)."""
    tables = F.NativeTables.create(plan)
    with jax.enable_x64(True):
        key = jnp.asarray(F.native_key(keys_f, tables))
        fplan = jax.tree_util.tree_map(jnp.asarray, plan)
    return key, fplan, tables


EXACT_CASES = [(2048, 1, Gadget(23, 1), 2, 0), (1024, 1, Gadget(16, 2), 2, 0), (512, 2, Gadget(23, 1), 2, 0),
               (256, 1, Gadget(15, 4), 3, 0), (256, 1, Gadget(16, 2), 2, 2), (64, 1, Gadget(23, 1), 3, 4)]


@needs_kernel
@pytest.mark.parametrize("n, glwe_dim, gadget, g, nu", EXACT_CASES)
def test_rotation_equals_xla_kernel_on_exact_products(n, glwe_dim, gadget, g, nu):
    """On keys small enough that every product is exact in float64, both kernels round the same exact integers:
    the native rotation's words (blind_rotate with NativeProduct: one custom call under jax.jit, on the CPU) equal
    the XLA FFT's (blind_rotate with FFTProduct, on the default backend), over 3 steps and a batch of 2 (P4's
    shape, two digit levels, k = 2 (the generic product loop), a 4 x 15-bit gadget with g = 3, and accumulators of
    4 and 16 components, the extended rotation of P6 and P8). The 4 x 15-bit gadget has B^l = 2^60 > 2^53: its
    scaled digit values are not integers before rounding, and both kernels round them once (rint;
    test_digits_are_one_rounding_of_the_product)."""
    rng = np.random.default_rng(n + g + nu)
    moduli, acc, exps, keys_f = _rotation_inputs(n, glwe_dim, gadget, g, nu, 3, 2, rng, key_bits=8)
    with jax.enable_x64(True):
        plan = F.FourierPlan.create(n, moduli, gadget, glwe_dim)
        want = np.asarray(jax.jit(blind_rotate)(jnp.asarray(acc), jnp.asarray(exps), jnp.asarray(keys_f),
                                                FFTProduct(plan)))
    with jax.default_device(CPU):
        key, fplan, tables = _native_operands(keys_f, plan)
        with jax.enable_x64(True):
            got = np.asarray(jax.jit(blind_rotate)(jnp.asarray(acc), jnp.asarray(exps), key,
                                                   NativeProduct(fplan, tables)))
    np.testing.assert_array_equal(got, want)


@needs_kernel
def test_rotation_under_vmap_and_scan():
    """The custom call under jax.vmap (batched accumulators and exponents; a shared accumulator against batched
    exponents, which the handler broadcasts; nested vmaps) and lax.scan (one group per step) gives the words of
    the XLA kernel on the same batching, exact products (4 components, g = 2)."""
    n, gadget, g, nu = 256, Gadget(16, 2), 2, 2
    rng = np.random.default_rng(7)
    moduli, acc, exps, keys_f = _rotation_inputs(n, 1, gadget, g, nu, 3, 4, rng, key_bits=8)
    acc4, exps4 = acc.reshape((4, 1) + acc.shape[1:]), exps.reshape((4, 1) + exps.shape[1:])
    with jax.enable_x64(True):
        plan = F.FourierPlan.create(n, moduli, gadget, 1)
        xla = jax.jit(blind_rotate)
        want = np.asarray(xla(jnp.asarray(acc), jnp.asarray(exps), jnp.asarray(keys_f), FFTProduct(plan)))
        want_shared = np.stack([np.asarray(xla(jnp.asarray(acc[:1]), jnp.asarray(e[None]), jnp.asarray(keys_f),
                                               FFTProduct(plan)))[0] for e in exps])
    with jax.default_device(CPU):
        key, fplan, tables = _native_operands(keys_f, plan)
        native = NativeProduct(fplan, tables)
        with jax.enable_x64(True):
            def rot(a, e):
                return blind_rotate(a, e, key, native)

            got = jax.jit(jax.vmap(rot))(jnp.asarray(acc4), jnp.asarray(exps4))
            np.testing.assert_array_equal(np.asarray(got).reshape(want.shape), want)
            shared = jax.vmap(rot, in_axes=(None, 0))(jnp.asarray(acc[:1]), jnp.asarray(exps4))
            np.testing.assert_array_equal(np.asarray(shared)[:, 0], want_shared)
            nested = jax.vmap(jax.vmap(rot))(jnp.asarray(acc4.reshape((2, 2) + acc4.shape[1:])),
                                             jnp.asarray(exps4.reshape((2, 2) + exps4.shape[1:])))
            np.testing.assert_array_equal(np.asarray(nested).reshape(want.shape), want)

            def step(a, xs):
                e, k = xs
                return blind_rotate(a, e[:, None], k[None], native), None

            scanned, _ = jax.lax.scan(step, jnp.asarray(acc), (jnp.moveaxis(jnp.asarray(exps), 1, 0), key))
            np.testing.assert_array_equal(np.asarray(scanned), want)


def test_digits_are_one_rounding_of_the_product():
    """F.gadget_digits (on the default backend) takes v = rint(x_c scale): its digits equal NumPy's from np.rint of
    the float64 product, also for a gadget with B^l = 2^60, where the product is above 2^53 and not an integer.
    The formula floor(x_c scale + 0.5) it replaces rounds the sum once more, or not where a compiler contracts it
    into one FMA (XLA:CPU and GCC do; XLA's GPU build did not, and every word of the native output differed from
    the XLA kernel's on an H100 at this gadget): the two differ for a few coefficients in a hundred at
    B^l = 2^60, and never at B^l = 2^32 (checked here with exact rationals); one digit changed changes every word
    of an external product."""
    n = 256
    moduli = tuple(primes.ntt_primes(31, n, 2))
    q_big = math.prod(moduli)
    rng = np.random.default_rng(3)
    words = rng.integers(0, q_big, size=(4, n), dtype=np.uint64)
    for gadget, fma_rate in ((Gadget(15, 4), (0.003, 0.1)), (Gadget(16, 2), (0.0, 0.0))):
        with jax.enable_x64(True):
            plan = F.FourierPlan.create(n, moduli, gadget, 1)
            got = np.asarray(jax.jit(F.gadget_digits)(jnp.asarray(words), plan))
        xc = np.where(words > q_big // 2, words.astype(np.int64) - np.int64(q_big), words.astype(np.int64))
        v = np.rint(xc.astype(np.float64) * plan.scale)
        base, digits = float(gadget.base), []
        for _ in range(gadget.levels - 1):
            hi = np.floor(v / base + 0.5)
            digits.append(v - hi * base)
            v = hi
        digits.append(v - np.floor(v / base + 0.5) * base if plan.scale != 1.0 else v)
        np.testing.assert_array_equal(got, np.stack(digits[::-1], axis=-2))
        flat = [float(x) for x in xc.reshape(-1)]
        exact = [Fraction(x) * Fraction(plan.scale) for x in flat]
        differ = sum(math.floor(float(p) + 0.5) != math.floor(float(p + Fraction(1, 2))) for p in exact)
        assert fma_rate[0] <= differ / len(flat) <= fma_rate[1], (gadget, differ)


@needs_kernel
def test_group_step_error_within_model():
    """The native group step minus the exact NTT group step, on keys uniform mod Q (as key rows are): the
    rounding's variance (relative to Q) is at most the model's 2 (2^g - 1) var_fft and above a fifth of it, as
    for the XLA kernel (test_grouping.test_fft_group_step_error_within_model, same setup; g = 2, N 1024, 23-bit
    digits, 4 x 2 x 1024 coefficients)."""
    n, g, gadget = 1024, 2, Gadget(23, 1)
    rng = np.random.default_rng(30)
    moduli = tuple(primes.ntt_primes(31, n, 2))
    acc = np.stack([rng.integers(0, q, size=(4, 1, 2, n)) for q in moduli], axis=-2).astype(np.uint32)
    exps = rng.integers(0, 2 * n, size=(4, 3)).astype(np.int32)
    table = ModulusTable.create(moduli)
    mac = (table.q, table.barrett_mu, table.bits, table.mont_qinv, table.mont_r2)
    plan, gplan = NTTPlan.create(n, moduli, None), RNSGadgetPlan.create(RNSBasis(moduli), gadget)
    big = rng.integers(0, 2**62, size=(3, 2, 2, n), dtype=np.int64)
    keys = np.stack([(big % q).astype(np.uint32) for q in moduli], axis=-2)  # [T, R, k+1, L, N]
    exact = jax.jit(G.group_step)(jnp.asarray(acc), jnp.asarray(exps), ntt(jnp.asarray(keys), plan), plan, gplan, mac)
    with jax.enable_x64(True):
        fplan = F.FourierPlan.create(n, moduli, gadget, 1)
    with jax.default_device(CPU):
        key, fp, tables = _native_operands(F.ggsw_to_fourier(keys, moduli)[None], fplan)
        with jax.enable_x64(True):
            out = np.asarray(jax.jit(blind_rotate)(jnp.asarray(acc), jnp.asarray(exps[:, None]), key,
                                                   NativeProduct(fp, tables)))
    qcol = np.array(moduli, dtype=np.int64)[:, None]
    diff = (out.astype(np.int64) - np.asarray(exact).astype(np.int64)) % qcol
    err = F.centered_float(diff.astype(np.uint32), moduli) / math.prod(moduli)
    params = make(3, lwe_dim=16, glwe_dim=1, poly_size=n, glwe_log2_rate=-40.0, lwe_log2_rate=-20.0,
                  pbs=(23, 1), ks=(4, 5), insecure=True, grouping=g)
    bound = 2 * ((1 << g) - 1) * params.var_fft
    measured = float(np.mean(err**2))
    assert bound / 5 <= measured <= bound, (measured / bound, measured, bound)


@needs_kernel
def test_bad_operands_refused():
    """The handler checks sizes and src's range before running (an error of the call, not a wrong answer)."""
    n = 64
    moduli = tuple(primes.ntt_primes(31, n, 2))
    with jax.enable_x64(True):
        plan = F.FourierPlan.create(n, moduli, Gadget(23, 1), 1)
    with jax.default_device(CPU):
        tables = F.NativeTables.create(plan)
        with jax.enable_x64(True):
            key = jnp.zeros((2, n // 2 // cpu_native.BLOCK, 3, 2, 2, 2, cpu_native.BLOCK))
            words, moves = jnp.zeros((1, 1, 2, n), jnp.uint64), jnp.zeros((1, 2, 1, 3), jnp.int32)

            def call(w, s, p, k):
                return np.asarray(cpu_native.blind_rotate(
                    w, s, p, k, tables.tw, tables.twist, tables.roots, tables.zeta, tables.order, target=tables.target,
                    levels=1, base_log=23, scale=plan.scale, q=plan.modulus, inv_q=1.0 / plan.big_qf))

            assert not call(words, moves, moves, key).any()  # zero keys: words unchanged
            with pytest.raises(Exception, match="do not match"):
                call(words, moves, moves, key[:1])
            with pytest.raises(Exception, match="src must index"):
                call(jnp.zeros((1, 4, 2, n), jnp.uint64), jnp.full((1, 2, 4, 3), 4, jnp.int32),
                     jnp.zeros((1, 2, 4, 3), jnp.int32), key)


# --------------------------------------------------------------------------------------------------
# bootstraps on the NATIVE kernel set
# --------------------------------------------------------------------------------------------------


@needs_native_set
def test_pbs_every_input_and_batch_equals_items(keys_g2):
    """The NATIVE set's grouped key bootstraps through the kernel (by default, and prepared for NativeProduct
    explicitly, also anew from its arrays, alike): every (m, f(m)); a batch gives the words of its items
    bootstrapped one at a time (each item's arithmetic is the same in C, whichever thread runs it); KS-dedup and
    per-input tables; progress gives the words of one call. FFTProduct on the same key is the XLA FFT: the same
    messages."""
    ck, sk = keys_g2
    assert sk.prepared.kernels is NATIVE and sk.product is ops.NativeProduct
    native = ops.prepare(sk, product=ops.NativeProduct)
    assert native is sk and ops.prepare(sk) is sk
    m = np.arange(16)
    table = np.random.default_rng(41).integers(0, 16, 16)
    ct = ops.encrypt(ck, m, key=_seed(41))
    out = ops.pbs(native, ct, table)
    np.testing.assert_array_equal(ops.decrypt(ck, out), table[m])
    _same(ops.pbs(sk, ct, table), out)
    again = ops.ServerKey.create(sk.bsk, sk.ksk, sk.params, sk.key_id, product=ops.NativeProduct)
    assert again is not sk and again.product is ops.NativeProduct
    _same(ops.pbs(again, ct, table), out)
    xla = ops.prepare(sk, product=ops.FFTProduct)
    assert xla.product is ops.FFTProduct and xla.prepared.rest.dtype == np.complex128
    np.testing.assert_array_equal(ops.decrypt(ck, ops.pbs(xla, ct, table)), table[m])
    for i in (0, 7, 15):
        one = ops.pbs(sk, LWECiphertext(ct.b[i], ct.a[i], ct.moduli, ct.key_id), table)
        np.testing.assert_array_equal(np.asarray(one.a), np.asarray(out.a[i]))
        np.testing.assert_array_equal(np.asarray(one.b), np.asarray(out.b[i]))
    f2 = (table + 3) % 16
    out1, out2 = ops.pbs_many(sk, ct, [table, f2])
    _same(out1, out)
    np.testing.assert_array_equal(ops.decrypt(ck, out2), f2[m])
    own = np.stack([np.roll(table, i) for i in range(16)])
    np.testing.assert_array_equal(ops.decrypt(ck, ops.pbs(sk, ct, own)), own[m, m])
    seen = []
    _same(ops.pbs(sk, ct, table, progress=lambda done, total, stage: seen.append((stage, done / total))), out)
    fracs = [f for s, f in seen if s == "blind rotation"]
    assert fracs == sorted(fracs) and fracs[-1] == 1.0 and len(fracs) > 2


# slow: 38 s cold in CI; the native set under a user's jit is tested by default in tests/test_front_end.py
@pytest.mark.slow
@needs_native_set
def test_native_inside_jit_and_vmap(keys_g2):
    """NATIVE inside a caller's jax.jit (the key closed over or passed as an argument) and under jax.vmap over the
    batch (and jit of vmap): the eager words."""
    ck, sk = keys_g2
    m = np.arange(6) % 16
    ct = ops.encrypt(ck, m, key=_seed(48))
    f = lambda v: (5 * v + 1) % 16  # noqa: E731
    eager = ops.pbs(sk, ct, f)
    _same(jax.jit(lambda c: ops.pbs(sk, c, f))(ct), eager)
    _same(jax.jit(lambda s, c: ops.pbs(s, c, f))(sk, ct), eager)
    _same(jax.vmap(lambda c: ops.pbs(sk, c, f))(ct), eager)
    _same(jax.jit(jax.vmap(lambda s, c: ops.pbs(s, c, f), in_axes=(None, 0)))(sk, ct), eager)
    np.testing.assert_array_equal(ops.decrypt(ck, eager), (5 * m + 1) % 16)


@needs_native_set
def test_native_and_xla_sets_same_messages(keys_g2):
    """The same key on VECTOR bootstraps through the XLA FFT: the same messages (the words differ by the two FFTs'
    rounding, each within the model: test_grouping's noise test), and the same words through the exact NTT."""
    ck, sk = keys_g2
    vec = ops.ServerKey.create(sk.bsk, sk.ksk, sk.params.with_kernels(VECTOR), sk.key_id)
    assert vec.prepared.kernels is VECTOR
    assert vec.product is ops.FFTProduct and vec.prepared.rest.dtype == np.complex128
    m = np.arange(16)
    table = (7 * m + 2) % 16
    ct = ops.encrypt(ck, m, key=_seed(49))
    for key in (sk, vec):
        np.testing.assert_array_equal(ops.decrypt(ck, ops.pbs(key, ct, table)), table[m])
    _same(ops.pbs(ops.prepare(sk, product=ops.NTTProduct), ct, table),
          ops.pbs(ops.prepare(vec, product=ops.NTTProduct), ct, table))


# slow: 27 s cold in CI; extended accumulators run by default in tests/tfhe/test_extension.py
@pytest.mark.slow
@needs_native_set
def test_pbs_extended_accumulator(keys_ext_g3):
    """g = 3 over an accumulator of 16 components (the extended rotation of P6 and P8) through the native
    kernel: every input's table value, KS-dedup, and a batch equal to its items one at a time, word for word."""
    ck, sk = keys_ext_g3
    assert sk.product is ops.NativeProduct and sk.params.extension == 4
    native = ops.prepare(sk, product=ops.NativeProduct)
    assert native.product is ops.NativeProduct
    m = np.arange(16)
    f, h = np.random.default_rng(45).integers(0, 16, (2, 16))
    ct = ops.encrypt(ck, m, key=_seed(45))
    out_f, out_h = ops.pbs_many(native, ct, [f, h])
    np.testing.assert_array_equal(ops.decrypt(ck, out_f), f[m])
    np.testing.assert_array_equal(ops.decrypt(ck, out_h), h[m])
    one = ops.pbs(native, LWECiphertext(ct.b[3], ct.a[3], ct.moduli, ct.key_id), f)
    np.testing.assert_array_equal(np.asarray(one.a), np.asarray(out_f.a[3]))


def test_native_refused_where_it_does_not_apply(keys_p4, keys_g2):
    """NativeProduct names what is wrong (ops.product_for's ParameterError): ungrouped parameters, a key prepared
    for another kernel set; anything but the three product classes is refused. The default on ungrouped parameters
    is the XLA FFT whatever the set."""
    _, sk = keys_p4
    assert sk.product is ops.FFTProduct
    with pytest.raises(ParameterError, match="the native blind rotation cannot run here: .*(grouping|VECTOR)"):
        ops.prepare(sk, product=ops.NativeProduct)
    with pytest.raises(ParameterError, match="product must be one of NTTProduct, FFTProduct, NativeProduct"):
        ops.prepare(sk, product="c")
    _, sk2 = keys_g2
    vec = ops.ServerKey.create(sk2.bsk, sk2.ksk, sk2.params.with_kernels(VECTOR), sk2.key_id)
    assert vec.prepared.kernels is VECTOR
    with pytest.raises(ParameterError, match="the native blind rotation cannot run here: the kernel set is VECTOR"):
        ops.prepare(vec, product=ops.NativeProduct)


# --------------------------------------------------------------------------------------------------
# building and falling back
# --------------------------------------------------------------------------------------------------


def test_fallback_without_compiler(fresh_native, tmp_path, keys_g2):
    """No compiler (CC and CXX name none; an empty cache): no kernels, statuses saying why, the default kernel set
    VECTOR, a key on AUTO prepared for the XLA kernels (and bootstrapping), and NATIVE asked for by name refused
    with the reason."""
    ck, sk = keys_g2
    fresh_native.setenv("CC", "/nonexistent/cc")
    fresh_native.setenv("CXX", "/nonexistent/c++")
    fresh_native.setenv("CROSSFHE_NATIVE_CACHE", str(tmp_path))
    native.reset_all()
    default_kernels.cache_clear()
    assert not cpu_native.available() and "no C/C++ compiler" in cpu_native.status()
    assert not ring_ntt.NATIVE.available() and "no C/C++ compiler" in ring_ntt.NATIVE.status()
    assert default_kernels() is VECTOR
    fresh = dataclasses.replace(PG, name="no-compiler")  # parameters not used yet in this process (their plans)
    auto = ops.ServerKey.create(sk.bsk, sk.ksk, fresh, sk.key_id)
    assert auto.prepared.kernels is VECTOR and auto.product is ops.FFTProduct
    ct = ops.encrypt(ck, np.arange(4), key=_seed(44))
    np.testing.assert_array_equal(ops.decrypt(ck, ops.pbs(auto, ct, lambda x: 3 * x % 16)), 3 * np.arange(4) % 16)
    with pytest.raises(RuntimeError, match="no C/C\\+\\+ compiler"):
        ops.ServerKey.create(sk.bsk, sk.ksk, sk.params.with_kernels(NATIVE), sk.key_id)
    with pytest.raises(RuntimeError, match="no C/C\\+\\+ compiler"):
        ops.keygen(fresh.with_kernels(NATIVE), _seed(44))
    with pytest.raises(ParameterError, match="the native blind rotation cannot run here"):
        ops.prepare(auto, product=ops.NativeProduct)
    with pytest.raises(ParameterError, match="cannot run here: it is not available .*no C/C\\+\\+ compiler"):
        ops.product_for(fresh.with_kernels(NATIVE), ops.NativeProduct)


@needs_kernel
def test_build_cached_and_failed_build_leaves_nothing(fresh_native, tmp_path):
    """A build goes to $CROSSFHE_NATIVE_CACHE under a hashed name and is reused (not rebuilt) by the next
    process state; a compiler that fails leaves no file behind and says so."""
    fresh_native.setenv("CROSSFHE_NATIVE_CACHE", str(tmp_path / "a"))
    assert cpu_native.available()
    built = list((tmp_path / "a").iterdir())
    assert len(built) == 1 and built[0].suffix == ".so"
    stamp = built[0].stat().st_mtime_ns
    cpu_native.reset()
    assert cpu_native.available() and built[0].stat().st_mtime_ns == stamp
    assert list((tmp_path / "a").iterdir()) == built
    failing = tmp_path / "cc"
    failing.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo fake 1.0; exit 0; fi\necho boom >&2; exit 3\n")
    failing.chmod(0o755)
    fresh_native.setenv("CC", str(failing))
    fresh_native.setenv("CROSSFHE_NATIVE_CACHE", str(tmp_path / "b"))
    cpu_native.reset()
    assert not cpu_native.available() and "boom" in cpu_native.status()
    assert list((tmp_path / "b").iterdir()) == []


@needs_kernel
def test_cached_library_is_for_this_source(fresh_native, tmp_path):
    """The cache name hashes the sources: a changed source (here, the ABI check's copy) builds anew, and the
    loader refuses a library of another ABI."""
    fresh_native.setenv("CROSSFHE_NATIVE_CACHE", str(tmp_path))
    assert cpu_native.available()
    src = tmp_path / "tfhe_fft.c"
    abi = cpu_native.ABI_VERSION
    text = cpu_native.SOURCES[0].read_text()
    assert text.count(f"return {abi}; }}") == 1
    src.write_text(text.replace(f"return {abi}; }}", f"return {abi + 1}; }}"))
    fresh_native.setattr(cpu_native, "SOURCES", (src, cpu_native.SOURCES[1]))
    cpu_native.reset()
    assert not cpu_native.available() and f"ABI {abi + 1}" in cpu_native.status()
    assert len([p for p in tmp_path.iterdir() if p.suffix == ".so"]) == 2


# slow: 24 s cold in CI (a second native build); the default build is tested by default
@pytest.mark.slow
@needs_native_set
def test_portable_build_same_function(fresh_native, tmp_path, keys_g2):
    """Built without AVX-512 (as on CPUs that lack it): plain radix-2 stages, whose slot order is the bit
    reversal, registered under its own custom-call names; the same function: the DFT in that order, the XLA
    kernel's words on exact products (4 components), and bootstraps with a key laid out again for that order."""
    before = cpu_native.targets()
    fresh_native.setenv("CROSSFHE_NATIVE_CACHE", str(tmp_path))
    fresh_native.setattr(cpu_native, "FLAGS", cpu_native.FLAGS + ("-mno-avx512f",))
    cpu_native.reset()
    assert cpu_native.available() and cpu_native.targets() != before
    h = 1024
    order = cpu_native.slot_order(h)
    brv = np.array([int(format(i, "010b")[::-1], 2) for i in range(h)])
    np.testing.assert_array_equal(order, brv)
    x = np.random.default_rng(47).standard_normal(h) + 1j * np.random.default_rng(48).standard_normal(h)
    want = np.fft.fft(x)
    assert np.abs(cpu_native.fft_forward(x) - want[order]).max() <= 1e-14 * np.abs(want).max()
    test_rotation_equals_xla_kernel_on_exact_products(256, 1, Gadget(16, 2), 2, 2)
    ck, sk = keys_g2
    portable = ops.ServerKey.create(sk.bsk, sk.ksk, sk.params, sk.key_id)
    assert portable.product is ops.NativeProduct
    assert portable.prepared.product.tables.target == cpu_native.targets()[0]
    m = np.arange(16)
    table = (5 * m + 2) % 16
    ct = ops.encrypt(ck, m, key=_seed(47))
    np.testing.assert_array_equal(ops.decrypt(ck, ops.pbs(portable, ct, table)), table[m])
    np.testing.assert_array_equal(ops.decrypt(ck, ops.pbs(sk, ct, table)), table[m])


def test_bench_offers_every_kernel():
    """benchmarks/bench_tfhe.py's --kernel lists its choices before JAX loads: "auto" (the default, the parameters'
    product) and one name for each of the external-product kernels (crossfhe.core.blind_rotation.PRODUCTS)."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_tfhe.py"
    spec = importlib.util.spec_from_file_location("bench_tfhe", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    (action,) = [a for a in bench.parser()._actions if a.dest == "kernel"]
    assert tuple(action.choices) == tuple(bench.PRODUCTS) and action.default == "auto"
    named = [bench.product_of(c) for c in action.choices]
    assert bench.product_of("auto") is None and len(named) == len(PRODUCTS) + 1 and set(named) == {None, *PRODUCTS}


def test_compiler_flags_keep_ieee_results():
    """The build flags never include -ffast-math or -Ofast (they would reassociate the exact rounding steps:
    the digits' rint, the split of y into 32-bit parts); every build is warning-clean (-Werror)."""
    assert not any(f in cpu_native.FLAGS for f in ("-ffast-math", "-Ofast", "-funsafe-math-optimizations"))
    assert {"-Wall", "-Wextra", "-Werror"} <= set(native.WARNINGS)
    assert all(p.exists() for p in cpu_native.SOURCES + cpu_native.HEADERS)
