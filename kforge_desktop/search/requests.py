"""The requests written in a kernel's own names: a directive whose text (and pattern) is made from the kernel it is
asked of, so that the default model copies the kernel's sums, maxima, divisions and launch rather than a general
pattern's (``planner.edit_expansion`` asks ``directives.Directive``'s text where none of these applies). Each
returns None (or the general wording) for a kernel of another form; ``applicability`` says which kernels each can
change.
"""

from __future__ import annotations

import re

from ..csource.comments import strip_cpp_comments
from ..csource.items import ENTRY, function_head, function_text
from .applicability import accumulators, entry_divisions, reference_parts

# the values of a row whose maximum is the reference, and how far above it a row's maximum may lie before its sum
# is taken again at that maximum (exp(64) times a row's length stays far inside a float)
REFERENCE_FIRST = 64
REFERENCE_SLACK = 64
AS_BEFORE = "// then, as before:"  # the pattern's last lines: the ones after the replaced calls, unchanged

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
    after = _after_calls(kernel, parts.calls, target)
    if after:  # the lines that follow, shown as they are: asked of a blocked kernel, the default model wrote the
        # pattern right and the output as `s * temperature`, its log and its reference gone (dev/free_energy)
        pattern += f"\n{AS_BEFORE}\n" + "\n".join(after)
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


def _after_calls(kernel: str, calls: str, target: str) -> list[str]:
    """The statements of ``target`` that follow ``calls`` inside the same loop (up to the brace that closes it),
    indented as the first of them is; [] where ``calls`` is not found."""
    text = strip_cpp_comments(function_text(kernel, target) or "")
    at = text.find(calls)
    if at < 0:
        return []
    lines, depth = [], 0
    for ln in text[at + len(calls):].splitlines():
        depth += ln.count("{") - ln.count("}")
        if depth < 0:
            break
        if ln.strip():
            lines.append(ln.rstrip())
    indent = min((len(ln) - len(ln.lstrip()) for ln in lines), default=0)
    return [ln[indent:] for ln in lines]


def _begun_before(kernel: str, target: str, first: str) -> str:
    """``target``'s first line and every line of its body before the first one that starts with ``first`` (its
    whitespace aside), a pragma right above that line left to the answer; "" where no line does."""
    text = strip_cpp_comments(function_text(kernel, target) or "")
    head = function_head(kernel, target) if text else None
    brace = text.find("{")
    if head is None or brace < 0 or not first:
        return ""
    body = [ln.rstrip() for ln in text[brace + 1:].splitlines() if ln.strip()]
    want = " ".join(first.split())
    at = next((i for i, ln in enumerate(body) if " ".join(ln.split()).startswith(want)), None)
    while at and body[at - 1].lstrip().startswith("#pragma"):
        at -= 1
    return "\n".join([head, *body[:at]]) if at else ""


def reference_begun(kernel: str, target: str = ENTRY) -> str:
    """The start of the answer to the reference-maximum request, written for the model: ``target``'s lines as they
    are, up to the first line the request replaces (the maximum's call), so that the answer goes on with the
    pattern inside the kernel's own loops over the rows. "" for a kernel of another form, or where the request
    edits another function.

    Begun with the function's first line alone, the default model left out the loops around the replaced lines: it
    wrote one row's statements with no loop over the rows ("'r' was not declared", dev/free_energy), and of 3 answers
    asked of a kernel whose rows come in blocks (two loops, ``r0`` and ``r``), 3 were wrong: one dropped the reference
    and took the exps at the running maximum, two wrote the output without the lines after the calls (now shown in
    the pattern; docs/benchmarks.md, forty-fourth measurement)."""
    parts = reference_parts(kernel) if target == ENTRY else None
    return _begun_before(kernel, target, parts.calls.strip().splitlines()[0]) if parts is not None else ""


def hoist_begun(kernel: str, target: str = ENTRY) -> str:
    """The start of the answer to the hoisting request (``hoist_text``): the entry point's lines up to the first loop
    that divides by a value it does not change, so that the answer goes on with the reciprocal right there, inside
    every loop around that one. Told so in words and shown the pattern, the default model still named the value
    where it was not set in 2 of 8 dev answers at seed 0, and the test half's answers were 2 of 18 correct; begun
    so, 7 of 8 and 8 of 21 (docs/benchmarks.md, forty-fourth measurement). "" where the request names no division."""
    divisions = entry_divisions(kernel) if target == ENTRY else []
    return _begun_before(kernel, target, divisions[0][2]) if divisions else ""


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
        exp = kernel_exp(code)
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


def kernel_exp(code: str) -> str:
    """The exp a kernel calls: the exemplars' ``fast_exp_neg`` (no cap, for arguments never positive) or
    ``fast_exp``, else ``std::exp``."""
    code = strip_cpp_comments(code)
    return next((f for f in ("fast_exp_neg", "fast_exp") if re.search(rf"\b{f}\s*\(", code)), "std::exp")
