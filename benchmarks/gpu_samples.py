"""What the bundled model writes for the GPU: CUDA and Triton samples, written on the CPU box and judged on a GPU.

1. On the machine with the model (no GPU needed), for each problem of ``benchmarks/problems_gpu/``:

       kforge sample benchmarks/problems_gpu/softmax.py --target cuda --n 2 --seed 0 \\
           --out benchmarks/results/gpu_samples/cuda/softmax
       kforge sample benchmarks/problems_gpu/softmax.py --target cuda --kind edit --n 2 --seed 0 \\
           --out benchmarks/results/gpu_samples/cuda/softmax.edit

   (the search's first requests: a whole kernel with the nearest example, and edits of the seed it places;
   answers with no usable code are kept as ``candidate_NNN.answer.txt``; the default answer length is
   2048 tokens for CUDA and Triton). ``--samples DIR`` reads another round's folder of samples.
2. On the GPU box: ``PYTHONPATH=$PWD python3 benchmarks/gpu_samples.py --evaluate`` builds, verifies and
   times every ``candidate_*.py`` with ``kforge eval`` (isolated workers, device time) and writes
   ``$OUT/gpu_samples.jsonl``.
3. Anywhere: ``python3 benchmarks/gpu_samples.py --report JSONL`` prints the table: per (language,
   problem) the answers, those with code, the correct ones, the correct ones that are *not* a near-copy
   of a seed or of the exemplar the prompt showed (same up to whitespace, comments, includes, helper order
   and local names: ``csource.normalize``), and the best correct candidate against eager and torch.compile.
   Where the samples folder keeps the ``kforge sample`` output as ``kforge_sample_log.txt``, a second table
   counts the same per request (the directive each sample was asked for).

``--add-seeds`` (on the CPU box, before step 2) writes each sampled problem's first seed beside its samples, as
``<language>/<problem>.seed/candidate_000.py``: step 2 then times the seed in the same ``kforge eval`` run as the
samples of its problem, and the table's ``<problem>.seed`` row is the speed an edit must beat (its "not a seed"
column is 0 by definition).

Samples of problems kept elsewhere (the generalization benchmark's halves) name their folder with
``--problems benchmarks/problems_generalize`` in steps 2 and 3; a problem file is looked up there or one folder
below it. "A seed" is every kernel a search places (``search.setup.seed_kernels``: the fitting exemplars, else
the reference lowered to loops), taken without the user's kernel memory: sample with an empty
``KFORGE_MEMORY_DIR``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SAMPLES = REPO / "benchmarks" / "results" / "gpu_samples"
PROBLEMS = REPO / "benchmarks" / "problems_gpu"


def problem_file(name: str, problems: Path = PROBLEMS) -> Path:
    """``<name>.py`` in ``problems``, or in one of its folders (``problems_generalize`` keeps a half in each)."""
    found = [problems / f"{name}.py"] if (problems / f"{name}.py").exists() else sorted(problems.glob(f"*/{name}.py"))
    if len(found) != 1:
        raise SystemExit(f"{name}: {'no' if not found else 'more than one'} problem file of that name in {problems}")
    return found[0]


def folders(root: Path = SAMPLES) -> list[tuple[str, str, Path]]:
    """(language, problem, folder) for every sample folder (``<problem>`` or ``<problem>.<anything>``,
    such as ``softmax.s1`` for the samples of another seed or ``softmax.edit`` for edits of the seed)."""
    return [(lang.name, d.name.split(".")[0], d) for lang in sorted(root.iterdir()) if lang.is_dir()
            for d in sorted(lang.iterdir()) if d.is_dir()]


def evaluate(out: Path, runs: int, timeout: float, root: Path = SAMPLES, problems: Path = PROBLEMS) -> int:
    """One ``kforge eval`` per problem over all its samples (every language and seed): the workers build
    them in parallel, and the reference and torch.compile are set up once per problem."""
    import shutil
    import tempfile

    by_problem: dict[str, list[Path]] = {}
    for _lang, name, folder in folders(root):
        by_problem.setdefault(name, []).extend(sorted(folder.glob("candidate_*.py")))
    rows = []
    for name, files in sorted(by_problem.items()):
        with tempfile.TemporaryDirectory() as tmp:
            original = {}
            for f in files:
                flat = Path(tmp) / "__".join(f.parts[-3:])
                shutil.copy(f, flat)
                original[flat.name] = "/".join(f.parts[-3:])
            try:
                run = subprocess.run([sys.executable, "-m", "kforge_desktop", "eval", str(problem_file(name, problems)), tmp,
                                      "--device", "cuda", "--json", "--runs", str(runs)], cwd=REPO, capture_output=True,
                                     text=True, timeout=timeout)
            except subprocess.TimeoutExpired as err:
                print(f"{name}: no verdicts within {timeout:.0f} s", file=sys.stderr)
                run = subprocess.CompletedProcess(err.cmd, 124, err.stdout or "", "")
                run.stdout = run.stdout.decode() if isinstance(run.stdout, bytes) else run.stdout
        for line in run.stdout.splitlines():
            try:
                v = json.loads(line)  # a candidate may print too: only the verdict lines are JSON objects
            except ValueError:
                continue
            if isinstance(v, dict) and "candidate" in v:
                v["candidate"] = original.get(Path(v["candidate"]).name, v["candidate"])
                rows.append(v)
        print(f"{name}: {len(files)} samples judged, exit {run.returncode}", flush=True)
        out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"wrote {len(rows)} verdicts to {out}")
    return 0


def add_seeds(root: Path, problems: Path) -> int:
    """Each sampled problem's first seed (``seed_kernels``, no kernel memory), as the search places it, written as
    ``<language>/<problem>.seed/candidate_000.py`` below ``root``."""
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.scaffold import build_scaffold
    from kforge_desktop.search.setup import seed_kernels

    written = set()
    for lang, name, folder in folders(root):
        if folder.name.endswith(".seed") or (lang, name) in written:
            continue
        problem = load_problem(problem_file(name, problems))
        scaffold = build_scaffold(problem, lang)
        seeds = seed_kernels(problem, scaffold, memory=False)
        if not seeds:
            print(f"{lang}/{name}: no seed")
            continue
        target = root / lang / f"{name}.seed" / "candidate_000.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(scaffold.module_source(seeds[0][1]))
        written.add((lang, name))
        print(f"{lang}/{name}: seed {seeds[0][0]} written to {target.relative_to(root)}")
    return 0


def _copy_of_seed(path: Path, lang: str, problem_name: str, problems: Path = PROBLEMS) -> bool | None:
    """True when the candidate's kernel is a seed a search places (an exemplar fitted to the problem, or the lowered
    reference where none fits) or the example its prompt showed, up to whitespace, comments, includes, helper order
    and local names (CUDA only): a copy, not a kernel of the model's own."""
    if lang != "cuda":
        return None
    from kforge_desktop.csource.normalize import normalize_code
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.answers import example_norm
    from kforge_desktop.search.exemplars import best_exemplar, seed_exemplars
    from kforge_desktop.search.scaffold import kernel_of_module
    from kforge_desktop.search.setup import seed_kernels, try_scaffold

    problem = load_problem(problem_file(problem_name, problems))
    scaffold = try_scaffold(problem, "cuda")
    kernel = kernel_of_module(path.read_text())
    if kernel is None or scaffold is None:
        return None
    shown = best_exemplar(scaffold, problem.source, memory=False)
    known = {example_norm(code, "cuda") for _, code in seed_exemplars(scaffold, problem.source, limit=3, memory=False)}
    known |= {example_norm(code, "cuda") for _, code, _ in seed_kernels(problem, scaffold, memory=False)}
    if shown is not None:
        known.add(example_norm(shown[1], "cuda"))
    return normalize_code(kernel, "cuda") in known


