"""Frozen values the store hands out: nodes, problems, LLM calls, events, search state, summaries.

They live with the store, which imports nothing above itself; the search (``search.events``)
re-exports ``NodeRecord`` and its vocabularies for its listeners.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..kernels.verdict import Verdict
from ..problem.problem import Problem

# -- what a node is ----------------------------------------------------------------------------------

ORIGINS = ("root", "seed", "llm", "user")
# node lifecycle: pending (waiting for evaluation) -> evaluating -> evaluated;
# or no_code (the LLM answer had no usable code) / duplicate (same code as an existing node)
NODE_STATES = ("pending", "evaluating", "evaluated", "no_code", "duplicate")
KINDS = ("root", "seed", "whole", "edit", "repair", "user")


@dataclass(frozen=True)
class NodeRecord:
    id: int
    problem_id: int
    parent_id: int | None
    origin: str  # one of ORIGINS
    state: str  # one of NODE_STATES
    language: str  # cpp | cuda | triton | python (root)
    directive: str
    source: str  # the whole candidate module (ModelNew), "" for no_code
    kernel_source: str  # the part the LLM wrote (kernel body / edit), for diffs
    created_at: float
    pinned: bool = False
    excluded: bool = False
    visits: int = 0
    value: float = 0.0  # best normalised reward in the subtree
    kind: str = "whole"  # one of KINDS
    duplicate_of: int | None = None
    verdict: Verdict | None = None
    llm_call_id: int | None = None
    note: str = ""  # why there is no code, the exemplar a seed came from, a user's note on a hand edit

    @property
    def speedup(self) -> float | None:
        return self.verdict.speedup if self.verdict and self.verdict.status == "ok" else None

    @property
    def status(self) -> str:
        """What a view colours by: the verdict status, else the node state."""
        return self.verdict.status if self.verdict else self.state


# -- the rest ----------------------------------------------------------------------------------------


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
