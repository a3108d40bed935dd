"""Light and dark themes that follow the system colour scheme.

We use the Fusion style with our own palettes so both themes look the same on every platform
(and offscreen), and listen to the system's colour-scheme hint so a switch at dusk follows along.
Views that paint their own colours (tree, plot, code) read ``Theme.dark`` and redraw on ``changed``.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

MODES = ("system", "light", "dark")


def _palette(dark: bool) -> QPalette:
    p = QPalette()
    if dark:
        colors = {
            QPalette.ColorRole.Window: "#25272b",
            QPalette.ColorRole.WindowText: "#e6e6e6",
            QPalette.ColorRole.Base: "#1d1f22",
            QPalette.ColorRole.AlternateBase: "#2a2d31",
            QPalette.ColorRole.ToolTipBase: "#2f3237",
            QPalette.ColorRole.ToolTipText: "#e6e6e6",
            QPalette.ColorRole.PlaceholderText: "#8a8f98",
            QPalette.ColorRole.Text: "#e6e6e6",
            QPalette.ColorRole.Button: "#2f3237",
            QPalette.ColorRole.ButtonText: "#e6e6e6",
            QPalette.ColorRole.BrightText: "#ff6b6b",
            QPalette.ColorRole.Highlight: "#3d7bd9",
            QPalette.ColorRole.HighlightedText: "#ffffff",
            QPalette.ColorRole.Link: "#6fa8ff",
            QPalette.ColorRole.Mid: "#3a3d42",
            QPalette.ColorRole.Dark: "#151618",
            QPalette.ColorRole.Light: "#3a3d42",
        }
    else:
        colors = {
            QPalette.ColorRole.Window: "#f3f4f6",
            QPalette.ColorRole.WindowText: "#1f2328",
            QPalette.ColorRole.Base: "#ffffff",
            QPalette.ColorRole.AlternateBase: "#f0f2f4",
            QPalette.ColorRole.ToolTipBase: "#ffffee",
            QPalette.ColorRole.ToolTipText: "#1f2328",
            QPalette.ColorRole.PlaceholderText: "#8c959f",
            QPalette.ColorRole.Text: "#1f2328",
            QPalette.ColorRole.Button: "#eceef1",
            QPalette.ColorRole.ButtonText: "#1f2328",
            QPalette.ColorRole.BrightText: "#d1242f",
            QPalette.ColorRole.Highlight: "#2f6fd0",
            QPalette.ColorRole.HighlightedText: "#ffffff",
            QPalette.ColorRole.Link: "#0b5fcf",
            QPalette.ColorRole.Mid: "#c9ced6",
            QPalette.ColorRole.Dark: "#a0a7b1",
            QPalette.ColorRole.Light: "#ffffff",
        }
    for role, c in colors.items():
        p.setColor(role, QColor(c))
    for role in (QPalette.ColorRole.Text, QPalette.ColorRole.WindowText, QPalette.ColorRole.ButtonText):
        p.setColor(QPalette.ColorGroup.Disabled, role, QColor("#7a7f87" if dark else "#a0a7b1"))
    return p


def _style_sheet() -> str:
    """The app's small style sheet (resources/styles/kforge.qss); none if it is missing."""
    from ..paths import RESOURCES

    try:
        return (RESOURCES / "styles" / "kforge.qss").read_text()
    except OSError:
        return ""


def system_prefers_dark() -> bool:
    hints = QGuiApplication.styleHints()
    try:
        return hints.colorScheme() == Qt.ColorScheme.Dark
    except AttributeError:  # Qt < 6.5: guess from the default palette
        return QGuiApplication.palette().color(QPalette.ColorRole.Window).lightness() < 128


class Theme(QObject):
    """The current theme; ``mode`` is system, light or dark."""

    changed = Signal(bool)  # dark

    def __init__(self, mode: str = "system", parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._mode = mode if mode in MODES else "system"
        self._dark = False
        try:
            QGuiApplication.styleHints().colorSchemeChanged.connect(self._on_system_changed)
        except AttributeError:
            pass

    @property
    def dark(self) -> bool:
        return self._dark

    @property
    def mode(self) -> str:
        return self._mode

    def set_mode(self, mode: str) -> None:
        self._mode = mode if mode in MODES else "system"
        self.apply()

    def apply(self) -> None:
        dark = system_prefers_dark() if self._mode == "system" else self._mode == "dark"
        app = QApplication.instance()
        if isinstance(app, QApplication):
            app.setStyle("Fusion")
            app.setPalette(_palette(dark))
            app.setStyleSheet(_style_sheet())
        changed = dark != self._dark
        self._dark = dark
        if changed:
            self.changed.emit(dark)

    def _on_system_changed(self, *_a) -> None:
        if self._mode == "system":
            self.apply()

    # a few colours the views share
    def diff_colors(self) -> dict[str, str]:
        if self._dark:
            return {"delete": "#4a2326", "insert": "#1d3b27", "hunk": "#1b2f45", "pad": "#24272b", "replace": ""}
        return {"delete": "#ffebe9", "insert": "#e6ffec", "hunk": "#ddf4ff", "pad": "#f6f8fa", "replace": ""}

    def plot_colors(self) -> dict[str, str]:
        if self._dark:
            return {"background": "#1d1f22", "foreground": "#c9d1d9", "best": "#ff7b72", "ref": "#8a8f98"}
        return {"background": "#ffffff", "foreground": "#1f2328", "best": "#c7522a", "ref": "#6e7781"}

    def tree_colors(self) -> dict[str, str]:
        """The fastest win's ring and the path to the chosen node share ``best_edge``; a pinned node
        has its own colour (and a double ring), so the two never look alike in either theme."""
        if self._dark:
            return {
                "background": "#1d1f22", "edge": "#5a5f66", "best_edge": "#ff7b72", "pin": "#ffd166",
                "select": "#6fa8ff", "text": "#d0d4da", "excluded": "#7a7f87",
            }  # fmt: skip
        return {
            "background": "#fbfbfc", "edge": "#b4bac3", "best_edge": "#c7522a", "pin": "#d4a017",
            "select": "#2f6fd0", "text": "#24292f", "excluded": "#8c959f",
        }  # fmt: skip
