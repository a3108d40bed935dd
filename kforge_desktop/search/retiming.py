"""The end of a search: its best few nodes and the reference re-timed together, and the choice made there.

Why: each node was timed once, at its own moment, beside whatever else the machine was doing; the
fastest-looking node may just have had the quietest moment. ``Evaluator.retime`` times the
contenders round by round against the same eager and torch.compile runs, in one worker with
nothing else running, and every re-timed verdict replaces the node's first one (it says it was
re-timed, and the log keeps the first figure), so the chosen node is the one that is fastest there.

A re-timing can meet a busy moment too (another program on the cores, a GPU shared with someone
else): when its runs sat on scheduler slices or its eager took far longer than in the rest
of the session (``SLOWER``), it runs again, up to ``ATTEMPTS`` times in all. The first quiet one is
kept; if none was, the one whose eager came closest to the session's, and the user is told the
choice may be noise.
"""

from __future__ import annotations

import math
from dataclasses import replace

from ..kernels.timing import TimingStats, significant
from ..kernels.verdict import Verdict, ok_reason
from ..problem.problem import Problem
from ..store import NodeRecord, SessionStore
from .tree import Tree, reward

TOP = 4  # enough to catch a lucky first measurement, few enough to re-time in seconds
MOST = 6  # with the near-ties and the disturbed ones
NEAR = 0.75  # a node within this fraction of the best figure is a near-tie: re-timed too
MOVED = 1.5  # a node's eager this many times slower or faster than in the rest of the session: it moved
ATTEMPTS = 3  # re-timings in all when each met a busy moment (a few seconds each)
SLOWER = 2.0  # a re-timing whose eager is this many times the session's met a busy moment (quiet ones
# measured 0.64-1.52x the session's eager, busy ones 3.4-158x: benchmarks.md, "Busy re-timings")


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


def retimed_verdict(old: Verdict, mine: dict, eager: dict, comp: dict | None, together: int,
                    busy: str = "") -> Verdict:
    cand, base = _stats(mine), _stats(eager)
    fields = dict(
        latency_ms=cand.median_ms, latency_iqr_ms=cand.iqr_ms, baseline_ms=base.median_ms,
        baseline_iqr_ms=base.iqr_ms, call_ms=mine["call_ms"], baseline_call_ms=eager["call_ms"],
        n_timed=cand.n, speedup=base.median_ms / cand.median_ms if cand.median_ms > 0 else None,
        noise=max(cand.rel_spread, base.rel_spread), significant=significant(cand, base),
        # a re-timing whose runs sat on scheduler slices was run again; one kept after three busy ones is
        # said in the reason, not flagged: a flag would leave nothing to choose
        disturbed="",
        host_saving_ms=None, retimed=together,
        time_basis="device" if str(old.device).startswith("cuda") else "wall",
    )
    if comp is not None:
        fields.update(compile_baseline_ms=comp["median_ms"], compile_iqr_ms=comp["iqr_ms"],
                      compile_call_ms=comp["call_ms"],
                      speedup_compile=comp["median_ms"] / cand.median_ms if cand.median_ms > 0 else None)
    new = replace(old, **fields)
    busy = f"; every re-timing met a busy machine: {busy}" if busy else ""
    return replace(new, reason=ok_reason({**new.to_dict()}) + f" (re-timed with the best {together} together{busy})")


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
    usual = usual_eager_ms(store, problem_id, nodes[0].verdict.device)
    tries: list[tuple[dict, str]] = []
    for attempt in range(1, ATTEMPTS + 1):
        result = evaluator.retime(problem, [n.source for n in nodes])
        if result.get("timings", {}).get("eager") is None:
            log(f"re-timing the best nodes did not run ({result.get('error', 'no timing slot')})", "warning")
            return []
        busy = disturbance(result, usual)
        tries.append((result, busy))
        if not busy:
            break
        if attempt < ATTEMPTS:
            log(f"re-timing {attempt} of the best nodes met a busy machine ({busy}): timing again", "info")
    result, busy = min(tries, key=lambda t: (bool(t[1]), _distance(t[0], usual)))
    if busy:
        log(f"every one of {len(tries)} re-timings met a busy machine ({busy}): the choice below may be noise; "
            "close what else runs and re-time the session (kforge retime)", "warning")
    timings, failed = result.get("timings", {}), result.get("failed", {})
    eager = timings["eager"]
    lines, done = [], []
    for i, node in enumerate(nodes):
        old = node.verdict
        if str(i) in failed:
            new = replace(old, status="incorrect", reason="on fresh inputs before re-timing: " + failed[str(i)],
                          retimed=len(nodes))
            lines.append(f"#{node.id} now fails ({failed[str(i)][:80]})")
        elif str(i) in timings:
            new = retimed_verdict(old, timings[str(i)], eager, timings.get("compile"), len(nodes), busy)
            lines.append(f"#{node.id} {new.speedup:.2f}x (was {old.speedup:.2f}x)")
        else:
            continue
        store.record_verdict(node.id, new, reward(new))
        done.append(node.id)
    log("re-timed the best nodes together: " + "; ".join(lines), "info")
    return done


def usual_eager_ms(store: SessionStore, problem_id: int, device: str, retimed: bool = False) -> float | None:
    """The median eager time of the session's correct verdicts on ``device`` (first measurements
    only unless ``retimed``); None with fewer than two."""
    others = sorted(n.verdict.baseline_ms for n in store.nodes(problem_id, with_source=False)
                    if n.verdict is not None and n.verdict.baseline_ms and n.verdict.device == device
                    and n.verdict.status == "ok" and (retimed or not n.verdict.retimed))
    return others[len(others) // 2] if len(others) >= 2 else None


def disturbance(result: dict, usual_ms: float | None) -> str:
    """Why a re-timing's figures cannot be trusted ("" when they can): runs on scheduler slices, or
    an eager much slower than the session's usual one (a faster one says the first figures met the
    busy moments, not this one)."""
    timings = result.get("timings", {})
    if any(t.get("quantized") for t in timings.values()):
        return "runs sat on scheduler slices"
    eager = timings["eager"]["median_ms"]
    if usual_ms and eager > SLOWER * usual_ms:
        return f"eager took {eager:.4f} ms against {usual_ms:.4f} ms in the rest of the session"
    return ""


def _distance(result: dict, usual_ms: float | None) -> float:
    eager = result["timings"]["eager"]["median_ms"]
    return abs(math.log(eager / usual_ms)) if usual_ms and eager > 0 else 0.0


def baseline_moved(store: SessionStore, problem_id: int, verdict: Verdict) -> Verdict:
    """The verdict, flagged as disturbed when its eager run took a very different time from the
    eager runs of the session's other verdicts on the same device (the machine changed under the
    measurement: the speedup compares two different moments). Such a node is re-timed at the end."""
    if verdict.status != "ok" or not verdict.baseline_ms or verdict.disturbed:
        return verdict
    usual = usual_eager_ms(store, problem_id, verdict.device, retimed=True)
    if usual is None:
        return verdict
    ratio = verdict.baseline_ms / usual
    if 1 / MOVED <= ratio <= MOVED:
        return verdict
    return replace(verdict, disturbed=f"eager took {verdict.baseline_ms:.4f} ms here against {usual:.4f} ms in the "
                                      "rest of the session: the machine changed under the measurement")
