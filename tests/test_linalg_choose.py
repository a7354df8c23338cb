"""The matrix-vector method chooser (crossfhe.linalg.choose) and HMVP's operation counts (crossfhe.linalg.hmvp.work)."""

import math

import pytest

from crossfhe.bfv import presets
from crossfhe.errors import ParameterError
from crossfhe.linalg import choose, hmvp
from crossfhe.testing import INSECURE_BFV_N256_COEFF

P = presets.CHAM_N4096


@pytest.mark.parametrize(("m", "n"), [(1, 1), (3, 200), (256, 256), (300, 40), (4096, 4096), (8192, 4096)])
def test_cham_counts_are_chams(m, n):
    """R = 1 is CHAM: n' - 1 + log2(N / n') key switches per tile of at most N rows (n' = next power of two)."""
    want = 0
    for start in range(0, m, P.n):
        rows = min(P.n, m - start)
        ell = (rows - 1).bit_length()
        want += (1 << ell) - 1 + int(math.log2(P.n)) - ell
    w = hmvp.work(P, m, n, 1)
    assert w.key_switches == want
    assert w.blocks == math.ceil(n / P.n)
    assert w.dot_limbs == m * (len(P.q) + len(P.p))


@pytest.mark.parametrize("r", [2, 16, 256])
def test_grouped_counts(r):
    """R rows per product: ceil(m / R) groups per tile, G' - 1 + log2((N / R) / G') key switches, n R / N blocks."""
    m, n = 1000, 4096
    w = hmvp.work(P, m, n, r)
    groups = math.ceil(m / r)
    g2 = 1 << (groups - 1).bit_length()
    assert (w.groups, w.blocks) == (groups, math.ceil(n * r / P.n))
    assert w.key_switches == g2 - 1 + int(math.log2(P.n // r // g2))
    assert w.products == groups * w.blocks * 2 * (len(P.q) + len(P.p)) * P.n


def test_choice_is_the_cheaper_modelled_method():
    for m, n in [(16, 16), (256, 256), (4096, 256), (4096, 4096)]:
        for r in (1, 16):
            c = choose.choose_matvec(P, m, n, rows_per_product=r)
            assert c.method == ("hmvp" if c.hmvp_cost <= c.diagonal_cost else "diagonal")
            assert c.hmvp_cost == choose.hmvp_cost(P, m, n, r)


def test_model_agrees_with_the_benchmark():
    """At the points benchmarks/README.md (issue 32) measured on one CPU core where the model and the measurement
    agree (14 of 16; it errs where the diagonal method ran at a tenth of its usual time per product: 256 x 256 at
    R = 1, 4096 x 256 at R = 16), the model picks the measured winner."""
    for m, n in [(256, 256), (256, 4096), (1024, 256), (1024, 4096), (4096, 4096), (8192, 256), (8192, 4096)]:
        assert choose.choose_matvec(P, m, n).method == "hmvp"
    for m, n in [(1024, 256), (4096, 256), (4096, 4096), (8192, 256), (8192, 4096)]:
        assert choose.choose_matvec(P, m, n, rows_per_product=1).method == "diagonal"
    for m, n in [(256, 4096), (1024, 4096)]:
        assert choose.choose_matvec(P, m, n, rows_per_product=1).method == "hmvp"


def test_only_hmvp_without_batching():
    c = choose.choose_matvec(INSECURE_BFV_N256_COEFF, 10, 10)
    assert (c.method, c.diagonal_cost) == ("hmvp", None)
    assert "batching" in c.reason


def test_bad_rows_per_product():
    with pytest.raises(ParameterError, match="power of two"):
        hmvp.work(P, 10, 10, 3)
