"""What hoisting a repeated division out of a loop gains on each seed that has one, and what the model makes of
the request.

The hoisting directive (``search/requests.hoist_text``) is asked of a kernel whose entry point divides every value
of a loop by a value the loop does not change (``search/applicability.hoistable_divisions``): one reciprocal before
the loop, a multiplication per value. Per problem of both halves of ``problems_generalize`` whose seed has such a
division (the seeds ``generalize.py --check`` verifies; nothing of a search is read), this times the seed against
the same seed with each such division hoisted by hand, here (``hoisted``: the project's own rewrite of its own seed,
so it runs in this process), in one process, interleaved round by round (``kernels.timing.time_interleaved``, the
evaluator's CPU clock), after checking the rewrite's outputs against the reference. Run on a quiet machine.

    python benchmarks/hoisted_division.py                 # both halves
    python benchmarks/hoisted_division.py --half dev --runs 400

The model's answers to the request come from ``kforge sample PROBLEM --kind edit --directive hoist_invariants``,
judged by ``kforge eval`` (in isolated workers, as every model kernel is).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from generalize import HALVES, problems  # noqa: E402
from headroom import _load, machine_line, setup  # noqa: E402


def hoisted(code: str) -> str:
    """``code`` with each division its entry point repeats in a loop (``entry_divisions``) replaced by a
    multiplication with a reciprocal taken once, just before that loop."""
    from kforge_desktop.csource.items import ENTRY, function_text
    from kforge_desktop.search.applicability import entry_divisions

    entry = function_text(code, ENTRY)
    if entry is None:
        return code
    new = entry
    for divisor, value, _loop in entry_divisions(entry):
        division = re.compile(rf"/\s*(?:\(\s*float\s*\)\s*)?{divisor}\b(?!\s*[\[(.:])")
        at = division.search(new).start()
        loops = [m for m in re.finditer(r"(?m)^([ \t]*)for\s*\(([^;]*);([^;]*);", new[:at])
                 if not re.search(r"<\s*rows\b", m.group(3))]
        loop = loops[-1]  # the innermost loop around the division
        inv = f"inv_{value}"
        head, tail = new[:loop.start()], new[loop.start():]
        new = f"{head}{loop.group(1)}const float {inv} = 1.0f / {value};\n" + division.sub(f"* {inv}", tail)
    return code.replace(entry, new)


def measure(path: Path, runs: int) -> dict | None:
    import torch

    from kforge_desktop.kernels.timing import time_interleaved
    from kforge_desktop.kernels.verify import compare
    from kforge_desktop.search.applicability import entry_divisions

    problem, scaffold, ref_mod, init_inputs, ref_model, inputs, seed_list = setup(path)
    directive, code, _note = seed_list[0]  # the seed a search edits first
    divisions = entry_divisions(code)
    if not divisions:
        return None
    expected = ref_model(*inputs)
    tag = re.sub(r"\W", "_", problem.name)
    seed = _load(scaffold, code, f"hoist_{tag}_seed", ref_model, init_inputs)
    rewrite = _load(scaffold, hoisted(code), f"hoist_{tag}_hoisted", ref_model, init_inputs)
    tolerance = getattr(ref_mod, "tolerance", None)
    for name, model in (("seed", seed), ("hoisted", rewrite)):
        if not compare(model(*inputs), expected, tolerance).ok:
            raise SystemExit(f"{path}: the {name} kernel is not correct here")
    with torch.no_grad():
        timings = time_interleaved({"seed": lambda: seed(*inputs), "hoisted": lambda: rewrite(*inputs)}, "cpu",
                                   runs=runs, warmup=20, budget_s=60.0)
    ms = {name: t.device.median_ms for name, t in timings.items()}
    return {"problem": problem.name, "seed": directive.removeprefix("exemplar:"),
            "divisions": ", ".join(f"{d} ({v})" if d != v else d for d, v, _ in divisions), "ms": ms,
            "gain": ms["seed"] / ms["hoisted"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--half", choices=(*HALVES, "both"), default="both")
    ap.add_argument("--runs", type=int, default=300)
    args = ap.parse_args(argv)

    start = time.time()
    print(machine_line(args.runs, "gain = seed / seed with its repeated divisions hoisted."))
    for half in (HALVES if args.half == "both" else (args.half,)):
        rows = [r for r in (measure(p, args.runs) for p in problems(half)) if r is not None]
        print(f"**{half}**: {len(rows)} of {len(problems(half))} problems' first seeds divide in a loop by a value "
              "the loop does not change.\n")
        if rows:
            print("| problem | seed | divides by (copy of) | seed ms | hoisted ms | gain |\n|---|---|---|---|---|---|")
            for r in rows:
                print(f"| {r['problem']} | {r['seed']} | {r['divisions']} | {r['ms']['seed']:.4f} | "
                      f"{r['ms']['hoisted']:.4f} | {r['gain']:.2f}x |")
            print()
    print(f"({time.time() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
