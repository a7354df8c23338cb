"""CKKS operations as pure functions on :mod:`crossfhe.ckks.ciphertext` types.

Each public function checks parameters, levels and scales in Python (so errors name the problem, also
while tracing under ``jax.jit``/``jax.vmap``) and runs jitted kernels on the RNS arrays. Ciphertexts are
kept in the EVAL domain.

Scales. Delta is tracked exactly as a float. A product has scale Delta_a Delta_b; :func:`rescale` divides
by the last prime(s) q of the level and sets Delta / q. Binary operations align levels by dropping
primes from the higher operand; their scales must agree within a relative 2^-20 (then the sum takes the
first operand's scale, an added relative error below 2^-20 per slot) or one operand is brought to the
other's scale: multiplied by round(Delta_b q / Delta_a) and rescaled by q, which costs one level.

Noise (infinity norm of the phase error, coefficients): fresh public-key encryption <= (2N + 1) B_e,
B_e = ceil(13 sigma); a rescale adds at most (1 + N) / 2 (rounding of the division and of s times it);
key switching adds :func:`~crossfhe.core.keyswitch.keyswitch_noise_bound`.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe._deprecated import renamed
from crossfhe.ckks import encoder
from crossfhe.ckks.ciphertext import Ciphertext, EvaluationKeys, Plaintext
from crossfhe.ckks.params import Params
from crossfhe.core import evaluator as ev
from crossfhe.core import keyswitch as ks
from crossfhe.core import rlwe
from crossfhe.core.keys import PublicKey, SecretKey, check_key_ids, gen_key_pair
from crossfhe.errors import BasisMismatchError, ParameterError
from crossfhe.math import random as crandom
from crossfhe.math.modular import (
    ModulusTable,
    add_mod,
    barrett_reduce,
    shoup_mul,
    shoup_precompute,
    sub_mod,
)
from crossfhe.math.xla import jit, plan_cache
from crossfhe.progress import callback as progress_callback
from crossfhe.progress import report
from crossfhe.ring import poly
from crossfhe.ring.ntt import NTTPlan, fusion_barrier, intt, ntt, transform_operand
from crossfhe.ring.poly import Domain, RNSPoly

SCALE_TOLERANCE = 2.0**-20


# --------------------------------------------------------------------------------------------------
# Keys
# --------------------------------------------------------------------------------------------------


def rotation_element(params: Params, rotation: int) -> int:
    """The Galois element 5^r mod 2N rotating slots left by r (any integer; 5 has order N/2 mod 2N)."""
    return pow(5, int(rotation) % params.slots, 2 * params.n)


galois_element = renamed(rotation_element, "crossfhe.ckks.ops.galois_element",
                         "rotation_element (as crossfhe.bfv.ops; one vocabulary: docs/vocabulary.md)")


def conjugation_element(params: Params) -> int:
    return 2 * params.n - 1


def keygen(params: Params, *, rotations=(), conjugation: bool = False, seed: bytes | None = None, progress=None):
    """(SecretKey, EvaluationKeys) for ``params``: a ternary secret (fixed Hamming weight if the
    parameters ask for one), the public key, the relinearization key and Galois keys for ``rotations``
    (slot offsets, any sign) and, if asked, conjugation. ``seed``: 32 bytes for reproducible keys
    (tests); default os.urandom. ``progress``: :mod:`crossfhe.progress` (one step per key, the relinearization
    and Galois keys' reported as each batch of them is done; default silent).

    Programs: the secret and public key one (:func:`~crossfhe.core.keys.gen_key_pair`), the relinearization and
    Galois keys one per batch (:func:`~crossfhe.core.keyswitch.evaluation_key_batches`, one executable for all
    batches). ChaCha20 keys, from ``Rng(seed)`` in turn: the secret's, the public key's, then one from which the
    relinearization key takes ``fold_in(., 0)`` and the Galois key of element k ``fold_in(., k)``."""
    if not isinstance(params, Params):
        raise TypeError(f"keygen takes ckks.Params, got {type(params).__name__}")
    progress = progress_callback(progress)
    rng = crandom.Rng(seed)
    elements = {rotation_element(params, r) for r in rotations}
    if conjugation:
        elements.add(conjugation_element(params))
    total, what = 2 + len(elements), "CKKS keys"
    sk, pk = gen_key_pair(params, rng, hamming_weight=params.hamming_weight)
    report(progress, 1, total, what)
    made = {}
    for batch in ks.evaluation_key_batches(sk, params, rng.next_key(), [ks.RELIN, *sorted(elements)],
                                           dnum=params.dnum):
        for g, key in batch.items():
            made[g] = key
            report(progress, 1 + len(made), total, what)
    rlk = made.pop(ks.RELIN)
    return sk, EvaluationKeys(public=pk, relin=rlk, galois=made, params=params)


# --------------------------------------------------------------------------------------------------
# Encoding and encryption
# --------------------------------------------------------------------------------------------------


def encode(params: Params, values, *, level: int | None = None, scale: float | None = None,
           reduce_on_device: bool = False) -> Plaintext:
    """Encode complex (or real) values into a plaintext at ``level`` (default: the top user level,
    :attr:`Params.user_levels`) and ``scale`` (default Delta). ``values``: up to N/2 numbers (fewer: a power of
    two, replicated). Refuses values whose largest coefficient plus the fresh-encryption noise bound
    (:func:`~crossfhe.core.rlwe.fresh_noise_bound`) exceeds Q/2 at that level: they, or their encryption, would
    decrypt with the wrong sign. ``reduce_on_device``: the coefficients are reduced modulo the primes by a compiled
    program (:func:`crossfhe.ckks.encoder.integral_residues`, the same words), as bulk encodings such as a
    bootstrap plan's diagonals want; by default on the host, so that an eager operation stays one program."""
    level = params.user_levels if level is None else int(level)
    scale = params.scale if scale is None else float(scale)
    moduli = params.moduli_at(level)
    if reduce_on_device:
        coeffs = encoder.integral_residues(encode_integers(params, values, level=level, scale=scale), moduli)
    else:
        margin = rlwe.fresh_noise_bound(params.n)
        coeffs = jnp.asarray(encoder.encode(values, n=params.n, moduli=moduli, scale=scale, margin=margin))
    p = poly.to_eval(RNSPoly.create(coeffs, moduli), NTTPlan.create(params.n, moduli, params.kernels))
    return Plaintext(p, params, scale)


def encode_integers(params: Params, values, *, level: int, scale: float) -> np.ndarray:
    """:func:`encode`'s integer coefficients (float64 ``[N]``, before their reduction), with its checks: the margin of
    a fresh encryption's noise below Q/2 at ``level``."""
    return encoder.encode_integers(values, n=params.n, moduli=params.moduli_at(level), scale=scale,
                                   margin=rlwe.fresh_noise_bound(params.n))


def decode(pt: Plaintext, *, slots: int | None = None) -> np.ndarray:
    """The complex values of a plaintext (complex128[..., slots])."""
    moduli = pt.poly.basis
    coeffs = np.asarray(poly.to_coeff(pt.poly, NTTPlan.create(pt.params.n, moduli, pt.params.kernels)).data)
    return encoder.decode(coeffs, moduli=moduli, scale=pt.scale, slots=slots)


def encrypt(key_material, pt: Plaintext, *, key: crandom.ChaChaKey | None = None) -> Ciphertext:
    """Encrypt a plaintext with a PublicKey (or EvaluationKeys), or a SecretKey (symmetric, smaller noise).
    ``key``: a ChaChaKey used once (default: fresh from os.urandom)."""
    key = crandom.seed_key() if key is None else key
    if not isinstance(pt, Plaintext):
        raise TypeError(f"encrypt takes a ckks.Plaintext, got {type(pt).__name__} (encode the values first)")
    if isinstance(key_material, EvaluationKeys):
        _same_params(key_material.params, pt.params, "encrypt")
        key_material = key_material.public
    if isinstance(key_material, PublicKey):
        c0, c1 = rlwe.encrypt_pk(key_material, pt.poly, key, p=pt.params.p, kernels=pt.params.kernels)
    elif isinstance(key_material, SecretKey):
        c0, c1 = rlwe.encrypt_sk(key_material, pt.poly, key, kernels=pt.params.kernels)
    else:
        raise TypeError(f"encrypt takes a PublicKey, EvaluationKeys or SecretKey, got {type(key_material).__name__}")
    return Ciphertext(c0, c1, pt.params, pt.scale, key_material.key_id)


def decrypt(sk: SecretKey, ct: Ciphertext) -> Plaintext:
    """The plaintext c0 + c1 s, at the ciphertext's level and scale. Raises KeyMismatchError if the
    ciphertext was encrypted under another key pair."""
    if not isinstance(sk, SecretKey):
        raise TypeError(f"decrypt takes a SecretKey, got {type(sk).__name__}")
    check_key_ids("decrypt", sk.key_id, ct.key_id)
    return Plaintext(rlwe.decrypt(sk, (ct.c0, ct.c1)), ct.params, ct.scale)


# --------------------------------------------------------------------------------------------------
# Levels and scales
# --------------------------------------------------------------------------------------------------


def _same_params(a: Params, b: Params, what: str) -> None:
    """Operands must share parameters; the kernel set may differ (it changes how, never what: the operation runs
    on the first operand's)."""
    if a is not b and a != b and a.digest() != b.digest():
        raise BasisMismatchError(f"{what}: operands belong to different parameter sets ({a.digest()[:12]} vs "
                                 f"{b.digest()[:12]})")


def drop_level(x, level: int):
    """Drop primes so that a ciphertext or plaintext is at ``level`` (<= its level). Exact; scale unchanged."""
    if level > x.level:
        raise ParameterError(f"cannot raise a level: at {x.level}, asked for {level}")
    if level == x.level:  # nothing to drop: no slicing op to dispatch
        return x
    k = len(x.params.moduli_at(level))
    if isinstance(x, Plaintext):
        return Plaintext(poly.drop_limbs(x.poly, x.poly.limbs - k), x.params, x.scale)
    return _like(x, *ev.cut_pair(x.c0, x.c1, limbs=k))


def _like(a: Ciphertext, c0: RNSPoly, c1: RNSPoly, scale: float | None = None) -> Ciphertext:
    """A ciphertext with a's parameters and key id: (c0, c1) at ``scale`` (default a's)."""
    return dataclasses.replace(a, c0=c0, c1=c1, scale=a.scale if scale is None else scale)


def _close(a: float, b: float) -> bool:
    return abs(a / b - 1.0) <= SCALE_TOLERANCE


def _align_limbs(a: Ciphertext, b, what: str):
    """(a, b, limbs): the operands and the limb count of their common level, with nothing dropped yet when their
    scales agree (the kernel cuts them, :mod:`crossfhe.core.evaluator`), or both aligned by :func:`_align` (and
    limbs None) when they do not."""
    _same_params(a.params, b.params, what)
    if isinstance(b, Ciphertext):
        check_key_ids(what, a.key_id, b.key_id)
    if _close(a.scale, b.scale):
        return a, b, len(a.params.moduli_at(min(a.level, b.level)))
    a, b = _align(a, b, what)
    return a, b, None


def _align(a: Ciphertext, b, what: str):
    """Bring a and b (Ciphertext or Plaintext) to one level and (nearly) one scale.

    Equal scales (within SCALE_TOLERANCE): drop primes from the higher operand. Otherwise the ciphertext
    x at the higher level (or ``a`` at equal levels) is multiplied by c = round(Delta_y q / Delta_x) and
    rescaled by q, the prime(s) of the level just above the target: its scale becomes Delta_x c / q, within
    a relative 1 / (2c) of Delta_y (about 2^-31), at the cost of that level.
    """
    _same_params(a.params, b.params, what)
    if isinstance(b, Ciphertext):
        check_key_ids(what, a.key_id, b.key_id)
    if _close(a.scale, b.scale):
        level = min(a.level, b.level)
        return drop_level(a, level), drop_level(b, level)
    swap = b.level > a.level or (b.level == a.level and not isinstance(a, Ciphertext))
    x, y = (b, a) if swap else (a, b)
    target = y.level if x.level > y.level else y.level - 1
    if not isinstance(x, Ciphertext) or target < 0:
        raise ParameterError(
            f"{what}: scales 2^{math.log2(a.scale):.3f} (level {a.level}) and 2^{math.log2(b.scale):.3f} (level "
            f"{b.level}) differ and cannot be aligned without a spare level; encode plaintexts at the "
            "ciphertext's scale, or rescale first"
        )
    x = drop_level(x, target + 1)
    q = math.prod(x.params.rescale_primes(x.level))
    x = rescale(_mul_integer(x, round(y.scale * q / x.scale), x.scale * round(y.scale * q / x.scale)))
    y = drop_level(y, target)
    return (y, x) if swap else (x, y)


# --------------------------------------------------------------------------------------------------
# Rescaling (the two-part operations are crossfhe.core.evaluator's)
# --------------------------------------------------------------------------------------------------


@plan_cache(maxsize=256, on_device=True)
def _rescale_tables(n: int, moduli: tuple[int, ...], g: int, kernels, chain: tuple[int, ...]):
    """Tables of :func:`_rescale_one` dividing by the last ``g`` primes of ``moduli`` (a level of ``chain``, the
    parameters' Q ∪ P, whose one NTT table the NATIVE set's plans read:
    :func:`crossfhe.core.keyswitch.level_ntt_plan`)."""
    last, rest = moduli[-g:], moduli[:-g]
    divisor = math.prod(last)
    half = (divisor - 1) // 2
    col = lambda xs: np.array(xs, dtype=np.uint32).reshape(-1, 1)  # noqa: E731
    tl, tr = ModulusTable.create(last), ModulusTable.create(rest)
    # Garner: inv[j][l] = last_l^-1 mod last_j (l < j), with Shoup companions.
    inv = np.array([[pow(last[l], -1, last[j]) if l < j else 0 for l in range(g)] for j in range(g)], dtype=np.uint32)
    inv_s = shoup_precompute(inv, np.array(last, dtype=np.uint64)[:, None])
    # The mixed-radix digits v_j weigh prod_{l<j} last_l; their sum mod each remaining prime.
    radix = np.array([[math.prod(last[:j]) % m for j in range(g)] for m in rest], dtype=np.uint32)
    radix_s = shoup_precompute(radix, np.array(rest, dtype=np.uint64)[:, None])
    d_inv = [pow(divisor, -1, m) for m in rest]
    consts = (
        (col(last), tl.barrett_mu, tl.bits, col([half % m for m in last]), inv, inv_s),
        tr.q,
        (radix, radix_s),
        col([half % m for m in rest]),
        col(d_inv),
        shoup_precompute(col(d_inv), tr.q.astype(np.uint64)),
    )
    return ks.level_ntt_plan(n, last, chain, kernels), ks.level_ntt_plan(n, rest, chain, kernels), consts


def _rescale_one(x, plan_last, plan_rest, consts):
    """round(x / D) over the other primes, D = the product of the last g primes; EVAL in, EVAL out.

    With h = (D - 1) / 2 and r = (x + h) mod D per coefficient (the g last limbs inverted, then combined
    by Garner into mixed-radix digits v_j: r = v_0 + q_0 v_1 + q_0 q_1 v_2 + ...), x - (r - h) =
    D floor((x + h) / D) = D round(x / D) exactly (D odd). Per remaining prime q_i:
    (x_i - NTT_i(r - h)) D^-1, with r - h reduced mod q_i in the coefficient domain. One transform of the
    remaining limbs whatever g is: a composite level costs what a single-prime level does.
    """
    # Fused into an XLA transform's first pass this producer would be computed twice per pair: a barrier there.
    t = transform_operand(_rescale_shift(x, plan_last, consts), plan_rest)
    return _rescale_finish(x, ntt(t, plan_rest), consts)


@jit
def _k_rescale_pair(c0, c1, plan_last, plan_rest, consts):
    """Both polynomials of a ciphertext rescaled (:func:`_rescale_one`): one program."""
    return _rescale_one(c0, plan_last, plan_rest, consts), _rescale_one(c1, plan_last, plan_rest, consts)


def _rescale_shift(x, plan_last, consts):
    """r - h mod each remaining prime, coefficient domain (:func:`_rescale_one`)."""
    (ql, mu_l, bitsl, hl, inv, inv_s), q, (radix, radix_s), h, _, _ = consts
    g = ql.shape[0]
    r = add_mod(intt(x[..., -g:, :], plan_last), hl, ql)
    digits = []
    for j in range(g):
        acc = r[..., j, :]
        for l_ in range(j):
            v = barrett_reduce(digits[l_], ql[j], mu_l[j], bitsl[j])
            acc = shoup_mul(sub_mod(acc, v, ql[j]), inv[j, l_], inv_s[j, l_], ql[j])
        digits.append(acc)
    # Materialized: fused into the rows below, the digits would be computed again for every remaining prime.
    digits = fusion_barrier(jnp.stack(digits, axis=-2), radix)
    t = None
    for j in range(g):
        # v_j times its radix mod each remaining prime: one Shoup product per word (any v_j < 2^32)
        term = shoup_mul(digits[..., j : j + 1, :], radix[:, j : j + 1], radix_s[:, j : j + 1], q)
        t = term if t is None else add_mod(t, term, q)
    return sub_mod(t, h, q)


def _rescale_finish(x, t_eval, consts):
    """(x_i - NTT_i(r - h)) D^-1 on the remaining limbs (:func:`_rescale_one`)."""
    (ql, *_), q, _, _, d_inv, d_inv_s = consts
    y = sub_mod(x[..., : -ql.shape[0], :], t_eval, q)
    return shoup_mul(y, d_inv, d_inv_s, q)


def rescale_plan(params: Params, level: int):
    """The tables (plans and constants, arrays made once) of a rescale from ``level``: an argument of
    :func:`rescale_traced` (compiled circuits pass it into their program)."""
    primes = params.rescale_primes(level)
    return _rescale_tables(params.n, params.moduli_at(level), len(primes), params.kernels, params.q + params.p)


def rescale_traced(c0: RNSPoly, c1: RNSPoly, tables) -> tuple[RNSPoly, RNSPoly]:
    """Both polynomials rescaled with ``tables`` (:func:`rescale_plan` of their level); traceable."""
    plan_last, plan_rest, consts = tables
    g = len(plan_last.moduli)
    out0, out1 = _k_rescale_pair(c0.data, c1.data, plan_last, plan_rest, consts)
    return RNSPoly(out0, c0.basis[:-g], Domain.EVAL), RNSPoly(out1, c0.basis[:-g], Domain.EVAL)


def _rescale_pair(c0: RNSPoly, c1: RNSPoly, g: int, kernels, chain: tuple[int, ...]) -> tuple[RNSPoly, RNSPoly]:
    """Both polynomials of a ciphertext rescaled by the last ``g`` primes (:func:`_rescale_one`); ``chain``: the
    parameters' Q ∪ P (:func:`_rescale_tables`)."""
    plan_last, plan_rest, consts = _rescale_tables(c0.n, c0.basis, g, kernels, chain)
    out0, out1 = _k_rescale_pair(c0.data, c1.data, plan_last, plan_rest, consts)
    return RNSPoly(out0, c0.basis[:-g], Domain.EVAL), RNSPoly(out1, c0.basis[:-g], Domain.EVAL)


# --------------------------------------------------------------------------------------------------
# Arithmetic
# --------------------------------------------------------------------------------------------------


def add(a: Ciphertext, b: Ciphertext) -> Ciphertext:
    """a + b (levels and scales aligned first). Noise: the sum of both."""
    a, b, limbs = _align_limbs(a, b, "add")
    return _like(a, *ev.add(a.c0, a.c1, b.c0, b.c1, limbs=limbs))


def sub(a: Ciphertext, b: Ciphertext) -> Ciphertext:
    """a - b (levels and scales aligned first)."""
    a, b, limbs = _align_limbs(a, b, "sub")
    return _like(a, *ev.sub(a.c0, a.c1, b.c0, b.c1, limbs=limbs))


def negate(a: Ciphertext) -> Ciphertext:
    return _like(a, *ev.negate(a.c0, a.c1))


def add_plain(a: Ciphertext, pt: Plaintext) -> Ciphertext:
    """a + pt (pt at the ciphertext's scale; levels aligned)."""
    a, pt, limbs = _align_limbs(a, pt, "add_plain")
    return _like(a, *ev.add_plain(a.c0, a.c1, pt.poly, limbs=limbs))


def sub_plain(a: Ciphertext, pt: Plaintext) -> Ciphertext:
    a, pt, limbs = _align_limbs(a, pt, "sub_plain")
    return _like(a, *ev.add_plain(a.c0, a.c1, pt.poly, limbs=limbs, subtract=True))


def _scalar(c, what: str) -> complex:
    """A Python, NumPy or JAX number as a finite complex; TypeError for other operands, ParameterError
    for NaN or infinity."""
    if isinstance(c, (bool, np.bool_)) or not isinstance(c, (numbers.Number, np.ndarray, jax.Array)) or np.ndim(c):
        raise TypeError(f"{what} takes a real or complex number, got {type(c).__name__}")
    z = complex(c)
    if not (math.isfinite(z.real) and math.isfinite(z.imag)):
        raise ParameterError(f"{what}: the scalar must be finite, got {c!r}")
    return z


def _check_scalar_product(a: Ciphertext, c: complex, scale: float, what: str) -> None:
    """Refuse c * a where a message of magnitude 1 times |c| at the product's scale (a's times ``scale``,
    the scalar's encoding scale) would reach Q/2 at a's level: the product, and everything after it,
    would wrap. The check of :func:`_check_product_scale` with the scalar's magnitude in it."""
    log_q = sum(math.log2(q) for q in a.params.moduli_at(a.level))
    need = math.log2(a.scale) + math.log2(scale) + math.log2(max(1.0, abs(c)))
    if need + 1 >= log_q:
        raise ParameterError(
            f"{what}: multiplying by {c!r} would overflow the modulus at level {a.level}: a unit message at scale "
            f"2^{math.log2(a.scale):.1f} times |c| = 2^{math.log2(max(1.0, abs(c))):.1f} needs 2^{need + 1:.1f} > Q "
            f"(log2 Q = {log_q:.1f}); multiply by a smaller number, or rescale or drop less first"
        )


def add_scalar(a: Ciphertext, c: complex) -> Ciphertext:
    """a + c in every slot (c real: a constant polynomial round(c Delta); complex: through a plaintext).
    c is checked as a plaintext is (:func:`encode`): round(|c| Delta) plus the fresh-noise bound must stay
    below Q/2 at a's level (else ParameterError); NaN and infinity are refused."""
    c = _scalar(c, "add_scalar")
    if c.imag:
        return add_plain(a, encode(a.params, np.full(a.params.slots, c), level=a.level, scale=a.scale))
    # A constant polynomial evaluates to itself in every slot of the EVAL domain.
    const = encoder.encode_scalar_constant(c.real, moduli=a.c0.basis, scale=a.scale,
                                           margin=rlwe.fresh_noise_bound(a.params.n), what="add_scalar")
    return _like(a, *ev.add_constant(a.c0, a.c1, _constant_words(tuple(int(v) for v in const))))


@plan_cache(maxsize=256, on_device=True)
def _constant_words(residues: tuple[int, ...]):
    """The residues of a constant as the uint32 ``[limbs, 1]`` argument of :func:`~crossfhe.core.evaluator.add_constant`
    (a device array, made once per constant and basis)."""
    return np.asarray(residues, dtype=np.uint32).reshape(-1, 1)


def _mul_integer(a: Ciphertext, c: int, scale: float) -> Ciphertext:
    return _like(a, *ev.mul_integer(a.c0, a.c1, *ev.integer_words(int(c), a.c0.basis)), scale)


def combine_rescale(terms, const: float, level: int, scale: float, *, product=None) -> Ciphertext:
    """rescale(sum_k c_k x_k + const) for ``terms`` = [(x_k, c_k)]: ciphertexts at levels >= ``level`` (>= 1) and
    integers, the products taken to be at scale ``scale`` (the caller picks c_k = round(a_k scale / scale(x_k)),
    as :func:`_mul_integer`'s callers do); each x_k is taken at ``level`` (primes dropped), the sum holds the
    constant round(const scale), and the result is at ``level`` - 1 with scale ``scale`` / q (q the level's
    rescale primes). ``product`` = (a, b, keys, c) adds the term c (a * b) (:func:`mul`, relinearized; ``level``
    must then be the product's). The same words as :func:`mul`, :func:`_mul_integer`, :func:`add`,
    :func:`add_scalar` and :func:`rescale` in turn, in one program: one pass over the operands instead of a
    product and a sum (and a cut) per term. Noise: sum_k |c_k| e_k + the rescale's rounding."""
    pairs = list(terms) if product is None else [(product[0], product[3])] + list(terms)
    if not pairs:
        raise ParameterError("combine_rescale: no terms")
    first = pairs[0][0]
    if level < 1 or any(x.level < level for x, _ in pairs):
        raise ParameterError(f"combine_rescale: every term must be at level >= {level} >= 1, got "
                             f"{[x.level for x, _ in pairs]}")
    for x, _ in pairs:
        _same_params(first.params, x.params, "combine_rescale")
        check_key_ids("combine_rescale", first.key_id, x.key_id)
    params = first.params
    basis = params.moduli_at(level)
    w, ws = ev.combination_words(tuple(int(c) for _, c in pairs), basis)
    words = encoder.encode_scalar_constant(float(const), moduli=basis, scale=scale,
                                           margin=rlwe.fresh_noise_bound(params.n), what="combine_rescale")
    primes = params.rescale_primes(level)
    tables = _rescale_tables(params.n, basis, len(primes), params.kernels, params.q + params.p)
    const_words = _constant_words(tuple(int(v) for v in words))
    xs0, xs1 = tuple(x.c0 for x, _ in terms), tuple(x.c1 for x, _ in terms)
    if product is None:
        out0, out1 = _k_combine_rescale(xs0, xs1, w, ws, const_words, *tables, limbs=len(basis))
    else:
        a, b, keys, _ = product
        at, limbs, plan = _product(a, b, keys)
        if at != level:
            raise ParameterError(f"combine_rescale: the product is at level {at}, not {level}")
        out0, out1 = _k_mul_combine_rescale(a.c0, a.c1, b.c0, b.c1, keys.relin, plan, xs0, xs1, w, ws, const_words,
                                            *tables, limbs=limbs)
    rest = basis[: -len(primes)]
    return _like(first, RNSPoly(out0, rest, Domain.EVAL), RNSPoly(out1, rest, Domain.EVAL),
                 scale / math.prod(primes))


def _combined_rescaled(xs0, xs1, w, ws, const, plan_last, plan_rest, consts, limbs):
    s0, s1 = ev.combination_traced(xs0, xs1, w, ws, limbs=limbs)
    s0 = add_mod(s0.data, const, poly.modulus_table(s0.basis).q)
    return _rescale_one(s0, plan_last, plan_rest, consts), _rescale_one(s1.data, plan_last, plan_rest, consts)


@partial(jit, static_argnames=("limbs",))
def _k_combine_rescale(xs0, xs1, w, ws, const, plan_last, plan_rest, consts, *, limbs):
    """:func:`combine_rescale`'s program: the combination, the constant, then both halves rescaled."""
    return _combined_rescaled(xs0, xs1, w, ws, const, plan_last, plan_rest, consts, limbs)


@partial(jit, static_argnames=("limbs",))
def _k_mul_combine_rescale(a0, a1, b0, b1, rlk, plan, xs0, xs1, w, ws, const, plan_last, plan_rest, consts, *,
                           limbs):
    """:func:`combine_rescale`'s program with a product: the relinearized product first among the terms."""
    p0, p1 = ev.mul_relin(a0, a1, b0, b1, rlk, plan, limbs=limbs)
    return _combined_rescaled((p0, *xs0), (p1, *xs1), w, ws, const, plan_last, plan_rest, consts, limbs)


def mul_scalar(a: Ciphertext, c: complex) -> Ciphertext:
    """c * a. An integer c keeps the scale; a real c is encoded as round(c q) with q the primes the next
    rescale divides by, so the product's scale is Delta q and rescale returns it to Delta exactly; a
    complex c goes through a plaintext (scale Delta). Rescale afterwards unless c is an integer.
    Checked as plaintexts are: the encoded constant within Q/2 (:func:`encode`), and a unit message times
    |c| at the product's scale below Q/2 (:func:`_check_product_scale` with |c| in it); else ParameterError.
    NaN and infinity are refused."""
    if isinstance(c, (int, np.integer)) and not isinstance(c, (bool, np.bool_)):
        _check_scalar_product(a, int(c), 1.0, "mul_scalar")
        return _mul_integer(a, int(c), a.scale)
    c = _scalar(c, "mul_scalar")
    if c.imag:
        _check_scalar_product(a, c, a.params.scale, "mul_scalar")
        pt = encode(a.params, np.full(a.params.slots, c), level=a.level, scale=a.params.scale)
        return mul_plain(a, pt)
    if a.level < 1:
        raise ParameterError("mul_scalar by a non-integer needs a level to rescale; the levels are exhausted")
    q = math.prod(a.params.rescale_primes(a.level))
    _check_scalar_product(a, c.real, q, "mul_scalar")
    encoder.encode_scalar_constant(c.real, moduli=a.c0.basis, scale=q, margin=rlwe.fresh_noise_bound(a.params.n),
                                   what="mul_scalar")
    return _mul_integer(a, round(c.real * q), a.scale * q)


def mul_plain(a: Ciphertext, pt: Plaintext) -> Ciphertext:
    """a * pt (slot-wise), scale Delta_a Delta_pt; rescale afterwards."""
    _same_params(a.params, pt.params, "mul_plain")
    level = min(a.level, pt.level)
    _check_product_scale(a.params, a.scale * pt.scale, level)
    limbs = len(a.params.moduli_at(level))
    return _like(a, *ev.mul_plain(a.c0, a.c1, pt.poly, limbs=limbs), a.scale * pt.scale)


def _check_product_scale(params: Params, scale: float, level: int) -> None:
    log_q = sum(math.log2(q) for q in params.moduli_at(level))
    if math.log2(scale) + 1 >= log_q:
        raise ParameterError(
            f"a product at scale 2^{math.log2(scale):.1f} would overflow the modulus at level {level} "
            f"(log2 Q = {log_q:.1f}); rescale the operands first"
        )


def relinearize(d0: RNSPoly, d1: RNSPoly, d2: RNSPoly, rlk, *, kernels=None) -> tuple[RNSPoly, RNSPoly]:
    """(d0, d1) + the key switch of d2 with ``rlk``; ``kernels``: the kernel set (default VECTOR)."""
    return ev.relinearize(d0, d1, d2, rlk, ks.keyswitch_plan(rlk, active=d2.limbs, kernels=kernels))


def mul(a: Ciphertext, b: Ciphertext, keys: EvaluationKeys) -> Ciphertext:
    """a * b slot-wise: the tensor product (d0, d1, d2) relinearized with the relinearization key.
    Scale Delta_a Delta_b; rescale afterwards."""
    level, limbs, plan = _product(a, b, keys)
    return _like(a, *ev.mul_relin(a.c0, a.c1, b.c0, b.c1, keys.relin, plan, limbs=limbs), a.scale * b.scale)


def _product(a: Ciphertext, b: Ciphertext, keys: EvaluationKeys):
    """(level, limbs, key-switching plan) of the product a * b, after the checks of :func:`mul`."""
    _same_params(a.params, keys.params, "mul")
    _same_params(a.params, b.params, "mul")
    check_key_ids("mul", a.key_id, b.key_id, keys.key_id)
    level = min(a.level, b.level)
    _check_product_scale(a.params, a.scale * b.scale, level)
    limbs = len(a.params.moduli_at(level))
    return level, limbs, ks.keyswitch_plan(keys.relin, active=limbs, kernels=a.params.kernels)


def square(a: Ciphertext, keys: EvaluationKeys) -> Ciphertext:
    return mul(a, a, keys)


def rescale(a: Ciphertext) -> Ciphertext:
    """Divide by the level's scale prime(s) q with rounding and drop them: scale Delta / q, level - 1.
    One exact rounding of each coefficient by the product of the level's primes (one or two); adds at
    most (1 + N) / 2 to the noise."""
    primes = a.params.rescale_primes(a.level)
    kernels = a.params.kernels
    chain = a.params.q + a.params.p
    return _like(a, *_rescale_pair(a.c0, a.c1, len(primes), kernels, chain), a.scale / math.prod(primes))


def mul_rescale(a: Ciphertext, b: Ciphertext, keys: EvaluationKeys) -> Ciphertext:
    """:func:`rescale` of :func:`mul` (the same words), as one program."""
    level, limbs, plan = _product(a, b, keys)
    primes = a.params.rescale_primes(level)
    out = _k_mul_rescale(a.c0, a.c1, b.c0, b.c1, keys.relin, plan, rescale_plan(a.params, level), limbs=limbs)
    return _like(a, *out, a.scale * b.scale / math.prod(primes))


@partial(jit, static_argnames=("limbs",))
def _k_mul_rescale(a0, a1, b0, b1, rlk, plan, tables, *, limbs):
    return rescale_traced(*ev.mul_relin(a0, a1, b0, b1, rlk, plan, limbs=limbs), tables)


# --------------------------------------------------------------------------------------------------
# Rotations
# --------------------------------------------------------------------------------------------------


def apply_galois(a: Ciphertext, element: int, keys: EvaluationKeys) -> Ciphertext:
    """The automorphism X -> X^g on the slots (g = 5^r: rotation by r; 2N - 1: conjugation), switched
    back to the secret key with the Galois key for g."""
    _same_params(a.params, keys.params, "apply_galois")
    check_key_ids("apply_galois", a.key_id, keys.key_id)
    gk = keys.galois_key(element)
    plan = ks.keyswitch_plan(gk, active=a.c1.limbs, kernels=a.params.kernels)
    return _like(a, *ev.galois(a.c0, a.c1, gk, plan, ev.word(element)))


def rotate(a: Ciphertext, k: int, keys: EvaluationKeys) -> Ciphertext:
    """Slots rotated left by k (slot i of the result holds slot i + k). Needs the key for k."""
    if k % a.params.slots == 0:
        return a
    return apply_galois(a, rotation_element(a.params, k), keys)


def conjugate(a: Ciphertext, keys: EvaluationKeys) -> Ciphertext:
    """Complex conjugate of every slot. Needs the conjugation key."""
    return apply_galois(a, conjugation_element(a.params), keys)


def rotate_many(a: Ciphertext, rotations, keys: EvaluationKeys) -> dict[int, Ciphertext]:
    """{k: rotate(a, k)} for several k, hoisted: c1 is decomposed and raised to Q ∪ P once
    (:func:`~crossfhe.core.keyswitch.keyswitch_hoisted`), each rotation then costs a permutation, a
    multiply-accumulate with its key and a ModDown. Equal to separate :func:`rotate` calls within the
    key-switching noise (a wrapped, negated coefficient gets another ModUp representative)."""
    _same_params(a.params, keys.params, "rotate_many")
    check_key_ids("rotate_many", a.key_id, keys.key_id)
    todo = sorted({int(k) for k in rotations if int(k) % a.params.slots})
    out = {int(k): a for k in rotations if int(k) % a.params.slots == 0}
    if not todo:
        return out
    elements = [rotation_element(a.params, k) for k in todo]
    gks = [keys.galois_key(g) for g in elements]
    plan = ks.keyswitch_plan(gks[0], active=a.c1.limbs, kernels=a.params.kernels)
    switched = ev.galois_hoisted(a.c0, a.c1, tuple(gks), plan, tuple(elements))
    for k, (c0, c1) in zip(todo, switched):
        out[k] = _like(a, c0, c1)
    return out


def sum_slots(a: Ciphertext, keys: EvaluationKeys, *, width: int | None = None) -> Ciphertext:
    """Every slot holds the sum of ``width`` consecutive slots (default all N/2): log2(width) rotations by
    powers of two (keys for 1, 2, 4, ... needed)."""
    width = a.params.slots if width is None else int(width)
    if width & (width - 1) or not 1 <= width <= a.params.slots:
        raise ParameterError(f"width must be a power of two in [1, {a.params.slots}], got {width}")
    step = 1
    while step < width:
        a = add(a, rotate(a, step, keys))
        step *= 2
    return a


def inner_product(a: Ciphertext, b: Ciphertext, keys: EvaluationKeys) -> Ciphertext:
    """sum_i a_i b_i in every slot (multiply, rescale, sum_slots)."""
    return sum_slots(rescale(mul(a, b, keys)), keys)


def power_of_two_rotations(params: Params) -> list[int]:
    """The rotations :func:`sum_slots` needs: 1, 2, 4, ..., N/4."""
    return [1 << i for i in range(params.slots.bit_length() - 1)]
