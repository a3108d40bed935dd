"""Every GPU of a host (and, through ``ray_pool``, of many hosts) behind the one ``submit`` of an evaluator.

One ``Evaluator`` (one worker pool) per device: each pool times one candidate at a time on its
own GPU, and all of them build through the same content-hash build cache, so a kernel built for
one GPU is not built again for the next. A ``Dispatcher`` holds one queue: a device takes the
next candidate as soon as one of its workers is free, so a slow candidate on one GPU never holds
up the others. It offers what the search and the CLI use of an ``Evaluator`` (``submit``,
``evaluate``, ``workers``, ``gate``, ``device``, ``options``, ``close``) plus ``devices``.

Speedups are only compared within one device type: a search's candidates are all measured on
GPUs of one name (``one_kind`` leaves the others out and says so), since a speedup measured on one
GPU says little about another.

The model and the kernels may share a GPU, and llama.cpp spreads its layers over every visible
GPU: so all the pools of one host share one ``DeviceGate``, and the model pauses between two tokens
while a kernel is timed on any of them.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import queue
import subprocess
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Protocol

from ..problem.problem import Problem
from .gate import DeviceGate
from .options import EvalOptions
from .verdict import Verdict

Say = Callable[[str], None]


class DeviceError(ValueError):
    """A device list that cannot be used here; the message is one sentence."""


def visible_gpus() -> int:
    """How many CUDA devices this process may use (without creating a CUDA context)."""
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        return 0


def parse_devices(spec: str | None, default: str = "cpu") -> list[str]:
    """``--devices``: "cuda:0,cuda:1", "all" (every visible GPU, else the CPU), "cuda" (the first
    GPU), "cpu"; None or "" is ``default``."""
    spec = (spec or "").strip() or default
    n = visible_gpus()
    if spec == "all":
        return [f"cuda:{i}" for i in range(n)] or ["cpu"]
    out: list[str] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        if part == "cpu":
            device = "cpu"
        elif part == "cuda" or part.startswith("cuda:"):
            index = part.split(":", 1)[1] if ":" in part else "0"
            if not index.isdigit():
                raise DeviceError(f"{part!r} is not a device; write cuda:0, cuda:1, ... or all.")
            if int(index) >= n:
                raise DeviceError(f"{part} was asked for but torch sees {n} CUDA device(s) here.")
            device = f"cuda:{int(index)}"
        else:
            raise DeviceError(f"unknown device {part!r}; use cpu, cuda:N (comma-separated) or all.")
        if device in out:
            raise DeviceError(f"{device} is listed twice.")
        out.append(device)
    if not out:
        raise DeviceError("no device was given.")
    if "cpu" in out and len(out) > 1:
        raise DeviceError("the CPU and GPUs cannot share one search: their speedups cannot be compared.")
    return out


def device_name(device: str) -> str:
    """What kind of device it is: the GPU's name (read with nvidia-smi: no CUDA context in the
    caller, which may hold a model on that GPU) or the CPU's model name."""
    if device.startswith("cuda"):
        index = device.split(":", 1)[1] if ":" in device else "0"
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", index],
                                 capture_output=True, text=True, timeout=20)
            name = out.stdout.strip().splitlines()[0].strip() if out.returncode == 0 and out.stdout.strip() else ""
        except (OSError, subprocess.SubprocessError, IndexError):
            name = ""
        if not name:
            try:
                import torch

                name = torch.cuda.get_device_name(int(index))
            except Exception:
                name = "cuda"
        return name
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def one_kind(devices: Sequence[str], names: dict[str, str]) -> tuple[list[str], list[str]]:
    """(the devices of the first one's kind, the others): one search compares speedups measured on
    one kind of device only."""
    kind = names[devices[0]]
    return [d for d in devices if names[d] == kind], [d for d in devices if names[d] != kind]


# -- one queue, several devices ------------------------------------------------------------------------


class Backend(Protocol):
    """One device's evaluation: a local pool, or a Ray actor's (``ray_pool``)."""

    device: str
    slots: int  # candidates it evaluates at once

    def evaluate(self, problem: Problem, source: str, options: EvalOptions) -> Verdict: ...

    def close(self) -> None: ...


class LocalDevice:
    """One GPU (or the CPU) of this host: its own ``Evaluator`` and worker pool."""

    def __init__(self, device: str, workers: int | None, options: EvalOptions | None, build_cache,
                 gate: DeviceGate) -> None:
        from .evaluator import Evaluator

        self.device = device
        self.evaluator = Evaluator(device=device, workers=workers, options=options, build_cache=build_cache,
                                   gate=gate)  # one gate for the host (see the module doc)
        self.slots = self.evaluator.workers

    def evaluate(self, problem: Problem, source: str, options: EvalOptions) -> Verdict:
        return self.evaluator.evaluate(problem, source, options)

    def retime(self, problem: Problem, sources: list[str], options: EvalOptions | None = None) -> dict:
        return self.evaluator.retime(problem, sources, options)

    def close(self) -> None:
        self.evaluator.close()


