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

from ..csource.items import ENTRY, TORCH_INCLUDE
from ..csource.mends import (
    drop_assigned_array_reductions,
    drop_scan_reductions,
    loop_block_rows,
    move_rechecks_out,
)
from ..kernels.policy import PLUMBING, OpRecorder, op_base
from ..llm.extract import native_code
from ..problem.problem import Problem, ProblemError
from ..problem.source import model_new_body, split_source
from . import indexing

FUNCTION = ENTRY  # the kernel function the model writes (csource's default entry point)

# scalar settings of standard modules that change what forward computes
MODULE_SCALARS = {
    "eps", "num_groups", "negative_slope", "alpha", "beta", "lambd", "threshold", "value", "min_val",
    "max_val", "upper", "lower", "dim", "scale", "temperature",
}
NORM_TYPES = ("GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d",
              "InstanceNorm3d")
# the ATen operators of those norms: a reference that calls them as functions has the same layout
CHANNEL_OPS = ("native_group_norm", "group_norm", "native_batch_norm", "batch_norm", "instance_norm",
               "cudnn_batch_norm", "native_batch_norm_legit_no_training")
# integer arguments worth recording (an op's settings, not its sizes): op -> {position: what it is}
INT_SETTINGS = {"native_group_norm": {6: "num_groups"}}

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
    value: float | int | None = None  # a scalar's value as measured (what exemplar fitting compares)

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
    # the plain numbers and words those operators were called with, in order: ("add", 1e-06) for
    # ``+ 1e-6``, ("mul", 0.125) for a scale, ("gelu", "tanh") for GELU's approximation. They say what
    # a constant of the reference is when it is written as a literal rather than kept as an attribute
    op_args: tuple[tuple[str, float | str], ...] = ()

    def signature(self) -> str:
        """The exact C declaration the model must implement."""
        params = [f"{a.ctype} {a.name}" for a in self.args]
        if self.language == "cuda":
            params.append("cudaStream_t stream")
        return f'extern "C" void {self.function}({", ".join(params)})'

    def reduced_dim(self) -> int | None:
        """The dimension of the first input the one output reduces (``indexing.reduced_dim``)."""
        return indexing.reduced_dim(self)

    def reduction_line(self) -> str:
        return indexing.reduction_line(self)

    def pooling_line(self) -> str:
        return indexing.pooling_line(self)

    def describe_args(self) -> str:
        """One line per argument for the prompt: what it is, its shape, how it is laid out."""
        lines = [f"- {a.name}: {a.doc}" for a in self.args]
        if self.language == "cuda":
            lines.append("- stream: the CUDA stream to launch on (kernel<<<grid, block, smem, stream>>>)")
        if self.reduction_line():
            lines.append(self.reduction_line())
        if self.pooling_line():
            lines.append(self.pooling_line())
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
    try:
        header, model_node = split_source(problem.source)
    except ProblemError as err:
        raise ScaffoldError(str(err)) from None
    class_body = model_new_body(problem.source, model_node)
    torch.manual_seed(0)
    init_inputs = list(mod.get_init_inputs())
    model = mod.Model(*init_inputs)
    model.eval()
    inputs = list(mod.get_inputs())
    with torch.no_grad():
        out, aten_ops, op_args = _traced(model, inputs)
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

    layout = _layout(model, primary, aten_ops, [v for _n, v in tensors[1:]])
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
    args += _reshaped_output_sizes(primary_name, primary, out_names, outs)

    args += _scalar_args(model)
    words = _module_words(model, problem.source)
    return Scaffold(
        problem_name=problem.name, language=language, args=tuple(args), forward_params=names,
        header=header, class_body=class_body, prepare=tuple(prepare), outputs=tuple(out_names), layout=layout,
        shapes=shapes, ops=words + aten_ops, aten_ops=aten_ops, op_args=op_args,
    )


def _reshaped_output_sizes(primary_name: str, primary: torch.Tensor, out_names: list[str],
                           outs: list[torch.Tensor]) -> list[KernelArg]:
    """Every dimension of the input and of an output that is neither like the input nor one value per
    row (a pooling, a reduction over a middle dimension): rows and cols alone cannot index those, and
    a kernel that writes one value per input value writes past such an output."""
    per_row = primary.numel() // max(primary.shape[-1], 1) if primary.dim() else 1
    odd = [(n, o) for n, o in zip(out_names, outs, strict=True) if o.numel() not in (primary.numel(), per_row)]
    if not odd:
        return []
    args = [KernelArg(f"{primary_name}_size{i}", "int64_t", f"{primary_name}.shape[{i}]", "size",
                      f"{primary_name}.shape[{i}] (= {d})") for i, d in enumerate(primary.shape)]
    for n, o in odd:
        args += [KernelArg(f"{n}_size{i}", "int64_t", f"{n}.shape[{i}]", "size",
                           f"{n}.shape[{i}] (= {d}); {n} holds {o.numel()} values: write each once, nothing past "
                           f"{n}[{o.numel() - 1}]" if i == o.dim() - 1 else f"{n}.shape[{i}] (= {d})")
                 for i, d in enumerate(o.shape)]
    return args


