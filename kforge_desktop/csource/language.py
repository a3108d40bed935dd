"""Which language a piece of code is written in, when nothing (a fence label, a setting) says so."""

from __future__ import annotations

import ast
import re


def guess_language(code: str) -> str:
    """The language of ``code``: "python", "cuda", "cpp" or "text" (neither, e.g. prose)."""
    try:  # a module with kernel source in its strings is still Python
        tree = ast.parse(code)
        if any(isinstance(n, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)) for n in tree.body):
            return "python"
    except (SyntaxError, ValueError):
        pass
    if re.search(r"__global__|__device__|<<<|\bblockIdx\b|\bthreadIdx\b|cuda_runtime", code):
        return "cuda"
    py = len(re.findall(r"^\s*(?:def |class \w+.*:\s*$|import |from \w[\w.]* import |return\b(?!.*;\s*$))", code, re.M))
    cpp = len(re.findall(r"^\s*#include|;\s*$|^\s*(?:extern\s+\"C\"|template\s*<|namespace )", code, re.M))
    if py == 0 and cpp == 0:
        return "text"
    return "python" if py >= cpp else "cpp"
