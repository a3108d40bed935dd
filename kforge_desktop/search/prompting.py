"""What the model is shown for one expansion: the prompt context, the answer's first line, the request.

The prompt templates themselves live in ``llm.prompts``; this module decides what goes into them
for a planned expansion: the problem, the scaffold's signature, the device, the parent's code as
the prompt shows it (shared helpers collapsed), the exemplar closest to the problem for a kernel
written from scratch, the error of a failed parent, and the approaches that already failed below
the node, so that the model is not asked again for what it could not do.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

from ..csource.items import function_head, function_text
from ..llm import prompts
from ..llm.generator import Generation, GenerationRequest
from .config import SearchConfig
from .differences import differences
from .directives import CORRECT_FIRST, directive_by_key
from .exemplars import (
    EPILOGUE_OPS,
    PROVIDED,
    SHARED_HELPERS,
    best_exemplar,
    collapse_helpers,
    epilogue_missing,
    missing_ops,
)
from .scaffold import FUNCTION, Scaffold
from .tree import Tree

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..store.records import NodeRecord
    from .planner import Expansion


def device_lines(device: str) -> str:
    """The device's facts as a prompt states them (SMs, shared memory, SIMD...)."""
    try:
        from ..hardware import device_facts

        return device_facts(device).prompt_lines()
    except Exception:  # facts are a nicety in a prompt, never a reason to fail
        return ""


def prompt_context(exp: Expansion, tree: Tree, node: Callable[[int], NodeRecord], language: str,
                   problem_source: str, scaffold: Scaffold | None, config: SearchConfig) -> prompts.PromptContext:
    """The prompt for ``exp``; ``node`` returns a full record (with source) by id."""
    parent = node(exp.parent_id)
    failed = tuple(f"{directive_label(language, k)}: {why}" for k, why in tree.failed_approaches(exp.parent_id))
    common = dict(language=language, problem_source=problem_source, device=device_lines(config.device),
                  failed=failed[-4:])
    if scaffold is not None:
        common.update(signature=scaffold.signature(), arguments=scaffold.describe_args())
    if exp.kind == "whole":
        ctx = prompts.PromptContext(kind="whole", directive=exp.directive_text, **common)
        if config.exemplars and scaffold is not None:
            found = best_exemplar(scaffold, problem_source, memory=config.memory)
            # once an answer handed the example of a nearby family back unchanged, the default model
            # copies it again whatever the prompt says (docs/benchmarks.md: the dev half's duplicates):
            # later whole kernels are asked without it, from the problem itself, and (with nothing
            # correct to start from) as straightforward kernels: an optimization asked of a kernel
            # written from scratch went astray ("fuse the passes" turned a cumulative sum into sums)
            withheld = found is not None and tree.copied_example(exp.parent_id)
            if withheld and language in CORRECT_FIRST and tree.best() is None:
                # the sentences on what this model computes stay (dev/log_softmax: without the example
                # they went too, and three answers in three wrote a row sum)
                ctx = replace(ctx, directive=CORRECT_FIRST[language].text
                              + reminder(found, scaffold, problem_source, language))
            elif found and not withheld:
                ctx = replace(ctx, exemplar=collapse_helpers(found[1], language), exemplar_about=found[0].about)
                ctx = with_differences(ctx, found[0], scaffold, problem_source, language)
        return ctx
    shown = collapse_helpers(parent.kernel_source, language)  # the parent as the prompt shows it
    if exp.kind == "edit":
        return prompts.PromptContext(kind="edit", directive=edit_directive(exp.directive_text, parent.kernel_source),
                                     parent_code=shown,
                                     parent_summary=prompts.parent_summary(parent.verdict),
                                     target=exp.target, begun=exp.begun, **common)
    if exp.kind == "repair" and exp.directive.startswith("complete:"):
        return prompts.PromptContext(kind="edit", directive=exp.directive_text, parent_code=shown,
                                     target=exp.target, edit_intro="This kernel is correct except that it "
                                     "leaves out the last operation:", **common)
    if parent.origin != "root" and parent.language != language:
        common["language"] = parent.language
        scaffold = None  # the parent is a whole module in its own language: the answer is one too
    if exp.kind == "repair":
        code = shown if scaffold is not None else parent.source
        common["failed"] = ()
        kind = "repair" if scaffold is not None else "module"
        previous = ""
        if exp.target and scaffold is not None and parent.parent_id is not None:
            previous = function_text(node(parent.parent_id).kernel_source, exp.target) or ""
        error = prompts.verdict_feedback(parent.verdict)
        if scaffold is not None and not previous and parent.verdict is not None and parent.verdict.status == "incorrect" \
                and config.exemplars:
            error += reminder(best_exemplar(scaffold, problem_source, memory=config.memory), scaffold, problem_source,
                              language)
        return prompts.PromptContext(kind=kind, parent_code=code, error=error,
                                     target=exp.target if previous else "", previous=previous, **common)
    # module: the model writes the whole ModelNew (no scaffold)
    parent_code = parent.source if parent.origin != "root" else ""
    return prompts.PromptContext(kind="module", directive=exp.directive_text, parent_code=parent_code, **common)


