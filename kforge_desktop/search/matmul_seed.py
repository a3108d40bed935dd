"""The matmul exemplar (Triton) fitted to a problem whose forward is one matrix product.

Why: the linear layers of a transformer block are most of its time (80 % of the GPU-sized decoder
block's), and in fp32 PyTorch and torch.compile run them with cuBLAS's fp32 kernels, which do not
use the tensor cores. The exemplar (``resources/exemplars/triton/matmul.py``) runs each fp32
product as three TF32 products on the tensor cores, which keeps fp32's accuracy at a higher rate.

The fit reads the reference's ``forward`` as one expression (names inlined, as the attention fit
does): ``F.linear(x, w[, bias])``, ``a @ b``, ``torch.matmul``/``mm``/``bmm``, or
``torch.addmm(bias, a, b)``, with only views around the operands and the result. Anything else in
the forward means no seed (``None``). A forward that is one softmax over the last dimension gets the
softmax exemplar the same way (``softmax_module``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .attention_seed import _args, _call_name, _matmul, _number, _only_views, read_forward, write_module

EXEMPLAR_NAME = "matmul"


@dataclass(frozen=True)
class MatmulFit:
    """The reference's product: its operands as expressions over the forward's arguments."""

    call: str  # "linear" (a, b: x and weight), "matmul" (a @ b) or "softmax" (of a)
    a: str
    b: str
    bias: str | None
    prologue: tuple[str, ...]
    wrap: str  # the views of the result, around ``{}``


def matmul_module(source: str) -> str | None:
    """The candidate module (``ModelNew``) that computes ``source``'s product with the exemplar,
    or None when the problem's forward is not one product the exemplar computes."""
    return write_module(source, fit_matmul, _product_call, (EXEMPLAR_NAME,))


def _product_call(fit: MatmulFit) -> list[str]:
    operands = [("mm_a", fit.a), ("mm_b", fit.b)] + ([("mm_bias", fit.bias)] if fit.bias else [])
    call = f"{fit.call}(mm_a, mm_b{', mm_bias' if fit.bias else ''})"
    return [*(f"{name} = {expr}" for name, expr in operands), f"return {fit.wrap.format(call)}"]


def fit_matmul(forward: ast.FunctionDef) -> MatmulFit | None:
    read = read_forward(forward)
    core = _product(read[0]) if read is not None else None
    if core is None:
        return None
    _, wrap, prologue, sizes = read
    call, a, b, bias = core
    if not all(_only_views(e, sizes) for e in (a, b, bias, *(p.value for p in prologue))):
        return None
    return MatmulFit(call=call, a=ast.unparse(a), b=ast.unparse(b), bias=None if bias is None else ast.unparse(bias),
                     prologue=tuple(ast.unparse(p) for p in prologue), wrap=wrap)


def softmax_module(source: str) -> str | None:
    """The candidate module that computes ``source``'s softmax over the last dimension with the
    softmax exemplar (views around it allowed), or None when the forward is anything else."""
    return write_module(source, fit_softmax, lambda fit: [f"sm_x = {fit.a}", f"return {fit.wrap.format('softmax(sm_x)')}"],
                        ("softmax",))


def fit_softmax(forward: ast.FunctionDef) -> MatmulFit | None:
    """A forward that is ``softmax(x, dim=-1)`` of views (``torch.softmax``, ``F.softmax``,
    ``x.softmax``), as a fit with ``a`` the softmax's input."""
    read = read_forward(forward)
    if read is None:
        return None
    core, wrap, prologue, sizes = read
    name, receiver = _call_name(core)
    if name != "softmax" or not isinstance(core, ast.Call):
        return None
    args = _args(core, receiver)
    kw = {k.arg: k.value for k in core.keywords}
    if set(kw) - {"dim"} or len(args) + len(kw) != 2:
        return None
    dim = kw.get("dim", args[1] if len(args) > 1 else None)
    if _number(dim) not in (-1.0,) or not all(_only_views(e, sizes) for e in (args[0], *(p.value for p in prologue))):
        return None
    return MatmulFit(call="softmax", a=ast.unparse(args[0]), b="", bias=None,
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
