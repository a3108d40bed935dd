"""Helpers shared by the desktop tests (imported by name: tests/gui/conftest.py puts this folder on
sys.path, which pytest's importlib mode does not do)."""

from __future__ import annotations

import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def wait_until(qtbot, predicate, timeout_s: float = 30.0, what: str = "condition") -> None:
    """Process events until ``predicate()`` holds (a clear failure message if it never does)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return
        qtbot.wait(20)
    assert predicate(), f"timed out after {timeout_s:.0f} s waiting for: {what}"


# -- a session with the verdicts a GPU search produces ---------------------------------------------

KERNEL = r'''#include <cmath>
#include <cstdint>
extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float m = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) m = fmaxf(m, xr[c]);
        float s = 0.f;
        for (int64_t c = 0; c < cols; ++c) s += expf(xr[c] - m);
        for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = expf(xr[c] - m) / s;
    }
}
'''
MODULE = '''import torch, torch.nn as nn
from kforge_desktop.kernels.native import load_native
KERNEL_SOURCE = r\'\'\'
{kernel}\'\'\'
_lib = load_native(KERNEL_SOURCE, lang="cpp")
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        out = torch.empty_like(x)
        _lib.kernel_forward(x.contiguous(), out, x.shape[0], x.shape[1])
        return out
'''


def _ok(speedup: float, latency: float, iqr: float, compile_ms: float, *, significant: bool = True,
        disturbed: str = "", library_calls: tuple = (), host_saving_ms: float | None = None,
        call_ms: float | None = None):
    from kforge_desktop.kernels.verdict import Verdict

    base = latency * speedup
    return Verdict(status="ok", reason="correct", device="cuda", speedup=speedup, latency_ms=latency,
                   latency_iqr_ms=iqr, baseline_ms=base, baseline_iqr_ms=0.04, compile_baseline_ms=compile_ms,
                   speedup_compile=compile_ms / latency, time_basis="device", call_ms=call_ms or latency + 0.03,
                   baseline_call_ms=base + 0.05, compile_call_ms=compile_ms + 0.04, host_saving_ms=host_saving_ms,
                   disturbed=disturbed, input_seed=1234, peak_mem_bytes=3 * 2**20, n_timed=50,
                   noise=iqr / latency, significant=significant, max_abs_err=2e-7, rel_l2_err=1e-8, trials=5,
                   build_s=11.2, verify_s=0.4, time_s=1.1, language="cuda", library_calls=library_calls)


def write_verdict_session(path: Path) -> dict[str, int]:
    """A real session file (written through SessionStore) whose verdicts carry what a GPU search
    records: a significant win, a bigger speedup within the noise, a disturbed measurement, a kernel
    that delegates to PyTorch, a host-overhead-only saving, failures, a pinned seed, and torch.compile
    readings that differ between verdicts. Returns the node ids by role."""
    from kforge_desktop.kernels.verdict import Verdict
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.config import SearchConfig
    from kforge_desktop.store import SearchState, SessionStore

    store = SessionStore(path)
    problem = load_problem(REPO / "resources" / "problems" / "softmax.py")
    pid = store.add_problem(problem, device="cuda", language="cuda")
    module = MODULE.format(kernel=KERNEL)
    ids: dict[str, int] = {"problem": pid}

    def node(role, parent, origin, kind, verdict=None, state="evaluated", note="", directive=""):
        kernel = KERNEL.replace("s += expf", f"s += expf /*{role}*/")
        nid = store.add_node(pid, parent, origin, kind, "cuda", source=module.replace(KERNEL, kernel),
                             kernel_source=kernel, state=state, note=note, directive=directive)
        if verdict is not None:
            store.record_verdict(nid, verdict, reward=0.5)
        ids[role] = nid
        return nid

    with store.transaction():
        root = store.add_node(pid, None, "root", "root", "python", source=problem.source, state="evaluated",
                              note="the reference (PyTorch eager)")
        ids["root"] = root
        seed = node("seed", root, "seed", "seed", _ok(2.10, 13.33, 0.05, 8.05),
                    note="exemplar row_softmax: one block per row", directive="exemplar:row_softmax")
        node("noise", root, "llm", "whole", _ok(3.51, 7.98, 7.93, 9.09, significant=False),
             directive="one warp per row")
        win = node("win", seed, "llm", "edit", _ok(2.60, 10.77, 0.04, 8.60), directive="vectorize loads (float4)")
        node("disturbed", win, "llm", "edit", _ok(4.20, 6.67, 0.9, 8.60, disturbed=(
            "the runs of candidate sat on whole milliseconds: the process waited for the scheduler")),
            directive="fuse the max and sum passes")
        node("delegates", seed, "llm", "edit", _ok(2.90, 9.66, 0.05, 8.30, library_calls=("torch.exp",)),
             directive="use the online softmax")
        node("host", win, "llm", "edit", _ok(1.01, 27.7, 0.05, 8.60, significant=False, host_saving_ms=0.012,
                                             call_ms=27.69), directive="launch fewer kernels")
        node("build", win, "llm", "repair", Verdict(status="compile_error", reason="error: identifier "
             "\"rsqrtf4\" is undefined", device="cuda", build_s=6.1, log="kernel.cu(7): error: identifier "
             "\"rsqrtf4\" is undefined"))
        node("incorrect", root, "llm", "whole", Verdict(status="incorrect", reason="max abs error 0.41 exceeds "
             "1e-05", device="cuda", max_abs_err=0.41, rel_l2_err=0.2, build_s=9.0, input_seed=1234))
        store.set_pinned(seed)
        config = SearchConfig(budget_candidates=8, device="cuda")
        store.save_search_state(SearchState(problem_id=pid, strategy="mcts", budget_candidates=8,
                                            budget_minutes=None, config=config.to_dict(), status="stopped"))
        store.log_event(pid, "created", "search of softmax created (mcts, cuda, budget 8 candidates)")
    store.close()
    return ids
