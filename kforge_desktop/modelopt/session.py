"""A whole-model session: one SQLite session file holding one problem per target.

- ``create_model_session`` profiles the model, writes each target's problem file (and its captured
  inputs) into ``<session>.targets/``, adds the problems to the session with the target's facts in
  ``info`` (op, module_path, shapes, share, budget and why) and records the profile under the
  session's ``modelopt`` meta key. The GUI's Targets dock and ``kforge optimize`` both start here.
- ``chosen_kernels`` reads back, per target, the pinned node or else the fastest verified one —
  what bench, export and integration use — matched to a fresh profile of the model by the target's
  reference code, not its name (names follow the ranking, which can change between runs).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path

from .budget import Allocation, allocate
from .integrate import ChosenKernel
from .loader import ModelFile, load_model_file
from .problems import TargetProblemError, write_problem
from .profile import Profiled, Target, profile_model, rename_targets

META_KEY = "modelopt"
SESSION_SUFFIX = ".kforge"


class ModelSessionError(Exception):
    """A session that is not a whole-model session, or whose model file is gone (one sentence)."""


def targets_folder(session_path: str | Path) -> Path:
    """Where a model session keeps its problem files: ``<session>.targets/`` beside the session."""
    p = Path(session_path)
    return p.with_name(p.stem + ".targets")


@dataclass
class ModelSession:
    store: object  # SessionStore
    model_file: ModelFile
    profiled: Profiled
    allocations: list[Allocation]
    problem_ids: dict[str, int] = field(default_factory=dict)  # target name -> problem id
    skipped: dict[str, str] = field(default_factory=dict)  # target name -> why it has no problem


def _sig_to_json(sig) -> list:
    return [[list(shape), list(stride), dtype] for shape, stride, dtype in sig]


def _sig_from_json(sig) -> tuple:
    return tuple((tuple(shape), tuple(stride), str(dtype)) for shape, stride, dtype in sig)


def target_info(t: Target, alloc: Allocation | None, signatures=(), problem_file: str = "") -> dict:
    """The facts a view shows for a target (flat keys the Targets dock reads, plus the details)."""
    return {
        "op": t.op, "module_path": ", ".join(t.module_paths), "shapes": [list(s) for s in t.shapes],
        "share": t.share, "kind": t.kind, "calls": t.calls, "time_ms": t.time_ms, "floor_ms": t.floor_ms,
        "headroom_floor": t.headroom_floor, "headroom_compile": t.headroom_compile,
        "budget": alloc.budget if alloc else 0, "budget_reason": alloc.reason if alloc else "",
        "modelopt": {"target": t.name, "key": t.key, "signatures": [_sig_to_json(s) for s in signatures],
                     "problem_file": problem_file, "dtypes": list(t.dtypes),
                     "strides": [list(s) for s in t.strides], "module_paths": list(t.module_paths)},
    }


def create_model_session(model_path: str | Path, session_path: str | Path, config, *, total_budget: int | None = None,
                         compare_compile: bool = False, min_share: float = 0.01, floor_ratio: float = 1.25,
                         max_targets: int | None = None, only: tuple[str, ...] = (), progress=None) -> ModelSession:
    """Profile the model and lay out its session (see module doc). ``config`` is the search's
    ``SearchConfig``; each target's search gets it with its own share of ``total_budget``."""
    from ..search.engine import create_session
    from ..store import SessionStore

    say = progress or (lambda msg: None)
    if Path(session_path).exists():
        raise ModelSessionError(f"Session file {session_path} already exists; pick another session path.")
    say(f"loading {model_path}")
    mf = load_model_file(model_path, config.device)
    say("profiling")
    profiled = profile_model(mf.model, list(mf.inputs), config.device, name=mf.name, compare_compile=compare_compile,
                             progress=say)
    total = total_budget if total_budget is not None else (config.budget_candidates or 0)
    allocations = allocate(profiled.profile.targets, total, min_share=min_share, floor_ratio=floor_ratio,
                           max_targets=max_targets, only=only)
    by_target = {a.target: a for a in allocations}
    store = SessionStore(session_path)
    folder = targets_folder(session_path)
    session = ModelSession(store=store, model_file=mf, profiled=profiled, allocations=allocations)
    for t in profiled.profile.targets:
        alloc = by_target[t.name]
        if not t.optimizable:
            session.skipped[t.name] = t.note
            continue
        try:
            tp = write_problem(t, profiled.analysis.cuts[t.name], profiled.analysis.captures[t.name], folder, mf.name)
        except TargetProblemError as err:
            session.skipped[t.name] = str(err)
            continue
        cfg = dataclasses.replace(config, budget_candidates=alloc.budget)
        info = target_info(t, alloc, tp.signatures, str(tp.path))
        session.problem_ids[t.name] = create_session(store, tp.problem, cfg, info=info)
    store.set_meta(META_KEY, {
        "model_path": os.path.abspath(str(model_path)), "model_name": mf.name, "device": config.device,
        "total_budget": total, "profile": profiled.profile.to_dict(),
        "allocations": [dataclasses.asdict(a) for a in allocations], "skipped": session.skipped,
        "problem_ids": session.problem_ids,
    })
    return session


