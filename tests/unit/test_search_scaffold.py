"""Scaffolding, exemplars, edits by replaced functions and prompt fitting (real builds of our own code)."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch

from kforge_desktop.csource.items import merge_functions, prune_unreachable, split_items
from kforge_desktop.llm import prompts
from kforge_desktop.problem.problem import load_problem
from kforge_desktop.search.exemplars import (
    adapt,
    epilogue_missing,
    exemplar_named,
    load_exemplars,
    missing_ops,
    output_writer,
    rank,
    seed_exemplars,
)
from kforge_desktop.search.scaffold import build_scaffold, clean_kernel, kernel_from_answer, kernel_of_module

PROBLEMS = Path(__file__).resolve().parents[2] / "resources" / "problems"
ALL = sorted(p.name for p in PROBLEMS.glob("*.py"))


def test_signatures_come_from_the_problem():
    s = build_scaffold(load_problem(PROBLEMS / "layer_norm.py"))
    assert s.signature() == ('extern "C" void kernel_forward(const float* x, const float* norm_weight, '
                             'const float* norm_bias, float* out, int64_t rows, int64_t cols, float norm_eps)')
    assert "[256, 1024]" in s.describe_args() and "self.norm.eps (= 1e-05)" in s.describe_args()
    g = build_scaffold(load_problem(PROBLEMS / "group_norm_silu.py"))
    assert g.layout == "channels" and [a.name for a in g.args][-5:] == ["batch", "channels", "spatial", "norm_eps",
                                                                         "norm_num_groups"]
    c = build_scaffold(load_problem(PROBLEMS / "silu_mul.py"), language="cuda")
    assert c.signature().endswith("int64_t rows, int64_t cols, cudaStream_t stream)")


@pytest.mark.parametrize("name", ALL)
def test_each_problem_gets_a_seed_that_builds_and_runs_like_the_reference(name, build_cache):
    """Our exemplars, adapted to each problem's signature and wrapped by the scaffold, build for real;
    they match the reference except where the exemplar covers only part of the chain."""
    problem = load_problem(PROBLEMS / name)
    scaffold = build_scaffold(problem)
    seeds = seed_exemplars(scaffold, problem.source)
    assert seeds, f"no exemplar fits {name}"
    exemplar, code = seeds[0]
    assert missing_ops(exemplar, scaffold) == []
    source = scaffold.module_source(code)
    assert kernel_of_module(source).strip() == code.strip()
    ref, new = _outputs(problem, scaffold, code, f"seed_{problem.name}")
    assert torch.allclose(ref, new, atol=1e-4, rtol=1e-4), f"seed {exemplar.name} is wrong for {name}"


def test_an_exemplar_that_leaves_out_only_the_final_activation_is_an_incomplete_seed(build_cache):
    """Without its own GroupNorm + SiLU exemplar, GroupNorm's would be the seed of GroupNorm + SiLU: it
    fits the signature and leaves only the final SiLU out; its repair names exactly that change."""
    problem = load_problem(PROBLEMS / "group_norm_silu.py")
    scaffold = build_scaffold(problem)
    code = _group_norm_seed(problem, scaffold)
    exemplar = exemplar_named("group_norm", "cpp")
    assert epilogue_missing(exemplar, scaffold) == ["silu"]
    assert output_writer(code, scaffold) == "affine_channel"
    assert not torch.allclose(*_outputs(problem, scaffold, code, "gn_incomplete"), atol=1e-4, rtol=1e-4)


def _group_norm_seed(problem, scaffold) -> str:
    """GroupNorm's exemplar fitted to GroupNorm + SiLU (the seed it would be without its twin)."""
    code = adapt(exemplar_named("group_norm", "cpp"), scaffold, problem.source)
    assert code is not None
    return code


def _build_module(scaffold, code: str, name: str):
    module = types.ModuleType(name)
    exec(compile(scaffold.module_source(code), name, "exec"), module.__dict__)  # our own code, built for real
    return module


