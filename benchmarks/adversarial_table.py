"""The verdict table of the adversarial suite (tests/candidates/<device>/) as Markdown.

    python benchmarks/adversarial_table.py --device cpu [--out table.md]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    from kforge_desktop.kernels.evaluator import Evaluator
    from kforge_desktop.kernels.options import EvalOptions
    from kforge_desktop.problem.problem import load_problem

    folder = REPO / "tests" / "candidates" / ("cuda" if args.device == "cuda" else "cpu")
    problem = load_problem(REPO / "resources" / "problems" / "rms_norm.py")
    opts = EvalOptions(compare_compile=False, timed_runs=30, run_timeout_s=30)
    files = sorted(folder.glob("*.py"))
    lines = ["| candidate | what it does | expected | verdict | reason |", "|---|---|---|---|---|"]
    passed = 0
    with Evaluator(args.device, options=opts, build_cache=tempfile.mkdtemp()) as ev:
        futs = [(f, ev.submit(problem, f.read_text())) for f in files]
        for f, fut in futs:
            v = fut.result()
            head = f.read_text().splitlines()[0]
            exp, why = head.split()[2], head.split("--", 1)[1].strip()
            passed += v.status == exp
            mark = "" if v.status == exp else " **(mismatch)**"
            reason = v.reason.replace("|", "/")[:140]
            lines.append(f"| {f.stem} | {why} | {exp} | {v.status}{mark} | {reason} |")
    lines.append(f"\n{passed} of {len(files)} candidates got the expected verdict on {args.device}.")
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0 if passed == len(files) else 1


if __name__ == "__main__":
    sys.exit(main())
