"""Which change a search asks of a kernel next, and how the request is worded: directives skipped when they
cannot change the kernel or already failed, patterns in the kernel's own names, repeats and rarely carried out changes."""

from __future__ import annotations

import random
import re
from pathlib import Path

from search_nodes import REPO_PROBLEMS, first_edit_of_the_seed, node, ok

from kforge_desktop.kernels.verdict import Verdict
from kforge_desktop.problem.problem import load_problem
from kforge_desktop.search.config import SearchConfig
from kforge_desktop.search.directives import CORRECT_FIRST, DIRECTIVES, choose_directive
from kforge_desktop.search.engine import SearchEngine
from kforge_desktop.search.setup import create_session
from kforge_desktop.search.tree import Tree
from kforge_desktop.store import SessionStore


def test_directives_skip_what_already_failed_from_the_node():
    rng = random.Random(0)
    first = choose_directive("cpp", {}, rng, first=True)
    assert first == CORRECT_FIRST["cpp"]
    tried = {"straightforward": "ok", "openmp_rows": "failed", "simd_inner@row_sum": "failed"}
    picks = {choose_directive("cpp", tried, random.Random(s)).key for s in range(30)}
    assert not picks & {"straightforward", "openmp_rows", "simd_inner"}
    tree = Tree([node(1, None, origin="root"), node(2, 1, verdict=ok(1.0), directive="a"),
                 node(3, 2, verdict=Verdict("incorrect", "wrong values"), directive="simd_inner@row_sum"),
                 node(4, 2, state="duplicate", directive="float_math", duplicate_of=3),
                 node(5, 2, verdict=ok(0.5), directive="x"),
                 node(6, 2, state="duplicate", directive="fuse_epilogue")])  # the prompt's example, copied
    assert tree.tried(2) == {"simd_inner@row_sum": "failed", "float_math": "failed", "x": "ok",
                             "fuse_epilogue": "failed"}
    failed = dict(tree.failed_approaches(2))
    assert "incorrect" in failed["simd_inner@row_sum"] and "repeated" in failed["float_math"]
    assert "slower" in failed["x"] and "handed the example kernel back unchanged" in failed["fuse_epilogue"]


def test_directives_the_model_botched_elsewhere_in_the_tree_come_after_ones_it_carried_out():
    """A change the model got wrong on one node is asked for later on the next node, and one it got
    right comes first: the tree is evidence of what this model can do on this problem."""
    bad = Verdict("incorrect", "wrong values")
    tree = Tree([node(1, None, origin="root"), node(2, 1, verdict=ok(1.0), directive="straightforward"),
                 node(3, 2, kind="edit", verdict=bad, directive="unroll_accumulators@row_sum"),
                 node(4, 2, kind="edit", verdict=Verdict("compile_error", "x"), directive="hoist_invariants"),
                 node(5, 2, kind="edit", verdict=ok(1.2), directive="cache_blocking"),
                 node(6, 5, kind="repair", verdict=bad, directive="repair"),
                 node(7, 2, kind="edit", state="duplicate", directive="float_math")])
    record = tree.directive_record()
    assert record == {"straightforward": (1, 1), "unroll_accumulators": (0, 1), "hoist_invariants": (0, 1),
                      "cache_blocking": (1, 1)}
    picks = [choose_directive("cpp", {}, random.Random(s), record=record).key for s in range(30)]
    assert set(picks) == {"cache_blocking"}  # the only untried-here directive with a success elsewhere
    picks = [choose_directive("cpp", {"cache_blocking": "ok"}, random.Random(s), record=record).key for s in range(30)]
    assert not set(picks) & {"unroll_accumulators", "hoist_invariants"}
    # with no evidence in the tree, the measured priors order them: the change this model got right
    # most often first
    assert {choose_directive("cpp", {}, random.Random(s)).key for s in range(30)} == {"hoist_invariants"}
    hoisted = {"hoist_invariants": "failed"}
    assert {choose_directive("cpp", hoisted, random.Random(s)).key for s in range(30)} == {"cache_blocking"}
    tried = hoisted | {"cache_blocking": "ok", "openmp_rows": "failed"}
    assert {choose_directive("cpp", tried, random.Random(s)).key for s in range(30)} == {"reference_max"}
    tried |= {"reference_max": "failed"}
    assert {choose_directive("cpp", tried, random.Random(s)).key for s in range(30)} == {"unroll_accumulators"}
    evidence = {"cache_blocking": (0, 3)}  # it failed three times on this problem: it drops below the rest
    assert choose_directive("cpp", hoisted, random.Random(0), record=evidence).key == "reference_max"


