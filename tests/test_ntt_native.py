"""The native CPU kernel of the RNS NTT (crossfhe/ring/rns_ntt.c through ring.ntt.NATIVE): its words against the
jitted radix-2 kernels and the NumPy reference, its dispatch (concrete CPU arrays past the chunk threshold, never
under a trace), its two-thread split, its output buffers, and its build (portable flags, warnings, fallback)."""

from __future__ import annotations

import gc
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from crossfhe.math import native
from crossfhe.math.primes import ntt_primes
from crossfhe.ring import ntt as T

# Built with the machine's C compiler; CI and the dev box have one (gcc). Without one the library runs the XLA
# kernels instead (test_fallback_without_compiler checks that path everywhere), and these tests cannot run.
needs_kernel = pytest.mark.skipif(not T.NATIVE.available(), reason=f"no native NTT kernel: {T.NATIVE.status()}")


def _moduli(n: int, pattern: str) -> list[int]:
    """Distinct NTT primes for N in the order of ``pattern``: "n" below 2^30 (lazy [0, 4q)), "w" in [2^30, 2^31)
    (the "wide" [0, 2q) range)."""
    narrow, wide = iter(ntt_primes(28, n, pattern.count("n"))), iter(ntt_primes(31, n, pattern.count("w")))
    return [next(narrow) if c == "n" else next(wide) for c in pattern]


def _random(plan, batch=(), seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2**32, batch + (plan.limbs, plan.n), dtype=np.uint64)
    return (x % plan.q.astype(np.uint64)).astype(np.uint32)


def _with_edges(plan, seed):
    """Two random polynomials and rows of zeros, of q - 1, and alternating 0 / q - 1."""
    q = plan.q.astype(np.uint32)
    top = np.broadcast_to(q - 1, (plan.limbs, plan.n)).astype(np.uint32)
    alt = np.where(np.arange(plan.n) % 2 == 0, top, 0).astype(np.uint32)
    return np.concatenate([_random(plan, (2,), seed), np.stack([np.zeros_like(top), top, alt])])


def _xla(x, plan, inverse=False):
    if inverse:
        return np.asarray(T._intt_jit(x, plan.q, plan.wi, plan.wi_shoup, plan.inv_last, plan.inv_last_shoup,
                                      wide=plan.wide))
    return np.asarray(T._ntt_jit(x, plan.q, plan.w, plan.w_shoup, wide=plan.wide))


def _native(x, plan, *, inverse=False, full=True):
    return np.asarray(T._native(jnp.asarray(x), plan, inverse=inverse, full=full))


@pytest.fixture
def fresh_native(monkeypatch):
    """Native libraries forgotten before and after (a test that changes the environment of the build)."""
    native.reset_all()
    yield monkeypatch
    monkeypatch.undo()
    native.reset_all()


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
    q = plan.q.astype(np.int64)
    assert (lazy < 2 * q).all() and ((lazy % q) == y).all()


@needs_kernel
def test_repeated_moduli_and_row_order():
    """A concatenated plan repeats moduli (ModUp's digits): one table per distinct modulus, shared with the other
    plans, rows grouped by it; the words are each row's own transform, with batch axes."""
    n = 1 << 12
    a, b = T.NTTPlan.create(n, _moduli(n, "nwn")), T.NTTPlan.create(n, _moduli(n, "nwn")[1:])
    plan = T.NTTPlan.concat([a, b, a])
    q, *_, tables, index = T._native_tables(plan)
    assert len(q) == 3 and [int(q[i]) for i in index] == list(plan.moduli)
    assert T._native_tables(b)[4][0] is tables[1]  # one copy of a modulus's tables for every plan
    x = _random(plan, (2, 3), seed=5)
    y = _native(x, plan)
    np.testing.assert_array_equal(y, _xla(x, plan))
    np.testing.assert_array_equal(_native(y, plan, inverse=True), x)


@needs_kernel
@pytest.mark.parametrize("two_threads", [False, True])
def test_dispatch_threads_and_traces(monkeypatch, two_threads, counting_pool):
    """ntt/intt of a concrete array on the CPU past CHUNK_FROM_BYTES (0 here) run in the native kernel, from one
    thread or split over two (a one-worker pool, as on two CPUs), and give a JAX array on that device with the XLA
    words; a NumPy input too where JAX's default backend is the CPU. Under jit and vmap the transform stays one piece
    of the caller's program, and an array on another device (a GPU) stays with XLA: no native call."""
    pool, submitted = counting_pool
    calls = []

    monkeypatch.setattr(T, "PARALLEL", True)
    monkeypatch.setattr(T, "_POOL", {os.getpid(): pool if two_threads else None})
    monkeypatch.setattr(T, "CHUNK_FROM_BYTES", 0)
    run = T._native
    monkeypatch.setattr(T, "_native", lambda *a, **k: calls.append(k["inverse"]) or run(*a, **k))
    n = 1 << 10
    plan = T.NTTPlan.create(n, _moduli(n, "nwnw"))
    x = _random(plan, (3,), seed=9)
    want = _xla(x, plan)
    cpu = jax.devices("cpu")[0]
    y = T.ntt(jax.device_put(x, cpu), plan)
    assert isinstance(y, jax.Array) and y.dtype == jnp.uint32 and y.shape == x.shape and y.devices() == {cpu}
    np.testing.assert_array_equal(np.asarray(y), want)
    np.testing.assert_array_equal(np.asarray(T.intt(y, plan)), x)
    from_numpy = T.ntt(x, plan)
    assert isinstance(from_numpy, jax.Array)
    np.testing.assert_array_equal(np.asarray(from_numpy), want)
    on_cpu = jax.default_backend() == "cpu"
    assert calls == [False, True] + [False] * on_cpu and len(submitted) == (2 + on_cpu) * two_threads
    np.testing.assert_array_equal(np.asarray(jax.jit(T.ntt)(x, plan)), want)
    np.testing.assert_array_equal(np.asarray(jax.vmap(lambda v: T.intt(v, plan))(want)), x)
    for device in jax.devices():  # a GPU's arrays (none on a CPU-only machine)
        if device.platform != "cpu":
            np.testing.assert_array_equal(np.asarray(T.ntt(jax.device_put(x, device), plan)), want)
    assert len(calls) == 2 + on_cpu


