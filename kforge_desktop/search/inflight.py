"""Several expansions in flight: the window of work the engine has started, and the tree it plans on.

With K expansions in flight the model writes the next candidate while earlier ones are built,
verified and timed. Two things keep such a search reproducible for a given seed and K, whatever
order the model's answers and the verdicts come back in:

- The window. Work enters a window of at most K slots in a fixed order (pending nodes first, then
  one slot per expansion) and leaves it only from the front, and only when the engine needs room
  (the window is full, or nothing more can be planned). So the set of results a plan may look at is
  fixed by the order of the slots, not by which evaluation happened to finish first.
- The masked view. A plan is made on the tree as it stands at the window's front: what any slot
  still in the window produced is hidden (a finished evaluation shows as pending, a saved answer
  is not there), and each expansion in flight is a placeholder child of the node it expands with
  one visit of reward 0 along its path: MCTS's virtual loss. The placeholder also makes the next
  plan at the same node count one more child (progressive widening) and one more directive tried,
  so K plans in a row spread over the tree instead of asking K times for the same thing.

Answers are saved in slot order too (an answer that arrives early waits for the ones before it),
so duplicate detection and the LLM call numbers do not depend on timing either.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, replace

from ..kernels.verdict import Verdict
from ..store.records import NodeRecord
from .planner import Expansion
from .setup import few_cores
from .tree import Tree, reward

PLACEHOLDER_BASE = 1 << 40  # ids of placeholder nodes: above any real node, in slot order
MAX_DEFAULT_INFLIGHT = 8


@dataclass
class Slot:
    """One unit of work in the window: the evaluation of a node that was waiting (``expansion``
    None), or an expansion (a generation, then the evaluation of the node its answer made)."""

    seq: int
    node_id: int | None = None  # the node evaluated (for an expansion: once its answer is saved)
    expansion: Expansion | None = None
    call_index: int | None = None  # the expansion's LLM call number (its sampling seed derives from it)
    request: object = None  # the GenerationRequest
    context: object = None  # the prompt context it was made from
    trimmed: tuple = ()
    generation: Future | None = None
    evaluation: Future | None = None
    answered: bool = False  # the answer is saved (or there was none): its node exists or never will
    evaluating: bool = False  # its node went to the evaluator
    evaluated: bool = False
    deferred: bool = False  # answered while the search was paused: evaluated once it resumes

    @property
    def done(self) -> bool:
        return self.answered and not self.deferred and (not self.evaluating or self.evaluated)


class Window:
    """The slots in flight, oldest first; each new one gets the next number (its place in the order)."""

    def __init__(self) -> None:
        self._slots: deque[Slot] = deque()
        self._seq = 0

    def __iter__(self) -> Iterator[Slot]:
        return iter(list(self._slots))  # a copy: a slot may be retired while the engine goes through them

    def __len__(self) -> int:
        return len(self._slots)

    def add(self, **fields) -> Slot:
        slot = Slot(self._seq, **fields)
        self._seq += 1
        self._slots.append(slot)
        return slot

    def retire_front(self) -> bool:
        """Retire the oldest slot if it is done (answered and evaluated); whether it was."""
        if self._slots and self._slots[0].done:
            self._slots.popleft()
            return True
        return False

    def running(self) -> list[Future]:
        """The generations and evaluations still running."""
        return [f for s in self._slots for f in (s.generation, s.evaluation) if f is not None and not f.done()]

    def clear(self) -> None:
        self._slots.clear()


def verdict_of(evaluation: Future, device: str) -> Verdict:
    """The verdict an evaluation came back with; an evaluator that failed makes a crashed one."""
    try:
        return evaluation.result()
    except Exception as err:
        return Verdict(status="crashed", reason=f"the evaluator failed: {type(err).__name__}: {err}", device=device)


def masked_tree(tree: Tree, slots: Iterable[Slot], language: str = "") -> Tree:
    """The tree a plan is made on while ``slots`` are in flight (see the module doc): outcomes of
    the slots hidden, one placeholder child with a virtual loss per expansion in flight."""
    slots = list(slots)
    if not slots:
        return tree
    removed = {s.node_id for s in slots if s.expansion is not None and s.node_id is not None}
    hidden = {s.node_id for s in slots if s.expansion is None and s.node_id is not None}
    nodes = dict(tree.nodes)
    for i in list(removed):  # whatever hangs below a node not yet visible is not visible either
        removed.update(tree.subtree(i))
    masked = removed | hidden

    def contribution(n: NodeRecord) -> float | None:
        """What the node added to its ancestors' statistics when it was backpropagated."""
        if n.origin == "root" or n.state not in ("evaluated", "no_code", "duplicate"):
            return None
        return reward(n.verdict) if n.verdict is not None else 0.0

    visits = {i: n.visits for i, n in nodes.items()}
    stale: set[int] = set()
    for m in masked:
        if m in nodes and contribution(nodes[m]) is not None:
            for a in tree.ancestors(m):
                visits[a] -= 1
                stale.add(a)
    placeholders = []
    for s in slots:
        if s.expansion is None or s.expansion.parent_id not in nodes or s.expansion.parent_id in removed:
            continue
        exp = s.expansion
        placeholders.append(NodeRecord(
            id=PLACEHOLDER_BASE + s.seq, problem_id=nodes[exp.parent_id].problem_id, parent_id=exp.parent_id,
            origin="llm", state="pending", language=language or nodes[exp.parent_id].language,
            directive=exp.directive, source="", kernel_source="", created_at=0.0,
            kind="whole" if exp.kind == "module" else exp.kind))
        for a in tree.ancestors(exp.parent_id):
            visits[a] += 1  # the virtual loss: one more visit, no value
    best: dict[int, float | None] = {}

    def visible_best(i: int) -> float | None:
        """The best contribution in ``i``'s subtree among the visible nodes (max backup)."""
        if i not in best:
            own = None if i in masked else contribution(nodes[i])
            kids = [visible_best(k) for k in tree._children.get(i, []) if k not in removed]
            found = [x for x in [own, *kids] if x is not None]
            best[i] = max(found) if found else None
        return best[i]

    out = []
    for i, n in nodes.items():
        if i in removed:
            continue
        changes: dict = {}
        if visits[i] != n.visits:
            changes["visits"] = max(0, visits[i])
        if i in stale:
            changes["value"] = visible_best(i) or 0.0
        if i in hidden:
            changes.update(state="pending", verdict=None)
        out.append(replace(n, **changes) if changes else n)
    return Tree(out + placeholders)


