"""Keep Python's garbage collector from freezing the window.

A full (generation 2) collection walks every tracked object: with torch, Qt and a session of
thousands of nodes loaded that is 100-200 ms, and it holds the interpreter lock, so the UI thread
stops for that long whichever thread triggered it (measured by benchmarks/gui_tree.py: the longest
stall while nodes streamed in fell from about 170 ms to about 30 ms with this in place).

Objects that live as long as the app (modules, the window, a loaded session) are moved out of the
collector's sight with ``gc.freeze()``; reference counting still frees them when they are dropped.
``settle`` runs after a session is opened; ``HeapKeeper`` repeats the freeze every second so the
set the collector walks stays small over hours of searching, and every ten minutes, while no
search runs, sweeps everything once (so cyclic garbage that was frozen is not kept for good).
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer


def settle() -> None:
    """Collect what is garbage now, then stop scanning everything that survived."""
    gc.collect()
    gc.freeze()


def release() -> None:
    """Undo the freezing (when the window closes), so shutdown finalizes everything normally."""
    gc.unfreeze()


class HeapKeeper(QObject):
    INTERVAL_MS = 1_000
    SWEEP_MS = 600_000

    def __init__(self, idle=lambda: True, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._idle = idle
        self._timer = QTimer(self)
        self._timer.setInterval(self.INTERVAL_MS)
        self._timer.timeout.connect(gc.freeze)  # cheap: no collection, just moves the survivors
        self._timer.start()
        self._sweep = QTimer(self)
        self._sweep.setInterval(self.SWEEP_MS)
        self._sweep.timeout.connect(self.sweep)
        self._sweep.start()

    def stop(self) -> None:
        self._timer.stop()
        self._sweep.stop()

    def sweep(self) -> None:
        if self._idle():
            gc.unfreeze()
            settle()
