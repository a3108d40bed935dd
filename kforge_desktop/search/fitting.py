"""Fitting an exemplar to a problem: which of the problem's arguments each exemplar parameter is.

An exemplar is written once for a family (RMSNorm, a masked softmax, LayerNorm of a residual sum);
problems of that family come with many signatures. The same RMSNorm is ``self.eps`` in one model,
``+ 1e-6`` written in ``forward`` in another, ``norm.variance_epsilon`` in a third; its weight may be a
parameter, an input (a whole-model target passes parameters as inputs, with their sizes), or absent.
A fit pairs each exemplar parameter with:

- a problem argument of the same C type, by name (``weight`` ~ ``norm_weight``, ``eps`` ~
  ``variance_epsilon``) or, for the tensors left over, by position;
- else a constant the reference computes with, read from the operators' recorded arguments
  (``Scaffold.op_args``): an epsilon added in ``forward``, a scale multiplied or divided by;
- else, when the exemplar declares the parameter ``optional``, its neutral value: the parameter is
  taken out of the kernel (``weight[c]`` becomes ``1.0f``, helpers lose the parameter) or, for a
  scalar, declared as a constant.

Every problem argument must be used, except the sizes of secondary inputs (``weight_size0``), which
the family's own layout implies. The adapted kernel then takes the problem's exact signature.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..csource.comments import strip_cpp_comments
from .scaffold import FUNCTION, Scaffold

if TYPE_CHECKING:
    from .exemplars import Exemplar

# names a problem gives the same thing (besides prefixes such as ``norm_``)
ALIASES = {
    "num_groups": ("groups",),
    "eps": ("epsilon", "variance_epsilon"),
    "scale": ("scaling", "softmax_scale", "sm_scale"),
    "weight": ("gamma",),
    "bias": ("beta",),
}
PARAM_NAMES = {"weight", "bias", "gamma", "beta"}  # learned tensors, as opposed to the data inputs


@dataclass(frozen=True)
class Fit:
    """How an exemplar's parameters meet a problem's arguments."""

    mapping: dict[str, str]  # exemplar parameter -> problem argument
    constants: dict[str, float] = field(default_factory=dict)  # exemplar scalar -> value the reference uses
    dropped: dict[str, float] = field(default_factory=dict)  # optional parameter the problem lacks -> neutral value
    derived: dict[str, str] = field(default_factory=dict)  # exemplar scalar -> C expression of a problem argument
    unused: tuple[str, ...] = ()  # problem arguments the exemplar does not need (sizes of secondary inputs)
    missing: tuple[str, ...] = ()  # exemplar parameters with no partner: the exemplar does not fit
    extra: tuple[str, ...] = ()  # problem arguments the exemplar has no use for: it does not fit

    @property
    def complete(self) -> bool:
        return not self.missing and not self.extra


def _name_matches(ex_name: str, arg_name: str) -> bool:
    if ex_name == arg_name or arg_name.endswith("_" + ex_name):
        return True  # norm_weight <- weight, norm_eps <- eps
    return any(arg_name == a or arg_name.endswith("_" + a) for a in ALIASES.get(ex_name, ()))


def family_name(arg: str) -> str:
    """The name an exemplar gives a problem's argument: ``norm_weight`` -> ``weight``, ``norm_eps`` ->
    ``eps``, ``variance_epsilon`` -> ``eps``; others unchanged."""
    for family in ("weight", "bias", "eps", "num_groups", "scale"):
        if arg == family or arg.endswith("_" + family):
            return family
        if any(arg == a or arg.endswith("_" + a) for a in ALIASES.get(family, ())):
            return family
    return arg


def _base_type(ctype: str) -> str:
    return "".join(ctype.replace("const", " ").split())


def _is_tensor(ctype: str) -> bool:
    return ctype.replace(" ", "").endswith("*")


def forward_constant(source: str) -> float | None:
    """The one small float literal (an epsilon such as ``1e-6``) in the reference's ``forward``, when
    there is exactly one; None otherwise."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    found = set()
    for cls in tree.body:
        if isinstance(cls, ast.ClassDef) and cls.name == "Model":
            for fn in cls.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "forward":
                    found |= {n.value for n in ast.walk(fn) if isinstance(n, ast.Constant)
                              and isinstance(n.value, float) and 0.0 < n.value < 1e-2}
    return found.pop() if len(found) == 1 else None


