"""The native CPU kernel of the grouped FFT blind rotation (crossfhe.kernels.cpu_native, tfhe_fft.c): its FFT
against NumPy's, its words against the XLA kernel's where both are exact, its rounding against the noise model,
bootstraps through it, the choice of kernel, and the build (cache, refusal, fallback)."""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from crossfhe import testing
from crossfhe.core import fourier as F
from crossfhe.core import ggsw as G
from crossfhe.core.lwe import LWECiphertext
from crossfhe.errors import ParameterError
from crossfhe.kernels import cpu_native
from crossfhe.math import primes
from crossfhe.math.decompose import Gadget, RNSGadgetPlan
from crossfhe.math.modular import ModulusTable
from crossfhe.math.rns import RNSBasis
from crossfhe.ring.ntt import NTTPlan, ntt
from crossfhe.tfhe import ops
from crossfhe.tfhe.params import make

PG = testing.INSECURE_TFHE_P4_G2

# The kernel is built with the machine's C compiler; CI and the dev box have one (gcc). Where none is
# installed, the library runs the XLA kernel instead (test_fallback_without_compiler checks that path
# everywhere), and the tests that need the built kernel cannot run.
needs_kernel = pytest.mark.skipif(not cpu_native.available(), reason=f"no native kernel: {cpu_native.status()}")


def _seed(i: int) -> bytes:
    return bytes([i]) * 32


@pytest.fixture
def fresh_native(monkeypatch):
    """The loader's state forgotten before and after (a test that changes the environment of the build)."""
    cpu_native.reset()
    yield monkeypatch
    monkeypatch.undo()
    cpu_native.reset()


# --------------------------------------------------------------------------------------------------
# the transform
# --------------------------------------------------------------------------------------------------


@needs_kernel
@pytest.mark.parametrize("h", [8, 64, 256, 1024, 2048])
def test_fft_is_the_dft_in_its_slot_order(h):
    """fft_forward is NumPy's DFT up to a fixed permutation of the slots (slot_order), to float64 rounding
    (measured 2e-16 to 7e-16 of the largest value; bound 1e-14), and fft_inverse undoes it (times h)."""
    rng = np.random.default_rng(h)
    order = cpu_native.slot_order(h)
    assert np.array_equal(np.sort(order), np.arange(h))
    for _ in range(3):
        x = rng.standard_normal(h) + 1j * rng.standard_normal(h)
        want = np.fft.fft(x)
        got = cpu_native.fft_forward(x)
        assert np.abs(got - want[order]).max() <= 1e-14 * np.abs(want).max()
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


def _moves(exps, comps):
    """(src, power) int32 [B, G, 2^nu, T] of exponents [B, G, T] (crossfhe.core.ggsw.component_move)."""
    src, power = (np.ascontiguousarray(np.swapaxes(np.asarray(v), -1, -2)) for v in G.component_move(exps, comps))
    return src.astype(np.int32), power.astype(np.int32)


@needs_kernel
@pytest.mark.parametrize(
    "n, glwe_dim, gadget, g, nu",
    [(2048, 1, Gadget(23, 1), 2, 0), (1024, 1, Gadget(16, 2), 2, 0), (512, 2, Gadget(23, 1), 2, 0),
     (256, 1, Gadget(15, 4), 3, 0), (256, 1, Gadget(16, 2), 2, 2), (64, 1, Gadget(23, 1), 3, 4)],
)
def test_rotation_equals_xla_kernel_on_exact_products(n, glwe_dim, gadget, g, nu):
    """On keys small enough that every product is exact in float64, both kernels round the same exact integers:
    the native rotation's words equal F.blind_rotate_grouped's, over 3 steps and a batch of 2 (P4's shape,
    two digit levels, k = 2 (the generic product loop), an exact 4 x 15-bit gadget with g = 3, and accumulators
    of 4 and 16 components, the extended rotation of P6 and P8)."""
    rng = np.random.default_rng(n + g + nu)
    moduli, acc, exps, keys_f = _rotation_inputs(n, glwe_dim, gadget, g, nu, 3, 2, rng, key_bits=8)
    with jax.enable_x64(True):
        plan = F.FourierPlan.create(n, moduli, gadget, glwe_dim)
        rotate = jax.jit(F.blind_rotate_grouped)
        want = np.asarray(rotate(jnp.asarray(acc), jnp.asarray(exps), jnp.asarray(keys_f), plan))
        words = np.array(F.compose(jnp.asarray(acc), plan))
    tables = F.NativeTables.create(plan)
    F.blind_rotate_grouped_native(words, *_moves(exps, 1 << nu), F.native_key(keys_f, tables), plan, tables)
    with jax.enable_x64(True):
        got = np.asarray(F.decompose(jnp.asarray(words), plan))
    np.testing.assert_array_equal(got, want)


