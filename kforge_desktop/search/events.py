"""Engine events and commands: small frozen values that cross threads (engine <-> GUI/CLI).

The engine imports no Qt; the GUI turns these into signals in one adapter, the CLI into a
progress bar. Node data itself lives in the session store; events carry ids and the few numbers a
view needs to update without a query.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..kernels.verdict import Verdict

# -- what a node is (as the store returns it) ------------------------------------------------------

ORIGINS = ("root", "seed", "llm", "user")
# node lifecycle: pending (waiting for evaluation) -> evaluating -> evaluated;
# or no_code (the LLM answer had no usable code) / duplicate (same code as an existing node)
NODE_STATES = ("pending", "evaluating", "evaluated", "no_code", "duplicate")


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
    kind: str = "whole"  # whole | edit | repair | seed | user | root
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


# -- events (engine -> listeners) -------------------------------------------------------------------


@dataclass(frozen=True)
class NodeAdded:
    problem_id: int
    node_id: int
    parent_id: int | None
    origin: str
    state: str


@dataclass(frozen=True)
class NodeEvaluated:
    problem_id: int
    node_id: int
    verdict: Verdict


@dataclass(frozen=True)
class NodeChanged:
    """Pin/unpin/exclude or visits/value after backpropagation."""

    problem_id: int
    node_id: int


@dataclass(frozen=True)
class TokenStream:
    problem_id: int
    text: str
    tokens_per_s: float | None = None


@dataclass(frozen=True)
class Log:
    level: str  # info | warning | error
    message: str
    detail: str = ""


@dataclass(frozen=True)
class Progress:
    problem_id: int
    done: int  # candidates evaluated (LLM + user; seeds not counted)
    budget: int
    best_speedup: float | None
    tokens_per_s: float | None
    elapsed_s: float
    phase: str = ""  # generating | building | verifying | timing | idle


@dataclass(frozen=True)
class Finished:
    problem_id: int
    reason: str  # budget | time | stopped | error
    best_node_id: int | None


Event = NodeAdded | NodeEvaluated | NodeChanged | TokenStream | Log | Progress | Finished


# -- commands (GUI/CLI -> engine) ------------------------------------------------------------------


@dataclass(frozen=True)
class Pause:
    pass


@dataclass(frozen=True)
class Resume:
    pass


@dataclass(frozen=True)
class Stop:
    pass


@dataclass(frozen=True)
class Pin:
    node_id: int
    focus: bool = True  # focus later expansions on the pinned subtree


@dataclass(frozen=True)
class Unpin:
    node_id: int


@dataclass(frozen=True)
class Exclude:
    node_id: int
    excluded: bool = True


@dataclass(frozen=True)
class AddChild:
    parent_id: int
    source: str  # the full candidate module, hand-edited
    note: str = ""


@dataclass(frozen=True)
class ExpandFrom:
    node_id: int


@dataclass(frozen=True)
class SetBudget:
    candidates: int | None = None
    minutes: float | None = None


Command = Pause | Resume | Stop | Pin | Unpin | Exclude | AddChild | ExpandFrom | SetBudget
