"""The native CPU kernel of the RNS NTT (crossfhe/ring/rns_ntt.c, an XLA FFI custom call, the NATIVE kernel set): its
words against the jitted radix-2 kernels and the NumPy reference, eagerly and inside jit, vmap and scan; the kernel
set as a value of the plan; and its build (portable flags, warnings, fallback without a compiler)."""

from __future__ import annotations

import ctypes

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from crossfhe.errors import ParameterError
from crossfhe.kernels import AUTO, MATRIX, NATIVE, VECTOR, default_kernels
from crossfhe.math import native
from crossfhe.math.primes import ntt_primes
from crossfhe.ring import ntt as T

# Built with the machine's C/C++ compilers; CI and the dev box have them (gcc). Without them the default kernel set
# is VECTOR (test_fallback_without_compiler checks that everywhere), and these tests cannot run.
needs_kernel = pytest.mark.skipif(not T.NATIVE.available(), reason=f"no native NTT kernel: {T.NATIVE.status()}")


def _moduli(n: int, pattern: str) -> list[int]:
    """Distinct NTT primes for N in the order of ``pattern``: "n" below 2^30 (lazy [0, 4q)), "w" in [2^30, 2^31)
    (the "wide" [0, 2q) range)."""
    narrow, wide = iter(ntt_primes(28, n, pattern.count("n"))), iter(ntt_primes(31, n, pattern.count("w")))
    return [next(narrow) if c == "n" else next(wide) for c in pattern]


def _random(plan, batch=(), seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2**32, batch + (plan.limbs, plan.n), dtype=np.uint64)
    return (x % np.asarray(plan.q).astype(np.uint64)).astype(np.uint32)


def _with_edges(plan, seed):
    """Two random polynomials and rows of zeros, of q - 1, and alternating 0 / q - 1."""
    q = np.asarray(plan.q).astype(np.uint32)
    top = np.broadcast_to(q - 1, (plan.limbs, plan.n)).astype(np.uint32)
    alt = np.where(np.arange(plan.n) % 2 == 0, top, 0).astype(np.uint32)
    return np.concatenate([_random(plan, (2,), seed), np.stack([np.zeros_like(top), top, alt])])


def _xla(x, plan, inverse=False):
    if inverse:
        return np.asarray(T._intt_jit(x, plan.q, plan.wi, plan.wi_shoup, plan.inv_last, plan.inv_last_shoup,
                                      wide=plan.wide))
    return np.asarray(T._ntt_jit(x, plan.q, plan.w, plan.w_shoup, wide=plan.wide))


def _native(x, plan, *, inverse=False, full=True):
    return np.asarray(T.native_transform(jnp.asarray(x), plan, inverse=inverse, full=full))


@pytest.fixture
def fresh_native(monkeypatch):
    """Native libraries forgotten before and after (a test that changes the environment of the build)."""
    native.reset_all()
    default_kernels.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    native.reset_all()
    default_kernels.cache_clear()


# (log N, moduli): N from 2^6 (the kernel's smallest: two rows of N2 = 32) to 2^17, narrow, wide and mixed plans;
# 2^12 is one block of the L1 phase, 2^13 and up have long stages before it
CASES = [(6, "nw"), (7, "w"), (9, "nnn"), (11, "wn"), (12, "nwn"), (13, "wwn"), (14, "n"), (16, "nwnw"), (17, "wn")]


@needs_kernel
@pytest.mark.parametrize("log_n,pattern", CASES, ids=[f"logN={a}/{b}" for a, b in CASES])
def test_words_equal_xla_kernels_and_reference(log_n, pattern):
    """Forward and inverse give the jitted kernels' words (and the reference's) on random and edge rows with a
    batch axis; the lazy forward is congruent and in [0, 2q)."""
    plan = T.NTTPlan.create(1 << log_n, _moduli(1 << log_n, pattern))
    x = _with_edges(plan, seed=log_n)
    y = _native(x, plan)
    np.testing.assert_array_equal(y, _xla(x, plan))
    if log_n <= 13:  # the NumPy reference is slow past that; the XLA kernels are checked against it up to 2^17
        np.testing.assert_array_equal(y, T.ntt_reference(x, plan))
    np.testing.assert_array_equal(_native(y, plan, inverse=True), x)
    np.testing.assert_array_equal(_native(y, plan, inverse=True), _xla(y, plan, inverse=True))
    lazy = _native(x, plan, full=False).astype(np.int64)
    q = np.asarray(plan.q).astype(np.int64)
    assert (lazy < 2 * q).all() and ((lazy % q) == y).all()


