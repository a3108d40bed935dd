"""The Targets table: one row per problem of the session (one for a single problem; one per
profiled operator for a whole model), read from the store.

A model session stores each target's facts in the problem's ``info`` (op, module path, shapes,
share of runtime); a plain problem has none of them and shows its name only.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt


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
    chosen: str  # "#12 (pinned)" / "#9 (best)" / ""


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


def target_rows(store) -> list[TargetRow]:
    rows: list[TargetRow] = []
    if store is None:
        return rows
    for p in store.problems():
        info = p.info or {}
        state = store.search_state(p.id)
        best = store.best_node(p.id)
        pinned = store.pinned_node(p.id)
        share = _info(info, "share", "share_of_runtime", "runtime_share")
        chosen = f"#{pinned.id} (pinned)" if pinned else (f"#{best.id} (fastest)" if best else "")
        rows.append(TargetRow(
            problem_id=p.id,
            name=p.name,
            op=str(_info(info, "op", "label", "target", default="")),
            module=str(_info(info, "module_path", "module", "where", default="")),
            shapes=_shapes(_info(info, "shapes", "input_shapes")),
            share=float(share) if isinstance(share, (int, float)) else None,
            status=state.status if state else "new",
            candidates=store.candidates_done(p.id),
            best_speedup=(pinned.speedup if pinned and pinned.speedup else (best.speedup if best else None)),
            chosen=chosen,
        ))
    return rows


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
                "candidates": str(r.candidates),
                "best": f"{r.best_speedup:.2f}×" if r.best_speedup else "—",
                "chosen": r.chosen,
            }[key]
        if role == Qt.ItemDataRole.ToolTipRole and key in ("op", "module", "shapes"):
            return self.data(index)
        if role == Qt.ItemDataRole.TextAlignmentRole and key in ("share", "candidates", "best"):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.UserRole:
            return r.problem_id
        return None
