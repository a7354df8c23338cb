#!/usr/bin/env bash
# The GPU checks and measurements, in device calls that each fit one command's limit
# (device/METHOD.md: fit the lease):
#   bash benchmarks/gpu_session.sh tests   the default test suite on the GPU, the kernels' exactness and timings
#                                           (CROSSFHE_KERNELS=gpu bash ... tests: the suite with AUTO on the GPU set,
#                                           what making it the default on a GPU waits for)
#   bash benchmarks/gpu_session.sh bench   CKKS (both kernel sets), TFHE and HMVP benchmarks, no peers
#   bash benchmarks/gpu_session.sh eager   eager operations against the same under a user's jit (bench_dispatch)
#   bash benchmarks/gpu_session.sh circuits  issue 26's targets: HE-Add and N16 HE-Mult+relin+rescale inside a circuit
#   bash benchmarks/gpu_session.sh bootstrap issue 27's target: one full-slot bootstrap at N 2^16 (<= 100 ms on an H100)
#   bash benchmarks/gpu_session.sh hmvp     issue 32: HMVP (R = 1 and 16) against the diagonal method at its target points
#   bash benchmarks/gpu_session.sh profile  issue 30: per-operation kernels, launches, copies and time against floors
#                                           (benchmarks/bench_profile.py), NTT and BAT kernels, the one-executable and
#                                           no-copy checks on the device; everything in $OUT/all.tgz, a table printed
#   bash benchmarks/gpu_session.sh tfhe     issue 29: batched TFHE bootstrapping throughput (2^-64 and 2^-128 presets)
#   bash benchmarks/gpu_session.sh taurus   issue 29: the Taurus workloads' batch-1 latency and batched throughput
#   bash benchmarks/gpu_session.sh fused    issue 46, requirements 1-3 and 5: the GPU set's tests on the device (the
#                                           CUDA NTT and TFHE blind rotation exact against the XLA words), the NTT
#                                           against its floor and the rotation's launches (bench_gpu_kernels), TFHE
#                                           P4_128 and P6_128 on GPU, the CKKS operations and the bootstrap's kernels
#                                           and copies (bench_profile; traces in logs.tgz), VECTOR's P4_128 last
#   bash benchmarks/gpu_session.sh workloads  issue 46, requirement 4: HELR iterations and LoLa-MNIST images as one
#                                           program each (the bootstrap and HMVP have their own stages)
# Uses the device image's python3 and JAX (no registry there); the repository is on PYTHONPATH. Results go
# under $OUT (tests.txt, failures.txt, *.json, *.txt) and a short table is printed last. Each step has its own
# time limit, so one slow step leaves the others' figures. Last, benchmarks/device_record.py writes the call's
# dated record, $OUT/device-run_<stage>_<UTC time>.json: commit it under benchmarks/device-runs/.
set -uo pipefail
STAGE=${1:-tests}
export OUT=${OUT:-benchmarks/results/gpu}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # several test workers share the card
export CROSSFHE_JAX_CACHE=${CROSSFHE_JAX_CACHE:-/tmp/crossfhe-jax-cache}
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv || true
  $PY -c "import jax, jaxlib, numpy; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__, 'numpy', numpy.__version__, jax.devices())"
  # the library's compile options (crossfhe.math.xla.CPU_OPTIONS) go to every backend's compiler: check the GPU's takes them
  $PY -c "import jax.numpy as jnp; from crossfhe.math import xla; print('compile options', xla.CPU_OPTIONS, 'taken:', int(xla.jit(lambda a: a + 1)(jnp.arange(4))[3]) == 4)"
  nproc
} 2>&1 | tee "$OUT/env.txt"

step() {  # step SECONDS NAME COMMAND...: run with a limit, output to $OUT/NAME.txt, status to the summary
  local limit=$1 name=$2; shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name.txt" 2>&1
  echo "$name: exit $? in $((SECONDS - t0)) s" | tee -a "$OUT/steps.txt"
}

if [ "$STAGE" = circuits ]; then
  # issue 26: per-operation time inside one compiled circuit (targets on an H100: HE-Add <= 15 us at N14_L7,
  # HE-Mult+relin+rescale <= 1.5 ms at N16_L21_DNUM3), and the README circuit's fresh-process runs
  step 500 circuits $PY benchmarks/bench_circuits.py --workloads adds64,mults4,readme --reps 20 \
    --json "$OUT/circuits.json"
  tail -14 "$OUT/circuits.txt"
elif [ "$STAGE" = tfhe ]; then
  # issue 29: KS + PBS latency and throughput per preset (published TFHE-rs CUDA on an H100: 2_2 1.13 ms latency,
  # 3_3 11.0 ms), the FFT and the NTT products
  step 270 tfhe $PY benchmarks/bench_tfhe.py --presets P2,P4,P6,P2_128,P4_128,P6_128 --batches 1,64,512 --no-peer \
    --threads 16 --reps 10 --json "$OUT/tfhe.json"
  step 90 tfhe_ntt $PY benchmarks/bench_tfhe.py --presets P4,P4_128 --batches 1,512 --kernel ntt --no-peer \
    --threads 16 --reps 10 --json "$OUT/tfhe_ntt.json"
  tail -24 "$OUT/tfhe.txt"
  tail -8 "$OUT/tfhe_ntt.txt"
