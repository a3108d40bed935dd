"""Building and running searches: the model, the evaluator and the engine for a problem.

The CLI, the GUI and the whole-model flow start their searches here, so what they share is decided
once: which model (a GGUF through llama.cpp, or an OpenAI-compatible server on this machine) and how
it is loaded, which evaluator, and who closes what. A ``SearchRunner`` opens the model and the
evaluator on first need (or uses ones the caller lends it, which it leaves open) and can run the
searches of several problems with them, as the whole-model flow does, one per target.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..store import SessionStore
from . import events as ev
from .commands import reverify
from .config import SearchConfig
from .engine import SearchEngine

Say = Callable[[str], None]


def _quiet(_message: str) -> None:
    pass


@dataclass(frozen=True)
class ModelChoice:
    """Which local model writes the kernels. ``path``: a GGUF (None: ``$KFORGE_MODEL``, else the
    default model); ``server_url``: an OpenAI-compatible server on this machine instead;
    ``context``: the context size (None: the backend's default); ``gpu_layers``: layers offloaded
    to the GPU (None: all of them where llama.cpp can)."""

    path: str | None = None
    server_url: str | None = None
    server_model: str | None = None
    context: int | None = None
    gpu_layers: int | None = None

    def describe(self) -> str:
        """A short name for a status line: the server, the GGUF file name, or "default model"."""
        if self.server_url:
            return f"server {self.server_url}"
        if self.path:
            return Path(self.path).name
        return "default model"


def check_model(choice: ModelChoice) -> None:
    """Raise with one sentence when the chosen model cannot be used (no loading, no network)."""
    if choice.server_url:
        from ..llm.server_backend import check_url

        check_url(choice.server_url)
        return
    from ..llm.discovery import resolve_model

    resolve_model(choice.path or None)


def open_generator(choice: ModelChoice, say: Say = _quiet):
    """The generator for ``choice``, loaded now; raises ``ModelNotFound``, ``GenerationError`` or
    ``ValueError`` (a server that is not on this machine) with one sentence."""
    if choice.server_url:
        from ..llm.server_backend import OpenAIServerGenerator

        say(f"connecting to the local model server at {choice.server_url}")
        return OpenAIServerGenerator(choice.server_url, model=choice.server_model or None, context_size=choice.context)
    from ..llm.discovery import resolve_model
    from ..llm.llama_backend import LlamaCppGenerator

    path = resolve_model(choice.path or None)
    say(f"loading {path.name}")
    return LlamaCppGenerator(path, n_ctx=choice.context, n_gpu_layers=choice.gpu_layers)


class LazyGenerator:
    """A generator that loads the real one on first use: a run that only evaluates (a hand-edited
    child, the pending nodes of a resumed session) does not wait seconds for a model it never asks."""

    def __init__(self, choice: ModelChoice, say: Say = _quiet) -> None:
        self.choice = choice
        self._say = say
        self._real = None
        self._lock = threading.Lock()

    def _get(self):
        with self._lock:
            if self._real is None:
                self._real = open_generator(self.choice, self._say)
            return self._real

    @property
    def loaded(self) -> bool:
        return self._real is not None

    @property
    def name(self) -> str:
        return self._real.name if self._real is not None else self.choice.describe()

    @property
    def context_size(self) -> int:
        return self._get().context_size

    @property
    def parallel(self) -> int:
        """Requests the model serves at once (a server says; llama.cpp in this process: one)."""
        return int(getattr(self._get(), "parallel", 1)) if self.choice.server_url else 1

    def count_tokens(self, text: str) -> int:
        return self._get().count_tokens(text)

    def generate(self, request, on_token=None, cancel=None):
        return self._get().generate(request, on_token=on_token, cancel=cancel)

    def close(self) -> None:
        with self._lock:
            real, self._real = self._real, None
        if real is not None:
            real.close()


class SearchRunner:
    """The model and the evaluator of one or more searches, and the engines that use them.

    ``generator``/``evaluator`` given here are lent and stay open; the ones the runner opens (the
    model of ``model``, loaded on first use when ``lazy_model``; an evaluator on the first search's
    device with ``workers`` processes) are closed by ``close``.

    ``devices`` (``kernels.devices.parse_devices``: several GPUs of this host) gives the evaluator
    one worker pool per GPU; ``ray`` (an address, or "auto") evaluates on the actors of a Ray
    cluster instead. Everything the runner opens shares one ``DeviceGate``: the model pauses between
    two tokens while a kernel is timed on any GPU of this host."""

    def __init__(self, model: ModelChoice | None = None, *, generator=None, evaluator=None,
                 workers: int | None = None, lazy_model: bool = False, say: Say = _quiet,
                 devices: list[str] | None = None, ray: str | None = None, ray_actors: int | None = None) -> None:
        from ..kernels.gate import DeviceGate

        self.model = model or ModelChoice()
        self.workers = workers
        self.lazy_model = lazy_model
        self.devices = list(devices or [])
        self.ray = ray
        self.ray_actors = ray_actors
        self.gate = getattr(evaluator, "gate", None) or DeviceGate()
        self._say = say
        self._generator, self._evaluator = generator, evaluator
        self._own_generator = self._own_evaluator = False
        self._device_evaluators: dict[str, object] = {}  # side-by-side searches: one evaluator per GPU

    def open_model(self):
        """The generator, opened now unless lent or lazy (a missing model is then said at once)."""
        if self._generator is None:
            self._generator = (LazyGenerator(self.model, self._say) if self.lazy_model
                               else open_generator(self.model, self._say))
            self._own_generator = True
        return self._generator

    def open_evaluator(self, device: str):
        """The evaluator of every search of this runner: on ``devices`` (else ``device``), or on Ray."""
        if self._evaluator is None:
            from ..kernels.devices import open_evaluator

            self._evaluator = open_evaluator(self.devices or [device], workers=self.workers, ray=self.ray,
                                             ray_actors=self.ray_actors, gate=self.gate, say=self._say)
            self._own_evaluator = True
        return self._evaluator

    def side_by_side(self) -> list[str]:
        """The GPUs that searches of several problems run on side by side, one search per GPU (the
        whole-model flow's targets); empty where they run one after the other on the evaluator."""
        if self._evaluator is not None or self.ray or len(self.devices) < 2:
            return []
        from ..kernels.devices import device_name, one_kind

        kept, left = one_kind(self.devices, {d: device_name(d) for d in self.devices})
        if left:
            self._say(f"left out {', '.join(left)}: another kind of GPU than {kept[0]}")
        return kept

    def run_side_by_side(self, store: SessionStore, jobs: list[tuple[int, SearchConfig]],
                         listener: Callable[[ev.Event], None] | None = None,
                         before: Callable[[int], None] | None = None) -> list[ev.Finished]:
        """Run the searches of ``jobs`` (problem id, config), each to its end, one per GPU of
        ``side_by_side()`` at a time (the next job goes to the first GPU that is free), all with
        the one model; in this thread, one after the other, when there are not two GPUs."""
        import dataclasses
        import queue

        gpus = self.side_by_side()
        if not gpus:
            out = []
            for pid, cfg in jobs:
                if before is not None:
                    before(pid)
                out.append(self.run(store, pid, cfg, listener))
            return out
        from ..kernels.evaluator import Evaluator

        generator = self.open_model()
        for d in gpus:
            if d not in self._device_evaluators:
                self._device_evaluators[d] = Evaluator(device=d, workers=self.workers, gate=self.gate)
        todo: queue.Queue = queue.Queue()
        for job in jobs:
            todo.put(job)
        results: dict[int, ev.Finished] = {}
        errors: list[BaseException] = []

        def serve(device: str) -> None:
            while not errors:
                try:
                    pid, cfg = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    if before is not None:
                        before(pid)
                    engine = SearchEngine(store, pid, generator, self._device_evaluators[device],
                                          dataclasses.replace(cfg, device=device))
                    if listener is not None:
                        engine.subscribe(listener)
                    results[pid] = engine.run()
                except BaseException as err:  # said by the caller, after the other searches stop
                    errors.append(err)

        threads = [threading.Thread(target=serve, args=(d,), name=f"kforge-search-{d}", daemon=True) for d in gpus]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return [results[pid] for pid, _ in jobs if pid in results]

    def engine(self, store: SessionStore, problem_id: int, config: SearchConfig | None = None,
               listener: Callable[[ev.Event], None] | None = None) -> SearchEngine:
        """An engine for ``problem_id`` of ``store`` (``config`` None: the one saved with the search)."""
        generator = self.open_model()
        state = store.search_state(problem_id)
        device = config.device if config is not None else SearchConfig.from_dict(state.config if state else {}).device
        engine = SearchEngine(store, problem_id, generator, self.open_evaluator(device), config)
        if listener is not None:
            engine.subscribe(listener)
        return engine

    def run(self, store: SessionStore, problem_id: int, config: SearchConfig | None = None,
            listener: Callable[[ev.Event], None] | None = None) -> ev.Finished:
        """Run one problem's search to its end in this thread."""
        return self.engine(store, problem_id, config, listener).run()

    def close(self) -> None:
        """Close what the runner opened (evaluator workers, a loaded model); lent ones stay open."""
        if self._own_evaluator:
            self._evaluator, self._own_evaluator = _close(self._evaluator), False
        for d in list(self._device_evaluators):
            _close(self._device_evaluators.pop(d))
        if self._own_generator:
            self._generator, self._own_generator = _close(self._generator), False

    def __enter__(self) -> SearchRunner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _close(thing) -> None:
    try:
        thing.close()
    except Exception:  # closing must not hide how the search ended
        pass


class RunningSearch:
    """An engine with the runner that owns its model and evaluator (the GUI's engine thread holds
    one); commands go to the engine, ``close`` releases the model and the evaluator."""

    def __init__(self, engine: SearchEngine, runner: SearchRunner) -> None:
        self.engine = engine
        self.runner = runner

    def command(self, cmd: ev.Command) -> None:
        self.engine.post(cmd)

    def run(self) -> ev.Finished:
        return self.engine.run()

    def close(self) -> None:
        self.runner.close()


def open_search(store: SessionStore, problem_id: int, config: SearchConfig, model: ModelChoice, *,
                lazy_model: bool = True, listener: Callable[[ev.Event], None] | None = None,
                say: Say = _quiet) -> RunningSearch:
    """A search ready to run, with its own model (loaded on first use) and evaluator."""
    runner = SearchRunner(model, lazy_model=lazy_model, say=say)
    try:
        engine = runner.engine(store, problem_id, config, listener)
    except Exception:
        runner.close()
        raise
    return RunningSearch(engine, runner)


def reverify_session(session_path: Path, device: str, say: Say = _quiet) -> str:
    """Re-verify and re-time the chosen kernel of every problem of a session on this machine, in the
    evaluator's worker processes (``commands.reverify``); returns the one-line summary."""
    from ..kernels.evaluator import Evaluator

    store = SessionStore.open(session_path)
    try:
        with Evaluator(device=device) as evaluator:
            return reverify(store, evaluator, device, say).summary
    finally:
        store.close()


def retime_session(session_path: Path, device: str, say: Say = _quiet) -> str:
    """Re-time the best few nodes of every problem of a session together (``retiming.retime_best``),
    so the chosen node is the fastest of one shared measurement; returns a one-line summary."""
    from ..kernels.evaluator import Evaluator
    from .retiming import retime_best

    store = SessionStore.open(session_path)
    try:
        with Evaluator(device=device) as evaluator:
            n = 0
            for rec in store.problems():
                n += len(retime_best(store, rec.id, rec.to_problem(), evaluator, lambda m, _lvl="info": say(m)))
                best = store.chosen_node(rec.id)
                if best is not None and best.speedup is not None:
                    say(f"{rec.name}: chosen #{best.id}, {best.speedup:.2f}x over eager")
            return f"re-timed {n} node(s) together with their reference"
    finally:
        store.close()
