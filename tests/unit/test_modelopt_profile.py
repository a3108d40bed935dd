"""Profiling the example models: the targets a user would optimize, and problems built from them.
A LLaMA-style decoder written the ordinary way (tests/unit/models/llama_decoder.py): its attention,
which torch.fx cannot trace, is captured through torch.export and becomes targets; the time outside
the targets is measured."""

from __future__ import annotations

import math
import runpy
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from kforge_desktop.modelopt.integrate import ChosenKernel, integrate
from kforge_desktop.modelopt.loader import load_model_file
from kforge_desktop.modelopt.problems import write_problem
from kforge_desktop.modelopt.profile import profile_model
from kforge_desktop.modelopt.report import profile_table
from kforge_desktop.paths import RESOURCES
from kforge_desktop.problem.problem import load_problem

LLAMA = Path(__file__).parent / "models" / "llama_decoder.py"


@pytest.fixture(scope="module")
def profiled():
    out = {}
    for name in ("vision_net", "diffusion_block", "llm_block"):
        mf = load_model_file(RESOURCES / "examples" / f"{name}.py")
        out[name] = (mf, profile_model(mf.model, list(mf.inputs), name=name, runs=3))
    return out


def _by_kind(profile, kind):
    return [t for t in profile.targets if t.kind == kind]


def _check_shares(profile):
    shares = [t.share for t in profile.targets]
    assert all(0 < s <= 1 for s in shares)
    assert shares == sorted(shares, reverse=True)  # the table is sorted by share
    assert sum(shares) + profile.other_ms / profile.op_ms == pytest.approx(1.0, abs=1e-6)


def test_llm_block_targets(profiled):
    _mf, p = profiled["llm_block"]
    prof = p.profile
    _check_shares(prof)
    (rms,) = _by_kind(prof, "rms_norm")  # the hand-written RMSNorm: one fusible target, not four kernels
    assert rms.ops == ("pow", "mean", "add", "rsqrt", "mul", "mul")
    assert rms.calls == 2 and set(rms.module_paths) == {"attn_norm", "mlp_norm"}
    assert rms.arg_names == ("x", "weight") and rms.param_args == (False, True)
    assert rms.shapes == ((2, 128, 256), (256,)) and rms.dtypes == ("float32", "float32")
    assert rms.strides[0] == (128 * 256, 256, 1)
    (attn,) = _by_kind(prof, "attention")  # matmul, scale, explicit softmax, matmul
    assert "softmax" in attn.ops and attn.module_paths == ("attn",)
    (swiglu,) = _by_kind(prof, "swiglu")
    assert swiglu.ops == ("silu", "mul")
    (linear,) = _by_kind(prof, "linear")  # seven projections, one target with three shape variants
    assert linear.calls == 7 and len(linear.variants) == 3
    for t in prof.targets:
        assert t.floor_ms > 0 and t.time_ms > 0 and t.headroom_floor is not None


def test_vision_net_targets(profiled):
    _mf, p = profiled["vision_net"]
    prof = p.profile
    _check_shares(prof)
    kinds = {t.name.split("_", 1)[1]: t for t in prof.targets}
    assert kinds["conv2d"].calls == 4
    bn = kinds["batch_norm_relu"]  # BatchNorm (eval) + ReLU fused into one target
    assert bn.calls == 4 and bn.ops == ("batch_norm", "relu")
    assert bn.arg_names == ("x", "running_mean", "running_var", "weight", "bias")
    assert kinds["max_pool2d"].calls == 2 and kinds["max_pool2d"].kind == "pool"
    assert "adaptive_avg_pool2d" in kinds and "linear" in kinds


