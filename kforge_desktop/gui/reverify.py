"""Measure a session again, off the UI thread: re-verify and re-time its chosen kernels on this
machine (when a session measured elsewhere is opened here), or re-time its best nodes together
(Search → Re-time the best nodes; a search does it by itself when it ends).

The work is the search's own (``search.runner.reverify_session`` / ``retime_session``, with their
own store connection and evaluator workers, never candidate code in the window's process); this
thread only carries their messages and summary back to the window.
"""

from __future__ import annotations

import traceback
from pathlib import Path

from PySide6.QtCore import QThread, Signal


class Reverifier(QThread):
    message = Signal(str)
    done = Signal(str, bool)  # summary, failed

    def __init__(self, parent, session_path: Path, device: str, retime: bool = False) -> None:
        super().__init__(parent)
        self.session_path = Path(session_path)
        self.device = device
        self.retime = retime

    def run(self) -> None:
        from ..search.runner import retime_session, reverify_session

        job = retime_session if self.retime else reverify_session
        try:
            summary = job(self.session_path, self.device, self.message.emit)
        except Exception as err:
            self.done.emit(f"{'Re-timing' if self.retime else 'Re-verification'} failed: {err}", True)
            traceback.print_exc()
            return
        self.done.emit(summary, False)
