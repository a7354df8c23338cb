"""crossfhe.math.xla.jit: the CPU compile options change the code, never the words, and stay off nested jits."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from crossfhe.math import xla
from crossfhe.math.primes import ntt_primes
from crossfhe.ring.ntt import NTTPlan, intt, ntt, ntt_reference

N = 1 << 10
MODULI = ntt_primes(30, N, 2)


@pytest.fixture
def enabled():
    old = xla.ENABLED
    yield
    xla.ENABLED = old


def _data(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 2**62, size=(2, len(MODULI), N)) % np.array(MODULI, dtype=np.int64)[:, None]).astype(
        np.uint32
    )


def test_options_give_the_same_words(enabled):
    """An NTT round trip with and without the CPU options: the same words, and the reference's."""
    plan = NTTPlan.create(N, MODULI)
    x = jnp.asarray(_data())
    outs = {}
    for flag in (False, True):
        xla.ENABLED = flag
        outs[flag] = (np.asarray(ntt(x, plan)), np.asarray(intt(ntt(x, plan), plan)))
    np.testing.assert_array_equal(outs[True][0], outs[False][0])
    np.testing.assert_array_equal(outs[True][1], np.asarray(x))
    np.testing.assert_array_equal(outs[True][0][0], ntt_reference(np.asarray(x)[0], plan))


def test_options_only_at_top_level(enabled):
    """Top-level calls compile with CPU_OPTIONS, whatever the backend; calls while a trace is in progress (a
    user's jit or vmap) use the plain jit, which JAX requires (it refuses options on a nested jit)."""
    seen = []
    f = xla.jit(lambda a: a * 3 + 1)

    def spy(name, fn):
        def call(*args, **kwargs):
            seen.append(name)
            return fn(*args, **kwargs)

        return call

    f._cpu, f._plain = spy("cpu", f._cpu), spy("plain", f._plain)
    x = jnp.arange(8, dtype=jnp.uint32)
    xla.ENABLED = True
    top = f(x)
    nested = jax.jit(lambda a: f(a) + 1)(x)
    mapped = jax.vmap(f)(x.reshape(2, 4))
    xla.ENABLED = False
    off = f(x)
    assert seen == ["cpu", "plain", "plain", "plain"]
    np.testing.assert_array_equal(np.asarray(top), np.arange(8) * 3 + 1)
    np.testing.assert_array_equal(np.asarray(nested), np.arange(8) * 3 + 2)
    np.testing.assert_array_equal(np.asarray(mapped).reshape(-1), np.asarray(off))


def test_static_arguments_and_decorator_forms():
    """``@jit``, ``partial(jit, static_argnames=...)`` and ``jit(f, ...)`` behave as jax.jit does."""

    @xla.jit
    def plain(a):
        return a + 1

    @xla.jit(static_argnames=("k",))
    def static(a, *, k):
        return a * k

    assert int(plain(jnp.uint32(1))) == 2
    assert int(static(jnp.uint32(3), k=5)) == 15
    assert static.__name__ == "static"
    with pytest.raises(ValueError):  # a non-hashable static argument is refused, as by jax.jit
        static(jnp.uint32(3), k=np.arange(2))


@xla.jit
def _scaled(x):
    return (x * jnp.uint32(3) + jnp.uint32(1)) % jnp.uint32(7)


@xla.jit
def _summed(x, y):
    return x + y


def _two_reads(x):
    a = _scaled(x)  # read by both kernels below
    return _summed(a, a), _summed(a, x)


def test_materializing_program_keeps_each_kernel_result_once():
    """Program(materialize=True): the same words as without; each array a kernel called directly returns goes through
    one conditional (what XLA:CPU cannot fuse through, so a result read twice is computed once), none inside the
    kernels, and none without the option; traced inside another program, a materializing Program keeps its own
    conditionals and a plain one takes the outer one's setting. ``inline`` with the program's constants gives the
    same words inside a caller's trace, the constants the caller's arguments."""
    x = jnp.arange(64, dtype=jnp.uint32) * jnp.uint32(2654435761)
    plain = xla.Program(_two_reads)
    kept = xla.Program(_two_reads, materialize=True)
    for a, b in zip(plain(x), kept(x), strict=True):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    assert np.array_equal(np.asarray(kept(x)[0]), 2 * ((np.asarray(x) * 3 + 1) % 7))
    # runtime conditionals left in the optimized program (the barriers' platform choice is folded away on the CPU)
    cases = lambda p: p.lower(x).compile().as_text().count(" conditional(")  # noqa: E731
    assert cases(plain) == 0
    assert cases(kept) == 3  # a, and each sum
    both = lambda v: plain(v)[0] + kept(v)[1]  # noqa: E731 - each traced inline: a twice, one sum of each
    assert cases(xla.Program(both, materialize=True)) == 3  # the two a's, the same words, are one after XLA's CSE
    assert cases(xla.Program(both)) == 2  # kept's a and its sum read by [1] (the other sum is dead code)
    table = jnp.arange(64, dtype=jnp.uint32) * jnp.uint32(40503)
    reads = xla.Program(lambda v: _summed(v, table), materialize=True)  # the table: a constant of the trace
    (const,) = reads.constants(x)
    assert np.array_equal(np.asarray(const), np.asarray(table))
    inline = jax.jit(lambda t, v: reads.inline((t,), v))  # the caller passes the table
    assert np.array_equal(np.asarray(inline(const, x)), np.asarray(x + table))
    assert not re.search(r"constant dense<.*> : tensor<64x", inline.lower(const, x).as_text())  # none embedded
    with pytest.raises(ValueError, match="0 constants given, the program takes 1"):
        reads.inline((), x)


def test_barriers_read_a_runtime_word_on_the_cpu_only():
    """fusion_barrier and after are conditionals on a runtime word where the program is compiled for a CPU (what keeps
    XLA:CPU from fusing and reordering through them) and read nothing on the host elsewhere: exported for CUDA, no
    comparison (their predicate) is left, and after orders through an optimization barrier. The same words."""
    from crossfhe.math.modular import after, fusion_barrier

    x, t = jnp.arange(8, dtype=jnp.uint32), jnp.arange(4, dtype=jnp.uint32) * jnp.uint32(7)
    f = jax.jit(lambda v, w: fusion_barrier(v * 3 + 1, w) * 5 + after(v ^ 1, w * 2))
    assert np.array_equal(np.asarray(f(x, t)), (np.asarray(x) * 3 + 1) * 5 + (np.asarray(x) ^ 1))
    assert f.lower(x, t).compile().as_text().count(" conditional(") == 2
    cpu, cuda = (jax.export.export(f, platforms=(p,))(x, t).mlir_module() for p in ("cpu", "cuda"))
    assert cpu.count("stablehlo.compare") == 2 and "optimization_barrier" not in cpu
    assert cuda.count("stablehlo.compare") == 0 and "stablehlo.optimization_barrier" in cuda
