"""``autofix``'s fixes for a name the compiler says was not declared in this scope: each looks at the
line of the error and the function around it, and changes the kernel only where the model's intent is
plain (a pattern constant it forgot, a declaration above the value it uses, a loop variable used past
its loop). ``fix_undeclared`` tries them in turn."""

from __future__ import annotations

import re

FN_HEAD = re.compile(r"^\S.*\)\s*(?:const\s*)?\{?\s*$")  # a top-level function's head line

# constants the directive patterns declare (cache_blocking's `const int64_t tile = 8;`), which the model
# sometimes uses without declaring (docs/benchmarks.md counts how often)
PATTERN_CONSTANTS = {"tile": "const int64_t tile = 8;"}


def _declare_constant(lines: list[str], idx: int, name: str) -> bool:
    """Declare a pattern constant at the top of the function that uses it (once)."""
    for k in range(idx, -1, -1):
        if FN_HEAD.match(lines[k]):
            if any(PATTERN_CONSTANTS[name] in line for line in lines[k:idx]):
                return False
            at = k + 1 if lines[k].rstrip().endswith("{") else k + 2
            lines.insert(at, "    " + PATTERN_CONSTANTS[name])
            return True
    return False


def _hoist_loop_variable(lines: list[str], idx: int, name: str) -> bool:
    """``for (int64_t c = 0; ...) {...} for (; c < n; ++c)``: the tail loop uses the variable of the
    loop before it. Declare it before that loop (and before the pragmas on it) instead."""
    if not re.match(rf"\s*for\s*\(\s*;[^;]*\b{re.escape(name)}\b", lines[idx]):
        return False
    decl = re.compile(rf"for\s*\(\s*((?:const\s+)?(?:std::)?(?:int64_t|int32_t|int|long|long long|size_t|unsigned))\s+"
                      rf"{re.escape(name)}\s*=\s*([^;]+);")
    declared = re.compile(rf"^\s*(?:int64_t|int32_t|int|long|size_t)\s+{re.escape(name)}\s*=")
    empty_init = re.compile(rf"^\s*for\s*\(\s*;[^;]*\b{re.escape(name)}\b")
    first_use = idx  # the topmost loop of this function that uses the variable without declaring it

    def declare(at: int, text: str) -> None:
        while at > 0 and re.match(r"\s*#\s*pragma\b", lines[at - 1]):
            at -= 1  # before the pragmas on the loop
        lines.insert(at, text)

    for k in range(idx - 1, max(-1, idx - 60), -1):
        if declared.match(lines[k]):
            return False  # declared already (by an earlier fix)
        m = decl.search(lines[k])
        if m:
            indent = re.match(r"\s*", lines[k]).group(0)
            lines[k] = lines[k][: m.start()] + "for (;" + lines[k][m.end():]
            declare(k, f"{indent}{m.group(1)} {name} = {m.group(2).strip()};")
            return True
        if empty_init.match(lines[k]):
            first_use = k
        if FN_HEAD.match(lines[k]):
            break
    # no loop declares it: the unrolled loop that comes first starts from 0
    indent = re.match(r"\s*", lines[first_use]).group(0)
    declare(first_use, f"{indent}int64_t {name} = 0;")
    return True


_FOR_HEAD = re.compile(r"\bfor\s*\(\s*(?:const\s+)?(?:std::)?(?:int64_t|int32_t|int|long|long long|size_t|unsigned)\s+"
                       r"(\w+)\s*=[^;]*;[^;]*;[^)]*\)")


def _rename_loop_variable(lines: list[str], idx: int, name: str) -> bool:
    """``for (int64_t i = 0; ...) acc[i] = 0; for (int64_t k = 0; k < n; ++k) acc[i] += x[k];``: a helper's
    loop written inline with its variable renamed in one place, the old name left in another (out of scope:
    the loop that declared it has ended). When the undeclared ``name`` sits in the body of a loop (on its
    line or the next) whose own variable is another, and an earlier loop of the function declared ``name``
    in its header, the body uses the loop's variable."""
    use = re.compile(rf"(?<![\w.>]){re.escape(name)}\b")
    for head in (idx, idx - 1):
        if head < 0:
            continue
        m = list(_FOR_HEAD.finditer(lines[head]))
        if not m:
            continue
        var, body_at = m[-1].group(1), m[-1].end()
        if var == name or (head != idx and lines[head][body_at:].strip() not in ("", "{")):
            return False
        start = body_at if head == idx else 0
        body = lines[idx][start:]
        if not use.search(body) or (head == idx and not re.search(rf"\b{re.escape(var)}\b", body)):
            return False
        span = function_span(lines, idx)
        first = span[0] if span else max(0, idx - 60)
        if not any(h.group(1) == name for k in range(first, head) for h in _FOR_HEAD.finditer(lines[k])):
            return False
        lines[idx] = lines[idx][:start] + use.sub(var, body)
        return True
    return False


