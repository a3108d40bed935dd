"""Spread a candidate budget over a model's targets by what there is to win.

A target's weight is the share of the model's op time it could give back if it ran at its floor:
``(time - floor) / op time``. A target that is 2 % of the time gets little; one at its floor (the
bytes it must move and the FLOPs it must do, at the rates this device reaches) gets none, and the
allocation says why, so the report can too. Targets that a tuned vendor library already runs
(linear, matmul, conv: oneDNN/MKL on a CPU, cuBLAS/cuDNN on a GPU) count at ``library_weight`` of
their winnable time: their floor is real, but a generated kernel rarely gets closer to it than the
library does, so a small budget is better spent elsewhere first.
"""

from __future__ import annotations

from dataclasses import dataclass

from .profile import Target

LIBRARY_KINDS = ("linear", "conv")


@dataclass(frozen=True)
class Allocation:
    target: str
    budget: int  # candidates for this target's search
    weight: float  # winnable share of the model's op time
    reason: str  # why this budget (one sentence)


def allocate(targets: list[Target] | tuple[Target, ...], total: int, *, min_share: float = 0.01,
             floor_ratio: float = 1.25, min_per_target: int = 2, max_targets: int | None = None,
             only: tuple[str, ...] = (), library_weight: float = 0.25) -> list[Allocation]:
    """One allocation per target (in the order given), the budgets summing to at most ``total``.
    ``only``: search just the targets whose name or kind contains one of these words."""
    op_ms = sum(t.time_ms for t in targets) or 1.0
    out: dict[str, Allocation] = {}
    eligible: list[tuple[Target, float]] = []
    for t in targets:
        hf = t.headroom_floor
        if only and not any(w in t.name or w == t.kind for w in only):
            out[t.name] = Allocation(t.name, 0, 0.0, "not searched: not among the targets asked for")
        elif not t.optimizable:
            out[t.name] = Allocation(t.name, 0, 0.0, f"not searched: it {t.note}")
        elif t.share < min_share:
            out[t.name] = Allocation(t.name, 0, 0.0, f"not searched: {100 * t.share:.1f}% of the time is too little to matter")
        elif hf is not None and hf < floor_ratio:
            out[t.name] = Allocation(t.name, 0, 0.0, f"not searched: already within {hf:.2f}x of its floor "
                                     f"(bytes and FLOPs at this device's measured rates), nothing to win")
        else:
            weight = max(0.0, t.time_ms - t.floor_ms) / op_ms
            if t.kind in LIBRARY_KINDS:
                weight *= library_weight
            eligible.append((t, weight))
    eligible.sort(key=lambda tw: -tw[1])
    if max_targets is not None:
        for t, _w in eligible[max_targets:]:
            out[t.name] = Allocation(t.name, 0, 0.0, f"not searched: only the top {max_targets} targets are searched")
        eligible = eligible[:max_targets]
    # as many targets as the budget can give a minimum to, biggest weight first
    per = max(1, min(min_per_target, total))
    n_fund = min(len(eligible), total // per) if total > 0 else 0
    funded, unfunded = eligible[:n_fund], eligible[n_fund:]
    for t, _w in unfunded:
        out[t.name] = Allocation(t.name, 0, 0.0, "not searched: the budget went to targets with more to win")
    if funded:
        spare = total - per * len(funded)
        wsum = sum(w for _t, w in funded) or 1.0
        exact = [spare * w / wsum for _t, w in funded]
        extra = [int(x) for x in exact]
        left = spare - sum(extra)
        for i in sorted(range(len(funded)), key=lambda i: -(exact[i] - extra[i]))[:left]:
            extra[i] += 1  # largest remainder
        for (t, w), e in zip(funded, extra, strict=True):
            n = per + e
            hf = t.headroom_floor
            why = f"{100 * w:.1f}% of the model's op time to win ({100 * t.share:.1f}% of the time"
            why += f", {hf:.1f}x over its floor)" if hf else ")"
            if t.kind in LIBRARY_KINDS:
                why += f"; counted at {library_weight:g} because a tuned library runs it"
            out[t.name] = Allocation(t.name, n, w, why)
    return [out[t.name] for t in targets]
