"""torch.compile's own generated code, captured in a subprocess and wrapped in a ModelNew, is a
correct seed that runs its Triton kernels directly, without torch.compile at run time. How fast it is
next to torch.compile is measured by ``benchmarks/search_quality.py --seeds --device cuda``."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

PROBLEMS = Path(__file__).resolve().parents[2] / "resources" / "problems"
ALL = sorted(p.name for p in PROBLEMS.glob("*.py"))


@pytest.mark.parametrize("name", ALL)
def test_compile_seed_is_correct_and_runs_without_torch_compile(name, evaluator):
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.inductor_seed import inductor_module

    problem = load_problem(PROBLEMS / name)
    source = inductor_module(problem, "cuda")
    assert "def call(" in source and "class ModelNew" in source and "@triton.jit" in source
    model_new = source.split("class ModelNew", 1)[1]
    # the same kernels as torch.compile, without its guards and wrapper: forward calls them directly
    assert "call([" in model_new and "torch.compile" not in model_new
    verdict = evaluator.evaluate(problem, source)
    print(f"{name}: {verdict.summary()} (vs torch.compile {verdict.speedup_compile})")
    assert verdict.status == "ok", verdict.summary() + "\n" + verdict.log[-3000:]
    assert verdict.language == "triton"  # ok means its own compiled kernels ran and were correct
    assert verdict.speedup_compile is not None  # it was timed against torch.compile itself


def test_a_cuda_session_starts_from_the_compile_seed(tmp_path):
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.config import SearchConfig
    from kforge_desktop.search.setup import create_session
    from kforge_desktop.store import SessionStore

    store = SessionStore(tmp_path / "s.kforge")
    pid = create_session(store, load_problem(PROBLEMS / "softmax.py"), SearchConfig(device="cuda", budget_candidates=1))
    seeds = [n for n in store.nodes(pid) if n.origin == "seed"]
    compiled = [n for n in seeds if n.directive == "torch.compile"]
    assert len(compiled) == 1 and compiled[0].language == "triton" and "def call(" in compiled[0].source
    assert any(n.directive.startswith("exemplar:") for n in seeds)  # the CUDA exemplar is a seed too
    store.close()


def test_the_compile_seed_of_a_target_called_at_two_sizes_is_correct(evaluator):
    """vision_stage_gpu's BatchNorm + ReLU runs at four sizes; its compile seed had the first size
    built in and failed its size asserts on the others (runtime_error), so the target had no seed."""
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.inductor_seed import inductor_module

    problem = load_problem(Path(__file__).resolve().parents[1] / "candidates" / "shapes" / "bn_relu_two_shapes.py")
    verdict = evaluator.evaluate(problem, inductor_module(problem, "cuda"))
    assert verdict.status == "ok", verdict.summary() + "\n" + verdict.log[-3000:]
