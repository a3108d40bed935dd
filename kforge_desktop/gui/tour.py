"""The first-run tour: a few short steps that point at each panel and say what it is for.

It is a small non-modal panel, not a wizard: the app is usable while it is open, "Next" raises and
briefly outlines the panel being explained, and it can be reopened from Help.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDockWidget, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget


@dataclass(frozen=True)
class Step:
    dock: str  # objectName of the dock to point at ("" for none)
    title: str
    text: str


STEPS: tuple[Step, ...] = (
    Step("", "Welcome to Kernel Forge Desktop",
         "A local language model writes candidate kernels for one operation of your PyTorch program; "
         "a tree search decides which candidate to improve next; every candidate is built, checked "
         "against the original on fresh inputs and timed in a separate process. This tour takes a minute. "
         "The bundled example (row softmax) is open; press <b>Start</b> (Ctrl+R) to search."),
    Step("targetsDock", "Targets",
         "The problems of this session. For a whole model, one row per slow operator with its share of the "
         "runtime; choose a row to see its search."),
    Step("treeDock", "Search tree",
         "Every candidate is a node: green is faster than PyTorch beyond the measurement noise, blue correct "
         "without a measured win, orange incorrect, red a build error. The thick line leads to the chosen kernel. "
         "Scroll to zoom, drag to pan, right-click a node to pin it, exclude it, expand from it or edit it by hand. "
         "The Candidates tab beside it lists every node in a table that sorts by time, speedup or status."),
    Step("plotDock", "Speedup plot",
         "The best measured win so far, against kernels evaluated or time, with lines for PyTorch (1.0×) and "
         "torch.compile (the median of its readings). "
         "Click a point to select that candidate everywhere."),
    Step("codeDock", "Code and diff",
         "The selected candidate's kernel, highlighted, or its diff against its parent, the best, or any node."),
    Step("inspectorDock", "Inspector",
         "Why a candidate got its verdict: status, timings with their spread, errors against the reference, "
         "the build log, the optimisation it was asked for and the full exchange with the model."),
    Step("logDock", "Log",
         "What the search did, filterable. Errors are one sentence; select a line for the details."),
    Step("", "You are ready",
         "Pin the kernel you want (right-click → Pin): pins are what export uses. Help → Tour shows this again; "
         "docs/tutorial.md walks through a whole optimization."),
)


class Tour(QDialog):
    def __init__(self, window: QWidget) -> None:
        super().__init__(window)
        self.setObjectName("tour")
        self.setWindowTitle("Tour")
        self.setModal(False)
        self.setWindowFlag(Qt.WindowType.Tool, True)
        self.window_ = window
        self.index = 0
        self.title = QLabel(self)
        self.title.setObjectName("tourTitle")
        f = self.title.font()
        f.setPointSizeF(f.pointSizeF() * 1.25)
        f.setBold(True)
        self.title.setFont(f)
        self.text = QLabel(self)
        self.text.setObjectName("tourText")
        self.text.setWordWrap(True)
        self.text.setTextFormat(Qt.TextFormat.RichText)
        self.text.setMinimumWidth(380)
        self.counter = QLabel(self)
        self.back = QPushButton("Back", self)
        self.next = QPushButton("Next", self)
        self.next.setObjectName("tourNext")
        self.next.setDefault(True)
        self.close_button = QPushButton("Close", self)
        self.back.clicked.connect(lambda: self.go(self.index - 1))
        self.next.clicked.connect(self._next)
        self.close_button.clicked.connect(self.close)
        buttons = QHBoxLayout()
        buttons.addWidget(self.counter)
        buttons.addStretch(1)
        buttons.addWidget(self.close_button)
        buttons.addWidget(self.back)
        buttons.addWidget(self.next)
        lay = QVBoxLayout(self)
        lay.addWidget(self.title)
        lay.addWidget(self.text, 1)
        lay.addLayout(buttons)
        self._outlined: QDockWidget | None = None
        self.go(0)

    def _next(self) -> None:
        if self.index >= len(STEPS) - 1:
            self.close()
        else:
            self.go(self.index + 1)

    def go(self, i: int) -> None:
        self.index = max(0, min(len(STEPS) - 1, i))
        step = STEPS[self.index]
        self.title.setText(step.title)
        self.text.setText(step.text)
        self.counter.setText(f"{self.index + 1} / {len(STEPS)}")
        self.back.setEnabled(self.index > 0)
        self.next.setText("Done" if self.index == len(STEPS) - 1 else "Next")
        self._outline(step.dock)

    def _outline(self, name: str) -> None:
        if self._outlined is not None:
            self._outlined.setStyleSheet("")
            self._outlined = None
        if not name:
            return
        dock = self.window_.findChild(QDockWidget, name)
        if dock is None:
            return
        dock.show()
        dock.raise_()
        dock.setStyleSheet("QDockWidget { border: 2px solid #2f6fd0; } QDockWidget::title { background: #2f6fd0; color: white; }")
        self._outlined = dock

    def closeEvent(self, event) -> None:
        self._outline("")
        super().closeEvent(event)
