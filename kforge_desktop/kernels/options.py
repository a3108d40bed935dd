"""What one evaluation runs with, typed on both sides of the worker pipe.

The caller builds an ``EvalOptions`` (the CLI from its flags, the search from its config) and the
evaluator wraps it with the problem and the candidate in an ``EvalTask``. Only plain dicts cross the
pipe to a worker; ``to_dict``/``from_dict`` are the one place that writes and reads them, so a knob
added here reaches the worker without a key spelled twice. ``options.device`` is the one record of
where an evaluation runs: the evaluator, the pool and every verdict (a failed one too) take it
from there.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..problem.problem import Problem


@dataclass(frozen=True)
class EvalOptions:
    """Knobs of one evaluation; defaults are what the CLI and the search use."""

    device: str = "cpu"  # "cpu", "cuda", "cuda:1", ...
    trials: int = 5  # verification runs on fresh inputs (at least 1)
    nan_trial: bool = True  # one more run with NaN in the inputs: NaN must come out where PyTorch puts it
    timed_runs: int = 50  # interleaved timing rounds, fewer once ``timing_budget_s`` is spent
    warmup_runs: int = 5
    timing_budget_s: float = 60.0  # bounds the timing of slow contenders (never fewer than 10 rounds)
    build_timeout_s: float = 300.0  # per build phase (reference, build, torch.compile baseline)
    run_timeout_s: float = 120.0  # per run phase (verify, time)
    compare_compile: bool = True  # time torch.compile of the reference as a second baseline
    seed: int = 0

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> EvalOptions:
        """The inverse of ``to_dict``; an unknown key is an error (caller and worker are one version)."""
        return cls(**data)


@dataclass(frozen=True)
class EvalTask:
    """One candidate to evaluate, as the pool hands it to a worker."""

    problem: Problem
    source: str  # the candidate module (untrusted: imported only in the worker)
    options: EvalOptions = field(default_factory=EvalOptions)

    def to_dict(self) -> dict:
        return {"problem": asdict(self.problem), "source": self.source, "options": self.options.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> EvalTask:
        return cls(Problem(**data["problem"]), data["source"], EvalOptions.from_dict(data["options"]))
