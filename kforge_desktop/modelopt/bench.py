"""End to end: the original model, the patched model and ``torch.compile(original)``, timed in one
process, interleaved round by round (so a machine that drifts shows up as noise in all three, not
as a speedup of one), after each has warmed up. Per-op speedups do not add up to a model's; this
is the number a user feels.
"""

from __future__ import annotations

import copy
import statistics
import time
from dataclasses import asdict, dataclass

import torch

from .runtime import PatchHandle


@dataclass(frozen=True)
class Timing:
    median_ms: float
    iqr_ms: float
    n: int
    min_ms: float = 0.0  # the fastest round: on a busy machine the steadier comparison


@dataclass(frozen=True)
class BenchResult:
    eager: Timing
    patched: Timing
    compiled: Timing | None  # None where torch.compile failed or was not asked for
    compile_note: str
    kernel_calls: dict  # target -> (kernel calls, fallback calls) per forward
    device: str

    @property
    def speedup(self) -> float:
        return self.eager.median_ms / self.patched.median_ms

    @property
    def speedup_best(self) -> float:
        """Fastest round against fastest round (robust to bursts of other work on the machine)."""
        return self.eager.min_ms / self.patched.min_ms

    @property
    def speedup_vs_compile_best(self) -> float | None:
        return self.compiled.min_ms / self.patched.min_ms if self.compiled else None

    @property
    def speedup_vs_compile(self) -> float | None:
        return self.compiled.median_ms / self.patched.median_ms if self.compiled else None

    @property
    def compile_speedup(self) -> float | None:
        return self.eager.median_ms / self.compiled.median_ms if self.compiled else None

    @property
    def noise(self) -> float:
        """Worst relative spread (IQR / median) of the measurements."""
        ts = [self.eager, self.patched] + ([self.compiled] if self.compiled else [])
        return max(t.iqr_ms / t.median_ms for t in ts if t.median_ms > 0)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(speedup=self.speedup, speedup_vs_compile=self.speedup_vs_compile,
                 compile_speedup=self.compile_speedup, noise=self.noise, speedup_best=self.speedup_best,
                 speedup_vs_compile_best=self.speedup_vs_compile_best)
        return d

    def summary(self) -> str:
        s = (f"eager {self.eager.median_ms:.3f} ms, patched {self.patched.median_ms:.3f} ms "
             f"({self.speedup:.2f}x)")
        if self.compiled:
            s += f", torch.compile {self.compiled.median_ms:.3f} ms (patched vs compile {self.speedup_vs_compile:.2f}x)"
        return s + f", noise ±{100 * self.noise:.0f}% (fastest rounds: {self.speedup_best:.2f}x)"


def _timing(samples: list[float]) -> Timing:
    q = statistics.quantiles(samples, n=4) if len(samples) >= 2 else [samples[0]] * 3
    return Timing(median_ms=1e3 * statistics.median(samples), iqr_ms=1e3 * (q[2] - q[0]), n=len(samples),
                  min_ms=1e3 * min(samples))


def bench_model(model: torch.nn.Module, inputs: list, handle: PatchHandle, *, original: torch.nn.Module | None = None,
                device: str = "cpu", runs: int = 30, warmup: int = 3, compile: bool = True, progress=None) -> BenchResult:
    """Time eager (``model`` with the patch disabled), patched (``model``) and torch.compile of
    ``original`` (an unpatched copy of the model; made with ``copy.deepcopy`` before patching)."""
    say = progress or (lambda msg: None)
    sync = device.startswith("cuda")
    compiled, note = None, "torch.compile(original) was not measured."
    if compile and original is not None:
        say("compiling the original model with torch.compile")
        try:
            compiled = torch.compile(original)
            with torch.no_grad():
                compiled(*inputs)
            note = ""
        except Exception as err:  # compile is a reference point, not a requirement
            compiled, note = None, f"torch.compile failed: {type(err).__name__}: {str(err).splitlines()[0][:200]}"

    def eager():
        with handle.disabled():
            model(*inputs)

    runners = {"eager": eager, "patched": lambda: model(*inputs)}
    if compiled is not None:
        runners["compiled"] = lambda: compiled(*inputs)
    samples: dict[str, list[float]] = {k: [] for k in runners}
    names = list(runners)
    with torch.no_grad():
        for _ in range(warmup):
            for fn in runners.values():
                fn()
        handle.reset_stats()
        model(*inputs)
        calls = handle.stats()
        say("timing")
        for r in range(runs):
            order = names[r % len(names):] + names[:r % len(names)]  # rotate who goes first
            for name in order:
                if sync:
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                runners[name]()
                if sync:
                    torch.cuda.synchronize()
                samples[name].append(time.perf_counter() - t0)
    return BenchResult(eager=_timing(samples["eager"]), patched=_timing(samples["patched"]),
                       compiled=_timing(samples["compiled"]) if "compiled" in samples else None,
                       compile_note=note, kernel_calls=calls, device=device)


def unpatched_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A deep copy for torch.compile, taken before the model is patched."""
    return copy.deepcopy(model)
