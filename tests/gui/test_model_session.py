"""A whole model opens as a session with one target per profiled operator (profiled off the UI
thread); choosing a target shows its search."""

from __future__ import annotations

from pathlib import Path

from kforge_gui_testing import REPO, wait_until


def test_new_session_from_a_model_file_lists_its_targets(qtbot, make_window):
    w = make_window()
    model = REPO / "resources" / "examples" / "llm_block.py"
    assert w.new_session(model)
    assert w._model_job is not None and w._model_job.dialog.isVisible()  # progress, not a frozen window
    wait_until(qtbot, lambda: w._model_job is None, 240, "profiling to finish")
    assert w.shown_errors == []
    rows = w.targets_widget.model.rows
    assert len(rows) >= 2
    assert all(r.op for r in rows) and all(r.share is not None for r in rows)
    shares = [r.share for r in rows]
    assert shares == sorted(shares, reverse=True)  # the biggest share of the runtime first
    model = w.targets_widget.model
    assert not w.targets_widget.table.isColumnHidden(model.KEYS.index("share"))  # shown for a model
    assert model.index(0, model.KEYS.index("share")).data().endswith("%")
    second = rows[1].problem_id
    w.targets_widget.table.selectRow(1)
    assert w.session.problem_id == second
    assert all(n.problem_id == second for n in w.session.nodes().values())
    assert Path(w.session.path).suffix == ".kforge"
