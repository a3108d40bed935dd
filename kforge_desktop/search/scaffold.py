"""Scaffolding: the tool writes the ``ModelNew`` module; the model writes only the kernel function.

Why: a small local model writes a plausible C++ loop far more often than it writes a whole working
extension (class, binding, build call, pointer plumbing). From the problem we know everything the
plumbing needs — the forward signature, the inputs (shapes, dtypes), the parameters and buffers,
the scalar settings (``eps``, ``num_groups``) and the output shape (found by running the reference
once; the problem is the user's own trusted code). So we fix one ``extern "C"`` signature, state it
in the prompt, and wrap whatever kernel comes back into a module in the fast native format of
``docs/design.md`` (no torch headers; builds in about a second).

The module keeps the reference's ``__init__`` verbatim (renamed to ``ModelNew``), so parameters are
created in the same order from the same seed, exactly as KernelBench compares models.
"""

from __future__ import annotations

import ast
import inspect
import math
import re
from dataclasses import dataclass, field

import torch

from ..llm.extract import strip_cpp_comments
from ..problem.problem import Problem, ProblemError

FUNCTION = "kernel_forward"

# scalar settings of standard modules that change what forward computes
MODULE_SCALARS = {
    "eps", "num_groups", "negative_slope", "alpha", "beta", "lambd", "threshold", "value", "min_val",
    "max_val", "upper", "lower", "dim", "scale", "temperature",
}
NORM_TYPES = ("GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d",
              "InstanceNorm3d")

PRELUDE = {
    "cpp": "#include <cmath>\n#include <cstdint>\n#include <cstddef>\n#include <algorithm>\n#include <limits>\n",
    "cuda": "#include <cuda_runtime.h>\n#include <cstdint>\n#include <cmath>\n#include <cfloat>\n",
}

_C_TYPES = {
    torch.float32: "float",
    torch.float64: "double",
    torch.int64: "int64_t",
    torch.int32: "int32_t",
    torch.int16: "int16_t",
    torch.int8: "int8_t",
    torch.uint8: "uint8_t",
    torch.bool: "bool",
}
_CUDA_TYPES = {torch.float16: "__half", torch.bfloat16: "__nv_bfloat16"}


class ScaffoldError(Exception):
    """The problem's shape cannot be scaffolded (the search falls back to whole-module prompts)."""


@dataclass(frozen=True)
class KernelArg:
    """One argument of the kernel function: its C declaration and where ``forward`` gets it."""

    name: str  # C name
    ctype: str  # "const float*", "float*", "int64_t", "float"
    expr: str  # Python expression in ModelNew.forward
    role: str  # input | param | output | size | scalar
    doc: str  # for the prompt: "x: float32 [256, 1024], row-major"

    @property
    def decl(self) -> str:
        return f"{self.ctype} {self.name}"


