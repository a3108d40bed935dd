"""Builds what a search needs from the window's choices: the model, the evaluator, the engine.

Called on the engine thread (never the UI thread): loading a GGUF and spawning evaluator workers
take seconds. The model is loaded lazily, on the first request that needs it, so a run that only
evaluates (a hand-edited child, pending nodes of a resumed session) does not wait for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..search import events as ev
from .settings import LLMChoices


class LazyGenerator:
    """A ``Generator`` that loads the real one (llama.cpp or a local server) on first use."""

    def __init__(self, choices: LLMChoices, say: Callable[[str], None] = lambda _m: None) -> None:
        self.choices = choices
        self._say = say
        self._real = None
        self._lock = threading.Lock()

    def _get(self):
        with self._lock:
            if self._real is None:
                self._real = open_generator(self.choices, self._say)
            return self._real

    @property
    def loaded(self) -> bool:
        return self._real is not None

    @property
    def name(self) -> str:
        return self._real.name if self._real is not None else describe_choice(self.choices)

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


def describe_choice(c: LLMChoices) -> str:
    """A short name for the status bar: the server, the GGUF file name, or "default model"."""
    if c.server_url:
        return f"server {c.server_url}"
    if c.model_path:
        from pathlib import Path

        return Path(c.model_path).name
    return "default model"


def open_generator(c: LLMChoices, say: Callable[[str], None] = lambda _m: None):
    """The real generator for ``c``; raises with one sentence when it cannot be had."""
    if c.server_url:
        from ..llm.server_backend import OpenAIServerGenerator

        say(f"connecting to the local model server at {c.server_url}")
        return OpenAIServerGenerator(c.server_url, model=c.server_model or None, context_size=c.context)
    from ..llm.discovery import resolve_model
    from ..llm.llama_backend import LlamaCppGenerator

    path = resolve_model(c.model_path or None)
    say(f"loading {path.name}")
    return LlamaCppGenerator(path, n_ctx=c.context, n_gpu_layers=None if c.gpu_layers < 0 else c.gpu_layers)


def check_choice(c: LLMChoices) -> None:
    """Raise with one sentence when the chosen model cannot be used (no loading, no network)."""
    if c.server_url:
        from ..llm.server_backend import check_url

        check_url(c.server_url)
        return
    from ..llm.discovery import resolve_model

    resolve_model(c.model_path or None)


class RunningSearch:
    """The engine with the model and evaluator it owns; ``close`` releases both."""

    def __init__(self, engine, generator, evaluator) -> None:
        self.engine = engine
        self.generator = generator
        self.evaluator = evaluator

    def command(self, cmd: object) -> None:
        self.engine.post(cmd)

    def run(self) -> object:
        return self.engine.run()

    def close(self) -> None:
        for thing in (self.generator, self.evaluator):
            try:
                thing.close()
            except Exception:
                pass


def make_engine(request, emit: Callable[[object], None], store=None) -> RunningSearch:
    """Open the session (or reuse ``store``), build generator + evaluator + engine for ``request``."""
    from dataclasses import replace

    from ..kernels.evaluator import Evaluator
    from ..search.engine import SearchEngine
    from ..store import SessionStore

    if request.needs_model:
        check_choice(request.llm)  # a missing or broken model: one sentence now, not mid-search
    store = store or SessionStore.open(request.session_path)
    config = request.config
    if request.llm.temperature != config.temperature or request.llm.max_tokens != config.max_tokens:
        config = replace(config, temperature=request.llm.temperature, max_tokens=request.llm.max_tokens)
    generator = LazyGenerator(request.llm, lambda m: emit(ev.Log("info", m)))
    evaluator = Evaluator(device=config.device)
    try:
        engine = SearchEngine(store, request.problem_id, generator, evaluator, config)
    except Exception:
        evaluator.close()
        raise
    engine.subscribe(emit)
    return RunningSearch(engine, generator, evaluator)
