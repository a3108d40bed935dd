"""Candidates straight from the model, without evaluating them (``kforge sample``).

For pass@k studies, or to generate on one machine and evaluate on another (``kforge eval PROBLEM.py
DIR/``). Works without a GPU: the scaffold runs the reference on whatever device its inputs are
created on (the CPU for KernelBench problems), so CUDA candidates are written on a laptop too.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..llm import prompts
from ..problem.problem import Problem
from .directives import CORRECT_FIRST
from .exemplars import best_exemplar
from .prompting import device_lines
from .scaffold import FUNCTION, ScaffoldError, build_scaffold, clean_kernel


@dataclass(frozen=True)
class Sample:
    source: str  # the candidate module, "" when the answer had no usable code
    answer: str
    problem: str  # why there is no code, else ""
    completion_tokens: int
    seconds: float


def sample_candidates(problem: Problem, generator, n: int, target: str = "cpp", seed: int = 0,
                      temperature: float = 0.7, max_tokens: int = 1024, scaffold: bool = True,
                      exemplars: bool = True) -> Iterator[Sample]:
    """Yield ``n`` samples for ``problem`` in ``target`` (cpp, cuda or triton), one LLM call each."""
    from ..llm.extract import extract_code

    sc = None
    if scaffold and target in ("cpp", "cuda"):
        try:
            sc = build_scaffold(problem, target)
        except ScaffoldError:
            sc = None
    device = device_lines("cpu") if target == "cpp" else ""
    directive = CORRECT_FIRST.get(target)
    if sc is not None:
        ctx = prompts.PromptContext(kind="whole", language=target, problem_source=problem.source, device=device,
                                    signature=sc.signature(), arguments=sc.describe_args(),
                                    directive=directive.text if directive else "")
        if exemplars:
            found = best_exemplar(sc, problem.source)
            if found:
                ctx = prompts.PromptContext(**{**ctx.__dict__, "exemplar": found[1], "exemplar_about": found[0].about})
    else:
        ctx = prompts.PromptContext(kind="module", language=target, problem_source=problem.source, device=device)
    ctx, _ = prompts.fit(ctx, generator.count_tokens, generator.context_size, max_tokens)
    for i in range(n):
        llm_seed = seed * 1_000_003 + i
        if sc is None and target == "triton" and getattr(generator, "raw_completion", False):
            request = prompts.kernelllm_request(problem.source, max_tokens=max_tokens, temperature=temperature,
                                                seed=llm_seed)  # KernelLLM's own raw prompt
        else:
            request = prompts.request(ctx, max_tokens=max_tokens, temperature=temperature, seed=llm_seed)
        gen = generator.generate(request)
        finished = gen.finish_reason != "length"
        if sc is not None:
            ex = extract_code(gen.text, function=FUNCTION, language=target, finished=finished)
            source = sc.module_source(clean_kernel(ex.code)) if ex.ok else ""
        else:
            ex = extract_code(gen.text, finished=finished)
            source = ex.code or ""
        yield Sample(source, gen.text, "" if source else (ex.problem or "no usable code"), gen.completion_tokens,
                     gen.seconds)
