"""The GPU kernel set's NTT (crossfhe/kernels/gpu_ntt.cu, a CUDA custom call): on a CPU, the CUDA source's kernels
and launch schedule run through their CPU emulation (one thread per block) and must give the radix-2 kernels' words;
on a CUDA device, the custom call itself, eagerly and under jit and vmap (whole schemes on the GPU set against VECTOR:
tests/test_kernel_sets.py). The kernel set is a value: asking for it where it cannot run raises, in the user's
terms."""

from __future__ import annotations

import dataclasses
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from crossfhe import testing
from crossfhe.errors import ParameterError
from crossfhe.kernels import GPU, as_kernel_set, gpu_native
from crossfhe.math import native
from crossfhe.math.primes import ntt_primes
from crossfhe.ring import ntt as T
from crossfhe.tfhe import ops as tfhe

# the emulation is built with the host's C++ compiler (CI has one): a failed build fails the tests, never skips them
needs_emulation = pytest.mark.skipif(shutil.which(native.cxx_compiler()) is None,
                                     reason=f"no C++ compiler ({native.cxx_compiler()}) for the emulation")
# the custom call itself needs a CUDA device and nvcc: it runs in benchmarks/gpu_session.sh on a lent GPU; on CPUs the
# emulation tests above check the same source
needs_device = pytest.mark.skipif(not gpu_native.available(), reason=f"no GPU kernels here: {gpu_native.status()}")


def _plan(log_n: int, pattern: str, kernels=None) -> T.NTTPlan:
    """Moduli below 2^30 ("n") and in [2^30, 2^31) ("w"), in the order of ``pattern``."""
    n = 1 << log_n
    narrow, wide = iter(ntt_primes(28, n, pattern.count("n"))), iter(ntt_primes(31, n, pattern.count("w")))
    return T.NTTPlan.create(n, [next(narrow) if c == "n" else next(wide) for c in pattern], kernels)


def _inputs(plan: T.NTTPlan, seed: int) -> np.ndarray:
    """[5, limbs, N]: three random polynomials, one of q - 1 everywhere, one alternating q - 1 and 1."""
    rng = np.random.default_rng(seed)
    q = np.asarray(plan.q).astype(np.uint64)
    x = (rng.integers(0, 2**32, (3, plan.limbs, plan.n), dtype=np.uint64) % q).astype(np.uint32)
    top = np.broadcast_to(q - 1, (plan.limbs, plan.n)).astype(np.uint32)
    alt = np.where(np.arange(plan.n) % 2 == 0, top, 1).astype(np.uint32)
    return np.concatenate([x, top[None], alt[None]])


# every path of the schedule: one block per row (2^6 .. 2^12), two passes with Na < Nb (2^13, 2^15, 2^17) and Na = Nb
# (2^14, 2^16)
@needs_emulation
@pytest.mark.parametrize("log_n", [6, 9, 12, 13, 14, 15, 16, 17])
def test_cuda_source_emulated_gives_the_radix2_words(log_n):
    plan, gpu = _plan(log_n, "nwn"), _plan(log_n, "nwn", GPU)
    x = _inputs(plan, log_n)
    forward = np.asarray(T.ntt(jnp.asarray(x), plan))
    for variant in (0, 1):  # 3 and 4 stages per group in registers (the thread counts do not change the schedule)
        np.testing.assert_array_equal(gpu_native.emulate(x, gpu, inverse=False, variant=variant), forward)
        np.testing.assert_array_equal(gpu_native.emulate(forward, gpu, inverse=True, variant=variant), x)
    # the GPU set's plans hold the textbook order (the kernel's loads are consecutive words in every stage), the
    # radix-2 kernels' plans their own arrangement: a plan of the other kind is refused, not misread
    assert np.array_equal(np.asarray(gpu.w)[0, 1:], np.asarray(T._natural_tables(plan.n, plan.moduli[0])[0])[1:])
    with pytest.raises(ValueError, match="GPU-set plan"):
        gpu_native.emulate(x, plan, inverse=False)


@needs_emulation
def test_emulation_reads_shared_table_rows_and_batches():
    # a plan sharing another's rows (ModUp's digits) is expanded first; batch axes fold into the rows
    full = _plan(13, "nnw", GPU)
    gathered = T.NTTPlan.gathered(full, [full.moduli[2], full.moduli[0]])
    rng = np.random.default_rng(3)
    q = np.asarray(gathered.q).astype(np.uint64)
    x = (rng.integers(0, 2**32, (2, 3, 2, full.n), dtype=np.uint64) % q).astype(np.uint32)
    vector = T.NTTPlan.create(full.n, gathered.moduli)
    np.testing.assert_array_equal(gpu_native.emulate(x, gathered, inverse=False),
                                  np.asarray(T.ntt(jnp.asarray(x), vector)))
    with pytest.raises(ValueError, match="does not match"):
        gpu_native.emulate(x[..., :1, :], gathered, inverse=False)


