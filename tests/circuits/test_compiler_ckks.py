"""CKKS circuits: tracing, each pass on its own, the lowered program against NumPy, keys, errors, batches,
sharding, export and the cross-process cache."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import crossfhe.api as fhe
from crossfhe.api import ckks_lower as cc
from crossfhe.api import ir
from crossfhe.ckks import presets
from crossfhe.errors import KeyMismatchError, ParameterError, SerializationError

# Tolerances: the presets' measured precision (crossfhe.ckks.presets) is 2^-12.3 (N13_L3) to 2^-15.5 (N14_L7) per slot
# for values in [-1, 1] after their full depth; the circuits below add up to 16 such terms (4 more bits) and
# values up to 8 in magnitude (3 more), hence 2^-5 absolute on N12/N13 and 2^-8 on N14.
TOL13 = 2.0**-5
TOL14 = 2.0**-8


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CROSSFHE_CACHE_DIR", str(tmp_path / "cache"))


def _trace(fn, *lengths, params=presets.N13_L3, optimize=True):
    return fhe.compile(fn, *(fhe.CKKSVector(n) for n in lengths), params=params, optimize=optimize, cache=False)


def _after(circuit, name):
    return dict(circuit.report)[name]


def _before(circuit, name):
    names = [n for n, _ in circuit.report]
    return circuit.report[names.index(name) - 1][1]


# ---------------------------------------------------------------------------------------------------
# The README circuit
# ---------------------------------------------------------------------------------------------------


# slow: 59 s cold in CI; the README's circuit runs by default in tests/test_docs.py
@pytest.mark.slow
def test_readme_circuit_matches_numpy():
    def f(x, y):
        return x * y + 0.5 * x - 2, x @ y, x.rotate(1)

    c = fhe.compile(f, fhe.CKKSVector(1000), fhe.CKKSVector(1000), params=presets.N14_L7)
    a, b = np.linspace(-1, 1, 1000), np.cos(np.arange(1000))
    c.keygen(seed=bytes(32))
    z, ip, r = c.encrypt_run_decrypt(a, b)
    assert z.shape == r.shape == (1000,) and ip.shape == (1,)  # the inner product is one value, as NumPy's
    # real inputs and real constants give real outputs (a scalar added over a padded length used to make the
    # result complex128, with imaginary parts of the noise's size)
    assert z.dtype == ip.dtype == r.dtype == np.float64
    assert np.abs(z - (a * b + 0.5 * a - 2)).max() < TOL14
    assert np.abs(ip - a @ b).max() < TOL14 * 16
    # np.roll of 1000 values: the rotations by 1 and by 1 - 1000 (mod the padded 1024), combined by masks
    assert np.abs(r - np.roll(a, -1)).max() < TOL14
    # exactly the keys it needs: one relinearization key and the rotations 1 and 25 (rotate), 1..512 (the sum)
    assert c.requirements["rotations"] == sorted([1 << i for i in range(10)] + [25])
    assert c.requirements["relin"] is True
    assert sorted(c.keys.public.galois) == c.requirements["galois_elements"]
    text = str(c)
    assert "tensor" in text and "rescale" in text and "test_compiler_ckks.py" in text


# ---------------------------------------------------------------------------------------------------
# Passes, each on its own
# ---------------------------------------------------------------------------------------------------


def test_cse_merges_equal_products():
    c = _trace(lambda x, y: (x * y) + (x * y) * 2, 8, 8)
    before, after = _before(c, "cse"), _after(c, "cse")
    assert before["tensor_products"] == 2 and after["tensor_products"] == 1


def test_dead_code_drops_unused_values():
    def f(x, y):
        _unused = (x * y).rotate(3)
        return x + y

    c = _trace(f, 8, 8)
    assert dict(c.report)["traced"]["rotations"] == 1
    assert c.cost["rotations"] == 0 and c.cost["tensor_products"] == 0
    assert c.requirements == {"relin": False, "rotations": [], "conjugation": False, "galois_elements": [],
                              "bootstrap": False, "bootstrap_width": 0}


def test_hoisting_shares_one_modup():
    c = _trace(lambda x: x.rotate(1) + x.rotate(2) + x.rotate(3), 8)
    before, after = _before(c, "hoist_rotations"), _after(c, "hoist_rotations")
    assert before["modups"] == 3 and after["modups"] == 1
    assert before["rotations"] == after["rotations"] == 3
    assert c.graph.counts()["rotate_many"] == 1


def test_lazy_relinearization_once_per_sum_of_products():
    c = _trace(lambda x, y, z, w: x * y + z * w - x * w, 8, 8, 8, 8)
    lazy = _after(c, "relinearize (lazy)")
    eager = _after(_trace(lambda x, y, z, w: x * y + z * w - x * w, 8, 8, 8, 8, optimize=False),
                   "relinearize (eager)")
    assert eager["relinearizations"] == 3 and lazy["relinearizations"] == 1


def test_shared_product_is_relinearized_once():
    c = _trace(lambda x, y: (x * y + 1, (x * y).rotate(1)), 8, 8)
    assert c.cost["relinearizations"] == 1


def test_rescales_placed_once_per_sum():
    f = lambda x, y, z, w: x * y + z * w  # noqa: E731
    lazy, eager = _trace(f, 8, 8, 8, 8), _trace(f, 8, 8, 8, 8, optimize=False)
    assert lazy.cost["rescales"] == 1 and eager.cost["rescales"] == 2
    assert lazy.cost["depth"] == eager.cost["depth"] == 1


def test_scalar_factor_reencoded_to_match_a_product_scale():
    # x*y has scale D^2/q, 0.5*x would have D: eager alignment costs a level, the re-encoded factor does not
    c = _trace(lambda x, y: x * y + 0.5 * x, 8, 8)
    assert c.cost["depth"] == 1 and c.cost["rescales"] == 1
    out = [n for n in c.graph.nodes if n.op == "output"][0]
    assert out.attr("level") == presets.N13_L3.levels - 1


def test_operations_run_at_the_lowest_level_their_consumers_need():
    # x.rotate(1) is only added to x*y*y (level L-2, scale D^3/(q q')): aligning its scale D costs it one rescale,
    # so the rotation runs at L-1 instead of L
    def f(x, y):
        return x * y * y + x.rotate(1)

    c = _trace(f, 8, 8)
    rot = [n for n in c.graph.nodes if n.op == "rotate"][0]
    assert rot.attr("level") == presets.N13_L3.levels - 1
    # ... and the input x itself is used at the top level by the product, so it is encrypted there
    assert c.graph.nodes[c.graph.inputs[0]].attr("level") == presets.N13_L3.levels
    g = _trace(lambda x, y: x.rotate(1) + y * 2.0, 8, 8)
    assert g.graph.nodes[g.graph.inputs[0]].attr("level") == presets.N13_L3.levels - 1


def test_each_pass_preserves_the_result():
    """Optimized and unoptimized circuits decrypt to the same values (within the noise)."""
    def f(x, y):
        s = x * y + x * 0.25 - y.rotate(2) * x
        return s + s.rotate(1) + x.rotate(1) * 3, (x - y) @ y

    rng = np.random.default_rng(1)
    a, b = rng.uniform(-1, 1, 8), rng.uniform(-1, 1, 8)
    s = a * b + a * 0.25 - np.roll(b, -2) * a
    want = (s + np.roll(s, -1) + 3 * np.roll(a, -1), np.full(8, (a - b) @ b))
    for optimize in (True, False):
        c = _trace(f, 8, 8, optimize=optimize)
        c.keygen(seed=bytes(32))
        got = c.encrypt_run_decrypt(a, b)
        for g, w in zip(got, want):
            assert np.abs(g - w).max() < TOL13


def test_power_and_polynomial_depth():
    coeffs = [0.5, 0.25, -0.125, 0.0625]

    def poly(x):
        x2 = x * x
        return coeffs[0] + coeffs[1] * x + coeffs[2] * x2 + (coeffs[3] * x) * x2

    c = _trace(poly, 16)
    assert c.cost["depth"] == 2  # c3 x^3 = (c3 x) x^2: two levels
    c.keygen(seed=bytes(32))
    a = np.linspace(-1, 1, 16)
    assert np.abs(c.encrypt_run_decrypt(a) - np.polyval(coeffs[::-1], a)).max() < TOL13
    assert _trace(lambda x: x ** 5, 4).cost["tensor_products"] == 3


def test_factors_sink_to_the_shallower_operand():
    """c (x^2 x) takes three levels as written (and eagerly); sink_factors makes it (c x) x^2, two."""
    c = _trace(lambda x: 0.5 * ((x * x) * x), 4)
    assert _before(c, "sink_factors")["depth"] == 3 and _after(c, "sink_factors")["depth"] == 2
    assert c.cost["depth"] == 2
    c.keygen(seed=bytes(32))
    a = np.linspace(-1, 1, 4)
    assert np.abs(c.encrypt_run_decrypt(a) - 0.5 * a**3).max() < TOL13
    shared = _trace(lambda x: (0.5 * ((x * x) * x), (x * x) * x), 4)  # the product is used twice: left as written
    assert _after(shared, "sink_factors")["depth"] == 3


# ---------------------------------------------------------------------------------------------------
# Errors at compile time, keys, batches
# ---------------------------------------------------------------------------------------------------


def test_depth_error_names_the_line_and_a_preset():
    def deep(x):
        for _ in range(4):
            x = x * x
        return x

    with pytest.raises(fhe.CircuitError, match=r"depth exhausted at test_compiler_ckks.py:\d+.*N14_L7"):
        _trace(deep, 8)
    c = fhe.compile(deep, fhe.CKKSVector(8), cache=False)  # no params: the smallest preset that fits
    assert c.params.digest() == presets.N14_L7.digest()
    assert fhe.compile(lambda x: x * x, fhe.CKKSVector(8), precision=20, cache=False).params.n == 2**16


def test_mixing_schemes_and_bad_operands():
    with pytest.raises(fhe.CircuitError, match="one scheme"):
        fhe.compile(lambda x, y: x + y, fhe.CKKSVector(8), fhe.TFHEInt(4), cache=False)
    with pytest.raises(fhe.CircuitError, match="lengths 8 and 4"):
        _trace(lambda x, y: x + y, 8, 4)
    with pytest.raises(fhe.CircuitError, match="truth value"):
        _trace(lambda x: x if x else x, 8)
    with pytest.raises(fhe.CircuitError, match="not an encrypted value"):
        _trace(lambda x: 3, 8)
    with pytest.raises(fhe.CircuitError, match="finite"):
        _trace(lambda x: x * float("nan"), 8)


def test_keys_checked_before_running():
    c = _trace(lambda x: x.rotate(1) + x, 8)
    other = _trace(lambda x: x * x, 8)
    other.keygen(seed=bytes(32))
    c.keygen(seed=bytes(range(32)))
    ins = c.encrypt(np.arange(8) / 8)
    with pytest.raises(ParameterError, match=r"no Galois key for rotate\(1\) at test_compiler_ckks.py:\d+"):
        c.run(*ins, keys=other.keys.public)
    with pytest.raises(fhe.CircuitError, match=r"rotate\(1\) at test_compiler_ckks.py:\d+"):
        fhe.compile(lambda x: x.rotate(1) + x, fhe.CKKSVector(8), params=presets.N13_L3, keys=other.keys, cache=False)
    with pytest.raises(KeyMismatchError):
        c.run(*c.encrypt(np.arange(8) / 8, keys=other.keys))
    with pytest.raises(ParameterError, match="takes values of shape"):
        c.encrypt(np.arange(7))
    with pytest.raises(ParameterError, match="another circuit"):
        c.run(*other.encrypt(np.arange(8) / 8))


def test_batches_run_itemwise():
    c = _trace(lambda x, y: (x * y).sum() + y, 4, 4)
    c.keygen(seed=bytes(32))
    rng = np.random.default_rng(2)
    a, b = rng.uniform(-1, 1, (3, 2, 4)), rng.uniform(-1, 1, (3, 2, 4))
    out = c.encrypt_run_decrypt(a, b)
    assert out.shape == (3, 2, 4)
    assert np.abs(out - ((a * b).sum(-1, keepdims=True) + b)).max() < TOL13
    with pytest.raises(ParameterError, match="batch shapes"):
        c.encrypt(a, b[0])


# slow: 54 s cold in CI; batches run item-wise by default (test_batches_run_itemwise)
@pytest.mark.slow
def test_sharded_batch_equals_one_device():
    """With two host devices the batch is sharded; the words are those of one device."""
    script = textwrap.dedent("""
        import numpy as np, jax
        import crossfhe.api as fhe
        from crossfhe.ckks import presets
        assert len(jax.local_devices()) == 2
        c = fhe.compile(lambda x, y: (x * y + x.rotate(1), (x - y).sum()), fhe.CKKSVector(8), fhe.CKKSVector(8),
                        params=presets.N12_L1, cache=False)
        c.keygen(seed=bytes(32))
        rng = np.random.default_rng(0)
        ins = c.encrypt(rng.uniform(-1, 1, (4, 8)), rng.uniform(-1, 1, (4, 8)))
        one, two = c.run(*ins, devices=jax.local_devices()[:1]), c.run(*ins)
        assert len(two[0].leaves[0].sharding.device_set) == 2
        for p, q in zip(one, two):
            for u, v in zip(p.leaves, q.leaves):
                assert np.array_equal(np.asarray(u), np.asarray(v))
        print("ok")
    """)
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2")
    res = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-3000:]


# ---------------------------------------------------------------------------------------------------
# Export, load, cache
# ---------------------------------------------------------------------------------------------------


def test_export_after_a_run_writes_the_program_it_ran(tmp_path, monkeypatch):
    """A circuit run through the circuit cache (the autouse fixture's temporary one) holds its exported program;
    export writes that program (the cache entry's bytes) for the batch shape and keys it ran with, without lowering
    it again; another batch shape is lowered anew."""
    from crossfhe.io import circuit_file

    c = fhe.compile(lambda x, y: x * y + x.rotate(1), fhe.CKKSVector(8), fhe.CKKSVector(8), params=presets.N13_L3)
    c.keygen(seed=bytes(32))
    a, b = np.linspace(-1, 1, 8), np.linspace(1, 0, 8)
    assert np.abs(c.decrypt(*c.run(*c.encrypt(a, b))) - (a * b + np.roll(a, -1))).max() < TOL13
    assert c.timings["sources"] == ["exported"]
    lowered, lower = [], c._lower_exported
    monkeypatch.setattr(c, "_lower_exported", lambda batch, *a: lowered.append(batch) or lower(batch, *a))
    _, body = circuit_file.read_circuit_file(c.export(tmp_path / "f.circuit"))
    (cached,) = (tmp_path / "cache" / "circuits").glob("*.jaxexport")
    assert cached.read_bytes()[:-32] == body and lowered == []
    _, batched = circuit_file.read_circuit_file(c.export(tmp_path / "g.circuit", batch_shape=(2,)))
    assert batched != body and lowered == [(2,)]


def test_export_and_load(tmp_path):
    c = _trace(lambda x, y: x * y + x.rotate(1), 8, 8)
    c.keygen(seed=bytes(32))
    path = c.export(tmp_path / "f.circuit")
    loaded = fhe.load(path, presets.N13_L3)
    assert str(loaded) == str(c) and loaded.digest == c.digest
    a, b = np.linspace(-1, 1, 8), np.linspace(1, 0, 8)
    out = loaded.run(*c.encrypt(a, b), keys=c.keys.public)
    assert np.abs(c.decrypt(*out) - (a * b + np.roll(a, -1))).max() < TOL13
    assert not loaded._programs or all(True for _ in loaded._programs)
    with pytest.raises(ParameterError, match="other parameters"):
        fhe.load(path, presets.N12_L1)
    other = _trace(lambda x: x * x, 8)
    other.keygen(seed=bytes(32))
    with pytest.raises(ParameterError, match="no Galois key"):
        loaded.run(*c.encrypt(a, b), keys=other.keys.public)
    blob = bytearray(path.read_bytes())
    blob[100] ^= 1
    (tmp_path / "bad.circuit").write_bytes(bytes(blob))
    with pytest.raises(SerializationError):
        fhe.load(tmp_path / "bad.circuit", presets.N13_L3)


def test_graph_json_round_trip():
    c = _trace(lambda x, y: x * np.arange(8) + y * 0.5 + x.rotate(3), 8, 8)
    g = ir.graph_from_json(ir.graph_to_json(c.graph))
    assert g == c.graph and g.digest() == c.graph.digest()


# slow: 74 s cold in CI (a second process compiles again); the executable store across processes is tested by default
# in tests/test_executables.py
@pytest.mark.slow
def test_cache_reused_by_a_fresh_process(tmp_path):
    script = textwrap.dedent("""
        import numpy as np
        import crossfhe.api as fhe
        from crossfhe.ckks import presets
        c = fhe.compile(lambda x: x * x + x.rotate(2), fhe.CKKSVector(8), params=presets.N12_L1)
        c.keygen(seed=bytes(32))
        out = c.encrypt_run_decrypt(np.linspace(-1, 1, 8))
        assert np.abs(out - (np.linspace(-1, 1, 8) ** 2 + np.roll(np.linspace(-1, 1, 8), -2))).max() < 2**-5
        print(sorted(c.timings.get("sources", [])))
    """)
    env = dict(os.environ, CROSSFHE_CACHE_DIR=str(tmp_path / "c"))
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
            for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr[-3000:]
    assert runs[0].stdout.split()[-1] == "['exported']" and runs[1].stdout.split()[-1] == "['cache']"
    assert len(list((tmp_path / "c" / "circuits").iterdir())) == 1
    env["CROSSFHE_CIRCUIT_CACHE"] = "0"
    off = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert off.returncode == 0 and off.stdout.split()[-1] == "['traced']"


def test_cost_counts_ntt_limbs():
    c = _trace(lambda x, y: x * y, 8, 8)
    p = presets.N13_L3
    limbs = len(p.moduli_at(p.levels))
    up, down = cc._keyswitch_ntts(p, limbs)
    assert c.cost["ntt_limbs"] == up + down + 2 * limbs  # one relinearization and one rescale


# ---------------------------------------------------------------------------------------------------
# Regressions found in review
# ---------------------------------------------------------------------------------------------------


# slow: 56 s cold in CI; eager vectors' padding is tested by default (tests/test_ckks_vector.py, the same passes)
@pytest.mark.slow
def test_padding_stays_out_of_sums_and_rotations():
    """Lengths that are not powers of two: values are NumPy's on the zero-padded vector (a scalar is not added to
    the padding; a rotation's or a broadcast's fill is cleared before sum and rotate)."""
    a, one = np.array([0.1, 0.7, -0.3]), np.array([0.5])
    cases = [
        (lambda x: ((x - 0.5) ** 2).sum(), np.full(1, ((a - 0.5) ** 2).sum())),
        (lambda x: (x + 1.0).sum(), np.full(1, (a + 1).sum())),
        (lambda x: x.rotate(1).sum(), np.full(1, a.sum())),  # np.roll keeps every value
        (lambda x: x.rotate(2).rotate(2), np.roll(a, -4)),  # any length rotates as np.roll does
        (lambda x: x * 1j + 0.5j, a * 1j + 0.5j),
    ]
    for f, want in cases:
        c = fhe.compile(f, fhe.CKKSVector(3, complex=True), params=presets.N13_L3, cache=False)
        c.keygen(seed=bytes(32))
        assert np.abs(c.encrypt_run_decrypt(a) - want).max() < TOL13, f
    c = _trace(lambda x, y: (x + y).sum(), 1, 3)
    c.keygen(seed=bytes(32))
    assert np.abs(c.encrypt_run_decrypt(one, a) - (one + a).sum()).max() < TOL13


def test_alignment_of_products_and_relinearized_sums():
    rng = np.random.default_rng(3)
    a, b = rng.uniform(-1, 1, 8), rng.uniform(-1, 1, 8)

    def shared(x, y):
        p = x * x
        s = p + p * x
        return s + p, s

    p, s = a * a, a * a + a * a * a
    for f, want in [(lambda x, y: x * y + x ** 3, [a * b + a ** 3]), (shared, [s + p, s]),
                    (lambda x, y: x * 0.5 + y ** 4, [a * 0.5 + b ** 4])]:
        for optimize in (True, False):
            c = _trace(f, 8, 8, optimize=optimize)
            c.keygen(seed=bytes(32))
            got = c.encrypt_run_decrypt(a, b)
            got = got if isinstance(got, list) else [got]
            assert max(np.abs(g - w).max() for g, w in zip(got, want)) < 2.0**-11  # N13_L3: 2^-12.3 per product


def test_many_scalar_terms_converge():
    def f(x):
        acc = x * x
        for i in range(40):
            acc = acc + (0.001 * (i + 1)) * x
        return acc

    c = _trace(f, 8, params=presets.N12_L1)
    assert c.cost["depth"] == 1 and c.cost["rescales"] == 1


def test_decrypt_checks_the_key_pair_and_run_checks_shapes():
    c = _trace(lambda x: x * x, 8, params=presets.N12_L1)
    c.keygen(seed=bytes(32))
    ins = c.encrypt(np.linspace(-1, 1, 8))
    out = c.run(*ins)
    first = c.keys
    c.keygen(seed=bytes(range(32)))
    with pytest.raises(KeyMismatchError):
        c.decrypt(*out)
    assert np.abs(c.decrypt(*out, keys=first) - np.linspace(-1, 1, 8) ** 2).max() < TOL13
    bad = fhe.Encrypted(tuple(x[..., :-1] for x in ins[0].leaves), (), ins[0].key_id, c.digest, 0, False)
    with pytest.raises(ParameterError, match="holds arrays"):
        c.run(bad, keys=first)


def test_evaluation_keys_given_to_compile_are_used():
    owner = _trace(lambda x: x.rotate(1) * 2.0, 8)
    keys = owner.keygen(seed=bytes(32))
    server = fhe.compile(lambda x: x.rotate(1) * 2.0, fhe.CKKSVector(8), params=presets.N13_L3, keys=keys.public,
                         cache=False)
    out = server.run(*owner.encrypt(np.linspace(-1, 1, 8)))
    assert np.abs(owner.decrypt(*out) - 2 * np.roll(np.linspace(-1, 1, 8), -1)).max() < TOL13


def _compiled_conditionals(circuit, batch=()) -> int:
    import jax

    leaves, treedef = circuit._runtime(circuit.keys.public)
    consts, fn = circuit._traced(batch, leaves, treedef)
    ins, lv = circuit._abstract(batch, leaves)
    return jax.jit(fn).lower(consts, ins, lv).compile().as_text().count(" conditional(")


def test_ckks_circuit_programs_materialize_their_kernels_results(monkeypatch):
    """Each kernel's result is materialized in a CKKS circuit's program (XLA:CPU would otherwise compute a shared
    producer's elementwise tail again in every consumer: a 2-layer network ran 14x slower, benchmarks/README.md,
    "Circuits without recomputation"), batch items run one after another so that the conditionals stay
    conditionals, and the words are those of the unmaterialized program."""
    from crossfhe.testing import INSECURE_CKKS_N10

    def f(x):
        y = x * x
        return y.rotate(1) + y * 3 + y

    circuit = fhe.compile(f, fhe.CKKSVector(8), params=INSECURE_CKKS_N10, cache=False)
    circuit.keygen(seed=bytes(32))
    (enc,) = circuit.encrypt(np.linspace(-1, 1, 16).reshape(2, 8))
    (out,) = circuit.run(enc)
    with_barriers = {b: _compiled_conditionals(circuit, b) for b in ((), (2,))}
    monkeypatch.setattr(cc.CKKSScheme, "materialize_kernels", False)
    plain = fhe.compile(f, fhe.CKKSVector(8), params=INSECURE_CKKS_N10, cache=False, keys=circuit.keys)
    (ref,) = plain.run(enc)
    without = {b: _compiled_conditionals(plain, b) for b in ((), (2,))}
    for b in ((), (2,)):
        assert with_barriers[b] > without[b], (b, with_barriers, without)
    assert all((np.asarray(a) == np.asarray(r)).all() for a, r in zip(out.leaves, ref.leaves, strict=True))


def test_batched_ckks_circuits_stay_vectorized_when_compiled_for_a_gpu(monkeypatch):
    """The items of a batch run one after another in a CPU program (the materializing conditionals stay
    conditionals) and vectorized in a GPU one (where the barriers are the identity). Counted in loops against the
    program without materialization (vectorized everywhere, where each native kernel loops over the items by its
    batching rule): the CPU program is one loop over the items, and the one exported for CUDA, without a device, is
    the vectorized program's."""
    import jax
    from jax import export

    from crossfhe.testing import INSECURE_CKKS_N10

    def loops(materialize: bool) -> tuple[int, int]:
        monkeypatch.setattr(cc.CKKSScheme, "materialize_kernels", materialize)
        circuit = fhe.compile(lambda x: (x * x).rotate(1) + x, fhe.CKKSVector(8), params=INSECURE_CKKS_N10,
                              cache=False)
        circuit.keygen(seed=bytes(32))
        leaves, treedef = circuit._runtime(circuit.keys.public)
        consts, fn = circuit._traced((4,), leaves, treedef)
        ins, lv = circuit._abstract((4,), leaves)
        cpu = jax.jit(fn).lower(consts, ins, lv).as_text()
        checks = [export.DisabledSafetyCheck.custom_call(t) for t in circuit.scheme.custom_calls(circuit.params)]
        gpu = export.export(jax.jit(fn), platforms=["cuda"], disabled_checks=checks)(consts, ins, lv).mlir_module()
        return cpu.count("stablehlo.while("), gpu.count("stablehlo.while(")

    (cpu, gpu), (cpu_plain, gpu_plain) = loops(True), loops(False)
    # The plain CPU program loops once per native kernel that batches item by item (the basis conversion, built
    # where the CPU has AVX-512 IFMA) and not at all where every native kernel takes the batch whole (CPUs without
    # IFMA): either way it is not the materializing program's one loop.
    assert cpu == 1 != cpu_plain and gpu == gpu_plain