@needs_kernel
def test_call_from_the_worker_thread_runs_whole(monkeypatch):
    """A transform called on the pool's own worker thread runs there whole (it cannot wait on itself)."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=T._WORKER)
    monkeypatch.setattr(T, "PARALLEL", True)
    monkeypatch.setattr(T, "_POOL", {os.getpid(): pool})
    monkeypatch.setattr(T, "CHUNK_FROM_BYTES", 0)
    n = 1 << 8
    plan = T.NTTPlan.create(n, _moduli(n, "nn"))
    x = _random(plan, (2,), seed=3)
    got = pool.submit(lambda: np.asarray(T.ntt(x, plan))).result(timeout=60)
    np.testing.assert_array_equal(got, _xla(x, plan))
    monkeypatch.setattr(T, "native_pays", lambda x, plan: False)  # the XLA chunks' pool split: the same guard
    got = pool.submit(lambda: np.asarray(T.ntt(x, plan))).result(timeout=60)
    np.testing.assert_array_equal(got, _xla(x, plan))
    pool.shutdown()


@needs_kernel
def test_outputs_are_aligned_and_outlive_the_call():
    """The result wraps a 64-byte-aligned host buffer (no copy into JAX) that stays valid after collections and
    new allocations of the same size."""
    n = 1 << 12
    plan = T.NTTPlan.create(n, _moduli(n, "nw"))
    x = _random(plan, (4,), seed=21)
    want = _xla(x, plan)
    out = [T._native(jnp.asarray(x), plan, inverse=False, full=True) for _ in range(3)]
    assert all(o.unsafe_buffer_pointer() % 64 == 0 for o in out)
    gc.collect()
    junk = [np.full(x.shape, 0xFFFFFFFF, np.uint32) for _ in range(8)]
    for o in out:
        np.testing.assert_array_equal(np.asarray(o), want)
    del junk


def test_not_for_small_rings_or_other_kernel_sets():
    """N below 64 (two rows of the transposed layout) and plans with matrix kernels never take the native kernel."""
    from crossfhe.kernels import MATRIX

    x = jnp.zeros((1, 32), jnp.uint32)
    assert not T.native_pays(x, T.NTTPlan.create(32, _moduli(32, "n")))
    plan = T.NTTPlan.create(64, _moduli(64, "n"), MATRIX)
    assert not T.native_pays(jnp.zeros((1, 64), jnp.uint32), plan)


def test_fallback_without_compiler(fresh_native):
    """No compiler (CC names none) or CROSSFHE_NATIVE=0: no kernel, a status saying why, and ntt/intt of a large
    concrete array run as XLA chunks with the same words."""
    fresh_native.setattr(T, "CHUNK_FROM_BYTES", 0)
    n = 1 << 9
    plan = T.NTTPlan.create(n, _moduli(n, "nw"))
    x = _random(plan, (2,), seed=4)
    for env, reason in ((("CC", "/nonexistent/cc"), "no C compiler"), (("CROSSFHE_NATIVE", "0"), "CROSSFHE_NATIVE=0")):
        fresh_native.setenv(*env)
        native.reset_all()
        assert not T.NATIVE.available() and reason in T.NATIVE.status()
        assert not T.native_pays(jnp.asarray(x), plan)
        y = T.ntt(x, plan)
        np.testing.assert_array_equal(np.asarray(y), T.ntt_reference(x, plan))
        np.testing.assert_array_equal(np.asarray(T.intt(y, plan)), x)
        fresh_native.delenv(env[0])


@needs_kernel
def test_portable_build_same_words(fresh_native, tmp_path):
    """Built without AVX-512 (as on CPUs that lack it: the scalar loops, vectorized by the compiler for what the
    CPU has, and the plain transpose): the same words."""
    fresh_native.setenv("CROSSFHE_NATIVE_CACHE", str(tmp_path))
    fresh_native.setattr(T, "NATIVE_FLAGS", T.NATIVE_FLAGS + ("-mno-avx512f",))
    native.reset_all()
    assert T.NATIVE.available() and str(tmp_path) in T.NATIVE.status()
    for log_n, pattern in ((6, "wn"), (13, "nwn")):
        plan = T.NTTPlan.create(1 << log_n, _moduli(1 << log_n, pattern))
        x = _with_edges(plan, seed=log_n)
        y = _native(x, plan)
        np.testing.assert_array_equal(y, _xla(x, plan))
        np.testing.assert_array_equal(_native(y, plan, inverse=True), x)


def test_source_compiles_without_warnings():
    """rns_ntt.c compiles cleanly under -Wall -Wextra -Werror, with AVX-512 and without (where a compiler is)."""
    assert T.NATIVE_SOURCE.exists()
    if not T.NATIVE.available():
        pytest.skip(f"no native NTT kernel: {T.NATIVE.status()}")  # nothing to compile with
    cc = os.environ.get("CC", "cc")
    for extra in ((), ("-mno-avx512f",)):
        proc = subprocess.run([cc, *T.NATIVE_FLAGS, *extra, "-Wall", "-Wextra", "-Werror", "-o", os.devnull,
                               str(T.NATIVE_SOURCE)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