def test_the_gpu_set_is_a_value_and_says_why_it_cannot_run(monkeypatch):
    assert as_kernel_set("gpu") is GPU and GPU.gpu and not GPU.native and not GPU.uses_tables
    params = testing.INSECURE_CKKS_N10.with_kernels(GPU)
    assert params.kernels is GPU and params.digest() == testing.INSECURE_CKKS_N10.digest()
    # without a CUDA compiler the library cannot be had, and the first transform says so (not a silent VECTOR run)
    monkeypatch.setattr(gpu_native, "nvcc", lambda: None)
    monkeypatch.setattr(gpu_native, "_cuda_device", lambda: None)
    native.reset_all()
    try:
        assert not gpu_native.available()
        assert "no CUDA compiler" in gpu_native.status()
        plan = T.NTTPlan.create(1024, ntt_primes(28, 1024, 2), GPU)
        assert plan.kernels is GPU
        with pytest.raises(RuntimeError, match="GPU kernel set's NTT needs the CUDA kernels.*VECTOR"):
            T.ntt(jnp.zeros((2, 1024), jnp.uint32), plan)
    finally:
        native.reset_all()


@needs_device
@pytest.mark.parametrize("log_n", [6, 11, 12, 13, 16, 17])
def test_device_transform_is_exact_eager_jit_and_vmap(log_n):
    vector = _plan(log_n, "nwnn")
    gpu = T.NTTPlan.create(vector.n, vector.moduli, GPU)
    x = jnp.asarray(_inputs(vector, 100 + log_n))
    forward = np.asarray(T.ntt(x, vector))
    np.testing.assert_array_equal(np.asarray(T.ntt(x, gpu)), forward)
    np.testing.assert_array_equal(np.asarray(T.intt(jnp.asarray(forward), gpu)), np.asarray(x))
    jitted = jax.jit(lambda a, p: T.intt(T.ntt(a, p), p))
    np.testing.assert_array_equal(np.asarray(jitted(x, gpu)), np.asarray(x))
    mapped = jax.vmap(lambda a: T.ntt(a, gpu))(x)
    np.testing.assert_array_equal(np.asarray(mapped), forward)
    for variant in range(gpu_native.VARIANTS):
        got = jax.jit(lambda a, p, v=variant: gpu_native.transform(a, p, inverse=False, variant=v))(x, gpu)
        np.testing.assert_array_equal(np.asarray(got), forward)
    lazy = np.asarray(T.ntt_lazy(x, gpu))  # any representative in [0, 2q): the kernel's are in [0, q)
    np.testing.assert_array_equal(lazy, forward)


def test_a_gpu_set_circuit_exports_for_cuda_with_its_kernel(monkeypatch):
    """A circuit on the GPU set lowers for CUDA (here without a device: the kernel's availability check is bypassed,
    its lowering needs no library) with the custom call allowed by export and named in the program; its build id
    is the kernel's ABI, the same wherever it was exported."""
    import crossfhe as fhe

    vector = fhe.compile(lambda x: (x * x).rotate(1) + x, fhe.CKKSVector(8), params=testing.INSECURE_CKKS_N10,
                         cache=False)
    vector.keygen(seed=bytes(32))
    monkeypatch.setattr(gpu_native.GPU, "require", lambda what: None)
    gpu = fhe.compile(lambda x: (x * x).rotate(1) + x, fhe.CKKSVector(8),
                      params=testing.INSECURE_CKKS_N10.with_kernels(GPU), cache=False, keys=vector.keys)
    assert gpu.scheme.custom_calls(gpu.params) == gpu_native.targets() == (gpu_native.TARGET, gpu_native.ROTATE_TARGET)
    assert gpu.scheme.build_id(gpu.params) == f"gpu-abi{gpu_native.ABI_VERSION}"
    leaves, treedef = gpu._runtime(gpu.keys.public)
    text = gpu._lower_exported((), leaves, treedef, "cuda").mlir_module()
    assert gpu_native.TARGET in text


