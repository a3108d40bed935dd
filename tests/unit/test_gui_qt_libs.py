"""Missing X11 libraries for Qt's xcb plugin: found before Qt starts, named in one line with the fix."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest

from kforge_desktop.gui import app, qt_libs
from kforge_desktop.gui.qt_libs import install_hint, missing_libraries, parse_ldd, uses_xcb, xcb_plugin

LDD_FRESH_DESKTOP = """\
\tlinux-vdso.so.1 (0x00007ffd4a5f2000)
\tlibQt6XcbQpa.so.6 => /opt/venv/PySide6/Qt/plugins/platforms/../../lib/libQt6XcbQpa.so.6 (0x00007f6e1c400000)
\tlibxkbcommon.so.0 => /lib/x86_64-linux-gnu/libxkbcommon.so.0 (0x00007f6e1c3b0000)
\tlibxcb-cursor.so.0 => not found
\tlibxcb-icccm.so.4 => not found
\tlibxcb-util.so.1 => /lib/x86_64-linux-gnu/libxcb-util.so.1 (0x00007f6e1c3a0000)
\tlibxcb-keysyms.so.1 => not found
\tlibxcb.so.1 => /lib/x86_64-linux-gnu/libxcb.so.1 (0x00007f6e1c370000)
\tlibxcb-cursor.so.0 => not found
\tlibxcb-icccm.so.4 => not found
\t/lib64/ld-linux-x86-64.so.2 (0x00007f6e1c7b7000)
"""


def test_ldd_output_gives_each_missing_library_once():
    assert parse_ldd(LDD_FRESH_DESKTOP) == ["libxcb-cursor.so.0", "libxcb-icccm.so.4", "libxcb-keysyms.so.1"]
    assert parse_ldd("\tlibxcb.so.1 => /lib/x86_64-linux-gnu/libxcb.so.1 (0x1)\n\tstatically linked\n") == []


def test_the_hint_is_one_line_naming_only_the_missing_packages():
    hint = install_hint(["libxcb-cursor.so.0", "libxcb-keysyms.so.1"], have_apt=True)
    assert "\n" not in hint
    assert hint.endswith("sudo apt-get install -y libxcb-cursor0 libxcb-keysyms1")
    assert "libxcb-icccm4" not in hint
    # two libraries of one package: the package once
    assert install_hint(["libglib-2.0.so.0", "libgthread-2.0.so.0"], have_apt=True).endswith(
        "sudo apt-get install -y libglib2.0-0")


def test_a_library_without_a_known_package_and_a_system_without_apt():
    mixed = install_hint(["libxcb-icccm.so.4", "libodd.so.3"], have_apt=True)
    assert "sudo apt-get install -y libxcb-icccm4" in mixed and "libodd.so.3" in mixed
    other = install_hint(["libxcb-icccm.so.4"], have_apt=False)
    assert "apt-get" not in other and "libxcb-icccm.so.4" in other and "package manager" in other


@pytest.mark.parametrize(
    ("env", "platform", "expected"),
    [
        ({"DISPLAY": ":0"}, "linux", True),
        ({"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"}, "linux", False),
        ({"DISPLAY": ":0", "QT_QPA_PLATFORM": "xcb"}, "linux", True),
        ({"QT_QPA_PLATFORM": "xcb:nomitshm"}, "linux", True),
        ({"WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0", "XDG_SESSION_TYPE": "wayland"}, "linux", False),
        ({"WAYLAND_DISPLAY": "wayland-0"}, "linux", False),
        ({}, "linux", False),
        ({"DISPLAY": ":0"}, "darwin", False),
    ],
)
def test_only_an_x11_start_is_checked(env, platform, expected):
    assert uses_xcb(env, platform) is expected


@pytest.fixture()
def plugin_missing_a_library(tmp_path) -> Path:
    """A shared library linked against another that was then deleted: what ldd sees on a fresh desktop."""
    if not shutil.which("gcc") or not shutil.which("ldd"):
        pytest.skip("needs gcc and ldd")
    (tmp_path / "dep.c").write_text("int kforge_absent(void) { return 1; }\n")
    (tmp_path / "plug.c").write_text("int kforge_absent(void);\nint plug(void) { return kforge_absent(); }\n")
    dep = "libkforge-absent.so.0"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", dep, f"-Wl,-soname,{dep}", "dep.c"], cwd=tmp_path, check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", "libplug.so", "plug.c", "-L.", f"-l:{dep}"],
                   cwd=tmp_path, check=True)
    (tmp_path / dep).unlink()
    return tmp_path / "libplug.so"


def test_the_real_loader_reports_a_deleted_dependency(plugin_missing_a_library):
    assert missing_libraries(plugin_missing_a_library) == ["libkforge-absent.so.0"]


def test_the_window_exits_with_the_line_before_qt_starts(plugin_missing_a_library, monkeypatch, capsys):
    monkeypatch.setattr(qt_libs, "xcb_plugin", lambda: plugin_missing_a_library)
    monkeypatch.setitem(qt_libs.DEBIAN_PACKAGES, "libkforge-absent.so.0", "kforge-absent0")
    monkeypatch.delenv("QT_QPA_PLATFORM", raising=False)
    monkeypatch.delenv("XDG_SESSION_TYPE", raising=False)
    monkeypatch.setenv("DISPLAY", ":0")
    assert app.main(["--no-tour"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("kforge-desktop: the window cannot open")
    assert "libkforge-absent.so.0" in err
    if shutil.which("apt-get"):
        assert err.endswith("sudo apt-get install -y kforge-absent0")


def test_this_machines_xcb_plugin():
    plugin = xcb_plugin()
    if plugin is None:
        pytest.skip("PySide6 has no xcb plugin here")
    missing = missing_libraries(plugin)
    for soname in missing:  # what the check calls missing, the loader indeed cannot load
        with pytest.raises(OSError):
            ctypes.CDLL(soname)
        assert soname in qt_libs.DEBIAN_PACKAGES, f"no package known for {soname}"
    for soname in qt_libs.DEBIAN_PACKAGES:  # and what the loader can load, it never calls missing
        try:
            ctypes.CDLL(soname)
        except OSError:
            continue
        assert soname not in missing
