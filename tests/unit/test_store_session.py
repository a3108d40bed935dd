"""The session store: a real SQLite file, round trips, resume semantics, readers beside a writer."""

from __future__ import annotations

import shutil
import sqlite3
import threading

import pytest

from kforge_desktop.kernels.verdict import Verdict
from kforge_desktop.problem.problem import Problem
from kforge_desktop.store import SearchState, SessionStore, StoreError

SOURCE = "import torch\nclass Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n"


def ok(speedup: float, **kw) -> Verdict:
    return Verdict("ok", "correct", speedup=speedup, latency_ms=1.0 / speedup, baseline_ms=1.0, **kw)


@pytest.fixture()
def session(tmp_path):
    store = SessionStore(tmp_path / "s.kforge")
    pid = store.add_problem(Problem("p", SOURCE), device="cpu", language="cpp", info={"op": "softmax"})
    root = store.add_node(pid, None, "root", "root", "python", source=SOURCE, state="evaluated")
    yield store, pid, root
    store.close()


def test_round_trip_survives_reopening(session, tmp_path):
    store, pid, root = session
    call = store.add_llm_call(pid, "whole", "tiny", "the prompt", "the answer", 10, 20, 1.5, {"seed": 3})
    a = store.add_node(pid, root, "llm", "whole", "cpp", source="A", kernel_source="ka", directive="d1",
                       norm_code="na", llm_call_id=call, note="first try")
    store.record_verdict(a, ok(2.0, log="build log", library_calls=("mm",)), reward=0.8)
    store.set_environment({"torch": "2.13", "device_name": "cpu"})
    store.close()

    again = SessionStore.open(tmp_path / "s.kforge")
    node = again.node(a)
    assert node.source == "A" and node.kernel_source == "ka" and node.directive == "d1" and node.note == "first try"
    assert node.state == "evaluated" and node.verdict.speedup == 2.0
    assert node.verdict.log == "build log" and node.verdict.library_calls == ("mm",)
    assert again.llm_call(node.llm_call_id).response == "the answer"
    assert again.llm_call(node.llm_call_id).params == {"seed": 3}
    assert again.problem(pid).info == {"op": "softmax"}
    assert again.problem(pid).to_problem().source == SOURCE
    assert again.environment()["torch"] == "2.13"
    again.close()


def test_open_refuses_missing_and_foreign_files(tmp_path):
    with pytest.raises(StoreError, match="does not exist"):
        SessionStore.open(tmp_path / "nope.kforge")
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="not a Kernel Forge session"):
        SessionStore.open(other)
    junk = tmp_path / "junk.kforge"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreError):
        SessionStore.open(junk)


def test_reset_in_flight_puts_interrupted_work_back(session):
    store, pid, root = session
    a = store.add_node(pid, root, "llm", "whole", "cpp", source="A")
    b = store.add_node(pid, root, "llm", "whole", "cpp", source="B")
    c = store.add_node(pid, root, "llm", "whole", "cpp", source="C")
    store.set_state(a, "evaluating")
    store.record_verdict(b, ok(1.5), 0.7)
    assert store.reset_in_flight(pid) == [a, c]
    assert store.node(a).state == "pending"
    assert store.node(b).state == "evaluated"


def test_pinning_one_node_unpins_the_other_and_chosen_follows_the_pin(session):
    store, pid, root = session
    fast = store.add_node(pid, root, "llm", "whole", "cpp", source="fast")
    slow = store.add_node(pid, root, "llm", "whole", "cpp", source="slow")
    store.record_verdict(fast, ok(3.0), 0.9)
    store.record_verdict(slow, ok(1.2), 0.7)
    assert store.chosen_node(pid).id == fast
    store.set_pinned(slow)
    assert store.chosen_node(pid).id == slow
    store.set_pinned(fast)
    assert store.pinned_node(pid).id == fast and not store.node(slow).pinned
    store.set_pinned(fast, False)
    assert store.pinned_node(pid) is None
    assert store.best_path(pid) == [root, fast]


def test_duplicates_and_budget_counting(session):
    store, pid, root = session
    a = store.add_node(pid, root, "llm", "whole", "cpp", source="A", norm_code="same")
    assert store.find_duplicate(pid, "same") == a
    d = store.add_node(pid, root, "llm", "edit", "cpp", source="A2", norm_code="same", state="duplicate", duplicate_of=a)
    store.add_node(pid, root, "seed", "seed", "cpp", source="S", state="pending")
    store.add_node(pid, root, "llm", "whole", "cpp", state="no_code")
    store.record_verdict(a, Verdict("compile_error", "bad"), 0.05)
    assert store.find_duplicate(pid, "same") == a  # the duplicate itself is never the original
    assert store.node(d).duplicate_of == a
    assert store.candidates_done(pid) == 2  # a and the no-code answer; not the seed, not the duplicate
    prod = store.productivity(pid)
    assert (prod.candidates, prod.built, prod.correct, prod.no_code, prod.duplicates) == (2, 0, 0, 1, 1)