def _outputs(problem, scaffold, kernel: str, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference's output and the scaffolded ``kernel``'s, same weights, same inputs."""
    ref_mod = problem.load_module()
    torch.manual_seed(3)
    ref = ref_mod.Model(*ref_mod.get_init_inputs())
    torch.manual_seed(3)
    new = _build_module(scaffold, kernel, name).ModelNew(*ref_mod.get_init_inputs())
    inputs = ref_mod.get_inputs()
    return ref(*inputs), new(*inputs)


GROUP_NORM_STORE = "yc[s] = xc[s] * a + b;"


def _with_silu(group_norm_code: str) -> str:
    """GroupNorm's seed with the SiLU its completion asks for, exactly as asked."""
    from kforge_desktop.search.exemplars import EPILOGUE_OPS

    silu = EPILOGUE_OPS["cpp"]["silu"]
    return group_norm_code.replace(GROUP_NORM_STORE, f"{{ const float v = xc[s] * a + b; yc[s] = {silu}; }}")


def test_the_softmax_seeds_vectorizable_exp_is_exact_enough_over_the_whole_float_range(build_cache):
    """The row-softmax exemplar computes exp with plain float arithmetic (so that its loop vectorizes;
    with std::exp it ran at 0.13x of eager on the CPU). It must still match torch on rows whose values
    span far more than exp's range, and on masked (-inf) entries."""
    problem = load_problem(PROBLEMS / "softmax.py")
    scaffold = build_scaffold(problem)
    (exemplar, code), = seed_exemplars(scaffold, problem.source)
    assert "const float scale = 1.0f;" in code  # the reference has no scale: a constant the compiler folds
    # a value minus its row's maximum is never positive: the exp without the cap at exp(88), fast_exp_neg
    assert "fast_exp_neg(xr[c] * scale - m)" in code and "std::exp(" not in code
    model = _build_module(scaffold, code, "softmax_seed").ModelNew()
    torch.manual_seed(0)
    x = torch.randn(64, 1024) * torch.logspace(-2, 2.5, 64).unsqueeze(1)  # row scales 0.01 .. 316
    x[::3, ::7] = float("-inf")
    ref = torch.softmax(x, dim=-1)
    got = model(x)
    assert torch.allclose(got, ref, atol=1e-6, rtol=1e-5)
    shown = ref > 1e-30  # the exemplar's comment says "relative error below 5e-6"
    assert ((got - ref).abs() / ref)[shown].max() < 5e-6
    assert (got[::3, ::7] == 0).all() and torch.allclose(got.sum(-1), torch.ones(64))


def test_a_kernel_that_calls_the_shared_exp_gets_its_definition_and_the_silu_completion_is_correct(build_cache):
    """GroupNorm + SiLU: the seed's completion asks for `v / (1.0f + fast_exp(-v))`. The kernel that does
    exactly that, without defining fast_exp, gets the exemplar's definition and then matches the
    reference; a kernel that defines it already is left alone."""
    from kforge_desktop.search.exemplars import EPILOGUE_OPS, provide_helpers

    problem = load_problem(PROBLEMS / "group_norm_silu.py")
    scaffold = build_scaffold(problem)
    code = _group_norm_seed(problem, scaffold)
    assert GROUP_NORM_STORE in code and "fast_exp" in EPILOGUE_OPS["cpp"]["silu"]
    kernel, added = provide_helpers(_with_silu(code), "cpp")
    assert added == ["fast_exp", "fast_exp_neg"]  # fast_exp is fast_exp_neg of its argument capped at 88
    assert kernel.index("fast_exp_neg(float x)") < kernel.index("fast_exp(float x)") < kernel.index("affine_channel(")
    assert provide_helpers(kernel, "cpp") == (kernel, [])
    assert torch.allclose(*_outputs(problem, scaffold, kernel, "gn_silu"), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", ["silu_mul.py", "gelu_bias.py"])
def test_prompts_show_the_shared_exp_as_one_line_and_the_kernel_gets_it_back(name, build_cache):
    """silu_mul's and gelu_bias's exemplars call the vectorizable fast_exp (std::exp and std::tanh in a
    loop are not vectorized). Copying its 19 lines (20 when this was seen), the 0.5B model ran out of tokens; prompts show it as
    one line, and a kernel copied from what the prompt shows gets the definition back and is correct."""
    from kforge_desktop.search.exemplars import collapse_helpers, provide_helpers

    problem = load_problem(PROBLEMS / name)
    scaffold = build_scaffold(problem)
    exemplar, code = seed_exemplars(scaffold, problem.source)[0]
    shown = collapse_helpers(code, "cpp")
    assert "fast_exp(float x);  provided" in shown and "12582912.0f" in code and "12582912.0f" not in shown
    assert len(shown.splitlines()) <= len(code.splitlines()) - 17
    kernel, added = provide_helpers(shown, "cpp")
    assert added == ["fast_exp", "fast_exp_neg"] and "provided" not in kernel
    assert "fast_exp_neg" not in shown  # only fast_exp calls it here: not one more name to call (wrong above 88)
    assert torch.allclose(*_outputs(problem, scaffold, kernel, f"shown_{problem.name}"), atol=1e-5, rtol=1e-4)
    # the stand-in copied without its "//" (a prototype followed by words: seen on a causal softmax)
    uncommented = shown.replace("// static inline float fast_exp", "static inline float fast_exp")
    assert uncommented != shown and provide_helpers(uncommented, "cpp") == (kernel, ["fast_exp", "fast_exp_neg"])


def test_a_prompt_leaves_out_a_shared_helper_only_the_helpers_call_and_nothing_else_changes():
    """The row softmax's prompt names the exp its own loop calls (fast_exp_neg), with the condition it holds under, and
    leaves out the fast_exp it does not call, blank lines and all; a CUDA or Triton exemplar has no shared helper and is shown as it is, byte for byte
    (the Triton exemplars' two blank lines between functions included)."""
    from kforge_desktop.search.exemplars import PROVIDED, collapse_helpers, load_exemplars

    softmax = next(e for e in load_exemplars("cpp") if e.name == "row_softmax")
    shown = collapse_helpers(softmax.code, "cpp")
    assert "fast_exp(" not in shown and "\n\n\n" not in shown
    # the uncapped exp's line says where it holds (above 88 it is not exp): a model calls it on a value minus the
    # row's maximum, and fast_exp elsewhere
    line = next(ln for ln in shown.split("\n") if "fast_exp_neg(float x);" in ln)
    assert "only for x <= 0" in line and "fast_exp for any x" in line and line.endswith(PROVIDED)
    for ex in load_exemplars("cuda"):
        assert collapse_helpers(ex.code, "cuda") == ex.code, ex.name
    triton = sorted((PROBLEMS.parent / "exemplars" / "triton").glob("*.py"))
    assert triton and any("\n\n\n" in path.read_text() for path in triton)
    for path in triton:  # a Triton node's kernel is the module itself
        assert collapse_helpers(path.read_text(), "triton") == path.read_text(), path.name


def test_retrieval_ranks_the_same_family_first():
    expect = {"softmax.py": "row_softmax", "rms_norm.py": "rms_norm", "layer_norm.py": "layer_norm",
              "gelu_bias.py": "gelu_bias", "silu_mul.py": "silu_mul", "group_norm_silu.py": "group_norm_silu"}
    for name, family in expect.items():
        problem = load_problem(PROBLEMS / name)
        assert rank(build_scaffold(problem), problem.source)[0][1].name == family


def test_an_exemplar_that_does_not_fit_the_signature_is_not_adapted():
    layer = next(e for e in load_exemplars("cpp") if e.name == "layer_norm")
    group = next(e for e in load_exemplars("cpp") if e.name == "group_norm")
    rms = build_scaffold(load_problem(PROBLEMS / "rms_norm.py"))
    softmax = build_scaffold(load_problem(PROBLEMS / "softmax.py"))
    assert adapt(group, rms) is None  # batch, channels, spatial: nothing of rows and cols
    assert adapt(layer, softmax) is None  # a softmax has no epsilon for LayerNorm's eps
    assert adapt(layer, rms) is not None  # LayerNorm's bias is optional: RMSNorm's signature fits it


def test_every_exemplar_declares_itself_and_has_a_cuda_twin():
    cpp = {e.name for e in load_exemplars("cpp")}
    cuda = {e.name for e in load_exemplars("cuda")}
    assert cpp == cuda and len(cpp) >= 6
    for e in load_exemplars("cpp") + load_exemplars("cuda"):
        assert e.keywords and e.about and e.params(), e.path


def test_edits_replace_one_function_and_keep_the_rest():
    parent = load_exemplars("cpp")[0].code  # helpers + entry point
    items = split_items(parent)
    helpers = [it for it in items if it.kind == "function" and it.name != "kernel_forward"]
    target = helpers[0]
    new_helper = target.text.replace("{", "{\n    // changed", 1)
    merged = merge_functions(parent, "```cpp\n" + new_helper + "\n```".replace("```", ""))
    assert "// changed" in merged
    assert [it.name for it in split_items(merged) if it.kind == "function"] == \
        [it.name for it in items if it.kind == "function"]
    assert merge_functions(parent, "no code here") == parent


def test_a_new_helper_lands_after_the_helpers_it_calls_so_the_edit_compiles():
    # the model answers an edit with a new helper that calls two existing ones (seen with the
    # default model on GroupNorm): it must go before its caller but after its callees
    from kforge_desktop.kernels.native import syntax_check
    from kforge_desktop.search.scaffold import PRELUDE

    parent = next(e for e in load_exemplars("cpp") if e.name == "group_norm").code
    helpers = [it.name for it in split_items(parent) if it.kind == "function" and it.name != "kernel_forward"]
    assert {"sum_of", "sq_dev_of"} <= set(helpers)
    entry = next(it.text for it in split_items(parent) if it.name == "kernel_forward")
    call = next(line for line in entry.split("\n") if "sum_of(" in line and "mean" in line)
    stats = ("static inline float group_mean(const float* v, int64_t n) {\n"
             "    return sum_of(v, n) / (float)n;\n}\n")
    new_entry = entry.replace(call, call.split("=")[0] + "= group_mean(x + base, count);")
    merged = merge_functions(parent, stats + "\n" + new_entry)
    names = [it.name for it in split_items(merged) if it.kind == "function"]
    assert names.index("sum_of") < names.index("group_mean") < names.index("kernel_forward")
    assert syntax_check(PRELUDE["cpp"] + "\n" + merged, "cpp") is None


def test_clean_kernel_makes_the_entry_point_extern_c_and_drops_torch():
    code = "#include <torch/extension.h>\nvoid kernel_forward(const float* x, float* out, int64_t n) { }\n"
    cleaned = clean_kernel(code)
    assert 'extern "C" void kernel_forward(' in cleaned and "torch" not in cleaned


def test_an_answer_that_opens_a_second_code_block_inside_the_first_still_builds():
    from kforge_desktop.kernels.native import syntax_check
    from kforge_desktop.search.scaffold import PRELUDE

    # what the small model wrote on cumsum_rows: its includes, then a second fence, then the kernel
    answer = ("Here is the kernel:\n```cpp\n#include <cmath>\n#include <cstdint>\n```cpp\n\n"
              'extern "C" void kernel_forward(const float* x, float* out, int64_t n) {\n'
              "    for (int64_t i = 0; i < n; ++i) out[i] = std::fabs(x[i]);\n}\n```\n")
    code = kernel_from_answer(answer)
    assert "```" not in code and "kernel_forward" in code
    assert syntax_check(PRELUDE["cpp"] + "\n" + code, "cpp") is None


def test_prompts_carry_the_signature_exemplar_and_failures_and_fit_the_context():
    problem = load_problem(PROBLEMS / "rms_norm.py")
    s = build_scaffold(problem)
    ctx = prompts.PromptContext(kind="whole", language="cpp", problem_source=problem.source, device="CPU: test",
                                signature=s.signature(), arguments=s.describe_args(), directive="be correct",
                                failed=("simd: incorrect",), exemplar="int exemplar_code;", exemplar_about="rms")
    system, user = prompts.render(ctx)
    assert "C++" in system and s.signature() in user and "int exemplar_code;" in user and "simd: incorrect" in user

    def words(text: str) -> int:
        return len(text.split())

    full = words(system) + words(user) + 16
    margin = 64  # fit's default headroom
    same, trimmed = prompts.fit(ctx, words, context_size=full + 100 + margin, max_tokens=100)
    assert trimmed == () and same == ctx
    small, trimmed = prompts.fit(ctx, words, context_size=full + 100 + margin - 3, max_tokens=100)
    assert trimmed[0] == "failed" and small.exemplar == ctx.exemplar  # the cheapest cut comes first
    tiny, trimmed = prompts.fit(ctx, words, context_size=full + margin + 60 - 30, max_tokens=60)
    assert list(trimmed) == list(prompts.TRIM_ORDER[: len(trimmed)]) and s.signature() in prompts.render(tiny)[1]
    with pytest.raises(prompts.PromptTooLong):
        prompts.fit(ctx, words, context_size=50, max_tokens=10)


def test_repair_feedback_quotes_the_compiler_error_or_the_mismatch():
    from kforge_desktop.kernels.verdict import Verdict

    log = "kernel.cpp: In function 'x':\nkernel.cpp:3:5: error: 'std::rsqrt' was not declared\n  3 | std::rsqrt(x)\n"
    text = prompts.verdict_feedback(Verdict("compile_error", "bad", log=log))
    assert "std::rsqrt" in text and "error" in text
    text = prompts.verdict_feedback(Verdict("incorrect", "values differ", max_abs_err=0.5, rel_l2_err=0.2))
    assert "0.5" in text and "0.2" in text
    # a crash or a timeout says what usually causes it, not only the signal
    text = prompts.verdict_feedback(Verdict("crashed", "the worker process died running the candidate (SIGSEGV)"))
    assert "SIGSEGV" in text and "outside an array" in text and "smaller than the input" in text
    assert "never ends" in prompts.verdict_feedback(Verdict("timeout", "ran past 60 s"))


def test_functions_nothing_calls_are_pruned():
    code = ("#include <cmath>\nstatic float sq(float v) { return v * v; }\n"
            "extern \"C\" void kernel_forward(const float* x, float* out, int64_t n) { for (int64_t i = 0; i < n; ++i) "
            "out[i] = sq(x[i]); }\nvoid test_kernel() { float a[1]; kernel_forward(a, a, 1); }\n"
            "int main() { test_kernel(); return 0; }\n")
    pruned = prune_unreachable(code)
    names = [it.name for it in split_items(pruned) if it.kind == "function"]
    assert names == ["sq", "kernel_forward"] and "#include <cmath>" in pruned
    assert prune_unreachable(pruned) == pruned

    # a CUDA kernel reached through its pointer (the GroupNorm exemplar's cluster launch) stays: before, every
    # edit of that seed's entry point lost its kernel and failed to build
    launch = ("__global__ void parts(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x]; }\n"
              'extern "C" void kernel_forward(const float* x, float* y, int64_t n, cudaStream_t stream) {\n'
              "    cudaLaunchConfig_t config = {};\n    cudaFuncSetAttribute(parts, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);\n"
              "    cudaLaunchKernelEx(&config, parts, x, y);\n}\n")
    assert prune_unreachable(launch) == launch


def test_the_const_pointer_error_is_fixed_mechanically_and_nothing_else_is():
    from kforge_desktop.csource.autofix import autofix_const
    from kforge_desktop.kernels.native import syntax_check
    from kforge_desktop.search.scaffold import PRELUDE

    kernel = ('extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols) {\n'
              "    for (int64_t r = 0; r < rows; ++r) {\n"
              "        float* xr = x + r * cols;\n"
              "        for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = xr[c];\n"
              "    }\n}\n")
    err = syntax_check(PRELUDE["cpp"] + "\n" + kernel, "cpp")
    assert err and "invalid conversion" in err
    fixed = autofix_const(kernel, PRELUDE["cpp"], err)
    assert "const float* xr = x + r * cols;" in fixed
    assert syntax_check(PRELUDE["cpp"] + "\n" + fixed, "cpp") is None
    other = fixed.replace("= xr[c];", "= std::rsqrt(xr[c]);")  # an error of another kind
    err = syntax_check(PRELUDE["cpp"] + "\n" + other, "cpp")
    assert err and autofix_const(other, PRELUDE["cpp"], err) is None


def test_autofix_repairs_the_typical_small_model_mistakes_until_it_compiles():
    from kforge_desktop.csource.autofix import autofix
    from kforge_desktop.kernels.native import syntax_check
    from kforge_desktop.search.scaffold import PRELUDE

    kernel = ('extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols) {\n'
              "    #pragma omp parallel for collapse(2)\n"
              "    for (int64_t r = 0; r < rows; ++r) {\n"
              "        float* xr = x + r * cols;\n"
              "        float s = row_sum(xr, cols);\n"
              "        for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = xr[c] * std::rsqrt(s + 1.0f) * std::pi;\n"
              "    }\n}\n"
              "static inline float row_sum(const float* xr, int64_t cols) {\n"
              "    float s = 0.0f;\n    for (int64_t c = 0; c < cols; ++c) s += xr[c];\n    return s;\n}\n")
    fixes: list[str] = []
    for _ in range(3):
        err = syntax_check(PRELUDE["cpp"] + "\n" + kernel, "cpp")
        if err is None:
            break
        fixed = autofix(kernel, PRELUDE["cpp"], err)
        assert fixed is not None, err
        kernel, notes = fixed
        fixes += notes
    assert syntax_check(PRELUDE["cpp"] + "\n" + kernel, "cpp") is None
    assert set(fixes) == {"collapse clause", "forward declarations", "rsqrt", "pi", "const pointers"}
    assert "(1.0f / std::sqrt(s + 1.0f))" in kernel and "collapse" not in kernel


def test_autofix_drops_a_rejected_openmp_pragma_and_a_repeated_const():
    """Two mistakes the default model made in measured searches: an array in an OpenMP reduction
    clause, and ``const float const``. Without the pragma the loop is still correct."""
    from kforge_desktop.csource.autofix import autofix
    from kforge_desktop.kernels.native import syntax_check
    from kforge_desktop.search.scaffold import PRELUDE

    kernel = ("static inline float row_sumsq(const float* xr, int64_t cols) {\n"
              "    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};\n"
              "    #pragma omp simd reduction(+ : s[0], s[1], s[2], s[3])\n"
              "    for (int64_t c = 0; c < cols; ++c) s[c % 4] += xr[c] * xr[c];\n"
              "    const float const t = (s[0] + s[1]) + (s[2] + s[3]);\n"
              "    return t;\n}\n"
              'extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols) {\n'
              "    for (int64_t r = 0; r < rows; ++r) out[r] = row_sumsq(x + r * cols, cols);\n}\n")
    fixes: list[str] = []
    for _ in range(3):
        err = syntax_check(PRELUDE["cpp"] + "\n" + kernel, "cpp")
        if err is None:
            break
        kernel, notes = autofix(kernel, PRELUDE["cpp"], err)
        fixes += notes
    assert syntax_check(PRELUDE["cpp"] + "\n" + kernel, "cpp") is None
    assert "OpenMP pragma" in fixes and "duplicate const" in fixes and "reduction" not in kernel


def test_autofix_declares_a_loop_variable_the_tail_loop_uses_and_drops_the_pragma_it_breaks():
    """The default model's unrolled sum of squares, as it wrote it twice in a measured search (and
    repeated it unchanged when asked to repair it): the four accumulators are right, but ``c`` is
    declared inside the main loop and the old ``omp simd`` pragma no longer fits that loop."""
    from kforge_desktop.csource.autofix import autofix
    from kforge_desktop.kernels.native import build_native, syntax_check
    from kforge_desktop.search.scaffold import PRELUDE

    kernel = ("static inline float row_sumsq(const float* xr, int64_t cols) {\n"
              "    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;\n"
              "    #pragma omp simd reduction(+ : s0, s1, s2, s3)\n"
              "    for (int64_t c = 0; c + 4 <= cols; c += 4) {\n"
              "        s0 += xr[c] * xr[c];\n        s1 += xr[c + 1] * xr[c + 1];\n"
              "        s2 += xr[c + 2] * xr[c + 2];\n        s3 += xr[c + 3] * xr[c + 3];\n    }\n"
              "    for (; c < cols; ++c) s0 += xr[c] * xr[c];  // the tail\n"
              "    return (s0 + s1) + (s2 + s3);\n}\n"
              'extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols) {\n'
              "    for (int64_t r = 0; r < rows; ++r) out[r] = row_sumsq(x + r * cols, cols);\n}\n")
    err = syntax_check(PRELUDE["cpp"] + "\n" + kernel, "cpp")
    assert "invalid controlling predicate" in err and "was not declared" in err
    fixed, notes = autofix(kernel, PRELUDE["cpp"], err)
    assert set(notes) == {"OpenMP pragma", "loop variable declared before its loop"}
    assert syntax_check(PRELUDE["cpp"] + "\n" + fixed, "cpp") is None
    lib = build_native(PRELUDE["cpp"] + "\n" + fixed, "cpp")
    x = torch.randn(3, 23)  # 23: the tail loop runs
    out = torch.empty(3)
    lib.kernel_forward(x, out, 3, 23)
    torch.testing.assert_close(out, (x * x).sum(1))
    # the same, written from the pattern but without its `int64_t c = 0;`: declared before the first loop
    bare = fixed.replace("    int64_t c = 0;\n", "")
    err = syntax_check(PRELUDE["cpp"] + "\n" + bare, "cpp")
    assert err.count("was not declared") == 2
    again, notes = autofix(bare, PRELUDE["cpp"], err)
    assert notes == ["loop variable declared before its loop"] and again.count("int64_t c = 0;") == 1
    assert again.index("int64_t c = 0;") < again.index("for (; c + 4 <= cols")
    assert syntax_check(PRELUDE["cpp"] + "\n" + again, "cpp") is None


def test_autofix_makes_a_helper_void_when_it_returns_nothing_and_keeps_a_self_made_rsqrt():
    """The default model's straightforward RMSNorm: its own ``rsqrt`` helper (fine) and a ``float``
    scale_row with no return whose value no caller reads (a crash at run time, an error at build)."""
    from kforge_desktop.csource.autofix import autofix
    from kforge_desktop.kernels.native import syntax_check
    from kforge_desktop.search.scaffold import PRELUDE

    kernel = ("static inline float rsqrt(float x) {\n    return 1.0f / std::sqrt(x);\n}\n\n"
              "static inline float scale_row(const float* xr, float scale, float* yr, int64_t cols) {\n"
              "    for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * scale;\n}\n\n"
              'extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols) {\n'
              "    for (int64_t r = 0; r < rows; ++r) {\n"
              "        scale_row(x + r * cols, rsqrt((float)cols), out + r * cols, cols);\n    }\n}\n")
    err = syntax_check(PRELUDE["cpp"] + "\n" + kernel, "cpp")
    assert "no return statement" in err
    fixed, notes = autofix(kernel, PRELUDE["cpp"], err)
    assert notes == ["void return type"] and "static inline void scale_row(" in fixed
    assert "static inline float rsqrt(float x)" in fixed
    assert syntax_check(PRELUDE["cpp"] + "\n" + fixed, "cpp") is None
    used = kernel.replace("        scale_row(", "        float v = scale_row(").replace("cols);\n    }", "cols); (void)v;\n    }")
    err = syntax_check(PRELUDE["cpp"] + "\n" + used, "cpp")
    assert autofix(used, PRELUDE["cpp"], err) is None  # a caller reads the value: that needs a person, not a fix


def test_autofix_makes_a_helper_parameter_const_when_a_const_input_is_passed_to_it():
    from kforge_desktop.csource.autofix import autofix
    from kforge_desktop.kernels.native import syntax_check
    from kforge_desktop.search.scaffold import PRELUDE

    kernel = ("static inline float row_sum(float* xr, float* yr, int64_t cols) {\n"
              "    float s = 0.0f;\n    for (int64_t c = 0; c < cols; ++c) { yr[c] = xr[c]; s += xr[c]; }\n"
              "    return s;\n}\n"
              'extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols) {\n'
              "    for (int64_t r = 0; r < rows; ++r) {\n        const float* xr = x + r * cols;\n"
              "        const float s = row_sum(xr, out + r * cols, cols);\n        out[r * cols] += s;\n    }\n}\n")
    err = syntax_check(PRELUDE["cpp"] + "\n" + kernel, "cpp")
    assert "initializing argument 1" in err
    fixed, notes = autofix(kernel, PRELUDE["cpp"], err)
    assert notes == ["const pointers"] and "row_sum(const float* xr, float* yr, int64_t cols)" in fixed
    assert syntax_check(PRELUDE["cpp"] + "\n" + fixed, "cpp") is None


def test_autofix_makes_a_pointer_into_the_output_writable_instead_of_the_helpers_that_write_it(build_cache):
    """Recorded on dev/causal_scaled_softmax: the output row declared `const float* yr = out + ...`
    and passed to two helpers that write it. Making their parameters const (the fix for a const
    input) cannot compile; the const of the output pointer is what goes, and the kernel is right."""
    from kforge_desktop.csource.autofix import autofix
    from kforge_desktop.kernels.native import syntax_check
    from kforge_desktop.search.scaffold import PRELUDE

    kernel = ("static inline float exp_row(const float* xr, float* yr, int64_t n) {\n    float s = 0.0f;\n"
              "    for (int64_t c = 0; c < n; ++c) { yr[c] = std::exp(xr[c]); s += yr[c]; }\n    return s;\n}\n"
              "static inline void scale_row(float* yr, float k, int64_t n) {\n"
              "    for (int64_t c = 0; c < n; ++c) yr[c] *= k;\n}\n"
              'extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols) {\n'
              "    for (int64_t r = 0; r < rows; ++r) {\n        const float* xr = x + r * cols;\n"
              "        const float* yr = out + r * cols;\n        const float s = exp_row(xr, yr, cols);\n"
              "        scale_row(yr, 1.0f / s, cols);\n    }\n}\n")
    err = syntax_check(PRELUDE["cpp"] + "\n" + kernel, "cpp")
    assert err.count("invalid conversion from") == 2
    fixed, notes = autofix(kernel, PRELUDE["cpp"], err)
    assert notes == ["const dropped from a pointer into the output"], notes
    assert "        float* yr = out + r * cols;" in fixed and "const float* xr = x + r * cols;" in fixed
    assert "exp_row(const float* xr, float* yr" in fixed and "scale_row(float* yr" in fixed
    assert syntax_check(PRELUDE["cpp"] + "\n" + fixed, "cpp") is None
    softmax = load_problem(PROBLEMS / "softmax.py")  # what the fixed kernel computes, built for real
    ref, got = _outputs(softmax, build_scaffold(softmax), fixed, "unconst_out")
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-4)


def test_autofix_declares_the_tile_size_the_blocking_pattern_uses_and_keeps_the_parallel_loop():
    """cache_blocking's pattern declares `const int64_t tile = 8;`; the default model used `tile`
    without it in 7 of 25 compile errors of the measured searches."""
    from kforge_desktop.csource.autofix import autofix
    from kforge_desktop.kernels.native import syntax_check
    from kforge_desktop.search.scaffold import PRELUDE

    kernel = ('extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols) {\n'
              "    #pragma omp parallel for schedule(static)\n"
              "    for (int64_t r0 = 0; r0 < rows; r0 += tile) {\n"
              "        const int64_t r1 = std::min(rows, r0 + tile);\n"
              "        for (int64_t r = r0; r < r1; ++r) out[r] = x[r * cols];\n    }\n}\n")
    err = syntax_check(PRELUDE["cpp"] + "\n" + kernel, "cpp")
    fixed, notes = autofix(kernel, PRELUDE["cpp"], err)
    assert notes == ["`tile` declared"] and fixed.count("const int64_t tile = 8;") == 1
    assert "#pragma omp parallel for" in fixed  # the loop is canonical again: its pragma stays
    assert syntax_check(PRELUDE["cpp"] + "\n" + fixed, "cpp") is None


def test_autofix_unconsts_an_assigned_accumulator_and_drops_an_unused_pasted_declaration(build_cache):
    """Two unroll edits of GroupNorm's helpers by the default model (recorded): four accumulators
    declared `const` and then added to, and a line pasted from the entry point whose names do not
    exist in the helper and whose variable nothing reads. Both compile after the fixes, and both are
    correct GroupNorm + SiLU kernels."""
    from kforge_desktop.csource.items import function_text
    from kforge_desktop.search.answers import autofix_kernel
    from kforge_desktop.search.exemplars import provide_helpers

    problem = load_problem(PROBLEMS / "group_norm_silu.py")
    scaffold = build_scaffold(problem)
    complete = provide_helpers(_with_silu(_group_norm_seed(problem, scaffold)), "cpp")[0]
    const_sum = ("static inline float sum_of(const float* v, int64_t n) {\n    const float s0 = v[0];\n"
                 "    const float s1 = v[1];\n    const float s2 = v[2];\n    const float s3 = v[3];\n"
                 "    int64_t c = 4;\n    for (; c + 4 <= n; c += 4) {\n        s0 += v[c];\n        s1 += v[c + 1];\n"
                 "        s2 += v[c + 2];\n        s3 += v[c + 3];\n    }\n    for (; c < n; ++c) s0 += v[c];  // the tail\n"
                 "    return (s0 + s1) + (s2 + s3);\n}")
    pasted = ("static inline float sq_dev_of(const float* v, float mean, int64_t n) {\n"
              "    const int64_t count = per_group * spatial;\n    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;\n"
              "    int64_t c = 0;\n    for (; c + 4 <= n; c += 4) {\n        s0 += (v[c] - mean) * (v[c] - mean);\n"
              "        s1 += (v[c + 1] - mean) * (v[c + 1] - mean);\n        s2 += (v[c + 2] - mean) * (v[c + 2] - mean);\n"
              "        s3 += (v[c + 3] - mean) * (v[c + 3] - mean);\n    }\n"
              "    for (; c < n; ++c) s0 += (v[c] - mean) * (v[c] - mean);  // the tail\n"
              "    return (s0 + s1) + (s2 + s3);\n}")
    for name, answer, note in (("sum_of", const_sum, "const dropped from an assigned variable"),
                               ("sq_dev_of", pasted, "unused declaration dropped")):
        kernel = merge_functions(complete, answer)
        fixed, notes = autofix_kernel(scaffold, kernel)
        assert note in notes, notes
        helper = function_text(fixed, name)
        assert "count" not in helper and "const float s0" not in helper and helper.count("s0 +=") == 2
        assert torch.allclose(*_outputs(problem, scaffold, fixed, f"gn_{name}"), atol=1e-5, rtol=1e-4)
    # a declared variable the function reads is not dropped (the kernel stays broken: no fix is kept)
    used = pasted.replace("return (s0 + s1) + (s2 + s3);", "return (s0 + s1) + (s2 + s3) + (float)count;")
    fixed, notes = autofix_kernel(scaffold, merge_functions(complete, used))
    assert notes == "" and "count = per_group" in function_text(fixed, "sq_dev_of")


def test_the_whole_kernel_prompt_names_what_the_exemplar_leaves_out():
    from kforge_desktop.search.prompting import with_differences

    problem = load_problem(PROBLEMS / "group_norm_silu.py")
    s = build_scaffold(problem)
    ex = exemplar_named("group_norm", "cpp")
    code = adapt(ex, s, problem.source)
    ctx = prompts.PromptContext(kind="whole", language="cpp", problem_source=problem.source, signature=s.signature(),
                                arguments=s.describe_args(), exemplar=code, exemplar_about=ex.about,
                                directive="Write a straightforward, correct kernel first.")
    user = prompts.render(with_differences(ctx, ex, s, problem.source, "cpp"))[1]
    assert "does not compute silu (of a value v: v / (1.0f + fast_exp(-v))" in user and code.strip() in user


def test_a_seed_is_never_placed_where_the_exemplar_leaves_out_more_than_an_epilogue():
    """Pooling or attention targets once got a norm/softmax exemplar as a seed; it wrote past their
    smaller output and crashed the worker. Only exemplars covering the chain (up to a final
    elementwise activation) become seeds."""
    import textwrap

    from kforge_desktop.problem.problem import Problem

    src = textwrap.dedent('''
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self):
                super().__init__()

            def forward(self, x):
                return torch.softmax(x, dim=-1).sum(-1)

        def get_inputs():
            return [torch.randn(16, 64)]

        def get_init_inputs():
            return []
    ''')
    problem = Problem(name="softmax_sum", source=src, path=None)
    scaffold = build_scaffold(problem)
    assert scaffold.aten_ops == ("softmax", "sum")
    assert not [ex.name for ex, _ in seed_exemplars(scaffold, src) if ex.name == "row_softmax"]


def test_an_epsilon_written_as_a_literal_still_gets_the_exemplar_as_a_seed(build_cache):
    """Whole-model targets often write ``+ 1e-6`` in forward instead of keeping self.eps: the RMSNorm
    exemplar's eps becomes a constant in the adapted kernel, which builds and matches the reference."""
    import textwrap

    from kforge_desktop.problem.problem import Problem

    src = textwrap.dedent('''
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.weight = nn.Parameter(torch.ones(dim) + 0.1 * torch.randn(dim))

            def forward(self, x):
                return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight

        def get_inputs():
            return [torch.randn(8, 64)]

        def get_init_inputs():
            return [64]
    ''')
    problem = Problem(name="rms_literal", source=src, path=None)
    scaffold = build_scaffold(problem)
    seeds = seed_exemplars(scaffold, src)
    assert seeds and seeds[0][0].name == "rms_norm"
    code = seeds[0][1]
    assert "const float eps = 1e-06f;" in code
    module = types.ModuleType("seed_rms_literal")
    exec(compile(scaffold.module_source(code), "seed", "exec"), module.__dict__)  # our own exemplar, built for real
    ref_mod = problem.load_module()
    torch.manual_seed(1)
    ref = ref_mod.Model(64)
    torch.manual_seed(1)
    new = module.ModelNew(64)
    x = torch.randn(8, 64)
    assert torch.allclose(ref(x), new(x), atol=1e-5, rtol=1e-5)


FUNCTIONAL_GROUP_NORM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, weight, bias):
        return {body}

