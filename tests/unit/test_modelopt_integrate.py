"""Integration: a real, hand-written native kernel patches the example model; guards fall back;
a wrong kernel is caught before anything is reported; torch.compile of the patched model keeps the
kernel (a custom op) with no graph break; a kernel slower than torch.compile's code is not put back.
Real builds (cpp_extension), no mocks."""

from __future__ import annotations

import os

import pytest
import torch

from kforge_desktop.kernels.verdict import Verdict
from kforge_desktop.modelopt.integrate import ChosenKernel, integrate
from kforge_desktop.modelopt.loader import load_model_file
from kforge_desktop.modelopt.problems import write_problem
from kforge_desktop.modelopt.profile import profile_model
from kforge_desktop.modelopt.runtime import fingerprint
from kforge_desktop.modelopt.session import accept_reason, left_to_compile, not_used_line, not_used_summary
from kforge_desktop.paths import RESOURCES

RMS_KERNEL = (RESOURCES / "examples" / "kernels" / "llm_block_rms_norm.py").read_text()
# the same kernel with a bug a model might write: the norm's weight is forgotten
WRONG_KERNEL = RMS_KERNEL.replace("o[c] = xr[c] * inv * w[c];", "o[c] = xr[c] * inv;")


@pytest.fixture(scope="module")
def build_cache_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("builds")
    old = os.environ.get("KFORGE_BUILD_CACHE")
    os.environ["KFORGE_BUILD_CACHE"] = str(d)
    yield d
    if old is None:
        os.environ.pop("KFORGE_BUILD_CACHE", None)
    else:
        os.environ["KFORGE_BUILD_CACHE"] = old


@pytest.fixture()
def llm(tmp_path, build_cache_dir):
    mf = load_model_file(RESOURCES / "examples" / "llm_block.py")
    p = profile_model(mf.model, list(mf.inputs), name=mf.name, runs=1)
    rms = next(t for t in p.profile.targets if t.kind == "rms_norm")
    tp = write_problem(rms, p.analysis.cuts[rms.name], p.analysis.captures[rms.name], tmp_path, mf.name)
    return mf, p, rms, tp


def test_kernel_patches_the_model_and_outputs_match(llm):
    mf, p, rms, tp = llm
    with torch.no_grad():
        before = mf.model(*mf.inputs)
    chosen = {rms.name: ChosenKernel(rms.name, RMS_KERNEL, tp.signatures)}
    integ = integrate(mf.model, p.analysis, chosen, list(mf.inputs), mf.make_inputs)
    assert integ.ok and integ.kept == [rms.name] and not integ.dropped
    assert [c.label for c in integ.checks] == ["example inputs", "fresh random inputs #1", "fresh random inputs #2"]
    with torch.no_grad():
        after = mf.model(*mf.inputs)
    torch.testing.assert_close(after, before, rtol=1e-5, atol=1e-5)
    assert integ.handle.stats() == {rms.name: (2, 0)}  # both norms ran the kernel
    # the user's object is patched, not replaced; its class and parameters are untouched
    assert "forward" in mf.model.__dict__ and fingerprint(mf.model) == p.analysis.units[0].fingerprint
    integ.handle.remove()
    assert "forward" not in mf.model.__dict__


def test_guard_falls_back_on_what_was_not_verified(llm):
    mf, p, rms, tp = llm
    integ = integrate(mf.model, p.analysis, {rms.name: ChosenKernel(rms.name, RMS_KERNEL, tp.signatures)},
                      list(mf.inputs), fresh_sets=0)
    h = integ.handle
    cases = {
        "unseen shape": torch.randn(1, 64, 256),
        "other dtype": torch.randn(2, 128, 256, dtype=torch.float64),
        "other layout": torch.randn(2, 256, 128).transpose(1, 2),
    }
    for label, x in cases.items():
        model = mf.model.double() if x.dtype == torch.float64 else mf.model
        with torch.no_grad():
            with h.disabled():
                ref = model(x)
            h.reset_stats()
            got = model(x)
        assert h.stats()[rms.name] == (0, 2), label
        torch.testing.assert_close(got, ref, msg=label)
        mf.model.float()
    # training or autograd: the original forward runs (the kernels have no backward)
    h.reset_stats()
    out = mf.model(*mf.inputs)  # grad enabled
    assert out.requires_grad and h.stats()[rms.name] == (0, 0)
    h.remove()


def test_a_wrong_kernel_is_dropped_before_anything_is_reported(llm):
    mf, p, rms, tp = llm
    with torch.no_grad():
        before = mf.model(*mf.inputs)
    integ = integrate(mf.model, p.analysis, {rms.name: ChosenKernel(rms.name, WRONG_KERNEL, tp.signatures)},
                      list(mf.inputs), mf.make_inputs)
    assert integ.kept == [] and "differed from the original" in integ.dropped[rms.name]
    assert integ.ok  # what remains (nothing) matches
    with torch.no_grad():
        torch.testing.assert_close(mf.model(*mf.inputs), before)
    integ.handle.remove()


@pytest.fixture()
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _ops_in(graphs) -> list[str]:
    return [str(n.target) for g in graphs for n in g.graph.nodes
            if n.op == "call_function" and str(n.target).startswith("kforge.")]


