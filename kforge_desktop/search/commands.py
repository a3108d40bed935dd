"""What the user's commands do to a session: pin, unpin, exclude, expand from, add a hand-edited
child, set the budget, re-verify the chosen kernels.

One implementation for both cases: while a search runs the GUI posts the command to the engine,
which applies it here between steps (or in the middle of a generation); with no search running the
GUI calls the same function on the session store. Each function writes the store and returns what
it did (``Applied``): the events a view may want and, when there is something to say, one
sentence. The caller decides how to show them (the engine logs and emits; the GUI refreshes and
shows the sentence).

While a search runs, commands wait in its ``Inbox`` (posted from any thread), and what the ones
that steer the loop itself (stop, pause, resume, budget) change is said by ``control``, for the
engine to apply to its own state.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from ..csource.normalize import normalize_code
from ..store import SessionStore
from ..store.records import NodeRecord
from . import events as ev
from .config import SearchConfig
from .planner import Planner
from .scaffold import kernel_of_module
from .setup import environment_record
from .tree import reward

ONLY_CORRECT = "Only a correct candidate can be pinned."


@dataclass(frozen=True)
class Applied:
    """What a command did: the events to emit (in order), then a sentence for the log ("" for none)."""

    events: tuple[ev.Event, ...] = ()
    message: str = ""
    level: str = "info"
    ok: bool = True


def pinnable(node: NodeRecord) -> bool:
    """Only a correct candidate can be the chosen kernel (what export and integration use)."""
    return node.origin != "root" and node.verdict is not None and node.verdict.status == "ok"


def pin(store: SessionStore, problem_id: int, node_id: int) -> Applied:
    """Make ``node_id`` the chosen kernel of its problem (any earlier pin is released)."""
    node = store.node(node_id)
    if node is None:
        return Applied(message=f"cannot pin node {node_id}: no such node", level="warning", ok=False)
    if not pinnable(node):
        return Applied(message=f"cannot pin node {node_id}: only a correct candidate can be pinned",
                       level="warning", ok=False)
    old = store.pinned_node(problem_id)
    store.set_pinned(node_id, True)
    store.log_event(problem_id, "pin", f"node {node_id} pinned", payload={"node": node_id})
    changed = ((old.id,) if old and old.id != node_id else ()) + (node_id,)
    return Applied(events=tuple(ev.NodeChanged(problem_id, i) for i in changed))


def unpin(store: SessionStore, problem_id: int, node_id: int) -> Applied:
    store.set_pinned(node_id, False)
    store.log_event(problem_id, "unpin", f"node {node_id} unpinned", payload={"node": node_id})
    return Applied(events=(ev.NodeChanged(problem_id, node_id),))


def exclude(store: SessionStore, problem_id: int, node_id: int, excluded: bool = True) -> Applied:
    """Keep a node (and so its subtree) out of the search, or let it in again."""
    store.set_excluded(node_id, excluded)
    store.log_event(problem_id, "exclude", f"node {node_id} {'excluded' if excluded else 'included'}",
                    payload={"node": node_id, "excluded": excluded})
    return Applied(events=(ev.NodeChanged(problem_id, node_id),))


def add_child(store: SessionStore, problem_id: int, language: str, cmd: ev.AddChild) -> Applied:
    """A hand-edited module as a pending child of its parent; a repeat of an existing node is kept
    as a duplicate and not evaluated again."""
    parent = store.node(cmd.parent_id)
    if parent is None or parent.problem_id != problem_id:
        return Applied(message=f"cannot add a child to node {cmd.parent_id}: no such node here", level="warning",
                       ok=False)
    kernel = kernel_of_module(cmd.source) or ""
    norm = normalize_code(kernel, language) if kernel else normalize_code(cmd.source, "python")
    dup = store.find_duplicate(problem_id, norm)
    state = "duplicate" if dup else "pending"
    node_id = store.add_node(
        problem_id, cmd.parent_id, "user", "user", language, source=cmd.source, kernel_source=kernel,
        directive="hand edit", state=state, note=cmd.note, norm_code=norm, duplicate_of=dup,
    )
    store.log_event(problem_id, "node_added", f"hand-edited child {node_id} of {cmd.parent_id}",
                    payload={"node": node_id, "origin": "user"})
    added = ev.NodeAdded(problem_id, node_id, cmd.parent_id, "user", state)
    if dup:
        return Applied(events=(added,), message=f"node {node_id} has the same code as node {dup}; not evaluated "
                       "again", level="warning")
    return Applied(events=(added,))


def expand_from(store: SessionStore, planner: Planner, node_id: int) -> Applied:
    """The next expansion starts from ``node_id`` (before any repair or the strategy's pick)."""
    if store.node(node_id) is None:
        return Applied(ok=False)
    planner.forced.append(node_id)
    return Applied(message=f"next expansion from node {node_id}")


def apply(cmd: ev.Command, store: SessionStore, problem_id: int, language: str, planner: Planner) -> Applied:
    """A node command (pin, unpin, exclude, add child, expand from) as the engine applies it."""
    if isinstance(cmd, ev.Pin):
        applied = pin(store, problem_id, cmd.node_id)
        if applied.ok:
            planner.focus = cmd.focus
        return applied
    if isinstance(cmd, ev.Unpin):
        return unpin(store, problem_id, cmd.node_id)
    if isinstance(cmd, ev.Exclude):
        return exclude(store, problem_id, cmd.node_id, cmd.excluded)
    if isinstance(cmd, ev.AddChild):
        return add_child(store, problem_id, language, cmd)
    if isinstance(cmd, ev.ExpandFrom):
        return expand_from(store, planner, cmd.node_id)
    raise TypeError(f"not a node command: {cmd!r}")


LIGHT = (ev.Pin, ev.Unpin, ev.Exclude, ev.SetBudget)  # the commands that do not need the loop


class Inbox:
    """The commands posted to a running engine, from any thread, until the engine applies them."""

    def __init__(self) -> None:
        self._queue: queue.Queue = queue.Queue()

    def put(self, command: ev.Command) -> None:
        self._queue.put(command)

    def drain(self, light_only: bool = False) -> Iterator[ev.Command]:
        """Every queued command, in order, each taken as the one before it has been applied; with
        ``light_only``, only the ``LIGHT`` ones, and the rest queued again afterwards."""
        waiting = []
        while True:
            try:
                cmd = self._queue.get_nowait()
            except queue.Empty:
                break
            if light_only and not isinstance(cmd, LIGHT):
                waiting.append(cmd)
            else:
                yield cmd
        for cmd in waiting:
            self._queue.put(cmd)

    def wait(self, timeout: float) -> ev.Command | None:
        """The next command, once one is posted (None after ``timeout`` seconds)."""
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None


@dataclass(frozen=True)
class Control:
    """What a loop-control command (stop, pause, resume, budget) changes in a running search, for
    the engine to apply in this order: the stop, the pause state (its phase with it), the config;
    then the saved state, the sentence for the log, and a ``Progress`` event for the views."""

    stop: bool = False
    paused: bool | None = None  # the new pause state (None: as it was)
    config: SearchConfig | None = None  # the new config (None: as it was)
    save: bool = False
    message: str = ""
    progress: bool = False


def control(cmd: ev.Command, paused: bool, config: SearchConfig) -> Control | None:
    """What ``cmd`` does to the loop of a search that is ``paused`` (or not) with ``config``; None
    for a node command (``apply``). Pausing a paused search, or resuming a running one, does nothing."""
    if isinstance(cmd, ev.Stop):
        return Control(stop=True, message="stop requested")
    if isinstance(cmd, (ev.Pause, ev.Resume)):
        pause = isinstance(cmd, ev.Pause)
        if pause == paused:
            return Control()
        return Control(paused=pause, save=True, message="paused" if pause else "resumed", progress=pause)
    if isinstance(cmd, ev.SetBudget):
        config, message = with_budget(config, cmd)
        return Control(config=config, save=True, message=message, progress=True)
    return None


def with_budget(config: SearchConfig, cmd: ev.SetBudget) -> tuple[SearchConfig, str]:
    """The config with the new budget (a None part stays as it was), and the sentence that says so."""
    config = replace(
        config,
        budget_candidates=cmd.candidates if cmd.candidates is not None else config.budget_candidates,
        budget_minutes=cmd.minutes if cmd.minutes is not None else config.budget_minutes,
    )
    return config, (f"budget set to {config.budget_candidates} candidates"
                    + (f", {config.budget_minutes:g} minutes" if config.budget_minutes else ""))


@dataclass(frozen=True)
class Reverified:
    lines: tuple[str, ...]  # one per chosen kernel: "#node: verdict"

    @property
    def summary(self) -> str:
        if not self.lines:
            return "No chosen kernel to re-verify yet."
        return f"Re-verified {len(self.lines)} chosen kernel(s) on this machine: " + "; ".join(self.lines)


def reverify(store: SessionStore, evaluator, device: str, say: Callable[[str], None] = lambda _m: None) -> Reverified:
    """Evaluate the chosen kernel of every problem again here and replace its verdict, then record
    this machine as the session's: used when a session measured elsewhere is opened here, so that
    the numbers shown are this machine's. Run with no search running."""
    lines = []
    for p in store.problems():
        node = store.chosen_node(p.id)
        if node is None:
            continue
        say(f"Re-verifying node #{node.id} of {p.name} on this machine…")
        verdict = evaluator.evaluate(p.to_problem(), node.source)
        store.record_verdict(node.id, verdict, reward(verdict))
        store.log_event(p.id, "reverified", f"node {node.id} re-verified here: {verdict.summary()}",
                        "info" if verdict.status == "ok" else "warning", {"node": node.id})
        lines.append(f"#{node.id}: {verdict.summary()}")
    store.set_environment(environment_record(device))
    return Reverified(tuple(lines))
