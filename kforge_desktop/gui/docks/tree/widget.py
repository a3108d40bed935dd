"""The Search tree dock: the tidy tree, a small toolbar (fit, zoom, follow, find node) and a legend.

New nodes are coalesced: updates arriving within ``DEBOUNCE_MS`` become one relayout, so a search
streaming many nodes per second costs one layout per tick, never one per node. The layout runs on
a helper thread (``build_geometry`` is pure) and the UI thread only swaps the result in, so the
window stays responsive however big the tree grows.
"""

from __future__ import annotations

import threading
import time

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QIntValidator, QPainter, QPixmap
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ...counts import count
from ...session_model import SessionModel
from ...status import CLASSES, describe
from ...theme import Theme
from ...widgets import ElidedLabel
from .actions import NodeCommandTarget, node_menu
from .scene import DerivedCache, Geometry, build_geometry
from .view import TreeView


class _Bridge(QObject):
    done = Signal(int, object)  # generation, Geometry (emitted by the layout thread, delivered queued)


class TreeWidget(QWidget):
    DEBOUNCE_MS = 120
    rebuilt = Signal(float)  # seconds the last rebuild took (for the benchmark and the log)

    def __init__(self, session: SessionModel, theme: Theme, commands: NodeCommandTarget | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.theme = theme
        self.commands = commands
        self.view = TreeView(self)
        self.view.setObjectName("treeView")
        self.view.tooltip_for = self._tooltip
        self.follow = True  # fit the whole tree after each update until the user zooms or pans
        self.last_rebuild_s = 0.0
        self.running = lambda: False  # the window says whether its search runs (tooltips say "queued" then)

        bar = QHBoxLayout()
        bar.setContentsMargins(4, 2, 4, 2)
        bar.setSpacing(2)
        self.fit_button = self._tool("Fit", "Fit the whole tree (F)", self._fit_clicked)
        self.zoom_in_button = self._tool("+", "Zoom in", lambda: self._zoom(1.25))
        self.zoom_out_button = self._tool("−", "Zoom out", lambda: self._zoom(0.8))
        self.follow_button = self._tool("Follow", "Keep the whole tree in view as it grows", self._toggle_follow)
        self.follow_button.setCheckable(True)
        self.follow_button.setChecked(True)
        self.best_button = self._tool("Best", "Go to the chosen node (pinned or fastest)", self._go_best)
        for b in (self.fit_button, self.zoom_in_button, self.zoom_out_button, self.follow_button, self.best_button):
            bar.addWidget(b)
        bar.addSpacing(8)
        self.find_edit = QLineEdit(self)
        self.find_edit.setObjectName("findNode")
        self.find_edit.setPlaceholderText("Find node #")
        self.find_edit.setValidator(QIntValidator(0, 2**31 - 1, self))
        self.find_edit.setMaximumWidth(110)
        self.find_edit.setClearButtonEnabled(True)
        self.find_edit.returnPressed.connect(self._find)
        bar.addWidget(self.find_edit)
        self.count_label = ElidedLabel(self)  # never widens the dock, however long the count gets
        self.count_label.setObjectName("treeCount")
        bar.addWidget(self.count_label, 1)

        self.legend = QLabel(self)
        self.legend.setObjectName("treeLegend")
        self.legend.setWordWrap(True)
        self.legend.setTextFormat(Qt.TextFormat.RichText)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addLayout(bar)
        lay.addWidget(self.view, 1)
        lay.addWidget(self.legend)

        self._cache = DerivedCache()
        self._generation = 0
        self._busy = False
        self._again = False
        self._bridge = _Bridge(self)
        self._bridge.done.connect(self._layout_done)

        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(self.DEBOUNCE_MS)
        self._timer.timeout.connect(self.rebuild)

        self.view.nodeClicked.connect(self._clicked)
        self.view.contextRequested.connect(self._context_menu)
        self.view.userZoomed.connect(self._user_took_view)
        session.nodesReset.connect(self._reset)
        session.nodesUpdated.connect(self._updated)
        session.selectionChanged.connect(self._selection_changed)
        theme.changed.connect(self._apply_theme)
        self._apply_theme()

    def _tool(self, text: str, tip: str, fn) -> QToolButton:
        b = QToolButton(self)
        b.setText(text)
        b.setToolTip(tip)
        b.setAutoRaise(True)
        b.clicked.connect(lambda _c=False: fn())
        return b

    # -- updates -----------------------------------------------------------------------------
    def _reset(self) -> None:
        self.follow = True
        self.follow_button.setChecked(True)
        self.view.tree.found = None
        self.find_edit.clear()
        self.find_edit.setStyleSheet("")
        self.find_edit.setToolTip("")
        self._generation += 1
        self._cache = DerivedCache()
        self.rebuild(sync=True)

    def _updated(self, _ids: list) -> None:
        if not self._timer.isActive():
            self._timer.start()

    def rebuild(self, sync: bool = False) -> None:
        """Lay out the current nodes: now (``sync``), or on the layout thread and swap in when done."""
        records = list(self.session.nodes().values())
        if sync:
            self._apply(build_geometry(records, DerivedCache() if self._busy else self._cache), time.perf_counter())
            return
        if self._busy:
            self._again = True
            return
        self._busy = True
        gen, cache = self._generation, self._cache
        threading.Thread(target=self._layout_job, args=(gen, records, cache), name="tree-layout", daemon=True).start()

    def _layout_job(self, gen: int, records: list, cache: DerivedCache) -> None:
        try:
            g = build_geometry(records, cache)
        except Exception:  # never lose the UI over a layout; the next update tries again
            g = None
        self._bridge.done.emit(gen, g)

    def _layout_done(self, gen: int, g: Geometry | None) -> None:
        self._busy = False
        if g is not None and gen == self._generation:
            self._apply(g, time.perf_counter())
        if self._again:
            self._again = False
            self.rebuild()

    def wait_idle(self, timeout_s: float = 5.0) -> bool:
        """Process events until no layout is running or queued (tests, benchmark, screenshots)."""
        from PySide6.QtWidgets import QApplication

        end = time.perf_counter() + timeout_s
        while (self._busy or self._again or self._timer.isActive()) and time.perf_counter() < end:
            QApplication.processEvents()
            time.sleep(0.002)
        return not (self._busy or self._again or self._timer.isActive())

    def _apply(self, g: Geometry, t_apply: float) -> None:
        nodes = self.session.nodes()
        tree = self.view.tree
        tree.set_geometry(g)
        best = self.session.best_id()
        pinned = self.session.pinned_id()
        tree.set_best_path(best, self.session.path_to(pinned or best))
        tree.selected = self.session.selected_id
        rect = tree.boundingRect()
        self.view.scene().setSceneRect(rect.adjusted(-200, -200, 200, 200))
        if self.follow:
            self.view.fit()
        self.count_label.setText(count(nodes.values()).phrase(self.session.budget()))
        self.view.viewport().update()
        self.last_rebuild_s = g.seconds + (time.perf_counter() - t_apply)
        self.rebuilt.emit(self.last_rebuild_s)

    def _selection_changed(self, node_id) -> None:
        self.view.tree.selected = node_id
        self.view.viewport().update()
        if node_id is not None and not self.follow:
            p = self.view.tree.position(node_id)
            if p is not None and not self.view.mapToScene(self.view.viewport().rect()).boundingRect().contains(p):
                self.view.centerOn(p)

    # -- user actions ------------------------------------------------------------------------
    def _clicked(self, node_id) -> None:
        if node_id is not None:
            self.session.select(node_id)

    def _context_menu(self, node_id: int, global_pos) -> None:
        node = self.session.light(node_id)
        if node is None or self.commands is None:
            return
        self.session.select(node_id)
        node_menu(self, node, self.commands).exec(global_pos)

    def _user_took_view(self) -> None:
        if self.follow:
            self.follow = False
            self.follow_button.setChecked(False)

    def _toggle_follow(self) -> None:
        self.follow = self.follow_button.isChecked()
        if self.follow:
            self.view.fit()

    def _fit_clicked(self) -> None:
        self.view.fit()

    def _zoom(self, f: float) -> None:
        self.view.zoom(f)
        self._user_took_view()

    def _go_best(self) -> None:
        nid = self.session.chosen_id()
        if nid is not None:
            self.find_node(nid)

    def _find(self) -> None:
        text = self.find_edit.text().strip().lstrip("#")
        if text.isdigit():
            self.find_node(int(text))

    def find_node(self, node_id: int) -> bool:
        """Center on, highlight and select a node by id; False (and a red field) when absent."""
        ok = node_id in self.session.nodes()
        self.find_edit.setStyleSheet("" if ok else "QLineEdit { border: 1px solid #d73027; }")
        if not ok:
            self.find_edit.setToolTip(f"There is no node #{node_id} in this problem's tree.")
            return False
        self.find_edit.setToolTip("")
        self._user_took_view()
        self.view.tree.found = node_id
        self.view.center_on_node(node_id)
        self.session.select(node_id)
        return True

    def _tooltip(self, node_id: int) -> str:
        n = self.session.light(node_id)
        if n is None:
            return ""
        lines = [describe(n, self.running())]
        v = n.verdict
        if v is not None and v.status == "ok" and v.latency_ms is not None:
            basis = f"{v.time_basis} time" if v.time_basis else "time"
            call = f"; one call {v.call_ms:.4g} ms" if v.call_ms is not None else ""
            lines.append(f"{basis}: {v.latency_ms:.4g} ms (eager {v.baseline_ms or 0:.4g} ms){call}")
            if v.speedup_compile:
                lines.append(f"{v.speedup_compile:.2f}× over torch.compile")
            if v.delegates:
                lines.append("calls PyTorch for part of the work: never chosen unless pinned")
        lines.append(f"visits {n.visits}, value {n.value:.3f}")
        if n.directive:
            lines.append(f"directive: {n.directive[:90]}")
        if n.pinned:
            lines.append("pinned: the chosen kernel")
        if n.excluded:
            lines.append("excluded from the search")
        return "\n".join(lines)

    # -- theme -------------------------------------------------------------------------------
    def _apply_theme(self, *_a) -> None:
        colors = self.theme.tree_colors()
        self.view.set_background(colors["background"])
        self.view.tree.set_theme(colors, self.theme.dark)
        self.legend.setText(self._legend_html())

    def _legend_html(self) -> str:
        """Every item is kept on one line (non-breaking spaces inside it): the legend wraps between
        items, never inside one."""
        dark = self.theme.dark

        def item(mark: str, color: str, label: str) -> str:
            return f"<span style='color:{color}'>{mark}</span>&nbsp;" + label.replace(" ", "&nbsp;")

        parts = [item("●", c.color(dark), c.label) for c in CLASSES if c.key != "root"]
        tc = self.theme.tree_colors()
        parts.append(item("◎", tc["pin"], "pinned"))
        parts.append(item("○", tc["best_edge"], "fastest win"))
        parts.append(item("━", tc["best_edge"], "path to the chosen node"))
        return "<small>" + " &nbsp; ".join(parts) + "</small>"


def status_icon(color: str, size: int = 12) -> QPixmap:
    pm = QPixmap(size, size)
    pm.fill(Qt.GlobalColor.transparent)
    p = QPainter(pm)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    p.setBrush(QColor(color))
    p.setPen(Qt.PenStyle.NoPen)
    p.drawEllipse(1, 1, size - 2, size - 2)
    p.end()
    return pm
