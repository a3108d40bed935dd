"""The Candidates table: one row per node of the current problem, sortable by time, speedup or
status. It keeps no copy of the nodes: rows are node ids, and every cell is read from the session's
index (``SessionModel.light``), which is refreshed from the session store."""

from __future__ import annotations

import math

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtGui import QColor

from ...session_model import SessionModel
from ...status import BY_KEY, CLASSES, classify, node_title, where_ran

SORT_ROLE = Qt.ItemDataRole.UserRole + 1
STATUS_RANK = {c.key: i for i, c in enumerate(CLASSES)}  # wins first, failures after, waiting last


class CandidatesModel(QAbstractTableModel):
    KEYS = ("node", "who", "status", "speedup", "time", "call", "basis", "ran", "build")
    COLUMNS = ("node", "written by", "status", "speedup", "time (ms)", "one call (ms)", "time basis", "ran on",
               "build (s)")

    def __init__(self, session: SessionModel, parent=None) -> None:
        super().__init__(parent)
        self.session = session
        self.dark = False
        self.ids: list[int] = []
        session.nodesReset.connect(self.reload)
        session.nodesUpdated.connect(self._updated)
        self.reload()

    def reload(self) -> None:
        self.beginResetModel()
        self.ids = list(self.session.nodes())
        self.endResetModel()

    def _updated(self, ids: list) -> None:
        known = set(self.ids)
        new = [i for i in ids if i not in known and self.session.light(i) is not None]
        if new:
            first = len(self.ids)
            self.beginInsertRows(QModelIndex(), first, first + len(new) - 1)
            self.ids.extend(new)
            self.endInsertRows()
        if self.ids:
            self.dataChanged.emit(self.index(0, 0), self.index(len(self.ids) - 1, len(self.KEYS) - 1))

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self.ids)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self.KEYS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return self.COLUMNS[section]
        return None

    def node_id(self, row: int) -> int:
        return self.ids[row]

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        n = self.session.light(self.ids[index.row()])
        if n is None:
            return None
        key = self.KEYS[index.column()]
        v = n.verdict
        ok = v is not None and v.status == "ok"
        if role == Qt.ItemDataRole.DisplayRole:
            if key == "node":
                return f"#{n.id}"
            if key == "who":
                return node_title(n).split(" ", 1)[1]
            if key == "status":
                return BY_KEY[classify(n)].label
            if key == "speedup":
                return f"{v.speedup:.3f}×" if ok and v.speedup is not None else ""
            if key == "time":
                return f"{v.latency_ms:.4g}" if ok and v.latency_ms is not None else ""
            if key == "call":
                return f"{v.call_ms:.4g}" if ok and v.call_ms is not None else ""
            if key == "basis":
                return v.time_basis if ok else ""
            if key == "ran":
                return where_ran(n)
            if key == "build":
                return f"{v.build_s:.1f}" if v is not None and v.build_s is not None else ""
        if role == SORT_ROLE:
            if key == "node":
                return n.id
            if key == "speedup":
                return v.speedup if ok and v.speedup is not None else -math.inf
            if key == "time":
                return v.latency_ms if ok and v.latency_ms is not None else math.inf
            if key == "call":
                return v.call_ms if ok and v.call_ms is not None else math.inf
            if key == "build":
                return v.build_s if v is not None and v.build_s is not None else math.inf
            if key == "status":
                return STATUS_RANK.get(classify(n), len(STATUS_RANK))
            return str(self.data(index) or "")
        if role == Qt.ItemDataRole.DecorationRole and key == "status":
            return QColor(BY_KEY[classify(n)].color(self.dark))
        if role == Qt.ItemDataRole.ToolTipRole:
            from ...status import describe

            return describe(n)
        if role == Qt.ItemDataRole.TextAlignmentRole and key in ("speedup", "time", "call", "build"):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.UserRole:
            return n.id
        return None


class CandidatesSort(QSortFilterProxyModel):
    """Sorts on each column's own key (numbers as numbers; status by how good it is)."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setSortRole(SORT_ROLE)
        self.setDynamicSortFilter(True)