def test_a_gpu_set_tfhe_circuit_exports_for_cuda_with_the_rotation(monkeypatch):
    """A TFHE circuit with a lookup on the GPU set (grouped key bits: its keys are prepared for the one-kernel
    rotation) lowers for CUDA, both custom calls in the program; the keys made on VECTOR serve it (the same key)."""
    import crossfhe as fhe
    from crossfhe.api.specs import TFHEInt

    params = testing.INSECURE_TFHE_P4_G2
    fn = lambda x: (x * 2 + 1).apply(lambda v: (3 * v) % 16)  # noqa: E731
    vector = fhe.compile(fn, TFHEInt(3), params=params, cache=False)
    vector.keygen(seed=bytes(32))
    monkeypatch.setattr(gpu_native.GPU, "require", lambda what: None)
    gpu = fhe.compile(fn, TFHEInt(3), params=params.with_kernels(GPU), cache=False, keys=vector.keys)
    assert gpu.scheme.custom_calls(gpu.params) == gpu_native.targets()
    leaves, treedef = gpu._runtime(gpu.keys.public)
    text = gpu._lower_exported((), leaves, treedef, "cuda").mlir_module()
    assert gpu_native.ROTATE_TARGET in text and gpu_native.TARGET in text


def test_contexts_on_the_gpu_set_refuse_before_any_key_where_it_cannot_run(monkeypatch):
    """CKKS and BFV contexts (every key needs the transform) refuse the GPU set at once where its kernel cannot be had,
    saying why and what to use; nothing is made first."""
    import crossfhe

    monkeypatch.setattr(gpu_native, "_cuda_device", lambda: "no CUDA device (a test)")
    native.reset_all()
    made = []
    monkeypatch.setattr(T.NTTPlan, "create", lambda *a, **k: made.append(a))
    try:
        with pytest.raises(RuntimeError, match=r"CKKSContext.create needs the CUDA kernels.*no CUDA device.*VECTOR"):
            crossfhe.CKKSContext.create(testing.INSECURE_CKKS_N10, kernels="gpu", insecure=True, progress=False)
        with pytest.raises(RuntimeError, match=r"BFVContext.create needs the CUDA kernels.*no CUDA device"):
            crossfhe.BFVContext.create(testing.INSECURE_BFV_N256, kernels=GPU, insecure=True, progress=False)
        assert made == []
    finally:
        native.reset_all()


# --------------------------------------------------------------------------------------------------
# The blind rotation in one kernel (GPUProduct)
# --------------------------------------------------------------------------------------------------


@needs_emulation
def test_the_cuda_source_declares_the_abi_python_loads():
    # a mismatch makes the device build refuse to load (it did once: the source said 1, Python 2)
    assert gpu_native.abi_version_of_source() == gpu_native.ABI_VERSION


def _rotation_case(n, comps, k1, levels, base_log, steps, per, batch, seed):
    from crossfhe.core.blind_rotation import GPUProduct, NTTProduct
    from crossfhe.math.decompose import Gadget, RNSGadgetPlan
    from crossfhe.math.modular import ModulusTable
    from crossfhe.math.rns import RNSBasis

    moduli = tuple(ntt_primes(31, 4096, 2))
    gplan = RNSGadgetPlan.create(RNSBasis(moduli), Gadget(base_log, levels))
    t = ModulusTable.create(moduli)
    ntt_product = NTTProduct(T.NTTPlan.create(n, moduli), gplan, (t.q, t.barrett_mu, t.bits, t.mont_qinv, t.mont_r2))
    rng = np.random.default_rng(seed)
    q = np.asarray(moduli, dtype=np.uint64).reshape(-1, 1)
    acc = (rng.integers(0, 2**62, (batch, comps, k1, len(moduli), n), dtype=np.uint64) % q).astype(np.uint32)
    acc[0, 0, 0] = (q - 1).astype(np.uint32)  # the top residues: digits at the rounding's edge
    keys = (rng.integers(0, 2**62, (steps, per, k1 * levels, k1, len(moduli), n), dtype=np.uint64) % q)
    exps = rng.integers(0, 2 * comps * n, (batch, steps, per)).astype(np.int32)
    exps[0, 0] = 0  # X^0: no rotation; and the largest exponent
    exps[-1, -1, -1] = 2 * comps * n - 1
    return acc, exps, keys.astype(np.uint32), ntt_product, GPUProduct.create(T.NTTPlan.create(n, moduli, GPU), gplan)


# one component (P4's shape at N 2^11, and small rings), the extended accumulator (2 and 4 components: P6's shape),
# two gadget digits, k = 2, and a grouping of 3 key bits (T = 7)
@needs_emulation
@pytest.mark.parametrize("n,comps,k1,levels,base_log,per", [
    (64, 1, 2, 1, 23, 3), (256, 2, 2, 2, 16, 3), (128, 4, 2, 2, 16, 3), (128, 1, 3, 2, 12, 3), (64, 2, 2, 1, 20, 7),
    (2048, 1, 2, 1, 23, 3)])
