"""Matrix-vector Beaver triples for two-party computation over Z_t, generated with HMVP (CHAM §V-B4).

Delphi-style preprocessing (Mishra et al., "Delphi: a cryptographic inference service for neural
networks", USENIX Security 2020, §4) between a client A, who holds her own BFV keys, and a server B, who
holds a matrix W (m x n, entries in [0, t)):

1. A samples r uniform in Z_t^n (ChaCha20, :mod:`crossfhe.math.random`), encrypts it as an HMVP vector
   under her key (:func:`crossfhe.linalg.hmvp.encrypt_vector`) and sends Enc(r) to B, together with her
   public evaluation keys (the public key and the packing Galois keys, once).
2. B samples s uniform in Z_t^m (his own ChaCha20 stream), computes Enc(W r) = HMVP(W, Enc(r)) (CHAM
   Alg. 1), adds -s as a plaintext at the coefficients that hold the rows (:func:`add_plain_result`: round(Q
   (-s) / t), at most 1/2 of noise), adds a fresh public-key encryption of zero under A's key
   (:func:`rerandomize_result`) and returns the result.
3. A decrypts z = W r - s (mod t).

A holds (r, z), B holds (W, s), and z + s = W r (mod t): one triple per matrix-vector product of the online
phase (A sends x - r, B computes W (x - r) + s, A keeps z; the two are additive shares of W x).

**Shared input (CHAM §II-F).** A holds a share x_A of a vector, B the other share x_B and W. A sends
Enc(x_A); B adds x_B to the encrypted vector as a plaintext (:func:`add_plain_vector`: Delta' x_B over
Q ∪ P added to c0 of each column block; the carry past t costs less than t of noise over Q ∪ P, divided by
P in the HMVP's rescale), so the HMVP itself combines the shares as the paper describes, then masks and
re-randomizes as above: A obtains W (x_A + x_B) - s, B keeps s (:func:`shared_matvec`). Adding x_B before
the product rather than adding W x_B to the result costs one NTT per column block instead of an m x n
plaintext product, and keeps a single code path.

**Security model.** Semi-honest (honest-but-curious) parties, as in CHAM §II-F: both follow the protocol.

* B sees only ciphertexts under A's key and A's public keys: IND-CPA (RLWE) hides r and x_A from him, at
  the security level of the parameters (``insecure`` test sets give none).
* A sees z = W r - s with s uniform and secret: the value itself is a one-time pad of W r. Re-randomizing
  with a fresh encryption of zero makes the result's c1 a fresh uniform-looking polynomial, so it no longer
  reveals how it was computed from Enc(r).
* **No noise flooding is applied.** The phase of the returned ciphertext is Delta (W r - s) + e with
  e = e_hmvp + e_fresh, and A, who holds the secret key, learns e exactly when she decrypts. e_hmvp is the
  dot products' noise (sum_j W_ij e_j divided by P), the rounding terms of the rescale and the packing's
  key-switch errors: it depends on W, so the result is **not circuit private** and may leak information
  about W to A. Circuit privacy would need noise flooding: B adds, before returning, an encryption of zero
  whose noise is uniform in [-F, F] with F >= 2^lambda max|e_hmvp| (statistical distance about 2^-lambda,
  e.g. lambda = 40). That costs lambda bits of noise budget: the HMVP must leave more than lambda bits,
  which needs a larger Q (or a smaller t) than CHAM's N 4096 set (:data:`crossfhe.apps.hetero_lr.LR_N8192`
  leaves 72 bits after a HeteroLR step, whose matrix entries are small).
* Malicious behaviour (a wrong W, a malformed Enc(r)) is not detected.

Transport: the parties exchange objects in one process. The result (bfv Ciphertexts) and the evaluation
keys can be sent as bytes with :mod:`crossfhe.io.bfv` (the tests do); the encrypted vector is over
Q ∪ P, which :mod:`crossfhe.io.bfv` has no kind for yet, so it is passed as an object.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from crossfhe.bfv import ops as bfv
from crossfhe.bfv.ciphertext import Encoding, EvaluationKeys
from crossfhe.bfv.encoder import check_values
from crossfhe.bfv.params import Params
from crossfhe.errors import ParameterError
from crossfhe.linalg import hmvp
from crossfhe.linalg.hmvp import CoefficientVector, HMVPResult
from crossfhe.math import random as crandom
from crossfhe.ring import poly

# --------------------------------------------------------------------------------------------------
# Plaintext operations on HMVP messages
# --------------------------------------------------------------------------------------------------


def add_plain_vector(vec: CoefficientVector, x) -> CoefficientVector:
    """Enc(v) -> Enc(v + x mod t) for an HMVP vector: round(QP x / t) (``bfv.ops.scaled_message``) added to
    c0 of each column block over Q ∪ P. x: ``vec.length`` integers in [0, t). No fresh noise; where v + x
    passes t the phase is off by -(QP mod t), less than t, a rounding term of the kind
    :func:`crossfhe.linalg.hmvp.hmvp` already carries and divides by P in its rescale."""
    if not isinstance(vec, CoefficientVector):
        raise TypeError(f"add_plain_vector takes a CoefficientVector (hmvp.encrypt_vector), got {type(vec).__name__}")
    params = vec.params
    x = check_values(x, params.t, "add_plain_vector")
    if x.shape != (vec.length,):
        raise ParameterError(f"add_plain_vector: shape mismatch: the vector has {vec.length} entries, x has {x.shape}")
    msg = bfv.scaled_message(params, hmvp.vector_blocks(params, x, vec.rows_per_product), params.q + params.p)
    return CoefficientVector(poly.add(vec.c0, msg), vec.c1, params, vec.length, vec.key_id, vec.rows_per_product)


def result_plaintexts(res: HMVPResult, u) -> tuple:
    """Coefficient-encoded plaintexts laying out u (``res.length`` integers in [0, t)) as ``res`` lays out its
    rows: ciphertext k holds row k N + i at coefficient ``res.positions[k][i]``, every other coefficient 0."""
    if not isinstance(res, HMVPResult):
        raise TypeError(f"expected an HMVPResult (hmvp.hmvp), got {type(res).__name__}")
    params = res.ciphertexts[0].params
    u = check_values(u, params.t, "result_plaintexts")
    if u.shape != (res.length,):
        raise ParameterError(f"shape mismatch: the result has {res.length} rows, the plaintext {u.shape}")
    out = []
    for k, pos in enumerate(res.positions):
        coeffs = np.zeros(params.n, dtype=np.uint32)
        coeffs[pos] = u[k * params.n : k * params.n + pos.size]
        out.append(bfv.encode(params, coeffs, encoding=Encoding.COEFF))
    return tuple(out)


def add_plain_result(res: HMVPResult, u) -> HMVPResult:
    """Enc(A v) -> Enc(A v + u mod t), u: ``res.length`` integers in [0, t) laid out as the rows
    (:func:`result_plaintexts`) and added as round(Q u / t) (``bfv.ops.add_plain``): at most 1/2 of noise."""
    cts = tuple(bfv.add_plain(ct, pt) for ct, pt in zip(res.ciphertexts, result_plaintexts(res, u)))
    return HMVPResult(cts, res.positions, res.length)


def rerandomize_result(res: HMVPResult, keys: EvaluationKeys, *, key: crandom.ChaChaKey | None = None) -> HMVPResult:
    """Each ciphertext of ``res`` plus a fresh public-key encryption of zero under ``keys``: the same message,
    fresh-looking c1; the noise grows by that of a fresh encryption. Not noise flooding (module docstring).
    ``key``: a ChaChaKey used once (default: fresh from os.urandom)."""
    if not isinstance(res, HMVPResult):
        raise TypeError(f"expected an HMVPResult (hmvp.hmvp), got {type(res).__name__}")
    params = keys.params
    keys_each = crandom.split(crandom.seed_key() if key is None else key, len(res.ciphertexts))
    zero = bfv.encode(params, np.zeros(params.n, dtype=np.uint32), encoding=Encoding.COEFF)
    cts = tuple(bfv.add(ct, bfv.encrypt(keys, zero, key=keys_each[i])) for i, ct in enumerate(res.ciphertexts))
    return HMVPResult(cts, res.positions, res.length)


def child_seed(rng: crandom.Rng) -> bytes:
    """32 bytes from a fresh key of ``rng``: a seed for another consumer (e.g. ``bfv.ops.keygen``) that never
    repeats ``rng``'s own stream."""
    return np.asarray(crandom.random_bits(rng.next_key(), 8)).astype("<u4").tobytes()