def get_inputs():
    return [torch.randn(2, 32, 5, 7), 1 + 0.1 * torch.randn(32), 0.1 * torch.randn(32)]

def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("body,want", [
    ("torch.nn.functional.group_norm(x, 8, weight, bias, 1e-05)", "group_norm"),
    ("torch.nn.functional.silu(torch.nn.functional.group_norm(x, 8, weight, bias, 1e-05))", "group_norm_silu"),
])
def test_a_group_norm_a_model_calls_as_a_function_gets_its_own_exemplar_as_a_seed(body, want, build_cache):
    """A whole-model target passes the norm's weight and bias as inputs and writes the group count and
    eps as literals (``group_norm(x, 8, weight, bias, 1e-05)``). It still gets the (batch, channels,
    spatial) layout, the group count as a constant, and the exemplar of exactly what it computes: never
    GroupNorm + SiLU for a plain GroupNorm (that seed is wrong)."""
    from kforge_desktop.problem.problem import Problem

    src = FUNCTIONAL_GROUP_NORM.format(body=body)
    problem = Problem(name=f"fn_{want}", source=src, path=None)
    scaffold = build_scaffold(problem)
    assert scaffold.layout == "channels"
    seeds = seed_exemplars(scaffold, src, memory=False)
    assert [ex.name for ex, _ in seeds] == [want]
    code = seeds[0][1]
    assert "const int64_t num_groups = 8;" in code and "const float eps = 1e-05f;" in code
    ref, new = _outputs(problem, scaffold, code, f"seed_fn_{want}")
    assert torch.allclose(ref, new, atol=1e-5, rtol=1e-4)


