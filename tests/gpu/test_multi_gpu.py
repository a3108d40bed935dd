"""Every GPU of a host (marker gpu; needs two GPUs, skipped with a reason otherwise): one worker pool
per GPU judges candidates as one pool does, and a whole-model run's searches go side by side.

Run on a machine with two GPUs with scripts/gpu_tests.sh (or ``pytest -m gpu tests/gpu/test_multi_gpu.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kforge_desktop.kernels.devices import MultiDeviceEvaluator
from kforge_desktop.kernels.evaluator import Evaluator
from kforge_desktop.kernels.options import EvalOptions
from kforge_desktop.problem.problem import load_problem
from kforge_desktop.search.config import SearchConfig
from kforge_desktop.search.runner import SearchRunner
from kforge_desktop.search.setup import create_session
from kforge_desktop.store import SessionStore

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
CUDA = REPO / "tests" / "candidates" / "cuda"
FOLDER = ("ok_rms_norm.py", "compile_error.py", "zeros.py", "partial_rows.py", "torch_fallback.py", "nan.py")
OPTS = EvalOptions(compare_compile=False, timed_runs=20, warmup_runs=2, run_timeout_s=30)


@pytest.fixture(autouse=True)
def two_gpus():
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip(f"needs two GPUs (torch sees {torch.cuda.device_count()})")


def test_one_pool_per_gpu_judges_a_folder_as_one_pool_does(tmp_path):
    problem = load_problem(REPO / "resources" / "problems" / "rms_norm.py")
    sources = {name: (CUDA / name).read_text() for name in FOLDER}
    with Evaluator("cuda:0", options=OPTS, build_cache=tmp_path / "one") as one:
        expected = {n: one.evaluate(problem, s).status for n, s in sources.items()}
    with MultiDeviceEvaluator(["cuda:0", "cuda:1"], options=OPTS, build_cache=tmp_path / "two") as two:
        assert two.devices == ["cuda:0", "cuda:1"]
        futures = {n: two.submit(problem, s) for n, s in sources.items()}
        got = {n: f.result(timeout=900) for n, f in futures.items()}
        both = [two.submit(problem, sources["ok_rms_norm.py"]) for _ in range(2 * two.workers)]
        devices = {f.result(timeout=900).device for f in both}
    assert {n: v.status for n, v in got.items()} == expected
    assert devices == {"cuda:0", "cuda:1"}  # both GPUs measured candidates
    assert all(v.host for v in got.values())


def test_a_whole_models_searches_run_side_by_side_one_per_gpu(tmp_path):
    store = SessionStore(tmp_path / "m.kforge")
    jobs = []
    for name in ("rms_norm", "softmax"):
        config = SearchConfig(budget_candidates=0, device="cuda:0", compile_seed=False)
        jobs.append((create_session(store, load_problem(REPO / "resources" / "problems" / f"{name}.py"), config),
                     config))
    with SearchRunner(generator=object(), devices=["cuda:0", "cuda:1"]) as runner:
        assert runner.side_by_side() == ["cuda:0", "cuda:1"]
        finished = runner.run_side_by_side(store, jobs)
    assert [f.reason for f in finished] == ["budget", "budget"]
    seeds = [n for pid, _ in jobs for n in store.nodes(pid) if n.origin == "seed"]
    assert seeds and all(n.verdict is not None for n in seeds)
    assert {n.verdict.device for n in seeds} == {"cuda:0", "cuda:1"}  # each problem on its own GPU
    store.close()
