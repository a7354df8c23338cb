"""CKKS <-> TFHE from the contexts: comparisons, ReLU, max, argmax and any lookup table on encrypted CKKS vectors.

    ckks = CKKSContext.create(presets.ckks.N16_BOOT, ...)          # bootstrappable: values come back to CKKS
    tfhe = TFHEContext.create(presets.tfhe.P6)
    sw = SchemeSwitch.create(ckks, tfhe, slots=64)                  # both directions' keys, made together
    x = ckks.encrypt(v)                                             # up to 64 values
    sw.relu(x, interval=(-4, 4))                                    # EncryptedVector: ReLU on a 5-bit grid
    sw.max(x, interval=(-4, 4)), sw.argmax(x, interval=(-4, 4))     # the largest value; a one-hot vector
    sw.to_tfhe(x, interval=(-4, 4))                                 # EncryptedInt batch, 5-bit integers

What a result is. A CKKS value v reaches TFHE as the integer q = round((v - lo) / d), d = (hi - lo) / (2^bits - 1),
clipped to [0, 2^bits - 1] (:class:`~crossfhe.convert.switch.Quantizer`); ``bits`` defaults to P - 1 (P the TFHE
parameters' message bits), which leaves the interval's width of headroom: values up to half a width outside
[lo, hi] clip to its ends, values further out give wrong results (nothing under encryption can tell). Every
function here is a table on q (:meth:`SchemeSwitch.apply`): fn(lo + q d), whose outputs are integers where fn's are
(sign, comparisons, indicators) and otherwise a 2^P-point grid over their range; back in CKKS they carry the switch's
error (:func:`crossfhe.convert.switch.shift_errors`: a few hundredths of an output step at P4, under a hundredth at P6).
So a function's error is at most half an input step of quantization (times fn's slope) plus half an output step
plus that. A value is off by more than rounding with probability 2^:meth:`SchemeSwitch.log2_p_fail` each.

Who holds what. :meth:`SchemeSwitch.create` takes the key owner's two contexts and makes public material only (the
ring keys between the secrets, PackLWEs's and the bootstrap's Galois keys); the switch, like a public context,
pickles and travels without any secret. TFHE values and CKKS vectors it returns refer to the two public contexts.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from crossfhe.api._owner import register_switch, switch_for
from crossfhe.api._owner import same_keys as _same_keys
from crossfhe.api._owner import set_owner as _set_owner
from crossfhe.api.ckks import CKKSContext, CKKSPublicContext, EncryptedVector
from crossfhe.api.tfhe import Bound, EncryptedInt, TFHEContext, TFHEPublicContext, noise_budget
from crossfhe.ckks import ops as ckks_ops
from crossfhe.convert import switch
from crossfhe.core.lwe import LWECiphertext
from crossfhe.errors import ParameterError
from crossfhe.progress import callback as progress_callback
from crossfhe.tfhe import ops as tfhe_ops


def _interval(interval) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in interval)
    except (TypeError, ValueError):
        raise ParameterError(f"interval must be a pair (lo, hi) of numbers, got {interval!r}") from None
    return lo, hi


def _output_grid(outs: np.ndarray, step: float, message_bits: int) -> tuple[float, float]:
    """(lo, out_step) of the output integers: from fn's minimum, the coarsest of 1 (integer outputs), the input
    step d, d / 2, ... d / 2^(P-1) on which every output lies (to 2^-30 relative) within 2^P points, else 2^P
    points over fn's range (outputs then round to that grid)."""
    lo, hi = float(outs.min()), float(outs.max())
    span = hi - lo
    for cand in [1.0] + [step / 2**j for j in range(message_bits)]:
        k = (outs - lo) / cand
        if span / cand < 2**message_bits and np.all(np.abs(k - np.rint(k)) <= 2.0**-30 * max(1.0, float(k.max()))):
            return lo, cand
    return lo, (span / (2**message_bits - 1)) or 1.0


