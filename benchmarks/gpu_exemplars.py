"""The CUDA exemplars on GPU-sized problems: correct, and how far from the memory-bandwidth floor?

Every exemplar family has a problem of its own in ``benchmarks/problems_gpu/`` (8192-16384 rows of
4096 fp32, or the GroupNorm of a diffusion U-Net block; a Triton exemplar, ``*_triton``, shares its
family's problem and is fitted to the forward, as a GPU search places it). For each one this script

1. adapts the family's exemplar to the problem with the scaffold, exactly as a search places it as a
   seed node (``seed`` in the table says which exemplar the search itself would pick), and evaluates
   that module with the project's ``Evaluator`` (isolated workers, builds in parallel): the verdict the
   search would see (verified on fresh inputs, timed one synchronous call at a time);
2. then, one family at a time in this process, measures *device* time of the exemplar, of eager
   PyTorch and of ``torch.compile``: a CUDA graph of ``--reps`` back-to-back calls, replayed after a
   256 MB write that flushes L2 (plain back-to-back launches between CUDA events where a graph cannot
   be captured), median of ``--samples`` replays.

The floor is the bytes every input, parameter and output must move once, at ``--bandwidth`` (4.3 TB/s,
the copy rate measured on an H200). ``ratio`` = exemplar / floor; the goal is <= 1.25.

    PYTHONPATH=$PWD TORCH_CUDA_ARCH_LIST=9.0 python3 benchmarks/gpu_exemplars.py [--families a,b] [--no-compile]

Prints a table and writes JSON to ``$OUT/gpu_exemplars.json`` when ``OUT`` is set (else ``--json``).
One family failing (build, verification, timing) is recorded and the others go on.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
import traceback
import types
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
PROBLEMS = REPO / "benchmarks" / "problems_gpu"
BANDWIDTH = 4.3e12  # bytes/s: the copy rate measured on the lent H200

# family -> (problem file in problems_gpu/, the exemplar that computes it)
FAMILIES = {
    "row_softmax": ("softmax.py", "row_softmax"),
    "masked_softmax": ("masked_softmax.py", "masked_softmax"),
    "rms_norm": ("rms_norm.py", "rms_norm"),
    "layer_norm": ("layer_norm.py", "layer_norm"),
    "layer_norm_residual": ("layer_norm_residual.py", "layer_norm_residual"),
    "group_norm": ("group_norm.py", "group_norm"),
    "group_norm_silu": ("group_norm_silu.py", "group_norm_silu"),
    "gelu_tanh_bias": ("gelu_tanh_bias.py", "gelu_bias"),
    "gelu_erf_bias": ("gelu_erf_bias.py", "bias_gelu_erf"),
    "silu_mul": ("silu_mul.py", "silu_mul"),
    "relu": ("relu.py", "relu"),
    "row_sum": ("row_sum.py", "row_sum"),
    "softmax_temperature": ("softmax_temperature.py", "row_softmax"),  # scale = 1 / temperature
    "rms_norm_residual": ("rms_norm_residual.py", "rms_norm_residual"),
    "silu": ("silu.py", "silu_mul"),  # silu_mul without its b
    # Triton exemplars, fitted to the problem's forward as a GPU search places them as seeds
    "row_softmax_triton": ("softmax.py", "triton:softmax"),
}

NOTES = {
    "masked_softmax": "the exemplar never reads the masked half of the scores; the floor counts every score read "
                      "once, as the reference must",
}


@dataclass
class Row:
    family: str
    exemplar: str
    shape: str = ""
    seed: str = ""  # the exemplar the search would place as a seed for this problem
    floor_bytes: int = 0
    floor_ms: float | None = None
    exemplar_ms: float | None = None  # device time
    eager_ms: float | None = None
    compile_ms: float | None = None
    ratio: float | None = None  # exemplar / floor
    compile_ratio: float | None = None  # torch.compile / floor
    beats_compile: bool | None = None
    correct: bool = False  # verdict ok and this process's own comparison ok
    verdict: str = ""
    verdict_reason: str = ""
    verdict_ms: float | None = None  # the evaluator's synchronous per-call time (host overhead included)
    verdict_eager_ms: float | None = None
    max_abs_err: float | None = None
    build_s: float | None = None
    timing: str = ""  # graph | events
    error: str = ""
    notes: list[str] = field(default_factory=list)


def floor_bytes(problem) -> int:
    """Bytes that must cross memory at least once: every tensor input, parameter, buffer and output of the
    problem, read or written once. Shapes come from running the reference on the meta device (no data)."""
    import torch

    mod = problem.load_module()
    with torch.device("meta"), torch.no_grad():
        model = mod.Model(*mod.get_init_inputs())
        inputs = list(mod.get_inputs())
        out = model(*inputs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    tensors = [x for x in inputs + list(model.parameters()) + list(model.buffers()) + outs
               if isinstance(x, torch.Tensor)]
    return sum(t.numel() * t.element_size() for t in tensors)


def seed_source(family: str) -> tuple[object, str, str, str]:
    """(problem, candidate module source, seed exemplar name, primary input shape) for a family."""
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.exemplars import adapt, exemplar_named, seed_exemplars
    from kforge_desktop.search.scaffold import build_scaffold

    file, name = FAMILIES[family]
    problem = load_problem(PROBLEMS / file)
    scaffold = build_scaffold(problem, language="cuda")
    primary = next(a.name for a in scaffold.args if a.role == "input")
    shape = "x".join(map(str, scaffold.shapes[primary]))
    if name.startswith("triton:"):
        from kforge_desktop.search.matmul_seed import softmax_module

        source = {"triton:softmax": softmax_module}[name](problem.source)
        if source is None:
            raise RuntimeError(f"the Triton exemplar {name} does not fit {file}")
        return problem, source, name, shape
    seeds = seed_exemplars(scaffold, problem.source)
    seed = seeds[0][0].name if seeds else "none"
    exemplar = exemplar_named(name, "cuda")
    if exemplar is None:
        raise RuntimeError(f"no CUDA exemplar named {name}")
    code = adapt(exemplar, scaffold, problem.source)
    if code is None:
        raise RuntimeError(f"exemplar {name} does not fit the signature of {file}")
    return problem, scaffold.module_source(code), seed, shape


# -- phase 1: the evaluator's verdicts (what the search sees) ------------------------------------------


def verdicts(rows: dict[str, Row], families: list[str], workers: int, cache: str, timeout: float) -> dict:
    """Scaffold each family's seed and submit it at once (builds run in the workers while the next problem
    is scaffolded); fill in the verdicts. Returns family -> (problem, module source) of those scaffolded."""
    from kforge_desktop.kernels.evaluator import Evaluator
    from kforge_desktop.kernels.options import EvalOptions

    opts = EvalOptions(trials=3, timed_runs=20, warmup_runs=3, compare_compile=False, build_timeout_s=300,
                       run_timeout_s=120)
    sources, futures = {}, {}
    with Evaluator("cuda", workers=workers, options=opts, build_cache=cache) as ev:
        for f in families:
            try:
                problem, source, seed, shape = seed_source(f)
            except Exception as err:
                rows[f].verdict, rows[f].error = "error", f"scaffold: {type(err).__name__}: {err}"
                print(f"  {f}: {rows[f].error}", flush=True)
                continue
            sources[f] = (problem, source)
            rows[f].seed, rows[f].shape = seed, shape
            futures[f] = ev.submit(problem, source)
        deadline = time.monotonic() + timeout
        for family, fut in futures.items():
            row = rows[family]
            try:
                v = fut.result(timeout=max(1.0, deadline - time.monotonic()))
            except Exception as err:  # a timeout here or a pool failure: this family only
                row.verdict, row.error = "error", f"no verdict: {type(err).__name__}: {err}"
                continue
            row.verdict, row.verdict_reason = v.status, v.reason
            row.verdict_ms, row.verdict_eager_ms, row.build_s = v.latency_ms, v.baseline_ms, v.build_s
            if v.status != "ok":
                row.error = (v.reason + "\n" + v.log[-1500:]).strip()
            print(f"  verdict {family:20s} {v.summary()}", flush=True)
    return sources


# -- phase 2: device time in this process -----------------------------------------------------------


class DeviceClock:
    """Device time of a call: a CUDA graph of ``reps`` calls (or ``reps`` plain launches), L2 flushed by
    writing 256 MB before every timed replay, median over ``samples``."""

    def __init__(self, reps: int, samples: int) -> None:
        import torch

        self.reps, self.samples = reps, samples
        self.flush = torch.empty(64 * 2**20, dtype=torch.float32, device="cuda")  # 256 MB
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)

    def _graph(self, fn):
        import torch

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm up on the capture stream's side, as graph capture wants
            fn()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(self.reps):
                fn()
        torch.cuda.synchronize()
        return graph

    def measure(self, fn) -> tuple[float, str]:
        import torch

        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        try:
            graph = self._graph(fn)
            run, how = graph.replay, "graph"
        except Exception:
            torch.cuda.synchronize()
            graph = None

            def run():
                for _ in range(self.reps):
                    fn()
            how = "events"
        times = []
        for _ in range(self.samples):
            self.flush.zero_()
            self.start.record()
            run()
            self.end.record()
            self.end.synchronize()
            times.append(self.start.elapsed_time(self.end) / self.reps)
        del graph
        return statistics.median(times), how


def load_module(source: str, name: str) -> types.ModuleType:
    """Our own exemplar's module (trusted: the worker already verified it), built from the shared cache;
    from a file (Triton reads a kernel's source back from its file)."""
    module = types.ModuleType(name)
    path = Path(tempfile.mkdtemp(prefix="kforge-exemplar-")) / f"{name}.py"
    path.write_text(source)
    module.__file__ = str(path)
    sys.modules[name] = module
    exec(compile(source, str(path), "exec"), module.__dict__)
    return module


def device_times(row: Row, problem, source: str, clock: DeviceClock, with_compile: bool, bandwidth: float) -> None:
    import torch

    from kforge_desktop.kernels.verify import compare

    mod = problem.load_module()
    init = list(mod.get_init_inputs())
    torch.manual_seed(0)
    ref = mod.Model(*init).cuda().eval()
    torch.manual_seed(1)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
    row.floor_bytes = floor_bytes(problem)
    row.floor_ms = row.floor_bytes / bandwidth * 1e3
    with torch.no_grad():
        expected = ref(*inputs)
        row.eager_ms, how = clock.measure(lambda: ref(*inputs))
        if with_compile:
            try:
                compiled = torch.compile(ref)
                compiled(*inputs)
                row.compile_ms, _ = clock.measure(lambda: compiled(*inputs))
            except Exception as err:
                row.notes.append(f"torch.compile failed: {type(err).__name__}: {str(err)[:200]}")
        if row.verdict != "ok":
            return  # a kernel the evaluator did not pass is not run in this process
        cand_mod = load_module(source, f"exemplar_{row.family}")
        torch.manual_seed(0)
        cand = cand_mod.ModelNew(*init)
        mine = cand.state_dict()
        cand.load_state_dict({k: v for k, v in ref.state_dict().items() if k in mine and mine[k].shape == v.shape},
                             strict=False)
        cand = cand.cuda().eval()
        cmp = compare(cand(*inputs), expected)
        row.max_abs_err = cmp.max_abs_err
        row.correct = cmp.ok
        if not cmp.ok:
            row.error = f"wrong on the benchmark's inputs: {cmp.reason}"
        row.exemplar_ms, row.timing = clock.measure(lambda: cand(*inputs))
        if how != row.timing:
            row.notes.append(f"eager timed with {how}")
    row.ratio = row.exemplar_ms / row.floor_ms if row.exemplar_ms and row.floor_ms else None
    row.compile_ratio = row.compile_ms / row.floor_ms if row.compile_ms and row.floor_ms else None
    if row.exemplar_ms and row.compile_ms:
        row.beats_compile = row.exemplar_ms < row.compile_ms


# -- output -------------------------------------------------------------------------------------------


def _f(v, spec=".4f") -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def table(rows: list[Row]) -> str:
    head = (f"{'family':20s} {'shape':16s} {'exemplar ms':>11s} {'floor ms':>9s} {'eager ms':>9s} "
            f"{'compile ms':>10s} {'ratio':>6s} {'compile/floor':>13s} {'correct':>7s}  seed / verdict")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r.family:20s} {r.shape:16s} {_f(r.exemplar_ms):>11s} {_f(r.floor_ms):>9s} "
                     f"{_f(r.eager_ms):>9s} {_f(r.compile_ms):>10s} {_f(r.ratio, '.2f'):>6s} "
                     f"{_f(r.compile_ratio, '.2f'):>13s} {str(r.correct):>7s}  {r.seed} / {r.verdict}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--families", default="", help="comma-separated subset of: " + ", ".join(FAMILIES))
    parser.add_argument("--workers", type=int, default=0, help="evaluator workers (default: one per family, <= 8)")
    parser.add_argument("--reps", type=int, default=10, help="calls per timed graph replay")
    parser.add_argument("--samples", type=int, default=15, help="timed replays per contender (median)")
    parser.add_argument("--bandwidth", type=float, default=BANDWIDTH, help="bytes/s of the floor")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for all verdicts")
    parser.add_argument("--build-cache", default="", help="build cache folder (default: a fresh temporary one)")
    parser.add_argument("--json", default="", help="where to write the JSON (default: $OUT/gpu_exemplars.json)")
    args = parser.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print("this benchmark needs a CUDA GPU")
        return 2
    major, minor = torch.cuda.get_device_capability()
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", f"{major}.{minor}")
    cache = args.build_cache or tempfile.mkdtemp(prefix="kforge-gpu-exemplars-")
    os.environ["KFORGE_BUILD_CACHE"] = cache  # phase 2 loads the libraries the workers built
    families = [f.strip() for f in args.families.split(",") if f.strip()] or list(FAMILIES)
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        print(f"unknown families: {', '.join(unknown)}; known: {', '.join(FAMILIES)}")
        return 2
    t_start = time.perf_counter()
    rows = {f: Row(family=f, exemplar=FAMILIES[f][1], notes=[NOTES[f]] if f in NOTES else []) for f in families}

    workers = args.workers or max(1, min(8, len(families)))
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; {len(families)} families, {workers} workers",
          flush=True)
    sources: dict[str, tuple] = {}
    try:
        sources = verdicts(rows, families, workers, cache, args.timeout)
    except Exception as err:  # the pool itself failed: report it for every family without a verdict
        for f in families:
            if not rows[f].verdict:
                rows[f].verdict, rows[f].error = "error", f"evaluator: {type(err).__name__}: {err}"
    print(f"verdicts after {time.perf_counter() - t_start:.0f} s; device time, one family at a time", flush=True)

    clock = DeviceClock(args.reps, args.samples)
    for f in families:
        if f not in sources:
            continue
        row = rows[f]
        try:
            device_times(row, sources[f][0], sources[f][1], clock, not args.no_compile, args.bandwidth)
        except Exception as err:
            row.error = (row.error + "\n" if row.error else "") + f"timing: {type(err).__name__}: {err}"
            row.notes.append(traceback.format_exc()[-1500:])
        row.correct = row.correct and row.verdict == "ok"
        print(f"  {f:20s} exemplar {_f(row.exemplar_ms)} ms  floor {_f(row.floor_ms)}  eager {_f(row.eager_ms)}"
              f"  compile {_f(row.compile_ms)}  ratio {_f(row.ratio, '.2f')}  correct {row.correct}", flush=True)
        torch.cuda.empty_cache()

    ordered = [rows[f] for f in families]
    print()
    print(table(ordered))
    for r in ordered:
        if r.error:
            print(f"\n{r.family}: {r.error[:2000]}")
    report = {
        "device": torch.cuda.get_device_name(), "torch": torch.__version__, "bandwidth_bytes_per_s": args.bandwidth,
        "reps": args.reps, "samples": args.samples, "wall_s": round(time.perf_counter() - t_start, 1),
        "rows": [asdict(r) for r in ordered],
    }
    out = args.json or (os.path.join(os.environ["OUT"], "gpu_exemplars.json") if os.environ.get("OUT") else "")
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(report, indent=1))
        print(f"\nwrote {out}")
    print(f"total {report['wall_s']} s")
    return 0 if all(r.correct for r in ordered) else 1


if __name__ == "__main__":
    sys.exit(main())
