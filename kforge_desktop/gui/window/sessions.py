"""The window's session: create one from a problem or a model file, open a saved one, the recent
list, close it; and the notice shown when an opened session was measured on another machine, with
its "re-verify here".

A session is a file (the SQLite store); the window shows one at a time through its
``SessionModel``. Leaving it while a search runs asks first (``may_leave``, from run control).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from PySide6.QtWidgets import QFileDialog, QMenu, QWidget

from ... import paths
from ..docks.log.widget import LogWidget
from ..errors import one_sentence
from ..heap import settle
from ..session_model import SessionModel
from ..settings import Settings
from .chrome import Banner, StatusLine

SESSION_SUFFIX = ".kforge"
EXAMPLE_PROBLEM = paths.RESOURCES / "problems" / "softmax.py"
TITLE = "Kernel Forge Desktop"

Report = Callable[..., None]  # report(sentence, detail="", level="error", dialog=True)
ProfileModel = Callable[[Path, Path, object, ModuleType], bool]  # model file, session file, config, module


class MachineNotice:
    """Say so plainly when the session's verdicts were measured on another machine, and re-verify
    and re-time its chosen kernels here when asked (on a helper thread, never in this process's
    workers)."""

    def __init__(self, session: SessionModel, banner: Banner, *, parent: QWidget, log: LogWidget,
                 status: StatusLine, report: Report) -> None:
        self.session = session
        self.banner = banner
        self._parent = parent
        self._log = log
        self._status = status
        self._report = report
        self.note = ""
        self._reverifier = None

    def check(self) -> None:
        from ...search.engine import environment_differences, environment_record

        store = self.session.store
        saved = store.environment() if store else {}
        self.note = ""
        if not saved:
            self.banner.hide()
            return
        current = environment_record(saved.get("device", "cpu"))
        diff = environment_differences(saved, current)
        if saved.get("host") and current.get("host") and saved["host"] != current["host"] and not diff:
            diff = [f"host {saved['host']} -> {current['host']}"]
        if current.get("error"):
            diff = [f"this machine has no {saved.get('device', 'device')} ({current['error']})"]
        if not diff:
            self.banner.hide()
            return
        where = saved.get("device_name") or saved.get("device", "another machine")
        self.note = (f"This session was measured on {where} (torch {saved.get('torch', '?')}"
                     f"{', CUDA ' + saved['cuda'] if saved.get('cuda') else ''}); this machine differs: "
                     + "; ".join(diff) + ". Its timings may not hold here.")
        self.banner.show(self.note)
        self._log.add("warning", self.note)

    def hide(self) -> None:
        self.banner.hide()

    def reverify_chosen(self, device: str, searching: bool) -> None:
        """Re-check and re-time the chosen kernel of every problem on this machine."""
        from ..reverify import Reverifier

        if self.session.store is None:
            return
        if searching:
            self._report("Stop the search before re-verifying its kernels.", level="warning")
            return
        self.banner.action.setEnabled(False)
        self._reverifier = Reverifier(self._parent, self.session.store.path, device)
        self._reverifier.done.connect(self._reverified)
        self._reverifier.message.connect(lambda m: self._status.message(m))
        self._reverifier.start()

    def _reverified(self, summary: str, failed: bool) -> None:
        self.banner.action.setEnabled(True)
        self.session.refresh()
        self._log.add("warning" if failed else "info", summary)
        self._status.message(summary)
        if not failed:
            self.banner.hide()


class Sessions:
    """Create, open, switch and close the window's session."""

    def __init__(self, session: SessionModel, settings: Settings, notice: MachineNotice, *, parent: QWidget,
                 log: LogWidget, report: Report, may_leave: Callable[[], bool],
                 search_config: Callable[[], object], profile_model: ProfileModel) -> None:
        self.session = session
        self.settings = settings
        self.notice = notice
        self._parent = parent  # file dialogs are its children
        self._log = log
        self._report = report
        self._may_leave = may_leave
        self._search_config = search_config
        self._profile_model = profile_model

    def new_session_path(self, stem: str) -> Path:
        d = paths.sessions_dir()
        d.mkdir(parents=True, exist_ok=True)
        return d / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}{SESSION_SUFFIX}"

    def new_session_dialog(self) -> None:
        start = str(paths.RESOURCES / "problems")
        path, _ = QFileDialog.getOpenFileName(self._parent, "New session from a problem or model file", start,
                                              "Python files (*.py);;All files (*)")
        if path:
            self.new_session(Path(path))

    def new_session(self, source: Path, session_path: Path | None = None) -> bool:
        """Create a session for a problem file (KernelBench) or a model file and open it."""
        if not self._may_leave():
            return False
        from ...modelopt.loader import is_model_file

        if is_model_file(source):  # parsed, never run; an unreadable file is not a model file
            return self._new_model_session(source, session_path)
        from ...problem.problem import ProblemError, load_problem
        from ...search.engine import create_session
        from ...store import SessionStore, StoreError

        try:
            problem = load_problem(source)
        except ProblemError as err:
            self._report(str(err), level="error")
            return False
        target = session_path or self.new_session_path(problem.name)
        try:
            store = SessionStore(target)
            create_session(store, problem, self._search_config())
        except (StoreError, OSError, ValueError) as err:
            self._report(f"Could not create the session {target}: {one_sentence(err)}", level="error")
            return False
        self._attach(store)
        self._log.add("info", f"new session {target.name} for {problem.name}")
        return True

    def _new_model_session(self, source: Path, session_path: Path | None) -> bool:
        from ...modelopt import session as model_session

        target = session_path or self.new_session_path(source.stem)
        return self._profile_model(source, target, self._search_config(), model_session)

    def open_session_dialog(self) -> None:
        start = str(paths.sessions_dir())
        path, _ = QFileDialog.getOpenFileName(self._parent, "Open a session", start,
                                              f"Sessions (*{SESSION_SUFFIX} *.sqlite *.db);;All files (*)")
        if path:
            self.open_session(Path(path))

    def open_path(self, path: Path) -> bool:
        """A session file opens; a .py file (problem or model) starts a new session on it."""
        if path.suffix == ".py":
            return self.new_session(path)
        return self.open_session(path)

    def open_session(self, path: Path) -> bool:
        from ...store import SessionStore, StoreError

        if not self._may_leave():
            return False
        try:
            store = SessionStore.open(path)
        except StoreError as err:
            self._report(str(err), level="error")
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
        self.notice.check()
        settle()  # the session's records live long: keep full collections from pausing the window

    def close_session(self) -> None:
        if not self._may_leave():
            return
        self.detach()
        self.notice.hide()

    def detach(self) -> None:
        """Let go of the session and close its store (no question asked)."""
        store = self.session.store
        self.session.close()
        if store is not None:
            store.close()

    def fill_recent(self, menu: QMenu) -> None:
        menu.clear()
        items = self.settings.recent()
        if not items:
            a = menu.addAction("(none yet)")
            a.setEnabled(False)
            return
        for p in items:
            a = menu.addAction(p)
            a.triggered.connect(lambda _c=False, p=p: self.open_session(Path(p)))

    def title(self) -> str:
        store = self.session.store
        return f"{store.path.name} — {TITLE}" if store is not None else TITLE

    def search_state(self):
        """The current problem's stored search state (budget, strategy), if it has one."""
        store = self.session.store
        if store is None:
            return None
        return self.session.problem_id and store.search_state(self.session.problem_id)
