"""What the lowering reads a reference as: its forward traced into ATen operators (composites decomposed),
and the small pieces the row and pooling writers share (``lowering.py``, ``lowering_pool.py``)."""

from __future__ import annotations

import math

import torch

from ..problem.problem import Problem

aten = torch.ops.aten

# composite operators decomposed into the elementwise ones and reductions below
DECOMPOSE = ("_log_softmax", "_softmax", "gelu", "leaky_relu", "linalg_vector_norm", "native_layer_norm", "silu",
             "softplus", "hardswish", "hardsigmoid", "elu", "logsumexp", "mish", "hardtanh", "logit", "log_sigmoid_forward",
             "relu6", "celu", "selu", "glu", "var_mean", "var")

# C++: the rows (a pooling's planes) are independent, each writes only its own outputs: in parallel from the start
PARALLEL = "    #pragma omp parallel for{} schedule(static)\n"


class Unsupported(Exception):
    """The reference has an operator or a shape the lowering does not write."""


def literal(v) -> str:
    """A number (or bool) as a C literal of type float: ``0.5f``, ``INFINITY``, ``NAN``."""
    if isinstance(v, bool):
        return "true" if v else "false"
    v = float(v)
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "(-INFINITY)"
    return f"{v!r}f"


def trace(problem: Problem):
    """The reference's forward as a graph of ATen operators (composites decomposed), the forward's tensor
    inputs in order, and the module's (name, tensor) parameters and buffers (the graph's later inputs)."""
    from torch._decomp import core_aten_decompositions, get_decompositions
    from torch.fx.experimental.proxy_tensor import make_fx

    mod = problem.load_module()
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs()).eval()
    inputs = list(mod.get_inputs())
    named = [(n, p) for n, p in list(model.named_parameters()) + list(model.named_buffers())]
    slots = [i for i, v in enumerate(inputs) if isinstance(v, torch.Tensor)]

    def forward(*tensors):
        args = list(inputs)
        for i, t in zip(slots, tensors[:len(slots)]):
            args[i] = t
        state = {n: t for (n, _), t in zip(named, tensors[len(slots):])}
        return torch.func.functional_call(model, state, tuple(args))

    table = dict(core_aten_decompositions())
    table.update(get_decompositions([getattr(aten, op) for op in DECOMPOSE if hasattr(aten, op)]))
    with torch.no_grad():
        graph = make_fx(forward, decomposition_table=table)(*[inputs[i] for i in slots], *[p for _, p in named])
    return graph.graph, [inputs[i] for i in slots], named


def op_name(node) -> tuple[str, str]:
    """(namespace, base name) of a call: ("aten", "add") for aten.add.Tensor."""
    target = node.target
    packet = getattr(target, "overloadpacket", None)
    name = getattr(packet, "__name__", None) or str(target)
    space = getattr(target, "namespace", "aten")
    return space, name.split(".")[-1]


def reduced_dims(node) -> list[int]:
    """The dimensions longer than 1 that a reduction node runs over (of its ``dims`` argument; none given: none)."""
    shape = tuple(node.args[0].meta["val"].shape)
    dims = node.args[1] if len(node.args) > 1 else []
    dims = [dims] if isinstance(dims, int) else list(dims or [])
    return [d % len(shape) for d in dims if shape and shape[d % len(shape)] != 1]
