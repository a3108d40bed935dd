"""Optimize a whole model: profile, spread the budget, search each target, integrate, benchmark.

``kforge optimize MODEL.py`` lands here (the command detects a model file with
``loader.is_model_file`` and calls ``optimize_model``). Every step is saved in one session file:
one problem per target, each with its own search tree; the chosen kernel per target is the pinned
node, else the fastest verified one that is measurably faster than eager.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..search import events as ev
from .bench import BenchResult, bench_model, unpatched_copy
from .budget import Allocation
from .integrate import Integration, ModelCheck, integrate
from .profile import ModelProfile
from .session import META_KEY, SESSION_SUFFIX, chosen_kernels, create_model_session

RESULT_KEY = "modelopt_result"
SEEDS_ONLY_NOMINAL = 1000  # the budget a seeds-only run allocates with: it funds every target worth a search


@dataclass(frozen=True)
class ModelOptOptions:
    min_share: float = 0.01  # targets below this share of the op time are not searched
    floor_ratio: float = 1.25  # targets within this factor of their floor are not searched
    max_targets: int | None = None
    only: tuple[str, ...] = ()  # search only targets whose name or kind matches one of these
    compare_compile: bool = False  # also time each target under torch.compile while profiling (slow on CPU)
    bench: bool = True  # end-to-end benchmark after integration
    bench_runs: int = 20
    bench_compile: bool = True  # include torch.compile(original) in the benchmark
    # evaluate only each target's seeds (exemplar kernels, torch.compile's code on a GPU): every target
    # worth a search gets one, the model is never loaded
    seeds_only: bool = False


@dataclass(frozen=True)
class TargetOutcome:
    target: str
    op: str
    share: float
    budget: int
    budget_reason: str
    problem_id: int | None
    candidates: int
    best_speedup: float | None  # the fastest verified kernel's speedup over eager, the target alone
    chosen_node: int | None
    used: bool
    why_not: str


@dataclass
class ModelOptResult:
    session_path: Path
    profile: ModelProfile
    allocations: list[Allocation]
    outcomes: list[TargetOutcome]
    checks: list[ModelCheck]
    bench: BenchResult | None
    integration: Integration | None = field(default=None, repr=False)

    def to_dict(self) -> dict:
        return {
            "session": str(self.session_path), "model": self.profile.model, "device": self.profile.device,
            "targets": [dataclasses.asdict(o) for o in self.outcomes],
            "checks": [dataclasses.asdict(c) for c in self.checks],
            "bench": self.bench.to_dict() if self.bench else None,
        }


def default_session_path(model_name: str) -> Path:
    from ..paths import sessions_dir

    return sessions_dir() / f"{model_name}-{time.strftime('%Y%m%d-%H%M%S')}{SESSION_SUFFIX}"


def optimize_model(model_path: str | Path, config=None, *, session_path: str | Path | None = None,
                   options: ModelOptOptions | None = None, generator=None, evaluator=None,
                   llm: str | None = None, server: str | None = None, listener=None,
                   devices: list[str] | None = None, ray: str | None = None) -> ModelOptResult:
    """The whole flow (see module doc). ``config`` is the ``SearchConfig`` every target's search
    starts from; its ``budget_candidates`` (and ``budget_minutes``) is the total over all targets.
    ``generator``/``evaluator`` are opened here (and closed) unless given. With several
    ``devices`` (GPUs of this host) the targets are searched side by side, one per GPU at a time,
    with the one model; with ``ray`` every target's search evaluates on the cluster's actors."""
    from ..search.config import SearchConfig
    from ..search.runner import ModelChoice, SearchRunner
    from ..search.setup import save_evaluation

    config = config or SearchConfig()
    options = options or ModelOptOptions()
    emit = listener or (lambda e: None)

    def say(msg: str, level: str = "info") -> None:
        emit(ev.Log(level, msg))

    session_path = Path(session_path) if session_path else default_session_path(Path(model_path).stem)
    # seeds only: the allocation still decides which targets are worth a search (a nominal budget funds
    # them all), and each search evaluates its seeds and stops
    total_budget = SEEDS_ONLY_NOMINAL if options.seeds_only else config.budget_candidates or 0
    session = create_model_session(model_path, session_path, config, total_budget=total_budget,
                                   compare_compile=options.compare_compile, min_share=options.min_share,
                                   floor_ratio=options.floor_ratio, max_targets=options.max_targets,
                                   only=options.only, progress=say)
    store, profiled = session.store, session.profiled
    save_evaluation(store, devices, ray)
    total = sum(a.budget for a in session.allocations) or 1
    to_search = [a for a in sorted(session.allocations, key=lambda a: -a.weight)
                 if a.budget > 0 and a.target in session.problem_ids]
    if options.seeds_only:  # no LLM candidates anywhere: the report's budgets say so
        session.allocations = [dataclasses.replace(a, budget=0, reason=f"seeds only; {a.reason}") if a.budget else a
                               for a in session.allocations]

    # one model for every target's search; one evaluator (or one per GPU, side by side)
    jobs, allocation = [], {}
    for a in to_search:
        minutes = config.budget_minutes * a.budget / total if config.budget_minutes else None
        pid = session.problem_ids[a.target]
        budget = 0 if options.seeds_only else a.budget
        jobs.append((pid, dataclasses.replace(config, budget_candidates=budget, budget_minutes=minutes)))
        allocation[pid] = a
    with SearchRunner(ModelChoice(path=str(llm) if llm else None, server_url=server), generator=generator,
                      evaluator=evaluator, devices=devices, ray=ray, lazy_model=options.seeds_only,
                      say=say) as runner:
        gpus = runner.side_by_side()
        if gpus:
            say(f"searching {len(jobs)} targets side by side on {', '.join(gpus)}")

        def starting(pid: int) -> None:
            a = allocation[pid]
            if options.seeds_only:
                say(f"evaluating the seeds of {a.target} ({a.reason})")
            else:
                say(f"searching {a.target}: {a.budget} candidates ({a.reason})")

        runner.run_side_by_side(store, jobs, listener, before=starting)

    mf = session.model_file
    chosen, reasons = chosen_kernels(store, profiled)
    integration, bench = None, None
    checks: list[ModelCheck] = []
    if chosen:
        original = unpatched_copy(mf.model) if options.bench and options.bench_compile else None
        say(f"integrating {len(chosen)} kernel(s) into the model and checking it against the original")
        integration = integrate(mf.model, profiled.analysis, chosen, list(mf.inputs), mf.make_inputs, config.device)
        checks = integration.checks
        reasons.update(integration.dropped)
        if options.bench and integration.kept:
            say("benchmarking the model end to end")
            bench = bench_model(mf.model, list(mf.inputs), integration.handle, original=original,
                                device=config.device, runs=options.bench_runs, compile=options.bench_compile,
                                progress=say)
    outcomes = _outcomes(store, profiled.profile, session.allocations, session.problem_ids, session.skipped,
                         integration, reasons)
    result = ModelOptResult(session_path=session_path, profile=profiled.profile, allocations=session.allocations,
                            outcomes=outcomes, checks=checks, bench=bench, integration=integration)
    store.set_meta(RESULT_KEY, result.to_dict())
    return result


def _outcomes(store, profile: ModelProfile, allocations, problem_ids, skipped, integration, reasons) -> list[TargetOutcome]:
    allocs = {a.target: a for a in allocations}
    kept = set(integration.kept) if integration else set()
    out = []
    for t in profile.targets:
        a = allocs[t.name]
        pid = problem_ids.get(t.name)
        best = store.best_node(pid) if pid is not None else None
        chosen = store.chosen_node(pid) if pid is not None else None
        if t.name in kept:
            why = ""
        elif a.budget == 0 and best is None:
            why = skipped.get(t.name) or a.reason  # never searched: say why
        else:
            why = reasons.get(t.name) or skipped.get(t.name) or "no verified kernel"
        out.append(TargetOutcome(
            target=t.name, op=t.op, share=t.share, budget=a.budget, budget_reason=a.reason, problem_id=pid,
            candidates=store.candidates_done(pid) if pid is not None else 0,
            best_speedup=best.speedup if best else None, chosen_node=chosen.id if chosen else None,
            used=t.name in kept, why_not=why))
    return out


__all__ = ["META_KEY", "ModelOptOptions", "ModelOptResult", "TargetOutcome", "optimize_model"]
