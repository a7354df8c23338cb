"""BFV operations as pure functions on :mod:`crossfhe.bfv.ciphertext` types.

Ciphertexts are kept in the EVAL domain over Q. Each public function checks parameters and keys in
Python (errors name the problem, also while tracing under ``jax.jit`` / ``jax.vmap``) and runs jitted
kernels on the RNS arrays.

Noise, as the invariant noise v of :mod:`crossfhe.bfv.params` (|v| < 1/2 decrypts), in the usual
worst-case form with B = ceil(13 sigma) and products bounded by N ||x|| ||y||: a fresh secret-key
encryption has t B / Q plus the rounding of Delta, a fresh public-key encryption t (1 + N) / Q more
(ModDown by P of the masked key, :func:`crossfhe.core.rlwe.encrypt_pk`); addition adds; a plaintext
product multiplies by N t / 2 (centered plaintext coefficients); a ciphertext product (HPS) gives about
N t (v_a + v_b) plus the rounding and relinearization terms. :func:`noise_budget` measures it through the
secret key, as SEAL's ``invariant_noise_budget`` does: -log2(2 max|v|), floored at 0.

Multiplication follows Halevi, Polyakov and Shoup ("An improved RNS variant of the BFV homomorphic
encryption scheme", CT-RSA 2019): both operands are extended exactly from Q to Q ∪ R (float estimate of
the CRT overflow, :func:`crossfhe.math.rns.fast_basis_conversion` with ``exact``), the tensor is formed
over Q ∪ R in the EVAL domain, and round(t x / Q) is computed as a ModDown by Q of t x (the same kernel
that divides by P in key switching) into R, then converted exactly back to Q. The float estimates may be
one off near a half-integer, which adds at most one unit to a coefficient before scaling: noise, never a
wrong result while the budget lasts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from crossfhe.bfv import encoder
from crossfhe.bfv.ciphertext import Ciphertext, Encoding, EvaluationKeys, Plaintext
from crossfhe.bfv.params import Params
from crossfhe.core import evaluator as ev
from crossfhe.core import keyswitch as ks
from crossfhe.core import rlwe
from crossfhe.core.keys import (
    SIGMA,
    PublicKey,
    SecretKey,
    check_key_ids,
    gen_key_pair,
    sample_gaussian,
    sample_ternary,
    sample_uniform,
)
from crossfhe.errors import BasisMismatchError, ParameterError
from crossfhe.math import random as crandom
from crossfhe.math.modular import (
    ModulusTable,
    add_mod,
    add_wide,
    barrett_mul,
    mul_wide,
    shoup_mul,
    shoup_precompute,
    shr_wide,
)
from crossfhe.math.rns import BasisConversion, ModDownPlan, RNSBasis, centered_fraction, fast_basis_conversion, mod_down
from crossfhe.math.xla import jit, plan_cache
from crossfhe.progress import callback as progress_callback
from crossfhe.progress import report
from crossfhe.ring import poly
from crossfhe.ring.ntt import NTTPlan, fusion_barrier, intt, ntt
from crossfhe.ring.poly import Domain, RNSPoly

# --------------------------------------------------------------------------------------------------
# Keys
# --------------------------------------------------------------------------------------------------


def rotation_element(params: Params, rotation: int) -> int:
    """The Galois element 5^r mod 2N rotating both slot rows left by r (any integer; 5 has order N/2)."""
    return pow(5, int(rotation) % (params.n // 2), 2 * params.n)


def row_swap_element(params: Params) -> int:
    """The Galois element 2N - 1 (X -> X^-1), which swaps the two slot rows."""
    return 2 * params.n - 1


def _check_params(params) -> Params:
    if not isinstance(params, Params):
        raise TypeError(f"expected bfv.Params, got {type(params).__name__}")
    return params


def keygen(
    params: Params,
    *,
    rotations=(),
    row_swap: bool = False,
    galois_elements=(),
    relin: bool = True,
    seed: bytes | None = None,
    progress=None,
):
    """(SecretKey, EvaluationKeys) for ``params``: a ternary secret (fixed Hamming weight if the parameters
    ask for one), the public key, the relinearization key (``relin``), and Galois keys for ``rotations``
    (row rotations, any sign), the row swap, and any extra odd ``galois_elements`` (e.g. the packing
    elements of :func:`crossfhe.convert.packing.packing_galois_elements`). ``seed``: 32 bytes for
    reproducible keys (tests); default os.urandom. ``progress``: :mod:`crossfhe.progress` (one step per key, the
    relinearization and Galois keys' reported as each batch of them is done; default silent).

    Programs and ChaCha20 keys as :func:`crossfhe.ckks.ops.keygen`: from ``Rng(seed)`` in turn the secret's, the
    public key's, then one from which the relinearization key (if ``relin``) takes ``fold_in(., 0)`` and the Galois
    key of element k ``fold_in(., k)`` (:func:`~crossfhe.core.keyswitch.evaluation_key_batches`)."""
    _check_params(params)
    progress = progress_callback(progress)
    rng = crandom.Rng(seed)
    sk, pk = gen_key_pair(params, rng, hamming_weight=params.hamming_weight)
    elements = {rotation_element(params, r) for r in rotations if int(r) % (params.n // 2)}
    if row_swap:
        elements.add(row_swap_element(params))
    for g in galois_elements:
        g = int(g) % (2 * params.n)
        if g % 2 == 0:
            raise ParameterError(f"Galois elements must be odd (mod 2N = {2 * params.n}), got {g}")
        elements.add(g)
    total, what = 2 + len(elements), "BFV keys"
    report(progress, 1 if relin else 2, total, what)
    wanted = ([ks.RELIN] if relin else []) + sorted(elements)
    made = {}
    for batch in ks.evaluation_key_batches(sk, params, rng.next_key(), wanted, dnum=params.dnum):
        for g, key in batch.items():
            made[g] = key
            report(progress, 1 + len(made) + (not relin), total, what)
    rlk = made.pop(ks.RELIN, None)
    return sk, EvaluationKeys(public=pk, relin=rlk, galois=made, params=params)


def gen_galois_keys(sk: SecretKey, keys: EvaluationKeys, elements, *, seed: bytes | None = None) -> EvaluationKeys:
    """``keys`` with Galois keys for ``elements`` added (those already present are kept)."""
    params = keys.params
    rng = crandom.Rng(seed)
    galois = dict(keys.galois)
    for g in sorted({int(g) % (2 * params.n) for g in elements} - set(galois)):
        if g % 2 == 0:
            raise ParameterError(f"Galois elements must be odd (mod 2N = {2 * params.n}), got {g}")
        galois[g] = ks.gen_galois_key(sk, params, rng.next_key(), g, dnum=params.dnum)
    return EvaluationKeys(public=keys.public, relin=keys.relin, galois=galois, params=params)


# --------------------------------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------------------------------


def encode(params: Params, values, *, encoding: Encoding | str = Encoding.BATCH) -> Plaintext:
    """Integers in [0, t) -> Plaintext. BATCH: up to N values, or a [..., 2, N/2] slot matrix (needs a
    batching t); COEFF: up to N coefficients. Leading axes are batch axes."""
    _check_params(params)
    encoding = Encoding(encoding)
    if encoding == Encoding.BATCH:
        if not params.batching:
            raise ParameterError(
                f"batch encoding needs t prime with t = 1 (mod 2N = {2 * params.n}); t = {params.t} is not: "
                "use encoding='coeff' or a batching t (ParamsLiteral(plain_bits=...))"
            )
        coeffs = encoder.encode_batch(values, params.n, params.t)
    else:
        coeffs = encoder.encode_coeffs(values, params.n, params.t)
    return Plaintext(jnp.asarray(coeffs), params, encoding)


def decode(pt: Plaintext) -> np.ndarray:
    """Plaintext -> int64 values in [0, t): the [..., 2, N/2] slot matrix (BATCH) or the N coefficients."""
    params = pt.params
    if pt.encoding == Encoding.BATCH:
        return encoder.decode_batch(pt.coeffs, params.n, params.t)
    return np.asarray(pt.coeffs).astype(np.int64)


# --------------------------------------------------------------------------------------------------
# Lifting messages to Q
# --------------------------------------------------------------------------------------------------


@plan_cache(maxsize=64, on_device=True)
def _lift_tables(n: int, moduli: tuple[int, ...], t: int, scale: int, kernels=None):
    """NTT plan and (moduli, scale mod each modulus, its Shoup companion, q_i - t) as [limbs, 1] words,
    plus the rounding constants (r, t, Barrett mu and bit length of t) of :func:`_round_rm_over_t` for
    r = prod(moduli) mod t."""
    q = np.array(moduli, dtype=np.uint32).reshape(-1, 1)
    w = np.array([scale % m for m in moduli], dtype=np.uint32).reshape(-1, 1)
    ws = shoup_precompute(w, q.astype(np.uint64))
    tq = np.array([m - t for m in moduli], dtype=np.uint32).reshape(-1, 1)
    bits = t.bit_length()
    rounding = tuple(np.uint32(x) for x in (math.prod(moduli) % t, t, (1 << (2 * bits)) // t, bits))
    return NTTPlan.create(n, moduli, kernels), (q, w, ws, tq), rounding


def _round_rm_over_t(m, r, t, mu, bits):
    """round(r m / t) = floor((r m + floor(t/2)) / t) for words m, r < t < 2^31 (any t >= 2). Exact.

    z = r m + floor(t/2) < 2^(2s) (s = bits of t), so Barrett's quotient estimate floor(floor(z / 2^(s-1)) mu /
    2^(s+1)) with mu = floor(2^(2s) / t) is at most 2 below floor(z / t); the remainder decides the rest.
    """
    hi, lo = add_wide(*mul_wide(m, r), jnp.zeros_like(m), jnp.broadcast_to(t // 2, m.shape))
    z1 = shr_wide(hi, lo, bits - 1)
    qhat = shr_wide(*mul_wide(z1, mu), bits + 1)
    th, tl = mul_wide(qhat, t)
    rem_lo, rem_hi = lo - tl, hi - th - (lo < tl).astype(jnp.uint32)  # z - qhat t in [0, 3t)
    for _ in range(2):
        ge = (rem_hi > 0) | (rem_lo >= t)
        qhat = qhat + ge.astype(jnp.uint32)
        borrow = (rem_lo < t).astype(jnp.uint32)
        rem_lo, rem_hi = jnp.where(ge, rem_lo - t, rem_lo), jnp.where(ge, rem_hi - borrow, rem_hi)
    return qhat


def _scaled(m, plan: NTTPlan, consts, rounding):
    """NTT(round(D m / t)) over the plan's moduli, D their product: Delta' m + round(r m / t) with
    Delta' = floor(D / t), r = D mod t; m uint32 [..., N] in [0, t) (t < every modulus)."""
    q, w, ws, _ = consts
    c = _round_rm_over_t(m, *rounding)[..., None, :]  # < t < q_i: its own residue
    x = jnp.broadcast_to(m[..., None, :], m.shape[:-1] + (plan.limbs, m.shape[-1]))
    return ntt(add_mod(shoup_mul(x, w, ws, q), c, q), plan)


