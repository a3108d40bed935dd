"""The Verdict: what the evaluator concluded about one candidate (plain, frozen, JSON-able)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields

STATUSES = ("ok", "incorrect", "compile_error", "runtime_error", "crashed", "timeout", "rejected")


@dataclass(frozen=True)
class Verdict:
    status: str
    reason: str
    device: str = "cpu"
    speedup: float | None = None  # eager median / candidate median
    speedup_compile: float | None = None  # torch.compile median / candidate median
    latency_ms: float | None = None  # candidate median
    latency_iqr_ms: float | None = None
    baseline_ms: float | None = None  # eager median
    baseline_iqr_ms: float | None = None
    compile_baseline_ms: float | None = None  # torch.compile median, None where it does not work
    n_timed: int = 0
    noise: float | None = None  # relative spread (IQR/median, worst of candidate and eager)
    significant: bool = False  # speedup outside the measured noise
    max_abs_err: float | None = None
    rel_l2_err: float | None = None
    trials: int = 0
    build_s: float | None = None
    verify_s: float | None = None
    time_s: float | None = None
    cached_build: bool = False
    language: str = ""
    library_calls: tuple[str, ...] = ()
    policy_flags: tuple[str, ...] = ()
    log: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown verdict status {self.status!r}")

    @property
    def is_correct(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["library_calls"] = list(self.library_calls)
        d["policy_flags"] = list(self.policy_flags)
        return d

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)

    @classmethod
    def from_dict(cls, d: dict) -> Verdict:
        names = {f.name for f in fields(cls)}
        clean = {k: v for k, v in d.items() if k in names}
        for key in ("library_calls", "policy_flags"):
            if key in clean:
                clean[key] = tuple(clean[key] or ())
        return cls(**clean)

    @classmethod
    def from_json(cls, text: str) -> Verdict:
        return cls.from_dict(json.loads(text))

    def summary(self) -> str:
        """One line for tables and logs."""
        if self.status == "ok" and self.speedup is not None:
            tag = "" if self.significant else " (within noise)"
            return f"ok  {self.speedup:.2f}x over eager{tag}, {self.latency_ms:.4f} ms"
        return f"{self.status}: {self.reason}"


@dataclass(frozen=True)
class EvalOptions:
    """Knobs of one evaluation; defaults are what the CLI and the search use."""

    device: str = "cpu"
    trials: int = 5
    timed_runs: int = 50
    warmup_runs: int = 5
    build_timeout_s: float = 300.0
    run_timeout_s: float = 120.0
    compare_compile: bool = True
    seed: int = 0
    extra: dict = field(default_factory=dict)
