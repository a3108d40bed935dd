"""Every prompt the app sends, as templates in one place, chosen by backend (C++ for the CPU, CUDA,
Triton) and by the kind of request (a whole kernel, one named edit, a repair, a whole module).

Why this shape: prompts are the main lever on a small local model, so they must be easy to read
and change together. Each prompt is built from named sections; ``fit`` makes it fit the model's
context window by counting tokens with the model's own tokenizer and trimming sections in a
stated order (``TRIM_ORDER``), never the parent code or the signature the answer must implement.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from .generator import GenerationRequest, Message

KINDS = ("whole", "edit", "repair", "module")

SYSTEM = {
    "cpp": (
        "You are an expert C++ performance engineer. You write correct, fast CPU kernels in plain C++17 "
        "with OpenMP pragmas: raw pointers and loops, no PyTorch or Python. You answer with code in one "
        "```cpp block."
    ),
    "cuda": (
        "You are an expert CUDA performance engineer. You write correct, fast CUDA kernels (__global__ "
        "functions and a host launcher) with raw device pointers: no PyTorch headers. You answer with code "
        "in one ```cuda block."
    ),
    "triton": (
        "You are an expert GPU engineer who writes Triton kernels. You answer with one complete Python module "
        "in one ```python block."
    ),
}

LANGUAGE_RULES = {
    "cpp": (
        "Rules: plain C++17; <cmath>, <cstdint>, <algorithm> and <limits> are already included. Use float math "
        "(std::exp, std::sqrt, std::tanh, std::max). There is no std::rsqrt and no std::pi: write "
        "1.0f / std::sqrt(v) and 3.14159265f. Inputs are `const float*`: a pointer into an input must be "
        "`const float*` too. Index the flat arrays yourself (element (r, c) is at r * cols + c). Write every "
        "element of the output. No allocation, no PyTorch, no Python, no main() or test code."
    ),
    "cuda": (
        "Rules: CUDA C++17; <cuda_runtime.h>, <cstdint>, <cmath> and <cfloat> are already included. All "
        "pointers are device pointers. kernel_forward runs on the host: launch your __global__ kernel(s) on "
        "`stream` with <<<grid, block, shared_bytes, stream>>> and do not synchronize. Write every element of "
        "the output. No PyTorch headers, no cudaMalloc, no main() or test code."
    ),
    "triton": (
        "Rules: define class ModelNew(nn.Module) with the same __init__ arguments and forward signature as "
        "Model; compute the forward pass with your own @triton.jit kernel(s), not with PyTorch operators."
    ),
}

FENCE = {"cpp": "cpp", "cuda": "cuda", "triton": "python"}

# sections trimmed first come first; "problem" is shortened (comments, docstrings), never removed
TRIM_ORDER = ("failed", "exemplar", "device", "error", "problem")


@dataclass(frozen=True)
class PromptContext:
    """What one request is about. Strings are already rendered text; empty means absent."""

    kind: str  # whole | edit | repair | module
    language: str  # cpp | cuda | triton
    problem_source: str
    device: str = ""  # device facts (hardware.DeviceFacts.prompt_lines())
    signature: str = ""  # the extern "C" declaration the answer must define (scaffolded kinds)
    arguments: str = ""  # one line per argument
    parent_code: str = ""  # kernel (or module) to edit or repair
    parent_summary: str = ""  # the parent's verdict in one line
    edit_intro: str = ""  # edit: what the parent is, when not "this kernel is correct"
    error: str = ""  # compiler errors or mismatch statistics (repair)
    directive: str = ""  # the one change to make
    failed: tuple[str, ...] = ()  # approaches tried from this parent that did not work
    exemplar: str = ""  # a correct kernel of a similar op, in the same format
    exemplar_about: str = ""
    exemplar_missing: tuple[str, ...] = ()  # operators of the problem the exemplar does not compute
    target: str = ""  # edit: the one function to rewrite ("" = the entry point)
    previous: str = ""  # repair of an edit: the target function as it was before the edit, when it was correct
    begun: str = ""  # edit: the target's first lines as the answer begins with them (else its first line alone)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown prompt kind {self.kind!r}")


def _fenced(code: str, lang: str) -> str:
    return f"```{lang}\n{code.strip()}\n```"


def _sections(ctx: PromptContext) -> list[tuple[str, str]]:
    """(section name, text) in prompt order.

    The parts that stay the same for every call on a problem (the model, the signature, the device,
    the rules) come first and the parts that change (the parent kernel, the error, the directive)
    last, so the backend reuses the evaluated prompt prefix from one call to the next (measured here:
    prompt processing was half of the LLM time before this order)."""
    lang = ctx.language
    fence = FENCE.get(lang, "cpp")
    what = {"cpp": "C++ (CPU)", "cuda": "CUDA", "triton": "Triton"}.get(lang, lang)
    out: list[tuple[str, str]] = []
    if ctx.kind == "module":  # the model writes the whole ModelNew (no scaffold; Triton; pass@k sampling)
        out.append(("task", "Optimize this PyTorch model by replacing its forward computation with custom "
                    f"{what} kernels."))
        out.append(("problem", _fenced(ctx.problem_source, "python")))
        if ctx.device:
            out.append(("device", ctx.device))
        out.append(("rules", LANGUAGE_RULES.get(lang, "") if lang == "triton" else MODULE_RULES.get(lang, "")))
        if ctx.exemplar:
            out.append(("exemplar", "An example of the expected answer format (for another operation):\n"
                        + _fenced(ctx.exemplar, "python")))
        if ctx.parent_code:
            out.append(("parent", "The current version:\n" + _fenced(ctx.parent_code, "python")))
        if ctx.error:
            out.append(("error", ctx.error.strip()))
        if ctx.directive:
            out.append(("directive", f"Approach: {ctx.directive}"))
        out.append(("answer", "Name your optimized output architecture ModelNew. Reply with the complete Python "
                    "module in one ```python block."))
        return [(name, text) for name, text in out if text]

    # the shared prefix of every scaffolded request on this problem
    out.append(("intro", f"A {what} kernel must compute exactly what this PyTorch model's forward computes."))
    out.append(("problem", _fenced(ctx.problem_source, "python")))
    out.append(("signature", "The kernel is this function; it is called with these arguments:\n"
                + _fenced(ctx.signature + ";", fence) + "\n" + ctx.arguments))
    if ctx.device:
        out.append(("device", ctx.device))
    out.append(("rules", LANGUAGE_RULES.get(lang, "")))
    fn = _fn(ctx)
    if ctx.kind == "whole":
        if ctx.exemplar:
            about = f" ({ctx.exemplar_about})" if ctx.exemplar_about else ""
            out.append(("exemplar", f"Here is a correct kernel for a similar operation{about}, in the same "
                        "format. Start from it, and change it wherever this model computes something else (check "
                        "every operation listed above):\n" + _fenced(ctx.exemplar, fence)))
            if ctx.exemplar_missing:
                ops = ", ".join(ctx.exemplar_missing)
                out.append(("exemplar", f"That kernel does not compute {ops}; this model also applies it (see the "
                            "order of operations above). Add exactly that to it, in the loop that writes the output, "
                            "and keep the rest as it is."))
        out.append(("task", f"Write the kernel ({fn})."))
        if ctx.directive:
            out.append(("directive", f"Approach: {ctx.directive}"))
        if ctx.failed:
            out.append(("failed", "Already tried, did not work:\n" + "\n".join(f"- {f}" for f in ctx.failed)))
        out.append(("answer", f"Reply with the complete code (any helper functions and {fn}) in one "
                    f"```{fence} block."))
    elif ctx.kind == "edit":
        summary = f" ({ctx.parent_summary})" if ctx.parent_summary else ""
        out.append(("task", ctx.edit_intro or f"This kernel is correct{summary}:"))
        out.append(("parent", _fenced(ctx.parent_code, fence)))
        target = ctx.target or fn
        if ctx.edit_intro:  # completing a kernel: the results change on purpose
            out.append(("directive", f"Make ONE change, only inside the function `{target}`: {ctx.directive}\n"
                        f"Keep the name and parameters of `{target}`. Change nothing else."))
        elif target != fn:
            out.append(("directive", f"Make ONE change to make it faster, only inside the function `{target}`: "
                        f"{ctx.directive}\nKeep the name and parameters of `{target}` and keep the results "
                        "identical. Change nothing else."))
        else:
            out.append(("directive", f"Make ONE change to make it faster: {ctx.directive}\nKeep the signature "
                        "and keep the results identical. Change nothing else."))
        if ctx.failed:
            out.append(("failed", "Already tried on this kernel, did not work:\n" + "\n".join(f"- {f}" for f in ctx.failed)))
        if target != fn:
            out.append(("answer", f"Reply with only the new version of `{target}` in one ```{fence} block."))
        else:
            out.append(("answer", f"Reply with the complete new version of every function you changed (at least "
                        f"{target}) in one ```{fence} block."))
    else:  # repair
        compile_error = ctx.error.lower().startswith("compiler errors")
        out.append(("task", f"This kernel {'does not compile' if compile_error else 'is wrong'}:"))
        out.append(("parent", _fenced(ctx.parent_code, fence)))
        out.append(("error", ctx.error.strip()))
        if ctx.target and ctx.previous:
            # a failed edit of a correct kernel: the one function that changed, next to its working version
            # (a whole-file "fix it" came back unchanged half the time with the default model)
            out.append(("previous", f"Only `{ctx.target}` was changed, to make it faster, and that change broke the "
                        f"kernel. Before the change, `{ctx.target}` was correct:\n" + _fenced(ctx.previous, fence)))
            out.append(("answer", f"Fix the new `{ctx.target}`: keep its speed-up, but make it compute exactly what "
                        f"the correct version computes, with the same name and parameters. Reply with only the fixed "
                        f"`{ctx.target}` in one ```{fence} block."))
            return [(name, text) for name, text in out if text]
        out.append(("answer", f"Fix it, keeping the signature of {fn}. Reply with the corrected complete code in "
                    f"one ```{fence} block."))
    return [(name, text) for name, text in out if text]


MODULE_RULES = {
    "cpp": (
        "Write the kernel as a C++ string with an extern \"C\" function taking raw pointers (no torch headers), "
        "build it with `from kforge_desktop.kernels.native import load_native; _lib = load_native(SRC, "
        "lang=\"cpp\")` and call `_lib.your_function(tensor, ..., int_size)` from ModelNew.forward."
    ),
    "cuda": (
        "Write the kernel as a CUDA string with an extern \"C\" host launcher taking raw device pointers and a "
        "trailing `cudaStream_t stream` (no torch headers), build it with `from kforge_desktop.kernels.native "
        "import load_native; _lib = load_native(SRC, lang=\"cuda\")` and call `_lib.your_launcher(tensor, ..., "
        "int_size)` from ModelNew.forward (the stream is passed for you)."
    ),
}


def _fn(ctx: PromptContext) -> str:
    m = re.search(r"(\w+)\s*\(", ctx.signature)
    return m.group(1) if m else "the entry function"


def render(ctx: PromptContext) -> tuple[str, str]:
    """(system, user) text of the prompt."""
    user = "\n\n".join(text for _, text in _sections(ctx))
    return SYSTEM.get(ctx.language, SYSTEM["cpp"]), user


def request(ctx: PromptContext, **kwargs) -> GenerationRequest:
    system, user = render(ctx)
    return GenerationRequest(messages=(Message("system", system), Message("user", user)), **kwargs)


class PromptTooLong(Exception):
    """Even fully trimmed, the prompt does not fit the model's context window."""


