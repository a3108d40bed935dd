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
