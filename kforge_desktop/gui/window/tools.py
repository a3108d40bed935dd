"""What the window offers beside the search: File → Export, Edit → Preferences and
Help → Keyboard shortcuts. Each is small; they share how a dialog is shown (``dialog_hook`` lets
tests fill a dialog instead of ``exec()``) and how a result is reported.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QDialog, QFileDialog, QWidget

from ..export_job import ExportJob, write_kernel_module
from ..preferences import apply_preferences
from ..session_model import SessionModel
from ..settings import Settings

Report = Callable[..., None]  # report(sentence, detail="", level="error", dialog=True)


class Tools:
    def __init__(self, window: QWidget, session: SessionModel, settings: Settings, *, report: Report,
                 dialog_hook: Callable[[], Callable[[object], None] | None]) -> None:
        self._window = window  # parent of dialogs and of the export job
        self.session = session
        self.settings = settings
        self._report = report
        self._hook = dialog_hook
        self.ask_folder: Callable[[str], str] = self._folder_dialog  # replaceable in tests
        self.ask_file: Callable[[str], str] = self._file_dialog
        self.export_job: ExportJob | None = None

    def _run(self, dlg: QDialog) -> bool:
        hook = self._hook()
        if hook is not None:
            hook(dlg)
        elif dlg.exec() != QDialog.DialogCode.Accepted:
            return False
        return dlg.result() == QDialog.DialogCode.Accepted

    # -- export ---------------------------------------------------------------------------------
    def is_model_session(self) -> bool:
        from ...modelopt.session import is_model_session

        return self.session.store is not None and is_model_session(self.session.store)

    def export_dialog(self) -> None:
        store = self.session.store
        if store is None:
            return
        if self.is_model_session():
            folder = self.ask_folder("Export the chosen kernels into a folder")
            if folder:
                self.export(Path(folder))
            return
        nid = self.session.chosen_id()
        if nid is None:
            self._report("Nothing to export yet: pin a correct kernel, or let the search find a measured win.",
                         level="warning")
            return
        problem = self.session.problem()
        name = f"{problem.name if problem else 'kernel'}_node{nid}.py"
        path = self.ask_file(str(store.path.parent / name))
        if path:
            self.export(Path(path))

    def export(self, out: Path, bench: bool = True) -> ExportJob | None:
        """A whole-model session: the package ``kforge export`` writes, into folder ``out`` (on a
        helper thread; returns the job). A problem session: the chosen ``ModelNew`` module, as the
        file ``out``."""
        store = self.session.store
        if store is None:
            return None
        if self.is_model_session():
            self.export_job = ExportJob(self._window, store.path, out, bench)
            self.export_job.start()
            return self.export_job
        nid = self.session.chosen_id()
        node = self.session.node(nid)
        if node is None:
            self._report("Nothing to export yet: pin a correct kernel, or let the search find a measured win.",
                         level="warning")
            return None
        write_kernel_module(node.source, out)
        self._report(f"Wrote node #{nid}'s ModelNew module to {out}.", level="info")
        return None

    def _folder_dialog(self, title: str) -> str:
        return QFileDialog.getExistingDirectory(self._window, title, str(Path.home()))

    def _file_dialog(self, suggested: str) -> str:
        path, _ = QFileDialog.getSaveFileName(self._window, "Export the chosen kernel", suggested,
                                              "Python files (*.py)")
        return path

    # -- preferences and shortcuts --------------------------------------------------------------
    def preferences_dialog(self) -> bool:
        from ..dialogs.preferences import PreferencesDialog

        dlg = PreferencesDialog(self._window, self.settings.preferences())
        if not self._run(dlg):
            return False
        prefs = dlg.preferences()
        self.settings.set_preferences(prefs)
        apply_preferences(prefs)
        self._report("Preferences saved; the next search uses them.", level="info")
        return True

    def shortcuts_dialog(self, actions: list) -> None:
        from ..dialogs.shortcuts import ShortcutsDialog

        self._run(ShortcutsDialog(self._window, actions))