@needs_kernel
def test_group_step_error_within_model():
    """The native group step minus the exact NTT group step, on keys uniform mod Q (as key rows are): the
    rounding's variance (relative to Q) is at most the model's 2 (2^g - 1) var_fft and above a fifth of it, as
    for the XLA kernel (test_grouping.test_fft_group_step_error_within_model, same setup). Measured 0.66-0.76 of
    the bound (seeds 30-33, 0.68 with this one; g = 2, N 1024, 23-bit digits, 4 x 2 x 1024 coefficients); the
    XLA kernel 0.77 with this seed. With FFT twiddles from np.cos of float64 angles (an ulp off) it was
    0.90-0.92."""
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
        words = np.array(F.compose(jnp.asarray(acc), fplan))
    tables = F.NativeTables.create(fplan)
    key = F.native_key(F.ggsw_to_fourier(keys, moduli)[None], tables)
    F.blind_rotate_grouped_native(words, *_moves(exps[:, None], 1), key, fplan, tables)
    with jax.enable_x64(True):
        out = np.asarray(F.decompose(jnp.asarray(words), fplan))
    qcol = np.array(moduli, dtype=np.int64)[:, None]
    diff = (out.astype(np.int64) - np.asarray(exact).astype(np.int64)) % qcol
    err = F.centered_float(diff.astype(np.uint32), moduli) / math.prod(moduli)
    params = make(3, lwe_dim=16, glwe_dim=1, poly_size=n, glwe_log2_rate=-40.0, lwe_log2_rate=-20.0,
                  pbs=(23, 1), ks=(4, 5), insecure=True, grouping=g)
    bound = 2 * ((1 << g) - 1) * params.var_fft
    measured = float(np.mean(err**2))
    assert bound / 5 <= measured <= bound, (measured / bound, measured, bound)


