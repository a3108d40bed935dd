"""The Log dock: the session's events, filterable by level and text, details on demand."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLineEdit,
    QPlainTextEdit,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from ...session_model import SessionModel
from ..code.view import mono_font
from .model import LogEntry, LogFilter, LogModel


class LogWidget(QWidget):
    def __init__(self, session: SessionModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.model = LogModel(self)
        self.proxy = LogFilter(self)
        self.proxy.setSourceModel(self.model)

        self.level = QComboBox(self)
        self.level.setObjectName("logLevel")
        for text, key in (("All", "debug"), ("Info and above", "info"), ("Warnings and errors", "warning"),
                          ("Errors", "error")):
            self.level.addItem(text, key)
        self.level.setCurrentIndex(1)
        self.filter_edit = QLineEdit(self)
        self.filter_edit.setObjectName("logFilter")
        self.filter_edit.setPlaceholderText("Filter the log…")
        self.filter_edit.setClearButtonEnabled(True)
        bar = QHBoxLayout()
        bar.setContentsMargins(4, 2, 4, 2)
        bar.addWidget(self.level)
        bar.addWidget(self.filter_edit, 1)

        self.table = QTableView(self)
        self.table.setObjectName("logTable")
        self.table.setModel(self.proxy)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(20)
        self.table.setShowGrid(False)
        self.table.setWordWrap(False)
        h = self.table.horizontalHeader()
        fm = self.table.fontMetrics()
        for col, sample in enumerate(("00:00:00", "warning", "node_evaluated")):
            h.setSectionResizeMode(col, QHeaderView.ResizeMode.Interactive)
            h.resizeSection(col, fm.horizontalAdvance(sample) + 18)
        h.setStretchLastSection(True)
        self.detail = QPlainTextEdit(self)
        self.detail.setObjectName("logDetail")
        self.detail.setReadOnly(True)
        self.detail.setFont(mono_font())
        self.detail.setPlaceholderText("Select a line to see its details.")
        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.addWidget(self.table)
        split.addWidget(self.detail)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 1)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addLayout(bar)
        lay.addWidget(split, 1)

        self.level.currentIndexChanged.connect(lambda _i: self.proxy.set_min_level(self.level.currentData()))
        self.filter_edit.textChanged.connect(self.proxy.set_text)
        self.table.selectionModel().currentRowChanged.connect(self._show_detail)
        session.sessionChanged.connect(self._session_changed)
        session.nodesUpdated.connect(lambda _ids: self.pull())
        self.model.rowsInserted.connect(self._follow)

    def _session_changed(self) -> None:
        """Each session has its own log: its stored history, then what the window says about it.
        Nothing of the previous session stays (not its lines, not the detail of one of them)."""
        self.model.clear()
        self.detail.clear()
        self.pull()

    def pull(self) -> int:
        """Read new events from the session store."""
        return self.model.load_events(self.session.store)

    def add(self, level: str, message: str, detail: str = "", kind: str = "app") -> None:
        """A message from the window itself (not from the engine)."""
        self.model.append([LogEntry(time.time(), level, kind, message, detail)])

    def _follow(self, *_a) -> None:
        sb = self.table.verticalScrollBar()
        if sb.value() >= sb.maximum() - 40:
            self.table.scrollToBottom()

    def _show_detail(self, current, _previous) -> None:
        if not current.isValid():
            self.detail.setPlainText("")
            return
        e: LogEntry = self.proxy.data(current, Qt.ItemDataRole.UserRole)
        self.detail.setPlainText(f"{e.message}\n\n{e.detail}" if e.detail else e.message)
