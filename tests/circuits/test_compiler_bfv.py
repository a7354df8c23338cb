"""BFV circuits: the lowered program against NumPy mod t (batched), each pass on its own, the noise-budget check,
the keys a circuit needs and refuses, and tracing errors. Default tests run on bfv.presets.N4096 (the smallest
secure preset with a ciphertext product), with one key set per module."""

import inspect

import jax
import numpy as np
import pytest

import crossfhe.api as fhe
from crossfhe.api import bfv_lower as cb
from crossfhe.api import ir
from crossfhe.api.circuit import Circuit
from crossfhe.api.trace import Trace
from crossfhe.bfv import ops as bfv_ops
from crossfhe.bfv import presets
from crossfhe.bfv.ciphertext import Ciphertext, EvaluationKeys
from crossfhe.errors import KeyMismatchError, ParameterError
from crossfhe.ring.poly import Domain, RNSPoly

PARAMS = presets.N4096
T = PARAMS.t
SEED = bytes(range(32))


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CROSSFHE_CACHE_DIR", str(tmp_path / "cache"))


def _compile(fn, *lengths, params=PARAMS, optimize=True):
    return fhe.compile(fn, *(fhe.BFVVector(n) for n in lengths), params=params, optimize=optimize, cache=False)


def _rot(v, k):
    return np.roll(v, -k, axis=-1)


def _line(fn, text):
    """The "file:line" of the first line of ``fn`` containing ``text`` (what a CircuitError names)."""
    lines, start = inspect.getsourcelines(fn)
    return f"test_compiler_bfv.py:{start + next(i for i, s in enumerate(lines) if text in s)}"


# ---------------------------------------------------------------------------------------------------
# The workload: products, plaintext and integer products, rotations, sums, a 5-value vector
# ---------------------------------------------------------------------------------------------------


def program(x, y, z):
    p = x * y
    a = p + x * 3 - y.rotate(1)  # a product, an integer product, a rotation
    b = x * x + y * y + np.arange(8)  # a sum of two products: relinearized once
    c = x @ y  # the inner product, one value (the product x * y again: CSE)
    d = (x.rotate(1) + x.rotate(2) + x.rotate(-3)) * np.arange(1, 9)  # one ModUp for three rotations
    e = 3 * z.rotate(2) + 1 - np.array([7])  # 5 values: np.roll (two rotations and masks); a broadcast constant
    return a, b, c, d, e, z.sum()


def reference(x, y, z):
    return [
        (x * y + 3 * x - _rot(y, 1)) % T,
        (x * x + y * y + np.arange(8)) % T,
        (x * y % T).sum(-1, keepdims=True) % T,
        ((_rot(x, 1) + _rot(x, 2) + _rot(x, -3)) * np.arange(1, 9)) % T,
        (3 * _rot(z, 2) + 1 - 7) % T,
        z.sum(-1, keepdims=True) % T,
    ]


@pytest.fixture(scope="module")
def circuit():
    c = fhe.compile(program, fhe.BFVVector(8), fhe.BFVVector(8), fhe.BFVVector(5), params=PARAMS, cache=False)
    c.keygen(seed=SEED)
    return c


@pytest.fixture(scope="module")
def values():
    rng = np.random.default_rng(7)
    return rng.integers(0, T, (2, 8)), rng.integers(0, T, (2, 8)), rng.integers(0, T, (2, 5))


@pytest.fixture(scope="module")
def outputs(circuit, values):
    return circuit.run(*circuit.encrypt(*values))


def test_program_matches_numpy_batched(circuit, values, outputs):
    got = circuit.decrypt(*outputs)
    want = reference(*values)
    assert len(got) == len(want) == 6
    for j, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, j
        np.testing.assert_array_equal(g, w, err_msg=f"output {j}")


