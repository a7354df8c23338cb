"""CKKS <-> TFHE scheme switching on the one RNS substrate (Alchemist's cross-scheme programs).

Notation. CKKS: ring R = Z[X]/(X^N + 1), ternary secret s, a ciphertext (c0, c1) at level l holds the slots
v_0 .. v_{n-1} (n a power of two <= N/2, n-periodic over the N/2 slots) at scale Delta; its level-0 modulus is
q0 (the product of the level's one or two primes). TFHE (:mod:`crossfhe.tfhe.params`): P = ``message_bits``, a
message m in [0, 2^P) is m Delta_t + e modulo Q_t (two 31-bit primes) with Delta_t = round(Q_t / 2^(P+1)), under
the *long* key: the binary GLWE key's k N_t coefficients s_t (k N_t <= N, i.e. 2048 <= N for every preset).

**CKKS -> TFHE** (:func:`ckks_to_lwe`, :func:`ckks_to_tfhe`), for an interval [lo, hi] and p <= P bits, step
d = (hi - lo) / (2^p - 1) and headroom h = (2^P - 2^p) / 2 boxes on each side:

1. *Affine map*, free: v <- v - lo + h d (a constant added to the slots).
2. *SlotToCoeff* (the special DFT of the n slots, :func:`crossfhe.ckks.bootstrap.dft_factors`, ``levels`` merged
   factors applied with baby-step giant-step rotations, one level each), its last factor encoded so that the
   result's scale is S = q0 / (2^(P+1) d): slot j's value u_j = (v_j - lo) / d + h lands, times S, in
   coefficient g brev_n(j) (g = N / 2n, brev_n the bit reversal on log2 n bits), the other coefficients 0. Then
   the ciphertext drops to level 0 (exact).
3. *Ring key switch* to the TFHE key: s_t embedded in R as s'(X) = sum_{i < k N_t} s_t,i X^i. A gadget key
   (:class:`GadgetKey`: base 2^b, l = :data:`GADGET_LEVELS` digits, exact decomposition of c1 mod q0) holds
   b_j = -a_j s' + e_j + g_j s; then c0' + c1' s' = c0 + c1 s + sum_j d_j e_j. Its noise sigma is the TFHE long
   key's published rate (2^-48.32 of q0, at least 3.19): the RLWE samples under s' are LWE samples of dimension
   k N_t at that rate, the instance the TFHE presets already rely on (:func:`crossfhe.tfhe.params.
   lwe_is_published_secure` checks it).
4. *Extraction* of the wanted coefficients (:func:`crossfhe.core.lwe.extract_lwe`), a truncated to the first
   k N_t entries (s' is zero beyond): LWE ciphertexts of dimension k N_t mod q0 under s_t.
5. *Modulus switch* q0 -> Q_t: round(x Q_t / q0) per word, in float64 (x < 2^62 exact from its residues; the
   product's rounding is at most 2^-52 x Q_t / q0 + 1/2 per word). The phase becomes u_j Delta_t plus noise: a
   TFHE ciphertext of the real "message" u_j.
6. *Rounding* (:func:`ckks_to_tfhe`): one programmable bootstrap with the table j -> f(clip(j - h, 0, 2^p - 1))
   over the P-bit boxes; its result is a TFHE integer f(q_j) in [0, 2^P) with a bootstrap's fresh noise, q_j =
   clip(round(u_j + e_j) - h) the quantized value, |e_j| < 1/2 except with the failure probability below. A
   value between lo - (h + 1/2) d and hi + (h + 1/2) d is clipped to the interval's ends; one further out lands
   in the padding half of the torus and gives a wrong result that cannot be detected under encryption: the
   headroom h is what makes out-of-interval values within h d of the ends safe. p = P - 1 (the default) gives
   h = 2^(P-2) boxes: the interval's width again, split over both sides.

Noise and failure (CKKS -> TFHE). The error e_j at the blind rotation's input, in boxes, has variance
(:func:`switch_log2_p_fail`) 2^(2(P+1)) (var_ckks + var_gadget + var_switch) + the TFHE key switch's and the two
roundings' terms (``Params.var_decision(0)``): var_ckks the CKKS noise after SlotToCoeff relative to q0 (the
rescale of the last factor: (1 + 2N/3) / 12 per coefficient), var_gadget = l N (B^2 + 2) / 12 sigma^2 / q0^2,
var_switch the float rounding. The result is round(u + e): within 1 of u (|q - clip(u - h)| < 1) except with
probability p_fail = erfc(1 / (2 sqrt(2 var))) per value.

**TFHE -> CKKS** (:func:`tfhe_to_ckks`), for m TFHE integers (m <= n, the bootstrapping configuration's slots):

1. One programmable bootstrap per value with the table f (default: the identity) and the *small* output scale
   Delta_o = round(Q_t / 2^(P+1+T)): the phase f(m) Delta_o, |f(m) Delta_o| <= Q_t / 2^(T+1). T trades two errors
   (:func:`shift_for`): the bootstrap's output noise (standard deviation sigma_pbs of Q_t, ``var_pbs``) is
   sigma_pbs 2^(P+1+T) in units of f, and EvalMod's residual, 3 (2 pi x)^4 / 40 relative at x = f / 2^(P+1+T)
   (the arcsine-corrected sine, :mod:`crossfhe.ckks.bootstrap`), grows as T falls; T minimizes the larger of the
   two at f = 2^P - 1 (P4: T = 3, one standard deviation 0.015 and a residual up to 0.021 units; P6: T = 5,
   0.002 and 0.0004; P8: 0.010 and 0.002). The values that come back are f(m) plus that error: integers to within
   a few hundredths at P4 and P8, a few thousandths at P6.
2. Modulus switch Q_t -> q0 (float64, as above) and the LWE -> RLWE embedding (CHAM eq. 3) in R under s'.
3. Gadget key switch s' -> s (a key under the CKKS secret, sigma 3.19: secure as the CKKS keys are).
4. PackLWEs (:func:`crossfhe.convert.packing.pack_lwes`, the CKKS Galois keys of level 0): value j (padded to 2n
   inputs) at coefficient g brev_n(j), g = N / 2n.
5. The first half of a CKKS bootstrap (:mod:`crossfhe.ckks.bootstrap`): ModRaise, SubSum, CoeffToSlot, EvalMod
   on the real part: slot j holds gamma (c mod q0) / q0 = gamma f(m_j) / 2^(P+1+T), declared at scale
   params.scale gamma / 2^(P+1+T) so that it decrypts to f(m_j) itself. The coefficient is at most q0 / 2^(T+1),
   where EvalMod's polynomial is accurate (the bootstrap module's table: 29 bits at Delta / 16 = q0 / 256).

Level: the result sits at ``user_levels + stc_levels`` of the bootstrappable chain. Keys: :func:`keygen` makes both
directions' material from the CKKS secret key and the TFHE client key together, and reports the sizes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.ckks import bootstrap as bt
from crossfhe.ckks import encoder, lintrans
from crossfhe.ckks import ops as ckks_ops
from crossfhe.ckks.ciphertext import Ciphertext, EvaluationKeys
from crossfhe.ckks.params import Params as CKKSParams
from crossfhe.convert import packing
from crossfhe.core import evaluator as ev
from crossfhe.core import keyswitch as ks
from crossfhe.core import rlwe
from crossfhe.core.keys import SIGMA, SecretKey, check_key_ids
from crossfhe.core.lwe import LWECiphertext, extract_lwe, lwe_to_rlwe
from crossfhe.core.params import RingParams
from crossfhe.errors import KeyMismatchError, ParameterError
from crossfhe.math import random as crandom
from crossfhe.math.decompose import Gadget, RNSGadgetPlan, digits_to_residues, gadget_digits_rns
from crossfhe.math.modular import ModulusTable, add_mod, barrett_mul, sub_mod
from crossfhe.math.rns import RNSBasis
from crossfhe.math.xla import Program, jit, plan_cache
from crossfhe.progress import callback as progress_callback
from crossfhe.progress import report
from crossfhe.ring.ntt import NTTPlan, intt, ntt
from crossfhe.ring.poly import Domain, RNSPoly
from crossfhe.tfhe import bootstrap as tfhe_bootstrap
from crossfhe.tfhe import keys as tfhe_keys
from crossfhe.tfhe import ops as tfhe_ops
from crossfhe.tfhe.params import Params as TFHEParams
from crossfhe.tfhe.params import lwe_is_published_secure

U32 = jnp.uint32
GADGET_LEVELS = 4
"""Digits of the ring key switches (base 2^ceil(log2(q0) / 4)): exact decomposition of c1 mod q0."""
MAX_SHIFT = 12
"""The largest T (:func:`shift_for`) considered."""
S2C_LEVELS = 3
"""Levels SlotToCoeff spends (merged radix-2 factors), fewer where the ciphertext has fewer."""
TFHE_LONG_LOG2_RATE = -48.32
"""The noise rate (log2 sigma / modulus) of the TFHE long key's published point (k N_t = 2048)."""


