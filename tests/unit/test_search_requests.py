"""The requests worded in a kernel's own names (``search/requests.py``): the single-pass request's statistics, the
reference-maximum pattern (its values checked by the evaluator in place of the seed's lines) and the hoisting
request's division."""

from __future__ import annotations

import random
import re
from pathlib import Path

from kforge_desktop.problem.problem import load_problem
from kforge_desktop.search.config import SearchConfig
from kforge_desktop.search.setup import create_session
from kforge_desktop.store import SessionStore


def test_the_single_pass_request_names_the_kernels_own_statistics(tmp_path):
    """Shown "e.g. sum and sum of squares together, or an online max-and-sum", the default model added a sum of
    squares to a log-softmax and its output went NaN: asked of a lowered log-softmax, the request names that
    kernel's maximum and sum of exponentials and writes out the online update; asked of a kernel of two sums,
    it names those two and says nothing of exponentials."""
    from kforge_desktop.search.directives import directive_by_key
    from kforge_desktop.search.planner import edit_expansion, kernel_functions
    from kforge_desktop.search.requests import single_pass_text

    path = tmp_path / "logsm.py"
    path.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                    "    def forward(self, x):\n        return torch.log_softmax(x, dim=-1)\n\n\n"
                    "def get_inputs():\n    return [torch.randn(8, 64)]\n\n\ndef get_init_inputs():\n    return []\n")
    store = SessionStore(tmp_path / "t.kforge")
    pid = create_session(store, load_problem(path), SearchConfig(strategy="mcts", budget_candidates=5, seeds=True))
    seed = next(n for n in store.nodes(pid) if n.origin == "seed")
    functions = kernel_functions(seed.kernel_source, "cpp")
    exp = edit_expansion(seed.id, functions, directive_by_key("cpp", "single_pass"), "cpp", random.Random(0), {})
    text = exp.directive_text
    maxima = re.findall(r"the maximum `(\w+)`", text)
    kernel = "\n".join(f for _, f in functions)
    assert maxima and re.search(rf"\b{maxima[0]}\b\s*=\s*[^;]*>\s*{maxima[0]}", kernel)  # the kernel's own maximum
    assert exp.target == "kernel_forward" and re.search(rf"\b{maxima[0]}\b", dict(functions)[exp.target])
    # the kernel's own exp: a lowered log-softmax's is fast_exp_neg (its argument, v - m_new, is never positive)
    assert "fast_exp_neg(v - m_new)" in text and "No `#pragma omp simd` on that loop" in text
    assert "squares" not in text
    two_sums = ("extern \"C\" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols) {\n"
                "  for (int64_t r = 0; r < rows; ++r) {\n    float s = 0.0f, q = 0.0f;\n"
                "    for (int64_t c = 0; c < cols; ++c) s += x[r * cols + c];\n"
                "    for (int64_t c = 0; c < cols; ++c) q += x[r * cols + c] * x[r * cols + c];\n"
                "    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = x[r * cols + c] * q - s;\n  }\n}\n")
    text = single_pass_text(two_sums)
    assert "`s`, `q` in ONE loop" in text and "exp" not in text



DEV = Path(__file__).resolve().parents[2] / "benchmarks" / "problems_generalize" / "dev"


def _fenced(text: str) -> str:
    return re.search(r"```cpp\n(.*?)```", text, re.S).group(1)


FAR_MAXIMUM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.log_softmax(x, dim=-1)


def get_inputs():
    x = torch.randn(64, 640)
    x[::2, 400] = 100.0  # every other row's maximum, far above its first values
    return [x]


def get_init_inputs():
    return []
