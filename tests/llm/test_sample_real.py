"""``kforge sample`` asks what a search asks first (the real small GGUF; no evaluation)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.llm

REPO = Path(__file__).resolve().parents[2]


def _sample(problem: Path, out: Path, model: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "kforge_desktop", "sample", str(problem), "--llm", str(model),
                           "--out", str(out), "--max-tokens", "160", *extra], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)


def test_edits_of_the_seed_each_carry_another_directive(tmp_path, test_model_path):
    """The bias + GELU seed lacks two changes: a launch shape, and fast math where the GELU is computed."""
    run = _sample(REPO / "resources" / "problems" / "gelu_bias.py", tmp_path / "edits", test_model_path,
                  "--target", "cuda", "--kind", "edit", "--n", "2")
    assert run.returncode == 0, run.stderr
    asked = re.findall(r"^\[\d/2\] (\w+)(?:@\w+)?: ", run.stderr, re.M)
    assert len(asked) == 2 and len(set(asked)) == 2, run.stderr  # two different changes asked of the seed
    # what a CUDA exemplar seed has already (float4 loads, a stride over its rows) is not asked for
    assert not set(asked) & {"vectorized_loads", "warp_reductions", "grid_stride", "fusion"}
    assert len(list((tmp_path / "edits").glob("candidate_00[01].*"))) == 2
    # --start 1 asks the second of those requests alone: the same directive, the same file name
    again = _sample(REPO / "resources" / "problems" / "gelu_bias.py", tmp_path / "again", test_model_path,
                    "--target", "cuda", "--kind", "edit", "--n", "2", "--start", "1")
    assert again.returncode == 0, again.stderr
    assert re.findall(r"^\[(\d)/2\] (\w+)(?:@\w+)?: ", again.stderr, re.M) == [("2", asked[1])], again.stderr
    assert [f.name.split(".")[0] for f in (tmp_path / "again").iterdir()] == ["candidate_001"]


def test_an_edit_of_a_problem_no_exemplar_fits_says_to_sample_whole_kernels(tmp_path, test_model_path):
    # a cumulative sum down the columns: no exemplar fits, and the lowering takes running sums along rows only
    problem = tmp_path / "cumsum_columns.py"
    problem.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                       "    def forward(self, x):\n        return torch.cumsum(x, dim=0)\n\n\n"
                       "def get_inputs():\n    return [torch.randn(64, 32)]\n\n\n"
                       "def get_init_inputs():\n    return []\n")
    run = _sample(problem, tmp_path / "none", test_model_path, "--target", "cpp", "--kind", "edit", "--n", "1")
    assert run.returncode == 2
    assert "no exemplar fits this problem" in run.stderr and "sample whole kernels" in run.stderr


def test_an_edit_of_a_problem_no_exemplar_fits_edits_the_reference_lowered_to_loops(tmp_path, test_model_path):
    """A log-softmax has no exemplar seed but lowers to loops: a search edits that seed, and so does the sample."""
    problem = REPO / "benchmarks" / "problems_generalize" / "dev" / "log_softmax.py"
    run = _sample(problem, tmp_path / "lowered", test_model_path, "--target", "cpp", "--kind", "edit", "--n", "1")
    assert run.returncode == 0, run.stderr
    assert re.search(r"^\[1/1\] \w+", run.stderr, re.M), run.stderr
    assert len(list((tmp_path / "lowered").glob("candidate_000.*"))) == 1


def test_a_whole_kernel_is_asked_with_the_nearest_example_and_what_differs(test_model_path):
    """A log-softmax gets the row softmax example and the search's sentence on what differs (the log):
    exactly the request the search's first whole kernel makes."""
    from kforge_desktop.llm.llama_backend import LlamaCppGenerator
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.sampling import sample_candidates

    problem = load_problem(REPO / "benchmarks" / "problems_generalize" / "dev" / "log_softmax.py")
    gen = LlamaCppGenerator(test_model_path, n_ctx=4096)
    asked = []
    real_generate = gen.generate
    gen.generate = lambda req, **kw: asked.append(req) or real_generate(req, **kw)
    try:
        [sample] = list(sample_candidates(problem, gen, 1, target="cpp", max_tokens=64))
    finally:
        gen.close()
    prompt = "\n".join(m.content for m in asked[0].messages)
    assert "kernel_forward" in prompt and "straightforward, correct kernel first" in prompt
    assert "change it where this model differs" in prompt and "log" in prompt.split("differs:")[1]
    assert sample.directive == "straightforward"


def test_every_edit_sample_asks_the_one_directive_named(tmp_path, test_model_path):
    """``--directive`` measures one request: each sample asks for it (hoisting the lowered L2 normalization's
    division here); a key that does not exist, one that cannot change the seed (its rows run in parallel already)
    and one given without ``--kind edit`` are errors that say what to do, and nothing is written."""
    problem = REPO / "benchmarks" / "problems_generalize" / "dev" / "l2_normalize.py"
    run = _sample(problem, tmp_path / "hoist", test_model_path, "--kind", "edit", "--n", "2",
                  "--directive", "hoist_invariants")
    assert run.returncode == 0, run.stderr
    assert re.findall(r"^\[\d/2\] ([\w@]+): ", run.stderr, re.M) == ["hoist_invariants"] * 2, run.stderr
    for extra, said in ((("--kind", "edit", "--directive", "hoist"), "no cpp directive 'hoist'"),
                        (("--kind", "edit", "--directive", "openmp_rows"), "cannot change this problem's seed"),
                        (("--directive", "hoist_invariants"), "add --kind edit")):
        bad = _sample(problem, tmp_path / "bad", test_model_path, "--n", "1", *extra)
        assert bad.returncode == 2 and said in bad.stderr, bad.stderr
    assert not (tmp_path / "bad").exists() or not any((tmp_path / "bad").iterdir())
