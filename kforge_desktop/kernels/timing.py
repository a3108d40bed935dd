"""Timing: contenders (candidate, eager, torch.compile) measured interleaved in one process.

Every contender gets two times, because they answer different questions:

- **device time**: what the call costs the GPU. Runs are queued back to back behind a short sleep
  kernel, so the host is ahead of the GPU and launch overhead never shows; each run is bracketed by
  CUDA events with the L2 cache flushed before it. Work the call hides on another stream is counted
  (see ``_CudaClock``). This is the figure speedups are computed on: in a real model launches are
  asynchronous and the host's cost overlaps the GPU's work.
- **call latency**: one synchronous call after a device-wide sync, as a user timing a single call
  sees it. The difference to device time is host overhead (guards, wrappers, launches).

On a CPU both are the wall time of one call. Interleaving (round-robin, rotating the order every
round) makes a drifting machine show up as noise rather than as a speedup. ``quantized`` flags a
measurement whose runs all landed on whole milliseconds: the process was waiting for the scheduler
(another busy process on its cores), so the figure is the scheduler's, not the kernel's.
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


@dataclass(frozen=True)
class Timing:
    """One contender's measurement: device time first, call latency beside it."""

    device: TimingStats
    latency: TimingStats
    host_ms: float = 0.0  # host time to issue one call (CUDA), measured while the GPU was busy
    quantized: bool = False  # the runs sat on scheduler slices: disturbed, re-time

    @property
    def median_ms(self) -> float:
        return self.device.median_ms


def stats(samples: list[float]) -> TimingStats:
    s = sorted(samples)
    if len(s) >= 4:
        q = statistics.quantiles(s, n=4, method="inclusive")
        q1, med, q3 = q[0], q[1], q[2]
    else:
        q1 = med = q3 = statistics.median(s)
    return TimingStats(med, q3 - q1, q1, q3, len(s), tuple(s))


def quantized(samples: list[float] | tuple[float, ...], quantum_ms: float = 1.0) -> bool:
    """True when the runs waited for the scheduler rather than measured the work.

    Two signs: most runs sit within a few microseconds of whole milliseconds (8.0000, 7.9997,
    16.0003 ms: scheduler slices), or the typical run is several times the fastest one (the work
    itself took the fastest run's time; the rest was waiting for a core). Real kernel times
    scatter by a few percent.
    """
    if len(samples) < 5:
        return False
    med = statistics.median(samples)
    if med > 0.05 and med > 3.0 * min(samples):
        return True
    if med < 1.5 * quantum_ms:
        return False
    near = sum(1 for t in samples if abs(t / quantum_ms - round(t / quantum_ms)) * quantum_ms
               <= max(0.003, 0.001 * t))
    return near >= 0.6 * len(samples)


class _CudaClock:
    """CUDA events on the current stream, plus whatever other streams still run after it.

    ``latency`` is one synchronous call: the host's cost is inside the window. ``device_batch``
    queues ``k`` calls behind a sleep kernel long enough for the host to enqueue them all, so each
    event pair brackets only the GPU's work; the L2 is flushed before every run, outside its pair.

    Hidden work: after the end event has completed, a device-wide synchronize returns at once
    unless work launched on another stream is still running; that remainder is added to the
    latency. A call's device time is never taken below its latency less the host's own cost of
    issuing it, so a kernel hidden on a side stream cannot look free in either figure.
    """

    def __init__(self, device: str) -> None:
        self.device = torch.device(device)
        props = torch.cuda.get_device_properties(self.device)
        l2 = int(getattr(props, "L2_cache_size", 50 * 2**20)) or 50 * 2**20
        self.flush_buf = torch.empty(2 * l2 // 4, dtype=torch.float32, device=device)
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)
        self.idle_sync_ms = self._idle_sync()
        self.cycles_per_ms = self._sleep_rate()

    @staticmethod
    def _idle_sync() -> float:
        costs = []
        for _ in range(20):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            torch.cuda.synchronize()
            costs.append((time.perf_counter() - t0) * 1e3)
        return min(costs)

    def _sleep_rate(self) -> float:
        cycles = 1_000_000
        torch.cuda._sleep(cycles)  # warm
        torch.cuda.synchronize()
        self.start.record()
        torch.cuda._sleep(cycles)
        self.end.record()
        self.end.synchronize()
        ms = self.start.elapsed_time(self.end)
        return cycles / ms if ms > 0 else 1.5e6

    def latency(self, fn: Callable[[], object]) -> tuple[object, float, float]:
        """(output, latency ms, host ms to issue the call)."""
        self.flush_buf.zero_()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        self.start.record()
        out = fn()
        issued = time.perf_counter()
        self.end.record()
        self.end.synchronize()
        t1 = time.perf_counter()
        torch.cuda.synchronize()  # device-wide: waits for every stream
        extra = (time.perf_counter() - t1) * 1e3 - self.idle_sync_ms
        ms = (t1 - t0) * 1e3
        if extra > 0.02:  # other streams were still busy: count their remaining time
            ms += extra
        return out, ms, (issued - t0) * 1e3

    def device_batch(self, fn: Callable[[], object], k: int, host_ms: float) -> tuple[list[float], float]:
        """(device ms of each of ``k`` back-to-back calls, host ms per call while the GPU was busy)."""
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(k)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(k)]
        torch.cuda.synchronize()
        ahead_ms = min(50.0, 0.1 + 2.0 * k * (host_ms + 0.02))
        torch.cuda._sleep(int(ahead_ms * self.cycles_per_ms))
        issue = 0.0
        for j in range(k):
            self.flush_buf.zero_()
            t0 = time.perf_counter()
            starts[j].record()
            out = fn()
            ends[j].record()
            issue += time.perf_counter() - t0
            del out
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)], issue * 1e3 / k