@needs_kernel
def test_native_plan_inside_jit_vmap_and_scan():
    """A NATIVE plan's ntt/intt are one custom call of the caller's program: eagerly, under jit, vmap (over a batch
    axis, the tables unbatched) and lax.scan, the words of the VECTOR plan."""
    n = 1 << 10
    moduli = _moduli(n, "nwnw")
    vec, nat = T.NTTPlan.create(n, moduli, VECTOR), T.NTTPlan.create(n, moduli, NATIVE)
    assert vec.kernels is None and nat.kernels is NATIVE
    x = _random(vec, (3,), seed=9)
    want = np.asarray(T.ntt(x, vec))
    np.testing.assert_array_equal(np.asarray(T.ntt(x, nat)), want)
    np.testing.assert_array_equal(np.asarray(jax.jit(T.ntt)(x, nat)), want)
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda v, p: T.intt(T.ntt(v, p), p))(x, nat)), x)
    np.testing.assert_array_equal(np.asarray(jax.vmap(lambda v: T.ntt(v, nat))(x)), want)
    np.testing.assert_array_equal(np.asarray(jax.vmap(lambda v: T.intt(v, nat), in_axes=1, out_axes=1)(
        np.stack([want, want], axis=1)))[:, 1], x)
    _, ys = jax.lax.scan(lambda c, v: (c, T.ntt(v, nat)), 0, x)
    np.testing.assert_array_equal(np.asarray(ys), want)
    lazy = np.asarray(T.ntt_lazy(x, nat)).astype(np.int64)
    q = np.asarray(nat.q).astype(np.int64)
    assert (lazy < 2 * q).all() and ((lazy % q) == want).all()


@needs_kernel
def test_repeated_moduli():
    """A concatenated plan repeats moduli (ModUp's digits): each row takes its limb's tables, with batch axes."""
    n = 1 << 12
    a, b = T.NTTPlan.create(n, _moduli(n, "nwn"), NATIVE), T.NTTPlan.create(n, _moduli(n, "nwn")[1:], NATIVE)
    plan = T.NTTPlan.concat([a, b, a])
    assert plan.kernels is NATIVE
    x = _random(plan, (2, 3), seed=5)
    y = _native(x, plan)
    np.testing.assert_array_equal(y, _xla(x, plan))
    np.testing.assert_array_equal(_native(y, plan, inverse=True), x)


@needs_kernel
@pytest.mark.parametrize("log_n", [12, 16])
def test_gathered_plan_reads_shared_rows(log_n):
    """A plan gathered from a chain's tables (ModUp's digits at one level) holds the chain's arrays themselves, and
    gives the words of the concatenated plan with copies of the rows, forward and inverse, on the native kernel (rows
    read in place), on the radix-2 kernels (rows gathered in the program) and under jit; a modulus the tables lack is
    refused."""
    n = 1 << log_n
    chain = _moduli(n, "nwnwn")
    moduli = [chain[1], chain[3], chain[0], chain[4], chain[1], chain[2], chain[0]]
    for kernels in (NATIVE, None):
        tables = T.NTTPlan.create(n, chain, kernels)
        plan = T.NTTPlan.gathered(tables, moduli)
        assert plan.w is tables.w and plan.wi_shoup is tables.wi_shoup and plan.limbs == len(moduli)
        copied = T.NTTPlan.concat([T.NTTPlan.create(n, [m], kernels) for m in moduli])
        x = _random(copied, (2,), seed=log_n)
        y = np.asarray(T.ntt(jnp.asarray(x), plan))
        np.testing.assert_array_equal(y, _xla(x, copied))
        np.testing.assert_array_equal(np.asarray(jax.jit(T.ntt)(jnp.asarray(x), plan)), y)
        np.testing.assert_array_equal(np.asarray(T.intt(jnp.asarray(y), plan)), x)
    with pytest.raises(ParameterError, match="no row"):
        T.NTTPlan.gathered(T.NTTPlan.create(n, chain[:2], NATIVE), [chain[2]])


def test_kernel_set_is_a_value_of_the_plan():
    """VECTOR plans hold None (the radix-2 kernels), MATRIX and NATIVE plans hold their set, AUTO resolves to
    default_kernels(), which is NATIVE on a CPU backend with the build and VECTOR otherwise."""
    n = 1 << 6
    moduli = _moduli(n, "n")
    assert T.NTTPlan.create(n, moduli).kernels is None and T.NTTPlan.create(n, moduli, VECTOR).kernels is None
    assert T.NTTPlan.create(n, moduli, MATRIX).kernels is MATRIX
    want = NATIVE if jax.default_backend() == "cpu" and T.NATIVE.available() else VECTOR
    assert default_kernels() is want
    auto = T.NTTPlan.create(n, moduli, AUTO).kernels
    assert auto is (None if want is VECTOR else want)