@dataclass(frozen=True)
class Scaffold:
    """Everything needed to turn a kernel text into a candidate module for one problem."""

    problem_name: str
    language: str  # cpp | cuda
    args: tuple[KernelArg, ...]
    forward_params: tuple[str, ...]
    header: str  # module-level code kept from the problem (imports, helpers, constants)
    class_body: str  # the reference's class body without forward (renamed)
    prepare: tuple[str, ...]  # lines at the top of forward (contiguous inputs, output allocation)
    outputs: tuple[str, ...]  # names returned by forward
    layout: str  # rows | channels
    shapes: dict = field(default_factory=dict)  # name -> [dims] as measured
    ops: tuple[str, ...] = ()  # words naming what the reference computes (for exemplar retrieval)
    function: str = FUNCTION
    aten_ops: tuple[str, ...] = ()  # the operators the reference's forward runs, in order

    def signature(self) -> str:
        """The exact C declaration the model must implement."""
        params = [f"{a.ctype} {a.name}" for a in self.args]
        if self.language == "cuda":
            params.append("cudaStream_t stream")
        return f'extern "C" void {self.function}({", ".join(params)})'

    def describe_args(self) -> str:
        """One line per argument for the prompt: what it is, its shape, how it is laid out."""
        lines = [f"- {a.name}: {a.doc}" for a in self.args]
        if self.language == "cuda":
            lines.append("- stream: the CUDA stream to launch on (kernel<<<grid, block, smem, stream>>>)")
        if self.aten_ops:
            lines.append("The PyTorch forward runs these operations in order; the kernel must do all of them: "
                         + " -> ".join(self.aten_ops) + ".")
        return "\n".join(lines)

    def kernel_file(self, kernel: str) -> str:
        """The complete kernel source: our includes, then the model's code."""
        return PRELUDE[self.language] + "\n" + kernel.strip() + "\n"

    def module_source(self, kernel: str) -> str:
        """The candidate module (``ModelNew``) around ``kernel`` (the code the model wrote)."""
        text = self.kernel_file(kernel)
        if "'''" in text or text.endswith("\\"):
            literal = repr(text)
        else:
            literal = "r'''\n" + text + "'''"
        call = ", ".join(a.expr for a in self.args)
        fwd_params = ", ".join(("self",) + self.forward_params)
        body = "\n".join(f"        {line}" for line in self.prepare)
        ret = self.outputs[0] if len(self.outputs) == 1 else "(" + ", ".join(self.outputs) + ")"
        return (
            f'"""Candidate for {self.problem_name}: a scaffolded ModelNew around a native kernel."""\n'
            f"{self.header}\n"
            "from kforge_desktop.kernels.native import load_native\n\n"
            f"KERNEL_SOURCE = {literal}\n"
            f'_lib = load_native(KERNEL_SOURCE, lang="{self.language}")\n\n\n'
            "class ModelNew(nn.Module):\n"
            f"{self.class_body}\n\n"
            f"    def forward({fwd_params}):\n"
            f"{body}\n"
            f"        _lib.{self.function}({call})\n"
            f"        return {ret}\n"
        )


