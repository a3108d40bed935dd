"""What a new user met in their first hour with the window, each as the behaviour they should see:
a layout that holds still on selection, a plain hint in the empty code view, colours that follow
the verdict's own judgement, nothing of one session left in the next, Start refused while another
process searches the session or while the problem cannot be searched, one count everywhere, and
what napari or Spyder users expect (export, a sortable candidate table, preferences, shortcuts,
recent sessions by name, a question before a second session file for the same problem)."""

from __future__ import annotations

import statistics
import subprocess
import sys
import textwrap

import pytest
from kforge_gui_testing import REPO, wait_until, write_verdict_session
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor


@pytest.fixture()
def verdict_session(gui_env):
    path = gui_env / "verdicts.kforge"
    return path, write_verdict_session(path)


def _widths(w) -> tuple[int, int]:
    return w.tree_dock.width(), w.code_dock.width()


def test_selection_never_changes_the_width_of_the_columns(qtbot, make_window, verdict_session):
    """A child of the reference compares whole modules; saying so must not widen the code column
    (the tree would move under the mouse and the next click land elsewhere)."""
    path, ids = verdict_session
    w = make_window()
    assert w.open_session(path)
    w.resizeDocks([w.tree_dock, w.code_dock], [860, 520], Qt.Orientation.Horizontal)
    w.code_widget.set_compare("parent")
    w.session.select(ids["win"])
    qtbot.wait(50)
    before = _widths(w)
    for role in ("noise", "root", "incorrect", "win", "disturbed"):
        w.session.select(ids[role])
        qtbot.wait(30)
        assert _widths(w) == before, f"selecting #{ids[role]} ({role}) resized the columns"
    w.session.select(ids["noise"])
    assert "whole modules" in w.code_widget.stats_label.text()  # still said, in the header's own width
    assert "no kernel" in w.code_widget.stats_label.toolTip()


def test_the_empty_code_view_shows_a_plain_hint(make_window, verdict_session):
    path, ids = verdict_session
    w = make_window()
    w.open_session(path)
    w.session.select(ids["build"])  # highlighted C++ ends in some token's colour and weight
    w.session.select(None)
    view = w.code_widget.single
    assert view.is_message and view.toPlainText().startswith("Select a node")
    cursor = QTextCursor(view.document())
    cursor.setPosition(3)
    fmt = cursor.charFormat()
    assert not fmt.fontItalic() and fmt.fontWeight() <= 400
    assert fmt.foreground().color() == view.palette().placeholderText().color()
    w.close_session()
    w.open_session(path)  # and after switching sessions
    fmt = QTextCursor(w.code_widget.single.document()).charFormat()
    assert not fmt.fontItalic() and fmt.fontWeight() <= 400


def test_colours_and_the_best_follow_the_verdicts_own_judgement(make_window, verdict_session):
    from kforge_desktop.gui.docks.inspector.widget import verdict_rows
    from kforge_desktop.gui.status import classify

    path, ids = verdict_session
    w = make_window()
    w.open_session(path)
    w.tree_widget.wait_idle()
    light = w.session.light
    assert classify(light(ids["win"])) == "faster"
    assert classify(light(ids["noise"])) == "slower"  # 3.51x within the noise: not a win
    assert classify(light(ids["disturbed"])) == "disturbed"  # 4.20x on a disturbed machine: not a win
    assert classify(light(ids["delegates"])) == "delegates"
    assert classify(light(ids["host"])) == "slower"  # host overhead only: never a kernel speedup
    drawn = w.tree_widget.view.tree._g.drawn
    assert drawn[ids["noise"]].cls != "faster" and drawn[ids["disturbed"]].cls != "faster"
    plotted = {k: ids_ for k, (_x, _y, ids_) in w.plot_widget.data.by_class.items()}
    assert ids["noise"] not in plotted.get("faster", []) and ids["win"] in plotted["faster"]
    # the fastest win, not the biggest number, is the best; the pinned seed is the chosen one
    assert w.session.best_id() == ids["win"] and w.session.chosen_id() == ids["seed"]
    assert w.plot_widget.data.best == pytest.approx(2.60)
    # one torch.compile line: the median of the verdicts' readings, and it says so
    readings = [n.verdict.baseline_ms / n.verdict.compile_baseline_ms for n in w.session.nodes().values()
                if n.verdict and n.verdict.compile_baseline_ms]
    assert len(set(round(r, 2) for r in readings)) > 1  # the readings differ between verdicts
    assert w.plot_widget.data.compile_speedup == pytest.approx(statistics.median(readings))
    assert "median of" in w.plot_widget.compile_line.label.format
    assert "device time" in w.plot_widget.plot.getAxis("left").labelText
    # the inspector says what the numbers are
    rows = dict(verdict_rows(light(ids["host"])))
    assert rows["times are"].startswith("device time") and "one call" in rows["latency (median)"]
    assert "not a faster kernel" in rows["host overhead"] and rows["ran on"] == "cuda"
    assert "never chosen or exported unless you pin it" in dict(verdict_rows(light(ids["delegates"])))["delegates"]
    assert "re-time" in dict(verdict_rows(light(ids["disturbed"])))["disturbed"]
    # the fastest win's ring and the pin look different in the dark theme too
    w.set_theme("dark")
    colors = w.theme.tree_colors()
    assert colors["best_edge"] != colors["pin"]


