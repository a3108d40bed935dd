"""``kforge profile MODEL.py``, ``kforge bench MODEL.py --session S``, ``kforge export SESSION --out DIR``.

The whole-model commands (``kforge optimize MODEL.py`` lives with optimize and hands model files
to ``modelopt.optimize``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .errors import UserError


def register(sub) -> None:
    p = sub.add_parser(
        "profile",
        help="profile a model: the ops worth a kernel, with shares and headroom",
        description="Run the model (eval mode, no grad) and print its targets: each op or fusible chain, "
                    "where it is called, shapes, calls, share of the time, and its headroom against the "
                    "floor set by bytes moved and FLOPs on this device (and against torch.compile with --compile).",
    )
    p.add_argument("model", help="model file: get_model() and get_inputs(), or the KernelBench trio")
    p.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    p.add_argument("--json", action="store_true", help="print the profile as one JSON object")
    p.add_argument("--compile", action="store_true", help="also time each target under torch.compile (slow on CPU)")
    p.add_argument("--runs", type=int, default=5, help="timed runs of the model (default 5)")
    p.add_argument("--problems", metavar="DIR", default=None,
                   help="also write each target as a KernelBench problem file (with its captured inputs) into DIR")
    p.add_argument("--reprobe", action="store_true", help="measure this device's bandwidth and FLOP rate again")
    p.set_defaults(func=run_profile)

    b = sub.add_parser(
        "bench",
        help="time a model end to end: original, torch.compile, patched with a session's kernels, "
             "torch.compile(patched)",
        description="Load the model, patch it with the chosen kernel of each target of the session (the pinned "
                    "one, else the fastest verified one), check it against the original, then time the original, "
                    "torch.compile(original), the patched model and torch.compile(patched) interleaved in one "
                    "process. Each gets its device time (the GPU's own time per call; speedups are on it) and "
                    "its call latency (one synchronous call, host overhead included).",
    )
    b.add_argument("model", help="the model file the session was made from")
    b.add_argument("--session", required=True, help="the whole-model session (from kforge optimize MODEL.py)")
    b.add_argument("--device", default=None, help="cpu or cuda (default: the session's)")
    b.add_argument("--runs", type=int, default=30, help="interleaved rounds (default 30)")
    b.add_argument("--no-compile", action="store_true", help="leave torch.compile (of both models) out")
    b.add_argument("--budget", type=float, default=60.0,
                   help="seconds of timing at most, after compiling (never fewer than 10 rounds; default 60)")
    b.add_argument("--json", action="store_true", help="print the result as JSON")
    b.set_defaults(func=run_bench)

    e = sub.add_parser(
        "export",
        help="write a session's kernels as a Python package that patches the model with only torch",
        description="Write DIR/<package> (kernel sources, a loader, apply(model), the verification and timing "
                    "record of each kernel) and DIR/REPORT.md + DIR/report.html.",
    )
    e.add_argument("session", help="the whole-model session")
    e.add_argument("--out", required=True, help="output folder")
    e.add_argument("--device", default=None, help="cpu or cuda (default: the session's)")
    e.add_argument("--no-bench", action="store_true", help="skip the end-to-end benchmark in the record")
    e.add_argument("--no-compile", action="store_true", help="leave torch.compile out of the benchmark")
    e.add_argument("--runs", type=int, default=20, help="interleaved benchmark rounds (default 20)")
    e.add_argument("--json", action="store_true", help="print a JSON summary")
    e.set_defaults(func=run_export)


def _check_device(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise UserError("--device cuda was asked for, but torch sees no CUDA device here.")
    elif device != "cpu":
        raise UserError(f"Unknown device {device!r}; use cpu or cuda.")


def _progress(enabled: bool):
    if not enabled:
        return None
    return lambda msg: print(f"  {msg}…", file=sys.stderr, flush=True)


def run_profile(args) -> int:
    from ..modelopt.loader import ModelFileError, load_model_file
    from ..modelopt.problems import TargetProblemError, write_problem
    from ..modelopt.profile import profile_model
    from ..modelopt.report import profile_table
    from ..modelopt.roofline import device_rates

    _check_device(args.device)
    try:
        mf = load_model_file(args.model, args.device)
    except ModelFileError as err:
        raise UserError(str(err)) from None
    rates = device_rates(args.device, refresh=args.reprobe)
    profiled = profile_model(mf.model, list(mf.inputs), args.device, name=mf.name, runs=max(1, args.runs),
                             compare_compile=args.compile, rates=rates, progress=_progress(not args.json))
    written = {}
    if args.problems:
        for t in profiled.profile.targets:
            if not t.optimizable:
                continue
            try:
                tp = write_problem(t, profiled.analysis.cuts[t.name], profiled.analysis.captures[t.name],
                                   args.problems, mf.name)
                written[t.name] = str(tp.path)
            except TargetProblemError as err:
                print(f"kforge: {err}", file=sys.stderr)
    if args.json:
        d = profiled.profile.to_dict()
        for t in d["targets"]:
            t["problem_file"] = written.get(t["name"])
        print(json.dumps(d, default=str))
    else:
        print(profile_table(profiled.profile))
        if written:
            print(f"{len(written)} problem file(s) written to {args.problems}")
    return 0


def _open_model_session(path: str):
    from ..modelopt.session import ModelSessionError, model_meta
    from ..store import SessionStore, StoreError

    try:
        store = SessionStore.open(path)
        model_meta(store)
    except (StoreError, ModelSessionError) as err:
        raise UserError(str(err)) from None
    return store


def run_bench(args) -> int:
    from ..modelopt.bench import bench_model, unpatched_copy
    from ..modelopt.integrate import integrate
    from ..modelopt.loader import ModelFileError
    from ..modelopt.session import (
        ModelSessionError,
        chosen_kernels,
        model_meta,
        not_used_line,
        not_used_summary,
        reload_model,
    )

    store = _open_model_session(args.session)
    device = args.device or model_meta(store).get("device", "cpu")
    _check_device(device)
    say = _progress(not args.json)
    try:
        mf, profiled = reload_model(store, device, args.model)
    except (ModelFileError, ModelSessionError) as err:
        raise UserError(str(err)) from None
    chosen, reasons = chosen_kernels(store, profiled)
    if not chosen:
        raise UserError(f"The session has no kernel to use for this model ({not_used_summary(reasons)}).")
    original = None if args.no_compile else unpatched_copy(mf.model)
    integ = integrate(mf.model, profiled.analysis, chosen, list(mf.inputs), mf.make_inputs, device)
    reasons.update(integ.dropped)
    if not integ.kept:
        raise UserError("No kernel of the session keeps the model's outputs right: "
                        + "; ".join(f"{t}: {r}" for t, r in integ.dropped.items()) + ".")
    result = bench_model(mf.model, list(mf.inputs), integ.handle, original=original, device=device,
                         runs=max(3, args.runs), compile=not args.no_compile, budget_s=args.budget, progress=say)
    out = {"model": mf.name, "session": str(args.session), "kernels": integ.kept, "not_used": reasons,
           "checks": [c.__dict__ for c in integ.checks], **result.to_dict()}
    store.set_meta("modelopt_bench", out)
    if args.json:
        print(json.dumps(out, default=str))
        return 0
    print(f"{mf.name} on {device}, kernels used: {', '.join(integ.kept)}")
    for t, r in sorted(reasons.items()):
        print("  " + not_used_line(t, r))
    for c in integ.checks:
        print(f"  check on {c.label}: {'ok' if c.ok else 'MISMATCH'} (max abs {c.max_abs_err:.2g}, rel L2 {c.rel_l2_err:.2g})")
    print(result.table())
    for t, (hits, misses) in sorted(result.kernel_calls.items()):
        line = f"  {t}: {hits} kernel call(s), {misses} fallback(s) per forward"
        if t in result.kernel_calls_compiled:
            h, m = result.kernel_calls_compiled[t]
            line += f"; under torch.compile(patched): {h} kernel call(s), {m} fallback(s)"
        print(line)
    return 0


def run_export(args) -> int:
    from ..modelopt.export import export_session
    from ..modelopt.loader import ModelFileError
    from ..modelopt.session import LEFT_TO_COMPILE, ModelSessionError, model_meta, not_used_line

    store = _open_model_session(args.session)
    device = args.device or model_meta(store).get("device", "cpu")
    _check_device(device)
    try:
        res = export_session(args.session, args.out, device=device, bench=not args.no_bench, bench_runs=max(3, args.runs),
                             bench_compile=not args.no_compile, progress=_progress(not args.json))
    except (ModelFileError, ModelSessionError) as err:
        raise UserError(str(err)) from None
    if args.json:
        print(json.dumps({"out": str(res.out), "package": res.package, "kernels": list(res.kernels),
                          "not_used": res.not_used, "report": str(res.report),
                          "bench": res.bench.to_dict() if res.bench else None}, default=str))
        return 0
    print(f"wrote {Path(res.out) / res.package} ({len(res.kernels)} kernel(s): {', '.join(res.kernels)})")
    for t, r in sorted(res.not_used.items()):
        if r.startswith(LEFT_TO_COMPILE):
            print("  " + not_used_line(t, r))
    print(f"report: {res.report}")
    if res.bench:
        print(res.bench.summary())
    print(f"use it:  import sys; sys.path.insert(0, {str(res.out)!r}); import {res.package}; {res.package}.apply(model)")
    return 0