def test_emulated_blind_rotation_gives_the_group_steps_words(n, comps, k1, levels, base_log, per):
    from crossfhe.core.blind_rotation import blind_rotate

    acc, exps, keys, ntt_product, gpu = _rotation_case(n, comps, k1, levels, base_log, 3 if n < 2048 else 2, per,
                                                       2 if n < 2048 else 1, seed=n + comps)
    want = np.asarray(blind_rotate(jnp.asarray(acc), jnp.asarray(exps), jnp.asarray(keys), ntt_product))
    # one block per accumulator, and (one component) clusters of 2 and 4 blocks sharing its lines
    clusters = [m for m in (1, 2, 4) if gpu_native.cluster_fits(m, 2, k1, comps, levels)]
    assert clusters == ([1, 2, 4] if comps == 1 and k1 == 2 else [1, 2] if comps == 1 else [1])
    for cluster in clusters:
        got = gpu_native.emulate_blind_rotate(acc, exps, keys, gpu.tables(), levels=levels, base_log=base_log,
                                              frac_words=gpu.gplan.frac_words, cluster=cluster)
        np.testing.assert_array_equal(got, want, err_msg=f"cluster {cluster}")


@needs_emulation
def test_emulated_blind_rotation_refuses_what_it_cannot_take():
    acc, exps, keys, _, gpu = _rotation_case(64, 1, 2, 1, 23, 2, 3, 1, seed=5)
    kw = dict(levels=1, base_log=23, frac_words=gpu.gplan.frac_words)
    with pytest.raises(ValueError, match="do not match the accumulator"):
        gpu_native.emulate_blind_rotate(acc, exps[:, :1], keys, gpu.tables(), **kw)
    with pytest.raises(ValueError, match="takes acc"):
        gpu_native.emulate_blind_rotate(acc[0], exps, keys, gpu.tables(), **kw)
    # the custom call's operand types (the emulation converts its NumPy inputs; the device call is checked first)
    with pytest.raises(ValueError, match="int32 exponents: exps is int64"):
        gpu_native._rotation_check(acc, exps.astype(np.int64), keys, gpu.tables(), 1)
    with pytest.raises(ValueError, match="a cluster of 3 blocks cannot share"):
        gpu_native.emulate_blind_rotate(acc, exps, keys, gpu.tables(), cluster=3, **kw)
    two = np.zeros((1, 2, 2, 2, 64), np.uint32)  # two components: one block per accumulator only
    with pytest.raises(ValueError, match="takes one component"):
        gpu_native.emulate_blind_rotate(two, exps, keys, gpu.tables(), cluster=2, **kw)
    big = np.zeros((1, 8, 2, 2, 2048), np.uint32)  # 8 components at N 2^11 (P7): more than a block's shared memory
    with pytest.raises(ValueError, match="shared memory"):
        gpu_native.emulate_blind_rotate(big, np.zeros((1, 1, 3), np.int32), np.zeros((1, 3, 2, 2, 2, 2048), np.uint32),
                                        gpu.tables(), **kw)


@needs_emulation
@pytest.mark.parametrize("params,cluster", [(testing.INSECURE_TFHE_P4_G2, 4), (testing.INSECURE_TFHE_P4_EXT_G3, 1)],
                         ids=["grouped-cluster4", "extended-grouped"])
def test_a_bootstrap_through_the_emulated_rotation_gives_the_ntt_products_words(params, cluster, monkeypatch):
    """The whole bootstrap program (key switch, first step, the rotation's custom call, extraction) with the custom
    call replaced by its CPU emulation: the NTT product's words, and the table applied. The product's launch (its
    cluster) reaches the call."""
    from crossfhe.core.blind_rotation import GPUProduct
    from crossfhe.tfhe import keys as K

    seen = []

    def emulated(acc, exps, keys, tables, *, levels, base_log, frac_words, threads, cluster):
        seen.append((threads, cluster))

        def host(a, e, k, *tabs):
            named = dict(zip(sorted(tables), tabs, strict=True))
            return gpu_native.emulate_blind_rotate(a, e, k, named, levels=levels, base_log=base_log,
                                                   frac_words=frac_words, cluster=cluster)
        return jax.pure_callback(host, jax.ShapeDtypeStruct(acc.shape, jnp.uint32), acc, exps, keys,
                                 *[tables[k] for k in sorted(tables)])

    monkeypatch.setattr(gpu_native, "blind_rotate", emulated)
    ck, sk = tfhe.keygen(params, b"gpu-rotation".ljust(32, b"\0"), product=tfhe.NTTProduct)
    t = K.Tables(params)
    gpu_plan = T.NTTPlan.create(params.poly_size, params.moduli, GPU)
    product = dataclasses.replace(GPUProduct.create(gpu_plan, t.gplan), threads=256, cluster=cluster)
    prepared = dataclasses.replace(sk.prepared, product=product)
    gsk = dataclasses.replace(sk, prepared=prepared)
    m = np.arange(16) % 2**params.message_bits
    ct = tfhe.encrypt(ck, m, key=b"gpu-rotation-ct".ljust(32, b"\0"))
    f = lambda v: (5 * v + 3) % 2**params.message_bits  # noqa: E731
    want, got = tfhe.pbs(sk, ct, f), tfhe.pbs(gsk, ct, f)
    np.testing.assert_array_equal(np.asarray(got.a), np.asarray(want.a))
    np.testing.assert_array_equal(np.asarray(got.b), np.asarray(want.b))
    np.testing.assert_array_equal(tfhe.decrypt(ck, got), f(m))
    assert seen == [(256, cluster)]


