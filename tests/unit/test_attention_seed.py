"""An attention written the ordinary way becomes one target, and the flash-attention exemplar (Triton)
fitted to its problem computes it: verified here by the evaluator under Triton's interpreter (no GPU),
on the problems ``kforge profile`` writes for the GPU example models at small sizes. A forward with
anything the exemplar does not compute gets no seed. Speed on the GPU: ``benchmarks/attention_gpu.py``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kforge_desktop.kernels.evaluator import Evaluator
from kforge_desktop.kernels.options import EvalOptions
from kforge_desktop.modelopt.loader import load_model_file
from kforge_desktop.modelopt.problems import write_problem
from kforge_desktop.modelopt.profile import profile_model
from kforge_desktop.problem.problem import load_problem
from kforge_desktop.search.attention_seed import attention_module, attention_products_module

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "resources" / "examples"
OPTS = EvalOptions(compare_compile=False, trials=3, run_timeout_s=120)

SMALL = {  # the GPU example models at sizes a CPU runs in a second: get_model and get_inputs arguments
    "llm_block_gpu": ({"dim": 64, "heads": 4, "hidden": 96}, {"batch": 2, "seq": 40, "dim": 64}),
    "diffusion_block_gpu": ({"channels": 32, "groups": 8}, {"batch": 2, "channels": 32, "size": 6}),
}


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory):
    with Evaluator("cpu", workers=1, options=OPTS, build_cache=tmp_path_factory.mktemp("b")) as ev:
        yield ev


def _small_model(name: str, tmp_path: Path):
    model_args, input_args = SMALL[name]
    path = tmp_path / f"{name}_small.py"
    path.write_text(f"import sys\nsys.path.insert(0, {str(EXAMPLES)!r})\nimport {name} as example\n\n\n"
                    f"def get_model():\n    return example.get_model(**{model_args!r})\n\n\n"
                    f"def get_inputs(device='cpu'):\n    return example.get_inputs(device=device, **{input_args!r})\n")
    return load_model_file(path)


def _attention_problem(name: str, tmp_path: Path):
    mf = _small_model(name, tmp_path)
    p = profile_model(mf.model, list(mf.inputs), name=mf.name, runs=1, masked_attention=True)  # as on a GPU
    attention = [t for t in p.profile.targets if t.kind == "attention"]
    assert len(attention) == 1, [(t.kind, t.ops) for t in p.profile.targets]
    (target,) = attention
    tp = write_problem(target, p.analysis.cuts[target.name], p.analysis.captures[target.name], tmp_path, mf.name)
    return target, load_problem(tp.path)


def test_a_causal_attention_with_its_mask_built_in_forward_is_one_target(tmp_path):
    target, problem = _attention_problem("llm_block_gpu", tmp_path)
    # q @ k^T, the scale, the mask (ones(t, t).triu(1), made in forward), masked_fill, softmax, @ v
    assert target.ops == ("matmul", "mul", "triu", "masked_fill", "softmax", "matmul")
    assert "masked_fill" in problem.source and "triu" in problem.source


def test_on_a_cpu_the_masked_softmax_stays_a_target_of_its_own(tmp_path):
    """No attention kernel runs on a CPU; the masked softmax has a C++ exemplar there."""
    mf = _small_model("llm_block_gpu", tmp_path)
    kinds = {t.kind: t for t in profile_model(mf.model, list(mf.inputs), name=mf.name, runs=1).profile.targets}
    assert "attention" not in kinds
    assert {"triu", "masked_fill", "softmax"} <= set(kinds["softmax"].ops)


@pytest.mark.parametrize("fit, call", [(attention_module, "attention("), (attention_products_module, "matmul(")])
@pytest.mark.parametrize("name", ["llm_block_gpu", "diffusion_block_gpu"])
def test_the_attention_exemplar_computes_the_models_attention(name, fit, call, tmp_path, evaluator):
    """In one pass (flash attention), or as two products of the matmul exemplar around the softmax
    exemplar (a wide head, where the one-pass tiles do not fit): the evaluator accepts both as the
    candidate's own kernels (no PyTorch softmax or matmul called)."""
    _, problem = _attention_problem(name, tmp_path)
    source = fit(problem.source)
    assert source is not None and call in source.split("class ModelNew")[1]
    verdict = evaluator.evaluate(problem, source)
    assert verdict.status == "ok", verdict.summary() + "\n" + verdict.log[-2000:]
    assert verdict.rel_l2_err < 2e-5


