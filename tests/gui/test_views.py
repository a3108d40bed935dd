"""The docks against a real session file (written through SessionStore), without running a search:
what a user sees and does when they open a saved session."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication


def _click_node(qtbot, w, node_id):
    view = w.tree_widget.view
    view.center_on_node(node_id)
    qtbot.wait(10)
    pos = view.mapFromScene(view.tree.position(node_id))
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=pos)


def test_open_session_draws_every_node_and_selection_reaches_every_dock(qtbot, make_window, synthetic_session):
    path, synth = synthetic_session
    w = make_window()
    assert w.open_session(path)
    w.tree_widget.wait_idle()
    assert w.tree_widget.view.tree.count() == 60
    assert "60 nodes" in w.tree_widget.count_label.text()
    # the plot holds one point per evaluated candidate (the reference is a line, not a point)
    assert w.plot_widget.data.count == 59

    best = w.session.best_id()
    _click_node(qtbot, w, best)
    assert w.session.selected_id == best
    assert w.code_widget.node.id == best
    assert "kernel_forward" in w.code_widget.single.toPlainText()
    verdict_text = w.inspector_widget.verdict_view.toPlainText()
    assert "speedup over eager" in verdict_text and f"#{best}" in verdict_text
    # the plot marks the same node
    assert w.plot_widget.selected_marker.data["x"].tolist() == [w.plot_widget.data.positions[best][0]]


def test_clicking_a_plot_point_selects_the_node(make_window, synthetic_session):
    path, synth = synthetic_session
    w = make_window()
    w.open_session(path)
    target = synth.ids[10]
    assert w.plot_widget.select_point_at(target)
    assert w.session.selected_id == target
    assert w.tree_widget.view.tree.selected == target


def test_diff_against_parent_unified_and_side_by_side(make_window, synthetic_session):
    path, synth = synthetic_session
    w = make_window()
    w.open_session(path)
    store = w.session.store
    # a node whose kernel differs from its parent's (the synthetic search alternates expf/std::exp)
    node = next(n for n in store.nodes(w.session.problem_id)
                if n.parent_id and n.origin == "llm" and store.node(n.parent_id).origin == "llm"
                and store.node(n.parent_id).kernel_source != n.kernel_source)
    w.session.select(node.id)
    w.code_widget.set_compare("parent")
    text = w.code_widget.single.toPlainText()
    assert text.startswith("@@")
    assert "+1 −1" in w.code_widget.stats_label.text()
    w.code_widget.set_layout("side")
    assert w.code_widget.stack.currentWidget() is w.code_widget.split
    left, right = w.code_widget.left.toPlainText(), w.code_widget.right.toPlainText()
    assert left != right and left.count("\n") == right.count("\n")  # rows are aligned
    w.code_widget.set_compare("node", other_id=node.id)
    assert "identical" in w.code_widget.single.toPlainText() or w.code_widget.left.toPlainText() == \
        w.code_widget.right.toPlainText()


def test_find_node_by_id(make_window, synthetic_session):
    path, synth = synthetic_session
    w = make_window()
    w.open_session(path)
    w.tree_widget.find_edit.setText(str(synth.ids[20]))
    w.tree_widget.find_edit.returnPressed.emit()
    assert w.session.selected_id == synth.ids[20]
    assert not w.tree_widget.find_node(99999)
    assert "no node #99999" in w.tree_widget.find_edit.toolTip()


def test_pin_from_context_menu_is_saved_and_is_what_export_uses(qtbot, make_window, synthetic_session, gui_env):
    from kforge_desktop.gui.docks.tree.actions import node_menu
    from kforge_desktop.store import SessionStore

    path, synth = synthetic_session
    w = make_window()
    w.open_session(path)
    store = w.session.store
    pid = w.session.problem_id
    best = store.best_node(pid)
    slower = next(n for n in store.nodes(pid) if n.speedup is not None and n.speedup < best.speedup
                  and n.origin == "llm")
    menu = node_menu(w, w.session.light(slower.id), w.commands)
    pin = next(a for a in menu.actions() if a.objectName() == "node_pin")
    assert pin.isEnabled()
    pin.trigger()
    assert w.session.light(slower.id).pinned
    w.tree_widget.wait_idle()
    assert slower.id in w.tree_widget.view.tree.pinned
    assert w.session.path_to(slower.id) == w.tree_widget.view.tree.best_path  # the marked path leads to the pin
    w.targets_widget.refresh()
    assert w.targets_widget.model.rows[0].chosen == f"#{slower.id} (pinned)"
    # a failed node cannot be pinned
    failed = next(n for n in store.nodes(pid) if n.verdict and n.verdict.status == "compile_error")
    menu = node_menu(w, w.session.light(failed.id), w.commands)
    assert not next(a for a in menu.actions() if a.objectName() == "node_pin").isEnabled()
    w.close_without_asking()
    with SessionStore.open(path) as again:
        assert again.chosen_node(pid).id == slower.id  # export takes the chosen node: the pin


def test_exclude_and_copy_code(make_window, synthetic_session):
    path, synth = synthetic_session
    w = make_window()
    w.open_session(path)
    nid = synth.ids[7]
    w.commands.exclude(nid, True)
    assert w.session.light(nid).excluded
    assert w.session.store.node(nid).excluded
    w.commands.copy_code(nid)
    assert "class ModelNew" in QGuiApplication.clipboard().text()


def test_log_filter_by_level_and_text(make_window, synthetic_session):
    path, _ = synthetic_session
    w = make_window()
    w.open_session(path)
    log = w.log_widget
    log.add("info", "opened a thing")
    log.add("warning", "a warning about builds")
    log.add("error", "an error about the model")
    shown = lambda: [log.proxy.index(r, 3).data() for r in range(log.proxy.rowCount())]  # noqa: E731
    assert {"opened a thing", "a warning about builds", "an error about the model"} <= set(shown())
    log.level.setCurrentIndex(log.level.findData("warning"))
    assert "opened a thing" not in shown() and "a warning about builds" in shown()
    log.filter_edit.setText("model")
    assert shown() == ["an error about the model"]


def test_theme_switch_repaints_views(make_window, synthetic_session):
    path, _ = synthetic_session
    w = make_window()
    w.open_session(path)
    w.set_theme("dark")
    assert w.theme.dark
    assert w.tree_widget.view.backgroundBrush().color().lightness() < 80
    w.set_theme("light")
    assert not w.theme.dark
    assert w.tree_widget.view.backgroundBrush().color().lightness() > 200
    assert w.settings.theme() == "light"


def test_layout_and_recent_sessions_persist_and_reset(make_window, synthetic_session, gui_env):
    path, _ = synthetic_session
    w = make_window()
    w.open_session(path)
    w.log_dock.setFloating(True)
    w.inspector_dock.hide()
    w.close_without_asking()
    w2 = make_window()
    assert w2.log_dock.isFloating() and not w2.inspector_dock.isVisible()
    assert w2.settings.recent()[0] == str(path.resolve())
    w2.reset_layout()
    assert not w2.log_dock.isFloating() and w2.inspector_dock.isVisible()
    w2.close_without_asking()
    w3 = make_window()
    assert not w3.log_dock.isFloating() and w3.inspector_dock.isVisible()


def test_bad_session_file_is_one_sentence_not_a_traceback(make_window, gui_env):
    bad = gui_env / "notes.kforge"
    bad.write_text("this is not a database")
    w = make_window()
    assert not w.open_session(bad)
    sentence, detail = w.shown_errors[-1]
    assert "not a Kernel Forge session" in sentence
    assert "Traceback" not in sentence and sentence.count(". ") <= 1
    missing = gui_env / "missing.kforge"
    assert not w.open_session(missing)
    assert "does not exist" in w.shown_errors[-1][0]


def test_session_from_another_machine_is_flagged(make_window, synthetic_session):
    from kforge_desktop.store import SessionStore

    path, _ = synthetic_session
    with SessionStore.open(path) as s:
        env = s.environment() or {"device": "cpu"}
        env.update({"device": "cpu", "device_name": "NVIDIA GB10", "torch": "2.9.0", "host": "spark"})
        s.set_environment(env)
    w = make_window()
    w.open_session(path)
    assert w.banner.isVisible()
    assert "NVIDIA GB10" in w.banner_label.text() and "may not hold here" in w.banner_label.text()
    assert w.banner_action.text().startswith("Re-verify")


def test_tree_context_menu_offers_every_action(make_window, synthetic_session):
    from kforge_desktop.gui.docks.tree.actions import node_menu

    path, synth = synthetic_session
    w = make_window()
    w.open_session(path)
    names = {a.objectName() for a in node_menu(w, w.session.light(synth.ids[5]), w.commands).actions()}
    assert {"node_pin", "node_exclude", "node_expand", "node_edit", "node_copy"} <= names


def test_status_bar_shows_how_productive_the_model_is_on_this_problem(make_window, synthetic_session):
    """The share of the model's candidates that build and are correct, from the session itself; when
    it is low the label turns amber and its tooltip advises a larger local model."""
    path, _synth = synthetic_session
    w = make_window()
    assert w.open_session(path)
    prod = w.session.store.productivity(w.session.problem_id)
    assert prod.candidates > 0
    text = w.yield_label.text()
    assert f"{prod.correct}/{prod.candidates} correct" in text and f"{prod.built}/{prod.candidates} built" in text
    assert (prod.suggestion is not None) == ("larger local model" in w.yield_label.toolTip())


def test_the_inspector_says_why_a_node_has_no_code(make_window, synthetic_session):
    """A node without code carries the reason (an answer that looped, one cut off by max_tokens): the
    Verdict tab shows it, not only the log panel, which may have scrolled past it long ago."""
    from kforge_desktop.store import SessionStore

    path, synth = synthetic_session
    store = SessionStore(path)
    pid = store.problems()[0].id
    why = "the model kept repeating itself and never finished kernel_forward (stopped after 800 tokens)"
    lost = store.add_node(pid, synth.ids[1], "llm", "edit", "cpp", directive="single_pass", state="no_code", note=why)
    store.close()
    w = make_window()
    assert w.open_session(path)
    w.session.select(lost)
    text = w.inspector_widget.verdict_view.toPlainText()
    assert "no code" in text and why in text