def _failed_builds(jsonl: Path | None, root: Path) -> list[Path]:
    """The samples whose verdict in ``jsonl`` is a compile error; with no verdicts yet (``-``), those whose CUDA
    kernel nvcc rejects here."""
    if jsonl is not None:
        return [root / v["candidate"] for v in map(json.loads, jsonl.read_text().splitlines())
                if v.get("status") == "compile_error"]
    from kforge_desktop.kernels.native import syntax_check
    from kforge_desktop.search.scaffold import PRELUDE, kernel_of_module

    return [f for lang, _name, folder in folders(root) if lang == "cuda" for f in sorted(folder.glob("candidate_*.py"))
            if syntax_check(PRELUDE["cuda"] + "\n" + (kernel_of_module(f.read_text()) or ""), "cuda")]


def reshape(jsonl: Path | None, root: Path, out: Path, problems: Path = PROBLEMS) -> int:
    """The candidates that failed to build (in ``jsonl``, or here when it is None), shaped again by the current code
    as a search shapes an answer (an edit merged into its seed, unreachable functions dropped, compiler-reported
    slips fixed); those that now build (nvcc here, no GPU needed) are written below ``out`` for another
    ``--evaluate``."""
    from kforge_desktop.csource.items import merge_functions, prune_unreachable
    from kforge_desktop.kernels.native import syntax_check
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.answers import autofix_kernel
    from kforge_desktop.search.scaffold import build_scaffold, kernel_of_module
    from kforge_desktop.search.setup import seed_kernels

    written = 0
    for f in _failed_builds(jsonl, root):
        problem = load_problem(problem_file(f.parent.name.split(".")[0], problems))
        scaffold = build_scaffold(problem, f.parts[-3])
        kernel = kernel_of_module(f.read_text()) or ""
        if "edit" in f.parent.name.split(".")[1:]:  # an edit: merged into the seed it changed, pruned again
            kernel = prune_unreachable(merge_functions(seed_kernels(problem, scaffold, memory=False)[0][1], kernel))
        kernel, note = autofix_kernel(scaffold, kernel)
        err = syntax_check(scaffold.kernel_file(kernel), scaffold.language)
        print(f"{'/'.join(f.parts[-3:])}: {note or 'no fix'}; {'builds' if not err else err.splitlines()[0][:100]}")
        if not err:
            target = out / "/".join(f.parts[-3:])
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(scaffold.module_source(kernel))
            written += 1
    print(f"wrote {written} candidates below {out}")
    return 0


