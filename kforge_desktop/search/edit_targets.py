"""Which function of a kernel an edit rewrites (``edit_target``), and the shape of that function that the
directive's text is written for (its length parameter, whether it returns its sum, its outer loop). A small
model rewrites one small function without breaking it far more often than a whole kernel."""

from __future__ import annotations

import random
import re

from ..csource.comments import strip_cpp_comments
from .applicability import applicable, unrollable

# which function of a kernel a directive changes: structural ones the entry point, loop-level ones a
# helper (a small function is what a small model rewrites without breaking it)
# (hoisting: the invariants are per row, in the entry point; asked of a one-loop helper, the default model
# pulled the caller's variables into it or made it call itself: 1 of 13 such edits was correct)
ENTRY_DIRECTIVES = {"openmp_rows", "cache_blocking", "single_pass", "reference_max", "fuse_epilogue",
                    "straightforward", "hoist_invariants", "launch_shape", "fusion"}
# CUDA directives that change a kernel's threads and loops: the __global__ functions (asked of a load helper,
# "a grid-stride loop" or "stage the row in shared memory" has nothing to act on)
GLOBAL_DIRECTIVES = {"grid_stride", "shared_tiling", "online_softmax", "vectorized_loads"}
REDUCTION_DIRECTIVES = {"unroll_accumulators"}


def returns_value(function: str) -> bool:
    """Whether a function ends by returning a variable (``return s;``): a helper that returns its sum."""
    return bool(re.search(r"\breturn\s+\w+\s*;\s*\}\s*$", function.strip()))


_LOOP = re.compile(r"\bfor\s*\(\s*(?:const\s+)?(?:int64_t|int|long|size_t|auto)\s+(\w+)\s*=\s*0\s*;\s*\1\s*<\s*"
                   r"([\w.]+(?:\s*\*\s*[\w.]+)?)\s*;")


def outer_loop(function: str) -> tuple[str, str] | None:
    """(variable, bound) of a function's first loop at the top of its body, counting from 0: ("o", "outer")
    for ``for (int64_t o = 0; o < outer; ++o)``; None when its body has no such loop."""
    code = strip_cpp_comments(function)
    start = code.find("{")
    if start < 0:
        return None
    depth, top = 0, []
    for ch in code[start:]:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif depth == 1:
            top.append(ch)
    body = "".join(top)  # the body's own statements, nested blocks left out
    m = _LOOP.search(body)
    return (m.group(1), m.group(2)) if m else None


def length_parameter(function: str) -> str:
    """The element-count parameter of a helper (its only integer parameter), or ""."""
    head = function[: function.find("{")] if "{" in function else function
    m = re.search(r"\((.*)\)", head, re.S)
    ints = re.findall(r"\b(?:int64_t|int|long|size_t)\s+(\w+)\s*(?:,|$)", m.group(1).strip()) if m else []
    return ints[0] if len(ints) == 1 else ""


def edit_targets(functions: list[tuple[str, str]], key: str, entry: str) -> list[str]:
    """The functions an edit with directive ``key`` may rewrite, from (name, text) pairs, sorted."""
    names = [n for n, _ in functions]
    if entry not in names or key in ENTRY_DIRECTIVES:
        return [entry]
    helpers = [(n, t) for n, t in functions if n != entry]
    if key in GLOBAL_DIRECTIVES:
        helpers = [(n, t) for n, t in helpers if re.search(r"__global__", t.split("{")[0])]
    elif key in REDUCTION_DIRECTIVES:  # sums (the pattern adds), not a maximum's, not unrolled already
        helpers = [(n, t) for n, t in helpers if unrollable(t)]
    elif key in ("simd_inner", "fast_math"):  # fast math: a function that calls the math (asked of a load
        # helper, the default model handed the seed back unchanged: benchmarks/results/gpu_samples_r35)
        helpers = [(n, t) for n, t in helpers if applicable(key, t)]
    else:
        helpers = [(n, t) for n, t in helpers if "for" in t]
    return sorted(n for n, _ in helpers) or [entry]


def _target_key(key: str, target: str, entry: str) -> str:
    return key if target == entry else f"{key}@{target}"


def edit_target(functions: list[tuple[str, str]], key: str, entry: str, rng: random.Random,
                tried: dict[str, str] | None = None) -> str:
    """The function an edit with directive ``key`` should rewrite: one it was not yet asked of from
    this node (``tried``: the node's directive@target keys), a seeded random one among those."""
    targets = edit_targets(functions, key, entry)
    fresh = [t for t in targets if _target_key(key, t, entry) not in (tried or {})]
    return rng.choice(fresh or targets)


def open_tried(tried: dict[str, str], functions: list[tuple[str, str]], entry: str) -> dict[str, str]:
    """``tried`` (directive@target -> outcome) without the directives that still have a function they
    were not asked of from this node: unrolling one helper's sum says nothing about unrolling the
    other's, and a directive the model carries out well should be asked of each (measured: unrolling
    48% correct against 10-21% for the directives that came next)."""
    out = dict(tried)
    for key in {k.split("@")[0] for k in tried}:
        targets = edit_targets(functions, key, entry)
        if any(_target_key(key, t, entry) not in tried for t in targets):
            out = {k: v for k, v in out.items() if k.split("@")[0] != key}
    return out
