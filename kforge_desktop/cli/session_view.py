"""How a search reads in a terminal: the one-line progress bar, the tree, the closing table.

The engine's events drive ``ProgressLine`` (the CLI's listener, as the GUI's controller is the
window's); ``render_tree`` and the summaries read the session store, the one source of truth.
"""

from __future__ import annotations

import sys
import threading

from ..kernels.verdict import how_fast
from ..search.events import FINISH_REASONS


class ProgressLine:
    """One self-rewriting line on stderr: candidates, best speedup, tokens/s, phase; logs above it."""

    def __init__(self, quiet: bool = False, stream=None) -> None:
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last = ""
        self._lock = threading.Lock()

    def __call__(self, event) -> None:
        from ..search import events as ev

        if self.quiet:
            return
        with self._lock:
            if isinstance(event, ev.Progress):
                bar = self._bar(event.done, event.budget)
                best = f"{event.best_speedup:.2f}x" if event.best_speedup else "-"
                tps = f"{event.tokens_per_s:.1f} tok/s" if event.tokens_per_s else "- tok/s"
                line = (f"{bar} {event.done}/{event.budget or '∞'} candidates | best {best} | {tps} | "
                        f"{event.phase or 'idle'} | {event.elapsed_s:.0f}s")
                self._draw(line)
            elif isinstance(event, ev.Log) and event.level in ("warning", "error", "info"):
                if event.message.startswith("asking the model"):
                    return
                self._print(f"[{event.level}] {event.message}")

    @staticmethod
    def _bar(done: int, budget: int, width: int = 20) -> str:
        if not budget:
            return "[" + "." * width + "]"
        k = min(width, int(width * done / budget))
        return "[" + "#" * k + "." * (width - k) + "]"

    def _draw(self, line: str) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K" + line[:160])
        elif line.split("|")[0] != self._last.split("|")[0]:
            self.stream.write(line + "\n")
        self._last = line
        self.stream.flush()

    def _print(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K" + text + "\n" + self._last[:160])
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and not self.quiet:
            self.stream.write("\n")
            self.stream.flush()


def render_tree(store, problem_id: int) -> str:
    """The tree as indented text: status, speedup, kind and directive per node; the best path and the
    pin marked; then the productivity of the model on this problem."""
    from ..search.tree import Tree

    rec = store.problem(problem_id)
    tree = Tree(store.nodes(problem_id, with_source=False))
    best_path = set(store.best_path(problem_id))
    lines = [f"problem {problem_id}: {rec.name} ({rec.device}, {rec.language})"]
    if tree.root_id is None:
        return lines[0] + "\n  (empty)"

    def label(n) -> str:
        if n.origin == "root":
            return "reference (PyTorch eager)"
        sp = f" {n.speedup:.2f}x" if n.speedup is not None else ""
        marks = ("*" if n.id in best_path else "") + (" [pinned]" if n.pinned else "") + (
            " [excluded]" if n.excluded else "")
        dup = f" of #{n.duplicate_of}" if n.duplicate_of else ""
        return f"#{n.id} {n.status}{dup}{sp} {n.kind}:{n.directive or '-'} ({n.origin}){marks}"

    def walk(node_id: int, prefix: str, last: bool, top: bool) -> None:
        n = tree.node(node_id)
        branch = "" if top else ("└─ " if last else "├─ ")
        lines.append(f"  {prefix}{branch}{label(n)}")
        kids = tree.children(node_id, counted=False)
        for i, k in enumerate(kids):
            walk(k.id, prefix + ("" if top else ("   " if last else "│  ")), i == len(kids) - 1, False)

    walk(tree.root_id, "", True, True)
    path = store.best_path(problem_id)
    chosen = store.chosen_node(problem_id)
    if chosen:
        lines.append(f"best path: {' -> '.join('#' + str(i) for i in path)}  ({chosen.verdict.summary() if chosen.verdict else ''})")
    else:
        lines.append("best path: none (no correct candidate yet)")
    prod = store.productivity(problem_id)
    lines.append(f"model productivity: {prod.summary()}")
    if prod.suggestion:
        lines.append(f"hint: {prod.suggestion}")
    return "\n".join(lines)


def _best_rows(store, problem_id: int, limit: int = 5):
    nodes = [n for n in store.nodes(problem_id, with_source=False) if n.speedup is not None]
    nodes.sort(key=lambda n: (-n.speedup, n.id))
    return nodes[:limit]


def summary_table(store, problem_id: int, reason: str) -> str:
    rows = _best_rows(store, problem_id)
    split = store.time_split(problem_id)
    prod = store.productivity(problem_id)
    out = [f"search finished: {FINISH_REASONS.get(reason, reason)}; session: {store.path}"]
    if rows:
        basis = next((n.verdict.time_basis for n in rows if n.verdict.time_basis), "")
        unit = {"device": "device ms", "wall": "wall ms"}.get(basis, "ms")
        out.append(f"{'node':>6}  {'origin':<6} {'kind':<7} {'speedup':>8} {'vs compile':>10} {unit:>11}  directive")
        for n in rows:
            v = n.verdict
            comp = f"{v.speedup_compile:.2f}x" if v.speedup_compile else "-"
            sig = ("r" if v.retimed else "") + ("" if v.significant else "~")
            out.append(f"{'#' + str(n.id):>6}  {n.origin:<6} {n.kind:<7} {v.speedup:>7.2f}x{sig:<1} {comp:>10} "
                       f"{(v.latency_ms or 0):>11.4f}  {n.directive}")
        out.append("(~ = within the measurement noise; speedups on " + (basis or "measured") + " time"
                   + ("; r = re-timed together at the end" if any(n.verdict.retimed for n in rows) else "") + ")")
    else:
        out.append("no correct candidate was found.")
    chosen = store.chosen_node(problem_id)
    if chosen:
        out.append("chosen: " + chosen_sentence(chosen, rows))
    out.append(f"model: {prod.summary()}")
    if prod.suggestion:
        out.append(f"hint: {prod.suggestion}")
    if split.llm_calls:
        tps = f"{split.tokens_per_s:.1f}" if split.tokens_per_s else "-"
        out.append(f"time: LLM {split.llm_s:.0f}s ({tps} tok/s), build {split.build_s:.0f}s, verify "
                   f"{split.verify_s:.0f}s, timing {split.time_s:.0f}s")
    return "\n".join(out)


def chosen_sentence(chosen, rows) -> str:
    """The closing line a newcomer reads first: which kernel won, by how much, and who wrote it."""
    from ..search.setup import LOWERED_SEED  # here, not at import: it loads torch

    v = chosen.verdict
    who = {"seed": "a bundled starting kernel (the model did not write it)", "llm": "written by the model",
           "user": "your hand-edited kernel"}.get(chosen.origin, chosen.origin)
    if chosen.origin == "seed" and chosen.directive == LOWERED_SEED:
        who = "the reference lowered to plain loops (the model did not write it)"
    head = f"node #{chosen.id}{' (pinned)' if chosen.pinned else ''}, {who}"
    if v is None or v.speedup is None:
        return head
    basis = f" in {v.time_basis} time" if v.time_basis else ""
    if not v.significant:
        gain = f"{v.speedup:.2f}x against eager{basis}: no measured gain (within the noise)"
    else:
        gain = f"{how_fast(v.speedup)} than eager{basis}"
    if v.speedup_compile:
        gain += f", {v.speedup_compile:.2f}x against torch.compile"
    if v.retimed:
        gain += f" (re-timed with the best {v.retimed} together)"
    line = f"{head}: {gain}"
    made = [n for n in rows if n.origin == "llm"]
    if chosen.origin == "seed" and made:
        line += f"; the model's best, #{made[0].id}, reached {made[0].speedup:.2f}x"
    elif chosen.origin == "seed":
        line += "; none of the model's candidates was correct and faster"
    return line


def summary_json(store, problem_id: int, reason: str) -> dict:
    chosen = store.chosen_node(problem_id)
    prod = store.productivity(problem_id)
    return {
        "session": str(store.path),
        "problem": store.problem(problem_id).name,
        "reason": reason,
        "best_node": chosen.id if chosen else None,
        "pinned": bool(chosen and chosen.pinned),
        "verdict": chosen.verdict.to_dict() if chosen and chosen.verdict else None,
        "candidates": store.candidates_done(problem_id),
        "productivity": {"candidates": prod.candidates, "built": prod.built, "correct": prod.correct,
                         "self_made": prod.self_made, "no_code": prod.no_code, "duplicates": prod.duplicates,
                         "suggestion": prod.suggestion},
    }
