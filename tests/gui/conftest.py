"""Fixtures for the desktop tests: the real main window, offscreen, with its own settings file and
sessions folder, so a test never reads or writes the user's."""

from __future__ import annotations

import faulthandler
import signal
import sys
from pathlib import Path

import pytest

pytest.importorskip("PySide6")
if hasattr(signal, "SIGUSR1"):  # `kill -USR1 <pid>` prints every thread's stack if a GUI test hangs
    faulthandler.register(signal.SIGUSR1, all_threads=True)
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))  # gui_tree.SyntheticSearch writes realistic sessions
sys.path.insert(0, str(Path(__file__).resolve().parent))  # kforge_gui_testing (helpers)


@pytest.fixture()
def gui_env(tmp_path, monkeypatch):
    monkeypatch.setenv("KFORGE_SESSIONS_DIR", str(tmp_path / "sessions"))
    monkeypatch.setenv("KFORGE_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


@pytest.fixture()
def make_window(qtbot, gui_env):
    """``make_window()`` -> a shown MainWindow with private settings; closed (searches stopped) at the end."""
    import kforge_desktop.gui  # noqa: F401  (applies the binding guard first)
    from kforge_desktop.gui.main_window import MainWindow, settings_for_tests

    made = []

    def make(settings_dir: Path | None = None, first_run: bool = False) -> MainWindow:
        folder = settings_dir or (gui_env / "settings")
        folder.mkdir(parents=True, exist_ok=True)
        w = MainWindow(settings_for_tests(folder), first_run=first_run)
        w.confirm = lambda *_a: True  # no modal question offscreen; tests that check it set their own
        qtbot.addWidget(w)
        w.resize(1400, 900)
        w.show()
        made.append(w)
        return w

    yield make
    for w in made:
        if w.isVisible() or w.controller.running:
            w.close_without_asking()


@pytest.fixture()
def synthetic_session(gui_env):
    """A real session file with a plausible 60-node search tree, written through SessionStore."""
    from gui_tree import make_session

    path = gui_env / "synthetic.kforge"
    store, synth = make_session(path, 60, seed=3)
    store.close()
    return path, synth
