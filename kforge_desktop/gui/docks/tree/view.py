"""Zoom, pan, fit and pick on the tree: a QGraphicsView around the single ``TreeItem``."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QPoint, QPointF, Qt, Signal
from PySide6.QtGui import QColor, QPainter, QWheelEvent
from PySide6.QtWidgets import QGraphicsScene, QGraphicsView, QToolTip, QWidget

from .scene import TreeItem


class TreeView(QGraphicsView):
    nodeClicked = Signal(object)  # node id or None (click on empty space)
    nodeActivated = Signal(int)  # double click
    contextRequested = Signal(int, QPoint)  # node id, global position
    userZoomed = Signal()  # the user took control of the viewport (stops auto-fit)

    MIN_SCALE, MAX_SCALE = 0.02, 6.0

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tree = TreeItem()
        scene = QGraphicsScene(self)
        scene.setItemIndexMethod(QGraphicsScene.ItemIndexMethod.NoIndex)
        scene.addItem(self.tree)
        self.setScene(scene)
        self.setRenderHint(QPainter.RenderHint.Antialiasing)
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.MinimalViewportUpdate)
        self.setOptimizationFlag(QGraphicsView.OptimizationFlag.DontSavePainterState, True)
        self._press: QPointF | None = None
        self.tooltip_for = lambda node_id: ""  # set by the dock

    def set_background(self, color: str) -> None:
        self.setBackgroundBrush(QColor(color))

    # -- viewport ----------------------------------------------------------------------------
    def fit(self) -> None:
        rect = self.tree.boundingRect()
        if rect.width() <= 1:
            return
        self.fitInView(rect, Qt.AspectRatioMode.KeepAspectRatio)
        if self.transform().m11() > 1.4:  # a small tree: do not blow it up
            self.resetTransform()
            self.scale(1.4, 1.4)
            self.centerOn(rect.center())

    def zoom(self, factor: float) -> None:
        s = self.transform().m11()
        factor = max(self.MIN_SCALE / s, min(self.MAX_SCALE / s, factor))
        self.scale(factor, factor)

    def center_on_node(self, node_id: int) -> bool:
        p = self.tree.position(node_id)
        if p is None:
            return False
        if self.transform().m11() < 0.8:
            self.resetTransform()
            self.scale(1.0, 1.0)
        self.centerOn(p)
        return True

    def wheelEvent(self, event: QWheelEvent) -> None:
        delta = event.angleDelta().y()
        if delta:
            self.zoom(1.0015**delta)
            self.userZoomed.emit()
        event.accept()

    # -- picking -----------------------------------------------------------------------------
    def node_at_view(self, pos: QPoint) -> int | None:
        return self.tree.node_at(self.mapToScene(pos))

    def mousePressEvent(self, event) -> None:
        self._press = event.position()
        super().mousePressEvent(event)

    def mouseReleaseEvent(self, event) -> None:
        super().mouseReleaseEvent(event)
        if event.button() != Qt.MouseButton.LeftButton or self._press is None:
            return
        moved = (event.position() - self._press).manhattanLength()
        self._press = None
        if moved > 4:
            self.userZoomed.emit()  # a drag: the user is panning
            return
        self.nodeClicked.emit(self.node_at_view(event.position().toPoint()))

    def mouseDoubleClickEvent(self, event) -> None:
        nid = self.node_at_view(event.position().toPoint())
        if nid is not None:
            self.nodeActivated.emit(nid)
        else:
            self.fit()

    def contextMenuEvent(self, event) -> None:
        nid = self.node_at_view(event.pos())
        if nid is not None:
            self.contextRequested.emit(nid, event.globalPos())

    def viewportEvent(self, event) -> bool:
        if event.type() == QEvent.Type.ToolTip:
            nid = self.node_at_view(event.pos())
            if nid is not None:
                QToolTip.showText(event.globalPos(), self.tooltip_for(nid), self)
            else:
                QToolTip.hideText()
            return True
        return super().viewportEvent(event)
