"""Optimization directives: the one named change an expansion asks the model for.

Why named directives: a small model keeps a working kernel working when asked for one concrete
change far more often than when asked to "make it faster"; naming the change also lets the tree
remember what was already tried from a node and failed, so it is not asked for again.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from ..csource.comments import strip_cpp_comments
from ..csource.items import ENTRY, function_text
from .applicability import accumulators, applicable, entry_divisions, reference_parts

# how the unrolled pattern ends: in a function that returns its sum, by returning the four (the default
# model otherwise spent "the total" on a new pass over the row and returned nothing)
SUM_END = "const float total = (s0 + s1) + (s2 + s3);  // used where the old sum was"
SUM_RETURN = "return (s0 + s1) + (s2 + s3);"

# the reference-maximum request with its pattern (``reference_max_text``), asked 6 times each of the dev half's lowered
# log_softmax, smoothed_cross_entropy and padding_masked_softmax (``kforge sample ... --directive reference_max --seed
# 0`` at 572aad5): 11 correct edits of 18, judged by ``benchmarks/online_blocks.py --samples`` (docs/benchmarks.md,
# forty-second measurement). Its first wording declared the row's maximum and the sum on one line, which 4 of 12
# answers copied wrong (the sum dropped or both made const): 5 of 12 correct then
REFERENCE_PRIOR = 0.61
# the values of a row whose maximum is the reference, and how far above it a row's maximum may lie before its sum
# is taken again at that maximum (exp(64) times a row's length stays far inside a float)
REFERENCE_FIRST = 64
REFERENCE_SLACK = 64


@dataclass(frozen=True)
class Directive:
    key: str
    text: str  # the instruction as the prompt states it
    example: str = ""  # the pattern in a few lines of code: a small model copies a pattern far better
    #                    than it turns a sentence into code (shown in edit requests)
    prior: float = 0.5  # the share of such requests a small model carried out correctly (see PRIORS)

    def prompt_text(self, fence: str, length: str = "", returns_sum: bool = False, term: str = "",
                    loop: tuple[str, str] | None = None) -> str:
        """The instruction, and its pattern when it has one. Patterns only show structure, with the
        work itself left as a comment: the default 1.5B model copied any computation a pattern
        showed literally (`s0 += xr[c]` for a sum of squares, `std::exp` into a norm). ``length``:
        the name the edited function gives its element count, written into the pattern (asked to
        "use the names of the code above", the model still copied `cols` into a function of `n`).
        ``term``: what the edited loop adds per element (``reduction_term``, ``{i}`` for the element).
        That is the function's own work, safe to copy, and the pattern shows it instead of a comment
        (asked with the comment, the model copied it: ``s0 += /* the term of element c */;``).
        ``loop``: the (variable, bound) of the kernel's own outermost loop (``outer_loop``), written into a
        pattern over rows: a kernel whose outer loop is not over the scaffold's ``rows`` (a pooling's planes,
        the values before a reduced middle dimension) had that loop rewritten to run over ``rows``, past the
        end of its output."""
        if not self.example:
            return self.text
        example = self.example.strip()
        if length:
            example = re.sub(r"\bcols\b", length, example)
        if term:
            example = re.sub(r"/\* the term of element (c(?: \+ \d)?) \*/", lambda m: _term_at(term, m.group(1)),
                             example)
        if returns_sum:
            example = example.replace(SUM_END, SUM_RETURN)
        if loop and loop != ("r", "rows") and re.search(r"\brows\b", example):  # a pattern over rows
            var, bound = loop
            example = "\n".join(line for line in example.split("\n") if "* cols" not in line)  # no row pointers
            example = re.sub(r"\br([01]?)\b", lambda m: var + m.group(1), re.sub(r"\brows\b", bound, example))
            example = example.replace("per-row work", "work of each " + var)
        return f"{self.text}\nThe pattern (use the names of the code above):\n```{fence}\n{example}\n```"


def _term_at(term: str, element: str) -> str:
    """``term`` (with ``{i}`` for the element) written for ``element`` ("c" or "c + 1")."""
    out = term.replace("[{i}]", f"[{element}]")
    return out.replace("{i}", element if element == "c" else f"({element})")


_DECL = re.compile(r"^(?:const\s+)?(?:float|double|auto)\s+(\w+)\s*=\s*(.+)$", re.S)
_ADD = re.compile(r"^(\w+)\s*\+=\s*(.+)$", re.S)


def reduction_term(function: str) -> str:
    """What a helper's one summing loop adds per element, with ``{i}`` for the element: ``v[{i}] *
    v[{i}]`` for ``for (i ...) { float d = v[i]; s += d * d; }``. "" when the function has more than
    one loop, or the loop does anything but name values and add one of them (a store, a call with
    effects, a second sum): those keep the pattern's placeholder."""
    code = strip_cpp_comments(function)
    if len(re.findall(r"\bfor\s*\(", code)) != 1:
        return ""
    m = re.search(r"for\s*\(\s*(?:int64_t|int|long|size_t)\s+(\w+)\s*=\s*\w+\s*;[^;]*;[^)]*\)\s*"
                  r"(?:\{([^{}]*)\}|([^;{}]*;))", code)
    if not m:
        return ""
    var, body = m.group(1), (m.group(2) if m.group(2) is not None else m.group(3))
    statements = [st.strip() for st in body.split(";") if st.strip()]
    if not statements:
        return ""
    names: dict[str, str] = {}

    def inline(expr: str) -> str:
        for name, value in names.items():
            expr = re.sub(rf"\b{name}\b", f"({value})", expr)
        return expr.strip()
    for st in statements[:-1]:
        d = _DECL.match(st)
        if not d:
            return ""
        names[d.group(1)] = inline(d.group(2))
    add = _ADD.match(statements[-1])
    if not add or "=" in add.group(2).replace("==", "").replace("<=", "").replace(">=", ""):
        return ""
    term = inline(add.group(2))
    if re.search(r"\b" + re.escape(add.group(1)) + r"\b", term):
        return ""
    term = re.sub(rf"\[\s*{var}\s*\]", "[\0]", term)
    return re.sub(rf"\b{var}\b", "\0", term).replace("\0", "{i}")