_EPS_OPS = {"add", "native_layer_norm", "layer_norm", "native_group_norm", "group_norm", "clamp_min", "clamp",
            "rms_norm", "fused_rms_norm", "native_batch_norm", "batch_norm", "maximum", "max"}


def problem_constant(name: str, scaffold: Scaffold, source: str = "") -> float | int | None:
    """The value of the exemplar scalar ``name`` as the reference writes it (a literal, or an
    attribute the scaffold does not pass): the one epsilon, the one scale; None when there is not
    exactly one candidate value."""
    values: set[float] = set()
    if name == "eps":
        values = {v for op, v in scaffold.op_args if isinstance(v, float) and op in _EPS_OPS and 0.0 < v < 1e-2}
        if not values and source:
            found = forward_constant(source)
            return found
    elif name == "num_groups":  # recorded from the norm's call (scaffold.INT_SETTINGS)
        values = {v for op, v in scaffold.op_args if op == name and isinstance(v, int)}
    elif name == "scale":
        for op, v in scaffold.op_args:
            if not isinstance(v, float) or v in (0.0, 1.0) or v != v or abs(v) == float("inf"):
                continue
            if op == "mul":
                values.add(v)
            elif op == "div":
                values.add(1.0 / v)
    return values.pop() if len(values) == 1 else None


def fit(ex: Exemplar, scaffold: Scaffold, source: str = "") -> Fit | None:
    """How ``ex``'s parameters meet the problem's arguments (see the module's docstring); None when
    some parameter has no partner, or some problem argument would be left unused."""
    f = partial_fit(ex, scaffold, source)
    return f if f is not None and f.complete else None


def partial_fit(ex: Exemplar, scaffold: Scaffold, source: str = "") -> Fit | None:
    """As ``fit``, but also where the exemplar does not fit: then ``missing`` and ``extra`` say what
    differs (what a prompt tells the model to change). None when the exemplar states no entry point."""
    ex_params = ex.params()
    if not ex_params:
        return None
    args = list(scaffold.args)
    by_name = {a.name: a for a in args}
    optional = dict(ex.optional)
    mapping: dict[str, str] = {}
    used: set[str] = set()
    # 1. by name, same C type
    for ctype, name in ex_params:
        partner = next((a.name for a in args if a.name not in used and _base_type(a.ctype) == _base_type(ctype)
                        and _name_matches(name, a.name)), None)
        if partner is not None:
            mapping[name] = partner
            used.add(partner)
    # 2. the tensors left over, by position (data inputs first, then learned tensors), when they pair up
    for role_inputs in (True, False):
        ex_left = [(t, n) for t, n in ex_params if n not in mapping and _is_tensor(t) and t.startswith("const")
                   and (n not in PARAM_NAMES) == role_inputs]
        arg_left = [a for a in args if a.name not in used and a.role in ("input", "param")
                    and _base_type(a.ctype).endswith("*") and a.ctype.startswith("const")]
        if role_inputs:
            arg_left = [a for a in arg_left if a.role == "input" and a.name.split("_")[-1] not in PARAM_NAMES] or arg_left
        if ex_left and arg_left:  # what is left unpaired on either side makes the fit incomplete
            for (t, n), a in zip(ex_left, arg_left, strict=False):
                if _base_type(a.ctype) != _base_type(t) or family_name(a.name) in PARAM_NAMES - {n}:
                    break  # another type, or a tensor named for another role (bias is no weight)
                mapping[n] = a.name
                used.add(a.name)
    # 3. scalars the reference writes as constants, then optional parameters the problem lacks
    constants: dict[str, float] = {}
    dropped: dict[str, float] = {}
    derived: dict[str, str] = {}
    missing: list[str] = []
    for ctype, name in ex_params:
        if name in mapping:
            continue
        if ctype in ("float", "double") or name == "num_groups":
            value = problem_constant(name, scaffold, source)
            if value is not None:
                partner, expr = _scalar_partner(value, [a for a in args if a.name not in used])
                if partner is None:
                    constants[name] = value
                elif expr == partner:
                    mapping[name] = partner
                else:
                    derived[name] = expr
                used.update([partner] if partner else [])
                continue
        if name in optional:
            dropped[name] = optional[name]
            continue
        missing.append(name)
    left = [a.name for a in args if a.name not in used]
    unused = tuple(n for n in left if _secondary_size(by_name[n], scaffold))
    extra = tuple(n for n in left if n not in unused)
    return Fit(mapping, constants, dropped, derived=derived, unused=unused, missing=tuple(missing), extra=extra)


