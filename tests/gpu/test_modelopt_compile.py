"""On the GPU, a CUDA kernel put back into a model is a custom op that ``torch.compile`` keeps:
``torch.compile(patched, fullgraph=True)`` (inductor, Triton around the op) has no graph break,
runs the kernel and matches the original."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.gpu


def test_compiled_patched_model_runs_the_cuda_kernel(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from kforge_desktop.modelopt.integrate import ChosenKernel, integrate
    from kforge_desktop.modelopt.loader import load_model_file
    from kforge_desktop.modelopt.problems import write_problem
    from kforge_desktop.modelopt.profile import profile_model
    from kforge_desktop.paths import RESOURCES

    kernel = (RESOURCES / "examples" / "kernels" / "cuda" / "llm_block_rms_norm.py").read_text()
    mf = load_model_file(RESOURCES / "examples" / "llm_block.py", "cuda")
    p = profile_model(mf.model, list(mf.inputs), "cuda", name=mf.name, runs=1)
    rms = next(t for t in p.profile.targets if t.kind == "rms_norm")
    tp = write_problem(rms, p.analysis.cuts[rms.name], p.analysis.captures[rms.name], tmp_path, mf.name)
    with torch.no_grad():
        before = mf.model(*mf.inputs)
    integ = integrate(mf.model, p.analysis, {rms.name: ChosenKernel(rms.name, kernel, tp.signatures)},
                      list(mf.inputs), mf.make_inputs, "cuda")
    assert integ.ok and integ.kept == [rms.name], integ.dropped
    h = integ.handle
    torch._dynamo.reset()
    try:
        with torch.no_grad():
            explained = torch._dynamo.explain(mf.model)(*mf.inputs)
        assert explained.graph_break_count == 0, [str(b.reason) for b in explained.break_reasons]
        torch._dynamo.reset()
        compiled = torch.compile(mf.model, fullgraph=True)
        with torch.no_grad():
            compiled(*mf.inputs)
            h.reset_stats()
            got = compiled(*mf.inputs)
        torch.testing.assert_close(got, before, rtol=1e-4, atol=1e-4)
        assert h.stats() == {rms.name: (2, 0)}
    finally:
        torch._dynamo.reset()
        h.remove()


def test_a_convolutions_problem_reproduces_the_model_on_the_gpu(tmp_path):
    """A GPU convolution runs in TF32 by default: the target's problem is checked against the
    captured output on the GPU it was captured on, so a conv target is searchable there."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from kforge_desktop.modelopt.loader import load_model_file
    from kforge_desktop.modelopt.problems import write_problem
    from kforge_desktop.modelopt.profile import profile_model
    from kforge_desktop.paths import RESOURCES

    assert torch.backends.cudnn.allow_tf32  # what a user has unless they turn it off
    mf = load_model_file(RESOURCES / "examples" / "diffusion_block.py", "cuda")
    p = profile_model(mf.model, list(mf.inputs), "cuda", name=mf.name, runs=1)
    convs = [t for t in p.profile.targets if t.kind == "conv"]
    assert convs
    for t in convs:
        tp = write_problem(t, p.analysis.cuts[t.name], p.analysis.captures[t.name], tmp_path, mf.name)
        assert tp.path.exists()
