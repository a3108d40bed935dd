"""The pure parts behind the tree and code docks: a tidy tree (no two nodes overlap, parents sit
over their children, siblings keep their order, deep chains do not overflow the stack) and the
diff rows the code view paints."""

from __future__ import annotations

import random

from kforge_desktop.gui.docks.code.diff import side_rows, stats, unified_rows
from kforge_desktop.gui.docks.code.highlight import highlight_lines
from kforge_desktop.gui.docks.tree.layout import tidy_layout


def _random_tree(n: int, seed: int) -> list[tuple[int, int | None]]:
    rng = random.Random(seed)
    edges: list[tuple[int, int | None]] = [(0, None)]
    for i in range(1, n):
        edges.append((i, rng.randrange(max(0, i - 40), i)))
    return edges


def _check(edges, pos):
    by_depth: dict[int, list[float]] = {}
    for _nid, (x, d) in pos.items():
        by_depth.setdefault(d, []).append(x)
    for xs in by_depth.values():
        xs.sort()
        assert all(b - a >= 1.0 - 1e-9 for a, b in zip(xs, xs[1:])), "two nodes overlap"
    kids: dict[int, list[int]] = {}
    for nid, parent in edges:
        if parent is not None:
            kids.setdefault(parent, []).append(nid)
            assert pos[nid][1] == pos[parent][1] + 1
    for parent, cs in kids.items():
        assert abs((pos[cs[0]][0] + pos[cs[-1]][0]) / 2 - pos[parent][0]) < 1e-9, "parent not centred"
        assert all(pos[a][0] < pos[b][0] for a, b in zip(cs, cs[1:])), "siblings out of order"


def test_tidy_layout_random_trees():
    for seed in range(5):
        edges = _random_tree(400, seed)
        _check(edges, tidy_layout(edges))


def test_tidy_layout_deep_chain_and_wide_fan_and_forest():
    chain = [(i, i - 1 if i else None) for i in range(6000)]  # deeper than the recursion limit
    pos = tidy_layout(chain)
    assert pos[5999] == (0.0, 5999)
    fan = [(0, None)] + [(i, 0) for i in range(1, 50)]
    _check(fan, tidy_layout(fan))
    forest = [(0, None), (1, None), (2, 0), (3, 1)]
    pos = tidy_layout(forest)
    assert pos[0][0] < pos[1][0]


def test_diff_rows_unified_and_side_by_side():
    old = ["a", "b", "c", "d"]
    new = ["a", "B", "c", "d", "e"]
    rows = unified_rows(old, new)
    kinds = [r.kind for r in rows]
    assert kinds[0] == "hunk" and kinds.count("delete") == 1 and kinds.count("insert") == 2
    side = side_rows(old, new)
    assert len(side) == 5 and side[1].kind == "replace" and side[4].left is None
    assert str(stats(old, new)) == "+2 −1"
    assert unified_rows(old, old) == []


def test_module_highlighting_lexes_the_kernel_string_as_cpp():
    src = 'import torch\nK = r"""\n#include <cmath>\nextern "C" void f(float* x) { x[0] = 1.0f; }\n"""\n'
    lines = highlight_lines(src, "module:cpp")
    assert len(lines) == src.count("\n")
    kernel_line = lines[3]
    kinds = {str(t) for t, _ in kernel_line}
    assert any("Keyword" in k for k in kinds), "C++ keywords inside the kernel string are highlighted"
    assert "".join(v for _, v in kernel_line) == 'extern "C" void f(float* x) { x[0] = 1.0f; }'
