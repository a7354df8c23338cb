"""Key generation as few compiled programs (core/keys.py, core/keyswitch.py, the schemes' ``keygen``): the number of
programs a CKKS key set dispatches; one executable for every batch of evaluation keys; every batched key exact on its
defining relation b_j + a_j s = e_j + P g_j s' with its own small error; a rotation with a batched key within the
noise bounds; seeded keys reproducible and independent of the batch split; progress one step per key.

Rings: the insecure test sets of crossfhe.testing (CKKS N = 2^10, 5 + 3 primes, dnum 2; BFV N = 2^8).
"""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

from crossfhe.bfv import ops as B
from crossfhe.ckks import bootstrap as BT
from crossfhe.ckks import ops as C
from crossfhe.core import keys as K
from crossfhe.core import keyswitch as KS
from crossfhe.core import rlwe
from crossfhe.math import random as R
from crossfhe.math.rns import RNSBasis, compose
from crossfhe.ring import poly as P
from crossfhe.ring.ntt import NTTPlan
from crossfhe.testing import INSECURE_BFV_N256, INSECURE_CKKS_BOOT_N11, INSECURE_CKKS_N10
from crossfhe.testing.trace import profile

CK = INSECURE_CKKS_N10
ROTATIONS = sorted(set(C.power_of_two_rotations(CK)) | {3, 5, 7, -1})  # 13 Galois keys: 15 keys in all
B_E = K.gaussian_bound(K.SIGMA)


def _executables(fn) -> int:
    """Executables compiled (or loaded) so far for the library jitted function ``fn``."""
    return fn._plain._cache_size() + fn._cpu._cache_size()


@pytest.fixture(scope="module")
def ckks_keys():
    return C.keygen(CK, rotations=ROTATIONS, seed=bytes(range(32)))


def _centered(poly: P.RNSPoly) -> np.ndarray:
    if poly.domain == P.Domain.EVAL:
        poly = P.to_coeff(poly, NTTPlan.create(poly.n, poly.basis))
    return compose(np.asarray(poly.data), RNSBasis(poly.basis), centered=True)


def _negacyclic(a, b, n):
    full = np.convolve(np.asarray(a, dtype=object), np.asarray(b, dtype=object))
    return full[:n] - np.concatenate([full[n:], [0]])


def _automorphism(s, k: int) -> np.ndarray:
    """s(X^k) on integer coefficients: X^i -> X^(k i mod 2N), negated where k i mod 2N >= N."""
    n = len(s)
    out = np.zeros(n, dtype=object)
    for i, c in enumerate(np.asarray(s).astype(object)):
        j = k * i % (2 * n)
        out[j % n] += c if j < n else -c
    return out


