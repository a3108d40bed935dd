"""Mechanical fixes of an answer's code that compiles but is wrong by a known slip, applied to every answer
(``search.scaffold.clean_kernel``), before any build: a running sum under a SIMD reduction pragma
(``drop_scan_reductions``), an array reduction over values the loop assigns (``drop_assigned_array_reductions``),
a test of a SIMD loop's reduction result written inside that loop (``move_rechecks_out``), and a blocked kernel
that handles only the first row of each block (``loop_block_rows``). The compiler-driven fixes are ``csource.autofix``.
"""

from __future__ import annotations

import re

from .comments import strip_cpp_comments
from .items import function_text, split_items

_SIMD_REDUCTION = re.compile(r"^(\s*)#pragma\s+omp\s+simd\b[^\n]*\breduction\s*\(\s*[^:()]+:\s*([\w\s,]+)\)[^\n]*$", re.M)
SCAN_NOTE = "// no simd reduction here: each step stores the running value, which a SIMD reduction splits into lanes"


def loop_body(text: str, start: int) -> str:
    """The ``for`` loop that begins at or after ``start``: its header and body (braced or one statement)."""
    m = re.compile(r"\s*for\s*\(").match(text, start)
    if not m:
        return ""
    depth, i = 1, m.end()
    while i < len(text) and depth:
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    j = i
    while j < len(text) and text[j].isspace():
        j += 1
    if j < len(text) and text[j] == "{":
        depth, k = 0, j
        while k < len(text):
            depth += {"{": 1, "}": -1}.get(text[k], 0)
            k += 1
            if depth == 0:
                break
        return text[m.start():k]
    end = text.find(";", j)
    return text[m.start():end + 1 if end >= 0 else len(text)]


def holds_no_loop(code: str, start: int) -> bool:
    """Whether the ``for`` loop at ``start`` of ``code`` holds no other loop."""
    return len(re.findall(r"\bfor\s*\(", loop_body(code, start))) == 1


def innermost_loops(code: str) -> int:
    """How many ``for`` loops of ``code`` hold no other loop: the passes over a row that a row kernel makes
    (a blocked row loop adds a loop, not a pass)."""
    code = strip_cpp_comments(code)
    return sum(holds_no_loop(code, m.start()) for m in re.finditer(r"\bfor\s*\(", code))


def _stores_running_value(body: str, var: str) -> bool:
    """Whether a loop body assigns something computed from ``var`` to anything but ``var`` itself:
    ``yr[c] = s`` after ``s += xr[c]`` is a scan (a running sum), not a reduction."""
    head_end = body.find(")")
    for stmt in re.split(r"[;{}]", body[head_end + 1:] if head_end >= 0 else body):
        m = re.search(r"(?<![=!<>+\-*/%&|^])([+\-*/]?)=(?!=)", stmt)
        if not m:
            continue
        lhs, rhs = stmt[: m.start()], stmt[m.end():]
        target = re.search(r"(\w+(?:\s*\[[^\]]*\])*)\s*$", lhs)
        if target and target.group(1).strip() != var and re.search(rf"\b{re.escape(var)}\b", rhs):
            return True
    return False


def drop_scan_reductions(code: str) -> tuple[str, int]:
    """``code`` without the ``#pragma omp simd reduction(...)`` of loops that store the running value
    of their reduction variable (a cumulative sum written as ``s += x[c]; y[c] = s;``): under the
    pragma each SIMD lane keeps its own partial ``s``, so the stored values are wrong. The loop then
    runs in order, which is what a scan needs. Returns the code and how many pragmas were dropped."""
    dropped = 0
    out, pos = [], 0
    for m in _SIMD_REDUCTION.finditer(code):
        body = loop_body(code, m.end())
        variables = [v.strip() for v in m.group(2).split(",") if v.strip()]
        if body and any(_stores_running_value(body, v) for v in variables):
            out.append(code[pos:m.start()] + m.group(1) + SCAN_NOTE)
            pos = m.end()
            dropped += 1
    out.append(code[pos:])
    return "".join(out), dropped


_PRAGMA_LINE = re.compile(r"^[ \t]*#pragma[ \t]+omp\b[^\n]*$", re.M)
_REDUCTION_CLAUSE = re.compile(r"\s*\breduction\s*\(\s*([^:()]+?)\s*:\s*((?:[^()]|\([^()]*\))*)\)")
_ARRAY_ITEM = re.compile(r"^\s*(\w+)\s*\[")
ARRAY_REDUCTION_NOTE = "// no reduction over {names}: the loop assigns each value once, and a reduction adds what was there"