# the first expansion from the root: correctness first
CORRECT_FIRST = {
    "cpp": Directive("straightforward", "Write a straightforward, correct kernel first: plain loops over rows, "
                     "float accumulators, `#pragma omp parallel for` over the independent rows."),
    "cuda": Directive("straightforward", "Write a straightforward, correct kernel first: one thread block per "
                      "row (or a grid-stride loop for elementwise work), reductions through shared memory."),
    "triton": Directive("straightforward", "Write a straightforward, correct Triton kernel first: one program "
                        "per row, BLOCK_SIZE the next power of two of the row length."),
}

DIRECTIVES: dict[str, tuple[Directive, ...]] = {
    "cpp": (
        Directive("openmp_rows", "Parallelize the loop over independent rows (or groups) with "
                  "`#pragma omp parallel for schedule(static)`.",
                  "#pragma omp parallel for schedule(static)\n"
                  "for (int64_t r = 0; r < rows; ++r) {\n"
                  "    const float* xr = x + r * cols;  // this row's input\n"
                  "    float* yr = out + r * cols;      // this row's output\n"
                  "    // ... the same per-row work as before ...\n"
                  "}", prior=0.40),
        Directive("simd_inner", "Make the inner loops SIMD-friendly: `#pragma omp simd` (with `reduction(+ : s)` "
                  "for sums, `reduction(max : m)` for a maximum), no branches or function calls inside, "
                  "contiguous access.", prior=0.51),
        Directive("single_pass", "Fuse the passes over each row: compute the statistics the row needs in one "
                  "loop (e.g. sum and sum of squares together, or an online max-and-sum) and write the output "
                  "in the next.", prior=0.27),
        Directive("reference_max", "Fuse the row's maximum into the loop that sums its exponentials: take the "
                  "exponentials at a reference (the largest of the row's first values) while the same SIMD loop "
                  "takes the row's maximum; sum again at that maximum only when it lies far above the reference.",
                  prior=REFERENCE_PRIOR),
        Directive("hoist_invariants", "Hoist loop invariants: row pointers, constants, and a reciprocal of a "
                  "divisor that does not change inside the loop (one scalar before it, `const float inv = 1.0f / "
                  "d;`, then multiply by `inv`), outside the inner loops. No arrays of precomputed values, no "
                  "allocation. Inputs stay `const float*`: never write into them.", prior=0.67),
        Directive("unroll_accumulators", "Unroll the reduction loop by 4 with four independent accumulators "
                  "(shorter dependency chains): each step handles elements c, c + 1, c + 2, c + 3, one per "
                  "accumulator, so every element is added exactly once, and does for each of the four everything "
                  "the old loop body did (stores included); a tail loop handles the last elements; the four sums "
                  "are added at the end.",
                  "float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;\n"
                  "int64_t c = 0;\n"
                  "for (; c + 4 <= cols; c += 4) {\n"
                  "    s0 += /* the term of element c */;\n"
                  "    s1 += /* the term of element c + 1 */;\n"
                  "    s2 += /* the term of element c + 2 */;\n"
                  "    s3 += /* the term of element c + 3 */;\n"
                  "}\n"
                  "for (; c < cols; ++c) s0 += /* the term of element c */;  // the tail\n"
                  + SUM_END, prior=0.54),
        Directive("cache_blocking", "Block the work so each chunk of data is reused while it is in L1/L2 cache "
                  "(process a few rows or a tile at a time). Every row must still be processed.",
                  "const int64_t tile = 8;\n"
                  "#pragma omp parallel for schedule(static)\n"
                  "for (int64_t r0 = 0; r0 < rows; r0 += tile) {\n"
                  "    const int64_t r1 = std::min(rows, r0 + tile);\n"
                  "    for (int64_t r = r0; r < r1; ++r) {\n"
                  "        // ... the same per-row work as before ...\n"
                  "    }\n"
                  "}", prior=0.62),
        Directive("fuse_epilogue", "Fuse the whole chain into the kernel's final loop: apply the scale, bias "
                  "and activation while writing the output, without an extra pass over memory.", prior=0.19),
        Directive("float_math", "Use single-precision math functions and constants everywhere (`expf`, "
                  "`tanhf`, `sqrtf`, `1.0f`), no doubles in the inner loop.", prior=0.30),
    ),
    "cuda": (
        Directive("vectorized_loads", "Use vectorized memory access: load and store `float4` when the row "
                  "length is a multiple of 4 (keep a scalar tail)."),
        Directive("warp_reductions", "Do the reductions with warp shuffles (`__shfl_xor_sync`) and one shared "
                  "value per warp, instead of a shared-memory tree."),
        Directive("shared_tiling", "Stage the row (or tile) in shared memory once and reuse it for every pass, "
                  "instead of reading global memory several times."),
        Directive("fusion", "Fuse the whole chain into one kernel launch: no intermediate tensors in global "
                  "memory."),
        Directive("online_softmax", "Use an online (single-pass) max-and-sum: keep a running max and rescale "
                  "the running sum when the max changes."),
        Directive("launch_shape", "Tune the launch shape for occupancy: pick the block size from the row "
                  "length, several rows per block when rows are short, enough blocks to fill every SM."),
        Directive("grid_stride", "Use a grid-stride loop with a grid sized to the SM count times a small "
                  "factor, instead of one thread per element."),
        Directive("fast_math", "Use fast intrinsics where accuracy allows (`__expf`, `rsqrtf`, `__fdividef`) "
                  "and precompute reciprocals."),
    ),
    "triton": (
        Directive("block_size", "Tune BLOCK_SIZE and num_warps for the row length."),
        Directive("fusion", "Fuse the whole chain into one Triton kernel."),
        Directive("online_softmax", "Use an online (single-pass) max-and-sum over the row."),
        Directive("rows_per_program", "Process several short rows per program to keep the GPU busy."),
    ),
}


