"""The flash-attention exemplar (Triton) fitted to a problem whose forward is an explicit attention.

Why: a model's attention written the ordinary way (``softmax(q @ k.T * scale, masked) @ v``) is the
largest target of most transformer and diffusion blocks, and torch.compile runs it as two cuBLAS
matmuls around a softmax, writing the score matrix to memory and reading it back. The exemplar
(``resources/exemplars/triton/attention.py``) computes it in one pass; on fp32 inputs its products
run on the tensor cores as three TF32 products each, so it keeps fp32's accuracy.

The fit reads the reference's ``forward`` (what ``kforge profile`` writes for an attention target,
or a hand-written one: views that cut q, k and v out of their inputs, a matmul, a scale, a mask, a
softmax, a matmul, views of the result), with every name replaced by the expression it is bound to,
and writes a ``ModelNew`` whose forward is one call of the exemplar's ``attention`` on the same
views. A forward with anything else in it gets no seed (``None``): the exemplar is a seed only
where it computes all of the problem.
"""

from __future__ import annotations

import ast
import copy
import math
import re
from dataclasses import dataclass
from functools import lru_cache

from .. import paths
from ..problem.problem import ProblemError
from ..problem.source import model_new_body, split_source

EXEMPLAR_NAME = "attention"
_HEADER = re.compile(r"^#\s*(exemplar|ops|about):")  # the exemplar file's header (``exemplars.HEADER``'s fields)
MASK_KIND = {None: 1, "triu": 2, "tril": 3}  # the exemplar's MASK_GIVEN, MASK_TRIU, MASK_TRIL

# what may run around the attention: views and shape arithmetic, nothing that computes on values
_VIEW_METHODS = {
    "view", "reshape", "transpose", "permute", "unsqueeze", "squeeze", "flatten", "unflatten", "chunk",
    "split", "unbind", "expand", "narrow", "select", "movedim", "swapaxes", "size", "contiguous", "t",
}


@dataclass(frozen=True)
class AttentionFit:
    """The reference's attention: its operands as expressions over the forward's arguments."""

    left: str  # the scores' left operand (a matmul's first argument)
    right: str  # its right operand
    value: str  # what the probabilities multiply
    scale: float
    mask: str | None  # what the mask is made of (None: no mask)
    mask_kind: int
    diag: int
    prologue: tuple[str, ...]  # statements that unpack views (``q, k, v = x.chunk(3, 1)``)
    wrap: str  # the views of the result, around ``{}``


@lru_cache(maxsize=4)
def exemplar_code(name: str = EXEMPLAR_NAME) -> str:
    """A Triton exemplar's code (``resources/exemplars/triton/NAME.py``) without its header comment."""
    text = (paths.RESOURCES / "exemplars" / "triton" / f"{name}.py").read_text()
    return "\n".join(ln for ln in text.splitlines() if not _HEADER.match(ln)).strip() + "\n"