def uniform_vector(rng: crandom.Rng, size: int, t: int) -> np.ndarray:
    """int64 [size] uniform in [0, t) from a fresh ChaCha20 key of ``rng``
    (:func:`crossfhe.math.random.uniform_mod`)."""
    return np.asarray(crandom.uniform_mod(rng.next_key(), (int(size),), t)).astype(np.int64)


# --------------------------------------------------------------------------------------------------
# Parties
# --------------------------------------------------------------------------------------------------


class Client:
    """Party A: holds her BFV secret key (private) and publishes :attr:`keys` (public key and the packing
    Galois keys HMVP needs). Never sees W or s.

    params: BFV parameters (coefficient encoding; any t). seed: 32 bytes for reproducible keys and
    randomness (tests only); default os.urandom.
    """

    def __init__(self, params: Params, *, seed: bytes | None = None):
        if not isinstance(params, Params):
            raise TypeError(f"Client takes bfv.Params, got {type(params).__name__}")
        self.params = params
        self._rng = crandom.Rng(seed)
        self._sk, self.keys = bfv.keygen(
            params,
            galois_elements=hmvp.required_galois_elements(params),
            relin=False,
            seed=None if seed is None else child_seed(self._rng),
        )

    def random_vector(self, n: int) -> np.ndarray:
        """r uniform in Z_t^n (int64), from A's ChaCha20 stream."""
        if n < 1:
            raise ParameterError(f"the vector must have at least one entry, got n = {n}")
        return uniform_vector(self._rng, n, self.params.t)

    def encrypt(self, v) -> CoefficientVector:
        """Enc(v) as an HMVP vector under A's public key (the message sent to B)."""
        return hmvp.encrypt_vector(self.keys, self.params, v, key=self._rng.next_key())

    def decrypt(self, reply: HMVPResult) -> np.ndarray:
        """The reply's values, int64 [m] in [0, t)."""
        return hmvp.decrypt_result(self._sk, reply)

    def noise_budget(self, reply: HMVPResult) -> int:
        """The smallest noise budget (bits) of the reply's ciphertexts, measured with A's secret key."""
        return hmvp.noise_budget(self._sk, reply)

    def __repr__(self) -> str:
        return f"beaver.Client({self.params!r})"