def directive_by_key(language: str, key: str) -> Directive | None:
    first = CORRECT_FIRST.get(language)
    if first and first.key == key:
        return first
    return next((d for d in DIRECTIVES.get(language, ()) if d.key == key), None)


def simd_text(function: str) -> str:
    """The SIMD directive for one function, naming its own sums and maxima in the reduction clauses. Shown
    ``reduction(+ : s)`` on a loop with no sum (an elementwise chain), the default model added a sum ``s`` and
    wrote it where the output belongs, or left ``s`` undeclared (dev: bias_leaky_relu_scale, quick_gelu,
    gelu_tanh, max_pool_overlap)."""
    sums, maxes = accumulators(function)
    clauses = [f"`reduction(+ : {v})` on the loop that adds into `{v}`" for v in sums]
    clauses += [f"`reduction(max : {v})` on the loop that takes the maximum `{v}`" for v in maxes]
    if clauses:
        return ("Make the inner loops SIMD-friendly: `#pragma omp simd` (" + ", ".join(clauses) + "), no branches "
                "or function calls inside, contiguous access.")
    return ("Make the inner loop SIMD-friendly: `#pragma omp simd` on it, no branches or function calls inside, "
            "contiguous access. It has no scalar sum or maximum: add no `reduction` clause and no new variable, "
            "and keep writing every output value it writes now.")


