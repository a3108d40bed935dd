"""Run control: start, pause, resume and stop the current problem's search; its budget while it
runs; "search all targets" one after another; and what the engine thread reports back (progress,
tokens, log lines, the end), shown in the status bar and the inspector's live view.

The engine runs on the ``SearchController``'s thread; this side only sends it commands and shows
its events. The choices (budget, time, strategy, device) are read from the toolbar's ``SearchBar``;
opening a session or choosing another of its problems shows that problem's own stored choices.

Start is refused, with one sentence, while another process is searching the session
(``gui.ownership``) or while the problem cannot be searched (``gui.problem_check``).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QTimer

from ...search import events as ev
from ..controller import SearchController, StartRequest
from ..counts import count
from ..docks.inspector.widget import InspectorWidget
from ..docks.log.widget import LogWidget
from ..docks.targets.model import TargetsModel
from ..ownership import Owner, session_owner
from ..problem_check import ProblemChecks
from ..session_model import SessionModel
from ..settings import SearchChoices, Settings
from .chrome import SearchBar
from .status_line import StatusLine

Report = Callable[..., None]  # report(sentence, detail="", level="error", dialog=True)


class RunControl:
    """Start, pause and stop the current problem's search, and show what its engine reports."""

    def __init__(self, controller: SearchController, session: SessionModel, settings: Settings, bar: SearchBar,
                 status: StatusLine, *, log: LogWidget, inspector: InspectorWidget, targets: TargetsModel,
                 report: Report, open_example: Callable[[], bool], closing: Callable[[], bool]) -> None:
        self.controller = controller
        self.session = session
        self.settings = settings
        self.bar = bar
        self.status = status
        self._log = log
        self._inspector = inspector
        self._targets = targets
        self._report = report
        self._open_example = open_example  # Start with no session open searches the bundled example
        self._closing = closing
        self._target_queue: list[int] = []  # problems still to search after this one ("all targets")
        self.owner: Owner | None = None  # another process searching this session, as last seen
        self.checks = ProblemChecks()
        self.external_block: Callable[[], str] = lambda: ""  # e.g. a problem file that failed its check
        self.changed: Callable[[], None] = lambda: None  # the window updates its actions
        self._wire()

    def _wire(self) -> None:
        c = self.controller
        self._refresh_timer = QTimer(c)
        self._refresh_timer.setSingleShot(True)
        self._refresh_timer.setInterval(100)
        self._refresh_timer.timeout.connect(self.session.refresh)
        c.nodesChanged.connect(lambda: self._refresh_timer.start() if not self._refresh_timer.isActive() else None)
        c.log.connect(self._engine_log)
        c.progress.connect(self._progress)
        c.tokens.connect(self._tokens)
        c.finished.connect(self._finished)
        c.failed.connect(lambda s, d: self._report(s, d, level="error"))
        c.runningChanged.connect(self._running_changed)
        # a budget or time limit changed during a run reaches the engine at once
        self.bar.budget_spin.valueChanged.connect(self._budget_changed)
        self.bar.minutes_spin.valueChanged.connect(self._budget_changed)
        self.session.sessionChanged.connect(self._session_changed)
        self.session.problemChanged.connect(self._problem_changed)
        self._owner_timer = QTimer(c)
        self._owner_timer.setInterval(2000)
        self._owner_timer.timeout.connect(self.check_owner)

    # ------------------------------------------------------------------------------------------
    # who may start, per session
    # ------------------------------------------------------------------------------------------
    def _session_changed(self) -> None:
        """A new session starts clean: no rates, estimates or live answer of the last one."""
        self._target_queue = []
        self.status.clear_run()
        self._inspector.live_clear()
        if self.session.store is None:
            self._owner_timer.stop()
        else:
            self._owner_timer.start()

    def _problem_changed(self, _problem_id) -> None:
        state = self.session.store.search_state(self.session.problem_id) if self.session.problem_id else None
        if state is not None and not self.controller.running:
            self.load_choices(state)
        self.check_owner(force=True)

    def _running_changed(self, running: bool) -> None:
        if not running:
            self.status.clear_run()
        self.check_owner(force=True)

    def check_owner(self, force: bool = False) -> None:
        """Ask again whether another process searches this session; tell the window when it changed."""
        owner = session_owner(self.session.store, self.session.problem_id, self.controller.running)
        if owner != self.owner or force:
            self.owner = owner
            self.changed()

    def problem_trouble(self, check: bool = False) -> str:
        """Why the current problem cannot be searched: from the check made at the last Start, or
        (``check``) checked now."""
        record = self.session.problem()
        return (self.checks.trouble(record) if check else self.checks.known(record)) or ""

    def blocked_reason(self) -> str:
        """Why Start is off right now (one sentence), or "" when it may start."""
        if self.controller.running:
            return ""
        external = self.external_block()
        if external:
            return external
        if self.owner is not None:
            return self.owner.sentence()
        if self.session.store is not None and self.session.problem_id is not None:
            return self.problem_trouble()
        return ""

    # ------------------------------------------------------------------------------------------
    # choices
    # ------------------------------------------------------------------------------------------
    def search_config(self, budget: int | None = None):
        from ...search.config import SearchConfig

        llm = self.settings.llm()
        return SearchConfig(
            strategy=self.bar.strategy(),
            budget_candidates=budget if budget is not None else self.bar.budget(),
            budget_minutes=self.bar.time_limit(),
            device=self.bar.device(),
            temperature=llm.temperature,
            max_tokens=llm.max_tokens,
            seed=self.settings.search().seed,
        )

    def save_choices(self) -> None:
        self.settings.set_search(SearchChoices(
            budget=self.bar.budget(), minutes=self.bar.minutes_spin.value(),
            strategy=self.bar.strategy(), device=self.bar.device(),
            seed=self.settings.search().seed,
        ))

    def load_choices(self, state) -> None:
        """Show the budget and strategy a session's stored search state holds."""
        if state.budget_candidates:
            self.bar.set_budget_quietly(int(state.budget_candidates))
        self.bar.set_strategy(state.strategy)

    def _budget_changed(self) -> None:
        if self.controller.running:
            self.controller.send(ev.SetBudget(self.bar.budget(), self.bar.time_limit()))

    # ------------------------------------------------------------------------------------------
    # start, pause, stop
    # ------------------------------------------------------------------------------------------
    def start_search(self, first: list | None = None, evaluate_only: bool = False) -> bool:
        """Start (or continue) the current problem's search; ``first`` commands go in before it runs."""
        if self.controller.running:
            if self.controller.paused:
                self.controller.resume()
            return True
        self.check_owner()
        blocked = self.blocked_reason() or (self.problem_trouble(check=True) if self.session.store else "")
        if blocked:
            self._report(blocked, level="warning" if self.owner else "error", dialog=self.owner is None)
            self.changed()
            return False
        if self.session.store is None and not self._open_example():
            return False
        store, pid = self.session.store, self.session.problem_id
        if store is None or pid is None:
            self._report("This session has no problem to search.", level="warning")
            return False
        budget = None
        if evaluate_only:  # just the queued hand-written child: the budget ends right after it
            counted = sum(1 for n in self.session.nodes().values()
                          if n.origin in ("llm", "user") and n.state in ("pending", "evaluating", "evaluated", "no_code"))
            budget = counted + 1
        config = self.search_config(budget)
        self.save_choices()
        from ..preferences import workers

        request = StartRequest(store.path, pid, config, self.settings.llm(), needs_model=not evaluate_only,
                               workers=workers(self.settings.preferences()))
        self.controller.start(request, store)
        for cmd in first or []:
            self.controller.send(cmd)
        self._log.add("info", "search started" if not evaluate_only else "evaluating the hand-edited child")
        return True

    def start_all_targets(self) -> bool:
        """Search each target (problem) of the session in turn, biggest share first, each with the
        budget the session gave it; targets whose budget is spent are skipped."""
        store = self.session.store
        if store is None or self.controller.running:
            return False
        queue = []
        for row in self._targets.rows or []:
            state = store.search_state(row.problem_id)
            budget = state.budget_candidates if state else None
            if budget is None or store.candidates_done(row.problem_id) < budget:
                queue.append(row.problem_id)
        if not queue:
            self.status.message("Every target has used its budget.")
            return False
        self._target_queue = queue[1:]
        self.session.set_problem(queue[0])
        return self._start_with_stored_budget()

    def _start_with_stored_budget(self) -> bool:
        state = self.session.store.search_state(self.session.problem_id)
        if state and state.budget_candidates:
            self.bar.set_budget_quietly(max(1, int(state.budget_candidates)))
        return self.start_search()

    def toggle_pause(self) -> None:
        if not self.controller.running:
            return
        if self.controller.paused:
            self.controller.resume()
        else:
            self.controller.pause()

    def stop_search(self) -> None:
        self._target_queue = []
        if self.controller.running:
            self.controller.stop()
            self.status.message("Stopping after the current step…")

    def stop_before_leaving(self, ask: Callable[[str, str], bool]) -> bool:
        """True when no search runs, or when the user agreed to stop it and it stopped."""
        if not self.controller.running:
            return True
        if not ask("A search is running", "Stop the running search? It can be resumed later."):
            return False
        self.controller.stop(wait_s=60)
        return not self.controller.running

    # ------------------------------------------------------------------------------------------
    # engine feedback
    # ------------------------------------------------------------------------------------------
    def _engine_log(self, level: str, message: str, detail: str) -> None:
        """The Log dock shows the session's stored history; what happens right now goes to the status bar."""
        self._log.pull()
        self.status.message(message[:1].upper() + message[1:])
        if message.startswith("asking the model"):
            self._inspector.live_reset(message)

    def _progress(self, p: ev.Progress) -> None:
        best = self.session.best_id()
        node = self.session.light(best) if best is not None else None
        self.status.show_progress(p, self.controller.paused, node.speedup if node else None)

    def _tokens(self, text: str, tps) -> None:
        self._inspector.live_append(text)
        self.status.show_tokens_rate(tps)

    def stored_progress(self) -> None:
        """With no search running, the progress bar shows what the session holds."""
        store, pid = self.session.store, self.session.problem_id
        known = store is not None and pid is not None
        self.status.show_yield(store.productivity(pid) if known else None)
        if self.controller.running:
            return
        if not known:
            self.status.clear_count()
            return
        # the same count, from the same index, as the targets table and the tree (gui.counts)
        done = count(self.session.nodes().values()).candidates
        # "of N" is the session's own budget; the toolbar's is the next search's, so it is shown only before a first one
        self.status.show_count(done, self.session.budget() or (self.bar.budget() if not done else None))

    def _finished(self, f: ev.Finished) -> None:
        self.session.refresh()
        self._log.pull()
        text = ev.FINISH_REASONS.get(f.reason, f.reason)
        chosen = self.session.chosen_id()
        best = f"; chosen node #{chosen}" if chosen is not None else "; no measured win yet"
        self.status.show_phase(text)  # first: the message fits the room the phase leaves
        self.status.message(f"Search finished: {text}{best}.")
        self.status.clear_run()
        if f.reason in ("budget", "time", "repeats") and self._target_queue and not self._closing():
            nxt = self._target_queue.pop(0)
            QTimer.singleShot(0, lambda: self._next_target(nxt))
        else:
            self._target_queue = []

    def _next_target(self, problem_id: int) -> None:
        if self.controller.running:  # the previous engine thread is still winding down
            QTimer.singleShot(200, lambda: self._next_target(problem_id))
            return
        self.session.set_problem(problem_id)
        self._start_with_stored_budget()