def _centered(m, plan: NTTPlan, consts, t):
    """NTT of the centered lift of m (m > t/2 taken as m - t) over the plan's moduli."""
    q, _, _, tq = consts
    x = m[..., None, :]
    x = jnp.where(x > t // 2, x + tq, jnp.broadcast_to(x, x.shape[:-2] + (plan.limbs, x.shape[-1])))
    return ntt(x, plan)


def scaled_message(params: Params, m, moduli: tuple[int, ...] | None = None) -> RNSPoly:
    """round(D m / t) as an EVAL RNSPoly over ``moduli`` (default Q), D = prod(moduli); m: uint32 [..., N] in
    [0, t). Over Q ∪ P this is the message of an extended (HMVP) ciphertext.

    Rounding rather than Delta m (Delta = floor(D / t), the textbook form) leaves an error below 1/2 in the
    phase instead of (D mod t) m / t, which is up to t and, for t ~ 2^20, outweighs a fresh encryption's
    noise by 10 bits of budget (SEAL rounds the same way)."""
    moduli = params.q if moduli is None else tuple(moduli)
    plan, consts, rounding = _lift_tables(params.n, moduli, params.t, math.prod(moduli) // params.t, params.kernels)
    return RNSPoly(_k_scaled(jnp.asarray(m, dtype=jnp.uint32), plan, consts, rounding), moduli, Domain.EVAL)


_k_scaled = jit(_scaled)
_k_centered = jit(_centered)


@partial(jit, static_argnames=("subtract",))
def _k_add_message(c0, c1, m, plan: NTTPlan, consts, rounding, *, subtract: bool):
    """(c0 +- round(Q m / t), c1): one program (:func:`scaled_message` and the sum)."""
    x = RNSPoly(_scaled(m, plan, consts, rounding), c0.basis, Domain.EVAL)
    return (poly.sub(c0, x) if subtract else poly.add(c0, x)), c1


@jit
def _k_mul_message(c0, c1, m, plan: NTTPlan, consts, t):
    """(c0 m~, c1 m~), m~ the centered lift of m (:func:`lifted_plaintext`): one program."""
    x = RNSPoly(_centered(m, plan, consts, t), c0.basis, Domain.EVAL)
    return poly.mul(c0, x), poly.mul(c1, x)


def lifted_plaintext(params: Params, m, moduli: tuple[int, ...] | None = None) -> RNSPoly:
    """The centered lift of m (uint32 [..., N] in [0, t); coefficients > t/2 as m - t) as an EVAL RNSPoly over
    ``moduli`` (default Q): the multiplier of a plaintext product."""
    moduli = params.q if moduli is None else tuple(moduli)
    plan, consts, _ = _lift_tables(params.n, moduli, params.t, 1, params.kernels)
    data = _k_centered(jnp.asarray(m, dtype=jnp.uint32), plan, consts, np.uint32(params.t))
    return RNSPoly(data, moduli, Domain.EVAL)


# --------------------------------------------------------------------------------------------------
# Encryption and decryption
# --------------------------------------------------------------------------------------------------


def _same_params(a: Params, b: Params, what: str) -> None:
    """Operands must share parameters; the kernel set may differ (it changes how, never what: the operation runs
    on the first operand's)."""
    if a is not b and a != b and a.digest() != b.digest():
        raise BasisMismatchError(
            f"{what}: operands belong to different parameter sets ({a.digest()[:12]} vs {b.digest()[:12]})"
        )


def _check_pt(pt, params: Params | None, what: str) -> Plaintext:
    if not isinstance(pt, Plaintext):
        raise TypeError(f"{what} takes a bfv.Plaintext, got {type(pt).__name__} (use bfv.ops.encode first)")
    if params is not None:
        _same_params(pt.params, params, what)
    return pt


def encrypt(key_material, pt: Plaintext, *, key: crandom.ChaChaKey | None = None) -> Ciphertext:
    """Encrypt a plaintext with a PublicKey (or EvaluationKeys) or a SecretKey (symmetric, smaller noise).
    ``key``: a ChaChaKey used once (default: fresh from os.urandom)."""
    _check_pt(pt, None, "encrypt")
    params = pt.params
    key = crandom.seed_key() if key is None else key
    if isinstance(key_material, EvaluationKeys):
        _same_params(key_material.params, params, "encrypt")
        key_material = key_material.public
    plan, consts, rounding = _lift_tables(params.n, params.q, params.t, math.prod(params.q) // params.t,
                                          params.kernels)
    coeffs = jnp.asarray(pt.coeffs, dtype=jnp.uint32)
    m = rlwe.Message(_scaled, (coeffs, plan, consts, rounding), params.q, params.n, coeffs.shape[:-1])
    if isinstance(key_material, PublicKey):
        if (key_material.n, key_material.q) != (params.n, params.q + params.p):
            raise BasisMismatchError("the public key is not for these parameters (its moduli differ from Q ∪ P)")
        c0, c1 = rlwe.encrypt_pk(key_material, m, key, p=params.p, kernels=params.kernels)
    elif isinstance(key_material, SecretKey):
        _check_sk(key_material, params)
        c0, c1 = rlwe.encrypt_sk(key_material, m, key, kernels=params.kernels)
    else:
        raise TypeError(f"encrypt takes a PublicKey, EvaluationKeys or SecretKey, got {type(key_material).__name__}")
    return Ciphertext(c0, c1, params, key_material.key_id)


def encrypt_extended(key_material, params: Params, m, *, key: crandom.ChaChaKey | None = None):
    """An encryption of m (uint32 [..., N] in [0, t)) over Q ∪ P: (c0, c1) EVAL RNSPoly over q + p with
    c0 + c1 s = floor(QP / t) m + e (mod QP). Dividing a product with such a ciphertext by P (ModDown)
    divides its noise by P too (CHAM §III-A, stage 4). Public key: (v b + e0, v a + e1) + (Delta' m, 0),
    noise below (2N + 1) B; secret key: (-a s + e, a) + (Delta' m, 0)."""
    key = crandom.seed_key() if key is None else key
    if isinstance(key_material, EvaluationKeys):
        _same_params(key_material.params, params, "encrypt_extended")
        key_material = key_material.public
    moduli = params.q + params.p
    msg = scaled_message(params, m, moduli)
    batch = msg.data.shape[:-2]
    plan = NTTPlan.create(params.n, moduli, params.kernels)
    if isinstance(key_material, PublicKey):
        if key_material.q != moduli:
            raise BasisMismatchError("the public key is not for these parameters (its moduli differ from Q ∪ P)")
        kv, k0, k1 = crandom.split(key, 3)
        v = sample_ternary(kv, moduli, params.n, domain=Domain.EVAL, batch=batch, plan=plan)
        e0 = sample_gaussian(k0, moduli, params.n, key_material.sigma, domain=Domain.EVAL, batch=batch, plan=plan)
        e1 = sample_gaussian(k1, moduli, params.n, key_material.sigma, domain=Domain.EVAL, batch=batch, plan=plan)
        c0, c1 = _k_pk_extended(key_material.b, key_material.a, v, e0, e1, msg)
    elif isinstance(key_material, SecretKey):
        if (key_material.q, key_material.p) != (params.q, params.p):
            raise BasisMismatchError("the secret key is not for these parameters")
        ka, ke = crandom.split(key)
        a = sample_uniform(ka, moduli, params.n, domain=Domain.EVAL, batch=batch)
        e = sample_gaussian(ke, moduli, params.n, SIGMA, domain=Domain.EVAL, batch=batch, plan=plan)
        c0, c1 = _k_sk_extended(a, e, key_material.poly, msg), a
    else:
        raise TypeError(f"encrypt takes a PublicKey, EvaluationKeys or SecretKey, got {type(key_material).__name__}")
    return c0, c1


@partial(jit, persist=True)
def _k_pk_extended(b, a, v, e0, e1, m):
    return poly.add(poly.add(poly.mul(v, b), e0), m), poly.add(poly.mul(v, a), e1)


@partial(jit, persist=True)
def _k_sk_extended(a, e, s, m):
    return poly.add(poly.sub(e, poly.mul(a, s)), m)


@plan_cache(maxsize=64, on_device=True)
def _coeff_tables(n: int, moduli: tuple[int, ...], t: int):
    q = np.array(moduli, dtype=np.uint32).reshape(-1, 1)
    w = np.array([t % m for m in moduli], dtype=np.uint32).reshape(-1, 1)
    return NTTPlan.create(n, moduli), (q, w, shoup_precompute(w, q.astype(np.uint64)))


@partial(jit, persist=True)
def _k_phase_coeffs(c0, c1, s, plan: NTTPlan, consts):
    """(phase, t * phase) in the coefficient domain: uint32 [..., limbs, N] each."""
    q, w, ws = consts
    ph = intt(add_mod(c0, barrett_mul(c1, s.data, *_barrett(s.basis)), q), plan)
    return ph, shoup_mul(ph, w, ws, q)


def _barrett(moduli: tuple[int, ...]):
    t = ModulusTable.create(moduli)
    return t.q, t.barrett_mu, t.bits


def _phase_fractions(sk: SecretKey, c0: RNSPoly, c1: RNSPoly, t: int):
    """(x / Q, [t x]_Q / Q) as float64 [..., N] for the phase x = c0 + c1 s, centered."""
    moduli = c0.basis
    if c1.basis != moduli or c0.domain != Domain.EVAL or c1.domain != Domain.EVAL:
        raise BasisMismatchError("ciphertext parts must share one basis and be in the EVAL domain")
    plan, consts = _coeff_tables(c0.n, moduli, t)
    ph, tph = _k_phase_coeffs(c0.data, c1.data, sk.residues(moduli), plan, consts)
    basis = RNSBasis(moduli)
    return centered_fraction(ph, basis), centered_fraction(tph, basis)


def _check_sk(sk: SecretKey, params: Params) -> None:
    if not isinstance(sk, SecretKey):
        raise TypeError(f"expected a SecretKey, got {type(sk).__name__}")
    if (sk.n, sk.q, sk.p) != (params.n, params.q, params.p):
        raise BasisMismatchError("the secret key is not for this ciphertext's parameters")


def _decoding(params: Params, encoding) -> Encoding:
    """The encoding a decryption is read with: BATCH by default when t allows it, else COEFF."""
    if encoding is None:
        return Encoding.BATCH if params.batching else Encoding.COEFF
    encoding = Encoding(encoding)
    if encoding == Encoding.BATCH and not params.batching:
        raise ParameterError(f"batch decoding needs t prime with t = 1 (mod 2N); t = {params.t} is not: use 'coeff'")
    return encoding


def decrypt(sk: SecretKey, ct: Ciphertext, *, encoding: Encoding | str | None = None) -> Plaintext:
    """m = round(t [c0 + c1 s]_Q / Q) mod t, as a Plaintext (``encoding`` says how to decode it; default BATCH
    when t allows batching, else COEFF). The result is only meaningful while :func:`noise_budget` is
    positive (see :func:`decrypt_checked`)."""
    _check_ct(ct)
    _check_sk(sk, ct.params)
    check_key_ids("decrypt", sk.key_id, ct.key_id)
    encoding = _decoding(ct.params, encoding)
    t = ct.params.t
    frac, _ = _phase_fractions(sk, ct.c0, ct.c1, t)
    m = np.mod(np.rint(frac * t).astype(np.int64), t).astype(np.uint32)
    return Plaintext(jnp.asarray(m), ct.params, encoding)


def noise_budget(sk: SecretKey, ct: Ciphertext) -> int:
    """The invariant noise budget in bits, as SEAL reports it: max(0, bits(Q) - bits(||[t (c0 + c1 s)]_Q||) - 1),
    the norm taken over all coefficients (and batch items: the smallest budget). 0 means decryption may
    be wrong."""
    _check_ct(ct)
    _check_sk(sk, ct.params)
    check_key_ids("noise_budget", sk.key_id, ct.key_id)
    _, tfrac = _phase_fractions(sk, ct.c0, ct.c1, ct.params.t)
    return _budget_bits(float(np.max(np.abs(tfrac))), ct.params.big_q)


def _budget_bits(frac_max: float, big_q: int) -> int:
    if frac_max == 0.0:
        return big_q.bit_length() - 1
    norm_bits = math.floor(math.log2(frac_max) + math.log2(big_q)) + 1  # bits of the integer norm
    return max(0, big_q.bit_length() - norm_bits - 1)


def decrypt_checked(sk: SecretKey, ct: Ciphertext, *, encoding: Encoding | str | None = None) -> Plaintext:
    """:func:`decrypt`, refusing (ParameterError) when the noise budget is exhausted."""
    budget = noise_budget(sk, ct)
    if budget <= 0:
        raise ParameterError(
            "the noise budget of this ciphertext is exhausted (0 bits): decryption would be wrong. "
            "Use parameters with a larger Q / t or fewer operations"
        )
    return decrypt(sk, ct, encoding=encoding)


# --------------------------------------------------------------------------------------------------
# Linear operations
# --------------------------------------------------------------------------------------------------


def _check_ct(ct) -> Ciphertext:
    if not isinstance(ct, Ciphertext):
        raise TypeError(f"expected a bfv.Ciphertext, got {type(ct).__name__}")
    return ct


def _pair(a: Ciphertext, b: Ciphertext, what: str) -> Params:
    _check_ct(a)
    _check_ct(b)
    _same_params(a.params, b.params, what)
    check_key_ids(what, a.key_id, b.key_id)
    return a.params


def _add_message(a: Ciphertext, m, *, subtract: bool):
    params = a.params
    plan, consts, rounding = _lift_tables(params.n, params.q, params.t, math.prod(params.q) // params.t,
                                          params.kernels)
    return _k_add_message(a.c0, a.c1, jnp.asarray(m, dtype=jnp.uint32), plan, consts, rounding, subtract=subtract)


def _like(a: Ciphertext, c0: RNSPoly, c1: RNSPoly) -> Ciphertext:
    """A ciphertext with a's parameters and key id."""
    return Ciphertext(c0, c1, a.params, a.key_id)


def add(a: Ciphertext, b: Ciphertext) -> Ciphertext:
    _pair(a, b, "add")
    return _like(a, *ev.add(a.c0, a.c1, b.c0, b.c1))


def sub(a: Ciphertext, b: Ciphertext) -> Ciphertext:
    _pair(a, b, "sub")
    return _like(a, *ev.sub(a.c0, a.c1, b.c0, b.c1))


def negate(a: Ciphertext) -> Ciphertext:
    _check_ct(a)
    return _like(a, *ev.negate(a.c0, a.c1))


def add_plain(a: Ciphertext, pt: Plaintext) -> Ciphertext:
    """a + m: Delta m added to c0."""
    _check_ct(a)
    _check_pt(pt, a.params, "add_plain")
    return _like(a, *_add_message(a, pt.coeffs, subtract=False))


def sub_plain(a: Ciphertext, pt: Plaintext) -> Ciphertext:
    _check_ct(a)
    _check_pt(pt, a.params, "sub_plain")
    return _like(a, *_add_message(a, pt.coeffs, subtract=True))


def mul_plain(a: Ciphertext, pt: Plaintext) -> Ciphertext:
    """a * m (the ring product with the centered lift of m: noise times at most N t / 2)."""
    _check_ct(a)
    _check_pt(pt, a.params, "mul_plain")
    params = a.params
    plan, consts, _ = _lift_tables(params.n, params.q, params.t, 1, params.kernels)
    return _like(a, *_k_mul_message(a.c0, a.c1, jnp.asarray(pt.coeffs, dtype=jnp.uint32), plan, consts,
                                    ev.word(params.t)))


def mul_scalar(a: Ciphertext, c: int) -> Ciphertext:
    """a * c for an integer c, taken mod t and centered (noise times |c mod t| <= t / 2)."""
    _check_ct(a)
    if isinstance(c, bool) or not isinstance(c, (int, np.integer)):
        raise TypeError(f"mul_scalar takes an integer, got {type(c).__name__}")
    t = a.params.t
    c = int(c) % t
    c = c - t if c > t // 2 else c
    return _like(a, *ev.mul_integer(a.c0, a.c1, *ev.integer_words(c, a.c0.basis)))


def add_scalar(a: Ciphertext, c: int) -> Ciphertext:
    """a + c in every slot (BATCH: a constant polynomial is constant in every slot) or in coefficient 0."""
    _check_ct(a)
    if isinstance(c, bool) or not isinstance(c, (int, np.integer)):
        raise TypeError(f"add_scalar takes an integer, got {type(c).__name__}")
    t = a.params.t
    m = np.zeros(a.params.n, dtype=np.uint32)
    m[0] = int(c) % t
    return add_plain(a, Plaintext(m, a.params, Encoding.COEFF))


# --------------------------------------------------------------------------------------------------
# Multiplication (HPS)
# --------------------------------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclass(frozen=True, eq=False)
class MulPlan:
    """Tables of the HPS product for one parameter set (a pytree passed to the kernel as an argument).

    ``up``: exact conversion Q -> R; ``ntt_q``, ``ntt_r``, ``ntt_rq``: NTT plans over Q, R and R ∪ Q (R's
    limbs first); ``rq``: (q, barrett_mu, bits) of R ∪ Q; ``t_rq``: t mod each modulus of R ∪ Q and its Shoup
    companion; ``down``: ModDown of R ∪ Q by Q into R (exact rounding); ``back``: exact conversion R -> Q.
    """

    up: BasisConversion
    ntt_q: NTTPlan
    ntt_r: NTTPlan
    ntt_rq: NTTPlan
    rq: tuple
    t_rq: tuple
    down: ModDownPlan
    back: BasisConversion


@plan_cache(maxsize=16, on_device=True)
def mul_plan(params: Params) -> MulPlan:
    """The cached :class:`MulPlan` of ``params``."""
    q, r = RNSBasis(params.q), RNSBasis(params.mult_primes)
    rq = r.moduli + q.moduli
    qcol = np.array(rq, dtype=np.uint32).reshape(-1, 1)
    tw = np.array([params.t % m for m in rq], dtype=np.uint32).reshape(-1, 1)
    kern = params.kernels
    return MulPlan(
        up=BasisConversion.create(q, r, exact=True, kernels=kern),
        ntt_q=NTTPlan.create(params.n, q.moduli, kern),
        ntt_r=NTTPlan.create(params.n, r.moduli, kern),
        ntt_rq=NTTPlan.create(params.n, rq, kern),
        rq=_barrett(rq),
        t_rq=(qcol, tw, shoup_precompute(tw, qcol.astype(np.uint64))),
        down=ModDownPlan.create(r, q, exact=True, kernels=kern),
        back=BasisConversion.create(r, q, exact=True, kernels=kern),
    )


def _extend(x, plan: MulPlan):
    """EVAL words over Q [..., k, N] -> EVAL words over R ∪ Q [..., r + k, N] (exact, centered lift)."""
    xr = fast_basis_conversion(intt(x, plan.ntt_q), plan.up)
    xr = ntt(fusion_barrier(xr, plan.ntt_r.w), plan.ntt_r)
    return jnp.concatenate([xr, x], axis=-2)


def _tensor_scale(a0, a1, b0, b1, plan: MulPlan):
    """round(t (a x b) / Q) over Q, coefficient domain: uint32 [..., 3, k, N] (d0, d1, d2)."""
    q, mu, bits = plan.rq
    x = _extend(jnp.stack([a0, a1, b0, b1], axis=-3), plan)
    x0, x1, y0, y1 = (x[..., i, :, :] for i in range(4))
    d1 = add_mod(barrett_mul(x0, y1, q, mu, bits), barrett_mul(x1, y0, q, mu, bits), q)
    d = jnp.stack([barrett_mul(x0, y0, q, mu, bits), d1, barrett_mul(x1, y1, q, mu, bits)], axis=-3)
    tq, tw, tws = plan.t_rq
    dc = shoup_mul(intt(d, plan.ntt_rq), tw, tws, tq)  # t * tensor, coefficients over R ∪ Q
    return fast_basis_conversion(mod_down(dc, plan.down), plan.back)


def tensor_traced(a0: RNSPoly, a1: RNSPoly, b0: RNSPoly, b1: RNSPoly, plan: MulPlan):
    """The HPS product of two ciphertexts over Q before relinearization; traceable (``plan``: :func:`mul_plan`).

    Returns (d0, d1, d2), RNSPoly ``[..., L, N]`` over Q (d0, d1 EVAL; d2 COEFF, the domain the key switch reads
    without a transform), with d_i = round(t D_i / Q) for the integer tensor (D0, D1, D2) of the centered operands:
    a degree-2 ciphertext of the product, decrypting under (1, s, s^2). The sum of such ciphertexts (word by word
    mod Q) is a degree-2 ciphertext of the sum of the products, with the sum of their noises, so a sum of products
    can be relinearized once (:func:`crossfhe.core.evaluator.relinearize_traced`); the rounding is done per
    product, where R leaves room for one tensor (``Params.mult_primes``)."""
    d = _tensor_scale(a0.data, a1.data, b0.data, b1.data, plan)  # coefficient words [..., 3, k, N]
    moduli = a0.basis
    e = ntt(d[..., :2, :, :], plan.ntt_q)
    return (RNSPoly(e[..., 0, :, :], moduli, Domain.EVAL), RNSPoly(e[..., 1, :, :], moduli, Domain.EVAL),
            RNSPoly(d[..., 2, :, :], moduli, Domain.COEFF))


def mul_traced(a0: RNSPoly, a1: RNSPoly, b0: RNSPoly, b1: RNSPoly, plan: MulPlan, rlk, ks_plan):
    """:func:`mul` on the ciphertexts' polynomials (EVAL over Q), traceable: :func:`tensor_traced`, then the key
    switch of d2 with the relinearization key ``rlk`` (``ks_plan``: ``keyswitch_plan`` of the ring). (c0, c1), EVAL."""
    return ev.relinearize_traced(*tensor_traced(a0, a1, b0, b1, plan), rlk, ks_plan)


@jit
def _k_mul(a0, a1, b0, b1, plan: MulPlan, rlk, ks_plan):
    """The HPS tensor scaled by t / Q, then relinearized: one program. (d0, d1) + keyswitch(d2), EVAL."""
    moduli = ks_plan.q
    a0, a1, b0, b1 = (RNSPoly(x, moduli, Domain.EVAL) for x in (a0, a1, b0, b1))
    return mul_traced(a0, a1, b0, b1, plan, rlk, ks_plan)


def mul(a: Ciphertext, b: Ciphertext, keys: EvaluationKeys) -> Ciphertext:
    """a * b with relinearization (HPS product, module docstring; key switching with the relinearization
    key of ``keys``). Noise: about N t (v_a + v_b) plus small terms."""
    params = _pair(a, b, "mul")
    _same_params(keys.params, params, "mul")
    check_key_ids("mul", a.key_id, keys.key_id)
    rlk = keys.relin_key()
    plan = mul_plan(params)
    ks_plan = ks.keyswitch_plan(rlk, kernels=params.kernels)
    return _like(a, *_k_mul(a.c0.data, a.c1.data, b.c0.data, b.c1.data, plan, rlk, ks_plan))


def square(a: Ciphertext, keys: EvaluationKeys) -> Ciphertext:
    return mul(a, a, keys)


# --------------------------------------------------------------------------------------------------
# Rotations
# --------------------------------------------------------------------------------------------------


def apply_galois(a: Ciphertext, element: int, keys: EvaluationKeys) -> Ciphertext:
    """The automorphism X -> X^element (odd), switched back to s with the Galois key for it."""
    _check_ct(a)
    _same_params(a.params, keys.params, "apply_galois")
    check_key_ids("apply_galois", a.key_id, keys.key_id)
    element = int(element) % (2 * a.params.n)
    gk = keys.galois_key(element)
    plan = ks.keyswitch_plan(gk, kernels=a.params.kernels)
    return _like(a, *ev.galois(a.c0, a.c1, gk, plan, ev.word(element)))


def rotate_rows(a: Ciphertext, k: int, keys: EvaluationKeys) -> Ciphertext:
    """Both slot rows rotated left by k (slot j of a row holds slot j + k). Needs the key for k."""
    _check_ct(a)
    if int(k) % (a.params.n // 2) == 0:
        return a
    return apply_galois(a, rotation_element(a.params, k), keys)


def swap_rows(a: Ciphertext, keys: EvaluationKeys) -> Ciphertext:
    """The two slot rows exchanged (X -> X^(2N - 1)). Needs the row-swap key."""
    return apply_galois(a, row_swap_element(_check_ct(a).params), keys)


__all__ = [
    "MulPlan",
    "add",
    "add_plain",
    "add_scalar",
    "apply_galois",
    "decode",
    "decrypt",
    "decrypt_checked",
    "encode",
    "encrypt",
    "encrypt_extended",
    "gen_galois_keys",
    "keygen",
    "lifted_plaintext",
    "mul_plain",
    "mul_plan",
    "mul_scalar",
    "mul",
    "mul_traced",
    "negate",
    "noise_budget",
    "rotate_rows",
    "rotation_element",
    "row_swap_element",
    "scaled_message",
    "square",
    "sub",
    "sub_plain",
    "swap_rows",
    "tensor_traced",
]
