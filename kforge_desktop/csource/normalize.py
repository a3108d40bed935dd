"""A canonical form of a candidate's code for duplicate detection.

Two candidates are the same candidate when they differ only in what cannot change what the kernel
computes: comments, docstrings, formatting, ``#include`` lines, the order of top-level helpers, and
the names of a function's parameters and local variables. A small model often answers with exactly
such a near-copy of its parent or of the seed it was shown (an ``#include <limits>`` added, a helper
moved up, ``s`` renamed ``sum``); counted as a new correct kernel it would be a win the model did not
make, and building it again costs a build and a timing. The canonical C/C++ form therefore:

- drops comments, ``#include`` and ``using namespace`` lines;
- alpha-renames each function's parameters and locals (``v0``, ``v1``, ... in order of first use),
  leaving everything else alone: function names, globals, library names (``std::exp``, ``INFINITY``),
  struct members (``a.x``), so that a real change (another constant, another call, another loop)
  still makes a different form;
- writes every top-level item as one line of tokens and sorts the items.

The form is for comparison only: it is not compilable (the sorted helpers may come before what they
call).
"""

from __future__ import annotations

import ast
import re

from .comments import strip_cpp_comments
from .items import split_items
from .language import guess_language

_TOKEN = re.compile(
    r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\''  # string and character literals
    r"|0[xX][0-9a-fA-F]+[uUlL]*|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFlLuU]*"  # numbers
    r"|[A-Za-z_]\w*"  # identifiers and keywords
    r"|::|->|\+\+|--|<<=|>>=|<<|>>|&&|\|\||[-+*/%&|^!=<>]=|\S"  # operators and punctuation
)
_IDENT = re.compile(r"[A-Za-z_]\w*$")

# words that start a statement but never a declaration
_NOT_TYPES = {
    "return", "if", "else", "for", "while", "do", "switch", "case", "default", "break", "continue", "goto",
    "sizeof", "new", "delete", "throw", "using", "typedef", "namespace", "template", "try", "catch",
    "static_assert", "asm", "operator", "this", "true", "false", "nullptr", "co_return", "co_yield",
}
# words that may come before or after a declaration's type, or between ``*`` and the name
_QUALIFIERS = {
    "const", "static", "constexpr", "volatile", "register", "inline", "extern", "thread_local", "mutable",
    "__shared__", "__device__", "__constant__", "__restrict__", "__restrict", "restrict", "__forceinline__",
    "struct", "class", "union", "enum", "typename",
}
_TYPE_WORDS = {"unsigned", "signed", "long", "short", "int", "char", "double", "float"}
_KEYWORDS = _NOT_TYPES | _QUALIFIERS | _TYPE_WORDS | {"void", "bool", "auto", "__global__", "__host__"}
# lines that cannot change what a kernel computes: includes, include guards, ``using namespace std;``
_INCLUDE = re.compile(r"#\s*(include|pragma\s+once)\b|using\s+namespace\s+[\w:]+\s*;")


def _tokens(text: str) -> list:
    """Tokens of a function, a preprocessor line (``#pragma omp ...``) kept as one list of its own."""
    out: list = []
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            out.append(_TOKEN.findall(line))
        else:
            out.extend(_TOKEN.findall(line))
    return out


def _is_name(tok) -> bool:
    return isinstance(tok, str) and bool(_IDENT.match(tok)) and tok not in _KEYWORDS


def _skip_to_declarator_end(toks: list, j: int) -> int:
    """Index of the ``,`` ``;`` or closing ``)`` that ends the declarator starting at ``j``."""
    depth = 0
    while j < len(toks):
        t = toks[j]
        if isinstance(t, list):
            return j
        if t in "([{":
            depth += 1
        elif t in ")]}":
            if depth == 0:
                return j
            depth -= 1
        elif depth == 0 and t in (",", ";"):
            return j
        j += 1
    return j


def _declaration(toks: list, i: int) -> list[str]:
    """The names a declaration starting at statement position ``i`` declares (empty: not one)."""
    j, n = i, len(toks)
    while j < n and toks[j] in _QUALIFIERS:
        j += 1
    if j >= n or not isinstance(toks[j], str) or not _IDENT.match(toks[j]) or toks[j] in _NOT_TYPES:
        return []
    j += 1
    while j + 1 < n and toks[j] == "::" and isinstance(toks[j + 1], str) and _IDENT.match(toks[j + 1]):
        j += 2
    if j < n and toks[j] == "<":  # a template type: std::vector<float>
        depth = 0
        while j < n and isinstance(toks[j], str) and toks[j] != ";":
            depth += toks[j] == "<"
            depth -= toks[j] == ">"
            depth -= 2 * (toks[j] == ">>")
            j += 1
            if depth <= 0:
                break
    while j < n and (toks[j] in _TYPE_WORDS or toks[j] in _QUALIFIERS):
        j += 1
    names: list[str] = []
    while j < n:
        while j < n and toks[j] in ("*", "&", "&&", "const", "__restrict__", "__restrict", "restrict"):
            j += 1
        if j + 1 >= n or not _is_name(toks[j]) or toks[j + 1] not in ("=", ";", ",", "[", "(", "{", ":", ")"):
            return names
        names.append(toks[j])
        j = _skip_to_declarator_end(toks, j + 1)
        if j >= n or toks[j] != ",":
            return names
        j += 1
    return names


