"""File → Export: what ``kforge export`` writes, from the window, on a helper thread.

A whole-model session becomes the same package as ``kforge export SESSION --out DIR`` (the one
public function, ``modelopt.export.export_session``: the model is loaded again, patched with the
chosen kernels, checked against the original and benchmarked, which takes a while). A session made
from a single problem file has no model to patch; its export is the chosen kernel as a KernelBench
``ModelNew`` module, the format every harness reads.
"""

from __future__ import annotations

import traceback
from pathlib import Path

from PySide6.QtCore import QThread, Signal
from PySide6.QtWidgets import QProgressDialog

from .errors import one_sentence


class _ExportThread(QThread):
    message = Signal(str)
    done = Signal(str, str, str)  # summary, error sentence, detail

    def __init__(self, parent, session_path: Path, out: Path, bench: bool) -> None:
        super().__init__(parent)
        self.session_path, self.out, self.bench = session_path, out, bench

    def run(self) -> None:
        from ..modelopt.export import export_session

        try:
            res = export_session(self.session_path, self.out, bench=self.bench, progress=self.message.emit)
        except Exception as err:  # one sentence for the user, the traceback in the details
            self.done.emit("", one_sentence(err), traceback.format_exc())
            return
        left = f"; not used: {', '.join(sorted(res.not_used))}" if res.not_used else ""
        self.done.emit(f"Exported {res.package} to {res.out} ({len(res.kernels)} kernel(s){left}); "
                       f"the report is {res.report.name}.", "", "")


class ExportJob:
    """Exports a whole-model session into ``out`` and reports to ``window`` when done."""

    def __init__(self, window, session_path: Path, out: Path, bench: bool = True) -> None:
        self.window = window
        self.out = out
        self.summary = ""
        self.error = ""
        self.finished = False
        self.thread = _ExportThread(window, session_path, out, bench)
        self.dialog = QProgressDialog(f"Exporting to {out}…", "", 0, 0, window)
        self.dialog.setObjectName("exportProgress")
        self.dialog.setWindowTitle("Export")
        self.dialog.setCancelButton(None)
        self.dialog.setMinimumDuration(0)
        self.thread.message.connect(lambda m: self.dialog.setLabelText(f"Export: {m}"))
        self.thread.message.connect(lambda m: window.log_widget.add("info", f"export: {m}", kind="export"))
        self.thread.done.connect(self._done)

    def start(self) -> None:
        self.window._export_job = self  # keep alive until done
        self.dialog.show()
        self.thread.start()

    def _done(self, summary: str, error: str, detail: str) -> None:
        self.dialog.close()
        self.thread.wait()
        self.window._export_job = None
        self.summary, self.error, self.finished = summary, error, True
        if error:
            self.window.report(f"Could not export the session: {error}", detail, level="error")
        else:
            self.window.report(summary, level="info")


def write_kernel_module(source: str, path: Path) -> None:
    """A problem session's export: the chosen candidate's whole ``ModelNew`` module."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