def reference_max_text(kernel: str, target: str = ENTRY) -> str | None:
    """The request for a kernel whose row maximum and sum of exponentials are each a helper's one loop
    (``applicability.reference_parts``): the maximum of the row's first ``REFERENCE_FIRST`` values is the reference
    the exps are taken at, and one SIMD loop takes every exp and the row's maximum; only a row whose maximum lies
    more than ``REFERENCE_SLACK`` above the reference (its exps could overflow) is summed again at it. A softmax, a
    log-softmax or a cross-entropy is the same at any reference, so the pass that only took the maximum is gone.

    It replaced a blocked online max-and-sum (the block's maximum, the sum so far rescaled as it grew, then the
    block's exps): put in place of the dev seeds' two calls, that ran 0.91-0.98x the log-softmax seed and
    1.01-1.07x the smoothed cross-entropy's, this 1.05-1.16x and 1.16-1.21x (five runs of
    ``benchmarks/online_blocks.py``; docs/benchmarks.md, forty-second measurement). None for a kernel of another
    form."""
    parts = reference_parts(kernel)
    if parts is None or re.search(r"\b(?:bm|c1)\b", strip_cpp_comments(kernel)):
        return None
    m, s, bound = parts.m, parts.s, parts.bound
    fused = list(dict.fromkeys(parts.max_body + parts.sum_body))  # a statement both loops have (a masked value), once

    def loop(end: str, body: list[str], indent: str = "") -> list[str]:
        return [f"{indent}for (int64_t c = 0; c < {end}; ++c) {{", *(f"{indent}    {st}" for st in body), f"{indent}}}"]
    first = [re.sub(r"\bbm\b", m, st) for st in parts.max_body]
    # where a guard lies between the two calls (a logsumexp's exps are taken at ``where(|max| == inf, 0, max)``),
    # the exps are taken at the guard's value of the reference, and again at the guard's value of the row's maximum
    # where that lies far from it: a row that starts with -inf has the reference 0
    at = parts.at or m
    slack = f"{REFERENCE_SLACK}.0f"
    guarded = [f"float {at} = {parts.guard};  // as before: the value the exps are taken at"] if parts.at else []
    again = re.sub(rf"\b{m}\b", "bm", parts.guard) if parts.at else "bm"
    pattern = "\n".join([
        f"float {m} = -INFINITY;  // the reference: the largest of the row's first {REFERENCE_FIRST} values",
        f"const int64_t c1 = {REFERENCE_FIRST} < {bound} ? {REFERENCE_FIRST} : {bound};",
        f"#pragma omp simd reduction(max : {m})",
        *loop("c1", first),
        *guarded,
        "float bm = -INFINITY;  // the row's maximum",
        f"float {s} = 0.0f;  // the sum of exponentials at the reference",
        f"#pragma omp simd reduction(max : bm) reduction(+ : {s})",
        *loop(bound, fused),
        (f"if (bm > {at} + {slack} || bm < {at} - {slack}) {{  // rare: exps this far from the reference could "
         "overflow or vanish" if parts.at else
         f"if (bm > {m} + {slack}) {{  // rare: exps this far above the reference could overflow"),
        f"    {at} = {again};  // the sum again, at the row's maximum",
        f"    {s} = 0.0f;",
        f"    #pragma omp simd reduction(+ : {s})",
        *loop(bound, parts.sum_body, "    "),
        "}"])
    if parts.at:
        how = (f"in place of the lines that compute `{m}`, `{at}` and `{s}` now: take `{m}` over the row's first "
               f"{REFERENCE_FIRST} values only (the reference) and `{at}` from it as now, then ONE SIMD loop over the "
               f"row that sums the exponentials at `{at}` and takes the row's maximum `bm`; only when `bm` lies more "
               f"than {REFERENCE_SLACK} from `{at}`, set `{at}` from `bm` the same way and sum again. The result is "
               f"the same at any `{at}`: keep every later use of `{at}` and `{s}`")
    else:
        how = (f"in place of the two calls that compute `{m}` and `{s}` now: take `{m}` over the row's first "
               f"{REFERENCE_FIRST} values only (the reference), then ONE SIMD loop over the row that sums the "
               f"exponentials at `{m}` and takes the row's maximum `bm`; only when `bm` is more than {REFERENCE_SLACK} "
               f"above `{m}`, set `{m} = bm` and sum again. The result is the same at any `{m}`: keep every later use "
               f"of `{m}` and `{s}`")
    return (f"Fuse the row's maximum into the loop that sums its exponentials, in `{target}`, {how}, every other "
            "statistic and the loop that writes the output as they are, with the same names and formulas.\n"
            f"The pattern (use the names of the code above):\n```cpp\n{pattern}\n```")


