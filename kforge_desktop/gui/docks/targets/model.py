"""The Targets table: one row per problem of the session (one for a single problem; one per
profiled operator for a whole model), read from the store.

A model session stores each target's facts in the problem's ``info`` (op, module path, shapes,
share of runtime); a plain problem has none of them and shows its name only. "candidates" counts
what ``gui.counts`` calls a candidate (what the budget counts), out of the problem's own budget;
"best" is the fastest measured win (``status.is_win``), with its time beside the speedup.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt

from ...counts import count
from ...status import is_win


@dataclass(frozen=True)
class TargetRow:
    problem_id: int
    name: str
    op: str
    module: str
    shapes: str
    share: float | None
    status: str
    candidates: int
    best_speedup: float | None
    chosen: str  # "#12 (pinned)" / "#9 (fastest win)" / ""
    budget: int | None = None
    best_ms: float | None = None  # the chosen (or best) kernel's time
    time_basis: str = ""


def _info(info: dict, *keys: str, default=None):
    for k in keys:
        if k in info and info[k] not in (None, ""):
            return info[k]
    return default


def _shapes(v) -> str:
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    if isinstance(v, (list, tuple)):
        return ", ".join(_shapes(x) if isinstance(x, (list, tuple)) and x and isinstance(x[0], (list, tuple))
                         else ("×".join(str(d) for d in x) if isinstance(x, (list, tuple)) else str(x)) for x in v)
    return str(v)


def _stored_status(_problem_id: int, state) -> str:
    return state.status if state else "new"


def target_rows(store, nodes_for: Callable[[int], list] | None = None,
                status_for: Callable[[int, object], str] = _stored_status) -> list[TargetRow]:
    """One row per problem. ``nodes_for(problem_id)`` gives its nodes without sources (the window
    passes its session index for the current problem); ``status_for`` words the search state
    (the window knows whether it, another process or nobody is running it)."""
    rows: list[TargetRow] = []
    if store is None:
        return rows
    nodes_for = nodes_for or (lambda pid: store.nodes(pid, with_source=False))
    for p in store.problems():
        info = p.info or {}
        state = store.search_state(p.id)
        nodes = list(nodes_for(p.id))
        wins = [n for n in nodes if is_win(n)]
        best = max(wins, key=lambda n: (n.speedup, -n.id)) if wins else None
        pinned = next((n for n in nodes if n.pinned), None)
        share = _info(info, "share", "share_of_runtime", "runtime_share")
        chosen = f"#{pinned.id} (pinned)" if pinned else (f"#{best.id} (fastest win)" if best else "")
        shown = pinned if pinned and pinned.speedup else best
        rows.append(TargetRow(
            problem_id=p.id,
            name=p.name,
            op=str(_info(info, "op", "label", "target", default="")),
            module=str(_info(info, "module_path", "module", "where", default="")),
            shapes=_shapes(_info(info, "shapes", "input_shapes")),
            share=float(share) if isinstance(share, (int, float)) else None,
            status=status_for(p.id, state),
            candidates=count(nodes).candidates,
            best_speedup=shown.speedup if shown else None,
            chosen=chosen,
            budget=state.budget_candidates if state else None,
            best_ms=shown.verdict.latency_ms if shown else None,
            time_basis=shown.verdict.time_basis if shown else "",
        ))
    return rows


STATUS_TIPS = {
    "interrupted": "The session says a search runs, but no process has it open (it was killed): Start resumes it.",
    "running elsewhere": "Another process (kforge optimize, another window) is searching this target; "
                         "Start is off here.",
    "paused elsewhere": "Another process holds a paused search of this target; Start is off here.",
}


def _best_text(r: TargetRow) -> str:
    if not r.best_speedup:
        return "—"
    return f"{r.best_speedup:.2f}× · {r.best_ms:.3g} ms" if r.best_ms is not None else f"{r.best_speedup:.2f}×"


class TargetsModel(QAbstractTableModel):
    # the columns a user scans first come first; the long ones (module paths, shapes) last
    KEYS = ("target", "share", "op", "status", "candidates", "best", "chosen", "module", "shapes")
    COLUMNS = ("target", "share", "op", "status", "candidates", "best", "chosen kernel", "module", "shapes")
    OPTIONAL = ("share", "op", "module", "shapes")  # empty for a plain problem: hidden then

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.rows: list[TargetRow] = []

    def set_rows(self, rows: list[TargetRow]) -> None:
        if [r.problem_id for r in rows] == [r.problem_id for r in self.rows]:
            self.rows = rows
            if rows:
                self.dataChanged.emit(self.index(0, 0), self.index(len(rows) - 1, len(self.COLUMNS) - 1))
            return
        self.beginResetModel()
        self.rows = rows
        self.endResetModel()

    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return self.COLUMNS[section]
        return None

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        r = self.rows[index.row()]
        col = index.column()
        key = self.KEYS[col]
        if role == Qt.ItemDataRole.DisplayRole:
            return {
                "target": r.name,
                "op": r.op,
                "module": r.module,
                "shapes": r.shapes,
                "share": f"{100 * r.share:.1f} %" if r.share is not None else "",
                "status": r.status,
                "candidates": f"{r.candidates} of {r.budget}" if r.budget else str(r.candidates),
                "best": _best_text(r),
                "chosen": r.chosen,
            }[key]
        if role == Qt.ItemDataRole.ToolTipRole and key == "status":
            return STATUS_TIPS.get(r.status.split(" (")[0], r.status)
        if role == Qt.ItemDataRole.ToolTipRole and key in ("op", "module", "shapes"):
            return self.data(index)
        if role == Qt.ItemDataRole.ToolTipRole and key == "best" and r.best_speedup:
            basis = f" ({r.time_basis} time)" if r.time_basis else ""
            ms = f"; {r.best_ms:.4g} ms per call{basis}" if r.best_ms is not None else ""
            return f"{r.best_speedup:.3f}× over eager{ms}"
        if role == Qt.ItemDataRole.ToolTipRole and key == "candidates":
            return ("kernels written by the model or by hand that were judged (what the budget counts); "
                    "seeds and the reference are not candidates")
        if role == Qt.ItemDataRole.TextAlignmentRole and key in ("share", "candidates", "best"):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.UserRole:
            return r.problem_id
        return None
