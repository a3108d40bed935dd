"""Expansions in flight: candidates per hour of a real search with K = 1 and with K = 3.

The same search (problem, seed, budget, the default model through llama.cpp, or a local
OpenAI-compatible server with ``--server``, the real evaluator) runs once per K into its own
session; candidates per hour is the candidates judged over the wall time. With K = 1 generation
and evaluation alternate; with K = 3 the model writes the next candidates while earlier ones are
built, verified and timed (llama.cpp answers one request at a time, so on the CPU the gain is the
evaluation hidden behind generation; a server with several slots writes K answers together).
Each run also reports the share of correct candidates, since a bigger K plans with fewer results.

    python benchmarks/inflight.py                          # rms_norm, budget 8, K = 1 and 3, CPU
    python benchmarks/inflight.py --k 1 3 --budget 12 --problem softmax
    python benchmarks/inflight.py --server http://127.0.0.1:8080 --device cuda

Writes ``$OUT/inflight.json`` (or ``--out``); takes about an hour on 2 cores with the default model.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def run_one(k: int, problem_name: str, budget: int, seed: int, device: str, generator, session_dir: Path,
            max_tokens: int) -> dict:
    from kforge_desktop.kernels.evaluator import Evaluator
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.config import SearchConfig
    from kforge_desktop.search.engine import SearchEngine
    from kforge_desktop.search.setup import create_session
    from kforge_desktop.store import SessionStore

    config = SearchConfig(budget_candidates=budget, seed=seed, device=device, inflight=k, max_tokens=max_tokens)
    path = session_dir / f"{problem_name}-k{k}-s{seed}.kforge"
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    store = SessionStore(path)
    pid = create_session(store, load_problem(ROOT / "resources" / "problems" / f"{problem_name}.py"), config)
    with Evaluator(device=device) as evaluator:
        engine = SearchEngine(store, pid, generator, evaluator, config)
        t0 = time.perf_counter()
        finished = engine.run()
        wall = time.perf_counter() - t0
    nodes = store.nodes(pid, with_source=False)
    judged = [n for n in nodes if n.origin == "llm" and n.state in ("evaluated", "no_code")]
    correct = [n for n in judged if n.verdict is not None and n.verdict.status == "ok"]
    best = store.best_node(pid)
    split = store.time_split(pid)
    row = {
        "k": k, "problem": problem_name, "budget": budget, "seed": seed, "device": device, "reason": finished.reason,
        "wall_s": wall, "candidates": len(judged), "candidates_per_hour": len(judged) / wall * 3600 if wall else 0,
        "correct": len(correct), "best_speedup": best.speedup if best else None,
        "llm_s": split.llm_s, "build_s": split.build_s, "verify_s": split.verify_s, "time_s": split.time_s,
        "tokens_per_s": split.tokens_per_s, "session": str(path),
    }
    store.close()
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, nargs="+", default=[1, 3])
    ap.add_argument("--problem", default="rms_norm")
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--max-tokens", type=int, default=1024)
    ap.add_argument("--llm", default=None, help="GGUF (default: the default model)")
    ap.add_argument("--server", default=None, help="an OpenAI-compatible server on this machine instead")
    ap.add_argument("--sessions", default=None, help="folder for the session files (default: a temporary one)")
    ap.add_argument("--out", default=None, help="default: $OUT/inflight.json, else ./inflight.json")
    args = ap.parse_args()

    import tempfile

    from kforge_desktop.search.runner import ModelChoice, open_generator

    generator = open_generator(ModelChoice(path=args.llm, server_url=args.server),
                               lambda m: print(m, file=sys.stderr))
    session_dir = Path(args.sessions or tempfile.mkdtemp(prefix="kforge-inflight-"))
    session_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        for k in args.k:
            row = run_one(k, args.problem, args.budget, args.seed, args.device, generator, session_dir,
                          args.max_tokens)
            rows.append(row)
            print(f"K={k}: {row['candidates']} candidates in {row['wall_s']:.0f} s -> "
                  f"{row['candidates_per_hour']:.1f}/hour, {row['correct']} correct, best "
                  f"{row['best_speedup'] or 0:.2f}x ({row['reason']})", file=sys.stderr)
    finally:
        generator.close()
    result = {"model": generator.name, "server": args.server, "host": platform.node(), "cpus": os.cpu_count(),
              "runs": rows}
    out = Path(args.out) if args.out else Path(os.environ.get("OUT", ".")) / "inflight.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
