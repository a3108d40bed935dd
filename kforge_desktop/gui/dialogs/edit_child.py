"""Edit a candidate by hand and send it to be evaluated as a new child of that node.

The text is only edited here; it is built and run by the evaluator's worker processes, never in
the window's process.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QLineEdit,
    QVBoxLayout,
    QWidget,
)

from ..docks.code.editor import CodeEditor


class EditChildDialog(QDialog):
    def __init__(self, parent: QWidget | None, node_id: int, source: str, language: str = "cpp",
                 dark: bool = False) -> None:
        super().__init__(parent)
        self.setObjectName("editChildDialog")
        self.setWindowTitle(f"Edit node #{node_id} as a new child")
        self.resize(820, 640)
        info = QLabel(
            f"Change the candidate module below; it is evaluated like any other candidate (built, checked "
            f"and timed in a separate process) and appears in the tree as a hand-written child of #{node_id}.",
            self,
        )
        info.setWordWrap(True)
        self.editor = CodeEditor(f"module:{language}", dark, self)  # line numbers, highlighting
        self.editor.setObjectName("childSource")
        self.editor.set_text(source)
        self.note = QLineEdit(self)
        self.note.setObjectName("childNote")
        self.note.setPlaceholderText("What did you change? (optional)")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Evaluate as new child")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(info)
        lay.addWidget(self.editor, 1)
        lay.addWidget(self.note)
        lay.addWidget(buttons)

    def source(self) -> str:
        return self.editor.toPlainText()
