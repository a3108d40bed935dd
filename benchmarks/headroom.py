"""How much faster than its seed any kernel of a problem could be: the seed against a floor kernel.

The generalization benchmark asks the best LLM kernel to run 1.1x its best seed. On CPU-sized problems a call
costs the same fixed amount whatever the kernel does (the Python forward, the output's allocation, the native
call, OpenMP's start on the threads) and must move the same bytes: read every input value once, write every
output value once. The **floor kernel** does exactly that and nothing else: it has the problem's kernel
signature, sums every value of every input in parallel SIMD loops, and writes that sum to every output value.
It is wrong, so no search would keep it, and no correct kernel of the same call can be much faster: the
**headroom** ``seed / floor`` bounds what any kernel, the model's or a person's, can gain over the seed.

Per problem (both halves of ``problems_generalize``; the seeds are the ones ``generalize.py --check``
verifies, nothing of a search is read): each seed, the floor and eager, in one process, timed together,
interleaved round by round (``kernels.timing.time_interleaved``, the evaluator's CPU clock). The seeds are
the project's own code (exemplars fitted to the problem, or the reference lowered to loops), never a
model's, so they run in this process. Run on a quiet machine.

    python benchmarks/headroom.py                     # both halves
    python benchmarks/headroom.py --half test --runs 400
    python benchmarks/headroom.py --serial            # also each seed and the floor on one thread
    python benchmarks/headroom.py --exp-floor         # also the floor with the seeds' exp of every input value

``--serial`` asks whether the floor bounds every kernel of the call: on calls of a few tens of microseconds,
waking OpenMP's threads may cost more than the work they share. It adds each kernel again with every parallel
region serialized (``#pragma omp parallel ... if(0)``: the same code, one thread).

``--exp-floor`` asks how much of that room is left to a kernel that must compute an exp per value (softmax,
logsumexp, cross-entropy, ...): the floor reads nothing but adds, so where the seed spends its time on exps the
headroom overstates the room. The **exp floor** passes every float input value through the seeds' own exp with no
cap, ``fast_exp_neg`` (the row-softmax exemplar's, 4.5e-6 relative error), before it is summed: one exp per value and
nothing else, no maximum first, no second pass. A kernel with the same exp that computes one per input value cannot be faster. A masked
softmax needs exps only where the mask keeps a value, so its exp floor is not a bound there.
"""

from __future__ import annotations

import argparse
import platform
import re
import sys
import time
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from generalize import HALVES, PROBLEMS, TARGET_GAIN, problems  # noqa: E402


def floor_kernel(scaffold, value=lambda a: f"(float){a.name}[i]") -> str:
    """The problem's kernel signature with the least a correct kernel must do: every input and parameter
    value read once, every output value written once (the sum of all that was read, so nothing is skipped).
    ``value(arg)`` is what is summed of each value of ``arg``."""
    reads, writes = [], []
    for a in scaffold.args:
        if a.role not in ("input", "param", "output") or "*" not in a.ctype:
            continue
        n = 1
        for d in scaffold.shapes[a.name]:
            n *= int(d)
        if a.role == "output":
            writes.append(f"    #pragma omp for simd\n    for (int64_t i = 0; i < {n}; ++i) {a.name}[i] = total;")
        else:
            reads.append(f"    #pragma omp for simd reduction(+ : total)\n"
                         f"    for (int64_t i = 0; i < {n}; ++i) total += {value(a)};")
    body = "\n".join(reads + writes)  # one parallel region; each loop ends on the threads' barrier
    return f"{scaffold.signature()} {{\n    float total = 0.0f;\n    #pragma omp parallel\n    {{\n{body}\n    }}\n}}\n"


def exp_floor_kernel(scaffold, exp_definition: str) -> str:
    """The floor of a problem that must compute an exp of every input value: each float input value passed
    through the seeds' own exp with no cap, ``fast_exp_neg`` (given as its definition), before it is summed (one
    exp per value; before fast_exp_neg, the floor used the capped ``fast_exp``)."""

    def value(a) -> str:
        exp = a.role == "input" and a.ctype.replace("const", "").strip() == "float*"
        return f"fast_exp_neg((float){a.name}[i])" if exp else f"(float){a.name}[i]"

    return "#include <cstdint>\n#include <cstring>\n" + exp_definition + "\n" + floor_kernel(scaffold, value)


