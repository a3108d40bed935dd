"""``SearchEngine``: the loop that asks the LLM, evaluates, backpropagates and saves every step.

A plain Python object (no Qt): views subscribe to the events of ``search.events`` and post the
commands from there (pause, resume, stop, pin, unpin, exclude, add child, expand from, set budget)
from any thread; ``run()`` blocks in the thread that drives the search.

The loop only selects, expands, evaluates, saves and emits; around it: ``setup`` (a new session),
``planner`` (which node, which directive), ``prompting`` (what the model is shown), ``answers``
(answer -> candidate), ``commands`` (what a command does), ``runner`` (model + evaluator + engine),
``inflight`` (the window of work in flight and the tree a plan sees). It runs past 500 lines
because keeping K expansions in flight (launch, save answers in order, retire) is the loop itself.

Why it is shaped like this:
- The store is the only state. Every iteration re-reads the tree, so a resumed session, a pin made
  from the GUI, or a hand-edited child all look the same to the loop. A generated node is stored
  together with its LLM call; a verdict together with the node's new state; after ``kill -9``
  nodes caught mid-evaluation go back to pending and are evaluated again (nothing lost, nothing
  duplicated); an answer still being generated is simply asked for again.
- Scheduling: up to K expansions are in flight (``config.inflight``; by default chosen by the
  machine, ``inflight.default_inflight``): the model writes the next candidate while earlier ones
  are built, verified and timed, and a model server that serves several requests at once gets K of
  them together. With K = 1 generation and evaluation alternate (what a machine of 4 cores or fewer
  gets: llama.cpp and a g++ build on the same few cores starve each other). Timing never overlaps
  a generation on the same device: every generation runs inside the evaluator's ``DeviceGate`` and
  waits between two tokens while a kernel is timed.
- Determinism: directive choices and LLM sampling seeds derive from the session seed and the
  node/call counts (``planner.Tally``), so a search with a temperature-0 model (or a fixed seed)
  replays exactly. With K in flight the engine plans on ``inflight.masked_tree`` (the tree as of the
  front of its window, each expansion in flight a placeholder with a virtual loss) and saves answers
  in the order they were asked for, so the same seed and K give the same tree whatever finishes
  first.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable

from ..kernels.verdict import Verdict
from ..llm import prompts
from ..llm.generator import Generation, GenerationError
from ..store import SearchState, SessionStore
from . import answers, commands, generation, inflight, memory, prompting, retiming
from . import events as ev
from .config import SearchConfig
from .inflight import Slot, masked_tree
from .planner import MAX_REPEATS, Expansion, Planner, Tally, limit_reached, repeats_in_a_row
from .setup import LazyScaffold, environment_differences, environment_record
from .setup import create_session as create_session  # re-exported: callers that still import it from here
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
        self._listeners: list[Listener] = []
        self._commands = commands.Inbox()
        self._cancel = threading.Event()
        self._stop = False
        self._paused = False
        self._window: deque[Slot] = deque()  # the work in flight, oldest first (see ``inflight``)
        self._seq = 0
        self._next_call = self.tally.llm_calls  # the LLM call number the next expansion gets
        self._gen_pool: cf.ThreadPoolExecutor | None = None
        self._started = time.monotonic()
        self._tokens_per_s: float | None = None
        self._phase = "idle"
        self._gen_failures = 0
        self._warned_productivity = False
        self._said_call_cap = False
        self._thread: threading.Thread | None = None
        self.inflight = config.inflight or 0  # K; 0 until ``run`` chooses it for this machine

    # -- listeners and commands -----------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` for every event; returns an unsubscribe. Events come from the
        engine's thread, except ``TokenStream`` (and the ``Progress`` beside it), which come from the
        thread of the generation they belong to: with K in flight, several at once."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

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

    def _emit(self, event: ev.Event) -> None:
        for fn in list(self._listeners):
            try:
                fn(event)
            except Exception:  # a broken view must not kill the search
                traceback.print_exc()

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
        c = self.config
        self.store.save_search_state(SearchState(
            problem_id=self.problem_id, strategy=c.strategy, budget_candidates=c.budget_candidates,
            budget_minutes=c.budget_minutes, seed=c.seed, rng_state=self.tally.to_saved(), config=c.to_dict(),
            status=status, elapsed_s=self.elapsed_s,
        ))

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
        saved_env = self.store.environment()
        if saved_env:
            diff = environment_differences(saved_env, environment_record(self.config.device))
            if diff:
                self._log("this session was measured on another machine (" + ", ".join(diff) + "); "
                          "its verdicts may not hold here", "warning")
        if again:
            self._log(f"{len(again)} node(s) waiting for evaluation", persist=False)
        if not self.config.inflight:
            self.inflight = inflight.default_inflight(self.generator, self.evaluator)
        self._next_call = self.tally.llm_calls
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
        try:
            ids = retiming.retime_best(self.store, self.problem_id, self.problem, self.evaluator, self._log)
        except Exception as err:  # a failed re-timing leaves the first verdicts standing
            self._log(f"re-timing the best nodes failed: {type(err).__name__}: {err}", "warning")
            return
        for node_id in ids:
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
                return "budget"
            if self._paused:
                self._wait(0.2)  # work already running may finish while paused; nothing new starts
                continue
            for slot in self._window:
                if slot.deferred:  # answered while paused: its evaluation starts now
                    self._submit(slot)
            if len(self._window) >= self.inflight:
                self._make_room()
                continue
            owned = {s.node_id for s in self._window}
            queued = [n for n in self.store.pending_nodes(self.problem_id) if n.id not in owned and n.state == "pending"]
            if queued:
                self._evaluate_waiting(queued[0].id)
                continue
            tree = self._view()
            limit = self._limit_reached(tree)
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
        if self._window and self._window[0].done:
            self._window.popleft()
        else:
            self._wait(0.2)

    def _limit_reached(self, tree: Tree) -> str | None:
        limit = limit_reached(tree, self.config, self.elapsed_s, self._next_call)
        if limit == "llm_calls":
            if not self._said_call_cap:  # said once, while the calls still in flight come back
                self._said_call_cap = True
                self._log(f"stopped after {self.config.llm_call_cap} LLM calls: the model keeps repeating earlier "
                          "answers", "warning")
            return "budget"
        return limit

    def _wait(self, timeout: float) -> None:
        """Until some work in flight finishes or a command arrives (at most ``timeout`` seconds)."""
        futures = [f for s in self._window for f in (s.generation, s.evaluation) if f is not None and not f.done()]
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
        """Loop control (stop, pause, resume, budget) here; what a command does to the session in
        ``commands``."""
        if isinstance(cmd, ev.Stop):
            self._stop = True
            self._log("stop requested")
        elif isinstance(cmd, ev.Pause):
            if not self._paused:
                self._paused = True
                self._phase = "paused"
                self._save_state("paused")
                self._log("paused")
                self._emit(self._progress())
        elif isinstance(cmd, ev.Resume):
            if self._paused:
                self._paused = False
                self._phase = "idle"
                self._save_state("running")
                self._log("resumed")
        elif isinstance(cmd, ev.SetBudget):
            self.config, message = commands.with_budget(self.config, cmd)
            self._save_state("paused" if self._paused else "running")
            self._log(message)
            self._emit(self._progress())
        else:
            applied = commands.apply(cmd, self.store, self.problem_id, self.language, self.planner)
            for event in applied.events:
                self._emit(event)
            if applied.message:
                self._log(applied.message, applied.level)

    # -- evaluation --------------------------------------------------------------------------------------

    def _next_slot(self, **fields) -> Slot:
        slot = Slot(self._seq, **fields)
        self._seq += 1
        self._window.append(slot)
        return slot

    def _evaluate_waiting(self, node_id: int) -> None:
        """A node that waits for its verdict (a seed, a hand-edited child, one a crash left behind)
        takes a slot of the window."""
        self._submit(self._next_slot(node_id=node_id, answered=True))

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
        kernel = answers.native_kernel(node)
        if self.config.syntax_check and kernel:
            error = answers.syntax_verdict(kernel, node.language, self.scaffold(), self.config.device)
            if error is not None:
                slot.evaluated = True
                self._finish_node(node_id, error)
                return
        slot.evaluation = self.evaluator.submit(self.problem, node.source)

    def _advance(self) -> None:
        """Record the verdicts that came back; save the answers that came back, in the order they
        were asked for (an early answer waits for the ones before it)."""
        for slot in list(self._window):
            if slot.evaluation is not None and not slot.evaluated and slot.evaluation.done():
                slot.evaluated = True
                self._finish_node(slot.node_id, self._verdict_of(slot.evaluation))
        for slot in list(self._window):
            if slot.expansion is None or slot.answered:
                continue
            if not slot.generation.done():
                break
            self._answer(slot)

    def _verdict_of(self, fut: cf.Future) -> Verdict:
        try:
            return fut.result()
        except Exception as err:
            return Verdict(status="crashed", reason=f"the evaluator failed: {type(err).__name__}: {err}",
                           device=self.config.device)

    def _finish_node(self, node_id: int, verdict: Verdict) -> None:
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
        for slot in list(self._window):
            if slot.expansion is not None and not slot.answered and slot.generation.done():
                self._answer(slot, submit=False)
        for slot in self._window:
            if slot.evaluation is None or slot.evaluated:
                continue
            if slot.evaluation.done():
                slot.evaluated = True
                self._finish_node(slot.node_id, self._verdict_of(slot.evaluation))
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
        index = self._next_call
        self._next_call += 1
        request = prompting.request(exp, ctx, tree, c, self.language, self.problem.source, index,
                                    bool(getattr(self.generator, "raw_completion", False)), self.scaffold())
        self._phase = "generating"
        self._emit(self._progress())
        self._log(f"asking the model: {exp.kind} from node {exp.parent_id} ({exp.directive})", persist=False)
        if self._gen_pool is None:
            self._gen_pool = generation.thread_pool(self.generator, self.inflight, f"kforge-generate-{self.problem_id}")
        slot = self._next_slot(expansion=exp, call_index=index, request=request, context=ctx, trimmed=trimmed)
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
        try:
            gen = slot.generation.result()
        except GenerationError as err:
            self._gen_failures += 1
            self._log(f"the model could not answer: {err}", "error")
            self._give_back_call(slot)
            return
        if gen.cancelled:
            self._log("generation cancelled", persist=False)
            self._give_back_call(slot)
            return
        self._gen_failures = 0
        if gen.finish_reason == "repeating":
            self._log(f"the model kept repeating itself: stopped after {gen.completion_tokens} tokens", "warning")
        self._tokens_per_s = gen.tokens_per_s or self._tokens_per_s
        self.tally.llm_calls = max(self.tally.llm_calls, slot.call_index + 1)
        slot.node_id, state = self._save_answer(slot, gen)
        if state == "pending" and submit:
            if self._paused:
                slot.deferred = True
            else:
                self._submit(slot)

    def _give_back_call(self, slot: Slot) -> None:
        if slot.call_index is not None and slot.call_index == self._next_call - 1:
            self._next_call = slot.call_index

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
            self._log(f"node {node_id} repeats node {answer.duplicate_of}; not evaluated, not counted", "warning")
            self.store.update_stats(backprop(self._tree(), node_id, 0.0))
        return node_id, state
