"""One set of rules for the user's commands, whether the engine applies them or the GUI applies them
to the session store with no search running; and the saved tally a resumed search continues from."""

from __future__ import annotations

from pathlib import Path

from kforge_desktop.kernels.verdict import Verdict
from kforge_desktop.problem.problem import load_problem
from kforge_desktop.search import commands
from kforge_desktop.search import events as ev
from kforge_desktop.search.config import SearchConfig
from kforge_desktop.search.engine import SearchEngine
from kforge_desktop.search.planner import Tally
from kforge_desktop.search.setup import create_session
from kforge_desktop.store import SessionStore

PROBLEMS = Path(__file__).resolve().parents[2] / "resources" / "problems"


def _session(tmp_path):
    store = SessionStore(tmp_path / "c.kforge")
    pid = create_session(store, load_problem(PROBLEMS / "softmax.py"), SearchConfig(budget_candidates=4))
    root = store.root(pid).id
    good = store.add_node(pid, root, "llm", "whole", "cpp", source="a", kernel_source="a")
    store.record_verdict(good, Verdict("ok", "correct", speedup=1.2, latency_ms=1.0, baseline_ms=1.2), 0.7)
    bad = store.add_node(pid, root, "llm", "whole", "cpp", source="b", kernel_source="b")
    store.record_verdict(bad, Verdict("incorrect", "values differ", max_abs_err=1.0), 0.1)
    return store, pid, good, bad


def test_only_a_correct_candidate_is_pinned_by_the_store_command_and_by_the_engine(tmp_path):
    store, pid, good, bad = _session(tmp_path)
    refused = commands.pin(store, pid, bad)
    assert not refused.ok and refused.level == "warning" and store.pinned_node(pid) is None
    assert not commands.pin(store, pid, store.root(pid).id).ok
    assert commands.pin(store, pid, good).events == (ev.NodeChanged(pid, good),)
    assert store.pinned_node(pid).id == good

    engine = SearchEngine(store, pid, generator=None, evaluator=None)
    seen: list = []
    engine.subscribe(seen.append)
    engine.post(ev.Pin(bad))
    engine.apply_commands()
    assert store.pinned_node(pid).id == good
    assert any(isinstance(e, ev.Log) and "only a correct candidate" in e.message for e in seen)
    engine.post(ev.Unpin(good))
    engine.post(ev.Exclude(bad))
    engine.apply_commands()
    assert store.pinned_node(pid) is None and store.node(bad).excluded
    assert [e.kind for e in store.events(pid) if e.kind in ("pin", "unpin", "exclude")] == ["pin", "unpin", "exclude"]
    store.close()


def test_the_tally_is_saved_as_it_always_was():
    assert Tally().to_saved() == {"llm_calls": 0}
    assert Tally.from_saved({"llm_calls": 4}).to_saved() == {"llm_calls": 4}
    again = Tally.from_saved({"llm_calls": 7, "repairs_given_up": True})
    assert (again.llm_calls, again.repairs_given_up) == (7, True) and again.to_saved()["repairs_given_up"]
    assert Tally.from_saved(None) == Tally()