def serialized(code: str) -> str:
    """The same kernel with every OpenMP parallel region run by one thread (an ``if(0)`` clause)."""
    return re.sub(r"(#pragma omp parallel\b(?: for\b)?(?: simd\b)?)", r"\1 if(0)", code)


def _load(scaffold, code: str, name: str, ref_model, init_inputs):
    import torch

    from kforge_desktop.kernels.candidate import load_candidate_module
    from kforge_desktop.kernels.worker import RESERVED_SEED, _copy_matching_state

    mod = load_candidate_module(scaffold.module_source(code), name)
    torch.manual_seed(RESERVED_SEED)
    model = mod.ModelNew(*init_inputs)
    _copy_matching_state(ref_model, model)
    return model.eval()


class Setup(NamedTuple):
    problem: object
    scaffold: object
    ref_mod: object
    init_inputs: list
    ref_model: object
    inputs: list
    seeds: list  # (directive, code, note) as a search places them, kernel memory left out


def chosen_problems(names: list[str] | None) -> list[Path]:
    """The problems ``HALF/NAME`` of ``problems_generalize``, or every problem of both halves."""
    return [PROBLEMS / f"{n}.py" for n in names] if names else [p for half in HALVES for p in problems(half)]


def machine_line(runs: int, what: str = "") -> str:
    """The first line of a seed timing's report: the machine, the threads, torch, the rounds."""
    import torch

    return (f"Machine: {platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}; "
            f"{runs} interleaved rounds, medians.{' ' + what if what else ''}\n")


def setup(path: Path) -> Setup:
    """A problem as the evaluator's worker sets it up (the reference built under the reserved seed), with its seeds."""
    import torch

    from kforge_desktop.kernels.worker import RESERVED_SEED
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.scaffold import build_scaffold
    from kforge_desktop.search.setup import seed_kernels

    problem = load_problem(path)
    scaffold = build_scaffold(problem)
    ref_mod = problem.load_module()
    init_inputs = list(ref_mod.get_init_inputs())
    torch.manual_seed(RESERVED_SEED)
    ref_model = ref_mod.Model(*init_inputs).eval()
    inputs = list(ref_mod.get_inputs())
    return Setup(problem, scaffold, ref_mod, init_inputs, ref_model, inputs,
                 list(seed_kernels(problem, scaffold, memory=False)))


