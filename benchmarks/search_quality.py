"""Search quality: each strategy at the same candidate budget, and what each lever is worth.

For every (problem, configuration) it runs a real search (real model through llama.cpp, real C++
builds in the evaluator's workers) into its own session file, then reads the numbers back from the
session store:

- the share of LLM-written candidates that are correct kernels doing the work themselves (verdict
  ok, no library calls), overall and for whole kernels / edits / repairs separately;
- the best speedup over eager and over torch.compile;
- tokens/s, and seconds per candidate split into LLM, build, verify and time.

Configurations: the three strategies with every lever on (scaffold, exemplars, seeds, repair), then
MCTS with one lever off at a time. Each finished run is appended to a JSON-lines file, so a long
run can be stopped and continued (finished runs are skipped); ``--report`` prints the markdown
tables for docs/benchmarks.md from that file.

    python benchmarks/search_quality.py --budget 12            # hours on 2 cores with the 1.5B model
    python benchmarks/search_quality.py --report
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

DEFAULT_PROBLEMS = ("rms_norm", "softmax", "group_norm_silu")
CONFIGS = {
    # name: (strategy, overrides of SearchConfig)
    "mcts": ("mcts", {}),
    "greedy": ("greedy", {}),
    "best-of-n": ("best-of-n", {}),
    "mcts-no-seeds": ("mcts", {"seeds": False}),
    "mcts-no-exemplars": ("mcts", {"seeds": False, "exemplars": False}),
    "mcts-no-repair": ("mcts", {"repair_rounds": 0}),
    "mcts-no-scaffold": ("mcts", {"scaffold": False, "seeds": False}),
    "mcts-no-autofix": ("mcts", {"syntax_check": False}),  # no syntax pre-check, no mechanical fixes
}
RESULTS = HERE / "results" / "search_quality.jsonl"


def run_one(problem_name: str, config_name: str, budget: int, seed: int, model_path: str, max_tokens: int,
            generator, session_dir: Path) -> dict:
    from kforge_desktop.kernels.evaluator import Evaluator
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.config import SearchConfig
    from kforge_desktop.search.engine import SearchEngine
    from kforge_desktop.search.setup import create_session
    from kforge_desktop.store import SessionStore, pack

    strategy, overrides = CONFIGS[config_name]
    problem = load_problem(ROOT / "resources" / "problems" / f"{problem_name}.py")
    # memory=False: a measurement must not depend on what earlier runs taught the user's kernel memory
    config = SearchConfig(strategy=strategy, budget_candidates=budget, seed=seed, device="cpu",
                          max_tokens=max_tokens, memory=False, **overrides)
    session_dir.mkdir(parents=True, exist_ok=True)
    path = session_dir / f"{problem_name}-{config_name}-s{seed}.kforge"
    for suffix in ("", "-wal", "-shm", ".gz"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    store = SessionStore(path)
    pid = create_session(store, problem, config)
    t0 = time.perf_counter()
    with Evaluator(device="cpu") as evaluator:
        finished = SearchEngine(store, pid, generator, evaluator, config).run()
    wall = time.perf_counter() - t0
    row = collect(store, pid)
    row.update(problem=problem_name, config=config_name, strategy=strategy, budget=budget, seed=seed,
               model=Path(model_path).name, max_tokens=max_tokens, wall_s=wall, reason=finished.reason,
               host=platform.node(), cores=os.cpu_count())
    store.close()
    row["session"] = os.path.relpath(pack(path), ROOT)  # a finished session is kept packed
    return row


def collect(store, pid: int) -> dict:
    nodes = store.nodes(pid, with_source=False)
    llm = [n for n in nodes if n.origin == "llm" and n.state in ("evaluated", "no_code")]
    by_kind: dict[str, dict] = {}
    for n in llm:
        k = by_kind.setdefault(n.kind, {"n": 0, "correct": 0, "self_made": 0, "built": 0})
        k["n"] += 1
        v = n.verdict
        if v is not None and v.status != "compile_error":
            k["built"] += 1
        if v is not None and v.status == "ok":
            k["correct"] += 1
            if not v.library_calls:
                k["self_made"] += 1
    seeds = [n for n in nodes if n.origin == "seed"]
    best = store.best_node(pid)
    best_llm = max((n for n in llm if n.speedup is not None), key=lambda n: n.speedup, default=None)
    split = store.time_split(pid)
    judged = [n for n in nodes if n.origin != "root" and n.verdict is not None]
    n_c = max(1, len(llm))
    return {
        "candidates": len(llm),
        "correct": sum(k["correct"] for k in by_kind.values()),
        "self_made": sum(k["self_made"] for k in by_kind.values()),
        "built": sum(k["built"] for k in by_kind.values()),
        "no_code": sum(1 for n in llm if n.state == "no_code"),
        "duplicates": sum(1 for n in nodes if n.state == "duplicate"),
        "by_kind": by_kind,
        "seeds": len(seeds),
        "seeds_correct": sum(1 for n in seeds if n.speedup is not None),
        "best_speedup": best.speedup if best else None,
        "best_speedup_compile": best.verdict.speedup_compile if best else None,
        "best_origin": best.origin if best else None,
        "best_llm_speedup": best_llm.speedup if best_llm else None,
        "best_llm_speedup_compile": best_llm.verdict.speedup_compile if best_llm else None,
        "tokens_per_s": split.tokens_per_s,
        "llm_s_per_candidate": split.llm_s / n_c,
        "build_s_per_eval": split.build_s / max(1, len(judged)),
        "verify_s_per_eval": split.verify_s / max(1, len(judged)),
        "time_s_per_eval": split.time_s / max(1, len(judged)),
        "completion_tokens": split.completion_tokens,
        "llm_calls": split.llm_calls,
        # why the LLM candidates that were not correct failed: verdict status (or no_code) -> count
        "failures": dict(Counter(n.verdict.status if n.verdict is not None else n.state for n in llm
                                 if n.verdict is None or n.verdict.status != "ok")),
    }


def load_rows(path: Path = RESULTS) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _pct(a: int, b: int) -> str:
    return f"{a}/{b} ({100 * a / b:.0f}%)" if b else "-"


def _x(v) -> str:
    return f"{v:.2f}x" if v else "-"


def report(rows: list[dict]) -> str:
    """Markdown tables for docs/benchmarks.md."""
    if not rows:
        return "(no results yet)"
    out = []
    models = sorted({r["model"] for r in rows})
    out.append(f"Model: {', '.join(models)}; budget {rows[0]['budget']} candidates per search; CPU, "
               f"{rows[0].get('cores')} cores.\n")
    out.append("| problem | config | correct self-made / LLM candidates | whole | edit | repair | best vs eager "
               "(LLM-written) | best vs torch.compile | tok/s | s/cand LLM | build | verify | time |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    order = list(CONFIGS)
    for r in sorted(rows, key=lambda r: (r["problem"], order.index(r["config"]) if r["config"] in order else 99,
                                         r.get("seed", 0))):
        k = r["by_kind"]

        def kind(name: str, r=r, k=k) -> str:
            d = k.get(name)
            return _pct(d["self_made"], d["n"]) if d else "-"

        best = f"{_x(r['best_speedup'])} ({_x(r['best_llm_speedup'])})"
        label = r["config"] + (f" (seed {r['seed']})" if r.get("seed") else "")
        out.append(
            f"| {r['problem']} | {label} | {_pct(r['self_made'], r['candidates'])} | {kind('whole')} | "
            f"{kind('edit')} | {kind('repair')} | {best} | {_x(r['best_speedup_compile'])} | "
            f"{(r['tokens_per_s'] or 0):.1f} | {r['llm_s_per_candidate']:.1f} | {r['build_s_per_eval']:.2f} | "
            f"{r['verify_s_per_eval']:.2f} | {r['time_s_per_eval']:.2f} |"
        )
    out.append("")
    out.append("Totals over problems:\n")
    out.append("| config | correct self-made / LLM candidates | whole | edit | repair | duplicates | wall minutes |")
    out.append("|---|---|---|---|---|---|---|")
    for name in order:
        rs = [r for r in rows if r["config"] == name]
        if not rs:
            continue

        def total(kind_name: str, rs=rs) -> str:
            n = sum(r["by_kind"].get(kind_name, {}).get("n", 0) for r in rs)
            c = sum(r["by_kind"].get(kind_name, {}).get("self_made", 0) for r in rs)
            return _pct(c, n)

        out.append(f"| {name} | {_pct(sum(r['self_made'] for r in rs), sum(r['candidates'] for r in rs))} | "
                   f"{total('whole')} | {total('edit')} | {total('repair')} | {sum(r['duplicates'] for r in rs)} | "
                   f"{sum(r['wall_s'] for r in rs) / 60:.0f} |")
    return "\n".join(out)


def retime(rows: list[dict], out: Path) -> list[dict]:
    """Time each search's fastest correct nodes again, one at a time on an otherwise idle machine: the
    searches ran several to a machine, so their own timings are noisy. Per session: the seed and
    the fastest LLM-written node (by the search's own timing), and the LLM node whose re-timed
    speedup is best among the search's three fastest."""
    from kforge_desktop.kernels.evaluator import Evaluator
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.store import SessionStore, readable, stored

    done = []
    with Evaluator(device="cpu", workers=1) as evaluator:
        for r in rows:
            path = stored(ROOT / r["session"])  # as recorded, or packed since
            if path is None:
                continue
            with readable(path) as plain:
                store = SessionStore(plain)
                pid = store.problems()[0].id
                nodes = [n for n in store.nodes(pid) if n.speedup is not None]
                store.close()
            llm = sorted((n for n in nodes if n.origin == "llm"), key=lambda n: -n.speedup)[:3]
            seeds = [n for n in nodes if n.origin == "seed"]
            problem = load_problem(ROOT / "resources" / "problems" / f"{r['problem']}.py")
            for n in seeds + llm:
                v = evaluator.evaluate(problem, n.source)
                row = {"problem": r["problem"], "config": r["config"], "seed": r["seed"], "node": n.id,
                       "origin": n.origin, "kind": n.kind, "search_speedup": n.speedup, "status": v.status,
                       "speedup": v.speedup, "speedup_compile": v.speedup_compile, "significant": v.significant}
                done.append(row)
                print(f"{r['problem']:<16} {r['config']:<12} s{r['seed']} node {n.id:<3} {n.origin:<5} "
                      f"search {n.speedup:.2f}x  alone {v.summary()}", flush=True)
    out.write_text("".join(json.dumps(d) + "\n" for d in done))
    return done


def retimed_report(rows: list[dict]) -> str:
    """Per search: the seed and the best LLM-written node, re-timed alone."""
    out = ["| problem | config | seed | exemplar seed alone | best LLM node alone (vs torch.compile) |",
           "|---|---|---|---|---|"]
    keys = sorted({(r["problem"], r["config"], r["seed"]) for r in rows})
    for key in keys:
        rs = [r for r in rows if (r["problem"], r["config"], r["seed"]) == key and r["status"] == "ok"]
        seed = max((r for r in rs if r["origin"] == "seed"), key=lambda r: r["speedup"], default=None)
        llm = max((r for r in rs if r["origin"] == "llm"), key=lambda r: r["speedup"], default=None)
        seed_s = _x(seed["speedup"]) if seed else "-"
        llm_s = f"{_x(llm['speedup'])} ({_x(llm['speedup_compile'])}), node {llm['node']} {llm['kind']}" if llm else "-"
        out.append(f"| {key[0]} | {key[1]} | {key[2]} | {seed_s} | {llm_s} |")
    return "\n".join(out)


def seeds_only(problems: list[str], device: str, out: Path) -> list[dict]:
    """Evaluate just the seeds (no model): what the search starts from on ``device``.

    The exemplar seeds everywhere; on CUDA also torch.compile's own generated code (row
    ``exemplar: "torch.compile"``), whose ``speedup_compile`` says how it compares with torch.compile
    itself (the GPU tests check only that it is correct and runs without torch.compile).
    """
    from kforge_desktop.kernels.evaluator import Evaluator
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.exemplars import seed_exemplars
    from kforge_desktop.search.inductor_seed import SeedError, inductor_module
    from kforge_desktop.search.scaffold import build_scaffold

    language = "cuda" if device.startswith("cuda") else "cpp"
    rows = []

    def record(name: str, seed_name: str, v) -> None:
        rows.append({"problem": name, "exemplar": seed_name, "device": device, "status": v.status,
                     "speedup": v.speedup, "speedup_compile": v.speedup_compile, "latency_ms": v.latency_ms,
                     "baseline_ms": v.baseline_ms, "compile_baseline_ms": v.compile_baseline_ms,
                     "noise": v.noise, "significant": v.significant, "build_s": v.build_s, "reason": v.reason})
        print(f"{name:<16} {seed_name:<13} {v.summary()} (vs torch.compile {_x(v.speedup_compile)})", flush=True)

    with Evaluator(device=device) as evaluator:
        for name in problems:
            problem = load_problem(ROOT / "resources" / "problems" / f"{name}.py")
            scaffold = build_scaffold(problem, language)
            for exemplar, code in seed_exemplars(scaffold, problem.source):
                record(name, exemplar.name, evaluator.evaluate(problem, scaffold.module_source(code)))
            if language == "cuda":
                try:
                    source = inductor_module(problem, device)
                except SeedError as err:
                    print(f"{name:<16} torch.compile no seed: {err}", flush=True)
                    continue
                record(name, "torch.compile", evaluator.evaluate(problem, source))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", nargs="+", default=list(DEFAULT_PROBLEMS))
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    ap.add_argument("--budget", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-tokens", type=int, default=1024)  # the product's default
    ap.add_argument("--llm", default=None, help="GGUF (default: the default model)")
    ap.add_argument("--threads", type=int, default=None,
                    help="llama.cpp threads (default: the product's choice for this machine)")
    ap.add_argument("--results", default=str(RESULTS))
    ap.add_argument("--report", action="store_true", help="print the markdown tables and exit")
    ap.add_argument("--seeds", action="store_true", help="only evaluate the exemplar seeds (no model)")
    ap.add_argument("--device", default="cpu", help="device for --seeds (cpu or cuda)")
    ap.add_argument("--retime", action="store_true",
                    help="time the best nodes of every search in --results again, alone (after the searches)")
    args = ap.parse_args(argv)
    results = Path(args.results)
    retimed = results.with_name(results.stem + "_retimed.jsonl")
    if args.retime:
        retime(load_rows(results), retimed)
        print(retimed_report(load_rows(retimed)))
        return 0
    if args.seeds:
        problems = args.problems if args.problems != list(DEFAULT_PROBLEMS) else sorted(
            p.stem for p in (ROOT / "resources" / "problems").glob("*.py"))
        seeds_only(problems, args.device, HERE / "results" / f"search_seeds_{args.device}.jsonl")
        return 0
    if args.report:
        print(report(load_rows(results)))
        if retimed.exists():
            print("\nRe-timed alone (`--retime`):\n")
            print(retimed_report(load_rows(retimed)))
        return 0
    from kforge_desktop.llm import resolve_model
    from kforge_desktop.llm.llama_backend import LlamaCppGenerator

    model_path = str(resolve_model(args.llm))
    done = {(r["problem"], r["config"], r["seed"], r["budget"], r["model"]) for r in load_rows(results)}
    generator = LlamaCppGenerator(model_path, n_ctx=4096, n_threads=args.threads)
    results.parent.mkdir(parents=True, exist_ok=True)
    try:
        for config_name in args.configs:
            for problem_name in args.problems:
                key = (problem_name, config_name, args.seed, args.budget, Path(model_path).name)
                if key in done:
                    continue
                print(f"== {problem_name} / {config_name}", flush=True)
                row = run_one(problem_name, config_name, args.budget, args.seed, model_path, args.max_tokens,
                              generator, results.parent / "sessions")
                with results.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
                print(f"   {row['self_made']}/{row['candidates']} correct self-made, best {_x(row['best_speedup'])}, "
                      f"{row['wall_s'] / 60:.1f} min", flush=True)
    finally:
        generator.close()
    print(report(load_rows(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
