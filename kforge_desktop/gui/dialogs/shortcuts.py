"""Help → Keyboard shortcuts: every action that has one, read from the actions themselves (so the
list cannot drift from what the keys do)."""

from __future__ import annotations

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

EXTRA = (("Scroll wheel on the tree", "Zoom"), ("Drag the tree", "Pan"),
         ("Double-click a node", "Show its code"), ("Double-click empty space", "Fit the tree"),
         ("Right-click a node", "Pin, exclude, expand from, edit, copy"))


def shortcut_rows(actions: list[QAction]) -> list[tuple[str, str]]:
    """(keys, what) for every action with a shortcut, in menu order."""
    rows = []
    for a in actions:
        keys = a.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
        if keys:
            rows.append((keys, a.text().replace("&&", "\0").replace("&", "").replace("\0", "&")))
    return rows


class ShortcutsDialog(QDialog):
    def __init__(self, parent: QWidget | None, actions: list[QAction]) -> None:
        super().__init__(parent)
        self.setObjectName("shortcutsDialog")
        self.setWindowTitle("Keyboard shortcuts")
        rows = shortcut_rows(actions) + list(EXTRA)
        self.table = QTableWidget(len(rows), 2, self)
        self.table.setObjectName("shortcutsTable")
        self.table.setHorizontalHeaderLabels(["keys", "what it does"])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        for r, (keys, what) in enumerate(rows):
            self.table.setItem(r, 0, QTableWidgetItem(keys))
            self.table.setItem(r, 1, QTableWidgetItem(what))
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(self.table)
        lay.addWidget(buttons)
        self.resize(520, 560)
