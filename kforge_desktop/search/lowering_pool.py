"""A pooling lowered to plain loops: a forward that is one max or average pooling (1-D or 2-D, padding,
stride, dilation, ceil mode, divisor) becomes one loop over each output value's window, in the scaffold's
signature (C++ with the planes in parallel, or CUDA with a thread an output value). In C++ the outputs whose
window lies inside the input along the width run in a SIMD loop with no bounds to check: a max pooling's maximum
as a select (a branch a value mispredicted half the time: 0.13x eager on an overlapping pooling), an average
pooling's window a loop of known length (with its bounds checked, a moving average of window 5 took 0.95 ms,
2.9x eager, 19x the time of reading its input and writing its output: benchmarks/headroom.py)."""

from __future__ import annotations

import math
import operator

import torch

from .lowering_cuda import pool_kernel
from .lowering_trace import PARALLEL, Unsupported, literal, op_name
from .scaffold import Scaffold

POOLS = {"max_pool2d_with_indices", "avg_pool2d"}  # 1-D poolings reach these too, as a window of height 1
# views that keep a contiguous tensor's values where they are (a pooling's input and output pass through them)
PLAIN_VIEWS = {"view", "_unsafe_view", "reshape", "unsqueeze", "squeeze", "clone", "alias", "detach", "contiguous"}


