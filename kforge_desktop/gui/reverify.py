"""Re-verify and re-time the chosen kernel of every problem on this machine.

Used when a session measured elsewhere is opened here: the chosen kernels are evaluated again (in
the evaluator's worker processes, never in the window's) and their verdicts replaced, so the
numbers the window shows are this machine's. Runs on its own thread with its own store connection.
"""

from __future__ import annotations

import traceback
from pathlib import Path

from PySide6.QtCore import QThread, Signal


class Reverifier(QThread):
    message = Signal(str)
    done = Signal(str, bool)  # summary, failed

    def __init__(self, parent, session_path: Path, device: str) -> None:
        super().__init__(parent)
        self.session_path = Path(session_path)
        self.device = device

    def run(self) -> None:
        from ..kernels.evaluator import Evaluator
        from ..search.engine import environment_record
        from ..search.tree import reward
        from ..store import SessionStore

        store = None
        try:
            store = SessionStore.open(self.session_path)
            done, lines = 0, []
            with Evaluator(device=self.device) as evaluator:
                for p in store.problems():
                    node = store.chosen_node(p.id)
                    if node is None:
                        continue
                    self.message.emit(f"Re-verifying node #{node.id} of {p.name} on this machine…")
                    verdict = evaluator.evaluate(p.to_problem(), node.source)
                    store.record_verdict(node.id, verdict, reward(verdict))
                    store.log_event(p.id, "reverified", f"node {node.id} re-verified here: {verdict.summary()}",
                                    "info" if verdict.status == "ok" else "warning", {"node": node.id})
                    lines.append(f"#{node.id}: {verdict.summary()}")
                    done += 1
            store.set_environment(environment_record(self.device))
            summary = (f"Re-verified {done} chosen kernel(s) on this machine: " + "; ".join(lines)) if done \
                else "No chosen kernel to re-verify yet."
            self.done.emit(summary, False)
        except Exception as err:
            self.done.emit(f"Re-verification failed: {err}", True)
            traceback.print_exc()
        finally:
            if store is not None:
                store.close()