# -- how many in flight, and how many generations at once --------------------------------------------


def generation_parallel(generator) -> int:
    """How many requests the model serves at once: an OpenAI-compatible server with several slots
    says so (``parallel``); llama.cpp in this process answers one at a time."""
    try:
        return max(1, int(getattr(generator, "parallel", 1) or 1))
    except (TypeError, ValueError):
        return 1


def default_inflight(generator, evaluator) -> int:
    """K when the config leaves it open, chosen by the machine.

    1 on 4 cores or fewer: a generation and a g++ build on the same few cores starve each other
    (measured: no token in 4.5 CPU-minutes beside a build on 2 cores), so they alternate. Else the
    number of things that can really progress at once: the generations the model serves together
    plus one timing per device (timings are one at a time per device), at least 2 (the model writes
    the next candidate while the last one is evaluated) and at most the evaluator's workers + 1
    and 8. More would only make the search staler: every expansion in flight is planned without
    the results of the others."""
    if few_cores():
        return 1
    devices = len(getattr(evaluator, "devices", ()) or ()) or 1
    workers = int(getattr(evaluator, "workers", 1) or 1)
    k = min(generation_parallel(generator) + devices, workers + 1, MAX_DEFAULT_INFLIGHT)
    return max(2, k)


_SLOTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_SLOTS_LOCK = threading.Lock()


def generation_slots(generator) -> threading.BoundedSemaphore:
    """The one semaphore every search that shares ``generator`` takes before it generates (the
    whole-model flow runs several searches on one model). A request waits here, outside the device
    gate: a generation queued behind another inside llama.cpp's lock would hold a timing slot up,
    since it never reaches a token boundary."""
    with _SLOTS_LOCK:
        try:
            sem = _SLOTS.get(generator)
            if sem is None:
                sem = threading.BoundedSemaphore(generation_parallel(generator))
                _SLOTS[generator] = sem
            return sem
        except TypeError:  # an object that cannot be weakly referenced: its own semaphore each time
            return threading.BoundedSemaphore(generation_parallel(generator))
