"""Optimization directives: the one named change an expansion asks the model for.

Why named directives: a small model keeps a working kernel working when asked for one concrete
change far more often than when asked to "make it faster"; naming the change also lets the tree
remember what was already tried from a node and failed, so it is not asked for again.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from .applicability import applicable

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
                  "in the next.", prior=0.06),
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
# 3/8 at seed 1; docs/benchmarks.md, "Thirty-third measurement"). single_pass, worded in the kernel's own statistics
# since cbe8993, was carried out 2 of 33 times over the dev searches at that wording (`generalize.py --report
# --by-request --results benchmarks/results/generalize/generalize_dev_r70d_r93d.jsonl`, by_request_dev_r70d_r93d.txt;
# 3 of 21 on the test half), its correct edits at 0.68x the kernel they edited: below ``UNLIKELY``, it is asked
# when nothing that worked from a node is likelier (docs/benchmarks.md, "Forty-fifth measurement").


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
