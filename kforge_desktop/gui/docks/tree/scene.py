"""The search tree as one QGraphicsItem that paints every node and edge in a few batched calls.

Why one item and not one per node: with thousands of nodes, per-item paint dispatch and scene
indexing cost more than the drawing. Here nodes of one colour and size are a single ``drawPoints``
with a round pen, edges are one path, and only the few marked nodes (selected, pinned, best,
excluded) and the labels of visible nodes are drawn one by one. Rebuilding after new nodes arrive
is a layout (``layout.tidy_layout``) plus filling a few polygons, done by ``build_geometry`` — a
pure function that the dock runs off the UI thread, so a big tree never freezes the window.
"""

from __future__ import annotations

import bisect
import math
import time
from dataclasses import dataclass, field

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QPainter, QPainterPath, QPen, QPolygonF
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem

from ...status import BY_KEY, classify, short_label
from .layout import tidy_layout

DX = 54.0  # horizontal gap between neighbours
DY = 78.0  # vertical gap between depths
R_MIN, R_MAX = 8.0, 18.0


def radius_for(visits: int) -> float:
    return min(R_MAX, R_MIN + 2.5 * math.log2(1 + max(0, visits)))


@dataclass
class _Drawn:
    pos: QPointF
    r: float
    cls: str
    label: str


@dataclass
class Geometry:
    """Everything ``TreeItem`` paints, computed by ``build_geometry`` (any thread)."""

    drawn: dict[int, _Drawn] = field(default_factory=dict)
    rows: dict[int, tuple[list[float], list[int]]] = field(default_factory=dict)
    edges: QPainterPath = field(default_factory=QPainterPath)
    groups: list[tuple[str, float, QPolygonF]] = field(default_factory=list)  # (class, radius, points)
    rect: QRectF = field(default_factory=lambda: QRectF(0, 0, 1, 1))
    pinned: set[int] = field(default_factory=set)
    excluded: set[int] = field(default_factory=set)
    seconds: float = 0.0


class DerivedCache:
    """Per-node class, label and radius, recomputed only for records that changed.

    Records are replaced, never mutated, when a node changes, so identity tells what changed.
    Used by one layout at a time.
    """

    def __init__(self) -> None:
        self._d: dict[int, tuple] = {}

    def get(self, n) -> tuple:
        c = self._d.get(n.id)
        if c is None or c[0] is not n:
            c = self._d[n.id] = (n, classify(n), short_label(n), radius_for(n.visits))
        return c


def build_geometry(records: list, cache: DerivedCache | None = None) -> Geometry:
    """Lay out ``records`` (NodeRecords in creation order) and prepare the batched drawing."""
    t0 = time.perf_counter()
    cache = cache or DerivedCache()
    by_id = {n.id: n for n in records}
    pos = tidy_layout([(n.id, n.parent_id) for n in records])
    g = Geometry()
    drawn = g.drawn
    kids: dict[int, list[tuple[float, float]]] = {}
    groups: dict[tuple[str, float], list[QPointF]] = {}
    row_items: list[tuple[float, int, int]] = []
    max_x = max_y = 0.0
    for nid, (lx, depth) in pos.items():
        n = by_id[nid]
        _, cls, label, r = cache.get(n)
        x, y = lx * DX, depth * DY
        pt = QPointF(x, y)
        drawn[nid] = _Drawn(pt, r, cls, label)
        groups.setdefault((cls, round(r * 2) / 2), []).append(pt)
        row_items.append((x, depth, nid))
        if x > max_x:
            max_x = x
        if y > max_y:
            max_y = y
        if n.parent_id is not None:
            kids.setdefault(n.parent_id, []).append((x, y))
        if n.pinned:
            g.pinned.add(nid)
        if n.excluded:
            g.excluded.add(nid)
    path = g.edges
    for pid, children in kids.items():
        parent = drawn.get(pid)
        if parent is None:
            continue
        px, py = parent.pos.x(), parent.pos.y()
        mid = py + DY * 0.5
        path.moveTo(px, py)
        path.lineTo(px, mid)
        if len(children) > 1:
            path.moveTo(children[0][0], mid)
            path.lineTo(children[-1][0], mid)
        for cx, cy in children:
            path.moveTo(cx, mid)
            path.lineTo(cx, cy)
    row_items.sort()
    for x, depth, nid in row_items:
        xs, ids = g.rows.setdefault(depth, ([], []))
        xs.append(x)
        ids.append(nid)
    # QPolygonF(list), not .append: one call instead of thousands
    g.groups = sorted(((c, r, QPolygonF(pts)) for (c, r), pts in groups.items()), key=lambda t: -t[1])
    pad = R_MAX + 30
    g.rect = QRectF(-pad, -pad, max_x + 2 * pad, max_y + 2 * pad)
    g.seconds = time.perf_counter() - t0
    return g