def test_a_pattern_is_written_in_the_edited_functions_own_names():
    from kforge_desktop.search.directives import directive_by_key
    from kforge_desktop.search.edit_targets import length_parameter

    helper = "static inline float sq_dev_of(const float* v, float mean, int64_t n) {\n  return 0.0f;\n}"
    assert length_parameter(helper) == "n"
    assert length_parameter('extern "C" void f(const float* x, int64_t rows, int64_t cols) {}') == ""
    text = directive_by_key("cpp", "unroll_accumulators").prompt_text("cpp", length_parameter(helper))
    assert "c + 4 <= n;" in text and "cols" not in text
    from kforge_desktop.search.edit_targets import returns_value

    summing = "static inline float row_sum(const float* v, int64_t n) {\n  float s = 0.0f;\n  return s;\n}"
    assert returns_value(summing) and not returns_value(summing.replace("return s;", "v[0];"))
    text = directive_by_key("cpp", "unroll_accumulators").prompt_text("cpp", "n", returns_value(summing))
    assert "return (s0 + s1) + (s2 + s3);" in text and "total" not in text


def test_a_rows_pattern_runs_over_the_kernels_own_outer_loop():
    """A kernel whose outer loop is not over the scaffold's rows (the values before a reduced middle
    dimension, a pooling's planes) is shown the blocking and parallel patterns over its own loop: asked
    with `r < rows`, the model rewrote `o < outer` as `r < rows` and wrote past the smaller output."""
    from kforge_desktop.search.directives import directive_by_key
    from kforge_desktop.search.edit_targets import outer_loop

    middle = ('extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols) {\n'
              "    const int64_t outer = 16, n = 96, inner = 512;  // for (int64_t c = 0; c < cols; ++c) in a comment\n"
              "    #pragma omp parallel for schedule(static)\n"
              "    for (int64_t o = 0; o < outer; ++o) {\n"
              "        for (int64_t i = 0; i < inner; ++i) out[o * inner + i] = 0.0f;\n    }\n}\n")
    assert outer_loop(middle) == ("o", "outer")
    assert outer_loop(middle.replace("o < outer", "o < louter * linner")) == ("o", "louter * linner")
    rows = 'extern "C" void f(const float* x, int64_t rows) {\n  for (int64_t r = 0; r < rows; ++r) { x += 0; }\n}'
    assert outer_loop(rows) == ("r", "rows") and outer_loop("void f() { int a = 0; }") is None
    blocking = directive_by_key("cpp", "cache_blocking")
    text = blocking.prompt_text("cpp", loop=outer_loop(middle))
    assert "for (int64_t o0 = 0; o0 < outer; o0 += tile)" in text and "std::min(outer, o0 + tile)" in text
    assert "for (int64_t o = o0; o < o1; ++o)" in text and "rows" not in text.split("```")[1]
    assert blocking.prompt_text("cpp", loop=("r", "rows")) == blocking.prompt_text("cpp")  # the rows kernels' as before
    parallel = directive_by_key("cpp", "openmp_rows").prompt_text("cpp", loop=("r", "lplanes"))
    assert "for (int64_t r = 0; r < lplanes; ++r)" in parallel and "* cols" not in parallel


def test_the_unroll_pattern_shows_the_helpers_own_term():
    """Asked with a placeholder comment where each element's term goes, the model copied the comment
    (`s0 += /* the term of element c */;`: a compile error). A helper whose loop only names values
    and adds one gets the pattern written with its own term; one that also stores keeps the comment."""
    from kforge_desktop.search.directives import directive_by_key
    from kforge_desktop.search.requests import reduction_term

    sq_dev = ("static inline float sq_dev_of(const float* v, float mean, int64_t n) {\n  float s = 0.0f;\n"
              "  #pragma omp simd reduction(+ : s)\n  for (int64_t i = 0; i < n; ++i) {\n"
              "    float d = v[i] - mean;\n    s += d * d;\n  }\n  return s;\n}")
    assert reduction_term(sq_dev) == "(v[{i}] - mean) * (v[{i}] - mean)"
    text = directive_by_key("cpp", "unroll_accumulators").prompt_text("cpp", "n", True, reduction_term(sq_dev))
    assert "s1 += (v[c + 1] - mean) * (v[c + 1] - mean);" in text and "the term" not in text
    assert "for (; c < n; ++c) s0 += (v[c] - mean) * (v[c] - mean);" in text
    weighted = "float f(const float* x, int64_t n) { float s = 0.0f; for (int64_t c = 0; c < n; ++c) s += x[c] * c; return s; }"
    assert directive_by_key("cpp", "unroll_accumulators").prompt_text(
        "cpp", "n", True, reduction_term(weighted)).count("s2 += x[c + 2] * (c + 2);") == 1
    storing = sq_dev.replace("s += d * d;", "y[i] = d;\n    s += d * d;")
    two_loops = sq_dev.replace("return s;", "for (int64_t i = 0; i < n; ++i) s += v[i];\n  return s;")
    assert reduction_term(storing) == reduction_term(two_loops) == ""
    assert "/* the term of element c + 1 */" in directive_by_key("cpp", "unroll_accumulators").prompt_text("cpp", "n")


