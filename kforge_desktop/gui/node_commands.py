"""What the node menu and shortcuts do: pin, unpin, exclude, expand from, edit as a child, copy.

While a search runs, each is a command posted to the engine (it applies pins and exclusions even
in the middle of a generation). With no search running, pins and exclusions are written to the
session store directly (the store allows a view to write while no engine does), and "expand from
here" or a hand-edited child start the search with that command first in line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtGui import QGuiApplication

from ..search import events as ev

if TYPE_CHECKING:
    from .main_window import MainWindow


class NodeCommands:
    def __init__(self, window: MainWindow) -> None:
        self.w = window

    @property
    def _store(self):
        return self.w.session.store

    def _running(self) -> bool:
        return self.w.controller.running

    def _after_write(self, message: str) -> None:
        self.w.session.refresh()
        self.w.status_message(message)

    def pin(self, node_id: int) -> None:
        node = self.w.session.light(node_id)
        if node is None:
            return
        if node.origin == "root" or node.verdict is None or node.verdict.status != "ok":
            self.w.report("Only a correct candidate can be pinned.", level="warning")
            return
        if self._running():
            self.w.controller.send(ev.Pin(node_id))
            self.w.status_message(f"Pinning node #{node_id}…")
            return
        self._store.set_pinned(node_id, True)
        self._store.log_event(node.problem_id, "pin", f"node {node_id} pinned", payload={"node": node_id})
        self._after_write(f"Node #{node_id} pinned: it is the chosen kernel of this problem.")

    def unpin(self, node_id: int) -> None:
        node = self.w.session.light(node_id)
        if node is None:
            return
        if self._running():
            self.w.controller.send(ev.Unpin(node_id))
            return
        self._store.set_pinned(node_id, False)
        self._store.log_event(node.problem_id, "unpin", f"node {node_id} unpinned", payload={"node": node_id})
        self._after_write(f"Node #{node_id} unpinned.")

    def exclude(self, node_id: int, excluded: bool = True) -> None:
        node = self.w.session.light(node_id)
        if node is None:
            return
        if self._running():
            self.w.controller.send(ev.Exclude(node_id, excluded))
            return
        self._store.set_excluded(node_id, excluded)
        self._store.log_event(node.problem_id, "exclude", f"node {node_id} {'excluded' if excluded else 'included'}",
                              payload={"node": node_id, "excluded": excluded})
        self._after_write(f"Node #{node_id} {'excluded from' if excluded else 'included in'} the search.")

    def expand_from(self, node_id: int) -> None:
        if self._running():
            self.w.controller.send(ev.ExpandFrom(node_id))
            self.w.status_message(f"The next expansion starts from node #{node_id}.")
            return
        self.w.start_search(first=[ev.ExpandFrom(node_id)])

    def edit_as_child(self, node_id: int) -> None:
        from .dialogs.edit_child import EditChildDialog

        node = self.w.session.node(node_id)
        if node is None:
            return
        dlg = EditChildDialog(self.w, node_id, node.source)
        if self.w.dialog_hook is not None:  # tests drive the dialog themselves
            self.w.dialog_hook(dlg)
        elif dlg.exec() != EditChildDialog.DialogCode.Accepted:
            return
        if dlg.result() != EditChildDialog.DialogCode.Accepted:
            return
        self.add_child(node_id, dlg.source(), dlg.note.text().strip())

    def add_child(self, parent_id: int, source: str, note: str = "") -> None:
        cmd = ev.AddChild(parent_id, source, note)
        if self._running():
            self.w.controller.send(cmd)
            self.w.status_message(f"Hand-edited child of #{parent_id} queued for evaluation.")
            return
        self.w.start_search(first=[cmd], evaluate_only=True)

    def copy_code(self, node_id: int) -> None:
        node = self.w.session.node(node_id)
        if node is None:
            return
        QGuiApplication.clipboard().setText(node.source or node.kernel_source)
        self.w.status_message(f"Copied the code of node #{node_id}.")
