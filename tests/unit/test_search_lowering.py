"""The reference lowered to plain loops: where no exemplar fits, the search starts from a kernel that is
correct, built with the real compiler and compared with the reference on its own inputs."""

from __future__ import annotations

import os
import re
import shutil
import textwrap
import types
from pathlib import Path

import pytest
import torch

from kforge_desktop.csource.items import function_text
from kforge_desktop.problem.problem import load_problem
from kforge_desktop.search.lowering import lower
from kforge_desktop.search.scaffold import build_scaffold

ROOT = Path(__file__).resolve().parents[2]

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"

# (name, __init__ body, forward body, get_inputs, get_init_inputs)
REFERENCES = {
    "log_softmax": ("pass", "return torch.log_softmax(x, dim=-1)", "[torch.randn(16, 96)]", "[]"),
    "logsumexp_rows": ("pass", "return torch.logsumexp(x, dim=-1)", "[torch.randn(8, 4, 50) * 3]", "[]"),
    "l1_normalize_square": ("pass", "return F.normalize(x, p=1.0, dim=-1)", "[torch.randn(32, 32)]", "[]"),
    "bias_leaky_scale": ("self.bias = nn.Parameter(torch.randn(64)); self.scale = scale",
                         "return F.leaky_relu(x + self.bias, 0.1) * self.scale", "[torch.randn(10, 64)]", "[1.7]"),
    "layer_norm_residual": ("self.norm = nn.LayerNorm(48)", "return self.norm(x + y)",
                            "[torch.randn(6, 7, 48) + 2, torch.randn(6, 7, 48)]", "[]"),
    "rms_norm_written_out": ("self.weight = nn.Parameter(1 + 0.1 * torch.randn(40)); self.eps = 1e-6",
                             "return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight",
                             "[torch.randn(12, 40)]", "[]"),
    "mean_over_middle_dim": ("pass", "return x.mean(dim=1)", "[torch.randn(4, 8, 16)]", "[]"),
    "centred_over_channels": ("pass", "return torch.relu(x - x.mean(dim=1, keepdim=True)) * 2.0",
                              "[torch.randn(3, 5, 7, 2)]", "[]"),
    # along a middle dimension in tiles of up to 256 rows: a partial last tile (300 = 256 + 44), a maximum with its
    # NaN flag and a variance, per row of the tile
    "channel_max_two_tiles": ("pass", "return x - x.amax(dim=1, keepdim=True)", "[torch.randn(2, 6, 300)]", "[]"),
    "channel_standardize": ("pass", "return (x - x.mean(dim=1, keepdim=True)) / torch.sqrt(x.var(dim=1, keepdim=True, "
                            "unbiased=False) + 1e-5)", "[torch.randn(3, 7, 260) * 2 + 1]", "[]"),
    "gelu_tanh_and_row_max": ("pass", "return F.gelu(x, approximate='tanh') - x.amax(dim=-1, keepdim=True)",
                              "[torch.randn(9, 33)]", "[]"),
    # the C++ forms that vectorize: erf, tanh, sigmoid and exp as float arithmetic, maximum/minimum/clamp/relu as
    # compares, a minimum over the row
    "exact_gelu_clamped": ("pass", "return F.gelu(x).clamp(-0.1, 1.5)", "[torch.randn(8, 70) * 2]", "[]"),
    "tanh_sigmoid_maximum": ("pass", "return torch.maximum(torch.tanh(x), torch.sigmoid(y)) - torch.relu(x - 1.0)",
                             "[torch.randn(5, 40) * 3, torch.randn(5, 40) * 3]", "[]"),
    "minus_row_min": ("pass", "return torch.exp(-(x - x.amin(dim=-1, keepdim=True)))", "[torch.randn(7, 30)]", "[]"),
    # poolings: one loop over the window per output value, padding, ceil mode and dilation as torch has them
    "max_pool1d_overlap": ("self.pool = nn.MaxPool1d(3, stride=2, padding=1)", "return self.pool(x)",
                           "[torch.randn(4, 6, 37)]", "[]"),
    "max_pool1d_ceil_both_edges": ("pass", "return F.max_pool1d(x, 4, 3, 2, ceil_mode=True)", "[torch.randn(2, 3, 23)]",
                                   "[]"),
    "avg_pool1d_ceil_no_pad": ("pass", "return F.avg_pool1d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)",
                               "[torch.randn(3, 5, 20)]", "[]"),
    "avg_pool1d_padding_counted": ("pass", "return F.avg_pool1d(x, 4, 3, 2)", "[torch.randn(3, 5, 21)]", "[]"),
    "avg_pool1d_moving_average": ("pass", "return F.avg_pool1d(x, 5, 1, 2, count_include_pad=False)",
                                  "[torch.randn(3, 4, 40)]", "[]"),
    "max_pool2d_dilated": ("pass", "return F.max_pool2d(x, 3, stride=2, padding=1, dilation=2)",
                           "[torch.randn(2, 3, 11, 13)]", "[]"),
    # an input that broadcasts with sizes of 1 between others: a key-padding mask given per sample (a bool,
    # unsqueezed in the forward), and a tensor read per (sample, row) with the middle dimension broadcast
    "key_padding_softmax": ("pass", "return torch.softmax(x.masked_fill(~y[:, None, :], float('-inf')), dim=-1)",
                            "[torch.randn(3, 5, 12), torch.arange(12)[None, :] < torch.tensor([[4], [12], [7]])]",
                            "[]"),
    # a (query, key) mask shared by the samples, used as it is: [3, 12] right-aligned against [3, 3, 12] (square:
    # it is not read as one value a row)
    "mask_per_query_key": ("pass", "return x.masked_fill(~y, 0.0)", "[torch.randn(3, 3, 12) + 5, torch.rand(3, 12) > 0.5]",
                           "[]"),
    "broadcast_middle": ("pass", "return torch.exp(x - x.amax(dim=-1, keepdim=True)) * y",
                         "[torch.randn(2, 3, 4, 6), torch.randn(2, 1, 4, 6)]", "[]"),
    # a cumulative sum along the row: a running value through the output loop, here scaled and then activated
    "cumsum_scaled_relu": ("pass", "return torch.relu(torch.cumsum(x * 0.5, dim=-1) - 1.0)", "[torch.randn(6, 3, 45)]",
                           "[]"),
    # one value a row picked by an index of that row (class indices, int64): the per-element chain at that column
    "nll_of_log_softmax": ("pass", "return -torch.log_softmax(x, -1).gather(1, y[:, None]).squeeze(1)",
                           "[torch.randn(9, 30) * 2, torch.randint(0, 30, (9,))]", "[]"),
    "target_logit_margin": ("pass", "return x.gather(-1, y.unsqueeze(-1)).squeeze(-1) - x.amax(dim=-1)",
                            "[torch.randn(4, 5, 20), torch.randint(0, 20, (4, 5))]", "[]"),
    "cross_entropy_smoothed_ignored": ("pass", "return F.cross_entropy(x, y, reduction='none', ignore_index=2, "
                                       "label_smoothing=0.1)", "[torch.randn(16, 12) * 3, torch.randint(0, 12, (16,))]",
                                       "[]"),
    "avg_pool2d_ceil_counted": ("pass", "return F.avg_pool2d(x, 3, 2, 1, ceil_mode=True)", "[torch.randn(2, 3, 10, 9)]",
                                "[]"),
    "avg_pool2d_divisor": ("pass", "return F.avg_pool2d(x, 3, stride=1, padding=1, divisor_override=5)",
                           "[torch.randn(2, 3, 9, 8)]", "[]"),
}


