"""What an encrypted TFHE value can hold, from public information only: the interval of its message and its noise.

A value is an affine form c + sum_s w_s v_s over independent sources s (a fresh encryption in [0, 2^bits - 1], a
lookup's result in its table's image, a loaded value), each in a known interval and carrying a known noise (in
bootstraps' output variances). The form gives the value's interval (exact over independent sources: ``x - x`` is 0)
and its noise, sum_s w_s^2 noise_s. Linear operations map forms to forms exactly; a bootstrap starts a new source.
Eager values (:class:`crossfhe.api.tfhe.EncryptedInt`) and the circuit compiler's analysis
(:func:`crossfhe.api.tfhe_lower.analyze`) keep the same :class:`Bound`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np


def _is_plain_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


@dataclass(frozen=True)
class Bound:
    """What an encrypted value can hold: the affine form ``const`` + sum_s w_s v_s over independent sources s,
    ``terms`` the tuples (source id, w_s, lo_s, hi_s, noise_s), sorted by id: source s lies in [lo_s, hi_s] and
    carries noise_s bootstraps' variance (0 for a constant array). The interval it gives is exact over independent
    sources (``x - x`` is 0) and its noise is sum_s w_s^2 noise_s. A compiled circuit's sources are its inputs and
    lookups (their node indices); an eager value's are random 64-bit ids, so values that travel between processes do
    not alias."""

    const: int = 0
    terms: tuple = ()

    @classmethod
    def source(cls, lo: int, hi: int, noise: int = 1, sid: int | None = None) -> Bound:
        """A new independent source in [lo, hi] (``sid``: its id; default a random one)."""
        sid = int.from_bytes(os.urandom(8), "little") if sid is None else int(sid)
        return cls(0, ((sid, 1, int(lo), int(hi), int(noise)),))

    @property
    def lo(self) -> int:
        return self.const + sum(w * (lo if w > 0 else hi) for _, w, lo, hi, _ in self.terms)

    @property
    def hi(self) -> int:
        return self.const + sum(w * (hi if w > 0 else lo) for _, w, lo, hi, _ in self.terms)

    @property
    def noise(self) -> int:
        """sum_s w_s^2 noise_s: the value's noise in bootstraps' output variances."""
        return sum(w * w * nz for _, w, _, _, nz in self.terms)

    def __add__(self, other) -> Bound:
        if _is_plain_int(other):
            return Bound(self.const + int(other), self.terms)
        if not isinstance(other, Bound):
            return NotImplemented
        merged = {t[0]: list(t) for t in self.terms}
        for sid, w, lo, hi, nz in other.terms:
            if sid in merged:
                merged[sid][1] += w
            else:
                merged[sid] = [sid, w, lo, hi, nz]
        terms = tuple(tuple(t) for _, t in sorted(merged.items()) if t[1])
        return Bound(self.const + other.const, terms)

    __radd__ = __add__

    def scaled(self, c: int) -> Bound:
        """The bound of c times this value."""
        c = int(c)
        return Bound(c * self.const, tuple((s, c * w, lo, hi, nz) for s, w, lo, hi, nz in self.terms if c * w))



__all__ = ["Bound"]