def test_fallback_without_compiler(fresh_native):
    """No compiler: no kernel, a status saying why, VECTOR as the default set, and NATIVE asked for by name refused
    with the reason; the XLA transform keeps its words."""
    fresh_native.setenv("CC", "/nonexistent/cc")
    fresh_native.setenv("CXX", "/nonexistent/c++")
    native.reset_all()
    default_kernels.cache_clear()
    assert not T.NATIVE.available() and "no C/C++ compiler" in T.NATIVE.status()
    assert default_kernels() is VECTOR
    n = 1 << 9
    moduli = _moduli(n, "nw")
    with pytest.raises(RuntimeError, match="no C/C.. compiler"):
        T.NTTPlan.create(n, moduli, NATIVE)
    plan = T.NTTPlan.create(n, moduli, AUTO)
    assert plan.kernels is None
    x = _random(plan, (2,), seed=4)
    np.testing.assert_array_equal(np.asarray(T.ntt(x, plan)), T.ntt_reference(x, plan))


@needs_kernel
def test_portable_build_same_words(tmp_path):
    """Built without AVX-512 (as on CPUs that lack it: the scalar loops, vectorized by the compiler for what the CPU
    has, and the plain transpose), with -Wall -Wextra -Werror: registered under a second name, the same words."""
    target = tmp_path / "portable.so"
    native.build(T.NATIVE_SOURCES, target, flags=native.PORTABLE_FLAGS + ("-mno-avx512f",))
    lib = ctypes.CDLL(str(target))
    native.register(lib, {"crossfhe_rns_ntt_portable_test": "cf_rns_ntt_ffi"})
    for log_n, pattern in ((6, "wn"), (13, "nwn")):
        plan = T.NTTPlan.create(1 << log_n, _moduli(1 << log_n, pattern))
        x = _with_edges(plan, seed=log_n)
        for inverse, data in ((False, x), (True, _xla(x, plan))):
            call = jax.ffi.ffi_call("crossfhe_rns_ntt_portable_test", jax.ShapeDtypeStruct(x.shape, jnp.uint32))
            w, ws = (plan.wi, plan.wi_shoup) if inverse else (plan.w, plan.w_shoup)
            got = call(data, jnp.asarray(plan.q), w, ws, plan.inv_last, plan.inv_last_shoup, inverse=np.int32(inverse),
                       full=np.int32(1))
            np.testing.assert_array_equal(np.asarray(got), x if inverse else _xla(x, plan))


def test_sources_compile_without_warnings(tmp_path):
    """The sources build under -Wall -Wextra -Werror (every build uses them: native.WARNINGS) with the default flags
    (where a compiler is)."""
    assert all(src.exists() for src in T.NATIVE_SOURCES) and {"-Wall", "-Wextra", "-Werror"} <= set(native.WARNINGS)
    if not T.NATIVE.available():
        pytest.skip(f"no native NTT kernel: {T.NATIVE.status()}")  # nothing to compile with
    native.build(T.NATIVE_SOURCES, tmp_path / "default.so")
    assert (tmp_path / "default.so").exists()


@needs_kernel
def test_permute_slots_custom_call():
    """The Galois permutation of EVAL slots as a custom call (NATIVE plans) gives jnp.take's words, eagerly, under jit
    and vmap; on a VECTOR plan it is jnp.take."""
    from crossfhe.core.keyswitch import slot_permutation

    n = 1 << 10
    moduli = _moduli(n, "nwn")
    nat, vec = T.NTTPlan.create(n, moduli, NATIVE), T.NTTPlan.create(n, moduli, VECTOR)
    x = _random(nat, (2,), seed=13)
    for g in (5, 25, 2 * n - 1):
        idx = slot_permutation(n, g)
        want = np.take(x, np.asarray(idx), axis=-1)
        np.testing.assert_array_equal(np.asarray(T.permute_slots(x, idx, nat)), want)
        np.testing.assert_array_equal(np.asarray(T.permute_slots(x, idx, vec)), want)
        np.testing.assert_array_equal(np.asarray(jax.jit(T.permute_slots)(x, idx, nat)), want)
        np.testing.assert_array_equal(np.asarray(jax.vmap(lambda v, i=idx: T.permute_slots(v, i, nat))(x)), want)
