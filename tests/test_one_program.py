"""One compiled program per operation (CKKS, BFV and TFHE): every public evaluation operation, called first inside a
user's jax.jit in a fresh process (and under vmap over a batch), gives the eager words; an eager call is one call
of one of the library's jitted programs, dispatches one executable (counted in a profiler trace, so a stray eager
``jax.numpy`` call would count too) and copies nothing between host and device (its plans, tables and Galois
elements are device arrays made once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from crossfhe.bfv import ops as B
from crossfhe.ckks import ops as C
from crossfhe.math import random as crandom
from crossfhe.testing import INSECURE_BFV_N256, INSECURE_CKKS_N10, INSECURE_TFHE_P4
from crossfhe.testing.trace import profile
from crossfhe.tfhe import ops as T

SCRIPT = Path(__file__).with_name("_jit_first_rlwe.py")


# slow: a fresh process compiling every RLWE operation twice (about 66 s on CI's 2 cores); the default run keeps
# the same check for TFHE (tests/tfhe/test_programs.py) and eager == user jit per operation (test_front_end.py)
@pytest.mark.slow
def test_every_operation_first_called_inside_a_user_jit():
    """A fresh process (no plan or table made before), each operation's first call traced by the user's jit: no
    tracer leaks into a cache (the plans are built concretely), and jit and vmap give the eager words."""
    env = {**os.environ, "PYTHONPATH": str(SCRIPT.parent.parent)}
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(results) >= 25
    bad = {name: r for name, r in results.items() if not (r["jit"] and r["vmap"])}
    assert not bad, bad


@pytest.fixture(scope="module")
def ckks():
    p = INSECURE_CKKS_N10
    sk, ek = C.keygen(p, rotations=(1, 2), conjugation=True, seed=bytes(32))
    rng = np.random.default_rng(3)
    x = C.encrypt(ek, C.encode(p, rng.uniform(-1, 1, p.slots)), key=crandom.seed_key(b"x" * 32))
    y = C.encrypt(ek, C.encode(p, rng.uniform(-1, 1, p.slots)), key=crandom.seed_key(b"y" * 32))
    return p, ek, x, y, C.encode(p, rng.uniform(-1, 1, p.slots))


@pytest.fixture(scope="module")
def bfv():
    p = INSECURE_BFV_N256
    sk, ek = B.keygen(p, rotations=(1,), seed=bytes(32))
    rng = np.random.default_rng(4)
    x = B.encrypt(ek, B.encode(p, rng.integers(0, p.t, p.n)), key=crandom.seed_key(b"a" * 32))
    y = B.encrypt(ek, B.encode(p, rng.integers(0, p.t, p.n)), key=crandom.seed_key(b"b" * 32))
    return p, ek, x, y, B.encode(p, rng.integers(0, p.t, p.n))


CKKS_OPS = {
    "add": lambda ek, x, y, pt: C.add(x, y),
    "add_lower_level": lambda ek, x, y, pt: C.add(x, y),  # y one level down (_operands)
    "sub": lambda ek, x, y, pt: C.sub(x, y),
    "negate": lambda ek, x, y, pt: C.negate(x),
    "add_plain": lambda ek, x, y, pt: C.add_plain(x, pt),
    "mul_plain": lambda ek, x, y, pt: C.mul_plain(x, pt),
    "add_scalar": lambda ek, x, y, pt: C.add_scalar(x, 0.5),
    "mul_scalar": lambda ek, x, y, pt: C.mul_scalar(x, 0.5),
    "mul": lambda ek, x, y, pt: C.mul(x, y, ek),
    "rescale": lambda ek, x, y, pt: C.rescale(x),
    "rotate": lambda ek, x, y, pt: C.rotate(x, 1, ek),
    "conjugate": lambda ek, x, y, pt: C.conjugate(x, ek),
    "rotate_many": lambda ek, x, y, pt: C.rotate_many(x, (1, 2), ek),
    "mul_rescale": lambda ek, x, y, pt: C.mul_rescale(x, y, ek),
}


@pytest.mark.parametrize("name", list(CKKS_OPS))
def test_ckks_eager_operation_is_one_program(ckks, count_programs, name):
    p, ek, x, y, pt = ckks
    x, y = _operands(name, x, y, pt)
    CKKS_OPS[name](ek, x, y, pt)  # compiled here
    count_programs.calls.clear()
    CKKS_OPS[name](ek, x, y, pt)
    assert len(count_programs.calls) == 1, count_programs.calls


def _operands(name, x, y, pt):
    """The operands of CKKS_OPS[name]: x at a scale to rescale, or y one level below x, where the name asks."""
    if name == "rescale":
        return C.mul_plain(x, pt), y
    if name == "add_lower_level":
        return x, C.drop_level(y, y.level - 1)
    return x, y


BFV_OPS = {
    "add": lambda ek, x, y, pt: B.add(x, y),
    "sub": lambda ek, x, y, pt: B.sub(x, y),
    "negate": lambda ek, x, y, pt: B.negate(x),
    "add_plain": lambda ek, x, y, pt: B.add_plain(x, pt),
    "mul_plain": lambda ek, x, y, pt: B.mul_plain(x, pt),
    "mul_scalar": lambda ek, x, y, pt: B.mul_scalar(x, 3),
    "mul": lambda ek, x, y, pt: B.mul(x, y, ek),
    "rotate_rows": lambda ek, x, y, pt: B.rotate_rows(x, 1, ek),
}


@pytest.mark.parametrize("name", list(BFV_OPS))
def test_bfv_eager_operation_is_one_program(bfv, count_programs, name):
    p, ek, x, y, pt = bfv
    BFV_OPS[name](ek, x, y, pt)
    count_programs.calls.clear()
    BFV_OPS[name](ek, x, y, pt)
    assert len(count_programs.calls) == 1, count_programs.calls


def test_encryption_and_decryption_are_one_program(count_programs):
    """Encryption (public and secret key, CKKS and BFV: the samples drawn inside the program) and decryption."""
    p = INSECURE_CKKS_N10
    sk, ek = C.keygen(p, seed=bytes(32))
    pt = C.encode(p, np.ones(4))
    key = crandom.seed_key(b"e" * 32)
    for run in (lambda: C.encrypt(ek, pt, key=key), lambda: C.encrypt(sk, pt, key=key)):
        first = run()
        count_programs.calls.clear()
        again = run()
        assert len(count_programs.calls) == 1, count_programs.calls
        assert (np.asarray(again.c0.data) == np.asarray(first.c0.data)).all()  # the same key, the same words
    ct = C.encrypt(ek, pt, key=key)
    C.decrypt(sk, ct)
    count_programs.calls.clear()
    C.decrypt(sk, ct)
    assert len(count_programs.calls) == 1, count_programs.calls
    bp = INSECURE_BFV_N256
    bsk, bek = B.keygen(bp, seed=bytes(32))
    bpt = B.encode(bp, np.arange(bp.n) % bp.t)
    for km in (bek, bsk):
        B.encrypt(km, bpt, key=key)
        count_programs.calls.clear()
        B.encrypt(km, bpt, key=key)
        assert len(count_programs.calls) == 1, count_programs.calls


@pytest.fixture(scope="module")
def tfhe():
    p = INSECURE_TFHE_P4
    ck, sk = T.keygen(p, seed=bytes(32))
    ct = T.encrypt(ck, np.arange(6) % 16, key=bytes(range(32)))
    return ck, sk, ct


TFHE_OPS = {
    "pbs": lambda sk, ct: T.pbs(sk, ct, np.arange(16)[::-1].copy()),
    "pbs_many": lambda sk, ct: T.pbs_many(sk, ct, [np.arange(16), (np.arange(16) * 3) % 16]),
    "keyswitch": lambda sk, ct: T.keyswitch(sk, ct),
    "add": lambda sk, ct: T.add(ct, ct),
}


def _all_ops(ckks, bfv, tfhe):
    """(name, zero-argument call) for every eager operation of the three schemes, on prepared operands."""
    out = []
    p, ek, x, y, pt = ckks
    for name, f in CKKS_OPS.items():
        a, b = _operands(name, x, y, pt)
        out.append((f"ckks.{name}", lambda f=f, a=a, b=b: f(ek, a, b, pt)))
    bp, bek, bx, by, bpt = bfv
    out += [(f"bfv.{name}", lambda f=f: f(bek, bx, by, bpt)) for name, f in BFV_OPS.items()]
    _, sk, ct = tfhe
    out += [(f"tfhe.{name}", lambda f=f: f(sk, ct)) for name, f in TFHE_OPS.items()]
    return out


def test_eager_operations_dispatch_one_executable(ckks, bfv, tfhe):
    """Every executable a call runs is counted (the profiler's executions), not only the library's programs."""
    counts = {}
    for name, call in _all_ops(ckks, bfv, tfhe):
        call()  # compiled here
        counts[name] = profile(call, calls=2).executions
    assert counts and all(v == 1 for v in counts.values()), {k: v for k, v in counts.items() if v != 1}


def test_eager_operations_copy_nothing_between_host_and_device(ckks, bfv, tfhe):
    """With host-device transfers disallowed, every operation still runs (operands, keys and plans already on the
    device): the plans, the tables and the Galois elements are device arrays made once, not NumPy arguments."""
    refused = {}
    for name, call in _all_ops(ckks, bfv, tfhe):
        call()
        try:
            with jax.transfer_guard("disallow"):
                jax.block_until_ready(call())
        except jax.errors.JaxRuntimeError as e:
            refused[name] = str(e).splitlines()[0][:160]
    assert not refused, sorted(refused)


def test_transfer_guard_catches_a_numpy_argument():
    """The guard the test above relies on refuses a NumPy argument of a compiled call on this backend."""
    f = jax.jit(lambda v: v + 1)
    with jax.transfer_guard("disallow"), pytest.raises(Exception, match="(?i)disallowed host-to-device"):
        f(np.ones(4, np.uint32))


def test_mul_rescale_is_rescale_of_mul(ckks):
    p, ek, x, y, pt = ckks
    one, two = C.mul_rescale(x, y, ek), C.rescale(C.mul(x, y, ek))
    assert (one.level, one.scale) == (two.level, two.scale)
    for u, v in ((one.c0, two.c0), (one.c1, two.c1)):
        assert (np.asarray(u.data) == np.asarray(v.data)).all()


# "hmvp R=16": 52 s cold in a 2-core CI run, slow; R = 1 runs the same packing tree by default
@pytest.mark.parametrize("method", ["hmvp R=1", pytest.param("hmvp R=16", marks=pytest.mark.slow), "diagonal"])
def test_matrix_vector_products_copy_nothing_host_to_device(method):
    """Both matrix-vector methods, at shapes that pad, tile and use several packing levels, copy nothing host to
    device once their plans exist (on a GPU each copy is a synchronous round trip: issue 32's device run)."""
    from crossfhe.linalg import diagonal, hmvp
    from crossfhe.testing import INSECURE_BFV_N256_COEFF

    rng = np.random.default_rng(7)
    if method == "diagonal":
        p, m, n = INSECURE_BFV_N256, 300, 200
        plan = diagonal.plan_matvec(p, m, n)
        sk, ek = B.keygen(p, rotations=plan.rotations, row_swap=plan.row_swap, relin=False, seed=bytes(32))
        a, v = rng.integers(0, p.t, (m, n)), rng.integers(0, p.t, n)
        enc, x = diagonal.encode_matrix(p, a), diagonal.encrypt_vector(p, ek, v)

        def call():
            return diagonal.matvec(enc, x, ek)

        def decrypt(out):
            return diagonal.decrypt_result(sk, out, m)
    else:
        p, m, n, r = INSECURE_BFV_N256_COEFF, 300, 40, int(method.split("=")[1])
        sk, ek = B.keygen(p, galois_elements=hmvp.required_galois_elements(p), relin=False, seed=bytes(32))
        a, v = rng.integers(0, p.t, (m, n)), rng.integers(0, p.t, n)
        mat, x = hmvp.encode_matrix(p, a, rows_per_product=r), hmvp.encrypt_vector(ek, p, v, rows_per_product=r)

        def call():
            return hmvp.hmvp(mat, x, ek)

        def decrypt(out):
            return hmvp.decrypt_result(sk, out)

    call()
    with jax.transfer_guard("disallow"):
        out = call()
        jax.block_until_ready(out.ciphertexts if method != "diagonal" else out)
    assert np.array_equal(decrypt(out), (a @ v) % p.t)
