"""Real searches: the small GGUF writes kernels, the evaluator builds them for real, the store keeps all.

Kept small for the 2-core CI machine: a budget of 3 candidates and short answers.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kforge_desktop.search import events as ev
from kforge_desktop.store import SessionStore

pytestmark = [pytest.mark.llm, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
PROBLEMS = REPO / "resources" / "problems"


def test_a_small_search_leaves_a_tree_of_evaluated_nodes_in_the_session(tmp_path, test_model_path, build_cache):
    from kforge_desktop.kernels.evaluator import Evaluator
    from kforge_desktop.llm.llama_backend import LlamaCppGenerator
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.config import SearchConfig
    from kforge_desktop.search.engine import SearchEngine
    from kforge_desktop.search.setup import create_session

    path = tmp_path / "small.kforge"
    store = SessionStore(path)
    config = SearchConfig(strategy="mcts", budget_candidates=3, max_tokens=320, seed=1)
    pid = create_session(store, load_problem(PROBLEMS / "silu_mul.py"), config)
    seen: list = []
    gen = LlamaCppGenerator(test_model_path, n_ctx=2048)
    try:
        with Evaluator("cpu", workers=1) as evaluator:
            engine = SearchEngine(store, pid, gen, evaluator)
            engine.subscribe(seen.append)
            finished = engine.run()
    finally:
        gen.close()
        store.close()
    assert finished.reason == "budget"

    again = SessionStore.open(path)  # what a user opening the file later sees
    nodes = again.nodes(pid)
    llm = [n for n in nodes if n.origin == "llm"]
    judged = [n for n in llm if n.state in ("evaluated", "no_code")]
    assert len(judged) == 3 == again.candidates_done(pid)
    evaluated = [n for n in nodes if n.state == "evaluated" and n.origin != "root"]
    assert evaluated and all(n.verdict is not None and n.verdict.status for n in evaluated)
    assert any(n.origin == "seed" for n in evaluated)  # the exemplar seed was evaluated like any node
    for n in llm:  # every LLM node keeps its exchange
        call = again.llm_call(n.llm_call_id)
        assert call.prompt and call.response and call.completion_tokens > 0 and call.seconds > 0
        assert n.parent_id is not None
    root = again.root(pid)
    assert root.visits == len([n for n in nodes if n.state in ("evaluated", "no_code", "duplicate") and n.origin != "root"])
    assert again.search_state(pid).status == "finished"
    kinds = {type(e) for e in seen}
    assert {ev.NodeAdded, ev.NodeEvaluated, ev.Progress, ev.Finished, ev.TokenStream} <= kinds
    assert [e for e in again.events(pid) if e.kind == "node_evaluated"]
    prod = again.productivity(pid)
    assert prod.candidates == 3 and prod.summary()
    again.close()


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "kforge_desktop.cli.main", *args]


def _snapshot(path: Path) -> dict[int, tuple]:
    con = sqlite3.connect(path, timeout=30)
    try:
        rows = con.execute("SELECT id, parent_id, origin, kind, source, llm_call_id, state FROM nodes").fetchall()
    finally:
        con.close()
    return {r[0]: r for r in rows}


def test_a_search_killed_with_sigkill_resumes_without_losing_or_repeating_work(tmp_path, test_model_path,
                                                                                 build_cache):
    path = tmp_path / "killed.kforge"
    env = dict(os.environ, KFORGE_BUILD_CACHE=str(build_cache))
    common = ["--llm", str(test_model_path), "--n-ctx", "2048"]
    # rms_norm: a short exemplar, so the small test model finishes its answers within 320 tokens (with
    # softmax's longer one, its answers were cut off and the search ran out of LLM calls before 3 candidates)
    proc = subprocess.Popen(
        _cli("optimize", str(PROBLEMS / "rms_norm.py"), "--budget", "3", "--session", str(path), "--strategy",
             "greedy", "--max-tokens", "320", "--seed", "2", "--device", "cpu", *common),
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )
    # kill the whole process group (the app and its evaluation workers) while a candidate is evaluated
    # after at least one LLM answer was stored
    deadline = time.monotonic() + 420
    killed_during = None
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if path.exists():
                try:
                    snap = _snapshot(path)
                except sqlite3.Error:
                    snap = {}
                llm = [r for r in snap.values() if r[2] == "llm"]
                evaluating = [r for r in snap.values() if r[6] == "evaluating"]
                if llm and evaluating:
                    os.killpg(proc.pid, signal.SIGKILL)
                    killed_during = evaluating[0][0]
                    break
            time.sleep(0.05)
    finally:
        if proc.poll() is None and killed_during is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    assert killed_during is not None, "the search never reached an evaluation after an LLM answer"

    before = _snapshot(path)
    assert before[killed_during][6] == "evaluating"
    out = subprocess.run(_cli("resume", str(path), *common), cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr

    store = SessionStore.open(path)
    pid = store.problems()[0].id
    after = {n.id: n for n in store.nodes(pid)}
    for node_id, row in before.items():  # nothing lost, nothing rewritten
        n = after[node_id]
        assert (n.parent_id, n.origin, n.kind, n.source, n.llm_call_id) == row[1:6]
    assert after[killed_during].state == "evaluated" and after[killed_during].verdict is not None
    assert not [n for n in after.values() if n.state in ("pending", "evaluating")]
    assert store.candidates_done(pid) == 3
    calls = store.llm_calls(pid)
    llm_nodes = [n for n in after.values() if n.origin == "llm"]
    assert sorted(c.id for c in calls) == sorted(n.llm_call_id for n in llm_nodes)  # no orphan or shared calls
    sources = [n.source for n in after.values() if n.state not in ("duplicate", "no_code") and n.origin != "root"]
    assert len(sources) == len(set(sources))  # no candidate stored twice
    assert "best path" in subprocess.run(_cli("show", str(path)), cwd=REPO, env=env, capture_output=True,
                                         text=True, timeout=60).stdout
    store.close()
