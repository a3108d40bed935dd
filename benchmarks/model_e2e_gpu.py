"""GPU-sized example models end to end on CUDA: profile, then eager vs torch.compile (vs patched and
torch.compile(patched) where a session with kernels is given), with torch only.

``model_e2e.py`` runs the whole flow with the local LLM (llama.cpp) on the CPU-sized examples; this
script needs only torch and a CUDA device, so it runs on a bare GPU box. For each model of
resources/examples/<name>.py it
- profiles the model (``modelopt.profile``): the top targets by share of the op time, with their
  distance from the bytes/FLOPs floor;
- times eager and torch.compile(original) interleaved (``modelopt.bench``, the timer of
  ``kernels.timing``): each contender's **device time** (the GPU's own time per call, calls queued
  back to back, L2 flushed; speedups are on it) and its **call latency** (one synchronous call,
  host overhead included);
- where ``--session`` gives a whole-model session made from that model (``kforge optimize``), also
  the patched model and torch.compile(patched), the session's chosen kernels put back as custom ops.

    PYTHONPATH=$PWD python3 benchmarks/model_e2e_gpu.py [--models llm_block_gpu,diffusion_block_gpu,vision_stage_gpu]
        [--session S.kforge ...] [--runs 30] [--budget 12] [--no-compile] [--out DIR]

Results: DIR/model_e2e_gpu.json (DIR: --out, else $OUT, else benchmarks/results/), rewritten after
each model, and a table per model on stdout. About 2 minutes on an H200, most of it torch.compile.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MODELS = ("llm_block_gpu", "diffusion_block_gpu", "vision_stage_gpu")


def _environment(device: str) -> dict:
    import torch

    env = {"torch": torch.__version__, "device": device,
           "tf32_matmul": torch.backends.cuda.matmul.allow_tf32, "tf32_cudnn": torch.backends.cudnn.allow_tf32}
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        env.update(device_name=props.name, sms=props.multi_processor_count, memory_gb=props.total_memory / 2**30)
    return env


def _sessions(paths: list[str]) -> dict[str, str]:
    """model name -> session path, from each session's own record of its model file."""
    from kforge_desktop.modelopt.session import model_meta
    from kforge_desktop.store import SessionStore

    out = {}
    for p in paths:
        store = SessionStore.open(p)
        try:
            meta = model_meta(store)
        finally:
            store.close()
        out[meta.get("model_name") or Path(meta["model_path"]).stem] = p
    return out


def _targets(profile, top: int = 8) -> list[dict]:
    return [{"name": t.name, "kind": t.kind, "op": t.op, "calls": t.calls, "share": t.share, "time_ms": t.time_ms,
             "floor_ms": t.floor_ms, "headroom_floor": t.headroom_floor, "modules": list(t.module_paths)}
            for t in profile.targets[:top]]


def _free() -> None:
    import torch
    import torch._dynamo

    torch._dynamo.reset()  # each model's compiled code and guards go with it
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _say(msg: str) -> None:
    print(f"   {msg}…", flush=True)


