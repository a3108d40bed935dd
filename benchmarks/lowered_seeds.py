"""How fast the reference lowered to plain loops is: the seed a search starts from where no exemplar fits.

For each problem file the lowering reaches, the lowered C++ kernel (search/lowering.py, as a search's seed node
has it) is built, verified and timed against eager by the evaluator on this machine's CPU, one worker; with
``--device cuda`` the lowered CUDA kernel on the GPU (device time; torch.compile timed beside it). With ``--out``
the candidate files are kept (``kforge eval PROBLEM OUT/NAME`` times them again).

    python benchmarks/lowered_seeds.py benchmarks/problems_generalize/dev/*.py [--out DIR] [--json FILE]
    PYTHONPATH=$PWD TORCH_CUDA_ARCH_LIST=9.0 python3 benchmarks/lowered_seeds.py --device cuda benchmarks/problems_gpu/*.py
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def fmt(x: float | None, spec: str) -> str:
    return format(x, spec) if x is not None else "-"


def main() -> None:
    from kforge_desktop.kernels.evaluator import Evaluator
    from kforge_desktop.kernels.options import EvalOptions
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.lowering import lower
    from kforge_desktop.search.setup import try_scaffold

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("problems", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, help="keep the candidate files here (OUT/NAME/candidate.py)")
    parser.add_argument("--json", type=Path, help="write the rows here")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="lowered_seeds_"))
    rows = []
    gpu = args.device == "cuda"
    options = EvalOptions(compare_compile=gpu, timed_runs=args.runs)
    with Evaluator(args.device, workers=1, options=options) as ev:
        print(f"{'problem':24} {'status':10} {'seed ms':>9} {'eager ms':>9} {'vs eager':>9}" + (" compile ms" if gpu else ""))
        for path in args.problems:
            problem = load_problem(path)
            scaffold = try_scaffold(problem, "cuda" if gpu else "cpp")
            kernel = lower(problem, scaffold) if scaffold else None
            if kernel is None:
                print(f"{problem.name:24} not lowered")
                continue
            source = scaffold.module_source(kernel)
            (out / problem.name).mkdir(parents=True, exist_ok=True)
            (out / problem.name / "candidate.py").write_text(source)
            v = ev.evaluate(problem, source)
            compile_ms = v.compile_baseline_ms
            row = {"problem": problem.name, "status": v.status, "seed_ms": v.latency_ms, "eager_ms": v.baseline_ms,
                   "speedup": v.speedup, "compile_ms": compile_ms, "reason": v.reason}
            rows.append(row)
            print(f"{problem.name:24} {v.status:10} {fmt(v.latency_ms, '9.4f')} {fmt(v.baseline_ms, '9.4f')} "
                  f"{fmt(v.speedup, '8.2f')}x" + (f" {fmt(compile_ms, '10.4f')}" if gpu else ""), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