_ASKED = re.compile(r"^\[\d+/\d+\] (?:([\w@]+): )?.*?\b(candidate_\d+)\.(?:py|answer\.txt)\b")
_WROTE = re.compile(r"^wrote \d+ of \d+ candidates to (\S+?);")


def requests(log: Path) -> dict[str, str]:
    """What each sample was asked, from the ``kforge sample`` lines kept in ``log`` (``kforge_sample_log.txt``:
    ``[2/3] fast_math@lowered_rows: candidate_001.py (...)``, then ``wrote 3 of 3 candidates to DIR; ...``):
    ``<language>/<folder>/candidate_NNN`` -> the directive (the function it was asked of left out; "whole" for a
    kernel from nothing). A log of several ``kforge sample`` runs side by side keeps each run's lines together."""
    asked: dict[str, str] = {}
    pending: list[tuple[str, str]] = []
    for line in log.read_text().splitlines():
        if m := _ASKED.match(line):
            pending.append((m.group(2), (m.group(1) or "whole").split("@")[0]))
        elif m := _WROTE.match(line):
            folder = "/".join(Path(m.group(1).rstrip("/")).parts[-2:])
            asked.update({f"{folder}/{name}": key for name, key in pending})
            pending = []
    return asked


def by_request(outcomes: dict[str, str], asked: dict[str, str]) -> str:
    """The table of samples per request: answers, correct, correct and not a seed or the example. ``outcomes``:
    ``<language>/<folder>/candidate_NNN`` -> "new", "copy" (correct, a seed's near-copy) or "failed"."""
    rows: dict[str, list[int]] = {}
    for cand, outcome in outcomes.items():
        seed = cand.split("/")[1].endswith(".seed")  # written by --add-seeds, not asked of the model
        row = rows.setdefault(asked.get(cand) or ("(the seed, --add-seeds)" if seed else "(not in the log)"), [0, 0, 0])
        row[0] += 1
        row[1] += outcome in ("new", "copy")
        row[2] += outcome == "new"
    out = ["| request | answers | correct | correct, not a seed or the example |", "|---|---|---|---|"]
    out += [f"| {key} | {n} | {ok} | {new} |" for key, (n, ok, new) in sorted(rows.items(), key=lambda kv: -kv[1][0])]
    return "\n".join(out)


