"""The CUDA exemplars, adapted by the scaffold to each problem, build with nvcc and verify in the evaluator."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

PROBLEMS = Path(__file__).resolve().parents[2] / "resources" / "problems"
ALL = sorted(p.name for p in PROBLEMS.glob("*.py"))


@pytest.mark.parametrize("name", ALL)
def test_cuda_seed_is_correct_except_where_the_exemplar_covers_part_of_the_chain(name, evaluator):
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.exemplars import seed_exemplars
    from kforge_desktop.search.scaffold import build_scaffold

    problem = load_problem(PROBLEMS / name)
    scaffold = build_scaffold(problem, language="cuda")
    seeds = seed_exemplars(scaffold, problem.source)
    assert seeds, f"no CUDA exemplar fits {name}"
    exemplar, code = seeds[0]
    verdict = evaluator.evaluate(problem, scaffold.module_source(code))
    print(f"{name}: {exemplar.name}: {verdict.summary()}")
    if name == "group_norm_silu.py":
        assert verdict.status == "incorrect", verdict.summary()
    else:
        assert verdict.status == "ok", verdict.summary() + "\n" + verdict.log[-2000:]
