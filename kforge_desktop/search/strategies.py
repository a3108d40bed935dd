"""Where to expand next: MCTS (UCT with progressive widening) and the two baselines.

Each strategy is a pure function of the tree (plus a start node: the root, or the pinned node when
the user focused the search on it), so the same machinery runs all three and they are compared at
equal budgets.

- ``mcts``: descend from the start by UCT over correct children while the node has as many children
  as progressive widening allows (ceil(k * visits^alpha)); expand the first node that may have more.
- ``greedy``: one refinement chain: always expand the fastest correct node so far.
- ``best-of-n``: independent samples: always expand the start node.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from .directives import USED_UP
from .tree import Tree

STRATEGIES = ("mcts", "greedy", "best-of-n")


@dataclass(frozen=True)
class MCTSParams:
    exploration: float = 0.5  # c in UCT; rewards live in [0, 1]
    widening_k: float = 1.0
    widening_alpha: float = 0.5


def widening_limit(visits: int, k: float = 1.0, alpha: float = 0.5) -> int:
    """How many (counted) children a node with ``visits`` may have before we stop widening it."""
    return max(1, math.ceil(k * max(visits, 1) ** alpha))


def uct_score(value: float, visits: int, parent_visits: int, c: float) -> float:
    if visits <= 0:
        return math.inf
    return value + c * math.sqrt(math.log(max(parent_visits, 1)) / visits)


FRESH_MIN = 0.3  # below this estimated chance that a new child works, descend instead of widening


def fresh_success(tree: Tree, node_id: int) -> float:
    """The chance that one more expansion of this node gives a working new child, estimated from
    its earlier LLM children (a repeat or an answer without code is a miss too), Laplace-smoothed."""
    tried = [k for k in tree.children(node_id, counted=False) if k.origin == "llm" and k.kind != "repair"]
    hits = sum(1 for k in tried if k.verdict is not None and k.verdict.status == "ok")
    return (hits + 1) / (len(tried) + 2)


def repeating(tree: Tree, node_id: int) -> bool:
    """The node's newest ``USED_UP`` answers repeated earlier kernels: the model has nothing new to give
    for it. Selection passes it by while anything else can be expanded (dev/channel_sum at temperature
    0.3: the only working edit had no working child, and every selection ended there; nine of its last
    eleven answers were repeats, and the search gave up on repeats with candidates left)."""
    kids = sorted(tree.children(node_id, counted=False), key=lambda k: k.id)[-USED_UP:]
    return len(kids) == USED_UP and all(k.state == "duplicate" for k in kids)


def select_mcts(tree: Tree, start_id: int, params: MCTSParams = MCTSParams(),
                chance: Callable[[int], float] | None = None) -> int:
    """The node to expand: descend by UCT through correct children, widen progressively.

    Widening is also value-aware: a node whose new children have kept failing (a small model's
    from-scratch kernels at the root) is not widened again while it has a working child to descend
    to; the budget goes where the model succeeds. ``chance(node)``, when given, is a second estimate of
    that: how likely the model is to carry out the change the node would be asked for next (a node
    whose good directives are used up gets the ones this model rarely carries out).

    A node whose newest answers repeated earlier kernels is passed by (``repeating``) while anything
    else can be expanded, but the root's kernels from nothing do not count as that while they are
    unlikely to work (``chance`` below ``FRESH_MIN``): then the working nodes are asked again, repeats
    and all. Once the other nodes repeated, the test half's roots were asked for 22 kernels from
    nothing and none was correct (docs/benchmarks.md, twenty-sixth measurement); over the recorded dev
    searches, edits asked right after their node's answer repeated were correct 48 times in 107, kernels
    from nothing 15 in 136 (``benchmarks/directive_record.py --after-repeats``)."""
    node_id = _descend(tree, start_id, params, chance, pass_repeats=True)
    if (node_id == start_id and tree.node(start_id).origin == "root" and chance is not None
            and chance(start_id) < FRESH_MIN and any(i != start_id and tree.expandable(i) for i in tree.subtree(start_id))):
        return _descend(tree, start_id, params, chance, pass_repeats=False)
    return node_id


def _descend(tree: Tree, start_id: int, params: MCTSParams, chance: Callable[[int], float] | None,
             pass_repeats: bool) -> int:
    """``select_mcts``'s descent; ``pass_repeats``: pass by the nodes whose newest answers repeated."""
    def repeats(i: int) -> bool:
        return pass_repeats and repeating(tree, i)

    node_id = start_id
    seen = set()
    while node_id not in seen:
        seen.add(node_id)
        node = tree.node(node_id)
        kids = tree.children(node_id)
        attempts = len(tree.children(node_id, counted=False))  # repeats used up an expansion too
        limit = widening_limit(node.visits, params.widening_k, params.widening_alpha)
        # through correct children, and through a failed one whose repair is correct (an incomplete
        # seed and its completion): the correct node below must stay reachable
        options = [k for k in kids if any(tree.expandable(i) and not repeats(i) for i in tree.subtree(k.id))]
        if attempts < limit and tree.expandable(node_id) and not repeats(node_id) and (
                not options or min(fresh_success(tree, node_id), chance(node_id) if chance else 1.0) >= FRESH_MIN):
            return node_id
        if not options:
            return node_id
        parent_visits = max(node.visits, 1)
        best = max(options, key=lambda k: (uct_score(k.value, k.visits, parent_visits, params.exploration), -k.id))
        node_id = best.id
    return node_id


def select_greedy(tree: Tree, start_id: int) -> int:
    """The fastest correct, not excluded node in the start's subtree; the start if there is none."""
    ids = [i for i in tree.subtree(start_id) if tree.expandable(i) and tree.node(i).origin != "root"]
    ok = [tree.node(i) for i in ids if tree.node(i).speedup is not None]
    if not ok:
        return start_id
    return max(ok, key=lambda n: (n.speedup, -n.id)).id


def select_best_of_n(tree: Tree, start_id: int) -> int:
    return start_id


def select(strategy: str, tree: Tree, start_id: int, params: MCTSParams = MCTSParams(),
           chance: Callable[[int], float] | None = None) -> int:
    if strategy == "mcts":
        return select_mcts(tree, start_id, params, chance)
    if strategy == "greedy":
        return select_greedy(tree, start_id)
    if strategy == "best-of-n":
        return select_best_of_n(tree, start_id)
    raise ValueError(f"unknown strategy {strategy!r} (choose one of {', '.join(STRATEGIES)})")


def pending_repair(tree: Tree, rounds: int) -> int | None:
    """The newest evaluated candidate that failed in a repairable way and has not been repaired yet,
    if fewer than ``rounds`` repairs led to it; repairs follow their failure at once. A repair whose
    answer was empty or repeated earlier code is tried once more."""
    if rounds <= 0:
        return None
    for node_id in sorted(tree.nodes, reverse=True):
        n = tree.node(node_id)
        if n.origin not in ("llm", "user", "seed") or n.verdict is None:
            continue
        if not tree.repairable(node_id):
            return None  # only the latest result is repaired; older failures had their chance
        if tree.repair_depth(node_id) >= rounds:
            return None
        attempts = [k for k in tree.children(node_id, counted=False) if k.kind == "repair"]
        real = [k for k in attempts if k.state not in ("duplicate", "no_code")]
        if real or len(attempts) >= 2:  # one more try when the first answer was empty or a repeat
            return None
        return node_id
    return None
