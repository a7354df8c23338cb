"""Encrypted inference on multi-bit TFHE, written as circuits (Taurus §VI): what the workloads of
:mod:`crossfhe.apps.trees`, :mod:`crossfhe.apps.knn` and :mod:`crossfhe.apps.qnn` share.

Each model is fitted in the clear (scikit-learn or NumPy, seeded), then quantized to an **integer model**: every
value it computes is an integer in a known interval, every non-linear step a table on one integer. That integer
model has two implementations that must agree exactly:

- ``predict_plain(x)`` / ``outputs_plain(x)``: NumPy on int64, written from the model's own structure (a tree
  walk, a sort, a matrix product), independent of the compiler;
- ``circuit_fn``: the same computation traced over :class:`~crossfhe.api.specs.TFHEInt` inputs, one lookup
  (programmable bootstrap) per table, compiled by :func:`crossfhe.compile` (its passes deduplicate key switches and
  test vectors and batch the lookups of one bootstrap depth into one launch) and run encrypted by ``predict``.

Bounds. A TFHE value holds m in [0, 2^p) (p = ``params.message_bits``); the compiler proves every lookup's input and
every output stays there (:mod:`crossfhe.api.tfhe_lower`, interval analysis over affine forms of independent
sources) and that the noise (the sum of the squared weights of bootstrap outputs and inputs) stays within
:func:`~crossfhe.api.tfhe_lower.noise_budget`: 393 at P4, 304726 at P6, 16183 at P8. The analysis cannot know that
only one leaf of a tree is reached, so a sum over exclusive terms is bounded by the sum of their bounds;
:func:`reduce_sum` packs such sums into chunks that fit and clamps each chunk by a lookup ``min(m, b)`` to its true
bound b (exact, since the true value never exceeds b), a balanced reduction of few bootstrap levels.

Counts. ``model.counts()`` gives :func:`crossfhe.api.tfhe_lower.cost` of the circuit before the deduplication and
batching passes (the ``tables`` row of ``Circuit.report``: what ``compile(..., optimize=False)`` runs, one launch
and one key switch per lookup) and after them (the optimized graph).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from crossfhe.api import tfhe_lower as ctfhe
from crossfhe.api.circuit import Circuit, CircuitKeys
from crossfhe.api.circuit import compile as compile_circuit
from crossfhe.api.specs import TFHEInt
from crossfhe.core.lwe import LWECiphertext
from crossfhe.errors import ParameterError
from crossfhe.tfhe import ops, presets
from crossfhe.tfhe.params import Params

PRESETS = (presets.P4, presets.P6, presets.P7, presets.P8)
"""The presets the workloads choose from (smallest that fits first): 4-, 6-, 7- and 8-bit messages."""


def quantize_unit(x, bits: int) -> np.ndarray:
    """Features in [0, 1] (the bundled data sets' scaling) as ``bits``-bit integers: q = min(floor(x 2^bits),
    2^bits - 1), values clipped to [0, 1] first. int64, the shape of ``x``."""
    x = np.clip(np.asarray(x, dtype=np.float64), 0.0, 1.0)
    return np.minimum(np.floor(x * (1 << bits)), (1 << bits) - 1).astype(np.int64)


def budget(params: Params) -> int:
    """The squared norm (in bootstraps' noise) a lookup input or output may carry on ``params``."""
    return ctfhe.noise_budget(params)


def pick_params(fits, what: str, params: Params | None = None) -> Params:
    """``params`` if given (checked by ``fits(params) -> str | None``, the reason it does not fit), else the first
    of :data:`PRESETS` that fits; ParameterError naming the reason otherwise."""
    for p in (params,) if params is not None else PRESETS:
        why = fits(p)
        if why is None:
            return p
    raise ParameterError(f"{what} does not fit {params.name if params is not None else 'P8'}: {why}")


# --------------------------------------------------------------------------------------------------
# Sums of exclusive terms
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Term:
    """A value in a sum: ``value`` (traced, a bootstrap output: noise 1) or an int array (in the clear), ``hi``
    its bound (lo is 0), ``group`` the exclusive group it belongs to (see :func:`reduce_sum`)."""

    value: object
    hi: int
    group: object


def group_bound(terms, caps: dict) -> int:
    """The true bound of a sum of ``terms``: per group, ``caps[group](his)`` (e.g. ``max`` for terms of which at most
    one is nonzero, ``lambda h: min(sum(h), k)`` for 0/1 terms of which at most k are 1; default ``sum``)."""
    by: dict = {}
    for t in terms:
        by.setdefault(t.group, []).append(t.hi)
    return sum(caps.get(g, sum)(his) for g, his in by.items())


def pack(items, size, top: int, nmax: int) -> list[list]:
    """Items in order into consecutive chunks whose ``size`` (bound, count) sums stay within (top, nmax)."""
    chunks, cur, hi, n = [], [], 0, 0
    for it in items:
        h, k = size(it)
        if cur and (hi + h > top or n + k > nmax):
            chunks.append(cur)
            cur, hi, n = [], 0, 0
        cur.append(it)
        hi, n = hi + h, n + k
    return chunks + ([cur] if cur else [])


def reduce_sum(terms: list[Term], caps: dict, params: Params, lookup) -> tuple[object, int]:
    """The sum of ``terms`` as one value whose analysed bound is its true bound (:func:`group_bound`), returned
    with that bound. While the terms' bounds add up beyond 2^p - 1 (or they are more than the noise budget), one
    round of clamping: a group whose bounds add up beyond 2^p - 1 is split into chunks that fit (each clamped
    chunk stays in the group: still exclusive), the other groups are packed whole into chunks that fit, and each
    chunk of more than one term becomes ``lookup(chunk_sum, b)`` (``min(m, b)``, b the chunk's true bound). One
    bootstrap level per round, all of a round's lookups batched by the compiler.

    Raises ParameterError if the true bound of all terms is beyond 2^p - 1 (the model does not fit p bits)."""
    top, nmax = (1 << params.message_bits) - 1, budget(params)
    total = group_bound(terms, caps)
    if total > top:
        raise ParameterError(f"a sum may truly reach {total}, beyond the {params.message_bits}-bit message space of "
                             f"{params.name}; use a wider preset or coarser quantization")
    level = 0
    while sum(t.hi for t in terms) > top or len(terms) > nmax:
        groups: dict = {}
        for t in terms:
            groups.setdefault(t.group, []).append(t)
        new, blocks = [], []
        for g, ts in groups.items():
            if sum(t.hi for t in ts) <= top and len(ts) <= nmax:
                blocks.append(ts)
                continue
            for chunk in pack(ts, lambda t: (t.hi, 1), top, nmax):
                b = group_bound(chunk, caps)
                new.append(chunk[0] if len(chunk) == 1 else Term(lookup(sum(t.value for t in chunk), b), b, g))
        packed = pack(blocks, lambda ts: (sum(t.hi for t in ts), len(ts)), top, nmax)
        for c, chunk in enumerate(packed):
            members = [t for ts in chunk for t in ts]
            if len(members) == 1:
                new.append(members[0])
                continue
            b = group_bound(members, caps)
            g = members[0].group if len(chunk) == 1 else ("reduced", level, c)
            new.append(Term(lookup(sum(t.value for t in members), b), b, g))
        if len(new) == len(terms):
            raise ParameterError("internal: reduce_sum made no progress")
        terms, level = new, level + 1
    if not terms:
        return 0, 0
    return sum(t.value for t in terms), sum(t.hi for t in terms)


def clamp_traced(v, b: int):
    """``v.apply(min(m, b))``: a reduced chunk (traced)."""
    return v.apply(lambda m, b=b: min(m, b))


def clamp_plain(v, b: int):
    """``min(v, b)`` on int arrays (the plain twin of :func:`clamp_traced`)."""
    return np.minimum(v, b)


# --------------------------------------------------------------------------------------------------
# The model base
# --------------------------------------------------------------------------------------------------


class TFHEModel:
    """A quantized model with a plain integer twin and an encrypted circuit. Subclasses set ``params``,
    ``input_bits`` (per encrypted input), and implement ``fit``, ``encode(x) -> int64 [n, inputs]`` (the client's
    quantization: the circuit's inputs), ``outputs_plain(q) -> int64 [n, outputs]`` (the circuit's outputs in the
    clear), ``decode(outputs) -> labels`` and ``circuit_fn(*inputs)`` (traced)."""

    name = "model"
    params: Params
    input_bits: tuple[int, ...]

    def __init__(self):
        self._circuits: dict[bool, Circuit] = {}

    # plaintext -------------------------------------------------------------------------------------

    def predict_plain(self, x) -> np.ndarray:
        """The quantized model in the clear (exact integer arithmetic): labels int64 [n]."""
        return self.decode(self.outputs_plain(self.encode(x)))

    # circuit ---------------------------------------------------------------------------------------

    def compile(self, *, optimize: bool = True, keys: CircuitKeys | None = None, cache: bool = False) -> Circuit:
        """The circuit (made once per ``optimize``): one ``TFHEInt(bits)`` per encrypted input, at ``self.params``;
        ``optimize=False`` keeps one launch and one key switch per lookup (no CSE, dedup or batching)."""
        c = self._circuits.get(optimize)
        if c is None:
            specs = [TFHEInt(int(b)) for b in self.input_bits]
            c = compile_circuit(self.circuit_fn, *specs, params=self.params, optimize=optimize, cache=cache,
                                name=self.name, keys=keys)
            self._circuits[optimize] = c
        elif keys is not None and c.keys is None:
            c.keys = keys
        return c

    def counts(self) -> dict:
        """PBS and key-switch counts (:func:`crossfhe.api.tfhe_lower.cost`) ``before`` the dedup and batching passes
        (after dead code and tables: what the unoptimized circuit runs) and ``after`` them, and ``passes``: the
        counts after each pass."""
        c = self.compile()
        rows = dict(c.report)
        return {"before": rows["tables"], "after": rows[c.report[-1][0]], "passes": c.report}

    def lookups(self) -> int:
        """Lookups the circuit applies before any pass (one bootstrap each without the passes)."""
        return self.counts()["before"]["bootstraps"]

    # encrypted -------------------------------------------------------------------------------------

    def outputs_encrypted(self, q, *, keys: CircuitKeys | None = None, optimize: bool = True,
                          timings: dict | None = None) -> np.ndarray:
        """The circuit's outputs for the encoded inputs ``q`` int64 [n, inputs]: encrypted (client key), run as one
        batch of n (server key), decrypted. int64 [n, outputs]. ``timings``: filled with seconds per stage."""
        c = self.compile(optimize=optimize)
        if keys is not None:
            c.keys = keys
        elif c.keys is None:
            c.keygen()
        q = np.asarray(q, dtype=np.int64)
        t0 = time.perf_counter()
        enc = c.encrypt(*[q[:, i] for i in range(q.shape[1])])
        t1 = time.perf_counter()
        out = c.run(*enc)
        import jax

        jax.block_until_ready([o.leaves for o in out])
        t2 = time.perf_counter()
        dec = c.decrypt(*out)
        dec = [dec] if len(out) == 1 else dec
        res = np.stack([np.asarray(d, dtype=np.int64).reshape(len(q)) for d in dec], axis=1)
        if timings is not None:
            timings.update(encrypt=t1 - t0, run=t2 - t1, decrypt=time.perf_counter() - t2)
        return res

    def predict(self, x, *, keys: CircuitKeys | None = None, optimize: bool = True) -> np.ndarray:
        """Encrypted prediction: the client encodes and encrypts ``x``, the server runs the circuit, the client
        decrypts and decodes. Labels int64 [n], equal to :meth:`predict_plain` (TFHE decrypts exactly while every
        bootstrap succeeds: p_fail <= 2^-64 each)."""
        return self.decode(self.outputs_encrypted(self.encode(x), keys=keys, optimize=optimize))

    def report(self, x, y=None, *, keys: CircuitKeys | None = None, float_predict=None) -> dict:
        """Accuracy of the encrypted predictions on ``x`` against the quantized plain model (``agreement``: must be
        1.0, and the decrypted outputs equal the plain outputs exactly: ``exact``) and, given labels ``y``, the
        accuracies of both and of ``float_predict`` (the float model)."""
        q = self.encode(x)
        plain = self.outputs_plain(q)
        enc = self.outputs_encrypted(q, keys=keys)
        out = {"samples": len(q), "exact": bool((plain == enc).all()),
               "agreement": float((self.decode(plain) == self.decode(enc)).mean())}
        if y is not None:
            y = np.asarray(y)
            out["accuracy_encrypted"] = float((self.decode(enc) == y).mean())
            out["accuracy_plain"] = float((self.decode(plain) == y).mean())
            if float_predict is not None:
                out["accuracy_float"] = float((np.asarray(float_predict(x)) == y).mean())
        return out


# --------------------------------------------------------------------------------------------------
# A benchmark workload of the circuit compiler (Taurus's deduplications and batching)
# --------------------------------------------------------------------------------------------------

FEATURES = (lambda v: v % 4, lambda v: v // 4, lambda v: (v % 4 + v // 4) % 4, lambda v: (v % 4) * (v // 4) % 4)
"""Four base-4 features of a 4-bit value v = 4 h + l: l, h, (l + h) mod 4, l h mod 4 (each in [0, 4))."""


def sixteen_lookups(x, y):
    """A TFHE program of 16 lookups sharing inputs (for 4-bit x, y: ``TFHEInt(4)`` at P4): the four
    :data:`FEATURES` f_k of x and of y (8 lookups of two inputs through four tables), then for each k the pair
    u_k = 4 f_k(x) + f_k(y) in [0, 16) (noise 4^2 + 1 = 17 bootstraps', P4's budget) through two tables, the
    product f_k(x) f_k(y) mod 4 and the sum f_k(x) + f_k(y) (8 lookups of four inputs through two tables). Returns
    the 8 results (product, sum) for k = 0..3; :func:`sixteen_lookups_reference` computes them in the clear.
    Before the passes: 16 bootstraps, 16 launches, 16 key switches, 16 test vectors, depth 2; after: 2 launches, 6
    key switches, 5 test vectors (the product table of the second level is the fourth feature's)."""
    fx = [x.apply(f) for f in FEATURES]
    fy = [y.apply(f) for f in FEATURES]
    out = []
    for a, b in zip(fx, fy):
        u = a * 4 + b
        out += [u.apply(lambda v: (v // 4) * (v % 4) % 4), u.apply(lambda v: v // 4 + v % 4)]
    return tuple(out)


def sixteen_lookups_eager(sk: ops.ServerKey, x: LWECiphertext, y: LWECiphertext) -> list[LWECiphertext]:
    """:func:`sixteen_lookups` through :mod:`crossfhe.tfhe.ops` eagerly, as written without the compiler: one
    ``ops.pbs`` per lookup (16 key switches, 16 launches), ``ops.mul_scalar`` and ``ops.add`` in between."""
    fx = [ops.pbs(sk, x, f) for f in FEATURES]
    fy = [ops.pbs(sk, y, f) for f in FEATURES]
    out = []
    for a, b in zip(fx, fy):
        u = ops.add(ops.mul_scalar(sk.params, a, 4), b)
        out += [ops.pbs(sk, u, lambda v: (v // 4) * (v % 4) % 4), ops.pbs(sk, u, lambda v: v // 4 + v % 4)]
    return out


def sixteen_lookups_reference(x, y) -> tuple[np.ndarray, ...]:
    """:func:`sixteen_lookups` on plain integers (NumPy arrays of values in [0, 16))."""
    x, y = np.asarray(x), np.asarray(y)
    out = []
    for f in FEATURES:
        a, b = f(x), f(y)
        out += [a * b % 4, a + b]
    return tuple(out)


__all__ = ["FEATURES", "PRESETS", "TFHEModel", "Term", "sixteen_lookups", "sixteen_lookups_eager",
           "sixteen_lookups_reference", "budget", "clamp_plain", "clamp_traced", "group_bound", "pack", "pick_params",
           "quantize_unit", "reduce_sum"]
