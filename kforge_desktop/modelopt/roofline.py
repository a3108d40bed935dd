"""The floor under an op on this device: the time to move its bytes and do its FLOPs at the rates
this machine actually reaches.

The rates are measured once with a quick probe (a plain tensor copy at a few working-set sizes, so
that an op whose data fits in cache is held to the cache's bandwidth, not DRAM's; and a matrix
multiply for the FLOP rate) and cached on disk per device, thread count and torch version. On CUDA
the same probe runs with CUDA events, and fp32's FLOP rate is the better of cuBLAS's fp32 one
and a third of its TF32 one (fp32 accuracy from three TF32 products on the tensor cores). A target whose time is close to its floor has nothing left to
win, so the budget goes elsewhere.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, dataclass

import torch

_SIZES_CPU = (256 * 1024, 4 * 1024 * 1024, 64 * 1024 * 1024)
_SIZES_CUDA = (32 * 1024 * 1024, 256 * 1024 * 1024)
_MEMO: dict[str, DeviceRates] = {}


@dataclass(frozen=True)
class DeviceRates:
    device: str
    name: str
    bandwidth: tuple[tuple[int, float], ...]  # (working set in bytes, bytes/s), ascending sizes
    flop_rates: tuple[tuple[str, float], ...]  # (dtype name, FLOP/s)
    threads: int
    probe_s: float
    call_s: float = 0.0  # the least one op call costs, timed the way the profiler times a node

    def bandwidth_for(self, nbytes: float) -> float:
        """Copy bandwidth for a working set of ``nbytes``: the smallest probed size that holds it."""
        for size, bw in self.bandwidth:
            if nbytes <= size:
                return bw
        return self.bandwidth[-1][1]

    def flop_rate(self, dtype: str = "float32") -> float:
        rates = dict(self.flop_rates)
        return rates.get(dtype.replace("torch.", ""), rates["float32"])

    def floor_ms(self, nbytes: float, flops: float, dtype: str = "float32") -> float:
        """One call (a replacement kernel is at least one call) plus moving the bytes or doing the
        FLOPs, whichever takes longer."""
        return 1e3 * (self.call_s + max(nbytes / self.bandwidth_for(nbytes), flops / self.flop_rate(dtype)))

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        bws = ", ".join(f"{bw / 1e9:.0f} GB/s at {_fmt_size(s)}" for s, bw in self.bandwidth)
        fl = ", ".join(f"{r / 1e9:.0f} GFLOP/s {d}" for d, r in self.flop_rates)
        return f"{self.name}: copy {bws}; matmul {fl}; {1e6 * self.call_s:.1f} us per call"


def _fmt_size(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n >= 1024 * 1024 else f"{n // 1024} KiB"


def _cache_file():
    from ..kernels.native import cache_root  # the build cache's parent; no platformdirs needed

    return cache_root().parent / "device_rates.json"


def _device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name()
    from ..hardware.facts import device_facts

    return device_facts("cpu").name or platform.machine()


def _timer(device: str):
    if device.startswith("cuda"):
        def run(fn, reps: int) -> float:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            for _ in range(reps):
                fn()
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end) / 1e3 / reps
    else:
        def run(fn, reps: int) -> float:
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            return (time.perf_counter() - t0) / reps
    return run


def _probe(device: str, rounds: int = 7) -> DeviceRates:
    """Best rate over several short rounds, each size and the matmul interleaved, so that a burst
    of other work on a shared machine lowers one round, not the result."""
    t_start = time.perf_counter()
    run = _timer(device)
    cuda = device.startswith("cuda")
    jobs = []
    for size in (_SIZES_CUDA if cuda else _SIZES_CPU):
        n = size // 2 // 4  # source and destination together make up the working set
        src = torch.rand(n, device=device)
        dst = torch.empty_like(src)
        dst.copy_(src)
        reps = max(2, min(100, int(1e7 // max(size, 1))))
        jobs.append((("bw", size), lambda d=dst, s=src: d.copy_(s), reps, 2 * n * 4))
    dims = {"float32": 2048 if cuda else 512}
    if cuda:
        dims.update({"bfloat16": 4096, "float16": 4096})
    for dtype, m in dims.items():
        a = torch.randn(m, m, device=device).to(getattr(torch, dtype))
        b = torch.randn(m, m, device=device).to(getattr(torch, dtype))
        torch.mm(a, b)
        jobs.append((("flops", dtype), lambda a=a, b=b: torch.mm(a, b), 1, 2.0 * m ** 3))
    if cuda and torch.cuda.get_device_capability()[0] >= 8:
        # fp32 at fp32's accuracy also runs on the tensor cores, as three TF32 products (the
        # matmul exemplar does): a third of the TF32 rate is an fp32 rate this card reaches
        a = torch.randn(4096, 4096, device=device)
        jobs.append((("flops", "tf32"), lambda a=a: _tf32_mm(a), 1, 2.0 * 4096 ** 3))
    best: dict[tuple, float] = {}
    threads = torch.get_num_threads()
    try:
        for r in range(rounds):
            # odd rounds on one thread: a parallel copy stalls when another process holds a core, a
            # single thread does not, so the best of both survives a busy machine
            torch.set_num_threads(1 if (r % 2 and not cuda) else threads)
            for key, fn, reps, work in jobs:
                best[key] = max(best.get(key, 0.0), work / run(fn, reps))
    finally:
        torch.set_num_threads(threads)
    bandwidth = tuple((size, best[("bw", size)]) for size in (_SIZES_CUDA if cuda else _SIZES_CPU))
    call_s = _call_time(device)
    flop_rates = tuple((dtype, best[("flops", dtype)]) for dtype in dims)
    if ("flops", "tf32") in best:
        rates = dict(flop_rates) | {"float32": max(best[("flops", "float32")], best[("flops", "tf32")] / 3)}
        flop_rates = tuple(rates.items())
    return DeviceRates(device="cuda" if cuda else "cpu", name=_device_name(device), bandwidth=bandwidth,
                       flop_rates=flop_rates, threads=threads,
                       probe_s=time.perf_counter() - t_start, call_s=call_s)


def _tf32_mm(a: torch.Tensor) -> torch.Tensor:
    allowed = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        return torch.mm(a, a)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allowed


def _call_time(device: str, n: int = 300) -> float:
    """The fastest a tiny op completes, synchronized like a profiled node: what any kernel costs."""
    cuda = device.startswith("cuda")
    x = torch.ones(16, device=device)
    best = float("inf")
    for _ in range(n):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        x.mul(2.0)
        if cuda:
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best


def device_rates(device: str = "cpu", refresh: bool = False) -> DeviceRates:
    """Measured rates of ``device`` (probe once, then from memory or the on-disk cache)."""
    key = f"{device}|{_device_name(device)}|{torch.get_num_threads()}|{torch.__version__}|3"  # |3: probe version
    if not refresh and key in _MEMO:
        return _MEMO[key]
    path = _cache_file()
    cache: dict = {}
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):
        cache = {}
    if not refresh and key in cache:
        d = cache[key]
        rates = DeviceRates(device=d["device"], name=d["name"],
                            bandwidth=tuple((int(s), float(b)) for s, b in d["bandwidth"]),
                            flop_rates=tuple((str(k), float(v)) for k, v in d["flop_rates"]),
                            threads=int(d["threads"]), probe_s=float(d["probe_s"]),
                            call_s=float(d.get("call_s", 0.0)))
    else:
        rates = _probe(device)
        cache[key] = rates.to_dict()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(cache, indent=1))
            tmp.replace(path)
        except OSError:
            pass  # a read-only cache only costs a new probe next time
    _MEMO[key] = rates
    return rates
