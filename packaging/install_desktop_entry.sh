#!/usr/bin/env bash
# Register Kernel Forge Desktop with the desktop (menu entry, icon, .kforge files) for this user.
# Needs `kforge-desktop` on PATH (e.g. `pip install .` or the bundle's folder added to PATH).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
data="${XDG_DATA_HOME:-$HOME/.local/share}"
install -Dm644 "$here/kforge-desktop.desktop" "$data/applications/kforge-desktop.desktop"
install -Dm644 "$root/resources/icons/kforge.svg" "$data/icons/hicolor/scalable/apps/kforge-desktop.svg"
for s in 48 64 128 256; do
  install -Dm644 "$root/resources/icons/kforge-$s.png" "$data/icons/hicolor/${s}x${s}/apps/kforge-desktop.png"
done
install -Dm644 "$here/kforge-session.xml" "$data/mime/packages/kforge-session.xml"
command -v update-mime-database >/dev/null && update-mime-database "$data/mime" || true
command -v update-desktop-database >/dev/null && update-desktop-database "$data/applications" || true
command -v gtk-update-icon-cache >/dev/null && gtk-update-icon-cache -q "$data/icons/hicolor" || true
echo "Installed the Kernel Forge Desktop menu entry under $data."
