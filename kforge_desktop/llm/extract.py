"""Pull usable code out of a language model's answer.

Why this is more than a regex: small local models wrap code in prose, use several fenced blocks
(a C++ kernel in one, the Python module in another), forget imports, label fences inconsistently
(```cuda, ```c++, none at all), or stop mid-block when they hit the token limit. Each of those is
either repaired here (merge, add imports) or turned into one sentence saying why the answer is
unusable, so the search never spends a build on text that cannot work.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from ..csource.comments import blank_cpp_comments, strip_cpp_comments
from ..csource.language import guess_language

PY_LABELS = {"python", "py", "python3", "py3"}
CPP_LABELS = {"cpp", "c++", "cxx", "cc", "c", "h", "hpp"}
CUDA_LABELS = {"cuda", "cu", "cuh"}

# an opening fence may follow prose on the same line ("Here: ```python"), but then nothing follows its
# label: "in one ```cpp block." is prose that names a fence, not one; a closing fence ends a line
_FENCE = re.compile(r"(?:(?<=\n)|^)[ \t]*(`{3,}|~{3,})[ \t]*([\w+#.-]*)[^\n`]*\n"
                    r"|(`{3,}|~{3,})[ \t]*([\w+#.-]*)[ \t]*:?[ \t]*\n")
_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)


@dataclass(frozen=True)
class Block:
    """One fenced (or unfenced) piece of code; ``closed`` is False when the answer ended inside it."""

    code: str
    label: str
    language: str  # "python", "cpp", "cuda" or "text"
    closed: bool


@dataclass(frozen=True)
class Extraction:
    """The code to evaluate, or ``code=None`` and ``problem`` saying in one sentence why not.

    ``problem`` may also be set with code present, as a note about a repair that was made
    (for example imports that were added). ``draft`` keeps the best unusable text for display or a
    repair prompt.
    """

    code: str | None
    language: str
    problem: str = ""
    draft: str | None = None
    repairs: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.code is not None


# -- splitting an answer into blocks ---------------------------------------------------------------------

def _language(label: str, code: str) -> str:
    lab = label.lower()
    if lab in PY_LABELS:
        return "python"
    if lab in CUDA_LABELS:
        return "cuda"
    if lab in CPP_LABELS:
        return "cuda" if guess_language(code) == "cuda" else "cpp"
    return guess_language(code)


def split_blocks(answer: str) -> list[Block]:
    """Fenced blocks in order; an unterminated last fence becomes an unclosed block."""
    blocks: list[Block] = []
    pos = 0
    while True:
        m = _FENCE.search(answer, pos)
        if not m:
            break
        fence, label = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        close = re.compile(rf"{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.M)
        end = close.search(answer, m.end())
        body = answer[m.end() : end.start() if end else len(answer)]
        blocks.append(Block(body.rstrip() + "\n", label, _language(label, body), closed=end is not None))
        if not end:
            break
        pos = end.end()
    return blocks


def strip_thinking(answer: str) -> tuple[str, bool]:
    """Remove reasoning sections; report whether the answer ended while still thinking."""
    text = _THINK.sub("", answer)
    low = text.lower()
    if "<think>" in low:
        i = low.index("<think>")
        return text[:i], True
    return text, False


def _unfenced_python(answer: str, class_name: str | None = None,
                     defines: re.Pattern[str] | None = None) -> tuple[str, bool] | None:
    """The code part of an answer without fences: from the first code-looking line on.

    Returns the code and whether the text after it looked like code that was dropped (an indented
    line: the answer stopped inside the module) rather than closing prose.
    """
    lines = answer.splitlines()
    start = next((i for i, ln in enumerate(lines)
                  if re.match(r"\s*(import |from \w[\w.]* import |class \w|def \w|@\w|#!|\"\"\"|'''|\w+\s*=)", ln)), None)
    if start is None:
        return None
    pattern = defines or re.compile(rf"^\s*class\s+{re.escape(class_name or 'ModelNew')}\b", re.M)
    # drop trailing prose: the longest prefix that parses and still holds the definition
    for end in range(len(lines), start, -1):
        chunk = "\n".join(lines[start:end])
        if not pattern.search(chunk):
            break
        try:
            ast.parse(chunk)
        except SyntaxError:
            continue
        dropped = next((ln for ln in lines[end:] if ln.strip()), "")
        return chunk.rstrip() + "\n", dropped[:1].isspace()
    return "\n".join(lines[start:]).rstrip() + "\n", True  # unparseable: the caller reports it


# -- Python module repairs ---------------------------------------------------------------------------

_IMPORT_RULES = (
    # (name used, test that it is already bound, import line)
    ("torch", re.compile(r"^\s*import torch\b|^\s*import torch\s*,|^\s*import\s+[\w., ]*\btorch\b(?!\.)", re.M),
     "import torch"),
    ("nn", re.compile(r"^\s*import torch\.nn as nn\b|^\s*from torch import\b[^\n]*\bnn\b|^\s*import[^\n]*\btorch\.nn as nn", re.M),
     "import torch.nn as nn"),
    ("F", re.compile(r"^\s*import torch\.nn\.functional as F\b|^\s*from torch\.nn import functional as F\b", re.M),
     "import torch.nn.functional as F"),
    ("load_native", re.compile(r"^\s*from [\w.]+ import[^\n]*\bload_native\b", re.M),
     "from kforge_desktop.kernels.native import load_native"),
    ("load_inline", re.compile(r"^\s*from torch\.utils\.cpp_extension import[^\n]*\bload_inline\b", re.M),
     "from torch.utils.cpp_extension import load_inline"),
    ("triton", re.compile(r"^\s*import triton\b", re.M), "import triton"),
    ("tl", re.compile(r"^\s*import triton\.language as tl\b", re.M), "import triton.language as tl"),
)


def _used_names(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _bound_names(tree: ast.Module) -> set[str]:
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                bound.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return bound


def add_missing_imports(code: str) -> tuple[str, list[str]]:
    """Add the standard imports a module uses but forgot; returns the new code and what was added."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code, []
    used, bound = _used_names(tree), _bound_names(tree)
    added = [line for name, already, line in _IMPORT_RULES
             if name in used and name not in bound and not already.search(code)]
    if not added:
        return code, []
    lines = code.splitlines()
    # after a leading docstring / __future__ imports, before everything else
    insert_at = 0
    body = tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        insert_at = body[0].end_lineno or 0
    for node in body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            insert_at = node.end_lineno or insert_at
    new = lines[:insert_at] + added + lines[insert_at:]
    return "\n".join(new).rstrip() + "\n", added