def _problem(tmp_path: Path, name: str, init: str, forward: str, inputs: str, init_inputs: str):
    args = "x, y" if re.search(r"\by\b", forward) else "x"
    params = "scale" if "scale" in init else ""
    src = HEADER + textwrap.dedent(f"""\
        class Model(nn.Module):
            def __init__(self{', ' + params if params else ''}):
                super().__init__()
                {init}

            def forward(self, {args}):
                {forward}


        def get_inputs():
            return {inputs}


        def get_init_inputs():
            return {init_inputs}
        """)
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    return load_problem(path)


def _run(problem, scaffold, kernel: str):
    module = types.ModuleType(problem.name)
    exec(compile(scaffold.module_source(kernel), problem.name, "exec"), module.__dict__)  # built for real
    ref_mod = problem.load_module()
    torch.manual_seed(5)
    ref = ref_mod.Model(*ref_mod.get_init_inputs())
    torch.manual_seed(5)
    new = module.ModelNew(*ref_mod.get_init_inputs())
    torch.manual_seed(6)
    inputs = ref_mod.get_inputs()
    return ref(*inputs), new(*inputs)


@pytest.mark.parametrize("name", list(REFERENCES))
def test_a_reference_without_an_exemplar_is_lowered_to_a_kernel_that_computes_it(name, tmp_path, build_cache):
    problem = _problem(tmp_path, name, *REFERENCES[name])
    scaffold = build_scaffold(problem)
    kernel = lower(problem, scaffold)
    assert kernel is not None, name
    assert scaffold.signature() in kernel
    assert "#pragma omp parallel for" in kernel  # the rows (planes) are independent: the seed uses every core
    want, got = _run(problem, scaffold, kernel)
    assert got.shape == want.shape
    assert torch.allclose(got, want, atol=1e-4, rtol=1e-4), f"{name}: max abs err {(got - want).abs().max():.3g}"
    if name == "bias_leaky_scale":  # the scale is read from its argument, not baked in as 1.7
        assert "* scale)" in kernel and "1.7f" not in kernel
    if name == "l1_normalize_square":  # 32 x 32: the row sums are per row, not per column
        assert "v_sum" in kernel


