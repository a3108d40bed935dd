"""The main window: it puts together the chrome (``window/chrome``), the session lifecycle
(``window/sessions``) and run control (``window/run_control``), wires them to each other and to
the docks, and holds no search state of its own (that lives in the session store).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from PySide6.QtCore import QSettings, QSize
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QMainWindow, QMessageBox, QWidget

from .controller import SearchController
from .engine_factory import describe_choice
from .errors import install_excepthook, one_sentence, show_error
from .heap import HeapKeeper, release
from .node_commands import NodeCommands
from .preferences import apply_preferences
from .session_model import SessionModel
from .settings import LLMChoices, Settings
from .theme import Theme
from .window.chrome import (
    Actions,
    Banner,
    Docks,
    SearchBar,
    app_icon,
    build_menus,
    on,
    open_tutorial,
    show_about,
)
from .window.run_control import RunControl
from .window.sessions import TITLE, MachineNotice, Sessions
from .window.status_line import StatusLine
from .window.tools import Tools

# Room left on the screen for the window manager's title bar and borders: unknown until the window is shown.
FRAME_ALLOWANCE = QSize(16, 48)


class MainWindow(QMainWindow):
    def __init__(self, settings: Settings | None = None, first_run: bool | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("mainWindow")
        self.setWindowTitle(TITLE)
        self.setWindowIcon(app_icon())
        self.settings = settings or Settings()
        apply_preferences(self.settings.preferences())
        self.theme = Theme(self.settings.theme(), self)
        self.theme.apply()
        self.session = SessionModel(self)
        self.controller = SearchController(self)
        self.commands = NodeCommands(self)
        self.shown_errors: list[tuple[str, str]] = []  # what show_error displayed (tests read it)
        self.confirm: Callable[[str, str], bool] = self._confirm_dialog  # replaceable in tests
        self.dialog_hook: Callable[[object], None] | None = None  # tests fill dialogs instead of exec()
        self._closing = False
        self._model_job = None  # a whole-model session being profiled (model_job keeps itself here)
        self._export_job = None  # an export in progress (export_job keeps itself here)
        self.setDockNestingEnabled(True)
        self.resize(1500, 940)

        self._build_chrome()
        self._default_state = self.saveState()
        self._restore_window()
        self._fit_to_screen()
        self.run = RunControl(self.controller, self.session, self.settings, self.bar, self.status_line,
                              log=self.log_widget, inspector=self.inspector_widget,
                              targets=self.targets_widget.model, report=self.report,
                              open_example=self.open_example, closing=lambda: self._closing)
        self.notice = MachineNotice(self.session, self._banner, parent=self, log=self.log_widget,
                                    status=self.status_line, report=self.report)
        self.sessions = Sessions(self.session, self.settings, self.notice, parent=self, log=self.log_widget,
                                 report=self.report, may_leave=lambda: self.run.stop_before_leaving(self.confirm),
                                 search_config=self.run.search_config, profile_model=self._profile_model)
        self.tools = Tools(self, self.session, self.settings, report=self.report, dialog_hook=lambda: self.dialog_hook)
        self.run.changed = self._update_actions
        self.run.external_block = lambda: self.sessions.broken[1] if self.sessions.broken else ""
        self._connect_actions()
        self._wire()
        self._update_actions()
        install_excepthook(lambda s, d: self.report(s, d, level="error", dialog=False))
        self._heap = HeapKeeper(lambda: not self.controller.running, self)
        if first_run is None:
            first_run = not self.settings.first_run_done()
        self.first_run = first_run

    # ------------------------------------------------------------------------------------------
    # composition
    # ------------------------------------------------------------------------------------------
    def _build_chrome(self) -> None:
        self.panels = d = Docks(self, self.session, self.theme, self.commands, self.settings)
        self.targets_widget, self.tree_widget, self.plot_widget = d.targets_widget, d.tree_widget, d.plot_widget
        self.code_widget, self.inspector_widget, self.log_widget = d.code_widget, d.inspector_widget, d.log_widget
        self.targets_dock, self.tree_dock, self.plot_dock = d.targets_dock, d.tree_dock, d.plot_dock
        self.code_dock, self.inspector_dock, self.log_dock = d.code_dock, d.inspector_dock, d.log_dock
        self.candidates_widget, self.candidates_dock = d.candidates_widget, d.candidates_dock
        running = lambda: self.controller.running  # noqa: E731  (views word "not evaluated yet" by it)
        self.tree_widget.running = self.plot_widget.running = self.inspector_widget.running = running
        self.targets_widget.status_for = self._target_status
        self.docks = d.all
        self.acts = Actions(self)
        self.act_start, self.act_pause, self.act_stop = self.acts.start, self.acts.pause, self.acts.stop
        self.bar = SearchBar(self, self.acts, self.settings.search())
        self.budget_spin, self.llm_button = self.bar.budget_spin, self.bar.llm_button
        self._update_llm_button()
        self.recent_menu = build_menus(self, self.acts, d, self.bar.strategy_box, self.theme.mode, self.set_theme)
        self._banner = Banner(self)
        self.banner, self.banner_label, self.banner_action = (self._banner.bar, self._banner.label,
                                                              self._banner.action)
        self.start_banner = Banner(self, name="startBlock", action_text="Check the file again", dismiss=False)
        self.status_line = StatusLine(self)
        self.yield_label, self.model_label = self.status_line.yield_label, self.status_line.model_label
        self._update_status_labels()

    def _connect_actions(self) -> None:
        a = self.acts
        on(a.new, self.sessions.new_session_dialog)
        on(a.open, self.sessions.open_session_dialog)
        on(a.example, self.open_example)
        on(a.close_session, self.close_session)
        on(a.export, lambda: self.tools.export_dialog())
        on(a.retime, lambda: self.notice.reverify_chosen(self.bar.device(), self.controller.running, retime=True))
        on(a.preferences, lambda: self.tools.preferences_dialog())
        on(a.shortcuts, lambda: self.tools.shortcuts_dialog(self.actions()))
        on(a.candidates, self._show_candidates)
        on(a.quit, self.close)
        on(a.start, self.start_search)
        on(a.start_all, self.run.start_all_targets)
        on(a.pause, self.run.toggle_pause)
        on(a.stop, self.run.stop_search)
        on(a.llm, self.llm_dialog)
        on(a.fit, self.tree_widget.view.fit)
        on(a.find, self.panels.focus_find)
        on(a.pin, self._pin_selected)
        on(a.copy, self._copy_selected)
        on(a.edit, self._edit_selected)
        on(a.best, self._select_best)
        on(a.reset_layout, self.reset_layout)
        on(a.tour, self.show_tour)
        on(a.tutorial, open_tutorial)
        on(a.about, lambda: show_about(self))
        self.llm_button.clicked.connect(self.llm_dialog)
        self.banner_action.clicked.connect(self.reverify_chosen)
        self.start_banner.action.clicked.connect(lambda: self.sessions.check_broken_again())
        self.recent_menu.aboutToShow.connect(lambda: self.sessions.fill_recent(self.recent_menu))

    def _wire(self) -> None:
        c = self.controller
        c.runningChanged.connect(lambda _r: self._update_actions())
        c.pausedChanged.connect(lambda _p: self._update_actions())
        self.session.sessionChanged.connect(self._session_changed)
        self.session.problemsUpdated.connect(self.run.stored_progress)
        self.session.problemChanged.connect(lambda _p: self.run.stored_progress())
        self.session.problemChanged.connect(lambda _p: self._update_actions())
        self.session.selectionChanged.connect(self._selection_changed)
        self.sessions.signals.brokenChanged.connect(self._update_actions)
        self.tree_widget.view.nodeActivated.connect(lambda nid: self.code_dock.raise_())

    def _profile_model(self, source: Path, target: Path, config, module: ModuleType) -> bool:
        from .model_job import ModelSessionJob

        return ModelSessionJob(self, source, target, config, module).run()

    # ------------------------------------------------------------------------------------------
    # what others call: sessions and the search
    # ------------------------------------------------------------------------------------------
    def new_session(self, source: Path, session_path: Path | None = None) -> bool:
        return self.sessions.new_session(source, session_path)

    def open_session(self, path: Path) -> bool:
        return self.sessions.open_session(path)

    def open_path(self, path: Path) -> bool:
        return self.sessions.open_path(path)

    def open_example(self) -> bool:
        return self.sessions.open_example()

    def close_session(self) -> None:
        self.sessions.close_session()

    def reverify_chosen(self) -> None:
        self.notice.reverify_chosen(self.bar.device(), self.controller.running)

    def start_search(self, first: list | None = None, evaluate_only: bool = False) -> bool:
        return self.run.start_search(first, evaluate_only)

    # ------------------------------------------------------------------------------------------
    # status, errors, small helpers
    # ------------------------------------------------------------------------------------------
    def status_message(self, text: str, ms: int = 8000) -> None:
        self.status_line.message(text, ms)

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

    def _session_changed(self) -> None:
        """Another session: nothing said about the last one stays on screen (its choices are shown
        when its problem is, by run control)."""
        self.status_line.bar.clearMessage()
        self.setWindowTitle(self.sessions.title())
        self._update_actions()
        self._update_status_labels()

    def _update_actions(self) -> None:
        running, paused = self.controller.running, self.controller.paused
        has = self.session.store is not None and self.session.problem_id is not None
        blocked = self.run.blocked_reason()
        a = self.acts
        a.start.setEnabled((not running or paused) and not blocked)
        a.start.setText("&Resume" if running and paused else "&Start")
        a.start.setToolTip(blocked or "Start or continue the search (Ctrl+R)")
        a.export.setEnabled(has)
        a.retime.setEnabled(has and not running and not blocked)
        if blocked:
            self.start_banner.show(blocked, with_action=self.sessions.broken is not None)
        else:
            self.start_banner.hide()
        a.pause.setEnabled(running)
        a.pause.setText("&Resume" if paused else "&Pause")
        a.stop.setEnabled(running)
        a.close_session.setEnabled(has)
        a.start_all.setEnabled(not running and self.targets_widget.model.rowCount() > 1)
        a.llm.setEnabled(not running)
        self.bar.set_running(running)
        if not running:
            owner = self.run.owner
            if owner is not None:
                by = f"pid {owner.pid}" if owner.pid else "another process"
                self.status_line.show_phase_note(f"searched elsewhere ({by})", owner.sentence())
            elif blocked:
                self.status_line.show_phase_note("cannot start", blocked)
            else:
                self.status_line.show_phase_note("idle" if has else "no session", "")
        self.targets_widget.refresh()

    def _update_status_labels(self) -> None:
        self.status_line.show_choices(self.bar.device(), describe_choice(self.settings.llm()))

    def _update_llm_button(self) -> None:
        self.bar.show_model(describe_choice(self.settings.llm()))

    def _selection_changed(self, node_id) -> None:
        n = self.session.light(node_id) if node_id is not None else None
        if n is not None:
            from .status import describe

            self.status_message(describe(n, self.controller.running), 0)
        else:
            self.status_line.bar.clearMessage()

    def _target_status(self, problem_id: int, state) -> str:
        """The targets table's status: who runs the search, or that a run was killed."""
        from .ownership import session_owner

        status = state.status if state else "new"
        if status not in ("running", "paused") or self.controller.running:
            return status
        owner = session_owner(self.session.store, problem_id, False)
        if owner is None:
            return "interrupted"
        return f"{status} elsewhere" + (f" (pid {owner.pid})" if owner.pid else "")

    def _show_candidates(self) -> None:
        self.candidates_dock.show()
        self.candidates_dock.raise_()

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

    # ------------------------------------------------------------------------------------------
    # the Node menu acts on the selection
    # ------------------------------------------------------------------------------------------
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

    # ------------------------------------------------------------------------------------------
    # layout, tour, window state
    # ------------------------------------------------------------------------------------------
    def reset_layout(self) -> None:
        self.panels.dock_all()
        self.restoreState(self._default_state)
        self.panels.size()
        self.settings.clear_window()

    def show_tour(self) -> None:
        from .tour import Tour

        self._tour = Tour(self)
        self._tour.show()
        g = self.geometry()
        self._tour.move(g.center().x() - self._tour.width() // 2, g.top() + 120)

    def _restore_window(self) -> None:
        g = self.settings.geometry()
        if g is not None:
            self.restoreGeometry(g)
        s = self.settings.state()
        if s is not None:
            self.restoreState(s)

    def _fit_to_screen(self) -> None:
        """Keep the whole window on the screen it opens on: the default size, or one saved on a larger screen,
        may not fit a laptop's, and a window taller than the screen hides its status bar below the edge."""
        screen = QGuiApplication.screenAt(self.geometry().center()) or self.screen()
        if screen is None:
            return
        room = screen.availableGeometry().adjusted(0, 0, -FRAME_ALLOWANCE.width(), -FRAME_ALLOWANCE.height())
        size = self.size().boundedTo(room.size()).expandedTo(self.minimumSizeHint())
        if size != self.size():
            self.resize(size)
        g = self.geometry()
        if not room.contains(g):
            x = min(max(g.left(), room.left()), max(room.left(), room.right() - size.width() + 1))
            y = min(max(g.top(), room.top()), max(room.top(), room.bottom() - size.height() + 1))
            self.move(x, y)

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
        self.run.save_choices()
        self.sessions.detach()
        self._heap.stop()
        release()  # give frozen objects back to the collector so the interpreter ends cleanly
        super().closeEvent(event)


def settings_for_tests(folder: Path) -> Settings:
    """Settings stored in an ini file under ``folder`` (tests, screenshots, benchmarks)."""
    return Settings(QSettings(str(folder / "kforge-desktop.ini"), QSettings.Format.IniFormat))