def test_nothing_of_one_session_stays_in_the_next(qtbot, make_window, verdict_session):
    path, ids = verdict_session
    w = make_window()
    w.open_session(path)
    w.run._engine_log("info", "asking the model for a whole kernel", "")
    w.run._tokens("__global__ void k() {}", 17.3)
    w.log_widget.add("warning", "a line about the first session", "its detail")
    w.log_widget.table.selectRow(w.log_widget.proxy.rowCount() - 1)
    w.plot_widget.plot.setXRange(0, 40)
    w.code_widget.set_compare("node", other_id=ids["win"])
    assert w.inspector_widget.live_view.toPlainText() and w.status_line.tps_label.text()
    assert w.open_example()
    assert w.inspector_widget.live_view.toPlainText() == ""
    assert w.status_line.tps_label.text() == "" and w.status_line.eta_label.text() == ""
    messages = [w.log_widget.proxy.index(r, 3).data() for r in range(w.log_widget.proxy.rowCount())]
    assert "a line about the first session" not in messages
    assert w.log_widget.detail.toPlainText() == ""
    assert w.plot_widget.plot.getViewBox().viewRange()[0][1] < 40  # not the last session's x axis
    assert w.code_widget.other_edit.text() == ""
    # and tok/s goes when a search ends
    w.status_line.show_tokens_rate(12.0)
    w.run._running_changed(False)
    assert w.status_line.tps_label.text() == ""


def test_a_long_finish_message_ends_in_an_ellipsis_and_keeps_its_whole_text(qtbot, make_window, verdict_session):
    from kforge_desktop.search import events as ev

    path, _ids = verdict_session
    w = make_window()
    w.open_session(path)
    w.run._finished(ev.Finished(problem_id=w.session.problem_id, reason="repeats", best_node_id=None))
    bar = w.statusBar()
    shown, whole = bar.currentMessage(), bar.toolTip()
    assert whole.startswith("Search finished: the model only repeats earlier kernels; chosen node #")
    assert shown.endswith("…") and whole.startswith(shown[:-1])  # cut visibly, not silently mid-word
    qtbot.wait(50)  # the labels take their widths
    labels = sum(lab.width() for lab in (w.status_line.phase_label, w.status_line.device_label,
                                         w.status_line.model_label, w.status_line.yield_label,
                                         w.status_line.progress_label, w.status_line.progress_bar))
    assert w.status_line.phase_label.text() == "the model only repeats earlier kernels"
    assert bar.fontMetrics().horizontalAdvance(shown) <= bar.width() - labels
    w.status_message("Copied the code of node #3.")
    assert bar.currentMessage() == bar.toolTip() == "Copied the code of node #3."


WRITER = textwrap.dedent("""
    import sys, time
    from kforge_desktop.store import SessionStore, SearchState
    store = SessionStore.open(sys.argv[1])
    pid = store.problems()[0].id
    s = store.search_state(pid)
    store.save_search_state(SearchState(problem_id=pid, strategy="mcts", budget_candidates=6,
                                        budget_minutes=None, config=s.config, status="running"))
    print("ready", flush=True)
    time.sleep(120)
""")


