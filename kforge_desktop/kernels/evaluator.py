"""The evaluator's public API: ``Evaluator.evaluate(problem, source) -> Verdict``.

Untrusted candidate code is built and run only in the pool's spawned worker processes.
"""

from __future__ import annotations

import dataclasses
import os
from concurrent.futures import Future
from pathlib import Path

from ..problem.footprint import Footprint, footprint, too_big_sentence
from ..problem.problem import Problem, ProblemError, load_problem
from .gate import DeviceGate
from .memory import CONTEXT_BYTES, MemoryGate, device_total_bytes
from .options import EvalOptions, EvalTask
from .pool import WorkerPool
from .retime import RetimeTask
from .verdict import Verdict


def default_workers(device: str) -> int:
    cores = os.cpu_count() or 2
    if device.startswith("cuda"):
        return max(2, min(8, cores // 2))
    return 2 if cores >= 2 else 1


class Evaluator:
    """Builds, verifies and times candidates in a pool of isolated workers.

    ``device`` is where the workers run; it overrides ``options.device``, and ``self.options`` is
    the one record of it from then on (the pool and every verdict take it from there).
    ``memory_bytes`` is the memory its evaluations may use together (default: the device's, or the
    machine's for the CPU); a problem that needs more is refused before anything is built.
    ``gate``: the ``DeviceGate`` its timing slots announce themselves on (default: its own).
    """

    def __init__(self, device: str = "cpu", workers: int | None = None, options: EvalOptions | None = None,
                 build_cache: str | os.PathLike | None = None, memory_bytes: int | None = None,
                 gate: DeviceGate | None = None) -> None:
        from ..paths import build_cache_dir

        self.options = dataclasses.replace(options or EvalOptions(), device=device)
        self.workers = workers or default_workers(device)
        cache = str(build_cache or build_cache_dir())
        os.makedirs(cache, exist_ok=True)
        few_cores = (os.cpu_count() or 2) <= 4
        self.device_bytes = memory_bytes or device_total_bytes(device)
        timing_gate = gate  # shared by the pools of one host (``kernels.devices``); None: the pool's own
        gate = None
        if self.device_bytes:
            gate = MemoryGate(int(0.92 * self.device_bytes) - self.workers * CONTEXT_BYTES)
        self._pool = WorkerPool(self.workers, self.device, cache, exclusive_all=few_cores and not self.options.is_cuda,
                                memory=gate, gate=timing_gate)
        self._footprints: dict[str, Footprint | None] = {}

    @property
    def device(self) -> str:
        return self.options.device

    @property
    def gate(self) -> DeviceGate:
        """What the model waits on between tokens while a kernel is timed (see ``kernels.gate``)."""
        return self._pool.gate

    def submit(self, problem: Problem, source: str, options: EvalOptions | None = None) -> Future:
        """Queue one candidate; per-call ``options`` may change any knob but the device."""
        opts = dataclasses.replace(options or self.options, device=self.device)
        needed = 0
        if self.device_bytes:
            fp = self.footprint(problem)
            if fp is not None:
                needed = fp.needed_bytes
                if needed > self._pool.memory.budget:
                    fut: Future = Future()
                    fut.set_result(Verdict("runtime_error", too_big_sentence(fp, self.device_bytes, self.device)
                                           + ".", device=self.device))
                    return fut
        return self._pool.submit(EvalTask(problem, source, opts), needed_bytes=needed)

    def retime(self, problem: Problem, sources: list[str], options: EvalOptions | None = None) -> dict:
        """Time ``sources`` together with eager and torch.compile, interleaved, in one worker, with
        nothing else running (see ``kernels.retime``). Blocks; returns the worker's result."""
        opts = dataclasses.replace(options or self.options, device=self.device)
        fut = self._pool.submit(RetimeTask(problem, tuple(sources), opts))
        result = fut.result()
        if isinstance(result, Verdict):  # the worker died: the pool wrote a verdict instead
            return {"timings": {}, "failed": {}, "error": result.reason}
        return result

    def footprint(self, problem: Problem) -> Footprint | None:
        """The problem's memory footprint (found on the meta device, once per problem); None where
        its code cannot run there, and then the evaluation simply goes ahead."""
        if problem.digest not in self._footprints:
            try:
                self._footprints[problem.digest] = footprint(problem)
            except ProblemError:
                self._footprints[problem.digest] = None
        return self._footprints[problem.digest]

    def evaluate(self, problem: Problem, source: str, options: EvalOptions | None = None) -> Verdict:
        return self.submit(problem, source, options).result()

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def evaluate_files(problem_path: str | Path, candidate_path: str | Path, device: str = "cpu",
                   options: EvalOptions | None = None) -> Verdict:
    """One-shot convenience: evaluate a candidate file against a problem file."""
    problem = load_problem(problem_path)
    source = Path(candidate_path).read_text()
    with Evaluator(device=device, workers=1, options=options) as ev:
        return ev.evaluate(problem, source)