def single_pass_text(kernel: str, target: str = ENTRY) -> str:
    """The single-pass directive for a kernel whose function ``target`` is rewritten, naming the statistics the
    kernel computes (in ``target``'s loops or in the helpers it calls). Shown the general text's examples ("sum
    and sum of squares together, or an online max-and-sum"), the default model added a sum of squares to a
    log-softmax (3 of 5 such edits wrong, 2 of them NaN: dev/log_softmax at 153b649). A maximum and a sum of
    exponentials get the online update written out, and no SIMD reduction on that loop (its sum is rescaled as
    the maximum grows, which an OpenMP reduction cannot do); sums alone are read in one loop."""
    sums, maxes = accumulators(kernel)
    code = strip_cpp_comments(kernel)
    where = f"in `{target}`, in place of the loops or calls that compute them now"
    if maxes and sums and re.search(r"\b(?:fast_exp(?:_neg)?|(?:std::)?expf?)\s*\(", code):
        m, s = maxes[0], sums[0]
        # the kernel's own exp: both arguments below are never positive, so fast_exp_neg (no cap) is exact there
        exp = next((f for f in ("fast_exp_neg", "fast_exp") if re.search(rf"\b{f}\s*\(", code)), "std::exp")
        return (f"Fuse the passes over each row: compute the maximum `{m}` and the sum of exponentials `{s}` in ONE "
                f"loop (an online max-and-sum) {where}. Start with `{m} = -INFINITY` and `{s} = 0.0f`; for each "
                f"value `v` of the row: `const float m_new = v > {m} ? v : {m}; {s} = {s} * {exp}({m} - m_new) + "
                f"{exp}(v - m_new); {m} = m_new;`. No `#pragma omp simd` on that loop (its sum is rescaled, "
                "which a reduction clause cannot do). Keep every other statistic and the loop that writes the "
                "output as they are, with the same names and formulas.")
    named = sums + maxes
    if len(named) >= 2:
        listed = ", ".join(f"`{v}`" for v in named)
        return (f"Fuse the passes over each row: compute {listed} in ONE loop over the row {where} (each value "
                "read once, one `#pragma omp simd` with a reduction clause for each of them), then write the "
                "output in the next loop with the same formulas. A statistic that needs an earlier one (a variance "
                "around the mean) becomes a sum of squares: `var = sum_sq / n - mean * mean`. Compute nothing the "
                "kernel does not compute now.")
    return ("Fuse the passes over each row: read each value once where the kernel now reads it several times "
            "(compute the row's statistic and the values the output needs in one loop, then write the output "
            "in the next). Compute nothing the kernel does not compute now.")


