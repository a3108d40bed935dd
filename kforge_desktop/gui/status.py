"""What colour a node is: one place that maps a node's verdict or state to a class and a colour.

Every view (tree, plot, legend, inspector) asks here, so "faster" is the same green everywhere,
in the light and in the dark theme.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..search.events import NodeRecord


@dataclass(frozen=True)
class StatusClass:
    key: str
    label: str
    light: str  # colour on a light background
    dark: str  # colour on a dark background

    def color(self, dark: bool) -> str:
        return self.dark if dark else self.light


CLASSES: tuple[StatusClass, ...] = (
    StatusClass("faster", "faster than eager", "#1a9850", "#4cc06a"),
    StatusClass("slower", "correct, not faster", "#8fb3d9", "#6f93bd"),
    StatusClass("incorrect", "incorrect", "#e08214", "#f0a040"),
    StatusClass("build", "build error", "#d73027", "#ef5a4f"),
    StatusClass("failed", "crashed / timed out", "#8e0152", "#c2307e"),
    StatusClass("rejected", "rejected (uses PyTorch)", "#9e7bbf", "#b596d4"),
    StatusClass("pending", "waiting / evaluating", "#bdbdbd", "#6b6b6b"),
    StatusClass("nocode", "no code / duplicate", "#e0e0e0", "#454545"),
    StatusClass("root", "reference (eager)", "#404040", "#d0d0d0"),
)
BY_KEY = {c.key: c for c in CLASSES}

_VERDICT_CLASS = {
    "incorrect": "incorrect",
    "compile_error": "build",
    "runtime_error": "failed",
    "crashed": "failed",
    "timeout": "failed",
    "rejected": "rejected",
}


def classify(node: NodeRecord) -> str:
    """The class key of a node: by verdict when it has one, else by its lifecycle state."""
    v = node.verdict
    if v is not None:
        if v.status == "ok":
            if node.origin == "root":
                return "root"
            fast = v.speedup is not None and v.speedup > 1.0 and (v.significant or v.speedup >= 1.05)
            return "faster" if fast else "slower"
        return _VERDICT_CLASS.get(v.status, "failed")
    if node.origin == "root":
        return "root"
    if node.state in ("no_code", "duplicate"):
        return "nocode"
    return "pending"


def color_for(node: NodeRecord, dark: bool) -> str:
    return BY_KEY[classify(node)].color(dark)


def short_label(node: NodeRecord) -> str:
    """The few characters drawn on a node: its speedup, or what went wrong."""
    if node.origin == "root":
        return "ref"
    sp = node.speedup
    if sp is not None:
        return f"{sp:.2f}×"
    return {
        "incorrect": "✗",
        "build": "build",
        "failed": "crash",
        "rejected": "torch",
        "pending": "…",
        "nocode": "—",
    }.get(classify(node), "")


def describe(node: NodeRecord) -> str:
    """One line about a node for tooltips and the status bar."""
    head = f"#{node.id} ({node.origin}"
    if node.kind and node.kind not in (node.origin, "whole"):
        head += f", {node.kind}"
    head += ")"
    if node.verdict is not None:
        return f"{head}: {node.verdict.summary()}"
    return f"{head}: {node.state.replace('_', ' ')}"