def measure(path: Path, runs: int, serial: bool = False, exp: bool = False) -> dict:
    import torch

    from kforge_desktop.csource.items import function_text
    from kforge_desktop.kernels.timing import time_interleaved
    from kforge_desktop.kernels.verify import compare

    problem, scaffold, ref_mod, init_inputs, ref_model, inputs, seed_list = setup(path)
    expected = ref_model(*inputs)
    tag = re.sub(r"\W", "_", problem.name)
    contenders = {"eager": lambda: ref_model(*inputs)}
    seeds, exp_definition = [], None
    for i, (directive, code, _note) in enumerate(seed_list):
        model = _load(scaffold, code, f"headroom_{tag}_seed{i}", ref_model, init_inputs)
        if not compare(model(*inputs), expected, getattr(ref_mod, "tolerance", None)).ok:
            raise SystemExit(f"{path}: seed {directive} is not correct here; run generalize.py --check")
        name = directive.removeprefix("exemplar:")
        exp_definition = exp_definition or function_text(code, "fast_exp_neg")
        seeds.append(name)
        contenders[name] = lambda m=model: m(*inputs)
        if serial:
            one = _load(scaffold, serialized(code), f"headroom_{tag}_seed{i}_serial", ref_model, init_inputs)
            if not compare(one(*inputs), expected, getattr(ref_mod, "tolerance", None)).ok:
                raise SystemExit(f"{path}: seed {directive} on one thread is not correct")
            contenders[name + " serial"] = lambda m=one: m(*inputs)
    floor = _load(scaffold, floor_kernel(scaffold), f"headroom_{tag}_floor", ref_model, init_inputs)
    contenders["floor"] = lambda: floor(*inputs)
    if serial:
        floor1 = _load(scaffold, serialized(floor_kernel(scaffold)), f"headroom_{tag}_floor_serial", ref_model,
                       init_inputs)
        contenders["floor serial"] = lambda: floor1(*inputs)
    if exp and exp_definition:
        floor_e = _load(scaffold, exp_floor_kernel(scaffold, exp_definition), f"headroom_{tag}_expfloor", ref_model,
                        init_inputs)
        contenders["exp floor"] = lambda: floor_e(*inputs)
    with torch.no_grad():
        timings = time_interleaved(contenders, "cpu", runs=runs, warmup=20, budget_s=60.0)
    ms = {name: t.device.median_ms for name, t in timings.items()}
    best = min(seeds, key=lambda s: ms[s])
    return {"problem": problem.name, "seeds": seeds, "best_seed": best, "ms": ms,
            "headroom": ms[best] / ms["floor"], "seed_vs_eager": ms["eager"] / ms[best],
            "exp_room": ms[best] / ms["exp floor"] if "exp floor" in ms else None,
            "serial_room": ms[best] / min(ms["floor"], ms.get("floor serial", ms["floor"]),
                                          *(ms.get(s + " serial", ms[best]) for s in seeds))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--half", nargs="+", choices=HALVES, default=list(HALVES))
    ap.add_argument("--runs", type=int, default=300, help="interleaved rounds per problem")
    ap.add_argument("--serial", action="store_true", help="also time each seed and the floor on one thread")
    ap.add_argument("--exp-floor", action="store_true",
                    help="also a floor that computes the seeds' uncapped exp of every input value (problems with an exp)")
    args = ap.parse_args(argv)

    print(machine_line(args.runs, "headroom = best seed / floor: no kernel of this call can gain more over the seed."))
    for half in args.half:
        rows = [measure(p, args.runs, args.serial, args.exp_floor) for p in problems(half)]
        print(f"**{half}** ({len(rows)} problems):\n")
        extra = " best seed serial ms | floor serial ms | room (best seed / fastest of all) |" if args.serial else ""
        if args.exp_floor:
            extra += " exp floor ms | room (best seed / exp floor) |"
        print("| problem | best seed | seed ms | floor ms | eager ms | seed vs eager | headroom (seed / floor) |" + extra)
        print("|---|---|---|---|---|---|---|" + "---|" * (3 * args.serial + 2 * args.exp_floor))
        for r in rows:
            ms, best = r["ms"], r["best_seed"]
            more = (f" {ms[best + ' serial']:.4f} | {ms['floor serial']:.4f} | {r['serial_room']:.2f}x |"
                    if args.serial else "")
            if args.exp_floor:
                more += (f" {ms['exp floor']:.4f} | {r['exp_room']:.2f}x |" if r["exp_room"] else " - | - |")
            print(f"| {r['problem']} | {best} | {ms[best]:.4f} | {ms['floor']:.4f} | "
                  f"{ms['eager']:.4f} | {r['seed_vs_eager']:.2f}x | {r['headroom']:.2f}x |" + more)
        room = sum(r["headroom"] >= TARGET_GAIN for r in rows)
        print(f"\nHeadroom >= {TARGET_GAIN}x on {room} of {len(rows)} problems.", flush=True)
        if args.serial:
            room = sum(r["serial_room"] >= TARGET_GAIN for r in rows)
            print(f"Room >= {TARGET_GAIN}x over the fastest of floor and serialized kernels on {room} of {len(rows)}.")
        if args.exp_floor:
            room = sum((r["exp_room"] or r["headroom"]) >= TARGET_GAIN for r in rows)
            print(f"Room >= {TARGET_GAIN}x over the exp floor where the seed computes an exp, over the floor "
                  f"elsewhere, on {room} of {len(rows)}.")
        print()
    return 0


if __name__ == "__main__":
    t0 = time.time()
    rc = main()
    print(f"({time.time() - t0:.0f} s)")
    sys.exit(rc)
