"""Where Kernel Forge Desktop keeps its files (overridable by environment variables).

- models:   $KFORGE_MODELS_DIR, else ``models/`` of a source checkout, else <user data>/models
- sessions: $KFORGE_SESSIONS_DIR, else <user data>/sessions
- builds:   $KFORGE_BUILD_CACHE, else <user cache>/builds (content-hashed kernel builds)
- memory:   $KFORGE_MEMORY_DIR, else <user data>/memory (kernels the user's sessions verified)
- gate:     $KFORGE_GATE_DIR, else <user cache>/gate (the lock files that keep one process's model
            from generating while another times a kernel: ``kernels.gate``)
"""

from __future__ import annotations

import os
from pathlib import Path

APP = "kforge-desktop"
REPO_ROOT = Path(__file__).resolve().parent.parent
RESOURCES = REPO_ROOT / "resources"


def _platform_dir(kind: str) -> Path:
    """platformdirs where installed (the desktop app); XDG defaults on a GPU box that has only torch."""
    try:
        import platformdirs

        return Path(getattr(platformdirs, f"user_{kind}_dir")(APP))
    except ImportError:
        xdg = {"data": ("XDG_DATA_HOME", ".local/share"), "cache": ("XDG_CACHE_HOME", ".cache")}[kind]
        return Path(os.environ.get(xdg[0]) or Path.home() / xdg[1]) / APP


def user_data_dir() -> Path:
    return Path(os.environ.get("KFORGE_DATA_DIR") or _platform_dir("data"))


def checkout_models_dir() -> Path | None:
    """``models/`` beside the package when running from a source checkout."""
    cand = REPO_ROOT / "models"
    return cand if (REPO_ROOT / "pyproject.toml").exists() and cand.is_dir() else None


def models_dir() -> Path:
    env = os.environ.get("KFORGE_MODELS_DIR")
    if env:
        return Path(env)
    return checkout_models_dir() or (user_data_dir() / "models")


def sessions_dir() -> Path:
    return Path(os.environ.get("KFORGE_SESSIONS_DIR") or (user_data_dir() / "sessions"))


def memory_dir() -> Path:
    return Path(os.environ.get("KFORGE_MEMORY_DIR") or (user_data_dir() / "memory"))


def build_cache_dir() -> Path:
    env = os.environ.get("KFORGE_BUILD_CACHE")
    return Path(env) if env else _platform_dir("cache") / "builds"


def gate_dir() -> Path:
    env = os.environ.get("KFORGE_GATE_DIR")
    return Path(env) if env else _platform_dir("cache") / "gate"