def shift_errors(tparams: TFHEParams, shift: int) -> tuple[float, float]:
    """(bootstrap noise, EvalMod residual) of TFHE -> CKKS in units of f at f = 2^P - 1 for output shift T: one
    standard deviation of the first, the model's worst case of the second."""
    p = tparams.message_bits
    f = 2**p - 1
    noise = math.sqrt(tparams.var_pbs) * 2 ** (p + 1 + shift)
    x = f / 2 ** (p + 1 + shift)
    return noise, f * 3 * (2 * math.pi * x) ** 4 / 40


def shift_for(tparams: TFHEParams) -> int:
    """T of TFHE -> CKKS (module docstring): the one in [2, :data:`MAX_SHIFT`] with the smallest larger error."""
    return min(range(2, MAX_SHIFT + 1), key=lambda t: max(shift_errors(tparams, t)))


def brev(j: int, bits: int) -> int:
    return int(f"{j:0{bits}b}"[::-1], 2) if bits else 0


def coefficient_of_slot(n_total: int, slots: int, j: int) -> int:
    """The coefficient where SlotToCoeff puts slot j's real part, and where CoeffToSlot reads slot j's value:
    g brev_n(j), g = N / 2n."""
    return (n_total // (2 * slots)) * brev(j, slots.bit_length() - 1)


# --------------------------------------------------------------------------------------------------
# Gadget ring key switch
# --------------------------------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False, repr=False)
class GadgetKey:
    """A ring key-switching key from s_from to s_to over Q = prod ``moduli``: ``a``, ``b`` uint32 ``[l, L, N]``
    (EVAL), b_j = -a_j s_to + e_j + g_j s_from with the exact gadget vector g_j = B^(l-1-j) of ``gadget``."""

    a: jax.Array
    b: jax.Array
    moduli: tuple[int, ...] = dataclasses.field(metadata={"static": True})
    gadget: Gadget = dataclasses.field(metadata={"static": True})
    sigma: float = dataclasses.field(metadata={"static": True})

    @property
    def n(self) -> int:
        return int(self.a.shape[-1])

    @property
    def nbytes(self) -> int:
        return int(self.a.nbytes + self.b.nbytes)

    def noise_variance(self) -> float:
        """Variance of sum_j d_j e_j per coefficient, relative to Q^2 (digits uniform in [-B/2, B/2))."""
        b, l = self.gadget.base, self.gadget.levels
        return l * self.n * (b * b + 2) / 12 * self.sigma**2 / math.prod(self.moduli) ** 2

    def __repr__(self) -> str:
        return f"GadgetKey(N={self.n}, {len(self.moduli)} limbs, {self.gadget.levels} x 2^{self.gadget.base_log})"


def gadget_for(moduli: tuple[int, ...], levels: int = GADGET_LEVELS) -> Gadget:
    bits = math.prod(moduli).bit_length()
    return Gadget(-(-bits // levels), levels)


def _qcol(moduli):
    return np.array(moduli, dtype=np.uint32).reshape(-1, 1)


def _eval_of(coeffs, moduli: tuple[int, ...], n: int, kernels=None) -> jax.Array:
    """Signed int coefficients [..., N] -> EVAL residues [..., L, N]."""
    res = crandom.to_residues(jnp.asarray(coeffs, dtype=jnp.int32)[..., None, :], _qcol(moduli))
    return ntt(res, NTTPlan.create(n, moduli, kernels))


def gen_gadget_key(s_from, s_to, moduli: tuple[int, ...], key, *, sigma: float = SIGMA,
                   gadget: Gadget | None = None) -> GadgetKey:
    """The :class:`GadgetKey` from s_from to s_to: both int coefficient vectors ``[N]`` (s_to may be shorter: zero
    padded, the embedding s'(X) = sum_i s_i X^i). ``sigma``: the noise's standard deviation (above
    :data:`crossfhe.tfhe.ops.GAUSSIAN_MAX_SIGMA`, a centered uniform of that variance, as the TFHE keys)."""
    s_from = np.asarray(s_from).astype(np.int64)
    n = s_from.shape[-1]
    s_to = np.pad(np.asarray(s_to).astype(np.int64), (0, n - np.shape(s_to)[-1]))
    gadget = gadget_for(moduli) if gadget is None else gadget
    if not gadget.is_exact_for(math.prod(moduli)):
        raise ParameterError(f"the gadget {gadget} does not decompose exactly mod {math.prod(moduli)}")
    ka, ke = crandom.split(key)
    levels = gadget.levels
    q = _qcol(moduli)
    a = crandom.uniform_mod(ka, (levels, len(moduli), n), q)
    e = tfhe_keys.sample_noise(ke, (levels, n), float(sigma))
    e_eval = _eval_of(e, moduli, n)
    sf, st = _eval_of(s_from, moduli, n), _eval_of(s_to, moduli, n)
    g = gadget.vector(math.prod(moduli))
    t = ModulusTable.create(moduli)
    bs = []
    for j in range(levels):
        gj = jnp.asarray(np.array([g[j] % x for x in moduli], dtype=np.uint32).reshape(-1, 1))
        as_ = barrett_mul(a[j], st, t.q, t.barrett_mu, t.bits)
        gs = barrett_mul(jnp.broadcast_to(gj, sf.shape), sf, t.q, t.barrett_mu, t.bits)
        bs.append(add_mod(sub_mod(e_eval[j], as_, t.q), gs, t.q))
    return GadgetKey(a, jnp.stack(bs), tuple(moduli), gadget, float(sigma))


@plan_cache(maxsize=8, on_device=True)
def _gadget_tables(n: int, moduli: tuple[int, ...], gadget: Gadget, kernels=None):
    return (NTTPlan.create(n, moduli, kernels), RNSGadgetPlan.create(RNSBasis(moduli), gadget))


@jit
def _gadget_switch(c0_eval, c1_coeff, ka, kb, plan, gplan):
    """(c0 + sum_j d_j b_j, sum_j d_j a_j), EVAL; c1 COEFF [..., L, N], digits d_j of c1 (MSB first)."""
    t = ModulusTable.create(gplan.basis.moduli)
    d = gadget_digits_rns(c1_coeff, gplan)  # int32 [l, ..., N]
    d = ntt(digits_to_residues(d, plan.q), plan)  # [l, ..., L, N]
    u0, u1 = c0_eval, None
    for j in range(d.shape[0]):
        p0 = barrett_mul(d[j], kb[j], t.q, t.barrett_mu, t.bits)
        p1 = barrett_mul(d[j], ka[j], t.q, t.barrett_mu, t.bits)
        u0 = add_mod(u0, p0, t.q)
        u1 = p1 if u1 is None else add_mod(u1, p1, t.q)
    return u0, u1


def gadget_keyswitch(c0: RNSPoly, c1: RNSPoly, key: GadgetKey, kernels=None) -> tuple[RNSPoly, RNSPoly]:
    """(c0, c1) under s_from -> (c0', c1') under s_to, EVAL, same phase plus sum_j d_j e_j."""
    if c0.basis != key.moduli or c1.basis != key.moduli:
        raise ParameterError(f"the key switch runs mod {key.moduli}; the ciphertext is over {c0.basis}")
    plan, gplan = _gadget_tables(key.n, key.moduli, key.gadget, kernels)
    d0 = c0.data if c0.domain == Domain.EVAL else ntt(c0.data, plan)
    d1 = c1.data if c1.domain == Domain.COEFF else intt(c1.data, plan)
    u0, u1 = _gadget_switch(d0, d1, key.a, key.b, plan, gplan)
    return RNSPoly(u0, key.moduli, Domain.EVAL), RNSPoly(u1, key.moduli, Domain.EVAL)


# --------------------------------------------------------------------------------------------------
# Modulus switches between the CKKS level-0 modulus and the TFHE modulus
# --------------------------------------------------------------------------------------------------


@partial(jit, static_argnames=("q_in", "q_out"))
def _mod_switch(x, *, q_in: tuple[int, ...], q_out: tuple[int, ...]):
    """uint32 [..., L_in, D] residues of x mod Q_in -> [..., L_out, D] residues of round(x Q_out / Q_in) (float64
    product: at most 2^-52 x Q_out / Q_in + 1/2 from the exact rounding). Both moduli below 2^62. Under x64."""
    xs = x.astype(jnp.uint64)
    if len(q_in) == 1:
        v = xs[..., 0, :]
    elif len(q_in) == 2:
        qa, qb = q_in
        inv = pow(qa, -1, qb)
        t = ((xs[..., 1, :] + jnp.uint64(qb) - xs[..., 0, :] % jnp.uint64(qb)) % jnp.uint64(qb))
        t = (t * jnp.uint64(inv)) % jnp.uint64(qb)
        v = xs[..., 0, :] + t * jnp.uint64(qa)
    else:
        raise ParameterError(f"modulus switches take one or two primes, got {len(q_in)}")
    big_in, big_out = math.prod(q_in), math.prod(q_out)
    y = jnp.floor(v.astype(jnp.float64) * (big_out / big_in) + 0.5)
    y = jnp.minimum(y, float(big_out - 1)).astype(jnp.uint64)
    return jnp.stack([(y % jnp.uint64(q)).astype(U32) for q in q_out], axis=-2)


def mod_switch(b, a, q_in: tuple[int, ...], q_out: tuple[int, ...]):
    """LWE words (b [..., L_in], a [..., L_in, D]) mod Q_in -> mod Q_out (:func:`_mod_switch`)."""
    with jax.enable_x64(True):
        bb = _mod_switch(b[..., None], q_in=tuple(q_in), q_out=tuple(q_out))[..., 0]
        aa = _mod_switch(a, q_in=tuple(q_in), q_out=tuple(q_out))
    return bb, aa


# --------------------------------------------------------------------------------------------------
# SlotToCoeff at any level
# --------------------------------------------------------------------------------------------------


@plan_cache(maxsize=8)
def s2c_plan(params: CKKSParams, slots: int, level: int, levels: int, in_scale: float, out_scale: float) -> tuple:
    """The encoded factors of SlotToCoeff for ``slots`` slots, the first at ``level`` for inputs at ``in_scale``,
    the last giving ``out_scale`` (the others ``params.scale``)."""
    factors = bt.dft_factors(slots, levels, inverse=False)
    out, scale = [], in_scale
    for i, m in enumerate(factors):
        target = out_scale if i == len(factors) - 1 else params.scale
        out.append(lintrans.encode(params, m, level=level - i, in_scale=scale, out_scale=target,
                                   giant_cost=bt.giant_step_cost(params, level - i)))
        scale = target
    return tuple(out)


def s2c_levels(level: int) -> int:
    return max(1, min(S2C_LEVELS, level))


def s2c_rotations(params: CKKSParams, slots: int) -> list[int]:
    """The rotations SlotToCoeff of ``slots`` slots needs from any level (the baby-step giant-step split of a
    factor depends on its level's key-switch cost)."""
    rots = set()
    for level in range(1, params.levels + 1):
        for i, m in enumerate(bt.dft_factors(slots, s2c_levels(level), inverse=False)):
            rots |= lintrans.plan(m, None, bt.giant_step_cost(params, max(1, level - i))).rotations()
    return sorted(r % params.slots for r in rots if r % params.slots)


# --------------------------------------------------------------------------------------------------
# Keys
# --------------------------------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False, repr=False)
class SwitchKeys:
    """Public material of both directions (no secret): ``to_tfhe`` (CKKS s -> TFHE long key, mod q0), ``to_ckks``
    (TFHE long key -> s, mod q0), ``packing`` (the CKKS Galois keys of PackLWEs at level 0), ``bootstrap`` (the
    CKKS bootstrapping keys of ``slots`` slots: CoeffToSlot and EvalMod; None where the CKKS parameters do not
    bootstrap: then only CKKS -> TFHE), ``evaluation`` (the CKKS evaluation keys with SlotToCoeff's rotations),
    ``server`` (the TFHE server key). Static: ``slots`` (the most values one switch to CKKS returns, and the slot
    count SlotToCoeff is prepared for), the key ids of both key pairs."""

    to_tfhe: GadgetKey
    to_ckks: GadgetKey
    packing: dict
    bootstrap: bt.Keys | None
    evaluation: EvaluationKeys
    server: tfhe_ops.ServerKey
    slots: int = dataclasses.field(metadata={"static": True})
    ckks_key_id: str | None = dataclasses.field(metadata={"static": True}, default=None)
    tfhe_key_id: str | None = dataclasses.field(metadata={"static": True}, default=None)

    @property
    def key_id(self) -> str | None:
        """The id the CKKS vectors these keys switch carry (the CKKS key pair's): what a server files them under."""
        return self.ckks_key_id

    @property
    def ckks_params(self) -> CKKSParams:
        return self.evaluation.params

    @property
    def tfhe_params(self) -> TFHEParams:
        return self.server.params

    def sizes(self) -> dict[str, int]:
        """Bytes per part: the two ring keys, PackLWEs's Galois keys, the CKKS bootstrapping / evaluation keys,
        the TFHE server key."""
        def kbytes(k):
            return k.nbytes()

        ev = self.bootstrap.evaluation if self.bootstrap is not None else self.evaluation
        boot = sum(kbytes(k) for k in [ev.relin, *ev.galois.values()])
        if self.bootstrap is not None:
            boot += kbytes(self.bootstrap.to_sparse) + kbytes(self.bootstrap.to_dense)
        return {"to_tfhe": self.to_tfhe.nbytes, "to_ckks": self.to_ckks.nbytes,
                "packing": sum(kbytes(k) for k in self.packing.values()), "ckks_evaluation": boot,
                "tfhe_server": self.server.nbytes}

    def __repr__(self) -> str:
        total = sum(self.sizes().values())
        return (f"SwitchKeys(CKKS N={self.ckks_params.n}, TFHE {self.tfhe_params.name or 'params'}, "
                f"{self.slots} slots, {total / 2**20:.0f} MiB)")


def to_tfhe_sigma(q0: int) -> float:
    """The noise of the key to TFHE: the long key's published rate times q0, at least 3.19."""
    return max(SIGMA, 2.0**TFHE_LONG_LOG2_RATE * q0)


def packing_ring(params: CKKSParams):
    """The ring of PackLWEs's keys: level 0's primes and one special prime (dense secret)."""
    return RingParams(n=params.n, q=params.moduli_at(0), p=params.p[:1], security=params.ring.security,
                      insecure=params.ring.insecure)


def keygen(ckks_sk: SecretKey, ckks_keys: EvaluationKeys, tfhe_ck: tfhe_ops.ClientKey,
           tfhe_sk: tfhe_ops.ServerKey, *, slots: int | None = None, seed: bytes | None = None,
           progress=None) -> SwitchKeys:
    """Both directions' keys from the key owner's two secrets (module docstring). ``slots``: a power of two <=
    N/2 (default N/2): CKKS vectors of up to that many values (any power-of-two width up to it: SlotToCoeff's
    rotations for each) switch to TFHE, and up to that many TFHE values switch back in one ciphertext. Where the
    CKKS parameters bootstrap, the bootstrapping keys of a ``slots``-slot configuration are made too (TFHE -> CKKS
    needs them). ParameterError if the TFHE long key does not fit the
    CKKS ring (k N_t > N) or the key to TFHE would be below the long key's published security."""
    progress = progress_callback(progress)
    params, tparams = ckks_keys.params, tfhe_sk.params
    tfhe_ops.check_compatible(tfhe_ck, tfhe_sk)
    check_key_ids("switch keygen", ckks_sk.key_id, ckks_keys.key_id)
    n = params.n
    slots = params.slots if slots is None else int(slots)
    if slots < 1 or slots & (slots - 1) or slots > params.slots:
        raise ParameterError(f"slots must be a power of two in [1, N/2 = {params.slots}], got {slots}")
    if tparams.long_dim > n:
        raise ParameterError(f"the TFHE long key has {tparams.long_dim} coefficients; the CKKS ring only {n}")
    q0 = params.moduli_at(0)
    sigma = to_tfhe_sigma(math.prod(q0))
    if not (tparams.insecure or params.ring.insecure) and not lwe_is_published_secure(
            tparams.long_dim, math.log2(sigma / math.prod(q0))):
        raise ParameterError("the key switch to TFHE would be below the published security of the long key")
    rng = crandom.Rng(seed)
    total = 5
    s = np.asarray(ckks_sk.coeffs)
    s_t = np.asarray(tfhe_ck.long_key)
    to_tfhe = gen_gadget_key(s, s_t, q0, rng.next_key(), sigma=sigma)
    to_ckks = gen_gadget_key(np.pad(s_t, (0, n - s_t.shape[0])), s, q0, rng.next_key(), sigma=SIGMA)
    report(progress, 1, total, "switching keys")
    ring = packing_ring(params)
    sk_ring = dataclasses.replace(ckks_sk, poly=ckks_sk.residues(ring.q + ring.p), q=ring.q, p=ring.p)
    pack = packing.gen_packing_keys(sk_ring, ring, rng.next_key(), dnum=len(ring.q))
    report(progress, 2, total, "switching keys")
    rots = sorted({r for k in range(1, slots.bit_length()) for r in s2c_rotations(params, 1 << k)})
    need = sorted({ckks_ops.rotation_element(params, r) for r in rots} - set(ckks_keys.galois))
    galois = dict(ckks_keys.galois)
    for g in need:
        galois[g] = ks.gen_galois_key(ckks_sk, params, rng.next_key(), g, dnum=params.dnum)
    evaluation = dataclasses.replace(ckks_keys, galois=galois)
    report(progress, 3, total, "switching keys")
    boot = None
    if params.bootstrap_levels:
        cfg = bt.config_for(params, max(2, slots))
        boot_seed = None if seed is None else np.asarray(rng.next_key().words).tobytes()
        boot = bt.keygen(ckks_sk, evaluation, cfg, seed=boot_seed)
        evaluation = boot.evaluation
    report(progress, 5, total, "switching keys")
    return SwitchKeys(to_tfhe, to_ckks, pack, boot, evaluation, tfhe_sk, slots, ckks_keys.key_id, tfhe_sk.key_id)


def _check_keys(keys) -> SwitchKeys:
    if not isinstance(keys, SwitchKeys):
        raise TypeError(f"expected convert.switch.SwitchKeys (convert.switch.keygen), got {type(keys).__name__}")
    return keys


# --------------------------------------------------------------------------------------------------
# CKKS -> TFHE
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Quantizer:
    """How CKKS values become P-bit TFHE integers: [lo, hi] in 2^bits steps d = (hi - lo) / (2^bits - 1), value
    v -> round((v - lo) / d) clipped to [0, 2^bits - 1], ``headroom`` boxes h = (2^P - 2^bits) / 2 either side."""

    lo: float
    hi: float
    bits: int
    message_bits: int

    def __post_init__(self):
        if not (math.isfinite(self.lo) and math.isfinite(self.hi)) or not self.hi > self.lo:
            raise ParameterError(f"the switch's interval must be finite with lo < hi, got [{self.lo}, {self.hi}]")
        if isinstance(self.bits, bool) or not isinstance(self.bits, (int, np.integer)) or not (
                1 <= self.bits <= self.message_bits):
            raise ParameterError(f"bits must be an int in [1, {self.message_bits}] (the TFHE parameters' message "
                                 f"bits), got {self.bits!r}")

    @property
    def step(self) -> float:
        return (self.hi - self.lo) / (2**self.bits - 1)

    @property
    def headroom(self) -> int:
        return (2**self.message_bits - 2**self.bits) // 2

    @property
    def safe_interval(self) -> tuple[float, float]:
        """Values in here are clipped to [lo, hi]; beyond, the result is wrong (undetectably)."""
        pad = (self.headroom + 0.5) * self.step
        return self.lo - pad, self.hi + pad

    def quantize(self, v) -> np.ndarray:
        """The plaintext reference: round((v - lo) / d) clipped to [0, 2^bits - 1] (int64)."""
        u = np.rint((np.asarray(v, dtype=np.float64) - self.lo) / self.step)
        return np.clip(u, 0, 2**self.bits - 1).astype(np.int64)

    def dequantize(self, q) -> np.ndarray:
        return self.lo + np.asarray(q, dtype=np.float64) * self.step

    def table(self, f=None) -> np.ndarray:
        """The switch's table over the P-bit boxes: j -> f(clip(j - h, 0, 2^bits - 1)) (default f: identity)."""
        j = np.clip(np.arange(2**self.message_bits) - self.headroom, 0, 2**self.bits - 1)
        if f is None:
            return j.astype(np.int64)
        if callable(f):
            return np.array([int(f(int(x))) for x in j], dtype=np.int64)
        arr = np.asarray(f)
        if arr.shape != (2**self.bits,):
            raise ParameterError(f"a table on {self.bits}-bit values has {2**self.bits} entries, got {arr.shape}")
        return arr[j].astype(np.int64)


def _check_ct(ct, keys: SwitchKeys) -> Ciphertext:
    if not isinstance(ct, Ciphertext):
        raise TypeError(f"expected a ckks.Ciphertext, got {type(ct).__name__}")
    if ct.params != keys.ckks_params:
        raise ParameterError("the ciphertext's CKKS parameters are not those of the switching keys")
    if ct.key_id is not None and keys.ckks_key_id is not None and ct.key_id != keys.ckks_key_id:
        raise KeyMismatchError("the ciphertext was encrypted under another CKKS key pair than the switching keys")
    if ct.c0.data.ndim != 2:
        raise ParameterError("switch one ciphertext at a time (no batch axes)")
    return ct


@jax.tree_util.register_static
@dataclass(frozen=True)
class _ToTFHE:
    """What decides a CKKS -> TFHE program besides its arrays' shapes (static: part of its argument structure): the
    coefficients extracted, the TFHE parameters, the TFHE key pair's identifier, and whether a bootstrap rounds."""

    coefficients: tuple[int, ...]
    tparams: TFHEParams
    tfhe_key_id: str | None
    rounds: bool


def _to_tfhe_inputs(ct: Ciphertext, keys: SwitchKeys, quantizer: Quantizer, count: int, slots: int | None):
    """The host part of CKKS -> TFHE after the checks: (affine constant words, SlotToCoeff's encoded factors,
    the coefficients to extract), everything value-dependent the program takes as arguments."""
    keys = _check_keys(keys)
    ct = _check_ct(ct, keys)
    params, tparams = keys.ckks_params, keys.tfhe_params
    if quantizer.message_bits != tparams.message_bits:
        raise ParameterError(f"the quantizer is for {quantizer.message_bits}-bit messages; the TFHE parameters "
                             f"carry {tparams.message_bits}")
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 1:
        raise ParameterError(f"count must be a positive int, got {count!r}")
    slots = 1 << max(1, (int(count) - 1).bit_length()) if slots is None else int(slots)
    if slots & (slots - 1) or not count <= slots <= keys.slots or slots < 2:
        raise ParameterError(f"slots must be a power of two in [max(2, count), {keys.slots}] (the keys' slots), "
                             f"got {slots} for count {count}")
    if ct.level < 1:
        raise ParameterError("SlotToCoeff needs at least one level; the ciphertext is at level 0")
    big_q0 = math.prod(params.moduli_at(0))
    d, h = quantizer.step, quantizer.headroom
    # step 1 as ckks.ops.add_scalar encodes it: a constant polynomial at ct's scale and level
    const = encoder.encode_scalar_constant(-quantizer.lo + h * d, moduli=ct.c0.basis, scale=ct.scale,
                                           margin=rlwe.fresh_noise_bound(params.n), what="add_scalar")
    shift = ckks_ops._constant_words(tuple(int(v) for v in const))
    target = big_q0 / (2 ** (tparams.message_bits + 1) * d)
    s2c = s2c_plan(params, slots, ct.level, s2c_levels(ct.level), float(ct.scale), float(target))
    coefficients = tuple(coefficient_of_slot(params.n, slots, j) for j in range(int(count)))
    return shift, s2c, coefficients


def _to_lwe_words(ct: Ciphertext, shift, s2c: tuple, evaluation: EvaluationKeys, to_tfhe: GadgetKey,
                  coefficients: tuple[int, ...], tparams: TFHEParams):
    """Steps 1-5 of CKKS -> TFHE on arrays (traceable): (b [count, L_t], a [count, L_t, k N_t]) mod Q_t."""
    params = ct.params
    x = ckks_ops._like(ct, *ev.add_constant(ct.c0, ct.c1, shift))
    for enc in s2c:
        x = lintrans.apply(x, enc, evaluation)
    x = ckks_ops.drop_level(x, 0)
    c0, c1 = gadget_keyswitch(x.c0, x.c1, to_tfhe, params.kernels)
    lwe = extract_lwe(c0, c1, np.array(coefficients))
    return mod_switch(lwe.b, lwe.a[..., : tparams.long_dim], params.moduli_at(0), tparams.moduli)


def _to_tfhe_steps(ct: Ciphertext, shift, s2c: tuple, keys: SwitchKeys, table, static: _ToTFHE) -> LWECiphertext:
    """CKKS -> TFHE on arrays (traceable): the LWE ciphertexts of :func:`ckks_to_lwe`, and with ``static.rounds``
    their bootstrap with ``table`` (int32 [1, 1, 2^P], :func:`ckks_to_tfhe`)."""
    b, a = _to_lwe_words(ct, shift, s2c, keys.evaluation, keys.to_tfhe, static.coefficients, static.tparams)
    if static.rounds:
        b, a = _pbs_words(keys.server, b, a, table, None)
    return LWECiphertext(b, a, static.tparams.moduli, static.tfhe_key_id)


def _pbs_words(server: tfhe_ops.ServerKey, b, a, table, delta: int | None):
    """:func:`crossfhe.tfhe.ops.pbs_many` of one table on a batch [m] as a traceable step, the table an array
    (int32 [1, 1, 2^P]) rather than a constant: (b [m, L_t], a [m, L_t, k N_t])."""
    params, key = server.params, server.prepared
    shape = (b.shape[0],)
    chunks = tfhe_bootstrap.batch_chunks(params, shape[0], key.kernels, type(key.product))
    with jax.enable_x64(True) if key.x64 else contextlib.nullcontext():
        ((ob, oa),) = tfhe_bootstrap._pbs_program(key, b, a, table, params=params, shape=shape, unroll=1,
                                                  chunks=chunks, delta=delta)
    return ob, oa


_TO_TFHE = {x64: Program(_to_tfhe_steps, x64=x64, name="ckks_to_tfhe", materialize=True) for x64 in (False, True)}


def _table_words(tparams: TFHEParams, table) -> jax.Array:
    """A table on P-bit messages as the int32 [1, 1, 2^P] device array the bootstrap program reads."""
    t = tfhe_bootstrap.lookup_table(tparams, table).astype(np.int32).reshape(1, 1, -1)
    return tfhe_bootstrap._device_tables(t)


def ckks_to_lwe(ct: Ciphertext, keys: SwitchKeys, quantizer: Quantizer, count: int, *, slots: int | None = None
                ) -> LWECiphertext:
    """Steps 1-5 of CKKS -> TFHE (module docstring): TFHE LWE ciphertexts ``[count]`` of the real values
    (v_j - lo) / d + h, j < count, under the TFHE long key mod Q_t (not yet rounded: :func:`ckks_to_tfhe`).
    ``slots``: the ciphertext's slot count (a power of two, count <= slots <= keys.slots; default: the smallest
    power of two >= count, the encoder's sparse packing of that many values). Each operation is its own cached
    compiled program; :func:`ckks_to_lwe_program` gives the same words as one executable."""
    shift, s2c, coefficients = _to_tfhe_inputs(ct, keys, quantizer, count, slots)
    return _to_tfhe_steps(ct, shift, s2c, keys, None, _ToTFHE(coefficients, keys.tfhe_params, keys.tfhe_key_id,
                                                               False))


def ckks_to_lwe_program(ct: Ciphertext, keys: SwitchKeys, quantizer: Quantizer, count: int, *,
                        slots: int | None = None) -> LWECiphertext:
    """:func:`ckks_to_lwe` as one compiled executable per call (:class:`crossfhe.math.xla.Program`): the same words.
    The keys, SlotToCoeff's encoded factors and the affine constant are its arguments. It is compiled once per
    argument structure: the parameters, ct's level and scale, the quantizer's step (SlotToCoeff's scales),
    ``count`` and ``slots``, the key pairs' identifiers; calls that share it reuse it."""
    shift, s2c, coefficients = _to_tfhe_inputs(ct, keys, quantizer, count, slots)
    static = _ToTFHE(coefficients, keys.tfhe_params, keys.tfhe_key_id, False)
    return _TO_TFHE[False](ct, shift, s2c, keys, None, static)


def ckks_to_tfhe(ct: Ciphertext, keys: SwitchKeys, quantizer: Quantizer, count: int, *, table=None,
                 slots: int | None = None) -> LWECiphertext:
    """CKKS -> TFHE (module docstring): TFHE integers ``[count]``, f(quantize(v_j)) for the first ``count`` slots,
    one bootstrap each (batched). ``table``: f on the quantizer's ``bits``-bit values, a callable or an array of
    2^bits ints with values in [0, 2^P) (default: the identity). :func:`ckks_to_lwe` then
    :func:`crossfhe.tfhe.ops.pbs`; :func:`ckks_to_tfhe_program` gives the same words as one executable."""
    lwe = ckks_to_lwe(ct, keys, quantizer, count, slots=slots)
    return tfhe_ops.pbs(keys.server, lwe, quantizer.table(table))


def ckks_to_tfhe_program(ct: Ciphertext, keys: SwitchKeys, quantizer: Quantizer, count: int, *, table=None,
                         slots: int | None = None) -> LWECiphertext:
    """:func:`ckks_to_tfhe` as one compiled executable per call: :func:`ckks_to_lwe_program`'s program with the
    bootstrap after it, the table an argument (another table reuses the program; it runs under ``jax.enable_x64``
    where the TFHE key's product needs it): the same words."""
    shift, s2c, coefficients = _to_tfhe_inputs(ct, keys, quantizer, count, slots)
    table = _table_words(keys.tfhe_params, quantizer.table(table))
    static = _ToTFHE(coefficients, keys.tfhe_params, keys.tfhe_key_id, True)
    return _TO_TFHE[keys.server.prepared.x64](ct, shift, s2c, keys, table, static)


def switch_log2_p_fail(keys: SwitchKeys, quantizer: Quantizer | None = None) -> float:
    """log2 of the probability that a switched value is off by more than rounding (|q - clip(u)| >= 1): the
    decision variance of the module docstring."""
    params, tparams = keys.ckks_params, keys.tfhe_params
    q0 = math.prod(params.moduli_at(0))
    n = params.n
    var_ckks = (1 + 2 * n / 3) / 12 / q0**2
    var_switch = (2.0**-52) ** 2 / 12 + (tparams.long_dim / 2 + 1) / 12 / (tparams.big_q**2)
    rel = (var_ckks + keys.to_tfhe.noise_variance() + var_switch)
    return tparams._log2_p_fail_at(tparams.var_decision(0) + rel)


# --------------------------------------------------------------------------------------------------
# TFHE -> CKKS
# --------------------------------------------------------------------------------------------------


@jax.tree_util.register_static
@dataclass(frozen=True)
class _ToCKKS:
    """What decides a TFHE -> CKKS program besides its arrays' shapes (static): the packing's source of each input
    (value j of the batch, or m for the appended zero), the bootstrap's output scale Delta_o, the CKKS key pair's
    identifier and the output's scale factor gamma / 2^(P+1+T)."""

    sources: tuple[int, ...]
    delta: int
    ckks_key_id: str | None
    factor: float


def _to_ckks_inputs(lwe: LWECiphertext, keys: SwitchKeys, table, period: int | None):
    """The checks and host part of TFHE -> CKKS: (table words, plan, static)."""
    keys = _check_keys(keys)
    if keys.bootstrap is None:
        raise ParameterError("TFHE -> CKKS needs bootstrappable CKKS parameters (its second half is CoeffToSlot "
                             "and EvalMod); these switching keys were made without them")
    params, tparams = keys.ckks_params, keys.tfhe_params
    if not isinstance(lwe, LWECiphertext) or lwe.moduli != tparams.moduli or lwe.n != tparams.long_dim:
        raise ParameterError("expected TFHE ciphertexts (LWECiphertext of the switching keys' TFHE parameters)")
    check_key_ids("tfhe_to_ckks", lwe.key_id, keys.tfhe_key_id)
    if lwe.a.ndim != 3:
        raise ParameterError(f"tfhe_to_ckks takes a 1-D batch of values, got batch shape {lwe.batch_shape}")
    m = lwe.batch_shape[0]
    slots = keys.bootstrap.config.slots
    if not 1 <= m <= slots:
        raise ParameterError(f"at most {slots} values switch back in one ciphertext (the keys' slots), got {m}")
    p = tparams.message_bits
    shift = shift_for(tparams)
    delta_o = round(tparams.big_q / 2 ** (p + 1 + shift))
    period = 1 << max(0, (m - 1).bit_length()) if period is None else int(period)
    if period & (period - 1) or not m <= period <= slots:
        raise ParameterError(f"period must be a power of two in [{m}, {slots}], got {period}")
    # slot j's value at coefficient g brev(j): PackLWEs puts input i at coefficient i N / 2n (2n inputs); where the
    # bootstrap's plan is packed (n <= N/4), the high n coefficients (the imaginary half, slots n + j of its 2n) too
    pl = bt.plan_for(params, keys.bootstrap.config, compact=keys.bootstrap.is_compact)
    src = np.full(2 * slots, m)  # m: the zero ciphertext appended
    for j in range(slots):
        if j % period < m:
            src[brev(j, slots.bit_length() - 1)] = j % period
            if pl.packed:
                src[slots + brev(j, slots.bit_length() - 1)] = j % period
    tab = _table_words(tparams, np.arange(2**p) if table is None else table)
    static = _ToCKKS(tuple(int(i) for i in src), int(delta_o), keys.ckks_key_id, pl.gamma / 2 ** (p + 1 + shift))
    return tab, pl, static


def _to_ckks_steps(lwe: LWECiphertext, keys: SwitchKeys, table, pl: bt.Plan, static: _ToCKKS) -> Ciphertext:
    """TFHE -> CKKS on arrays (traceable, module docstring steps 1-5)."""
    params, tparams = keys.ckks_params, keys.tfhe_params
    b, a = _pbs_words(keys.server, lwe.b, lwe.a, table, static.delta)
    q0 = params.moduli_at(0)
    b, a = mod_switch(b, a, tparams.moduli, q0)
    a = jnp.pad(a, ((0, 0), (0, 0), (0, params.n - a.shape[-1])))
    bb = jnp.concatenate([b, jnp.zeros((1,) + b.shape[1:], b.dtype)])
    aa = jnp.concatenate([a, jnp.zeros((1,) + a.shape[1:], a.dtype)])
    pick = np.asarray(static.sources)
    c0, c1 = lwe_to_rlwe(LWECiphertext(bb[pick], aa[pick], q0), domain=Domain.COEFF)
    c0, c1 = gadget_keyswitch(c0, c1, keys.to_ckks, params.kernels)
    p0, p1 = packing.pack_lwes(c0, c1, keys.packing, kernels=params.kernels)
    boot = keys.bootstrap
    packed = Ciphertext(p0, p1, params, float(params.scale), static.ckks_key_id)
    raised = bt.encapsulate_and_raise(packed, boot, pl.raise_scale)
    re = bt.coeff_to_slot(raised, pl, boot.evaluation)[0]  # packed: (re | im), both halves the values
    out = bt.eval_mod(re, pl, boot.evaluation)
    return ckks_ops._like(out, out.c0, out.c1, out.scale * static.factor)


_TO_CKKS = {x64: Program(_to_ckks_steps, x64=x64, name="tfhe_to_ckks", materialize=True) for x64 in (False, True)}


def tfhe_to_ckks(lwe: LWECiphertext, keys: SwitchKeys, *, table=None, period: int | None = None) -> Ciphertext:
    """TFHE -> CKKS (module docstring): m = lwe's batch size <= keys.slots TFHE integers -> one CKKS ciphertext whose
    slot j holds f(m_(j mod w)) for j mod w < m, else 0, w = ``period`` (a power of two in [m, slots]; default the
    smallest >= m: the layout of an m-value vector), at level user_levels + stc_levels. ``period`` 1 with m = 1
    puts the one value in every slot. ``table``: f, a callable or 2^P ints in [0, 2^P) (default the identity).
    An unrounded LWE (:func:`ckks_to_lwe`) is taken as well: the bootstrap here rounds it.

    Each operation is its own cached compiled program; :func:`tfhe_to_ckks_program` gives the same words as one
    executable."""
    tab, pl, static = _to_ckks_inputs(lwe, keys, table, period)
    return _to_ckks_steps(lwe, keys, tab, pl, static)


def tfhe_to_ckks_program(lwe: LWECiphertext, keys: SwitchKeys, *, table=None, period: int | None = None
                         ) -> Ciphertext:
    """:func:`tfhe_to_ckks` as one compiled executable per call (:class:`crossfhe.math.xla.Program`, under
    ``jax.enable_x64`` where the TFHE key's product needs it): the same words. The keys, the table and the
    bootstrapping plan are its arguments. It is compiled once per argument structure (the parameters, m,
    ``period``, the key pairs' identifiers) and reused by the calls that share it; another table reuses it."""
    tab, pl, static = _to_ckks_inputs(lwe, keys, table, period)
    return _TO_CKKS[keys.server.prepared.x64](lwe, keys, tab, pl, static)
