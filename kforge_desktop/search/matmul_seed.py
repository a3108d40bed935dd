"""The matmul exemplar (Triton) fitted to a problem whose forward is one matrix product.

Why: the linear layers of a transformer block are most of its time (80 % of the GPU-sized decoder
block's), and in fp32 PyTorch and torch.compile run them with cuBLAS's fp32 kernels, which do not
use the tensor cores. The exemplar (``resources/exemplars/triton/matmul.py``) runs each fp32
product as three TF32 products on the tensor cores, which keeps fp32's accuracy at a higher rate.

The fit reads the reference's ``forward`` as one expression (names inlined, as the attention fit
does): ``F.linear(x, w[, bias])``, ``a @ b``, ``torch.matmul``/``mm``/``bmm``, or
``torch.addmm(bias, a, b)``, with only views around the operands and the result. Anything else in
the forward means no seed (``None``).
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

from ..problem.problem import ProblemError
from ..problem.source import model_new_body, split_source
from .attention_seed import _VIEW_METHODS, _args, _call_name, _matmul, _only_views, _resolved, exemplar_code

EXEMPLAR_NAME = "matmul"


@dataclass(frozen=True)
class MatmulFit:
    """The reference's product: its operands as expressions over the forward's arguments."""

    call: str  # "linear" (a, b: x and weight) or "matmul" (a @ b)
    a: str
    b: str
    bias: str | None
    prologue: tuple[str, ...]
    wrap: str  # the views of the result, around ``{}``


def matmul_module(source: str) -> str | None:
    """The candidate module (``ModelNew``) that computes ``source``'s product with the exemplar,
    or None when the problem's forward is not one product the exemplar computes."""
    try:
        header, model = split_source(source)
    except (ProblemError, SyntaxError):
        return None
    forward = next((n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
    fit = fit_matmul(forward) if forward is not None else None
    if fit is None:
        return None
    operands = [("mm_a", fit.a), ("mm_b", fit.b)] + ([("mm_bias", fit.bias)] if fit.bias else [])
    call = f"{fit.call}(mm_a, mm_b{', mm_bias' if fit.bias else ''})"
    lines = [f"    def forward({ast.unparse(forward.args)}):", *(f"        {s}" for s in fit.prologue),
             *(f"        {name} = {expr}" for name, expr in operands), f"        return {fit.wrap.format(call)}"]
    return (f"{header}\n\n{exemplar_code(EXEMPLAR_NAME)}\n\nclass ModelNew(nn.Module):\n"
            f"{model_new_body(source, model)}\n\n" + "\n".join(lines) + "\n")


def fit_matmul(forward: ast.FunctionDef) -> MatmulFit | None:
    resolved = _resolved(forward)
    if resolved is None:
        return None
    result, prologue, sizes = resolved
    wrap = "{}"
    while _call_name(result)[0] in _VIEW_METHODS and _call_name(result)[1] is not None:  # views of the result
        outer = copy.deepcopy(result)
        outer.func.value = ast.Name("__PRODUCT__", ast.Load())
        if not _only_views(outer, sizes):
            return None
        wrap = wrap.format(ast.unparse(outer).replace("__PRODUCT__", "{}"))
        result = result.func.value
    core = _product(result)
    if core is None:
        return None
    call, a, b, bias = core
    if not all(_only_views(e, sizes) for e in (a, b, bias, *(p.value for p in prologue))):
        return None
    return MatmulFit(call=call, a=ast.unparse(a), b=ast.unparse(b), bias=None if bias is None else ast.unparse(bias),
                     prologue=tuple(ast.unparse(p) for p in prologue), wrap=wrap)


def _product(expr: ast.expr) -> tuple[str, ast.expr, ast.expr, ast.expr | None] | None:
    """(call, a, b, bias) of ``linear``, ``addmm`` or a matmul; None for anything else."""
    operands = _matmul(expr)
    if operands is not None:
        return "matmul", operands[0], operands[1], None
    name, receiver = _call_name(expr)
    if not isinstance(expr, ast.Call) or receiver is not None:
        return None
    kw = {k.arg: k.value for k in expr.keywords}
    args = _args(expr, receiver)
    if name == "mm" and len(args) == 2 and not kw:
        return "matmul", args[0], args[1], None
    if name == "linear" and 2 <= len(args) + len(kw) <= 3 and set(kw) <= {"input", "weight", "bias"}:
        named = dict(zip(("input", "weight", "bias"), args)) | kw
        if "input" not in named or "weight" not in named:
            return None
        bias = named.get("bias")
        if isinstance(bias, ast.Constant) and bias.value is None:
            bias = None
        return "linear", named["input"], named["weight"], bias
    if name == "addmm" and len(args) == 3 and not kw:
        return "matmul", args[1], args[2], args[0]
    return None
