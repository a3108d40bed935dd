"""The reference lowered to plain loops: a correct seed where no exemplar fits.

The default model edits a working kernel correctly about half the time and writes one from nothing
correctly far less often, so a problem without a seed is close to a lottery. For references made of
elementwise operations and reductions over one dimension (a log-softmax, an L1/L2 normalisation, a
logsumexp, a bias and an activation, a norm with or without weight, a mean over the channels), the
operators the forward runs (traced with ``make_fx``, composite operators decomposed) map one to one to C:
the lowering writes, per row, one loop per reduction and one loop for the outputs, in the scaffold's
signature. Along a middle dimension the rows are (before, after) index pairs whose values lie ``inner``
apart; in C++ they are taken a tile of consecutive rows at a time, so that every loop reads memory in order.
Along the last dimension an input may also broadcast with sizes of 1 between others (a key-padding mask given
per sample, ``keep[:, None, :]``): its element is found from the row's coordinates (``broadcast_index``); and a
cumulative sum along it is a running value carried through the output loop, which then runs in order.
It is correct by construction; on the CPU its loops vectorize (SIMD reductions, exp, tanh and erf as float
arithmetic, compares for a maximum); in CUDA a warp takes a row along the last dimension (one thread a row
along a middle one, where neighbouring threads read neighbouring values). Every reduction re-reads the row:
the search's edits make it faster.

A pooling (max or average, one or two dimensions, with padding, stride, dilation, ceil mode) is written
as one loop over its window per output value (``lowering_pool.py``); both read the forward as
``lowering_trace.py`` traces it, and write C++ forms of their own (``lowering_cpp.py``) and CUDA kernels that stride
over their work with the whole grid (``lowering_cuda.py``).

Anything else (reductions over two dimensions or two different ones, a matrix product, an index gather, a
mask built from shapes, a channels layout, a pooling with other operators around it) is not lowered:
``lower`` returns None and the search goes on without it.
"""

from __future__ import annotations

import math
import re

import torch

from ..problem.problem import Problem
from .lowering_cpp import (
    MAX_NAN,
    MIN_NAN,
    RELU_NAN,
    UNARY_CPP,
    cpp_rows_kernel,
    nan_left_to_a_sum,
    never_positive,
    reduction_helper,
)
from .lowering_cuda import rows_kernel
from .lowering_pool import PLAIN_VIEWS, POOLS, lower_pool
from .lowering_rows import Rows
from .lowering_trace import Unsupported, literal, op_name, reduced_dims, trace
from .scaffold import Scaffold

# operators that only change how a tensor's values are viewed (the kind, from the shape, decides the indexing)
_VIEWS = {"view", "_unsafe_view", "reshape", "unsqueeze", "squeeze", "expand", "broadcast_in_dim", "clone", "alias",
          "detach", "_to_copy", "contiguous", "lift_fresh_copy", "convert_element_type"}

_UNARY = {"exp": "expf({})", "log": "logf({})", "sqrt": "sqrtf({})", "rsqrt": "(1.0f / sqrtf({}))",
          "abs": "fabsf({})", "tanh": "tanhf({})", "erf": "erff({})", "log1p": "log1pf({})", "expm1": "expm1f({})",
          "sin": "sinf({})", "cos": "cosf({})", "neg": "(-{})", "reciprocal": "(1.0f / {})",
          "sigmoid": "(1.0f / (1.0f + expf(-{})))", "relu": RELU_NAN, "logical_not": "(!{})",
          "sign": "(float)(({0} > 0.0f) - ({0} < 0.0f))", "floor": "floorf({})", "ceil": "ceilf({})"}
_BINARY = {"add": "({} + {})", "sub": "({} - {})", "mul": "({} * {})", "div": "({} / {})",
           "maximum": MAX_NAN, "minimum": MIN_NAN, "gt": "({} > {})", "lt": "({} < {})",
           "ge": "({} >= {})", "le": "({} <= {})", "eq": "({} == {})", "ne": "({} != {})",
           "logical_and": "({} && {})", "logical_or": "({} || {})", "pow": "powf({}, {})", "atan2": "atan2f({}, {})"}
_REDUCTIONS = {"sum", "mean", "amax", "amin", "var", "prod"}


