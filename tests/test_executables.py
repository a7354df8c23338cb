"""Executables kept across processes (crossfhe.math.xla: ``jit(persist=True)``, the eager operations' programs)."""

import dataclasses
import json
import os
import subprocess
import sys
from functools import partial
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from crossfhe import runtime
from crossfhe.math import xla

# A process that counts the executables it loads from the store and those it compiles for it, then runs a workload:
# "random" splits a ChaCha key (one persisted program), "ckks" generates keys, encrypts, multiplies, rotates and
# decrypts at a small insecure set (persisted key generation, encryption, decryption and eager programs), both with
# fixed randomness; it prints the counts and the results.
_SCRIPT = """
import json, sys
import numpy as np
from crossfhe import runtime
from crossfhe.math import xla
counts = {"loaded": 0, "compiled": 0}
load, fresh = xla.load_executable, xla.compile_fresh
def counted_load(path):
    out = load(path)
    counts["loaded"] += out is not None
    return out
def counted_fresh(lowered):
    counts["compiled"] += 1
    return fresh(lowered)
xla.load_executable, xla.compile_fresh = counted_load, counted_fresh
from crossfhe.math import random as crandom
if sys.argv[1] == "random":
    runtime.enable_compilation_cache()
    a, b = crandom._split_pair(crandom.seed_key(bytes(range(32))))
    values = [np.asarray(a.words).tolist(), np.asarray(b.words).tolist()]
else:
    seed_key = crandom.seed_key
    crandom.seed_key = lambda seed=None, **kw: seed_key(bytes(32) if seed is None else seed, **kw)  # same noise
    from crossfhe import CKKSContext
    from crossfhe.testing import INSECURE_CKKS_N10
    ctx = CKKSContext.create(INSECURE_CKKS_N10, rotations=[1], seed=bytes(range(32)), insecure=True)
    x = ctx.encrypt(np.linspace(-1, 1, 50))
    values = ctx.decrypt((x * x + 0.5 * x - 2).rotate(1)).tolist()
print(json.dumps({"values": values, **counts}))
"""