def test_the_gpu_rotation_is_chosen_by_the_parameters_and_refused_in_words():
    from crossfhe.tfhe import keys as K
    from crossfhe.tfhe import presets

    for name in ("P4", "P4_128", "P6_128", "P2_128"):  # grouped key bits, N 2^11, at most 4 components
        assert K.product_for(presets.PRESETS[name].with_kernels(GPU)) is tfhe.GPUProduct
    for name in ("P2", "P7", "P10"):  # one bit a step (P2, P10), or 8 components of the extended accumulator (P7)
        assert not K.gpu_rotation_fits(presets.PRESETS[name])
        assert K.product_for(presets.PRESETS[name].with_kernels(GPU)) is not tfhe.GPUProduct
    with pytest.raises(ParameterError, match="GPU blind rotation cannot run here: the kernel set is"):
        K.product_for(presets.P4_128, tfhe.GPUProduct)
    with pytest.raises(ParameterError, match="GPU blind rotation cannot run here: P7 need"):
        K.product_for(presets.P7.with_kernels(GPU), tfhe.GPUProduct)
    # its tables come from a GPU-set plan (textbook-order twiddles), never from another kernel set's
    vector = K.Tables(presets.P4_128)
    with pytest.raises(ValueError, match="GPU-set plan"):
        tfhe.GPUProduct.create(vector.plan, vector.gplan)


@needs_device
def test_device_bootstrap_through_the_cuda_rotation_gives_the_ntt_words():
    """On the device: P4_128 and INSECURE_TFHE_P4_EXT_G3 on the GPU set default to the one-kernel rotation, whose
    words equal the NTT product's (the XLA group steps) eagerly and under a user's jit, with the table applied."""
    for params in (presets_p4_128(), testing.INSECURE_TFHE_P4_EXT_G3.with_kernels(GPU)):
        ck, sk = tfhe.keygen(params, b"gpu-rotation".ljust(32, b"\0"))
        assert sk.product is tfhe.GPUProduct
        ntt = tfhe.prepare(sk, product=tfhe.NTTProduct)
        m = np.arange(8) % 2**params.message_bits
        ct = tfhe.encrypt(ck, m, key=b"gpu-rotation-ct".ljust(32, b"\0"))
        f = lambda v, bits=params.message_bits: (3 * v + 1) % 2**bits  # noqa: E731
        want, got = tfhe.pbs(ntt, ct, f), tfhe.pbs(sk, ct, f)
        np.testing.assert_array_equal(np.asarray(got.a), np.asarray(want.a))
        np.testing.assert_array_equal(np.asarray(got.b), np.asarray(want.b))
        np.testing.assert_array_equal(tfhe.decrypt(ck, got), f(m))
        jitted = jax.jit(lambda s, c, f=f: tfhe.pbs(s, c, f))(sk, ct)
        np.testing.assert_array_equal(np.asarray(jitted.b), np.asarray(want.b))
        if params.acc_size == params.poly_size:  # one component: a cluster of 4 blocks per accumulator, same words
            four = dataclasses.replace(sk.prepared.product, threads=256, cluster=4)
            clustered = dataclasses.replace(sk, prepared=dataclasses.replace(sk.prepared, product=four))
            np.testing.assert_array_equal(np.asarray(tfhe.pbs(clustered, ct, f).a), np.asarray(want.a))


def presets_p4_128():
    from crossfhe.tfhe import presets

    return presets.P4_128.with_kernels(GPU)
