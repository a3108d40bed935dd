"""GPU verdicts a user can bank on (marker gpu): device time vs call latency, real sizes."""

from __future__ import annotations

from pathlib import Path

import pytest

from kforge_desktop.problem.problem import load_problem, problem_from_source
from kforge_desktop.search.inductor_seed import inductor_module

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parents[2]
GIB = 2**30


def test_the_compile_seed_takes_torch_compiles_device_time_and_saves_only_host_time(evaluator):
    problem = load_problem(REPO / "benchmarks" / "problems_gpu" / "softmax.py")
    v = evaluator.evaluate(problem, inductor_module(problem))
    assert v.status == "ok" and v.time_basis == "device"
    assert v.speedup_compile == pytest.approx(1.0, abs=0.05)  # the same kernels: the same device time
    assert v.compile_call_ms > v.compile_baseline_ms  # a synchronous call adds the host's cost
    assert "faster than torch.compile" not in v.reason


@pytest.mark.parametrize("body", ["torch.relu(x)", "torch.softmax(x, dim=-1)", "x.sum(dim=-1)"])
def test_a_6_gb_problem_gets_a_verdict_in_a_few_times_its_size(evaluator, body):
    src = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
           f"        return {body}\n\ndef get_inputs():\n    return [torch.randn(4096, 393216)]\n\n"
           "def get_init_inputs():\n    return []\n")
    problem = problem_from_source("big", src)
    v = evaluator.evaluate(problem, inductor_module(problem))
    assert v.status == "ok", v.reason
    assert v.peak_mem_bytes < 4 * 12.9 * GIB  # G = 6.4 GB in + up to 6.4 GB out