def hoist_text(kernel: str) -> str | None:
    """The hoisting directive for a kernel whose entry point divides by values a loop does not change, naming
    each divisor, the loop and the reciprocal to take once before it, with the pattern in the kernel's own names
    (None when it divides by none). Told in general terms ("row pointers, constants, and a reciprocal of a
    divisor"), the default model carried out 5 of 56 hoisting edits, inventing invariants where the one that
    mattered went unnamed (docs/benchmarks.md). Told in words where the reciprocal goes ("right before that loop,
    inside every loop around it"), it took it before the loop over the rows, of a value each row sets
    (dev/l2_normalize): the pattern shows the line of the entry point that sets the value, the reciprocal and the
    loop."""
    divisions = entry_divisions(kernel)
    if not divisions:
        return None
    entry = strip_cpp_comments(function_text(kernel, ENTRY) or kernel)
    steps, pattern = [], []
    for name, value, loop in divisions:
        inv = f"inv_{value}"
        held = f"`{name}` (a copy of `{value}`)" if name != value else f"`{name}`"
        steps.append(f"the loop `{loop}` divides each value by {held}, which does not change inside that loop: take "
                     f"`const float {inv} = 1.0f / {value};` once, right before that loop, and multiply by `{inv}` "
                     f"where it divides by `{name}`")
        setter = re.search(rf"^\s*((?:const\s+)?(?:float|auto)\s+{value}\s*=)", entry, re.M)
        if setter:  # the entry point's own line, its value left out (shown whole, `= row_sum(...);`, 1 of 8 edits of
            # dev/padding_masked_softmax were correct at seed 0)
            pattern.append(f"{setter.group(1)} /* as now */;")
        pattern += [f"const float {inv} = 1.0f / {value};  // new: once, here", f"{loop} {{",
                    f"    /* the same statements as now, with `a / {name}` written `a * {inv}` */", "}"]
    return ("Hoist the division out of the loop (one division before the loop instead of one per value): "
            + "; ".join(steps) + ". Change nothing else: the same loops, the same other formulas, every output "
            "value written as now.\nThe pattern (use the names of the code above):\n```cpp\n"
            + "\n".join(pattern) + "\n```")


# a grid of rows: a kernel whose block number is its row (``x + blockIdx.x * cols``), with no loop over the grid
_ROW_OF_BLOCK = re.compile(r"\bblockIdx\.x\s*\*\s*(?!\(?\s*blockDim)\w+|\[\s*blockIdx\.x\s*\]")


def _strides_over_grid(code: str) -> bool:
    """A loop whose step is every thread of the grid (``r += gridDim.x * blockDim.x``, or a name set from
    both), not a grid of a fixed shape (``g += gridDim.x / parts``: group_norm's blocks share a group)."""
    whole = r"gridDim\.x\b[^;]*\bblockDim\.x|blockDim\.x\b[^;]*\bgridDim\.x"
    names = set(re.findall(r"\b(\w+)\s*=\s*[^;=]*(?:" + whole + ")", code))
    steps = re.findall(r"\bfor\s*\([^;]*;[^;]*;\s*\w+\s*\+=\s*([^;{]*)\)\s*\{", code)
    return any(re.search(whole, step) or set(re.findall(r"\w+", step)) & names for step in steps)


# a launch of one thread for each unit of work: ``<<<(unsigned)((rows * 32 + 255) / 256), 256, ...`` (the lowered seeds)
_COVERING_LAUNCH = re.compile(r"<<<\s*(?:\(\s*unsigned\s*\)\s*)?\(\s*\(\s*([^;<>]+?)\s*\+\s*(\d+)\s*\)\s*/\s*(\d+)\s*\)"
                              r"\s*,\s*(\d+)\s*[,>]")


def _launched_work(code: str) -> str:
    """The work a kernel's one launch starts a thread for (``rows * 32`` for ``((rows * 32 + 255) / 256)`` blocks
    of 256), or "" when the launch is not that rounded-up division by its own block size."""
    launches = _COVERING_LAUNCH.findall(code)
    if len(launches) != 1 or len(re.findall(r"<<<", code)) != 1:
        return ""
    work, plus, per, threads = launches[0]
    return work if int(plus) == int(per) - 1 and per == threads else ""


