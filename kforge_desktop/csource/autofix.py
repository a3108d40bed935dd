"""Mechanical fixes for the compile errors a small model makes most often, driven by the compiler's
own messages (``autofix``). No judgement is involved, so no LLM call and no budget is spent; the
caller checks the fixed kernel again.
"""

from __future__ import annotations

import platform
import re

from .autofix_scope import LOOP_VARIABLE_DECLARED, PATTERN_CONSTANTS, fix_undeclared, function_span
from .items import ENTRY, function_head, split_items
from .nvcc_form import gcc_form as _gcc_form

_CONST_ERR = re.compile(r"kernel\.(?:cpp|cu):(\d+):\d+: error: invalid conversion from [‘'`]const (\w+)\s*\*[’'`] to "
                        r"[‘'`](\w+)\s*\*[’'`]")
_DECL = re.compile(r"^(\s*)(?!const\b)((?:unsigned\s+)?\w+\s*\*\s*(?:__restrict__\s+)?\w+\s*=)")
_CONST_ARG_NOTE = re.compile(r"error: invalid conversion from [‘'`]const \w+\s*\*[’'`][^\n]*\n(?:[^\n]*\n){0,6}?"
                             r"kernel\.(?:cpp|cu):(\d+):(\d+): note:\s+initializing argument \d+ of")
_COLLAPSE_ERR = re.compile(r"kernel\.(?:cpp|cu):(\d+):\d+: error: not enough (?:for )?loops to collapse")
_ANY_ERR = re.compile(r"kernel\.(?:cpp|cu):(\d+):\d+: error:")
_UNDECLARED = re.compile(r"error: [‘'`](\w+)[’'`] was not declared in this scope")
_UNDECLARED_AT = re.compile(r"kernel\.(?:cpp|cu):(\d+):\d+: error: [‘'`](\w+)[’'`] was not declared in this scope")
# a name in an OpenMP clause that nothing declares (``reduction(+ : s)`` with no ``float s``)
_UNDECLARED_CLAUSE = re.compile(r"kernel\.(?:cpp|cu):(\d+):\d+: error: [‘'`](\w+)[’'`] has not been declared")
# what a reduction starts from
_REDUCTION_START = {"+": "0.0f", "max": "-INFINITY", "min": "INFINITY"}
# OpenMP's canonical-loop errors, reported on the loop the pragma applies to
_OMP_LOOP_ERR = re.compile(r"kernel\.(?:cpp|cu):(\d+):\d+: error: (?:invalid controlling predicate|invalid increment "
                           r"expression|expected iteration declaration or initialization|invalid type for iteration "
                           r"variable|initializer expression refers to iteration variable)")
# std::max(v, 1e-12) with a float v: the literal is a double, and the template cannot deduce one type
_MIXED_MINMAX_ERR = re.compile(r"kernel\.(?:cpp|cu):(\d+):\d+: error: no matching function for call to "
                               r"[‘'`](?:std::)?(?:max|min)\((?:\s*(?:const\s+)?float&?,\s*(?:const\s+)?double&?|"
                               r"\s*(?:const\s+)?double&?,\s*(?:const\s+)?float&?)\)")
DOUBLE_LITERAL = re.compile(r"(?<![\w.])(\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\.\d+(?:[eE][+-]?\d+)?)(?![\w.])")
# the header of each standard name a kernel may use without including it (the prelude has only
# <cmath>, <cstdint>, <algorithm>, <limits>): "'vector' in namespace 'std' does not name a template type"
_STD_HEADERS = {
    "vector": "vector", "array": "array", "inner_product": "numeric", "accumulate": "numeric",
    "iota": "numeric", "partial_sum": "numeric", "inclusive_scan": "numeric", "exclusive_scan": "numeric",
    "memcpy": "cstring", "memset": "cstring", "pair": "utility",
    "unique_ptr": "memory", "function": "functional", "invalid_argument": "stdexcept", "runtime_error": "stdexcept",
    "out_of_range": "stdexcept", "numeric_limits": "limits",
}
# std::min(rows / 2, 32) with an int64_t rows: two integer types, and the template cannot deduce one
_INT_TYPE = r"(?:const\s+)?(?:(?:long |unsigned |short )*(?:int|long)|u?int(?:64|32|16)_t|size_t)&?"
_INT_MINMAX_ERR = re.compile(r"kernel\.(?:cpp|cu):(\d+):\d+: error: no matching function for call to "
                             rf"[‘'`](?:std::)?(?:max|min)\((?:\s*{_INT_TYPE},?)+\)")
