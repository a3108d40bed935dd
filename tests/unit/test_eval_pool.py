"""Worker pool behaviour a user relies on: recovery after crashes, build caching, stale locks."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from kforge_desktop.kernels.evaluator import Evaluator
from kforge_desktop.kernels.options import EvalOptions
from kforge_desktop.problem.problem import load_problem

REPO = Path(__file__).resolve().parents[2]
CAND = REPO / "tests" / "candidates" / "cpu"
OPTS = EvalOptions(compare_compile=False, timed_runs=10, warmup_runs=2, run_timeout_s=20)


def test_next_candidate_is_evaluated_normally_after_a_crash(tmp_path):
    problem = load_problem(REPO / "resources" / "problems" / "rms_norm.py")
    with Evaluator("cpu", workers=1, options=OPTS, build_cache=tmp_path) as ev:
        crashed = ev.evaluate(problem, (CAND / "segfault.py").read_text())
        ok = ev.evaluate(problem, (CAND / "ok_rms_norm.py").read_text())
    assert crashed.status == "crashed"
    assert ok.status == "ok", ok.reason


def test_build_is_cached_across_evaluator_restarts(tmp_path):
    problem = load_problem(REPO / "resources" / "problems" / "rms_norm.py")
    source = (CAND / "ok_rms_norm.py").read_text().replace("acc / cols", "acc / (double)cols")
    with Evaluator("cpu", workers=1, options=OPTS, build_cache=tmp_path) as ev:
        first = ev.evaluate(problem, source)
    with Evaluator("cpu", workers=1, options=OPTS, build_cache=tmp_path) as ev:
        second = ev.evaluate(problem, source)
    assert first.status == second.status == "ok"
    assert not first.cached_build
    assert second.cached_build, f"rebuilt in {second.build_s:.2f} s"


def test_stale_lock_of_a_killed_build_does_not_wedge(tmp_path):
    """A build killed mid-way leaves torch's `lock` file behind; the next build must go through."""
    env = dict(os.environ, KFORGE_BUILD_CACHE=str(tmp_path), PYTHONPATH=str(REPO))
    src = 'extern "C" void k(float* y) { y[0] = 1.f; }'
    script = textwrap.dedent(f"""
        from kforge_desktop.kernels import native
        digest = native.source_digest({src!r}, "cpp")
        folder = native.cache_root() / digest
        folder.mkdir(parents=True)
        (folder / "lock").write_text("")  # what a killed cpp_extension build leaves
        lib = native.build_native({src!r}, "cpp")
        import torch
        y = torch.zeros(1)
        lib.k(y)
        print(float(y[0]))
    """)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1.0"


def test_a_build_cached_under_other_compiler_flags_is_built_again(tmp_path):
    """A kernel cached by a release that compiled with other flags (before -fno-trapping-math let its clamped
    loops vectorize) is built again with this release's flags, not loaded from the cache as it was."""
    env = dict(os.environ, KFORGE_BUILD_CACHE=str(tmp_path), PYTHONPATH=str(REPO))
    src = 'extern "C" void k(float* y) { y[0] = y[0] < 0.f ? 0.f : y[0]; }'
    script = textwrap.dedent(f"""
        import sys
        from kforge_desktop.kernels import native
        if sys.argv[1] == "older":
            native.VECTOR_CFLAGS = []
        lib = native.build_native({src!r}, "cpp")
        print(lib.cached, " ".join(native._flags("cpp")["extra_cflags"]))
    """)

    def build(release: str) -> tuple[bool, str]:
        out = subprocess.run([sys.executable, "-c", script, release], env=env, capture_output=True, text=True,
                             timeout=180)
        assert out.returncode == 0, out.stderr
        cached, flags = out.stdout.strip().split(" ", 1)
        return cached == "True", flags

    assert not build("older")[0]
    assert build("older")[0], "the older release's own build was not cached"
    again, flags = build("this")
    assert "-fno-trapping-math" in flags
    assert not again, "the build of the older flags was loaded from the cache"
    assert build("this")[0], "the build with this release's flags was not cached"