"""


# a logsumexp takes its exps at ``where(|max| == inf, 0, max)``: rows far above their first values, rows that start
# with -inf and lie far below 0 (the reference's guard is 0: the sum is taken again at the row's maximum), a row of
# -inf and one with +inf
GUARDED_MAXIMUM = FAR_MAXIMUM.replace("torch.log_softmax(x", "torch.logsumexp(x").replace(
    "    return [x]\n", '    x[1::4] -= 200.0\n    x[1::4, :64] = -float("inf")\n    x[3, :] = -float("inf")\n'
    '    x[7, 500] = float("inf")\n    return [x]\n', 1)


def _reference_kernel(problem, index: int = 0):
    """The problem's seed ``index`` and that seed with the reference-maximum request's pattern in place of its
    two calls, with the scaffold."""
    from kforge_desktop.csource.comments import strip_cpp_comments
    from kforge_desktop.search.applicability import applicable, reference_parts
    from kforge_desktop.search.directives import directive_by_key
    from kforge_desktop.search.planner import edit_expansion, kernel_functions
    from kforge_desktop.search.requests import AS_BEFORE
    from kforge_desktop.search.scaffold import build_scaffold
    from kforge_desktop.search.setup import seed_kernels

    scaffold = build_scaffold(problem, "cpp")
    _directive, kernel, _note = seed_kernels(problem, scaffold, memory=False)[index]
    functions = kernel_functions(kernel, "cpp")
    assert applicable("reference_max", kernel) and not applicable("single_pass", kernel)
    exp = edit_expansion(1, functions, directive_by_key("cpp", "reference_max"), "cpp", random.Random(0), {})
    assert exp.target == "kernel_forward"
    pattern, _, after = _fenced(exp.directive_text).partition(AS_BEFORE)
    calls = reference_parts(kernel).calls
    assert calls in kernel and pattern.count("#pragma omp simd") == 3
    # the lines after the calls are shown as they are, each one of the kernel's, the output's stores among them
    rest = strip_cpp_comments(kernel.split(calls)[1])
    assert after.strip() and all(ln.strip() in rest for ln in after.splitlines())
    assert re.search(r"\b(out|yr)\b", after)
    return scaffold, kernel, kernel.replace(calls, pattern, 1)


def test_the_reference_maximum_pattern_computes_what_the_seed_computes(tmp_path):
    """The reference-maximum request shows a softmax-family kernel's row maximum fused into the loop that sums the
    exps: the exps at the maximum of the row's first values, the row's maximum taken in the same SIMD loop, and the
    sum taken again at that maximum only where it lies far above the reference. The pattern is the model's to copy:
    put in place of the seed's two calls it must give the reference's output on every row: lowered seeds (a
    log-softmax, a smoothed cross-entropy, a padding-masked softmax, whose masked values come in both loops) and an
    exemplar whose loop stores the exps as it sums them and whose helpers name the row length otherwise than the
    call (the causal softmax's ``n`` is its ``valid``). Where a row's maximum lies far above its first values the
    sum must be taken again: without that, wrong values."""
    from kforge_desktop.kernels.evaluator import Evaluator
    from kforge_desktop.kernels.options import EvalOptions
    from kforge_desktop.search.applicability import applicable
    from kforge_desktop.search.scaffold import build_scaffold
    from kforge_desktop.search.setup import seed_kernels

    quick = EvalOptions(compare_compile=False, timed_runs=3, warmup_runs=1)
    far, guarded = tmp_path / "far_maximum.py", tmp_path / "guarded_maximum.py"
    far.write_text(FAR_MAXIMUM)
    guarded.write_text(GUARDED_MAXIMUM)
    with Evaluator(device="cpu", workers=1, options=quick) as ev:
        for path in [*(DEV / f"{n}.py" for n in ("log_softmax", "smoothed_cross_entropy", "padding_masked_softmax",
                                                 "causal_scaled_softmax", "free_energy")), guarded, far]:
            problem = load_problem(path)
            scaffold, kernel, fused = _reference_kernel(problem)
            assert "v_amax = row_max(" not in fused and "scaled_max(xr" not in fused.split("kernel_forward")[1]
            verdict = ev.evaluate(problem, scaffold.module_source(fused))
            assert verdict.status == "ok", (path.name, verdict.reason)
            if path == guarded:  # the guard is kept and taken again at the row's maximum
                assert fused.count("== INFINITY) ? 0.0f :") == 2 and "bm < v_where - 64.0f" in fused
                wrong = fused.replace(" || bm < v_where - 64.0f", "")  # rows that start with -inf: exps at 0 vanish
                assert ev.evaluate(problem, scaffold.module_source(wrong)).status == "incorrect"
        again = re.compile(r"if \(bm > (\w+) \+ 64\.0f\)")
        assert again.search(fused)
        wrong = again.sub("if (false)", fused)  # never summed again: exps of 100 above the reference overflow
        assert ev.evaluate(problem, scaffold.module_source(wrong)).status == "incorrect"
    # not asked of a kernel with no maximum and sum of exponentials
    for name in ("gelu_tanh", "l2_normalize", "max_pool_overlap"):
        problem = load_problem(DEV / f"{name}.py")
        kernels = [k for _d, k, _n in seed_kernels(problem, build_scaffold(problem, "cpp"), memory=False)]
        assert kernels and not any(applicable("reference_max", k) for k in kernels), name


def test_the_reference_maximum_answer_begins_inside_the_kernels_own_row_loops():
    """The answer to the reference-maximum request is begun for the model with every line of the entry point before
    the ones the pattern replaces, so the pattern lands inside the kernel's loops over the rows: the lowered seed's
    one loop, and both loops of a kernel whose rows come in blocks (begun with the first line alone, the model wrote
    one row with no loop, or dropped the reference in the blocked kernel). The prompt's answer starts there."""
    from kforge_desktop.csource.comments import strip_cpp_comments
    from kforge_desktop.llm import prompts
    from kforge_desktop.search.config import SearchConfig
    from kforge_desktop.search.directives import directive_by_key
    from kforge_desktop.search.planner import edit_expansion, kernel_functions
    from kforge_desktop.search.prompting import prefill
    from kforge_desktop.search.requests import reference_begun

    problem = load_problem(DEV / "free_energy.py")
    scaffold, kernel, fused = _reference_kernel(problem)
    exp = edit_expansion(1, kernel_functions(kernel, "cpp"), directive_by_key("cpp", "reference_max"), "cpp",
                         random.Random(0), {})
    lines = exp.begun.splitlines()
    assert lines[0].startswith('extern "C" void kernel_forward(const float* logits') and lines[-1].strip() == (
        "for (int64_t r = 0; r < rows; ++r) {") and len(lines) == 3
    entry = strip_cpp_comments(fused.split('extern "C"')[1])
    assert all(ln.strip() in entry for ln in lines[1:]) and "row_max(" not in exp.begun
    ctx = prompts.PromptContext(kind="edit", language="cpp", problem_source=problem.source, parent_code=kernel,
                                directive=exp.directive_text, target=exp.target, begun=exp.begun)
    assert prefill(ctx, SearchConfig(), scaffold) == "```cpp\n" + exp.begun + "\n"

    loop = "    for (int64_t r = 0; r < rows; ++r) {\n"
    blocked = kernel.replace(loop, "    for (int64_t r0 = 0; r0 < rows; r0 += 8) {\n        const int64_t r1 = r0 + 8 < "
                             "rows ? r0 + 8 : rows;\n        for (int64_t r = r0; r < r1; ++r) {\n", 1)
    blocked = blocked.replace("        out[r] = v_mul;\n    }\n", "        out[r] = v_mul;\n        }\n    }\n", 1)
    assert blocked != kernel
    begun = reference_begun("\n".join(f for _, f in kernel_functions(blocked, "cpp")))
    assert begun.splitlines()[-3:] == ["    for (int64_t r0 = 0; r0 < rows; r0 += 8) {",
                                       "        const int64_t r1 = r0 + 8 < rows ? r0 + 8 : rows;",
                                       "        for (int64_t r = r0; r < r1; ++r) {"]
    # another request or function, or a kernel with no sum of exponentials, keeps the first line alone
    other = edit_expansion(1, kernel_functions(kernel, "cpp"), directive_by_key("cpp", "simd_inner"), "cpp",
                           random.Random(0), {})
    functions = "\n".join(f for _, f in kernel_functions(kernel, "cpp"))
    assert other.begun == "" and reference_begun(functions, "row_sum") == ""
    assert reference_begun(functions.replace("fast_exp(v_sub)", "fabsf(v_sub)")) == ""


def test_a_reference_answer_that_sums_again_inside_its_fused_loop_gets_the_test_after_the_loop(tmp_path):
    """Asked the reference-maximum request, the default model once closed the fused loop after the "sum again"
    test (dev smoothed cross-entropy: correct, but 0.31x eager against 1.91x for the same answer with the test
    after the loop), so the test and its loop over the row ran for every value. An answer of that form gets the
    test back after the loop, the same kernel as the pattern's, and verifies against torch. A test without a loop
    of its own inside a SIMD loop (an online update), and a test in a loop with no SIMD reduction, stay."""
    from kforge_desktop.csource.mends import RECHECK_NOTE, move_rechecks_out
    from kforge_desktop.csource.normalize import normalize_code
    from kforge_desktop.kernels.evaluator import Evaluator
    from kforge_desktop.kernels.options import EvalOptions
    from kforge_desktop.search.scaffold import clean_kernel

    problem = load_problem(DEV / "smoothed_cross_entropy.py")
    scaffold, _kernel, fused = _reference_kernel(problem)
    test = re.search(r"\n(if \(bm > v_amax \+ 64\.0f\) \{.*?\n\}\n)", fused, re.S)
    assert test
    before = fused[:test.start()]
    cut = before.rstrip()
    assert cut.endswith("}")  # the fused loop's closing brace, just before the test
    inside = cut[:-1] + "\n".join("    " + ln for ln in test.group(1).rstrip().split("\n")) + "\n}\n" + fused[test.end():]
    assert normalize_code(inside, "cpp") != normalize_code(fused, "cpp")
    mended = clean_kernel(inside)
    assert RECHECK_NOTE.format(names="bm") in mended
    assert normalize_code(mended, "cpp") == normalize_code(clean_kernel(fused), "cpp")
    with Evaluator(device="cpu", workers=1, options=EvalOptions(compare_compile=False, timed_runs=3),
                   build_cache=tmp_path) as ev:
        verdict = ev.evaluate(problem, scaffold.module_source(mended))
    assert verdict.status == "ok", verdict.reason
    online = ("void f(const float* x, int64_t n, float* out) {\n    float m = -INFINITY, s = 0.0f;\n"
              "    #pragma omp simd reduction(max : m)\n    for (int64_t c = 0; c < n; ++c) {\n"
              "        if (x[c] > m) { s *= expf(m - x[c]); m = x[c]; }\n    }\n    out[0] = m + s;\n}\n")
    assert move_rechecks_out(online) == (online, 0)
    plain = inside.replace("#pragma omp simd reduction(max : bm) reduction(+ : v_sum_1)\n", "")
    assert move_rechecks_out(plain) == (plain, 0)


def test_the_hoisting_request_names_the_division_a_lowered_normalization_repeats_and_its_reciprocal(tmp_path):
    """A lowered L2 normalization divides every value of a row by a copy of the row's norm made in the store loop
    (``const float v_expand = v_clamp;``): the division was not found, so hoisting was never asked of it. The
    request names the divisor, the value it copies and the reciprocal to take once, with a pattern that places it
    after the line that sets the value (told "before the loop", the default model took it before the loop over the
    rows); a division once a row (in the loop over the rows) or by ``std::sqrt`` is none to hoist."""
    from kforge_desktop.search.applicability import applicable, hoistable_divisions
    from kforge_desktop.search.directives import directive_by_key
    from kforge_desktop.search.planner import edit_expansion, kernel_functions
    from kforge_desktop.search.requests import hoist_begun, hoist_text

    path = tmp_path / "l2.py"
    path.write_text("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
                    "class Model(nn.Module):\n    def forward(self, x):\n        return F.normalize(x, dim=-1)\n\n\n"
                    "def get_inputs():\n    return [torch.randn(8, 64)]\n\n\ndef get_init_inputs():\n    return []\n")
    store = SessionStore(tmp_path / "t.kforge")
    pid = create_session(store, load_problem(path), SearchConfig(strategy="mcts", budget_candidates=5, seeds=True))
    seed = next(n for n in store.nodes(pid) if n.origin == "seed")
    store.close()
    assert seed.directive == "lowered" and applicable("hoist_invariants", seed.kernel_source)
    [(divisor, value, loop)] = hoistable_divisions(seed.kernel_source)
    assert divisor != value and re.search(rf"\bconst float {divisor} = {value};", seed.kernel_source)
    assert re.search(rf"/ {divisor}\)", seed.kernel_source)  # the store loop divides by the copy
    functions = kernel_functions(seed.kernel_source, "cpp")
    exp = edit_expansion(seed.id, functions, directive_by_key("cpp", "hoist_invariants"), "cpp", random.Random(0), {})
    assert exp.target == "kernel_forward" and exp.directive_text == hoist_text(seed.kernel_source)
    assert f"`const float inv_{value} = 1.0f / {value};`" in exp.directive_text and f"`{loop}`" in exp.directive_text
    # the pattern: the entry point's line that sets the value, the reciprocal right after it, then the loop
    pattern = exp.directive_text.split("```cpp\n")[1].split("\n")
    assert pattern[0] == f"const float {value} = /* as now */;" and pattern[1].startswith(f"const float inv_{value} =")
    assert pattern[2] == loop + " {" and loop in seed.kernel_source
    assert f"`a / {divisor}` written `a * inv_{value}`" in exp.directive_text
    # the answer is begun inside the loop over the rows, right after the line that sets the value
    begun = exp.begun.splitlines()
    assert begun[0].startswith('extern "C" void kernel_forward(') and re.match(rf"\s*const float {value} = ", begun[-1])
    assert any(re.match(r"\s*for \(int64_t r = 0; r < rows; \+\+r\) \{", ln) for ln in begun) and loop not in exp.begun
    # once a row, or a call: nothing to hoist, and the kernel is not asked
    per_row = ('extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols) {\n'
               "  #pragma omp parallel for\n  for (int64_t r = 0; r < rows; ++r) {\n"
               "    const float inv = 1.0f / std::sqrt(x[r * cols] / (float)cols + 1e-5f);\n"
               "    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = x[r * cols + c] * inv;\n  }\n}\n")
    assert hoistable_divisions(per_row) == [] and not applicable("hoist_invariants", per_row)
    assert hoist_text(per_row) is None and hoist_begun(per_row) == ""
    # a copy that the loop changes after making it is no invariant
    changed = seed.kernel_source.replace(f"const float {divisor} = {value};", f"float {divisor} = {value}; {divisor} += 1.0f;")
    assert hoistable_divisions(changed) == []
