"""Errors shown to the user: one sentence, the details one click away, never a traceback dialog.

``show_error`` is the only way the window reports a failure; ``install_excepthook`` routes any
exception that escapes a slot into the same path (and the log) instead of a crash or a raw dump.
"""

from __future__ import annotations

import sys
import traceback

from PySide6.QtWidgets import QMessageBox, QWidget


def one_sentence(err: BaseException) -> str:
    """The user-facing sentence for an exception: its message when it is one of ours, else its kind."""
    msg = str(err).strip().splitlines()[0] if str(err).strip() else ""
    if not msg:
        return f"Something went wrong ({type(err).__name__})."
    if not msg.endswith((".", "!", "?")):
        msg += "."
    return msg[0].upper() + msg[1:]


def show_error(parent: QWidget | None, sentence: str, detail: str = "", title: str = "Kernel Forge") -> None:
    box = QMessageBox(parent)
    box.setObjectName("errorBox")
    box.setIcon(QMessageBox.Icon.Warning)
    box.setWindowTitle(title)
    box.setText(sentence)
    if detail:
        box.setDetailedText(detail)  # "Show Details…": on demand only
    box.setStandardButtons(QMessageBox.StandardButton.Ok)
    if _is_test_or_offscreen():
        box.show()  # never block an offscreen run; tests read and close it
        parent_errors = getattr(parent, "shown_errors", None)
        if isinstance(parent_errors, list):
            parent_errors.append((sentence, detail))
        box.close()
        box.deleteLater()
        return
    box.exec()


def _is_test_or_offscreen() -> bool:
    from PySide6.QtGui import QGuiApplication

    return QGuiApplication.platformName() in ("offscreen", "minimal")


def install_excepthook(report) -> None:
    """Route uncaught exceptions to ``report(sentence, detail)`` (the window's log and status bar)."""

    def hook(exc_type, exc, tb) -> None:
        if issubclass(exc_type, KeyboardInterrupt):
            sys.__excepthook__(exc_type, exc, tb)
            return
        detail = "".join(traceback.format_exception(exc_type, exc, tb))
        try:
            report(f"Unexpected error: {one_sentence(exc)}", detail)
        except Exception:
            sys.__excepthook__(exc_type, exc, tb)

    sys.excepthook = hook
