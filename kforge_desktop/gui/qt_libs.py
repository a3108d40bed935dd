"""Qt's X11 platform plugin needs system libraries that a fresh desktop Linux may lack.

Why: PySide6's wheel brings Qt but not the X11 helper libraries its ``xcb`` plugin links against
(``libxcb-cursor0``, ``libxcb-icccm4``, ``libxcb-keysyms1`` …). Without one of them Qt cannot load
the plugin and aborts the process with a long message that names the symptom, not the package to
install. Asking the dynamic loader (``ldd``) which of the plugin's libraries it cannot find, before
``QApplication`` exists, turns that into one line with the command that fixes it.

Nothing here imports Qt: the check must run where Qt itself would abort.
"""

from __future__ import annotations

import ctypes.util
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

# soname -> Debian/Ubuntu package; every library libqxcb.so and Qt's own libraries it loads link
# against (``ldd`` lists the whole closure, so a missing dependency of a dependency shows too)
DEBIAN_PACKAGES: dict[str, str] = {
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render.so.0": "libxcb-render0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxcb-xinerama.so.0": "libxcb-xinerama0",
    "libxcb-xinput.so.0": "libxcb-xinput0",
    "libxcb.so.1": "libxcb1",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libX11.so.6": "libx11-6",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libGL.so.1": "libgl1",
    "libEGL.so.1": "libegl1",
    "libOpenGL.so.0": "libopengl0",
    "libfontconfig.so.1": "libfontconfig1",
    "libfreetype.so.6": "libfreetype6",
    "libdbus-1.so.3": "libdbus-1-3",
    "libglib-2.0.so.0": "libglib2.0-0",
    "libgthread-2.0.so.0": "libglib2.0-0",
}

# where ldd is missing: the libraries fresh desktops lack most often, by ctypes.util.find_library's name
_USUALLY_MISSING = {
    "xcb-cursor": "libxcb-cursor.so.0",
    "xcb-icccm": "libxcb-icccm.so.4",
    "xcb-keysyms": "libxcb-keysyms.so.1",
    "xcb-image": "libxcb-image.so.0",
    "xcb-util": "libxcb-util.so.1",
    "xcb-render-util": "libxcb-render-util.so.0",
    "xkbcommon-x11": "libxkbcommon-x11.so.0",
}

_NOT_FOUND = re.compile(r"^\s*(\S+)\s+=>\s+not found\s*$")


def parse_ldd(text: str) -> list[str]:
    """The sonames ``ldd`` reported as "not found", each once, in the order first seen."""
    out: list[str] = []
    for line in text.splitlines():
        m = _NOT_FOUND.match(line)
        if m and m.group(1) not in out:
            out.append(m.group(1))
    return out


def xcb_plugin() -> Path | None:
    """PySide6's xcb platform plugin (found without importing Qt), or None where there is none."""
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        plugin = Path(root) / "Qt" / "plugins" / "platforms" / "libqxcb.so"
        if plugin.is_file():
            return plugin
    return None


def missing_libraries(plugin: Path) -> list[str]:
    """Sonames ``plugin`` needs that the dynamic loader cannot find here (empty when all are there)."""
    ldd = shutil.which("ldd")
    if ldd:
        try:
            proc = subprocess.run([ldd, str(plugin)], capture_output=True, text=True, timeout=30, check=False)
            return parse_ldd(proc.stdout + proc.stderr)
        except (OSError, subprocess.SubprocessError):
            pass
    return [soname for name, soname in _USUALLY_MISSING.items() if ctypes.util.find_library(name) is None]


def install_hint(missing: list[str], have_apt: bool | None = None) -> str:
    """One line that says what is missing and the command that installs it."""
    if have_apt is None:
        have_apt = shutil.which("apt-get") is not None
    packages: list[str] = []
    unknown: list[str] = []
    for soname in missing:
        pkg = DEBIAN_PACKAGES.get(soname)
        if pkg is None:
            unknown.append(soname)
        elif pkg not in packages:
            packages.append(pkg)
    libs = ", ".join(missing)
    if have_apt and packages and not unknown:
        return (f"the window cannot open: Qt's X11 plugin needs system libraries that are missing ({libs}); "
                f"install them with: sudo apt-get install -y {' '.join(packages)}")
    if have_apt and packages:
        return (f"the window cannot open: Qt's X11 plugin needs system libraries that are missing ({libs}); "
                f"install them with: sudo apt-get install -y {' '.join(packages)} "
                f"(and the packages that provide {', '.join(unknown)})")
    return (f"the window cannot open: Qt's X11 plugin needs system libraries that are missing ({libs}); "
            "install the packages that provide them with your distribution's package manager.")


def uses_xcb(env: Mapping[str, str] | None = None, platform: str | None = None) -> bool:
    """True when Qt will load its xcb plugin: Linux, an X display, and no other platform chosen.

    A Wayland session (``XDG_SESSION_TYPE=wayland``) is left alone: Qt tries its Wayland plugin
    first there and needs none of these libraries.
    """
    env = os.environ if env is None else env
    platform = sys.platform if platform is None else platform
    if not platform.startswith("linux"):
        return False
    chosen = env.get("QT_QPA_PLATFORM", "").strip()
    if chosen:
        return chosen.split(";")[0].split(":")[0] == "xcb"
    return bool(env.get("DISPLAY")) and env.get("XDG_SESSION_TYPE", "") != "wayland"


def startup_problem(env: Mapping[str, str] | None = None) -> str | None:
    """One line when the window cannot open for want of system libraries, else None."""
    if not uses_xcb(env):
        return None
    plugin = xcb_plugin()
    if plugin is None:
        return None  # no PySide6 wheel layout to inspect: Qt reports on its own
    missing = missing_libraries(plugin)
    return install_hint(missing) if missing else None


def main() -> int:
    """``python -m kforge_desktop.gui.qt_libs``: exit 1 with the line when libraries are missing."""
    problem = startup_problem()
    if problem:
        print(f"kforge-desktop: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