def test_a_nan_in_the_input_comes_out_where_torch_puts_it(tmp_path, build_cache):
    """A NaN in a row makes that row's maximum NaN and relu(NaN) is NaN, in torch and in the lowered kernel
    (fmaxf would have dropped it)."""
    inputs = "[torch.where(torch.arange(60).reshape(6, 10) == 13, float('nan'), torch.randn(6, 10))]"
    problem = _problem(tmp_path, "relu_plus_row_max", "pass", "return torch.relu(x) + x.amax(dim=-1, keepdim=True)",
                       inputs, "[]")
    scaffold = build_scaffold(problem)
    want, got = _run(problem, scaffold, lower(problem, scaffold))
    assert torch.isnan(want[1]).all() and not torch.isnan(want[0]).any()  # row 1 holds the NaN
    torch.testing.assert_close(got, want, equal_nan=True, atol=1e-5, rtol=1e-5)
    # the same along a middle dimension (the tiled form): the NaN at [0, 2, 5] makes column 5 of sample 0 NaN
    inputs = "[torch.where(torch.arange(120).reshape(2, 6, 10) == 25, float('nan'), torch.randn(2, 6, 10))]"
    problem = _problem(tmp_path, "relu_plus_channel_max", "pass",
                       "return torch.relu(x) + x.amax(dim=1, keepdim=True)", inputs, "[]")
    scaffold = build_scaffold(problem)
    want, got = _run(problem, scaffold, lower(problem, scaffold))
    assert torch.isnan(want[0, :, 5]).all() and torch.isnan(want).sum() == 6
    torch.testing.assert_close(got, want, equal_nan=True, atol=1e-5, rtol=1e-5)


def test_what_the_lowering_does_not_write_gives_no_seed(tmp_path):
    """A reduction over two dimensions, a matrix product, a pooling with an operator after it, a gather of
    each element by its own index: no lowered kernel (None), no wrong one."""
    middle = _problem(tmp_path, "sum_two_dims", "pass", "return x.sum(dim=(1, 2))", "[torch.randn(4, 8, 16)]", "[]")
    matmul = _problem(tmp_path, "matmul", "self.w = nn.Parameter(torch.randn(16, 16))", "return x @ self.w",
                      "[torch.randn(4, 16)]", "[]")
    pool_relu = _problem(tmp_path, "pool_relu", "pass", "return torch.relu(F.max_pool1d(x, 2))",
                         "[torch.randn(4, 8, 16)]", "[]")
    # a maximum of a running sum: the loop that takes the maximum would carry the sum on into the outputs
    scan_max = _problem(tmp_path, "cumsum_max", "pass", "return x - torch.cumsum(x, -1).amax(-1, keepdim=True)",
                        "[torch.randn(4, 16)]", "[]")
    # a gather with an index per element (a permutation of each row), not one a row
    permute = _problem(tmp_path, "gather_per_element", "pass", "return x.gather(-1, y)",
                       "[torch.randn(4, 16), torch.randint(0, 16, (4, 16))]", "[]")
    for problem in (middle, matmul, pool_relu, scan_max, permute):
        assert lower(problem, build_scaffold(problem)) is None, problem.name


