"""The preferences take effect through the variables the core already reads (``paths`` for the
models and sessions folders, llama.cpp's thread count), so the engine thread and the worker
processes it starts see the same choice without new parameters; the evaluator's worker count is
handed to the search runner (``engine_factory``).

An empty preference gives the value back to whatever the environment said when the app started.
"""

from __future__ import annotations

import os

from .settings import Preferences

_ENV = {"models_dir": "KFORGE_MODELS_DIR", "sessions_dir": "KFORGE_SESSIONS_DIR", "threads": "KFORGE_LLM_THREADS"}
_AT_START: dict[str, str | None] = {}


def apply_preferences(p: Preferences) -> None:
    for field, var in _ENV.items():
        if var not in _AT_START:
            _AT_START[var] = os.environ.get(var)
        value = getattr(p, field)
        if value:  # a folder, or a thread count above 0
            os.environ[var] = str(value)
        elif _AT_START[var] is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = _AT_START[var]


def workers(p: Preferences) -> int | None:
    """Evaluator worker processes, or None for the evaluator's own choice."""
    return p.workers if p.workers > 0 else None
