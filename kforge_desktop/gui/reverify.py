"""Re-verify and re-time the chosen kernel of every problem on this machine, off the UI thread.

Used when a session measured elsewhere is opened here. The work is the search's own command
(``search.commands.reverify``, run by ``search.runner.reverify_session`` with its own store
connection and evaluator workers, never in the window's process); this thread only carries its
messages and its summary back to the window.
"""

from __future__ import annotations

import traceback
from pathlib import Path

from PySide6.QtCore import QThread, Signal


class Reverifier(QThread):
    message = Signal(str)
    done = Signal(str, bool)  # summary, failed

    def __init__(self, parent, session_path: Path, device: str) -> None:
        super().__init__(parent)
        self.session_path = Path(session_path)
        self.device = device

    def run(self) -> None:
        from ..search.runner import reverify_session

        try:
            summary = reverify_session(self.session_path, self.device, self.message.emit)
        except Exception as err:
            self.done.emit(f"Re-verification failed: {err}", True)
            traceback.print_exc()
            return
        self.done.emit(summary, False)