_SOURCE_CALLS = {"load_native", "load_inline", "load", "compile_kernel"}


def _undefined_source_names(tree: ast.Module) -> list[str]:
    """Names passed as kernel source to load_native/load_inline that the module never assigns."""
    bound = _bound_names(tree)
    wanted: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fname = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
        if fname not in _SOURCE_CALLS:
            continue
        args = list(node.args[:1]) + [k.value for k in node.keywords
                                     if k.arg in ("cpp_sources", "cuda_sources", "source", "sources", "src")]
        for a in args:
            for n in ast.walk(a):
                if isinstance(n, ast.Name) and n.id not in bound and n.id not in wanted:
                    wanted.append(n.id)
    return wanted


def _merge_sources(code: str, blocks: list[Block]) -> tuple[str, list[str]]:
    """Define kernel-source variables the module uses but left to another fenced block."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code, []
    names = _undefined_source_names(tree)
    native = [b for b in blocks if b.language in ("cpp", "cuda") and b.closed]
    if not names or not native:
        return code, []
    defs, used = [], []
    for name in names:
        pref = "cuda" if "cuda" in name.lower() else "cpp" if "cpp" in name.lower() else None
        pick = next((b for b in native if b not in used and (pref is None or b.language == pref)), None)
        pick = pick or next((b for b in native if b not in used), None)
        if pick is None:
            break
        used.append(pick)
        if "'''" in pick.code:
            return code, []
        defs.append(f"{name} = r'''\n{pick.code.rstrip()}\n'''")
    if not defs:
        return code, []
    # place the definitions after the imports, before the first use
    lines = code.splitlines()
    last_import = 0
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) or (
                isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant)):
            last_import = node.end_lineno or last_import
        else:
            break
    new = lines[:last_import] + [""] + defs + [""] + lines[last_import:]
    return "\n".join(new).rstrip() + "\n", [f"took {n} from a separate code block" for n in names[: len(defs)]]


def _defines_class(code: str, name: str) -> bool:
    return re.search(rf"^\s*class\s+{re.escape(name)}\b", code, re.M) is not None


def _syntax_problem(code: str) -> str | None:
    try:
        ast.parse(code)
        return None
    except SyntaxError as err:
        return f"line {err.lineno}: {err.msg}"


# -- public entry points -------------------------------------------------------------------------------

def extract_module(answer: str, class_name: str = "ModelNew", finished: bool = True) -> Extraction:
    """A Python module defining ``class_name`` (KernelBench's answer format), repaired where possible.

    ``finished=False`` (the generation hit its token limit) lets an unfenced answer that does not
    parse be reported as cut off rather than as a syntax error.
    """
    text, thinking = strip_thinking(answer or "")
    if not text.strip():
        why = "the answer was cut off while the model was still reasoning" if thinking else "the answer is empty"
        return Extraction(None, "python", f"{why}; no code to extract.")
    blocks = split_blocks(text)
    py = [b for b in blocks if b.language == "python" or (b.language == "text" and _defines_class(b.code, class_name))]
    with_class = [b for b in py if _defines_class(b.code, class_name)]
    if not blocks:
        found = _unfenced_python(text, class_name) if _defines_class(text, class_name) else None
        if found is None:
            if re.search(r"#include|__global__|extern\s+\"C\"", text):
                return Extraction(None, "python", f"the answer has kernel code but no Python module defining "
                                  f"{class_name}.", draft=text)
            return Extraction(None, "python", f"the answer contains no code defining class {class_name}.",
                              draft=text if text.strip() else None)
        code, dropped_code = found
        if dropped_code and not finished:
            return Extraction(None, "python", f"the answer was cut off inside the {class_name} module "
                              "(raise max_tokens).", draft=code)
        candidates = [Block(code, "", "python", closed=True)]
    else:
        candidates = with_class
    if not candidates:
        if any(not b.closed for b in blocks):
            return Extraction(None, "python", f"the answer was cut off before class {class_name} was written "
                              "(raise max_tokens).", draft=blocks[-1].code)
        if py:
            return Extraction(None, "python", f"the answer's Python code does not define class {class_name}.",
                              draft=py[-1].code)
        return Extraction(None, "python", f"the answer has no Python module defining class {class_name}.",
                          draft=blocks[0].code)
    # prefer the last complete block that parses: models often show a draft, then the fixed version
    complete = [b for b in candidates if b.closed and _syntax_problem(b.code) is None]
    best = complete[-1] if complete else candidates[-1]
    if not best.closed:
        problem = _syntax_problem(best.code)
        if problem is not None:
            return Extraction(None, "python", f"the answer was cut off inside the {class_name} module "
                              "(raise max_tokens).", draft=best.code)
    problem = _syntax_problem(best.code)
    if problem is not None:
        return Extraction(None, "python", f"the {class_name} module has a syntax error ({problem}).",
                          draft=best.code)
    code, repairs = best.code, []
    code, merged = _merge_sources(code, blocks)
    repairs += merged
    code, added = add_missing_imports(code)
    repairs += [f"added `{a}`" for a in added]
    try:
        tree = ast.parse(code)
    except SyntaxError as err:  # pragma: no cover - repairs keep the code parseable
        return Extraction(None, "python", f"the repaired module does not parse ({err.msg}).", draft=code)
    missing = [n for n in _undefined_source_names(tree)]
    if missing:
        return Extraction(None, "python", f"the module uses {missing[0]} as kernel source but the answer "
                          "never defines it.", draft=code)
    note = "; ".join(repairs)
    return Extraction(code, "python", note, repairs=tuple(repairs))


_CPP_START = re.compile(
    r"^\s*(?:#include|#define|#pragma|extern\b|template\b|namespace\b|static\b|inline\b|__global__|__device__|"
    r"void\b|int\b|float\b|double\b|const\b|auto\b|typedef\b|struct\b|using\b|//|/\*)")


def _unfenced_cpp(text: str, def_at: int) -> str:
    """Code of an answer without fences: first code-looking line before the definition to the last brace."""
    lines = text.splitlines(keepends=True)
    offsets, pos = [], 0
    for ln in lines:
        offsets.append(pos)
        pos += len(ln)
    def_line = max(i for i, off in enumerate(offsets) if off <= def_at)
    start = def_line
    for i in range(def_line - 1, -1, -1):
        if _CPP_START.match(lines[i]) or lines[i].strip() == "" or lines[i].rstrip().endswith((";", "{", "}")):
            start = i
        else:
            break
    end = len(lines)
    for i in range(len(lines) - 1, def_line - 1, -1):
        if lines[i].strip().startswith("}") or lines[i].rstrip().endswith((";", "}")):
            end = i + 1
            break
    return "".join(lines[start:end]).strip("\n") + "\n"


def _function_pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"\b{re.escape(name)}\s*\([^;{{}}]*\)\s*(?:const\s*)?(?:noexcept\s*)?\{{", re.S)


def _complete_prefix(code: str) -> str:
    """``code`` up to the last closing brace that returns to the top level (comments are blanked
    first, keeping offsets); empty when there is none."""
    text = blank_cpp_comments(code)
    depth, last = 0, -1
    for i, ch in enumerate(text):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                last = i
            elif depth < 0:
                return ""
    return code[: last + 1].rstrip() + "\n" if last >= 0 else ""


def _braces_balanced(code: str) -> bool:
    return strip_cpp_comments(code).count("{") == strip_cpp_comments(code).count("}")


def _extract_python_function(text: str, name: str, language: str, finished: bool) -> Extraction:
    """Python source (a Triton kernel and its launcher) that defines ``def name(``."""
    pat = re.compile(rf"^\s*def\s+{re.escape(name)}\s*\(", re.M)
    blocks = split_blocks(text)
    if not blocks:
        found = _unfenced_python(text, defines=pat) if pat.search(text) else None
        if found is None:
            return Extraction(None, language, f"the answer does not define the function {name}.", draft=text)
        code, dropped_code = found
        blocks = [Block(code, "", "python", closed=finished or not dropped_code)]
    defining = [b for b in blocks if b.language in ("python", "text") and pat.search(b.code)]
    if not defining:
        if any(not b.closed for b in blocks):
            return Extraction(None, language, f"the answer was cut off before {name} was written "
                              "(raise max_tokens).", draft=blocks[-1].code)
        return Extraction(None, language, f"the answer does not define the function {name}.")
    complete = [b for b in defining if b.closed and _syntax_problem(b.code) is None]
    best = complete[-1] if complete else defining[-1]
    problem = _syntax_problem(best.code)
    if problem is not None:
        why = "was cut off inside" if not best.closed else f"has a syntax error ({problem}) in"
        return Extraction(None, language, f"the answer {why} the code of {name}.", draft=best.code)
    code, added = add_missing_imports(best.code)
    return Extraction(code, language, "; ".join(f"added `{a}`" for a in added),
                      repairs=tuple(f"added `{a}`" for a in added))


def extract_function(answer: str, name: str, language: str | None = None, finished: bool = True) -> Extraction:
    """C++/CUDA source that defines function ``name`` (the native kernel format).

    With ``language`` "triton" or "python" the function is looked for in Python code instead.
    """
    text, thinking = strip_thinking(answer or "")
    if language in ("triton", "python") and text.strip():
        return _extract_python_function(text, name, language, finished)
    lang_default = language or "cpp"
    if not text.strip():
        why = "the answer was cut off while the model was still reasoning" if thinking else "the answer is empty"
        return Extraction(None, lang_default, f"{why}; no code to extract.")
    pat = _function_pattern(name)
    blocks = split_blocks(text)
    if not blocks:
        m = pat.search(text)
        if not m:
            return Extraction(None, lang_default, f"the answer does not define the function {name}.",
                              draft=text)
        blocks = [Block(_unfenced_cpp(text, m.start()), "", guess_language(text), closed=finished)]
    native = [b for b in blocks if b.language in ("cpp", "cuda", "text")]
    defining = [b for b in native if pat.search(b.code)]
    if not defining:
        if any(not b.closed for b in blocks):
            return Extraction(None, lang_default, f"the answer was cut off before {name} was written "
                              "(raise max_tokens).", draft=blocks[-1].code)
        if any(pat.search(b.code) for b in blocks):
            return Extraction(None, lang_default, f"the function {name} is only in a non-C++ block.")
        return Extraction(None, lang_default, f"the answer does not define the function {name}.",
                          draft=native[-1].code if native else None)
    complete = [b for b in defining if b.closed and _braces_balanced(b.code)]
    best = complete[-1] if complete else defining[-1]
    lang = language or ("cuda" if best.language == "cuda" else "cpp")
    if not _braces_balanced(best.code) and not best.closed:
        # a small model often finishes the kernel, then starts a test driver and runs out of tokens:
        # the complete top-level items before the cut are a valid answer when they define ``name``
        head = _complete_prefix(best.code)
        if head and pat.search(head):
            return Extraction(head, lang, "the answer was cut off after the kernel; the unfinished code "
                              "after it was dropped.")
    if not _braces_balanced(best.code):
        why = "was cut off inside" if not best.closed else "has unbalanced braces in"
        return Extraction(None, lang, f"the answer {why} the definition of {name}"
                          f"{' (raise max_tokens)' if not best.closed else ''}.", draft=best.code)
    return Extraction(best.code, lang, "")


_NATIVE_LABELS = {""} | CPP_LABELS | CUDA_LABELS


def native_code(answer: str, function: str) -> str | None:
    """The C/C++/CUDA code of an answer that need not define ``function`` (an edit may rewrite one
    helper alone): its native or unlabelled fenced blocks that define functions, joined, those that
    mention ``function`` preferred; or the whole answer when it has no such fence and is C code.
    Python blocks and prose are dropped; None when there is no C code."""
    blocks = [b.code for b in split_blocks(answer) if b.label.lower() in _NATIVE_LABELS]
    candidates = [code for code in blocks if re.search(r"\)\s*(?:const\s*)?\{", code)]
    if not candidates and not blocks and re.search(r"\b(void|float|int|double)\b[^;]*\([^)]*\)\s*\{", answer):
        candidates = [answer]
    if not candidates:
        return None
    with_fn = [c for c in candidates if re.search(rf"\b{re.escape(function)}\s*\(", c)]
    return "\n\n".join(with_fn or candidates)


def extract_code(answer: str, function: str | None = None, class_name: str = "ModelNew",
                 language: str | None = None, finished: bool = True) -> Extraction:
    """Module extraction by default; with ``function``, the C++/CUDA source defining it.

    Pass ``finished=generation.finish_reason != "length"`` so cut-off answers are named as such.
    """
    if function:
        return extract_function(answer, function, language, finished)
    return extract_module(answer, class_name, finished)


def kernel_language(module_source: str) -> str | None:
    """The kernel language a candidate module compiles: "cuda", "cpp" or "triton" (None if none)."""
    if re.search(r"@triton\.jit|import triton", module_source):
        return "triton"
    m = re.search(r"load_native\([^)]*lang\s*=\s*[\"'](\w+)[\"']", module_source)
    if m:
        return "cuda" if m.group(1).lower() in CUDA_LABELS else "cpp"
    if re.search(r"cuda_sources\s*=|__global__", module_source):
        return "cuda"
    if re.search(r"load_inline|load_native|cpp_sources\s*=|#include", module_source):
        return "cpp"
    return None
