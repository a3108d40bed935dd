"""The model never runs while a kernel is timed on the same device.

On a DGX Spark the local model generates on the very GPU the kernels are timed on, and on a small
CPU machine both share the cores: a token computed during a timed run disturbs it (the runs land
on scheduler slices, or the GPU is shared), and noise can then pick the winner. The pool asks this
gate before it grants a timing slot; the search pauses the model between two tokens while timing
runs. Handshake: ``begin_timing`` announces, then waits (a bounded time) until the model is idle or
has paused at a token boundary; ``end_timing`` lets it go on.
"""

from __future__ import annotations

import contextlib
import threading


class DeviceGate:
    def __init__(self, settle_s: float = 5.0) -> None:
        self._cond = threading.Condition()
        self._timing = 0
        self._generating = 0
        self._paused = 0
        self.settle_s = settle_s  # the longest a timing slot waits for a token to finish

    # -- the pool's side -------------------------------------------------------------------------
    def begin_timing(self) -> None:
        with self._cond:
            self._timing += 1
            self._cond.wait_for(lambda: self._generating == self._paused, timeout=self.settle_s)

    def end_timing(self) -> None:
        with self._cond:
            self._timing = max(0, self._timing - 1)
            self._cond.notify_all()

    @property
    def timing(self) -> bool:
        return self._timing > 0

    # -- the generator's side --------------------------------------------------------------------
    @contextlib.contextmanager
    def generating(self):
        """Around one generation: the gate knows the model is busy. A generation does not start
        while a kernel is timed (its prompt would be processed beside the timed runs); with several
        generations in flight, one may want to start during another's timing slot."""
        with self._cond:
            self._cond.wait_for(lambda: self._timing == 0)
            self._generating += 1
        try:
            yield
        finally:
            with self._cond:
                self._generating -= 1
                self._cond.notify_all()

    def token_boundary(self) -> None:
        """Called between two tokens: waits here while a kernel is being timed."""
        if not self._timing:
            return
        with self._cond:
            self._paused += 1
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._timing == 0)
            self._paused -= 1
