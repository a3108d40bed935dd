"""How often the default model carried out an edit, by the length of the entry point it was asked to change.

For every LLM edit in the given session files, the parent's ``kernel_forward`` is measured in non-blank lines
(from its opening brace) and the edit counted as correct or not, in buckets of ten lines. The recorded sessions
are the published ones, so anyone can rerun it:

    python benchmarks/edit_length.py benchmarks/results/generalize/*_sessions/dev/*.kforge.gz \
        benchmarks/results/generalize/generalize_r45da_stopped/*.kforge.gz
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_ENTRY = re.compile(r'extern\s+"C"[^{]*\bkernel_forward\s*\([^{]*\{')


def entry_lines(kernel: str) -> int | None:
    """Non-blank lines of a kernel's entry point from its opening brace on; None without one."""
    m = _ENTRY.search(kernel or "")
    return None if m is None else sum(1 for line in kernel[m.end():].split("\n") if line.strip())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sessions", nargs="+")
    args = ap.parse_args(argv)

    from kforge_desktop.store import SessionStore
    from kforge_desktop.store.archive import each_readable

    ok, asked = Counter(), Counter()
    for _path, plain in each_readable(args.sessions):
        store = SessionStore(plain)
        try:
            nodes = [n for rec in store.problems() for n in store.nodes(rec.id)]  # none: stopped before its problem
        finally:
            store.close()
        kernels = {n.id: n.kernel_source for n in nodes}
        for node in nodes:
            if node.origin != "llm" or node.kind != "edit" or node.verdict is None:
                continue
            n = entry_lines(kernels.get(node.parent_id, ""))
            if n is None:
                continue
            bucket = min(n // 10 * 10, 50)
            asked[bucket] += 1
            ok[bucket] += node.verdict.status == "ok"
    print("entry point lines  correct/edits")
    for b in sorted(asked):
        label = f"{b}+" if b == 50 else f"{b}-{b + 9}"
        print(f"{label:>17}  {ok[b]}/{asked[b]} ({ok[b] / asked[b]:.0%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