def launch_shape_text(kernel: str) -> str | None:
    """The launch-shape directive for a kernel of one block per row or one that strides over the whole grid,
    or None for any other kernel. Told "several rows per block", the default model gave a kernel of one block
    per row fewer blocks than rows and left the other rows unwritten (4 of 5 row seeds,
    benchmarks/results/gpu_samples_r38): the kernel would have had to change too, and the edit rewrites only
    the launch. The lowered seeds took a warp or a thread a row from a grid sized to the rows, and the model,
    told the same, sized its grid to the rows alone (a warp a row from a grid of rows / 64 blocks of 64
    threads): 8 of 10 such dev edits left rows unwritten, 3 of them once the autofix made them build
    (docs/results/h100_round27). They stride over the grid now, so any grid is correct, and the directive
    says so. Told only that ("a few blocks per SM, no more than there is work for"), the model kept the rows
    covered but launched a thread a row instead of a warp, or one block: 8 of the 11 new kernels of the first
    edits ran at 0.02-0.25x eager (benchmarks/results/gpu_samples_r77_*). Where the launch starts a thread for
    each unit of work (``_launched_work``), the directive names that work and the grid that keeps it covered."""
    code = strip_cpp_comments(kernel)
    if _strides_over_grid(code):
        head = ("Tune the launch shape for occupancy: change only the launch (its grid and threads per block). "
                "The kernel's loop strides over its work with the whole grid (`gridDim.x * blockDim.x`), so any "
                "grid covers all of it")
        work = _launched_work(code)
        if work:
            return (f"{head}, but a grid smaller than the work runs it one part after another. The launch now "
                    f"starts `{work}` threads, all the work at once. Pick the threads per block `T` (a multiple of "
                    f"32, from 64 to 1024) and launch `({work} + T - 1) / T` blocks of `T` threads, so the grid "
                    "still starts them all. Keep the kernel as it is.")
        return (f"{head}: pick the threads per block (a multiple of 32, from 64 to 1024) and the number of blocks "
                "(at least as many threads in all as the launch starts now). Keep the kernel as it is.")
    if "gridDim" in code or not _ROW_OF_BLOCK.search(code):
        return None
    return ("Tune the launch shape for occupancy: pick the threads per block from the row length (a multiple "
            "of 32, from 32 to 1024). Each block handles one row (`blockIdx.x` is the row), so the grid stays "
            "exactly one block per row: fewer blocks would leave rows unwritten.")


# PRIORS (the ``prior`` of each C++ directive): the share of edits the default Qwen2.5-Coder 1.5B carried
# out correctly in every recorded search outside the test half (benchmarks/directive_record.py, edits only,
# over the session files its docstring names: the searches on group_norm_silu, rms_norm and softmax, and
# the dev half of benchmarks/problems_generalize; docs/benchmarks.md, "Twentieth measurement"):
# cache_blocking 70/113, unroll_accumulators 48/89, simd_inner 66/129, openmp_rows 2/5, float_math 3/10,
# single_pass 25/91, fuse_epilogue 3/16. The first three problems alone had put
# simd_inner at 3/23 (13 %, below single_pass); the dev half's searches carried it out 63/106 times.
# The search's own record on the problem (``record``) soon outweighs them, so a model that does better at
# some change gets asked for it. hoist_invariants was 5/56 with the general request (below ``UNLIKELY``); asked as
# ``hoist_text`` words it, naming the division (applicable only where a loop of the entry point repeats one), the
# default model carried it out 16 of 24 times (`kforge sample PROBLEM --kind edit --directive hoist_invariants --n 8
# --seed S`, judged by `kforge eval`: dev/l2_normalize 6/8 and 7/8 at seeds 0 and 1, dev/padding_masked_softmax
# 3/8 at seed 1; docs/benchmarks.md, "Thirty-third measurement").