def _assigned_only(body: str, name: str) -> bool:
    """Whether a loop body writes ``name[...]`` only by plain assignment (``out[i] = v``), never by
    ``+=`` or another compound assignment, an increment or through a pointer taken from it."""
    head_end = body.find(")")
    code = body[head_end + 1:] if head_end >= 0 else body
    writes = re.findall(rf"\b{re.escape(name)}\s*\[[^\]]*\]\s*([-+*/%&|^]?=)(?!=)", code)
    others = re.search(rf"\b{re.escape(name)}\s*\[[^\]]*\]\s*(?:\+\+|--)|(?:\+\+|--)\s*{re.escape(name)}\b|"
                       rf"&\s*{re.escape(name)}\b|\b{re.escape(name)}\s*\+(?!\+)|=\s*{re.escape(name)}\s*[;,)]", code)
    return bool(writes) and all(w == "=" for w in writes) and not others


def _without_assigned_arrays(pragma: str, body: str) -> tuple[str, list[str]]:
    """``pragma`` without the array items of its reduction clauses that ``body`` only assigns; their names."""
    names, out, pos = [], [], 0
    for clause in _REDUCTION_CLAUSE.finditer(pragma):
        items = [it for it in re.split(r",(?![^\[]*\])", clause.group(2)) if it.strip()]
        drop = {it: a.group(1) for it in items if (a := _ARRAY_ITEM.match(it)) and _assigned_only(body, a.group(1))}
        if not drop:
            continue
        names += drop.values()
        rest = [it.strip() for it in items if it not in drop]
        out.append(pragma[pos:clause.start()] + (f" reduction({clause.group(1)} : {', '.join(rest)})" if rest else ""))
        pos = clause.end()
    out.append(pragma[pos:])
    return "".join(out), names


def drop_assigned_array_reductions(code: str) -> tuple[str, int]:
    """``code`` without the array items of OpenMP ``reduction`` clauses (``reduction(+ : out[0 : rows * cols])``)
    whose loop writes that array only by plain assignment. Each thread then works on a private copy set to 0,
    and the copies are added to what the array held before: the output's earlier contents are added to every
    value (dev quick_gelu and bias_leaky_relu_scale: "the kernel assigned none of the output values"). An
    elementwise loop needs no reduction; a loop that accumulates into the array (``+=``) keeps its clause.
    Returns the code and how many array items were dropped."""
    dropped, out, pos = 0, [], 0
    for line in _PRAGMA_LINE.finditer(code):
        body = loop_body(code, line.end())
        new, names = _without_assigned_arrays(line.group(0), body) if body else (line.group(0), [])
        if names:
            indent = re.match(r"[ \t]*", new).group(0)
            out.append(code[pos:line.start()] + indent + ARRAY_REDUCTION_NOTE.format(names=", ".join(names)) + "\n"
                       + new)
            pos = line.end()
            dropped += len(names)
    out.append(code[pos:])
    return "".join(out), dropped


RECHECK_NOTE = "// after the loop: this test reads the loop's {names}, which inside it is one lane's partial value"


def _braced_end(text: str, start: int) -> int:
    """The index just past the brace that closes the one opening at or after ``start``; -1 when none does."""
    open_at = text.find("{", start)
    depth = 0
    for k in range(open_at, len(text) if open_at >= 0 else 0):
        depth += {"{": 1, "}": -1}.get(text[k], 0)
        if depth == 0:
            return k + 1
    return -1


def _last_test(body: str) -> re.Match | None:
    """The ``if (...) {`` that opens the last statement of a loop's braced ``body`` (its text between the braces),
    when that statement is such a block holding a loop and nothing but space follows it; None otherwise."""
    depth, last = 0, None
    for m in re.finditer(r"[{}]|\bif\s*\(", body):
        tok = m.group(0)
        if tok in "{}":
            depth += 1 if tok == "{" else -1
        elif depth == 0:
            last = m
    if last is None:
        return None
    end = _braced_end(body, last.start())
    if end < 0 or body[end:].strip() or not re.search(r"\bfor\s*\(", body[last.start():end]):
        return None
    head = body[last.start():body.find("{", last.start())]
    return last if "else" not in body[end:] and head.count("(") == head.count(")") else None