MASKED = '''
import torch
import torch.nn as nn
from math import inf


class Model(nn.Module):
    def forward(self, q, k, v, m):
        s = torch.matmul(q, k.transpose(-2, -1)) / 4.0
        {mask}
        p = torch.softmax(s, dim=-1)
        return torch.matmul(p, v)


def get_inputs():
    return [torch.randn(2, 3, 24, 16), torch.randn(2, 3, 40, 16), torch.randn(2, 3, 40, 8), {m}]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("mask, m", [
    ("s = s.masked_fill(m, -inf)", "torch.rand(24, 40) < 0.3"),  # a mask given as an input
    ("t = m.tril(-2)\n        s = s.masked_fill(t, float('-inf'))", "torch.ones(24, 40, dtype=torch.bool)"),
])
def test_a_given_or_lower_triangular_mask_is_computed(mask, m, tmp_path, evaluator):
    path = tmp_path / "masked.py"
    path.write_text(MASKED.replace("{mask}", mask).replace("{m}", m))
    problem = load_problem(path)
    for fit in (attention_module, attention_products_module):
        source = fit(problem.source)
        assert source is not None
        verdict = evaluator.evaluate(problem, source)
        assert verdict.status == "ok", verdict.summary() + "\n" + verdict.log[-2000:]


@pytest.mark.parametrize("change", [
    ("s = torch.matmul(q, k.transpose(-2, -1)) / 4.0", "s = torch.matmul(q * 2.0, k.transpose(-2, -1)) / 4.0"),
    ("p = torch.softmax(s, dim=-1)", "p = torch.softmax(s, dim=-2)"),
    ("return torch.matmul(p, v)", "return torch.matmul(p, v) + 1.0"),
    ("return torch.matmul(p, v)", "return torch.matmul(p.exp(), v)"),
    ("return torch.matmul(p, v)", "return torch.matmul(p, v).reshape(q.sum(), -1)"),
])
def test_anything_else_in_the_forward_means_no_seed(change):
    """A forward with one more operation on values (or a size computed from them) is not an attention
    the exemplar computes: no seed, rather than a wrong one."""
    source = MASKED.replace("{mask}", "s = s").replace("{m}", "None")
    assert attention_module(source) is not None  # the plain form fits
    assert attention_module(source.replace(*change)) is None
    assert attention_products_module(source.replace(*change)) is None


LOAD_AND_RUN = """
import os, sys, torch
from kforge_desktop.modelopt.runtime import load_kernel
forward = load_kernel(open(sys.argv[1]).read(), "attention_test")
torch.manual_seed(0)
q, k, v = torch.randn(1, 2, 8, 16), torch.randn(1, 2, 12, 16), torch.randn(1, 2, 12, 8)
expected = torch.softmax(q @ k.transpose(-2, -1) / 4.0, -1) @ v
torch.testing.assert_close(forward(q, k, v, None), expected, rtol=1e-5, atol=1e-5)
print(forward.__func__.__code__.co_filename)
"""


def test_a_put_back_triton_kernel_loads_from_a_file(tmp_path):
    """The patched model loads a Triton kernel (Triton reads a @jit function's source from its file);
    run in a fresh interpreter under Triton's interpreter, as a process without a GPU would."""
    source = attention_module(MASKED.replace("{mask}", "s = s").replace("{m}", "None"))
    (tmp_path / "kernel.py").write_text(source)
    run = subprocess.run([sys.executable, "-c", LOAD_AND_RUN, str(tmp_path / "kernel.py")], capture_output=True,
                         text=True, env={**os.environ, "TRITON_INTERPRET": "1"}, cwd=REPO, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert os.path.isfile(run.stdout.strip().splitlines()[-1])


HIDDEN_NAN = """
import sys, torch
from kforge_desktop.modelopt.runtime import load_kernel
forward = load_kernel(open(sys.argv[1]).read(), "attention_test")
torch.manual_seed(0)
t = 200  # three row blocks of 64 under the interpreter; columns in blocks of 16, the last one partial
q, k, v = torch.randn(1, 2, t, 16), torch.randn(1, 2, t, 16), torch.randn(1, 2, t, 8)
v[0, 0, 190, 3], v[0, 1, 100, 5], k[0, 0, 150, 0] = float("nan"), float("inf"), float("nan")
mask = torch.ones(t, t, dtype=torch.bool)
expected = torch.softmax((q @ k.transpose(-2, -1) / 4.0).masked_fill(mask.triu(1), float("-inf")), -1) @ v
got = forward(q, k, v, mask)
assert expected.isnan().sum() > 200, "the reference has the NaN the test is about"
torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5, equal_nan=True)
"""


def test_a_nan_or_infinity_among_the_values_a_causal_mask_hides_comes_out_as_torchs_does(tmp_path):
    """The reference multiplies the values of the keys a causal mask hides by 0, so a NaN or an infinity there is
    NaN in every row's output; the exemplar skips a block of keys the mask hides from a whole block of rows, and
    must still pass it on (on the GPU, the verifier's trial with NaN in the inputs rejected the causal attention
    seed). A NaN in a hidden key stays hidden, as torch's masked_fill hides it. Run under Triton's interpreter."""
    source = attention_module(MASKED.replace("{mask}", "s = s.masked_fill(m.triu(1), -inf)").replace(
        "{m}", "torch.ones(40, 40, dtype=torch.bool)"))
    assert source is not None and "mask_kind=2" in source
    (tmp_path / "kernel.py").write_text(source)
    run = subprocess.run([sys.executable, "-c", HIDDEN_NAN, str(tmp_path / "kernel.py")], capture_output=True,
                         text=True, env={**os.environ, "TRITON_INTERPRET": "1"}, cwd=REPO, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]


def test_a_gpu_search_of_an_attention_starts_from_the_exemplar(tmp_path):
    """A search on a GPU places the fitted exemplar as a seed node (Triton, not an LLM candidate);
    a search on the CPU, where Triton only runs interpreted, does not."""
    from kforge_desktop.search.config import SearchConfig
    from kforge_desktop.search.setup import create_session
    from kforge_desktop.store import SessionStore

    _, problem = _attention_problem("llm_block_gpu", tmp_path)
    for device, expected in (("cuda", 1), ("cpu", 0)):
        store = SessionStore(tmp_path / f"{device}.kforge")
        pid = create_session(store, problem, SearchConfig(device=device, compile_seed=False))
        for directive, fit in (("exemplar:attention", attention_module),
                               ("exemplar:matmul+softmax", attention_products_module)):
            seeds = [n for n in store.nodes(pid) if n.directive == directive]
            assert len(seeds) == expected, (device, directive)
            if seeds:
                assert seeds[0].origin == "seed" and seeds[0].language == "triton"
                assert seeds[0].source == fit(problem.source)
        assert not [n for n in store.nodes(pid) if n.directive == "exemplar:matmul"]  # not a single product
        store.close()


def test_views_of_the_result_are_kept_around_the_call(tmp_path, evaluator):
    """A hand-written attention that reshapes its output (heads back into the hidden size) keeps that
    view around the exemplar's call, and verifies."""
    source = MASKED.replace("{mask}", "s = s").replace("{m}", "torch.zeros(1)").replace(
        "return torch.matmul(p, v)", "b, h, t, e = v.shape\n        return torch.matmul(p, v).transpose(1, 2).reshape(b, -1, h * e)")
    (tmp_path / "views.py").write_text(source)
    problem = load_problem(tmp_path / "views.py")
    module = attention_module(problem.source)
    assert module is not None and ".transpose(1, 2).reshape(" in module.split("class ModelNew")[1]
    verdict = evaluator.evaluate(problem, module)
    assert verdict.status == "ok", verdict.summary() + "\n" + verdict.log[-2000:]


def test_a_half_precision_attention_is_computed_in_its_dtype(tmp_path, evaluator):
    """fp16 inputs: the products take them as they are, softmax statistics stay fp32, the output is
    fp16 like the reference's."""
    source = MASKED.replace("{mask}", "s = s.masked_fill(m, -inf)").replace("{m}", "torch.rand(24, 40) < 0.3")
    source = source.replace("torch.randn(2, 3, 24, 16)", "torch.randn(2, 3, 24, 16).half()").replace(
        "torch.randn(2, 3, 40, 16)", "torch.randn(2, 3, 40, 16).half()").replace(
        "torch.randn(2, 3, 40, 8)", "torch.randn(2, 3, 40, 8).half()")
    (tmp_path / "half.py").write_text(source)
    problem = load_problem(tmp_path / "half.py")
    verdict = evaluator.evaluate(problem, attention_module(problem.source))
    assert verdict.status == "ok", verdict.summary() + "\n" + verdict.log[-2000:]
