"""A tidy tree layout (Walker's algorithm in Buchheim, Jünger and Leipert's linear-time form).

Why this and not a force graph: a search tree read as a tree shows depth (how many refinements a
kernel took) and siblings (alternatives tried from one parent) at a glance, and the picture does
not wobble as nodes stream in. Pure Python, no Qt, iterative (a greedy chain can be thousands of
nodes deep), O(n): 5,000 nodes lay out in a few tens of milliseconds (benchmarks/gui_tree.py).
"""

from __future__ import annotations

from collections.abc import Iterable


class _N:
    __slots__ = (
        "id", "parent", "children", "number", "prelim", "mod", "thread", "ancestor",
        "change", "shift", "midpoint",
    )  # fmt: skip

    def __init__(self, node_id: int) -> None:
        self.id = node_id
        self.parent: _N | None = None
        self.children: list[_N] = []
        self.number = 0  # index among siblings
        self.prelim = 0.0
        self.mod = 0.0
        self.thread: _N | None = None
        self.ancestor: _N = self
        self.change = 0.0
        self.shift = 0.0
        self.midpoint = 0.0


def _next_left(v: _N) -> _N | None:
    return v.children[0] if v.children else v.thread


def _next_right(v: _N) -> _N | None:
    return v.children[-1] if v.children else v.thread


def _move_subtree(wl: _N, wr: _N, shift: float) -> None:
    subtrees = wr.number - wl.number
    wr.change -= shift / subtrees
    wr.shift += shift
    wl.change += shift / subtrees
    wr.prelim += shift
    wr.mod += shift


def _execute_shifts(v: _N) -> None:
    shift = change = 0.0
    for w in reversed(v.children):
        w.prelim += shift
        w.mod += shift
        change += w.change
        shift += w.shift + change


def _apportion(v: _N, default_ancestor: _N, distance: float) -> _N:
    if v.number == 0:
        return default_ancestor
    parent = v.parent
    assert parent is not None
    w = parent.children[v.number - 1]
    vir = vor = v
    vil = w
    vol = parent.children[0]
    sir = sor = v.mod
    sil = vil.mod
    sol = vol.mod
    nr, nl = _next_right(vil), _next_left(vir)
    while nr is not None and nl is not None:
        vil, vir = nr, nl
        vol = _next_left(vol)  # type: ignore[assignment]
        vor = _next_right(vor)  # type: ignore[assignment]
        vor.ancestor = v
        shift = (vil.prelim + sil) - (vir.prelim + sir) + distance
        if shift > 0:
            anc = vil.ancestor if vil.ancestor.parent is parent else default_ancestor
            _move_subtree(anc, v, shift)
            sir += shift
            sor += shift
        sil += vil.mod
        sir += vir.mod
        sol += vol.mod
        sor += vor.mod
        nr, nl = _next_right(vil), _next_left(vir)
    if _next_right(vil) is not None and _next_right(vor) is None:
        vor.thread = _next_right(vil)
        vor.mod += sil - sor
    else:
        if _next_left(vir) is not None and _next_left(vol) is None:
            vol.thread = _next_left(vir)
            vol.mod += sir - sol
        default_ancestor = v
    return default_ancestor


def tidy_layout(edges: Iterable[tuple[int, int | None]], distance: float = 1.0) -> dict[int, tuple[float, int]]:
    """Positions for a forest given ``(node_id, parent_id)`` pairs, children in the order given.

    Returns ``{node_id: (x, depth)}``; x in units of ``distance`` (the gap between neighbours),
    roots side by side. A parent id that is not in the input makes its node a root.
    """
    nodes: dict[int, _N] = {}
    order: list[tuple[int, int | None]] = []
    for node_id, parent_id in edges:
        nodes[node_id] = _N(node_id)
        order.append((node_id, parent_id))
    roots: list[_N] = []
    for node_id, parent_id in order:
        n = nodes[node_id]
        p = nodes.get(parent_id) if parent_id is not None else None
        if p is None or p is n:
            roots.append(n)
            continue
        n.parent = p
        n.number = len(p.children)
        p.children.append(n)
    if not roots:
        return {}
    # one virtual super-root keeps several roots (several problems) apart like siblings
    top = _N(-1)
    for i, r in enumerate(roots):
        r.parent, r.number = top, i
    top.children = roots

    # first walk, post-order without recursion
    stack: list[tuple[_N, bool]] = [(top, False)]
    while stack:
        v, done = stack.pop()
        if not done:
            stack.append((v, True))
            stack.extend((c, False) for c in reversed(v.children))
            continue
        if not v.children:
            continue  # a leaf's prelim is set by its parent (it depends on its left sibling)
        default_ancestor = v.children[0]
        for i, w in enumerate(v.children):
            if i:  # the sibling-dependent step of Walker's first walk, done in order
                w.prelim = v.children[i - 1].prelim + distance
                if w.children:
                    w.mod = w.prelim - w.midpoint
            else:
                w.prelim = w.midpoint
            default_ancestor = _apportion(w, default_ancestor, distance)
        _execute_shifts(v)
        v.midpoint = (v.children[0].prelim + v.children[-1].prelim) / 2.0

    # second walk, pre-order
    out: dict[int, tuple[float, int]] = {}
    walk: list[tuple[_N, float, int]] = [(r, 0.0, 0) for r in reversed(roots)]
    while walk:
        v, m, depth = walk.pop()
        out[v.id] = (v.prelim + m, depth)
        m2 = m + v.mod
        walk.extend((c, m2, depth + 1) for c in reversed(v.children))
    if out:
        shift = min(x for x, _ in out.values())
        if shift:
            out = {k: (x - shift, d) for k, (x, d) in out.items()}
    return out
