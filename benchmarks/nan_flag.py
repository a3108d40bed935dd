"""What the lowered seeds save by leaving a maximum's NaN to the row's sum (``search/lowering_cpp.nan_left_to_a_sum``).

A row's maximum is NaN in torch when the row holds a NaN; the lowered maximum tests every value for NaN to match.
In a softmax, a log-softmax, a logsumexp or a cross-entropy every output that uses the maximum also uses the row's
exp-sum, which a NaN in the row makes NaN anyway, so the lowering leaves the test out there. Per problem (both halves
of ``problems_generalize`` by default: the seeds are the project's own code, nothing of a search is read), the
lowered seed against the same problem lowered with the test kept (as it was), timed interleaved with the floor
(``headroom.py``'s harness). The two must give the same output bit for bit on the problem's inputs, or the script
stops; a problem whose lowered seed keeps its test (or has no maximum) is not listed.

    python benchmarks/nan_flag.py                  # quiet machine
    python benchmarks/nan_flag.py --problems dev/log_softmax test/logsumexp_rows
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from headroom import _load, chosen_problems, floor_kernel, machine_line, setup  # noqa: E402


def with_nan_test(problem, scaffold) -> str:
    """The problem lowered with every maximum's NaN test kept."""
    from kforge_desktop.search import lowering

    left = lowering.nan_left_to_a_sum
    lowering.nan_left_to_a_sum = lambda m: False
    try:
        return lowering.lower(problem, scaffold)
    finally:
        lowering.nan_left_to_a_sum = left


def measure(path: Path, runs: int) -> dict | None:
    import torch

    from kforge_desktop.kernels.timing import time_interleaved
    from kforge_desktop.search.setup import LOWERED_SEED

    problem, scaffold, _ref_mod, init_inputs, ref_model, inputs, seed_list = setup(path)
    code = next((code for directive, code, _note in seed_list if directive == LOWERED_SEED), None)
    flagged = with_nan_test(problem, scaffold) if code else None
    if code is None or flagged == code:
        return None
    tag = problem.name
    seed = _load(scaffold, code, f"nanflag_{tag}_seed", ref_model, init_inputs)
    kept = _load(scaffold, flagged, f"nanflag_{tag}_kept", ref_model, init_inputs)
    floor = _load(scaffold, floor_kernel(scaffold), f"nanflag_{tag}_floor", ref_model, init_inputs)
    with torch.no_grad():
        if not torch.equal(seed(*inputs), kept(*inputs)):
            raise SystemExit(f"{path}: the seed with the NaN test gives other values")
        timings = time_interleaved({"seed": lambda: seed(*inputs), "kept": lambda: kept(*inputs),
                                    "floor": lambda: floor(*inputs)}, "cpu", runs=runs, warmup=20, budget_s=60.0)
    ms = {n: t.device.median_ms for n, t in timings.items()}
    return {"problem": tag, **ms}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", nargs="+", help="HALF/NAME (default: every problem of both halves)")
    ap.add_argument("--runs", type=int, default=300)
    args = ap.parse_args(argv)

    paths = chosen_problems(args.problems)
    print(machine_line(args.runs))
    print("| problem | lowered seed ms | with the NaN test ms | with the test / seed | floor ms |")
    print("|---|---|---|---|---|")
    for path in paths:
        r = measure(path, args.runs)
        if r is not None:
            print(f"| {path.parent.name}/{r['problem']} | {r['seed']:.4f} | {r['kept']:.4f} | {r['kept'] / r['seed']:.2f}x "
                  f"| {r['floor']:.4f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
