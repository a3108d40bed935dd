"""End to end: the original model, torch.compile of it, the patched model and torch.compile of the
patched model, timed in one process, interleaved round by round (so a machine that drifts shows up
as noise in all of them, not as a speedup of one), after each has warmed up. Per-op speedups do not
add up to a model's; this is the number a user feels.

Each contender gets the two times of ``kernels.timing``: **device time** (the GPU's own time per
call, calls queued back to back, L2 flushed: launch overhead hidden, as in a real model's
asynchronous execution) and **call latency** (one synchronous call, host overhead included). Speedups
are computed on device time; latency is shown beside it, so a win that is only host overhead (or a
loss that is) is visible. On a CPU both are the wall time of one call.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch

from ..kernels.timing import Timing, TimingStats, time_interleaved
from .runtime import PatchHandle

# contender key -> the label a table shows; the order is the table's
LABELS = {
    "eager": "eager (original)",
    "compiled": "torch.compile(original)",
    "patched": "patched",
    "compiled_patched": "torch.compile(patched)",
}
COLUMNS_NOTE = ("device ms: the GPU's own time per call (calls queued back to back, L2 flushed); speedups are "
                "on device time. latency ms: one synchronous call, host overhead included. On a CPU both "
                "are the wall time of one call.")


def _stats_dict(s: TimingStats) -> dict:
    return {"median_ms": s.median_ms, "iqr_ms": s.iqr_ms, "q1_ms": s.q1_ms, "q3_ms": s.q3_ms, "n": s.n}


@dataclass(frozen=True)
class ModelTiming:
    """One contender end to end: device time and call latency (``kernels.timing.Timing``), with the
    flat fields (``median_ms``, ``iqr_ms``, ``min_ms``: device time; ``n``: interleaved rounds) that
    reports read."""

    device: TimingStats
    latency: TimingStats
    host_ms: float = 0.0  # host time to issue one call (CUDA)
    quantized: bool = False  # CPU runs sat on scheduler slices: the machine was busy, re-time

    @classmethod
    def of(cls, t: Timing) -> ModelTiming:
        return cls(device=t.device, latency=t.latency, host_ms=t.host_ms, quantized=t.quantized)

    @property
    def median_ms(self) -> float:
        return self.device.median_ms

    @property
    def iqr_ms(self) -> float:
        return self.device.iqr_ms

    @property
    def min_ms(self) -> float:
        """The fastest device run: on a busy machine the steadier comparison."""
        return min(self.device.samples_ms) if self.device.samples_ms else self.device.median_ms

    @property
    def n(self) -> int:
        return self.latency.n  # one latency sample per round

    def to_dict(self) -> dict:
        return {"median_ms": self.median_ms, "iqr_ms": self.iqr_ms, "min_ms": self.min_ms, "n": self.n,
                "host_ms": self.host_ms, "quantized": self.quantized,
                "device": _stats_dict(self.device), "latency": _stats_dict(self.latency)}


def _ratio(a: ModelTiming | None, b: ModelTiming | None, attr: str = "median_ms") -> float | None:
    if a is None or b is None or getattr(b, attr) <= 0:
        return None
    return getattr(a, attr) / getattr(b, attr)


@dataclass(frozen=True)
class BenchResult:
    eager: ModelTiming
    patched: ModelTiming | None  # None where no patch was given (the model's own baselines only)
    compiled: ModelTiming | None  # torch.compile(original); None where it failed or was not asked for
    compile_note: str
    kernel_calls: dict  # target -> (kernel calls, fallback calls) per eager forward of the patched model
    device: str
    compiled_patched: ModelTiming | None = None  # torch.compile(patched)
    compiled_patched_note: str = ""
    kernel_calls_compiled: dict = field(default_factory=dict)  # the same, per call of torch.compile(patched)

    def timings(self) -> dict[str, ModelTiming]:
        """The measured contenders, in the table's order."""
        return {k: t for k in LABELS if (t := getattr(self, k)) is not None}

    @property
    def speedup(self) -> float | None:
        """Patched against eager, on device time."""
        return _ratio(self.eager, self.patched)

    @property
    def speedup_best(self) -> float | None:
        """Fastest run against fastest run (robust to bursts of other work on the machine)."""
        return _ratio(self.eager, self.patched, "min_ms")

    @property
    def speedup_vs_compile(self) -> float | None:
        return _ratio(self.compiled, self.patched)

    @property
    def speedup_vs_compile_best(self) -> float | None:
        return _ratio(self.compiled, self.patched, "min_ms")

    @property
    def compile_speedup(self) -> float | None:
        return _ratio(self.eager, self.compiled)

    @property
    def compiled_patched_speedup(self) -> float | None:
        """torch.compile(patched) against eager."""
        return _ratio(self.eager, self.compiled_patched)

    @property
    def compiled_patched_vs_compile(self) -> float | None:
        """torch.compile(patched) against torch.compile(original): what the kernels add to the compiler."""
        return _ratio(self.compiled, self.compiled_patched)

    @property
    def noise(self) -> float:
        """Worst relative spread (IQR / median) of the device times."""
        return max((t.iqr_ms / t.median_ms for t in self.timings().values() if t.median_ms > 0), default=0.0)

    def speedups(self) -> dict[str, float | None]:
        """Each contender against eager, on device time."""
        return {k: _ratio(self.eager, t) for k, t in self.timings().items()}

    def to_dict(self) -> dict:
        d = {"device": self.device, "speedups_on": "device time", "compile_note": self.compile_note,
             "compiled_patched_note": self.compiled_patched_note,
             "kernel_calls": {k: list(v) for k, v in self.kernel_calls.items()},
             "kernel_calls_compiled": {k: list(v) for k, v in self.kernel_calls_compiled.items()}}
        for k in LABELS:
            t = getattr(self, k)
            d[k] = t.to_dict() if t is not None else None
        d.update(speedup=self.speedup, speedup_vs_compile=self.speedup_vs_compile,
                 compile_speedup=self.compile_speedup, compiled_patched_speedup=self.compiled_patched_speedup,
                 compiled_patched_vs_compile=self.compiled_patched_vs_compile, noise=self.noise,
                 speedup_best=self.speedup_best, speedup_vs_compile_best=self.speedup_vs_compile_best)
        return d

    def compile_verdict(self) -> str:
        """What a user of torch.compile should do with the patched model, from torch.compile(patched)
        against torch.compile(original) and the noise of the run: "" where either was not timed."""
        r = self.compiled_patched_vs_compile
        if r is None:
            return ""
        margin = max(self.noise, 0.01)
        if r < 1 - margin:
            return (f"Under torch.compile the kernels cost time ({r:.2f}x, beyond the ±{100 * margin:.0f}% noise): "
                    "torch.compile(original) alone is faster here; each kernel stops torch.compile's fusion "
                    "with the ops around it.")
        if r > 1 + margin:
            return f"Under torch.compile the kernels gain {100 * (r - 1):.0f}% beyond the ±{100 * margin:.0f}% noise."
        return (f"Under torch.compile the kernels make no measurable difference ({r:.2f}x, within the "
                f"±{100 * margin:.0f}% noise).")

    def summary(self) -> str:
        """One line: device medians (speedups on them), then the notes."""
        parts = [f"eager {self.eager.median_ms:.3f} ms"]
        if self.compiled:
            parts.append(f"torch.compile {self.compiled.median_ms:.3f} ms ({self.compile_speedup:.2f}x)")
        if self.patched:
            parts.append(f"patched {self.patched.median_ms:.3f} ms ({self.speedup:.2f}x)")
        if self.compiled_patched:
            parts.append(f"torch.compile(patched) {self.compiled_patched.median_ms:.3f} ms "
                         f"({self.compiled_patched_speedup:.2f}x)")
        s = "device time: " + ", ".join(parts)
        if self.compiled_patched_vs_compile is not None:
            s += f"; torch.compile(patched) vs torch.compile {self.compiled_patched_vs_compile:.2f}x"
        elif self.speedup_vs_compile is not None:
            s += f"; patched vs torch.compile {self.speedup_vs_compile:.2f}x"
        s += f"; noise ±{100 * self.noise:.0f}%"
        if self.speedup_best is not None:
            s += f" (fastest runs: {self.speedup_best:.2f}x)"
        return s

    def table(self) -> str:
        """The CLI's table: device time and call latency per contender, speedups on device time."""
        head = f"{'':26} {'device ms':>10} {'IQR':>8} {'vs eager':>9} {'latency ms':>11} {'IQR':>8}"
        lines = [head]
        speedups = self.speedups()
        for k, t in self.timings().items():
            lines.append(f"{LABELS[k]:26} {t.device.median_ms:10.3f} {t.device.iqr_ms:8.3f} {speedups[k]:8.2f}x "
                         f"{t.latency.median_ms:11.3f} {t.latency.iqr_ms:8.3f}")
        lines.append(COLUMNS_NOTE)
        vs = []
        if self.speedup_vs_compile is not None:
            vs.append(f"patched vs torch.compile(original) {self.speedup_vs_compile:.2f}x")
        if self.compiled_patched_vs_compile is not None:
            vs.append(f"torch.compile(patched) vs torch.compile(original) {self.compiled_patched_vs_compile:.2f}x")
        if vs:
            lines.append("; ".join(vs) + " (device time)")
        verdict = self.compile_verdict()
        if verdict:
            lines.append(verdict)
        for note in (self.compile_note if not self.compiled else "",
                     self.compiled_patched_note if not self.compiled_patched else ""):
            if note:
                lines.append(note)
        if any(t.quantized for t in self.timings().values()):
            lines.append("Some runs sat on whole milliseconds: another process was using these cores; time again.")
        return "\n".join(lines)