def run_model(name: str, session: str | None, args) -> dict:
    import torch

    from kforge_desktop.modelopt.bench import bench_model, unpatched_copy
    from kforge_desktop.modelopt.loader import load_model_file
    from kforge_desktop.modelopt.profile import profile_model

    path = REPO / "resources" / "examples" / f"{name}.py"
    row: dict = {"model": name, "session": session}
    t0 = time.perf_counter()
    mf = load_model_file(path, args.device)
    row["inputs"] = [list(x.shape) for x in mf.inputs if isinstance(x, torch.Tensor)]
    row["params_m"] = sum(p.numel() for p in mf.model.parameters()) / 1e6
    _say("profiling")
    profiled = profile_model(mf.model, list(mf.inputs), args.device, name=name, runs=args.profile_runs,
                             captures_per_variant=0)
    p = profiled.profile
    row["profile"] = {"eager_ms": p.eager_ms, "op_ms": p.op_ms, "other_ms": p.other_ms, "untraced": list(p.untraced),
                      "targets": _targets(p)}
    row["profile_s"] = time.perf_counter() - t0
    handle = original = None
    model, inputs = mf.model, list(mf.inputs)
    if session:
        from kforge_desktop.modelopt.integrate import integrate
        from kforge_desktop.modelopt.session import chosen_kernels, reload_model
        from kforge_desktop.store import SessionStore

        del mf, model, inputs, profiled
        _free()
        store = SessionStore.open(session)
        try:
            smf, sprofiled = reload_model(store, args.device, path)
            chosen, reasons = chosen_kernels(store, sprofiled)
        finally:
            store.close()
        model, inputs = smf.model, list(smf.inputs)
        if chosen:
            original = None if args.no_compile else unpatched_copy(model)
            _say(f"patching with {len(chosen)} kernel(s) and checking against the original")
            integ = integrate(model, sprofiled.analysis, chosen, inputs, smf.make_inputs, args.device)
            reasons.update(integ.dropped)
            row["kernels"] = integ.kept
            row["checks"] = [c.__dict__ for c in integ.checks]
            handle = integ.handle if integ.kept else None
            if handle is None:
                original = None
        row["not_used"] = reasons
    t1 = time.perf_counter()
    result = bench_model(model, inputs, handle, original=original, device=args.device, runs=args.runs,
                         warmup=args.warmup, compile=not args.no_compile, budget_s=args.budget, progress=_say)
    row["bench_s"] = time.perf_counter() - t1
    row["bench"] = result.to_dict()
    row["table"] = result.table()
    if args.device.startswith("cuda"):
        row["peak_memory_gb"] = torch.cuda.max_memory_allocated() / 2**30
    del model, inputs, original, handle, result
    _free()
    return row


def _print_row(row: dict) -> None:
    prof = row["profile"]
    print(f"== {row['model']}: inputs {row['inputs']}, {row['params_m']:.1f}M parameters; eager {prof['eager_ms']:.3f} ms "
          f"(profile {row['profile_s']:.0f} s, bench {row['bench_s']:.0f} s)")
    for t in prof["targets"]:
        hf = t["headroom_floor"]
        print(f"   {t['name']:28} {100 * t['share']:5.1f}%  {t['time_ms']:8.3f} ms  "
              f"{'–' if hf is None else f'{hf:.1f}x'} over floor  {t['op']}")
    if row.get("kernels") is not None:
        print(f"   kernels used: {', '.join(row['kernels']) or 'none'}")
    for t, r in sorted((row.get("not_used") or {}).items()):
        print(f"   {t}: not used: {r}")
    print("\n".join("   " + line for line in row["table"].splitlines()), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--session", action="append", default=[],
                    help="a whole-model session (kforge optimize) of one of the models; repeat for more")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--runs", type=int, default=30, help="interleaved rounds per model (default 30)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--budget", type=float, default=12.0,
                    help="seconds of timing per model at most, after compiling (default 12)")
    ap.add_argument("--profile-runs", type=int, default=3)
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    ap.add_argument("--out", default=None, help="folder for model_e2e_gpu.json (default: $OUT, else benchmarks/results)")
    args = ap.parse_args()

    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("model_e2e_gpu: torch sees no CUDA device here.", file=sys.stderr)
        return 2
    out_dir = Path(args.out or os.environ.get("OUT") or REPO / "benchmarks" / "results")
    out_dir.mkdir(parents=True, exist_ok=True)
    sessions = _sessions(args.session)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = sorted(set(sessions) - set(names))
    if unknown:
        print(f"model_e2e_gpu: --session given for {', '.join(unknown)}, which is not among --models.", file=sys.stderr)
        return 2
    data = {"command": "python3 benchmarks/model_e2e_gpu.py " + " ".join(sys.argv[1:]),
            "environment": _environment(args.device), "models": []}
    t0 = time.perf_counter()
    for name in names:
        data["models"].append(run_model(name, sessions.get(name), args))
        _print_row(data["models"][-1])
        data["seconds"] = time.perf_counter() - t0
        (out_dir / "model_e2e_gpu.json").write_text(json.dumps(data, indent=1, default=str))
    print(f"wrote {out_dir / 'model_e2e_gpu.json'} ({data['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
