"""The Code & diff dock: the selected candidate's kernel or whole module, highlighted, or its diff
against the parent, the best node or any node (unified or side by side).

Sources are shown as text only; nothing here imports or runs a candidate. The header line is
elided to the width it has (its full text is the tooltip): what it says must never widen the
dock, or the tree beside it would move under the mouse between two clicks. The chosen modes
(kernel/module, diff target, layout) are remembered between runs.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QIntValidator
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLineEdit,
    QSplitter,
    QStackedWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ....search.events import NodeRecord
from ...session_model import SessionModel
from ...theme import Theme
from ...widgets import ElidedLabel
from .diff import side_rows, stats, unified_rows
from .highlight import highlight_lines, language_of
from .view import CodeView

COMPARE = (("none", "No diff"), ("parent", "Diff vs parent"), ("best", "Diff vs best"), ("node", "Diff vs node #"))
WHOLE_NOTE = "whole modules"
WHOLE_TIP = "The reference is a PyTorch program with no kernel, so the whole modules are compared."


class CodeWidget(QWidget):
    def __init__(self, session: SessionModel, theme: Theme, parent: QWidget | None = None,
                 settings=None) -> None:
        super().__init__(parent)
        self.session = session
        self.theme = theme
        self._settings = settings  # gui.settings.Settings: the modes are remembered there

        self.what = QComboBox(self)
        self.what.setObjectName("codeWhat")
        self.what.addItem("Kernel", "kernel")
        self.what.addItem("Whole module", "module")
        self.what.setToolTip("The kernel the LLM wrote, or the whole candidate module (ModelNew)")
        self.compare = QComboBox(self)
        self.compare.setObjectName("codeCompare")
        for key, text in COMPARE:
            self.compare.addItem(text, key)
        self.other_edit = QLineEdit(self)
        self.other_edit.setObjectName("codeOtherNode")
        self.other_edit.setPlaceholderText("node #")
        self.other_edit.setValidator(QIntValidator(0, 2**31 - 1, self))
        self.other_edit.setMaximumWidth(80)
        self.other_edit.setVisible(False)
        self.layout_box = QComboBox(self)
        self.layout_box.setObjectName("codeLayout")
        self.layout_box.addItem("Unified", "unified")
        self.layout_box.addItem("Side by side", "side")
        self.stats_label = ElidedLabel(self)
        self.stats_label.setObjectName("codeStats")
        self.copy_button = QToolButton(self)
        self.copy_button.setText("Copy")
        self.copy_button.setToolTip("Copy the shown source (the whole module when 'Whole module' is chosen)")
        self.copy_button.setAutoRaise(True)
        self.copy_button.clicked.connect(self.copy)

        bar = QHBoxLayout()
        bar.setContentsMargins(4, 2, 4, 2)
        for w in (self.what, self.compare, self.other_edit, self.layout_box):
            bar.addWidget(w)
        bar.addWidget(self.stats_label, 1)
        bar.addWidget(self.copy_button)

        self.single = CodeView(self)
        self.single.setObjectName("codeView")
        self.left = CodeView(self)
        self.left.setObjectName("diffLeft")
        self.right = CodeView(self)
        self.right.setObjectName("diffRight")
        self.split = QSplitter(Qt.Orientation.Horizontal, self)
        self.split.addWidget(self.left)
        self.split.addWidget(self.right)
        self.left.verticalScrollBar().valueChanged.connect(self.right.verticalScrollBar().setValue)
        self.right.verticalScrollBar().valueChanged.connect(self.left.verticalScrollBar().setValue)
        self.left.horizontalScrollBar().valueChanged.connect(self.right.horizontalScrollBar().setValue)
        self.right.horizontalScrollBar().valueChanged.connect(self.left.horizontalScrollBar().setValue)
        self.stack = QStackedWidget(self)
        self.stack.addWidget(self.single)
        self.stack.addWidget(self.split)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addLayout(bar)
        lay.addWidget(self.stack, 1)

        self._restore_modes()
        self.what.currentIndexChanged.connect(self._modes_changed)
        self.compare.currentIndexChanged.connect(self._compare_changed)
        self.layout_box.currentIndexChanged.connect(self._modes_changed)
        self.other_edit.editingFinished.connect(self.refresh)
        session.selectionChanged.connect(self.refresh)
        session.sessionChanged.connect(self._session_changed)
        session.nodesUpdated.connect(self._nodes_updated)
        theme.changed.connect(self.refresh)
        self.node: NodeRecord | None = None
        self.other: NodeRecord | None = None
        self.refresh()

    # -- choices -----------------------------------------------------------------------------
    def set_compare(self, key: str, other_id: int | None = None) -> None:
        idx = self.compare.findData(key)
        if idx >= 0:
            if other_id is not None:
                self.other_edit.setText(str(other_id))
            self.compare.setCurrentIndex(idx)
            self.refresh()

    def set_layout(self, key: str) -> None:
        idx = self.layout_box.findData(key)
        if idx >= 0:
            self.layout_box.setCurrentIndex(idx)

    def _compare_changed(self) -> None:
        self.other_edit.setVisible(self.compare.currentData() == "node")
        self.layout_box.setEnabled(self.compare.currentData() != "none")
        self._modes_changed()

    MODES = (("code_what", "what"), ("code_compare", "compare"), ("code_layout", "layout_box"))

    def _restore_modes(self) -> None:
        if self._settings is None:
            return
        for key, attr in self.MODES:
            box: QComboBox = getattr(self, attr)
            idx = box.findData(self._settings.view_mode(key, box.currentData()))
            if idx >= 0:
                box.setCurrentIndex(idx)
        if self.compare.currentData() == "node":  # a node number belongs to one session: not kept
            self.compare.setCurrentIndex(self.compare.findData("none"))
        self.layout_box.setEnabled(self.compare.currentData() != "none")

    def _modes_changed(self) -> None:
        if self._settings is not None:
            for key, attr in self.MODES:
                self._settings.set_view_mode(key, getattr(self, attr).currentData())
        self.refresh()

    def _session_changed(self) -> None:
        """Another session: node numbers typed for the last one mean nothing here."""
        self.other_edit.clear()
        self.refresh()

    def _nodes_updated(self, ids: list) -> None:
        if self.session.selected_id in ids or self.compare.currentData() == "best":
            self.refresh()

    # -- content -----------------------------------------------------------------------------
    def _text(self, node: NodeRecord, module: bool = False) -> tuple[str, str]:
        if module or self.what.currentData() == "module" or not node.kernel_source:
            if node.origin == "root":
                return node.source, "python"
            return node.source, f"module:{node.language}"
        return node.kernel_source, language_of(node.language)

    def _other_node(self, node: NodeRecord) -> tuple[NodeRecord | None, str]:
        key = self.compare.currentData()
        if key == "parent":
            if node.parent_id is None:
                return None, "This node has no parent."
            return self.session.node(node.parent_id), ""
        if key == "best":
            best = self.session.chosen_id()
            if best is None:
                return None, "No correct candidate yet to compare with."
            return self.session.node(best), ""
        if key == "node":
            text = self.other_edit.text().strip()
            if not text.isdigit():
                return None, "Type a node number to compare with."
            other = self.session.node(int(text))
            if other is None or other.problem_id != node.problem_id:
                return None, f"There is no node #{text} in this problem."
            return other, ""
        return None, ""

    def refresh(self, *_a) -> None:
        dark = self.theme.dark
        node = self.session.node(self.session.selected_id)
        self.node = node
        self.other = None
        if node is None:
            self.stack.setCurrentWidget(self.single)
            self.single.set_message("Select a node in the tree or the plot to see its code.")
            self.stats_label.setText("")
            return
        text, lang = self._text(node)
        if self.compare.currentData() == "none":
            self._show_code(text, lang, dark)
            self.stats_label.setText(f"#{node.id} · {text.count(chr(10)) + 1} lines")
            return
        other, why = self._other_node(node)
        if other is None:
            self._show_code(text, lang, dark)
            self.stats_label.setText(why)
            return
        self.other = other
        # the reference (root) has no kernel: compare whole modules then, not C++ with Python
        whole = "root" in (other.origin, node.origin) and self.what.currentData() != "module"
        if whole:
            text, lang = self._text(node, module=True)
        old_text, old_lang = self._text(other, module=whole)
        old = old_text.splitlines()
        new = text.splitlines()
        st = stats(old, new)
        note = f" · {WHOLE_NOTE}" if whole else ""
        self.stats_label.setText(f"#{other.id} → #{node.id}  {st}{note}")
        if whole:
            self.stats_label.setToolTip(f"#{other.id} → #{node.id}  {st}. {WHOLE_TIP}")
        old_hl = highlight_lines(old_text, old_lang)
        new_hl = highlight_lines(text, lang)
        colors = self.theme.diff_colors()
        if self.layout_box.currentData() == "side":
            self._show_side(old, new, old_hl, new_hl, colors, dark, other.id, node.id)
        else:
            self._show_unified(old, new, old_hl, new_hl, colors, dark)

    def _show_code(self, text: str, lang: str, dark: bool) -> None:
        self.stack.setCurrentWidget(self.single)
        if not text:
            self.single.set_message("This node has no source (the answer held no usable code).")
            return
        self.single.set_lines(highlight_lines(text, lang), dark)

    def _show_unified(self, old, new, old_hl, new_hl, colors, dark) -> None:
        from pygments.token import Token

        self.stack.setCurrentWidget(self.single)
        rows = unified_rows(old, new)
        if not rows:
            self.single.set_message("The two sources are identical.")
            return
        lines, bgs, labels = [], [], []
        for r in rows:
            if r.kind == "hunk":
                lines.append([(Token.Generic.Subheading, r.header)])
                bgs.append(colors["hunk"])
                labels.append("")
            elif r.kind == "delete":
                lines.append([(Token.Generic.Deleted, "-")] + list(old_hl[r.old_no]))
                bgs.append(colors["delete"])
                labels.append(f"{r.old_no + 1}")
            elif r.kind == "insert":
                lines.append([(Token.Generic.Inserted, "+")] + list(new_hl[r.new_no]))
                bgs.append(colors["insert"])
                labels.append(f"{r.new_no + 1}")
            else:
                lines.append([(Token.Text, " ")] + list(new_hl[r.new_no]))
                bgs.append(None)
                labels.append(f"{r.new_no + 1}")
        self.single.set_lines(lines, dark, bgs, labels)

    def _show_side(self, old, new, old_hl, new_hl, colors, dark, old_id: int, new_id: int) -> None:
        self.stack.setCurrentWidget(self.split)
        rows = side_rows(old, new)
        l_lines, l_bg, l_lab, r_lines, r_bg, r_lab = [], [], [], [], [], []
        for r in rows:
            if r.left is None:
                l_lines.append([])
                l_bg.append(colors["pad"])
                l_lab.append("")
            else:
                l_lines.append(old_hl[r.left])
                l_bg.append(colors["delete"] if r.kind in ("delete", "replace") else None)
                l_lab.append(str(r.left + 1))
            if r.right is None:
                r_lines.append([])
                r_bg.append(colors["pad"])
                r_lab.append("")
            else:
                r_lines.append(new_hl[r.right])
                r_bg.append(colors["insert"] if r.kind in ("insert", "replace") else None)
                r_lab.append(str(r.right + 1))
        self.left.set_lines(l_lines, dark, l_bg, l_lab)
        self.right.set_lines(r_lines, dark, r_bg, r_lab)
        self.left.setToolTip(f"#{old_id}")
        self.right.setToolTip(f"#{new_id}")

    def copy(self) -> None:
        node = self.node
        if node is None:
            return
        text = node.source if self.what.currentData() == "module" else (node.kernel_source or node.source)
        QGuiApplication.clipboard().setText(text)
