"""The Verdict: what the evaluator concluded about one candidate (plain, frozen, JSON-able)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields

STATUSES = ("ok", "incorrect", "compile_error", "runtime_error", "crashed", "timeout", "rejected")


@dataclass(frozen=True)
class Verdict:
    status: str
    reason: str
    device: str = "cpu"
    host: str = ""  # the machine it was measured on (the pool's host: a Ray node's for a remote actor)
    # Times: ``latency_ms``, ``baseline_ms`` and ``compile_baseline_ms`` are what speedups are
    # computed on, the *device time* on a GPU (the GPU's own time per call, launch overhead hidden)
    # and the wall time of a call on a CPU (``time_basis`` says which). The ``*_call_ms`` fields are
    # one synchronous call each, host overhead included.
    speedup: float | None = None  # eager median / candidate median
    speedup_compile: float | None = None  # torch.compile median / candidate median
    latency_ms: float | None = None  # candidate median
    latency_iqr_ms: float | None = None
    baseline_ms: float | None = None  # eager median
    baseline_iqr_ms: float | None = None
    compile_baseline_ms: float | None = None  # torch.compile median, None where it does not work
    compile_iqr_ms: float | None = None
    time_basis: str = ""  # "device" (CUDA) or "wall" (CPU)
    call_ms: float | None = None  # candidate, one synchronous call
    baseline_call_ms: float | None = None
    compile_call_ms: float | None = None
    host_saving_ms: float | None = None  # same device time as eager, this much less per call
    disturbed: str = ""  # why the measurement cannot be trusted (re-time it), or ""
    input_seed: int | None = None  # the seed the trial inputs were drawn from
    retimed: int = 0  # re-timed at the end of the search together with this many nodes (0: not)
    peak_mem_bytes: int | None = None  # the worker's peak device memory (GPU) or resident size (CPU)
    n_timed: int = 0
    noise: float | None = None  # relative spread (IQR/median, worst of candidate and eager)
    significant: bool = False  # speedup outside the measured noise
    max_abs_err: float | None = None
    rel_l2_err: float | None = None
    trials: int = 0
    build_s: float | None = None
    verify_s: float | None = None
    time_s: float | None = None
    cached_build: bool = False
    language: str = ""
    library_calls: tuple[str, ...] = ()
    policy_flags: tuple[str, ...] = ()
    log: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown verdict status {self.status!r}")

    @property
    def is_correct(self) -> bool:
        return self.status == "ok"

    @property
    def delegates(self) -> bool:
        """Correct, but part of the work is PyTorch's own operators: never chosen or exported
        unless the user pins it."""
        return self.status == "ok" and bool(self.library_calls)

    @property
    def is_win(self) -> bool:
        """Faster than eager beyond the noise, on a measurement that was not disturbed."""
        return (self.status == "ok" and self.significant and not self.disturbed
                and self.speedup is not None and self.speedup > 1)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["library_calls"] = list(self.library_calls)
        d["policy_flags"] = list(self.policy_flags)
        return d

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)

    @classmethod
    def from_dict(cls, d: dict) -> Verdict:
        names = {f.name for f in fields(cls)}
        clean = {k: v for k, v in d.items() if k in names}
        for key in ("library_calls", "policy_flags"):
            if key in clean:
                clean[key] = tuple(clean[key] or ())
        return cls(**clean)

    @classmethod
    def from_json(cls, text: str) -> Verdict:
        return cls.from_dict(json.loads(text))

    def summary(self) -> str:
        """One line for tables and logs."""
        if self.status == "ok" and self.speedup is not None:
            tag = "" if self.significant else " (within noise)"
            if self.disturbed:
                tag = " (disturbed measurement)"
            basis = f" {self.time_basis} time" if self.time_basis else ""
            return f"ok  {self.speedup:.2f}x over eager{tag}, {self.latency_ms:.4f} ms{basis}"
        return f"{self.status}: {self.reason}"


def timing_fields(timings: dict, cuda: bool) -> dict:
    """Verdict fields from ``time_interleaved``'s result (contenders: candidate, eager, compile)."""
    from .timing import host_only_gain, significant

    cand, eager = timings["candidate"], timings["eager"]
    fields_ = dict(
        time_basis="device" if cuda else "wall",
        latency_ms=cand.device.median_ms, latency_iqr_ms=cand.device.iqr_ms,
        baseline_ms=eager.device.median_ms, baseline_iqr_ms=eager.device.iqr_ms,
        call_ms=cand.latency.median_ms, baseline_call_ms=eager.latency.median_ms,
        n_timed=cand.device.n,
        speedup=eager.device.median_ms / cand.device.median_ms if cand.device.median_ms > 0 else None,
        noise=max(cand.device.rel_spread, eager.device.rel_spread),
        significant=significant(cand.device, eager.device),
    )
    if cuda and host_only_gain(cand, eager):
        fields_["host_saving_ms"] = eager.latency.median_ms - cand.latency.median_ms
    disturbed = [n for n, t in timings.items() if t.quantized]
    if disturbed:
        fields_["disturbed"] = ("the runs of " + ", ".join(disturbed) + " sat on whole milliseconds: the process "
                                "waited for the scheduler (another busy process), so the times are the scheduler's")
    comp = timings.get("compile")
    if comp is not None:
        fields_.update(compile_baseline_ms=comp.device.median_ms, compile_iqr_ms=comp.device.iqr_ms,
                       compile_call_ms=comp.latency.median_ms,
                       speedup_compile=(comp.device.median_ms / cand.device.median_ms
                                        if cand.device.median_ms > 0 else None))
    return fields_


def how_fast(speedup: float) -> str:
    """"1.52x faster" or "3.33x slower (0.30x)": a slowdown said as a slowdown, not as "0.30x slower"."""
    if speedup >= 1 or speedup <= 0:
        return f"{speedup:.2f}x faster"
    return f"{1 / speedup:.2f}x slower ({speedup:.2f}x)"


def ok_reason(result: dict) -> str:
    """The one sentence of a correct candidate's verdict, from its timing fields."""
    sp = result["speedup"]
    basis = result.get("time_basis") == "device" and " (device time)" or ""
    if result.get("disturbed"):
        return f"correct; {sp:.2f}x against eager, but the measurement was disturbed: re-time it"
    if result.get("host_saving_ms"):
        return (f"correct; same device time as eager; {result['host_saving_ms']:.3f} ms less per call "
                "(host overhead, not a faster kernel)")
    if result["significant"]:
        return f"correct; {how_fast(sp)} than eager{basis}"
    return f"correct; {sp:.2f}x against eager{basis}, within the measurement noise"