def report(jsonl: Path, root: Path = SAMPLES, problems: Path = PROBLEMS) -> str:
    verdicts: dict[str, dict] = {}  # candidate path below the samples folder -> verdict
    for line in jsonl.read_text().splitlines():
        v = json.loads(line)
        path = Path(v["candidate"])
        verdicts["/".join(path.parts[-3:])] = v
    out = ["| language | problem | answers | with code | correct | correct, not a seed or the example | best vs eager | "
           "best vs torch.compile | what went wrong |",
           "|---|---|---|---|---|---|---|---|---|"]
    totals = [0, 0, 0, 0]
    outcomes: dict[str, str] = {}  # <language>/<folder>/candidate_NNN -> new | copy | failed
    for lang, name, folder in folders(root):
        files = sorted(folder.glob("candidate_*.py"))
        answers = len(files) + len(list(folder.glob("candidate_*.answer.txt")))
        outcomes.update({f"{lang}/{folder.name}/{f.name.split('.')[0]}": "failed"
                         for f in folder.glob("candidate_*.answer.txt")})
        ok, different, best, best_c, wrong = 0, 0, None, None, []
        for f in files:
            v = verdicts.get("/".join(f.parts[-3:]))
            key = f"{lang}/{folder.name}/{f.stem}"
            outcomes[key] = "failed"
            if v is None:
                wrong.append(f"{f.name}: no verdict (its problem's evaluation ran out of time)")
                continue
            if v.get("status") == "ok" and not v.get("library_calls"):
                ok += 1
                outcomes[key] = "copy"
                if _copy_of_seed(f, lang, name, problems) is not True:
                    different += 1
                    outcomes[key] = "new"
                s, c = v.get("speedup"), v.get("speedup_compile")
                best = max(best or 0.0, s or 0.0)
                best_c = max(best_c or 0.0, c or 0.0)
            else:
                wrong.append(f"{v.get('status')}: {(v.get('reason') or '')[:80]}")
        wrong += ["no usable code"] * len(list(folder.glob("candidate_*.answer.txt")))
        totals = [totals[0] + answers, totals[1] + len(files), totals[2] + ok, totals[3] + different]
        out.append(f"| {lang} | {folder.name} | {answers} | {len(files)} | {ok} | {different} | "
                   f"{f'{best:.2f}x' if best else '-'} | {f'{best_c:.2f}x' if best_c else '-'} | "
                   f"{'; '.join(wrong) or '-'} |")
    out.append(f"| all | | {totals[0]} | {totals[1]} | {totals[2]} | {totals[3]} | | | |")
    log = root / "kforge_sample_log.txt"
    if log.exists():  # the samples' requests, as ``kforge sample`` printed them
        out += ["", f"By request ({log.name}):", "", by_request(outcomes, requests(log))]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--evaluate", action="store_true", help="judge every sample on this machine's GPU")
    ap.add_argument("--report", default=None, metavar="JSONL", help="print the table from an --evaluate run")
    ap.add_argument("--runs", type=int, default=10, help="timed rounds per candidate (--evaluate)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per problem (--evaluate)")
    ap.add_argument("--samples", default=str(SAMPLES), help="the folder of <language>/<problem>[.what] sample folders")
    ap.add_argument("--problems", default=str(PROBLEMS),
                    help="the folder of the problems the samples were written for (or of folders of them)")
    ap.add_argument("--reshape", nargs=2, default=None, metavar=("JSONL", "OUT"),
                    help="shape the candidates that failed to build (JSONL's compile errors, or nvcc's here for -) "
                         "again with the current code; write those that build below OUT")
    ap.add_argument("--add-seeds", action="store_true",
                    help="write each sampled problem's first seed beside its samples (<problem>.seed), to be timed with them")
    args = ap.parse_args(argv)
    if args.add_seeds:
        return add_seeds(Path(args.samples), Path(args.problems))
    if args.evaluate:
        root = Path(args.samples)
        return evaluate(Path(os.environ.get("OUT", str(root))) / "gpu_samples.jsonl", args.runs, args.timeout, root,
                        Path(args.problems))
    if args.reshape:
        verdicts = None if args.reshape[0] == "-" else Path(args.reshape[0])
        return reshape(verdicts, Path(args.samples), Path(args.reshape[1]), Path(args.problems))
    if args.report:
        print(report(Path(args.report), Path(args.samples), Path(args.problems)))
        return 0
    ap.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