def model_meta(store) -> dict:
    meta = store.meta(META_KEY)
    if not meta:
        raise ModelSessionError(f"{store.path} is not a whole-model session (it was made from a problem file).")
    return meta


def is_model_session(store) -> bool:
    return bool(store.meta(META_KEY))


LEFT_TO_COMPILE = "left to torch.compile"


def left_to_compile(ours_ms: float | None, compile_ms: float | None) -> str | None:
    """Why a target is left to torch.compile, or None where our kernel is at least as fast.

    The one place that decides "never slower than torch.compile": ``ours_ms`` and ``compile_ms``
    are the evaluator's medians for the target alone (the verdict's ``latency_ms`` and
    ``compile_baseline_ms``, timed in one process on the same inputs). A kernel slower than
    torch.compile's code is not put back, so ``torch.compile(patched)`` compiles that target itself.
    Where torch.compile was not measured (None) there is nothing to compare: the kernel stays.
    """
    if ours_ms is None or compile_ms is None or compile_ms <= 0:
        return None
    if ours_ms > compile_ms:
        return f"{LEFT_TO_COMPILE} (ours {ours_ms:.3g} ms vs torch.compile {compile_ms:.3g} ms)"
    return None


def not_used_line(target: str, reason: str) -> str:
    """One line of a CLI listing for a target whose kernel is not used."""
    if reason.startswith(LEFT_TO_COMPILE + " ("):
        return f"{LEFT_TO_COMPILE}: {target} {reason[len(LEFT_TO_COMPILE) + 1:]}"
    return f"{target}: not used: {reason}"


NO_VERIFIED = "no verified kernel"


def not_used_summary(reasons: dict[str, str]) -> str:
    """Every target whose kernel is not used, in one sentence part: the targets with a reason of
    their own one by one, those with no verified kernel together (a model has few targets, so
    nothing is cut: the one a user is looking for is never among the left-out)."""
    own = [not_used_line(t, r) for t, r in sorted(reasons.items()) if r != NO_VERIFIED]
    none = [t for t, r in sorted(reasons.items()) if r == NO_VERIFIED]
    if none:
        own.append(f"{NO_VERIFIED}: {', '.join(none)}")
    return "; ".join(own) or NO_VERIFIED


