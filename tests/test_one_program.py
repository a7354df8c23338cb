"""One compiled program per operation (CKKS and BFV): every public evaluation operation, called first inside a
user's jax.jit in a fresh process (and under vmap over a batch), gives the eager words; an eager call is one call
of one of the library's jitted programs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from crossfhe.bfv import ops as B
from crossfhe.ckks import ops as C
from crossfhe.math import random as crandom
from crossfhe.math import xla
from crossfhe.testing import INSECURE_BFV_N256, INSECURE_CKKS_N10

SCRIPT = Path(__file__).with_name("_jit_first_rlwe.py")


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


class _Count:
    def __init__(self):
        self.calls = []

    def __call__(self, original):
        def call(obj, *args, **kwargs):
            if xla._top_level is None or xla._top_level():
                self.calls.append(obj.__name__)
            return original(obj, *args, **kwargs)

        return call


@pytest.fixture
def count_programs(monkeypatch):
    counter = _Count()
    monkeypatch.setattr(xla._Jit, "__call__", counter(xla._Jit.__call__))
    return counter


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
    "add_lower_level": lambda ek, x, y, pt: C.add(x, C.drop_level(y, y.level - 1)),
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
}


@pytest.mark.parametrize("name", list(CKKS_OPS))
def test_ckks_eager_operation_is_one_program(ckks, count_programs, name):
    p, ek, x, y, pt = ckks
    if name == "rescale":
        x = C.mul_plain(x, pt)
    CKKS_OPS[name](ek, x, y, pt)  # compiled here
    count_programs.calls.clear()
    CKKS_OPS[name](ek, x, y, pt)
    assert len(count_programs.calls) == 1, count_programs.calls


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