def function_table(qz: switch.Quantizer, fn) -> tuple[np.ndarray, float, float]:
    """(ints, out_lo, out_step): fn on the quantizer's 2^bits grid points lo + q d as integers ints[q] in [0, 2^P)
    with fn(lo + q d) = out_lo + out_step ints[q] (exactly where fn's outputs lie on a grid of at most 2^P points,
    else rounded to 2^P points over fn's range). ``fn`` is called once, on the grid."""
    grid = qz.dequantize(np.arange(2**qz.bits))
    outs = np.asarray(fn(grid), dtype=np.float64)
    if outs.shape != grid.shape or not np.all(np.isfinite(outs)):
        raise ParameterError(f"fn must map the {grid.size} grid points to as many finite numbers")
    out_lo, out_step = _output_grid(outs, qz.step, qz.message_bits)
    return np.rint((outs - out_lo) / out_step).astype(np.int64), out_lo, out_step


@dataclass(frozen=True, repr=False, eq=False)
class SchemeSwitch:
    """The public material of both directions between a CKKS and a TFHE key pair (:mod:`crossfhe.api.switch`)."""

    ckks: CKKSPublicContext
    tfhe: TFHEPublicContext
    keys: switch.SwitchKeys
    interval: tuple = (-1.0, 1.0)
    """The interval ``x > y`` (and ``<``, ``<=``, ``>=``) on encrypted vectors assumes for x - y (:meth:`compare`)."""

    @classmethod
    def create(cls, ckks: CKKSContext, tfhe: TFHEContext, *, slots: int | None = None, seed: bytes | None = None,
               interval=(-1.0, 1.0), progress="auto") -> SchemeSwitch:
        """The switching keys of the two key owner's contexts (:func:`crossfhe.convert.switch.keygen`): CKKS vectors
        of up to ``slots`` values (a power of two; default 64, at most N/2) switch to TFHE, and up to that many
        TFHE values come back in one vector. Switching back to CKKS needs the CKKS parameters to bootstrap
        (``crossfhe.presets.ckks.BOOTSTRAP``); without, only :meth:`to_tfhe` works. ``seed``: 32 bytes (tests).
        The switch is the one this process's comparisons of the CKKS context's vectors go through (``x > y``, with
        ``interval`` bounding x - y)."""
        if not isinstance(ckks, CKKSContext):
            raise TypeError(f"SchemeSwitch.create takes the key owner's CKKSContext, got {type(ckks).__name__}")
        if not isinstance(tfhe, TFHEContext):
            raise TypeError(f"SchemeSwitch.create takes the key owner's TFHEContext, got {type(tfhe).__name__}")
        slots = min(64, ckks.params.slots) if slots is None else slots
        keys = switch.keygen(ckks.secret_key, ckks.keys, tfhe.secret_key, tfhe.keys, slots=slots, seed=seed,
                             progress=progress_callback(progress))
        public = CKKSPublicContext(ckks.params, keys.evaluation, keys.bootstrap)
        out = cls(public, tfhe.public, keys, _interval(interval))
        object.__setattr__(out, "_owner", (ckks, tfhe))
        register_switch(ckks.key_id, out)
        return out

    @classmethod
    def from_keys(cls, keys: switch.SwitchKeys, *, interval=(-1.0, 1.0)) -> SchemeSwitch:
        """The switch of public key material alone (``keys``, e.g. read with ``crossfhe.io.loads``): what a server
        holds. Its vectors and integers refer to public contexts; only the key owner decrypts them."""
        if not isinstance(keys, switch.SwitchKeys):
            raise TypeError(f"SchemeSwitch.from_keys takes SwitchKeys, got {type(keys).__name__}")
        return cls(CKKSPublicContext(keys.ckks_params, keys.evaluation, keys.bootstrap),
                   TFHEPublicContext(keys.tfhe_params, keys.server), keys, _interval(interval))

    def __repr__(self) -> str:
        return f"SchemeSwitch({self.keys!r})"

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_owner", None)  # the key owner's contexts never travel
        return state

    @property
    def bits(self) -> int:
        """P: the TFHE parameters' message bits."""
        return self.tfhe.bits

    def sizes(self) -> dict[str, int]:
        """Bytes of each part of the key material (:meth:`crossfhe.convert.switch.SwitchKeys.sizes`)."""
        return self.keys.sizes()

    def log2_p_fail(self, bits: int | None = None) -> float:
        """log2 of the probability that one switched value is off by more than rounding."""
        return switch.switch_log2_p_fail(self.keys)

    # helpers ---------------------------------------------------------------------------------------

    def _owner_of(self, i: int):
        owners = self.__dict__.get("_owner")
        return None if owners is None else owners[i]

    def _vector(self, x) -> EncryptedVector:
        if not isinstance(x, EncryptedVector):
            raise TypeError(f"expected an EncryptedVector, got {type(x).__name__}")
        _same_keys("scheme switch", self.keys.ckks_key_id, x.ct.key_id)
        if x.complex:
            raise ParameterError("scheme switching takes real vectors; this one holds complex values")
        if x.width > self.keys.slots:
            raise ParameterError(f"a vector of {x.length} values (width {x.width}) does not fit the switch's "
                                 f"{self.keys.slots} slots: SchemeSwitch.create(..., slots={x.width})")
        if x.level < 1:
            raise ParameterError("the vector is at level 0; switching spends SlotToCoeff's levels: bootstrap it first")
        return x

    def quantizer(self, interval, bits: int | None = None) -> switch.Quantizer:
        """The grid values go to TFHE on (:class:`~crossfhe.convert.switch.Quantizer`): ``bits`` (default P - 1)
        points over ``interval``, with its ``quantize`` / ``dequantize`` as NumPy references."""
        lo, hi = _interval(interval)
        bits = max(1, self.bits - 1) if bits is None else bits
        return switch.Quantizer(lo, hi, bits, self.bits)

    def _lwe(self, x: EncryptedVector, qz: switch.Quantizer) -> LWECiphertext:
        ct = x.ct
        if not x.clean and x.length < x.width:
            ct = x._masked().ct
        return switch.ckks_to_lwe(ct, self.keys, qz, x.length, slots=max(2, x.width))

    def _back(self, lwe: LWECiphertext, table, length: int, out_lo: float, out_step: float,
              replicate: bool = False) -> EncryptedVector:
        width = 1 if replicate else 1 << max(0, (length - 1).bit_length())
        ct = switch.tfhe_to_ckks(lwe, self.keys, table=table, period=width)
        ct = ckks_ops._like(ct, ct.c0, ct.c1, ct.scale / out_step)
        if out_lo:
            ct = ckks_ops.add_scalar(ct, out_lo)
        # the table's values on the output grid, exactly (the switch's error is far below the bound's slack)
        bound = abs(out_lo) + abs(out_step) * float(np.max(np.abs(np.asarray(table)))) if np.size(table) else 0.0
        vec = EncryptedVector(ct, self.ckks, False, length, width, True, bound=bound)
        return _set_owner(vec, self._owner_of(0))

    # CKKS -> TFHE and back ---------------------------------------------------------------------------

    def to_tfhe(self, x: EncryptedVector, interval, bits: int | None = None, table=None) -> EncryptedInt:
        """The vector's values as a batch of TFHE integers ``[len(x)]``: q = round((v - lo) / d) clipped (module
        docstring), or table(q) with ``table`` a callable or 2^bits ints in [0, 2^P). Bound: the table's image."""
        x = self._vector(x)
        qz = self.quantizer(interval, bits)
        tab = qz.table(table)
        lo, hi = int(tab.min()), int(tab.max())
        if lo < 0 or hi >= 2**self.bits:
            raise ParameterError(f"the table's values must lie in [0, {2**self.bits - 1}], got [{lo}, {hi}]")
        ct = tfhe_ops.pbs(self.tfhe.keys, self._lwe(x, qz), tab)
        return _set_owner(EncryptedInt(ct, self.tfhe, Bound.source(lo, hi)), self._owner_of(1))

    def to_ckks(self, x: EncryptedInt, table=None) -> EncryptedVector:
        """TFHE integers (a 1-D batch of at most ``slots``, or one) as a CKKS vector of their values (or of
        table(m), ``table`` a callable or 2^P ints in [0, 2^P)): one bootstrap each and half a CKKS bootstrap."""
        if not isinstance(x, EncryptedInt):
            raise TypeError(f"to_ckks takes an EncryptedInt, got {type(x).__name__}")
        _same_keys("to_ckks", self.tfhe.key_id, x.ct.key_id)
        if x.bound.lo < 0 or x.bound.hi >= 2**self.bits:
            raise ParameterError(f"to_ckks: the value may lie in [{x.bound.lo}, {x.bound.hi}], outside the "
                                 f"{self.bits}-bit messages: reduce it with apply first")
        if x.bound.noise > noise_budget(self.tfhe.params):
            raise ParameterError("to_ckks: the value carries more noise than a bootstrap tolerates: apply a table")
        ct = x.ct
        scalar = ct.a.ndim == 2
        if scalar:
            ct = LWECiphertext(ct.b[None], ct.a[None], ct.moduli, ct.key_id)
        if ct.a.ndim != 3:
            raise ParameterError(f"to_ckks takes one integer or a 1-D batch, got batch shape {x.shape}")
        tab = np.arange(2**self.bits) if table is None else tfhe_ops.lookup_table(self.tfhe.params, table)
        return self._back(ct, tab, 1 if scalar else ct.batch_shape[0], 0.0, 1.0, replicate=scalar)

    # functions on CKKS vectors --------------------------------------------------------------------------

    def apply(self, x: EncryptedVector, fn, interval, bits: int | None = None) -> EncryptedVector:
        """fn elementwise on the vector's values (module docstring): ``fn`` a real function of a NumPy array (it is
        called once, on the 2^bits grid points lo + q d), the result a CKKS vector of the same length. One
        bootstrap per value in TFHE, then half a CKKS bootstrap."""
        x = self._vector(x)
        qz = self.quantizer(interval, bits)
        ints, out_lo, out_step = function_table(qz, fn)
        return self._back(self._lwe(x, qz), qz.table(ints), x.length, out_lo, out_step)

    def relu(self, x: EncryptedVector, interval, bits: int | None = None) -> EncryptedVector:
        """max(v, 0) elementwise (on the quantized values)."""
        return self.apply(x, lambda v: np.maximum(v, 0.0), interval, bits)

    def sign(self, x: EncryptedVector, interval, bits: int | None = None) -> EncryptedVector:
        """-1, 0 or 1 elementwise: the sign of the quantized value. The grid has 2^bits points, so an interval
        symmetric about 0 has no point at 0: then the result is +-1, the sign of v wherever |v| exceeds the switch's
        noise (a value nearer 0 may take either sign); 0 only where a grid point is 0."""
        return self.apply(x, lambda v: np.sign(np.round(v, 12)), interval, bits)

    def greater(self, x: EncryptedVector, y, interval, bits: int | None = None) -> EncryptedVector:
        """1 where x > y, else 0, elementwise (y a vector or a number); ``interval`` bounds x - y."""
        return self.apply(x - y, lambda d: (np.round(d, 12) > 0).astype(np.float64), interval, bits)

    def compare(self, x: EncryptedVector, y, op: str, interval=None, bits: int | None = None) -> EncryptedVector:
        """1 where ``x op y`` holds, else 0, elementwise (``op`` one of ``>``, ``>=``, ``<``, ``<=``; y a vector or
        a number): a table on the quantized x - y, ``interval`` (default the switch's) bounding it."""
        tests = {">": np.greater, ">=": np.greater_equal, "<": np.less, "<=": np.less_equal}
        if op not in tests:
            raise ParameterError(f"compare takes one of {sorted(tests)}, got {op!r}")
        test = tests[op]
        return self.apply(x - y, lambda d: test(np.round(d, 12), 0).astype(np.float64),
                          self.interval if interval is None else interval, bits)

    def _tournament(self, x: EncryptedVector, qz: switch.Quantizer) -> tuple[LWECiphertext, int]:
        """The quantized maximum of the vector's values as one TFHE integer (noise in bootstraps' variances): pairs
        compared in rounds, max(a, b) = b + relu(a - b) with a - b + 2^bits in [0, 2^P) (P = bits + 1)."""
        server, params = self.tfhe.keys, self.tfhe.params
        p = qz.bits
        if p + 1 > self.bits:
            raise ParameterError(f"max and argmax compare {p}-bit values with one more bit of room: bits <= "
                                 f"{self.bits - 1}")
        cur = tfhe_ops.pbs(server, self._lwe(x, qz), qz.table())
        noise = 1
        budget = noise_budget(params)
        relu = np.maximum(np.arange(2**self.bits) - 2**p, 0)
        while cur.batch_shape[0] > 1:
            if 2 * noise > budget:
                cur, noise = tfhe_ops.pbs(server, cur, np.arange(2**self.bits)), 1
            k = cur.batch_shape[0]
            h = k // 2
            a = LWECiphertext(cur.b[:h], cur.a[:h], cur.moduli, cur.key_id)
            b = LWECiphertext(cur.b[h:2 * h], cur.a[h:2 * h], cur.moduli, cur.key_id)
            d = tfhe_ops.add_scalar(params, tfhe_ops.sub(a, b), 2**p)
            m = tfhe_ops.add(b, tfhe_ops.pbs(server, d, relu))
            if k % 2:
                m = LWECiphertext(jnp.concatenate([m.b, cur.b[-1:]]), jnp.concatenate([m.a, cur.a[-1:]]),
                                  m.moduli, m.key_id)
            cur, noise = m, noise + 1
        return cur, noise

    def max(self, x: EncryptedVector, interval, bits: int | None = None) -> EncryptedVector:
        """The largest of the vector's (quantized) values, in every slot (a length-1 vector): ceil(log2 n) rounds of
        bootstraps in TFHE, then one more and half a CKKS bootstrap."""
        x = self._vector(x)
        qz = self.quantizer(interval, bits)
        top, _ = self._tournament(x, qz)
        grid = qz.dequantize(np.arange(2**qz.bits))
        tab = np.clip(np.arange(2**self.bits), 0, 2**qz.bits - 1)
        return self._back(top, tab, 1, float(grid[0]), qz.step, replicate=True)

    def argmax(self, x: EncryptedVector, interval, bits: int | None = None) -> EncryptedVector:
        """A one-hot vector of the vector's length: 1 where the (quantized) value is the largest, 0 elsewhere (every
        maximal slot is 1 where values tie after quantization)."""
        x = self._vector(x)
        qz = self.quantizer(interval, bits)
        top, _ = self._tournament(x, qz)
        vals = tfhe_ops.pbs(self.tfhe.keys, self._lwe(x, qz), qz.table())
        p = qz.bits
        tops = LWECiphertext(jnp.broadcast_to(top.b, vals.b.shape), jnp.broadcast_to(top.a, vals.a.shape),
                             top.moduli, top.key_id)
        d = tfhe_ops.add_scalar(self.tfhe.params, tfhe_ops.sub(vals, tops), 2**p)
        eq = (np.arange(2**self.bits) == 2**p).astype(np.int64)
        return self._back(d, eq, x.length, 0.0, 1.0)


