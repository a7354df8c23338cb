#!/usr/bin/env bash
# Every GPU measurement of the CROSS lowering in one device call (device/METHOD.md: fit the lease).
#   run (device tool):  bash benchmarks/gpu_session.sh        (results under $OUT, a table at the end)
# Uses the device image's python3 and JAX (no registry there); the repository is on PYTHONPATH.
# Order: environment, correctness on the device, then timings, so a failure stops before any figure is taken.
set -euo pipefail
OUT=${OUT:-benchmarks/results/gpu}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PY:-python3}
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
  $PY -c "import jax, jaxlib; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__, jax.devices())"
} 2>&1 | tee "$OUT/env.txt"
# Bit-exactness of the kernels and of the two kernel sets, on this device.
$PY -m pytest -q -p no:cacheprovider tests/test_kernels_bat.py tests/test_kernels_ntt.py tests/test_kernel_sets.py \
  tests/test_kernels_pallas.py 2>&1 | tail -5 | tee "$OUT/tests.txt"
$PY benchmarks/pallas_check.py 2>&1 | tee "$OUT/pallas.txt"
$PY benchmarks/bench_kernels.py --json "$OUT/kernels.json" 2>&1 | tee "$OUT/kernels.txt"
for k in vector matrix; do
  $PY benchmarks/bench_ckks.py --presets N16_L21_DNUM3 --no-peer --no-precision --kernels "$k" \
    --json "$OUT/ckks_$k.json" 2>&1 | tee "$OUT/ckks_$k.txt"
done
grep -hE "he_mult_relin|he_add|rotate|rescale" "$OUT"/ckks_*.txt || true
