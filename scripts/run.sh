#!/usr/bin/env bash
# Set everything up and run the main job: the desktop app on the bundled example problem with the
# default local model. With no display, say how to run headless and run the same job in the CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
# before the model download: if Qt's X11 plugin lacks system libraries, say which package to install
# (one line) and stop, instead of letting Qt abort when the window opens
.venv/bin/python -m kforge_desktop.gui.qt_libs || exit 1
.venv/bin/kforge models fetch-default
EXAMPLE="${1:-resources/problems/softmax.py}"
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] || [ "${QT_QPA_PLATFORM:-}" = offscreen ]; then
  exec .venv/bin/kforge-desktop "$EXAMPLE"
fi
cat <<MSG
No display found (DISPLAY/WAYLAND_DISPLAY unset), so the desktop window cannot open here.
  - on a workstation, run this again from its desktop session: make run
  - headless, the same job runs in the terminal: .venv/bin/kforge optimize $EXAMPLE
  - the window can also render offscreen: QT_QPA_PLATFORM=offscreen .venv/bin/kforge-desktop $EXAMPLE
Running the headless job now (budget ${KFORGE_RUN_BUDGET:-6} candidates)...
MSG
exec .venv/bin/kforge optimize "$EXAMPLE" --device "${KFORGE_DEVICE:-cpu}" --budget "${KFORGE_RUN_BUDGET:-6}"
