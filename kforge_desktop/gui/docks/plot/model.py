"""The numbers behind the speedup plot, computed from node records (no Qt).

x is either the kernel's index among evaluated kernels (seeds and candidates) or minutes since the
search began; y is the speedup over eager for correct kernels and 0 for failed ones (they still
show up, in their colour, along the bottom).

"Best so far" follows measured wins only (``status.is_win``) and is a staircase: it holds its value
until a faster win arrives, then jumps. The torch.compile line is one value for the session, the
median of every verdict's torch.compile reading (each verdict times eager and torch.compile again,
so readings differ a little), and says so.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

from ....search.events import NodeRecord
from ...counts import is_candidate
from ...status import classify, is_win


@dataclass(frozen=True)
class PlotData:
    by_class: dict[str, tuple[list[float], list[float], list[int]]] = field(default_factory=dict)  # x, y, ids
    best_x: list[float] = field(default_factory=list)  # the staircase's corners
    best_y: list[float] = field(default_factory=list)
    positions: dict[int, tuple[float, float]] = field(default_factory=dict)
    compile_speedup: float | None = None  # torch.compile over eager: the median of the readings
    compile_readings: int = 0
    time_basis: str = ""  # "device" or "wall": what the speedups are computed on
    count: int = 0  # kernels drawn (seeds and candidates)
    candidates: int = 0  # of them, candidates (what the budget counts)
    best: float | None = None  # the fastest win


def plot_data(nodes: list[NodeRecord], x_mode: str = "candidates") -> PlotData:
    """``nodes`` in creation order; ``x_mode`` is "candidates" or "time"."""
    t0 = None
    readings: list[float] = []
    bases: Counter[str] = Counter()
    by_class: dict[str, tuple[list[float], list[float], list[int]]] = {}
    best_x: list[float] = []
    best_y: list[float] = []
    positions: dict[int, tuple[float, float]] = {}
    best = None
    i = candidates = 0
    last_x = None
    for n in nodes:
        if t0 is None:
            t0 = n.created_at
        v = n.verdict
        if v is not None and v.baseline_ms and v.compile_baseline_ms:
            readings.append(v.baseline_ms / v.compile_baseline_ms)
        if v is not None and v.time_basis:
            bases[v.time_basis] += 1
        if n.origin == "root" or v is None:
            continue
        i += 1
        candidates += is_candidate(n)
        x = float(i) if x_mode == "candidates" else (n.created_at - t0) / 60.0
        last_x = x
        sp = n.speedup
        y = float(sp) if sp is not None else 0.0
        xs, ys, ids = by_class.setdefault(classify(n), ([], [], []))
        xs.append(x)
        ys.append(y)
        ids.append(n.id)
        positions[n.id] = (x, y)
        if is_win(n) and (best is None or sp > best):
            if best is not None:  # hold the old value up to here, then jump
                best_x.append(x)
                best_y.append(best)
            best = sp
            best_x.append(x)
            best_y.append(best)
    if best is not None and last_x is not None and best_x[-1] < last_x:
        best_x.append(last_x)  # the staircase runs on to the latest kernel
        best_y.append(best)
    compile_sp = statistics.median(readings) if readings else None
    basis = bases.most_common(1)[0][0] if bases else ""
    return PlotData(by_class, best_x, best_y, positions, compile_sp, len(readings), basis, i, candidates, best)