KEEP_NAN = (" Keep every NaN test as it is (`e != e`, as in `(e > v) | (e != e) ? e : v`): the kernel is also "
            "checked on inputs holding NaN, which must come out where PyTorch puts them.")


def edit_directive(text: str, parent_code: str) -> str:
    """An edit's directive, and where the kernel tests for NaN (a value compared with itself) the request to
    keep those tests: asked for SIMD loops "without branches", the default model rewrote the max pooling seed's
    ``(e > v) | (e != e) ? e : v`` as ``std::max`` in 21 of 26 correct dev kernels, which the NaN trial
    then failed (docs/benchmarks.md, thirty-sixth measurement)."""
    return text + KEEP_NAN if re.search(r"\b(\w+)\s*!=\s*\1\b", parent_code or "") else text


def reminder(found, scaffold: Scaffold, problem_source: str, language: str) -> str:
    """For the repair of a wrong kernel, and a whole kernel asked without the example: what the reference
    computes otherwise than the example the whole-kernel prompt showed (the log of a log-softmax, a mask,
    a factor), which a wrong kernel most likely left out. On dev/log_softmax the repair was told only
    the error's size, and answered log(1 + exp(x - max)); the sentence that would have named the
    log-sum was in the first prompt only. Sentences about the example itself are left out (it is not
    shown). ``found``: the example (``best_exemplar``); "" when there is none or it fits exactly."""
    if found is None:
        return ""
    notes = [n for n in differences(found[0], scaffold, problem_source, language)
             if "example" not in n]  # sentences about the example: it is not in this prompt
    if not notes:
        return ""
    return "\nWhat this model computes (check each against the kernel):\n" + "\n".join(f"- {n}" for n in notes)


def prefill(ctx: prompts.PromptContext, config: SearchConfig, scaffold: Scaffold | None) -> str:
    """The start of the answer to a request that changes one function: the fence and that function's
    first line. Asked to edit the entry point, the default model copied every helper before it
    (the row-softmax exemplar's ``fast_exp`` alone is 20 lines) and ran out of tokens before the
    function it had to change (docs/benchmarks.md); begun for it, the answer is that function. A request that
    replaces named lines of the function begins it with every line before them (``ctx.begun``)."""
    if not config.prefill or scaffold is None:
        return ""
    if ctx.kind == "edit":
        head = ctx.begun or function_head(ctx.parent_code, ctx.target or FUNCTION)
    elif ctx.kind == "repair" and ctx.target and ctx.previous:
        head = function_head(ctx.previous, ctx.target)
    else:
        return ""
    return f"```{prompts.FENCE.get(ctx.language, 'cpp')}\n{head}\n" if head else ""