def move_rechecks_out(code: str) -> tuple[str, int]:
    """``code`` with a test of a SIMD loop's reduction result moved after that loop, where the loop's last statement
    is such a test holding a loop of its own. Asked to fuse a row's maximum into the loop that sums its exponentials
    at a reference and to sum again only when the maximum lies far above it, the default model closed the fused
    loop after the "sum again" test (dev/smoothed_cross_entropy: correct, 0.31x eager against 1.91x for the same
    answer with the test after the loop): the test and its loop over the row then run for every value, on one
    lane's partial maximum, and sum again on top of a sum half done. After the loop the test runs once, on the
    row's maximum. Returns the code and how many tests were moved."""
    moved = 0
    for line in reversed(list(_PRAGMA_LINE.finditer(code))):
        names = [v.strip() for c in _REDUCTION_CLAUSE.finditer(line.group(0)) for v in c.group(2).split(",")]
        loop = loop_body(code, line.end())
        if "simd" not in line.group(0) or not names or not loop.rstrip().endswith("}"):
            continue
        start = code.index(loop, line.end())
        open_at = loop.index("{", loop.index(")"))
        body = loop[open_at + 1:loop.rindex("}")]
        test = _last_test(body)
        if test is None:
            continue
        end = _braced_end(body, test.start())
        cond = body[test.end():body.find("{", test.start())]
        used = [n for n in names if re.search(rf"\b{re.escape(n)}\b", cond)]
        if not used:
            continue
        line_start = body.rfind("\n", 0, test.start()) + 1
        block = body[line_start:end]
        inner = len(block) - len(block.lstrip(" \t"))
        outer = len(line.group(0)) - len(line.group(0).lstrip(" \t"))
        lines = [ln[inner - outer:] if ln[:inner - outer].strip() == "" else ln.lstrip() for ln in block.split("\n")]
        pad = " " * outer
        new_loop = loop[:open_at + 1] + body[:line_start].rstrip() + "\n" + pad + "}"
        after = "\n" + pad + RECHECK_NOTE.format(names=", ".join(used)) + "\n" + "\n".join(lines)
        code = code[:start] + new_loop + after + code[start + len(loop):]
        moved += 1
    return code, moved


_BLOCK_LOOP = re.compile(r"for\s*\(\s*(?:const\s+)?(?:int64_t|int|long|size_t)\s+(\w+)\s*=\s*0\s*;\s*\1\s*<\s*(\w+)\s*;"
                         r"\s*\1\s*\+=\s*(\w+)\s*\)\s*\{")
BLOCK_NOTE = "// each row of the block (the answer handled only the block's first row)"


def _block_end(body: str, r0: str, bound: str, step: str) -> re.Match | None:
    """The declaration of the block's end in ``body``: ``const int64_t r1 = std::min(rows, r0 + tile);``."""
    return re.search(rf"^[ \t]*(?:const\s+)?(?:int64_t|int|long|size_t|auto)\s+(\w+)\s*=\s*(?:std::)?min\s*"
                     rf"(?:<\s*\w+\s*>)?\s*\(\s*(?:{bound}\s*,\s*{r0}\s*\+\s*{step}|{r0}\s*\+\s*{step}\s*,\s*{bound})"
                     rf"\s*\)\s*;[^\n]*\n", body, re.M)


def _declares(code: str, name: str) -> bool:
    """Whether ``code`` declares ``name`` anywhere: a variable, a loop variable or a parameter."""
    return bool(re.search(rf"\b(?:int64_t|int32_t|int|long|size_t|auto|unsigned|float|double)\s*[*&]?\s*{re.escape(name)}\s*[=;,)\[]",
                          code))