def test_torch_compile_keeps_the_kernel_with_no_graph_break(llm, fresh_dynamo):
    mf, p, rms, tp = llm
    with torch.no_grad():
        before = mf.model(*mf.inputs)
    integ = integrate(mf.model, p.analysis, {rms.name: ChosenKernel(rms.name, RMS_KERNEL, tp.signatures)},
                      list(mf.inputs), fresh_sets=0)
    h = integ.handle
    assert integ.kept == [rms.name]
    ops = h.ops()
    assert len(ops) == 2 and all(name.startswith("kforge::" + rms.name) for name in ops.values())
    with torch.no_grad():
        explained = torch._dynamo.explain(mf.model)(*mf.inputs)
    assert explained.graph_break_count == 0 and explained.graph_count == 1
    assert sorted(_ops_in(explained.graphs)) == sorted(f"{n.replace('::', '.')}.default" for n in ops.values())
    torch._dynamo.reset()
    compiled = torch.compile(mf.model, fullgraph=True)  # inductor: the code around the kernels is generated
    h.reset_stats()
    with torch.no_grad():
        got = compiled(*mf.inputs)
    torch.testing.assert_close(got, before, rtol=1e-5, atol=1e-5)
    assert h.stats() == {rms.name: (2, 0)}  # the compiled model ran both norms with the kernel
    # under torch.compile the guards still hold: an input the kernel was not verified for runs the original
    other = torch.randn(1, 64, 256)
    with torch.no_grad():
        with h.disabled():
            ref = mf.model(other)
        h.reset_stats()
        got = torch.compile(mf.model, fullgraph=True, backend="aot_eager")(other)
    torch.testing.assert_close(got, ref)
    assert h.stats()[rms.name] == (0, 2)
    h.remove()


def test_a_kernel_slower_than_torch_compile_is_left_to_it():
    assert left_to_compile(0.20, 0.10) == "left to torch.compile (ours 0.2 ms vs torch.compile 0.1 ms)"
    assert left_to_compile(0.10, 0.20) is None and left_to_compile(0.10, 0.10) is None
    assert left_to_compile(0.10, None) is None  # torch.compile not measured: nothing to compare with
    assert not_used_line("t01_rms_norm", left_to_compile(0.2, 0.1)) == \
        "left to torch.compile: t01_rms_norm (ours 0.2 ms vs torch.compile 0.1 ms)"
    # the "no kernel to use" error names every target, whatever order the profile gave them: the one
    # with a reason of its own first, those without a verified kernel together
    reasons = {f"t0{i}_op": "no verified kernel" for i in range(1, 5)} | {"t05_rms_norm": left_to_compile(0.2, 0.1)}
    assert not_used_summary(reasons) == ("left to torch.compile: t05_rms_norm (ours 0.2 ms vs torch.compile 0.1 ms); "
                                         "no verified kernel: t01_op, t02_op, t03_op, t04_op")

    class Node:  # what the chooser reads of a session node
        def __init__(self, origin="llm", directive="whole", **kw):
            self.origin, self.directive = origin, directive
            self.verdict = Verdict("ok", "", speedup=2.0, significant=True, latency_ms=0.2, baseline_ms=0.4, **kw)

    # twice as fast as eager, but torch.compile's code for the target is faster still
    slower = Node(compile_baseline_ms=0.15, speedup_compile=0.75)
    assert accept_reason(slower, pinned=False).startswith("left to torch.compile (ours 0.2 ms")
    assert accept_reason(slower, pinned=True) is None  # a pinned kernel is the user's choice
    assert accept_reason(Node(compile_baseline_ms=0.3, speedup_compile=1.5), pinned=False) is None
    assert accept_reason(Node(), pinned=False) is None  # torch.compile not measured
    # torch.compile's own code, even where it timed faster than torch.compile (noise): torch.compile(model)
    # makes the same kernels and fuses them with their neighbours, which a custom op stops
    own = Node(origin="seed", directive="torch.compile", compile_baseline_ms=0.3, speedup_compile=1.5)
    assert accept_reason(own, pinned=False) == "left to torch.compile (its fastest kernel is torch.compile's own code)"
    assert accept_reason(own, pinned=True) is None


def test_a_target_that_reads_another_put_back_target_is_patched_too(tmp_path, build_cache_dir):
    """The attention reads the qkv projection's result: both put back, the attention's kernel reads
    the projection's kernel (the graph stays in order; a user saw "used before it has been defined")."""
    mf = load_model_file(RESOURCES / "examples" / "llm_block.py")
    p = profile_model(mf.model, list(mf.inputs), name=mf.name, runs=1)
    chosen = {}
    for kind in ("linear", "attention"):
        t = next(t for t in p.profile.targets if t.kind == kind)
        tp = write_problem(t, p.analysis.cuts[t.name], p.analysis.captures[t.name], tmp_path, mf.name)
        # the reference itself as the candidate: what is tested is the patching, not a kernel
        source = tp.path.read_text().replace("class Model(", "class ModelNew(")
        chosen[t.name] = ChosenKernel(t.name, source, tp.signatures)
    with torch.no_grad():
        before = mf.model(*mf.inputs)
    integ = integrate(mf.model, p.analysis, chosen, list(mf.inputs), mf.make_inputs)
    assert integ.ok and sorted(integ.kept) == sorted(chosen) and not integ.dropped
    with torch.no_grad():
        after = mf.model(*mf.inputs)
    torch.testing.assert_close(after, before, rtol=1e-5, atol=1e-5)
    stats = integ.handle.stats()
    assert all(stats[name][0] > 0 for name in chosen), stats  # both kernels ran
    integ.handle.remove()
