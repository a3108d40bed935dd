"""The window's model choice as the search runner takes it, and the search it starts.

Called on the engine thread (never the UI thread): loading a GGUF and spawning evaluator workers
take seconds. The runner (``search/runner.py``) builds the model, the evaluator and the engine; the
model is loaded lazily, on the first request that needs it, so a run that only evaluates (a
hand-edited child, pending nodes of a resumed session) does not wait for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..search import events as ev
from ..search.runner import ModelChoice, RunningSearch, SearchRunner, check_model, open_search
from .settings import LLMChoices


def model_choice(c: LLMChoices) -> ModelChoice:
    """The settings' model choice ("" for "not chosen", -1 GPU layers for "all")."""
    return ModelChoice(path=c.model_path or None, server_url=c.server_url or None,
                       server_model=c.server_model or None, context=c.context,
                       gpu_layers=None if c.gpu_layers < 0 else c.gpu_layers)


def describe_choice(c: LLMChoices) -> str:
    """A short name for the status bar: the server, the GGUF file name, or "default model"."""
    return model_choice(c).describe()


def check_choice(c: LLMChoices) -> None:
    """Raise with one sentence when the chosen model cannot be used (no loading, no network)."""
    check_model(model_choice(c))


def make_engine(request, emit: Callable[[object], None], store=None) -> RunningSearch:
    """Open the session (or reuse ``store``) and the search for ``request``, its events going to ``emit``."""
    from ..store import SessionStore

    if request.needs_model:
        check_choice(request.llm)  # a missing or broken model: one sentence now, not mid-search
    store = store or SessionStore.open(request.session_path)
    config = request.config
    if request.llm.temperature != config.temperature or request.llm.max_tokens != config.max_tokens:
        config = replace(config, temperature=request.llm.temperature, max_tokens=request.llm.max_tokens)
    say = lambda m: emit(ev.Log("info", m))  # noqa: E731
    workers = getattr(request, "workers", None)
    if workers is None:
        return open_search(store, request.problem_id, config, model_choice(request.llm), listener=emit, say=say)
    # Preferences set the evaluator's workers: open_search's steps, with that count
    runner = SearchRunner(model_choice(request.llm), lazy_model=True, workers=workers, say=say)
    try:
        engine = runner.engine(store, request.problem_id, config, emit)
    except Exception:
        runner.close()
        raise
    return RunningSearch(engine, runner)
