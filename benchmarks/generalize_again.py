"""Reading the generalization benchmark's recorded searches again, from copies of their session files.

``generalize.py`` runs the searches and reports them; this reads a recorded search again: its summary
(``collect`` and the correct kernels that differ from every seed), as if it had stopped after its first
N candidates (``--first``), its correct kernels judged again by today's evaluator (``--rejudge``), with its
best kernels and its seed re-timed together (``--retime``), or
every row of a results file rewritten from its session (``--recount``). The record itself is never
written; each reading works on a scratch copy.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from search_quality import collect, load_rows  # noqa: E402  (the shared reading of a session)

PROBLEMS = HERE / "problems_generalize"


def different_from_seeds(store, pid: int, problem) -> dict:
    """How many correct self-made LLM kernels differ from every seed and from the exemplar the prompts
    showed (``normalize_code``); the best seed's speedup."""
    from kforge_desktop.csource.normalize import normalize_code
    from kforge_desktop.search.exemplars import best_exemplar
    from kforge_desktop.search.setup import try_scaffold

    nodes = store.nodes(pid)
    seeds = [n for n in nodes if n.origin == "seed"]
    known = {normalize_code(n.kernel_source, n.language) for n in seeds if n.kernel_source and n.language in ("cpp", "cuda")}
    scaffold = try_scaffold(problem, "cpp")
    if scaffold is not None:
        shown = best_exemplar(scaffold, problem.source, memory=False)
        if shown is not None:
            known.add(normalize_code(shown[1], "cpp"))
    correct = [n for n in nodes if n.origin == "llm" and n.verdict is not None and n.verdict.status == "ok"
               and not n.verdict.library_calls]
    different = [n for n in correct if normalize_code(n.kernel_source, n.language) not in known]
    seed_speedups = [n.speedup for n in seeds if n.speedup]
    return {"self_made_different": len(different), "seed_names": [n.directive for n in seeds],
            "best_seed_speedup": max(seed_speedups) if seed_speedups else None}


def ratio(r: dict) -> float | None:
    """A search's best LLM node over its best seed (over eager where it had no seed); None with no LLM node."""
    best = r.get("best_llm_speedup")
    if best is None:
        return None
    return best / (r.get("best_seed_speedup") or 1.0)


def counts(plain: Path, row: dict, problem) -> dict:
    """The summary of ``row``'s search (``collect`` and ``different_from_seeds``) read from the session file ``plain``."""
    from kforge_desktop.store import SessionStore

    store = SessionStore(plain)
    try:
        pid = next(p.id for p in store.problems() if p.name == row["problem"])
        return {**collect(store, pid), **different_from_seeds(store, pid, problem)}
    finally:
        store.close()


def recount(path: Path) -> int:
    """Read every recorded search's session again (``collect``) and rewrite its row: a summary column
    added later (``failures``) then covers the searches run before it. Only the summary is read."""
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.store import readable, stored

    rows = load_rows(path)
    for row in rows:
        session = stored(ROOT / row["session"])  # as recorded, or packed since
        if session is None:
            continue
        problem = load_problem(PROBLEMS / row["half"] / f"{row['problem']}.py")
        with readable(session) as plain:
            row.update(counts(plain, row, problem))
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"{len(rows)} rows recounted", flush=True)
    return 0


@contextlib.contextmanager
def session_copy(row: dict, first: int | None = None):
    """(a scratch copy of ``row``'s session, its problem); the record itself is never written. With
    ``first``: the copy without the LLM nodes asked after the ``first``-th (node ids follow the order of the
    requests; the budget ends a search and changes nothing before that, so this is what a search of that
    budget would have made)."""
    import shutil
    import sqlite3
    import tempfile

    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.store import readable, stored

    problem = load_problem(PROBLEMS / row["half"] / f"{row['problem']}.py")
    with readable(stored(ROOT / row["session"])) as plain, tempfile.TemporaryDirectory(prefix="kforge-copy-") as tmp:
        copy = Path(tmp) / plain.name
        shutil.copyfile(plain, copy)
        if first is not None:
            con = sqlite3.connect(copy)
            try:
                asked = [i for (i,) in con.execute("SELECT id FROM nodes WHERE origin = 'llm' AND state IN "
                                                   "('evaluated', 'no_code') ORDER BY id")]
                if len(asked) > first:
                    later = "SELECT id FROM nodes WHERE origin = 'llm' AND id > ?"
                    con.execute(f"DELETE FROM verdicts WHERE node_id IN ({later})", (asked[first - 1],))
                    con.execute("DELETE FROM nodes WHERE origin = 'llm' AND id > ?", (asked[first - 1],))
                    con.commit()
            finally:
                con.close()
        yield copy, problem


def by_request(rows: list[dict]) -> dict[str, list]:
    """Per request (the directive, or ``whole``/``repair``) over the searches of ``rows``: answers, repeats, correct /
    evaluated, the correct edits' speed over the kernel they edited, how many of those ran >= 1.1x it, in how many
    searches it made the best LLM node, and why the others failed (verdict status -> count). Counts only: no kernel,
    prompt or answer is read out."""
    from directive_record import _queries  # the shared reading of recorded sessions

    from kforge_desktop.store import stored

    table: dict[str, list] = {}
    for (nodes,) in _queries([str(stored(ROOT / row["session"])) for row in rows],
                             "SELECT n.id, n.parent_id, n.origin, n.kind, n.directive, n.state, v.status, v.speedup "
                             "FROM nodes n LEFT JOIN verdicts v ON v.node_id = n.id"):
        speed = {i: sp for i, _p, _o, _k, _d, _s, st, sp in nodes if st == "ok" and sp}
        best = max((n for n in nodes if n[2] == "llm" and n[0] in speed), key=lambda n: speed[n[0]], default=None)
        for i, parent, origin, kind, directive, state, status, _sp in nodes:
            if origin != "llm":
                continue
            key = kind if kind != "edit" else (directive or "?").split("@")[0].split(":")[0]
            # answers, repeats, correct, evaluated, ratios, best, failures
            t = table.setdefault(key, [0, 0, 0, 0, [], 0, {}])
            t[0] += 1
            if state == "duplicate":
                t[1] += 1
                continue
            if status is None and state != "no_code":
                continue
            t[3] += 1
            t[2] += status == "ok"
            if status != "ok":
                t[6][status or state] = t[6].get(status or state, 0) + 1
            if kind == "edit" and i in speed and speed.get(parent):
                t[4].append(speed[i] / speed[parent])
            t[5] += best is not None and best[0] == i
    return table


