"""What the request that fuses a row's maximum into its sum of exponentials gains where it is asked.

A kernel whose row maximum and sum of exponentials are each a helper's one loop, called one after the other
(``applicability.reference_parts``), is asked for ``reference_max`` (``requests.reference_max_text``): the exps taken
at the maximum of the row's first values, the row's maximum in the same SIMD loop, the sum taken again only where that
maximum lies far above. Before it, such kernels were asked for ``online_blocks``: both in one pass, a block of values
at a time (each block's maximum, the sum so far rescaled as it grew, then the block's exps); its pattern is rebuilt
here (``blocked``) for the comparison. This script puts each pattern in place of the seed's two calls (as the unit
test ``test_the_reference_maximum_pattern_computes_what_the_seed_computes`` does, which checks the values), checks the
output against the reference, and times them interleaved with the seed, eager and the exp floor (``headroom.py
--exp-floor``: one exp per input value and nothing else) in one process. The problems are the dev half's (the test
half is not read for tuning). Run on a quiet machine.

    python benchmarks/online_blocks.py                       # dev log_softmax, smoothed_cross_entropy, the softmaxes, free_energy
    python benchmarks/online_blocks.py --blocks 256 512 --runs 500

``--samples DIR`` judges the model's answers instead: ``DIR/<problem>/candidate_*.py`` as ``kforge sample
benchmarks/problems_generalize/dev/<problem>.py --kind edit --directive reference_max --n 6 --seed 0 --out
DIR/<problem>`` writes them (with an empty ``KFORGE_MEMORY_DIR``), each built and verified by the evaluator, and
counted as a search counts them: correct, and of those the ones that are neither the seed nor an earlier answer
(``csource.normalize``).

    python benchmarks/online_blocks.py --samples benchmarks/results/reference_max/samples_reference_max
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


def blocked(kernel: str, block: int) -> str:
    """The seed with the blocked online max-and-sum (the request ``reference_max`` replaced), ``block`` values at a
    time, in place of its two calls."""
    from kforge_desktop.search.applicability import reference_parts
    from kforge_desktop.search.requests import kernel_exp

    p = reference_parts(kernel)
    if p is None:
        raise SystemExit("the seed has no row maximum and sum of exponentials in two helpers")
    m, s = p.m, p.s
    exp = kernel_exp(kernel)  # the seed's

    def loop(body: list[str]) -> list[str]:
        return ["    for (int64_t c = c0; c < c1; ++c) {", *(f"        {st}" for st in body), "    }"]
    pattern = "\n".join([
        f"float {m} = -INFINITY, {s} = 0.0f;",
        f"for (int64_t c0 = 0; c0 < {p.bound}; c0 += {block}) {{",
        f"    const int64_t c1 = c0 + {block} < {p.bound} ? c0 + {block} : {p.bound};",
        "    float bm = -INFINITY;",
        "    #pragma omp simd reduction(max : bm)",
        *loop(p.max_body),
        f"    if (bm > {m}) {{ {s} *= {exp}({m} - bm); {m} = bm; }}",
        "    float bs = 0.0f;",
        "    #pragma omp simd reduction(+ : bs)",
        *loop([re.sub(rf"^{s}\s*\+=", "bs +=", st) for st in p.sum_body]),
        f"    {s} += bs;",
        "}", ""])
    return kernel.replace(p.calls, pattern, 1)


def reference(kernel: str) -> str:
    """The seed with the reference-maximum request's pattern in place of its two calls."""
    from kforge_desktop.search.applicability import reference_parts
    from kforge_desktop.search.planner import kernel_functions
    from kforge_desktop.search.requests import AS_BEFORE, reference_max_text

    text = reference_max_text("\n".join(f for _, f in kernel_functions(kernel, "cpp")))
    pattern = re.search(r"```cpp\n(.*?)```", text or "", re.S)
    if not pattern:
        raise SystemExit("the seed's request shows no pattern")
    return kernel.replace(reference_parts(kernel).calls, pattern.group(1).partition(AS_BEFORE)[0], 1)