def lower_pool(graph, tensors: list, named: list, scaffold: Scaffold) -> str:
    """A forward that is one pooling of its input over the last two dimensions (a 1-D pooling is a window
    one high), viewed in and out: one loop over the window per output value, as torch computes it."""
    if len(tensors) != 1 or named or tensors[0].dtype != torch.float32:
        raise Unsupported("a pooling of more than one float32 input")
    pool = None
    for node in graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        op = op_name(node)[1]
        if op in POOLS and pool is None:
            pool = node
        elif op not in PLAIN_VIEWS:
            raise Unsupported(f"{op} beside a pooling")

    def source(n):  # through plain views (and the pooling's value, element 0 of its pair) to where n comes from
        while n.op == "call_function" and (n.target is operator.getitem or op_name(n)[1] in PLAIN_VIEWS):
            if n.target is operator.getitem and n.args[1] != 0:
                raise Unsupported("a pooling's indices")
            n = n.args[0]
        return n

    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    results = [n for n in graph.nodes if n.op == "output"][0].args[0]
    results = list(results) if isinstance(results, (tuple, list)) else [results]
    outputs = [a for a in scaffold.args if a.role == "output"]
    inputs = [a for a in scaffold.args if a.role == "input"]
    if len(results) != 1 or len(outputs) != 1 or len(inputs) != 1 or source(pool.args[0]) is not placeholders[0] \
            or not isinstance(results[0], torch.fx.Node) or source(results[0]) is not pool:
        raise Unsupported("the pooling is not the input's, or not the output")
    if pool.kwargs:
        raise Unsupported("a pooling's arguments by name")
    src = tuple(pool.args[0].meta["val"].shape)
    dst = tuple((pool.meta["val"][0] if op_name(pool)[1] != "avg_pool2d" else pool.meta["val"]).shape)
    if len(src) < 3:
        raise Unsupported("a pooling without a batch or channel dimension")
    args = list(pool.args) + [None] * 8

    def pair(v, default):
        v = default if v in (None, []) else v
        v = [v] if isinstance(v, int) else list(v)
        return (v * 2)[:2] if len(v) == 1 else v

    kernel = pair(args[1], None)
    stride, padding = pair(args[2], kernel), pair(args[3], 0)
    average = op_name(pool)[1] == "avg_pool2d"
    dilation = [1, 1] if average else pair(args[4], 1)
    include_pad = True if args[5] is None else bool(args[5])
    divisor = args[6] if average else None
    x, out = inputs[0].name, outputs[0].name
    planes, (h, w), (oh, ow) = math.prod(src[:-2]), src[-2:], dst[-2:]
    tall = h != 1 or oh != 1 or kernel[0] != 1  # a 1-D pooling has no height loop

    lines = [f"// {'Average' if average else 'Max'} pooling lowered to plain loops: each output value reads its "
             "window of the input.", "// Correct by construction, not fast: neighbouring windows read the same "
             "values again.",
             f"constexpr int64_t lplanes = {planes}, lh = {h}, lw = {w}, loh = {oh}, low = {ow};  "
             "// planes (all but the last two dims), input and output height and width" if tall else
             f"constexpr int64_t lplanes = {planes}, lw = {w}, low = {ow};  // rows (all but the last dim), input and "
             "output length"]
    # the dimensions the window moves along: (output index, input index, kernel, stride, padding, dilation, length)
    dims = ([("p", "ih", kernel[0], stride[0], padding[0], dilation[0], "lh")] if tall else []) + \
        [("q", "iw", kernel[1], stride[1], padding[1], dilation[1], "lw")]
    element = f"{x}[(r * lh + ih) * lw + iw]" if tall else f"{x}[r * lw + iw]"
    body = [f"const int64_t {i}0 = {o} * {st} - {pad};" for o, i, _k, st, pad, _d, _n in dims]
    inside = None  # in C++: the body of an output whose window lies inside the input along the width
    if average:
        inside = list(body)  # its window's width bounds are known: a loop of k, no bounds to check
        for _o, i, k, _st, pad, _d, n in dims:
            bounds = [f"const int64_t {i}1 = ({i}0 + {k} < {n} + {pad}) ? {i}0 + {k} : {n} + {pad};",
                      f"const int64_t {i}s = {i}0 > 0 ? {i}0 : 0, {i}e = {i}1 < {n} ? {i}1 : {n};  // inside the input"]
            body += bounds
            inside += bounds if i != "iw" else [f"const int64_t {i}1 = {i}0 + {k}, {i}s = {i}0, {i}e = {i}1;"]
        shared = len(body)  # from here on, the sum and the division are the same for both
        body.append("float sum = 0.0f;")
        close = []
        for depth, (_o, i, *_rest) in enumerate(dims):
            body.append("    " * depth + f"for (int64_t {i} = {i}s; {i} < {i}e; ++{i}) {{")
            close.insert(0, "    " * depth + "}")
        body += ["    " * len(dims) + f"sum += {element};", *close]
        if divisor:
            body.append(f"const float v = sum / {literal(divisor)};")
        elif include_pad:
            body.append("const float v = sum / (float)(" + " * ".join(f"({i}1 - {i}0)" for _o, i, *_r in dims)
                        + ");  // the window, padding included")
        else:
            body.append("const float v = sum / (float)(" + " * ".join(f"({i}e - {i}s)" for _o, i, *_r in dims)
                        + ");  // padding not counted")
        inside += body[shared:]
    store = f"{out}[(r * loh + p) * low + q] = v;" if tall else f"{out}[r * low + q] = v;"
    if average:
        inside = [*inside, store] if scaffold.language == "cpp" else None
    else:
        def window(checked_w: bool) -> list[str]:
            lines, close = ["float v = -INFINITY;"], []
            for depth, (_o, i, k, _st, _pad, dil, n) in enumerate(dims):
                ind = "    " * depth
                j = "j" if i == "iw" else "i"
                lines += [ind + f"for (int64_t {j} = 0; {j} < {k}; ++{j}) {{",
                          ind + f"    const int64_t {i} = {i}0 + {j}{f' * {dil}' if dil != 1 else ''};"]
                if i != "iw" or checked_w:
                    lines.append(ind + f"    if ({i} < 0 || {i} >= {n}) continue;")
                close.insert(0, ind + "}")
            ind = "    " * len(dims)
            return lines + [ind + f"const float e = {element};",
                            ind + "v = (e > v) | (e != e) ? e : v;  // a NaN wins, as in torch; a select, not a branch",
                            *close]

        if scaffold.language == "cpp":
            inside = [*body, *window(False), store]
        body += window(True)
    body.append(store)
    head = "\n".join(lines) + "\n"
    if scaffold.language == "cpp":
        loops = ["for (int64_t r = 0; r < lplanes; ++r) {"] + (["for (int64_t p = 0; p < loh; ++p) {"] if tall else [])
        text = [PARALLEL.format(" collapse(2)" if tall else "").rstrip("\n")]
        text += [" " * 4 * (i + 1) + s for i, s in enumerate(loops)]
        ind = " " * 4 * (len(loops) + 1)
        if inside is None:
            text += [ind + "for (int64_t q = 0; q < low; ++q) {", *[ind + "    " + s for s in body], ind + "}"]
        else:
            # the outputs whose window lies inside the input along the width (q in [lqs, lqe)) in a SIMD loop with
            # no bounds to check; those whose window crosses the padding or the end (left of lqs, then right of
            # lqe) in a loop that checks them
            _o, _i, k, st, pad, dil, _n = dims[-1]
            qs = min(-(-pad // st), ow)
            last = w - 1 + pad - (k - 1) * dil  # q * st may reach this
            qe = max(qs, min(ow, last // st + 1 if last >= 0 else 0))
            head += f"constexpr int64_t lqs = {qs}, lqe = {qe};  // the outputs whose window lies inside the input\n"
            text += [ind + "#pragma omp simd", ind + "for (int64_t q = lqs; q < lqe; ++q) {",
                     *[ind + "    " + s for s in inside], ind + "}",
                     ind + "for (int64_t edge = 0; edge < 2; ++edge) {  // left of lqs, then right of lqe",
                     ind + "    for (int64_t q = edge ? lqe : 0; q < (edge ? low : lqs); ++q) {",
                     *[ind + "        " + s for s in body], ind + "    }", ind + "}"]
        text += [" " * 4 * (i + 1) + "}" for i in reversed(range(len(loops)))]
        return head + scaffold.signature() + " {\n" + "\n".join(text) + "\n}\n"
    at = ["const int64_t q = t % low, p = t / low % loh, r = t / (loh * low);"] if tall else \
        ["const int64_t q = t % low, r = t / low;"]
    return pool_kernel(scaffold, head, f"lplanes * {'loh * ' if tall else ''}low", at, body)
