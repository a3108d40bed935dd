"""GPU verdicts on a CUDA machine: device time vs call latency, real sizes, parallel standard builds.

Three sections, each through the project's own ``Evaluator`` (what a search sees):

- ``table``: the six problems of ``resources/problems`` at GPU sizes (``benchmarks/problems_gpu``):
  eager, torch.compile and the compile seed (torch.compile's own code as a candidate), each in
  device time and call latency.
- ``big``: elementwise (ReLU), softmax and a row reduction on 4096 x 393216 fp32 (6.4 GB inputs):
  the verdict's wall seconds and the worker's peak GPU memory.
- ``builds``: distinct KernelBench-style ``load_inline`` CUDA candidates evaluated at once by the
  default workers: candidates built per minute.

    PYTHONPATH=$PWD TORCH_CUDA_ARCH_LIST=9.0 python3 benchmarks/gpu_verdicts.py [--sections table,big,builds]

Writes ``$OUT/gpu_verdicts.json`` (or ``--out``) after every section.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kforge_desktop.kernels.evaluator import Evaluator  # noqa: E402
from kforge_desktop.kernels.options import EvalOptions  # noqa: E402
from kforge_desktop.problem.problem import load_problem, problem_from_source  # noqa: E402
from kforge_desktop.search.inductor_seed import SeedError, inductor_module  # noqa: E402

SIX = {"softmax": "softmax", "rms_norm": "rms_norm", "layer_norm": "layer_norm",
       "group_norm_silu": "group_norm_silu", "gelu_bias": "gelu_tanh_bias", "silu_mul": "silu_mul"}

BIG = {
    "relu": "return torch.relu(x)",
    "softmax": "return torch.softmax(x, dim=-1)",
    "row_sum": "return x.sum(dim=-1)",
}
BIG_TEMPLATE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        {body}


def get_inputs():
    return [torch.randn(4096, 393216)]


def get_init_inputs():
    return []
'''


def seeds(problems: dict) -> dict:
    """torch.compile's code for each problem, generated side by side (each in its own process)."""
    def one(item):
        name, problem = item
        t0 = time.perf_counter()
        try:
            return name, inductor_module(problem, device="cuda"), time.perf_counter() - t0
        except SeedError as err:
            return name, err, time.perf_counter() - t0
    with ThreadPoolExecutor(len(problems)) as pool:
        return {name: (src, s) for name, src, s in pool.map(one, problems.items())}


def verdict_row(name: str, v, wall_s: float) -> dict:
    return {"problem": name, "status": v.status, "reason": v.reason, "wall_s": round(wall_s, 1),
            "eager_device_ms": v.baseline_ms, "eager_call_ms": v.baseline_call_ms,
            "compile_device_ms": v.compile_baseline_ms, "compile_call_ms": v.compile_call_ms,
            "seed_device_ms": v.latency_ms, "seed_call_ms": v.call_ms,
            "seed_vs_compile_device": v.speedup_compile, "build_s": v.build_s,
            "peak_gib": (v.peak_mem_bytes or 0) / 2**30, "n_timed": v.n_timed}


def section_table(ev: Evaluator) -> list[dict]:
    problems = {name: load_problem(REPO / "benchmarks" / "problems_gpu" / f"{f}.py") for name, f in SIX.items()}
    made = seeds(problems)
    t0 = time.perf_counter()
    futs = {n: ev.submit(problems[n], src) for n, (src, _) in made.items() if isinstance(src, str)}
    rows = []
    for name, (src, _) in made.items():
        if not isinstance(src, str):
            rows.append({"problem": name, "status": "no seed", "reason": str(src)})
            continue
        v = futs[name].result()
        rows.append(verdict_row(name, v, time.perf_counter() - t0))
    return rows


def section_big(ev: Evaluator) -> list[dict]:
    problems = {n: problem_from_source(f"{n}_4096x393216", BIG_TEMPLATE.format(body=b)) for n, b in BIG.items()}
    made = seeds(problems)
    rows = []
    for name, (src, seed_s) in made.items():  # one at a time: the seconds are the verdict's own
        if not isinstance(src, str):
            rows.append({"problem": name, "status": "no seed", "reason": str(src)})
            continue
        t0 = time.perf_counter()
        v = ev.evaluate(problems[name], src)
        row = verdict_row(name, v, time.perf_counter() - t0)
        row["seed_generation_s"] = round(seed_s, 1)
        rows.append(row)
    return rows


def section_builds(ev: Evaluator, n: int) -> dict:
    problem = load_problem(REPO / "benchmarks" / "problems_gpu" / "softmax.py")
    base = (REPO / "tests" / "candidates" / "cuda_formats" / "inline_softmax.py").read_text()
    sources = [base.replace('#include <cuda_runtime.h>', f'#include <cuda_runtime.h>\n// variant {i}', 1)
               for i in range(n)]
    assert len(set(sources)) == n
    opts = EvalOptions(device=ev.device, timed_runs=10, compare_compile=False)
    t0 = time.perf_counter()
    futs = [ev.submit(problem, s, opts) for s in sources]
    verdicts = [f.result() for f in futs]
    wall = time.perf_counter() - t0
    return {"candidates": n, "workers": ev.workers, "wall_s": round(wall, 1),
            "built_per_minute": round(60 * n / wall, 2),
            "build_s": [round(v.build_s or 0, 1) for v in verdicts],
            "statuses": [v.status for v in verdicts]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sections", default="table,big,builds")
    ap.add_argument("--builds", type=int, default=10, help="distinct load_inline candidates to build")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    out = Path(args.out or os.path.join(os.environ.get("OUT", str(REPO / "benchmarks" / "results")),
                                        "gpu_verdicts.json"))
    out.parent.mkdir(parents=True, exist_ok=True)
    import torch

    result: dict = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    with Evaluator("cuda") as ev:
        for section in args.sections.split(","):
            t0 = time.perf_counter()
            try:
                if section == "table":
                    result["table"] = section_table(ev)
                elif section == "big":
                    result["big"] = section_big(ev)
                elif section == "builds":
                    result["builds"] = section_builds(ev, args.builds)
            except Exception as err:  # one section failing must not lose the others
                result[section] = {"error": f"{type(err).__name__}: {err}"}
            result.setdefault("section_s", {})[section] = round(time.perf_counter() - t0, 1)
            out.write_text(json.dumps(result, indent=1, default=str))
            print(json.dumps({section: result[section]}, indent=1, default=str), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