def _local_names(toks: list) -> set[str]:
    """The parameters and local variables a function declares."""
    try:
        brace = toks.index("{")
    except ValueError:
        return set()
    names: set[str] = set()
    # parameters: the last parenthesised list before the body
    close = max((k for k in range(brace) if toks[k] == ")"), default=-1)
    if close >= 0:
        depth, open_ = 0, -1
        for k in range(close, -1, -1):
            depth += toks[k] == ")"
            depth -= toks[k] == "("
            if depth == 0:
                open_ = k
                break
        param: list[str] = []
        depth = 0
        for t in toks[open_ + 1:close + 1]:
            if isinstance(t, list):
                continue
            if t in "([":
                depth += 1
            elif t in ")]" and depth > 0:
                depth -= 1
            elif depth == 0 and t in (",", ")"):
                words = [w for w in param if _IDENT.match(w)]
                head = param[:param.index("=")] if "=" in param else param
                last = next((w for w in reversed(head) if _IDENT.match(w)), "")
                if len(words) >= 2 and _is_name(last):
                    names.add(last)
                param = []
                continue
            param.append(t)
    # locals: declarations at the start of a statement (or of a for's init)
    for k in range(brace + 1, len(toks)):
        prev = toks[k - 1]
        starts = isinstance(prev, list) or prev in ("{", "}", ";") or (
            prev == "(" and k >= 2 and toks[k - 2] == "for")
        if starts and isinstance(toks[k], str):
            names.update(_declaration(toks, k))
    return names


def _canonical_function(text: str) -> str:
    toks = _tokens(text)
    local = _local_names(toks)
    mapping: dict[str, str] = {}

    def rename(seq: list, out: list) -> None:
        prev = ""
        for t in seq:
            if isinstance(t, list):
                sub: list = []
                rename(t, sub)
                out.append("\n" + " ".join(sub) + "\n")
                prev = ""
                continue
            if t in local and prev not in (".", "->", "::"):
                t = mapping.setdefault(t, f"v{len(mapping)}")
            out.append(t)
            prev = t

    out: list = []
    rename(toks, out)
    return " ".join(out).replace(" \n", "\n").replace("\n ", "\n").strip()


def canonical_cpp(code: str) -> str:
    """The canonical form of C/C++/CUDA code (see the module's docstring)."""
    parts = []
    for item in split_items(strip_cpp_comments(code)):
        if item.kind == "line":
            if _INCLUDE.match(item.text.strip()):
                continue
            parts.append(" ".join(_TOKEN.findall(item.text)))
        elif item.kind == "function":
            parts.append(_canonical_function(item.text))
        else:
            parts.append(" ".join(_TOKEN.findall(item.text)))
    return "\n".join(sorted(p for p in parts if p))


def _looks_like_cpp(s: str) -> bool:
    return "\n" in s and ("{" in s and ";" in s or "#include" in s)


class _Normalizer(ast.NodeTransformer):
    def _drop_docstring(self, node):
        body = getattr(node, "body", None)
        if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
        return node

    def visit_Module(self, node):
        self.generic_visit(node)
        return self._drop_docstring(node)

    def visit_FunctionDef(self, node):
        self.generic_visit(node)
        return self._drop_docstring(node)

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_ClassDef = visit_FunctionDef

    def visit_Constant(self, node):
        if isinstance(node.value, str) and _looks_like_cpp(node.value):
            return ast.copy_location(ast.Constant(canonical_cpp(node.value)), node)
        return node


def normalize_code(code: str, language: str | None = None) -> str:
    """A canonical form for duplicate detection.

    Python is parsed and unparsed without docstrings (kernel sources in its strings get the C++
    form); C++/CUDA gets ``canonical_cpp``. Two candidates that differ only in what the module's
    docstring lists normalise to the same string.
    """
    lang = language or guess_language(code)
    if lang in ("python", "triton"):
        try:
            tree = _Normalizer().visit(ast.parse(code))
            return ast.unparse(ast.fix_missing_locations(tree))
        except (SyntaxError, ValueError, RecursionError):
            lines = [re.sub(r"\s+", " ", ln.split("#", 1)[0]).strip() for ln in code.splitlines()]
            return "\n".join(ln for ln in lines if ln)
    return canonical_cpp(code)


def same_kernel(a: str, b: str, language: str = "cpp") -> bool:
    """Whether two kernels are the same up to what ``normalize_code`` ignores."""
    return normalize_code(a, language) == normalize_code(b, language)
