"""KernelBench's own candidate format (load_inline with torch/extension.h) keeps working on the CPU
backend: slower to build than the native format, but built, cached and verified the same way."""

from __future__ import annotations

from pathlib import Path

from kforge_desktop.kernels.evaluator import Evaluator
from kforge_desktop.kernels.verdict import EvalOptions
from kforge_desktop.problem.problem import load_problem

REPO = Path(__file__).resolve().parents[2]


def test_load_inline_candidate_is_built_verified_and_cached(tmp_path):
    problem = load_problem(REPO / "resources/problems/rms_norm.py")
    source = (REPO / "tests/candidates/cpu_formats/inline_rms_norm.py").read_text()
    opts = EvalOptions(compare_compile=False, timed_runs=10, build_timeout_s=600)
    with Evaluator("cpu", workers=1, options=opts, build_cache=tmp_path) as ev:
        first = ev.evaluate(problem, source)
    with Evaluator("cpu", workers=1, options=opts, build_cache=tmp_path) as ev:
        again = ev.evaluate(problem, source)
    assert first.status == "ok", f"{first.reason}\n{first.log[-2000:]}"
    assert again.status == "ok"
    assert again.build_s < first.build_s / 5, (first.build_s, again.build_s)
