"""The growth model of BFV's invariant noise, operation by operation: what the circuit compiler's noise check
(:func:`crossfhe.api.bfv_lower.noise_budgets`) sums over a graph.

The invariant noise v (a ciphertext decrypts while |v| < 1/2; the budget is -log2(2 |v|),
:func:`crossfhe.bfv.ops.noise_budget`) in its typical (not worst) case, rounded up, as log2 v: a fresh encryption
t (2 sqrt(N)) / Q; a sum adds; an integer product multiplies by |c| (c centered mod t); a plaintext product by
2 ||m||_2 (m the plaintext's centered coefficients); a ciphertext product gives N t (v_a + v_b); a key switch
(relinearization, rotation) adds t e / Q with e = 2 sqrt(keyswitch_noise_bound). The estimate stays below the budget
measured through the secret key (the compiler's tests check it) and admits the depth each preset was measured to
reach (:mod:`crossfhe.bfv.presets`), and not one product more.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np

from crossfhe.bfv import encoder
from crossfhe.bfv.params import Params
from crossfhe.core import keyswitch as ks

_NORMS: OrderedDict = OrderedDict()


def _plaintext_norm_bits(params: Params, key: str, values: np.ndarray) -> float:
    """log2 ||m||_2 of the centered coefficients of the plaintext of ``values`` (the growth of a plaintext product)."""
    ck = (params.n, params.t, key)
    if ck not in _NORMS:
        width = values.shape[-1]
        m = np.asarray(encoder.encode_batch(encoder.slot_matrix(np.mod(values, params.t), width, params.n), params.n,
                                            params.t)).astype(np.int64)
        m = np.where(m > params.t // 2, m - params.t, m).astype(np.float64)
        norm = float(np.sqrt(np.sum(m * m)))
        _NORMS[ck] = math.log2(norm) if norm else -math.inf
        if len(_NORMS) > 1024:
            _NORMS.popitem(last=False)
    return _NORMS[ck]


def centered(c: int, t: int) -> int:
    """c mod t in (-t/2, t/2]."""
    c %= t
    return c - t if c > t // 2 else c


def _lse(*xs: float) -> float:
    """log2 of the sum of 2^x."""
    return float(np.logaddexp2.reduce(np.array(xs, dtype=np.float64)))


def model(params: Params) -> dict:
    """The model's terms for ``params`` as log2 of invariant noise (module docstring): ``fresh``, ``key_switch``,
    ``round`` (a constant's rounding), ``product`` (the factor of a ciphertext product, N t)."""
    log_q, log_t = math.log2(params.big_q), math.log2(params.t)
    bound = ks.keyswitch_noise_bound(params.n, params.q, params.p, params.dnum, hamming_weight=params.hamming_weight)
    return {
        "fresh": log_t + 1 + math.log2(params.n) / 2 - log_q,
        "key_switch": log_t + 1 + math.log2(bound) / 2 - log_q,
        "round": log_t - 1 - log_q,
        "product": math.log2(params.n) + log_t,
    }




def growth(params: Params, terms: dict, op: str, args: list[float], *, c=None, plaintext=None,
           plaintext_key=None) -> float:
    """log2 of the invariant noise after ``op`` on operands of noise ``args`` (log2), with the :func:`model`
    ``terms``: ``input`` (fresh), ``add``, ``sub``, ``neg``, ``add_scalar``, ``add_plain``, ``mul_int {c}``,
    ``mul_plain`` (the ``plaintext`` values, cached by ``plaintext_key``), ``tensor`` (a product before
    relinearization), ``mul``, ``relin``, ``rotate``. KeyError for another op."""
    if op == "input":
        return terms["fresh"]
    if op in ("add", "sub"):
        return _lse(*args)
    if op == "neg":
        return args[0]
    if op in ("add_scalar", "add_plain"):
        return _lse(args[0], terms["round"])
    if op == "mul_int":
        k = abs(centered(c, params.t))
        return args[0] + math.log2(k) if k else -math.inf
    if op == "mul_plain":
        return args[0] + 1 + _plaintext_norm_bits(params, plaintext_key, plaintext)
    if op == "tensor":
        return _lse(*args) + terms["product"]
    if op == "mul":
        return _lse(_lse(*args) + terms["product"], terms["key_switch"])
    if op in ("relin", "rotate"):
        return _lse(args[0], terms["key_switch"])
    raise KeyError(op)


__all__ = ["centered", "growth", "model"]