# std::min(512, std::ceil(n / 8.0)) in a launch shape: an integer and a floating type, and the template cannot deduce
# one; the declaration the line makes says which (``int block = ...``: ``std::min<int64_t>``)
_REAL_TYPE = r"(?:const\s+)?(?:float|double|__gnu_cxx::__enable_if<true, (?:float|double)>::__type)&?"  # g++: std::ceil(int)
_NUM_MINMAX_ERR = re.compile(r"kernel\.(?:cpp|cu):(\d+):\d+: error: no matching function for call to "
                             rf"[‘'`](?:std::)?(?:max|min)\(\s*(?:{_INT_TYPE},\s*{_REAL_TYPE}|{_REAL_TYPE},\s*{_INT_TYPE})\)")
_DECLARED_TYPE = re.compile(r"^\s*(?:const\s+)?(?:(int|int64_t|int32_t|long|size_t|unsigned)|(float|double))\s+\w+\s*=")
# a name the compiler does not know, in any of g++'s words for it
_UNKNOWN_NAME = re.compile(r"error: [‘'`](\w+)[’'`] (?:was not declared in this scope|has not been declared|"
                           r"does not name a type)")
# the header of each family of names a CPU kernel may use without including it, on the machine that has them: the
# default model writes AVX-512 vectors (``__m512 acc = _mm512_setzero_ps();``) with no include, the first error of 19
# recorded dev answers that did not build (six problems); with the header 10 of them build and one is correct, the
# others crash (benchmarks/results/generalize/replay_dev_intrinsics.txt). NEON is written the same way on Arm
_MACHINE = platform.machine().lower()
_UNDECLARED_HEADERS = (
    (re.compile(r"__m(?:64|128|256|512)[dhi]?|__mmask\d+|_mm(?:256|512)?_\w+"), "immintrin.h",
     _MACHINE in ("x86_64", "amd64", "i686")),
    (re.compile(r"(?:float|u?int|poly)(?:8|16|32|64)x\d+(?:x\d)?_t|v\w+_[fsup](?:8|16|32|64)"), "arm_neon.h",
     _MACHINE in ("aarch64", "arm64")),
    (re.compile(r"assert"), "cassert", True),
)
# a const local with no value (``const float t;`` then written by inline assembly or assigned): g++ and nvcc
_CONST_UNSET_ERR = re.compile(r"kernel\.(?:cpp|cu):(\d+):\d+: error: (?:uninitialized [‘'`]const (\w+)[’'`]|"
                              r"const variable \"(\w+)\" requires an initializer)")
# math functions a small model writes as intrinsics that do not exist (``__sqrtf``; ``__expf`` and ``__logf``
# exist and are never reported): the name without its underscores is the standard function
_HOST_CALL = re.compile(r'calling a __host__ function\("(\w+)"\)')
_MATH_NAMES = {"sqrtf", "rsqrtf", "fabsf", "tanhf", "expf", "logf", "erff", "powf", "sinf", "cosf", "exp2f", "log2f",
               "fmaxf", "fminf", "floorf", "ceilf", "sqrt", "rsqrt", "exp", "log", "tanh", "fabs", "erf", "pow"}


_NO_RETURN_ERR = re.compile(r"kernel\.(?:cpp|cu):(\d+):\d+: error: no return statement in function returning non-void")


