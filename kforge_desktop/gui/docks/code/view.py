"""A read-only code view: highlighted lines, per-line backgrounds and a line-number gutter.

The gutter labels are given per line (a diff shows old and new numbers, padding rows show none),
so copying a selection copies code, not numbers.
"""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontDatabase,
    QPainter,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
)
from PySide6.QtWidgets import QPlainTextEdit, QWidget

from .highlight import Line, token_style


def mono_font() -> QFont:
    f = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    f.setStyleHint(QFont.StyleHint.Monospace)
    return f


class _Gutter(QWidget):
    def __init__(self, view: CodeView) -> None:
        super().__init__(view)
        self._view = view

    def sizeHint(self) -> QSize:
        return QSize(self._view.gutter_width(), 0)

    def paintEvent(self, event) -> None:
        self._view.paint_gutter(self, event)


class CodeView(QPlainTextEdit):
    """Shows lines of (token type, text) with optional backgrounds and gutter labels."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setReadOnly(True)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.setFont(mono_font())
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse | Qt.TextInteractionFlag.TextSelectableByKeyboard)
        self._labels: list[str] = []
        self._dark = False
        self.is_message = False  # the view shows a note (set_message), not code
        self._gutter = _Gutter(self)
        self.blockCountChanged.connect(self._update_margins)
        self.updateRequest.connect(self._on_update_request)
        self._update_margins()

    # -- content -----------------------------------------------------------------------------
    def set_lines(
        self,
        lines: list[Line],
        dark: bool,
        backgrounds: list[str | None] | None = None,
        labels: list[str] | None = None,
    ) -> None:
        """Replace the content. ``backgrounds[i]`` colours line i; ``labels[i]`` is its gutter text."""
        self._dark = dark
        self.is_message = False
        self._labels = labels if labels is not None else [str(i + 1) for i in range(len(lines))]
        doc = self.document()
        self.setUpdatesEnabled(False)
        doc.clear()
        cursor = QTextCursor(doc)
        cursor.beginEditBlock()
        formats: dict[object, QTextCharFormat] = {}
        plain = QTextCharFormat()
        for i, line in enumerate(lines):
            bf = QTextBlockFormat()
            bg = backgrounds[i] if backgrounds else None
            if bg:
                bf.setBackground(QColor(bg))
            if i == 0:
                cursor.setBlockFormat(bf)
            else:
                cursor.insertBlock(bf, plain)
            for ttype, text in line:
                fmt = formats.get(ttype)
                if fmt is None:
                    fmt = formats[ttype] = self._char_format(ttype)
                cursor.insertText(text, fmt)
        cursor.endEditBlock()
        self.setUpdatesEnabled(True)
        self.moveCursor(QTextCursor.MoveOperation.Start)
        self._update_margins()

    def _char_format(self, ttype) -> QTextCharFormat:
        st = token_style(ttype, self._dark)
        fmt = QTextCharFormat()
        if st.color:
            fmt.setForeground(QColor(st.color))
        if st.bold:
            fmt.setFontWeight(QFont.Weight.Bold)
        if st.italic:
            fmt.setFontItalic(True)
        return fmt

    def set_message(self, text: str) -> None:
        """A plain note instead of code (nothing selected, no source), in the hint colour: never
        in the format of the code shown before it."""
        self._labels = []
        doc = self.document()
        doc.clear()
        cursor = QTextCursor(doc)
        cursor.setBlockFormat(QTextBlockFormat())
        hint = QTextCharFormat()
        hint.setForeground(self.palette().placeholderText().color())
        cursor.insertText(text, hint)
        self.setCurrentCharFormat(QTextCharFormat())
        self.is_message = True
        self._update_margins()

    # -- gutter ------------------------------------------------------------------------------
    def gutter_width(self) -> int:
        longest = max((len(s) for s in self._labels), default=0)
        if not longest:
            return 0
        return 10 + self.fontMetrics().horizontalAdvance("9" * longest)

    def _update_margins(self, *_a) -> None:
        self.setViewportMargins(self.gutter_width(), 0, 0, 0)

    def _on_update_request(self, rect: QRect, dy: int) -> None:
        if dy:
            self._gutter.scroll(0, dy)
        else:
            self._gutter.update(0, rect.y(), self._gutter.width(), rect.height())

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        cr = self.contentsRect()
        self._gutter.setGeometry(QRect(cr.left(), cr.top(), self.gutter_width(), cr.height()))

    def paint_gutter(self, widget: QWidget, event) -> None:
        painter = QPainter(widget)
        pal = self.palette()
        painter.fillRect(event.rect(), pal.alternateBase())
        painter.setPen(pal.placeholderText().color())
        painter.setFont(self.font())
        block = self.firstVisibleBlock()
        top = round(self.blockBoundingGeometry(block).translated(self.contentOffset()).top())
        height = self.fontMetrics().height()
        w = widget.width() - 5
        while block.isValid() and top <= event.rect().bottom():
            bottom = top + round(self.blockBoundingRect(block).height())
            n = block.blockNumber()
            if block.isVisible() and n < len(self._labels) and bottom >= event.rect().top():
                painter.drawText(0, top, w, height, Qt.AlignmentFlag.AlignRight, self._labels[n])
            block = block.next()
            top = bottom
        painter.end()
