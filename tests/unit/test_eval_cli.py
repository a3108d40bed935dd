"""`kforge eval` as a user runs it: a verdict, JSON, a folder table, exit codes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CAND = REPO / "tests" / "candidates" / "cpu"
PROBLEM = REPO / "resources" / "problems" / "rms_norm.py"


def kforge(*args, cache):
    env = dict(os.environ, KFORGE_BUILD_CACHE=str(cache))
    return subprocess.run([sys.executable, "-m", "kforge_desktop", *args], capture_output=True, text=True,
                          env=env, timeout=600)


def test_eval_json_has_the_documented_fields(tmp_path):
    out = kforge("eval", str(PROBLEM), str(CAND / "ok_rms_norm.py"), "--json", "--runs", "10", cache=tmp_path)
    assert out.returncode == 0, out.stderr
    v = json.loads(out.stdout)
    for key in ("status", "reason", "speedup", "latency_ms", "baseline_ms", "compile_baseline_ms", "max_abs_err",
                "rel_l2_err", "build_s", "log"):
        assert key in v
    assert v["status"] == "ok"


def test_a_kernel_that_hides_nan_fails_unless_the_user_accepts_finite_inputs_only(tmp_path):
    """The NaN trial is on by default; ``--finite-only`` is the user's choice to accept a kernel that is right on
    every finite input (and says so in the help)."""
    cand = str(CAND / "nan_dropped.py")
    strict = kforge("eval", str(PROBLEM), cand, "--json", "--runs", "5", "--no-compile", cache=tmp_path)
    v = json.loads(strict.stdout)
    assert v["status"] == "incorrect" and v["reason"].startswith("with NaN at "), v["reason"]
    lax = kforge("eval", str(PROBLEM), cand, "--json", "--runs", "5", "--no-compile", "--finite-only", cache=tmp_path)
    assert json.loads(lax.stdout)["status"] == "ok", lax.stdout + lax.stderr


def test_eval_json_of_a_folder_is_one_line_per_candidate_even_for_one(tmp_path):
    """A script reading ``kforge eval PROBLEM DIR --json`` gets the same lines whatever the folder holds (a
    folder of one candidate printed the single-candidate object, which such a script did not read)."""
    folder = tmp_path / "one"
    folder.mkdir()
    shutil.copy(CAND / "ok_rms_norm.py", folder / "ok_rms_norm.py")
    out = kforge("eval", str(PROBLEM), str(folder), "--json", "--runs", "5", "--no-compile", cache=tmp_path / "b")
    assert out.returncode == 0, out.stderr
    [line] = out.stdout.splitlines()
    v = json.loads(line)
    assert v["candidate"].endswith("ok_rms_norm.py") and v["status"] == "ok"


def test_eval_folder_prints_a_table_and_isolates_failures(tmp_path):
    folder = tmp_path / "cands"
    folder.mkdir()
    for name in ("ok_rms_norm.py", "segfault.py", "compile_error.py", "zeros.py"):
        shutil.copy(CAND / name, folder / name)
    out = kforge("eval", str(PROBLEM), str(folder), "--runs", "10", "--no-compile", cache=tmp_path / "b")
    assert out.returncode == 0, out.stderr
    lines = {ln.split()[0]: ln for ln in out.stdout.splitlines() if ln.endswith(".py") or ".py " in ln}
    assert " ok " in lines["ok_rms_norm.py"]
    assert " crashed " in lines["segfault.py"]
    assert " compile_error " in lines["compile_error.py"]
    assert " incorrect " in lines["zeros.py"]


def test_eval_bad_paths_are_one_sentence(tmp_path):
    out = kforge("eval", str(tmp_path / "missing.py"), str(CAND / "ok_rms_norm.py"), cache=tmp_path)
    assert out.returncode == 2
    assert "does not exist" in out.stderr and "Traceback" not in out.stderr