def test_report_counts_per_pass(circuit):
    report = dict(circuit.report)
    assert [name for name, _ in circuit.report] == ["traced", "cse", "hoist_rotations", "lazy_relinearization",
                                                    "noise_budget"]
    # traced: x * y twice (a, c), x * x, y * y; rotations 1 (a), 1, 2, 4 (the sums of c and z), 1, 2, 5 (d), and
    # 2 and 5 with two mask products (e: np.roll of 5 values)
    assert report["traced"]["tensor_products"] == 4 and report["traced"]["relinearizations"] == 4
    assert report["traced"]["rotations"] == 12 and report["traced"]["modups"] == 16
    assert report["traced"]["plain_products"] == 3
    # CSE: x * y once; the rotations of different operands are not shared
    assert report["cse"]["tensor_products"] == 3 and report["cse"]["relinearizations"] == 3
    # hoisting: x.rotate(1), (2), (5) share one ModUp; z's by 1 (its sum), 2 and 5 (e) another
    assert report["hoist_rotations"]["rotations"] == report["cse"]["rotations"]
    assert report["hoist_rotations"]["modups"] == report["cse"]["modups"] - 4
    # lazy relinearization: x * x + y * y relinearized once
    assert report["lazy_relinearization"]["relinearizations"] == 2
    assert report["lazy_relinearization"]["tensor_products"] == 3
    final = circuit.cost
    assert final["depth"] == 1 and final["plain_products"] == 3 and final["scalar_products"] == 2
    assert final["key_switches"] == final["relinearizations"] + final["rotations"]
    assert final["budget"] >= cb.MARGIN_BITS
    text = str(circuit)
    assert "rotate_many" in text and "tensor" in text and "relin" in text and "test_compiler_bfv.py" in text


def test_requirements_are_the_rotations_used(circuit):
    req = circuit.requirements
    assert req["relin"] is True
    assert req["rotations"] == [1, 2, 4, 5]
    assert req["galois_elements"] == sorted(bfv_ops.rotation_element(PARAMS, k) for k in (1, 2, 4, 5))
    assert sorted(circuit.keys.public.galois) == req["galois_elements"]

    c = _compile(lambda x: x.rotate(3) + x.rotate(-1) + x.sum(), 8)
    assert c.requirements == {"relin": False, "rotations": [1, 2, 3, 4, 7], "row_swap": False,
                              "galois_elements": sorted(bfv_ops.rotation_element(PARAMS, k) for k in (1, 2, 3, 4, 7))}
    assert _compile(lambda x: x.rotate(8) * 5, 8).requirements["rotations"] == []  # a full turn is no rotation


def test_estimated_budget_is_below_the_measured_one(circuit, outputs):
    """The model is conservative: every output keeps at least the budget the compiler annotated."""
    for j, out in enumerate(outputs):
        node = circuit.graph.nodes[circuit.graph.outputs[j]]
        c0, c1 = (RNSPoly(jax.numpy.asarray(x), PARAMS.q, Domain.EVAL) for x in out.leaves)
        measured = bfv_ops.noise_budget(circuit.keys.secret, Ciphertext(c0, c1, PARAMS, None))
        assert node.attr("budget") <= measured <= node.attr("budget") + 8, (j, node.attr("budget"), measured)


def test_runtime_is_arrays(circuit):
    rt = cb.runtime(circuit.graph, circuit.params, circuit.keys.public)
    assert all(isinstance(a, (np.ndarray, jax.Array)) for a in jax.tree.leaves(rt))  # no Python number or key object
    assert set(rt) == {"consts", "galois", "relin", "ks", "mul"}
    # the hoisted rotations' keys by element; a single rotation's key (and element word) with its node's constants
    single = {int(np.asarray(v[0])) for v in rt["consts"].values() if isinstance(v, tuple) and len(v) == 2
              and np.shape(v[0]) == ()}
    assert sorted(set(rt["galois"]) | single) == circuit.requirements["galois_elements"]


@pytest.mark.slow
def test_unoptimized_circuit_gives_the_same_result(circuit, values):
    c = fhe.compile(program, fhe.BFVVector(8), fhe.BFVVector(8), fhe.BFVVector(5), params=PARAMS, cache=False,
                    optimize=False)
    assert c.cost["relinearizations"] == 4 and c.cost["modups"] == 16
    c.keys = circuit.keys
    for g, w in zip(c.encrypt_run_decrypt(*values), reference(*values)):
        np.testing.assert_array_equal(g, w)


# ---------------------------------------------------------------------------------------------------
# Passes, each on its own
# ---------------------------------------------------------------------------------------------------