class Server:
    """Party B: holds W (m x n, entries in [0, t); private) and A's public :class:`EvaluationKeys`. Never
    sees A's secret key, r or x_A.

    seed: 32 bytes for reproducible masks (tests only); default os.urandom.
    """

    def __init__(self, params: Params, weights, client_keys: EvaluationKeys, *, seed: bytes | None = None):
        if not isinstance(client_keys, EvaluationKeys):
            raise TypeError(f"Server takes the client's EvaluationKeys, got {type(client_keys).__name__}")
        if client_keys.params != params:
            raise ParameterError("Server: the client's keys are for other parameters")
        self.params = params
        self.client_keys = client_keys
        self._matrix = hmvp.encode_matrix(params, weights)
        self._rng = crandom.Rng(seed)

    @property
    def shape(self) -> tuple[int, int]:
        """(m, n): the shape of W (public: A must know n to send a vector)."""
        return self._matrix.shape

    def respond(self, query: CoefficientVector, *, share=None) -> tuple[np.ndarray, HMVPResult]:
        """(s, Enc(W (v + share) - s)) for the query Enc(v): s uniform in Z_t^m (kept by B, int64), the reply
        masked and re-randomized under A's key. ``share``: B's share x_B of the vector (n integers in
        [0, t)), added before the product (:func:`add_plain_vector`); None for a triple (share 0)."""
        if not isinstance(query, CoefficientVector):
            raise TypeError(f"respond takes a CoefficientVector, got {type(query).__name__}")
        m, n = self.shape
        if query.length != n:
            raise ParameterError(f"shape mismatch: W has {n} columns, the query {query.length} entries")
        if share is not None:
            query = add_plain_vector(query, share)
        prod = hmvp.hmvp(self._matrix, query, self.client_keys)
        s = uniform_vector(self._rng, m, self.params.t)
        masked = add_plain_result(prod, (-s) % self.params.t)
        return s, rerandomize_result(masked, self.client_keys, key=self._rng.next_key())

    def __repr__(self) -> str:
        return f"beaver.Server(shape={self.shape}, {self.params!r})"