def _scalar_partner(value: float, args) -> tuple[str | None, str]:
    """The problem's float argument that an exemplar scalar of ``value`` stands for, and the C expression
    of it: ``temperature`` itself when the reference multiplies by it, ``1.0f / temperature`` when it
    divides by it (a softmax of ``x / self.temperature`` is the exemplar's ``x * scale``); (None, "")
    when no argument holds that value."""
    for a in args:
        if a.role != "scalar" or _base_type(a.ctype) != "float" or not isinstance(a.value, (int, float)) or not a.value:
            continue
        if abs(a.value - value) <= 1e-6 * abs(value):
            return a.name, a.name
        if abs(1.0 / a.value - value) <= 1e-6 * abs(value):
            return a.name, f"1.0f / {a.name}"
    return None, ""


def _secondary_size(arg, scaffold: Scaffold) -> bool:
    """An argument the family's own layout implies: a size of an input other than the primary one
    (``weight_size0``), or a ``dim`` setting that names the last dimension (``nn.Softmax(dim=-1)``)
    of a rows-layout problem, which works along rows anyway."""
    if arg.role == "size" and re.fullmatch(r"\w+_size\d+", arg.name):
        return True
    if arg.role == "scalar" and (arg.name == "dim" or arg.name.endswith("_dim")) and scaffold.layout == "rows":
        primary = next((a.name for a in scaffold.args if a.role == "input"), None)
        ndim = len(scaffold.shapes.get(primary, [])) if primary else 0
        return arg.value == -1 or (ndim > 0 and arg.value == ndim - 1)
    return False


def argument_map(ex: Exemplar, scaffold: Scaffold, source: str = "") -> dict[str, str] | None:
    """exemplar parameter -> problem argument name, or ``=<value>`` for a constant of the reference
    (``eps`` written as ``+ 1e-6`` in ``forward``) or an optional parameter's neutral value; None
    when the exemplar does not fit."""
    f = fit(ex, scaffold, source)
    if f is None:
        return None
    out = dict(f.mapping)
    out.update({k: f"={v!r}" for k, v in f.constants.items()})
    out.update({k: f"={v!r}" for k, v in f.dropped.items()})
    out.update({k: f"={v}" for k, v in f.derived.items()})
    return out


def _const_type(ctype: str) -> str:
    """The C type a constant standing in for a scalar parameter is declared with."""
    base = _base_type(ctype)
    return base if base in ("int", "int64_t", "long", "int32_t", "double") else "float"


def _literal(value: float) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    text = repr(float(value))
    return (text if ("e" in text or "." in text) else text + ".0") + "f"


def _call_spans(code: str, callee: str, first_arg: str) -> list[tuple[int, int]]:
    """Spans of the calls ``callee(first_arg, ...)`` in ``code`` (balanced parentheses)."""
    spans = []
    for m in re.finditer(rf"\b{callee}\s*\(\s*{re.escape(first_arg)}\s*,", code):
        depth, i = 0, m.start() + code[m.start():].index("(")
        for j in range(i, len(code)):
            depth += code[j] == "("
            depth -= code[j] == ")"
            if depth == 0:
                spans.append((m.start(), j + 1))
                break
    return spans