def _run_graph(graph, keys, *values):
    """``graph`` (any pass's output) as a circuit with the module's keys: the decrypted outputs."""
    specs = tuple(fhe.BFVVector(graph.nodes[i].attr("length")) for i in graph.inputs)
    c = Circuit(graph, cb.SCHEME.prepare_params(PARAMS), specs, cb.SCHEME, cache=False)
    c.keys = keys
    out = c.encrypt_run_decrypt(*values)
    return out if isinstance(out, list) else [out]


def test_dead_code_and_cse(circuit):
    def f(x, y):
        unused = x.rotate(3) * y  # noqa: F841 - dead
        return x * y + (x * y) * 2 + x.rotate(1) - x.rotate(1) * 5

    traced = _compile(f, 8, 8).traced
    before = cb.cost(traced, PARAMS, annotated=False)
    assert (before["tensor_products"], before["rotations"]) == (3, 3)
    live = cb.cost(cb.dead_code(traced, PARAMS), PARAMS, annotated=False)
    assert (live["tensor_products"], live["rotations"]) == (2, 2)
    after = cb.cost(cb.cse(traced, PARAMS), PARAMS, annotated=False)
    assert (after["tensor_products"], after["rotations"], after["key_switches"]) == (1, 1, 2)

    rotations = _compile(lambda x: x.rotate(1) - x.rotate(1) * 5 + x.rotate(2), 8).traced
    merged = cb.cse(rotations, PARAMS)
    assert cb.cost(rotations, PARAMS)["rotations"] == 3 and cb.cost(merged, PARAMS)["rotations"] == 2
    x = np.arange(8) * 1000 + 1
    (got,) = _run_graph(merged, circuit.keys, x)
    np.testing.assert_array_equal(got, (_rot(x, 2) - 4 * _rot(x, 1)) % T)


def test_hoist_rotations(circuit):
    def f(x):
        return x.rotate(1) + x.rotate(2) + x.rotate(5) + (x * 2).rotate(1)

    traced = ir.dead_code(_compile(f, 8).traced)
    hoisted = cb.hoist_rotations(traced, PARAMS)
    before, after = cb.cost(traced, PARAMS, annotated=False), cb.cost(hoisted, PARAMS, annotated=False)
    assert before["rotations"] == after["rotations"] == 4
    assert (before["modups"], after["modups"]) == (4, 2)
    many = [n for n in hoisted.nodes if n.op == "rotate_many"]
    assert len(many) == 1 and many[0].attr("ks") == (1, 2, 5)
    x = np.arange(8) * 7 + 3
    (got,) = _run_graph(hoisted, circuit.keys, x)
    np.testing.assert_array_equal(got, (_rot(x, 1) + _rot(x, 2) + _rot(x, 5) + 2 * _rot(x, 1)) % T)


def test_lazy_relinearization(circuit):
    def f(x, y):
        return x * x + y * y - 3 * (x * y) + 5, x - (x * y + y * y)

    traced = ir.dead_code(_compile(f, 8, 8).traced)
    lazy = cb.lazy_relinearization(traced, PARAMS)
    before, after = cb.cost(traced, PARAMS, annotated=False), cb.cost(lazy, PARAMS, annotated=False)
    assert (before["relinearizations"], after["relinearizations"]) == (5, 2)
    assert before["tensor_products"] == after["tensor_products"] == 5
    assert [n.op for n in lazy.nodes].count("tensor") == 5
    x, y = np.arange(8) * 1001, np.arange(8) + T - 9
    got = _run_graph(lazy, circuit.keys, x, y)
    np.testing.assert_array_equal(got[0], (x * x + y * y - 3 * (x * y % T) + 5) % T)
    np.testing.assert_array_equal(got[1], (x - x * y - y * y) % T)


@pytest.mark.parametrize("fn", [
    lambda x, y: x * y + x,  # one product: nothing to share
    lambda x, y: (x * y + y * y, (x * y + y * y).rotate(1)),  # the sum feeds two consumers: relinearized once there
    lambda x, y: (x * y + x, x * y + y),  # (after CSE) one product used twice: stays one fused product
])
def test_lazy_relinearization_never_adds_relinearizations(fn):
    traced = cb.cse(_compile(fn, 8, 8).traced, PARAMS)
    lazy = cb.lazy_relinearization(traced, PARAMS)
    assert cb.cost(lazy, PARAMS)["relinearizations"] <= cb.cost(traced, PARAMS)["relinearizations"]
    assert cb.cost(lazy, PARAMS)["tensor_products"] == cb.cost(traced, PARAMS)["tensor_products"]