def test_a_cuda_search_gets_the_lowering_as_a_kernel_and_its_launch():
    """A CUDA search's lowered seed is a ``__global__`` kernel and its launch on the search's stream. Its pointers are
    ``__restrict__`` (the output is a tensor of its own): without it the compiler keeps each load behind the store
    before it, and a lowered relu ran at 0.76x eager on an H100 (``lowered_seeds.py --device cuda``, docs). A row
    kernel and a pool kernel compile with nvcc where it is installed."""
    from kforge_desktop.kernels.native import syntax_check

    have_nvcc = shutil.which("nvcc") is not None or os.path.exists("/usr/local/cuda/bin/nvcc")
    for name in ("dev/log_softmax.py", "test/max_pool1d.py"):
        problem = load_problem(ROOT / "benchmarks" / "problems_generalize" / name)
        scaffold = build_scaffold(problem, "cuda")
        kernel = lower(problem, scaffold)
        assert kernel is not None
        assert "__global__ void lowered_" in kernel and "<<<" in kernel and "stream>>>" in kernel
        head = kernel[kernel.index("__global__"):kernel.index("{", kernel.index("__global__"))]
        pointers = [p for p in head.split(",") if "*" in p]
        assert pointers and all("__restrict__" in p for p in pointers), head
        if have_nvcc:
            assert syntax_check(scaffold.kernel_file(kernel), "cuda") is None


def test_a_session_without_a_fitting_exemplar_starts_from_the_lowered_reference(tmp_path, build_cache):
    """The seeds a search starts from: the lowered reference where no exemplar fits (it verifies), and
    only the exemplar where one does."""
    from kforge_desktop.kernels.evaluator import Evaluator
    from kforge_desktop.kernels.options import EvalOptions
    from kforge_desktop.search.config import SearchConfig
    from kforge_desktop.search.setup import LOWERED_SEED, create_session
    from kforge_desktop.store import SessionStore

    store = SessionStore(tmp_path / "s.kforge")
    config = SearchConfig(budget_candidates=1)
    log_softmax = load_problem(ROOT / "benchmarks" / "problems_generalize" / "dev" / "log_softmax.py")
    pid = create_session(store, log_softmax, config)
    seeds = [n for n in store.nodes(pid) if n.origin == "seed"]
    assert [n.directive for n in seeds] == [LOWERED_SEED]
    fast = EvalOptions(compare_compile=False, trials=3, run_timeout_s=120)
    with Evaluator("cpu", workers=1, options=fast, build_cache=build_cache) as ev:
        verdict = ev.evaluate(log_softmax, store.node(seeds[0].id).source)
    assert verdict.status == "ok", verdict.reason
    store.record_verdict(seeds[0].id, verdict)
    # what the user reads when that seed is the chosen kernel: who wrote it
    from kforge_desktop.cli.session_view import chosen_sentence
    line = chosen_sentence(store.node(seeds[0].id), [])
    assert "the reference lowered to plain loops (the model did not write it)" in line
    rms = create_session(store, load_problem(ROOT / "resources" / "problems" / "rms_norm.py"), config)
    assert [n.directive for n in store.nodes(rms) if n.origin == "seed"] == ["exemplar:rms_norm"]
    store.close()


def test_an_exp_above_88_is_exp_and_a_row_holding_infinity_gives_infinity(tmp_path, build_cache):
    """The seeds' fast_exp capped its argument at 88: a lowered logsumexp of a row holding +inf gave 88 where torch
    gives +inf, and exp(100) gave exp(88). Capped at 89 its 2^n overflows to +inf past 88.37 (exp overflows a float
    past 88.72), so a logsumexp of rows with +inf, -inf, NaN and values near exp's limit is torch's, and so is an exp of
    values up to 88.3 and from 88.8 on (between the two it gives +inf a little early)."""
    rows = ("[torch.stack([torch.tensor([float('inf')] + [0.0] * 49), torch.tensor([float('-inf')] * 50), "
            "torch.tensor([float('nan')] + [1.0] * 49), torch.full((50,), 88.5), torch.linspace(80.0, 88.7, 50), "
            "torch.randn(50) * 3])]")
    for name, forward, inputs in (("logsumexp_edges", "return torch.logsumexp(x, dim=-1)", rows),
                                  ("exp_near_overflow", "return torch.exp(x)", "[torch.cat([torch.linspace(60.0, 88.3, 2048), "
                                   "torch.linspace(88.8, 100.0, 2047), torch.tensor([float('inf')])])]")):
        problem = _problem(tmp_path, name, "pass", forward, inputs, "[]")
        scaffold = build_scaffold(problem)
        kernel = lower(problem, scaffold)
        assert "fast_exp(" in kernel.replace(function_text(kernel, "fast_exp"), ""), name
        want, got = _run(problem, scaffold, kernel)
        torch.testing.assert_close(got, want, atol=0.0, rtol=1e-5, equal_nan=True)  # +inf where torch has +inf
        assert torch.equal(torch.isinf(got), torch.isinf(want)) and torch.isinf(want).any(), name


