"""Whole models end to end: profile, optimize with the local LLM, integrate, benchmark.

For each example model under resources/examples/ this runs what ``kforge optimize MODEL.py`` runs
(with each target also timed under torch.compile while profiling), then reports the top targets
with their shares and headroom, each searched target's best verified speedup, and the end-to-end
time of the original model, the patched model and torch.compile(original), measured interleaved in
one process.

    python benchmarks/model_e2e.py [--models vision_net,diffusion_block,llm_block] [--budget 6]
        [--llm PATH] [--device cpu] [--out DIR] [--hand-kernels]

``--hand-kernels`` also adds the hand-written kernels of resources/examples/kernels/<model>_<target>.py to their
target's search tree (as user nodes, evaluated like any candidate) and benchmarks the model again
with them: what integration gives when a good kernel exists. Results go to DIR/model_e2e.json and
DIR/model_e2e.md (default: benchmarks/results/).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _fmt(x, spec=".2f", suffix="x"):
    return "–" if x is None else f"{x:{spec}}{suffix}"


def _hand_kernels(store, session_path, model_name, device):
    """Add resources/examples/kernels/<model>_<kind>.py to the matching target's tree, evaluated."""
    from kforge_desktop.kernels.evaluator import Evaluator
    from kforge_desktop.kernels.options import EvalOptions

    added = []
    cuda = device.startswith("cuda")
    folder = REPO / "resources" / "examples" / "kernels" / ("cuda" if cuda else "")
    with Evaluator(device, workers=1, options=EvalOptions(compare_compile=False)) as ev:
        for p in store.problems():
            slug = p.name.split("_", 1)[1]  # t03_batch_norm_relu -> batch_norm_relu
            f = folder / f"{model_name}_{slug}.py"
            if not f.exists():
                continue
            src = f.read_text()
            nid = store.add_node(p.id, store.root(p.id).id, "user", "user", "cuda" if cuda else "cpp", source=src,
                                 kernel_source=src,
                                 note=f"hand-written: {f.name}")
            v = ev.evaluate(p.to_problem(), src)
            store.record_verdict(nid, v)
            added.append((p.name, v.summary()))
    return added


def _bench_session(model_path, session_path, device, runs):
    from kforge_desktop.modelopt.bench import bench_model, unpatched_copy
    from kforge_desktop.modelopt.integrate import integrate
    from kforge_desktop.modelopt.session import chosen_kernels, reload_model
    from kforge_desktop.store import SessionStore

    store = SessionStore.open(session_path)
    mf, profiled = reload_model(store, device, model_path)
    chosen, _ = chosen_kernels(store, profiled)
    original = unpatched_copy(mf.model)
    integ = integrate(mf.model, profiled.analysis, chosen, list(mf.inputs), mf.make_inputs, device)
    if not integ.kept:
        return None, integ
    return bench_model(mf.model, list(mf.inputs), integ.handle, original=original, device=device, runs=runs), integ


def run_model(name: str, args, generator, out_dir: Path) -> dict:
    from kforge_desktop.kernels.evaluator import Evaluator
    from kforge_desktop.kernels.options import EvalOptions
    from kforge_desktop.modelopt.optimize import ModelOptOptions, optimize_model
    from kforge_desktop.search.config import SearchConfig

    model_path = REPO / "resources" / "examples" / f"{name}.py"
    session = out_dir / "sessions" / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.kforge"
    t0 = time.time()
    opts = ModelOptOptions(compare_compile=not args.no_target_compile, bench_runs=args.runs)
    with Evaluator(args.device, options=EvalOptions(compare_compile=False)) as evaluator:
        result = optimize_model(model_path, SearchConfig(budget_candidates=args.budget, device=args.device, seed=args.seed),
                                session_path=session, options=opts, generator=generator, evaluator=evaluator,
                                listener=lambda e: print("   ", e.message, flush=True) if hasattr(e, "message") else None)
    row = {"model": name, "session": str(session), "seconds": time.time() - t0, "budget": args.budget,
           "eager_ms": result.profile.eager_ms, "targets": [], "bench": result.bench.to_dict() if result.bench else None,
           "checks": [c.__dict__ for c in result.checks]}
    outcomes = {o.target: o for o in result.outcomes}
    for t in result.profile.targets:
        o = outcomes[t.name]
        row["targets"].append({
            "name": t.name, "op": t.op, "share": t.share, "calls": t.calls, "time_ms": t.time_ms,
            "headroom_floor": t.headroom_floor, "headroom_compile": t.headroom_compile, "budget": o.budget,
            "candidates": o.candidates, "best_speedup": o.best_speedup, "used": o.used, "why_not": o.why_not})
    if args.hand_kernels:
        from kforge_desktop.store import SessionStore

        store = SessionStore.open(session)
        row["hand_kernels"] = _hand_kernels(store, session, name, args.device)
        store.close()
        if row["hand_kernels"]:
            b, integ = _bench_session(model_path, session, args.device, args.runs)
            row["bench_with_hand_kernels"] = b.to_dict() if b else None
            row["hand_kept"] = integ.kept
    return row


