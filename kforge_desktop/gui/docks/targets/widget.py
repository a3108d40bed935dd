"""The Targets dock: the session's problems (or a model's profiled operators); choosing one
shows its search in the other docks."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView, QVBoxLayout, QWidget

from ...session_model import SessionModel
from .model import TargetsModel, _stored_status, target_rows


class TargetsWidget(QWidget):
    def __init__(self, session: SessionModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.status_for = _stored_status  # the window words "running" (here, elsewhere, interrupted)
        self.model = TargetsModel(self)
        self.table = QTableView(self)
        self.table.setObjectName("targetsTable")
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(22)
        self.table.setShowGrid(False)
        self.table.setAlternatingRowColors(True)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.horizontalHeader().setMaximumSectionSize(320)
        self.table.setTextElideMode(Qt.TextElideMode.ElideRight)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.table)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(500)
        self._timer.timeout.connect(self.refresh)
        self.table.selectionModel().currentRowChanged.connect(self._row_changed)
        session.sessionChanged.connect(self.refresh)
        session.problemChanged.connect(self._problem_changed)
        session.problemsUpdated.connect(lambda: self._timer.start() if not self._timer.isActive() else None)

    def refresh(self) -> None:
        self.model.set_rows(target_rows(self.session.store, self._nodes_for, self.status_for))
        # a plain problem has no op/module/shapes/share: hide columns no row fills
        for key in self.model.OPTIONAL:
            col = self.model.KEYS.index(key)
            empty = all(not self.model.data(self.model.index(r, col)) for r in range(self.model.rowCount()))
            self.table.setColumnHidden(col, empty)
        self._problem_changed(self.session.problem_id)

    def _nodes_for(self, problem_id: int) -> list:
        """The current problem's nodes from the session's index; another problem's from the store."""
        if problem_id == self.session.problem_id:
            return list(self.session.nodes().values())
        return self.session.store.nodes(problem_id, with_source=False)

    def _problem_changed(self, problem_id) -> None:
        for i, r in enumerate(self.model.rows):
            if r.problem_id == problem_id:
                if self.table.currentIndex().row() != i:
                    self.table.selectRow(i)
                return

    def _row_changed(self, current, _previous) -> None:
        if not current.isValid():
            return
        pid = self.model.rows[current.row()].problem_id
        if pid != self.session.problem_id:
            self.session.set_problem(pid)