def test_noise_check_names_the_line_and_a_preset_that_fits():
    def deep(x, y):
        z = x * y
        return z * x  # the second product exhausts N4096

    with pytest.raises(fhe.CircuitError) as e:
        _compile(deep, 8, 8)
    msg = str(e.value)
    assert "mul at " + _line(deep, "z * x") in msg
    assert "multiplicative depth 2" in msg and "bfv.presets.N8192" in msg and "N4096" in msg
    with pytest.raises(fhe.CircuitError, match="N8192"):
        _compile(deep, 8, 8, optimize=False)
    # without params: the smallest preset that fits
    assert fhe.compile(deep, fhe.BFVVector(8), fhe.BFVVector(8), cache=False).params.digest() == \
        presets.N8192.digest()
    one = fhe.compile(lambda x, y: x * y, fhe.BFVVector(8), fhe.BFVVector(8), cache=False)
    assert one.params.digest() == presets.N4096.digest()
    none = fhe.compile(lambda x: x.rotate(1) * 3, fhe.BFVVector(8), cache=False)
    assert none.params.digest() == presets.CHAM_N4096.digest()
    four = fhe.compile(lambda x: x ** 16, fhe.BFVVector(8), cache=False)
    assert four.depth == 4 and four.params.digest() == presets.N16384.digest()


def test_noise_budgets_follow_the_presets_table():
    """Depths the presets were measured to reach (crossfhe.bfv.presets) are admitted, one more is refused."""
    for params, depth in ((presets.N4096, 1), (presets.N8192, 3), (presets.N16384, 9)):
        def chain(x, y, depth=depth):
            z = x
            for _ in range(depth):
                z = z * y
            return z

        g = ir.dead_code(_compile(chain, 8, 8, params=presets.N32768).traced)
        assert min(cb.noise_budgets(g, params)) >= cb.MARGIN_BITS
        g2 = ir.dead_code(_compile(lambda x, y: chain(x, y) * y, 8, 8, params=presets.N32768).traced)
        assert min(cb.noise_budgets(g2, params)) < cb.MARGIN_BITS


def test_select_options():
    with pytest.raises(fhe.CircuitError, match="for CKKS"):
        fhe.compile(lambda x: x + 1, fhe.BFVVector(8), precision=10, cache=False)
    with pytest.raises(fhe.CircuitError, match=r"t >= 2\^21"):
        fhe.compile(lambda x: x + 1, fhe.BFVVector(8), bits=21, cache=False)
    assert fhe.compile(lambda x: x * x, fhe.BFVVector(8), bits=16, cache=False).params.n == 4096
    with pytest.raises(fhe.CircuitError, match="no BFV preset fits this circuit .multiplicative depth 30"):
        fhe.compile(lambda x: x ** (2**30), fhe.BFVVector(8), cache=False)


def test_vector_wider_than_a_row_is_refused():
    with pytest.raises(fhe.CircuitError, match="2048"):
        _compile(lambda x: x + 1, 3000)
    assert fhe.compile(lambda x: x + 1, fhe.BFVVector(3000), cache=False).params.n == 8192


# ---------------------------------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------------------------------


def _rotation_circuit():
    return _compile(lambda x: x + x.rotate(1), 4)


def test_keys_of_another_key_pair_are_refused():
    c = _rotation_circuit()
    c.keygen(seed=b"\x01" * 32)
    x = np.array([1, 2, 3, 4])
    enc = c.encrypt(x)
    np.testing.assert_array_equal(c.decrypt(*c.run(*enc)), x + _rot(x, 1))
    _, other = cb.SCHEME.keygen(c.params, c.requirements, b"\x02" * 32)
    with pytest.raises(KeyMismatchError, match="key pair"):
        c.run(*enc, keys=other)


