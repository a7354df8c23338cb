"""Chunk decomposition, BAT modular products and the matrix basis conversion, against exact references."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from crossfhe.kernels import MATRIX, VECTOR, KernelSet, as_kernel_set, bat, bconv_matrix, chunks
from crossfhe.math import rns
from crossfhe.math.primes import ntt_primes

N = 64
P31 = ntt_primes(31, N, 2)  # in [2^30, 2^31): the top digit needs the centering
P28 = ntt_primes(28, N, 2)
P20 = ntt_primes(20, N, 1)


def _residues(rng, shape, moduli, axis=-3):
    q = np.array(moduli, dtype=np.int64).reshape((-1,) + (1,) * (-axis - 1))
    return (rng.integers(0, 2**62, shape) % q).astype(np.uint32)


# ---------------------------------------------------------------------------------------------------
# Digits and bounds
# ---------------------------------------------------------------------------------------------------


def test_chunk_count():
    assert chunks.chunk_count([P31[0]]) == 4
    assert chunks.chunk_count([P20[0]]) == 3
    assert chunks.chunk_count([2**16 - 15]) == 2
    with pytest.raises(ValueError, match="below 2\\^31"):
        chunks.chunk_count([2**31 + 11])


@pytest.mark.parametrize("q", [P31[0], P28[0], P20[0]])
def test_digits_round_trip_and_range(q):
    rng = np.random.default_rng(q % 1000)
    x = rng.integers(0, q, 4096).astype(np.uint32)
    x[:4] = [0, 1, q // 2, q - 1]
    x[4:6] = [q // 2 + 1, q // 2 - 1]
    k = chunks.chunk_count([q])
    d = np.asarray(chunks.residue_chunks(x, q, k))
    assert d.dtype == np.int8 and d.shape == (4096, k)
    centered = np.where(x > q // 2, x.astype(np.int64) - q, x.astype(np.int64))
    np.testing.assert_array_equal(np.asarray(chunks.from_chunks(d)), centered)
    np.testing.assert_array_equal((d.astype(np.int64) * (256 ** np.arange(k))).sum(-1), centered)
    np.testing.assert_array_equal(chunks.chunks_numpy(x, q, k), d)


def test_chunks_numpy_refuses_too_few_digits():
    with pytest.raises(ValueError, match="do not fit 2 signed 8-bit digits"):
        chunks.chunks_numpy(np.array([P31[0] // 2]), np.int64(P31[0]), 2)


def test_accumulator_bound_is_tight():
    # Fig. 7: 2 bp + log2(K V) bits. The worst inner product (-128 * -128 each term) hits the bound exactly.
    assert chunks.MAX_INNER == 131071
    assert chunks.accumulator_bound(chunks.MAX_INNER) <= 2**31 - 1 < chunks.accumulator_bound(chunks.MAX_INNER + 1)
    assert chunks.accumulator_bits(1024) == 14 + 10 + 1
    a = jnp.full((1, 4096), -128, jnp.int8)
    c = jnp.einsum("hx,xw->hw", a, jnp.full((4096, 1), -128, jnp.int8), preferred_element_type=jnp.int32)
    assert int(c[0, 0]) == chunks.accumulator_bound(4096)
    assert chunks.inner_splits(100, 4) == [(0, 100)]
    runs = chunks.inner_splits(40000, 4)
    assert runs == [(0, 32767), (32767, 40000)] and all((b - a) * 4 <= chunks.MAX_INNER for a, b in runs)


def test_recombine_both_reductions():
    rng = np.random.default_rng(3)
    for q in (P31[0], P28[0], P20[0]):
        m = bat._constants(np.array([q]))
        k = 4
        for bound in (2**20, 2**30):
            c = rng.integers(-bound, bound + 1, (1000, k)).astype(np.int32)
            c[0] = bound
            c[1] = -bound
            want = (c.astype(object) * np.array([256**i for i in range(k)], dtype=object)).sum(-1) % q
            off = chunks.recombine_offset([q], bound, k)
            for single in (False, True):
                if single and chunks.needs_wide([q], bound, k):
                    continue  # the one-Barrett path is only valid where needs_wide says so
                got = chunks.recombine(jnp.asarray(c), m["q"], m["mu"], m["bits"], off, bound=bound,
                                       single_barrett=single, qinv=m["qinv"], r2=m["r2"])
                np.testing.assert_array_equal(np.asarray(got), want.astype(np.uint32))


# ---------------------------------------------------------------------------------------------------
# BAT products
# ---------------------------------------------------------------------------------------------------


def _dot_contractions(jaxpr) -> list[int]:
    """Contraction lengths of every dot_general in a jaxpr, nested calls included."""
    out = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            (lhs_c, _), _ = eqn.params["dimension_numbers"]
            out += [eqn.invars[0].aval.shape[d] for d in lhs_c]
        for v in eqn.params.values():
            inner = getattr(v, "jaxpr", None)
            if inner is not None:
                out += _dot_contractions(getattr(inner, "jaxpr", inner))
    return out


def test_int8_contraction_padded_to_dot_align():
    """With 3 digits per residue (20-bit moduli) the int8 products' contraction is padded to a multiple of
    DOT_ALIGN for right and left operands: unpadded, an H100 (jax 0.11.2) refused the left product below
    (210 digits) and gave wrong words for a 64-point matrix NTT's 6-digit one. Exactness is checked by
    test_bat_matmul_right_and_left."""
    rng = np.random.default_rng(7)
    b = _residues(rng, (1, 70, 9), P20)
    left = _residues(rng, (1, 6, 70), P20)
    data_r = _residues(rng, (2, 1, 5, 70), P20)
    data_l = _residues(rng, (2, 1, 70, 11), P20)
    for data, op in ((data_r, bat.bat_right(b, P20)), (data_l, bat.bat_left(left, P20))):
        assert op.k == 3
        sizes = _dot_contractions(jax.make_jaxpr(bat.matmul)(data, op).jaxpr)
        assert sizes and all(n % bat.DOT_ALIGN == 0 for n in sizes), sizes
        assert max(sizes) == 212  # 70 x 3 = 210 digits and 2 zero digits


@pytest.mark.parametrize("moduli", [P31, P28, P20, (P31[0], P28[0])])
def test_bat_matmul_right_and_left(moduli):
    rng = np.random.default_rng(len(moduli) + moduli[0] % 97)
    ln = len(moduli)
    q = np.array(moduli, dtype=np.int64).reshape(-1, 1, 1)
    a = _residues(rng, (3, ln, 5, 70), moduli)
    b = _residues(rng, (ln, 70, 9), moduli)
    a[0] = q - 1  # extreme data
    b[0, :, 0] = q[0, 0, 0] - 1
    op = bat.bat_right(b, moduli)
    np.testing.assert_array_equal(np.asarray(bat.matmul(a, op)), bat.matmul_reference(a, b, q))
    left = _residues(rng, (ln, 6, 70), moduli)
    data = _residues(rng, (2, ln, 70, 11), moduli)
    opl = bat.bat_left(left, moduli)
    np.testing.assert_array_equal(np.asarray(bat.matmul(data, opl)), bat.matmul_reference(left, data, q))


def test_bat_operand_digits_are_dense_and_exact():
    # Alg. 4: row i of an element's K x K matrix holds the digits of [b 2^(8i)]_q: sum_j B_ij 2^(8j) = that.
    q = P31[1]
    b = np.array([[[q - 1, 12345]]], dtype=np.uint32)
    op = bat.bat_right(b, [q])
    w = np.asarray(op.w).reshape(4, 2, 4)  # [(v = 0, i), (w, j)]
    for col, val in enumerate(b[0, 0]):
        for i in range(4):
            rep = int((w[i, col].astype(np.int64) * (256 ** np.arange(4))).sum())
            assert rep % q == (int(val) << (8 * i)) % q and abs(rep) <= q // 2


def test_bat_matmul_splits_long_inner_dimension():
    # V K = 4 * 33000 > MAX_INNER: two runs, each reduced, added mod q; the worst-case data still exact.
    q = P31[0]
    rng = np.random.default_rng(5)
    v = 33000
    b = rng.integers(0, q, (1, v, 2)).astype(np.uint32)
    a = rng.integers(0, q, (1, 2, v)).astype(np.uint32)
    a[0, 0] = q // 2 + 1  # centered to -(q - 1)/2: large negative digits
    op = bat.bat_right(b, [q])
    assert len(op.splits) == 2
    np.testing.assert_array_equal(np.asarray(bat.matmul(a, op)), bat.matmul_reference(a, b, q))


def test_bat_vec_mul():
    rng = np.random.default_rng(7)
    moduli = P31 + P20
    q = np.array(moduli, dtype=np.int64).reshape(-1, 1)
    b = _residues(rng, (3, 128), moduli, axis=-2)
    a = _residues(rng, (2, 3, 128), moduli, axis=-2)
    a[0] = q - 1
    got = np.asarray(bat.vec_mul(a, bat.bat_vector(b, moduli)))
    np.testing.assert_array_equal(got, (a.astype(object) * b.astype(object) % q.astype(object)).astype(np.uint32))


def test_bat_errors():
    with pytest.raises(ValueError, match="\\[L, rows, cols\\]"):
        bat.bat_right(np.zeros(5, np.uint32), [P31[0]])
    with pytest.raises(ValueError, match="broadcast"):
        bat.bat_right(np.zeros((2, 3, 3), np.uint32), P31 + P28)
    with pytest.raises(ValueError, match="only by limb and by output column"):
        bat.bat_right(np.zeros((1, 3, 3), np.uint32), np.full((1, 3, 1), P31[0]))
    op = bat.bat_right(np.zeros((1, 3, 2), np.uint32), np.array(P31[:1] * 2).reshape(1, 1, 2))
    with pytest.raises(ValueError, match="one modulus per limb"):
        bat.matmul(jnp.zeros((1, 2, 3), jnp.uint32), op)
    with pytest.raises(ValueError, match="\\[L, N\\]"):
        bat.bat_vector(np.zeros((2, 4), np.uint32), [P31[0]])


# ---------------------------------------------------------------------------------------------------
# Basis conversion on the MATRIX kernel set
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kw", [{}, {"centered": True}, {"exact": True}])
def test_matrix_basis_conversion_bit_exact(kw):
    rng = np.random.default_rng(11)
    src, dst = rns.RNSBasis(P31 + P28), rns.RNSBasis(P20 + ntt_primes(30, N, 2))
    x = _residues(rng, (3, 4, N), src.moduli, axis=-2)
    x[0] = np.array(src.moduli).reshape(-1, 1) - 1
    vec = rns.BasisConversion.create(src, dst, **kw)
    mat = rns.BasisConversion.create(src, dst, kernels=MATRIX, **kw)
    assert vec.kernels is None and mat.kernels is MATRIX
    np.testing.assert_array_equal(
        np.asarray(rns.fast_basis_conversion(x, mat)), np.asarray(rns.fast_basis_conversion(x, vec))
    )


def test_matrix_mod_up_and_mod_down_bit_exact():
    rng = np.random.default_rng(12)
    q, p = rns.RNSBasis(P31 + P28), rns.RNSBasis(ntt_primes(30, N, 2))
    qp = q.concat(p)
    x = _residues(rng, (2, 4, N), q.moduli, axis=-2)
    for centered in (False, True):
        a = rns.mod_up(x, rns.ModUpPlan.create(q, qp, centered=centered))
        b = rns.mod_up(x, rns.ModUpPlan.create(q, qp, centered=centered, kernels=MATRIX))
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    y = _residues(rng, (2, 6, N), qp.moduli, axis=-2)
    a = rns.mod_down(y, rns.ModDownPlan.create(q, p, exact=True))
    b = rns.mod_down(y, rns.ModDownPlan.create(q, p, exact=True, kernels=MATRIX))
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_centered_matmul_grouped():
    # A group axis of conversions with different bases (the digits of a key-switching ModUp).
    rng = np.random.default_rng(13)
    src = np.array([[P31[0], P28[0]], [P31[1], P28[1]]], dtype=np.int64)[..., None]  # [G, a, 1]
    dst = np.array([[P20[0]], [P31[0]]], dtype=np.int64)[..., None]  # [G, m, 1]
    w = (rng.integers(0, 2**40, (2, 1, 2)) % dst).astype(np.uint32)
    y = (rng.integers(0, 2**62, (3, 2, 2, N)) % src).astype(np.uint32)
    op = bconv_matrix.conversion_operand(w, src, dst)
    got = np.asarray(bconv_matrix.centered_matmul(y, src.astype(np.uint32), op))
    yc = np.where(y > src // 2, y.astype(np.int64) - src, y.astype(np.int64)).astype(object)
    want = np.einsum("gja,bgan->bgjn", w.astype(object), yc) % dst.astype(object)
    np.testing.assert_array_equal(got, want.astype(np.uint32))


def test_kernel_set_values():
    assert as_kernel_set("Matrix") is MATRIX and as_kernel_set("matrix") == MATRIX  # names give the singletons
    assert as_kernel_set(VECTOR) is VECTOR and not VECTOR.uses_tables and MATRIX.uses_tables
    assert repr(MATRIX) == "MATRIX"
    with pytest.raises(ValueError, match="unknown kernel set"):
        KernelSet("tensor")
    with pytest.raises(ValueError, match="VECTOR, NATIVE, GPU, MATRIX or AUTO"):
        as_kernel_set(3)
