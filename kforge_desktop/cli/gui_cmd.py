"""``kforge desktop [SESSION_OR_PROBLEM]``: open the window (the same as ``kforge-desktop``).

The app runs in a process of its own, so the rest of the CLI works on machines without Qt or
without a display; there the app says plainly how to run headless.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .errors import UserError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "desktop", help="open the desktop app (on a session, a problem or a model file)",
        description="Open the Kernel Forge Desktop window. With a session file it reopens that search; with a "
                    "problem or model .py file it starts a new session on it.",
    )
    p.add_argument("path", nargs="?", metavar="SESSION_OR_PROBLEM", help="a session file or a problem/model .py file")
    p.add_argument("--reset-layout", action="store_true", help="forget the saved window layout")
    p.add_argument("--theme", choices=("system", "light", "dark"), help="override the theme")
    p.add_argument("--no-tour", action="store_true", help="do not show the first-run tour")
    p.set_defaults(func=_desktop)


def _desktop(args) -> int:
    """Run the desktop app as its own process: the CLI never imports Qt (the GUI sits above every
    other package), and the app's own start-up checks (display, Qt's system libraries) speak for it."""
    if args.path and not Path(args.path).expanduser().exists():
        raise UserError(f"{args.path} does not exist; give a session file or a problem/model .py file.")
    argv = [args.path] if args.path else []
    if args.reset_layout:
        argv.append("--reset-layout")
    if args.theme:
        argv += ["--theme", args.theme]
    if args.no_tour:
        argv.append("--no-tour")
    return subprocess.call([sys.executable, "-m", "kforge_desktop.gui.app", *argv])