def test_a_directive_is_asked_of_each_function_it_applies_to_before_it_counts_as_tried():
    """Unrolling one helper's sum says nothing about unrolling another's: the directive stays open on
    a node until each reduction helper was asked, and the next request names a helper not asked yet."""
    from kforge_desktop.search.edit_targets import edit_target, open_tried

    functions = [("sum_of", "float sum_of(...) { for (...) s += v[i]; }"),
                 ("sq_dev_of", "float sq_dev_of(...) { for (...) s += d * d; }"),
                 ("affine", "void affine(...) { for (...) y[i] = v; }"),
                 ("row_max", "float row_max(...) { #pragma omp simd reduction(max : m)\n for (...) m = x > m ? x : m; }"),
                 ("kernel_forward", "void kernel_forward(...) { for (...) {} }")]
    tried = {"unroll_accumulators@sum_of": "failed", "cache_blocking": "ok"}
    assert open_tried(tried, functions, "kernel_forward") == {"cache_blocking": "ok"}
    picks = {edit_target(functions, "unroll_accumulators", "kernel_forward", random.Random(s), tried) for s in range(20)}
    assert picks == {"sq_dev_of"}  # and never the maximum: the pattern adds
    # a helper unrolled already is not asked again (the model wrote another unrolled loop: no change)
    from kforge_desktop.search.applicability import applicable

    unrolled = ("float sum_of(const float* v, int64_t n) {\n  float s0 = 0.0f, s1 = 0.0f;\n  int64_t i = 0;\n"
                "  for (; i + 2 <= n; i += 2) { s0 += v[i]; s1 += v[i + 1]; }\n  return s0 + s1;\n}")
    assert edit_target([("sum_of", unrolled)] + functions[1:], "unroll_accumulators", "kernel_forward",
                       random.Random(0)) == "sq_dev_of"
    assert applicable("unroll_accumulators", functions[1][1]) and not applicable("unroll_accumulators", unrolled)
    # a SIMD sum too: such edits were slower but mostly correct, and without them a search of SIMD sums had little
    # else to ask (dev: log_softmax, smoothed_cross_entropy fell from 21/24 to 9/18 correct)
    simd_sum = "float sum_of(const float* v, int64_t n) {\n  float s = 0.0f;\n  #pragma omp simd reduction(+ : s)\n" \
               "  for (int64_t i = 0; i < n; ++i) s += v[i];\n  return s;\n}"
    assert applicable("unroll_accumulators", simd_sum)
    assert applicable("unroll_accumulators", simd_sum.replace("  #pragma omp simd reduction(+ : s)\n", ""))
    tried["unroll_accumulators@sq_dev_of"] = "ok"
    assert open_tried(tried, functions, "kernel_forward") == tried
    assert choose_directive("cpp", open_tried(tried, functions, "kernel_forward"), random.Random(0)).key not in (
        "unroll_accumulators", "cache_blocking")


