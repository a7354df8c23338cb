"""Whole workloads as one compiled program each (crossfhe.math.xla.Program): a CKKS bootstrap
(bootstrap.bootstrap_program), an HELR iteration (helr.train(one_program=True)), BFV HMVP (hmvp.hmvp_program) and
both directions of the CKKS <-> TFHE switch (ckks_to_lwe_program, ckks_to_tfhe_program, tfhe_to_ckks_program)
dispatch exactly one executable per call once compiled (crossfhe.testing.trace.programs: calls of the library's
jitted programs made at top level), give the words of the same workload run operation by operation (the default),
and take their keys and tables as arguments (no large constant in the lowered program).

Each of these programs holds every operation of its workload once per occurrence (XLA inlines them all), tens to
hundreds of thousands of lines of StableHLO; with each kernel's results materialized (``Program(materialize=True)``)
they compile in seconds to a minute. The tests that take more than about 20 s on one CPU are marked slow, each with
what it compiles."""

from __future__ import annotations

import re

import jax
import numpy as np
import pytest

from crossfhe.bfv import ops as B
from crossfhe.ckks import bootstrap as bt
from crossfhe.ckks import ops as C
from crossfhe.linalg import hmvp as H
from crossfhe.math import random as crandom
from crossfhe.testing import INSECURE_BFV_N256_COEFF


def _once(counter, call):
    """The result of ``call()`` after a warm-up call, and the programs that second call dispatched."""
    call()
    counter.calls.clear()
    out = jax.block_until_ready(call())
    return out, list(counter.calls)


def _same_words(a, b) -> bool:
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return len(la) == len(lb) and all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(la, lb))


_DENSE = re.compile(r'dense<"0x([0-9A-Fa-f]*)"')


