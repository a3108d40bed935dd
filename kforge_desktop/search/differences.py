"""What a problem computes otherwise than the exemplar a prompt shows, in sentences the model can act on.

When no exemplar fits a problem exactly, the nearest family still guides the prompt: a masked
softmax is a row softmax with one more step, a log-softmax is a softmax with another last step. The
default model copies the exemplar it is shown; told only "compute what the reference computes", it
wrote the plain softmax for a causal-masked one in every attempt. So the whole-kernel prompt names
each difference, e.g. "the reference also applies a causal mask: in row i of each T x T block of
scores, the columns j > i get -inf before the max (so they come out 0)".

The sentences come from what the scaffold measured (the operators, their constant arguments, the
signature and the output's shape) and from the reference's own source (the mask expression).
"""

from __future__ import annotations

import ast
import math
import re
from typing import TYPE_CHECKING

from .fitting import partial_fit
from .scaffold import Scaffold

if TYPE_CHECKING:
    from .exemplars import Exemplar

# operators that only build a mask for a masked_fill / where (said with the mask)
_MASK_PARTS = {"triu", "tril", "eq", "ne", "logical_not", "bitwise_not", "lt", "gt", "le", "ge", "arange"}


def _constants(scaffold: Scaffold, op: str) -> list[float]:
    return [v for o, v in scaffold.op_args if o == op and isinstance(v, float)]