def test_productivity_suggests_a_larger_model_when_few_kernels_are_correct(session):
    store, pid, root = session
    for i in range(5):
        n = store.add_node(pid, root, "llm", "whole", "cpp", source=f"s{i}")
        store.record_verdict(n, ok(1.1) if i == 0 else Verdict("incorrect", "wrong"), 0.1)
    prod = store.productivity(pid)
    assert prod.correct == 1 and prod.built == 5 and prod.correct_rate == pytest.approx(0.2)
    assert prod.suggestion and "larger" in prod.suggestion
    for i in range(5):
        n = store.add_node(pid, root, "llm", "edit", "cpp", source=f"e{i}")
        store.record_verdict(n, ok(1.3), 0.7)
    prod = store.productivity(pid)
    assert prod.suggestion is None
    assert prod.by_kind == {"whole": (5, 1), "edit": (5, 5)}


def test_changed_since_reports_new_and_updated_nodes(session):
    store, pid, root = session
    rev0 = store.revision()
    a = store.add_node(pid, root, "llm", "whole", "cpp", source="A")
    changed, rev1 = store.changed_since(pid, rev0)
    assert [n.id for n in changed] == [a]
    assert store.changed_since(pid, rev1) == ([], rev1)
    store.update_stats([(root, 3, 0.5), (a, 1, 0.5)])
    changed, rev2 = store.changed_since(pid, rev1)
    assert sorted(n.id for n in changed) == [root, a] and rev2 > rev1
    assert store.node(root).visits == 3


def test_search_state_and_events_round_trip(session):
    store, pid, _ = session
    store.save_search_state(SearchState(pid, "mcts", 12, 5.0, seed=7, rng_state={"llm_calls": 4},
                                        config={"strategy": "mcts"}, status="paused", elapsed_s=33.0))
    st = store.search_state(pid)
    assert (st.strategy, st.budget_candidates, st.budget_minutes, st.seed) == ("mcts", 12, 5.0, 7)
    assert st.rng_state == {"llm_calls": 4} and st.status == "paused" and st.elapsed_s == 33.0
    first = store.log_event(pid, "log", "hello", "warning", {"x": 1})
    store.log_event(pid, "pin", "node 3 pinned")
    evs = store.events(pid)
    assert [e.kind for e in evs] == ["log", "pin"] and evs[0].payload == {"x": 1} and evs[0].level == "warning"
    assert [e.message for e in store.events(pid, since_id=first)] == ["node 3 pinned"]


def test_a_failed_transaction_leaves_nothing_behind(session):
    store, pid, root = session
    before = len(store.nodes(pid))
    with pytest.raises(RuntimeError):
        with store.transaction():
            store.add_llm_call(pid, "whole", "m", "p", "r")
            store.add_node(pid, root, "llm", "whole", "cpp", source="X")
            raise RuntimeError("killed between the two writes")
    assert len(store.nodes(pid)) == before and store.llm_calls(pid) == []


def test_readers_in_other_threads_see_the_writers_nodes(session, tmp_path):
    store, pid, root = session
    reader = SessionStore.open(tmp_path / "s.kforge")  # the GUI's own connection
    seen: list[int] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def read_loop():
        try:
            while not stop.is_set():
                seen.append(len(reader.nodes(pid, with_source=False)))
        except BaseException as err:  # pragma: no cover - the failure we look for
            errors.append(err)

    t = threading.Thread(target=read_loop)
    t.start()
    for i in range(50):
        n = store.add_node(pid, root, "llm", "whole", "cpp", source=f"s{i}")
        store.record_verdict(n, ok(1.0 + i / 10), 0.6)
    stop.set()
    t.join()
    assert not errors
    assert seen and max(seen) <= 51 and seen == sorted(seen)
    assert len(reader.nodes(pid)) == 51
    reader.close()


def test_a_packed_session_keeps_every_node_and_reads_back(session, tmp_path):
    from kforge_desktop.store import pack, readable, stored

    store, pid, root = session
    big = "float x = 0.0f;\n" * 2000  # kernels repeat themselves: the packed file is far smaller
    nodes = [store.add_node(pid, root, "llm", "whole", "cpp", source=big + str(i), kernel_source=big)
             for i in range(5)]
    store.record_verdict(nodes[2], ok(1.5))
    plain = tmp_path / "cut.kforge"  # what a search killed now leaves: the file and a log not folded in yet
    for suffix in ("", "-wal"):
        shutil.copy(str(tmp_path / "s.kforge") + suffix, str(plain) + suffix)
    store.close()
    size = plain.stat().st_size + (tmp_path / "cut.kforge-wal").stat().st_size

    packed = pack(plain)
    assert packed.name == "cut.kforge.gz" and not plain.exists() and not (tmp_path / "cut.kforge-wal").exists()
    assert packed.stat().st_size * 5 < size
    assert stored(plain) == packed  # a record naming the plain file finds the packed one
    with pytest.raises(StoreError, match="packed session; unpack it first"):
        SessionStore.open(packed)
    with readable(packed) as path:
        again = SessionStore.open(path)
        assert [n.id for n in again.nodes(pid)] == [root, *nodes]
        assert again.node(nodes[4]).source == big + "4" and again.node(nodes[2]).verdict.speedup == 1.5
        again.set_pinned(nodes[2])  # writing to the unpacked copy leaves the packed record as it was
        again.close()
    with readable(packed) as path:
        assert not SessionStore.open(path).node(nodes[2]).pinned
