"""What the window remembers between runs (QSettings): layout and geometry, recent sessions,
the search and LLM choices, the preferences (folders, workers, threads), the theme, the plot's
and the code view's modes, and whether the first-run tour was shown.

Typed accessors keep the keys in one place; QSettings stores strings on some platforms, so every
read converts.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings

ORG = "kforge-desktop"
APP = "Kernel Forge Desktop"
MAX_RECENT = 10


@dataclass(frozen=True)
class SearchChoices:
    """The toolbar's search settings: what the next Start uses."""

    budget: int = 12
    minutes: float = 0.0  # 0 = no time limit
    strategy: str = "mcts"
    device: str = "cpu"
    seed: int = 0


@dataclass(frozen=True)
class LLMChoices:
    """Which local model writes the kernels and how it runs."""

    model_path: str = ""  # a GGUF; "" = the default model
    server_url: str = ""  # an OpenAI-compatible server on this machine; "" = in-process llama.cpp
    server_model: str = ""
    gpu_layers: int = -1  # -1 = all layers when llama.cpp has GPU offload
    context: int = 8192
    temperature: float = 0.7
    max_tokens: int = 1024


@dataclass(frozen=True)
class Preferences:
    """Edit → Preferences: where models and sessions live and how many processes and threads the
    work may use. Empty or 0 means "the default" (``paths`` and the evaluator/llama.cpp choose)."""

    models_dir: str = ""
    sessions_dir: str = ""
    workers: int = 0  # evaluator worker processes; 0 = by device and cores
    threads: int = 0  # llama.cpp threads; 0 = all cores but one


def _conv(value, like):
    if value is None:
        return like
    try:
        if isinstance(like, bool):
            return value in (True, "true", "1", 1)
        if isinstance(like, int):
            return int(value)
        if isinstance(like, float):
            return float(value)
        return str(value)
    except (TypeError, ValueError):
        return like


class Settings:
    def __init__(self, qs: QSettings | None = None) -> None:
        self.qs = qs or QSettings(ORG, APP)

    # -- window ------------------------------------------------------------------------------
    def geometry(self) -> QByteArray | None:
        v = self.qs.value("window/geometry")
        return v if isinstance(v, QByteArray) and not v.isEmpty() else None

    def state(self) -> QByteArray | None:
        v = self.qs.value("window/state")
        return v if isinstance(v, QByteArray) and not v.isEmpty() else None

    def save_window(self, geometry: QByteArray, state: QByteArray) -> None:
        self.qs.setValue("window/geometry", geometry)
        self.qs.setValue("window/state", state)
        self.qs.sync()

    def clear_window(self) -> None:
        self.qs.remove("window")
        self.qs.sync()

    # -- recent sessions ---------------------------------------------------------------------
    def recent(self) -> list[str]:
        v = self.qs.value("recent/sessions") or []
        if isinstance(v, str):
            v = [v]
        return [p for p in v if p]

    def add_recent(self, path: str | Path) -> list[str]:
        p = str(Path(path).resolve())
        items = [p] + [x for x in self.recent() if x != p]
        items = items[:MAX_RECENT]
        self.qs.setValue("recent/sessions", items)
        self.qs.sync()
        return items

    def remove_recent(self, path: str) -> None:
        self.qs.setValue("recent/sessions", [x for x in self.recent() if x != path])

    # -- choices -----------------------------------------------------------------------------
    def _load(self, group: str, cls):
        default = cls()
        values = {f.name: _conv(self.qs.value(f"{group}/{f.name}"), getattr(default, f.name)) for f in fields(cls)}
        return cls(**values)

    def _store(self, group: str, obj) -> None:
        for f in fields(obj):
            self.qs.setValue(f"{group}/{f.name}", getattr(obj, f.name))
        self.qs.sync()

    def search(self) -> SearchChoices:
        return self._load("search", SearchChoices)

    def set_search(self, s: SearchChoices) -> None:
        self._store("search", s)

    def llm(self) -> LLMChoices:
        return self._load("llm", LLMChoices)

    def set_llm(self, c: LLMChoices) -> None:
        self._store("llm", c)

    def preferences(self) -> Preferences:
        return self._load("prefs", Preferences)

    def set_preferences(self, p: Preferences) -> None:
        self._store("prefs", p)

    # -- what views remember (plot x axis, code view modes) -----------------------------------
    def view_mode(self, key: str, default: str) -> str:
        v = self.qs.value(f"view/{key}")
        return str(v) if v not in (None, "") else default

    def set_view_mode(self, key: str, value: str) -> None:
        self.qs.setValue(f"view/{key}", value)

    # -- misc --------------------------------------------------------------------------------
    def theme(self) -> str:
        return str(self.qs.value("ui/theme") or "system")

    def set_theme(self, mode: str) -> None:
        self.qs.setValue("ui/theme", mode)

    def first_run_done(self) -> bool:
        return _conv(self.qs.value("ui/first_run_done"), False)

    def set_first_run_done(self, done: bool = True) -> None:
        self.qs.setValue("ui/first_run_done", done)
        self.qs.sync()
