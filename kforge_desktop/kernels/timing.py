"""Timing: contenders (candidate, eager, torch.compile) measured interleaved in one process.

Interleaving (round-robin, rotating the order every round) makes a drifting machine show up as
noise rather than as a speedup. On CUDA each run is bracketed by device-wide synchronisation and the
L2 cache is flushed outside the timed window; the time of a run is the larger of the CUDA-event time
and the host wall time less the sync overhead, so work hidden on a side stream is counted.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class TimingStats:
    median_ms: float
    iqr_ms: float
    q1_ms: float
    q3_ms: float
    n: int
    samples_ms: tuple[float, ...] = ()

    @property
    def rel_spread(self) -> float:
        return self.iqr_ms / self.median_ms if self.median_ms > 0 else 0.0


def stats(samples: list[float]) -> TimingStats:
    s = sorted(samples)
    if len(s) >= 4:
        q = statistics.quantiles(s, n=4, method="inclusive")
        q1, med, q3 = q[0], q[1], q[2]
    else:
        q1 = med = q3 = statistics.median(s)
    return TimingStats(med, q3 - q1, q1, q3, len(s), tuple(s))


class _CudaClock:
    """CUDA events on the current stream, plus whatever other streams still run after it.

    After the end event has completed, a device-wide synchronize returns at once unless work
    launched on another stream is still running; that remainder is added to the run's time, so
    hiding work on a side stream cannot make a candidate look faster.
    """

    def __init__(self, device: str) -> None:
        props = torch.cuda.get_device_properties(torch.device(device))
        l2 = int(getattr(props, "L2_cache_size", 50 * 2**20)) or 50 * 2**20
        self.flush_buf = torch.empty(2 * l2 // 4, dtype=torch.float32, device=device)
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)
        self.idle_sync_ms = self._idle_sync()

    @staticmethod
    def _idle_sync() -> float:
        costs = []
        for _ in range(20):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            torch.cuda.synchronize()
            costs.append((time.perf_counter() - t0) * 1e3)
        return min(costs)

    def run(self, fn: Callable[[], object]) -> tuple[object, float]:
        self.flush_buf.zero_()
        torch.cuda.synchronize()
        self.start.record()
        out = fn()
        self.end.record()
        self.end.synchronize()
        t0 = time.perf_counter()
        torch.cuda.synchronize()  # device-wide: waits for every stream
        extra = (time.perf_counter() - t0) * 1e3 - self.idle_sync_ms
        ms = self.start.elapsed_time(self.end)
        if extra > 0.02:  # other streams were still busy: count their remaining time
            ms += extra
        return out, ms


class _CpuClock:
    def run(self, fn: Callable[[], object]) -> tuple[object, float]:
        t0 = time.perf_counter()
        out = fn()
        return out, (time.perf_counter() - t0) * 1e3


def time_interleaved(
    contenders: dict[str, Callable[[], object]],
    device: str,
    runs: int = 50,
    warmup: int = 5,
    before_run: Callable[[int], None] | None = None,
    after_run: Callable[[str, int, object], None] | None = None,
    budget_s: float = 60.0,
) -> dict[str, TimingStats]:
    """Time each contender ``runs`` times, round-robin with a rotating order.

    ``before_run(i)`` runs outside the timed window before round i (it refreshes input values, so a
    candidate cannot reuse results across runs); ``after_run(name, i, out)`` sees every output (the
    caller checks some of them against the reference). ``budget_s`` bounds the total time of slow
    contenders (never fewer than 10 runs).
    """
    clock = _CudaClock(device) if device.startswith("cuda") else _CpuClock()
    names = list(contenders)
    for _ in range(warmup):
        for name in names:
            contenders[name]()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    samples: dict[str, list[float]] = {n: [] for n in names}
    t_start = time.perf_counter()
    for i in range(runs):
        order = names[i % len(names):] + names[: i % len(names)]
        for name in order:
            if before_run:
                before_run(i)
            out, ms = clock.run(contenders[name])
            samples[name].append(ms)
            if after_run:
                after_run(name, i, out)
            del out
        if i >= 9 and time.perf_counter() - t_start > budget_s:
            break
    return {n: stats(s) for n, s in samples.items()}


def significant(candidate: TimingStats, baseline: TimingStats) -> bool:
    """A speedup (or slowdown) counts when the two interquartile ranges do not overlap."""
    return candidate.q3_ms < baseline.q1_ms or candidate.q1_ms > baseline.q3_ms
