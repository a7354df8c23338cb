"""TFHE circuits: tracing, intervals and noise (errors naming the line), each pass on its own (counts before and
after, and the same results on every input in the clear), the lowered program against plain Python (exact: TFHE
decrypts exactly), preset selection, keys, and the benchmark's sixteen lookups.

Keys: one P4 key pair per module (seconds); each encrypted test compiles one program at P4.
"""

import jax
import numpy as np
import pytest

import crossfhe.api as fhe
from crossfhe.api import CircuitError, TFHEInt, ir
from crossfhe.api import tfhe_lower as ct
from crossfhe.api.circuit import Circuit
from crossfhe.apps import tfhe_ml
from crossfhe.errors import KeyMismatchError, ParameterError
from crossfhe.tfhe import ops, presets
from crossfhe.tfhe.params import make

P2, P4 = presets.P2, presets.P4
FILE = "test_compiler_tfhe.py"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CROSSFHE_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def keys_p4():
    """A P4 key pair as CircuitKeys (any P4 circuit runs with it: the server key is all a TFHE circuit needs)."""
    ck, sk = ops.keygen(P4, b"compiler-tfhe-p4".ljust(32, b"\0"))
    return fhe.CircuitKeys(ck, sk)


def _sq(v):
    return v * v % 16


def _half(v):
    return v // 2


def _compile(fn, *bits, params=P4, optimize=True):
    return fhe.compile(fn, *(TFHEInt(b) for b in bits), params=params, optimize=optimize, cache=False)


def _line(fn, offset: int) -> str:
    """"test_compiler_tfhe.py:N" of the line ``offset`` lines below ``fn``'s ``def``."""
    return f"{FILE}:{fn.__code__.co_firstlineno + offset}"


def _all_pairs(bits: int):
    v = np.arange(1 << bits)
    return np.repeat(v, 1 << bits), np.tile(v, 1 << bits)


# ---------------------------------------------------------------------------------------------------
# The program the pass tests share (3-bit x, y at P4)
# ---------------------------------------------------------------------------------------------------


def program(x, y):
    unused = (x + 1).apply(_sq)  # dead code
    a = x.apply(_sq)
    a2 = x.apply(lambda v: v * v + 32)  # the same table mod 16: one bootstrap after CSE
    h, b, c = x.apply(_half), y.apply(_sq), y.apply(_half)  # x and y each through two tables (KS-dedup)
    u = h * 4 + c  # in [0, 16), noise 4^2 + 1
    del unused
    return a, a2 + 1, u.apply(_sq), b - c + 3


def program_reference(x, y):
    a, h, b, c = x * x % 16, x // 2, y * y % 16, y // 2
    return a, a + 1, (h * 4 + c) ** 2 % 16, b - c + 3


def _check_plain(graph, params=P4):
    x, y = _all_pairs(3)
    for got, want in zip(ct.evaluate_plain(graph, params, x, y), program_reference(x, y), strict=True):
        np.testing.assert_array_equal(got, want)


def _tables_graph():
    """The traced program with its tables for P4 (its dead lookup too)."""
    return ct.tables(_compile(program, 3, 3).traced, P4)


# ---------------------------------------------------------------------------------------------------
# Tracing and the tables pass
# ---------------------------------------------------------------------------------------------------


def test_operators_record_the_graph():
    def f(x, y):
        swap = [1, 0, 3, 2, 5, 4, 7, 6]
        return x + y, x - y + 8, -x + 7, np.int64(9) - y, x * 2 + 0, x * 1, 1 * (x + 0), x.apply(swap)

    c = _compile(f, 3, 3, optimize=False)
    g = c.traced
    assert g.counts() == {"input": 2, "add": 1, "sub": 1, "add_scalar": 3, "neg": 2, "mul_int": 1, "lookup": 1}
    assert [n.attr("c") for n in g.nodes if n.op == "add_scalar"] == [8, 7, 9]
    x, y = _all_pairs(3)
    want = [x + y, x - y + 8, 7 - x, 9 - y, 2 * x, x, x, x ^ 1]
    for got, w in zip(ct.evaluate_plain(c.graph, P4, x, y), want, strict=True):
        np.testing.assert_array_equal(got, w)
    assert [c.graph.nodes[o].attr("range") for o in c.graph.outputs] == [(0, 14), (1, 15), (0, 7), (2, 9), (0, 14),
                                                                        (0, 7), (0, 7), (0, 7)]


