"""GPT-2 causal self-attention on multi-bit TFHE (:mod:`crossfhe.apps.tfhe_ml`): one head (:class:`AttentionHead`)
or a block of heads with its output projection (:class:`AttentionBlock`), as a quantized integer model whose
encrypted circuit equals it exactly.

Float model (:mod:`crossfhe.apps.gpt2`): GPT-2's attention of one layer, weights drawn as GPT-2 initialises them
(seeded NumPy). The client embeds random token ids (wte + wpe) and applies ln_1 in the clear; the encrypted input
is that LayerNorm's output x [s, d]. Head h: q, k, v = x W_{q,k,v,h} + b,
o_h = softmax(q k^T / sqrt(head_dim) + causal mask) v [s, head_dim]; the block: [o_1 .. o_H] W_proj + b_proj [s, d].

Integer model. Every value is an integer in a known interval; a signed value a of ``bits`` b is stored as
a + 2^(b-1) in [0, 2^b) (z = 2^(b-1) its zero point) and stands for (a - z) s, s its scale (per tensor and head,
calibrated on the ``fit`` inputs: the step of least squared error, :func:`_scale`). The steps:

1. Input: x_q = clip(round(x / s_x) + z_x, 0, 2^bx - 1), ``bits.x`` bits, per tensor: s d_model encrypted inputs.
2. Projections (:class:`QuantizedDense`: q, k, v of each head, c_proj): per neuron j integer weights w_ji with
   |w| <= ``weight_max`` and scale s_j (:func:`crossfhe.apps.qnn.quantize_neurons`, the per-input scales folded
   into the float weights), the accumulator sum_i w_ji x_i split into parts (:func:`crossfhe.apps.qnn.split_parts`):
   each part + its offset lies in [0, A sum|w|] within [0, 2^p) (A = 2^bx - 1), noise sum w^2 within the budget.
   The neuron's real value is s_j sum_parts (part - c_part) + b_j, c_part = offset + z_x sum w (clear).
3. Sums through lookups (:class:`Reduction`, :func:`plan_sum`): terms t_i in [0, h_i] (noise n_i) standing for
   u sum_i (t_i - c_i) with one unit u. While sum h_i > 2^p - 1 (or sum n_i beyond the budget), the terms are packed
   in order into groups that fit, and each group's sum S becomes one lookup clip(round(u (S - C) / c) + 2^(k-1),
   0, 2^k - 1) (k = ``bits.carry``; c one scale per level, calibrated): a k-bit term of unit c, noise 1. When the
   terms fit, the last lookup applies the step's output function to u (S - C). A requantized sum, not an exact
   one; the plain model applies the same tables, so the circuit still equals it exactly.
4. Scores: q (``bits.qk``, scale s_q / sqrt(head_dim)) and k (``bits.qk``) per (t, t' <= t, j): one packed lookup
   on q 2^bk + k (bq + bk <= p, noise 2^(2 bk) + 1) giving (q - z)(k - z) + M in [0, hi] (M: the least product's
   negation); summed over j by step 3, whose last table is the exponential E = clip(round(e^(sigma - R) Emax),
   1, Emax), Emax = 2^be - 1, R the largest score on the calibration inputs (a clear bound instead of the row max;
   scores above R saturate at Emax). E >= 1 keeps every row sum positive.
5. Softmax: per row t, Z = sum_{t' <= t} E (step 3; exact while (t + 1) Emax <= 2^p - 1) through a reciprocal code
   r = round((2^br - 1) log(Z / Zlo) / log(Zhi / Zlo)) (a geometric grid over the row's calibrated [Zlo, Zhi]), then
   one packed lookup per (t, t') on E 2^br + r: P = clip(round(E / Zhat(r) / s_P), 0, 2^bp - 1), s_P per row.
6. P V: per (t, j) the packed lookups P 2^bv + v -> P (v - z_v) + M (bp + bv <= p), summed over t' <= t by step 3,
   whose last table quantizes the head output o to ``bits.out`` bits (scale s_o per head).
7. The block: c_proj a :class:`QuantizedDense` over the heads' outputs (each head's s_o folded into its columns),
   output ``bits.out`` bits per tensor.

Counts. :meth:`~crossfhe.apps.tfhe_ml.TFHEModel.counts` (before and after the compiler's passes) and
:meth:`_Attention.lookup_breakdown` (per step, before the passes). The projections dominate: a part holds
(2^p - 1) / A of sum_i |w_ji|, so their lookups grow as A sum_i |w_ji| / 2^p per neuron. Figures at GPT-2 small's
shape: benchmarks/README.md, "GPT-2 attention on TFHE".

Every lookup's input and the noise are proved in range by the compiler's interval analysis; widths that cannot fit
the preset raise :class:`~crossfhe.errors.ParameterError` at construction. ``outputs_plain`` runs the integer model
in NumPy (matrix products, tables indexed by integer arrays), ``circuit_fn`` traces it one value at a time; they are
equal exactly (tests/test_attention.py). ``error(x)`` compares the dequantized integer model with the float model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from crossfhe.apps.gpt2 import attention_float, gpt2_inputs, gpt2_weights
from crossfhe.apps.qnn import quantize_neurons, split_parts
from crossfhe.apps.tfhe_ml import TFHEModel, budget, pack
from crossfhe.errors import ParameterError
from crossfhe.tfhe import presets
from crossfhe.tfhe.params import Params

# --------------------------------------------------------------------------------------------------
# Bit widths
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AttentionBits:
    """The integer model's widths (bits): ``x`` the encrypted input, ``qk`` queries and keys, ``v`` values, ``exp``
    the exponentials E, ``recip`` the reciprocal code r, ``prob`` the probabilities P, ``out`` the outputs (heads
    and block), ``carry`` the terms of a requantized sum (module docstring, step 3)."""

    x: int
    qk: int
    v: int
    exp: int
    recip: int
    prob: int
    out: int
    carry: int

    @classmethod
    def for_params(cls, params: Params, project: bool = False) -> AttentionBits:
        """Defaults for a preset of p message bits: h = p // 2 for every packed operand (so a product lookup
        fits) and the carries, 2 input bits below P8 and 3 from P8; outputs of h + 1 bits for a head alone, h when
        they feed c_proj (``project``): its lookups grow with 2^out - 1, and h + 1 bits there cost 1.5 times the
        block's lookups at P6 for the same error (benchmarks/README.md, "GPT-2 attention on TFHE")."""
        h = params.message_bits // 2
        return cls(x=2 if params.message_bits < 8 else 3, qk=h, v=h, exp=h, recip=h, prob=h,
                   out=h if project else h + 1, carry=h)

    def check(self, params: Params, weight_max: int, project: bool = False) -> None:
        """ParameterError if a width does not fit ``params`` (in the user's terms); ``project``: the outputs of the
        heads feed a projection too."""
        p, nb = params.message_bits, budget(params)
        for name, b in vars(self).items():
            if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or not 1 <= b <= p:
                raise ParameterError(f"bits.{name} must be an int in [1, {p}] ({params.name} has {p}-bit messages), "
                                     f"got {b!r}")
        if self.carry >= p:
            raise ParameterError(f"bits.carry must be below {p} so that two requantized terms fit one lookup")
        for what, a, b in (("queries times keys", self.qk, self.qk), ("exponentials times reciprocals", self.exp,
                           self.recip), ("probabilities times values", self.prob, self.v)):
            if a + b > p:
                raise ParameterError(f"{what} are packed into one lookup of {a} + {b} bits, beyond the {p}-bit "
                                     f"messages of {params.name}; lower the widths or use a wider preset")
            if (1 << b) ** 2 + 1 > nb:
                raise ParameterError(f"{what}: packing by 2^{b} gives noise {(1 << b) ** 2 + 1}, beyond the "
                                     f"budget {nb} of {params.name}")
        widest = max(self.x, self.out) if project else self.x
        if ((1 << widest) - 1) * weight_max > (1 << p) - 1:
            raise ParameterError(f"one weight of {weight_max} times a {widest}-bit input exceeds the {p}-bit messages "
                                 f"of {params.name}; lower weight_max or the widths")


