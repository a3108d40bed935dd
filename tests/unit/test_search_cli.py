"""`kforge optimize | resume | show | sample` as a user runs them: clear errors, a readable tree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kforge_desktop.kernels.verdict import Verdict
from kforge_desktop.problem.problem import load_problem
from kforge_desktop.search.config import SearchConfig
from kforge_desktop.search.setup import create_session
from kforge_desktop.store import SessionStore

REPO = Path(__file__).resolve().parents[2]


def kforge(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kforge_desktop.cli.main", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def test_bad_inputs_get_one_sentence_and_a_nonzero_exit(tmp_path):
    out = kforge("optimize", str(tmp_path / "missing.py"))
    assert out.returncode != 0 and "does not exist" in out.stderr and "Traceback" not in out.stderr
    junk = tmp_path / "junk.kforge"
    junk.write_text("not a database")
    for cmd in ("show", "resume"):
        out = kforge(cmd, str(junk))
        assert out.returncode != 0 and "session" in out.stderr and "Traceback" not in out.stderr
    out = kforge("show", str(tmp_path / "none.kforge"))
    assert out.returncode != 0 and "does not exist" in out.stderr
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\nclass Model: pass\n")
    out = kforge("optimize", str(bad), "--llm", str(tmp_path / "no.gguf"))
    assert out.returncode != 0 and "get_inputs" in out.stderr and "Traceback" not in out.stderr


def test_show_prints_the_tree_the_best_path_and_the_pin(tmp_path):
    path = tmp_path / "s.kforge"
    store = SessionStore(path)
    pid = create_session(store, load_problem(REPO / "resources" / "problems" / "rms_norm.py"), SearchConfig())
    seed = next(n for n in store.nodes(pid) if n.origin == "seed")
    store.record_verdict(seed.id, Verdict("ok", "fine", speedup=2.5, latency_ms=0.1, significant=True), 0.9)
    child = store.add_node(pid, seed.id, "llm", "edit", "cpp", source="x", directive="simd_inner@scale_row")
    store.record_verdict(child, Verdict("incorrect", "values differ"), 0.15)
    store.set_pinned(seed.id)
    store.close()
    out = kforge("show", str(path))
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "reference (PyTorch eager)" in text and "2.50x" in text and "[pinned]" in text
    assert "incorrect" in text and "simd_inner@scale_row" in text
    assert f"best path: #1 -> #{seed.id}" in text
    assert "1 LLM candidates" in text
    js = kforge("show", str(path), "--json")
    assert js.returncode == 0 and js.stdout.count("\n") == 3


def test_seeds_only_evaluates_the_seeds_without_a_model_and_no_memory_is_kept_in_the_session(tmp_path):
    """`kforge optimize PROBLEM --seeds-only --no-memory`: the exemplar seed is built, verified and timed,
    no model is loaded (the default model path here does not exist), and the session records that the
    kernel memory was left out (so a resume leaves it out too)."""
    import os

    session = tmp_path / "s.kforge"
    env = {**os.environ, "KFORGE_MODEL": str(tmp_path / "absent.gguf")}
    out = subprocess.run([sys.executable, "-m", "kforge_desktop.cli.main", "optimize",
                          str(REPO / "resources" / "problems" / "rms_norm.py"), "--seeds-only", "--no-memory",
                          "--device", "cpu", "--session", str(session)], cwd=REPO, capture_output=True, text=True,
                         timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "absent.gguf" not in out.stderr
    store = SessionStore(session)
    try:
        pid = store.problems()[0].id
        # the seed's verdict, not whether its timing was clean: on a busy box it may be marked disturbed
        seeds = [n for n in store.nodes(pid) if n.origin == "seed"]
        assert seeds and all(n.verdict is not None and n.verdict.status == "ok" for n in seeds)
        assert not [n for n in store.nodes(pid) if n.origin == "llm"]
        assert store.search_state(pid).config["memory"] is False
        assert store.search_state(pid).config["budget_candidates"] == 0
    finally:
        store.close()
