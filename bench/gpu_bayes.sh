#!/usr/bin/env bash
# One prepared GPU run of the inverse model's low-rank path at scale (issue 26):
# bench/scale_bayes.py --prepare-only, i.e. the low-rank statistics sharded over
# every device and streamed in chunks of 8192 rows a device, the rank chosen
# from the data, and the quadrature posterior, up to m = 10^6. Meant for a
# single call of the `device` tool (at most 10 minutes), from the repository
# root:
#
#     bash bench/gpu_bayes.sh                   # sizes 10000 100000 1000000
#     bash bench/gpu_bayes.sh 100000 1000000    # or any sizes
#
# As bench/gpu.sh: nothing is installed, the package runs from the copied tree
# through PYTHONPATH, and the image has no ArviZ, so the full fit (which builds
# InferenceData) and the predictive are not run here; the statistics pass is
# the part that grows with m. Output: JSON lines on stdout, also in
# $OUT/scale_bayes_gpu.jsonl. ALLOW_CPU=1 runs the same steps on a CPU backend
# (a dry run of the script at small sizes). Device memory: one chunk of rows
# (8192 x 128 features) plus the R x R sums, whatever m; the host holds the
# data (m = 10^6: 16 MB a column in float64).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$#" -gt 0 ]; then SIZES=("$@"); else SIZES=(10000 100000 1000000); fi
OUT_DIR="${OUT:-/tmp}"
mkdir -p "$OUT_DIR"
PY="${PY:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false

if [ "${ALLOW_CPU:-0}" != 1 ] && \
   ! "$PY" -c "import jax, sys; sys.exit(jax.default_backend() != 'gpu')"; then
    echo '{"error": "JAX has no GPU backend in '"$PY"'"}'
    exit 2
fi
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || true
for prec in 1 0; do
    JAX_ENABLE_X64=$prec "$PY" bench/scale_bayes.py --prepare-only \
        --sizes "${SIZES[@]}" 2>&1 | tee -a "$OUT_DIR/scale_bayes_gpu.jsonl"
done
