"""The window's chrome: the seven docks and where they start, the actions with their shortcuts, the
toolbar with the search choices, the menus and the notice banner (the status bar is ``status_line``).

It builds widgets and shows what it is told. What an action does is connected by the main window;
what the widgets say is decided by ``sessions`` and ``run_control``. One job: splitting the widgets of
one window frame further apart would scatter what a newcomer looks for together (which action, which
shortcut, which menu).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QAction, QActionGroup, QDesktopServices, QIcon, QKeySequence
from PySide6.QtWidgets import (
    QComboBox,
    QDockWidget,
    QDoubleSpinBox,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMenu,
    QMessageBox,
    QPushButton,
    QSpinBox,
    QToolBar,
    QWidget,
)

from ... import paths
from ..docks.candidates.widget import CandidatesWidget
from ..docks.code.widget import CodeWidget
from ..docks.inspector.widget import InspectorWidget
from ..docks.log.widget import LogWidget
from ..docks.plot.widget import PlotWidget
from ..docks.targets.widget import TargetsWidget
from ..docks.tree.actions import NodeCommandTarget
from ..docks.tree.widget import TreeWidget
from ..session_model import SessionModel
from ..settings import SearchChoices, Settings
from ..theme import Theme

ICON = paths.RESOURCES / "icons" / "kforge.svg"
STRATEGIES = (("mcts", "MCTS"), ("greedy", "Greedy"), ("best-of-n", "Best-of-N"))
THEMES = (("system", "Follow the system"), ("light", "Light"), ("dark", "Dark"))


def app_icon() -> QIcon:
    return QIcon(str(ICON)) if ICON.exists() else QIcon()


# ----------------------------------------------------------------------------------------------
# docks
# ----------------------------------------------------------------------------------------------
class Docks:
    """The seven panels: their widgets, their docks, where they start and how big they are. The
    candidate table shares the tree's place, as a tab beside it."""

    def __init__(self, win: QMainWindow, session: SessionModel, theme: Theme,
                 commands: NodeCommandTarget, settings: Settings | None = None) -> None:
        self._win = win
        self.targets_widget = TargetsWidget(session, win)
        self.tree_widget = TreeWidget(session, theme, commands, win)
        self.candidates_widget = CandidatesWidget(session, theme, win)
        self.plot_widget = PlotWidget(session, theme, win, settings=settings)
        self.code_widget = CodeWidget(session, theme, win, settings=settings)
        self.inspector_widget = InspectorWidget(session, theme, win)
        self.log_widget = LogWidget(session, win)
        L, R, B = (Qt.DockWidgetArea.LeftDockWidgetArea, Qt.DockWidgetArea.RightDockWidgetArea,
                   Qt.DockWidgetArea.BottomDockWidgetArea)
        self.targets_dock = self._dock("targetsDock", "Targets", self.targets_widget, L)
        self.tree_dock = self._dock("treeDock", "Search tree", self.tree_widget, L)
        self.candidates_dock = self._dock("candidatesDock", "Candidates", self.candidates_widget, L)
        self.code_dock = self._dock("codeDock", "Code && diff", self.code_widget, R)
        self.inspector_dock = self._dock("inspectorDock", "Inspector", self.inspector_widget, R)
        self.plot_dock = self._dock("plotDock", "Speedup plot", self.plot_widget, B)
        self.log_dock = self._dock("logDock", "Log", self.log_widget, B)
        win.splitDockWidget(self.targets_dock, self.tree_dock, Qt.Orientation.Vertical)
        win.splitDockWidget(self.code_dock, self.inspector_dock, Qt.Orientation.Vertical)
        win.splitDockWidget(self.plot_dock, self.log_dock, Qt.Orientation.Horizontal)
        win.tabifyDockWidget(self.tree_dock, self.candidates_dock)
        self.tree_dock.raise_()
        self.all = [self.targets_dock, self.tree_dock, self.candidates_dock, self.plot_dock, self.code_dock,
                    self.inspector_dock, self.log_dock]
        self.size()

    def _dock(self, name: str, title: str, widget: QWidget, area: Qt.DockWidgetArea) -> QDockWidget:
        dock = QDockWidget(title, self._win)
        dock.setObjectName(name)
        dock.setWidget(widget)
        dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable
                         | QDockWidget.DockWidgetFeature.DockWidgetFloatable
                         | QDockWidget.DockWidgetFeature.DockWidgetClosable)
        self._win.addDockWidget(area, dock)
        return dock

    def size(self) -> None:
        win = self._win
        w, h = max(win.width(), 1200), max(win.height(), 800)
        win.resizeDocks([self.tree_dock, self.code_dock], [int(w * 0.52), int(w * 0.48)], Qt.Orientation.Horizontal)
        win.resizeDocks([self.targets_dock, self.tree_dock], [90, int(h * 0.55)], Qt.Orientation.Vertical)
        win.resizeDocks([self.code_dock, self.inspector_dock], [int(h * 0.38), int(h * 0.25)],
                        Qt.Orientation.Vertical)
        win.resizeDocks([self.plot_dock, self.log_dock], [int(w * 0.5), int(w * 0.5)], Qt.Orientation.Horizontal)
        win.resizeDocks([self.plot_dock], [int(h * 0.28)], Qt.Orientation.Vertical)

    def dock_all(self) -> None:
        """Every panel shown and docked (the first half of "Reset layout")."""
        for d in self.all:
            d.setFloating(False)
            d.show()
        self.tree_dock.raise_()

    def focus_find(self) -> None:
        self.tree_dock.show()
        self.tree_dock.raise_()
        self.tree_widget.find_edit.setFocus()
        self.tree_widget.find_edit.selectAll()


