"""A whole-model session with a real verified kernel: bench and export as a user runs them, and the
exported package used in a fresh process that has only torch (eagerly and under torch.compile);
a kernel slower than torch.compile's code is left to torch.compile, and the CLI says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from kforge_desktop.cli.main import main as kforge
from kforge_desktop.kernels.evaluator import Evaluator
from kforge_desktop.kernels.options import EvalOptions
from kforge_desktop.kernels.verdict import Verdict
from kforge_desktop.modelopt.session import (
    chosen_kernels,
    create_model_session,
    reload_model,
    session_targets,
)
from kforge_desktop.paths import RESOURCES
from kforge_desktop.search.config import SearchConfig

MODEL = RESOURCES / "examples" / "llm_block.py"
RMS_KERNEL = (RESOURCES / "examples" / "kernels" / "llm_block_rms_norm.py").read_text()


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    root = tmp_path_factory.mktemp("modelsession")
    old = os.environ.get("KFORGE_BUILD_CACHE")
    os.environ["KFORGE_BUILD_CACHE"] = str(root / "builds")
    path = root / "llm_block.kforge"
    s = create_model_session(MODEL, path, SearchConfig(budget_candidates=0), total_budget=0)
    name = next(n for n in s.problem_ids if "rms_norm" in n)
    pid = s.problem_ids[name]
    nid = s.store.add_node(pid, s.store.root(pid).id, "user", "user", "cpp", source=RMS_KERNEL,
                           kernel_source=RMS_KERNEL, state="evaluated")
    with Evaluator("cpu", workers=1, options=EvalOptions(compare_compile=False, timed_runs=10)) as ev:
        verdict = ev.evaluate(s.store.problem(pid).to_problem(), RMS_KERNEL)
    assert verdict.status == "ok", verdict.reason
    s.store.record_verdict(nid, verdict)
    s.store.set_pinned(nid)  # the user's choice: what bench and export use
    s.store.close()
    yield path, name, nid
    if old is None:
        os.environ.pop("KFORGE_BUILD_CACHE", None)
    else:
        os.environ["KFORGE_BUILD_CACHE"] = old


def test_session_lays_out_one_problem_per_target(session):
    from kforge_desktop.store import SessionStore

    path, name, nid = session
    store = SessionStore.open(path)
    rows = session_targets(store)
    assert {r["name"] for r in rows} >= {name}
    row = next(r for r in rows if r["name"] == name)
    assert row["problem_id"] is not None and row["chosen_node"] == nid and row["best_speedup"]
    p = store.problem(row["problem_id"])
    assert p.info["op"].startswith("rms_norm") and p.info["share"] > 0 and p.path.endswith(f"{name}.py")
    assert (path.parent / "llm_block.targets" / f"{name}.replay.pt").exists()
    _mf, profiled = reload_model(store)
    chosen, reasons = chosen_kernels(store, profiled)
    assert list(chosen) == [name] and chosen[name].pinned
    assert all("no verified kernel" in r for r in reasons.values())


def test_bench_command(session, capsys):
    path, name, _ = session
    assert kforge(["bench", str(MODEL), "--session", str(path), "--runs", "3", "--no-compile", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kernels"] == [name] and all(c["ok"] for c in out["checks"])
    assert out["patched"]["median_ms"] > 0 and out["eager"]["n"] == 3
    assert out["kernel_calls"][name] == [2, 0]


def test_export_works_with_only_torch(session, tmp_path, capsys):
    path, name, nid = session
    out = tmp_path / "export"
    assert kforge(["export", str(path), "--out", str(out), "--no-bench"]) == 0
    assert "kforge_llm_block_kernels" in capsys.readouterr().out
    pkg = out / "kforge_llm_block_kernels"
    record = json.loads((pkg / "record.json").read_text())
    k = record["kernels"][name]
    assert k["node_id"] == nid and k["pinned"] and k["verdict"]["status"] == "ok" and k["signatures"]
    assert all(c["ok"] for c in record["checks"])
    report = (out / "REPORT.md").read_text()
    assert name in report and "| yes |" in report
    assert "<svg" in (out / "report.html").read_text()
    script = textwrap.dedent(f"""
        import sys
        sys.modules["kforge_desktop"] = None  # the package must not need Kernel Forge
        sys.path.insert(0, {str(out)!r})
        import runpy, torch
        import kforge_llm_block_kernels as k
        ns = runpy.run_path({str(MODEL)!r})
        model = ns["get_model"]().eval()
        x = ns["get_inputs"]()
        with torch.no_grad():
            ref = model(*x)
            handle = k.apply(model, strict=True)
            got = model(*x)
            hits = handle.stats()[{name!r}]
            # the kernels are custom ops: the compiled model keeps them, with no graph break
            handle.reset_stats()
            compiled = torch.compile(model, fullgraph=True, backend="aot_eager")(*x)
            compiled_hits = handle.stats()[{name!r}]
            handle.remove()
            again = model(*x)
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(compiled, ref, rtol=1e-5, atol=1e-5)
        assert torch.equal(again, ref)
        assert not any(m == "kforge_desktop" or m.startswith("kforge_desktop.") for m in sys.modules if sys.modules[m])
        print("OK", hits[0], hits[1], compiled_hits[0], compiled_hits[1], k.record()["model"])
    """)
    env = {key: v for key, v in os.environ.items() if key != "PYTHONPATH"}  # nothing of the project's
    env["KFORGE_BUILD_CACHE"] = str(tmp_path / "fresh-builds")  # builds it anew
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.split() == ["OK", "2", "0", "2", "0", "llm_block"]


def test_a_kernel_slower_than_torch_compile_is_left_to_it(tmp_path, capsys):
    from kforge_desktop.store import SessionStore

    path = tmp_path / "slow.kforge"
    s = create_model_session(MODEL, path, SearchConfig(budget_candidates=0), total_budget=0)
    name = next(n for n in s.problem_ids if "rms_norm" in n)
    pid = s.problem_ids[name]
    nid = s.store.add_node(pid, s.store.root(pid).id, "user", "user", "cpp", source=RMS_KERNEL,
                           kernel_source=RMS_KERNEL, state="evaluated")
    # verified, twice as fast as eager, and slower than torch.compile's code for the target
    s.store.record_verdict(nid, Verdict("ok", "", speedup=2.0, speedup_compile=0.8, significant=True, latency_ms=0.05,
                                        baseline_ms=0.1, compile_baseline_ms=0.04, n_timed=10, language="cpp"))
    s.store.close()
    store = SessionStore.open(path)
    chosen, reasons = chosen_kernels(store, reload_model(store)[1])
    assert name not in chosen
    assert reasons[name] == "left to torch.compile (ours 0.05 ms vs torch.compile 0.04 ms)"
    store.close()
    assert kforge(["bench", str(MODEL), "--session", str(path), "--runs", "3", "--no-compile"]) == 2
    err = capsys.readouterr().err
    assert f"left to torch.compile: {name} (ours 0.05 ms vs torch.compile 0.04 ms)" in err


def test_export_of_a_session_without_kernels_says_so(tmp_path, capsys):
    path = tmp_path / "empty.kforge"
    create_model_session(MODEL, path, SearchConfig(budget_candidates=0), total_budget=0).store.close()
    assert kforge(["export", str(path), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "no kernel to export" in err and "Traceback" not in err
