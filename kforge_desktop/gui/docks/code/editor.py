"""An editable code view with line numbers and the same pygments highlighting as the read-only
views (a candidate module: Python with its C++/CUDA kernel string lexed as C++/CUDA).

The whole text is lexed again a moment after the user stops typing (lexing per line would get
multi-line strings and comments wrong); the highlighter then paints each block from those lines.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QSyntaxHighlighter, QTextCharFormat, QTextDocument
from PySide6.QtWidgets import QWidget

from .highlight import Line, highlight_lines
from .view import CodeView


class _Highlighter(QSyntaxHighlighter):
    def __init__(self, doc: QTextDocument, editor: CodeEditor) -> None:
        super().__init__(doc)
        self._editor = editor
        self.lines: list[Line] = []

    def highlightBlock(self, text: str) -> None:
        n = self.currentBlock().blockNumber()
        if n >= len(self.lines):
            return
        pos = 0
        for ttype, part in self.lines[n]:
            if pos >= len(text):
                break
            fmt: QTextCharFormat = self._editor._char_format(ttype)
            self.setFormat(pos, min(len(part), len(text) - pos), fmt)
            pos += len(part)


class CodeEditor(CodeView):
    """``CodeView`` made editable: line numbers follow the text, highlighting follows the edits."""

    RELEX_MS = 250

    def __init__(self, language: str = "module:cpp", dark: bool = False, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setReadOnly(False)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextEditorInteraction)
        self.language = language
        self._dark = dark
        self._lexed = None
        self._highlighter = _Highlighter(self.document(), self)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(self.RELEX_MS)
        self._timer.timeout.connect(self.relex)
        self.textChanged.connect(self._timer.start)

    def set_text(self, text: str) -> None:
        self.setPlainText(text)
        self.relex()

    def relex(self) -> None:
        text = self.toPlainText()
        if text == self._lexed:
            return
        self._lexed = text
        self._highlighter.lines = highlight_lines(text, self.language)
        self._highlighter.rehighlight()

    def _update_margins(self, *_a) -> None:
        self._labels = [str(i + 1) for i in range(self.blockCount())]
        super()._update_margins()
