"""Device memory for the pool: how much a GPU has, and a gate that admits evaluations while they fit.

Why: each GPU worker is a process with its own caching allocator, so several workers evaluating
big problems at once add up past the card even when each alone fits. The pool asks the gate for a
problem's footprint (``problem.footprint``) before handing the task to a worker and gives it back
when the verdict is in; the worker empties its cache after every task, so what it held is free
again. An evaluation that holds nothing is always admitted, so a gate never blocks forever.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading

CONTEXT_BYTES = 1 << 30  # a worker's CUDA context, torch's kernels and torch.compile's workspace


def device_total_bytes(device: str) -> int | None:
    """Total memory of a CUDA device (read with nvidia-smi, so the caller needs no CUDA context of
    its own: the app's process may hold a model on the same GPU), or the machine's memory for the
    CPU; None where it cannot be read."""
    if not device.startswith("cuda"):
        try:
            return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return None
    index = device.split(":", 1)[1] if ":" in device else "0"
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits",
                              "-i", index], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    try:
        return int(float(out.stdout.strip().splitlines()[0])) * 2**20
    except (ValueError, IndexError):
        return None


class MemoryGate:
    """Admits reservations while their sum stays within ``budget`` bytes."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.held = 0
        self._cond = threading.Condition()

    @contextlib.contextmanager
    def hold(self, nbytes: int):
        nbytes = max(0, int(nbytes))
        with self._cond:
            while self.held > 0 and self.held + nbytes > self.budget:
                self._cond.wait()
            self.held += nbytes
        try:
            yield
        finally:
            with self._cond:
                self.held -= nbytes
                self._cond.notify_all()
