"""What the single-pass request's blocked online max-and-sum gains where it is asked, and the block size it uses.

The single-pass request of a kernel whose row maximum and sum of exponentials are each a helper's one loop shows
a pattern (``directives.blocked_online_text``): both in one pass over the row, ``ONLINE_BLOCK`` values at a time.
This script puts that pattern, for each block size, in place of the seed's two calls (as the unit test
``test_the_blocked_online_pattern_computes_what_the_lowered_seed_computes`` does, which checks the values), checks
the output against the reference, and times it interleaved with the seed, eager and the exp floor
(``headroom.py --exp-floor``: one exp per input value and nothing else) in one process. The problems are the dev
half's (the test half is not read for tuning). Run on a quiet machine.

    python benchmarks/online_blocks.py                       # dev log_softmax and smoothed_cross_entropy
    python benchmarks/online_blocks.py --blocks 64 256 --runs 500

``--samples DIR`` judges the model's answers instead: ``DIR/<problem>/candidate_*.py`` as ``kforge sample
benchmarks/problems_generalize/dev/<problem>.py --kind edit --directive online_blocks --n 6 --seed 0 --out
DIR/<problem>`` writes them (with an empty ``KFORGE_MEMORY_DIR``), each built and verified by the evaluator, and
counted as a search counts them: correct, and of those the ones that are neither the seed nor an earlier answer
(``csource.normalize``).

    python benchmarks/online_blocks.py --samples benchmarks/results/online_blocks/samples_online_blocks
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from headroom import _load, exp_floor_kernel, machine_line, setup  # noqa: E402

CALLS = re.compile(r"^\s*const float v_amax = row_max\([^;]*;\n\s*const float v_sum_1 = row_sum\([^;]*;\n", re.M)


def fused(kernel: str, block: int) -> str:
    """The seed with the request's pattern for ``block`` values at a time in place of its two calls."""
    from kforge_desktop.search.directives import blocked_online_text
    from kforge_desktop.search.planner import kernel_functions

    text = blocked_online_text("\n".join(f for _, f in kernel_functions(kernel, "cpp")), block=block)
    pattern = re.search(r"```cpp\n(.*?)```", text or "", re.S)
    if not pattern or not CALLS.search(kernel):
        raise SystemExit("the seed's request shows no blocked pattern, or the seed has no row_max/row_sum calls")
    return CALLS.sub(lambda _m: pattern.group(1), kernel, count=1)


def measure(name: str, blocks: list[int], runs: int) -> str:
    import torch

    from kforge_desktop.csource.items import function_text
    from kforge_desktop.kernels.timing import time_interleaved
    from kforge_desktop.kernels.verify import compare

    s = setup(HERE / "problems_generalize" / f"{name}.py")
    expected = s.ref_model(*s.inputs)
    tol = getattr(s.ref_mod, "tolerance", None)
    directive, seed, _ = s.seeds[0]
    tag = re.sub(r"\W", "_", name)
    contenders = {"eager": lambda: s.ref_model(*s.inputs)}
    seed_model = _load(s.scaffold, seed, f"online_{tag}_seed", s.ref_model, s.init_inputs)
    contenders["seed"] = lambda: seed_model(*s.inputs)
    for b in blocks:
        model = _load(s.scaffold, fused(seed, b), f"online_{tag}_{b}", s.ref_model, s.init_inputs)
        check = compare(model(*s.inputs), expected, tol)
        if not check.ok:
            raise SystemExit(f"{name}: blocks of {b} are not correct: {check.reason}")
        contenders[f"blocks of {b}"] = lambda m=model: m(*s.inputs)
    floor = _load(s.scaffold, exp_floor_kernel(s.scaffold, function_text(seed, "fast_exp_neg")), f"online_{tag}_ef",
                  s.ref_model, s.init_inputs)
    contenders["exp floor"] = lambda: floor(*s.inputs)
    with torch.no_grad():
        timings = time_interleaved(contenders, "cpu", runs=runs, warmup=20, budget_s=60.0)
    ms = {k: t.device.median_ms for k, t in timings.items()}
    rows = [f"| {name} ({directive} seed) | {k} | {v:.4f} | {ms['seed'] / v:.2f}x |" for k, v in ms.items()]
    return "\n".join(rows)


def judge(folder: Path) -> str:
    """Per problem folder of samples: answers, correct, correct and new (not the seed, not an earlier answer)."""
    from kforge_desktop.csource.normalize import normalize_code
    from kforge_desktop.kernels.evaluator import Evaluator
    from kforge_desktop.kernels.options import EvalOptions
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.scaffold import build_scaffold, kernel_of_module
    from kforge_desktop.search.setup import seed_kernels

    lines = ["| problem | answers | correct | correct and new | what failed |", "|---|---|---|---|---|"]
    total = [0, 0, 0]
    quick = EvalOptions(compare_compile=False, timed_runs=3, warmup_runs=1)
    with Evaluator(device="cpu", workers=1, options=quick) as ev:
        for d in sorted(p for p in folder.iterdir() if p.is_dir()):
            problem = load_problem(HERE / "problems_generalize" / "dev" / f"{d.name}.py")
            scaffold = build_scaffold(problem, "cpp")
            seen = {normalize_code(k, "cpp") for _d, k, _n in seed_kernels(problem, scaffold, memory=False)}
            files = sorted(d.glob("candidate_[0-9]*.py"))
            ok = new = 0
            failed: dict[str, int] = {}
            for f in files:
                verdict = ev.evaluate(problem, f.read_text())
                norm = normalize_code(kernel_of_module(f.read_text()) or "", "cpp")
                if verdict.status == "ok":
                    ok += 1
                    new += norm not in seen
                else:
                    failed[verdict.status] = failed.get(verdict.status, 0) + 1
                seen.add(norm)
            total = [total[0] + len(files), total[1] + ok, total[2] + new]
            why = ", ".join(f"{k} {v}" for k, v in sorted(failed.items(), key=lambda kv: -kv[1]))
            lines.append(f"| {d.name} | {len(files)} | {ok} | {new} | {why} |")
    lines.append(f"| **all** | {total[0]} | {total[1]} | {total[2]} | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", nargs="+", default=["dev/log_softmax", "dev/smoothed_cross_entropy"])
    ap.add_argument("--blocks", nargs="+", type=int, default=[64, 128, 256, 512])
    ap.add_argument("--runs", type=int, default=300, help="interleaved rounds per problem")
    ap.add_argument("--samples", type=Path, default=None, help="judge the sampled answers in this folder instead")
    args = ap.parse_args(argv)
    if args.samples:
        print(judge(args.samples))
        return 0
    print(machine_line(args.runs, "speed = the seed's time over this one's."))
    print("| problem | kernel | ms | speed vs the seed |\n|---|---|---|---|")
    for name in args.problems:
        print(measure(name, args.blocks, args.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