def kernel_of_module(source: str) -> str | None:
    """The kernel text (without our prelude) of a scaffolded module, e.g. a user-edited child."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "KERNEL_SOURCE" for t in node.targets):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                text = node.value.value
                for prelude in PRELUDE.values():
                    if text.lstrip("\n").startswith(prelude):
                        text = text.lstrip("\n")[len(prelude):]
                return text.strip() + "\n"
    return None


# -- building a scaffold from a problem --------------------------------------------------------------


def _ctype(dtype: torch.dtype, language: str) -> str:
    if dtype in _C_TYPES:
        return _C_TYPES[dtype]
    if language == "cuda" and dtype in _CUDA_TYPES:
        return _CUDA_TYPES[dtype]
    raise ScaffoldError(f"tensors of dtype {dtype} are not supported by the scaffold")


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _c_name(dotted: str) -> str:
    name = re.sub(r"\W", "_", dotted)
    return name if not name[0].isdigit() else "p_" + name


def _attr_expr(dotted: str, kind: str) -> str:
    if all(part.isidentifier() for part in dotted.split(".")):
        return f"self.{dotted}"
    return f"self.get_{kind}({dotted!r})"


def _split_problem_source(source: str) -> tuple[str, ast.ClassDef]:
    tree = ast.parse(source)
    keep: list[str] = []
    model: ast.ClassDef | None = None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            model = node
            continue
        if isinstance(node, ast.FunctionDef) and node.name in ("get_inputs", "get_init_inputs", "get_replay_inputs"):
            continue
        if isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant) and node is tree.body[0]:
            continue  # the problem's docstring
        seg = ast.get_source_segment(source, node)
        if seg:
            keep.append(seg)
    if model is None:
        raise ScaffoldError("the problem defines no class Model")
    header = "\n".join(keep)
    if not re.search(r"^import torch$|^import torch\b", header, re.M):
        header = "import torch\n" + header
    if not re.search(r"import torch\.nn as nn|from torch import nn", header):
        header = header + "\nimport torch.nn as nn"
    return header, model


def _class_body(source: str, model: ast.ClassDef) -> str:
    lines = source.splitlines()
    parts: list[str] = []
    for node in model.body:
        if isinstance(node, ast.FunctionDef) and node.name == "forward":
            continue
        start = (node.decorator_list[0].lineno if getattr(node, "decorator_list", None) else node.lineno) - 1
        parts.append("\n".join(lines[start:node.end_lineno]))
    body = "\n\n".join(parts) if parts else "    pass"
    body = re.sub(r"super\(\s*Model\s*,", "super(ModelNew,", body)
    if not any(isinstance(n, ast.FunctionDef) and n.name == "__init__" for n in model.body):
        body = "    def __init__(self, *args):\n        super().__init__()\n\n" + body
    return body


def _module_words(model: torch.nn.Module, source: str) -> tuple[str, ...]:
    words: list[str] = []
    for _, mod in model.named_modules():
        words.append(type(mod).__name__.lower())
    try:
        tree = ast.parse(source)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                words.append(node.attr.lower())
            elif isinstance(node, ast.Name):
                words.append(node.id.lower())
    except SyntaxError:
        pass
    return tuple(dict.fromkeys(words))


def build_scaffold(problem: Problem, language: str = "cpp") -> Scaffold:
    """Run the reference once on CPU-sized inputs and derive the kernel signature and the module."""
    if language not in ("cpp", "cuda"):
        raise ScaffoldError(f"the scaffold writes C++ or CUDA kernels, not {language}")
    try:
        mod = problem.load_module()
    except ProblemError as err:
        raise ScaffoldError(str(err)) from None
    header, model_node = _split_problem_source(problem.source)
    class_body = _class_body(problem.source, model_node)
    torch.manual_seed(0)
    init_inputs = list(mod.get_init_inputs())
    model = mod.Model(*init_inputs)
    model.eval()
    inputs = list(mod.get_inputs())
    with torch.no_grad():
        out, aten_ops = _traced(model, inputs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if not outs or not all(isinstance(o, torch.Tensor) for o in outs):
        raise ScaffoldError("the reference's forward does not return tensors")

    params = [p for p in inspect.signature(mod.Model.forward).parameters.values() if p.name != "self"]
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        raise ScaffoldError("the reference's forward takes *args/**kwargs")
    if len(params) != len(inputs):
        raise ScaffoldError("get_inputs() does not match the forward signature")
    names = tuple(p.name for p in params)

    tensors = [(n, v) for n, v in zip(names, inputs, strict=True) if isinstance(v, torch.Tensor)]
    if not tensors:
        raise ScaffoldError("the reference takes no tensor inputs")
    primary_name, primary = tensors[0]
    shapes: dict[str, list[int]] = {}
    args: list[KernelArg] = []
    prepare: list[str] = []

    for n, v in zip(names, inputs, strict=True):
        if isinstance(v, torch.Tensor):
            shapes[n] = list(v.shape)
            prepare.append(f"{n} = {n}.contiguous()")
            args.append(KernelArg(n, f"const {_ctype(v.dtype, language)}*", n, "input",
                                  f"input, {_dtype_name(v.dtype)} {list(v.shape)}, contiguous row-major"))
        elif isinstance(v, bool):
            args.append(KernelArg(n, "bool", n, "scalar", f"forward argument (bool), e.g. {v}"))
        elif isinstance(v, int):
            args.append(KernelArg(n, "int64_t", n, "scalar", f"forward argument (int), e.g. {v}"))
        elif isinstance(v, float):
            args.append(KernelArg(n, "float", n, "scalar", f"forward argument (float), e.g. {v}"))
        else:
            raise ScaffoldError(f"forward argument {n} is a {type(v).__name__}, not a tensor or number")

    for dotted, p in list(model.named_parameters()) + list(model.named_buffers()):
        kind = "parameter" if isinstance(p, torch.nn.Parameter) else "buffer"
        if p.dtype not in _C_TYPES and p.dtype not in _CUDA_TYPES:
            continue
        cname = _c_name(dotted)
        shapes[cname] = list(p.shape)
        args.append(KernelArg(cname, f"const {_ctype(p.dtype, language)}*", _attr_expr(dotted, kind) + ".contiguous()",
                              "param", f"{kind} self.{dotted}, {_dtype_name(p.dtype)} {list(p.shape)}"))

    out_names = ["out"] if len(outs) == 1 else [f"out{i}" for i in range(len(outs))]
    for oname, o in zip(out_names, outs, strict=True):
        shapes[oname] = list(o.shape)
        same = next((n for n, v in tensors if v.shape == o.shape and v.dtype == o.dtype), None)
        if same is not None:
            prepare.append(f"{oname} = torch.empty_like({same})")
        else:
            dims = _shape_expr(o.shape, primary_name, primary.shape)
            prepare.append(f"{oname} = torch.empty({dims}, dtype=torch.{_dtype_name(o.dtype)}, device={primary_name}.device)")
        args.append(KernelArg(oname, f"{_ctype(o.dtype, language)}*", oname, "output",
                              f"output to write, {_dtype_name(o.dtype)} {list(o.shape)}, contiguous row-major"))

    layout = _layout(model, primary)
    p = primary_name
    if layout == "channels":
        args += [
            KernelArg("batch", "int64_t", f"{p}.shape[0]", "size", f"{p}.shape[0] (= {primary.shape[0]})"),
            KernelArg("channels", "int64_t", f"{p}.shape[1]", "size", f"{p}.shape[1] (= {primary.shape[1]})"),
            KernelArg("spatial", "int64_t", f"{p}.numel() // ({p}.shape[0] * {p}.shape[1])", "size",
                      f"product of {p}'s remaining dims (= {math.prod(primary.shape[2:])}); "
                      f"element (n, c, s) is at {p}[(n * channels + c) * spatial + s]"),
        ]
    else:
        cols = primary.shape[-1] if primary.dim() else 1
        rows = primary.numel() // max(cols, 1)
        args += [
            KernelArg("rows", "int64_t", f"{p}.numel() // {p}.shape[-1]", "size",
                      f"number of rows = product of all but the last dim of {p} (= {rows})"),
            KernelArg("cols", "int64_t", f"{p}.shape[-1]", "size",
                      f"length of the last dim of {p} (= {cols}); element (r, c) is at {p}[r * cols + c]"),
        ]
    for n, v in tensors[1:]:
        if v.shape != primary.shape:
            for i, d in enumerate(v.shape):
                args.append(KernelArg(f"{n}_size{i}", "int64_t", f"{n}.shape[{i}]", "size", f"{n}.shape[{i}] (= {d})"))

    args += _scalar_args(model)
    words = _module_words(model, problem.source)
    return Scaffold(
        problem_name=problem.name, language=language, args=tuple(args), forward_params=names,
        header=header, class_body=class_body, prepare=tuple(prepare), outputs=tuple(out_names), layout=layout,
        shapes=shapes, ops=words + aten_ops, aten_ops=aten_ops,
    )


def _traced(model: torch.nn.Module, inputs: list) -> tuple[object, tuple[str, ...]]:
    """Run the reference once, recording the ATen operators it computes with (not the plumbing)."""
    try:
        from ..kernels.policy import PLUMBING, record_ops
    except ImportError:
        return model(*inputs), ()
    out, ops = record_ops(model, *inputs)
    seq: list[str] = []
    for op in ops:
        name = op.lstrip("_")
        if op in PLUMBING or name in PLUMBING or (seq and seq[-1] == name):
            continue
        seq.append(name)
    return out, tuple(seq[:24])


def _shape_expr(shape: torch.Size, name: str, primary: torch.Size) -> str:
    if tuple(shape) == tuple(primary[:-1]):
        return f"{name}.shape[:-1]"
    if tuple(shape) == tuple(primary[:-1]) + (1,):
        return f"{name}.shape[:-1] + (1,)"
    return repr(tuple(int(d) for d in shape))


def _layout(model: torch.nn.Module, primary: torch.Tensor) -> str:
    if primary.dim() < 3:
        return "rows"
    for _, m in model.named_modules():
        if type(m).__name__ in NORM_TYPES:
            return "channels"
    c = primary.shape[1]
    if c != primary.shape[-1]:
        for _, p in list(model.named_parameters()) + list(model.named_buffers()):
            if p.dim() == 1 and p.shape[0] == c:
                return "channels"
    return "rows"


def _scalar_args(model: torch.nn.Module) -> list[KernelArg]:
    out: list[KernelArg] = []
    for prefix, m in model.named_modules():
        top = prefix == ""
        for attr, value in sorted(vars(m).items()):
            if attr.startswith("_") or attr == "training" or isinstance(value, bool):
                continue
            if not isinstance(value, (int, float)):
                continue
            if not top and attr not in MODULE_SCALARS:
                continue
            dotted = f"{prefix}.{attr}" if prefix else attr
            if not all(part.isidentifier() for part in dotted.split(".")):
                continue
            cname = _c_name(dotted)
            if isinstance(value, float):
                out.append(KernelArg(cname, "float", f"float(self.{dotted})", "scalar", f"self.{dotted} (= {value:g})"))
            else:
                out.append(KernelArg(cname, "int64_t", f"int(self.{dotted})", "scalar", f"self.{dotted} (= {value})"))
    return out


# -- turning an answer into kernel text ------------------------------------------------------------

_FENCE = re.compile(r"```([\w+#-]*)[ \t]*\n(.*?)(?:```|\Z)", re.S)
_CODE_LANGS = {"", "c", "cpp", "c++", "cc", "cxx", "cuda", "cu", "h", "hpp"}


def code_blocks(text: str) -> list[tuple[str, str]]:
    """Fenced blocks as (language tag, code); an unterminated last block counts (the answer ran out)."""
    return [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]


def kernel_from_answer(text: str, function: str = FUNCTION) -> str | None:
    """The C/C++/CUDA code of an answer: the fenced block(s) that define functions, or the bare
    answer if it is code. Python blocks and prose are dropped; None when there is no C code."""
    blocks = [(lang, code) for lang, code in code_blocks(text) if lang in _CODE_LANGS]
    candidates = [code for _, code in blocks if re.search(r"\)\s*(?:const\s*)?\{", code)]
    if not candidates and not blocks and re.search(r"\b(void|float|int|double)\b[^;]*\([^)]*\)\s*\{", text):
        candidates = [text]
    if not candidates:
        return None
    with_fn = [c for c in candidates if re.search(rf"\b{re.escape(function)}\s*\(", c)]
    chosen = "\n\n".join(with_fn or candidates)
    return clean_kernel(chosen, function)


def clean_kernel(code: str, function: str = FUNCTION) -> str:
    """Mechanical fixes that need no judgement: drop torch/pybind includes and bindings (the
    scaffold does the binding), and make sure the entry point is ``extern "C"``."""
    lines = []
    for line in code.splitlines():
        s = line.strip()
        if re.match(r"#\s*include\s*[<\"](torch|ATen|pybind11|c10)", s):
            continue
        if s.startswith("using namespace torch") or s.startswith("namespace py ="):
            continue
        lines.append(line)
    text = "\n".join(lines)
    text = re.sub(r"PYBIND11_MODULE\s*\([^)]*\)\s*\{.*?\n\}", "", text, flags=re.S)
    if re.search(rf"\b{re.escape(function)}\s*\(", text) and not re.search(
        rf'extern\s+"C"\s+(?:__host__\s+)?void\s+{re.escape(function)}\s*\(', text
    ):
        text = re.sub(rf"(^|\n)\s*(?:static\s+|inline\s+)*void\s+{re.escape(function)}\s*\(",
                      rf'\1extern "C" void {function}(', text, count=1)
    return text.strip() + "\n"


# -- C function surgery for edits and repairs ------------------------------------------------------


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


def function_text(code: str, name: str) -> str | None:
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


def prune_unreachable(code: str, entry: str = FUNCTION) -> str:
    """Drop top-level functions nothing reachable from ``entry`` calls (the test drivers, ``main()``
    and stray examples small models append); they can only break the build."""
    items = split_items(code)
    funcs = {it.name: it for it in items if it.kind == "function"}
    if entry not in funcs:
        return code
    keep, todo = {entry}, [entry]
    while todo:
        text = funcs[todo.pop()].text
        for name in funcs:
            if name not in keep and re.search(rf"\b{re.escape(name)}\s*[(<]", text):
                keep.add(name)
                todo.append(name)
    if len(keep) == len(funcs):
        return code
    lines = [it.text for it in items if it.kind == "line"]
    body = [it.text for it in items if it.kind == "block" or (it.kind == "function" and it.name in keep)]
    return "\n".join(lines) + "\n\n" + "\n\n".join(body) + "\n"


_CONST_ERR = re.compile(r"kernel\.(?:cpp|cu):(\d+):\d+: error: invalid conversion from [‘'`]const (\w+)\s*\*[’'`] to "
                        r"[‘'`](\w+)\s*\*[’'`]")
_DECL = re.compile(r"^(\s*)(?!const\b)((?:unsigned\s+)?\w+\s*\*\s*(?:__restrict__\s+)?\w+\s*=)")
_CONST_ARG_NOTE = re.compile(r"error: invalid conversion from [‘'`]const \w+\s*\*[’'`][^\n]*\n(?:[^\n]*\n){0,6}?"
                             r"kernel\.(?:cpp|cu):(\d+):(\d+): note:\s+initializing argument \d+ of")
_COLLAPSE_ERR = re.compile(r"kernel\.(?:cpp|cu):(\d+):\d+: error: not enough (?:for )?loops to collapse")
_ANY_ERR = re.compile(r"kernel\.(?:cpp|cu):(\d+):\d+: error:")
_UNDECLARED = re.compile(r"error: [‘'`](\w+)[’'`] was not declared in this scope")
_UNDECLARED_AT = re.compile(r"kernel\.(?:cpp|cu):(\d+):\d+: error: [‘'`](\w+)[’'`] was not declared in this scope")
# OpenMP's canonical-loop errors, reported on the loop the pragma applies to
_OMP_LOOP_ERR = re.compile(r"kernel\.(?:cpp|cu):(\d+):\d+: error: (?:invalid controlling predicate|invalid increment "
                           r"expression|expected iteration declaration or initialization|invalid type for iteration "
                           r"variable|initializer expression refers to iteration variable)")
_FN_HEAD = re.compile(r"^\S.*\)\s*(?:const\s*)?\{?\s*$")
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


# constants the directive patterns declare (cache_blocking's `const int64_t tile = 8;`), which the model
# sometimes uses without declaring: 7 of the 25 compile errors of the measured MCTS searches
PATTERN_CONSTANTS = {"tile": "const int64_t tile = 8;"}


def _declare_constant(lines: list[str], idx: int, name: str) -> bool:
    """Declare a pattern constant at the top of the function that uses it (once)."""
    for k in range(idx, -1, -1):
        if _FN_HEAD.match(lines[k]):
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
        if _FN_HEAD.match(lines[k]):
            break
    # no loop declares it: the unrolled loop that comes first starts from 0
    indent = re.match(r"\s*", lines[first_use]).group(0)
    declare(first_use, f"{indent}int64_t {name} = 0;")
    return True


_READ_ONLY_ERR = re.compile(r"kernel\.(?:cpp|cu):(\d+):\d+: error: assignment of read-only variable [‘'`](\w+)[’'`]")
_LOCAL_DECL = re.compile(r"^\s*(?:const\s+)?(?:float|double|int|int64_t|int32_t|long|size_t|auto)\s+(\w+)\s*=[^;]*;\s*(?://.*)?$")


def _function_span(lines: list[str], idx: int) -> tuple[int, int] | None:
    """(head line, closing line) of the top-level function around line ``idx``."""
    head = next((k for k in range(idx, -1, -1) if _FN_HEAD.match(lines[k])), None)
    if head is None:
        return None
    end = next((k for k in range(idx, len(lines)) if lines[k].startswith("}")), len(lines) - 1)
    return head, end


def _drop_unused_declaration(lines: list[str], idx: int, name: str) -> bool:
    """``const int64_t count = per_group * spatial;`` pasted into a helper where ``per_group`` does not
    exist: a local declaration that uses an undeclared name and that nothing else in the function
    reads is dropped (it can have no effect on the result)."""
    m = _LOCAL_DECL.match(lines[idx])
    span = _function_span(lines, idx)
    if not m or span is None or not re.search(rf"\b{re.escape(name)}\b", lines[idx].split("=", 1)[1]):
        return False
    declared = m.group(1)
    if any(re.search(rf"\b{re.escape(declared)}\b", lines[k]) for k in range(span[0], span[1] + 1) if k != idx):
        return False
    lines[idx] = ""  # blank, not removed: the compiler's other line numbers stay valid
    return True


def _unconst_assigned(lines: list[str], idx: int, name: str) -> bool:
    """``const float s0 = v[0];`` and then ``s0 += v[c];``: a local declared const but assigned later
    loses the const (which changes nothing else in a program that compiles)."""
    span = _function_span(lines, idx)
    if span is None:
        return False
    decl = re.compile(rf"\bconst\s+((?:float|double|int|int64_t|int32_t|long|size_t|auto)\s+{re.escape(name)}\s*[=;])")
    for k in range(idx - 1, span[0] - 1, -1):
        if decl.search(lines[k]):
            lines[k] = decl.sub(r"\1", lines[k], count=1)
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


def autofix(kernel: str, prelude: str, errors: str) -> tuple[str, list[str]] | None:
    """Mechanical fixes for the compile errors a small model makes most often here, driven by the
    compiler's own messages; no judgement, so no LLM call and no budget spent:

    - a pointer into a ``const`` input declared without ``const`` (``float* xr = x + r * cols;``);
    - ``collapse(n)`` on an OpenMP loop nest that no longer has n loops, and any other OpenMP pragma
      the compiler rejects (dropped: a pragma only speeds a correct loop up);
    - ``const float const`` (a repeated qualifier);
    - a helper used before it is defined (forward declarations are added);
    - functions that do not exist in C++: ``std::rsqrt``, ``rsqrtf`` on the CPU, ``std::pi``;
    - a local declared ``const`` and assigned later; a local nothing reads whose initializer uses an
      undeclared name (dropped).

    Returns (fixed kernel, what was fixed) or None when nothing applied. The caller re-checks."""
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
    for m in _CONST_ARG_NOTE.finditer(errors):  # a const input passed to a helper's non-const parameter
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
    for m in _ANY_ERR.finditer(errors):
        idx = int(m.group(1)) - 1 - offset
        if 0 <= idx < len(lines) and re.match(r"\s*#\s*pragma\s+omp\b", lines[idx]):
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
    hoisted = False
    # bottom up, as both fixes insert a line above the error; each checks the line it is given first
    for m in sorted(_UNDECLARED_AT.finditer(errors), key=lambda m: -int(m.group(1))):
        idx, name = int(m.group(1)) - 1 - offset, m.group(2)
        if not 0 <= idx < len(lines):
            continue
        if name in PATTERN_CONSTANTS:
            if _declare_constant(lines, idx, name):
                notes.append(f"`{name}` declared")
        elif _drop_unused_declaration(lines, idx, name):
            if "unused declaration dropped" not in notes:
                notes.append("unused declaration dropped")
        elif _hoist_loop_variable(lines, idx, name):
            hoisted = True
    if hoisted:
        notes.append("loop variable declared before its loop")
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
    late = [n for n in undeclared if n in defined and n != FUNCTION]
    if late:
        protos = []
        for it in items:
            if it.kind == "function" and it.name != FUNCTION:
                head = it.text[: it.text.index("{")].strip()
                if not head.startswith("extern"):
                    protos.append(head + ";")
        first_fn = next((it.text for it in items if it.kind != "line"), None)
        if protos and first_fn:
            text = text.replace(first_fn, "\n".join(protos) + "\n\n" + first_fn, 1)
            notes.append("forward declarations")
    if re.search(r"\bstd::rsqrt\s*\(", text) or (prelude.startswith("#include <cmath>") and re.search(r"(?<![\w:])rsqrtf?\s*\(", text)):
        before = text
        text = _replace_call(text, "std::rsqrt", "(1.0f / std::sqrt({}))")
        if "cuda_runtime" not in prelude and not re.search(r"\b(?:float|double|auto)\s+rsqrtf?\s*\(", text):
            # (a kernel that defines its own rsqrt keeps it)
            text = re.sub(r"(?<![\w:.])rsqrtf?\s*\(", "__kf_rsqrt(", text)
            text = _replace_call(text, "__kf_rsqrt", "(1.0f / std::sqrt({}))")
        if text != before:
            notes.append("rsqrt")
    if re.search(r"\b(?:std|math)::pi\b", text):
        text = re.sub(r"\b(?:std|math)::pi\b", "3.14159265358979f", text)
        notes.append("pi")
    if not notes or text == kernel:
        return None
    return text, notes


def autofix_const(kernel: str, prelude: str, errors: str) -> str | None:
    """Only the const-pointer fix of ``autofix`` (kept for callers that want just that one)."""
    out = autofix(kernel, prelude, errors)
    return out[0] if out and "const pointers" in out[1] else None
