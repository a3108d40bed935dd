"""The preferences take effect through the variables the core already reads (``paths`` for the
models and sessions folders, llama.cpp's thread count), so the engine thread and the worker
processes it starts see the same choice without new parameters; the evaluator's worker count is
handed to the search runner (``engine_factory``).

An empty preference leaves the environment alone (and gives back a value it had replaced).
"""

from __future__ import annotations

import os

from .settings import Preferences

_ENV = {"models_dir": "KFORGE_MODELS_DIR", "sessions_dir": "KFORGE_SESSIONS_DIR", "threads": "KFORGE_LLM_THREADS"}
_SET: dict[str, tuple[str | None, str]] = {}  # variable -> (its value before we set it, what we set)


def apply_preferences(p: Preferences) -> None:
    """Set the variables of the preferences that are set; give back the ones we set before and
    that are now cleared (unless something else changed them since)."""
    for field, var in _ENV.items():
        value = str(getattr(p, field) or "")
        if value in ("", "0"):
            if var in _SET:
                before, ours = _SET.pop(var)
                if os.environ.get(var) == ours:
                    if before is None:
                        os.environ.pop(var, None)
                    else:
                        os.environ[var] = before
            continue
        before = _SET[var][0] if var in _SET and os.environ.get(var) == _SET[var][1] else os.environ.get(var)
        _SET[var] = (before, value)
        os.environ[var] = value


def workers(p: Preferences) -> int | None:
    """Evaluator worker processes, or None for the evaluator's own choice."""
    return p.workers if p.workers > 0 else None