def lower(problem: Problem, scaffold: Scaffold) -> str | None:
    """The kernel text (the scaffold's entry point and what it calls) computing the reference with plain
    loops, or None where the reference is not made of what this lowers."""
    if scaffold.language not in ("cpp", "cuda") or scaffold.layout != "rows":
        return None
    try:
        return _lower(problem, scaffold)
    except Exception:  # noqa: BLE001 - Unsupported, or tracing a user's model failed: the search goes on without
        return None


def _lower(problem: Problem, scaffold: Scaffold) -> str:
    graph, tensors, named = trace(problem)
    if any(n.op == "call_function" and op_name(n)[1] in POOLS for n in graph.nodes):
        return lower_pool(graph, tensors, named, scaffold)
    dims = _reduced_dims(graph, tuple(tensors[0].shape))
    if len(dims) > 1:
        raise Unsupported("reductions over different dimensions")
    return _write(graph, tensors, named, scaffold, dims.pop() if dims else -1)


def _reduced_dims(graph, primary: tuple[int, ...]) -> set[int]:
    """The dimensions of the primary input's shape that the graph's reductions run over (one each)."""
    found = set()
    for node in graph.nodes:
        if node.op != "call_function" or op_name(node)[1] not in _REDUCTIONS or not isinstance(node.args[0], torch.fx.Node):
            continue
        real = reduced_dims(node)
        if tuple(node.args[0].meta["val"].shape) != primary or len(real) != 1:
            raise Unsupported("a reduction of another shape, or over several dimensions")
        found.add(real[0])
    return found


def _write(graph, tensors: list, named: list, scaffold: Scaffold, dim: int) -> str:
    inputs = [a for a in scaffold.args if a.role == "input"]
    params = [a for a in scaffold.args if a.role == "param"]
    outputs = [a for a in scaffold.args if a.role == "output"]
    if len(inputs) != len(tensors) or len(params) != len(named):
        raise Unsupported("the traced inputs do not match the signature")
    layout = Rows(tuple(tensors[0].shape), dim)
    names = [a.name for a in inputs] + [a.name for a in params]
    scalars = {float(a.value): a.name for a in scaffold.args
               if a.role == "scalar" and a.ctype == "float" and isinstance(a.value, (int, float))}
    w = _Writer(layout, scalars, scaffold.language)
    w.args = tuple(scaffold.args)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    for node, cname, t in zip(placeholders, names, tensors + [p for _, p in named]):
        if t.dtype not in (torch.float32, torch.bool, torch.int64):  # int64: class indices, read as they are
            raise Unsupported(f"{cname} is {t.dtype}")
        # a bool read as a byte in C++: a loop that reads a bool* is not vectorized (g++ 12: a padding mask's
        # softmax at 0.4x eager), one that reads unsigned char is
        reader = (f"(((const unsigned char*){cname})[{{}}] != 0)" if t.dtype == torch.bool and scaffold.language == "cpp"
                  else f"{cname}[{{}}]")
        w.base[node] = reader
        try:
            kind = layout.kind(tuple(t.shape))  # a 1-D vector of cols values is a column, as broadcasting reads it
            index = layout.index(kind)
        except Unsupported:
            # (a shape that is neither can still be viewed as one that broadcasts: [3, 12] as [3, 1, 12] against
            # [3, 5, 12]; it is "other" until then, and any other use of it is unsupported)
            kind, index = layout.broadcast_index(tuple(t.shape)) or ("other", "")
        w.define(node, kind, reader.format(index) if kind != "other" else "")
    for node in graph.nodes:
        if node.op == "call_function":
            w.call(node)
        elif node.op == "output":
            results = node.args[0] if isinstance(node.args[0], (tuple, list)) else [node.args[0]]
            if len(results) != len(outputs):
                raise Unsupported("the outputs do not match the signature")
            for res, arg in zip(results, outputs):
                if not isinstance(res, torch.fx.Node):
                    raise Unsupported("an output that is not computed")
                if w.kind[res] not in ("full", "row") or math.prod(scaffold.shapes[arg.name]) != (
                        layout.rows * layout.cols if w.kind[res] == "full" else layout.rows):
                    raise Unsupported("an output of another shape")
                w.store(arg.name, res)
    return w.kernel(scaffold)


