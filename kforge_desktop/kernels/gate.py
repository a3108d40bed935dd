"""The model never runs while a kernel is timed on the same machine.

On a DGX Spark the local model generates on the very GPU the kernels are timed on, and on a small
CPU machine both share the cores: a token computed during a timed run disturbs it (the runs land
on scheduler slices, or the GPU is shared), and noise can then pick the winner. The pool asks this
gate before it grants a timing slot; the search pauses the model between two tokens while timing
runs. Handshake: ``begin_timing`` announces, then waits (a bounded time) until the model is idle or
has paused at a token boundary; ``end_timing`` lets it go on.

The same holds between processes: a second search (the app and a ``kforge`` run, or two benchmark
processes) times and generates on the same cores. ``HostGate`` carries the handshake across the
processes of one user on this machine through two lock files (``paths.gate_dir()``): a timing holds
``timing.lock`` exclusively, so the other processes' models pause at their next token and no two
processes time at once; every generation holds ``generating.lock`` shared, which tells a timing
when the others have paused. On a small CPU machine, where a build beside a timing run disturbs it
and the pool lets a whole evaluation hold its timing slot, the evaluation also holds
``evaluation.lock``: the other processes' builds wait too. The kernel drops a dead process's locks,
so a killed app blocks no one.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

try:
    import fcntl
except ImportError:  # no flock (Windows): the handshake stays within the process
    fcntl = None

POLL_S = 0.005  # how often a timing looks whether the other processes' models have paused


class HostGate:
    """The cross-process half of the handshake (see the module doc). One per process and directory."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._timing_path = self.dir / "timing.lock"
        self._generating_path = self.dir / "generating.lock"
        self._evaluation_path = self.dir / "evaluation.lock"
        self._mutex = threading.Lock()  # the timings of this process take the lock once
        self._holders = 0
        self._timing_fd: int | None = None
        self._local = threading.local()  # a generating thread's own descriptors

    def _open(self, path: Path) -> int:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)

    # -- a timing --------------------------------------------------------------------------------
    def begin_timing(self, settle_s: float) -> None:
        """Wait for the other timings to end, hold the timing lock, then wait (at most ``settle_s``)
        until every generation has paused at a token."""
        with self._mutex:
            self._holders += 1
            if self._holders > 1:
                return
            fd = self._open(self._timing_path)
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._timing_fd = fd
        deadline = time.monotonic() + settle_s
        probe = self._open(self._generating_path)
        try:
            while True:
                try:
                    fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    fcntl.flock(probe, fcntl.LOCK_UN)
                    return
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        return
                    time.sleep(POLL_S)
        finally:
            os.close(probe)

    def end_timing(self) -> None:
        with self._mutex:
            self._holders = max(0, self._holders - 1)
            if self._holders or self._timing_fd is None:
                return
            fd, self._timing_fd = self._timing_fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    # -- a whole evaluation (small CPU machines) -------------------------------------------------
    def begin_evaluation(self) -> None:
        """Wait until no other process evaluates, then hold the evaluation lock (this thread)."""
        fd = self._open(self._evaluation_path)
        fcntl.flock(fd, fcntl.LOCK_EX)
        self._local.evaluation = fd

    def end_evaluation(self) -> None:
        fd = getattr(self._local, "evaluation", None)
        self._local.evaluation = None
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    # -- a generation ----------------------------------------------------------------------------
    def _fds(self) -> tuple[int, int]:
        fds = getattr(self._local, "fds", None)
        if fds is None:  # this thread's own descriptors: flock tells them apart from the timing's
            fds = self._local.fds = (self._open(self._timing_path), self._open(self._generating_path))
        return fds

    def in_generation(self) -> bool:
        """Whether this thread is inside ``DeviceGate.generating`` (holds its own descriptors)."""
        return getattr(self._local, "fds", None) is not None

    def close_thread(self) -> None:
        """Close this thread's descriptors (a generation ends; its locks go with them)."""
        fds = getattr(self._local, "fds", None)
        self._local.fds = None
        for fd in fds or ():
            os.close(fd)

    def timing_anywhere(self) -> bool:
        """Whether a kernel is being timed now (by this process or another)."""
        timing, _ = self._fds()
        try:
            fcntl.flock(timing, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(timing, fcntl.LOCK_UN)
        return False

    def enter(self) -> None:
        """Hold the generating lock, once no kernel is being timed."""
        timing, generating = self._fds()
        while True:
            fcntl.flock(generating, fcntl.LOCK_SH)
            if not self.timing_anywhere():
                return
            fcntl.flock(generating, fcntl.LOCK_UN)
            fcntl.flock(timing, fcntl.LOCK_SH)  # waits until the timing ends
            fcntl.flock(timing, fcntl.LOCK_UN)

    def leave(self) -> None:
        _, generating = self._fds()
        fcntl.flock(generating, fcntl.LOCK_UN)


def host_gate() -> HostGate | None:
    """This user's gate on this machine (``$KFORGE_GATE_DIR``, else the user cache), or None where
    there is no flock or the directory cannot be made (the handshake then stays within the process)."""
    if fcntl is None:
        return None
    from ..paths import gate_dir

    try:
        return HostGate(gate_dir())
    except OSError:
        return None


class DeviceGate:
    def __init__(self, settle_s: float = 5.0) -> None:
        self._cond = threading.Condition()
        self._timing = 0
        self._generating = 0
        self._paused = 0
        self.settle_s = settle_s  # the longest a timing slot waits for a token to finish
        self.host = host_gate()  # the other processes of this machine; None: within this process only

    # -- the pool's side -------------------------------------------------------------------------
    def begin_timing(self) -> None:
        if self.host is not None:
            self.host.begin_timing(self.settle_s)  # another process's timing first; its models pause
        with self._cond:
            self._timing += 1
            self._cond.wait_for(lambda: self._generating == self._paused, timeout=self.settle_s)

    def end_timing(self) -> None:
        with self._cond:
            self._timing = max(0, self._timing - 1)
            self._cond.notify_all()
        if self.host is not None:
            self.host.end_timing()

    def begin_evaluation(self) -> None:
        """A whole evaluation holds the slot (a small CPU machine): no other process builds,
        verifies or times beside it."""
        if self.host is not None:
            self.host.begin_evaluation()

    def end_evaluation(self) -> None:
        if self.host is not None:
            self.host.end_evaluation()

    @property
    def timing(self) -> bool:
        return self._timing > 0

    # -- the generator's side --------------------------------------------------------------------
    @contextlib.contextmanager
    def generating(self):
        """Around one generation: the gate knows the model is busy. A generation does not start
        while a kernel is timed (its prompt would be processed beside the timed runs), here or in
        another process; with several generations in flight, one may want to start during another's
        timing slot."""
        with self._cond:
            self._cond.wait_for(lambda: self._timing == 0)
            self._generating += 1
            self._paused += 1  # while it waits for the other processes' timings
        try:
            try:
                if self.host is not None:
                    self.host.enter()
            finally:
                with self._cond:
                    self._paused -= 1
            yield
        finally:
            if self.host is not None:
                self.host.close_thread()
            with self._cond:
                self._generating -= 1
                self._cond.notify_all()

    def token_boundary(self) -> None:
        """Called between two tokens: waits here while a kernel is being timed, in this process or
        another of this machine."""
        host = self.host if self.host is not None and self.host.in_generation() else None
        if not self._timing and not (host is not None and host.timing_anywhere()):
            return
        if host is not None:
            host.leave()
        with self._cond:
            self._paused += 1
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._timing == 0)
        try:
            if host is not None:
                host.enter()  # waits for the other processes' timings, still counted as paused
        finally:
            with self._cond:
                self._paused -= 1
