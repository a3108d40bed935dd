"""Problem and candidate files: every malformed case gets one clear sentence."""

from __future__ import annotations

import pytest

from kforge_desktop.kernels.candidate import CandidateError, detect_language, static_problems
from kforge_desktop.problem.problem import ProblemError, load_problem

GOOD = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.randn(4, 4)]
def get_init_inputs():
    return []
"""


def write(tmp_path, text, name="p.py"):
    f = tmp_path / name
    f.write_text(text)
    return f


def test_good_problem_loads(tmp_path):
    p = load_problem(write(tmp_path, GOOD))
    assert p.name == "p" and "Model" in p.source
    mod = p.load_module()
    assert mod.Model()(*mod.get_inputs()).shape == (4, 4)


@pytest.mark.parametrize(
    "text, words",
    [
        (GOOD.replace("def forward(self, x):", "def forward(self, x)"), "syntax error on line"),
        (GOOD.replace("def get_inputs", "def other_inputs"), "does not define get_inputs"),
        (GOOD.replace("class Model", "class Network"), "does not define Model"),
        (GOOD + "\nraise RuntimeError('boom')\n", "raised RuntimeError when imported: boom"),
    ],
)
def test_malformed_problem_says_what_is_wrong(tmp_path, text, words):
    with pytest.raises(ProblemError) as err:
        load_problem(write(tmp_path, text))
    assert words in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_and_folder_paths(tmp_path):
    with pytest.raises(ProblemError, match="does not exist"):
        load_problem(tmp_path / "nope.py")
    with pytest.raises(ProblemError, match="is a folder"):
        load_problem(tmp_path)


def test_candidate_static_checks():
    assert static_problems("import torch\nclass Other: pass\n") == ["the candidate module defines no class ModelNew"]
    assert "inherits" in static_problems("class ModelNew(Model):\n    def forward(self, x): return x\n")[0]
    with pytest.raises(CandidateError, match="syntax error on line 1"):
        static_problems("class ModelNew(:\n")


def test_language_detection():
    assert detect_language('load_native(SRC, lang="cuda")') == "cuda"
    assert detect_language('load_native(SRC, lang="cpp")') == "cpp"
    assert detect_language("import triton\n@triton.jit\ndef k(): pass") == "triton"
    assert detect_language("load_inline(name='x', cpp_sources=s, cuda_sources=c)") == "cuda"