def test_an_add_gets_no_bias_activation_exemplar_as_a_seed():
    """A residual add once got the bias + GELU exemplar as its seed (it fits the signature): a wrong
    first node. An exemplar that applies an activation the problem lacks is no seed."""
    from kforge_desktop.problem.problem import Problem

    src = FUNCTIONAL_GROUP_NORM.replace("def forward(self, x, weight, bias):\n        return {body}",
                                        "def forward(self, x, y):\n        return x + y").replace(
        "return [torch.randn(2, 32, 5, 7), 1 + 0.1 * torch.randn(32), 0.1 * torch.randn(32)]",
        "return [torch.randn(64, 128), torch.randn(64, 128)]")
    problem = Problem(name="add", source=src, path=None)
    scaffold = build_scaffold(problem)
    assert [ex.name for _score, ex, _code in rank(scaffold, src, memory=False)][:1] in (["bias_gelu_erf"], ["gelu_bias"])
    assert seed_exemplars(scaffold, src, memory=False) == []


def _problem(name: str, forward: str, inputs: str, init: str = ""):
    import textwrap

    from kforge_desktop.problem.problem import Problem

    src = textwrap.dedent(f'''
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                {init or "pass"}

            def forward(self, x):
                return {forward}

        def get_inputs():
            return [{inputs}]

        def get_init_inputs():
            return []
    ''')
    return Problem(name=name, source=src, path=None), src


