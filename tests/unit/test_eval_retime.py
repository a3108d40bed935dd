"""A chosen kernel survives a re-timing: when a busy machine made the faster kernel look slower,
the end-of-search re-timing (the best nodes and the reference together, in one worker, with
nothing else running) picks the truly faster one. The noise is real: busy processes on the cores."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from kforge_desktop.kernels.evaluator import Evaluator
from kforge_desktop.kernels.options import EvalOptions
from kforge_desktop.problem.problem import load_problem
from kforge_desktop.search.retiming import retime_best
from kforge_desktop.search.tree import reward
from kforge_desktop.store import SessionStore

REPO = Path(__file__).resolve().parents[2]
FAST = (REPO / "tests" / "candidates" / "cpu" / "ok_rms_norm.py").read_text()
# the same kernel on one thread, computing every row three times: correct, and several times slower
SLOW = FAST.replace("  #pragma omp parallel for\n", "").replace(
    "for (int64_t r = 0; r < rows; ++r) {", "for (int rep = 0; rep < 3; ++rep) for (int64_t r = 0; r < rows; ++r) {"
).replace("# expect: ok -- an honest OpenMP RMSNorm kernel", "# a slower honest kernel")


def _busy(n: int) -> list[subprocess.Popen]:
    """Processes that spin on one core at a higher priority than the evaluator's worker, as a model
    generating on the same machine does: a kernel whose threads meet at a barrier waits for that
    core's scheduler slice, while eager's small single-threaded ops run on the other cores."""
    core = max(os.sched_getaffinity(0))

    def favoured() -> None:
        os.sched_setaffinity(0, {core})
        try:
            os.nice(-19)
        except OSError:  # not allowed to raise priority: plain spinning still disturbs
            pass
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=favoured) for _ in range(n)]


@pytest.mark.slow
def test_retiming_picks_the_truly_faster_kernel_after_noise_favoured_the_other(tmp_path):
    assert SLOW != FAST
    problem = load_problem(REPO / "resources" / "problems" / "rms_norm.py")
    opts = EvalOptions(compare_compile=False, timed_runs=30, warmup_runs=3)
    store = SessionStore(tmp_path / "s.kforge")
    pid = store.add_problem(problem, device="cpu", language="cpp")
    root = store.add_node(pid, None, "root", "root", "python", source=problem.source, state="evaluated")
    fast_id = store.add_node(pid, root, "llm", "whole", "cpp", source=FAST)
    slow_id = store.add_node(pid, root, "llm", "whole", "cpp", source=SLOW)
    quick = EvalOptions(compare_compile=False, timed_runs=10, warmup_runs=1)
    with Evaluator("cpu", workers=1, options=opts, build_cache=tmp_path / "builds") as ev:
        fast_first = ev.evaluate(problem, FAST)  # a quiet moment
        hogs = _busy(3)
        try:
            # the slower kernel, timed while a core is busy: its runs and eager's wait for scheduler
            # slices, and the ratio of the waits is what gets measured; keep the first measurement
            # in which that noise made the slower kernel look faster
            for _ in range(10):
                slow_first = ev.evaluate(problem, SLOW, quick)
                if slow_first.speedup > fast_first.speedup:
                    break
        finally:
            for h in hogs:
                h.kill()
                h.wait()
        assert fast_first.is_correct and slow_first.is_correct
        assert slow_first.speedup > fast_first.speedup, "the noise never favoured the slower kernel"
        store.record_verdict(fast_id, fast_first, reward(fast_first))
        # the disturbance check may well have flagged this measurement (tested on its own); here the
        # re-timing alone must correct the choice, so the flag is left out
        store.record_verdict(slow_id, replace(slow_first, disturbed=""), reward(slow_first))
        assert store.chosen_node(pid).id == slow_id  # what a search would have chosen on those figures
        messages: list[str] = []
        retimed = retime_best(store, pid, problem, ev, lambda m, _lvl="info": messages.append(m))
    assert sorted(retimed) == sorted([fast_id, slow_id])
    assert store.chosen_node(pid).id == fast_id, messages
    after = store.node(fast_id).verdict
    assert after.retimed == 2 and "re-timed" in after.reason
    assert after.latency_ms < store.node(slow_id).verdict.latency_ms
    assert any(f"#{fast_id}" in m and "was" in m for m in messages)
    store.close()


@pytest.mark.slow
def test_a_retiming_far_slower_than_the_session_runs_again_and_says_the_choice_may_be_noise(tmp_path):
    """The end-of-search re-timing measures eager several times slower than the session did (the
    machine got busy since: another program on the cores): it runs again, three times in all, the
    user is told the choice may be noise, and each verdict's reason says so. Measured at the session's pace, one
    re-timing does and nothing is flagged."""
    problem = load_problem(REPO / "resources" / "problems" / "rms_norm.py")
    opts = EvalOptions(compare_compile=False, timed_runs=20, warmup_runs=2)
    with Evaluator("cpu", workers=1, options=opts, build_cache=tmp_path / "builds") as ev:
        first = [ev.evaluate(problem, source) for source in (FAST, SLOW)]
        assert all(v.is_correct and not v.disturbed for v in first), [v.reason for v in first]
        runs = {}
        for name, pace in (("same", 1.0), ("busy", 0.1)):  # busy: the session had measured eager 10x faster
            store = SessionStore(tmp_path / f"{name}.kforge")
            pid = store.add_problem(problem, device="cpu", language="cpp")
            root = store.add_node(pid, None, "root", "root", "python", source=problem.source, state="evaluated")
            ids = []
            for source, verdict in zip((FAST, SLOW), first):
                node = store.add_node(pid, root, "llm", "whole", "cpp", source=source)
                verdict = replace(verdict, baseline_ms=verdict.baseline_ms * pace,
                                  latency_ms=verdict.latency_ms * pace)
                store.record_verdict(node, verdict, reward(verdict))
                ids.append(node)
            said: list[tuple[str, str]] = []
            retime_best(store, pid, problem, ev, lambda m, lvl="info", said=said: said.append((lvl, m)))
            runs[name] = (said, [store.node(i).verdict for i in ids], store.chosen_node(pid).id == ids[0])
            store.close()
    said, verdicts, fast_chosen = runs["same"]
    assert not [m for _, m in said if "busy" in m], said
    assert not any(v.disturbed for v in verdicts) and all(v.retimed for v in verdicts) and fast_chosen
    said, verdicts, _ = runs["busy"]
    again = [m.split(" of ")[0] for _, m in said if m.endswith("timing again")]
    assert again == ["re-timing 1", "re-timing 2"], said
    assert [lvl for lvl, m in said if m.startswith("every one of 3 re-timings met a busy machine")] == ["warning"]
    assert all("every re-timing met a busy machine" in v.reason for v in verdicts)  # shown with each node
    assert fast_chosen  # and the choice is still made: the user has something to keep
