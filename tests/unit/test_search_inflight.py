"""Several expansions in flight: the model writes the next candidates while earlier ones are
evaluated, the same seed and K give the same tree whatever finishes first, timing still never
overlaps a token, and a search killed with SIGKILL mid-flight resumes without losing anything.

The model is scripted (``scripted_model.py``: answers by a hash of the prompt, random delays); the
lead's real-model version of the K comparison is ``benchmarks/inflight.py``."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import pytest
from scripted_model import ScriptedModel

from kforge_desktop.kernels.gate import DeviceGate
from kforge_desktop.kernels.verdict import Verdict
from kforge_desktop.problem.problem import load_problem
from kforge_desktop.search import events as ev
from kforge_desktop.search.config import SearchConfig
from kforge_desktop.search.engine import SearchEngine
from kforge_desktop.search.inflight import PLACEHOLDER_BASE, Slot, masked_tree
from kforge_desktop.search.planner import Expansion
from kforge_desktop.search.setup import create_session
from kforge_desktop.search.tree import Tree, reward
from kforge_desktop.store import SessionStore
from kforge_desktop.store.records import NodeRecord

REPO = Path(__file__).resolve().parents[2]
RMS_NORM = REPO / "resources" / "problems" / "rms_norm.py"


class StandInEvaluator:
    """Verdicts that depend only on the source, after a random time; a timing slot per candidate
    through a real ``DeviceGate`` (one at a time, as the pool grants them), recorded."""

    workers = 3

    def __init__(self, delay_s: float = 0.3) -> None:
        self.gate = DeviceGate()
        self.timed: list[tuple[float, float]] = []
        self._slot = threading.Lock()
        self._jitter = random.Random()
        self.delay_s = delay_s

    def submit(self, problem, source: str) -> Future:
        fut: Future = Future()
        threading.Thread(target=self._run, args=(fut, source), daemon=True).start()
        return fut

    def _run(self, fut: Future, source: str) -> None:
        time.sleep(self._jitter.uniform(0, self.delay_s))  # "building"
        h = int(hashlib.sha256(source.encode()).hexdigest()[:8], 16)
        if "* 1.5f" in source:
            fut.set_result(Verdict("incorrect", "values differ", max_abs_err=1.0))
            return
        if not re.search(r"0\.0 \* \d+;", source):
            fut.set_result(Verdict("compile_error", "expected ';'"))
            return
        with self._slot:
            self.gate.begin_timing()
            start = time.monotonic()
            time.sleep(0.05)
            end = time.monotonic()
            self.gate.end_timing()
        self.timed.append((start, end))
        speedup = 0.8 + (h % 60) / 100
        fut.set_result(Verdict("ok", "correct", speedup=speedup, latency_ms=1.0 / speedup, baseline_ms=1.0,
                               significant=True, latency_iqr_ms=0.0, baseline_iqr_ms=0.0))


def _search(tmp_path: Path, name: str, inflight: int, budget: int = 9):
    store = SessionStore(tmp_path / f"{name}.kforge")
    config = SearchConfig(budget_candidates=budget, scaffold=False, seeds=False, syntax_check=False,
                          inflight=inflight, seed=11)
    pid = create_session(store, load_problem(RMS_NORM), config)
    model, evaluator = ScriptedModel(delay_s=0.3), StandInEvaluator()
    engine = SearchEngine(store, pid, model, evaluator, config)
    tokens: list[float] = []
    engine.subscribe(lambda e: tokens.append(time.monotonic()) if isinstance(e, ev.TokenStream) else None)
    finished = engine.run()
    shape = [(n.id, n.parent_id, n.kind, n.directive, n.state, n.status, hashlib.sha256(n.source.encode()).hexdigest())
             for n in store.nodes(pid)]
    calls = [c.params.get("seed") for c in store.llm_calls(pid)]
    done = store.candidates_done(pid)
    store.close()
    return finished, shape, calls, done, model, evaluator, tokens


def test_three_in_flight_give_the_same_tree_whatever_finishes_first_and_never_time_during_a_token(tmp_path):
    first = _search(tmp_path, "a", inflight=3)
    second = _search(tmp_path, "b", inflight=3)
    finished, shape, calls, done, model, evaluator, tokens = first
    assert finished.reason == "budget" and done == 9
    assert model.peak == 3  # three answers were being written at once
    assert shape == second[1] and calls == second[2]  # same seed, same K: the same tree, the same calls
    assert len({s for s in calls}) == len(calls)  # every call its own sampling seed
    assert len({row[1] for row in shape if row[2] != "root"}) > 1  # the expansions spread over the tree
    for start, end in evaluator.timed:  # the model waited at a token boundary while a kernel was timed
        assert not [t for t in tokens if start < t < end]
    assert evaluator.timed


def test_the_plan_sees_the_tree_as_of_the_front_of_the_window():
    def node(i, parent, state="evaluated", verdict=None, visits=0, value=0.0, origin="llm"):
        return NodeRecord(id=i, problem_id=1, parent_id=parent, origin=origin, state=state, language="cpp",
                          directive="d", source="s", kernel_source="k", created_at=0.0, visits=visits, value=value,
                          verdict=verdict)
    ok = Verdict("ok", "correct", speedup=2.0, latency_ms=0.5, baseline_ms=1.0, significant=True)
    tree = Tree([node(1, None, visits=3, value=0.9, origin="root"), node(2, 1, verdict=ok, visits=2, value=0.9),
                 node(3, 2, verdict=ok, visits=1, value=0.9), node(4, 1, verdict=ok, visits=1, value=0.8,
                                                                         origin="seed")])
    window = [Slot(0, node_id=4, answered=True, evaluating=True),  # a seed whose verdict is not visible yet
              Slot(1, node_id=3, expansion=Expansion(2, "edit", "d", "text")),  # answered, evaluated, hidden
              Slot(2, expansion=Expansion(1, "whole", "w", "text"))]  # still being written
    view = masked_tree(tree, window)
    assert 3 not in view.nodes and view.node(4).verdict is None and view.node(4).state == "pending"
    kids = [k.id for k in view.children(1)]
    assert kids == [2, 4, PLACEHOLDER_BASE + 2]
    assert view.node(PLACEHOLDER_BASE + 1).parent_id == 2  # the edit in flight is a child of 2
    # node 2: its evaluated child is hidden (one visit less) and the edit in flight is a virtual loss
    assert view.node(2).visits == 2 and view.node(2).value == pytest.approx(reward(ok))
    # the root: 3 visits - 2 hidden results + 2 expansions in flight; its best is node 2's alone
    assert view.node(1).visits == 3 and view.node(1).value == pytest.approx(reward(ok))
    assert masked_tree(tree, []) is tree


def _generating(trace: Path) -> bool:
    """Whether the scripted model is writing an answer now (by its trace file)."""
    try:
        lines = trace.read_text().split()
    except OSError:
        return False
    return lines[0::2].count("start") > lines[0::2].count("end")


def _snapshot(path: Path) -> dict[int, tuple]:
    con = sqlite3.connect(path, timeout=30)
    try:
        rows = con.execute("SELECT id, parent_id, origin, kind, source, llm_call_id, state FROM nodes").fetchall()
    finally:
        con.close()
    return {r[0]: r for r in rows}


@pytest.mark.slow
def test_a_search_with_three_in_flight_killed_with_sigkill_resumes_without_losing_anything(tmp_path, build_cache):
    path = tmp_path / "killed.kforge"
    script = [sys.executable, str(Path(__file__).with_name("scripted_model.py")), str(path), "5", "3", str(build_cache)]
    proc = subprocess.Popen(script, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    killed_during = None
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if path.exists():
                try:
                    snap = _snapshot(path)
                except sqlite3.Error:
                    snap = {}
                evaluating = [r for r in snap.values() if r[2] == "llm" and r[6] == "evaluating"]
                if evaluating and _generating(Path(str(path) + ".trace")):  # both at once: mid-flight
                    os.killpg(proc.pid, signal.SIGKILL)  # the search and its evaluation workers
                    killed_during = evaluating[0][0]
                    break
            time.sleep(0.05)
    finally:
        if proc.poll() is None and killed_during is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    assert killed_during is not None, proc.stderr.read().decode()[-2000:]

    before = _snapshot(path)
    out = subprocess.run(script, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]

    store = SessionStore.open(path)
    pid = store.problems()[0].id
    after = {n.id: n for n in store.nodes(pid)}
    for node_id, row in before.items():  # nothing lost, nothing rewritten
        n = after[node_id]
        assert (n.parent_id, n.origin, n.kind, n.source, n.llm_call_id) == row[1:6]
    assert after[killed_during].state == "evaluated" and after[killed_during].verdict is not None
    assert not [n for n in after.values() if n.state in ("pending", "evaluating")]
    assert store.candidates_done(pid) == 5
    llm_nodes = [n for n in after.values() if n.origin == "llm"]
    assert sorted(c.id for c in store.llm_calls(pid)) == sorted(n.llm_call_id for n in llm_nodes)
    sources = [n.source for n in after.values() if n.state not in ("duplicate", "no_code") and n.origin != "root"]
    assert len(sources) == len(set(sources))  # no candidate stored twice
    statuses = {n.verdict.status for n in llm_nodes if n.verdict}
    assert "ok" in statuses  # the real evaluator judged the scripted candidates
    store.close()


def test_a_local_server_with_several_slots_gets_k_requests_at_once(tmp_path):
    """The OpenAI-compatible backend: llama-server says it has 3 slots, the search keeps 3 requests
    streaming together (the server counts them), and the answers make a tree like any other."""
    import json
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from scripted_model import answer_module

    from kforge_desktop.llm.server_backend import OpenAIServerGenerator

    state = {"now": 0, "peak": 0}
    lock = threading.Lock()

    class Server(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def _json(self, obj) -> None:
            body = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._json({"data": [{"id": "slots"}]} if self.path == "/v1/models" else {"total_slots": 3})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path == "/tokenize":
                self._json({"tokens": [0] * (len(body["content"]) // 4)})
                return
            with lock:
                state["now"] += 1
                state["peak"] = max(state["peak"], state["now"])
            try:
                prompt = "\n".join(m["content"] for m in body["messages"])
                text = answer_module(int(hashlib.sha256(f"{body['seed']}\0{prompt}".encode()).hexdigest()[:12], 16))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for i in range(0, len(text), 60):
                    time.sleep(0.02)
                    chunk = {"choices": [{"delta": {"content": text[i:i + 60]}}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b'data: {"choices": [{"delta": {}, "finish_reason": "stop"}]}\n\ndata: [DONE]\n\n')
            finally:
                with lock:
                    state["now"] -= 1

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Server)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        model = OpenAIServerGenerator(f"http://127.0.0.1:{httpd.server_address[1]}")
        assert model.parallel == 3
        store = SessionStore(tmp_path / "server.kforge")
        config = SearchConfig(budget_candidates=6, scaffold=False, seeds=False, syntax_check=False, inflight=3)
        pid = create_session(store, load_problem(RMS_NORM), config)
        finished = SearchEngine(store, pid, model, StandInEvaluator(), config).run()
        assert finished.reason == "budget" and store.candidates_done(pid) == 6
        store.close()
    finally:
        httpd.shutdown()
    assert state["peak"] == 3


GENERATOR_PROCESS = """
import json, sys, time
from kforge_desktop.kernels.gate import DeviceGate
gate, tokens = DeviceGate(), []
out, n = sys.argv[1], int(sys.argv[2])
with gate.generating():
    for _ in range(n):
        time.sleep(0.01)  # a token
        tokens.append(time.time())
        open(out + ".started", "w").close()
        gate.token_boundary()