def markdown(rows: list[dict], cmd: str) -> str:
    out = [f"Command: `{cmd}`", ""]
    for r in rows:
        out += [f"#### {r['model']} (budget {r['budget']} LLM candidates, {r['seconds'] / 60:.1f} min)", "",
                "| target | op | share | vs floor | eager/compile | budget | candidates | best | used |",
                "|---|---|---|---|---|---|---|---|---|"]
        for t in r["targets"][:6]:
            out.append(f"| `{t['name']}` | {t['op']} | {100 * t['share']:.1f}% | {_fmt(t['headroom_floor'], '.1f')} | "
                       f"{_fmt(t['headroom_compile'])} | {t['budget']} | {t['candidates']} | {_fmt(t['best_speedup'])} | "
                       f"{'yes' if t['used'] else 'no'} |")
        out.append("")
        b = r.get("bench")
        if b:
            out.append(f"End to end: eager {b['eager']['median_ms']:.3f} ms, patched {b['patched']['median_ms']:.3f} ms "
                       f"(**{b['speedup']:.2f}x** vs eager), torch.compile {_fmt((b.get('compiled') or {}).get('median_ms'), '.3f', ' ms')} "
                       f"(patched vs compile **{_fmt(b.get('speedup_vs_compile'))}**), noise ±{100 * b['noise']:.0f}%; "
                       f"fastest rounds: {_fmt(b.get('speedup_best'))} vs eager, {_fmt(b.get('speedup_vs_compile_best'))} vs compile.")
        else:
            out.append(f"End to end: no verified kernel beat eager, so the model is unchanged (eager {r['eager_ms']:.3f} ms).")
        hb = r.get("bench_with_hand_kernels")
        if hb:
            out.append(f"With the hand-written kernels ({', '.join(r['hand_kept'])}): patched {hb['speedup']:.2f}x vs eager, "
                       f"{_fmt(hb.get('speedup_vs_compile'))} vs torch.compile ({hb['patched']['median_ms']:.3f} ms vs "
                       f"{hb['eager']['median_ms']:.3f} ms eager, {_fmt((hb.get('compiled') or {}).get('median_ms'), '.3f', ' ms')} compile; "
                       f"noise ±{100 * hb['noise']:.0f}%; fastest rounds: {_fmt(hb.get('speedup_best'))} vs eager, "
                       f"{_fmt(hb.get('speedup_vs_compile_best'))} vs compile).")
        out.append("")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="vision_net,diffusion_block,llm_block")
    ap.add_argument("--budget", type=int, default=6, help="LLM candidates per model (spread over its targets)")
    ap.add_argument("--llm", default=None, help="GGUF (default: the default model)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--runs", type=int, default=30, help="interleaved end-to-end rounds")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    ap.add_argument("--hand-kernels", action="store_true")
    ap.add_argument("--no-target-compile", action="store_true", help="skip timing each target under torch.compile")
    args = ap.parse_args()
    from kforge_desktop.llm import open_generator

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    gen = open_generator(args.llm) if args.budget > 0 else None
    rows = []
    try:
        for name in args.models.split(","):
            print(f"== {name}", flush=True)
            rows.append(run_model(name.strip(), args, gen, out_dir))
            (out_dir / "model_e2e.json").write_text(json.dumps(rows, indent=1, default=str))
    finally:
        if gen is not None:
            gen.close()
    cmd = "python benchmarks/model_e2e.py " + " ".join(sys.argv[1:])
    md = markdown(rows, cmd.strip())
    (out_dir / "model_e2e.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
