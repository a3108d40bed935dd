"""The adversarial suite on the CPU backend: every honest kernel passes, every dishonest one fails.

Each file in tests/candidates/cpu/ states its expected status on its first line. All of them are
evaluated by one real evaluator (real C++ builds in real worker processes), concurrently, so a
crashing or hanging candidate must not disturb the others' verdicts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kforge_desktop.kernels.evaluator import Evaluator
from kforge_desktop.kernels.options import EvalOptions
from kforge_desktop.problem.problem import load_problem

REPO = Path(__file__).resolve().parents[2]
CANDIDATES = sorted((REPO / "tests" / "candidates" / "cpu").glob("*.py"))


def expected_status(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect:"), path
    return first.split()[2]


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    problem = load_problem(REPO / "resources" / "problems" / "rms_norm.py")
    cache = tmp_path_factory.mktemp("builds")
    opts = EvalOptions(compare_compile=False, timed_runs=30, warmup_runs=3, run_timeout_s=20)
    with Evaluator("cpu", workers=2, options=opts, build_cache=cache) as ev:
        futures = {p.name: ev.submit(problem, p.read_text()) for p in CANDIDATES}
        return {name: fut.result(timeout=900) for name, fut in futures.items()}


@pytest.mark.parametrize("path", CANDIDATES, ids=[p.stem for p in CANDIDATES])
def test_candidate_gets_the_right_status(path, verdicts):
    verdict = verdicts[path.name]
    assert verdict.status == expected_status(path), f"{path.name}: {verdict.reason}\n{verdict.log[-3000:]}"
    assert verdict.reason, "every verdict explains itself in one sentence"


def test_honest_kernel_reports_numbers(verdicts):
    v = verdicts["ok_rms_norm.py"]
    assert v.latency_ms > 0 and v.baseline_ms > 0 and v.speedup == pytest.approx(v.baseline_ms / v.latency_ms)
    assert v.n_timed >= 10 and v.trials >= 5
    assert v.rel_l2_err < 1e-5 and v.max_abs_err < 1e-4
    assert v.build_s is not None and v.language == "cpp"


def test_a_kernel_that_hides_a_nan_is_told_where_and_how_to_keep_it(verdicts):
    """Every plain trial passes; only the trial with NaN in the inputs shows the kernel hides a fault that
    PyTorch would show, and the reason names the usual cause for the repair prompt."""
    v = verdicts["nan_dropped.py"]
    assert v.reason.startswith("with NaN at ") and "where the reference has finite ones" in v.reason
    assert "(a != a)" in v.reason
    assert v.trials == verdicts["ok_rms_norm.py"].trials  # it reached the last check, the NaN trial


def test_crash_and_hang_name_what_happened(verdicts):
    assert "SIGSEGV" in verdicts["segfault.py"].reason
    assert "still running" in verdicts["infinite_loop.py"].reason


def test_compile_error_carries_the_compiler_diagnostic(verdicts):
    v = verdicts["compile_error.py"]
    assert "error:" in v.reason and "kernel.cpp" in v.reason
    assert "no return statement" in verdicts["missing_return.py"].reason
    assert "error" in v.log


def test_precision_downgrade_is_caught_by_relative_l2(verdicts):
    v = verdicts["precision_fp16.py"]
    assert v.rel_l2_err is None or v.rel_l2_err > 2e-5


def test_a_small_bias_everywhere_is_caught_by_relative_l2_alone(verdicts):
    v = verdicts["biased_rsqrt.py"]
    assert "relative L2" in v.reason
    assert v.max_abs_err < 1e-2  # every value was within the elementwise tolerance


def test_a_fast_path_hidden_during_timing_is_caught_on_fresh_inputs_after_it(verdicts):
    assert "after timing" in verdicts["fast_path_after_warmup.py"].reason


def test_cpu_outputs_start_as_poison_not_zeros(verdicts):
    v = verdicts["accumulates_into_empty.py"]
    assert v.status == "incorrect" and "trial 1" in v.reason


def test_every_evaluation_draws_fresh_inputs_and_records_the_seed(verdicts):
    seeds = {v.input_seed for v in verdicts.values() if v.trials}
    assert None not in seeds and len(seeds) == len([v for v in verdicts.values() if v.trials])


def test_cuda_state_that_changes_on_first_use_is_not_a_patch(monkeypatch):
    """On a GPU host, the first question about devices sets torch.cuda's state (``_initialized``,
    ``default_generators``, ``_cached_device_count``); CPU candidates that did nothing to torch were rejected as
    patching it. State changing is not a patch; a function replaced still is."""
    import torch

    from kforge_desktop.kernels.policy import TorchSnapshot

    before = TorchSnapshot.take()
    monkeypatch.setattr(torch.cuda, "_initialized", not torch.cuda._initialized)
    monkeypatch.setattr(torch.cuda, "default_generators", (object(),))
    monkeypatch.setattr(torch.cuda, "_cached_device_count", 1)
    assert TorchSnapshot.take().changed(before) == []
    monkeypatch.setattr(torch, "rsqrt", lambda t: t)
    assert before.changed(TorchSnapshot.take()) == ["torch.rsqrt"]
