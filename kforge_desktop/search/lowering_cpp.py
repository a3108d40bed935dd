"""What the C++ lowered forms have of their own (``search.lowering``): the forms of operators that vectorize, a
row reduction written as a helper function that returns it, and the exemplars' math helpers a kernel calls."""

from __future__ import annotations

import re
from typing import NamedTuple

from torch.fx import Node

from ..csource.items import function_text
from .lowering_trace import PARALLEL, Unsupported, op_name, reduced_dims

# A maximum or minimum (and relu, clamp) as a compare that lets a NaN through, as torch does, in C++ and CUDA: fmaxf
# drops a NaN (a CUDA relu of NaN gave 0), and on the CPU a loop of fmaxf ran 25x slower than one of compares.
MAX_NAN, MIN_NAN = "(({0} > {1} || {0} != {0}) ? {0} : {1})", "(({0} < {1} || {0} != {0}) ? {0} : {1})"
RELU_NAN = "(({0} > 0.0f || {0} != {0}) ? {0} : 0.0f)"
# On the CPU, what vectorizes: exp, tanh and erf as plain float arithmetic (the exemplars' fast_exp and erf_approx; a
# loop that calls expf, tanhf or erff is not vectorized: the lowered quick_gelu ran at 0.22x eager with expf, 1.9x
# with fast_exp). CUDA keeps the library's (one instruction each).
UNARY_CPP = {"exp": "fast_exp({})", "sigmoid": "(1.0f / (1.0f + fast_exp(-{})))",
             "tanh": "(1.0f - 2.0f / (1.0f + fast_exp(2.0f * {})))", "erf": "erf_approx({})"}


def never_positive(a) -> bool:
    """Whether a node's values are never above 0: each a value minus the maximum of the values of its own
    slice (``x - amax(x, dims, keepdim=True)``, as softmax, log-softmax and cross-entropy decompose), so that
    its exp needs no cap against overflow. A maximum first replaced where infinite (logsumexp's ``where``) is
    not: a row with +inf would then subtract 0. The exp of such a value is fast_exp_neg, the row softmax's exp
    without the cap."""
    if not isinstance(a, Node) or op_name(a)[1] != "sub" or len(a.args) != 2 or a.kwargs.get("alpha") not in (None, 1):
        return False
    x, m = a.args
    if not isinstance(m, Node) or op_name(m)[1] != "amax" or m.args[0] is not x:
        return False
    return bool(m.args[2] if len(m.args) > 2 else m.kwargs.get("keepdim", False))


# operators whose result is NaN where an operand is NaN (powf(NaN, 0) is 1, a compare or a where picks: not these)
_KEEP_NAN = {"add", "sub", "mul", "div", "exp", "log", "sqrt", "rsqrt", "neg", "reciprocal", "abs", "view",
             "_unsafe_view", "reshape", "unsqueeze", "squeeze", "expand", "broadcast_in_dim", "clone", "alias", "detach",
             "contiguous"}
_SUMS = {"sum", "mean", "prod", "var"}  # a row's reduction that is NaN where one of its values is


def nan_left_to_a_sum(m) -> bool:
    """Whether a row's maximum (or minimum) ``m = amax(x)`` needs no NaN flag of its own: where ``x``'s row holds
    a NaN, every output computed from ``m`` is also computed, through operators that keep a NaN, from a sum over
    that row of values that are NaN where ``x`` is (a softmax's, a log-softmax's, a logsumexp's or a
    cross-entropy's exp-sum), and so is NaN whether ``m`` is NaN (torch) or the maximum of the other values (a
    compare that skips a NaN). Every other value is the same either way: one not computed from ``m``, or one
    computed only from such values and those NaN ones (a cross-entropy's ``where`` for an ignored target). The
    flag is a second test per value in the maximum's loop (``benchmarks/nan_flag.py`` times what it costs)."""
    if not isinstance(m, Node) or not isinstance(m.args[0], Node):
        return False
    x, order, along = m.args[0], list(m.graph.nodes), reduced_dims(m)
    at_x = {x}  # NaN where x is NaN, either way
    whole_row: set = set()  # NaN across a row where x's row holds a NaN, either way
    differs = {m}  # may differ: m, and what is computed from it before it is NaN either way
    for n in order[order.index(m) + 1:]:
        operands = n.all_input_nodes
        op = op_name(n)[1] if n.op == "call_function" else ""
        if op in _KEEP_NAN and any(a in whole_row for a in operands):
            whole_row.add(n)
        elif op in _KEEP_NAN and any(a in at_x for a in operands):
            at_x.add(n)
        elif (op in _SUMS and n.args[0] in at_x | whole_row and reduced_dims(n) == along
              or op == "gather" and n.args[0] in whole_row):
            whole_row.add(n)
        if n not in whole_row and any(a in differs for a in operands):
            if n.op == "output":
                return False
            differs.add(n)
    return True