def test_missing_keys_are_named():
    c = _rotation_circuit()
    keys = c.keygen(seed=b"\x03" * 32)
    enc = c.encrypt(np.arange(4))
    bare = EvaluationKeys(public=keys.public.public, relin=None, galois={}, params=keys.public.params)
    line = _line(_rotation_circuit, "x.rotate(1)")
    with pytest.raises(ParameterError, match=f"rotate by 1 at {line}"):
        c.run(*enc, keys=bare)
    with pytest.raises(TypeError, match="bfv.EvaluationKeys"):
        c.run(*enc, keys=keys.public.public)
    prod = _compile(lambda x, y: x * y, 4, 4)
    prod.keys = c.keys
    with pytest.raises(ParameterError, match="relinearization key"):
        prod.run(*prod.encrypt(np.arange(4), np.arange(4)), keys=bare)


def test_keys_for_other_parameters_are_refused():
    c = _rotation_circuit()
    c.keygen(seed=b"\x04" * 32)
    enc = c.encrypt(np.arange(4))
    _, other = cb.SCHEME.keygen(presets.CHAM_N4096, c.requirements, b"\x05" * 32)
    with pytest.raises(ParameterError, match="other parameters"):
        c.run(*enc, keys=other)


# ---------------------------------------------------------------------------------------------------
# Tracing and input errors
# ---------------------------------------------------------------------------------------------------


def test_mixing_schemes_is_refused():
    from crossfhe.api.ckks import EncryptedVector as CKKSValue

    with pytest.raises(fhe.CircuitError, match="one scheme"):
        fhe.compile(lambda x, y: x + y, fhe.BFVVector(4), fhe.CKKSVector(4), cache=False)
    stranger = CKKSValue(None, None, False, 4, 4, trace=Trace("ckks"), node=0)

    def f(x):
        return x * stranger

    with pytest.raises(fhe.CircuitError, match="BFV value and a CKKS value"):
        _compile(f, 4)


def test_operand_errors_name_the_line():
    def floats(x):
        return x * 0.5

    with pytest.raises(fhe.CircuitError, match=f"{_line(floats, '0.5')}.*integers mod t"):
        _compile(floats, 4)

    def lengths(x, y):
        return x + y

    with pytest.raises(fhe.CircuitError, match=f"{_line(lengths, 'x + y')}.*lengths 4 and 3"):
        _compile(lengths, 4, 3)
    with pytest.raises(fhe.CircuitError, match="1-D array of integers"):
        _compile(lambda x: x + np.array([0.5, 1.5, 2.5, 3.5]), 4)


def test_inputs_must_be_integers_mod_t():
    c = _compile(lambda x: x + 1, 4)
    c.keygen(seed=b"\x06" * 32)
    with pytest.raises(ParameterError, match=r"\[0, t\)"):
        c.encrypt(np.array([0, 1, 2, T]))
    with pytest.raises(ParameterError, match="integers"):
        c.encrypt(np.array([0.0, 1.0, 2.0, 3.0]))
    with pytest.raises(ParameterError, match=r"shape \[\.\.\., 4\]"):
        c.encrypt(np.arange(5))
    np.testing.assert_array_equal(c.encrypt_run_decrypt(np.array([0, 1, 2, T - 1])), [1, 2, 3, 0])


@pytest.mark.slow
def test_export_and_load_roundtrip(circuit, values, tmp_path):
    path = circuit.export(tmp_path / "bfv.cfhe", batch_shape=(2,))
    loaded = fhe.load(path, PARAMS)
    loaded.keys = circuit.keys
    outs = loaded.run(*loaded.encrypt(*values))
    for g, w in zip(loaded.decrypt(*outs), reference(*values)):
        np.testing.assert_array_equal(g, w)


# slow: 30 s cold in CI; CKKS's and eager BFV's padding run by default
@pytest.mark.slow
def test_padding_stays_out_of_sums_and_rotations():
    """Regression: a scalar added to a 3-vector must not reach its padding slot (sum over 4 slots)."""
    import crossfhe.api as fhe
    from crossfhe.bfv import presets as bp

    c = fhe.compile(lambda x: ((x + 5).sum(), x.rotate(1).sum()), fhe.BFVVector(3), params=bp.N8192, cache=False)
    c.keygen(seed=bytes(32))
    a = np.array([1, 2, 3])
    s, r = c.encrypt_run_decrypt(a)
    assert (s == (a + 5).sum()).all() and (r == a.sum()).all()  # np.roll keeps every value
