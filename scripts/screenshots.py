"""Screenshots of the real main window for docs/tutorial.md, saved into docs/images/.

    .venv/bin/python scripts/screenshots.py            # real search with the small default model
    .venv/bin/python scripts/screenshots.py --budget 6 --model models/...gguf

It runs the window offscreen, starts a real search on the bundled row-softmax example (the local
GGUF writes kernels; the evaluator builds, checks and times them in worker processes), takes the
shots while the search runs and after it ends, then adds a large tree from the synthetic session of
benchmarks/gui_tree.py (marked as such in the tutorial) and a whole-model session's targets.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
OUT = REPO / "docs" / "images"

from PySide6.QtWidgets import QApplication  # noqa: E402

import kforge_desktop.gui  # noqa: E402,F401  (binding guard first)

W, H = 1560, 980


def pump(app: QApplication, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()
        time.sleep(0.01)


def wait_for(app: QApplication, predicate, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        pump(app, 0.1)
    return predicate()


def shot(app: QApplication, widget, name: str) -> Path:
    pump(app, 0.3)
    path = OUT / name
    widget.grab().save(str(path))
    print(f"saved {path.relative_to(REPO)}")
    return path


def shot_with_dialog(app: QApplication, w, dialog, name: str) -> Path:
    """The window with a (separate, top-level) dialog painted where it sits over it."""
    from PySide6.QtCore import QPoint
    from PySide6.QtGui import QPainter

    pump(app, 0.3)
    img = w.grab()
    pix = dialog.grab()
    p = QPainter(img)
    pos = dialog.pos() - w.pos()
    p.drawPixmap(QPoint(max(0, pos.x()), max(0, pos.y())), pix)
    p.end()
    path = OUT / name
    img.save(str(path))
    print(f"saved {path.relative_to(REPO)}")
    return path


def window(tmp: Path, name: str):
    from kforge_desktop.gui.main_window import MainWindow, settings_for_tests

    folder = tmp / f"settings-{name}"
    folder.mkdir(parents=True, exist_ok=True)
    w = MainWindow(settings_for_tests(folder), first_run=False)
    w.resize(W, H)
    w.show()
    return w


def select_interesting(w) -> int | None:
    """The chosen node if any, else the newest evaluated candidate."""
    nid = w.session.chosen_id()
    if nid is None:
        done = [n.id for n in w.session.nodes().values() if n.verdict is not None and n.origin != "root"]
        nid = done[-1] if done else None
    if nid is not None:
        w.tree_widget.find_node(nid)
        w.tree_widget.view.fit()
    return nid


def real_search(app: QApplication, tmp: Path, budget: int, model: str | None) -> None:
    from kforge_desktop.gui.settings import LLMChoices

    w = window(tmp, "real")
    w.settings.set_llm(LLMChoices(model_path=model or "", temperature=0.7, max_tokens=640, context=4096))
    w._update_llm_button()
    w._update_status_labels()
    w.open_example()
    w.budget_spin.setValue(budget)
    w.start_search()
    # during the search: once a few candidates are in
    wait_for(app, lambda: sum(1 for n in w.session.nodes().values() if n.origin == "llm" and n.verdict) >= 2
             or not w.controller.running, 1800)
    w.session.refresh()
    w.tree_widget.wait_idle()
    select_interesting(w)
    shot(app, w, "main-window-during-search.png")
    wait_for(app, lambda: not w.controller.running, 3600)
    w.session.refresh()
    w.tree_widget.wait_idle()
    nid = select_interesting(w)
    shot(app, w, "main-window-after-search.png")
    nodes = w.session.nodes()
    # a diff worth showing: an evaluated node whose parent is a kernel too (not the reference)
    steps = [n.id for n in nodes.values() if n.verdict is not None and n.parent_id in nodes
             and nodes[n.parent_id].origin != "root" and n.origin in ("llm", "user")]
    if steps or nid is not None:
        w.session.select(steps[-1] if steps else nid)
        w.code_widget.set_compare("parent")
        w.code_widget.set_layout("side")
        w.code_dock.raise_()
        shot(app, w.code_dock, "code-diff-side-by-side.png")
        w.code_widget.set_layout("unified")
    llm = [n.id for n in w.session.nodes().values() if n.origin == "llm"]
    if llm:
        w.session.select(llm[-1])
        w.inspector_widget.tabs.setCurrentIndex(3)
        shot(app, w.inspector_dock, "inspector-llm-exchange.png")
    # the verdict of a correct candidate says the most (timings, errors): prefer the model's own
    correct = [n.id for n in w.session.nodes().values() if n.speedup is not None and n.origin != "root"]
    own = [i for i in correct if w.session.light(i).origin == "llm"]
    if own or correct:
        w.session.select((own or correct)[-1])
        w.inspector_widget.tabs.setCurrentIndex(0)
        shot(app, w.inspector_dock, "inspector-verdict.png")
    w.set_theme("dark")
    select_interesting(w)
    shot(app, w, "main-window-dark.png")
    w.set_theme("light")
    w.code_widget.set_compare("none")
    w.show_tour()
    w._tour.go(2)
    pump(app, 0.3)
    shot_with_dialog(app, w, w._tour, "first-run-tour.png")
    w._tour.close()
    w.close_without_asking()


def synthetic_tree(app: QApplication, tmp: Path) -> None:
    from gui_tree import make_session

    path = tmp / "synthetic.kforge"
    store, _ = make_session(path, 800, seed=5)
    store.close()
    w = window(tmp, "synthetic")
    w.open_session(path)
    w.tree_widget.wait_idle()
    select_interesting(w)
    w.tree_widget.view.fit()
    shot(app, w.tree_dock, "tree-800-nodes-synthetic.png")
    w.close_without_asking()


def model_targets(app: QApplication, tmp: Path) -> None:
    w = window(tmp, "model")
    w.new_session(REPO / "resources" / "examples" / "llm_block.py")
    wait_for(app, lambda: w._model_job is None, 600)
    w.targets_widget.refresh()
    from PySide6.QtCore import Qt

    w.resizeDocks([w.targets_dock, w.tree_dock], [300, 500], Qt.Orientation.Vertical)
    shot(app, w, "targets-whole-model.png")
    w.close_without_asking()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=5, help="LLM candidates in the real search")
    ap.add_argument("--model", help="a GGUF (default: the default model found in models/)")
    ap.add_argument("--skip-real", action="store_true", help="only the synthetic tree and the model targets")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="kforge-shots-"))
    os.environ.setdefault("KFORGE_SESSIONS_DIR", str(tmp / "sessions"))
    app = QApplication.instance() or QApplication([])
    if not args.skip_real:
        real_search(app, tmp, args.budget, args.model)
    synthetic_tree(app, tmp)
    model_targets(app, tmp)


if __name__ == "__main__":
    main()
