"""Start a whole-model session: load and profile the model on a helper thread, with progress.

Profiling runs the user's model many times (seconds to minutes); the window stays responsive and
shows what is happening. The model file is the user's own code; candidate kernels are not involved
here.
"""

from __future__ import annotations

import traceback
from pathlib import Path

from PySide6.QtCore import QThread, Signal
from PySide6.QtWidgets import QProgressDialog

from .errors import one_sentence


class _ProfileThread(QThread):
    message = Signal(str)
    done = Signal(str, str, str)  # session path, error sentence, detail

    def __init__(self, parent, model_path: Path, session_path: Path, config, module) -> None:
        super().__init__(parent)
        self.model_path, self.session_path, self.config, self.module = model_path, session_path, config, module

    def run(self) -> None:
        try:
            session = self.module.create_model_session(self.model_path, self.session_path, self.config,
                                                       progress=self.message.emit)
            session.store.close()
            skipped = len(session.skipped)
            self.message.emit(f"{len(session.problem_ids)} targets to optimize" +
                              (f", {skipped} skipped" if skipped else ""))
            self.done.emit(str(self.session_path), "", "")
        except Exception as err:
            self.done.emit("", one_sentence(err), traceback.format_exc())


class ModelSessionJob:
    """Profiles ``model_path`` into a new session and opens it in ``window`` when done."""

    def __init__(self, window, model_path: Path, session_path: Path, config, module) -> None:
        self.window = window
        self.thread = _ProfileThread(window, model_path, session_path, config, module)
        self.dialog = QProgressDialog(f"Profiling {model_path.name}…", "", 0, 0, window)
        self.dialog.setObjectName("profileProgress")
        self.dialog.setWindowTitle("New model session")
        self.dialog.setCancelButton(None)
        self.dialog.setMinimumDuration(0)
        self.thread.message.connect(lambda m: self.dialog.setLabelText(f"{model_path.name}: {m}"))
        self.thread.message.connect(lambda m: window.log_widget.add("info", m, kind="profile"))
        self.thread.done.connect(self._done)

    def run(self) -> bool:
        """Start the job; returns at once (the session opens when profiling ends)."""
        self.window._model_job = self  # keep alive
        self.dialog.show()
        self.thread.start()
        return True

    def _done(self, session_path: str, error: str, detail: str) -> None:
        self.dialog.close()
        self.thread.wait()
        self.window._model_job = None
        if error:
            self.window.report(f"Could not profile the model: {error}", detail, level="error")
            return
        self.window.open_session(Path(session_path))
