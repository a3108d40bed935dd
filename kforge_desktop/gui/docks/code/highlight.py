"""Syntax highlighting with pygments, line by line, for code views and diffs.

We lex the whole text once (so multi-line strings and comments are right), then cut the token
stream into lines; a view paints each line with its own background (diff) and line number. A
candidate module is Python with its C++/CUDA kernel in a triple-quoted string: that string is lexed
as C++ or CUDA so the kernel, which is what a user reads, is highlighted as code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from pygments.lexer import Lexer
from pygments.lexers import CppLexer, CudaLexer, PythonLexer, TextLexer
from pygments.style import Style
from pygments.styles import get_style_by_name
from pygments.token import Token, _TokenType

Line = list[tuple[_TokenType, str]]

_KERNEL_STRING = re.compile(r"(?P<open>[rRbBuU]{0,2}(?P<q>'''|\"\"\"))(?P<body>.*?)(?P=q)", re.S)
_KERNEL_HINT = re.compile(r'#include|__global__|extern\s+"C"|\btemplate\s*<')


@dataclass(frozen=True)
class TokenStyle:
    color: str | None
    background: str | None
    bold: bool
    italic: bool


def lexer_for(language: str) -> Lexer:
    lang = (language or "").lower()
    if lang in ("cuda", "cu"):
        return CudaLexer(stripnl=False, ensurenl=False)
    if lang in ("cpp", "c++", "c", "cxx"):
        return CppLexer(stripnl=False, ensurenl=False)
    if lang in ("python", "py", "triton", "module"):
        return PythonLexer(stripnl=False, ensurenl=False)
    return TextLexer(stripnl=False, ensurenl=False)


def _tokens(text: str, language: str) -> list[tuple[_TokenType, str]]:
    return list(lexer_for(language).get_tokens(text))


def module_tokens(text: str, kernel_language: str = "cpp") -> list[tuple[_TokenType, str]]:
    """Tokens of a candidate module: Python, with embedded kernel strings lexed as C++/CUDA."""
    out: list[tuple[_TokenType, str]] = []
    pos = 0
    klang = "cuda" if kernel_language == "cuda" else "cpp"
    for m in _KERNEL_STRING.finditer(text):
        if not _KERNEL_HINT.search(m.group("body")):
            continue
        out.extend(_tokens(text[pos : m.start()], "python"))
        out.append((Token.Literal.String, m.group("open")))
        out.extend(_tokens(m.group("body"), klang))
        out.append((Token.Literal.String, m.group("q")))
        pos = m.end()
    out.extend(_tokens(text[pos:], "python"))
    return out


def split_lines(tokens: list[tuple[_TokenType, str]]) -> list[Line]:
    """Cut a token stream into lines (no newline characters kept)."""
    lines: list[Line] = [[]]
    for ttype, value in tokens:
        parts = value.split("\n")
        for i, part in enumerate(parts):
            if i:
                lines.append([])
            if part:
                lines[-1].append((ttype, part))
    if len(lines) > 1 and not lines[-1]:
        lines.pop()  # the text ended with a newline
    return lines


def highlight_lines(text: str, language: str) -> list[Line]:
    """``text`` as highlighted lines; ``language`` "module:<kernel lang>" for a candidate module."""
    if language.startswith("module"):
        _, _, klang = language.partition(":")
        toks = module_tokens(text, klang or "cpp")
    else:
        toks = _tokens(text, language)
    lines = split_lines(toks)
    # the lexers may drop or add a trailing newline: keep exactly the text's own line count
    want = text.count("\n") + (0 if text.endswith("\n") else 1) if text else 1
    while len(lines) < want:
        lines.append([])
    return lines[:want]


@lru_cache(maxsize=8)
def _style(name: str) -> type[Style]:
    return get_style_by_name(name)


def style_name(dark: bool) -> str:
    return "github-dark" if dark else "default"


@lru_cache(maxsize=512)
def token_style(ttype: _TokenType, dark: bool) -> TokenStyle:
    st = _style(style_name(dark))
    while ttype not in st._styles and ttype.parent is not None:  # pygments resolves parents too
        ttype = ttype.parent
    s = st.style_for_token(ttype)
    return TokenStyle(
        color=f"#{s['color']}" if s.get("color") else None,
        background=f"#{s['bgcolor']}" if s.get("bgcolor") else None,
        bold=bool(s.get("bold")),
        italic=bool(s.get("italic")),
    )


def language_of(node_language: str) -> str:
    """The highlighting language of a node's kernel text."""
    return {"cuda": "cuda", "cpp": "cpp", "triton": "python", "python": "python"}.get(node_language, "cpp")
