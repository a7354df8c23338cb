"""Which encrypted-vector x plaintext-matrix method is faster for a shape: a cost model in limb transforms.

Two methods compute u = A v mod t on BFV: :mod:`crossfhe.linalg.hmvp` (coefficient encoding, R rows per plaintext
product, LWE extraction and packing; any t) and :mod:`crossfhe.linalg.diagonal` (batch encoding, Halevi-Shoup
with baby-step giant-step; t = 1 mod 2N). Their costs, counted from their own plans, in one unit, a limb
transform (an NTT of N words modulo one prime):

    cost = limb transforms + key switches x (the key switch's limb transforms) x KEY_SWITCH_OVERHEAD
           + word products x (the method's product cost)

- HMVP (:func:`crossfhe.linalg.hmvp.work`): its ModDown limbs, its packing key switches and the point-wise
  products' 2 (L + K) N words per group and column block.
- Diagonal (:func:`crossfhe.linalg.diagonal.plan_matvec`): its key switches (baby and giant rotations, row swaps)
  and its ciphertext x plaintext products, 2 L N words each.

A key switch at the top level transforms L + sum_j (L + K - |D_j|) + 2K + 2L limbs (ModUp of each digit D_j,
then ModDown of both parts, :mod:`crossfhe.core.keyswitch`). KEY_SWITCH_OVERHEAD (its multiply-accumulates and
conversions) and the product costs (a word of a method's products against one word's share of a transform: HMVP's
stream through one fused kernel, the diagonal method's read a pre-rotated diagonal per product) are calibrated
by ``benchmarks/bench_hmvp.py``, which prints this model's choice beside the measured times (benchmarks/README.md,
issue 32). The model compares; it does not predict milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from crossfhe.bfv.params import Params
from crossfhe.core.keyswitch import transform_counts
from crossfhe.linalg import diagonal, hmvp

KEY_SWITCH_OVERHEAD = 1.15
"""A key switch's time over its limb transforms' (one compiled key switch against the same limbs transformed)."""

HMVP_PRODUCT_COST = 0.16
"""A word of HMVP's point-wise products, in limb transforms per word (its time over a limb transform's time / N)."""

DIAGONAL_PRODUCT_COST = 2.9
"""A word of the diagonal method's ciphertext x plaintext products, in the same unit."""


def keyswitch_limbs(params: Params) -> int:
    """Limb transforms of one key switch at the top level (module docstring)."""
    return sum(transform_counts(len(params.q), len(params.p), params.dnum))


@dataclass(frozen=True)
class Choice:
    """``method`` ("hmvp" or "diagonal"), the modelled costs of both (limb transforms; None where the method
    does not apply), and ``reason`` in words."""

    method: str
    hmvp_cost: float
    diagonal_cost: float | None
    reason: str


def hmvp_cost(params: Params, m: int, n: int, rows_per_product: int = hmvp.DEFAULT_ROWS_PER_PRODUCT) -> float:
    w = hmvp.work(params, m, n, rows_per_product)
    return (w.dot_limbs + w.key_switches * keyswitch_limbs(params) * KEY_SWITCH_OVERHEAD
            + w.products * HMVP_PRODUCT_COST / params.n)


def diagonal_cost(params: Params, m: int, n: int) -> float:
    plan = diagonal.plan_matvec(params, m, n)
    words = plan.plain_products * 2 * len(params.q) * params.n
    return plan.key_switches * keyswitch_limbs(params) * KEY_SWITCH_OVERHEAD + words * DIAGONAL_PRODUCT_COST / params.n


def choose_matvec(params: Params, m: int, n: int, *, rows_per_product: int = hmvp.DEFAULT_ROWS_PER_PRODUCT) -> Choice:
    """The method the cost model expects to be faster for an m x n matrix at ``params`` (the diagonal method
    only where t is a batching modulus)."""
    h = hmvp_cost(params, m, n, rows_per_product)
    if not params.batching:
        return Choice("hmvp", h, None, f"t = {params.t} is not a batching modulus: only HMVP applies")
    d = diagonal_cost(params, m, n)
    method = "hmvp" if h <= d else "diagonal"
    return Choice(method, h, d, f"modelled {h:.0f} limb transforms (HMVP, R = {rows_per_product}) against {d:.0f} "
                                f"(diagonal)")


__all__ = ["DIAGONAL_PRODUCT_COST", "HMVP_PRODUCT_COST", "KEY_SWITCH_OVERHEAD", "Choice", "choose_matvec",
           "diagonal_cost", "hmvp_cost", "keyswitch_limbs"]