class Dispatcher:
    """Candidates from one queue to several backends: each takes the next one when a slot is free."""

    def __init__(self, backends: Sequence[Backend], options: EvalOptions | None = None,
                 gate: DeviceGate | None = None) -> None:
        if not backends:
            raise DeviceError("no device to evaluate on.")
        self.backends = list(backends)
        self.options = dataclasses.replace(options or EvalOptions(), device=self.backends[0].device)
        self.gate = gate or DeviceGate()
        self.workers = sum(max(1, b.slots) for b in self.backends)
        self._tasks: queue.Queue = queue.Queue()
        self._closed = False
        self._threads = [threading.Thread(target=self._feed, args=(b,), daemon=True,
                                          name=f"kforge-dispatch-{b.device}-{i}")
                         for b in self.backends for i in range(max(1, b.slots))]
        for t in self._threads:
            t.start()

    @property
    def device(self) -> str:
        """The first device: the one prompts describe and verdicts of a failed dispatch name."""
        return self.backends[0].device

    @property
    def devices(self) -> list[str]:
        return [b.device for b in self.backends]

    def submit(self, problem: Problem, source: str, options: EvalOptions | None = None) -> Future:
        if self._closed:
            raise RuntimeError("the evaluator is closed")
        fut: Future = Future()
        self._tasks.put((fut, problem, source, options or self.options))
        return fut

    def evaluate(self, problem: Problem, source: str, options: EvalOptions | None = None) -> Verdict:
        return self.submit(problem, source, options).result()

    def retime(self, problem: Problem, sources: list[str], options: EvalOptions | None = None) -> dict:
        """Re-time on the first device: timings compared with each other come from one device."""
        return self.backends[0].retime(problem, sources, options)

    def _feed(self, backend: Backend) -> None:
        while True:
            item = self._tasks.get()
            if item is None:
                return
            fut, problem, source, options = item
            if not fut.set_running_or_notify_cancel():
                continue
            opts = dataclasses.replace(options, device=backend.device)
            try:
                verdict = backend.evaluate(problem, source, opts)
            except Exception as err:  # a lost node or a broken backend: this candidate's verdict says so
                verdict = Verdict("crashed", f"the evaluation on {backend.device} failed: {type(err).__name__}: "
                                             f"{err}", device=backend.device)
            fut.set_result(verdict)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for _ in self._threads:
            self._tasks.put(None)
        for t in self._threads:
            t.join(timeout=30)
        for b in self.backends:
            try:
                b.close()
            except Exception:  # closing one device must not keep the others open
                pass

    def __enter__(self) -> Dispatcher:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class MultiDeviceEvaluator(Dispatcher):
    """One worker pool per device of this host (``devices`` of one kind, see ``one_kind``);
    ``workers`` per device (default: ``default_workers`` of that device)."""

    def __init__(self, devices: Sequence[str], workers: int | None = None, options: EvalOptions | None = None,
                 build_cache: str | os.PathLike | None = None, gate: DeviceGate | None = None) -> None:
        gate = gate or DeviceGate()
        backends: list[LocalDevice] = []
        try:
            for d in devices:
                backends.append(LocalDevice(d, workers, options, build_cache, gate))
        except Exception:
            for b in backends:
                b.close()
            raise
        super().__init__(backends, options, gate)


def open_evaluator(devices: Sequence[str], workers: int | None = None, options: EvalOptions | None = None,
                   ray: str | None = None, ray_actors: int | None = None, gate: DeviceGate | None = None,
                   say: Say = lambda _m: None):
    """The evaluator a search runs with: one ``Evaluator`` for one local device (as before), a
    ``MultiDeviceEvaluator`` for several, a ``RayEvaluator`` when a Ray cluster is named (``ray``:
    an address, or "auto" for the cluster this machine belongs to)."""
    if ray:
        from .ray_pool import RayEvaluator

        kind = "cuda" if devices and devices[0].startswith("cuda") else "cpu"
        return RayEvaluator(address=ray, device=kind, actors=ray_actors, workers_per_actor=workers,
                            options=options, gate=gate, say=say)
    devices = list(devices) or ["cpu"]
    if len(devices) > 1:
        names = {d: device_name(d) for d in devices}
        kept, left = one_kind(devices, names)
        if left:
            say(f"left out {', '.join(left)}: {names[left[0]]}, not {names[kept[0]]} like {kept[0]}; speedups are "
                "only compared on one kind of GPU")
        devices = kept
    if len(devices) == 1:
        from .evaluator import Evaluator

        return Evaluator(device=devices[0], workers=workers, options=options, gate=gate)
    return MultiDeviceEvaluator(devices, workers=workers, options=options, gate=gate)
