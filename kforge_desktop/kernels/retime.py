"""Re-timing the best few candidates of a search together, in one worker, with nothing else running.

Why: during a search each candidate is timed once, beside whatever else the machine did at that
moment (a build in another worker, the model between two tokens on a desktop). One lucky or
disturbed median can then pick the winner. Re-timed together, interleaved round by round against
the same eager and torch.compile runs, the candidates meet the same conditions, and the choice is
made from that one run. Each candidate is checked once more on fresh inputs before it is timed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..problem.problem import Problem
from .options import EvalOptions


@dataclass(frozen=True)
class RetimeTask:
    """Several candidate modules of one problem, to be timed together."""

    problem: Problem
    sources: tuple[str, ...]
    options: EvalOptions = field(default_factory=EvalOptions)

    def to_dict(self) -> dict:
        return {"kind": "retime", "problem": asdict(self.problem), "sources": list(self.sources),
                "options": self.options.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> RetimeTask:
        return cls(Problem(**data["problem"]), tuple(data["sources"]), EvalOptions.from_dict(data["options"]))


def run_retime(runner, task: RetimeTask) -> dict:
    """In the worker: ``{"timings": {name: fields}, "failed": {index: reason}}`` where name is
    ``"0"``, ``"1"``, … for the candidates and ``"eager"``/``"compile"`` for the baselines."""
    import os

    import torch

    from .candidate import load_candidate_module
    from .timing import time_interleaved
    from .verify import compare
    from .worker import RESERVED_SEED, _clone, _copy_matching_state

    opts, device = task.options, task.options.device
    ref_mod = task.problem.load_module()
    init_inputs = list(ref_mod.get_init_inputs())
    torch.manual_seed(RESERVED_SEED)
    ref_model = ref_mod.Model(*init_inputs).to(device).eval()
    seed = int.from_bytes(os.urandom(4), "little") >> 1
    inputs = runner._inputs(ref_mod, device, seed)
    expected = ref_model(*[_clone(x) for x in inputs])
    models, failed = {}, {}
    for i, source in enumerate(task.sources):
        try:
            mod = load_candidate_module(source, f"retime{i}_{runner.counter}_{os.getpid()}")
            torch.manual_seed(RESERVED_SEED)
            model = mod.ModelNew(*init_inputs)
            _copy_matching_state(ref_model, model)
            model = model.to(device).eval()
            cmp = compare(model(*[_clone(x) for x in inputs]), expected, getattr(ref_mod, "tolerance", None))
        except Exception as err:  # the candidate is untrusted: whatever it raises is its failure
            failed[str(i)] = f"{type(err).__name__}: {err}"
            continue
        if not cmp.ok:
            failed[str(i)] = cmp.reason
            continue
        models[str(i)] = model
    buffers = [_clone(x) for x in inputs]
    contenders = {name: (lambda m=m: m(*buffers)) for name, m in models.items()}
    contenders["eager"] = lambda: ref_model(*buffers)
    compiled = runner._compiled(task.problem, ref_model, inputs, device) if opts.compare_compile else None
    if compiled is not None:
        contenders["compile"] = lambda: compiled(*buffers)
    runner.conn.send(("want_timing",))
    if runner.conn.recv() != "timing_granted":
        return {"timings": {}, "failed": failed}
    runner.phase("time")
    try:
        timings = time_interleaved(contenders, device, runs=opts.timed_runs, warmup=opts.warmup_runs,
                                   budget_s=opts.timing_budget_s)
    finally:
        runner.conn.send(("timing_done",))
    out = {}
    for name, t in timings.items():
        out[name] = {"median_ms": t.device.median_ms, "iqr_ms": t.device.iqr_ms, "q1_ms": t.device.q1_ms,
                     "q3_ms": t.device.q3_ms, "n": t.device.n, "call_ms": t.latency.median_ms,
                     "quantized": t.quantized}
    return {"timings": out, "failed": failed}
