"""Duplicates: a near-copy of a node or seed is the same candidate; a real change is a new one."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kforge_desktop.csource.normalize import canonical_cpp, normalize_code, same_kernel

PROBLEMS = Path(__file__).resolve().parents[2] / "resources" / "problems"

# the LayerNorm exemplar as the default model answers it back (its own formatting)
KERNEL = textwrap.dedent("""\
    #include <cmath>
    #include <cstdint>

    // the sum of one row
    static inline float row_sum(const float* xr, int64_t cols) {
        float s = 0.0f;
        #pragma omp simd reduction(+ : s)
        for (int64_t c = 0; c < cols; ++c) s += xr[c];
        return s;
    }

    // the sum of squared differences from the mean of one row
    static inline float row_sq_dev(const float* xr, float mean, int64_t cols) {
        float s = 0.0f;
        #pragma omp simd reduction(+ : s)
        for (int64_t c = 0; c < cols; ++c) {
            float d = xr[c] - mean;
            s += d * d;
        }
        return s;
    }

    extern "C" void kernel_forward(const float* x, const float* weight, const float* bias, float* out,
                                   int64_t rows, int64_t cols, float eps) {
        #pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            const float* xr = x + r * cols;
            const float mean = row_sum(xr, cols) / (float)cols;
            const float var = row_sq_dev(xr, mean, cols) / (float)cols;
            const float inv_std = 1.0f / std::sqrt(var + eps);
            float* yr = out + r * cols;
            for (int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - mean) * inv_std * weight[c] + bias[c];
        }
    }
    """)

ROW_SUM = KERNEL[KERNEL.index("// the sum of one row"):KERNEL.index("// the sum of squared")]
SQ_DEV = KERNEL[KERNEL.index("// the sum of squared"):KERNEL.index('extern "C"')]


def _renamed(code: str) -> str:
    """Every local renamed the way the model renames them: s -> acc, xr -> row, d -> diff, c -> i."""
    out = code
    for old, new in (("float s = 0.0f;", "float acc = 0.0f;"), ("reduction(+ : s)", "reduction(+ : acc)"),
                     ("s += xr[c];", "acc += xr[c];"), ("s += d * d;", "acc += diff * diff;"),
                     ("float d = xr[c] - mean;", "float diff = xr[c] - mean;"), ("return s;", "return acc;"),
                     ("const float* xr", "const float* row"), ("xr[c]", "row[c]"), ("row_sum(xr,", "row_sum(row,"),
                     ("row_sq_dev(xr,", "row_sq_dev(row,"), ("(row[c] - mean) * inv_std", "(row[c] - mean) * inv_std")):
        out = out.replace(old, new)
    return out.replace("int64_t c = 0; c < cols; ++c", "int64_t i = 0; i < cols; ++i").replace("[c]", "[i]")


NEAR_COPIES = {
    "an include added": "#include <limits>\n" + KERNEL,
    "using namespace std added": KERNEL.replace("#include <cstdint>\n", "#include <cstdint>\nusing namespace std;\n"),
    "includes dropped": KERNEL.replace("#include <cmath>\n#include <cstdint>\n", ""),
    "a helper moved": KERNEL.replace(ROW_SUM + SQ_DEV, SQ_DEV + ROW_SUM),
    "locals renamed": _renamed(KERNEL),
    "comments and formatting": KERNEL.replace("    ", "\t").replace("// the sum of one row", "/* row total */")
                               .replace("(float)cols", "( float ) cols"),
    "all at once": "#include <algorithm>\n" + _renamed(KERNEL.replace(ROW_SUM + SQ_DEV, SQ_DEV + ROW_SUM)),
}

REAL_CHANGES = {
    "a different loop": KERNEL.replace(
        "for (int64_t c = 0; c < cols; ++c) s += xr[c];",
        "float s1 = 0.0f;\n    int64_t c = 0;\n    for (; c + 2 <= cols; c += 2) { s += xr[c]; s1 += xr[c + 1]; }\n"
        "    for (; c < cols; ++c) s += xr[c];\n    s += s1;"),
    "another constant": KERNEL.replace("1.0f / std::sqrt", "2.0f / std::sqrt"),
    "another library call": KERNEL.replace("std::sqrt(var + eps)", "std::exp(var + eps)"),
    "a parallel loop dropped": KERNEL.replace("    #pragma omp parallel for schedule(static)\n", ""),
    "two parameters swapped in a call": KERNEL.replace("row_sq_dev(xr, mean, cols)", "row_sq_dev(xr, cols, mean)"),
    "another global name": KERNEL.replace("float s = 0.0f;", "float s = FLT_MIN;", 1).replace(
        "float s = 0.0f;", "float s = FLT_MAX;"),
}


@pytest.mark.parametrize("name", sorted(NEAR_COPIES))
def test_a_near_copy_is_a_duplicate(name):
    assert NEAR_COPIES[name] != KERNEL
    assert same_kernel(NEAR_COPIES[name], KERNEL), name


@pytest.mark.parametrize("name", sorted(REAL_CHANGES))
def test_a_real_change_is_not_a_duplicate(name):
    assert not same_kernel(REAL_CHANGES[name], KERNEL), name
    assert not same_kernel(_renamed(REAL_CHANGES[name]), KERNEL), name


def test_members_and_library_names_are_never_renamed():
    a = "float4 f(float4 v) { float4 w; w.x = v.x * INFINITY; w.y = std::exp(v.y); return w; }"
    b = "float4 f(float4 q) { float4 r; r.x = q.x * INFINITY; r.y = std::exp(q.y); return r; }"
    form = canonical_cpp(a)
    assert form == canonical_cpp(b)
    assert ".x" in form.replace(" ", "") and "INFINITY" in form and "std :: exp" in form
    assert canonical_cpp(a) != canonical_cpp(a.replace("w.y", "w.z"))  # another member is another kernel


def test_a_scaffolded_module_is_compared_by_its_kernel():
    """Whole ModelNew modules (the module prompts' answers) compare their kernel strings the same way."""
    module = 'import torch\nKERNEL_SOURCE = r"""\n{}"""\nclass ModelNew:\n    pass\n'
    assert normalize_code(module.format(KERNEL), "python") == normalize_code(module.format(NEAR_COPIES["all at once"]),
                                                                              "python")
    assert normalize_code(module.format(KERNEL), "python") != normalize_code(
        module.format(REAL_CHANGES["another constant"]), "python")


def test_a_near_copy_of_a_seed_is_found_as_its_duplicate_in_the_session(tmp_path):
    """What the search does with an answer: the seed placed from the RMSNorm exemplar, then an answer
    that is the seed with an include added, a helper renamed nowhere but its locals renamed: the
    store finds the seed as the answer's duplicate; a kernel with a different loop is new."""
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.config import SearchConfig
    from kforge_desktop.search.setup import create_session
    from kforge_desktop.store import SessionStore

    store = SessionStore(tmp_path / "s.kforge")
    pid = create_session(store, load_problem(PROBLEMS / "rms_norm.py"), SearchConfig(budget_candidates=1))
    seed = next(n for n in store.nodes(pid) if n.origin == "seed")
    near = "#include <limits>\n" + seed.kernel_source.replace("float s = 0.0f;", "float total = 0.0f;").replace(
        "reduction(+ : s)", "reduction(+ : total)").replace("s += xr[c] * xr[c];", "total += xr[c] * xr[c];").replace(
        "return s;", "return total;")
    assert near.count("total") == 4
    assert store.find_duplicate(pid, normalize_code(near, "cpp")) == seed.id
    changed = seed.kernel_source.replace("s += xr[c] * xr[c];", "s += xr[c] * xr[c] * 1.0f;")
    assert store.find_duplicate(pid, normalize_code(changed, "cpp")) is None
    store.close()
