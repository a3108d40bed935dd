"""What the model's recorded answers look like around their code: would a grammar help?

Reads every LLM answer in the given session files and counts answers without a fenced code block,
answers with more than one, the share of characters before the first block and after it, answers
with a ``main()`` and answers cut off at the token limit. A grammar that forces one code block can
only remove what is outside the block. It also counts the answers that fell into a loop, where the
search's loop check (``llm.generator.repeating``, run as the answer streams in) would stop them,
and how many of those were correct kernels.

    python benchmarks/answer_shapes.py benchmarks/results/sessions/*.kforge.gz
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sessions", nargs="+")
    args = ap.parse_args(argv)
    from kforge_desktop.llm.generator import REPEAT_SPAN, repeating
    from kforge_desktop.store.archive import each_readable

    n = chars = before = after = no_fence = several = with_main = cut = loops = loops_ok = 0
    for path, plain in each_readable(args.sessions):
        db = sqlite3.connect(f"file:{plain}?mode=ro", uri=True)
        try:
            rows = db.execute("SELECT c.response, c.params, v.status FROM llm_calls c LEFT JOIN nodes n "
                              "ON n.llm_call_id = c.id LEFT JOIN verdicts v ON v.node_id = n.id").fetchall()
        except sqlite3.DatabaseError as err:
            print(f"skipped {path}: {err}")
            continue
        for response, params, status in rows:
            n += 1
            # the engine checks every 16 tokens; every 16 characters is at least as often
            if any(repeating(response[:i]) for i in range(2 * REPEAT_SPAN, len(response) + 1, 16)):
                loops += 1
                loops_ok += status == "ok"
            chars += len(response)
            with_main += "main(" in response
            cut += json.loads(params or "{}").get("finish_reason") == "length"
            start = response.find("```")
            if start < 0:
                no_fence += 1
                continue
            end = response.find("```", start + 3)
            before += start
            if end >= 0:
                after += len(response) - (end + 3)
                several += response.find("```", end + 3) >= 0
        db.close()
    print(f"{n} answers in {len(args.sessions)} sessions")
    print(f"without a fenced block: {no_fence}; with more than one: {several}")
    print(f"characters before the first block: {100 * before / max(1, chars):.1f}%; "
          f"after it: {100 * after / max(1, chars):.1f}%")
    print(f"with a main(): {with_main}; cut off at the token limit: {cut}")
    print(f"fell into a loop: {loops} (correct kernels among them: {loops_ok})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
