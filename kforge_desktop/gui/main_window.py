"""The main window: docks, toolbar, menus, status bar; it wires the session, the controller and
the views together and holds no search state of its own (that lives in the session store).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QSettings, Qt, QTimer, QUrl
from PySide6.QtGui import QAction, QActionGroup, QDesktopServices, QIcon, QKeySequence
from PySide6.QtWidgets import (
    QComboBox,
    QDockWidget,
    QDoubleSpinBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QToolBar,
    QWidget,
)

from .. import paths
from ..search import events as ev
from .controller import SearchController, StartRequest
from .docks.code.widget import CodeWidget
from .docks.inspector.widget import InspectorWidget
from .docks.log.widget import LogWidget
from .docks.plot.widget import PlotWidget
from .docks.targets.widget import TargetsWidget
from .docks.tree.widget import TreeWidget
from .engine_factory import describe_choice
from .errors import install_excepthook, one_sentence, show_error
from .heap import HeapKeeper, release, settle
from .node_commands import NodeCommands
from .session_model import SessionModel
from .settings import LLMChoices, SearchChoices, Settings
from .theme import Theme

SESSION_SUFFIX = ".kforge"
EXAMPLE_PROBLEM = paths.RESOURCES / "problems" / "softmax.py"
ICON = paths.RESOURCES / "icons" / "kforge.svg"


def app_icon() -> QIcon:
    return QIcon(str(ICON)) if ICON.exists() else QIcon()


class MainWindow(QMainWindow):
    def __init__(self, settings: Settings | None = None, first_run: bool | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("mainWindow")
        self.setWindowTitle("Kernel Forge Desktop")
        self.setWindowIcon(app_icon())
        self.settings = settings or Settings()
        self.theme = Theme(self.settings.theme(), self)
        self.theme.apply()
        self.session = SessionModel(self)
        self.controller = SearchController(self)
        self.commands = NodeCommands(self)
        self.shown_errors: list[tuple[str, str]] = []  # what show_error displayed (tests read it)
        self.confirm: Callable[[str, str], bool] = self._confirm_dialog  # replaceable in tests
        self.dialog_hook: Callable[[object], None] | None = None  # tests fill dialogs instead of exec()
        self._closing = False
        self._env_note = ""
        self._model_job = None
        self._target_queue: list[int] = []  # problems still to search after this one ("all targets")
        self.setDockNestingEnabled(True)
        self.resize(1500, 940)

        self._build_docks()
        self._build_actions()
        self._build_toolbar()
        self._build_menus()
        self._build_banner()
        self._build_status_bar()
        self._default_state = self.saveState()
        self._restore_window()
        self._wire()
        self._update_actions()
        install_excepthook(lambda s, d: self.report(s, d, level="error", dialog=False))
        self._heap = HeapKeeper(lambda: not self.controller.running, self)
        if first_run is None:
            first_run = not self.settings.first_run_done()
        self.first_run = first_run

    # ------------------------------------------------------------------------------------------
    # construction
    # ------------------------------------------------------------------------------------------
    def _dock(self, name: str, title: str, widget: QWidget, area: Qt.DockWidgetArea) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(name)
        dock.setWidget(widget)
        dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable
                         | QDockWidget.DockWidgetFeature.DockWidgetFloatable
                         | QDockWidget.DockWidgetFeature.DockWidgetClosable)
        self.addDockWidget(area, dock)
        return dock

    def _build_docks(self) -> None:
        self.targets_widget = TargetsWidget(self.session, self)
        self.tree_widget = TreeWidget(self.session, self.theme, self.commands, self)
        self.plot_widget = PlotWidget(self.session, self.theme, self)
        self.code_widget = CodeWidget(self.session, self.theme, self)
        self.inspector_widget = InspectorWidget(self.session, self.theme, self)
        self.log_widget = LogWidget(self.session, self)
        L, R, B = (Qt.DockWidgetArea.LeftDockWidgetArea, Qt.DockWidgetArea.RightDockWidgetArea,
                   Qt.DockWidgetArea.BottomDockWidgetArea)
        self.targets_dock = self._dock("targetsDock", "Targets", self.targets_widget, L)
        self.tree_dock = self._dock("treeDock", "Search tree", self.tree_widget, L)
        self.code_dock = self._dock("codeDock", "Code && diff", self.code_widget, R)
        self.inspector_dock = self._dock("inspectorDock", "Inspector", self.inspector_widget, R)
        self.plot_dock = self._dock("plotDock", "Speedup plot", self.plot_widget, B)
        self.log_dock = self._dock("logDock", "Log", self.log_widget, B)
        self.splitDockWidget(self.targets_dock, self.tree_dock, Qt.Orientation.Vertical)
        self.splitDockWidget(self.code_dock, self.inspector_dock, Qt.Orientation.Vertical)
        self.splitDockWidget(self.plot_dock, self.log_dock, Qt.Orientation.Horizontal)
        self.docks = [self.targets_dock, self.tree_dock, self.plot_dock, self.code_dock,
                      self.inspector_dock, self.log_dock]
        self._size_docks()

    def _size_docks(self) -> None:
        w, h = max(self.width(), 1200), max(self.height(), 800)
        self.resizeDocks([self.tree_dock, self.code_dock], [int(w * 0.52), int(w * 0.48)], Qt.Orientation.Horizontal)
        self.resizeDocks([self.targets_dock, self.tree_dock], [90, int(h * 0.55)], Qt.Orientation.Vertical)
        self.resizeDocks([self.code_dock, self.inspector_dock], [int(h * 0.38), int(h * 0.25)], Qt.Orientation.Vertical)
        self.resizeDocks([self.plot_dock, self.log_dock], [int(w * 0.5), int(w * 0.5)], Qt.Orientation.Horizontal)
        self.resizeDocks([self.plot_dock], [int(h * 0.28)], Qt.Orientation.Vertical)

    def _action(self, name: str, text: str, slot, shortcut: str | QKeySequence.StandardKey | None = None,
                tip: str = "") -> QAction:
        a = QAction(text, self)
        a.setObjectName(name)
        if shortcut is not None:
            a.setShortcut(QKeySequence(shortcut))
        if tip:
            a.setToolTip(tip + (f" ({a.shortcut().toString()})" if shortcut is not None else ""))
            a.setStatusTip(tip)
        a.triggered.connect(lambda _checked=False: slot())
        self.addAction(a)
        return a

    def _build_actions(self) -> None:
        A = self._action
        self.act_new = A("actNew", "&New session…", self.new_session_dialog, QKeySequence.StandardKey.New,
                         "New session from a problem or model file")
        self.act_open = A("actOpen", "&Open session…", self.open_session_dialog, QKeySequence.StandardKey.Open,
                          "Open a saved session")
        self.act_example = A("actExample", "Open the bundled &example", self.open_example, None,
                             "Start a session on the bundled row-softmax example")
        self.act_close_session = A("actCloseSession", "&Close session", self.close_session, None)
        self.act_quit = A("actQuit", "&Quit", self.close, QKeySequence.StandardKey.Quit)
        self.act_start = A("actStart", "&Start", self.start_search, "Ctrl+R", "Start or continue the search")
        self.act_start_all = A("actStartAll", "Search &all targets", self.start_all_targets, "Ctrl+Shift+R",
                               "Search every target of a whole-model session in turn, each with its own budget")
        self.act_pause = A("actPause", "&Pause", self.toggle_pause, "Ctrl+P", "Pause or resume the search")
        self.act_stop = A("actStop", "S&top", self.stop_search, "Ctrl+.", "Stop the search (resume later)")
        self.act_llm = A("actLLM", "&Local model…", self.llm_dialog, "Ctrl+M", "Choose the local model and its settings")
        self.act_fit = A("actFit", "&Fit tree", self.tree_widget.view.fit, "F", "Fit the whole tree in view")
        self.act_find = A("actFind", "&Find node…", self._focus_find, QKeySequence.StandardKey.Find,
                          "Find a node by its number")
        self.act_pin = A("actPin", "Pin / unpin the selected node", self._pin_selected, "Ctrl+B",
                         "Pin the selected node as the chosen kernel (or unpin it)")
        self.act_copy = A("actCopy", "Copy the selected node's code", self._copy_selected, "Ctrl+Shift+C")
        self.act_edit = A("actEdit", "Edit the selected node as a new child…", self._edit_selected, "Ctrl+E")
        self.act_best = A("actBest", "Select the chosen node", self._select_best, "Ctrl+J",
                          "Select the pinned node, or the fastest correct one")
        self.act_reset_layout = A("actResetLayout", "&Reset layout", self.reset_layout, None,
                                  "Put every panel back where it started")
        self.act_tour = A("actTour", "&Tour", self.show_tour, "F1", "A short tour of the panels")
        self.act_tutorial = A("actTutorial", "T&utorial", self._open_tutorial, None)
        self.act_about = A("actAbout", "&About", self._about, None)

    def _build_toolbar(self) -> None:
        tb = QToolBar("Search", self)
        tb.setObjectName("mainToolbar")
        tb.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        tb.setMovable(False)
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, tb)
        tb.addAction(self.act_new)
        tb.addAction(self.act_open)
        tb.addSeparator()
        tb.addAction(self.act_start)
        tb.addAction(self.act_pause)
        tb.addAction(self.act_stop)
        tb.addSeparator()
        s = self.settings.search()
        tb.addWidget(QLabel(" Budget ", self))
        self.budget_spin = QSpinBox(self)
        self.budget_spin.setObjectName("budgetSpin")
        self.budget_spin.setRange(1, 100000)
        self.budget_spin.setValue(max(1, s.budget))
        self.budget_spin.setSuffix(" candidates")
        self.budget_spin.setToolTip("Candidates the search may evaluate for this problem (all runs together)")
        tb.addWidget(self.budget_spin)
        self.minutes_spin = QDoubleSpinBox(self)
        self.minutes_spin.setObjectName("minutesSpin")
        self.minutes_spin.setRange(0, 100000)
        self.minutes_spin.setDecimals(0)
        self.minutes_spin.setSpecialValueText("no time limit")
        self.minutes_spin.setSuffix(" min")
        self.minutes_spin.setValue(s.minutes)
        tb.addWidget(self.minutes_spin)
        tb.addWidget(QLabel("  Strategy ", self))
        self.strategy_box = QComboBox(self)
        self.strategy_box.setObjectName("strategyBox")
        for key, text in (("mcts", "MCTS"), ("greedy", "Greedy"), ("best-of-n", "Best-of-N")):
            self.strategy_box.addItem(text, key)
        self.strategy_box.setCurrentIndex(max(0, self.strategy_box.findData(s.strategy)))
        tb.addWidget(self.strategy_box)
        tb.addWidget(QLabel("  Device ", self))
        self.device_box = QComboBox(self)
        self.device_box.setObjectName("deviceBox")
        self.device_box.addItem("CPU", "cpu")
        if _cuda_available():
            self.device_box.addItem("CUDA GPU", "cuda")
        self.device_box.setCurrentIndex(max(0, self.device_box.findData(s.device)))
        tb.addWidget(self.device_box)
        tb.addSeparator()
        self.llm_button = QPushButton(self)
        self.llm_button.setObjectName("llmButton")
        self.llm_button.setFlat(True)
        self.llm_button.clicked.connect(self.llm_dialog)
        self.llm_button.setToolTip("The local model that writes kernels (click to change)")
        tb.addWidget(self.llm_button)
        self._update_llm_button()

    def _build_menus(self) -> None:
        mb = self.menuBar()
        m = mb.addMenu("&File")
        m.addAction(self.act_new)
        m.addAction(self.act_open)
        self.recent_menu = m.addMenu("Open &recent")
        self.recent_menu.setObjectName("recentMenu")
        self.recent_menu.aboutToShow.connect(self._fill_recent)
        m.addAction(self.act_example)
        m.addSeparator()
        m.addAction(self.act_close_session)
        m.addAction(self.act_quit)
        m = mb.addMenu("&Search")
        for a in (self.act_start, self.act_start_all, self.act_pause, self.act_stop):
            m.addAction(a)
        m.addSeparator()
        strat = m.addMenu("S&trategy")
        group = QActionGroup(self)
        for i in range(self.strategy_box.count()):
            a = strat.addAction(self.strategy_box.itemText(i))
            a.setCheckable(True)
            a.setChecked(i == self.strategy_box.currentIndex())
            group.addAction(a)
            a.triggered.connect(lambda _c=False, i=i: self.strategy_box.setCurrentIndex(i))
        m.addAction(self.act_llm)
        m = mb.addMenu("&Node")
        for a in (self.act_pin, self.act_edit, self.act_copy, self.act_best, self.act_find):
            m.addAction(a)
        m = mb.addMenu("&View")
        for d in self.docks:
            m.addAction(d.toggleViewAction())
        m.addSeparator()
        m.addAction(self.act_fit)
        theme = m.addMenu("&Theme")
        group = QActionGroup(self)
        for key, text in (("system", "Follow the system"), ("light", "Light"), ("dark", "Dark")):
            a = theme.addAction(text)
            a.setObjectName(f"theme_{key}")
            a.setCheckable(True)
            a.setChecked(self.theme.mode == key)
            group.addAction(a)
            a.triggered.connect(lambda _c=False, k=key: self.set_theme(k))
        m.addSeparator()
        m.addAction(self.act_reset_layout)
        m = mb.addMenu("&Help")
        m.addAction(self.act_tour)
        m.addAction(self.act_tutorial)
        m.addAction(self.act_about)

    def _build_banner(self) -> None:
        """A bar under the toolbar for things the user must know (another machine's verdicts)."""
        self.addToolBarBreak()
        bar = QToolBar("Notice", self)
        bar.setObjectName("noticeBar")
        bar.setMovable(False)
        box = QWidget(bar)
        lay = QHBoxLayout(box)
        lay.setContentsMargins(8, 2, 8, 2)
        self.banner_label = QLabel("", box)
        self.banner_label.setObjectName("bannerLabel")
        self.banner_label.setWordWrap(True)
        self.banner_action = QPushButton("Re-verify and re-time the chosen kernels", box)
        self.banner_action.setObjectName("bannerReverify")
        self.banner_action.clicked.connect(self.reverify_chosen)
        dismiss = QPushButton("Dismiss", box)
        dismiss.clicked.connect(lambda: self.banner.setVisible(False))
        lay.addWidget(self.banner_label, 1)
        lay.addWidget(self.banner_action)
        lay.addWidget(dismiss)
        bar.addWidget(box)
        box.setStyleSheet("QWidget { background: #fff4d6; color: #5c4400; } QPushButton { padding: 2px 8px; }")
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, bar)
        self.banner = bar
        bar.setVisible(False)

    def _build_status_bar(self) -> None:
        sb = self.statusBar()
        sb.setObjectName("statusBar")

        def label(name: str, tip: str) -> QLabel:
            lab = QLabel("", self)
            lab.setObjectName(name)
            lab.setToolTip(tip)
            sb.addPermanentWidget(lab)
            return lab

        self.phase_label = label("phaseLabel", "What the search is doing now")
        self.device_label = label("deviceLabel", "The device candidates are built and timed on")
        self.model_label = label("modelLabel", "The local model")
        self.tps_label = label("tokensLabel", "Tokens per second of the model")
        self.rate_label = label("rateLabel", "Candidates evaluated per minute")
        self.yield_label = label("yieldLabel", "How productive the model is on this problem: the share of its "
                                 "candidates that build and that are correct")
        self.progress_bar = QProgressBar(self)
        self.progress_bar.setObjectName("progressBar")
        self.progress_bar.setMaximumWidth(180)
        self.progress_bar.setTextVisible(True)
        self.progress_bar.setFormat("%v / %m")
        sb.addPermanentWidget(self.progress_bar)
        self.eta_label = label("etaLabel", "Estimated time to the end of the budget")
        self._update_status_labels()

    def _wire(self) -> None:
        c = self.controller
        self._refresh_timer = QTimer(self)
        self._refresh_timer.setSingleShot(True)
        self._refresh_timer.setInterval(100)
        self._refresh_timer.timeout.connect(self.session.refresh)
        c.nodesChanged.connect(lambda: self._refresh_timer.start() if not self._refresh_timer.isActive() else None)
        c.log.connect(self._engine_log)
        c.progress.connect(self._progress)
        c.tokens.connect(self._tokens)
        c.finished.connect(self._finished)
        c.failed.connect(lambda s, d: self.report(s, d, level="error"))
        c.runningChanged.connect(lambda _r: self._update_actions())
        c.pausedChanged.connect(lambda _p: self._update_actions())
        self.session.sessionChanged.connect(self._session_changed)
        self.session.problemsUpdated.connect(self._stored_progress)
        self.session.problemChanged.connect(lambda _p: self._stored_progress())
        self.session.problemChanged.connect(lambda _p: self._update_actions())
        self.session.selectionChanged.connect(self._selection_changed)
        self.budget_spin.valueChanged.connect(self._budget_changed)
        self.minutes_spin.valueChanged.connect(self._budget_changed)
        self.tree_widget.view.nodeActivated.connect(lambda nid: self.code_dock.raise_())

    # ------------------------------------------------------------------------------------------
    # sessions
    # ------------------------------------------------------------------------------------------
    def new_session_path(self, stem: str) -> Path:
        d = paths.sessions_dir()
        d.mkdir(parents=True, exist_ok=True)
        return d / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}{SESSION_SUFFIX}"

    def new_session_dialog(self) -> None:
        start = str(paths.RESOURCES / "problems")
        path, _ = QFileDialog.getOpenFileName(self, "New session from a problem or model file", start,
                                              "Python files (*.py);;All files (*)")
        if path:
            self.new_session(Path(path))

    def new_session(self, source: Path, session_path: Path | None = None) -> bool:
        """Create a session for a problem file (KernelBench) or a model file and open it."""
        if not self._can_leave_session():
            return False
        try:
            from ..modelopt.loader import is_model_file

            model = is_model_file(source)
        except Exception:
            model = False
        if model:
            return self._new_model_session(source, session_path)
        from ..problem.problem import ProblemError, load_problem
        from ..search.engine import create_session
        from ..store import SessionStore, StoreError

        try:
            problem = load_problem(source)
        except ProblemError as err:
            self.report(str(err), level="error")
            return False
        target = session_path or self.new_session_path(problem.name)
        try:
            store = SessionStore(target)
            create_session(store, problem, self._search_config())
        except (StoreError, OSError, ValueError) as err:
            self.report(f"Could not create the session {target}: {one_sentence(err)}", level="error")
            return False
        self._attach(store)
        self.log_widget.add("info", f"new session {target.name} for {problem.name}")
        return True

    def _new_model_session(self, source: Path, session_path: Path | None) -> bool:
        try:
            from ..modelopt import session as model_session  # type: ignore[attr-defined]
        except ImportError:
            self.report(f"{source.name} is a whole model; profile and optimize it with "
                        f"`kforge optimize {source}` (the window opens the session it writes).", level="warning")
            return False
        from .model_job import ModelSessionJob

        target = session_path or self.new_session_path(source.stem)
        job = ModelSessionJob(self, source, target, self._search_config(), model_session)
        return job.run()

    def open_session_dialog(self) -> None:
        start = str(paths.sessions_dir())
        path, _ = QFileDialog.getOpenFileName(self, "Open a session", start,
                                              f"Sessions (*{SESSION_SUFFIX} *.sqlite *.db);;All files (*)")
        if path:
            self.open_session(Path(path))

    def open_path(self, path: Path) -> bool:
        """A session file opens; a .py file (problem or model) starts a new session on it."""
        if path.suffix == ".py":
            return self.new_session(path)
        return self.open_session(path)

    def open_session(self, path: Path) -> bool:
        from ..store import SessionStore, StoreError

        if not self._can_leave_session():
            return False
        try:
            store = SessionStore.open(path)
        except StoreError as err:
            self.report(str(err), level="error")
            self.settings.remove_recent(str(path))
            return False
        self._attach(store)
        return True

    def open_example(self) -> bool:
        return self.new_session(EXAMPLE_PROBLEM)

    def _attach(self, store) -> None:
        old = self.session.store
        self.session.attach(store)
        if old is not None and old is not store:
            old.close()
        self.settings.add_recent(store.path)
        self._check_environment()
        settle()  # the session's records live long: keep full collections from pausing the window

    def close_session(self) -> None:
        if not self._can_leave_session():
            return
        store = self.session.store
        self.session.close()
        if store is not None:
            store.close()
        self.banner.setVisible(False)

    def _can_leave_session(self) -> bool:
        if not self.controller.running:
            return True
        if not self.confirm("A search is running", "Stop the running search? It can be resumed later."):
            return False
        self.controller.stop(wait_s=60)
        return not self.controller.running

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        items = self.settings.recent()
        if not items:
            a = self.recent_menu.addAction("(none yet)")
            a.setEnabled(False)
            return
        for p in items:
            a = self.recent_menu.addAction(p)
            a.triggered.connect(lambda _c=False, p=p: self.open_session(Path(p)))

    def _session_changed(self) -> None:
        store = self.session.store
        title = "Kernel Forge Desktop"
        if store is not None:
            title = f"{store.path.name} — {title}"
            state = self.session.problem_id and store.search_state(self.session.problem_id)
            if state:
                self._load_choices_from_state(state)
        self.setWindowTitle(title)
        self._update_actions()
        self._update_status_labels()

    def _load_choices_from_state(self, state) -> None:
        if state.budget_candidates:
            self.budget_spin.blockSignals(True)
            self.budget_spin.setValue(int(state.budget_candidates))
            self.budget_spin.blockSignals(False)
        idx = self.strategy_box.findData(state.strategy)
        if idx >= 0:
            self.strategy_box.setCurrentIndex(idx)

    def _check_environment(self) -> None:
        """Say so plainly when the session's verdicts were measured on another machine."""
        from ..search.engine import environment_differences, environment_record

        store = self.session.store
        saved = store.environment() if store else {}
        self._env_note = ""
        if not saved:
            self.banner.setVisible(False)
            return
        current = environment_record(saved.get("device", "cpu"))
        diff = environment_differences(saved, current)
        if saved.get("host") and current.get("host") and saved["host"] != current["host"] and not diff:
            diff = [f"host {saved['host']} -> {current['host']}"]
        if current.get("error"):
            diff = [f"this machine has no {saved.get('device', 'device')} ({current['error']})"]
        if not diff:
            self.banner.setVisible(False)
            return
        where = saved.get("device_name") or saved.get("device", "another machine")
        self._env_note = (f"This session was measured on {where} (torch {saved.get('torch', '?')}"
                          f"{', CUDA ' + saved['cuda'] if saved.get('cuda') else ''}); this machine differs: "
                          + "; ".join(diff) + ". Its timings may not hold here.")
        self.banner_label.setText(self._env_note)
        self.banner.setVisible(True)
        self.log_widget.add("warning", self._env_note)

    def reverify_chosen(self) -> None:
        """Re-check and re-time the chosen kernel of every problem on this machine."""
        from .reverify import Reverifier

        if self.session.store is None:
            return
        if self.controller.running:
            self.report("Stop the search before re-verifying its kernels.", level="warning")
            return
        self.banner_action.setEnabled(False)
        self._reverifier = Reverifier(self, self.session.store.path, self.device_box.currentData())
        self._reverifier.done.connect(self._reverified)
        self._reverifier.message.connect(lambda m: self.status_message(m))
        self._reverifier.start()

    def _reverified(self, summary: str, failed: bool) -> None:
        self.banner_action.setEnabled(True)
        self.session.refresh()
        self.log_widget.add("warning" if failed else "info", summary)
        self.status_message(summary)
        if not failed:
            self.banner.setVisible(False)

    # ------------------------------------------------------------------------------------------
    # the search
    # ------------------------------------------------------------------------------------------
    def _search_config(self, budget: int | None = None):
        from ..search.config import SearchConfig

        llm = self.settings.llm()
        minutes = self.minutes_spin.value()
        return SearchConfig(
            strategy=self.strategy_box.currentData(),
            budget_candidates=budget if budget is not None else self.budget_spin.value(),
            budget_minutes=minutes if minutes > 0 else None,
            device=self.device_box.currentData(),
            temperature=llm.temperature,
            max_tokens=llm.max_tokens,
            seed=self.settings.search().seed,
        )

    def _save_choices(self) -> None:
        self.settings.set_search(SearchChoices(
            budget=self.budget_spin.value(), minutes=self.minutes_spin.value(),
            strategy=self.strategy_box.currentData(), device=self.device_box.currentData(),
            seed=self.settings.search().seed,
        ))

    def start_search(self, first: list | None = None, evaluate_only: bool = False) -> bool:
        """Start (or continue) the current problem's search; ``first`` commands go in before it runs."""
        if self.controller.running:
            if self.controller.paused:
                self.controller.resume()
            return True
        if self.session.store is None and not self.open_example():
            return False
        store, pid = self.session.store, self.session.problem_id
        if store is None or pid is None:
            self.report("This session has no problem to search.", level="warning")
            return False
        budget = None
        if evaluate_only:  # just the queued hand-written child: the budget ends right after it
            counted = sum(1 for n in self.session.nodes().values()
                          if n.origin in ("llm", "user") and n.state in ("pending", "evaluating", "evaluated", "no_code"))
            budget = counted + 1
        config = self._search_config(budget)
        self._save_choices()
        request = StartRequest(store.path, pid, config, self.settings.llm(), needs_model=not evaluate_only)
        self.controller.start(request, store)
        for cmd in first or []:
            self.controller.send(cmd)
        self.log_widget.add("info", "search started" if not evaluate_only else "evaluating the hand-edited child")
        return True

    def start_all_targets(self) -> bool:
        """Search each target (problem) of the session in turn, biggest share first, each with the
        budget the session gave it; targets whose budget is spent are skipped."""
        store = self.session.store
        if store is None or self.controller.running:
            return False
        queue = []
        for row in self.targets_widget.model.rows or []:
            state = store.search_state(row.problem_id)
            budget = state.budget_candidates if state else None
            if budget is None or store.candidates_done(row.problem_id) < budget:
                queue.append(row.problem_id)
        if not queue:
            self.status_message("Every target has used its budget.")
            return False
        self._target_queue = queue[1:]
        self.session.set_problem(queue[0])
        return self._start_with_stored_budget()

    def _start_with_stored_budget(self) -> bool:
        state = self.session.store.search_state(self.session.problem_id)
        if state and state.budget_candidates:
            self.budget_spin.blockSignals(True)
            self.budget_spin.setValue(max(1, int(state.budget_candidates)))
            self.budget_spin.blockSignals(False)
        return self.start_search()

    def toggle_pause(self) -> None:
        if not self.controller.running:
            return
        if self.controller.paused:
            self.controller.resume()
        else:
            self.controller.pause()

    def stop_search(self) -> None:
        self._target_queue = []
        if self.controller.running:
            self.controller.stop()
            self.status_message("Stopping after the current step…")

    def _budget_changed(self) -> None:
        if self.controller.running:
            minutes = self.minutes_spin.value()
            self.controller.send(ev.SetBudget(self.budget_spin.value(), minutes if minutes > 0 else None))

    # ------------------------------------------------------------------------------------------
    # engine feedback
    # ------------------------------------------------------------------------------------------
    def _engine_log(self, level: str, message: str, detail: str) -> None:
        """The Log dock shows the session's stored history; what happens right now goes to the status bar."""
        self.log_widget.pull()
        self.status_message(message[:1].upper() + message[1:])
        if message.startswith("asking the model"):
            self.inspector_widget.live_reset(message)

    def _progress(self, p: ev.Progress) -> None:
        self.progress_bar.setMaximum(max(p.budget, p.done, 1))
        self.progress_bar.setValue(p.done)
        minutes = p.elapsed_s / 60.0
        rate = p.done / minutes if minutes > 0.05 and p.done else None
        self.rate_label.setText(f"{rate:.1f} cand/min" if rate else "")
        if p.tokens_per_s:
            self.tps_label.setText(f"{p.tokens_per_s:.1f} tok/s")
        if rate and p.budget > p.done:
            eta = (p.budget - p.done) / rate * 60
            self.eta_label.setText(f"ETA {_duration(eta)}")
        else:
            self.eta_label.setText("")
        phase = "paused" if self.controller.paused else (p.phase or "")
        best = f" · best {p.best_speedup:.2f}×" if p.best_speedup else ""
        self.phase_label.setText(f"{phase}{best}")

    def _update_yield(self, store, pid) -> None:
        """The model's productivity on this problem; amber, with the advice, when it is low."""
        prod = store.productivity(pid) if store is not None and pid is not None else None
        if prod is None or not prod.candidates:
            self.yield_label.setText("")
            self.yield_label.setStyleSheet("")
            return
        self.yield_label.setText(f"its kernels: {prod.correct}/{prod.candidates} correct "
                                 f"({100.0 * (prod.correct_rate or 0):.0f}%), {prod.built}/{prod.candidates} built")
        tip = prod.summary() + (f"\n{prod.suggestion}" if prod.suggestion else "")
        self.yield_label.setToolTip(tip)
        self.yield_label.setStyleSheet("QLabel { color: #b26a00; font-weight: bold; }" if prod.suggestion else "")

    def _stored_progress(self) -> None:
        """With no search running, the progress bar shows what the session holds."""
        if self.controller.running:
            self._update_yield(self.session.store, self.session.problem_id)
            return
        store, pid = self.session.store, self.session.problem_id
        if store is None or pid is None:
            self._update_yield(None, None)
            self.progress_bar.setMaximum(1)
            self.progress_bar.setValue(0)
            return
        done = store.candidates_done(pid)
        state = store.search_state(pid)
        self._update_yield(store, pid)
        budget = (state.budget_candidates if state else None) or self.budget_spin.value()
        self.progress_bar.setMaximum(max(budget, done, 1))
        self.progress_bar.setValue(done)

    def _tokens(self, text: str, tps) -> None:
        self.inspector_widget.live_append(text)
        if tps:
            self.tps_label.setText(f"{tps:.1f} tok/s")

    def _finished(self, f: ev.Finished) -> None:
        self.session.refresh()
        self.log_widget.pull()
        text = {"budget": "the budget is spent", "time": "the time is up", "stopped": "stopped",
                "error": "stopped on an error"}.get(f.reason, f.reason)
        best = f"; chosen node #{f.best_node_id}" if f.best_node_id is not None else ""
        self.status_message(f"Search finished: {text}{best}.")
        self.phase_label.setText(text)
        self.eta_label.setText("")
        if f.reason in ("budget", "time") and self._target_queue and not self._closing:
            nxt = self._target_queue.pop(0)
            QTimer.singleShot(0, lambda: self._next_target(nxt))
        else:
            self._target_queue = []

    def _next_target(self, problem_id: int) -> None:
        if self.controller.running:  # the previous engine thread is still winding down
            QTimer.singleShot(200, lambda: self._next_target(problem_id))
            return
        self.session.set_problem(problem_id)
        self._start_with_stored_budget()

    # ------------------------------------------------------------------------------------------
    # status, errors, small helpers
    # ------------------------------------------------------------------------------------------
    def status_message(self, text: str, ms: int = 8000) -> None:
        self.statusBar().showMessage(text, ms)

    def report(self, sentence: str, detail: str = "", level: str = "error", dialog: bool = True) -> None:
        """One sentence to the user (dialog for errors, status bar otherwise), details on demand."""
        self.log_widget.add(level, sentence, detail)
        self.status_message(sentence)
        if level == "error" and dialog and not self._closing:
            show_error(self, sentence, detail)

    def _confirm_dialog(self, title: str, text: str) -> bool:
        answer = QMessageBox.question(self, title, text, QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
                                      QMessageBox.StandardButton.No)
        return answer == QMessageBox.StandardButton.Yes

    def _update_actions(self) -> None:
        running = self.controller.running
        has = self.session.store is not None and self.session.problem_id is not None
        self.act_start.setEnabled(not running or self.controller.paused)
        self.act_start.setText("&Resume" if running and self.controller.paused else "&Start")
        self.act_pause.setEnabled(running)
        self.act_pause.setText("&Resume" if self.controller.paused else "&Pause")
        self.act_stop.setEnabled(running)
        self.act_close_session.setEnabled(has)
        self.act_start_all.setEnabled(not running and self.targets_widget.model.rowCount() > 1)
        self.strategy_box.setEnabled(not running)
        self.device_box.setEnabled(not running)
        self.act_llm.setEnabled(not running)
        self.llm_button.setEnabled(not running)
        if not running:
            self.phase_label.setText("idle" if has else "no session")

    def _update_status_labels(self) -> None:
        self.device_label.setText(f"device: {self.device_box.currentData()}")
        self.model_label.setText(f"model: {describe_choice(self.settings.llm())}")

    def _update_llm_button(self) -> None:
        self.llm_button.setText(f"Model: {describe_choice(self.settings.llm())}")

    def _selection_changed(self, node_id) -> None:
        n = self.session.light(node_id) if node_id is not None else None
        if n is not None:
            from .status import describe

            self.status_message(describe(n), 0)

    def llm_dialog(self) -> None:
        from .dialogs.llm import LLMDialog

        dlg = LLMDialog(self, self.settings.llm())
        if self.dialog_hook is not None:
            self.dialog_hook(dlg)
        elif dlg.exec() != LLMDialog.DialogCode.Accepted:
            return
        if dlg.result() != LLMDialog.DialogCode.Accepted:
            return
        choices: LLMChoices = dlg.choices()
        if choices.server_url:
            from ..llm.server_backend import check_url

            try:
                check_url(choices.server_url)
            except Exception as err:
                self.report(one_sentence(err), level="error")
                return
        self.settings.set_llm(choices)
        self._update_llm_button()
        self._update_status_labels()

    def set_theme(self, mode: str) -> None:
        self.settings.set_theme(mode)
        self.theme.set_mode(mode)

    def _focus_find(self) -> None:
        self.tree_dock.show()
        self.tree_dock.raise_()
        self.tree_widget.find_edit.setFocus()
        self.tree_widget.find_edit.selectAll()

    def _pin_selected(self) -> None:
        n = self.session.light(self.session.selected_id) if self.session.selected_id is not None else None
        if n is None:
            return
        if n.pinned:
            self.commands.unpin(n.id)
        else:
            self.commands.pin(n.id)

    def _copy_selected(self) -> None:
        if self.session.selected_id is not None:
            self.commands.copy_code(self.session.selected_id)

    def _edit_selected(self) -> None:
        if self.session.selected_id is not None:
            self.commands.edit_as_child(self.session.selected_id)

    def _select_best(self) -> None:
        nid = self.session.chosen_id()
        if nid is not None:
            self.tree_widget.find_node(nid)

    def reset_layout(self) -> None:
        for d in self.docks:
            d.setFloating(False)
            d.show()
        self.restoreState(self._default_state)
        self._size_docks()
        self.settings.clear_window()

    def show_tour(self) -> None:
        from .tour import Tour

        self._tour = Tour(self)
        self._tour.show()
        g = self.geometry()
        self._tour.move(g.center().x() - self._tour.width() // 2, g.top() + 120)

    def _open_tutorial(self) -> None:
        doc = paths.REPO_ROOT / "docs" / "tutorial.md"
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(doc)))

    def _about(self) -> None:
        from .. import __version__

        QMessageBox.about(self, "Kernel Forge Desktop",
                          f"<b>Kernel Forge Desktop</b> {__version__}<br>A local LLM writes kernels, a tree "
                          "search explores them, and every candidate is proven correct and timed in an isolated "
                          "process before you use it.")

    # ------------------------------------------------------------------------------------------
    # window state
    # ------------------------------------------------------------------------------------------
    def _restore_window(self) -> None:
        g = self.settings.geometry()
        if g is not None:
            self.restoreGeometry(g)
        s = self.settings.state()
        if s is not None:
            self.restoreState(s)

    def start_first_run(self) -> None:
        """The first launch: open the bundled example and show the tour."""
        if self.session.store is None:
            self.open_example()
        self.show_tour()
        self.settings.set_first_run_done(True)

    def close_without_asking(self) -> None:
        self.confirm = lambda *_a: True
        self.close()

    def closeEvent(self, event) -> None:
        if self.controller.running:
            if not self.confirm("Quit while searching?",
                                "A search is running. Stop it and quit? Nothing is lost: it can be resumed."):
                event.ignore()
                return
            self._closing = True
            self.status_message("Stopping the search…")
            if not self.controller.stop(wait_s=120):
                self.log_widget.add("warning", "the search did not stop in time; closing anyway")
        self._closing = True
        self.settings.save_window(self.saveGeometry(), self.saveState())
        self._save_choices()
        store = self.session.store
        self.session.close()
        if store is not None:
            store.close()
        self._heap.stop()
        release()  # give frozen objects back to the collector so the interpreter ends cleanly
        super().closeEvent(event)


def _duration(seconds: float) -> str:
    seconds = int(max(0, seconds))
    if seconds < 90:
        return f"{seconds} s"
    if seconds < 5400:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def _cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def settings_for_tests(folder: Path) -> Settings:
    """Settings stored in an ini file under ``folder`` (tests, screenshots, benchmarks)."""
    return Settings(QSettings(str(folder / "kforge-desktop.ini"), QSettings.Format.IniFormat))
