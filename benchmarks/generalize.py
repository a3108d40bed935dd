"""Does the search generalize? MCTS with every lever on, on problems nothing was tuned on.

The shares in ``search_quality.py`` were measured on the three problems the levers were fitted to.
This runs the same search (real model through llama.cpp, real C++ builds; ``search_quality.collect``
reads the numbers back) on ``problems_generalize/``: families beyond our exemplars, written fresh and
split in two halves.

- ``dev/``: what exemplar matching and the prompts may be tuned on (the issue's three failures are here).
- ``test/``: never tuned on. Its sessions are read only through this script's summary (``--report``):
  do not open them, their prompts or their kernels; a change made because of one spoils the half.

Per problem, over three seeds (one search each, its own session file):

- **correct**: the share of LLM candidates that are correct kernels doing the work themselves;
- **correct and different**: of those, the ones that are not a near-copy of a seed or of the exemplar
  the prompt showed (the same up to whitespace, comments, includes, helper order and local names:
  ``csource.normalize``). A copy of the seed is not a kernel the model wrote;
- **best vs seed**: the best LLM node's speedup over the best seed's (per search; the median of the
  three), and **best vs eager**. Where a problem has no seed, the search started from eager, and
  "vs seed" compares with eager (1.0x);

with 95 % Wilson intervals on the shares. The kernel memory is off (each search stands alone). Reading
a recorded search again (``--first``, ``--retime``, ``--recount``) is ``generalize_again.py``'s.
Every finished (problem, seed) is appended to a JSON-lines file; an interrupted run continues with
the next unfinished one, and a search cut off in the middle continues in its own session file.

    python benchmarks/generalize.py                  # both halves, seeds 0 1 2, budget 8 (many hours on 2 cores)
    python benchmarks/generalize.py --report         # the tables for docs/benchmarks.md
    python benchmarks/generalize.py --check          # no model: which exemplar each problem gets, seeds verified
    python benchmarks/generalize.py --recount        # the summary of the recorded sessions read again
    python benchmarks/generalize.py --report --first 8  # longer searches counted up to their first 8 candidates
    python benchmarks/generalize.py --report --retime   # best kernels and seed re-timed together, three times (quiet machine)
    python benchmarks/generalize.py --report --rejudge  # correct kernels judged again by today's evaluator first
    python benchmarks/generalize.py --report --by-request  # per half, what each request gave (counts and speeds only)
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from generalize_again import PROBLEMS, different_from_seeds, ratio, read_again, recount, request_table  # noqa: E402
from search_quality import _x, collect, load_rows  # noqa: E402  (the shared reading of a session)

HALVES = ("dev", "test")
SEEDS = (0, 1, 2)
RESULTS = HERE / "results" / "generalize" / "generalize.jsonl"
TARGET_SHARE = 0.5  # test half: correct and different from every seed
TARGET_GAIN = 1.1  # best LLM node over best seed, on half the problems


def problems(half: str) -> list[Path]:
    return sorted((PROBLEMS / half).glob("*.py"))


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95 % Wilson score interval of a share k/n ((0, 1) when n is 0)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def share(k: int, n: int) -> str:
    if not n:
        return "-"
    lo, hi = wilson(k, n)
    return f"{k}/{n} ({100 * k / n:.0f}%, {100 * lo:.0f}-{100 * hi:.0f})"


def run_one(path: Path, half: str, seed: int, budget: int, max_tokens: int, generator, model_name: str,
            sessions: Path, temperature: float | None = None) -> dict:
    from kforge_desktop.kernels.evaluator import Evaluator
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.config import SearchConfig
    from kforge_desktop.search.engine import SearchEngine
    from kforge_desktop.search.setup import create_session
    from kforge_desktop.store import SessionStore, pack

    problem = load_problem(path)
    config = SearchConfig(strategy="mcts", budget_candidates=budget, seed=seed, device="cpu", max_tokens=max_tokens,
                          memory=False)
    if temperature is not None:
        config = dataclasses.replace(config, temperature=temperature)
    folder = sessions / half
    folder.mkdir(parents=True, exist_ok=True)
    session = folder / f"{problem.name}-s{seed}-b{budget}.kforge"
    store = SessionStore(session)
    existing = [p for p in store.problems() if p.name == problem.name and p.source == problem.source]
    if not existing and store.problems():  # the problem file changed since: start again
        store.close()
        for suffix in ("", "-wal", "-shm"):
            Path(str(session) + suffix).unlink(missing_ok=True)
        store = SessionStore(session)
    if existing:  # a search cut off in the middle: continue it
        pid = existing[0].id
        print("   continuing the interrupted search", flush=True)
    else:
        pid = create_session(store, problem, config)
    t0 = time.perf_counter()
    with Evaluator(device="cpu") as evaluator:
        finished = SearchEngine(store, pid, generator, evaluator, config).run()
    wall = time.perf_counter() - t0
    row = collect(store, pid)
    row.update(different_from_seeds(store, pid, problem))
    row.update(half=half, problem=problem.name, seed=seed, budget=budget, model=model_name, max_tokens=max_tokens,
               temperature=config.temperature, commit=CODE_COMMIT,
               wall_s=wall, reason=finished.reason, host=platform.node(), cores=os.cpu_count(),
               finished_at=time.time())
    store.close()
    if finished.reason == "stopped":  # kept as it is, to be continued
        raise KeyboardInterrupt
    row["session"] = os.path.relpath(pack(session), ROOT)  # a finished session is kept packed
    return row


def _commit() -> str:
    """The code a search ran (the checkout's commit; "+" when it had uncommitted changes)."""
    import subprocess

    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "kforge_desktop"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return head + ("+" if dirty else "")


CODE_COMMIT = _commit()  # taken when the script starts: the code its searches import


def _sum_counts(counts) -> dict:
    total: dict[str, int] = {}
    for c in counts:
        for k, v in (c or {}).items():
            total[k] = total.get(k, 0) + v
    return total


FAILURE_WORDS = {"incorrect": "wrong", "compile_error": "build", "runtime_error": "error", "crashed": "crash",
                 "timeout": "timeout", "rejected": "rejected", "no_code": "no code"}


def _failures(counts: dict) -> str:
    """``wrong 4, build 2``: why the LLM candidates that were not correct failed, most first."""
    if not counts:
        return "-"
    return ", ".join(f"{FAILURE_WORDS.get(k, k)} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))


def summarize(rows: list[dict], half: str) -> dict:
    """Per problem and for the half: the shares (with intervals) and the speed against seed and eager."""
    rs = [r for r in rows if r["half"] == half]
    names = sorted({r["problem"] for r in rs})
    per = []
    for name in names:
        runs = sorted((r for r in rs if r["problem"] == name), key=lambda r: r["seed"])
        ratios = [ratio(r) for r in runs]
        eager = [r.get("best_llm_speedup") for r in runs]
        got = [x for x in ratios if x is not None]
        per.append({
            "problem": name, "runs": len(runs), "seeds": sorted({r["seed"] for r in runs}),
            "n": sum(r["candidates"] for r in runs), "correct": sum(r["self_made"] for r in runs),
            "different": sum(r.get("self_made_different", r["self_made"]) for r in runs),
            "duplicates": sum(r["duplicates"] for r in runs),
            "has_seed": any(r.get("best_seed_speedup") for r in runs),
            "seed_speedup": statistics.median([r["best_seed_speedup"] for r in runs if r.get("best_seed_speedup")])
            if any(r.get("best_seed_speedup") for r in runs) else None,
            # a search with no correct LLM kernel counts as 0 against its seed
            "vs_seed": statistics.median([x if x is not None else 0.0 for x in ratios]) if runs else None,
            "vs_seed_runs": sum(1 for x in got if x >= TARGET_GAIN),
            "vs_eager": statistics.median([x if x is not None else 0.0 for x in eager]) if runs else None,
            "vs_eager_max": max((x for x in eager if x is not None), default=None),
            "failures": _sum_counts(r.get("failures") for r in runs),
        })
    n = sum(p["n"] for p in per)
    return {
        "half": half, "problems": per, "n": n, "correct": sum(p["correct"] for p in per),
        "different": sum(p["different"] for p in per),
        "gain_problems": sum(1 for p in per if (p["vs_seed"] or 0.0) >= TARGET_GAIN),
    }


def _by_kind(rows: list[dict]) -> dict[str, dict]:
    """LLM candidates and the correct self-made ones per request kind (whole, edit, repair), over ``rows``."""
    kinds: dict[str, dict] = {}
    for r in rows:
        for kind, k in (r.get("by_kind") or {}).items():
            t = kinds.setdefault(kind, {"n": 0, "correct": 0})
            t["n"] += k.get("n", 0)
            t["correct"] += k.get("self_made", 0)
    return kinds


def report(rows: list[dict]) -> str:
    if not rows:
        return "(no results yet)"
    out = []
    models = sorted({r["model"] for r in rows})
    budgets = sorted({r["budget"] for r in rows})
    out.append(f"Model: {', '.join(models)}; MCTS, budget {', '.join(map(str, budgets))} LLM candidates per search, "
               f"seeds {', '.join(map(str, sorted({r['seed'] for r in rows})))}; temperature "
               f"{', '.join(sorted({str(r.get('temperature', 0.7)) for r in rows}))}; CPU, {rows[0].get('cores')} cores; "
               "kernel memory off; code of commit(s) "
               f"{', '.join(sorted({r.get('commit') or '?' for r in rows}))}. Shares: count (percent, 95 % Wilson "
               "interval).\n")
    for half in HALVES:
        s = summarize(rows, half)
        if not s["problems"]:
            continue
        out.append(f"**{half}** ({len(s['problems'])} problems):\n")
        out.append("| problem | runs | correct self-made / LLM candidates | correct and different from every seed | "
                   "duplicates | seed vs eager | best LLM vs seed (median; runs >= 1.1x) | best LLM vs eager "
                   "(median; max) | what failed |")
        out.append("|---|---|---|---|---|---|---|---|---|")
        for p in s["problems"]:
            seed = _x(p["seed_speedup"]) if p["has_seed"] else "no seed"
            out.append(f"| {p['problem']} | {p['runs']} | {share(p['correct'], p['n'])} | "
                       f"{share(p['different'], p['n'])} | {p['duplicates']} | {seed} | "
                       f"{_x(p['vs_seed'])}; {p['vs_seed_runs']}/{p['runs']} | "
                       f"{_x(p['vs_eager'])}; {_x(p['vs_eager_max'])} | {_failures(p['failures'])} |")
        out.append(f"| **all** | | {share(s['correct'], s['n'])} | {share(s['different'], s['n'])} | | | "
                   f"{s['gain_problems']}/{len(s['problems'])} problems >= 1.1x | | "
                   f"{_failures(_sum_counts(p['failures'] for p in s['problems']))} |")
        kinds = _by_kind([r for r in rows if r["half"] == half])
        out.append("\nCorrect self-made, by what was asked: " + "; ".join(
            f"{kind} {share(k['correct'], k['n'])}" for kind, k in sorted(kinds.items())) + ".")
        judged = [r for r in rows if r["half"] == half and "now_failing" in r]
        if judged:
            failing = sum(r["now_failing"] for r in judged)
            out.append(f"\nJudged again by today's evaluator: {failing} of "
                       f"{failing + sum(r['self_made'] for r in judged)} correct self-made kernels fail now" + (
                           " (" + ", ".join(f"{p} {k}" for p, k in sorted(_sum_counts(
                               {r['problem']: r['now_failing']} for r in judged).items()) if k) + ")"
                           if failing else "") + "; the table counts them as failed.")
        retimed = [r for r in rows if r["half"] == half and "retimed_ratios" in r]
        if retimed:
            out.append("\nBest LLM vs seed in each re-timing (the table reads each search's median): " + "; ".join(
                f"{r['problem']} s{r['seed']} " + (", ".join(f"{x:.2f}x" for x in r["retimed_ratios"]) or "none")
                for r in sorted(retimed, key=lambda r: (r["problem"], r["seed"]))) + ".")
        out.append("")
    test = summarize(rows, "test")
    if test["problems"]:
        lo, _ = wilson(test["different"], test["n"])
        share_ok = test["n"] and test["different"] / test["n"] >= TARGET_SHARE
        gain_ok = test["gain_problems"] * 2 >= len(test["problems"])
        out.append(f"Targets (test half): correct and different >= {TARGET_SHARE:.0%} of LLM candidates: "
                   f"{'met' if share_ok else 'not met'} ({share(test['different'], test['n'])}; lower bound "
                   f"{100 * lo:.0f}%); best LLM node >= {TARGET_GAIN}x the best seed on half the problems: "
                   f"{'met' if gain_ok else 'not met'} ({test['gain_problems']}/{len(test['problems'])}).")
    return "\n".join(out)


def check(halves: list[str]) -> int:
    """No model: for every problem, the exemplar its prompts show, what differs, and its seeds verified."""
    from kforge_desktop.kernels.evaluator import Evaluator
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.applicability import applicable
    from kforge_desktop.search.differences import differences
    from kforge_desktop.search.exemplars import best_exemplar
    from kforge_desktop.search.scaffold import build_scaffold
    from kforge_desktop.search.setup import seed_kernels

    bad = 0
    with Evaluator(device="cpu", workers=1) as evaluator:
        for half in halves:
            for path in problems(half):
                problem = load_problem(path)
                scaffold = build_scaffold(problem)
                shown = best_exemplar(scaffold, problem.source, memory=False)
                seeds = seed_kernels(problem, scaffold, memory=False)
                print(f"{half}/{problem.name}: shows {shown[0].name if shown else 'nothing'}", flush=True)
                if half == "dev" and shown:  # the test half's prompts are not for reading
                    for line in differences(shown[0], scaffold, problem.source):
                        print(f"    differs: {line}")
                for directive, code, _note in seeds:
                    v = evaluator.evaluate(problem, scaffold.module_source(code))
                    bad += v.status != "ok"
                    # whether the reference-maximum request reaches this seed (its name only, not its code)
                    fused = applicable("reference_max", code)
                    form = "; its maximum can be fused into its sum of exponentials" if fused else ""
                    print(f"    seed {directive.removeprefix('exemplar:')}: {v.summary()}{form}", flush=True)
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--half", nargs="+", choices=HALVES, default=list(HALVES))
    ap.add_argument("--problems", nargs="+", default=None, help="only these problems (file names without .py)")
    ap.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=1024)  # the product's default
    ap.add_argument("--temperature", type=float, default=None, help="sampling temperature (default: the product's)")
    ap.add_argument("--llm", default=None, help="GGUF (default: the default model)")
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: the product's choice)")
    ap.add_argument("--results", default=str(RESULTS))
    ap.add_argument("--report", action="store_true", help="print the tables and exit")
    ap.add_argument("--check", action="store_true", help="no model: exemplars shown and seeds verified, per problem")
    ap.add_argument("--recount", action="store_true", help="read the recorded sessions again into the results file")
    ap.add_argument("--first", type=int, default=None,
                    help="with --report: each search counted up to its first N LLM candidates (a 12-candidate "
                         "search read as an 8-candidate one)")
    ap.add_argument("--retime", action="store_true",
                    help="with --report: each search's best kernels and its seed re-timed together first (on a "
                         "quiet machine; minutes per search)")
    ap.add_argument("--rejudge", action="store_true",
                    help="with --report: each search's correct LLM kernels judged again by today's evaluator first "
                         "(a check added since, such as the NaN trial, can fail them; seconds per kernel)")
    ap.add_argument("--by-request", action="store_true",
                    help="with --report: per half, what each kind of request gave (counts and speeds only)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="with --retime: re-timings per search, each on a fresh copy of its session; the median "
                         "best LLM vs seed is reported, every round's beside the table")
    args = ap.parse_args(argv)
    results = Path(args.results)
    if args.recount:
        return recount(results)
    if args.report:
        rows = load_rows(results)
        if args.first or args.retime or args.rejudge:
            from kforge_desktop.kernels.evaluator import Evaluator
            from kforge_desktop.kernels.options import EvalOptions

            verify_only = EvalOptions(timed_runs=3, warmup_runs=1, compare_compile=False)  # its figures are not read
            with Evaluator(device="cpu") if args.retime else contextlib.nullcontext() as evaluator, \
                    Evaluator(device="cpu", options=verify_only) if args.rejudge else contextlib.nullcontext() as judge:
                rows = [read_again(r, args.first, evaluator, args.rounds, judge) for r in rows]
        print(report(rows))
        for half in HALVES if args.by_request else ():
            searched = [r for r in rows if r["half"] == half and r.get("session")]
            if searched:
                print(f"\n**{half}, by request** ({len(searched)} searches):\n\n{request_table(searched, _failures)}")
        return 0
    if args.check:
        return check(args.half)
    from kforge_desktop.llm import resolve_model
    from kforge_desktop.llm.llama_backend import LlamaCppGenerator

    model_path = Path(resolve_model(args.llm))
    done = {(r["half"], r["problem"], r["seed"], r["budget"], r["model"]) for r in load_rows(results)}
    todo = [(half, path, seed) for half in args.half for path in problems(half) for seed in args.seeds
            if (args.problems is None or path.stem in args.problems)
            and (half, path.stem, seed, args.budget, model_path.name) not in done]
    print(f"{len(todo)} searches to run ({len(done)} done before)", flush=True)
    if not todo:
        print(report(load_rows(results)))
        return 0
    generator = LlamaCppGenerator(str(model_path), n_ctx=4096, n_threads=args.threads)
    results.parent.mkdir(parents=True, exist_ok=True)
    try:
        for i, (half, path, seed) in enumerate(todo, 1):
            print(f"== [{i}/{len(todo)}] {half}/{path.stem} seed {seed}", flush=True)
            row = run_one(path, half, seed, args.budget, args.max_tokens, generator, model_path.name,
                          results.with_name(results.stem + "_sessions"), args.temperature)
            if row["reason"] == "error":  # not recorded: the next run continues this search
                print(f"   the search stopped on an internal error (see the log of {row['session']}); skipped",
                      flush=True)
                continue
            with results.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
            if half == "dev":
                print(f"   {row['self_made']}/{row['candidates']} correct, {row['self_made_different']} different "
                      f"from the seeds, best {_x(row['best_llm_speedup'])} ({row['wall_s'] / 60:.1f} min)", flush=True)
            else:
                print(f"   done ({row['wall_s'] / 60:.1f} min); read the test half with --report", flush=True)
    except KeyboardInterrupt:
        print("interrupted: run the same command again to continue", flush=True)
        return 130
    finally:
        generator.close()
    print(report(load_rows(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
