"""Code extraction from answers shaped like the ones local models really give."""

from __future__ import annotations

import ast

from kforge_desktop.csource.normalize import normalize_code
from kforge_desktop.llm.extract import extract_code, kernel_language, native_code, split_blocks

MODULE = '''import torch
import torch.nn as nn
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r"""
#include <cstdint>
extern "C" void kernel_forward(const float* x, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""
_lib = load_native(KERNEL_SOURCE, lang="cpp")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        _lib.kernel_forward(x.contiguous(), out, x.numel())
        return out
'''

KERNEL = '''#include <cstdint>
extern "C" void kernel_forward(const float* x, float* out, int64_t n) {
    // one thread does it all
    for (int64_t i = 0; i < n; ++i) {
        out[i] = x[i] > 0.f ? x[i] : 0.f;
    }
}
'''


def _without_source() -> str:
    head, rest = MODULE.split('KERNEL_SOURCE = r"""')
    return head + rest.split('"""\n', 1)[1]


def test_single_python_fence_with_prose():
    answer = f"Here is an optimized version using a fused loop.\n\n```python\n{MODULE}```\n\nThis avoids a copy."
    ex = extract_code(answer)
    assert ex.ok and ex.language == "python" and ex.problem == ""
    assert ex.code.strip() == MODULE.strip()


def test_last_complete_module_wins_over_a_draft():
    draft = MODULE.replace("x.numel()", "x.numel(")  # a broken first attempt
    answer = f"First try:\n```python\n{draft}```\nOops, fixed:\n```python\n{MODULE}```"
    ex = extract_code(answer)
    assert ex.ok and "x.numel())" in ex.code


