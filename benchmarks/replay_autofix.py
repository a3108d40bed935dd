"""Replay recorded searches through the current mechanical fixes: what would they have saved?

For every LLM-written candidate that failed to compile in the given session files, apply the
current answer-time mends (the parent's row work where the answer left the pattern's comment, a helper an
ancestor had put back, ``scaffold.clean_kernel``) and ``autofix`` (the same rounds the search runs after each answer) and, when the fixed kernel
compiles, evaluate it for real (build, verify, time) against its problem. Every other failed
candidate (wrong values, a crash) goes through the fixes applied to each answer's code
(the parent's row work for the pattern's comment, ``scaffold.clean_kernel``: a scan's SIMD reduction dropped, each
block's rows looped over) and,
when they change it, is evaluated the same way (an answer recorded in several sessions, once). The model's answers are
the recorded ones, so this measures a change to the fixes without new LLM calls, and anyone can
rerun it on the published sessions:

    python benchmarks/replay_autofix.py benchmarks/results/search/sessions/*-mcts-*.kforge.gz
    python benchmarks/replay_autofix.py benchmarks/results/generalize/*_sessions/dev/*.kforge.gz
    python benchmarks/replay_autofix.py --wrong-only benchmarks/results/generalize/*_sessions/dev/*.kforge.gz

(Each session's problem is the one it recorded, so a session of any problem file can be replayed.)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _has_problem(path: Path) -> bool:
    """Whether the session file records a problem (read-only: opening a store would write its schema)."""
    import sqlite3

    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return bool(con.execute("SELECT name FROM sqlite_master WHERE name = 'problems'").fetchone()
                    and con.execute("SELECT 1 FROM problems LIMIT 1").fetchone())
    finally:
        con.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sessions", nargs="+")
    ap.add_argument("--wrong-only", action="store_true", help="only the candidates that built and failed")
    args = ap.parse_args(argv)

    from kforge_desktop.csource.items import restore_helpers
    from kforge_desktop.csource.mends import fill_elided_rows
    from kforge_desktop.csource.normalize import normalize_code
    from kforge_desktop.kernels.evaluator import Evaluator
    from kforge_desktop.kernels.native import syntax_check
    from kforge_desktop.problem.problem import Problem
    from kforge_desktop.search.answers import autofix_kernel
    from kforge_desktop.search.generation import lineage
    from kforge_desktop.search.scaffold import build_scaffold, clean_kernel
    from kforge_desktop.store import SessionStore
    from kforge_desktop.store.archive import each_readable

    failed = fixed = correct = candidates = 0
    wrong = mended = mended_ok = 0
    seen: set[str] = set()
    with Evaluator(device="cpu", workers=1) as evaluator:
        for path, plain in each_readable(args.sessions):
            if not _has_problem(plain):  # a search stopped before it recorded its problem
                print(f"{Path(path).name:<34} no problem recorded: skipped", flush=True)
                continue
            store = SessionStore(plain)
            record = store.problems()[0]
            problem = Problem(name=record.name, source=record.source, path=None)  # as the session recorded it
            scaffold = build_scaffold(problem, "cpp")
            for n in store.nodes(record.id):
                if n.origin != "llm" or n.verdict is None:
                    continue
                candidates += 1
                parent = store.node(n.parent_id) if n.parent_id is not None else None
                elided = fill_elided_rows(n.kernel_source, parent.kernel_source or "")[0] if parent else n.kernel_source
                if n.verdict.status not in ("ok", "compile_error", "rejected") and n.kernel_source not in seen:
                    seen.add(n.kernel_source)
                    wrong += 1
                    cleaned = clean_kernel(elided)
                    if normalize_code(cleaned, "cpp") == normalize_code(n.kernel_source, "cpp"):
                        continue
                    mended += 1
                    v = evaluator.evaluate(problem, scaffold.module_source(cleaned))
                    mended_ok += v.status == "ok" and not v.library_calls
                    print(f"{Path(path).name:<34} node {n.id:<3} {'mended (' + n.verdict.status + ')':<48} "
                          f"{v.summary()}", flush=True)
                    continue
                if n.verdict.status != "compile_error" or args.wrong_only:
                    continue
                failed += 1
                # the answer-time mends first, as a search does: the pattern's comment filled, a helper an ancestor
                # had, then clean_kernel
                restored, put_back = restore_helpers(elided, lineage(store, parent))
                cleaned = clean_kernel(restored)
                kernel, note = autofix_kernel(scaffold, cleaned)
                if normalize_code(cleaned, "cpp") != normalize_code(n.kernel_source, "cpp"):
                    if not note and not syntax_check(scaffold.kernel_file(cleaned), "cpp"):
                        note = "mended"
                    elif note:
                        note = "mended, " + note
                if put_back:
                    note = f"{note} ({', '.join(put_back)} put back)"
                if not note:
                    print(f"{Path(path).name:<34} node {n.id:<3} still does not compile")
                    continue
                fixed += 1
                v = evaluator.evaluate(problem, scaffold.module_source(kernel))
                correct += v.status == "ok" and not v.library_calls
                print(f"{Path(path).name:<34} node {n.id:<3} {note:<48} {v.summary()}", flush=True)
            store.close()
    print(f"\n{candidates} LLM candidates; {failed} did not compile; the current fixes make {fixed} of them "
          f"compile and {correct} correct; {wrong} others failed (wrong values, a crash), the answer-time fixes "
          f"change {mended} of them and {mended_ok} are then correct")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
