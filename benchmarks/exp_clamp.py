"""Where the room over the exp floor goes: fast_exp's upper clamp, on the dev half's softmax problems.

``headroom.py --exp-floor`` leaves the test half's three exp problems 1.34-1.46x of room over a floor that computes
one exp per value. This script asks how much of that one edit an expert would make takes: in a softmax, a
log-softmax or a cross-entropy, every argument of ``fast_exp`` is a value minus its row's maximum, never positive,
so the clamp at exp(88) never acts and can go (``x > 88.0f ? 88.0f : x``; the clamp below -87 and the 0 for an
underflow stay). Per dev problem (``--problems``; the test half is never read): the best seed as it is and the same
seed with that clamp dropped, timed interleaved with the floor (``headroom.py``'s harness). The edited seed must give
the seed's output bit for bit on the problem's inputs, or the script stops.

It also counts, over the recorded dev sessions, the correct LLM kernels that define ``fast_exp`` and how many of
them dropped that clamp: whether the search ever finds the edit on its own.

    python benchmarks/exp_clamp.py                      # the four dev softmax problems, quiet machine, a minute
"""

from __future__ import annotations

import argparse
import glob
import platform
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from headroom import _load, floor_kernel, setup  # noqa: E402

CLAMPED = "(x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x))"
LOWER_ONLY = "(x < -87.0f ? -87.0f : x)"
SOFTMAX_DEV = ("log_softmax", "smoothed_cross_entropy", "causal_scaled_softmax", "padding_masked_softmax")


def without_upper_clamp(code: str) -> str:
    if CLAMPED not in code:
        raise SystemExit("the seed's fast_exp is not the row-softmax exemplar's any more; update this script")
    return code.replace(CLAMPED, LOWER_ONLY)


def measure(path: Path, runs: int) -> dict:
    import torch

    from kforge_desktop.kernels.timing import time_interleaved

    problem, scaffold, _ref_mod, init_inputs, ref_model, inputs, seed_list = setup(path)
    tag = problem.name
    contenders, names = {}, []
    for i, (directive, code, _note) in enumerate(seed_list):
        if "fast_exp(" not in code:
            continue
        name = directive.removeprefix("exemplar:")
        seed = _load(scaffold, code, f"clamp_{tag}_seed{i}", ref_model, init_inputs)
        edited = _load(scaffold, without_upper_clamp(code), f"clamp_{tag}_seed{i}_lower", ref_model, init_inputs)
        with torch.no_grad():
            if not torch.equal(seed(*inputs), edited(*inputs)):
                raise SystemExit(f"{path}: {name} without the upper clamp gives other values")
        contenders[name] = lambda m=seed: m(*inputs)
        contenders[name + " lower clamp only"] = lambda m=edited: m(*inputs)
        names.append(name)
    if not names:
        raise SystemExit(f"{path}: no seed calls fast_exp")
    floor = _load(scaffold, floor_kernel(scaffold), f"clamp_{tag}_floor", ref_model, init_inputs)
    contenders["floor"] = lambda: floor(*inputs)
    with torch.no_grad():
        timings = time_interleaved(contenders, "cpu", runs=runs, warmup=20, budget_s=60.0)
    ms = {n: t.device.median_ms for n, t in timings.items()}
    best = min(names, key=lambda n: ms[n])
    return {"problem": tag, "seed": best, "ms": ms[best], "lower": ms[best + " lower clamp only"],
            "floor": ms["floor"]}


def recorded_forms() -> tuple[int, int]:
    """(correct LLM kernels of the recorded dev sessions that define fast_exp, how many dropped its upper clamp)."""
    from directive_record import _queries

    from kforge_desktop.csource.items import function_text

    sessions = sorted(glob.glob(str(HERE / "results" / "generalize" / "*_sessions" / "dev" / "*.kforge.gz")))
    defined = dropped = 0
    for statuses, nodes in _queries(sessions, "SELECT node_id, status FROM verdicts",
                                    "SELECT id, origin, kernel_source FROM nodes"):
        ok = {n for n, s in statuses if s == "ok"}
        for node, origin, source in nodes:
            text = function_text(source or "", "fast_exp") if origin == "llm" and node in ok else None
            if text is None:
                continue
            defined += 1
            dropped += not any(s in text for s in ("x > 88", "std::exp", "expf("))  # a polynomial, no cap
    return defined, dropped


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", nargs="+", default=list(SOFTMAX_DEV), help="dev problem names")
    ap.add_argument("--runs", type=int, default=300)
    args = ap.parse_args(argv)
    import torch

    print(f"Machine: {platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}; "
          f"{args.runs} interleaved rounds, medians.\n")
    print("| dev problem | best seed | seed ms | without the upper clamp ms | seed / edited | floor ms |")
    print("|---|---|---|---|---|---|")
    for name in args.problems:
        r = measure(HERE / "problems_generalize" / "dev" / f"{name}.py", args.runs)
        print(f"| {r['problem']} | {r['seed']} | {r['ms']:.4f} | {r['lower']:.4f} | {r['ms'] / r['lower']:.2f}x | "
              f"{r['floor']:.4f} |", flush=True)
    defined, dropped = recorded_forms()
    print(f"\nRecorded dev sessions: {defined} correct LLM kernels define fast_exp; {dropped} of them as a "
          f"polynomial without the upper clamp.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