def test_directives_that_cannot_change_the_kernel_are_not_asked_for():
    """A kernel that already runs rows in parallel is not asked to (the model would repeat it: a wasted
    minute); a lone operator has no epilogue to fuse; edit requests carry the pattern to copy."""
    from kforge_desktop.search.applicability import applicable
    from kforge_desktop.search.directives import directive_by_key

    parallel = ("static inline float row_sum(const float* v, int64_t n) {\n  float s = 0.0f;\n"
                "  #pragma omp simd reduction(+ : s)\n  for (int64_t i = 0; i < n; ++i) s += v[i];\n  return s;\n}\n"
                'extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols) {\n'
                "  #pragma omp parallel for\n  for (int64_t r = 0; r < rows; ++r) out[r] = row_sum(x + r * cols, cols);\n}\n")
    assert not applicable("openmp_rows", parallel) and applicable("openmp_rows", parallel.replace("parallel for", ""))
    assert not applicable("fuse_epilogue", parallel, ("softmax",))
    # every inner loop is SIMD already (the rows' parallel loop is not an inner loop)
    assert not applicable("simd_inner", parallel)
    assert applicable("simd_inner", parallel.replace("#pragma omp simd reduction(+ : s)\n", ""))
    # a loop that stores one constant (the masked rest of a row) is a memset already: asked to make such a helper
    # SIMD-friendly, the model dropped the fill and left values unwritten
    finish = ("static inline void finish_row(float* yr, float k, int64_t n, int64_t cols) {\n  #pragma omp simd\n"
              "  for (int64_t c = 0; c < n; ++c) yr[c] *= k;\n  for (int64_t c = n; c < cols; ++c) yr[c] = 0.0f;\n}\n")
    assert not applicable("simd_inner", finish)
    assert applicable("simd_inner", finish.replace("yr[c] = 0.0f;", "yr[c] = yr[c - 1];"))
    assert applicable("simd_inner", finish.replace("  #pragma omp simd\n", ""))
    blocked = parallel.replace("for (int64_t r = 0; r < rows; ++r)", "for (int64_t r0 = 0; r0 < rows; r0 += tile)")
    assert applicable("cache_blocking", parallel) and not applicable("cache_blocking", blocked)
    # a pooling's windows lie in one row: blocks of rows reuse nothing (dev edits dropped the outputs' loop)
    assert applicable("cache_blocking", parallel, ("sum",))
    assert not applicable("cache_blocking", parallel, ("avg_pool2d",))
    assert not applicable("cache_blocking", parallel, ("max_pool2d_with_indices",))
    assert not applicable("float_math", parallel + "// exp(x) in a comment\n")  # all float already
    assert applicable("float_math", parallel.replace("0.0f", "0.0")) and applicable("float_math", "y = exp(v);")
    assert applicable("float_math", "s += 1e-6 * v;") and not applicable("float_math", "p = p * f + 1.3333558e-3f;")
    for exemplar in sorted((Path(__file__).resolve().parents[2] / "resources" / "exemplars" / "cpp").glob("*.cpp")):
        assert not applicable("float_math", exemplar.read_text()), exemplar.name  # all float already
    # one pass already: an elementwise kernel has no statistics to fuse (asked, the model invents a variance)
    elementwise = ('extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols) {\n'
                   "  for (int64_t r = 0; r < rows; ++r)\n    for (int64_t c = 0; c < cols; c += 1)\n"
                   "      out[r * cols + c] = x[r * cols + c] > 0.0f ? x[r * cols + c] : 0.2f * x[r * cols + c];\n}\n")
    assert not applicable("single_pass", elementwise) and not applicable("single_pass", parallel)
    # nothing is read twice: blocks of rows reuse nothing (asked, the model dropped the loop over the columns)
    assert not applicable("cache_blocking", elementwise.replace("  for (int64_t r", "  #pragma omp parallel for\n  for (int64_t r"))
    two_pass = parallel.replace("out[r] = row_sum(x + r * cols, cols);",
                                "{\n    float m = x[r * cols];\n    for (int64_t c = 1; c < cols; ++c) m = std::max(m, x[r * cols + c]);\n"
                                "    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = x[r * cols + c] - m;\n  }")
    assert applicable("single_pass", two_pass)
    # a pooling's sums are each output's own window: no statistic of a row to fuse (dev edits dropped the outputs)
    assert not applicable("single_pass", two_pass, ("avg_pool2d",))
    # a running sum in blocks of rows reads each row in one loop already: three loops, one pass (asked to fuse its
    # passes, the model wrote the row's total first and the running sum after it; such edits: 0 of 12 correct)
    scan = ('extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols) {\n'
            "  #pragma omp parallel for\n  for (int64_t r0 = 0; r0 < rows; r0 += 8)\n"
            "    for (int64_t r = r0; r < std::min(rows, r0 + 8); ++r) {\n      float run = 0.0f;\n"
            "      for (int64_t c = 0; c < cols; ++c) { run += x[r * cols + c]; out[r * cols + c] = run; }\n    }\n}\n")
    assert not applicable("single_pass", scan, ("cumsum",))
    assert applicable("single_pass", scan.replace("float run = 0.0f;", "float run = 0.0f, m = 0.0f;\n"
                                                  "      for (int64_t c = 0; c < cols; ++c) m += x[r * cols + c];"))
    # a chain of operators in more than one pass has an epilogue to fuse; in one pass it has none (asked, the
    # model changed an elementwise chain's formula)
    assert applicable("fuse_epilogue", two_pass, ("native_group_norm", "silu"))
    assert not applicable("fuse_epilogue", parallel, ("native_group_norm", "silu"))
    assert not applicable("fuse_epilogue", elementwise, ("mul", "sigmoid"))
    # hoisting: only where a loop body divides by a value the loop does not change
    from kforge_desktop.search.applicability import hoistable_divisions
    assert not applicable("hoist_invariants", elementwise) and not applicable("hoist_invariants", two_pass)
    normalize = two_pass.replace("x[r * cols + c] - m;", "x[r * cols + c] / m;")
    assert applicable("hoist_invariants", normalize) and hoistable_divisions(normalize) == [("m", "m", "for (int64_t c = 0; c < cols; ++c)")]
    per_value = elementwise.replace("0.2f * x[r * cols + c]", "x[r * cols + c] / (1.0f + x[r * cols + c])")
    mean_after = parallel.replace("return s;", "return s / n;")  # after the loop, once a call
    assert not applicable("hoist_invariants", per_value) and not applicable("hoist_invariants", mean_after)
    picks = {choose_directive("cpp", {"straightforward": "ok"}, random.Random(s), kernel=parallel,
                              aten_ops=("softmax",)).key for s in range(40)}
    assert picks and not picks & {"openmp_rows", "fuse_epilogue"}
    text = directive_by_key("cpp", "openmp_rows").prompt_text("cpp")
    assert "```cpp" in text and "same per-row work as before" in text