def test_the_window_opens_whole_on_a_screen_smaller_than_it(qtbot, gui_env):
    """On a laptop-sized screen neither the default size nor one saved on a larger screen may push the status bar
    or the right-hand docks past the edge (the offscreen screen is 800x800, smaller than the default window)."""
    from kforge_desktop.gui.main_window import MainWindow, settings_for_tests

    folder = gui_env / "settings"
    folder.mkdir()
    first = MainWindow(settings_for_tests(folder))
    qtbot.addWidget(first)
    room = first.screen().availableGeometry()
    assert room.contains(first.frameGeometry()), (first.frameGeometry(), room)
    first.resize(1900, 1200)  # as if saved on a large monitor, then moved off towards the corner
    first.move(room.right() - 100, room.bottom() - 100)
    first.close_without_asking()  # saves the geometry

    again = MainWindow(settings_for_tests(folder))
    qtbot.addWidget(again)
    assert again.width() < 1900 and again.height() < 1200
    assert room.contains(again.frameGeometry()), (again.frameGeometry(), room)
    again.close_without_asking()


def test_the_status_bar_shows_no_empty_parts(qtbot, make_window, verdict_session):
    """Rates and estimates exist only while a search runs, a count only with a session: a part with nothing to say
    is not shown, so the bar has no gaps and the message keeps the room."""
    from PySide6.QtWidgets import QLabel, QWidget

    def shown():
        return {x.objectName(): (x.text() if isinstance(x, QLabel) else "bar")
                for x in w.statusBar().findChildren(QWidget)
                if x.isVisible() and x.objectName().endswith(("Label", "progressBar"))}

    w = make_window()
    qtbot.wait(20)
    parts = shown()
    assert "progressBar" not in parts and "progressLabel" not in parts  # no session, no count
    assert all(text != "" for name, text in parts.items() if name != "progressBar"), parts
    path, _ids = verdict_session
    w.open_session(path)
    qtbot.wait(20)
    parts = shown()
    assert parts.get("progressLabel", "").endswith("candidates") and "progressBar" in parts
    assert "tokensLabel" not in parts and "etaLabel" not in parts and "rateLabel" not in parts  # nothing runs
    assert all(text != "" for name, text in parts.items() if name != "progressBar"), parts


def test_a_session_without_a_stored_budget_shows_its_count_alone(qtbot, make_window, verdict_session):
    """A session whose search stored no budget (written by an older version, or by a script) is not "7 of 2
    candidates": the toolbar's budget is the next search's, not this session's."""
    import sqlite3

    path, _ids = verdict_session
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM search_state")
    w = make_window()
    w.budget_spin.setValue(2)
    assert w.open_session(path)
    assert w.session.budget() is None
    qtbot.wait(20)
    text = w.status_line.progress_label.text()
    done = int(text.split()[0])
    assert done > 2 and text == f"{done} candidates"


def test_start_is_off_while_another_process_searches_the_session(qtbot, make_window, gui_env):
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.config import SearchConfig
    from kforge_desktop.search.engine import create_session
    from kforge_desktop.store import SessionStore

    path = gui_env / "cli.kforge"
    store = SessionStore(path)
    create_session(store, load_problem(REPO / "resources" / "problems" / "softmax.py"),
                   SearchConfig(budget_candidates=6, seeds=False))
    store.close()
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "ready"
        w = make_window()
        w.budget_spin.setValue(12)
        assert w.open_session(path)
        assert not w.act_start.isEnabled()
        reason = w.start_banner.label.text()
        assert w.start_banner.bar.isVisible() and f"pid {writer.pid}" in reason and "Start is off" in reason
        assert f"searched elsewhere (pid {writer.pid})" == w.status_line.phase_label.text()
        assert "python -c" in reason
        assert w.targets_widget.model.rows[0].status.startswith("running elsewhere")
        assert w.budget_spin.value() == 6  # the session's own budget, not the toolbar's last one
        assert not w.start_search()  # the shortcut is refused too
    finally:
        writer.kill()
        writer.wait()
    w.run.check_owner()
    assert w.act_start.isEnabled() and not w.start_banner.bar.isVisible()
    assert w.targets_widget.model.rows[0].status == "interrupted"  # "running" written by a dead process