def test_a_reduction_is_shown_a_kernel_that_writes_one_value_per_row_and_a_pooling_no_unrelated_one():
    """A per-row variance was shown the row softmax (it writes a whole row per row) and a pooling the
    bias + GELU kernel: the model copied them and wrote past the smaller output, crashing its worker.
    The example now writes as many values as the problem's output holds, or there is none."""
    from kforge_desktop.search.exemplars import best_exemplar

    problem, src = _problem("var_rows", "torch.var(x, dim=-1)", "torch.randn(64, 32)")
    shown = best_exemplar(build_scaffold(problem), src, memory=False)
    assert shown is not None and shown[0].name == "row_sum"
    problem, src = _problem("pool", "self.pool(x)", "torch.randn(2, 4, 8, 8)", init="self.pool = nn.AvgPool2d(2)")
    assert best_exemplar(build_scaffold(problem), src, memory=False) is None


def test_an_output_of_another_shape_gets_every_size_of_the_input_and_the_output():
    """Rows and cols cannot index a 2x2 pooling of an NCHW map: the kernel gets each dimension of x and
    of out, and is told how many values out holds."""
    problem, _ = _problem("pool", "self.pool(x)", "torch.randn(2, 4, 8, 8)", init="self.pool = nn.AvgPool2d(2)")
    scaffold = build_scaffold(problem)
    names = [a.name for a in scaffold.args]
    assert [f"x_size{i}" for i in range(4)] + [f"out_size{i}" for i in range(4)] == names[-8:]
    assert "out holds 128 values" in scaffold.describe_args() and "nothing past out[127]" in scaffold.describe_args()
    # a like-input or per-row output keeps the plain signature
    for forward in ("torch.softmax(x, dim=-1)", "x.sum(-1)"):
        plain = build_scaffold(_problem("plain", forward, "torch.randn(2, 4, 8)")[0])
        assert not any(a.name.startswith(("x_size", "out_size")) for a in plain.args)


