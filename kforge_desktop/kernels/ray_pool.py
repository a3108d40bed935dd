"""Evaluation on many hosts through Ray (the optional ``ray`` extra; imported only when asked for).

Each evaluation actor is pinned to one GPU (``num_gpus=1``; on the CPU ``num_cpus=1``) and owns a
local ``Evaluator`` on its node: the same worker pool, the same isolated worker processes and the
same code path as a local evaluation, so a verdict is the one a local pool would give. It returns
the verdict as a dict; the pool on its node stamps the node's host name, and the actor names the
GPU by its physical index on that host (Ray shows each actor only its own GPU, as ``cuda:0``).

The search, and with it the session store, stays on the machine that runs it: actors only get a
problem and a source and give a verdict back, so the store keeps one writer. The package is shipped
to the cluster with the job (``runtime_env.py_modules``), so the nodes run this very version.

A search compares speedups measured on one kind of device only: actors on GPUs of another name
than the first actor's are let go, and the user is told.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable
from pathlib import Path

from ..problem.problem import Problem
from .devices import Dispatcher, device_name
from .gate import DeviceGate
from .options import EvalOptions
from .verdict import Verdict

Say = Callable[[str], None]
START_TIMEOUT_S = 600  # an actor imports torch and starts its workers; a node may first install the package


class RayUnavailable(RuntimeError):
    """Ray is not installed or the cluster cannot be reached; the message is one sentence."""


def import_ray():
    try:
        import ray
    except ImportError:
        raise RayUnavailable("--ray needs Ray: install the extra with `pip install 'kforge-desktop[ray]'`.") from None
    return ray


class EvalActor:
    """Runs on a Ray node (wrapped with ``ray.remote`` by ``RayEvaluator``): a local ``Evaluator``
    for the one device Ray gave it."""

    def __init__(self, device: str, workers: int | None, options: dict | None) -> None:
        import socket

        from .evaluator import Evaluator

        self.kind = "cuda" if device.startswith("cuda") else "cpu"
        self.local = "cuda:0" if self.kind == "cuda" else "cpu"  # Ray sets CUDA_VISIBLE_DEVICES to its GPU
        self.physical = self.local
        if self.kind == "cuda":
            import ray

            ids = ray.get_gpu_ids()
            if ids:
                self.physical = f"cuda:{ids[0]}"
        self.host = socket.gethostname()
        opts = EvalOptions.from_dict(options) if options else None
        self.evaluator = Evaluator(device=self.local, workers=workers, options=opts)

    def describe(self) -> dict:
        return {"host": self.host, "device": self.physical, "name": device_name(self.local),
                "workers": self.evaluator.workers}

    def evaluate(self, problem: Problem, source: str, options: dict) -> dict:
        opts = dataclasses.replace(EvalOptions.from_dict(options), device=self.local)
        verdict = self.evaluator.evaluate(problem, source, opts)
        return dataclasses.replace(verdict, device=self.physical).to_dict()

    def retime(self, problem: Problem, sources: list[str], options: dict | None) -> dict:
        opts = dataclasses.replace(EvalOptions.from_dict(options), device=self.local) if options else None
        return self.evaluator.retime(problem, sources, opts)

    def close(self) -> None:
        self.evaluator.close()


class RayDevice:
    """The caller's side of one actor: a ``devices.Backend``."""

    def __init__(self, ray, actor, info: dict) -> None:
        self._ray = ray
        self.actor = actor
        self.host = info["host"]
        self.name = info["name"]
        self.device = info["device"]
        self.slots = int(info["workers"])

    def evaluate(self, problem: Problem, source: str, options: EvalOptions) -> Verdict:
        return Verdict.from_dict(self._ray.get(self.actor.evaluate.remote(problem, source, options.to_dict())))

    def retime(self, problem: Problem, sources: list[str], options: EvalOptions | None = None) -> dict:
        return self._ray.get(self.actor.retime.remote(problem, list(sources),
                                                      options.to_dict() if options else None))

    def close(self) -> None:
        try:
            self._ray.get(self.actor.close.remote(), timeout=60)
        except Exception:  # a node already gone has nothing left to close
            pass
        self._ray.kill(self.actor)