class _CpuClock:
    def latency(self, fn: Callable[[], object]) -> tuple[object, float, float]:
        t0 = time.perf_counter()
        out = fn()
        ms = (time.perf_counter() - t0) * 1e3
        return out, ms, ms


def time_interleaved(
    contenders: dict[str, Callable[[], object]],
    device: str,
    runs: int = 50,
    warmup: int = 5,
    before_run: Callable[[int], None] | None = None,
    after_run: Callable[[str, int, object, bool], None] | None = None,
    budget_s: float = 60.0,
    batch: int = 3,
) -> dict[str, Timing]:
    """Time each contender for ``runs`` rounds, round-robin with a rotating order.

    Every round gives each contender one synchronous call (its latency; its output goes to
    ``after_run``) and, on CUDA, ``batch`` back-to-back calls for its device time. ``before_run(i)``
    runs outside the timed window before round i (it refreshes input values, so a candidate cannot
    reuse results across rounds); ``after_run(name, i, out, final)`` sees the output of every round; ``final`` is True in
    the last round that will run (the caller checks some rounds and the last against the reference,
    so a loop cut short by its time budget still ends on a checked output). ``budget_s`` bounds the total time of slow
    contenders (never fewer than 10 rounds).
    """
    cuda = device.startswith("cuda")
    clock = _CudaClock(device) if cuda else _CpuClock()
    names = list(contenders)
    for _ in range(warmup):
        for name in names:
            contenders[name]()
    if cuda:
        torch.cuda.synchronize()
    lat: dict[str, list[float]] = {n: [] for n in names}
    dev: dict[str, list[float]] = {n: [] for n in names}
    host: dict[str, list[float]] = {n: [] for n in names}
    t_start = time.perf_counter()
    for i in range(runs):
        final = i == runs - 1 or (i >= 9 and time.perf_counter() - t_start > budget_s)
        order = names[i % len(names):] + names[: i % len(names)]
        for name in order:
            if before_run:
                before_run(i)
            out, ms, host_ms = clock.latency(contenders[name])
            lat[name].append(ms)
            if after_run:
                after_run(name, i, out, final)
            del out
            if cuda:
                # a long call has no host overhead worth hiding, and k copies of a big output
                # would cost memory: one run is enough there
                k = 1 if ms > 5.0 else batch
                device_ms, issue_ms = clock.device_batch(contenders[name], k, host_ms)
                host[name].append(issue_ms)
                floor = max(0.0, ms - issue_ms - clock.idle_sync_ms)
                dev[name].extend(floor if floor > 2.0 * d and floor - d > 0.05 else d for d in device_ms)
            else:
                dev[name].append(ms)
                host[name].append(host_ms)
        if final:
            break
    return {n: Timing(device=stats(dev[n]), latency=stats(lat[n]),
                      host_ms=statistics.median(host[n]) if host[n] else 0.0,
                      quantized=not cuda and quantized(lat[n]))
            for n in names}


def significant(candidate: TimingStats, baseline: TimingStats) -> bool:
    """A speedup (or slowdown) counts when the two interquartile ranges do not overlap."""
    return candidate.q3_ms < baseline.q1_ms or candidate.q1_ms > baseline.q3_ms


def host_only_gain(candidate: Timing, baseline: Timing) -> bool:
    """True when the candidate is faster per call but not on the device: it only saves host work.

    Such a candidate is reported as "same device time; X ms less per call", never as a kernel
    speedup.
    """
    return (not significant(candidate.device, baseline.device)
            and significant(candidate.latency, baseline.latency)
            and candidate.latency.median_ms < baseline.latency.median_ms)