def measure(name: str, blocks: list[int], runs: int) -> str:
    import torch

    from kforge_desktop.csource.items import function_text
    from kforge_desktop.kernels.timing import time_interleaved
    from kforge_desktop.kernels.verify import compare
    from kforge_desktop.search.applicability import reference_parts

    s = setup(HERE / "problems_generalize" / f"{name}.py")
    expected = s.ref_model(*s.inputs)
    tol = getattr(s.ref_mod, "tolerance", None)
    directive, seed, _ = s.seeds[0]
    tag = re.sub(r"\W", "_", name)
    contenders = {"eager": lambda: s.ref_model(*s.inputs)}
    seed_model = _load(s.scaffold, seed, f"online_{tag}_seed", s.ref_model, s.init_inputs)
    contenders["seed"] = lambda: seed_model(*s.inputs)
    # a guard of the maximum between the calls (a logsumexp): the blocked pattern was never asked of such a kernel
    guarded = reference_parts(seed).at
    kernels = {f"blocks of {b}": blocked(seed, b) for b in blocks if not guarded} | {"reference maximum": reference(seed)}
    for label, kernel in kernels.items():
        short = re.sub(r"\W", "_", label)
        model = _load(s.scaffold, kernel, f"online_{tag}_{short}", s.ref_model, s.init_inputs)
        check = compare(model(*s.inputs), expected, tol)
        if not check.ok:
            raise SystemExit(f"{name}: {label} is not correct: {check.reason}")
        contenders[label] = lambda m=model: m(*s.inputs)
    floor = _load(s.scaffold, exp_floor_kernel(s.scaffold, function_text(seed, "fast_exp_neg")), f"online_{tag}_ef",
                  s.ref_model, s.init_inputs)
    contenders["exp floor"] = lambda: floor(*s.inputs)
    with torch.no_grad():
        timings = time_interleaved(contenders, "cpu", runs=runs, warmup=20, budget_s=60.0)
    ms = {k: t.device.median_ms for k, t in timings.items()}
    rows = [f"| {name} ({directive} seed) | {k} | {v:.4f} | {ms['seed'] / v:.2f}x |" for k, v in ms.items()]
    return "\n".join(rows)


def judge(folder: Path) -> str:
    """Per problem folder of samples: answers, correct, correct and new (not the seed, not an earlier answer), and
    correct once today's autofix has had the answers that did not build (``answers.autofix_kernel``, what a search
    does with an answer: the samples keep the fixes of the code that wrote them)."""
    from kforge_desktop.csource.normalize import normalize_code
    from kforge_desktop.kernels.evaluator import Evaluator
    from kforge_desktop.kernels.options import EvalOptions
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.answers import autofix_kernel
    from kforge_desktop.search.scaffold import build_scaffold, kernel_of_module
    from kforge_desktop.search.setup import seed_kernels

    lines = ["| problem | answers | correct | correct and new | what failed | correct with today's autofix |",
             "|---|---|---|---|---|---|"]
    total = [0, 0, 0, 0]
    quick = EvalOptions(compare_compile=False, timed_runs=3, warmup_runs=1)
    with Evaluator(device="cpu", workers=1, options=quick) as ev:
        for d in sorted(p for p in folder.iterdir() if p.is_dir()):
            problem = load_problem(HERE / "problems_generalize" / "dev" / f"{d.name}.py")
            scaffold = build_scaffold(problem, "cpp")
            seen = {normalize_code(k, "cpp") for _d, k, _n in seed_kernels(problem, scaffold, memory=False)}
            files = sorted(d.glob("candidate_[0-9]*.py"))
            ok = new = fixed = 0
            failed: dict[str, int] = {}
            for f in files:
                verdict = ev.evaluate(problem, f.read_text())
                kernel = kernel_of_module(f.read_text()) or ""
                norm = normalize_code(kernel, "cpp")
                if verdict.status == "ok":
                    ok += 1
                    new += norm not in seen
                else:
                    failed[verdict.status] = failed.get(verdict.status, 0) + 1
                    if verdict.status == "compile_error":
                        again, note = autofix_kernel(scaffold, kernel)
                        fixed += bool(note) and ev.evaluate(problem, scaffold.module_source(again)).status == "ok"
                seen.add(norm)
            total = [total[0] + len(files), total[1] + ok, total[2] + new, total[3] + ok + fixed]
            why = ", ".join(f"{k} {v}" for k, v in sorted(failed.items(), key=lambda kv: -kv[1]))
            lines.append(f"| {d.name} | {len(files)} | {ok} | {new} | {why} | {ok + fixed} |")
    lines.append(f"| **all** | {total[0]} | {total[1]} | {total[2]} | | {total[3]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", nargs="+", default=["dev/log_softmax", "dev/smoothed_cross_entropy",
                                                      "dev/padding_masked_softmax", "dev/causal_scaled_softmax",
                                                      "dev/free_energy"])
    ap.add_argument("--blocks", nargs="+", type=int, default=[512])
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