def test_every_view_gives_the_same_counts(make_window, verdict_session):
    from kforge_desktop.gui.status import describe

    w = make_window()
    assert w.open_example()
    w.tree_widget.wait_idle()
    store, pid = w.session.store, w.session.problem_id
    budget = store.search_state(pid).budget_candidates
    done = store.candidates_done(pid)
    assert w.targets_widget.model.rows[0].candidates == done
    assert f"{done} of {budget} candidates" in w.tree_widget.count_label.text()
    assert w.status_line.progress_label.text() == f"{done} of {budget} candidates"
    seed = next(n for n in w.session.nodes().values() if n.origin == "seed")
    # before any search, a seed waits: it is not "evaluating"
    assert "evaluating" not in describe(seed, running=False).replace("evaluated first", "")
    assert describe(seed, running=False).startswith(f"#{seed.id} seed:")  # said once, not "(seed, seed)"
    root = next(n for n in w.session.nodes().values() if n.origin == "root")
    assert describe(root).startswith(f"#{root.id} reference:")

    path, _ids = verdict_session
    w.open_session(path)
    w.tree_widget.wait_idle()
    store, pid = w.session.store, w.session.problem_id
    done, budget = store.candidates_done(pid), store.search_state(pid).budget_candidates
    assert w.targets_widget.model.rows[0].candidates == done == w.plot_widget.data.candidates
    assert f"{done} of {budget} candidates" in w.tree_widget.count_label.text()
    assert w.status_line.progress_label.text() == f"{done} of {budget} candidates"


def test_a_problem_whose_get_inputs_raises_is_refused_until_fixed(qtbot, make_window, gui_env):
    bad = gui_env / "typo_problem.py"
    good = (REPO / "resources" / "problems" / "softmax.py").read_text()
    bad.write_text(good.replace("torch.randn(batch_size, dim)", 'torch.randn(batch_size, "1024")'))
    w = make_window()
    assert not w.open_path(bad)
    sentence = w.shown_errors[-1][0]
    assert "get_inputs() raised TypeError" in sentence and "Traceback" not in sentence
    assert not list((gui_env / "sessions").glob("typo_problem-*.kforge"))  # no session file for it
    assert not w.act_start.isEnabled() and "get_inputs()" in w.start_banner.label.text()
    assert not w.start_search()  # Start does not go to the model (nor to the bundled example)
    bad.write_text(good)
    wait_until(qtbot, lambda: w.session.store is not None, 10, "the fixed file to open")  # watched
    assert w.act_start.isEnabled() and not w.start_banner.bar.isVisible()


def test_a_session_whose_problem_cannot_run_is_refused_at_start(make_window, gui_env):
    """A session file is data (opening it runs nothing); its problem is checked when Start is
    pressed: one sentence, not a search that goes to the model, and Start stays off."""
    from kforge_desktop.problem.problem import Problem
    from kforge_desktop.search.config import SearchConfig
    from kforge_desktop.search.engine import create_session
    from kforge_desktop.store import SessionStore

    source = (REPO / "resources" / "problems" / "softmax.py").read_text()
    source = source.replace("return [torch.randn(batch_size, dim)]", "raise ValueError('no inputs today')")
    path = gui_env / "made-by-cli.kforge"
    store = SessionStore(path)
    create_session(store, Problem("softmax", source, None), SearchConfig(budget_candidates=2, seeds=False))
    store.close()
    w = make_window()
    assert w.open_session(path) and w.act_start.isEnabled()
    assert not w.start_search() and not w.controller.running
    assert "get_inputs() raised ValueError: no inputs today" in w.shown_errors[-1][0]
    assert not w.act_start.isEnabled() and "no inputs today" in w.start_banner.label.text()


def test_export_of_a_problem_session_writes_the_chosen_module(make_window, verdict_session, gui_env):
    path, ids = verdict_session
    w = make_window()
    w.open_session(path)
    out = gui_env / "out" / "softmax_kernel.py"
    assert w.tools.export(out) is None
    assert out.read_text() == w.session.store.node(ids["seed"]).source  # the pinned node
    assert "class ModelNew" in out.read_text()


