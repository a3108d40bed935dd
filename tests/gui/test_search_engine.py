"""The window driving the real engine on the CPU backend (real builds, real verification and
timing in worker processes), without the language model: the bundled example's seed kernel and a
hand-edited child are evaluated, shown everywhere, pinned, and still there after reopening."""

from __future__ import annotations

from kforge_gui_testing import wait_until

EDIT_OLD = "scale_row(yr, 1.0f / s, cols);"
EDIT_NEW = "const float inv = 1.0f / s;\n        scale_row(yr, inv, cols);"


def test_hand_edited_child_is_evaluated_shown_pinned_and_reopened(qtbot, make_window, build_cache):
    w = make_window()
    assert w.open_example()
    path = w.session.path
    seed = next(n for n in w.session.nodes().values() if n.origin == "seed")
    w.session.select(seed.id)
    assert "kernel_forward" in w.code_widget.single.toPlainText()

    def fill(dialog):  # what the user types into the "edit as a new child" dialog
        assert EDIT_OLD in dialog.source()
        dialog.editor.setPlainText(dialog.source().replace(EDIT_OLD, EDIT_NEW))
        dialog.note.setText("hoist the reciprocal")
        dialog.accept()

    w.dialog_hook = fill
    w.commands.edit_as_child(seed.id)
    assert w.controller.running
    assert not w.act_start.isEnabled() and w.act_stop.isEnabled()
    # closing during a search asks first; "no" keeps the window and the search
    asked = []
    w.confirm = lambda title, text: asked.append(text) or False
    assert not w.close()
    assert asked and "search is running" in asked[0] and w.isVisible() and w.controller.running
    wait_until(qtbot, lambda: not w.controller.running, 300, "the evaluation to finish")
    assert w.shown_errors == []
    w.session.refresh()
    w.tree_widget.wait_idle()

    nodes = w.session.nodes()
    child = next(n for n in nodes.values() if n.origin == "user")
    assert child.parent_id == seed.id
    assert child.verdict is not None and nodes[seed.id].verdict is not None
    assert child.verdict.status == "ok", child.verdict.reason
    assert w.tree_widget.view.tree.count() == len(nodes)
    assert child.id in w.plot_widget.data.positions and seed.id in w.plot_widget.data.positions

    # select the child: the code shows the edit, the diff against its parent shows exactly it
    w.session.select(child.id)
    assert "const float inv" in w.code_widget.single.toPlainText()
    w.code_widget.set_compare("parent")
    diff = w.code_widget.single.toPlainText()
    assert "scale_row(yr, inv, cols);" in diff and "+2 −1" in w.code_widget.stats_label.text()
    text = w.inspector_widget.verdict_view.toPlainText()
    assert "speedup over eager" in text and "latency (median)" in text
    assert "written by hand" in w.inspector_widget.llm_view.toPlainText()

    # pin it: shown in the tree, and the session's chosen node (what export uses) is the pin
    w.commands.pin(child.id)
    w.tree_widget.wait_idle()
    assert child.id in w.tree_widget.view.tree.pinned
    assert w.session.store.chosen_node(w.session.problem_id).id == child.id

    before = {n.id: (n.parent_id, n.status, n.pinned) for n in w.session.nodes().values()}
    w.close_without_asking()
    w2 = make_window()
    assert w2.open_session(path)
    after = {n.id: (n.parent_id, n.status, n.pinned) for n in w2.session.nodes().values()}
    assert after == before
    w2.tree_widget.wait_idle()
    assert w2.tree_widget.view.tree.count() == len(before)
    assert child.id in w2.tree_widget.view.tree.pinned
    assert any(e.kind == "node_evaluated" for e in w2.session.store.events())
    assert w2.log_widget.model.rowCount() > 0

    # the same session opened "on another machine": said plainly, and re-verified here on request
    store = w2.session.store
    env = dict(store.environment(), device_name="NVIDIA GB10", torch="2.9.0")
    store.set_environment(env)
    w2.close_without_asking()
    w3 = make_window()
    assert w3.open_session(path) and w3.banner.isVisible()
    assert "NVIDIA GB10" in w3.banner_label.text()
    w3.banner_action.click()
    wait_until(qtbot, lambda: w3.banner_action.isEnabled(), 300, "re-verification to finish")
    assert not w3.banner.isVisible()
    assert any(e.kind == "reverified" for e in w3.session.store.events())
    assert w3.session.store.environment().get("device_name") != "NVIDIA GB10"


def test_a_missing_model_is_one_sentence_before_anything_runs(qtbot, make_window, gui_env):
    from kforge_desktop.gui.settings import LLMChoices

    w = make_window()
    w.settings.set_llm(LLMChoices(model_path=str(gui_env / "nowhere" / "model.gguf")))
    assert w.open_example()
    w.act_start.trigger()
    wait_until(qtbot, lambda: not w.controller.running, 60, "the start to be refused")
    sentence, detail = w.shown_errors[-1]
    assert "model.gguf" in sentence and "Traceback" not in sentence
    assert "Traceback" in detail  # the details are one click away, not in the sentence
    assert not any(n.verdict for n in w.session.nodes().values() if n.origin == "seed")  # nothing ran
