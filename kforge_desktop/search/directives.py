"""Optimization directives: the one named change an expansion asks the model for.

Why named directives: a small model keeps a working kernel working when asked for one concrete
change far more often than when asked to "make it faster"; naming the change also lets the tree
remember what was already tried from a node and failed, so it is not asked for again.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from ..csource.autofix import DOUBLE_LITERAL
from ..csource.comments import strip_cpp_comments
from ..csource.items import ENTRY, split_items
from ..csource.mends import innermost_loops
from .indexing import POOL_OPS

# how the unrolled pattern ends: in a function that returns its sum, by returning the four (the default
# model otherwise spent "the total" on a new pass over the row and returned nothing)
SUM_END = "const float total = (s0 + s1) + (s2 + s3);  // used where the old sum was"
SUM_RETURN = "return (s0 + s1) + (s2 + s3);"


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
        Directive("hoist_invariants", "Hoist loop invariants: row pointers, constants, and a reciprocal of a "
                  "divisor that does not change inside the loop (one scalar before it, `const float inv = 1.0f / "
                  "d;`, then multiply by `inv`), outside the inner loops. No arrays of precomputed values, no "
                  "allocation. Inputs stay `const float*`: never write into them.", prior=0.09),
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


_STEPPED_LOOP = re.compile(r"for\s*\([^;]*;[^;]*;\s*\w+\s*\+=\s*(?:[2-9]|\d\d+)\s*\)")
_STORE = re.compile(r"\b\w+\s*\[[^\]]*\]\s*(?:[-+*/]?=)(?!=)")


def unrollable(function: str) -> bool:
    """Whether a function has a sum loop to unroll: it adds (``+=`` or an OpenMP ``+`` reduction), it
    stores nothing (asked to unroll a loop that also writes the output, softmax's ``exp_row``, the
    default model gave 0 correct kernels in 26 answers: ``benchmarks/directive_record.py``), and no
    loop of it steps by more than one already (asked to unroll an unrolled loop, the model rewrote it
    into another unrolled loop: a correct candidate that changes nothing).

    A sum that is an OpenMP SIMD reduction already is unrolled too. Such edits ran a median 0.69x the kernel
    they edited (``directive_record.py --speed``), but they were correct 16 of 23 times on the dev half, and a
    slower correct kernel costs the search's best nothing. Without the request (2a224a5) a search of kernels
    whose sums are all SIMD reductions had little else to ask: on the dev half at 4692612 log_softmax and
    smoothed_cross_entropy fell from 21 of 24 correct to 9 of 18 (docs/benchmarks.md, twenty-fifth measurement)."""
    code = strip_cpp_comments(function)
    return (bool(re.search(r"reduction\s*\(\s*\+|\+=", code)) and not _STEPPED_LOOP.search(code)
            and not _STORE.search(code))


_SUM_INTO = re.compile(r"(?<![\w\].])(\w+)\s*\+=")
_MAX_INTO = re.compile(r"\b(\w+)\s*=\s*(?:std::)?(?:max|fmaxf?)\s*\(\s*\1\b|\b(\w+)\s*=\s*[^;?]*\?[^;:]*:\s*\2\s*;")


def accumulators(function: str) -> tuple[list[str], list[str]]:
    """The scalars a function's loops sum into (``s += ...``) and take a maximum into (``m = std::max(m,
    ...)``, ``m = e > m ? e : m``), each list in order of first use; a store into an array, or a loop's own
    step (``c += 4``), is neither."""
    code = re.sub(r"\bfor\s*\([^;]*;[^;]*;[^)]*\)", "for ()", strip_cpp_comments(function))
    sums = list(dict.fromkeys(_SUM_INTO.findall(code)))
    maxes = list(dict.fromkeys(a or b for a, b in _MAX_INTO.findall(code)))
    return sums, [m for m in maxes if m not in sums]


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
    if maxes and sums and re.search(r"\b(?:fast_exp|(?:std::)?expf?)\s*\(", code):
        m, s = maxes[0], sums[0]
        exp = "fast_exp" if "fast_exp" in code else "std::exp"
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


# a grid of rows: a kernel whose block number is its row (``x + blockIdx.x * cols``), with no loop over the grid
_ROW_OF_BLOCK = re.compile(r"\bblockIdx\.x\s*\*\s*(?!\(?\s*blockDim)\w+|\[\s*blockIdx\.x\s*\]")


def launch_shape_text(kernel: str) -> str | None:
    """The launch-shape directive for a kernel of one block per row, or None for any other kernel. Told
    "several rows per block", the default model gave such a kernel fewer blocks than rows and left the other
    rows unwritten (4 of 5 row seeds, benchmarks/results/gpu_samples_r38): the kernel would have had to change
    too, and the edit rewrites only the launch."""
    code = strip_cpp_comments(kernel)
    if "gridDim" in code or not _ROW_OF_BLOCK.search(code):
        return None
    return ("Tune the launch shape for occupancy: pick the threads per block from the row length (a multiple "
            "of 32, from 32 to 1024). Each block handles one row (`blockIdx.x` is the row), so the grid stays "
            "exactly one block per row: fewer blocks would leave rows unwritten.")


def applicable(key: str, kernel: str, aten_ops: tuple[str, ...] = ()) -> bool:
    """Whether asking for directive ``key`` on this kernel can change anything: a kernel that already
    runs its rows in parallel gets no "parallelize the rows" (the model answers with the same code, a
    duplicate that costs a minute of generation and no candidate), a lone operator has no epilogue."""
    if key == "openmp_rows":
        return "omp parallel" not in kernel
    if key == "simd_inner":  # an inner loop without a pragma (the rows' parallel loop is not inner), other than a
        # fill: a loop that stores one constant is a memset to the compiler, a pragma changes nothing there. Asked
        # of a masked softmax's finish_row (a SIMD scaling loop, then the masked rest of the row set to 0), the
        # default model dropped the fill, 3 of 3 edits ("130048 of 262144 output values were never assigned";
        # dev: causal_scaled_softmax, generalize_r56da)
        loops = re.finditer(r"(#pragma[^\n]*\n\s*)?for\s*\([^;]*;[^;]*;[^)]*\)", kernel)
        return any("simd" not in (m.group(1) or "") and "parallel" not in (m.group(1) or "")
                   and not _FILL.match(kernel, m.end()) for m in loops)
    if key == "fuse_epilogue":  # a chain of operators, in more than one pass (one pass has nothing to fuse:
        # asked, the default model changed the formula of an elementwise chain; dev: quick_gelu)
        chain = len({op.lstrip("_").removeprefix("native_") for op in aten_ops}) > 1 if aten_ops else True
        return chain and _loops(kernel) >= 3
    if key == "hoist_invariants":  # a division inside a loop by a value the loop does not change; with
        # nothing of the kind the default model invented one (an array of reciprocals written through a
        # const pointer, a constant factor on the output; the record is in docs/benchmarks.md)
        return bool(invariant_divisions(kernel))
    if key == "unroll_accumulators":  # a sum loop not unrolled yet, in a helper when there are helpers
        functions = [it for it in split_items(kernel) if it.kind == "function"]
        helpers = [it for it in functions if it.name != ENTRY]  # the scaffold's entry point
        return any(unrollable(it.text) for it in (helpers or functions))
    if key == "single_pass":  # passes to fuse: a statistic accumulated over a row, and the loops to fuse. A pooling
        # has none: its sums and maxima are each output's own window. Asked, the default model dropped the loop over
        # the outputs ("wrote 1 of the 512 values of each row"): 0 of 5 dev edits correct (max_pool_overlap,
        # moving_average). Nor does a kernel that reads each row in one loop (a running sum, an elementwise chain,
        # however its rows are blocked): 0 of 12 such recorded edits correct (benchmarks/directive_record.py --passes)
        code = re.sub(r"\bfor\s*\([^;]*;[^;]*;[^)]*\)", "for ()", strip_cpp_comments(kernel))  # no loop steps
        accumulates = re.search(r"\b\w+\s*\+=|\b(\w+)\s*=\s*(std::)?(max|fmaxf?)\s*\(\s*\1\b", code)
        return (bool(accumulates) and _loops(kernel) >= 3 and innermost_loops(kernel) >= 2
                and not _pooling(aten_ops))
    if key == "cache_blocking":  # blocks of rows; a channels-layout kernel has groups, not rows
        # and data to reuse: a kernel that reads each value once (an elementwise chain) gains nothing from
        # blocks, and asked for them the default model dropped the loop over the columns (dev: quick_gelu,
        # bias_leaky_relu_scale). Nor does a pooling: each output reads its own window of one row, and the row
        # loop already reads a row's windows in order. Asked, the default model dropped the loop over the outputs
        # ("wrote 1 of the 1024 values of each row"): 5 of 20 such dev edits correct, none faster than the seed
        # (0.37-1.01x; dev: max_pool_overlap, moving_average)
        return ("rows" in kernel and not re.search(r"\b(tile|r0|block_rows)\b", kernel)  # not blocked already
                and any(accumulators(kernel)) and not _pooling(aten_ops))
    # CUDA: a change the kernel already has is no change (the exemplar seeds load float4 and reduce with
    # shuffles already; asked again, the default model hands the seed back unchanged)
    if key == "vectorized_loads":
        return "float4" not in kernel
    if key == "warp_reductions":
        return "__shfl" not in kernel and bool(re.search(r"__syncthreads|atomicAdd", kernel))
    if key == "online_softmax":  # a max and a sum of exponentials, in more than one pass
        return bool(re.search(r"\bexpf?\s*\(|__expf", kernel)) and "fmaxf" in kernel and "m_new" not in kernel
    if key == "grid_stride":  # a kernel of one thread per element (or per group of them), without a stride yet;
        # a kernel of one block per row has a grid of rows already: asked, the default model handed the row
        # seeds back unchanged (benchmarks/results/gpu_samples_r37)
        code = strip_cpp_comments(kernel)
        per_element = re.search(r"blockIdx\.[xyz]\s*\*\s*blockDim\.[xyz]|blockDim\.[xyz]\s*\*\s*(\(\w+\))?\s*blockIdx", code)
        return "gridDim" not in code and bool(per_element)
    if key == "fusion":  # one launch has nothing to fuse: asked, the default model handed the one-launch
        # CUDA seeds back unchanged (benchmarks/results/gpu_samples_r35: the fusion edits). No launch at all is
        # a Triton module, whose forward may still run part of the chain in torch.
        return len(re.findall(r"<<<|\bcudaLaunchKernel(?:Ex)?\s*\(", strip_cpp_comments(kernel))) != 1
    if key == "shared_tiling":  # values read again from global memory: a kernel that holds its values in registers
        # (a local array) or in dynamic shared memory reads them once already; asked, the default model handed
        # such seeds back unchanged (benchmarks/results/gpu_samples_r37)
        code = strip_cpp_comments(kernel)
        held = re.search(r"(?<!__shared__ )\bfloat4?\s+\w+\s*\[\s*\w+\s*\]", code) or "extern __shared__" in code
        return not held
    if key == "fast_math":
        code = strip_cpp_comments(kernel)
        return bool(re.search(r"(?<!\w)(expf?|sqrtf?|tanhf?|logf?)\s*\(|\b1\.0f?\s*/\s*sqrtf?", code))
    if key == "float_math":
        # doubles, double literals, or unqualified C math calls (std::exp on a float is float already)
        code = strip_cpp_comments(kernel)
        return bool(re.search(r"\bdouble\b|(?<![\w:])(exp|sqrt|tanh|log|pow)\s*\(", code) or DOUBLE_LITERAL.search(code))
    return True


# a loop body that stores one constant: `out[c] = 0.0f;`, `{ yr[c] = -INFINITY; }`
_FILL = re.compile(r"\s*(\{\s*)?\w+\s*\[[^\]]+\]\s*=\s*[-+]?(?:[\d.]+(?:e[-+]?\d+)?f?|INFINITY|NAN)\s*;(?(1)\s*\})")


def _pooling(aten_ops: tuple[str, ...]) -> bool:
    return any(op.lstrip("_") in POOL_OPS for op in aten_ops)


def _loops(kernel: str) -> int:
    return len(re.findall(r"\bfor\s*\(", strip_cpp_comments(kernel)))


_DIVIDE_BY_NAME = re.compile(r"/\s*(?:\(\s*float\s*\)\s*)?([A-Za-z_]\w*)\b(?!\s*[\[(.])")
_FOR_HEADER = re.compile(r"\bfor\s*\(([^;]*);[^;]*;[^)]*\)\s*$")


def invariant_divisions(kernel: str) -> list[str]:
    """The names a loop body divides by that the loop does not change (neither its counter nor a name
    assigned in its body): each is one reciprocal to hoist out of the loop. ``x[i] / (1.0f + e)`` divides
    by a value of each element, and ``s / cols`` after the loop is outside any loop body."""
    code = strip_cpp_comments(kernel)
    found = []
    for m in _DIVIDE_BY_NAME.finditer(code):
        name, at = m.group(1), m.start()
        depth, i = 0, at
        while i > 0:  # back to the `{` that opens the enclosing block
            i -= 1
            if code[i] == "}":
                depth += 1
            elif code[i] == "{":
                if depth == 0:
                    break
                depth -= 1
        line_start = code.rfind("\n", 0, at) + 1
        header = _FOR_HEADER.search(code[:i]) if code[i:i + 1] == "{" else None
        one_line = re.match(r"\s*for\s*\(([^;]*);[^;]*;[^)]*\)", code[line_start:at])
        loop = one_line or header  # the innermost: a loop on the division's own line, else the block's
        if loop is None:
            continue
        counter = re.findall(r"\w+", loop.group(1))[-2:-1] if "=" in loop.group(1) else []
        body = code[line_start:at] if one_line else code[i:at]
        if name in counter or re.search(rf"\b{name}\s*(?:[-+*/]?=(?!=)|\+\+|--)", body):
            continue
        if name not in found:
            found.append(name)
    return found


# PRIORS (the ``prior`` of each C++ directive): the share of edits the default Qwen2.5-Coder 1.5B carried
# out correctly in every recorded search outside the test half (benchmarks/directive_record.py, edits only,
# over the session files its docstring names: the searches on group_norm_silu, rms_norm and softmax, and
# the dev half of benchmarks/problems_generalize; docs/benchmarks.md, "Twentieth measurement"):
# cache_blocking 70/113, unroll_accumulators 48/89, simd_inner 66/129, openmp_rows 2/5, float_math 3/10,
# single_pass 25/91, fuse_epilogue 3/16, hoist_invariants 5/56. The first three problems alone had put
# simd_inner at 3/23 (13 %, below single_pass); the dev half's searches carried it out 63/106 times.
# The search's own record on the problem (``record``) soon outweighs them, so a model that does better at
# some change gets asked for it.


# Below this chance a directive never asked of a node comes after asking again one that worked there: the
# model's answer is then a different kernel or the same one (a repeat, which costs a minute but no candidate),
# where an unlikely change mostly costs a candidate (hoisting invariants, 5 of 56 edits; fusing an epilogue
# was below it too until the dev half's record: docs/benchmarks.md).
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
