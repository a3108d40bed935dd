"""How often the model carried out each kind of request correctly, over recorded session files.

The "fix it" repair record in ``docs/benchmarks.md`` (the reason for ``search/planner.py``'s
``repair_patience``) comes from this count over the searches on the first three problems:

    python benchmarks/directive_record.py benchmarks/results/sessions/*.kforge.gz \
        benchmarks/results/search_36d1137/sessions/*.kforge.gz benchmarks/results/search_346744e_partial/sessions/*.kforge.gz \
        benchmarks/results/search/sessions/*.kforge.gz benchmarks/results/search_648317c/sessions/*.kforge.gz

The priors on the C++ directives (``search/directives.py``) are its ``edit`` rows with the dev half
of ``benchmarks/problems_generalize`` added (never the test half): the same command with
``benchmarks/results/generalize/*_sessions/dev/*.kforge.gz`` after the others.

Per (kind, directive): correct / evaluated (an answer without code counts as a failure), and the
duplicates (answers that repeated an earlier kernel) beside them. Then per kind of request: the mean
prompt and answer tokens, and the answers cut off at the token limit.

``--speed``: per edit directive, how fast its correct edits ran against the kernel they edited (the
ratio of their speedups over eager, both measured in the search), split by whether the edited function
already summed in an OpenMP SIMD ``+`` reduction (the command is the priors' one above with ``--speed``; such
unroll edits are slower but mostly correct, which is why they are asked again: ``search.applicability.unrollable``).

``--passes``: the single-pass edits by how many loops of the kernel they edited hold no other loop (its passes over
a row), correct / evaluated (the reason ``single_pass`` is not asked of a kernel of one pass).

``--after-repeats``: the answers to edits and to kernels from nothing, by how many of the node's answers just before
them (repairs aside) repeated an earlier kernel: none, the newest one, the newest two (the reason a search whose
other nodes repeat asks them again rather than ask its root for kernels from nothing: ``search.strategies``).

``--simd-loops``: the C++ SIMD edits (``simd_inner``) by whether the function they edited had a loop holding no other
loop without a ``simd`` pragma (a fill aside), or only outer loops without one (which ``search.applicability`` counts
today): correct / evaluated and the answers that repeated an earlier kernel; and the answers of any request written
with x86 vector intrinsics (``__m512``, ``_mm512_*``), by their outcome.

``--asked-again``: the answers that repeated an earlier kernel (and how many repeated the node asked, unchanged); a
question asked again of the same node (the same kind; any repair, or the same directive) by whether an earlier answer
to it had repeated; and every answer by the temperature it was asked at: repeats, correct / evaluated (what a
question asked again hotter did, and why the search no longer does: ``docs/benchmarks.md``, thirty-ninth measurement).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kforge_desktop.store.archive import each_readable  # noqa: E402


def _queries(sessions: list[str], *sql: str):
    """Per readable session file: the rows of each query in ``sql`` (a file that is not a session is skipped, said)."""
    for path, plain in each_readable(sessions):
        db = sqlite3.connect(f"file:{plain}?mode=ro", uri=True)
        try:
            rows = [db.execute(q).fetchall() for q in sql]
        except sqlite3.DatabaseError as err:
            print(f"skipped {path}: {err}")
            continue
        finally:
            db.close()
        yield rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sessions", nargs="+")
    ap.add_argument("--speed", action="store_true", help="correct edits' speed against the kernel they edited")
    ap.add_argument("--passes", action="store_true", help="single-pass edits by the passes of the kernel they edited")
    ap.add_argument("--after-repeats", action="store_true",
                    help="edits and kernels from nothing by the repeats their node answered just before")
    ap.add_argument("--simd-loops", action="store_true",
                    help="SIMD edits by whether an innermost loop of the edited function lacked the pragma")
    ap.add_argument("--asked-again", action="store_true",
                    help="questions asked again after a repeated answer, and answers by temperature")
    args = ap.parse_args(argv)
    if args.asked_again:
        return asked_again(args.sessions)
    if args.simd_loops:
        return simd_loops(args.sessions)
    if args.after_repeats:
        return after_repeats(args.sessions)
    if args.speed:
        return speed(args.sessions)
    if args.passes:
        return passes(args.sessions)
    table: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    sizes: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # answers, prompt tokens, answer tokens, cut
    for rows, calls in _queries(
            args.sessions,
            "SELECT n.kind, n.directive, n.state, v.status FROM nodes n LEFT JOIN verdicts v "
            "ON v.node_id = n.id WHERE n.origin = 'llm'",
            "SELECT n.kind, c.prompt_tokens, c.completion_tokens, json_extract(c.params, "
            "'$.finish_reason') FROM nodes n JOIN llm_calls c ON c.id = n.llm_call_id"):
        for kind, prompt_tokens, answer_tokens, finish in calls:
            row = sizes[kind]
            row[0] += 1
            row[1] += prompt_tokens or 0
            row[2] += answer_tokens or 0
            row[3] += finish == "length"
        for kind, directive, state, status in rows:
            key = (kind, directive.split("@")[0].split(":")[0])
            if state == "duplicate":
                table[key][2] += 1
            elif status is not None or state == "no_code":
                table[key][1] += 1
                table[key][0] += status == "ok"
    print(f"{'kind':<8} {'directive':<22} correct/evaluated  duplicates")
    for (kind, directive), (ok, n, dup) in sorted(table.items()):
        print(f"{kind:<8} {directive:<22} {ok:>3}/{n:<3} {100 * ok / max(1, n):4.0f}%   {dup}")
    print(f"\n{'kind':<8} answers  mean prompt tokens  mean answer tokens  cut off at the limit")
    for kind, (n, prompt_tokens, answer_tokens, cut) in sorted(sizes.items()):
        print(f"{kind:<8} {n:>7}  {prompt_tokens / n:>18.0f}  {answer_tokens / n:>18.0f}  {cut:>20}")
    return 0


def speed(sessions: list[str]) -> int:
    """Per edit directive and whether the edited function had a SIMD sum: the correct edits' speed over
    the kernel they edited (median, and how many reached 1.05x)."""
    import re
    import statistics

    from kforge_desktop.csource.items import split_items

    ratios: dict[tuple[str, bool], list[float]] = defaultdict(list)
    for speedup, source, edits in _queries(
            sessions, "SELECT node_id, speedup FROM verdicts WHERE status = 'ok'", "SELECT id, kernel_source FROM nodes",
            "SELECT id, parent_id, directive FROM nodes WHERE origin = 'llm' AND kind = 'edit'"):
        speedup, source = dict(speedup), dict(source)
        for node, parent, directive in edits:
            if not speedup.get(node) or not speedup.get(parent):
                continue
            key, _, target = (directive or "").partition("@")
            edited = next((it.text for it in split_items(source.get(parent) or "")
                           if it.kind == "function" and it.name == (target or "kernel_forward")), "")
            simd_sum = bool(re.search(r"simd[^\n]*reduction\s*\(\s*\+", edited))
            ratios[(key, simd_sum)].append(speedup[node] / speedup[parent])
    print(f"{'directive':<22} {'edited function':<24} correct edits  median vs the kernel edited  >= 1.05x")
    for (key, simd_sum), r in sorted(ratios.items()):
        where = "sums in a SIMD reduction" if simd_sum else "no SIMD sum"
        print(f"{key:<22} {where:<24} {len(r):>13}  {statistics.median(r):>26.2f}x  {sum(x >= 1.05 for x in r):>8}")
    return 0


def passes(sessions: list[str]) -> int:
    """The C++ single-pass edits, correct / evaluated, by the innermost loops of the kernel they edited."""
    from kforge_desktop.csource.mends import innermost_loops

    table: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for (rows,) in _queries(sessions, "SELECT p.kernel_source, v.status FROM nodes n JOIN nodes p ON p.id = n.parent_id "
                            "JOIN verdicts v ON v.node_id = n.id WHERE n.origin = 'llm' AND n.kind = 'edit' "
                            "AND n.language = 'cpp' AND n.directive LIKE 'single_pass%'"):
        for parent, status in rows:
            row = table[innermost_loops(parent)]
            row[0] += status == "ok"
            row[1] += 1
    print("loops holding no other loop in the edited kernel  correct/evaluated")
    for n, (ok, total) in sorted(table.items()):
        print(f"{n:>48}  {ok:>3}/{total}")
    return 0


def after_repeats(sessions: list[str]) -> int:
    """Per kind (edit, whole) and the node's newest earlier answers (repairs aside): none of them repeated, the newest
    one did, the newest two did; the answers that repeated, and correct / evaluated of the others."""
    table: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])  # correct, evaluated, repeats
    for (rows,) in _queries(sessions, "SELECT n.parent_id, n.kind, n.state, v.status FROM nodes n LEFT JOIN verdicts v "
                            "ON v.node_id = n.id WHERE n.origin = 'llm' AND n.kind IN ('edit', 'whole') ORDER BY n.id"):
        before: dict[int, list[bool]] = defaultdict(list)  # per parent: whether each earlier answer repeated
        for parent, kind, state, status in rows:
            seen = before[parent]
            after = "two repeats" if seen[-2:] == [True, True] else "one repeat" if seen[-1:] == [True] else "no repeat"
            row = table[(kind, after)]
            if state == "duplicate":
                row[2] += 1
            elif status is not None or state == "no_code":
                row[0] += status == "ok"
                row[1] += 1
            seen.append(state == "duplicate")
    print(f"{'kind':<6} {'just before':<12} correct/evaluated  repeats")
    for (kind, after), (ok, n, dup) in sorted(table.items()):
        print(f"{kind:<6} {after:<12} {ok:>5}/{n:<5} {100 * ok / max(1, n):4.0f}%  {dup:>7}")
    return 0


def asked_again(sessions: list[str]) -> int:
    """Repeats, questions asked again after a repeat or after a new answer, and answers by temperature."""
    again: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # answers, repeats
    hot: dict[float, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # answers, repeats, correct, evaluated
    repeats = of_parent = answers = 0
    for (rows,) in _queries(sessions, "SELECT n.parent_id, n.kind, n.directive, n.state, n.duplicate_of, v.status, "
                            "json_extract(c.params, '$.temperature') FROM nodes n LEFT JOIN verdicts v ON v.node_id = n.id "
                            "LEFT JOIN llm_calls c ON c.id = n.llm_call_id WHERE n.origin = 'llm' ORDER BY n.id"):
        asked: dict[tuple, list[bool]] = defaultdict(list)  # per question: whether each answer repeated
        for parent, kind, directive, state, duplicate_of, status, temperature in rows:
            repeat = state == "duplicate"
            answers += 1
            repeats += repeat
            of_parent += repeat and duplicate_of == parent
            earlier = asked[(parent, kind, "" if kind == "repair" else directive)]
            if earlier:
                row = again["after a repeat" if any(earlier) else "after new answers"]
                row[0] += 1
                row[1] += repeat
            earlier.append(repeat)
            row = hot[temperature]
            row[0] += 1
            row[1] += repeat
            if not repeat and (status is not None or state == "no_code"):
                row[2] += status == "ok"
                row[3] += 1
    print(f"answers {answers}, repeats {repeats} ({100 * repeats / max(1, answers):.0f} %), "
          f"{of_parent} of them the node asked, unchanged")
    print(f"{'asked again':<18} answers  repeats")
    for when, (n, dup) in sorted(again.items()):
        print(f"{when:<18} {n:>7}  {dup:>7} ({100 * dup / max(1, n):.0f} %)")
    print(f"{'temperature':<12} answers  repeats  correct/evaluated")
    for temperature, (n, dup, ok, evaluated) in sorted(hot.items(), key=lambda kv: kv[0] or 0.0):
        print(f"{temperature!s:<12} {n:>7}  {dup:>7}  {ok:>5}/{evaluated:<5} {100 * ok / max(1, evaluated):4.0f}%")
    return 0


def simd_loops(sessions: list[str]) -> int:
    """The SIMD edits by whether the edited function had an innermost loop without the pragma; the answers written
    with x86 vector intrinsics, by outcome."""
    import re

    from kforge_desktop.csource.comments import strip_cpp_comments
    from kforge_desktop.csource.items import split_items
    from kforge_desktop.search.applicability import loop_without_simd

    table: dict[bool, list[int]] = defaultdict(lambda: [0, 0, 0])  # correct, evaluated, repeats
    intrinsics: dict[str, int] = defaultdict(int)
    for source, answers in _queries(
            sessions, "SELECT id, kernel_source FROM nodes",
            "SELECT n.parent_id, n.directive, n.state, v.status, n.kernel_source FROM nodes n LEFT JOIN verdicts v "
            "ON v.node_id = n.id WHERE n.origin = 'llm' AND n.language = 'cpp'"):
        source = dict(source)
        for parent, directive, state, status, kernel in answers:
            outcome = "repeat" if state == "duplicate" else status or state
            if kernel and re.search(r"\b__m(?:128|256|512)|\b_mm(?:256|512)?_", kernel):
                intrinsics[outcome] += 1
            key, _, target = (directive or "").partition("@")
            if key != "simd_inner" or outcome not in ("repeat", "no_code") and status is None:
                continue
            edited = source.get(parent) or ""
            if target:
                edited = next((it.text for it in split_items(edited) if it.kind == "function" and it.name == target),
                              edited)
            row = table[loop_without_simd(strip_cpp_comments(edited), innermost=True)]
            if outcome == "repeat":
                row[2] += 1
            else:
                row[0] += status == "ok"
                row[1] += 1
    print(f"{'the edited function':<52} correct/evaluated  repeats")
    for lacking, (ok, n, dup) in sorted(table.items(), reverse=True):
        what = "an innermost loop without the pragma" if lacking else "pragmas on every innermost loop (outer ones not)"
        print(f"{what:<52} {ok:>5}/{n:<5} {100 * ok / max(1, n):4.0f}%  {dup:>7}")
    print("answers with x86 vector intrinsics: " + ", ".join(f"{k} {v}" for k, v in sorted(intrinsics.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
