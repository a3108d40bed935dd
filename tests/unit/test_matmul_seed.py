"""A linear layer's target (what ``kforge profile`` writes: ``F.linear(x, weight, None)``) and other
single products get the matmul exemplar (Triton, fp32 as three TF32 products) as a GPU seed; the
evaluator verifies it here under Triton's interpreter (no GPU). Anything more in the forward gets no
seed. The softmax exemplar (used by the attention's two-product form) is checked the same way.
Speed on the GPU: ``benchmarks/matmul_gpu.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from kforge_desktop.kernels.evaluator import Evaluator
from kforge_desktop.kernels.options import EvalOptions
from kforge_desktop.modelopt.loader import load_model_file
from kforge_desktop.modelopt.problems import write_problem
from kforge_desktop.modelopt.profile import profile_model
from kforge_desktop.problem.problem import load_problem
from kforge_desktop.search.attention_seed import exemplar_code
from kforge_desktop.search.matmul_seed import matmul_module

REPO = Path(__file__).resolve().parents[2]
OPTS = EvalOptions(compare_compile=False, trials=3, run_timeout_s=120)

PRODUCT = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, a, b, c):
        {body}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
'''

FITS = {  # forward body -> inputs: each a product the exemplar computes
    "linear with a bias": ("return F.linear(a, b, c)", "torch.randn(2, 37, 70), torch.randn(45, 70), torch.randn(45)"),
    "a @ b.t()": ("return a @ b.t()", "torch.randn(37, 70), torch.randn(45, 70), torch.zeros(1)"),
    "addmm": ("return torch.addmm(c, a, b)", "torch.randn(37, 70), torch.randn(70, 45), torch.randn(45)"),
    "batched, a view of the result": ("y = torch.bmm(a, b)\n        return y.reshape(-1, 45)",
                                      "torch.randn(3, 20, 70), torch.randn(3, 70, 45), torch.zeros(1)"),
    "batched, broadcast": ("return torch.matmul(a, b)", "torch.randn(3, 20, 70), torch.randn(70, 45), torch.zeros(1)"),
}


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory):
    with Evaluator("cpu", workers=1, options=OPTS, build_cache=tmp_path_factory.mktemp("b")) as ev:
        yield ev


def _problem(tmp_path: Path, body: str, inputs: str):
    path = tmp_path / "product.py"
    path.write_text(PRODUCT.replace("{body}", body).replace("{inputs}", inputs))
    return load_problem(path)


@pytest.mark.parametrize("form", list(FITS))
def test_the_matmul_exemplar_computes_the_product(form, tmp_path, evaluator):
    problem = _problem(tmp_path, *FITS[form])
    source = matmul_module(problem.source)
    assert source is not None, form
    verdict = evaluator.evaluate(problem, source)
    assert verdict.status == "ok", verdict.summary() + "\n" + verdict.log[-2000:]
    assert verdict.rel_l2_err < 2e-5


def test_a_models_linear_target_gets_the_exemplar(tmp_path, evaluator):
    """The decoder block's linear layers, as the profile writes them (one target, several shapes)."""
    mf = load_model_file(REPO / "resources" / "examples" / "llm_block.py")
    p = profile_model(mf.model, list(mf.inputs), name=mf.name, runs=1)
    target = next(t for t in p.profile.targets if t.kind == "linear")
    tp = write_problem(target, p.analysis.cuts[target.name], p.analysis.captures[target.name], tmp_path, mf.name)
    problem = load_problem(tp.path)
    source = matmul_module(problem.source)
    assert source is not None and "linear(mm_a, mm_b)" in source
    verdict = evaluator.evaluate(problem, source)
    assert verdict.status == "ok", verdict.summary() + "\n" + verdict.log[-2000:]


@pytest.mark.parametrize("body", [
    "return torch.relu(a @ b)",  # an epilogue the exemplar does not compute
    "return a @ b + 1.0",
    "return (a * 2.0) @ b",
    "return a @ b @ c",  # two products
    "return F.linear(a, b, c).sum(-1)",
])
def test_anything_else_in_the_forward_means_no_seed(body):
    assert matmul_module(PRODUCT.replace("{body}", body).replace("{inputs}", "")) is None


def test_a_gpu_search_of_a_linear_target_starts_from_the_exemplar(tmp_path):
    from kforge_desktop.search.config import SearchConfig
    from kforge_desktop.search.setup import create_session
    from kforge_desktop.store import SessionStore

    problem = _problem(tmp_path, *FITS["linear with a bias"])
    for device, expected in (("cuda", 1), ("cpu", 0)):
        store = SessionStore(tmp_path / f"{device}.kforge")
        pid = create_session(store, problem, SearchConfig(device=device, compile_seed=False))
        seeds = [n for n in store.nodes(pid) if n.directive == "exemplar:matmul"]
        assert len(seeds) == expected, device
        if seeds:
            assert seeds[0].language == "triton" and seeds[0].source == matmul_module(problem.source)
        store.close()


SOFTMAX = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    x = torch.randn({shape}) * 4
    x[0, :7] = float("-inf")  # part of a row masked
    return [x]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("shape, block", [("6, 50", None), ("5, 3000", 512)])
def test_the_softmax_exemplar_computes_rows_in_one_pass_or_two(shape, block, tmp_path, evaluator):
    """A row that fits in one block is read once; a wider one (a block of 512 forced here) in two
    passes with a running max and sum."""
    code = exemplar_code("softmax")
    if block is not None:
        assert "_MAX_BLOCK = 16384" in code
        code = code.replace("_MAX_BLOCK = 16384", f"_MAX_BLOCK = {block}")
    module = ("import torch\nimport torch.nn as nn\n\n" + code + "\n\nclass ModelNew(nn.Module):\n"
              "    def forward(self, x):\n        return softmax(x)\n")
    path = tmp_path / "softmax.py"
    path.write_text(SOFTMAX.replace("{shape}", shape))
    verdict = evaluator.evaluate(load_problem(path), module)
    assert verdict.status == "ok", verdict.summary() + "\n" + verdict.log[-2000:]


@pytest.mark.parametrize("body, fits", [
    ("return torch.softmax(a, dim=-1)", True),
    ("return F.softmax(a.view(-1, 10), -1).view(a.shape)", True),
    ("return a.softmax(-1)", True),
    ("return torch.softmax(a, dim=1)", False),  # not the last dimension of a 2-D input
    ("return torch.softmax(a * 2.0, dim=-1)", False),  # a scale the exemplar does not compute
    ("return torch.softmax(a, dim=-1, dtype=torch.float64)", False),
])
def test_a_row_softmax_gets_the_softmax_exemplar(body, fits, tmp_path, evaluator):
    """A forward that is one softmax over the last dimension gets the softmax exemplar as a GPU seed
    (verified here); anything else gets none."""
    from kforge_desktop.search.matmul_seed import softmax_module

    problem_source = PRODUCT.replace("{body}", body).replace("{inputs}", "torch.randn(6, 40), torch.zeros(1), torch.zeros(1)")
    module = softmax_module(problem_source)
    assert (module is not None) == fits, body
    if fits:
        path = tmp_path / "softmax_problem.py"
        path.write_text(problem_source)
        verdict = evaluator.evaluate(load_problem(path), module)
        assert verdict.status == "ok", verdict.summary() + "\n" + verdict.log[-2000:]
