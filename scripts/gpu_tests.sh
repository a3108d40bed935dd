#!/usr/bin/env bash
# Run the GPU tests and the evaluator's CUDA benchmark on a machine with an NVIDIA GPU and torch.
# The engine needs only torch there (no Qt, no llama_cpp). Results go to ${OUT:-out/}.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-out}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export KFORGE_BUILD_CACHE="${KFORGE_BUILD_CACHE:-$(mktemp -d)}"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
python3 -m pytest -m gpu -p no:cacheprovider -q -rA tests/gpu ${PYTEST_ARGS:-} 2>&1 | tee "$OUT/gpu_tests.txt"
status=${PIPESTATUS[0]}
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  python3 benchmarks/eval_speed.py --device cuda --out "$OUT/eval_speed_cuda.json" 2>&1 | tee "$OUT/eval_speed_cuda.txt"
  python3 benchmarks/adversarial_table.py --device cuda --out "$OUT/adversarial_cuda.md" 2>&1 | tail -40
  OUT="$OUT" python3 benchmarks/attention_gpu.py 2>&1 | tail -6
  OUT="$OUT" python3 benchmarks/matmul_gpu.py 2>&1 | tail -8
fi
exit $status