def test_cpp_block_is_merged_into_a_module_that_lacks_it():
    module = _without_source()
    assert "KERNEL_SOURCE =" not in module
    answer = f"The kernel:\n```cpp\n{KERNEL}```\nThe module:\n```python\n{module}```"
    ex = extract_code(answer)
    assert ex.ok, ex.problem
    ns = ast.parse(ex.code)
    assigned = {t.id for n in ns.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    assert "KERNEL_SOURCE" in assigned and "kernel_forward" in ex.code
    assert "separate code block" in ex.problem


def test_cuda_and_cpp_sources_go_to_the_right_names():
    cuda = "__global__ void relu_kernel(const float* x, float* y, int n) { int i = blockIdx.x; if (i < n) y[i] = x[i]; }\n"
    cpp = "torch::Tensor relu(torch::Tensor x);\n"
    module = (
        "import torch\nfrom torch.utils.cpp_extension import load_inline\n"
        "mod = load_inline(name='r', cpp_sources=cpp_src, cuda_sources=cuda_src, functions=['relu'])\n"
        "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return mod.relu(x)\n"
    )
    answer = f"```cuda\n{cuda}```\n```c++\n{cpp}```\n```python\n{module}```"
    ex = extract_code(answer)
    assert ex.ok, ex.problem
    assert "cuda_src = r'''\n__global__" in ex.code and "cpp_src = r'''\ntorch::Tensor relu" in ex.code
    assert kernel_language(ex.code) == "cuda"


def test_missing_imports_are_added():
    body = MODULE.replace("import torch\nimport torch.nn as nn\n", "")
    ex = extract_code(f"```python\n{body}```")
    assert ex.ok
    assert ex.code.startswith("import torch\nimport torch.nn as nn\n")
    assert "added `import torch`" in ex.problem
    compile(ex.code, "candidate", "exec")


def test_no_fences_at_all():
    answer = "Sure, here you go:\n\n" + MODULE + "\nThis kernel is faster because it fuses the ops."
    ex = extract_code(answer)
    assert ex.ok and ex.code.strip() == MODULE.strip()


def test_unlabelled_fence_is_recognised_as_python():
    ex = extract_code(f"```\n{MODULE}```")
    assert ex.ok and "class ModelNew" in ex.code


def test_inline_opening_fence():
    ex = extract_code(f"Here: ```python\n{MODULE}```")
    assert ex.ok


def test_prose_that_names_a_fence_is_not_one():
    """The default model echoed the prompt's wording ("in one ```cpp block.") before its block; the
    fence inside that sentence used to open the block, and the real fence landed in the C++."""
    ex = extract_code(f"Here is every function you changed in one ```python block.\n\n```python\n{MODULE}```")
    assert ex.ok and "```" not in ex.code and "class ModelNew" in ex.code


def test_truncated_answer_is_reported_not_returned():
    cut = MODULE[: MODULE.index("return out")]
    cut = cut[: cut.rindex("(") + 1]  # stop mid-expression, as a token limit does
    ex = extract_code(f"```python\n{cut}")
    assert ex.code is None and "cut off" in ex.problem and "max_tokens" in ex.problem
    assert ex.draft


def test_truncated_unfenced_answer_with_length_hint():
    cut = MODULE[: MODULE.index("out, x.numel()")]
    ex = extract_code("Here: \n" + cut, finished=False)
    assert ex.code is None and "cut off" in ex.problem


def test_truncated_before_the_class():
    ex = extract_code("```python\nimport torch\nimport torch.nn as nn\n\n# first the helper")
    assert ex.code is None and "cut off before class ModelNew" in ex.problem


def test_useless_answers_give_one_sentence():
    for answer, expected in [
        ("", "empty"),
        ("I cannot help with that kernel.", "no code defining class ModelNew"),
        ("```python\nprint('hi')\n```", "does not define class ModelNew"),
        (f"```cpp\n{KERNEL}```", "no Python module defining class ModelNew"),
        ("<think>Let me think about tiling the loop", "still reasoning"),
        ("```python\nclass ModelNew(nn.Module)\n    pass\n```", "syntax error"),
    ]:
        ex = extract_code(answer)
        assert ex.code is None, answer
        assert expected in ex.problem, (answer, ex.problem)
        assert "\n" not in ex.problem


def test_thinking_is_skipped():
    answer = f"<think>maybe ```python\nclass ModelNew: pass\n``` no</think>\n```python\n{MODULE}```"
    ex = extract_code(answer)
    assert ex.ok and "kernel_forward" in ex.code


def test_undefined_kernel_source_is_refused():
    module = _without_source()
    ex = extract_code(f"```python\n{module}```")
    assert ex.code is None and "KERNEL_SOURCE" in ex.problem


def test_function_extraction_picks_the_defining_block():
    helper = "#include <cmath>\nstatic inline float relu(float v) { return v > 0 ? v : 0; }\n"
    answer = f"Helper:\n```cpp\n{helper}```\nKernel:\n```c++\n{KERNEL}```\nCall it with the pointers."
    ex = extract_code(answer, function="kernel_forward")
    assert ex.ok and ex.language == "cpp" and ex.code == KERNEL


def test_function_extraction_cuda_and_unfenced():
    cuda = ("#include <cuda_runtime.h>\n__global__ void k(const float* x, float* y, int n) {\n"
            "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i];\n}\n"
            "extern \"C\" void kernel_forward(const float* x, float* y, int n, cudaStream_t s) {\n"
            "  k<<<(n + 255) / 256, 256, 0, s>>>(x, y, n);\n}\n")
    ex = extract_code(f"```cuda\n{cuda}```", function="kernel_forward")
    assert ex.ok and ex.language == "cuda"
    plain = extract_code("Here is the code:\n\n" + KERNEL + "\nHope it helps!", function="kernel_forward")
    assert plain.ok and plain.code.strip() == KERNEL.strip()


def test_function_extraction_failures():
    cut = extract_code(f"```cpp\n{KERNEL[:-4]}", function="kernel_forward")
    assert cut.code is None and "cut off" in cut.problem
    other = extract_code(f"```cpp\n{KERNEL}```", function="softmax_forward")
    assert other.code is None and "does not define the function softmax_forward" in other.problem


def test_split_blocks_labels():
    text = "```py\na=1\n```\n```CUDA\n__global__ void f(){}\n```\n```cu\nint x;\n```\n```\n#include <x>\nint y;\n```"
    assert [b.language for b in split_blocks(text)] == ["python", "cuda", "cuda", "cpp"]


def test_normalize_ignores_comments_docstrings_and_formatting():
    a = MODULE
    b = (MODULE.replace("class ModelNew(nn.Module):\n", 'class ModelNew(nn.Module):\n    """Fast relu."""\n')
         .replace("out = torch.empty_like(x)", "out = torch.empty_like( x )  # allocate")
         .replace("int64_t i = 0;", "int64_t i = 0;   /* start */"))
    assert normalize_code(a) == normalize_code(b)
    c = MODULE.replace("0.f ? x[i]", "1.f ? x[i]")
    assert normalize_code(a) != normalize_code(c)


def test_normalize_cpp():
    spaced = KERNEL.replace("    ", "\t").replace("// one thread does it all", "/* serial */")
    assert normalize_code(KERNEL, "cpp") == normalize_code(spaced, "cpp")
    assert normalize_code(KERNEL, "cpp") != normalize_code(KERNEL.replace("0.f", "1.f"), "cpp")
    assert "unsigned int" in normalize_code("unsigned   int x = 1;", "cpp")
    assert normalize_code('const char* s = "a // not a comment";', "cpp").count("//") == 1


TRITON = '''import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)
'''


def test_triton_function_extraction():
    ex = extract_code(f"Use this:\n```python\n{TRITON}```", function="relu_kernel", language="triton")
    assert ex.ok and ex.language == "triton" and "@triton.jit" in ex.code
    bare = TRITON.replace("import triton\nimport triton.language as tl\n", "")
    fixed = extract_code(f"```python\n{bare}```", function="relu_kernel", language="triton")
    assert fixed.ok and fixed.code.startswith("import triton\nimport triton.language as tl\n")
    unfenced = extract_code("Sure.\n\n" + TRITON + "\nThat is all.", function="relu_kernel", language="triton")
    assert unfenced.ok and unfenced.code.strip() == TRITON.strip()
    cut = extract_code(f"```python\n{TRITON[:-30]}", function="relu_kernel", language="triton")
    assert cut.code is None and "cut off" in cut.problem
    assert normalize_code(TRITON, "triton") == normalize_code(TRITON.replace("mask = offs < n", "mask = offs<n  # tail"),
                                                                "triton")


def test_a_kernel_followed_by_a_cut_off_test_driver_is_kept():
    """Measured with the default model: a complete kernel, then a test driver that ran out of tokens.
    The kernel is the answer; the unfinished driver is dropped (and said so)."""
    driver = "\n// check the kernel\nvoid check_kernel() {\n    float* x = new float[4];\n    for (int i = 0; i < 4; ++i) {\n"
    ex = extract_code(f"```cpp\n{KERNEL}{driver}", function="kernel_forward", language="cpp", finished=False)
    assert ex.ok and ex.code.strip() == KERNEL.strip() and "dropped" in ex.problem
    cut_inside = extract_code(f"```cpp\n{KERNEL[:-4]}", function="kernel_forward", finished=False)
    assert cut_inside.code is None and "cut off" in cut_inside.problem


# the default model's own answer to a softmax request (a recorded session): it wrote softmax's three
# helpers, then wrote them again, and again, until the token limit, never reaching kernel_forward
LOOPING_HELPERS = '''// the largest value of one row
static inline float row_max(const float* xr, int64_t cols) {
    float m = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, xr[c]);
    return m;
}

// yr[c] = exp(xr[c] - m); returns the sum of those values
static inline float exp_row(const float* xr, float m, float* yr, int64_t cols) {
    float s = 0.0f;
    #pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < cols; ++c) {
        float e = std::exp(xr[c] - m);
        yr[c] = e;
        s += e;
    }
    return s;
}

// yr[c] *= k
static inline void scale_row(float* yr, float k, int64_t cols) {
    #pragma omp simd
    for (int64_t c = 0; c < cols; ++c) yr[c] *= k;
}

'''


def test_an_answer_that_loops_is_recognised_before_the_token_limit():
    from kforge_desktop.llm.generator import repeating

    answer = "```cpp\n#include <cmath>\n#include <cstdint>\n\n" + LOOPING_HELPERS * 4
    stop = next(i for i in range(1, len(answer) + 1) if repeating(answer[:i]))
    assert stop < len(LOOPING_HELPERS) * 2 + 200  # within the second copy: the rest of the budget is saved
    # a kernel that repeats itself on purpose (an unrolled loop, helpers of the same shape) is not a loop,
    # at any point while it streams in
    unrolled = "".join(f"    s{k} += (v[c + {k}] - mean) * (v[c + {k}] - mean);\n" for k in range(8))
    kernel = LOOPING_HELPERS + unrolled + LOOPING_HELPERS.replace("row", "col") + unrolled.replace("c + ", "i + ")
    assert not any(repeating(kernel[:i]) for i in range(1, len(kernel) + 1))


def test_native_code_accepts_an_edit_that_rewrites_one_helper_alone():
    """An edit answer may define only the helper it changed; its C code is kept, the Python test the
    model added and the prose are not, and a block with the entry point wins over a stray example."""
    helper = "static float row_max(const float* x, int64_t n) {\n    return x[0];\n}\n"
    answer = f"The faster helper:\n```cpp\n{helper}```\nTo test it:\n```python\nprint(model(x))\n```\n"
    assert native_code(answer, "kernel_forward") == helper
    example = "```\nint main() {\n    return 0;\n}\n```\n"
    assert native_code(example + "```c++\n" + KERNEL + "```\n", "kernel_forward") == KERNEL
    assert native_code(helper, "kernel_forward") == helper  # no fences: the answer is the code
    assert native_code("I would unroll the loop by four.", "kernel_forward") is None