class TreeItem(QGraphicsItem):
    """Paints the tree; ``rebuild`` takes the nodes, ``set_marks`` the highlighted ids."""

    def __init__(self) -> None:
        super().__init__()
        self._g = Geometry()
        self._best_edges = QPainterPath()
        self._colors: dict[str, str] = {}
        self._dark = False
        self.selected: int | None = None
        self.best: int | None = None
        self.best_path: list[int] = []
        self.found: int | None = None  # highlighted by "find node"
        self._label_font = QFont()
        self._label_font.setPointSizeF(7.5)
        self._id_font = QFont()
        self._id_font.setPointSizeF(6.5)

    @property
    def pinned(self) -> set[int]:
        return self._g.pinned

    @property
    def excluded(self) -> set[int]:
        return self._g.excluded

    # -- data --------------------------------------------------------------------------------
    def set_theme(self, colors: dict[str, str], dark: bool) -> None:
        self._colors = colors
        self._dark = dark
        self.update()

    def set_geometry(self, g: Geometry) -> None:
        self.prepareGeometryChange()
        self._g = g
        self._rebuild_best_path()
        self.update()

    def rebuild(self, nodes: dict) -> None:
        """Synchronous layout of ``nodes`` ({id: NodeRecord}); the dock prefers the threaded path."""
        self.set_geometry(build_geometry(list(nodes.values())))

    def set_best_path(self, best: int | None, path: list[int]) -> None:
        self.best = best
        self.best_path = path
        self._rebuild_best_path()
        self.update()

    def _rebuild_best_path(self) -> None:
        p = QPainterPath()
        prev = None
        for nid in self.best_path:
            d = self._g.drawn.get(nid)
            if d is None:
                prev = None
                continue
            if prev is not None:
                _elbow(p, prev.pos, d.pos)
            prev = d
        self._best_edges = p

    # -- queries -----------------------------------------------------------------------------
    def position(self, node_id: int) -> QPointF | None:
        d = self._g.drawn.get(node_id)
        return d.pos if d else None

    def node_at(self, p: QPointF, slack: float = 4.0) -> int | None:
        row = int(round(p.y() / DY))
        found = None
        best = 1e18
        for r in (row - 1, row, row + 1):
            xs_ids = self._g.rows.get(r)
            if not xs_ids:
                continue
            xs, ids = xs_ids
            i = bisect.bisect_left(xs, p.x())
            for j in (i - 1, i):
                if 0 <= j < len(ids):
                    d = self._g.drawn[ids[j]]
                    dist = math.hypot(d.pos.x() - p.x(), d.pos.y() - p.y())
                    if dist <= d.r + slack and dist < best:
                        best, found = dist, ids[j]
        return found

    def count(self) -> int:
        return len(self._g.drawn)

    # -- painting ----------------------------------------------------------------------------
    def boundingRect(self) -> QRectF:
        return self._g.rect

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget=None) -> None:
        c = self._colors
        lod = QStyleOptionGraphicsItem.levelOfDetailFromTransform(painter.worldTransform())
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, lod > 0.15)
        edge_pen = QPen(QColor(c.get("edge", "#999")), 1.2)
        edge_pen.setCosmetic(True)
        painter.setPen(edge_pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawPath(self._g.edges)
        if not self._best_edges.isEmpty():
            best_pen = QPen(QColor(c.get("best_edge", "#c60")), max(2.5, 4.0 * min(lod, 1.0)))
            best_pen.setCosmetic(True)
            painter.setPen(best_pen)
            painter.drawPath(self._best_edges)
        outline = QColor(c.get("edge", "#999"))
        for cls, r, poly in self._g.groups:  # outline ring, then fill: two calls per group
            pen = QPen(outline, 2 * r + 2.0, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap)
            painter.setPen(pen)
            painter.drawPoints(poly)
            pen = QPen(QColor(BY_KEY[cls].color(self._dark)), 2 * r, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap)
            painter.setPen(pen)
            painter.drawPoints(poly)
        self._paint_marks(painter)
        if lod >= 0.55:
            self._paint_labels(painter, option.exposedRect, lod)

    def _ring(self, painter: QPainter, nid: int | None, color: str, grow: float, width: float,
              style: Qt.PenStyle = Qt.PenStyle.SolidLine) -> None:
        d = self._g.drawn.get(nid) if nid is not None else None
        if d is None:
            return
        pen = QPen(QColor(color), width, style)
        pen.setCosmetic(True)
        painter.setPen(pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        r = d.r + grow
        painter.drawEllipse(d.pos, r, r)

    def _paint_marks(self, painter: QPainter) -> None:
        c = self._colors
        for nid in self.excluded:
            d = self._g.drawn.get(nid)
            if d is None:
                continue
            pen = QPen(QColor(c.get("excluded", "#888")), 2.0)
            pen.setCosmetic(True)
            painter.setPen(pen)
            k = d.r * 0.7
            painter.drawLine(QPointF(d.pos.x() - k, d.pos.y() - k), QPointF(d.pos.x() + k, d.pos.y() + k))
            painter.drawLine(QPointF(d.pos.x() - k, d.pos.y() + k), QPointF(d.pos.x() + k, d.pos.y() - k))
        if self.best is not None and self.best not in self.pinned:
            self._ring(painter, self.best, c.get("best_edge", "#c60"), 3.0, 2.5)
        for nid in self.pinned:  # a double ring: a different shape from the fastest win's single ring
            self._ring(painter, nid, c.get("pin", "#d4a017"), 3.0, 2.0)
            self._ring(painter, nid, c.get("pin", "#d4a017"), 6.5, 2.0)
            d = self._g.drawn.get(nid)
            if d is not None:  # a small pin head above the node
                painter.setPen(Qt.PenStyle.NoPen)
                painter.setBrush(QColor(c.get("pin", "#d4a017")))
                painter.drawEllipse(QPointF(d.pos.x() + d.r * 0.8, d.pos.y() - d.r * 0.8), 4.0, 4.0)
        if self.found is not None:
            self._ring(painter, self.found, c.get("select", "#36c"), 9.0, 2.0, Qt.PenStyle.DashLine)
        self._ring(painter, self.selected, c.get("select", "#36c"), 5.0, 3.0)

    def _paint_labels(self, painter: QPainter, exposed: QRectF, lod: float) -> None:
        painter.setPen(QColor(self._colors.get("text", "#222")))
        painter.setFont(self._label_font)
        top = int(math.floor((exposed.top() - R_MAX) / DY))
        bottom = int(math.ceil((exposed.bottom() + R_MAX + 16) / DY))
        visible: list[int] = []
        for row in range(top, bottom + 1):
            xs_ids = self._g.rows.get(row)
            if not xs_ids:
                continue
            xs, ids = xs_ids
            lo = bisect.bisect_left(xs, exposed.left() - DX)
            hi = bisect.bisect_right(xs, exposed.right() + DX)
            visible.extend(ids[lo:hi])
        if len(visible) > 1500:
            return  # too many to read anyway
        for nid in visible:
            d = self._g.drawn[nid]
            if d.label:
                rect = QRectF(d.pos.x() - DX / 2, d.pos.y() + d.r + 6, DX, 14)
                painter.drawText(rect, Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop, d.label)
        if lod >= 1.0:
            painter.setFont(self._id_font)
            for nid in visible:
                d = self._g.drawn[nid]
                rect = QRectF(d.pos.x() - DX / 2, d.pos.y() - d.r - 18, DX, 13)
                painter.drawText(rect, Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignBottom, f"#{nid}")


def _elbow(path: QPainterPath, a: QPointF, b: QPointF) -> None:
    """Parent-to-child connector: down, across, down (reads as a tree, not a web)."""
    mid = a.y() + (b.y() - a.y()) * 0.5
    path.moveTo(a)
    path.lineTo(a.x(), mid)
    path.lineTo(b.x(), mid)
    path.lineTo(b)
