"""Guards against defects of the Qt binding that would otherwise crash the app.

PySide6 6.12.0 on Python 3.11 returns ``None`` from every void C++ method without taking a
reference to it (``QPointF.setX``, ``QPainter.setPen``, ``QPainterPath.lineTo`` …). On Python 3.12+
``None`` is immortal and nothing happens; on 3.11 each call drops ``None``'s reference count by
one and, after some thousands of calls, the interpreter aborts with "deallocating None". A window
that paints a tree of thousands of nodes makes that many calls in seconds.

The fix here is what Python 3.12 does: give ``None`` a reference count no defect can exhaust. It is
applied once, only on interpreters older than 3.12, only when the binding shows the defect.
"""

from __future__ import annotations

import ctypes
import sys

_IMMORTAL = 1 << 60
_applied = False


def binding_drops_none() -> bool:
    """True when calling a void method of the Qt binding loses a reference to ``None``."""
    from PySide6.QtCore import QPointF

    p = QPointF(0.0, 0.0)
    before = sys.getrefcount(None)
    for _ in range(64):
        p.setX(1.0)
    return sys.getrefcount(None) < before - 32


def make_none_immortal() -> bool:
    """Apply the guard if needed; returns whether it was applied (idempotent)."""
    global _applied
    if _applied:
        return True
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return False
    if not binding_drops_none():
        return False
    ctypes.c_ssize_t.from_address(id(None)).value = _IMMORTAL
    _applied = True
    return True
