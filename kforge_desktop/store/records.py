"""Frozen values the store hands out besides ``NodeRecord`` (which lives in ``search.events``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..problem.problem import Problem


@dataclass(frozen=True)
class ProblemRecord:
    id: int
    name: str
    source: str
    path: str | None
    digest: str
    device: str
    language: str
    info: dict = field(default_factory=dict)
    created_at: float = 0.0

    def to_problem(self) -> Problem:
        """The plain ``Problem`` (nothing is executed here)."""
        return Problem(name=self.name, source=self.source, path=self.path)


@dataclass(frozen=True)
class LLMCallRecord:
    id: int
    problem_id: int | None
    purpose: str  # whole | edit | repair | sample
    model: str
    prompt: str
    response: str
    prompt_tokens: int | None
    completion_tokens: int | None
    seconds: float | None
    params: dict = field(default_factory=dict)
    created_at: float = 0.0

    @property
    def tokens_per_s(self) -> float | None:
        if self.completion_tokens and self.seconds:
            return self.completion_tokens / self.seconds
        return None


@dataclass(frozen=True)
class EventRecord:
    id: int
    problem_id: int | None
    t: float
    kind: str
    level: str
    message: str
    payload: dict = field(default_factory=dict)


@dataclass(frozen=True)
class SearchState:
    """What ``resume`` needs to continue a problem's search exactly where it stopped."""

    problem_id: int
    strategy: str
    budget_candidates: int | None
    budget_minutes: float | None
    seed: int = 0
    rng_state: object = None
    config: dict = field(default_factory=dict)
    status: str = "new"  # new | running | paused | finished | stopped
    elapsed_s: float = 0.0
    updated_at: float = 0.0


@dataclass(frozen=True)
class Productivity:
    """How well the chosen model does on this problem: the share of its candidates that build and
    are correct. Shown in the GUI and the CLI so a user knows when a larger model would pay off."""

    candidates: int  # LLM-written candidates judged (evaluated or without usable code)
    no_code: int
    built: int  # got past the compiler
    correct: int  # verdict ok
    self_made: int  # ok and no library calls: the kernel does the work itself
    duplicates: int  # answers identical to an existing node (not counted as candidates)
    by_kind: dict = field(default_factory=dict)  # kind -> (candidates, correct)

    @property
    def build_rate(self) -> float | None:
        return self.built / self.candidates if self.candidates else None

    @property
    def correct_rate(self) -> float | None:
        return self.correct / self.candidates if self.candidates else None

    LOW_RATE = 0.25
    MIN_SAMPLE = 4

    @property
    def suggestion(self) -> str | None:
        """One sentence advising a larger local model when this one rarely writes a correct kernel."""
        rate = self.correct_rate
        if rate is None or self.candidates < self.MIN_SAMPLE or rate >= self.LOW_RATE:
            return None
        return (
            f"Only {self.correct} of {self.candidates} kernels written by this model were correct; "
            "a larger local model (a 7B-32B coder GGUF, or larger where memory allows) will find faster kernels."
        )

    def summary(self) -> str:
        if not self.candidates:
            return "no LLM candidates yet"
        return (
            f"{self.candidates} LLM candidates: {self.built} built, {self.correct} correct "
            f"({100.0 * (self.correct_rate or 0):.0f}%), {self.no_code} without code, {self.duplicates} duplicates"
        )


@dataclass(frozen=True)
class TimeSplit:
    """Where the search's time went, summed over a problem's candidates (seconds)."""

    llm_s: float = 0.0
    build_s: float = 0.0
    verify_s: float = 0.0
    time_s: float = 0.0
    completion_tokens: int = 0
    llm_calls: int = 0
    evaluated: int = 0

    @property
    def tokens_per_s(self) -> float | None:
        return self.completion_tokens / self.llm_s if self.llm_s > 0 else None
