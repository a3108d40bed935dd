"""torch.compile's own generated code, captured in a subprocess and wrapped in a ModelNew, is a
correct seed that runs as fast as torch.compile: a GPU search starts no slower than torch.compile."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

PROBLEMS = Path(__file__).resolve().parents[2] / "resources" / "problems"
ALL = sorted(p.name for p in PROBLEMS.glob("*.py"))


@pytest.mark.parametrize("name", ALL)
def test_compile_seed_is_correct_and_as_fast_as_torch_compile(name, evaluator):
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.inductor_seed import inductor_module

    problem = load_problem(PROBLEMS / name)
    source = inductor_module(problem, "cuda")
    assert "def call(" in source and "class ModelNew" in source and "triton" in source
    verdict = evaluator.evaluate(problem, source)
    print(f"{name}: {verdict.summary()} (vs torch.compile {verdict.speedup_compile})")
    assert verdict.status == "ok", verdict.summary() + "\n" + verdict.log[-3000:]
    # the same kernels as torch.compile, without its guards and wrapper: never slower beyond noise
    # (on small inputs faster, where torch.compile's own per-call overhead dominates)
    assert verdict.speedup_compile is not None and verdict.speedup_compile > 0.8, verdict.summary()


def test_a_cuda_session_starts_from_the_compile_seed(tmp_path):
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.config import SearchConfig
    from kforge_desktop.search.engine import create_session
    from kforge_desktop.store import SessionStore

    store = SessionStore(tmp_path / "s.kforge")
    pid = create_session(store, load_problem(PROBLEMS / "softmax.py"), SearchConfig(device="cuda", budget_candidates=1))
    seeds = [n for n in store.nodes(pid) if n.origin == "seed"]
    compiled = [n for n in seeds if n.directive == "torch.compile"]
    assert len(compiled) == 1 and compiled[0].language == "triton" and "def call(" in compiled[0].source
    assert any(n.directive.startswith("exemplar:") for n in seeds)  # the CUDA exemplar is a seed too
    store.close()
