"""The end of a search: its best few nodes and the reference re-timed together, and the choice made there.

Why: each node was timed once, at its own moment, beside whatever else the machine was doing; the
fastest-looking node may just have had the quietest moment. ``Evaluator.retime`` times the
contenders round by round against the same eager and torch.compile runs, in one worker with
nothing else running, and every re-timed verdict replaces the node's first one (it says it was
re-timed, and the log keeps the first figure), so the chosen node is the one that is fastest there.
"""

from __future__ import annotations

from dataclasses import replace

from ..kernels.timing import TimingStats, significant
from ..kernels.verdict import Verdict, ok_reason
from ..problem.problem import Problem
from ..store import NodeRecord, SessionStore
from .tree import Tree, reward

TOP = 4  # enough to catch a lucky first measurement, few enough to re-time in seconds
MOST = 6  # with the near-ties and the disturbed ones
NEAR = 0.75  # a node within this fraction of the best figure is a near-tie: re-timed too


def contenders(store: SessionStore, problem_id: int, top: int = TOP) -> list[NodeRecord]:
    """The fastest correct nodes that can be chosen (no delegation to PyTorch unless pinned): the
    ``top`` fastest, every near-tie of the best, and disturbed measurements (the ones most in need
    of it), at most ``MOST``; and the fastest seed, whatever its figure. The seed is what a search
    starts from and what its kernels are measured against ("1.3x the seed"): timed once, at the start,
    a seed that met a busy moment would otherwise stay slow on paper beside re-timed kernels."""
    tree = Tree(store.nodes(problem_id))
    ok = [n for n in tree.nodes.values() if n.origin != "root" and n.speedup is not None and n.source
          and (n.pinned or not n.verdict.delegates)]
    ok.sort(key=lambda n: (-(n.speedup or 0), n.id))
    if not ok:
        return []
    best = ok[0].speedup or 0.0
    chosen = [n for i, n in enumerate(ok) if i < top or (n.speedup or 0) >= NEAR * best or n.verdict.disturbed]
    chosen = chosen[:MOST]
    seed = next((n for n in ok if n.origin == "seed"), None)
    if seed is not None and seed.id not in {n.id for n in chosen}:
        chosen = chosen[:MOST - 1] + [seed]
    return chosen


def _stats(t: dict) -> TimingStats:
    return TimingStats(t["median_ms"], t["iqr_ms"], t["q1_ms"], t["q3_ms"], t["n"])


def retimed_verdict(old: Verdict, mine: dict, eager: dict, comp: dict | None, together: int) -> Verdict:
    cand, base = _stats(mine), _stats(eager)
    fields = dict(
        latency_ms=cand.median_ms, latency_iqr_ms=cand.iqr_ms, baseline_ms=base.median_ms,
        baseline_iqr_ms=base.iqr_ms, call_ms=mine["call_ms"], baseline_call_ms=eager["call_ms"],
        n_timed=cand.n, speedup=base.median_ms / cand.median_ms if cand.median_ms > 0 else None,
        noise=max(cand.rel_spread, base.rel_spread), significant=significant(cand, base),
        disturbed="the re-timing itself sat on scheduler slices" if mine.get("quantized") else "",
        host_saving_ms=None, retimed=together,
        time_basis="device" if str(old.device).startswith("cuda") else "wall",
    )
    if comp is not None:
        fields.update(compile_baseline_ms=comp["median_ms"], compile_iqr_ms=comp["iqr_ms"],
                      compile_call_ms=comp["call_ms"],
                      speedup_compile=comp["median_ms"] / cand.median_ms if cand.median_ms > 0 else None)
    new = replace(old, **fields)
    return replace(new, reason=ok_reason({**new.to_dict()}) + f" (re-timed with the best {together} together)")


def retime_or_keep(store: SessionStore, problem_id: int, problem: Problem, evaluator, log) -> list[int]:
    """``retime_best``, as a search ends: a re-timing that fails leaves the first verdicts standing
    (and says so)."""
    try:
        return retime_best(store, problem_id, problem, evaluator, log)
    except Exception as err:
        log(f"re-timing the best nodes failed: {type(err).__name__}: {err}", "warning")
        return []


def retime_best(store: SessionStore, problem_id: int, problem: Problem, evaluator, log) -> list[int]:
    """Re-time the contenders and record their new verdicts; returns the ids re-timed. ``log(msg,
    level)`` tells the user what moved."""
    nodes = contenders(store, problem_id)
    if not nodes or evaluator is None or not hasattr(evaluator, "retime"):
        return []
    result = evaluator.retime(problem, [n.source for n in nodes])
    timings, failed = result.get("timings", {}), result.get("failed", {})
    eager = timings.get("eager")
    if eager is None:
        log(f"re-timing the best nodes did not run ({result.get('error', 'no timing slot')})", "warning")
        return []
    lines, done = [], []
    for i, node in enumerate(nodes):
        old = node.verdict
        if str(i) in failed:
            new = replace(old, status="incorrect", reason="on fresh inputs before re-timing: " + failed[str(i)],
                          retimed=len(nodes))
            lines.append(f"#{node.id} now fails ({failed[str(i)][:80]})")
        elif str(i) in timings:
            new = retimed_verdict(old, timings[str(i)], eager, timings.get("compile"), len(nodes))
            lines.append(f"#{node.id} {new.speedup:.2f}x (was {old.speedup:.2f}x)")
        else:
            continue
        store.record_verdict(node.id, new, reward(new))
        done.append(node.id)
    log("re-timed the best nodes together: " + "; ".join(lines), "info")
    return done


MOVED = 1.5  # eager this many times slower or faster than in the rest of the session: it moved


def baseline_moved(store: SessionStore, problem_id: int, verdict: Verdict) -> Verdict:
    """The verdict, flagged as disturbed when its eager run took a very different time from the
    eager runs of the session's other verdicts on the same device (the machine changed under the
    measurement: the speedup compares two different moments). Such a node is re-timed at the end."""
    if verdict.status != "ok" or not verdict.baseline_ms or verdict.disturbed:
        return verdict
    others = sorted(n.verdict.baseline_ms for n in store.nodes(problem_id, with_source=False)
                    if n.verdict is not None and n.verdict.baseline_ms and n.verdict.device == verdict.device
                    and n.verdict.status == "ok")
    if len(others) < 2:
        return verdict
    usual = others[len(others) // 2]
    ratio = verdict.baseline_ms / usual
    if 1 / MOVED <= ratio <= MOVED:
        return verdict
    return replace(verdict, disturbed=f"eager took {verdict.baseline_ms:.4f} ms here against {usual:.4f} ms in the "
                                      "rest of the session: the machine changed under the measurement")
