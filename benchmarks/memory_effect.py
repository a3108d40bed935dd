"""What the kernel memory does for a second problem of a family a first session taught.

No exemplar of ours computes a cumulative sum. A first search (the default model, MCTS, the CPU)
on ``problems_generalize/dev/cumsum_rows.py`` runs with the memory on, in a memory folder of its
own: when it verifies a kernel of its own, the search remembers it. Then a second problem of the
family, written otherwise (``problems_memory/prefix_sum.py``: another name, size and layout), is
searched twice from the same seed, with the memory and without it (``--no-memory``):

- ``--budget2 0`` (the default): ``--seeds-only``, no model: does the remembered kernel fit the new
  problem and verify there as its seed;
- ``--budget2 N``: N LLM candidates each, counted as ``generalize.py`` counts them.

Every step is the product's own command (``kforge optimize``, ``kforge memory list``), so the
numbers are what a user would get. Writes ``results/memory_effect/memory_effect.json``.

    python benchmarks/memory_effect.py                      # first search 8 candidates, second seeds only
    python benchmarks/memory_effect.py --budget2 6          # and 6 LLM candidates each way
    python benchmarks/memory_effect.py --reuse --budget2 6  # the same first search, the second ones again
    python benchmarks/memory_effect.py --report             # the table of the last run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from search_quality import collect  # noqa: E402  (the shared reading of a session)

FIRST = HERE / "problems_generalize" / "dev" / "cumsum_rows.py"
SECOND = HERE / "problems_memory" / "prefix_sum.py"
OUT = HERE / "results" / "memory_effect"


def optimize(problem: Path, session: Path, memory_dir: Path, args: list[str], log: Path) -> dict:
    """``kforge optimize`` in a process of its own, with the memory folder given; the session's counts."""
    from kforge_desktop.store import SessionStore

    env = {**os.environ, "KFORGE_MEMORY_DIR": str(memory_dir)}
    t0 = time.perf_counter()
    with log.open("w") as fh:
        proc = subprocess.run([sys.executable, "-m", "kforge_desktop.cli.main", "optimize", str(problem),
                               "--device", "cpu", "--session", str(session), *args],
                              cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - t0
    store = SessionStore(session)
    try:
        pid = store.problems()[0].id
        row = collect(store, pid)
        seeds = [n for n in store.nodes(pid) if n.origin == "seed"]
        row.update(
            returncode=proc.returncode, wall_s=wall, session=os.path.relpath(session, ROOT),
            seed_nodes=[{"directive": n.directive, "status": n.verdict.status if n.verdict else None,
                         "speedup": n.speedup} for n in seeds],
        )
    finally:
        store.close()
    return row


def remembered(memory_dir: Path) -> list[str]:
    env = {**os.environ, "KFORGE_MEMORY_DIR": str(memory_dir)}
    out = subprocess.run([sys.executable, "-m", "kforge_desktop.cli.main", "memory", "list"], cwd=ROOT, env=env,
                         capture_output=True, text=True)
    return [ln for ln in out.stdout.splitlines() if ln.strip()]


def report(data: dict) -> str:
    lines = [f"First search: {data['first']['problem']}, budget {data['budget1']}, seed {data['seed']}: "
             f"{data['first']['self_made']}/{data['first']['candidates']} correct self-made; remembered: "
             f"{'; '.join(data['remembered']) or 'nothing'}.", "",
             "| second problem | memory | seeds (verdict, vs eager) | LLM candidates correct | best vs eager |",
             "|---|---|---|---|---|"]
    for key in ("with_memory", "without_memory"):
        r = data[key]
        seeds = ", ".join(f"{s['directive']} {s['status']} {s['speedup']:.2f}x" if s["speedup"] else
                          f"{s['directive']} {s['status']}" for s in r["seed_nodes"]) or "none"
        llm = f"{r['self_made']}/{r['candidates']}" if r["candidates"] else "-"
        best = f"{r['best_speedup']:.2f}x" if r.get("best_speedup") else "-"
        lines.append(f"| {data['second']} | {'on' if key == 'with_memory' else 'off'} | {seeds} | {llm} | {best} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget1", type=int, default=8, help="LLM candidates of the first search")
    ap.add_argument("--budget2", type=int, default=0, help="LLM candidates of each second search (0: seeds only)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--llm", default=None, help="GGUF (default: the default model)")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--reuse", action="store_true", help="keep the first search and its memory from the last run")
    ap.add_argument("--report", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    result = out / "memory_effect.json"
    if args.report:
        print(report(json.loads(result.read_text())))
        return 0
    memory_dir = out / "memory"
    llm = ["--llm", args.llm] if args.llm else []
    if args.reuse and result.exists():
        data = json.loads(result.read_text())
        for name in ("second_memory", "second_no_memory"):
            for suffix in (".kforge", ".kforge-wal", ".kforge-shm", ".log"):
                (out / (name + suffix)).unlink(missing_ok=True)
    else:
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        first = optimize(FIRST, out / "first.kforge", memory_dir,
                         ["--budget", str(args.budget1), "--seed", str(args.seed), *llm], out / "first.log")
        first["problem"] = FIRST.stem
        data = {"budget1": args.budget1, "seed": args.seed, "first": first, "remembered": remembered(memory_dir),
                "second": SECOND.stem}
    data["budget2"] = args.budget2
    second = ["--seeds-only"] if args.budget2 == 0 else ["--budget", str(args.budget2), "--seed", str(args.seed), *llm]
    data["with_memory"] = optimize(SECOND, out / "second_memory.kforge", memory_dir, second, out / "second_memory.log")
    data["without_memory"] = optimize(SECOND, out / "second_no_memory.kforge", memory_dir, [*second, "--no-memory"],
                                      out / "second_no_memory.log")
    result.write_text(json.dumps(data, indent=1))
    print(report(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
