"""How an output's values index the input, for the prompt's list of arguments.

The default model indexes flat arrays itself; where an output is not "one value per input value" or
"one per row", it kept its row loops and wrote past the smaller output. For two layouts the scaffold
can state the exact index formula from what it measured: a reduction over one dimension (the output
is the input with that dimension dropped or kept as 1) and a pooling along the last dimension (its
window, stride and padding recorded from the operator's arguments, ``pool_settings``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .scaffold import Scaffold

# pooling along the last dimension (1d pooling runs as 2d with a window of height 1): its window, recorded
# as ("pool_kernel", 3), ("pool_stride", 2), ("pool_padding", 0) and, for averages, ("pool_count_pad", 1)
POOL_OPS = {"max_pool1d", "avg_pool1d", "max_pool1d_with_indices", "max_pool2d", "max_pool2d_with_indices",
            "avg_pool2d"}


def pool_settings(op: str, args, kwargs) -> list[tuple[str, int]]:
    """The window of a pooling along the last dimension only (every other window size 1); none for
    another pooling (a 3 x 3 window) or a dilated one."""
    def last(v, default):
        if isinstance(v, int):
            return [v]
        return [int(e) for e in v] if isinstance(v, (list, tuple)) and v else default
    kernel = last(args[1] if len(args) > 1 else kwargs.get("kernel_size"), None)
    if kernel is None or any(k != 1 for k in kernel[:-1]):
        return []
    stride = last(args[2] if len(args) > 2 else kwargs.get("stride"), kernel)
    padding = last(args[3] if len(args) > 3 else kwargs.get("padding"), [0])
    ceil = args[5 if op.startswith("max") else 4] if len(args) > (5 if op.startswith("max") else 4) else False
    if op.startswith("max") and len(args) > 4 and any(d != 1 for d in last(args[4], [1])):
        return []  # dilation
    out = [("pool_kernel", kernel[-1]), ("pool_stride", stride[-1]), ("pool_padding", padding[-1]),
           ("pool_ceil", int(bool(ceil)))]
    if op.startswith("avg"):
        out.append(("pool_count_pad", int(bool(args[5])) if len(args) > 5 else 1))
    return out


def reduced_dim(scaffold: Scaffold) -> int | None:
    """The dimension of the first input that the one output drops (or keeps as size 1): ``x.mean(dim=1)``
    of [8, 32, 64] is [8, 64] (dim 1); None when the output is not the input with one dimension reduced."""
    inputs = [a.name for a in scaffold.args if a.role == "input"]
    if len(scaffold.outputs) != 1 or not inputs:
        return None
    x, out = scaffold.shapes.get(inputs[0]), scaffold.shapes.get(scaffold.outputs[0])
    if not x or out is None or len(x) < 2:
        return None
    found = {k for k in range(len(x)) if x[k] > 1 and (list(out) == x[:k] + x[k + 1:] or
                                                       list(out) == x[:k] + [1] + x[k + 1:])}
    return found.pop() if len(found) == 1 else None


def reduction_line(scaffold: Scaffold) -> str:
    """For a reduction over one dimension, how an output value's inputs are laid out (the indexing the
    model got wrong on reductions over a middle dimension); "" for anything else."""
    k = reduced_dim(scaffold)
    if k is None:
        return ""
    x = next(a.name for a in scaffold.args if a.role == "input")
    dims, out = scaffold.shapes[x], scaffold.outputs[0]
    n, outer, inner = dims[k], math.prod(dims[:k]), math.prod(dims[k + 1:])
    if inner == 1:
        return (f"Reduction over the last dimension of {x} (length {n}): {out}[r] combines the {n} values "
                f"{x}[r * {n} + c], c = 0..{n - 1}, for each of the {outer} values r.")
    return (f"Reduction over dimension {k} of {x} (length {n}; not the last one): with outer = {outer} (the "
            f"dimensions before it) and inner = {inner} (those after it), {out}[o * {inner} + i] combines the {n} "
            f"values {x}[(o * {n} + j) * {inner} + i], j = 0..{n - 1}. Values with consecutive i are adjacent in "
            "memory: keep i in the innermost loop (accumulate a row of inner partial results).")


def pooling_line(scaffold: Scaffold) -> str:
    """For a pooling along the last dimension, which input values each output value takes; ""
    otherwise."""
    s = {k: v for k, v in scaffold.op_args if isinstance(k, str) and k.startswith("pool_")}
    inputs = [a.name for a in scaffold.args if a.role == "input"]
    if "pool_kernel" not in s or len(scaffold.outputs) != 1 or not inputs:
        return ""
    x, out = inputs[0], scaffold.outputs[0]
    dims, odims = scaffold.shapes.get(x), scaffold.shapes.get(out)
    if not dims or not odims or list(odims[:-1]) != list(dims[:-1]):
        return ""
    n, m, rows = dims[-1], odims[-1], math.prod(dims[:-1])
    k, st, pad = s["pool_kernel"], s["pool_stride"], s["pool_padding"]
    avg = any(op.startswith("avg") for op in scaffold.aten_ops)
    what = "mean" if avg else "max"
    start = f"j * {st} - {pad} + t" if pad else f"j * {st} + t"
    text = (f"Pooling along the last dimension of {x} (length {n}), window {k}, stride {st}, padding {pad}: "
            f"{out}[r * {m} + j] is the {what} of {x}[r * {n} + {start}] over t = 0..{k - 1}, for r < {rows} "
            f"and j < {m}.")
    if pad and not avg:
        text += f" Window positions outside 0..{n - 1} are padding: skip them."
    elif pad:
        text += (f" Window positions outside 0..{n - 1} are padding: they add 0, and the mean divides by {k} always."
                 if s.get("pool_count_pad", 1) else f" Window positions outside 0..{n - 1} are padding: leave them "
                 "out, and divide by the number of positions inside.")
    elif avg:
        text += f" The mean divides by {k}."
    return text
