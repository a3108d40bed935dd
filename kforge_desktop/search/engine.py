"""``SearchEngine``: the loop that asks the LLM, evaluates, backpropagates and saves every step.

A plain Python object (no Qt): views subscribe to the events of ``search.events`` and post the
commands from there (pause, resume, stop, pin, unpin, exclude, add child, expand from, set budget)
from any thread; ``run()`` blocks in the thread that drives the search.

The loop only selects, expands, evaluates, saves and emits; around it: ``setup`` (a new session),
``planner`` (which node, which directive, which limit), ``prompting`` (what the model is shown),
``generation`` (an answer written in its thread, then stored), ``answers`` (answer -> candidate),
``commands`` (what a command does), ``inflight`` (the window of work in flight and the tree a plan
sees), ``retiming`` (the best re-timed at the end), ``runner`` (model + evaluator + engine).

Why it is shaped like this:
- The store is the only state. Every iteration re-reads the tree, so a resumed session, a pin made
  from the GUI, or a hand-edited child all look the same to the loop. A generated node is stored
  together with its LLM call; a verdict together with the node's new state; after ``kill -9``
  nodes caught mid-evaluation go back to pending and are evaluated again (nothing lost, nothing
  duplicated); an answer still being generated is simply asked for again.
- Scheduling: up to K expansions are in flight (``config.inflight``, else chosen by the machine:
  ``inflight.default_inflight``; 1, generation and evaluation alternating, on 4 cores or fewer):
  the model writes the next candidates while earlier ones are built, verified and timed. Timing
  never overlaps a generation on the same device (``generation.generate``).
- Determinism: directive choices and LLM sampling seeds derive from the session seed and the
  node/call counts (``planner.Tally``); plans are made on ``inflight.masked_tree`` and answers are
  saved in the order they were asked for, so the same seed and K give the same tree whatever
  finishes first.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
import time
import traceback
from collections.abc import Callable

from ..kernels.verdict import Verdict
from ..llm import prompts
from ..llm.generator import Generation
from ..store import SessionStore
from . import answers, commands, generation, inflight, memory, prompting, retiming
from . import events as ev
from .config import SearchConfig
from .inflight import Slot, Window, masked_tree, verdict_of
from .planner import MAX_REPEATS, CallNumbers, Expansion, Planner, Tally, repeats_in_a_row
from .setup import LazyScaffold, measured_elsewhere, search_state
from .setup import create_session as create_session  # re-exported (and the two below) for callers
from .setup import environment_differences as environment_differences
from .setup import environment_record as environment_record
from .tree import Tree, backprop, reward

Listener = Callable[[ev.Event], None]


class SearchEngine:
    """Runs one problem's search in a session. ``run()`` blocks; commands may come from any thread."""

    def __init__(self, store: SessionStore, problem_id: int, generator, evaluator,
                 config: SearchConfig | None = None) -> None:
        self.store = store
        self.problem_id = problem_id
        self.generator = generator
        self.evaluator = evaluator
        state = store.search_state(problem_id)
        if config is None:
            config = SearchConfig.from_dict(state.config) if state else SearchConfig()
        self.config = config
        self.tally = Tally.from_saved(state.rng_state if state else None)
        self._elapsed0 = state.elapsed_s if state else 0.0
        self.record = store.problem(problem_id)
        self.problem = self.record.to_problem()
        self.language = self.record.language or config.kernel_language
        self.scaffold = LazyScaffold(self.problem, self.language, config.scaffold,
                                     lambda message: self._log(message, "warning"))
        self.planner = Planner(self.language, self.problem.source, self.scaffold, store.node, self.tally,
                               lambda message: self._log(message, "warning"))
        self._listeners = ev.Listeners()
        self._emit = self._listeners.emit  # every event to every view
        self._commands = commands.Inbox()
        self._cancel = threading.Event()
        self._stop = False
        self._paused = False
        self._window = Window()  # the work in flight, oldest first (see ``inflight``)
        self._calls = CallNumbers(self.tally)
        self._gen_pool: cf.ThreadPoolExecutor | None = None
        self._started = time.monotonic()
        self._tokens_per_s: float | None = None
        self._phase = "idle"
        self._gen_failures = 0
        self._warned_productivity = False
        self._thread: threading.Thread | None = None
        self.inflight = config.inflight or 0  # K; 0 until ``run`` chooses it for this machine

    # -- listeners and commands -----------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` for every event; returns an unsubscribe. Events come from the
        engine's thread, except ``TokenStream`` (and the ``Progress`` beside it), which come from the
        thread of the generation they belong to: with K in flight, several at once."""
        return self._listeners.subscribe(listener)

    def post(self, command: ev.Command) -> None:
        """Queue a command (thread-safe); Stop also cancels a generation in progress."""
        if isinstance(command, ev.Stop):
            self._cancel.set()
        self._commands.put(command)

    def stop(self) -> None:
        self.post(ev.Stop())

    def start(self) -> threading.Thread:
        """Run in a daemon thread (the CLI and tests; the GUI uses its own QThread)."""
        self._thread = threading.Thread(target=self.run, name=f"kforge-search-{self.problem_id}", daemon=True)
        self._thread.start()
        return self._thread

    def _log(self, message: str, level: str = "info", detail: str = "", persist: bool = True) -> None:
        if persist:
            self.store.log_event(self.problem_id, "log", message, level, {"detail": detail} if detail else None)
        self._emit(ev.Log(level, message, detail))

    # -- state -----------------------------------------------------------------------------------------

    @property
    def elapsed_s(self) -> float:
        return self._elapsed0 + (time.monotonic() - self._started)

    def _tree(self) -> Tree:
        return Tree(self.store.nodes(self.problem_id, with_source=False))

    def _save_state(self, status: str) -> None:
        self.store.save_search_state(search_state(self.problem_id, self.config, self.tally, status, self.elapsed_s))

    def _progress(self) -> ev.Progress:
        best = self.store.best_node(self.problem_id)
        return ev.Progress(
            problem_id=self.problem_id, done=self.store.candidates_done(self.problem_id),
            budget=self.config.budget_candidates or 0, best_speedup=best.speedup if best else None,
            tokens_per_s=self._tokens_per_s, elapsed_s=self.elapsed_s, phase=self._phase,
        )

    # -- the loop --------------------------------------------------------------------------------------

    def run(self) -> ev.Finished:
        self._started = time.monotonic()
        self._stop = False
        self._cancel.clear()
        again = self.store.reset_in_flight(self.problem_id)
        elsewhere = measured_elsewhere(self.store.environment(), self.config.device)
        if elsewhere:
            self._log(elsewhere, "warning")
        if again:
            self._log(f"{len(again)} node(s) waiting for evaluation", persist=False)
        if not self.config.inflight:
            self.inflight = inflight.default_inflight(self.generator, self.evaluator)
        self._calls = CallNumbers(self.tally)
        self._save_state("running")
        reason, best_id = "error", None
        try:
            if self.inflight > 1:
                self._log(f"{self.inflight} expansions in flight", persist=False)
            reason = self._loop()
        except Exception as err:  # the engine's own bug: say it once, keep the session consistent
            self._log(f"the search stopped on an internal error: {type(err).__name__}: {err}", "error",
                      traceback.format_exc())
            reason = "error"
        finally:
            self._abandon_inflight()
            if reason not in ("stopped", "error"):
                self._retime()
            best = self.store.chosen_node(self.problem_id)
            best_id = best.id if best else None
            status = {"stopped": "stopped", "error": "stopped"}.get(reason, "finished")
            self._save_state(status)
            self.store.log_event(self.problem_id, "finished", f"search {reason}", payload={"best": best_id})
        self._phase = "idle"
        self._emit(self._progress())
        memory.learn_from_search(self.store, self.problem_id, self.config, self._log)  # search/memory.py
        finished = ev.Finished(self.problem_id, reason, best_id)
        self._emit(finished)
        return finished

    def _retime(self) -> None:
        """The best few nodes re-timed together (``search.retiming``); the GUI sees their new verdicts."""
        self._phase = "re-timing"
        self._emit(self._progress())
        for node_id in retiming.retime_or_keep(self.store, self.problem_id, self.problem, self.evaluator, self._log):
            self._emit(ev.NodeEvaluated(self.problem_id, node_id, self.store.node(node_id).verdict))

    def _loop(self) -> str:
        """Fill the window (pending nodes first, then expansions) up to K; make room only from its
        front, and only when needed, so that every plan sees the same results (``inflight``)."""
        while True:
            self.apply_commands()
            if self._stop:
                return "stopped"
            self._advance()
            if self._gen_failures >= 3:
                self._log("the model failed three times in a row; stopping", "error")
                return "error"
            if repeats_in_a_row(self._tree()) >= MAX_REPEATS:
                self._log(f"the model's last {MAX_REPEATS} answers all repeated earlier kernels; stopping (a larger "
                          "model or a higher temperature will explore further)", "warning")
                return "repeats"
            if self._paused:
                self._wait(0.2)  # work already running may finish while paused; nothing new starts
                continue
            for slot in self._window:
                if slot.deferred:  # answered while paused: its evaluation starts now
                    self._submit(slot)
            if len(self._window) >= self.inflight:
                self._make_room()
                continue
            # a node waiting for its verdict (a seed, a hand-edited child, one a crash left) takes a slot
            owned = {s.node_id for s in self._window}
            queued = [n for n in self.store.pending_nodes(self.problem_id) if n.id not in owned and n.state == "pending"]
            if queued:
                self._submit(self._window.add(node_id=queued[0].id, answered=True))
                continue
            tree = self._view()
            limit = self.planner.limit(tree, self.config, self.elapsed_s, self._calls.next)
            expansion = None if limit else self.next_expansion(tree)
            if expansion is None:
                if self._window:
                    self._make_room()
                    continue
                if limit:
                    return limit
                self._log("nothing left to expand (every node is excluded)", "warning")
                return "budget"
            self._launch(expansion, tree)

    def _view(self) -> Tree:
        """The tree plans are made on: the store's, as of the front of the window."""
        return masked_tree(self._tree(), self._window, self.language)

    def _make_room(self) -> None:
        """Retire the oldest slot once it is done (answered and evaluated); wait for it otherwise."""
        if not self._window.retire_front():
            self._wait(0.2)

    def _wait(self, timeout: float) -> None:
        """Until some work in flight finishes or a command arrives (at most ``timeout`` seconds)."""
        futures = self._window.running()
        if futures:
            cf.wait(futures, timeout=timeout, return_when=cf.FIRST_COMPLETED)
            return
        cmd = self._commands.wait(timeout)
        if cmd is not None:
            self._apply(cmd)

    # -- commands --------------------------------------------------------------------------------------

    def apply_commands(self, light_only: bool = False) -> None:
        """Apply every queued command now (the loop does this between steps). During a generation,
        ``light_only``: the commands that do not need the loop (pin, exclude, budget); the rest wait."""
        for cmd in self._commands.drain(light_only):
            self._apply(cmd)

    def _apply(self, cmd: ev.Command) -> None:
        """What a command does is decided in ``commands``: to the loop (``control``: stop, pause,
        resume, budget), applied here, or to the session (``apply``: the node commands)."""
        ctl = commands.control(cmd, self._paused, self.config)
        if ctl is None:
            applied = commands.apply(cmd, self.store, self.problem_id, self.language, self.planner)
            for event in applied.events:
                self._emit(event)
            if applied.message:
                self._log(applied.message, applied.level)
            return
        self._stop = self._stop or ctl.stop
        if ctl.paused is not None:
            self._paused, self._phase = ctl.paused, "paused" if ctl.paused else "idle"
        if ctl.config is not None:
            self.config = ctl.config
        if ctl.save:
            self._save_state("paused" if self._paused else "running")
        if ctl.message:
            self._log(ctl.message)
        if ctl.progress:
            self._emit(self._progress())

    # -- evaluation --------------------------------------------------------------------------------------

    def _submit(self, slot: Slot) -> None:
        slot.evaluating, slot.deferred = True, False
        node = self.store.node(slot.node_id)
        if node is None:
            slot.evaluated = True
            return
        node_id = node.id
        self.store.set_state(node_id, "evaluating")
        self._phase = "building"
        self._emit(ev.NodeChanged(self.problem_id, node_id))
        self._emit(self._progress())
        error = answers.syntax_verdict_of(node, self.scaffold, self.config.device) if self.config.syntax_check else None
        if error is not None:
            slot.evaluated = True
            self._finish_node(node_id, error)
            return
        slot.evaluation = self.evaluator.submit(self.problem, node.source)

    def _advance(self) -> None:
        """Record the verdicts that came back; save the answers that came back, in the order they
        were asked for (an early answer waits for the ones before it)."""
        for slot in self._window:
            if slot.evaluation is not None and not slot.evaluated and slot.evaluation.done():
                slot.evaluated = True
                self._finish_node(slot.node_id, verdict_of(slot.evaluation, self.config.device))
        for slot in self._window:
            if slot.expansion is None or slot.answered:
                continue
            if not slot.generation.done():
                break
            self._answer(slot)

    def _finish_node(self, node_id: int, verdict: Verdict) -> None:
        verdict = retiming.baseline_moved(self.store, self.problem_id, verdict)
        r = reward(verdict)
        self.store.record_verdict(node_id, verdict, r)
        tree = self._tree()
        self.store.update_stats(backprop(tree, node_id, r))
        node = tree.node(node_id)
        self.store.log_event(self.problem_id, "node_evaluated", f"node {node_id}: {verdict.summary()}",
                             "info" if verdict.status == "ok" else "warning",
                             {"node": node_id, "status": verdict.status, "speedup": verdict.speedup})
        self._emit(ev.NodeEvaluated(self.problem_id, node_id, verdict))
        for i in tree.ancestors(node_id):
            self._emit(ev.NodeChanged(self.problem_id, i))
        self._emit(ev.Log("info" if verdict.status == "ok" else "warning",
                          f"node {node_id} ({node.kind}): {verdict.summary()}"))
        self._phase = "idle"
        self._emit(self._progress())
        self._check_productivity()

    def _abandon_inflight(self) -> None:
        """When the loop ends: generations still running are cancelled (a resume asks again); the
        answers already written are saved, in order, and wait as pending nodes; verdicts already in
        are recorded; evaluations still running are abandoned and their nodes go back to pending (a
        resume redoes them)."""
        if not self._window:
            return
        self._cancel.set()
        running = [s.generation for s in self._window if s.generation is not None and not s.generation.done()]
        if running:
            cf.wait(running, timeout=30)
        for slot in self._window:
            if slot.expansion is not None and not slot.answered and slot.generation.done():
                self._answer(slot, submit=False)
        for slot in self._window:
            if slot.evaluation is None or slot.evaluated:
                continue
            if slot.evaluation.done():
                slot.evaluated = True
                self._finish_node(slot.node_id, verdict_of(slot.evaluation, self.config.device))
            else:
                slot.evaluation.cancel()
                self.store.set_state(slot.node_id, "pending")
        self._window.clear()

    def _check_productivity(self) -> None:
        if self._warned_productivity:
            return
        p = self.store.productivity(self.problem_id)
        if p.suggestion:
            self._warned_productivity = True
            self._log(p.suggestion, "warning")

    # -- expansion ---------------------------------------------------------------------------------------

    def next_expansion(self, tree: Tree | None = None) -> Expansion | None:
        """What the loop would expand next (forced, then a repair, then the strategy's pick)."""
        return self.planner.next_expansion(tree or self._tree(), self.config)

    def prompt(self, exp: Expansion, tree: Tree) -> prompts.PromptContext:
        """The prompt context of ``exp`` (before it is fitted to the model's context)."""
        return prompting.prompt_context(exp, tree, self.store.node, self.language, self.problem.source,
                                        self.scaffold(), self.config)

    def _launch(self, exp: Expansion, tree: Tree) -> None:
        """Ask the model for ``exp`` in a generation thread; the answer is saved by ``_answer``."""
        c = self.config
        ctx = self.prompt(exp, tree)
        try:
            ctx, trimmed = prompts.fit(ctx, self.generator.count_tokens, self.generator.context_size, c.max_tokens)
        except prompts.PromptTooLong as err:
            self._gen_failures += 1
            self._log(str(err), "error")
            return
        index = self._calls.take()
        request = prompting.request(ctx, c, self.language, self.problem.source, index,
                                    bool(getattr(self.generator, "raw_completion", False)), self.scaffold())
        self._phase = "generating"
        self._emit(self._progress())
        self._log(f"asking the model: {exp.kind} from node {exp.parent_id} ({exp.directive})", persist=False)
        if self._gen_pool is None:
            self._gen_pool = generation.thread_pool(self.generator, self.inflight, f"kforge-generate-{self.problem_id}")
        slot = self._window.add(expansion=exp, call_index=index, request=request, context=ctx, trimmed=trimmed)
        slot.generation = self._gen_pool.submit(
            generation.generate, self.generator, request, generation.device_gate(self.evaluator), self._cancel,
            lambda text, tps: self._emit(ev.TokenStream(self.problem_id, text, tps, stream=slot.seq)), self._rate)

    def _rate(self, tokens_per_s: float | None) -> None:
        """The model's speed as a generation measures it (at most once a second, from its thread)."""
        self._tokens_per_s = tokens_per_s
        self._emit(self._progress())

    def _answer(self, slot: Slot, submit: bool = True) -> None:
        """Save a finished generation's answer (the engine's thread, in the order asked) and send
        its node to the evaluator; a failed or cancelled one gives its call number back when no
        later call took one (so with K = 1 the next request asks with the same seed, as before)."""
        slot.answered = True
        got = generation.received(slot.generation)
        self._gen_failures = got.failures(self._gen_failures)
        if got.message:
            self._log(got.message, got.level, persist=got.persist)
        if got.gen is None:
            self._calls.give_back(slot.call_index)
            return
        gen = got.gen
        self._tokens_per_s = gen.tokens_per_s or self._tokens_per_s
        self._calls.answered(slot.call_index)
        slot.node_id, state = self._save_answer(slot, gen)
        if state == "pending" and submit:
            if self._paused:
                slot.deferred = True
            else:
                self._submit(slot)

    def _save_answer(self, slot: Slot, gen: Generation) -> tuple[int, str]:
        """Store the LLM call and the node its answer makes (``generation.save_answer``); an answer
        that is no candidate (no code, or a repeat) still spends the expansion: visits, no value."""
        node_id, answer = generation.save_answer(
            self.store, self.problem_id, slot, gen, language=self.language, scaffold=self.scaffold(),
            fix=self.config.syntax_check, save_state=lambda: self._save_state("paused" if self._paused else "running"))
        state = answer.state
        self._emit(ev.NodeAdded(self.problem_id, node_id, slot.expansion.parent_id, "llm", state))
        if state == "no_code":
            self._log(f"node {node_id}: no usable code ({answer.note})", "warning")
            tree = self._tree()
            self.store.update_stats(backprop(tree, node_id, 0.0))
            for i in tree.ancestors(node_id):
                self._emit(ev.NodeChanged(self.problem_id, i))
            self._emit(self._progress())
        elif state == "duplicate":
            said = f"repeats node {answer.duplicate_of}" if answer.duplicate_of else "is the prompt's example kernel"
            self._log(f"node {node_id} {said}; not evaluated, not counted", "warning")
            self.store.update_stats(backprop(self._tree(), node_id, 0.0))
        return node_id, state