# --------------------------------------------------------------------------------------------------
# Protocols
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClientTriple:
    """A's part of a matrix-vector triple: r (int64 [n]) and z = W r - s (int64 [m]), both in [0, t)."""

    r: np.ndarray
    z: np.ndarray


@dataclass(frozen=True)
class ServerTriple:
    """B's part of a matrix-vector triple: the mask s (int64 [m] in [0, t)); W is B's own matrix."""

    s: np.ndarray


def generate_triples(
    client: Client, server: Server, count: int
) -> tuple[tuple[ClientTriple, ...], tuple[ServerTriple, ...]]:
    """``count`` triples for B's matrix W (module docstring, steps 1-3): A's parts and B's parts, with
    z + s = W r (mod t) for each. One encryption, one HMVP and one decryption per triple.

    Both parties run in this process; the function returns what each of them keeps."""
    if client.params != server.params:
        raise ParameterError("generate_triples: the client and the server use different parameters")
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 1:
        raise ParameterError(f"count must be a positive integer, got {count!r}")
    _, n = server.shape
    ours, theirs = [], []
    for _ in range(int(count)):
        r = client.random_vector(n)
        s, reply = server.respond(client.encrypt(r))
        ours.append(ClientTriple(r, client.decrypt(reply)))
        theirs.append(ServerTriple(s))
    return tuple(ours), tuple(theirs)


def shared_matvec(client: Client, server: Server, x_a, x_b) -> tuple[np.ndarray, np.ndarray]:
    """Additive shares of W (x_A + x_B) mod t (CHAM §II-F): A sends Enc(x_A), B adds x_B and multiplies by W,
    masks with s and returns; A gets y_A = W (x_A + x_B) - s, B keeps y_B = s. Returns (y_A, y_B), int64 [m]
    in [0, t), y_A + y_B = W (x_A + x_B) (mod t)."""
    if client.params != server.params:
        raise ParameterError("shared_matvec: the client and the server use different parameters")
    _, n = server.shape
    for name, x in (("x_a", x_a), ("x_b", x_b)):
        if np.shape(x) != (n,):
            raise ParameterError(f"shared_matvec: shape mismatch: W has {n} columns, {name} has shape {np.shape(x)}")
    s, reply = server.respond(client.encrypt(x_a), share=x_b)
    return client.decrypt(reply), s


def check_triple(weights, client_part: ClientTriple, server_part: ServerTriple, t: int) -> bool:
    """Whether z + s = W r (mod t), computed exactly (Python integers). For tests and audits: needs both
    parts and W, which no single party holds."""
    want = hmvp.matvec_reference(weights, client_part.r, t)
    got = (np.asarray(client_part.z, dtype=object) + np.asarray(server_part.s, dtype=object)) % t
    return bool(np.array_equal(np.asarray(got, dtype=np.int64), want))


__all__ = [
    "Client",
    "ClientTriple",
    "Server",
    "ServerTriple",
    "add_plain_result",
    "add_plain_vector",
    "check_triple",
    "child_seed",
    "generate_triples",
    "rerandomize_result",
    "result_plaintexts",
    "shared_matvec",
    "uniform_vector",
]
