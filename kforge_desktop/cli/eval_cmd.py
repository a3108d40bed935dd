"""``kforge eval PROBLEM.py CANDIDATE.py|DIR/``: a verdict for one candidate, or a table for a folder."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .errors import UserError


def register(sub) -> None:
    p = sub.add_parser(
        "eval",
        help="build, verify and time candidate kernels against a problem",
        description="Build, verify and time ModelNew candidates in isolated workers. Exit 0 whenever a "
                    "verdict was reached, whatever it is.",
    )
    p.add_argument("problem", help="KernelBench problem file (Model, get_inputs, get_init_inputs)")
    p.add_argument("candidate", help="candidate file defining ModelNew, or a folder of them")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    p.add_argument("--json", action="store_true", help="print JSON (one object, or one per line for a folder)")
    p.add_argument("--workers", type=int, default=None, help="worker processes (default: by device)")
    p.add_argument("--runs", type=int, default=50, help="timed runs per contender (default 50)")
    p.add_argument("--trials", type=int, default=5, help="verification trials with fresh inputs (default 5)")
    p.add_argument("--build-timeout", type=float, default=300.0, help="seconds a build may take")
    p.add_argument("--run-timeout", type=float, default=120.0, help="seconds verification/timing may take")
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    p.add_argument("--finite-only", action="store_true",
                   help="skip the trial with NaN in the inputs: accept a kernel that differs from PyTorch only "
                        "where an input holds NaN")
    p.add_argument("--log", action="store_true", help="print the build/run log of each verdict")
    p.set_defaults(func=run)


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def run(args) -> int:
    from ..kernels.evaluator import Evaluator
    from ..kernels.options import EvalOptions
    from ..problem.problem import ProblemError, load_problem

    try:
        problem = load_problem(args.problem)
    except ProblemError as err:
        raise UserError(str(err)) from None
    target = Path(args.candidate)
    if target.is_dir():
        files = sorted(f for f in target.glob("*.py") if not f.name.startswith("_"))
        if not files:
            raise UserError(f"{target} holds no candidate .py files.")
    elif target.exists():
        files = [target]
    else:
        raise UserError(f"Candidate {target} does not exist.")
    device = args.device or default_device()
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise UserError("--device cuda was asked for, but this machine's torch sees no CUDA device.")
    opts = EvalOptions(device=device, trials=args.trials, timed_runs=args.runs,
                       build_timeout_s=args.build_timeout, run_timeout_s=args.run_timeout,
                       compare_compile=not args.no_compile, nan_trial=not args.finite_only)
    sources = []
    for f in files:
        try:
            sources.append((f, f.read_text()))
        except (OSError, UnicodeDecodeError) as err:
            raise UserError(f"Cannot read candidate {f}: {err}.") from None
    workers = args.workers or (1 if len(files) == 1 else None)
    with Evaluator(device=device, workers=workers, options=opts) as ev:
        futures = [(f, ev.submit(problem, src)) for f, src in sources]
        if not target.is_dir():  # a folder gets one line per candidate, however many it holds
            verdict = futures[0][1].result()
            if args.json:
                print(verdict.to_json(indent=2))
            else:
                print_verdict(files[0].name, verdict, show_log=args.log)
            return 0
        rows = []
        for f, fut in futures:
            verdict = fut.result()
            if args.json:
                print(json.dumps({"candidate": str(f), **verdict.to_dict()}))
                sys.stdout.flush()
            rows.append((f.name, verdict))
        if not args.json:
            print_table(rows)
    return 0


def _fmt(x, spec: str, none: str = "-") -> str:
    return none if x is None else format(x, spec)


def print_verdict(name: str, v, show_log: bool = False) -> None:
    print(f"{name}: {v.status.upper()} - {v.reason}")
    if v.latency_ms is not None:
        basis = v.time_basis or "measured"
        call = lambda ms: f"; {ms:.4f} ms per synchronous call" if ms is not None and basis == "device" else ""  # noqa: E731
        print(f"  candidate {v.latency_ms:.4f} ms {basis} time (IQR {v.latency_iqr_ms:.4f}, n={v.n_timed})"
              f"{call(v.call_ms)}")
        print(f"  eager     {v.baseline_ms:.4f} ms{call(v.baseline_call_ms)}  -> speedup {v.speedup:.2f}x "
              f"on {basis} time{'' if v.significant else ' (within noise)'}")
        if v.compile_baseline_ms is not None:
            print(f"  compile   {v.compile_baseline_ms:.4f} ms{call(v.compile_call_ms)}  -> speedup "
                  f"{v.speedup_compile:.2f}x on {basis} time")
        if v.disturbed:
            print(f"  disturbed {v.disturbed}")
    if v.max_abs_err is not None:
        print(f"  error     max abs {v.max_abs_err:.2e}, rel L2 {v.rel_l2_err:.2e} over {v.trials} checks")
    if v.build_s is not None:
        cached = " (cached)" if v.cached_build else ""
        print(f"  seconds   build {v.build_s:.2f}{cached}, verify {_fmt(v.verify_s, '.2f')}, "
              f"time {_fmt(v.time_s, '.2f')}")
    if v.library_calls:
        print(f"  library   {', '.join(v.library_calls)}")
    if show_log and v.log:
        print("  log:\n" + "\n".join("    " + ln for ln in v.log.splitlines()))


def print_table(rows) -> None:
    basis = next((v.time_basis for _n, v in rows if v.time_basis), "")
    unit = {"device": "dev ms", "wall": "wall ms"}.get(basis, "ms")
    head = f"{'candidate':<28} {'status':<14} {'speedup':>8} {unit:>9} {'eager ' + unit:>13} {'build s':>8}  reason"
    print(head)
    print("-" * len(head))
    for name, v in rows:
        print(f"{name[:28]:<28} {v.status:<14} {_fmt(v.speedup, '.2f'):>8} {_fmt(v.latency_ms, '.4f'):>9} "
              f"{_fmt(v.baseline_ms, '.4f'):>13} {_fmt(v.build_s, '.2f'):>8}  {v.reason[:90]}")
