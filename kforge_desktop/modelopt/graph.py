"""Trace a model into "units": modules whose forward torch.fx could capture as a graph.

Why torch.fx (see docs/design.md, "Whole models"): a traced graph names every call at the level the
user wrote it (``x.pow(2)``, ``torch.softmax``, ``self.norm``), keeps the module path of each node,
turns a group of nodes back into readable Python (the target's problem source), and can be
rewritten so that one node calls a kernel instead of the group (integration) — all with plain
torch. Tracing fails on data-dependent Python control flow; then the module's children are traced
one by one and the untraceable module's own code keeps running eagerly (its time is reported as
untraced).

Known leaf modules (Linear, Conv, norms, activations, pooling, Embedding, Dropout) are rewritten to
their functional form with their parameters as graph inputs, so a target made from them is a pure
function of tensors: its problem is self-contained and its kernel gets the weights as arguments.
"""

from __future__ import annotations

import hashlib
import inspect
from dataclasses import dataclass, field

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Unit:
    """One traced module: ``gm`` is its functional graph (shares the module's parameters)."""

    path: str  # module path inside the model ("" for the root)
    module: nn.Module
    gm: fx.GraphModule
    fingerprint: str  # hash of the plain trace: proves at patch time that the module is the same code
    signature: inspect.Signature = field(repr=False)

    def qualify(self, local: str) -> str:
        """A module path inside this unit, as a path inside the model."""
        if not local:
            return self.path or "(model)"
        return f"{self.path}.{local}" if self.path else local


def trace_units(model: nn.Module) -> tuple[list[Unit], list[str]]:
    """The traced units of ``model`` and the module paths that could not be traced (their own
    forward code runs eagerly; their children are units where they can be traced)."""
    units: list[Unit] = []
    untraced: list[str] = []

    def visit(path: str, module: nn.Module) -> None:
        try:
            gm = fx.symbolic_trace(module)
        except Exception:
            untraced.append(path or "(model)")
            for name, child in module.named_children():
                visit(f"{path}.{name}" if path else name, child)
            return
        fp = hashlib.sha256((type(module).__qualname__ + "\n" + gm.code).encode()).hexdigest()[:16]  # = runtime.fingerprint
        functionalize(gm)
        units.append(Unit(path=path, module=module, gm=gm, fingerprint=fp,
                          signature=inspect.signature(module.forward)))

    visit("", model)
    return units, untraced


# -- leaf modules to their functional form ----------------------------------------------------------


def _attr(graph: fx.Graph, gm: fx.GraphModule, target: str, name: str) -> fx.Node | None:
    mod = gm.get_submodule(target)
    if getattr(mod, name, None) is None:
        return None
    return graph.get_attr(f"{target}.{name}")