class _Param(NamedTuple):
    decl: str
    name: str


def reduction_helper(op: str, var: str, stmts: list[str], args: tuple, body: list[str],
                     helpers: list[str], nan_flag: bool = True) -> tuple[str, str]:
    """(the helper, the row's statement calling it) for a reduction along the last dimension written as
    ``stmts`` into ``var``: a function that returns it (``row_max``, ``row_sum``, ...; a number added where
    ``helpers`` has that name), taking the scaffold ``args`` it reads, ``r``, and the row values of ``body``
    (the row's statements so far) it reads. An edit rewrites one function: asked to change the 55-line entry point
    of a lowered cross-entropy, the default model carried out 1 of 9 edits, dropping declarations the other
    statements need, against about half of the recorded dev edits of shorter entry points
    (``benchmarks/edit_length.py``)."""
    text = "\n".join(stmts)
    declared = set(re.findall(r"\b(?:float|int64_t|int|bool)\s+(\w+)", text))
    used = set(re.findall(r"(?<![\w.])([A-Za-z_]\w*)\b", text)) - declared
    row_vars = dict((name, ctype) for ctype, name in
                    re.findall(r"^(?:const\s+)?(float|int64_t|int|bool)\s+(\w+)\s*[=;]", "\n".join(body), re.M))
    params = [a for a in args if a.name in used and "*" in a.decl]
    params += [_Param("int64_t r", "r")] if "r" in used else []
    params += [a for a in args if a.name in used and "*" not in a.decl]
    params += [_Param(f"{ctype} {name}", name) for name, ctype in row_vars.items() if name in used]
    base = {"amax": "row_max", "amin": "row_min"}.get(op, f"row_{op}")
    name, k = base, 2
    while any(f" {name}(" in h for h in helpers):
        name, k = f"{base}_{k}", k + 1
    nan = "a NaN in the row makes it NaN" if nan_flag else "a NaN in the row makes the sum below NaN"
    what = {"amax": f"maximum ({nan})", "amin": f"minimum ({nan})",
            "sum": "sum", "mean": "mean", "prod": "product", "var": "variance"}[op]
    helper = (f"// the row's {what}\nstatic inline float {name}({', '.join(a.decl for a in params)}) {{\n"
              + "\n".join("    " + st for st in stmts) + f"\n    return {var};\n}}\n")
    return helper, f"const float {var} = {name}({', '.join(a.name for a in params)});"


def cpp_rows_kernel(scaffold, head: str, helpers: list[str], row_body: str, inner: int | None) -> str:
    """``head``, the row reductions' ``helpers`` and the entry point around a row's statements: the rows in parallel
    along the last dimension (``inner`` None); along a middle one, tiles of up to 256 rows (consecutive i) of each
    sample, in parallel (the C++ counterpart of ``lowering_cuda.rows_kernel``)."""
    if inner is None:
        return with_math(head + "".join(h + "\n" for h in helpers) + scaffold.signature() + " {\n" + PARALLEL.format("")
                         + "    for (int64_t r = 0; r < rows; ++r) {\n" + row_body + "\n    }\n}\n")
    return with_math(head + f"constexpr int64_t ltile = {min(inner, 256)};  // rows (consecutive i) a tile\n" +
                     scaffold.signature() + " {\n" + PARALLEL.format(" collapse(2)") +
                     "    for (int64_t o = 0; o < louter; ++o) {\n"
                     "        for (int64_t t = 0; t < linner; t += ltile) {\n"
                     "            const int64_t tn = linner - t < ltile ? linner - t : ltile;  // the tile's rows: "
                     "i = t + j, j < tn\n" + row_body + "\n        }\n    }\n}\n")


def with_math(kernel: str) -> str:
    """A C++ kernel with the definitions of the exemplars' vectorizable functions it calls (erf_approx from
    bias_gelu_erf, above the kernel; fast_exp from row_softmax, above its first caller)."""
    from .exemplars import load_exemplars, provide_helpers

    if "erf_approx(" in kernel:
        ex = next((e for e in load_exemplars("cpp") if e.name == "bias_gelu_erf"), None)
        helper = function_text(ex.code, "erf_approx") if ex is not None else None
        if helper is None:
            raise Unsupported("no erf_approx to call")
        kernel = helper.strip() + "\n\n" + kernel
    return provide_helpers(kernel, "cpp")[0]