def _run(cache: Path, workload: str) -> dict:
    env = dict(os.environ, CROSSFHE_CACHE_DIR=str(cache), CROSSFHE_JAX_CACHE=str(cache / "jax"))
    out = subprocess.run([sys.executable, "-c", _SCRIPT, workload], capture_output=True, text=True, env=env,
                         timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _three_processes(tmp_path, workload: str) -> dict:
    """The first process compiles and keeps its programs; with the store emptied, the second gets JAX's cached
    compiles (deserialized executables, which must not be kept: serializing one again drops its machine code,
    and its copy fails to run) and compiles its own to keep; the third loads them all and compiles nothing. All
    three give the same words (same randomness)."""
    first = _run(tmp_path, workload)
    assert first["compiled"] > 0 and first["loaded"] == 0
    store = tmp_path / "jax" / "executables"
    assert sorted(store.glob("*.exe"))
    for p in store.iterdir():
        p.unlink()
    second = _run(tmp_path, workload)
    assert second["compiled"] == first["compiled"]
    third = _run(tmp_path, workload)
    assert third["compiled"] == 0 and third["loaded"] == first["compiled"]
    assert first["values"] == second["values"] == third["values"]
    return third


def test_a_later_process_loads_the_program_and_compiles_none(tmp_path):
    got = _three_processes(tmp_path, "random")
    from crossfhe.math import random as crandom

    a, b = crandom._split_pair(crandom.seed_key(bytes(range(32))))  # this process: no store, traced here
    assert got["values"] == [np.asarray(a.words).tolist(), np.asarray(b.words).tolist()]


@pytest.mark.slow  # three processes generating CKKS keys (two minutes on two cores); the test above runs by default
def test_a_later_process_runs_the_ckks_example_without_compiling(tmp_path):
    got = _three_processes(tmp_path, "ckks")
    assert any(p.name.endswith(".consts") for p in (tmp_path / "jax" / "executables").iterdir())
    a = np.linspace(-1, 1, 50)
    # the exact check is the equality of the three processes' values above; this one only says the program computed
    # the right function: INSECURE_CKKS_N10 has a 2^30 scale and a product, a rescale and a rotation (its own tests
    # hold it to about 1e-3)
    assert np.allclose(np.asarray(got["values"])[:49], np.roll(a * a + 0.5 * a - 2, -1)[:49], atol=1e-2)


@partial(xla.jit, persist=True, static_argnames=("k",))
def _scaled(x, *, k):
    return x * k + 1


@dataclasses.dataclass(frozen=True)
class _Hidden:
    a: int
    b: int = dataclasses.field(default=0, repr=False)


class _Opaque:
    pass


@pytest.fixture
def store(tmp_path, monkeypatch):
    """The executable store at a fresh directory for this test; nothing kept in memory before or after."""
    monkeypatch.setattr(runtime, "_EXECUTABLES", [tmp_path / "exe"])
    xla.clear_executables()
    yield tmp_path / "exe"
    xla.clear_executables()


def _files(root: Path) -> list[Path]:
    return sorted(root.glob("*.exe")) if root.exists() else []


def test_a_damaged_or_untrusted_entry_is_never_loaded(store):
    x = jnp.arange(8, dtype=jnp.uint32)
    assert (np.asarray(_scaled(x, k=3)) == np.arange(8) * 3 + 1).all()
    (path,) = _files(store)
    good = path.read_bytes()
    xla.clear_executables()
    path.write_bytes(good[:-40] + bytes(40))  # damaged: checksum fails, the entry is removed and made again
    assert (np.asarray(_scaled(x, k=3)) == np.arange(8) * 3 + 1).all()
    assert xla.load_executable(path) is not None  # made again, whole
    xla.clear_executables()
    os.chmod(path, 0o666)  # writable by others: not loaded (and left alone)
    assert xla.load_executable(path) is None and path.exists()
    os.chmod(path, 0o600)
    assert xla.load_executable(path) is not None


def test_static_arguments_name_their_programs(store):
    x = jnp.arange(4, dtype=jnp.uint32)
    assert (np.asarray(_scaled(x, k=2)) == np.arange(4) * 2 + 1).all()
    assert (np.asarray(_scaled(x, k=5)) == np.arange(4) * 5 + 1).all()
    assert len(_files(store)) == 2
    # every field of a dataclass names it, also one its repr hides; an object without a stable name is not kept
    assert xla._stable(_Hidden(1, 2)) != xla._stable(_Hidden(1, 3))
    assert xla._stable((1, "a", (2.5, None))) == "tuple(1, 'a', tuple(2.5, None))"
    assert xla._stable(_Opaque()) is None and xla._stable((1, _Opaque())) is None


def test_the_optimization_setting_names_the_executable(store, monkeypatch):
    """An executable compiled with JAX's optimizations off (``jax_disable_most_optimizations``) or other
    ``XLA_FLAGS`` is machine code of another quality: a process with other settings never loads it. The test starts
    from the run's own setting (JAX_DISABLE_MOST_OPTIMIZATIONS=1 turns optimizations off) and restores it."""
    import jax

    parts = ["a program", "its structure"]
    setting = bool(jax.config.values.get("jax_disable_most_optimizations"))
    here = xla.executable_path(parts)
    jax.config.update("jax_disable_most_optimizations", not setting)
    try:
        other = xla.executable_path(parts)
    finally:
        jax.config.update("jax_disable_most_optimizations", setting)
    assert here != other and xla.executable_path(parts) == here
    flags = os.environ.get("XLA_FLAGS")
    monkeypatch.setenv("XLA_FLAGS", f"{flags or ''} --xla_backend_optimization_level=1".strip())
    xla._machine.cache_clear()
    try:
        assert xla.executable_path(parts) not in (here, other)
    finally:
        if flags is None:
            monkeypatch.delenv("XLA_FLAGS")
        else:
            monkeypatch.setenv("XLA_FLAGS", flags)
        xla._machine.cache_clear()
    assert xla.executable_path(parts) == here


def test_a_nested_function_cannot_be_persisted():
    def inner(x):
        return x

    with pytest.raises(ValueError, match="module-level"):
        xla.jit(inner, persist=True)


def test_an_executable_that_lost_its_code_is_compiled_again():
    """A kept executable whose machine code is missing fails on its first call with XLA's NOT_FOUND "Function ...
    not found" (one serialized after JAX's cache had deserialized it); the wrapper then compiles again once (heal) and
    answers; any other error propagates unchanged."""
    import jax

    lost = jax.errors.JaxRuntimeError("NOT_FOUND: Function wrapped_iota not found (type id: 1)")

    def broken(*args):
        raise lost

    calls = []

    def heal(*args):
        calls.append(args)
        return lambda x: x + 1

    exe = xla.Executable(broken, "f", heal)
    assert exe(41) == 42 and exe(1) == 2 and calls == [(41,)]  # healed once, then the new executable
    assert xla.lost_code(lost) and not xla.lost_code(ValueError("Function not found"))
    other = xla.Executable(lambda x: 1 / 0, "g", heal)
    with pytest.raises(ZeroDivisionError):
        other(1)
    with pytest.raises(jax.errors.JaxRuntimeError):
        xla.Executable(broken, "h")(1)  # nothing to heal with: the error as it came


def test_a_kept_program_that_lost_its_code_is_dropped_for_good(store, monkeypatch):
    """A jit(persist=True) program loaded from the store whose first run reports lost code (XLA's NOT_FOUND "Function
    ... not found", raised when the result is read): the call still answers (compiled here), the file is removed and
    its path marked, so it is never kept again."""
    import jax

    x = jnp.arange(8, dtype=jnp.uint32)
    assert (np.asarray(_scaled(x, k=4)) == np.arange(8) * 4 + 1).all()
    (path,) = _files(store)
    xla.clear_executables()

    class Lost:  # what deserialize_and_load gives for such a file: it loads, its run fails
        in_tree = xla.load_executable(path).in_tree

        def __call__(self, *args, **kwargs):
            raise jax.errors.JaxRuntimeError("NOT_FOUND: Function multiply_add_fusion not found (type id: 1)")

    with monkeypatch.context() as m:
        m.setattr(xla, "load_executable", lambda p: Lost() if p == path else None)
        assert (np.asarray(_scaled(x, k=4)) == np.arange(8) * 4 + 1).all()
    assert not path.exists() and path.with_suffix(".lost").exists()
    xla.clear_executables()
    assert (np.asarray(_scaled(x, k=4)) == np.arange(8) * 4 + 1).all()
    assert not path.exists() and runtime.executable_cache() == store  # compiled again in the store's process, not kept