def _compile(module: torch.nn.Module, inputs: list, what: str) -> tuple[torch.nn.Module | None, str]:
    """``torch.compile(module)``, compiled by a first call; (None, why) where that fails."""
    try:
        compiled = torch.compile(module)
        with torch.no_grad():
            compiled(*inputs)
        return compiled, ""
    except Exception as err:  # compile is a reference point, not a requirement
        return None, f"torch.compile({what}) failed: {type(err).__name__}: {str(err).splitlines()[0][:200]}"


def bench_model(model: torch.nn.Module, inputs: list, handle: PatchHandle | None, *,
                original: torch.nn.Module | None = None, device: str = "cpu", runs: int = 30, warmup: int = 3,
                compile: bool = True, compile_patched: bool = True, budget_s: float = 60.0, batch: int = 3,
                progress=None) -> BenchResult:
    """Time the model's contenders interleaved (see module doc).

    ``handle`` is the patch on ``model``: eager runs ``model`` with it disabled, patched with it on.
    ``original`` is an unpatched copy (``unpatched_copy``, taken before patching) for
    torch.compile(original). With ``compile``, torch.compile(original) is measured (where
    ``original`` is given, or ``handle`` is None: then ``model`` is the original) and, with
    ``compile_patched`` and a ``handle``, torch.compile(patched), whose kernels are custom ops the
    compiler keeps. ``budget_s`` bounds the timing (never fewer than 10 rounds); ``batch`` is the
    back-to-back calls per round for device time on CUDA.
    """
    say = progress or (lambda msg: None)
    base = original if original is not None else (model if handle is None else None)
    compiled = compiled_patched = None
    note = "torch.compile(original) was not measured."
    note_patched = "torch.compile(patched) was not measured." if handle is not None else ""
    if compile and base is not None:
        say("compiling the original model with torch.compile")
        compiled, note = _compile(base, inputs, "original")
    if compile and compile_patched and handle is not None:
        say("compiling the patched model with torch.compile (its kernels are custom ops)")
        compiled_patched, note_patched = _compile(model, inputs, "patched")

    def eager():
        if handle is None:
            return model(*inputs)
        with handle.disabled():
            return model(*inputs)

    contenders = {"eager": eager}
    if compiled is not None:
        contenders["compiled"] = lambda: compiled(*inputs)
    if handle is not None:
        contenders["patched"] = lambda: model(*inputs)
    if compiled_patched is not None:
        contenders["compiled_patched"] = lambda: compiled_patched(*inputs)
    calls: dict = {}
    calls_compiled: dict = {}
    with torch.no_grad():
        if handle is not None:
            handle.reset_stats()
            model(*inputs)
            calls = handle.stats()
            if compiled_patched is not None:
                handle.reset_stats()
                compiled_patched(*inputs)
                calls_compiled = handle.stats()
            handle.reset_stats()
        say(f"timing {len(contenders)} contenders interleaved (device time and call latency)")
        times = time_interleaved(contenders, device, runs=max(1, runs), warmup=warmup, budget_s=budget_s,
                                 batch=batch)
    timing = {k: ModelTiming.of(t) for k, t in times.items()}
    return BenchResult(eager=timing["eager"], patched=timing.get("patched"), compiled=timing.get("compiled"),
                       compile_note=note, kernel_calls=calls, device=device,
                       compiled_patched=timing.get("compiled_patched"), compiled_patched_note=note_patched,
                       kernel_calls_compiled=calls_compiled)


def unpatched_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A deep copy for torch.compile, taken before the model is patched."""
    return copy.deepcopy(model)