KIND_FUNCTION = "switch.function"
"""The io kind of a :class:`SwitchFunction`."""

FUNCTION_OPS = ("apply", "max", "argmax")


@dataclass(frozen=True, eq=False)
class SwitchFunction:
    """A function on encrypted CKKS vectors through TFHE, as a server runs it with a client's switch keys: ``op``
    "apply" (``table`` on the quantized values: out_lo + out_step table[q]), "max" or "argmax", over ``interval`` on
    a 2^``bits`` grid, for real vectors of up to ``slots`` values under ``ckks_params`` (bootstrappable: values come
    back to CKKS) and ``tfhe_params``. Made without keys (:meth:`create`), saved with ``crossfhe.io.save(f, path)``
    (kind ``switch.function``), hosted by ``crossfhe serve``; its errors are those of :meth:`SchemeSwitch.apply`
    (module docstring)."""

    name: str
    ckks_params: object
    tfhe_params: object
    slots: int
    op: str
    interval: tuple
    bits: int
    table: np.ndarray | None = None
    out_lo: float = 0.0
    out_step: float = 1.0

    @classmethod
    def create(cls, ckks_params, tfhe_params, fn, interval, *, slots: int = 64, bits: int | None = None,
               name: str = "switch") -> SwitchFunction:
        """``fn``: "relu", "sign", "max", "argmax", or a real function of a NumPy array (called once, on the grid);
        ``bits`` default P - 1 (P: the TFHE message bits)."""
        from crossfhe.ckks.params import Params as CKKSParams
        from crossfhe.tfhe.params import Params as TFHEParams

        if not isinstance(ckks_params, CKKSParams) or not isinstance(tfhe_params, TFHEParams):
            raise TypeError("SwitchFunction.create takes CKKS parameters and TFHE parameters")
        if not isinstance(slots, int) or slots < 1 or slots & (slots - 1) or slots > ckks_params.slots:
            raise ParameterError(f"slots must be a power of two up to {ckks_params.slots}, got {slots!r}")
        lo, hi = _interval(interval)
        p = tfhe_params.message_bits
        qz = switch.Quantizer(lo, hi, max(1, p - 1) if bits is None else bits, p)
        named = {"relu": lambda v: np.maximum(v, 0.0), "sign": lambda v: np.sign(np.round(v, 12))}
        if fn in ("max", "argmax"):
            if qz.bits + 1 > p:
                raise ParameterError(f"max and argmax compare {qz.bits}-bit values with one more bit of room: bits "
                                     f"<= {p - 1}")
            return cls(name, ckks_params, tfhe_params, slots, fn, (lo, hi), qz.bits)
        fn = named.get(fn, fn)
        if not callable(fn):
            raise ParameterError(f"fn must be one of 'relu', 'sign', 'max', 'argmax' or a function, got {fn!r}")
        ints, out_lo, out_step = function_table(qz, fn)
        return cls(name, ckks_params, tfhe_params, slots, "apply", (lo, hi), qz.bits, ints, out_lo, out_step)

    @property
    def digest(self) -> str:
        """What a value and keys are checked against: the serialized function's SHA-256."""
        import hashlib

        return hashlib.sha256(self.serialize()).hexdigest()

    def check_keys(self, keys) -> None:
        """ParameterError (TypeError for another object) unless ``keys`` (SwitchKeys) can run this function: its
        parameters, enough slots, bootstrapping keys to come back to CKKS."""
        if not isinstance(keys, switch.SwitchKeys):
            raise TypeError(f"{self.name} runs with scheme-switching keys (SwitchKeys), got {type(keys).__name__}")
        if keys.ckks_params.digest() != self.ckks_params.digest() or keys.tfhe_params.digest() != \
                self.tfhe_params.digest():
            raise ParameterError(f"{self.name}: these switching keys are for other CKKS or TFHE parameters")
        if keys.slots < self.slots:
            raise ParameterError(f"{self.name}: the keys switch {keys.slots} slots, the function takes {self.slots}")
        if keys.bootstrap is None:
            raise ParameterError(f"{self.name}: the keys cannot switch back to CKKS (no bootstrapping keys)")

    def run(self, sw: SchemeSwitch, x: EncryptedVector) -> EncryptedVector:
        """The function on ``x`` with the switch ``sw`` (its keys checked by :meth:`check_keys`)."""
        if x.width > self.slots:
            raise ParameterError(f"{self.name} takes vectors of up to {self.slots} values, got {x.length}")
        if self.op == "max":
            return sw.max(x, self.interval, self.bits)
        if self.op == "argmax":
            return sw.argmax(x, self.interval, self.bits)
        x = sw._vector(x)
        qz = sw.quantizer(self.interval, self.bits)
        return sw._back(sw._lwe(x, qz), qz.table(self.table), x.length, self.out_lo, self.out_step)

    def reference(self, v) -> np.ndarray:
        """The function on plain values (NumPy), quantized as the encrypted run quantizes them."""
        qz = switch.Quantizer(*self.interval, self.bits, self.tfhe_params.message_bits)
        q = qz.quantize(np.asarray(v, dtype=np.float64))
        grid = qz.dequantize(np.arange(2**self.bits))
        if self.op == "max":
            return np.array([grid[int(q.max())]])
        if self.op == "argmax":
            return (q == q.max()).astype(np.float64)
        return self.out_lo + self.out_step * np.asarray(self.table)[q]

    # io ----------------------------------------------------------------------------------------

    def serialize(self) -> bytes:
        """The blob of kind ``switch.function``: the fields (floats as float.hex), both parameters (their io
        blobs, base64) and the table (int32)."""
        import base64

        from crossfhe import io
        from crossfhe.io import format as fmt

        fields = {"name": self.name, "op": self.op, "slots": self.slots, "bits": self.bits,
                  "interval": [float(v).hex() for v in self.interval], "out_lo": float(self.out_lo).hex(),
                  "out_step": float(self.out_step).hex(),
                  "ckks_params": base64.b64encode(io.dumps(self.ckks_params)).decode("ascii"),
                  "tfhe_params": base64.b64encode(io.dumps(self.tfhe_params)).decode("ascii")}
        arrays = {} if self.table is None else {"table": np.asarray(self.table, dtype=np.int32)}
        return fmt.pack(KIND_FUNCTION, fields, arrays)

    @classmethod
    def load(cls, blob) -> SwitchFunction:
        """The function of a :meth:`serialize` blob, every field checked (SerializationError naming it)."""
        import base64
        import binascii

        from crossfhe import io
        from crossfhe.errors import SerializationError
        from crossfhe.io import checks
        from crossfhe.io import format as fmt

        c = fmt.unpack(blob, expected_kind=KIND_FUNCTION)
        f = checks.json_keys(c.fields, {"name", "op", "slots", "bits", "interval", "out_lo", "out_step",
                                        "ckks_params", "tfhe_params"}, "a switch.function header")

        def fail(what: str):
            raise SerializationError(f"switch.function: {what}")

        def number(v, what: str) -> float:
            try:
                out = float.fromhex(v)
            except (TypeError, ValueError):
                fail(f"{what} must be a float.hex string, got {checks.shown(v)}")
            if not np.isfinite(out):
                fail(f"{what} must be finite")
            return out

        def params(v, kind: str):
            try:
                raw = base64.b64decode(v, validate=True)
            except (binascii.Error, ValueError, TypeError):
                fail(f"the {kind} parameters are not base64")
            if fmt.peek_kind(raw) != f"{kind}.params":
                fail(f"the {kind} parameters hold a {fmt.peek_kind(raw)} blob")
            return io.loads(raw)

        checks.json_str(f["name"], "a switch.function's name")
        if f["op"] not in FUNCTION_OPS:
            fail(f"op must be one of {list(FUNCTION_OPS)}, got {checks.shown(f['op'])}")
        ckks_params, tfhe_params = params(f["ckks_params"], "ckks"), params(f["tfhe_params"], "tfhe")
        p = tfhe_params.message_bits
        for key, hi in (("slots", ckks_params.slots), ("bits", p)):
            v = f[key]
            if not fmt.is_json_int(v) or not 1 <= v <= hi:
                fail(f"{key} must be an int in [1, {hi}], got {checks.shown(v)}")
        if f["slots"] & (f["slots"] - 1):
            fail(f"slots must be a power of two, got {f['slots']}")
        if not (isinstance(f["interval"], list) and len(f["interval"]) == 2):
            fail("interval must be a pair of float.hex strings")
        lo, hi = (number(v, "interval") for v in f["interval"])
        if not lo < hi:
            fail(f"the interval must have lo < hi, got [{lo}, {hi}]")
        out_lo, out_step = number(f["out_lo"], "out_lo"), number(f["out_step"], "out_step")
        table = None
        if f["op"] == "apply":
            if set(c.arrays) != {"table"}:
                fail("an 'apply' function holds exactly the array 'table'")
            table = np.asarray(c.arrays["table"], dtype=np.int64)
            if table.shape != (2 ** f["bits"],) or table.min() < 0 or table.max() >= 2**p:
                fail(f"the array 'table' must be 2^bits = {2 ** f['bits']} ints in [0, {2**p}), got shape "
                     f"{table.shape} and words in [{table.min()}, {table.max()}]")
            if not out_step > 0:
                fail("out_step must be positive")
        elif c.arrays:
            fail(f"a {f['op']!r} function holds no arrays")
        elif f["bits"] + 1 > p:
            fail(f"bits must be at most {p - 1} for {f['op']}")
        return cls(f["name"], ckks_params, tfhe_params, f["slots"], f["op"], (lo, hi), f["bits"], table, out_lo,
                   out_step)


def _register_io() -> None:
    from crossfhe.io.registry import register_kind, register_type

    register_type(SwitchFunction, KIND_FUNCTION, lambda f, params: f.serialize())
    register_kind(KIND_FUNCTION, lambda blob, params, context: SwitchFunction.load(blob), params=(object,))


_register_io()

__all__ = ["FUNCTION_OPS", "KIND_FUNCTION", "SchemeSwitch", "SwitchFunction", "function_table", "switch_for"]
