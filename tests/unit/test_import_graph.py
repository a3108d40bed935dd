"""The packages import each other only as the architecture's table allows (scripts/import_graph.py)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "import_graph.py"


def _load():
    spec = importlib.util.spec_from_file_location("import_graph", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_forbidden_edges() -> None:
    graph = _load()
    bad = graph.forbidden(graph.import_edges())
    assert not bad, "forbidden imports: " + "; ".join(f"{s} -> {d} at {', '.join(w)}" for (s, d), w in bad.items())


def test_the_script_sees_function_level_and_relative_imports(tmp_path: Path) -> None:
    graph = _load()
    pkg = tmp_path / "kforge_desktop"
    for name in ("store", "search", "kernels"):
        (pkg / name).mkdir(parents=True)
        (pkg / name / "__init__.py").write_text("")
    (pkg / "store" / "session.py").write_text("def f():\n    from ..search import events\n")
    (pkg / "kernels" / "pool.py").write_text("from kforge_desktop.store.session import f\n")
    (pkg / "search" / "__init__.py").write_text("from .. import kernels\n")
    edges = graph.import_edges(pkg)
    assert set(edges) == {("store", "search"), ("kernels", "store"), ("search", "kernels")}
    assert set(graph.forbidden(edges)) == {("store", "search"), ("kernels", "store")}


def test_the_script_exits_with_the_verdict() -> None:
    run = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, cwd=REPO)
    assert "search    -> kernels" in run.stdout
    assert run.returncode == (1 if "FORBIDDEN" in run.stdout else 0)
