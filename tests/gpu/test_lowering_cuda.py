"""The reference lowered to plain loops, in CUDA (a warp a row along the last dimension, one thread a row
along a middle one; a thread an output value for a pooling): built with nvcc and verified on the GPU like any seed, on every reference the CPU test lowers
and on the dev problems of the generalization benchmark that it reaches."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
DEV = REPO / "benchmarks" / "problems_generalize" / "dev"


def _cpu_test():
    """tests/unit/test_search_lowering.py: its references and how it writes them as problems."""
    path = REPO / "tests" / "unit" / "test_search_lowering.py"
    spec = importlib.util.spec_from_file_location("lowering_references", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


CPU = _cpu_test()


def _verify(problem, evaluator):
    from kforge_desktop.search.lowering import lower
    from kforge_desktop.search.scaffold import build_scaffold

    scaffold = build_scaffold(problem, "cuda")
    kernel = lower(problem, scaffold)
    if kernel is None:
        return None
    verdict = evaluator.evaluate(problem, scaffold.module_source(kernel))
    print(f"{problem.name}: {verdict.summary()}")
    assert verdict.status == "ok", verdict.summary() + "\n" + verdict.log[-2000:]
    return verdict


@pytest.mark.parametrize("name", list(CPU.REFERENCES))
def test_each_lowered_reference_is_correct_on_the_gpu(name, evaluator, tmp_path):
    problem = CPU._problem(tmp_path, name, *CPU.REFERENCES[name])
    assert _verify(problem, evaluator) is not None, f"{name} is lowered on the CPU but not in CUDA"


def test_the_dev_problems_the_lowering_reaches_are_correct_on_the_gpu(evaluator):
    from kforge_desktop.problem.problem import load_problem

    reached = [p.stem for p in sorted(DEV.glob("*.py")) if _verify(load_problem(p), evaluator) is not None]
    print("lowered and verified:", ", ".join(reached))
    assert {"log_softmax", "l2_normalize", "max_pool_overlap"} <= set(reached)


def test_a_lowered_kernel_launched_with_another_grid_is_still_correct(evaluator):
    """A launch-shape edit rewrites only the launch; the lowered kernels stride over their work with the whole
    grid, so a grid far smaller than the work (3 blocks of 96 threads: nine warps) leaves no value
    unwritten."""
    import re

    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.lowering import lower
    from kforge_desktop.search.scaffold import build_scaffold

    launch = "<<<3, 96, 0, stream>>>"
    checked = []
    for path in sorted(DEV.glob("*.py")):
        problem = load_problem(path)
        scaffold = build_scaffold(problem, "cuda")
        kernel = lower(problem, scaffold)
        if kernel is None:
            continue
        relaunched = re.sub(r"<<<[^;]*?stream>>>", launch, kernel)
        assert relaunched != kernel
        verdict = evaluator.evaluate(problem, scaffold.module_source(relaunched))
        assert verdict.status == "ok", f"{path.stem} with {launch}: {verdict.summary()}"
        checked.append(path.stem)
    assert {"quick_gelu", "log_softmax", "channel_sum", "max_pool_overlap"} <= set(checked)


def test_a_nan_in_the_input_comes_out_of_a_cuda_seed_where_torch_puts_it(evaluator, tmp_path):
    """fmaxf drops a NaN: a lowered CUDA relu of NaN gave 0 and a row maximum skipped it. A NaN in a row makes its
    maximum NaN and relu, clamp and maximum keep it, as in torch, along the last dimension (a warp a row, the lanes'
    maxima shuffled) and along a middle one (a thread a row); a softmax's maximum may skip it, as its exp-sum is NaN."""
    last = "[torch.where(torch.arange(6 * 64).reshape(6, 64) == 77, float('nan'), torch.randn(6, 64))]"
    middle = "[torch.where(torch.arange(2 * 6 * 40).reshape(2, 6, 40) == 85, float('nan'), torch.randn(2, 6, 40))]"
    cases = (("relu_plus_row_max", "return torch.relu(x) + x.amax(dim=-1, keepdim=True)", last),
             ("minus_row_min_clamped", "return (x - x.amin(dim=-1, keepdim=True)).clamp(0.1, 2.0)", last),
             ("maximum_half", "return torch.maximum(x * 0.5, torch.relu(x - 1.0))", last),
             ("softmax_nan_row", "return torch.softmax(x, dim=-1)", last),
             ("relu_plus_channel_max", "return torch.relu(x) + x.amax(dim=1, keepdim=True)", middle))
    for name, forward, inputs in cases:
        problem = CPU._problem(tmp_path, name, "pass", forward, inputs, "[]")
        assert _verify(problem, evaluator) is not None, name