# --------------------------------------------------------------------------------------------------
# Sums through lookups
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reduction:
    """A sum of terms through lookups (module docstring, step 3): ``levels``, each a tuple of groups (term indices
    int64 [g], table int64 [2^p]); a group's value is its table at the sum of its terms (of the level before:
    the reduction's terms for the first level). The last level has one group: the result."""

    levels: tuple

    @property
    def lookups(self) -> int:
        return sum(len(level) for level in self.levels)


def plan_sum(cal, his, noises, centers, unit: float, out_fn, params: Params, carry: int,
             percentile: float) -> Reduction:
    """The :class:`Reduction` of terms with calibration values ``cal`` int64 [m, T] (in [0, his]), bounds ``his``,
    noises ``noises`` and centers ``centers`` (each [T]), standing for ``unit`` sum (t - center); the last table is
    ``out_fn(real)`` (a vectorised function to ints in [0, 2^p)) of real = unit (S - C). The intermediate scale
    of a level: :func:`_scale` of its groups' real values on ``cal`` for ``carry`` bits. Groups are packed in
    order (:func:`crossfhe.apps.tfhe_ml.pack`) so that their bounds add up to at most 2^p - 1 and their noises
    (the terms' own: sum w^2 for a projection's part, 1 for a lookup's output) to at most the budget; every level
    after the first has terms of bound 2^carry - 1 and noise 1, so groups of floor((2^p - 1) / (2^carry - 1)) >= 2
    and the number of terms at least halves per level: ceil(log_F T) + 1 levels at most."""
    top, nb, size = (1 << params.message_bits) - 1, budget(params), 1 << params.message_bits
    z = np.arange(size)
    vals = np.asarray(cal, dtype=np.int64)
    his, noises = [int(h) for h in his], [int(v) for v in noises]
    centers = np.asarray(centers, dtype=np.float64)
    levels = []
    while sum(his) > top or sum(noises) > nb:
        sizes = list(zip(his, noises))
        groups = pack(range(len(his)), sizes.__getitem__, top, nb)
        idx = [np.array(g, dtype=np.int64) for g in groups]
        sums = [vals[:, g].sum(1) for g in idx]
        real = np.concatenate([unit * (s - centers[g].sum()) for s, g in zip(sums, idx)])
        half = 1 << (carry - 1)
        c = _scale(real, percentile, half)
        tabs = [np.clip(np.rint(unit * (z - centers[g].sum()) / c) + half, 0, 2 * half - 1).astype(np.int64)
                for g in idx]
        levels.append(tuple(zip(idx, tabs)))
        vals = np.stack([t[s] for t, s in zip(tabs, sums)], axis=1)
        his, noises = [2 * half - 1] * len(idx), [1] * len(idx)
        centers, unit = np.full(len(idx), float(half)), c
    table = np.asarray(out_fn(unit * (z - centers.sum())), dtype=np.int64)
    if table.min() < 0 or table.max() > top:
        raise ParameterError(f"internal: an output table leaves [0, {top}]")
    levels.append(((np.arange(len(his), dtype=np.int64), table),))
    return Reduction(tuple(levels))


