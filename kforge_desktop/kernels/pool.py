"""The worker pool (caller side): one thread per worker process, timeouts, crash recovery.

A worker that crashes (segfault, OOM kill), hangs past its phase's timeout, or reports a poisoned
CUDA context is killed and replaced; only its own candidate's verdict says so. Timing slots are
granted by the pool one at a time, so timings never overlap; a lock held by a worker that dies is
released here, never leaked.

Every verdict gets its device here, from the task's options (the worker does not repeat it), so a
candidate that failed on ``cuda:0`` says ``cuda:0`` however it failed; and the host it ran on.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from multiprocessing.connection import Connection
from pathlib import Path

from .gate import DeviceGate
from .memory import MemoryGate
from .options import EvalOptions, EvalTask
from .retime import RetimeTask
from .verdict import Verdict

BUILD_PHASES = {"start", "reference", "build", "baseline"}
HOST = socket.gethostname()  # stamped on every verdict with its device


class WorkerPool:
    """``device`` is the one the workers are started for (the evaluator's ``options.device``)."""

    def __init__(self, workers: int, device: str, build_cache: str, exclusive_all: bool = False,
                 memory: MemoryGate | None = None, gate: DeviceGate | None = None) -> None:
        self.n = max(1, workers)
        self.gate = gate or DeviceGate()  # the model pauses while a timing slot is held
        self.memory = memory  # device memory admission (GPU pools); None: no limit
        self.device = device
        self.build_cache = build_cache
        self._tasks: queue.Queue = queue.Queue()
        self._timing = threading.Lock()
        self._cond = threading.Condition()  # tasks running now, and whether one runs alone
        self._active, self._alone, self._alone_waiting = 0, False, 0
        # on a small CPU machine a build or a verification beside a timing run disturbs it: then the
        # whole evaluation holds the slot
        self._exclusive_all = exclusive_all
        self._closed = False
        self._log_dir = tempfile.mkdtemp(prefix="kforge-workers-")
        self._threads = [threading.Thread(target=self._serve, args=(i,), daemon=True, name=f"kforge-eval-{i}")
                         for i in range(self.n)]
        self._procs: dict[int, tuple] = {}
        for t in self._threads:
            t.start()

    def submit(self, task: EvalTask | RetimeTask, needed_bytes: int = 0) -> Future:
        """Queue a task; a ``RetimeTask`` runs alone: it waits for the tasks already running to end,
        and none starts beside it."""
        if self._closed:
            raise RuntimeError("the evaluator is closed")
        if task.options.device != self.device:
            raise ValueError(f"a task for {task.options.device} sent to workers started for {self.device}")
        fut: Future = Future()
        self._tasks.put((fut, task, needed_bytes))
        return fut

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for _ in self._threads:
            self._tasks.put(None)
        for t in self._threads:
            t.join(timeout=10)
        for proc, _conn in list(self._procs.values()):
            _kill(_Proc(proc))

    # -- one serving thread per worker -----------------------------------------------------------

    def _spawn(self, i: int):
        """A fresh interpreter (``python -m kforge_desktop.kernels.worker``), not a fork: nothing of
        the caller's state (a Qt app, a loaded LLM) is shared, and the caller's ``__main__`` is never
        re-imported."""
        parent_sock, child_sock = socket.socketpair()
        log_path = os.path.join(self._log_dir, f"worker{i}.log")
        config = {"build_cache": self.build_cache, "log_path": log_path}
        env = dict(os.environ)
        if not self.device.startswith("cuda"):
            env.setdefault("TRITON_INTERPRET", "1")  # Triton candidates run under its interpreter
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        proc = subprocess.Popen(
            [sys.executable, "-m", "kforge_desktop.kernels.worker", str(child_sock.fileno()), json.dumps(config)],
            pass_fds=(child_sock.fileno(),), env=env, stdin=subprocess.DEVNULL, start_new_session=True,
        )
        child_sock.close()
        conn = Connection(parent_sock.detach())
        self._procs[i] = (proc, conn)
        return _Proc(proc), conn, log_path

    def _serve(self, i: int) -> None:
        # start the worker now: importing torch takes seconds, better spent before the first task
        try:
            worker = self._spawn(i)
        except Exception:
            worker = None
        while True:
            item = self._tasks.get()
            if item is None:
                if worker:
                    try:
                        worker[1].send(None)
                    except OSError:
                        pass
                    worker[0].join(timeout=5)
                    _kill(worker[0])
                return
            fut, task, needed = item
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                if worker is None or not worker[0].is_alive():
                    worker = self._spawn(i)
                alone = isinstance(task, RetimeTask)
                with self._running(alone), self.memory.hold(needed) if self.memory else contextlib.nullcontext():
                    verdict, restart = self._run_one(worker, task)
            except Exception as err:  # never leave a future unresolved
                verdict, restart = failed_verdict("runtime_error", f"the evaluator failed: {err}", task.options), True
            if restart and worker is not None:
                _kill(worker[0])
                worker = None
            fut.set_result(verdict)

    @contextlib.contextmanager
    def _running(self, alone: bool):
        """Shared for ordinary tasks, exclusive for one that must run with nothing beside it."""
        with self._cond:
            if alone:
                self._alone_waiting += 1
                self._cond.wait_for(lambda: self._active == 0 and not self._alone)
                self._alone_waiting -= 1
                self._alone = True
            else:
                self._cond.wait_for(lambda: not self._alone and not self._alone_waiting)
                self._active += 1
        try:
            yield
        finally:
            with self._cond:
                if alone:
                    self._alone = False
                else:
                    self._active -= 1
                self._cond.notify_all()

    def _run_one(self, worker, task: EvalTask | RetimeTask) -> tuple[Verdict | dict, bool]:
        proc, conn, log_path = worker
        opts = task.options
        build_timeout, run_timeout = float(opts.build_timeout_s), float(opts.run_timeout_s)
        start_offset = _size(log_path)
        phase = "start"
        phases: dict[str, float] = {}
        holding = gated = False
        if self._exclusive_all:
            self._timing.acquire()
            holding = True
            try:
                self.gate.begin_evaluation()  # and no other process's evaluation beside it
            except BaseException:
                self._timing.release()
                raise
        try:
            conn.send(task.to_dict())
            deadline = time.monotonic() + build_timeout + 60  # spawning imports torch
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    limit = build_timeout if phase in BUILD_PHASES else run_timeout
                    what = "building" if phase in BUILD_PHASES else "running"
                    return self._failed("timeout", f"the candidate was still {what} after {limit:g} s "
                                                   f"(phase: {phase}); the worker was stopped", opts, log_path,
                                        start_offset, proc), True
                try:
                    ready = conn.poll(min(remaining, 0.5))
                except (EOFError, OSError):
                    ready = True
                if not ready:
                    if not proc.is_alive():
                        return self._crashed(proc, phase, opts, log_path, start_offset), True
                    continue
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    proc.join(timeout=5)
                    return self._crashed(proc, phase, opts, log_path, start_offset), True
                kind = msg[0]
                if kind == "phase":
                    phase = msg[1]
                    phases[phase] = time.monotonic()
                    deadline = time.monotonic() + (build_timeout if phase in BUILD_PHASES else run_timeout)
                elif kind == "want_timing":
                    if not holding:
                        self._timing.acquire()
                        holding = True
                    if not gated:
                        self.gate.begin_timing()
                        gated = True
                    conn.send("timing_granted")
                    deadline = time.monotonic() + run_timeout
                elif kind == "timing_done":
                    if gated:
                        self.gate.end_timing()
                        gated = False
                    if holding and not self._exclusive_all:
                        self._timing.release()
                        holding = False
                elif kind == "done":
                    if isinstance(task, RetimeTask):
                        return msg[1], bool(msg[2])
                    return worker_verdict(msg[1], opts), bool(msg[2])
        finally:
            if gated:
                self.gate.end_timing()
            if holding:
                if self._exclusive_all:
                    self.gate.end_evaluation()
                self._timing.release()

    def _failed(self, status: str, reason: str, opts: EvalOptions, log_path: str, offset: int, proc) -> Verdict:
        _kill(proc)
        return failed_verdict(status, reason, opts, log=_tail(log_path, offset))

    def _crashed(self, proc, phase: str, opts: EvalOptions, log_path: str, offset: int) -> Verdict:
        proc.join(timeout=5)
        code = proc.exitcode
        if code is not None and code < 0:
            try:
                how = f"signal {signal.Signals(-code).name}"
            except ValueError:
                how = f"signal {-code}"
        else:
            how = f"exit code {code}"
        what = {"build": "while building or importing", "verify": "while being verified",
                "time": "while being timed"}.get(phase, f"during {phase}")
        return failed_verdict("crashed", f"the worker process died {what} ({how}); the pool replaced it", opts,
                              log=_tail(log_path, offset))


def worker_verdict(result: dict, options: EvalOptions) -> Verdict:
    """The verdict of a worker's result, on the device (and host) its task ran on."""
    return Verdict.from_dict({**result, "device": options.device, "host": HOST})


def failed_verdict(status: str, reason: str, options: EvalOptions, log: str = "") -> Verdict:
    """A verdict the pool writes itself (timeout, crash, evaluator failure), on the task's device."""
    return Verdict(status, reason, device=options.device, host=HOST, log=log)


class _Proc:
    """The few Process methods the pool uses, over a Popen."""

    def __init__(self, popen: subprocess.Popen) -> None:
        self.popen = popen

    def is_alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)  # the worker and any compiler it started
        except (ProcessLookupError, PermissionError):
            self.popen.kill()

    def join(self, timeout: float | None = None) -> None:
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pass

    @property
    def exitcode(self) -> int | None:
        return self.popen.poll()


def _kill(proc) -> None:
    if proc.is_alive():
        proc.kill()
    proc.join(timeout=5)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _tail(path: str, offset: int, limit: int = 20000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            data = fh.read().decode(errors="replace")
    except OSError:
        return ""
    return data[-limit:]
