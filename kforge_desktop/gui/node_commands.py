"""What the node menu and shortcuts do: pin, unpin, exclude, expand from, edit as a child, copy.

The rules are the search's (``search/commands.py``), not the window's: while a search runs, each is
a command posted to the engine (which applies it even in the middle of a generation); with no
search running, pins and exclusions are the same command functions applied to the session store
(the store allows a view to write while no engine does), and "expand from here" or a hand-edited
child start the search with that command first in line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from PySide6.QtGui import QGuiApplication

from ..search import commands
from ..search import events as ev


class CommandHost(Protocol):
    """What the node commands use of the window they act in (the main window is one)."""

    session: object  # gui.session_model.SessionModel: store, light(), node(), refresh()
    controller: object  # gui.controller.SearchController: running, send()
    dialog_hook: Callable[[object], None] | None

    def status_message(self, text: str, ms: int = 8000) -> None: ...
    def report(self, sentence: str, detail: str = "", level: str = "error", dialog: bool = True) -> None: ...
    def start_search(self, first: list | None = None, evaluate_only: bool = False) -> bool: ...


class NodeCommands:
    def __init__(self, host: CommandHost) -> None:
        self.host = host

    @property
    def _session(self):
        return self.host.session

    def _running(self) -> bool:
        return self.host.controller.running

    def _after_write(self, message: str) -> None:
        self._session.refresh()
        self.host.status_message(message)

    def pin(self, node_id: int) -> None:
        node = self._session.light(node_id)
        if node is None:
            return
        if not commands.pinnable(node):
            self.host.report(commands.ONLY_CORRECT, level="warning")
            return
        if self._running():
            self.host.controller.send(ev.Pin(node_id))
            self.host.status_message(f"Pinning node #{node_id}…")
            return
        commands.pin(self._session.store, node.problem_id, node_id)
        self._after_write(f"Node #{node_id} pinned: it is the chosen kernel of this problem.")

    def unpin(self, node_id: int) -> None:
        node = self._session.light(node_id)
        if node is None:
            return
        if self._running():
            self.host.controller.send(ev.Unpin(node_id))
            return
        commands.unpin(self._session.store, node.problem_id, node_id)
        self._after_write(f"Node #{node_id} unpinned.")

    def exclude(self, node_id: int, excluded: bool = True) -> None:
        node = self._session.light(node_id)
        if node is None:
            return
        if self._running():
            self.host.controller.send(ev.Exclude(node_id, excluded))
            return
        commands.exclude(self._session.store, node.problem_id, node_id, excluded)
        self._after_write(f"Node #{node_id} {'excluded from' if excluded else 'included in'} the search.")

    def expand_from(self, node_id: int) -> None:
        if self._running():
            self.host.controller.send(ev.ExpandFrom(node_id))
            self.host.status_message(f"The next expansion starts from node #{node_id}.")
            return
        self.host.start_search(first=[ev.ExpandFrom(node_id)])

    def edit_as_child(self, node_id: int) -> None:
        from .dialogs.edit_child import EditChildDialog

        node = self._session.node(node_id)
        if node is None:
            return
        theme = getattr(self.host, "theme", None)
        dlg = EditChildDialog(self.host, node_id, node.source, node.language, bool(theme and theme.dark))
        if self.host.dialog_hook is not None:  # tests drive the dialog themselves
            self.host.dialog_hook(dlg)
        elif dlg.exec() != EditChildDialog.DialogCode.Accepted:
            return
        if dlg.result() != EditChildDialog.DialogCode.Accepted:
            return
        self.add_child(node_id, dlg.source(), dlg.note.text().strip())

    def add_child(self, parent_id: int, source: str, note: str = "") -> None:
        cmd = ev.AddChild(parent_id, source, note)
        if self._running():
            self.host.controller.send(cmd)
            self.host.status_message(f"Hand-edited child of #{parent_id} queued for evaluation.")
            return
        self.host.start_search(first=[cmd], evaluate_only=True)

    def copy_code(self, node_id: int) -> None:
        node = self._session.node(node_id)
        if node is None:
            return
        QGuiApplication.clipboard().setText(node.source or node.kernel_source)
        self.host.status_message(f"Copied the code of node #{node_id}.")