elif [ "$STAGE" = taurus ]; then
  # issue 29: the Taurus workloads at batch 1 and batched on the device (own call: key generation and compilation of
  # the first model took more than 170 s on 2026-11-27)
  step 560 taurus $PY benchmarks/bench_taurus.py --workloads tree,knn,gbt,mlp --batch 256 --reps 5 --max-seconds 10 \
    --no-peer --json "$OUT/taurus.json"
  tail -14 "$OUT/taurus.txt"
elif [ "$STAGE" = bootstrap ]; then
  # issue 27: latency and stages of a full-slot bootstrap at both N16 presets (no OpenFHE peer on the device image)
  step 550 bootstrap $PY benchmarks/bench_bootstrap.py --presets N16_BOOT_L3,N16_BOOT_L9 --threads 16 --reps 5 \
    --no-peer --json "$OUT/bootstrap.json"
  tail -12 "$OUT/bootstrap.txt"
elif [ "$STAGE" = hmvp ]; then
  # issue 32: both matrix-vector methods on the device, at the sizes of its CPU targets, one vector and 8 vectors
  # against one matrix (no TenSEAL on the image; R = 16 only: R = 1 is slower on the CPU at every target point)
  step 480 hmvp $PY benchmarks/bench_hmvp.py --sizes 1024x4096,4096x4096,8192x4096 --rows-per-product 16 \
    --vectors 8 --no-peer --threads 4 --json "$OUT/hmvp.json"
  tail -16 "$OUT/hmvp.txt"
