"""The search tree as plain values: rewards, backpropagation, and what may be expanded.

Pure functions over ``NodeRecord`` lists read from the store, so selection and backpropagation are
tested with hand-made trees and the engine keeps no second copy of the tree that could drift.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from ..kernels.verdict import Verdict
from ..store.records import NodeRecord

# a correct candidate always scores above any failure; within failures, nearer to working is better
FAILURE_REWARD = {
    "incorrect": 0.15,
    "runtime_error": 0.10,
    "compile_error": 0.05,
    "crashed": 0.05,
    "timeout": 0.05,
    "rejected": 0.0,
}
OK_FLOOR = 0.35
REPAIRABLE = ("compile_error", "incorrect", "runtime_error")


def reward(verdict: Verdict | None) -> float:
    """Normalised reward in [0, 1]: log2 speedup over eager mapped so 1/4x -> 0.35, 1x -> 0.675,
    4x and above -> 1.0; failures below 0.35. The exploration term of UCT (c * sqrt(ln N / n) with
    c about 0.5) is on the same scale, so neither swamps the other."""
    if verdict is None:
        return 0.0
    if verdict.status != "ok":
        return FAILURE_REWARD.get(verdict.status, 0.0)
    s = credible_speedup(verdict)
    x = 0.5 if not s or s <= 0 else min(1.0, max(0.0, 0.5 + math.log2(s) / 4.0))
    return OK_FLOOR + (1.0 - OK_FLOOR) * x


def credible_speedup(verdict: Verdict) -> float | None:
    """The speedup the search may believe: 1.0 where the measurement cannot tell the candidate from
    eager (within the noise, or disturbed), else the pessimistic end of the interquartile ranges
    (the eager run's lower quartile over the candidate's upper one), never one lucky median."""
    s = verdict.speedup
    if s is None:
        return None
    if not verdict.significant or verdict.disturbed:
        return 1.0
    base, cand = verdict.baseline_ms, verdict.latency_ms
    if not base or not cand:
        return s
    low = (base - (verdict.baseline_iqr_ms or 0.0) / 2) / (cand + (verdict.latency_iqr_ms or 0.0) / 2)
    return min(s, low) if s >= 1 else max(s, low)


class Tree:
    """An index over one problem's nodes: children, ancestors, what was tried from a node."""

    def __init__(self, nodes: Iterable[NodeRecord]) -> None:
        self.nodes: dict[int, NodeRecord] = {}
        self._children: dict[int, list[int]] = {}
        self.root_id: int | None = None
        for n in sorted(nodes, key=lambda n: n.id):
            self.nodes[n.id] = n
            self._children.setdefault(n.id, [])
            if n.parent_id is None:
                if self.root_id is None:
                    self.root_id = n.id
            else:
                self._children.setdefault(n.parent_id, []).append(n.id)

    def __len__(self) -> int:
        return len(self.nodes)

    def node(self, node_id: int) -> NodeRecord:
        return self.nodes[node_id]

    @property
    def root(self) -> NodeRecord | None:
        return self.nodes.get(self.root_id) if self.root_id is not None else None

    def children(self, node_id: int, counted: bool = True) -> list[NodeRecord]:
        """Children in creation order; ``counted`` leaves out duplicates (they are not candidates)."""
        kids = [self.nodes[i] for i in self._children.get(node_id, [])]
        return [k for k in kids if k.state != "duplicate"] if counted else kids

    def ancestors(self, node_id: int) -> list[int]:
        """``node_id`` and its ancestors up to the root, nearest first."""
        out = []
        current: int | None = node_id
        while current is not None and current in self.nodes:
            out.append(current)
            current = self.nodes[current].parent_id
        return out

    def excluded(self, node_id: int) -> bool:
        """Excluded itself or below an excluded node (never expanded again)."""
        return any(self.nodes[i].excluded for i in self.ancestors(node_id))

    def subtree(self, node_id: int) -> list[int]:
        out, stack = [], [node_id]
        while stack:
            i = stack.pop()
            out.append(i)
            stack.extend(self._children.get(i, []))
        return out

    def repair_depth(self, node_id: int) -> int:
        """How many repairs in a row led to this node (0 for a fresh candidate)."""
        depth = 0
        for i in self.ancestors(node_id):
            if self.nodes[i].kind != "repair":
                break
            depth += 1
        return depth

    def tried(self, node_id: int) -> dict[str, str]:
        """Directives already used from a node -> outcome (ok | failed | pending)."""
        out: dict[str, str] = {}
        for k in self.children(node_id, counted=False):
            if not k.directive:
                continue
            if k.verdict is not None:
                outcome = "ok" if k.verdict.status == "ok" else "failed"
            elif k.state in ("no_code", "duplicate"):
                outcome = "failed"
            else:
                outcome = "pending"
            if out.get(k.directive) != "ok":
                out[k.directive] = outcome
        return out

    def directive_record(self) -> dict[str, tuple[int, int]]:
        """Directive key -> (correct, evaluated) over the model's expansions anywhere in the tree: how
        well this model carries out each kind of change on this problem. Duplicates say nothing about
        that and are left out; an answer with no code counts as a failure."""
        out: dict[str, tuple[int, int]] = {}
        for n in self.nodes.values():
            if n.origin != "llm" or n.kind == "repair" or not n.directive:
                continue
            if n.verdict is None and n.state != "no_code":
                continue
            key = n.directive.split("@")[0]
            ok, total = out.get(key, (0, 0))
            out[key] = (ok + (n.verdict is not None and n.verdict.status == "ok"), total + 1)
        return out

    def repair_record(self) -> tuple[int, int]:
        """(correct, attempted) over the model's "fix it" repairs in the tree (named completions left
        out); an answer that repeated the broken code or had none is a failed attempt."""
        ok = total = 0
        for n in self.nodes.values():
            if n.origin != "llm" or n.kind != "repair" or n.directive != "repair":
                continue
            if n.verdict is None and n.state not in ("duplicate", "no_code"):
                continue
            total += 1
            ok += n.verdict is not None and n.verdict.status == "ok"
        return ok, total

    def copied_example(self, node_id: int) -> bool:
        """Whether a whole kernel asked of ``node_id`` handed back the example of a nearby family
        unchanged (a duplicate of no node: ``answers.COPIED_EXAMPLE``)."""
        return any(k.kind == "whole" and k.state == "duplicate" and k.duplicate_of is None
                   for k in self.children(node_id, counted=False))

    def failed_approaches(self, node_id: int) -> list[tuple[str, str]]:
        """(directive, what went wrong) for the node's children that did not work."""
        out = []
        for k in self.children(node_id, counted=False):
            if not k.directive or k.kind == "repair":
                continue
            if k.state == "no_code":
                out.append((k.directive, "the answer had no usable code"))
            elif k.state == "duplicate" and k.duplicate_of is None:
                out.append((k.directive, "the answer handed the example kernel back unchanged, but the example "
                                         "computes something else (it is not shown again): write what this model "
                                         "computes"))
            elif k.state == "duplicate":
                out.append((k.directive, "the answer repeated an earlier kernel unchanged"))
            elif k.verdict is not None and k.verdict.status != "ok":
                out.append((k.directive, f"{k.verdict.status}: {k.verdict.reason}"))
            elif k.verdict is not None and (k.verdict.speedup or 0) < (self.nodes[node_id].speedup or 0):
                out.append((k.directive, f"correct but slower ({k.verdict.speedup:.2f}x)"))
        return out

    def expandable(self, node_id: int) -> bool:
        """May get a new child by an expansion: the root, or a correct candidate, not excluded."""
        n = self.nodes[node_id]
        if self.excluded(node_id):
            return False
        return n.origin == "root" or (n.verdict is not None and n.verdict.status == "ok")

    def repairable(self, node_id: int) -> bool:
        n = self.nodes[node_id]
        return (not self.excluded(node_id) and n.origin != "root" and n.verdict is not None
                and n.verdict.status in REPAIRABLE)

    def best(self, within: int | None = None) -> NodeRecord | None:
        """The fastest correct candidate (in ``within``'s subtree if given); ties go to the older node.
        A candidate that delegates part of the work to PyTorch, or whose measurement was disturbed,
        counts only when pinned."""
        ids = self.subtree(within) if within is not None else list(self.nodes)
        ok = [self.nodes[i] for i in ids if self.nodes[i].origin != "root" and self.nodes[i].speedup is not None
              and (self.nodes[i].pinned or not (self.nodes[i].verdict.delegates or self.nodes[i].verdict.disturbed))]
        if not ok:
            return None
        return max(ok, key=lambda n: (n.verdict.retimed > 0, n.verdict.is_win, n.speedup, -n.id))


def backprop(tree: Tree, node_id: int, value: float) -> list[tuple[int, int, float]]:
    """New (node_id, visits, value) for the node and its ancestors after one result: each gets one
    more visit and keeps the best reward seen in its subtree (max backup: we want the best kernel,
    not the average one)."""
    out = []
    for i in tree.ancestors(node_id):
        n = tree.nodes[i]
        out.append((i, n.visits + 1, max(n.value, value) if n.visits else value))
    return out