def test_the_simd_request_names_the_functions_own_sums_and_none_where_it_has_none(tmp_path):
    """Shown `reduction(+ : s)` for an elementwise chain, the default model added a sum `s` and stored it
    where the output belongs, or left `s` undeclared: the directive names the edited function's own sums
    and maxima, and says there are none where there are none."""
    from kforge_desktop.search.applicability import accumulators
    from kforge_desktop.search.requests import simd_text

    summing = ("static inline float sum_sq(const float* v, int64_t n) {\n  float acc = 0.0f;\n"
               "  for (int64_t i = 0; i < n; ++i) acc += v[i] * v[i];\n  return acc;\n}\n")
    maximum = ("static inline void row_max(const float* v, float* y, int64_t n) {\n  float m = v[0];\n"
               "  for (int64_t i = 1; i < n; ++i) m = v[i] > m ? v[i] : m;  // acc += in a comment\n  y[0] = m;\n}\n")
    chain = ("static inline void act(const float* v, float* y, int64_t n) {\n"
             "  for (int64_t i = 0; i < n; ++i) { y[i] += v[i] > 0.0f ? v[i] : 0.2f * v[i]; }\n}\n")
    assert accumulators(summing) == (["acc"], []) and accumulators(maximum) == ([], ["m"])
    assert accumulators(chain) == ([], [])  # a store into the output is not a sum
    assert "reduction(+ : acc)" in simd_text(summing) and "reduction(+ : s)" not in simd_text(summing)
    assert "reduction(max : m)" in simd_text(maximum)
    assert "reduction(" not in simd_text(chain).replace("no `reduction` clause", "")
    assert "no `reduction` clause" in simd_text(chain) and "every output value" in simd_text(chain)
    # a session on an elementwise chain: its lowered seed says it reduces nothing, and the first edit of it is
    # the SIMD request without a sum (blocks of rows do not apply: nothing is read twice)
    path = tmp_path / "leaky.py"
    path.write_text("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
                    "class Model(nn.Module):\n    def __init__(self, dim):\n        super().__init__()\n"
                    "        self.bias = nn.Parameter(torch.randn(dim))\n\n"
                    "    def forward(self, x):\n        return F.leaky_relu(x + self.bias, 0.2) * 1.5\n\n\n"
                    "def get_inputs():\n    return [torch.randn(16, 64)]\n\n\ndef get_init_inputs():\n    return [64]\n")
    store = SessionStore(tmp_path / "t.kforge")
    pid = create_session(store, load_problem(path), SearchConfig(strategy="mcts", budget_candidates=5, seeds=True))
    eng = SearchEngine(store, pid, generator=None, evaluator=None)
    seed, exp, _ = first_edit_of_the_seed(eng, 2.0)
    assert seed.directive == "lowered" and "no reduction" in seed.kernel_source
    assert "per reduction" not in seed.kernel_source
    assert (exp.kind, exp.directive) == ("edit", "simd_inner")
    assert "no `reduction` clause" in exp.directive_text and "reduction(+ : s)" not in exp.directive_text
    store.close()


