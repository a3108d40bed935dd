"""The numbers behind the speedup plot, computed from node records (no Qt).

x is either the candidate's index among evaluated candidates or minutes since the search began;
y is the speedup over eager for correct candidates and 0 for failed ones (they still show up, in
their colour, along the bottom).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ....search.events import NodeRecord
from ...status import classify


@dataclass(frozen=True)
class PlotData:
    by_class: dict[str, tuple[list[float], list[float], list[int]]] = field(default_factory=dict)  # x, y, ids
    best_x: list[float] = field(default_factory=list)
    best_y: list[float] = field(default_factory=list)
    positions: dict[int, tuple[float, float]] = field(default_factory=dict)
    compile_speedup: float | None = None  # torch.compile over eager, where measured
    count: int = 0


def plot_data(nodes: list[NodeRecord], x_mode: str = "candidates") -> PlotData:
    """``nodes`` in creation order; ``x_mode`` is "candidates" or "time"."""
    t0 = None
    compile_sp = None
    by_class: dict[str, tuple[list[float], list[float], list[int]]] = {}
    best_x: list[float] = []
    best_y: list[float] = []
    positions: dict[int, tuple[float, float]] = {}
    best = None
    i = 0
    for n in nodes:
        if t0 is None:
            t0 = n.created_at
        v = n.verdict
        if v is not None and v.baseline_ms and v.compile_baseline_ms:
            compile_sp = v.baseline_ms / v.compile_baseline_ms
        if n.origin == "root" or v is None:
            continue
        i += 1
        x = float(i) if x_mode == "candidates" else (n.created_at - t0) / 60.0
        sp = n.speedup
        y = float(sp) if sp is not None else 0.0
        xs, ys, ids = by_class.setdefault(classify(n), ([], [], []))
        xs.append(x)
        ys.append(y)
        ids.append(n.id)
        positions[n.id] = (x, y)
        if sp is not None and (best is None or sp > best):
            best = sp
        if best is not None:
            best_x.append(x)
            best_y.append(best)
    return PlotData(by_class, best_x, best_y, positions, compile_sp, i)
