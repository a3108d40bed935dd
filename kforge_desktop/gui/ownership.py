"""Is another process searching this session right now (``kforge optimize`` in a terminal, another
window)? Then this window must not start a second search on the same file.

What the store records today: the search state's ``status`` ("running" or "paused" while an engine
runs, "finished"/"stopped" when it ends) and its ``updated_at``; no owner pid or heartbeat. A
status of "running" alone cannot tell a live search from one that was killed, so we also ask who
has the file open: every SQLite connection in WAL mode holds a shared lock on the "dead-man switch"
byte of the ``-shm`` file while it is open, and ``fcntl(F_GETLK)`` names another process that holds
it (a process never conflicts with its own locks, so this window's connections do not count).
Where that cannot be asked (not Linux, no ``-shm`` yet), recent activity in the store decides.
"""

from __future__ import annotations

import os
import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ACTIVE = ("running", "paused")
RECENT_S = 600.0  # without the lock probe: a run that wrote nothing for this long is taken as dead
_DMS_BYTE = 128  # SQLite unix VFS: WALINDEX_LOCK_OFFSET (120) + SQLITE_SHM_NLOCK (8)


@dataclass(frozen=True)
class Owner:
    """Who is searching a problem of the session, as far as this machine can tell."""

    status: str  # running | paused (the stored search state)
    pid: int | None = None
    program: str = ""

    def who(self) -> str:
        if self.pid is None:
            return "another process"
        return f"another process ({self.program + ', ' if self.program else ''}pid {self.pid})"

    def sentence(self) -> str:
        """The one line shown beside the disabled Start."""
        doing = "searching" if self.status == "running" else "holding a paused search of"
        return f"{self.who()[0].upper()}{self.who()[1:]} is {doing} this session; Start is off until it ends."


def _program(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return ""
    args = [w.decode(errors="replace") for w in raw if w]
    if args and Path(args[0]).name.startswith("python"):
        args = args[1:]
    if args[:1] == ["-c"]:
        return "python -c"
    if args[:1] == ["-m"]:
        args = args[1:]
    words = [Path(args[0]).name] + args[1:3] if args else []
    return " ".join(" ".join(words).split())[:48]


def lock_holder(session_path: Path) -> int | None | bool:
    """The pid of another process that has the session open; None when no other process has;
    False when this platform cannot tell."""
    if not sys.platform.startswith("linux"):
        return False
    shm = Path(f"{session_path}-shm")
    if not shm.exists():
        return None  # the last connection to close removes it: nobody has the session open
    try:
        import fcntl

        fd = os.open(shm, os.O_RDONLY)
    except (ImportError, OSError):
        return False
    try:
        # struct flock on Linux: short type, short whence, off_t start, off_t len, pid_t pid (+ padding)
        req = struct.pack("@hhqqi", fcntl.F_WRLCK, os.SEEK_SET, _DMS_BYTE, 1, 0).ljust(32, b"\0")
        res = fcntl.fcntl(fd, fcntl.F_GETLK, req)
        l_type = struct.unpack_from("@h", res)[0]
        pid = struct.unpack_from("@hhqqi", res)[4]
    except OSError:
        return False
    finally:
        os.close(fd)
    if l_type == fcntl.F_UNLCK:
        return None
    return pid or None


def _last_activity(store, problem_id: int, state) -> float:
    last = state.updated_at or 0.0
    try:
        events = store.events(problem_id=problem_id, since_id=0)
    except Exception:
        return last
    return max([last] + [e.t for e in events[-1:]])


def session_owner(store, problem_id: int | None, searching_here: bool) -> Owner | None:
    """The other process searching ``problem_id`` of ``store``, or None (nobody, or this window)."""
    if store is None or problem_id is None or searching_here:
        return None
    try:
        state = store.search_state(problem_id)
    except Exception:
        return None
    if state is None or state.status not in ACTIVE:
        return None
    holder = lock_holder(Path(store.path))
    if holder is False:  # cannot ask the OS: trust a state that was written recently
        if time.time() - _last_activity(store, problem_id, state) < RECENT_S:
            return Owner(state.status)
        return None
    if holder is None:
        return None  # nobody has the file open: the run that wrote "running" was killed
    return Owner(state.status, holder, _program(holder))


def interrupted(store, problem_id: int | None, searching_here: bool) -> bool:
    """The stored state says a search runs, but nobody is running it (a killed run)."""
    if store is None or problem_id is None or searching_here:
        return False
    state = store.search_state(problem_id)
    return bool(state and state.status in ACTIVE and session_owner(store, problem_id, False) is None)
