"""The top-level items of a C/C++ file (functions, structs, preprocessor and other lines), and the
surgery done with them: an edit answer replaces only the functions it rewrites (``merge_functions``),
test drivers nothing calls are dropped (``prune_unreachable``), a prompt quotes one function.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .comments import strip_cpp_comments

ENTRY = "kernel_forward"  # the entry point of a scaffolded kernel (search.scaffold.FUNCTION)

# an include of torch's, ATen's or pybind11's headers: a native kernel without them builds in a second,
# one with them needs the full extension build
TORCH_INCLUDE = re.compile(r"#\s*include\s*[<\"](torch|ATen|pybind11|c10)")


@dataclass(frozen=True)
class CItem:
    """A top-level item of a C/C++ file: a function, a struct/class, or a preprocessor/other line."""

    kind: str  # function | block | line
    name: str
    text: str


def split_items(code: str) -> list[CItem]:
    """Top-level functions and blocks of a C++ file, by brace matching (comments and strings skipped)."""
    items: list[CItem] = []
    i, n = 0, len(code)
    start = 0
    depth = 0
    body_start = -1

    def flush_lines(upto: int) -> None:
        chunk = code[start:upto]
        for line in chunk.splitlines():
            if line.strip():
                items.append(CItem("line", "", line))

    while i < n:
        ch = code[i]
        if code.startswith("//", i):
            j = code.find("\n", i)
            i = n if j < 0 else j
            continue
        if code.startswith("/*", i):
            j = code.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if ch in "\"'":
            j = i + 1
            while j < n and code[j] != ch:
                j += 2 if code[j] == "\\" else 1
            i = j + 1
            continue
        if ch == "#" and depth == 0 and (i == 0 or code[i - 1] == "\n" or code[:i].rstrip(" \t").endswith("\n")):
            flush_lines(i)
            j = i
            while True:
                k = code.find("\n", j)
                if k < 0:
                    k = n
                    break
                if code[k - 1] == "\\":
                    j = k + 1
                    continue
                break
            items.append(CItem("line", "", code[i:k].strip()))
            i = start = k
            continue
        if ch == "{":
            if depth == 0:
                body_start = i
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0 and body_start >= 0:
                end = i + 1
                if code[end:].lstrip().startswith(";"):
                    end = code.index(";", end) + 1
                head = code[start:body_start]
                text = code[start:end].strip()
                m = re.search(r"(\w+)\s*\([^()]*(?:\([^()]*\)[^()]*)*\)\s*(?:const\s*)?(?:noexcept\s*)?$", head.strip())
                if m and not re.match(r"\s*(struct|class|union|enum|namespace)\b", head):
                    items.append(CItem("function", m.group(1), text))
                else:
                    sm = re.search(r"\b(?:struct|class|union|enum|namespace)\s+(\w+)", head)
                    items.append(CItem("block", sm.group(1) if sm else "", text))
                start = end
                i = end
                body_start = -1
                continue
            if depth < 0:
                depth = 0
        elif ch == ";" and depth == 0:
            stmt = code[start:i + 1].strip()
            if stmt:
                items.append(CItem("line", "", stmt))
            start = i + 1
        i += 1
    tail = code[start:].strip()
    if tail:
        items.append(CItem("line", "", tail))
    return items


def merge_functions(parent: str, answer: str) -> str:
    """Replace the parent's functions (and structs) by the answer's versions of the same name;
    keep the rest of the parent; add new helpers before the first function that uses them.
    An answer that redefines everything becomes the new file (a rewrite)."""
    old = split_items(parent)
    new = split_items(answer)
    new_named = {it.name: it for it in new if it.kind != "line" and it.name}
    if not new_named:
        return parent
    old_names = {it.name for it in old if it.kind != "line" and it.name}
    added = [it for it in new if it.kind != "line" and it.name and it.name not in old_names]
    new_lines = [it.text for it in new if it.kind == "line"]
    out: list[str] = []
    seen_lines = set()
    for it in old:
        if it.kind == "line":
            out.append(it.text)
            seen_lines.add(it.text)
    for line in new_lines:
        if line not in seen_lines:
            out.append(line)
            seen_lines.add(line)
    merged = [(it, new_named[it.name].text if it.name in new_named else it.text) for it in old if it.kind != "line"]
    body: list[str] = []
    pending_added = list(added)
    first_fn = None
    for it, text in merged:
        if it.kind != "function":
            body.append(text)
            continue
        if first_fn is None:
            first_fn = len(body)
        # a new helper goes right before the first function that calls it, so it comes after the
        # helpers it calls itself (C++ needs a declaration before each use)
        for a in [a for a in pending_added if re.search(rf"\b{re.escape(a.name)}\s*\(", text)]:
            body.append(a.text)
            pending_added.remove(a)
        body.append(text)
    at = len(body) if first_fn is None else first_fn
    body[at:at] = [a.text for a in pending_added]  # called by nothing: before every function
    return "\n".join(out) + "\n\n" + "\n\n".join(body) + "\n"


def calls(code: str, name: str) -> bool:
    """Whether ``code`` calls (or declares) a function ``name``: ``name(`` not after a ``.``, ``::`` or a
    longer name."""
    return re.search(rf"(?<![\w.:]){re.escape(name)}\s*\(", code) is not None


def insert_before_caller(code: str, name: str, definition: str) -> str | None:
    """``code`` with ``definition`` (of function ``name``) placed above the first function that calls it,
    above that function's comments; None when no function calls it."""
    caller = next((it for it in split_items(code) if it.kind == "function" and calls(it.text, name)), None)
    if caller is None:
        return None
    at = code.index(caller.text)
    return code[:at] + definition.strip() + "\n\n" + code[at:]


def restore_helpers(code: str, lineage: list[str]) -> tuple[str, list[str]]:
    """``code`` with each function it calls but does not define put back from the nearest kernel of
    ``lineage`` (the parent's kernel first, then its ancestors') that defines it, and the names put back.
    An edit that rewrote a helper's caller without it, a repair of a node whose edit had inlined (and so
    dropped) a helper: the model calls the helper it saw, and the kernel no longer has it (channel_sum's
    ``add_row``; ``benchmarks/replay_autofix.py`` on the recorded dev answers puts a helper back in 12).
    A helper put back may call another one, which is put back too. A call to an undefined name that is a
    lineage helper's name with a word added (``add_row_simd`` for ``add_row``, same argument count) is that
    helper: the model renamed the call and wrote no such function (dev/channel_sum at 153b649)."""
    code, added = _renamed_calls(code, lineage)
    for _ in range(4):
        defined = {it.name for it in split_items(code) if it.kind == "function"}
        missing = [(src, it) for src in lineage for it in split_items(src)
                   if it.kind == "function" and it.name not in defined and calls(code, it.name)]
        taken = set()
        for _src, it in missing:  # the nearest definition of each name only
            if it.name in taken:
                continue
            taken.add(it.name)
            placed = insert_before_caller(code, it.name, it.text)
            if placed is not None:
                code = placed
                added.append(it.name)
        if not taken:
            break
    return code, added


def _argument_count(text: str) -> int | None:
    """How many arguments the call whose ``(`` opens ``text`` passes (top-level commas); None if unclosed."""
    depth, count, empty = 0, 1, True
    for ch in text:
        if ch in "([{":
            depth += 1
            if depth == 1:
                continue
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return 0 if empty else count
        elif ch == "," and depth == 1:
            count += 1
        if depth >= 1 and not ch.isspace():
            empty = False
    return None


def _renamed_calls(code: str, lineage: list[str]) -> tuple[str, list[str]]:
    """``code`` with calls to an undefined ``Y_word`` or ``word_Y`` made calls to lineage helper ``Y`` when the
    argument counts agree; the renames, as "Y (called Y_word)"."""
    items = split_items(code)
    defined = {it.name for it in items if it.kind == "function"}
    helpers: dict[str, int | None] = {}
    for src in lineage:
        for it in split_items(src):
            if it.kind == "function" and it.name != ENTRY and it.name not in helpers:
                head = strip_cpp_comments(it.text)
                helpers[it.name] = _argument_count(head[head.index("(", head.index(it.name)):])
    body = strip_cpp_comments("\n".join(it.text for it in items if it.kind == "function"))
    renames: list[str] = []
    for m in dict.fromkeys(re.findall(r"(?<![\w.:>])([A-Za-z_]\w*)\s*\(", body)):
        if m in defined or m in helpers:
            continue
        call = re.search(rf"(?<![\w.:>]){re.escape(m)}\s*(\()", body)
        n_args = _argument_count(body[call.start(1):])
        like = [y for y, n in helpers.items() if (m.startswith(y + "_") or m.endswith("_" + y)) and n == n_args]
        if len(like) == 1:
            code = re.sub(rf"(?<![\w.:>]){re.escape(m)}(\s*\()", like[0] + r"\1", code)
            renames.append(f"{like[0]} (called {m})")
    return code, renames


def function_text(code: str, name: str) -> str | None:
    """Function ``name`` of ``code`` as written, with the comments above it; None if not defined."""
    for it in split_items(code):
        if it.kind == "function" and it.name == name:
            return it.text
    return None


def function_head(code: str, name: str) -> str | None:
    """The first line of function ``name`` in ``code``: its declaration up to and including the
    opening brace, without the comments above it (``extern "C" void kernel_forward(...) {``)."""
    text = function_text(code, name)
    if text is None:
        return None
    text = strip_cpp_comments(text)
    brace = text.find("{")
    if brace < 0:
        return None
    return " ".join(text[:brace].split()) + " {"


def prune_unreachable(code: str, entry: str = ENTRY) -> str:
    """Drop top-level functions nothing reachable from ``entry`` calls or names (the test drivers, ``main()``
    and stray examples small models append); they can only break the build. A function named without a
    call is kept too: a CUDA kernel handed to ``cudaLaunchKernelEx(&config, kernel, ...)`` or
    ``cudaFuncSetAttribute(kernel, ...)`` is reached through its pointer."""
    items = split_items(code)
    funcs = {it.name: it for it in items if it.kind == "function"}
    if entry not in funcs:
        return code
    keep, todo = {entry}, [entry]
    while todo:
        text = funcs[todo.pop()].text
        for name in funcs:
            if name not in keep and re.search(rf"\b{re.escape(name)}\s*[(<,)]", text):
                keep.add(name)
                todo.append(name)
    if len(keep) == len(funcs):
        return code
    lines = [it.text for it in items if it.kind == "line"]
    body = [it.text for it in items if it.kind == "block" or (it.kind == "function" and it.name in keep)]
    return "\n".join(lines) + "\n\n" + "\n\n".join(body) + "\n"

