"""The session log as a Qt item model: the store's event rows plus the window's own messages.

Events come from the session store (so a reopened session shows its whole history); messages the
window itself raises (a file that would not open, a command refused) are added locally.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtGui import QColor

LEVELS = ("debug", "info", "warning", "error")


@dataclass(frozen=True)
class LogEntry:
    t: float
    level: str
    kind: str
    message: str
    detail: str = ""
    problem_id: int | None = None


class LogModel(QAbstractTableModel):
    COLUMNS = ("time", "level", "what", "message")
    MAX_ROWS = 50_000

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.entries: list[LogEntry] = []
        self.last_event_id = 0

    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.entries)

    def columnCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return self.COLUMNS[section]
        return None

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        e = self.entries[index.row()]
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            if col == 0:
                return time.strftime("%H:%M:%S", time.localtime(e.t))
            if col == 1:
                return e.level
            if col == 2:
                return e.kind
            return e.message
        if role == Qt.ItemDataRole.ToolTipRole:
            return e.detail or e.message
        if role == Qt.ItemDataRole.ForegroundRole and col in (1, 3):
            if e.level == "error":
                return QColor("#d73027")
            if e.level == "warning":
                return QColor("#d08010")
        if role == Qt.ItemDataRole.UserRole:
            return e
        return None

    def append(self, entries: list[LogEntry]) -> None:
        if not entries:
            return
        first = len(self.entries)
        self.beginInsertRows(QModelIndex(), first, first + len(entries) - 1)
        self.entries.extend(entries)
        self.endInsertRows()
        if len(self.entries) > self.MAX_ROWS:
            drop = len(self.entries) - self.MAX_ROWS
            self.beginRemoveRows(QModelIndex(), 0, drop - 1)
            del self.entries[:drop]
            self.endRemoveRows()

    def clear(self) -> None:
        self.beginResetModel()
        self.entries = []
        self.last_event_id = 0
        self.endResetModel()

    def load_events(self, store) -> int:
        """Append the store's events newer than the last one seen; returns how many."""
        if store is None:
            return 0
        try:
            events = store.events(since_id=self.last_event_id, limit=5000)
        except Exception:
            return 0
        if not events:
            return 0
        self.last_event_id = events[-1].id
        entries = []
        for ev in events:
            payload = ev.payload or {}
            detail = payload.get("detail") if isinstance(payload, dict) else ""
            if not detail and payload:
                detail = json.dumps(payload, indent=1)[:4000]
            entries.append(LogEntry(ev.t, ev.level, ev.kind, ev.message, detail or "", ev.problem_id))
        self.append(entries)
        return len(entries)


class LogFilter(QSortFilterProxyModel):
    """Minimum level plus a case-insensitive text filter over kind and message."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.min_level = "info"
        self.text = ""

    def _refilter(self, change) -> None:
        if hasattr(self, "beginFilterChange"):  # Qt >= 6.10
            self.beginFilterChange()
            change()
            self.endFilterChange()
        else:
            change()
            self.invalidateFilter()

    def set_min_level(self, level: str) -> None:
        self._refilter(lambda: setattr(self, "min_level", level))

    def set_text(self, text: str) -> None:
        self._refilter(lambda: setattr(self, "text", text.lower().strip()))

    def filterAcceptsRow(self, row: int, parent: QModelIndex) -> bool:
        e: LogEntry = self.sourceModel().entries[row]
        want = LEVELS.index(self.min_level) if self.min_level in LEVELS else 0
        have = LEVELS.index(e.level) if e.level in LEVELS else 1
        if have < want:
            return False
        if self.text and self.text not in e.message.lower() and self.text not in e.kind.lower():
            return False
        return True
