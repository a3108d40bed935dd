"""How much a search's end-of-search re-timing was disturbed, read from recorded sessions.

For each problem of each session: the median eager time of the first measurements (each node timed
at its own moment) against the eager time of the re-timing at the end (the best nodes and the
reference timed together), and how many re-timed verdicts say they were disturbed. A re-timing
whose eager is several times the session's met a busy machine (another process on the cores): its
ratios compare the contenders at a moment nothing about the kernels explains.

    python benchmarks/busy_retimings.py benchmarks/results/generalize/generalize_r3*_sessions/*/*.kforge.gz
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def rows(path: Path):
    from kforge_desktop.store import SessionStore, readable, stored
    from kforge_desktop.store.session import StoreError

    with readable(stored(path)) as plain:
        try:
            store = SessionStore.open(plain)
        except StoreError:  # a search that never started: nothing recorded
            return
        try:
            for rec in store.problems():
                verdicts = [n.verdict for n in store.nodes(rec.id, with_source=False)
                            if n.verdict is not None and n.verdict.status == "ok" and n.verdict.baseline_ms]
                first = [v.baseline_ms for v in verdicts if not v.retimed]
                again = [v for v in verdicts if v.retimed]
                if first and again:  # the first figures of the nodes not re-timed (the others were replaced)
                    usual = statistics.median(first)
                    yield (path.name.split(".kforge")[0], rec.name, usual, again[0].baseline_ms,
                           sum(1 for v in again if v.disturbed), len(again))
        finally:
            store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sessions", nargs="+", type=Path)
    ap.add_argument("--busy", type=float, default=2.0, help="re-timed eager / usual eager above which it was busy")
    args = ap.parse_args()
    print("| session | eager, first measurements (median ms) | eager, re-timing (ms) | ratio | re-timed verdicts "
          "flagged |")
    print("|---|---|---|---|---|")
    busy = total = 0
    for path in args.sessions:
        for session, _name, usual, again, flagged, n in rows(path):
            ratio = again / usual
            total += 1
            busy += ratio > args.busy
            print(f"| {session} | {usual:.4f} | {again:.4f} | {ratio:.2f}x | {flagged}/{n} |")
    print(f"\n{busy} of {total} re-timings had an eager more than {args.busy:g}x the session's.")


if __name__ == "__main__":
    main()
