"""Screenshots of the real window under a real X server (Xvfb), for the tutorial and for issues
about what the window shows: colours that follow the verdict, the candidate table, a session
another process is searching, a problem file that cannot run, the question before a second
session file, and a column layout that holds still while you click.

    apt-get install -y xvfb imagemagick libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1
    Xvfb :99 -screen 0 1600x1000x24 &
    DISPLAY=:99 .venv/bin/python scripts/window_shots.py --out /tmp/shots [--prefix after]

The sessions are written through the real SessionStore (``tests/gui/kforge_gui_testing.py``:
verdicts as a GPU search records them); "another process" is a second Python process that holds
the session open with its search state "running", as ``kforge optimize`` does. Each picture is the
whole screen (``import -window root``), so dialogs are in it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "gui"))

WRITER = textwrap.dedent("""
    import sys, time
    from kforge_desktop.store import SessionStore, SearchState
    sys.path.insert(0, sys.argv[2])
    from kforge_gui_testing import MODULE, KERNEL, _ok
    store = SessionStore.open(sys.argv[1])
    pid = store.problems()[0].id
    cfg = store.search_state(pid).config
    store.save_search_state(SearchState(problem_id=pid, strategy="mcts", budget_candidates=6,
                                        budget_minutes=None, config=cfg, status="running"))
    root = store.root(pid).id
    for i in range(3):
        nid = store.add_node(pid, root, "llm", "whole", "cpp", source=MODULE.format(kernel=KERNEL), kernel_source=KERNEL)
        store.record_verdict(nid, _ok(1.1 + 0.1 * i, 0.4, 0.01, 0.3))
        store.log_event(pid, "log", f"asking the model for candidate {i + 2}")
    print("ready", flush=True)
    time.sleep(float(sys.argv[3]))
""")
BROKEN = '''"""A problem whose get_inputs() raises (a typo in a shape)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(256, "1024")]


def get_init_inputs():
    return []
'''


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/shots"))
    ap.add_argument("--prefix", default="window")
    args = ap.parse_args()
    if not os.environ.get("DISPLAY"):
        print("window_shots: set DISPLAY (run Xvfb :99 first)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="kforge-shots-"))
    os.environ["KFORGE_SESSIONS_DIR"] = str(tmp / "sessions")
    os.environ["KFORGE_DATA_DIR"] = str(tmp / "data")

    from PySide6.QtCore import Qt, QTimer
    from PySide6.QtWidgets import QApplication, QMessageBox

    import kforge_desktop.gui  # noqa: F401  (binding guard first)

    app = QApplication.instance() or QApplication([])
    from kforge_gui_testing import write_verdict_session

    from kforge_desktop.gui.main_window import MainWindow, settings_for_tests

    def pump(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            app.processEvents()
            time.sleep(0.01)

    def shot(name: str) -> None:
        pump(0.5)
        path = args.out / f"{args.prefix}-{name}.png"
        subprocess.run(["import", "-window", "root", str(path)], check=True)
        print(f"saved {path}")

    def answer_modal(name: str, button_prefix: str) -> None:
        box = QApplication.activeModalWidget()
        if isinstance(box, QMessageBox):
            shot(name)
            for b in box.buttons():
                if b.text().replace("&", "").startswith(button_prefix):
                    b.click()
                    return
            box.accept()

    (tmp / "settings").mkdir(parents=True)
    w = MainWindow(settings_for_tests(tmp / "settings"), first_run=False)
    w.move(0, 0)
    w.resize(1600, 1000)
    w.show()
    pump(1.0)
    session = tmp / "verdicts.kforge"
    ids = write_verdict_session(session)
    w.open_session(session)
    w.tree_widget.wait_idle()

    # a narrow code column; select a child of a kernel, then a child of the reference
    w.resizeDocks([w.tree_dock, w.code_dock], [960, 630], Qt.Orientation.Horizontal)
    w.code_widget.set_compare("parent")
    w.session.select(ids["win"])
    shot("1a-child-of-a-kernel")
    w.session.select(ids["noise"])
    shot("1b-child-of-the-reference")
    w.panels.size()

    w.code_widget.set_compare("none")
    w.session.select(ids["build"])
    w.session.select(None)
    shot("2-empty-code-view")

    w.session.select(ids["noise"])
    w.inspector_widget.tabs.setCurrentIndex(0)
    shot("3a-verdict-colours")
    w.set_theme("dark")
    shot("3b-verdict-colours-dark")
    w.set_theme("light")
    w.session.select(ids["host"])
    shot("3c-host-overhead-only")
    w.candidates_dock.raise_()
    w.candidates_widget.sort_by("speedup", descending=True)
    w.session.select(ids["disturbed"])
    shot("8a-candidate-table")
    w.tree_dock.raise_()

    # leave it with a live answer, a log line and a zoom, then open the bundled example
    w.inspector_widget.tabs.setCurrentIndex(w.inspector_widget.tabs.count() - 1)
    w.run._engine_log("info", "asking the model for a whole kernel", "")
    w.run._tokens("__global__ void softmax_kernel(/* the last session's answer */)", 17.3)
    w.log_widget.add("warning", "a line about the last session", "its detail")
    w.plot_widget.plot.setXRange(0, 40)
    QTimer.singleShot(1500, lambda: answer_modal("8b-existing-session-question", "Create"))
    w.open_example()
    w.tree_widget.wait_idle()
    shot("4-the-next-session")
    w.inspector_widget.tabs.setCurrentIndex(0)
    w.session.select(next(n.id for n in w.session.nodes().values() if n.origin == "seed"))
    shot("6-before-any-search")

    # a session another process is searching
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.config import SearchConfig
    from kforge_desktop.search.engine import create_session
    from kforge_desktop.store import SessionStore

    other = tmp / "cli.kforge"
    store = SessionStore(other)
    create_session(store, load_problem(REPO / "resources" / "problems" / "softmax.py"),
                   SearchConfig(budget_candidates=6, seeds=False))
    store.close()
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(other), str(REPO / "tests" / "gui"), "60"],
                              stdout=subprocess.PIPE, text=True)
    try:
        writer.stdout.readline()
        w.open_session(other)
        w.tree_widget.wait_idle()
        pump(1.5)
        shot("5-searched-by-another-process")
    finally:
        writer.kill()
        writer.wait()

    broken = tmp / "typo_problem.py"
    broken.write_text(BROKEN)
    QTimer.singleShot(1500, lambda: answer_modal("7a-problem-cannot-run", "OK"))
    w.open_path(broken)
    pump(0.5)
    shot("7b-start-off-until-fixed")
    w.close_without_asking()
    return 0


if __name__ == "__main__":
    sys.exit(main())