def write_module(source: str, fit, body, exemplars: tuple[str, ...]) -> str | None:
    """A candidate module (``ModelNew``) built from Triton exemplars: ``fit(forward)`` reads the
    reference's forward (None: no seed), ``body(fit)`` writes the new forward's statements after the
    fit's prologue. The reference's ``__init__`` is kept verbatim."""
    try:
        header, model = split_source(source)
    except (ProblemError, SyntaxError):
        return None
    forward = next((n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
    found = fit(forward) if forward is not None else None
    if found is None:
        return None
    lines = [f"    def forward({ast.unparse(forward.args)}):", *(f"        {s}" for s in found.prologue),
             *(f"        {s}" for s in body(found))]
    code = "\n\n".join(exemplar_code(name) for name in exemplars)
    return (f"{header}\n\n{code}\n\nclass ModelNew(nn.Module):\n"
            f"{model_new_body(source, model)}\n\n" + "\n".join(lines) + "\n")


def attention_module(source: str) -> str | None:
    """The candidate module (``ModelNew``) that computes ``source``'s attention with the exemplar,
    or None when the problem's forward is not an attention the exemplar computes."""
    return write_module(source, fit_attention, _one_pass, (EXEMPLAR_NAME,))


def _one_pass(fit: AttentionFit) -> list[str]:
    operands = [("attn_a", fit.left), ("attn_b", fit.right), ("attn_v", fit.value)]
    operands += [("attn_mask", fit.mask)] if fit.mask else []
    mask = f", mask=attn_mask, mask_kind={fit.mask_kind}, diag={fit.diag}" if fit.mask else ""
    call = f"attention(attn_a, attn_b, attn_v, scale={fit.scale!r}{mask})"
    return [*(f"{name} = {expr}" for name, expr in operands), f"return {fit.wrap.format(call)}"]


def attention_products_module(source: str) -> str | None:
    """The same attention as two products of the matmul exemplar around the softmax exemplar: the score
    matrix is written, but each product runs at the exemplar's full tile sizes (for a head wider than
    128, where the one-pass kernel's tiles do not fit on the chip). None where ``attention_module`` is."""
    return write_module(source, fit_attention, _two_products, ("matmul", "softmax"))


def _two_products(fit: AttentionFit) -> list[str]:
    lines = [f"scores = matmul({fit.left}, {fit.right}, alpha={fit.scale!r})"]
    if fit.mask:
        mask = {1: fit.mask, 2: f"({fit.mask}).triu({fit.diag})", 3: f"({fit.mask}).tril({fit.diag})"}[fit.mask_kind]
        lines.append(f"scores = scores.masked_fill({mask}, float('-inf'))")
    return lines + ["probs = softmax(scores)", f"return {fit.wrap.format(f'matmul(probs, {fit.value})')}"]


def _body(forward: ast.FunctionDef) -> list[ast.stmt]:
    body = list(forward.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    return body


class _Inline(ast.NodeTransformer):
    """Replaces each name bound in the forward by the expression bound to it."""

    def __init__(self, env: dict[str, ast.expr]) -> None:
        self.env = env

    def visit_Name(self, node: ast.Name) -> ast.expr:
        return copy.deepcopy(self.env[node.id]) if node.id in self.env else node


def _resolved(forward: ast.FunctionDef) -> tuple[ast.expr, list[ast.Assign], set[str]] | None:
    """The forward's result as one expression over its arguments (every single-name binding
    inlined), the unpacking statements it still needs (their names made unique), and which of
    those names hold sizes (unpacked from ``x.shape``). None when the forward does anything else."""
    env: dict[str, ast.expr] = {}
    prologue: list[ast.Assign] = []
    sizes: set[str] = set()
    for stmt in _body(forward):
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            return _Inline(env).visit(copy.deepcopy(stmt.value)), prologue, sizes
        if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
            return None
        value = _Inline(env).visit(copy.deepcopy(stmt.value))
        target = stmt.targets[0]
        if isinstance(target, ast.Name):
            env[target.id] = value
        elif isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
            fresh = [f"{e.id}_{len(prologue)}" for e in target.elts]
            prologue.append(ast.Assign(targets=[ast.Tuple([ast.Name(f, ast.Store()) for f in fresh], ast.Store())],
                                       value=value, lineno=0))
            if _is_shape(value):
                sizes |= set(fresh)
            env.update({e.id: ast.Name(f, ast.Load()) for e, f in zip(target.elts, fresh)})
        else:
            return None
    return None


def read_forward(forward: ast.FunctionDef) -> tuple[ast.expr, str, list[ast.Assign], set[str]] | None:
    """The forward as one expression under the views of its result: (that expression, the views as a
    format string, the unpacking statements it needs, the names that hold sizes); None when the
    forward does more than bind names and return (``_resolved``) or a view of the result computes."""
    resolved = _resolved(forward)
    if resolved is None:
        return None
    result, prologue, sizes = resolved
    unwrapped = unwrap_views(result, sizes)
    return None if unwrapped is None else (*unwrapped, prologue, sizes)


def fit_attention(forward: ast.FunctionDef) -> AttentionFit | None:
    read = read_forward(forward)
    if read is None:
        return None
    result, wrap, prologue, sizes = read
    second = _matmul(result)
    if second is None:
        return None
    probs, value = second
    name, receiver = _call_name(probs)
    args = _args(probs, receiver) if name == "softmax" else []
    dim = next((k.value for k in probs.keywords if k.arg == "dim"), args[1] if len(args) > 1 else None) \
        if args else None
    if dim is None or _number(dim) != -1:
        return None
    scale, mask, kind, diag = 1.0, None, 1, 0
    cur = args[0]
    while (operands := _matmul(cur)) is None:  # back from the softmax to the scores' matmul
        if isinstance(cur, ast.BinOp) and isinstance(cur.op, (ast.Mult, ast.Div)):
            const_r, const_l = _number(cur.right), _number(cur.left)
            if const_r is not None and const_r > 0:
                scale *= const_r if isinstance(cur.op, ast.Mult) else 1.0 / const_r
                cur = cur.left
            elif isinstance(cur.op, ast.Mult) and const_l is not None and const_l > 0:
                scale *= const_l
                cur = cur.right
            else:
                return None
            continue
        name, receiver = _call_name(cur)
        margs = _args(cur, receiver) if isinstance(cur, ast.Call) else []
        if name == "masked_fill" and mask is None and len(margs) == 3 and _is_minus_inf(margs[2]):
            mask, kind, diag = _mask_source(margs[1])
            if mask is None:
                return None
            cur = margs[0]
            continue
        return None
    left, right = operands
    if not all(_only_views(e, sizes) for e in (left, right, value, *(p.value for p in prologue))):
        return None
    if mask is not None and not _only_views(mask, sizes):
        return None
    return AttentionFit(left=ast.unparse(left), right=ast.unparse(right), value=ast.unparse(value), scale=scale,
                        mask=None if mask is None else ast.unparse(mask), mask_kind=kind, diag=diag,
                        prologue=tuple(ast.unparse(p) for p in prologue), wrap=wrap)


def unwrap_views(result: ast.expr, sizes: set[str]) -> tuple[ast.expr, str] | None:
    """The expression under the views applied to ``result`` (``y.transpose(1, 2).reshape(b, -1)``:
    ``y``), and those views as a format string around ``{}``; None when one of them computes."""
    wrap = "{}"
    while _call_name(result)[0] in _VIEW_METHODS and _call_name(result)[1] is not None:
        outer = copy.deepcopy(result)
        outer.func.value = ast.Name("__RESULT__", ast.Load())
        if not _only_views(outer, sizes):
            return None
        wrap = wrap.format(ast.unparse(outer).replace("__RESULT__", "{}"))
        result = result.func.value
    return result, wrap


def _mask_source(expr: ast.expr) -> tuple[ast.expr | None, int, int]:
    """What a masked_fill's mask is made of: the tensor a ``triu``/``tril`` is taken of, with the
    kind and diagonal, or the mask itself (a forward argument or a view of one)."""
    fn, receiver = _call_name(expr)
    args = _args(expr, receiver) if isinstance(expr, ast.Call) else []
    if fn in ("triu", "tril") and args and len(args) <= 2:
        kw = {k.arg: k.value for k in expr.keywords}
        diag = _number(args[1]) if len(args) == 2 else _number(kw["diagonal"]) if "diagonal" in kw else 0.0
        if diag is None or diag != math.floor(diag) or set(kw) - {"diagonal"}:
            return None, 0, 0
        return args[0], MASK_KIND[fn], int(diag)
    return expr, MASK_KIND[None], 0


def _call_name(expr: ast.expr) -> tuple[str, ast.expr | None]:
    """("softmax", None) for ``torch.softmax(..)``/``F.softmax(..)``; ("softmax", x) for ``x.softmax(..)``."""
    if not isinstance(expr, ast.Call):
        return "", None
    f = expr.func
    if isinstance(f, ast.Attribute):
        if isinstance(f.value, ast.Name) and f.value.id in ("torch", "F"):
            return f.attr, None
        if isinstance(f.value, ast.Attribute) and ast.unparse(f.value) == "torch.nn.functional":
            return f.attr, None
        return f.attr, f.value
    return (f.id, None) if isinstance(f, ast.Name) else ("", None)


def _args(expr: ast.Call, receiver: ast.expr | None) -> list[ast.expr]:
    return ([receiver] if receiver is not None else []) + list(expr.args)


def _number(expr: ast.expr) -> float | None:
    try:
        value = ast.literal_eval(expr)
    except (ValueError, SyntaxError, TypeError):
        return None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _is_minus_inf(expr: ast.expr) -> bool:
    text = ast.unparse(expr).replace(" ", "")
    return text in ("-inf", "-math.inf", "float('-inf')", 'float("-inf")', "-float('inf')", "-torch.inf")


def _matmul(expr: ast.expr) -> tuple[ast.expr, ast.expr] | None:
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.MatMult):
        return expr.left, expr.right
    name, receiver = _call_name(expr)
    args = _args(expr, receiver) if isinstance(expr, ast.Call) else []
    if name in ("matmul", "bmm") and len(args) == 2 and not expr.keywords:
        return args[0], args[1]
    return None


def _is_shape(expr: ast.expr) -> bool:
    """``x.shape`` or ``x.size()``: a tuple of sizes."""
    return (isinstance(expr, ast.Attribute) and expr.attr == "shape") or (
        isinstance(expr, ast.Call) and _call_name(expr)[0] == "size" and not expr.args)


def _is_size(expr: ast.expr, sizes: set[str]) -> bool:
    """An integer: a literal, a name bound to one, ``x.size(d)``, ``x.shape[d]``, arithmetic on them."""
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, int) and not isinstance(expr.value, bool)
    if isinstance(expr, ast.Name):
        return expr.id in sizes
    if isinstance(expr, ast.BinOp):
        return _is_size(expr.left, sizes) and _is_size(expr.right, sizes)
    if isinstance(expr, ast.UnaryOp):
        return _is_size(expr.operand, sizes)
    if isinstance(expr, ast.Subscript):
        return isinstance(expr.value, ast.Attribute) and expr.value.attr == "shape"
    return isinstance(expr, ast.Call) and _call_name(expr)[0] == "size" and bool(expr.args)


def _only_views(expr: ast.expr | None, sizes: set[str]) -> bool:
    """True when ``expr`` only reshapes tensors or computes sizes: view methods, indexing, integers."""
    if expr is None:
        return True
    for node in ast.walk(expr):
        if isinstance(node, ast.Call):
            name, receiver = _call_name(node)
            if receiver is None or name not in _VIEW_METHODS:
                return False
        elif isinstance(node, (ast.BinOp, ast.UnaryOp)) and not _is_size(node, sizes):
            return False
    return True