def test_tables_pass_materializes_tables_and_ranges():
    traced = _compile(program, 3, 3).traced
    assert all(n.attr("raw") is not None for n in traced.nodes if n.op == "lookup")
    g = ct.tables(traced, P4)
    looks = [n for n in g.nodes if n.op == "lookup"]
    assert all(n.attr("raw") is None and g.const(n.attr("table")).shape == (16,) for n in looks)
    np.testing.assert_array_equal(g.const(looks[1].attr("table")), np.arange(16) ** 2 % 16)
    # x * x + 32 and x * x agree mod 16: the same constant (CSE then merges the lookups)
    assert looks[1].attr("table") == looks[2].attr("table")
    # the image of the table over the input's interval: squares of 0..7 mod 16
    assert looks[1].attr("range") == (0, 9)
    assert ct.cost(traced, P4) == ct.cost(g, P4)


def test_intermediate_values_may_leave_the_message_space():
    def f(x, y):
        # x - y in [-7, 7] and 2 (x - y) in [-14, 14]: exact mod 2^5; the forms know the last is x - y + 7
        return (x - y + 7).apply(_half), (x - y) * 2 - x + y + 7

    c = _compile(f, 3, 3)
    x, y = _all_pairs(3)
    lo, hi = ct.evaluate_plain(c.graph, P4, x, y)
    np.testing.assert_array_equal(lo, (x - y + 7) // 2)
    np.testing.assert_array_equal(hi, x - y + 7)
    assert c.graph.nodes[c.graph.outputs[1]].attr("range") == (0, 14)


def test_overflow_names_the_operation_and_line():
    def f(x, y):
        s = x + y
        return s.apply(_sq)

    with pytest.raises(CircuitError, match=rf"`a \+ b` at {_line(f, 1)} may reach 6, beyond the 2-bit message space "
                                           rf"\[0, 4\) of P2; the lookup at {_line(f, 2)} reads it"):
        _compile(f, 2, 2, params=P2)

    def g(x):
        return 5 - x * 2

    with pytest.raises(CircuitError, match=rf"`a \+ 5` at {_line(g, 1)} may reach -1, below .* output 0"):
        _compile(g, 2, params=P4)
    with pytest.raises(CircuitError, match=r"input 0 \(TFHEInt\(bits=3\)\) holds values up to 7, beyond the 2-bit"):
        _compile(lambda x: x.apply(_sq), 3, params=P2)


def test_noise_beyond_the_budget_names_the_line():
    def f(x):
        return (x * 5).apply(_half)

    budget = ct.noise_budget(P4)
    assert P4.norm2 <= budget and P4.log2_p_fail(budget) <= -64 < P4.log2_p_fail(budget + 1)
    # a value in [0, 16) holds at most 15^2 = 225 bootstraps' noise, within P4's budget (393 with the centered
    # modulus switch): a set at N 1024 (insecure, a budget of just max_norm2 = 17) shows the error
    tight = make(4, lwe_dim=833, glwe_dim=1, poly_size=1024, glwe_log2_rate=-48.32, lwe_log2_rate=-18.08,
                 pbs=(23, 1), ks=(2, 7), max_norm2=17, name="TIGHT", grouping=2, insecure=True)
    assert ct.noise_budget(tight) == 17
    with pytest.raises(CircuitError, match=rf"`a \* 5` at {_line(f, 1)}: its noise is 25 times a bootstrap's"):
        _compile(f, 1, params=tight)


def test_table_errors():
    with pytest.raises(CircuitError, match=r"may reach 3, but the table has 3 entries"):
        _compile(lambda x: x.apply([0, 1, 2]), 2, params=P2)
    digits = [3, 2, 1, 0]
    np.testing.assert_array_equal(ct.evaluate_plain(_compile(lambda x: x.apply(lambda v: digits[v]), 2).graph, P4,
                                                    np.arange(4))[0], [3, 2, 1, 0])
    with pytest.raises(CircuitError, match=r"may reach 7, but the table raised IndexError: list index out of range "
                                           r"at 4"):
        _compile(lambda x: x.apply(lambda v: digits[v]), 3)

    def f(x):
        return x.apply(lambda v: v / 2)

    with pytest.raises(CircuitError, match=rf"apply at {_line(f, 1)}: the table returned 0.0 \(float\) at 0"):
        _compile(f, 2)
    for bad in ("abc", np.ones((2, 2), int), [0.5, 1.0], np.zeros(1025, int), [True, False]):
        with pytest.raises(CircuitError, match="a table is a callable on ints or a 1-D array"):
            _compile(lambda x, t=bad: x.apply(t), 1)


def test_operand_errors():
    def prod(x, y):
        return x * y

    with pytest.raises(CircuitError, match=rf"at {_line(prod, 1)}: x \* y: TFHE multiplies an encrypted integer"):
        _compile(prod, 2, 2)
    for bad in (lambda x: x + 0.5, lambda x: x * 1.5, lambda x: x - True, lambda x: x + np.arange(3),
                lambda x: np.arange(3) - x):
        with pytest.raises(CircuitError, match="combines with encrypted TFHE values and int constants"):
            _compile(bad, 2)


def test_mixing_schemes_is_refused():
    from crossfhe.api.ckks import EncryptedVector
    from crossfhe.api.trace import Trace

    def f(x):
        other = EncryptedVector(None, None, False, 4, 4, trace=Trace("ckks"), node=0)
        return x + other

    with pytest.raises(CircuitError, match=rf"at {_line(f, 2)}: x \+ c: a TFHE value and a CKKS value are combined"):
        _compile(f, 2)

    def g(x):
        return EncryptedVector(None, None, False, 4, 4, trace=Trace("ckks"), node=0) - x

    with pytest.raises(CircuitError, match="a CKKS value and a TFHE value"):
        _compile(g, 2)
    with pytest.raises(CircuitError, match="must all be of one scheme"):
        fhe.compile(lambda x, y: x, TFHEInt(2), fhe.CKKSVector(4), cache=False)


def test_select_takes_the_smallest_preset_that_fits():
    def sel(fn, *bits, **kw):
        return fhe.compile(fn, *(TFHEInt(b) for b in bits), cache=False, **kw).params.name

    assert sel(lambda x, y: (x.apply(_half), y), 2, 2) == "P2"
    assert sel(lambda x, y: (x + y).apply(_sq), 3, 3) == "P4"  # x + y reaches 14
    assert sel(lambda x: (x * 15).apply(_half), 1) == "P4"  # noise 225: P4's budget is 393
    assert sel(lambda x: x.apply(_half), 2, bits=5) == "P6"
    assert sel(lambda x: x.apply(_half), 8) == "P8"
    with pytest.raises(CircuitError, match=r"no TFHE preset \(P2 to P10\) fits this circuit: at P10, `a \* 2000`"):
        sel(lambda x: x * 2000, 1)


# ---------------------------------------------------------------------------------------------------
# Passes, each on its own
# ---------------------------------------------------------------------------------------------------


def _counts(g):
    return ct.cost(g, P4)


def test_pipeline_report():
    c = _compile(program, 3, 3)
    keys = ("bootstraps", "pbs_calls", "key_switches", "test_vectors", "linear_ops", "depth")
    rows = {name: tuple(cost[k] for k in keys) for name, cost in c.report}
    assert rows == {
        "traced": (7, 7, 7, 7, 6, 2),
        "dead_code": (6, 6, 6, 6, 5, 2),
        "tables": (6, 6, 6, 6, 5, 2),
        "cse": (5, 5, 5, 5, 5, 2),
        "compose": (5, 5, 5, 5, 5, 2),  # u reads two lookups (h and c): nothing to compose
        "ks_dedup": (5, 3, 3, 5, 5, 2),
        "acc_dedup": (5, 3, 3, 2, 5, 2),
        "batch": (5, 2, 3, 2, 5, 2),
    }
    assert c.cost == dict(c.report)["batch"]
    _check_plain(c.graph)


def chain(x, y):
    a = x.apply(lambda v: (3 * v) % 8)
    b = (a * 2 + 1).apply(lambda v: v // 3)  # one source, a: composes onto x
    c = b.apply(lambda v: 15 - v)  # a chain: composes onto x too
    d = (a + y).apply(lambda v: v % 5)  # two sources: stays, and keeps a alive
    e = (y * 0 + b).apply(lambda v: v)  # y * 0 + b: b alone
    return c, d, e, a


def chain_reference(x, y):
    a = 3 * x % 8
    b = (2 * a + 1) // 3
    return 15 - b, (a + y) % 5, b, a


def test_compose_pass_fuses_lookups_of_one_lookup():
    """A lookup of c + w s, s one lookup's result and no other source, becomes one lookup of s's input with the
    composed table: b, c and e read x (depth 1), a stays for d and the output; the outputs are unchanged on every
    input pair."""
    c = _compile(chain, 3, 3)
    rows = dict(c.report)
    assert (rows["cse"]["bootstraps"], rows["cse"]["depth"]) == (5, 3)
    assert (rows["compose"]["bootstraps"], rows["compose"]["depth"]) == (4, 2)  # b = e after composing: merged
    g = c.graph
    x, y = _all_pairs(3)
    for got, want in zip(ct.evaluate_plain(g, P4, x, y), chain_reference(x, y), strict=True):
        np.testing.assert_array_equal(got, want)
    plain = ct.compose(ct.tables(c.traced, P4), P4)  # the pass alone: every composed lookup reads an input
    reads = [plain.nodes[n.args[0]].op for n in plain.nodes if n.op == "lookup"]
    assert reads.count("input") == 3 and len(reads) == 4


def test_dead_code_pass():
    g = _tables_graph()
    out = ct.dead_code(g, P4)
    assert (_counts(g)["bootstraps"], _counts(out)["bootstraps"]) == (7, 6)
    assert (_counts(g)["linear_ops"], _counts(out)["linear_ops"]) == (6, 5)
    _check_plain(out)


def test_cse_pass_merges_equal_tables_and_sums():
    g = _tables_graph()
    out = ct.cse(g, P4)
    assert (_counts(g)["bootstraps"], _counts(out)["bootstraps"]) == (7, 5)  # the dead one and x * x + 32
    _check_plain(out)
    # operands of + in either order are one value
    c = _compile(lambda x, y: ((x + y).apply(_half), (y + x).apply(_half)), 2, 2, optimize=False)
    assert (_counts(c.graph)["bootstraps"], _counts(ct.cse(c.graph, P4))["bootstraps"]) == (2, 1)


def test_ks_dedup_pass():
    g = ct.cse(_tables_graph(), P4)
    out = ct.ks_dedup(g, P4)
    before, after = _counts(g), _counts(out)
    assert (before["key_switches"], after["key_switches"]) == (5, 3)  # x and y once each, then u
    assert (before["pbs_calls"], after["pbs_calls"]) == (5, 3)
    assert before["bootstraps"] == after["bootstraps"] == 5
    pbs = [n for n in out.nodes if n.op == "pbs"]
    assert [(len(n.args), n.attr("rows")) for n in pbs] == [(1, ((0, 0), (0, 1)))] * 2
    _check_plain(out)


def test_acc_dedup_pass():
    g = ct.cse(_tables_graph(), P4)
    out = ct.acc_dedup(g, P4)
    # _sq on x, on y and on u, _half on x and y: two test vectors for the whole program
    assert (_counts(g)["test_vectors"], _counts(out)["test_vectors"]) == (5, 2)
    assert {k: v for k, v in _counts(g).items() if k != "test_vectors"} == \
        {k: v for k, v in _counts(out).items() if k != "test_vectors"}
    _check_plain(out)


def test_batch_pass():
    g = ct.cse(_tables_graph(), P4)
    out = ct.batch(g, P4)
    assert (_counts(g)["pbs_calls"], _counts(out)["pbs_calls"]) == (5, 2)  # depth 1 (4 lookups), depth 2 (1)
    assert (_counts(g)["key_switches"], _counts(out)["key_switches"]) == (5, 3)  # the batch's inputs: x, y
    assert (_counts(g)["test_vectors"], _counts(out)["test_vectors"]) == (5, 3)  # per launch: {sq, half}, {sq}
    (first,) = [n for n in out.nodes if n.op == "pbs"]
    assert len(first.args) == 2 and len(first.attr("rows")) == 4 and len(first.attr("tables")) == 2
    _check_plain(out)
    # independent lookups at one depth only: chains stay apart
    chain = _compile(lambda x: x.apply(_half).apply(_half).apply(_half), 3, optimize=False).graph
    assert _counts(ct.batch(chain, P4))["pbs_calls"] == 3


def test_graph_round_trips_through_json():
    g = _compile(program, 3, 3).graph
    back = ir.graph_from_json(ir.graph_to_json(g))
    assert back.digest() == g.digest() and str(back) == str(g)


def test_sixteen_lookups_counts():
    c = fhe.compile(tfhe_ml.sixteen_lookups, TFHEInt(4), TFHEInt(4), params=P4, cache=False)
    rep = dict(c.report)
    assert rep["traced"] == {"bootstraps": 16, "pbs_calls": 16, "key_switches": 16, "test_vectors": 16,
                             "linear_ops": 8, "depth": 2}
    assert rep["cse"] == rep["traced"]
    assert (rep["ks_dedup"]["key_switches"], rep["ks_dedup"]["pbs_calls"]) == (6, 6)
    assert rep["acc_dedup"]["test_vectors"] == 5
    assert c.cost == {"bootstraps": 16, "pbs_calls": 2, "key_switches": 6, "test_vectors": 5, "linear_ops": 8,
                      "depth": 2}
    x, y = _all_pairs(4)
    for got, want in zip(ct.evaluate_plain(c.graph, P4, x, y), tfhe_ml.sixteen_lookups_reference(x, y), strict=True):
        np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------------------------------
# Encrypted runs (exact)
# ---------------------------------------------------------------------------------------------------


def _run(graph, keys, *values):
    c = Circuit(graph, P4, (TFHEInt(3), TFHEInt(3)), ct.SCHEME, cache=False, keys=keys)
    return c.encrypt_run_decrypt(*values)


def test_encrypt_run_decrypt_on_a_batch(keys_p4):
    c = _compile(program, 3, 3)
    c.keys = keys_p4
    rng = np.random.default_rng(1)
    x, y = rng.integers(0, 8, (2, 3)), rng.integers(0, 8, (2, 3))
    out = c.encrypt_run_decrypt(x, y)
    for got, want in zip(out, program_reference(x, y), strict=True):
        assert got.shape == (2, 3)
        np.testing.assert_array_equal(got, want)


def test_linear_segments_fused_and_their_fallback(keys_p4):
    """The linear operations between launches run as one matrix product per segment (ct.linear_plan): the same
    words as one operation at a time (ct.constants(fuse=False)) on arbitrary words below q, and exact encrypted. A
    row whose coefficients sum to 2^31 / 255 or more (beyond any noise budget, so only a graph made by hand has one)
    has no plan, and the interpreter runs the operations one by one."""

    def dot(x, y):
        return (x + y * 2 + 1).apply(lambda v: v % 4) + x * 2 - y + 3, x - y * 3 + 9

    c = _compile(dot, 2, 2)
    plan = ct.linear_plan(c.graph)
    assert plan is not None
    sources, mat, _ = plan["out"]
    assert len(sources) == 3 and list(np.abs(mat).sum(axis=1)) == [4, 4]  # 2x - y + lookup; x - 3y
    rng = np.random.default_rng(4)
    q = np.array(P4.moduli, dtype=np.uint64)  # words below each limb's q
    words = [((rng.integers(0, 2**31, len(q)) % q).astype(np.uint32),
              (rng.integers(0, 2**31, (len(q), P4.long_dim)) % q[:, None]).astype(np.uint32)) for _ in range(2)]
    lin = ct.constants(c.graph, P4)
    seq = ct.constants(c.graph, P4, fuse=False)
    assert "linear" in lin and "linear" not in seq
    sk = ct._key_for(keys_p4.public, P4)
    rt_key = ops.program_key(sk)
    with jax.enable_x64(bool(ops.product_for(P4).X64)):
        fused = ct.interpret(c.graph, P4, words, {**lin, "key": rt_key})
        plain = ct.interpret(c.graph, P4, words, {**seq, "key": rt_key})
    for (fb, fa), (pb, pa) in zip(fused, plain, strict=True):
        np.testing.assert_array_equal(fb, pb)
        np.testing.assert_array_equal(fa, pa)
    x, y = rng.integers(0, 4, 5), rng.integers(0, 4, 5)
    c.keys = keys_p4
    got = c.encrypt_run_decrypt(x, y)
    np.testing.assert_array_equal(got[0], (x + 2 * y + 1) % 4 + 2 * x - y + 3)
    np.testing.assert_array_equal(got[1], x - 3 * y + 9)
    nodes = list(c.graph.nodes)
    i = next(k for k, n in enumerate(nodes) if n.op == "mul_int")
    nodes[i] = nodes[i].with_attrs(c=1 << 24)
    assert ct.linear_plan(ir.Graph("tfhe", tuple(nodes), c.graph.inputs, c.graph.outputs, c.graph.consts)) is None


def _nine_lookups(*x):
    """Nine lookups of three-term sums of five inputs (one launch of nine rows), then sums of their results."""
    outs = [(x[j % 5] + x[(j + 1) % 5] * 2 - x[(j + 2) % 5] + 3).apply(lambda v, j=j: (v * (j + 1) + 1) % 8)
            for j in range(9)]
    return tuple(o + outs[0] for o in outs[1:]) + (outs[0] - outs[1] + 7,)


def _nine_reference(*x):
    outs = [((x[j % 5] + 2 * x[(j + 1) % 5] - x[(j + 2) % 5] + 3) * (j + 1) + 1) % 8 for j in range(9)]
    return [o + outs[0] for o in outs[1:]] + [outs[0] - outs[1] + 7]


def test_sparse_segments_and_chunked_launches_give_the_same_words(keys_p4, monkeypatch):
    """A segment runs dense (int32 matrix products of byte planes), sparse (gathered rows, 16-bit halves) or, for a
    launch of more than LAUNCH_ROWS rows, sparse per chunk of rows with each chunk's bootstraps (lax.map): the same
    words on arbitrary words below q in all three forms, and exact encrypted in the chunked one."""
    c = _compile(_nine_lookups, 2, 2, 2, 2, 2)
    launch = next(i for i, n in enumerate(c.graph.nodes) if n.op == "pbs")
    assert len(c.graph.nodes[launch].attr("rows")) == 9
    rng = np.random.default_rng(8)
    q = np.array(P4.moduli, dtype=np.uint64)
    words = [((rng.integers(0, 2**31, len(q)) % q).astype(np.uint32),
              (rng.integers(0, 2**31, (len(q), P4.long_dim)) % q[:, None]).astype(np.uint32)) for _ in range(5)]
    rt_key = ops.program_key(ct._key_for(keys_p4.public, P4))
    results = {}
    for form, gain, rows in [("dense", 10**9, 2048), ("sparse", 0, 2048), ("chunked", 0, 4)]:
        monkeypatch.setattr(ct, "SPARSE_GAIN", gain)
        monkeypatch.setattr(ct, "LAUNCH_ROWS", rows)
        lin = ct.constants(c.graph, P4)["linear"]
        assert ("idx" in lin[str(launch)]) == (form != "dense")
        assert ("slot" in lin[str(launch)]) == (form == "chunked")
        if form == "chunked":
            assert lin[str(launch)]["slot"].shape == (3, 4)  # 9 rows in chunks of 4, the last padded
        with jax.enable_x64(bool(ops.product_for(P4).X64)):
            results[form] = ct.interpret(c.graph, P4, words, {**ct.constants(c.graph, P4), "key": rt_key})
    for form in ("sparse", "chunked"):
        for (fb, fa), (db, da) in zip(results[form], results["dense"], strict=True):
            np.testing.assert_array_equal(fb, db)
            np.testing.assert_array_equal(fa, da)
    xs = [rng.integers(0, 4, 3) for _ in range(5)]
    c2 = _compile(_nine_lookups, 2, 2, 2, 2, 2)
    c2.keys = keys_p4
    for got, want in zip(c2.encrypt_run_decrypt(*xs), _nine_reference(*xs), strict=True):
        np.testing.assert_array_equal(got, want)


def test_sparse_segment_is_exact_at_its_coefficient_bound():
    """ct._sparse against ct._fused on words just below q, rows whose |c| sum to 2^15 - 1 (the most a sparse
    segment takes: its 16-bit halves' sums then fit int32); a row at 2^15 stays dense."""
    rng = np.random.default_rng(9)
    q = np.array(P4.moduli, dtype=np.int64)
    m, width = 6, 1 + P4.long_dim
    words = (q[None, :, None] - 1 - rng.integers(0, 3, (m, len(q), width))).astype(np.uint32)
    mat = np.zeros((3, m), np.int64)
    mat[0, [0, 3]] = [ct.SPARSE_L1 - 2, -1]
    mat[1, [1, 2, 5]] = [-(ct.SPARSE_L1 // 2), ct.SPARSE_L1 // 4, 5]
    mat[2, 4] = 1
    const = rng.integers(0, 2**31, (3, len(q))).astype(np.uint32) % q.astype(np.uint32)
    radix = np.array([[pow(2, 8 * k, int(x)) for x in q] for k in range(4)], dtype=np.uint32)
    idx, coef = ct._sparse_form(mat)
    assert idx.shape == (3, 3) and np.abs(mat).sum(axis=1).max() < ct.SPARSE_L1
    sparse = ct._sparse(jax.numpy.asarray(words), {"idx": idx, "coef": coef, "const": const}, P4.moduli)
    dense = ct._fused(jax.numpy.asarray(words), {"coef": mat.astype(np.int32), "const": const}, radix, P4.moduli)
    want = (mat.astype(object) @ words.reshape(m, -1).astype(object)).reshape(3, len(q), width)
    want = np.array(want % q.astype(object)[None, :, None], dtype=np.int64)
    want[..., 0] = (want[..., 0] + const) % q
    for got in (sparse, dense):
        np.testing.assert_array_equal(np.asarray(got[0]), want[..., 0])
        np.testing.assert_array_equal(np.asarray(got[1]), want[..., 1:])
    wide = mat.copy()
    wide[0, 0] = ct.SPARSE_L1 - 1
    g = _compile(lambda x: x + 1, 2).graph
    assert "idx" not in ct._plan_constants(g, P4, {"out": ((0, 1, 2, 3, 4, 5), wide, ((),) * 3)})["out"]


@pytest.mark.parametrize("passes", [("tables",), ("tables", "cse", "ks_dedup")], ids=["lookups", "ks_dedup"])
def test_unbatched_launches_run(keys_p4, passes):
    """The other forms the lowering meets: single lookups with their own test vectors; pbs nodes of one input."""
    g = _compile(program, 3, 3).traced
    for name in passes:
        g = dict(ct.PASSES)[name](g, P4)
    x, y = np.array([0, 7, 3, 5]), np.array([7, 0, 4, 6])
    for got, want in zip(_run(g, keys_p4, x, y), program_reference(x, y), strict=True):
        np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------------------------------
# Keys and values
# ---------------------------------------------------------------------------------------------------


def test_keys_are_checked(keys_p4):
    c = _compile(program, 3, 3)
    c.keys = keys_p4
    assert c.requirements == {"server_key": True, "bootstraps": 5}
    ins = c.encrypt(np.arange(4), np.arange(4))
    other = fhe.CircuitKeys(*ops.keygen(P4, b"another key pair".ljust(32, b"\0")))
    with pytest.raises(KeyMismatchError, match="the inputs were encrypted under key pair"):
        c.run(*ins, keys=other)
    sk = keys_p4.public
    with pytest.raises(ParameterError, match="the server key was made for P2, the circuit for P4"):
        c.run(*ins, keys=ops.ServerKey(sk.prepared, P2, sk.key_id))
    with pytest.raises(TypeError, match="runs with a tfhe ServerKey"):
        c.run(*ins, keys=keys_p4.secret)
    with pytest.raises(TypeError, match="TFHE encrypts with the client key"):
        c.encrypt(np.arange(4), np.arange(4), keys=sk)
    with pytest.raises(ParameterError, match=r"TFHEInt\(bits=3\) takes values in \[0, 8\), got 8"):
        c.encrypt(np.arange(9), np.arange(9))
    with pytest.raises(ParameterError, match="takes integers"):
        c.encrypt(np.ones(2), np.ones(2))


def test_runtime_holds_the_circuits_tables(keys_p4):
    g = _compile(program, 3, 3).graph
    with ct.SCHEME.scope(P4):
        rt = ct.runtime(g, P4, keys_p4.public)
    assert rt["tables"].shape == (2, 16) and rt["tables"].dtype == np.int32


# ---------------------------------------------------------------------------------------------------
# Heavier: the benchmark's program encrypted, export/load, pbs_rows against pbs through the exact NTT
# ---------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_sixteen_lookups_encrypted(keys_p4):
    c = fhe.compile(tfhe_ml.sixteen_lookups, TFHEInt(4), TFHEInt(4), params=P4, cache=False)
    c.keys = keys_p4
    x, y = np.arange(16), np.arange(16) * 7 % 16
    for got, want in zip(c.encrypt_run_decrypt(x, y), tfhe_ml.sixteen_lookups_reference(x, y), strict=True):
        np.testing.assert_array_equal(got, want)
    ex, ey = ops.encrypt(keys_p4.secret, x), ops.encrypt(keys_p4.secret, y)
    eager = tfhe_ml.sixteen_lookups_eager(keys_p4.public, ex, ey)
    for got, want in zip(eager, tfhe_ml.sixteen_lookups_reference(x, y), strict=True):
        np.testing.assert_array_equal(ops.decrypt(keys_p4.secret, got), want)


@pytest.mark.slow
def test_export_and_load(keys_p4, tmp_path):
    c = _compile(program, 3, 3)
    c.keys = keys_p4
    path = c.export(tmp_path / "program.cfhe", batch_shape=(4,))
    server = fhe.load(path, P4)
    x, y = np.array([1, 2, 3, 4]), np.array([7, 6, 5, 4])
    outs = server.run(*c.encrypt(x, y), keys=keys_p4.public)
    for got, want in zip(c.decrypt(*outs), program_reference(x, y), strict=True):
        np.testing.assert_array_equal(got, want)


# slow: an export lowers the program (seconds); test_export_and_load above is the same kind
@pytest.mark.slow
def test_exported_circuit_refuses_another_layout_of_its_constants(keys_p4, tmp_path, monkeypatch):
    """A circuit exported where its segments ran sparse, loaded where they run dense (as a file from a version
    with another rule would be): refused with a ParameterError saying to export it again, nothing run."""
    c = _compile(_nine_lookups, 2, 2, 2, 2, 2)
    c.keys = keys_p4
    monkeypatch.setattr(ct, "SPARSE_GAIN", 0)
    path = c.export(tmp_path / "nine.cfhe")
    monkeypatch.setattr(ct, "SPARSE_GAIN", 10**9)
    server = fhe.load(path, P4)
    with pytest.raises(ParameterError, match="laid out differently.*export it again"):
        server.run(*c.encrypt(*[np.array([1])] * 5), keys=keys_p4.public)


@pytest.mark.slow
def test_pbs_rows_matches_pbs_through_the_ntt(keys_p4):
    ck, sk = keys_p4.secret, keys_p4.public
    x = ops.encrypt(ck, np.array([3, 9, 14]), b"pbs rows".ljust(32, b"\0"))
    tabs = np.stack([ops.lookup_table(P4, _sq), ops.lookup_table(P4, _half)]).astype(np.int32)
    sk = ops.prepare(sk, product=ops.NTTProduct)
    key = ops.program_key(sk)
    assert key is sk.prepared and key.rest is None and isinstance(key.product, ops.NTTProduct)
    ob, oa = jax.jit(lambda k, b, a: ops.pbs_rows(k, b, a, ops.make_test_vectors(P4, tabs), (0, 1, 2, 2),
                                                  (0, 0, 0, 1), params=P4))(key, x.b, x.a)
    want = ops.pbs_many(sk, x, [_sq, _half])
    np.testing.assert_array_equal(np.asarray(ob[:3]), np.asarray(want[0].b))
    np.testing.assert_array_equal(np.asarray(oa[:3]), np.asarray(want[0].a))
    np.testing.assert_array_equal(np.asarray(ob[3]), np.asarray(want[1].b[2]))
    np.testing.assert_array_equal(np.asarray(oa[3]), np.asarray(want[1].a[2]))


def test_the_key_switch_key_follows_the_whole_batch(keys_p4, monkeypatch):
    """The key switch's key is picked (``ks_key``: the int32 key for one input, its signed bytes from two on, as eager
    ``pbs`` picks) for the whole batch the program's ``vmap`` adds, which the kernel cannot see: one input through
    the bytes took 4x the int32 key's time (benchmarks/README.md, "Serving")."""
    from crossfhe.tfhe import bootstrap

    seen = []
    real = bootstrap.ks_key
    monkeypatch.setattr(bootstrap, "ks_key", lambda key, batch: seen.append(batch) or real(key, batch))
    c = _compile(lambda x: x.apply(_sq), 2)
    leaves, treedef = c._runtime(keys_p4.public)
    for batch, rows in (((), 1), ((1,), 1), ((3,), 3), ((2, 2), 4)):
        seen.clear()
        ins, _ = c._abstract(batch, leaves)
        with c.scheme.scope(c.params):
            jax.eval_shape(c._flat_fn(batch, treedef), ins, leaves)
        assert seen == [rows], (batch, seen)