def test_a_cuda_seed_is_asked_only_for_changes_it_lacks_and_each_of_the_function_it_concerns():
    """The CUDA exemplars load float4 and reduce with warp shuffles already: asked for either, the default
    model hands the seed back unchanged. A launch shape is the entry point's; a grid-stride loop or a
    staging in shared memory is a __global__ function's (asked of a load helper, it has nothing to act on)."""
    from kforge_desktop.search.applicability import applicable
    from kforge_desktop.search.edit_targets import edit_targets
    from kforge_desktop.search.exemplars import seed_exemplars
    from kforge_desktop.search.planner import kernel_functions
    from kforge_desktop.search.scaffold import FUNCTION, build_scaffold

    problem = load_problem(REPO_PROBLEMS / "softmax.py")
    kernel = seed_exemplars(build_scaffold(problem, "cuda"), problem.source)[0][1]
    assert not applicable("vectorized_loads", kernel) and not applicable("warp_reductions", kernel)
    assert not applicable("online_softmax", kernel)  # the exemplar's max and sum are online already
    assert not applicable("fast_math", kernel)  # __expf throughout
    assert applicable("launch_shape", kernel)
    assert not applicable("grid_stride", kernel)  # one block a row: the grid is the rows already
    assert applicable("grid_stride", "int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n")
    assert not applicable("grid_stride", "for (i = blockIdx.x * blockDim.x; i < n; i += gridDim.x * blockDim.x)")
    assert not applicable("shared_tiling", kernel)  # the row is held in registers, read once
    assert applicable("shared_tiling", "__shared__ float smem[32];\nfor (c = t; c < n; c += 256) s += xr[c];\n")
    assert not applicable("fusion", kernel)  # one launch: nothing to fuse
    two = kernel + "\nvoid twice() { k<<<1, 1>>>(); }\n"
    assert applicable("fusion", two)  # a second launch (a statistics pass and an apply pass) can be fused
    assert not applicable("fusion", "void run() {\n  cudaLaunchKernelEx(&config, kernel, x, y);\n}\n")
    plain = "__global__ void k(const float* x, float* y, int n) {\n  float m = fmaxf(x[0], x[1]);\n" \
            "  for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = expf(x[i] - m) / sqrtf(2.0f);\n}\n"
    assert applicable("vectorized_loads", plain) and applicable("online_softmax", plain) and applicable("fast_math", plain)
    functions = kernel_functions(kernel, "cuda")
    assert edit_targets(functions, "launch_shape", FUNCTION) == [FUNCTION]
    assert edit_targets(functions, "grid_stride", FUNCTION) == ["softmax_rows"]  # (were it asked)
    gelu = [("load4", "__device__ float4 load4(const float* p, int64_t c) {\n  for (int k = 0; k < 4; ++k) {}\n}"),
            ("gelu", "__device__ float gelu(float y) { return 0.5f * y * (1.0f + tanhf(y)); }"),
            (FUNCTION, "void kernel_forward(const float* x) { k<<<1, 1>>>(x); }")]
    assert edit_targets(gelu, "fast_math", FUNCTION) == ["gelu"]  # where the math is, not a load helper
    picks = {choose_directive("cuda", {}, random.Random(s), kernel=kernel).key for s in range(40)}
    assert picks == {"launch_shape"}  # the one change this seed lacks
    # patterns show structure only: no computation the model could copy into the wrong kernel
    assert all("[c]" not in d.example and "exp" not in d.example for d in DIRECTIVES["cpp"])


def test_a_launch_shape_edit_of_a_kernel_of_one_block_per_row_keeps_one_block_per_row():
    """Told "several rows per block", the default model gave the row seeds fewer blocks than rows and left
    the other rows unwritten (NaN from 4 of 5 such edits, benchmarks/results/gpu_samples_r38): the edit
    rewrites only the launch, and the kernel takes its row from its block. Such a kernel is asked for its
    threads per block alone; a kernel with its own loop over the grid keeps the general text."""
    from kforge_desktop.search.directives import directive_by_key
    from kforge_desktop.search.exemplars import seed_exemplars
    from kforge_desktop.search.planner import edit_expansion, kernel_functions
    from kforge_desktop.search.scaffold import build_scaffold

    d = directive_by_key("cuda", "launch_shape")
    asked = {}
    for name in ("softmax", "gelu_bias"):
        problem = load_problem(REPO_PROBLEMS / f"{name}.py")
        kernel = seed_exemplars(build_scaffold(problem, "cuda"), problem.source)[0][1]
        asked[name] = edit_expansion(0, kernel_functions(kernel, "cuda"), d, "cuda", random.Random(0), {}).directive_text
    assert "one block per row" in asked["softmax"] and "several rows per block" not in asked["softmax"]
    assert asked["gelu_bias"] == d.text  # a grid-stride loop over rows: any grid is correct


