"""The import graph between kforge_desktop's top-level packages, checked against the architecture.

    .venv/bin/python scripts/import_graph.py           # every edge, then the forbidden ones
    .venv/bin/python scripts/import_graph.py --where   # with the file:line of each import

Imports are read with ``ast`` (nothing is imported or run): module-level imports, imports inside
functions, and imports under ``if TYPE_CHECKING:`` all count, because each is a dependency that a
change must respect. The exit status is 1 when an edge is forbidden.

``ALLOWED`` is the "may import" column of the package table in the architecture blueprint
(ARCHITECTURE.md), with two readings written down here because the table is silent on them:
- a package may also import what the packages it may import may import (``search`` may import
  ``kernels``, so it may use ``problem``, whose ``Problem`` the evaluator takes). Upward and sideways
  edges (``store`` -> ``search``, ``kernels`` -> ``store``, ``llm`` -> anything) stay forbidden.
- ``csource`` (plain text in, plain text out) imports no other package of ours; any package may
  import it, as it would a standard library module.
Modules at the top of the package (``paths``, ``__init__``, ``__main__``) are not packages and are
not checked.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = "kforge_desktop"
PACKAGE_DIR = Path(__file__).resolve().parent.parent / ROOT

PACKAGES = ("problem", "hardware", "csource", "kernels", "llm", "search", "store", "modelopt", "gui", "cli")

# "may import", as the architecture's table says it (direct); closed transitively below
_DIRECT: dict[str, set[str]] = {
    "problem": set(),
    "hardware": set(),
    "csource": set(),
    "kernels": {"problem", "hardware"},
    "llm": set(),
    "search": {"kernels", "llm", "store"},
    "store": {"problem", "kernels"},
    "modelopt": {"problem", "kernels", "search"},
    "gui": set(PACKAGES) - {"gui"},
    "cli": set(PACKAGES) - {"gui", "cli"},
}
LEAVES = {"csource"}  # import nothing of ours; importable by every package


def _closure(direct: dict[str, set[str]]) -> dict[str, set[str]]:
    allowed = {pkg: set(deps) for pkg, deps in direct.items()}
    changed = True
    while changed:
        changed = False
        for pkg, deps in allowed.items():
            more = set().union(*(allowed[d] for d in deps)) - deps - {pkg} if deps else set()
            if more:
                deps |= more
                changed = True
    for pkg in allowed:
        if pkg not in LEAVES:
            allowed[pkg] |= LEAVES - {pkg}
    return allowed


ALLOWED = _closure(_DIRECT)


def _package_of(module: str) -> str | None:
    """``kforge_desktop.search.events`` -> ``search``; None for anything else."""
    parts = module.split(".")
    if len(parts) >= 2 and parts[0] == ROOT and parts[1] in PACKAGES:
        return parts[1]
    return None


def _imported_modules(node: ast.Import | ast.ImportFrom, module_name: str, is_package: bool) -> list[str]:
    """Absolute module names one import statement brings in (``from .. import x`` gives ``..x`` too,
    since ``x`` may be a subpackage)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level == 0:
        base = node.module or ""
    else:
        here = module_name.split(".") if is_package else module_name.split(".")[:-1]
        up = here[: len(here) - (node.level - 1)]
        base = ".".join(up + ([node.module] if node.module else []))
    return [base] + [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]


def import_edges(package_dir: Path = PACKAGE_DIR) -> dict[tuple[str, str], list[str]]:
    """{(importing package, imported package): ["path:line", ...]} over every .py file."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(package_dir.rglob("*.py")):
        rel = path.relative_to(package_dir.parent)
        parts = list(rel.with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        module_name = ".".join(parts)
        src = _package_of(module_name) if len(parts) >= 2 else None
        if src is None:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            targets = {_package_of(m) for m in _imported_modules(node, module_name, is_package)}
            for dst in sorted(t for t in targets if t and t != src):
                where = f"{rel.as_posix()}:{node.lineno}"
                if where not in edges[(src, dst)]:
                    edges[(src, dst)].append(where)
    return {edge: sorted(where, key=_by_file_and_line) for edge, where in edges.items()}


def _by_file_and_line(where: str) -> tuple[str, int]:
    path, line = where.rsplit(":", 1)
    return path, int(line)


def forbidden(edges: dict[tuple[str, str], list[str]]) -> dict[tuple[str, str], list[str]]:
    """The edges the architecture does not allow."""
    return {edge: where for edge, where in edges.items() if edge[1] not in ALLOWED[edge[0]]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--where", action="store_true", help="list the file:line of every import")
    args = parser.parse_args(argv)
    edges = import_edges()
    bad = forbidden(edges)
    order = {p: i for i, p in enumerate(PACKAGES)}
    print("import edges between kforge_desktop packages (importer -> imported: imports):")
    for (src, dst), where in sorted(edges.items(), key=lambda e: (order[e[0][0]], order[e[0][1]])):
        flag = "  FORBIDDEN" if (src, dst) in bad else ""
        print(f"  {src:9s} -> {dst:9s} {len(where):3d}{flag}")
        if args.where:
            for w in where:
                print(f"      {w}")
    if not bad:
        print("no forbidden edges")
        return 0
    print(f"{len(bad)} forbidden edge(s):")
    for (src, dst), where in sorted(bad.items(), key=lambda e: (order[e[0][0]], order[e[0][1]])):
        allowed = ", ".join(sorted(ALLOWED[src], key=order.get)) or "nothing of ours"
        print(f"  {src} -> {dst} (may import: {allowed}): {', '.join(where)}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
