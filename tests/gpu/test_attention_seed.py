"""The flash-attention exemplar (Triton), fitted to an attention problem as a search places it, builds
and verifies in the evaluator on the GPU: the diffusion block's spatial attention (no mask, 256-wide
head) and the LLM block's causal attention (16 heads of 128, the mask built from ``ones().triu(1)``),
at GPU size; and the same attentions as two products of the matmul exemplar around the softmax
exemplar (no PyTorch softmax: the evaluator would reject it). Speed: ``benchmarks/attention_gpu.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
PROBLEMS = REPO / "benchmarks" / "problems_attention"


@pytest.mark.parametrize("seed", ["attention_module", "attention_products_module"])
@pytest.mark.parametrize("name", ["spatial", "causal"])
def test_the_attention_seed_is_correct_at_gpu_size(name, seed, evaluator):
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search import attention_seed

    problem = load_problem(PROBLEMS / f"{name}.py")
    source = getattr(attention_seed, seed)(problem.source)
    assert source is not None, f"the attention exemplar does not fit {name}"
    verdict = evaluator.evaluate(problem, source)
    print(f"{name} {seed}: {verdict.summary()}; torch.compile {verdict.compile_baseline_ms} ms")
    assert verdict.status == "ok", verdict.summary() + "\n" + verdict.log[-2000:]
    assert verdict.rel_l2_err is not None and verdict.rel_l2_err < 2e-5
