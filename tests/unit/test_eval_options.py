"""The options sent to a worker, and the device every verdict reports (a failed one too)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kforge_desktop.kernels.evaluator import Evaluator
from kforge_desktop.kernels.options import EvalOptions, EvalTask
from kforge_desktop.kernels.pool import failed_verdict, worker_verdict
from kforge_desktop.kernels.verdict import Verdict
from kforge_desktop.problem.problem import load_problem

REPO = Path(__file__).resolve().parents[2]
PROBLEM = REPO / "resources" / "problems" / "rms_norm.py"


def test_a_task_crosses_the_pipe_unchanged() -> None:
    opts = EvalOptions(device="cuda:1", trials=2, timed_runs=7, timing_budget_s=3.5, compare_compile=False, seed=4)
    task = EvalTask(load_problem(PROBLEM), "class ModelNew: pass", opts)
    assert EvalTask.from_dict(task.to_dict()) == task
    assert EvalOptions.from_dict(opts.to_dict()) == opts


def test_an_unknown_option_is_an_error_not_ignored() -> None:
    with pytest.raises(TypeError):
        EvalOptions.from_dict({**EvalOptions().to_dict(), "timing_budget": 1.0})


@pytest.mark.parametrize("status", ["compile_error", "rejected", "runtime_error", "incorrect"])
def test_a_failed_worker_result_keeps_the_cuda_device(status: str) -> None:
    # what the worker sends when a candidate fails (its catch-all path sends no more than this)
    result = {"status": status, "reason": "it failed", "log": "details"}
    verdict = worker_verdict(result, EvalOptions(device="cuda:0"))
    assert (verdict.status, verdict.device) == (status, "cuda:0")


@pytest.mark.parametrize("status", ["timeout", "crashed", "runtime_error"])
def test_a_verdict_the_pool_writes_keeps_the_cuda_device(status: str) -> None:
    verdict = failed_verdict(status, "the worker was stopped", EvalOptions(device="cuda:0"))
    assert verdict.device == "cuda:0"
    assert Verdict.from_json(verdict.to_json()).device == "cuda:0"


def test_the_evaluator_holds_the_device_once(tmp_path: Path) -> None:
    with Evaluator("cuda:0", workers=1, options=EvalOptions(device="cpu", trials=2), build_cache=tmp_path) as ev:
        assert ev.device == ev.options.device == "cuda:0"
        assert ev.options.trials == 2
        # a CUDA evaluation that fails (here: no CUDA device, or a candidate that does not parse)
        verdict = ev.evaluate(load_problem(PROBLEM), "this is not python (")
    assert verdict.status != "ok"
    assert verdict.device == "cuda:0", verdict.reason
