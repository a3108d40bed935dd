"""What dropping fast_exp's cap at exp(88) gains where an exp's argument is never positive.

In a softmax, a log-softmax or a cross-entropy every argument of the exp is a value minus the maximum of its row,
never positive, so the cap at exp(88) never acts. The seeds call ``fast_exp_neg`` there (the row softmax's exp with
no cap; ``fast_exp`` is it of the capped value): the lowering where it proves the argument is ``x - amax(x,
keepdim=True)`` (``search/lowering_cpp.never_positive``), the row and masked softmax exemplars in their exp loop.
Per problem (both halves of ``problems_generalize`` by default: the seeds are the project's own code, nothing of a
search is read), every seed that calls ``fast_exp_neg`` against the same seed with the cap put back (the seed as
it was before), timed interleaved with the floor (``headroom.py``'s harness). The two must give the same output bit
for bit on the problem's inputs, or the script stops. A seed whose exp is a sigmoid's or a tanh's (or logsumexp's, not
proved) calls only ``fast_exp``, which caps before it calls ``fast_exp_neg``: the cap put back changes nothing there,
and such a row is marked a control.

    python benchmarks/exp_clamp.py                 # every problem whose seeds call fast_exp_neg, quiet machine
    python benchmarks/exp_clamp.py --problems dev/log_softmax test/cross_entropy_rows
    python benchmarks/exp_clamp.py --fast-exp-before   # fast_exp as exp above 88 against the cap it had

``--fast-exp-before`` asks what ``fast_exp`` costs now that it caps its argument at 89 instead of 88 (so +inf and
anything past 88.37 give +inf, where a logsumexp of a row holding +inf gave 88): every seed whose own code calls
``fast_exp`` against the same seed with the cap at 88 back, the same way; a seed that calls only ``fast_exp_neg`` is
the control there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from headroom import _load, chosen_problems, floor_kernel, machine_line, setup  # noqa: E402

LOWER_ONLY = "(x < -87.0f ? -87.0f : x) * 1.44269504f"
CAPPED = "(x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x)) * 1.44269504f"


def with_cap(code: str) -> str:
    """The seed with fast_exp_neg capped at exp(88) again: every exp as it was before the cap was dropped."""
    if LOWER_ONLY not in code:
        raise SystemExit("the seed's fast_exp_neg is not the row-softmax exemplar's any more; update this script")
    return code.replace(LOWER_ONLY, CAPPED)


EXP_ABOVE_88 = "    return fast_exp_neg(x > 89.0f ? 89.0f : x);"
FAST_EXP_CAPPED = "    return fast_exp_neg(x > 88.0f ? 88.0f : x);"


def with_capped_fast_exp(code: str) -> str:
    """The seed with fast_exp as it was: fast_exp_neg of its argument capped at 88."""
    if EXP_ABOVE_88 not in code:
        raise SystemExit("the seed's fast_exp is not the row-softmax exemplar's any more; update this script")
    return code.replace(EXP_ABOVE_88, FAST_EXP_CAPPED)


def measure(path: Path, runs: int, helper: str = "fast_exp_neg") -> dict | None:
    import torch

    from kforge_desktop.csource.items import calls
    from kforge_desktop.kernels.timing import time_interleaved
    from kforge_desktop.search.planner import kernel_functions  # shared helpers left out

    problem, scaffold, _ref_mod, init_inputs, ref_model, inputs, seed_list = setup(path)
    tag = problem.name
    contenders, names = {}, []
    other = "fast_exp" if helper == "fast_exp_neg" else "fast_exp_neg"
    variant = with_cap if helper == "fast_exp_neg" else with_capped_fast_exp
    for i, (directive, code, _note) in enumerate(seed_list):
        if f"{helper}(" not in code:
            continue
        name = directive.removeprefix("exemplar:")
        if not any(calls(text, helper) for _, text in kernel_functions(code, "cpp")):  # reached only through the
            name += f" (control: {other} only)"  # other exp, which the variant does not change
        seed = _load(scaffold, code, f"cap_{tag}_seed{i}", ref_model, init_inputs)
        capped = _load(scaffold, variant(code), f"cap_{tag}_seed{i}_{helper}_capped", ref_model, init_inputs)
        with torch.no_grad():
            if not torch.equal(seed(*inputs), capped(*inputs)):
                raise SystemExit(f"{path}: {name} with the cap gives other values")
        contenders[name] = lambda m=seed: m(*inputs)
        contenders[name + " capped"] = lambda m=capped: m(*inputs)
        names.append(name)
    if not names:
        return None
    floor = _load(scaffold, floor_kernel(scaffold), f"cap_{tag}_floor", ref_model, init_inputs)
    contenders["floor"] = lambda: floor(*inputs)
    with torch.no_grad():
        timings = time_interleaved(contenders, "cpu", runs=runs, warmup=20, budget_s=60.0)
    ms = {n: t.device.median_ms for n, t in timings.items()}
    best = min(names, key=lambda n: ms[n])
    return {"problem": tag, "seed": best, "ms": ms[best], "capped": ms[best + " capped"], "floor": ms["floor"],
            "all": {n: (ms[n], ms[n + " capped"]) for n in names}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", nargs="+", help="HALF/NAME (default: every problem of both halves)")
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--fast-exp-before", action="store_true",
                    help="the seeds that call fast_exp, against fast_exp capped at 88 as it was")
    args = ap.parse_args(argv)
    helper = "fast_exp" if args.fast_exp_before else "fast_exp_neg"

    paths = chosen_problems(args.problems)
    print(machine_line(args.runs))
    print("| problem | best seed | seed ms | with the cap ms | capped / seed | floor ms | every seed that calls it |")
    print("|---|---|---|---|---|---|---|")
    for path in paths:
        r = measure(path, args.runs, helper)
        if r is None:
            continue
        each = "; ".join(f"{n} {c / m:.2f}x" for n, (m, c) in r["all"].items())
        print(f"| {path.parent.name}/{r['problem']} | {r['seed']} | {r['ms']:.4f} | {r['capped']:.4f} | "
              f"{r['capped'] / r['ms']:.2f}x | {r['floor']:.4f} | {each} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
