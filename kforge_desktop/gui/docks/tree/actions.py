"""The node context menu (tree and plot share it): pin, exclude, expand, edit as a child, copy."""

from __future__ import annotations

from typing import Protocol

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QWidget

from ....search.events import NodeRecord


class NodeCommandTarget(Protocol):
    """What the menu calls; the main window's ``NodeCommands`` implements it."""

    def pin(self, node_id: int) -> None: ...
    def unpin(self, node_id: int) -> None: ...
    def exclude(self, node_id: int, excluded: bool) -> None: ...
    def expand_from(self, node_id: int) -> None: ...
    def edit_as_child(self, node_id: int) -> None: ...
    def copy_code(self, node_id: int) -> None: ...


def node_menu(parent: QWidget, node: NodeRecord, target: NodeCommandTarget) -> QMenu:
    menu = QMenu(parent)
    menu.setObjectName("nodeMenu")
    title = menu.addAction(f"Node #{node.id}")
    title.setEnabled(False)
    menu.addSeparator()
    candidate = node.origin != "root"
    if node.pinned:
        _add(menu, "Unpin", lambda: target.unpin(node.id), "unpin")
    else:
        a = _add(menu, "Pin as the chosen kernel", lambda: target.pin(node.id), "pin")
        a.setEnabled(candidate and node.verdict is not None and node.verdict.status == "ok")
        if not a.isEnabled():
            a.setToolTip("Only a correct candidate can be pinned.")
    if node.excluded:
        _add(menu, "Include again", lambda: target.exclude(node.id, False), "include")
    else:
        _add(menu, "Exclude from the search", lambda: target.exclude(node.id, True), "exclude")
    _add(menu, "Expand from here", lambda: target.expand_from(node.id), "expand").setEnabled(not node.excluded)
    menu.addSeparator()
    _add(menu, "Edit and evaluate as a new child…", lambda: target.edit_as_child(node.id), "edit")
    _add(menu, "Copy code", lambda: target.copy_code(node.id), "copy")
    menu.setToolTipsVisible(True)
    return menu


def _add(menu: QMenu, text: str, fn, name: str) -> QAction:
    a = menu.addAction(text)
    a.setObjectName(f"node_{name}")
    a.triggered.connect(lambda _checked=False: fn())
    return a