def test_export_of_a_model_session_writes_the_kforge_export_package(qtbot, make_window, gui_env, build_cache):
    """The same package as ``kforge export``: written by its public function, off the UI thread."""
    from kforge_desktop.kernels.verdict import Verdict
    from kforge_desktop.modelopt.session import create_model_session
    from kforge_desktop.search.config import SearchConfig

    model = REPO / "resources" / "examples" / "llm_block.py"
    kernel = (REPO / "resources" / "examples" / "kernels" / "llm_block_rms_norm.py").read_text()
    path = gui_env / "llm_block.kforge"
    s = create_model_session(model, path, SearchConfig(budget_candidates=0), total_budget=0)
    pid = s.problem_ids[next(n for n in s.problem_ids if "rms_norm" in n)]
    nid = s.store.add_node(pid, s.store.root(pid).id, "user", "user", "cpp", source=kernel, kernel_source=kernel,
                           state="evaluated")
    s.store.record_verdict(nid, Verdict(status="ok", reason="correct", speedup=1.5, latency_ms=0.1,
                                        baseline_ms=0.15, significant=True))
    s.store.set_pinned(nid)  # the user's choice: export uses it
    s.store.close()
    w = make_window()
    assert w.open_session(path) and w.acts.export.isEnabled()
    out = gui_env / "export"
    job = w.tools.export(out, bench=False)
    assert job is not None and job.dialog.isVisible()  # progress, not a frozen window
    wait_until(qtbot, lambda: job.finished, 600, "the export to finish")
    assert job.error == "", job.error
    packages = [p for p in out.iterdir() if p.is_dir()]
    assert len(packages) == 1 and packages[0].name.endswith("_kernels")
    for name in ("__init__.py", "native.py", "runtime.py", "plan.json", "record.json"):
        assert (packages[0] / name).exists(), name
    assert list((packages[0] / "kernels").glob("*.py")) and (out / "REPORT.md").exists()


def test_candidate_table_sorts_by_time_speedup_and_status(make_window, verdict_session):
    path, ids = verdict_session
    w = make_window()
    w.open_session(path)
    table = w.candidates_widget
    assert set(table.shown_ids()) == set(w.session.nodes())  # every node, read from the session
    table.sort_by("speedup", descending=True)
    assert table.shown_ids()[:3] == [ids["disturbed"], ids["noise"], ids["delegates"]]
    table.sort_by("time")
    assert table.shown_ids()[0] == ids["disturbed"]  # 6.67 ms
    table.sort_by("status")
    assert set(table.shown_ids()[:2]) == {ids["seed"], ids["win"]}  # the measured wins first
    # a row selects the node everywhere; a node selected elsewhere is selected in the table
    table.table.selectRow(3)
    assert w.session.selected_id == table.shown_ids()[3]
    w.session.select(ids["host"])
    assert table.table.currentIndex().data(Qt.ItemDataRole.UserRole) == ids["host"]
    w.session.store.set_excluded(ids["host"], True)  # a change in the store shows after a refresh
    w.session.refresh()
    assert len(table.shown_ids()) == len(w.session.nodes())


def test_opening_a_problem_again_asks_before_another_session_file(make_window, gui_env):
    problem = REPO / "resources" / "problems" / "softmax.py"
    w = make_window()
    assert w.new_session(problem)
    first = w.session.path
    asked = []
    w.sessions.choose_existing = lambda source, found: asked.append(found) or "open"
    assert w.open_path(problem)
    assert asked and asked[0] == [first] and w.session.path == first
    w.sessions.choose_existing = lambda source, found: "cancel"
    assert not w.open_path(problem) and w.session.path == first
    w.sessions.choose_existing = lambda source, found: "new"
    assert w.open_path(problem) and w.session.path != first


def test_recent_sessions_are_named_with_their_status(make_window, verdict_session):
    from PySide6.QtWidgets import QMenu

    path, _ids = verdict_session
    w = make_window()
    w.open_session(path)
    menu = QMenu()
    w.sessions.fill_recent(menu)
    first = menu.actions()[0]
    assert first.text().startswith("softmax — 7 candidates, best win 2.60× · stopped")
    assert first.toolTip() == str(path.resolve())


