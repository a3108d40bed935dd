"""C/C++ comments: removed for reading code, or blanked where character offsets must stay valid."""

from __future__ import annotations

import re

_COMMENT_OR_STRING = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', re.S)


def strip_cpp_comments(code: str) -> str:
    """Remove // and /* */ comments, leaving string and character literals alone."""
    out: list[str] = []
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if c in "\"'":
            j = i + 1
            while j < n and code[j] != c and code[j] != "\n":
                j += 2 if code[j] == "\\" else 1
            out.append(code[i : j + 1])
            i = j + 1
        elif code.startswith("//", i):
            j = code.find("\n", i)
            i = n if j < 0 else j
        elif code.startswith("/*", i):
            j = code.find("*/", i + 2)
            i = n if j < 0 else j + 2
            out.append(" ")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def blank_cpp_comments(code: str) -> str:
    """Comments and string literals replaced by spaces of the same length (offsets stay valid)."""
    return _COMMENT_OR_STRING.sub(lambda m: " " * len(m.group(0)), code)
