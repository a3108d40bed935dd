"""Helpers shared by the desktop tests (imported by name: tests/gui/conftest.py puts this folder on
sys.path, which pytest's importlib mode does not do)."""

from __future__ import annotations

import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def wait_until(qtbot, predicate, timeout_s: float = 30.0, what: str = "condition") -> None:
    """Process events until ``predicate()`` holds (a clear failure message if it never does)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return
        qtbot.wait(20)
    assert predicate(), f"timed out after {timeout_s:.0f} s waiting for: {what}"