# ----------------------------------------------------------------------------------------------
# actions, toolbar, menus
# ----------------------------------------------------------------------------------------------
def _action(parent: QWidget, name: str, text: str, shortcut: str | QKeySequence.StandardKey | None = None,
            tip: str = "") -> QAction:
    a = QAction(text, parent)
    a.setObjectName(name)
    if shortcut is not None:
        a.setShortcut(QKeySequence(shortcut))
    if tip:
        a.setToolTip(tip + (f" ({a.shortcut().toString()})" if shortcut is not None else ""))
        a.setStatusTip(tip)
    parent.addAction(a)
    return a


def on(action: QAction, slot: Callable[[], object]) -> None:
    """Run ``slot()`` when ``action`` is triggered (its checked flag is dropped)."""
    action.triggered.connect(lambda _checked=False: slot())


class Actions:
    """Every command of the menus, the toolbar and the shortcuts: name, text, shortcut and tip.
    The main window connects each to what it does (``on``)."""

    def __init__(self, parent: QWidget) -> None:
        def A(name: str, text: str, shortcut: str | QKeySequence.StandardKey | None = None,
              tip: str = "") -> QAction:
            return _action(parent, name, text, shortcut, tip)

        key = QKeySequence.StandardKey
        self.new = A("actNew", "&New session…", key.New, "New session from a problem or model file")
        self.open = A("actOpen", "&Open session…", key.Open, "Open a saved session")
        self.example = A("actExample", "Open the bundled &example", None,
                         "Start a session on the bundled row-softmax example")
        self.export = A("actExport", "&Export…", "Ctrl+Shift+E",
                        "Write the chosen kernels as kforge export does (a whole model: a package that "
                        "patches it; a problem: the chosen ModelNew module)")
        self.close_session = A("actCloseSession", "&Close session")
        self.quit = A("actQuit", "&Quit", key.Quit)
        self.start = A("actStart", "&Start", "Ctrl+R", "Start or continue the search")
        self.start_all = A("actStartAll", "Search &all targets", "Ctrl+Shift+R",
                           "Search every target of a whole-model session in turn, each with its own budget")
        self.pause = A("actPause", "&Pause", "Ctrl+P", "Pause or resume the search")
        self.retime = A("actRetime", "Re-&time the best nodes", None,
                        "Time the best nodes of each problem again, together with the reference, in one "
                        "worker with nothing else running; the chosen kernel is the fastest of that run")
        self.stop = A("actStop", "S&top", "Ctrl+.", "Stop the search (resume later)")
        self.llm = A("actLLM", "&Local model…", "Ctrl+M", "Choose the local model and its settings")
        self.fit = A("actFit", "&Fit tree", "F", "Fit the whole tree in view")
        self.find = A("actFind", "&Find node…", key.Find, "Find a node by its number")
        self.pin = A("actPin", "Pin / unpin the selected node", "Ctrl+B",
                     "Pin the selected node as the chosen kernel (or unpin it)")
        self.copy = A("actCopy", "Copy the selected node's code", "Ctrl+Shift+C")
        self.edit = A("actEdit", "Edit the selected node as a new child…", "Ctrl+E")
        self.best = A("actBest", "Select the chosen node", "Ctrl+J",
                      "Select the pinned node, or the fastest measured win")
        self.reset_layout = A("actResetLayout", "&Reset layout", None, "Put every panel back where it started")
        self.preferences = A("actPreferences", "&Preferences…", "Ctrl+,",
                             "Models folder, sessions folder, workers and threads")
        self.candidates = A("actCandidates", "Show the &candidate table", "Ctrl+T",
                            "Every node of this problem in a table sortable by time, speedup or status")
        self.shortcuts = A("actShortcuts", "&Keyboard shortcuts", "Ctrl+/", "Every shortcut of the window")
        self.tour = A("actTour", "&Tour", "F1", "A short tour of the panels")
        self.tutorial = A("actTutorial", "T&utorial")
        self.about = A("actAbout", "&About")