def test_an_exp_of_a_value_minus_its_rows_maximum_is_not_capped_and_the_values_stay_the_same(tmp_path, build_cache):
    """In a softmax, a log-softmax or a cross-entropy the exp's argument is a value minus the maximum of its row,
    never positive: the lowered kernel calls fast_exp_neg there (the exp without the cap at exp(88) to test; 1.05-1.2x
    on such seeds, benchmarks/exp_clamp.py), and the capped fast_exp where that is not proved (a sigmoid's -x,
    logsumexp's maximum replaced by 0 where it is infinite). The values are the capped kernel's bit for bit, on rows
    that span far more than exp's range and hold -inf."""
    for name in ("log_softmax", "nll_of_log_softmax", "key_padding_softmax", "broadcast_middle"):
        problem = _problem(tmp_path, name, *REFERENCES[name])
        assert "fast_exp_neg(" in lower(problem, build_scaffold(problem)), name
    for name in ("logsumexp_rows", "tanh_sigmoid_maximum", "minus_row_min"):
        problem = _problem(tmp_path, name, *REFERENCES[name])
        kernel = lower(problem, build_scaffold(problem))
        helpers = function_text(kernel, "fast_exp") + function_text(kernel, "fast_exp_neg")  # fast_exp calls it
        own = kernel.replace(function_text(kernel, "fast_exp"), "").replace(function_text(kernel, "fast_exp_neg"), "")
        assert "fast_exp(" in own and "fast_exp_neg(" not in own and "x > 89.0f" in helpers, name
    wide = ("[torch.where(torch.arange(1536).reshape(16, 96) % 7 == 3, float('-inf'), torch.randn(16, 96) * "
            "torch.logspace(-2, 3, 16)[:, None])]")
    problem = _problem(tmp_path, "log_softmax_wide", "pass", "return torch.log_softmax(x, dim=-1)", wide, "[]")
    scaffold = build_scaffold(problem)
    kernel = lower(problem, scaffold)
    uncapped = "(x < -87.0f ? -87.0f : x) * 1.44269504f"
    assert uncapped in kernel and "x > 88.0f" not in kernel
    want, got = _run(problem, scaffold, kernel)
    _, capped = _run(problem, scaffold, kernel.replace(uncapped, "(x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x)) "
                                                                 "* 1.44269504f"))
    assert torch.equal(got, capped)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)  # -inf where the input is -inf, as torch


def test_a_maximum_whose_nan_every_output_gets_through_the_rows_sum_skips_its_own_nan_test(tmp_path, build_cache):
    """In a softmax, a log-softmax, a logsumexp and a cross-entropy (an ignored target included), a NaN in a row
    reaches every output of that row through the row's exp-sum, so the maximum's loop needs no NaN test of its own
    (its values are torch's on rows holding NaN, +inf and both); where the maximum reaches an output otherwise
    (``relu(x) + amax``, the test above) it keeps it."""
    rows = ("torch.stack([torch.randn(40) * 3, torch.tensor([float('nan')] + [0.5] * 39), torch.full((40,), float('nan')), "
            "torch.tensor([float('inf')] + [1.0] * 39), torch.tensor([float('inf'), float('nan')] + [1.0] * 38), "
            "torch.randn(40) * 3])")
    cases = (("softmax_scaled", "return torch.softmax(x * 1.7, dim=-1)", f"[{rows}]"),
             ("log_softmax_nan", "return torch.log_softmax(x, dim=-1)", f"[{rows}]"),
             ("logsumexp_nan", "return torch.logsumexp(x, dim=-1)", f"[{rows}]"),
             ("smoothed_ce_ignored", "return F.cross_entropy(x, y, reduction='none', label_smoothing=0.1)",
              f"[{rows}, torch.tensor([3, 5, -100, 0, 1, -100])]"))
    for name, forward, inputs in cases:
        problem = _problem(tmp_path, name, "pass", forward, inputs, "[]")
        scaffold = build_scaffold(problem)
        kernel = lower(problem, scaffold)
        assert kernel is not None and "row_max(" in kernel and "NAN" not in function_text(kernel, "row_max"), name
        want, got = _run(problem, scaffold, kernel)
        assert torch.isnan(want[1]).all() and not torch.isnan(want[0]).any(), name  # row 1 holds a NaN
        torch.testing.assert_close(got, want, equal_nan=True, atol=1e-5, rtol=1e-5)
    relu_max = _problem(tmp_path, "relu_plus_max", "pass", "return torch.relu(x) + x.amax(dim=-1, keepdim=True)",
                        f"[{rows}]", "[]")
    assert "NAN" in function_text(lower(relu_max, build_scaffold(relu_max)), "row_max")
