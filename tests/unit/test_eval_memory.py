"""Real sizes: a problem's footprint is known before anything is built, a problem that cannot fit
is refused in one sentence, and an evaluation needs a few times the problem's bytes, not one copy
per trial (the comparison works in chunks, inputs are made when needed and dropped after use)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from kforge_desktop.kernels.evaluator import Evaluator
from kforge_desktop.kernels.options import EvalOptions
from kforge_desktop.problem.footprint import footprint
from kforge_desktop.problem.problem import problem_from_source

GIB = 2**30

RELU = textwrap.dedent('''
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, x):
            return torch.relu(x)

    N = {n}

    def get_inputs():
        return [torch.randn(N)]

    def get_init_inputs():
        return []
''')

RELU_KERNEL = textwrap.dedent('''
    import torch
    import torch.nn as nn
    from kforge_desktop.kernels.native import load_native

    _lib = load_native(r"""
    #include <cstdint>
    extern "C" void relu(const float* x, float* y, int64_t n) {
      #pragma omp parallel for
      for (int64_t i = 0; i < n; ++i) y[i] = (x[i] > 0.f) | (x[i] != x[i]) ? x[i] : 0.f;
    }
    """, lang="cpp")

    class ModelNew(nn.Module):
        def forward(self, x):
            out = torch.empty_like(x)
            _lib.relu(x, out, x.numel())
            return out
''')


def test_footprint_counts_inputs_outputs_and_parameters_without_running_anything():
    big = problem_from_source("relu_big", RELU.format(n=4096 * 393216))  # 6.4 GB: only shapes are made
    fp = footprint(big)
    assert fp.input_bytes == fp.output_bytes == 4096 * 393216 * 4 and fp.param_bytes == 0 and fp.exact
    norm = problem_from_source("norm", "import torch, torch.nn as nn\n"
                               "class Model(nn.Module):\n"
                               "    def __init__(self):\n        super().__init__(); self.n = nn.LayerNorm(64)\n"
                               "    def forward(self, x):\n        return self.n(x).sum(-1)\n"
                               "def get_inputs():\n    return [torch.randn(32, 64)]\n"
                               "def get_init_inputs():\n    return []\n")
    fp = footprint(norm)
    assert (fp.input_bytes, fp.output_bytes, fp.param_bytes) == (32 * 64 * 4, 32 * 4, 2 * 64 * 4)


def test_a_problem_that_cannot_fit_is_refused_in_one_sentence_before_any_build(tmp_path):
    big = problem_from_source("relu_big", RELU.format(n=4096 * 393216))
    with Evaluator("cpu", workers=1, build_cache=tmp_path, memory_bytes=8 * GIB) as ev:
        verdict = ev.evaluate(big, RELU_KERNEL)
    assert verdict.status == "runtime_error"
    assert "12.0 GiB (inputs and outputs)" in verdict.reason and "8.0 GiB" in verdict.reason
    assert verdict.build_s is None  # nothing was built
    assert not any(tmp_path.rglob("*.so"))


def test_chunked_comparison_needs_a_fraction_of_the_tensors_size():
    script = textwrap.dedent('''
        import resource, torch
        from kforge_desktop.kernels.verify import compare
        n = 96 * 2**20                     # 384 MB per tensor
        a = torch.randn(n); b = a * (1 + 1e-7)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        assert compare(b, a).ok
        print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
    ''')
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    grew = int(out.stdout.split()[-1])
    # a whole-tensor float64 comparison needs two 768 MB copies and their difference besides
    assert grew < 768 * 2**20, f"the comparison grew the process by {grew / 2**20:.0f} MB"


@pytest.mark.slow
def test_a_half_gigabyte_problem_is_evaluated_in_a_few_times_its_size(tmp_path):
    n = 64 * 2**20  # 256 MB in, 256 MB out: G = 0.5 GiB
    problem = problem_from_source("relu_half_gib", RELU.format(n=n))
    opts = EvalOptions(trials=3, timed_runs=10, warmup_runs=1, compare_compile=False, run_timeout_s=600)
    with Evaluator("cpu", workers=1, options=opts, build_cache=tmp_path) as ev:
        verdict = ev.evaluate(problem, RELU_KERNEL)
    assert verdict.status == "ok", verdict.reason + verdict.log[-2000:]
    # the worker's peak resident size: torch itself (under 0.5 GiB) and at most 4 G of data; one
    # copy of inputs and outputs per trial, as before, would be 4.5 GiB
    assert verdict.peak_mem_bytes < 2.5 * GIB, f"peak {verdict.peak_mem_bytes / GIB:.1f} GiB"
