"""Find GGUF models on this machine and pick the one to use.

Why a fixed search order: the user should be able to predict which model runs. An explicit
``--llm PATH`` wins, then ``$KFORGE_MODEL``, then the default model in the models directory, then
any other GGUF found in the models directory or the user data directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .. import paths
from .default_model import DEFAULT_VARIANT, VARIANTS, Variant, check_installed, installed_path
from .gguf import GGUFError, GGUFInfo, read_header

ENV_MODEL = "KFORGE_MODEL"


class ModelNotFound(Exception):
    """No usable model; the message is one sentence telling the user what to do."""


@dataclass(frozen=True)
class ModelEntry:
    """One GGUF file found: its header (or the one-sentence reason it is unusable)."""

    path: Path
    source: str  # "--llm", "KFORGE_MODEL", "models dir", "user data"
    size: int | None
    info: GGUFInfo | None
    problem: str | None
    is_default: bool = False
    variant: str | None = None  # the default-model variant this file is, by file name

    @property
    def ok(self) -> bool:
        return self.info is not None and self.problem is None

    @property
    def name(self) -> str:
        return self.info.name if self.info else self.path.name

    def to_dict(self) -> dict:
        info = self.info
        return {
            "path": str(self.path),
            "source": self.source,
            "name": self.name,
            "size": self.size,
            "quantization": info.quantization if info else None,
            "architecture": info.architecture if info else None,
            "context_length": info.context_length if info else None,
            "chat_template": info.has_chat_template if info else None,
            "default": self.is_default,
            "variant": self.variant,
            "problem": self.problem,
        }


def _variant_for(path: Path) -> Variant | None:
    return next((v for v in VARIANTS.values() if v.filename == path.name), None)


def describe(path: Path, source: str) -> ModelEntry:
    """Read one file's header; problems become a sentence, never an exception."""
    variant = _variant_for(path)
    size: int | None
    try:
        size = path.stat().st_size
    except OSError:
        size = None
    info: GGUFInfo | None = None
    problem: str | None = None
    try:
        info = read_header(path)
    except GGUFError as err:
        problem = str(err)
    if info is not None and variant is not None:
        problem = check_installed(path, variant)
    default = VARIANTS[DEFAULT_VARIANT]
    return ModelEntry(path=path, source=source, size=size, info=info, problem=problem,
                      is_default=variant is default, variant=variant.key if variant else None)


def search_dirs() -> list[tuple[Path, str]]:
    """Folders scanned for ``*.gguf`` (deduplicated, in order)."""
    out: list[tuple[Path, str]] = []
    for d, label in ((paths.models_dir(), "models dir"), (paths.user_data_dir() / "models", "user data")):
        if not any(_same(d, o) for o, _ in out):
            out.append((d, label))
    return out


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b


def _scan_dir(d: Path) -> list[Path]:
    """GGUF files in ``d``; an unreadable folder raises ``ModelNotFound`` with one sentence."""
    if not d.exists():
        return []
    if not d.is_dir():
        raise ModelNotFound(f"the models directory {d} is not a directory.")
    try:
        return sorted(p for p in d.iterdir() if p.suffix.lower() == ".gguf" and not p.name.startswith("."))
    except PermissionError:
        raise ModelNotFound(f"the models directory {d} cannot be read (permission denied).") from None
    except OSError as err:
        raise ModelNotFound(f"the models directory {d} cannot be read ({err.strerror or err}).") from None


def discover(llm_path: str | os.PathLike[str] | None = None) -> tuple[list[ModelEntry], list[str]]:
    """Every GGUF we can see, plus sentences about folders we could not read."""
    entries: list[ModelEntry] = []
    problems: list[str] = []
    seen: set[Path] = set()

    def add(path: Path, source: str) -> None:
        key = path.resolve() if path.exists() else path.absolute()
        if key in seen:
            return
        seen.add(key)
        entries.append(describe(path, source))

    if llm_path:
        add(Path(llm_path).expanduser(), "--llm")
    env = os.environ.get(ENV_MODEL)
    if env:
        add(Path(env).expanduser(), ENV_MODEL)
    for d, label in search_dirs():
        try:
            for p in _scan_dir(d):
                add(p, label)
        except ModelNotFound as err:
            problems.append(str(err))
    return entries, problems


def resolve_model(llm_path: str | os.PathLike[str] | None = None) -> Path:
    """The GGUF to run: ``--llm``, else ``$KFORGE_MODEL``, else the default, else the only one found.

    The chosen file's header is checked, so a broken file fails here with one sentence instead of
    inside llama.cpp. Raises ``ModelNotFound``.
    """
    for explicit, what in ((llm_path, "--llm"), (os.environ.get(ENV_MODEL), ENV_MODEL)):
        if explicit:
            entry = describe(Path(explicit).expanduser(), what)
            if not entry.ok:
                raise ModelNotFound(f"{what}: {entry.problem}")
            return entry.path
    for key in (DEFAULT_VARIANT, *(k for k in VARIANTS if k != DEFAULT_VARIANT)):
        p = installed_path(key)
        if p is not None:
            problem = check_installed(p, key)
            if problem:
                raise ModelNotFound(problem)
            return p
    entries, problems = discover()
    usable = [e for e in entries if e.ok]
    if usable:
        return usable[0].path
    if problems:
        raise ModelNotFound(problems[0])
    if entries:
        raise ModelNotFound(f"no usable model: {entries[0].problem}")
    raise ModelNotFound(
        f"no GGUF model found in {paths.models_dir()}; run `kforge models fetch-default` to download the "
        "default model, or pass your own GGUF with --llm PATH."
    )
