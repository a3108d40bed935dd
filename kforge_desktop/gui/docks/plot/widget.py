"""The Speedup plot dock (pyqtgraph): the best measured win so far (a staircase) against kernels
evaluated or time, every kernel as a point coloured by its verdict, reference lines for eager (1.0)
and torch.compile (the median of the session's readings). Clicking a point selects that node
everywhere. A new session starts with a fitted view; the x mode is remembered between runs."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from ...session_model import SessionModel
from ...status import BY_KEY, CLASSES
from ...theme import Theme
from .model import PlotData, plot_data


class CountAxis(pg.AxisItem):
    """An x axis that, when it counts candidates, puts ticks on whole numbers only."""

    integer = True

    def tickValues(self, minVal, maxVal, size):
        levels = super().tickValues(minVal, maxVal, size)
        if not self.integer:
            return levels
        out = [(sp, [v for v in vals if abs(v - round(v)) < 1e-9]) for sp, vals in levels if sp >= 1]
        return out or [(1.0, [float(v) for v in range(int(minVal), int(maxVal) + 1)])]


class PlotWidget(QWidget):
    DEBOUNCE_MS = 250

    def __init__(self, session: SessionModel, theme: Theme, parent: QWidget | None = None,
                 settings=None) -> None:
        super().__init__(parent)
        self.session = session
        self.theme = theme
        self._settings = settings  # gui.settings.Settings: the x mode is remembered there
        self.data = PlotData()
        self.running = lambda: False  # the window says whether its search runs

        self.x_mode = QComboBox(self)
        self.x_mode.setObjectName("plotXMode")
        self.x_mode.addItem("vs candidates", "candidates")
        self.x_mode.addItem("vs time", "time")
        if settings is not None:
            self.x_mode.setCurrentIndex(max(0, self.x_mode.findData(settings.view_mode("plot_x", "candidates"))))
        self.summary = QLabel("", self)
        self.summary.setObjectName("plotSummary")
        bar = QHBoxLayout()
        bar.setContentsMargins(4, 2, 4, 2)
        bar.addWidget(self.x_mode)
        bar.addStretch(1)
        bar.addWidget(self.summary)

        self.x_axis = CountAxis(orientation="bottom")
        self.plot = pg.PlotWidget(self, axisItems={"bottom": self.x_axis})
        self.plot.setObjectName("speedupPlot")
        self.plot.setMenuEnabled(False)
        self.plot.showGrid(x=True, y=True, alpha=0.15)
        self.plot.setLabel("left", "speedup over eager (×)")
        self.x_axis.integer = self.x_mode.currentData() == "candidates"
        self.plot.setLabel("bottom", self._x_label())
        self.best_curve = self.plot.plot([], [], connect="finite")
        self.eager_line = pg.InfiniteLine(pos=1.0, angle=0, movable=False, label="eager 1.0×",
                                          labelOpts={"position": 0.03, "anchors": [(0, 1), (0, 1)]})
        self.compile_line = pg.InfiniteLine(pos=1.0, angle=0, movable=False, label="torch.compile",
                                            labelOpts={"position": 0.97, "anchors": [(1, 0), (1, 0)]})
        self.compile_line.setVisible(False)
        self.plot.addItem(self.eager_line)
        self.plot.addItem(self.compile_line)
        self.scatters: dict[str, pg.ScatterPlotItem] = {}
        for c in CLASSES:
            if c.key == "root":
                continue
            sp = pg.ScatterPlotItem(size=8, pen=None, hoverable=True, tip=self._tip)
            sp.sigClicked.connect(self._clicked)
            sp.setZValue(5)
            self.plot.addItem(sp)
            self.scatters[c.key] = sp
        self._manual = False  # the user zoomed or panned: stop fitting the y range
        self.plot.getViewBox().sigRangeChangedManually.connect(self._user_ranged)
        self.selected_marker = pg.ScatterPlotItem(size=16, brush=None)
        self.selected_marker.setZValue(10)
        self.plot.addItem(self.selected_marker)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addLayout(bar)
        lay.addWidget(self.plot, 1)

        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(self.DEBOUNCE_MS)
        self._timer.timeout.connect(self.refresh)
        self.x_mode.currentIndexChanged.connect(self._x_mode_changed)
        session.nodesReset.connect(self._reset)
        session.nodesUpdated.connect(lambda _ids: self._timer.start() if not self._timer.isActive() else None)
        session.selectionChanged.connect(self._mark_selected)
        theme.changed.connect(self._apply_theme)
        self._apply_theme()

    def _tip(self, x: float, y: float, data) -> str:
        n = self.session.light(int(data)) if data is not None else None
        if n is None:
            return ""
        from ...status import describe

        return describe(n, self.running())

    def _user_ranged(self, *_a) -> None:
        self._manual = True

    def fit(self) -> None:
        """Show every point, the eager line and the torch.compile line, with room for their labels."""
        self._manual = False
        self._fit_y()
        self._fit_x()

    def _fit_x(self) -> None:
        if self.data.count:
            self.plot.getViewBox().enableAutoRange(axis="x")
        else:  # nothing to fit to: the first few kernels, not the last session's range
            self.plot.setXRange(0, 5 if self.x_mode.currentData() == "candidates" else 10, padding=0.02)

    def _fit_y(self) -> None:
        d = self.data
        top = max([1.0, d.compile_speedup or 0.0] + [max(ys) for _xs, ys, _ids in d.by_class.values() if ys])
        self.plot.setYRange(-0.05 * top, top * 1.18, padding=0)

    def _x_label(self) -> str:
        if self.x_mode.currentData() == "candidates":
            return "kernels evaluated, in order (seeds included)"
        return "minutes since the search began"

    def _x_mode_changed(self) -> None:
        self.x_axis.integer = self.x_mode.currentData() == "candidates"
        self.plot.setLabel("bottom", self._x_label())
        if self._settings is not None:
            self._settings.set_view_mode("plot_x", self.x_mode.currentData())
        self.refresh()
        self.fit()

    def _reset(self) -> None:
        """Another session or problem: its own axes, not the last one's zoom."""
        self.refresh()
        self.fit()

    def refresh(self, *_a) -> None:
        self.data = d = plot_data(list(self.session.nodes().values()), self.x_mode.currentData())
        for key, sp in self.scatters.items():
            xs, ys, ids = d.by_class.get(key, ([], [], []))
            sp.setData(x=xs, y=ys, data=ids)
        self.best_curve.setData(d.best_x, d.best_y)
        if d.compile_speedup:
            self.compile_line.setVisible(True)  # first: a hidden line's label ignores a new format
            self.compile_line.setPos(d.compile_speedup)
            of = f"median of {d.compile_readings}" if d.compile_readings > 1 else "one reading"
            self.compile_line.label.setFormat(f"torch.compile {d.compile_speedup:.2f}× ({of})")
        else:
            self.compile_line.setVisible(False)
        basis = {"device": ", device time", "wall": ", wall time"}.get(d.time_basis, "")
        self.plot.setLabel("left", f"× over eager{basis}")
        best_color = self.theme.plot_colors()["best"]
        seeds = d.count - d.candidates
        what = f"{d.candidates} candidates" + (f" · {seeds} seed{'s' if seeds != 1 else ''}" if seeds else "")
        self.summary.setText(
            f"{what} · <span style='color:{best_color}'>━ best win so far {d.best:.2f}×</span>"
            if d.best is not None else (what if d.count else "")
        )
        if not self._manual:
            self._fit_y()
            self._fit_x()
        self._mark_selected(self.session.selected_id)

    def _mark_selected(self, node_id) -> None:
        pos = self.data.positions.get(node_id) if node_id is not None else None
        if pos is None:
            self.selected_marker.setData([], [])
        else:
            self.selected_marker.setData([pos[0]], [pos[1]])

    def _clicked(self, _item, points, _ev=None) -> None:
        if len(points):
            nid = points[0].data()
            if nid is not None:
                self.session.select(int(nid))

    def select_point_at(self, node_id: int) -> bool:
        """Act as if the user clicked the point of ``node_id`` (used by tests and the tour)."""
        for sp in self.scatters.values():
            for p in sp.points():
                if p.data() == node_id:
                    self._clicked(sp, [p])
                    return True
        return False

    def _apply_theme(self, *_a) -> None:
        dark = self.theme.dark
        c = self.theme.plot_colors()
        self.plot.setBackground(c["background"])
        for axis in ("left", "bottom"):
            ax = self.plot.getAxis(axis)
            ax.setPen(pg.mkPen(c["foreground"]))
            ax.setTextPen(pg.mkPen(c["foreground"]))
        self.best_curve.setPen(pg.mkPen(c["best"], width=2.5))
        self.eager_line.setPen(pg.mkPen(c["ref"], width=1.2, style=pg.QtCore.Qt.PenStyle.DashLine))
        self.eager_line.label.setColor(c["ref"])
        self.compile_line.setPen(pg.mkPen("#7b61ff" if not dark else "#a894ff", width=1.2,
                                          style=pg.QtCore.Qt.PenStyle.DotLine))
        self.compile_line.label.setColor("#7b61ff" if not dark else "#a894ff")
        for key, sp in self.scatters.items():
            sp.setBrush(pg.mkBrush(BY_KEY[key].color(dark)))
            sp.setPen(pg.mkPen(c["background"], width=0.5))
        self.selected_marker.setPen(pg.mkPen(self.theme.tree_colors()["select"], width=2.5))
        self.selected_marker.setBrush(None)
