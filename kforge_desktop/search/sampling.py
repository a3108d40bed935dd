"""Candidates straight from the model, without evaluating them (``kforge sample``).

For pass@k studies, or to generate on one machine and evaluate on another (``kforge eval PROBLEM.py
DIR/``). Works without a GPU: the scaffold runs the reference on whatever device its inputs are
created on (the CPU for KernelBench problems), so CUDA candidates are written on a laptop too.

The requests are the search's own first ones, shaped as the search shapes its answers (helpers
provided, compiler-reported slips fixed): ``whole`` asks for a kernel from scratch, correctness first,
with the nearest exemplar and what the problem computes otherwise than it; ``edit`` asks for the first
seed the search places (the exemplar fitted to the problem) rewritten with one optimization directive,
a different one per sample in the order a search tries them.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, replace

from ..llm import prompts
from ..problem.problem import Problem
from ..store.records import NodeRecord
from . import answers
from .applicability import applicable
from .config import SearchConfig
from .directives import CORRECT_FIRST, DIRECTIVES, choose_directive, directive_by_key
from .exemplars import best_exemplar, collapse_helpers
from .planner import edit_expansion, kernel_functions
from .prompting import device_lines, edit_directive, prefill, with_differences
from .scaffold import ScaffoldError, build_scaffold
from .setup import seed_kernels

KINDS = ("whole", "edit")


class SampleError(ValueError):
    """A request this problem cannot make (an edit with no seed to edit)."""


@dataclass(frozen=True)
class Sample:
    source: str  # the candidate module, "" when the answer had no usable code
    answer: str
    problem: str  # why there is no code, else ""
    completion_tokens: int
    seconds: float
    directive: str = ""  # what the request asked for (the directive's key)
    note: str = ""  # what was fixed or provided, or that the answer repeats the seed or the example


def _node(kernel: str, language: str, origin: str) -> NodeRecord:
    """A stand-in tree node for ``answers.shape_answer``: the root (no kernel) or the seed an edit changes."""
    return NodeRecord(id=1 if origin == "seed" else 0, problem_id=0, parent_id=None, origin=origin, state="evaluated",
                      language=language, directive="", source="", kernel_source=kernel, created_at=0.0)


def sample_candidates(problem: Problem, generator, n: int, target: str = "cpp", seed: int = 0,
                      temperature: float = 0.7, max_tokens: int = 1024, scaffold: bool = True,
                      exemplars: bool = True, kind: str = "whole", start: int = 0,
                      directive: str | None = None) -> Iterator[Sample]:
    """Yield samples ``start``..``n - 1`` for ``problem`` in ``target`` (cpp, cuda or triton), one LLM call each.
    The requests before ``start`` are chosen as for a full run (an edit's directive depends on the ones asked
    before it) but not asked: sample ``i`` is the same request whatever ``start``. ``directive``: the key every
    edit asks for instead (a directive that cannot change the seed is an error)."""
    from ..llm.extract import extract_code

    if kind not in KINDS:
        raise ValueError(f"unknown sample kind {kind!r}")
    sc = None
    if scaffold and target in ("cpp", "cuda"):
        try:
            sc = build_scaffold(problem, target)
        except ScaffoldError:
            sc = None
    if kind == "edit" and sc is None:
        raise SampleError(f"an edit needs a scaffolded kernel; this problem has no {target} scaffold")
    device = device_lines("cpu") if target == "cpp" else ""
    parent, example, seed_norms, functions = _node("", target, "root"), "", set(), []
    if sc is not None:
        common = dict(language=target, problem_source=problem.source, device=device, signature=sc.signature(),
                      arguments=sc.describe_args())
        seeds = seed_kernels(problem, sc) if exemplars else []  # the search's seeds: exemplars, else the lowering
        seed_norms = {answers.example_norm(code, target) for _, code, _ in seeds}  # an answer that repeats a seed
        if kind == "edit":
            if not seeds:
                raise SampleError("no exemplar fits this problem exactly and it cannot be lowered to loops, so a "
                                  "search places no seed to edit; sample whole kernels instead")
            parent = _node(seeds[0][1], target, "seed")
            functions = kernel_functions(parent.kernel_source, target)
            if directive is not None:
                asked = directive_by_key(target, directive)
                if asked is None:
                    keys = ", ".join(d.key for d in DIRECTIVES.get(target, ()))
                    raise SampleError(f"no {target} directive {directive!r} (the {target} directives: {keys})")
                if not applicable(directive, parent.kernel_source, sc.aten_ops):
                    raise SampleError(f"directive {directive!r} cannot change this problem's seed ({seeds[0][0]})")
            ctx = prompts.PromptContext(kind="edit", parent_code=collapse_helpers(parent.kernel_source, target),
                                        **common)
        else:  # the search's first request from the root
            first = CORRECT_FIRST.get(target)
            ctx = prompts.PromptContext(kind="whole", directive=first.text if first else "", **common)
            found = best_exemplar(sc, problem.source) if exemplars else None
            if found:
                ctx = replace(ctx, exemplar=collapse_helpers(found[1], target), exemplar_about=found[0].about)
                ctx = with_differences(ctx, found[0], sc, problem.source, target)
                example = answers.example_norm(ctx.exemplar, target)
    else:
        ctx = prompts.PromptContext(kind="module", language=target, problem_source=problem.source, device=device)
    tried: dict[str, str] = {}
    for i in range(n):
        llm_seed = seed * 1_000_003 + i
        key = CORRECT_FIRST[target].key if ctx.kind == "whole" and target in CORRECT_FIRST else ""
        request_ctx = ctx
        if kind == "edit":  # the next directive a search would ask of this seed
            rng = random.Random(f"{seed}:{i}")
            d = (directive_by_key(target, directive) if directive is not None else
                 choose_directive(target, tried, rng, kernel=parent.kernel_source, aten_ops=sc.aten_ops))
            exp = edit_expansion(parent.id, functions, d, target, rng, tried)
            tried[exp.directive] = "pending"
            key = exp.directive
            request_ctx = replace(ctx, directive=edit_directive(exp.directive_text, parent.kernel_source),
                                  target=exp.target, begun=exp.begun)
        if i < start:
            continue
        request_ctx, _ = prompts.fit(request_ctx, generator.count_tokens, generator.context_size, max_tokens)
        if sc is None and target == "triton" and getattr(generator, "raw_completion", False):
            request = prompts.kernelllm_request(problem.source, max_tokens=max_tokens, temperature=temperature,
                                                seed=llm_seed)  # KernelLLM's own raw prompt
        else:
            request = prompts.request(request_ctx, max_tokens=max_tokens, temperature=temperature, seed=llm_seed,
                                      prefill=prefill(request_ctx, SearchConfig(), sc))
        gen = generator.generate(request)
        if sc is not None:
            a = answers.shape_answer(gen, request_ctx.kind, request_ctx.target, parent, language=target,
                                     scaffold=sc, fix=True, example=example,
                                     find_duplicate=lambda norm: 1 if norm in seed_norms else None)
            note = "a seed handed back unchanged" if a.duplicate_of is not None else a.note
            yield Sample(a.source, gen.text, "" if a.source else a.note, gen.completion_tokens, gen.seconds, key, note)
        else:
            ex = extract_code(gen.text, finished=gen.finish_reason != "length")
            source = ex.code or ""
            yield Sample(source, gen.text, "" if source else (ex.problem or "no usable code"), gen.completion_tokens,
                         gen.seconds, key)