def package_dir() -> str:
    """The ``kforge_desktop`` package folder, shipped to the nodes with the job."""
    return str(Path(__file__).resolve().parents[1])


def connect(address: str | None):
    """``ray.init`` for ``address`` ("auto": the cluster this machine belongs to; None: a Ray the
    caller already started, else a new one on this machine), with this package shipped along."""
    ray = import_ray()
    if ray.is_initialized():
        return ray
    env = {"py_modules": [package_dir()], "env_vars": {"PYTHONUNBUFFERED": "1"}}
    try:
        ray.init(address=address, runtime_env=env, log_to_driver=False, include_dashboard=False,
                 ignore_reinit_error=True, logging_level=logging.ERROR)
    except ConnectionError as err:
        raise RayUnavailable(f"cannot reach the Ray cluster at {address} ({err}).") from None
    return ray


class RayEvaluator(Dispatcher):
    """Evaluation actors on a Ray cluster, one per GPU (``device`` "cuda") or ``actors`` of one CPU
    each (``device`` "cpu"), each with ``workers_per_actor`` worker processes (default: 2 on a GPU,
    a build beside a timing; 1 on a CPU core)."""

    def __init__(self, address: str | None = None, device: str = "cuda", actors: int | None = None,
                 workers_per_actor: int | None = None, options: EvalOptions | None = None,
                 gate: DeviceGate | None = None, say: Say = lambda _m: None) -> None:
        ray = connect(None if address in (None, "", "local") else address)
        self._ray = ray
        kind = "cuda" if device.startswith("cuda") else "cpu"
        resources = ray.cluster_resources()
        if kind == "cuda":
            gpus = int(resources.get("GPU", 0))
            if gpus < 1:
                raise RayUnavailable("the Ray cluster has no GPU; use --device cpu or add GPU nodes.")
            n = min(actors or gpus, gpus)
            remote = ray.remote(num_gpus=1, num_cpus=0)
        else:
            cpus = max(1, int(resources.get("CPU", 1)))
            n = min(actors or max(1, cpus // 4), cpus)
            remote = ray.remote(num_cpus=1)
        workers = workers_per_actor or (2 if kind == "cuda" else 1)
        options = options or EvalOptions()
        actor_class = remote(EvalActor).options(max_concurrency=workers + 2, max_restarts=2)
        handles = [actor_class.remote(kind, workers, options.to_dict()) for _ in range(n)]
        try:
            infos = ray.get([h.describe.remote() for h in handles], timeout=START_TIMEOUT_S)
        except Exception as err:  # an actor that cannot start (no such package on a node, no room)
            for h in handles:
                ray.kill(h)
            raise RayUnavailable(f"the evaluation actors did not start on the Ray cluster ({type(err).__name__}: "
                                 f"{str(err)[:200]}).") from None
        backends = [RayDevice(ray, h, info) for h, info in zip(handles, infos)]
        first = backends[0].name
        other = [b for b in backends if b.name != first]
        if other:
            say(f"left out {len(other)} Ray actor(s) on {other[0].name}: speedups are only compared on one kind "
                f"of device ({first})")
            for b in other:
                b.close()
            backends = [b for b in backends if b.name == first]
        hosts = sorted({b.host for b in backends})
        say(f"evaluating on {len(backends)} {first} device(s) of {len(hosts)} Ray host(s): {', '.join(hosts)}")
        super().__init__(backends, dataclasses.replace(options, device=backends[0].device), gate)

    @property
    def hosts(self) -> list[str]:
        return sorted({b.host for b in self.backends})

    def close(self) -> None:
        super().close()


def ray_address(value: str | None) -> str | None:
    """``--ray``: "auto" (this machine's cluster), an address such as ray://head:10001 or
    head:6379, or "local" (a new cluster of this machine alone); $RAY_ADDRESS when the flag is
    given without a value."""
    if value is None:
        return None
    return value or os.environ.get("RAY_ADDRESS") or "auto"