def test_a_lowered_cuda_seed_covers_its_work_with_any_grid_and_its_launch_shape_edit_is_told_so():
    """Told "several rows per block ... enough blocks to fill every SM", the default model sized the grid of
    a lowered seed (a warp a row, or a thread a row or an output value) to the rows alone and left the
    rest unwritten: 8 of 10 such dev edits (docs/results/h100_round27). The lowered kernels stride over
    their work with the whole grid now, the launch-shape edit says any grid is correct, and a grid-stride
    loop, which they have, is not asked again. An elementwise chain reads each value once: no staging in
    shared memory is asked of it (0 of 2 dev edits verified: a variable-length __shared__ array, a crash)."""
    from kforge_desktop.search.applicability import applicable
    from kforge_desktop.search.directives import directive_by_key
    from kforge_desktop.search.lowering import lower
    from kforge_desktop.search.planner import edit_expansion, kernel_functions
    from kforge_desktop.search.scaffold import build_scaffold

    d = directive_by_key("cuda", "launch_shape")
    dev = Path(__file__).resolve().parents[2] / "benchmarks" / "problems_generalize" / "dev"
    # the threads the seed's launch starts: a warp a row, a thread a row, a thread an output value
    work = {"quick_gelu": "rows * 32", "log_softmax": "rows * 32", "channel_sum": "louter * linner",
            "max_pool_overlap": "n"}
    for name in work:
        problem = load_problem(dev / f"{name}.py")
        kernel = lower(problem, build_scaffold(problem, "cuda"))
        assert re.search(r"for \(int64_t \w+ = [^;]*; \w+ < [^;]*; \w+ \+= (warps|threads)\)", kernel), name
        assert not applicable("grid_stride", kernel), name
        text = edit_expansion(0, kernel_functions(kernel, "cuda"), d, "cuda", random.Random(0), {}).directive_text
        assert "any grid covers all of it" in text and "several rows per block" not in text, name
        # told only that, the model launched a thread a row or one block: 8 of 11 new kernels of the first edits
        # at 0.02-0.25x eager (benchmarks/results/gpu_samples_r77_*). The text names the grid that starts them all
        assert f"starts `{work[name]}` threads" in text and f"`({work[name]} + T - 1) / T` blocks" in text, name
        # no staging in shared memory where each warp or thread has its own row: it would need a slice per warp
        assert not applicable("shared_tiling", kernel), name
    # a launch that is not one thread for each unit of work keeps the general words, with no formula
    kernel = lower(load_problem(dev / "log_softmax.py"), build_scaffold(load_problem(dev / "log_softmax.py"), "cuda"))
    relaunched = re.sub(r"<<<[^,]*,", "<<<264,", kernel)
    text = edit_expansion(0, kernel_functions(relaunched, "cuda"), d, "cuda", random.Random(0), {}).directive_text
    assert "any grid covers all of it" in text and "+ T - 1" not in text and "at least as many threads" in text


def test_when_every_change_failed_the_one_asked_again_can_still_change_the_kernel():
    """Group norm + SiLU has no rows: with everything tried, the search asked three times to block its
    rows (each a compile error); the retry is a failed directive that applies."""
    from kforge_desktop.search.applicability import applicable

    no_rows = ("static inline float sum_of(const float* v, int64_t n) {\n  float s = 0.0f;\n"
               "  for (int64_t i = 0; i < n; ++i) s += v[i];\n  return s;\n}\n"
               'extern "C" void kernel_forward(const float* x, float* out, int64_t batch, int64_t groups) {\n'
               "  for (int64_t g = 0; g < batch * groups; ++g) out[g] = sum_of(x + g * 8, 8);\n}\n")
    tried = {d.key: "failed" for d in DIRECTIVES["cpp"]}
    picks = {choose_directive("cpp", tried, random.Random(s), kernel=no_rows).key for s in range(20)}
    assert picks and all(applicable(k, no_rows) for k in picks) and "cache_blocking" not in picks


def test_when_every_directive_was_asked_the_least_asked_comes_next():
    """Recorded on dev/cumsum_rows: every directive that fits a node had been asked of it, and the
    same one was asked three more times, each answer the node's kernel unchanged (a duplicate).
    Asked again, the directive asked the fewest times from the node comes first."""
    tried = {d.key: "failed" for d in DIRECTIVES["cpp"]}
    first = choose_directive("cpp", tried, random.Random(0))
    attempts = {d.key: 1 for d in DIRECTIVES["cpp"]} | {first.key: 4}
    seen = [choose_directive("cpp", tried, random.Random(0), attempts=attempts).key]
    for _ in range(len(DIRECTIVES["cpp"]) - 2):  # each asked once more before any a third time
        attempts[seen[-1]] += 1
        seen.append(choose_directive("cpp", tried, random.Random(0), attempts=attempts).key)
    assert first.key not in seen and len(set(seen)) == len(seen) == len(DIRECTIVES["cpp"]) - 1
    # a directive that worked from the node still comes before the failed ones
    worked = tried | {first.key: "ok"}
    assert choose_directive("cpp", worked, random.Random(0), attempts=attempts).key == first.key


