"""Diff rows for the code view: unified and side by side, computed with difflib.

Pure data (no Qt): rows refer to line numbers in the two texts so the view can paint each side
with that text's own syntax highlighting.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

# row kinds
EQUAL, DELETE, INSERT, HUNK = "equal", "delete", "insert", "hunk"


@dataclass(frozen=True)
class UnifiedRow:
    kind: str  # equal | delete | insert | hunk
    old_no: int | None  # 0-based line in the old text
    new_no: int | None
    header: str = ""  # for hunk rows


@dataclass(frozen=True)
class SideRow:
    left: int | None  # 0-based line in the old text, None for padding
    right: int | None
    kind: str  # equal | delete | insert | replace


@dataclass(frozen=True)
class DiffStats:
    added: int
    removed: int

    def __str__(self) -> str:
        return f"+{self.added} −{self.removed}"


def _matcher(old: list[str], new: list[str]) -> difflib.SequenceMatcher:
    return difflib.SequenceMatcher(None, old, new, autojunk=False)


def unified_rows(old: list[str], new: list[str], context: int = 3) -> list[UnifiedRow]:
    rows: list[UnifiedRow] = []
    for group in _matcher(old, new).get_grouped_opcodes(context):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        rows.append(UnifiedRow(HUNK, None, None, f"@@ -{i1 + 1},{i2 - i1} +{j1 + 1},{j2 - j1} @@"))
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                rows.extend(UnifiedRow(EQUAL, a1 + k, b1 + k) for k in range(a2 - a1))
                continue
            if tag in ("replace", "delete"):
                rows.extend(UnifiedRow(DELETE, a, None) for a in range(a1, a2))
            if tag in ("replace", "insert"):
                rows.extend(UnifiedRow(INSERT, None, b) for b in range(b1, b2))
    return rows


def side_rows(old: list[str], new: list[str]) -> list[SideRow]:
    rows: list[SideRow] = []
    for tag, a1, a2, b1, b2 in _matcher(old, new).get_opcodes():
        if tag == "equal":
            rows.extend(SideRow(a1 + k, b1 + k, "equal") for k in range(a2 - a1))
        elif tag == "delete":
            rows.extend(SideRow(a, None, "delete") for a in range(a1, a2))
        elif tag == "insert":
            rows.extend(SideRow(None, b, "insert") for b in range(b1, b2))
        else:
            n = max(a2 - a1, b2 - b1)
            for k in range(n):
                a = a1 + k if a1 + k < a2 else None
                b = b1 + k if b1 + k < b2 else None
                rows.append(SideRow(a, b, "replace"))
    return rows


def stats(old: list[str], new: list[str]) -> DiffStats:
    added = removed = 0
    for tag, a1, a2, b1, b2 in _matcher(old, new).get_opcodes():
        if tag in ("replace", "delete"):
            removed += a2 - a1
        if tag in ("replace", "insert"):
            added += b2 - b1
    return DiffStats(added, removed)