json.dump(tokens, open(out, "w"))
"""


def _generator_process(tmp_path: Path, name: str, tokens: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", GENERATOR_PROCESS, str(tmp_path / name), str(tokens)],
                            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})


def _wait_for(path: Path, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.01)


def test_another_process_model_writes_no_token_while_this_one_times_a_kernel(tmp_path, monkeypatch):
    """Two searches on one machine (the app and a ``kforge`` run, or two benchmark processes): the
    other process's model pauses at its next token while this one times, and goes on afterwards."""
    monkeypatch.setenv("KFORGE_GATE_DIR", str(tmp_path / "gate"))
    child = _generator_process(tmp_path, "tokens.json", 150)
    _wait_for(tmp_path / "tokens.json.started")
    gate, windows = DeviceGate(), []
    for _ in range(3):
        gate.begin_timing()
        start = time.time()
        time.sleep(0.3)  # the timed runs
        windows.append((start, time.time()))
        gate.end_timing()
        time.sleep(0.2)
    assert child.wait(timeout=60) == 0
    tokens = json.loads((tmp_path / "tokens.json").read_text())
    assert len(tokens) == 150
    for start, end in windows:
        assert not [t for t in tokens if start < t < end]  # not one token while a kernel was timed
        assert [t for t in tokens if end < t < end + 0.2]  # and the model went on right after