def loop_block_rows(code: str) -> tuple[str, int]:
    """``code`` with each block of rows looped over where an answer to "block the rows" handled only its
    first row: ``for (r0 = 0; r0 < rows; r0 += tile) { r1 = min(rows, r0 + tile); <one row at r0> }``
    with no loop from r0 to r1 (``const int64_t r = r0;``, or r0 used as the row) leaves the other rows of
    every block unwritten (dev layer_norm_residual); with a row ``r`` used and declared nowhere, it does not
    build (dev l2_normalize and log_softmax: "'r' was not declared"). The work of that one row
    becomes the body of ``for (r = r0; r < r1; ++r)``; a kernel that loops over its blocks' rows is
    untouched. Returns the code and how many blocks were mended."""
    mended, pos, out = 0, 0, []
    for m in _BLOCK_LOOP.finditer(code):
        if m.start() < pos:
            continue
        r0, bound, step = m.groups()
        loop = loop_body(code, m.start())  # from `for` to its closing brace
        k = m.start() + len(loop)
        body = code[m.end():k - 1]
        end = _block_end(body, r0, bound, step)
        if end is None:
            continue
        r1, rest = end.group(1), body[end.end():]
        if re.search(rf"\bfor\s*\([^;]*=\s*{r0}\s*;[^;]*<\s*{r1}\b", rest) or re.search(rf"\b{r1}\b", rest):
            continue  # the rows are looped over (or the block's end is used some other way)
        alias = re.search(rf"^[ \t]*(?:const\s+)?(?:int64_t|int|long|size_t|auto)\s+(\w+)\s*=\s*{r0}\s*;[^\n]*\n",
                          rest, re.M)
        if alias:
            row, rest = alias.group(1), rest[:alias.start()] + rest[alias.end():]
        elif not re.search(r"\br\b", rest) or not _declares(code, "r"):
            row = "r"  # r0 as the row, or a row `r` used and never declared
        else:
            continue
        rest = re.sub(rf"\b{r0}\b", row, rest)
        indent = re.match(r"[ \t]*", end.group(0)).group(0)
        inner = "\n".join(("    " + ln) if ln.strip() else ln for ln in rest.rstrip().split("\n"))
        new_body = (body[:end.end()] + f"{indent}{BLOCK_NOTE}\n{indent}for (int64_t {row} = {r0}; {row} < {r1}; "
                    f"++{row}) {{\n{inner}\n{indent}}}\n{indent[:-4] if len(indent) >= 4 else ''}")
        out.append(code[pos:m.end()] + new_body)
        pos = k - 1
        mended += 1
    out.append(code[pos:])
    return "".join(out), mended


# the placeholder of a pattern over rows (``directives.Directive.prompt_text``: "per-row work", or "work of each o"
# where the kernel's outer loop is over ``o``), as an answer that copied the pattern literally keeps it
_ELIDED = re.compile(r"^([ \t]*)//\s*\.{3}\s*the same (?:per-row work|work of each (\w+)) as before\s*\.{3}[ \t]*$", re.M)


def fill_elided_rows(code: str, parent: str) -> tuple[str, int]:
    """``code`` with the pattern's placeholder ("// ... the same per-row work as before ...") replaced by the
    parent's work of one row: asked to block the rows of a long row kernel (a lowered cross-entropy of 50
    lines), the default model wrote the blocked loops around the pattern's comment and nothing else, so the
    kernel wrote no output (dev/smoothed_cross_entropy; 9 such answers in the recorded sessions). The parent's
    work of one row is the body of its loop ``for (int64_t r = 0; r < bound; ++r)`` (``r`` the pattern's row
    variable), which the answer's loop over each block's rows declares too. A function that is nothing but the
    comment is the parent's function handed back (dev/log_softmax: an entry point of that one line). Returns the
    code and how many placeholders were filled."""
    filled = 0
    for m in reversed(list(_ELIDED.finditer(code))):
        var = m.group(2) or "r"
        if not re.search(rf"\bfor\s*\(\s*(?:int64_t|int|long|size_t)\s+{var}\s*=", code[:m.start()]):
            # no loop over the row variable around the comment: a function that is nothing but the comment is the
            # parent's function handed back ("the same as before"), anything else is left as it is
            whole = _whole_function_elided(code, m.start(), parent)
            if whole is not None:
                code, filled = whole, filled + 1
            continue
        head = re.search(rf"for\s*\(\s*(?:int64_t|int|long|size_t)\s+{var}\s*=\s*0\s*;[^;]*;[^)]*\)\s*\{{", parent)
        if head is None:
            continue
        loop = loop_body(parent, head.start())
        body = loop[loop.index("{", head.end() - head.start() - 1) + 1:loop.rindex("}")].strip("\n")
        if not body.strip() or _ELIDED.search(body):
            continue
        lines = body.split("\n")
        base = min((len(ln) - len(ln.lstrip()) for ln in lines if ln.strip()), default=0)
        indent = m.group(1)
        text = "\n".join(indent + ln[base:] if ln.strip() else "" for ln in lines)
        code = code[:m.start()] + text + code[m.end():]
        filled += 1
    return code, filled


def _whole_function_elided(code: str, at: int, parent: str) -> str | None:
    """``code`` with the function whose body is only the pattern's comment (at ``at``) replaced by the parent's
    function of that name; None when that function has more in it, or the parent has no such function."""
    start = 0
    for it in split_items(code):
        start = code.find(it.text, start)
        if it.kind == "function" and start <= at < start + len(it.text):
            body = strip_cpp_comments(it.text[it.text.index("{") + 1:it.text.rindex("}")])
            old = function_text(parent, it.name)
            if body.strip() or old is None:
                return None
            return code[:start] + old + code[start + len(it.text):]
        start += len(it.text)
    return None