elif [ "$STAGE" = profile ]; then
  # issue 30. The riskiest compiles (the MATRIX set at N 2^16) go last, in their own step. At most 8 files come
  # back from a device call: everything but the summary goes into all.tgz (traces and optimized HLO included).
  rm -rf /tmp/traces /tmp/xla
  step 260 profile env XLA_FLAGS="--xla_dump_to=/tmp/xla --xla_dump_hlo_module_re=.*(mul_rescale|mul_relin|pbs_program).*" \
    $PY benchmarks/bench_profile.py --kernels vector --ops mul_rescale,mul,rotate,rescale,add --reps 20 --batch 8 \
    --tfhe P4 --tfhe-batches 1,256 --json "$OUT/profile.json" --traces /tmp/traces
  step 70 kernels $PY benchmarks/bench_kernels.py --shapes 256x256x256,2048x2048x2048 --limbs 8 --reps 10 \
    --json "$OUT/kernels.json"
  step 100 profile_matrix $PY benchmarks/bench_profile.py --kernels matrix --matrix-ops mul --tfhe "" --reps 10 \
    --json "$OUT/profile_matrix.json" --traces /tmp/traces
  step 120 checks $PY -m pytest -q -x -p no:cacheprovider tests/test_one_program.py -k "not first_called"
  {
    grep -A40 "^sch " "$OUT/profile.txt" | tail -12
    grep -A4 "^sch " "$OUT/profile_matrix.txt" | tail -2
    tail -3 "$OUT/checks.txt"
    tail -22 "$OUT/kernels.txt"
    cat "$OUT/steps.txt"
  } > /tmp/summary.txt
  mkdir -p /tmp/bundle && cp -r "$OUT"/. /tmp/bundle/ && rm -rf "$OUT"/*
  (cd /tmp && find traces -name "perfetto_trace.json.gz" | head -12 > /tmp/trace_list;
   find xla -name "*after_optimizations.txt" | head -6 >> /tmp/trace_list;
   tar czf "$OUT/all.tgz" -C /tmp -T /tmp/trace_list bundle)
  cp /tmp/summary.txt "$OUT/summary.txt"
  cat "$OUT/summary.txt"
elif [ "$STAGE" = fused ]; then
  # issue 46: exactness on the device first (the CUDA NTT and the one-kernel TFHE blind rotation against the XLA
  # words), the NTT against its floor and the rotation's launches (threads, cluster) alone, then the TFHE targets
  # end to end on the GPU set (P4_128 and P6_128 at batch 1 and 256), the CKKS operations and the bootstrap's kernels
  # and host copies from traces (bench_profile; traces in logs.tgz), VECTOR's P4_128 for the same call's ratio
  { command -v nvcc || ls /usr/local/cuda/bin/nvcc; nvcc --version | tail -2; } 2>&1 | tee -a "$OUT/env.txt"
  rm -rf /tmp/traces
  step 130 gpu_tests $PY -m pytest -q -p no:cacheprovider -m "not slow" tests/test_kernels_gpu.py \
    tests/test_kernel_sets.py -k "device or gpu and not emulat"
  step 130 gpu_kernels $PY benchmarks/bench_gpu_kernels.py --reps 20 --json "$OUT/gpu_kernels.json"
  step 110 tfhe_gpu $PY benchmarks/bench_tfhe.py --presets P4_128,P6_128 --batches 1,256 --kernels gpu \
    --no-peer --threads 16 --reps 5 --json "$OUT/tfhe_gpu.json"
  step 110 profile $PY benchmarks/bench_profile.py --kernels gpu --ops mul,rotate,rescale,add --batch 4 \
    --tfhe P4_128 --tfhe-kernels gpu --tfhe-batches 1,256 --reps 10 --json "$OUT/profile.json" \
    --traces /tmp/traces/default
  step 70 tfhe_vector $PY benchmarks/bench_tfhe.py --presets P4_128 --batches 1,256 --kernels vector --no-peer \
    --threads 16 --reps 3 --json "$OUT/tfhe_vector.json"
  tail -4 "$OUT/gpu_tests.txt"
  for f in tfhe_gpu tfhe_vector; do grep -E "^P[0-9]|^KS-dedup" "$OUT/$f.txt" | head -8; done
  tail -24 "$OUT/gpu_kernels.txt"
  grep -A8 "^sch " "$OUT/profile.txt" | tail -8
  # at most 8 files come back: the steps' logs and the traces in one archive (the JSONs stay for the record)
  mkdir -p /tmp/logs && mv "$OUT"/gpu_kernels.txt "$OUT"/profile*.txt "$OUT"/gpu_tests.txt "$OUT"/tfhe_*.txt \
    /tmp/logs/ 2>/dev/null
  (cd /tmp && tar czf "$OUT/logs.tgz" logs traces 2>/dev/null)
elif [ "$STAGE" = workloads ]; then
  # issue 46, requirement 4 (targets on the H200: an HELR-1024 iteration at most 100 ms, LoLa-MNIST at most 5 ms an
  # image batched); HELR's key generation and its first (compiling) iteration are most of the step
  step 330 helr $PY benchmarks/bench_ml.py --parts helr --threads 16 --iterations 6 --one-program --no-peer \
    --json "$OUT/helr.json"
  step 230 cnn $PY benchmarks/bench_ml.py --parts cnn --threads 16 --cnn-images 64 --one-program --no-peer \
    --json "$OUT/cnn.json"
  tail -12 "$OUT/helr.txt"
  tail -12 "$OUT/cnn.txt"
elif [ "$STAGE" = eager ]; then
  # issue 25: HE-Add dispatch overhead, and each eager operation against the same call under a user's jit
  step 400 dispatch $PY benchmarks/bench_dispatch.py --threads 4 --reps 100 --json "$OUT/dispatch.json"
  tail -16 "$OUT/dispatch.txt"
elif [ "$STAGE" = tests ]; then
  # Failures are written as they happen, so a suite stopped by its limit still says what failed and why.
  mkdir -p /tmp/gpu_plugin
  cat > /tmp/gpu_plugin/instafail.py <<'EOF'
import os
def pytest_runtest_logreport(report):
    if report.failed:
        with open(os.path.join(os.environ["OUT"], "failures.txt"), "a") as f:
            f.write(f"==== {report.nodeid} ({report.when})\n{report.longreprtext[-4000:]}\n")
EOF
  export PYTHONPATH="/tmp/gpu_plugin:$PYTHONPATH"
  step 390 tests \
    $PY -m pytest -q -rf -n 8 -m "not slow" -p no:cacheprovider -p instafail tests
  step 60 pallas $PY benchmarks/pallas_check.py
  step 100 kernels $PY benchmarks/bench_kernels.py --quick --threads 4 --json "$OUT/kernels.json"
  tail -3 "$OUT/tests.txt"
  grep "^====" "$OUT/failures.txt" 2>/dev/null | sort -u | wc -l || echo "no failures recorded"
  grep "^====" "$OUT/failures.txt" 2>/dev/null | sort -u | head -40
  tail -12 "$OUT/pallas.txt"
  tail -25 "$OUT/kernels.txt"
else
  for k in vector matrix; do
    step 150 "ckks_$k" $PY benchmarks/bench_ckks.py --presets N14_L7,N16_L21_DNUM3 --no-peer --no-precision \
      --threads 4 --kernels "$k" --json "$OUT/ckks_$k.json"
  done
  step 200 tfhe $PY benchmarks/bench_tfhe.py --presets P4,P6,P8 --batches 1,8,64 --no-peer --threads 4 \
    --json "$OUT/tfhe.json"
  step 80 hmvp $PY benchmarks/bench_hmvp.py --quick --no-peer --threads 4 --json "$OUT/hmvp.json"
  for f in ckks_vector ckks_matrix tfhe hmvp; do echo "--- $f"; tail -22 "$OUT/$f.txt"; done
fi
[ -f "$OUT/steps.txt" ] && cat "$OUT/steps.txt" || true
# One dated record of the call for benchmarks/device-runs/ (issue 46): the device, driver and versions, each step's
# status, and every JSON the steps wrote (the profile stage's are inside all.tgz, its summary beside it).
$PY benchmarks/device_record.py "$OUT" "$STAGE" || echo "device_record: failed"