@needs_kernel
def test_bad_arrays_refused():
    """The ctypes entry point checks dtypes, shapes and layout before handing pointers to C."""
    n = 64
    moduli = tuple(primes.ntt_primes(31, n, 2))
    with jax.enable_x64(True):
        plan = F.FourierPlan.create(n, moduli, Gadget(23, 1), 1)
    tables = F.NativeTables.create(plan)
    key = np.zeros((2, n // 2 // cpu_native.BLOCK, 3, 2, 2, 2, cpu_native.BLOCK))
    words, moves = np.zeros((1, 1, 2, n), np.uint64), np.zeros((1, 2, 1, 3), np.int32)
    F.blind_rotate_grouped_native(words, moves, moves, key, plan, tables)  # zero keys: words unchanged
    assert not words.any()
    four = np.zeros((1, 4, 2, n), np.uint64)
    for bad in [
        (words.astype(np.int64), moves, moves, key, "acc int64"),
        (words, moves, moves.astype(np.int64), key, "power int64"),
        (words, moves, moves, key[:1], "want"),
        (words, np.zeros((2, 2, 1, 3), np.int32), np.zeros((2, 2, 1, 3), np.int32), key, "src"),
        (np.zeros((1, 1, 2, 2 * n), np.uint64)[..., ::2], moves, moves, key, "C-contiguous"),
        (four, np.full((1, 2, 4, 3), 4, np.int32), np.zeros((1, 2, 4, 3), np.int32), key, "index the 4 components"),
    ]:
        with pytest.raises(ValueError, match=bad[-1]):
            F.blind_rotate_grouped_native(*bad[:-1], plan, tables)


# --------------------------------------------------------------------------------------------------
# bootstraps
# --------------------------------------------------------------------------------------------------


@needs_kernel
def test_pbs_every_input_and_batch_equals_items(keys_g2):
    """Every (m, f(m)) through the native kernel; a batch gives the words of its items bootstrapped one at a
    time (each item's arithmetic is the same in C); KS-dedup and per-input tables; progress gives the words of
    one call, fractions rising to 1; "auto" takes the native kernel here."""
    ck, sk = keys_g2
    assert ops.native_applies(PG)
    m = np.arange(16)
    table = np.random.default_rng(41).integers(0, 16, 16)
    ct = ops.encrypt(ck, m, _seed(41))
    out = ops.pbs(sk, ct, table, kernel="native")
    np.testing.assert_array_equal(ops.decrypt(ck, out), table[m])
    auto = ops.pbs(sk, ct, table)
    np.testing.assert_array_equal(np.asarray(auto.a), np.asarray(out.a))
    for i in (0, 7, 15):
        one = ops.pbs(sk, LWECiphertext(ct.b[i], ct.a[i], ct.moduli), table, kernel="native")
        np.testing.assert_array_equal(np.asarray(one.a), np.asarray(out.a[i]))
        np.testing.assert_array_equal(np.asarray(one.b), np.asarray(out.b[i]))
    f2 = (table + 3) % 16
    out1, out2 = ops.pbs_many(sk, ct, [table, f2], kernel="native")
    np.testing.assert_array_equal(np.asarray(out1.a), np.asarray(out.a))
    np.testing.assert_array_equal(ops.decrypt(ck, out2), f2[m])
    own = np.stack([np.roll(table, i) for i in range(16)])
    np.testing.assert_array_equal(ops.decrypt(ck, ops.pbs(sk, ct, own, kernel="native")), own[m, m])
    seen = []
    prog = ops.pbs(sk, ct, table, kernel="native", progress=lambda stage, frac: seen.append((stage, frac)))
    np.testing.assert_array_equal(np.asarray(prog.a), np.asarray(out.a))
    fracs = [f for s, f in seen if s == "blind rotation"]
    assert fracs == sorted(fracs) and fracs[-1] == 1.0 and len(fracs) > 2


@needs_kernel
def test_batch_split_over_two_threads_same_words(keys_g2, monkeypatch):
    """With a worker thread (two CPUs) a batch runs as two halves at once, without one as a whole: the same words
    (checked with a worker forced and with none, whatever this machine's CPUs)."""
    ck, sk = keys_g2
    ct = ops.encrypt(ck, np.arange(5), _seed(46))
    got = {}
    with ThreadPoolExecutor(max_workers=1) as pool:
        for name, worker in (("split", pool), ("whole", None)):
            monkeypatch.setattr(ops, "worker_pool", lambda worker=worker: worker)
            got[name] = ops.pbs(sk, ct, lambda x: 3 * x % 16, kernel="native")
    np.testing.assert_array_equal(np.asarray(got["split"].a), np.asarray(got["whole"].a))
    np.testing.assert_array_equal(np.asarray(got["split"].b), np.asarray(got["whole"].b))
    np.testing.assert_array_equal(ops.decrypt(ck, got["split"]), 3 * np.arange(5) % 16)


@needs_kernel
def test_pbs_extended_accumulator(keys_ext_g3):
    """g = 3 over an accumulator of 16 components (the extended rotation of P6 and P8) through the native
    kernel: every input's table value, KS-dedup, and a batch equal to its items one at a time, word for word."""
    ck, sk = keys_ext_g3
    params = testing.INSECURE_TFHE_P4_EXT_G3
    assert ops.native_applies(params) and params.extension == 4
    m = np.arange(16)
    f, h = np.random.default_rng(45).integers(0, 16, (2, 16))
    ct = ops.encrypt(ck, m, _seed(45))
    out_f, out_h = ops.pbs_many(sk, ct, [f, h], kernel="native")
    np.testing.assert_array_equal(ops.decrypt(ck, out_f), f[m])
    np.testing.assert_array_equal(ops.decrypt(ck, out_h), h[m])
    one = ops.pbs(sk, LWECiphertext(ct.b[3], ct.a[3], ct.moduli), f, kernel="native")
    np.testing.assert_array_equal(np.asarray(one.a), np.asarray(out_f.a[3]))


def test_native_refused_where_it_does_not_apply(keys_p4):
    """kernel="native" names what is wrong: ungrouped parameters, a traced ciphertext; "auto" never takes it
    there (the ungrouped P4 runs the XLA FFT)."""
    ck, sk = keys_p4
    assert not ops.native_applies(testing.INSECURE_TFHE_P4)
    ct = ops.encrypt(ck, np.arange(4), _seed(42))
    with pytest.raises(ParameterError, match="grouping > 1"):
        ops.pbs(sk, ct, lambda x: x, kernel="native")
    with pytest.raises(ParameterError, match="kernel must be one of"):
        ops.pbs(sk, ct, lambda x: x, kernel="c")


@needs_kernel
def test_native_refused_under_jit(keys_g2):
    ck, sk = keys_g2
    ct = ops.encrypt(ck, np.arange(4), _seed(43))
    with pytest.raises(ParameterError, match="concrete arrays"):
        jax.jit(lambda c: ops.pbs(sk, c, lambda x: x, kernel="native").b)(ct)
    # "auto" under jit takes the XLA FFT kernel (the key closed over), with the words of kernel="fft"
    got = jax.jit(lambda c: ops.pbs(sk, c, lambda x: x).b)(ct)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(ops.pbs(sk, ct, lambda x: x, kernel="fft").b))


# --------------------------------------------------------------------------------------------------
# building and falling back
# --------------------------------------------------------------------------------------------------


def test_fallback_without_compiler(fresh_native, keys_g2):
    """No compiler (CC names none) or CROSSFHE_NATIVE=0: no kernel, a status saying why, "auto" runs the XLA
    FFT (the words of kernel="fft"), and kernel="native" raises a ParameterError that says why."""
    ck, sk = keys_g2
    ct = ops.encrypt(ck, np.arange(4), _seed(44))
    want = np.asarray(ops.pbs(sk, ct, lambda x: x, kernel="fft").a)
    for env, reason in ((("CC", "/nonexistent/cc"), "no C compiler"), (("CROSSFHE_NATIVE", "0"), "CROSSFHE_NATIVE=0")):
        fresh_native.setenv(*env)
        cpu_native.reset()
        assert not cpu_native.available() and reason in cpu_native.status()
        assert not ops.native_applies(PG)
        np.testing.assert_array_equal(np.asarray(ops.pbs(sk, ct, lambda x: x).a), want)
        with pytest.raises(ParameterError, match=reason):
            ops.pbs(sk, ct, lambda x: x, kernel="native")
        fresh_native.delenv(env[0])


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
    """The cache name hashes the source: a changed source (here, the ABI check's copy) builds anew."""
    fresh_native.setenv("CROSSFHE_NATIVE_CACHE", str(tmp_path))
    assert cpu_native.available()
    src = tmp_path / "tfhe_fft.c"
    abi = cpu_native.ABI_VERSION
    text = cpu_native.SOURCE.read_text()
    assert text.count(f"return {abi}; }}") == 1
    src.write_text(text.replace(f"return {abi}; }}", f"return {abi + 1}; }}"))
    fresh_native.setattr(cpu_native, "SOURCE", src)
    cpu_native.reset()
    assert not cpu_native.available() and f"ABI {abi + 1}" in cpu_native.status()
    assert len([p for p in tmp_path.iterdir() if p.suffix == ".so"]) == 2


@needs_kernel
def test_portable_build_same_function(fresh_native, tmp_path, keys_g2):
    """Built without AVX-512 (as on CPUs that lack it): plain radix-2 stages, whose slot order is the bit
    reversal, and the same function: the DFT in that order, the XLA kernel's words on exact products (4
    components), and bootstraps with a key laid out again for that order (the default build's layout stays
    cached for it)."""
    fresh_native.setenv("CROSSFHE_NATIVE_CACHE", str(tmp_path))
    fresh_native.setattr(cpu_native, "FLAGS", cpu_native.FLAGS + ("-mno-avx512f",))
    cpu_native.reset()
    assert cpu_native.available()
    h = 1024
    order = cpu_native.slot_order(h)
    brv = np.array([int(format(i, "010b")[::-1], 2) for i in range(h)])
    np.testing.assert_array_equal(order, brv)
    x = np.random.default_rng(47).standard_normal(h) + 1j * np.random.default_rng(48).standard_normal(h)
    want = np.fft.fft(x)
    assert np.abs(cpu_native.fft_forward(x) - want[order]).max() <= 1e-14 * np.abs(want).max()
    test_rotation_equals_xla_kernel_on_exact_products(256, 1, Gadget(16, 2), 2, 2)
    ck, sk = keys_g2
    m = np.arange(16)
    table = (5 * m + 2) % 16
    out = ops.pbs(sk, ops.encrypt(ck, m, _seed(47)), table, kernel="native")
    np.testing.assert_array_equal(ops.decrypt(ck, out), table[m])


def test_bench_offers_every_kernel():
    """benchmarks/bench_tfhe.py's --kernel lists its choices before JAX loads: they are ops.KERNELS."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_tfhe.py"
    spec = importlib.util.spec_from_file_location("bench_tfhe", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    (action,) = [a for a in bench.parser()._actions if a.dest == "kernel"]
    assert tuple(action.choices) == ops.KERNELS and action.default == "auto"


def test_compiler_flags_keep_ieee_results():
    """The build flags never include -ffast-math or -Ofast (they would reassociate the exact rounding steps:
    the digits' floor(x + 0.5), the split of y into 32-bit parts)."""
    assert not any(f in cpu_native.FLAGS for f in ("-ffast-math", "-Ofast", "-funsafe-math-optimizations"))
    assert os.path.exists(cpu_native.SOURCE)
    if cpu_native.available():  # the source compiles without warnings under -Wall -Wextra
        cc = os.environ.get("CC", "cc")
        proc = subprocess.run([cc, *cpu_native.FLAGS, "-Wall", "-Wextra", "-Werror", "-o", os.devnull,
                               str(cpu_native.SOURCE), "-lm"], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
