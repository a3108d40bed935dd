"""``kforge-desktop``: start the window, optionally on a session or a problem/model file.

    kforge-desktop                      # the last layout; first run: the bundled example and a tour
    kforge-desktop session.kforge       # reopen a session (tree, plots and history as saved)
    kforge-desktop problem.py           # a new session on a KernelBench problem (or a model file)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def headless_hint() -> str | None:
    """One sentence on how to run without a display, when this machine has none."""
    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or os.environ.get("QT_QPA_PLATFORM")
    ):
        return ("No display found (DISPLAY and WAYLAND_DISPLAY are unset): run the same job without a window "
                "with `kforge optimize PROBLEM.py`, or render the window off screen with QT_QPA_PLATFORM=offscreen.")
    return None


_PLATFORM_NOTES = ("This plugin does not support",)


def _quiet_platform_notes(mode, context, message: str) -> None:
    """Drop the offscreen platform's notes about window features it lacks; print everything else."""
    if message.startswith(_PLATFORM_NOTES):
        return
    print(message, file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kforge-desktop", description="Kernel Forge Desktop: the window.")
    ap.add_argument("path", nargs="?", help="a session file to open, or a problem/model .py file to start on")
    ap.add_argument("--reset-layout", action="store_true", help="forget the saved window layout")
    ap.add_argument("--theme", choices=("system", "light", "dark"), help="override the theme for this run")
    ap.add_argument("--no-tour", action="store_true", help="do not show the first-run tour")
    ap.add_argument("--quit-after", type=float, default=0.0, metavar="S",
                    help="close after S seconds (smoke tests of an installed bundle)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    hint = headless_hint()
    if hint:
        print(f"kforge-desktop: {hint}", file=sys.stderr)
        return 2
    from .qt_libs import startup_problem

    problem = startup_problem()  # before Qt: a missing X11 library would make it abort the process
    if problem:
        print(f"kforge-desktop: {problem}", file=sys.stderr)
        return 1
    from PySide6.QtCore import QTimer, qInstallMessageHandler
    from PySide6.QtWidgets import QApplication

    from .settings import APP, ORG

    qInstallMessageHandler(_quiet_platform_notes)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setOrganizationName(ORG)
    app.setApplicationName(APP)
    app.setApplicationDisplayName("Kernel Forge Desktop")
    app.setDesktopFileName("kforge-desktop")

    from .main_window import MainWindow, app_icon
    from .settings import Settings

    app.setWindowIcon(app_icon())
    settings = Settings()
    if args.reset_layout:
        settings.clear_window()
    if args.theme:
        settings.set_theme(args.theme)
    win = MainWindow(settings)
    win.show()
    if args.path:
        win.open_path(Path(args.path).expanduser())
    if win.first_run and not args.no_tour:
        QTimer.singleShot(0, win.start_first_run)  # opens the bundled example unless a file was given
    elif not args.path and settings.recent():
        last = Path(settings.recent()[0])
        if last.exists():
            win.open_session(last)
    if args.quit_after > 0:
        QTimer.singleShot(int(args.quit_after * 1000), win.close_without_asking)
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
