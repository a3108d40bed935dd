"""The one adapter between the search engine and the window.

The engine is a plain Python object that emits events and takes commands from another thread.
Here it runs in a ``QThread``: loading the model, building the evaluator and the whole search
happen on that thread, so the window never freezes. Engine events cross back as one queued Qt
signal and are fanned out to typed signals; commands (pause, resume, stop, pin, …) go to the
engine as the small frozen objects of ``search.events``.
"""

from __future__ import annotations

import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, QThread, Signal, Slot

from ..search import events as ev
from .errors import one_sentence
from .settings import LLMChoices


@dataclass(frozen=True)
class StartRequest:
    """What Start needs: which session and problem, how to search, which model."""

    session_path: Path
    problem_id: int
    config: object  # search.config.SearchConfig
    llm: LLMChoices
    needs_model: bool = True  # False: only evaluate queued nodes (a hand-edited child)
    workers: int | None = None  # evaluator worker processes (Preferences); None: the evaluator decides


class EngineWorker(QObject):
    """Lives on the engine thread; builds the engine there and runs it to the end."""

    event = Signal(object)
    failed = Signal(str, str)  # one sentence, details
    done = Signal()

    def __init__(self, request: StartRequest, store=None) -> None:
        super().__init__()
        self.request = request
        self.store = store
        self.engine = None
        self._pending: list[object] = []  # commands sent before the engine existed
        self._stop_early = False
        self._lock = threading.Lock()

    def send(self, command: object) -> None:
        """Thread-safe: hand a command to the engine (or keep it until the engine exists)."""
        with self._lock:
            engine = self.engine
            if engine is None:
                if isinstance(command, ev.Stop):
                    self._stop_early = True
                self._pending.append(command)
                return
        engine.command(command)

    @Slot()
    def run(self) -> None:
        from . import engine_factory

        try:
            self.event.emit(ev.Log("info", "Loading the model and starting the evaluator…"))
            engine = engine_factory.make_engine(self.request, self.event.emit, self.store)
            with self._lock:
                if self._stop_early:
                    engine.close()
                    self.event.emit(ev.Finished(self.request.problem_id, "stopped", None))
                    return
                self.engine = engine
                for c in self._pending:
                    engine.command(c)
                self._pending.clear()
            engine.run()
        except Exception as err:  # one sentence for the user, the traceback in the details
            self.failed.emit(one_sentence(err), traceback.format_exc())
        finally:
            engine, self.engine = self.engine, None
            if engine is not None:
                try:
                    engine.close()
                except Exception:
                    pass
            self.done.emit()


class SearchController(QObject):
    """Start/pause/resume/stop a search and turn its events into Qt signals."""

    nodesChanged = Signal()  # something in the store changed: refresh views
    tokens = Signal(str, object)  # text, tokens/s
    log = Signal(str, str, str)  # level, message, detail
    progress = Signal(object)  # search.events.Progress
    finished = Signal(object)  # search.events.Finished
    failed = Signal(str, str)  # one sentence, details
    runningChanged = Signal(bool)
    pausedChanged = Signal(bool)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._thread: QThread | None = None
        self._worker: EngineWorker | None = None
        self.paused = False
        self.last_progress: ev.Progress | None = None
        self.started_at = 0.0

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self, request: StartRequest, store=None) -> bool:
        if self.running:
            return False
        thread = QThread(self)
        thread.setObjectName("search-engine")
        worker = EngineWorker(request, store)
        worker.moveToThread(thread)
        thread.started.connect(worker.run)
        worker.event.connect(self._on_event)
        worker.failed.connect(self.failed)
        worker.done.connect(thread.quit)
        thread.finished.connect(self._on_thread_finished)
        self._thread, self._worker = thread, worker
        self.paused = False
        self.last_progress = None
        self.started_at = time.time()
        thread.start()
        self.runningChanged.emit(True)
        self.pausedChanged.emit(False)
        return True

    def send(self, command: object) -> bool:
        """Hand a command to the running engine; False when no search runs."""
        worker = self._worker
        if worker is None:
            return False
        worker.send(command)
        return True

    def pause(self) -> None:
        if self.send(ev.Pause()):
            self.paused = True
            self.pausedChanged.emit(True)

    def resume(self) -> None:
        if self.send(ev.Resume()):
            self.paused = False
            self.pausedChanged.emit(False)

    def stop(self, wait_s: float = 0.0) -> bool:
        """Ask the search to stop; with ``wait_s`` wait (processing events) until it has."""
        if not self.running:
            return True
        self.send(ev.Stop())
        if self.paused:
            self.send(ev.Resume())
        if wait_s > 0:
            return self.wait(wait_s)
        return False

    def wait(self, timeout_s: float) -> bool:
        from PySide6.QtWidgets import QApplication

        end = time.monotonic() + timeout_s
        while self.running and time.monotonic() < end:
            QApplication.processEvents()
            if self._thread is not None:
                self._thread.wait(20)
        QApplication.processEvents()
        return not self.running

    # -- events (UI thread) ------------------------------------------------------------------
    @Slot(object)
    def _on_event(self, e: object) -> None:
        if isinstance(e, (ev.NodeAdded, ev.NodeEvaluated, ev.NodeChanged)):
            self.nodesChanged.emit()
        elif isinstance(e, ev.TokenStream):
            self.tokens.emit(e.text, e.tokens_per_s)
        elif isinstance(e, ev.Log):
            self.log.emit(e.level, e.message, e.detail)
        elif isinstance(e, ev.Progress):
            self.last_progress = e
            self.progress.emit(e)
        elif isinstance(e, ev.Finished):
            self.nodesChanged.emit()
            self.finished.emit(e)

    def _on_thread_finished(self) -> None:
        thread, self._thread, self._worker = self._thread, None, None
        if thread is not None:
            thread.deleteLater()
        self.paused = False
        self.runningChanged.emit(False)
        self.pausedChanged.emit(False)
