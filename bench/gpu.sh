#!/usr/bin/env bash
# One prepared GPU run of bench/scale.py: the same JSON figures as on CPU, up to
# m = 10^6. Meant for a single call of the `device` tool, from the repository root:
#
#     bash bench/gpu.sh                       # sizes 10000 100000 1000000
#     bash bench/gpu.sh 10000 300000 1000000  # or any sizes
#
# Needs a JAX with a GPU backend (jax[cuda12]) already installed; the only thing
# it installs is this package (`pip install -e .`, when it is not importable).
# Output: JSON lines on stdout, also written to $OUT/scale_gpu.jsonl ($OUT is the
# device tool's output folder; /tmp when unset). Environment knobs:
#   N_CENTERS (2000), EXACT_MAX (30000), PEER_MAX (100000), REPEATS (3).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$#" -gt 0 ]; then SIZES=("$@"); else SIZES=(10000 100000 1000000); fi
OUT_DIR="${OUT:-/tmp}"
mkdir -p "$OUT_DIR"

if ! python -c "import jax, sys; sys.exit(jax.default_backend() != 'gpu')" 2>/dev/null; then
    echo '{"error": "JAX has no GPU backend here; install jax[cuda12] first"}'
    exit 2
fi
python -c "import bayeskde" 2>/dev/null || pip install -q -e .
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
python -c "import jax; print({'jax': jax.__version__, 'devices': str(jax.devices())})"

# Allocate on demand so the device's peak_bytes_in_use reflects the problem.
export XLA_PYTHON_CLIENT_PREALLOCATE=false
# float64 throughout (H200-class GPUs run it at full rate; the preconditioner of
# Falkon at small ridges needs it). K_nM stays whole up to 32 GiB (m = 10^6 with
# 2000 centres takes 16 GiB), streamed by row blocks beyond.
exec python bench/scale.py --sizes "${SIZES[@]}" \
    --n-centers "${N_CENTERS:-2000}" --exact-max "${EXACT_MAX:-30000}" \
    --peer-max "${PEER_MAX:-100000}" --repeats "${REPEATS:-3}" \
    --max-block-mb 32768 --out "$OUT_DIR/scale_gpu.jsonl"