def _largest_constant(text: str) -> int:
    """Bytes of the largest hex-encoded dense constant in a lowered program's text."""
    return max((len(m.group(1)) // 2 for m in _DENSE.finditer(text)), default=0)


# --- CKKS: ops.bootstrap is gone (ops no longer imports bootstrap) -----------------------------------------------


def test_ckks_ops_has_no_bootstrap():
    assert not hasattr(C, "bootstrap")


# --- HMVP ---------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bfv_keys():
    p = INSECURE_BFV_N256_COEFF
    return B.keygen(p, galois_elements=H.required_galois_elements(p), relin=False, seed=bytes(range(32)))


def _hmvp_case(keys, m, n, r):
    p = INSECURE_BFV_N256_COEFF
    sk, ek = keys
    rng = np.random.default_rng(m + n + r)
    a, v = rng.integers(0, p.t, (m, n)), rng.integers(0, p.t, n)
    vec = H.encrypt_vector(ek, p, v, key=crandom.seed_key(bytes(32)), rows_per_product=r)
    return H.encode_matrix(p, a, rows_per_product=r), vec, a, v


def test_hmvp_is_one_program(bfv_keys, count_programs):
    """One group of R rows: the dot products and the packing's trace steps (log2(N / R) key switches), one
    executable; the words of hmvp (operation by operation); exact."""
    sk, ek = bfv_keys
    mat, vec, a, v = _hmvp_case(bfv_keys, 12, 40, 16)
    out, calls = _once(count_programs, lambda: H.hmvp_program(mat, vec, ek))
    assert calls == ["hmvp"], calls
    ref = H.hmvp(mat, vec, ek)
    assert _same_words(out.ciphertexts, ref.ciphertexts)
    assert np.array_equal(H.decrypt_result(sk, out), H.matvec_reference(a, v, INSECURE_BFV_N256_COEFF.t))


def test_hmvp_program_takes_its_tables_and_keys_as_arguments(bfv_keys):
    sk, ek = bfv_keys
    mat, vec, _, _ = _hmvp_case(bfv_keys, 12, 40, 16)
    galois, shape = H._prepare(mat, vec, ek, H.DEFAULT_ROWS_PER_CALL)
    text = H._HMVP.lower(mat.evals, vec, galois, shape).as_text()
    assert _largest_constant(text) <= 1024


def test_hmvp_two_tiles_is_one_program(bfv_keys, count_programs):
    sk, ek = bfv_keys
    mat, vec, a, v = _hmvp_case(bfv_keys, 300, 40, 16)
    out, calls = _once(count_programs, lambda: H.hmvp_program(mat, vec, ek))
    assert calls == ["hmvp"], calls
    assert len(out.ciphertexts) == 2
    assert _same_words(out.ciphertexts, H.hmvp(mat, vec, ek).ciphertexts)
    assert np.array_equal(H.decrypt_result(sk, out), H.matvec_reference(a, v, INSECURE_BFV_N256_COEFF.t))


def test_hmvp_with_timings_runs_its_stages_apart(bfv_keys):
    sk, ek = bfv_keys
    mat, vec, a, v = _hmvp_case(bfv_keys, 12, 40, 16)
    timings = {}
    out = H.hmvp(mat, vec, ek, timings=timings)
    assert set(timings) == {"dot", "pack"}
    assert np.array_equal(H.decrypt_result(sk, out), H.matvec_reference(a, v, INSECURE_BFV_N256_COEFF.t))


# --- CKKS bootstrapping -------------------------------------------------------------------------------------------

TINY = bt.bootstrappable_params(log_n=10, levels_left=1, dnum=2, cts_levels=1, stc_levels=1, degree=3,
                                double_angle=1, insecure=True)
"""The smallest bootstrap: N 2^10, 4 slots, one level each for CoeffToSlot and SlotToCoeff, EvalMod of degree 3 with
one double angle (imprecise: for the program's structure and words, not for values)."""


@pytest.fixture(scope="module")
def tiny_keys():
    sk, ek = C.keygen(TINY, seed=bytes(range(32)))
    cfg = bt.config_for(TINY, 4, degree=3, double_angle=1)
    return sk, ek, bt.keygen(sk, ek, cfg, seed=bytes(range(1, 33)))


def _tiny_ct(ek, level=0, seed=1):
    rng = np.random.default_rng(seed)
    ct = C.encrypt(ek, C.encode(TINY, rng.uniform(-0.5, 0.5, 4)), key=crandom.seed_key(bytes([seed]) * 32))
    return C.drop_level(ct, level)


# SubSum's 7 rotations, both transforms and EvalMod in one program: about 17 s of compiling on one CPU
def test_bootstrap_is_one_program_with_the_words_of_its_operations(tiny_keys, count_programs):
    sk, ek, bk = tiny_keys
    ct = _tiny_ct(ek)
    out, calls = _once(count_programs, lambda: bt.bootstrap_program(ct, bk))
    assert calls == ["bootstrap"], calls
    ref = bt.bootstrap(ct, bk)
    assert (out.level, out.scale, out.key_id) == (ref.level, ref.scale, ref.key_id)
    assert _same_words((out.c0, out.c1), (ref.c0, ref.c1))
    # another input scale, the same level: the same program (the scale is left out of its structure)
    entries = len(bt._BOOTSTRAP._entries)
    other = C.rescale(C.mul_plain(_tiny_ct(ek, level=1, seed=2), C.encode(TINY, np.ones(4), level=1)))
    assert other.level == 0 and other.scale != ct.scale
    got = bt.bootstrap_program(other, bk)
    assert len(bt._BOOTSTRAP._entries) == entries and got.scale == pytest.approx(other.scale, rel=1e-12)
    assert _same_words((got.c0, got.c1), (lambda r: (r.c0, r.c1))(bt.bootstrap(other, bk)))


def test_bootstrap_plan_and_keys_are_arguments(tiny_keys):
    """The plan (encoded transforms) and the keys are arguments: none of their arrays is among the program's
    constants (the tables its operations read: NTT, key-switching, rescaling plans), and the lowered text embeds no
    dense constant larger than a few words."""
    sk, ek, bk = tiny_keys
    ct = _tiny_ct(ek)
    pl = bt.plan_for(TINY, bk.config)
    anon_ct, anon_keys = bt._anonymous(ct, bk)
    consts = bt._BOOTSTRAP.constants(anon_ct, anon_keys, pl)
    argument_ids = {id(x) for x in jax.tree_util.tree_leaves((pl, bk))}
    assert consts and not any(id(c) in argument_ids for c in consts)
    assert _largest_constant(bt._BOOTSTRAP.lower(anon_ct, anon_keys, pl).as_text()) <= 1024


@pytest.mark.slow  # both transforms (two levels each) and EvalMod in one program at N 2^6: compiling
def test_real_bootstrap_program_has_the_words_of_its_operations(count_programs):
    """real=True as one program (the real first factor an argument like the plan): the words of the operation-by-
    operation real path, and EvalMod once in it."""
    p = bt.bootstrappable_params(log_n=6, levels_left=1, dnum=2, cts_levels=2, stc_levels=2, degree=3,
                                 double_angle=1, insecure=True)
    sk, ek = C.keygen(p, seed=bytes(range(5, 37)))
    bk = bt.keygen(sk, ek, bt.config_for(p, degree=3, double_angle=1), seed=bytes(range(6, 38)))
    rng = np.random.default_rng(3)
    ct = C.drop_level(C.encrypt(ek, C.encode(p, rng.uniform(-0.5, 0.5, p.slots))), 0)
    assert bt.real_first_factor(p, bk.config) is not None  # N/2 slots: the real path applies
    out, calls = _once(count_programs, lambda: bt.bootstrap_program(ct, bk, real=True))
    assert calls == ["bootstrap"], calls
    ref = bt.bootstrap(ct, bk, real=True)
    assert (out.level, out.scale) == (ref.level, ref.scale)
    assert _same_words((out.c0, out.c1), (ref.c0, ref.c1))


@pytest.mark.slow  # the N 2^11 bootstrap as one program: about 45 s and 2 GB to compile
def test_bootstrap_program_at_n11_has_the_words_of_its_operations():
    from crossfhe.testing import INSECURE_CKKS_BOOT_N11 as P

    sk, ek = C.keygen(P, seed=bytes(range(32)))
    bk = bt.keygen(sk, ek, seed=bytes(range(1, 33)))
    rng = np.random.default_rng(11)
    ct = C.drop_level(C.encrypt(ek, C.encode(P, rng.uniform(-1, 1, P.slots))), 0)
    out = bt.bootstrap_program(ct, bk)
    ref = bt.bootstrap(ct, bk)
    assert (out.level, out.scale) == (ref.level, ref.scale)
    assert _same_words((out.c0, out.c1), (ref.c0, ref.c1))


# --- HELR ---------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def helr_setup():
    from crossfhe.apps import datasets, helr

    p = bt.bootstrappable_params(log_n=11, levels_left=helr.DEPTH, log_scale=52, dnum=3, cts_levels=2, stc_levels=2,
                                 insecure=True)
    s = datasets.breast_cancer(train=100, seed=1)
    x, y = s.x_train[:, :12], s.y_train
    layout = helr.Layout(len(x), 13, p.slots)
    sk, ek = C.keygen(p, rotations=layout.rotations(), seed=bytes(range(32)))
    keys = bt.keygen(sk, ek, helr.bootstrap_config(p, layout), seed=bytes(range(1, 33)))
    data = helr.encrypt_data(ek, p, x, y)
    v0 = C.encrypt(ek, C.encode(p, np.zeros(p.slots)), key=crandom.seed_key(b"v" * 32))
    return helr, p, keys, data, v0


@pytest.mark.slow  # about 30 key switches: two programs (the first iteration, the others) of minutes each
def test_helr_iteration_is_one_program_with_the_words_of_its_operations(helr_setup, count_programs):
    helr, p, keys, data, v0 = helr_setup
    ev_keys = keys.evaluation
    gamma, eta = helr.step_sizes(3, 3.0), helr.nesterov(3)
    w1, v1 = helr._iteration(data, v0, None, float(gamma[0]), float(eta[0]), 2.0, ev_keys)
    args = (data, bt.bootstrap(v1, keys), w1, float(gamma[2]), float(eta[2]), 2.0, ev_keys)
    (w2, v2), calls = _once(count_programs, lambda: helr._iteration(*args, step=helr._iteration_program))
    assert calls == ["helr_iteration"], calls
    ref = helr._iteration(*args)
    assert _same_words((w2, v2), ref)
    assert [(c.level, c.scale) for c in (w2, v2)] == [(c.level, c.scale) for c in ref]
    # eta_1 = 0: the momentum term is a product by zero, the words of leaving it out
    args = (data, args[1], w1, float(gamma[1]), 0.0, 2.0, ev_keys)
    no_momentum = helr._iteration_steps(data.z, args[1], None, helr._constants(*args[:2], None, *args[3:6]), ev_keys)
    assert _same_words(helr._iteration(*args, step=helr._iteration_program), no_momentum)


@pytest.mark.slow  # trains 4 iterations twice (3 bootstraps each): the programs of the test above and the bootstrap's
def test_helr_training_through_programs_equals_its_operations(helr_setup):
    helr, p, keys, data, v0 = helr_setup
    run = lambda step: helr._train(data, keys, v0, 4, 3.0, 2.0, None, helr.Stats(), step)  # noqa: E731
    before = len(helr._ITERATION._entries)
    w = run(helr._iteration_program)
    assert len(helr._ITERATION._entries) - before <= 2  # the first iteration and the others
    assert _same_words(w, run(helr._iteration_steps))


# --- CKKS <-> TFHE ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def switch_setup():
    from crossfhe import testing
    from crossfhe.api.ckks import CKKSContext
    from crossfhe.api.switch import SchemeSwitch
    from crossfhe.api.tfhe import TFHEContext
    from crossfhe.convert import switch as sw
    from crossfhe.tfhe import ops as tops

    ck = CKKSContext.create(testing.INSECURE_CKKS_BOOT_N11, insecure=True, seed=b"switch-ckks".ljust(32, b"\0"),
                            progress=None)
    tf = TFHEContext.create(testing.INSECURE_TFHE_P4, insecure=True, seed=b"switch-tfhe".ljust(32, b"\0"),
                            progress=None)
    s = SchemeSwitch.create(ck, tf, slots=8, seed=b"switch-keys".ljust(32, b"\0"), progress=None)
    return sw, tops, ck, tf, s


@pytest.mark.slow  # SlotToCoeff of 8 slots, the ring key switch, extraction and a bootstrap: minutes of compiling
def test_ckks_to_tfhe_is_one_program_with_the_words_of_its_operations(switch_setup, count_programs):
    sw, tops, ck, tf, s = switch_setup
    qz = sw.Quantizer(-2.0, 2.0, 3, tf.params.message_bits)
    ct = ck.encrypt(np.linspace(-2, 2, 8)).ct
    lwe, calls = _once(count_programs, lambda: sw.ckks_to_lwe_program(ct, s.keys, qz, 8))
    assert calls == ["ckks_to_tfhe"], calls
    assert _same_words(lwe, sw.ckks_to_lwe(ct, s.keys, qz, 8))
    table = np.arange(8)[::-1].copy()
    out, calls = _once(count_programs, lambda: sw.ckks_to_tfhe_program(ct, s.keys, qz, 8, table=table))
    assert calls == ["ckks_to_tfhe"], calls
    assert _same_words(out, sw.ckks_to_tfhe(ct, s.keys, qz, 8, table=table))
    other = sw.ckks_to_tfhe_program(ct, s.keys, qz, 8, table=np.arange(8))  # another table: the same program
    assert np.array_equal(tops.decrypt(tf.secret_key, other), qz.quantize(np.linspace(-2, 2, 8)))


@pytest.mark.slow  # the TFHE bootstrap, PackLWEs and half a CKKS bootstrap in one program: many minutes of compiling
def test_tfhe_to_ckks_is_one_program_with_the_words_of_its_operations(switch_setup, count_programs):
    sw, tops, ck, tf, s = switch_setup
    lwe = tf.encrypt(np.array([0, 3, 15, 7, 9])).ct
    out, calls = _once(count_programs, lambda: sw.tfhe_to_ckks_program(lwe, s.keys, table=np.arange(16)[::-1].copy()))
    assert calls == ["tfhe_to_ckks"], calls
    ref = sw.tfhe_to_ckks(lwe, s.keys, table=np.arange(16)[::-1].copy())
    assert (out.level, out.scale) == (ref.level, ref.scale)
    assert _same_words((out.c0, out.c1), (ref.c0, ref.c1))
