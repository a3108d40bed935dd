"""The GUI's window onto one open session file.

The session store is the single source of truth. This object holds the open ``SessionStore``, the
current problem and the selected node, and keeps a light, read-through index of the current
problem's nodes (no sources) that it refreshes from the store by revision (``changed_since``)
whenever the engine reports progress, and on a slow poll so a search run by ``kforge optimize`` in
a terminal shows up live too. Views never write this index; they ask for full records (with
sources) from the store when they need them.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal

from ..search.events import NodeRecord
from ..store.records import ProblemRecord
from ..store.session import SessionStore


class SessionModel(QObject):
    sessionChanged = Signal()  # a session was opened or closed
    problemChanged = Signal(object)  # current problem id (or None)
    nodesReset = Signal()  # the node index was reloaded from scratch
    nodesUpdated = Signal(list)  # ids added or changed since the last refresh
    selectionChanged = Signal(object)  # selected node id (or None)
    problemsUpdated = Signal()  # per-problem summaries (targets table) may have changed

    POLL_MS = 1000

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.store: SessionStore | None = None
        self.problem_id: int | None = None
        self.selected_id: int | None = None
        self._nodes: dict[int, NodeRecord] = {}
        self._rev = 0
        self._full_cache: tuple[int, int, NodeRecord] | None = None  # (id, rev seen, record)
        self._poll = QTimer(self)
        self._poll.setInterval(self.POLL_MS)
        self._poll.timeout.connect(self.refresh)

    # -- opening -----------------------------------------------------------------------------
    @property
    def path(self) -> Path | None:
        return self.store.path if self.store else None

    def attach(self, store: SessionStore, problem_id: int | None = None) -> None:
        """Show ``store`` (already open); picks its first problem unless one is given."""
        self.close()
        self.store = store
        self.sessionChanged.emit()
        problems = store.problems()
        if problem_id is None and problems:
            problem_id = problems[0].id
        self.set_problem(problem_id)
        self._poll.start()

    def close(self) -> None:
        self._poll.stop()
        had = self.store is not None
        self.store = None
        self.problem_id = None
        self._nodes = {}
        self._rev = 0
        self.selected_id = None
        self._full_cache = None
        if had:
            self.sessionChanged.emit()
            self.problemChanged.emit(None)
            self.nodesReset.emit()
            self.selectionChanged.emit(None)

    # -- problems ----------------------------------------------------------------------------
    def problems(self) -> list[ProblemRecord]:
        return self.store.problems() if self.store else []

    def problem(self) -> ProblemRecord | None:
        if self.store is None or self.problem_id is None:
            return None
        return self.store.problem(self.problem_id)

    def set_problem(self, problem_id: int | None) -> None:
        if self.store is None:
            return
        self.problem_id = problem_id
        self.selected_id = None
        self._reload()
        self.problemChanged.emit(problem_id)
        self.nodesReset.emit()
        self.selectionChanged.emit(None)

    def _reload(self) -> None:
        self._nodes = {}
        self._rev = 0
        if self.store is None or self.problem_id is None:
            return
        self._rev = self.store.revision()
        self._nodes = {n.id: n for n in self.store.nodes(self.problem_id, with_source=False)}

    def budget(self) -> int | None:
        """The current problem's own candidate budget, as its search state stores it."""
        if self.store is None or self.problem_id is None:
            return None
        try:
            state = self.store.search_state(self.problem_id)
        except Exception:
            return None
        return state.budget_candidates if state else None

    # -- nodes -------------------------------------------------------------------------------
    def nodes(self) -> dict[int, NodeRecord]:
        """The current problem's nodes without sources, by id, in creation order (read-only)."""
        return self._nodes

    def light(self, node_id: int) -> NodeRecord | None:
        return self._nodes.get(node_id)

    def node(self, node_id: int | None) -> NodeRecord | None:
        """A full record (with sources) straight from the store."""
        if node_id is None or self.store is None:
            return None
        cached = self._full_cache
        if cached and cached[0] == node_id and cached[1] == self._rev:
            return cached[2]
        rec = self.store.node(node_id)
        if rec is not None:
            self._full_cache = (node_id, self._rev, rec)
        return rec

    def refresh(self) -> list[int]:
        """Pull what changed in the store since the last look; announce it. Cheap when nothing did."""
        if self.store is None or self.problem_id is None:
            return []
        try:
            changed, self._rev = self.store.changed_since(self.problem_id, self._rev)
        except Exception:  # a locked or vanished file: try again on the next tick
            return []
        if not changed:
            return []
        for n in changed:
            self._nodes[n.id] = n
        ids = [n.id for n in changed]
        self.nodesUpdated.emit(ids)
        self.problemsUpdated.emit()
        return ids

    def best_id(self) -> int | None:
        """The fastest measured win (``status.is_win``): a speedup within the noise, a disturbed
        measurement or a kernel that hands work to PyTorch is never "the best" by itself."""
        from .status import is_win

        best = None
        for n in self._nodes.values():
            if is_win(n) and (best is None or n.speedup > best[0]):
                best = (n.speedup, n.id)
        return best[1] if best else None

    def pinned_id(self) -> int | None:
        return next((n.id for n in self._nodes.values() if n.pinned), None)

    def chosen_id(self) -> int | None:
        """The chosen kernel: the pinned node, else the fastest measured win."""
        return self.pinned_id() or self.best_id()

    def path_to(self, node_id: int | None) -> list[int]:
        out: list[int] = []
        seen: set[int] = set()
        while node_id is not None and node_id in self._nodes and node_id not in seen:
            seen.add(node_id)
            out.append(node_id)
            node_id = self._nodes[node_id].parent_id
        return out[::-1]

    # -- selection ---------------------------------------------------------------------------
    def select(self, node_id: int | None) -> None:
        """Select a node everywhere (tree, plot, code, inspector)."""
        if node_id is not None and node_id not in self._nodes:
            return
        if node_id == self.selected_id:
            return
        self.selected_id = node_id
        self.selectionChanged.emit(node_id)