class SearchBar:
    """The toolbar: session and run actions, then the search choices (budget, time limit, strategy,
    device) and the button naming the local model."""

    def __init__(self, win: QMainWindow, actions: Actions, choices: SearchChoices) -> None:
        tb = QToolBar("Search", win)
        tb.setObjectName("mainToolbar")
        tb.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        tb.setMovable(False)
        win.addToolBar(Qt.ToolBarArea.TopToolBarArea, tb)
        tb.addAction(actions.new)
        tb.addAction(actions.open)
        tb.addSeparator()
        tb.addAction(actions.start)
        tb.addAction(actions.pause)
        tb.addAction(actions.stop)
        tb.addSeparator()
        tb.addWidget(QLabel(" Budget ", win))
        self.budget_spin = QSpinBox(win)
        self.budget_spin.setObjectName("budgetSpin")
        self.budget_spin.setRange(1, 100000)
        self.budget_spin.setValue(max(1, choices.budget))
        self.budget_spin.setSuffix(" candidates")
        self.budget_spin.setToolTip("Candidates the search may evaluate for this problem (all runs together)")
        tb.addWidget(self.budget_spin)
        self.minutes_spin = QDoubleSpinBox(win)
        self.minutes_spin.setObjectName("minutesSpin")
        self.minutes_spin.setRange(0, 100000)
        self.minutes_spin.setDecimals(0)
        self.minutes_spin.setSpecialValueText("no time limit")
        self.minutes_spin.setSuffix(" min")
        self.minutes_spin.setValue(choices.minutes)
        tb.addWidget(self.minutes_spin)
        tb.addWidget(QLabel("  Strategy ", win))
        self.strategy_box = QComboBox(win)
        self.strategy_box.setObjectName("strategyBox")
        for key, text in STRATEGIES:
            self.strategy_box.addItem(text, key)
        self.strategy_box.setCurrentIndex(max(0, self.strategy_box.findData(choices.strategy)))
        tb.addWidget(self.strategy_box)
        tb.addWidget(QLabel("  Device ", win))
        self.device_box = QComboBox(win)
        self.device_box.setObjectName("deviceBox")
        self.device_box.addItem("CPU", "cpu")
        if _cuda_available():
            self.device_box.addItem("CUDA GPU", "cuda")
        self.device_box.setCurrentIndex(max(0, self.device_box.findData(choices.device)))
        tb.addWidget(self.device_box)
        tb.addSeparator()
        self.llm_button = QPushButton(win)
        self.llm_button.setObjectName("llmButton")
        self.llm_button.setFlat(True)
        self.llm_button.setToolTip("The local model that writes kernels (click to change)")
        tb.addWidget(self.llm_button)

    def budget(self) -> int:
        return self.budget_spin.value()

    def time_limit(self) -> float | None:
        """Minutes the search may run, or None for no limit (the spin box's 0)."""
        minutes = self.minutes_spin.value()
        return minutes if minutes > 0 else None

    def strategy(self) -> str:
        return self.strategy_box.currentData()

    def device(self) -> str:
        return self.device_box.currentData()

    def set_budget_quietly(self, candidates: int) -> None:
        """Show a stored budget without sending it to a running search."""
        self.budget_spin.blockSignals(True)
        self.budget_spin.setValue(candidates)
        self.budget_spin.blockSignals(False)

    def set_strategy(self, key: str) -> None:
        idx = self.strategy_box.findData(key)
        if idx >= 0:
            self.strategy_box.setCurrentIndex(idx)

    def show_model(self, text: str) -> None:
        self.llm_button.setText(f"Model: {text}")

    def set_running(self, running: bool) -> None:
        """Strategy, device and model are fixed while a search runs; the budget is not."""
        self.strategy_box.setEnabled(not running)
        self.device_box.setEnabled(not running)
        self.llm_button.setEnabled(not running)