def accept_reason(node, pinned: bool) -> str | None:
    """Why the chosen node's kernel is not used (None: it is used). A pinned node is the user's
    choice; otherwise the kernel must be faster than torch.compile's code for the target (where
    that was measured: ``left_to_compile``) and measurably faster than eager."""
    from ..search.setup import COMPILE_SEED

    if pinned:
        return None
    v = node.verdict
    if v is None or v.status != "ok" or v.speedup is None:
        return NO_VERIFIED
    if node.origin == "seed" and node.directive == COMPILE_SEED:
        # the same kernels torch.compile makes: as a custom op it only wins eager time, and under
        # torch.compile(patched) it stops the fusion with the neighbouring ops (vision_stage_gpu's max
        # pooling: 0.94x of torch.compile(model) with it)
        return f"{LEFT_TO_COMPILE} (its fastest kernel is torch.compile's own code)"
    slower = left_to_compile(v.latency_ms, v.compile_baseline_ms)
    if slower:
        return slower
    if v.speedup <= 1.0:
        return f"its fastest verified kernel is not faster than eager ({v.speedup:.2f}x)"
    if not v.significant and v.speedup < 1.1:
        return f"its fastest verified kernel is only {v.speedup:.2f}x, within the measurement noise"
    return None


def chosen_kernels(store, profiled: Profiled) -> tuple[dict[str, ChosenKernel], dict[str, str]]:
    """Per target of ``profiled``: the kernel to use, and for the others why there is none."""
    by_key = {t.key: t for t in profiled.profile.targets}
    chosen: dict[str, ChosenKernel] = {}
    reasons: dict[str, str] = {}
    for p in store.problems():
        info = (p.info or {}).get(META_KEY)
        if not info:
            continue
        t = by_key.get(info.get("key"))
        if t is None:
            reasons[info.get("target", p.name)] = "the model no longer computes this target"
            continue
        pinned = store.pinned_node(p.id)
        node = pinned or store.best_node(p.id)
        if node is None:
            reasons[t.name] = NO_VERIFIED
            continue
        why = accept_reason(node, pinned is not None)
        if why:
            reasons[t.name] = why
            continue
        v = node.verdict
        chosen[t.name] = ChosenKernel(
            target=t.name, source=node.source, signatures=tuple(_sig_from_json(s) for s in info["signatures"]),
            node_id=node.id, pinned=pinned is not None, speedup=v.speedup if v else None,
            verdict=v.to_dict() if v else {})
    return chosen, reasons


def session_targets(store) -> list[dict]:
    """Every profiled target of a model session, as plain dicts for a view: the profile's facts,
    the budget and why, the problem id (None where there is none) and the chosen node."""
    meta = model_meta(store)
    allocs = {a["target"]: a for a in meta.get("allocations", [])}
    ids = meta.get("problem_ids", {})
    rows = []
    for t in meta["profile"]["targets"]:
        pid = ids.get(t["name"])
        row = dict(t)
        row["budget"] = allocs.get(t["name"], {}).get("budget", 0)
        row["budget_reason"] = allocs.get(t["name"], {}).get("reason", "")
        row["problem_id"] = pid
        row["skipped"] = meta.get("skipped", {}).get(t["name"], "")
        node = store.chosen_node(pid) if pid is not None else None
        row["chosen_node"] = node.id if node else None
        row["best_speedup"] = node.speedup if node else None
        rows.append(row)
    return rows


def reload_model(store, device: str | None = None, model_path: str | Path | None = None) -> tuple[ModelFile, Profiled]:
    """Load the session's model file (or ``model_path``) again and analyse it (a quick profile)."""
    meta = model_meta(store)
    path = str(model_path or meta["model_path"])
    if not Path(path).exists():
        raise ModelSessionError(f"The model file of this session, {path}, is gone; pass it again.")
    dev = device or meta.get("device", "cpu")
    mf = load_model_file(path, dev)
    profiled = profile_model(mf.model, list(mf.inputs), dev, name=mf.name, runs=1, warmup=1, captures_per_variant=0)
    names = {}
    for p in store.problems():
        info = (p.info or {}).get(META_KEY) or {}
        if info.get("key"):
            names[info["key"]] = info.get("target", p.name)
    return mf, rename_targets(profiled, names)
