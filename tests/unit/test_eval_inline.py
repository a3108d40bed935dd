"""KernelBench's own candidate format (load_inline with torch/extension.h) keeps working on the CPU
backend: slower to build than the native format, but built, cached and verified the same way."""

from __future__ import annotations

from pathlib import Path

from kforge_desktop.kernels.evaluator import Evaluator
from kforge_desktop.kernels.options import EvalOptions
from kforge_desktop.problem.problem import load_problem

REPO = Path(__file__).resolve().parents[2]


def _compiled_files(cache: Path) -> dict[str, tuple[int, int, int]]:
    """Every object and library in the build cache with its inode, size and mtime: a rebuild
    rewrites or replaces them, a cache hit leaves them as they are."""
    out = {}
    for p in cache.rglob("*"):
        if p.is_file() and (p.suffix in (".o", ".so") or p.name == ".ninja_log"):
            st = p.stat()
            out[str(p.relative_to(cache))] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return out


def test_load_inline_candidate_is_built_verified_and_cached(tmp_path):
    problem = load_problem(REPO / "resources/problems/rms_norm.py")
    source = (REPO / "tests/candidates/cpu_formats/inline_rms_norm.py").read_text()
    opts = EvalOptions(compare_compile=False, timed_runs=10, build_timeout_s=600)
    with Evaluator("cpu", workers=1, options=opts, build_cache=tmp_path) as ev:
        first = ev.evaluate(problem, source)
    assert first.status == "ok", f"{first.reason}\n{first.log[-2000:]}"
    built = _compiled_files(tmp_path)
    assert any(name.endswith(".so") for name in built), sorted(built)
    with Evaluator("cpu", workers=1, options=opts, build_cache=tmp_path) as ev:  # a fresh worker process
        again = ev.evaluate(problem, source)
    assert again.status == "ok", f"{again.reason}\n{again.log[-2000:]}"
    assert _compiled_files(tmp_path) == built  # nothing was compiled again: the library was loaded as built


DECLARED_THEN_DEFINED = '''#include <cmath>
#include <cstdint>

extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols);

// defined without extern "C": C++ gives it C linkage from the declaration above
void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float m = -INFINITY, s = 0.0f;
        for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
        for (int64_t c = 0; c < cols; ++c) s += std::exp(xr[c] - m);
        for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = std::exp(xr[c] - m) / s;
    }
}
'''


def test_an_entry_point_declared_extern_c_and_defined_plainly_is_built_and_called(tmp_path):
    """A kernel the model wrote as a declaration `extern "C" void f(...);` and a plain definition is
    valid C++ (the definition has C linkage): it is built and verified, not refused as exporting nothing."""
    from kforge_desktop.search.scaffold import build_scaffold

    problem = load_problem(REPO / "resources" / "problems" / "softmax.py")
    source = build_scaffold(problem).module_source(DECLARED_THEN_DEFINED)
    opts = EvalOptions(compare_compile=False, trials=2, timed_runs=3, warmup_runs=1)
    with Evaluator("cpu", workers=1, options=opts, build_cache=tmp_path) as ev:
        verdict = ev.evaluate(problem, source)
    assert verdict.status == "ok", verdict.summary() + "\n" + verdict.log[-1500:]
