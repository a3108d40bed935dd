"""``SearchEngine``: the loop that asks the LLM, evaluates, backpropagates and saves every step.

A plain Python object (no Qt): views subscribe to the events of ``search.events`` and post the
commands from there (pause, resume, stop, pin, unpin, exclude, add child, expand from, set budget)
from any thread; ``run()`` blocks in the thread that drives the search.

Why it is shaped like this:
- The store is the only state. Every iteration re-reads the tree, so a resumed session, a pin made
  from the GUI, or a hand-edited child all look the same to the loop. A generated node is stored
  together with its LLM call; a verdict together with the node's new state; after ``kill -9``
  nodes caught mid-evaluation go back to pending and are evaluated again (nothing lost, nothing
  duplicated); an answer still being generated is simply asked for again.
- Scheduling: llama.cpp and a g++ build on the same few cores starve each other (measured: zero
  tokens in 4.5 CPU-minutes beside a build on 2 cores), so on machines with 4 cores or fewer the
  engine alternates generation and evaluation; on bigger machines it generates while candidates
  are evaluated.
- Determinism: directive choices and LLM sampling seeds derive from the session seed and the
  node/call counts, so a search with a temperature-0 model (or a fixed seed) replays exactly.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import queue
import random
import re
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace

from ..kernels.verdict import Verdict
from ..llm import prompts
from ..llm.generator import repeating
from ..problem.problem import Problem
from ..store import SearchState, SessionStore
from . import events as ev
from .config import SearchConfig
from .directives import (
    CORRECT_FIRST,
    choose_directive,
    directive_by_key,
    edit_target,
    expected_rate,
    length_parameter,
    open_tried,
    reduction_term,
    returns_value,
)
from .exemplars import (
    EPILOGUE_OPS,
    PROVIDED,
    SHARED_HELPERS,
    best_exemplar,
    collapse_helpers,
    epilogue_missing,
    exemplar_named,
    missing_ops,
    output_writer,
    provide_helpers,
    seed_exemplars,
)
from .scaffold import (
    FUNCTION,
    PRELUDE,
    Scaffold,
    ScaffoldError,
    autofix,
    build_scaffold,
    clean_kernel,
    function_head,
    function_text,
    kernel_from_answer,
    kernel_of_module,
    merge_functions,
    prune_unreachable,
    split_items,
)
from .strategies import MCTSParams, pending_repair, select
from .tree import Tree, backprop, reward

Listener = Callable[[ev.Event], None]
MAX_REPEATS = 8  # answers in a row that only repeat earlier kernels before the search gives up


@dataclass(frozen=True)
class Expansion:
    parent_id: int
    kind: str  # whole | edit | repair | module
    directive: str  # directive key ("key@function" when an edit targets one helper function)
    directive_text: str
    target: str = ""  # edit: the function to rewrite


def _signature_mismatch(scaffold: Scaffold, kernel: str) -> str | None:
    """The compiler accepts an entry point with other parameters than the stated signature, and the
    call would then fail at run time ("takes 9 arguments, got 11"); say so before any build."""
    from ..kernels.native import parse_exports

    found = parse_exports(kernel).get(scaffold.function)
    if found is None:
        return None
    want = [a.name for a in scaffold.args] + (["stream"] if scaffold.language == "cuda" else [])
    have = [n for _, n in found[1]]
    if len(have) == len(want):
        return None
    return (f"kernel.{'cu' if scaffold.language == 'cuda' else 'cpp'}:1:1: error: {scaffold.function} takes "
            f"{len(have)} parameters ({', '.join(have)}) but the stated signature has {len(want)} "
            f"({', '.join(want)}): keep the signature exactly as given\n")


def few_cores() -> bool:
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return n <= 4


def device_lines(device: str) -> str:
    try:
        from ..hardware import device_facts

        return device_facts(device).prompt_lines()
    except Exception:  # facts are a nicety in a prompt, never a reason to fail
        return ""


def environment_record(device: str) -> dict:
    try:
        from ..hardware import software_record

        return software_record(device)
    except Exception as err:
        return {"device": device, "error": str(err)}


def environment_differences(saved: dict, current: dict) -> list[str]:
    """What differs between the machine a session was measured on and this one (device, driver,
    CUDA, torch), as short phrases; empty when the verdicts still describe this machine."""
    out = []
    for key, label in (("device_name", "device"), ("driver", "driver"), ("cuda", "CUDA"), ("torch", "torch"),
                       ("arch", "architecture")):
        a, b = saved.get(key), current.get(key)
        if a and b and a != b:
            out.append(f"{label} {a} -> {b}")
    return out


def create_session(store: SessionStore, problem: Problem, config: SearchConfig, info: dict | None = None) -> int:
    """Add a problem to the session with its root node, its seed nodes and the search state.

    Seeds (exemplars whose signature fits this problem exactly) are pending nodes of origin
    ``seed``; the engine evaluates them first. Returns the problem id."""
    language = config.kernel_language
    problem_id = store.add_problem(problem, device=config.device, language=language, info=info or {})
    if not store.environment():
        store.set_environment(environment_record(config.device))
    with store.transaction():
        store.add_node(problem_id, None, "root", "root", "python", source=problem.source, state="evaluated",
                       note="the reference (PyTorch eager)")
        scaffold = _try_scaffold(problem, language) if config.scaffold or config.seeds else None
        root_id = store.root(problem_id).id
        if scaffold is not None and config.seeds:
            from ..llm.extract import normalize_code

            for exemplar, code in seed_exemplars(scaffold, problem.source):
                left_out = epilogue_missing(exemplar, scaffold)
                note = f"exemplar {exemplar.name}: {exemplar.about}"
                if left_out:
                    note += f" Leaves out {', '.join(left_out)}: its repair asks the model to add that."
                store.add_node(
                    problem_id, root_id, "seed", "seed", language, source=scaffold.module_source(code),
                    kernel_source=code, directive=f"exemplar:{exemplar.name}",
                    norm_code=normalize_code(code, language), note=note,
                )
        if config.seeds and config.compile_seed and config.device.startswith("cuda"):
            _add_compile_seed(store, problem_id, root_id, problem, config.device)
        store.save_search_state(SearchState(
            problem_id=problem_id, strategy=config.strategy, budget_candidates=config.budget_candidates,
            budget_minutes=config.budget_minutes, seed=config.seed, rng_state={"llm_calls": 0},
            config=config.to_dict(), status="new",
        ))
        store.log_event(problem_id, "created", f"search of {problem.name} created ({config.strategy}, "
                        f"{language}, budget {config.budget_candidates} candidates)")
    return problem_id


def _add_compile_seed(store: SessionStore, problem_id: int, root_id: int, problem: Problem, device: str) -> None:
    """torch.compile's own Triton code as a seed (generated in a subprocess): the search starts no
    slower than torch.compile. A model torch.compile cannot handle gets a logged reason instead."""
    from ..llm.extract import normalize_code
    from .inductor_seed import SeedError, inductor_module

    try:
        source = inductor_module(problem, device)
    except SeedError as err:
        store.log_event(problem_id, "seed", f"no torch.compile seed: {err}", "warning")
        return
    store.add_node(problem_id, root_id, "seed", "seed", "triton", source=source, kernel_source=source,
                   directive="torch.compile", norm_code=normalize_code(source, "python"),
                   note="torch.compile's own generated code (TorchInductor's Triton kernels), as a starting point")


def autofix_kernel(scaffold: Scaffold, kernel: str) -> tuple[str, str]:
    """Apply the mechanical fixes (``scaffold.autofix``) for the errors the syntax check shows, round
    by round, and keep the result only when it then compiles; (kernel, the node's note)."""
    try:
        from ..kernels.native import syntax_check
    except ImportError:
        return kernel, ""
    current, notes = kernel.strip() + "\n", []
    for _ in range(3):  # each round fixes what the compiler reported; stop when clean or stuck
        err = syntax_check(scaffold.kernel_file(current), scaffold.language)
        if not err:
            break
        fixed = autofix(current, PRELUDE[scaffold.language], err)
        if fixed is None:
            break
        current, notes = fixed[0].strip() + "\n", notes + fixed[1]
    else:
        err = syntax_check(scaffold.kernel_file(current), scaffold.language)
    if not notes or err:
        return kernel, ""  # only a fix that makes the kernel compile is kept
    return current, "autofix: " + ", ".join(dict.fromkeys(notes))


def _try_scaffold(problem: Problem, language: str) -> Scaffold | None:
    if language not in ("cpp", "cuda"):
        return None
    try:
        return build_scaffold(problem, language)
    except (ScaffoldError, Exception):  # an odd problem: fall back to whole-module prompts
        return None


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
        self._rng_state = dict(state.rng_state or {}) if state and isinstance(state.rng_state, dict) else {}
        self._elapsed0 = state.elapsed_s if state else 0.0
        self.record = store.problem(problem_id)
        self.problem = self.record.to_problem()
        self.language = self.record.language or config.kernel_language
        self._listeners: list[Listener] = []
        self._commands: queue.Queue = queue.Queue()
        self._cancel = threading.Event()
        self._stop = False
        self._paused = False
        self._focus = True
        self._forced: list[int] = []
        self._inflight: dict[cf.Future, int] = {}
        self._scaffold: Scaffold | None = None
        self._scaffold_done = False
        self._started = time.monotonic()
        self._tokens_per_s: float | None = None
        self._phase = "idle"
        self._gen_failures = 0
        self._warned_productivity = False
        self._thread: threading.Thread | None = None
        self.overlap = config.overlap if config.overlap is not None else not few_cores()

    # -- listeners and commands -----------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` (from the engine's thread) for every event; returns an unsubscribe."""
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
            budget_minutes=c.budget_minutes, seed=c.seed, rng_state=self._rng_state, config=c.to_dict(),
            status=status, elapsed_s=self.elapsed_s,
        ))

    def scaffold(self) -> Scaffold | None:
        if not self._scaffold_done:
            self._scaffold_done = True
            if self.config.scaffold:
                self._scaffold = _try_scaffold(self.problem, self.language)
                if self._scaffold is None and self.language in ("cpp", "cuda"):
                    self._log("this problem could not be scaffolded; the model writes whole ModelNew modules",
                              "warning")
        return self._scaffold

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
        self._save_state("running")
        reason, best_id = "error", None
        try:
            reason = self._loop()
        except Exception as err:  # the engine's own bug: say it once, keep the session consistent
            self._log(f"the search stopped on an internal error: {type(err).__name__}: {err}", "error",
                      traceback.format_exc())
            reason = "error"
        finally:
            self._abandon_inflight()
            best = self.store.chosen_node(self.problem_id)
            best_id = best.id if best else None
            status = {"stopped": "stopped", "error": "stopped"}.get(reason, "finished")
            self._save_state(status)
            self.store.log_event(self.problem_id, "finished", f"search {reason}", payload={"best": best_id})
        self._phase = "idle"
        self._emit(self._progress())
        finished = ev.Finished(self.problem_id, reason, best_id)
        self._emit(finished)
        return finished

    def _loop(self) -> str:
        while True:
            self.apply_commands()
            if self._stop:
                return "stopped"
            if self._paused:
                self._collect()  # evaluations already running may finish while paused
                self._wait(0.2)
                continue
            self._collect()
            tree = self._tree()
            queued = [n for n in tree.nodes.values() if n.state == "pending" and n.id not in self._inflight.values()]
            if queued and len(self._inflight) < self._max_inflight():
                self._submit(min(queued, key=lambda n: n.id).id)
                continue
            limit = self._limit_reached(tree)
            if limit:
                if self._inflight or queued:
                    self._wait(0.2)
                    continue
                return limit
            if self._inflight and not self.overlap:
                self._wait(0.2)
                continue
            if self._inflight and len(self._inflight) >= self._max_inflight():
                self._wait(0.2)
                continue
            expansion = self.next_expansion(tree)
            if expansion is None:
                if self._inflight:
                    self._wait(0.2)
                    continue
                self._log("nothing left to expand (every node is excluded)", "warning")
                return "budget"
            self._expand(expansion, tree)
            if self._gen_failures >= 3:
                self._log("the model failed three times in a row; stopping", "error")
                return "error"
            if self._repeats_in_a_row() >= MAX_REPEATS:
                self._log(f"the model's last {MAX_REPEATS} answers all repeated earlier kernels; stopping (a larger "
                          "model or a higher temperature will explore further)", "warning")
                return "budget"

    def _repeats_in_a_row(self) -> int:
        """How many of the newest LLM answers were duplicates (not candidates, but time spent)."""
        n = 0
        for node in sorted(self._tree().nodes.values(), key=lambda x: -x.id):
            if node.origin != "llm":
                continue
            if node.state != "duplicate":
                break
            n += 1
        return n

    def _max_inflight(self) -> int:
        return max(1, int(getattr(self.evaluator, "workers", 1))) if self.overlap else 1

    def _limit_reached(self, tree: Tree) -> str | None:
        c = self.config
        if c.budget_minutes is not None and self.elapsed_s >= c.budget_minutes * 60:
            return "time"
        if c.budget_candidates is not None:
            counted = sum(1 for n in tree.nodes.values() if n.origin in ("llm", "user")
                          and n.state in ("pending", "evaluating", "evaluated", "no_code"))
            if counted >= c.budget_candidates:
                return "budget"
        cap = c.llm_call_cap
        if cap is not None and int(self._rng_state.get("llm_calls", 0)) >= cap:
            self._log(f"stopped after {cap} LLM calls: the model keeps repeating earlier answers", "warning")
            return "budget"
        return None

    def _wait(self, timeout: float) -> None:
        if self._inflight:
            cf.wait(list(self._inflight), timeout=timeout, return_when=cf.FIRST_COMPLETED)
        else:
            try:
                cmd = self._commands.get(timeout=timeout)
            except queue.Empty:
                return
            self._apply(cmd)

    # -- commands --------------------------------------------------------------------------------------

    def apply_commands(self) -> None:
        """Apply every queued command now (the loop does this between steps)."""
        while True:
            try:
                cmd = self._commands.get_nowait()
            except queue.Empty:
                return
            self._apply(cmd)

    def _apply(self, cmd: ev.Command) -> None:
        pid = self.problem_id
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
        elif isinstance(cmd, ev.Pin):
            if self.store.node(cmd.node_id) is None:
                return self._log(f"cannot pin node {cmd.node_id}: no such node", "warning")
            old = self.store.pinned_node(pid)
            self.store.set_pinned(cmd.node_id, True)
            self._focus = cmd.focus
            self.store.log_event(pid, "pin", f"node {cmd.node_id} pinned", payload={"node": cmd.node_id})
            if old and old.id != cmd.node_id:
                self._emit(ev.NodeChanged(pid, old.id))
            self._emit(ev.NodeChanged(pid, cmd.node_id))
        elif isinstance(cmd, ev.Unpin):
            self.store.set_pinned(cmd.node_id, False)
            self.store.log_event(pid, "unpin", f"node {cmd.node_id} unpinned", payload={"node": cmd.node_id})
            self._emit(ev.NodeChanged(pid, cmd.node_id))
        elif isinstance(cmd, ev.Exclude):
            self.store.set_excluded(cmd.node_id, cmd.excluded)
            self.store.log_event(pid, "exclude", f"node {cmd.node_id} {'excluded' if cmd.excluded else 'included'}",
                                 payload={"node": cmd.node_id, "excluded": cmd.excluded})
            self._emit(ev.NodeChanged(pid, cmd.node_id))
        elif isinstance(cmd, ev.AddChild):
            self._add_user_child(cmd)
        elif isinstance(cmd, ev.ExpandFrom):
            if self.store.node(cmd.node_id) is not None:
                self._forced.append(cmd.node_id)
                self._log(f"next expansion from node {cmd.node_id}")
        elif isinstance(cmd, ev.SetBudget):
            self.config = replace(
                self.config,
                budget_candidates=cmd.candidates if cmd.candidates is not None else self.config.budget_candidates,
                budget_minutes=cmd.minutes if cmd.minutes is not None else self.config.budget_minutes,
            )
            self._save_state("paused" if self._paused else "running")
            self._log(f"budget set to {self.config.budget_candidates} candidates"
                      + (f", {self.config.budget_minutes:g} minutes" if self.config.budget_minutes else ""))
            self._emit(self._progress())

    def _add_user_child(self, cmd: ev.AddChild) -> None:
        from ..llm.extract import normalize_code

        parent = self.store.node(cmd.parent_id)
        if parent is None or parent.problem_id != self.problem_id:
            return self._log(f"cannot add a child to node {cmd.parent_id}: no such node here", "warning")
        kernel = kernel_of_module(cmd.source) or ""
        norm = normalize_code(kernel, self.language) if kernel else normalize_code(cmd.source, "python")
        dup = self.store.find_duplicate(self.problem_id, norm)
        node_id = self.store.add_node(
            self.problem_id, cmd.parent_id, "user", "user", self.language, source=cmd.source, kernel_source=kernel,
            directive="hand edit", state="duplicate" if dup else "pending", note=cmd.note, norm_code=norm,
            duplicate_of=dup,
        )
        self.store.log_event(self.problem_id, "node_added", f"hand-edited child {node_id} of {cmd.parent_id}",
                             payload={"node": node_id, "origin": "user"})
        self._emit(ev.NodeAdded(self.problem_id, node_id, cmd.parent_id, "user", "duplicate" if dup else "pending"))
        if dup:
            self._log(f"node {node_id} has the same code as node {dup}; not evaluated again", "warning")

    # -- evaluation --------------------------------------------------------------------------------------

    def _submit(self, node_id: int) -> None:
        node = self.store.node(node_id)
        if node is None:
            return
        self.store.set_state(node_id, "evaluating")
        self._phase = "building"
        self._emit(ev.NodeChanged(self.problem_id, node_id))
        self._emit(self._progress())
        kernel = kernel_of_module(node.source) if node.language in ("cpp", "cuda") else None
        if kernel and re.search(r"#\s*include\s*[<\"](torch|ATen|pybind11|c10)", kernel):
            kernel = None  # needs torch's headers: only the real build can tell
        if self.config.syntax_check and kernel:
            error = self._syntax_check(node, kernel)
            if error is not None:
                self._finish_node(node_id, error)
                return
        fut = self.evaluator.submit(self.problem, node.source)
        self._inflight[fut] = node_id

    def _syntax_check(self, node, kernel: str) -> Verdict | None:
        """g++/nvcc -fsyntax-only on the module's native kernel (0.2 s instead of a build): most
        compile errors of a small model are caught before a worker is involved."""
        try:
            from ..kernels.native import syntax_check
        except ImportError:
            return None
        scaffold = self.scaffold()
        text = scaffold.kernel_file(kernel) if scaffold else PRELUDE.get(node.language, "") + "\n" + kernel
        t0 = time.perf_counter()
        err = syntax_check(text, node.language)
        if err is None and scaffold is not None:
            err = _signature_mismatch(scaffold, kernel)
        if err is None:
            return None
        first = next((ln.strip() for ln in err.splitlines() if "error" in ln), err.strip().splitlines()[0] if err.strip() else err)
        return Verdict(status="compile_error", reason=f"the kernel does not compile: {first[:200]}",
                       device=self.config.device, language=node.language, build_s=time.perf_counter() - t0,
                       log=err, policy_flags=("syntax_check",))

    def _collect(self) -> None:
        done = [f for f in self._inflight if f.done()]
        for fut in done:
            node_id = self._inflight.pop(fut)
            try:
                verdict = fut.result()
            except Exception as err:
                verdict = Verdict(status="crashed", reason=f"the evaluator failed: {type(err).__name__}: {err}",
                                  device=self.config.device)
            self._finish_node(node_id, verdict)

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
        """On stop: work still running is abandoned; its nodes stay pending and a resume redoes it."""
        for fut, node_id in list(self._inflight.items()):
            fut.cancel()
            self.store.set_state(node_id, "pending")
        self._inflight.clear()

    def _check_productivity(self) -> None:
        if self._warned_productivity:
            return
        p = self.store.productivity(self.problem_id)
        if p.suggestion:
            self._warned_productivity = True
            self._log(p.suggestion, "warning")

    # -- expansion ---------------------------------------------------------------------------------------

    def _start_node(self, tree: Tree) -> int:
        pinned = next((n for n in tree.nodes.values() if n.pinned), None)
        if self._focus and pinned is not None and (tree.expandable(pinned.id) or pinned.origin == "root"):
            return pinned.id
        return tree.root_id

    def next_expansion(self, tree: Tree | None = None) -> Expansion | None:
        """What the loop would expand next (forced, then a repair, then the strategy's pick)."""
        tree = tree or self._tree()
        c = self.config
        while self._forced:
            node_id = self._forced.pop(0)
            if node_id in tree.nodes and not tree.excluded(node_id):
                if tree.repairable(node_id):
                    return self._expansion(tree, node_id, "repair")
                if tree.expandable(node_id):
                    return self._expansion(tree, node_id, None)
        repair = pending_repair(tree, c.repairs)
        if repair is not None:
            exp = self._expansion(tree, repair, "repair")
            if exp.directive != "repair" or not self._repairs_given_up(tree):
                return exp
        start = self._start_node(tree)
        if start is None or tree.excluded(start):
            return None
        node_id = select(c.strategy, tree, start, MCTSParams(c.exploration, c.widening_k, c.widening_alpha),
                         chance=lambda i: self._edit_chance(tree, i))
        if not tree.expandable(node_id):
            return None
        return self._expansion(tree, node_id, None)

    def _edit_chance(self, tree: Tree, node_id: int) -> float:
        """How likely the model is to carry out the edit this node would be asked for next (1.0 for
        the root, whose from-scratch kernels have no directive record)."""
        node = tree.node(node_id)
        if node.origin == "root" or self.scaffold() is None or node.language != self.language:
            return 1.0
        exp = self._expansion(tree, node_id, None)
        d = directive_by_key(self.language, exp.directive.split("@")[0])
        return expected_rate(d, tree.directive_record()) if d is not None else 1.0

    def _repairs_given_up(self, tree: Tree) -> bool:
        """Whether "fix it" repairs have stopped paying on this problem: ``repair_patience`` attempts
        and none correct. Measured with the default model, 5 of 75 such repairs were correct (and 90
        more repeated the broken code), against about a third of edits: the budget goes to edits
        (``benchmarks/directive_record.py``).
        Named completions of an incomplete seed are not affected."""
        patience = self.config.repair_patience
        if patience is None:
            return False
        ok, tried = tree.repair_record()
        if ok or tried < patience:
            return False
        if not self._rng_state.get("repairs_given_up"):
            self._rng_state["repairs_given_up"] = True
            self._log(f"none of {tried} repairs was correct: no more repairs on this problem, the budget goes to "
                      "new edits (a larger model repairs better)", "warning")
        return True

    def _expansion(self, tree: Tree, node_id: int, kind: str | None) -> Expansion:
        node = tree.node(node_id)
        scaffold = self.scaffold()
        if kind is None:
            if scaffold is None or (node.origin != "root" and node.language != self.language):
                kind = "module"  # no scaffold, or a node in another language (torch.compile's Triton seed)
            else:
                kind = "whole" if node.origin == "root" else "edit"
        if kind == "repair":
            completion = self._completion(node) if scaffold is not None else None
            if completion is not None:
                return completion
            changed = self._edited_function(node) if scaffold is not None else None
            return Expansion(node_id, "repair", "repair", "fix the error", changed or "")
        n_children = len(tree.children(node_id, counted=False))
        rng = random.Random(f"{self.config.seed}:{node_id}:{n_children}")
        full = None
        if node.origin == "root" and kind == "whole":
            # a kernel from scratch: correctness first. Once the model has answered that request by
            # copying the exemplar unchanged (or has a correct kernel already), later whole kernels
            # are the exemplar rewritten with one named optimization, so that they differ
            d = CORRECT_FIRST.get(self.language) or choose_directive(self.language, {}, rng)
            answered = [k for k in tree.children(node_id, False) if k.kind == "whole"
                        and (k.state == "duplicate" or (k.verdict is not None and k.verdict.status == "ok"))]
            found = best_exemplar(scaffold, self.problem.source) if scaffold is not None and self.config.exemplars else None
            if answered and found is not None:
                tried = {k.directive: "failed" for k in tree.children(node_id, False) if k.kind == "whole"}
                d = choose_directive(self.language, tried, rng, kernel=found[1], aten_ops=scaffold.aten_ops,
                                     record=tree.directive_record())
                return Expansion(node_id, kind, d.key, d.prompt_text("cuda" if self.language == "cuda" else "cpp"))
        else:
            full = self.store.node(node_id) if kind == "edit" else None
            functions = [(it.name, it.text) for it in split_items(full.kernel_source) if it.kind == "function"
                         and it.name not in SHARED_HELPERS.get(self.language, {})] if full else []
            lang = node.language if node.origin != "root" and kind == "module" else self.language
            tried = tree.tried(node_id)
            d = choose_directive(lang, open_tried(tried, functions, FUNCTION) if full else tried, rng,
                                 first=node.origin == "root", kernel=full.kernel_source if full else "",
                                 aten_ops=scaffold.aten_ops if scaffold else (), record=tree.directive_record())
        if kind == "edit":
            target = edit_target(functions, d.key, FUNCTION, rng, tried)
            key = d.key if target == FUNCTION else f"{d.key}@{target}"
            helper = dict(functions)[target] if target != FUNCTION else ""
            text = d.prompt_text("cuda" if self.language == "cuda" else "cpp", length_parameter(helper),
                                 returns_value(helper), reduction_term(helper) if d.key == "unroll_accumulators" else "")
            return Expansion(node_id, kind, key, text, target)
        return Expansion(node_id, kind, d.key, d.text)

    def _completion(self, node) -> Expansion | None:
        """The repair of a seed that leaves out an elementwise epilogue on purpose: one named change
        in the function that writes the output ("apply silu to every value you store")."""
        if node.origin != "seed" or not node.directive.startswith("exemplar:"):
            return None
        scaffold = self.scaffold()
        exemplar = exemplar_named(node.directive.split(":", 1)[1], self.language)
        missing = epilogue_missing(exemplar, scaffold) if exemplar is not None else []
        if not missing:
            return None
        full = self.store.node(node.id)
        target = output_writer(full.kernel_source, scaffold)
        table = EPILOGUE_OPS[self.language]
        expr = "v"
        for op in missing:
            expr = table[op].replace("v", f"({expr})") if expr != "v" else table[op]
        names = " then ".join(missing)
        text = (f"The kernel computes everything except the final {names}. Apply {names} to every value `{target}` "
                f"stores: compute the value exactly as now into `float v`, then store `{expr}` instead.")
        provided = _provided_note(expr, self.language)
        if provided:
            text += f" ({provided}.)"
        text += f"\nThe pattern:\n```{'cuda' if self.language == 'cuda' else 'cpp'}\nfloat v = /* the value stored now */;\n" \
                f"y[i] = {expr};\n```"
        return Expansion(node.id, "repair", f"complete:{'+'.join(missing)}@{target}", text, target)

    def _edited_function(self, node) -> str | None:
        """The one function a failed edit changed in its correct parent (None when it changed several,
        added some, or the parent was not correct): its repair asks for that function back."""
        if node.kind != "edit" or node.parent_id is None:
            return None
        parent = self.store.node(node.parent_id)
        if parent.verdict is None or parent.verdict.status != "ok":
            return None
        before = {it.name: it.text for it in split_items(parent.kernel_source) if it.kind == "function"}
        after = {it.name: it.text for it in split_items(self.store.node(node.id).kernel_source) if it.kind == "function"}
        changed = [n for n in after if before.get(n) != after[n]]
        if len(changed) != 1 or changed[0] not in before or set(after) - set(before):
            return None
        return changed[0]

    def _prompt(self, exp: Expansion, tree: Tree) -> prompts.PromptContext:
        parent = self.store.node(exp.parent_id)
        scaffold = self.scaffold()
        failed = tuple(f"{_directive_label(self.language, k)}: {why}" for k, why in tree.failed_approaches(exp.parent_id))
        common = dict(language=self.language, problem_source=self.problem.source,
                      device=device_lines(self.config.device), failed=failed[-4:])
        if scaffold is not None:
            common.update(signature=scaffold.signature(), arguments=scaffold.describe_args())
        if exp.kind == "whole":
            ctx = prompts.PromptContext(kind="whole", directive=exp.directive_text, **common)
            if self.config.exemplars and scaffold is not None:
                found = best_exemplar(scaffold, self.problem.source)
                if found:
                    table = EPILOGUE_OPS.get(self.language, {})
                    missing = tuple(_epilogue_text(op, table, self.language) for op in missing_ops(found[0], scaffold))
                    ctx = replace(ctx, exemplar=collapse_helpers(found[1], self.language), exemplar_about=found[0].about,
                                  exemplar_missing=missing)
            return ctx
        shown = collapse_helpers(parent.kernel_source, self.language)  # the parent as the prompt shows it
        if exp.kind == "edit":
            return prompts.PromptContext(kind="edit", directive=exp.directive_text, parent_code=shown,
                                         parent_summary=prompts.parent_summary(parent.verdict),
                                         target=exp.target, **common)
        if exp.kind == "repair" and exp.directive.startswith("complete:"):
            return prompts.PromptContext(kind="edit", directive=exp.directive_text, parent_code=shown,
                                         target=exp.target, edit_intro="This kernel is correct except that it "
                                         "leaves out the last operation:", **common)
        if parent.origin != "root" and parent.language != self.language:
            common["language"] = parent.language
            scaffold = None  # the parent is a whole module in its own language: the answer is one too
        if exp.kind == "repair":
            code = shown if scaffold is not None else parent.source
            common["failed"] = ()
            kind = "repair" if scaffold is not None else "module"
            previous = ""
            if exp.target and scaffold is not None and parent.parent_id is not None:
                previous = function_text(self.store.node(parent.parent_id).kernel_source, exp.target) or ""
            return prompts.PromptContext(kind=kind, parent_code=code, error=prompts.verdict_feedback(parent.verdict),
                                         target=exp.target if previous else "", previous=previous, **common)
        # module: the model writes the whole ModelNew (no scaffold)
        parent_code = parent.source if parent.origin != "root" else ""
        return prompts.PromptContext(kind="module", directive=exp.directive_text, parent_code=parent_code, **common)

    def _expand(self, exp: Expansion, tree: Tree) -> None:
        from ..llm.generator import GenerationError

        c = self.config
        ctx = self._prompt(exp, tree)
        try:
            ctx, trimmed = prompts.fit(ctx, self.generator.count_tokens, self.generator.context_size, c.max_tokens)
        except prompts.PromptTooLong as err:
            self._gen_failures += 1
            self._log(str(err), "error")
            return
        calls = int(self._rng_state.get("llm_calls", 0))
        llm_seed = (c.seed * 1_000_003 + calls) % (2**31)
        temperature = c.temperature
        if exp.kind == "repair" and any(k.kind == "repair" and k.state == "duplicate"
                                        for k in tree.children(exp.parent_id, counted=False)):
            temperature = max(temperature, 1.0)  # the first repair repeated the code: ask for variety
        if ctx.kind == "module" and self.language == "triton" and getattr(self.generator, "raw_completion", False):
            # a model trained on KernelLLM's raw prompt (no chat template) gets exactly that prompt
            request = prompts.kernelllm_request(self.problem.source, max_tokens=c.max_tokens,
                                                temperature=temperature, top_p=c.top_p, seed=llm_seed)
        else:
            request = prompts.request(ctx, max_tokens=c.max_tokens, temperature=temperature, top_p=c.top_p,
                                      seed=llm_seed, prefill=self._prefill(ctx))
        self._phase = "generating"
        self._emit(self._progress())
        self._log(f"asking the model: {exp.kind} from node {exp.parent_id} ({exp.directive})", persist=False)
        last = [time.monotonic()]
        n_tok = [0]
        t0 = time.monotonic()
        halt = _Halt(self._cancel)
        streamed: list[str] = []

        def on_token(text: str) -> None:
            n_tok[0] += 1
            streamed.append(text)
            if n_tok[0] % 16 == 0 and not halt.looping and repeating("".join(streamed)):
                halt.looping = True  # the model is in a loop: the rest of the budget would be more of it
                halt.set()
            now = time.monotonic()
            tps = n_tok[0] / (now - t0) if now > t0 else None
            self._emit(ev.TokenStream(self.problem_id, text, tps))
            if now - last[0] > 1.0:
                last[0] = now
                self._tokens_per_s = tps
                self._emit(self._progress())
            self._drain_light_commands()

        try:
            gen = self.generator.generate(request, on_token=on_token, cancel=halt)
        except GenerationError as err:
            self._gen_failures += 1
            self._log(f"the model could not answer: {err}", "error")
            return
        self._gen_failures = 0
        if halt.looping and not self._cancel.is_set():
            gen = replace(gen, finish_reason="repeating", cancelled=False)
            self._log(f"the model kept repeating itself: stopped after {gen.completion_tokens} tokens", "warning")
        if gen.cancelled:
            self._log("generation cancelled", persist=False)
            return
        self._tokens_per_s = gen.tokens_per_s or self._tokens_per_s
        self._rng_state["llm_calls"] = calls + 1
        self._record_answer(exp, ctx, request, gen, trimmed)

    def _prefill(self, ctx: prompts.PromptContext) -> str:
        """The start of the answer to a request that changes one function: the fence and that function's
        first line. Asked to edit the entry point, the default model copied every helper before it
        (the row-softmax exemplar's ``fast_exp`` alone is 20 lines) and ran out of tokens before the
        function it had to change: 18 of the 62 failed candidates at ``97af8fd``
        (``benchmarks/directive_record.py``); begun for it, the answer is that function."""
        if not self.config.prefill or self.scaffold() is None:
            return ""
        if ctx.kind == "edit":
            head = function_head(ctx.parent_code, ctx.target or FUNCTION)
        elif ctx.kind == "repair" and ctx.target and ctx.previous:
            head = function_head(ctx.previous, ctx.target)
        else:
            return ""
        return f"```{prompts.FENCE.get(ctx.language, 'cpp')}\n{head}\n" if head else ""

    def _autofix(self, scaffold: Scaffold, kernel: str) -> tuple[str, str]:
        if not self.config.syntax_check:
            return kernel, ""
        return autofix_kernel(scaffold, kernel)

    def _drain_light_commands(self) -> None:
        """During generation: apply commands that do not need the loop (pin, exclude, budget...)."""
        pending = []
        while True:
            try:
                cmd = self._commands.get_nowait()
            except queue.Empty:
                break
            if isinstance(cmd, (ev.Pin, ev.Unpin, ev.Exclude, ev.SetBudget)):
                self._apply(cmd)
            else:
                pending.append(cmd)
        for cmd in pending:
            self._commands.put(cmd)

    def _record_answer(self, exp: Expansion, ctx, request, gen, trimmed) -> None:
        from ..llm.extract import extract_code, normalize_code

        scaffold = self.scaffold()
        parent = self.store.node(exp.parent_id)
        finished = gen.finish_reason not in ("length", "repeating")
        kernel, source, note = "", "", ""
        if ctx.kind in ("whole", "edit", "repair"):
            wanted = exp.target or FUNCTION
            ex = extract_code(gen.text, function=wanted, language=self.language, finished=finished)
            code = clean_kernel(ex.code) if ex.ok else None
            if code is None and ctx.kind in ("edit", "repair"):
                code = kernel_from_answer(gen.text)  # a changed helper alone is a valid edit
            if code is not None:
                kernel = merge_functions(parent.kernel_source, code) if ctx.kind in ("edit", "repair") else code
                kernel = prune_unreachable(kernel)
                kernel, provided = provide_helpers(kernel, self.language)
                kernel, note = self._autofix(scaffold, kernel)
                if provided:
                    note = "; ".join(x for x in (note, f"{', '.join(provided)} provided") if x)
                source = scaffold.module_source(kernel)
            else:
                note = ex.problem or "the answer had no usable kernel code"
                if gen.finish_reason == "repeating":
                    note = (f"the model kept repeating itself and never finished {wanted} (stopped after "
                            f"{gen.completion_tokens} tokens; a larger model loops less)")
        else:
            ex = extract_code(gen.text, finished=finished)
            if ex.ok:
                source = ex.code
                kernel = kernel_of_module(source) or source
            else:
                note = ex.problem or "the answer had no usable code"
        if source:
            norm = normalize_code(kernel if ctx.kind != "module" else source, self.language if ctx.kind != "module" else "python")
            dup = self.store.find_duplicate(self.problem_id, norm)
        else:
            norm, dup = "", None
        state = "no_code" if not source else ("duplicate" if dup else "pending")
        if request.prompt is not None:
            shown = request.prompt
        else:
            shown = "\n\n".join(f"[{m.role}]\n{m.content}" for m in request.messages)
            if request.prefill:
                shown += f"\n\n[assistant, begun for the model]\n{request.prefill}"
        with self.store.transaction():
            call_id = self.store.add_llm_call(
                self.problem_id, exp.kind, gen.model, shown, gen.text,
                gen.prompt_tokens, gen.completion_tokens, gen.seconds,
                {"temperature": request.temperature, "seed": request.seed, "max_tokens": request.max_tokens,
                 "finish_reason": gen.finish_reason, "trimmed": list(trimmed), "tokens_per_s": gen.tokens_per_s,
                 "prompt_seconds": gen.prompt_seconds},
            )
            language = parent.language if ctx.kind == "module" and parent.origin != "root" else self.language
            node_id = self.store.add_node(
                self.problem_id, exp.parent_id, "llm", exp.kind if exp.kind != "module" else "whole", language,
                source=source, kernel_source=kernel, directive=exp.directive, state=state, note=note,
                norm_code=norm, duplicate_of=dup, llm_call_id=call_id,
            )
            self.store.log_event(self.problem_id, "node_added", f"node {node_id} ({exp.kind}, {state})",
                                 payload={"node": node_id, "parent": exp.parent_id, "state": state})
        self._emit(ev.NodeAdded(self.problem_id, node_id, exp.parent_id, "llm", state))
        if state == "no_code":
            self._log(f"node {node_id}: no usable code ({note})", "warning")
            tree = self._tree()
            self.store.update_stats(backprop(tree, node_id, 0.0))
            for i in tree.ancestors(node_id):
                self._emit(ev.NodeChanged(self.problem_id, i))
            self._emit(self._progress())
        elif state == "duplicate":
            self._log(f"node {node_id} repeats node {dup}; not evaluated, not counted", "warning")
            tree = self._tree()  # not a candidate, but the expansion was spent: visits, no value
            self.store.update_stats(backprop(tree, node_id, 0.0))


def _epilogue_text(op: str, table: dict[str, str], language: str) -> str:
    """How a whole-kernel prompt names an operator the exemplar leaves out."""
    if op not in table:
        return op
    provided = _provided_note(table[op], language)
    return f"{op} (of a value v: {table[op]}{'; ' + provided if provided else ''})"


def _provided_note(code: str, language: str) -> str:
    """What a prompt says about the shared helpers (``provide_helpers``) that ``code`` calls."""
    names = [n for n in SHARED_HELPERS.get(language, {}) if f"{n}(" in code]
    return f"`{names[0]}` is {PROVIDED}" if names else ""


class _Halt(threading.Event):
    """The cancel event one generation watches: set by the engine's stop, or by the engine itself when
    the answer falls into a loop (``looping``)."""

    def __init__(self, stop: threading.Event) -> None:
        super().__init__()
        self._stop = stop
        self.looping = False

    def is_set(self) -> bool:
        return super().is_set() or self._stop.is_set()


def _directive_label(language: str, key: str) -> str:
    d = directive_by_key(language, key.split("@")[0])
    return d.text.split(":")[0].rstrip(".") if d else key
