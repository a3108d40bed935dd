"""`kforge bench` as a user runs it: eager, torch.compile(original), patched and
torch.compile(patched), each with its device time and its call latency, speedups on device time.

The kernel here is plain PyTorch (a ModelNew that needs no compiler), pinned by the user, so the
test measures the bench, not a build.
"""

from __future__ import annotations

import functools
import json

import pytest
import torch

from kforge_desktop.cli.main import main as kforge
from kforge_desktop.modelopt.bench import LABELS, BenchResult, ModelTiming, bench_model
from kforge_desktop.modelopt.loader import load_model_file
from kforge_desktop.modelopt.session import create_model_session
from kforge_desktop.paths import RESOURCES
from kforge_desktop.search.config import SearchConfig

MODEL = RESOURCES / "examples" / "llm_block.py"
TORCH_RMS = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x, weight):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight
'''


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "llm_block.kforge"
    s = create_model_session(MODEL, path, SearchConfig(budget_candidates=0), total_budget=0)
    name = next(n for n in s.problem_ids if "rms_norm" in n)
    pid = s.problem_ids[name]
    nid = s.store.add_node(pid, s.store.root(pid).id, "user", "user", "cpp", source=TORCH_RMS,
                           kernel_source=TORCH_RMS, state="evaluated")
    s.store.set_pinned(nid)  # the user's choice: bench uses it
    s.store.close()
    return path, name


@pytest.fixture
def cheap_compile(monkeypatch):
    """torch.compile with the aot_eager backend: the same graph capture and custom ops, without
    inductor's C++ build (minutes on this machine's two cores)."""
    import torch._dynamo

    torch._dynamo.reset()
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="aot_eager"))
    yield
    torch._dynamo.reset()


def test_bench_json_has_device_time_and_latency(session, capsys):
    path, name = session
    assert kforge(["bench", str(MODEL), "--session", str(path), "--runs", "3", "--no-compile", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kernels"] == [name] and all(c["ok"] for c in out["checks"])
    assert out["speedups_on"] == "device time"
    for k in ("eager", "patched"):
        row = out[k]
        assert row["device"]["median_ms"] > 0 and row["latency"]["median_ms"] > 0
        assert row["median_ms"] == row["device"]["median_ms"]  # the flat figure reports read is device time
        assert row["n"] == 3 and row["latency"]["n"] == 3
    assert out["compiled"] is None and out["compiled_patched"] is None
    assert out["speedup"] == pytest.approx(out["eager"]["device"]["median_ms"] / out["patched"]["device"]["median_ms"])
    assert out["kernel_calls"][name] == [2, 0]


def test_bench_table_shows_four_contenders_with_both_times(session, capsys, cheap_compile):
    path, name = session
    assert kforge(["bench", str(MODEL), "--session", str(path), "--runs", "3"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "device ms" in line)
    assert "latency ms" in header and "vs eager" in header
    for label in LABELS.values():
        assert any(line.startswith(label) for line in out.splitlines()), label
    assert "speedups are on device time" in out
    assert "torch.compile(patched) vs torch.compile(original)" in out
    # the compiled patched model still calls the kernel (a custom op), for both norms
    assert f"{name}: 2 kernel call(s), 0 fallback(s) per forward; under torch.compile(patched): 2 kernel call(s)" in out


def test_bench_without_a_patch_times_the_model_and_its_compile(cheap_compile):
    mf = load_model_file(RESOURCES / "examples" / "vision_net.py")
    result = bench_model(mf.model, list(mf.inputs), None, runs=3, warmup=1)
    assert isinstance(result, BenchResult) and set(result.timings()) == {"eager", "compiled"}
    assert result.patched is None and result.speedup is None and result.compile_speedup > 0
    assert isinstance(result.eager, ModelTiming) and result.eager.latency.n == 3
    d = json.loads(json.dumps(result.to_dict()))
    assert d["patched"] is None and d["compiled"]["latency"]["median_ms"] > 0
    assert "torch.compile" in result.summary() and "patched" not in result.summary()
    with torch.no_grad():
        torch.testing.assert_close(mf.model(*mf.inputs), mf.model(*mf.inputs))  # the model is left as it was


def test_the_table_says_when_torch_compile_alone_is_faster_than_with_the_kernels():
    """vision_stage_gpu on the H200: torch.compile(patched) 0.71 ms against torch.compile(original)
    0.67 ms with ±1% noise. The table says in words that torch.compile alone is faster there, and
    calls a difference inside the noise none."""
    from kforge_desktop.kernels.timing import TimingStats

    def timing(ms: float, iqr: float = 0.005) -> ModelTiming:
        stats = TimingStats(ms, iqr, ms - iqr / 2, ms + iqr / 2, 20)
        return ModelTiming(device=stats, latency=stats)

    def result(compiled_patched_ms: float) -> BenchResult:
        return BenchResult(eager=timing(1.238), patched=timing(1.196), compiled=timing(0.667), compile_note="",
                           kernel_calls={}, device="cuda", compiled_patched=timing(compiled_patched_ms))

    assert "torch.compile(original) alone is faster here" in result(0.7125).table()
    assert "no measurable difference" in result(0.670).table()
    assert "the kernels gain 11%" in result(0.600).table()
