"""What the window counts, defined once so the targets table, the tree, the plot and the progress bar
say the same number.

A *candidate* is a kernel written by the model or by hand that was judged: evaluated, or an answer
without usable code. It is what the budget counts (``SessionStore.candidates_done`` counts the same
rows in SQL). The reference and the seeds are not candidates (seeds are the exemplar library's
kernels, evaluated first for free), nor are duplicates (answers the tree already holds).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..search.events import NodeRecord

CANDIDATE_ORIGINS = ("llm", "user")
JUDGED_STATES = ("evaluated", "no_code")


def is_candidate(node: NodeRecord) -> bool:
    """Counts against the budget (the same rule as ``SessionStore.candidates_done``)."""
    return node.origin in CANDIDATE_ORIGINS and node.state in JUDGED_STATES


@dataclass(frozen=True)
class Counts:
    nodes: int = 0  # every node, the reference included
    candidates: int = 0  # judged model or hand-written kernels: what the budget counts
    seeds: int = 0  # seeds evaluated
    waiting: int = 0  # nodes not evaluated yet (seeds or candidates)

    def phrase(self, budget: int | None = None) -> str:
        """"4 nodes · 2 of 6 candidates · 1 seed" (the tree's count line)."""
        if not self.nodes:
            return ""
        of = f" of {budget}" if budget else ""
        parts = [f"{self.nodes} nodes", f"{self.candidates}{of} candidates"]
        if self.seeds:
            parts.append(f"{self.seeds} seed{'s' if self.seeds != 1 else ''}")
        if self.waiting:
            parts.append(f"{self.waiting} not evaluated yet")
        return " · ".join(parts)


def count(nodes: Iterable[NodeRecord]) -> Counts:
    n = candidates = seeds = waiting = 0
    for node in nodes:
        n += 1
        if is_candidate(node):
            candidates += 1
        elif node.origin == "seed" and node.verdict is not None:
            seeds += 1
        if node.state in ("pending", "evaluating"):
            waiting += 1
    return Counts(n, candidates, seeds, waiting)
