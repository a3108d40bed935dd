"""The CUDA exemplars, adapted by the scaffold to each problem, build with nvcc and verify in the evaluator:
on the small problems the search ships with, and at GPU size on one problem per exemplar family
(``benchmarks/problems_gpu``). Speed is reported here, measured in ``benchmarks/gpu_exemplars.py``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
PROBLEMS = REPO / "resources" / "problems"
ALL = sorted(p.name for p in PROBLEMS.glob("*.py"))


def _benchmark():
    """benchmarks/gpu_exemplars.py: the families, their GPU-sized problems and the bandwidth floor."""
    spec = importlib.util.spec_from_file_location("gpu_exemplars", REPO / "benchmarks" / "gpu_exemplars.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


BENCH = _benchmark()


@pytest.mark.parametrize("name", ALL)
def test_cuda_seed_is_correct(name, evaluator):
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.exemplars import missing_ops, seed_exemplars
    from kforge_desktop.search.scaffold import build_scaffold

    problem = load_problem(PROBLEMS / name)
    scaffold = build_scaffold(problem, language="cuda")
    seeds = seed_exemplars(scaffold, problem.source)
    assert seeds, f"no CUDA exemplar fits {name}"
    exemplar, code = seeds[0]
    assert missing_ops(exemplar, scaffold) == []  # GroupNorm + SiLU has a complete exemplar of its own
    verdict = evaluator.evaluate(problem, scaffold.module_source(code))
    print(f"{name}: {exemplar.name}: {verdict.summary()}")
    assert verdict.status == "ok", verdict.summary() + "\n" + verdict.log[-2000:]


@pytest.mark.parametrize("family", list(BENCH.FAMILIES))
def test_each_exemplar_family_is_correct_at_gpu_size(family, evaluator):
    """Each family's exemplar on its GPU-sized problem, built and verified as a seed node is; the ratio of
    the evaluator's per-call time to the bandwidth floor is printed (device time: the benchmark)."""
    problem, source, seed, shape = BENCH.seed_source(family)
    verdict = evaluator.evaluate(problem, source)
    floor_ms = BENCH.floor_bytes(problem) / BENCH.BANDWIDTH * 1e3
    ratio = f"{verdict.latency_ms / floor_ms:.2f}x the floor per call" if verdict.latency_ms else "not timed"
    print(f"{family} {shape}: {BENCH.FAMILIES[family][1]} (search seed: {seed}): {verdict.summary()}; "
          f"floor {floor_ms:.4f} ms, {ratio}; torch.compile {verdict.compile_baseline_ms} ms")
    assert verdict.status == "ok", verdict.summary() + "\n" + verdict.log[-2000:]
    assert seed == BENCH.FAMILIES[family][1], f"the search would seed {family} with {seed}"