def shorten_source(source: str) -> str:
    """The problem without comments, docstrings and blank lines (what trimming does to it)."""
    text = re.sub(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'', "", source)
    lines = [ln.split("  #", 1)[0].rstrip() for ln in text.splitlines()]
    return "\n".join(ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#"))


def _trim_error(text: str, lines: int) -> str:
    keep = [ln for ln in text.splitlines() if ln.strip()]
    errs = [ln for ln in keep if "error" in ln.lower()] or keep
    return "\n".join(errs[:lines])


def fit(ctx: PromptContext, count_tokens: Callable[[str], int], context_size: int, max_tokens: int,
        margin: int = 64) -> tuple[PromptContext, tuple[str, ...]]:
    """Trim ``ctx`` until system + user + the answer's ``max_tokens`` fit ``context_size``.

    Order (``TRIM_ORDER``): drop the list of failed approaches, then the exemplar, then the device
    facts; cut the error log to its first error lines; strip comments and docstrings from the problem.
    Returns the fitted context and the names of what was trimmed (stored with the LLM call)."""
    budget = context_size - max_tokens - margin

    def size(c: PromptContext) -> int:
        system, user = render(c)
        return count_tokens(system) + count_tokens(user) + 16  # chat template overhead

    trimmed: list[str] = []
    if size(ctx) <= budget:
        return ctx, ()
    for step in TRIM_ORDER:
        if step == "failed" and ctx.failed:
            ctx = replace(ctx, failed=())
        elif step == "exemplar" and ctx.exemplar:
            ctx = replace(ctx, exemplar="", exemplar_about="", exemplar_missing=())
        elif step == "device" and ctx.device:
            ctx = replace(ctx, device="")
        elif step == "error" and ctx.error:
            ctx = replace(ctx, error=_trim_error(ctx.error, 12))
            if size(ctx) > budget:
                ctx = replace(ctx, error=_trim_error(ctx.error, 3))
        elif step == "problem":
            ctx = replace(ctx, problem_source=shorten_source(ctx.problem_source))
        else:
            continue
        trimmed.append(step)
        if size(ctx) <= budget:
            return ctx, tuple(trimmed)
    raise PromptTooLong(
        f"the prompt needs {size(ctx)} tokens but the model's context leaves {budget} after the answer; "
        "load the model with a larger context or lower max_tokens."
    )


# -- KernelLLM's raw prompt format (models trained without a chat template) ----------------------------

KERNELLLM_TEMPLATE = """You write custom Triton kernels to replace the pytorch operators in the given architecture to get speedups.

You have complete freedom to choose the set of operators you want to replace. You may make the decision to replace some operators with custom Triton kernels and leave others unchanged. You may replace multiple operators with custom implementations, consider operator fusion opportunities (combining multiple operators into a single kernel, for example, combining matmul+relu), or algorithmic changes (such as online softmax). You are only limited by your imagination.

You are given the following architecture:
```
{source}
```

Optimize the architecture named Model with custom Triton kernels! Name your optimized output architecture ModelNew. Output the new code in codeblocks. Please generate real code, NOT pseudocode, make sure the code compiles and is fully functional. Just output the new model code, no other text, and NO testing code!
"""


def kernelllm_request(problem_source: str, **kwargs) -> GenerationRequest:
    """The raw completion prompt KernelLLM was trained on (problem in a code block, "ModelNew")."""
    return GenerationRequest(prompt=KERNELLLM_TEMPLATE.format(source=problem_source.strip()), **kwargs)


# -- verdict text for prompts --------------------------------------------------------------------------


def verdict_feedback(verdict, limit_lines: int = 20) -> str:
    """What a repair prompt says about a failed verdict: compiler errors, or mismatch statistics."""
    if verdict is None:
        return ""
    if verdict.status == "compile_error":
        log = verdict.log or verdict.reason
        lines = [ln for ln in log.splitlines() if ln.strip()]
        errs = [i for i, ln in enumerate(lines) if "error" in ln.lower()]
        if errs:
            picked: list[str] = []
            for i in errs[:6]:
                for ln in lines[i:i + 3]:
                    if ln not in picked:
                        picked.append(ln)
            lines = picked
        body = "\n".join(lines[:limit_lines])
        return f"Compiler errors:\n```\n{body}\n```"
    if verdict.status == "incorrect":
        stats = []
        if verdict.max_abs_err is not None:
            stats.append(f"max abs error {verdict.max_abs_err:.3g}")
        if verdict.rel_l2_err is not None:
            stats.append(f"relative L2 error {verdict.rel_l2_err:.3g}")
        extra = f" ({', '.join(stats)})" if stats else ""
        return (f"The output does not match the PyTorch model (mismatch){extra}: {verdict.reason}. Check the "
                "formula against the model's forward and the indexing of every array.")
    if verdict.status == "runtime_error":
        return f"It failed when run: {verdict.reason}"
    if verdict.status == "crashed":
        return (f"It crashed the process that ran it ({verdict.reason}). A kernel crashes when it reads or writes "
                "outside an array: check every index against the sizes given for each argument above (an output "
                "smaller than the input must not be written at the input's indices), and every loop bound.")
    if verdict.status == "timeout":
        return (f"It did not finish in time ({verdict.reason}): a loop that never ends, or far more work than the "
                "operation needs (a loop over a whole row inside the loop over that row's values).")
    return f"{verdict.status}: {verdict.reason}"


def parent_summary(verdict) -> str:
    if verdict is None or verdict.status != "ok" or verdict.speedup is None:
        return ""
    return f"{verdict.speedup:.2f}x the speed of PyTorch eager"