def _key_errors(sk: K.SecretKey, ksk: KS.KeySwitchKey, s_from) -> list[np.ndarray]:
    """e_j = b_j + a_j s - P g_j s' centered mod Q_L P for each digit j (exact CRT), s' integer coefficients."""
    qp = ksk.q + ksk.p
    big_qp, big_p = math.prod(qp), math.prod(ksk.p)
    s = np.asarray(sk.coeffs).astype(object)
    out = []
    for j, (start, stop) in enumerate(KS.digit_groups(len(ksk.q), ksk.dnum)):
        d = math.prod(ksk.q[start:stop])
        g = math.prod(ksk.q) // d
        g *= pow(g, -1, d)
        b = _centered(P.RNSPoly(ksk.b.data[j], qp, P.Domain.EVAL))
        a = _centered(P.RNSPoly(ksk.a.data[j], qp, P.Domain.EVAL))
        e = (b + _negacyclic(a, s, sk.n) - big_p * g * np.asarray(s_from, dtype=object)) % big_qp
        out.append(np.where(e > big_qp // 2, e - big_qp, e))
    return out


def _check_key(sk, ksk, s_from) -> list[np.ndarray]:
    errors = _key_errors(sk, ksk, s_from)
    for e in errors:
        assert 0 < max(abs(int(v)) for v in e) <= B_E
    a = KS.expand_keyswitch_a(ksk.seed, ksk.q + ksk.p, ksk.n, ksk.digits)
    assert np.array_equal(np.asarray(a.data), np.asarray(ksk.a.data))
    return errors


# --------------------------------------------------------------------------------------------------
# Programs
# --------------------------------------------------------------------------------------------------


def test_ckks_key_set_of_15_keys_runs_at_most_5_programs_of_3_kinds(ckks_keys, count_programs):
    """Public key, relinearization key and 13 Galois keys: the Rng's three key derivations (one program), the secret
    and public key (one), the relinearization and Galois keys (one batch). The profiler counts every executable run,
    eager jax.numpy work included."""
    sk, ek = C.keygen(CK, rotations=ROTATIONS, seed=bytes(32))
    assert len(ek.galois) == 13 and ek.relin is not None
    assert len(count_programs.calls) <= 5, count_programs.calls
    assert set(count_programs.calls) <= {"_split_pair", "_k_key_pair", "_k_evaluation_keys"}, count_programs.calls
    assert profile(lambda: C.keygen(CK, rotations=ROTATIONS, seed=bytes(32))[1], calls=1).executions <= 5


def test_one_executable_serves_every_batch_and_every_set_of_elements(ckks_keys):
    """Batches of 2 keys: 5 elements make 3 batches (the last padded), another 5 elements 3 more, all through the
    same executable; the keys equal those of one batch and those made one at a time."""
    sk, _ = ckks_keys
    key = R.seed_key(b"g" * 32)
    digits, limbs = len(KS.digit_groups(len(CK.q), CK.dnum)), len(CK.q) + len(CK.p)
    two = 2 * (2 * digits * limbs * CK.n * 4)
    first = [C.rotation_element(CK, r) for r in (1, 2, 3, 4, 5)]
    second = [C.rotation_element(CK, r) for r in (6, 7, 8, 9, -3)]
    KS.gen_galois_keys(sk, CK, key, first[:2], batch_bytes=two)
    before = _executables(KS._k_evaluation_keys)
    batches = list(KS.evaluation_key_batches(sk, CK, key, first, batch_bytes=two))
    assert [len(b) for b in batches] == [2, 2, 1]
    batched = {g: k for b in batches for g, k in b.items()}
    batched.update(KS.gen_galois_keys(sk, CK, key, second, batch_bytes=two))
    assert _executables(KS._k_evaluation_keys) == before
    whole = KS.gen_galois_keys(sk, CK, key, first + second)
    assert sorted(whole) == sorted(batched)
    for g in first + second:
        single = KS.gen_galois_key(sk, CK, key, g)
        for k in (whole[g], single):
            for x, y in zip(jax.tree_util.tree_leaves(batched[g]), jax.tree_util.tree_leaves(k)):
                assert np.array_equal(np.asarray(x), np.asarray(y)), g


# --------------------------------------------------------------------------------------------------
# The keys
# --------------------------------------------------------------------------------------------------


def test_every_batched_key_holds_its_relation_with_fresh_errors(ckks_keys):
    """b_j + a_j s = e_j + P g_j s' exactly, |e_j| <= ceil(13 sigma), for the relinearization key (s' = s^2) and
    every Galois key (s' = s(X^k)); no error polynomial, mask seed or mask repeats across keys or digits."""
    sk, ek = ckks_keys
    s = np.asarray(sk.coeffs).astype(object)
    errors = _check_key(sk, ek.relin, _negacyclic(s, s, sk.n))
    for g, ksk in ek.galois.items():
        errors += _check_key(sk, ksk, _automorphism(s, g))
    assert len({tuple(e) for e in errors}) == len(errors) == 2 * 14
    seeds = [np.asarray(k.seed.words).tobytes() for k in (ek.relin, *ek.galois.values())]
    assert len(set(seeds)) == 14 and np.asarray(ek.public.seed.words).tobytes() not in seeds
    masks = {np.asarray(k.a.data[j]).tobytes() for k in (ek.relin, *ek.galois.values()) for j in range(k.digits)}
    assert len(masks) == 2 * 14


def test_rotation_with_a_batched_key_within_the_noise_bounds(ckks_keys):
    """Decrypt(rotate(Enc(m), r)) - m(X^k) on plaintext coefficients: at most the fresh encryption bound plus the key
    switch's (a Galois automorphism keeps the infinity norm of the fresh error)."""
    sk, ek = ckks_keys
    x = np.random.default_rng(5).uniform(-1, 1, CK.slots)
    pt = C.encode(CK, x)
    ct = C.encrypt(ek, pt, key=R.seed_key(b"e" * 32))
    moduli = pt.poly.basis
    bound = rlwe.fresh_noise_bound(CK.n) + KS.keyswitch_noise_bound(CK.n, moduli, CK.p, CK.dnum, q_limbs=len(CK.q))
    m = _centered(pt.poly)
    big_q = math.prod(moduli)
    for r in (1, 5, -1):
        out = C.decrypt(sk, C.rotate(ct, r, ek))
        err = (_centered(out.poly) - _automorphism(m, C.rotation_element(CK, r))) % big_q
        err = np.where(err > big_q // 2, err - big_q, err)
        assert max(abs(int(v)) for v in err) <= bound, r
        assert np.abs(C.decode(out) - np.roll(x, -r)).max() < 2**-10


def test_relinearization_key_from_the_batch_multiplies(ckks_keys):
    sk, ek = ckks_keys
    rng = np.random.default_rng(6)
    x, y = rng.uniform(-1, 1, CK.slots), rng.uniform(-1, 1, CK.slots)
    cx, cy = (C.encrypt(ek, C.encode(CK, v), key=R.seed_key(bytes([i]) * 32)) for i, v in enumerate((x, y)))
    out = C.decode(C.decrypt(sk, C.rescale(C.mul(cx, cy, ek))))
    assert np.abs(out - x * y).max() < 2**-10


def test_seeded_keys_are_reproducible_and_independent_of_the_other_elements(ckks_keys):
    sk, ek = ckks_keys
    sk2, ek2 = C.keygen(CK, rotations=ROTATIONS, seed=bytes(range(32)))
    for x, y in zip(jax.tree_util.tree_leaves((sk, ek)), jax.tree_util.tree_leaves((sk2, ek2))):
        assert np.array_equal(np.asarray(x), np.asarray(y))
    _, other = C.keygen(CK, rotations=ROTATIONS, seed=bytes(range(1, 33)))
    assert not np.array_equal(np.asarray(other.relin.b.data), np.asarray(ek.relin.b.data))
    key = R.seed_key(b"k" * 32)
    g = C.rotation_element(CK, 3)
    alone = KS.gen_galois_keys(sk, CK, key, [g])[g]
    among = KS.gen_galois_keys(sk, CK, key, [C.rotation_element(CK, 1), g, KS.RELIN])[g]
    assert np.array_equal(np.asarray(alone.b.data), np.asarray(among.b.data))


def test_elements_are_checked():
    sk = K.gen_secret_key(CK, R.seed_key(b"s" * 32))
    with pytest.raises(Exception, match="odd"):
        KS.gen_galois_keys(sk, CK, R.seed_key(b"k" * 32), [4])
    assert KS.gen_galois_keys(sk, CK, R.seed_key(b"k" * 32), []) == {}


# --------------------------------------------------------------------------------------------------
# Progress, BFV, bootstrapping keys
# --------------------------------------------------------------------------------------------------


def test_progress_one_step_per_key_over_several_batches(monkeypatch):
    calls = []
    digits, limbs = len(KS.digit_groups(len(CK.q), CK.dnum)), len(CK.q) + len(CK.p)
    monkeypatch.setattr(KS, "KEY_BATCH_BYTES", 4 * (2 * digits * limbs * CK.n * 4))
    C.keygen(CK, rotations=ROTATIONS, seed=bytes(32), progress=lambda d, t, w: calls.append((d, t, w)))
    assert calls == [(i, 15, "CKKS keys") for i in range(1, 16)]


def test_bfv_keys_through_the_same_batches():
    calls = []
    bp = INSECURE_BFV_N256
    sk, ek = B.keygen(
        bp, rotations=[1], row_swap=True, relin=False, seed=bytes(32), progress=lambda d, t, w: calls.append(d)
    )
    assert ek.relin is None and sorted(ek.galois) == sorted({B.rotation_element(bp, 1), B.row_swap_element(bp)})
    assert calls == [2, 3, 4]
    s = np.asarray(sk.coeffs).astype(object)
    for g, ksk in ek.galois.items():
        _check_key(sk, ksk, _automorphism(s, g))
    _, ek2 = B.keygen(bp, rotations=[1], row_swap=True, seed=bytes(32))
    _check_key(sk, ek2.relin, _negacyclic(s, s, sk.n))


def test_bootstrapping_keys_few_programs_and_exact_encapsulation_keys(count_programs):
    bp = INSECURE_CKKS_BOOT_N11
    sk, ek = C.keygen(bp, seed=bytes(32))
    count_programs.calls.clear()
    keys = BT.keygen(sk, ek, seed=bytes(range(32)))
    calls = [c for c in count_programs.calls if c != "_k_residues"]  # the plan's diagonals, encoded after the keys
    assert set(calls) <= {"_split_pair", "_k_evaluation_keys", "_k_secret", "_k_keyswitch_key_from_secret"}, calls
    assert calls.count("_k_secret") == 1 and calls.count("_k_keyswitch_key_from_secret") == 2
    assert calls.count("_k_evaluation_keys") <= 2
    sparse = K.gen_secret_key(keys.sparse_ring, _second_key(bytes(range(32))), hamming_weight=BT.EPHEMERAL_WEIGHT)
    _check_key(sparse, keys.to_sparse, np.asarray(sk.coeffs).astype(object))
    _check_key(sk, keys.to_dense, np.asarray(sparse.coeffs).astype(object))


def _second_key(seed: bytes) -> R.ChaChaKey:
    """The Rng's second key of ``seed``: the ephemeral secret's in bootstrap.keygen."""
    rng = R.Rng(seed)
    rng.next_key()
    return rng.next_key()
