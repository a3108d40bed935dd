#!/usr/bin/env bash
# Create (or update) .venv with everything Kernel Forge Desktop needs.
#
# Idempotent: a second run installs nothing new. The torch wheel is chosen here,
# not in pyproject.toml, so that a GPU user's own CUDA build is never replaced:
#   - if the venv already has torch, it is kept;
#   - else KFORGE_TORCH (default "torch==2.13.0") is installed first.
# llama-cpp-python is built from source by pip the first time (minutes) and then
# comes from pip's wheel cache. Set CMAKE_ARGS="-DGGML_CUDA=on" for GPU offload.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' || {
  echo "Kernel Forge Desktop needs Python 3.10 or newer (found $("$PY" --version 2>&1))." >&2
  exit 1
}
if [ ! -x .venv/bin/python ]; then
  echo "[bootstrap] creating .venv with $("$PY" --version 2>&1)"
  "$PY" -m venv .venv
fi
VPY=.venv/bin/python
# pip fails half-way with "No space left on device" when the disk fills; say so before it starts.
# A first install puts about 2.5 GB in .venv (torch, Qt, Triton, Ray, llama.cpp) and builds in TMPDIR; an update
# of an installed .venv ($1 = the MB it needs) much less.
need_space() {
  local min_mb="${KFORGE_MIN_FREE_MB:-$1}" dir free_mb
  for dir in .venv "${TMPDIR:-/tmp}"; do
    free_mb=$(df -Pm "$dir" 2>/dev/null | awk 'NR == 2 {print $4}')
    [ -n "$free_mb" ] || continue  # a folder df cannot read: pip will say what is wrong with it
    if [ "$free_mb" -lt "$min_mb" ]; then
      echo "[bootstrap] not enough disk space to install: $(cd "$dir" && pwd) has ${free_mb} MB free," \
        "installing needs about ${min_mb} MB. Free some space (\`pip cache purge\` empties pip's cache)" \
        "or point TMPDIR at a larger disk, then run this again. Nothing was installed." >&2
      exit 1
    fi
  done
}
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}"
if ! "$VPY" -c 'import torch' >/dev/null 2>&1; then
  need_space 3000
  echo "[bootstrap] installing ${KFORGE_TORCH:-torch==2.13.0}"
  "$VPY" -m pip install --progress-bar off "${KFORGE_TORCH:-torch==2.13.0}"
fi
stamp=.venv/.kforge-installed
want="$(cat pyproject.toml scripts/bootstrap.sh | sha256sum | cut -c1-16)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  if [ -f "$stamp" ]; then need_space 500; else need_space 3000; fi
  echo "[bootstrap] installing kforge_desktop and its dependencies (first time: llama-cpp-python builds from source, ~8 min on 2 cores)"
  "$VPY" -m pip install --progress-bar off -e ".[test]"
  echo "$want" > "$stamp"
fi
