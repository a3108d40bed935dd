"""The matmul exemplar (Triton, fp32 as three TF32 products), fitted to a linear target as a search
places it, builds and verifies in the evaluator on the GPU at the decoder block's MLP size, a batched
product of a transposed operand, and ``addmm`` with its bias. Speed: ``benchmarks/matmul_gpu.py``."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

LINEAR = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, weight):
        linear = torch.nn.functional.linear(x, weight, None)
        return linear


def get_inputs():
    return [torch.randn(4, 1024, 2048), torch.randn(5632, 2048) * 2048 ** -0.5]


def get_init_inputs():
    return []
'''

BATCHED = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b.transpose(-2, -1))


def get_inputs():
    return [torch.randn(8, 300, 130), torch.randn(8, 77, 130)]


def get_init_inputs():
    return []
'''

ADDMM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, bias, a, b):
        return torch.addmm(bias, a, b)


def get_inputs():
    return [torch.randn(77), torch.randn(3000, 130), torch.randn(130, 77)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("name,source", [("linear", LINEAR), ("batched", BATCHED), ("addmm", ADDMM)])
def test_the_matmul_seed_is_correct_at_gpu_size(name, source, evaluator, tmp_path):
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.matmul_seed import matmul_module

    path = tmp_path / f"{name}.py"
    path.write_text(source)
    problem = load_problem(path)
    module = matmul_module(problem.source)
    assert module is not None, f"the matmul exemplar does not fit {name}"
    verdict = evaluator.evaluate(problem, module)
    print(f"{name}: {verdict.summary()}; torch.compile {verdict.compile_baseline_ms} ms")
    assert verdict.status == "ok", verdict.summary() + "\n" + verdict.log[-2000:]
    assert verdict.rel_l2_err is not None and verdict.rel_l2_err < 2e-5