def reduce_plain(red: Reduction, terms) -> np.ndarray:
    """:class:`Reduction` ``red`` on int arrays ``terms`` [..., T]: int64 [...]."""
    vals = np.asarray(terms, dtype=np.int64)
    for level in red.levels:
        vals = np.stack([tab[vals[..., g].sum(-1)] for g, tab in level], axis=-1)
    return vals[..., 0]


def _total(values):
    out = values[0]
    for v in values[1:]:
        out = out + v
    return out


def reduce_traced(red: Reduction, terms: list):
    """:class:`Reduction` ``red`` on traced terms: one lookup per group."""
    for level in red.levels:
        terms = [_total([terms[i] for i in g]).apply(tab) for g, tab in level]
    return terms[0]


def product_table(ua: int, ub: int, za: int, zb: int, p: int) -> tuple[np.ndarray, int, int]:
    """The packed product's table: for z = a 2^ub + b (a < 2^ua, b < 2^ub), (a - za)(b - zb) + M; returns
    (table int64 [2^p], M, hi) with M the least product's negation and every entry in [0, hi] (0 past 2^(ua+ub))."""
    a, b = np.divmod(np.arange(1 << (ua + ub)), 1 << ub)
    prod = (a - za) * (b - zb)
    m = int(-prod.min())
    table = np.zeros(1 << p, dtype=np.int64)
    table[: len(prod)] = prod + m
    return table, m, int(prod.max() + m)