def _functional_call(graph: fx.Graph, gm: fx.GraphModule, node: fx.Node):
    """(function, args, kwargs) equivalent to calling the leaf module of ``node`` in eval mode, or
    None when the module is not one we know (it stays a module call)."""
    mod = gm.get_submodule(node.target)
    t = node.target
    x = node.args[0] if node.args else None
    if len(node.args) != 1 or node.kwargs:
        return None
    a = lambda name: _attr(graph, gm, t, name)  # noqa: E731
    if isinstance(mod, nn.Linear):
        return F.linear, (x, a("weight"), a("bias")), {}
    conv = {nn.Conv1d: F.conv1d, nn.Conv2d: F.conv2d, nn.Conv3d: F.conv3d}.get(type(mod))
    if conv is not None and mod.padding_mode == "zeros":
        return conv, (x, a("weight"), a("bias"), mod.stride, mod.padding, mod.dilation, mod.groups), {}
    if isinstance(mod, nn.modules.batchnorm._BatchNorm) and mod.track_running_stats and not mod.training:
        if mod.running_mean is None:
            return None
        return F.batch_norm, (x, a("running_mean"), a("running_var"), a("weight"), a("bias"), False, 0.0, mod.eps), {}
    if isinstance(mod, nn.LayerNorm):
        return F.layer_norm, (x, tuple(mod.normalized_shape), a("weight"), a("bias"), mod.eps), {}
    if isinstance(mod, nn.GroupNorm):
        return F.group_norm, (x, mod.num_groups, a("weight"), a("bias"), mod.eps), {}
    if hasattr(nn, "RMSNorm") and isinstance(mod, nn.RMSNorm):
        return F.rms_norm, (x, tuple(mod.normalized_shape), a("weight"), mod.eps), {}
    simple = {nn.ReLU: F.relu, nn.SiLU: F.silu, nn.Sigmoid: torch.sigmoid, nn.Tanh: torch.tanh,
              nn.Mish: F.mish, nn.Hardswish: F.hardswish, nn.Hardsigmoid: F.hardsigmoid, nn.ReLU6: F.relu6}
    if type(mod) in simple:
        return simple[type(mod)], (x,), {}
    if isinstance(mod, nn.GELU):
        return F.gelu, (x,), {"approximate": mod.approximate}
    if isinstance(mod, nn.LeakyReLU):
        return F.leaky_relu, (x, mod.negative_slope), {}
    if isinstance(mod, nn.ELU):
        return F.elu, (x, mod.alpha), {}
    if isinstance(mod, nn.Softplus):
        return F.softplus, (x, mod.beta, mod.threshold), {}
    if isinstance(mod, (nn.Softmax, nn.LogSoftmax)) and mod.dim is not None:
        return (torch.softmax if isinstance(mod, nn.Softmax) else torch.log_softmax), (x,), {"dim": mod.dim}
    maxp = {nn.MaxPool1d: F.max_pool1d, nn.MaxPool2d: F.max_pool2d, nn.MaxPool3d: F.max_pool3d}.get(type(mod))
    if maxp is not None and not mod.return_indices:
        return maxp, (x, mod.kernel_size, mod.stride, mod.padding, mod.dilation), {"ceil_mode": mod.ceil_mode}
    avgp = {nn.AvgPool1d: F.avg_pool1d, nn.AvgPool2d: F.avg_pool2d, nn.AvgPool3d: F.avg_pool3d}.get(type(mod))
    if avgp is not None:
        kw = {"ceil_mode": mod.ceil_mode, "count_include_pad": mod.count_include_pad}
        if getattr(mod, "divisor_override", None) is not None:
            kw["divisor_override"] = mod.divisor_override
        return avgp, (x, mod.kernel_size, mod.stride, mod.padding), kw
    adap = {nn.AdaptiveAvgPool1d: F.adaptive_avg_pool1d, nn.AdaptiveAvgPool2d: F.adaptive_avg_pool2d,
            nn.AdaptiveAvgPool3d: F.adaptive_avg_pool3d}.get(type(mod))
    if adap is not None:
        return adap, (x, mod.output_size), {}
    if isinstance(mod, nn.Embedding) and mod.max_norm is None:
        return F.embedding, (x, a("weight"), mod.padding_idx), {}
    if isinstance(mod, nn.Flatten):
        return torch.flatten, (x, mod.start_dim, mod.end_dim), {}
    return None


def functionalize(gm: fx.GraphModule) -> None:
    """Rewrite known leaf-module calls in place (eval semantics); identity modules are dropped."""
    graph = gm.graph
    for node in list(graph.nodes):
        if node.op != "call_module":
            continue
        mod = gm.get_submodule(node.target)
        if isinstance(mod, (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.Identity)) and not mod.training:
            if len(node.args) == 1 and isinstance(node.args[0], fx.Node):
                node.replace_all_uses_with(node.args[0])
                graph.erase_node(node)
            continue
        if getattr(mod, "inplace", False):
            src = node.args[0] if node.args else None
            if not isinstance(src, fx.Node) or len(src.users) != 1:
                continue  # an in-place op whose input is read elsewhere: its mutation matters
        with graph.inserting_before(node):
            call = _functional_call(graph, gm, node)
            if call is None:
                continue
            fn, args, kwargs = call
            new = graph.call_function(fn, args, kwargs)
        stack = dict(node.meta.get("nn_module_stack", {}))
        stack[node.target] = (node.target, type(mod))
        new.meta["nn_module_stack"] = stack
        for arg in new.args:
            if isinstance(arg, fx.Node) and arg.op == "get_attr":
                arg.meta["nn_module_stack"] = stack
        node.replace_all_uses_with(new)
        graph.erase_node(node)
    graph.lint()
    gm.recompile()


def module_path(node: fx.Node) -> str:
    """Where in the unit ``node`` is called: the innermost module on its stack."""
    if node.op == "call_module":
        return str(node.target)
    stack = node.meta.get("nn_module_stack")
    if stack:
        return str(list(stack.values())[-1][0])
    return ""
