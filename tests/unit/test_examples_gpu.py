"""The GPU-sized example models: they import and build on a machine without a GPU (at full size on
the meta device, so nothing is allocated), run at a reduced size on the CPU, and profile into the
targets a search would work on. Their full-size forward is for a GPU (``benchmarks/model_e2e_gpu.py``).
"""

from __future__ import annotations

import runpy

import pytest
import torch

from kforge_desktop.modelopt.loader import is_model_file
from kforge_desktop.modelopt.profile import profile_model
from kforge_desktop.paths import RESOURCES

EX = RESOURCES / "examples"

# name -> (full-size checks on the meta model, reduced model kwargs, reduced input kwargs, target kinds)
CASES = {
    "llm_block_gpu": (dict(dim=128, heads=4, hidden=344), dict(batch=2, seq=32, dim=128),
                      {"rms_norm", "softmax", "swiglu"}),
    "diffusion_block_gpu": (dict(channels=32, groups=8), dict(batch=2, channels=32, size=8),
                            {"norm", "attention"}),
    "vision_stage_gpu": (dict(width=8, classes=10), dict(batch=2, size=32), {"norm", "pool"}),
}


def _load(name: str) -> dict:
    path = EX / f"{name}.py"
    assert is_model_file(path)
    return runpy.run_path(str(path))


@pytest.mark.parametrize("name", sorted(CASES))
def test_full_size_builds_without_allocating(name):
    ns = _load(name)
    with torch.device("meta"):
        model = ns["get_model"]()
    assert all(p.is_meta for p in model.parameters())
    x = ns["get_inputs"](device="meta")[0]
    assert x.is_meta and x.dtype == torch.float32
    if name == "llm_block_gpu":
        b, t, d = x.shape
        assert d >= 2048 and t >= 1024 and b * t >= 4096
        assert model.attn.qkv.out_features == 3 * d  # one Linear for q, k and v
    elif name == "diffusion_block_gpu":
        assert x.shape[1] >= 256 and x.shape[2] * x.shape[3] >= 4096  # attention over >= 4096 positions
    else:
        assert x.shape[0] >= 32 and x.shape[2] >= 224


@pytest.mark.parametrize("name", sorted(CASES))
def test_reduced_size_runs_and_profiles_into_targets(name):
    ns = _load(name)
    model_kw, input_kw, kinds = CASES[name]
    model = ns["get_model"](**model_kw).eval()
    inputs = ns["get_inputs"](**input_kw)
    with torch.no_grad():
        out = model(*inputs)
    assert torch.isfinite(out).all()
    profiled = profile_model(model, inputs, "cpu", name=name, runs=1, warmup=1, captures_per_variant=0)
    assert not profiled.profile.untraced  # every module's code is traced: nothing hides from the search
    found = {t.kind for t in profiled.profile.targets}
    assert kinds <= found, found


def test_llm_block_attention_is_causal():
    ns = _load("llm_block_gpu")
    model = ns["get_model"](dim=64, heads=4, hidden=128).eval()
    x = ns["get_inputs"](batch=1, seq=16, dim=64)[0]
    y = x.clone()
    y[:, 8:] += 1.0  # change only the future of the first 8 tokens
    with torch.no_grad():
        torch.testing.assert_close(model(x)[:, :8], model(y)[:, :8])
