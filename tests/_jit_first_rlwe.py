"""Run by tests/test_one_program.py in a fresh process: every public CKKS and BFV evaluation operation is first
called inside a user's jax.jit (and under vmap over a batch), then eagerly; prints one JSON line of results."""

from __future__ import annotations

import json
import sys

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.bfv import ops as B
from crossfhe.ckks import ops as C
from crossfhe.math import random as crandom
from crossfhe.testing import INSECURE_BFV_N256, INSECURE_CKKS_N10


def words(x) -> list:
    return [np.asarray(leaf).tobytes().hex() for leaf in jax.tree_util.tree_leaves(x)]


def ckks_cases():
    p = INSECURE_CKKS_N10
    sk, ek = C.keygen(p, rotations=(1, 2, 3), conjugation=True, seed=bytes(32))
    rng = np.random.default_rng(1)
    x = C.encrypt(ek, C.encode(p, rng.uniform(-1, 1, p.slots)), key=crandom.seed_key(b"x" * 32))
    y = C.encrypt(ek, C.encode(p, rng.uniform(-1, 1, p.slots)), key=crandom.seed_key(b"y" * 32))
    low = C.drop_level(y, p.levels - 1)
    pt = C.encode(p, rng.uniform(-1, 1, p.slots))
    return {
        "encrypt_pk": (lambda k: C.encrypt(ek, pt, key=k), crandom.seed_key(b"k" * 32)),
        "encrypt_sk": (lambda k: C.encrypt(sk, pt, key=k), crandom.seed_key(b"k" * 32)),
        "decrypt": (lambda a: C.decrypt(sk, a).poly, x),
        "add": (lambda a, b: C.add(a, b), x, y),
        "add_levels": (lambda a, b: C.add(a, b), x, low),
        "sub": (lambda a, b: C.sub(a, b), x, y),
        "negate": (lambda a: C.negate(a), x),
        "add_plain": (lambda a: C.add_plain(a, pt), x),
        "sub_plain": (lambda a: C.sub_plain(a, pt), x),
        "mul_plain": (lambda a: C.mul_plain(a, pt), x),
        "add_scalar": (lambda a: C.add_scalar(a, 0.25), x),
        "mul_scalar_int": (lambda a: C.mul_scalar(a, 3), x),
        "mul_scalar": (lambda a: C.mul_scalar(a, 0.5), x),
        "mul": (lambda a, b: C.mul(a, b, ek), x, y),
        "mul_rescale": (lambda a, b: C.rescale(C.mul(a, b, ek)), x, y),
        "rescale": (lambda a: C.rescale(C.mul_plain(a, pt)), x),
        "rotate": (lambda a: C.rotate(a, 1, ek), x),
        "conjugate": (lambda a: C.conjugate(a, ek), x),
        "rotate_many": (lambda a: C.rotate_many(a, (1, 2, 3), ek), x),
        "sum_slots_inner": (lambda a, b: C.add(C.rotate(a, 2, ek), b), x, y),
    }


def bfv_cases():
    p = INSECURE_BFV_N256
    sk, ek = B.keygen(p, rotations=(1,), row_swap=True, seed=bytes(32))
    rng = np.random.default_rng(2)
    enc = lambda tag: B.encrypt(ek, B.encode(p, rng.integers(0, p.t, p.n)), key=crandom.seed_key(tag * 32))  # noqa: E731
    x, y = enc(b"a"), enc(b"b")
    pt = B.encode(p, rng.integers(0, p.t, p.n))
    return {
        "bfv_encrypt_pk": (lambda k: B.encrypt(ek, pt, key=k), crandom.seed_key(b"k" * 32)),
        "bfv_encrypt_sk": (lambda k: B.encrypt(sk, pt, key=k), crandom.seed_key(b"k" * 32)),
        "bfv_add": (lambda a, b: B.add(a, b), x, y),
        "bfv_sub": (lambda a, b: B.sub(a, b), x, y),
        "bfv_negate": (lambda a: B.negate(a), x),
        "bfv_add_plain": (lambda a: B.add_plain(a, pt), x),
        "bfv_sub_plain": (lambda a: B.sub_plain(a, pt), x),
        "bfv_mul_plain": (lambda a: B.mul_plain(a, pt), x),
        "bfv_mul_scalar": (lambda a: B.mul_scalar(a, 7), x),
        "bfv_add_scalar": (lambda a: B.add_scalar(a, 5), x),
        "bfv_mul": (lambda a, b: B.mul(a, b, ek), x, y),
        "bfv_rotate_rows": (lambda a: B.rotate_rows(a, 1, ek), x),
        "bfv_swap_rows": (lambda a: B.swap_rows(a, ek), x),
    }


def stack(cts):
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *cts)


def main() -> None:
    cases = {**ckks_cases(), **bfv_cases()}
    out = {}
    for name, (fn, *args) in cases.items():
        traced = jax.jit(fn)(*args)  # the first call of the process for this operation
        batched = jax.vmap(fn)(*[stack([a, a]) for a in args])
        eager = fn(*args)
        first = jax.tree_util.tree_map(lambda v: v[0], batched)
        out[name] = {"jit": words(traced) == words(eager), "vmap": words(first) == words(eager)}
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