class _ArgRecorder(OpRecorder):
    """The ATen operators a forward runs, and the plain numbers and words each was called with."""

    def __init__(self) -> None:
        super().__init__()
        self.args: list[tuple[str, float | str]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = op_base(str(func.overloadpacket.__name__) if hasattr(func, "overloadpacket") else func)
        for a in list(args) + list((kwargs or {}).values()):
            if isinstance(a, float) or (isinstance(a, str) and name.lstrip("_") not in PLUMBING):
                self.args.append((name.lstrip("_"), a))
        for i, what in INT_SETTINGS.get(name.lstrip("_"), {}).items():  # e.g. the group count, as ("num_groups", 8)
            if i < len(args) and isinstance(args[i], int) and not isinstance(args[i], bool):
                self.args.append((what, args[i]))
        if name.lstrip("_") in indexing.POOL_OPS:
            self.args.extend(indexing.pool_settings(name.lstrip("_"), args, kwargs or {}))
        return super().__torch_dispatch__(func, types, args, kwargs)




def _traced(model: torch.nn.Module, inputs: list) -> tuple[object, tuple[str, ...], tuple[tuple[str, float | str], ...]]:
    """Run the reference once, recording the ATen operators it computes with (not the plumbing) and
    the constants they were called with."""
    rec = _ArgRecorder()
    with rec:
        out = model(*inputs)
    seq: list[str] = []
    for op in rec.ops:
        name = op.lstrip("_")
        if op in PLUMBING or name in PLUMBING or (seq and seq[-1] == name):
            continue
        seq.append(name)
    args = tuple((op, v) for op, v in rec.args if op not in PLUMBING)
    return out, tuple(seq[:24]), args[:48]


def _shape_expr(shape: torch.Size, name: str, primary: torch.Size) -> str:
    if tuple(shape) == tuple(primary[:-1]):
        return f"{name}.shape[:-1]"
    if tuple(shape) == tuple(primary[:-1]) + (1,):
        return f"{name}.shape[:-1] + (1,)"
    return repr(tuple(int(d) for d in shape))


def _layout(model: torch.nn.Module, primary: torch.Tensor, aten_ops: tuple[str, ...] = (),
            other_inputs: list[torch.Tensor] | tuple = ()) -> str:
    """"channels" (batch, channels, spatial) for a channel-wise reference: a norm module, a norm's ATen
    operator called as a function, or a per-channel parameter or input; else "rows"."""
    if primary.dim() < 3:
        return "rows"
    for _, m in model.named_modules():
        if type(m).__name__ in NORM_TYPES:
            return "channels"
    if any(op in CHANNEL_OPS for op in aten_ops):
        return "channels"
    c = primary.shape[1]
    if c != primary.shape[-1]:
        for p in [*model.parameters(), *model.buffers(), *other_inputs]:
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
                out.append(KernelArg(cname, "float", f"float(self.{dotted})", "scalar", f"self.{dotted} (= {value:g})",
                                     value))
            else:
                out.append(KernelArg(cname, "int64_t", f"int(self.{dotted})", "scalar", f"self.{dotted} (= {value})",
                                     value))
    return out


# -- turning an answer into kernel text ------------------------------------------------------------

def kernel_from_answer(text: str, function: str = FUNCTION) -> str | None:
    """The C/C++/CUDA code of an answer (``llm.extract.native_code``: a changed helper alone is
    code too), cleaned for the scaffold; None when there is no C code."""
    code = native_code(text, function)
    return None if code is None else clean_kernel(code, function)


MARKDOWN_FENCE = re.compile(r"^```[\w+-]*$")  # never C++ or CUDA


def clean_kernel(code: str, function: str = FUNCTION) -> str:
    """Mechanical fixes that need no judgement: drop torch/pybind includes and bindings (the
    scaffold does the binding), drop a markdown fence left inside the code (an answer that opened
    a second code block within the first), make sure the entry point is ``extern "C"``, drop the SIMD
    reduction pragma of a loop that stores its running value (a scan: ``drop_scan_reductions``) and the array
    reduction of a loop that assigns each value once (``drop_assigned_array_reductions``), move a test of a SIMD
    loop's reduction result out of that loop (``move_rechecks_out``), and loop over each block's rows where a blocked
    kernel handled only the first (``loop_block_rows``)."""
    lines = []
    for line in code.splitlines():
        s = line.strip()
        if TORCH_INCLUDE.match(s) or MARKDOWN_FENCE.match(s):
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
    text, _ = drop_scan_reductions(text)
    text, _ = drop_assigned_array_reductions(text)
    text, _ = move_rechecks_out(text)
    text, _ = loop_block_rows(text)
    return text.strip() + "\n"