def mask_expression(source: str) -> str:
    """The mask argument of the reference's ``masked_fill`` (``~keep[:, None, :]``), as written; "" if none."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "masked_fill":
            functional = isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"
            at = 1 if functional else 0  # torch.masked_fill(x, mask, v) or x.masked_fill(mask, v)
            if len(node.args) > at:
                mask = node.args[at]
                return ast.get_source_segment(source, mask) or ast.unparse(mask)
    return ""


def _mask_sentence(scaffold: Scaffold, source: str) -> str:
    ops = set(scaffold.aten_ops)
    fill = next((v for o, v in scaffold.op_args if o in ("masked_fill", "where") and isinstance(v, float)), None)
    value = "-inf" if fill is None or fill == float("-inf") else f"{fill:g}"
    after = " before the max (so they come out 0)" if any(o in ops for o in ("softmax", "log_softmax")) else ""
    if ops & {"triu", "tril"}:
        return (f"the reference also applies a causal mask: in row i of each T x T block of scores "
                f"(i = row % T, T = the last dimension), the columns j > i get {value}{after}")
    expr = mask_expression(source)
    masks = [a for a in scaffold.args if a.role in ("input", "param") and a.ctype.replace(" ", "") == "constbool*"]
    where = f"`{expr}` in the reference" if expr else "the reference's mask"
    tensor = f"; the mask comes from the tensor `{masks[0].name}` ({masks[0].doc})" if masks else ""
    return f"the reference also applies a mask: where {where} is true, the value becomes {value}{after}{tensor}"


def _op_sentence(op: str, scaffold: Scaffold, source: str, language: str) -> str:
    from .exemplars import EPILOGUE_OPS

    table = EPILOGUE_OPS.get(language, {})
    consts = _constants(scaffold, op)
    inputs = [a.name for a in scaffold.args if a.role == "input"]
    if op in ("masked_fill", "where"):
        return _mask_sentence(scaffold, source)
    if op in ("mul", "div") and consts:
        how = "multiplies" if op == "mul" else "divides"
        scale = [a.name for a in scaffold.args if a.role == "scalar" and a.ctype == "float"]
        named = f" (`{scale[0]}` in the signature)" if scale and len(consts) == 1 else ""
        return f"the reference also {how} by {', '.join(f'{v:g}' for v in consts)}{named}"
    if op == "add" and len(inputs) >= 2 and _adds(inputs[0], inputs[1], source):
        return (f"the reference first adds `{inputs[1]}` to `{inputs[0]}` elementwise; everything after works on "
                "that sum")
    if op == "log_softmax":
        return ("the output is the log of the softmax: out = (x - max) - log(sum over the row of exp(x - max)); "
                "no division, and no exp of the output")
    if op == "gelu":
        return "GELU here is the exact one: 0.5 * v * (1 + erf(v / sqrt(2)))"
    if op == "gelu_tanh":
        return "GELU here is the tanh approximation: 0.5 * v * (1 + tanh(0.7978845608 * (v + 0.044715 * v^3)))"
    if op == "leaky_relu":
        slope = consts[0] if consts else 0.01
        return f"leaky_relu with negative slope {slope:g}: v > 0 ? v : {slope:g} * v"
    if op == "cumsum":
        return ("cumsum: out[c] is the sum of x[0..c] along the row (an inclusive running sum), not one total")
    if op in ("linalg_vector_norm", "norm"):
        p = consts[0] if consts else 2.0
        return f"the {p:g}-norm of each row: ({'sum of |x|^p' if p != 2 else 'sqrt of the sum of x * x'})"
    if op == "clamp_min":
        return f"clamp_min: max(v, {consts[0]:g})" if consts else "clamp_min"
    if op in ("nll_loss_forward", "nll_loss", "nll_loss_nd"):
        target = next((a.name for a in scaffold.args if a.role == "input" and "int" in a.ctype), "target")
        return (f"nll_loss: out[r] = -logp[r, {target}[r]] with logp the log_softmax of row r (one value per row; "
                f"`{target}` holds each row's class index)")
    if op.startswith("max_pool") or op.startswith("avg_pool"):
        if scaffold.pooling_line():
            return (f"pooling: each output value is the {'max' if op.startswith('max') else 'mean'} of one window "
                    "of the input (see the pooling line above for the window of each output value)")
        return ("pooling: each output value is the max (or mean) of one window of the input along the pooled "
                "dimensions (kernel_size and stride as in the reference)")
    if op in ("sum", "mean", "amax", "amin", "prod", "max", "min"):
        k = scaffold.reduced_dim()
        where = ("over each row" if k is not None and k == len(scaffold.shapes[inputs[0]]) - 1 else
                 f"over dimension {k} (see the reduction line above)" if k is not None else
                 "(see the output's shape for which dimension it reduces)")
        what = {"mean": "the sum of the values reduced divided by how many there are",
                "amax": "the largest value", "max": "the largest value", "amin": "the smallest value",
                "min": "the smallest value", "sum": "the sum", "prod": "the product"}[op]
        return f"{op}: a reduction {where}: {what}"
    if op in ("bmm", "mm", "matmul", "addmm", "baddbmm", "linear"):
        return f"{op}: a matrix product (see the reference for which operands and shapes)"
    if op in table:
        return f"{op} (of a value v: {table[op]})"
    return op


def _adds(a: str, b: str, source: str) -> bool:
    """Whether the reference's code adds the inputs ``a`` and ``b`` themselves (``a + b`` or ``b + a``), not
    two values computed from them (a loss's two terms)."""
    ea, eb = re.escape(a), re.escape(b)
    return bool(re.search(rf"\b{ea}\s*\+\s*{eb}\b|\b{eb}\s*\+\s*{ea}\b", source))


def _fused_residual(name: str, scaffold: Scaffold, source: str) -> str | None:
    """The sentence for an extra input the reference adds to the main one before anything else (a norm
    after a residual add: ``norm(x + residual)``); None when ``name`` is no such input."""
    if not scaffold.forward_params or not scaffold.aten_ops or scaffold.aten_ops[0] != "add":
        return None
    x = scaffold.forward_params[0]
    if name == x or scaffold.shapes.get(name) != scaffold.shapes.get(x):
        return None
    if not _adds(x, name, source):
        return None
    return (f"the reference first adds `{name}` (same shape as `{x}`) to `{x}`: read v = {x}[i] + {name}[i] wherever "
            "the example reads its input, and use v for everything after (the statistics and the output)")


def _number_in(value: float, code: str) -> bool:
    text = f"{value:.6g}".rstrip("0").rstrip(".")
    return any(t in code for t in {text, f"{value!r}", f"{value:g}"})


def unexplained_factors(ex: Exemplar, scaffold: Scaffold, source: str = "", language: str | None = None) -> list[str]:
    """A sentence for each constant factor the reference multiplies or divides by that the example
    neither takes as its ``scale`` nor writes itself (quick GELU's 1.702 beside the SiLU exemplar): an
    exemplar that otherwise fits computes something else, and is no seed."""
    if any(p == "scale" for _, p in ex.params()):
        return []
    out: list[str] = []
    for op, v in scaffold.op_args:
        if op in ("mul", "div") and isinstance(v, float) and abs(v) != 1.0 and math.isfinite(v) \
                and not _number_in(v, ex.code):
            text = _op_sentence(op, scaffold, source, language or scaffold.language)
            if text not in out:
                out.append(text)
    return out


def differences(ex: Exemplar, scaffold: Scaffold, source: str = "", language: str | None = None) -> list[str]:
    """What this problem computes otherwise than ``ex``: one sentence per difference (empty when the
    exemplar fits the problem and computes all of it)."""
    from .exemplars import extra_activations, missing_ops, needs_met, op_name, output_fits, problem_ops

    lang = language or scaffold.language
    f = partial_fit(ex, scaffold, source)
    missing = missing_ops(ex, scaffold)
    if f is not None and f.complete and not missing and needs_met(ex, scaffold) and output_fits(ex, scaffold):
        return unexplained_factors(ex, scaffold, source, lang)
    out: list[str] = []
    if not needs_met(ex, scaffold):
        needs = " and ".join(n.replace("|", " or ") for n in ex.needs)
        out.append(f"the example applies {needs} ({ex.about.split(':')[0]}); this model does not: leave that out")
    have = {op_name(op) for op in problem_ops(scaffold)}
    if "masked_fill" in " ".join(ex.needs) and not have & {"triu", "tril"} and have & {"masked_fill", "where"}:
        out.append("unlike the example's causal mask, " + _mask_sentence(scaffold, source).removeprefix(
            "the reference also applies a mask: "))
    has_mask = any(op_name(op) in ("masked_fill", "where") for op in missing)
    for op in missing:
        if has_mask and op_name(op) in _MASK_PARTS:
            continue  # said with the mask
        text = _op_sentence(op_name(op) if op.startswith("_") else op, scaffold, source, lang)
        if text not in out:
            out.append(text)
    left_out = extra_activations(ex, scaffold)
    if left_out:
        out.append(f"the example applies {', '.join(left_out)}; this model does not: leave that out")
    for text in unexplained_factors(ex, scaffold, source, lang):
        if text not in out:
            out.append(text)
    if f is not None:
        docs = {a.name: a.doc for a in scaffold.args}
        for name in f.extra:
            if any(f"`{name}`" in line for line in out):
                continue  # said already (the mask's tensor)
            fused = _fused_residual(name, scaffold, source)
            if fused:
                out.append(fused)
                continue
            out.append(f"this kernel also takes `{name}` ({docs.get(name, '')}); the example has no such argument: "
                       "use it as the reference does")
        for name in f.missing:
            out.append(f"the example's `{name}` has no counterpart here: leave it out")
    if len(scaffold.outputs) == 1 and not output_fits(ex, scaffold):
        shape = scaffold.shapes.get(scaffold.outputs[0])
        k = scaffold.reduced_dim()
        if shape is not None and ex.output == "per-row" and k is not None:
            out.append(f"the example reduces each row (the last dimension); this model reduces dimension {k}: "
                       f"the output `{scaffold.outputs[0]}` has shape {list(shape)} ({math.prod(shape)} values), "
                       "indexed as the reduction line above says")
        elif shape is not None:
            out.append(f"the output `{scaffold.outputs[0]}` has shape {list(shape)} ({math.prod(shape)} values): "
                       "write exactly those, not one value per input value as the example does"
                       if ex.output == "like-input" else
                       f"the output `{scaffold.outputs[0]}` has shape {list(shape)} ({math.prod(shape)} values)")
    return out
