"""Finished sessions kept small: one session packed into a gzip file, and read back from it.

A session is an SQLite file (with its write-ahead log beside it while a search runs). Kept as a
record — a benchmark's searches, a session attached to a bug report — it compresses about fifteen-fold,
and a packed session is one file, never half-written.

    packed = pack(Path("run.kforge"))          # run.kforge.gz; run.kforge and its log removed
    with readable(stored(Path("run.kforge"))) as path:   # either form; a plain session file out
        store = SessionStore.open(path)
"""

from __future__ import annotations

import gzip
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PACKED = ".gz"


def is_packed(path: str | Path) -> bool:
    return str(path).endswith(PACKED)


def stored(path: str | Path) -> Path | None:
    """The session at ``path`` as it is kept: the file itself, else its packed form, else None."""
    path = Path(path)
    for candidate in (path, Path(str(path) + PACKED)):
        if candidate.is_file():
            return candidate
    return None


def pack(path: str | Path) -> Path:
    """Pack a session that no search is writing: ``X.kforge`` becomes ``X.kforge.gz`` (its log
    included), and the plain file with its ``-wal``/``-shm`` companions is removed."""
    path = Path(path)
    if is_packed(path):
        raise ValueError(f"{path} is already packed")
    target = Path(str(path) + PACKED)
    with tempfile.TemporaryDirectory(prefix="kforge-pack-") as tmp:
        whole = Path(tmp) / path.name
        _copy(path, whole)
        partial = Path(str(target) + ".part")
        with open(whole, "rb") as src, gzip.open(partial, "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
        partial.replace(target)
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    return target


@contextmanager
def readable(path: str | Path) -> Iterator[Path]:
    """A plain session file for ``path``: the file itself, or a packed one unpacked into a folder
    removed afterwards (so nothing written while reading reaches the packed record)."""
    path = Path(path)
    if not is_packed(path):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="kforge-unpack-") as tmp:
        plain = Path(tmp) / path.name[: -len(PACKED)]
        with gzip.open(path, "rb") as src, open(plain, "wb") as dst:
            shutil.copyfileobj(src, dst)
        yield plain


def _copy(path: Path, dest: Path) -> None:
    """One self-contained file through SQLite's backup: pages still in the write-ahead log included,
    and the source only read."""
    src = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        out = sqlite3.connect(dest)
        try:
            src.backup(out)
            out.execute("PRAGMA journal_mode=DELETE")
            out.execute("VACUUM")
        finally:
            out.close()
    finally:
        src.close()


def each_readable(paths) -> Iterator[tuple[Path, Path]]:
    """For each path in turn: (the path as given, a plain session file for it); an unpacked copy
    lasts until the next one is asked for."""
    for path in paths:
        with readable(path) as plain:
            yield Path(path), plain