_LOCAL_DECL = re.compile(r"^\s*(?:const\s+)?(?:float|double|int|int64_t|int32_t|long|size_t|auto)\s+(\w+)\s*=[^;]*;\s*(?://.*)?$")


def function_span(lines: list[str], idx: int) -> tuple[int, int] | None:
    """(head line, closing line) of the top-level function around line ``idx``."""
    head = next((k for k in range(idx, -1, -1) if FN_HEAD.match(lines[k])), None)
    if head is None:
        return None
    end = next((k for k in range(idx, len(lines)) if lines[k].startswith("}")), len(lines) - 1)
    return head, end


def _drop_unused_declaration(lines: list[str], idx: int, name: str) -> bool:
    """``const int64_t count = per_group * spatial;`` pasted into a helper where ``per_group`` does not
    exist: a local declaration that uses an undeclared name and that nothing else in the function
    reads is dropped (it can have no effect on the result)."""
    m = _LOCAL_DECL.match(lines[idx])
    span = function_span(lines, idx)
    if not m or span is None or not re.search(rf"\b{re.escape(name)}\b", lines[idx].split("=", 1)[1]):
        return False
    declared = m.group(1)
    if any(re.search(rf"\b{re.escape(declared)}\b", lines[k]) for k in range(span[0], span[1] + 1) if k != idx):
        return False
    lines[idx] = ""  # blank, not removed: the compiler's other line numbers stay valid
    return True


def _move_after_operand(lines: list[str], idx: int, name: str) -> bool:
    """``const float inv = 1.0f / norm;`` at the top of a function whose loop over the rows sets ``norm`` further
    down: a local declaration that uses a name the function declares only later (in a block below it) moves to
    just after that declaration, when everything that reads it comes after that point, inside the same block
    (asked to take a row's reciprocal once before the loop over its values, the default model put it before the
    loop over the rows: 8 of 16 such edits of dev/l2_normalize, "'v_clamp' was not declared in this scope")."""
    m = _LOCAL_DECL.match(lines[idx])
    span = function_span(lines, idx)
    if not m or span is None or not re.search(rf"\b{re.escape(name)}\b", lines[idx].split("=", 1)[1]):
        return False
    declared, end = m.group(1), span[1]
    sets = re.compile(rf"^\s*(?:const\s+)?(?:float|double|int|int64_t|int32_t|long|size_t|auto)\s+{re.escape(name)}\s*=")
    at = next((k for k in range(idx + 1, end) if sets.match(lines[k])), None)
    if at is None or ";" not in lines[at]:
        return False
    reads = re.compile(rf"\b{re.escape(declared)}\b")
    depth, close = 0, end
    for k in range(at + 1, end + 1):  # where the block that declares ``name`` ends
        depth += lines[k].count("{") - lines[k].count("}")
        if depth < 0:
            close = k
            break
    if any(reads.search(lines[k]) for k in range(span[0], at + 1) if k != idx):
        return False  # read before the value it needs is set
    if any(reads.search(lines[k]) for k in range(close, end + 1)):
        return False  # read after the block that sets the value has ended
    indent = re.match(r"\s*", lines[at]).group(0)
    moved = indent + lines[idx].strip()
    lines[idx] = ""  # blank, not removed: the compiler's other line numbers stay valid
    lines.insert(at + 1, moved)
    return True


LOOP_VARIABLE_DECLARED = "loop variable declared before its loop"


def fix_undeclared(lines: list[str], idx: int, name: str) -> str | None:
    """Fix ``name``, undeclared at line ``idx`` of ``lines`` (changed in place), by the first of the fixes
    above that applies; what was done, or None when none did."""
    if name in PATTERN_CONSTANTS:
        return f"`{name}` declared" if _declare_constant(lines, idx, name) else None
    if _drop_unused_declaration(lines, idx, name):
        return "unused declaration dropped"
    if _move_after_operand(lines, idx, name):
        return "declaration moved after the value it uses"
    if _hoist_loop_variable(lines, idx, name):
        return LOOP_VARIABLE_DECLARED
    if _rename_loop_variable(lines, idx, name):
        return "an ended loop's variable replaced by the loop's own"
    return None