def test_a_process_killed_while_timing_holds_no_other_model_back(tmp_path, monkeypatch):
    """A search killed in the middle of a timing (the app closed by force) leaves no lock behind: the
    next generation of another process starts at once."""
    monkeypatch.setenv("KFORGE_GATE_DIR", str(tmp_path / "gate"))
    timer = subprocess.Popen(
        [sys.executable, "-c", "import time; from kforge_desktop.kernels.gate import DeviceGate; "
         "DeviceGate().begin_timing(); open('timing', 'w').close(); time.sleep(600)"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
    _wait_for(tmp_path / "timing")
    child = _generator_process(tmp_path, "blocked.json", 5)
    time.sleep(1.0)
    assert not (tmp_path / "blocked.json.started").exists()  # the timing holds the other model back
    timer.kill()
    timer.wait(timeout=30)
    assert child.wait(timeout=30) == 0  # and its death lets it go
    assert len(json.loads((tmp_path / "blocked.json").read_text())) == 5


EVALUATOR_PROCESS = """
import json, sys, time
from pathlib import Path
from kforge_desktop.kernels.evaluator import Evaluator
from kforge_desktop.kernels.options import EvalOptions
from kforge_desktop.problem.problem import load_problem
problem = load_problem(sys.argv[1])
source = Path(sys.argv[3]).read_text()
with Evaluator("cpu", workers=1, options=EvalOptions(compare_compile=False, timed_runs=5, warmup_runs=1)) as ev:
    open(sys.argv[2] + ".started", "w").close()
    verdict = ev.evaluate(problem, source)
json.dump({"status": verdict.status, "reason": verdict.reason, "at": time.time()}, open(sys.argv[2], "w"))
"""


@pytest.mark.skipif((os.cpu_count() or 2) > 4, reason="more than 4 cores: evaluations run side by side there, "
                                                      "only their timings are exclusive")
def test_on_a_small_cpu_machine_another_process_evaluates_only_after_this_one(tmp_path, monkeypatch):
    """Two searches on a 2-core machine: a build or a verification of one beside the other's timed
    runs would disturb them, so one process's evaluation waits for the other's to end."""
    monkeypatch.setenv("KFORGE_GATE_DIR", str(tmp_path / "gate"))
    gate = DeviceGate()
    gate.begin_evaluation()
    out = tmp_path / "verdict.json"
    child = subprocess.Popen([sys.executable, "-c", EVALUATOR_PROCESS, str(RMS_NORM), str(out),
                              str(REPO / "tests" / "candidates" / "cpu" / "ok_rms_norm.py")], cwd=REPO,
                             env={**os.environ, "PYTHONPATH": str(REPO), "KFORGE_BUILD_CACHE": str(tmp_path / "b")})
    try:
        _wait_for(tmp_path / "verdict.json.started", timeout_s=120)
        time.sleep(5.0)
        assert not out.exists()  # its evaluation waits
    finally:
        released = time.time()
        gate.end_evaluation()
    assert child.wait(timeout=300) == 0
    verdict = json.loads(out.read_text())
    assert verdict["status"] == "ok" and verdict["at"] > released  # and runs once this one's has ended