def _void_unused(lines: list[str], end: int) -> bool:
    """The function whose closing brace is line ``end`` has no ``return value;`` and every call of it
    is a statement of its own: declare it ``void`` (what the body does is all the callers use)."""
    for k in range(end, -1, -1):
        m = re.match(r"^((?:static\s+|inline\s+|extern\s+\"C\"\s+)*)(float|double|int|int64_t|bool)\s+(\w+)\s*\(",
                     lines[k])
        if m:
            break
        if k < end and lines[k].startswith("}"):
            return False
    else:
        return False
    body = "\n".join(lines[k:end + 1])
    if re.search(r"\breturn\s+[^;\s]", body):
        return False
    name = m.group(3)
    rest = "\n".join(lines[:k] + lines[end + 1:])
    calls = re.findall(rf"([^\n]*?)\b{re.escape(name)}\s*\(", rest)
    if any(not re.fullmatch(r"\s*", before) for before in calls):
        return False  # some caller uses the value
    lines[k] = lines[k][: m.start(2)] + "void" + lines[k][m.end(2):]
    return True


_READ_ONLY_ERR = re.compile(r"kernel\.(?:cpp|cu):(\d+):\d+: error: assignment of read-only variable [‘'`](\w+)[’'`]")


def _unconst_assigned(lines: list[str], idx: int, name: str) -> bool:
    """``const float s0 = v[0];`` and then ``s0 += v[c];``: a local declared const but assigned later
    loses the const (which changes nothing else in a program that compiles)."""
    span = function_span(lines, idx)
    if span is None:
        return False
    decl = re.compile(rf"\bconst\s+((?:float|double|int|int64_t|int32_t|long|size_t|auto)\s+{re.escape(name)}\s*[=;])")
    for k in range(idx - 1, span[0] - 1, -1):
        if decl.search(lines[k]):
            lines[k] = decl.sub(r"\1", lines[k], count=1)
            return True
    return False


_CONST_TO_MUTABLE_ERR = re.compile(r"kernel\.(?:cpp|cu):(\d+):(\d+): error: invalid conversion from [‘'`]const \w+\s*\*[’'`] "
                                   r"to [‘'`]\w+\s*\*[’'`]")


def _declare_reduction(lines: list[str], idx: int, name: str) -> bool:
    """``float bm = v_amax;`` then ``#pragma omp simd reduction(max : bm) reduction(+ : s)``, ``s`` declared nowhere
    (the reference-maximum pattern's first wording declared both on one line, ``float bm = -INFINITY, s = 0.0f;``,
    and the default model kept one: 3 of 12 dev samples): the reduction's variable is declared on the line above the
    pragma, with what that reduction starts from, when the loop under it accumulates into it (``s +=``, ``s = ...
    s``). The line keeps its place, so the compiler's other line numbers stay valid: the declaration joins the
    pragma's line, before it."""
    clause = re.search(rf"reduction\s*\(\s*(\+|max|min)\s*:[^)]*\b{re.escape(name)}\b[^)]*\)", lines[idx])
    if not clause or not re.match(r"\s*#\s*pragma\s+omp\b", lines[idx]):
        return False
    loop = "\n".join(lines[idx + 1: idx + 12])
    if not re.search(rf"\b{re.escape(name)}\s*(?:\+=|=[^=])", loop):
        return False
    indent = re.match(r"\s*", lines[idx]).group(0)
    lines[idx] = f"{indent}float {name} = {_REDUCTION_START[clause.group(1)]};\n{lines[idx]}"
    return True


def _writable_params(text: str, entry: str) -> set[str]:
    """The entry point's pointer parameters it may write through (its outputs)."""
    head = function_head(text, entry)
    m = re.search(r"\(([^)]*)\)", head) if head else None
    if m is None:
        return set()
    out = set()
    for piece in m.group(1).split(","):
        words = re.findall(r"\w+", piece)
        if "*" in piece and "const" not in words and words:
            out.add(words[-1])
    return out