def test_a_change_the_model_rarely_carries_out_comes_after_asking_again_one_that_worked():
    """Fusing an epilogue that the model got wrong six times elsewhere in this tree (its prior is 3 of 16 edits)
    is now a change it rarely carries out: a node's untried directive that unlikely waits while one that worked
    from the node can be asked again (its answer is a new kernel, or a repeat that costs no candidate); with
    nothing that worked, or once the tree shows the model can do it, it is asked. Fusing the passes over a row is
    that unlikely by its prior alone (2 of 33 dev edits at its current wording, the correct ones slower than the
    kernel they edited), so it waits the same way in a tree with no record of it. (Hoisting invariants, 5 of 56
    edits with the general request, was below the line by its prior until the request named the division.)"""
    from kforge_desktop.search.directives import UNLIKELY, expected_rate

    assert {d.key for d in DIRECTIVES["cpp"] if expected_rate(d) < UNLIKELY} == {"single_pass"}  # by the priors
    botched = {"fuse_epilogue": (0, 6)}
    low = {d.key for d in DIRECTIVES["cpp"] if expected_rate(d, botched) < UNLIKELY}
    assert low == {"fuse_epilogue", "single_pass"}
    tried = {d.key: "failed" for d in DIRECTIVES["cpp"] if d.key != "fuse_epilogue"} | {"cache_blocking": "ok"}
    assert {choose_directive("cpp", tried, random.Random(s), record=botched).key for s in range(20)} == {"cache_blocking"}
    nothing_worked = tried | {"cache_blocking": "failed"}
    assert {choose_directive("cpp", nothing_worked, random.Random(s), record=botched).key
            for s in range(20)} == {"fuse_epilogue"}
    record = {"fuse_epilogue": (1, 1)}  # carried out elsewhere in this tree
    assert choose_directive("cpp", tried, random.Random(0), record=record).key == "fuse_epilogue"
    fusing = {d.key: "failed" for d in DIRECTIVES["cpp"] if d.key != "single_pass"} | {"cache_blocking": "ok"}
    assert {choose_directive("cpp", fusing, random.Random(s)).key for s in range(20)} == {"cache_blocking"}
    assert {choose_directive("cpp", fusing | {"cache_blocking": "failed"}, random.Random(s)).key
            for s in range(20)} == {"single_pass"}


def test_a_directive_that_worked_is_not_asked_again_once_its_answers_repeat():
    """Recorded on dev/channel_sum: a directive that had worked from a node was asked of it eleven more
    times and nine answers were the same kernels again, until the search gave up on repeats. Once
    two answers to it from the node repeat, the node gets a different change, however unlikely."""
    from kforge_desktop.search.directives import USED_UP

    low, botched = {"fuse_epilogue"}, {"fuse_epilogue": (0, 6)}  # as unlikely as the test above makes it
    tried = {d.key: "failed" for d in DIRECTIVES["cpp"] if d.key not in low} | {"cache_blocking": "ok"}
    once = {"cache_blocking": USED_UP - 1}
    assert choose_directive("cpp", tried, random.Random(0), record=botched, repeats=once).key == "cache_blocking"
    used_up = {"cache_blocking@row_sum": USED_UP}  # counted per directive, whatever function it was asked of
    picks = {choose_directive("cpp", tried, random.Random(s), record=botched, repeats=used_up).key for s in range(20)}
    assert picks and "cache_blocking" not in picks and picks <= low


def test_an_edit_of_a_kernel_that_tests_for_nan_is_asked_to_keep_those_tests(tmp_path):
    """Asked for SIMD loops without branches, the default model rewrote the max pooling seed's NaN-keeping
    select as std::max in 21 of 26 correct dev kernels, which the evaluator's NaN trial now fails: an edit
    of a kernel that compares a value with itself is asked to keep those tests; one without none is not."""
    path = tmp_path / "pool.py"
    path.write_text("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
                    "class Model(nn.Module):\n    def forward(self, x):\n"
                    "        return F.max_pool1d(x, kernel_size=3, stride=2, padding=1)\n\n\n"
                    "def get_inputs():\n    return [torch.randn(4, 8, 64)]\n\n\ndef get_init_inputs():\n    return []\n")
    store = SessionStore(tmp_path / "t.kforge")
    pid = create_session(store, load_problem(path), SearchConfig(strategy="mcts", budget_candidates=5, seeds=True))
    eng = SearchEngine(store, pid, generator=None, evaluator=None)
    seed, exp, tree = first_edit_of_the_seed(eng, 2.0)
    assert "(e != e)" in seed.kernel_source
    assert exp.kind == "edit"
    directive = eng.prompt(exp, tree).directive
    assert directive.startswith(exp.directive_text) and "Keep every NaN test as it is" in directive
    store.close()
    from kforge_desktop.search.prompting import edit_directive

    plain = 'extern "C" void kernel_forward(const float* x, float* out, int64_t n) { out[0] = x[0] != x[1]; }'
    assert edit_directive("Unroll.", plain) == "Unroll."
