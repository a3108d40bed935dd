"""Triton candidates on a machine without a GPU: checked for correctness under Triton's
interpreter, never credited with a speedup; Inductor-style library calls are reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from kforge_desktop.kernels.evaluator import Evaluator
from kforge_desktop.kernels.options import EvalOptions
from kforge_desktop.problem.problem import load_problem

REPO = Path(__file__).resolve().parents[2]
TRITON = REPO / "tests" / "candidates" / "triton"
OPTS = EvalOptions(compare_compile=False, trials=3, run_timeout_s=120)


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory):
    with Evaluator("cpu", workers=1, options=OPTS, build_cache=tmp_path_factory.mktemp("b")) as ev:
        yield ev


def test_triton_softmax_is_verified_but_not_timed(evaluator):
    v = evaluator.evaluate(load_problem(REPO / "resources/problems/softmax.py"), (TRITON / "softmax_ok.py").read_text())
    assert v.status == "ok", v.reason
    assert v.language == "triton"
    assert v.speedup is None and v.latency_ms is None
    assert "interpreter" in v.reason


def test_wrong_triton_kernel_is_incorrect(evaluator):
    v = evaluator.evaluate(load_problem(REPO / "resources/problems/softmax.py"),
                           (TRITON / "softmax_wrong.py").read_text())
    assert v.status == "incorrect", v.reason


def test_inductor_style_candidate_reports_its_library_call(evaluator):
    v = evaluator.evaluate(load_problem(TRITON / "problem_linear_relu.py"),
                           (TRITON / "inductor_style_linear_relu.py").read_text())
    assert v.status == "ok", v.reason
    assert "mm" in v.library_calls