def _unconst_output_pointer(lines: list[str], idx: int, col: int, outputs: set[str]) -> bool:
    """``const float* yr = out + r * cols;`` passed where a ``float*`` is wanted: a pointer into an
    output the kernel writes is not const (the const goes; the helper's parameter stays writable)."""
    line = lines[idx]
    m = re.match(r"\w+", line[col:]) if 0 <= col < len(line) else None
    span = function_span(lines, idx) if m else None
    if m is None or span is None:
        return False
    decl = re.compile(rf"\b(const\s+)?(\w+\s*\*\s*(?:__restrict__\s+)?{re.escape(m.group(0))}\s*=\s*([^;]*);)")
    for k in range(idx, span[0] - 1, -1):
        d = decl.search(lines[k])
        if d:
            if not set(re.findall(r"\w+", d.group(3))) & outputs:
                return False
            if d.group(1):  # (without it: already made writable for another call of this round)
                lines[k] = lines[k][: d.start()] + d.group(2) + lines[k][d.end():]
            return True
    return False


def _line_offset(prelude: str) -> int:
    return (prelude + "\n").count("\n") if prelude else 0


def _replace_call(text: str, name: str, template: str) -> str:
    """Rewrite every ``name(arg)`` as ``template.format(arg)``, matching parentheses."""
    out, i = [], 0
    pat = re.compile(rf"{re.escape(name)}\s*\(")
    while True:
        m = pat.search(text, i)
        if not m:
            out.append(text[i:])
            return "".join(out)
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += text[j] == "("
            depth -= text[j] == ")"
            j += 1
        if depth:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:m.start()] + template.format(text[m.end():j - 1]))
        i = j


