"""What colour a node is and what it is called: one place that maps a node's verdict or state to a
class, a colour, a title and a one-line description.

Every view (tree, plot, legend, inspector, candidate table) asks here, so "a win" is the same green
everywhere, in the light and in the dark theme. The colour follows the verdict's own judgement
(``Verdict.is_win``): a speedup within the measurement noise, or measured while the machine was
disturbed, is never drawn as a win, and a kernel that hands part of its work to PyTorch
(``Verdict.delegates``) has its own colour because it is never chosen unless pinned.
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
    StatusClass("faster", "faster (beyond noise)", "#1a9850", "#4cc06a"),
    StatusClass("delegates", "correct, partly PyTorch's", "#4f9fa6", "#5fb8bf"),
    StatusClass("slower", "correct, no measured win", "#8fb3d9", "#6f93bd"),
    StatusClass("disturbed", "measurement disturbed", "#8c6d4f", "#b08d6a"),
    StatusClass("incorrect", "incorrect", "#e08214", "#f0a040"),
    StatusClass("build", "build error", "#d73027", "#ef5a4f"),
    StatusClass("failed", "crashed / timed out", "#8e0152", "#c2307e"),
    StatusClass("rejected", "rejected (calls the PyTorch op)", "#9e7bbf", "#b596d4"),
    StatusClass("queued", "not evaluated yet", "#bdbdbd", "#6b6b6b"),
    StatusClass("evaluating", "evaluating", "#7a7a7a", "#9a9a9a"),
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
    if node.origin == "root":
        return "root"
    if v is not None:
        if v.status == "ok":
            if v.disturbed:
                return "disturbed"
            if v.delegates:
                return "delegates"
            return "faster" if v.is_win else "slower"
        return _VERDICT_CLASS.get(v.status, "failed")
    if node.state in ("no_code", "duplicate"):
        return "nocode"
    if node.state == "evaluating":
        return "evaluating"
    return "queued"


def color_for(node: NodeRecord, dark: bool) -> str:
    return BY_KEY[classify(node)].color(dark)


def is_win(node: NodeRecord) -> bool:
    """A candidate the search may choose by itself: a measured win that does its own work."""
    v = node.verdict
    return node.origin != "root" and v is not None and v.is_win and not v.delegates


def short_label(node: NodeRecord) -> str:
    """The few characters drawn on a node: its speedup (with ~ when it is no measured win), or what
    went wrong."""
    if node.origin == "root":
        return "ref"
    sp = node.speedup
    if sp is not None:
        cls = classify(node)
        if cls == "disturbed":
            return f"{sp:.2f}×?"
        if cls == "slower" and not node.verdict.significant:
            return f"~{sp:.2f}×"
        return f"{sp:.2f}×"
    return {
        "incorrect": "✗",
        "build": "build",
        "failed": "crash",
        "rejected": "torch",
        "queued": "…",
        "evaluating": "…",
        "nocode": "—",
    }.get(classify(node), "")


_ORIGIN_WORDS = {"root": "reference", "seed": "seed", "llm": "model", "user": "hand-written"}
_KIND_WORDS = {"whole": "whole kernel", "edit": "edit", "repair": "repair"}


def node_title(node: NodeRecord) -> str:
    """"#1 reference", "#2 seed", "#5 model · edit", "#9 hand-written": who wrote it, said once."""
    who = _ORIGIN_WORDS.get(node.origin, node.origin)
    kind = _KIND_WORDS.get(node.kind, "") if node.origin == "llm" else ""
    return f"#{node.id} {who}" + (f" · {kind}" if kind else "")


def where_ran(node: NodeRecord) -> str:
    """The device a node was measured on, and the host where the verdict records one."""
    v = node.verdict
    if v is None:
        return ""
    host = getattr(v, "host", "") or ""
    return f"{v.device} on {host}" if host else v.device


def state_words(node: NodeRecord, running: bool = True) -> str:
    """A node's lifecycle in words; a queued node while no search runs waits for Start."""
    if node.state == "pending":
        return "not evaluated yet" + ("" if running else " (evaluated first when the search starts)")
    if node.state == "evaluating":
        return "evaluating" if running else "interrupted while evaluating (evaluated again on Start)"
    if node.state == "no_code":
        return "no usable code in the answer"
    return node.state.replace("_", " ")


def verdict_words(node: NodeRecord) -> str:
    """The verdict in one phrase, following its own flags (never "faster" for a non-win)."""
    v = node.verdict
    if v is None:
        return ""
    if v.status != "ok" or v.speedup is None:
        return f"{v.status.replace('_', ' ')}: {v.reason}"
    basis = f" {v.time_basis} time" if v.time_basis else ""
    ms = f", {v.latency_ms:.4g} ms{basis}" if v.latency_ms is not None else ""
    if v.disturbed:
        return f"{v.speedup:.2f}× measured on a disturbed machine (re-time it){ms}"
    if v.host_saving_ms:
        return f"same device time as eager, {v.host_saving_ms:.3g} ms less per call (host overhead){ms}"
    if not v.significant:
        return f"{v.speedup:.2f}× within the measurement noise{ms}"
    word = "faster" if v.speedup > 1 else "slower"
    tail = "; calls PyTorch for part of the work" if v.delegates else ""
    return f"{v.speedup:.2f}× {word} than eager{ms}{tail}"


def describe(node: NodeRecord, running: bool = True) -> str:
    """One line about a node for tooltips and the status bar."""
    head = node_title(node)
    if node.origin == "root":
        return f"{head}: the PyTorch program every candidate is checked and timed against"
    if node.verdict is not None:
        where = where_ran(node)
        return f"{head}: {verdict_words(node)}" + (f" [{where}]" if where else "")
    return f"{head}: {state_words(node, running)}"