def drop_pointer(code: str, name: str, value: float) -> str | None:
    """``code`` without the tensor parameter ``name``: its elements read as ``value`` (``weight[c]`` ->
    ``1.0f``), helpers lose the parameter and calls the argument; None when a use is left that
    this cannot rewrite. Products by 1 and sums with 0 are then simplified away."""
    lit = _literal(value)
    code = re.sub(rf"\b{name}\s*\[[^\[\]]*\]", lit, code)
    for start, end in reversed(_call_spans(code, "load4", name)):  # CUDA exemplars: four values at once
        code = code[:start] + f"make_float4({lit}, {lit}, {lit}, {lit})" + code[end:]
    code = re.sub(rf"\s*&&\s*\(uintptr_t\)\s*{name}\s*%\s*16\s*==\s*0", "", code)
    code = re.sub(rf"\(uintptr_t\)\s*{name}\s*%\s*16\s*==\s*0\s*&&\s*", "", code)
    decl = rf"const\s+float\s*\*\s*(?:__restrict__\s+)?{name}\b"
    code = re.sub(rf",\s*{decl}(?=\s*[,)])", "", code)
    code = re.sub(rf"(?<=\()\s*{decl}\s*,\s*", "", code)
    code = re.sub(rf",\s*{name}\b(?=\s*[,)])", "", code)
    code = re.sub(rf"(?<=\()\s*{name}\s*,\s*", "", code)
    code = _simplify(code)
    if re.search(rf"(?<![.\w]){name}\b", strip_cpp_comments(code)):
        return None
    return code


def _simplify(code: str) -> str:
    code = re.sub(r"\s*\*\s*1\.0f\b(?![\w.])", "", code)  # a * 1.0f
    code = re.sub(r"(?<![/\w.\s])(\s*)1\.0f\s*\*\s*", r"\1", code)  # (1.0f * a
    code = re.sub(r"\s*\+\s*0\.0f\b(?!\s*[*/])", "", code)  # a + 0.0f
    return code


def adapt(ex: Exemplar, scaffold: Scaffold, source: str = "") -> str | None:
    """The exemplar rewritten for this problem (its entry point takes the problem's exact signature,
    its parameters renamed, constants and neutral values declared), or None when it does not fit."""
    if ex.language != scaffold.language:
        return None
    f = fit(ex, scaffold, source)
    if f is None:
        return None
    code = ex.code
    declared: dict[str, tuple[float, str]] = {k: (v, "written as a literal in the reference's forward")
                                              for k, v in f.constants.items()}
    ptypes = dict((n, t) for t, n in ex.params())
    for name, value in f.dropped.items():
        if _is_tensor(ptypes[name]):
            code = drop_pointer(code, name, value)
            if code is None:
                return None
        else:
            declared[name] = (value, "the reference has none")
    m = re.search(rf'extern\s+"C"\s+void\s+{FUNCTION}\s*\(([^)]*)\)\s*\{{', code, re.S)
    if not m:
        return None
    head, body = code[:m.start()], code[m.end():]
    # rename inside the entry point's body only (helpers keep their own parameter names)
    depth, end = 1, 0
    for i, ch in enumerate(body):
        depth += ch == "{"
        depth -= ch == "}"
        if depth == 0:
            end = i
            break
    inner, rest = body[:end], body[end:]
    renames = {k: v for k, v in f.mapping.items() if k != v}
    taken = set(re.findall(r"\b[A-Za-z_]\w*\b", strip_cpp_comments(inner))) - set(f.mapping)
    if taken & (set(renames.values()) | {expr.split()[-1] for expr in f.derived.values()}):
        return None  # a problem argument named like one of the exemplar's locals
    if renames:
        pattern = re.compile(r"(?<![.\w])(" + "|".join(re.escape(k) for k in renames) + r")\b")
        inner = pattern.sub(lambda mm: renames[mm.group(1)], inner)
    decls = "".join(f"\n    const {_const_type(ptypes[k])} {k} = {_literal(v)};  // {why}" for k, (v, why) in declared.items())
    decls += "".join(f"\n    const {_const_type(ptypes[k])} {k} = {expr};  // the reference divides by {expr.split()[-1]}"
                     for k, expr in f.derived.items())
    return head + scaffold.signature() + " {" + decls + inner + rest
