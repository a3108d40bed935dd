"""The Candidates dock: every node of the current problem in a table that sorts by time, speedup,
status or any other column (click a header). Selecting a row selects the node everywhere, and a
node selected elsewhere is selected here."""

from __future__ import annotations

from PySide6.QtCore import QItemSelectionModel, Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView, QVBoxLayout, QWidget

from ...session_model import SessionModel
from ...theme import Theme
from .model import CandidatesModel, CandidatesSort


class CandidatesWidget(QWidget):
    def __init__(self, session: SessionModel, theme: Theme, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.theme = theme
        self.model = CandidatesModel(session, self)
        self.proxy = CandidatesSort(self)
        self.proxy.setSourceModel(self.model)
        self.table = QTableView(self)
        self.table.setObjectName("candidatesTable")
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(0, Qt.SortOrder.AscendingOrder)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(20)
        self.table.setShowGrid(False)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        h = self.table.horizontalHeader()
        h.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        fm = self.table.fontMetrics()
        for col, sample in enumerate(("#0000", "model · whole kernel", "correct, no measured win", "00.000×",
                                      "000.00", "000.00", "device", "cuda on host", "00.0")):
            title = self.model.COLUMNS[col]
            h.resizeSection(col, max(fm.horizontalAdvance(sample), fm.horizontalAdvance(title) + 14) + 24)
        h.setStretchLastSection(True)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.table)
        self.table.selectionModel().currentRowChanged.connect(self._row_changed)
        session.selectionChanged.connect(self._selection_changed)
        theme.changed.connect(self._theme_changed)
        self._theme_changed()

    def sort_by(self, key: str, descending: bool = False) -> None:
        self.table.sortByColumn(self.model.KEYS.index(key),
                                Qt.SortOrder.DescendingOrder if descending else Qt.SortOrder.AscendingOrder)

    def shown_ids(self) -> list[int]:
        """Node ids in the order the table shows them (what tests and the tour read)."""
        return [self.proxy.index(r, 0).data(Qt.ItemDataRole.UserRole) for r in range(self.proxy.rowCount())]

    def _row_changed(self, current, _previous) -> None:
        if current.isValid():
            self.session.select(current.data(Qt.ItemDataRole.UserRole))

    def _selection_changed(self, node_id) -> None:
        if node_id is None:
            self.table.clearSelection()
            return
        for r in range(self.proxy.rowCount()):
            idx = self.proxy.index(r, 0)
            if idx.data(Qt.ItemDataRole.UserRole) == node_id:
                if self.table.currentIndex().row() != r:
                    flags = QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows
                    self.table.selectionModel().setCurrentIndex(idx, flags)
                    self.table.scrollTo(idx)
                return

    def _theme_changed(self, *_a) -> None:
        self.model.dark = self.theme.dark
        self.table.viewport().update()