class _Writer:
    """Statements of one row: reductions as loops in the order the graph computes them, then one loop for
    the full-size outputs. Values are named after their node: ``v_<node>``."""

    def __init__(self, layout: Rows, scalars: dict[float, str] | None = None, language: str = "cpp") -> None:
        self.layout = layout
        self.language = language
        cpp = language == "cpp"
        self.unary = {**_UNARY, **(UNARY_CPP if cpp else {})}
        self.binary = _BINARY
        self.max, self.min = MAX_NAN, MIN_NAN
        self.scalars = scalars or {}  # a scalar argument's value -> its name: the kernel reads the argument
        # CUDA along the last dimension: a warp a row, its 32 lanes strided over the row and each reduction
        # finished with shuffles (one thread a row read 32 rows' values cols apart: 0.01x eager on long rows).
        # C++ along a middle dimension: a tile of up to ltile rows (consecutive i) at a time, each row value an
        # array over the tile and every loop over c running over the tile inside, so that it reads memory in
        # order (a row at a time read its values linner apart: 0.08x eager on a channel sum)
        self.warp = language == "cuda" and layout.last
        self.tiled = language == "cpp" and not layout.last
        self.kind: dict = {}
        self.expr: dict = {}  # node -> C expression (inputs, literals) or the variable holding it
        self.inner: dict = {}  # inner (full/col) node -> (its statement, the inner nodes it needs)
        self.body: list[str] = []  # statements of a row
        self.stores: list[tuple[str, object]] = []
        self.reduces = False  # a reduction over the row was lowered (the kernel's head comment says so)
        self.scans = False  # a cumulative sum was
        self.base: dict = {}  # an input, or a view of one that keeps its memory order -> how its element {} is read
        self.args: tuple = ()  # the scaffold's arguments (a reduction's helper takes those it reads)
        self.helpers: list[str] = []  # C++: a function per reduction along the last dimension (``_reduction``)

    def define(self, node, kind: str, expr: str) -> None:
        self.kind[node], self.expr[node] = kind, expr

    def value(self, a, view: bool = False) -> tuple[str, str]:
        """(C expression, kind) of an argument: a node or a plain number. An input of another shape ("other")
        is only read through a view of it (``view``)."""
        if isinstance(a, torch.fx.Node):
            if a not in self.kind or (self.kind[a] == "other" and not view):
                raise Unsupported(f"{a.name} has no value")
            return self.expr[a], self.kind[a]
        if isinstance(a, (bool, int, float)):
            name = self.scalars.get(float(a)) if not isinstance(a, bool) else None
            return name or literal(a), "scalar"
        raise Unsupported(f"an argument {a!r}")

    def call(self, node) -> None:
        space, op = op_name(node)
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise Unsupported(f"{op} does not give one tensor")
        if val.dtype not in (torch.float32, torch.bool, torch.int64):
            raise Unsupported(f"{op} gives {val.dtype}")
        args = list(node.args)
        if op in _VIEWS:
            expr, src = self.value(args[0], view=True)
            base = self.base.get(args[0]) if op in PLAIN_VIEWS else None  # the memory order is kept
            try:
                kind = self.layout.kind(tuple(val.shape), prefer=src) if src != "other" else None
            except Unsupported:
                kind = None
            if kind is None:
                # a view of an input that broadcasts against the rows (a mask given per sample, unsqueezed):
                # indexed through the input's own memory
                found = self.layout.broadcast_index(tuple(val.shape)) if base else None
                if found is None:
                    raise Unsupported(f"a view of shape {list(val.shape)} against rows of {list(self.layout.shape)}")
                self.base[node] = base
                self.define(node, found[0], base.format(found[1]))
                return
            if base:
                self.base[node] = base
            if src in ("full", "col") and kind in ("row", "scalar") or src == "row" and kind == "col":
                raise Unsupported("a view that mixes rows and columns")
            self._result(node, kind, expr)
            return
        if op in _REDUCTIONS:
            self._reduce(node, op, val, args)
            return
        if op == "cumsum":
            self._running_sum(node, val, args)
            return
        if op == "gather":
            self._gather(node, val, args)
            return
        if op == "copy_" and isinstance(args[0], torch.fx.Node):  # dst.copy_(src): src's values in dst's shape
            order = list(node.graph.nodes)
            if any(order.index(u) > order.index(node) for u in args[0].users if u is not node):
                raise Unsupported("a tensor read after it was overwritten")
            expr, kind = self.value(args[1])
            self._result(node, self.kind[args[0]] if kind == "scalar" else kind, expr)
            return
        if op in ("scalar_tensor", "full"):
            self._result(node, "scalar", literal(args[-1] if op == "full" else args[0]))
            return
        kind = self._combined(node, val)
        vals = [self.value(a) for a in args if isinstance(a, (torch.fx.Node, bool, int, float))]
        if op == "bitwise_not" and val.dtype == torch.bool:  # ~mask
            op = "logical_not"
        if op == "exp" and self.language == "cpp" and never_positive(args[0]):
            expr = f"fast_exp_neg({vals[0][0]})"  # x minus its slice's maximum: never above 88, nothing to test
        elif op in self.unary and vals:
            expr = self.unary[op].format(vals[0][0])
        elif op == "pow" and len(args) == 2 and not isinstance(args[1], torch.fx.Node):
            e = float(args[1])
            base = vals[0][0]
            expr = {2.0: f"({base} * {base})", 1.0: base, 0.5: f"sqrtf({base})", 3.0: f"({base} * {base} * {base})",
                    -1.0: f"(1.0f / {base})"}.get(e, f"powf({base}, {literal(e)})")
        elif op in self.binary and len(vals) >= 2:
            expr = self.binary[op].format(vals[0][0], vals[1][0])
            alpha = node.kwargs.get("alpha")
            if op in ("add", "sub") and alpha not in (None, 1):
                expr = self.binary[op].format(vals[0][0], f"{literal(alpha)} * {vals[1][0]}")
        elif op == "where" and len(vals) == 3:
            expr = f"({vals[0][0]} ? {vals[1][0]} : {vals[2][0]})"
        elif op in ("clamp", "clamp_min", "clamp_max", "hardtanh"):
            lo = args[1] if len(args) > 1 and op != "clamp_max" else node.kwargs.get("min")
            hi = (args[2] if len(args) > 2 else node.kwargs.get("max")) if op != "clamp_min" else None
            if op == "clamp_max":
                lo, hi = None, args[1]
            expr = vals[0][0]
            if lo is not None:
                expr = self.max.format(expr, self.value(lo)[0])
            if hi is not None:
                expr = self.min.format(expr, self.value(hi)[0])
        else:
            raise Unsupported(f"the operator {space}.{op}")
        self._result(node, kind, expr)

    def _combined(self, node, val: torch.Tensor) -> str:
        """The kind of an elementwise result, from its arguments' kinds (a row and a column make a full
        tensor); a row broadcast against more than rows must keep its last dimension as 1, as
        broadcasting reads it."""
        kinds = {self.kind[a] for a in node.all_input_nodes if a in self.kind} - {"scalar"}
        if "other" in kinds:
            raise Unsupported(f"{node.name}: an input of another shape, read as it is")
        kind = "full" if "full" in kinds or {"row", "col"} <= kinds else (kinds.pop() if kinds else "scalar")
        if kind not in self.layout.kinds(tuple(val.shape), broadcast=True) and not (kind == "scalar" and val.numel() == 1):
            raise Unsupported(f"{node.name}: a {kind} value of shape {list(val.shape)}")
        for a in node.all_input_nodes:
            if self.kind.get(a) == "row" and kind == "full" and a.meta["val"].dim() != val.dim():
                raise Unsupported(f"{a.name} broadcast along the rows")
        return kind

    def _result(self, node, kind: str, expr: str) -> None:
        ctype = {torch.bool: "bool", torch.int64: "int64_t"}.get(node.meta["val"].dtype, "float")
        if self._alias(node, kind, expr, ctype):  # C++: a row value that only renames another, or a float constant
            self.define(node, kind, expr)
            return
        var = f"v_{node.name}"
        if kind in ("full", "col"):
            needs = [a for a in node.all_input_nodes if self.kind.get(a) in ("full", "col")]
            self.inner[node] = (f"const {ctype} {var} = {expr};", needs)
            self.define(node, kind, var)
        else:
            self.body += self._row_value(var, expr, ctype)
            self.define(node, kind, self._ref(var))

    def _alias(self, node, kind: str, expr: str, ctype: str) -> bool:
        """Whether a C++ row value is only another row value of the same type under a new name (a view of it,
        ``v_squeeze = v_gather``) or a float constant: then it is read as that, not copied into a variable of its
        own. Each such line was one more for an edit to carry over (a lowered cross-entropy had six)."""
        if self.language != "cpp" or self.tiled or kind not in ("row", "scalar"):
            return False
        if ctype == "float" and re.fullmatch(r"\(?-?[\d.]+(?:e[-+]?\d+)?f\)?|\(?-?INFINITY\)?|NAN", expr):
            return True
        same = [a for a in node.all_input_nodes if self.expr.get(a) == expr]
        return bool(re.fullmatch(r"v_\w+", expr)) and bool(same) and all(
            a.meta["val"].dtype == node.meta["val"].dtype for a in same)

    def _ref(self, var: str) -> str:
        """How a row value is read: its name, or in the tiled form its element for the tile's row j."""
        return f"{var}[j]" if self.tiled else var

    def _rows_of_tile(self, statements: list[str]) -> list[str]:
        """Statements run for each row of the tile (the tiled form; as they are otherwise)."""
        if not self.tiled or not statements:
            return statements
        text = " ".join(statements)
        index = ["i = t + j"] if re.search(r"\b[ir]\b", text) else []
        index += ["r = o * linner + i"] if re.search(r"\br\b", text) else []
        return ["for (int64_t j = 0; j < tn; ++j) {", *([f"    const int64_t {', '.join(index)};"] if index else []),
                *[f"    {s}" for s in statements], "}"]

    def _row_value(self, var: str, expr: str, ctype: str = "float", const: bool = True) -> list[str]:
        """A row value set to ``expr``: a variable, or in the tiled form an array over the tile."""
        if not self.tiled:
            return [f"{'const ' if const else ''}{ctype} {var} = {expr};"]
        return [f"{ctype} {var}[ltile];", *self._rows_of_tile([f"{var}[j] = {expr};"])]

    def _inner_statements(self, nodes) -> list[str]:
        """The statements of an inner loop that computes ``nodes``, each once, in the graph's order."""
        seen: list = []

        def visit(n) -> None:
            if n in seen or n not in self.inner:
                return
            for d in self.inner[n][1]:
                visit(d)
            seen.append(n)

        for n in nodes:
            visit(n)
        return [self.inner[n][0] for n in seen]

    def _loop(self, statements: list[str], *reductions: str, in_order: bool = False) -> list[str]:
        """A loop over the row's values; a C++ reduction loop (``reductions``: "+ : v_sum") is a SIMD one: a float
        sum is not vectorized otherwise (its order would change). In the tiled form each step of c runs over the
        tile's rows (a SIMD loop: its reads are consecutive); in the warp form the lanes share the row, except
        ``in_order`` (a running sum), where one lane walks it."""
        n = self.layout.cols_name
        if self.tiled:
            return [f"for (int64_t c = 0; c < {n}; ++c) {{", "    #pragma omp simd",
                    *[f"    {s}" for s in self._rows_of_tile(statements)], "}"]
        if self.warp and in_order:
            return ["if (lane == 0) {  // a running sum: the values in order",
                    f"    for (int64_t c = 0; c < {n}; ++c) {{", *[f"        {s}" for s in statements], "    }", "}"]
        if self.warp:
            return [f"for (int64_t c = lane; c < {n}; c += 32) {{", *[f"    {s}" for s in statements], "}"]
        simd = ["#pragma omp simd " + " ".join(f"reduction({r})" for r in reductions)] \
            if reductions and self.language == "cpp" else []
        return [*simd, f"for (int64_t c = 0; c < {n}; ++c) {{", *[f"    {s}" for s in statements], "}"]

    def _across_lanes(self, var: str, op: str) -> list[str]:
        """In the warp form, a lane's partial ``var`` combined with the other lanes' (every lane gets the result).
        ``max_nan``/``min_nan``: a NaN in any lane's partial makes the result NaN (every lane shuffles before it
        compares: a shuffle inside a condition some lanes skip would leave the others waiting)."""
        if not self.warp:
            return []
        other = f"__shfl_xor_sync(0xffffffff, {var}, k)"
        step = {"+": f"{var} += {other};", "*": f"{var} *= {other};", "max": f"{var} = fmaxf({var}, {other});",
                "min": f"{var} = fminf({var}, {other});",
                "max_nan": f"{{ const float o = {other}; {var} = {MAX_NAN.format('o', var)}; }}",
                "min_nan": f"{{ const float o = {other}; {var} = {MIN_NAN.format('o', var)}; }}"}[op]
        return [f"for (int k = 16; k > 0; k >>= 1) {step}"]

    def _running_sum(self, node, val: torch.Tensor, args: list) -> None:
        """A cumulative sum along the last dimension: a running value carried through the row's output loop,
        which runs in order (in C++ it is no SIMD loop; in CUDA one lane of the row's warp walks it)."""
        src, dim = args[0], (args[1] if len(args) > 1 else node.kwargs.get("dim"))
        if not self.layout.last or not isinstance(src, torch.fx.Node) \
                or self.kind.get(src) != "full" or not isinstance(dim, int) or dim % val.dim() != val.dim() - 1:
            raise Unsupported("a cumulative sum other than along the last dimension")
        var = f"v_{node.name}"
        self.scans = True
        self.body += [f"float {var}_run = 0.0f;  // the running sum along the row"]
        self.inner[node] = (f"{var}_run += {self.expr[src]};  const float {var} = {var}_run;", [src])
        self.define(node, "full", var)

    def _gather(self, node, val: torch.Tensor, args: list) -> None:
        """One value a row picked along the row by an index of that row (``x.gather(-1, index[:, None])``, the
        target's log-probability in a cross-entropy): the per-element chain evaluated once, at that column."""
        src, dim, index = args[0], args[1], args[2]
        if not self.layout.last or self.tiled or not isinstance(src, torch.fx.Node) or self.kind.get(src) != "full" \
                or not isinstance(dim, int) or dim % val.dim() != val.dim() - 1 or self.kind.get(index) != "row" \
                or "row" not in self.layout.kinds(tuple(val.shape)):
            raise Unsupported("a gather other than one index a row along the last dimension")
        pre = self._inner_statements([src])
        if any("_run +=" in st for st in pre):
            raise Unsupported("a gather of a cumulative sum")
        var = f"v_{node.name}"
        self.body += [f"float {var};", "{  // the value at the row's index",
                      f"    const int64_t c = (int64_t)({self.expr[index]});", *[f"    {st}" for st in pre],
                      f"    {var} = {self.expr[src]};", "}"]
        self.define(node, "row", var)

    def _reduce(self, node, op: str, val: torch.Tensor, args: list) -> None:
        src = args[0]
        dims = args[1] if len(args) > 1 else None
        if not isinstance(src, torch.fx.Node) or self.kind.get(src) not in ("full", "col"):
            raise Unsupported(f"{op} of a value that is not one per element")
        shape = tuple(src.meta["val"].shape)
        dims = [dims] if isinstance(dims, int) else list(dims or [])
        reduced = [d % len(shape) for d in dims] if shape else []
        if [d for d in reduced if shape[d] != 1] != [self.layout.dim] or "row" not in self.layout.kinds(tuple(val.shape)):
            raise Unsupported(f"{op} over another dimension than the layout's")
        var, x = f"v_{node.name}", self.expr[src]
        self.reduces = True
        acc, cols = self._ref(var), f"(float){self.layout.cols_name}"
        pre = self._inner_statements([src])
        if any("_run +=" in st for st in pre):  # its running value would be carried on into the output loop
            raise Unsupported(f"{op} of a cumulative sum")
        stmts: list[str] = []
        nan_flag = True
        if op == "var":  # prims.var(x, dims, correction): the mean first, then the squared deviations
            correction = float(args[2]) if len(args) > 2 else float(node.kwargs.get("correction", 1) or 0)
            mean = self._ref(f"{var}_mean")
            stmts += [*self._row_value(f"{var}_mean", "0.0f", const=False),
                          *self._loop(pre + [f"{mean} += {x};"], f"+ : {var}_mean"),
                          *self._across_lanes(f"{var}_mean", "+"), *self._rows_of_tile([f"{mean} /= {cols};"]),
                          *self._row_value(var, "0.0f", const=False),
                          *self._loop(pre + [f"{acc} += ({x} - {mean}) * ({x} - {mean});"], f"+ : {var}"),
                          *self._across_lanes(var, "+"),
                          *self._rows_of_tile([f"{acc} /= {cols} - {literal(correction)};"])]
        else:
            start = {"sum": "0.0f", "mean": "0.0f", "prod": "1.0f", "amax": "(-INFINITY)", "amin": "INFINITY"}[op]
            step = {"sum": f"{acc} += {x};", "mean": f"{acc} += {x};", "prod": f"{acc} *= {x};",
                    "amax": f"{acc} = fmaxf({acc}, {x});", "amin": f"{acc} = fminf({acc}, {x});"}[op]
            combine = {"sum": "+", "mean": "+", "prod": "*", "amax": "max", "amin": "min"}[op]
            if op in ("amax", "amin") and self.language == "cpp" and nan_left_to_a_sum(node):
                # a compare that skips a NaN: the outputs it reaches are NaN through the row's sum anyway
                stmts += [*self._row_value(var, start, const=False),
                          *self._loop(pre + [f"{acc} = {x} {'>' if op == 'amax' else '<'} {acc} ? {x} : {acc};"],
                                      f"{combine} : {var}")]
                nan_flag = False
            elif op in ("amax", "amin") and self.language == "cpp":
                # a compare, and a NaN seen on the way makes the result NaN, as in torch: a SIMD loop of fmaxf ran
                # 12x slower (the lowered log_softmax's max), and fmaxf drops a NaN
                cmp, nan = (">" if op == "amax" else "<"), self._ref(f"{var}_nan")
                stmts += [*self._row_value(var, start, const=False),
                              *self._row_value(f"{var}_nan", "0", "int", const=False),
                              *self._loop(pre + [f"{acc} = {x} {cmp} {acc} ? {x} : {acc};", f"{nan} |= {x} != {x};"],
                                          f"{combine} : {var}", f"| : {var}_nan"),
                              *self._rows_of_tile([f"if ({nan}) {acc} = NAN;"])]
            elif op in ("amax", "amin") and not nan_left_to_a_sum(node):  # CUDA: a NaN seen makes the result NaN
                keep = (MAX_NAN if op == "amax" else MIN_NAN).format(x, acc)
                stmts += [*self._row_value(var, start, const=False), *self._loop(pre + [f"{acc} = {keep};"]),
                          *self._across_lanes(var, f"{combine}_nan")]
            else:
                stmts += [*self._row_value(var, start, const=False), *self._loop(pre + [step], f"{combine} : {var}"),
                              *self._across_lanes(var, combine)]
            if op == "mean":
                stmts += self._rows_of_tile([f"{acc} /= {cols};"])
        self._reduction(op, var, stmts, nan_flag)
        self.define(node, "row", acc)

    def _reduction(self, op: str, var: str, stmts: list[str], nan_flag: bool = True) -> None:
        """A row's reduction: in C++ along the last dimension a helper function that returns it, called from the
        row's loop (``reduction_helper``); inline otherwise (a tile's arrays, a warp's lanes)."""
        if self.language != "cpp" or self.tiled or self.warp:
            self.body += stmts
            return
        helper, call = reduction_helper(op, var, stmts, self.args, self.body, self.helpers, nan_flag)
        self.helpers.append(helper)
        self.body.append(call)

    def store(self, out: str, node) -> None:
        self.stores.append((out, node))

    def kernel(self, scaffold: Scaffold) -> str:
        full = [(o, n) for o, n in self.stores if self.kind[n] == "full"]
        row = [(o, n) for o, n in self.stores if self.kind[n] == "row"]
        body = list(self.body)
        if full:
            body += self._loop(self._inner_statements([n for _, n in full]) +
                               [f"{o}[{self.layout.index('full')}] = {self.expr[n]};" for o, n in full],
                               in_order=self.scans)
        stores = [f"{o}[r] = {self.expr[n]};" for o, n in row]
        body += [f"if (lane == 0) {s}" for s in stores] if self.warp else self._rows_of_tile(stores)
        last = self.layout.last
        indent = " " * (8 if last else 12) if scaffold.language == "cpp" else " " * 8
        row_body = "\n".join(indent + s for s in body)
        if self.reduces:
            head = ("// The reference lowered to plain loops: rows in parallel; per row, one pass per reduction, then the "
                    "outputs.\n// Correct by construction, not fast: each reduction reads the row again.\n")
        elif self.scans:
            head = ("// The reference lowered to plain loops: rows in parallel; per row, one loop in order over the "
                    "values,\n// a running sum carried from each value to the next. Correct by construction.\n")
        else:  # said of an elementwise chain, "per reduction" had the model add sums the reference has not
            head = ("// The reference lowered to plain loops: rows in parallel; every output value computed from the "
                    "inputs at\n// its own position, in one pass. Correct by construction; no reduction.\n")
        head += self.layout.constants()
        if scaffold.language == "cpp":
            return cpp_rows_kernel(scaffold, head, self.helpers, row_body, None if last else self.layout.inner)
        return rows_kernel(scaffold, head, row_body, last)

