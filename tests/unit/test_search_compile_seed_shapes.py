"""A target the model calls at several sizes (a CNN's BatchNorm + ReLU at every stage) is verified on
all of its captured inputs; torch.compile's seed for it must work at every one of those sizes, not
only at ``get_inputs()``'s (its sizes were fixed, so its size asserts failed on the second stage).
Generated here on the CPU (Inductor's C++), as the GPU generates Triton; the GPU verdict is in
``tests/gpu/test_search_compile_seed.py``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

from kforge_desktop.problem.problem import load_problem
from kforge_desktop.search.inductor_seed import inductor_module

PROBLEM = Path(__file__).resolve().parents[1] / "candidates" / "shapes" / "bn_relu_two_shapes.py"


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_compile_seed_of_a_target_called_at_two_sizes_is_right_at_both(tmp_path):
    problem = load_problem(PROBLEM)
    source = inductor_module(problem, "cpu")
    forward = source.split("class ModelNew", 1)[1]
    assert "x.shape[" in forward  # the sizes come from the input, not from the first call's numbers
    (tmp_path / "seed.py").write_text(source)
    seed, ref = _module(tmp_path / "seed.py", "seed_two_shapes"), _module(PROBLEM, "problem_two_shapes")
    shapes = set()
    for inputs in ref.get_replay_inputs():
        want = ref.Model()(*inputs)
        got = seed.ModelNew()(*[x.clone() for x in inputs])
        assert got.shape == want.shape and torch.allclose(got, want, atol=1e-5, rtol=1e-5)
        shapes.add(tuple(inputs[0].shape))
    assert len(shapes) == 2
