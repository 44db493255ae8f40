#!/usr/bin/env bash
# One prepared GPU run of bench/scale.py: the same JSON figures as on CPU, up to
# m = 10^6. Meant for a single call of the `device` tool (at most 10 minutes), from
# the repository root:
#
#     bash bench/gpu.sh                       # sizes 10000 100000 1000000
#     bash bench/gpu.sh 10000 300000 1000000  # or any sizes
#
# The device machine reaches no package registry, so nothing is installed: the
# image's python3 already holds jax with the CUDA plugin, numpyro, scikit-learn,
# scipy and jaxtyping (all that `import bayeskde` and this bench need; no arviz),
# and the package runs from the copied working tree through PYTHONPATH.
# Output: JSON lines on stdout, also in $OUT/scale_gpu.jsonl, and the whole log
# in $OUT/gpu_log.txt ($OUT is the device tool's output folder; /tmp when unset).
# Environment knobs: N_CENTERS (2000), EXACT_MAX (30000), PEER_MAX (100000),
# REPEATS (3), EVIDENCE_CENTERS (300), PY (python3); ALLOW_CPU=1 runs the same
# steps on a CPU backend (a dry run of the script itself, at small sizes:
# tests/test_bench_scripts.py does that).
#
# Budget (about 10 minutes): each size runs in a fresh process (compile included);
# the scikit-learn peer runs on the 16 host cores and stops at PEER_MAX; the
# exact Cholesky stops at EXACT_MAX (m = 3 10^4 in float64: 7 GiB, seconds on an
# H200). K_nM of Falkon stays whole up to 32 GiB (m = 10^6 with 2000 centres is
# 16 GiB in float64); the Nystroem evidence at m = 10^6 holds 5 x m x 300
# eigenvectors (12 GiB).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$#" -gt 0 ]; then SIZES=("$@"); else SIZES=(10000 100000 1000000); fi
OUT_DIR="${OUT:-/tmp}"
mkdir -p "$OUT_DIR"
PY="${PY:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1

if [ "${ALLOW_CPU:-0}" != 1 ] && \
   ! "$PY" -c "import jax, sys; sys.exit(jax.default_backend() != 'gpu')"; then
    echo '{"error": "JAX has no GPU backend in '"$PY"'"}'
    exit 2
fi
"$PY" -c "import bayeskde, numpyro, sklearn, scipy, jaxtyping" || {
    echo '{"error": "a dependency of bayeskde is missing on this machine"}'
    exit 2
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$PY" -c "import jax; print({'jax': jax.__version__, 'devices': str(jax.devices())})"

# Allocate on demand so the device's peak_bytes_in_use reflects the problem.
export XLA_PYTHON_CLIENT_PREALLOCATE=false
# float64 throughout (H200-class GPUs run it at full rate; the preconditioner of
# Falkon at small ridges needs it).
"$PY" bench/scale.py --sizes "${SIZES[@]}" \
    --n-centers "${N_CENTERS:-2000}" --exact-max "${EXACT_MAX:-30000}" \
    --peer-max "${PEER_MAX:-100000}" --repeats "${REPEATS:-3}" \
    --evidence-centers "${EVIDENCE_CENTERS:-300}" \
    --max-block-mb 32768 --out "$OUT_DIR/scale_gpu.jsonl" 2>&1 \
    | tee "$OUT_DIR/gpu_log.txt"