def request_table(rows: list[dict], failures: Callable[[dict], str]) -> str:
    """``by_request`` as a markdown table, each request's failures written by ``failures``."""
    import statistics

    table = by_request(rows)
    out = ["| request | answers | repeats | correct / evaluated | correct edits vs the kernel edited (median) | "
           ">= 1.1x the kernel edited | best LLM node of its search | what failed |", "|---|---|---|---|---|---|---|---|"]
    for key, (n, dup, ok, evaluated, ratios, best, failed) in sorted(table.items(), key=lambda kv: -kv[1][0]):
        med = f"{statistics.median(ratios):.2f}x" if ratios else "-"
        out.append(f"| {key} | {n} | {dup} | {ok}/{evaluated} | {med} | {sum(r >= 1.1 for r in ratios)} | {best} | "
                   f"{failures(failed)} |")
    return "\n".join(out)


def retimed_speeds(plain: Path, row: dict, evaluator) -> dict:
    """Re-time the search's contenders and its fastest seed together in the session file ``plain``
    (``retiming.retime_best``, what the app's "Re-time the best nodes" runs) and read the speed columns
    from that one measurement: the fastest re-timed LLM kernel and seed."""
    from kforge_desktop.search.retiming import retime_best
    from kforge_desktop.store import SessionStore

    store = SessionStore(plain)
    try:
        rec = next(p for p in store.problems() if p.name == row["problem"])
        retime_best(store, rec.id, rec.to_problem(), evaluator, lambda m, _lvl="info": None)
        again = [n for n in store.nodes(rec.id) if n.verdict is not None and n.verdict.retimed
                 and n.verdict.status == "ok" and n.speedup is not None and not n.verdict.library_calls]
        return {"best_llm_speedup": max((n.speedup for n in again if n.origin == "llm"), default=None),
                "best_seed_speedup": max((n.speedup for n in again if n.origin == "seed"), default=None),
                "retimed": True}
    finally:
        store.close()


def rejudged(plain: Path, row: dict, problem, judge) -> int:
    """Every correct LLM kernel of ``row``'s search in the session file ``plain`` judged again by today's
    evaluator ``judge`` (its NaN trial included); a kernel that fails now gets its new verdict there, so
    the counts and the re-timing read it as failed. Returns how many fail now."""
    from kforge_desktop.search.tree import reward
    from kforge_desktop.store import SessionStore

    store = SessionStore(plain)
    try:
        pid = next(p.id for p in store.problems() if p.name == row["problem"])
        failing = 0
        for n in store.nodes(pid):
            if n.origin != "llm" or n.verdict is None or n.verdict.status != "ok" or n.verdict.library_calls:
                continue
            v = judge.evaluate(problem, n.source)
            if v.status != "ok":
                store.record_verdict(n.id, v, reward(v))
                failing += 1
        return failing
    finally:
        store.close()


def read_again(row: dict, first: int | None = None, evaluator=None, rounds: int = 1, judge=None) -> dict:
    """``row`` read again from a copy of its session: with ``first``, as if its search had stopped after
    its first ``first`` LLM candidates (only the time split, tokens and seconds, still covers the whole
    search); with a ``judge`` (an evaluator), its correct LLM kernels judged again first (``rejudged``;
    ``now_failing`` says how many fail now); with an ``evaluator``, its speed columns from ``rounds``
    re-timings of its best kernels and its seed together (``retimed_speeds``), each on a fresh copy: the
    columns of the re-timing whose best LLM vs seed is the median, and every round's ratio in
    ``retimed_ratios``. A search timed its seeds first and its kernels later, each at its own moment; on a
    busy machine "best LLM vs seed" then compares two moments. One re-timing can meet a busy moment too:
    single re-timings put pooling kernels 1.11-1.36x over their seed, three rounds 0.91-1.10x
    (docs/benchmarks.md, twenty-fifth and twenty-sixth measurements)."""
    import shutil
    import tempfile

    from kforge_desktop.store import stored

    if first is not None and row["budget"] <= first:
        first = None
    if stored(ROOT / row["session"]) is None or (first is None and evaluator is None and judge is None):
        return row
    with session_copy(row, first) as (copy, problem):
        again = dict(row)
        if judge is not None:
            again["now_failing"] = rejudged(copy, row, problem, judge)
        again.update(counts(copy, row, problem))
        if first is not None:
            again["budget"] = first
        if evaluator is None:
            return again
        timed = []
        for _ in range(max(1, rounds)):
            with tempfile.TemporaryDirectory(prefix="kforge-copy-") as tmp:
                fresh = Path(tmp) / copy.name
                shutil.copyfile(copy, fresh)
                timed.append(retimed_speeds(fresh, row, evaluator))
    measured = sorted((t for t in timed if ratio(t) is not None), key=ratio)
    again.update(measured[(len(measured) - 1) // 2] if measured else timed[0])  # the lower median of an even count
    again["retimed_ratios"] = [round(ratio(t), 3) for t in measured]
    return again