# Below this chance a directive never asked of a node comes after asking again one that worked there: the
# model's answer is then a different kernel or the same one (a repeat, which costs a minute but no candidate),
# where an unlikely change mostly costs a candidate. No prior is below it now (hoisting invariants was, at 5 of 56
# edits with the general request; fusing an epilogue until the dev half's record: docs/benchmarks.md); a change
# the model keeps getting wrong on this problem falls below it by the tree's record.
UNLIKELY = 0.1
# ... but not once that directive's answers from the node have repeated an earlier kernel this many times
USED_UP = 2


def smoothed_rate(ok: int, n: int, prior: float) -> float:
    """A success rate from ``ok`` of ``n`` on this problem, with ``prior`` worth two requests of evidence."""
    return (ok + 2 * prior) / (n + 2)


def expected_rate(d: Directive, record: dict[str, tuple[int, int]] | None = None) -> float:
    """The chance the model carries out ``d`` correctly: its prior, updated by the tree's record on this
    problem (key -> (correct, evaluated)); ``smoothed_rate``."""
    ok, n = (record or {}).get(d.key, (0, 0))
    return smoothed_rate(ok, n, d.prior)


def _by_directive(counts: dict[str, int] | None) -> dict[str, int]:
    """Counts per directive@function summed per directive."""
    out: dict[str, int] = {}
    for k, n in (counts or {}).items():
        out[k.split("@")[0]] = out.get(k.split("@")[0], 0) + n
    return out


def choose_directive(language: str, tried: dict[str, str], rng: random.Random, first: bool = False,
                     kernel: str = "", aten_ops: tuple[str, ...] = (),
                     record: dict[str, tuple[int, int]] | None = None,
                     attempts: dict[str, int] | None = None, repeats: dict[str, int] | None = None) -> Directive:
    """The next directive for a node, given what was tried from it (key -> outcome: ok | failed | pending).

    Order: the correctness-first directive for a node's very first expansion when ``first``; then
    directives never tried from this node, the ones the model is likeliest to carry out correctly
    first (``record``: key -> (correct, evaluated) elsewhere in the tree, ranked by (correct + 2 *
    prior) / (evaluated + 2); a seeded random order among equals), unless their chance is below
    ``UNLIKELY`` and one that worked from this node is likelier; then ones that worked before from
    this node (worth refining again); failed ones only when nothing else is left. Among those asked
    before, the one asked the fewest times from this node comes first (``attempts``: key -> answers
    from this node, duplicates included): asked the same thing again, the default model hands the
    kernel back unchanged (dev/cumsum_rows: one directive asked four times of one node, three
    duplicates). A directive that worked but whose answers from this node repeated an earlier kernel
    ``USED_UP`` times (``repeats``: key -> such answers) no longer counts as one that worked: the model
    has nothing more to give for it here (dev/channel_sum at temperature 0.3: one directive that had
    worked was asked of one node eleven more times, nine answers repeats, until the search stopped)."""
    tried = {k.split("@")[0]: v for k, v in tried.items()}
    if first and language in CORRECT_FIRST and CORRECT_FIRST[language].key not in tried:
        return CORRECT_FIRST[language]
    pool = list(DIRECTIVES.get(language, DIRECTIVES["cpp"]))
    rng.shuffle(pool)

    def rate(d: Directive) -> float:
        return expected_rate(d, record)
    pool.sort(key=rate, reverse=True)  # stable: the seeded order among equal rates
    untried = [d for d in pool if d.key not in tried and (not kernel or applicable(d.key, kernel, aten_ops))]
    if untried and rate(untried[0]) >= UNLIKELY:
        return untried[0]
    counts = _by_directive(attempts)
    repeated = _by_directive(repeats)
    fits = [d for d in pool if not kernel or applicable(d.key, kernel, aten_ops)] or pool
    fits.sort(key=lambda d: counts.get(d.key, 0))  # stable: the rate order among equals
    worked = [d for d in fits if tried.get(d.key) == "ok" and repeated.get(d.key, 0) < USED_UP]
    if untried and not any(rate(d) >= UNLIKELY for d in worked):
        return untried[0]  # unlikely, but nothing that worked here is likelier
    if worked:
        return worked[0]  # again, rather than a change this model rarely carries out
    return fits[0]  # a failed one again, but one that can change this kernel (no row blocking without rows)