def build_menus(win: QMainWindow, actions: Actions, docks: Docks, strategy_box: QComboBox, theme_mode: str,
                set_theme: Callable[[str], None]) -> QMenu:
    """File, Search, Node, View and Help; returns the File menu's "Open recent" (filled on show)."""
    mb = win.menuBar()
    m = mb.addMenu("&File")
    m.addAction(actions.new)
    m.addAction(actions.open)
    recent = m.addMenu("Open &recent")
    recent.setObjectName("recentMenu")
    m.addAction(actions.example)
    m.addSeparator()
    m.addAction(actions.export)
    m.addSeparator()
    m.addAction(actions.close_session)
    m.addAction(actions.quit)
    m = mb.addMenu("&Edit")
    m.addAction(actions.preferences)
    m = mb.addMenu("&Search")
    for a in (actions.start, actions.start_all, actions.pause, actions.stop):
        m.addAction(a)
    m.addAction(actions.retime)
    m.addSeparator()
    strat = m.addMenu("S&trategy")
    group = QActionGroup(win)
    for i in range(strategy_box.count()):
        a = strat.addAction(strategy_box.itemText(i))
        a.setCheckable(True)
        a.setChecked(i == strategy_box.currentIndex())
        group.addAction(a)
        a.triggered.connect(lambda _c=False, i=i: strategy_box.setCurrentIndex(i))
    m.addAction(actions.llm)
    m = mb.addMenu("&Node")
    for a in (actions.pin, actions.edit, actions.copy, actions.best, actions.find):
        m.addAction(a)
    m = mb.addMenu("&View")
    for d in docks.all:
        m.addAction(d.toggleViewAction())
    m.addSeparator()
    m.addAction(actions.candidates)
    m.addAction(actions.fit)
    theme = m.addMenu("&Theme")
    group = QActionGroup(win)
    for key, text in THEMES:
        a = theme.addAction(text)
        a.setObjectName(f"theme_{key}")
        a.setCheckable(True)
        a.setChecked(theme_mode == key)
        group.addAction(a)
        a.triggered.connect(lambda _c=False, k=key: set_theme(k))
    m.addSeparator()
    m.addAction(actions.reset_layout)
    m = mb.addMenu("&Help")
    m.addAction(actions.tour)
    m.addAction(actions.shortcuts)
    m.addAction(actions.tutorial)
    m.addAction(actions.about)
    return recent


# ----------------------------------------------------------------------------------------------
# banner
# ----------------------------------------------------------------------------------------------
class Banner:
    """A bar under the toolbar for what the user must know (a session measured on another machine;
    why Start is off), with the one thing to do about it and a Dismiss button."""

    def __init__(self, win: QMainWindow, name: str = "notice",
                 action_text: str = "Re-verify and re-time the chosen kernels", dismiss: bool = True) -> None:
        win.addToolBarBreak()
        bar = QToolBar("Notice", win)
        bar.setObjectName(f"{name}Bar")
        bar.setMovable(False)
        box = QWidget(bar)
        lay = QHBoxLayout(box)
        lay.setContentsMargins(8, 2, 8, 2)
        self.label = QLabel("", box)
        self.label.setObjectName("bannerLabel" if name == "notice" else f"{name}Label")
        self.label.setWordWrap(True)
        self.action = QPushButton(action_text, box)
        self.action.setObjectName("bannerReverify" if name == "notice" else f"{name}Action")
        lay.addWidget(self.label, 1)
        lay.addWidget(self.action)
        if dismiss:
            close = QPushButton("Dismiss", box)
            close.clicked.connect(lambda: bar.setVisible(False))
            lay.addWidget(close)
        bar.addWidget(box)
        box.setStyleSheet("QWidget { background: #fff4d6; color: #5c4400; } QPushButton { padding: 2px 8px; }")
        win.addToolBar(Qt.ToolBarArea.TopToolBarArea, bar)
        self.bar = bar
        bar.setVisible(False)

    def show(self, text: str, with_action: bool = True) -> None:
        self.label.setText(text)
        self.action.setVisible(with_action)
        self.bar.setVisible(True)

    def hide(self) -> None:
        self.bar.setVisible(False)


# ----------------------------------------------------------------------------------------------
# help
# ----------------------------------------------------------------------------------------------
def open_tutorial() -> None:
    doc = paths.REPO_ROOT / "docs" / "tutorial.md"
    QDesktopServices.openUrl(QUrl.fromLocalFile(str(doc)))


def show_about(parent: QWidget) -> None:
    from ... import __version__

    QMessageBox.about(parent, "Kernel Forge Desktop",
                      f"<b>Kernel Forge Desktop</b> {__version__}<br>A local LLM writes kernels, a tree "
                      "search explores them, and every candidate is proven correct and timed in an isolated "
                      "process before you use it.")


def _cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False