def _scale(values, percentile: float, half: int) -> float:
    """The step s of the signed quantizer clip(round(v / s), -half, half - 1) with the least squared error on
    ``values`` (a sample of at most 2^16), searched over f m / (half - 1/2), m the ``percentile`` of |v|, f in
    [1/20, 1] (geometric, 48 steps): at 2-3 bits the best step clips a Gaussian's tails, far below m / half."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if len(v) > 1 << 16:
        v = v[np.random.default_rng(0).choice(len(v), 1 << 16, replace=False)]
    top = max(float(np.percentile(np.abs(v), percentile)), 1e-12) / (half - 0.5)
    steps = top * np.geomspace(0.05, 1.0, 48)
    err = [((np.clip(np.rint(v / st), -half, half - 1) * st - v) ** 2).sum() for st in steps]
    return float(steps[int(np.argmin(err))])


def _quantizer(scale: float, bits: int, shift: float = 0.0):
    """real -> clip(round((real + shift) / scale) + 2^(bits-1), 0, 2^bits - 1)."""
    return lambda r: np.clip(np.rint((r + shift) / scale) + (1 << (bits - 1)), 0, (1 << bits) - 1)


# --------------------------------------------------------------------------------------------------
# Projections
# --------------------------------------------------------------------------------------------------


class QuantizedDense:
    """A projection y = x W^T + b of signed ``in_bits`` inputs (scales ``in_scale`` [in], zero point
    2^(in_bits-1)) to signed ``out_bits`` outputs (module docstring, step 2): ``w`` int64 [out, in], ``scale``
    s_j [out], ``parts`` per neuron a list of (input indices, offset), ``reductions`` per neuron, ``out_scale``
    (per tensor). Calibrated on ``x_cal`` int64 [m, in]."""

    def __init__(self, w_float, bias, *, in_bits: int, in_scale, out_bits: int, x_cal, params: Params,
                 weight_max: int, carry: int, percentile: float):
        a_max, z_in = (1 << in_bits) - 1, 1 << (in_bits - 1)
        wf = np.asarray(w_float, dtype=np.float64) * np.broadcast_to(np.asarray(in_scale, np.float64),
                                                                     (np.shape(w_float)[1],))[None, :]
        self.w, self.scale = quantize_neurons(wf, a_max, params, weight_max, split=True)
        self.bias = np.asarray(bias, dtype=np.float64)
        self.in_bits, self.out_bits = in_bits, out_bits
        x_cal = np.asarray(x_cal, dtype=np.int64)
        real = ((x_cal - z_in) @ self.w.T) * self.scale[None, :] + self.bias[None, :]
        self.out_scale = _scale(real, percentile, 1 << (out_bits - 1))
        self.parts: list[list[tuple[np.ndarray, int]]] = [[] for _ in range(len(self.w))]
        for k, idx, off in split_parts(self.w, a_max, params):
            self.parts[k].append((idx, int(off)))
        self.reductions = []
        for j, parts in enumerate(self.parts):
            row = self.w[j]
            cal = np.stack([x_cal[:, idx] @ row[idx] + off for idx, off in parts], axis=1)
            his = [a_max * int(np.abs(row[idx]).sum()) for idx, _ in parts]
            noises = [int((row[idx] ** 2).sum()) for idx, _ in parts]
            centers = [off + z_in * int(row[idx].sum()) for idx, off in parts]
            self.reductions.append(plan_sum(cal, his, noises, centers, float(self.scale[j]),
                                            _quantizer(self.out_scale, out_bits, self.bias[j]), params, carry,
                                            percentile))

    def plain(self, x) -> np.ndarray:
        """The outputs for int64 inputs [..., in]: int64 [..., out] (a matrix product per part, then the
        reductions' tables)."""
        x = np.asarray(x, dtype=np.int64)
        return np.stack([reduce_plain(red, np.stack([x[..., idx] @ self.w[j, idx] + off for idx, off in parts],
                                                    axis=-1))
                         for j, (parts, red) in enumerate(zip(self.parts, self.reductions))], axis=-1)

    def traced(self, xs: list) -> list:
        """The outputs for one row of traced inputs ``xs`` (length in): a list of length out."""
        out = []
        for j, (parts, red) in enumerate(zip(self.parts, self.reductions)):
            row, terms = self.w[j], []
            for idx, off in parts:
                acc = None
                for v in sorted(set(row[idx].tolist()) - {0}):
                    s = _total([xs[i] for i in idx[row[idx] == v]]) * int(v)
                    acc = s if acc is None else acc + s
                terms.append(xs[0] * 0 + off if acc is None else acc + off)
            out.append(reduce_traced(red, terms))
        return out

    def dequantize(self, y) -> np.ndarray:
        return (np.asarray(y, dtype=np.float64) - (1 << (self.out_bits - 1))) * self.out_scale


# --------------------------------------------------------------------------------------------------
# One head's attention
# --------------------------------------------------------------------------------------------------


class _Head:
    """One head's integer attention (module docstring, steps 2-6), calibrated on ``x_cal`` int64 [m, s, d]."""

    def __init__(self, weights: dict, head: int, *, head_dim: int, bits: AttentionBits, x_scale: float, x_cal,
                 params: Params, weight_max: int, percentile: float):
        d, p, b = weights["attn_w"].shape[0], params.message_bits, bits
        m, s = x_cal.shape[:2]
        cols = np.arange(head * head_dim, (head + 1) * head_dim)
        rows = x_cal.reshape(m * s, d)
        common = dict(in_bits=b.x, in_scale=x_scale, x_cal=rows, params=params, weight_max=weight_max,
                      carry=b.carry, percentile=percentile)
        self.q, self.k, self.v = (QuantizedDense(weights["attn_w"][:, i * d + cols].T, weights["attn_b"][i * d + cols],
                                                 out_bits=b.qk if i < 2 else b.v, **common) for i in range(3))
        self.bits, self.p, self.seq_len = b, p, s
        q, k, v = (layer.plain(x_cal).astype(np.int64) for layer in (self.q, self.k, self.v))  # [m, s, hd]
        zq, zv = 1 << (b.qk - 1), 1 << (b.v - 1)
        emax, rmax, pmax = (1 << b.exp) - 1, (1 << b.recip) - 1, (1 << b.prob) - 1
        # scores: packed products summed over the head dimension, the last table exp(sigma - R)
        self.qk_table, mqk, hqk = product_table(b.qk, b.qk, zq, zq, p)
        unit = self.q.out_scale * self.k.out_scale / np.sqrt(head_dim)
        causal = np.tril(np.ones((s, s), bool))
        terms = self.qk_table[q[:, :, None, :] * (1 << b.qk) + k[:, None, :, :]]  # [m, s, s, hd]
        sigma = unit * (terms.sum(-1) - mqk * head_dim)
        self.bound = float(np.percentile(sigma[:, causal], 100.0))
        bound = self.bound
        self.score = plan_sum(terms[:, causal].reshape(-1, head_dim), [hqk] * head_dim, [1] * head_dim,
                              [mqk] * head_dim, unit,
                              lambda r: np.clip(np.rint(np.exp(np.minimum(r - bound, 0.0)) * emax), 1, emax),
                              params, b.carry, percentile)
        e = np.zeros((m, s, s), dtype=np.int64)
        e[:, causal] = reduce_plain(self.score, terms[:, causal])
        # softmax: the row sum's reciprocal code, then P = E / Z by packed lookups
        self.sums, self.divide, self.pv = [], [], []
        self.pv_table, mpv, hpv = product_table(b.prob, b.v, 0, zv, p)
        o_real = []
        self.p_scale = []
        for t in range(s):
            z = e[:, t, :t + 1].sum(-1)
            lo, hi = max(float(z.min()), t + 1.0), max(float(z.max()), t + 1.0)
            grid = lo * (hi / lo) ** (np.arange(rmax + 1) / max(rmax, 1))
            ratio = np.log(hi / lo) if hi > lo else 1.0

            def code(r, lo=lo, ratio=ratio):
                return np.clip(np.rint(rmax * np.log(np.maximum(r, lo) / lo) / ratio), 0, rmax)

            self.sums.append(plan_sum(e[:, t, :t + 1], [emax] * (t + 1), [1] * (t + 1), [0] * (t + 1), 1.0, code,
                                      params, b.carry, percentile))
            r = reduce_plain(self.sums[t], e[:, t, :t + 1])
            s_p = max(float(np.percentile(e[:, t, :t + 1] / grid[r][:, None], percentile)), 1e-12) / pmax
            self.p_scale.append(s_p)
            ev, rv = np.divmod(np.arange(1 << (b.exp + b.recip)), 1 << b.recip)
            table = np.zeros(1 << p, dtype=np.int64)
            table[: len(ev)] = np.clip(np.rint(ev / grid[rv] / s_p), 0, pmax)
            self.divide.append(table)
            pr = table[e[:, t, :t + 1] * (1 << b.recip) + r[:, None]]  # [m, t+1]
            pv = self.pv_table[pr[:, :, None] * (1 << b.v) + v[:, :t + 1, :]]  # [m, t+1, hd]
            o_real.append(s_p * self.v.out_scale * (pv.sum(1) - mpv * (t + 1)))
        self.out_scale = _scale(np.stack(o_real, 1), percentile, 1 << (b.out - 1))
        for t in range(s):
            pr = self.divide[t][e[:, t, :t + 1] * (1 << b.recip) + reduce_plain(self.sums[t], e[:, t, :t + 1])[:, None]]
            pv = self.pv_table[pr[:, :, None] * (1 << b.v) + v[:, :t + 1, :]]
            self.pv.append(plan_sum(pv.transpose(0, 2, 1).reshape(-1, t + 1), [hpv] * (t + 1), [1] * (t + 1),
                                    [mpv] * (t + 1), self.p_scale[t] * self.v.out_scale,
                                    _quantizer(self.out_scale, b.out), params, b.carry, percentile))

    def plain(self, x) -> np.ndarray:
        """The head's integer outputs for int64 inputs [n, s, d]: int64 [n, s, head_dim] (NumPy over arrays)."""
        b, s = self.bits, self.seq_len
        q, k, v = (layer.plain(x) for layer in (self.q, self.k, self.v))
        terms = self.qk_table[q[:, :, None, :] * (1 << b.qk) + k[:, None, :, :]]  # [n, s, s, hd]
        out = []
        for t in range(s):
            e = reduce_plain(self.score, terms[:, t, :t + 1])  # [n, t+1]
            r = reduce_plain(self.sums[t], e)  # [n]
            pr = self.divide[t][e * (1 << b.recip) + r[:, None]]
            pv = self.pv_table[pr[:, :, None] * (1 << b.v) + v[:, :t + 1, :]]  # [n, t+1, hd]
            out.append(reduce_plain(self.pv[t], pv.transpose(0, 2, 1)))
        return np.stack(out, axis=1)

    def traced(self, x: list) -> list:
        """The head's outputs for traced inputs ``x`` [s][d]: [s][head_dim] traced values."""
        b, s = self.bits, self.seq_len
        q, k, v = ([layer.traced(x[t]) for t in range(s)] for layer in (self.q, self.k, self.v))
        hd = len(q[0])
        out = []
        for t in range(s):
            e = [reduce_traced(self.score, [(q[t][j] * (1 << b.qk) + k[u][j]).apply(self.qk_table) for j in range(hd)])
                 for u in range(t + 1)]
            r = reduce_traced(self.sums[t], e)
            pr = [(e[u] * (1 << b.recip) + r).apply(self.divide[t]) for u in range(t + 1)]
            out.append([reduce_traced(self.pv[t], [(pr[u] * (1 << b.v) + v[u][j]).apply(self.pv_table)
                                                   for u in range(t + 1)]) for j in range(hd)])
        return out


# --------------------------------------------------------------------------------------------------
# The models
# --------------------------------------------------------------------------------------------------


class _Attention(TFHEModel):
    """Common part of :class:`AttentionHead` and :class:`AttentionBlock`: the float weights (:func:`gpt2_weights`
    with a vocabulary of 1024 token ids: the sampled ids index wte only, so GPT-2's 50257 rows would only cost
    memory), the input encoding, the heads, and the optional output projection."""

    project = False

    def __init__(self, *, d_model: int, n_heads: int, head_dim: int | None, seq_len: int, heads, bits, params,
                 weight_max: int | None, percentile: float, n_layer: int, seed: int):
        super().__init__()
        self.params = params or presets.P6
        if not isinstance(self.params, Params):
            raise ParameterError(f"params must be a TFHE preset (crossfhe.tfhe.presets.P4 ...), got {params!r}")
        head_dim = d_model // n_heads if head_dim is None else head_dim
        if min(d_model, n_heads, head_dim, seq_len) < 1 or n_heads * head_dim != d_model:
            raise ParameterError(f"d_model ({d_model}) must equal n_heads ({n_heads}) x head_dim ({head_dim}), all "
                                 f"positive, and seq_len ({seq_len}) positive")
        if not 50.0 <= percentile <= 100.0:
            raise ParameterError(f"percentile must be in [50, 100], got {percentile}")
        self.bits = bits or AttentionBits.for_params(self.params, self.project)
        if not isinstance(self.bits, AttentionBits):
            raise ParameterError(f"bits must be an AttentionBits, got {bits!r}")
        if weight_max is None:
            widest = max(self.bits.x, self.bits.out) if self.project else self.bits.x
            weight_max = max(1, min(3, ((1 << self.params.message_bits) - 1) // ((1 << widest) - 1)))
        if isinstance(weight_max, bool) or not isinstance(weight_max, (int, np.integer)) or weight_max < 1:
            raise ParameterError(f"weight_max must be an int >= 1, got {weight_max!r}")
        self.bits.check(self.params, weight_max, self.project)
        self.d_model, self.n_heads = int(d_model), int(n_heads)
        self.head_dim, self.seq_len = int(head_dim), int(seq_len)
        self.heads = tuple(int(h) for h in heads)
        if any(not 0 <= h < n_heads for h in self.heads):
            raise ParameterError(f"head indices must be in [0, {n_heads}), got {self.heads}")
        self.weight_max, self.percentile, self.seed = int(weight_max), float(percentile), int(seed)
        self.weights = gpt2_weights(d_model=self.d_model, n_layer=n_layer, vocab=1024, n_ctx=max(64, self.seq_len),
                                    seed=self.seed)
        self.input_bits = (self.bits.x,) * (self.seq_len * self.d_model)

    def sample_inputs(self, n: int, *, seed: int = 1) -> np.ndarray:
        """``n`` ln_1 outputs of random token sequences (:func:`gpt2_inputs`): float [n, seq_len, d_model]."""
        return gpt2_inputs(self.weights, n, self.seq_len, seed=seed)

    def _check_x(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 3 or x.shape[1:] != (self.seq_len, self.d_model):
            raise ParameterError(f"{self.name} takes inputs [n, seq_len={self.seq_len}, d_model={self.d_model}], got "
                                 f"shape {x.shape}")
        return x

    def fit(self, x, y=None) -> _Attention:
        """Quantize the model, calibrating every scale on the ln_1 outputs ``x`` float [m, seq_len, d_model]."""
        x = self._check_x(x)
        b, pct = self.bits, self.percentile
        self.x_scale = _scale(x, pct, 1 << (b.x - 1))
        xq = self._quantize_x(x)
        self.head_models = [_Head(self.weights, h, head_dim=self.head_dim, bits=b, x_scale=self.x_scale, x_cal=xq,
                                  params=self.params, weight_max=self.weight_max, percentile=pct) for h in self.heads]
        if self.project:
            o = np.concatenate([hm.plain(xq) for hm in self.head_models], axis=-1)
            scales = np.repeat([hm.out_scale for hm in self.head_models], self.head_dim)
            self.proj = QuantizedDense(self.weights["proj_w"].T, self.weights["proj_b"], in_bits=b.out,
                                       in_scale=scales, out_bits=b.out, x_cal=o.reshape(-1, o.shape[-1]),
                                       params=self.params, weight_max=self.weight_max, carry=b.carry, percentile=pct)
        return self

    def _quantize_x(self, x) -> np.ndarray:
        z = 1 << (self.bits.x - 1)
        return np.clip(np.rint(x / self.x_scale) + z, 0, (1 << self.bits.x) - 1).astype(np.int64)

    def encode(self, x) -> np.ndarray:
        """The client's inputs: ln_1 outputs quantized per tensor to ``bits.x`` bits, int64 [n, seq_len d_model]
        (row-major: token, then feature)."""
        x = self._check_x(x)
        return self._quantize_x(x).reshape(len(x), -1)

    def _heads_plain(self, q) -> np.ndarray:
        q = np.asarray(q, dtype=np.int64)
        if q.ndim != 2 or q.shape[1] != self.seq_len * self.d_model:
            raise ParameterError(f"{self.name} takes encoded inputs [n, {self.seq_len * self.d_model}], got {q.shape}")
        x = q.reshape(len(q), self.seq_len, self.d_model)
        return np.concatenate([hm.plain(x) for hm in self.head_models], axis=-1)  # [n, s, H hd]

    def _heads_traced(self, xs) -> list:
        x = [list(xs[t * self.d_model:(t + 1) * self.d_model]) for t in range(self.seq_len)]
        outs = [hm.traced(x) for hm in self.head_models]
        return [[v for o in outs for v in o[t]] for t in range(self.seq_len)]

    def lookup_breakdown(self) -> dict:
        """Lookups per step before any pass, from the quantized model's structure (their sum is the unoptimized
        circuit's bootstrap count): ``projections`` (q, k, v: the reductions of every neuron of every token),
        ``scores`` (s (s + 1) / 2 pairs: head_dim products and the sum's lookups, whose last is the exponential),
        ``softmax`` (the row sums' reciprocal codes and one division per pair), ``pv`` (per row t and output
        feature: t + 1 products and the sum's lookups) and ``c_proj`` (the block's projection)."""
        s, hd = self.seq_len, self.head_dim
        pairs = s * (s + 1) // 2
        out = {"projections": 0, "scores": 0, "softmax": 0, "pv": 0, "c_proj": 0}
        for hm in self.head_models:
            out["projections"] += s * sum(r.lookups for layer in (hm.q, hm.k, hm.v) for r in layer.reductions)
            out["scores"] += pairs * (hd + hm.score.lookups)
            out["softmax"] += pairs + sum(r.lookups for r in hm.sums)
            out["pv"] += hd * sum(t + 1 + r.lookups for t, r in enumerate(hm.pv))
        if self.project:
            out["c_proj"] = s * sum(r.lookups for r in self.proj.reductions)
        out["total"] = sum(out.values())
        return out

    def error(self, x) -> dict:
        """The dequantized integer model against the float one on ``x`` (ln_1 outputs): ``max_abs`` and
        ``rms`` of the difference, ``relative`` (its norm over the float output's), ``cosine`` (of the flattened
        outputs), ``float_rms`` (the float output's)."""
        x = self._check_x(x)
        ref = self.float_outputs(x)
        got = self.predict_plain(x)
        diff = got - ref
        return {"max_abs": float(np.abs(diff).max()), "rms": float(np.sqrt((diff ** 2).mean())),
                "relative": float(np.linalg.norm(diff) / np.linalg.norm(ref)),
                "cosine": float((got * ref).sum() / (np.linalg.norm(got) * np.linalg.norm(ref))),
                "float_rms": float(np.sqrt((ref ** 2).mean()))}


class AttentionHead(_Attention):
    """One causal head of GPT-2 attention (``head`` of ``n_heads``; head_dim = d_model / n_heads) over ``seq_len``
    tokens: inputs the ln_1 outputs [seq_len, d_model] (``bits.x`` bits each, encrypted), outputs the head's
    softmax(q k^T / sqrt(head_dim)) v [seq_len, head_dim] at ``bits.out`` bits. ``bits``: an
    :class:`AttentionBits` (default :meth:`AttentionBits.for_params`); ``params``: default P6; ``weight_max``: the
    largest integer weight of a projection (default the largest up to 3 with which one weight times the widest
    projection input fits 2^p - 1); ``percentile``: the largest |value| the scale search considers (:func:`_scale`)
    and the probabilities' scale; ``n_layer``: GPT-2's depth (c_proj's initialisation); ``seed``: the weights'.
    Call :meth:`fit` on ln_1 outputs (:meth:`sample_inputs`) before anything else."""

    name = "attention_head"

    def __init__(self, *, d_model: int = 768, n_heads: int = 12, head: int = 0, head_dim: int | None = None,
                 seq_len: int = 8, bits: AttentionBits | None = None, params: Params | None = None,
                 weight_max: int | None = None, percentile: float = 99.9, n_layer: int = 12, seed: int = 0):
        super().__init__(d_model=d_model, n_heads=n_heads, head_dim=head_dim, seq_len=seq_len, heads=(head,),
                         bits=bits, params=params, weight_max=weight_max, percentile=percentile, n_layer=n_layer,
                         seed=seed)

    def outputs_plain(self, q) -> np.ndarray:
        """The head's outputs in the clear: int64 [n, seq_len head_dim] (token-major)."""
        return self._heads_plain(q).reshape(len(q), -1)

    def circuit_fn(self, *xs):
        return tuple(v for row in self._heads_traced(xs) for v in row)

    def decode(self, outputs) -> np.ndarray:
        """The dequantized head output: float [n, seq_len, head_dim]."""
        hm = self.head_models[0]
        out = np.asarray(outputs, dtype=np.float64).reshape(len(outputs), self.seq_len, self.head_dim)
        return (out - (1 << (self.bits.out - 1))) * hm.out_scale

    def float_outputs(self, x) -> np.ndarray:
        """The float head's output on ``x``: float [n, seq_len, head_dim]."""
        return attention_float(self.weights, self._check_x(x), self.n_heads)[0][:, self.heads[0]]


class AttentionBlock(_Attention):
    """GPT-2's attention block: ``n_heads`` causal heads of head_dim = d_model / n_heads, then c_proj d_model ->
    d_model (a :class:`QuantizedDense` over the heads' ``bits.out``-bit outputs). Inputs the ln_1 outputs
    [seq_len, d_model], outputs [seq_len, d_model] at ``bits.out`` bits. Arguments as :class:`AttentionHead`."""

    name = "attention_block"
    project = True

    def __init__(self, *, d_model: int = 768, n_heads: int = 12, seq_len: int = 8, bits: AttentionBits | None = None,
                 params: Params | None = None, weight_max: int | None = None, percentile: float = 99.9,
                 n_layer: int = 12, seed: int = 0):
        super().__init__(d_model=d_model, n_heads=n_heads, head_dim=None, seq_len=seq_len, heads=range(n_heads),
                         bits=bits, params=params, weight_max=weight_max, percentile=percentile, n_layer=n_layer,
                         seed=seed)

    def outputs_plain(self, q) -> np.ndarray:
        """The block's outputs in the clear: int64 [n, seq_len d_model] (token-major)."""
        return self.proj.plain(self._heads_plain(q)).reshape(len(q), -1)

    def circuit_fn(self, *xs):
        return tuple(v for row in self._heads_traced(xs) for v in self.proj.traced(row))

    def decode(self, outputs) -> np.ndarray:
        """The dequantized block output: float [n, seq_len, d_model]."""
        return self.proj.dequantize(np.asarray(outputs).reshape(len(outputs), self.seq_len, self.d_model))

    def float_outputs(self, x) -> np.ndarray:
        """The float block's output (after c_proj) on ``x``: float [n, seq_len, d_model]."""
        return attention_float(self.weights, self._check_x(x), self.n_heads)[1]


__all__ = ["AttentionBits", "AttentionBlock", "AttentionHead", "QuantizedDense", "Reduction", "plan_sum",
           "product_table", "reduce_plain", "reduce_traced"]
