"""One short real search from the window: the 0.5B GGUF through llama.cpp writes a candidate,
the evaluator judges it, the window shows it live; pause, resume and stop work; reopening shows the
same tree. (Kept to one test: an answer costs tens of seconds on 2 cores.)"""

from __future__ import annotations

import pytest
from kforge_gui_testing import wait_until

pytestmark = [pytest.mark.llm, pytest.mark.slow]


def test_search_from_the_window_pause_resume_stop_reopen(qtbot, make_window, test_model_path, build_cache):
    from kforge_desktop.gui.settings import LLMChoices

    w = make_window()
    w.settings.set_llm(LLMChoices(model_path=str(test_model_path), temperature=0.0, max_tokens=320, context=4096))
    w._update_llm_button()
    assert test_model_path.name in w.llm_button.text()
    assert w.open_example()
    w.budget_spin.setValue(2)
    path, pid = w.session.path, w.session.problem_id
    streamed: list[str] = []
    w.controller.tokens.connect(lambda text, _tps: streamed.append(text))
    w.act_start.trigger()
    assert w.controller.running and w.act_pause.isEnabled() and w.act_stop.isEnabled()

    # the seed is evaluated first, then the model is asked: an LLM node appears live in tree and plot
    wait_until(qtbot, lambda: any(n.origin == "llm" for n in w.session.nodes().values()), 240,
               "a node written by the model")
    assert w.model_label.text().endswith(("default model", test_model_path.name))
    # the answer streamed into the Live tab token by token while the model wrote it
    assert len(streamed) > 20
    assert "asking the model" in w.inspector_widget.live_view.toPlainText()
    w.tree_widget.wait_idle()
    assert w.tree_widget.view.tree.count() == len(w.session.nodes())

    w.act_pause.trigger()
    assert w.controller.paused and w.act_pause.text() == "&Resume"
    wait_until(qtbot, lambda: w.session.store.search_state(pid).status == "paused", 240, "the engine to pause")
    w.session.refresh()
    count = len(w.session.nodes())
    qtbot.wait(1500)
    w.session.refresh()
    assert len(w.session.nodes()) == count, "nodes were added while paused"

    w.act_pause.trigger()  # resume
    assert not w.controller.paused
    wait_until(qtbot, lambda: w.session.store.search_state(pid).status == "running", 60, "the engine to resume")
    w.act_stop.trigger()
    wait_until(qtbot, lambda: not w.controller.running, 240, "the search to stop")
    assert w.shown_errors == []
    state = w.session.store.search_state(pid)
    assert state.status in ("stopped", "finished")

    llm = [n for n in w.session.nodes().values() if n.origin == "llm"]
    w.session.select(llm[0].id)
    exchange = w.inspector_widget.llm_view.toPlainText()
    assert "Prompt" in exchange and "Answer" in exchange and "tokens/s" in exchange
    if llm[0].verdict is not None:
        assert w.plot_widget.data.positions.get(llm[0].id) is not None

    before = {n.id: (n.parent_id, n.status) for n in w.session.nodes().values()}
    w.close_without_asking()
    w2 = make_window()
    assert w2.open_session(path)
    assert {n.id: (n.parent_id, n.status) for n in w2.session.nodes().values()} == before