def test_autofix_moves_a_reciprocal_taken_before_the_loop_that_sets_its_value_after_that_value(tmp_path, build_cache):
    """Asked to take a row's reciprocal once before the loop over its values, the default model put it at the top of
    the entry point, before the loop over the rows that sets the value (recorded: dev/l2_normalize, 8 of 16 such
    edits did not compile: "'v_clamp' was not declared in this scope"). The declaration moves to just after the
    value it uses, and the kernel is a correct L2 normalization; a declaration something reads before that point
    stays where it is (the kernel stays broken: no fix is kept)."""
    from kforge_desktop.csource.items import function_text
    from kforge_desktop.search.answers import autofix_kernel
    from kforge_desktop.search.setup import seed_kernels

    path = tmp_path / "l2.py"
    path.write_text("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
                    "class Model(nn.Module):\n    def forward(self, emb):\n        return F.normalize(emb, dim=-1)\n\n\n"
                    "def get_inputs():\n    return [torch.randn(16, 96)]\n\n\ndef get_init_inputs():\n    return []\n")
    problem = load_problem(path)
    scaffold = build_scaffold(problem)
    [(directive, seed, _)] = list(seed_kernels(problem, scaffold, memory=False))
    assert directive == "lowered" and "/ v_expand" in seed
    answer = ('extern "C" void kernel_forward(const float* emb, float* out, int64_t rows, int64_t cols) {\n'
              "    const float inv_v_clamp = 1.0f / v_clamp;  // new: once, here\n"
              "    #pragma omp parallel for schedule(static)\n    for (int64_t r = 0; r < rows; ++r) {\n"
              "        const float v_sum_1 = row_sum(emb, r, cols);\n        const float v_pow_2 = sqrtf(v_sum_1);\n"
              "        const float v_clamp = ((v_pow_2 > 1e-12f || v_pow_2 != v_pow_2) ? v_pow_2 : 1e-12f);\n"
              "        for (int64_t c = 0; c < cols; ++c) {\n            const float v_expand = v_clamp;\n"
              "            const float v_div = (emb[r * cols + c] * inv_v_clamp);\n"
              "            out[r * cols + c] = v_div;\n        }\n    }\n}")  # recorded (l2_normalize, answer 0)
    fixed, notes = autofix_kernel(scaffold, merge_functions(seed, answer))
    assert "declaration moved after the value it uses" in notes, notes
    entry = [line.strip() for line in function_text(fixed, "kernel_forward").split("\n") if line.strip()]
    at = entry.index("const float inv_v_clamp = 1.0f / v_clamp;  // new: once, here")
    assert entry[at - 1].startswith("const float v_clamp =") and entry[at + 1].startswith("for (int64_t c = 0")
    ref, new = _outputs(problem, scaffold, fixed, "l2_moved_reciprocal")
    assert torch.allclose(ref, new, atol=1e-6, rtol=1e-5)
    # read before the value is set: moving it would change what that read sees, so it stays (and nothing is kept)
    early = answer.replace("    #pragma omp parallel for", "    out[0] = inv_v_clamp;\n    #pragma omp parallel for")
    fixed, notes = autofix_kernel(scaffold, merge_functions(seed, early))
    assert "declaration moved" not in notes and "1.0f / v_clamp;  // new: once, here\n    out[0]" in fixed
