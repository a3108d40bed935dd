"""The window's session: create one from a problem or a model file, open a saved one, the recent
list, close it; and the notice shown when an opened session was measured on another machine, with
its "re-verify here".

A session is a file (the SQLite store); the window shows one at a time through its
``SessionModel``. Leaving it while a search runs asks first (``may_leave``, from run control).
Opening a ``.py`` for which a session already exists asks before writing another session file; a
problem file that cannot be searched (its ``get_inputs()`` raises, say) is refused with one
sentence, and the window keeps Start off and watches the file until it is fixed. The recent list
names each session by its problems, its progress and its status, not by its path.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from PySide6.QtCore import QFileSystemWatcher, QObject, Signal
from PySide6.QtWidgets import QFileDialog, QMenu, QMessageBox, QWidget

from ... import paths
from ..docks.log.widget import LogWidget
from ..errors import one_sentence
from ..heap import settle
from ..session_model import SessionModel
from ..settings import Settings
from .chrome import Banner
from .status_line import StatusLine

SESSION_SUFFIX = ".kforge"
EXAMPLE_PROBLEM = paths.RESOURCES / "problems" / "softmax.py"
TITLE = "Kernel Forge Desktop"

Report = Callable[..., None]  # report(sentence, detail="", level="error", dialog=True)
ProfileModel = Callable[[Path, Path, object, ModuleType], bool]  # model file, session file, config, module
ChooseExisting = Callable[[Path, list[Path]], str]  # source, its sessions -> "open" | "new" | "cancel"


@dataclass(frozen=True)
class SessionSummary:
    """A session file as the recent list names it."""

    path: Path
    name: str  # the problem, or the model and its target count
    detail: str  # candidates, best win, status
    when: float  # last change (the file's)
    exists: bool = True

    def label(self) -> str:
        if not self.exists:
            return f"{self.name} (missing)"
        stamp = time.strftime("%d %b %H:%M", time.localtime(self.when))
        return f"{self.name} — {self.detail} · {stamp}"


def session_summary(path: Path) -> SessionSummary:
    """What a session holds, read from its file (problems, candidates, best win, search status)."""
    from ...modelopt.session import is_model_session, model_meta
    from ...store import SessionStore, StoreError
    from ..counts import count
    from ..status import is_win

    path = Path(path)
    if not path.exists():
        return SessionSummary(path, path.stem, "", 0.0, exists=False)
    when = max(p.stat().st_mtime for p in (path, Path(f"{path}-wal")) if p.exists())
    try:
        store = SessionStore.open(path)
    except StoreError:
        return SessionSummary(path, path.stem, "not a session file", when)
    try:
        problems = store.problems()
        candidates, best, statuses = 0, None, []
        for p in problems:
            nodes = store.nodes(p.id, with_source=False)
            candidates += count(nodes).candidates
            wins = [n.speedup for n in nodes if is_win(n)]
            if wins and (best is None or max(wins) > best):
                best = max(wins)
            state = store.search_state(p.id)
            statuses.append(state.status if state else "new")
        if is_model_session(store):
            name = f"{model_meta(store).get('model_name', path.stem)} (model, {len(problems)} targets)"
        else:
            name = ", ".join(p.name for p in problems) or path.stem
    finally:
        store.close()
    status = next((s for s in ("running", "paused", "stopped", "finished", "new") if s in statuses), "new")
    win = f", best win {best:.2f}×" if best else ""
    return SessionSummary(path, name, f"{candidates} candidates{win} · {status}", when)


def sessions_for(source: Path, candidates: list[Path]) -> list[Path]:
    """The session files among ``candidates`` made from ``source`` (a problem or model file)."""
    from ...modelopt.session import is_model_session, model_meta
    from ...store import SessionStore, StoreError

    want = source.resolve()
    found = []
    for path in candidates:
        try:
            store = SessionStore.open(path)
        except (StoreError, OSError):
            continue
        try:
            if is_model_session(store):
                paths_ = [model_meta(store).get("model_path")]
            else:
                paths_ = [p.path for p in store.problems()]
            if any(p and Path(p).resolve() == want for p in paths_):
                found.append(path)
        finally:
            store.close()
    return found

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

    def reverify_chosen(self, device: str, searching: bool, retime: bool = False) -> None:
        """Re-check and re-time the chosen kernel of every problem on this machine; with ``retime``,
        re-time the best nodes of every problem together instead (the choice is made from that)."""
        from ..reverify import Reverifier

        if self.session.store is None:
            return
        if searching:
            what = "re-timing" if retime else "re-verifying"
            self._report(f"Stop the search before {what} its kernels.", level="warning")
            return
        self.banner.action.setEnabled(False)
        self._reverifier = Reverifier(self._parent, self.session.store.path, device, retime=retime)
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


class _Signals(QObject):
    brokenChanged = Signal()  # a problem file failed its check, or was fixed / left


class Sessions:
    """Create, open, switch and close the window's session."""

    def __init__(self, session: SessionModel, settings: Settings, notice: MachineNotice, *, parent: QWidget,
                 log: LogWidget, report: Report, may_leave: Callable[[], bool],
                 search_config: Callable[[], object], profile_model: ProfileModel) -> None:
        self.signals = _Signals(parent)
        self.broken: tuple[Path, str] | None = None  # a problem file that cannot be searched, and why
        self._watcher = QFileSystemWatcher(parent)
        self._watcher.fileChanged.connect(lambda _p: self.check_broken_again())
        self.choose_existing: ChooseExisting = self._choose_existing_dialog  # replaceable in tests
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
        base = f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
        path, n = d / f"{base}{SESSION_SUFFIX}", 1
        while path.exists():  # two sessions within a second: never add to the other's file
            n += 1
            path = d / f"{base}-{n}{SESSION_SUFFIX}"
        return path

    def new_session_dialog(self) -> None:
        start = str(paths.RESOURCES / "problems")
        path, _ = QFileDialog.getOpenFileName(self._parent, "New session from a problem or model file", start,
                                              "Python files (*.py);;All files (*)")
        if path:
            self.new_session(Path(path))

    def existing_sessions(self, source: Path) -> list[Path]:
        """Session files already made from ``source``: in the sessions folder (named after it) and
        in the recent list."""
        folder = paths.sessions_dir()
        near = sorted(folder.glob(f"{source.stem}-*{SESSION_SUFFIX}")) if folder.is_dir() else []
        recent = [Path(p) for p in self.settings.recent() if Path(p).exists()]
        seen, out = set(), []
        for p in near + recent:
            if p.resolve() not in seen:
                seen.add(p.resolve())
                out.append(p)
        return sessions_for(source, out)

    def _choose_existing_dialog(self, source: Path, found: list[Path]) -> str:
        from ..errors import _is_test_or_offscreen

        latest = max(found, key=lambda p: p.stat().st_mtime)
        if _is_test_or_offscreen():  # nobody to ask off screen: keep every run's own session file
            self._log.add("info", f"{source.name} already has a session ({latest.name}); creating another")
            return "new"
        box = QMessageBox(self._parent)
        box.setObjectName("existingSessionBox")
        box.setWindowTitle("A session exists for this file")
        box.setText(f"{source.name} already has a session: {session_summary(latest).label()}.")
        box.setInformativeText("Open it, or create another session file?")
        open_btn = box.addButton("Open the existing session", QMessageBox.ButtonRole.AcceptRole)
        new_btn = box.addButton("Create a new session", QMessageBox.ButtonRole.ActionRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(open_btn)
        box.exec()
        clicked = box.clickedButton()
        return "open" if clicked is open_btn else ("new" if clicked is new_btn else "cancel")

    def new_session(self, source: Path, session_path: Path | None = None, ask: bool = True) -> bool:
        """Create a session for a problem file (KernelBench) or a model file and open it; when one
        exists for that file already, ask first (``ask``) whether to open it instead."""
        if not self._may_leave():
            return False
        source = Path(source)
        if ask and session_path is None and source.exists():
            found = self.existing_sessions(source)
            if found:
                choice = self.choose_existing(source, found)
                if choice == "cancel":
                    return False
                if choice == "open":
                    return self.open_session(max(found, key=lambda p: p.stat().st_mtime))
        from ...modelopt.loader import is_model_file

        if is_model_file(source):  # parsed, never run; an unreadable file is not a model file
            self._set_broken(None)
            return self._new_model_session(source, session_path)
        from ...problem.problem import ProblemError, load_problem
        from ...search.engine import create_session
        from ...store import SessionStore, StoreError
        from ..problem_check import problem_trouble

        try:
            problem = load_problem(source)
            trouble = problem_trouble(problem)
        except ProblemError as err:
            trouble = str(err)
        if trouble:
            self.detach()  # the window shows the file the user chose: Start stays off until it is fixed
            self._set_broken((source, trouble))
            self._report(trouble, level="error")
            return False
        self._set_broken(None)
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

    # -- a problem file that failed its check ---------------------------------------------------
    def _set_broken(self, broken: tuple[Path, str] | None) -> None:
        if self._watcher.files():
            self._watcher.removePaths(self._watcher.files())
        self.broken = broken
        if broken is not None and broken[0].exists():
            self._watcher.addPath(str(broken[0]))
        self.signals.brokenChanged.emit()

    def check_broken_again(self) -> bool:
        """Check the failed problem file again (it was saved, or the user asked): open it when fixed."""
        if self.broken is None:
            return False
        source = self.broken[0]
        from ...problem.problem import ProblemError, load_problem
        from ..problem_check import problem_trouble

        try:
            trouble = problem_trouble(load_problem(source))
        except ProblemError as err:
            trouble = str(err)
        if trouble:
            self._set_broken((source, trouble))
            return False
        self._set_broken(None)
        return self.new_session(source, ask=False)

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
        self._set_broken(None)
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
        """Each recent session by name, progress and status (its path in the tooltip)."""
        menu.clear()
        menu.setToolTipsVisible(True)
        items = self.settings.recent()
        if not items:
            a = menu.addAction("(none yet)")
            a.setEnabled(False)
            return
        for p in items:
            summary = session_summary(Path(p))
            a = menu.addAction(summary.label())
            a.setToolTip(p)
            a.setEnabled(summary.exists)
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
