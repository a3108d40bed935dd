#!/usr/bin/env bash
# Set everything up and run the whole test suite (lint included). This is what CI runs.
# The llm tests run against the real Qwen2.5-Coder-0.5B GGUF, fetched here if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
scripts/bootstrap.sh
.venv/bin/kforge models fetch-default --variant 0.5b
echo "[test] ruff check"
.venv/bin/ruff check .
export QT_QPA_PLATFORM=offscreen PYTHONUNBUFFERED=1
# a private build cache, so the suite proves that builds work from nothing
export KFORGE_BUILD_CACHE="${KFORGE_BUILD_CACHE:-$(mktemp -d)/builds}"
echo "[test] pytest"
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
echo "[test] done in $(( $(date +%s) - t0 )) s"