def test_diffusion_block_targets(profiled):
    _mf, p = profiled["diffusion_block"]
    prof = p.profile
    _check_shares(prof)
    names = {t.name.split("_", 1)[1]: t for t in prof.targets}
    gn = names["group_norm_silu"]
    assert gn.calls == 2 and gn.ops == ("group_norm", "silu")
    assert names["group_norm"].module_paths == ("attn.norm",)
    (attn,) = _by_kind(prof, "attention")
    assert attn.ops == ("bmm", "mul", "softmax", "bmm")
    assert attn.shapes == ((2, 192, 16, 16),)  # takes the qkv projection; the chunk and views are inside
    assert names["add"].calls == 2


class _Functional(nn.Module):
    """RMSNorm spelled with torch functions, inside a module that also does other work."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(64, 64)

    def forward(self, x):
        h = self.proj(x)
        return h * torch.rsqrt(torch.mean(h * h, dim=-1, keepdim=True) + 1e-5)


class _Branchy(nn.Module):
    """Data-dependent control flow: torch.fx cannot trace this module's own forward."""

    def __init__(self):
        super().__init__()
        self.inner = _Functional()
        self.act = nn.GELU()

    def forward(self, x):
        if x.sum() > 0:
            return self.act(self.inner(x))
        return self.inner(x)


def test_untraceable_module_falls_back_to_its_children():
    model = _Branchy().eval()
    p = profile_model(model, [torch.randn(4, 64).abs()], runs=2)
    assert p.profile.untraced == ("(model)",)
    assert "torch.export failed" in dict(p.profile.untraced_why)["(model)"]  # the branch depends on the data
    assert p.profile.untraced_ms is not None and p.profile.untraced_ms >= 0  # its own code is timed
    (rms,) = _by_kind(p.profile, "rms_norm")
    assert rms.module_paths == ("inner",) and rms.ops == ("mul", "mean", "add", "rsqrt", "mul")
    assert any(t.kind == "linear" and t.module_paths == ("inner.proj",) for t in p.profile.targets)
    assert any(t.kind == "activation" and t.module_paths == ("act",) for t in p.profile.targets)


def test_problems_load_and_replay_captured_inputs(profiled, tmp_path):
    mf, p = profiled["llm_block"]
    for t in p.profile.targets:
        tp = write_problem(t, p.analysis.cuts[t.name], p.analysis.captures[t.name], tmp_path, "llm_block")
        problem = load_problem(tp.path)
        module = problem.load_module()
        model = module.Model(*module.get_init_inputs())
        replay = module.get_replay_inputs()
        assert len(replay) >= len(t.variants)
        sigs = {tuple((tuple(x.shape), tuple(x.stride()), str(x.dtype)[6:]) for x in call) for call in replay}
        assert sigs == {v.signature for v in t.variants}
        fresh = module.get_inputs()
        assert [tuple(x.shape) for x in fresh] == [tuple(s) for s in t.main.shapes]
        with torch.no_grad():
            out = model(*fresh)
        assert torch.isfinite(out).all()
        # parameters are the model's real values: the rms norm's weight equals the module's
        if t.kind == "rms_norm":
            w = fresh[1]
            assert torch.equal(w, mf.model.attn_norm.weight) or torch.equal(w, mf.model.mlp_norm.weight)
            assert "x.pow(2)" in tp.path.read_text()


class _InPlace(nn.Module):
    """An in-place ReLU whose input is read again afterwards: the mutation is part of the result."""

    def __init__(self):
        super().__init__()
        self.relu = nn.ReLU(inplace=True)
        self.norm = nn.LayerNorm(32)

    def forward(self, x):
        h = self.norm(x)
        y = self.relu(h)
        return h + y  # h was mutated: 2 * relu(h)


def test_in_place_ops_keep_their_meaning():
    model = _InPlace().eval()
    x = torch.randn(8, 32)
    with torch.no_grad():
        ref = model(x)
    p = profile_model(model, [x], runs=1)
    assert not any(t.kind == "activation" or "relu" in t.ops for t in p.profile.targets)
    ln = next(t for t in p.profile.targets if "layer_norm" in t.ops)
    assert ln.ops == ("layer_norm",)  # not fused with the in-place ReLU that mutates its output
    from kforge_desktop.modelopt.extract import cut

    inst = p.analysis.instances[ln.name][0]
    with torch.no_grad():
        torch.testing.assert_close(model(x), ref)
        torch.testing.assert_close(cut(inst.unit.gm, inst.region).gm(x, model.norm.weight, model.norm.bias),
                                   model.norm(x))


