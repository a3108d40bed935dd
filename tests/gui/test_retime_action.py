"""Search → Re-time the best nodes: the user asks, the best nodes are timed again together (real
builds in the evaluator's workers, never in the window's process), and the window shows the result."""

from __future__ import annotations

from pathlib import Path

import pytest

from kforge_desktop.kernels.verdict import Verdict
from kforge_desktop.problem.problem import load_problem
from kforge_desktop.store import SessionStore

REPO = Path(__file__).resolve().parents[2]
FAST = (REPO / "tests" / "candidates" / "cpu" / "ok_rms_norm.py").read_text()
SLOW = FAST.replace("  #pragma omp parallel for\n", "").replace(
    "for (int64_t r = 0; r < rows; ++r) {", "for (int rep = 0; rep < 3; ++rep) for (int64_t r = 0; r < rows; ++r) {")


@pytest.mark.slow
def test_retime_action_measures_the_best_nodes_again_and_the_window_follows(make_window, qtbot, gui_env):
    path = gui_env / "retime.kforge"
    store = SessionStore(path)
    problem = load_problem(REPO / "resources" / "problems" / "rms_norm.py")
    pid = store.add_problem(problem, device="cpu", language="cpp")
    root = store.add_node(pid, None, "root", "root", "python", source=problem.source, state="evaluated")
    fast = store.add_node(pid, root, "llm", "whole", "cpp", source=FAST)
    slow = store.add_node(pid, root, "llm", "whole", "cpp", source=SLOW)
    # the first measurements as a disturbed machine gave them: the slower kernel looked faster
    store.record_verdict(fast, Verdict("ok", "correct", speedup=1.2, latency_ms=0.2, baseline_ms=0.24,
                                       significant=True), 0.7)
    store.record_verdict(slow, Verdict("ok", "correct", speedup=4.0, latency_ms=0.1, baseline_ms=0.4,
                                       significant=True), 0.9)
    store.close()
    w = make_window()
    w.open_session(path)
    assert w.acts.retime.isEnabled()
    search_menu = next(a.menu() for a in w.menuBar().actions() if a.text() == "&Search")
    assert w.acts.retime in search_menu.actions()
    w.acts.retime.trigger()
    qtbot.waitUntil(lambda: w.notice._reverifier is not None and w.notice._reverifier.isFinished(),
                    timeout=600_000)
    qtbot.waitUntil(lambda: w.banner_action.isEnabled(), timeout=10_000)  # the window took the result
    store = SessionStore.open(path)
    try:
        assert store.node(fast).verdict.retimed == 2 and store.node(slow).verdict.retimed == 2
        assert "re-timed with the best 2 together" in store.node(fast).verdict.reason
        assert store.chosen_node(pid).verdict.retimed  # the choice now comes from that one run
    finally:
        store.close()