def request(ctx: prompts.PromptContext, config: SearchConfig, language: str, problem_source: str, llm_calls: int,
            raw_completion: bool, scaffold: Scaffold | None) -> GenerationRequest:
    """The request for one expansion. Its sampling seed derives from the session seed and the number
    of LLM calls made so far, so a seeded search asks the same questions with the same seeds again."""
    seed = (config.seed * 1_000_003 + llm_calls) % (2**31)
    # every question at the session's temperature, also one asked again after an answer that repeated a kernel:
    # asked hotter, the dev searches made fewer correct kernels and no fewer repeats (docs/benchmarks.md)
    temperature = config.temperature
    if ctx.kind == "module" and language == "triton" and raw_completion:
        # a model trained on KernelLLM's raw prompt (no chat template) gets exactly that prompt
        return prompts.kernelllm_request(problem_source, max_tokens=config.max_tokens, temperature=temperature,
                                         top_p=config.top_p, seed=seed)
    return prompts.request(ctx, max_tokens=config.max_tokens, temperature=temperature, top_p=config.top_p,
                           seed=seed, prefill=prefill(ctx, config, scaffold))


def call_record(req: GenerationRequest, gen: Generation, trimmed: tuple[str, ...]) -> tuple[str, dict]:
    """The prompt and the parameters of one LLM call as the session keeps them: the raw prompt, or
    the chat messages and the answer as begun for the model; what was trimmed to fit the context."""
    if req.prompt is not None:
        shown = req.prompt
    else:
        shown = "\n\n".join(f"[{m.role}]\n{m.content}" for m in req.messages)
        if req.prefill:
            shown += f"\n\n[assistant, begun for the model]\n{req.prefill}"
    return shown, {"temperature": req.temperature, "seed": req.seed, "max_tokens": req.max_tokens,
                   "finish_reason": gen.finish_reason, "trimmed": list(trimmed), "tokens_per_s": gen.tokens_per_s,
                   "prompt_seconds": gen.prompt_seconds}


def with_differences(ctx: prompts.PromptContext, exemplar, scaffold: Scaffold, problem_source: str,
                     language: str) -> prompts.PromptContext:
    """``ctx`` saying what the problem computes otherwise than the exemplar it shows: when that is
    only an elementwise epilogue (GroupNorm's exemplar for GroupNorm + SiLU), as the exemplar's
    missing operators ("add exactly that, in the loop that writes the output"); otherwise, one line
    per difference in the directive (a causal mask, a log, another argument)."""
    notes = differences(exemplar, scaffold, problem_source, language)
    if not notes:
        return ctx
    missing = missing_ops(exemplar, scaffold)
    if missing and epilogue_missing(exemplar, scaffold) == missing and len(notes) == len(missing):
        table = EPILOGUE_OPS.get(language, {})
        return replace(ctx, exemplar_missing=tuple(epilogue_text(op, table, language) for op in missing))
    lines = "\n".join(f"- {n}" for n in notes)
    text = f"{ctx.directive}\nThe example kernel is for a similar operation; change it where this model differs:\n{lines}"
    return replace(ctx, directive=text.strip())


def epilogue_text(op: str, table: dict[str, str], language: str) -> str:
    """How a whole-kernel prompt names an operator the exemplar leaves out."""
    if op not in table:
        return op
    provided = provided_note(table[op], language)
    return f"{op} (of a value v: {table[op]}{'; ' + provided if provided else ''})"


def provided_note(code: str, language: str) -> str:
    """What a prompt says about the shared helpers (``provide_helpers``) that ``code`` calls."""
    names = [n for n in SHARED_HELPERS.get(language, {}) if f"{n}(" in code]
    return f"`{names[0]}` is {PROVIDED}" if names else ""


def directive_label(language: str, key: str) -> str:
    """A directive's short name, as the list of failed approaches shows it."""
    d = directive_by_key(language, key.split("@")[0])
    return d.text.split(":")[0].rstrip(".") if d else key
