#!/usr/bin/env bash
# Build the standalone bundle dist/kforge-desktop/ with PyInstaller, in a throwaway venv so the
# app's own .venv is never touched, then check that the bundle starts (offscreen) and quits.
#
#   packaging/build_bundle.sh [BUILD_VENV]      # default BUILD_VENV: /tmp/kforge-bundle-venv
#
# It reuses the wheels pip already cached for .venv (torch, PySide6, llama-cpp-python), so on a
# machine that ran scripts/bootstrap.sh it needs the network only for PyInstaller itself.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-/tmp/kforge-bundle-venv}"
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/pip" install --progress-bar off -q "pyinstaller>=6.10" "${KFORGE_TORCH:-torch==2.13.0}"
"$VENV/bin/pip" install --progress-bar off -q .
"$VENV/bin/pyinstaller" --noconfirm --clean --distpath dist --workpath build/pyinstaller packaging/kforge-desktop.spec
ln -sf kforge-desktop dist/kforge-desktop/kforge
echo "[bundle] built $(du -sh dist/kforge-desktop | cut -f1) in dist/kforge-desktop/"
# smoke: the window opens offscreen on the bundled example and closes itself; the CLI answers
QT_QPA_PLATFORM=offscreen KFORGE_SESSIONS_DIR="$(mktemp -d)" \
  dist/kforge-desktop/kforge-desktop --no-tour --quit-after 3 resources/problems/softmax.py
dist/kforge-desktop/kforge --help >/dev/null
echo "[bundle] the bundle starts: dist/kforge-desktop/kforge-desktop"
