"""Engine events and commands: small frozen values that cross threads (engine <-> GUI/CLI).

The engine imports no Qt; the GUI turns these into signals in one adapter, the CLI into a
progress bar. Node data itself lives in the session store; events carry ids and the few numbers a
view needs to update without a query. ``Listeners`` hands an engine's events to its views.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass

from ..kernels.verdict import Verdict

# what a node is: the store's record, re-exported for the engine's listeners
from ..store.records import NODE_STATES as NODE_STATES
from ..store.records import ORIGINS as ORIGINS
from ..store.records import NodeRecord as NodeRecord

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
    stream: int = 0  # which expansion in flight the text belongs to (several may generate at once)


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
    reason: str  # one of FINISH_REASONS
    best_node_id: int | None


FINISH_REASONS = {"budget": "the budget is spent", "time": "the time is up",
                  "repeats": "the model only repeats earlier kernels", "stopped": "stopped",
                  "error": "stopped on an error"}  # why a search ended, as the app and the command line say it


Event = NodeAdded | NodeEvaluated | NodeChanged | TokenStream | Log | Progress | Finished


class Listeners:
    """The views subscribed to one engine. Every event goes to each of them in turn, in the thread
    that emits it; a view that raises is reported and passed over: a broken view must not kill the
    search."""

    def __init__(self) -> None:
        self._fns: list[Callable[[Event], None]] = []

    def subscribe(self, fn: Callable[[Event], None]) -> Callable[[], None]:
        """Add ``fn``; returns the call that removes it again."""
        self._fns.append(fn)
        return lambda: self._fns.remove(fn) if fn in self._fns else None

    def emit(self, event: Event) -> None:
        for fn in list(self._fns):
            try:
                fn(event)
            except Exception:
                traceback.print_exc()


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