def autofix(kernel: str, prelude: str, errors: str, entry: str = ENTRY) -> tuple[str, list[str]] | None:
    """Mechanical fixes for the compile errors a small model makes most often here, driven by the
    compiler's own messages; no judgement, so no LLM call and no budget spent:

    - a pointer into a ``const`` input declared without ``const`` (``float* xr = x + r * cols;``);
    - ``collapse(n)`` on an OpenMP loop nest that no longer has n loops, and any other OpenMP pragma
      the compiler rejects (dropped: a pragma only speeds a correct loop up);
    - ``const float const`` (a repeated qualifier);
    - a helper used before it is defined (forward declarations are added);
    - functions that do not exist in C++: ``std::rsqrt``, ``rsqrtf`` on the CPU, ``std::pi``;
    - a local declared ``const`` and assigned later; a local nothing reads whose initializer uses an
      undeclared name (dropped); a local whose initializer uses a name the function sets only further down
      (moved after it, when everything that reads it follows there); these and the loop variable fixes are
      ``autofix_scope.fix_undeclared``;
    - a double literal beside a float in ``std::max``/``std::min`` (``std::max(v, 1e-12)``: ``1e-12f``), two
      integer types there (``std::min(rows / 2, 32)`` with an ``int64_t rows``: ``std::min<int64_t>``), and an
      integer beside a floating value in a declaration (``int b = std::min(512, std::ceil(n / 8.0));``: the
      declared kind, ``std::min<int64_t>``);
    - a pointer into an output declared ``const`` and passed to a helper that writes through it;
    - a standard name used without its header (``std::vector``, ``std::inner_product``);
    - a loop's body that still uses the variable of a loop that ended before it;
    - a ``const`` local declared with no value (``const float t;`` written by inline assembly): not const;
    - a reduction clause's variable that nothing declares: declared above its pragma, from 0 (a sum) or -inf (a
      maximum);
    - an intrinsic that does not exist (``__sqrtf``, ``__fabsf``): the standard function (``sqrtf``);
    - vector intrinsics used without their header (``__m512``: ``<immintrin.h>`` on x86, NEON's ``<arm_neon.h>``
      on Arm), and ``assert`` without ``<cassert>``.

    nvcc's messages count as g++'s for the same errors (``nvcc_form.gcc_form``).
    ``prelude`` is the text the kernel is compiled after (the compiler's line numbers count it);
    ``entry`` is the kernel's ``extern "C"`` entry point, which needs no forward declaration.
    Returns (fixed kernel, what was fixed) or None when nothing applied. The caller re-checks."""
    errors = _gcc_form(errors)
    offset = _line_offset(prelude)
    lines = kernel.split("\n")
    notes: list[str] = []
    for m in _CONST_ERR.finditer(errors):
        idx = int(m.group(1)) - 1 - offset
        if 0 <= idx < len(lines):
            fixed = _DECL.sub(r"\1const \2", lines[idx], count=1)
            if fixed != lines[idx]:
                lines[idx] = fixed
                if "const pointers" not in notes:
                    notes.append("const pointers")
    outputs = _writable_params(kernel, entry)
    handled = []  # the errors fixed at the argument: a pointer into an output declared const
    for m in _CONST_TO_MUTABLE_ERR.finditer(errors):
        idx, col = int(m.group(1)) - 1 - offset, int(m.group(2)) - 1
        if 0 <= idx < len(lines) and _unconst_output_pointer(lines, idx, col, outputs):
            handled.append((m.start(), m.end()))
            if "const dropped from a pointer into the output" not in notes:
                notes.append("const dropped from a pointer into the output")
    for m in _CONST_ARG_NOTE.finditer(errors):  # a const input passed to a helper's non-const parameter
        if any(a <= m.start() < b for a, b in handled):
            continue
        idx, col = int(m.group(1)) - 1 - offset, int(m.group(2)) - 1
        if 0 <= idx < len(lines):
            params = list(re.finditer(r"(?<![\w\s])(\s*)(float|double|int|int64_t)(\s*\*)", lines[idx]))
            near = [p for p in params if p.start(2) <= col + 2 and col <= p.end(3) + 32]
            if near:
                p = min(near, key=lambda p: abs(p.start(2) - col))
                lines[idx] = lines[idx][: p.start(2)] + "const " + lines[idx][p.start(2):]
                if "const pointers" not in notes:
                    notes.append("const pointers")
    for m in _COLLAPSE_ERR.finditer(errors):
        idx = int(m.group(1)) - 1 - offset
        for k in range(max(0, idx - 3), min(len(lines), idx + 1))[::-1]:
            if "collapse" in lines[k] and "#pragma" in lines[k]:
                lines[k] = re.sub(r"\s*collapse\s*\(\s*\d+\s*\)", "", lines[k])
                notes.append("collapse clause")
                break
    declared = set()  # the pragma lines whose reduction got the variable it names (kept)
    for m in _UNDECLARED_CLAUSE.finditer(errors):
        idx = int(m.group(1)) - 1 - offset
        if 0 <= idx < len(lines) and _declare_reduction(lines, idx, m.group(2)):
            declared.add(idx)
            if "reduction variable declared" not in notes:
                notes.append("reduction variable declared")
    for m in _ANY_ERR.finditer(errors):
        idx = int(m.group(1)) - 1 - offset
        if 0 <= idx < len(lines) and idx not in declared and re.match(r"\s*#\s*pragma\s+omp\b", lines[idx]):
            lines[idx] = ""  # an OpenMP pragma only ever speeds a correct loop up: without it, still correct
            if "OpenMP pragma" not in notes:
                notes.append("OpenMP pragma")
    # a loop that uses an undeclared name is judged again once the name is declared (below)
    undeclared_lines = {int(m.group(1)) - 1 - offset for m in _UNDECLARED_AT.finditer(errors)
                        if m.group(2) in PATTERN_CONSTANTS}
    for m in _OMP_LOOP_ERR.finditer(errors):  # the loop is not in OpenMP's form: its pragma goes
        idx = int(m.group(1)) - 1 - offset
        if idx in undeclared_lines:
            continue
        k = idx - 1
        while 0 <= k < len(lines) and not lines[k].strip():
            k -= 1
        if 0 <= k < len(lines) and re.match(r"\s*#\s*pragma\s+omp\b", lines[k]):
            lines[k] = ""
            if "OpenMP pragma" not in notes:
                notes.append("OpenMP pragma")
    for m in _MIXED_MINMAX_ERR.finditer(errors):  # a double literal beside a float in std::max/min: 1e-12f
        idx = int(m.group(1)) - 1 - offset
        if 0 <= idx < len(lines):
            fixed = re.sub(r"\b(std::(?:max|min)\s*\()([^;]*)",
                           lambda c: c.group(1) + DOUBLE_LITERAL.sub(r"\1f", c.group(2)), lines[idx])
            if fixed != lines[idx]:
                lines[idx] = fixed
                if "float literal in std::max/min" not in notes:
                    notes.append("float literal in std::max/min")
    for m in _INT_MINMAX_ERR.finditer(errors):  # two integer types in std::max/min: both int64_t
        idx = int(m.group(1)) - 1 - offset
        if 0 <= idx < len(lines):
            fixed = re.sub(r"\bstd::(max|min)\s*\(", r"std::\1<int64_t>(", lines[idx])
            if fixed != lines[idx]:
                lines[idx] = fixed
                if "int64_t in std::max/min" not in notes:
                    notes.append("int64_t in std::max/min")
    for m in _NUM_MINMAX_ERR.finditer(errors):  # an integer and a floating type: the declared variable's type
        idx = int(m.group(1)) - 1 - offset
        if 0 <= idx < len(lines) and (d := _DECLARED_TYPE.match(lines[idx])):
            kind = "int64_t" if d.group(1) else "float"
            fixed = re.sub(r"\bstd::(max|min)\s*\(", rf"std::\1<{kind}>(", lines[idx])
            if fixed != lines[idx]:
                lines[idx] = fixed
                if f"{kind} in std::max/min" not in notes:
                    notes.append(f"{kind} in std::max/min")
    for m in _NO_RETURN_ERR.finditer(errors):  # promises a value, returns none, and no caller reads one: void
        idx = int(m.group(1)) - 1 - offset
        if 0 <= idx < len(lines) and _void_unused(lines, idx):
            if "void return type" not in notes:
                notes.append("void return type")
    for m in _READ_ONLY_ERR.finditer(errors):
        idx = int(m.group(1)) - 1 - offset
        if 0 <= idx < len(lines) and _unconst_assigned(lines, idx, m.group(2)):
            if "const dropped from an assigned variable" not in notes:
                notes.append("const dropped from an assigned variable")
    for m in _CONST_UNSET_ERR.finditer(errors):  # a const with no value loses the const
        idx, name = int(m.group(1)) - 1 - offset, m.group(2) or m.group(3)
        if 0 <= idx < len(lines):
            fixed = re.sub(rf"\bconst\s+((?:unsigned\s+)?\w+\s+{re.escape(name)}\s*;)", r"\1", lines[idx], count=1)
            if fixed != lines[idx]:
                lines[idx] = fixed
                if "const dropped from a variable with no value" not in notes:
                    notes.append("const dropped from a variable with no value")
    hoisted = False
    # bottom up, as these fixes insert a line above the error; each checks the line it is given first
    for m in sorted(_UNDECLARED_AT.finditer(errors), key=lambda m: -int(m.group(1))):
        idx, name = int(m.group(1)) - 1 - offset, m.group(2)
        note = fix_undeclared(lines, idx, name) if 0 <= idx < len(lines) else None
        if note == LOOP_VARIABLE_DECLARED:
            hoisted = True
        elif note and note not in notes:
            notes.append(note)
    if hoisted:
        notes.append(LOOP_VARIABLE_DECLARED)
    for i, line in enumerate(lines):
        fixed = re.sub(r"\bconst\s+((?:unsigned\s+)?\w+)\s+const\b(?!\s*\*)", r"const \1", line)
        if fixed != line:
            lines[i] = fixed
            if "duplicate const" not in notes:
                notes.append("duplicate const")
    text = "\n".join(lines)
    undeclared = set(_UNDECLARED.findall(errors))
    items = split_items(text)
    defined = {it.name: it for it in items if it.kind == "function"}
    late = [n for n in undeclared if n in defined and n != entry]
    if late:
        protos = []
        for it in items:
            if it.kind == "function" and it.name != entry:
                head = it.text[: it.text.index("{")].strip()
                if not head.startswith("extern"):
                    protos.append(head + ";")
        first_fn = next((it.text for it in items if it.kind != "line"), None)
        if protos and first_fn:
            text = text.replace(first_fn, "\n".join(protos) + "\n\n" + first_fn, 1)
            notes.append("forward declarations")
    invented = {n for n in set(undeclared) | set(_HOST_CALL.findall(errors)) if n.startswith("__") and n[2:] in _MATH_NAMES}
    for name in sorted(invented):
        text = re.sub(rf"(?<![\w:.]){re.escape(name)}\s*\(", name[2:] + "(", text)
    if invented and "math function names" not in notes:
        notes.append("math function names")
    if re.search(r"\bstd::rsqrt\s*\(", text) or (prelude.startswith("#include <cmath>") and re.search(r"(?<![\w:])rsqrtf?\s*\(", text)):
        before = text
        text = _replace_call(text, "std::rsqrt", "(1.0f / std::sqrt({}))")
        if "cuda_runtime" not in prelude and not re.search(r"\b(?:float|double|auto)\s+rsqrtf?\s*\(", text):
            # (a kernel that defines its own rsqrt keeps it)
            text = re.sub(r"(?<![\w:.])rsqrtf?\s*\(", "__kf_rsqrt(", text)
            text = _replace_call(text, "__kf_rsqrt", "(1.0f / std::sqrt({}))")
        if text != before:
            notes.append("rsqrt")
    headers = [h for name, h in _STD_HEADERS.items() if re.search(
        rf"[‘'`]{name}[’'`] (?:is not a member of [‘'`]std[’'`]|in namespace [‘'`]std[’'`] does not name)", errors)]
    headers = [h for h in dict.fromkeys(headers) if f"#include <{h}>" not in text]
    if headers:
        text = "".join(f"#include <{h}>\n" for h in headers) + text
        notes.append("standard headers")
    text = _headers_of_undeclared(text, prelude, errors, notes)
    if re.search(r"\b(?:std|math)::pi\b", text):
        text = re.sub(r"\b(?:std|math)::pi\b", "3.14159265358979f", text)
        notes.append("pi")
    if not notes or text == kernel:
        return None
    return text, notes


def _headers_of_undeclared(text: str, prelude: str, errors: str, notes: list[str]) -> str:
    """``text`` with the header of each family of names it uses undeclared (vector intrinsics, ``assert``), where this
    machine has that family; a CUDA kernel is left as it is."""
    if "cuda_runtime" in prelude:
        return text
    unknown = set(_UNKNOWN_NAME.findall(errors))
    wanted = [h for pattern, h, here in _UNDECLARED_HEADERS
              if here and f"#include <{h}>" not in text and any(pattern.fullmatch(n) for n in unknown)]
    if not wanted:
        return text
    note = "intrinsics header" if wanted != ["cassert"] else "standard headers"
    if note not in notes:
        notes.append(note)
    return "".join(f"#include <{h}>\n" for h in wanted) + text


def autofix_const(kernel: str, prelude: str, errors: str) -> str | None:
    """Only the const-pointer fix of ``autofix`` (kept for callers that want just that one)."""
    out = autofix(kernel, prelude, errors)
    return out[0] if out and "const pointers" in out[1] else None