def test_preferences_are_saved_and_used(make_window, gui_env, monkeypatch):
    import os

    from kforge_desktop import paths

    for var in ("KFORGE_MODELS_DIR", "KFORGE_LLM_THREADS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("KFORGE_SESSIONS_DIR", str(gui_env / "sessions"))
    w = make_window()

    def fill(dlg):
        dlg.models_dir.setText(str(gui_env / "my-models"))
        dlg.sessions_dir.setText(str(gui_env / "my-sessions"))
        dlg.workers.setValue(3)
        dlg.threads.setValue(2)
        dlg.accept()

    w.dialog_hook = fill
    assert w.tools.preferences_dialog()
    assert paths.models_dir() == gui_env / "my-models" and paths.sessions_dir() == gui_env / "my-sessions"
    assert os.environ["KFORGE_LLM_THREADS"] == "2"
    w.open_example()
    assert w.session.path.parent == gui_env / "my-sessions"
    w.close_without_asking()
    again = make_window()
    prefs = again.settings.preferences()
    assert (prefs.workers, prefs.threads, prefs.models_dir) == (3, 2, str(gui_env / "my-models"))


def test_help_lists_the_shortcuts(make_window):
    from kforge_desktop.gui.dialogs.shortcuts import ShortcutsDialog

    w = make_window()
    shown = []
    w.dialog_hook = shown.append
    w.acts.shortcuts.trigger()
    dlg = shown[0]
    assert isinstance(dlg, ShortcutsDialog)
    rows = {dlg.table.item(r, 1).text(): dlg.table.item(r, 0).text() for r in range(dlg.table.rowCount())}
    assert rows["Start"] == "Ctrl+R" and rows["Export…"] == "Ctrl+Shift+E" and "Preferences…" in rows


def test_plot_and_diff_modes_are_remembered(make_window, gui_env):
    w = make_window()
    w.plot_widget.x_mode.setCurrentIndex(w.plot_widget.x_mode.findData("time"))
    w.code_widget.set_compare("parent")
    w.code_widget.set_layout("side")
    w.close_without_asking()
    again = make_window()
    assert again.plot_widget.x_mode.currentData() == "time"
    assert again.code_widget.compare.currentData() == "parent"
    assert again.code_widget.layout_box.currentData() == "side"


def test_the_edit_dialog_numbers_and_highlights_lines(qtbot, make_window, verdict_session):
    from kforge_desktop.gui.dialogs.edit_child import EditChildDialog

    path, ids = verdict_session
    w = make_window()
    w.open_session(path)
    shown = []
    w.dialog_hook = shown.append
    w.commands.edit_as_child(ids["win"])
    dlg: EditChildDialog = shown[0]
    editor = dlg.editor
    assert editor.gutter_width() > 0 and editor._labels[:3] == ["1", "2", "3"]
    block = editor.document().findBlockByNumber(0)  # "import torch, torch.nn as nn": a keyword
    assert any(r.format.foreground().color().name() != "#000000" for r in block.layout().formats())
    editor.appendPlainText("# one more line")
    assert editor._labels[-1] == str(editor.blockCount())


def test_llm_parameters_read_as_text_not_json():
    from kforge_desktop.gui.docks.inspector.widget import params_text

    text = params_text({"temperature": 0.7000000000000001, "top_p": 0.95, "max_tokens": 1024, "seed": 99})
    assert text == "temperature 0.7 · top_p 0.95 · max_tokens 1024 · seed 99"


def test_best_so_far_is_a_staircase_of_wins(gui_env):
    from kforge_desktop.gui.docks.plot.model import plot_data
    from kforge_desktop.store import SessionStore

    path = gui_env / "v.kforge"
    ids = write_verdict_session(path)
    store = SessionStore.open(path)
    d = plot_data(store.nodes(ids["problem"], with_source=False))
    store.close()
    # wins: the seed (2.10x, first kernel) then #win (2.60x, third); the noise and disturbed ones never
    assert d.best_y[0] == pytest.approx(2.10) and max(d.best_y) == pytest.approx(2.60)
    jump = d.best_y.index(max(d.best_y))
    assert d.best_x[jump] == d.best_x[jump - 1] and d.best_y[jump - 1] == pytest.approx(2.10)  # vertical
    assert all(b >= a for a, b in zip(d.best_x, d.best_x[1:]))
