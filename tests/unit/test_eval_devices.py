"""Past one device: a device list from the command line, one queue over several devices, and a
real local Ray cluster whose actors judge a folder of candidates exactly as the local pool does."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from kforge_desktop.kernels.devices import DeviceError, Dispatcher, one_kind, parse_devices
from kforge_desktop.kernels.evaluator import Evaluator
from kforge_desktop.kernels.options import EvalOptions
from kforge_desktop.kernels.verdict import Verdict
from kforge_desktop.problem.problem import load_problem

REPO = Path(__file__).resolve().parents[2]
CANDIDATES = REPO / "tests" / "candidates" / "cpu"
FOLDER = ("ok_rms_norm.py", "compile_error.py", "runtime_error.py", "zeros.py")
FAST = EvalOptions(trials=2, timed_runs=5, warmup_runs=1, compare_compile=False)


def test_a_device_list_is_checked_before_anything_starts(monkeypatch):
    monkeypatch.setattr("kforge_desktop.kernels.devices.visible_gpus", lambda: 2)
    assert parse_devices("all") == ["cuda:0", "cuda:1"]
    assert parse_devices("cuda:1, cuda:0") == ["cuda:1", "cuda:0"]
    assert parse_devices(None, "cpu") == ["cpu"]
    for bad, words in (("cuda:2", "sees 2"), ("cuda:0,cuda:0", "twice"), ("cpu,cuda:0", "compared"),
                       ("tpu", "unknown device")):
        with pytest.raises(DeviceError, match=words):
            parse_devices(bad)
    monkeypatch.setattr("kforge_desktop.kernels.devices.visible_gpus", lambda: 0)
    assert parse_devices("all") == ["cpu"]
    kept, left = one_kind(["cuda:0", "cuda:1", "cuda:2"], {"cuda:0": "H200", "cuda:1": "A100", "cuda:2": "H200"})
    assert kept == ["cuda:0", "cuda:2"] and left == ["cuda:1"]


class _Device:
    def __init__(self, device: str, delay: float) -> None:
        self.device, self.slots, self.delay, self.seen = device, 1, delay, []

    def evaluate(self, problem, source, options):
        time.sleep(self.delay)
        self.seen.append(source)
        return Verdict("ok", "correct", device=options.device)

    def close(self) -> None:
        pass


def test_each_device_takes_the_next_candidate_when_it_is_free():
    slow, fast = _Device("cuda:0", 0.5), _Device("cuda:1", 0.01)
    with Dispatcher([slow, fast]) as d:
        assert d.devices == ["cuda:0", "cuda:1"] and d.workers == 2
        verdicts = [f.result(timeout=10) for f in [d.submit(None, f"c{i}") for i in range(6)]]
    assert len(slow.seen) == 1 and len(fast.seen) == 5  # the slow GPU held up nothing
    assert sorted(v.device for v in verdicts) == ["cuda:0"] + ["cuda:1"] * 5


@pytest.mark.slow
def test_a_local_ray_cluster_judges_a_folder_like_the_local_pool(build_cache):
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'kforge-desktop[ray]')")
    from kforge_desktop.kernels.ray_pool import RayEvaluator, package_dir

    problem = load_problem(REPO / "resources" / "problems" / "rms_norm.py")
    sources = {name: (CANDIDATES / name).read_text() for name in FOLDER}
    with Evaluator("cpu", workers=1, options=FAST) as local:
        expected = {name: local.evaluate(problem, src) for name, src in sources.items()}
    assert expected["ok_rms_norm.py"].status == "ok" and len({v.status for v in expected.values()}) == 4

    # a real cluster on this machine; the package travels with the job, as it does to remote nodes
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=100 * 2**20,
             runtime_env={"py_modules": [package_dir()], "env_vars": {"KFORGE_BUILD_CACHE": str(build_cache)}})
    try:
        said: list[str] = []
        with RayEvaluator(device="cpu", actors=2, workers_per_actor=1, options=FAST, say=said.append) as remote:
            assert remote.workers == 2 and len(remote.backends) == 2
            futures = {name: remote.submit(problem, src) for name, src in sources.items()}
            got = {name: f.result(timeout=600) for name, f in futures.items()}
            used = {b.actor for b in remote.backends}
        assert "2" in said[-1] and socket.gethostname() in said[-1]
    finally:
        ray.shutdown()
    assert {n: v.status for n, v in got.items()} == {n: v.status for n, v in expected.items()}
    assert all(v.host == socket.gethostname() and v.device == "cpu" for v in got.values())
    assert all(v.host == socket.gethostname() for v in expected.values())
    assert len(used) == 2



def test_bad_device_lists_and_k_are_one_sentence_before_any_model_loads(capsys, tmp_path):
    from kforge_desktop.cli.main import main

    problem = str(REPO / "resources" / "problems" / "rms_norm.py")
    for flags, words in ((["--devices", "cuda:3"], "cuda:3 was asked for"), (["--devices", "gpu0"], "unknown device"),
                         (["--inflight", "0"], "--inflight must be 1 or more")):
        code = main(["optimize", problem, "--device", "cpu", "--session", str(tmp_path / "x.kforge"), *flags])
        err = capsys.readouterr().err.strip()
        assert code != 0 and words in err and "\n" not in err


def test_a_resume_evaluates_where_the_search_started(capsys, tmp_path):
    """A search started with --devices (or --ray) is resumed on the same ones unless told otherwise:
    here a session started on two GPUs is resumed on a machine without them, and says so in one sentence."""
    from kforge_desktop.cli.main import main
    from kforge_desktop.search.setup import save_evaluation, saved_evaluation
    from kforge_desktop.store import SessionStore

    session = tmp_path / "s.kforge"
    problem = str(REPO / "resources" / "problems" / "rms_norm.py")
    assert main(["optimize", problem, "--seeds-only", "--device", "cpu", "--session", str(session), "--json"]) == 0
    capsys.readouterr()
    store = SessionStore(session)
    try:
        assert saved_evaluation(store) == {}  # one device: nothing to remember
        save_evaluation(store, ["cuda:0", "cuda:1"], None)
    finally:
        store.close()
    code = main(["resume", str(session)])
    err = capsys.readouterr().err
    assert "evaluating on cuda:0,cuda:1 as when the search started" in err
    assert code != 0 and "cuda:0" in err.splitlines()[-1] and "Traceback" not in err