class _Tokens(nn.Module):
    """Embedding, LayerNorm module, fused SDPA on permuted views, GELU + residual."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 64)
        self.ln = nn.LayerNorm(64)
        self.qkv = nn.Linear(64, 192)
        self.act = nn.GELU()

    def forward(self, idx):
        h = self.ln(self.emb(idx))
        q, k, v = self.qkv(h).view(2, 16, 3, 4, 16).permute(2, 0, 3, 1, 4)
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.act(o.transpose(1, 2).reshape(2, 16, 64)) + h


def test_embedding_sdpa_and_strided_inputs_become_problems(tmp_path):
    model = _Tokens().eval()
    p = profile_model(model, [torch.randint(0, 100, (2, 16))], runs=1)
    kinds = {t.kind: t for t in p.profile.targets}
    assert {"embedding", "layer_norm", "attention", "linear", "activation"} <= set(kinds)
    attn = kinds["attention"]
    assert attn.ops == ("scaled_dot_product_attention",)
    assert attn.strides[0] != (1024, 256, 16, 1)  # q is a permuted view of the qkv projection
    for t in (kinds["embedding"], attn):
        tp = write_problem(t, p.analysis.cuts[t.name], p.analysis.captures[t.name], tmp_path, "tokens")
        module = load_problem(tp.path).load_module()
        fresh, (real,) = module.get_inputs(), module.get_replay_inputs()
        assert [x.stride() for x in fresh] == [x.stride() for x in real] == [s for s in t.strides]
        if t.kind == "embedding":
            assert fresh[0].dtype == torch.int64 and 0 <= int(fresh[0].min()) and int(fresh[0].max()) < 100
        with torch.no_grad():
            assert module.Model()(*fresh).shape == module.Model()(*real).shape


# -- a decoder written the ordinary way --------------------------------------------------------------


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread: on a shared machine, timings of a thread pool swing with the load."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def llama(one_thread):
    mf = load_model_file(LLAMA)
    with torch.no_grad():
        before = mf.model(*mf.inputs)
    p = profile_model(mf.model, list(mf.inputs), name="llama_decoder", runs=10)
    return mf, p, before


def test_ordinary_decoder_attention_is_captured(llama):
    mf, p, before = llama
    prof = p.profile
    _check_shares(prof)
    assert prof.untraced == ()  # no module runs as is: not the attention, not anything else
    assert prof.exported == ("blocks.0.att", "blocks.1.att")  # fx cannot trace them; torch.export can
    (sm,) = _by_kind(prof, "softmax")  # the causal mask built in forward, the scale and the softmax
    assert {"triu", "masked_fill", "softmax"} <= set(sm.ops) and {"div", "mul"} & set(sm.ops)
    assert sm.module_paths == ("blocks.0.att", "blocks.1.att") and sm.calls == 2
    assert sm.shapes == ((16, 16), (2, 4, 16, 16))
    matmuls = [t for t in prof.targets if t.ops == ("matmul",)]  # q @ k^T and probs @ v, around it
    assert sum(t.calls for t in matmuls) == 4
    assert all(set(t.module_paths) == {"blocks.0.att", "blocks.1.att"} for t in matmuls)
    assert any(t.kind == "linear" and "blocks.0.att.qkv" in t.module_paths for t in prof.targets)
    with torch.no_grad():  # capturing ran the model's code: the model computes what it did before
        torch.testing.assert_close(mf.model(*mf.inputs), before, rtol=0, atol=0)


def test_ordinary_decoder_softmax_problem_reproduces_the_model(llama, tmp_path):
    mf, p, _ = llama
    (sm,) = _by_kind(p.profile, "softmax")
    tp = write_problem(sm, p.analysis.cuts[sm.name], p.analysis.captures[sm.name], tmp_path, "llama_decoder")
    source = tp.path.read_text()
    assert "masked_fill" in source and "torch.softmax" in source and "torch.ops.aten" not in source
    module = load_problem(tp.path).load_module()
    # the reference, by hand from the model's own weights: block 0's scores, scaled, masked, softmax
    model, (idx,) = mf.model, mf.inputs
    with torch.no_grad():
        h = model.blocks[0].att_norm(model.emb(idx))
        b, t, d = h.shape
        q, k, _v = model.blocks[0].att.qkv(h).view(b, t, 3, 4, d // 4).permute(2, 0, 3, 1, 4)
        causal = torch.ones(t, t, dtype=torch.bool).triu(1)
        expected = torch.softmax((q @ k.transpose(-2, -1) / math.sqrt(d // 4)).masked_fill(causal, -math.inf), -1)
        got = module.Model()(*module.get_replay_inputs()[0])
        torch.testing.assert_close(got, expected)
        assert torch.isfinite(module.Model()(*module.get_inputs())).all()


def test_ordinary_decoder_time_outside_targets_is_measured(llama):
    prof = llama[1].profile
    assert prof.unattributed_ms is not None and prof.unattributed_ms > 0
    assert prof.outside_ms == pytest.approx(prof.eager_ms - prof.targets_ms)
    table = profile_table(prof)
    assert f"{prof.unattributed_ms:.3f} ms not attributed" in table
    assert "not traced" not in table and "0.000 ms outside any target" not in table


def test_a_captured_attention_takes_a_kernel_back(llama, tmp_path):
    """Integration patches the exported attention like any unit; other shapes fall back."""
    mf, p, before = llama
    (sm,) = _by_kind(p.profile, "softmax")
    tp = write_problem(sm, p.analysis.cuts[sm.name], p.analysis.captures[sm.name], tmp_path, "llama_decoder")
    kernel = tp.path.read_text() + "\n\nclass ModelNew(Model):\n    pass\n"  # the reference as the "kernel"
    integ = integrate(mf.model, p.analysis, {sm.name: ChosenKernel(sm.name, kernel, tp.signatures)},
                      list(mf.inputs), mf.make_inputs)
    try:
        assert integ.ok and integ.kept == [sm.name]
        with torch.no_grad():
            torch.testing.assert_close(mf.model(*mf.inputs), before)
        assert integ.handle.stats() == {sm.name: (2, 0)}
        for shape in ((1, 8), (3, 32)):  # a batch of one, another length: the guards send them back
            x = torch.randint(0, 128, shape)
            with torch.no_grad():
                with integ.handle.disabled():
                    ref = mf.model(x)
                integ.handle.reset_stats()
                torch.testing.assert_close(mf.model(x), ref)
            assert integ.handle.stats() == {sm.name: (0, 2)}
    finally:
        integ.handle.remove()


def test_sdpa_decoder_attention_is_a_target(one_thread, tmp_path):
    ns = runpy.run_path(str(LLAMA))
    model = ns["get_model"](attention="sdpa").eval()
    p = profile_model(model, ns["get_inputs"](), name="llama_sdpa", runs=2)
    assert p.profile.untraced == ()
    (attn,) = _by_kind(p.profile, "attention")
    assert attn.ops == ("scaled_dot_product_attention",)
    assert attn.module_paths == ("blocks.0.att", "blocks.1.att") and attn.calls == 2
    tp = write_problem(attn, p.analysis.cuts[attn.name], p.analysis.captures[attn.name], tmp_path, "llama_sdpa")
    module = load_problem(tp.path).load_module()
    q, k, v = module.get_replay_inputs()[0]
    with torch.no_grad():
        torch.testing.assert_close(module.Model()(q, k, v), F.scaled_dot_product_attention(q, k, v, is_causal=True))
