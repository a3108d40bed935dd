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
    device with ``workers`` processes) are closed by ``close``."""

    def __init__(self, model: ModelChoice | None = None, *, generator=None, evaluator=None,
                 workers: int | None = None, lazy_model: bool = False, say: Say = _quiet) -> None:
        self.model = model or ModelChoice()
        self.workers = workers
        self.lazy_model = lazy_model
        self._say = say
        self._generator, self._evaluator = generator, evaluator
        self._own_generator = self._own_evaluator = False

    def open_model(self):
        """The generator, opened now unless lent or lazy (a missing model is then said at once)."""
        if self._generator is None:
            self._generator = (LazyGenerator(self.model, self._say) if self.lazy_model
                               else open_generator(self.model, self._say))
            self._own_generator = True
        return self._generator

    def open_evaluator(self, device: str):
        if self._evaluator is None:
            from ..kernels.evaluator import Evaluator

            self._evaluator = Evaluator(device=device, workers=self.workers)
            self._own_evaluator = True
        return self._evaluator

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
