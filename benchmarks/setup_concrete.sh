#!/usr/bin/env bash
# Create the Concrete ML peer's own virtual environment (benchmarks/concrete_peer.py runs in it):
#
#     bash benchmarks/setup_concrete.sh            # .venv-concrete at the repository root
#     CONCRETE_VENV=/some/where bash benchmarks/setup_concrete.sh
#
# Concrete ML brings Concrete (concrete-python: the TFHE compiler and runtime), PyTorch, scikit-learn, XGBoost
# and Brevitas; nothing here needs jax or crossfhe. Wheels come from PyPI (Linux x86_64, CPython 3.8-3.12).
# PyPI's torch wheel pulls NVIDIA's CUDA libraries (several GiB) although the peer runs on the CPU; set
# CONCRETE_TORCH_INDEX to a PyTorch CPU wheel index to avoid them where one is reachable.
#
# Fallback: where concrete-ml does not install, CONCRETE_FALLBACK=1 (or a failed concrete-ml install) installs
# concrete-python + scikit-learn + torch alone; concrete_peer.py then reports the models it cannot build.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${CONCRETE_VENV:-$ROOT/.venv-concrete}"
PYTHON="${CONCRETE_PYTHON:-python3}"
CONCRETE_ML_SPEC="${CONCRETE_ML_SPEC:-concrete-ml==1.9.0}"

"$PYTHON" -c 'import sys; v = sys.version_info[:2]; assert (3, 8) <= v <= (3, 12), f"Python {v}: Concrete ML wheels are for 3.8-3.12"'
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip

extra=()
if [ -n "${CONCRETE_TORCH_INDEX:-}" ]; then
    extra=(--extra-index-url "$CONCRETE_TORCH_INDEX")
fi

if [ "${CONCRETE_FALLBACK:-0}" != "1" ] && "$VENV/bin/python" -m pip install "${extra[@]}" "$CONCRETE_ML_SPEC"; then
    :
else
    echo "concrete-ml did not install: installing concrete-python, scikit-learn and torch alone" >&2
    "$VENV/bin/python" -m pip install "${extra[@]}" concrete-python scikit-learn torch
fi

"$VENV/bin/python" - <<'EOF'
import importlib.metadata as m
for pkg in ("concrete-ml", "concrete-python", "torch", "scikit-learn", "xgboost", "numpy"):
    try:
        print(f"{pkg} {m.version(pkg)}")
    except m.PackageNotFoundError:
        print(f"{pkg} (not installed)")
EOF
echo "peer: $VENV/bin/python benchmarks/concrete_peer.py --quick"
