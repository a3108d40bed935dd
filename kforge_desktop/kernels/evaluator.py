"""The evaluator's public API: ``Evaluator.evaluate(problem, source) -> Verdict``.

Untrusted candidate code is built and run only in the pool's spawned worker processes.
"""

from __future__ import annotations

import dataclasses
import os
from concurrent.futures import Future
from pathlib import Path

from ..problem.problem import Problem, load_problem
from .pool import WorkerPool
from .verdict import EvalOptions, Verdict


def default_workers(device: str) -> int:
    cores = os.cpu_count() or 2
    if device.startswith("cuda"):
        return max(2, min(8, cores // 2))
    return 2 if cores >= 2 else 1


class Evaluator:
    """Builds, verifies and times candidates in a pool of isolated workers."""

    def __init__(self, device: str = "cpu", workers: int | None = None, options: EvalOptions | None = None,
                 build_cache: str | os.PathLike | None = None) -> None:
        from ..paths import build_cache_dir

        self.device = device
        self.options = dataclasses.replace(options or EvalOptions(), device=device)
        self.workers = workers or default_workers(device)
        cache = str(build_cache or build_cache_dir())
        os.makedirs(cache, exist_ok=True)
        few_cores = (os.cpu_count() or 2) <= 4
        self._pool = WorkerPool(self.workers, device, cache, exclusive_all=few_cores and not device.startswith("cuda"))

    def submit(self, problem: Problem, source: str, options: EvalOptions | None = None) -> Future:
        opts = dataclasses.replace(options or self.options, device=self.device)
        task = {
            "problem": {"name": problem.name, "source": problem.source, "path": problem.path},
            "source": source,
            "options": {k: v for k, v in dataclasses.asdict(opts).items() if k != "extra"} | dict(opts.extra),
        }
        return self._pool.submit(task)

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
