"""Every public TFHE operation on ciphertexts, called for the first time in a fresh process inside a caller's
``jax.jit`` (keys passed as arguments or closed over) or under ``jax.vmap`` over a batch, gives the words of the
eager call: plans and tables are made outside any trace, and the route is a value (no look at tracers).

The operations returning host values (decrypt, phase, noise) and keygen are eager only; encrypt and trivial take
host messages (under vmap there is nothing of theirs to map). The parameters are the smallest test preset with
the key's bits two at a time, so that on a CPU with the native build the blind rotation is the native kernel."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import dataclasses, json, sys
import jax
import numpy as np
from crossfhe import testing
from crossfhe.tfhe import integer, ops

mode = sys.argv[1]
P = dataclasses.replace(testing.INSECURE_TFHE_P2, grouping=2, name="P2_G2")
ck, sk = ops.keygen(P, b"programs".ljust(32, b"\0"))
skn = ops.prepare(sk, product=ops.NTTProduct)
m, m2 = np.array([0, 1, 2, 3, 1, 2]), np.array([3, 1, 0, 2, 2, 1])
f, g = [1, 3, 0, 2], (lambda v: (v + 1) % 4)
own = np.array([np.roll([0, 1, 2, 3], i) for i in range(6)])
s1, s2, s3 = (bytes([i]) * 32 for i in (1, 2, 3))
res = {}


def words(x):
    if isinstance(x, (list, tuple)):
        return [words(v) for v in x]
    if isinstance(x, integer.RadixInteger):
        return words(x.blocks)
    if hasattr(x, "a"):
        return [np.asarray(x.b), np.asarray(x.a)]
    return np.asarray(x)


def same(x, y):
    if isinstance(x, list):
        return len(x) == len(y) and all(same(a, b) for a, b in zip(x, y))
    return x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)


if mode == "jit":  # the first call of every operation is traced by the caller's jit
    x = jax.jit(lambda k: ops.encrypt(k, m, s1))(ck)
    y = jax.jit(lambda k: ops.encrypt(k, m2, s2))(ck)
    xi = jax.jit(lambda k: integer.encrypt(k, np.array([1, 2, 3]), bits=2, msg_bits=1, seed=s3))(ck)
    yi = integer.encrypt(ck, np.array([3, 3, 0]), bits=2, msg_bits=1, seed=s1)
    calls = {
        "encrypt": (lambda k: ops.encrypt(k, m, s1), (ck,)),
        "integer.encrypt": (lambda k: integer.encrypt(k, np.array([1, 2, 3]), bits=2, msg_bits=1, seed=s3), (ck,)),
        "trivial": (lambda: ops.trivial(P, m), ()),
        "add": (ops.add, (x, y)),
        "sub": (ops.sub, (x, y)),
        "negate": (ops.negate, (x,)),
        "mul_const": (lambda c: ops.mul_scalar(P, c, 3), (x,)),
        "add_const": (lambda c: ops.add_scalar(P, c, 1), (x,)),
        "keyswitch": (ops.keyswitch, (sk, x)),
        "pbs": (lambda s, c: ops.pbs(s, c, f), (sk, x)),
        "pbs closed over": (lambda c: ops.pbs(sk, c, f), (x,)),
        "pbs ntt": (lambda s, c: ops.pbs(s, c, f), (skn, x)),
        "pbs per input": (lambda s, c: ops.pbs(s, c, own), (sk, x)),
        "pbs_many": (lambda s, c: ops.pbs_many(s, c, [f, g]), (sk, x)),
        "integer.add": (integer.add, (sk, xi, yi)),
        "integer.sub": (integer.sub, (sk, xi, yi)),
        "integer.neg": (integer.neg, (sk, xi)),
        "integer.mul_const": (lambda s, a: integer.mul_const(s, a, 3), (sk, xi)),
        "integer.propagate_carries": (lambda s, a, b: integer.propagate_carries(s, integer.add(s, a, b)), (sk, xi, yi)),
        "integer.eq": (integer.eq, (sk, xi, yi)),
        "integer.ne": (integer.ne, (sk, xi, yi)),
    }
    traced = {name: words(jax.jit(fn)(*args)) for name, (fn, args) in calls.items()}
else:  # the first call of every operation on ciphertexts is traced by the caller's vmap over the batch
    x, y = ops.encrypt(ck, m, s1), ops.encrypt(ck, m2, s2)
    xi = integer.encrypt(ck, np.array([1, 2, 3]), bits=2, msg_bits=1, seed=s3)
    yi = integer.encrypt(ck, np.array([3, 3, 0]), bits=2, msg_bits=1, seed=s1)
    v = lambda fn, *ax: jax.vmap(fn, in_axes=ax)  # noqa: E731
    vi = lambda fn, n: jax.vmap(fn, in_axes=(None,) + (1,) * n, out_axes=1)  # noqa: E731  (blocks first)
    calls = {
        "add": (v(ops.add, 0, 0), (x, y)),
        "sub": (v(ops.sub, 0, 0), (x, y)),
        "negate": (v(ops.negate, 0), (x,)),
        "mul_const": (v(lambda c: ops.mul_scalar(P, c, 3), 0), (x,)),
        "add_const": (v(lambda c: ops.add_scalar(P, c, 1), 0), (x,)),
        "keyswitch": (v(ops.keyswitch, None, 0), (sk, x)),
        "pbs": (v(lambda s, c: ops.pbs(s, c, f), None, 0), (sk, x)),
        "pbs ntt": (v(lambda s, c: ops.pbs(s, c, f), None, 0), (skn, x)),
        "pbs_many": (v(lambda s, c: ops.pbs_many(s, c, [f, g]), None, 0), (sk, x)),
        "integer.add": (vi(integer.add, 2), (sk, xi, yi)),
        "integer.sub": (vi(integer.sub, 2), (sk, xi, yi)),
        "integer.neg": (vi(integer.neg, 1), (sk, xi)),
        "integer.mul_const": (vi(lambda s, a: integer.mul_const(s, a, 3), 1), (sk, xi)),
        "integer.eq": (v(integer.eq, None, 1, 1), (sk, xi, yi)),
    }
    traced = {name: words(fn(*args)) for name, (fn, args) in calls.items()}
eager = {
    "encrypt": lambda: ops.encrypt(ck, m, s1),
    "integer.encrypt": lambda: integer.encrypt(ck, np.array([1, 2, 3]), bits=2, msg_bits=1, seed=s3),
    "trivial": lambda: ops.trivial(P, m),
    "add": lambda: ops.add(x, y),
    "sub": lambda: ops.sub(x, y),
    "negate": lambda: ops.negate(x),
    "mul_const": lambda: ops.mul_scalar(P, x, 3),
    "add_const": lambda: ops.add_scalar(P, x, 1),
    "keyswitch": lambda: ops.keyswitch(sk, x),
    "pbs": lambda: ops.pbs(sk, x, f),
    "pbs closed over": lambda: ops.pbs(sk, x, f),
    "pbs ntt": lambda: ops.pbs(skn, x, f),
    "pbs per input": lambda: ops.pbs(sk, x, own),
    "pbs_many": lambda: ops.pbs_many(sk, x, [f, g]),
    "integer.add": lambda: integer.add(sk, xi, yi),
    "integer.sub": lambda: integer.sub(sk, xi, yi),
    "integer.neg": lambda: integer.neg(sk, xi),
    "integer.mul_const": lambda: integer.mul_const(sk, xi, 3),
    "integer.propagate_carries": lambda: integer.propagate_carries(sk, integer.add(sk, xi, yi)),
    "integer.eq": lambda: integer.eq(sk, xi, yi),
    "integer.ne": lambda: integer.ne(sk, xi, yi),
}
for name, got in traced.items():
    res[name] = bool(same(got, words(eager[name]())))
res["decrypts"] = bool(np.array_equal(ops.decrypt(ck, ops.pbs(sk, x, f)), np.array(f)[m]))
res["native"] = sk.product is ops.NativeProduct
print("RESULT " + json.dumps(res))
"""


# vmap is slow (a second fresh process, about 30 s on CI's 2 cores): jit covers the tracer leak it guards against
@pytest.mark.parametrize("mode", ["jit", pytest.param("vmap", marks=pytest.mark.slow)])
def test_first_call_traced_gives_the_eager_words(mode):
    proc = subprocess.run([sys.executable, "-c", SCRIPT, mode], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-4000:]
    res = json.loads(lines[-1][len("RESULT "):])
    native = res.pop("native")
    assert res.pop("decrypts")
    assert all(res.values()), (mode, native, {k: v for k, v in res.items() if not v})
